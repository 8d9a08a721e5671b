/*
 * config.c -- the configuration table and everything driven by it.
 *
 * One table (`keys` below) lists every configuration key: its JSON path,
 * flag aliases, extra environment name, type, field, range, default, allowed
 * values and help text.  Parsing (JSON file, environment, flags), validation,
 * precedence, provenance, describe/to_json output and the help text are all
 * derived from it.  Adding a key = adding one row (and a field in config.h).
 *
 * Sources rank default < file < env < flag; a value set from a lower source
 * than the one it currently has is validated and then ignored, so file, env
 * and flags can be applied in any order.  Values computed by
 * zt_config_finalize carry ZT_SRC_DERIVED and are recomputed by every
 * finalize (an explicit set always replaces a derived value).
 *
 * Settings that are valid but not implemented yet are refused in ONE place:
 * check_implemented().
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "arch.h"
#include "internal.h"
#include "ztrain_env.h"

/* ================================================================ table */

enum ktype {
    T_INT,      /* int field                                   */
    T_LONG,     /* long field                                  */
    T_U64,      /* unsigned long long field                    */
    T_DOUBLE,   /* double field                                */
    T_BOOL,     /* int field, 0/1                              */
    T_STRING,   /* char[] field                                */
    T_ENUM,     /* char[] field, one of `values` (canonical)   */
    T_PAIR,     /* two consecutive double fields (betas)       */
    T_PSEUDO    /* no field: expands into other keys           */
};

/* key flags */
#define KF_LO_OPEN   0x01u  /* lower bound exclusive (numbers)          */
#define KF_HI_OPEN   0x02u  /* upper bound exclusive (numbers)          */
#define KF_NO_HI     0x04u  /* no upper bound (up to the type's max)    */
#define KF_NONEMPTY  0x08u  /* strings: must not be empty               */
#define KF_AUTO      0x10u  /* "auto" accepted: 0 (derive), or -1 with KF_FIT */
#define KF_FIT       0x20u  /* with KF_AUTO: "auto" = fit to the memory limit (-1) */
#define KF_SIZE      0x40u  /* T_U64: a byte size, "8G", "512M", "auto" = 0 */
#define KF_ACKPT     0x80u  /* T_STRING: none | blocks | every-K */
#define KF_REPORT    0x100u /* T_STRING: off | end | N; a flag may omit the value */
#define KF_NODE      0x200u /* T_INT: "node" accepted (ZT_SHARD_GROUP_NODE) */

typedef struct keydef {
    const char *key;      /* JSON path                                     */
    const char *flags;    /* space-separated short flag aliases (or NULL)  */
    const char *env;      /* short env name besides the generic (or NULL)  */
    const char *json_alias; /* other JSON path accepted in files (or NULL) */
    int type;             /* enum ktype                                    */
    size_t off, size;     /* field                                         */
    double lo, hi;        /* numeric range                                 */
    unsigned kf;          /* KF_*                                          */
    const char *def;      /* default in string syntax (NULL: pseudo-key)   */
    const char *values;   /* T_ENUM / T_PSEUDO: allowed values, '|'-separated */
    const char *help;
} keydef;

#define FLD(f) offsetof(struct zt_config, f), sizeof(((struct zt_config *)0)->f)
#define NOFLD 0, 0

static const keydef keys[] = {
    /* ---- DeepSpeed batch triple and clipping */
    {"train_batch_size", "batch-size", NULL, NULL, T_INT, FLD(train_batch_size),
     0, 0, KF_NO_HI | KF_AUTO, "0", NULL,
     "global batch (samples per optimizer step); 0 or \"auto\" = derive from the other two"},
    {"train_micro_batch_size_per_gpu", "micro-batch", NULL, NULL, T_INT, FLD(micro_batch),
     0, 0, KF_NO_HI | KF_AUTO | KF_FIT, "0", NULL,
     "samples per rank per micro-step; 0 = derive (16 if nothing is given); \"auto\" = the "
     "largest that fits the memory limit, keeping train_batch_size (see docs/memory.md)"},
    {"gradient_accumulation_steps", "grad-accum", NULL, NULL, T_INT, FLD(grad_accum),
     0, 0, KF_NO_HI | KF_AUTO, "0", NULL,
     "micro-steps per optimizer step; 0 or \"auto\" = derive"},
    {"gradient_clipping", "clip", NULL, NULL, T_DOUBLE, FLD(grad_clip),
     0, 0, KF_NO_HI, "1.0", NULL,
     "clip the global gradient norm to this value; 0 = off"},

    /* ---- ZeRO */
    {"zero_optimization.stage", "stage", ZTRAIN_ENV_STAGE, NULL, T_INT, FLD(zero_stage),
     ZTRAIN_STAGE_MIN, ZTRAIN_STAGE_MAX, 0, "0", NULL,
     "ZeRO stage: 0 = replicated, 1 = optimizer state, 2 = +gradients, 3 = +parameters"},
    {"zero_optimization.shard_group_size", "shard-group", NULL, NULL, T_INT, FLD(shard_group_size),
     0, 0, KF_NO_HI | KF_NODE, "0", NULL,
     "shard inside groups of this many consecutive ranks, replicate across groups "
     "(hybrid sharding); 0 = the world size; \"node\" = the ranks of one node"},
    {"zero_optimization.overlap_comm", "overlap-comm", NULL, NULL, T_BOOL, FLD(overlap_comm),
     0, 0, 0, "true", NULL,
     "stages 2-3: start each unit's gradient reduce-scatter as soon as its backward is done and "
     "let it run while the backward of the next units computes (at most 2 in flight: up to 2 "
     "more unit-sized gradient buckets live at once); false = reduce each unit before going on"},
    {"zero_optimization.offload_optimizer.device", NULL, NULL, NULL, T_ENUM,
     FLD(offload_optimizer), 0, 0, 0, "none", "none|cpu",
     "where optimizer state lives"},
    {"zero_optimization.offload_optimizer.pin_memory", NULL, NULL, NULL, T_BOOL,
     FLD(pin_optimizer), 0, 0, 0, "false", NULL,
     "page-lock the offloaded optimizer state (a backend that can pin: cuda)"},
    {"zero_optimization.offload_param.device", NULL, NULL, NULL, T_ENUM,
     FLD(offload_param), 0, 0, 0, "none", "none|cpu",
     "where sharded parameters live (stage 3, with offload_optimizer.device=cpu)"},
    {"zero_optimization.offload_param.pin_memory", NULL, NULL, NULL, T_BOOL,
     FLD(pin_param), 0, 0, 0, "false", NULL,
     "page-lock the offloaded parameter shards (a backend that can pin: cuda)"},

    /* ---- precision */
    {"bf16.enabled", NULL, NULL, NULL, T_BOOL, FLD(bf16_enabled),
     0, 0, 0, "false", NULL, "bfloat16 mixed precision"},
    {"fp16.enabled", NULL, NULL, NULL, T_BOOL, FLD(fp16_enabled),
     0, 0, 0, "false", NULL, "float16 mixed precision with loss scaling"},
    {"fp16.loss_scale", NULL, NULL, NULL, T_DOUBLE, FLD(fp16_loss_scale),
     0, 0, KF_NO_HI, "0", NULL, "static loss scale; 0 = dynamic"},
    {"fp16.initial_scale_power", NULL, NULL, NULL, T_INT, FLD(fp16_initial_scale_power),
     0, 64, 0, "16", NULL, "dynamic loss scale starts at 2^this"},
    {"fp16.loss_scale_window", NULL, NULL, NULL, T_INT, FLD(fp16_loss_scale_window),
     1, 0, KF_NO_HI, "1000", NULL, "overflow-free steps before the scale grows"},
    {"fp16.hysteresis", NULL, NULL, NULL, T_INT, FLD(fp16_hysteresis),
     1, 0, KF_NO_HI, "2", NULL, "overflows tolerated before the scale shrinks"},
    {"fp16.min_loss_scale", NULL, NULL, NULL, T_DOUBLE, FLD(fp16_min_loss_scale),
     0, 0, KF_LO_OPEN | KF_NO_HI, "1", NULL, "lower bound of the dynamic loss scale"},
    {"communication_data_type", "comm-dtype", NULL, NULL, T_ENUM, FLD(comm_dtype),
     0, 0, 0, "fp32", "fp32|bf16|fp16",
     "element type of gradient reductions (all-reduce, reduce-scatter); sums accumulate in "
     "fp32 per element either way. fp32 in every precision mode unless set: bf16/fp16 halve "
     "the reduction bytes but round every partial sum"},

    /* ---- optimizer */
    {"optimizer.type", NULL, NULL, NULL, T_ENUM, FLD(optimizer_type),
     0, 0, 0, "AdamW", "AdamW|Adam",
     "optimizer (case-insensitive); Adam is DeepSpeed's Adam, AdamW with adam_w_mode=true"},
    {"optimizer.params.adam_w_mode", NULL, NULL, NULL, T_BOOL, FLD(adam_w_mode),
     0, 0, 0, "true", NULL,
     "Adam: decoupled weight decay (AdamW); false (L2 regularization) is not implemented"},
    {"optimizer.params.lr", "lr", NULL, "scheduler.params.warmup_max_lr", T_DOUBLE, FLD(lr),
     0, 0, KF_LO_OPEN | KF_NO_HI, "3e-4", NULL, "peak learning rate"},
    {"optimizer.params.betas", NULL, NULL, NULL, T_PAIR, offsetof(struct zt_config, beta1),
     2 * sizeof(double), 0, 1, KF_HI_OPEN, "[0.9, 0.95]", NULL,
     "AdamW beta1, beta2"},
    {"optimizer.params.eps", NULL, NULL, NULL, T_DOUBLE, FLD(eps),
     0, 0, KF_LO_OPEN | KF_NO_HI, "1e-8", NULL, "AdamW epsilon"},
    {"optimizer.params.weight_decay", "weight-decay", NULL, NULL, T_DOUBLE, FLD(weight_decay),
     0, 0, KF_NO_HI, "0.1", NULL, "decoupled weight decay (matrices only)"},

    /* ---- scheduler */
    {"scheduler.type", NULL, NULL, NULL, T_ENUM, FLD(scheduler_type),
     0, 0, 0, "WarmupCosineLR", "WarmupCosineLR|WarmupLR|WarmupDecayLR|none",
     "learning-rate schedule: WarmupCosineLR; DeepSpeed's WarmupLR (warmup, then constant) and "
     "WarmupDecayLR (warmup, then linear decay to warmup_min_lr at total_num_steps); none = "
     "constant lr. WarmupLR/WarmupDecayLR: warmup_max_lr is optimizer.params.lr"},
    {"scheduler.params.warmup_min_lr", NULL, NULL, NULL, T_DOUBLE, FLD(warmup_min_lr),
     0, 0, KF_NO_HI, "0", NULL, "WarmupLR, WarmupDecayLR: learning rate at step 0"},
    {"scheduler.params.warmup_num_steps", "warmup", NULL, NULL, T_INT, FLD(warmup_steps),
     0, 0, KF_NO_HI, "0", NULL, "warmup steps"},
    {"scheduler.params.total_num_steps", NULL, NULL, NULL, T_INT, FLD(total_steps),
     0, 0, KF_NO_HI, "0", NULL, "schedule length; 0 = ztrain.steps"},
    {"scheduler.params.warmup_min_ratio", NULL, NULL, NULL, T_DOUBLE, FLD(warmup_min_ratio),
     0, 1, 0, "0.0", NULL, "warmup starts at lr * this"},
    {"scheduler.params.cos_min_ratio", NULL, NULL, NULL, T_DOUBLE, FLD(cos_min_ratio),
     0, 1, 0, "0.1", NULL, "cosine decay ends at lr * this"},
    {"scheduler.params.warmup_type", NULL, NULL, NULL, T_ENUM, FLD(warmup_type),
     0, 0, 0, "linear", "linear|log", "warmup curve"},

    /* ---- model */
    {"ztrain.model.n_layer", "n-layer", NULL, NULL, T_INT, FLD(model.n_layer),
     1, 4096, 0, "4", NULL, "transformer blocks"},
    {"ztrain.model.n_head", "n-head", NULL, NULL, T_INT, FLD(model.n_head),
     1, 4096, 0, "4", NULL, "attention heads (must divide n_embd)"},
    {"ztrain.model.n_embd", "n-embd", NULL, NULL, T_INT, FLD(model.n_embd),
     1, 65536, 0, "128", NULL, "embedding width"},
    {"ztrain.model.context", "context", NULL, NULL, T_INT, FLD(model.context),
     1, 1048576, 0, "128", NULL,
     "the model's maximum positions (GPT-2: rows of the position table; Llama: "
     "max_position_embeddings); the training length is ztrain.seq_len"},
    {"ztrain.model.vocab", "vocab", NULL, NULL, T_INT, FLD(model.vocab),
     2, 1048576, 0, "256", NULL, "vocabulary size"},
    {"ztrain.model.arch", "arch", NULL, NULL, T_ENUM, FLD(model.arch),
     0, 0, 0, "gpt2", "gpt2|llama",
     "architecture: gpt2 (learned positions, LayerNorm, GELU, tied head) or llama (RMSNorm, "
     "rotary positions, SwiGLU, grouped-query attention: Llama, Mistral, Qwen2, SmolLM)"},
    {"ztrain.model.n_kv_head", "n-kv-head", NULL, NULL, T_INT, FLD(model.n_kv_head),
     0, 4096, 0, "0", NULL,
     "llama: key/value heads (grouped-query attention; must divide n_head; 1 = multi-query); "
     "0 = n_head"},
    {"ztrain.model.head_dim", "head-dim", NULL, NULL, T_INT, FLD(model.head_dim),
     0, 65536, 0, "0", NULL, "llama: width of one attention head (even); 0 = n_embd / n_head"},
    {"ztrain.model.intermediate_size", "intermediate-size", NULL, NULL, T_INT,
     FLD(model.intermediate), 0, 1048576, 0, "0", NULL,
     "llama: SwiGLU MLP width; 0 = 4 * n_embd"},
    {"ztrain.model.rms_norm_eps", "rms-norm-eps", NULL, NULL, T_DOUBLE, FLD(model.norm_eps),
     0, 1, KF_LO_OPEN, "1e-5", NULL, "llama: RMSNorm epsilon"},
    {"ztrain.model.rope_theta", "rope-theta", NULL, NULL, T_DOUBLE, FLD(model.rope_theta),
     0, 0, KF_LO_OPEN | KF_NO_HI, "10000", NULL, "llama: rotary embedding base"},
    {"ztrain.model.rope_scaling", "rope-scaling", NULL, NULL, T_ENUM, FLD(model.rope_scaling),
     0, 0, 0, "none", "none|llama3",
     "llama: rotary frequency scaling (llama3: Llama 3.1's wavelength-dependent scaling)"},
    {"ztrain.model.rope_factor", NULL, NULL, NULL, T_DOUBLE, FLD(model.rope_factor),
     1, 0, KF_NO_HI, "8", NULL, "llama3 rope scaling: factor"},
    {"ztrain.model.rope_low_freq_factor", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.rope_low_freq_factor), 0, 0, KF_LO_OPEN | KF_NO_HI, "1", NULL,
     "llama3 rope scaling: low_freq_factor"},
    {"ztrain.model.rope_high_freq_factor", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.rope_high_freq_factor), 0, 0, KF_LO_OPEN | KF_NO_HI, "4", NULL,
     "llama3 rope scaling: high_freq_factor (> low_freq_factor)"},
    {"ztrain.model.rope_original_max_positions", NULL, NULL, NULL, T_INT,
     FLD(model.rope_original_max), 1, 0, KF_NO_HI, "8192", NULL,
     "llama3 rope scaling: original_max_position_embeddings"},
    {"ztrain.model.attention_bias", "attention-bias", NULL, NULL, T_BOOL,
     FLD(model.attention_bias), 0, 0, 0, "false", NULL, "llama: q/k/v projections have biases (Qwen2)"},
    {"ztrain.model.tie_embeddings", "tie-embeddings", NULL, NULL, T_BOOL,
     FLD(model.tie_embeddings), 0, 0, 0, "true", NULL,
     "the LM head is the token embedding (gpt2: always)"},
    {"ztrain.model.hf_architecture", "hf-architecture", NULL, NULL, T_STRING,
     FLD(model.hf_architecture), 0, 0, 0, "", NULL,
     "the Hugging Face class the model exports as (set by --init-from); \"\" = the "
     "architecture's default (llama: Qwen2ForCausalLM with attention_bias, else LlamaForCausalLM)"},

    {"ztrain.seq_len", "seq-len", NULL, NULL, T_INT, FLD(seq_len),
     0, 1048576, 0, "0", NULL,
     "tokens per training and evaluation sample; 0 = ztrain.model.context (at most that)"},
    {"ztrain.init_from", "init-from", NULL, NULL, T_STRING, FLD(init_from),
     0, 0, 0, "", NULL,
     "a Hugging Face model directory (config.json + safetensors): its config.json sets "
     "ztrain.model.* and its weights start the run; \"\" = random initialization"},

    /* ---- data */
    {"ztrain.data.train", "train", NULL, NULL, T_STRING, FLD(data_train),
     0, 0, 0, "data/tinyshakespeare_train.bin", NULL, "training token shards (file or glob)"},
    {"ztrain.data.val", "val", NULL, NULL, T_STRING, FLD(data_val),
     0, 0, 0, "data/tinyshakespeare_val.bin", NULL, "validation token shards; \"\" = no eval"},
    {"ztrain.data.dataloaders", "dataloaders", ZTRAIN_ENV_DATALOADERS, NULL, T_INT,
     FLD(dataloaders), 0, ZTRAIN_DATALOADERS_MAX, 0, "0", NULL,
     "data-loader threads per rank; 0 = auto"},

    /* ---- run */
    {"ztrain.steps", "steps", NULL, NULL, T_LONG, FLD(steps),
     1, 0, KF_NO_HI, "1000", NULL, "optimizer steps to train"},
    {"ztrain.seed", "seed", NULL, NULL, T_U64, FLD(seed),
     0, 0, 0, "1337", NULL, "seed of initialization and data order"},
    {"ztrain.eval_every", "eval-every", NULL, NULL, T_INT, FLD(eval_every),
     0, 0, KF_NO_HI, "100", NULL, "evaluate every N steps; 0 = only at the end"},
    {"ztrain.eval_batch_size", "eval-batch-size", NULL, NULL, T_INT, FLD(eval_batch_size),
     0, 0, KF_NO_HI, "0", NULL, "samples per eval batch, all ranks together; 0 = micro batch x data-parallel ranks"},
    {"ztrain.eval_batches", "eval-batches", NULL, NULL, T_INT, FLD(eval_batches),
     1, 0, KF_NO_HI, "8", NULL, "batches per evaluation"},
    {"ztrain.log_every", "log-every", NULL, "steps_per_print", T_INT, FLD(log_every),
     1, 0, KF_NO_HI, "10", NULL, "log every N steps (DeepSpeed: steps_per_print)"},
    {"ztrain.metrics", "metrics", NULL, NULL, T_STRING, FLD(metrics),
     0, 0, 0, "", NULL, "JSONL metrics file written by rank 0; \"\" = none"},
    {"ztrain.threads", "threads", NULL, NULL, T_INT, FLD(threads),
     0, 1024, 0, "0", NULL, "OpenMP threads per rank; 0 = auto"},
    {"ztrain.comm_timeout_s", "comm-timeout", NULL, NULL, T_DOUBLE, FLD(comm_timeout_s),
     0, 0, KF_NO_HI, "300", NULL,
     "a collective waiting longer than this many seconds fails with the operation, "
     "step and unit (a rank died or hangs); 0 = wait forever"},
    {"ztrain.backend", "backend", NULL, NULL, T_ENUM, FLD(backend),
     0, 0, 0, "cpu", "cpu|cuda|cpu-strict",
     "compute backend (cpu-strict: the cpu kernels on memory the host cannot touch, for "
     "debugging the engine's device discipline)"},
    {"ztrain.comm_backend", "comm-backend", NULL, NULL, T_ENUM, FLD(comm_backend),
     0, 0, 0, "auto", "auto|mpi|nccl",
     "collectives on device buffers: mpi = host-staged MPI, nccl = NCCL (cuda, one rank per "
     "GPU), auto = nccl when built with it and every rank of a node has its own GPU, else mpi"},

    /* ---- checkpoints */
    {"ztrain.checkpoint.dir", "ckpt-dir", ZTRAIN_ENV_CKPT_DIR, NULL, T_STRING, FLD(ckpt_dir),
     0, 0, KF_NONEMPTY, "checkpoints", NULL, "checkpoint directory"},
    {"ztrain.checkpoint.every", "ckpt-every", ZTRAIN_ENV_CKPT_EVERY, NULL, T_INT,
     FLD(ckpt_every), 0, 0, KF_NO_HI, "0", NULL, "checkpoint every N steps; 0 = off"},
    {"ztrain.checkpoint.keep", "ckpt-keep", NULL, NULL, T_INT, FLD(ckpt_keep),
     2, 0, KF_NO_HI, "2", NULL, "checkpoints kept on disk"},
    {"ztrain.checkpoint.resume", "resume", ZTRAIN_ENV_RESUME, NULL, T_STRING, FLD(ckpt_resume),
     0, 0, KF_NONEMPTY, "auto", NULL,
     "auto (newest verifying checkpoint in checkpoint.dir) | never | PATH of a checkpoint"},
    {"ztrain.checkpoint.every_minutes", "ckpt-every-minutes", NULL, NULL, T_DOUBLE,
     FLD(ckpt_every_minutes), 0, 0, KF_NO_HI, "0", NULL,
     "also checkpoint when this many minutes passed since the last save; 0 = off"},
    {"ztrain.checkpoint.restore", "ckpt-restore", NULL, NULL, T_ENUM, FLD(ckpt_restore),
     0, 0, 0, "one-reader", "one-reader|parallel",
     "restore: rank 0 reads and sends each slice (one-reader) or every rank reads its own (parallel)"},
    {"ztrain.checkpoint.on_failure", "ckpt-on-failure", NULL, NULL, T_ENUM, FLD(ckpt_on_failure),
     0, 0, 0, "stop", "stop|continue",
     "a save that fails on any rank is abandoned everywhere (the previous checkpoint stays latest); "
     "then stop (exit 1) or continue training and retry at the next save, with a warning"},
    {"ztrain.preempt_signal", "preempt-signal", NULL, NULL, T_ENUM, FLD(preempt_signal),
     0, 0, 0, "SIGUSR2", "SIGUSR2|SIGTERM|SIGINT|SIGHUP",
     "signal that makes every rank checkpoint and stop at the next step (SIGTERM always does; "
     "SIGUSR1 is refused: NCCL uses it)"},
    {"ztrain.requeue", "requeue", NULL, NULL, T_ENUM, FLD(requeue),
     0, 0, 0, "auto", "auto|true|false",
     "after a preemption checkpoint under Slurm rank 0 runs scontrol requeue: auto = when the "
     "job is requeueable (Requeue=1)"},

    /* ---- memory planner (docs/memory.md) */
    {"activation_checkpointing.policy", "activation-checkpointing act-ckpt", ZTRAIN_ENV_ACT_CKPT,
     NULL, T_STRING, FLD(act_ckpt), 0, 0, KF_ACKPT, "none", NULL,
     "keep only block inputs and recompute blocks in backward: none | blocks | every-K "
     "(keep the input of every K-th block, recompute groups of K blocks)"},
    {"ztrain.memory_limit", "memory-limit", NULL, NULL, T_U64,
     FLD(memory_limit), 0, 0, KF_SIZE, "0", NULL,
     "memory one rank may use (bytes; K/M/G/T suffixes are binary: 8G = 8 GiB); the "
     "pre-flight check refuses a run predicted to exceed it; 0 or auto = available memory / "
     "ranks per node (CPU), free device memory (GPU)"},
    {"ztrain.strict_device_memory", "strict-device-memory", NULL, NULL, T_U64,
     FLD(strict_device_memory), 0, 0, KF_SIZE, "0", NULL,
     "backend cpu-strict only: emulate a device of this capacity per rank (bytes; K/M/G/T "
     "binary): allocations beyond it fail and the pre-flight check sees it as free device "
     "memory; 0 = none"},
    {"ztrain.force", "force", NULL, NULL, T_BOOL, FLD(force), 0, 0, 0, "false", NULL,
     "start even when the pre-flight check predicts that the run does not fit"},
    {"ztrain.memory_report", "memory-report", NULL, NULL, T_STRING, FLD(memory_report),
     0, 0, KF_REPORT, "off", NULL,
     "current/peak/predicted memory per category: off | end (at the end) | N (every N steps, "
     "after each evaluation and at the end); --memory-report alone = end"},

    /* ---- pseudo-keys (not printed; they set the keys named in `help`) */
    {"precision", "precision", NULL, NULL, T_PSEUDO, NOFLD, 0, 0, 0, NULL, "fp32|bf16|fp16",
     "sets bf16.enabled and fp16.enabled"},
    {"offload", "offload", NULL, NULL, T_PSEUDO, NOFLD, 0, 0, 0, NULL, "none|optimizer|params",
     "sets zero_optimization.offload_{optimizer,param}.device (params implies both)"},
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* Environment variables that are not configuration keys but are allowed. */
static const char *const env_informational[] = {
    ZTRAIN_ENV_GPU_BIND, ZTRAIN_ENV_RESTART_COUNT, ZTRAIN_ENV_SLURM_RANK,
    ZTRAIN_ENV_SLURM_LOCAL, ZTRAIN_ENV_PLUGIN, ZTRAIN_ENV_SITE_LIMITS,
#ifdef ZTRAIN_ENV_OMP_AUTO
    ZTRAIN_ENV_OMP_AUTO,
#endif
    "ZTRAIN_CONFIG",   /* config-file path read by the CLI */
};

/* ================================================================ helpers */

static void *fieldp(zt_config *cfg, const keydef *k) { return (char *)cfg + k->off; }
static const void *cfieldp(const zt_config *cfg, const keydef *k) {
    return (const char *)cfg + k->off;
}

static int key_index(const char *key) {
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].key, key) == 0) return i;
    return -1;
}

/* Flag aliases compare with '-' and '_' interchangeable. */
static int alias_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char ca = *a == '_' ? '-' : *a, cb = *b == '_' ? '-' : *b;
        if (ca != cb) return 0;
    }
    return *a == *b;
}

static int has_alias(const char *list, const char *name) {
    if (!list) return 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char buf[64];
        if (n < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            if (alias_eq(buf, name)) return 1;
        }
        p += n;
        while (*p == ' ') p++;
    }
    return 0;
}

/* A key path, a flag alias (with or without leading "--") or a JSON alias. */
static int lookup(const char *name) {
    if (!name) return -1;
    while (*name == '-') name++;
    int i = key_index(name);
    if (i >= 0) return i;
    for (i = 0; i < NKEYS; i++)
        if (has_alias(keys[i].flags, name) ||
            (keys[i].json_alias && strcmp(keys[i].json_alias, name) == 0))
            return i;
    return -1;
}

/* Generic environment name: ZTRAIN_ + path upper-cased, '.' -> '_',
 * leading "ztrain." dropped. */
static void env_generic(const char *key, char *buf, size_t n) {
    if (strncmp(key, "ztrain.", 7) == 0) key += 7;
    size_t j = 0;
    const char *pre = "ZTRAIN_";
    for (; *pre && j + 1 < n; pre++) buf[j++] = *pre;
    for (; *key && j + 1 < n; key++)
        buf[j++] = *key == '.' ? '_' : (char)toupper((unsigned char)*key);
    buf[j] = '\0';
}

/* Optimal-string-alignment distance (Levenshtein + adjacent transposition),
 * three rolling rows. */
static int edit_distance(const char *a, const char *b) {
    enum { MAXL = 200 };
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAXL || lb > MAXL) return 1000;
    int r0[MAXL + 1], r1[MAXL + 1], r2[MAXL + 1];   /* rows i-2, i-1, i */
    int *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= lb; j++) p[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        c[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = p[j] + 1;
            if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
            if (p[j - 1] + cost < v) v = p[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
        }
        int *t = pp; pp = p; p = c; c = t;
    }
    return p[lb];
}

static int close_enough(const char *name, int dist) {
    int len = (int)strlen(name);
    int lim = len / 3;
    if (lim < 1) lim = 1;
    if (lim > 3) lim = 3;
    return dist <= lim;
}

static const char *last_component(const char *path) {
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

/* Best known key path for an unknown one (NULL if none is close).  Also
 * matches a known key whose last component equals the unknown's, so
 * "ztrain.n_layer" suggests "ztrain.model.n_layer". */
static const char *suggest_key(const char *name, int with_aliases) {
    const char *best = NULL;
    int bestd = 1000;
    for (int i = 0; i < NKEYS; i++) {
        const char *cands[2] = {keys[i].key, keys[i].json_alias};
        for (int c = 0; c < 2; c++) {
            if (!cands[c]) continue;
            int d = edit_distance(name, cands[c]);
            if (d < bestd) { bestd = d; best = cands[c]; }
        }
        if (with_aliases && keys[i].flags) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", keys[i].flags);
            for (char *save = NULL, *t = strtok_r(buf, " ", &save); t;
                 t = strtok_r(NULL, " ", &save)) {
                int d = edit_distance(name, t);
                if (d < bestd) { bestd = d; best = keys[i].key; }
            }
        }
    }
    if (best && bestd > 0 && close_enough(name, bestd)) return best;
    const char *leaf = last_component(name);
    if (leaf != name) {
        for (int i = 0; i < NKEYS; i++)
            if (strcmp(last_component(keys[i].key), leaf) == 0) return keys[i].key;
    }
    return NULL;
}

static int env_is_known(const char *name) {
    char buf[256];
    for (int i = 0; i < NKEYS; i++) {
        env_generic(keys[i].key, buf, sizeof buf);
        if (strcmp(buf, name) == 0) return 1;
        if (keys[i].env && strcmp(keys[i].env, name) == 0) return 1;
    }
    for (size_t j = 0; j < sizeof env_informational / sizeof env_informational[0]; j++)
        if (strcmp(env_informational[j], name) == 0) return 1;
    return 0;
}

/* Closest known ZTRAIN_ name into best[n]; returns best or NULL. */
static const char *suggest_env(const char *name, char *best, size_t n) {
    char buf[256];
    int bestd = 1000;
    best[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        const char *c[2] = {buf, keys[i].env};
        env_generic(keys[i].key, buf, sizeof buf);
        for (int k = 0; k < 2; k++) {
            if (!c[k]) continue;
            int d = edit_distance(name, c[k]);
            if (d < bestd) { bestd = d; snprintf(best, n, "%s", c[k]); }
        }
    }
    for (size_t j = 0; j < sizeof env_informational / sizeof env_informational[0]; j++) {
        int d = edit_distance(name, env_informational[j]);
        if (d < bestd) { bestd = d; snprintf(best, n, "%s", env_informational[j]); }
    }
    /* the length allowance counts the part after ZTRAIN_ */
    const char *tail = strncmp(name, "ZTRAIN_", 7) == 0 ? name + 7 : name;
    if (bestd > 0 && bestd < 1000 && close_enough(tail, bestd)) return best;
    return NULL;
}

const char *zt_source_name(int src) {
    switch (src) {
    case ZT_SRC_DEFAULT: return "default";
    case ZT_SRC_FILE: return "file";
    case ZT_SRC_ENV: return "env";
    case ZT_SRC_FLAG: return "flag";
    case ZT_SRC_DERIVED: return "derived";
    default: return "unknown";
    }
}

/* ================================================================ values */

/* A parsed value before it is stored. */
typedef struct kval {
    long long i;            /* T_INT, T_LONG, T_BOOL */
    unsigned long long u;   /* T_U64 */
    double d[2];            /* T_DOUBLE, T_PAIR */
    const char *s;          /* T_STRING, T_ENUM (canonical), T_PSEUDO */
    char canon[32];         /* canonical spelling of an enum value */
} kval;

/* "%.15g" text of x (so typical values print as written), or more digits
 * where 15 do not read back exactly. */
static void fmt_double(double x, char *buf, size_t n) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* make it look like a real number */
    if (!strpbrk(buf, ".eEn")) {
        size_t l = strlen(buf);
        if (l + 2 < n) memcpy(buf + l, ".0", 3);
    }
}

static void fmt_num(double x, char *buf, size_t n) {
    /* range bounds: integers print without ".0" */
    if (x == floor(x) && fabs(x) < 1e15) snprintf(buf, n, "%.0f", x);
    else snprintf(buf, n, "%.15g", x);
}

static void int_limits(const keydef *k, long long *lo, long long *hi) {
    *lo = (long long)k->lo;
    if (k->kf & KF_NO_HI) *hi = k->type == T_LONG ? LONG_MAX : INT_MAX;
    else *hi = (long long)k->hi;
}

/* "must be ..." text of a key's requirement. */
static void requirement(const keydef *k, char *buf, size_t n) {
    char lo[64], hi[64];
    switch (k->type) {
    case T_INT:
    case T_LONG: {
        long long a, b;
        int_limits(k, &a, &b);
        if (k->kf & KF_NO_HI) snprintf(buf, n, "must be an integer >= %lld%s", a,
                                       (k->kf & KF_NODE) ? " or \"node\"" : "");
        else snprintf(buf, n, "must be an integer in [%lld, %lld]", a, b);
        break;
    }
    case T_U64:
        if (k->kf & KF_SIZE)
            snprintf(buf, n, "must be a size in bytes, optionally with a K, M, G or T suffix "
                     "(binary: 8G = 8 GiB), or 0/auto");
        else
            snprintf(buf, n, "must be an integer in [0, %llu]", ULLONG_MAX);
        break;
    case T_DOUBLE:
    case T_PAIR: {
        const char *pre = k->type == T_PAIR
            ? "must be a pair of numbers [b1, b2], each" : "must be a number";
        fmt_num(k->lo, lo, sizeof lo);
        fmt_num(k->hi, hi, sizeof hi);
        if (k->kf & KF_NO_HI)
            snprintf(buf, n, "%s %s %s", pre, (k->kf & KF_LO_OPEN) ? ">" : ">=", lo);
        else
            snprintf(buf, n, "%s in %c%s, %s%c", pre, (k->kf & KF_LO_OPEN) ? '(' : '[',
                     lo, hi, (k->kf & KF_HI_OPEN) ? ')' : ']');
        break;
    }
    case T_BOOL:
        snprintf(buf, n, "must be true or false");
        break;
    case T_ENUM:
    case T_PSEUDO: {
        if (strcmp(k->key, "ztrain.preempt_signal") == 0) {
            snprintf(buf, n, "must be one of: SIGUSR2, SIGTERM, SIGINT, SIGHUP "
                     "(not SIGUSR1: NCCL uses it)");
            break;
        }
        size_t j = (size_t)snprintf(buf, n, "must be one of: ");
        for (const char *p = k->values; *p && j + 2 < n; p++) {
            if (*p == '|') {
                if (j + 3 < n) { buf[j++] = ','; buf[j++] = ' '; }
            } else {
                buf[j++] = *p;
            }
        }
        buf[j < n ? j : n - 1] = '\0';
        break;
    }
    case T_STRING:
        if (k->kf & KF_ACKPT)
            snprintf(buf, n, "must be none, blocks or every-K with K an integer >= 1");
        else if (k->kf & KF_REPORT)
            snprintf(buf, n, "must be off, end or a step interval N >= 1");
        else if (strcmp(k->key, "ztrain.checkpoint.resume") == 0)
            snprintf(buf, n, "must be auto, never or a checkpoint path");
        else if (k->kf & KF_NONEMPTY)
            snprintf(buf, n, "must be a non-empty string of at most %zu characters",
                     k->size - 1);
        else
            snprintf(buf, n, "must be a string of at most %zu characters", k->size - 1);
        break;
    default:
        snprintf(buf, n, "has an unknown type");
    }
}

/* Result of parsing: 0 ok, ZT_EINVAL (use requirement()). */

static int strict_ll(const char *s, long long *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int strict_ull(const char *s, unsigned long long *out) {
    if (!*s || isspace((unsigned char)*s) || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int strict_double(const char *s, double *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int in_range_d(const keydef *k, double v) {
    if (!isfinite(v)) return 0;
    if ((k->kf & KF_LO_OPEN) ? !(v > k->lo) : !(v >= k->lo)) return 0;
    if (!(k->kf & KF_NO_HI) && ((k->kf & KF_HI_OPEN) ? !(v < k->hi) : !(v <= k->hi)))
        return 0;
    return 1;
}

static int check_int(const keydef *k, long long v, kval *out) {
    long long a, b;
    int_limits(k, &a, &b);
    if (v < a || v > b) return ZT_EINVAL;
    out->i = v;
    return ZT_OK;
}

/* Match an enum value case-insensitively; the canonical spelling goes to
 * out->canon and out->s. */
static const char *enum_match(const char *values, const char *s, kval *out) {
    const char *p = values;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (strlen(s) == len && strncasecmp(p, s, len) == 0 && len < sizeof out->canon) {
            memcpy(out->canon, p, len);
            out->canon[len] = '\0';
            return out->s = out->canon;
        }
        p += len;
        if (*p == '|') p++;
    }
    return NULL;
}

static int parse_bool_str(const char *s, long long *out) {
    static const char *const t[] = {"true", "1", "yes"}, *const f[] = {"false", "0", "no"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, t[i]) == 0) { *out = 1; return 0; }
        if (strcasecmp(s, f[i]) == 0) { *out = 0; return 0; }
    }
    return -1;
}

static int parse_pair_str(const char *s, double out[2]) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf;
    while (isspace((unsigned char)*p)) p++;
    char *end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1])) *--end = '\0';
    if (*p == '[') {
        if (end == p || end[-1] != ']') return -1;
        *--end = '\0';
        p++;
    }
    char *sep = strchr(p, ',');
    if (!sep) {
        sep = p;
        while (*sep && !isspace((unsigned char)*sep)) sep++;
        if (!*sep) return -1;
    }
    *sep = '\0';
    char *a = p, *b = sep + 1;
    /* trim both parts */
    while (isspace((unsigned char)*a)) a++;
    for (char *e = a + strlen(a); e > a && isspace((unsigned char)e[-1]);) *--e = '\0';
    while (isspace((unsigned char)*b)) b++;
    for (char *e = b + strlen(b); e > b && isspace((unsigned char)e[-1]);) *--e = '\0';
    if (strict_double(a, &out[0]) || strict_double(b, &out[1])) return -1;
    return 0;
}

/* activation_checkpointing.policy: canonical "none", "blocks" or "every-K". */
static int parse_ackpt(const char *s, kval *out) {
    if (strcasecmp(s, "none") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "off") == 0)
        snprintf(out->canon, sizeof out->canon, "none");
    else if (strcasecmp(s, "blocks") == 0 || strcasecmp(s, "true") == 0)
        snprintf(out->canon, sizeof out->canon, "blocks");
    else if (strncasecmp(s, "every-", 6) == 0) {
        long long k;
        if (strict_ll(s + 6, &k) || k < 1 || k > 4096) return ZT_EINVAL;
        if (k == 1) snprintf(out->canon, sizeof out->canon, "blocks");
        else snprintf(out->canon, sizeof out->canon, "every-%lld", k);
    } else
        return ZT_EINVAL;
    out->s = out->canon;
    return ZT_OK;
}

/* ztrain.memory_report: canonical "off", "end" or a decimal step interval. */
static int parse_report(const char *s, kval *out) {
    long long n;
    if (strcasecmp(s, "off") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
        snprintf(out->canon, sizeof out->canon, "off");
    else if (strcasecmp(s, "end") == 0 || strcasecmp(s, "true") == 0)
        snprintf(out->canon, sizeof out->canon, "end");
    else if (!strict_ll(s, &n) && n >= 1 && n <= INT_MAX)
        snprintf(out->canon, sizeof out->canon, "%lld", n);
    else
        return ZT_EINVAL;
    out->s = out->canon;
    return ZT_OK;
}

int zt_parse_size(const char *s, unsigned long long *out) {
    if (!s) return -1;
    while (isspace((unsigned char)*s)) s++;
    if (strcasecmp(s, "auto") == 0) { *out = 0; return 0; }
    if (!isdigit((unsigned char)*s) && *s != '.') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    case 'P': mul = 1024.0 * 1024 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    while (isspace((unsigned char)*end)) end++;
    if (*end) return -1;
    double b = v * mul;
    if (b >= 18446744073709551615.0) return -1;
    if (mul == 1 && b != floor(b)) return -1;   /* a fraction of a byte */
    *out = (unsigned long long)(b + 0.5);
    return 0;
}

static int parse_str(const keydef *k, const char *s, kval *out) {
    if ((k->kf & KF_NODE) && strcasecmp(s, "node") == 0) {
        out->i = ZT_SHARD_GROUP_NODE;
        return ZT_OK;
    }
    if ((k->kf & KF_AUTO) && strcasecmp(s, "auto") == 0) {
        out->i = (k->kf & KF_FIT) ? ZT_MICRO_BATCH_AUTO : 0;
        return ZT_OK;
    }
    if (k->kf & KF_ACKPT) return parse_ackpt(s, out);
    if (k->kf & KF_REPORT) return parse_report(s, out);
    if (k->kf & KF_SIZE) return zt_parse_size(s, &out->u) ? ZT_EINVAL : ZT_OK;
    switch (k->type) {
    case T_INT:
    case T_LONG: {
        long long v;
        if (strict_ll(s, &v)) return ZT_EINVAL;
        return check_int(k, v, out);
    }
    case T_U64:
        return strict_ull(s, &out->u) ? ZT_EINVAL : ZT_OK;
    case T_DOUBLE:
        if (strict_double(s, &out->d[0]) || !in_range_d(k, out->d[0])) return ZT_EINVAL;
        return ZT_OK;
    case T_PAIR:
        if (parse_pair_str(s, out->d) || !in_range_d(k, out->d[0]) ||
            !in_range_d(k, out->d[1]))
            return ZT_EINVAL;
        return ZT_OK;
    case T_BOOL:
        return parse_bool_str(s, &out->i) ? ZT_EINVAL : ZT_OK;
    case T_ENUM:
    case T_PSEUDO:
        return enum_match(k->values, s, out) ? ZT_OK : ZT_EINVAL;
    case T_STRING:
        if (strlen(s) >= k->size) return ZT_EINVAL;
        if ((k->kf & KF_NONEMPTY) && !*s) return ZT_EINVAL;
        if (k->off == offsetof(struct zt_config, ckpt_resume)) {
            const char *why;   /* the parser the Slurm plugin uses too */
            if (ztrain_resume_check(s, &why)) return ZT_EINVAL;
        }
        out->s = s;
        return ZT_OK;
    default:
        return ZT_EINVAL;
    }
}

static int json_num(const json_t *v, double *out) {
    if (json_is_integer(v)) { *out = (double)json_integer_value(v); return 0; }
    if (json_is_real(v)) { *out = json_real_value(v); return 0; }
    return -1;
}

static int parse_json(const keydef *k, const json_t *v, kval *out) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strlen(s) != json_string_length(v)) return ZT_EINVAL; /* embedded NUL */
        return parse_str(k, s, out);
    }
    switch (k->type) {
    case T_INT:
    case T_LONG:
        if (json_is_integer(v)) return check_int(k, (long long)json_integer_value(v), out);
        if (json_is_real(v)) {
            double d = json_real_value(v);
            if (d == floor(d) && fabs(d) < 9e18) return check_int(k, (long long)d, out);
        }
        return ZT_EINVAL;
    case T_U64:
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
            out->u = (unsigned long long)json_integer_value(v);
            return ZT_OK;
        }
        return ZT_EINVAL;
    case T_DOUBLE:
        if (json_num(v, &out->d[0]) || !in_range_d(k, out->d[0])) return ZT_EINVAL;
        return ZT_OK;
    case T_PAIR:
        if (!json_is_array(v) || json_array_size(v) != 2 ||
            json_num(json_array_get(v, 0), &out->d[0]) ||
            json_num(json_array_get(v, 1), &out->d[1]) ||
            !in_range_d(k, out->d[0]) || !in_range_d(k, out->d[1]))
            return ZT_EINVAL;
        return ZT_OK;
    case T_BOOL:
        if (json_is_boolean(v)) { out->i = json_is_true(v); return ZT_OK; }
        return ZT_EINVAL;
    default:
        return ZT_EINVAL;   /* strings, enums: only JSON strings */
    }
}

/* ================================================================ storing */

static int src_allows(const zt_config *cfg, int idx, int src) {
    int cur = cfg->src[idx];
    return cur == ZT_SRC_DERIVED || src >= cur;
}

static void store_raw(zt_config *cfg, int idx, const kval *v) {
    const keydef *k = &keys[idx];
    void *f = fieldp(cfg, k);
    switch (k->type) {
    case T_INT:
    case T_BOOL: *(int *)f = (int)v->i; break;
    case T_LONG: *(long *)f = (long)v->i; break;
    case T_U64: *(unsigned long long *)f = v->u; break;
    case T_DOUBLE: *(double *)f = v->d[0]; break;
    case T_PAIR: memcpy(f, v->d, 2 * sizeof(double)); break;
    case T_STRING:
    case T_ENUM: snprintf((char *)f, k->size, "%s", v->s); break;
    default: break;
    }
}

/* Store a parsed value honoring precedence; expands pseudo-keys. */
static void store(zt_config *cfg, int idx, const kval *v, int src) {
    const keydef *k = &keys[idx];
    if (k->type == T_PSEUDO) {
        const char *names[2] = {NULL, NULL};
        kval sub[2];
        memset(sub, 0, sizeof sub);
        if (strcmp(k->key, "precision") == 0) {
            names[0] = "bf16.enabled";
            names[1] = "fp16.enabled";
            sub[0].i = strcmp(v->s, "bf16") == 0;
            sub[1].i = strcmp(v->s, "fp16") == 0;
        } else { /* offload */
            names[0] = "zero_optimization.offload_optimizer.device";
            names[1] = "zero_optimization.offload_param.device";
            sub[0].s = strcmp(v->s, "none") == 0 ? "none" : "cpu";
            sub[1].s = strcmp(v->s, "params") == 0 ? "cpu" : "none";
        }
        for (int j = 0; j < 2; j++) store(cfg, key_index(names[j]), &sub[j], src);
        if (src_allows(cfg, idx, src)) cfg->src[idx] = (unsigned char)src;
        return;
    }
    if (!src_allows(cfg, idx, src)) return;
    store_raw(cfg, idx, v);
    cfg->src[idx] = (unsigned char)src;
    cfg->finalized = 0;
}

/* ================================================================ lifecycle */

zt_config *zt_config_new(void) {
    zt_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return NULL;
    cfg->src = calloc((size_t)NKEYS, 1);
    if (!cfg->src) { free(cfg); return NULL; }
    for (int i = 0; i < NKEYS; i++) {
        if (!keys[i].def) continue;
        kval v;
        memset(&v, 0, sizeof v);
        if (parse_str(&keys[i], keys[i].def, &v) != ZT_OK) {   /* table bug */
            zt_config_free(cfg);
            return NULL;
        }
        store(cfg, i, &v, ZT_SRC_DEFAULT);
    }
    cfg->world_size = 0;
    cfg->finalized = 0;
    return cfg;
}

void zt_config_free(zt_config *cfg) {
    if (!cfg) return;
    free(cfg->src);
    free(cfg);
}

zt_config *zt_config_dup(const zt_config *cfg) {
    if (!cfg) return NULL;
    zt_config *c = malloc(sizeof *c);
    if (!c) return NULL;
    memcpy(c, cfg, sizeof *c);
    c->src = malloc((size_t)NKEYS);
    if (!c->src) { free(c); return NULL; }
    memcpy(c->src, cfg->src, (size_t)NKEYS);
    return c;
}

/* Replace dst's contents by tmp's (and free tmp). */
static void commit(zt_config *dst, zt_config *tmp) {
    unsigned char *old = dst->src;
    memcpy(dst, tmp, sizeof *dst);
    free(old);
    free(tmp);
}

int zt_config_source(const zt_config *cfg, const char *key) {
    if (!cfg) return -1;
    int i = lookup(key);
    return i < 0 ? -1 : cfg->src[i];
}

int zt_config_key_is_bool(const char *key_or_alias) {
    int i = lookup(key_or_alias);
    if (i < 0) return -1;
    return keys[i].type == T_BOOL || (keys[i].kf & KF_REPORT) != 0;
}

/* ================================================================ set */

static int bad_src(int src) { return src < ZT_SRC_DEFAULT || src > ZT_SRC_DERIVED; }

int zt_config_set(zt_config *cfg, const char *key, const char *value, zt_source src,
                  zt_status *st) {
    if (!cfg || !key) return zt_fail(st, ZT_EINVAL, "zt_config_set: no config or key");
    if (bad_src((int)src))
        return zt_fail(st, ZT_EINVAL, "zt_config_set: invalid source %d", (int)src);
    const char *name = key;
    while (*name == '-') name++;
    int idx = lookup(name);
    if (idx < 0) {
        const char *hint = suggest_key(name, 1);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "unknown key '%s' (did you mean '%s'?)", name, hint);
        return zt_fail(st, ZT_EINVAL, "unknown key '%s'", name);
    }
    const keydef *k = &keys[idx];
    if (!value) {
        if (k->type != T_BOOL && !(k->kf & KF_REPORT))
            return zt_fail(st, ZT_EINVAL, "key '%s' needs a value", k->key);
        value = "true";
    }
    kval v;
    memset(&v, 0, sizeof v);
    int rc = parse_str(k, value, &v);
    if (rc != ZT_OK) {
        char req[256];
        requirement(k, req, sizeof req);
        if (src == ZT_SRC_FLAG)
            return zt_fail(st, rc, "--%s=%s: %s %s", name, value, k->key, req);
        return zt_fail(st, rc, "key '%s' %s, got \"%s\"", k->key, req, value);
    }
    store(cfg, idx, &v, (int)src);
    return ZT_OK;
}

/* ================================================================ file */

/* Is `path` a proper prefix (at a '.') of some key path or JSON alias? */
static int is_prefix(const char *path) {
    size_t n = strlen(path);
    for (int i = 0; i < NKEYS; i++) {
        const char *c[2] = {keys[i].key, keys[i].json_alias};
        for (int j = 0; j < 2; j++)
            if (c[j] && strncmp(c[j], path, n) == 0 && c[j][n] == '.') return 1;
    }
    return 0;
}

static int file_key_index(const char *path) {
    int i = key_index(path);
    if (i >= 0) return i;
    for (i = 0; i < NKEYS; i++)
        if (keys[i].json_alias && strcmp(keys[i].json_alias, path) == 0) return i;
    return -1;
}

/* DeepSpeed keys accepted with no effect in ztrain: bucket sizes (ztrain
 * communicates one model unit at a time), stage-3 prefetch/persistence/live
 * parameter limits (whole units are gathered and released), flags ztrain
 * always behaves as (contiguous gradients, reduce-scatter, partitioned
 * all-gather), and reporting/saving switches. */
static const char *const ds_noeffect_keys[] = {
    "zero_optimization.allgather_partitions", "zero_optimization.allgather_bucket_size",
    "zero_optimization.reduce_bucket_size", "zero_optimization.reduce_scatter",
    "zero_optimization.contiguous_gradients", "zero_optimization.round_robin_gradients",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.stage3_max_live_parameters", "zero_optimization.stage3_max_reuse_distance",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save",
    "zero_optimization.stage3_gather_fp16_weights_on_model_save",
    "zero_optimization.sub_group_size", "zero_optimization.load_from_fp32_weights",
    "zero_optimization.elastic_checkpoint", "zero_optimization.ignore_unused_parameters",
    "zero_optimization.memory_efficient_linear", "wall_clock_breakdown",
    "optimizer.params.torch_adam", "zero_allow_untested_optimizer", "prescale_gradients",
    "gradient_predivide_factor", "dump_state", "memory_breakdown",
    "flops_profiler.enabled", "tensorboard.enabled", "wandb.enabled", "csv_monitor.enabled",
    NULL,
};

static void note_key(char *list, size_t n, const char *path) {
    size_t l = strlen(list);
    if (l + strlen(path) + 3 < n) snprintf(list + l, n - l, "%s%s", l ? ", " : "", path);
}

/* A DeepSpeed key with no ztrain counterpart: accepted (1), refused (-1 with
 * st set), or unknown (0). */
static int ds_compat(zt_config *cfg, const char *file, const char *path, json_t *v,
                     zt_status *st) {
    for (int i = 0; ds_noeffect_keys[i]; ++i)
        if (!strcmp(path, ds_noeffect_keys[i])) {
            note_key(cfg->ds_noeffect, sizeof cfg->ds_noeffect, path);
            return 1;
        }
    if (!strcmp(path, "zero_optimization.zero_hpz_partition_size")) {
        /* hpZ (ZeRO++: a secondary parameter partition inside groups of N
         * ranks, the same results): 1 = off; N > 1 = ztrain's hybrid
         * sharding over groups of N (zero_optimization.shard_group_size) */
        if (json_is_integer(v) && json_integer_value(v) == 1) {
            note_key(cfg->ds_noeffect, sizeof cfg->ds_noeffect, path);
            return 1;
        }
        if (json_is_integer(v) && json_integer_value(v) > 1 && json_integer_value(v) < 1048576) {
            char n[32];
            snprintf(n, sizeof n, "%lld", (long long)json_integer_value(v));
            if (zt_config_set(cfg, "zero_optimization.shard_group_size", n, ZT_SRC_FILE, st) != ZT_OK)
                return -1;
            note_key(cfg->ds_mapped, sizeof cfg->ds_mapped,
                     "zero_hpz_partition_size -> zero_optimization.shard_group_size");
            return 1;
        }
        zt_fail(st, ZT_EINVAL, "%s: zero_optimization.zero_hpz_partition_size must be an integer "
                ">= 1 (1 = off; N = hybrid sharding over groups of N ranks)", file);
        return -1;
    }
    return 0;
}

static int walk(zt_config *cfg, const char *file, const char *prefix, json_t *obj,
                zt_status *st) {
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v) {
        char path[512];
        int n = prefix[0] ? snprintf(path, sizeof path, "%s.%s", prefix, name)
                          : snprintf(path, sizeof path, "%s", name);
        if (n < 0 || (size_t)n >= sizeof path)
            return zt_fail(st, ZT_EINVAL, "%s: unknown key '%.60s...'", file, path);
        int dc = ds_compat(cfg, file, path, v, st);
        if (dc < 0) return st ? st->code : ZT_EINVAL;
        if (dc > 0) continue;
        int idx = file_key_index(path);
        if (idx >= 0 && !(keys[idx].kf & (KF_AUTO | KF_SIZE)) && keys[idx].type != T_ENUM &&
            keys[idx].type != T_STRING && json_is_string(v) &&
            strcasecmp(json_string_value(v), "auto") == 0) {
            /* Hugging Face's "auto" for a number or switch: the value ztrain
             * derives or defaults to (where "auto" is a value, it is one) */
            note_key(cfg->ds_auto, sizeof cfg->ds_auto, path);
            continue;
        }
        if (idx >= 0) {
            const keydef *k = &keys[idx];
            kval kv;
            memset(&kv, 0, sizeof kv);
            int rc = parse_json(k, v, &kv);
            if (rc != ZT_OK) {
                char req[256];
                requirement(k, req, sizeof req);
                char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
                zt_fail(st, rc, "%s: key '%s' %s, got %.200s%s", file, path, req,
                        got ? got : "?", got && strlen(got) > 200 ? "..." : "");
                free(got);
                return rc;
            }
            store(cfg, idx, &kv, ZT_SRC_FILE);
            continue;
        }
        if (is_prefix(path)) {
            if (!json_is_object(v))
                return zt_fail(st, ZT_EINVAL, "%s: key '%s' must be an object", file, path);
            ZT_TRY(walk(cfg, file, path, v, st));
            continue;
        }
        const char *hint = suggest_key(path, 0);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "%s: unknown key '%s' (did you mean '%s'?)",
                           file, path, hint);
        return zt_fail(st, ZT_EINVAL, "%s: unknown key '%s'", file, path);
    }
    return ZT_OK;
}

int zt_config_load_file(zt_config *cfg, const char *path, zt_status *st) {
    if (!cfg || !path) return zt_fail(st, ZT_EINVAL, "zt_config_load_file: no config or path");
    FILE *f = fopen(path, "rb");
    if (!f)
        return zt_fail(st, ZT_EIO, "cannot open config file '%s': %s", path, strerror(errno));
    json_error_t err;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    int rerr = ferror(f);
    fclose(f);
    if (!root) {
        if (rerr) return zt_fail(st, ZT_EIO, "cannot read config file '%s'", path);
        return zt_fail(st, ZT_EINVAL, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return zt_fail(st, ZT_EINVAL, "%s: the top level must be a JSON object", path);
    }
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) {
        json_decref(root);
        return zt_fail(st, ZT_ENOMEM, "out of memory loading '%s'", path);
    }
    int rc = walk(tmp, path, "", root, st);
    json_decref(root);
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    commit(cfg, tmp);
    return ZT_OK;
}

/* ================================================================ env */

static int apply_env(zt_config *cfg, int idx, const char *name, const char *val,
                     zt_status *st) {
    const keydef *k = &keys[idx];
    kval v;
    memset(&v, 0, sizeof v);
    int rc = parse_str(k, val, &v);
    if (rc != ZT_OK) {
        char req[256];
        requirement(k, req, sizeof req);
        return zt_fail(st, rc, "%s=%s: %s %s", name, val, k->key, req);
    }
    store(cfg, idx, &v, ZT_SRC_ENV);
    return ZT_OK;
}

int zt_config_load_env_with(zt_config *cfg,
                            const char *(*get)(void *user, const char *name),
                            void *user, zt_status *st) {
    if (!cfg || !get) return zt_fail(st, ZT_EINVAL, "zt_config_load_env_with: bad arguments");
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) return zt_fail(st, ZT_ENOMEM, "out of memory reading the environment");
    int rc = ZT_OK;
    for (int i = 0; i < NKEYS && rc == ZT_OK; i++) {
        char gen[256];
        env_generic(keys[i].key, gen, sizeof gen);
        const char *gv = get(user, gen);
        const char *sv = keys[i].env ? get(user, keys[i].env) : NULL;
        if (gv && sv && strcmp(gv, sv) != 0) {
            rc = zt_fail(st, ZT_EINVAL, "%s=%s conflicts with %s=%s (both set %s)",
                         keys[i].env, sv, gen, gv, keys[i].key);
            break;
        }
        if (gv) rc = apply_env(tmp, i, gen, gv, st);
        if (rc == ZT_OK && sv) rc = apply_env(tmp, i, keys[i].env, sv, st);
    }
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    commit(cfg, tmp);
    return ZT_OK;
}

static const char *getenv_cb(void *user, const char *name) {
    (void)user;
    return getenv(name);
}

int zt_config_load_env(zt_config *cfg, zt_status *st) {
    if (!cfg) return zt_fail(st, ZT_EINVAL, "zt_config_load_env: no config");
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "ZTRAIN_", 7) != 0) continue;
        char name[256];
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (env_is_known(name)) continue;
        char hbuf[256];
        const char *hint = suggest_env(name, hbuf, sizeof hbuf);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "unknown environment variable %s (did you mean %s?)",
                           name, hint);
        return zt_fail(st, ZT_EINVAL, "unknown environment variable %s", name);
    }
    return zt_config_load_env_with(cfg, getenv_cb, NULL, st);
}

/* ================================================================ finalize */

/* Valid settings that this build cannot run yet.  Later work removes these
 * refusals one by one as features land; nothing here is silently ignored. */
static int check_implemented(const zt_config *c, zt_status *st) {
    /* bf16 / fp16 (precision.h), offload_optimizer=cpu and offload_param=cpu
     * are implemented; on the CPU backend the offloaded state is host memory
     * anyway, and only its accounting changes */
    (void)c;
    (void)st;
    /* ztrain.backend=cuda is checked when the context picks the device
     * (no device / no CUDA in this build: one clear error there) */
    return ZT_OK;
}

static void fmt_batch(char *buf, size_t n, int v) {
    if (v > 0) snprintf(buf, n, "%d", v);
    else snprintf(buf, n, "unset");
}

static int batch_fail(zt_status *st, int tbs, int mb, int ga, int world, const char *why) {
    char a[32], b[32], c[32];
    fmt_batch(a, sizeof a, tbs);
    fmt_batch(b, sizeof b, mb);
    fmt_batch(c, sizeof c, ga);
    return zt_fail(st, ZT_EINVAL,
                   "batch sizes: train_batch_size=%s, train_micro_batch_size_per_gpu=%s, "
                   "gradient_accumulation_steps=%s, world_size=%d: %s",
                   a, b, c, world, why);
}

/* DeepSpeed's rule: train_batch_size == micro * accum * world_size. */
static int resolve_batch(zt_config *c, int world, zt_status *st) {
    const int tbs = c->train_batch_size, mb = c->micro_batch, ga = c->grad_accum;
    const long long w = world;
    long long T = tbs, M = mb, A = ga;
    char why[160];
    if (tbs > 0 && mb > 0 && ga > 0) {
        if (M * A * w != T) {
            snprintf(why, sizeof why, "train_batch_size must equal micro * accum * world_size"
                     " = %lld", M * A * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
    } else if (tbs > 0 && mb > 0) {
        if (T % (M * w) != 0) {
            snprintf(why, sizeof why, "train_batch_size is not divisible by micro * "
                     "world_size = %lld", M * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
        A = T / (M * w);
    } else if (tbs > 0 && ga > 0) {
        if (T % (A * w) != 0) {
            snprintf(why, sizeof why, "train_batch_size is not divisible by accum * "
                     "world_size = %lld", A * w);
            return batch_fail(st, tbs, mb, ga, world, why);
        }
        M = T / (A * w);
    } else if (mb > 0 && ga > 0) {
        T = M * A * w;
    } else if (tbs > 0) {
        if (T % w != 0)
            return batch_fail(st, tbs, mb, ga, world,
                              "train_batch_size is not divisible by world_size");
        A = 1;
        M = T / w;
    } else if (mb > 0) {
        A = 1;
        T = M * w;
    } else if (ga > 0) {
        return batch_fail(st, tbs, mb, ga, world,
                          "gradient_accumulation_steps alone cannot determine the batch; also "
                          "set train_micro_batch_size_per_gpu or train_batch_size");
    } else {
        M = 16;
        A = 1;
        T = M * w;
    }
    if (T > INT_MAX)
        return batch_fail(st, tbs, mb, ga, world, "train_batch_size would overflow");
    int it = key_index("train_batch_size"), im = key_index("train_micro_batch_size_per_gpu"),
        ia = key_index("gradient_accumulation_steps");
    if (tbs <= 0) { c->train_batch_size = (int)T; c->src[it] = ZT_SRC_DERIVED; }
    if (mb <= 0) { c->micro_batch = (int)M; c->src[im] = ZT_SRC_DERIVED; }
    if (ga <= 0) { c->grad_accum = (int)A; c->src[ia] = ZT_SRC_DERIVED; }
    return ZT_OK;
}

/* Keys whose value zt_config_finalize may compute. */
static const char *const derived_keys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "ztrain.eval_batch_size", "scheduler.params.total_num_steps", "ztrain.seq_len",
};

/* Forget values computed by an earlier finalize so it can be redone. */
static void reset_derived(zt_config *c) {
    for (size_t j = 0; j < sizeof derived_keys / sizeof derived_keys[0]; j++) {
        int i = key_index(derived_keys[j]);
        if (i < 0 || c->src[i] != ZT_SRC_DERIVED) continue;
        kval v;
        memset(&v, 0, sizeof v);
        if (keys[i].def && parse_str(&keys[i], keys[i].def, &v) == ZT_OK)
            store_raw(c, i, &v);
        c->src[i] = ZT_SRC_DEFAULT;
    }
}

int zt_model_kv_heads(const zt_model_config *mc) {
    return mc->n_kv_head > 0 ? mc->n_kv_head : mc->n_head;
}
int zt_model_head_dim(const zt_model_config *mc) {
    return mc->head_dim > 0 ? mc->head_dim : (mc->n_head > 0 ? mc->n_embd / mc->n_head : 0);
}
int zt_model_intermediate(const zt_model_config *mc) {
    return mc->intermediate > 0 ? mc->intermediate : 4 * mc->n_embd;
}

/* The model shape's cross-key rules: the architecture's (arch.h). */
static int check_model(const zt_model_config *m, zt_status *st) {
    return zt_arch_of(m)->check(m, st);
}

/* The site limits in force for this process (ztrain_env.h): the stricter of
 * the plugin's root-owned statement file for the enclosing Slurm step and
 * ZTRAIN_SITE_LIMITS; *from names where the binding limits came from.
 * Unsetting or raising the variable inside the task changes nothing while
 * the statement file holds the limits. */
static int site_limits(int *ms, int *md, char *from, size_t n, zt_status *st) {
    const char *v = getenv(ZTRAIN_ENV_SITE_LIMITS), *why = NULL;
    char path[128];
    *ms = ZTRAIN_STAGE_MAX;
    *md = ZTRAIN_DATALOADERS_MAX;
    snprintf(from, n, "%s", "");
    int r = ztrain_statement_find(ms, md, path, sizeof path, &why);
    if (r < 0)
        return zt_fail(st, ZT_EINVAL, "the ztrain Slurm plugin's site-limit statement %s is %s; "
                       "refusing to run without the site limits (ask your administrator)", path, why);
    if (r > 0) snprintf(from, n, "stated by the ztrain Slurm plugin in %s", path);
    if (!v) return ZT_OK;
    int es = ZTRAIN_STAGE_MAX, ed = ZTRAIN_DATALOADERS_MAX;
    if (ztrain_site_limits_parse(v, &es, &ed, &why))
        return zt_fail(st, ZT_EINVAL, "%s='%s': %s; refusing to run without the site limits",
                       ZTRAIN_ENV_SITE_LIMITS, v, why);
    if (es < *ms || ed < *md || r == 0)
        snprintf(from, n, "%s, stated by the ztrain Slurm plugin", ZTRAIN_ENV_SITE_LIMITS);
    if (es < *ms) *ms = es;
    if (ed < *md) *md = ed;
    return ZT_OK;
}

/* A setting beyond the site limits is refused whatever its source. */
static int check_site_limits(const zt_config *c, zt_status *st) {
    int ms, md;
    char from[192];
    ZT_TRY(site_limits(&ms, &md, from, sizeof from, st));
    int is = key_index("zero_optimization.stage"), id = key_index("ztrain.data.dataloaders");
    if (c->zero_stage > ms)
        return zt_fail(st, ZT_EINVAL, "zero_optimization.stage=%d (%s) exceeds the site limit "
                       "max_stage=%d (%s)", c->zero_stage, zt_source_name(c->src[is]), ms, from);
    if (c->dataloaders > md)
        return zt_fail(st, ZT_EINVAL, "ztrain.data.dataloaders=%d (%s) exceeds the site limit "
                       "max_dataloaders=%d (%s)", c->dataloaders, zt_source_name(c->src[id]), md,
                       from);
    return ZT_OK;
}

int zt_config_site_max_dataloaders(void) {
    int ms, md;
    char from[192];
    zt_status st;
    memset(&st, 0, sizeof st);
    if (site_limits(&ms, &md, from, sizeof from, &st) != ZT_OK) return ZTRAIN_DATALOADERS_MIN;
    return md;
}

static int finalize_into(zt_config *c, int world, int check_impl, zt_status *st) {
    reset_derived(c);
    ZT_TRY(check_site_limits(c, st));
    if (c->micro_batch == ZT_MICRO_BATCH_AUTO)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=\"auto\" is chosen against "
                       "the memory limit when training starts (zt_ctx_create) or by 'ztrain "
                       "estimate'; zt_config_finalize alone cannot pick it");
    if (c->bf16_enabled && c->fp16_enabled)
        return zt_fail(st, ZT_EINVAL, "bf16.enabled and fp16.enabled are both true; "
                       "enable at most one");
    if (strcmp(c->offload_optimizer, "none") != 0 && c->zero_stage < 1)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_optimizer.device=%s needs "
                       "zero_optimization.stage >= 1 (as in DeepSpeed)", c->offload_optimizer);
    if (strcmp(c->offload_param, "none") != 0 && c->zero_stage != 3)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_param.device=%s needs "
                       "zero_optimization.stage=3 (as in DeepSpeed: only sharded parameters "
                       "can be offloaded)", c->offload_param);
    if (strcmp(c->offload_param, "none") != 0 && strcmp(c->offload_optimizer, "none") == 0)
        return zt_fail(st, ZT_EINVAL,
                       "zero_optimization.offload_param.device=%s needs "
                       "zero_optimization.offload_optimizer.device=cpu as well (parameters are "
                       "offloaded together with the optimizer state): add it, or use "
                       "--offload params", c->offload_param);
    if (!strcmp(c->optimizer_type, "Adam") && !c->adam_w_mode)
        return zt_fail(st, ZT_EINVAL, "optimizer.type=Adam with optimizer.params.adam_w_mode=false "
                       "(L2 regularization) is not implemented; adam_w_mode=true is AdamW");
    if ((!strcmp(c->scheduler_type, "WarmupLR") || !strcmp(c->scheduler_type, "WarmupDecayLR")) &&
        c->src[key_index("scheduler.params.warmup_type")] == ZT_SRC_DEFAULT) {
        snprintf(c->warmup_type, sizeof c->warmup_type, "log");   /* DeepSpeed's default */
        c->src[key_index("scheduler.params.warmup_type")] = ZT_SRC_DERIVED;
    }
    ZT_TRY(check_model(&c->model, st));
    if (c->seq_len == 0) {
        c->seq_len = c->model.context;
        c->src[key_index("ztrain.seq_len")] = ZT_SRC_DERIVED;
    }
    if (c->seq_len > c->model.context)
        return zt_fail(st, ZT_EINVAL, "ztrain.seq_len=%d exceeds the model's maximum positions "
                       "ztrain.model.context=%d", c->seq_len, c->model.context);
    ZT_TRY(resolve_batch(c, world, st));
    if (c->eval_batch_size == 0) {
        /* the global micro batch: train_batch_size / grad_accum */
        c->eval_batch_size = c->train_batch_size / c->grad_accum;
        c->src[key_index("ztrain.eval_batch_size")] = ZT_SRC_DERIVED;
    }
    /* token positions of one batch are counted in int (B*T) everywhere */
    if ((long long)c->micro_batch * c->seq_len > INT_MAX)
        return zt_fail(st, ZT_EINVAL, "train_micro_batch_size_per_gpu=%d x ztrain.seq_len=%d = "
                       "%lld tokens per micro batch exceeds %d", c->micro_batch, c->seq_len,
                       (long long)c->micro_batch * c->seq_len, INT_MAX);
    if ((long long)c->eval_batch_size * c->seq_len > INT_MAX)
        return zt_fail(st, ZT_EINVAL, "ztrain.eval_batch_size=%d x ztrain.seq_len=%d = %lld "
                       "tokens per evaluation batch exceeds %d", c->eval_batch_size, c->seq_len,
                       (long long)c->eval_batch_size * c->seq_len, INT_MAX);
    if (c->total_steps == 0) {
        if (c->steps > INT_MAX)
            return zt_fail(st, ZT_EINVAL, "ztrain.steps=%ld is too large for "
                           "scheduler.params.total_num_steps; set it explicitly", c->steps);
        c->total_steps = (int)c->steps;
        c->src[key_index("scheduler.params.total_num_steps")] = ZT_SRC_DERIVED;
    }
    if (c->warmup_steps > c->total_steps)
        return zt_fail(st, ZT_EINVAL, "scheduler.params.warmup_num_steps=%d must be <= "
                       "scheduler.params.total_num_steps=%d", c->warmup_steps,
                       c->total_steps);
    if (check_impl) ZT_TRY(check_implemented(c, st));
    c->world_size = world;
    c->finalized = 1;
    return ZT_OK;
}

static int finalize_checked(zt_config *cfg, int world_size, int check_impl, zt_status *st) {
    if (!cfg) return zt_fail(st, ZT_EINVAL, "zt_config_finalize: no config");
    if (world_size < 1)
        return zt_fail(st, ZT_EINVAL, "zt_config_finalize: world_size=%d must be >= 1",
                       world_size);
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) return zt_fail(st, ZT_ENOMEM, "out of memory finalizing the configuration");
    int rc = finalize_into(tmp, world_size, check_impl, st);
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    commit(cfg, tmp);
    return ZT_OK;
}

int zt_config_finalize(zt_config *cfg, int world_size, zt_status *st) {
    return finalize_checked(cfg, world_size, 1, st);
}

int zt_config_finalize_plan(zt_config *cfg, int world_size, zt_status *st) {
    return finalize_checked(cfg, world_size, 0, st);
}

int zt_config_shard_group(const zt_config *cfg, int world, int ranks_per_node) {
    if (cfg->shard_group_size == ZT_SHARD_GROUP_NODE) {
        int g = ranks_per_node > 0 ? ranks_per_node : 1;
        return world > 0 && g > world ? world : g;
    }
    return cfg->shard_group_size > 0 ? cfg->shard_group_size : world;
}

int zt_config_act_ckpt_k(const zt_config *cfg) {
    const char *p = cfg->act_ckpt;
    if (strcmp(p, "blocks") == 0) return 1;
    if (strncmp(p, "every-", 6) == 0) {
        long k = strtol(p + 6, NULL, 10);
        return k >= 1 ? (int)k : 1;
    }
    return 0;
}

int zt_config_memory_report(const zt_config *cfg) {
    const char *p = cfg->memory_report;
    if (strcmp(p, "end") == 0) return 0;
    if (isdigit((unsigned char)*p)) {
        long n = strtol(p, NULL, 10);
        return n >= 1 && n <= INT_MAX ? (int)n : -1;
    }
    return -1;
}

/* ================================================================ output */

/* Text of a value as describe prints it. */
static void value_text(const zt_config *c, const keydef *k, char *buf, size_t n) {
    const void *f = cfieldp(c, k);
    char a[64], b[64];
    switch (k->type) {
    case T_INT:
        if ((k->kf & KF_FIT) && *(const int *)f == ZT_MICRO_BATCH_AUTO) snprintf(buf, n, "\"auto\"");
        else if ((k->kf & KF_NODE) && *(const int *)f == ZT_SHARD_GROUP_NODE) snprintf(buf, n, "\"node\"");
        else snprintf(buf, n, "%d", *(const int *)f);
        break;
    case T_LONG: snprintf(buf, n, "%ld", *(const long *)f); break;
    case T_U64: snprintf(buf, n, "%llu", *(const unsigned long long *)f); break;
    case T_BOOL: snprintf(buf, n, "%s", *(const int *)f ? "true" : "false"); break;
    case T_DOUBLE: fmt_double(*(const double *)f, buf, n); break;
    case T_PAIR:
        fmt_double(((const double *)f)[0], a, sizeof a);
        fmt_double(((const double *)f)[1], b, sizeof b);
        snprintf(buf, n, "[%s, %s]", a, b);
        break;
    case T_STRING:
    case T_ENUM: snprintf(buf, n, "\"%s\"", (const char *)f); break;
    default: snprintf(buf, n, "?");
    }
}

int zt_config_get(const zt_config *cfg, const char *key, char *buf, size_t n, zt_status *st) {
    int i = cfg && key ? lookup(key) : -1;
    if (i < 0 || keys[i].type == T_PSEUDO)
        return zt_fail(st, ZT_EINVAL, "unknown configuration key '%s'", key ? key : "(null)");
    if (keys[i].type == T_STRING || keys[i].type == T_ENUM)
        snprintf(buf, n, "%s", (const char *)cfieldp(cfg, &keys[i]));
    else if ((keys[i].kf & KF_FIT) && *(const int *)cfieldp(cfg, &keys[i]) == ZT_MICRO_BATCH_AUTO)
        snprintf(buf, n, "auto");
    else if ((keys[i].kf & KF_NODE) && *(const int *)cfieldp(cfg, &keys[i]) == ZT_SHARD_GROUP_NODE)
        snprintf(buf, n, "node");
    else
        value_text(cfg, &keys[i], buf, n);
    return ZT_OK;
}

/* The DeepSpeed notes after the table, each listed once. */
static char *describe_ds(const zt_config *cfg, char *out) {
    if (!cfg->ds_noeffect[0] && !cfg->ds_auto[0] && !cfg->ds_mapped[0]) return out;
    size_t n = strlen(out) + strlen(cfg->ds_noeffect) + strlen(cfg->ds_auto) +
               strlen(cfg->ds_mapped) + 200;
    char *r = realloc(out, n);
    if (!r) return out;
    size_t j = strlen(r);
    if (cfg->ds_auto[0])
        j += (size_t)snprintf(r + j, n - j, "  \"auto\" (ztrain's own value above): %s\n", cfg->ds_auto);
    if (cfg->ds_mapped[0])
        j += (size_t)snprintf(r + j, n - j, "  mapped onto ztrain's knob: %s\n", cfg->ds_mapped);
    if (cfg->ds_noeffect[0])
        snprintf(r + j, n - j, "  no effect in ztrain (accepted for DeepSpeed configs): %s\n",
                 cfg->ds_noeffect);
    return r;
}

char *zt_config_describe(const zt_config *cfg) {
    if (!cfg) return NULL;
    size_t kw = 0, vw = 0, total = 1;
    char val[ZT_PATH_MAX + 64];
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].type == T_PSEUDO) continue;
        value_text(cfg, &keys[i], val, sizeof val);
        size_t kl = strlen(keys[i].key), vl = strlen(val);
        if (kl > kw) kw = kl;
        if (vl > vw) vw = vl;
    }
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].type == T_PSEUDO) continue;
        total += 2 + kw + 3 + vw + 3 + 2 + 16 + 1;
    }
    char *out = malloc(total);
    if (!out) return NULL;
    size_t j = 0;
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].type == T_PSEUDO) continue;
        value_text(cfg, &keys[i], val, sizeof val);
        int w = snprintf(out + j, total - j, "  %-*s = %-*s   (%s)\n", (int)kw, keys[i].key,
                         (int)vw, val, zt_source_name(cfg->src[i]));
        if (w < 0 || (size_t)w >= total - j) break;
        j += (size_t)w;
    }
    out[j] = '\0';
    return describe_ds(cfg, out);
}

/* Minimum "%.*g" precision with which every double of cfg reads back. */
static int needed_precision(const zt_config *c) {
    int need = 15;
    for (int i = 0; i < NKEYS; i++) {
        int nv = keys[i].type == T_DOUBLE ? 1 : keys[i].type == T_PAIR ? 2 : 0;
        for (int j = 0; j < nv; j++) {
            double x = ((const double *)cfieldp(c, &keys[i]))[j];
            char buf[64];
            int p = 15;
            for (; p < 17; p++) {
                snprintf(buf, sizeof buf, "%.*g", p, x);
                if (strtod(buf, NULL) == x) break;
            }
            if (p > need) need = p;
        }
    }
    return need;
}

static json_t *leaf_json(const zt_config *c, const keydef *k) {
    const void *f = cfieldp(c, k);
    switch (k->type) {
    case T_INT:
        if ((k->kf & KF_FIT) && *(const int *)f == ZT_MICRO_BATCH_AUTO) return json_string("auto");
        if ((k->kf & KF_NODE) && *(const int *)f == ZT_SHARD_GROUP_NODE) return json_string("node");
        return json_integer(*(const int *)f);
    case T_LONG: return json_integer(*(const long *)f);
    case T_U64: {
        unsigned long long u = *(const unsigned long long *)f;
        if (u <= (unsigned long long)LLONG_MAX) return json_integer((json_int_t)u);
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", u);
        return json_string(buf);   /* read back by the strict string parser */
    }
    case T_BOOL: return json_boolean(*(const int *)f);
    case T_DOUBLE: return json_real(*(const double *)f);
    case T_PAIR:
        return json_pack("[ff]", ((const double *)f)[0], ((const double *)f)[1]);
    case T_STRING:
    case T_ENUM: return json_string((const char *)f);
    default: return NULL;
    }
}

char *zt_config_to_json(const zt_config *cfg) {
    if (!cfg) return NULL;
    json_t *root = json_object();
    if (!root) return NULL;
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].type == T_PSEUDO) continue;
        /* walk/create the parent objects */
        json_t *parent = root;
        const char *p = keys[i].key;
        const char *dot;
        int ok = 1;
        while (ok && (dot = strchr(p, '.')) != NULL) {
            char comp[128];
            size_t n = (size_t)(dot - p);
            if (n >= sizeof comp) { ok = 0; break; }
            memcpy(comp, p, n);
            comp[n] = '\0';
            json_t *child = json_object_get(parent, comp);
            if (!child) {
                child = json_object();
                if (!child || json_object_set_new(parent, comp, child) != 0) ok = 0;
            }
            parent = child;
            p = dot + 1;
        }
        json_t *leaf = ok ? leaf_json(cfg, &keys[i]) : NULL;
        if (!leaf || json_object_set_new(parent, p, leaf) != 0) {
            json_decref(root);
            return NULL;
        }
    }
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                         JSON_REAL_PRECISION(needed_precision(cfg)));
    json_decref(root);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    }
    free(s);
    return out;
}

/* ================================================================ help */

char *zt_config_help_text(void) {
    size_t cap = 8192, j = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        const keydef *k = &keys[i];
        char flags[256], env[256], req[256], line[1536];
        size_t fj = (size_t)snprintf(flags, sizeof flags, "--%s", k->key);
        if (k->flags && fj < sizeof flags) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", k->flags);
            for (char *save = NULL, *t = strtok_r(buf, " ", &save); t;
                 t = strtok_r(NULL, " ", &save)) {
                if (strcmp(t, k->key) == 0) continue;
                int w = snprintf(flags + fj, sizeof flags - fj, ", --%s", t);
                if (w < 0 || (size_t)w >= sizeof flags - fj) break;
                fj += (size_t)w;
            }
        }
        env_generic(k->key, env, sizeof env);
        if (k->env) {
            size_t el = strlen(env);
            snprintf(env + el, sizeof env - el, ", %s", k->env);
        }
        requirement(k, req, sizeof req);
        int w = snprintf(line, sizeof line, "  %s\n      %s; env %s; %s; default %s\n",
                         flags, k->help, env, req + strlen("must be "),
                         !k->def ? "(sets other keys)" : *k->def ? k->def : "\"\"");
        if (w < 0) continue;
        if (j + (size_t)w + 1 > cap) {
            size_t ncap = (j + (size_t)w + 1) * 2;
            char *nb = realloc(out, ncap);
            if (!nb) { free(out); return NULL; }
            out = nb;
            cap = ncap;
        }
        memcpy(out + j, line, (size_t)w + 1);
        j += (size_t)w;
    }
    return out;
}
