/*
 * cuda_internal.cuh -- shared pieces of the CUDA backend.  Private to
 * kernels/cuda/.
 *
 * Errors: nothing here aborts.  Every CUDA / cuBLAS call and every kernel
 * launch is checked; the first failure is recorded with file:line, the
 * call, the library's message and a hint, and handed out by the table's
 * error() entry.  ZT_CUDA_SYNC=1 in the environment synchronizes after
 * every kernel so that an asynchronous fault is reported at its launch.
 */
#ifndef ZT_CUDA_INTERNAL_CUH
#define ZT_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_convert.h"
#include "zt_cuda.h"
#include "cuda_workspace.h"

/* ------------------------------------------------------------ state */

struct zt_cuda_state {
    int ready;                 /* 1 after a successful init */
    int device;
    int num_sms;
    int smem_optin;            /* max dynamic shared memory per block (opt-in) */
    int sync_each;             /* ZT_CUDA_SYNC=1 */
    cudaStream_t stream;       /* the compute stream */
};
extern zt_cuda_state zt_cu;

/* ------------------------------------------------------------ errors */

/* Record a failure (the first one since the last error() call is kept). */
void zt_cuda_fail(const char *file, int line, const char *what, const char *msg,
                  const char *hint);
/* Check a runtime call: true on success, else records it. */
bool zt_cuda_ok(cudaError_t e, const char *file, int line, const char *what);
/* Check the last kernel launch (and, with ZT_CUDA_SYNC=1, its execution). */
bool zt_cuda_launch_ok(const char *file, int line, const char *kernel);

#define ZT_CU(call) zt_cuda_ok((call), __FILE__, __LINE__, #call)
#define ZT_LAUNCHED(name) zt_cuda_launch_ok(__FILE__, __LINE__, name)

/* ------------------------------------------------------------ scratch */

/* Device scratch of at least `bytes`, valid until the next call (one call
 * per kernel entry point; carve sub-buffers with zt_carve).  Growing it
 * synchronizes the stream first.  NULL (recorded) when out of memory. */
void *zt_cuda_scratch(size_t bytes, const char *who);

/* Round up to 256 bytes: the offset of the next sub-buffer. */
static inline size_t zt_al256(size_t b) { return zt_cuda_ws_al256(b); }

/* ------------------------------------------------------------ launch shapes */

#define ZT_EW_THREADS 256
/* Blocks for a grid-stride loop over n elements: enough to fill the GPU,
 * and a pure function of n and the device (results never depend on it:
 * elementwise kernels only). */
static inline unsigned zt_ew_blocks(size_t n) {
    size_t b = (n + ZT_EW_THREADS - 1) / ZT_EW_THREADS;
    const size_t cap = (size_t)(zt_cu.num_sms > 0 ? zt_cu.num_sms : 80) * 16;
    if (b > cap) b = cap;
    return (unsigned)(b ? b : 1);
}

/* Allow a kernel `bytes` of dynamic shared memory (the opt-in above 48 KiB);
 * false (recorded, naming `name`) when the GPU has less. */
template <typename K>
static bool zt_cuda_smem_ok(K kernel, size_t bytes, const char *name) {
    if (bytes > (size_t)zt_cu.smem_optin) {
        char msg[160];
        snprintf(msg, sizeof msg, "needs %zu bytes of shared memory per block, the GPU has %d", bytes,
                 zt_cu.smem_optin);
        zt_cuda_fail(__FILE__, __LINE__, name, msg, "head size too large for this GPU");
        return false;
    }
    if (bytes > 48 * 1024)
        return ZT_CU(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return true;
}

/* ------------------------------------------------------------ device helpers */

/* a kernel's output element: fp32 as computed, or (uint16_t) its bf16 bits
 * rounded to nearest even, k_to_bf16's rounding (cuda_convert.h) */
__device__ __forceinline__ void zt_st_out(float *p, float v) { *p = v; }
__device__ __forceinline__ void zt_st_out(uint16_t *p, float v) { *p = zt_cvt_f32_to_bf16(v); }

__device__ __forceinline__ float zt_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float zt_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ double zt_warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Block-wide sum / max for blockDim.x a multiple of 32; every thread gets
 * the result.  sh: 32 floats of shared memory (reusable across calls). */
__device__ __forceinline__ float zt_block_sum(float v, float *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = zt_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    return zt_warp_sum(lane < nw ? sh[lane] : 0.0f);
}
__device__ __forceinline__ float zt_block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = zt_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    return zt_warp_max(lane < nw ? sh[lane] : -INFINITY);
}

/* attention: key j is attended by query t (causal, and within the window;
 * 0: none) */
__device__ __forceinline__ bool att_sees(int t, int j, int window) {
    return j <= t && (window <= 0 || j > t - window);
}
/* the (capped) score of x = q.k * scale; *f gets d capped / d x (1 uncapped) */
__device__ __forceinline__ float att_cap(float x, float cap, float *f) {
    if (cap > 0.0f) {
        const float th = tanhf(x / cap);
        *f = 1.0f - th * th;
        return cap * th;
    }
    *f = 1.0f;
    return x;
}

/* ------------------------------------------------------------ entry points
 * (C++ linkage, internal to the backend) */

/* cuda_nn.cu */
void zt_cuda_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16, const float *wpe,
                             int B, int T, int C);
void zt_cuda_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe,
                         int B, int T, int C);
void zt_cuda_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp,
                         int B, int T, int C);
void zt_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                           const float *w, const float *b, int N, int C);
void zt_cuda_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, const float *mean,
                           const float *rstd, int N, int C);
void zt_cuda_gelu_fwd(float *out, const float *inp, size_t n);
void zt_cuda_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);
/* gelu_bwd of the widened inp16 into dinp, also rounded into dinp16 */
void zt_cuda_gelu_bwd_o16(uint16_t *dinp16, float *dinp, const uint16_t *inp16, const float *dout,
                          size_t n);
void zt_cuda_xent_fwd(float *losses, float *probs, const float *logits, const int *targets,
                      int N, int V);
void zt_cuda_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss,
                      int N, int V);
void zt_cuda_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V);
void zt_cuda_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                          int V);
void zt_cuda_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                               const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                               int C, int OC);
void zt_cuda_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
                        int V);
/* dst[c] (+=) sum over n < N of src[n * ld + c], c < C: fixed-order two-pass
 * reduction in double (no atomics). */
void zt_cuda_colsum_acc(float *dst, const float *src, int N, int C, size_t ld);
/* the same sums of fp32(src16) (bf16 bits), bitwise those of the widened values */
void zt_cuda_colsum16_acc(float *dst, const uint16_t *src16, int N, int C, size_t ld);
/* dst[c] (+=) sum over p < P of part[p * C + c] (double, in order): the
 * second pass of the column sums (part from zt_cuda_ws_col_chunks chunks) */
void zt_cuda_colsum_final(float *dst, const double *part, int P, int C);

/* cuda_llama.cu */
void zt_cuda_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, float eps,
                         int N, int C);
void zt_cuda_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, const float *rstd, int N, int C);
void zt_cuda_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                          int n_heads, int stride, int hd);
void zt_cuda_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                          const float *rstd, int N, int n_heads, int stride, int hd);
void zt_cuda_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                      int hd, float scale);
void zt_cuda_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                      int hd, float scale);
void zt_cuda_swiglu_fwd(float *out, const float *gu, int N, int H);
void zt_cuda_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H);
void zt_cuda_geglu_fwd(float *out, const float *gu, int N, int H);
void zt_cuda_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H);
void zt_cuda_softcap_fwd(float *y, const float *x, size_t n, float cap);
void zt_cuda_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap);

/* cuda_moe.cu */
void zt_cuda_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                           int K, int norm);
void zt_cuda_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                           const float *probs, const int *idx, int N, int E, int K, int norm);
void zt_cuda_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C);
void zt_cuda_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C);
void zt_cuda_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C);
void zt_cuda_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C);
void zt_cuda_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C);
void zt_cuda_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C);
void zt_cuda_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C);
void zt_cuda_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                        int K, int C);
void zt_cuda_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                            int C);
void zt_cuda_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E);
void zt_cuda_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El);
void zt_cuda_sigmoid_fwd(float *y, const float *x, size_t n);
void zt_cuda_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n);

/* cuda_attention.cu */
void zt_cuda_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int C,
                           int NH);
void zt_cuda_attention_bwd(float *dqkv, const float *dout, const float *qkv,
                           const float *out, const float *lse, int B, int T, int C, int NH);
void zt_cuda_gqa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                     int hs);
void zt_cuda_gqa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                     const float *lse, int B, int T, int NH, int NKV, int hs);
void zt_cuda_gqa_ext_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                         int hs, const zt_attn_opts *o);
void zt_cuda_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                         const float *lse, int B, int T, int NH, int NKV, int hs,
                         const zt_attn_opts *o);

/* cuda_attention_tc.cu: flash attention on tensor cores for head sizes up
 * to 128 (zt_cuda_att_flash_hsp), from bf16 copies of qkv (q16 [B, T,
 * (NH + 2 NKV) hs]) and dout (do16 [B, T, NH hs]); D = rowsum(dout * out)
 * [B, NH, T]; dqkv overwritten */
void zt_cuda_flash_tc_fwd(float *out, float *lse, const uint16_t *q16, int B, int T, int NH, int NKV,
                          int hs, const zt_attn_opts *o, uint16_t *out16 = NULL);
void zt_cuda_flash_tc_bwd(float *dqkv, const uint16_t *q16, const uint16_t *do16, const float *lse,
                          const float *D, int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o);

/* cuda_sdpa.cu: attention through cuDNN's fused attention when the rule
 * picks it for this call (true: done, or its error recorded); false: run
 * ours.  zt_cuda_sdpa_fini frees the cached plans and the cuDNN handle. */
/* out16 (the forward): cuDNN's bf16 O stored there, out untouched; out16
 * (the backward): read as cuDNN's O, out unused.  qkv16 (then qkv unused):
 * the bf16 q|k|v, cuDNN's Q, K, V as they are (a copy when not 16-byte
 * aligned).  dqkv16 (the backward, gqa_ext_bwd16d's): cuDNN's bf16 dQ, dK,
 * dV written there when it is aligned as the q|k|v (qkv16 and out16 read
 * in place), dqkv untouched, *d16 set; else widened into dqkv.  dout16
 * (the backward, gqa_ext_bwd16do's; then dout unused): cuDNN's bf16 dO as
 * it is (copied when not 16-byte aligned), no rounding */
bool zt_cuda_sdpa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int hs,
                      const zt_attn_opts *o, uint16_t *out16 = NULL, const uint16_t *qkv16 = NULL);
bool zt_cuda_sdpa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                      int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o,
                      const uint16_t *out16 = NULL, const uint16_t *qkv16 = NULL,
                      uint16_t *dqkv16 = NULL, bool *d16 = NULL, const uint16_t *dout16 = NULL);
/* backend.h att_do16 */
extern "C" int zt_cuda_att_do16(int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o);
extern "C" void zt_cuda_sdpa_fini(void);
/* backend.h att_scratch */
extern "C" size_t zt_cuda_att_scratch(int bwd, int mode, int in16, int B, int T, int NH, int NKV, int hs,
                                      const zt_attn_opts *o, int *cudnn);

/* cuda_matmul.cu */
bool zt_cuda_matmul_init(void);
void zt_cuda_matmul_fini(void);
void zt_cuda_matmul_fwd(float *out, const float *inp, const float *w, const float *bias,
                        int N, int C, int OC);
void zt_cuda_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC);
void zt_cuda_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                               const float *bb, const float *w, const float *b, int N, int C);
void zt_cuda_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                             const float *w, float eps, int N, int C);
void zt_cuda_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                             const float *bias, int N, int C, int OC);
void zt_cuda_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                              const float *dout, const float *inp, const float *pre, const float *w,
                              int N, int C, int OC);
void zt_cuda_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16, const float *bias,
                            int N, int C, int OC);
void zt_cuda_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const uint16_t *w16, int N, int C, int OC);
void zt_cuda_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                 const float *bias, int N, int C, int OC);
void zt_cuda_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const float *inp, const float *pre,
                                  const uint16_t *w16, int N, int C, int OC);
/* the backend's to_bf16 (cuda_backend.cu) */
void zt_cuda_to_bf16(uint16_t *out, const float *in, size_t n);
/* the bf16-input attention (backend.h gqa_ext_fwd16 / _bwd16) */
void zt_cuda_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                           int NH, int NKV, int hs, const zt_attn_opts *o);
void zt_cuda_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                           const float *out, const float *lse, int B, int T, int NH, int NKV, int hs,
                           const zt_attn_opts *o);
/* the attention's output in bf16 (backend.h gqa_ext_fwd16o / _bwd16o) */
void zt_cuda_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16, float *tmp,
                            int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o);
void zt_cuda_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                            const uint16_t *out16, float *out, const float *lse, int B, int T, int NH,
                            int NKV, int hs, const zt_attn_opts *o);
/* its bf16 gradient (backend.h gqa_ext_bwd16d) */
int zt_cuda_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                           float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                           int NH, int NKV, int hs, const zt_attn_opts *o);
/* the output's gradient in bf16 (backend.h matmul_bwd_o16, gqa_ext_bwd16do) */
void zt_cuda_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                            const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, int N, int C, int OC);
int zt_cuda_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                            float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                            int NH, int NKV, int hs, const zt_attn_opts *o);
/* the bf16-output entries (backend.h) */
void zt_cuda_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, const float *bias, int N, int C,
                            int OC);
void zt_cuda_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n);
/* the norms writing bf16 (backend.h layernorm_fwd16, ...) */
void zt_cuda_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                             const float *inp, const float *w, const float *b, int N, int C);
void zt_cuda_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                           const float *w, float eps, int N, int C);
void zt_cuda_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                 const float *a, const float *bb, const float *w, const float *b,
                                 int N, int C);
void zt_cuda_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd, const float *a,
                               const float *b, const float *w, float eps, int N, int C);
void zt_cuda_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                const float *a, const uint16_t *b16, const float *w, float eps,
                                int N, int C);
void zt_cuda_rope_fwd16(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T,
                        int n_heads, int stride, int hd, float scale);
void zt_cuda_rope_bwd16(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T, int n_heads,
                        int stride, int hd, float scale);
void zt_cuda_qknorm_rope_bwd16(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                               const float *rstd, const float *qw, const float *kw,
                               const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                               int knh, int stride, int hd, float scale);
void zt_cuda_qknorm_rope_fwd16(uint16_t *qkv16, float *x, float *raw, float *rstd, const float *qw,
                               const float *kw, float eps, const float *inv_freq, int B, int T,
                               int NH, int NKV, int qnh, int knh, int stride, int hd, float scale);
void zt_cuda_swiglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                          int H);
void zt_cuda_geglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                         int H);
void zt_cuda_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n);
void zt_cuda_swiglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H);
void zt_cuda_geglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H);
void zt_cuda_swiglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H);
void zt_cuda_geglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H);
void zt_cuda_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                            const float *bias, int N, int C, int OC);
void zt_cuda_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                            const uint16_t *inp16, const float *w, const uint16_t *w16, int N, int C,
                            int OC);
void zt_cuda_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                 const uint16_t *w16, const float *bias, int N, int C, int OC);
void zt_cuda_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const uint16_t *inp16, const float *pre,
                                  const float *w, const uint16_t *w16, int N, int C, int OC);
/* the input gradient accumulated (backend.h matmul_dinp_acc) */
void zt_cuda_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C, int OC);
/* the forward product accumulated (backend.h matmul_fwd_acc) */
void zt_cuda_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                            const uint16_t *w16, int N, int C, int OC);
/* the forward product accumulated into a bf16 output (backend.h matmul_fwd_acc16) */
void zt_cuda_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                              const float *w, const uint16_t *w16, int N, int C, int OC);
/* the MoE experts' grouped forward GEMM (backend.h matmul_grouped_o16) */
void zt_cuda_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                const uint16_t *w16, const int *n, int G, int C, int OC);
/* whether a weight gradient is written fresh (backend.h dw_fresh) */
int zt_cuda_dw_fresh(const float *dw);
/* its input gradients (backend.h matmul_grouped_bwd_o16) */
void zt_cuda_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16, const uint16_t *w16,
                                    const int *n, int G, int C, int OC);
void zt_cuda_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                  const uint16_t *inp16, const int *n, int G, int C, int OC);
/* the base input gradient accumulated into a bf16 gradient (backend.h matmul_bwd_acc16) */
void zt_cuda_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                              const float *w, const uint16_t *w16, int N, int C, int OC);
/* the base input gradient accumulated (backend.h matmul_bwd_acc) */
void zt_cuda_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16, const float *w,
                            const uint16_t *w16, int N, int C, int OC);
/* the bf16-gradient entries (backend.h matmul_bwd_d16, ...) */
void zt_cuda_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                            const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, int N, int C, int OC);
void zt_cuda_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const uint16_t *dout16, const float *inp,
                                  const uint16_t *inp16, const float *pre, const float *w,
                                  const uint16_t *w16, int N, int C, int OC);
void zt_cuda_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                             const float *dout, const float *inp, const float *w,
                             const float *mean, const float *rstd, int N, int C);
void zt_cuda_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                           const float *inp, const float *w, const float *rstd, int N, int C);
/* matmul_gelu_fwd_o16's fallback: pre16 = bf16(pre), out16 = bf16(gelu(pre)) */
void zt_cuda_gelu_fwd16p(uint16_t *out16, uint16_t *pre16, const float *pre, size_t n);
void zt_cuda_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                 const uint16_t *inp16, const float *w, const uint16_t *w16,
                                 const float *bias, int N, int C, int OC);
void zt_cuda_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean, float *rstd,
                                  const float *a, const uint16_t *b16, const float *w,
                                  const float *b, int N, int C);
void zt_cuda_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                              const float *dout, const uint16_t *dout16, const float *inp,
                              const float *w, const float *mean, const float *rstd, int N, int C);
void zt_cuda_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                            const float *inp, const float *w, const float *rstd, int N, int C);
void zt_cuda_swiglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                            int N, int H);
void zt_cuda_geglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                           int N, int H);
void zt_cuda_swiglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                             const uint16_t *gu16, int N, int H);
void zt_cuda_geglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                            const uint16_t *gu16, int N, int H);
void zt_cuda_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                  float *dbias, const float *dout, const uint16_t *dout16,
                                  const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                  const float *w, const uint16_t *w16, int N, int C, int OC);
void zt_cuda_set_matmul_precision(int mode);
/* the weight gradients the dW GEMMs overwrite (backend.h set_dw_fresh) */
void zt_cuda_set_dw_fresh(float *g, size_t n);
/* the precision set last (ZT_MATMUL_FP32 or ZT_MATMUL_BF16) */
int zt_cuda_matmul_mode(void);
/* batch column-major products C_i[m,n] (ldc) = op(A_i) op(B_i) + beta C_i,
 * A_i = A + i sA (bf16 elements), B_i = B + i sB (bf16), C_i = C + i sC
 * (fp32), fp32 accumulation (tensor cores); false after a recorded error */
bool zt_cuda_gemm_bf16_batched(bool ta, bool tb, int m, int n, int k, const void *A, int lda,
                               long long sA, const void *B, int ldb, long long sB, float *C,
                               int ldc, long long sC, float beta, int batch);

/* cuda_nf4.cu */
void zt_cuda_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                         const uint8_t *qabsmax, const float *absmax2, float offset, size_t n);

/* cuda_backend.cu: memory accounting of the backend's own buffers */
void *zt_cuda_malloc_acct(size_t bytes, const char *who);
void zt_cuda_free_acct(void *p);

#endif /* ZT_CUDA_INTERNAL_CUH */
