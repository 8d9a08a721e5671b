/*
 * ckpt_space.c -- free space for a checkpoint, checked before it is written.
 *
 * Every save first compares the free space of the checkpoint directory's
 * file system (statvfs, on every rank, agreed) with the size the checkpoint
 * will take, and fails before creating its file when it does not fit; a
 * disk that fills later is a write error of the phase it happens in
 * (docs/checkpoints.md, "Failure model"), explained with the free space.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include "ckpt_internal.h"

uint64_t ck_save_bytes(const zt_model *m, size_t json_len) {
    /* the tensors: params, m, v in fp32; the metadata: object headers,
     * attributes and B-tree/heap entries of every dataset (about 0.8 KiB
     * each as written, 2 KiB allowed), /config and /meta_checksums, and the
     * superblock and root group (64 KiB allowed).  Alignment gaps are
     * never written (H5D_FILL_TIME_NEVER): holes, no disk blocks. */
    uint64_t data = (uint64_t)m->num_params * CK_NFAM * sizeof(float);
    uint64_t meta = ((uint64_t)64 << 10) + (uint64_t)m->n_tensors * CK_NFAM * 2048 +
                    2 * (uint64_t)json_len;
    return data + meta;
}

/* The mount point of the file system holding path (the last ancestor on
 * the same device): "?" when it cannot be found. */
static void mount_point(const char *path, char *out, size_t n) {
    char buf[PATH_MAX];
    struct stat sb, pb;
    if (!realpath(path, buf) || stat(buf, &sb) != 0) { snprintf(out, n, "?"); return; }
    for (;;) {
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) {
            if (slash && stat("/", &pb) == 0 && pb.st_dev == sb.st_dev) snprintf(buf, sizeof buf, "/");
            break;
        }
        *slash = '\0';
        if (stat(buf, &pb) != 0 || pb.st_dev != sb.st_dev) { *slash = '/'; break; }
    }
    snprintf(out, n, "%s", buf);
}

static void human(char *out, size_t n, uint64_t b) {
    if (b >= (uint64_t)1 << 30) snprintf(out, n, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= (uint64_t)1 << 20) snprintf(out, n, "%.2f MiB", (double)b / 1048576.0);
    else snprintf(out, n, "%.1f KiB", (double)b / 1024.0);
}

static uint64_t free_bytes(const struct statvfs *v) {
    return (uint64_t)v->f_bavail * (uint64_t)(v->f_frsize ? v->f_frsize : v->f_bsize);
}

void ck_space_explain(const char *dir, uint64_t need, zt_status *st) {
    struct statvfs v;
    if (!st || statvfs(dir, &v) != 0 || free_bytes(&v) >= need) return;
    char mp[PATH_MAX], a[32], b[32];
    mount_point(dir, mp, sizeof mp);
    human(a, sizeof a, need);
    human(b, sizeof b, free_bytes(&v));
    size_t n = strlen(st->msg);
    snprintf(st->msg + n, sizeof st->msg - n, " (disk full? the file system of %s, mounted at "
             "%s, has %llu bytes free (%s); the checkpoint needs %llu bytes (%s))", dir, mp,
             (unsigned long long)free_bytes(&v), b, (unsigned long long)need, a);
}

int ck_space_check(const char *dir, uint64_t need, long step, zt_status *st) {
    struct statvfs v;
    if (statvfs(dir, &v) != 0)
        return zt_fail(st, ZT_EIO, "checkpoint: %s: cannot read its file system's free space "
                       "(statvfs: %s)", dir, strerror(errno));
    uint64_t avail = free_bytes(&v);
    if (avail >= need) return ZT_OK;
    char mp[PATH_MAX], a[32], b[32];
    mount_point(dir, mp, sizeof mp);
    human(a, sizeof a, need);
    human(b, sizeof b, avail);
    return zt_fail(st, ZT_EIO, "checkpoint: no space for step %ld in %s: the file system mounted "
                   "at %s has %llu bytes free (%s), the checkpoint needs %llu bytes (%s); nothing "
                   "was written", step, dir, mp, (unsigned long long)avail, b,
                   (unsigned long long)need, a);
}

/* At start-up, before step 1 (rank 0): a warning when the checkpoint
 * directory's file system cannot hold even the next checkpoint of this run,
 * which would otherwise fail only at its save -- for the final save, after
 * the whole run (a 3B model's 36 GiB checkpoint next to the one it resumed
 * from, on a 64 GiB disk).  A warning, not a refusal: space can be freed
 * while the run trains, and each save checks again. */
void ck_space_preflight(zt_ctx *ctx, const char *dir) {
    const zt_model *m = zt_ctx_lora_model(ctx) ? zt_ctx_lora_model(ctx) : zt_ctx_model(ctx);
    struct statvfs v;
    if (!m || zt_ctx_rank(ctx) != 0 || statvfs(dir, &v) != 0) return;
    uint64_t need = ck_save_bytes(m, 0), avail = free_bytes(&v);
    if (avail >= need) return;
    char mp[PATH_MAX], a[32], b[32];
    mount_point(dir, mp, sizeof mp);
    human(a, sizeof a, need);
    human(b, sizeof b, avail);
    zt_log(ctx, ZT_LOG_WARN, "checkpoint: no space for the next checkpoint in %s: the file system "
           "mounted at %s has %llu bytes free (%s), a checkpoint of this run needs %llu bytes (%s); "
           "its save will fail unless space is freed (checked at start, before step 1)", dir, mp,
           (unsigned long long)avail, b, (unsigned long long)need, a);
}
