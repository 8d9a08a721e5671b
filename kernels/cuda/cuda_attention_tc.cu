/*
 * cuda_attention_tc.cu -- flash attention on tensor cores: the bf16 matmul
 * mode's attention for head sizes up to 128 (larger ones take the cuBLAS
 * path in cuda_attention.cu).  No [T, T] buffer: scores, probabilities and
 * their gradients live in registers, one 16-row slice per warp.
 *
 * Inputs are bf16 copies made by the caller (cuda_attention.cu):
 *   q16 [B, T, R], R = (NH + 2 NKV) hs: q heads, k heads, v heads as qkv;
 *   do16 [B, T, NH hs]; lse, D [B, NH, T] fp32 (D = rowsum(dout * out)).
 * Outputs are fp32: out [B, T, NH hs] (or its bf16 rounding, out16 of
 * gqa_ext_fwd16o), lse; dqkv [B, T, R] (overwritten).
 *
 * The values are those of the cuBLAS path and of the CPU backend in bf16
 * mode (precision.md), not an online-softmax variant of them:
 *   x = cap(q.k scale), p = bf16(exp(x - lse)),
 *   out = sum p v, dS = bf16(p (dP - D) f scale) with dP = dout . v in fp32
 *   and f the cap's derivative (1 without a cap),
 *   dq = sum dS k, dk = sum dS q, dv = sum p dout.
 * So the forward makes two passes over the keys: the first finds lse
 * (running max and sum), the second makes p from it and sums p v.
 *
 * Blocks of 4 warps.  Forward and dq: a block owns 64 queries of one
 * (sequence, q head), a warp 16 of them, and walks the key tiles that they
 * see.  dk/dv: a block owns 64 keys of one (sequence, kv head), a warp 16,
 * and walks the query tiles that see them, for each q head of the group in
 * increasing order.  Every sum is taken in a fixed order: no atomics, the
 * results are bitwise reproducible.
 *
 * Shapes: head dimensions are padded with zeros to HSP = 16, 32, 64 or 128
 * in shared memory (the padding adds nothing to a dot product; padded
 * output columns are not stored).  Key / query tiles of 64 (32 in the
 * backward at HSP 128, for registers).  Tiles stay row-major in shared
 * memory; ldmatrix (.trans where a product needs the transpose) makes the
 * fragments.  Scores are masked only in the tiles that cross the diagonal,
 * T or the window.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>

#include "cuda_convert.h"
#include "cuda_internal.cuh"

#define FT_WARPS 4
#define FT_THR (FT_WARPS * 32)
#define FT_ROWS 64   /* a block's queries (forward, dq) or keys (dk/dv): 16 per warp */
/* the backward's inner tile (queries in dk/dv, keys in dq): 32 at HSP 128 for registers */
#define FT_BWD_TILE(HSP) ((HSP) > 64 ? 32 : 64)

/* ------------------------------------------------------------ the warp's product */

/*
 * D = A B + C for A 16 x 16 (bf16), B 16 x 8 (bf16), C, D 16 x 8 (fp32):
 * PTX mma.sync.m16n8k16.row.col.  Lane = 4 g + t holds
 *   a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]
 *   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
 *   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]
 *   c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
 * (two bf16 per 32-bit register, the lower index in the low half).  Before
 * sm_80, and in the CPU simulator (tests/cudasim), the same product is
 * formed from the lanes' registers through shuffles, in fp32.
 */
__device__ __forceinline__ float ft_lo(uint32_t v) { return zt_cvt_bf16_to_f32((uint16_t)(v & 0xFFFFu)); }
__device__ __forceinline__ float ft_hi(uint32_t v) { return zt_cvt_bf16_to_f32((uint16_t)(v >> 16)); }

__device__ __forceinline__ void ft_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float A[2][16], Bm[2][16];   /* rows g, g+8 of A; columns 2t, 2t+1 of B */
    for (int tt = 0; tt < 4; tt++)
        for (int r = 0; r < 4; r++) {
            const uint32_t v = __shfl_sync(0xffffffffu, a[r], g * 4 + tt);
            const int k = tt * 2 + (r >> 1) * 8;
            A[r & 1][k] = ft_lo(v);
            A[r & 1][k + 1] = ft_hi(v);
        }
    for (int nn = 0; nn < 2; nn++)
        for (int tt = 0; tt < 4; tt++)
            for (int r = 0; r < 2; r++) {
                const uint32_t v = __shfl_sync(0xffffffffu, b[r], (2 * t + nn) * 4 + tt);
                const int k = tt * 2 + r * 8;
                Bm[nn][k] = ft_lo(v);
                Bm[nn][k + 1] = ft_hi(v);
            }
    for (int row = 0; row < 2; row++)
        for (int nn = 0; nn < 2; nn++) {
            float s = c[row * 2 + nn];
            for (int k = 0; k < 16; k++) s += A[row][k] * Bm[nn][k];
            c[row * 2 + nn] = s;
        }
#endif
}

/* two floats as bf16 (round to nearest even, as cuda_convert.h) in one register */
__device__ __forceinline__ uint32_t ft_pack(float lo, float hi) {
    return (uint32_t)zt_cvt_f32_to_bf16(lo) | (uint32_t)zt_cvt_f32_to_bf16(hi) << 16;
}
/*
 * ldmatrix: four 8 x 8 bf16 matrices from shared memory.  This lane gives
 * the address of row (lane & 7) of matrix (lane >> 3) (16-byte aligned).
 * Lane 4g + t receives, of matrix j, in r[j]: the pair (row g, columns 2t,
 * 2t+1), or with trans (.trans) the pair (rows 2t, 2t+1, column g).
 * Emulated through shuffles as ft_mma is.
 */
__device__ __forceinline__ void ft_ldsm4(uint32_t r[4], const uint16_t *row, bool trans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#else
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 4; j++) {
        uint32_t v[2];
        for (int e = 0; e < 2; e++) {   /* element (rr, cc) of matrix j */
            const int rr = trans ? 2 * t + e : g, cc = trans ? g : 2 * t + e;
            const uint16_t *p =
                (const uint16_t *)__shfl_sync(0xffffffffu, (unsigned long long)row, j * 8 + rr);
            v[e] = p[cc];
        }
        r[j] = v[0] | v[1] << 16;
    }
#endif
}
/* A fragment: rows r0..r0+15, columns k0..k0+15 of row-major s (stride ld) */
__device__ __forceinline__ void ft_lda(uint32_t a[4], const uint16_t *s, int ld, int r0, int k0) {
    const int lane = threadIdx.x & 31;
    ft_ldsm4(a, s + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + k0 + (lane >> 4) * 8, false);
}
/* B fragments of the n8 tiles at n0 and n0 + 8 (b[0..1], b[2..3]), k
 * k0..k0+15, for B[k][n] = s[n][k] (s row-major [n][k], stride ld) */
__device__ __forceinline__ void ft_ldb2(uint32_t b[4], const uint16_t *s, int ld, int n0, int k0) {
    const int lane = threadIdx.x & 31;
    ft_ldsm4(b, s + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8, false);
}
/* the same for B[k][n] = s[k][n] (s row-major [k][n]): transposed loads */
__device__ __forceinline__ void ft_ldb2t(uint32_t b[4], const uint16_t *s, int ld, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    ft_ldsm4(b, s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8, true);
}
/* The A fragments of a 16 x N product held as N/8 accumulator tiles (the
 * C layout above): k16 step kk takes tiles 2kk and 2kk+1, rounded to bf16.
 * This is how p and dS go from one product into the next. */
template <int N>
__device__ __forceinline__ void ft_c2a(uint32_t a[N / 16][4], const float c[N / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++) {
        a[kk][0] = ft_pack(c[2 * kk][0], c[2 * kk][1]);
        a[kk][1] = ft_pack(c[2 * kk][2], c[2 * kk][3]);
        a[kk][2] = ft_pack(c[2 * kk + 1][0], c[2 * kk + 1][1]);
        a[kk][3] = ft_pack(c[2 * kk + 1][2], c[2 * kk + 1][3]);
    }
}

/* acc [16][NN] (NN/8 accumulator tiles) += A B over k = 0..K-1: A [16][K]
 * in fragments (a: registers, e.g. from ft_c2a), B a row-major bf16 tile
 * (stride ld) holding B [K][NN] (TRANS: loaded with .trans) or B^T [NN][K] */
template <int K, int NN, bool TRANS>
__device__ __forceinline__ void ft_acc(float acc[NN / 8][4], const uint32_t a[K / 16][4], const uint16_t *B,
                                       int ld) {
#pragma unroll
    for (int kk = 0; kk < K / 16; kk++)
#pragma unroll
        for (int n = 0; n < NN / 8; n += 2) {
            uint32_t bf[4];
            if (TRANS) ft_ldb2t(bf, B, ld, kk * 16, n * 8);
            else ft_ldb2(bf, B, ld, n * 8, kk * 16);
            ft_mma(acc[n], a[kk], bf);
            ft_mma(acc[n + 1], a[kk], bf + 2);
        }
}
/* this lane's part of row g + 8r (r = 0, 1) of acc [16][HSP] into row[0..hs)
 * (fp32, or O = uint16_t: k_to_bf16's rounding of the same values) */
template <int HSP, typename O>
__device__ __forceinline__ void ft_store_row(O *row, const float acc[HSP / 8][4], int r, int hs) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int n = 0; n < HSP / 8; n++)
        for (int e = 0; e < 2; e++) {
            const int d = n * 8 + 2 * t + e;
            if (d < hs) zt_st_out(&row[d], acc[n][r * 2 + e]);
        }
}

/* ------------------------------------------------------------ tiles */

/* Rows r0..r0+n-1 (n even) of one head (src: its row 0, rows rstride
 * apart, hs values each) into shared memory as bf16 [n][HSP], row-major
 * (stride ld).  Rows >= T and columns >= hs are 0.  16-byte loads and
 * stores when hs is a multiple of 8 (rows then start 16-byte aligned),
 * else two columns a thread, so that every shared-memory store is a whole
 * 32-bit word of its own. */
template <int HSP>
__device__ void ft_load(uint16_t *s, int ld, const uint16_t *src, size_t rstride, int r0, int n, int T,
                        int hs) {
    if ((hs & 7) == 0) {
        for (int idx = threadIdx.x; idx < n * (HSP / 8); idx += FT_THR) {
            const int r = idx / (HSP / 8), c = (idx % (HSP / 8)) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (r0 + r < T && c < hs) v = *(const uint4 *)(src + (size_t)(r0 + r) * rstride + c);
            *(uint4 *)(s + r * ld + c) = v;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < n * (HSP / 2); idx += FT_THR) {
        const int r = idx / (HSP / 2), c = (idx % (HSP / 2)) * 2;
        const uint16_t *p = src + (size_t)(r0 + r) * rstride;
        const bool in = r0 + r < T;
        const uint16_t v0 = in && c < hs ? p[c] : (uint16_t)0, v1 = in && c + 1 < hs ? p[c + 1] : (uint16_t)0;
        *(uint32_t *)(s + r * ld + c) = (uint32_t)v0 | (uint32_t)v1 << 16;
    }
}

/* ------------------------------------------------------------ forward */

/* grid (query tiles, NH, B), last tiles first (they walk the most keys).
 * Shared memory: Q, K, V tiles [64][HSP + 8] (the padding keeps ldmatrix's
 * eight rows in different banks). */
template <int HSP>
__global__ void __launch_bounds__(FT_THR)
k_ft_fwd(float *out, uint16_t *out16, float *lse, const uint16_t *q16, int T, int NH, int NKV, int hs, float scale,
         float cap, int window) {
    constexpr int LD = HSP + 8;
    extern __shared__ uint4 ft_smem[];
    uint16_t *Qs = (uint16_t *)ft_smem, *Ks = Qs + FT_ROWS * LD, *Vs = Ks + FT_ROWS * LD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * FT_ROWS, h = blockIdx.y, b = blockIdx.z;
    const int kh = h / (NH / NKV), R = (NH + 2 * NKV) * hs;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
    const int qw = q0 + warp * 16, i0 = qw + (lane >> 2);   /* this lane's rows: i0, i0 + 8 */
    const uint16_t *base = q16 + (size_t)b * T * R;
    const uint16_t *Kg = base + (size_t)(NH + kh) * hs, *Vg = base + (size_t)(NH + NKV + kh) * hs;

    ft_load<HSP>(Qs, LD, base + (size_t)h * hs, R, q0, FT_ROWS, T, hs);
    __syncthreads();
    uint32_t qf[HSP / 16][4];
#pragma unroll
    for (int kk = 0; kk < HSP / 16; kk++) ft_lda(qf[kk], Qs, LD, warp * 16, kk * 16);

    const int kend = min(T, q0 + FT_ROWS);
    const int kstart = window > 0 && q0 - window + 1 > 0 ? (q0 - window + 1) / FT_ROWS * FT_ROWS : 0;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, L[2];
    float o[HSP / 8][4];
#pragma unroll
    for (int n = 0; n < HSP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    for (int pass = 0; pass < 2; pass++) {
        for (int k0 = kstart; k0 < kend; k0 += FT_ROWS) {
            __syncthreads();   /* the previous tile is read */
            ft_load<HSP>(Ks, LD, Kg, R, k0, FT_ROWS, T, hs);
            if (pass) ft_load<HSP>(Vs, LD, Vg, R, k0, FT_ROWS, T, hs);
            __syncthreads();
            float s[FT_ROWS / 8][4];
#pragma unroll
            for (int n = 0; n < FT_ROWS / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            ft_acc<HSP, FT_ROWS, false>(s, qf, Ks, LD);   /* S = Q K^T */
            /* x, or -inf where the key is not seen; the warp's tile needs no
             * check when every key is below its first query, below T and
             * within the window of its last query */
            const bool all = k0 + FT_ROWS - 1 <= qw && k0 + FT_ROWS <= T &&
                             (window <= 0 || k0 > qw + 15 - window);
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < FT_ROWS / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = i0 + (e >> 1) * 8, j = k0 + n * 8 + 2 * t + (e & 1);
                    float f;
                    const float x = att_cap(s[n][e] * scale, cap, &f);
                    s[n][e] = all || (j < T && att_sees(i, j, window)) ? x : -INFINITY;
                    mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
                }
            if (pass == 0) {
                for (int r = 0; r < 2; r++) {
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                    const float mn = fmaxf(m[r], mx[r]);
                    if (mn == -INFINITY) continue;   /* nothing seen yet */
                    l[r] *= expf(m[r] - mn);
                    m[r] = mn;
                }
#pragma unroll
                for (int n = 0; n < FT_ROWS / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (s[n][e] != -INFINITY) l[e >> 1] += expf(s[n][e] - m[e >> 1]);
                continue;
            }
            /* p = bf16(exp(x - lse)), then o += p v */
#pragma unroll
            for (int n = 0; n < FT_ROWS / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = expf(s[n][e] - L[e >> 1]);
            uint32_t pf[FT_ROWS / 16][4];
            ft_c2a<FT_ROWS>(pf, s);
            ft_acc<FT_ROWS, HSP, true>(o, pf, Vs, LD);
        }
        if (pass == 0)
            for (int r = 0; r < 2; r++) {
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
                L[r] = m[r] + logf(l[r]);
            }
    }
    const int AD = NH * hs;
    for (int r = 0; r < 2; r++) {
        const int i = i0 + r * 8;
        if (i >= T) continue;
        if (t == 0) lse[((size_t)b * NH + h) * T + i] = L[r];
        /* (out16: the bf16 output, gqa_ext_fwd16o) */
        const size_t at = ((size_t)b * T + i) * AD + (size_t)h * hs;
        if (out16) ft_store_row<HSP, uint16_t>(out16 + at, o, r, hs);
        else ft_store_row<HSP, float>(out + at, o, r, hs);
    }
}

/* ------------------------------------------------------------ backward */

/* p and dS of one accumulator element: key j, query i; s the raw score,
 * dp = dout_i . v_j, L = lse_i, D = D_i.  Both 0 where i does not see j
 * (all: the caller knows that every pair of the tile is seen). */
__device__ __forceinline__ void ft_pds(float *p, float *ds, float s, float dp, int i, int j, int T,
                                       float L, float D, float scale, float cap, int window, bool all) {
    if (!all && (i >= T || j >= T || !att_sees(i, j, window))) {
        *p = *ds = 0.0f;
        return;
    }
    float f;
    const float x = att_cap(s * scale, cap, &f);
    const float pv = zt_cvt_bf16_to_f32(zt_cvt_f32_to_bf16(expf(x - L)));
    *p = pv;
    *ds = pv * (dp - D) * f * scale;
}

/* The backward's two score-shaped products for the warp's 16 rows r0..:
 * s = A1 B1^T and dp = A2 B2^T over HSP, [16][N] each; A1, A2 [.][HSP]
 * and B1, B2 [N][HSP] row-major bf16 tiles (stride ld).  dk/dv: S^T = K Q^T
 * and dP^T = V dO^T; dq: S = Q K^T and dP = dO V^T. */
template <int HSP, int N>
__device__ __forceinline__ void ft_two_products(float s[N / 8][4], float dp[N / 8][4], const uint16_t *A1,
                                                const uint16_t *B1, const uint16_t *A2, const uint16_t *B2,
                                                int ld, int r0) {
#pragma unroll
    for (int n = 0; n < N / 8; n++)
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HSP / 16; kk++) {
        uint32_t a1[4], a2[4];
        ft_lda(a1, A1, ld, r0, kk * 16);
        ft_lda(a2, A2, ld, r0, kk * 16);
#pragma unroll
        for (int n = 0; n < N / 8; n += 2) {
            uint32_t bf[4];
            ft_ldb2(bf, B1, ld, n * 8, kk * 16);
            ft_mma(s[n], a1, bf);
            ft_mma(s[n + 1], a1, bf + 2);
            ft_ldb2(bf, B2, ld, n * 8, kk * 16);
            ft_mma(dp[n], a2, bf);
            ft_mma(dp[n + 1], a2, bf + 2);
        }
    }
}

/* dk, dv: grid (key tiles, NKV, B); BQ queries per step.  Shared memory:
 * K, V [64][HSP + 8], Q, dO [BQ][HSP + 8], lse and D of the BQ queries. */
template <int HSP>
__global__ void __launch_bounds__(FT_THR)
k_ft_bwd_dkv(float *dqkv, const uint16_t *q16, const uint16_t *do16, const float *lse, const float *D,
             int T, int NH, int NKV, int hs, float scale, float cap, int window) {
    constexpr int BQ = FT_BWD_TILE(HSP), LD = HSP + 8;
    extern __shared__ uint4 ft_smem[];
    uint16_t *Ks = (uint16_t *)ft_smem, *Vs = Ks + FT_ROWS * LD, *Qs = Vs + FT_ROWS * LD;
    uint16_t *dOs = Qs + BQ * LD;
    float *Ls = (float *)(dOs + BQ * LD), *Ds = Ls + BQ;
    const int k0 = (gridDim.x - 1 - blockIdx.x) * FT_ROWS, kh = blockIdx.y, b = blockIdx.z;
    const int g = NH / NKV, R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
    const int jw = k0 + warp * 16, j0 = jw + (lane >> 2);   /* this lane's keys: j0, j0 + 8 */
    const uint16_t *base = q16 + (size_t)b * T * R;

    ft_load<HSP>(Ks, LD, base + (size_t)(NH + kh) * hs, R, k0, FT_ROWS, T, hs);
    ft_load<HSP>(Vs, LD, base + (size_t)(NH + NKV + kh) * hs, R, k0, FT_ROWS, T, hs);
    float dk[HSP / 8][4], dv[HSP / 8][4];
#pragma unroll
    for (int n = 0; n < HSP / 8; n++)
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    /* queries that see keys k0..k0+63: k0 <= i <= k0 + 63 + window - 1 */
    const int qend = window > 0 ? min(T, k0 + FT_ROWS - 1 + window) : T;
    for (int jh = 0; jh < g; jh++) {
        const int h = kh * g + jh;
        const float *Lg = lse + ((size_t)b * NH + h) * T, *Dg = D + ((size_t)b * NH + h) * T;
        for (int q0 = k0; q0 < qend; q0 += BQ) {
            __syncthreads();   /* the previous query tile is read */
            ft_load<HSP>(Qs, LD, base + (size_t)h * hs, R, q0, BQ, T, hs);
            ft_load<HSP>(dOs, LD, do16 + (size_t)b * T * AD + (size_t)h * hs, AD, q0, BQ, T, hs);
            for (int r = threadIdx.x; r < BQ; r += FT_THR) {
                Ls[r] = q0 + r < T ? Lg[q0 + r] : 0.0f;
                Ds[r] = q0 + r < T ? Dg[q0 + r] : 0.0f;
            }
            __syncthreads();
            /* S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys */
            float s[BQ / 8][4], dp[BQ / 8][4];
            ft_two_products<HSP, BQ>(s, dp, Ks, Qs, Vs, dOs, LD, warp * 16);
            /* every query of the tile below T, at or after the warp's last
             * key, and within the window of its first key */
            const bool all = q0 + BQ <= T && q0 >= jw + 15 && (window <= 0 || jw > q0 + BQ - 1 - window);
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = n * 8 + 2 * t + (e & 1), j = j0 + (e >> 1) * 8;
                    ft_pds(&s[n][e], &dp[n][e], s[n][e], dp[n][e], q0 + c, j, T, Ls[c], Ds[c], scale,
                           cap, window, all);
                }
            /* dv += P^T dO, dk += dS^T Q (k = the tile's queries) */
            uint32_t pa[BQ / 16][4], da[BQ / 16][4];
            ft_c2a<BQ>(pa, s);
            ft_c2a<BQ>(da, dp);
            ft_acc<BQ, HSP, true>(dv, pa, dOs, LD);
            ft_acc<BQ, HSP, true>(dk, da, Qs, LD);
        }
    }
    for (int r = 0; r < 2; r++) {
        const int j = j0 + r * 8;
        if (j >= T) continue;
        float *row = dqkv + ((size_t)b * T + j) * R;
        ft_store_row<HSP>(row + (size_t)(NH + kh) * hs, dk, r, hs);
        ft_store_row<HSP>(row + (size_t)(NH + NKV + kh) * hs, dv, r, hs);
    }
}

/* dq: grid (query tiles, NH, B); BK keys per step.  Shared memory: Q, dO
 * [64][HSP + 8], K, V [BK][HSP + 8]. */
template <int HSP>
__global__ void __launch_bounds__(FT_THR)
k_ft_bwd_dq(float *dqkv, const uint16_t *q16, const uint16_t *do16, const float *lse, const float *D,
            int T, int NH, int NKV, int hs, float scale, float cap, int window) {
    constexpr int BK = FT_BWD_TILE(HSP), LD = HSP + 8;
    extern __shared__ uint4 ft_smem[];
    uint16_t *Qs = (uint16_t *)ft_smem, *dOs = Qs + FT_ROWS * LD, *Ks = dOs + FT_ROWS * LD;
    uint16_t *Vs = Ks + BK * LD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * FT_ROWS, h = blockIdx.y, b = blockIdx.z;
    const int kh = h / (NH / NKV), R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
    const int iw = q0 + warp * 16, i0 = iw + (lane >> 2);
    const uint16_t *base = q16 + (size_t)b * T * R;
    const uint16_t *Kg = base + (size_t)(NH + kh) * hs, *Vg = base + (size_t)(NH + NKV + kh) * hs;
    const size_t lrow = ((size_t)b * NH + h) * T;
    float Lr[2], Dr[2];
    for (int r = 0; r < 2; r++) {
        const int i = i0 + r * 8;
        Lr[r] = i < T ? lse[lrow + i] : 0.0f;
        Dr[r] = i < T ? D[lrow + i] : 0.0f;
    }
    ft_load<HSP>(Qs, LD, base + (size_t)h * hs, R, q0, FT_ROWS, T, hs);
    ft_load<HSP>(dOs, LD, do16 + (size_t)b * T * AD + (size_t)h * hs, AD, q0, FT_ROWS, T, hs);
    float dq[HSP / 8][4];
#pragma unroll
    for (int n = 0; n < HSP / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    const int kend = min(T, q0 + FT_ROWS);
    const int kstart = window > 0 && q0 - window + 1 > 0 ? (q0 - window + 1) / BK * BK : 0;
    for (int k0 = kstart; k0 < kend; k0 += BK) {
        __syncthreads();
        ft_load<HSP>(Ks, LD, Kg, R, k0, BK, T, hs);
        ft_load<HSP>(Vs, LD, Vg, R, k0, BK, T, hs);
        __syncthreads();
        float s[BK / 8][4], dp[BK / 8][4];
        ft_two_products<HSP, BK>(s, dp, Qs, Ks, dOs, Vs, LD, warp * 16);
        /* every key of the tile below T, at or before the warp's first
         * query, and within the window of its last query */
        const bool all = k0 + BK <= T && k0 + BK - 1 <= iw && (window <= 0 || k0 > iw + 15 - window);
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, j = k0 + n * 8 + 2 * t + (e & 1);
                ft_pds(&s[n][e], &dp[n][e], s[n][e], dp[n][e], i0 + r * 8, j, T, Lr[r], Dr[r], scale,
                       cap, window, all);
            }
        uint32_t da[BK / 16][4];
        ft_c2a<BK>(da, dp);
        ft_acc<BK, HSP, true>(dq, da, Ks, LD);
    }
    for (int r = 0; r < 2; r++) {
        const int i = i0 + r * 8;
        if (i >= T) continue;
        ft_store_row<HSP>(dqkv + ((size_t)b * T + i) * R + (size_t)h * hs, dq, r, hs);
    }
}

/* ------------------------------------------------------------ launch */

/* shared memory (bytes) of each kernel at HSP */
static size_t fwd_bytes(int HSP) { return (size_t)3 * FT_ROWS * (HSP + 8) * 2; }
static size_t dkv_bytes(int HSP) {
    const size_t bq = (size_t)FT_BWD_TILE(HSP);
    return ((size_t)2 * FT_ROWS + 2 * bq) * (HSP + 8) * 2 + 2 * bq * sizeof(float);
}
static size_t dq_bytes(int HSP) {
    const size_t bk = (size_t)FT_BWD_TILE(HSP);
    return ((size_t)2 * FT_ROWS + 2 * bk) * (HSP + 8) * 2;
}

/* (out16 != NULL: the output stored in bf16 there, out untouched) */
template <int HSP>
static void ft_fwd(float *out, uint16_t *out16, float *lse, const uint16_t *q16, int B, int T, int NH,
                   int NKV, int hs, const zt_attn_opts *o) {
    const size_t sm = fwd_bytes(HSP);
    if (!zt_cuda_smem_ok(k_ft_fwd<HSP>, sm, "attention forward (flash, tensor cores)")) return;
    const dim3 grid((unsigned)((T + FT_ROWS - 1) / FT_ROWS), (unsigned)NH, (unsigned)B);
    k_ft_fwd<HSP><<<grid, FT_THR, sm, zt_cu.stream>>>(out, out16, lse, q16, T, NH, NKV, hs, o->scale,
                                                      o->softcap, o->window);
    ZT_LAUNCHED("k_ft_fwd");
}

template <int HSP>
static void ft_bwd(float *dqkv, const uint16_t *q16, const uint16_t *do16, const float *lse,
                   const float *D, int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    const size_t s1 = dkv_bytes(HSP), s2 = dq_bytes(HSP);
    if (!zt_cuda_smem_ok(k_ft_bwd_dkv<HSP>, s1, "attention backward (flash, tensor cores, dk, dv)") ||
        !zt_cuda_smem_ok(k_ft_bwd_dq<HSP>, s2, "attention backward (flash, tensor cores, dq)"))
        return;
    const unsigned nt = (unsigned)((T + FT_ROWS - 1) / FT_ROWS);
    k_ft_bwd_dkv<HSP><<<dim3(nt, (unsigned)NKV, (unsigned)B), FT_THR, s1, zt_cu.stream>>>(
        dqkv, q16, do16, lse, D, T, NH, NKV, hs, o->scale, o->softcap, o->window);
    if (!ZT_LAUNCHED("k_ft_bwd_dkv")) return;
    k_ft_bwd_dq<HSP><<<dim3(nt, (unsigned)NH, (unsigned)B), FT_THR, s2, zt_cu.stream>>>(
        dqkv, q16, do16, lse, D, T, NH, NKV, hs, o->scale, o->softcap, o->window);
    ZT_LAUNCHED("k_ft_bwd_dq");
}

void zt_cuda_flash_tc_fwd(float *out, float *lse, const uint16_t *q16, int B, int T, int NH, int NKV,
                          int hs, const zt_attn_opts *o, uint16_t *out16) {
    switch (zt_cuda_att_flash_hsp(hs)) {
    case 16: ft_fwd<16>(out, out16, lse, q16, B, T, NH, NKV, hs, o); break;
    case 32: ft_fwd<32>(out, out16, lse, q16, B, T, NH, NKV, hs, o); break;
    case 64: ft_fwd<64>(out, out16, lse, q16, B, T, NH, NKV, hs, o); break;
    case 128: ft_fwd<128>(out, out16, lse, q16, B, T, NH, NKV, hs, o); break;
    default: zt_cuda_fail(__FILE__, __LINE__, "attention forward (flash, tensor cores)",
                          "head size above 128", NULL);
    }
}

void zt_cuda_flash_tc_bwd(float *dqkv, const uint16_t *q16, const uint16_t *do16, const float *lse,
                          const float *D, int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    switch (zt_cuda_att_flash_hsp(hs)) {
    case 16: ft_bwd<16>(dqkv, q16, do16, lse, D, B, T, NH, NKV, hs, o); break;
    case 32: ft_bwd<32>(dqkv, q16, do16, lse, D, B, T, NH, NKV, hs, o); break;
    case 64: ft_bwd<64>(dqkv, q16, do16, lse, D, B, T, NH, NKV, hs, o); break;
    case 128: ft_bwd<128>(dqkv, q16, do16, lse, D, B, T, NH, NKV, hs, o); break;
    default: zt_cuda_fail(__FILE__, __LINE__, "attention backward (flash, tensor cores)",
                          "head size above 128", NULL);
    }
}
