/*
 * alltoallv_case.h -- test cases of comm.h's alltoallv, shared by
 * tests/test_comm16.c (MPI and host-staged groups on host buffers) and
 * tests/test_comm_gpu.c (the same plus NCCL on device buffers).
 *
 * Every rank builds the same P x P count matrix from the case number (a
 * fixed pseudo-random sequence), so the counts agree without a
 * collective.  Each rank's send and receive spans are laid out in a
 * shuffled order with gaps between them; everything outside the spans
 * holds a canary, which the call must leave untouched.  Element values are
 * codes of (sender, receiver, index) that no canary equals.
 */
#ifndef ZT_TEST_ALLTOALLV_CASE_H
#define ZT_TEST_ALLTOALLV_CASE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

#define A2AV_NCASES 6

typedef struct a2av_case {
    int P, R;
    size_t es;
    size_t *cnt;                          /* [P * P]: cnt[i * P + j] = rank i -> rank j */
    size_t *scounts, *sdispls, *rcounts, *rdispls;   /* this rank's, [P] each */
    size_t sn, rn;                        /* extents of the buffers, elements */
    uint64_t sent_bytes;                  /* accounted: elements to other ranks x es */
    const char *what;
} a2av_case;

static uint64_t a2av_rng(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* the value rank `from` sends to rank `to` as element k: non-negative
 * (canaries are negative); exact in F32, a finite BF16 code */
static uint32_t a2av_code(int from, int to, size_t k) {
    uint32_t h = (uint32_t)from * 2654435761u ^ (uint32_t)to * 40503u ^ (uint32_t)k * 2246822519u;
    h ^= h >> 15;
    return h;
}
static void a2av_put(zt_dtype t, void *buf, size_t i, uint32_t h) {
    if (t == ZT_F32) {
        const float f = (float)(h & 0xFFFFFFu);
        memcpy((char *)buf + i * 4, &f, 4);
    } else if (t == ZT_I32) {
        const int32_t v = (int32_t)(h & 0x7FFFFFFFu);
        memcpy((char *)buf + i * 4, &v, 4);
    } else {   /* 16-bit: sign clear, exponent below all-ones */
        const uint16_t v = (uint16_t)(h & 0x7F7Fu);
        memcpy((char *)buf + i * 2, &v, 2);
    }
}

/* lay out n spans of counts c[] in a shuffled order with gaps of 0-3
 * elements (and 1-3 before the first); displs out, extent returned */
static size_t a2av_layout(int n, const size_t *c, size_t *displs, uint64_t *x) {
    int *perm = malloc((size_t)n * sizeof *perm);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)(a2av_rng(x) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    size_t off = 1 + (size_t)(a2av_rng(x) % 3);
    for (int i = 0; i < n; i++) {
        displs[perm[i]] = off;
        off += c[perm[i]] + (size_t)(a2av_rng(x) % 4);
    }
    free(perm);
    return off + 2;   /* canaries after the last span too */
}

/* case k of A2AV_NCASES on P ranks, seen from rank R */
static void a2av_make(a2av_case *c, int k, int P, int R, zt_dtype t) {
    memset(c, 0, sizeof *c);
    c->P = P;
    c->R = R;
    c->es = zt_dtype_size(t);
    c->cnt = calloc((size_t)P * (size_t)P, sizeof *c->cnt);
    uint64_t x = 0x9E3779B97F4A7C15ull + (uint64_t)k * 1000003u + (uint64_t)P;
    static const char *names[A2AV_NCASES] = {
        "random counts 0-9, about a third zero", "random counts up to 3000",
        "the last rank sends nothing", "every rank sends only to rank 0 (it receives everything)",
        "all counts zero", "only the diagonal (each rank to itself)"};
    c->what = names[k];
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            size_t v = 0;
            const uint64_t r = a2av_rng(&x);
            switch (k) {
            case 0: v = r % 3 == 0 ? 0 : (size_t)(r >> 8) % 10; break;
            case 1: v = (size_t)(r >> 8) % 3001; break;
            case 2: v = i == P - 1 ? 0 : 1 + (size_t)(r >> 8) % 40; break;
            case 3: v = j == 0 ? 1 + (size_t)(r >> 8) % 50 : 0; break;
            case 4: v = 0; break;
            default: v = i == j ? 5 + (size_t)i : 0; break;
            }
            c->cnt[(size_t)i * (size_t)P + (size_t)j] = v;
        }
    c->scounts = malloc(4 * (size_t)P * sizeof(size_t));
    c->sdispls = c->scounts + P;
    c->rcounts = c->scounts + 2 * P;
    c->rdispls = c->scounts + 3 * P;
    for (int j = 0; j < P; j++) {
        c->scounts[j] = c->cnt[(size_t)R * (size_t)P + (size_t)j];
        c->rcounts[j] = c->cnt[(size_t)j * (size_t)P + (size_t)R];
        if (j != R) c->sent_bytes += (uint64_t)c->scounts[j] * c->es;
    }
    x += (uint64_t)R * 7919u;   /* each rank its own layout */
    c->sn = a2av_layout(P, c->scounts, c->sdispls, &x);
    c->rn = a2av_layout(P, c->rcounts, c->rdispls, &x);
}

static void a2av_free(a2av_case *c) {
    free(c->cnt);
    free(c->scounts);
    memset(c, 0, sizeof *c);
}

/* host images of the buffers before the call: send with its spans filled
 * and canaries (0xA5 bytes) elsewhere, recv all canaries */
static void a2av_fill(const a2av_case *c, zt_dtype t, void *send, void *recv) {
    memset(send, 0xA5, c->sn * c->es);
    memset(recv, 0xA5, c->rn * c->es);
    for (int j = 0; j < c->P; j++)
        for (size_t k = 0; k < c->scounts[j]; k++)
            a2av_put(t, send, c->sdispls[j] + k, a2av_code(c->R, j, k));
}

/* the receive buffer after the call: every span holds what its sender
 * sent, every other element its canary; 1 when so */
static int a2av_check_recv(const a2av_case *c, zt_dtype t, const void *recv) {
    char *want = malloc(c->rn * c->es);
    memset(want, 0xA5, c->rn * c->es);
    for (int j = 0; j < c->P; j++)
        for (size_t k = 0; k < c->rcounts[j]; k++)
            a2av_put(t, want, c->rdispls[j] + k, a2av_code(j, c->R, k));
    const int ok = memcmp(want, recv, c->rn * c->es) == 0;
    free(want);
    return ok;
}

#endif
