/*
 * nf4.c -- NF4 quantization on the host, bitwise bitsandbytes 0.50's CPU
 * path (nf4.h has the format; docs/nf4.md the derivation of each rule).
 *
 * Every rounding below is one IEEE fp32 (or, in the torch mean, fp64)
 * operation in the order bitsandbytes / torch do it; nothing may be fused
 * into a multiply-add, so contraction is off for this file.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "fp_exact.h"   /* contraction off: every rounding kept */

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "nf4.h"
#include "nf4_tables.h"

const float zt_nf4_code[16] = {ZT_NF4_CODE_INIT};
const float zt_nf4_dyn[256] = {ZT_NF4_DYN_INIT};

static zt_nf4_status fail(char *err, size_t errlen, zt_nf4_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ------------------------------------------------------------ sizes */

size_t zt_nf4_blocks(size_t n) { return n / ZT_NF4_BLOCK + (n % ZT_NF4_BLOCK != 0); }
size_t zt_nf4_blocks2(size_t n) {
    const size_t b = zt_nf4_blocks(n);
    return b / ZT_NF4_DQ_BLOCK + (b % ZT_NF4_DQ_BLOCK != 0);
}
size_t zt_nf4_code_bytes(size_t n) { return n / 2 + (n & 1); }

size_t zt_nf4_bytes(size_t n, int double_quant) {
    if (!double_quant) return zt_nf4_code_bytes(n) + zt_nf4_blocks(n) * sizeof(float);
    return zt_nf4_code_bytes(n) + zt_nf4_blocks(n) + zt_nf4_blocks2(n) * sizeof(float) +
           sizeof(float);
}

/* ------------------------------------------------------------ host buffers */

zt_nf4_status zt_nf4_alloc(zt_nf4 *q, size_t n, int double_quant) {
    if (!q) return ZT_NF4_EINVAL;
    memset(q, 0, sizeof *q);
    q->n = n;
    q->double_quant = double_quant != 0;
    const size_t nb = zt_nf4_blocks(n);
    q->codes = malloc(zt_nf4_code_bytes(n) ? zt_nf4_code_bytes(n) : 1);
    int ok = q->codes != NULL;
    if (q->double_quant) {
        q->qabsmax = malloc(nb ? nb : 1);
        q->absmax2 = malloc((zt_nf4_blocks2(n) ? zt_nf4_blocks2(n) : 1) * sizeof(float));
        ok = ok && q->qabsmax && q->absmax2;
    } else {
        q->absmax = malloc((nb ? nb : 1) * sizeof(float));
        ok = ok && q->absmax;
    }
    if (!ok) {
        zt_nf4_free(q);
        q->n = n;
        q->double_quant = double_quant != 0;
        return ZT_NF4_ENOMEM;
    }
    return ZT_NF4_OK;
}

void zt_nf4_free(zt_nf4 *q) {
    if (!q) return;
    free(q->codes);
    free(q->absmax);
    free(q->qabsmax);
    free(q->absmax2);
    q->codes = q->qabsmax = NULL;
    q->absmax = q->absmax2 = NULL;
}

/* ------------------------------------------------------------ torch's mean
 * torch (CPU, 2.x) computes x.mean() of fp32 as sum(x) / numel: the sum by
 * its cascade sum (aten/src/ATen/native/cpu/SumKernel.cpp), accumulated in
 * fp32, then divided by (float)numel in fp32.  The cascade, for a
 * contiguous run of m floats and W floats per SIMD vector (8: AVX2, 16:
 * AVX512):
 *   - m < W: a scalar row sum (below) over the m floats;
 *   - else a row sum over the m / W vectors, lane by lane; then the
 *     remaining m % W floats are added in order to 0, then the W lanes in
 *     order.
 * A row sum over s items with 4 independent accumulators (item 4i+k into
 * accumulator k, i < s / 4) keeps 4 levels of partial sums, level 0
 * collecting 2^p rows at a time, p = max(4, ceil_log2(s / 4) / 4), each
 * full level carried into the next; then the levels are added into level
 * 0, the leftover s % 4 items into accumulator 0, and accumulators 1..3
 * into accumulator 0, in that order.
 * With more than one torch thread and >= 32768 values, torch splits the
 * range into nt = min(threads, ceil(m / 32768)) chunks of ceil(m / nt),
 * sums each as above into its own slot of a `threads`-long fp32 buffer
 * (the others stay 0), and then sums the buffer the same way.           */

#define TORCH_GRAIN 32768
#define TORCH_MAX_LANES 16

static int64_t ceil_log2(int64_t x) {
    if (x <= 2) return 1;
    uint64_t u = (uint64_t)x - 1;
    int last = 63;
    while (!(u >> last)) last--;
    return last + 1;
}

/* row sum over s items of D lanes each (item t = x[t*D .. t*D + D-1]);
 * result in out[D] */
static void row_sum(float *out, const float *x, int64_t s, int D) {
    const int64_t s_ilp = s / 4;
    float acc[4][4][TORCH_MAX_LANES];
    memset(acc, 0, sizeof acc);
    const int64_t lp = ceil_log2(s_ilp) / 4;
    const int64_t level_power = lp > 4 ? lp : 4;
    const int64_t level_step = (int64_t)1 << level_power;
    const int64_t level_mask = level_step - 1;
    int64_t i = 0;
    for (; i + level_step <= s_ilp;) {
        for (int64_t j = 0; j < level_step; ++j, ++i)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < D; l++) acc[0][k][l] += x[(4 * i + k) * D + l];
        for (int j = 1; j < 4; j++) {
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < D; l++) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.0f;
                }
            if ((i & (level_mask << (j * level_power))) != 0) break;
        }
    }
    for (; i < s_ilp; ++i)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < D; l++) acc[0][k][l] += x[(4 * i + k) * D + l];
    for (int j = 1; j < 4; j++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < D; l++) acc[0][k][l] += acc[j][k][l];
    for (int64_t t = s_ilp * 4; t < s; ++t)
        for (int l = 0; l < D; l++) acc[0][0][l] += x[t * D + l];
    for (int k = 1; k < 4; k++)
        for (int l = 0; l < D; l++) acc[0][0][l] += acc[0][k][l];
    for (int l = 0; l < D; l++) out[l] = acc[0][0][l];
}

/* torch's reduction loop over a contiguous run x[m] */
static float torch_run_sum(const float *x, int64_t m, int W) {
    float r[TORCH_MAX_LANES];
    if (m < W) {
        row_sum(r, x, m, 1);
        return r[0];
    }
    const int64_t nvec = m / W;
    row_sum(r, x, nvec, W);
    float fin = 0.0f;
    for (int64_t k = nvec * W; k < m; k++) fin += x[k];
    for (int l = 0; l < W; l++) fin += r[l];
    return fin;
}

float zt_nf4_torch_mean(const float *x, size_t n, const zt_nf4_torch *torch) {
    int threads = torch && torch->threads > 0 ? torch->threads : 1;
    const int W = torch && torch->simd_floats == 16 ? 16 : 8;
    const int64_t m = (int64_t)n;
    float sum;
    if (m < TORCH_GRAIN || threads == 1) {
        sum = 0.0f + torch_run_sum(x, m, W);
    } else {
        /* two passes: at::parallel_for(0, m, GRAIN) into per-thread slots,
         * then the slots */
        float slot[256];
        if (threads > 256) threads = 256;
        int64_t nt = threads;
        const int64_t by_grain = (m + TORCH_GRAIN - 1) / TORCH_GRAIN;
        if (by_grain < nt) nt = by_grain;
        const int64_t chunk = (m + nt - 1) / nt;
        for (int t = 0; t < threads; t++) slot[t] = 0.0f;
        for (int64_t t = 0; t < nt; t++) {
            const int64_t b = t * chunk;
            if (b >= m) continue;
            const int64_t e = b + chunk < m ? b + chunk : m;
            slot[t] = slot[t] + torch_run_sum(x + b, e - b, W);
        }
        sum = 0.0f + torch_run_sum(slot, threads, W);
    }
    return sum / (float)m;
}

/* ------------------------------------------------------------ 8-bit blockwise
 * bitsandbytes' CPU quantize_blockwise (csrc/cpu_ops.cpp, 0.50): no exact
 * nearest search, but a 65536-entry table over [-1, 1]:
 *   mid[i]  = 0.5f * (code[i] + code[i+1])
 *   lut[t]  = the first i with !(mid[i] < -1 + (2t) / 65535), i <= 255
 *   index   = (uint16)((clamp(v, -1, 1) + 1) * 0.5f * 65535 + 0.5f)
 * with v = x * (1 / absmax) in fp32; an all-zero block gets absmax 0 and
 * codes 0.  (Whether the multiply and the add of the index are fused or
 * not cannot change it: the add's result is truncated, and a fused
 * rounding differs only below half an ulp of an integer.)                */

#define DYN_LUT 65536

static void build_dyn_lut(uint8_t *lut) {
    float mid[255];
    for (int i = 0; i < 255; i++) mid[i] = 0.5f * (zt_nf4_dyn[i] + zt_nf4_dyn[i + 1]);
    int c = 0;
    for (int t = 0; t < DYN_LUT; t++) {
        const float val = -1.0f + (2.0f * (float)t) / (float)(DYN_LUT - 1);
        while (c < 255 && mid[c] < val) ++c;
        lut[t] = (uint8_t)c;
    }
}

static inline unsigned dyn_index(float v) {
    v = v < -1.0f ? -1.0f : v;
    v = v > 1.0f ? 1.0f : v;
    const float a = (v + 1.0f) * 0.5f;
    const float b = a * (float)(DYN_LUT - 1);
    return (unsigned)(uint16_t)(b + 0.5f);
}

zt_nf4_status zt_nf4_quantize_dyn(uint8_t *out, float *absmax, const float *x, size_t n,
                                  size_t blocksize) {
    if (!out || !absmax || !x || !blocksize) return ZT_NF4_EINVAL;
    uint8_t *lut = malloc(DYN_LUT);
    if (!lut) return ZT_NF4_ENOMEM;
    build_dyn_lut(lut);
    const size_t nb = n / blocksize + (n % blocksize != 0);
    for (size_t b = 0; b < nb; b++) {
        const size_t s = b * blocksize, e = s + blocksize < n ? s + blocksize : n;
        float am = 0.0f;
        for (size_t i = s; i < e; i++) am = fmaxf(am, fabsf(x[i]));
        absmax[b] = am;
        if (am == 0.0f) {
            memset(out + s, 0, e - s);
            continue;
        }
        const float inv = 1.0f / am;
        for (size_t i = s; i < e; i++) out[i] = lut[dyn_index(x[i] * inv)];
    }
    free(lut);
    return ZT_NF4_OK;
}

/* ------------------------------------------------------------ 4-bit
 * bitsandbytes 0.50 has no CPU kernel of its own for quantize_4bit: its
 * "default" torch implementation runs (backends/default/ops.py):
 *   full blocks: a = max |x|; v = clamp(x * (1 / max(a, 1e-38f)), -1, 1);
 *                absmax = a (unclamped)
 *   the tail (n % 64 values): a = max(max |x|, 1e-38f); v = clamp(x / a,
 *                -1, 1) (a true division); absmax = a (clamped)
 *   code = #{ k : bound[k] < v }, bound[k] = (NF4[k] + NF4[k+1]) / 2 in
 *   fp32 (torch.bucketize, right=False: a tie goes to the lower code)
 *   an odd n is padded with v = 0 (code 7) before packing.                */

static inline unsigned nf4_code_of(const float *bound, float v) {
    v = v < -1.0f ? -1.0f : v;
    v = v > 1.0f ? 1.0f : v;
    unsigned c = 0;
    for (int k = 0; k < 15; k++) c += bound[k] < v;
    return c;
}

/* element i of the weight; memcpy: the caller's array need not be aligned */
static inline float load_w(const void *w, int dtype, size_t i) {
    if (dtype == ZT_NF4_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)w + 2 * i, 2);
        return zt_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, (const char *)w + 4 * i, 4);
    return f;
}

/* absmax and codes of one block [s, e); tail: the last, short block */
static float quant_block(const float *bound, uint8_t *codes, const void *w, int dtype, size_t s, size_t e, int tail) {
    float a = 0.0f;
    for (size_t i = s; i < e; i++) a = fmaxf(a, fabsf(load_w(w, dtype, i)));
    const float clamped = a > 1e-38f ? a : 1e-38f;
    const float recip = 1.0f / clamped;
    /* s is even (64 | s); pairs (i, i+1) share a byte */
    for (size_t i = s; i < e; i += 2) {
        const float x0 = load_w(w, dtype, i);
        const float v0 = tail ? x0 / clamped : x0 * recip;
        unsigned c1 = 7;
        if (i + 1 < e) {
            const float x1 = load_w(w, dtype, i + 1);
            c1 = nf4_code_of(bound, tail ? x1 / clamped : x1 * recip);
        }
        codes[i / 2] = (uint8_t)(nf4_code_of(bound, v0) << 4 | c1);
    }
    return tail ? clamped : a;
}

zt_nf4_status zt_nf4_quantize(zt_nf4 *q, const void *w, int dtype, const zt_nf4_torch *torch,
                              char *err, size_t errlen) {
    if (!q || !w)
        return fail(err, errlen, ZT_NF4_EINVAL, "nf4 quantize: %s is NULL", q ? "weight" : "tensor");
    if (dtype != ZT_NF4_F32 && dtype != ZT_NF4_BF16)
        return fail(err, errlen, ZT_NF4_EINVAL, "nf4 quantize: unknown weight dtype %d", dtype);
    const size_t n = q->n;
    if (n == 0) return fail(err, errlen, ZT_NF4_EINVAL, "nf4 quantize: empty weight (n = 0)");
    if (!q->codes || (q->double_quant ? !q->qabsmax || !q->absmax2 : !q->absmax))
        return fail(err, errlen, ZT_NF4_EINVAL, "nf4 quantize: output arrays not allocated");
    float bound[15];
    for (int k = 0; k < 15; k++) bound[k] = (zt_nf4_code[k] + zt_nf4_code[k + 1]) / 2.0f;

    /* the first non-finite value, if any */
    size_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        if (!isfinite(load_w(w, dtype, i)) && i < bad) bad = i;
    if (bad < n) {
        const float v = load_w(w, dtype, bad);
        return fail(err, errlen, ZT_NF4_ENONFINITE,
                    "nf4 quantize: weight element %zu of %zu is %s (a NaN or infinity cannot be "
                    "quantized; is the checkpoint damaged?)",
                    bad, n, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
    }

    const size_t nb = zt_nf4_blocks(n);
    float *am = q->double_quant ? malloc(nb * sizeof(float)) : q->absmax;
    if (!am)
        return fail(err, errlen, ZT_NF4_ENOMEM, "nf4 quantize: out of memory for %zu absmax", nb);
    const size_t nfull = n / ZT_NF4_BLOCK;
#pragma omp parallel for schedule(static) if (nfull > 256)
    for (size_t b = 0; b < nfull; b++)
        am[b] = quant_block(bound, q->codes, w, dtype, b * ZT_NF4_BLOCK, (b + 1) * ZT_NF4_BLOCK, 0);
    if (nfull < nb) am[nfull] = quant_block(bound, q->codes, w, dtype, nfull * ZT_NF4_BLOCK, n, 1);

    if (q->double_quant) {
        /* offset = absmax.mean(); quantize_blockwise(absmax - offset, 256) */
        const float off = zt_nf4_torch_mean(am, nb, torch);
        for (size_t b = 0; b < nb; b++) am[b] = am[b] - off;
        zt_nf4_status st = zt_nf4_quantize_dyn(q->qabsmax, q->absmax2, am, nb, ZT_NF4_DQ_BLOCK);
        free(am);
        if (st != ZT_NF4_OK)
            return fail(err, errlen, st, "nf4 quantize: out of memory for the 64 KiB table");
        q->offset = off;
    }
    return ZT_NF4_OK;
}

/* ------------------------------------------------------------ dequantization */

zt_nf4_status zt_nf4_dequantize(const zt_nf4 *q, void *out, int out_dtype, char *err,
                                size_t errlen) {
    if (!q || !out || !q->codes || (q->double_quant ? !q->qabsmax || !q->absmax2 : !q->absmax))
        return fail(err, errlen, ZT_NF4_EINVAL, "nf4 dequantize: a NULL array");
    if (out_dtype != ZT_NF4_F32 && out_dtype != ZT_NF4_BF16)
        return fail(err, errlen, ZT_NF4_EINVAL, "nf4 dequantize: unknown output dtype %d",
                    out_dtype);
    const size_t n = q->n;
    for (size_t i = 0; i < n; i++) {
        const size_t b = i / ZT_NF4_BLOCK;
        float a;
        if (q->double_quant) {
            const float s = zt_nf4_dyn[q->qabsmax[b]] * q->absmax2[b / ZT_NF4_DQ_BLOCK];
            a = s + q->offset;
        } else {
            a = q->absmax[b];
        }
        const unsigned c = (q->codes[i / 2] >> (i & 1 ? 0 : 4)) & 15u;
        const float v = zt_nf4_code[c] * a;
        if (out_dtype == ZT_NF4_BF16) ((uint16_t *)out)[i] = zt_f32_to_bf16(v);
        else ((float *)out)[i] = v;
    }
    return ZT_NF4_OK;
}
