/*
 * cuda_moe.cu -- the Mixture of Experts kernels on the GPU (kernels/backend.h:
 * moe_route_*, rows_*, sigmoid_*; libtrain/moe.c drives them).  Each does
 * what the CPU's (kernels/cpu/cpu_moe.c) does, in the same order:
 *   - routing: one thread a token, the softmax, the top-k (the largest not
 *     taken, the lower expert on ties) and the renormalisation as serial
 *     loops over the row, so ties break exactly as on the CPU;
 *   - rows_scatter: one thread a column, the rows added in order (rows
 *     repeat: the sums' order is fixed, no atomics, deterministic);
 *   - rows_dot: one thread a row, the columns summed in order (rows_dot16
 *     the same over bf16 b, with the row scale; rows_dot16h over bf16 a and b;
 *     rows_sum16 the per-token sum in rows_scatter16's order, a thread an
 *     element of y over the inverse permutation; rows_scatter16 rows_scatter's
 *     over bf16 x);
 *   - rows_gather (grid-stride, elementwise; rows_gather16 the bf16 bits
 *     copied, rows_gather_o16 the fp32 product rounded as it is stored);
 *   - moe_permute (the routing's groups on the device): a block an expert
 *     counts its slots (k_moe_count), one thread turns the counts into
 *     offsets (k_moe_offsets), a block an expert writes its rows in slot
 *     order (k_moe_fill: a block-wide prefix sum of its flags per chunk of
 *     slots), so the same stable order as the CPU's counting sort;
 *   - moe_regroup: a block a piece (rank, local expert), its offsets by
 *     rank and by expert summed from the counts, its rows written in order.
 * Nothing is allocated (no scratch).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "cuda_internal.cuh"

/* ------------------------------------------------------------ routing */

__global__ void k_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N,
                                int E, int K, int norm) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *l = logits + (size_t)n * E;
    float *p = probs + (size_t)n * E, mx = l[0], s = 0;
    for (int e = 1; e < E; ++e) mx = l[e] > mx ? l[e] : mx;
    for (int e = 0; e < E; ++e) s += (p[e] = expf(l[e] - mx));
    for (int e = 0; e < E; ++e) p[e] /= s;
    int *ix = idx + (size_t)n * K;
    float *w = wts + (size_t)n * K, sum = 0;
    for (int k = 0; k < K; ++k) {   /* the largest not taken, lower index on ties */
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

__global__ void k_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                                const float *probs, const int *idx, int N, int E, int K, int norm) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *p = probs + (size_t)n * E, *dw = dwts + (size_t)n * K;
    const int *ix = idx + (size_t)n * K;
    float *dl = dlogits + (size_t)n * E;
    float S = 0, dot = 0;
    for (int k = 0; k < K; ++k) S += p[ix[k]];
    for (int k = 0; k < K; ++k) dot += dw[k] * p[ix[k]];
    for (int e = 0; e < E; ++e) dl[e] = 0;
    for (int k = 0; k < K; ++k) dl[ix[k]] = norm ? (dw[k] - dot / S) / S : dw[k];
    if (dprobs)
        for (int e = 0; e < E; ++e) dl[e] += dprobs[e];
    float pd = 0;
    for (int e = 0; e < E; ++e) pd += p[e] * dl[e];
    for (int e = 0; e < E; ++e) dl[e] = p[e] * (dl[e] - pd);
}

#define ZT_MOE_ROW_THREADS 128

static unsigned row_blocks(int n) { return (unsigned)((n + ZT_MOE_ROW_THREADS - 1) / ZT_MOE_ROW_THREADS); }

void zt_cuda_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                           int K, int norm) {
    if (N <= 0 || E <= 0 || K <= 0) return;
    k_moe_route_fwd<<<row_blocks(N), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(wts, idx, probs, logits,
                                                                            N, E, K, norm);
    ZT_LAUNCHED("k_moe_route_fwd");
}

void zt_cuda_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                           const float *probs, const int *idx, int N, int E, int K, int norm) {
    if (N <= 0 || E <= 0 || K <= 0) return;
    k_moe_route_bwd<<<row_blocks(N), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(dlogits, dwts, dprobs,
                                                                            probs, idx, N, E, K, norm);
    ZT_LAUNCHED("k_moe_route_bwd");
}

/* ------------------------------------------------------------ rows */

__global__ void k_rows_gather(float *out, const float *x, const int *rows, const float *w, int C,
                              size_t total) {
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        const size_t i = t / (size_t)C, c = t - i * (size_t)C;
        const float a = w ? w[i] : 1.0f;
        out[t] = a * x[(size_t)(rows ? rows[i] : (int)i) * C + c];
    }
}

__global__ void k_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int C,
                                size_t total) {
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        const size_t i = t / (size_t)C, c = t - i * (size_t)C;
        out[t] = x[(size_t)(rows ? rows[i] : (int)i) * C + c];
    }
}

/* rows_gather_o16: k_rows_gather's product rounded as it is stored */
__global__ void k_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int C,
                                  size_t total) {
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        const size_t i = t / (size_t)C, c = t - i * (size_t)C;
        const float a = w ? w[i] : 1.0f;
        out16[t] = zt_cvt_f32_to_bf16(a * x[(size_t)(rows ? rows[i] : (int)i) * C + c]);
    }
}

__global__ void k_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n,
                               int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = 0; i < n; ++i) {   /* in order: rows repeat */
        const float a = w ? w[i] : 1.0f;
        y[(size_t)(rows ? rows[i] : i) * C + c] += a * x[(size_t)i * C + c];
    }
}

__global__ void k_rows_dot(float *out, const float *a, const int *rows, const float *b, int n,
                           int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *p = a + (size_t)(rows ? rows[i] : i) * C, *q = b + (size_t)i * C;
    float s = 0;
    for (int c = 0; c < C; ++c) s += p[c] * q[c];
    out[i] = s;
}

/* rows_dot16: k_rows_dot's sum (a thread a row, the columns in order)
 * over the widened b16, each a[i, c] scaled by w[i] as it is read */
__global__ void k_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n,
                             int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float *p = a + (size_t)i * C;
    const uint16_t *q = b16 + (size_t)i * C;
    float s = 0;
    if (w) {
        const float m = w[i];
        for (int c = 0; c < C; ++c) {
            const float v = p[c];
            s += v * zt_cvt_bf16_to_f32(q[c]);
            p[c] = m * v;
        }
    } else {
        for (int c = 0; c < C; ++c) s += p[c] * zt_cvt_bf16_to_f32(q[c]);
    }
    out[i] = s;
}

/* rows_dot16h: k_rows_dot16 with a in bf16, each scaled a[i, c] rounded
 * back in place as it is read */
__global__ void k_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n,
                              int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint16_t *p = a16 + (size_t)i * C;
    const uint16_t *q = b16 + (size_t)i * C;
    float s = 0;
    for (int c = 0; c < C; ++c) {
        const float v = zt_cvt_bf16_to_f32(p[c]);
        s += v * zt_cvt_bf16_to_f32(q[c]);
        if (w) p[c] = zt_cvt_f32_to_bf16(w[i] * v);
    }
    out[i] = s;
}

/* rows_sum16: the inverse permutation (pos[perm[i]] = i, pos -1 before) */
__global__ void k_moe_inverse(int *pos, const int *perm, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pos[perm[i]] = i;
}
/* then a thread an element (t, c) of y: token t's K slots' rows in
 * increasing order (a selection over the K positions, no sort buffer),
 * each added as k_rows_scatter16 adds it */
__global__ void k_rows_sum16(float *y, const uint16_t *x16, const int *pos, const float *w, int N, int K, int C) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)N * C) return;
    const size_t t = e / (size_t)C, c = e % (size_t)C;
    const int *p = pos + t * (size_t)K;
    float s = y[e];
    for (int prev = -1;;) {
        int nx = -1;
        for (int k = 0; k < K; ++k)
            if (p[k] > prev && (nx < 0 || p[k] < nx)) nx = p[k];
        if (nx < 0) break;
        const float a = w ? w[nx] : 1.0f;
        s += a * zt_cvt_bf16_to_f32(x16[(size_t)nx * C + c]);
        prev = nx;
    }
    y[e] = s;
}

/* rows_scatter16: k_rows_scatter over the widened x16 */
__global__ void k_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w,
                                 int n, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = 0; i < n; ++i) {   /* in order: rows repeat */
        const float a = w ? w[i] : 1.0f;
        y[(size_t)(rows ? rows[i] : i) * C + c] += a * zt_cvt_bf16_to_f32(x16[(size_t)i * C + c]);
    }
}

void zt_cuda_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C) {
    if (n <= 0 || C <= 0) return;
    const size_t total = (size_t)n * C;
    k_rows_gather<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, x, rows, w, C, total);
    ZT_LAUNCHED("k_rows_gather");
}

void zt_cuda_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C) {
    if (n <= 0 || C <= 0) return;
    const size_t total = (size_t)n * C;
    k_rows_gather16<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, x, rows, C, total);
    ZT_LAUNCHED("k_rows_gather16");
}

void zt_cuda_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C) {
    if (n <= 0 || C <= 0) return;
    const size_t total = (size_t)n * C;
    k_rows_gather_o16<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out16, x, rows, w, C, total);
    ZT_LAUNCHED("k_rows_gather_o16");
}

void zt_cuda_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C) {
    if (n <= 0 || C <= 0) return;
    k_rows_scatter<<<row_blocks(C), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(y, x, rows, w, n, C);
    ZT_LAUNCHED("k_rows_scatter");
}

void zt_cuda_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C) {
    if (n <= 0) return;
    k_rows_dot<<<row_blocks(n), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(out, a, rows, b, n, C);
    ZT_LAUNCHED("k_rows_dot");
}

void zt_cuda_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C) {
    if (n <= 0) return;
    k_rows_dot16<<<row_blocks(n), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(out, a, b16, w, n, C);
    ZT_LAUNCHED("k_rows_dot16");
}

void zt_cuda_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C) {
    if (n <= 0) return;
    k_rows_dot16h<<<row_blocks(n), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(out, a16, b16, w, n, C);
    ZT_LAUNCHED("k_rows_dot16h");
}

void zt_cuda_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                        int K, int C) {
    if (n <= 0 || N <= 0 || K <= 0 || C <= 0) return;
    ZT_CU(cudaMemsetAsync(pos, 0xff, (size_t)N * K * sizeof(int), zt_cu.stream));
    k_moe_inverse<<<row_blocks(n), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(pos, perm, n);
    if (!ZT_LAUNCHED("k_moe_inverse")) return;
    k_rows_sum16<<<zt_ew_blocks((size_t)N * C), ZT_EW_THREADS, 0, zt_cu.stream>>>(y, x16, pos, w, N, K, C);
    ZT_LAUNCHED("k_rows_sum16");
}

void zt_cuda_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                            int C) {
    if (n <= 0 || C <= 0) return;
    k_rows_scatter16<<<row_blocks(C), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(y, x16, rows, w, n, C);
    ZT_LAUNCHED("k_rows_scatter16");
}

/* ------------------------------------------------------------ groups */

#define ZT_MOE_SCAN 128   /* threads of the permutation's blocks (a power of 2) */

__global__ void k_moe_count(int *off, const int *idx, int NK) {
    __shared__ int part[ZT_MOE_SCAN];
    const int e = blockIdx.x, t = threadIdx.x;
    int c = 0;
    for (int i = t; i < NK; i += ZT_MOE_SCAN) c += idx[i] == e;
    part[t] = c;
    __syncthreads();
    for (int h = ZT_MOE_SCAN / 2; h > 0; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        __syncthreads();
    }
    if (t == 0) off[e + 1] = part[0];
    if (t == 0 && e == 0) off[0] = 0;
}

__global__ void k_moe_offsets(int *off, int E) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int e = 0; e < E; ++e) off[e + 1] += off[e];
}

__global__ void k_moe_fill(int *perm, int *rows, const int *off, const int *idx, int NK, int K) {
    __shared__ int sc[ZT_MOE_SCAN];
    const int e = blockIdx.x, t = threadIdx.x;
    int at = off[e];
    for (int base = 0; base < NK; base += ZT_MOE_SCAN) {
        const int i = base + t, f = i < NK && idx[i] == e;
        sc[t] = f;
        __syncthreads();
        for (int h = 1; h < ZT_MOE_SCAN; h <<= 1) {   /* inclusive prefix sum of the flags */
            const int v = t >= h ? sc[t - h] : 0;
            __syncthreads();
            sc[t] += v;
            __syncthreads();
        }
        if (f) {
            const int p = at + sc[t] - 1;
            perm[p] = i;
            rows[p] = i / K;
        }
        at += sc[ZT_MOE_SCAN - 1];
        __syncthreads();   /* (every thread read sc before the next chunk writes it) */
    }
}

__global__ void k_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El) {
    const int b = blockIdx.x, i = b / El, l = b - i * El;
    int src = 0, dst = 0;   /* the piece's first row by rank and by expert */
    for (int j = 0; j < b; ++j) src += cnt[j];
    for (int ll = 0; ll < El; ++ll)
        for (int ii = 0; ii < P; ++ii)
            if (ll < l || (ll == l && ii < i)) dst += cnt[ii * El + ll];
    for (int r = threadIdx.x; r < cnt[b]; r += blockDim.x) {
        perm[dst + r] = src + r;
        inv[src + r] = dst + r;
    }
}

void zt_cuda_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E) {
    if (E <= 0) return;
    const int NK = N * K;
    k_moe_count<<<(unsigned)E, ZT_MOE_SCAN, 0, zt_cu.stream>>>(off, idx, NK);
    ZT_LAUNCHED("k_moe_count");
    k_moe_offsets<<<1, 1, 0, zt_cu.stream>>>(off, E);
    ZT_LAUNCHED("k_moe_offsets");
    if (NK <= 0) return;
    k_moe_fill<<<(unsigned)E, ZT_MOE_SCAN, 0, zt_cu.stream>>>(perm, rows, off, idx, NK, K);
    ZT_LAUNCHED("k_moe_fill");
}

void zt_cuda_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El) {
    if (P <= 0 || El <= 0) return;
    k_moe_regroup<<<(unsigned)(P * El), ZT_MOE_ROW_THREADS, 0, zt_cu.stream>>>(perm, inv, cnt, P, El);
    ZT_LAUNCHED("k_moe_regroup");
}

/* ------------------------------------------------------------ sigmoid */

__global__ void k_sigmoid_fwd(float *y, const float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
}

__global__ void k_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void zt_cuda_sigmoid_fwd(float *y, const float *x, size_t n) {
    if (!n) return;
    k_sigmoid_fwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(y, x, n);
    ZT_LAUNCHED("k_sigmoid_fwd");
}

void zt_cuda_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n) {
    if (!n) return;
    k_sigmoid_bwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(dx, dy, y, n);
    ZT_LAUNCHED("k_sigmoid_bwd");
}
