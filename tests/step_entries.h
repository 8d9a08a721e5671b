/*
 * step_entries.h -- the entries of the step without host reads (backend.h:
 * sum_to, sumsq_to, nonfinite_to, adamw_multi) against the entries they
 * replace on the SAME backend, bitwise: sum, sumsq (added left to right),
 * nonfinite, and adamw per segment followed by to_bf16 / to_f16.  Works on
 * any table (cpu, cpu-strict, cuda): memory through alloc / to_device /
 * to_host only.  Included by test_kernels (cpu), test_strict (cpu-strict)
 * and test_cuda (cuda, on a GPU or the simulator).
 */
#ifndef ZT_TESTS_STEP_ENTRIES_H
#define ZT_TESTS_STEP_ENTRIES_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tap.h"

static uint64_t se_rng = 0x2545F4914F6CDD1Dull;
static float se_rnd(void) {
    se_rng ^= se_rng << 13;
    se_rng ^= se_rng >> 7;
    se_rng ^= se_rng << 17;
    return (float)((double)(se_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static void *se_dev(const zt_backend *be, const void *h, size_t bytes) {
    void *d = be->alloc(bytes ? bytes : 4);
    if (!d) {
        fprintf(stderr, "alloc of %zu bytes failed\n", bytes);
        exit(99);
    }
    if (h && bytes) be->to_device(d, h, bytes);
    return d;
}
static void *se_host(const zt_backend *be, const void *d, size_t bytes) {
    void *h = calloc(1, bytes ? bytes : 4);
    if (!h) exit(99);
    if (bytes) be->to_host(h, d, bytes);
    return h;
}
static int se_same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* sum_to, sumsq_to and nonfinite_to over nr ranges of one device block
 * (some empty), nr > ZT_CUDA_RED_RANGES (128) where asked */
static void se_reductions(const zt_backend *be, const char *what, int nr) {
    size_t *n = calloc((size_t)nr, sizeof *n), tot = 0;
    for (int r = 0; r < nr; r++) {
        n[r] = r % 7 == 3 ? 0 : r % 5 == 1 ? 70000 + (size_t)r : 1 + (size_t)(r * 37) % 900;
        tot += n[r];
    }
    float *x = malloc(tot * sizeof *x);
    for (size_t i = 0; i < tot; i++) x[i] = se_rnd() * 3.0f;
    x[17] = INFINITY;      /* non-finite values, counted; the sums skip the ranges holding them */
    if (!(n[0] == 1 && n[1] > 17 && n[2] > 0)) exit(99);
    x[tot - 2] = NAN;
    float *dx = se_dev(be, x, tot * sizeof *x);
    const float **xs = calloc((size_t)nr, sizeof *xs);
    size_t off = 0;
    int first_nf = -1, last_nf = -1;
    for (int r = 0; r < nr; r++) {
        xs[r] = dx + off;
        if (17 >= off && 17 < off + n[r]) first_nf = r;
        if (tot - 2 >= off && tot - 2 < off + n[r]) last_nf = r;
        off += n[r];
    }
    /* the ranges without the non-finite values, for the sums */
    size_t *nf = malloc((size_t)nr * sizeof *nf);
    memcpy(nf, n, (size_t)nr * sizeof *nf);
    nf[first_nf] = nf[last_nf] = 0;
    double ref = 0.0;
    size_t refc = 0;
    for (int r = 0; r < nr; r++) {
        if (nf[r]) ref += be->sumsq(xs[r], nf[r]);
        refc += be->nonfinite(xs[r], n[r]);
    }
    zt_step_scalars init = {1.25, -7.0, 99, 0};
    zt_step_scalars *ds = se_dev(be, &init, sizeof init);
    be->sumsq_to(&ds->sumsq, xs, nf, nr);
    be->nonfinite_to(&ds->nonfinite, xs, n, nr);
    /* ranges 2 and 0 hold no non-finite value (x[17] lies in range 1) */
    const double s1 = be->sum(xs[2], n[2]), s2 = be->sum(xs[0], n[0]);
    be->sum_to(&ds->loss_sum, xs[2], n[2]);
    be->sum_to(&ds->loss_sum, xs[0], n[0]);
    be->sum_to(&ds->loss_sum, xs[0], 0);   /* nothing */
    zt_step_scalars got;
    be->to_host(&got, ds, sizeof got);
    const double rsum = (1.25 + s1) + s2;
    tap_ok(se_same(&got.sumsq, &ref, sizeof ref), "%s: sumsq_to over %d ranges = the sumsq of each, added in "
           "order (%.17g vs %.17g)", what, nr, got.sumsq, ref);
    tap_ok(got.nonfinite == refc && refc == 2, "%s: nonfinite_to over %d ranges = %llu", what, nr,
           (unsigned long long)got.nonfinite);
    tap_ok(se_same(&got.loss_sum, &rsum, sizeof rsum), "%s: sum_to adds the sum (twice, and n = 0 adds "
           "nothing): %.17g vs %.17g", what, got.loss_sum, rsum);
    /* no range at all: 0 */
    be->sumsq_to(&ds->sumsq, xs, n, 0);
    be->nonfinite_to(&ds->nonfinite, xs, n, 0);
    be->to_host(&got, ds, sizeof got);
    tap_ok(got.sumsq == 0.0 && got.nonfinite == 0, "%s: no ranges: sumsq_to 0, nonfinite_to 0", what);
    be->free(ds);
    be->free(dx);
    free(x); free(xs); free(n); free(nf);
}

/* adamw_multi over a sharded layout: logical arrays (p, grad, the 16-bit
 * copy) of L elements, compact m and v of K, segments with shifts and
 * alternating weight decay, against adamw per segment + to_bf16/to_f16 */
typedef struct se_case {
    int nseg;            /* segments (> 128: several runs on cuda) */
    int gap;             /* a hole in the compact range between two segments */
    unsigned logical;
    int hprec;
    const char *name;
} se_case;

static void se_adamw(const zt_backend *be, const char *what, const se_case *c) {
    zt_adamw_seg *seg = calloc((size_t)c->nseg, sizeof *seg);
    size_t k = 0, shift = 0;
    for (int i = 0; i < c->nseg; i++) {
        const size_t n = 1 + (size_t)(i * 131 + 7) % 777 + (i % 9 == 0 ? 3000 : 0);
        if (i % 4 == 0) shift += 5 + (size_t)i % 11;   /* a new "unit": elements of other ranks */
        if (c->gap && i == c->nseg / 2) k += 13;
        seg[i] = (zt_adamw_seg){k, n, shift, i % 2 ? 0.1f : 0.0f};
        k += n;
    }
    const size_t K = k, L = K + shift + 8;
    const size_t np = c->logical & ZT_ADAMW_P_LOGICAL ? L : K;
    const size_t ng = c->logical & ZT_ADAMW_G_LOGICAL ? L : K;
    const size_t nh = c->logical & ZT_ADAMW_H_LOGICAL ? L : K;
    float *p = malloc(np * 4), *g = malloc(ng * 4), *m = malloc(K * 4), *v = malloc(K * 4);
    uint16_t *h = malloc(nh * 2);
    for (size_t i = 0; i < np; i++) p[i] = se_rnd();
    for (size_t i = 0; i < ng; i++) g[i] = se_rnd() * 0.5f;
    for (size_t i = 0; i < K; i++) m[i] = se_rnd() * 0.01f, v[i] = fabsf(se_rnd()) * 0.001f;
    for (size_t i = 0; i < nh; i++) h[i] = (uint16_t)(i * 2654435761u);
    /* two copies on the device: a for adamw_multi, b for the reference */
    float *pa = se_dev(be, p, np * 4), *pb = se_dev(be, p, np * 4), *gd = se_dev(be, g, ng * 4);
    float *ma = se_dev(be, m, K * 4), *mb = se_dev(be, m, K * 4);
    float *va = se_dev(be, v, K * 4), *vb = se_dev(be, v, K * 4);
    uint16_t *ha = se_dev(be, h, nh * 2), *hb = se_dev(be, h, nh * 2);
    zt_step_scalars gate0 = {3.5, 9.0, 0, 0};   /* norm 3 */
    zt_step_scalars *gd0 = se_dev(be, &gate0, sizeof gate0);
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    int ok = 1;
    for (int step = 1; step <= 3; step++) {
        const float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
        /* step 1: host grad_scale 0.5; steps 2-3: the gate (clip to 1 of
         * norm 3; step 3 without clipping: max_norm 0) */
        zt_adamw_hyper hy = {lr, b1, b2, eps, bc1, bc2, 0.5f, step > 1 ? gd0 : NULL, step == 2 ? 1.0 : 0.0};
        be->adamw_multi(pa, gd, ma, va, c->hprec ? ha : NULL, c->hprec, c->logical, seg, c->nseg, &hy);
        const float gs = step == 1 ? 0.5f : step == 2 ? (float)(1.0 / (3.0 + 1e-6)) : 1.0f;
        for (int i = 0; i < c->nseg; i++) {
            const size_t s0 = seg[i].start, sh = seg[i].shift;
            float *pp = pb + s0 + (c->logical & ZT_ADAMW_P_LOGICAL ? sh : 0);
            be->adamw(pp, gd + s0 + (c->logical & ZT_ADAMW_G_LOGICAL ? sh : 0), mb + s0, vb + s0,
                      seg[i].n, lr, b1, b2, eps, seg[i].wd, bc1, bc2, gs);
            uint16_t *hh = hb + s0 + (c->logical & ZT_ADAMW_H_LOGICAL ? sh : 0);
            if (c->hprec == ZT_ADAMW_H_BF16) be->to_bf16(hh, pp, seg[i].n);
            else if (c->hprec == ZT_ADAMW_H_F16) be->to_f16(hh, pp, seg[i].n);
        }
    }
    float *ra = se_host(be, pa, np * 4), *rb = se_host(be, pb, np * 4);
    float *rma = se_host(be, ma, K * 4), *rmb = se_host(be, mb, K * 4);
    float *rva = se_host(be, va, K * 4), *rvb = se_host(be, vb, K * 4);
    uint16_t *rha = se_host(be, ha, nh * 2), *rhb = se_host(be, hb, nh * 2);
    ok = se_same(ra, rb, np * 4) && se_same(rma, rmb, K * 4) && se_same(rva, rvb, K * 4) &&
         se_same(rha, rhb, nh * 2);
    int moved = 0;
    for (size_t i = 0; i < K; i++) moved += rma[i] != m[i];
    tap_ok(ok && moved > 0, "%s: adamw_multi, %s (%d segments, 3 steps: host grad_scale, the gate's clip "
           "factor, no clipping) = adamw per segment + the 16-bit copy, bitwise", what, c->name, c->nseg);
    /* the gate skips: a non-finite count, loss or norm, nothing written */
    const zt_step_scalars skips[3] = {{3.5, 9.0, 1, 0}, {INFINITY, 9.0, 0, 0}, {3.5, NAN, 0, 0}};
    int kept = 1;
    for (int s = 0; s < 3; s++) {
        be->to_device(gd0, &skips[s], sizeof skips[s]);
        zt_adamw_hyper hy = {lr, b1, b2, eps, 0.5f, 0.5f, 1.0f, gd0, 1.0};
        be->adamw_multi(pa, gd, ma, va, c->hprec ? ha : NULL, c->hprec, c->logical, seg, c->nseg, &hy);
    }
    float *sa = se_host(be, pa, np * 4), *sm = se_host(be, ma, K * 4), *sv = se_host(be, va, K * 4);
    uint16_t *shh = se_host(be, ha, nh * 2);
    kept = se_same(sa, ra, np * 4) && se_same(sm, rma, K * 4) && se_same(sv, rva, K * 4) &&
           se_same(shh, rha, nh * 2);
    tap_ok(kept, "%s: adamw_multi, %s: a gate with non-finite gradients, loss or norm writes nothing",
           what, c->name);
    free(sa); free(sm); free(sv); free(shh);
    free(ra); free(rb); free(rma); free(rmb); free(rva); free(rvb); free(rha); free(rhb);
    be->free(pa); be->free(pb); be->free(gd); be->free(ma); be->free(mb); be->free(va); be->free(vb);
    be->free(ha); be->free(hb); be->free(gd0);
    free(p); free(g); free(m); free(v); free(h); free(seg);
}

static void check_step_entries(const zt_backend *be, const char *what) {
    if (!tap_ok(be->sum_to && be->sumsq_to && be->nonfinite_to && be->adamw_multi,
                "%s: sum_to, sumsq_to, nonfinite_to, adamw_multi are set", what))
        return;
    se_reductions(be, what, 9);
    se_reductions(be, what, 300);
    static const se_case cases[] = {
        {40, 0, ZT_ADAMW_P_LOGICAL | ZT_ADAMW_G_LOGICAL | ZT_ADAMW_H_LOGICAL, ZT_ADAMW_H_BF16,
         "p, grad, bf16 copy logical (stages 1-2 mixed)"},
        {40, 1, ZT_ADAMW_G_LOGICAL | ZT_ADAMW_H_LOGICAL, ZT_ADAMW_H_F16,
         "master compact, fp16 copy, a gap"},
        {300, 0, 0, ZT_ADAMW_H_BF16, "all compact (stage 3), 300 segments"},
        {17, 0, ZT_ADAMW_P_LOGICAL | ZT_ADAMW_G_LOGICAL, ZT_ADAMW_H_NONE, "fp32, no 16-bit copy"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) se_adamw(be, what, &cases[i]);
}

#endif
