/*
 * cpu_nn.c -- encoder, LayerNorm, GELU and softmax + cross-entropy on the
 * CPU.  Row-parallel where rows are independent; reductions over rows
 * (dwte, dwpe, LayerNorm dw/db) partition the OUTPUT channels among
 * threads and sum rows in order, so they are bitwise independent of the
 * thread count.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "half.h"

#define ZT_PAR_MIN 32768
#define ZT_CBLOCK 256

/* ------------------------------------------------------------ encoder */

void zt_cpu_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16,
                            const float *wpe, int B, int T, int C) {
    const int N = B * T;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const int t = n % T;
        float *o = out + (size_t)n * C;
        const uint16_t *we = wte16 + (size_t)inp[n] * C;
        const float *pe = wpe ? wpe + (size_t)t * C : NULL;
        for (int c = 0; c < C; c++) o[c] = pe ? zt_bf16_to_f32(we[c]) + pe[c] : zt_bf16_to_f32(we[c]);
    }
}

void zt_cpu_encoder_fwd(float *out, const int *inp, const float *wte,
                        const float *wpe, int B, int T, int C) {
    const int N = B * T;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const int t = n % T;
        float *o = out + (size_t)n * C;
        const float *we = wte + (size_t)inp[n] * C;
        if (wpe) {
            const float *pe = wpe + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        } else {
            memcpy(o, we, (size_t)C * sizeof(float));
        }
    }
}

void zt_cpu_encoder_bwd(float *dwte, float *dwpe, const float *dout,
                        const int *inp, int B, int T, int C) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    const int par = (size_t)N * C >= ZT_PAR_MIN;
    /* dwte: each thread owns a channel range and walks all rows in order. */
    const int cb = zt_cpu_channel_block(C, 1 << 30);
    const int nblk = (C + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * cb;
        const int nc = C - c0 < cb ? C - c0 : cb;
        for (int n = 0; n < N; n++) {
            float *dw = dwte + (size_t)inp[n] * C + c0;
            const float *d = dout + (size_t)n * C + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) dw[c] += d[c];
        }
    }
    /* dwpe: each position t is owned by one iteration; sum over b in order. */
    if (!dwpe) return;
#pragma omp parallel for schedule(static) if (par)
    for (int t = 0; t < T; t++) {
        float *dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dp[c] += d[c];
        }
    }
}

/* ------------------------------------------------------------ LayerNorm */

void zt_cpu_layernorm_fwd(float *out, float *mean, float *rstd,
                          const float *inp, const float *w, const float *b,
                          int N, int C) {
    const float eps = 1e-5f;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += x[c];
        const float m = s / (float)C;
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) {
            const float d = x[c] - m;
            v += d * d;
        }
        v /= (float)C;
        const float r = 1.0f / sqrtf(v + eps);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        mean[n] = m;
        rstd[n] = r;
    }
}

void zt_cpu_layernorm_bwd(float *dinp, float *dw, float *db,
                          const float *dout, const float *inp, const float *w,
                          const float *mean, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int par = (size_t)N * C >= ZT_PAR_MIN;
    /* dinp: rows are independent. */
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        float sd = 0.0f, sdn = 0.0f;
#pragma omp simd reduction(+ : sd, sdn)
        for (int c = 0; c < C; c++) {
            const float norm = (x[c] - m) * r;
            const float dn = w[c] * d[c];
            sd += dn;
            sdn += dn * norm;
        }
        const float mean_dn = sd / (float)C;
        const float mean_dnn = sdn / (float)C;
#pragma omp simd
        for (int c = 0; c < C; c++) {
            const float norm = (x[c] - m) * r;
            const float dn = w[c] * d[c];
            di[c] += (dn - mean_dn - norm * mean_dnn) * r;
        }
    }
    /* dw, db: channel blocks, rows summed in order (double accumulators). */
    const int cb = zt_cpu_channel_block(C, ZT_CBLOCK);
    const int nblk = (C + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * cb;
        const int nc = C - c0 < cb ? C - c0 : cb;
        double aw[ZT_CBLOCK], ab[ZT_CBLOCK];
        for (int c = 0; c < nc; c++) aw[c] = ab[c] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0;
            const float *d = dout + (size_t)n * C + c0;
            const float m = mean[n], r = rstd[n];
#pragma omp simd
            for (int c = 0; c < nc; c++) {
                aw[c] += (double)((x[c] - m) * r * d[c]);
                ab[c] += (double)d[c];
            }
        }
        for (int c = 0; c < nc; c++) {
            dw[c0 + c] += (float)aw[c];
            db[c0 + c] += (float)ab[c];
        }
    }
}

/* ------------------------------------------------------------ GELU */


#define ZT_GELU_CHUNK 16384

ZT_TARGET_CLONES
static void gelu_fwd_chunk(float *out, const float *inp, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
        out[i] = 0.5f * x * (1.0f + zt_tanhf(u));
    }
}

ZT_TARGET_CLONES
static void gelu_bwd_chunk(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
        const float th = zt_tanhf(u);
        const float sech2 = 1.0f - th * th;
        const float du = ZT_GELU_K * (1.0f + 3.0f * ZT_GELU_A * x * x);
        const float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
        dinp[i] = g * dout[i];
    }
}

void zt_cpu_gelu_fwd(float *out, const float *inp, size_t n) {
    const size_t nch = (n + ZT_GELU_CHUNK - 1) / ZT_GELU_CHUNK;
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t k = 0; k < nch; k++) {
        const size_t i0 = k * ZT_GELU_CHUNK;
        gelu_fwd_chunk(out + i0, inp + i0, n - i0 < ZT_GELU_CHUNK ? n - i0 : ZT_GELU_CHUNK);
    }
}

void zt_cpu_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    const size_t nch = (n + ZT_GELU_CHUNK - 1) / ZT_GELU_CHUNK;
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t k = 0; k < nch; k++) {
        const size_t i0 = k * ZT_GELU_CHUNK;
        gelu_bwd_chunk(dinp + i0, inp + i0, dout + i0,
                       n - i0 < ZT_GELU_CHUNK ? n - i0 : ZT_GELU_CHUNK);
    }
}

/* ------------------------------------------------------------ softmax + CE */

/* one row; p may be the same memory as x */
ZT_TARGET_CLONES
static float xent_row(float *p, const float *x, int tgt, int V) {
    float mx = -INFINITY;
#ifndef __clang__ /* clang vectorizes a NaN-aware max only under fast-math */
#pragma omp simd reduction(max : mx)
#endif
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    /* read the target logit before p overwrites it */
    const float xt = (tgt >= 0 && tgt < V) ? x[tgt] : 0.0f;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < V; j++) {
        const float e = zt_expf(x[j] - mx);
        p[j] = e;
        s += e;
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int j = 0; j < V; j++) p[j] *= inv;
    /* -log p[tgt] = log(sum) - (x[tgt] - max): no log(0) */
    return (tgt >= 0 && tgt < V) ? logf(s) - (xt - mx) : 0.0f;
}

void zt_cpu_xent_fwd(float *losses, float *probs, const float *logits,
                     const int *targets, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float loss = xent_row(probs + (size_t)n * V, logits + (size_t)n * V,
                                    targets ? targets[n] : -1, V);
        if (losses) losses[n] = loss;
    }
}

/* one row of xent_bwd; d may be the same memory as p */
static void xent_bwd_row(float *d, const float *p, int tgt, float dloss, int V) {
    if (tgt < 0 || tgt >= V) {
        memset(d, 0, (size_t)V * sizeof(float));
        return;
    }
    const float pt = p[tgt];  /* read before d (maybe p) is written */
#pragma omp simd
    for (int j = 0; j < V; j++) d[j] = p[j] * dloss;
    d[tgt] = (pt - 1.0f) * dloss;
}

void zt_cpu_xent_bwd(float *dlogits, const float *probs, const int *targets,
                     float dloss, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++)
        xent_bwd_row(dlogits + (size_t)n * V, probs + (size_t)n * V, targets ? targets[n] : -1,
                     dloss, V);
}

/* xent_fwd then xent_bwd, row by row in place (the row stays in cache
 * between the two): the same row functions, so bitwise their result */
void zt_cpu_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
                       int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        float *x = logits + (size_t)n * V;
        const int tgt = targets ? targets[n] : -1;
        const float loss = xent_row(x, x, tgt, V);
        if (losses) losses[n] = loss;
        xent_bwd_row(x, x, tgt, dloss, V);
    }
}
