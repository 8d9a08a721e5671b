/*
 * cpu_llama.c -- RMSNorm, rotary position embeddings and SwiGLU on the
 * CPU (the Llama family).  The per-element math is kernels/llama_math.h,
 * shared with the CUDA backend.  Row-parallel where rows are independent;
 * the one reduction over rows (RMSNorm dw) partitions the OUTPUT channels
 * among threads and sums rows in order (double accumulators), so every
 * result here is bitwise independent of the thread count.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "llama_math.h"

#define ZT_PAR_MIN 32768
#define ZT_CBLOCK 256

/* ------------------------------------------------------------ RMSNorm */

ZT_TARGET_CLONES
void zt_cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w,
                        float eps, int N, int C) {
    if (N <= 0 || C <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        const float r = zt_rms_rstd(ss, C, eps);
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = zt_rms_out(x[c], r, w[c]);
        rstd[n] = r;
    }
}

ZT_TARGET_CLONES
void zt_cpu_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int par = (size_t)N * C >= ZT_PAR_MIN;
    /* dinp[N,C]: rows are independent */
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        const float r = rstd[n];
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += (double)(w[c] * d[c]) * x[c];
        const float k = zt_rms_k(s, r, C);
#pragma omp simd
        for (int c = 0; c < C; c++) di[c] += zt_rms_dx(x[c], d[c], w[c], r, k);
    }
    /* dw[C]: channel blocks, rows summed in order (double accumulators) */
    const int cb = zt_cpu_channel_block(C, ZT_CBLOCK);
    const int nblk = (C + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (par && nblk > 1)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * cb;
        const int nc = C - c0 < cb ? C - c0 : cb;
        double aw[ZT_CBLOCK];
        for (int c = 0; c < nc; c++) aw[c] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0;
            const float *d = dout + (size_t)n * C + c0;
            const float r = rstd[n];
#pragma omp simd
            for (int c = 0; c < nc; c++) aw[c] += (double)(x[c] * r * d[c]);
        }
        for (int c = 0; c < nc; c++) dw[c0 + c] += (float)aw[c];
    }
}

/* ------------------------------------------------------------ per-head RMSNorm */

/* One (row, head) at a time, its sum of squares in double in channel
 * order (the CUDA kernel's order: one thread per head). */
void zt_cpu_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                         int n_heads, int stride, int hd) {
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * n_heads * hd >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < n_heads; h++) {
            const size_t r = (size_t)n * n_heads + h;
            float *v = x + (size_t)n * stride + (size_t)h * hd, *k = raw + r * hd;
            double ss = 0.0;
            for (int c = 0; c < hd; c++) {
                k[c] = v[c];
                ss += (double)v[c] * v[c];
            }
            const float q = zt_rms_rstd(ss, hd, eps);
            for (int c = 0; c < hd; c++) v[c] = zt_rms_out(k[c], q, w[c]);
            rstd[r] = q;
        }
}

/* dw first (it reads the output gradient), rows summed in order per
 * channel in double; then each head's input gradient in place. */
void zt_cpu_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                         const float *rstd, int N, int n_heads, int stride, int hd) {
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
    const int par = (size_t)N * n_heads * hd >= ZT_PAR_MIN;
#pragma omp parallel for schedule(static) if (par && hd > 1)
    for (int c = 0; c < hd; c++) {
        double aw = 0.0;
        for (int n = 0; n < N; n++)
            for (int h = 0; h < n_heads; h++) {
                const size_t r = (size_t)n * n_heads + h;
                aw += (double)(raw[r * hd + c] * rstd[r] * dx[(size_t)n * stride + (size_t)h * hd + c]);
            }
        dw[c] += (float)aw;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < n_heads; h++) {
            const size_t r = (size_t)n * n_heads + h;
            const float *k = raw + r * hd, q = rstd[r];
            float *d = dx + (size_t)n * stride + (size_t)h * hd;
            double s = 0.0;
            for (int c = 0; c < hd; c++) s += (double)(w[c] * d[c]) * k[c];
            const float kk = zt_rms_k(s, q, hd);
            for (int c = 0; c < hd; c++) d[c] = zt_rms_dx(k[c], d[c], w[c], q, kk);
        }
}

/* ------------------------------------------------------------ RoPE */

/* x[B*T rows of stride]: the first n_heads heads of hd floats in each row
 * rotated by +angle (dir = 1) or -angle (dir = -1).  cos/sin of the row's
 * hd/2 angles are computed once per row and applied to all its heads. */
ZT_TARGET_CLONES
static void rope(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                 int hd, float dir, float scale) {
    const int N = B * T, h2 = hd / 2;
    if (N <= 0 || h2 <= 0 || n_heads <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * n_heads * hd >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const int t = n % T;
        float cs[h2], sn[h2];
        for (int j = 0; j < h2; j++) {
            const float a = zt_rope_angle(t, inv_freq[j]);
            cs[j] = cosf(a) * scale;
            sn[j] = dir * (sinf(a) * scale);
        }
        float *row = x + (size_t)n * stride;
        for (int h = 0; h < n_heads; h++) {
            float *x1 = row + (size_t)h * hd, *x2 = x1 + h2;
#pragma omp simd
            for (int j = 0; j < h2; j++) zt_rope_rotate(&x1[j], &x2[j], cs[j], sn[j]);
        }
    }
}

void zt_cpu_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                     int hd, float scale) {
    rope(x, inv_freq, B, T, n_heads, stride, hd, 1.0f, scale);
}

void zt_cpu_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                     int hd, float scale) {
    rope(x, inv_freq, B, T, n_heads, stride, hd, -1.0f, scale);
}

/* ------------------------------------------------------------ SwiGLU */

ZT_TARGET_CLONES
void zt_cpu_swiglu_fwd(float *out, const float *gu, int N, int H) {
    if (N <= 0 || H <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * H >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H;
        float *o = out + (size_t)n * H;
#pragma omp simd
        for (int i = 0; i < H; i++) o[i] = zt_swiglu(g[i], u[i]);
    }
}

ZT_TARGET_CLONES
void zt_cpu_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    if (N <= 0 || H <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * H >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H;
        const float *d = dout + (size_t)n * H;
        float *dg = dgu + (size_t)n * 2 * H, *du = dg + H;
#pragma omp simd
        for (int i = 0; i < H; i++) zt_swiglu_bwd(&dg[i], &du[i], g[i], u[i], d[i]);
    }
}

/* ------------------------------------------------------------ GeGLU (Gemma) */

/* out = gelu(g) u with the tanh GELU of gelu_fwd (cpu_nn.c): the same
 * constants (cpu_internal.h) and operations, zt_tanhf */

ZT_TARGET_CLONES
void zt_cpu_geglu_fwd(float *out, const float *gu, int N, int H) {
    if (N <= 0 || H <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * H >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H;
        float *o = out + (size_t)n * H;
#pragma omp simd
        for (int i = 0; i < H; i++) {
            const float x = g[i];
            const float a = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
            o[i] = (0.5f * x * (1.0f + zt_tanhf(a))) * u[i];
        }
    }
}

/* dg = dout u gelu'(g), du = dout gelu(g) */
ZT_TARGET_CLONES
void zt_cpu_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    if (N <= 0 || H <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)N * H >= ZT_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * H, *u = g + H;
        const float *d = dout + (size_t)n * H;
        float *dg = dgu + (size_t)n * 2 * H, *du = dg + H;
#pragma omp simd
        for (int i = 0; i < H; i++) {
            const float x = g[i];
            const float a = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
            const float th = zt_tanhf(a);
            const float sech2 = 1.0f - th * th;
            const float da = ZT_GELU_K * (1.0f + 3.0f * ZT_GELU_A * x * x);
            const float gd = 0.5f * (1.0f + th) + 0.5f * x * sech2 * da;
            const float ge = 0.5f * x * (1.0f + th);
            const float dd = d[i];
            dg[i] = dd * u[i] * gd;
            du[i] = dd * ge;
        }
    }
}

/* ------------------------------------------------------------ logit soft-capping */

/* y = cap tanh(x / cap) with libm's tanhf (accurate near 0, where the
 * logits mostly are); elementwise, so y may alias x */
void zt_cpu_softcap_fwd(float *y, const float *x, size_t n, float cap) {
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = cap * tanhf(x[i] / cap);
}

/* dx = dy (1 - (y / cap)^2); dx may alias dy */
void zt_cpu_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float t = y[i] / cap;
        dx[i] = dy[i] * (1.0f - t * t);
    }
}
