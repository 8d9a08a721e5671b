/*
 * ckpt_session.c -- checkpoints during training: resume at start, the step
 * hook (periodic, timed, final and preemption saves).  After a preemption
 * save rank 0 asks the runtime to requeue the Slurm job (zt_rt_requeue,
 * libtrain/runtime.c: the scheduler's side lives there), or, deferred
 * (zt_ckpt_session_defer_requeue: zt_run), leaves that to its caller.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"
#include "runtime.h"
#include "signals.h"

struct zt_ckpt_session {
    zt_ctx *ctx;
    int signo;                 /* configured preemption signal */
    double last_save_t;        /* zt_now_s() of the last save (or of attach) */
    long last_saved_step;
    int step_sleep_ms;         /* ZT_CKPT_STEP_SLEEP_MS (test-only) */
    char last[ZT_PATH_MAX + 32];
    char created[ZT_PATH_MAX];  /* rank 0: the topmost directory attach created, or "" */
    zt_ckpt_async *async;      /* ztrain.checkpoint.async: the background saves */
    ck_lock *lock;             /* rank 0: checkpoint.dir/.ztrain.lock (ztrain.checkpoint.lock) */
    double async_t;            /* zt_now_s() when the last background save started */
    int warned_wait;           /* the "saves come faster than the disk" warning was given */
    int defer_rq;              /* zt_ckpt_session_defer_requeue: the caller requeues */
    int rq_pending;            /* rank 0, deferred: a preemption save wants the requeue */
};

void zt_ckpt_session_defer_requeue(zt_ckpt_session *s) {
    if (s) s->defer_rq = 1;
}
int zt_ckpt_session_requeue_pending(const zt_ckpt_session *s) { return s ? s->rq_pending : 0; }

const char *zt_ckpt_session_last(const zt_ckpt_session *s) { return s ? s->last : ""; }
long zt_ckpt_session_inflight(const zt_ckpt_session *s) { return s ? zt_ckpt_async_step(s->async) : -1; }

/* ------------------------------------------------------------ step hook */

static int save_now(zt_ckpt_session *s, zt_ctx *ctx, const char *why, zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    zt_log(ctx, ZT_LOG_INFO, "checkpoint: saving step %ld (%s)", zt_ctx_step(ctx), why);
    ZT_TRY(zt_ckpt_save(ctx, c->ckpt_dir, c->ckpt_keep, st));
    s->last_saved_step = zt_ctx_step(ctx);
    s->last_save_t = zt_now_s();
    snprintf(s->last, sizeof s->last, "%s/step-%ld", c->ckpt_dir, zt_ctx_step(ctx));
    return ZT_OK;
}

/* A failed periodic or timed save (every rank holds the same status: the
 * save agrees on it): stop, or with checkpoint.on_failure=continue a warning
 * and training goes on.  A lost rank (ZT_ECOMM) always stops. */
static int save_failed(zt_ckpt_session *s, zt_ctx *ctx, long step, int rc, int timed,
                       zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    if (rc != ZT_OK && rc != ZT_ECOMM && !strcmp(c->ckpt_on_failure, "continue")) {
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: the save at step %ld failed and was abandoned on "
               "every rank: %s; training continues (ztrain.checkpoint.on_failure=continue), the "
               "next save retries; the newest checkpoint is still %s", step, st->msg,
               s->last[0] ? s->last : "none");
        zt_status_clear(st);
        if (timed) s->last_save_t = zt_now_s();
        return ZT_OK;
    }
    return rc;
}

/* The background save in flight (checkpoint.async): committed when every
 * rank's writer is done; wait = 1: wait for this rank's writer first (the
 * next save, the final and the preemption save, at most one in flight).  A
 * writer error is reported here, on every rank, and decided by
 * checkpoint.on_failure. */
static int finish_inflight(zt_ckpt_session *s, zt_ctx *ctx, int wait, zt_status *st) {
    if (!zt_ckpt_async_busy(s->async)) return ZT_OK;
    const zt_config *c = zt_ctx_config(ctx);
    long inflight = zt_ckpt_async_step(s->async), done = -1;
    int rc = zt_ckpt_async_poll(ctx, s->async, wait, &done, st);
    if (rc != ZT_OK) return save_failed(s, ctx, inflight, rc, 0, st);
    if (done >= 0) snprintf(s->last, sizeof s->last, "%s/step-%ld", c->ckpt_dir, done);
    return ZT_OK;
}

/* A periodic or timed background save that had to wait for the previous
 * one's write (of step prev, started at s->async_t): the saves come faster
 * than the disk takes them, and every save loses such a wait.  Said once per
 * run (rank 0 prints), with the interval that would hide the writes: the
 * steps (or minutes) between saves scaled by how long the previous write
 * took, plus a quarter.  t: when this save step began its wait; waited: how
 * long the wait took. */
static void warn_wait(zt_ckpt_session *s, zt_ctx *ctx, long step, long prev, int timed, double t,
                      double waited) {
    if (s->warned_wait || waited < 0.5 || t <= s->async_t) return;
    s->warned_wait = 1;
    const double apart = t - s->async_t, took = apart + waited;
    const long steps = step - prev;
    char hint[160];
    if (timed)
        snprintf(hint, sizeof hint, "checkpoint.every_minutes >= %.1f (--ckpt-every-minutes)",
                 ceil(took * 1.25 / 6.0) / 10.0);
    else
        snprintf(hint, sizeof hint, "checkpoint.every >= %ld (--ckpt-every)",
                 (long)ceil((double)steps * took / apart * 1.25));
    zt_log(ctx, ZT_LOG_WARN, "checkpoint: the save at step %ld waited %.2f s for the background "
           "save of step %ld to reach the disk (%.1f s after it started): saves %ld steps "
           "(%.2f s) apart come faster than the disk takes them, and each one loses such a "
           "wait; %s would hide the writes (said once)",
           step, waited, prev, took, steps, apart, hint);
}

static int step_hook(void *user, zt_ctx *ctx, zt_status *st) {
    zt_ckpt_session *s = user;
    const zt_config *c = zt_ctx_config(ctx);
    if (s->step_sleep_ms > 0) {
        struct timespec ts = {s->step_sleep_ms / 1000, (long)(s->step_sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    int timed = 0, sig = 0;
    if (zt_ctx_rank(ctx) == 0 && c->ckpt_every_minutes > 0 &&
        zt_now_s() - s->last_save_t >= c->ckpt_every_minutes * 60.0)
        timed = 1;
    ZT_TRY(zt_preempt_agree(zt_ctx_world(ctx), &sig, &timed, st));
    long step = zt_ctx_step(ctx);
    int last = step >= c->steps;
    int periodic = c->ckpt_every > 0 && step % c->ckpt_every == 0;
    ZT_TRY(finish_inflight(s, ctx, 0, st));
    if (s->last_saved_step == step) return ZT_OK;
    if (sig && !last) {
        zt_log(ctx, ZT_LOG_INFO, "preemption: %s received; all ranks stop after step %ld",
               zt_signal_name(sig), step);
        ZT_TRY(finish_inflight(s, ctx, 1, st));
        zt_ckpt_async_release(s->async);
        ZT_TRY(save_now(s, ctx, "preemption", st));
        zt_preempt_clear();
        if (zt_ctx_rank(ctx) == 0) {
            if (s->defer_rq) s->rq_pending = 1;
            else zt_rt_requeue(ctx);
        }
        return zt_fail(st, ZT_EPREEMPTED, "preempted by %s after step %ld; checkpoint %s saved",
                       zt_signal_name(sig), step, s->last);
    }
    if (sig && last) {
        zt_log(ctx, ZT_LOG_INFO, "preemption: %s received after the last step; finishing normally",
               zt_signal_name(sig));
        zt_preempt_clear();
    }
    if (last) {
        ZT_TRY(finish_inflight(s, ctx, 1, st));
        zt_ckpt_async_release(s->async);   /* (the final save is synchronous) */
        if (!c->ckpt_final) {
            zt_log(ctx, ZT_LOG_INFO, "checkpoint: no save at the end of training (checkpoint.final "
                   "false); the newest checkpoint is %s", s->last[0] ? s->last : "none");
            return ZT_OK;
        }
        return save_now(s, ctx, "end of training", st);
    }
    if (!periodic && !timed) return ZT_OK;
    const char *why = periodic ? "checkpoint.every" : "checkpoint.every_minutes";
    int rc;
    if (s->async) {
        /* at most one save in flight: the previous one finishes first */
        const long prev = zt_ckpt_async_step(s->async);   /* -1: none in flight */
        const double tw = zt_now_s();
        ZT_TRY(finish_inflight(s, ctx, 1, st));
        if (prev >= 0) warn_wait(s, ctx, step, prev, !periodic, tw, zt_now_s() - tw);
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: saving step %ld (%s, in the background)", step, why);
        const double t0 = zt_now_s();
        rc = zt_ckpt_save_async(ctx, s->async, c->ckpt_dir, c->ckpt_keep, st);
        if (rc == ZT_OK) {
            s->last_saved_step = step;
            s->last_save_t = zt_now_s();
            s->async_t = t0;
        }
    } else {
        rc = save_now(s, ctx, why, st);
    }
    return rc == ZT_OK ? ZT_OK : save_failed(s, ctx, step, rc, timed, st);
}

static void state_fence(void *user) { zt_ckpt_async_fence(user); }

/* ------------------------------------------------------------ attach */

static void detach(zt_ckpt_session *s, int hooked);

/* Rank 0, at start: the checkpoint directory exists (created if needed) and
 * a file can be created in it and removed again, so that an unwritable
 * directory stops the run before step 1, not at its first (or, with
 * checkpoint.every = 0, its only) save. */
static int probe_dir(const char *dir, char *created, size_t n, zt_status *st) {
    char bad[ZT_PATH_MAX];
    if (zt_mkdirs(dir, created, n, bad, sizeof bad) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot create directory: %s: %s", dir, bad, strerror(errno));
    char p[ZT_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/.ztrain-probe-%ld.tmp", dir, (long)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write(fd, "probe\n", 6) == 6;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) { ok = 0; e = errno; }
    if (fd >= 0 && unlink(p) != 0 && ok) { ok = 0; e = errno; }
    if (!ok)
        return zt_fail(st, ZT_EIO, "ztrain.checkpoint.dir=%s is not writable (%s: %s); checked "
                       "at start, before step 1", dir, p, strerror(e));
    return ZT_OK;
}

int zt_ckpt_attach(zt_ctx *ctx, zt_ckpt_session **out, zt_status *st) {
    zt_status_clear(st);
    *out = NULL;
    const zt_config *c = zt_ctx_config(ctx);
    zt_group_where(zt_ctx_world(ctx), "start-up: checkpoint session");
    ck_crash_point("startup", zt_ctx_step(ctx));
    zt_ckpt_session *s = calloc(1, sizeof *s);
    int rc = s ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint session)");
    if (rc == ZT_OK) rc = ck_env_check(zt_world_size(), st);
    if (rc == ZT_OK) rc = zt_signal_from_name(c->preempt_signal, &s->signo, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { free(s); return rc; }
    s->ctx = ctx;
    s->last_saved_step = -1;
    long sl;
    zt_env_int("ZT_CKPT_STEP_SLEEP_MS", 0, CK_ENV_MS_MAX, 0, &sl, NULL);   /* checked above */
    s->step_sleep_ms = (int)sl;

    /* one run per directory: rank 0 holds its lock from here, before
     * anything in it changes (stale .tmp, resume, quarantine), to the end
     * (an earlier instance of this Slurm job still ending is waited for a
     * while: less than the other ranks' wait in the agreement allows) */
    if (zt_ctx_rank(ctx) == 0) rc = probe_dir(c->ckpt_dir, s->created, sizeof s->created, st);
    if (zt_ctx_rank(ctx) == 0 && rc == ZT_OK) {
        double wait_s = c->comm_timeout_s > 0 && c->comm_timeout_s / 3 < 60 ? c->comm_timeout_s / 3 : 60;
        rc = ck_lock_take(ctx, c->ckpt_dir, c->ckpt_lock, wait_s, &s->lock, st);
    }
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) { detach(s, 0); return rc; }
    if (zt_ctx_rank(ctx) == 0) {
        char report[512];
        int n = ck_clean_stale(c->ckpt_dir, report, sizeof report);
        if (n > 0)
            zt_log(ctx, ZT_LOG_INFO, "checkpoint: removed %d stale incomplete entr%s in %s: %s",
                   n, n == 1 ? "y" : "ies", c->ckpt_dir, report);
        if (!strcmp(c->ckpt_resume, "never")) {
            long *steps;
            int k;
            zt_status tmp;
            if (ck_scan_steps(c->ckpt_dir, &steps, &k, &tmp) == ZT_OK && k > 0)
                zt_log(ctx, ZT_LOG_WARN, "checkpoint.resume=never: starting from step 0 although "
                       "%s holds %d checkpoint%s (newest step-%ld); saving replaces or prunes them",
                       c->ckpt_dir, k, k == 1 ? "" : "s", steps[0]);
            free(steps);
        }
    }
    long step = -1;
    rc = zt_ckpt_resume(ctx, &step, st);
    if (rc != ZT_OK) { detach(s, 0); return rc; }
    if (step >= 0) {
        s->last_saved_step = step;
        snprintf(s->last, sizeof s->last, "%s", c->ckpt_resume);
        if (!strcmp(c->ckpt_resume, "auto"))
            snprintf(s->last, sizeof s->last, "%s/step-%ld", c->ckpt_dir, step);
        if (step >= c->steps)
            zt_log(ctx, ZT_LOG_INFO, "checkpoint: step %ld of %ld: nothing left to train", step,
                   c->steps);
    }
    /* (no save planned: checkpoint.final false and no periodic or timed saves) */
    if (step < c->steps && (c->ckpt_final || c->ckpt_every > 0 || c->ckpt_every_minutes > 0))
        ck_space_preflight(ctx, c->ckpt_dir);
    /* checkpoint.async: every rank the same (the pre-flight check may have
     * fallen back to synchronous saves on a rank whose limit the snapshot
     * does not fit: then every rank saves synchronously) */
    int use_async = c->ckpt_async && (c->ckpt_every > 0 || c->ckpt_every_minutes > 0);
    if (zt_ctx_nranks(ctx) > 1 && (c->ckpt_every > 0 || c->ckpt_every_minutes > 0)) {
        zt_group *g = zt_ctx_world(ctx);
        int32_t sync = !use_async;
        zt_group_where(g, "start-up: checkpoint session (checkpoint.async)");
        rc = g->ops->allreduce_max(g, &sync, 1, ZT_I32, st);
        if (rc != ZT_OK) { detach(s, 0); return rc; }
        if (sync && use_async)
            zt_log(ctx, ZT_LOG_WARN, "checkpoint: synchronous checkpoints: another rank's "
                   "host snapshot does not fit its memory limit");
        use_async = !sync;
    }
    if (use_async && !(s->async = zt_ckpt_async_new()))
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint.async)");
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { detach(s, 0); return rc; }
    /* the snapshot now, its pages touched: not at the first save */
    if (s->async) {
        rc = zt_ckpt_async_prepare(ctx, s->async, st);
        if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) {
            zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s; periodic checkpoints are synchronous", st->msg);
            zt_ckpt_async_free(s->async);
            s->async = NULL;
            zt_status_clear(st);
            rc = ZT_OK;
        }
    }
    rc = zt_preempt_install(s->signo, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) { detach(s, 0); return rc; }
    s->last_save_t = zt_now_s();
    zt_ctx_set_step_hook(ctx, step_hook, s);
    /* a background save's copy of the owned state runs into the next step */
    if (s->async) zt_ctx_set_state_fence(ctx, state_fence, s->async);
    *out = s;
    return ZT_OK;
}

/* The end of a session: the checkpoint directory this run created is
 * removed again while it is empty (a run refused after the attach -- a bad
 * --init-from, a failed restore -- leaves no empty checkpoints/ behind). */
static void detach(zt_ckpt_session *s, int hooked) {
    /* a save still in flight here (training failed or stopped before the
     * step hook finished it) is abandoned, never committed: the previous
     * checkpoint stays `latest` (its thread finishes the snapshot's copy
     * first) */
    if (hooked) zt_ctx_set_state_fence(s->ctx, NULL, NULL);
    zt_ckpt_async_free(s->async);
    if (hooked) {
        zt_ctx_set_step_hook(s->ctx, NULL, NULL);
        zt_preempt_uninstall();
    }
    ck_lock_release(s->lock);   /* (after the last save: the directory is free) */
    zt_rmdirs_created(zt_ctx_config(s->ctx)->ckpt_dir, s->created);
    free(s);
}

void zt_ckpt_detach(zt_ckpt_session *s) {
    if (s) detach(s, 1);
}
