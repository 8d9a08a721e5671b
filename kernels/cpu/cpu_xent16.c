/*
 * cpu_xent16.c -- softmax + cross-entropy on bf16 logits for the CPU
 * backend (backend.h: xent16_fwd, xent16_fused; the LM head's bf16 logits,
 * libtrain/classifier.h).
 *
 * Each row is computed exactly as the CUDA kernel computes it
 * (kernels/cuda/cuda_nn.cu k_xent16): ZT_XENT16_LANES lanes, lane t keeping a
 * running max m and sum s over j = t, t + LANES, ... (a larger value x:
 * s = fma(s, exp(m - x), 1), m = x; else s += exp(x - m)); the block max
 * of the lanes' m (warps of 32 by xor butterflies, then the warps' maxima
 * likewise); each lane's s * exp(m - max), summed the same way; then the
 * loss log(sum) - (x[target] - max) and, fused, each gradient element
 * (exp(x - max) * (1 / sum) [- 1]) * dloss rounded to bf16.  The same
 * operations in the same order, with libm's expf / logf (what the CUDA
 * simulator's kernels call), so on the simulator the two agree bitwise.
 * Contraction is off for this file: the products stay rounded, as the
 * kernel's __fmul_rn keeps them.  OpenMP over rows.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "fp_exact.h"   /* contraction off: every rounding kept */

#include <math.h>

#include "backend.h"
#include "cpu_internal.h"
#include "half.h"

#define LANES ZT_XENT16_LANES
#define ZT_PAR_MIN 32768   /* elements below which the rows stay serial (cpu_nn.c) */

/* zt_warp_sum / zt_warp_max over 32 lanes (xor butterflies: every lane ends
 * with the same value; lane 0's) */
static float warp_sum(float *v) {
    float n[32];
    for (int o = 16; o > 0; o >>= 1) {
        for (int l = 0; l < 32; l++) n[l] = v[l] + v[l ^ o];
        for (int l = 0; l < 32; l++) v[l] = n[l];
    }
    return v[0];
}
static float warp_max(float *v) {
    float n[32];
    for (int o = 16; o > 0; o >>= 1) {
        for (int l = 0; l < 32; l++) n[l] = fmaxf(v[l], v[l ^ o]);
        for (int l = 0; l < 32; l++) v[l] = n[l];
    }
    return v[0];
}
/* zt_block_sum / zt_block_max of LANES values (LANES / 32 warps, then the
 * warps' results in the first lanes of one warp, the rest 0 / -inf) */
static float block_red(const float *lane, int is_max) {
    float sh[32], v[32];
    const int nw = LANES / 32;
    for (int w = 0; w < nw; w++) {
        for (int l = 0; l < 32; l++) v[l] = lane[w * 32 + l];
        sh[w] = is_max ? warp_max(v) : warp_sum(v);
    }
    for (int l = 0; l < 32; l++) v[l] = l < nw ? sh[l] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(v) : warp_sum(v);
}

/* the row's max and sum of exp (k_xent16's first pass and reductions) */
static void row_stats(const uint16_t *x, int V, float *mx, float *sum) {
    float m[LANES], s[LANES];
    for (int t = 0; t < LANES; t++) {
        m[t] = -INFINITY;
        s[t] = 0.0f;
    }
    for (int j0 = 0; j0 < V; j0 += LANES) {
        const int nt = V - j0 < LANES ? V - j0 : LANES;
        for (int t = 0; t < nt; t++) {
            const float v = zt_bf16_to_f32(x[j0 + t]);
            if (v > m[t]) {
                s[t] = fmaf(s[t], expf(m[t] - v), 1.0f);
                m[t] = v;
            } else if (v != -INFINITY) {
                s[t] += expf(v - m[t]);
            }
        }
    }
    const float M = block_red(m, 1);
    float c[LANES];
    for (int t = 0; t < LANES; t++) c[t] = m[t] > -INFINITY ? s[t] * expf(m[t] - M) : 0.0f;
    *mx = M;
    *sum = block_red(c, 0);
}

static float row_loss(const uint16_t *x, int tgt, int V, float M, float S) {
    if (tgt < 0 || tgt >= V) return 0.0f;
    return logf(S) - (zt_bf16_to_f32(x[tgt]) - M);
}

void zt_cpu_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V) {
    if (N <= 0 || V <= 0 || !losses) return;
#pragma omp parallel for schedule(static) if ((size_t)N * V >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const uint16_t *x = logits16 + (size_t)n * V;
        float M, S;
        row_stats(x, V, &M, &S);
        losses[n] = row_loss(x, targets ? targets[n] : -1, V, M, S);
    }
}

void zt_cpu_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                         int V) {
    if (N <= 0 || V <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * V >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        uint16_t *x = logits16 + (size_t)n * V;
        const int tgt = targets ? targets[n] : -1;
        const int valid = tgt >= 0 && tgt < V;
        float M, S;
        row_stats(x, V, &M, &S);
        if (losses) losses[n] = row_loss(x, tgt, V, M, S);
        const float inv = 1.0f / S;
        for (int j = 0; j < V; j++) {
            const float p = expf(zt_bf16_to_f32(x[j]) - M) * inv;
            x[j] = zt_f32_to_bf16(valid ? (j == tgt ? p - 1.0f : p) * dloss : 0.0f);
        }
    }
}
