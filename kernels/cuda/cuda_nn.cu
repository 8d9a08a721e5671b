/*
 * cuda_nn.cu -- encoder, LayerNorm, GELU, softmax + cross-entropy and the
 * column sum on the GPU.
 *
 * Deterministic without float atomics:
 *  - encoder backward sorts the positions by token (a stable radix sort),
 *    and each token's rows are added in position order, exactly like the
 *    CPU loop (same additions, same order: bitwise equal results);
 *  - reductions over rows (LayerNorm dw/db, dbias) are two-pass: fixed row
 *    chunks give partial sums in double, added in chunk order.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <cub/device/device_radix_sort.cuh>

#include "cuda_convert.h"
#include "cuda_internal.cuh"

/* ------------------------------------------------------------ encoder */

__global__ void k_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int T,
                              int C, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)C;
        const int c = (int)(i - n * (size_t)C);
        const int t = (int)(n % (size_t)T);
        out[i] = wpe ? wte[(size_t)inp[n] * C + c] + wpe[(size_t)t * C + c]
                     : wte[(size_t)inp[n] * C + c];
    }
}

__global__ void k_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16,
                                  const float *wpe, int T, int C, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)C;
        const int c = (int)(i - n * (size_t)C);
        const int t = (int)(n % (size_t)T);
        const float w = __uint_as_float((unsigned)wte16[(size_t)inp[n] * C + c] << 16);
        out[i] = wpe ? w + wpe[(size_t)t * C + c] : w;
    }
}

void zt_cuda_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16, const float *wpe,
                             int B, int T, int C) {
    const size_t total = (size_t)B * T * C;
    if (B <= 0 || T <= 0 || C <= 0) return;
    k_encoder_fwd_w16<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, inp, wte16,
                                                                               wpe, T, C, total);
    ZT_LAUNCHED("k_encoder_fwd_w16");
}

void zt_cuda_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B,
                         int T, int C) {
    const size_t total = (size_t)B * T * C;
    if (B <= 0 || T <= 0 || C <= 0) return;
    k_encoder_fwd<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, inp, wte, wpe, T, C,
                                                                           total);
    ZT_LAUNCHED("k_encoder_fwd");
}

/* dwpe[t, c] += dout[b, t, c] for b = 0, 1, ... in order (as the CPU) */
__global__ void k_encoder_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C) {
    const size_t total = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += dout[(size_t)b * total + i];
        dwpe[i] = acc;
    }
}

__global__ void k_iota(int *x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
}

/* Block (s, y): if s starts a run of equal tokens in the sorted keys, add the
 * run's rows (in position order) into dwte[token] for channels
 * [y*blockDim, (y+1)*blockDim). */
__global__ void k_encoder_bwd_wte(float *dwte, const float *dout, const int *keys, const int *pos,
                                  int N, int C) {
    const int s = blockIdx.x;
    const int tok = keys[s];
    if (s > 0 && keys[s - 1] == tok) return;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float *dst = dwte + (size_t)tok * C + c;
    float acc = *dst;
    for (int j = s; j < N && keys[j] == tok; j++) acc += dout[(size_t)pos[j] * C + c];
    *dst = acc;
}

void zt_cuda_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                         int C) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    if (dwpe) {   /* NULL: no position embeddings (Llama) */
        k_encoder_bwd_wpe<<<zt_ew_blocks((size_t)T * C), ZT_EW_THREADS, 0, zt_cu.stream>>>(dwpe, dout,
                                                                                           B, T, C);
        if (!ZT_LAUNCHED("k_encoder_bwd_wpe")) return;
    }

    /* stable sort of (token, position) pairs by token */
    size_t tmp_bytes = 0;
    if (!ZT_CU(cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, (const int *)NULL, (int *)NULL,
                                               (const int *)NULL, (int *)NULL, N, 0,
                                               (int)sizeof(int) * 8, zt_cu.stream)))
        return;
    const size_t nb = zt_al256((size_t)N * sizeof(int));
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_encoder_bwd(N, tmp_bytes), "encoder backward sort");
    if (!s) return;
    int *pos_in = (int *)s, *keys = (int *)(s + nb), *pos = (int *)(s + 2 * nb);
    void *tmp = s + 3 * nb;
    k_iota<<<zt_ew_blocks((size_t)N), ZT_EW_THREADS, 0, zt_cu.stream>>>(pos_in, N);
    if (!ZT_LAUNCHED("k_iota")) return;
    if (!ZT_CU(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, inp, keys, pos_in, pos, N, 0,
                                               (int)sizeof(int) * 8, zt_cu.stream)))
        return;
    const int threads = 128;
    const dim3 grid((unsigned)N, (unsigned)((C + threads - 1) / threads));
    k_encoder_bwd_wte<<<grid, threads, 0, zt_cu.stream>>>(dwte, dout, keys, pos, N, C);
    ZT_LAUNCHED("k_encoder_bwd_wte");
}

/* ------------------------------------------------------------ column sums */

#define ZT_COL_THREADS 128
#define ZT_COL_MAXCHUNKS ZT_CUDA_COL_MAXCHUNKS

/* Row chunks for a reduction over N rows: a function of N only
 * (cuda_workspace.h: the planner sizes the partials with it too). */
static int col_chunks(int N, int *rows_per_chunk) { return zt_cuda_ws_col_chunks(N, rows_per_chunk); }

/* a column sum's element as fp32: itself, or the bf16 value widened (exact) */
__device__ __forceinline__ float col_ld(const float *p) { return *p; }
__device__ __forceinline__ float col_ld(const uint16_t *p) { return zt_cvt_bf16_to_f32(*p); }

/* part[p, c] = sum over rows of chunk p of src[n * ld + c] (double, in
 * order); src fp32 or (S = uint16_t, k_colsum16_part) bf16 bits: the same
 * sums in the same order, so bitwise those of the widened values */
template <typename S>
__global__ void k_colsum_part(double *part, const S *src, int N, int C, size_t ld, int R) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int p = blockIdx.y;
    if (c >= C) return;
    const int n0 = p * R, n1 = min(N, n0 + R);
    double acc = 0.0;
    for (int n = n0; n < n1; n++) acc += (double)col_ld(&src[(size_t)n * ld + c]);
    part[(size_t)p * C + c] = acc;
}

/* dst[c] += sum over p of part[p, c], in order; two or three arrays at
 * once when part2 / part3 are set (each column's sums independent) */
__global__ void k_colsum_final(float *dst, const double *part, float *dst2, const double *part2,
                               float *dst3, const double *part3, int P, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double a = 0.0, b = 0.0, e = 0.0;
    for (int p = 0; p < P; p++) {
        a += part[(size_t)p * C + c];
        if (part2) b += part2[(size_t)p * C + c];
        if (part3) e += part3[(size_t)p * C + c];
    }
    dst[c] += (float)a;
    if (dst2) dst2[c] += (float)b;
    if (dst3) dst3[c] += (float)e;
}

void zt_cuda_colsum_final(float *dst, const double *part, int P, int C) {
    if (P <= 0 || C <= 0) return;
    k_colsum_final<<<(C + ZT_COL_THREADS - 1) / ZT_COL_THREADS, ZT_COL_THREADS, 0, zt_cu.stream>>>(
        dst, part, NULL, NULL, NULL, NULL, P, C);
    ZT_LAUNCHED("k_colsum_final");
}

/* zt_cuda_colsum_acc of src[N, C] (row stride ld) in fp32 or (S =
 * uint16_t) bf16 bits; name: the first pass's kernel, as launched */
template <typename S>
static void colsum_acc(float *dst, const S *src, int N, int C, size_t ld, const char *name) {
    if (N <= 0 || C <= 0) return;
    int R;
    const int P = col_chunks(N, &R);
    double *part = (double *)zt_cuda_scratch(zt_cuda_ws_colsum(N, C), "column sum");
    if (!part) return;
    const dim3 g1((unsigned)((C + ZT_COL_THREADS - 1) / ZT_COL_THREADS), (unsigned)P);
    k_colsum_part<S><<<g1, ZT_COL_THREADS, 0, zt_cu.stream>>>(part, src, N, C, ld, R);
    if (!ZT_LAUNCHED(name)) return;
    k_colsum_final<<<(C + ZT_COL_THREADS - 1) / ZT_COL_THREADS, ZT_COL_THREADS, 0, zt_cu.stream>>>(
        dst, part, NULL, NULL, NULL, NULL, P, C);
    ZT_LAUNCHED("k_colsum_final");
}

void zt_cuda_colsum_acc(float *dst, const float *src, int N, int C, size_t ld) {
    colsum_acc(dst, src, N, C, ld, "k_colsum_part");
}

void zt_cuda_colsum16_acc(float *dst, const uint16_t *src16, int N, int C, size_t ld) {
    colsum_acc(dst, src16, N, C, ld, "k_colsum16_part");
}

/* ------------------------------------------------------------ LayerNorm */

#define ZT_LN_THREADS 256   /* one warp per row */

/* (the norms' kernels write out in fp32 or, O = uint16_t, its bf16
 * rounding, k_to_bf16's: the same operations either way, cuda_internal.cuh
 * zt_st_out) */
template <typename O>
__global__ void __launch_bounds__(ZT_LN_THREADS)
k_layernorm_fwd(O *out, float *mean, float *rstd, const float *inp, const float *w,
                const float *b, int N, int C) {
    const int row = blockIdx.x * (ZT_LN_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    O *o = out + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    s = zt_warp_sum(s);
    const float m = s / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - m;
        v += d * d;
    }
    v = zt_warp_sum(v) / (float)C;
    const float r = 1.0f / sqrtf(v + 1e-5f);
    for (int c = lane; c < C; c += 32) zt_st_out(&o[c], (x[c] - m) * r * w[c] + b[c]);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* res = a + b, then k_layernorm_fwd's row of res: each lane adds and
 * writes the elements it later reads back, so the values are add's then
 * layernorm_fwd's, bitwise (res may alias a); the branch b in fp32 or
 * (Bt uint16_t, k_add_layernorm_fwd16b) bf16 bits widened exactly (col_ld) */
template <typename O, typename Bt>
__device__ __forceinline__ void add_layernorm_fwd_row(float *res, O *out, float *mean, float *rstd,
                                                      const float *a, const Bt *bb, const float *w,
                                                      const float *b, int N, int C) {
    const int row = blockIdx.x * (ZT_LN_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *xa = a + (size_t)row * C;
    const Bt *xb = bb + (size_t)row * C;
    float *x = res + (size_t)row * C;
    O *o = out + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float xv = xa[c] + col_ld(&xb[c]);
        x[c] = xv;
        s += xv;
    }
    s = zt_warp_sum(s);
    const float m = s / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - m;
        v += d * d;
    }
    v = zt_warp_sum(v) / (float)C;
    const float r = 1.0f / sqrtf(v + 1e-5f);
    for (int c = lane; c < C; c += 32) zt_st_out(&o[c], (x[c] - m) * r * w[c] + b[c]);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <typename O>
__global__ void __launch_bounds__(ZT_LN_THREADS)
k_add_layernorm_fwd(float *res, O *out, float *mean, float *rstd, const float *a,
                    const float *bb, const float *w, const float *b, int N, int C) {
    add_layernorm_fwd_row<O, float>(res, out, mean, rstd, a, bb, w, b, N, C);
}
/* the branch b16 in bf16, out16 bf16 (backend.h add_layernorm_fwd16b) */
__global__ void __launch_bounds__(ZT_LN_THREADS)
k_add_layernorm_fwd16b(float *res, uint16_t *out16, float *mean, float *rstd, const float *a,
                       const uint16_t *b16, const float *w, const float *b, int N, int C) {
    add_layernorm_fwd_row<uint16_t, uint16_t>(res, out16, mean, rstd, a, b16, w, b, N, C);
}

void zt_cuda_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                               const float *bb, const float *w, const float *b, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_LN_THREADS / 32;
    k_add_layernorm_fwd<float><<<(N + rows - 1) / rows, ZT_LN_THREADS, 0, zt_cu.stream>>>(
        res, out, mean, rstd, a, bb, w, b, N, C);
    ZT_LAUNCHED("k_add_layernorm_fwd");
}
void zt_cuda_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                 const float *a, const float *bb, const float *w, const float *b,
                                 int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_LN_THREADS / 32;
    k_add_layernorm_fwd<uint16_t><<<(N + rows - 1) / rows, ZT_LN_THREADS, 0, zt_cu.stream>>>(
        res, out16, mean, rstd, a, bb, w, b, N, C);
    ZT_LAUNCHED("k_add_layernorm_fwd16");
}

/* the branch in bf16 (backend.h add_layernorm_fwd16b): the same row
 * reading b16 widened, no fp32 branch */
void zt_cuda_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                  const float *a, const uint16_t *b16, const float *w,
                                  const float *b, int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_LN_THREADS / 32;
    k_add_layernorm_fwd16b<<<(N + rows - 1) / rows, ZT_LN_THREADS, 0, zt_cu.stream>>>(
        res, out16, mean, rstd, a, b16, w, b, N, C);
    ZT_LAUNCHED("k_add_layernorm_fwd16b");
}

void zt_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_LN_THREADS / 32;
    k_layernorm_fwd<float><<<(N + rows - 1) / rows, ZT_LN_THREADS, 0, zt_cu.stream>>>(
        out, mean, rstd, inp, w, b, N, C);
    ZT_LAUNCHED("k_layernorm_fwd");
}
void zt_cuda_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                             const float *inp, const float *w, const float *b, int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_LN_THREADS / 32;
    k_layernorm_fwd<uint16_t><<<(N + rows - 1) / rows, ZT_LN_THREADS, 0, zt_cu.stream>>>(
        out16, mean, rstd, inp, w, b, N, C);
    ZT_LAUNCHED("k_layernorm_fwd16");
}

/* One row of dinp (+=), by one warp (lane-strided sums, zt_warp_sum);
 * Tout: dout's type (uint16_t: layernorm_bwd16d's bf16 gradient, widened
 * exactly by col_ld) */
template <typename Tout>
__device__ __forceinline__ void layernorm_bwd_row(float *dinp, const Tout *dout, const float *inp,
                                                  const float *w, const float *mean,
                                                  const float *rstd, int row, int lane, int C,
                                                  uint16_t *dinp16) {
    const float *x = inp + (size_t)row * C;
    const Tout *d = dout + (size_t)row * C;
    float *di = dinp + (size_t)row * C;
    const float m = mean[row], r = rstd[row];
    float sd = 0.0f, sdn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float norm = (x[c] - m) * r;
        const float dn = w[c] * col_ld(&d[c]);
        sd += dn;
        sdn += dn * norm;
    }
    sd = zt_warp_sum(sd);
    sdn = zt_warp_sum(sdn);
    const float mean_dn = sd / (float)C;
    const float mean_dnn = sdn / (float)C;
    for (int c = lane; c < C; c += 32) {
        const float norm = (x[c] - m) * r;
        const float dn = w[c] * col_ld(&d[c]);
        di[c] += (dn - mean_dn - norm * mean_dnn) * r;
        /* layernorm_bwd16: the accumulated value rounded beside it */
        if (dinp16) dinp16[(size_t)row * C + c] = zt_cvt_f32_to_bf16(di[c]);
    }
}

/* The norms' backward in one pass over dout and the input: a block per row
 * chunk p of zt_cuda_ws_col_chunks (R rows), its warps taking the chunk's
 * rows ZT_NB_WARPS at a time.  Each group: a warp per row writes dinp
 * (+=, layernorm_bwd_row), then the block's threads, a column each, add
 * the group's rows to the chunk's partial dw, db in row order (double,
 * kept in pw / pb[p, c] between groups): the same rows in the same order
 * as a column's loop over the whole chunk, so bitwise those sums; the
 * group's rows were just read (on chip).  With ps (layernorm_bwd16d's
 * dsum) the column pass also adds the group's accumulated dinp values, the
 * rows the warps have just written (the barrier makes them visible to the
 * block), into ps[p, c]: k_colsum_part's chunks, order and precision over
 * that dinp, so bitwise matmul_bwd's dbias of it.  Without ps the column
 * pass reads what the row pass reads, never dinp. */
#define ZT_NB_WARPS 16
#define ZT_NB_THREADS (ZT_NB_WARPS * 32)
template <typename Tout>
__global__ void __launch_bounds__(ZT_NB_THREADS)
k_layernorm_bwd(float *dinp, double *pw, double *pb, double *ps, const Tout *dout,
                const float *inp, const float *w, const float *mean, const float *rstd, int N,
                int C, int R, uint16_t *dinp16) {
    const int p = blockIdx.x, lane = threadIdx.x & 31;
    const int n0 = p * R, n1 = min(N, n0 + R);
    double *qw = pw + (size_t)p * C, *qb = pb + (size_t)p * C;
    double *qs = ps ? ps + (size_t)p * C : NULL;
    for (int g0 = n0; g0 < n1; g0 += ZT_NB_WARPS) {
        const int row = g0 + (threadIdx.x >> 5), g1 = min(n1, g0 + ZT_NB_WARPS);
        if (row < g1) layernorm_bwd_row(dinp, dout, inp, w, mean, rstd, row, lane, C, dinp16);
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += ZT_NB_THREADS) {
            double aw = g0 == n0 ? 0.0 : qw[c], ab = g0 == n0 ? 0.0 : qb[c];
            for (int n = g0; n < g1; n++) {
                const float x = inp[(size_t)n * C + c], d = col_ld(&dout[(size_t)n * C + c]);
                aw += (double)((x - mean[n]) * rstd[n] * d);
                ab += (double)d;
            }
            qw[c] = aw;
            qb[c] = ab;
            if (qs) {
                double as = g0 == n0 ? 0.0 : qs[c];
                for (int n = g0; n < g1; n++) as += (double)dinp[(size_t)n * C + c];
                qs[c] = as;
            }
        }
    }
}

template <typename Tout>
static void layernorm_bwd(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                          const Tout *dout, const float *inp, const float *w, const float *mean,
                          const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    int R;
    const int P = col_chunks(N, &R);
    const size_t pbytes = zt_al256((size_t)P * C * sizeof(double));
    char *s = (char *)zt_cuda_scratch(dsum ? zt_cuda_ws_layernorm_bwd_sum(N, C)
                                           : zt_cuda_ws_layernorm_bwd(N, C),
                                      "layernorm backward");
    if (!s) return;
    double *pw = (double *)s, *pb = (double *)(s + pbytes);
    double *ps = dsum ? (double *)(s + 2 * pbytes) : NULL;
    k_layernorm_bwd<Tout><<<P, ZT_NB_THREADS, 0, zt_cu.stream>>>(dinp, pw, pb, ps, dout, inp, w,
                                                                 mean, rstd, N, C, R, dinp16);
    if (!ZT_LAUNCHED("k_layernorm_bwd")) return;
    /* (dw, db and dsum's final sums in one launch) */
    k_colsum_final<<<(C + ZT_COL_THREADS - 1) / ZT_COL_THREADS, ZT_COL_THREADS, 0, zt_cu.stream>>>(
        dw, pw, db, pb, dsum, ps, P, C);
    ZT_LAUNCHED("k_colsum_final");
}

void zt_cuda_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *w, const float *mean, const float *rstd, int N, int C) {
    layernorm_bwd(dinp, (uint16_t *)NULL, dw, db, (float *)NULL, dout, inp, w, mean, rstd, N, C);
}
void zt_cuda_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                             const float *dout, const float *inp, const float *w,
                             const float *mean, const float *rstd, int N, int C) {
    layernorm_bwd(dinp, dinp16, dw, db, (float *)NULL, dout, inp, w, mean, rstd, N, C);
}
/* layernorm_bwd16d (backend.h): the same kernel on dout16 (or dout), with
 * the column sums of the accumulated dinp where dsum is given */
void zt_cuda_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                              const float *dout, const uint16_t *dout16, const float *inp,
                              const float *w, const float *mean, const float *rstd, int N, int C) {
    if (!dout == !dout16) {
        zt_cuda_fail(__FILE__, __LINE__, "layernorm_bwd16d", "exactly one of dout and dout16 must be given",
                     "(nothing computed)");
        return;
    }
    if (dout16) layernorm_bwd(dinp, dinp16, dw, db, dsum, dout16, inp, w, mean, rstd, N, C);
    else layernorm_bwd(dinp, dinp16, dw, db, dsum, dout, inp, w, mean, rstd, N, C);
}

/* ------------------------------------------------------------ GELU */

#define ZT_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define ZT_GELU_A 0.044715f

/* (one function for k_gelu_fwd and k_gelu_fwd16: the same operations) */
__device__ __forceinline__ float gelu_val(float x) {
    const float u = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__global__ void k_gelu_fwd(float *out, const float *inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = gelu_val(inp[i]);
}

/* gelu_fwd16: bf16 in, bf16 out (the fp32 kernel's value rounded) */
__global__ void k_gelu_fwd16(uint16_t *out, const uint16_t *inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f32_to_bf16(gelu_val(zt_cvt_bf16_to_f32(inp[i])));
}

/* gelu_fwd16r (backend.h): the fp32 input read once, its bf16 rounding
 * written into in16 and k_gelu_fwd16's operations on the rounded value */
__global__ void k_gelu_fwd16r(uint16_t *out, uint16_t *in16, const float *inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint16_t r = zt_cvt_f32_to_bf16(inp[i]);
        in16[i] = r;
        out[i] = zt_cvt_f32_to_bf16(gelu_val(zt_cvt_bf16_to_f32(r)));
    }
}

/* matmul_gelu_fwd_o16's fallback (backend.h): the fp32 pre read once, its
 * rounding into pre16 and the GELU of the fp32 value, rounded, into out16
 * (GELU_AUX_BIAS with a bf16 D and aux: to_bf16 of matmul_gelu_fwd's) */
__global__ void k_gelu_fwd16p(uint16_t *out, uint16_t *pre16, const float *pre, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float x = pre[i];
        pre16[i] = zt_cvt_f32_to_bf16(x);
        out[i] = zt_cvt_f32_to_bf16(gelu_val(x));
    }
}

__device__ __forceinline__ float gelu_grad(float x) {
    const float u = ZT_GELU_K * (x + ZT_GELU_A * x * x * x);
    const float th = tanhf(u);
    const float sech2 = 1.0f - th * th;
    const float du = ZT_GELU_K * (1.0f + 3.0f * ZT_GELU_A * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}

__global__ void k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dinp[i] = gelu_grad(inp[i]) * dout[i];
}

/* k_gelu_bwd on the widened inp16, its values also rounded into dinp16
 * (matmul_dgelu_bwd_o16's unfused path; dinp may be dout) */
__global__ void k_gelu_bwd_o16(uint16_t *dinp16, float *dinp, const uint16_t *inp16,
                               const float *dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = gelu_grad(zt_cvt_bf16_to_f32(inp16[i])) * dout[i];
        dinp[i] = v;
        dinp16[i] = zt_cvt_f32_to_bf16(v);
    }
}

void zt_cuda_gelu_fwd(float *out, const float *inp, size_t n) {
    if (!n) return;
    k_gelu_fwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, inp, n);
    ZT_LAUNCHED("k_gelu_fwd");
}

void zt_cuda_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n) {
    (void)tmp;
    if (!n) return;
    k_gelu_fwd16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out16, in16, n);
    ZT_LAUNCHED("k_gelu_fwd16");
}

void zt_cuda_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n) {
    (void)tmp;
    if (!n) return;
    k_gelu_fwd16r<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out16, in16, in, n);
    ZT_LAUNCHED("k_gelu_fwd16r");
}

void zt_cuda_gelu_fwd16p(uint16_t *out16, uint16_t *pre16, const float *pre, size_t n) {
    if (!n) return;
    k_gelu_fwd16p<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out16, pre16, pre, n);
    ZT_LAUNCHED("k_gelu_fwd16p");
}

void zt_cuda_gelu_bwd_o16(uint16_t *dinp16, float *dinp, const uint16_t *inp16, const float *dout,
                          size_t n) {
    if (!n) return;
    k_gelu_bwd_o16<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(dinp16, dinp, inp16, dout, n);
    ZT_LAUNCHED("k_gelu_bwd_o16");
}

void zt_cuda_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    if (!n) return;
    k_gelu_bwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(dinp, inp, dout, n);
    ZT_LAUNCHED("k_gelu_bwd");
}

/* ------------------------------------------------------------ softmax + CE */

#define ZT_XENT_THREADS 512   /* one block per row */

/* probs may be the same memory as logits: every read of a row happens
 * before the block barrier inside the reductions, every write after. */
__global__ void __launch_bounds__(ZT_XENT_THREADS)
k_xent_fwd(float *losses, float *probs, const float *logits, const int *targets, int V) {
    __shared__ float sh[32];
    const int n = blockIdx.x;
    const float *x = logits + (size_t)n * V;
    float *p = probs + (size_t)n * V;
    const int tgt = targets ? targets[n] : -1;
    const bool valid = tgt >= 0 && tgt < V;
    const float xt = valid ? x[tgt] : 0.0f;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = zt_block_max(mx, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(x[j] - mx);
    s = zt_block_sum(s, sh);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = expf(x[j] - mx) * inv;
    if (threadIdx.x == 0 && losses) losses[n] = valid ? logf(s) - (xt - mx) : 0.0f;
}

/* dlogits may be the same memory as probs: elementwise */
__global__ void k_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss,
                           int V) {
    const int n = blockIdx.x;
    const float *p = probs + (size_t)n * V;
    float *d = dlogits + (size_t)n * V;
    const int tgt = targets ? targets[n] : -1;
    if (tgt < 0 || tgt >= V) {
        for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = 0.0f;
        return;
    }
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float pj = p[j];
        d[j] = (j == tgt ? pj - 1.0f : pj) * dloss;
    }
}

/* k_xent_fwd then k_xent_bwd on one row in place: the same reductions in the
 * same order (so the same max, sum and probabilities, bitwise), then each
 * thread overwrites the elements it read with their gradient (no element is
 * read by another thread after the reductions' barriers). */
__global__ void __launch_bounds__(ZT_XENT_THREADS)
k_xent_fused(float *losses, float *logits, const int *targets, float dloss, int V) {
    __shared__ float sh[32];
    const int n = blockIdx.x;
    float *x = logits + (size_t)n * V;
    const int tgt = targets ? targets[n] : -1;
    const bool valid = tgt >= 0 && tgt < V;
    const float xt = valid ? x[tgt] : 0.0f;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = zt_block_max(mx, sh);
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(x[j] - mx);
    s = zt_block_sum(s, sh);
    const float inv = 1.0f / s;
    if (threadIdx.x == 0 && losses) losses[n] = valid ? logf(s) - (xt - mx) : 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        /* __fmul_rn: p rounded as k_xent_fwd stores it (nvcc would otherwise
         * fuse the product into p - 1) */
        const float pj = __fmul_rn(expf(x[j] - mx), inv);
        x[j] = valid ? (j == tgt ? pj - 1.0f : pj) * dloss : 0.0f;
    }
}

/* The LM head's bf16 logits (backend.h xent16_fwd / xent16_fused), a block
 * of ZT_XENT16_LANES threads per row.  One pass for the max and the sum:
 * thread t keeps a running max m and sum s over j = t, t + LANES, ...; then
 * the block max M of the m, each thread's s exp(m - M) (a thread that saw
 * nothing: 0) and their block sum.  Products rounded on their own
 * (__fmul_rn, and the running update's one fma), so cpu_xent16.c, which
 * does these operations in this order, agrees bitwise where expf / logf do
 * (the simulator). */
__device__ __forceinline__ void xent16_stats(const uint16_t *x, int V, float *sh, float *mx,
                                             float *sum) {
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float v = zt_cvt_bf16_to_f32(x[j]);
        if (v > m) {
            s = __fmaf_rn(s, expf(m - v), 1.0f);
            m = v;
        } else if (v != -INFINITY) {
            s = s + expf(v - m);
        }
    }
    const float M = zt_block_max(m, sh);
    const float c = m > -INFINITY ? __fmul_rn(s, expf(m - M)) : 0.0f;
    *sum = zt_block_sum(c, sh);
    *mx = M;
}

__global__ void __launch_bounds__(ZT_XENT16_LANES)
k_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int V) {
    __shared__ float sh[32];
    const int n = blockIdx.x;
    const uint16_t *x = logits16 + (size_t)n * V;
    const int tgt = targets ? targets[n] : -1;
    float M, S;
    xent16_stats(x, V, sh, &M, &S);
    if (threadIdx.x == 0)
        losses[n] = tgt >= 0 && tgt < V ? logf(S) - (zt_cvt_bf16_to_f32(x[tgt]) - M) : 0.0f;
}

/* then each thread overwrites the elements it read with their gradient,
 * rounded to bf16 (the target's logit is read by thread 0 before the
 * reductions' barriers, every write comes after them) */
__global__ void __launch_bounds__(ZT_XENT16_LANES)
k_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int V) {
    __shared__ float sh[32];
    const int n = blockIdx.x;
    uint16_t *x = logits16 + (size_t)n * V;
    const int tgt = targets ? targets[n] : -1;
    const bool valid = tgt >= 0 && tgt < V;
    const float xt = valid && threadIdx.x == 0 ? zt_cvt_bf16_to_f32(x[tgt]) : 0.0f;
    float M, S;
    xent16_stats(x, V, sh, &M, &S);
    if (threadIdx.x == 0 && losses) losses[n] = valid ? logf(S) - (xt - M) : 0.0f;
    const float inv = 1.0f / S;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float p = __fmul_rn(expf(zt_cvt_bf16_to_f32(x[j]) - M), inv);
        x[j] = zt_cvt_f32_to_bf16(valid ? (j == tgt ? p - 1.0f : p) * dloss : 0.0f);
    }
}

void zt_cuda_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V) {
    if (N <= 0 || V <= 0 || !losses) return;
    k_xent16_fwd<<<N, ZT_XENT16_LANES, 0, zt_cu.stream>>>(losses, logits16, targets, V);
    ZT_LAUNCHED("k_xent16_fwd");
}

void zt_cuda_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                          int V) {
    if (N <= 0 || V <= 0) return;
    k_xent16_fused<<<N, ZT_XENT16_LANES, 0, zt_cu.stream>>>(losses, logits16, targets, dloss, V);
    ZT_LAUNCHED("k_xent16_fused");
}

void zt_cuda_xent_fwd(float *losses, float *probs, const float *logits, const int *targets, int N,
                      int V) {
    if (N <= 0 || V <= 0) return;
    k_xent_fwd<<<N, ZT_XENT_THREADS, 0, zt_cu.stream>>>(losses, probs, logits, targets, V);
    ZT_LAUNCHED("k_xent_fwd");
}

void zt_cuda_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss, int N,
                      int V) {
    if (N <= 0 || V <= 0) return;
    k_xent_bwd<<<N, 256, 0, zt_cu.stream>>>(dlogits, probs, targets, dloss, V);
    ZT_LAUNCHED("k_xent_bwd");
}

void zt_cuda_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N, int V) {
    if (N <= 0 || V <= 0) return;
    k_xent_fused<<<N, ZT_XENT_THREADS, 0, zt_cu.stream>>>(losses, logits, targets, dloss, V);
    ZT_LAUNCHED("k_xent_fused");
}
