/*
 * ckpt_checksum.c -- the tensor checksum (zt_ckpt_checksum, docs/checkpoints.md
 * "Checksum") and a rank's partial checksums of the state it writes.
 *
 * A checkpoint's checksum of a tensor is the sum mod 2^64 of
 * splitmix64((i << 32) | bits(x[i])) over its elements: order-free, so
 * every writer sums its own slices and one all-reduce adds them.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include "ckpt_internal.h"

/* The inner loop, vectorized and compiled for AVX-512 / AVX2 / baseline
 * (integer arithmetic: every variant gives the same result). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__gnu_linux__) && !defined(ZT_NO_TARGET_CLONES)
#define CK_CLONES __attribute__((optimize("tree-vectorize"), \
                                 target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CK_CLONES
#endif
CK_CLONES static uint64_t sum_block_c(const uint32_t *w, size_t n, uint64_t first) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; ++i) s += zt_mix64(((first + (uint64_t)i) << 32) | (uint64_t)w[i]);
    return s;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__gnu_linux__) && !defined(ZT_NO_TARGET_CLONES)
/* AVX2 without AVX-512 has no 64-bit multiply: the vectorized loop above
 * emulates each of zt_mix64's two multiplications with three 32x32->64
 * multiplies.  Here: x * c mod 2^64 = lo(x) * lo(c) + ((lo(x) * hi(c) +
 * hi(x) * lo(c)) mod 2^32) << 32, the cross terms from one 32-bit multiply
 * against c with its halves swapped; two independent chains of 4 lanes.
 * Integer arithmetic: the same value as sum_block_c (tests/test_ckpt.c). */
#include <immintrin.h>
#define CK_AVX2 1
__attribute__((target("avx2"))) static inline __m256i mul64c(__m256i x, __m256i clo, __m256i cswap,
                                                             __m256i hi_mask) {
    __m256i lo = _mm256_mul_epu32(x, clo);                /* lo(x) * lo(c), 64-bit */
    __m256i p = _mm256_mullo_epi32(x, cswap);             /* [lo(x) * hi(c), hi(x) * lo(c)] */
    __m256i cross = _mm256_and_si256(_mm256_add_epi64(p, _mm256_slli_epi64(p, 32)), hi_mask);
    return _mm256_add_epi64(lo, cross);
}
__attribute__((target("avx2"))) static uint64_t sum_block_avx2(const uint32_t *w, size_t n,
                                                               uint64_t first) {
    const uint64_t C1 = 0xBF58476D1CE4E5B9ULL, C2 = 0x94D049BB133111EBULL;
    const __m256i k0 = _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ULL);
    const __m256i c1lo = _mm256_set1_epi64x((long long)(C1 & 0xffffffffULL));
    const __m256i c2lo = _mm256_set1_epi64x((long long)(C2 & 0xffffffffULL));
    const __m256i c1sw = _mm256_set1_epi64x((long long)((C1 << 32) | (C1 >> 32)));
    const __m256i c2sw = _mm256_set1_epi64x((long long)((C2 << 32) | (C2 >> 32)));
    const __m256i him = _mm256_set1_epi64x((long long)0xffffffff00000000ULL);
    const __m256i step = _mm256_set1_epi64x((long long)(8ULL << 32));
    __m256i i0 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_set1_epi64x((long long)first),
                                                    _mm256_setr_epi64x(0, 1, 2, 3)), 32);
    __m256i i1 = _mm256_add_epi64(i0, _mm256_set1_epi64x((long long)(4ULL << 32)));
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t i = 0;
#define CK_MIX(x)                                                           \
    do {                                                                    \
        x = _mm256_add_epi64(x, k0);                                        \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 30));                  \
        x = mul64c(x, c1lo, c1sw, him);                                     \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 27));                  \
        x = mul64c(x, c2lo, c2sw, him);                                     \
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));                  \
    } while (0)
    for (; i + 8 <= n; i += 8) {
        __m256i x0 = _mm256_or_si256(i0, _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(w + i))));
        __m256i x1 = _mm256_or_si256(i1, _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(w + i + 4))));
        CK_MIX(x0);
        CK_MIX(x1);
        a0 = _mm256_add_epi64(a0, x0);
        a1 = _mm256_add_epi64(a1, x1);
        i0 = _mm256_add_epi64(i0, step);
        i1 = _mm256_add_epi64(i1, step);
    }
#undef CK_MIX
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)(void *)t, _mm256_add_epi64(a0, a1));
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; ++i) s += zt_mix64(((first + (uint64_t)i) << 32) | (uint64_t)w[i]);
    return s;
}
/* AVX2 but not AVX-512 (there the compiler's own vpmullq loop is used) */
static int ck_use_avx2(void) {
    static int use = -1;   /* (the checksum's OpenMP threads may ask at once) */
    int u = __atomic_load_n(&use, __ATOMIC_RELAXED);
    if (u < 0) {
        __builtin_cpu_init();
        u = __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512dq");
        __atomic_store_n(&use, u, __ATOMIC_RELAXED);
    }
    return u;
}
#endif

static uint64_t sum_block(const uint32_t *w, size_t n, uint64_t first) {
#ifdef CK_AVX2
    if (ck_use_avx2()) return sum_block_avx2(w, n, first);
#endif
    return sum_block_c(w, n, first);
}

uint64_t zt_ckpt_checksum(const float *x, size_t n, uint64_t first) {
    const uint32_t *w = (const uint32_t *)(const void *)x;
    const size_t B = (size_t)1 << 16;
    size_t nb = (n + B - 1) / B;
    uint64_t s = 0;
    /* Unsigned addition mod 2^64 is associative and commutative: the
     * result does not depend on the thread split or the sharding. */
#pragma omp parallel for reduction(+ : s) schedule(static) if (nb > 4)
    for (size_t b = 0; b < nb; ++b) {
        size_t a = b * B, e = a + B < n ? a + B : n;
        s += sum_block(w + a, e - a, first + a);
    }
    return s;
}

/* ================================================================ a rank's partial checksums */

void ck_partial_checksums(const zt_train_state *s, uint64_t *cs, float *h, int serial,
                          void (*progress)(void *), void *user) {
    const zt_model *m = s->model;
    int nt = m->n_tensors;
    if (!s->writer) return;
    for (int i = 0; i < s->n_ranges; ++i) {
        const zt_owned_range *r = &s->ranges[i];
        for (int t = 0; t < nt; ++t) {
            const zt_tensor_info *ti = &m->tensors[t];
            uint64_t a = r->lo > ti->offset ? r->lo : ti->offset;
            uint64_t b = r->hi < ti->offset + ti->numel ? r->hi : ti->offset + ti->numel;
            if (a >= b) continue;
            for (int f = 0; f < CK_NFAM; ++f) {
                if (!h && serial) {
                    /* in pieces of at most 4 blocks: zt_ckpt_checksum's
                     * OpenMP loop stays serial (a background thread) */
                    const uint64_t P = (uint64_t)4 << 16;
                    for (uint64_t x = a; x < b; x += P) {
                        const uint64_t y = b - x > P ? x + P : b;
                        cs[f * nt + t] += zt_ckpt_checksum(ck_fam_ptr(r, f) + (x - r->lo), y - x,
                                                           x - ti->offset);
                    }
                    if (progress) progress(user);
                    continue;
                }
                if (!h) {
                    cs[f * nt + t] += zt_ckpt_checksum(ck_fam_ptr(r, f) + (a - r->lo), b - a,
                                                       a - ti->offset);
                    continue;
                }
                for (uint64_t x = a; x < b; x += CK_CHUNK_ELEMS) {
                    const uint64_t y = b - x > CK_CHUNK_ELEMS ? x + CK_CHUNK_ELEMS : b;
                    s->be->to_host(h, ck_fam_ptr(r, f) + (x - r->lo), (y - x) * sizeof(float));
                    cs[f * nt + t] += zt_ckpt_checksum(h, y - x, x - ti->offset);
                }
            }
        }
    }
}
