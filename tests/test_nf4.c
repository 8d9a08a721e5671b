/*
 * test_nf4.c -- NF4 quantization (kernels/nf4.h) and the nf4_dequant
 * backend kernel, with nothing external:
 *   - known answers: tests/fixtures/nf4/known.bin, made once by
 *     scripts/make_nf4_fixture.py with bitsandbytes 0.50 (tables, codes,
 *     absmax, double-quantization state, fp32 and bf16 dequantization):
 *     all bitwise;
 *   - properties on random weights of many shapes: each code is the
 *     nearest NF4 value of x / absmax (a tie to the lower), the round trip
 *     error is within half the widest NF4 gap times the absmax, tail
 *     blocks, all-zero blocks, the padding nibble, bf16 input = its fp32
 *     widening, and the double-quantized absmax within the 8-bit map's
 *     resolution of the plain one;
 *   - the backend kernel (cpu and cpu-strict) bitwise the host reference,
 *     1 and 3 threads, slices at block boundaries;
 *   - bad input: NaN / +-Inf / n = 0 / NULL give a status and a message;
 *   - the memory-size helper.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "half.h"
#include "nf4.h"
#include "tap.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double rnd(void) { /* uniform in [-1, 1) */
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static double gauss(void) { /* sum of 4 uniforms, var 4/3 */
    return rnd() + rnd() + rnd() + rnd();
}
static void *xmalloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) { perror("calloc"); exit(99); }
    return p;
}
static unsigned code_at(const uint8_t *codes, size_t i) {
    return (codes[i / 2] >> (i % 2 ? 0 : 4)) & 15u;
}

/* ------------------------------------------------------------ fixture */

typedef struct {
    const uint8_t *p, *end;
    int bad;
} rd_t;
static const void *take(rd_t *r, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) { r->bad = 1; return NULL; }
    const void *q = r->p;   /* unaligned: read with memcpy / memcmp only */
    r->p += n;
    return q;
}
static uint32_t take_u32(rd_t *r) {
    const uint8_t *q = take(r, 4);
    return q ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24 : 0;
}

/* every case of a known-answer file (version 1: the committed fixture;
 * version 2 adds torch's SIMD width and each case's torch thread count) */
static void test_fixture(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!tap_ok(f != NULL, "fixture %s opens", path)) return;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = xmalloc((size_t)len);
    const size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    rd_t r = {buf, buf + got, 0};
    const char *magic = take(&r, 8);
    const uint32_t ver = take_u32(&r), ncases = take_u32(&r);
    const uint32_t simd = ver >= 2 ? take_u32(&r) : 8;
    tap_ok(magic && !memcmp(magic, "ZTNF4KA", 8) && (ver == 1 || ver == 2) && ncases > 0,
           "fixture header (version %u, %u cases, torch SIMD width %u)", ver, ncases, simd);
    const float *nf4 = take(&r, 16 * 4), *dyn = take(&r, 256 * 4);
    if (r.bad) { tap_ok(0, "fixture tables"); free(buf); return; }
    tap_ok(!memcmp(nf4, zt_nf4_code, sizeof zt_nf4_code),
           "the NF4 table is bitsandbytes' get_4bit_type(\"nf4\"), bitwise");
    tap_ok(!memcmp(dyn, zt_nf4_dyn, sizeof zt_nf4_dyn),
           "the dynamic map is bitsandbytes' create_dynamic_map(), bitwise");
    const zt_backend *be = zt_backend_cpu();
    size_t total = 0;
    for (uint32_t c = 0; c < ncases && !r.bad; c++) {
        const char *name = take(&r, 32);
        const uint32_t dtype = take_u32(&r), dq = take_u32(&r), rows = take_u32(&r),
                       cols = take_u32(&r), has_deq = take_u32(&r);
        const uint32_t threads = ver >= 2 ? take_u32(&r) : 1;
        const zt_nf4_torch torch = {(int)threads, (int)simd};
        const size_t n = (size_t)rows * cols, nb = zt_nf4_blocks(n), nb2 = zt_nf4_blocks2(n);
        const void *w = take(&r, n * (dtype ? 2 : 4));
        const uint8_t *codes = take(&r, zt_nf4_code_bytes(n));
        const uint8_t *qabsmax = dq ? take(&r, nb) : NULL;
        const float *absmax2 = dq ? take(&r, nb2 * 4) : NULL;
        const float *offset = dq ? take(&r, 4) : NULL;
        const float *absmax = dq ? NULL : take(&r, nb * 4);
        const float *deq = has_deq ? take(&r, n * 4) : NULL;
        const uint16_t *deqh = has_deq ? take(&r, n * 2) : NULL;
        if (r.bad) break;
        char nm[33];
        memcpy(nm, name, 32);
        nm[32] = 0;
        zt_nf4 q;
        if (zt_nf4_alloc(&q, n, (int)dq) != ZT_NF4_OK) { tap_ok(0, "%s: alloc", nm); continue; }
        char err[256] = "";
        const zt_nf4_status st = zt_nf4_quantize(&q, w, dtype ? ZT_NF4_BF16 : ZT_NF4_F32, &torch,
                                                 err, sizeof err);
        int ok = st == ZT_NF4_OK && !memcmp(q.codes, codes, zt_nf4_code_bytes(n));
        if (dq)
            ok = ok && !memcmp(q.qabsmax, qabsmax, nb) && !memcmp(q.absmax2, absmax2, nb2 * 4) &&
                 !memcmp(&q.offset, offset, 4);
        else
            ok = ok && !memcmp(q.absmax, absmax, nb * 4);
        tap_ok(ok, "%s: codes and %s bitwise bitsandbytes' (n %zu) %s", nm,
               dq ? "qabsmax, absmax2, offset" : "absmax", n, err);
        total += n;
        if (has_deq) {
            float *o = xmalloc(n * 4), *ob = xmalloc(n * 4);
            uint16_t *oh = xmalloc(n * 2), *obh = xmalloc(n * 2);
            zt_nf4_dequantize(&q, o, ZT_NF4_F32, NULL, 0);
            zt_nf4_dequantize(&q, oh, ZT_NF4_BF16, NULL, 0);
            be->nf4_dequant(ob, 0, q.codes, q.absmax, q.qabsmax, q.absmax2, q.offset, n);
            be->nf4_dequant(obh, 1, q.codes, q.absmax, q.qabsmax, q.absmax2, q.offset, n);
            tap_ok(!memcmp(o, deq, n * 4) && !memcmp(ob, deq, n * 4) && !memcmp(oh, deqh, n * 2) &&
                       !memcmp(obh, deqh, n * 2),
                   "%s: dequantize_4bit to fp32 and bf16 bitwise bitsandbytes' (host and cpu kernel)",
                   nm);
            free(o); free(ob); free(oh); free(obh);
        }
        zt_nf4_free(&q);
    }
    tap_ok(!r.bad && r.p == r.end, "fixture read to its end (%u tensors, %zu weights compared)",
           ncases, total);
    free(buf);
}

/* ------------------------------------------------------------ properties */

/* the widest gap between adjacent NF4 values (between 0.7229... and 1) */
static double max_gap(void) {
    double g = 0;
    for (int k = 0; k < 15; k++) g = fmax(g, (double)zt_nf4_code[k + 1] - zt_nf4_code[k]);
    return g;
}

static void test_properties(void) {
    const size_t shapes[][2] = {{1, 1}, {1, 2}, {1, 63}, {1, 64}, {1, 65}, {3, 7},
                                {2, 64}, {5, 129}, {16, 48}, {33, 31}, {64, 64}, {7, 1000}};
    const double gap2 = max_gap() / 2;
    size_t bad_near = 0, bad_err = 0, bad_tail = 0, bad_pad = 0, bad_bf = 0, bad_dq = 0, total = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const size_t n = shapes[s][0] * shapes[s][1];
        const double scale = pow(10.0, 3 * rnd());
        float *w = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) w[i] = (float)(scale * gauss());
        zt_nf4 q, q2, qd;
        zt_nf4_alloc(&q, n, 0);
        zt_nf4_alloc(&q2, n, 0);
        zt_nf4_alloc(&qd, n, 1);
        if (zt_nf4_quantize(&q, w, ZT_NF4_F32, NULL, NULL, 0) != ZT_NF4_OK ||
            zt_nf4_quantize(&qd, w, ZT_NF4_F32, NULL, NULL, 0) != ZT_NF4_OK) {
            tap_ok(0, "quantize [%zu x %zu]", shapes[s][0], shapes[s][1]);
            continue;
        }
        float *deq = xmalloc(n * 4), *deqd = xmalloc(n * 4);
        zt_nf4_dequantize(&q, deq, ZT_NF4_F32, NULL, 0);
        zt_nf4_dequantize(&qd, deqd, ZT_NF4_F32, NULL, 0);
        const size_t nb = zt_nf4_blocks(n);
        for (size_t b = 0; b < nb; b++) {
            const size_t s0 = b * 64, e = s0 + 64 < n ? s0 + 64 : n;
            double am = 0;
            for (size_t i = s0; i < e; i++) am = fmax(am, fabs((double)w[i]));
            if (q.absmax[b] != (float)am) bad_tail++;   /* absmax = max |x| of the block */
            for (size_t i = s0; i < e; i++) {
                const double v = (double)w[i] / am;
                const unsigned c = code_at(q.codes, i);
                for (int k = 0; k < 16; k++) /* nearest, up to fp32 rounding of v */
                    if (fabs(v - zt_nf4_code[k]) < fabs(v - zt_nf4_code[c]) - 1e-6) { bad_near++; break; }
                if (fabs((double)deq[i] - w[i]) > gap2 * am * (1 + 1e-6)) bad_err++;
                /* double quant: the absmax moves by at most the 8-bit map's step
                 * (<= 1/64 of the absmax2 scale) */
                if (fabs((double)deqd[i] - w[i]) > (gap2 + 0.02) * am + 0.02 * fabs(deqd[i])) bad_dq++;
            }
            total += e - s0;
        }
        if (n % 2 && code_at(q.codes, n) != 7) bad_pad++;  /* the padding nibble: code of 0.0 */
        /* bf16 input quantizes as its fp32 widening */
        uint16_t *h = xmalloc(n * 2);
        float *hw = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) { h[i] = zt_f32_to_bf16(w[i]); hw[i] = zt_bf16_to_f32(h[i]); }
        zt_nf4_quantize(&q, hw, ZT_NF4_F32, NULL, NULL, 0);
        zt_nf4_quantize(&q2, h, ZT_NF4_BF16, NULL, NULL, 0);
        if (memcmp(q.codes, q2.codes, zt_nf4_code_bytes(n)) || memcmp(q.absmax, q2.absmax, nb * 4))
            bad_bf++;
        free(h); free(hw); free(w); free(deq); free(deqd);
        zt_nf4_free(&q); zt_nf4_free(&q2); zt_nf4_free(&qd);
    }
    tap_ok(bad_near == 0, "every code is the nearest NF4 value of x / absmax (%zu weights) [%zu not]",
           total, bad_near);
    tap_ok(bad_err == 0, "|dequant(quant(x)) - x| <= absmax * (widest NF4 gap) / 2 [%zu exceed]", bad_err);
    tap_ok(bad_dq == 0, "double quantization: the error grows only by the 8-bit absmax step [%zu exceed]",
           bad_dq);
    tap_ok(bad_tail == 0, "absmax = max |x| per block, tail blocks included [%zu differ]", bad_tail);
    tap_ok(bad_pad == 0, "odd n: the last low nibble is 7 (0.0), as bitsandbytes pads");
    tap_ok(bad_bf == 0, "bf16 weights quantize exactly as their fp32 widening");

    /* ties: a value on an fp32 midpoint takes the lower code (torch.bucketize) */
    float w[64] = {1.0f};
    float mid[15];
    for (int k = 0; k < 15; k++) { mid[k] = (zt_nf4_code[k] + zt_nf4_code[k + 1]) / 2.0f; w[1 + k] = mid[k]; }
    zt_nf4 q;
    zt_nf4_alloc(&q, 64, 0);
    zt_nf4_quantize(&q, w, ZT_NF4_F32, NULL, NULL, 0);
    int tie_ok = 1;
    for (int k = 0; k < 15; k++) tie_ok &= code_at(q.codes, 1 + k) == (unsigned)k;
    tap_ok(tie_ok, "a value on a midpoint takes the lower code");

    /* zero blocks: full zero block absmax 0, codes 7; a zero tail block
     * absmax fp32(1e-38) (bitsandbytes clamps the tail's); dequant 0 */
    zt_nf4_free(&q);
    float z[64 + 64 + 5];
    for (int i = 0; i < 133; i++) z[i] = i < 64 ? (float)(i - 20) : 0.0f;
    z[130] = -0.0f;
    zt_nf4_alloc(&q, 133, 0);
    zt_nf4_quantize(&q, z, ZT_NF4_F32, NULL, NULL, 0);
    int zok = q.absmax[0] == 43.0f && q.absmax[1] == 0.0f && q.absmax[2] == 1e-38f;
    for (size_t i = 64; i < 133; i++) zok &= code_at(q.codes, i) == 7;
    float d[133];
    zt_nf4_dequantize(&q, d, ZT_NF4_F32, NULL, 0);
    for (size_t i = 64; i < 133; i++) zok &= d[i] == 0.0f;
    tap_ok(zok, "zero blocks: absmax 0 (full) / 1e-38 (tail, clamped), codes 7, dequantized 0");
    zt_nf4_free(&q);
}

/* ------------------------------------------------------------ backend kernel */

static void test_backend(void) {
    const zt_backend *cpu = zt_backend_cpu(), *strict = zt_backend_cpu_strict();
    tap_ok(cpu->nf4_dequant != NULL && (!strict || strict->nf4_dequant != NULL),
           "nf4_dequant is in the cpu and cpu-strict tables");
    const size_t ns[] = {1, 2, 63, 64, 65, 127, 16384 + 64 * 3 + 7, 300 * 64 * 2 + 1};
    int all = 1, slices = 1, strict_ok = 1;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const size_t n = ns[t];
        float *w = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) w[i] = (float)(0.05 * gauss());
        for (int dq = 0; dq < 2; dq++) {
            zt_nf4 q;
            zt_nf4_alloc(&q, n, dq);
            zt_nf4_quantize(&q, w, ZT_NF4_F32, NULL, NULL, 0);
            for (int bf = 0; bf < 2; bf++) {
                const size_t es = bf ? 2 : 4;
                uint8_t *ref = xmalloc(n * es), *o1 = xmalloc(n * es), *o3 = xmalloc(n * es);
                zt_nf4_dequantize(&q, ref, bf ? ZT_NF4_BF16 : ZT_NF4_F32, NULL, 0);
                cpu->set_threads(1);
                cpu->nf4_dequant(o1, bf, q.codes, q.absmax, q.qabsmax, q.absmax2, q.offset, n);
                cpu->set_threads(3);
                cpu->nf4_dequant(o3, bf, q.codes, q.absmax, q.qabsmax, q.absmax2, q.offset, n);
                all &= !memcmp(ref, o1, n * es) && !memcmp(ref, o3, n * es);
                /* a slice from a block boundary (16384 for double quant) */
                const size_t s = dq ? (n > 16384 ? 16384 : 0) : (n > 128 ? 128 : 0);
                if (s) {
                    memset(o1, 0, n * es);
                    cpu->nf4_dequant(o1, bf, q.codes + s / 2, q.absmax ? q.absmax + s / 64 : NULL,
                                     q.qabsmax ? q.qabsmax + s / 64 : NULL,
                                     q.absmax2 ? q.absmax2 + s / 16384 : NULL, q.offset, n - s);
                    slices &= !memcmp(ref + s * es, o1, (n - s) * es);
                }
                if (strict) {
                    const size_t nb = zt_nf4_blocks(n), nb2 = zt_nf4_blocks2(n);
                    uint8_t *dc = strict->alloc(zt_nf4_code_bytes(n)), *dqa = strict->alloc(nb);
                    float *da = strict->alloc(nb * 4), *da2 = strict->alloc(nb2 * 4);
                    void *dout = strict->alloc(n * es);
                    strict->to_device(dc, q.codes, zt_nf4_code_bytes(n));
                    if (dq) {
                        strict->to_device(dqa, q.qabsmax, nb);
                        strict->to_device(da2, q.absmax2, nb2 * 4);
                    } else {
                        strict->to_device(da, q.absmax, nb * 4);
                    }
                    strict->nf4_dequant(dout, bf, dc, dq ? NULL : da, dq ? dqa : NULL, dq ? da2 : NULL,
                                        q.offset, n);
                    strict->to_host(o1, dout, n * es);
                    const char *e = strict->error();
                    strict_ok &= !e && !memcmp(ref, o1, n * es);
                    if (e) tap_diag("cpu-strict: %s", e);
                    strict->free(dc); strict->free(dqa); strict->free(da); strict->free(da2);
                    strict->free(dout);
                }
                free(ref); free(o1); free(o3);
            }
            zt_nf4_free(&q);
        }
        free(w);
    }
    cpu->set_threads(1);
    tap_ok(all, "cpu nf4_dequant bitwise the host reference: fp32 / bf16, plain / double quant, "
                "n = 1 .. 38401, 1 and 3 threads");
    tap_ok(slices, "a slice from a block boundary dequantizes as that part of the whole");
    if (strict) tap_ok(strict_ok, "cpu-strict nf4_dequant on device memory: the same bits, no error");
    else tap_skip("cpu-strict nf4_dequant", "cpu-strict unavailable");
}

/* ------------------------------------------------------------ bad input */

static void test_errors(void) {
    float w[100];
    for (int i = 0; i < 100; i++) w[i] = (float)i / 100;
    char err[256];
    zt_nf4 q;
    zt_nf4_alloc(&q, 100, 0);
    const float bads[3] = {NAN, INFINITY, -INFINITY};
    const char *names[3] = {"NaN", "+Inf", "-Inf"};
    for (int k = 0; k < 3; k++) {
        w[77] = bads[k];
        err[0] = 0;
        const zt_nf4_status st = zt_nf4_quantize(&q, w, ZT_NF4_F32, NULL, err, sizeof err);
        tap_ok(st == ZT_NF4_ENONFINITE && strstr(err, "element 77") && strstr(err, names[k]),
               "fp32 weight with %s: ZT_NF4_ENONFINITE, \"%s\"", names[k], err);
    }
    /* a large weight (the scan runs in parallel): the first bad index */
    const size_t nbig = 200000;
    float *big = xmalloc(nbig * 4);
    big[180000] = NAN;
    big[150001] = -INFINITY;
    zt_nf4 qb;
    zt_nf4_alloc(&qb, nbig, 1);
    err[0] = 0;
    tap_ok(zt_nf4_quantize(&qb, big, ZT_NF4_F32, NULL, err, sizeof err) == ZT_NF4_ENONFINITE &&
               strstr(err, "element 150001 of 200000 is -Inf"),
           "200000 weights, -Inf at 150001 and NaN at 180000: the first named, \"%s\"", err);
    zt_nf4_free(&qb);
    free(big);
    uint16_t h[100] = {0};
    h[3] = 0x7fc0;
    err[0] = 0;
    tap_ok(zt_nf4_quantize(&q, h, ZT_NF4_BF16, NULL, err, sizeof err) == ZT_NF4_ENONFINITE &&
               strstr(err, "element 3"),
           "bf16 weight with NaN: ZT_NF4_ENONFINITE, \"%s\"", err);
    w[77] = 0;
    tap_ok(zt_nf4_quantize(&q, w, 7, NULL, err, sizeof err) == ZT_NF4_EINVAL,
           "unknown dtype: ZT_NF4_EINVAL, \"%s\"", err);
    tap_ok(zt_nf4_quantize(&q, NULL, ZT_NF4_F32, NULL, err, sizeof err) == ZT_NF4_EINVAL,
           "NULL weight: ZT_NF4_EINVAL, \"%s\"", err);
    tap_ok(zt_nf4_quantize(NULL, w, ZT_NF4_F32, NULL, NULL, 0) == ZT_NF4_EINVAL,
           "NULL tensor, no message buffer: ZT_NF4_EINVAL");
    zt_nf4 e;
    zt_nf4_alloc(&e, 0, 0);
    tap_ok(zt_nf4_quantize(&e, w, ZT_NF4_F32, NULL, err, sizeof err) == ZT_NF4_EINVAL,
           "n = 0: ZT_NF4_EINVAL, \"%s\"", err);
    zt_nf4_free(&e);
    zt_nf4 un = {.n = 10};
    tap_ok(zt_nf4_quantize(&un, w, ZT_NF4_F32, NULL, err, sizeof err) == ZT_NF4_EINVAL,
           "arrays not allocated: ZT_NF4_EINVAL, \"%s\"", err);
    tap_ok(zt_nf4_dequantize(&un, w, ZT_NF4_F32, err, sizeof err) == ZT_NF4_EINVAL,
           "dequantize with arrays not allocated: ZT_NF4_EINVAL");
    zt_nf4_free(&q);
    const zt_backend *cpu = zt_backend_cpu();
    cpu->nf4_dequant(NULL, 0, NULL, NULL, NULL, NULL, 0.0f, 0);
    tap_ok(1, "nf4_dequant with n = 0 touches nothing");
}

/* ------------------------------------------------------------ sizes */

static void test_sizes(void) {
    /* by hand: n = 1: 1 code byte + 1 absmax; n = 65: 33 + 2 absmax;
     * double quant: + 1 qabsmax per block, 1 absmax2 per 256 blocks, offset */
    int ok = zt_nf4_bytes(1, 0) == 1 + 4 && zt_nf4_bytes(65, 0) == 33 + 8 &&
             zt_nf4_bytes(65, 1) == 33 + 2 + 4 + 4 && zt_nf4_bytes(64 * 256, 1) == 8192 + 256 + 4 + 4 &&
             zt_nf4_bytes(64 * 256 + 1, 1) == 8193 + 257 + 8 + 4;
    tap_ok(ok, "zt_nf4_bytes: codes + absmax (+ qabsmax + absmax2 + offset)");
    const size_t n = (size_t)4096 * 4096;
    tap_ok(zt_nf4_bytes(n, 0) * 8 == n * 4 + n / 2 &&
               zt_nf4_bytes(n, 1) == n / 2 + n / 64 + n / 64 / 256 * 4 + 4,
           "[4096, 4096]: 4.5 bits per weight plain (%zu bytes), %zu with double quantization",
           zt_nf4_bytes(n, 0), zt_nf4_bytes(n, 1));
    tap_ok(zt_nf4_blocks(0) == 0 && zt_nf4_blocks(64) == 1 && zt_nf4_blocks(65) == 2 &&
               zt_nf4_blocks2(64 * 256) == 1 && zt_nf4_blocks2(64 * 256 + 1) == 2 &&
               zt_nf4_code_bytes(3) == 2,
           "block counts round up");
}

/* ------------------------------------------------------------ torch mean */

static void test_mean(void) {
    /* exact inputs: sums of small integers are exact in fp32, whatever the
     * order, so the mean is the exact one rounded */
    const size_t ns[] = {1, 5, 8, 100, 40000, 70001};
    int ok = 1;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        float *x = xmalloc(ns[t] * 4);
        double s = 0;
        for (size_t i = 0; i < ns[t]; i++) { x[i] = (float)(i % 7); s += x[i]; }
        for (int th = 1; th <= 3; th++)
            for (int w = 8; w <= 16; w += 8) {
                zt_nf4_torch tt = {th, w};
                ok &= zt_nf4_torch_mean(x, ns[t], &tt) == (float)s / (float)ns[t];
            }
        free(x);
    }
    tap_ok(ok, "torch mean of exactly summable values: sum / n in fp32 (1-3 threads, 8 / 16 lanes)");
}

/* test_nf4 [FILE]: with FILE (tests/nf4_bnb.sh), only its known answers */
int main(int argc, char **argv) {
    if (argc > 1) {
        test_fixture(argv[1]);
        return tap_done();
    }
    const char *src = getenv("ZT_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/nf4/known.bin", src && *src ? src : ".");
    test_fixture(path);
    test_properties();
    test_backend();
    test_errors();
    test_sizes();
    test_mean();
    return tap_done();
}
