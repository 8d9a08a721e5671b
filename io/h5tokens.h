/* h5tokens.h -- HDF5 token files (internal to io/; layout in tokens.h and
 * docs/data.md).  Every HDF5 call is serialized by one process-wide lock
 * (the library is not built thread-safe) and runs with HDF5's automatic
 * error printing switched off; errors come back as zt_status messages. */
#ifndef ZT_IO_H5TOKENS_H
#define ZT_IO_H5TOKENS_H
#include "tokens.h"

/* Open and validate; fills f (format, elsize, ntok, vocab_attr and either
 * fd/direct/data_off or the h5 handles). */
int zt_h5_open(const char *path, zt_token_file *f, zt_status *st);
/* Close the HDF5 handles of f, if any. */
void zt_h5_close(zt_token_file *f);
/* Read n tokens from element start through the HDF5 library (non-direct). */
int zt_h5_read(const zt_token_file *f, uint64_t start, size_t n, uint32_t *out, zt_status *st);

/* Writing: create a file with a contiguous 1-D /tokens of ntok elements
 * (uint16 / uint32 little-endian) and its attributes; write a run of tokens
 * at element `at`; close. */
int zt_h5_create(const char *path, int elsize, size_t ntok, int vocab, int64_t *file,
                 int64_t *dset, zt_status *st);
int zt_h5_write(int64_t dset, size_t at, const uint32_t *tok, size_t n, const char *path,
                zt_status *st);
int zt_h5_finish(int64_t *file, int64_t *dset, const char *path, zt_status *st);

#endif
