/* ckpt_watchdog.c -- the checkpoint I/O watchdog: one thread per process
 * that ends the job when an armed phase makes no progress (ckpt_internal.h:
 * ck_watch / ck_unwatch; ztrain_ckpt.h: zt_watchdog_*). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"

/* ---------------------------------------------------------------- watchdog
 * HDF5 and MPI-IO run collectives of their own (metadata-cache sync points,
 * MPI_File_close) that no timeout covers; after an I/O error on one rank
 * they can even diverge between ranks.  A thread per process bounds every
 * armed phase: no ck_watch for ztrain.comm_timeout_s (rank 0; the others 5 s
 * later, so that one line reports it; mpirun stops them first) and it hands one error line naming
 * the phase to the program's handler (zt_watchdog_set_handler; the CLI prints it and exits 1), or
 * prints it and calls MPI_Abort -- a thread blocked inside an MPI collective cannot be returned
 * from, so the job must end; the program decides how.  mpirun then stops the other ranks. */
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static double wd_deadline;          /* 0: disarmed */
static double wd_timeout;
static int wd_rank, wd_started;
static char wd_phase[sizeof(((zt_status *)0)->msg) + 128];
static char wd_cleanup[ZT_PATH_MAX + 64];   /* rank 0: removed before exiting */
static void (*wd_handler)(const char *line, void *user);   /* zt_watchdog_set_handler */
static void *wd_user;

static int wd_fired;                /* the line has been handed over: the process is ending */

/* End the job for the armed phase (called with wd_mu held, by the watchdog
 * thread or by a thread re-arming an overdue deadline); does not return.
 * Only the first caller reports; a second one waits for the first's exit. */
static void wd_fire(void) {
    if (wd_fired) {
        pthread_mutex_unlock(&wd_mu);
        for (;;) pause();
    }
    wd_fired = 1;
    char cleanup[sizeof wd_cleanup];
    snprintf(cleanup, sizeof cleanup, "%s", wd_cleanup);
    char line[sizeof wd_phase + 200];
    int n = snprintf(line, sizeof line, "ztrain: error: rank %d: %s: no progress for %.0f s: a "
                     "rank died, stopped or hangs (ztrain.comm_timeout_s); stopping\n", wd_rank,
                     wd_phase, wd_timeout);
    if (n < 0) line[0] = '\0';
    void (*handler)(const char *, void *) = wd_handler;
    void *user = wd_user;
    pthread_mutex_unlock(&wd_mu);
    if (cleanup[0]) ck_rmtree(cleanup);   /* an abandoned save's .tmp */
    if (handler) {   /* the program's choice (the CLI: the line, then exit status 1) */
        handler(line, user);
    } else {
        ssize_t k = write(STDERR_FILENO, line, strlen(line));
        (void)k;
    }
    /* no handler, or it returned: end the job the MPI way */
    MPI_Abort(MPI_COMM_WORLD, 1);
    for (;;) pause();
}

static void *wd_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&wd_mu);
    for (;;) {
        if (wd_deadline <= 0) { pthread_cond_wait(&wd_cv, &wd_mu); continue; }
        double now = zt_now_s();
        if (now < wd_deadline) {
            double w = wd_deadline - now;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)w;
            ts.tv_nsec += (long)((w - (double)(time_t)w) * 1e9);
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&wd_cv, &wd_mu, &ts);
            continue;
        }
        wd_fire();
    }
    return NULL;
}

void zt_watchdog_set_handler(void (*fn)(const char *line, void *user), void *user) {
    pthread_mutex_lock(&wd_mu);
    wd_handler = fn;
    wd_user = user;
    pthread_mutex_unlock(&wd_mu);
}

void zt_watchdog_arm(int rank, int nranks, double timeout_s, const char *phase) {
    if (nranks < 2 || timeout_s <= 0) return;
    pthread_mutex_lock(&wd_mu);
    if (!wd_started) {
        pthread_attr_t a;
        pthread_t th;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        wd_started = pthread_create(&th, &a, wd_main, NULL) == 0;
        pthread_attr_destroy(&a);
    }
    /* An armed phase past its deadline is not re-armed: the process was
     * stopped or starved for longer than the timeout (SIGSTOP, a frozen
     * node) and the other ranks have given up on it; if it went on, a
     * collective they entered before leaving could still complete here (the
     * data were sent) and, say, commit a save they abandoned.  It ends now,
     * on this thread, whoever gets here first. */
    if (wd_fired || (wd_deadline > 0 && zt_now_s() >= wd_deadline)) wd_fire();
    snprintf(wd_phase, sizeof wd_phase, "%s", phase);
    wd_rank = rank;
    wd_timeout = timeout_s;
    wd_deadline = zt_now_s() + timeout_s + (rank ? 5.0 : 0.0);
    pthread_cond_signal(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}

void zt_watchdog_disarm(void) { ck_unwatch(); }

void ck_watch(zt_ctx *ctx, const char *fmt, ...) {
    double t = zt_ctx_world(ctx) ? zt_ctx_world(ctx)->timeout_s : 0;
    if (zt_ctx_nranks(ctx) < 2 || t <= 0) return;
    char phase[sizeof wd_phase];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(phase, sizeof phase, fmt, ap);
    va_end(ap);
    zt_watchdog_arm(zt_ctx_rank(ctx), zt_ctx_nranks(ctx), t, phase);
}

void ck_watch_cleanup(const char *path) {
    pthread_mutex_lock(&wd_mu);
    snprintf(wd_cleanup, sizeof wd_cleanup, "%s", path ? path : "");
    pthread_mutex_unlock(&wd_mu);
}

void ck_unwatch(void) {
    pthread_mutex_lock(&wd_mu);
    /* (the phase ended, but after its deadline: as in zt_watchdog_arm) */
    if (wd_fired || (wd_deadline > 0 && zt_now_s() >= wd_deadline)) wd_fire();
    wd_deadline = 0;
    wd_cleanup[0] = '\0';
    pthread_mutex_unlock(&wd_mu);
}
