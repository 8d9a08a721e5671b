/*
 * data.h -- token datasets, the sampler and the prefetching loader.
 *
 * Dataset: one token file, or every file matching a glob (sorted by name),
 * llm.c shards and HDF5 token files mixed freely (see tokens.h).  It is a
 * sequence of n_samples non-overlapping windows of T+1 tokens: file f
 * contributes floor(ntok_f / (T+1)) windows, window w covering tokens
 * [w*(T+1), (w+1)*(T+1)); windows never cross files and each file's tail
 * shorter than T+1 tokens is never used.  Sample ids count windows in file
 * order.  Nothing is mapped or read whole: windows are read with pread.
 *
 * Training order: a pure function of (seed, epoch, global sample index).
 * The global sample index of sample i of a request (step, first, count) is
 *     g = step * global_batch + first + i
 * (global_batch = micro_batch * grad_accum * world = train_batch_size; the
 * trainer's first = rank*B*A + micro*B, so ranks take disjoint slices of
 * every step's global batch).  Then
 *     epoch = g / n_samples,  pos = g % n_samples,
 *     sample id = perm(pos, n_samples, key(seed, epoch))
 * where perm is a keyed bijection on [0, n_samples): a 6-round balanced
 * Feistel network over the smallest even number of bits covering n_samples,
 * with cycle-walking (O(1) memory and time per sample).  Every epoch visits
 * every sample exactly once in a fresh order, whatever the world size and
 * however the global batch is split, and the position after `step` steps is
 * zt_data_position(step, global_batch): a checkpoint that stores the step
 * (and the global batch) resumes exactly, on any world size.
 *
 * Evaluation (step < 0, round = -1 - step): windows in file order, no
 * shuffle: sample id = (round * eval_batch + first + i) mod n_samples, where
 * eval_batch is the global count (the same samples at any world size).
 */
#ifndef ZT_IO_DATA_H
#define ZT_IO_DATA_H
#include <stddef.h>
#include <stdint.h>
#include "tokens.h"

/* ---------------------------------------------------------------- dataset */

typedef struct zt_dataset {
    char pattern[1024];
    int nfiles;
    zt_token_file **files;
    uint64_t *first;          /* first[f] = id of file f's first window; first[nfiles] = n */
    uint64_t nsamples;
    int T, vocab;
    int masked;               /* SFT window files (sft.h): targets carry a loss mask */
} zt_dataset;

/* Expand pattern (a path, or a glob when it contains * ? or [), open and
 * validate every file (tokens < vocab), and index the windows of T+1 tokens
 * (T = 0: the files as plain token streams, no windows, SFT files refused).
 * Errors name the file (or the pattern, for an empty glob). */
int zt_dataset_open(const char *pattern, int vocab, int T, zt_dataset **out, zt_status *st);
void zt_dataset_close(zt_dataset *d);
/* Read window `sample` (T+1 tokens) into tok.  Thread-safe.  For a masked
 * dataset every token whose mask byte is 0 (not a counted target) carries
 * ZT_SFT_NOTARGET (sft.h). */
int zt_dataset_read(const zt_dataset *d, uint64_t sample, uint32_t *tok, zt_status *st);
/* Counted targets of window `sample`: its stored count (masked datasets),
 * T otherwise. */
int zt_dataset_count(const zt_dataset *d, uint64_t sample, uint32_t *count, zt_status *st);

/* ---------------------------------------------------------------- sampler */

/* Keyed bijection on [0, n): Feistel network with cycle-walking. */
uint64_t zt_data_perm(uint64_t i, uint64_t n, uint64_t key);
/* Sample id of global training sample index g. */
uint64_t zt_data_train_sample(uint64_t g, uint64_t n, uint64_t seed);
/* The global sample index the next step starts at after `step` optimizer
 * steps with train_batch_size samples per step: what a checkpoint must
 * reproduce to resume (step * train_batch_size).  epoch = position / n. */
uint64_t zt_data_position(long step, int train_batch_size);

/* ---------------------------------------------------------------- loader */

enum { ZT_DATA_TRAIN = 0, ZT_DATA_EVAL = 1 };

typedef struct zt_data_opts {
    const char *pattern;      /* file or glob */
    int kind;                 /* ZT_DATA_TRAIN | ZT_DATA_EVAL */
    int vocab;                /* tokens must be < vocab (0 = unchecked) */
    int T;                    /* context: samples are T+1 tokens */
    uint64_t seed;            /* train: shuffle key */
    int micro_batch;          /* B: train requests are B samples */
    int grad_accum;           /* A: micro-steps per step */
    int world, rank;          /* data-parallel world; global batch = B*A*world */
    int eval_batch;           /* eval: samples per round, all ranks together */
    int workers;              /* prefetch threads; 0 = synchronous reads */
    int depth;                /* prefetch queue in batches; 0 = 2*A + 2 */
} zt_data_opts;

/* A data source over a dataset (see the top of this file for the order).
 * With workers > 0 the threads read this rank's next batches (step s micro
 * 0..A-1, then s+1, ...) into a bounded queue of `depth` batches; get()
 * pops the expected batch, or reads synchronously when the request is not
 * the expected one (the first call, a resume jump, any other pattern) and
 * restarts the prefetch right after it.  The output is bitwise identical
 * for any number of workers.  close() joins the threads. */
int zt_data_open(const zt_data_opts *o, zt_data_source *out, zt_status *st);

/* Default worker threads per rank: max(1, min(4, cores_per_rank / 2)), with
 * cores_per_rank = the CPUs this process may run on, divided by the ranks on
 * the node unless the process is already bound to a subset. */
int zt_data_default_workers(void);

typedef struct zt_data_stats {
    uint64_t nsamples;        /* windows in the dataset */
    int nfiles, workers, depth;
    uint64_t prefetched;      /* get() calls served from the queue */
    uint64_t sync_reads;      /* get() calls read synchronously */
    double wait_s;            /* time get() spent waiting for the queue */
} zt_data_stats;
/* Loss masks.  1 when src was made by zt_data_open over SFT window files
 * (sft.h): its get() serves the targets that do not count as -1 and serves
 * whole windows only, and its table carries count_targets (ztrain.h), which
 * is how the trainer sees the mask; 0 for any other source (every target
 * counts). */
int zt_data_masked(const zt_data_source *src);
/* For a masked source: *n = the number of targets >= 0 that get() serves
 * for samples [first, first+count) of step, from the per-window counts
 * stored in the files.  The trainer asks for a whole global batch before
 * the backward (the same answer on every rank, no communication) and
 * divides the summed loss by it. */
int zt_data_count_targets(const zt_data_source *src, long step, uint64_t first, int count, uint64_t *n,
                          zt_status *st);

/* Statistics of a source made by zt_data_open (0 / ZT_EINVAL otherwise). */
int zt_data_get_stats(const zt_data_source *src, zt_data_stats *out);

#endif
