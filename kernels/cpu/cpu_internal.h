/*
 * cpu_internal.h -- shared pieces of the CPU backend (OpenMP + CBLAS).
 * Private to kernels/cpu/.
 */
#ifndef ZT_CPU_INTERNAL_H
#define ZT_CPU_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "expf.h"   /* zt_expf */

/*
 * Hot loops are compiled twice where GCC can do it (x86-64, glibc ifunc):
 * for AVX2 + FMA (x86-64-v3) and for the baseline ISA; the loader picks
 * one per machine, so results are reproducible on a given machine.
 * Build with -DZT_NO_TARGET_CLONES to get the baseline code only.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__gnu_linux__) && !defined(ZT_NO_TARGET_CLONES)
#define ZT_TARGET_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ZT_TARGET_CLONES
#endif

/* cpu_nn.c */
void zt_cpu_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16,
                            const float *wpe, int B, int T, int C);
void zt_cpu_encoder_fwd(float *out, const int *inp, const float *wte,
                        const float *wpe, int B, int T, int C);
void zt_cpu_encoder_bwd(float *dwte, float *dwpe, const float *dout,
                        const int *inp, int B, int T, int C);
void zt_cpu_layernorm_fwd(float *out, float *mean, float *rstd,
                          const float *inp, const float *w, const float *b,
                          int N, int C);
void zt_cpu_layernorm_bwd(float *dinp, float *dw, float *db,
                          const float *dout, const float *inp, const float *w,
                          const float *mean, const float *rstd, int N, int C);
void zt_cpu_gelu_fwd(float *out, const float *inp, size_t n);
void zt_cpu_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);
void zt_cpu_xent_fwd(float *losses, float *probs, const float *logits,
                     const int *targets, int N, int V);
void zt_cpu_xent_bwd(float *dlogits, const float *probs, const int *targets,
                     float dloss, int N, int V);
void zt_cpu_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
                       int V);

/* cpu_attention.c */
void zt_cpu_attention_fwd(float *out, float *lse, const float *qkv,
                          int B, int T, int C, int NH);
void zt_cpu_attention_bwd(float *dqkv, const float *dout, const float *qkv,
                          const float *out, const float *lse,
                          int B, int T, int C, int NH);
/* the tanh GELU (gelu_fwd, geglu_fwd): 0.5 x (1 + tanh(K (x + A x^3))) */
#define ZT_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define ZT_GELU_A 0.044715f

void zt_cpu_gqa_fwd(float *out, float *lse, const float *qkv,
                    int B, int T, int NH, int NKV, int hs);
void zt_cpu_gqa_bwd(float *dqkv, const float *dout, const float *qkv,
                    const float *out, const float *lse,
                    int B, int T, int NH, int NKV, int hs);
void zt_cpu_gqa_ext_fwd(float *out, float *lse, const float *qkv,
                        int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o);
void zt_cpu_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv,
                        const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o);

/* cpu_llama.c */
void zt_cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w,
                        float eps, int N, int C);
void zt_cpu_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, const float *rstd, int N, int C);
void zt_cpu_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                     int hd, float scale);
void zt_cpu_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride,
                     int hd, float scale);
void zt_cpu_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                         int n_heads, int stride, int hd);
void zt_cpu_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                         const float *rstd, int N, int n_heads, int stride, int hd);
void zt_cpu_swiglu_fwd(float *out, const float *gu, int N, int H);
void zt_cpu_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H);
void zt_cpu_geglu_fwd(float *out, const float *gu, int N, int H);
void zt_cpu_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H);
/* cpu_moe.c */
void zt_cpu_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                          int K, int norm);
void zt_cpu_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                          const float *probs, const int *idx, int N, int E, int K, int norm);
void zt_cpu_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C);
void zt_cpu_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C);
void zt_cpu_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C);
void zt_cpu_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C);
void zt_cpu_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C);
void zt_cpu_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C);
void zt_cpu_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C);
void zt_cpu_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                       int K, int C);
void zt_cpu_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                           int C);
void zt_cpu_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E);
void zt_cpu_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El);
void zt_cpu_sigmoid_fwd(float *y, const float *x, size_t n);
void zt_cpu_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n);
void zt_cpu_softcap_fwd(float *y, const float *x, size_t n, float cap);
void zt_cpu_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap);

/* cpu_precision.c */
/* x rounded to bfloat16 (nearest even; NaN stays NaN), as a float: the
 * matmul operands and attention's products in bf16 mode */
static inline float zt_cpu_round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
    else u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* cpu_backend.c: the matmul precision set last (ZT_MATMUL_FP32 / _BF16) */
int zt_cpu_matmul_mode(void);
void zt_cpu_to_bf16(uint16_t *out, const float *in, size_t n);
void zt_cpu_from_bf16(float *out, const uint16_t *in, size_t n);
void zt_cpu_to_f16(uint16_t *out, const float *in, size_t n);
void zt_cpu_from_f16(float *out, const uint16_t *in, size_t n);
size_t zt_cpu_nonfinite(const float *x, size_t n);

/* cpu_xent16.c: backend.h xent16_fwd / xent16_fused (the CUDA kernel's order) */
void zt_cpu_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V);
void zt_cpu_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                         int V);

/* cpu_nf4.c */
void zt_cpu_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                        const uint8_t *qabsmax, const float *absmax2, float offset, size_t n);

/* cpu_backend.c: dst[c] += sum_{n<N} src[n*ld + c] for c < C, summed over n
 * in order (double accumulators), parallel over channel blocks: the result
 * does not depend on the thread count. */
void zt_cpu_colsum_acc(float *dst, const float *src, int N, int C, size_t ld);

/* Block size (in channels) for channel-partitioned reductions: a multiple
 * of 16 floats, small enough that every thread gets a block. */
int zt_cpu_channel_block(int C, int max_block);

/* tanh from zt_expf on -2|u| <= 0; absolute error ~1e-7 (what GELU needs). */
static inline float zt_tanhf(float u) {
    const float e = zt_expf(-2.0f * fabsf(u));
    return copysignf((1.0f - e) / (1.0f + e), u);
}

#endif /* ZT_CPU_INTERNAL_H */
