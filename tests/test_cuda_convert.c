/*
 * test_cuda_convert.c -- the CUDA backend's bf16 / fp16 conversions
 * (kernels/cuda/cuda_convert.h, the exact source the GPU kernels compile),
 * built as host code: against the CPU table's conversions (bitwise), the
 * compiler's _Float16, and a bf16 reference by search.  Runs everywhere.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_convert.h"
#include "tap.h"

static uint64_t rs = 0x853C49E6748FEA9Bull;
static uint32_t rnd32(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rs >> 32) ^ (uint32_t)(rs >> 7);
}

/* nearest bf16 by search: the two neighbours, ties to even; past the largest
 * bf16 the next step is 2^128 (inf) */
static uint16_t ref_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, sizeof flo);
    memcpy(&fhi, &hi, sizeof fhi);
    const double vhi = (hi & 0x7FFFFFFFu) == 0x7F800000u ? copysign(ldexp(1.0, 128), x) : (double)fhi;
    const double dlo = fabs((double)x - flo), dhi = fabs(vhi - x);
    if (dlo < dhi) return (uint16_t)(lo >> 16);
    if (dhi < dlo) return (uint16_t)(hi >> 16);
    return (uint16_t)((((lo >> 16) & 1u) ? hi : lo) >> 16);
}

int main(void) {
    const zt_backend *cpu = zt_backend_cpu();
    const size_t n = 1 << 21;
    float *x = malloc(n * sizeof(float));
    uint16_t *c16 = malloc(n * 2);
    if (!x || !c16) return 99;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = rnd32();
        memcpy(&x[i], &u, sizeof u);
    }
    /* bf16 */
    cpu->to_bf16(c16, x, n);
    size_t bad_cpu = 0, bad_ref = 0, bad_nan = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t g = zt_cvt_f32_to_bf16(x[i]);
        if (isnan(x[i])) { bad_nan += (g & 0x7FFF) <= 0x7F80 || (c16[i] & 0x7FFF) <= 0x7F80; continue; }
        bad_cpu += g != c16[i];
        bad_ref += g != ref_bf16(x[i]);
    }
    tap_ok(bad_cpu == 0, "f32 -> bf16 on 2M random bit patterns: bitwise the CPU table's [%zu differ]", bad_cpu);
    tap_ok(bad_ref == 0, "f32 -> bf16: the nearest bf16, ties to even, overflow to inf [%zu differ]", bad_ref);
    tap_ok(bad_nan == 0, "f32 -> bf16: NaN stays NaN");
    /* fp16 */
    cpu->to_f16(c16, x, n);
    bad_cpu = bad_nan = 0;
    size_t bad_c = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t g = zt_cvt_f32_to_f16(x[i]);
        if (isnan(x[i])) { bad_nan += (g & 0x7FFF) <= 0x7C00 || (c16[i] & 0x7FFF) <= 0x7C00; continue; }
        bad_cpu += g != c16[i];
#ifdef __FLT16_MAX__
        const _Float16 h = (_Float16)x[i];
        uint16_t hb;
        memcpy(&hb, &h, sizeof hb);
        bad_c += g != hb;
#endif
    }
    tap_ok(bad_cpu == 0, "f32 -> f16 on 2M random bit patterns: bitwise the CPU table's [%zu differ]", bad_cpu);
#ifdef __FLT16_MAX__
    tap_ok(bad_c == 0, "f32 -> f16: the compiler's _Float16 conversion [%zu differ]", bad_c);
    /* values near the f16 range, where subnormals and overflow happen */
    bad_c = 0;
    for (int k = 0; k < 1000000; k++) {
        const float v = ldexpf((float)(rnd32() >> 8) / 16777216.0f, (int)(rnd32() % 48) - 32) *
                        ((rnd32() & 1) ? -1.0f : 1.0f);
        const _Float16 h = (_Float16)v;
        uint16_t hb;
        memcpy(&hb, &h, sizeof hb);
        bad_c += zt_cvt_f32_to_f16(v) != hb;
    }
    tap_ok(bad_c == 0, "f32 -> f16 on 1M values of magnitude 2^-32 .. 2^16: _Float16's [%zu differ]", bad_c);
#else
    tap_skip("f32 -> f16 vs _Float16", "no _Float16");
    tap_skip("f32 -> f16 near the range vs _Float16", "no _Float16");
#endif
    tap_ok(bad_nan == 0, "f32 -> f16: NaN stays NaN");
    /* back to f32: every code */
    uint16_t codes[65536];
    float fb[65536], ff[65536];
    for (uint32_t i = 0; i < 65536; i++) codes[i] = (uint16_t)i;
    cpu->from_bf16(fb, codes, 65536);
    cpu->from_f16(ff, codes, 65536);
    size_t bb = 0, bf = 0, rt = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const float gb = zt_cvt_bf16_to_f32((uint16_t)i), gf = zt_cvt_f16_to_f32((uint16_t)i);
        bb += isnan(fb[i]) ? !isnan(gb) : memcmp(&gb, &fb[i], 4) != 0;
        bf += isnan(ff[i]) ? !isnan(gf) : memcmp(&gf, &ff[i], 4) != 0;
        if (!isnan(gb)) rt += zt_cvt_f32_to_bf16(gb) != i;
        if (!isnan(gf)) rt += zt_cvt_f32_to_f16(gf) != i;
    }
    tap_ok(bb == 0 && bf == 0, "bf16 / f16 -> f32 on all 65536 codes: bitwise the CPU table's [%zu, %zu differ]", bb, bf);
    tap_ok(rt == 0, "every non-NaN code round-trips through f32 [%zu differ]", rt);
    free(x);
    free(c16);
    return tap_done();
}
