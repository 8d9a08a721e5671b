/*
 * dropout.h -- the counter-based dropout mask, shared by the CPU backend
 * (C) and the CUDA backend (device code), so both keep the same elements
 * (backend.h's dropout documents the operation).
 *
 * Element (row, col) of a [rows, C] tensor is kept when
 *     u = top 24 bits of zt_dropout_mix(key + ((row0 + row) * C + col) * GOLDEN) / 2^24 >= p
 * (zt_dropout_mix: splitmix64's finalizer): a pure function of the key, the global
 * row and the column, so the mask does not depend on how the rows are split
 * over micro batches or ranks, nor on the backend.
 */
#ifndef ZT_DROPOUT_H
#define ZT_DROPOUT_H
#include <stdint.h>

#ifdef __CUDACC__
#define ZT_DROPOUT_FN static __host__ __device__ __forceinline__
#else
#define ZT_DROPOUT_FN static inline
#endif

ZT_DROPOUT_FN uint64_t zt_dropout_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 1 when element ctr of the stream key is kept at drop probability p */
ZT_DROPOUT_FN int zt_dropout_keep(uint64_t key, uint64_t ctr, float p) {
    const uint64_t z = zt_dropout_mix(key + ctr * 0x9e3779b97f4a7c15ULL);
    return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}

/* y = kept ? x * s : 0 (s = 1 / (1 - p), given by the caller) */
ZT_DROPOUT_FN float zt_dropout_one(float x, uint64_t key, uint64_t ctr, float p, float s) {
    return zt_dropout_keep(key, ctr, p) ? x * s : 0.0f;
}

#endif
