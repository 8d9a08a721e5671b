/*
 * cpu_attention.c -- causal multi-head self-attention on the CPU,
 * memory-efficient: no [T,T] matrix is ever stored.
 *
 * Forward: one query row at a time, online softmax over blocks of keys;
 * keeps only out and the row's log-sum-exp (lse).
 * Backward: parallel over (b, head) -- each thread owns the whole dq/dk/dv
 * slice of its (b, head), so there are no write races -- and recomputes
 * p = exp(q.k * scale - lse) row by row.
 *
 * qkv[B,T,3C]: q at [.., h*hs], k at [.., C + h*hs], v at [.., 2C + h*hs].
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define ZT_ATT_KB 128   /* keys per online-softmax block */

static inline float dotf(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void zt_cpu_attention_fwd(float *out, float *lse, const float *qkv,
                          int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long total = (long)B * NH * T;
    const int par = total * (long)hs * T >= 65536;

#pragma omp parallel if (par)
    {
        float acc[hs];
        float s[ZT_ATT_KB];
        /* t is the fastest index; chunks of 8 rows alternate between
         * threads so the causal triangle is shared out evenly. */
#pragma omp for schedule(static, 8)
        for (long idx = 0; idx < total; idx++) {
            const int t = (int)(idx % T);
            const int h = (int)((idx / T) % NH);
            const int b = (int)(idx / ((long)T * NH));
            const float *base = qkv + (size_t)b * T * C3;
            const float *q = base + (size_t)t * C3 + (size_t)h * hs;
            float m = -INFINITY;
            double l = 0.0;
            for (int i = 0; i < hs; i++) acc[i] = 0.0f;

            for (int j0 = 0; j0 <= t; j0 += ZT_ATT_KB) {
                const int j1 = (t + 1 < j0 + ZT_ATT_KB) ? t + 1 : j0 + ZT_ATT_KB;
                const int nj = j1 - j0;
                float bm = -INFINITY;
                for (int j = 0; j < nj; j++) {
                    const float *k = base + (size_t)(j0 + j) * C3 + C + (size_t)h * hs;
                    const float d = dotf(q, k, hs) * scale;
                    s[j] = d;
                    bm = d > bm ? d : bm;
                }
                const float mnew = bm > m ? bm : m;
                if (mnew != m) {
                    const float corr = zt_expf(m - mnew);  /* 0 on the first block */
                    l *= corr;
#pragma omp simd
                    for (int i = 0; i < hs; i++) acc[i] *= corr;
                    m = mnew;
                }
                float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
                for (int j = 0; j < nj; j++) {
                    const float p = zt_expf(s[j] - m);
                    s[j] = p;
                    bs += p;
                }
                l += bs;
                for (int j = 0; j < nj; j++) {
                    const float *v = base + (size_t)(j0 + j) * C3 + 2 * (size_t)C + (size_t)h * hs;
                    const float p = s[j];
#pragma omp simd
                    for (int i = 0; i < hs; i++) acc[i] += p * v[i];
                }
            }
            const float inv = (float)(1.0 / l);
            float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
#pragma omp simd
            for (int i = 0; i < hs; i++) o[i] = acc[i] * inv;
            lse[((size_t)b * NH + h) * T + t] = m + (float)log(l);
        }
    }
}

void zt_cpu_attention_bwd(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse,
                          int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int BH = B * NH;
    const int par = BH > 1 && (long)BH * T * (long)T * hs >= 65536;

#pragma omp parallel if (par)
    {
        float dq[hs];
#pragma omp for schedule(static)
        for (int bh = 0; bh < BH; bh++) {
            const int b = bh / NH, h = bh % NH;
            const size_t hoff = (size_t)h * hs;
            const float *base = qkv + (size_t)b * T * C3;
            float *dbase = dqkv + (size_t)b * T * C3;
            const float *lrow = lse + (size_t)bh * T;

            /* this (b, h) owns dq, dk and dv at [., h*hs .. +hs) */
            for (int t = 0; t < T; t++) {
                float *r = dbase + (size_t)t * C3 + hoff;
                memset(r, 0, (size_t)hs * sizeof(float));
                memset(r + C, 0, (size_t)hs * sizeof(float));
                memset(r + 2 * (size_t)C, 0, (size_t)hs * sizeof(float));
            }

            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * C3 + hoff;
                const float *dot_ = dout + ((size_t)b * T + t) * C + hoff;
                const float *o = out + ((size_t)b * T + t) * C + hoff;
                const float L = lrow[t];
                const float D = dotf(dot_, o, hs);
                for (int i = 0; i < hs; i++) dq[i] = 0.0f;
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * C3 + C + hoff;
                    const float *v = k + C;
                    float *dk = dbase + (size_t)j * C3 + C + hoff;
                    float *dv = dk + C;
                    const float p = zt_expf(dotf(q, k, hs) * scale - L);
                    const float dp = dotf(dot_, v, hs);
                    const float ds = p * (dp - D) * scale;
#pragma omp simd
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                        dv[i] += p * dot_[i];
                    }
                }
                float *dqt = dbase + (size_t)t * C3 + hoff;
#pragma omp simd
                for (int i = 0; i < hs; i++) dqt[i] = dq[i];
            }
        }
    }
}
