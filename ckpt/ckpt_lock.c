/*
 * ckpt_lock.c -- one run per checkpoint directory (docs/checkpoints.md, "One
 * job per directory").
 *
 * Rank 0 of a training run holds <checkpoint.dir>/.ztrain.lock for the run's
 * life: an open-file-description write lock (fcntl F_OFD_SETLK; the classic
 * process-owned F_SETLK where the kernel has none) on the whole file, plus
 * the holder's identity written into it (host, pid, Slurm job, start time,
 * the boot and the process's start tick).  The kernel -- or the network file
 * system's lock manager -- drops the lock when the process ends, however it
 * ends, so a file left behind by a killed run is simply locked again by the
 * next one (which says whose it was).  The lock is taken before anything in
 * the directory is changed (stale .tmp cleanup, resume, quarantine) and
 * released at the end: the file is removed while still locked, then closed.
 * Whoever locks a file checks afterwards that it is still the one the name
 * refers to (else it was removed or replaced meanwhile: try again), so that
 * two runs never hold locks on two different files of the same name.
 *
 * Where the file system refuses locks (ENOLCK, ENOSYS, EOPNOTSUPP: NFS
 * mounted with nolock on some setups, Lustre mounted with noflock), the file's
 * contents decide: empty or missing is free; a holder on this host (same boot)
 * whose process is gone is stale and taken over; a live one, or one on
 * another host (which cannot be checked from here), refuses the run.  That
 * fallback is best effort: two runs starting at the same moment can both
 * pass it.  ztrain.checkpoint.lock=break takes the directory over in any
 * case (with a warning); =off takes no lock at all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"

struct ck_lock {
    int fd;
    int kernel;                 /* 1: a kernel lock is held; 0: by the contents only */
    dev_t dev;
    ino_t ino;
    char path[ZT_PATH_MAX + 32];
    char me[1024];              /* the identity written */
};

/* The identity in a lock file. */
typedef struct ck_holder {
    int valid;                  /* host and pid were read */
    char host[256], job[96], restart[16], boot[64];
    long pid;
    long long started, pid_start;
} ck_holder;

static void read_line_file(const char *path, char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f) return;
    if (fgets(buf, (int)n, f)) buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

/* The start time of process pid in clock ticks since boot (field 22 of
 * /proc/<pid>/stat), -1 when there is no such process. */
static long long pid_start_ticks(long pid) {
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    const char *c = strrchr(buf, ')');   /* the command may hold spaces and ')' */
    if (!c) return -1;
    long long v = -1;
    /* after ") ": state (3) ... starttime (22) */
    int field = 2;
    for (const char *q = c + 1; *q; ++q) {
        if (*q != ' ') continue;
        if (++field == 22) { v = strtoll(q + 1, NULL, 10); break; }
    }
    return v;
}

static void slurm_job(char *out, size_t n) {
    const char *j = getenv("SLURM_JOB_ID"), *aj = getenv("SLURM_ARRAY_JOB_ID"),
               *at = getenv("SLURM_ARRAY_TASK_ID");
    if (aj && *aj && at && *at) snprintf(out, n, "%s_%s", aj, at);
    else snprintf(out, n, "%s", j && *j ? j : "");
}

static void my_identity(char *out, size_t n) {
    char host[256] = "", boot[64], job[96];
    gethostname(host, sizeof host - 1);
    read_line_file("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    slurm_job(job, sizeof job);
    const char *rs = getenv("SLURM_RESTART_COUNT");
    snprintf(out, n,
             "# ztrain: the run below uses this checkpoint directory (docs/checkpoints.md, "
             "\"One job per directory\")\nhost=%s\npid=%ld\nslurm_job=%s\nslurm_restart=%s\n"
             "started=%lld\nboot_id=%s\npid_start=%lld\n",
             host, (long)getpid(), job, rs ? rs : "", (long long)time(NULL), boot,
             pid_start_ticks((long)getpid()));
}

static void parse_holder(const char *text, ck_holder *h) {
    memset(h, 0, sizeof *h);
    h->pid = -1;
    h->started = h->pid_start = -1;
    int have_host = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        char *eq = strchr(line, '=');
        if (line[0] != '#' && eq) {
            *eq = '\0';
            const char *v = eq + 1;
            if (!strcmp(line, "host")) { snprintf(h->host, sizeof h->host, "%s", v); have_host = 1; }
            else if (!strcmp(line, "pid")) h->pid = strtol(v, NULL, 10);
            else if (!strcmp(line, "slurm_job")) snprintf(h->job, sizeof h->job, "%s", v);
            else if (!strcmp(line, "slurm_restart")) snprintf(h->restart, sizeof h->restart, "%s", v);
            else if (!strcmp(line, "started")) h->started = strtoll(v, NULL, 10);
            else if (!strcmp(line, "boot_id")) snprintf(h->boot, sizeof h->boot, "%s", v);
            else if (!strcmp(line, "pid_start")) h->pid_start = strtoll(v, NULL, 10);
        }
        p += len + (e ? 1 : 0);
    }
    h->valid = have_host && h->pid > 0;
}

static void read_holder(int fd, ck_holder *h) {
    char buf[2048];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    buf[k > 0 ? k : 0] = '\0';
    parse_holder(buf, h);
}

/* "host H, pid P, Slurm job J (restart N), started 2026-11-27 10:00:00 UTC" */
static void describe(const ck_holder *h, char *out, size_t n) {
    if (!h->valid) {
        snprintf(out, n, "a run whose lock file names no holder");
        return;
    }
    char job[160] = "no Slurm job", when[64] = "";
    if (h->job[0])
        snprintf(job, sizeof job, "Slurm job %s%s%s%s", h->job, h->restart[0] ? " (restart " : "",
                 h->restart, h->restart[0] ? ")" : "");
    if (h->started > 0) {
        time_t t = (time_t)h->started;
        struct tm tm;
        char ts[40];
        if (gmtime_r(&t, &tm) && strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S UTC", &tm))
            snprintf(when, sizeof when, ", started %s", ts);
    }
    snprintf(out, n, "host %s, pid %ld, %s%s", h->host, h->pid, job, when);
}

/* Where the holder ran: 0 another host, 1 this host and boot, 2 this host
 * before a reboot (its process is gone).  (No boot id on either side: this
 * host, as far as can be told.) */
static int same_host(const ck_holder *h) {
    char host[256] = "", boot[64];
    gethostname(host, sizeof host - 1);
    if (strcmp(host, h->host) != 0) return 0;
    read_line_file("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    if (h->boot[0] && boot[0] && strcmp(boot, h->boot) != 0) return 2;
    return 1;
}

/* A holder on this host: is its process still the one that wrote the file? */
static int holder_alive(const ck_holder *h) {
    long long t = pid_start_ticks(h->pid);
    if (t < 0) return 0;
    return h->pid_start < 0 || t == h->pid_start;
}

static int write_identity(ck_lock *l, zt_status *st) {
    my_identity(l->me, sizeof l->me);
    size_t n = strlen(l->me);
    if (ftruncate(l->fd, 0) != 0 || ck_write_all(l->fd, l->me, n, 0) != 0 || fsync(l->fd) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot write the checkpoint directory's lock file: %s",
                       l->path, strerror(errno));
    return ZT_OK;
}

/* An exclusive lock on the whole file: 0, or -1 with errno. */
static int lock_fd(int fd) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
    int r;
    do r = fcntl(fd, F_OFD_SETLK, &fl); while (r != 0 && errno == EINTR);
    if (r == 0 || errno != EINVAL) return r;
    memset(&fl, 0, sizeof fl);   /* a kernel before 3.15: classic locks */
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
#endif
    int q;
    do q = fcntl(fd, F_SETLK, &fl); while (q != 0 && errno == EINTR);
    return q;
}

static int lock_busy(int e) { return e == EAGAIN || e == EACCES; }

static const char *how_to_proceed(void) {
    return "wait for it to end, or use another ztrain.checkpoint.dir; if that run is gone, "
           "set ztrain.checkpoint.lock=break (--ckpt-lock break) for one run";
}

int ck_lock_take(zt_ctx *ctx, const char *dir, const char *mode, double wait_s, ck_lock **out,
                 zt_status *st) {
    *out = NULL;
    if (!strcmp(mode, "off")) return ZT_OK;
    const int brk = !strcmp(mode, "break");
    ck_lock *l = calloc(1, sizeof *l);
    if (!l) return zt_fail(st, ZT_ENOMEM, "out of memory (checkpoint lock)");
    l->fd = -1;
    snprintf(l->path, sizeof l->path, "%s/%s", dir, CK_LOCK_FILE);
    char myjob[96];
    slurm_job(myjob, sizeof myjob);
    const double t0 = zt_now_s();
    ck_holder h;
    char who[512];
    int rc = ZT_OK, replaced = 0, waited = 0;
    for (;;) {
        if (replaced == 8) {
            rc = zt_fail(st, ZT_EIO, "%s: the lock file keeps being replaced while it is locked; "
                         "another run is starting on ztrain.checkpoint.dir=%s", l->path, dir);
            break;
        }
        l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (l->fd < 0) {
            rc = zt_fail(st, ZT_EIO, "%s: cannot open the checkpoint directory's lock file: %s",
                         l->path, strerror(errno));
            break;
        }
        const int r = lock_fd(l->fd), e = errno;
        if (r == 0) {
            /* still the file the name refers to? (a releasing holder
             * removes it while it still holds it) */
            struct stat a, b;
            if (fstat(l->fd, &a) != 0 || stat(l->path, &b) != 0 || a.st_dev != b.st_dev ||
                a.st_ino != b.st_ino) {
                close(l->fd);
                l->fd = -1;
                ++replaced;
                continue;
            }
            l->kernel = 1;
            l->dev = a.st_dev;
            l->ino = a.st_ino;
            read_holder(l->fd, &h);
            if (h.valid) {
                describe(&h, who, sizeof who);
                zt_log(ctx, ZT_LOG_INFO, "checkpoint: took over %s from a run that ended "
                       "without releasing it (%s)", l->path, who);
            }
            rc = write_identity(l, st);
            break;
        }
        read_holder(l->fd, &h);
        describe(&h, who, sizeof who);
        if (lock_busy(e)) {
            if (brk) {
                /* the holder keeps its lock on a file no name refers to any
                 * more; this run locks a new one */
                zt_log(ctx, ZT_LOG_WARN, "checkpoint: ztrain.checkpoint.lock=break: taking "
                       "ztrain.checkpoint.dir=%s over from the run that holds its lock (%s); if "
                       "that run is still alive, both now write to it", dir, who);
                unlink(l->path);
                close(l->fd);
                l->fd = -1;
                ++replaced;
                continue;
            }
            /* an earlier instance of this very Slurm job (requeued) that
             * is still ending: wait for it a while */
            if (myjob[0] && h.valid && !strcmp(h.job, myjob) && zt_now_s() - t0 < wait_s) {
                if (!waited++)
                    zt_log(ctx, ZT_LOG_INFO, "checkpoint: ztrain.checkpoint.dir=%s is still "
                           "locked by an earlier run of this job (%s); waiting up to %.0f s for "
                           "it to end", dir, who, wait_s);
                close(l->fd);
                l->fd = -1;
                struct timespec ts = {0, 250000000L};
                nanosleep(&ts, NULL);
                continue;
            }
            rc = zt_fail(st, ZT_EIO, "ztrain.checkpoint.dir=%s is in use by another run (%s; it "
                         "holds the lock %s%s): %s", dir, who, l->path,
                         waited ? ", still after the wait" : "", how_to_proceed());
            break;
        }
        if (e == EINTR) { close(l->fd); l->fd = -1; continue; }
        /* no locks on this file system: the contents decide (best effort) */
        char why[160];
        snprintf(why, sizeof why, "this file system does not support locks (fcntl: %s)",
                 strerror(e));
        struct stat a;
        if (fstat(l->fd, &a) == 0) { l->dev = a.st_dev; l->ino = a.st_ino; }
        if (h.valid) {
            const int here = same_host(&h);
            const int alive = here == 1 && holder_alive(&h);
            if (here != 0 && !alive) {
                zt_log(ctx, ZT_LOG_INFO, "checkpoint: took over %s from a run that ended without "
                       "releasing it (%s; its process is gone; %s)", l->path, who, why);
            } else if (!brk) {
                if (alive)
                    rc = zt_fail(st, ZT_EIO, "ztrain.checkpoint.dir=%s is in use by another run "
                                 "(%s; named by %s, and its process is running on this host; %s): "
                                 "%s", dir, who, l->path, why, how_to_proceed());
                else
                    rc = zt_fail(st, ZT_EIO, "ztrain.checkpoint.dir=%s is in use by another run "
                                 "(%s; named by %s; %s, so whether that run is still running "
                                 "cannot be checked from this host): %s", dir, who, l->path, why,
                                 how_to_proceed());
                break;
            } else {
                zt_log(ctx, ZT_LOG_WARN, "checkpoint: ztrain.checkpoint.lock=break: taking "
                       "ztrain.checkpoint.dir=%s over from %s (named by %s; %s); if that run is "
                       "still alive, both now write to it", dir, who, l->path, why);
            }
        }
        rc = write_identity(l, st);
        break;
    }
    if (rc != ZT_OK) {
        if (l->fd >= 0) close(l->fd);
        free(l);
        return rc;
    }
    *out = l;
    return ZT_OK;
}

void ck_lock_release(ck_lock *l) {
    if (!l) return;
    /* removed only while it is still this run's file (a run started with
     * checkpoint.lock=break may have replaced it) */
    struct stat b;
    if (stat(l->path, &b) == 0 && b.st_dev == l->dev && b.st_ino == l->ino) {
        int ours = l->kernel;
        if (!ours) {
            char buf[sizeof l->me];
            ssize_t k = pread(l->fd, buf, sizeof buf - 1, 0);
            buf[k > 0 ? k : 0] = '\0';
            ours = !strcmp(buf, l->me);
        }
        if (ours) unlink(l->path);
    }
    close(l->fd);   /* (drops the lock) */
    free(l);
}

int zt_ckpt_lock_holder(const char *dir, char *out, size_t n) {
    char path[ZT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, CK_LOCK_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    ck_holder h;
    read_holder(fd, &h);
    /* is a lock held on it?  (a read-only descriptor may ask) */
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int held = -1;
#ifdef F_OFD_GETLK
    if (fcntl(fd, F_OFD_GETLK, &fl) == 0) held = fl.l_type != F_UNLCK;
    else
#endif
    if (fcntl(fd, F_GETLK, &fl) == 0) held = fl.l_type != F_UNLCK;
    close(fd);
    if (!h.valid && held != 1) return 0;
    describe(&h, out, n);
    return held == 1 ? 1 : held == 0 ? 2 : 3;
}
