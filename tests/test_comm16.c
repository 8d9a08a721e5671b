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
 *    the original; the bf16 form (zt_sp_to_tokens16) is to_bf16 of the
 *    fp32 one bitwise at half its bytes;
 *  - alltoallv (tests/alltoallv_case.h) of fp32, bf16 and i32 on both
 *    groups: uneven counts with zeros, a rank sending nothing, one rank
 *    receiving everything, all zero; spans shuffled with gaps whose
 *    canaries stay; bytes accounted = elements sent to other ranks; own
 *    counts that differ refused.  ZT_TEST_BIG_ALLTOALLV=1 at 2 ranks adds
 *    a transfer of 2^31 + 5 bytes (counts above INT_MAX; about 4.3 GB).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "comm.h"
#include "seqpar.h"
#include "tap.h"
#include "alltoallv_case.h"

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

/* alltoallv (tests/alltoallv_case.h): case k in dtype t on group gr */
static void test_alltoallv(zt_group *gr, zt_dtype t, const char *nm, int k) {
    a2av_case c;
    a2av_make(&c, k, nranks, rank, t);
    char *sb = malloc(c.sn * c.es), *rb = malloc(c.rn * c.es), *s0 = malloc(c.sn * c.es);
    a2av_fill(&c, t, sb, rb);
    memcpy(s0, sb, c.sn * c.es);
    zt_status st;
    zt_status_clear(&st);
    const uint64_t b0 = gr->bytes[ZT_COMM_ALLTOALL], n0 = gr->calls[ZT_COMM_ALLTOALL];
    const int rc = gr->ops->alltoallv(gr, sb, c.scounts, c.sdispls, rb, c.rcounts, c.rdispls, t, &st);
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    const int ok = rc == ZT_OK && a2av_check_recv(&c, t, rb) && memcmp(sb, s0, c.sn * c.es) == 0;
    tap_ok(all_ok(ok), "%s alltoallv (%s group), %s: every span delivered, canaries and send "
           "buffer untouched", nm, gr->ops->name, c.what);
    const uint64_t db = gr->bytes[ZT_COMM_ALLTOALL] - b0;
    tap_ok(all_ok(db == c.sent_bytes && gr->calls[ZT_COMM_ALLTOALL] - n0 == 1),
           "%s alltoallv (%s group), %s: accounts the %llu bytes sent to other ranks (rank 0)", nm,
           gr->ops->name, c.what, (unsigned long long)c.sent_bytes);
    free(sb); free(rb); free(s0);
    a2av_free(&c);
}

/* a count to itself that differs from what it expects: refused on every
 * rank before anything moves (all other counts zero) */
static void test_alltoallv_refused(zt_group *gr) {
    size_t *z = calloc(4 * (size_t)nranks, sizeof *z);
    size_t *sc = z, *sd = z + nranks, *rcn = z + 2 * nranks, *rd = z + 3 * nranks;
    float sb[2] = {1, 2}, rb[2] = {0, 0};
    sc[rank] = 1;
    rcn[rank] = 2;
    zt_status st;
    zt_status_clear(&st);
    zt_group_where(gr, "step 3");
    const uint64_t b0 = gr->bytes[ZT_COMM_ALLTOALL];
    const int rc = gr->ops->alltoallv(gr, sb, sc, sd, rb, rcn, rd, ZT_F32, &st);
    zt_group_where(gr, "%s", "");
    tap_ok(all_ok(rc == ZT_EINVAL && strstr(st.msg, "sends 1 elements to itself but expects to "
                                            "receive 2") && strstr(st.msg, gr->name) &&
                  strstr(st.msg, "(step 3)") && rb[0] == 0 && gr->bytes[ZT_COMM_ALLTOALL] == b0),
           "alltoallv (%s group): own counts that differ are refused, naming the group (%s)",
           gr->ops->name, st.msg);
    free(z);
}

/* counts and displacements above INT_MAX elements (ZT_TEST_BIG_ALLTOALLV=1,
 * 2 ranks, about 4.3 GB): rank 0 sends 2^31 + 5 bytes to rank 1 */
static void test_alltoallv_big(zt_group *gr) {
    const size_t C = ((size_t)1 << 31) + 5;
    size_t sc[2] = {0, 0}, sd[2] = {0, 0}, rcn[2] = {0, 0}, rd[2] = {0, 0};
    unsigned char *b = NULL;
    if (rank == 0) {
        sc[1] = C, sd[1] = 3;
        b = malloc(C + 3);
        if (b) for (size_t i = 0; i < C; i++) b[3 + i] = (unsigned char)(i * 131 + (i >> 29));
    } else {
        rcn[0] = C, rd[0] = 7;
        b = calloc(C + 7, 1);
    }
    zt_status st;
    zt_status_clear(&st);
    int ok = b != NULL;
    if (all_ok(ok)) {
        ok = gr->ops->alltoallv(gr, rank == 0 ? (void *)b : NULL, sc, sd, rank == 0 ? NULL : (void *)b, rcn, rd,
                                ZT_U8, &st) == ZT_OK;
        if (!ok) printf("# rank %d: %s\n", rank, st.msg);
        if (ok && rank == 1)
            for (size_t i = 0; i < C && ok; i++) ok = b[7 + i] == (unsigned char)(i * 131 + (i >> 29));
    }
    tap_ok(all_ok(ok), "alltoallv (%s group) of 2^31 + 5 bytes between 2 ranks", gr->ops->name);
    free(b);
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

/* seqpar.h zt_sp_to_tokens16: the attention-output-shaped (1 slice) and
 * q|k|v-shaped (3 slices) exchanges in bf16 give bitwise to_bf16 of the fp32
 * exchange's values (ties and values bf16 cannot hold among them), at half
 * its accounted bytes; columns outside the slices untouched */
static void test_sp_exchange16(zt_group *gr, int ns) {
    const int B = 2, Tl = 3, N = nranks, T = N * Tl;
    const size_t wq = 4, wk = ns == 3 ? 2 : 0, Wl = wq + 2 * wk, row = Wl * (size_t)N + 5;
    zt_sp_slices sl = ns == 3 ? (zt_sp_slices){3, row, {0, wq * (size_t)N, (wq + wk) * (size_t)N}, {wq, wk, wk}}
                              : (zt_sp_slices){1, row, {0, 0, 0}, {wq, 0, 0}};
    zt_seqpar sp = {N, rank, gr};
    const size_t nl = (size_t)B * Tl * row, nf = (size_t)B * T * Wl;
    float *full = malloc(nf * sizeof *full), *loc = malloc(nl * sizeof *loc);
    float *snd = malloc(nl * sizeof *snd), *rcv = malloc(nl * sizeof *rcv);
    uint16_t *loc16 = malloc(nl * sizeof *loc16), *want = malloc(nl * sizeof *want);
    /* 1 + k 2^-9 + rank 2^-12 ...: every other one a tie of bf16's 8 bits */
    for (size_t i = 0; i < nf; i++)
        full[i] = ((float)(i % 7) - 3.0f) * (1.0f + (float)(i % 5) * 0x1p-9f + (float)rank * 0x1p-12f) +
                  (float)(i / 7);
    for (size_t i = 0; i < nl; i++) { loc[i] = -1.0f; loc16[i] = 0x7777; }
    zt_status st;
    const uint64_t b0 = gr->bytes[ZT_COMM_ALLTOALL];
    int rc = zt_sp_to_tokens(&sp, be, loc, full, B, Tl, &sl, snd, rcv, &st);
    const uint64_t b1 = gr->bytes[ZT_COMM_ALLTOALL];
    if (rc == ZT_OK) rc = zt_sp_to_tokens16(&sp, be, loc16, full, B, Tl, &sl, snd, rcv, &st);
    const uint64_t b2 = gr->bytes[ZT_COMM_ALLTOALL];
    if (rc) printf("# rank %d: %s\n", rank, st.msg);
    be->to_bf16(want, loc, nl);
    int ok = rc == ZT_OK && b2 - b1 == (b1 - b0) / 2 && b1 - b0 == (uint64_t)(N - 1) * B * Tl * Wl * 4;
    int rounded = 0;   /* (some values changed by the rounding: the check can tell) */
    for (size_t r = 0; r < (size_t)B * Tl && ok; r++)
        for (size_t c = 0; c < row && ok; c++) {
            const size_t i = r * row + c;
            ok = c < row - 5 ? loc16[i] == want[i] : loc16[i] == 0x7777 && loc[i] == -1.0f;
            if (c < row - 5) {
                float w;
                be->from_bf16(&w, &loc16[i], 1);
                rounded |= w != loc[i];
            }
        }
    ok = all_ok(ok && rounded);
    tap_ok(ok, "sequence parallel exchange in bf16 (%s group, %d slice%s): to_bf16 of the fp32 one, "
           "bitwise, at half its bytes", gr->ops->name, ns, ns > 1 ? "s" : "");
    free(full); free(loc); free(snd); free(rcv); free(loc16); free(want);
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
        test_sp_exchange16(gs[i], 1);
        test_sp_exchange16(gs[i], 3);
        static const zt_dtype ts[3] = {ZT_F32, ZT_BF16, ZT_I32};
        static const char *tn[3] = {"fp32", "bf16", "i32"};
        for (int k = 0; k < A2AV_NCASES; k++)
            for (int d = 0; d < 3; d++) test_alltoallv(gs[i], ts[d], tn[d], k);
        test_alltoallv_refused(gs[i]);
    }
    if (nranks == 2 && getenv("ZT_TEST_BIG_ALLTOALLV") && atoi(getenv("ZT_TEST_BIG_ALLTOALLV")) == 1) {
        test_alltoallv_big(g);
    } else if (nranks == 2) {
        tap_skip("alltoallv of 2^31 + 5 bytes between 2 ranks", "about 4.3 GB: set ZT_TEST_BIG_ALLTOALLV=1");
    }
    zt_group_free(sg);
    zt_group_free(g);
    int rc = tap_done();
    MPI_Finalize();   /* frees the 16-bit sum ops */
    return rc;
}
