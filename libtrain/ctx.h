/* ctx.h -- the training context (internal layout of zt_ctx). */
#ifndef ZT_CTX_H
#define ZT_CTX_H
#include <stdio.h>
#include "comm.h"
#include "config.h"
#include "engine.h"
#include "memplan.h"
#include "mesh.h"
#include "model.h"
#include "optim.h"
#include "shard.h"
#include "state.h"
#include "tbevents.h"

/* A model's activation state for one batch shape plus the token arrays the
 * data source fills (tagged like the activations). */
typedef struct zt_batch_buf {
    void *acts;
    int *inputs, *targets;       /* [B, T] each, in the backend's memory */
    int *h_inputs, *h_targets;   /* device backends: the host arrays the data source
                                  * writes (copied to inputs/targets); NULL on the cpu */
    void *up[2];                 /* their asynchronous uploads in flight (the training
                                  * step's), NULL: none; zt_batch_buf_wait */
    int B, T;
} zt_batch_buf;

struct zt_ctx {
    zt_config *cfg;              /* finalized copy */
    zt_callbacks cb;
    const zt_backend *be;        /* ztrain.backend */
    int device;                  /* cuda: this rank's device ordinal, else -1 */
    /* the rank layout (mesh.h): axis sizes, this rank's coordinates, the
     * world and the axes' groups (sequence parallelism: sp consecutive ranks
     * share their samples; dp = nranks / sp data parallel groups) */
    zt_mesh *mesh;
    int rank, nranks, threads;
    int *sp_in, *sp_tg;          /* host [B, T] whole samples, sliced to this rank's tokens */
    size_t sp_cap;               /* their capacity in tokens */
    zt_model *model;             /* layout + the model's operations */
    int own_model_self;          /* built-in model: freed with the context */
    zt_shard *sh;                /* the ZeRO engine (the model's zt_units) */
    zt_model *lmodel;            /* LoRA (lora.h): the adapters' layout, NULL: none */
    zt_shard *lsh;               /* ... and their engine, sh's peer (sh is then frozen) */
    uint64_t *base_fnv;          /* LoRA: the frozen base's per-tensor checksums, NULL: none */
    uint64_t base_config_fnv;
    zt_batch_buf acts;           /* training [micro_batch, context] */
    zt_batch_buf eval_acts;      /* forward-only [eval_batch_size, context] */
    zt_batch_buf sample_acts;    /* forward-only [1, context] */
    zt_adamw opt;
    zt_data_source train, val;
    int has_train, has_val;
    long step;
    double train_time_s;         /* wall time inside train steps */
    double fpt, peak;            /* zt_ctx_flops_per_token, zt_ctx_peak_tflops (perf_set: known) */
    int perf_set;
    FILE *metrics_fp;            /* rank 0 */
    int metrics_failed;          /* a write failed (warned once) */
    zt_tb tb;                    /* ztrain.tensorboard.dir's events file (rank 0; tb.fp) */
    int tb_warned;               /* a write to it failed (warned once) */
    double last_val_loss;
    zt_owned_range *owned;       /* zt_ctx_owned_state's ranges */
    int n_owned;
    zt_step_hook hook;
    void *hook_user;
    zt_state_fence fence;        /* zt_ctx_set_state_fence: before the owned state is written */
    void *fence_user;
    zt_precision prec;           /* parameter storage precision */
    zt_loss_scaler scaler;       /* fp16 loss scaling (disabled otherwise) */
    long inject_overflow[16];    /* test hook ZT_TEST_OVERFLOW_STEPS: steps (1-based) */
    int n_inject_overflow;       /* whose gradients are made to overflow */
    zt_memplan plan;             /* the pre-flight prediction (built-in GPT) */
    int have_plan;
    uint64_t mem_limit;          /* the limit it was checked against, 0 = none */
    /* the pre-flight check's planner options (with the host limit) and the
     * words for the limits (zt_ctx_end_fits); plan_forced: over the limit,
     * started anyway (ztrain.force) */
    zt_memplan_opts plan_opts;
    char limit_what[384], host_limit_what[64];
    int plan_forced;
    zt_startup startup;          /* zt_ctx_startup: where the context's start-up went */
    int gradfresh;               /* the blocks' weight gradients written fresh (precision.h
                                  * zt_gradfresh_of, shard.h zt_shard_fresh_range) */
    int headfresh;               /* and a tied head's by the fused head (config.h
                                  * ZT_W16_HEADFRESH, shard.h zt_shard_head_fresh) */
    int prefaulting;             /* its blocks may be queued for pre-faulting (mem.c) */
};

/* The engine whose parameters train: the adapters' with LoRA, else sh;
 * and its layout. */
static inline zt_shard *zt_ctx_tsh(const zt_ctx *ctx) { return ctx->lsh ? ctx->lsh : ctx->sh; }
static inline zt_model *zt_ctx_tmodel(const zt_ctx *ctx) { return ctx->lmodel ? ctx->lmodel : ctx->model; }

/* Wait until no checkpoint reads the owned state any more (state.h). */
static inline void zt_ctx_fence(zt_ctx *ctx) {
    if (ctx->fence) ctx->fence(ctx->fence_user);
}

/* Host arrays a data source fills for b (the device arrays themselves on a
 * host-memory backend), and moving them to the device after the fill. */
static inline int *zt_batch_host_inputs(zt_batch_buf *b) { return b->h_inputs ? b->h_inputs : b->inputs; }
static inline int *zt_batch_host_targets(zt_batch_buf *b) { return b->h_targets ? b->h_targets : b->targets; }
void zt_batch_buf_upload(zt_ctx *ctx, zt_batch_buf *b, int count_inputs, int count_targets);
/* The same with asynchronous copies where the backend has them (the host
 * arrays must not be written until zt_batch_buf_wait; a training step
 * waits before its data source writes them again, by when the step's one
 * synchronization has usually covered the copies). */
void zt_batch_buf_upload_async(zt_ctx *ctx, zt_batch_buf *b, int count_inputs, int count_targets);
/* Wait for the uploads in flight from b's host arrays (none: nothing),
 * with the collectives' bound (mesh.h zt_mesh_copy_wait): a hung or failed
 * collective queued before them fails here (st may be NULL). */
int zt_batch_buf_wait(zt_ctx *ctx, zt_batch_buf *b, zt_status *st);

/* Allocate / free a batch buffer through the model's acts_create. */
int zt_batch_buf_alloc(zt_ctx *ctx, zt_batch_buf *b, int B, int T, int training, int tag,
                       zt_status *st);
void zt_batch_buf_free(zt_ctx *ctx, zt_batch_buf *b);

/* perf.c: a device's dense peak in TFLOP/s by its name (16-bit tensor cores
 * with b16, else fp32), 0 when the name is none of the known GPUs' */
double zt_peak_tflops_of_name(const char *name, int b16);

#endif
