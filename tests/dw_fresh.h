/*
 * dw_fresh.h -- set_dw_fresh (backend.h) on any table: every entry of the
 * matmul_bwd family (matmul_bwd, _w16, _a16, _d16, _o16, _head16,
 * matmul_dgelu_bwd, _w16, _a16, _d16, _o16; those the table has) with its
 * dw inside the range set, not at its start: dw written, not read (NaN
 * there before), bitwise the entry on a zeroed dw but that -0.0 reads as
 * +0.0; dinp (or dpre, its bf16 copy), dbias and dpre_bias bitwise the
 * entry's without the range; a dw past the range's end added into as
 * without it, and after set_dw_fresh(NULL, 0) too; dw_fresh (where the
 * table has it) 1 inside the range, 0 before it, past it and after
 * set_dw_fresh(NULL, 0).  fp32 matmul mode: the
 * fp32 entries; bf16 mode: all.  Memory through alloc / to_device / to_host
 * only.  Included by test_kernels (cpu), test_strict (cpu-strict) and
 * test_cuda (cuda, on a GPU or the simulator).
 */
#ifndef ZT_TESTS_DW_FRESH_H
#define ZT_TESTS_DW_FRESH_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tap.h"

/* the operands of one call [N, C] -> [N, OC]: device memory */
typedef struct dwf_ops {
    int N, C, OC;
    float *dout, *inp, *w, *pre, *tmp;
    uint16_t *dout16, *inp16, *w16, *pre16, *dinp16;
} dwf_ops;

static void *dwf_dev(const zt_backend *be, size_t bytes) {
    void *d = be->alloc(bytes ? bytes : 4);
    if (!d) {
        fprintf(stderr, "alloc of %zu bytes failed\n", bytes);
        exit(99);
    }
    return d;
}
/* a device copy of n values in [-1, 1) (and its bf16 bits in *d16 when asked) */
static float *dwf_vals(const zt_backend *be, size_t n, unsigned seed, uint16_t **d16) {
    float *h = malloc(n * sizeof *h);
    if (!h) exit(99);
    uint32_t x = 2463534242u + seed * 2654435761u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        h[i] = (float)((double)(x >> 8) / 8388608.0 - 1.0);
    }
    float *d = dwf_dev(be, n * sizeof *d);
    be->to_device(d, h, n * sizeof *d);
    if (d16) {
        *d16 = dwf_dev(be, n * 2);
        be->to_bf16(*d16, d, n);
    }
    free(h);
    return d;
}
/* entry k (0..10, above's order) with dw, dbias (and dinp / dpre,
 * dpre_bias: NULL where the entry writes bf16); 0 when the table lacks it */
static int dwf_call(const zt_backend *be, int k, const dwf_ops *o, float *dinp, float *dw, float *db,
                    float *dpb) {
    const int N = o->N, C = o->C, OC = o->OC;
    switch (k) {
    case 0: be->matmul_bwd(dinp, dw, db, o->dout, o->inp, o->w, N, C, OC); return 1;
    case 1:
        if (!be->matmul_bwd_w16) return 0;
        be->matmul_bwd_w16(dinp, dw, db, o->dout, o->inp, o->w16, N, C, OC);
        return 1;
    case 2:
        if (!be->matmul_bwd_a16) return 0;
        be->matmul_bwd_a16(dinp, dw, db, o->dout, o->inp16, o->w, NULL, N, C, OC);
        return 1;
    case 3:
        if (!be->matmul_bwd_d16) return 0;
        be->matmul_bwd_d16(dinp, dw, db, o->dout, o->dout16, o->inp, NULL, o->w, NULL, N, C, OC);
        return 1;
    case 4:
        if (!be->matmul_bwd_o16) return 0;
        be->matmul_bwd_o16(o->dinp16, o->tmp, dw, db, o->dout, o->dout16, o->inp, NULL, o->w, NULL, N,
                           C, OC);
        return 1;
    case 5:
        if (!be->matmul_bwd_head16) return 0;
        be->matmul_bwd_head16(dinp, dw, o->dout16, o->inp, NULL, o->w, NULL, N, C, OC);
        return 1;
    case 6:
        if (!be->matmul_dgelu_bwd) return 0;
        be->matmul_dgelu_bwd(dinp, dpb, dw, db, o->dout, o->inp, o->pre, o->w, N, C, OC);
        return 1;
    case 7:
        if (!be->matmul_dgelu_bwd_w16) return 0;
        be->matmul_dgelu_bwd_w16(dinp, dpb, dw, db, o->dout, o->inp, o->pre, o->w16, N, C, OC);
        return 1;
    case 8:
        if (!be->matmul_dgelu_bwd_a16) return 0;
        be->matmul_dgelu_bwd_a16(dinp, dpb, dw, db, o->dout, o->inp16, o->pre, o->w, NULL, N, C, OC);
        return 1;
    case 9:
        if (!be->matmul_dgelu_bwd_d16) return 0;
        be->matmul_dgelu_bwd_d16(dinp, dpb, dw, db, o->dout, o->dout16, o->inp, NULL, o->pre, o->w,
                                 NULL, N, C, OC);
        return 1;
    default:
        if (!be->matmul_dgelu_bwd_o16) return 0;
        be->matmul_dgelu_bwd_o16(o->dinp16, o->tmp, dpb, dw, db, o->dout, o->dout16, o->inp, NULL,
                                 o->pre16, o->w, NULL, N, C, OC);
        return 1;
    }
}
/* a[n], b[n] the same bits, or both zeros */
static int dwf_same0(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        if (x != y && ((x | y) & 0x7fffffffu)) return 0;
    }
    return 1;
}
static void *dwf_host(const zt_backend *be, const void *d, size_t bytes) {
    void *h = calloc(1, bytes ? bytes : 4);
    if (!h) exit(99);
    if (bytes) be->to_host(h, d, bytes);
    return h;
}

static void dw_fresh_checks(const zt_backend *be, const char *what, int N, int C, int OC) {
    static const char *names[] = {"matmul_bwd", "matmul_bwd_w16", "matmul_bwd_a16", "matmul_bwd_d16",
                                  "matmul_bwd_o16", "matmul_bwd_head16", "matmul_dgelu_bwd",
                                  "matmul_dgelu_bwd_w16", "matmul_dgelu_bwd_a16",
                                  "matmul_dgelu_bwd_d16", "matmul_dgelu_bwd_o16"};
    if (!be->set_dw_fresh) {
        tap_ok(0, "%s: set_dw_fresh present", what);
        return;
    }
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC, pad = 64;
    dwf_ops o = {N, C, OC, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    o.dout = dwf_vals(be, no, 1, &o.dout16);
    o.inp = dwf_vals(be, ni, 2, &o.inp16);
    o.w = dwf_vals(be, nw, 3, &o.w16);
    o.pre = dwf_vals(be, ni, 4, &o.pre16);
    o.tmp = dwf_dev(be, ni * 4);
    o.dinp16 = dwf_dev(be, ni * 2);
    /* dw `pad` floats into its block, the block's last `pad` after it */
    float *blk = dwf_dev(be, (nw + 2 * pad) * 4), *dw = blk + pad;
    float *dinp = dwf_dev(be, ni * 4), *db = dwf_dev(be, OC * 4), *dpb = dwf_dev(be, C * 4);
    float *start = dwf_vals(be, nw, 5, NULL);
    const size_t nn = nw > ni ? nw : ni;
    float *nan = malloc(nn * 4);
    if (!nan) exit(99);
    memset(nan, 0xff, nn * 4);   /* (a NaN every element) */
    for (int mode = 0; mode < 2; mode++) {
        be->set_matmul_precision(mode ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32);
        for (int k = 0; k < 11; k++) {
            if (!mode && k != 0 && k != 6) continue;   /* (the 16-bit entries: bf16 mode) */
            const int o16 = k == 4 || k == 10, dg = k >= 6;
            const size_t nd = o16 ? ni * 2 : ni * 4;   /* dinp's bytes (o16: dinp16) */
            /* the references: dw zeroed; dw = start */
            be->zero(dw, nw * 4);
            be->zero(db, OC * 4);
            be->zero(dpb, C * 4);
            if (!dwf_call(be, k, &o, o16 ? NULL : dinp, dw, db, dg ? dpb : NULL)) continue;
            void *rd = dwf_host(be, o16 ? (void *)o.dinp16 : (void *)dinp, nd);
            float *rw = dwf_host(be, dw, nw * 4), *rb = dwf_host(be, db, OC * 4),
                  *rp = dwf_host(be, dpb, C * 4);
            be->copy(dw, start, nw * 4);
            dwf_call(be, k, &o, o16 ? NULL : dinp, dw, db, dg ? dpb : NULL);
            float *rs = dwf_host(be, dw, nw * 4);
            /* fresh: dw NaN before, inside [blk, blk + nw + pad) */
            be->to_device(dw, nan, nw * 4);
            be->zero(db, OC * 4);
            be->zero(dpb, C * 4);
            be->to_device(o16 ? (void *)o.dinp16 : (void *)dinp, nan, nd);
            be->set_dw_fresh(blk, nw + pad);
            dwf_call(be, k, &o, o16 ? NULL : dinp, dw, db, dg ? dpb : NULL);
            be->set_dw_fresh(NULL, 0);
            void *fd = dwf_host(be, o16 ? (void *)o.dinp16 : (void *)dinp, nd);
            float *fw = dwf_host(be, dw, nw * 4), *fb = dwf_host(be, db, OC * 4),
                  *fp = dwf_host(be, dpb, C * 4);
            tap_ok(dwf_same0(fw, rw, nw) && !memcmp(fd, rd, nd) && !memcmp(fb, rb, OC * 4) &&
                       !memcmp(fp, rp, C * 4),
                   "%s %s %s N=%d C=%d OC=%d: dw in the fresh range written, not read (NaN before): "
                   "bitwise on a zeroed dw (-0.0 as +0.0), the other outputs as without",
                   what, names[k], mode ? "bf16" : "fp32", N, C, OC);
            /* outside: dw at the range's end (then unset): added into */
            be->copy(dw, start, nw * 4);
            be->set_dw_fresh(blk + pad + nw, pad);
            dwf_call(be, k, &o, o16 ? NULL : dinp, dw, db, dg ? dpb : NULL);
            be->set_dw_fresh(NULL, 0);
            float *ow = dwf_host(be, dw, nw * 4);
            be->copy(dw, start, nw * 4);
            be->set_dw_fresh(blk, nw + pad);
            be->set_dw_fresh(NULL, 0);
            dwf_call(be, k, &o, o16 ? NULL : dinp, dw, db, dg ? dpb : NULL);
            float *uw = dwf_host(be, dw, nw * 4);
            tap_ok(!memcmp(ow, rs, nw * 4) && !memcmp(uw, rs, nw * 4) && memcmp(rs, rw, nw * 4),
                   "%s %s %s: dw past the range's end, and after set_dw_fresh(NULL, 0): added into "
                   "(bitwise without the range)",
                   what, names[k], mode ? "bf16" : "fp32");
            free(rd); free(rw); free(rb); free(rp); free(rs); free(fd); free(fw); free(fb); free(fp);
            free(ow); free(uw);
        }
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);
    /* dw_fresh: the question moe.c asks for an expert without rows */
    if (be->dw_fresh) {
        be->set_dw_fresh(dw, nw);
        const int in0 = be->dw_fresh(dw), in1 = be->dw_fresh(dw + nw - 1), before = be->dw_fresh(dw - 1),
                  past = be->dw_fresh(dw + nw);
        be->set_dw_fresh(NULL, 0);
        const int unset = be->dw_fresh(dw);
        tap_ok(in0 == 1 && in1 == 1 && before == 0 && past == 0 && unset == 0,
               "%s dw_fresh: 1 at the range's first and last element (%d %d), 0 before it (%d), past it (%d) "
               "and after set_dw_fresh(NULL, 0) (%d)", what, in0, in1, before, past, unset);
    } else {
        tap_skip("dw_fresh", "the table has no dw_fresh");
    }
    be->synchronize();
    const char *e = be->error();
    tap_ok(e == NULL, "%s set_dw_fresh: no backend error recorded%s%s", what, e ? ": " : "", e ? e : "");
    free(nan);
    be->free(o.dout); be->free(o.dout16); be->free(o.inp); be->free(o.inp16); be->free(o.w);
    be->free(o.w16); be->free(o.pre); be->free(o.pre16); be->free(o.tmp); be->free(o.dinp16);
    be->free(blk); be->free(dinp); be->free(db); be->free(dpb); be->free(start);
}
#endif /* ZT_TESTS_DW_FRESH_H */
