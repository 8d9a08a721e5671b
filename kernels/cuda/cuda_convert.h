/*
 * cuda_convert.h -- fp32 <-> bf16 / fp16, round to nearest even, bit by bit.
 * The CUDA backend's conversion kernels use these as device functions; the
 * same source compiles as host C, so tests/test_cuda_convert checks it on
 * every build, GPU or not.  NaN stays NaN (quiet, sign and top payload
 * bits kept); overflow rounds to infinity; fp16 subnormals are exact.
 */
#ifndef ZT_CUDA_CONVERT_H
#define ZT_CUDA_CONVERT_H

#include <stdint.h>
#include <string.h>
#include "bitcast.h"

#ifdef __CUDACC__
#define ZT_CVT static __host__ __device__ __forceinline__
#else
#define ZT_CVT static inline
#endif

ZT_CVT uint16_t zt_cvt_f32_to_bf16(float f) {
    const uint32_t x = zt_f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x0040u);   /* NaN */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

ZT_CVT float zt_cvt_bf16_to_f32(uint16_t h) { return zt_u2f((uint32_t)h << 16); }

ZT_CVT uint16_t zt_cvt_f32_to_f16(float f) {
    const uint32_t u = zt_f2u(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t x = u & 0x7FFFFFFFu;
    if (x > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((x >> 13) & 0x3FFu));   /* NaN */
    if (x >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);   /* >= 65520 (and inf): inf */
    if (x >= 0x38800000u) {                                    /* normal half: >= 2^-14 */
        uint32_t r = x - 0x38000000u;                          /* exponent bias 127 -> 15 */
        r += 0xFFFu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (x <= 0x33000000u) return (uint16_t)sign;               /* <= 2^-25: 0 */
    /* subnormal half: q = value / 2^-24, nearest even */
    const uint32_t e = x >> 23, m = (x & 0x7FFFFFu) | 0x800000u;
    const uint32_t s = 126u - e;                               /* 14 .. 24 */
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

ZT_CVT float zt_cvt_f16_to_f32(uint16_t h) {
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    const uint32_t e = ((uint32_t)h >> 10) & 0x1Fu, m = (uint32_t)h & 0x3FFu;
    if (e == 0x1Fu) return zt_u2f(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f;   /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return zt_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

#endif /* ZT_CUDA_CONVERT_H */
