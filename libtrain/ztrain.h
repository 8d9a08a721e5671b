/*
 * ztrain.h -- public API of libtrain.
 *
 * libtrain trains GPT-style transformer language models with ZeRO/FSDP-style
 * sharded data parallelism over MPI.  An embedding application:
 *
 *     zt_status st;
 *     zt_init(&argc, &argv, &st);                    // MPI + runtime
 *     zt_config *cfg = zt_config_new();
 *     zt_config_load_file(cfg, "job.json", &st);     // optional
 *     zt_config_load_env(cfg, &st);                  // ZTRAIN_* variables
 *     zt_config_set(cfg, "ztrain.steps", "100", ZT_SRC_FLAG, &st);
 *     zt_ctx *ctx;
 *     zt_ctx_create(cfg, &callbacks, &ctx, &st);     // finalizes cfg
 *     zt_ctx_open_data(ctx, &st);                    // token shards from cfg
 *     zt_train(ctx, &st);
 *     zt_ctx_free(ctx); zt_config_free(cfg); zt_finalize();
 *
 * Error handling: every function that can fail returns a zt_code (ZT_OK == 0)
 * and, when given a zt_status, fills it with the code and one human-readable
 * line.  The library never calls exit() or abort() on bad input.
 *
 * Output: the library prints nothing by itself.  Log lines and metrics go to
 * the callbacks given to zt_ctx_create (NULL callbacks = silence).
 */
#ifndef ZTRAIN_H
#define ZTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZTRAIN_VERSION_MAJOR 0
#define ZTRAIN_VERSION_MINOR 1
#define ZTRAIN_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

typedef enum zt_code {
    ZT_OK = 0,
    ZT_EINVAL = 1,       /* bad argument or configuration value            */
    ZT_EIO = 2,          /* file missing, unreadable, unwritable           */
    ZT_EDATA = 3,        /* file readable but its content is wrong         */
    ZT_ENOMEM = 4,       /* allocation failed                              */
    ZT_ECOMM = 5,        /* MPI / collective failure                       */
    ZT_EUNSUPPORTED = 6, /* valid request that this build cannot do (yet)  */
    ZT_EINTERNAL = 7,    /* a bug: please report                           */
    ZT_EPREEMPTED = 8    /* stopped cleanly after a preemption checkpoint  */
} zt_code;

typedef struct zt_status {
    int code;            /* a zt_code */
    char msg[1024];      /* one line, no trailing newline */
} zt_status;

/* Short name of a code ("invalid argument", ...). */
const char *zt_code_name(int code);

/* ---------------------------------------------------------------- runtime */

/* Initialize MPI (if not yet initialized by the application) and the runtime:
 * rank/world/local-rank topology, thread counts.  Safe to call once. */
int zt_init(int *argc, char ***argv, zt_status *st);
/* Finalize MPI if zt_init initialized it. */
void zt_finalize(void);
int zt_world_rank(void);
int zt_world_size(void);
int zt_local_rank(void);
int zt_local_size(void);

/* ---------------------------------------------------------------- config */

/* Where a configuration value came from; later sources win:
 * default < file < environment < flag. */
typedef enum zt_source {
    ZT_SRC_DEFAULT = 0,
    ZT_SRC_FILE = 1,
    ZT_SRC_ENV = 2,
    ZT_SRC_FLAG = 3,
    ZT_SRC_DERIVED = 4   /* computed from other keys (e.g. batch triple) */
} zt_source;

typedef struct zt_config zt_config;

zt_config *zt_config_new(void);
void zt_config_free(zt_config *cfg);
/* Load a DeepSpeed-style JSON file.  Unknown keys and bad values fail with
 * the key path; malformed JSON fails with line and column. */
int zt_config_load_file(zt_config *cfg, const char *path, zt_status *st);
/* Apply ZTRAIN_* environment variables (see ztrain_env.h). */
int zt_config_load_env(zt_config *cfg, zt_status *st);
/* Set one key by its JSON path ("optimizer.params.lr") or flag alias
 * ("lr"), from a string.  Returns ZT_EINVAL for unknown keys/bad values.
 * A value from a lower-precedence source never overrides a higher one. */
int zt_config_set(zt_config *cfg, const char *key, const char *value,
                  zt_source src, zt_status *st);
/* Resolve derived values (batch triple) for a world size and reject
 * inconsistent or not-yet-implemented settings. */
int zt_config_finalize(zt_config *cfg, int world_size, zt_status *st);
/* Human-readable effective configuration, one "key = value  (source)" per
 * line.  Caller frees with free(). */
char *zt_config_describe(const zt_config *cfg);
/* Effective configuration as a JSON document.  Caller frees with free(). */
char *zt_config_to_json(const zt_config *cfg);

/* ---------------------------------------------------------------- callbacks */

typedef enum zt_log_level {
    ZT_LOG_ERROR = 0, ZT_LOG_WARN = 1, ZT_LOG_INFO = 2, ZT_LOG_DEBUG = 3
} zt_log_level;

typedef enum zt_metric_kind { ZT_METRIC_STEP = 0, ZT_METRIC_EVAL = 1 } zt_metric_kind;

typedef struct zt_metrics {
    int kind;             /* zt_metric_kind */
    long step;            /* optimizer steps completed (1-based after a step) */
    long steps_total;
    double loss;          /* STEP: mean training loss over the global batch */
    double lr;            /* STEP */
    double grad_norm;     /* STEP: global gradient norm before clipping */
    double tokens_per_s;  /* STEP: global tokens per second */
    double step_ms;       /* STEP */
    double eta_s;         /* STEP: estimated seconds to finish */
    double data_wait_ms;  /* STEP: time this rank waited for its batches */
    uint64_t comm_bytes;  /* STEP: bytes rank 0 sent in collectives this step */
    double val_loss;      /* EVAL */
    uint64_t mem_peak_bytes; /* peak accounted bytes on this rank so far */
} zt_metrics;

typedef struct zt_callbacks {
    /* Log lines (no trailing newline).  Called on every rank; the CLI
     * prints rank 0's only.  NULL: discard. */
    void (*log)(void *user, int level, const char *msg);
    /* Metrics, called on every rank with identical values.  NULL: none. */
    void (*metrics)(void *user, const zt_metrics *m);
    void *user;
} zt_callbacks;

/* ---------------------------------------------------------------- data */

/* A source of training/eval windows.  The trainer asks for `count` samples
 * starting at global sample index `first` of optimizer step `step`
 * (eval uses step = -1 - eval_round).  Each sample is T+1 consecutive tokens;
 * the source writes inputs[i*T..] = tok[0..T-1], targets = tok[1..T].
 * Sample content must be a pure function of (seed, step, index) so runs are
 * reproducible and independent of the world size. */
typedef struct zt_data_source {
    void *state;
    int (*get)(void *state, long step, uint64_t first, int count, int T,
               int *inputs, int *targets, zt_status *st);
    void (*close)(void *state);
} zt_data_source;

/* ---------------------------------------------------------------- training */

typedef struct zt_ctx zt_ctx;

/* Create a training context: finalizes a copy of cfg for the current world
 * size, allocates model, optimizer and activations, initializes parameters
 * from ztrain.seed (identically on every rank). */
int zt_ctx_create(const zt_config *cfg, const zt_callbacks *cb, zt_ctx **out,
                  zt_status *st);
void zt_ctx_free(zt_ctx *ctx);
/* The finalized configuration the context runs with. */
const zt_config *zt_ctx_config(const zt_ctx *ctx);

/* Attach data sources (ownership passes to the context; NULL val = no eval). */
int zt_ctx_set_data(zt_ctx *ctx, zt_data_source train, zt_data_source val,
                    zt_status *st);
/* Open ztrain.data.train / ztrain.data.val (llm.c token shards) and attach
 * them.  Implemented in io/. */
int zt_ctx_open_data(zt_ctx *ctx, zt_status *st);

/* One optimizer step (all micro-steps, communication, update). */
int zt_train_step(zt_ctx *ctx, zt_metrics *out, zt_status *st);
/* Run until ztrain.steps, evaluating every ztrain.eval_every steps. */
int zt_train(zt_ctx *ctx, zt_status *st);
/* Forward-only evaluation on the val source: mean loss over
 * ztrain.eval_batches batches of ztrain.eval_batch_size, averaged over ranks. */
int zt_evaluate(zt_ctx *ctx, double *val_loss, zt_status *st);
/* Mean loss of one explicit batch (B x T inputs/targets), forward only. */
int zt_loss(zt_ctx *ctx, const int *inputs, const int *targets, int B, int T,
            double *loss, zt_status *st);
/* Autoregressive sampling: extends `prompt` by n_new tokens written to out
 * (out has room for n_new).  temperature > 0; top_k 0 = full distribution.
 * Deterministic in `seed`. */
int zt_sample(zt_ctx *ctx, const int *prompt, int n_prompt, int n_new,
              double temperature, int top_k, uint64_t seed, int *out,
              zt_status *st);

/* Optimizer steps completed. */
long zt_ctx_step(const zt_ctx *ctx);

/* Accounted memory of this rank, per category (params, grads, optimizer,
 * gathered-params, activations, comm-buffers, workspace, eval). */
#define ZT_MEM_CATEGORIES 8
typedef struct zt_memory_report {
    const char *name[ZT_MEM_CATEGORIES];
    uint64_t current[ZT_MEM_CATEGORIES], peak[ZT_MEM_CATEGORIES];
    uint64_t current_total, peak_total;
} zt_memory_report;
void zt_memory(zt_memory_report *out);

/* Bytes this rank has sent in collectives, per kind (0 all-reduce,
 * 1 reduce-scatter, 2 all-gather, 3 broadcast), over all its groups. */
uint64_t zt_ctx_comm_bytes(const zt_ctx *ctx, int kind);
/* Number of parameters (logical, unsharded). */
size_t zt_ctx_num_params(const zt_ctx *ctx);

/* Weights in llm.c's fp32 model-file format (magic 20240326, version 3).
 * Save writes from rank 0; load reads on every rank. Implemented in ckpt/. */
int zt_save_weights(zt_ctx *ctx, const char *path, zt_status *st);
int zt_load_weights(zt_ctx *ctx, const char *path, zt_status *st);
/* Read only the model shape from a weights file into cfg (as ZT_SRC_FILE). */
int zt_weights_read_shape(const char *path, zt_config *cfg, zt_status *st);

#ifdef __cplusplus
}
#endif
#endif /* ZTRAIN_H */
