/*
 * shard.h -- the ZeRO sharding engine; to a model it is the zt_units of the
 * public unit API (ztrain.h), which it implements.
 *
 * Units (model.h) are cut into contiguous slices over a shard group of G
 * consecutive ranks: the rank with group index r owns [r*S, min((r+1)*S, n))
 * of every unit of n elements, S = ceil(n / G) -- so any parameter count
 * works with any world size.  W / G replica groups hold identical slices
 * (hybrid sharding, HSDP); gradients are reduced across them.
 *
 *   stage 0  everything replicated; gradients all-reduced over the world
 *   stage 1  AdamW state sharded; gradients reduce-scattered per unit after
 *            the last micro-step; each rank updates its slice; parameters
 *            all-gathered per unit
 *   stage 2  as 1, and gradients sharded: each unit's gradient is
 *            reduce-scattered from a unit-sized bucket as soon as that
 *            unit's backward finishes (no full-model gradient buffer)
 *   stage 3  as 2, and parameters sharded: a unit is all-gathered just
 *            before its forward and again before its backward and freed
 *            after use; the next unit's gather is started non-blocking while
 *            the current one computes (unit u+1 in forward, u-1 in
 *            backward, started when unit u is first asked for in a pass).
 *            A model keeps a unit gathered by not releasing it (the GPT
 *            keeps its tied embedding from the encoder to the head's
 *            backward).
 */
#ifndef ZT_SHARD_H
#define ZT_SHARD_H
#include "comm.h"
#include "model.h"
#include "optim.h"

typedef struct zt_unit_shard {
    size_t n;          /* unit elements */
    size_t off;        /* unit offset in the logical flat block */
    size_t lo, len;    /* this rank's slice within the unit */
    size_t soff;       /* offset of the slice in compact shard buffers */
    int *counts, *displs;  /* per shard-group rank, for the collectives */
} zt_unit_shard;

typedef struct zt_units zt_shard;
enum { ZT_PASS_NONE = 0, ZT_PASS_FWD, ZT_PASS_BWD };

struct zt_units {
    int stage;
    int G, r;                 /* shard group size and index in it */
    int R, rr;                /* replica groups and index in them */
    zt_group *world, *shard, *replica;  /* shard == world when G == W; replica NULL when R == 1 */
    zt_model *m;
    const zt_backend *be;
    int nu;
    zt_unit_shard *u;
    size_t shard_total;       /* elements this rank owns (sum of len) */
    size_t max_unit;
    float *pshard;            /* stage 3: owned fp32 parameters */
    float *gshard;            /* stage >= 2: owned gradients, accumulated */
    float *rs_buf;            /* reduce-scatter receive buffer [max slice] */
    float **gathered;         /* stage 3: per unit gathered params or NULL */
    zt_request *req;          /* stage 3: per unit pending gather */
    float **bucket;           /* stage >= 2: per unit gradient bucket or NULL */
    unsigned char *seen;      /* per unit: asked for in the current pass */
    unsigned char *gopen;     /* per unit: zt_unit_grads without grads_done yet */
    int pass;                 /* ZT_PASS_* */
    long step;                /* for error context */
};

/* Build the plan and allocate shard buffers.  The model must have been
 * created with the blocks the stage keeps (zt_shard_model_flags).  world
 * may be NULL: one process, no communication (stage 0 only). */
int zt_shard_create(zt_model *m, int stage, int shard_group, zt_group *world, zt_shard **out,
                    zt_status *st);
void zt_shard_free(zt_shard *sh);
/* Which full blocks the model keeps at a stage (ZT_MODEL_* flags). */
int zt_shard_model_flags(int stage);

/* Run the model's forward through the engine.  training: a backward on
 * the same acts follows (units the model keeps stay gathered); otherwise
 * every gathered unit is released afterwards. */
int zt_shard_forward(zt_shard *sh, void *acts, const int *inputs, const int *targets, int B,
                     int T, int training, double *loss_sum, zt_status *st);
/* Run the model's backward of the last training forward. */
int zt_shard_backward(zt_shard *sh, void *acts, float dloss, zt_status *st);

/* Initialize parameters (every stage: identical values to a replicated init). */
void zt_shard_init_params(zt_shard *sh, uint64_t seed);
/* Start a step: zero gradient storage. */
void zt_shard_zero_grads(zt_shard *sh);
/* After the last micro-step: finish the gradient reduction. */
int zt_shard_reduce_grads(zt_shard *sh, zt_status *st);
/* Global gradient norm squared (over shards; identical on every rank). */
int zt_shard_grad_sumsq(zt_shard *sh, double *out, zt_status *st);
/* AdamW on this rank's slices, then re-assemble parameters (stages 1-2). */
int zt_shard_update(zt_shard *sh, zt_adamw *o, double lr, double grad_scale, zt_status *st);
/* Moments this rank keeps: Psi at stage 0, the owned slice otherwise. */
size_t zt_shard_optim_elems(const zt_shard *sh);

/* Full parameters for export: a pointer to the model's block (stages 0-2) or
 * a gathered copy (stage 3, collective; *owned = 1: free with zt_mem_free). */
int zt_shard_full_params(zt_shard *sh, float **out, int *owned, zt_status *st);
/* Set every parameter from a full block present on every rank. */
void zt_shard_set_full_params(zt_shard *sh, const float *full);

#endif
