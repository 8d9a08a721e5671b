/*
 * half.h -- scalar conversions between fp32 and the 16-bit float storage
 * formats (header-only, no dependencies).
 *
 *   bfloat16: 1 sign, 8 exponent, 7 mantissa bits (the top half of an fp32)
 *   binary16: 1 sign, 5 exponent, 10 mantissa bits (IEEE 754 half)
 *
 * Narrowing rounds to nearest, ties to even, whatever the FPU rounding mode
 * says for bfloat16 and in the default mode (round to nearest) for binary16:
 * values beyond the largest finite value round to infinity, binary16
 * subnormals are produced exactly, NaN stays NaN (its payload is kept where
 * it fits; a payload that would truncate to zero becomes the quiet bit), so
 * every 16-bit pattern survives widen -> narrow unchanged.  Widening is exact.
 *
 * Every function is branch-free (selects, integer ops, one float add), so
 * that loops calling them vectorize.  Used by the CPU backend
 * (kernels/cpu/cpu_precision.c) and by the MPI reduction operators in
 * libtrain/comm.c.
 */
#ifndef ZT_HALF_H
#define ZT_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t zt_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float zt_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* c ? a : b as mask arithmetic: with ?: GCC may sink a float operation
 * into a branch and then (under -ftrapping-math) not vectorize the loop. */
static inline uint32_t zt_sel(int c, uint32_t a, uint32_t b) {
    const uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    return (a & m) | (b & ~m);
}

/* ---------------------------------------------------------------- bfloat16 */

static inline uint16_t zt_f32_to_bf16(float f) {
    const uint32_t u = zt_f32_bits(f);
    /* round to nearest even on the dropped 16 bits; a carry out of the
     * mantissa bumps the exponent, and out of the largest finite value
     * gives infinity.  (u + 0x7fff + 1 only wraps for NaN patterns.) */
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t top = u >> 16;
    const uint32_t nan = top | ((top & 0x7fu) == 0 ? 0x40u : 0u);
    return (uint16_t)zt_sel((u & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

static inline float zt_bf16_to_f32(uint16_t h) {
    return zt_bits_f32((uint32_t)h << 16);
}

/* ---------------------------------------------------------------- binary16 */

#define ZT_F16_MAX 65504.0f

static inline uint16_t zt_f32_to_f16(float f) {
    const uint32_t u = zt_f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    /* normal results, |f| in [2^-14, 65520): re-bias the exponent
     * (127 -> 15: subtract 112 << 23) and round the 13 dropped bits to
     * nearest even; a mantissa carry moves into the exponent. */
    const uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13;
    /* subnormal results, |f| < 2^-14: in 0.5 + |f| the last mantissa bit
     * is worth 2^-24 (binary16's subnormal step), so the FPU's rounding of
     * the add does the work; 0x400 (rounding up to 2^-14) is the smallest
     * normal, which is the right encoding too. */
    const uint32_t sub = zt_f32_bits(zt_bits_f32(a) + 0.5f) - 0x3f000000u;
    const uint32_t m = (a >> 13) & 0x3ffu;
    const uint32_t nan = 0x7c00u | m | (m == 0 ? 0x200u : 0u);
    uint32_t h = zt_sel(a < 0x38800000u, sub, normal);
    h = zt_sel(a >= 0x477ff000u, 0x7c00u, h);     /* >= 65520 (and inf): infinity */
    h = zt_sel(a > 0x7f800000u, nan, h);
    return (uint16_t)(sign | h);
}

static inline float zt_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    const uint32_t normal = ((e + 112u) << 23) | (m << 13);
    const uint32_t infnan = 0x7f800000u | (m << 13);
    const uint32_t sub = zt_f32_bits((float)(int32_t)m * 5.9604644775390625e-8f); /* m 2^-24 */
    const uint32_t r = zt_sel(e == 0, sub, zt_sel(e == 31, infnan, normal));
    return zt_bits_f32(sign | r);
}

/* ---------------------------------------------------------------- sums */

/* a + b computed in fp32 and rounded once to the 16-bit format. */
static inline uint16_t zt_bf16_add(uint16_t a, uint16_t b) {
    return zt_f32_to_bf16(zt_bf16_to_f32(a) + zt_bf16_to_f32(b));
}
static inline uint16_t zt_f16_add(uint16_t a, uint16_t b) {
    return zt_f32_to_f16(zt_f16_to_f32(a) + zt_f16_to_f32(b));
}

#endif /* ZT_HALF_H */
