/*
 * widen_runs.h -- from_bf16_runs (backend.h) on any table: nr runs of the
 * 65536 bf16 codes (lengths 0, 1, 2, 3, 255, 256, 257, 1000, 4099, ...;
 * offsets anywhere, overlapping runs of the input too) widened into one
 * output, bitwise from_bf16 of each run into its place (NaN codes as
 * NaN), the element past the last run's untouched; nr = 1, 5, 64 (one
 * cuda launch) and 150 (three); nr = 0 and all runs empty write nothing.
 * Memory through alloc / to_device / to_host only.  Included by
 * test_kernels (cpu), test_strict (cpu-strict) and test_cuda (cuda, on a
 * GPU or the simulator).
 */
#ifndef ZT_TESTS_WIDEN_RUNS_H
#define ZT_TESTS_WIDEN_RUNS_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tap.h"

/* the runs' lengths, cycled; offsets from a xorshift within [0, 65536 - n] */
static const size_t wr_lens[] = {0, 1, 2, 3, 255, 256, 257, 1000, 4099, 7, 64, 65, 0, 31, 12345};

static void *wr_dev(const zt_backend *be, size_t bytes) {
    void *d = be->alloc(bytes ? bytes : 4);
    if (!d) {
        fprintf(stderr, "alloc of %zu bytes failed\n", bytes);
        exit(99);
    }
    return d;
}

/* 1 when a and b hold the same bits, NaN matching any NaN */
static int wr_same(float a, float b) {
    if (a != a) return b != b;
    return !memcmp(&a, &b, sizeof a);
}

static void widen_runs_checks(const zt_backend *be, const char *what) {
    if (!be->from_bf16_runs) {
        tap_ok(0, "%s: from_bf16_runs present", what);
        return;
    }
    uint16_t *codes = malloc(65536 * 2);
    if (!codes) exit(99);
    for (uint32_t i = 0; i < 65536; i++) codes[i] = (uint16_t)i;
    uint16_t *in = wr_dev(be, 65536 * 2);
    be->to_device(in, codes, 65536 * 2);
    static const int nrs[] = {1, 5, 64, 150, 0};
    for (size_t c = 0; c < sizeof nrs / sizeof nrs[0] + 1; c++) {
        const int nr = c < sizeof nrs / sizeof nrs[0] ? nrs[c] : 3;
        const int empty = c == sizeof nrs / sizeof nrs[0];   /* (3 runs, all empty) */
        size_t off[150], n[150], all = 0;
        uint32_t x = 88172645u + (uint32_t)c * 2654435761u;
        for (int r = 0; r < nr; r++) {
            n[r] = empty ? 0 : wr_lens[(size_t)(r + 7 * c + 4) % (sizeof wr_lens / sizeof wr_lens[0])];
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            off[r] = x % (65536 - n[r] + 1);
            all += n[r];
        }
        /* the reference: from_bf16 a run, each into its place; both
         * outputs start as the same sentinel (1 more element) */
        float *want = malloc((all + 1) * sizeof *want), *got = malloc((all + 1) * sizeof *got);
        if (!want || !got) exit(99);
        for (size_t i = 0; i <= all; i++) want[i] = -12345.0f;
        float *dw = wr_dev(be, (all + 1) * sizeof *dw), *dg = wr_dev(be, (all + 1) * sizeof *dg);
        be->to_device(dw, want, (all + 1) * sizeof *dw);
        be->to_device(dg, want, (all + 1) * sizeof *dg);
        size_t o = 0;
        for (int r = 0; r < nr; r++) {
            if (n[r]) be->from_bf16(dw + o, in + off[r], n[r]);
            o += n[r];
        }
        be->from_bf16_runs(dg, in, off, n, nr);
        be->to_host(want, dw, (all + 1) * sizeof *want);
        be->to_host(got, dg, (all + 1) * sizeof *got);
        size_t bad = 0;
        for (size_t i = 0; i < all; i++) bad += !wr_same(want[i], got[i]);
        const int tail = got[all] == -12345.0f;
        /* (and against the codes themselves: bf16 bits are fp32's top half) */
        size_t badc = 0;
        o = 0;
        for (int r = 0; r < nr; r++)
            for (size_t i = 0; i < n[r]; i++, o++) {
                const uint32_t u = (uint32_t)codes[off[r] + i] << 16;
                float f;
                memcpy(&f, &u, 4);
                badc += !wr_same(f, got[o]);
            }
        tap_ok(bad == 0 && badc == 0 && tail,
               "%s from_bf16_runs, %d runs%s (%zu elements): bitwise from_bf16 run by run [%zu differ, "
               "%zu from the codes], the element past the runs %s",
               what, nr, empty ? ", all empty" : "", all, bad, badc, tail ? "untouched" : "WRITTEN");
        be->free(dw);
        be->free(dg);
        free(want);
        free(got);
    }
    be->free(in);
    free(codes);
    be->synchronize();
    const char *e = be->error();
    tap_ok(e == NULL, "%s from_bf16_runs: no backend error recorded%s%s", what, e ? ": " : "", e ? e : "");
}

#endif
