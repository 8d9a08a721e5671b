/*
 * tokens.h -- token files: llm.c-compatible shards and HDF5 token datasets.
 *
 * llm.c shard (".bin", anything that is not HDF5), little-endian, in one of llm.c's two layouts:
 *   a 1024-byte header of 256 int32 --
 *     [0] = magic, [1] = version, [2] = number of tokens, [3..255] = 0 --
 *   followed by the tokens:
 *     GPT-2 layout:   magic 20240520, version 1, tokens uint16 (any vocabulary up to 65,536);
 *     Llama-3 layout: magic 20240801, version 7, tokens uint32 (larger vocabularies).
 *   The file size must be exactly 1024 + 2 * ntokens (resp. 4 * ntokens).
 *
 * HDF5 token file (".h5" / ".hdf5", or any file with the HDF5 signature):
 *   dataset "/tokens": 1-D, unsigned 16- or 32-bit integers (uint32 for
 *   vocabularies above 65,536); attributes on /tokens, all optional when
 *   reading, always written by ztrain: "format" = "ztrain-tokens" (string),
 *   "version" = 1 (int), "vocab_size" (int).  ztrain writes contiguous,
 *   unfiltered, little-endian datasets and reads them with pread at the
 *   dataset's file offset; chunked or compressed datasets (e.g. from h5py
 *   with compression) are read through the HDF5 library instead (serialized).
 *
 * Files are never mapped or read whole: tokens are read with pread into
 * caller buffers.  docs/data.md documents both layouts.
 */
#ifndef ZT_IO_TOKENS_H
#define ZT_IO_TOKENS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "fileio.h"
#include "ztrain.h"

#define ZT_SHARD_MAGIC 20240520
#define ZT_SHARD_VERSION 1
#define ZT_SHARD32_MAGIC 20240801   /* llm.c's Llama-3 shards: uint32 tokens */
#define ZT_SHARD32_VERSION 7
#define ZT_SHARD_HEADER_INTS 256
#define ZT_SHARD_HEADER_BYTES (ZT_SHARD_HEADER_INTS * 4)

#define ZT_H5_FORMAT "ztrain-tokens"
#define ZT_H5_VERSION 1
#define ZT_H5_DATASET "tokens"

enum { ZT_FMT_BIN = 0, ZT_FMT_H5 = 1, ZT_FMT_SFT = 2 /* sft.h: windows with loss masks */ };

typedef struct zt_token_file {
    char path[1024];
    int format;          /* ZT_FMT_BIN | ZT_FMT_H5 */
    int elsize;          /* bytes per token in the file: 2 or 4 */
    size_t ntok;
    int vocab_attr;      /* HDF5 "vocab_size" attribute, 0 if absent / bin */
    /* internal */
    int fd;              /* pread from here when direct */
    int direct;          /* tokens are contiguous little-endian at data_off */
    uint64_t data_off;   /* byte offset of token 0 in the file */
    int64_t h5file, h5dset; /* HDF5 handles when not direct (else -1) */
    int window;          /* SFT files: tokens per window record (0 otherwise) */
    uint64_t rec_bytes;  /* SFT files: bytes per window record */
    /* descriptors: see zt_tokens_acquire (guarded by a process-wide lock) */
    uint64_t fsize;      /* the file's size when opened (a reopened file must still have it) */
    int refs, parked, listed;
    struct zt_token_file *lru_prev, *lru_next;
} zt_token_file;
/* Open path read-only if it is a regular file: a FIFO, device or directory is refused naming the path (the
 * open never blocks).  Returns the descriptor, or -1 with st set (ZT_EIO). */
int zt_open_regular(const char *path, const char *what, zt_status *st);
/* Open token files hold a descriptor only while they are among the most recently used (at most
 * zt_tokens_open_max() in the process); the others are closed and reopened on their next read, so a glob of
 * thousands of shards never runs out of descriptors.  zt_tokens_read does this itself; a caller reading
 * f->fd directly (sft.h window reads) brackets the reads with acquire/release.  A reopened file must still
 * be a regular file of the same size (else ZT_EDATA naming it). */
int zt_tokens_acquire(const zt_token_file *f, zt_status *st);
void zt_tokens_release(const zt_token_file *f);
int zt_tokens_open_max(void);

/* Open and validate a token file (llm.c shard or HDF5, detected by extension
 * or signature): header / layout, size, and (when vocab > 0) every token below
 * vocab, checked by streaming the file in bounded chunks (O(1) memory).
 * Errors name the file and the byte offset.  The one dispatch by format:
 * HDF5 (h5tokens.h), else by the magic of the first header int (llm.c
 * shards here, SFT window files in sftfile.c). */
int zt_tokens_open(const char *path, int vocab, zt_token_file **out, zt_status *st);
void zt_tokens_close(zt_token_file *f);
/* Read n tokens starting at token index start into out (as uint32).  When
 * vocab > 0 every token is checked again (the file may have changed since
 * it was opened); the error names the file and byte offset.  Thread-safe. */
int zt_tokens_read(const zt_token_file *f, uint64_t start, size_t n, int vocab,
                   uint32_t *out, zt_status *st);
/* 1 when path names an HDF5 file (extension .h5/.hdf5 or the signature). */
int zt_tokens_is_h5(const char *path);

/* Write a (uint16) shard atomically (temp file + fsync + rename). */
int zt_tokens_write(const char *path, const uint16_t *tok, size_t n, zt_status *st);
/* Write an HDF5 token file atomically; elsize 2 (uint16) or 4 (uint32);
 * tok holds n tokens as uint32. */
int zt_tokens_write_h5(const char *path, const uint32_t *tok, size_t n, int elsize,
                       int vocab, zt_status *st);

/* Streaming writer of one token file of a size known in advance: writes to
 * "<path>.tmp.<pid>"; commit renames it into place, discard removes it. */
typedef struct zt_tok_writer zt_tok_writer;
int zt_writer_open(const char *path, int format, int elsize, size_t ntok, int vocab,
                   zt_tok_writer **out, zt_status *st);
int zt_writer_put(zt_tok_writer *w, const uint32_t *tok, size_t n, zt_status *st);
/* Flush, fsync and close the temporary file (all ntok tokens must be put). */
int zt_writer_close(zt_tok_writer *w, zt_status *st);
int zt_writer_commit(zt_tok_writer *w, zt_status *st);
/* Remove the temporary file (if any) and free the writer (NULL is fine). */
void zt_writer_free(zt_tok_writer *w);
const char *zt_writer_path(const zt_tok_writer *w);

/* ---------------------------------------------------------------- prep */

typedef struct zt_prep_opts {
    const char *input;        /* text file: byte-level tokens (vocab 256) */
    const char *tokens_in;    /* or: an existing token dataset (file or glob) */
    const char *prefix;       /* outputs PREFIX_train*, PREFIX_val* */
    double val_fraction;      /* the last fraction of the tokens go to val */
    int format;               /* ZT_FMT_BIN (default) | ZT_FMT_H5 */
    int elsize;               /* token width: 2 or 4 (0 = 2, or what the tokenizer needs);
                                 bin with 4 = llm.c uint32 shards (magic 20240801) */
    size_t shard_tokens;      /* > 0: shards of at most this many tokens,
                                 PREFIX_train_000000.bin, ...; 0 = one file
                                 per split, PREFIX_train.bin */
    /* With a tokenizer (io/tokenizer.h), input is a file or a glob of files, each
     * plain text (one document per file) or JSON Lines (one document per line,
     * its "text" string); tokens are uint16 when the vocabulary fits 65,536, else
     * uint32 (bin: llm.c's Llama-3 layout).  Without one: bytes, vocab 256. */
    const char *tokenizer;    /* tokenizer.json or a directory holding it; NULL = bytes */
    int jsonl;                /* 0 by extension (.jsonl: JSON Lines), 1 JSON Lines, 2 plain text */
    int doc_sep;              /* ZT_DOCSEP_EOS (default) | _BOS | _NONE */
    int threads;              /* encoding threads; 0 = OpenMP's default */
    size_t max_line_bytes;    /* the longest JSON Lines line; 0 = 64 MiB (fileio.h) */
    zt_progress progress;     /* optional: input bytes tokenized (with the lines, documents and
                                 tokens so far), then tokens written */
} zt_prep_opts;

/* Document separators with a tokenizer: EOS after each document (default),
 * BOS before each document, or none. */
enum { ZT_DOCSEP_EOS = 0, ZT_DOCSEP_BOS = 1, ZT_DOCSEP_NONE = 2 };

typedef struct zt_prep_result {
    size_t ntrain, nval;      /* tokens written */
    size_t ndocs;             /* documents read (tokenizer input) */
    int vocab, elsize;        /* vocabulary and token width of the outputs */
    int train_files, val_files;
} zt_prep_result;

/* Tokenize/re-shard into train/val files.  Streams the input (bounded
 * memory); outputs appear only when everything was written successfully. */
int zt_prep(const zt_prep_opts *o, zt_prep_result *res, zt_status *st);
/* Byte-level tokenization of a text file into <prefix>_train.bin and
 * <prefix>_val.bin (the last val_fraction of the bytes). */
int zt_prep_text(const char *input, const char *prefix, double val_fraction,
                 size_t *ntrain, size_t *nval, zt_status *st);
/* mkdir -p of the directory part of an output prefix; *created (n bytes)
 * gets the topmost directory it made ("" if none), for
 * zt_prep_remove_dirs when the prep then fails: a refused prep leaves no
 * empty directory behind. */
int zt_prep_make_dirs(const char *prefix, char *created, size_t n, zt_status *st);
void zt_prep_remove_dirs(const char *prefix, const char *created);
/* Output file name for split ("train"/"val"), shard index (-1 = unsharded). */
void zt_prep_path(char *buf, size_t n, const char *prefix, const char *split, int shard,
                  int format);

#endif
