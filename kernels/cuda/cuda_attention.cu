/*
 * cuda_attention.cu -- causal multi-head self-attention, flash-style: tiles
 * of 32 queries x 32 keys in shared memory, online softmax, only the
 * log-sum-exp per row is kept (lse[B,NH,T]); no [T,T] matrix exists, in
 * memory or in shared memory beyond one 32 x 32 tile.
 *
 * One implementation serves both table entries: grouped-query attention
 * (gqa_fwd/bwd, layout as the CPU backend): qkv[B,T,R], R = (NH+2 NKV) hs,
 * holds NH q heads, NKV k heads, NKV v heads; q head h reads kv head
 * kh = h / (NH/NKV) (k at column (NH+kh) hs, v at (NH+NKV+kh) hs);
 * out[B,T,NH hs]; hs <= 256.  GPT-2's attention_fwd/bwd is the case
 * NKV = NH, hs = C/NH (R = 3C, k at C + h hs, v at 2C + h hs).
 *
 * Each kernel uses blocks of 4 warps and 32-row tiles.  A warp owns 8 rows
 * (queries in the forward and dq kernels, keys in the dk/dv kernel); lane l
 * owns head dimensions l, l+32, ... of them, so accumulators live in
 * registers and every sum is taken in a fixed order.
 *
 * Backward is deterministic and atomic-free: one kernel computes dk, dv
 * (a block owns 32 keys of one kv head and walks the queries that see
 * them, for each of the kv head's q heads in increasing order), another dq
 * (a block owns 32 queries and walks their keys); both recompute
 *   p = exp(q.k * scale - lse),  D_t = dout_t . out_t,
 *   dS = p (dout_t . v_j - D_t) scale,
 *   dq_t += dS k_j,  dk_j += dS q_t,  dv_j += p dout_t.
 *
 * Options (gqa_ext_fwd/bwd, zt_attn_opts; gqa_fwd/bwd are the defaults
 * scale = 1/sqrt(hs), cap 0, window 0, through the same code): the score
 * x = q.k * scale is soft-capped, x <- cap tanh(x / cap), and dS gets the
 * factor 1 - tanh(x / cap)^2 before the scale; with a sliding window only
 * keys j > t - window are attended, and the kernels skip the key tiles (the
 * query tiles in dk/dv) entirely outside it.  Without options every
 * operation is the one of the plain kernels, so the results are bitwise
 * the same.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <stdio.h>

#include "cuda_convert.h"
#include "cuda_internal.cuh"

#define TILE 32
#define NWARP 4
#define NTHR (NWARP * 32)
#define RPW (TILE / NWARP)   /* rows per warp */
#define PLD (TILE + 1)       /* row stride of the 32 x 32 score tiles */

/* Row stride of a [32][hs] tile in shared memory: odd, so that lane l
 * reading row l (scores: lane = key) hits 32 different banks. */
__host__ __device__ static inline int tile_ld(int hs) { return (hs & 1) ? hs : hs + 1; }

/* rows [r0, r0+32) of one head (base: its first row; rows rstride floats
 * apart) into dst[32][ld]; rows >= T are zero */
__device__ __forceinline__ void load_tile(float *dst, const float *base, int r0, int T, size_t rstride,
                                          int hs, int ld) {
    for (int idx = threadIdx.x; idx < TILE * hs; idx += NTHR) {
        const int r = idx / hs, d = idx - r * hs;
        const int t = r0 + r;
        dst[r * ld + d] = t < T ? base[(size_t)t * rstride + d] : 0.0f;
    }
}

/* first key tile of the query tile at q0: the tile of key q0 - window + 1 */
__host__ __device__ static inline int att_key_start(int q0, int window) {
    const int j = window > 0 ? q0 - window + 1 : 0;
    return j > 0 ? j / TILE * TILE : 0;
}

__device__ __forceinline__ float dot_sm(const float *a, const float *b, int hs) {
    float s = 0.0f;
    for (int d = 0; d < hs; d++) s += a[d] * b[d];
    return s;
}

/* The warp's RPW rows of a [32 x 32] weight tile S (row stride PLD) times a
 * [32 x hs] value tile M (row stride ld), accumulated into acc: lane owns
 * columns d = lane + 32 k.  Each M value is loaded once for all RPW rows. */
template <int DPL>
__device__ __forceinline__ void rows_times_tile(float (&acc)[RPW][DPL], const float *S,
                                                const float *M, int ld, int hs, int warp,
                                                int lane) {
#pragma unroll 2
    for (int jj = 0; jj < TILE; jj++) {
        float m[DPL];
#pragma unroll
        for (int k = 0; k < DPL; k++) {
            const int d = lane + 32 * k;
            m[k] = d < hs ? M[jj * ld + d] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const float w = S[(warp * RPW + i) * PLD + jj];
#pragma unroll
            for (int k = 0; k < DPL; k++) acc[i][k] += w * m[k];
        }
    }
}

template <int DPL>
__device__ __forceinline__ void zero_rows(float (&acc)[RPW][DPL]) {
#pragma unroll
    for (int i = 0; i < RPW; i++)
#pragma unroll
        for (int k = 0; k < DPL; k++) acc[i][k] = 0.0f;
}

/* ------------------------------------------------------------ forward */

template <int DPL>
__global__ void __launch_bounds__(NTHR)
k_att_fwd(float *out, float *lse, const float *qkv, int T, int NH, int NKV, int hs, float scale,
          float cap, int window, int ntiles) {
    extern __shared__ float sm[];
    const int ld = tile_ld(hs);
    float *Qs = sm;                  /* [32][ld] */
    float *Ks = Qs + TILE * ld;      /* [32][ld] */
    float *Vs = Ks + TILE * ld;      /* [32][ld] */
    float *Ps = Vs + TILE * ld;      /* [32][PLD] probabilities of this key tile */
    float *Ms = Ps + TILE * PLD;     /* [32] running max */
    float *Ls = Ms + TILE;           /* [32] running sum */
    float *Cs = Ls + TILE;           /* [32] rescale factor of this key tile */

    /* the longest rows first: the causal triangle's big tiles start early */
    const int qt = ntiles - 1 - (int)(blockIdx.x % ntiles);
    const int bh = (int)(blockIdx.x / ntiles);
    const int h = bh % NH, b = bh / NH, kh = h / (NH / NKV);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t R = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const float *base = qkv + (size_t)b * T * R + (size_t)h * hs;
    const float *kbase = qkv + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    const float *vbase = kbase + (size_t)NKV * hs;
    const int q0 = qt * TILE;

    load_tile(Qs, base, q0, T, R, hs, ld);
    if (threadIdx.x < TILE) {
        Ms[threadIdx.x] = -INFINITY;
        Ls[threadIdx.x] = 0.0f;
    }
    float acc[RPW][DPL];
    zero_rows<DPL>(acc);

    const int last = min(q0 + TILE, T) - 1;   /* last query row of the tile */
    for (int k0 = att_key_start(q0, window); k0 <= last; k0 += TILE) {
        __syncthreads();   /* Ks/Vs of the previous tile are no longer read */
        load_tile(Ks, kbase, k0, T, R, hs, ld);
        load_tile(Vs, vbase, k0, T, R, hs, ld);
        __syncthreads();
        /* scores of the warp's rows: lane = key */
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const int r = warp * RPW + i, t = q0 + r, j = k0 + lane;
            float s = -INFINITY, f;
            if (t < T && att_sees(t, j, window))
                s = att_cap(dot_sm(Qs + r * ld, Ks + lane * ld, hs) * scale, cap, &f);
            const float mt = zt_warp_max(s);
            const float mold = Ms[r];
            const float mnew = fmaxf(mold, mt);
            float corr, p;
            if (mnew == -INFINITY) {   /* nothing seen yet (padding rows) */
                corr = 1.0f;
                p = 0.0f;
            } else {
                corr = expf(mold - mnew);   /* 0 on the first tile */
                p = expf(s - mnew);         /* masked: exp(-inf) = 0 */
            }
            const float ps = zt_warp_sum(p);
            Ps[r * PLD + lane] = p;
            __syncwarp();
            if (lane == 0) {
                Ms[r] = mnew;
                Ls[r] = Ls[r] * corr + ps;
                Cs[r] = corr;
            }
        }
        __syncwarp();
        /* acc = acc * corr + P V for the warp's rows; each v value is
         * loaded once for the 8 rows */
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const float corr = Cs[warp * RPW + i];
#pragma unroll
            for (int k = 0; k < DPL; k++) acc[i][k] *= corr;
        }
        rows_times_tile<DPL>(acc, Ps, Vs, ld, hs, warp, lane);
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int r = warp * RPW + i, t = q0 + r;
        if (t >= T) continue;
        const float l = Ls[r];
        const float inv = 1.0f / l;
        float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
#pragma unroll
        for (int k = 0; k < DPL; k++) {
            const int d = lane + 32 * k;
            if (d < hs) o[d] = acc[i][k] * inv;
        }
        if (lane == 0) lse[((size_t)b * NH + h) * T + t] = Ms[r] + logf(l);
    }
}

/* ------------------------------------------------------------ backward */

/* out's element as fp32: itself, or the bf16 value widened (exact) */
__device__ __forceinline__ float att_ld(const float *p) { return *p; }
__device__ __forceinline__ float att_ld(const uint16_t *p) { return zt_cvt_bf16_to_f32(*p); }

/* D[b, h, t] = dout_t . out_t over the head's dims: one warp per (b, t, h);
 * out fp32 or (O = uint16_t, gqa_ext_bwd16o) bf16, the same sums */
template <typename O>
__global__ void k_att_rowdot(float *D, const float *dout, const O *out, int B, int T, int C,
                             int NH, int hs) {
    const size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const size_t total = (size_t)B * T * NH;
    if (w >= total) return;
    const int h = (int)(w % NH);
    const size_t bt = w / NH;
    const int t = (int)(bt % T), b = (int)(bt / T);
    const float *g = dout + bt * C + (size_t)h * hs;
    const O *o = out + bt * C + (size_t)h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) s += g[d] * att_ld(&o[d]);
    s = zt_warp_sum(s);
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = s;
}

/* dq for the 32 queries of the block */
template <int DPL>
__global__ void __launch_bounds__(NTHR)
k_att_bwd_dq(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *Dv,
             int T, int NH, int NKV, int hs, float scale, float cap, int window, int ntiles) {
    extern __shared__ float sm[];
    const int ld = tile_ld(hs);
    float *Qs = sm;                   /* [32][ld] queries */
    float *Gs = Qs + TILE * ld;       /* [32][ld] dout of the queries */
    float *Ks = Gs + TILE * ld;       /* [32][ld] */
    float *Vs = Ks + TILE * ld;       /* [32][ld] */
    float *Ss = Vs + TILE * ld;       /* [32][PLD] dS */
    float *Lr = Ss + TILE * PLD;      /* [32] lse of the queries */
    float *Dr = Lr + TILE;            /* [32] D of the queries */

    const int qt = ntiles - 1 - (int)(blockIdx.x % ntiles);
    const int bh = (int)(blockIdx.x / ntiles);
    const int h = bh % NH, b = bh / NH, kh = h / (NH / NKV);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t R = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const float *base = qkv + (size_t)b * T * R + (size_t)h * hs;
    const float *kbase = qkv + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    const float *vbase = kbase + (size_t)NKV * hs;
    const float *gbase = dout + (size_t)b * T * C + (size_t)h * hs;
    const int q0 = qt * TILE;

    load_tile(Qs, base, q0, T, R, hs, ld);
    load_tile(Gs, gbase, q0, T, C, hs, ld);
    if (threadIdx.x < TILE) {
        const int t = q0 + threadIdx.x;
        const size_t li = ((size_t)b * NH + h) * T + t;
        Lr[threadIdx.x] = t < T ? lse[li] : 0.0f;
        Dr[threadIdx.x] = t < T ? Dv[li] : 0.0f;
    }
    float acc[RPW][DPL];
    zero_rows<DPL>(acc);

    const int last = min(q0 + TILE, T) - 1;
    for (int k0 = att_key_start(q0, window); k0 <= last; k0 += TILE) {
        __syncthreads();
        load_tile(Ks, kbase, k0, T, R, hs, ld);
        load_tile(Vs, vbase, k0, T, R, hs, ld);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const int r = warp * RPW + i, t = q0 + r, j = k0 + lane;
            float ds = 0.0f;
            if (t < T && att_sees(t, j, window)) {
                const float s = dot_sm(Qs + r * ld, Ks + lane * ld, hs);
                const float e = dot_sm(Gs + r * ld, Vs + lane * ld, hs);
                float f;
                const float p = expf(att_cap(s * scale, cap, &f) - Lr[r]);
                ds = p * (e - Dr[r]) * f * scale;
            }
            Ss[r * PLD + lane] = ds;
        }
        __syncwarp();
        /* dq += dS K for the warp's rows; each k value loaded once */
        rows_times_tile<DPL>(acc, Ss, Ks, ld, hs, warp, lane);
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int r = warp * RPW + i, t = q0 + r;
        if (t >= T) continue;
        float *dq = dqkv + ((size_t)b * T + t) * R + (size_t)h * hs;
#pragma unroll
        for (int k = 0; k < DPL; k++) {
            const int d = lane + 32 * k;
            if (d < hs) dq[d] = acc[i][k];
        }
    }
}

/* dk, dv for the 32 keys of the block (of kv head kh): the sum over the
 * kv head's q heads, in increasing order, of each one's queries in order */
template <int DPL>
__global__ void __launch_bounds__(NTHR)
k_att_bwd_dkv(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *Dv,
              int T, int NH, int NKV, int hs, float scale, float cap, int window, int ntiles) {
    extern __shared__ float sm[];
    const int ld = tile_ld(hs);
    float *Ks = sm;                   /* [32][ld] the block's keys */
    float *Vs = Ks + TILE * ld;       /* [32][ld] */
    float *Qs = Vs + TILE * ld;       /* [32][ld] a tile of queries */
    float *Gs = Qs + TILE * ld;       /* [32][ld] their dout */
    float *Ps = Gs + TILE * ld;       /* [32 queries][PLD] p */
    float *Ss = Ps + TILE * PLD;      /* [32 queries][PLD] dS */
    float *Lr = Ss + TILE * PLD;      /* [32] */
    float *Dr = Lr + TILE;            /* [32] */

    /* key tiles near the start see the most queries: they go first */
    const int kt = (int)(blockIdx.x % ntiles);
    const int bk = (int)(blockIdx.x / ntiles);
    const int kh = bk % NKV, b = bk / NKV, G = NH / NKV;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t R = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const float *kbase = qkv + (size_t)b * T * R + (size_t)(NH + kh) * hs;
    const float *vbase = kbase + (size_t)NKV * hs;
    const int k0 = kt * TILE;

    load_tile(Ks, kbase, k0, T, R, hs, ld);
    load_tile(Vs, vbase, k0, T, R, hs, ld);
    float ak[RPW][DPL], av[RPW][DPL];
#pragma unroll
    for (int i = 0; i < RPW; i++)
#pragma unroll
        for (int k = 0; k < DPL; k++) ak[i][k] = av[i][k] = 0.0f;

    /* (q head, query tile) pairs: the kv head's q heads in increasing
     * order, each one's query tiles from the diagonal on, up to the last
     * query whose window holds the tile's last key (k0 + 31 + window - 1) */
    const int qend = window > 0 && window - 1 < T - k0 - TILE ? k0 + TILE + window - 1 : T;
    const int nqt = (qend - k0 + TILE - 1) / TILE;
    for (int it = 0; it < G * nqt; it++) {
        const int h = kh * G + it / nqt, q0 = k0 + (it % nqt) * TILE;
        const float *base = qkv + (size_t)b * T * R + (size_t)h * hs;
        const float *gbase = dout + (size_t)b * T * C + (size_t)h * hs;
        __syncthreads();   /* previous query tile no longer read */
        load_tile(Qs, base, q0, T, R, hs, ld);
        load_tile(Gs, gbase, q0, T, C, hs, ld);
        if (threadIdx.x < TILE) {
            const int t = q0 + threadIdx.x;
            const size_t li = ((size_t)b * NH + h) * T + t;
            Lr[threadIdx.x] = t < T ? lse[li] : 0.0f;
            Dr[threadIdx.x] = t < T ? Dv[li] : 0.0f;
        }
        __syncthreads();
        /* p and dS of the warp's query rows: lane = key */
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const int r = warp * RPW + i, t = q0 + r, j = k0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (t < T && att_sees(t, j, window)) {
                const float s = dot_sm(Qs + r * ld, Ks + lane * ld, hs);
                const float e = dot_sm(Gs + r * ld, Vs + lane * ld, hs);
                float f;
                p = expf(att_cap(s * scale, cap, &f) - Lr[r]);
                ds = p * (e - Dr[r]) * f * scale;
            }
            Ps[r * PLD + lane] = p;
            Ss[r * PLD + lane] = ds;
        }
        __syncthreads();
        /* dk += dS^T Q, dv += P^T dout for the warp's keys, queries in
         * order; each q / dout value loaded once for the 8 keys */
#pragma unroll 2
        for (int r = 0; r < TILE; r++) {
            float qv[DPL], gv[DPL];
#pragma unroll
            for (int k = 0; k < DPL; k++) {
                const int d = lane + 32 * k;
                qv[k] = d < hs ? Qs[r * ld + d] : 0.0f;
                gv[k] = d < hs ? Gs[r * ld + d] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < RPW; i++) {
                const int kk = warp * RPW + i;
                const float p = Ps[r * PLD + kk], ds = Ss[r * PLD + kk];
#pragma unroll
                for (int k = 0; k < DPL; k++) {
                    av[i][k] += p * gv[k];
                    ak[i][k] += ds * qv[k];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int kk = warp * RPW + i, j = k0 + kk;
        if (j >= T) continue;
        float *dk = dqkv + ((size_t)b * T + j) * R + (size_t)(NH + kh) * hs;
        float *dv = dk + (size_t)NKV * hs;
#pragma unroll
        for (int k = 0; k < DPL; k++) {
            const int d = lane + 32 * k;
            if (d < hs) {
                dk[d] = ak[i][k];
                dv[d] = av[i][k];
            }
        }
    }
}

/* ------------------------------------------------------------ tensor cores
 *
 * In bf16 matmul mode (zt_cuda_matmul_mode() == ZT_MATMUL_BF16) attention's
 * products are cuBLAS bf16 GEMMs with fp32 accumulation, for one sequence b
 * and kc kv heads at a time (zt_cuda_att_tc_heads: the [kc, T, T] score
 * buffers stay within ZT_CUDA_ATT_TC_BUDGET; longer sequences use the flash
 * kernels above).  GQA: for j < g = NH / NKV, kv head kh serves q head
 * kh g + j, so one strided batch covers kv heads k0 .. k0+n-1 with their
 * j-th q heads.  A row-major [T, hs] slice of qkv (row stride R) is a
 * column-major [hs, T] matrix, and with S, P, dP, dS row-major [Tq, Tk]
 * (column-major [Tk, Tq], ld T):
 *   S^T  [Tk,Tq] = K Q^T     A = K  op T, B = Q  op N   m=T   n=T  k=hs
 *   O^T  [hs,Tq] = V^T P^T   A = V  op N, B = P  op N   m=hs  n=T  k=T
 *   dP^T [Tk,Tq] = V dO^T    A = V  op T, B = dO op N   m=T   n=T  k=hs
 *   dV^T [hs,Tk] = dO^T P    A = dO op N, B = P  op T   m=hs  n=T  k=T
 *   dQ^T [hs,Tq] = K^T dS^T  A = K  op N, B = dS op N   m=hs  n=T  k=T
 *   dK^T [hs,Tk] = Q^T dS    A = Q  op N, B = dS op T   m=hs  n=T  k=T
 * q, k, v and dout are rounded to bf16 once per call, p and dS as they are
 * made (as flash attention does); scores, dP, lse, D and the outputs are
 * fp32.  Scores above the diagonal (and outside a sliding window) are
 * computed and ignored (p = dS = 0 there).  With a soft-cap the softmax
 * caps the fp32 scores; the backward's softmax pass also writes the cap's
 * derivative 1 - tanh^2 ([kc, T, T] fp32, F), which the dS kernel
 * multiplies in.  dk and dv of a kv head sum its q heads j = 0, 1, ... in order
 * (beta = 1 after the first), so every result is deterministic.
 */
__global__ void k_att_tc_round(uint16_t *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f32_to_bf16(in[i]);
}

/* One warp per score row: row i of chunk head kk is S + ((size_t)kk T + i) T.
 * x = s * scale, capped (cap > 0), over keys c0 <= c <= i (c0 = i - window
 * + 1 with a window, else 0).  recompute = 0: l = max + log(sum exp(x -
 * max)), written to lse; recompute = 1: l read from lse.  Then P[i][c] =
 * bf16(exp(x - l)) for those keys, 0 for the others, and (F not NULL, the
 * backward of a capped softmax) F[i][c] = 1 - tanh(s scale / cap)^2 there,
 * 0 elsewhere.  lse of row i, head kk: lse[lbase + kk lstride + i]. */
__global__ void k_att_tc_softmax(uint16_t *P, float *F, float *lse, const float *S, int T, int nrows,
                                 float scale, float cap, int window, int recompute, size_t lbase,
                                 size_t lstride) {
    const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= nrows) return;
    const int kk = row / T, i = row - kk * T;
    const int c0 = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    const float *x = S + (size_t)row * T;
    uint16_t *p = P + (size_t)row * T;
    float *l_at = lse + lbase + (size_t)kk * lstride + i;
    float l, f;
    if (recompute) {
        l = *l_at;
    } else {
        float m = -INFINITY;
        for (int c = c0 + lane; c <= i; c += 32) m = fmaxf(m, att_cap(x[c] * scale, cap, &f));
        m = zt_warp_max(m);
        float sum = 0.0f;
        for (int c = c0 + lane; c <= i; c += 32) sum += expf(att_cap(x[c] * scale, cap, &f) - m);
        sum = zt_warp_sum(sum);
        l = m + logf(sum);
        if (lane == 0) *l_at = l;
    }
    float *fr = F ? F + (size_t)row * T : NULL;
    for (int c = lane; c < T; c += 32) {
        uint16_t pv = 0;
        f = 0.0f;
        if (c0 <= c && c <= i) pv = zt_cvt_f32_to_bf16(expf(att_cap(x[c] * scale, cap, &f) - l));
        p[c] = pv;
        if (fr) fr[c] = f;
    }
}

/* dS = p (dP - D_i) F scale for keys c0 <= c <= i (F: 1 when NULL), 0 for
 * the others, in place over P (bf16); dP fp32 [n, T, T]; D of row i, head
 * kk: D[dbase + kk dstride + i]. */
__global__ void k_att_tc_ds(uint16_t *P, const float *dP, const float *F, const float *D, int T,
                            size_t n, float scale, int window, size_t dbase, size_t dstride) {
    const size_t TT = (size_t)T * T;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t kk = idx / TT, r = idx - kk * TT;
        const int i = (int)(r / T), c = (int)(r - (size_t)i * T);
        float v = 0.0f;
        if (att_sees(i, c, window))
            v = zt_cvt_bf16_to_f32(P[idx]) * (dP[idx] - D[dbase + kk * dstride + i]) *
                (F ? F[idx] : 1.0f) * scale;
        P[idx] = zt_cvt_f32_to_bf16(v);
    }
}

static void tc_round(uint16_t *out, const float *in, size_t n) {
    k_att_tc_round<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    ZT_LAUNCHED("k_att_tc_round");
}

static bool tc_softmax(uint16_t *P, float *F, float *lse, const float *S, int T, int n,
                       const zt_attn_opts *o, int recompute, size_t lbase, size_t lstride) {
    const int nrows = n * T;
    k_att_tc_softmax<<<(unsigned)((nrows + 7) / 8), 256, 0, zt_cu.stream>>>(
        P, F, lse, S, T, nrows, o->scale, o->softcap, o->window, recompute, lbase, lstride);
    return ZT_LAUNCHED("k_att_tc_softmax");
}

/* 0: the cuBLAS path at every head size (zt_cuda_att_flash_for_test) */
static int flash_on = 1;
void zt_cuda_att_flash_for_test(int on) { flash_on = on != 0; }

/* the forward on tensor cores (flash kernels at head sizes <= 128, else
 * cuBLAS); false when this shape takes the fp32 flash kernel */
/* (out16: gqa_ext_fwd16o's bf16 output, stored by the flash kernel, or the
 * cuBLAS path's fp32 out rounded into it) */
static bool tc_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int hs,
                   const zt_attn_opts *o, const uint16_t *qkv16 = NULL, uint16_t *out16 = NULL) {
    const int flash = flash_on && zt_cuda_att_flash_tc(hs);
    const int kc = flash ? 0 : zt_cuda_att_tc_heads_ext(T, NKV, o->softcap > 0.0f);
    if (zt_cuda_matmul_mode() != ZT_MATMUL_BF16 || (!flash && kc <= 0)) return false;
    const int g = NH / NKV, R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const size_t nqkv = (size_t)B * T * R, nsc = (size_t)kc * T * T;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_gqa_path_fwd(1, flash, B, T, NH, NKV, hs, o->softcap),
                                      "attention forward (tensor cores)");
    if (!s) return true;
    /* (qkv16: q|k|v already in bf16, read as they are) */
    const uint16_t *q16 = qkv16 ? qkv16 : (const uint16_t *)s;
    if (!qkv16) tc_round((uint16_t *)s, qkv, nqkv);
    if (flash) {
        zt_cuda_flash_tc_fwd(out, lse, q16, B, T, NH, NKV, hs, o, out16);
        return true;
    }
    float *S = (float *)(s + zt_al256(nqkv * 2));
    uint16_t *P = (uint16_t *)(s + zt_al256(nqkv * 2) + zt_al256(nsc * 4));
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const uint16_t *base = q16 + (size_t)b * T * R;
        for (int k0 = 0; k0 < NKV; k0 += kc) {
            const int n = NKV - k0 < kc ? NKV - k0 : kc;
            const uint16_t *K = base + (size_t)(NH + k0) * hs, *V = base + (size_t)(NH + NKV + k0) * hs;
            for (int j = 0; j < g; j++) {
                const int h0 = k0 * g + j;   /* q head of the batch's first kv head */
                const uint16_t *Q = base + (size_t)h0 * hs;
                if (!zt_cuda_gemm_bf16_batched(true, false, T, T, hs, K, R, hs, Q, R, (long long)g * hs,
                                               S, T, TT, 0.0f, n) ||
                    !tc_softmax(P, NULL, lse, S, T, n, o, 0, ((size_t)b * NH + h0) * T, (size_t)g * T) ||
                    !zt_cuda_gemm_bf16_batched(false, false, hs, T, T, V, R, hs, P, T, TT,
                                               out + (size_t)b * T * AD + (size_t)h0 * hs, AD,
                                               (long long)g * hs, 0.0f, n))
                    return true;
            }
        }
    }
    if (out16) zt_cuda_to_bf16(out16, out, (size_t)B * T * AD);
    return true;
}

/* the backward on tensor cores (flash kernels or cuBLAS as the forward);
 * false when this shape takes the fp32 flash kernels */
/* (out16: gqa_ext_bwd16o's bf16 output, read by k_att_rowdot as it is) */
static bool tc_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                   const float *lse, int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o,
                   const uint16_t *qkv16 = NULL, const uint16_t *out16 = NULL) {
    const int capped = o->softcap > 0.0f, flash = flash_on && zt_cuda_att_flash_tc(hs);
    const int kc = flash ? 0 : zt_cuda_att_tc_heads_ext(T, NKV, capped);
    if (zt_cuda_matmul_mode() != ZT_MATMUL_BF16 || (!flash && kc <= 0)) return false;
    const int g = NH / NKV, R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const size_t nD = (size_t)B * NH * T, nqkv = (size_t)B * T * R, ndo = (size_t)B * T * AD,
                 nsc = (size_t)kc * T * T;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_gqa_path_bwd(1, flash, B, T, NH, NKV, hs, o->softcap),
                                      "attention backward (tensor cores)");
    if (!s) return true;
    float *D = (float *)s;
    s += zt_al256(nD * 4);
    const uint16_t *q16 = qkv16 ? qkv16 : (const uint16_t *)s;   /* (qkv16: as it is) */
    uint16_t *q16r = (uint16_t *)s;
    s += zt_al256(nqkv * 2);
    uint16_t *do16 = (uint16_t *)s;
    s += zt_al256(ndo * 2);
    float *S = (float *)s;
    uint16_t *P = (uint16_t *)(s + zt_al256(nsc * 4));
    float *F = capped ? (float *)(s + zt_al256(nsc * 4) + zt_al256(nsc * 2)) : NULL;
    const size_t threads = nD * 32;
    if (out16)
        k_att_rowdot<uint16_t><<<(unsigned)((threads + 255) / 256), 256, 0, zt_cu.stream>>>(
            D, dout, out16, B, T, AD, NH, hs);
    else
        k_att_rowdot<float><<<(unsigned)((threads + 255) / 256), 256, 0, zt_cu.stream>>>(
            D, dout, out, B, T, AD, NH, hs);
    if (!ZT_LAUNCHED("k_att_rowdot")) return true;
    if (!qkv16) tc_round(q16r, qkv, nqkv);
    tc_round(do16, dout, ndo);
    if (flash) {
        zt_cuda_flash_tc_bwd(dqkv, q16, do16, lse, D, B, T, NH, NKV, hs, o);
        return true;
    }
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const uint16_t *base = q16 + (size_t)b * T * R;
        float *dbase = dqkv + (size_t)b * T * R;
        for (int k0 = 0; k0 < NKV; k0 += kc) {
            const int n = NKV - k0 < kc ? NKV - k0 : kc;
            const uint16_t *K = base + (size_t)(NH + k0) * hs, *V = base + (size_t)(NH + NKV + k0) * hs;
            float *dK = dbase + (size_t)(NH + k0) * hs, *dV = dbase + (size_t)(NH + NKV + k0) * hs;
            for (int j = 0; j < g; j++) {
                const int h0 = k0 * g + j;
                const uint16_t *Q = base + (size_t)h0 * hs;
                const uint16_t *dO = do16 + (size_t)b * T * AD + (size_t)h0 * hs;
                float *dQ = dbase + (size_t)h0 * hs;
                const long long qs = (long long)g * hs;
                const size_t rbase = ((size_t)b * NH + h0) * T, rstride = (size_t)g * T;
                const float acc = j > 0 ? 1.0f : 0.0f;
                if (!zt_cuda_gemm_bf16_batched(true, false, T, T, hs, K, R, hs, Q, R, qs, S, T, TT, 0.0f,
                                               n) ||
                    !tc_softmax(P, F, (float *)lse, S, T, n, o, 1, rbase, rstride) ||
                    !zt_cuda_gemm_bf16_batched(true, false, T, T, hs, V, R, hs, dO, AD, qs, S, T, TT,
                                               0.0f, n) ||
                    !zt_cuda_gemm_bf16_batched(false, true, hs, T, T, dO, AD, qs, P, T, TT, dV, R, hs,
                                               acc, n))
                    return true;
                const size_t ne = (size_t)n * T * T;
                k_att_tc_ds<<<zt_ew_blocks(ne), ZT_EW_THREADS, 0, zt_cu.stream>>>(
                    P, S, F, D, T, ne, o->scale, o->window, rbase, rstride);
                if (!ZT_LAUNCHED("k_att_tc_ds") ||
                    !zt_cuda_gemm_bf16_batched(false, false, hs, T, T, K, R, hs, P, T, TT, dQ, R, qs,
                                               0.0f, n) ||
                    !zt_cuda_gemm_bf16_batched(false, true, hs, T, T, Q, R, qs, P, T, TT, dK, R, hs,
                                               acc, n))
                    return true;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------ launch */

static size_t fwd_smem(int hs) {
    return ((size_t)3 * TILE * tile_ld(hs) + TILE * PLD + 3 * TILE) * sizeof(float);
}
static size_t dq_smem(int hs) {
    return ((size_t)4 * TILE * tile_ld(hs) + TILE * PLD + 2 * TILE) * sizeof(float);
}
static size_t dkv_smem(int hs) {
    return ((size_t)4 * TILE * tile_ld(hs) + 2 * TILE * PLD + 2 * TILE) * sizeof(float);
}

/* Dims per lane for head size hs (<= 256), 0 when unsupported. */
static int dims_per_lane(int hs) {
    if (hs <= 32) return 1;
    if (hs <= 64) return 2;
    if (hs <= 128) return 4;
    if (hs <= 256) return 8;
    return 0;
}

static bool check_shape(int NH, int NKV, int hs, const char *who) {
    if (NKV <= 0 || NH % NKV != 0 || dims_per_lane(hs) == 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "NH=%d, NKV=%d, head size %d: NKV must divide NH and the head size "
                 "be at most 256", NH, NKV, hs);
        zt_cuda_fail(__FILE__, __LINE__, who, msg, NULL);
        return false;
    }
    return true;
}

template <int DPL>
static void att_fwd_launch(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                           int hs, const zt_attn_opts *o) {
    const int ntiles = (T + TILE - 1) / TILE;
    const size_t smem = fwd_smem(hs);
    if (!zt_cuda_smem_ok(k_att_fwd<DPL>, smem, "attention forward")) return;
    const size_t nblk = (size_t)B * NH * ntiles;
    k_att_fwd<DPL><<<(unsigned)nblk, NTHR, smem, zt_cu.stream>>>(out, lse, qkv, T, NH, NKV, hs, o->scale,
                                                                o->softcap, o->window, ntiles);
    ZT_LAUNCHED("k_att_fwd");
}

template <int DPL>
static void att_bwd_launch(float *dqkv, const float *dout, const float *qkv, const float *lse,
                           const float *D, int B, int T, int NH, int NKV, int hs,
                           const zt_attn_opts *o) {
    const int ntiles = (T + TILE - 1) / TILE;
    const size_t s1 = dkv_smem(hs), s2 = dq_smem(hs);
    if (!zt_cuda_smem_ok(k_att_bwd_dkv<DPL>, s1, "attention backward (dk, dv)") ||
        !zt_cuda_smem_ok(k_att_bwd_dq<DPL>, s2, "attention backward (dq)"))
        return;
    const unsigned nkv = (unsigned)((size_t)B * NKV * ntiles), nq = (unsigned)((size_t)B * NH * ntiles);
    k_att_bwd_dkv<DPL><<<nkv, NTHR, s1, zt_cu.stream>>>(dqkv, dout, qkv, lse, D, T, NH, NKV, hs, o->scale,
                                                       o->softcap, o->window, ntiles);
    if (!ZT_LAUNCHED("k_att_bwd_dkv")) return;
    k_att_bwd_dq<DPL><<<nq, NTHR, s2, zt_cu.stream>>>(dqkv, dout, qkv, lse, D, T, NH, NKV, hs, o->scale,
                                                     o->softcap, o->window, ntiles);
    ZT_LAUNCHED("k_att_bwd_dq");
}

/* gqa_fwd / gqa_bwd's options: scale 1/sqrt(hs), no cap, no window */
static zt_attn_opts default_opts(int hs) {
    zt_attn_opts o;
    o.scale = 1.0f / sqrtf((float)hs);
    o.softcap = 0.0f;
    o.window = 0;
    return o;
}

void zt_cuda_gqa_ext_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                         int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention forward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_fwd(out, lse, qkv, B, T, NH, NKV, hs, o)) return;   /* cuDNN (cuda_sdpa.cu) */
    if (tc_fwd(out, lse, qkv, B, T, NH, NKV, hs, o)) return;
    switch (dims_per_lane(hs)) {
    case 1: att_fwd_launch<1>(out, lse, qkv, B, T, NH, NKV, hs, o); break;
    case 2: att_fwd_launch<2>(out, lse, qkv, B, T, NH, NKV, hs, o); break;
    case 4: att_fwd_launch<4>(out, lse, qkv, B, T, NH, NKV, hs, o); break;
    default: att_fwd_launch<8>(out, lse, qkv, B, T, NH, NKV, hs, o); break;
    }
}

void zt_cuda_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                         const float *lse, int B, int T, int NH, int NKV, int hs,
                         const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention backward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs, o)) return;
    if (tc_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs, o)) return;
    const size_t nrow = (size_t)B * NH * T;
    float *D = (float *)zt_cuda_scratch(zt_cuda_ws_gqa_ext_bwd(0, B, T, NH, NKV, hs, o->softcap),
                                        "attention backward");
    if (!D) return;
    const size_t threads = nrow * 32;
    k_att_rowdot<float><<<(unsigned)((threads + 255) / 256), 256, 0, zt_cu.stream>>>(D, dout, out, B, T,
                                                                                       NH * hs, NH, hs);
    if (!ZT_LAUNCHED("k_att_rowdot")) return;
    switch (dims_per_lane(hs)) {
    case 1: att_bwd_launch<1>(dqkv, dout, qkv, lse, D, B, T, NH, NKV, hs, o); break;
    case 2: att_bwd_launch<2>(dqkv, dout, qkv, lse, D, B, T, NH, NKV, hs, o); break;
    case 4: att_bwd_launch<4>(dqkv, dout, qkv, lse, D, B, T, NH, NKV, hs, o); break;
    default: att_bwd_launch<8>(dqkv, dout, qkv, lse, D, B, T, NH, NKV, hs, o); break;
    }
}

void zt_cuda_gqa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                     int hs) {
    if (hs <= 0) return;
    const zt_attn_opts o = default_opts(hs);
    zt_cuda_gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hs, &o);
}

void zt_cuda_gqa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                     const float *lse, int B, int T, int NH, int NKV, int hs) {
    if (hs <= 0) return;
    const zt_attn_opts o = default_opts(hs);
    zt_cuda_gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hs, &o);
}

/* GPT-2's attention: NKV = NH heads of C/NH */
static bool gpt_shape(int C, int NH, const char *who) {
    if (C % NH != 0 || dims_per_lane(C / NH) == 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "C=%d, NH=%d: head size must divide C and be at most 256", C, NH);
        zt_cuda_fail(__FILE__, __LINE__, who, msg, NULL);
        return false;
    }
    return true;
}

void zt_cuda_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
    if (!gpt_shape(C, NH, "attention forward")) return;
    zt_cuda_gqa_fwd(out, lse, qkv, B, T, NH, NH, C / NH);
}

void zt_cuda_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                           const float *lse, int B, int T, int C, int NH) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
    if (!gpt_shape(C, NH, "attention backward")) return;
    zt_cuda_gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NH, C / NH);
}

/* the bf16-input attention (backend.h gqa_ext_fwd16 / _bwd16): cuDNN
 * (where the rule picks it) and the tensor-core paths read qkv16 itself
 * (the bf16 operands they would round q, k, v to); the fp32 kernels' path
 * the values widened into tmp, through the fp32 entry: the same values
 * either way */
static __global__ void k_att_widen(float *out, const uint16_t *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_bf16_to_f32(in[i]);
}
static bool att_widen(float *out, const uint16_t *in, size_t n) {
    k_att_widen<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    return ZT_LAUNCHED("k_att_widen");
}

void zt_cuda_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                           int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention forward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_fwd(out, lse, NULL, B, T, NH, NKV, hs, o, NULL, qkv16)) return;   /* cuDNN */
    if (tc_fwd(out, lse, NULL, B, T, NH, NKV, hs, o, qkv16)) return;
    if (att_widen(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hs))
        zt_cuda_gqa_ext_fwd(out, lse, tmp, B, T, NH, NKV, hs, o);
}

void zt_cuda_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                           const float *out, const float *lse, int B, int T, int NH, int NKV, int hs,
                           const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention backward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_bwd(dqkv, dout, NULL, out, lse, B, T, NH, NKV, hs, o, NULL, qkv16)) return;
    if (tc_bwd(dqkv, dout, NULL, out, lse, B, T, NH, NKV, hs, o, qkv16)) return;
    if (att_widen(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hs))
        zt_cuda_gqa_ext_bwd(dqkv, dout, tmp, out, lse, B, T, NH, NKV, hs, o);
}

/* the attention's output in bf16 (backend.h gqa_ext_fwd16o / _bwd16o): the
 * flash tensor-core kernel stores out16 itself, cuDNN its bf16 O there;
 * the cuBLAS path and the fp32 kernels compute out and round it
 * (k_to_bf16, the backend's to_bf16).  The backward's k_att_rowdot (D =
 * rowsum(dout . O)) reads out16 itself on the tensor-core paths, cuDNN
 * reads it as its bf16 O, the fp32 kernels widen it into out: the same
 * values as gqa_ext_fwd16 + to_bf16 and from_bf16 + gqa_ext_bwd16 */
void zt_cuda_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16, float *tmp,
                            int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention forward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_fwd(out, lse, NULL, B, T, NH, NKV, hs, o, out16, qkv16)) return;   /* cuDNN */
    if (tc_fwd(out, lse, NULL, B, T, NH, NKV, hs, o, qkv16, out16)) return;
    if (!att_widen(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hs)) return;
    zt_cuda_gqa_ext_fwd(out, lse, tmp, B, T, NH, NKV, hs, o);
    zt_cuda_to_bf16(out16, out, (size_t)B * T * NH * hs);
}

void zt_cuda_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                            const uint16_t *out16, float *out, const float *lse, int B, int T, int NH,
                            int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
    if (!check_shape(NH, NKV, hs, "attention backward")) return;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    if (zt_cuda_sdpa_bwd(dqkv, dout, NULL, NULL, lse, B, T, NH, NKV, hs, o, out16, qkv16)) return;
    if (tc_bwd(dqkv, dout, NULL, NULL, lse, B, T, NH, NKV, hs, o, qkv16, out16)) return;
    if (!att_widen(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hs)) return;
    if (att_widen(out, out16, (size_t)B * T * NH * hs))
        zt_cuda_gqa_ext_bwd(dqkv, dout, tmp, out, lse, B, T, NH, NKV, hs, o);
}

/* the gradient in bf16 (backend.h gqa_ext_bwd16d): cuDNN writes its bf16
 * dQ, dK, dV into dqkv16 (1, no k_sdpa_widen); otherwise gqa_ext_bwd16o
 * (0) */
int zt_cuda_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                           float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                           int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return 0;
    if (!check_shape(NH, NKV, hs, "attention backward")) return 0;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    bool d16 = false;
    if (zt_cuda_sdpa_bwd(dqkv, dout, NULL, NULL, lse, B, T, NH, NKV, hs, o, out16, qkv16, dqkv16, &d16))
        return d16 ? 1 : 0;
    zt_cuda_gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hs, o);
    return 0;
}

/* the output's gradient in bf16 (backend.h gqa_ext_bwd16do): cuDNN reads
 * dout16 as its dO (gqa_ext_bwd16d's path, no k_sdpa_round); where that
 * path is not taken (att_do16 answers 0: the caller calls gqa_ext_bwd16d)
 * an error is recorded and nothing computed: ztrain's kernels read the
 * fp32 dout, which this entry has not */
int zt_cuda_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                            float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                            int NH, int NKV, int hs, const zt_attn_opts *o) {
    (void)tmp, (void)out;
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return 0;
    if (!check_shape(NH, NKV, hs, "attention backward")) return 0;
    const zt_attn_opts dflt = default_opts(hs);
    if (!o) o = &dflt;
    bool d16 = false;
    if (zt_cuda_sdpa_bwd(dqkv, NULL, NULL, NULL, lse, B, T, NH, NKV, hs, o, out16, qkv16, dqkv16, &d16, dout16))
        return d16 ? 1 : 0;
    zt_cuda_fail(__FILE__, __LINE__, "gqa_ext_bwd16do", "a shape or mode off cuDNN's path (att_do16 answers 0)",
                 "call gqa_ext_bwd16d with the fp32 gradient where att_do16 answers 0");
    return 0;
}
