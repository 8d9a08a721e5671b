/*
 * cuda_llama.cu -- RMSNorm, rotary position embeddings and SwiGLU on the
 * GPU (the Llama family; grouped-query attention is in cuda_attention.cu),
 * and Gemma's GeGLU and logit soft-capping.  The per-element math of the
 * Llama kernels is kernels/llama_math.h, the same source the CPU kernels
 * compile; GeGLU's gelu is gelu_fwd's (cuda_nn.cu) formula.
 *
 * Deterministic without float atomics: a row's sums are one warp's, in a
 * fixed lane order (double); RMSNorm dw is two-pass like LayerNorm's
 * (fixed row chunks give partial sums in double, added in chunk order).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "cuda_convert.h"
#include "cuda_internal.cuh"
#include "llama_math.h"

/* ------------------------------------------------------------ RMSNorm */

#define ZT_RMS_THREADS 256   /* one warp per row */

/* (out in fp32 or, O = uint16_t, its bf16 rounding: cuda_internal.cuh
 * zt_st_out) */
template <typename O>
__global__ void __launch_bounds__(ZT_RMS_THREADS)
k_rmsnorm_fwd(O *out, float *rstd, const float *inp, const float *w, float eps, int N, int C) {
    const int row = blockIdx.x * (ZT_RMS_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    O *o = out + (size_t)row * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) ss += (double)x[c] * x[c];
    ss = zt_warp_sum_d(ss);
    const float r = zt_rms_rstd(ss, C, eps);
    for (int c = lane; c < C; c += 32) zt_st_out(&o[c], zt_rms_out(x[c], r, w[c]));
    if (lane == 0) rstd[row] = r;
}

/* res = a + b, then k_rmsnorm_fwd's row of res (each lane reads back
 * what it wrote: bitwise add then rmsnorm_fwd; res may alias a); b in
 * fp32, or (Bt uint16_t, k_add_rmsnorm_fwd16b) bf16 bits widened exactly */
__device__ __forceinline__ float zt_ld_branch(const float *p) { return *p; }
__device__ __forceinline__ float zt_ld_branch(const uint16_t *p) { return zt_cvt_bf16_to_f32(*p); }
template <typename O, typename Bt>
__device__ __forceinline__ void add_rmsnorm_fwd_row(float *res, O *out, float *rstd, const float *a,
                                                    const Bt *b, const float *w, float eps, int N,
                                                    int C) {
    const int row = blockIdx.x * (ZT_RMS_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *xa = a + (size_t)row * C;
    const Bt *xb = b + (size_t)row * C;
    float *x = res + (size_t)row * C;
    O *o = out + (size_t)row * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) {
        const float xv = xa[c] + zt_ld_branch(&xb[c]);
        x[c] = xv;
        ss += (double)xv * xv;
    }
    ss = zt_warp_sum_d(ss);
    const float r = zt_rms_rstd(ss, C, eps);
    for (int c = lane; c < C; c += 32) zt_st_out(&o[c], zt_rms_out(x[c], r, w[c]));
    if (lane == 0) rstd[row] = r;
}
template <typename O>
__global__ void __launch_bounds__(ZT_RMS_THREADS)
k_add_rmsnorm_fwd(float *res, O *out, float *rstd, const float *a, const float *b,
                  const float *w, float eps, int N, int C) {
    add_rmsnorm_fwd_row<O, float>(res, out, rstd, a, b, w, eps, N, C);
}
/* the branch b16 in bf16, out16 bf16 (backend.h add_rmsnorm_fwd16b) */
__global__ void __launch_bounds__(ZT_RMS_THREADS)
k_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *rstd, const float *a,
                     const uint16_t *b16, const float *w, float eps, int N, int C) {
    add_rmsnorm_fwd_row<uint16_t, uint16_t>(res, out16, rstd, a, b16, w, eps, N, C);
}

void zt_cuda_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                             const float *w, float eps, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_RMS_THREADS / 32;
    k_add_rmsnorm_fwd<float><<<(N + rows - 1) / rows, ZT_RMS_THREADS, 0, zt_cu.stream>>>(
        res, out, rstd, a, b, w, eps, N, C);
    ZT_LAUNCHED("k_add_rmsnorm_fwd");
}
void zt_cuda_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd, const float *a,
                               const float *b, const float *w, float eps, int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_RMS_THREADS / 32;
    k_add_rmsnorm_fwd<uint16_t><<<(N + rows - 1) / rows, ZT_RMS_THREADS, 0, zt_cu.stream>>>(
        res, out16, rstd, a, b, w, eps, N, C);
    ZT_LAUNCHED("k_add_rmsnorm_fwd16");
}
/* the branch in bf16 (backend.h add_rmsnorm_fwd16b): the same row reading
 * b16 widened, no fp32 branch */
void zt_cuda_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                const float *a, const uint16_t *b16, const float *w, float eps,
                                int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_RMS_THREADS / 32;
    k_add_rmsnorm_fwd16b<<<(N + rows - 1) / rows, ZT_RMS_THREADS, 0, zt_cu.stream>>>(
        res, out16, rstd, a, b16, w, eps, N, C);
    ZT_LAUNCHED("k_add_rmsnorm_fwd16b");
}

void zt_cuda_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, float eps,
                         int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_RMS_THREADS / 32;
    k_rmsnorm_fwd<float><<<(N + rows - 1) / rows, ZT_RMS_THREADS, 0, zt_cu.stream>>>(
        out, rstd, inp, w, eps, N, C);
    ZT_LAUNCHED("k_rmsnorm_fwd");
}
void zt_cuda_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                           const float *w, float eps, int N, int C) {
    (void)tmp;
    if (N <= 0 || C <= 0) return;
    const int rows = ZT_RMS_THREADS / 32;
    k_rmsnorm_fwd<uint16_t><<<(N + rows - 1) / rows, ZT_RMS_THREADS, 0, zt_cu.stream>>>(
        out16, rstd, inp, w, eps, N, C);
    ZT_LAUNCHED("k_rmsnorm_fwd16");
}

/* the output gradient's element: fp32, or bf16 widened exactly
 * (rmsnorm_bwd16d; swiglu_bwd_dd16 / geglu_bwd_dd16's k_glu_bwd16, its
 * Tout uint16_t) */
__device__ __forceinline__ float rms_dout(const float *p) { return *p; }
__device__ __forceinline__ float rms_dout(const uint16_t *p) { return zt_cvt_bf16_to_f32(*p); }

/* One row of dinp (+=), by one warp (lane-strided sum in double,
 * zt_warp_sum_d); Tout: dout's type (uint16_t: rmsnorm_bwd16d) */
template <typename Tout>
__device__ __forceinline__ void rmsnorm_bwd_row(float *dinp, const Tout *dout, const float *inp,
                                                const float *w, const float *rstd, int row,
                                                int lane, int C, uint16_t *dinp16) {
    const float *x = inp + (size_t)row * C;
    const Tout *d = dout + (size_t)row * C;
    float *di = dinp + (size_t)row * C;
    const float r = rstd[row];
    double s = 0.0;
    for (int c = lane; c < C; c += 32) s += (double)(w[c] * rms_dout(&d[c])) * x[c];
    s = zt_warp_sum_d(s);
    const float k = zt_rms_k(s, r, C);
    if (!dinp16) {
        for (int c = lane; c < C; c += 32) di[c] += zt_rms_dx(x[c], rms_dout(&d[c]), w[c], r, k);
        return;
    }
    /* rmsnorm_bwd16: the accumulated value rounded beside it */
    uint16_t *d16 = dinp16 + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        di[c] += zt_rms_dx(x[c], rms_dout(&d[c]), w[c], r, k);
        d16[c] = zt_cvt_f32_to_bf16(di[c]);
    }
}

/* dinp and the partial dw in one pass, k_layernorm_bwd's scheme
 * (cuda_nn.cu): a block per row chunk p (R rows), ZT_RMSB_WARPS rows at a
 * time, a warp per row for dinp, then a thread per column adding the
 * group's rows in order to pw[p, c] (double): bitwise a column's loop over
 * the chunk */
#define ZT_RMSB_WARPS 16
#define ZT_RMSB_THREADS (ZT_RMSB_WARPS * 32)
template <typename Tout>
__global__ void __launch_bounds__(ZT_RMSB_THREADS)
k_rmsnorm_bwd(float *dinp, double *pw, const Tout *dout, const float *inp, const float *w,
              const float *rstd, int N, int C, int R, uint16_t *dinp16) {
    const int p = blockIdx.x, lane = threadIdx.x & 31;
    const int n0 = p * R, n1 = min(N, n0 + R);
    double *qw = pw + (size_t)p * C;
    for (int g0 = n0; g0 < n1; g0 += ZT_RMSB_WARPS) {
        const int row = g0 + (threadIdx.x >> 5), g1 = min(n1, g0 + ZT_RMSB_WARPS);
        if (row < g1) rmsnorm_bwd_row(dinp, dout, inp, w, rstd, row, lane, C, dinp16);
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += ZT_RMSB_THREADS) {
            double aw = g0 == n0 ? 0.0 : qw[c];
            for (int n = g0; n < g1; n++)
                aw += (double)(inp[(size_t)n * C + c] * rstd[n] * rms_dout(&dout[(size_t)n * C + c]));
            qw[c] = aw;
        }
    }
}

template <typename Tout>
static void rmsnorm_bwd(float *dinp, uint16_t *dinp16, float *dw, const Tout *dout,
                        const float *inp, const float *w, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    int R;
    const int P = zt_cuda_ws_col_chunks(N, &R);
    double *pw = (double *)zt_cuda_scratch(zt_cuda_ws_rmsnorm_bwd(N, C), "rmsnorm backward");
    if (!pw) return;
    k_rmsnorm_bwd<Tout><<<P, ZT_RMSB_THREADS, 0, zt_cu.stream>>>(dinp, pw, dout, inp, w, rstd, N, C,
                                                                 R, dinp16);
    if (!ZT_LAUNCHED("k_rmsnorm_bwd")) return;
    zt_cuda_colsum_final(dw, pw, P, C);
}

void zt_cuda_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, const float *rstd, int N, int C) {
    rmsnorm_bwd(dinp, (uint16_t *)NULL, dw, dout, inp, w, rstd, N, C);
}
void zt_cuda_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                           const float *inp, const float *w, const float *rstd, int N, int C) {
    rmsnorm_bwd(dinp, dinp16, dw, dout, inp, w, rstd, N, C);
}
/* rmsnorm_bwd16d (backend.h): the same kernel reading dout16 (dinp16 may be
 * NULL) */
void zt_cuda_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                            const float *inp, const float *w, const float *rstd, int N, int C) {
    rmsnorm_bwd(dinp, dinp16, dw, dout16, inp, w, rstd, N, C);
}

/* ------------------------------------------------------------ per-head RMSNorm */

/* one thread per (row, head): its sum of squares in double in channel
 * order (the CPU's order) */
__global__ void k_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps,
                               int n_heads, int stride, int hd, size_t total) {
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < total;
         r += (size_t)gridDim.x * blockDim.x) {
        const size_t n = r / (size_t)n_heads, h = r - n * (size_t)n_heads;
        float *v = x + n * (size_t)stride + h * (size_t)hd, *k = raw + r * (size_t)hd;
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

void zt_cuda_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                          int n_heads, int stride, int hd) {
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
    const size_t total = (size_t)N * n_heads;
    k_headnorm_fwd<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(x, raw, rstd, w, eps,
                                                                            n_heads, stride, hd,
                                                                            total);
    ZT_LAUNCHED("k_headnorm_fwd");
}

/* The backward in one pass, a block per chunk p of the R = N n_heads
 * (row, head) pairs (zt_cuda_ws_col_chunks(R): chunk pairs each), taken
 * ZT_HNB_THREADS pairs at a time: first a thread per channel adds the
 * group's pairs in order to the chunk's partial dw, pw[p, c] (double, kept
 * there between groups: bitwise a channel's loop over the chunk), then,
 * past the barrier (dx is read there and overwritten here), a thread per
 * pair writes its input gradient in place (the CPU's channel order).
 * headnorm_bwd_chunk is that chunk's work on the gradient G gives: G.ld(n,
 * col) the value of row n's column col (col from the norm's first column:
 * h hd + c), G.upd(n, col0, hd, f) storing f(c, value) for the channels c
 * of the group at col0 (each value read before its group is stored):
 * HnF32, the fp32 rows in place (k_headnorm_bwd); HnRope16, the bf16 rows
 * seen through RoPE's backward (k_qknorm_rope_bwd16). */
#define ZT_HNB_THREADS 256
/* the input gradient of a group's channel c from its output gradient d */
struct HnDx {
    const float *k, *w;
    float q, kk;
    __device__ __forceinline__ float operator()(int c, float d) const {
        return zt_rms_dx(k[c], d, w[c], q, kk);
    }
};
template <typename G>
__device__ __forceinline__ void headnorm_bwd_chunk(const G &g, double *qw, const float *raw,
                                                   const float *w, const float *rstd, int r0,
                                                   int r1, int n_heads, int hd) {
    for (int g0 = r0; g0 < r1; g0 += ZT_HNB_THREADS) {
        const int g1 = min(r1, g0 + ZT_HNB_THREADS);
        for (int c = threadIdx.x; c < hd; c += ZT_HNB_THREADS) {
            double aw = g0 == r0 ? 0.0 : qw[c];
            for (int r = g0; r < g1; r++) {
                const size_t n = (size_t)(r / n_heads), h = (size_t)(r % n_heads);
                aw += (double)(raw[(size_t)r * hd + c] * rstd[r] * g.ld(n, h * hd + c));
            }
            qw[c] = aw;
        }
        __syncthreads();
        const int r = g0 + (int)threadIdx.x;
        if (r < g1) {
            const size_t n = (size_t)(r / n_heads), h = (size_t)(r % n_heads);
            HnDx f;
            f.k = raw + (size_t)r * hd;
            f.w = w;
            f.q = rstd[r];
            double s = 0.0;
            for (int c = 0; c < hd; c++) s += (double)(w[c] * g.ld(n, h * hd + c)) * f.k[c];
            f.kk = zt_rms_k(s, f.q, hd);
            g.upd(n, h * hd, hd, f);
        }
    }
}
/* fp32 rows of stride, in place */
struct HnF32 {
    float *dx;
    int stride;
    __device__ __forceinline__ float ld(size_t n, size_t col) const { return dx[n * stride + col]; }
    template <typename Fn>
    __device__ __forceinline__ void upd(size_t n, size_t col0, int hd, const Fn &f) const {
        float *d = dx + n * (size_t)stride + col0;
        for (int c = 0; c < hd; c++) d[c] = f(c, d[c]);
    }
};
__global__ void __launch_bounds__(ZT_HNB_THREADS)
k_headnorm_bwd(float *dx, double *pw, const float *raw, const float *w, const float *rstd, int R,
               int n_heads, int stride, int hd, int chunk) {
    const int p = blockIdx.x;
    const int r0 = p * chunk, r1 = min(R, r0 + chunk);
    HnF32 g;
    g.dx = dx;
    g.stride = stride;
    headnorm_bwd_chunk(g, pw + (size_t)p * hd, raw, w, rstd, r0, r1, n_heads, hd);
}

void zt_cuda_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                          const float *rstd, int N, int n_heads, int stride, int hd) {
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
    const int R = N * n_heads;
    int chunk;
    const int P = zt_cuda_ws_col_chunks(R, &chunk);
    double *pw = (double *)zt_cuda_scratch(zt_cuda_ws_rmsnorm_bwd(R, hd), "headnorm backward");
    if (!pw) return;
    k_headnorm_bwd<<<P, ZT_HNB_THREADS, 0, zt_cu.stream>>>(dx, pw, raw, w, rstd, R, n_heads, stride,
                                                           hd, chunk);
    if (!ZT_LAUNCHED("k_headnorm_bwd")) return;
    zt_cuda_colsum_final(dw, pw, P, hd);
}

/* ------------------------------------------------------------ RoPE */

/* k_rope's rotation of the pair (x1, x2) = (x[j], x[j + h2]) of a head at
 * position t, inv_freq[j] f: by +angle (dir 1) or -angle (dir -1) */
__device__ __forceinline__ void rope_pair(float *x1, float *x2, int t, float f, float dir,
                                          float scale) {
    const float a = zt_rope_angle(t, f);
    zt_rope_rotate(x1, x2, cosf(a) * scale, dir * (sinf(a) * scale));
}

/* one thread per (row, head, pair j): rotate by +angle (dir 1) or -angle
 * (dir -1), x's pair into out's (in place: out = x, fp32); and, O =
 * uint16_t (rope_fwd16), one thread per (row, column past the rotated
 * heads: rest of them) copying it.  out in fp32 or, O = uint16_t, the bf16
 * rounding of the same values, k_to_bf16's (zt_st_out). */
template <typename O>
__global__ void k_rope(O *out, const float *x, const float *inv_freq, int T, int n_heads,
                       int stride, int h2, int rest, float dir, float scale, size_t total) {
    const size_t np = (size_t)n_heads * h2, w = np + (size_t)rest;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / w, c = i % w;
        if (c < np) {
            const int j = (int)(c % (size_t)h2);
            const int h = (int)(c / (size_t)h2);
            const size_t o = n * (size_t)stride + (size_t)h * 2 * h2 + j;
            float x1 = x[o], x2 = x[o + h2];
            rope_pair(&x1, &x2, (int)(n % (size_t)T), inv_freq[j], dir, scale);
            zt_st_out(&out[o], x1);
            zt_st_out(&out[o + h2], x2);
        } else {
            const size_t o = n * (size_t)stride + 2 * np + (c - np);
            zt_st_out(&out[o], x[o]);
        }
    }
}

static void rope(float *x, const float *inv_freq, int B, int T, int n_heads, int stride, int hd,
                 float dir, float scale) {
    const int h2 = hd / 2;
    if (B <= 0 || T <= 0 || n_heads <= 0 || h2 <= 0) return;
    const size_t total = (size_t)B * T * n_heads * h2;
    k_rope<float><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(
        x, x, inv_freq, T, n_heads, stride, h2, 0, dir, scale, total);
    ZT_LAUNCHED("k_rope");
}

void zt_cuda_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                      int hd, float scale) {
    rope(x, inv_freq, B, T, n_heads, stride, hd, 1.0f, scale);
}

void zt_cuda_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                      int hd, float scale) {
    rope(x, inv_freq, B, T, n_heads, stride, hd, -1.0f, scale);
}

/* rope_fwd16: k_rope reading x and writing the bf16 rows, the rotated heads
 * and the rest (even hd: the heads span n_heads hd columns) */
void zt_cuda_rope_fwd16(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T,
                        int n_heads, int stride, int hd, float scale) {
    const int h2 = hd / 2;
    if (B <= 0 || T <= 0 || stride <= 0) return;
    if (n_heads <= 0 || h2 <= 0) n_heads = 0;
    const int rest = stride - 2 * n_heads * h2;
    const size_t total = (size_t)B * T * ((size_t)n_heads * h2 + (size_t)rest);
    if (!total) return;
    k_rope<uint16_t><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(
        qkv16, x, inv_freq, T, n_heads, stride, h2 > 0 ? h2 : 1, rest, 1.0f, scale, total);
    ZT_LAUNCHED("k_rope_fwd16");
}

/* rope_bwd16 (backend.h): the inverse rotation of bf16 rows in place.
 * k_rope_colsum16_part: a thread per (unit, chunk p of R rows), a unit a
 * pair of rotated columns (h, j | j + h2) or one other column; the pair
 * widened and rotated as k_rope does (rope_pair, dir -1), each of its two
 * fp32 values summed in double over the chunk's rows in order
 * (k_colsum_part's sums of the fp32 gradient rope_bwd gives), the other
 * columns' widened values likewise; part[p, stride] */
__global__ void k_rope_colsum16_part(double *part, const uint16_t *x16, const float *inv_freq, int N,
                                     int T, int n_heads, int stride, int h2, int rest, float scale,
                                     int R) {
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    const int p = blockIdx.y;
    const int np = n_heads * h2;
    if (u >= np + rest) return;
    const int n0 = p * R, n1 = min(N, n0 + R);
    const float dir = -1.0f;
    if (u < np) {
        const int j = u % h2, h = u / h2;
        const int c = h * 2 * h2 + j;
        double acc1 = 0.0, acc2 = 0.0;
        for (int n = n0; n < n1; n++) {
            const size_t o = (size_t)n * stride + c;
            float x1 = zt_cvt_bf16_to_f32(x16[o]), x2 = zt_cvt_bf16_to_f32(x16[o + h2]);
            rope_pair(&x1, &x2, n % T, inv_freq[j], dir, scale);
            acc1 += (double)x1;
            acc2 += (double)x2;
        }
        part[(size_t)p * stride + c] = acc1;
        part[(size_t)p * stride + c + h2] = acc2;
    } else {
        const int c = 2 * np + (u - np);
        double acc = 0.0;
        for (int n = n0; n < n1; n++) acc += (double)zt_cvt_bf16_to_f32(x16[(size_t)n * stride + c]);
        part[(size_t)p * stride + c] = acc;
    }
}

/* k_rope_bwd16: a thread per (row, pair), k_rope's rotation (dir -1) of
 * the widened pair, stored back rounded (k_to_bf16's, zt_st_out) */
__global__ void k_rope_bwd16(uint16_t *x16, const float *inv_freq, int T, int n_heads, int stride,
                             int h2, float scale, size_t total) {
    const size_t np = (size_t)n_heads * h2;
    const float dir = -1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / np, c = i % np;
        const int j = (int)(c % (size_t)h2);
        const int h = (int)(c / (size_t)h2);
        const size_t o = n * (size_t)stride + (size_t)h * 2 * h2 + j;
        float x1 = zt_cvt_bf16_to_f32(x16[o]), x2 = zt_cvt_bf16_to_f32(x16[o + h2]);
        rope_pair(&x1, &x2, (int)(n % (size_t)T), inv_freq[j], dir, scale);
        zt_st_out(&x16[o], x1);
        zt_st_out(&x16[o + h2], x2);
    }
}

void zt_cuda_rope_bwd16(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T, int n_heads,
                        int stride, int hd, float scale) {
    const int h2 = hd / 2;
    if (B <= 0 || T <= 0 || stride <= 0) return;
    if (n_heads <= 0 || h2 <= 0) n_heads = 0;
    const int N = B * T, np = n_heads * h2, rest = stride - 2 * np;
    if (dbias) {   /* (the sums of the fp32 values first: x16 rotated after) */
        int R;
        const int P = zt_cuda_ws_col_chunks(N, &R);
        double *part = (double *)zt_cuda_scratch(zt_cuda_ws_colsum(N, stride), "column sum");
        if (!part) return;
        const dim3 g1((unsigned)((np + rest + 127) / 128), (unsigned)P);
        k_rope_colsum16_part<<<g1, 128, 0, zt_cu.stream>>>(part, x16, inv_freq, N, T, n_heads, stride,
                                                           h2 > 0 ? h2 : 1, rest, scale, R);
        if (!ZT_LAUNCHED("k_rope_colsum16_part")) return;
        zt_cuda_colsum_final(dbias, part, P, stride);
    }
    const size_t total = (size_t)N * np;
    if (!total) return;
    k_rope_bwd16<<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(x16, inv_freq, T, n_heads, stride,
                                                                         h2, scale, total);
    ZT_LAUNCHED("k_rope_bwd16");
}

/* qknorm_rope_bwd16 (backend.h): headnorm_bwd_chunk on the bf16 rows
 * seen through RoPE's backward: G.ld widens the column's pair of its rope
 * head and rotates it as k_rope does (dir -1, rope_pair), G.upd stores the
 * group's pairs rounded (zt_st_out, k_to_bf16's) after reading both
 * values.  x: the norm's first column of row 0 (the groups whole rope
 * heads of 2 h2). */
struct HnRope16 {
    uint16_t *x;
    const float *inv_freq;
    int stride, T, h2;
    float scale;
    __device__ __forceinline__ float ld(size_t n, size_t col) const {
        const int j = (int)(col % (size_t)(2 * h2)), i = j < h2 ? j : j - h2;
        const uint16_t *p = x + n * (size_t)stride + (col - (size_t)j);
        float x1 = zt_cvt_bf16_to_f32(p[i]), x2 = zt_cvt_bf16_to_f32(p[i + h2]);
        rope_pair(&x1, &x2, (int)(n % (size_t)T), inv_freq[i], -1.0f, scale);
        return j < h2 ? x1 : x2;
    }
    template <typename Fn>
    __device__ __forceinline__ void upd(size_t n, size_t col0, int hd, const Fn &f) const {
        uint16_t *d = x + n * (size_t)stride + col0;
        const int t = (int)(n % (size_t)T);
        for (int h0 = 0; h0 < hd; h0 += 2 * h2)
            for (int i = 0; i < h2; i++) {
                float x1 = zt_cvt_bf16_to_f32(d[h0 + i]), x2 = zt_cvt_bf16_to_f32(d[h0 + i + h2]);
                rope_pair(&x1, &x2, t, inv_freq[i], -1.0f, scale);
                zt_st_out(&d[h0 + i], f(h0 + i, x1));
                zt_st_out(&d[h0 + i + h2], f(h0 + i + h2, x2));
            }
    }
};
/* k_qknorm_rope_bwd16: blocks [0, Pq) the q norm's chunks of its N qnh
 * (row, group) pairs (cq each; groups of qg channels, partial dw pwq),
 * then Pk blocks the k norm's (ck, kg, pwk): k_headnorm_bwd's chunks */
__global__ void __launch_bounds__(ZT_HNB_THREADS)
k_qknorm_rope_bwd16(uint16_t *x16, double *pwq, double *pwk, const float *raw, const float *rstd,
                    const float *qw, const float *kw, const float *inv_freq, int T, int stride,
                    int h2, float scale, int N, int NH, int qnh, int knh, int qg, int kg, int Pq,
                    int cq, int ck) {
    HnRope16 g;
    g.inv_freq = inv_freq;
    g.stride = stride;
    g.T = T;
    g.h2 = h2;
    g.scale = scale;
    const size_t AD = (size_t)NH * 2 * h2;
    int p = blockIdx.x;
    if (p < Pq) {
        const int r0 = p * cq, r1 = min(N * qnh, r0 + cq);
        g.x = x16;
        headnorm_bwd_chunk(g, pwq + (size_t)p * qg, raw, qw, rstd, r0, r1, qnh, qg);
    } else {
        p -= Pq;
        const int r0 = p * ck, r1 = min(N * knh, r0 + ck);
        g.x = x16 + AD;
        headnorm_bwd_chunk(g, pwk + (size_t)p * kg, raw + (size_t)N * AD, kw, rstd + (size_t)N * NH,
                           r0, r1, knh, kg);
    }
}

void zt_cuda_qknorm_rope_bwd16(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                               const float *rstd, const float *qw, const float *kw,
                               const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                               int knh, int stride, int hd, float scale) {
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const size_t ws = zt_cuda_ws_qknorm_rope_bwd16(B * T, NH, NKV, qnh, knh, hd);
    if (!ws || (NH + NKV) * hd > stride) {
        zt_cuda_fail(__FILE__, __LINE__, "qknorm_rope_bwd16",
                     "an odd head_dim, q/k norm groups that are not whole heads, or heads past "
                     "the row (nothing computed)",
                     NULL);
        return;
    }
    const int N = B * T;
    int cq, ck;
    const int Pq = zt_cuda_ws_col_chunks(N * qnh, &cq), Pk = zt_cuda_ws_col_chunks(N * knh, &ck);
    const int qg = NH * hd / qnh, kg = NKV * hd / knh;
    double *pwq = (double *)zt_cuda_scratch(ws, "q/k norms' backward");
    if (!pwq) return;
    double *pwk = pwq + zt_cuda_ws_al256((size_t)Pq * qg * sizeof(double)) / sizeof(double);
    k_qknorm_rope_bwd16<<<Pq + Pk, ZT_HNB_THREADS, 0, zt_cu.stream>>>(
        dqkv16, pwq, pwk, raw, rstd, qw, kw, inv_freq, T, stride, hd / 2, scale, N, NH, qnh, knh, qg,
        kg, Pq, cq, ck);
    if (!ZT_LAUNCHED("k_qknorm_rope_bwd16")) return;
    zt_cuda_colsum_final(dqw, pwq, Pq, qg);
    zt_cuda_colsum_final(dkw, pwk, Pk, kg);
}

/* qknorm_rope_fwd16 (Qwen3): a warp per (row, norm group: a q or k head,
 * or the whole q or k projection with qk_norm_full), its lanes copying
 * the group's input to raw, each the sum of squares in double in channel
 * order (k_headnorm_fwd's: the same rstd), then a lane per rotated pair
 * normalizing both values (zt_rms_out) and rotating them as k_rope does,
 * out written with zt_st_out (O = uint16_t: the bf16 rounding); the
 * warps past the groups a lane per column past the rotated heads (the v
 * heads) storing it.  Bitwise k_headnorm_fwd on the q and the k groups,
 * then k_rope_fwd16; x left as it was. */
template <typename O>
__global__ void k_qknorm_rope(O *out, const float *x, float *raw, float *rstd, const float *qw,
                              const float *kw, float eps, const float *inv_freq, int T, int NH,
                              int qnh, int knh, int qg, int kg, int stride, int h2, int rest,
                              float scale, size_t N, size_t ngroups, size_t ntasks) {
    const int lane = (int)(threadIdx.x & 31u);
    const size_t wpb = blockDim.x / 32u, AD = (size_t)NH * 2 * h2;
    const size_t G = (size_t)qnh + (size_t)knh;
    for (size_t t = blockIdx.x * wpb + threadIdx.x / 32u; t < ntasks;
         t += (size_t)gridDim.x * wpb) {
        if (t >= ngroups) {   /* the rest: 32 columns a warp */
            const size_t e = (t - ngroups) * 32u + (size_t)lane;
            if (e < N * (size_t)rest) {
                const size_t n = e / (size_t)rest, c = e % (size_t)rest;
                const size_t o = n * (size_t)stride + (size_t)stride - (size_t)rest + c;
                zt_st_out(&out[o], x[o]);
            }
            continue;
        }
        const size_t n = t / G, g = t % G;
        const int isk = g >= (size_t)qnh;
        const size_t gi = isk ? g - (size_t)qnh : g;
        const int wd = isk ? kg : qg;
        const size_t col0 = isk ? AD + gi * (size_t)kg : gi * (size_t)qg;
        const size_t r = isk ? n * (size_t)knh + gi : n * (size_t)qnh + gi;
        const float *v = x + n * (size_t)stride + col0, *w = isk ? kw : qw;
        float *k = raw + (isk ? N * AD : 0) + r * (size_t)wd;
        for (int c = lane; c < wd; c += 32) k[c] = v[c];
        double ss = 0.0;
        for (int c = 0; c < wd; c++) ss += (double)v[c] * v[c];
        const float q = zt_rms_rstd(ss, wd, eps);
        if (lane == 0) rstd[(isk ? N * (size_t)NH : 0) + r] = q;
        const int tp = (int)(n % (size_t)T);
        O *y = out + n * (size_t)stride + col0;
        for (int p = lane; p < wd / 2; p += 32) {
            const int j = p % h2, o = (p / h2) * 2 * h2 + j;
            float x1 = zt_rms_out(v[o], q, w[o]), x2 = zt_rms_out(v[o + h2], q, w[o + h2]);
            const float a = zt_rope_angle(tp, inv_freq[j]);
            zt_rope_rotate(&x1, &x2, cosf(a) * scale, sinf(a) * scale);
            zt_st_out(&y[o], x1);
            zt_st_out(&y[o + h2], x2);
        }
    }
}

void zt_cuda_qknorm_rope_fwd16(uint16_t *qkv16, float *x, float *raw, float *rstd, const float *qw,
                               const float *kw, float eps, const float *inv_freq, int B, int T,
                               int NH, int NKV, int qnh, int knh, int stride, int hd,
                               float scale) {
    const int h2 = hd / 2;
    if (B <= 0 || T <= 0 || stride <= 0) return;
    if (NH <= 0 || NKV <= 0 || qnh <= 0 || knh <= 0 || h2 <= 0 || hd % 2 ||
        (NH * hd) % qnh || (NKV * hd) % knh) {
        /* (odd or empty heads, groups not whole heads: the sequence, entry
         * by entry) */
        const int N = B * T;
        if (NH > 0 && qnh > 0 && hd > 0)
            zt_cuda_headnorm_fwd(x, raw, rstd, qw, eps, N, qnh, stride, NH * hd / qnh);
        if (NH >= 0 && NKV > 0 && knh > 0 && hd > 0)
            zt_cuda_headnorm_fwd(x + (size_t)NH * hd, raw + (size_t)N * NH * hd,
                                 rstd + (size_t)N * NH, kw, eps, N, knh, stride, NKV * hd / knh);
        zt_cuda_rope_fwd16(qkv16, x, inv_freq, B, T, NH + NKV, stride, hd, scale);
        return;
    }
    const size_t N = (size_t)B * T;
    const int rest = stride - (NH + NKV) * hd;
    const size_t ngroups = N * (size_t)(qnh + knh);
    const size_t ntasks = ngroups + (N * (size_t)rest + 31) / 32;
    const size_t threads = ntasks * 32;
    k_qknorm_rope<uint16_t><<<zt_ew_blocks(threads), ZT_EW_THREADS, 0, zt_cu.stream>>>(
        qkv16, x, raw, rstd, qw, kw, eps, inv_freq, T, NH, qnh, knh, NH * hd / qnh, NKV * hd / knh,
        stride, h2, rest, scale, N, ngroups, ntasks);
    ZT_LAUNCHED("k_qknorm_rope_fwd16");
}

/* ------------------------------------------------------------ SwiGLU, GeGLU (Gemma)
 * One set of kernels and launchers for both GLUs, Act the activation
 * (glu_swiglu, glu_geglu): operator() its value h = Act(g, u) of the gate g
 * and the up u, grad its gradients (dg, du) given dh = d.  The entries keep
 * their own kernel names (ZT_LAUNCHED: k_swiglu_fwd16, k_geglu_bwd16, ...). */

struct glu_swiglu {
    __device__ __forceinline__ float operator()(float g, float u) const { return zt_swiglu(g, u); }
    __device__ __forceinline__ void grad(float *dg, float *du, float g, float u, float d) const {
        zt_swiglu_bwd(dg, du, g, u, d);
    }
};

/* GeGLU: gelu, tanh approximation: gelu(g) = 0.5 g (1 + tanh(u)),
 * u = sqrt(2/pi) (g + 0.044715 g^3);
 * gelu'(g) = 0.5 (1 + tanh u) + 0.5 g (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 g^2) */

#define ZT_GEGLU_K 0.7978845608028654f /* sqrt(2/pi) */
#define ZT_GEGLU_A 0.044715f

/* (one function each for the fp32 and the bf16 kernels: the same operations) */
__device__ __forceinline__ float geglu_val(float x, float up) {
    const float u = ZT_GEGLU_K * (x + ZT_GEGLU_A * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u)) * up;
}
__device__ __forceinline__ void geglu_grad(float *dg, float *du_, float x, float up, float d) {
    const float u = ZT_GEGLU_K * (x + ZT_GEGLU_A * x * x * x);
    const float th = tanhf(u);
    const float gelu = 0.5f * x * (1.0f + th);
    const float du = ZT_GEGLU_K * (1.0f + 3.0f * ZT_GEGLU_A * x * x);
    const float dgelu = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    *dg = d * up * dgelu;
    *du_ = d * gelu;
}

struct glu_geglu {
    __device__ __forceinline__ float operator()(float g, float u) const { return geglu_val(g, u); }
    __device__ __forceinline__ void grad(float *dg, float *du, float g, float u, float d) const {
        geglu_grad(dg, du, g, u, d);
    }
};

/* the fp32 forward and backward (backend.h swiglu_fwd / geglu_fwd, _bwd) */
template <class Act>
__global__ void k_glu_fwd(float *out, const float *gu, int H, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)H, k = i - n * (size_t)H;
        const float *g = gu + n * 2 * (size_t)H + k;
        out[i] = Act()(g[0], g[H]);
    }
}

template <class Act>
__global__ void k_glu_bwd(float *dgu, const float *dout, const float *gu, int H, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)H, k = i - n * (size_t)H;
        const size_t o = n * 2 * (size_t)H + k;
        Act().grad(&dgu[o], &dgu[o + H], gu[o], gu[o + H], dout[i]);
    }
}

/* the bf16 forward of a GLU (backend.h swiglu_fwd16 / geglu_fwd16 and their
 * r forms): h[N, H] = bf16(Act(g, u)) of gate|up's bf16 g = [:, :H] and
 * u = [:, H:], read from gu16 [N, 2H]; the r forms (gu [N, 2H] fp32 given):
 * gate|up read once in fp32, its bf16 rounding written into gu16 and Act of
 * the rounded values.  One kernel for the four entries */
template <class Act>
__global__ void k_glu_fwd16(uint16_t *out, uint16_t *gu16, const float *gu, int H, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)H, k = i - n * (size_t)H;
        const size_t o = n * 2 * (size_t)H + k;
        uint16_t g, u;
        if (gu) {   /* (the r forms) */
            g = zt_cvt_f32_to_bf16(gu[o]);
            u = zt_cvt_f32_to_bf16(gu[o + H]);
            gu16[o] = g;
            gu16[o + H] = u;
        } else {
            g = gu16[o];
            u = gu16[o + H];
        }
        out[i] = zt_cvt_f32_to_bf16(Act()(zt_cvt_bf16_to_f32(g), zt_cvt_bf16_to_f32(u)));
    }
}

/* the bf16 backward (backend.h swiglu_bwd16 / geglu_bwd16, their _d16 and
 * _dd16 forms), G a glu_bwd16_of: its Act, and Tout dout's type (uint16_t:
 * the _dd16 forms, widened by rms_dout).  (The two in one type: the
 * simulator's launch rewrite, tests/cudasim/launch.pl, takes a kernel of
 * one template argument) */
template <class Act_, typename Tout_>
struct glu_bwd16_of {
    typedef Act_ Act;
    typedef Tout_ Tout;
};
template <class G>
__global__ void k_glu_bwd16(float *dgu, const typename G::Tout *dout, const uint16_t *gu, int H,
                            size_t total, uint16_t *dgu16) {
    typedef typename G::Act Act;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)H, k = i - n * (size_t)H;
        const size_t o = n * 2 * (size_t)H + k;
        float dg, du;
        Act().grad(&dg, &du, zt_cvt_bf16_to_f32(gu[o]), zt_cvt_bf16_to_f32(gu[o + H]),
                   rms_dout(&dout[i]));
        if (dgu) {   /* (the _d16 forms with dgu NULL: the bf16 values only) */
            dgu[o] = dg;
            dgu[o + H] = du;
        }
        if (dgu16) {   /* the _d16 forms: the values rounded beside them */
            dgu16[o] = zt_cvt_f32_to_bf16(dg);
            dgu16[o + H] = zt_cvt_f32_to_bf16(du);
        }
    }
}

/* the launches (name: the entry's kernel name for ZT_LAUNCHED) */
template <class Act>
static void glu_fwd(float *out, const float *gu, int N, int H, const char *name) {
    if (N <= 0 || H <= 0) return;
    const size_t total = (size_t)N * H;
    k_glu_fwd<Act><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, gu, H, total);
    ZT_LAUNCHED(name);
}

template <class Act>
static void glu_bwd(float *dgu, const float *dout, const float *gu, int N, int H,
                    const char *name) {
    if (N <= 0 || H <= 0) return;
    const size_t total = (size_t)N * H;
    k_glu_bwd<Act><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(dgu, dout, gu, H,
                                                                               total);
    ZT_LAUNCHED(name);
}

/* (gu NULL: gu16 read, not written) */
template <class Act>
static void glu_fwd16(uint16_t *out16, uint16_t *gu16, const float *gu, int N, int H,
                      const char *name) {
    if (N <= 0 || H <= 0) return;
    const size_t total = (size_t)N * H;
    k_glu_fwd16<Act><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(out16, gu16, gu,
                                                                                 H, total);
    ZT_LAUNCHED(name);
}

/* (dgu16 NULL: _bwd16, the fp32 values only) */
template <class Act, typename Tout>
static void glu_bwd16(float *dgu, uint16_t *dgu16, const Tout *dout, const uint16_t *gu16, int N,
                      int H, const char *name) {
    if (N <= 0 || H <= 0) return;
    const size_t total = (size_t)N * H;
    typedef glu_bwd16_of<Act, Tout> G;
    k_glu_bwd16<G><<<zt_ew_blocks(total), ZT_EW_THREADS, 0, zt_cu.stream>>>(dgu, dout, gu16, H,
                                                                             total, dgu16);
    ZT_LAUNCHED(name);
}

void zt_cuda_swiglu_fwd(float *out, const float *gu, int N, int H) {
    glu_fwd<glu_swiglu>(out, gu, N, H, "k_swiglu_fwd");
}
void zt_cuda_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    glu_bwd<glu_swiglu>(dgu, dout, gu, N, H, "k_swiglu_bwd");
}
void zt_cuda_swiglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                          int H) {
    (void)tmp;
    (void)tmp2;
    glu_fwd16<glu_swiglu>(out16, (uint16_t *)gu16, (const float *)NULL, N, H, "k_swiglu_fwd16");
}
void zt_cuda_swiglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H) {
    (void)tmp2;
    glu_fwd16<glu_swiglu>(out16, gu16, gu, N, H, "k_swiglu_fwd16r");
}
void zt_cuda_swiglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    glu_bwd16<glu_swiglu>(dgu, (uint16_t *)NULL, dout, gu16, N, H, "k_swiglu_bwd16");
}
void zt_cuda_swiglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                            int N, int H) {
    glu_bwd16<glu_swiglu>(dgu, dgu16, dout, gu16, N, H, "k_swiglu_bwd16");
}
/* swiglu_bwd_dd16 (backend.h): the same kernel reading dout16 */
void zt_cuda_swiglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                             const uint16_t *gu16, int N, int H) {
    glu_bwd16<glu_swiglu>(dgu, dgu16, dout16, gu16, N, H, "k_swiglu_bwd16");
}

void zt_cuda_geglu_fwd(float *out, const float *gu, int N, int H) {
    glu_fwd<glu_geglu>(out, gu, N, H, "k_geglu_fwd");
}
void zt_cuda_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    glu_bwd<glu_geglu>(dgu, dout, gu, N, H, "k_geglu_bwd");
}
void zt_cuda_geglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                         int H) {
    (void)tmp;
    (void)tmp2;
    glu_fwd16<glu_geglu>(out16, (uint16_t *)gu16, (const float *)NULL, N, H, "k_geglu_fwd16");
}
void zt_cuda_geglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H) {
    (void)tmp2;
    glu_fwd16<glu_geglu>(out16, gu16, gu, N, H, "k_geglu_fwd16r");
}
void zt_cuda_geglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    glu_bwd16<glu_geglu>(dgu, (uint16_t *)NULL, dout, gu16, N, H, "k_geglu_bwd16");
}
void zt_cuda_geglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                           int N, int H) {
    glu_bwd16<glu_geglu>(dgu, dgu16, dout, gu16, N, H, "k_geglu_bwd16");
}
/* geglu_bwd_dd16 (backend.h): the same kernel reading dout16 */
void zt_cuda_geglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                            const uint16_t *gu16, int N, int H) {
    glu_bwd16<glu_geglu>(dgu, dgu16, dout16, gu16, N, H, "k_geglu_bwd16");
}

/* ------------------------------------------------------------ logit soft-capping (Gemma 2)
 * y = cap tanh(x / cap); dx = dy (1 - (y / cap)^2).  Elementwise, so y may
 * alias x and dx dy. */

__global__ void k_softcap_fwd(float *y, const float *x, size_t n, float cap) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = cap * tanhf(x[i] / cap);
}

__global__ void k_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float th = y[i] / cap;
        dx[i] = dy[i] * (1.0f - th * th);
    }
}

void zt_cuda_softcap_fwd(float *y, const float *x, size_t n, float cap) {
    if (!n) return;
    k_softcap_fwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(y, x, n, cap);
    ZT_LAUNCHED("k_softcap_fwd");
}

void zt_cuda_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
    if (!n) return;
    k_softcap_bwd<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(dx, dy, y, n, cap);
    ZT_LAUNCHED("k_softcap_bwd");
}
