/*
 * state.h -- the training state each rank owns, as seen by checkpointing.
 *
 * The flat parameter block is cut unit by unit (model.h): within a shard
 * group of G ranks, the rank with group index r owns, in every unit u of
 * n_u elements, the slice [r*S_u, min((r+1)*S_u, n_u)) with
 * S_u = ceil(n_u / G).  Replica groups (hybrid sharding) own the same slices;
 * only replica 0 writes them.  At stage 0 every rank holds everything, but
 * ownership is still defined this way so that a checkpoint is written in
 * parallel and does not depend on the stage or world size it came from.
 */
#ifndef ZT_STATE_H
#define ZT_STATE_H
#include "internal.h"
#include "model.h"
#include "precision.h"

/* ceil(n / g): slice length of a unit of n elements over g ranks. */
static inline size_t zt_shard_len(size_t n, int g) { return (n + (size_t)g - 1) / (size_t)g; }

typedef struct zt_owned_range {
    size_t lo, hi;        /* [lo, hi): elements of the logical flat parameter block */
    float *param;         /* this rank's fp32 values for those elements (the master
                             copy when parameters are kept in lower precision) */
    float *m, *v;         /* AdamW moments for the same elements */
} zt_owned_range;

/* Elements of fp32 in the host buffer that stages a state on the backend's
 * device (on_device = 1) through every checkpoint save, restore and Hugging
 * Face load (ckpt/ckpt_internal.h: CK_CHUNK_ELEMS, ck_stage_buf: 16 MiB,
 * accounted as host workspace); the memory plan counts it (memplan.c). */
#define ZT_CKPT_STAGE_ELEMS ((size_t)4 << 20)

typedef struct zt_train_state {
    const zt_model *model;  /* tensor table: names, shapes, offsets */
    int n_ranges;
    zt_owned_range *ranges;  /* owned by the context; valid until it changes */
    int writer;           /* this rank writes its ranges (replica index 0) */
    long step;            /* optimizer steps completed */
    long adam_t;          /* AdamW updates applied (bias correction) */
    int world, stage, shard_group;
    int has_scaler;       /* fp16: the loss scaler's state below is live */
    zt_scaler_state scaler;
    /* Where the ranges' param/m/v live: on_device = 1: memory of backend
     * be (read and write them only with be->to_host / be->to_device, in
     * bounded pieces); 0: host memory. */
    const struct zt_backend *be;
    int on_device;
} zt_train_state;

/* The ranges this rank owns, with pointers into its live buffers. */
int zt_ctx_owned_state(zt_ctx *ctx, zt_train_state *out, zt_status *st);
/* After a restore wrote every owned range (params, m, v) on every rank,
 * rebuild the replicated copies (stage 0: everybody gets everything) and set
 * the counters.  Collective. */
int zt_ctx_state_restored(zt_ctx *ctx, long step, long adam_t, zt_status *st);
/* 1 while the AdamW moments still hold the zeros they were allocated with
 * (no update and no restore wrote them): a load starting from zero moments
 * need not write them (nor fault their pages in). */
int zt_ctx_moments_fresh(const zt_ctx *ctx);
/* Restore the fp16 loss scaler's state (same on every rank).  A no-op when
 * this run has no loss scaling; checked (ZT_EDATA on a corrupt state). */
int zt_ctx_scaler_restored(zt_ctx *ctx, const zt_scaler_state *s, zt_status *st);

/* Called by zt_train after each optimizer step (after logging/eval).  Return
 * ZT_OK to go on, ZT_EPREEMPTED to stop cleanly (zt_train then returns
 * ZT_EPREEMPTED), anything else to fail. */
typedef int (*zt_step_hook)(void *user, zt_ctx *ctx, zt_status *st);
void zt_ctx_set_step_hook(zt_ctx *ctx, zt_step_hook fn, void *user);

/* A fence on the owned state: a checkpoint may keep reading the ranges of
 * zt_ctx_owned_state (params, m, v) after its call returned (an asynchronous
 * save copies them in the background while the next step's forward and
 * backward run, which only read them).  The context calls fn before
 * anything writes them again: the optimizer update, zt_ctx_owned_state
 * itself (a restore or a load writes through its ranges), the end of
 * zt_train, zt_ctx_free.  fn returns when nothing reads them any more.
 * NULL: none. */
typedef void (*zt_state_fence)(void *user);
void zt_ctx_set_state_fence(zt_ctx *ctx, zt_state_fence fn, void *user);

#endif
