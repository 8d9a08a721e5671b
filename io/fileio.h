/* fileio.h -- the file primitives io/'s readers and writers share: one
 * place for each, below tokens.c, h5tokens.c and sftfile.c (which never
 * call each other for them). */
#ifndef ZT_IO_FILEIO_H
#define ZT_IO_FILEIO_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ztrain.h"

/* pread exactly n bytes at off (EINTR retried); a short file is ZT_EDATA
 * naming the path and offset. */
int zt_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, zt_status *st);

/* The commit steps every atomic writer of io/ shares (write PATH.tmp, then
 * rename): flush, fsync and close *fp (set to NULL), ZT_EIO naming tmp; and
 * rename tmp to path, ZT_EIO naming path. */
int zt_io_close_synced(FILE **fp, const char *tmp, zt_status *st);
int zt_io_rename(const char *tmp, const char *path, zt_status *st);

/* The set-up every atomic writer of io/ shares: PATH into out (ZT_EINVAL
 * "PATH...: path too long" when it does not fit nout bytes), PATH.tmp.<pid>,
 * the file it is written as until the rename, into tmp, and the killed
 * runs' PATH.tmp.* removed (zt_io_clean_stale_tmp). */
int zt_io_writer_names(const char *path, char *out, size_t nout, char *tmp, size_t ntmp, zt_status *st);

/* Writers build PATH in PATH.tmp.<pid> and rename it at the end.  Remove
 * the PATH.tmp.<pid> files whose process is gone (a killed prep's), so
 * that they do not pile up; a live process's file is kept (pids are of
 * this host: on a file system shared by several hosts, run one prep of a
 * prefix at a time).  Returns how many were removed. */
int zt_io_clean_stale_tmp(const char *path);

/* JSON Lines, one bounded line at a time (prep, prep --sft).  The default
 * bound of one line: 64 MiB; a longer line is refused after reading max + 1
 * of its bytes, never held whole. */
#define ZT_MAX_LINE_BYTES_DEFAULT ((size_t)64 << 20)
typedef struct zt_lines {
    FILE *fp;
    const char *path;
    size_t max;               /* bytes of a line, its newline not counted */
    char *buf;                /* the current line, NUL-terminated (its newline kept) */
    size_t cap;
    uint64_t lineno;          /* of the current line, 1-based */
    uint64_t bytes;           /* bytes read so far, newlines included */
} zt_lines;
/* Start reading fp (the caller's, left open; r->buf freed by
 * zt_lines_free); max 0: ZT_MAX_LINE_BYTES_DEFAULT. */
void zt_lines_init(zt_lines *r, FILE *fp, const char *path, size_t max);
/* The next line into r->buf (*len bytes, with its newline if any): ZT_OK
 * with *len 0 at the end of the file; ZT_EDATA "PATH:LINE: the line is
 * longer than MAX bytes (the limit of a JSON Lines record; --max-line-bytes
 * raises it)"; ZT_EIO on a read error; ZT_ENOMEM. */
int zt_lines_next(zt_lines *r, size_t *len, zt_status *st);
void zt_lines_free(zt_lines *r);

#endif
