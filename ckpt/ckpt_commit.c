/*
 * ckpt_commit.c -- the commit of a written checkpoint (rank 0; the
 * synchronous save and the background save's last step call it):
 *
 *   fsync(state.h5), fsync(step-N.tmp)
 *   rename step-N.tmp -> step-N, fsync(dir)          <- the commit point
 *   latest.tmp = "step-N\n", fsync, rename -> latest, fsync(dir)
 *   prune: older than the newest `keep`, and any newer than N (an abandoned
 *          timeline), each renamed to step-K.del.tmp, fsync(dir), removed
 *
 * A failure before `latest` is replaced undoes the rename, so the previous
 * checkpoint stays `latest`; a failed prune is a warning.
 * docs/checkpoints.md "Commit protocol".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt_internal.h"

/* Write `latest` atomically: temp file, fsync, rename, fsync the directory. */
static int write_latest(const char *dir, long step, zt_status *st) {
    char tmp[ZT_PATH_MAX + 32], dst[ZT_PATH_MAX + 32], body[64];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, ZT_CKPT_LATEST);
    snprintf(dst, sizeof dst, "%s/%s", dir, ZT_CKPT_LATEST);
    int n = snprintf(body, sizeof body, "step-%ld\n", step);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    int ok = write(fd, body, (size_t)n) == n && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0) ok = 0;
    if (!ok) {
        unlink(tmp);
        return zt_fail(st, ZT_EIO, "%s: write failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, dst) != 0) {
        e = errno;
        unlink(tmp);
        return zt_fail(st, ZT_EIO, "%s: rename failed: %s", dst, strerror(e));
    }
    return ck_fsync_path(dir, 1, st);
}

/* Remove one committed checkpoint: rename it out of the committed namespace
 * first (one atomic step), then delete its files. */
static int remove_ckpt(const char *dir, long step, long saving, zt_status *st) {
    char from[ZT_PATH_MAX + 32], to[ZT_PATH_MAX + 48];
    snprintf(from, sizeof from, "%s/step-%ld", dir, step);
    snprintf(to, sizeof to, "%s/step-%ld.del.tmp", dir, step);
    ck_rmtree(to);
    if (rename(from, to) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot rename for removal: %s", from, strerror(errno));
    ZT_TRY(ck_fsync_path(dir, 1, st));
    ck_crash_point("during_prune", saving);
    if (ck_rmtree(to) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot remove: %s", to, strerror(errno));
    return ZT_OK;
}

static int prune(zt_ctx *ctx, const char *dir, long step, int keep, zt_status *st) {
    long *steps;
    int n;
    ZT_TRY(ck_scan_steps(dir, &steps, &n, st));
    int kept = 1, rc = ZT_OK;   /* the one just committed */
    char removed[512] = "";
    size_t used = 0;
    for (int i = 0; i < n && rc == ZT_OK; ++i) {
        long k = steps[i];
        if (k == step) continue;
        if (k < step && kept < keep) { ++kept; continue; }
        if (k > step) {
            /* an abandoned timeline: only a checkpoint that reads (its
             * file opens, its header and metadata checksums verify) may be
             * deleted; one that does not is quarantined.  (Not every
             * tensor: that would read the whole checkpoint inside a save.) */
            char path[ZT_PATH_MAX + 32], q[ZT_PATH_MAX + 64];
            zt_status vst;
            zt_ckpt_info vin;
            snprintf(path, sizeof path, "%s/step-%ld", dir, k);
            int readable = zt_ckpt_read_info(path, &vin, &vst) == ZT_OK;
            if (readable) zt_ckpt_info_free(&vin);
            if (!readable) {
                if (ck_quarantine(path, q, sizeof q) == 0)
                    zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s is newer than step %ld (an abandoned "
                           "run) but does not verify (%s): moved to %s instead of pruning it",
                           path, step, vst.msg, q);
                else
                    zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s is newer than step %ld but does not "
                           "verify (%s) and cannot be moved aside: %s; left in place", path, step,
                           vst.msg, strerror(errno));
                continue;
            }
        }
        rc = remove_ckpt(dir, k, step, st);
        if (rc == ZT_OK && used + 32 < sizeof removed)
            used += (size_t)snprintf(removed + used, sizeof removed - used, "%sstep-%ld%s",
                                     used ? ", " : "", k, k > step ? " (newer: abandoned run)" : "");
    }
    free(steps);
    if (removed[0])
        zt_log(ctx, ZT_LOG_INFO, "checkpoint: pruned %s (keeping %d)", removed, keep);
    return rc;
}

/* Undo a rename of tmpd to final whose commit could not be completed:
 * final goes back to tmpd (removed by the caller), old (when the same step
 * existed before) back to final. */
static void uncommit(zt_ctx *ctx, const char *dir, const char *tmpd, const char *final,
                     const char *old) {
    zt_status tmp;
    if (rename(final, tmpd) != 0)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: %s: cannot undo the commit (%s): it stays, "
               "complete but not `latest`", final, strerror(errno));
    else if (old && rename(old, final) != 0)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: cannot move %s back to %s: %s", old, final,
               strerror(errno));
    ck_fsync_path(dir, 1, &tmp);
}

int ck_commit(zt_ctx *ctx, const char *dir, long step, int keep, const char *tmpd,
              const char *final, const char *file, zt_status *st) {
    ZT_TRY(ck_fsync_path(file, 0, st));
    ZT_TRY(ck_fsync_path(tmpd, 1, st));
    ck_crash_point("before_rename", step);
    struct stat sb;
    char old[ZT_PATH_MAX + 48];
    int replacing = stat(final, &sb) == 0;
    if (replacing) {
        /* the same step saved before (e.g. by an earlier run): replace it */
        snprintf(old, sizeof old, "%s.replaced.tmp", final);
        ck_rmtree(old);
        if (rename(final, old) != 0)
            return zt_fail(st, ZT_EIO, "%s: cannot move the old checkpoint aside: %s", final,
                           strerror(errno));
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: replacing an existing %s", final);
    }
    if (rename(tmpd, final) != 0) {
        int e = errno;
        if (replacing && rename(old, final) != 0)
            zt_log(ctx, ZT_LOG_WARN, "checkpoint: cannot move %s back to %s: %s", old, final,
                   strerror(errno));
        return zt_fail(st, ZT_EIO, "%s: rename to %s failed: %s", tmpd, final, strerror(e));
    }
    int rc = ck_fsync_path(dir, 1, st);
    if (rc == ZT_OK) ck_crash_point("after_rename_before_latest", step);
    if (rc == ZT_OK) rc = write_latest(dir, step, st);
    if (rc != ZT_OK) {
        /* not durable or not `latest`: abandon it, the previous stays */
        uncommit(ctx, dir, tmpd, final, replacing ? old : NULL);
        return rc;
    }
    if (replacing) ck_rmtree(old);
    /* committed and `latest`: a failed prune leaves old checkpoints behind,
     * nothing is lost; a warning, not a failed save */
    zt_status pst;
    if (prune(ctx, dir, step, keep, &pst) != ZT_OK)
        zt_log(ctx, ZT_LOG_WARN, "checkpoint: step %ld saved, but pruning older checkpoints "
               "failed: %s", step, pst.msg);
    return ZT_OK;
}
