/* source.c -- the sampler (seeded per-epoch permutation of windows), the
 * prefetching data source with N worker threads, and zt_ctx_open_data.
 * The order is documented in data.h and docs/data.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agree.h"
#include "config.h"
#include "engine.h"
#include "data.h"
#include "internal.h"
#include "sft.h"
#include "ztrain_io.h"

/* ---------------------------------------------------------------- sampler */

#define FEISTEL_ROUNDS 6

uint64_t zt_data_perm(uint64_t i, uint64_t n, uint64_t key) {
    if (n <= 1) return 0;
    int bits = 64 - __builtin_clzll(n - 1);   /* bits of the largest index */
    if (bits < 2) bits = 2;
    bits += bits & 1;                         /* balanced halves */
    int h = bits / 2;
    uint64_t mask = (h == 64) ? ~0ULL : ((1ULL << h) - 1);
    uint64_t x = i % n;
    do {                                      /* cycle-walk back into [0, n) */
        uint64_t L = x >> h, R = x & mask;
        for (int r = 0; r < FEISTEL_ROUNDS; ++r) {
            uint64_t F = zt_hash3(key, (uint64_t)r, R) & mask;
            uint64_t nl = R;
            R = L ^ F;
            L = nl;
        }
        x = (L << h) | R;
    } while (x >= n);
    return x;
}

static uint64_t epoch_key(uint64_t seed, uint64_t epoch) {
    return zt_hash3(seed, epoch, 0x7a74646174615045ULL);
}

uint64_t zt_data_train_sample(uint64_t g, uint64_t n, uint64_t seed) {
    return zt_data_perm(g % n, n, epoch_key(seed, g / n));
}

uint64_t zt_data_position(long step, int train_batch_size) {
    return (uint64_t)step * (uint64_t)train_batch_size;
}

/* ---------------------------------------------------------------- workers */

int zt_data_default_workers(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    long cpus = online;
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0 && CPU_COUNT(&cs) > 0) cpus = CPU_COUNT(&cs);
    int local = zt_local_size();
    if (local < 1) local = 1;
    /* not bound to a subset: share the node's CPUs with the other local ranks */
    long per_rank = cpus >= online ? cpus / local : cpus;
    long w = per_rank / 2;
    if (w > 4) w = 4;
    if (w < 1) w = 1;
    return (int)w;
}

enum { SLOT_EMPTY = 0, SLOT_FILLING, SLOT_READY };

typedef struct slot {
    long long q;              /* batch index: step * A + micro; -1 = none */
    int state, rc;
    char msg[sizeof(((zt_status *)0)->msg)];
    uint32_t *tok;            /* B * (T+1) */
} slot;

#define LOADER_MAGIC 0x7a746c64

typedef struct loader {
    int magic;
    zt_dataset *ds;
    int kind, T, B, A, world, rank, EB;
    uint64_t seed, gbatch, n;
    uint32_t *one;            /* T+1: synchronous reads (caller's thread) */
    /* prefetch */
    int nworkers, depth, nstarted;
    pthread_t *threads;
    slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    long long base_q;         /* next batch get() expects; -1 = not started */
    long long next_q;         /* next batch a worker claims */
    int inflight, stop;
    /* stats (consumer thread) */
    uint64_t prefetched, sync_reads;
    double wait_s;
} loader;

static uint64_t sample_id(const loader *L, long step, uint64_t idx) {
    if (L->kind == ZT_DATA_EVAL) {
        uint64_t round = (uint64_t)(-1 - step);
        return (round * (uint64_t)L->EB + idx) % L->n;   /* EB: global, any world size */
    }
    return zt_data_train_sample((uint64_t)step * L->gbatch + idx, L->n, L->seed);
}

/* count samples of (step, first) into tok, stride T+1. */
static int fill(const loader *L, long step, uint64_t first, int count, uint32_t *tok, zt_status *st) {
    size_t W = (size_t)L->T + 1;
    for (int i = 0; i < count; ++i)
        ZT_TRY(zt_dataset_read(L->ds, sample_id(L, step, first + (uint64_t)i), tok + (size_t)i * W, st));
    return ZT_OK;
}

static void unpack(const loader *L, const uint32_t *w, int T, int *in, int *tg) {
    if (!L->ds->masked) {
        for (int t = 0; t < T; ++t) {
            in[t] = (int)w[t];
            tg[t] = (int)w[t + 1];
        }
        return;
    }
    /* SFT windows: a token flagged ZT_SFT_NOTARGET is an input like any
     * other but an ignored target (< 0: no loss, no gradient) */
    for (int t = 0; t < T; ++t) {
        in[t] = (int)(w[t] & ~ZT_SFT_NOTARGET);
        tg[t] = (w[t + 1] & ZT_SFT_NOTARGET) ? -1 : (int)w[t + 1];
    }
}

static int read_sync(loader *L, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    for (int i = 0; i < count; ++i) {
        ZT_TRY(zt_dataset_read(L->ds, sample_id(L, step, first + (uint64_t)i), L->one, st));
        unpack(L, L->one, T, in + (size_t)i * T, tg + (size_t)i * T);
    }
    return ZT_OK;
}

/* The batch index of a request if it is one of this rank's training
 * micro-batches, else -1. */
static long long batch_index(const loader *L, long step, uint64_t first, int count) {
    if (L->kind != ZT_DATA_TRAIN || step < 0 || count != L->B) return -1;
    uint64_t base = (uint64_t)L->rank * (uint64_t)L->B * (uint64_t)L->A;
    if (first < base || (first - base) % (uint64_t)L->B) return -1;
    uint64_t micro = (first - base) / (uint64_t)L->B;
    if (micro >= (uint64_t)L->A) return -1;
    return (long long)step * L->A + (long long)micro;
}

static void *worker_main(void *arg) {
    loader *L = arg;
    zt_status st;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        while (!L->stop && !(L->base_q >= 0 && L->next_q < L->base_q + L->depth))
            pthread_cond_wait(&L->cv_work, &L->mu);
        if (L->stop) break;
        long long q = L->next_q++;
        slot *s = &L->slots[q % L->depth];
        s->q = q;
        s->state = SLOT_FILLING;
        L->inflight++;
        pthread_mutex_unlock(&L->mu);

        long step = (long)(q / L->A);
        int micro = (int)(q % L->A);
        uint64_t first = (uint64_t)L->rank * (uint64_t)L->B * (uint64_t)L->A + (uint64_t)micro * L->B;
        zt_status_clear(&st);
        int rc = fill(L, step, first, L->B, s->tok, &st);

        pthread_mutex_lock(&L->mu);
        s->rc = rc;
        if (rc != ZT_OK) memcpy(s->msg, st.msg, sizeof s->msg);
        s->state = SLOT_READY;
        L->inflight--;
        pthread_cond_broadcast(&L->cv_ready);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

static int loader_get(void *state, long step, uint64_t first, int count, int T, int *in, int *tg,
                      zt_status *st) {
    loader *L = state;
    zt_status_clear(st);
    if (T < 1 || T > L->T || count < 0 || (L->ds->masked && T != L->T))
        return zt_fail(st, ZT_EINTERNAL, "%s: request of %d windows of %d tokens from a source built "
                       "for %d", L->ds->pattern, count, T, L->T);
    long long q = L->nworkers > 0 ? batch_index(L, step, first, count) : -1;
    if (q >= 0) {
        pthread_mutex_lock(&L->mu);
        if (L->base_q == q) {
            slot *s = &L->slots[q % L->depth];
            double t0 = zt_now_s();
            while (!(s->q == q && s->state == SLOT_READY)) pthread_cond_wait(&L->cv_ready, &L->mu);
            L->wait_s += zt_now_s() - t0;
            pthread_mutex_unlock(&L->mu);
            /* the slot stays ours until base_q moves past q */
            int rc = s->rc;
            if (rc != ZT_OK) {
                st->code = rc;
                memcpy(st->msg, s->msg, sizeof st->msg);
            } else {
                size_t W = (size_t)L->T + 1;
                for (int i = 0; i < count; ++i)
                    unpack(L, s->tok + (size_t)i * W, T, in + (size_t)i * T, tg + (size_t)i * T);
            }
            pthread_mutex_lock(&L->mu);
            s->state = SLOT_EMPTY;
            s->q = -1;
            L->base_q++;
            L->prefetched++;
            pthread_cond_broadcast(&L->cv_work);
            pthread_mutex_unlock(&L->mu);
            return rc;
        }
        /* not the expected batch: drain, then prefetch from the one after */
        L->base_q = -1;
        while (L->inflight > 0) pthread_cond_wait(&L->cv_ready, &L->mu);
        for (int i = 0; i < L->depth; ++i) {
            L->slots[i].state = SLOT_EMPTY;
            L->slots[i].q = -1;
        }
        L->base_q = L->next_q = q + 1;
        pthread_cond_broadcast(&L->cv_work);
        pthread_mutex_unlock(&L->mu);
    }
    L->sync_reads++;
    return read_sync(L, step, first, count, T, in, tg, st);
}

/* Counted targets among samples [first, first+count) of step: the stored
 * per-window counts, a 4-byte read each (get() serves masked windows whole,
 * so the counts are those of what it serves). */
static int loader_count(loader *L, long step, uint64_t first, int count, uint64_t *n, zt_status *st) {
    zt_status_clear(st);
    *n = 0;
    for (int i = 0; i < count; ++i) {
        uint32_t c;
        ZT_TRY(zt_dataset_count(L->ds, sample_id(L, step, first + (uint64_t)i), &c, st));
        *n += c;
    }
    return ZT_OK;
}

static void loader_close(void *state) {
    loader *L = state;
    if (!L) return;
    if (L->nstarted > 0) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv_work);
        pthread_mutex_unlock(&L->mu);
        for (int i = 0; i < L->nstarted; ++i) pthread_join(L->threads[i], NULL);
    }
    if (L->nworkers > 0) {
        pthread_cond_destroy(&L->cv_work);
        pthread_cond_destroy(&L->cv_ready);
        pthread_mutex_destroy(&L->mu);
    }
    if (L->slots)
        for (int i = 0; i < L->depth; ++i) zt_mem_free(L->slots[i].tok);
    free(L->slots);
    free(L->threads);
    zt_mem_free(L->one);
    zt_dataset_close(L->ds);
    L->magic = 0;
    free(L);
}

/* The data-source table's count_targets (masked datasets only). */
static int loader_count_fn(void *state, long step, uint64_t first, int count, uint64_t *n, zt_status *st) {
    return loader_count(state, step, first, count, n, st);
}

int zt_data_open(const zt_data_opts *o, zt_data_source *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    int train = o->kind == ZT_DATA_TRAIN;
    if (o->T < 1) return zt_fail(st, ZT_EINVAL, "data: context %d < 1", o->T);
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world)
        return zt_fail(st, ZT_EINVAL, "data: rank %d of world %d", o->rank, o->world);
    if (train && (o->micro_batch < 1 || o->grad_accum < 1))
        return zt_fail(st, ZT_EINVAL, "data: micro batch %d / accumulation %d", o->micro_batch, o->grad_accum);
    if (!train && o->eval_batch < 1) return zt_fail(st, ZT_EINVAL, "data: eval batch %d < 1", o->eval_batch);
    if (o->workers < 0) return zt_fail(st, ZT_EINVAL, "data: %d workers", o->workers);
    loader *L = calloc(1, sizeof *L);
    if (!L) return zt_fail(st, ZT_ENOMEM, "out of memory");
    L->magic = LOADER_MAGIC;
    L->kind = o->kind;
    L->T = o->T;
    L->B = train ? o->micro_batch : o->eval_batch;
    L->A = train ? o->grad_accum : 1;
    L->world = o->world;
    L->rank = o->rank;
    L->EB = o->eval_batch;
    L->seed = o->seed;
    L->gbatch = (uint64_t)L->B * (uint64_t)L->A * (uint64_t)L->world;
    L->base_q = L->next_q = -1;
    int rc = zt_dataset_open(o->pattern, o->vocab, o->T, &L->ds, st);
    if (rc != ZT_OK) { free(L); return rc; }
    L->n = L->ds->nsamples;
    L->one = zt_mem_alloc(sizeof(uint32_t) * ((size_t)L->T + 1), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
    if (!L->one) { loader_close(L); return ZT_ENOMEM; }
    L->nworkers = train ? o->workers : 0;   /* eval reads are few: synchronous */
    if (L->nworkers > 0) {
        L->depth = o->depth > 0 ? o->depth : 2 * L->A + 2;
        pthread_mutex_init(&L->mu, NULL);
        pthread_cond_init(&L->cv_work, NULL);
        pthread_cond_init(&L->cv_ready, NULL);
        L->slots = calloc((size_t)L->depth, sizeof *L->slots);
        L->threads = calloc((size_t)L->nworkers, sizeof *L->threads);
        if (!L->slots || !L->threads) { loader_close(L); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
        for (int i = 0; i < L->depth; ++i) {
            L->slots[i].q = -1;
            L->slots[i].tok = zt_mem_alloc(sizeof(uint32_t) * (size_t)L->B * ((size_t)L->T + 1),
                                           ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
            if (!L->slots[i].tok) { loader_close(L); return ZT_ENOMEM; }
        }
        /* workers take no signals: they stay with the main thread */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        for (int i = 0; i < L->nworkers; ++i) {
            int e = pthread_create(&L->threads[i], NULL, worker_main, L);
            if (e != 0) {
                rc = zt_fail(st, ZT_ENOMEM, "data: cannot start loader thread %d: %s", i, strerror(e));
                break;
            }
            L->nstarted++;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != ZT_OK) { loader_close(L); return rc; }
    }
    out->state = L;
    out->get = loader_get;
    out->close = loader_close;
    out->count_targets = L->ds->masked ? loader_count_fn : NULL;
    return ZT_OK;
}

static loader *loader_of(const zt_data_source *src) {
    loader *L = src ? src->state : NULL;
    return L && src->get == loader_get && L->magic == LOADER_MAGIC ? L : NULL;
}

int zt_data_masked(const zt_data_source *src) {
    const loader *L = loader_of(src);
    return L && L->ds->masked;
}

int zt_data_count_targets(const zt_data_source *src, long step, uint64_t first, int count, uint64_t *n,
                          zt_status *st) {
    loader *L = loader_of(src);
    if (!L || !L->ds->masked) return zt_fail(st, ZT_EINTERNAL, "zt_data_count_targets: not a masked source");
    return loader_count(L, step, first, count, n, st);
}

int zt_data_get_stats(const zt_data_source *src, zt_data_stats *out) {
    memset(out, 0, sizeof *out);
    const loader *L = src ? src->state : NULL;
    if (!L || src->get != loader_get || L->magic != LOADER_MAGIC) return ZT_EINVAL;
    out->nsamples = L->n;
    out->nfiles = L->ds->nfiles;
    out->workers = L->nworkers;
    out->depth = L->depth;
    out->prefetched = L->prefetched;
    out->sync_reads = L->sync_reads;
    out->wait_s = L->wait_s;
    return ZT_OK;
}

/* ---------------------------------------------------------------- context */

/* "train.file[i] = PATH (K tokens)", "train.files = N", "train.samples =
 * M" lines for the train and val loaders (val may be NULL); malloc'ed,
 * NULL when out of memory. */
static char *data_describe(const void *train, const void *val) {
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (!f) return NULL;
    for (int k = 0; k < 2; ++k) {
        const loader *L = k ? val : train;
        if (!L) continue;
        const char *w = k ? "val" : "train";
        for (int i = 0; i < L->ds->nfiles; ++i)
            fprintf(f, "%s.file[%d] = %s (%zu tokens)\n", w, i, L->ds->files[i]->path,
                    L->ds->files[i]->ntok);
        fprintf(f, "%s.files = %d\n%s.samples = %llu\n", w, L->ds->nfiles, w,
                (unsigned long long)L->ds->nsamples);
    }
    if (fclose(f) != 0) { free(out); return NULL; }
    return out;
}

int zt_ctx_open_data(zt_ctx *ctx, zt_status *st) {
    zt_status_clear(st);
    const zt_config *c = zt_ctx_config(ctx);
    zt_data_source tr, va;
    memset(&va, 0, sizeof va);
    if (!c->data_train[0]) return zt_fail(st, ZT_EINVAL, "ztrain.data.train is empty: no training data");
    zt_data_opts o;
    memset(&o, 0, sizeof o);
    o.pattern = c->data_train;
    o.kind = ZT_DATA_TRAIN;
    o.vocab = c->model.vocab;
    o.T = c->seq_len > 0 ? c->seq_len : c->model.context;
    o.seed = c->seed;
    o.micro_batch = c->micro_batch;
    o.grad_accum = c->grad_accum;
    /* sequence parallel: the sp ranks of a group read the same samples */
    const int sp = c->model.seq_parallel > 1 ? c->model.seq_parallel : 1;
    o.world = zt_world_size() / sp;
    o.rank = zt_world_rank() / sp;
    o.eval_batch = c->eval_batch_size > 0 ? c->eval_batch_size : c->micro_batch;
    o.workers = c->dataloaders > 0 ? c->dataloaders : zt_data_default_workers();
    if (o.workers > zt_config_site_max_dataloaders())   /* auto within the site limit */
        o.workers = zt_config_site_max_dataloaders();
    memset(&tr, 0, sizeof tr);
    int rc = zt_data_open(&o, &tr, st);
    if (rc == ZT_OK && c->data_val[0]) {
        o.pattern = c->data_val;
        o.kind = ZT_DATA_EVAL;
        o.workers = 0;
        rc = zt_data_open(&o, &va, st);
    }
    /* every rank opened the same files (each expanded the patterns and
     * read the files itself), or every rank fails */
    char *desc = NULL;
    if (rc == ZT_OK) {
        desc = data_describe(tr.state, va.state);
        if (!desc) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    zt_group_where(zt_ctx_world(ctx), "start-up: agreeing on the data");
    rc = zt_agree_text(zt_ctx_world(ctx), "the ranks see different data", " (every rank must see the "
                       "same ztrain.data.train and ztrain.data.val files)", desc, rc, st);
    zt_group_where(zt_ctx_world(ctx), "%s", "");
    free(desc);
    if (rc != ZT_OK) {
        if (tr.state) tr.close(tr.state);
        if (va.state) va.close(va.state);
        return rc;
    }
    return zt_ctx_set_data(ctx, tr, va, st);
}
