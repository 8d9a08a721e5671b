/* cpu_moe.c -- the Mixture of Experts kernels of the CPU backend
 * (kernels/backend.h: moe_route_*, rows_*, moe_permute, moe_regroup, sigmoid_*). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "cpu_internal.h"
#include "half.h"   /* zt_bf16_to_f32 */

#define ZT_PAR_MIN 32768   /* elements below which a loop stays serial (cpu_llama.c) */

void zt_cpu_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                          int K, int norm) {
#pragma omp parallel for schedule(static) if ((size_t)N * E >= ZT_PAR_MIN)
    for (int n = 0; n < N; ++n) {
        const float *l = logits + (size_t)n * E;
        float *p = probs + (size_t)n * E, mx = l[0], s = 0;
        for (int e = 1; e < E; ++e) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; ++e) s += (p[e] = expf(l[e] - mx));
        for (int e = 0; e < E; ++e) p[e] /= s;
        int *ix = idx + (size_t)n * K;
        float *w = wts + (size_t)n * K, sum = 0;
        for (int k = 0; k < K; ++k) {   /* selection: the largest not taken, lower index on ties */
            int best = -1;
            for (int e = 0; e < E; ++e) {
                int taken = 0;
                for (int j = 0; j < k; ++j) taken |= ix[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ix[k] = best;
            w[k] = p[best];
            sum += w[k];
        }
        if (norm)
            for (int k = 0; k < K; ++k) w[k] /= sum;
    }
}

void zt_cpu_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                          const float *probs, const int *idx, int N, int E, int K, int norm) {
#pragma omp parallel for schedule(static) if ((size_t)N * E >= ZT_PAR_MIN)
    for (int n = 0; n < N; ++n) {
        const float *p = probs + (size_t)n * E, *dw = dwts + (size_t)n * K;
        const int *ix = idx + (size_t)n * K;
        float *dl = dlogits + (size_t)n * E;
        /* w_k = p_k / S (norm), S = sum_j p_j: dp_k = (dw_k - sum_j dw_j w_j) / S */
        float S = 0, dot = 0;
        for (int k = 0; k < K; ++k) S += p[ix[k]];
        for (int k = 0; k < K; ++k) dot += dw[k] * p[ix[k]];
        for (int e = 0; e < E; ++e) dl[e] = 0;
        for (int k = 0; k < K; ++k) dl[ix[k]] = norm ? (dw[k] - dot / S) / S : dw[k];
        if (dprobs)
            for (int e = 0; e < E; ++e) dl[e] += dprobs[e];
        /* softmax: dl_e = p_e (dp_e - sum_j p_j dp_j) */
        float pd = 0;
        for (int e = 0; e < E; ++e) pd += p[e] * dl[e];
        for (int e = 0; e < E; ++e) dl[e] = p[e] * (dl[e] - pd);
    }
}

void zt_cpu_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i) {
        const float *s = x + (size_t)(rows ? rows[i] : i) * C;
        float *o = out + (size_t)i * C;
        const float a = w ? w[i] : 1.0f;
        for (int c = 0; c < C; ++c) o[c] = a * s[c];
    }
}

/* rows_gather_o16 (backend.h): rows_gather's product rounded as it is stored */
void zt_cpu_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i) {
        const float *s = x + (size_t)(rows ? rows[i] : i) * C;
        uint16_t *o = out16 + (size_t)i * C;
        const float a = w ? w[i] : 1.0f;
        for (int c = 0; c < C; ++c) o[c] = zt_f32_to_bf16(a * s[c]);
    }
}

void zt_cpu_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i)
        memmove(out + (size_t)i * C, x + (size_t)(rows ? rows[i] : i) * C, (size_t)C * sizeof *out);
}

void zt_cpu_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C) {
    for (int i = 0; i < n; ++i) {   /* serial: rows repeat, the order of the sums is fixed */
        float *o = y + (size_t)(rows ? rows[i] : i) * C;
        const float *s = x + (size_t)i * C;
        const float a = w ? w[i] : 1.0f;
        for (int c = 0; c < C; ++c) o[c] += a * s[c];
    }
}

void zt_cpu_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i) {
        const float *p = a + (size_t)(rows ? rows[i] : i) * C, *q = b + (size_t)i * C;
        float s = 0;
        for (int c = 0; c < C; ++c) s += p[c] * q[c];
        out[i] = s;
    }
}

/* rows_dot16 (backend.h): rows_dot's sums over the widened b16, then the
 * row scale in place (rows_gather's product) */
void zt_cpu_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i) {
        float *p = a + (size_t)i * C;
        const uint16_t *q = b16 + (size_t)i * C;
        float s = 0;
        if (w) {   /* (the sum reads each a[i, c] before its scale) */
            const float m = w[i];
            for (int c = 0; c < C; ++c) {
                s += p[c] * zt_bf16_to_f32(q[c]);
                p[c] = m * p[c];
            }
        } else {
            for (int c = 0; c < C; ++c) s += p[c] * zt_bf16_to_f32(q[c]);
        }
        out[i] = s;
    }
}

/* rows_dot16h (backend.h): rows_dot16 over the widened a16, the scaled
 * row rounded back in place */
void zt_cpu_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C) {
#pragma omp parallel for schedule(static) if ((size_t)n * C >= ZT_PAR_MIN)
    for (int i = 0; i < n; ++i) {
        uint16_t *p = a16 + (size_t)i * C;
        const uint16_t *q = b16 + (size_t)i * C;
        float s = 0;
        for (int c = 0; c < C; ++c) {
            const float v = zt_bf16_to_f32(p[c]);
            s += v * zt_bf16_to_f32(q[c]);
            if (w) p[c] = zt_f32_to_bf16(w[i] * v);
        }
        out[i] = s;
    }
}

/* rows_scatter16 (backend.h): rows_scatter of the widened x16 */
/* o[c] += a fp32(s[c]), c < C: one row of rows_scatter16 and rows_sum16 */
static void add_row16(float *o, const uint16_t *s, float a, int C) {
    for (int c = 0; c < C; ++c) o[c] += a * zt_bf16_to_f32(s[c]);
}
void zt_cpu_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                           int C) {
    for (int i = 0; i < n; ++i)   /* serial: rows repeat, the order of the sums is fixed */
        add_row16(y + (size_t)(rows ? rows[i] : i) * C, x16 + (size_t)i * C, w ? w[i] : 1.0f, C);
}

/* rows_sum16 (backend.h): rows_scatter16's serial sums, each row's token
 * perm[i] / K (pos unused) */
void zt_cpu_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                       int K, int C) {
    (void)pos, (void)N;
    if (K <= 0) return;
    for (int i = 0; i < n; ++i)
        add_row16(y + (size_t)(perm[i] / K) * C, x16 + (size_t)i * C, w ? w[i] : 1.0f, C);
}

void zt_cpu_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E) {
    const size_t NK = (size_t)N * K;
    for (int e = 0; e <= E; ++e) off[e] = 0;
    for (size_t i = 0; i < NK; ++i)
        if (idx[i] >= 0 && idx[i] < E) off[idx[i] + 1]++;
    for (int e = 0; e < E; ++e) off[e + 1] += off[e];   /* each expert's first row */
    for (size_t i = 0; i < NK; ++i)   /* off[e] as expert e's fill position */
        if (idx[i] >= 0 && idx[i] < E) {
            const int at = off[idx[i]]++;
            perm[at] = (int)i;
            rows[at] = (int)(i / (size_t)K);
        }
    for (int e = E - 1; e > 0; --e) off[e] = off[e - 1];   /* (each now the next one's first) */
    off[0] = 0;
}

void zt_cpu_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El) {
    int dst = 0;
    for (int l = 0; l < El; ++l)
        for (int i = 0; i < P; ++i) {
            int src = 0;   /* piece (i, l)'s place by rank */
            for (int j = 0; j < i * El + l; ++j) src += cnt[j];
            for (int r = 0; r < cnt[i * El + l]; ++r, ++dst) {
                perm[dst] = src + r;
                inv[src + r] = dst;
            }
        }
}

void zt_cpu_sigmoid_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void zt_cpu_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n) {
    for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}
