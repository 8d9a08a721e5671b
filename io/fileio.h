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

/* Writers build PATH in PATH.tmp.<pid> and rename it at the end.  Remove
 * the PATH.tmp.<pid> files whose process is gone (a killed prep's), so
 * that they do not pile up; a live process's file is kept (pids are of
 * this host: on a file system shared by several hosts, run one prep of a
 * prefix at a time).  Returns how many were removed. */
int zt_io_clean_stale_tmp(const char *path);

#endif
