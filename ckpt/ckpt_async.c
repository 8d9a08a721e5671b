/*
 * ckpt_async.c -- asynchronous checkpoint saves (ztrain.checkpoint.async).
 *
 * At a save step the main thread records the step's small state (step,
 * AdamW step, loss scaler, the ranges this rank owns) and lists the copy of
 * its owned tensors (params, m, v of its ranges: the slices it writes) into
 * a host snapshot, and training goes on.  A background thread per rank
 * (stage 1) copies them while the next step's forward and backward run
 * (they only read them); before the next optimizer update writes them, the
 * engine calls the fence (zt_ctx_set_state_fence -> zt_ckpt_async_fence),
 * where the training threads copy what the thread has not yet and wait for
 * its last piece.  Device state is copied at the save step, as before.
 * The thread then sums the snapshot's checksums.  At the next step
 * boundary where every rank's stage 1 is done, the main thread runs the
 * synchronous save's agreed phases on the snapshot (ck_save with a
 * ck_deferred, ckpt_save.c: the save lists the pieces, this file writes
 * them): the checksums' all-reduce, step-N.tmp, the free-space check, the
 * file with every attribute, dataset and metadata checksum written by rank
 * 0 (a few tenths of a second), and the thread
 * (stage 2) writes the tensor data of this rank's pieces with pwrite at the
 * datasets' file addresses (contiguous datasets, space allocated at
 * creation) and fsyncs the file.  The thread makes no MPI and no HDF5 call
 * (HDF5 need not be thread-safe; MPI_THREAD_FUNNELED is enough).  At each
 * step boundary the main thread asks every rank whether its thread is done
 * (one all-reduce); when all are, rank 0 commits exactly as the synchronous
 * save does (ck_commit: fsync, rename, `latest`, prune).  An error on any
 * rank is agreed there and the save abandoned on every rank (rank 0 removes
 * step-N.tmp): the previous checkpoint stays `latest`.
 *
 *   snapshot  [range 0: params | m | v][range 1: ...]   host, accounted
 *   pieces    (file offset, n floats, source in the snapshot)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "devmem.h"

/* one piece of the deferred snapshot copy: n floats of the live state */
typedef struct ck_cpiece {
    float *dst;
    const float *src;
    size_t n;
} ck_cpiece;

struct zt_ckpt_async {
    /* the snapshot: host memory, kept from save to save */
    float *snap;
    size_t snap_elems;
    zt_owned_range *ranges;
    int cap_ranges;
    zt_train_state s;
    /* the deferred copy (host state): pieces claimed by the background
     * thread, or by the training threads at the fence, one at a time */
    ck_cpiece *cp;
    int ncp, cap_cp;
    atomic_int cnext;          /* the next piece to claim */
    int cdone;                 /* pieces copied (mu) */
    int copying;               /* main thread: the copy may not be done; fence first */
    double fence_s;            /* seconds the main thread spent in the fence */
    /* the save in flight */
    int active;
    long step;
    int keep;
    char dir[ZT_PATH_MAX], final[ZT_PATH_MAX + 32], tmpd[ZT_PATH_MAX + 48], file[ZT_PATH_MAX + 64];
    uint64_t need;             /* ck_save_bytes: for a disk-full explanation */
    ck_wpieces pieces;         /* the tensor data's pieces, listed by ck_save */
    double t0, stalled;        /* start; seconds the main thread spent in it */
    int delay_ms;              /* ZT_CKPT_WRITE_DELAY_MS (test-only) */
    int copy_delay_ms;         /* ZT_CKPT_COPY_DELAY_MS (test-only): the thread starts
                                * the snapshot's copy that much later */
    int rank;
    uint64_t *cs;              /* partial checksums [CK_NFAM][n_tensors] */
    size_t ncs;
    int stage;                 /* 1: checksums in the background, 2: tensor data */
    /* the background thread */
    pthread_t th;
    int th_live;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, cancel;
    long progress;             /* pieces written */
    int rc;
    zt_status wst;
    /* the thread's scheduling: niced while training runs, its own nice
     * value restored while the main thread waits for it */
    pid_t tid;                 /* the thread's kernel id; 0 before it started */
    int base_nice, boosted;
    double cpu[3];             /* CPU seconds of the thread: [0] copy, [1] copy + checksums,
                                * [2] write */
};

/* arr (*cap elements of elem bytes, n of them used) with room for one more:
 * arr itself, or arr grown to twice its capacity (first when it has none);
 * NULL (arr untouched) when it cannot grow. */
static void *room_for_one(void *arr, int *cap, int n, size_t elem, int first) {
    if (n < *cap) return arr;
    const int nc = *cap ? 2 * *cap : first;
    void *p = realloc(arr, (size_t)nc * elem);
    if (p) *cap = nc;
    return p;
}

zt_ckpt_async *zt_ckpt_async_new(void) {
    zt_ckpt_async *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    long d;   /* (ck_env_check refused a value out of range when the session opened) */
    zt_env_int("ZT_CKPT_WRITE_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &d, NULL);
    a->delay_ms = (int)d;
    zt_env_int("ZT_CKPT_COPY_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &d, NULL);
    a->copy_delay_ms = (int)d;
    return a;
}

int zt_ckpt_async_busy(const zt_ckpt_async *a) { return a && a->active; }
long zt_ckpt_async_step(const zt_ckpt_async *a) { return a && a->active ? a->step : -1; }

/* ---------------------------------------------------------------- writer thread */


/* The background thread's niceness while training runs: the training
 * threads keep the cores and the thread takes what they leave (idle cores,
 * waits); ZT_CKPT_WRITER_NICE (0-19) overrides.  The main thread gives the
 * thread its own priority back when it waits for it (restore_priority). */
#define CK_WRITER_NICE 19

static int writer_nice(void) {
    long n;
    zt_env_int("ZT_CKPT_WRITER_NICE", 0, 19, CK_WRITER_NICE, &n, NULL);   /* (ck_env_check) */
    return (int)n;
}

/* In the thread, first: every signal blocked (the main thread takes the
 * preemption signal; no EINTR in the writes), its kernel id published. */
static void thread_enter(zt_ckpt_async *a) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&a->mu);
    a->tid = tid;
    pthread_mutex_unlock(&a->mu);
}

/* ... then niced, unless the main thread already waits for it (the copy of
 * the snapshot runs at the thread's own priority: the next optimizer update
 * waits for it). */
static void thread_nice(zt_ckpt_async *a) {
    int nice = a->base_nice + writer_nice();
    if (nice > 19) nice = 19;
    pthread_mutex_lock(&a->mu);
    if (!a->boosted && nice > a->base_nice) setpriority(PRIO_PROCESS, (id_t)a->tid, nice);
    pthread_mutex_unlock(&a->mu);
}

/* Main thread, a->mu held: about to wait for the thread -- nothing else
 * to do but wait, so it should not run at training's leftovers.  Lowering a
 * nice value needs CAP_SYS_NICE (or RLIMIT_NICE): without, the thread stays
 * niced (the training threads are idle now, so it still gets a core unless
 * other processes keep them busy). */
static void restore_priority(zt_ckpt_async *a) {
    if (a->boosted || a->tid <= 0) return;
    a->boosted = 1;
    setpriority(PRIO_PROCESS, (id_t)a->tid, a->base_nice);
}

static double thread_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The tensor data bypasses the page cache where the file system allows
 * (O_DIRECT): a buffered write of a 1.4 GiB checkpoint costs the writer
 * 1.5-2 s of kernel CPU per GiB on the development VM (page allocation,
 * copy, dirty accounting, writeback), a direct one almost none.  Direct
 * writes need the buffer, the file offset and the length aligned
 * (CK_DIO_ALIGN: 4096, a multiple of every logical block size Linux has):
 * each piece's whole aligned blocks go through an aligned bounce buffer
 * (one user-space copy), its unaligned head and tail (shared with the
 * neighbouring dataset or rank) through the buffered descriptor.  Where
 * O_DIRECT is refused (EINVAL: tmpfs, some network file systems) every
 * write is buffered.  ZT_CKPT_DIRECT_IO=0 turns it off.  The file is
 * fsync'ed through the buffered descriptor as before (it covers both). */
#define CK_DIO_ALIGN ((uint64_t)4096)
#define CK_DIO_BOUNCE ((size_t)8 << 20)

typedef struct ck_dio {
    int fd;            /* O_DIRECT descriptor, -1 when not used */
    char *bounce;      /* CK_DIO_BOUNCE bytes, CK_DIO_ALIGN-aligned */
} ck_dio;

static void dio_open(ck_dio *d, const char *file) {
    d->fd = -1;
    d->bounce = NULL;
    int on;
    zt_env_bool("ZT_CKPT_DIRECT_IO", 1, &on, NULL);   /* (ck_env_check) */
    if (!on) return;
    void *b = NULL;
    if (posix_memalign(&b, (size_t)CK_DIO_ALIGN, CK_DIO_BOUNCE) != 0) return;
    d->fd = open(file, O_WRONLY | O_CLOEXEC | O_DIRECT);
    if (d->fd < 0) { free(b); return; }
    d->bounce = b;
}

static void dio_close(ck_dio *d) {
    if (d->fd >= 0) close(d->fd);
    free(d->bounce);
    d->fd = -1;
    d->bounce = NULL;
}

/* n bytes of p at file offset off: direct where aligned, else buffered (fd) */
static int write_piece(int fd, ck_dio *d, const char *p, size_t n, uint64_t off) {
    const uint64_t a0 = (off + CK_DIO_ALIGN - 1) & ~(CK_DIO_ALIGN - 1);
    const uint64_t a1 = (off + n) & ~(CK_DIO_ALIGN - 1);
    if (d->fd < 0 || a1 <= a0) return ck_write_all(fd, p, n, off);
    if (ck_write_all(fd, p, (size_t)(a0 - off), off) != 0) return -1;   /* head */
    uint64_t o = a0;
    while (o < a1) {
        const size_t k = a1 - o < CK_DIO_BOUNCE ? (size_t)(a1 - o) : CK_DIO_BOUNCE;
        memcpy(d->bounce, p + (o - off), k);
        ssize_t w;
        do w = pwrite(d->fd, d->bounce, k, (off_t)o); while (w < 0 && errno == EINTR);
        if (w < 0 && errno == EINVAL && o == a0) {
            /* direct I/O refused here: buffered from now on */
            dio_close(d);
            return ck_write_all(fd, p + (a0 - off), (size_t)(off + n - a0), a0);
        }
        if (w < 0) return -1;
        if ((size_t)w < k) {
            /* a short direct write: the rest of this block buffered */
            if (ck_write_all(fd, d->bounce + w, k - (size_t)w, o + (uint64_t)w) != 0) return -1;
        }
        o += k;
    }
    return ck_write_all(fd, p + (a1 - off), (size_t)(off + n - a1), a1);   /* tail */
}

static void tick(void *user) {
    zt_ckpt_async *a = user;
    pthread_mutex_lock(&a->mu);
    a->progress++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void finish(zt_ckpt_async *a, int rc, const zt_status *st) {
    double cpu = thread_cpu_s();
    pthread_mutex_lock(&a->mu);
    a->cpu[a->stage] = cpu;
    a->rc = rc;
    a->wst = *st;
    a->done = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* ---------------------------------------------------------------- deferred copy */

/* Copy unclaimed pieces of the live state into the snapshot until none is
 * left; the number copied. */
static int copy_claim(zt_ckpt_async *a) {
    int k = 0, i;
    while ((i = atomic_fetch_add(&a->cnext, 1)) < a->ncp) {
        memcpy(a->cp[i].dst, a->cp[i].src, a->cp[i].n * sizeof(float));
        k++;
    }
    return k;
}

/* k more pieces copied; then wait until every piece is (the other side may
 * still be inside one). */
static void copy_finish(zt_ckpt_async *a, int k) {
    pthread_mutex_lock(&a->mu);
    a->cdone += k;
    if (a->cdone >= a->ncp) pthread_cond_broadcast(&a->cv);
    while (a->cdone < a->ncp) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Main thread, before anything writes the owned state (the optimizer
 * update, a restore, the end of training; libtrain calls it through
 * zt_ctx_set_state_fence): the pieces the background thread has not
 * claimed yet are copied on the training threads, then the thread's own
 * piece is waited for. */
void zt_ckpt_async_fence(zt_ckpt_async *a) {
    if (!a || !a->copying) return;
    double t0 = zt_now_s();
    int k = 0;
#pragma omp parallel reduction(+ : k)
    k += copy_claim(a);
    copy_finish(a, k);
    a->copying = 0;
    double dt = zt_now_s() - t0;
    a->fence_s += dt;
    a->stalled += dt;
}

/* stage 1: the rest of the snapshot's copy (at the thread's own priority),
 * then this rank's partial checksums of the snapshot (serial, niced: the
 * training threads keep the cores) */
static void *checksum_main(void *arg) {
    zt_ckpt_async *a = arg;
    thread_enter(a);
    if (a->ncp > 0) {
        if (a->copy_delay_ms > 0) {
            struct timespec ts = {a->copy_delay_ms / 1000, (long)(a->copy_delay_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
        copy_finish(a, copy_claim(a));
        a->cpu[0] = thread_cpu_s();
    }
    thread_nice(a);
    zt_status st;
    zt_status_clear(&st);
    memset(a->cs, 0, a->ncs * sizeof *a->cs);
    ck_partial_checksums(&a->s, a->cs, NULL, 1, tick, a);
    finish(a, ZT_OK, &st);
    return NULL;
}

/* stage 2: the tensor data */
static void *writer_main(void *arg) {
    zt_ckpt_async *a = arg;
    thread_enter(a);
    thread_nice(a);
    zt_status st;
    zt_status_clear(&st);
    int rc = ZT_OK;
    ck_crash_point("save_tensors", a->step);
    int fd = a->pieces.n > 0 ? open(a->file, O_WRONLY | O_CLOEXEC) : -1;
    if (a->pieces.n > 0 && fd < 0)
        rc = zt_fail(&st, ZT_EIO, "%s: cannot open for the tensor data: %s", a->file, strerror(errno));
    ck_dio dio = {-1, NULL};
    if (fd >= 0) dio_open(&dio, a->file);
    const zt_model *m = a->s.model;
    for (int i = 0; i < a->pieces.n && rc == ZT_OK; ++i) {
        const ck_wpiece *p = &a->pieces.p[i];
        pthread_mutex_lock(&a->mu);
        int cancel = a->cancel;
        pthread_mutex_unlock(&a->mu);
        if (cancel) {
            rc = zt_fail(&st, ZT_EIO, "abandoned");
            break;
        }
        if (a->delay_ms > 0) {
            struct timespec ts = {a->delay_ms / 1000, (long)(a->delay_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
        if (write_piece(fd, &dio, (const char *)p->src, p->n * sizeof(float), p->off) != 0) {
            char name[128];
            ck_dataset_name(name, sizeof name, p->fam, m->tensors[p->tensor].name);
            rc = zt_fail(&st, ZT_EIO, "%s: cannot write dataset %s (%s)", a->file, name,
                         strerror(errno));
        }
        tick(a);
    }
    dio_close(&dio);
    if (fd >= 0) {
        if (rc == ZT_OK && fsync(fd) != 0)
            rc = zt_fail(&st, ZT_EIO, "%s: fsync failed: %s", a->file, strerror(errno));
        if (close(fd) != 0 && rc == ZT_OK)
            rc = zt_fail(&st, ZT_EIO, "%s: close failed: %s", a->file, strerror(errno));
    }
    if (rc == ZT_OK && a->rank == 0) ck_crash_point("after_data_write", a->step);
    finish(a, rc, &st);
    return NULL;
}

/* ---------------------------------------------------------------- snapshot */

/* The snapshot buffer for n owned elements (params, m, v), its pages
 * touched on the training threads (a first touch of 1.4 GiB costs seconds
 * of page faults: at attach, before step 1, not at the first save). */
static int snap_alloc(zt_ckpt_async *a, size_t n, zt_status *st) {
    if (n == a->snap_elems) return ZT_OK;
    zt_mem_free(a->snap);
    a->snap = NULL;
    a->snap_elems = 0;
    if (n) {
        a->snap = zt_mem_alloc(n * CK_NFAM * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
        if (!a->snap)
            return zt_fail(st, ZT_ENOMEM, "checkpoint.async: cannot allocate the host "
                           "snapshot (%.1f MiB): %s; use synchronous checkpoints "
                           "(--ckpt-async false)", (double)n * CK_NFAM * 4 / 1048576.0, st->msg);
        const size_t tot = n * CK_NFAM, C = (size_t)1 << 20;
        const long nc = (long)((tot + C - 1) / C);
#pragma omp parallel for schedule(static) if (nc > 1)
        for (long c = 0; c < nc; ++c) {
            const size_t x = (size_t)c * C, e = x + C < tot ? x + C : tot;
            memset(a->snap + x, 0, (e - x) * sizeof(float));
        }
    }
    a->snap_elems = n;
    return ZT_OK;
}

int zt_ckpt_async_prepare(zt_ctx *ctx, zt_ckpt_async *a, zt_status *st) {
    zt_status_clear(st);
    zt_train_state live;
    ZT_TRY(zt_ctx_owned_state(ctx, &live, st));
    size_t n = 0;
    if (live.writer)
        for (int i = 0; i < live.n_ranges; ++i) n += live.ranges[i].hi - live.ranges[i].lo;
    return snap_alloc(a, n, st);
}

/* The deferred copy of n floats, src to dst, listed in pieces of at most
 * 4 MiB (a->cp). */
static int add_cpiece(zt_ckpt_async *a, float *dst, const float *src, size_t n, zt_status *st) {
    const size_t C = (size_t)1 << 20;
    for (size_t o = 0; o < n; o += C) {
        ck_cpiece *r = room_for_one(a->cp, &a->cap_cp, a->ncp, sizeof *a->cp, 512);
        if (!r) return zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint snapshot)");
        a->cp = r;
        a->cp[a->ncp++] = (ck_cpiece){dst + o, src + o, n - o < C ? n - o : C};
    }
    return ZT_OK;
}

/* This rank's owned state into the snapshot (writers only: the others
 * write nothing).  Device state is copied now; host state is only listed
 * in pieces (a->cp), copied by the background thread while the next step's
 * forward and backward run (they only read it) and finished by the fence
 * before the update.  ZT_ENOMEM when the snapshot cannot be allocated. */
static int take_snapshot(zt_ctx *ctx, zt_ckpt_async *a, zt_status *st) {
    zt_train_state live;
    ZT_TRY(zt_ctx_owned_state(ctx, &live, st));
    size_t n = 0;
    if (live.writer)
        for (int i = 0; i < live.n_ranges; ++i) n += live.ranges[i].hi - live.ranges[i].lo;
    if (live.n_ranges > a->cap_ranges) {
        void *r = realloc(a->ranges, (size_t)live.n_ranges * sizeof *a->ranges);
        if (!r) return zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint snapshot)");
        a->ranges = r;
        a->cap_ranges = live.n_ranges;
    }
    ZT_TRY(snap_alloc(a, n, st));
    a->ncp = 0;
    atomic_store(&a->cnext, 0);
    a->cdone = 0;
    float *p = a->snap;
    for (int i = 0; i < live.n_ranges; ++i) {
        const zt_owned_range *r = &live.ranges[i];
        zt_owned_range *o = &a->ranges[i];
        *o = *r;
        if (!live.writer) { o->param = o->m = o->v = NULL; continue; }
        size_t len = r->hi - r->lo;
        float *dst[CK_NFAM] = {p, p + len, p + 2 * len};
        for (int f = 0; f < CK_NFAM; ++f) {
            const float *src = ck_fam_ptr(r, f);
            if (live.on_device) live.be->to_host(dst[f], src, len * sizeof(float));
            else ZT_TRY(add_cpiece(a, dst[f], src, len, st));
        }
        o->param = dst[CK_PARAMS];
        o->m = dst[CK_M];
        o->v = dst[CK_V];
        p += CK_NFAM * len;
    }
    if (live.on_device) ZT_TRY(zt_be_check(live.be, "checkpoint snapshot", st));
    a->s = live;
    a->s.ranges = a->ranges;
    a->s.on_device = 0;
    return ZT_OK;
}

/* ---------------------------------------------------------------- begin, poll, abandon */

/* Start the background thread on stage `stage` (1 checksums, 2 tensor data). */
static int start_stage(zt_ckpt_async *a, int stage, zt_status *st) {
    a->stage = stage;
    a->done = a->cancel = 0;
    a->progress = 0;
    a->rc = ZT_OK;
    a->tid = 0;
    a->boosted = 0;
    a->cpu[stage] = 0;
    errno = 0;
    int bn = getpriority(PRIO_PROCESS, 0);   /* this (the main) thread's nice value */
    a->base_nice = errno ? 0 : bn;
    zt_status_clear(&a->wst);
    a->copying = stage == 1 && a->ncp > 0;
    a->th_live = pthread_create(&a->th, NULL, stage == 1 ? checksum_main : writer_main, a) == 0;
    if (!a->th_live) a->copying = 0;
    return a->th_live ? ZT_OK
                      : zt_fail(st, ZT_ENOMEM, "checkpoint.async: cannot start the background thread");
}

int zt_ckpt_save_async(zt_ctx *ctx, zt_ckpt_async *a, const char *dir, int keep, zt_status *st) {
    zt_status_clear(st);
    if (a->active)
        return zt_fail(st, ZT_EINTERNAL, "checkpoint: a save is still in flight (a bug: "
                       "zt_ckpt_async_poll with wait first)");
    double t0 = zt_now_s();
    int rc = take_snapshot(ctx, a, st);
    const size_t ncs = (size_t)CK_NFAM * (size_t)a->s.model->n_tensors;
    if (rc == ZT_OK && ncs != a->ncs) {
        free(a->cs);
        a->ncs = 0;
        if (!(a->cs = calloc(ncs, sizeof *a->cs)))
            rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint checksums)");
        else
            a->ncs = ncs;
    }
    if (rc != ZT_OK) a->ncp = 0;
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    a->pieces.n = 0;
    a->fence_s = 0;
    a->cpu[0] = 0;
    a->step = a->s.step;
    a->keep = keep;
    a->rank = zt_ctx_rank(ctx);
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    snprintf(a->final, sizeof a->final, "%s/step-%ld", dir, a->step);
    snprintf(a->tmpd, sizeof a->tmpd, "%s.tmp", a->final);
    snprintf(a->file, sizeof a->file, "%s/%s", a->tmpd, ZT_CKPT_FILE);
    a->need = ck_save_bytes(a->s.model, 0);
    a->active = 1;
    a->t0 = t0;
    rc = start_stage(a, 1, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) {
        zt_ckpt_async_abandon(a);
        return rc;
    }
    a->stalled = zt_now_s() - t0;
    if (a->copying)
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: step %ld state recorded in %.2f s; the snapshot's copy "
               "(%.1f MiB, before the next optimizer update), checksums and tensor data in the "
               "background", a->step, a->stalled,
               (double)a->snap_elems * CK_NFAM * sizeof(float) / 1048576.0);
    else
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: step %ld snapshot taken in %.2f s; checksums and "
               "tensor data in the background", a->step, a->stalled);
    return ZT_OK;
}

/* Stage 1 done on every rank: every agreed phase of the save on the main
 * thread (ck_save on the snapshot: the checksums' all-reduce, step-N.tmp,
 * the free-space check, the file with its metadata and datasets, written by
 * rank 0), then stage 2. */
static int create_file(zt_ctx *ctx, zt_ckpt_async *a, zt_status *st) {
    double t0 = zt_now_s();
    a->pieces.n = 0;
    const ck_deferred d = {&a->s, a->cs, &a->pieces};
    ZT_TRY(ck_save(ctx, a->dir, a->keep, &d, st));
    int rc = start_stage(a, 2, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    zt_log(ctx, ZT_LOG_INFO, "checkpoint: step %ld file created in %.2f s; writing the tensors in "
           "the background", a->step, zt_now_s() - t0);
    return ZT_OK;
}

/* (a stage 1 thread copies every piece the fence did not: joined, the copy
 * is done) */
static void join(zt_ckpt_async *a) {
    if (a->th_live) pthread_join(a->th, NULL);
    a->th_live = 0;
    a->copying = 0;
}

void zt_ckpt_async_abandon(zt_ckpt_async *a) {
    if (!a || !a->active) return;
    pthread_mutex_lock(&a->mu);
    a->cancel = 1;
    if (!a->done) restore_priority(a);
    pthread_mutex_unlock(&a->mu);
    join(a);
    if (a->rank == 0) ck_rmtree(a->tmpd);
    a->active = 0;
}

/* One step of the save in flight: every rank reports its thread's state;
 * when all are done, the next stage starts (or the commit).  wait = 1: wait
 * for this rank's thread first.  *advanced = 1 when the stage ended. */
static int poll_once(zt_ctx *ctx, zt_ckpt_async *a, int wait, int *advanced, long *committed,
                     zt_status *st) {
    *advanced = 0;
    pthread_mutex_lock(&a->mu);
    if (wait) {
        /* bounded by the watchdog while it makes no progress (a writer
         * stuck on a hung file system) */
        long seen = -1;
        if (!a->done) restore_priority(a);
        while (!a->done) {
            if (a->progress != seen) {
                seen = a->progress;
                pthread_mutex_unlock(&a->mu);
                ck_watch(ctx, "checkpoint save at step %ld: waiting for the background %s",
                         a->step, a->stage == 1 ? "checksums" : "writer");
                /* the file exists: a watchdog exit removes it (rank 0) */
                if (a->rank == 0 && a->stage == 2) ck_watch_cleanup(a->tmpd);
                pthread_mutex_lock(&a->mu);
                continue;
            }
            pthread_cond_wait(&a->cv, &a->mu);
        }
    }
    int done = a->done, rc = a->done ? a->rc : ZT_OK;
    if (rc != ZT_OK) *st = a->wst;
    pthread_mutex_unlock(&a->mu);
    /* every rank: is its thread done, did it fail? */
    int32_t v[2] = {!done, rc != ZT_OK ? zt_ctx_nranks(ctx) - zt_ctx_rank(ctx) : 0};
    if (zt_ctx_nranks(ctx) > 1) {
        zt_group *g = zt_ctx_world(ctx);
        zt_group_where(g, "checkpoint save at step %ld: background %s", a->step,
                       a->stage == 1 ? "checksums" : "write");
        if (wait) {
            /* this rank's thread is done; the others' may not be (a rank
             * stopped or dead inside its write) */
            ck_watch(ctx, "checkpoint save at step %ld: waiting for the other ranks' background %s",
                     a->step, a->stage == 1 ? "checksums" : "writers");
            if (a->rank == 0 && a->stage == 2) ck_watch_cleanup(a->tmpd);
        }
        zt_status cst;
        if (g->ops->allreduce_max(g, v, 2, ZT_I32, &cst) != ZT_OK) {
            zt_ckpt_async_abandon(a);
            *st = cst;
            return cst.code;
        }
    }
    if (v[1]) {
        /* a thread failed: agreed, abandoned on every rank */
        rc = ck_agree(ctx, rc, st);
        zt_ckpt_async_abandon(a);
        if (rc == ZT_EIO) ck_space_explain(a->dir, a->need, st);
        return rc != ZT_OK ? rc : zt_fail(st, ZT_EIO, "checkpoint: step %ld abandoned", a->step);
    }
    if (v[0]) return ZT_OK;   /* still running somewhere */
    join(a);
    *advanced = 1;
    if (a->stage == 1) {
        rc = create_file(ctx, a, st);
        if (rc != ZT_OK) zt_ckpt_async_abandon(a);
        return rc;
    }
    ck_watch(ctx, "checkpoint save at step %ld: commit", a->step);
    zt_group_where(zt_ctx_world(ctx), "checkpoint save: commit");
    /* Every rank confirms once more that it is here to commit.  The
     * all-reduce above may have completed on a rank that was stopped while
     * the others waited in it, gave up (timeout) and left: their part had
     * been sent.  Rank 0 must not commit for ranks that have left: this
     * second round needs them all alive after the first. */
    if ((rc = ck_agree(ctx, ZT_OK, st)) != ZT_OK) {
        zt_ckpt_async_abandon(a);
        return rc;
    }
    rc = ZT_OK;
    if (a->rank == 0) rc = ck_commit(ctx, a->dir, a->step, a->keep, a->tmpd, a->final, a->file, st);
    rc = ck_root_status(ctx, rc, st);
    a->active = 0;
    if (rc != ZT_OK && a->rank == 0) ck_rmtree(a->tmpd);
    if (rc == ZT_OK && committed) *committed = a->step;
    return rc;
}

int zt_ckpt_async_poll(zt_ctx *ctx, zt_ckpt_async *a, int wait, long *committed, zt_status *st) {
    zt_status_clear(st);
    if (committed) *committed = -1;
    if (!a || !a->active) return ZT_OK;
    double t0 = zt_now_s();
    int rc = ZT_OK, advanced = 1;
    /* without wait: at most one stage per step; with wait: to the end */
    for (int k = 0; rc == ZT_OK && a->active && advanced && (wait || k == 0); ++k)
        rc = poll_once(ctx, a, wait, &advanced, committed, st);
    ck_unwatch();
    zt_group_where(zt_ctx_world(ctx), "%s", "");
    a->stalled += zt_now_s() - t0;
    if (rc != ZT_OK || !committed || *committed < 0) return rc;
    double dt = zt_now_s() - a->t0;
    double bytes = (double)a->s.model->num_params * CK_NFAM * sizeof(float);
    zt_log(ctx, ZT_LOG_INFO, "checkpoint: saved step %ld to %s (%.1f MiB in %.2f s, %.2f GB/s; "
           "in the background: training stopped for %.2f s of it; the background thread used "
           "%.2f s of CPU: checksums %.2f s, tensor data %.2f s; snapshot copy %.2f s of CPU in "
           "the background, %.2f s at the update's fence)", a->step, a->final,
           bytes / 1048576.0, dt, bytes / 1e9 / (dt > 0 ? dt : 1e-9), a->stalled,
           a->cpu[1] + a->cpu[2], a->cpu[1] - a->cpu[0], a->cpu[2], a->cpu[0], a->fence_s);
    zt_ctx_scalar(ctx, "checkpoint/save_s", a->step, dt);
    zt_ctx_scalar(ctx, "checkpoint/stall_s", a->step, a->stalled);
    return ZT_OK;
}

double zt_ckpt_async_stalled(const zt_ckpt_async *a) { return a ? a->stalled : 0; }

void zt_ckpt_async_release(zt_ckpt_async *a) {
    if (!a || a->active) return;
    zt_mem_free(a->snap);
    a->snap = NULL;
    a->snap_elems = 0;
}

void zt_ckpt_async_free(zt_ckpt_async *a) {
    if (!a) return;
    zt_ckpt_async_abandon(a);
    zt_mem_free(a->snap);
    free(a->ranges);
    free(a->pieces.p);
    free(a->cp);
    free(a->cs);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}
