/*
 * faultshim.c -- LD_PRELOAD fault injection for the checkpoint tests
 * (tests/ckpt_faults.sh).  Inert unless ZT_FAULT_PATH is set and the process
 * is an MPI rank (OMPI_COMM_WORLD_RANK / PMI_RANK set), so that mpirun and
 * the shell wrappers around ztrain are never affected.
 *
 *   ZT_FAULT_PATH   comma-separated substrings: a call matches when its path
 *                   (open, access, rename: either name) or the path its file
 *                   descriptor was opened with (write, pwrite, read, fsync,
 *                   ...) contains one of them
 *   ZT_FAULT_OPS    comma-separated operations to count and fail: open,
 *                   access, write, read, fsync, rename, lock ("write" covers
 *                   write/pwrite/pwritev, "read" read/pread/preadv, "fsync"
 *                   fsync/fdatasync, "lock" fcntl F_SETLK/F_SETLKW/
 *                   F_OFD_SETLK/F_OFD_SETLKW and flock)
 *   ZT_FAULT_AT     K >= 1: only the K-th matching call (counted over all of
 *                   ZT_FAULT_OPS, per process) fails; K+ (e.g. 5+): the K-th
 *                   and every later one (a disk that stays full); 0: every
 *                   one fails; unset: none fails (counting only)
 *   ZT_FAULT_ERRNO  ENOSPC | EIO | EACCES | EROFS | ENOLCK | ENOSYS (default EIO)
 *   ZT_FAULT_RANK   only this rank (unset: every rank)
 *   ZT_FAULT_LOG    append "rank op index path ok|FAILED [bytes offset]" per
 *                   matching call (bytes and offset for writes)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXFD 4096

static int inited, active, at = -1, from, err = EIO, rank = -1;
static char paths[512], ops[128];
static long count;
static unsigned char fdmatch[MAXFD];

static void init(void) {
    if (inited) return;
    inited = 1;
    const char *p = getenv("ZT_FAULT_PATH"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!p || !*p || !r) return;
    rank = atoi(r);
    const char *want = getenv("ZT_FAULT_RANK");
    if (want && *want && atoi(want) != rank) return;
    snprintf(paths, sizeof paths, "%s", p);
    const char *o = getenv("ZT_FAULT_OPS");
    snprintf(ops, sizeof ops, ",%s,", o ? o : "");
    const char *a = getenv("ZT_FAULT_AT");
    if (a && *a) {
        at = atoi(a);
        from = a[strlen(a) - 1] == '+';
    }
    const char *e = getenv("ZT_FAULT_ERRNO");
    if (e && !strcmp(e, "ENOSPC")) err = ENOSPC;
    else if (e && !strcmp(e, "EACCES")) err = EACCES;
    else if (e && !strcmp(e, "EROFS")) err = EROFS;
    else if (e && !strcmp(e, "ENOLCK")) err = ENOLCK;
    else if (e && !strcmp(e, "ENOSYS")) err = ENOSYS;
    active = 1;
}

static int path_matches(const char *path) {
    if (!path) return 0;
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", paths);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t && strstr(path, t)) return 1;
    return 0;
}

/* 1 when this call must fail (errno set); n, off >= 0: a write's bytes and
 * file offset (logged). */
static int fault_io(const char *op, const char *path, long long n, long long off) {
    init();
    if (!active) return 0;
    char key[32];
    snprintf(key, sizeof key, ",%s,", op);
    if (!strstr(ops, key)) return 0;
    long k = ++count;
    int fail = at == 0 || at == k || (from && at > 0 && k >= at);
    const char *log = getenv("ZT_FAULT_LOG");
    if (log && *log) {
        FILE *f = fopen(log, "a");
        if (f) {
            if (n >= 0)
                fprintf(f, "%d %s %ld %s %s %lld %lld\n", rank, op, k, path ? path : "?",
                        fail ? "FAILED" : "ok", n, off);
            else
                fprintf(f, "%d %s %ld %s %s\n", rank, op, k, path ? path : "?", fail ? "FAILED" : "ok");
            fclose(f);
        }
    }
    if (fail) errno = err;
    return fail;
}

static int fault(const char *op, const char *path) { return fault_io(op, path, -1, -1); }

static int fd_matches(int fd) { return fd >= 0 && fd < MAXFD && fdmatch[fd]; }

#define REAL(T, name, args) \
    static T(*real_##name) args; \
    if (!real_##name) real_##name = (T(*) args)dlsym(RTLD_NEXT, #name)

static void note_fd(int fd, const char *path) {
    init();
    if (fd >= 0 && fd < MAXFD) fdmatch[fd] = active && path_matches(path);
}

static int do_open(const char *name, int dirfd, const char *path, int flags, mode_t mode) {
    init();
    if (active && path_matches(path) && fault("open", path)) return -1;
    int fd;
    if (!strcmp(name, "openat")) {
        REAL(int, openat, (int, const char *, int, ...));
        fd = real_openat(dirfd, path, flags, mode);
    } else if (!strcmp(name, "open64")) {
        REAL(int, open64, (const char *, int, ...));
        fd = real_open64(path, flags, mode);
    } else {
        REAL(int, open, (const char *, int, ...));
        fd = real_open(path, flags, mode);
    }
    note_fd(fd, path);
    return fd;
}

#define MODE_ARG(flags, mode)                          \
    mode_t mode = 0;                                   \
    if ((flags) & (O_CREAT | O_TMPFILE)) {             \
        va_list ap;                                    \
        va_start(ap, flags);                           \
        mode = (mode_t)va_arg(ap, int);                \
        va_end(ap);                                    \
    }

int open(const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    return do_open("open", 0, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    return do_open("open64", 0, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    return do_open("openat", dirfd, path, flags, mode);
}

int access(const char *path, int amode) {
    init();
    if (active && path_matches(path) && fault("access", path)) return -1;
    REAL(int, access, (const char *, int));
    return real_access(path, amode);
}

int rename(const char *a, const char *b) {
    init();
    if (active && (path_matches(a) || path_matches(b)) && fault("rename", a)) return -1;
    REAL(int, rename, (const char *, const char *));
    return real_rename(a, b);
}

int close(int fd) {
    if (fd >= 0 && fd < MAXFD) fdmatch[fd] = 0;
    REAL(int, close, (int));
    return real_close(fd);
}

/* newfd now refers to oldfd's file */
int dup2(int oldfd, int newfd) {
    REAL(int, dup2, (int, int));
    int r = real_dup2(oldfd, newfd);
    if (r >= 0 && r < MAXFD) fdmatch[r] = fd_matches(oldfd);
    return r;
}
int dup3(int oldfd, int newfd, int flags) {
    REAL(int, dup3, (int, int, int));
    int r = real_dup3(oldfd, newfd, flags);
    if (r >= 0 && r < MAXFD) fdmatch[r] = fd_matches(oldfd);
    return r;
}

#define FD_FAULT(op, fd) (fd_matches(fd) && fault(op, "(fd)"))
#define WR_FAULT(fd, n, off) (fd_matches(fd) && fault_io("write", "(fd)", (long long)(n), (long long)(off)))

static size_t iov_bytes(const struct iovec *v, int n) {
    size_t t = 0;
    for (int i = 0; i < n; ++i) t += v[i].iov_len;
    return t;
}

ssize_t write(int fd, const void *b, size_t n) {
    if (WR_FAULT(fd, n, lseek(fd, 0, SEEK_CUR))) return -1;
    REAL(ssize_t, write, (int, const void *, size_t));
    return real_write(fd, b, n);
}
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) {
    if (WR_FAULT(fd, n, o)) return -1;
    REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
    return real_pwrite(fd, b, n, o);
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) {
    if (WR_FAULT(fd, n, o)) return -1;
    REAL(ssize_t, pwrite64, (int, const void *, size_t, off_t));
    return real_pwrite64(fd, b, n, o);
}
ssize_t pwritev(int fd, const struct iovec *v, int n, off_t o) {
    if (WR_FAULT(fd, iov_bytes(v, n), o)) return -1;
    REAL(ssize_t, pwritev, (int, const struct iovec *, int, off_t));
    return real_pwritev(fd, v, n, o);
}
ssize_t writev(int fd, const struct iovec *v, int n) {
    if (WR_FAULT(fd, iov_bytes(v, n), lseek(fd, 0, SEEK_CUR))) return -1;
    REAL(ssize_t, writev, (int, const struct iovec *, int));
    return real_writev(fd, v, n);
}
ssize_t read(int fd, void *b, size_t n) {
    if (FD_FAULT("read", fd)) return -1;
    REAL(ssize_t, read, (int, void *, size_t));
    return real_read(fd, b, n);
}
ssize_t pread(int fd, void *b, size_t n, off_t o) {
    if (FD_FAULT("read", fd)) return -1;
    REAL(ssize_t, pread, (int, void *, size_t, off_t));
    return real_pread(fd, b, n, o);
}
ssize_t pread64(int fd, void *b, size_t n, off_t o) {
    if (FD_FAULT("read", fd)) return -1;
    REAL(ssize_t, pread64, (int, void *, size_t, off_t));
    return real_pread64(fd, b, n, o);
}
ssize_t preadv(int fd, const struct iovec *v, int n, off_t o) {
    if (FD_FAULT("read", fd)) return -1;
    REAL(ssize_t, preadv, (int, const struct iovec *, int, off_t));
    return real_preadv(fd, v, n, o);
}
int fsync(int fd) {
    if (FD_FAULT("fsync", fd)) return -1;
    REAL(int, fsync, (int));
    return real_fsync(fd);
}
int fdatasync(int fd) {
    if (FD_FAULT("fsync", fd)) return -1;
    REAL(int, fdatasync, (int));
    return real_fdatasync(fd);
}

/* locks: fcntl's lock commands and flock */
static int lock_cmd(int cmd) {
    return cmd == F_SETLK || cmd == F_SETLKW
#ifdef F_OFD_SETLK
           || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW
#endif
        ;
}
static int do_fcntl(const char *name, int fd, int cmd, void *arg) {
    if (lock_cmd(cmd) && FD_FAULT("lock", fd)) return -1;
    if (!strcmp(name, "fcntl64")) {
        REAL(int, fcntl64, (int, int, ...));
        return real_fcntl64(fd, cmd, arg);
    }
    REAL(int, fcntl, (int, int, ...));
    return real_fcntl(fd, cmd, arg);
}
/* (every fcntl command's argument is an int or a pointer: passed on as one
 * machine word, as glibc's own fcntl does) */
int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return do_fcntl("fcntl", fd, cmd, arg);
}
int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return do_fcntl("fcntl64", fd, cmd, arg);
}
int flock(int fd, int op) {
    if (FD_FAULT("lock", fd)) return -1;
    REAL(int, flock, (int, int));
    return real_flock(fd, op);
}
