/*
 * count.h -- "count", a backend table that computes nothing and counts what
 * the CUDA backend (kernels/cuda/) would launch for each call: every kernel
 * or library call it would queue, with its floating-point operations and
 * the global-memory bytes it reads and writes, and the host
 * synchronizations and host <-> device transfers.  bench/costmodel turns
 * the counts of a training step into a predicted GPU step time
 * (bench/costmodel_h100.txt: a roofline per kernel class, calibrated on a
 * recorded bench_gpu table); tests/test_count.c checks the formulas.
 *
 * Not a backend for training: ztrain.backend does not name it.  A program
 * that wants the engine on it sets it as the stand-in (below) before
 * zt_ctx_create and configures ztrain.backend=cuda, so the engine plans and
 * behaves as on a GPU (device memory, bf16 matmuls by default) while every
 * compute call lands here.
 *
 * Memory: alloc() reserves address space only (PROT_NONE, not committed),
 * so a full-shape model "fits" on any host; host_memory is 0, so the engine
 * never touches it.  to_host writes zeros (but of the few buffers whose
 * contents it knows: what to_device wrote, its moe_permute's offsets;
 * count.c "known words"); sum / sumsq return 0 and
 * nonfinite 0 (every loss is 0).  zt_backend_count_over(inner) counts the
 * same way and also runs `inner` (its memory, its results): the tests
 * compare the two.
 *
 * Counting is process-wide (one engine at a time, as bench_train's
 * profile.h) and thread-safe.
 */
#ifndef ZT_KERNELS_COUNT_H
#define ZT_KERNELS_COUNT_H

#include <stddef.h>
#include "backend.h"

/* Kernel classes: the cost model gives each its own efficiency. */
typedef enum zt_count_class {
    ZT_CC_GEMM_BF16 = 0,  /* cuBLAS(Lt) GEMM, bf16 operands, fp32 accumulate and output */
    ZT_CC_GEMM_FP32,      /* cuBLAS(Lt) GEMM, fp32 (no TF32) */
    ZT_CC_ATT_GEMM,       /* batched bf16 GEMMs of the cuBLAS attention path (head size > 128) */
    ZT_CC_FLASH_FWD,      /* flash attention forward on tensor cores (k_ft_fwd) */
    ZT_CC_FLASH_BWD,      /* flash attention backward on tensor cores (k_ft_bwd_dkv, _dq) */
    ZT_CC_ATT32_FWD,      /* fp32 flash attention forward (k_att_fwd) */
    ZT_CC_ATT32_BWD,      /* fp32 flash attention backward (k_att_bwd_dkv, _dq) */
    ZT_CC_CUDNN_FWD,      /* cuDNN's fused attention forward: one SDPA graph execution (cuda_sdpa.cu) */
    ZT_CC_CUDNN_BWD,      /* cuDNN's fused attention backward: one SDPA graph execution */
    ZT_CC_STREAM,         /* elementwise, grid-stride: add, gelu, swiglu, rope, scale, ... */
    ZT_CC_CONVERT,        /* fp32 <-> bf16 / fp16 (k_round_bf16 before every bf16 GEMM) */
    ZT_CC_ROWNORM,        /* a warp per row: layernorm / rmsnorm fwd and dx, attention's rowdot */
    ZT_CC_COLSUM,         /* column partial sums over row chunks and their final sums (dw, dbias) */
    ZT_CC_SOFTMAX,        /* a block per row over the vocabulary (k_xent_fwd), attention softmax */
    ZT_CC_REDUCE,         /* sum / sumsq / nonfinite: a reduction read back by the host */
    ZT_CC_OPTIM,          /* AdamW */
    ZT_CC_SCATTER,        /* embedding backward: radix sort of the tokens, per-token row sums;
                           * the MoE routing, permutation, row scatter and row dot (uncoalesced
                           * rows: a thread a row or a block an expert) */
    ZT_CC_COPY,           /* device memcpy / memset */
    ZT_CC_HOST,           /* host <-> device transfers (bytes over the bus) */
    ZT_CC_N
} zt_count_class;

/* One distinct launch: a kernel (or library call) with the same counts
 * each time; `launches` times since the last reset. */
typedef struct zt_count_kernel {
    const char *name;     /* the CUDA kernel or library call, e.g. "k_round_bf16" */
    int cls;              /* zt_count_class */
    double flops;         /* per launch */
    double bytes;         /* per launch: global memory read + written (ZT_CC_HOST: over the bus) */
    long launches;
} zt_count_kernel;

/* The table's entries, in the order of backend.h (tallies of calls). */
#define ZT_COUNT_ENTRIES(X)                                                                  \
    X(synchronize) X(alloc) X(free) X(copy) X(to_host) X(to_device) X(zero)                  \
    X(to_host_async) X(to_device_async) X(copy_wait) X(encoder_fwd) X(encoder_fwd_w16) X(encoder_bwd)          \
    X(layernorm_fwd) X(layernorm_bwd) X(rmsnorm_fwd) X(rmsnorm_bwd) X(headnorm_fwd)         \
    X(headnorm_bwd) X(rope_fwd) X(rope_bwd) X(swiglu_fwd) X(swiglu_bwd) X(matmul_fwd)       \
    X(matmul_bwd) X(set_matmul_precision) X(attention_fwd) X(attention_bwd) X(gqa_fwd)      \
    X(gqa_bwd) X(gqa_ext_fwd) X(gqa_ext_bwd) X(geglu_fwd) X(geglu_bwd) X(softcap_fwd)       \
    X(softcap_bwd) X(gelu_fwd) X(gelu_bwd) X(add) X(xent_fwd) X(xent_bwd) X(adamw)          \
    X(sumsq) X(scale) X(dropout) X(to_bf16) X(from_bf16) X(to_f16) X(from_f16)              \
    X(nonfinite) X(nf4_dequant) X(sum) X(copy2d) X(xent_fused) X(sum_to)       \
    X(sumsq_to) X(nonfinite_to) X(adamw_multi) X(matmul_gelu_fwd) X(matmul_dgelu_bwd) \
    X(add_layernorm_fwd) X(add_rmsnorm_fwd) X(matmul_fwd_w16) X(matmul_bwd_w16) \
    X(matmul_gelu_fwd_w16) X(matmul_dgelu_bwd_w16) X(matmul_fwd_a16) X(matmul_bwd_a16) \
    X(matmul_gelu_fwd_a16) X(matmul_dgelu_bwd_a16) X(matmul_fwd_o16) X(gelu_fwd16) \
    X(swiglu_fwd16) X(geglu_fwd16) X(gelu_fwd16r) X(swiglu_fwd16r) X(geglu_fwd16r) \
    X(swiglu_bwd16) X(geglu_bwd16) X(gqa_ext_fwd16) \
    X(gqa_ext_bwd16) X(layernorm_fwd16) X(rmsnorm_fwd16) X(add_layernorm_fwd16) \
    X(add_rmsnorm_fwd16) X(add_rmsnorm_fwd16b) X(add_layernorm_fwd16b) X(rope_fwd16) X(xent16_fwd) X(xent16_fused) X(matmul_bwd_head16) \
    X(gqa_ext_fwd16o) X(gqa_ext_bwd16o) X(copy_done) X(matmul_bwd_d16) X(matmul_dgelu_bwd_d16) \
    X(layernorm_bwd16) X(layernorm_bwd16d) X(matmul_gelu_fwd_o16) X(rmsnorm_bwd16) X(rmsnorm_bwd16d) X(swiglu_bwd_d16) X(geglu_bwd_d16) X(swiglu_bwd_dd16) X(geglu_bwd_dd16) X(qknorm_rope_fwd16) \
    X(gqa_ext_bwd16d) \
    X(matmul_dgelu_bwd_o16) X(rope_bwd16) \
    X(att_do16) \
    X(matmul_bwd_o16) \
    X(gqa_ext_bwd16do) \
    X(matmul_dinp_acc) \
    X(alloc_nz) \
    X(matmul_fwd_acc) \
    X(matmul_bwd_acc) \
    X(matmul_fwd_acc16) \
    X(set_dw_fresh) \
    X(qknorm_rope_bwd16) \
    X(matmul_bwd_acc16) \
    X(moe_route_fwd) X(moe_route_bwd) X(rows_gather) X(rows_scatter) X(rows_dot) \
    X(moe_permute) X(moe_regroup) X(sigmoid_fwd) X(sigmoid_bwd) \
    X(matmul_grouped_o16) X(rows_gather16) X(rows_dot16) X(rows_scatter16) \
    X(matmul_grouped_bwd_o16) X(rows_dot16h) X(rows_sum16) X(matmul_grouped_dw16) \
    X(rows_gather_o16) X(from_bf16_runs)
#define ZT_COUNT_ENTRY_ENUM(e) ZT_CE_##e,
typedef enum zt_count_entry { ZT_COUNT_ENTRIES(ZT_COUNT_ENTRY_ENUM) ZT_CE_N } zt_count_entry;
#undef ZT_COUNT_ENTRY_ENUM

typedef struct zt_count_totals {
    long launches;        /* kernels and library calls queued on the device (transfers not included) */
    long syncs;           /* host waits for the device: synchronize, to_host, to_device (the CUDA
                           * backend's is synchronous), sum / sumsq / nonfinite, copy_wait of a
                           * copy no later sync covered (count.c) */
    long transfers;       /* host <-> device copies */
    double flops, bytes;  /* over the launches */
    double host_bytes;    /* over the transfers */
    long calls[ZT_CE_N];  /* calls of each table entry */
} zt_count_totals;

/* The counting table (no compute), and one that counts and runs `inner`. */
const zt_backend *zt_backend_count(void);
const zt_backend *zt_backend_count_over(const zt_backend *inner);

/* 1 when be is zt_backend_count()'s table (no compute, no values: the
 * engine may skip computing what it would only upload). */
int zt_count_bare(const zt_backend *be);

/* Forget everything counted so far. */
void zt_count_reset(void);
void zt_count_totals_get(zt_count_totals *t);
/* The distinct launches since the reset, in first-seen order (valid until
 * the next call of the table or reset); returns how many. */
size_t zt_count_kernels(const zt_count_kernel **out);
const char *zt_count_class_name(int cls);
const char *zt_count_entry_name(int entry);

/* What-ifs (a model of planned changes, not of the backend of today):
 * BF16_OPERANDS: GEMM operands arrive in bf16 (no k_round_bf16 launches);
 * FUSED_XENT: softmax + cross-entropy forward and backward in one pass over
 * the logits (xent_fwd reads the logits once and writes the gradient;
 * xent_bwd launches nothing). */
#define ZT_COUNT_WHATIF_BF16_OPERANDS 1u
#define ZT_COUNT_WHATIF_FUSED_XENT 2u
/* ...and one of the past: DOUT_PER_GEMM counts matmul_bwd / matmul_dgelu_bwd
 * in bf16 mode as the CUDA backend ran them before dout was rounded once for
 * both backward GEMMs (k_round_bf16 of dout per GEMM): how the bench_gpu
 * tables recorded so far ran, for replaying them (bench/costmodel_lib.c). */
#define ZT_COUNT_WHATIF_DOUT_PER_GEMM 4u
/* W16_ROUNDED counts the bf16-weight entries (matmul_fwd_w16 ...) as their
 * fp32-weight entries, the weight rounded by k_round_bf16 as the engine did
 * before its GEMMs read the bf16 storage.  AS_RECORDED: the kernels of the
 * bench_gpu tables recorded so far (before both changes), for comparing a
 * prediction with their measured steps (with A16_ROUNDED below). */
#define ZT_COUNT_WHATIF_W16_ROUNDED 8u
/* A16_ROUNDED counts the bf16-input entries (matmul_fwd_a16 ...) as if
 * their input arrived in fp32 and were rounded by k_round_bf16 (the models'
 * saved activations before they were kept in bf16; the replays of recorded
 * tables call only the fp32 entries). */
#define ZT_COUNT_WHATIF_A16_ROUNDED 16u
/* (bench/costmodel_run.c runs the engine with its activations in fp32 under
 * A16_ROUNDED, as the recorded runs kept them) */
/* NORM_BWD_SPLIT counts layernorm_bwd, rmsnorm_bwd (and their *_bwd16)
 * and headnorm_bwd as the CUDA backend ran them before one kernel made both
 * the input gradient and the weight gradient's partial sums: the dx kernel,
 * then the partial sums reading dout and the input again (the recorded
 * tables ran those). */
#define ZT_COUNT_WHATIF_NORM_BWD_SPLIT 32u
/* ADD_SPLIT: each block's last residual add as its own k_add, as before
 * the models folded it into the next norm (bench/costmodel_run.c runs the
 * engine with ZT_TEST_NO_ADDFOLD under it; the recorded tables ran that) */
#define ZT_COUNT_WHATIF_ADD_SPLIT 64u
/* HEAD_UNFUSED: the LM head's loss and gradient in separate passes, as
 * before a training forward fused them (libtrain/classifier.h "fused";
 * bench/costmodel_run.c runs the engine with ZT_TEST_NO_HEADFUSE under it;
 * the recorded tables ran that: xent16_fwd, then xent16_fused in backward) */
#define ZT_COUNT_WHATIF_HEAD_UNFUSED 128u
#define ZT_COUNT_AS_RECORDED                                                                     \
    (ZT_COUNT_WHATIF_DOUT_PER_GEMM | ZT_COUNT_WHATIF_W16_ROUNDED | ZT_COUNT_WHATIF_A16_ROUNDED | \
     ZT_COUNT_WHATIF_NORM_BWD_SPLIT | ZT_COUNT_WHATIF_ADD_SPLIT | ZT_COUNT_WHATIF_HEAD_UNFUSED)
void zt_count_set_whatif(unsigned flags);
/* 0: the cuBLAS attention path at every head size, as
 * zt_cuda_att_flash_for_test(0) makes the CUDA backend do. */
void zt_count_set_flash(int on);
/* 1: count attention as a build with cuDNN runs it (kernels/cuda/
 * cuda_sdpa.cu's rule: bf16 matmul mode, no soft-cap, head size a multiple
 * of 8 up to 256, ZT_CUDA_DETERMINISTIC unset or 0, lse 16-byte aligned);
 * 0: ztrain's kernels, as a build without cuDNN.  Default: what this build
 * has (ZT_HAVE_CUDNN).  Nothing calls cuDNN: a shape cuDNN would decline at
 * run time (no engine, no plan) is counted as cuDNN's all the same. */
void zt_count_set_cudnn(int on);
int zt_count_cudnn(void);
/* Device memory the count table reports (device_memory); default 80 GiB. */
void zt_count_set_device_bytes(size_t total);

/* The stand-in: when set (not NULL), the engine opens this table instead of
 * the one ztrain.backend names (libtrain/train.c), keeping everything else
 * of the configuration.  For bench/costmodel and the tests. */
void zt_backend_set_stand_in(const zt_backend *be);
const zt_backend *zt_backend_stand_in(void);

#endif /* ZT_KERNELS_COUNT_H */
