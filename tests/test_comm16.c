/*
 * test_comm16.c -- sums of bfloat16 / binary16 through the MPI backend
 * (run under mpirun by tests/prec_mpi.sh at several world sizes; every rank
 * checks its own result, rank 0 prints TAP for the group).
 *
 *  - all-reduce and reduce-scatter (uneven counts) of integer-valued data
 *    whose partial sums are all representable: exact whatever order MPI
 *    combines the contributions in;
 *  - with 2 ranks (one combination per element) arbitrary values: exactly
 *    the fp32 sum rounded once to nearest even, computed here with the CPU
 *    backend's conversions;
 *  - overflow to infinity and NaN propagate (binary16 60000 + 60000 = inf);
 *  - large buffers (MPI pipelines them: the op sees partial lengths);
 *  - bytes accounted at 2 bytes per element;
 *  - all-to-all (sequence parallelism's exchange) of fp32 and bf16 chunks,
 *    through the MPI group and a host-staged group: chunk j of rank i lands
 *    in chunk i of rank j, bytes accounted as (N-1) x chunk; and seqpar.h's
 *    token <-> head exchanges of q|k|v-shaped rows: every element lands at
 *    its (sample, global position, head column) and the inverse restores
 *    the original.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "comm.h"
#include "seqpar.h"
#include "tap.h"

static const zt_backend *be;
static zt_group *g;
static int rank, nranks;

/* every rank's verdict: ok on all ranks */
static int all_ok(int ok) {
    int v = ok ? 1 : 0, r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return r;
}

static void narrow(zt_dtype t, uint16_t *o, const float *in, size_t n) {
    if (t == ZT_BF16) be->to_bf16(o, in, n); else be->to_f16(o, in, n);
}
static void widen(zt_dtype t, float *o, const uint16_t *in, size_t n) {
    if (t == ZT_BF16) be->from_bf16(o, in, n); else be->from_f16(o, in, n);
}

/* integer-valued data: x_r[i] = ((i * 7 + r * 13) % 61) - 30, |sum| <= 30 N */
static float ival(size_t i, int r) { return (float)((int)((i * 7 + (size_t)r * 13) % 61) - 30); }

static void test_exact_sums(zt_dtype t, const char *nm, size_t n) {
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) x[i] = ival(i, rank);
    narrow(t, h, x, n);
    zt_status st;
    uint64_t b0 = g->bytes[ZT_COMM_ALLREDUCE];
    int rc = g->ops->allreduce_sum(g, h, n, t, &st);
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    widen(t, y, h, n);
    int ok = rc == ZT_OK;
    for (size_t i = 0; i < n && ok; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += ival(i, r);
        ok = y[i] == want;
    }
    tap_ok(all_ok(ok), "%s all-reduce of %zu integer-valued elements on %d ranks is exact", nm, n,
           nranks);
    uint64_t want_b = nranks > 1 ? 2 * (uint64_t)n * 2 * (uint64_t)(nranks - 1) / (uint64_t)nranks : 0;
    tap_ok(all_ok(g->bytes[ZT_COMM_ALLREDUCE] - b0 == want_b),
           "%s all-reduce accounts 2-byte elements (%llu bytes)", nm, (unsigned long long)want_b);

    /* reduce-scatter with uneven counts: rank i gets 3 i + 1 + (n % 5) elements */
    int *counts = malloc((size_t)nranks * sizeof *counts);
    size_t total = 0;
    for (int r = 0; r < nranks; r++) { counts[r] = 3 * r + 1 + (int)(n % 5); total += (size_t)counts[r]; }
    size_t displ = 0;
    for (int r = 0; r < rank; r++) displ += (size_t)counts[r];
    float *xs = malloc(total * sizeof *xs), *ys = malloc((size_t)counts[rank] * sizeof *ys);
    uint16_t *hs = malloc(total * 2), *hr = malloc((size_t)counts[rank] * 2);
    for (size_t i = 0; i < total; i++) xs[i] = ival(i, rank);
    narrow(t, hs, xs, total);
    b0 = g->bytes[ZT_COMM_REDUCE_SCATTER];
    rc = g->ops->reduce_scatter_sum(g, hs, hr, counts, t, &st);
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    widen(t, ys, hr, (size_t)counts[rank]);
    ok = rc == ZT_OK;
    for (int i = 0; i < counts[rank] && ok; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += ival(displ + (size_t)i, r);
        ok = ys[i] == want;
    }
    tap_ok(all_ok(ok), "%s reduce-scatter (uneven counts) on %d ranks is exact", nm, nranks);
    uint64_t rs_b = nranks > 1 ? (uint64_t)(total - (size_t)counts[rank]) * 2 : 0;
    tap_ok(all_ok(g->bytes[ZT_COMM_REDUCE_SCATTER] - b0 == rs_b),
           "%s reduce-scatter accounts 2-byte elements", nm);
    free(x); free(y); free(h); free(counts); free(xs); free(ys); free(hs); free(hr);
}

/* 2 ranks: each element is combined once: exactly round(fp32(a) + fp32(b)) */
static void test_rounding(zt_dtype t, const char *nm) {
    const size_t n = 50000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *s = malloc(n * sizeof *s);
    uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2), *want = malloc(n * 2);
    uint64_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            /* magnitudes 2^-10 .. 2^10 with random signs: many inexact sums */
            float v = ldexpf(1.0f + (float)(x >> 41) / 8388608.0f, (int)((x >> 8) % 21) - 10);
            (k ? b : a)[i] = (x & 1) ? -v : v;
        }
    }
    narrow(t, ha, a, n);
    narrow(t, hb, b, n);
    widen(t, a, ha, n);
    widen(t, b, hb, n);
    for (size_t i = 0; i < n; i++) s[i] = a[i] + b[i];
    narrow(t, want, s, n);
    uint16_t *mine = rank == 0 ? ha : hb;
    zt_status st;
    int rc = g->ops->allreduce_sum(g, mine, n, t, &st);
    tap_ok(all_ok(rc == ZT_OK && memcmp(mine, want, n * 2) == 0),
           "%s all-reduce on 2 ranks: every element is the fp32 sum rounded once", nm);
    free(a); free(b); free(s); free(ha); free(hb); free(want);
}

static void test_nonfinite(void) {
    /* f16: 60000 from every rank overflows to inf; an inf and a -inf make NaN */
    uint16_t h[4];
    float f[4] = {60000.0f, rank == 0 ? INFINITY : 1.0f, rank == 0 ? INFINITY : -INFINITY, 1.0f};
    if (nranks == 1) f[2] = NAN;
    be->to_f16(h, f, 4);
    zt_status st;
    int rc = g->ops->allreduce_sum(g, h, 4, ZT_F16, &st);
    be->from_f16(f, h, 4);
    int ok = rc == ZT_OK && (nranks == 1 ? f[0] == 60000.0f : isinf(f[0]) && f[0] > 0) &&
             isinf(f[1]) && f[1] > 0 && isnan(f[2]) && f[3] == (float)nranks;
    tap_ok(all_ok(ok), "f16 sums: overflow gives inf, inf + -inf gives NaN (nonfinite count %zu)",
           be->nonfinite(f, 4));
    uint16_t m[1] = {0};
    rc = g->ops->allreduce_max(g, m, 1, ZT_BF16, &st);
    tap_ok(all_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, "16-bit")),
           "max of 16-bit floats is refused with a message");
}

/* all-to-all of count-element chunks on group gr: send[j][k] = code(rank, j, k) */
static float a2a_code(int from, int to, size_t k) { return (float)(from * 1000 + to * 100 + (int)(k % 97)); }
static void test_alltoall(zt_group *gr, zt_dtype t, const char *nm, size_t count) {
    const size_t n = count * (size_t)nranks, es = zt_dtype_size(t);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    unsigned char *sb = malloc(n * es), *rb = malloc(n * es);
    for (int j = 0; j < nranks; j++)
        for (size_t k = 0; k < count; k++) x[(size_t)j * count + k] = a2a_code(rank, j, k);
    if (t == ZT_F32) memcpy(sb, x, n * es); else narrow(t, (uint16_t *)(void *)sb, x, n);
    zt_status st;
    uint64_t b0 = gr->bytes[ZT_COMM_ALLTOALL];
    int rc = gr->ops->alltoall(gr, sb, rb, count, t, &st);
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    if (t == ZT_F32) memcpy(y, rb, n * es); else widen(t, y, (const uint16_t *)(void *)rb, n);
    int ok = rc == ZT_OK && gr->bytes[ZT_COMM_ALLTOALL] - b0 == (uint64_t)(nranks - 1) * count * es;
    for (int i = 0; i < nranks && ok; i++)   /* (bf16: the code as bf16 rounds it) */
        for (size_t k = 0; k < count && ok; k++) {
            float want = a2a_code(i, rank, k);
            if (t == ZT_BF16) { uint16_t h; narrow(t, &h, &want, 1); widen(t, &want, &h, 1); }
            ok = y[(size_t)i * count + k] == want;
        }
    ok = all_ok(ok);
    tap_ok(ok, "%s all-to-all (%s group), %zu per chunk: chunks exchanged, (N-1) x chunk bytes",
           nm, gr->ops->name, count);
    free(x); free(y); free(sb); free(rb);
}

/* seqpar.h: q|k|v-shaped rows [B, Tl, row] with 3 slices, to heads and back */
static void test_sp_exchange(zt_group *gr) {
    const int B = 2, Tl = 3, N = nranks, T = N * Tl;
    const size_t wq = 4, wk = 2, row = (wq + 2 * wk) * (size_t)N, Wl = wq + 2 * wk;
    zt_sp_slices sl = {3, row, {0, wq * (size_t)N, (wq + wk) * (size_t)N}, {wq, wk, wk}};
    zt_seqpar sp = {N, rank, gr};
    const size_t nl = (size_t)B * Tl * row;
    float *loc = malloc(nl * sizeof *loc), *back = calloc(nl, sizeof *back);
    float *full = malloc((size_t)B * T * Wl * sizeof *full);
    float *snd = malloc(nl * sizeof *snd), *rcv = malloc(nl * sizeof *rcv);
    /* element (b, global t, column c) = b * 1e6 + t * 1e3 + c */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (size_t c = 0; c < row; c++)
                loc[((size_t)b * Tl + t) * row + c] = (float)(b * 1000000 + (rank * Tl + t) * 1000 + (int)c);
    zt_status st;
    int rc = zt_sp_to_heads(&sp, be, full, loc, B, Tl, &sl, snd, rcv, &st);
    int ok = rc == ZT_OK;
    for (int b = 0; b < B && ok; b++)
        for (int t = 0; t < T && ok; t++) {
            size_t c = 0;
            for (int s = 0; s < 3 && ok; s++)
                for (size_t e = 0; e < sl.w[s] && ok; e++, c++) {
                    size_t col = sl.off[s] + (size_t)rank * sl.w[s] + e;
                    ok = full[((size_t)b * T + t) * Wl + c] == (float)(b * 1000000 + t * 1000 + (int)col);
                }
        }
    if (ok) rc = zt_sp_to_tokens(&sp, be, back, full, B, Tl, &sl, snd, rcv, &st);
    ok = ok && rc == ZT_OK && memcmp(back, loc, nl * sizeof *loc) == 0;
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    ok = all_ok(ok);
    tap_ok(ok, "sequence parallel exchange (%s group): heads of all %d positions, and back", gr->ops->name, T);
    free(loc); free(back); free(full); free(snd); free(rcv);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank != 0) { FILE *nul = freopen("/dev/null", "w", stdout); (void)nul; }
    be = zt_backend_cpu();
    zt_status st;
    if (zt_group_mpi(MPI_COMM_WORLD, "world", 60, &g, &st) != ZT_OK) {
        printf("not ok 1 - group: %s\n", st.msg);
        MPI_Finalize();
        return 1;
    }
    tap_diag("%d ranks", nranks);
    test_exact_sums(ZT_BF16, "bf16", 1000);
    test_exact_sums(ZT_F16, "f16", 1000);
    test_exact_sums(ZT_BF16, "bf16", (size_t)3 << 20);   /* pipelined by MPI */
    test_exact_sums(ZT_F16, "f16", (size_t)3 << 20);
    if (nranks == 2) {
        test_rounding(ZT_BF16, "bf16");
        test_rounding(ZT_F16, "f16");
    }
    test_nonfinite();
    zt_group *sg = NULL;
    if (zt_group_host_staged(g, "staged", be, &sg, &st) != ZT_OK) printf("# %s\n", st.msg);
    zt_group *gs[2] = {g, sg};
    for (int i = 0; i < 2; i++) {
        if (!gs[i]) { tap_ok(0, "host-staged group"); continue; }
        test_alltoall(gs[i], ZT_F32, "fp32", 1000);
        test_alltoall(gs[i], ZT_BF16, "bf16", 77);
        test_sp_exchange(gs[i]);
    }
    zt_group_free(sg);
    zt_group_free(g);
    int rc = tap_done();
    MPI_Finalize();   /* frees the 16-bit sum ops */
    return rc;
}
