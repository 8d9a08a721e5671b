/*
 * llama_math.h -- the per-element math of the Llama kernels (RMSNorm,
 * rotary embeddings, SwiGLU), shared by the CPU backend (C) and the CUDA
 * backend (device code) so both apply the same operations in the same
 * order; tests/test_kernels_llama.c exercises it as host code.
 * backend.h documents the formulas.
 */
#ifndef ZT_LLAMA_MATH_H
#define ZT_LLAMA_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "bitcast.h"
#include "expf.h"

#ifdef __CUDACC__
#define ZT_LLAMA_FN static __host__ __device__ __forceinline__
#else
#define ZT_LLAMA_FN static inline
#endif

/* ---- RMSNorm (as transformers' LlamaRMSNorm, fp32) ----
 * rstd = 1 / sqrt(mean(x^2) + eps) from ss = sum of x^2 over the C channels
 * (accumulated in double by the caller, in its fixed order).              */
ZT_LLAMA_FN float zt_rms_rstd(double ss, int C, float eps) {
    return 1.0f / sqrtf((float)(ss / (double)C) + eps);
}
/* out = (x * rstd) * w */
ZT_LLAMA_FN float zt_rms_out(float x, float rstd, float w) { return (x * rstd) * w; }
/* The row's backward constant k = rstd^3 * sum_c(w dy x) / C, from
 * s = sum_c(w_c dy_c x_c) (double, summed by the caller).                 */
ZT_LLAMA_FN float zt_rms_k(double s, float rstd, int C) {
    return (float)((double)rstd * rstd * rstd * s / (double)C);
}
/* dx = rstd * w * dy - x * k  (y = x rstd w, rstd = (mean x^2 + eps)^-1/2) */
ZT_LLAMA_FN float zt_rms_dx(float x, float dy, float w, float rstd, float k) {
    return rstd * (w * dy) - x * k;
}

/* ---- rotary embeddings (rotate_half: element j pairs with j + hd/2) ----
 * angle = (float)t * inv_freq[j] in fp32, as transformers computes it.    */
ZT_LLAMA_FN float zt_rope_angle(int t, float inv_freq) { return (float)t * inv_freq; }
/* rotate the pair (a, b) = (x[j], x[j+hd/2]) by the angle whose cos, sin
 * are c, s (backward: the same with -s) */
ZT_LLAMA_FN void zt_rope_rotate(float *a, float *b, float c, float s) {
    const float x1 = *a, x2 = *b;
    *a = x1 * c - x2 * s;
    *b = x2 * c + x1 * s;
}

/* ---- exp for SwiGLU ----
 * expf.h's polynomial, the same operations on CPU and GPU; x < -87.3 gives
 * +0 and x > 88.3 gives +inf (the true value overflows past 88.72; silu
 * only divides by 1 + exp, so the gap (88.3, 88.72] is immaterial); NaN
 * gives NaN.  The overflow and NaN cases are set through integer masks: no
 * float select or clamp, which GCC would not if-convert under
 * -ftrapping-math and the loop would stay scalar.                         */
ZT_LLAMA_FN float zt_llama_expf(float x) {
    uint32_t rb = zt_expf_bits(x);                       /* underflow (and -inf) -> +0 */
    const uint32_t big = -(uint32_t)(x > 88.3f);         /* overflow (and +inf) -> +inf */
    rb = (rb & ~big) | (0x7F800000u & big);
    const uint32_t nan = -(uint32_t)((zt_f2u(x) & 0x7FFFFFFFu) > 0x7F800000u);
    return zt_u2f(rb | (0x7FC00000u & nan));       /* NaN -> NaN */
}

/* ---- SwiGLU: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)) ---- */
ZT_LLAMA_FN float zt_silu(float x) { return x / (1.0f + zt_llama_expf(-x)); }
ZT_LLAMA_FN float zt_swiglu(float g, float u) { return zt_silu(g) * u; }
/* gradients of out = silu(g) u: dg = dout u silu'(g), du = dout silu(g),
 * silu'(g) = sig(g) (1 + g (1 - sig(g))) */
ZT_LLAMA_FN void zt_swiglu_bwd(float *dg, float *du, float g, float u, float dout) {
    const float d = 1.0f + zt_llama_expf(-g);
    const float sig = 1.0f / d, si = g / d;   /* si == zt_silu(g) bitwise */
    *dg = dout * u * (sig * (1.0f + g * (1.0f - sig)));
    *du = dout * si;
}

#endif /* ZT_LLAMA_MATH_H */
