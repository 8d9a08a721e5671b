/*
 * count.c -- the counting backend (count.h): what the CUDA backend would
 * launch for each table call, with FLOPs and global-memory bytes.
 *
 * Each entry mirrors its CUDA implementation (kernels/cuda/, its .cu files): the same
 * kernels in the same order, under the same conditions (empty shapes, the
 * matmul precision, which attention path).  Per kernel, the formula of its
 * counts is in the comment above the entry.  Notation: N = B*T rows, f = 4
 * bytes (fp32), h = 2 (bf16), P and R the row chunks of the column sums
 * (zt_cuda_ws_col_chunks: P = min(256, ceil(N/32)) chunks of R rows).
 *
 * Bytes are each operand read or written once, as the kernel addresses it
 * (what a perfect cache would leave of its traffic), with two exceptions
 * where the kernel's re-reads do not fit on chip: k_xent_fwd reads each
 * row of V logits three times (max, sum, then the probabilities), and
 * k_layernorm_bwd_part / k_rmsnorm_bwd_part (what-if NORM_BWD_SPLIT) read
 * the per-row statistics once per column block.  GEMMs count their
 * operands once (cuBLAS's tile re-reads hit L2).  FLOPs: multiply-adds as 2; elementwise kernels count
 * their arithmetic per element (exp, tanh, sqrt: 1 each), which the cost
 * model does not use (they are memory-bound).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "count.h"
#include "cuda/cuda_workspace.h"

/* ------------------------------------------------------------ kernels */

enum {
    K_ROUND_BF16, K_GEMM_BF16, K_GEMM_F32, K_MEMSET, K_ADD_BIAS, K_COLSUM_PART, K_COLSUM_FINAL,
    K_ENCODER_FWD, K_ENCODER_BWD_WPE, K_IOTA, K_SORT_HIST, K_SORT_SCAN, K_SORT_PASS,
    K_ENCODER_BWD_WTE, K_LAYERNORM_FWD, K_LAYERNORM_BWD_DX, K_LAYERNORM_BWD_PART, K_RMSNORM_FWD,
    K_RMSNORM_BWD_DX, K_RMSNORM_BWD_PART, K_HEADNORM_FWD, K_HEADNORM_BWD_PART, K_HEADNORM_BWD_DX,
    K_LAYERNORM_BWD, K_RMSNORM_BWD, K_HEADNORM_BWD, K_ROPE, K_SWIGLU_FWD, K_SWIGLU_BWD, K_GEGLU_FWD, K_GEGLU_BWD, K_SOFTCAP_FWD, K_SOFTCAP_BWD,
    K_GELU_FWD, K_GELU_BWD, K_GELU_FWD16, K_SWIGLU_FWD16, K_SWIGLU_BWD16, K_GEGLU_FWD16,
    K_GELU_FWD16R, K_SWIGLU_FWD16R, K_GEGLU_FWD16R, K_GELU_FWD16P,
    K_GEGLU_BWD16, K_ADD, K_SCALE, K_DROPOUT, K_XENT_FWD, K_XENT_BWD, K_XENT_FUSED, K_ADAMW, K_SUM,
    K_SUMSQ, K_NONFINITE, K_TO_BF16, K_FROM_BF16, K_TO_F16, K_FROM_F16, K_NF4, K_ATT_TC_ROUND,
    K_FT_FWD, K_FT_BWD_DKV, K_FT_BWD_DQ, K_ATT_ROWDOT, K_ATT_FWD, K_ATT_BWD_DKV, K_ATT_BWD_DQ,
    K_ATT_GEMM, K_ATT_TC_SOFTMAX, K_ATT_TC_DS, K_MEMCPY, K_MEMCPY2D, K_H2D, K_D2H, K_ADAMW_MULTI,
    K_SUM_RANGES, K_SUMSQ_RANGES, K_NONFINITE_RANGES, K_FINISH_RANGES, K_BGRAD_ACC, K_ADD_LAYERNORM_FWD, K_ADD_RMSNORM_FWD,
    K_LAYERNORM_FWD16, K_RMSNORM_FWD16, K_ADD_LAYERNORM_FWD16, K_ADD_RMSNORM_FWD16, K_ADD_RMSNORM_FWD16B, K_ADD_LAYERNORM_FWD16B, K_ROPE_FWD16, K_QKNORM_ROPE_FWD16,
    K_SDPA_ROUND, K_SDPA_WIDEN, K_CUDNN_FWD, K_CUDNN_BWD, K_COLSUM16_PART,
    K_XENT16_FWD, K_XENT16_FUSED, K_GELU_BWD_O16, K_ROPE_BWD16, K_ROPE_COLSUM16_PART,
    K_QKNORM_ROPE_BWD16, K_MOE_ROUTE_FWD, K_MOE_ROUTE_BWD, K_ROWS_GATHER, K_ROWS_SCATTER,
    K_ROWS_DOT, K_MOE_COUNT, K_MOE_OFFSETS, K_MOE_FILL, K_MOE_REGROUP, K_SIGMOID_FWD, K_SIGMOID_BWD,
    K_GEMM_GROUPED, K_GROUPED_PTRS, K_ROWS_GATHER16, K_ROWS_DOT16, K_ROWS_SCATTER16,
    K_GEMM_GROUPED_BWD, K_ROWS_DOT16H, K_MOE_INVERSE, K_ROWS_SUM16, K_GEMM_GROUPED_DW, K_GROUPED_DW_PTRS,
    K_DW_ADD16, K_ROWS_GATHER_O16, K_FROM_BF16_RUNS, K_N
};

static const struct { const char *name; int cls; } KT[K_N] = {
    [K_ROUND_BF16] = {"k_round_bf16", ZT_CC_CONVERT},
    [K_GEMM_BF16] = {"cublasLt gemm bf16", ZT_CC_GEMM_BF16},
    [K_GEMM_F32] = {"cublasLt gemm fp32", ZT_CC_GEMM_FP32},
    [K_MEMSET] = {"cudaMemsetAsync", ZT_CC_COPY},
    [K_ADD_BIAS] = {"k_add_bias", ZT_CC_STREAM},
    [K_BGRAD_ACC] = {"k_bgrad_acc", ZT_CC_STREAM},
    [K_COLSUM_PART] = {"k_colsum_part", ZT_CC_COLSUM},
    [K_COLSUM_FINAL] = {"k_colsum_final", ZT_CC_COLSUM},
    [K_ENCODER_FWD] = {"k_encoder_fwd", ZT_CC_STREAM},
    [K_ENCODER_BWD_WPE] = {"k_encoder_bwd_wpe", ZT_CC_STREAM},
    [K_IOTA] = {"k_iota", ZT_CC_STREAM},
    [K_SORT_HIST] = {"cub radix sort: histogram", ZT_CC_SCATTER},
    [K_SORT_SCAN] = {"cub radix sort: scan", ZT_CC_SCATTER},
    [K_SORT_PASS] = {"cub radix sort: onesweep pass", ZT_CC_SCATTER},
    [K_ENCODER_BWD_WTE] = {"k_encoder_bwd_wte", ZT_CC_SCATTER},
    [K_LAYERNORM_FWD] = {"k_layernorm_fwd", ZT_CC_ROWNORM},
    [K_LAYERNORM_BWD_DX] = {"k_layernorm_bwd_dx", ZT_CC_ROWNORM},
    [K_LAYERNORM_BWD_PART] = {"k_layernorm_bwd_part", ZT_CC_COLSUM},
    [K_RMSNORM_FWD] = {"k_rmsnorm_fwd", ZT_CC_ROWNORM},
    [K_ADD_LAYERNORM_FWD] = {"k_add_layernorm_fwd", ZT_CC_ROWNORM},
    [K_ADD_RMSNORM_FWD] = {"k_add_rmsnorm_fwd", ZT_CC_ROWNORM},
    [K_LAYERNORM_FWD16] = {"k_layernorm_fwd16", ZT_CC_ROWNORM},
    [K_RMSNORM_FWD16] = {"k_rmsnorm_fwd16", ZT_CC_ROWNORM},
    [K_ADD_LAYERNORM_FWD16] = {"k_add_layernorm_fwd16", ZT_CC_ROWNORM},
    [K_ADD_RMSNORM_FWD16] = {"k_add_rmsnorm_fwd16", ZT_CC_ROWNORM},
    [K_ADD_RMSNORM_FWD16B] = {"k_add_rmsnorm_fwd16b", ZT_CC_ROWNORM},
    [K_ADD_LAYERNORM_FWD16B] = {"k_add_layernorm_fwd16b", ZT_CC_ROWNORM},
    [K_RMSNORM_BWD_DX] = {"k_rmsnorm_bwd_dx", ZT_CC_ROWNORM},
    [K_RMSNORM_BWD_PART] = {"k_rmsnorm_bwd_part", ZT_CC_COLSUM},
    [K_HEADNORM_FWD] = {"k_headnorm_fwd", ZT_CC_ROWNORM},
    [K_HEADNORM_BWD_PART] = {"k_headnorm_bwd_part", ZT_CC_COLSUM},
    [K_HEADNORM_BWD_DX] = {"k_headnorm_bwd_dx", ZT_CC_ROWNORM},
    [K_LAYERNORM_BWD] = {"k_layernorm_bwd", ZT_CC_ROWNORM},
    [K_RMSNORM_BWD] = {"k_rmsnorm_bwd", ZT_CC_ROWNORM},
    [K_HEADNORM_BWD] = {"k_headnorm_bwd", ZT_CC_ROWNORM},
    [K_ROPE] = {"k_rope", ZT_CC_STREAM},
    [K_ROPE_FWD16] = {"k_rope_fwd16", ZT_CC_STREAM},
    [K_QKNORM_ROPE_FWD16] = {"k_qknorm_rope_fwd16", ZT_CC_ROWNORM},
    [K_SWIGLU_FWD] = {"k_swiglu_fwd", ZT_CC_STREAM},
    [K_SWIGLU_BWD] = {"k_swiglu_bwd", ZT_CC_STREAM},
    [K_GEGLU_FWD] = {"k_geglu_fwd", ZT_CC_STREAM},
    [K_GEGLU_BWD] = {"k_geglu_bwd", ZT_CC_STREAM},
    [K_SOFTCAP_FWD] = {"k_softcap_fwd", ZT_CC_STREAM},
    [K_SOFTCAP_BWD] = {"k_softcap_bwd", ZT_CC_STREAM},
    [K_GELU_FWD] = {"k_gelu_fwd", ZT_CC_STREAM},
    [K_GELU_BWD] = {"k_gelu_bwd", ZT_CC_STREAM},
    [K_GELU_BWD_O16] = {"k_gelu_bwd_o16", ZT_CC_STREAM},
    [K_QKNORM_ROPE_BWD16] = {"k_qknorm_rope_bwd16", ZT_CC_ROWNORM},
    [K_GELU_FWD16] = {"k_gelu_fwd16", ZT_CC_STREAM},
    [K_SWIGLU_FWD16] = {"k_swiglu_fwd16", ZT_CC_STREAM},
    [K_SWIGLU_BWD16] = {"k_swiglu_bwd16", ZT_CC_STREAM},
    [K_GEGLU_FWD16] = {"k_geglu_fwd16", ZT_CC_STREAM},
    [K_GELU_FWD16R] = {"k_gelu_fwd16r", ZT_CC_STREAM},
    [K_GELU_FWD16P] = {"k_gelu_fwd16p", ZT_CC_STREAM},
    [K_SWIGLU_FWD16R] = {"k_swiglu_fwd16r", ZT_CC_STREAM},
    [K_GEGLU_FWD16R] = {"k_geglu_fwd16r", ZT_CC_STREAM},
    [K_GEGLU_BWD16] = {"k_geglu_bwd16", ZT_CC_STREAM},
    [K_ADD] = {"k_add", ZT_CC_STREAM},
    [K_SCALE] = {"k_scale", ZT_CC_STREAM},
    [K_DROPOUT] = {"k_dropout", ZT_CC_STREAM},
    [K_XENT_FWD] = {"k_xent_fwd", ZT_CC_SOFTMAX},
    [K_XENT_BWD] = {"k_xent_bwd", ZT_CC_STREAM},
    [K_XENT_FUSED] = {"k_xent_fused", ZT_CC_SOFTMAX},
    [K_XENT16_FWD] = {"k_xent16_fwd", ZT_CC_SOFTMAX},
    [K_XENT16_FUSED] = {"k_xent16_fused", ZT_CC_SOFTMAX},
    [K_ADAMW] = {"k_adamw", ZT_CC_OPTIM},
    [K_SUM] = {"k_sum_d<sum>", ZT_CC_REDUCE},
    [K_SUMSQ] = {"k_sum_d<sumsq>", ZT_CC_REDUCE},
    [K_NONFINITE] = {"k_nonfinite", ZT_CC_REDUCE},
    [K_TO_BF16] = {"k_to_bf16", ZT_CC_CONVERT},
    [K_FROM_BF16] = {"k_from_bf16", ZT_CC_CONVERT},
    [K_TO_F16] = {"k_to_f16", ZT_CC_CONVERT},
    [K_FROM_F16] = {"k_from_f16", ZT_CC_CONVERT},
    [K_NF4] = {"k_nf4_dequant", ZT_CC_STREAM},
    [K_ATT_TC_ROUND] = {"k_att_tc_round", ZT_CC_CONVERT},
    [K_FT_FWD] = {"k_ft_fwd", ZT_CC_FLASH_FWD},
    [K_FT_BWD_DKV] = {"k_ft_bwd_dkv", ZT_CC_FLASH_BWD},
    [K_FT_BWD_DQ] = {"k_ft_bwd_dq", ZT_CC_FLASH_BWD},
    [K_ATT_ROWDOT] = {"k_att_rowdot", ZT_CC_ROWNORM},
    [K_ATT_FWD] = {"k_att_fwd", ZT_CC_ATT32_FWD},
    [K_ATT_BWD_DKV] = {"k_att_bwd_dkv", ZT_CC_ATT32_BWD},
    [K_ATT_BWD_DQ] = {"k_att_bwd_dq", ZT_CC_ATT32_BWD},
    [K_ATT_GEMM] = {"cublas gemm bf16 batched (attention)", ZT_CC_ATT_GEMM},
    [K_ATT_TC_SOFTMAX] = {"k_att_tc_softmax", ZT_CC_STREAM},
    [K_ATT_TC_DS] = {"k_att_tc_ds", ZT_CC_STREAM},
    [K_MEMCPY] = {"cudaMemcpyAsync D2D", ZT_CC_COPY},
    [K_MEMCPY2D] = {"cudaMemcpy2DAsync D2D", ZT_CC_COPY},
    [K_H2D] = {"cudaMemcpyAsync H2D", ZT_CC_HOST},
    [K_D2H] = {"cudaMemcpyAsync D2H", ZT_CC_HOST},
    [K_ADAMW_MULTI] = {"k_adamw_multi", ZT_CC_OPTIM},
    [K_SUM_RANGES] = {"k_sum_ranges<sum>", ZT_CC_REDUCE},
    [K_SUMSQ_RANGES] = {"k_sum_ranges<sumsq>", ZT_CC_REDUCE},
    [K_NONFINITE_RANGES] = {"k_nonfinite_ranges", ZT_CC_REDUCE},
    [K_FINISH_RANGES] = {"k_finish_ranges", ZT_CC_REDUCE},
    [K_SDPA_ROUND] = {"k_sdpa_round", ZT_CC_CONVERT},
    [K_SDPA_WIDEN] = {"k_sdpa_widen", ZT_CC_CONVERT},
    [K_COLSUM16_PART] = {"k_colsum16_part", ZT_CC_COLSUM},
    [K_ROPE_BWD16] = {"k_rope_bwd16", ZT_CC_STREAM},
    [K_ROPE_COLSUM16_PART] = {"k_rope_colsum16_part", ZT_CC_COLSUM},
    [K_CUDNN_FWD] = {"cudnnBackendExecute (SDPA forward)", ZT_CC_CUDNN_FWD},
    [K_CUDNN_BWD] = {"cudnnBackendExecute (SDPA backward)", ZT_CC_CUDNN_BWD},
    /* (Mixture of Experts, cuda_moe.cu: a thread a row or a block an expert
     * over uncoalesced rows, the scatter class's roofline; the gather
     * grid-stride and coalesced, the sigmoid elementwise: stream) */
    [K_MOE_ROUTE_FWD] = {"k_moe_route_fwd", ZT_CC_SCATTER},
    [K_MOE_ROUTE_BWD] = {"k_moe_route_bwd", ZT_CC_SCATTER},
    [K_ROWS_GATHER] = {"k_rows_gather", ZT_CC_STREAM},
    [K_ROWS_GATHER16] = {"k_rows_gather16", ZT_CC_STREAM},
    [K_ROWS_SCATTER] = {"k_rows_scatter", ZT_CC_SCATTER},
    [K_ROWS_DOT] = {"k_rows_dot", ZT_CC_SCATTER},
    [K_ROWS_DOT16] = {"k_rows_dot16", ZT_CC_SCATTER},
    [K_ROWS_SCATTER16] = {"k_rows_scatter16", ZT_CC_SCATTER},
    [K_MOE_COUNT] = {"k_moe_count", ZT_CC_SCATTER},
    [K_MOE_OFFSETS] = {"k_moe_offsets", ZT_CC_SCATTER},
    [K_MOE_FILL] = {"k_moe_fill", ZT_CC_SCATTER},
    [K_MOE_REGROUP] = {"k_moe_regroup", ZT_CC_SCATTER},
    [K_SIGMOID_FWD] = {"k_sigmoid_fwd", ZT_CC_STREAM},
    [K_SIGMOID_BWD] = {"k_sigmoid_bwd", ZT_CC_STREAM},
    [K_GEMM_GROUPED] = {"cublasGemmGroupedBatchedEx bf16", ZT_CC_GEMM_BF16},
    [K_GROUPED_PTRS] = {"k_grouped_ptrs", ZT_CC_SCATTER},
    [K_GEMM_GROUPED_BWD] = {"cublasGemmGroupedBatchedEx bf16 dinp", ZT_CC_GEMM_BF16},
    [K_ROWS_DOT16H] = {"k_rows_dot16h", ZT_CC_SCATTER},
    [K_MOE_INVERSE] = {"k_moe_inverse", ZT_CC_SCATTER},
    [K_ROWS_SUM16] = {"k_rows_sum16", ZT_CC_STREAM},
    [K_GEMM_GROUPED_DW] = {"cublasGemmGroupedBatchedEx bf16 dw", ZT_CC_GEMM_BF16},
    [K_GROUPED_DW_PTRS] = {"k_grouped_dw_ptrs", ZT_CC_SCATTER},
    [K_DW_ADD16] = {"k_dw_add16", ZT_CC_STREAM},
    [K_ROWS_GATHER_O16] = {"k_rows_gather_o16", ZT_CC_STREAM},
    [K_FROM_BF16_RUNS] = {"k_from_bf16_runs", ZT_CC_CONVERT},
};

static const char *const CLASS_NAMES[ZT_CC_N] = {
    "gemm_bf16", "gemm_fp32", "att_gemm", "flash_fwd", "flash_bwd", "att32_fwd", "att32_bwd",
    "cudnn_fwd", "cudnn_bwd", "stream", "convert", "rownorm", "colsum", "softmax", "reduce", "optim", "scatter", "copy", "host"};

const char *zt_count_class_name(int cls) { return cls >= 0 && cls < ZT_CC_N ? CLASS_NAMES[cls] : "?"; }

#define ZT_COUNT_ENTRY_NAME(e) #e,
static const char *const ENTRY_NAMES[ZT_CE_N] = {ZT_COUNT_ENTRIES(ZT_COUNT_ENTRY_NAME)};
#undef ZT_COUNT_ENTRY_NAME

const char *zt_count_entry_name(int e) { return e >= 0 && e < ZT_CE_N ? ENTRY_NAMES[e] : "?"; }

/* ------------------------------------------------------------ the tallies */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static zt_count_kernel *g_k;          /* distinct launches, first-seen order */
static size_t g_nk, g_capk;
static int32_t *g_idx;                /* open addressing over g_k: index + 1, 0 = empty */
static size_t g_capidx;
static zt_count_totals g_tot;
static int g_mode = ZT_MATMUL_FP32;
static unsigned g_whatif;
static int g_flash = 1;
#ifdef ZT_HAVE_CUDNN
static int g_cudnn = 1;
#else
static int g_cudnn = 0;
#endif
static const zt_backend *g_inner;
static size_t g_dev_total = (size_t)80 << 30;
static size_t g_live, g_peak;         /* bytes alloc() handed out (live, at most) */

static uint64_t khash(const char *name, double f, double b) {
    uint64_t x = (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull, u;
    memcpy(&u, &f, sizeof u);
    x ^= u + 0x632BE59BD9B4E019ull + (x << 6) + (x >> 2);
    memcpy(&u, &b, sizeof u);
    x ^= u + 0x8CB92BA72F3D8DD7ull + (x << 6) + (x >> 2);
    return x ^ (x >> 31);
}

static int grow_index(void) {
    const size_t cap = g_capidx ? 2 * g_capidx : 1024;
    int32_t *t = calloc(cap, sizeof *t);
    if (!t) return 0;
    for (size_t i = 0; i < g_nk; i++) {
        size_t h = (size_t)khash(g_k[i].name, g_k[i].flops, g_k[i].bytes) & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = (int32_t)(i + 1);
    }
    free(g_idx);
    g_idx = t;
    g_capidx = cap;
    return 1;
}

/* one launch of kernel k (n times) */
static void rec_n(int k, double flops, double bytes, long n) {
    if (n <= 0) return;
    pthread_mutex_lock(&g_mu);
    if ((g_nk + 1) * 2 > g_capidx && !grow_index()) goto out;
    const uint64_t hv = khash(KT[k].name, flops, bytes);
    size_t h = (size_t)hv & (g_capidx - 1);
    for (;;) {
        const int32_t i = g_idx[h];
        if (!i) break;
        zt_count_kernel *e = &g_k[i - 1];
        if (e->name == KT[k].name && e->flops == flops && e->bytes == bytes) {
            e->launches += n;
            goto totals;
        }
        h = (h + 1) & (g_capidx - 1);
    }
    if (g_nk == g_capk) {
        const size_t cap = g_capk ? 2 * g_capk : 256;
        zt_count_kernel *nk = realloc(g_k, cap * sizeof *nk);
        if (!nk) goto out;
        g_k = nk;
        g_capk = cap;
    }
    g_k[g_nk] = (zt_count_kernel){KT[k].name, KT[k].cls, flops, bytes, n};
    g_idx[h] = (int32_t)++g_nk;
totals:
    if (KT[k].cls == ZT_CC_HOST) {
        g_tot.transfers += n;
        g_tot.host_bytes += (double)n * bytes;
    } else {
        g_tot.launches += n;
        g_tot.flops += (double)n * flops;
        g_tot.bytes += (double)n * bytes;
    }
out:
    pthread_mutex_unlock(&g_mu);
}
static void rec(int k, double flops, double bytes) { rec_n(k, flops, bytes, 1); }

static void call(int e) {
    pthread_mutex_lock(&g_mu);
    g_tot.calls[e]++;
    pthread_mutex_unlock(&g_mu);
}
/* The asynchronous copies (to_host_async / to_device_async) get sequence
 * numbers; a host synchronization completes everything queued before it,
 * so it sets the watermark to the last number handed out.  copy_wait on a
 * copy at or below the watermark finds it complete (cudaEventSynchronize
 * on an event that has already happened returns at once): no sync. */
static uint64_t g_seq, g_wm;
static void sync1(void) {
    pthread_mutex_lock(&g_mu);
    g_tot.syncs++;
    g_wm = g_seq;
    pthread_mutex_unlock(&g_mu);
}

void zt_count_reset(void) {
    pthread_mutex_lock(&g_mu);
    g_nk = 0;
    if (g_idx) memset(g_idx, 0, g_capidx * sizeof *g_idx);
    memset(&g_tot, 0, sizeof g_tot);
    g_peak = g_live;
    pthread_mutex_unlock(&g_mu);
}

void zt_count_totals_get(zt_count_totals *t) {
    pthread_mutex_lock(&g_mu);
    *t = g_tot;
    pthread_mutex_unlock(&g_mu);
}

size_t zt_count_kernels(const zt_count_kernel **out) {
    *out = g_k;
    return g_nk;
}

void zt_count_set_whatif(unsigned flags) { g_whatif = flags; }
void zt_count_set_flash(int on) { g_flash = on != 0; }
void zt_count_set_cudnn(int on) { g_cudnn = on != 0; }
int zt_count_cudnn(void) { return g_cudnn; }
void zt_count_set_device_bytes(size_t total) { g_dev_total = total; }

static const zt_backend *g_stand_in;
void zt_backend_set_stand_in(const zt_backend *be) { g_stand_in = be; }
const zt_backend *zt_backend_stand_in(void) { return g_stand_in; }

#define D(x) ((double)(x))
static const double F = 4.0, H = 2.0;

/* ------------------------------------------------------------ memory
 * Without an inner table alloc() maps address space only (PROT_NONE,
 * MAP_NORESERVE: nothing committed); a registry keeps the sizes.        */

typedef struct blk { uintptr_t p; size_t n; } blk;
static blk *g_blk;
static size_t g_nblk, g_capblk;

static void *c_register(void *p, size_t bytes);

/* ------------------------------------------------------------ known words
 * The bare table (no inner) computes nothing, yet the Mixture of Experts
 * reads its routing's counts back to the host (libtrain/moe.c
 * route_groups: E + 1 ints) and sizes every expert's GEMM by them.  So the
 * bare table remembers the contents of the few device buffers it can know:
 * what to_device copied there (up to ZT_KNOWN_MAX bytes a copy) and the
 * offsets its moe_permute makes (c_moe_permute: from a known idx, else the
 * balanced routing); to_host / to_host_async of a known buffer return them
 * (else zeros, as before).  A write it cannot know (moe_route_fwd's idx,
 * zero, a copy into it, free) forgets the buffer.  With an inner table
 * nothing is kept: the inner's memory holds the values.                  */
#define ZT_KNOWN_MAX ((size_t)4 << 20)
typedef struct known { uintptr_t p; size_t n; void *v; } known;
static known *g_kn;
static size_t g_nkn, g_capkn;
/* forget every known buffer overlapping [p, p + n) (n = 0: p alone) */
static void known_forget(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p, b = a + (n ? n : 1);
    pthread_mutex_lock(&g_mu);
    for (size_t i = g_nkn; i-- > 0;)
        if (g_kn[i].p < b && a < g_kn[i].p + g_kn[i].n) {
            free(g_kn[i].v);
            g_kn[i] = g_kn[--g_nkn];
        }
    pthread_mutex_unlock(&g_mu);
}
/* [p, p + n) holds v's n bytes now (bare table only; dropped when out of memory) */
static void known_set(void *p, const void *v, size_t n) {
    if (g_inner || !p) return;
    known_forget(p, n);
    if (!n || n > ZT_KNOWN_MAX) return;
    void *c = malloc(n);
    if (!c) return;
    memcpy(c, v, n);
    pthread_mutex_lock(&g_mu);
    if (g_nkn == g_capkn) {
        const size_t cap = g_capkn ? 2 * g_capkn : 64;
        known *nk = realloc(g_kn, cap * sizeof *nk);
        if (!nk) {
            pthread_mutex_unlock(&g_mu);
            free(c);
            return;
        }
        g_kn = nk;
        g_capkn = cap;
    }
    g_kn[g_nkn++] = (known){(uintptr_t)p, n, c};
    pthread_mutex_unlock(&g_mu);
}
/* 1 and dst the n bytes at p when a known buffer starting at p holds them */
static int known_get(void *dst, const void *p, size_t n) {
    int hit = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nkn && !hit; i++)
        if (g_kn[i].p == (uintptr_t)p && n <= g_kn[i].n) {
            memcpy(dst, g_kn[i].v, n);
            hit = 1;
        }
    pthread_mutex_unlock(&g_mu);
    return hit;
}

/* the block of c_alloc / c_alloc_nz: the inner table's (nz: its alloc_nz
 * where it has one), else address space only; registered */
static void *c_block(size_t bytes, int nz) {
    void *p;
    if (g_inner) {
        p = nz && g_inner->alloc_nz ? g_inner->alloc_nz(bytes) : g_inner->alloc(bytes);
    } else {
        const size_t len = bytes ? bytes : 1;
        p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return NULL;
    }
    return p ? c_register(p, bytes) : NULL;
}

static void *c_alloc(size_t bytes) {
    call(ZT_CE_alloc);
    /* cuda_alloc: cudaMallocAsync + a memset of the block */
    rec(K_MEMSET, 0, D(bytes ? bytes : 256));
    return c_block(bytes, 0);
}

/* record block p of bytes in the registry (c_free finds its size) */
static void *c_register(void *p, size_t bytes) {
    pthread_mutex_lock(&g_mu);
    if (g_nblk == g_capblk) {
        const size_t cap = g_capblk ? 2 * g_capblk : 256;
        blk *nb = realloc(g_blk, cap * sizeof *nb);
        if (!nb) {
            pthread_mutex_unlock(&g_mu);
            if (g_inner) g_inner->free(p);
            else munmap(p, bytes ? bytes : 1);
            return NULL;
        }
        g_blk = nb;
        g_capblk = cap;
    }
    g_blk[g_nblk++] = (blk){(uintptr_t)p, bytes};
    g_live += bytes;
    if (g_live > g_peak) g_peak = g_live;
    pthread_mutex_unlock(&g_mu);
    return p;
}

/* alloc_nz: c_alloc without the memset (cuda_alloc_nz: cudaMallocAsync
 * alone); the same registry */
static void *c_alloc_nz(size_t bytes) {
    call(ZT_CE_alloc_nz);
    return c_block(bytes, 1);
}

static void c_free(void *p) {
    call(ZT_CE_free);
    if (!p) return;
    size_t n = 0;
    int found = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = g_nblk; i-- > 0;)
        if (g_blk[i].p == (uintptr_t)p) {
            n = g_blk[i].n;
            g_blk[i] = g_blk[--g_nblk];
            found = 1;
            break;
        }
    if (found) g_live -= n;
    if (!g_nblk) {
        free(g_blk);
        g_blk = NULL;
        g_capblk = 0;
    }
    pthread_mutex_unlock(&g_mu);
    if (g_inner) g_inner->free(p);
    else if (found) {
        known_forget(p, n);
        munmap(p, n ? n : 1);
    }
}

static const char *c_error(void) { return g_inner ? g_inner->error() : NULL; }
static void c_set_threads(int n) {
    if (g_inner) g_inner->set_threads(n);
}
static void c_synchronize(void) {
    call(ZT_CE_synchronize);
    sync1();
    if (g_inner) g_inner->synchronize();
}

/* cudaMemcpyAsync D2D: bytes read + bytes written */
static void c_copy(void *dst, const void *src, size_t bytes) {
    call(ZT_CE_copy);
    if (bytes && dst != src) rec(K_MEMCPY, 0, 2 * D(bytes));
    if (g_inner) g_inner->copy(dst, src, bytes);
    else if (bytes && dst != src) known_forget(dst, bytes);
}
/* cudaMemcpy2DAsync: 2 width height */
static void c_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height) {
    call(ZT_CE_copy2d);
    if (width && height) rec(K_MEMCPY2D, 0, 2 * D(width) * D(height));
    if (g_inner) {
        if (g_inner->copy2d) g_inner->copy2d(dst, dpitch, src, spitch, width, height);
        else
            for (size_t r = 0; r < height; r++)
                g_inner->copy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    }
}
/* D2H of bytes, then cudaStreamSynchronize */
static void c_to_host(void *host_dst, const void *dev_src, size_t bytes) {
    call(ZT_CE_to_host);
    if (!bytes) return;
    rec(K_D2H, 0, D(bytes));
    sync1();
    if (g_inner) g_inner->to_host(host_dst, dev_src, bytes);
    else if (!known_get(host_dst, dev_src, bytes)) memset(host_dst, 0, bytes);
}
/* H2D of bytes, then cudaStreamSynchronize (cuda_to_device is synchronous) */
static void c_to_device(void *dev_dst, const void *host_src, size_t bytes) {
    call(ZT_CE_to_device);
    if (!bytes) return;
    rec(K_H2D, 0, D(bytes));
    sync1();
    if (g_inner) g_inner->to_device(dev_dst, host_src, bytes);
    else known_set(dev_dst, host_src, bytes);
}
/* cudaMemsetAsync: bytes written */
static void c_zero(void *p, size_t bytes) {
    call(ZT_CE_zero);
    if (bytes) rec(K_MEMSET, 0, D(bytes));
    if (g_inner) g_inner->zero(p, bytes);
    else if (bytes) known_forget(p, bytes);
}
/* asynchronous copies: the transfer now, the host's wait in copy_wait
 * (a sync unless a later sync already covered the copy).  The handles in
 * flight and their sequence numbers (without an inner table the handle is
 * a distinct fake address, never dereferenced). */
typedef struct pend { void *h; uint64_t seq; } pend;
static pend *g_pend;
static size_t g_npend, g_cappend;
static void *track(void *h) {
    pthread_mutex_lock(&g_mu);
    const uint64_t seq = ++g_seq;
    if (!h) h = (void *)(uintptr_t)(seq * 16);
    if (g_npend == g_cappend) {
        const size_t cap = g_cappend ? 2 * g_cappend : 16;
        pend *np = realloc(g_pend, cap * sizeof *np);
        if (np) {
            g_pend = np;
            g_cappend = cap;
        }
    }
    if (g_npend < g_cappend) g_pend[g_npend++] = (pend){h, seq};
    pthread_mutex_unlock(&g_mu);
    return h;
}
static void *c_to_host_async(void *host_dst, const void *dev_src, size_t bytes) {
    call(ZT_CE_to_host_async);
    if (!bytes) return NULL;
    rec(K_D2H, 0, D(bytes));
    if (g_inner) {
        void *h = g_inner->to_host_async(host_dst, dev_src, bytes);
        return h ? track(h) : NULL;
    }
    if (!known_get(host_dst, dev_src, bytes)) memset(host_dst, 0, bytes);
    return track(NULL);
}
static void *c_to_device_async(void *dev_dst, const void *host_src, size_t bytes) {
    call(ZT_CE_to_device_async);
    if (!bytes) return NULL;
    rec(K_H2D, 0, D(bytes));
    if (g_inner) {
        void *h = g_inner->to_device_async(dev_dst, host_src, bytes);
        return h ? track(h) : NULL;
    }
    known_set(dev_dst, host_src, bytes);
    return track(NULL);
}
static void c_copy_wait(void *h) {
    call(ZT_CE_copy_wait);
    if (!h) return;
    uint64_t seq = UINT64_MAX;   /* unknown: a sync */
    pthread_mutex_lock(&g_mu);
    for (size_t i = g_npend; i-- > 0;)
        if (g_pend[i].h == h) {
            seq = g_pend[i].seq;
            g_pend[i] = g_pend[--g_npend];
            break;
        }
    const int covered = seq <= g_wm;
    pthread_mutex_unlock(&g_mu);
    if (!covered) sync1();
    if (g_inner) g_inner->copy_wait(h);
}

/* a poll: no wait, so no sync (the copy_wait after it counts as before) */
static int c_copy_done(void *h) {
    call(ZT_CE_copy_done);
    return g_inner && h ? g_inner->copy_done(h) : 1;
}

static int c_device_memory(size_t *free_bytes, size_t *total_bytes, char *name, size_t n) {
    if (name && n) snprintf(name, n, "count device (no compute: counts the CUDA backend's launches)");
    pthread_mutex_lock(&g_mu);
    const size_t live = g_live;
    pthread_mutex_unlock(&g_mu);
    if (total_bytes) *total_bytes = g_dev_total;
    if (free_bytes) *free_bytes = g_dev_total > live ? g_dev_total - live : 0;
    return 0;
}
static void c_mem_stats(size_t *cur, size_t *peak) {
    pthread_mutex_lock(&g_mu);
    if (cur) *cur = g_live;
    if (peak) *peak = g_peak;
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------ the linear layer */

/* gemm() of cuda_matmul.cu: column-major C[m,n] = op(A) op(B) (+ beta C)
 * (+ bias[m]).  bf16 mode: k_round_bf16 of each stored operand first
 * (na = lda (ta ? m : k), nb = ldb (tb ? k : n) elements; f read + h
 * written each).  The GEMM: 2 m n k FLOPs; bytes m k e + k n e (e = h in
 * bf16 mode, f in fp32) + m n f written (and read with beta = 1) + m f of
 * bias.  A bias not 16-byte aligned leaves cuBLASLt's epilogue for
 * cublasGemmEx + k_add_bias (reads C and bias, writes C).  a16 (the bf16
 * weight, or NULL) / b16 (the backward's dout16): that operand arrives in
 * bf16, not rounded; a16 not 256-byte aligned is copied (a device memcpy).
 * b16: B in bf16 (D16: the backward's dout16; a bf16 input: copied when not
 * 256-byte aligned), or NULL. */
#define D16 ((const void *)(uintptr_t)256)
static void gemm_exo(int ta, int tb, long m, long n, long k, long lda, long ldb, int beta1,
                     const float *bias, const void *a16, const void *b16, int d16);
/* set_dw_fresh (cuda_matmul.cu): a dW GEMM into g_fresh[0, g_fresh_n) has
 * beta 0 (dw written, not read: m n f less), any other beta 1 */
static const float *g_fresh;
static size_t g_fresh_n;
static int dw_beta1(const float *dw) {
    return !(g_fresh && dw >= g_fresh && dw < g_fresh + g_fresh_n);
}
static void gemm_ex(int ta, int tb, long m, long n, long k, long lda, long ldb, int beta1,
                    const float *bias, const void *a16, const void *b16) {
    gemm_exo(ta, tb, m, n, k, lda, ldb, beta1, bias, a16, b16, 0);
}
/* d16: D (and C) in bf16 (matmul_fwd_o16: m n h written) */
static void gemm_exo(int ta, int tb, long m, long n, long k, long lda, long ldb, int beta1,
                     const float *bias, const void *a16, const void *b16, int d16) {
    const int bf16 = g_mode == ZT_MATMUL_BF16;
    const int epi = bias && ((uintptr_t)bias & 15) == 0;
    if (bf16 && !(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS)) {
        const double na = D(lda) * D(ta ? m : k), nb = D(ldb) * D(tb ? k : n);
        if (!a16) rec(K_ROUND_BF16, 0, na * (F + H));
        else if ((uintptr_t)a16 & 255) rec(K_MEMCPY, 0, na * 2 * H);   /* to 256-byte alignment */
        if (!b16) rec(K_ROUND_BF16, 0, nb * (F + H));
        else if ((uintptr_t)b16 & 255) rec(K_MEMCPY, 0, nb * 2 * H);   /* (a bf16 input) */
    }
    const double e = bf16 ? H : F;
    rec(bf16 ? K_GEMM_BF16 : K_GEMM_F32, 2 * D(m) * D(n) * D(k),
        (D(m) * D(k) + D(k) * D(n)) * e + D(m) * D(n) * (d16 ? H : F) * (beta1 ? 2 : 1) +
            (epi ? D(m) * F : 0));
    if (bias && !epi) rec(K_ADD_BIAS, D(m) * D(n), 2 * D(m) * D(n) * F + D(m) * F);
}
/* The backward in bf16 mode (cuda_matmul.cu's round_dout): dout[N, OC]
 * rounded once before its GEMMs, which then round only their other
 * operand.  1 when it did (bf16 mode, a GEMM to run). */
static int round_dout(long N, long C, long OC, int gemms) {
    if (g_mode != ZT_MATMUL_BF16 || C <= 0 || OC <= 0 || !gemms ||
        (g_whatif & ZT_COUNT_WHATIF_DOUT_PER_GEMM))
        return 0;
    if (!(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS)) rec(K_ROUND_BF16, 0, D(N) * D(OC) * (F + H));
    return 1;
}

/* zt_cuda_colsum_acc: dst[C] += column sums of src[N, C]:
 * k_colsum_part N C FLOPs, N C f read, P C 8 written;
 * k_colsum_final P C FLOPs, P C 8 read, C f read and written. */
static void colsum(long N, long C) {
    if (N <= 0 || C <= 0) return;
    const double P = zt_cuda_ws_col_chunks((int)N, NULL);
    rec(K_COLSUM_PART, D(N) * D(C), D(N) * D(C) * F + P * D(C) * 8);
    rec(K_COLSUM_FINAL, P * D(C), P * D(C) * 8 + 2 * D(C) * F);
}
/* zt_cuda_colsum16_acc: the same of bf16 src (k_colsum16_part reads N C h) */
static void colsum16(long N, long C) {
    if (N <= 0 || C <= 0) return;
    const double P = zt_cuda_ws_col_chunks((int)N, NULL);
    rec(K_COLSUM16_PART, D(N) * D(C), D(N) * D(C) * H + P * D(C) * 8);
    rec(K_COLSUM_FINAL, P * D(C), P * D(C) * 8 + 2 * D(C) * F);
}

/* w16: the bf16-weight entries (backend.h): the weight is not rounded (NULL:
 * it is; W16_ROUNDED counts them so) */
static const void *w16_of(const void *w16) {
    return g_whatif & ZT_COUNT_WHATIF_W16_ROUNDED ? NULL : w16;
}
static void mm_fwd(int N, int C, int OC, const float *bias, const void *w16, const void *x16);
static void c_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                         int C, int OC) {
    call(ZT_CE_matmul_fwd);
    if (g_inner) g_inner->matmul_fwd(out, inp, w, bias, N, C, OC);
    mm_fwd(N, C, OC, bias, NULL, NULL);
}
static void c_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16, const float *bias,
                             int N, int C, int OC) {
    call(ZT_CE_matmul_fwd_w16);
    if (g_inner) g_inner->matmul_fwd_w16(out, inp, w16, bias, N, C, OC);
    mm_fwd(N, C, OC, bias, w16_of(w16), NULL);
}
static void mm_fwd(int N, int C, int OC, const float *bias, const void *w16, const void *x16) {
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {   /* memset of out, k_add_bias */
        rec(K_MEMSET, 0, D(N) * D(OC) * F);
        if (bias) rec(K_ADD_BIAS, D(N) * D(OC), 2 * D(N) * D(OC) * F + D(OC) * F);
        return;
    }
    gemm_ex(1, 0, OC, N, C, C, C, 0, bias, w16, x16);
}

/* dinp: gemm(N, N, m=C, n=N, k=OC), beta 0; dw (+=): gemm(N, T, m=C,
 * n=OC, k=N), beta 1; dbias: the column sum of dout.  (In bf16 mode dout is
 * rounded once for both GEMMs: round_dout.) */
/* dout16 (the bf16-gradient entries): dout arrives in bf16, not rounded;
 * not 256-byte aligned: copied once (a device memcpy) for both GEMMs */
static int dout16_in(const void *dout16, long N, long C, long OC, int gemms) {
    if (g_mode != ZT_MATMUL_BF16 || C <= 0 || OC <= 0 || !gemms) return 0;
    if (!(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS) && ((uintptr_t)dout16 & 255))
        rec(K_MEMCPY, 0, D(N) * D(OC) * 2 * H);
    return 1;
}
static void mm_bwd_o(const float *dinp, const float *dw, const float *dbias, int N, int C, int OC,
                     const void *w16, const void *x16, const void *dout16);
static void mm_bwd(const float *dinp, const float *dw, const float *dbias, int N, int C, int OC,
                   const void *w16, const void *x16) {
    mm_bwd_o(dinp, dw, dbias, N, C, OC, w16, x16, NULL);
}
static void mm_bwd_o(const float *dinp, const float *dw, const float *dbias, int N, int C, int OC,
                     const void *w16, const void *x16, const void *dout16) {
    if (N <= 0) return;
    const int d16 = dout16 ? dout16_in(dout16, N, C, OC, dinp || dw)
                           : round_dout(N, C, OC, dinp || dw);
    if (dinp && C > 0) {
        if (OC > 0) gemm_ex(0, 0, C, N, OC, C, OC, 0, NULL, w16, d16 ? D16 : NULL);
        else rec(K_MEMSET, 0, D(N) * D(C) * F);
    }
    if (OC <= 0) return;
    if (dw && C > 0) gemm_ex(0, 1, C, OC, N, C, OC, dw_beta1(dw), NULL, x16, d16 ? D16 : NULL);
    if (dbias) colsum(N, OC);
}
static void c_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                         const float *w, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd);
    if (g_inner) g_inner->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
    mm_bwd(dinp, dw, dbias, N, C, OC, NULL, NULL);
}
static void c_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                             const float *inp, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd_w16);
    if (g_inner) g_inner->matmul_bwd_w16(dinp, dw, dbias, dout, inp, w16, N, C, OC);
    mm_bwd(dinp, dw, dbias, N, C, OC, w16_of(w16), NULL);
}

/* matmul_dinp_acc (cuda_matmul.cu): matmul_bwd's input-gradient GEMM with
 * beta 1, C = D (dinp read and written: N C f more than matmul_bwd's, no
 * k_add after it); bf16 mode: dout rounded once (round_dout), w rounded for
 * the GEMM.  N, C or OC <= 0: nothing. */
static void c_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C,
                              int OC) {
    call(ZT_CE_matmul_dinp_acc);
    if (g_inner) g_inner->matmul_dinp_acc(dinp, dout, w, N, C, OC);
    if (N <= 0 || C <= 0 || OC <= 0) return;
    const int d16 = round_dout(N, C, OC, 1);
    gemm_ex(0, 0, C, N, OC, C, OC, 1, NULL, NULL, d16 ? D16 : NULL);
}

/* The GELU layers (cuda_matmul.cu): the GEMM with a cuBLASLt epilogue when
 * the aux matrix is 16-byte aligned with ld a multiple of 8 and the bias
 * (forward) / the scratch bias gradient (backward, 256-aligned) 16-byte
 * aligned, else the unfused kernels.
 * matmul_gelu_fwd, GELU_AUX_BIAS: matmul_fwd's GEMM + the aux matrix
 * written (N OC f), 9 FLOPs an element of GELU.
 * matmul_dgelu_bwd, DGELU_BGRAD: the input-gradient GEMM + the aux matrix
 * read (N C f) and the bias gradient written (C f), 15 + 1 FLOPs an
 * element; k_bgrad_acc (C FLOPs, 3 C f) with dpre_bias; then dw and
 * dbias as matmul_bwd (bf16: dout rounded once, first, for both GEMMs). */
static int gelu_epi_ok(const void *aux, long ld, const float *bias) {
    return ((uintptr_t)aux & 15) == 0 && ld % 8 == 0 && (!bias || ((uintptr_t)bias & 15) == 0);
}
static void mm_gelu_fwd(const float *pre, const float *bias, int N, int C, int OC, const void *w16,
                        const void *x16);
static void c_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                              const float *bias, int N, int C, int OC) {
    call(ZT_CE_matmul_gelu_fwd);
    if (g_inner) g_inner->matmul_gelu_fwd(out, pre, inp, w, bias, N, C, OC);
    mm_gelu_fwd(pre, bias, N, C, OC, NULL, NULL);
}
static void c_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    call(ZT_CE_matmul_gelu_fwd_w16);
    if (g_inner) g_inner->matmul_gelu_fwd_w16(out, pre, inp, w16, bias, N, C, OC);
    mm_gelu_fwd(pre, bias, N, C, OC, w16_of(w16), NULL);
}
static void mm_gelu_fwd(const float *pre, const float *bias, int N, int C, int OC, const void *w16,
                        const void *x16) {
    if (N <= 0 || OC <= 0) return;
    const double nm = D(N) * D(OC);
    if (C > 0 && bias && gelu_epi_ok(pre, OC, bias)) {
        const int bf16 = g_mode == ZT_MATMUL_BF16;
        if (bf16 && !(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS)) {
            if (!w16) rec(K_ROUND_BF16, 0, D(OC) * D(C) * (F + H));
            else if ((uintptr_t)w16 & 255) rec(K_MEMCPY, 0, D(OC) * D(C) * 2 * H);
            if (!x16) rec(K_ROUND_BF16, 0, D(N) * D(C) * (F + H));
            else if ((uintptr_t)x16 & 255) rec(K_MEMCPY, 0, D(N) * D(C) * 2 * H);
        }
        const double e = bf16 ? H : F;
        rec(bf16 ? K_GEMM_BF16 : K_GEMM_F32, 2 * D(OC) * D(N) * D(C) + 9 * nm,
            (D(OC) * D(C) + D(C) * D(N)) * e + 2 * nm * F + D(OC) * F);
        return;
    }
    if (C <= 0) {
        rec(K_MEMSET, 0, nm * F);
        if (bias) rec(K_ADD_BIAS, nm, 2 * nm * F + D(OC) * F);
    } else {
        gemm_ex(1, 0, OC, N, C, C, C, 0, bias, w16, x16);
    }
    rec(K_GELU_FWD, 9 * nm, 2 * nm * F);
}
static void mm_dgelu_bwd(const float *dpre_bias, const float *dw, const float *dbias,
                         const float *pre, int N, int C, int OC, const void *w16, const void *x16);
static void c_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                               const float *dout, const float *inp, const float *pre,
                               const float *w, int N, int C, int OC) {
    call(ZT_CE_matmul_dgelu_bwd);
    if (g_inner) g_inner->matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, N, C, OC);
    mm_dgelu_bwd(dpre_bias, dw, dbias, pre, N, C, OC, NULL, NULL);
}
static void c_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const float *inp, const float *pre,
                                   const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_dgelu_bwd_w16);
    if (g_inner)
        g_inner->matmul_dgelu_bwd_w16(dpre, dpre_bias, dw, dbias, dout, inp, pre, w16, N, C, OC);
    mm_dgelu_bwd(dpre_bias, dw, dbias, pre, N, C, OC, w16_of(w16), NULL);
}
/* x16: the bf16-input entries (backend.h): the input is not rounded (NULL:
 * it is; A16_ROUNDED counts them so) */
static const void *x16_of(const void *x16) {
    return g_whatif & ZT_COUNT_WHATIF_A16_ROUNDED ? NULL : x16;
}
static void c_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                             const float *bias, int N, int C, int OC) {
    call(ZT_CE_matmul_fwd_a16);
    if (g_inner) g_inner->matmul_fwd_a16(out, inp16, w, w16, bias, N, C, OC);
    mm_fwd(N, C, OC, bias, w16_of(w16), x16_of(inp16));
}
/* matmul_fwd_acc16 (cuda_matmul.cu): the forward GEMM with beta 1, C = D
 * in bf16 (out16 read and written: 2 N OC h, matmul_fwd_o16's D read
 * too); the operands as matmul_fwd_acc's.  N, C or OC <= 0, or fp32
 * matmul mode (an error): nothing. */
static void c_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_fwd_acc16);
    if (g_inner) g_inner->matmul_fwd_acc16(out16, inp, inp16, w, w16, N, C, OC);
    if (N <= 0 || C <= 0 || OC <= 0 || g_mode != ZT_MATMUL_BF16) return;
    gemm_exo(1, 0, OC, N, C, C, C, 1, NULL, w16_of(w16), inp16 ? x16_of(inp16) : NULL, 1);
}
/* matmul_fwd_acc (cuda_matmul.cu): the forward GEMM with beta 1, C = D
 * (out read and written: N OC f more than matmul_fwd's, no k_add after
 * it); the operands as matmul_fwd_a16 / _w16 / matmul_fwd take them.  N, C
 * or OC <= 0: nothing. */
static void c_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                             const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_fwd_acc);
    if (g_inner) g_inner->matmul_fwd_acc(out, inp, inp16, w, w16, N, C, OC);
    if (N <= 0 || C <= 0 || OC <= 0) return;
    gemm_ex(1, 0, OC, N, C, C, C, 1, NULL, w16_of(w16), x16_of(inp16));
}
/* matmul_bwd_acc (cuda_matmul.cu): the input-gradient GEMM with beta 1,
 * C = D (dinp read and written: N C f more than the beta-0 entry's, no
 * k_add after it); dout16 read as matmul_bwd_d16 reads it (copied when not
 * 256-aligned), else dout rounded once (round_dout); the weight as
 * matmul_bwd_w16 / matmul_bwd take it.  N, C or OC <= 0: nothing. */
static void c_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd_acc);
    if (g_inner) g_inner->matmul_bwd_acc(dinp, dout, dout16, w, w16, N, C, OC);
    if (N <= 0 || C <= 0 || OC <= 0) return;
    const int d16 = dout16 ? dout16_in(dout16, N, C, OC, 1) : round_dout(N, C, OC, 1);
    gemm_ex(0, 0, C, N, OC, C, OC, 1, NULL, w16_of(w16), d16 ? D16 : NULL);
}
/* matmul_bwd_acc16 (cuda_matmul.cu): matmul_bwd_acc's GEMM with C = D in
 * bf16 (dinp16 read and written: 2 N C h where matmul_bwd_acc's moves 2 N
 * C f); the operands as matmul_bwd_acc's.  N, C or OC <= 0, or fp32
 * matmul mode (an error): nothing. */
static void c_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd_acc16);
    if (g_inner) g_inner->matmul_bwd_acc16(dinp16, dout, dout16, w, w16, N, C, OC);
    if (N <= 0 || C <= 0 || OC <= 0 || g_mode != ZT_MATMUL_BF16) return;
    const int d16 = dout16 ? dout16_in(dout16, N, C, OC, 1) : round_dout(N, C, OC, 1);
    gemm_exo(0, 0, C, N, OC, C, OC, 1, NULL, w16_of(w16), d16 ? D16 : NULL, 1);
}
static void c_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                             int C, int OC) {
    call(ZT_CE_matmul_bwd_a16);
    if (g_inner) g_inner->matmul_bwd_a16(dinp, dw, dbias, dout, inp16, w, w16, N, C, OC);
    mm_bwd(dinp, dw, dbias, N, C, OC, w16_of(w16), x16_of(inp16));
}
static void c_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                  const uint16_t *w16, const float *bias, int N, int C, int OC) {
    call(ZT_CE_matmul_gelu_fwd_a16);
    if (g_inner) g_inner->matmul_gelu_fwd_a16(out, pre, inp16, w, w16, bias, N, C, OC);
    mm_gelu_fwd(pre, bias, N, C, OC, w16_of(w16), x16_of(inp16));
}
static void c_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *inp16, const float *pre,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_dgelu_bwd_a16);
    if (g_inner)
        g_inner->matmul_dgelu_bwd_a16(dpre, dpre_bias, dw, dbias, dout, inp16, pre, w, w16, N, C, OC);
    mm_dgelu_bwd(dpre_bias, dw, dbias, pre, N, C, OC, w16_of(w16), x16_of(inp16));
}
static void mm_dgelu_bwd_o(const float *dpre_bias, const float *dw, const float *dbias,
                           const void *pre, int N, int C, int OC, const void *w16, const void *x16,
                           const void *dout16, int o16);
static void mm_dgelu_bwd(const float *dpre_bias, const float *dw, const float *dbias,
                         const float *pre, int N, int C, int OC, const void *w16, const void *x16) {
    mm_dgelu_bwd_o(dpre_bias, dw, dbias, pre, N, C, OC, w16, x16, NULL, 0);
}
/* (o16: matmul_dgelu_bwd_o16, the epilogue's D and aux in bf16; its
 * fallback's k_gelu_bwd_o16 reads the bf16 pre and writes both dpre) */
static void mm_dgelu_bwd_o(const float *dpre_bias, const float *dw, const float *dbias,
                           const void *pre, int N, int C, int OC, const void *w16, const void *x16,
                           const void *dout16, int o16) {
    if (N <= 0) return;
    const double nc = D(N) * D(C);
    const int d16 = dout16 ? dout16_in(dout16, N, C, OC, 1) : round_dout(N, C, OC, 1);
    if (o16 && (C <= 0 || OC <= 0)) {   /* (no GEMM) */
        if (C > 0) {
            rec(K_MEMSET, 0, nc * F);
            rec(K_GELU_BWD_O16, 15 * nc, nc * (2 * F + 2 * H));
            if (dpre_bias) colsum(N, C);
        }
        if (OC > 0 && dbias) colsum(N, OC);
        return;
    }
    if (C > 0 && OC > 0 && gelu_epi_ok(pre, C, NULL)) {
        const int bf16 = g_mode == ZT_MATMUL_BF16;
        if (bf16 && !(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS)) {
            if (!w16) rec(K_ROUND_BF16, 0, D(C) * D(OC) * (F + H));
            else if ((uintptr_t)w16 & 255) rec(K_MEMCPY, 0, D(C) * D(OC) * 2 * H);
            if (!d16) rec(K_ROUND_BF16, 0, D(OC) * D(N) * (F + H));
        }
        const double e = bf16 ? H : F;
        rec(bf16 ? K_GEMM_BF16 : K_GEMM_F32, 2 * D(C) * D(N) * D(OC) + 16 * nc,
            (D(C) * D(OC) + D(OC) * D(N)) * e + 2 * nc * (o16 ? H : F) + D(C) * F);
        if (dpre_bias) rec(K_BGRAD_ACC, D(C), 3 * D(C) * F);
        if (dw) gemm_ex(0, 1, C, OC, N, C, OC, dw_beta1(dw), NULL, x16, d16 ? D16 : NULL);
        if (dbias) colsum(N, OC);
        return;
    }
    if (C > 0) {
        if (OC > 0) gemm_ex(0, 0, C, N, OC, C, OC, 0, NULL, w16, d16 ? D16 : NULL);
        else rec(K_MEMSET, 0, nc * F);
    }
    if (OC > 0 && dw && C > 0) gemm_ex(0, 1, C, OC, N, C, OC, dw_beta1(dw), NULL, x16, d16 ? D16 : NULL);
    if (OC > 0 && dbias) colsum(N, OC);
    if (C <= 0) return;
    if (o16) rec(K_GELU_BWD_O16, 15 * nc, nc * (2 * F + 2 * H));
    else rec(K_GELU_BWD, 15 * nc, 3 * nc * F);
    if (dpre_bias) colsum(N, C);
}

/* dw_fresh: the counter's own record (bare or over a table), nothing counted */
static int c_dw_fresh(const float *dw) { return !dw_beta1(dw); }
static void c_set_dw_fresh(float *g, size_t n) {
    call(ZT_CE_set_dw_fresh);
    g_fresh = g && n ? g : NULL;
    g_fresh_n = g ? n : 0;
    if (g_inner) g_inner->set_dw_fresh(g, n);
}

static void c_set_matmul_precision(int mode) {
    call(ZT_CE_set_matmul_precision);
    if (mode == ZT_MATMUL_FP32 || mode == ZT_MATMUL_BF16) g_mode = mode;
    if (g_inner) g_inner->set_matmul_precision(mode);
}

/* ------------------------------------------------------------ attention
 * Causal attention over [B, T] with NH q heads and NKV kv heads of hs,
 * R = (NH + 2 NKV) hs floats per row of qkv, AD = NH hs of out.  The
 * kernels compute whole tiles (masked pairs too): the FLOPs below count
 * the (query, key) pairs of the tiles they compute.                      */

/* keys of query tile [q0, q0 + rows): tiles of `kt` keys from the window's
 * first tile up to the tile's last query (tensor-core kernels: keys below
 * min(T, q0 + rows)) */
static double key_tiles(long q0, long rows, long T, long window, long kt) {
    const long kend = q0 + rows < T ? q0 + rows : T;
    const long j = window > 0 ? q0 - window + 1 : 0;
    const long ks = j > 0 ? j / kt * kt : 0;
    return kend > ks ? D((kend - ks + kt - 1) / kt) : 0;
}

/* Flash kernels on tensor cores (cuda_attention_tc.cu), head dims padded
 * to HSP.  k_ft_fwd: per (b, q head, 64-query tile) two passes over the
 * key tiles: S = Q K^T (2 HSP per pair), then S again and P V (4 HSP):
 * 6 HSP per pair; bytes: q16 B T R h, out B T AD f (o16: h, the bf16
 * output gqa_ext_fwd16o stores), lse B NH T f. */
static void ft_fwd(long B, long T, long NH, long NKV, long hs, long window, int o16) {
    const long HSP = zt_cuda_att_flash_hsp((int)hs), R = (NH + 2 * NKV) * hs;
    double pairs = 0;
    for (long q0 = 0; q0 < T; q0 += 64) pairs += 64.0 * 64.0 * key_tiles(q0, 64, T, window, 64);
    rec(K_FT_FWD, D(B) * D(NH) * pairs * 6 * D(HSP),
        D(B) * D(T) * D(R) * H + D(B) * D(T) * D(NH) * D(hs) * (o16 ? H : F) + D(B) * D(NH) * D(T) * F);
}

/* k_ft_bwd_dkv: per (b, kv head, 64-key tile), for each of its g q heads,
 * the query tiles of BQ (64; 32 at HSP 128) from the key tile to T (or the
 * window's end): S^T, dP^T, dV += P^T dO, dK += dS^T Q: 8 HSP per pair.
 * k_ft_bwd_dq: per (b, q head, 64-query tile) the key tiles of BK (= BQ):
 * S, dP, dQ += dS K: 6 HSP per pair.  Bytes: q16 B T R h, do16 B T AD h,
 * lse and D 2 B NH T f read; dk, dv (B T 2 NKV hs f), dq (B T AD f)
 * written. */
static void ft_bwd(long B, long T, long NH, long NKV, long hs, long window) {
    const long HSP = zt_cuda_att_flash_hsp((int)hs), R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const long BQ = HSP > 64 ? 32 : 64, g = NH / NKV;
    double pkv = 0, pq = 0;
    for (long k0 = 0; k0 < T; k0 += 64) {
        const long qe = window > 0 ? (k0 + 63 + window < T ? k0 + 63 + window : T) : T;
        pkv += 64.0 * D(BQ) * D((qe - k0 + BQ - 1) / BQ);
    }
    for (long q0 = 0; q0 < T; q0 += 64) pq += 64.0 * D(BQ) * key_tiles(q0, 64, T, window, BQ);
    const double in = D(B) * D(T) * D(R) * H + D(B) * D(T) * D(AD) * H + 2 * D(B) * D(NH) * D(T) * F;
    rec(K_FT_BWD_DKV, D(B) * D(NKV) * D(g) * pkv * 8 * D(HSP), in + D(B) * D(T) * 2 * D(NKV) * D(hs) * F);
    rec(K_FT_BWD_DQ, D(B) * D(NH) * pq * 6 * D(HSP), in + D(B) * D(T) * D(AD) * F);
}

/* fp32 flash kernels (cuda_attention.cu), tiles of 32, online softmax.
 * k_att_fwd: per (b, q head, query tile) its key tiles: S and P V, 4 hs
 * per pair; bytes qkv B T R f, out B T AD f, lse B NH T f. */
static void att32_fwd(long B, long T, long NH, long NKV, long hs, long window) {
    const long R = (NH + 2 * NKV) * hs;
    double pairs = 0;
    for (long q0 = 0; q0 < T; q0 += 32) pairs += 32.0 * 32.0 * key_tiles(q0, 32, T, window, 32);
    rec(K_ATT_FWD, D(B) * D(NH) * pairs * 4 * D(hs),
        D(B) * D(T) * D(R) * F + D(B) * D(T) * D(NH) * D(hs) * F + D(B) * D(NH) * D(T) * F);
}

/* k_att_bwd_dkv: per (b, kv head, key tile), g q heads times the query
 * tiles that see it: 8 hs per pair; k_att_bwd_dq: 6 hs per pair.  Bytes:
 * qkv B T R f, dout B T AD f, lse and D 2 B NH T f read; dk, dv or dq
 * written. */
static void att32_bwd(long B, long T, long NH, long NKV, long hs, long window) {
    const long R = (NH + 2 * NKV) * hs, AD = NH * hs, g = NH / NKV;
    double pkv = 0, pq = 0;
    for (long k0 = 0; k0 < T; k0 += 32) {
        const long qe = window > 0 && window - 1 < T - k0 - 32 ? k0 + 32 + window - 1 : T;
        pkv += 32.0 * 32.0 * D((qe - k0 + 31) / 32);
    }
    for (long q0 = 0; q0 < T; q0 += 32) pq += 32.0 * 32.0 * key_tiles(q0, 32, T, window, 32);
    const double in = D(B) * D(T) * D(R) * F + D(B) * D(T) * D(AD) * F + 2 * D(B) * D(NH) * D(T) * F;
    rec(K_ATT_BWD_DKV, D(B) * D(NKV) * D(g) * pkv * 8 * D(hs), in + D(B) * D(T) * 2 * D(NKV) * D(hs) * F);
    rec(K_ATT_BWD_DQ, D(B) * D(NH) * pq * 6 * D(hs), in + D(B) * D(T) * D(AD) * F);
}

/* k_att_rowdot: D[b, h, t] = dout . out over the head: 2 B T AD FLOPs;
 * reads dout and out (2 B T AD f; o16: out in bf16, B T AD h), writes
 * B NH T f */
static void rowdot(long B, long T, long NH, long hs, int o16) {
    const double n = D(B) * D(T) * D(NH) * D(hs);
    rec(K_ATT_ROWDOT, 2 * n, n * F + n * (o16 ? H : F) + D(B) * D(NH) * D(T) * F);
}

/* k_att_tc_round of n floats: f read, h written */
static void tc_round(double n) { rec(K_ATT_TC_ROUND, 0, n * (F + H)); }

/* One batched bf16 GEMM of the cuBLAS path: `batch` products of
 * [m, k] x [k, n]: 2 m n k batch FLOPs; bf16 operands, fp32 output (read
 * too when accumulating). */
static void att_gemm(long m, long n, long k, long batch, int acc) {
    rec(K_ATT_GEMM, 2 * D(m) * D(n) * D(k) * D(batch),
        D(batch) * ((D(m) * D(k) + D(k) * D(n)) * H + D(m) * D(n) * F * (acc ? 2 : 1)));
}

/* The cuBLAS path (tc_fwd / tc_bwd without flash): per sequence, per chunk
 * of kc kv heads (n = the chunk's heads), per q head j of the group, the
 * full [T, T] scores of n heads: forward S = K^T Q, k_att_tc_softmax
 * (reads S n T T f, writes P n T T h and lse; 5 FLOPs per score), out =
 * V P; backward S, softmax again (and the cap's derivative F, n T T f, with
 * a cap), dP = V^T dO, dV (+=) = dO P^T, k_att_tc_ds (reads P, dP, F,
 * writes dS in P: 4 FLOPs per score), dQ = K dS, dK (+=) = Q dS^T. */
static void cublas_att(int bwd, long B, long T, long NH, long NKV, long hs, int capped, int kc) {
    const long g = NH / NKV;
    for (long b = 0; b < B; b++)
        for (long k0 = 0; k0 < NKV; k0 += kc) {
            const long n = NKV - k0 < kc ? NKV - k0 : kc;
            const double tt = D(n) * D(T) * D(T);
            for (long j = 0; j < g; j++) {
                att_gemm(T, T, hs, n, 0);
                rec(K_ATT_TC_SOFTMAX, 5 * tt, tt * (F + H + (bwd && capped ? F : 0)) + D(n) * D(T) * F);
                if (!bwd) {
                    att_gemm(hs, T, T, n, 0);
                    continue;
                }
                att_gemm(T, T, hs, n, 0);
                att_gemm(hs, T, T, n, j > 0);
                rec(K_ATT_TC_DS, 4 * tt, tt * (H + F + (capped ? F : 0) + H) + 2 * D(n) * D(T) * F);
                att_gemm(hs, T, T, n, 0);
                att_gemm(hs, T, T, n, j > 0);
            }
        }
}

static int att_shape_ok(long NH, long NKV, long hs) {
    return NKV > 0 && NH % NKV == 0 && hs > 0 && hs <= 256;
}

/* ------------------------------------------------------------ cuDNN
 * cuda_sdpa.cu, when the counted build has cuDNN (zt_count_set_cudnn): its
 * rule (one for forward and backward): bf16 matmul mode, no soft-cap, head
 * size a multiple of 8 up to 256, ZT_CUDA_DETERMINISTIC unset or "0", and
 * lse 16-byte aligned; otherwise ztrain's kernels, as counted below.  A
 * shape cuDNN declines at run time (its heuristics give no engine, or no
 * plan finalizes) runs on ztrain's kernels: the counting backend calls no
 * cuDNN, so it cannot know, and counts cuDNN's launches.
 *
 * FLOPs of a graph execution are the useful causal ones: the (query, key)
 * pairs a query sees, exactly (sum over rows t of min(t + 1, window), so
 * T (T + 1) / 2 per head without a window, not the T^2 / 2 of
 * FlashAttention's benchmarks), per q head, times 4 hs forward (Q K^T and
 * P V) and 10 hs backward (Q K^T again, dO V^T, P^T dO, dS^T Q, dS K:
 * 2.5 x the forward); whatever cuDNN's kernels compute on masked pairs of
 * their tiles, and the backward's GQA sum over the group, are not counted. */
static int sdpa_rule(long hs, float softcap, const void *lse) {
    if (!g_cudnn || g_mode != ZT_MATMUL_BF16 || softcap != 0.0f || hs % 8 != 0 || hs > 256) return 0;
    const char *e = getenv("ZT_CUDA_DETERMINISTIC");
    if (e && *e && strcmp(e, "0") != 0) return 0;
    return ((uintptr_t)lse & 15) == 0;
}

/* the (query, key) pairs of one head: causal, within the window (cuda_sdpa.cu
 * passes a window only when 0 < window < T) */
static double sdpa_pairs(long T, long window) {
    if (window <= 0 || window >= T) return D(T) * D(T + 1) / 2;
    return D(window) * D(window + 1) / 2 + D(T - window) * D(window);
}

/* cuda_sdpa.cu's qkv16_direct: cuDNN reads the bf16 q|k|v in place when
 * Q, K and V (columns 0, NH hs, (NH + NKV) hs; rows R apart) are 16-byte
 * aligned */
static int sdpa_q_direct(const void *q16, long NH, long NKV, long hs) {
    return q16 && ((uintptr_t)q16 & 15) == 0 && (NH * hs * 2) % 16 == 0 && ((NH + NKV) * hs * 2) % 16 == 0 &&
           ((NH + 2 * NKV) * hs * 2) % 16 == 0;
}

/* zt_cuda_sdpa_fwd: the fp32 entries' q|k|v rounded into q16 (k_sdpa_round,
 * B T R: f read, h written; q16: the bf16 q|k|v read in place, or copied
 * when not 16-byte aligned); the forward graph: reads Q, K, V in bf16 (B
 * T R h), writes O (B T AD h) and Stats, our lse (B NH T f); k_sdpa_widen
 * of O into out (B T AD: h read, f written) unless O is the caller's bf16
 * output (o16: copied there when it is not 16-byte aligned). */
static void sdpa_fwd(long B, long T, long NH, long NKV, long hs, long window, const void *q16,
                     const void *o16) {
    const double BT = D(B) * D(T), R = D((NH + 2 * NKV) * hs), AD = D(NH * hs), st = D(B) * D(NH) * D(T);
    if (!q16) rec(K_SDPA_ROUND, 0, BT * R * (F + H));
    else if (!sdpa_q_direct(q16, NH, NKV, hs)) rec(K_MEMCPY, 0, 2 * BT * R * H);
    rec(K_CUDNN_FWD, D(B) * D(NH) * sdpa_pairs(T, window) * 4 * D(hs), BT * R * H + BT * AD * H + st * F);
    if (!o16) rec(K_SDPA_WIDEN, 0, BT * AD * (H + F));
    else if ((uintptr_t)o16 & 15) rec(K_MEMCPY, 0, 2 * BT * AD * H);
}

/* zt_cuda_sdpa_bwd: q|k|v as the forward (rounded, read in place or
 * copied); out rounded (B T AD; o16: the bf16 output read in place, or
 * copied when not 16-byte aligned); dout rounded (B T AD); cudaMemsetAsync
 * of dQ_accum (B T AD f: cuDNN accumulates dQ in it, as cudnn-frontend
 * zeroes it); the backward graph: reads q|k|v (B T R h), O and dO (2 B T AD
 * h), Stats (B NH T f), writes and reads softmax_sum (2 B NH T f) and
 * dQ_accum (2 B T AD f) (with NKV < NH the per-q-head dK and dV are virtual
 * tensors of the graph, as cudnn-frontend's: no memory), writes dQ, dK, dV
 * into dqkv16 (B T R h); k_sdpa_widen of dqkv16 into
 * dqkv (B T R: h read, f written), or (d16: gqa_ext_bwd16d, dqkv16 the
 * caller's) none.  No k_att_rowdot: the graph computes softmax_sum itself. */
static void sdpa_bwd_do(long B, long T, long NH, long NKV, long hs, long window, const void *q16,
                        const void *o16, int d16, const void *do16);
static void sdpa_bwd(long B, long T, long NH, long NKV, long hs, long window, const void *q16,
                     const void *o16, int d16) {
    sdpa_bwd_do(B, T, NH, NKV, hs, window, q16, o16, d16, NULL);
}
/* do16 (gqa_ext_bwd16do's): dO the caller's bf16 values, read as they are
 * (copied when not 16-byte aligned), no k_sdpa_round of dout */
static void sdpa_bwd_do(long B, long T, long NH, long NKV, long hs, long window, const void *q16,
                        const void *o16, int d16, const void *do16) {
    const double BT = D(B) * D(T), R = D((NH + 2 * NKV) * hs), AD = D(NH * hs), st = D(B) * D(NH) * D(T);
    if (!q16) rec(K_SDPA_ROUND, 0, BT * R * (F + H));
    else if (!sdpa_q_direct(q16, NH, NKV, hs)) rec(K_MEMCPY, 0, 2 * BT * R * H);
    if (!o16) rec(K_SDPA_ROUND, 0, BT * AD * (F + H));
    else if ((uintptr_t)o16 & 15) rec(K_MEMCPY, 0, 2 * BT * AD * H);
    if (!do16) rec(K_SDPA_ROUND, 0, BT * AD * (F + H));   /* dout */
    else if ((uintptr_t)do16 & 15) rec(K_MEMCPY, 0, 2 * BT * AD * H);
    rec(K_MEMSET, 0, BT * AD * F);
    rec(K_CUDNN_BWD, D(B) * D(NH) * sdpa_pairs(T, window) * 10 * D(hs),
        BT * R * H + 2 * BT * AD * H + st * F + 2 * st * F + 2 * BT * AD * F + BT * R * H);
    if (!d16) rec(K_SDPA_WIDEN, 0, BT * R * (H + F));
}

/* zt_cuda_gqa_ext_fwd: bf16 mode at head sizes <= 128: k_att_tc_round of
 * qkv (B T R) and k_ft_fwd; bf16 mode above 128 (while T allows score
 * chunks): the cuBLAS path; otherwise the fp32 flash kernel. */
/* q16 (gqa_ext_fwd16 / _bwd16): q|k|v arrive in bf16: not rounded on the
 * tensor-core paths, widened (k_att_widen, counted as k_from_bf16) for the
 * fp32 kernels */
/* o16 (gqa_ext_fwd16o): the output stored in bf16 by the flash kernel,
 * rounded after the cuBLAS and fp32 paths (k_to_bf16) */
static void gqa_fwd_counts16(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                             const void *q16, const void *o16, const void *lse);
static void gqa_fwd_counts(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                           const void *lse) {
    gqa_fwd_counts16(B, T, NH, NKV, hs, softcap, window, NULL, NULL, lse);
}
static void gqa_fwd_counts16(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                             const void *q16, const void *o16, const void *lse) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0 || !att_shape_ok(NH, NKV, hs)) return;
    if (sdpa_rule(hs, softcap, lse)) {   /* cuDNN (q16, o16: its Q, K, V and O as they are) */
        sdpa_fwd(B, T, NH, NKV, hs, window, q16, o16);
        return;
    }
    const int flash = g_flash && zt_cuda_att_flash_tc((int)hs);
    const int kc = flash ? 0 : zt_cuda_att_tc_heads_ext((int)T, (int)NKV, softcap > 0.0f);
    const int tc = g_mode == ZT_MATMUL_BF16 && (flash || kc > 0);
    if (q16 && !tc) rec(K_FROM_BF16, 0, D(B) * D(T) * D((NH + 2 * NKV) * hs) * (F + H));
    if (tc) {
        if (!q16) tc_round(D(B) * D(T) * D((NH + 2 * NKV) * hs));
        if (flash) ft_fwd(B, T, NH, NKV, hs, window, o16 != NULL);
        else cublas_att(0, B, T, NH, NKV, hs, softcap > 0.0f, kc);
    } else {
        att32_fwd(B, T, NH, NKV, hs, window);
    }
    if (o16 && !(tc && flash)) rec(K_TO_BF16, 0, D(B) * D(T) * D(NH * hs) * (F + H));
}

/* zt_cuda_gqa_ext_bwd: k_att_rowdot; bf16 mode (paths as the forward):
 * k_att_tc_round of qkv and of dout, then the flash kernels or the cuBLAS
 * path; otherwise the fp32 flash kernels. */
/* o16 (gqa_ext_bwd16o): the output in bf16, read so by k_att_rowdot on the
 * tensor-core paths, widened (k_att_widen, counted as k_from_bf16) for the
 * fp32 kernels */
static void gqa_bwd_counts16(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                             const void *q16, const void *o16, const void *lse);
static void gqa_bwd_counts(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                           const void *lse) {
    gqa_bwd_counts16(B, T, NH, NKV, hs, softcap, window, NULL, NULL, lse);
}
static void gqa_bwd_counts16(long B, long T, long NH, long NKV, long hs, float softcap, long window,
                             const void *q16, const void *o16, const void *lse) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0 || !att_shape_ok(NH, NKV, hs)) return;
    if (sdpa_rule(hs, softcap, lse)) {
        sdpa_bwd(B, T, NH, NKV, hs, window, q16, o16, 0);
        return;
    }
    const int flash = g_flash && zt_cuda_att_flash_tc((int)hs);
    const int kc = flash ? 0 : zt_cuda_att_tc_heads_ext((int)T, (int)NKV, softcap > 0.0f);
    const int tc = g_mode == ZT_MATMUL_BF16 && (flash || kc > 0);
    if (q16 && !tc) rec(K_FROM_BF16, 0, D(B) * D(T) * D((NH + 2 * NKV) * hs) * (F + H));
    if (o16 && !tc) rec(K_FROM_BF16, 0, D(B) * D(T) * D(NH * hs) * (F + H));
    rowdot(B, T, NH, hs, o16 != NULL && tc);
    if (tc) {
        if (!q16) tc_round(D(B) * D(T) * D((NH + 2 * NKV) * hs));
        tc_round(D(B) * D(T) * D(NH * hs));
        if (flash) ft_bwd(B, T, NH, NKV, hs, window);
        else cublas_att(1, B, T, NH, NKV, hs, softcap > 0.0f, kc);
        return;
    }
    att32_bwd(B, T, NH, NKV, hs, window);
}

static void c_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int C, int NH) {
    call(ZT_CE_attention_fwd);
    if (g_inner) g_inner->attention_fwd(out, lse, qkv, B, T, C, NH);
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return;
    gqa_fwd_counts(B, T, NH, NH, C / NH, 0.0f, 0, lse);
}
static void c_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int C, int NH) {
    call(ZT_CE_attention_bwd);
    if (g_inner) g_inner->attention_bwd(dqkv, dout, qkv, out, lse, B, T, C, NH);
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return;
    gqa_bwd_counts(B, T, NH, NH, C / NH, 0.0f, 0, lse);
}
static void c_gqa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int hd) {
    call(ZT_CE_gqa_fwd);
    if (g_inner) g_inner->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hd);
    gqa_fwd_counts(B, T, NH, NKV, hd, 0.0f, 0, lse);
}
static void c_gqa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                      const float *lse, int B, int T, int NH, int NKV, int hd) {
    call(ZT_CE_gqa_bwd);
    if (g_inner) g_inner->gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd);
    gqa_bwd_counts(B, T, NH, NKV, hd, 0.0f, 0, lse);
}
static void c_gqa_ext_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                          int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_fwd);
    if (g_inner) g_inner->gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hd, o);
    gqa_fwd_counts(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, lse);
}
static void c_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int B, int T, int NH, int NKV, int hd,
                          const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_bwd);
    if (g_inner) g_inner->gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd, o);
    gqa_bwd_counts(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, lse);
}

static void c_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_fwd16);
    if (g_inner) g_inner->gqa_ext_fwd16(out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    gqa_fwd_counts16(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, qkv16, NULL, lse);
}
static void c_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                            const float *out, const float *lse, int B, int T, int NH, int NKV,
                            int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_bwd16);
    if (g_inner) g_inner->gqa_ext_bwd16(dqkv, dout, qkv16, tmp, out, lse, B, T, NH, NKV, hd, o);
    gqa_bwd_counts16(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, qkv16, NULL, lse);
}
static void c_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16,
                             float *tmp, int B, int T, int NH, int NKV, int hd,
                             const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_fwd16o);
    if (g_inner) g_inner->gqa_ext_fwd16o(out16, out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    gqa_fwd_counts16(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, qkv16, out16, lse);
}
static void c_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                             const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_bwd16o);
    if (g_inner)
        g_inner->gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    gqa_bwd_counts16(B, T, NH, NKV, hd, o ? o->softcap : 0.0f, o ? o->window : 0, qkv16, out16, lse);
}
/* gqa_ext_bwd16d: cuda_attention.cu's rule: cuDNN's path with q|k|v, the
 * output and dqkv16 read / written in place (16-byte aligned) returns 1,
 * its dQ, dK, dV not widened; else gqa_ext_bwd16o's counts (0).  Over an
 * inner backend, the inner's answer (the cpu backends: 0). */
static int c_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                            float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_bwd16d);
    const float sc = o ? o->softcap : 0.0f;
    const int win = o ? o->window : 0;
    int r;
    if (g_inner)
        r = g_inner->gqa_ext_bwd16d(dqkv, dqkv16, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    else
        r = B > 0 && T > 0 && NH > 0 && hd > 0 && att_shape_ok(NH, NKV, hd) && sdpa_rule(hd, sc, lse) &&
            sdpa_q_direct(qkv16, NH, NKV, hd) && out16 && ((uintptr_t)out16 & 15) == 0 &&
            sdpa_q_direct(dqkv16, NH, NKV, hd);
    if (r) sdpa_bwd(B, T, NH, NKV, hd, win > 0 && win < T ? win : 0, qkv16, out16, 1);
    else gqa_bwd_counts16(B, T, NH, NKV, hd, sc, win, qkv16, out16, lse);
    return r;
}

/* att_do16: cuda_sdpa.cu's rule for the backward (lse taken 16-byte
 * aligned); over an inner backend, the inner's answer (the cpu backends: 0) */
static int c_att_do16(int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    call(ZT_CE_att_do16);
    if (g_inner) return g_inner->att_do16 ? g_inner->att_do16(B, T, NH, NKV, hd, o) : 0;
    return B > 0 && T > 0 && NH > 0 && NKV > 0 && hd > 0 && o && att_shape_ok(NH, NKV, hd) &&
           sdpa_rule(hd, o->softcap, D16);
}
/* gqa_ext_bwd16do: gqa_ext_bwd16d's cuDNN counts with dout16 read as its dO
 * (no k_sdpa_round); off cuDNN's path cuda records an error and launches
 * nothing (none counted).  Over an inner backend, the inner's answer. */
static int c_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                             float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    call(ZT_CE_gqa_ext_bwd16do);
    const float sc = o ? o->softcap : 0.0f;
    const int win = o ? o->window : 0;
    const int cu = B > 0 && T > 0 && NH > 0 && hd > 0 && att_shape_ok(NH, NKV, hd) && sdpa_rule(hd, sc, lse);
    const int d16 = cu && sdpa_q_direct(qkv16, NH, NKV, hd) && out16 && ((uintptr_t)out16 & 15) == 0 &&
                    sdpa_q_direct(dqkv16, NH, NKV, hd);
    const int r = g_inner ? g_inner->gqa_ext_bwd16do(dqkv, dqkv16, dout16, qkv16, tmp, out16, out, lse, B, T,
                                                     NH, NKV, hd, o)
                          : d16;
    if (cu) sdpa_bwd_do(B, T, NH, NKV, hd, win > 0 && win < T ? win : 0, qkv16, out16, d16, dout16);
    return r;
}

/* ------------------------------------------------------------ embeddings */

/* k_encoder_fwd: per element wte (+ wpe): N C FLOPs with wpe; reads inp
 * N 4, wte rows N C f (and wpe N C f), writes N C f */
static void c_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B,
                          int T, int C) {
    call(ZT_CE_encoder_fwd);
    if (g_inner) g_inner->encoder_fwd(out, inp, wte, wpe, B, T, C);
    if (B <= 0 || T <= 0 || C <= 0) return;
    const double N = D(B) * D(T);
    rec(K_ENCODER_FWD, wpe ? N * C : 0, N * 4 + N * C * F * (wpe ? 3 : 2));
}

/* k_encoder_fwd_w16: the same with bf16 rows of wte (N C 2 bytes) */
static void c_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16, const float *wpe,
                              int B, int T, int C) {
    call(ZT_CE_encoder_fwd_w16);
    if (g_inner) g_inner->encoder_fwd_w16(out, inp, wte16, wpe, B, T, C);
    if (B <= 0 || T <= 0 || C <= 0) return;
    const double N = D(B) * D(T);
    rec(K_ENCODER_FWD, wpe ? N * C : 0, N * 4 + N * C * 2 + N * C * F * (wpe ? 2 : 1));
}

/* dwpe (if any): k_encoder_bwd_wpe, N C FLOPs, reads dout N C f, dwpe T C f
 * read and written.  dwte: k_iota (writes N 4); CUB's radix sort of N
 * (token, position) int pairs: a histogram pass (reads the keys, N 4), a
 * scan, and 4 onesweep passes of 8 bits (each reads and writes keys and
 * values, 16 N); k_encoder_bwd_wte: adds each row of dout (N C FLOPs, N C f)
 * into its token's row of dwte (read and written: at most N distinct
 * tokens, counted as N: 2 N C f) after reading the sorted keys and
 * positions (8 N). */
static void c_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                          int C) {
    call(ZT_CE_encoder_bwd);
    if (g_inner) g_inner->encoder_bwd(dwte, dwpe, dout, inp, B, T, C);
    const double N = D(B) * D(T);
    if (N <= 0 || C <= 0) return;
    if (dwpe) rec(K_ENCODER_BWD_WPE, N * C, N * C * F + 2 * D(T) * C * F);
    rec(K_IOTA, 0, N * 4);
    rec(K_SORT_HIST, 0, N * 4);
    rec(K_SORT_SCAN, 0, 4 * 256 * 4 * 2);
    rec_n(K_SORT_PASS, 0, 16 * N, 4);
    rec(K_ENCODER_BWD_WTE, N * C, N * C * F + 2 * N * C * F + 8 * N);
}

/* ------------------------------------------------------------ norms */

/* k_layernorm_fwd (a warp per row; the row's re-reads stay on chip):
 * 8 N C FLOPs; reads inp N C f and w, b 2 C f; writes out N C f, mean and
 * rstd 2 N f */
static void c_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                            const float *b, int N, int C) {
    call(ZT_CE_layernorm_fwd);
    if (g_inner) g_inner->layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_LAYERNORM_FWD, 8 * D(N) * C, 2 * D(N) * C * F + 2 * D(C) * F + 2 * D(N) * F);
}

/* k_layernorm_bwd (a block per row chunk: a warp per row for dinp, then a
 * thread per column for the chunk's partial dw, db over the rows just
 * read): 17 N C FLOPs; reads inp, dout once and dinp (3 N C f), w C f,
 * mean and rstd 2 N f; writes dinp N C f and 2 P C 8 (the partials'
 * re-reads between row groups stay on chip).  k_colsum_final (both
 * arrays): 2 P C FLOPs; reads 2 P C 8, dw and db read and written 4 C f.
 * dinp16: N C h more written (layernorm_bwd16).  dout16
 * (layernorm_bwd16d): dout read as N C h for N C f.  dsum
 * (layernorm_bwd16d): the column pass adds the rows it has just written
 * (on chip), N C FLOPs more and a third P C 8 of partials written; the
 * same k_colsum_final sums that array too (P C FLOPs more; P C 8 read, dsum
 * read and written 2 C f).
 * What-if NORM_BWD_SPLIT (the recorded tables' kernels): k_layernorm_bwd_dx
 * (12 N C FLOPs; reads inp, dout, dinp 3 N C f, w C f, mean and rstd 2 N f;
 * writes dinp N C f, dinp16 N C h) then k_layernorm_bwd_part (ceil(C/128) x
 * P blocks: 5 N C FLOPs; reads inp and dout again 2 N C f, mean and rstd
 * once per column block ceil(C/128) 2 N f; writes 2 P C 8); dsum there the
 * column sum those kernels left to the projection (colsum's two kernels). */
static void layernorm_bwd_counts(int N, int C, int d16, int dout16, int dsum) {
    if (N <= 0 || C <= 0) return;
    const double P = zt_cuda_ws_col_chunks(N, NULL), cb = D((C + 127) / 128);
    const double out16 = d16 ? D(N) * C * H : 0, dsz = dout16 ? H : F;
    if (g_whatif & ZT_COUNT_WHATIF_NORM_BWD_SPLIT) {
        rec(K_LAYERNORM_BWD_DX, 12 * D(N) * C,
            3 * D(N) * C * F + D(N) * C * dsz + out16 + D(C) * F + 2 * D(N) * F);
        rec(K_LAYERNORM_BWD_PART, 5 * D(N) * C,
            D(N) * C * F + D(N) * C * dsz + cb * 2 * D(N) * F + 2 * P * C * 8);
        rec(K_COLSUM_FINAL, 2 * P * C, 2 * P * C * 8 + 4 * D(C) * F);
        if (dsum) colsum(N, C);
        return;
    }
    rec(K_LAYERNORM_BWD, (dsum ? 18 : 17) * D(N) * C,
        3 * D(N) * C * F + D(N) * C * dsz + out16 + D(C) * F + 2 * D(N) * F +
            (dsum ? 3 : 2) * P * C * 8);
    rec(K_COLSUM_FINAL, (dsum ? 3 : 2) * P * C, (dsum ? 3 : 2) * (P * C * 8 + 2 * D(C) * F));
}
static void c_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, int N, int C) {
    call(ZT_CE_layernorm_bwd);
    if (g_inner) g_inner->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    layernorm_bwd_counts(N, C, 0, 0, 0);
}

/* The residual add fused with the next norm: k_layernorm_fwd's /
 * k_rmsnorm_fwd's counts plus the add (N C FLOPs): reads a and b (2 N C f)
 * instead of inp, and writes res (N C f) besides out; the rows' re-reads of
 * res stay on chip. */
static void c_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                const float *b, const float *w, const float *bias, int N, int C) {
    call(ZT_CE_add_layernorm_fwd);
    if (g_inner) g_inner->add_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_LAYERNORM_FWD, 9 * D(N) * C, 4 * D(N) * C * F + 2 * D(C) * F + 2 * D(N) * F);
}
static void c_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                              const float *w, float eps, int N, int C) {
    call(ZT_CE_add_rmsnorm_fwd);
    if (g_inner) g_inner->add_rmsnorm_fwd(res, out, rstd, a, b, w, eps, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_RMSNORM_FWD, 5 * D(N) * C, 4 * D(N) * C * F + D(C) * F + D(N) * F);
}

/* The norms writing bf16 (backend.h layernorm_fwd16, ...): the fp32
 * kernels' counts with out written in bf16 (N C h instead of N C f) */
static void c_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b, int N, int C) {
    call(ZT_CE_layernorm_fwd16);
    if (g_inner) g_inner->layernorm_fwd16(out16, tmp, mean, rstd, inp, w, b, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_LAYERNORM_FWD16, 8 * D(N) * C,
        D(N) * C * (F + H) + 2 * D(C) * F + 2 * D(N) * F);
}
static void c_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                            const float *w, float eps, int N, int C) {
    call(ZT_CE_rmsnorm_fwd16);
    if (g_inner) g_inner->rmsnorm_fwd16(out16, tmp, rstd, inp, w, eps, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_RMSNORM_FWD16, 4 * D(N) * C, D(N) * C * (F + H) + D(C) * F + D(N) * F);
}
static void c_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean,
                                  float *rstd, const float *a, const float *b, const float *w,
                                  const float *bias, int N, int C) {
    call(ZT_CE_add_layernorm_fwd16);
    if (g_inner) g_inner->add_layernorm_fwd16(res, out16, tmp, mean, rstd, a, b, w, bias, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_LAYERNORM_FWD16, 9 * D(N) * C,
        D(N) * C * (3 * F + H) + 2 * D(C) * F + 2 * D(N) * F);
}
/* add_layernorm_fwd16b: k_add_layernorm_fwd16 reading the branch in bf16
 * (N C h for N C f) */
static void c_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean,
                                   float *rstd, const float *a, const uint16_t *b16,
                                   const float *w, const float *bias, int N, int C) {
    call(ZT_CE_add_layernorm_fwd16b);
    if (g_inner) g_inner->add_layernorm_fwd16b(res, out16, tmp, mean, rstd, a, b16, w, bias, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_LAYERNORM_FWD16B, 9 * D(N) * C,
        D(N) * C * (2 * F + 2 * H) + 2 * D(C) * F + 2 * D(N) * F);
}
static void c_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd,
                                const float *a, const float *b, const float *w, float eps, int N,
                                int C) {
    call(ZT_CE_add_rmsnorm_fwd16);
    if (g_inner) g_inner->add_rmsnorm_fwd16(res, out16, tmp, rstd, a, b, w, eps, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_RMSNORM_FWD16, 5 * D(N) * C, D(N) * C * (3 * F + H) + D(C) * F + D(N) * F);
}
/* k_add_rmsnorm_fwd16b: k_add_rmsnorm_fwd16 reading the branch b16 in bf16:
 * 5 N C FLOPs; reads a N C f, b16 N C h, w C f; writes res N C f, out16
 * N C h, rstd N f */
static void c_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                 const float *a, const uint16_t *b16, const float *w, float eps,
                                 int N, int C) {
    call(ZT_CE_add_rmsnorm_fwd16b);
    if (g_inner) g_inner->add_rmsnorm_fwd16b(res, out16, tmp, rstd, a, b16, w, eps, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_ADD_RMSNORM_FWD16B, 5 * D(N) * C,
        D(N) * C * (2 * F + 2 * H) + D(C) * F + D(N) * F);
}

/* k_rmsnorm_fwd: 4 N C FLOPs; reads inp N C f, w C f; writes out N C f,
 * rstd N f */
static void c_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, float eps, int N,
                          int C) {
    call(ZT_CE_rmsnorm_fwd);
    if (g_inner) g_inner->rmsnorm_fwd(out, rstd, inp, w, eps, N, C);
    if (N <= 0 || C <= 0) return;
    rec(K_RMSNORM_FWD, 4 * D(N) * C, 2 * D(N) * C * F + D(C) * F + D(N) * F);
}

/* k_rmsnorm_bwd (k_layernorm_bwd's scheme): 11 N C FLOPs; reads inp, dout
 * once and dinp (3 N C f), w C f, rstd N f; writes dinp N C f and P C 8.
 * k_colsum_final: P C FLOPs; reads P C 8, dw read and written 2 C f.
 * dinp16: N C h more written (rmsnorm_bwd16).  What-if NORM_BWD_SPLIT:
 * k_rmsnorm_bwd_dx (8 N C FLOPs; reads inp, dout, dinp 3 N C f, w C f,
 * rstd N f; writes dinp N C f, dinp16 N C h) then k_rmsnorm_bwd_part (3 N C
 * FLOPs; reads inp and dout again 2 N C f, rstd once per column block
 * ceil(C/128) N f; writes P C 8).  rmsnorm_bwd16d: dout read in bf16, N C h
 * for N C f in each pass reading it (dout16h). */
static void rmsnorm_bwd_counts(int N, int C, int d16, int dout16h) {
    if (N <= 0 || C <= 0) return;
    const double P = zt_cuda_ws_col_chunks(N, NULL), cb = D((C + 127) / 128);
    const double out16 = d16 ? D(N) * C * H : 0;
    /* (dout's bytes, each pass's read) */
    const double dout = D(N) * C * (dout16h ? H : F);
    if (g_whatif & ZT_COUNT_WHATIF_NORM_BWD_SPLIT) {
        rec(K_RMSNORM_BWD_DX, 8 * D(N) * C, 3 * D(N) * C * F + dout + out16 + D(C) * F + D(N) * F);
        rec(K_RMSNORM_BWD_PART, 3 * D(N) * C, D(N) * C * F + dout + cb * D(N) * F + P * C * 8);
    } else {
        rec(K_RMSNORM_BWD, 11 * D(N) * C,
            3 * D(N) * C * F + dout + out16 + D(C) * F + D(N) * F + P * C * 8);
    }
    rec(K_COLSUM_FINAL, P * C, P * C * 8 + 2 * D(C) * F);
}
static void c_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                          const float *rstd, int N, int C) {
    call(ZT_CE_rmsnorm_bwd);
    if (g_inner) g_inner->rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
    rmsnorm_bwd_counts(N, C, 0, 0);
}

/* Per-head RMSNorm over R = N n_heads heads of hd.  k_headnorm_fwd:
 * 4 R hd FLOPs; reads x R hd f, w hd f; writes raw and x 2 R hd f, rstd R f.
 * Backward: k_headnorm_bwd (a block per chunk of pairs: a thread per
 * channel for the partial dw, then a thread per pair for dx in place;
 * 11 R hd FLOPs; reads raw and dx once 2 R hd f, rstd R f, w hd f; writes
 * dx R hd f and P' hd 8, P' the chunks of R rows), then k_colsum_final
 * (P' hd; reads P' hd 8, dw 2 hd f).  What-if NORM_BWD_SPLIT:
 * k_headnorm_bwd_part (3 R hd FLOPs; reads raw and dx 2 R hd f, rstd
 * ceil(hd/128) R f; writes P' hd 8), k_colsum_final, then k_headnorm_bwd_dx
 * (8 R hd FLOPs; reads raw, dx again 2 R hd f, rstd R f, w; writes dx
 * R hd f). */
static void c_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                           int n_heads, int stride, int hd) {
    call(ZT_CE_headnorm_fwd);
    if (g_inner) g_inner->headnorm_fwd(x, raw, rstd, w, eps, N, n_heads, stride, hd);
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
    const double R = D(N) * n_heads;
    rec(K_HEADNORM_FWD, 4 * R * hd, 3 * R * hd * F + D(hd) * F + R * F);
}
static void c_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w, const float *rstd,
                           int N, int n_heads, int stride, int hd) {
    call(ZT_CE_headnorm_bwd);
    if (g_inner) g_inner->headnorm_bwd(dx, dw, raw, w, rstd, N, n_heads, stride, hd);
    if (N <= 0 || n_heads <= 0 || hd <= 0) return;
    const double R = D(N) * n_heads, P = zt_cuda_ws_col_chunks(N * n_heads, NULL);
    if (!(g_whatif & ZT_COUNT_WHATIF_NORM_BWD_SPLIT)) {
        rec(K_HEADNORM_BWD, 11 * R * hd, 3 * R * hd * F + R * F + D(hd) * F + P * hd * 8);
        rec(K_COLSUM_FINAL, P * hd, P * hd * 8 + 2 * D(hd) * F);
        return;
    }
    rec(K_HEADNORM_BWD_PART, 3 * R * hd, 2 * R * hd * F + D((hd + 127) / 128) * R * F + P * hd * 8);
    rec(K_COLSUM_FINAL, P * hd, P * hd * 8 + 2 * D(hd) * F);
    rec(K_HEADNORM_BWD_DX, 8 * R * hd, 3 * R * hd * F + R * F + D(hd) * F);
}

/* ------------------------------------------------------------ activations */

/* k_rope: B T n_heads hd/2 pairs rotated in place: 6 FLOPs and 4 f (2 read,
 * 2 written) per pair, inv_freq hd/2 f */
static void rope_counts(int B, int T, int n_heads, int hd) {
    const long h2 = hd / 2;
    if (B <= 0 || T <= 0 || n_heads <= 0 || h2 <= 0) return;
    const double pairs = D(B) * T * n_heads * h2;
    rec(K_ROPE, 6 * pairs, pairs * 4 * F + D(h2) * F);
}
static void c_rope_fwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride, int hd,
                       float scale) {
    call(ZT_CE_rope_fwd);
    if (g_inner) g_inner->rope_fwd(x, inv_freq, B, T, n_heads, stride, hd, scale);
    rope_counts(B, T, n_heads, hd);
}
static void c_rope_bwd(float *x, const float *inv_freq, int B, int T, int n_heads, int stride, int hd,
                       float scale) {
    call(ZT_CE_rope_bwd);
    if (g_inner) g_inner->rope_bwd(x, inv_freq, B, T, n_heads, stride, hd, scale);
    rope_counts(B, T, n_heads, hd);
}

/* k_rope_fwd16 (backend.h rope_fwd16): k_rope's pairs read in fp32 and
 * written in bf16 (6 FLOPs, 2 f + 2 h a pair), the rows' other stride -
 * n_heads hd columns read in fp32 and written in bf16; inv_freq hd/2 f */
static void c_rope_fwd16(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T,
                         int n_heads, int stride, int hd, float scale) {
    call(ZT_CE_rope_fwd16);
    if (g_inner) g_inner->rope_fwd16(qkv16, x, inv_freq, B, T, n_heads, stride, hd, scale);
    const long h2 = hd / 2;
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const double rows = D(B) * T, pairs = n_heads > 0 && h2 > 0 ? rows * n_heads * h2 : 0;
    const double rest = rows * (stride - 2.0 * (n_heads > 0 && h2 > 0 ? n_heads * h2 : 0));
    rec(K_ROPE_FWD16, 6 * pairs, pairs * 2 * (F + H) + rest * (F + H) + (pairs ? D(h2) * F : 0));
}

/* rope_bwd16 (backend.h): with dbias, zt_cuda_rope_bwd16's column sums
 * first: k_rope_colsum16_part reads the N stride h rows (6 FLOPs a pair
 * rotated, a FLOP a column summed; inv_freq hd/2 f a chunk of rows), P
 * stride 8 written, and k_colsum_final; then k_rope_bwd16 rotates the
 * pairs in place in bf16 (6 FLOPs, 2 h read and 2 h written a pair;
 * inv_freq hd/2 f), the other columns not touched */
static void c_rope_bwd16(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T, int n_heads,
                         int stride, int hd, float scale) {
    call(ZT_CE_rope_bwd16);
    if (g_inner) g_inner->rope_bwd16(x16, dbias, inv_freq, B, T, n_heads, stride, hd, scale);
    const long h2 = hd / 2;
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const double rows = D(B) * T, pairs = n_heads > 0 && h2 > 0 ? rows * n_heads * h2 : 0;
    if (dbias) {
        const long N = (long)B * T;
        const double P = zt_cuda_ws_col_chunks((int)N, NULL);
        rec(K_ROPE_COLSUM16_PART, 6 * pairs + rows * stride,
            rows * stride * H + P * D(stride) * 8 + (pairs ? P * D(h2) * F : 0));
        rec(K_COLSUM_FINAL, P * D(stride), P * D(stride) * 8 + 2 * D(stride) * F);
    }
    if (pairs) rec(K_ROPE_BWD16, 6 * pairs, pairs * 4 * H + D(h2) * F);
}

/* k_qknorm_rope_bwd16 (backend.h qknorm_rope_bwd16): k_headnorm_bwd's
 * work on the q and then the k groups in one launch (11 FLOPs a value,
 * and k_rope's rotation of the widened pair, 6 FLOPs a pair, evaluated
 * where the partial dw, the row's sum and the store read it: 9 a value;
 * the q and k heads read and written in bf16, 2 h a value, raw f a
 * value, rstd f a group, the weights, inv_freq hd/2 f, the partial dw P'
 * g 8 of each norm, P' its chunks of (row, group) pairs), then
 * k_colsum_final for dqw and for dkw; the shapes zt_cuda_qknorm_rope_bwd16
 * refuses (odd hd, groups not whole heads) nothing */
static void c_qknorm_rope_bwd16(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                                const float *rstd, const float *qw, const float *kw,
                                const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                                int knh, int stride, int hd, float scale) {
    call(ZT_CE_qknorm_rope_bwd16);
    if (g_inner)
        g_inner->qknorm_rope_bwd16(dqkv16, dqw, dkw, raw, rstd, qw, kw, inv_freq, B, T, NH, NKV, qnh,
                                   knh, stride, hd, scale);
    if (B <= 0 || T <= 0 || stride <= 0) return;
    if (NH <= 0 || NKV <= 0 || qnh <= 0 || knh <= 0 || hd <= 0 || hd % 2 || NH % qnh || NKV % knh ||
        (NH + NKV) * hd > stride)
        return;
    const int N = B * T;
    const double vals = D(N) * (NH + NKV) * hd, groups = D(N) * (qnh + knh);
    const double qg = D(NH) * hd / qnh, kg = D(NKV) * hd / knh;
    const double Pq = zt_cuda_ws_col_chunks(N * qnh, NULL), Pk = zt_cuda_ws_col_chunks(N * knh, NULL);
    rec(K_QKNORM_ROPE_BWD16, 20 * vals,
        vals * (2 * H + F) + groups * F + (qg + kg) * F + D(hd / 2) * F + (Pq * qg + Pk * kg) * 8);
    rec(K_COLSUM_FINAL, Pq * qg, Pq * qg * 8 + 2 * qg * F);
    rec(K_COLSUM_FINAL, Pk * kg, Pk * kg * 8 + 2 * kg * F);
}

/* k_qknorm_rope_fwd16 (backend.h qknorm_rope_fwd16): k_headnorm_fwd's
 * work on the q and k groups (4 FLOPs a value; reads x, writes raw a
 * value f, rstd a group f, the weights) and k_rope_fwd16's rotation (6
 * FLOPs a pair, the values written in bf16, inv_freq hd/2 f), the rows'
 * other columns read in fp32 and written in bf16: one launch; the
 * degenerate shapes (odd hd, groups not whole heads) the sequence's */
static void c_qknorm_rope_fwd16(uint16_t *qkv16, float *x, float *raw, float *rstd,
                                const float *qw, const float *kw, float eps, const float *inv_freq,
                                int B, int T, int NH, int NKV, int qnh, int knh, int stride, int hd,
                                float scale) {
    call(ZT_CE_qknorm_rope_fwd16);
    if (g_inner)
        g_inner->qknorm_rope_fwd16(qkv16, x, raw, rstd, qw, kw, eps, inv_freq, B, T, NH, NKV, qnh,
                                   knh, stride, hd, scale);
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const int h2 = hd / 2;
    if (NH <= 0 || NKV <= 0 || qnh <= 0 || knh <= 0 || h2 <= 0 || hd % 2 || (NH * hd) % qnh ||
        (NKV * hd) % knh) {
        const int N = B * T;
        if (NH > 0 && qnh > 0 && hd > 0) {
            const double R = D(N) * qnh, g = D(NH) * hd / qnh;
            rec(K_HEADNORM_FWD, 4 * R * g, 3 * R * g * F + g * F + R * F);
        }
        if (NH >= 0 && NKV > 0 && knh > 0 && hd > 0) {
            const double R = D(N) * knh, g = D(NKV) * hd / knh;
            rec(K_HEADNORM_FWD, 4 * R * g, 3 * R * g * F + g * F + R * F);
        }
        const long hh = hd / 2;
        const int nh = NH + NKV;
        const double rows = D(B) * T, pairs = nh > 0 && hh > 0 ? rows * nh * hh : 0;
        const double rest = rows * (stride - 2.0 * (nh > 0 && hh > 0 ? nh * hh : 0));
        rec(K_ROPE_FWD16, 6 * pairs, pairs * 2 * (F + H) + rest * (F + H) + (pairs ? D(hh) * F : 0));
        return;
    }
    const double rows = D(B) * T, vals = rows * (NH + NKV) * hd, groups = rows * (qnh + knh);
    const double rest = rows * (stride - (NH + NKV) * hd);
    rec(K_QKNORM_ROPE_FWD16, 4 * vals + 6 * (vals / 2),
        vals * (2 * F + H) + groups * F + (D(NH) * hd / qnh + D(NKV) * hd / knh) * F +
            rest * (F + H) + D(h2) * F);
}

/* k_swiglu_fwd / k_geglu_fwd over N H: reads gu 2 N H f, writes N H f
 * (swiglu 5, geglu 10 FLOPs each); _bwd: reads gu 2 N H f and dout N H f,
 * writes dgu 2 N H f (swiglu 10, geglu 18 FLOPs each) */
static void c_swiglu_fwd(float *out, const float *gu, int N, int H_) {
    call(ZT_CE_swiglu_fwd);
    if (g_inner) g_inner->swiglu_fwd(out, gu, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_FWD, 5 * D(N) * H_, 3 * D(N) * H_ * F);
}
static void c_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H_) {
    call(ZT_CE_swiglu_bwd);
    if (g_inner) g_inner->swiglu_bwd(dgu, dout, gu, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_BWD, 10 * D(N) * H_, 5 * D(N) * H_ * F);
}
static void c_geglu_fwd(float *out, const float *gu, int N, int H_) {
    call(ZT_CE_geglu_fwd);
    if (g_inner) g_inner->geglu_fwd(out, gu, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_FWD, 10 * D(N) * H_, 3 * D(N) * H_ * F);
}
static void c_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H_) {
    call(ZT_CE_geglu_bwd);
    if (g_inner) g_inner->geglu_bwd(dgu, dout, gu, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_BWD, 18 * D(N) * H_, 5 * D(N) * H_ * F);
}

/* the bf16-output entries (backend.h): matmul_fwd_o16 is one cuBLASLt GEMM
 * with a bf16 D (bf16 mode, a bias NULL or 16-byte aligned, C > 0), else
 * matmul_fwd into tmp and k_to_bf16; the elementwise ones read and write
 * bf16 (h) where their fp32 entries read and write the stored tensor */
static void c_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, const float *bias, int N, int C,
                             int OC) {
    call(ZT_CE_matmul_fwd_o16);
    if (g_inner) g_inner->matmul_fwd_o16(out16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    if (N <= 0 || OC <= 0) return;
    const void *ww = w16_of(w16), *xx = inp16 ? x16_of(inp16) : NULL;
    if (C > 0 && g_mode == ZT_MATMUL_BF16 && (!bias || ((uintptr_t)bias & 15) == 0)) {
        gemm_exo(1, 0, OC, N, C, C, C, 0, bias, ww, xx, 1);
        return;
    }
    mm_fwd(N, C, OC, bias, ww, xx);
    rec(K_TO_BF16, 0, D(N) * D(OC) * (F + H));
}
/* matmul_grouped_o16 (cuda_matmul.cu, bf16 mode): the fp32 input rounded
 * once (k_round_bf16 over every row: f read, h written), the A, B, C
 * pointer arrays written on the device (k_grouped_ptrs, one thread: a
 * launch a 256 blocks with rows, 3 pointers a block written; G' the
 * blocks with rows), then one cublasGemmGroupedBatchedEx: 2 n OC C
 * FLOPs a block, its weight (OC C h) and input (n C h) read and output
 * (n OC h) written.  No blocks with rows: nothing.  (fp32 mode: cuda
 * records an error and computes nothing.) */
static void c_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                 const uint16_t *w16, const int *n, int G, int C, int OC) {
    call(ZT_CE_matmul_grouped_o16);
    if (g_inner) g_inner->matmul_grouped_o16(out16, inp, inp16, w16, n, G, C, OC);
    if (g_mode != ZT_MATMUL_BF16 || !n || G <= 0 || C <= 0 || OC <= 0) return;
    double rows = 0, fl = 0, by = 0, gn = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        gn += 1;
        rows += n[g];
        fl += 2 * D(n[g]) * D(OC) * D(C);
        by += (D(OC) * D(C) + D(n[g]) * D(C) + D(n[g]) * D(OC)) * H;
    }
    if (gn == 0) return;
    if (!inp16 || !x16_of(inp16)) rec(K_ROUND_BF16, 0, rows * D(C) * (F + H));
    for (double q = 0; q < gn; q += 256)
        rec(K_GROUPED_PTRS, 0, 3 * (gn - q < 256 ? gn - q : 256) * sizeof(void *));
    rec(K_GEMM_GROUPED, fl, by);
}
/* matmul_grouped_bwd_o16 (cuda_matmul.cu, bf16 mode): the pointer arrays
 * (k_grouped_ptrs, as the forward's), then one cublasGemmGroupedBatchedEx:
 * 2 n C OC FLOPs a block, its weight (OC C h) and output gradient (n OC h)
 * read and input gradient (n C h) written.  No blocks with rows: nothing. */
static void c_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16,
                                     const uint16_t *w16, const int *n, int G, int C, int OC) {
    call(ZT_CE_matmul_grouped_bwd_o16);
    if (g_inner) g_inner->matmul_grouped_bwd_o16(dinp16, tmp, dout16, w16, n, G, C, OC);
    if (g_mode != ZT_MATMUL_BF16 || !n || G <= 0 || C <= 0 || OC <= 0) return;
    double fl = 0, by = 0, gn = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        gn += 1;
        fl += 2 * D(n[g]) * D(OC) * D(C);
        by += (D(OC) * D(C) + D(n[g]) * D(OC) + D(n[g]) * D(C)) * H;
    }
    if (gn == 0) return;
    for (double q = 0; q < gn; q += 256)
        rec(K_GROUPED_PTRS, 0, 3 * (gn - q < 256 ? gn - q : 256) * sizeof(void *));
    rec(K_GEMM_GROUPED_BWD, fl, by);
}
/* matmul_grouped_dw16 (cuda_matmul.cu, bf16 mode): the blocks with rows
 * in chunks of min(tmp_n / (OC C), 256), each: the pointer arrays
 * (k_grouped_dw_ptrs, one thread, 3 pointers a block), one
 * cublasGemmGroupedBatchedEx (2 n OC C FLOPs a block, its output gradient
 * (n OC h) and input (n C h) read, its bf16 product (OC C h) written),
 * then k_dw_add16 (a block's product read, its fp32 gradient read unless
 * fresh, written: OC C (h + f) or (h + 2 f)).  No blocks with rows, or
 * tmp_n < OC C (cuda records an error): nothing. */
static void c_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                  const uint16_t *inp16, const int *n, int G, int C, int OC) {
    call(ZT_CE_matmul_grouped_dw16);
    if (g_inner) g_inner->matmul_grouped_dw16(dw, tmp16, tmp_n, dout16, inp16, n, G, C, OC);
    if (g_mode != ZT_MATMUL_BF16 || !n || !dw || G <= 0 || C <= 0 || OC <= 0) return;
    const size_t wn = (size_t)OC * C;
    if (tmp_n < wn) return;
    const int cap = tmp_n / wn < 256 ? (int)(tmp_n / wn) : 256;
    double fl = 0, by = 0, ab = 0;
    int q = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        fl += 2 * D(n[g]) * D(OC) * D(C);
        by += (D(n[g]) * D(OC) + D(n[g]) * D(C) + D(wn)) * H;
        ab += D(wn) * (H + (dw_beta1(dw + (size_t)g * wn) ? 2 * F : F));
        if (++q == cap) {
            rec(K_GROUPED_DW_PTRS, 0, 3 * D(q) * sizeof(void *));
            rec(K_GEMM_GROUPED_DW, fl, by);
            rec(K_DW_ADD16, 0, ab);
            fl = by = ab = 0, q = 0;
        }
    }
    if (q) {
        rec(K_GROUPED_DW_PTRS, 0, 3 * D(q) * sizeof(void *));
        rec(K_GEMM_GROUPED_DW, fl, by);
        rec(K_DW_ADD16, 0, ab);
    }
}
static void c_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n) {
    call(ZT_CE_gelu_fwd16);
    if (g_inner) g_inner->gelu_fwd16(out16, in16, tmp, n);
    if (n) rec(K_GELU_FWD16, 9 * D(n), 2 * D(n) * H);
}
static void c_swiglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                           int H_) {
    call(ZT_CE_swiglu_fwd16);
    if (g_inner) g_inner->swiglu_fwd16(out16, gu16, tmp, tmp2, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_FWD16, 5 * D(N) * H_, 3 * D(N) * H_ * H);
}
static void c_geglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                          int H_) {
    call(ZT_CE_geglu_fwd16);
    if (g_inner) g_inner->geglu_fwd16(out16, gu16, tmp, tmp2, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_FWD16, 10 * D(N) * H_, 3 * D(N) * H_ * H);
}
/* (the fp32 input read once (4 bytes), its rounding and the activation
 * written (2 + 2 / 2 + 1 an input element); flops: the 16-bit entry's) */
static void c_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n) {
    call(ZT_CE_gelu_fwd16r);
    if (g_inner) g_inner->gelu_fwd16r(out16, in16, in, tmp, n);
    if (n) rec(K_GELU_FWD16R, 9 * D(n), D(n) * (F + 2 * H));
}
/* matmul_gelu_fwd_o16 (cuda_matmul.cu, bf16 mode): with a bias, both
 * 16-byte aligned and the aux ld (OC) a multiple of 8, one cuBLASLt GEMM
 * with GELU_AUX_BIAS, its D and aux in bf16 (2 N OC h written, 9 N OC
 * FLOPs of the GELU, the bias read); else matmul_fwd into tmp and
 * k_gelu_fwd16p (9 N OC FLOPs; N OC f read, 2 N OC h written).  (fp32
 * mode: cuda records an error and computes nothing.) */
static void c_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                  const uint16_t *inp16, const float *w, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    call(ZT_CE_matmul_gelu_fwd_o16);
    if (g_inner) g_inner->matmul_gelu_fwd_o16(out16, pre16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    if (N <= 0 || OC <= 0 || g_mode != ZT_MATMUL_BF16) return;
    const void *ww = w16_of(w16), *xx = inp16 ? x16_of(inp16) : NULL;
    const double nm = D(N) * D(OC);
    if (C > 0 && bias && gelu_epi_ok(pre16, OC, bias)) {
        if (!(g_whatif & ZT_COUNT_WHATIF_BF16_OPERANDS)) {
            if (!ww) rec(K_ROUND_BF16, 0, D(OC) * D(C) * (F + H));
            else if ((uintptr_t)ww & 255) rec(K_MEMCPY, 0, D(OC) * D(C) * 2 * H);
            if (!xx) rec(K_ROUND_BF16, 0, D(N) * D(C) * (F + H));
            else if ((uintptr_t)xx & 255) rec(K_MEMCPY, 0, D(N) * D(C) * 2 * H);
        }
        rec(K_GEMM_BF16, 2 * D(OC) * D(N) * D(C) + 9 * nm,
            (D(OC) * D(C) + D(C) * D(N)) * H + 2 * nm * H + D(OC) * F);
        return;
    }
    mm_fwd(N, C, OC, bias, ww, xx);
    rec(K_GELU_FWD16P, 9 * nm, nm * (F + 2 * H));
}
static void c_swiglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N,
                            int H_) {
    call(ZT_CE_swiglu_fwd16r);
    if (g_inner) g_inner->swiglu_fwd16r(out16, gu16, gu, tmp2, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_FWD16R, 5 * D(N) * H_, D(N) * H_ * (2 * F + 3 * H));
}
static void c_geglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N,
                           int H_) {
    call(ZT_CE_geglu_fwd16r);
    if (g_inner) g_inner->geglu_fwd16r(out16, gu16, gu, tmp2, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_FWD16R, 10 * D(N) * H_, D(N) * H_ * (2 * F + 3 * H));
}
static void c_swiglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H_) {
    call(ZT_CE_swiglu_bwd16);
    if (g_inner) g_inner->swiglu_bwd16(dgu, dout, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_BWD16, 10 * D(N) * H_, D(N) * H_ * (2 * H + 3 * F));
}
static void c_geglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H_) {
    call(ZT_CE_geglu_bwd16);
    if (g_inner) g_inner->geglu_bwd16(dgu, dout, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_BWD16, 18 * D(N) * H_, D(N) * H_ * (2 * H + 3 * F));
}

/* The bf16-gradient entries (backend.h matmul_bwd_d16 ...).  The GEMM
 * entries: their fp32 entries' counts with dout arriving in bf16 (no
 * k_round_bf16 of it; copied once when not 256-byte aligned).  The
 * producers: their fp32 kernels, each writing the bf16 copy as well
 * (N C h / 2 N H h more bytes written; swiglu / geglu _bwd_d16 with dgu
 * NULL: the bf16 copy only, 2 N H f fewer). */
static void c_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd_d16);
    if (g_inner)
        g_inner->matmul_bwd_d16(dinp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    /* (dout NULL: dbias from dout16, k_colsum16_part) */
    mm_bwd_o(dinp, dw, dout ? dbias : NULL, N, C, OC, w16_of(w16), x16_of(inp16), dout16);
    if (dbias && !dout && N > 0) colsum16(N, OC);
}
static void c_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *dout16, const float *inp,
                                   const uint16_t *inp16, const float *pre, const float *w,
                                   const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_dgelu_bwd_d16);
    if (g_inner)
        g_inner->matmul_dgelu_bwd_d16(dpre, dpre_bias, dw, dbias, dout, dout16, inp, inp16, pre, w,
                                      w16, N, C, OC);
    mm_dgelu_bwd_o(dpre_bias, dw, dbias, pre, N, C, OC, w16_of(w16), x16_of(inp16), dout16, 0);
}
/* matmul_bwd_o16: matmul_bwd_d16's counts with the input gradient's D in
 * bf16 (N C h written for N C f) */
static void c_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_bwd_o16);
    if (g_inner) g_inner->matmul_bwd_o16(dinp16, tmp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    if (N <= 0) return;
    if (C <= 0 || OC <= 0) {   /* (no GEMM: matmul_bwd_d16's into tmp, then k_to_bf16) */
        mm_bwd_o(tmp, dw, dout ? dbias : NULL, N, C, OC, w16_of(w16), x16_of(inp16), dout16);
        if (dbias && !dout) colsum16(N, OC);
        if (C > 0) rec(K_TO_BF16, 0, D(N) * D(C) * (F + H));
        return;
    }
    const int d16 = dout16_in(dout16, N, C, OC, 1);
    gemm_exo(0, 0, C, N, OC, C, OC, 0, NULL, w16_of(w16), d16 ? D16 : NULL, 1);
    if (dw) gemm_ex(0, 1, C, OC, N, C, OC, dw_beta1(dw), NULL, x16_of(inp16), d16 ? D16 : NULL);
    if (dbias && dout) colsum(N, OC);
    else if (dbias) colsum16(N, OC);
}
/* matmul_dgelu_bwd_o16: matmul_dgelu_bwd_d16's counts with the epilogue's
 * D and aux in bf16 (2 N C h for 2 N C f), and no k_from_bf16 of pre */
static void c_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                   float *dbias, const float *dout, const uint16_t *dout16,
                                   const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    call(ZT_CE_matmul_dgelu_bwd_o16);
    if (g_inner)
        g_inner->matmul_dgelu_bwd_o16(dpre16, tmp, dpre_bias, dw, dbias, dout, dout16, inp, inp16,
                                      pre16, w, w16, N, C, OC);
    mm_dgelu_bwd_o(dpre_bias, dw, dbias, pre16, N, C, OC, w16_of(w16), x16_of(inp16), dout16, 1);
}
static void c_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                              const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C) {
    call(ZT_CE_layernorm_bwd16);
    if (g_inner) g_inner->layernorm_bwd16(dinp, dinp16, dw, db, dout, inp, w, mean, rstd, N, C);
    layernorm_bwd_counts(N, C, 1, 0, 0);
}
/* layernorm_bwd16d: k_layernorm_bwd reading dout16 (or dout), with the
 * column sums of dinp (dsum) in its column pass */
static void c_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                               const float *dout, const uint16_t *dout16, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C) {
    call(ZT_CE_layernorm_bwd16d);
    if (g_inner)
        g_inner->layernorm_bwd16d(dinp, dinp16, dw, db, dsum, dout, dout16, inp, w, mean, rstd, N,
                                  C);
    layernorm_bwd_counts(N, C, dinp16 != NULL, dout16 != NULL, dsum != NULL);
}
static void c_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                            const float *inp, const float *w, const float *rstd, int N, int C) {
    call(ZT_CE_rmsnorm_bwd16);
    if (g_inner) g_inner->rmsnorm_bwd16(dinp, dinp16, dw, dout, inp, w, rstd, N, C);
    rmsnorm_bwd_counts(N, C, 1, 0);
}
/* rmsnorm_bwd16d: k_rmsnorm_bwd reading dout16 (dinp16 NULL: no bf16 copy
 * written) */
static void c_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                             const float *inp, const float *w, const float *rstd, int N, int C) {
    call(ZT_CE_rmsnorm_bwd16d);
    if (g_inner) g_inner->rmsnorm_bwd16d(dinp, dinp16, dw, dout16, inp, w, rstd, N, C);
    rmsnorm_bwd_counts(N, C, dinp16 != NULL, 1);
}
static void c_swiglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                             int N, int H_) {
    call(ZT_CE_swiglu_bwd_d16);
    if (g_inner) g_inner->swiglu_bwd_d16(dgu, dgu16, dout, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_BWD16, 10 * D(N) * H_, D(N) * H_ * (4 * H + (dgu ? 3 : 1) * F));
}
static void c_geglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                            int N, int H_) {
    call(ZT_CE_geglu_bwd_d16);
    if (g_inner) g_inner->geglu_bwd_d16(dgu, dgu16, dout, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_BWD16, 18 * D(N) * H_, D(N) * H_ * (4 * H + (dgu ? 3 : 1) * F));
}
/* swiglu_bwd_dd16 / geglu_bwd_dd16: the same kernels reading dout in bf16
 * (2 B an element for _bwd_d16's 4) */
static void c_swiglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                              const uint16_t *gu16, int N, int H_) {
    call(ZT_CE_swiglu_bwd_dd16);
    if (g_inner) g_inner->swiglu_bwd_dd16(dgu, dgu16, dout16, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_SWIGLU_BWD16, 10 * D(N) * H_, D(N) * H_ * (5 * H + (dgu ? 2 : 0) * F));
}
static void c_geglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                             const uint16_t *gu16, int N, int H_) {
    call(ZT_CE_geglu_bwd_dd16);
    if (g_inner) g_inner->geglu_bwd_dd16(dgu, dgu16, dout16, gu16, N, H_);
    if (N > 0 && H_ > 0) rec(K_GEGLU_BWD16, 18 * D(N) * H_, D(N) * H_ * (5 * H + (dgu ? 2 : 0) * F));
}

/* k_softcap_fwd: 3 FLOPs, 2 f per element; _bwd: 4 FLOPs, 3 f */
static void c_softcap_fwd(float *y, const float *x, size_t n, float cap) {
    call(ZT_CE_softcap_fwd);
    if (g_inner) g_inner->softcap_fwd(y, x, n, cap);
    if (n) rec(K_SOFTCAP_FWD, 3 * D(n), 2 * D(n) * F);
}
static void c_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
    call(ZT_CE_softcap_bwd);
    if (g_inner) g_inner->softcap_bwd(dx, dy, y, n, cap);
    if (n) rec(K_SOFTCAP_BWD, 4 * D(n), 3 * D(n) * F);
}

/* k_gelu_fwd: 9 FLOPs, 2 f per element; k_gelu_bwd: 15 FLOPs, 3 f */
static void c_gelu_fwd(float *out, const float *inp, size_t n) {
    call(ZT_CE_gelu_fwd);
    if (g_inner) g_inner->gelu_fwd(out, inp, n);
    if (n) rec(K_GELU_FWD, 9 * D(n), 2 * D(n) * F);
}
static void c_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    call(ZT_CE_gelu_bwd);
    if (g_inner) g_inner->gelu_bwd(dinp, inp, dout, n);
    if (n) rec(K_GELU_BWD, 15 * D(n), 3 * D(n) * F);
}

/* k_add: 1 FLOP, 3 f per element */
static void c_add(float *out, const float *a, const float *b, size_t n) {
    call(ZT_CE_add);
    if (g_inner) g_inner->add(out, a, b, n);
    if (n) rec(K_ADD, D(n), 3 * D(n) * F);
}

/* ------------------------------------------------------------ cross-entropy */

/* k_xent_fwd, a block per row: the row of V logits read three times (max,
 * sum of exp, probabilities: 3 N V f) and the probabilities written
 * (N V f); targets N 4 and the logit of the target N f read, losses N f
 * written; 5 N V FLOPs.  What-if FUSED_XENT: one read of the logits and the
 * gradient written (2 N V f). */
static void c_xent_fwd(float *losses, float *probs, const float *logits, const int *targets, int N,
                       int V) {
    call(ZT_CE_xent_fwd);
    if (g_inner) g_inner->xent_fwd(losses, probs, logits, targets, N, V);
    if (N <= 0 || V <= 0) return;
    const double nv = D(N) * V, rows = D(N) * ((targets ? 8 : 0) + (losses ? F : 0));
    rec(K_XENT_FWD, 5 * nv, (g_whatif & ZT_COUNT_WHATIF_FUSED_XENT ? 2 : 4) * nv * F + rows);
}

/* k_xent_bwd: reads probs N V f and targets N 4 (if any), writes N V f; N V FLOPs.
 * What-if FUSED_XENT: nothing (done in the forward). */
static void c_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss, int N,
                       int V) {
    call(ZT_CE_xent_bwd);
    if (g_inner) g_inner->xent_bwd(dlogits, probs, targets, dloss, N, V);
    if (N <= 0 || V <= 0 || (g_whatif & ZT_COUNT_WHATIF_FUSED_XENT)) return;
    rec(K_XENT_BWD, D(N) * V, 2 * D(N) * V * F + (targets ? D(N) * 4 : 0));
}

/* k_xent_fused (the chunked LM head), a block per row in place: k_xent_fwd's
 * three reads of the row's V logits (3 N V f) and the gradient written over
 * them (N V f); targets N 4 and the target's logit N f read, losses N f
 * written (if any); k_xent_fwd's 5 N V FLOPs and k_xent_bwd's N V. */
static void c_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N, int V) {
    call(ZT_CE_xent_fused);
    if (g_inner) g_inner->xent_fused(losses, logits, targets, dloss, N, V);
    if (N <= 0 || V <= 0) return;
    const double nv = D(N) * V, rows = D(N) * ((targets ? 8 : 0) + (losses ? F : 0));
    rec(K_XENT_FUSED, 6 * nv, 4 * nv * F + rows);
}

/* The LM head's bf16 logits (cuda_nn.cu k_xent16, a block per row):
 * k_xent16_fwd reads the row's V bf16 logits once (the running max and
 * sum: N V h), targets N 4 and the target's logit N h, writes losses N f;
 * 4 N V FLOPs (compare, subtract, exp, add).  Nothing without losses.
 * k_xent16_fused: the same read, then the row read again and its bf16
 * gradient written over it (2 N V h), losses N f written (if any); 4 N V
 * + 4 N V FLOPs. */
static void c_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V) {
    call(ZT_CE_xent16_fwd);
    if (g_inner) g_inner->xent16_fwd(losses, logits16, targets, N, V);
    if (N <= 0 || V <= 0 || !losses) return;
    const double nv = D(N) * V, rows = D(N) * ((targets ? 4 + H : 0) + F);
    rec(K_XENT16_FWD, 4 * nv, nv * H + rows);
}
static void c_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                           int V) {
    call(ZT_CE_xent16_fused);
    if (g_inner) g_inner->xent16_fused(losses, logits16, targets, dloss, N, V);
    if (N <= 0 || V <= 0) return;
    const double nv = D(N) * V, rows = D(N) * ((targets ? 4 + H : 0) + (losses ? F : 0));
    rec(K_XENT16_FUSED, 8 * nv, 3 * nv * H + rows);
}
/* matmul_bwd_head16 (cuda_matmul.cu, bf16 mode; fp32 mode or a dout16 not
 * 256-byte aligned: an error, nothing launched): matmul_bwd's two GEMMs
 * with dout16 their bf16 operand as it is (no k_round_bf16 of dout), the
 * weight w16 as it is (w: rounded), for dw's inp16 as it is (inp: rounded) */
static void c_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                                const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                                int C, int OC) {
    call(ZT_CE_matmul_bwd_head16);
    if (g_inner) g_inner->matmul_bwd_head16(dinp, dw, dout16, inp, inp16, w, w16, N, C, OC);
    if (g_mode != ZT_MATMUL_BF16 || ((uintptr_t)dout16 & 255) || N <= 0 || OC <= 0 || C <= 0)
        return;
    if (dinp) gemm_ex(0, 0, C, N, OC, C, OC, 0, NULL, w16_of(w16), D16);
    if (dw) gemm_ex(0, 1, C, OC, N, C, OC, dw_beta1(dw), NULL, inp16 ? x16_of(inp16) : NULL, D16);
}

/* ------------------------------------------------------------ optimizer, reductions */

/* k_adamw: reads p, grad, m, v and writes p, m, v: 7 f per element;
 * 14 FLOPs */
static void c_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr, float b1,
                    float b2, float eps, float wd, float bc1, float bc2, float grad_scale) {
    call(ZT_CE_adamw);
    if (g_inner) g_inner->adamw(p, grad, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, grad_scale);
    if (n) rec(K_ADAMW, 14 * D(n), 7 * D(n) * F);
}

/* reduce_d / cuda_nonfinite: the kernel reads n f and writes one partial
 * per block (nb 8), the host copies the partials back (D2H, a sync) */
static void reduce_counts(int k, double flops_per, size_t n) {
    if (!n) return;
    const double nb = zt_cuda_ws_red_blocks(n);
    rec(k, flops_per * D(n), D(n) * F + nb * 8);
    rec(K_D2H, 0, nb * 8);
    sync1();
}
static double c_sumsq(const float *x, size_t n) {
    call(ZT_CE_sumsq);
    reduce_counts(K_SUMSQ, 2, n);
    return g_inner ? g_inner->sumsq(x, n) : 0.0;
}
static double c_sum(const float *x, size_t n) {
    call(ZT_CE_sum);
    reduce_counts(K_SUM, 1, n);
    return g_inner ? g_inner->sum(x, n) : 0.0;
}
static size_t c_nonfinite(const float *x, size_t n) {
    call(ZT_CE_nonfinite);
    reduce_counts(K_NONFINITE, 1, n);
    return g_inner ? g_inner->nonfinite(x, n) : 0;
}

/* The reductions into device memory (cuda_backend.cu's reduce_ranges):
 * the non-empty ranges in launches of at most ZT_CUDA_RED_RANGES; per
 * launch the partials kernel (sum, nonfinite: n FLOPs, sumsq 2 n; reads
 * n f, writes nb 8 per range, nb = zt_cuda_ws_red_blocks(n)) and
 * k_finish_ranges (NB + nr FLOPs over the launch's NB partials: reads
 * NB 8, writes 8, and reads 8 when it adds to *dst: every launch of sum_to,
 * the later launches of sumsq_to / nonfinite_to); no range at all: the
 * finish alone.  No transfer, no sync. */
static void ranges_counts(int k, double flops_per, const size_t *n, int nr, int acc) {
    double fl = 0, by = 0, nb = 0;
    int m = 0, launched = 0;
    for (int r = 0; r <= nr; r++) {
        const int last = r == nr;
        if (!last && !n[r]) continue;
        if ((last && (m > 0 || !launched)) || (!last && m == ZT_CUDA_RED_RANGES)) {
            if (m > 0) rec(k, fl, by + nb * 8);
            rec(K_FINISH_RANGES, nb + m, nb * 8 + 8 + (acc || launched ? 8 : 0));
            launched = 1;
            fl = by = nb = 0;
            m = 0;
        }
        if (last) break;
        const double b = zt_cuda_ws_red_blocks(n[r]);
        fl += flops_per * D(n[r]);
        by += D(n[r]) * F;
        nb += b;
        m++;
    }
}
static void c_sum_to(double *dst, const float *x, size_t n) {
    call(ZT_CE_sum_to);
    if (n) ranges_counts(K_SUM_RANGES, 1, &n, 1, 1);
    if (g_inner) g_inner->sum_to(dst, x, n);
}
static void c_sumsq_to(double *dst, const float *const *x, const size_t *n, int nr) {
    call(ZT_CE_sumsq_to);
    ranges_counts(K_SUMSQ_RANGES, 2, n, nr, 0);
    if (g_inner) g_inner->sumsq_to(dst, x, n, nr);
}
static void c_nonfinite_to(uint64_t *dst, const float *const *x, const size_t *n, int nr) {
    call(ZT_CE_nonfinite_to);
    ranges_counts(K_NONFINITE_RANGES, 1, n, nr, 0);
    if (g_inner) g_inner->nonfinite_to(dst, x, n, nr);
}

/* k_adamw_multi, one launch per run of at most ZT_CUDA_ADAMW_SEGS
 * contiguous non-empty segments (cuda_adamw_multi's rule): k_adamw's 14
 * FLOPs and 7 f per element, the 16-bit copy h written (with hprec), the
 * gate's 32 bytes read */
static void c_adamw_multi(float *p, const float *grad, float *m, float *v, uint16_t *p16, int hprec,
                          unsigned logical, const zt_adamw_seg *seg, int nseg, const zt_adamw_hyper *h) {
    call(ZT_CE_adamw_multi);
    const double per = 7 * F + (hprec && p16 ? H : 0), gate = h->gate ? 32 : 0;
    int i = 0;
    while (i < nseg) {
        if (!seg[i].n) { i++; continue; }
        int ns = 0;
        size_t start = seg[i].start, end = start;
        while (i < nseg && ns < ZT_CUDA_ADAMW_SEGS && (!seg[i].n || seg[i].start == end)) {
            if (seg[i].n) {
                ns++;
                end = seg[i].start + seg[i].n;
            }
            i++;
        }
        const double n = D(end - start);
        rec(K_ADAMW_MULTI, 14 * n, per * n + gate);
    }
    if (g_inner) g_inner->adamw_multi(p, grad, m, v, p16, hprec, logical, seg, nseg, h);
}

/* k_scale: 1 FLOP, 2 f per element; k_dropout: 3 FLOPs (the draw not
 * counted), 2 f */
static void c_scale(float *x, size_t n, float s) {
    call(ZT_CE_scale);
    if (g_inner) g_inner->scale(x, n, s);
    if (n) rec(K_SCALE, D(n), 2 * D(n) * F);
}
static void c_dropout(float *y, const float *x, size_t rows, size_t C, uint64_t key, uint64_t row0,
                      float p) {
    call(ZT_CE_dropout);
    if (g_inner) g_inner->dropout(y, x, rows, C, key, row0, p);
    if (rows && C) rec(K_DROPOUT, 3 * D(rows) * D(C), 2 * D(rows) * D(C) * F);
}

/* conversions: f + h bytes per element */
static void c_to_bf16(uint16_t *out, const float *in, size_t n) {
    call(ZT_CE_to_bf16);
    if (g_inner) g_inner->to_bf16(out, in, n);
    if (n) rec(K_TO_BF16, 0, D(n) * (F + H));
}
static void c_from_bf16(float *out, const uint16_t *in, size_t n) {
    call(ZT_CE_from_bf16);
    if (g_inner) g_inner->from_bf16(out, in, n);
    if (n) rec(K_FROM_BF16, 0, D(n) * (F + H));
}
/* from_bf16_runs (cuda_backend.cu): a k_from_bf16_runs launch per
 * ZT_CUDA_WIDEN_RUNS non-empty runs, f + h bytes an element */
static void c_from_bf16_runs(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr) {
    call(ZT_CE_from_bf16_runs);
    if (g_inner) g_inner->from_bf16_runs(out, in, off, n, nr);
    int k = 0;
    double el = 0;
    for (int r = 0; r < nr; ++r) {
        if (!n[r]) continue;
        el += D(n[r]);
        if (++k == ZT_CUDA_WIDEN_RUNS) {
            rec(K_FROM_BF16_RUNS, 0, el * (F + H));
            k = 0;
            el = 0;
        }
    }
    if (k) rec(K_FROM_BF16_RUNS, 0, el * (F + H));
}
static void c_to_f16(uint16_t *out, const float *in, size_t n) {
    call(ZT_CE_to_f16);
    if (g_inner) g_inner->to_f16(out, in, n);
    if (n) rec(K_TO_F16, 0, D(n) * (F + H));
}
static void c_from_f16(float *out, const uint16_t *in, size_t n) {
    call(ZT_CE_from_f16);
    if (g_inner) g_inner->from_f16(out, in, n);
    if (n) rec(K_FROM_F16, 0, D(n) * (F + H));
}

/* k_nf4_dequant: reads the codes ceil(n/2) and the block scales (absmax
 * ceil(n/64) f, or qabsmax ceil(n/64) + absmax2 ceil(n/16384) f), writes
 * n f (or n h); 2 FLOPs per element (3 with double quantization) */
static void c_nf4_dequant(void *out, int out_bf16, const uint8_t *codes, const float *absmax,
                          const uint8_t *qabsmax, const float *absmax2, float offset, size_t n) {
    call(ZT_CE_nf4_dequant);
    if (g_inner) g_inner->nf4_dequant(out, out_bf16, codes, absmax, qabsmax, absmax2, offset, n);
    if (!n) return;
    const double nb = D((n + 63) / 64);
    const double sc = qabsmax ? nb + D((n + 16383) / 16384) * F : nb * F;
    rec(K_NF4, D(n) * (qabsmax ? 3 : 2), D((n + 1) / 2) + sc + D(n) * (out_bf16 ? H : F));
}

/* ------------------------------------------------------------ Mixture of Experts
 * cuda_moe.cu's kernels, one launch an entry but moe_permute's three; none
 * on an empty shape (the same early returns).  i = 4 bytes (an int).     */

/* k_moe_route_fwd, a thread a token: reads logits N E f, writes probs
 * N E f (re-read by the top-k from cache), idx N K i and wts N K f.
 * FLOPs per token: the softmax 5 E (max, subtract, exp, sum, divide), the
 * top-k K E comparisons and the K weights' sum, the renormalisation K
 * (with norm) */
static void c_moe_route_fwd(float *wts, int *idx, float *probs, const float *logits, int N, int E,
                            int K, int norm) {
    call(ZT_CE_moe_route_fwd);
    if (g_inner) g_inner->moe_route_fwd(wts, idx, probs, logits, N, E, K, norm);
    else if (N > 0 && K > 0) known_forget(idx, (size_t)N * (size_t)K * sizeof(int));
    if (N <= 0 || E <= 0 || K <= 0) return;
    rec(K_MOE_ROUTE_FWD, D(N) * (5 * D(E) + D(K) * E + K + (norm ? K : 0)),
        2 * D(N) * E * F + D(N) * K * (F + 4));
}
/* k_moe_route_bwd, a thread a token: reads probs N E f, dwts N K f, idx
 * N K i, dprobs E f (when given; every thread the same E, once), writes
 * dlogits N E f (zeroed, set and re-read in the thread: written once).
 * FLOPs per token: 3 K (S, dot), 3 K with norm (the top-k's gradient),
 * E (dprobs), 4 E (the softmax's: the dot and the products) */
static void c_moe_route_bwd(float *dlogits, const float *dwts, const float *dprobs,
                            const float *probs, const int *idx, int N, int E, int K, int norm) {
    call(ZT_CE_moe_route_bwd);
    if (g_inner) g_inner->moe_route_bwd(dlogits, dwts, dprobs, probs, idx, N, E, K, norm);
    if (N <= 0 || E <= 0 || K <= 0) return;
    rec(K_MOE_ROUTE_BWD, D(N) * ((norm ? 6 : 3) * D(K) + (dprobs ? E : 0) + 4 * D(E)),
        2 * D(N) * E * F + D(N) * K * (F + 4) + (dprobs ? D(E) * F : 0));
}
/* k_rows_gather, grid-stride over n C: reads rows n i and w n f (when
 * given), the n gathered rows of x n C f, writes out n C f; FLOPs n C with
 * w (the scaling), else 0 */
static void c_rows_gather(float *out, const float *x, const int *rows, const float *w, int n, int C) {
    call(ZT_CE_rows_gather);
    if (g_inner) g_inner->rows_gather(out, x, rows, w, n, C);
    if (n <= 0 || C <= 0) return;
    rec(K_ROWS_GATHER, w ? D(n) * C : 0,
        2 * D(n) * C * F + (rows ? D(n) * 4 : 0) + (w ? D(n) * F : 0));
}
/* k_rows_gather_o16, grid-stride over n C: reads rows n i and w n f (when
 * given), the n gathered rows of x n C f, writes out16 n C h; FLOPs n C
 * with w (the scaling), else 0 */
static void c_rows_gather_o16(uint16_t *out16, const float *x, const int *rows, const float *w, int n, int C) {
    call(ZT_CE_rows_gather_o16);
    if (g_inner) g_inner->rows_gather_o16(out16, x, rows, w, n, C);
    if (n <= 0 || C <= 0) return;
    rec(K_ROWS_GATHER_O16, w ? D(n) * C : 0,
        D(n) * C * (F + H) + (rows ? D(n) * 4 : 0) + (w ? D(n) * F : 0));
}
/* k_rows_gather16, grid-stride over n C: reads rows n i (when given) and
 * the n gathered rows of x n C h, writes out n C h; no FLOPs */
static void c_rows_gather16(uint16_t *out, const uint16_t *x, const int *rows, int n, int C) {
    call(ZT_CE_rows_gather16);
    if (g_inner) g_inner->rows_gather16(out, x, rows, n, C);
    if (n <= 0 || C <= 0) return;
    rec(K_ROWS_GATHER16, 0, 2 * D(n) * C * H + (rows ? D(n) * 4 : 0));
}
/* k_rows_scatter, a thread a column (C threads), the n rows in order:
 * reads rows n i, w n f (when given), x n C f, and y's n row updates read
 * and written each time (rows repeat: each a read-modify-write of global
 * memory, 2 n C f); FLOPs 2 n C with w, else n C.  (Only C threads: its
 * serial loop over n makes it latency-bound where n >> C / 128 blocks;
 * the roofline of its class does not see that.) */
static void c_rows_scatter(float *y, const float *x, const int *rows, const float *w, int n, int C) {
    call(ZT_CE_rows_scatter);
    if (g_inner) g_inner->rows_scatter(y, x, rows, w, n, C);
    if (n <= 0 || C <= 0) return;
    rec(K_ROWS_SCATTER, (w ? 2 : 1) * D(n) * C,
        3 * D(n) * C * F + (rows ? D(n) * 4 : 0) + (w ? D(n) * F : 0));
}
/* k_rows_dot, a thread a row: reads rows n i, a's n rows n C f, b n C f,
 * writes out n f; FLOPs 2 n C (launched for C = 0 too: zeros) */
static void c_rows_dot(float *out, const float *a, const int *rows, const float *b, int n, int C) {
    call(ZT_CE_rows_dot);
    if (g_inner) g_inner->rows_dot(out, a, rows, b, n, C);
    if (n <= 0) return;
    rec(K_ROWS_DOT, 2 * D(n) * (C > 0 ? C : 0),
        2 * D(n) * (C > 0 ? C : 0) * F + (rows ? D(n) * 4 : 0) + D(n) * F);
}
/* k_rows_dot16, a thread a row: reads a n C f, b16 n C h, w n f (when
 * given), writes out n f and (with w) a's scaled rows n C f; FLOPs 2 n C,
 * + n C with w (launched for C = 0 too: zeros) */
static void c_rows_dot16(float *out, float *a, const uint16_t *b16, const float *w, int n, int C) {
    call(ZT_CE_rows_dot16);
    if (g_inner) g_inner->rows_dot16(out, a, b16, w, n, C);
    if (n <= 0) return;
    const double nc = D(n) * (C > 0 ? C : 0);
    rec(K_ROWS_DOT16, (w ? 3 : 2) * nc, nc * (F + 2) + (w ? nc * F + D(n) * F : 0) + D(n) * F);
}
/* k_rows_dot16h, a thread a row: reads a16 n C h, b16 n C h, w n f (when
 * given), writes out n f and (with w) a16's scaled rows n C h; FLOPs 2 n
 * C, + n C with w (launched for C = 0 too: zeros) */
static void c_rows_dot16h(float *out, uint16_t *a16, const uint16_t *b16, const float *w, int n, int C) {
    call(ZT_CE_rows_dot16h);
    if (g_inner) g_inner->rows_dot16h(out, a16, b16, w, n, C);
    if (n <= 0) return;
    const double nc = D(n) * (C > 0 ? C : 0);
    rec(K_ROWS_DOT16H, (w ? 3 : 2) * nc, nc * 4 + (w ? nc * 2 + D(n) * F : 0) + D(n) * F);
}
/* k_rows_scatter16, rows_scatter's (a thread a column, the n rows in
 * order) with x in bf16: reads rows n i, w n f (when given), x16 n C h,
 * y's n row updates read and written 2 n C f; FLOPs 2 n C with w, else
 * n C */
static void c_rows_scatter16(float *y, const uint16_t *x16, const int *rows, const float *w, int n,
                             int C) {
    call(ZT_CE_rows_scatter16);
    if (g_inner) g_inner->rows_scatter16(y, x16, rows, w, n, C);
    if (n <= 0 || C <= 0) return;
    rec(K_ROWS_SCATTER16, (w ? 2 : 1) * D(n) * C,
        D(n) * C * (2 * F + 2) + (rows ? D(n) * 4 : 0) + (w ? D(n) * F : 0));
}
/* rows_sum16 (cuda_moe.cu): pos set to -1 (a memset of N K i), k_moe_inverse
 * (a thread a row: perm n i read, pos n i written, scattered), k_rows_sum16
 * (a thread an element of y, coalesced over C: y read and written 2 N C f,
 * each token's K positions K i (a warp's broadcast: N K i once), x16's n
 * rows n C h, w n f when given; FLOPs 2 n C with w, else n C) */
static void c_rows_sum16(float *y, const uint16_t *x16, const int *perm, int *pos, const float *w, int n, int N,
                         int K, int C) {
    call(ZT_CE_rows_sum16);
    if (g_inner) g_inner->rows_sum16(y, x16, perm, pos, w, n, N, K, C);
    if (n <= 0 || N <= 0 || K <= 0 || C <= 0) return;
    rec(K_MEMSET, 0, D(N) * K * 4);
    rec(K_MOE_INVERSE, 0, 2 * D(n) * 4);
    rec(K_ROWS_SUM16, (w ? 2 : 1) * D(n) * C, 2 * D(N) * C * F + D(N) * K * 4 + D(n) * C * 2 + (w ? D(n) * F : 0));
}
/* moe_permute, NK = N K slots: k_moe_count (a block an expert, each over
 * idx: read once, NK i, from cache after the first; writes off E + 1 i;
 * FLOPs E NK compare-adds), k_moe_offsets (one thread: reads E + 1,
 * writes E i; E adds), and when NK > 0 k_moe_fill (a block an expert:
 * reads off E i and idx NK i, writes perm and rows of the M counted slots,
 * 2 M i (M = off[E]: NK unless an expert is outside [0, E)); FLOPs E NK
 * flags and E ceil(NK / 128) 128 log2(128) scan adds).
 * The bare table (no values) knows idx only where to_device wrote it (the
 * test hook's forced routing, moe.c): off from it, the same stable counts;
 * else the balanced routing, expert e NK / E rows (and one more for the
 * first NK mod E).  off is remembered (known_set) for route_groups' read. */
static void c_moe_permute(int *off, int *perm, int *rows, const int *idx, int N, int K, int E) {
    call(ZT_CE_moe_permute);
    if (g_inner) g_inner->moe_permute(off, perm, rows, idx, N, K, E);
    if (E <= 0) return;
    const long NK = (long)N * K;
    long M = NK > 0 ? NK : 0;
    if (g_inner && NK > 0) {
        int m = 0;   /* (the counted rows: the inner's result, read uncounted) */
        if (g_inner->host_memory) m = off[E];
        else g_inner->to_host(&m, off + E, sizeof m);
        M = m;
    } else if (!g_inner) {
        int *o = calloc((size_t)E + 1, sizeof *o), *ix = NK > 0 ? malloc((size_t)NK * sizeof *ix) : NULL;
        if (o) {
            if (ix && known_get(ix, idx, (size_t)NK * sizeof *ix)) {
                for (long i = 0; i < NK; i++)
                    if (ix[i] >= 0 && ix[i] < E) o[ix[i] + 1]++;
            } else {
                for (int e = 0; e < E; e++) o[e + 1] = (int)(M / E + (e < M % E));
            }
            for (int e = 0; e < E; e++) o[e + 1] += o[e];
            M = o[E];
            known_set(off, o, ((size_t)E + 1) * sizeof *o);
        }
        free(o);
        free(ix);
    }
    rec(K_MOE_COUNT, D(E) * (NK > 0 ? NK : 0), (NK > 0 ? D(NK) * 4 : 0) + (D(E) + 1) * 4);
    rec(K_MOE_OFFSETS, D(E), (2 * D(E) + 1) * 4);
    if (NK <= 0) return;
    rec(K_MOE_FILL, D(E) * NK + D(E) * (D((NK + 127) / 128) * 128 * 7),
        D(E) * 4 + D(NK) * 4 + 2 * D(M) * 4);
}
/* k_moe_regroup, a block a piece (P El): reads cnt P El i (each block its
 * prefix: from cache), writes perm and inv R i each (R = sum cnt: read
 * uncounted from the inner table, or known to the bare one; else 0);
 * FLOPs: the offsets, block b b adds by rank and P El by expert: n (n - 1)
 * / 2 + n^2 (n = P El) */
static void c_moe_regroup(int *perm, int *inv, const int *cnt, int P, int El) {
    call(ZT_CE_moe_regroup);
    if (g_inner) g_inner->moe_regroup(perm, inv, cnt, P, El);
    if (P <= 0 || El <= 0) return;
    const size_t n = (size_t)P * (size_t)El;
    int *c = malloc(n * sizeof *c);
    double R = 0;
    if (c) {
        int ok = 1;
        if (!g_inner) ok = known_get(c, cnt, n * sizeof *c);
        else if (g_inner->host_memory) memcpy(c, cnt, n * sizeof *c);
        else g_inner->to_host(c, cnt, n * sizeof *c);
        for (size_t i = 0; ok && i < n; i++) R += c[i];
        free(c);
    }
    rec(K_MOE_REGROUP, D(n) * (D(n) - 1) / 2 + D(n) * D(n), D(n) * 4 + 2 * R * 4);
}
/* k_sigmoid_fwd: 4 FLOPs (negate, exp, add, divide), 2 f per element;
 * k_sigmoid_bwd: 3 FLOPs, 3 f */
static void c_sigmoid_fwd(float *y, const float *x, size_t n) {
    call(ZT_CE_sigmoid_fwd);
    if (g_inner) g_inner->sigmoid_fwd(y, x, n);
    if (n) rec(K_SIGMOID_FWD, 4 * D(n), 2 * D(n) * F);
}
static void c_sigmoid_bwd(float *dx, const float *dy, const float *y, size_t n) {
    call(ZT_CE_sigmoid_bwd);
    if (g_inner) g_inner->sigmoid_bwd(dx, dy, y, n);
    if (n) rec(K_SIGMOID_BWD, 3 * D(n), 3 * D(n) * F);
}

/* ------------------------------------------------------------ the tables */

static zt_backend g_count, g_over;

static void fill(zt_backend *t, const char *name, int host_memory, const zt_backend *inner) {
    memset(t, 0, sizeof *t);
    t->name = name;
    t->set_threads = c_set_threads;
    t->error = c_error;
    t->synchronize = c_synchronize;
    t->alloc = c_alloc;
    t->alloc_nz = c_alloc_nz;
    t->free = c_free;
    t->copy = c_copy;
    t->copy2d = c_copy2d;
    t->to_host = c_to_host;
    t->to_device = c_to_device;
    if (!inner || inner->to_host_async) {
        t->to_host_async = c_to_host_async;
        t->to_device_async = c_to_device_async;
        t->copy_wait = c_copy_wait;
        if (!inner || inner->copy_done) t->copy_done = c_copy_done;
    }
    t->zero = c_zero;
    t->device_memory = c_device_memory;
    t->mem_stats = c_mem_stats;
    t->encoder_fwd = c_encoder_fwd;
    t->encoder_fwd_w16 = c_encoder_fwd_w16;
    t->encoder_bwd = c_encoder_bwd;
    t->layernorm_fwd = c_layernorm_fwd;
    t->layernorm_bwd = c_layernorm_bwd;
    t->rmsnorm_fwd = c_rmsnorm_fwd;
    t->rmsnorm_bwd = c_rmsnorm_bwd;
    t->headnorm_fwd = c_headnorm_fwd;
    t->headnorm_bwd = c_headnorm_bwd;
    t->rope_fwd = c_rope_fwd;
    t->rope_bwd = c_rope_bwd;
    t->swiglu_fwd = c_swiglu_fwd;
    t->swiglu_bwd = c_swiglu_bwd;
    t->matmul_fwd = c_matmul_fwd;
    t->matmul_bwd = c_matmul_bwd;
    t->set_matmul_precision = c_set_matmul_precision;
    t->attention_fwd = c_attention_fwd;
    t->attention_bwd = c_attention_bwd;
    t->gqa_fwd = c_gqa_fwd;
    t->gqa_bwd = c_gqa_bwd;
    t->gqa_ext_fwd = c_gqa_ext_fwd;
    t->gqa_ext_bwd = c_gqa_ext_bwd;
    t->geglu_fwd = c_geglu_fwd;
    t->geglu_bwd = c_geglu_bwd;
    t->softcap_fwd = c_softcap_fwd;
    t->softcap_bwd = c_softcap_bwd;
    t->gelu_fwd = c_gelu_fwd;
    t->gelu_bwd = c_gelu_bwd;
    t->add = c_add;
    t->xent_fwd = c_xent_fwd;
    t->xent_bwd = c_xent_bwd;
    t->xent_fused = c_xent_fused;
    t->adamw = c_adamw;
    t->sumsq = c_sumsq;
    t->scale = c_scale;
    t->dropout = c_dropout;
    t->to_bf16 = c_to_bf16;
    t->from_bf16 = c_from_bf16;
    t->to_f16 = c_to_f16;
    t->from_f16 = c_from_f16;
    t->nonfinite = c_nonfinite;
    t->nf4_dequant = c_nf4_dequant;
    t->sum = c_sum;
    t->host_memory = host_memory;
    t->sum_to = c_sum_to;
    t->sumsq_to = c_sumsq_to;
    t->nonfinite_to = c_nonfinite_to;
    t->adamw_multi = c_adamw_multi;
    t->matmul_gelu_fwd = c_matmul_gelu_fwd;
    t->matmul_dgelu_bwd = c_matmul_dgelu_bwd;
    t->matmul_fwd_w16 = c_matmul_fwd_w16;
    t->matmul_bwd_w16 = c_matmul_bwd_w16;
    t->matmul_gelu_fwd_w16 = c_matmul_gelu_fwd_w16;
    t->matmul_dgelu_bwd_w16 = c_matmul_dgelu_bwd_w16;
    t->matmul_fwd_a16 = c_matmul_fwd_a16;
    t->matmul_bwd_a16 = c_matmul_bwd_a16;
    t->matmul_gelu_fwd_a16 = c_matmul_gelu_fwd_a16;
    t->matmul_dgelu_bwd_a16 = c_matmul_dgelu_bwd_a16;
    t->add_layernorm_fwd = c_add_layernorm_fwd;
    t->add_rmsnorm_fwd = c_add_rmsnorm_fwd;
    t->matmul_fwd_o16 = c_matmul_fwd_o16;
    t->gelu_fwd16 = c_gelu_fwd16;
    t->layernorm_fwd16 = c_layernorm_fwd16;
    t->rmsnorm_fwd16 = c_rmsnorm_fwd16;
    t->add_layernorm_fwd16 = c_add_layernorm_fwd16;
    t->add_rmsnorm_fwd16 = c_add_rmsnorm_fwd16;
    t->add_rmsnorm_fwd16b = c_add_rmsnorm_fwd16b;
    if (!inner || inner->add_layernorm_fwd16b) t->add_layernorm_fwd16b = c_add_layernorm_fwd16b;
    t->rope_fwd16 = c_rope_fwd16;
    t->qknorm_rope_fwd16 = c_qknorm_rope_fwd16;
    t->rope_bwd16 = c_rope_bwd16;
    t->xent16_fwd = c_xent16_fwd;
    t->xent16_fused = c_xent16_fused;
    t->matmul_bwd_head16 = c_matmul_bwd_head16;
    t->matmul_bwd_d16 = c_matmul_bwd_d16;
    t->matmul_dgelu_bwd_d16 = c_matmul_dgelu_bwd_d16;
    t->matmul_dgelu_bwd_o16 = c_matmul_dgelu_bwd_o16;
    t->att_do16 = c_att_do16;
    t->matmul_bwd_o16 = c_matmul_bwd_o16;
    t->gqa_ext_bwd16do = c_gqa_ext_bwd16do;
    t->layernorm_bwd16 = c_layernorm_bwd16;
    t->rmsnorm_bwd16 = c_rmsnorm_bwd16;
    t->rmsnorm_bwd16d = c_rmsnorm_bwd16d;
    if (!inner || inner->layernorm_bwd16d) t->layernorm_bwd16d = c_layernorm_bwd16d;
    t->swiglu_bwd_d16 = c_swiglu_bwd_d16;
    t->geglu_bwd_d16 = c_geglu_bwd_d16;
    t->swiglu_bwd_dd16 = c_swiglu_bwd_dd16;
    t->geglu_bwd_dd16 = c_geglu_bwd_dd16;
    t->swiglu_fwd16 = c_swiglu_fwd16;
    t->geglu_fwd16 = c_geglu_fwd16;
    if (!inner || inner->gelu_fwd16r) t->gelu_fwd16r = c_gelu_fwd16r;
    if (!inner || inner->matmul_gelu_fwd_o16) t->matmul_gelu_fwd_o16 = c_matmul_gelu_fwd_o16;
    if (!inner || inner->swiglu_fwd16r) t->swiglu_fwd16r = c_swiglu_fwd16r;
    if (!inner || inner->geglu_fwd16r) t->geglu_fwd16r = c_geglu_fwd16r;
    t->swiglu_bwd16 = c_swiglu_bwd16;
    t->geglu_bwd16 = c_geglu_bwd16;
    t->gqa_ext_fwd16 = c_gqa_ext_fwd16;
    t->gqa_ext_bwd16 = c_gqa_ext_bwd16;
    t->gqa_ext_fwd16o = c_gqa_ext_fwd16o;
    t->gqa_ext_bwd16o = c_gqa_ext_bwd16o;
    t->gqa_ext_bwd16d = c_gqa_ext_bwd16d;
    if (!inner || inner->matmul_dinp_acc) t->matmul_dinp_acc = c_matmul_dinp_acc;
    if (!inner || inner->matmul_fwd_acc) t->matmul_fwd_acc = c_matmul_fwd_acc;
    if (!inner || inner->matmul_bwd_acc) t->matmul_bwd_acc = c_matmul_bwd_acc;
    if (!inner || inner->matmul_fwd_acc16) t->matmul_fwd_acc16 = c_matmul_fwd_acc16;
    if (!inner || inner->set_dw_fresh) t->set_dw_fresh = c_set_dw_fresh;
    if (!inner || (inner->set_dw_fresh && inner->dw_fresh)) t->dw_fresh = c_dw_fresh;
    if (!inner || inner->qknorm_rope_bwd16) t->qknorm_rope_bwd16 = c_qknorm_rope_bwd16;
    if (!inner || inner->matmul_bwd_acc16) t->matmul_bwd_acc16 = c_matmul_bwd_acc16;
    if (!inner || inner->matmul_grouped_o16) t->matmul_grouped_o16 = c_matmul_grouped_o16;
    if (!inner || inner->rows_gather16) t->rows_gather16 = c_rows_gather16;
    /* (Mixture of Experts: where the inner table has them, every one) */
    if (!inner || (inner->moe_route_fwd && inner->moe_route_bwd && inner->rows_gather &&
                   inner->rows_scatter && inner->rows_dot && inner->moe_permute &&
                   inner->moe_regroup && inner->sigmoid_fwd && inner->sigmoid_bwd)) {
        t->moe_route_fwd = c_moe_route_fwd;
        t->moe_route_bwd = c_moe_route_bwd;
        t->rows_gather = c_rows_gather;
        t->rows_scatter = c_rows_scatter;
        t->rows_dot = c_rows_dot;
        t->moe_permute = c_moe_permute;
        t->moe_regroup = c_moe_regroup;
        t->sigmoid_fwd = c_sigmoid_fwd;
        t->sigmoid_bwd = c_sigmoid_bwd;
        if (!inner || inner->rows_dot16) t->rows_dot16 = c_rows_dot16;
        if (!inner || inner->rows_scatter16) t->rows_scatter16 = c_rows_scatter16;
        if (!inner || inner->rows_dot16h) t->rows_dot16h = c_rows_dot16h;
        if (!inner || inner->rows_sum16) t->rows_sum16 = c_rows_sum16;
    }
    if (!inner || inner->matmul_grouped_bwd_o16) t->matmul_grouped_bwd_o16 = c_matmul_grouped_bwd_o16;
    if (!inner || inner->matmul_grouped_dw16) t->matmul_grouped_dw16 = c_matmul_grouped_dw16;
    if (!inner || inner->rows_gather_o16) t->rows_gather_o16 = c_rows_gather_o16;
    if (!inner || inner->from_bf16_runs) t->from_bf16_runs = c_from_bf16_runs;
}

const zt_backend *zt_backend_count(void) {
    g_inner = NULL;
    fill(&g_count, "count", 0, NULL);
    return &g_count;
}

int zt_count_bare(const zt_backend *be) { return be == &g_count && !g_inner; }

const zt_backend *zt_backend_count_over(const zt_backend *inner) {
    if (!inner) return zt_backend_count();
    g_inner = inner;
    fill(&g_over, "count", inner->host_memory, inner);
    return &g_over;
}
