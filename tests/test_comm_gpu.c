/*
 * test_comm_gpu.c -- the comm backends for device buffers, under mpirun
 * (tests/comm_gpu.sh runs it at 1, 2 and 3 ranks):
 *   - the MPI group's non-blocking reduce-scatter;
 *   - the host-staged MPI group with the cpu backend (every build), and with
 *     the cuda backend when a GPU is there (ranks may share it);
 *   - the NCCL group (builds with NCCL, one GPU per rank available).
 * Each checks every collective's result (even and uneven counts, in-place
 * all-gather with gaps, the non-blocking forms, alltoallv with uneven and
 * zero counts), 16-bit types (bf16 sums included), and byte
 * accounting identical to the MPI group's for the same calls.  Every check
 * is agreed over all ranks; rank 0 prints TAP.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "comm.h"
#include "gpu.h"
#include "mesh.h"
#include "zt_cuda.h"
#include "alltoallv_case.h"

static int g_rank, g_size, n_tap, n_fail;

#ifdef ZT_CUDASIM
/* the simulator's count of host waits for the device (tests/cudasim/cudasim.cc) */
unsigned long long zt_sim_host_waits(void);
/* and of the events created (cudaEventCreate*) */
unsigned long long zt_sim_events_created(void);
#endif

static int check(int cond, const char *fmt, ...) {
    int all = 0;
    MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ++n_tap;
    if (!all) n_fail++;
    if (g_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        printf("%s %d - ", all ? "ok" : "not ok", n_tap);
        vprintf(fmt, ap);
        printf(" [%d ranks]\n", g_size);
        va_end(ap);
        fflush(stdout);
    }
    return all;
}
static void skip(const char *name, const char *why) {
    ++n_tap;
    if (g_rank == 0) {
        printf("ok %d - %s # SKIP %s\n", n_tap, name, why);
        fflush(stdout);
    }
}
static void diag_st(const zt_status *st) {
    if (st->code != ZT_OK) fprintf(stderr, "rank %d: %s\n", g_rank, st->msg);
}

/* device <-> host helpers on a backend table */
static void *dput(const zt_backend *be, const void *h, size_t bytes) {
    void *d = be->alloc(bytes);
    be->to_device(d, h, bytes);
    return d;
}
static void dget(const zt_backend *be, void *h, const void *d, size_t bytes) { be->to_host(h, d, bytes); }

#if defined(ZT_HAVE_NCCL) && defined(ZT_CUDASIM)
/* One non-blocking collective of the fence checks, on device floats: an
 * in-place all-gather (cn, dp: each rank's count and displacement) or, cn
 * NULL, an all-reduce sum of n. */
typedef struct {
    float *buf;
    const int *cn, *dp;
    size_t n;
} coll;

/* c issued on g (*rq cleared first) and waited for on the stream: 1 when
 * the call returned ZT_OK with the request active and the wait ZT_OK */
static int issue_wait(zt_group *g, coll c, zt_request *rq, zt_status *st) {
    memset(rq, 0, sizeof *rq);
    int ok = c.cn ? g->ops->iallgather_inplace(g, c.buf, c.cn, c.dp, ZT_F32, rq, st) == ZT_OK
                  : g->ops->iallreduce_sum != NULL &&
                        g->ops->iallreduce_sum(g, c.buf, c.n, ZT_F32, rq, st) == ZT_OK;
    return ok && rq->active && g->ops->wait(g, rq, st) == ZT_OK;
}

/* c issued and waited for on the stream, then `fences` fences (1 or 2):
 * the simulator's host waits of each part in waits[0..fences]; 1 when
 * every call returned ZT_OK */
static int fenced_waits(zt_group *g, coll c, int fences, unsigned long long waits[3], zt_status *st) {
    zt_request rq;
    unsigned long long w = zt_sim_host_waits(), now;
    int ok = issue_wait(g, c, &rq, st);
    for (int i = 0; i <= fences; i++) {
        if (i) ok &= g->ops->fence(g, st) == ZT_OK;
        now = zt_sim_host_waits();
        waits[i] = now - w;
        w = now;
    }
    diag_st(st);
    return ok;
}

/* c fails on the device (its count differs between ranks): issued at
 * `where` and waited for on the stream, it is reported by the fence called
 * from elsewhere, by kind, group and place */
static void check_fence_reports(zt_group *g, coll c, const char *kind, const char *where, zt_status *st) {
    zt_request rq;
    char on[96], at[96];
    zt_status_clear(st);
    zt_group_where(g, "%s", where);
    const int ok = issue_wait(g, c, &rq, st);
    zt_group_where(g, "test: elsewhere");
    const int rcf = g->ops->fence(g, st);
    snprintf(on, sizeof on, "%s on the %s group", kind, g->name);
    snprintf(at, sizeof at, "(%s)", where);
    check(ok && rcf == ZT_ECOMM && strstr(st->msg, on) && strstr(st->msg, at) &&
              strstr(st->msg, "differs between ranks"),
          "nccl: a failed %s waited for on the stream is reported by the fence (%s)", kind, st->msg);
}
#endif

/* Every collective on g with buffers of backend be; `tag` names the case. */
static void exercise(zt_group *g, const zt_backend *be, const char *tag) {
    const int S = g->size, R = g->rank;
    zt_status st;
    zt_status_clear(&st);
    int ok;

    /* all-reduce sum (F32, F64) and max (I32) */
    float hf[64];
    for (int i = 0; i < 64; i++) hf[i] = (float)R + 0.5f * (float)i;
    float *df = dput(be, hf, sizeof hf);
    ok = g->ops->allreduce_sum(g, df, 64, ZT_F32, &st) == ZT_OK;
    diag_st(&st);
    dget(be, hf, df, sizeof hf);
    for (int i = 0; i < 64; i++) ok &= hf[i] == (float)(S * (S - 1) / 2) + (float)S * 0.5f * (float)i;
    check(ok, "%s: allreduce_sum F32", tag);
    double hd[5] = {R + 0.25, 1, 2, 3, -R};
    double *dd = dput(be, hd, sizeof hd);
    ok = g->ops->allreduce_sum(g, dd, 5, ZT_F64, &st) == ZT_OK;
    dget(be, hd, dd, sizeof hd);
    ok &= hd[0] == S * (S - 1) / 2.0 + 0.25 * S && hd[3] == 3.0 * S && hd[4] == -S * (S - 1) / 2.0;
    check(ok, "%s: allreduce_sum F64", tag);
    int hi[7];
    for (int i = 0; i < 7; i++) hi[i] = R * 10 + i;
    int *di = dput(be, hi, sizeof hi);
    ok = g->ops->allreduce_max(g, di, 7, ZT_I32, &st) == ZT_OK;
    dget(be, hi, di, sizeof hi);
    for (int i = 0; i < 7; i++) ok &= hi[i] == (S - 1) * 10 + i;
    check(ok, "%s: allreduce_max I32", tag);

    /* broadcast from the last rank */
    for (int i = 0; i < 64; i++) hf[i] = R == S - 1 ? 100.0f + (float)i : -1.0f;
    be->to_device(df, hf, sizeof hf);
    ok = g->ops->bcast(g, df, 64, ZT_F32, S - 1, &st) == ZT_OK;
    dget(be, hf, df, sizeof hf);
    for (int i = 0; i < 64; i++) ok &= hf[i] == 100.0f + (float)i;
    check(ok, "%s: bcast F32 from rank %d", tag, S - 1);

    /* reduce-scatter: even and uneven counts, blocking and not */
    for (int uneven = 0; uneven < 2; uneven++) {
        for (int nb = 0; nb < 2; nb++) {
            int counts[16], total = 0;
            for (int i = 0; i < S; i++) total += counts[i] = uneven ? i + 2 : 5;
            float *hs = malloc((size_t)total * 4), *hr = malloc((size_t)counts[R] * 4);
            for (int j = 0; j < total; j++) hs[j] = (float)(R + j);
            float *ds = dput(be, hs, (size_t)total * 4), *dr = be->alloc((size_t)counts[R] * 4);
            if (nb) {
                zt_request rq;
                memset(&rq, 0, sizeof rq);
                ok = g->ops->ireduce_scatter_sum(g, ds, dr, counts, ZT_F32, &rq, &st) == ZT_OK;
                ok &= g->ops->wait(g, &rq, &st) == ZT_OK && !rq.active;
            } else {
                ok = g->ops->reduce_scatter_sum(g, ds, dr, counts, ZT_F32, &st) == ZT_OK;
            }
            diag_st(&st);
            dget(be, hr, dr, (size_t)counts[R] * 4);
            int displ = 0;
            for (int i = 0; i < R; i++) displ += counts[i];
            for (int k = 0; k < counts[R]; k++)
                ok &= hr[k] == (float)(S * (S - 1) / 2 + S * (displ + k));
            check(ok, "%s: %sreduce_scatter_sum F32, %s counts", tag, nb ? "i" : "", uneven ? "uneven" : "even");
            free(hs); free(hr);
            be->free(ds); be->free(dr);
        }
    }

    /* in-place all-gather: regular, and uneven with gaps; blocking and not */
    for (int irregular = 0; irregular < 2; irregular++) {
        for (int nb = 0; nb < 2; nb++) {
            int counts[16], displs[16], extent = 0;
            for (int i = 0; i < S; i++) {
                counts[i] = irregular ? i + 1 : 4;
                displs[i] = irregular ? i * 10 + 1 : i * 4;
                extent = displs[i] + counts[i];
            }
            float *h = malloc((size_t)extent * 4);
            for (int j = 0; j < extent; j++) h[j] = -7.0f;
            for (int k = 0; k < counts[R]; k++) h[displs[R] + k] = (float)(R * 100 + k);
            float *d = dput(be, h, (size_t)extent * 4);
            if (nb) {
                zt_request rq;
                memset(&rq, 0, sizeof rq);
                ok = g->ops->iallgather_inplace(g, d, counts, displs, ZT_F32, &rq, &st) == ZT_OK;
                ok &= g->ops->wait(g, &rq, &st) == ZT_OK && !rq.active;
                ok &= g->ops->wait(g, &rq, &st) == ZT_OK;   /* a finished request: nothing */
            } else {
                ok = g->ops->allgather_inplace(g, d, counts, displs, ZT_F32, &st) == ZT_OK;
            }
            diag_st(&st);
            dget(be, h, d, (size_t)extent * 4);
            for (int i = 0; i < S; i++)
                for (int k = 0; k < counts[i]; k++) ok &= h[displs[i] + k] == (float)(i * 100 + k);
            check(ok, "%s: %sallgather_inplace F32, %s", tag, nb ? "i" : "", irregular ? "uneven with gaps" : "regular");
            free(h);
            be->free(d);
        }
    }

    /* 16-bit data movement (all-gather of F16 codes) */
    {
        int counts[16], displs[16];
        for (int i = 0; i < S; i++) counts[i] = 3, displs[i] = 3 * i;
        uint16_t h[48];
        for (int j = 0; j < 3 * S; j++) h[j] = 0xFFFF;
        for (int k = 0; k < 3; k++) h[3 * R + k] = (uint16_t)(0x3C00 + R * 8 + k);
        uint16_t *d = dput(be, h, (size_t)3 * S * 2);
        ok = g->ops->allgather_inplace(g, d, counts, displs, ZT_F16, &st) == ZT_OK;
        dget(be, h, d, (size_t)3 * S * 2);
        for (int i = 0; i < S; i++)
            for (int k = 0; k < 3; k++) ok &= h[3 * i + k] == (uint16_t)(0x3C00 + i * 8 + k);
        check(ok, "%s: allgather_inplace F16 (16-bit data movement)", tag);
        be->free(d);
    }
    /* all-to-all of F32 chunks of 5: chunk j of rank R holds R*100 + j*10 + k */
    {
        float hs[80], hr[80];
        for (int j = 0; j < S; j++)
            for (int k = 0; k < 5; k++) hs[5 * j + k] = (float)(R * 100 + j * 10 + k), hr[5 * j + k] = -1;
        float *ds = dput(be, hs, (size_t)5 * S * 4), *dr = dput(be, hr, (size_t)5 * S * 4);
        ok = g->ops->alltoall(g, ds, dr, 5, ZT_F32, &st) == ZT_OK;
        diag_st(&st);
        dget(be, hr, dr, (size_t)5 * S * 4);
        for (int i = 0; i < S; i++)
            for (int k = 0; k < 5; k++) ok &= hr[5 * i + k] == (float)(i * 100 + R * 10 + k);
        check(ok, "%s: alltoall F32 (chunk j of rank i lands in chunk i of rank j)", tag);
        be->free(ds);
        be->free(dr);
    }
    /* all-to-all of variable counts (tests/alltoallv_case.h): every case
     * in F32, BF16 and I32; spans delivered, canaries and send untouched,
     * bytes = elements sent to other ranks */
    {
        static const zt_dtype ts[3] = {ZT_F32, ZT_BF16, ZT_I32};
        static const char *tn[3] = {"F32", "BF16", "I32"};
        for (int k = 0; k < A2AV_NCASES; k++)
            for (int d = 0; d < 3; d++) {
                a2av_case c;
                a2av_make(&c, k, S, R, ts[d]);
                char *hs = malloc(c.sn * c.es), *hr = malloc(c.rn * c.es), *h0 = malloc(c.sn * c.es);
                a2av_fill(&c, ts[d], hs, hr);
                memcpy(h0, hs, c.sn * c.es);
                char *ds = dput(be, hs, c.sn * c.es), *dr = dput(be, hr, c.rn * c.es);
                const uint64_t b0 = g->bytes[ZT_COMM_ALLTOALL];
                ok = g->ops->alltoallv(g, ds, c.scounts, c.sdispls, dr, c.rcounts, c.rdispls, ts[d],
                                       &st) == ZT_OK;
                diag_st(&st);
                dget(be, hr, dr, c.rn * c.es);
                dget(be, hs, ds, c.sn * c.es);
                ok &= a2av_check_recv(&c, ts[d], hr) && memcmp(hs, h0, c.sn * c.es) == 0 &&
                      g->bytes[ZT_COMM_ALLTOALL] - b0 == c.sent_bytes;
                check(ok, "%s: alltoallv %s, %s (spans, canaries, %llu bytes on rank %d)", tag, tn[d],
                      c.what, (unsigned long long)c.sent_bytes, R);
                be->free(ds);
                be->free(dr);
                free(hs); free(hr); free(h0);
                a2av_free(&c);
            }
    }
    ok = g->ops->barrier(g, &st) == ZT_OK;
    check(ok, "%s: barrier", tag);

    be->free(df); be->free(dd); be->free(di);
}

/* bf16 sums: 1.0 from every rank (exact in bf16 for these sizes); NCCL adds
 * them, and so do the MPI backends (fp32-accumulating ops) */
static void bf16_sum(zt_group *g, const zt_backend *be, const char *tag) {
    zt_status st;
    zt_status_clear(&st);
    uint16_t h[4];
    for (int i = 0; i < 4; i++) h[i] = 0x3F80;   /* 1.0 */
    uint16_t *d = dput(be, h, sizeof h);
    const int rc = g->ops->allreduce_sum(g, d, 4, ZT_BF16, &st);
    diag_st(&st);
    dget(be, h, d, sizeof h);
    float f;
    const uint32_t u = (uint32_t)h[3] << 16;
    memcpy(&f, &u, sizeof f);
    check(rc == ZT_OK && f == (float)g->size, "%s: allreduce_sum BF16 (1.0 x %d ranks)", tag, g->size);
    be->free(d);
    /* non-blocking reduce-scatter of bf16: 2 elements per rank */
    int counts[16];
    uint16_t hs[32], hr[2] = {0, 0};
    for (int i = 0; i < g->size; i++) counts[i] = 2;
    for (int i = 0; i < 2 * g->size; i++) hs[i] = 0x3F80;
    uint16_t *ds = dput(be, hs, (size_t)2 * g->size * 2), *dr = dput(be, hr, sizeof hr);
    zt_request rq;
    memset(&rq, 0, sizeof rq);
    int ok = g->ops->ireduce_scatter_sum(g, ds, dr, counts, ZT_BF16, &rq, &st) == ZT_OK;
    ok &= g->ops->wait(g, &rq, &st) == ZT_OK;
    diag_st(&st);
    dget(be, hr, dr, sizeof hr);
    const uint32_t u2 = (uint32_t)hr[1] << 16;
    memcpy(&f, &u2, sizeof f);
    check(ok && hr[0] == hr[1] && f == (float)g->size, "%s: ireduce_scatter_sum BF16", tag);
    be->free(ds);
    be->free(dr);
}

static int same_accounting(const zt_group *a, const zt_group *b) {
    for (int k = 0; k < ZT_COMM_NKINDS; k++)
        if (a->bytes[k] != b->bytes[k] || a->calls[k] != b->calls[k]) return 0;
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    zt_status st;
    zt_status_clear(&st);
    const zt_backend *cpu = zt_backend_cpu();

    zt_group *world = NULL, *ref = NULL, *staged = NULL;
    check(zt_group_mpi(MPI_COMM_WORLD, "world", 60.0, &world, &st) == ZT_OK, "MPI world group");
    zt_group_mpi(MPI_COMM_WORLD, "ref", 60.0, &ref, &st);

    /* the plain MPI group on host buffers (the reference accounting) */
    exercise(ref, cpu, "mpi");

    /* host-staged with the cpu backend */
    check(zt_group_host_staged(world, "staged", cpu, &staged, &st) == ZT_OK && staged->size == g_size &&
          staged->rank == g_rank && strcmp(staged->ops->name, "mpi-host-staged") == 0,
          "zt_group_host_staged (cpu backend)");
    exercise(staged, cpu, "staged/cpu");
    check(same_accounting(staged, ref), "staged/cpu: byte and call accounting = the MPI group's");
    bf16_sum(ref, cpu, "mpi");
    bf16_sum(staged, cpu, "staged/cpu");
    check(same_accounting(staged, ref), "staged/cpu: accounting still = MPI's after the bf16 sums");
    zt_group *sub = NULL;
    check(zt_group_split(staged, g_rank % 2, g_rank, "sub", &sub, &st) == ZT_OK &&
          sub->size == (g_size + 1 - g_rank % 2) / 2, "zt_group_split of a staged group gives an MPI group");
    zt_group_free(sub);
    zt_group_free(staged);
    staged = NULL;

    /* the cuda backend on the device of the node-local rank (zt_cuda_open:
     * local rank modulo the visible devices, so ranks may share one) */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    int lrank = 0, lsize = 1;
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    zt_status_clear(&st);
    int dev = -1;
    const zt_backend *gpu = zt_cuda_open(lrank, &dev, &st);
    int have_gpu = gpu != NULL, all_gpu = 0;
    MPI_Allreduce(&have_gpu, &all_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    /* NCCL needs one GPU per rank: are the devices of a node distinct? */
    int *ldev = malloc((size_t)lsize * sizeof *ldev), distinct = 1, all_distinct = 0;
    MPI_Allgather(&dev, 1, MPI_INT, ldev, 1, MPI_INT, node);
    for (int i = 0; i < lsize; i++)
        for (int j = 0; j < i; j++) distinct &= ldev[i] != ldev[j];
    free(ldev);
    MPI_Comm_free(&node);
    MPI_Allreduce(&distinct, &all_distinct, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_gpu) {
        zt_group *ref2 = NULL;
        zt_group_mpi(MPI_COMM_WORLD, "ref2", 60.0, &ref2, &st);
        exercise(ref2, cpu, "mpi (again)");
        check(zt_group_host_staged(world, "staged-gpu", gpu, &staged, &st) == ZT_OK,
              "zt_group_host_staged (cuda backend%s)", all_distinct ? "" : ", ranks sharing a GPU");
        exercise(staged, gpu, "staged/cuda");
        check(same_accounting(staged, ref2), "staged/cuda: accounting = the MPI group's");
        bf16_sum(staged, gpu, "staged/cuda");
        const char *e = gpu->error();
        check(e == NULL, "staged/cuda: no CUDA error (%s)", e ? e : "none");
        zt_group_free(staged);
        zt_group_free(ref2);
    } else {
        skip("host-staged MPI on cuda buffers", "no CUDA device");
    }

#ifdef ZT_HAVE_NCCL
    int nccl_ran = 0;
    if (all_gpu) {
        zt_status s2;
        zt_status_clear(&s2);
        zt_group *bad = NULL;
        check(zt_group_nccl(world, "nccl", dev + 1000, &bad, &s2) == ZT_EINVAL && bad == NULL,
              "zt_group_nccl on a device that is not the backend's: refused (%s)", s2.msg);
    }
    if (all_gpu && all_distinct) {
        zt_group *nc = NULL, *ref3 = NULL;
        zt_status_clear(&st);
        const int rc = zt_group_nccl(world, "nccl", dev, &nc, &st);
        diag_st(&st);
        if (check(rc == ZT_OK && nc && strcmp(nc->ops->name, "nccl") == 0 && nc->size == g_size,
                  "zt_group_nccl on device %d", dev)) {
            zt_group_mpi(MPI_COMM_WORLD, "ref3", 60.0, &ref3, &st);
            exercise(ref3, cpu, "mpi (reference for nccl)");
            exercise(nc, gpu, "nccl");
            check(same_accounting(nc, ref3), "nccl: byte and call accounting = the MPI group's");
            bf16_sum(nc, gpu, "nccl");
            zt_status s4;
            zt_status_clear(&s4);
            zt_group *nested = NULL;
            check(zt_group_nccl(nc, "nested", dev, &nested, &s4) == ZT_EINVAL,
                  "zt_group_nccl over a non-MPI parent: refused (%s)", s4.msg);
            const char *e = gpu->error();
            check(e == NULL, "nccl: no CUDA error (%s)", e ? e : "none");
            zt_group_free(ref3);
            nccl_ran = 1;
#ifdef ZT_CUDASIM
            /* the simulator checks that every rank runs the same operation:
             * mismatched counts fail on every rank, the communicator is
             * aborted and later calls fail at once (on a GPU this could hang
             * until the timeout or corrupt memory) */
            if (g_size > 1) {
                float hm[6] = {1, 2, 3, 4, 5, 6};
                float *dm = dput(gpu, hm, sizeof hm);
                zt_status s5;
                zt_status_clear(&s5);
                const int rc5 = nc->ops->allreduce_sum(nc, dm, g_rank == 0 ? 5 : 6, ZT_F32, &s5);
                check(rc5 == ZT_ECOMM && strstr(s5.msg, "differs between ranks") != NULL,
                      "nccl: mismatched counts across ranks fail on every rank (%s)", s5.msg);
                zt_status_clear(&s5);
                check(nc->ops->barrier(nc, &s5) == ZT_ECOMM && strstr(s5.msg, "aborted") != NULL,
                      "nccl: after the failure the communicator is aborted (%s)", s5.msg);
                gpu->free(dm);
                e = gpu->error();
                check(e == NULL, "nccl: the failure left no CUDA error behind (%s)", e ? e : "none");
            }
            /* a failed NCCL call (here a host buffer, refused by the
             * simulator's pointer check) aborts the communicator: peers
             * whose call succeeded would wait for this rank, and its next
             * collective must not pair with theirs */
            zt_group *nc2 = NULL;
            zt_status s6;
            zt_status_clear(&s6);
            if (zt_group_nccl(world, "nccl2", dev, &nc2, &s6) == ZT_OK) {
                float hh[4] = {1, 2, 3, 4};
                const int rc6 = nc2->ops->allreduce_sum(nc2, hh, 4, ZT_F32, &s6);
                check(rc6 == ZT_ECOMM && strstr(s6.msg, "invalid argument") != NULL,
                      "nccl: a host buffer is refused (%s)", s6.msg);
                zt_status_clear(&s6);
                check(nc2->ops->barrier(nc2, &s6) == ZT_ECOMM && strstr(s6.msg, "aborted") != NULL,
                      "nccl: after a failed NCCL call the communicator is aborted (%s)", s6.msg);
            } else {
                check(0, "zt_group_nccl nccl2 (%s)", s6.msg);
            }
            zt_group_free(nc2);

            /* wait() on a request is a stream wait: no host wait until the
             * fence, whose one bounded wait confirms the collective */
            zt_group *nc3 = NULL;
            zt_status s7;
            zt_status_clear(&s7);
            if (zt_group_nccl(world, "nccl3", dev, &nc3, &s7) == ZT_OK) {
                float hg[8];
                int cn[8], dp[8];
                for (int i = 0; i < g_size; i++) {
                    cn[i] = 2;
                    dp[i] = 2 * i;
                    hg[2 * i] = hg[2 * i + 1] = i == g_rank ? (float)(g_rank + 1) : -1.0f;
                }
                float *dg = dput(gpu, hg, sizeof(float) * 2 * (size_t)g_size);
                unsigned long long w[3];
                /* the second fence: nothing left, no wait */
                int ok = fenced_waits(nc3, (coll){dg, cn, dp, 0}, 2, w, &s7);
                dget(gpu, hg, dg, sizeof(float) * 2 * (size_t)g_size);
                for (int i = 0; i < g_size; i++) ok &= hg[2 * i] == (float)(i + 1) && hg[2 * i + 1] == (float)(i + 1);
                check(ok && w[0] == 0 && w[1] == 1 && w[2] == 0,
                      "nccl: iallgather + wait wait on the stream only (%llu host waits), the fence "
                      "once (%llu), a second fence not at all (%llu); result right",
                      w[0], w[1], w[2]);
                if (g_size > 1) {
                    /* a failed collective waited for on the stream: reported
                     * by the fence, naming it, and the communicator aborted */
                    for (int i = 0; i < g_size; i++) {
                        cn[i] = g_rank == 0 ? 1 : 2;
                        dp[i] = cn[i] * i;
                    }
                    check_fence_reports(nc3, (coll){dg, cn, dp, 0}, "all-gather", "test: unit bad", &s7);
                    zt_status_clear(&s7);
                    check(nc3->ops->barrier(nc3, &s7) == ZT_ECOMM && strstr(s7.msg, "aborted") != NULL,
                          "nccl: after the fence's failure the communicator is aborted (%s)", s7.msg);
                }
                gpu->free(dg);
                e = gpu->error();
                check(e == NULL, "nccl: the fences left no CUDA error behind (%s)", e ? e : "none");
            } else {
                check(0, "zt_group_nccl nccl3 (%s)", s7.msg);
            }
            zt_group_free(nc3);

            /* iallreduce_sum + wait (the engine's stage 0-2 gradient and
             * replica all-reduces over NCCL): a stream wait, the fence's
             * one host wait confirms it; a failed one is reported by the
             * fence, naming it */
            zt_group *nc5 = NULL;
            zt_status s9;
            zt_status_clear(&s9);
            if (zt_group_nccl(world, "nccl5", dev, &nc5, &s9) == ZT_OK) {
                float ha[5];
                for (int i = 0; i < 5; i++) ha[i] = (float)(g_rank + 1) * (float)(i + 1);
                float *da = dput(gpu, ha, sizeof ha);
                unsigned long long w[3];
                int ok = fenced_waits(nc5, (coll){da, NULL, NULL, 5}, 1, w, &s9);
                dget(gpu, ha, da, sizeof ha);
                const float ranks = (float)(g_size * (g_size + 1) / 2);
                for (int i = 0; i < 5; i++) ok &= ha[i] == ranks * (float)(i + 1);
                check(ok && w[0] == 0 && w[1] == 1 && nc5->calls[ZT_COMM_ALLREDUCE] == 1,
                      "nccl: iallreduce_sum + wait wait on the stream only (%llu host waits), the "
                      "fence once (%llu); result right", w[0], w[1]);
                /* the completion events come from the group's pool: the
                 * first request made one; rounds of 3 requests then their
                 * waits grow it by 2 once, then reuse the same 3 */
                {
                    const int rounds = 40, per = 3;
                    float hb[3];
                    float *db[3];
                    for (int j = 0; j < per; j++) {
                        hb[0] = hb[1] = hb[2] = 0.0f;
                        db[j] = dput(gpu, hb, sizeof hb);
                    }
                    zt_request rs[3];
                    const unsigned long long c0 = zt_sim_events_created();
                    int okp = 1;
                    for (int k = 0; k < rounds && okp; k++) {
                        for (int j = 0; j < per && okp; j++) {
                            memset(&rs[j], 0, sizeof rs[j]);
                            okp = nc5->ops->iallreduce_sum(nc5, db[j], 3, ZT_F32, &rs[j], &s9) == ZT_OK;
                        }
                        for (int j = 0; j < per && okp; j++)
                            okp = nc5->ops->wait(nc5, &rs[j], &s9) == ZT_OK;
                    }
                    okp &= nc5->ops->fence(nc5, &s9) == ZT_OK;
                    const unsigned long long c1 = zt_sim_events_created();
                    diag_st(&s9);
                    for (int j = 0; j < per; j++) gpu->free(db[j]);
                    check(okp && c1 - c0 == (unsigned long long)(per - 1),
                          "nccl: %d rounds of %d iallreduce_sum + wait create %d events (%llu): the "
                          "pool's first grows to %d, then they are reused", rounds, per, per - 1,
                          c1 - c0, per);
                }
                if (g_size > 1)
                    check_fence_reports(nc5, (coll){da, NULL, NULL, g_rank == 0 ? 4 : 5}, "all-reduce",
                                        "test: gradient piece", &s9);
                gpu->free(da);
                e = gpu->error();
                check(e == NULL, "nccl: the all-reduce's fence left no CUDA error behind (%s)",
                      e ? e : "none");
            } else {
                check(0, "zt_group_nccl nccl5 (%s)", s9.msg);
            }
            zt_group_free(nc5);

            /* a hung collective (rank 0's peers never join it): the fence
             * reports it within the bound (the simulator's: its NCCL
             * times out; on a GPU comm_nccl.c's ztrain.comm_timeout_s) */
            if (g_size > 1) {
                zt_group *nc4 = NULL;
                zt_status s8;
                zt_status_clear(&s8);
                int made = zt_group_nccl(world, "nccl4", dev, &nc4, &s8) == ZT_OK;
                int waited = 1, rcf = ZT_OK;
                if (made && g_rank == 0) {
                    setenv("ZT_CUDASIM_NCCL_TIMEOUT_S", "2", 1);
                    float hz[8] = {0};
                    int cz[8], dz[8];
                    for (int i = 0; i < g_size; i++) cz[i] = 1, dz[i] = i;
                    float *dz_buf = dput(gpu, hz, sizeof(float) * (size_t)g_size);
                    zt_request rq;
                    zt_group_where(nc4, "test: unit hung");
                    waited = issue_wait(nc4, (coll){dz_buf, cz, dz, 0}, &rq, &s8);
                    rcf = nc4->ops->fence(nc4, &s8);
                    unsetenv("ZT_CUDASIM_NCCL_TIMEOUT_S");
                    gpu->free(dz_buf);
                    (void)gpu->error();   /* the failed stream work */
                }
                check(made && waited &&
                      (g_rank != 0 || (rcf == ZT_ECOMM && strstr(s8.msg, "all-gather on the nccl4 group") &&
                                       strstr(s8.msg, "(test: unit hung)"))),
                      "nccl: a hung all-gather waited for on the stream is reported by the fence "
                      "(rank 0: %s)", g_rank == 0 ? s8.msg : "");
                zt_group_free(nc4);
            }

            /* a copy queued after collectives waited for on the stream (a
             * micro-step's token upload, a MoE layer's routing counts):
             * zt_mesh_copy_wait waits for it with the fence's checks.  A
             * completed all-gather: the copy sees its result, no error; a
             * hung one (rank 0's peers never join it): reported by name
             * within the bound, the communicator aborted (before: the plain
             * copy_wait returned and nothing was said) */
            if (g_size > 1) {
                zt_group *nc6 = NULL;
                zt_status s10;
                zt_status_clear(&s10);
                int made = zt_group_nccl(world, "nccl6", dev, &nc6, &s10) == ZT_OK;
                zt_mesh mesh;
                memset(&mesh, 0, sizeof mesh);
                mesh.be = gpu;
                mesh.dworld = nc6;
                float hz[8], got[8];
                int cz[8], dz[8];
                for (int i = 0; i < g_size; i++) cz[i] = 1, dz[i] = i, hz[i] = 0, got[i] = -1;
                hz[g_rank] = (float)(10 + g_rank);
                float *dz_buf = dput(gpu, hz, sizeof(float) * (size_t)g_size);
                const coll gz = {dz_buf, cz, dz, 0};
                zt_request rq;
                int waited = 1, rcc = ZT_OK;
                if (made) {
                    zt_group_where(nc6, "test: micro-step 1");
                    waited = issue_wait(nc6, gz, &rq, &s10);
                    zt_group_where(nc6, "test: elsewhere");
                    rcc = zt_mesh_copy_wait(&mesh, gpu,
                                            gpu->to_host_async(got, dz_buf, sizeof(float) * (size_t)g_size),
                                            &s10);
                }
                int okv = 1;
                for (int i = 0; i < g_size; i++) okv &= got[i] == (float)(10 + i);
                check(made && waited && rcc == ZT_OK && okv,
                      "nccl: zt_mesh_copy_wait of a copy after an all-gather waited for on the stream "
                      "returns its result (%s)", s10.msg);
                int hung_waited = 1, rcl = ZT_OK;
                zt_status s11;
                zt_status_clear(&s11);
                if (made && g_rank == 0) {
                    setenv("ZT_CUDASIM_NCCL_TIMEOUT_S", "2", 1);
                    zt_group_where(nc6, "test: micro-step 2");
                    hung_waited = issue_wait(nc6, gz, &rq, &s10);
                    zt_group_where(nc6, "test: elsewhere");
                    int tok[4] = {1, 2, 3, 4};
                    int *dtok = gpu->alloc(sizeof tok);
                    rcc = zt_mesh_copy_wait(&mesh, gpu, gpu->to_device_async(dtok, tok, sizeof tok), &s10);
                    rcl = nc6->ops->fence(nc6, &s11);   /* aborted: fails at once */
                    unsetenv("ZT_CUDASIM_NCCL_TIMEOUT_S");
                    gpu->free(dtok);
                    (void)gpu->error();   /* the failed stream work */
                }
                check(made && hung_waited &&
                      (g_rank != 0 || (rcc == ZT_ECOMM && strstr(s10.msg, "all-gather on the nccl6 group") &&
                                       strstr(s10.msg, "(test: micro-step 2)") && rcl == ZT_ECOMM &&
                                       strstr(s11.msg, "was aborted"))),
                      "nccl: a hung all-gather before a copy is reported by zt_mesh_copy_wait "
                      "(rank 0: %s; then: %s)", g_rank == 0 ? s10.msg : "", g_rank == 0 ? s11.msg : "");
                gpu->free(dz_buf);
                (void)gpu->error();
                zt_group_free(nc6);
            }
#endif
        }
        zt_group_free(nc);

        /* a communicator not every rank joins (as hybrid sharding makes):
         * the even ranks only */
        zt_group *half = NULL, *hn = NULL;
        zt_status_clear(&st);
        int ok = zt_group_split(world, g_rank % 2, g_rank, "half", &half, &st) == ZT_OK;
        if (ok && g_rank % 2 == 0) {
            ok = zt_group_nccl(half, "nccl-even", dev, &hn, &st) == ZT_OK && hn->size == (g_size + 1) / 2;
            diag_st(&st);
            float hv[3] = {(float)g_rank, 1.0f, (float)(g_rank * g_rank)};
            float *dv = dput(gpu, hv, sizeof hv);
            if (ok) ok = hn->ops->allreduce_sum(hn, dv, 3, ZT_F32, &st) == ZT_OK;
            dget(gpu, hv, dv, sizeof hv);
            float want0 = 0, want2 = 0;
            for (int r = 0; r < g_size; r += 2) want0 += (float)r, want2 += (float)(r * r);
            ok &= hv[0] == want0 && hv[1] == (float)((g_size + 1) / 2) && hv[2] == want2;
            gpu->free(dv);
            zt_group_free(hn);
        }
        check(ok, "nccl: a communicator of the even ranks only (the odd ranks do not take part)");
        zt_group_free(half);
    } else {
        skip("NCCL group", all_gpu ? "needs one GPU per rank: ranks of a node share a device here"
                                   : "no CUDA device");
    }
#ifdef ZT_CUDASIM
    /* built against the CUDA simulator: the NCCL group must have run */
    check(nccl_ran, "the NCCL group ran on the simulator (ZT_CUDASIM_DEVICES >= ranks per node)");
#else
    (void)nccl_ran;
#endif
#else
    skip("NCCL group", "this build has no NCCL");
#endif

    zt_group_free(world);
    zt_group_free(ref);
    if (g_rank == 0) printf("1..%d\n", n_tap);
    MPI_Finalize();
    return n_fail ? 1 : 0;
}
