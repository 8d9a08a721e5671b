/*
 * bitcast.h -- a float's bits as uint32_t and back, the same source as host
 * C and as CUDA device code (used by expf.h and llama_math.h's expf, and by
 * cuda/cuda_convert.h's fp32 <-> bf16 / fp16 conversions).
 */
#ifndef ZT_BITCAST_H
#define ZT_BITCAST_H
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ZT_BITCAST_FN static __host__ __device__ __forceinline__
#else
#define ZT_BITCAST_FN static inline
#endif

ZT_BITCAST_FN uint32_t zt_f2u(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}
ZT_BITCAST_FN float zt_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

#endif /* ZT_BITCAST_H */
