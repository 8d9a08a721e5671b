/* fileio.c -- the file primitives io/'s readers and writers share
 * (fileio.h): full preads, the commit steps of the atomic writers, and the
 * clean-up of killed writers' temporary files. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "fileio.h"
#include "internal.h"

int zt_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, zt_status *st) {
    char *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return zt_fail(st, ZT_EIO, "%s: read error at byte offset %llu: %s", path,
                           (unsigned long long)off, strerror(errno));
        }
        if (got == 0)
            return zt_fail(st, ZT_EDATA, "%s: truncated: end of file at byte offset %llu "
                           "(did the file change after it was opened?)", path, (unsigned long long)off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return ZT_OK;
}

int zt_io_close_synced(FILE **fp, const char *tmp, zt_status *st) {
    int ok = fflush(*fp) == 0 && fsync(fileno(*fp)) == 0;
    int e = errno;
    if (fclose(*fp) != 0 && ok) { ok = 0; e = errno; }
    *fp = NULL;
    return ok ? ZT_OK : zt_fail(st, ZT_EIO, "%s: write failed: %s", tmp, strerror(e));
}

int zt_io_rename(const char *tmp, const char *path, zt_status *st) {
    if (rename(tmp, path) != 0)
        return zt_fail(st, ZT_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    return ZT_OK;
}

int zt_io_writer_names(const char *path, char *out, size_t nout, char *tmp, size_t ntmp, zt_status *st) {
    if (strlen(path) >= nout) return zt_fail(st, ZT_EINVAL, "%.200s...: path too long", path);
    snprintf(out, nout, "%s", path);
    snprintf(tmp, ntmp, "%s.tmp.%d", path, (int)getpid());
    zt_io_clean_stale_tmp(path);   /* a killed run's */
    return ZT_OK;
}

int zt_io_clean_stale_tmp(const char *path) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *sl = strrchr(dir, '/');
    const char *base = sl ? sl + 1 : path;
    if (sl == dir) snprintf(dir, sizeof dir, "/");
    else if (sl) *sl = '\0';
    else snprintf(dir, sizeof dir, ".");
    size_t bn = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, base, bn) || strncmp(n + bn, ".tmp.", 5)) continue;
        char *end;
        long pid = strtol(n + bn + 5, &end, 10);
        if (*end || end == n + bn + 5 || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* alive (or not ours to judge) */
        char p[2300];
        snprintf(p, sizeof p, "%s/%s", dir, n);
        if (unlink(p) == 0) removed++;
    }
    closedir(d);
    return removed;
}

/* ---------------------------------------------------------------- JSON Lines */

void zt_lines_init(zt_lines *r, FILE *fp, const char *path, size_t max) {
    memset(r, 0, sizeof *r);
    r->fp = fp;
    r->path = path;
    r->max = max ? max : ZT_MAX_LINE_BYTES_DEFAULT;
}

int zt_lines_next(zt_lines *r, size_t *len, zt_status *st) {
    size_t n = 0;
    int c = 0;
    *len = 0;
    while ((c = getc_unlocked(r->fp)) != EOF) {
        if (n + 2 > r->cap) {   /* room for c and the NUL */
            size_t cap = r->cap ? 2 * r->cap : 4096;
            if (cap > r->max + 2) cap = r->max + 2;
            if (cap < n + 2) cap = n + 2;
            char *b = realloc(r->buf, cap);
            if (!b) return zt_fail(st, ZT_ENOMEM, "%s: out of memory for a line of %zu bytes", r->path, n + 1);
            r->buf = b;
            r->cap = cap;
        }
        r->buf[n++] = (char)c;
        if (c == '\n') break;
        if (n > r->max) {
            r->bytes += n;
            return zt_fail(st, ZT_EDATA, "%s:%llu: the line is longer than %zu bytes (the limit of a JSON Lines "
                           "record; --max-line-bytes N raises it)", r->path,
                           (unsigned long long)(r->lineno + 1), r->max);
        }
    }
    if (c == EOF && ferror(r->fp)) return zt_fail(st, ZT_EIO, "%s: read error: %s", r->path, strerror(errno));
    if (n == 0) return ZT_OK;
    r->buf[n] = '\0';
    r->lineno++;
    r->bytes += n;
    *len = n;
    return ZT_OK;
}

void zt_lines_free(zt_lines *r) {
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}
