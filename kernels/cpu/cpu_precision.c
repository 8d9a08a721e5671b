/*
 * cpu_precision.c -- fp32 <-> bf16 / fp16 conversion and the non-finite
 * count on the CPU.  Scalar reference versions: round to nearest even,
 * NaN stays NaN (quiet, sign and top payload bits kept), overflow rounds to
 * infinity, fp16 subnormals are produced and read exactly.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <string.h>

#include "cpu_internal.h"

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

static uint16_t f32_to_bf16(float f) {
    const uint32_t x = f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x0040u);   /* NaN */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

static uint16_t f32_to_f16(float f) {
    const uint32_t u = f2u(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t x = u & 0x7FFFFFFFu;
    if (x > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((x >> 13) & 0x3FFu));  /* NaN */
    if (x >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  /* >= 65520 (and inf): inf */
    if (x >= 0x38800000u) {                                   /* normal half: >= 2^-14 */
        uint32_t r = x - 0x38000000u;                         /* exponent bias 127 -> 15 */
        r += 0xFFFu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (x <= 0x33000000u) return sign;                        /* <= 2^-25: rounds to 0 */
    /* subnormal half: q = value / 2^-24, rounded to nearest even */
    const uint32_t e = x >> 23, m = (x & 0x7FFFFFu) | 0x800000u;
    const uint32_t s = 126u - e;                              /* 14 .. 24 */
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static float f16_to_f32(uint16_t h) {
    const uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return u2f(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f;   /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

void zt_cpu_to_bf16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f32_to_bf16(in[i]);
}
void zt_cpu_from_bf16(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = u2f((uint32_t)in[i] << 16);
}
void zt_cpu_to_f16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f32_to_f16(in[i]);
}
void zt_cpu_from_f16(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(in[i]);
}
size_t zt_cpu_nonfinite(const float *x, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += (f2u(x[i]) & 0x7F800000u) == 0x7F800000u;
    return c;
}
