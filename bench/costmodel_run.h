/*
 * costmodel_run.h -- a training step of the engine through the counting
 * backend (bench/costmodel_run.c; needs libtrain).
 */
#ifndef ZT_BENCH_COSTMODEL_RUN_H
#define ZT_BENCH_COSTMODEL_RUN_H

#include "costmodel.h"
#include "ztrain.h"

/* A model shape: GPT-2 (NKV = NH) or Llama (GQA, SwiGLU of I, tied
 * embeddings unless untied); micro batch B, sequence T. */
typedef struct cm_shape {
    char name[64];
    int llama, L, NH, NKV, C, I, V, B, T, untied;
    int qk_norm;   /* Qwen3's per-head q/k norms (ztrain.model.qk_norm) */
    /* Mixture of Experts (docs/moe.md) in every block: E experts (0: a
     * dense MLP of I), top-K, each of width Im, a shared expert of width S
     * (0: none); hd the head size (0: C / NH) */
    int E, K, Im, S, hd;
} cm_shape;

/* Built-in names (gpt2, smollm, llama3.2-1b, llama3.2-3b, llama3.1-8b,
 * mixtral-8x7b, qwen3-30b-a3b), gpt2:L,H,C,V,B,T or
 * llama:L,NH,NKV,C,I,V,B,T[,untied][,qk_norm][,hd=D][,moe=E:K:Im[:S]]
 * (the flags after the eight numbers in that order); 0 or -1. */
int cm_shape_parse(const char *s, cm_shape *out);
/* The shape as the recorded tables write it (gpt2: L,H,C,V,B,T; llama:
 * L,NH,NKV,C,I,V,B,T; a MoE's and a head size's flags after them). */
void cm_shape_key(const cm_shape *s, char *buf, size_t n);

typedef struct cm_run_opts {
    int stage;          /* zero_optimization.stage */
    int fp32;           /* fp32 parameters and matmuls instead of bf16 */
    unsigned whatif;    /* ZT_COUNT_WHATIF_* */
    int threads;        /* host threads of the engine (<= 0: 1) */
    int head_rows;      /* ztrain.classifier_chunk_rows (0: ztrain's default; B*T: the head in one
                         * chunk, as every recorded run before the chunked LM head) */
    int attention;      /* CM_ATT_*: which attention path the counted build takes */
    int lora_r;         /* ztrain.lora.r (0: full fine-tuning) */
    char lora_targets[64];  /* ztrain.lora.targets ("": the default, q and v) */
    char lora_base[16];     /* ztrain.lora.base ("": the compute dtype; nf4, nf4-dq: QLoRA) */
    char act_ckpt[32];      /* activation_checkpointing.policy ("": none; blocks, blocks-attn, every-K) */
    int offload;            /* CM_OFFLOAD_*: zero_optimization.offload_optimizer.device /
                             * offload_param.device = cpu (the engine's rules: optimizer needs
                             * stage >= 1, params stage 3; cm_offload_check) */
} cm_run_opts;
#define CM_OFFLOAD_NONE 0
#define CM_OFFLOAD_OPTIMIZER 1   /* offload_optimizer.device=cpu: AdamW on the host (ZeRO-Offload) */
#define CM_OFFLOAD_PARAMS 2      /* offload_param.device=cpu too (stage 3): the shards in host memory */
/* NULL when o's offload suits its stage, else why not (one line) */
const char *cm_offload_check(const cm_run_opts *o);
#define CM_ATT_AS_SET 0   /* as the counting backend is set (zt_count_set_cudnn; default: this build) */
#define CM_ATT_ZTRAIN 1   /* ztrain's kernels (a build without cuDNN, or ZT_CUDA_DETERMINISTIC=1) */
#define CM_ATT_CUDNN 2    /* cuDNN's fused attention where cuda_sdpa.cu's rule takes it */

typedef struct cm_counts {
    zt_count_kernel *k;  /* the step's distinct launches */
    size_t nk;
    zt_count_totals tot;
    double params;       /* every parameter (with LoRA: the base and the adapters) */
    double trained;      /* the trained ones (with LoRA: the adapters) */
    double fpt;          /* the model's FLOPs a token (zt_ctx_flops_per_token: MFU's) */
    size_t peak_bytes;   /* device memory the engine held at most (count's alloc) */
    /* --offload: the host AdamW's state (the engine's accounting: host bytes of
     * the optimizer category, master weights and moments) and the elements it
     * updates (the trained ones: one rank owns them all) */
    double host_opt_bytes, host_adam_elems;
    /* --offload: the planner's offload traffic of the step (zt_memplan
     * offload_h2d_bytes / offload_d2h_bytes, ztrain estimate's figure; of
     * the counted transfers, tests/test_memplan_run checks it is exactly
     * the part offloading adds) */
    double off_h2d, off_d2h;
} cm_counts;

/* The engine (built like bench_train: synthetic tokens, 1 rank,
 * ztrain.backend=cuda, ztrain.comm_backend=mpi) on `be` (zt_backend_count() or count_over(...)) as
 * the stand-in: one step, then the counts of a second one. */
int cm_count_step(const cm_shape *s, const cm_run_opts *o, const zt_backend *be, cm_counts *out,
                  zt_status *st);
void cm_counts_free(cm_counts *c);

#endif /* ZT_BENCH_COSTMODEL_RUN_H */
