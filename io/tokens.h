/*
 * tokens.h -- llm.c-compatible token shards.
 *
 * Layout (little-endian): a 1024-byte header of 256 int32 --
 *   [0] = 20240520 (magic), [1] = 1 (version), [2] = number of tokens,
 *   [3..255] = 0 --
 * followed by the tokens as uint16.  The file size must be exactly
 * 1024 + 2 * ntokens.  Any vocabulary up to 65,536 fits.
 */
#ifndef ZT_IO_TOKENS_H
#define ZT_IO_TOKENS_H
#include <stddef.h>
#include <stdint.h>
#include "ztrain.h"

#define ZT_SHARD_MAGIC 20240520
#define ZT_SHARD_VERSION 1
#define ZT_SHARD_HEADER_INTS 256
#define ZT_SHARD_HEADER_BYTES (ZT_SHARD_HEADER_INTS * 4)

typedef struct zt_token_file {
    char path[1024];
    const uint16_t *tokens;   /* mapped, read-only */
    size_t ntok;
    void *map;
    size_t map_len;
} zt_token_file;

/* Open and validate a shard: header, size, and (when vocab > 0) every token
 * below vocab.  Errors name the file and the byte offset. */
int zt_tokens_open(const char *path, int vocab, zt_token_file **out, zt_status *st);
void zt_tokens_close(zt_token_file *f);
/* Write a shard atomically (temp file + fsync + rename). */
int zt_tokens_write(const char *path, const uint16_t *tok, size_t n, zt_status *st);

/* Byte-level tokenization of a text file into <prefix>_train.bin and
 * <prefix>_val.bin (the last val_fraction of the bytes).  Outputs are
 * written only when the whole input has been read successfully. */
int zt_prep_text(const char *input, const char *prefix, double val_fraction,
                 size_t *ntrain, size_t *nval, zt_status *st);

/* A data source sampling random windows of T+1 tokens from a shard, a pure
 * function of (seed, step, global sample index). */
int zt_data_source_tokens(const char *path, int vocab, int T, uint64_t seed,
                          zt_data_source *out, zt_status *st);

#endif
