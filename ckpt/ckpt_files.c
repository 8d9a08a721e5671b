/*
 * ckpt_files.c -- a checkpoint directory's files: step names, paths,
 * durable writes (pwrite, fsync of files and directories), removal,
 * listing, quarantine and stale-entry cleanup.  The commit protocol that
 * uses them: ckpt_commit.c.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ckpt_internal.h"

int ck_parse_step(const char *name, long *step) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    if (!*p) return -1;
    long v = 0;
    for (; *p; ++p) {
        if (*p < '0' || *p > '9' || v > (LONG_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 0;
}

int ck_resolve(const char *path, char *file, size_t n) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (S_ISREG(sb.st_mode)) { snprintf(file, n, "%s", path); return 1; }
    if (!S_ISDIR(sb.st_mode)) return -1;
    snprintf(file, n, "%s/%s", path, ZT_CKPT_FILE);
    if (stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
    long step;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* a committed step directory without its file is a broken checkpoint */
    if (ck_parse_step(base, &step) == 0) return 1;
    return 0;
}

int ck_write_all(int fd, const void *buf, size_t n, uint64_t off) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) { errno = EIO; return -1; }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int ck_fsync_path(const char *path, int dir, zt_status *st) {
    int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_fail(st, ZT_EIO, "%s: cannot open for fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && !(dir && (e == EINVAL || e == EBADF)))  /* some file systems refuse dir fsync */
        return zt_fail(st, ZT_EIO, "%s: fsync failed: %s", path, strerror(e));
    return ZT_OK;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)ftw;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) != 0 && errno != ENOENT ? -1 : 0;
}

int ck_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return unlink(path);
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int ck_mkdir_p(const char *dir, zt_status *st) {
    char buf[ZT_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return zt_fail(st, ZT_EINVAL, "%s: path too long", dir);
    for (char *p = buf + 1; *p; ++p) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return zt_fail(st, ZT_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return zt_fail(st, ZT_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
    return ZT_OK;
}

static int cmp_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ck_scan_steps(const char *dir, long **steps, int *n, zt_status *st) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return ZT_OK;
        return zt_fail(st, ZT_EIO, "%s: cannot list checkpoint directory: %s", dir, strerror(errno));
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        if (ck_parse_step(e->d_name, &s) != 0) continue;
        char p[ZT_PATH_MAX + 300];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long *nl = realloc(*steps, (size_t)cap * sizeof *nl);
            if (!nl) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                *n = 0;
                return zt_fail(st, ZT_ENOMEM, "out of memory listing %s", dir);
            }
            *steps = nl;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n > 1) qsort(*steps, (size_t)*n, sizeof **steps, cmp_desc);
    return ZT_OK;
}

int ck_quarantine(const char *path, char *q, size_t n) {
    snprintf(q, n, "%s.corrupt-%ld", path, (long)time(NULL));
    if (rename(path, q) != 0) return -1;
    char dir[ZT_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    if (sl) *sl = '\0';
    zt_status tmp;
    ck_fsync_path(sl ? dir : ".", 1, &tmp);
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int ck_clean_stale(const char *dir, char *report, size_t n) {
    if (report && n) report[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    size_t used = 0;
    while ((e = readdir(d))) {
        int stale = (strncmp(e->d_name, "step-", 5) == 0 && ends_with(e->d_name, ".tmp")) ||
                    strcmp(e->d_name, ZT_CKPT_LATEST ".tmp") == 0;
        if (!stale) continue;
        char p[ZT_PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (ck_rmtree(p) == 0) {
            ++count;
            if (report && used + strlen(e->d_name) + 3 < n)
                used += (size_t)snprintf(report + used, n - used, "%s%s", used ? ", " : "", e->d_name);
        }
    }
    closedir(d);
    if (count) {
        zt_status tmp;
        ck_fsync_path(dir, 1, &tmp);
    }
    return count;
}
