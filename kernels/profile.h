/*
 * profile.h -- per-phase timing of a training step (bench_train --breakdown).
 *
 * Off by default, and then free: zt_prof_wrap() returns its argument and
 * the engine's phase marks are one branch each.  When enabled (before the
 * context is created), the engine wraps its backend table: every kernel is
 * timed (on a device backend, between synchronize() calls, so the times are
 * the kernels' own) and charged to its family, with the floating-point
 * operations or the bytes it moved, so that each family reports GFLOP/s or
 * GB/s.  The engine marks its own phases (data, communication + engine
 * bookkeeping) with zt_prof_begin/end; their time is EXCLUSIVE of the
 * kernels they call, so the families add up to the step.
 *
 * Process-wide state, not thread-safe: for benchmarks, one context at a time.
 */
#ifndef ZT_KERNELS_PROFILE_H
#define ZT_KERNELS_PROFILE_H

#include <stddef.h>
#include "backend.h"

typedef enum zt_prof_family {
    ZT_PROF_MATMUL_FWD = 0,  /* matmul_fwd: GEMM + bias */
    ZT_PROF_MATMUL_BWD,      /* matmul_bwd: two GEMMs + bias gradient */
    ZT_PROF_ATTN_FWD,        /* attention_fwd, gqa_fwd */
    ZT_PROF_ATTN_BWD,        /* attention_bwd, gqa_bwd */
    ZT_PROF_NORM,            /* layernorm, rmsnorm (fwd + bwd) */
    ZT_PROF_ACT,             /* gelu, swiglu, rope (fwd + bwd) */
    ZT_PROF_RESID,           /* residual add */
    ZT_PROF_EMBED,           /* encoder fwd + bwd */
    ZT_PROF_XENT,            /* softmax + cross-entropy fwd + bwd */
    ZT_PROF_ADAMW,           /* the optimizer update */
    ZT_PROF_GNORM,           /* sumsq (gradient norm), scale, nonfinite */
    ZT_PROF_MEM,             /* zero, copy, host <-> device, conversions, sum */
    ZT_PROF_COMM,            /* engine: collectives + ZeRO bookkeeping (exclusive) */
    ZT_PROF_DATA,            /* engine: the data source's get + upload (exclusive) */
    ZT_PROF_NFAM
} zt_prof_family;

typedef struct zt_prof_stat {
    double seconds;
    double flops;            /* floating-point operations (0 where not counted) */
    double bytes;            /* bytes read + written (estimate: each operand once) */
    long calls;
} zt_prof_stat;

/* Enable / disable (call before zt_ctx_create); resets the counters. */
void zt_prof_enable(int on);
int zt_prof_enabled(void);
/* The table to use: a timing wrapper of be when enabled, else be itself. */
const zt_backend *zt_prof_wrap(const zt_backend *be);
void zt_prof_reset(void);
/* Copy of the counters (out[ZT_PROF_NFAM]). */
void zt_prof_get(zt_prof_stat *out);
const char *zt_prof_family_name(int f);

/* Engine phases, exclusive of the kernels and of the marks nested inside
 * (their time is charged once, to the innermost).  A mark holds the start
 * time and the time charged so far at the start. */
typedef struct zt_prof_mark { double t0, k0; int on; } zt_prof_mark;
void zt_prof_begin(zt_prof_mark *m);
void zt_prof_end(zt_prof_mark *m, int family);

#endif /* ZT_KERNELS_PROFILE_H */
