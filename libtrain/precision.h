/*
 * precision.h -- mixed precision: storage types, the fp16 loss scaler and
 * the helpers the engine uses around them.
 *
 * Modes (config: bf16.enabled, fp16.enabled; neither = fp32):
 *   fp32  everything fp32.
 *   bf16  parameters stored (sharded, gathered, moved) as bfloat16; fp32
 *         master weights and AdamW state; no loss scaling.
 *   fp16  as bf16 with IEEE binary16 storage, plus loss scaling with
 *         DeepSpeed's semantics (below).
 * Compute and gradient accumulation are fp32 in every mode; gradients are
 * reduced in communication_data_type.
 *
 * The loss scaler (fp16 only; disabled it is the constant 1 and never skips):
 *   - static (fp16.loss_scale = S > 0): the scale is S forever; a step whose
 *     gradients overflow is still skipped.
 *   - dynamic (fp16.loss_scale = 0): starts at 2^fp16.initial_scale_power.
 *     On an overflow (any inf/nan in the gradients on any rank) the step is
 *     skipped; while hysteresis is left it only counts down; once it is
 *     exhausted (hysteresis_left == 1 at the overflow) the scale halves,
 *     floored at fp16.min_loss_scale, and an overflow with the scale already
 *     at the minimum is an error (ZT_EDATA, "loss scale already at minimum").
 *     Every fp16.loss_scale_window consecutive overflow-free steps the scale
 *     doubles and hysteresis_left is refilled to fp16.hysteresis.
 *     (DeepSpeed's DynamicLossScaler with consecutive_hysteresis=false and
 *     raise_error_at_min_scale=true.)
 */
#ifndef ZT_PRECISION_H
#define ZT_PRECISION_H

#include "backend.h"
#include "comm.h"
#include "config.h"
#include "internal.h"

typedef enum zt_precision { ZT_PREC_FP32 = 0, ZT_PREC_BF16, ZT_PREC_FP16 } zt_precision;

/* The mode a (finalized) config asks for. */
zt_precision zt_precision_of(const zt_config *cfg);
const char *zt_precision_name(zt_precision p);          /* "fp32", "bf16", "fp16" */
/* Element type of parameter storage: ZT_F32, ZT_BF16 or ZT_F16. */
zt_dtype zt_precision_dtype(zt_precision p);
/* Bytes per stored parameter element: 4 or 2. */
size_t zt_precision_elem_size(zt_precision p);
/* Element type gradients are reduced in (communication_data_type). */
zt_dtype zt_comm_dtype_of(const zt_config *cfg);
/* 1 when the matmul and attention operands are rounded to bf16
 * (ztrain.matmul_precision; auto: bf16.enabled on the cuda backend, cuda
 * != 0), else 0 (fp32 operands) */
int zt_matmul_bf16_of(const zt_config *cfg, int cuda);
/* 1 when the engine hands the models' GEMMs the bf16 parameter storage
 * (zt_unit_params16, stages 0-2, not a frozen base) and widens only the
 * other tensors: bf16.enabled, and on cuda bf16 matmuls (the cpu backends
 * widen the weight per call: the same values) */
int zt_weights16_of(const zt_config *cfg);
/* 1 when the models keep the saved activations only GEMMs read in bf16
 * (zt_model_config.acts16): bf16.enabled with bf16 matmuls (cuda: the
 * backend's; see zt_matmul_bf16_of), whose GEMMs round those activations to
 * bf16 anyway, so the results are bitwise the same; and the GEMM outputs
 * q|k|v, the attention output and fc / gate|up, read rounded by the
 * attention, GELU and SwiGLU too (docs/precision.md) */
int zt_acts16_of(const zt_config *cfg, int cuda);
/* The bf16-output paths a run's model takes where its backend has the
 * entries (zt_model_config.w16, config.h ZT_W16_*; model.h): every bit set,
 * decided once when the run's model is set up; a bit's test hook
 * (ZT_TEST_NO_*: the list beside the ZT_W16_* bits in config.h, the table
 * out16_hooks in precision.c) set then: that path off (tests compare the two
 * paths) */
void zt_out16_of(zt_model_config *mc);
/* QLoRA where the GEMMs read bf16 weights (zt_weights16_of): 1, a block's
 * NF4 weights are dequantized straight into bf16 (shard_nf4.c; zt_shard_prec
 * .nf4w16), decided once when the engine is set up; the test hook
 * ZT_TEST_NO_NF4W16 set then: 0, dequantized into the fp32 copy (bitwise the
 * same values: tests compare the two paths) */
int zt_nf4w16_of(void);
/* QLoRA: 1, a unit's compute copy is built in buffers allocated without the
 * zero fill where they are wholly overwritten (ZT_MEM_NOZERO) and, where the
 * store is not sharded (stages 0-2, a one-rank group), reads the store's
 * codes, absmax and rest in place (shard_nf4.c; zt_shard_prec.nf4view),
 * decided once when the engine is set up; the test hook ZT_TEST_NO_NF4VIEW
 * set then: 0, the zero-filled gathered copies as before (bitwise the same
 * values: tests compare the two paths) */
int zt_nf4view_of(void);
/* Full fine-tuning: 1, the blocks' weight gradients are written fresh by
 * their first micro-batch's dW GEMMs (beta 0, backend.h set_dw_fresh) and
 * the step's zeroing skips them (shard.h zt_shard_fresh_range, where the
 * engine can prove it), decided once when the engine is set up; the test
 * hook ZT_TEST_NO_GRADFRESH set then: 0, the whole gradient block zeroed
 * and every dW GEMM adding into it as before (the same values but the sign
 * of a zero: a -0.0 sum stays -0.0; tests compare the two paths) */
int zt_gradfresh_of(void);
/* Activation checkpointing: 1, the backward runs the last checkpoint
 * group's blocks on the activations the training forward just left in
 * their slots and recomputes only the groups below it (model_skel.c, the
 * planner's replay memplan.c sim_backward, seqpar.h's recomputed layers:
 * zt_acts_ckpt_recomputed), read once where each is set up; the test hook
 * ZT_TEST_NO_CKPTKEEP set: 0, every group recomputed as before (bitwise
 * the same values: tests compare the two paths) */
int zt_ckptkeep_of(void);
/* The fp32 copy of a unit's tensors other than the GEMM-only ones (shard.c
 * make_view, bf16 storage): 1, their runs widened together by the
 * backend's from_bf16_runs (one launch for up to ZT_CUDA_WIDEN_RUNS runs),
 * read once where the engine is set up; the test hook
 * ZT_TEST_NO_WIDENRUNS set: 0, a from_bf16 a run as before (bitwise the
 * same values) */
int zt_widen_runs_of(void);

/* ------------------------------------------------------------ loss scaler */

/* What a checkpoint saves and restores (plain values, no pointers). */
typedef struct zt_scaler_state {
    double scale;             /* current loss scale */
    int64_t good_steps;       /* overflow-free steps since the last overflow or growth */
    int32_t hysteresis_left;  /* 1 = the next overflow halves the scale */
    int32_t reserved;         /* 0 */
} zt_scaler_state;

typedef struct zt_loss_scaler {
    int enabled;              /* fp16: scale the loss, skip overflowing steps */
    int dynamic;              /* the scale adapts (fp16.loss_scale == 0) */
    double min_scale;         /* fp16.min_loss_scale */
    int window;               /* fp16.loss_scale_window */
    int hysteresis;           /* fp16.hysteresis */
    zt_scaler_state s;
    /* counters since init (not part of the checkpointed state) */
    uint64_t skipped;         /* steps skipped because of an overflow */
    uint64_t shrinks, grows;  /* scale changes */
} zt_loss_scaler;

/* Set up from a finalized config (enabled iff fp16.enabled). */
void zt_scaler_init(zt_loss_scaler *ls, const zt_config *cfg);
/* The factor the loss gradient is multiplied by (1 when disabled). */
static inline float zt_scaler_scale(const zt_loss_scaler *ls) {
    return ls->enabled ? (float)ls->s.scale : 1.0f;
}
/* Record the outcome of one optimizer step.  `overflow` must be the same
 * on every rank (see zt_prec_overflow_any).  *skip = 1: do not apply this
 * step's update (the gradients are discarded).  Fails (ZT_EDATA) when an
 * overflow would shrink the dynamic scale below fp16.min_loss_scale; the
 * state is then left unchanged.  `step` only names the step in messages. */
int zt_scaler_update(zt_loss_scaler *ls, int overflow, long step, int *skip, zt_status *st);
/* Restore a saved state (checked: scale finite and > 0, counters in range). */
int zt_scaler_set_state(zt_loss_scaler *ls, const zt_scaler_state *s, zt_status *st);

/* ------------------------------------------------------------ helpers */

/* Unscale gradients in place (g *= inv_scale, skipped when inv_scale == 1)
 * and return how many of them are non-finite afterwards.  Checking after
 * the multiply also catches values that inv_scale > 1 (a loss scale below 1)
 * pushes past the fp32 range.  g lives on be's device. */
size_t zt_prec_unscale_check(const zt_backend *be, float *g, size_t n, float inv_scale);
/* Whether any rank of g saw a non-finite value (local_nonfinite > 0
 * anywhere): one all-reduce of a single int; every rank gets the same
 * answer, so they all skip or all step.  g may be NULL (one rank). */
int zt_prec_overflow_any(zt_group *g, size_t local_nonfinite, int *overflow, zt_status *st);
/* Narrow fp32 values to storage of mode p (the master -> working-copy
 * refresh): fp32 copies, bf16/fp16 round to nearest even.  dst and src are
 * on be's device. */
void zt_prec_narrow(const zt_backend *be, zt_precision p, void *dst, const float *src, size_t n);
/* Widen storage of mode p to fp32 (exact). */
void zt_prec_widen(const zt_backend *be, zt_precision p, float *dst, const void *src, size_t n);

#endif /* ZT_PRECISION_H */
