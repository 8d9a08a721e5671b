/*
 * expf.h -- the kernels' expf (Cephes polynomial, ~1-2 ulp), one source for
 * the CPU backend (cpu/cpu_internal.h: softmax, GELU's tanh) and the Llama
 * math (llama_math.h: SwiGLU, host C and CUDA device code), so that the two
 * cannot drift apart.  Branch-free (the result is masked with integer ops
 * rather than selected) so that `#pragma omp simd` loops calling it
 * vectorize: with the default -ftrapping-math GCC will not if-convert
 * speculated float ops, and glibc's vector expf is only used under
 * -ffast-math.
 */
#ifndef ZT_EXPF_H
#define ZT_EXPF_H
#include <stdint.h>
#include "bitcast.h"

#ifdef __CUDACC__
#define ZT_EXPF_FN static __host__ __device__ __forceinline__
#else
#define ZT_EXPF_FN static inline
#endif

/* The bits of exp(x) for x <= 88.3; x < -87.3 (and -inf) gives +0, NaN a
 * NaN.  Past 88.3 the bits are garbage (n out of the exponent's range):
 * zt_llama_expf masks them to +inf, zt_expf's callers never go there. */
ZT_EXPF_FN uint32_t zt_expf_bits(float x) {
    /* n = round(x / ln2) via the 1.5 * 2^23 trick: the low bits of t hold
     * 0x400000 + n */
    const float t = x * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    const float z = r * r;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * z + r + 1.0f;
    const float s = zt_u2f((zt_f2u(t) - 0x4B400000u + 127u) << 23);   /* 2^n */
    uint32_t rb = zt_f2u(y * s);
    rb &= -(uint32_t)!(x < -87.3f);    /* underflow (and -inf) -> +0 */
    return rb;
}

/* expf for x <= 88: every caller passes x <= 0 (softmax: x - max; tanh:
 * -2|u|), up to rounding.  x < -87.3 (and -inf) gives 0; NaN gives NaN. */
ZT_EXPF_FN float zt_expf(float x) { return zt_u2f(zt_expf_bits(x)); }

#endif /* ZT_EXPF_H */
