/*
 * cpu_nf4.c -- NF4 dequantization for the CPU backend (backend.h:
 * nf4_dequant; the format in kernels/nf4.h).
 *
 * OpenMP over chunks of whole 64-blocks; each element is one table lookup
 * and one fp32 multiply (two more roundings for a double-quantized absmax,
 * kept apart: contraction is off for this file), so the result does not
 * depend on the thread count and is bitwise bitsandbytes'.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include "fp_exact.h"   /* contraction off: every rounding kept */

#include <omp.h>

#include "cpu_internal.h"
#include "half.h"
#include "nf4.h"
#include "nf4_tables.h"

static const float nf4_code[16] = {ZT_NF4_CODE_INIT};
static const float nf4_dyn[256] = {ZT_NF4_DYN_INIT};

/* 64-blocks per OpenMP chunk, and the fewest blocks worth threads */
#define NF4_CHUNK_BLOCKS 64
#define NF4_PAR_MIN_BLOCKS 1024

void zt_cpu_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                        const uint8_t *qabsmax, const float *absmax2, float offset, size_t n) {
    if (!n) return;
    const size_t nb = n / ZT_NF4_BLOCK + (n % ZT_NF4_BLOCK != 0);
    float *of = out_bf16 ? NULL : (float *)out;
    uint16_t *oh = out_bf16 ? (uint16_t *)out : NULL;
#pragma omp parallel for schedule(static, NF4_CHUNK_BLOCKS) if (nb >= NF4_PAR_MIN_BLOCKS)
    for (size_t b = 0; b < nb; b++) {
        float a;
        if (qabsmax) {
            const float s = nf4_dyn[qabsmax[b]] * absmax2[b / ZT_NF4_DQ_BLOCK];
            a = s + offset;
        } else {
            a = absmax[b];
        }
        const size_t s = b * ZT_NF4_BLOCK, e = s + ZT_NF4_BLOCK < n ? s + ZT_NF4_BLOCK : n;
        for (size_t i = s; i < e; i++) {
            const unsigned c = (codes[i >> 1] >> ((i & 1) ? 0 : 4)) & 15u;
            const float v = nf4_code[c] * a;
            if (oh) oh[i] = zt_f32_to_bf16(v);
            else of[i] = v;
        }
    }
}
