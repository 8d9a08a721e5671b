/*
 * shard.h -- the ZeRO sharding engine.
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
 *            the current one computes.  The embedding unit (tied LM head)
 *            stays gathered from the encoder to the head's backward.
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

typedef struct zt_shard {
    int stage;
    int G, r;                 /* shard group size and index in it */
    int R, rr;                /* replica groups and index in them */
    zt_group *world, *shard, *replica;  /* shard == world when G == W; replica NULL when R == 1 */
    zt_gpt *m;
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
    int training_pass;        /* forward is followed by a backward */
    long step;                /* for error context */
} zt_shard;

/* Build the plan; allocates shard buffers; installs model hooks. The model
 * must have been created with the buffers the stage keeps (see
 * zt_shard_model_flags). */
int zt_shard_create(zt_gpt *m, int stage, int shard_group, zt_group *world, zt_shard **out,
                    zt_status *st);
void zt_shard_free(zt_shard *sh);
/* Which full blocks the model keeps at a stage (ZT_GPT_* flags). */
int zt_shard_model_flags(int stage);

/* Initialize parameters (every stage: identical values to a replicated init). */
void zt_shard_init_params(zt_shard *sh, uint64_t seed);
/* Start a step: zero gradient storage. */
void zt_shard_zero_grads(zt_shard *sh);
/* Whether the next forward is followed by a backward (stage 3 keeps the
 * embedding unit gathered for the LM head's backward). */
static inline void zt_shard_set_training(zt_shard *sh, int t) { sh->training_pass = t; }
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
