/*
 * memplan.h -- the memory planner: predicted bytes per rank, before anything
 * is allocated.
 *
 * zt_memplan_compute is a pure function of a configuration and a world
 * layout.  It replays, allocation by allocation, what a training run does
 * with its accounted memory (mem.c's tags): model states as the ZeRO stage
 * keeps them, the activation block (with activation checkpointing), the data
 * loaders' token buffers, the eval block, and -- per unit, in the order the
 * model's forward and backward call the sharding hooks -- gathered units
 * (stage 3) and gradient buckets (stages 2-3).  The result is the peak of
 * every category and of the total, per place: host memory, and device memory
 * on a GPU target.
 *
 * On the CPU backend the prediction is exact, in fp32 and in bf16/fp16 with
 * or without optimizer offload, and with parameter offload at stage 3
 * (parameter shards in host memory, marked offloaded) (tests/test_memplan_run,
 * tests/memplan_mpi.sh):
 * it replays shard.c's mixed-precision allocations too -- 16-bit parameter
 * storage, fp32 gradients, fp32 master weights beside the AdamW moments
 * (optimizer category; host memory when offloaded), the fp32 compute copy
 * of each unit in use (gathered-params), 16-bit reduction buffers when
 * communication_data_type is 16-bit.  Activations are fp32 in every
 * precision (the model computes in fp32).
 *
 * A GPU target (backend cuda, or cpu-strict, which has device memory too)
 * has a device place and a host place.  On cpu-strict the device peak is
 * exact (tests/devmem_preflight.sh).  On cuda the device peak also counts
 * the backend's own memory -- the cuBLAS workspace and the kernels' growing
 * scratch, sized by kernels/cuda/cuda_workspace.h from the model's calls
 * (its architecture descriptor's kernel_ws, arch.h) -- which the engine's
 * accounting does not see; that
 * has not been checked against a GPU run yet (docs/memory.md).
 */
#ifndef ZT_MEMPLAN_H
#define ZT_MEMPLAN_H
#include <stdint.h>
#include "config.h"
#include "internal.h"

enum { ZT_MP_HOST = 0, ZT_MP_DEVICE = 1, ZT_MP_NPLACES = 2 };
enum { ZT_MP_TARGET_AUTO = -1, ZT_MP_TARGET_CPU = 0, ZT_MP_TARGET_GPU = 1 };

typedef struct zt_memplan_opts {
    int world_size;      /* ranks (>= 1) */
    int ranks_per_node;  /* ranks sharing a node's host memory; 0 = min(world, 1) */
    int target;          /* ZT_MP_TARGET_*; AUTO: from ztrain.backend */
    int with_data;       /* token loaders (ztrain.data.train); -1 = when it is non-empty */
    int with_eval;       /* eval block (ztrain.data.val); -1 = when it is non-empty */
    uint64_t scan_bytes; /* token-validation buffer while opening data; 0 = its maximum */
    uint64_t host_limit; /* GPU target: host bytes per rank the host place must fit too
                          * (zt_memplan_check, _suggest, _auto_micro); 0 = not checked */
    const char *host_limit_what; /* what host_limit is, for messages */
    int sample_window;   /* the end-of-run text sample's longest forward (prompt + new
                          * tokens - 1, capped at the context); 0 = the CLI default, a
                          * 1-token prompt and 256 new tokens: 256 */
    /* the run's device backend (the pre-flight), or NULL (`ztrain estimate`):
     * with its att_scratch query (kernels/backend.h) the attention calls'
     * scratch is what the backend will ask at the run's shapes on the path
     * it takes (cuda: cuDNN's fused attention with its plan's workspace
     * where its rule picks it); else ztrain's kernels' need is assumed */
    const struct zt_backend *be;
    /* the initial values written at start-up, after the data are opened
     * and the weights loaded (zt_ctx_create_ex with ZT_CTX_DEFER_INIT: the
     * CLI's runs), so the initialization's transients come on top of the
     * activations and the moments; 0 (zt_memplan_opts_init): written by
     * zt_ctx_create, before them.  `ztrain estimate` plans `ztrain train`: 1 */
    int deferred_init;
} zt_memplan_opts;

/* world_size = w, everything else from the configuration. */
void zt_memplan_opts_init(zt_memplan_opts *o, int world_size);

typedef struct zt_memplan {
    /* the run it describes (after finalize) */
    int world, ranks_per_node, shard_group, stage, micro_batch, grad_accum, eval_batch, context;
    int ckpt_k;            /* 0 none, 1 blocks, K every-K */
    int seq_parallel;      /* sequence_parallel_size (1: off): activations at seq_len / N */
    /* expert_parallel_size (1: off; moe.h): the routed rows one rank's experts
     * can receive per MoE layer and micro batch, at the worst-case routing
     * (zt_moe_recv_rows: the buffers are carved, and planned, at this) and at
     * a balanced one (micro x seq_len x experts_per_token); a row's buffers
     * hold 2 C + 3 I floats (inputs, outputs, gate|up, SwiGLU) */
    int expert_parallel;
    uint64_t ep_rows_worst, ep_rows_balanced;
    /* the experts' parameters (the expert units', of num_params) and the
     * parameters one rank stores (its full blocks: num_params less the
     * (N - 1) / N of the experts other ranks hold; = num_params at N = 1) */
    uint64_t expert_params, rank_params;
    /* of the training activations: the LM head's chunk buffers (classifier.h:
     * [R, vocab] fp32 logits, twice with a final soft-cap; bf16 with the
     * bf16 activations and no soft-cap, zt_classifier_l16) for the micro
     * batch's micro x seq_len / N rows, which it runs in chunks of chunk_rows
     * (zt_classifier_rows); full_logits_bytes: what one [micro x seq_len / N,
     * vocab] array (twice with a soft-cap) would be */
    uint64_t logits_bytes, full_logits_bytes;
    long chunk_rows;
    int logits_elem;         /* the chunk's element: 4 (fp32) or 2 (bf16, zt_classifier_l16) */
    uint64_t alltoall_bytes; /* sequence parallel: all-to-all bytes one rank sends per
                              * training step (seqpar.h zt_sp_alltoall_bytes x accumulation) */
    /* offload (a GPU target): host <-> device bytes per training step on a
     * rank (shard-group index 0, the largest slices): offload_h2d_bytes =
     * grad_accum x offload_micro_h2d (offload_param: each gather uploads the
     * owned slice of its unit, or of an NF4 base unit's rest, codes and
     * absmax; forward, backward and checkpointing's recomputes re-gather)
     * + offload_update_h2d (offload_optimizer without offload_param: the
     * updated slices up in the storage type); offload_d2h_bytes =
     * offload_update_d2h (the owned fp32 gradient slices down for the host's
     * AdamW, once per optimizer step).  What the engine moves besides (the
     * token batches, the step's scalars, host-staged collectives) is not
     * offloading and not counted here; an fp16 step skipped on overflow
     * makes no update (its gathers only).  0 without offload, and on a CPU
     * target (nothing moves). */
    uint64_t offload_h2d_bytes, offload_d2h_bytes;
    uint64_t offload_micro_h2d, offload_update_h2d, offload_update_d2h;
    int mixed;             /* bf16 / fp16 */
    int gpu;               /* GPU target: device and host places */
    int offload_optimizer, offload_param, with_data, with_eval;
    int overlap_comm;        /* stages 2-3, G > 1: reduce-scatters in flight during backward */
    uint64_t num_params;     /* Psi */
    uint64_t active_params;  /* of them, what one token uses (a Mixture of Experts: its k
                              * experts of each block's E; else Psi) */
    /* LoRA (ztrain.lora.r > 0): the adapters' rank and elements; the base
     * (num_params) is frozen: params_bytes holds both, grads_bytes and
     * optim_bytes the adapters' alone */
    int lora_r;
    uint64_t lora_params;
    uint64_t lora_base_bytes;      /* the frozen base's parameters on one rank */
    uint64_t lora_adapter_bytes;   /* the adapters' parameters on one rank (16-bit when mixed) */
    uint64_t largest_unit;   /* elements of the largest unit (the embedding, usually) */
    uint64_t largest_tensor; /* DeepSpeed's "largest layer" (wte, usually) */
    /* model states on one rank, bytes, wherever they live */
    uint64_t params_bytes, grads_bytes, optim_bytes;
    double formula_bytes;    /* the ZeRO paper's formula for the same stage/precision/N */
    double engine_formula_bytes; /* the same in closed form for what the engine keeps
                                  * (mixed: fp32 gradients, 18 Psi at stage 0) */
    /* peak of each category and of the total, per place */
    uint64_t cat[ZT_MP_NPLACES][ZT_MEM_NTAGS];
    uint64_t peak[ZT_MP_NPLACES];
    /* of cat[][]: the peak bytes per category the engine tags as offloaded to
     * host memory (ZT_MEM_ON_HOST: zt_memory_report's host_peak) */
    uint64_t offloaded[ZT_MEM_NTAGS];
    /* pin_memory: of offloaded[], the bytes a backend that can pin (a GPU
     * target: cuda) page-locks; 0 on a CPU target (zt_memory_report's
     * pinned_peak when every registration succeeds) */
    uint64_t pinned_bytes;
    /* of pinned_bytes, the page-locked staging of a device run's
     * asynchronous copies, whatever pin_memory says: the step's scalars (32
     * bytes), the training token arrays, a Mixture of Experts' routing
     * counts, and with the optimizer offloaded and pinned its gradient (and
     * 16-bit) staging slices (0 on a target that cannot pin) */
    uint64_t pinned_staging;
    const char *peak_phase[ZT_MP_NPLACES];   /* where the total peaks */
    /* including the end of a default `ztrain train` run: the llm.c weights
     * file when it is written (export_default), then the text sample */
    uint64_t end_peak[ZT_MP_NPLACES];
    /* the peak if each optional end step runs after training: the llm.c
     * weights export (stage 3, and mixed precision at stages 1-2, gather the
     * full fp32 parameters on every rank) and the text sample (a [1, T]
     * forward; --sample-tokens 0 skips it) */
    uint64_t export_peak[ZT_MP_NPLACES], sample_peak[ZT_MP_NPLACES];
    /* 1: a default run writes the llm.c weights file (a GPT-2 without LoRA);
     * 0: the weights stay in the final checkpoint (llama, LoRA) */
    int export_default;
    int sample_window;   /* the sample's [1, W] activation block (opts sample_window) */
    /* the binding per-rank total: device on a GPU target, host otherwise */
    uint64_t peak_bytes;
    /* GPU target on cuda: device bytes the backend holds itself, in
     * peak[ZT_MP_DEVICE] and end_peak[ZT_MP_DEVICE] but in no category:
     * the cuBLAS workspace and the scratch buffer at its final size (the
     * largest request of the GPT's kernel calls, cuda_workspace.h).  0 on
     * the CPU target and on cpu-strict (no buffers of its own). */
    uint64_t kernel_ws_bytes, scratch_bytes, cublas_ws_bytes;
    /* how the attention calls' scratch was counted (with kernel_ws_bytes):
     * att_asked the calls the backend answered (opts be; 0: ztrain's
     * kernels assumed), att_cudnn those counted on cuDNN's fused attention
     * (its buffers and the plan's workspace); att_path says it in words */
    int att_asked, att_cudnn;
    const char *att_path;
    /* checkpoint.async with periodic or timed saves: the host snapshot of
     * the state this rank writes (params, m, v of its owned slices; rank 0's,
     * the largest), held from the first periodic save to the last step
     * (ckpt/ckpt_async.c); 0 otherwise */
    uint64_t ckpt_snapshot_bytes;
    /* the peak of all accounted blocks, both places together (what
     * zt_memory's peak_total measures; = peak[ZT_MP_HOST] on the CPU target) */
    uint64_t accounted_peak;
} zt_memplan;

/* Predict.  cfg need not be finalized (a copy is, for o->world_size,
 * accepting estimate-only settings); "auto" micro batch must be resolved
 * first (zt_memplan_auto_micro). */
int zt_memplan_compute(const zt_config *cfg, const zt_memplan_opts *o, zt_memplan *out,
                       zt_status *st);

/* Bytes of the activation block for [B, T]: training (with checkpointing
 * group size ckpt_k, 0 = none) or forward-only; elem = 4 (fp32) or 2. */
uint64_t zt_memplan_acts_bytes(const zt_model_config *mc, int B, int T, int training,
                               int ckpt_k, int elem);

/* ZeRO model-state formula per rank (bytes): fp32 16/8+8/N/4+12/N/16/N Psi,
 * mixed 16/4+12/N/2+14/N/16/N Psi. */
double zt_memplan_formula(int stage, int mixed, double psi, double n);

/* What the engine keeps per rank (bytes), in closed form: fp32 as the
 * formula; mixed 2 Psi 16-bit parameters + 4 Psi fp32 gradients + 12 Psi
 * master and moments, sharded by stage: 18 / 6+12/N / 2+16/N / 18/N Psi. */
double zt_memplan_engine_formula(int stage, int mixed, double psi, double n);

/* DeepSpeed's estimator (model states only): GPU bytes per rank and CPU
 * bytes per node for stage 2/3 and an offload mode (0 none, 1 optimizer,
 * 2 params+optimizer); returns 0 when DeepSpeed gives no figure. */
int zt_memplan_deepspeed(int stage, int offload, double psi, double largest, int world,
                         int ranks_per_node, double *gpu, double *cpu);

/* Memory this host has available now (MemAvailable), 0 if unknown. */
uint64_t zt_memplan_host_available(void);

/* The per-rank limit in force: ztrain.memory_limit, else available host
 * memory / ranks per node.  (On a device backend this is the host place's
 * limit; zt_memplan_device_limit gives the device's.)  what[0..n) gets
 * its description: "available memory / 4 ranks on this node". */
uint64_t zt_memplan_limit(const zt_config *cfg, int ranks_per_node, char *what, size_t n);

/* What the planner cannot see on a device of `total` bytes: the CUDA
 * context's later growth, NCCL's communicators and buffers, cuBLAS's
 * handles, the allocator's rounding.  cuda: 512 MiB + 2% of total; other
 * backends (cpu-strict's emulated device): 0. */
#define ZT_MEMPLAN_CUDA_RESERVE_FIXED ((uint64_t)512 << 20)
#define ZT_MEMPLAN_CUDA_RESERVE_FRAC 0.02
uint64_t zt_memplan_device_reserve(const char *backend, uint64_t total);
/* What a run may plan on a device of `total` bytes of which `avail` are
 * free to it: avail less the reserve; 1 (refused, never 0 = unknown) when
 * the reserve takes it all.  The pre-flight check's and `ztrain estimate
 * --device-memory`'s limit. */
uint64_t zt_memplan_device_usable(const char *backend, uint64_t avail, uint64_t total);
/* What a CUDA process holds beyond the engine's own allocations (the CUDA
 * context, kernel images, cuBLAS's and NCCL's handles, the allocator pool's
 * rounding), at its peak: nvidia-smi's process peak less the engine's
 * measured device peak was 1.15-1.29 GiB in nine runs on an H100 and an
 * H200 (GPT-2 124M, bf16, stages 0 and 3 and offload; CUDA 13.0, driver
 * 580; docs/gpu.md), and the free memory at the run's check was 1.05-1.18
 * GiB below the device's total.  A run sees it as memory that
 * is not free; `ztrain estimate --device-memory` takes it off the device's
 * size (--cuda-context sets another figure). */
#define ZT_MEMPLAN_CUDA_CONTEXT ((uint64_t)1280 << 20)

struct zt_backend;
/* The per-rank device limit on a device backend (be->host_memory == 0):
 * ztrain.memory_limit when set; else the device's free memory as
 * be->device_memory reports it (cuda: plus what the backend already holds,
 * its cuBLAS workspace, which the plan counts as kernel workspace), less
 * zt_memplan_device_reserve, divided by ranks_on_device (ranks sharing one
 * GPU: local ranks / visible devices, rounded up; 1 when each rank has its
 * own); at least 1 byte (free memory below the reserve: every plan is
 * refused).  cpu-strict without an emulated capacity: the host limit (its
 * "device" is host memory).  0 when unknown.  what[n] describes it, naming
 * the device. */
uint64_t zt_memplan_device_limit(const zt_config *cfg, const struct zt_backend *be,
                                 int ranks_on_device, int ranks_per_node, char *what, size_t n);

/* Pre-flight: ZT_OK when plan fits limit (or cfg->force: then *forced = 1),
 * else ZT_ENOMEM with one line: the prediction, the limit, and the cheapest
 * changes that fit, each with its predicted saving.  On a GPU target the
 * limit is the device's ("device memory ... of <limit_what>"), and with
 * o->host_limit the host place must fit that too (a change fits when both
 * places do). */
int zt_memplan_check(const zt_config *cfg, const zt_memplan_opts *o, uint64_t limit,
                     const char *limit_what, zt_memplan *plan, int *forced, zt_status *st);

/* The changes that would make cfg fit limit, cheapest first, as one text
 * ("a (--flags): -38%; b (...): -52%").  Returns how many fit; *first gets
 * the flags of the first one ("" if none). */
int zt_memplan_suggest(const zt_config *cfg, const zt_memplan_opts *o, const zt_memplan *cur,
                       uint64_t limit, char *buf, size_t n, char *first, size_t nfirst);

/* A speed hint for a checkpointed run that fits (limit 0: no limit
 * known): `none` when the run fits the limit without checkpointing (no
 * recompute; only against a known limit), else, for `blocks`,
 * `blocks-attn` when it fits the same limit (it keeps each layer's
 * attention output and lse; the backward's recompute skips the attention):
 * one sentence with the predicted peak and the cost, and 1; else "" and 0. */
int zt_memplan_speed_hint(const zt_config *cfg, const zt_memplan_opts *o, const zt_memplan *cur,
                          uint64_t limit, char *buf, size_t n);

/* train_micro_batch_size_per_gpu = "auto": the largest micro batch whose
 * predicted peak is within (1 - margin) * limit, dividing train_batch_size /
 * world; gradient accumulation keeps train_batch_size.  Writes the choice
 * into cfg (micro batch, and accumulation when it was derived) and a
 * sentence saying why into why.  No-op when cfg's micro batch is not auto,
 * and when train_batch_size is not given (0 or "auto"): then there is
 * nothing to keep, and zt_config_finalize gives ztrain's default micro batch
 * as if the key were absent. */
#define ZT_MEMPLAN_AUTO_MARGIN 0.10
int zt_memplan_auto_micro(zt_config *cfg, const zt_memplan_opts *o, uint64_t limit,
                          double margin, char *why, size_t nwhy, zt_status *st);

/* "1.50 GiB" */
void zt_memplan_fmt_bytes(double bytes, char *buf, size_t n);

#endif
