/*
 * safetensors.h -- read and write safetensors files (Hugging Face's tensor
 * container) without any Python.
 *
 * Layout: u64 little-endian N, then N bytes of JSON header
 *   {name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {string: string}}
 * (offsets relative to the first byte after the header; the header may be
 * padded with spaces), then the raw row-major little-endian data.
 *
 * The reader validates the whole header when it opens a file: N against the
 * file size, every tensor's offsets inside the data region with begin <= end
 * and end - begin == product(shape) * dtype size, and no two tensors
 * overlapping.  It recognises every dtype the format defines (so it can
 * validate any file) but converts only F32, BF16 and F16 to fp32; reading a
 * tensor of another dtype is refused naming the file, tensor and dtype.
 * Reads use pread on a range of elements: the caller bounds the memory.
 *
 * The writer takes the table of tensors up front (names, shapes, in data
 * order), writes the header padded with spaces to a multiple of 8 bytes,
 * then the values (converted from fp32 to F32 or BF16) in order, into
 * PATH.tmp, which is flushed, synced and renamed to PATH at the end.
 * Not part of the public API (not installed).
 */
#ifndef ZT_SAFETENSORS_H
#define ZT_SAFETENSORS_H
#include <stdint.h>
#include <stdio.h>
#include "internal.h"

enum { ZT_ST_F32 = 0, ZT_ST_BF16 = 1, ZT_ST_F16 = 2, ZT_ST_OTHER = 3 };
#define ZT_ST_MAX_DIMS 8
/* Largest header accepted (the reference implementation's limit). */
#define ZT_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct zt_st_tensor {
    char *name;
    char dtype_name[16];     /* as in the file: "F32", "BF16", "I64", ... */
    int dtype;               /* ZT_ST_F32 | BF16 | F16 | ZT_ST_OTHER */
    int esize;               /* bytes per element */
    int ndim;
    uint64_t shape[ZT_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;     /* absolute byte offsets of the data in the file */
} zt_st_tensor;

typedef struct zt_st_file {
    char path[1200];
    int fd;
    uint64_t file_size, data_start;
    int n;                   /* tensors (without __metadata__), sorted by name */
    zt_st_tensor *t;
} zt_st_file;

/* Open and validate; on failure nothing stays open (ZT_EIO: cannot open or
 * read; ZT_EDATA: malformed). */
int zt_st_open(const char *path, zt_st_file *f, zt_status *st);
void zt_st_close(zt_st_file *f);
/* The tensor called name, or NULL. */
const zt_st_tensor *zt_st_find(const zt_st_file *f, const char *name);
/* ZT_OK if t's dtype converts to fp32, else ZT_EUNSUPPORTED naming file,
 * tensor and dtype. */
int zt_st_check_float(const zt_st_file *f, const zt_st_tensor *t, zt_status *st);
/* Elements [first, first + n) of t (row-major) as fp32 into out[n]; a NaN or
 * Inf among them is ZT_EDATA naming the element (in the file's order). */
int zt_st_read(const zt_st_file *f, const zt_st_tensor *t, uint64_t first, uint64_t n,
               float *out, zt_status *st);
/* Shape as text, "[3, 4]". */
void zt_st_shape_str(int ndim, const uint64_t *shape, char *buf, size_t n);

/* ---------------------------------------------------------------- writer */

typedef struct zt_st_spec {
    const char *name;
    int ndim;
    uint64_t shape[2];
} zt_st_spec;

typedef struct zt_st_writer {
    FILE *fp;
    char path[1200], tmp[1216];
    int dtype;               /* ZT_ST_F32 or ZT_ST_BF16 */
    uint64_t expect, written;  /* data bytes */
} zt_st_writer;

/* Bytes of data a file of these tensors holds in dtype. */
uint64_t zt_st_data_bytes(const zt_st_spec *specs, int n, int dtype);
/* Create path.tmp and write the header.  metadata: string pairs
 * (meta[2i], meta[2i+1]), nmeta pairs (may be 0). */
int zt_st_write_begin(zt_st_writer *w, const char *path, const zt_st_spec *specs, int n,
                      int dtype, const char *const *meta, int nmeta, zt_status *st);
/* Append n values (converted to the file's dtype). */
int zt_st_write_values(zt_st_writer *w, const float *x, uint64_t n, zt_status *st);
/* Check that every byte was written, flush, fsync, close, rename. */
int zt_st_write_end(zt_st_writer *w, zt_status *st);
/* Close and remove path.tmp (after a failure; idempotent). */
void zt_st_write_abort(zt_st_writer *w);

#endif
