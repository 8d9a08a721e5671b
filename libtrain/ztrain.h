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
 *     zt_ctx_open_data(ctx, &st);                    // token shards from cfg (ztrain_io.h)
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
/* The current value of one key (JSON path or flag alias) as text, as
 * zt_config_describe shows it ("" for an empty string). */
int zt_config_get(const zt_config *cfg, const char *key, char *buf, size_t n, zt_status *st);
/* Human-readable effective configuration, one "key = value  (source)" per
 * line.  Caller frees with free(). */
char *zt_config_describe(const zt_config *cfg);
/* Effective configuration as a JSON document.  Caller frees with free(). */
char *zt_config_to_json(const zt_config *cfg);
/* Every rank must read the same configuration: collective over the world
 * (after zt_init; bounded by ztrain.comm_timeout_s).  load_rc / st: this
 * rank's result of reading it (cfg is not looked at when load_rc fails).
 * Every rank returns the same status: the lowest failing rank's error
 * ("rank R: ..."), or, when the configurations differ (ztrain.threads,
 * ztrain.metrics and ztrain.memory_report may), ZT_EINVAL naming the lowest
 * rank that differs from rank 0, the first differing key and both values.
 * With one rank: load_rc.  zt_ctx_create calls it first. */
int zt_config_agree(const zt_config *cfg, int load_rc, zt_status *st);

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
    double loss_scale;    /* STEP: the loss scale this step's backward used (1 unless fp16) */
    int skipped;          /* STEP: fp16 gradients overflowed: no update was applied
                           * (grad_norm is then NaN) */
    uint64_t alltoall_bytes; /* STEP: of comm_bytes, those of the all-to-alls of sequence
                              * and expert parallelism (0 without either) */
    double aux_loss;      /* STEP: a Mixture of Experts' load-balancing loss (transformers'
                           * load_balancing_loss_func), the mean of the step's forwards;
                           * apart from loss; NaN without experts (docs/moe.md) */
    double tflops;        /* STEP: the model's TFLOP/s on one device: zt_ctx_flops_per_token
                           * x tokens_per_s / ranks / 1e12 */
    double mfu;           /* STEP: tflops over the device's dense peak (zt_ctx_peak_tflops);
                           * NaN where none is known */
} zt_metrics;

/* Progress of long work (prep, export, checkpoint restore, Hugging Face
 * loads), reported to a caller-supplied function instead of printed: the
 * library never writes to the terminal itself.  update(user, what, done,
 * total, unit, final): `done` of `total` units so far (total 0 =
 * unknown); unit "B" = bytes, else what is counted ("tokens"); final = 1
 * once at the end.  Called
 * often (per chunk or tensor): the receiver decides when to show anything
 * (cli/progress.c).  In collective work only rank 0 reports.  A NULL
 * update: none. */
typedef struct zt_progress {
    void (*update)(void *user, const char *what, uint64_t done, uint64_t total, const char *unit,
                   int final);
    void *user;
} zt_progress;
static inline void zt_progress_report(const zt_progress *p, const char *what, uint64_t done,
                                      uint64_t total, const char *unit, int final) {
    if (p && p->update) p->update(p->user, what, done, total, unit, final);
}

/* Environment variables read as settings (the variables of the tests'
 * hooks, the CLI's progress and crash report, the Slurm plugin's and
 * Slurm's own; the ZTRAIN_<KEY> configuration variables are
 * zt_config_load_env's): one reader, as strict as a configuration key.
 * Unset or empty: *out = def and ZT_OK.  Anything else must be the whole
 * value -- an integer (base 10) or a number (no NaN, no infinity) in [min,
 * max], a boolean 1/0, true/false, yes/no, on/off (any case), or one of
 * `choices` (NULL-terminated; an entry ending in '*' is a prefix: "map:*");
 * else *out = def and ZT_EINVAL: "NAME='VALUE': expected an integer from
 * MIN to MAX" (st may be NULL: a value checked before). */
int zt_env_int(const char *name, long min, long max, long def, long *out, zt_status *st);
int zt_env_double(const char *name, double min, double max, double def, double *out, zt_status *st);
int zt_env_bool(const char *name, int def, int *out, zt_status *st);
int zt_env_choice(const char *name, const char *const *choices, int def, int *out, zt_status *st);

typedef struct zt_callbacks {
    /* Log lines (no trailing newline).  Called on every rank; the CLI
     * prints rank 0's only.  NULL: discard. */
    void (*log)(void *user, int level, const char *msg);
    /* Metrics, called on every rank with identical values.  NULL: none. */
    void (*metrics)(void *user, const zt_metrics *m);
    void *user;
    /* Progress of a checkpoint restore and a Hugging Face load (rank 0
     * only).  Zero: none. */
    zt_progress progress;
} zt_callbacks;

/* ---------------------------------------------------------------- data */

/* A source of training/eval windows.  The trainer asks for `count` samples
 * starting at global sample index `first` of optimizer step `step`
 * (eval uses step = -1 - eval_round).  Each sample is T+1 consecutive tokens;
 * the source writes inputs[i*T..] = tok[0..T-1], targets = tok[1..T].
 * Sample content must be a pure function of (seed, step, index) so runs are
 * reproducible and independent of the world size.
 *
 * count_targets (NULL: every target counts) is for a source with a loss
 * mask, whose get() writes -1 for the targets that do not count: *n = the
 * number of targets >= 0 that get() serves for samples [first, first+count)
 * of step.  The trainer asks for a whole global batch before the backward
 * (the same answer on every rank) and divides the summed loss by it. */
typedef struct zt_data_source {
    void *state;
    int (*get)(void *state, long step, uint64_t first, int count, int T,
               int *inputs, int *targets, zt_status *st);
    void (*close)(void *state);
    int (*count_targets)(void *state, long step, uint64_t first, int count, uint64_t *n,
                         zt_status *st);
} zt_data_source;

/* ---------------------------------------------------------------- training */

typedef struct zt_ctx zt_ctx;

/* Create a training context: finalizes a copy of cfg for the current world
 * size, allocates model, optimizer and activations, initializes parameters
 * from ztrain.seed (identically on every rank). */
int zt_ctx_create(const zt_config *cfg, const zt_callbacks *cb, zt_ctx **out,
                  zt_status *st);
/* zt_ctx_create with flags:
 *   ZT_CTX_DEFER_INIT  the initial values from ztrain.seed are owed, not
 *       written: parameters a load writes first (a checkpoint restore,
 *       zt_hf_load, zt_load_weights, a PEFT adapter) never get them; the
 *       others get them from zt_ctx_init_pending, which training,
 *       evaluation, sampling and weight export call first -- the same
 *       values bit for bit, without computing values a load overwrites. */
#define ZT_CTX_DEFER_INIT 1u
/*   ZT_CTX_PREFAULT  a background thread populates the fresh host buffers
 *       the first training step writes (gradients, AdamW moments,
 *       communication buffers, activations) while the caller loads weights
 *       and opens data; the first zt_train_step stops it.  Only time
 *       changes, not values; memory the run would touch at its first step
 *       is touched earlier (a context that never trains: do not ask). */
#define ZT_CTX_PREFAULT 2u
int zt_ctx_create_ex(const zt_config *cfg, const zt_callbacks *cb, unsigned flags,
                     zt_ctx **out, zt_status *st);
/* Write the initial values still owed (ZT_CTX_DEFER_INIT); none: a no-op. */
int zt_ctx_init_pending(zt_ctx *ctx, zt_status *st);
/* Where a context's start-up time went (this rank, seconds). */
typedef struct zt_startup {
    double planning_s;      /* memory planning: limits, "auto" micro batch, pre-flight */
    double allocation_s;    /* groups, model, engine, optimizer and activation buffers */
    double init_s;          /* random initialization so far (eager, or owed and paid) */
    uint64_t init_params;   /* parameters given random initial values so far */
    uint64_t num_params;    /* all parameters (with LoRA: base and adapters) */
} zt_startup;
void zt_ctx_startup(const zt_ctx *ctx, zt_startup *out);
/* The model's training FLOPs a token, as bench/README.md counts them (llm.c
 * and torchtitan do too): 6 a trained parameter, 4 a frozen one (LoRA's
 * base), of a Mixture of Experts the K of E routed experts a token runs,
 * plus 6 L (n_head head_dim) T for the causal attention (the built-in
 * models; a model of the caller's own: its parameters' terms alone). */
double zt_ctx_flops_per_token(const zt_ctx *ctx);
/* One device's dense peak in TFLOP/s at the run's matmul precision (16-bit
 * tensor cores, or fp32): ztrain.peak_tflops, else a known GPU's by the
 * name the cuda backend reports (H100, H200, A100), else 0 (the CPU); src
 * (NULL: none) gets where it came from, "" for 0. */
double zt_ctx_peak_tflops(const zt_ctx *ctx, char *src, size_t n);
void zt_ctx_free(zt_ctx *ctx);
/* The finalized configuration the context runs with. */
const zt_config *zt_ctx_config(const zt_ctx *ctx);

/* Attach data sources (ownership passes to the context; NULL val = no eval).
 * Token files named by the configuration: zt_ctx_open_data (ztrain_io.h). */
int zt_ctx_set_data(zt_ctx *ctx, zt_data_source train, zt_data_source val,
                    zt_status *st);

/* One optimizer step (all micro-steps, communication, update). */
int zt_train_step(zt_ctx *ctx, zt_metrics *out, zt_status *st);
/* Run until ztrain.steps, evaluating every ztrain.eval_every steps. */
int zt_train(zt_ctx *ctx, zt_status *st);
/* Forward-only evaluation on the val source: mean loss over
 * ztrain.eval_batches batches of ztrain.eval_batch_size samples each (a global
 * count, split over the ranks: the same samples at any world size)
 * (SFT data with a loss mask: the mean over its counted targets). */
int zt_evaluate(zt_ctx *ctx, double *val_loss, zt_status *st);
/* Mean loss of one explicit batch (B x T inputs/targets), forward only:
 * the mean over the targets >= 0 (targets < 0 are ignored; none >= 0 is
 * ZT_EINVAL). */
int zt_loss(zt_ctx *ctx, const int *inputs, const int *targets, int B, int T,
            double *loss, zt_status *st);
/* Autoregressive sampling: extends `prompt` by n_new tokens written to out
 * (out has room for n_new).  temperature > 0; top_k 0 = full distribution.
 * Deterministic in `seed`. */
int zt_sample(zt_ctx *ctx, const int *prompt, int n_prompt, int n_new,
              double temperature, int top_k, uint64_t seed, int *out,
              zt_status *st);

/* After the last training step (zt_run calls it before the weights file
 * and the sample): frees the training and evaluation activation blocks, so
 * that a weights export or zt_sample does not run next to them; a later
 * zt_train_step or zt_evaluate allocates them again. */
void zt_ctx_release_activations(zt_ctx *ctx);

/* Optimizer steps completed. */
long zt_ctx_step(const zt_ctx *ctx);

/* Accounted memory of this rank, per category.  Every buffer libtrain
 * allocates for training carries one of these tags; models allocate their
 * activations with zt_alloc (below) so they are counted too. */
typedef enum zt_mem_category {
    ZT_MEM_PARAMS = 0,   /* parameters this rank keeps                        */
    ZT_MEM_GRADS,        /* gradients (full block at stages 0-1, shard at 2-3) */
    ZT_MEM_OPTIMIZER,    /* AdamW moments (and fp32 master weights)           */
    ZT_MEM_GATHERED,     /* units materialized for compute: all-gathered
                          * (stage 3), widened to fp32 (bf16/fp16)            */
    ZT_MEM_ACTIVATIONS,  /* training activations and token batches            */
    ZT_MEM_COMM,         /* communication buffers, gradient buckets           */
    ZT_MEM_WORKSPACE,    /* temporaries (sampling, export)                    */
    ZT_MEM_EVAL          /* forward-only evaluation activations               */
} zt_mem_category;
#define ZT_MEM_CATEGORIES 8
typedef struct zt_memory_report {
    const char *name[ZT_MEM_CATEGORIES];
    uint64_t current[ZT_MEM_CATEGORIES], peak[ZT_MEM_CATEGORIES];
    uint64_t current_total, peak_total;
    /* the part of each category (already counted above) placed in host
     * memory because it is offloaded (zero_optimization.offload_optimizer,
     * .offload_param) */
    uint64_t host_current[ZT_MEM_CATEGORIES], host_peak[ZT_MEM_CATEGORIES];
    /* the part of the offloaded bytes that is page-locked (pin_memory on a
     * backend that can pin: cuda; always 0 on cpu and cpu-strict) */
    uint64_t pinned_current, pinned_peak;
} zt_memory_report;
void zt_memory(zt_memory_report *out);

/* Bytes this rank has sent in collectives, per kind (0 all-reduce,
 * 1 reduce-scatter, 2 all-gather, 3 broadcast), over all its groups. */
uint64_t zt_ctx_comm_bytes(const zt_ctx *ctx, int kind);
/* Number of parameters (logical, unsharded). */
size_t zt_ctx_num_params(const zt_ctx *ctx);

/* ---------------------------------------------------------------- models: the unit API
 *
 * The ZeRO engine does not know what a transformer is.  It trains any model
 * that describes its parameters as UNITS -- ordered groups of named fp32
 * tensors, each unit one flat buffer -- and computes through four calls:
 *
 *   describe   the model lists its units and tensors once (zt_layout_*);
 *              the engine lays them out, shards every unit over the ranks
 *              (contiguous 1/N slices, any size works with any world size)
 *              and initializes them (values depend only on the seed, the
 *              tensor name and the element: identical at every stage and
 *              world size).
 *   forward    before touching unit u's parameters the model calls
 *              zt_unit_params(U, u) -- at ZeRO-3 this is where the unit is
 *              all-gathered (the engine has already prefetched it) -- and
 *              zt_unit_release(U, u) when it no longer needs them (ZeRO-3
 *              frees the gathered copy).
 *   backward   the same for parameters; zt_unit_grads(U, u) gives a buffer
 *              shaped like the unit that the model ACCUMULATES (+=) the
 *              unit's gradient into; zt_unit_grads_done(U, u) says it is
 *              complete, and ZeRO-2/3 reduce-scatter it at once, so no
 *              full-model gradient buffer exists.
 *   acts       activation state for a batch shape, allocated by the model
 *              with zt_alloc() so the memory report and planner see it.
 *
 * The engine prefetches unit u+1 during forward and u-1 during backward:
 * order units the way forward first uses them.  Pointers from
 * zt_unit_params / zt_unit_grads stay valid until the release / grads_done
 * call (or the end of the pass).  A unit may be requested again after its
 * release (e.g. a tied embedding used by the head).  The built-in GPT-2
 * (libtrain/gpt.c) is written against exactly this API; examples/ has a
 * small model of its own.  Pointers are host fp32 on the CPU backend; on a
 * device backend (ztrain.backend=cuda, cpu-strict) every pointer the engine
 * hands the model -- parameters, gradient buffers, the token arrays of
 * forward, zt_alloc'd activations, and what probs returns -- is memory of
 * that backend's device, to be computed on with its table only.
 */
typedef struct zt_layout zt_layout;   /* the describe() builder */
typedef struct zt_units zt_units;     /* the engine, as a model sees it */

typedef enum zt_init {
    ZT_INIT_ZEROS = 0,   /* 0                          */
    ZT_INIT_ONES,        /* 1 (e.g. LayerNorm gains)   */
    ZT_INIT_NORMAL,      /* N(0, std^2)                */
    ZT_INIT_UNIFORM      /* U(-std, std) (LoRA's A: Kaiming-uniform, a = sqrt(5)) */
} zt_init_kind;
#define ZT_TENSOR_DECAY 1u    /* AdamW weight decay applies to this tensor */
#define ZT_TENSOR_GEMM 2u     /* read only as a GEMM weight: where the engine hands the model
                               * the bf16 storage (zt_unit_params16) the fp32 copy of the
                               * unit leaves it out (zt_unit_params32) */

/* Start a new unit; the tensors added next belong to it. */
int zt_layout_unit(zt_layout *L, const char *name, zt_status *st);
/* Add a [rows, cols] tensor (cols = 1 for a vector) to the current unit.
 * *offset (may be NULL) receives its element offset inside the unit.
 * Names must be unique (they key the initialization and checkpoints). */
int zt_layout_tensor(zt_layout *L, const char *name, int rows, int cols, zt_init_kind init,
                     double std, unsigned flags, size_t *offset, zt_status *st);

typedef struct zt_model_ops {
    const char *name;
    /* List units and tensors (called once, at context creation). */
    int (*describe)(void *self, zt_layout *L, zt_status *st);
    /* Activation state for batches [B, T]; training = kept for backward.
     * Allocate with zt_alloc(bytes, mem_category, st). */
    int (*acts_create)(void *self, int B, int T, int training, int mem_category,
                       void **acts, zt_status *st);
    void (*acts_free)(void *self, void *acts);
    /* Forward over inputs[B*T] (token ids in [0, vocab)).  With targets
     * (NULL = none; entries < 0 are ignored) set *loss_sum to the SUM of the
     * per-position losses.  The token arrays stay valid through backward. */
    int (*forward)(void *self, zt_units *U, void *acts, const int *inputs,
                   const int *targets, int B, int T, double *loss_sum, zt_status *st);
    /* Backward of the last forward on the same acts; dloss is the weight of
     * each position's loss in the objective. */
    int (*backward)(void *self, zt_units *U, void *acts, float dloss, zt_status *st);
    /* Optional (sampling): next-token distribution [vocab] at row b,
     * position t after a forward; NULL for a position whose distribution
     * the model did not keep (the built-in models keep the last chunk of
     * ztrain.classifier_chunk_rows positions, so always the last position
     * of the last row, which sampling asks for). */
    const float *(*probs)(void *self, void *acts, int b, int t);
    /* Optional: free self when the context is freed. */
    void (*destroy)(void *self);
} zt_model_ops;

/* Parameters of unit u for compute (see above); NULL + st on failure. */
float *zt_unit_params(zt_units *U, int unit, zt_status *st);
/* The same parameters as bf16 bits, laid out as zt_unit_params' (the
 * engine's 16-bit storage: each value is the fp32 one exactly), for GEMMs
 * in bf16 matmul mode (kernels/backend.h matmul_fwd_w16 ...); valid while
 * zt_unit_params' is.  NULL where there is none (fp32 or fp16 storage, fp32
 * matmuls, not the cuda backend, ZeRO stage 3, a frozen base): use the fp32
 * parameters. */
const uint16_t *zt_unit_params16(zt_units *U, int unit);
int zt_unit_release(zt_units *U, int unit, zt_status *st);
/* Gradient accumulation buffer of unit u (backward only; also in a
 * zt_train_step forward, which told the engine its backward's dloss: the
 * built-in models' fused LM head, docs/units.md); NULL + st. */
float *zt_unit_grads(zt_units *U, int unit, zt_status *st);
int zt_unit_grads_done(zt_units *U, int unit, zt_status *st);
/* Number of units, and a unit's element count (for models that check). */
int zt_units_count(const zt_units *U);
size_t zt_unit_numel(const zt_units *U, int unit);

/* Accounted allocation: 256-byte aligned, zero-filled; NULL + st on failure.
 * category is a zt_mem_category.  Memory of the context's backend (device
 * memory on a device backend). */
void *zt_alloc(size_t bytes, int category, zt_status *st);
void zt_free(void *p);

/* Create a training context over a model of your own (zt_ctx_create uses
 * the built-in GPT-2 described by the ztrain.model.* keys).  The config's
 * ztrain.model.context is the sequence length T the trainer feeds and
 * ztrain.model.vocab bounds the token ids.  ops must outlive the context;
 * self is passed back to every op (and to ops->destroy at zt_ctx_free). */
int zt_ctx_create_model(const zt_config *cfg, const zt_model_ops *ops, void *self,
                        const zt_callbacks *cb, zt_ctx **out, zt_status *st);

/* Weights files and checkpoints: ztrain_ckpt.h. */

#ifdef __cplusplus
}
#endif
#endif /* ZTRAIN_H */
