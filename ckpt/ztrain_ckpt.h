/*
 * ztrain_ckpt.h -- distributed HDF5 checkpoints (public API of libtrain).
 *
 * A checkpoint is a directory <checkpoint.dir>/step-<N>/ holding one HDF5
 * file, state.h5: rank 0 writes its metadata, every rank its own slices.  Every
 * tensor is stored at its full logical shape, so a checkpoint does not depend
 * on the world size, ZeRO stage or shard group it was written with and can be
 * restored onto any other.  The layout, the checksum and the commit protocol
 * are described in docs/checkpoints.md.
 *
 * Training with checkpoints, as `ztrain train` does it:
 *
 *     zt_ctx_create(cfg, &cb, &ctx, &st);
 *     zt_ctx_open_data(ctx, &st);
 *     zt_ckpt_session *ck;
 *     zt_ckpt_attach(ctx, &ck, &st);   // clean stale .tmp, resume, signals, step hook
 *     rc = zt_train(ctx, &st);         // periodic / preemption / final saves
 *     zt_ckpt_detach(ck);              // ZT_EPREEMPTED: saved, stop
 *
 * Functions taking a zt_ctx are collective over the world: every rank calls
 * them in the same order.  The others (list, info, verify, export) are
 * serial, need no MPI and are what `ztrain ckpt` uses.
 */
#ifndef ZTRAIN_CKPT_H
#define ZTRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include "ztrain.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- weights files */

/* Weights in llm.c's model-file format (magic 20240326, version 3 = fp32,
 * version 5 = bf16).  Save writes from rank 0 (fp32; _dtype with bf16 != 0:
 * version 5, rounded to nearest even); load reads either version on every
 * rank, checks the header against the file size first and refuses NaN/Inf. */
int zt_save_weights(zt_ctx *ctx, const char *path, zt_status *st);
int zt_save_weights_dtype(zt_ctx *ctx, const char *path, int bf16, zt_status *st);
int zt_load_weights(zt_ctx *ctx, const char *path, zt_status *st);
/* Read only the model shape from a weights file into cfg (as ZT_SRC_FILE). */
int zt_weights_read_shape(const char *path, zt_config *cfg, zt_status *st);

/* ---------------------------------------------------------------- checkpoints */

#define ZT_CKPT_FORMAT "ztrain-checkpoint"
#define ZT_CKPT_FORMAT_VERSION 1
#define ZT_CKPT_FILE "state.h5"        /* the file inside step-<N>/ */
#define ZT_CKPT_LATEST "latest"        /* pointer file in checkpoint.dir */
#define ZT_CKPT_CHECKSUM_ALGORITHM "zt-splitmix64-sum-v1"

/* Restore modes (ztrain.checkpoint.restore). */
typedef enum zt_ckpt_mode {
    ZT_CKPT_ONE_READER = 0,  /* rank 0 reads and sends each slice to its owners */
    ZT_CKPT_PARALLEL = 1     /* every rank reads its own slices (MPI-IO) */
} zt_ckpt_mode;

/* ------------------------------------------------------------ training */

/* Save the current state as <dir>/step-<step>/ and commit it (write into
 * step-<step>.tmp/, flush, fsync, rename, fsync the parent, move `latest`),
 * then keep the newest `keep` (>= 2) checkpoints.  Collective. */
int zt_ckpt_save(zt_ctx *ctx, const char *dir, int keep, zt_status *st);

/* Asynchronous saves (ztrain.checkpoint.async; docs/checkpoints.md): the
 * same file and commit as zt_ckpt_save, but the tensor data is written by a
 * background thread per rank from a host snapshot while training goes on.
 * zt_ckpt_save_async takes the snapshot and starts the thread (checksums);
 * at most one save is in flight (call zt_ckpt_async_poll with wait = 1
 * first).  zt_ckpt_async_poll, at a step boundary: every rank reports
 * whether its thread is done; when all are, the next stage runs: after the
 * checksums the file is created (every collective of the save) and the
 * thread writes the tensors; after those rank 0 commits (*committed = the
 * step).  With wait = 1 it waits for this rank's thread and goes to the
 * end.  A writer error on any rank is returned on every rank
 * and the save abandoned (its .tmp removed; the previous checkpoint stays
 * `latest`).  Both collective.  zt_ckpt_async_abandon (local): stop the
 * writer, remove the .tmp (rank 0), never commit.  zt_ckpt_async_stalled:
 * seconds the calling thread spent in the save in flight or the last one. */
typedef struct zt_ckpt_async zt_ckpt_async;
zt_ckpt_async *zt_ckpt_async_new(void);
int zt_ckpt_save_async(zt_ctx *ctx, zt_ckpt_async *a, const char *dir, int keep, zt_status *st);
int zt_ckpt_async_poll(zt_ctx *ctx, zt_ckpt_async *a, int wait, long *committed, zt_status *st);
int zt_ckpt_async_busy(const zt_ckpt_async *a);
long zt_ckpt_async_step(const zt_ckpt_async *a);
double zt_ckpt_async_stalled(const zt_ckpt_async *a);
void zt_ckpt_async_abandon(zt_ckpt_async *a);
/* Host state: zt_ckpt_save_async only lists the copy of the owned tensors;
 * the background thread copies them while training goes on.  The fence
 * (local) returns once the copy is complete; call it before anything writes
 * the owned state (zt_ckpt_attach registers it with zt_ctx_set_state_fence). */
void zt_ckpt_async_fence(zt_ckpt_async *a);
/* Allocate the host snapshot and touch its pages now (zt_ckpt_attach, before
 * step 1) rather than at the first save.  Local. */
int zt_ckpt_async_prepare(zt_ctx *ctx, zt_ckpt_async *a, zt_status *st);
/* Free the host snapshot (no save in flight; the next save allocates it
 * again): after the last background save of a run. */
void zt_ckpt_async_release(zt_ckpt_async *a);
void zt_ckpt_async_free(zt_ckpt_async *a);

/* Restore from `path`: a step-<N> directory or its state.h5.  Every tensor's
 * checksum is verified; a mismatch is ZT_EDATA naming the tensor.  Works
 * whatever world size / stage / shard group wrote it.  Collective. */
int zt_ckpt_restore(zt_ctx *ctx, const char *path, int mode, zt_status *st);

/* Resume as ztrain.checkpoint.resume says: "never" (nothing), "auto" (the
 * newest committed checkpoint in checkpoint.dir that verifies; a corrupt one
 * is reported, renamed to step-<N>.corrupt-<time> and the previous one is
 * tried), or a path (a checkpoint, or a directory of checkpoints: its newest
 * one that verifies).  *step_out: the step resumed at, -1 if none.
 * Collective. */
int zt_ckpt_resume(zt_ctx *ctx, long *step_out, zt_status *st);

typedef struct zt_ckpt_session zt_ckpt_session;
/* Everything `ztrain train` needs: takes checkpoint.dir's lock (rank 0, for
 * the session's life: a second run on the directory is refused, naming the
 * first; ztrain.checkpoint.lock), removes stale step-*.tmp in
 * checkpoint.dir, resumes, catches SIGTERM and ztrain.preempt_signal, and
 * registers the step hook that saves every checkpoint.every steps and/or
 * checkpoint.every_minutes, at the last step, and on a preemption signal
 * (then requeues a Slurm job when allowed -- unless deferred, below -- and
 * makes zt_train return ZT_EPREEMPTED).  Collective. */
int zt_ckpt_attach(zt_ctx *ctx, zt_ckpt_session **out, zt_status *st);
/* Unregister the hook, restore the signal handlers, free.  NULL is fine. */
void zt_ckpt_detach(zt_ckpt_session *s);
/* Directory of the newest checkpoint this session saved or resumed from
 * ("" if none). */
const char *zt_ckpt_session_last(const zt_ckpt_session *s);
/* The step of the background save in flight (checkpoint.async), -1 if none:
 * zt_ckpt_detach abandons it, never committed. */
long zt_ckpt_session_inflight(const zt_ckpt_session *s);
/* The requeue after a preemption save left to the caller (zt_run: after
 * the process's last line, so that the scheduler's kill, which the requeue
 * starts, cannot cut it off); zt_ckpt_session_requeue_pending then says
 * (rank 0) that the save was made and the job should be requeued. */
void zt_ckpt_session_defer_requeue(zt_ckpt_session *s);
int zt_ckpt_session_requeue_pending(const zt_ckpt_session *s);

/* ------------------------------------------------------------ tools (serial) */

typedef struct zt_ckpt_entry {
    long step;
    int state;               /* 0 committed, 1 incomplete (*.tmp), 2 quarantined (*.corrupt-*) */
    int is_latest;           /* `latest` points here */
    char name[256];          /* directory name inside the checkpoint dir */
    uint64_t bytes;          /* size of state.h5 (0 if missing) */
} zt_ckpt_entry;
/* Entries of a checkpoint directory, committed ones newest first, then the
 * others.  Caller frees *out with free(). */
int zt_ckpt_list(const char *dir, zt_ckpt_entry **out, int *n, zt_status *st);

typedef struct zt_ckpt_info {
    int format_version;
    long step, adam_t;
    int world_size, zero_stage, shard_group;
    int has_master;
    int n_layer, n_head, n_embd, context, vocab;
    /* /model: the shape above again, the architecture (model.arch) and its
     * settings (arch.h zt_arch_settings), resolved.  A checkpoint without
     * them, written before they existed, reads as a GPT-2 with the
     * configuration's defaults (n_kv_head = n_head, head_dim = n_embd /
     * n_head, intermediate 4 n_embd, eps 1e-5, theta 10000, no scaling,
     * no biases, tied). */
    zt_model_config model;
    uint64_t num_params;
    int n_tensors;
    double created_unix;
    uint64_t seed;
    long train_batch_size;
    uint64_t sample_position;
    /* /loss_scaler: fp16 dynamic loss scaling state (present = 0 otherwise) */
    int scaler_present;
    double loss_scale;
    long scaler_good_steps;
    int scaler_hysteresis_left;
    char ztrain_version[32];
    char checksum_algorithm[64];
    /* 1: every attribute and the /config JSON matched /meta_checksums;
     * 0: a checkpoint written before metadata checksums (accepted, with a
     * warning from resume and `ztrain ckpt verify`) */
    int meta_checksums;
    char *config_json;       /* malloc'ed; zt_ckpt_info_free */
} zt_ckpt_info;
/* The run named by checkpoint directory dir's lock file (<dir>/.ztrain.lock,
 * held by zt_ckpt_attach's rank 0 for the run's life): out = "host H, pid
 * P, Slurm job J, started T"; returns 0 (none: out untouched), 1 (its lock
 * is held: that run is running), 2 (not locked: it ended without removing
 * the file; the next run takes it over) or 3 (the file system does not
 * support locks: cannot tell).  Read-only: takes no lock.
 * docs/checkpoints.md, "One job per directory". */
int zt_ckpt_lock_holder(const char *dir, char *out, size_t n);

/* Read the header of a checkpoint (step dir or state.h5). */
int zt_ckpt_read_info(const char *path, zt_ckpt_info *info, zt_status *st);
void zt_ckpt_info_free(zt_ckpt_info *info);

/* One tensor dataset, for listings and verification. */
typedef struct zt_ckpt_tensor {
    const char *dataset;     /* "params/h0.attn.qkv.w", "optimizer/m/wte", ... */
    int ndim;
    uint64_t shape[2];
    uint64_t stored;         /* checksum attribute */
    uint64_t computed;       /* computed over the data (verify only) */
    int ok;                  /* verify: 1 match, 0 mismatch or unreadable */
    const char *error;       /* verify: why not ok (NULL if ok) */
} zt_ckpt_tensor;
typedef void (*zt_ckpt_tensor_fn)(void *user, const zt_ckpt_tensor *t);

/* Call fn for every tensor dataset with its stored checksum (no data read). */
int zt_ckpt_tensors(const char *path, zt_ckpt_tensor_fn fn, void *user, zt_status *st);
/* Read every tensor, recompute its checksum and compare (fn, if given, sees
 * each result).  ZT_EDATA naming the first bad tensor (and how many) if any
 * does not verify; the structure (format, version, shapes) is checked too. */
int zt_ckpt_verify(const char *path, zt_ckpt_tensor_fn fn, void *user, zt_status *st);

/* Export the parameters as a safetensors file with GPT-2 (Hugging Face)
 * tensor names and layout (docs/checkpoints.md); bf16 != 0: BF16 values
 * (round to nearest even), else F32.  Checksums are verified while reading. */
int zt_ckpt_export_safetensors(const char *path, const char *out_file, int bf16,
                               zt_status *st);

typedef struct zt_hf_export_opts {
    int bf16;                    /* BF16 values (round to nearest even), else F32 */
    uint64_t max_shard_bytes;    /* largest shard; 0 = 5 GB */
    /* the directory whose config.json keys (token ids, sliding window) and
     * tokenizer files go into the export; NULL = the run's ztrain.init_from,
     * checked against the fingerprints recorded at training time; "" = none */
    const char *tokenizer_from;
    zt_progress progress;        /* bytes written; optional */
    char warning[512];           /* out: a warning for the caller to show, or "" */
} zt_hf_export_opts;

/* Export a checkpoint as a Hugging Face model directory out_dir: config.json
 * (from the checkpoint's stored configuration), model.safetensors -- or
 * shards model-0000K-of-0000N.safetensors of at most o->max_shard_bytes each
 * plus model.safetensors.index.json -- with Hugging Face tensor names
 * (lm_head.weight omitted when tied; GPT-2 Conv1D weights [in, out]), F32
 * or BF16, and the config.json keys and tokenizer files of the run's
 * ztrain.init_from (or o->tokenizer_from).  A checkpoint records init_from as
 * an absolute path with the fingerprints of those files
 * (ztrain.init_from_files): when the directory is gone or its files differ,
 * the export is refused (ZT_EDATA) naming both, unless o->tokenizer_from is
 * given.  A checkpoint without fingerprints (older ztrain) copies the files
 * unchecked and says so in o->warning.  Built in out_dir.tmp (which holds a
 * marker file while it is built: an out_dir.tmp without it is refused, not
 * removed) and renamed at the end: on failure nothing is left.  An existing
 * non-empty out_dir is refused.  Checksums are verified while reading.
 * docs/huggingface.md. */
int zt_ckpt_export_hf(const char *path, const char *out_dir, zt_hf_export_opts *o,
                      zt_status *st);

/* LoRA checkpoints (docs/lora.md).  A PEFT adapter directory out_dir:
 * adapter_config.json and adapter_model.safetensors (F32, PEFT's names
 * base_model.model.<module>.lora_A.weight [r, in] / lora_B.weight [out, r])
 * that peft.PeftModel.from_pretrained(base, out_dir) loads. */
int zt_ckpt_export_peft(const char *path, const char *out_dir, zt_status *st);
/* A Hugging Face directory of the merged model: every weight of the base
 * the adapters were trained on (ztrain.init_from; its config.json and every
 * tensor as loaded checked against the checkpoint's fingerprint, as a resume
 * checks them, ZT_EINVAL naming the first that differs) with W + scale * B A in the targeted
 * modules, model.safetensors F32 (bf16: BF16), config.json and the
 * tokenizer files copied.  An existing non-empty out_dir is refused. */
int zt_ckpt_export_merged(const char *path, const char *out_dir, int bf16, zt_status *st);
/* Start a LoRA context's adapters from a PEFT adapter directory
 * (ztrain.lora.from): adapter_config.json's r, lora_alpha, use_rslora,
 * lora_dropout and the modules its target_modules, exclude_modules,
 * layers_to_transform and layers_pattern select (PEFT's rule) must be the
 * configuration's, every other key of PEFT's LoraConfig off or inert
 * (docs/lora.md: the rest is refused, every key by name in one message),
 * and its base_model_name_or_path, when it is a directory here,
 * ztrain.init_from; every adapter tensor must be in
 * adapter_model.safetensors with its shape and nothing else may be.
 * Collective (every rank reads the files). */
int zt_lora_load_peft(zt_ctx *ctx, const char *dir, zt_status *st);

/* ------------------------------------------------------------ Hugging Face models */

/* Record what a run starts from: ztrain.init_from replaced by its absolute
 * path (realpath; the source kept) and ztrain.init_from_files set to the
 * fingerprints of its config.json and tokenizer files (ZT_SRC_DERIVED, ""
 * without init_from).  An init_from that does not resolve is left as given
 * (zt_hf_read_config reports it).  Serial; call before zt_hf_read_config. */
int zt_hf_record_init_from(zt_config *cfg, zt_status *st);

/* Read a Hugging Face config.json (dir_or_config_json: a model directory or
 * the file) into cfg's ztrain.model.* keys (source ZT_SRC_FILE):
 * LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM (arch llama),
 * GPT2LMHeadModel (arch gpt2); anything else, and settings ztrain cannot
 * reproduce (rope types other than default/llama3, hidden_act other than
 * silu, GPT-2 layer_norm_epsilon other than 1e-5, ...), are refused
 * (ZT_EUNSUPPORTED) by name.  A model key the caller set (flag, environment
 * or file) that disagrees is ZT_EINVAL naming both values.  Serial. */
int zt_hf_read_config(const char *dir_or_config_json, zt_config *cfg, zt_status *st);
/* Checks that need the finalized configuration: a Mistral/Qwen2
 * sliding_window smaller than ztrain.seq_len is refused (ZT_EUNSUPPORTED),
 * since ztrain's attention is full-causal.  Serial. */
int zt_hf_check_config(const char *dir_or_config_json, const zt_config *cfg, zt_status *st);
/* The model class named by a config.json ("LlamaForCausalLM", ...) when
 * supported, else NULL (static string). */
const char *zt_hf_arch_name(const char *dir_or_config_json);
/* Load the weights of a Hugging Face model directory (model.safetensors, or
 * the shards of model.safetensors.index.json; F32, BF16 or F16) into the
 * context's fp32 master parameters, at any ZeRO stage and world size; AdamW
 * moments zero, step 0.  Rank 0 reads in bounded pieces and sends each to
 * its owners.  Every tensor of the model must be present with its shape, and
 * the files must hold nothing else (except lm_head.weight of a tied model and
 * known non-parameter buffers): errors name the file, the tensor and both
 * shapes.  Every structural check happens before any parameter is written;
 * all ranks return the same status.  Collective. */
int zt_hf_load(zt_ctx *ctx, const char *dir, zt_status *st);

/* The per-tensor checksum: the sum modulo 2^64 over elements i (row-major
 * index in the logical tensor) of splitmix64((i << 32) | bits(x[i])), where
 * bits() is the IEEE-754 binary32 pattern.  This returns the partial sum
 * over x[0..n) holding elements first .. first+n-1; partial sums of disjoint
 * slices add up (mod 2^64) to the tensor's checksum. */
uint64_t zt_ckpt_checksum(const float *x, size_t n, uint64_t first);

#ifdef __cplusplus
}
#endif
/* The watchdog (ckpt_watchdog.c) bounds phases whose collectives no timeout
 * covers: start-up, checkpoint saves and HDF5's / MPI-IO's own collectives in
 * restores (which arm it themselves).  zt_watchdog_arm starts or
 * restarts the clock of `phase`; if neither is called again within
 * timeout_s seconds (ztrain.comm_timeout_s; 5 s more on ranks > 0, so that
 * rank 0 reports), the watchdog thread builds one line "ztrain: error: rank
 * R: PHASE: no progress for N s: ..." and hands it to the handler set with
 * zt_watchdog_set_handler, which should end the process (the ztrain CLI
 * prints it and exits with status 1); without a handler, or if it returns,
 * the line goes to stderr and the job ends with MPI_Abort(MPI_COMM_WORLD, 1):
 * a rank blocked inside a collective cannot be returned from.  No-op for
 * one rank or timeout_s <= 0. */
void zt_watchdog_arm(int rank, int nranks, double timeout_s, const char *phase);
void zt_watchdog_disarm(void);
void zt_watchdog_set_handler(void (*fn)(const char *line, void *user), void *user);

#endif /* ZTRAIN_CKPT_H */
