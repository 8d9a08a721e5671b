/*
 * cpu_precision.c -- fp32 <-> bfloat16 / IEEE binary16 conversion and the
 * non-finite count for the CPU backend.
 *
 * The element conversions are the branch-free scalar ones of half.h; here
 * they run over fixed-size chunks, chunks spread over OpenMP threads, each
 * chunk a `simd` loop compiled twice (x86-64-v3 and baseline, see
 * ZT_TARGET_CLONES).  Results are exact functions of the inputs, so they do
 * not depend on the thread count or the ISA chosen.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <omp.h>

#include "cpu_internal.h"
#include "half.h"

/* elements per chunk (one thread's unit of work) */
#define PREC_CHUNK ((size_t)16384)
/* below this many elements, one thread */
#define PREC_PAR_MIN ((size_t)65536)

ZT_TARGET_CLONES
static void to_bf16_run(uint16_t *restrict out, const float *restrict in, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = zt_f32_to_bf16(in[i]);
}

ZT_TARGET_CLONES
static void from_bf16_run(float *restrict out, const uint16_t *restrict in, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = zt_bf16_to_f32(in[i]);
}

ZT_TARGET_CLONES
static void to_f16_run(uint16_t *restrict out, const float *restrict in, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = zt_f32_to_f16(in[i]);
}

ZT_TARGET_CLONES
static void from_f16_run(float *restrict out, const uint16_t *restrict in, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = zt_f16_to_f32(in[i]);
}

ZT_TARGET_CLONES
static size_t nonfinite_run(const float *restrict x, size_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)x;
    uint32_t c = 0;   /* n <= PREC_CHUNK < 2^32 */
#pragma omp simd reduction(+ : c)
    for (size_t i = 0; i < n; i++) c += (u[i] & 0x7f800000u) == 0x7f800000u;
    return c;
}

/* Convert n elements in chunks, chunks in parallel when n is large. */
typedef void (*conv_fn)(void *out, const void *in, size_t n);

static void run_chunks(conv_fn f, void *out, size_t out_es, const void *in, size_t in_es,
                       size_t n) {
    const size_t nch = (n + PREC_CHUNK - 1) / PREC_CHUNK;
#pragma omp parallel for schedule(static) if (n >= PREC_PAR_MIN)
    for (size_t k = 0; k < nch; k++) {
        const size_t i0 = k * PREC_CHUNK;
        const size_t len = n - i0 < PREC_CHUNK ? n - i0 : PREC_CHUNK;
        f((char *)out + i0 * out_es, (const char *)in + i0 * in_es, len);
    }
}

static void to_bf16_chunk(void *o, const void *i, size_t n) { to_bf16_run(o, i, n); }
static void from_bf16_chunk(void *o, const void *i, size_t n) { from_bf16_run(o, i, n); }
static void to_f16_chunk(void *o, const void *i, size_t n) { to_f16_run(o, i, n); }
static void from_f16_chunk(void *o, const void *i, size_t n) { from_f16_run(o, i, n); }

void zt_cpu_to_bf16(uint16_t *out, const float *in, size_t n) {
    run_chunks(to_bf16_chunk, out, sizeof *out, in, sizeof *in, n);
}

void zt_cpu_from_bf16(float *out, const uint16_t *in, size_t n) {
    run_chunks(from_bf16_chunk, out, sizeof *out, in, sizeof *in, n);
}

void zt_cpu_to_f16(uint16_t *out, const float *in, size_t n) {
    run_chunks(to_f16_chunk, out, sizeof *out, in, sizeof *in, n);
}

void zt_cpu_from_f16(float *out, const uint16_t *in, size_t n) {
    run_chunks(from_f16_chunk, out, sizeof *out, in, sizeof *in, n);
}

size_t zt_cpu_nonfinite(const float *x, size_t n) {
    const size_t nch = (n + PREC_CHUNK - 1) / PREC_CHUNK;
    size_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (n >= PREC_PAR_MIN)
    for (size_t k = 0; k < nch; k++) {
        const size_t i0 = k * PREC_CHUNK;
        const size_t len = n - i0 < PREC_CHUNK ? n - i0 : PREC_CHUNK;
        total += nonfinite_run(x + i0, len);
    }
    return total;
}
