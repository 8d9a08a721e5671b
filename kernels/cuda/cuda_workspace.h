/*
 * cuda_workspace.h -- the CUDA backend's own device memory, per kernel, as a
 * pure function of the call's shape.  Plain C (static inline), included by
 * the CUDA kernels (which ask zt_cuda_scratch() for exactly these sizes) and
 * by the memory planner (libtrain/memplan.c, which predicts the scratch the
 * GPT's calls need): one source of truth, so the two cannot drift apart.
 *
 * What the backend holds besides alloc()'s blocks:
 *   - the cuBLAS(Lt) workspace, ZT_CUDA_CUBLAS_WS_BYTES, from the backend's
 *     start to the process end;
 *   - one growing scratch buffer (zt_cuda_scratch): a kernel entry that needs
 *     temporary device memory asks for its bytes; when the buffer is smaller
 *     it is freed and reallocated at zt_cuda_ws_scratch_size(bytes) (the
 *     request rounded up to 1 MiB).  Since it only grows, and each growth
 *     rounds the request up the same way, the buffer ends at
 *     zt_cuda_ws_scratch_size(largest request) whatever the order of the
 *     calls: the planner's prediction is the max of the functions below over
 *     the calls a run makes, rounded.
 *
 * Shapes follow backend.h (N = B*T rows).  All sizes are bytes.
 */
#ifndef ZT_KERNELS_CUDA_WORKSPACE_H
#define ZT_KERNELS_CUDA_WORKSPACE_H

#include <stddef.h>

#define ZT_CUDA_CUBLAS_WS_BYTES ((size_t)32 << 20)   /* cuBLAS(Lt) workspace */
#define ZT_CUDA_SCRATCH_ROUND ((size_t)1 << 20)      /* scratch grows in MiB */
#define ZT_CUDA_RED_THREADS 256                      /* sum / sumsq / nonfinite */
#define ZT_CUDA_RED_MAXBLOCKS 1024
#define ZT_CUDA_COL_MAXCHUNKS 256                    /* column sums, LayerNorm dw/db */

/* Round up to 256 bytes: the offset of the next sub-buffer in scratch. */
static inline size_t zt_cuda_ws_al256(size_t b) { return (b + 255) & ~(size_t)255; }

/* The scratch buffer's size after a request of `bytes` made it grow. */
static inline size_t zt_cuda_ws_scratch_size(size_t bytes) {
    return (bytes + ZT_CUDA_SCRATCH_ROUND - 1) & ~(ZT_CUDA_SCRATCH_ROUND - 1);
}

/* Blocks of the fixed-order reductions over n elements (sum, sumsq,
 * nonfinite): one double / count per block in scratch. */
static inline unsigned zt_cuda_ws_red_blocks(size_t n) {
    size_t b = (n + (size_t)ZT_CUDA_RED_THREADS * 16 - 1) / ((size_t)ZT_CUDA_RED_THREADS * 16);
    if (b > ZT_CUDA_RED_MAXBLOCKS) b = ZT_CUDA_RED_MAXBLOCKS;
    if (b < 1) b = 1;
    return (unsigned)b;
}
/* sum, sumsq (doubles) and nonfinite (64-bit counts) over n elements */
static inline size_t zt_cuda_ws_reduce(size_t n) {
    return n ? (size_t)zt_cuda_ws_red_blocks(n) * 8 : 0;
}

/* sumsq_to / nonfinite_to / sum_to: the non-empty ranges go in launches of
 * at most ZT_CUDA_RED_RANGES (their table is a kernel argument), each range
 * reduced as sum / sumsq / nonfinite reduce it (zt_cuda_ws_red_blocks(n)
 * partials), then added by a finishing kernel; adamw_multi: one launch per
 * run of at most ZT_CUDA_ADAMW_SEGS contiguous segments (kernel argument). */
#define ZT_CUDA_RED_RANGES 128
#define ZT_CUDA_ADAMW_SEGS 160
/* from_bf16_runs: one k_from_bf16_runs launch per ZT_CUDA_WIDEN_RUNS
 * non-empty runs (their table a kernel argument; no scratch) */
#define ZT_CUDA_WIDEN_RUNS 64
/* the partials of one launch of ranges: a double / count per block of each
 * range; the scratch request of a call is the largest launch's */
static inline size_t zt_cuda_ws_reduce_ranges(const size_t *n, int nr) {
    size_t best = 0, cur = 0;
    int k = 0;
    for (int r = 0; r < nr; r++) {
        if (!n[r]) continue;
        if (k == ZT_CUDA_RED_RANGES) {
            if (cur > best) best = cur;
            cur = 0;
            k = 0;
        }
        cur += (size_t)zt_cuda_ws_red_blocks(n[r]) * 8;
        k++;
    }
    return cur > best ? cur : best;
}

/* Row chunks of the fixed-order column sums over N rows; *rows_per_chunk
 * gets the rows of each chunk. */
static inline int zt_cuda_ws_col_chunks(int N, int *rows_per_chunk) {
    int p = (N + 31) / 32;
    if (p > ZT_CUDA_COL_MAXCHUNKS) p = ZT_CUDA_COL_MAXCHUNKS;
    if (p < 1) p = 1;
    const int r = (N + p - 1) / p;
    if (rows_per_chunk) *rows_per_chunk = r;
    return (N + r - 1) / r;
}
/* column sum of [N, C] (matmul_bwd's dbias): one double per chunk and column */
static inline size_t zt_cuda_ws_colsum(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)zt_cuda_ws_col_chunks(N, NULL) * (size_t)C * sizeof(double);
}
/* layernorm_bwd [N, C]: partial dw and db, one double per chunk and column */
static inline size_t zt_cuda_ws_layernorm_bwd(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return 2 * zt_cuda_ws_al256((size_t)zt_cuda_ws_col_chunks(N, NULL) * (size_t)C * sizeof(double));
}
/* layernorm_bwd16d with dsum: a third such array, the column sums' partials */
static inline size_t zt_cuda_ws_layernorm_bwd_sum(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return 3 * zt_cuda_ws_al256((size_t)zt_cuda_ws_col_chunks(N, NULL) * (size_t)C * sizeof(double));
}
/* Attention on tensor cores (bf16 matmul mode, cuda_attention.cu): per
 * sequence, the scores of kc kv-head columns at a time, [kc, T, T] fp32
 * scores next to [kc, T, T] bf16 probabilities, within this budget.  kc is
 * min(NKV, budget / (6 T^2)); 0 (T > 9459) means the flash kernel runs
 * instead (fp32 in registers, no [T, T] buffer).  With attention
 * soft-capping (gqa_ext_*, softcap > 0) the backward also keeps the cap's
 * derivative, another [kc, T, T] fp32: kc is min(NKV, budget / (10 T^2)),
 * 0 for T > 7327, for the forward too (both passes take the same path). */
#define ZT_CUDA_ATT_TC_BUDGET ((size_t)512 << 20)
static inline int zt_cuda_att_tc_heads_ext(int T, int NKV, int capped) {
    if (T <= 0 || NKV <= 0) return 0;
    const size_t per = (size_t)T * (size_t)T * (capped ? 10 : 6);
    size_t kc = ZT_CUDA_ATT_TC_BUDGET / per;
    if (kc > (size_t)NKV) kc = (size_t)NKV;
    return (int)kc;
}
static inline int zt_cuda_att_tc_heads(int T, int NKV) { return zt_cuda_att_tc_heads_ext(T, NKV, 0); }
/* the tensor-core path's score buffers (fp32 scores, bf16 probabilities) */
static inline size_t zt_cuda_ws_att_tc_scores(int T, int kc) {
    const size_t n = (size_t)kc * (size_t)T * (size_t)T;
    return zt_cuda_ws_al256(n * 4) + zt_cuda_ws_al256(n * 2);
}
/* Head sizes up to 128 take the flash kernels on tensor cores
 * (cuda_attention_tc.cu) in bf16 mode, no score buffers: the head size
 * padded to 16, 32, 64 or 128 in their shared memory, 0 above 128. */
static inline int zt_cuda_att_flash_hsp(int hs) {
    if (hs <= 0 || hs > 128) return 0;
    return hs <= 16 ? 16 : hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
}
static inline int zt_cuda_att_flash_tc(int hs) { return zt_cuda_att_flash_hsp(hs) != 0; }
/* gqa_ext_fwd [B, T] with NH q heads, NKV kv heads of hs and the options'
 * softcap (gqa_fwd: 0): nothing with fp32 matmuls; in bf16 mode qkv rounded
 * to bf16, [B, T, (NH + 2 NKV) hs], and, on the cuBLAS path (flash = 0:
 * head sizes above 128), the score buffers.  The sliding window and the
 * scale change nothing. */
static inline size_t zt_cuda_ws_gqa_path_fwd(int bf16, int flash, int B, int T, int NH, int NKV, int hs,
                                             float softcap) {
    if (B <= 0 || T <= 0 || NH <= 0 || hs <= 0 || !bf16) return 0;
    const size_t q16 = zt_cuda_ws_al256((size_t)B * T * (size_t)(NH + 2 * NKV) * hs * 2);
    if (flash) return q16;
    const int kc = zt_cuda_att_tc_heads_ext(T, NKV, softcap > 0.0f);
    if (kc <= 0) return 0;
    return q16 + zt_cuda_ws_att_tc_scores(T, kc);
}
static inline size_t zt_cuda_ws_gqa_ext_fwd(int bf16, int B, int T, int NH, int NKV, int hs,
                                            float softcap) {
    return zt_cuda_ws_gqa_path_fwd(bf16, zt_cuda_att_flash_tc(hs), B, T, NH, NKV, hs, softcap);
}
/* gqa_ext_bwd: D = rowsum(dout * out), [B, NH, T] floats; in bf16 mode also
 * qkv and dout rounded to bf16 and, on the cuBLAS path, the score buffers
 * and, with softcap > 0, the cap's derivative [kc, T, T] fp32 */
static inline size_t zt_cuda_ws_gqa_path_bwd(int bf16, int flash, int B, int T, int NH, int NKV, int hs,
                                             float softcap) {
    if (B <= 0 || T <= 0 || NH <= 0) return 0;
    const size_t d = (size_t)B * (size_t)NH * (size_t)T * sizeof(float);
    if (!bf16 || hs <= 0) return d;
    const size_t bufs = zt_cuda_ws_al256(d) +
                        zt_cuda_ws_al256((size_t)B * T * (size_t)(NH + 2 * NKV) * hs * 2) +
                        zt_cuda_ws_al256((size_t)B * T * (size_t)NH * hs * 2);
    if (flash) return bufs;
    const int capped = softcap > 0.0f;
    const int kc = zt_cuda_att_tc_heads_ext(T, NKV, capped);
    if (kc <= 0) return d;
    return bufs + zt_cuda_ws_att_tc_scores(T, kc) +
           (capped ? zt_cuda_ws_al256((size_t)kc * (size_t)T * (size_t)T * 4) : 0);
}
static inline size_t zt_cuda_ws_gqa_ext_bwd(int bf16, int B, int T, int NH, int NKV, int hs,
                                            float softcap) {
    return zt_cuda_ws_gqa_path_bwd(bf16, zt_cuda_att_flash_tc(hs), B, T, NH, NKV, hs, softcap);
}
/* gqa_fwd / gqa_bwd: the options' defaults (no cap) */
static inline size_t zt_cuda_ws_gqa_fwd(int bf16, int B, int T, int NH, int NKV, int hs) {
    return zt_cuda_ws_gqa_ext_fwd(bf16, B, T, NH, NKV, hs, 0.0f);
}
static inline size_t zt_cuda_ws_gqa_bwd(int bf16, int B, int T, int NH, int NKV, int hs) {
    return zt_cuda_ws_gqa_ext_bwd(bf16, B, T, NH, NKV, hs, 0.0f);
}
/* the cuDNN attention path (cuda_sdpa.cu), plus cudnn_ws, the workspace
 * its execution plan asks for (known only once cuDNN built the plan; the
 * gqa/attention functions here are the planner's prediction, which is our
 * kernels' need).  in16 (backend.h ZT_ATT_IN*): the entry's inputs; the
 * bf16 q|k|v of the *16 entries (in16 >= 1) and the bf16 output of the
 * *16o ones (in16 2) are cuDNN's own tensors, no copies.  Forward: q|k|v
 * rounded to bf16 (in16 0) and O in bf16 (in16 < 2: widened into out);
 * backward: q|k|v rounded (in16 0), dqkv16 (in16 < 3; 3: the caller's,
 * gqa_ext_bwd16d), O rounded (in16 < 2) and dO in
 * bf16, softmax_sum [B, NH, T] and dQ_accum [B, NH, T, hs] in fp32 (with
 * NKV < NH, dK and dV per q head are virtual tensors of cuDNN's graph, as
 * cudnn-frontend's: no buffers).  (A bf16 input that is not
 * 16-byte aligned is copied into its buffer: cuda_sdpa.cu asks the in16 0
 * or 1 size then; the models' are 256-byte aligned.) */
static inline size_t zt_cuda_ws_sdpa_fwd(int in16, int B, int T, int NH, int NKV, int hs, size_t cudnn_ws) {
    in16 &= 3;
    return (in16 < 1 ? zt_cuda_ws_al256((size_t)B * T * (size_t)(NH + 2 * NKV) * hs * 2) : 0) +
           (in16 < 2 ? zt_cuda_ws_al256((size_t)B * T * (size_t)NH * hs * 2) : 0) + cudnn_ws;
}
/* (in16 | 4, ZT_ATT_DO16: dO the caller's bf16, gqa_ext_bwd16do's, 16-byte
 * aligned: no dO buffer) */
static inline size_t zt_cuda_ws_sdpa_bwd(int in16, int B, int T, int NH, int NKV, int hs, size_t cudnn_ws) {
    const size_t nout = (size_t)B * T * (size_t)NH * hs;
    const size_t nqkv = zt_cuda_ws_al256((size_t)B * T * (size_t)(NH + 2 * NKV) * hs * 2);
    const int do16 = (in16 & 4) != 0;
    in16 &= 3;
    return (size_t)(in16 < 1 ? 2 : in16 < 3 ? 1 : 0) * nqkv +
           (size_t)((in16 < 2 ? 2 : 1) - do16) * zt_cuda_ws_al256(nout * 2) +
           zt_cuda_ws_al256((size_t)B * NH * (size_t)T * 4) + zt_cuda_ws_al256(nout * 4) +
           cudnn_ws;
}
/* GPT-2's attention [B, T, C], NH heads of C / NH (NKV = NH) */
static inline size_t zt_cuda_ws_attention_fwd(int bf16, int B, int T, int C, int NH) {
    return NH > 0 ? zt_cuda_ws_gqa_fwd(bf16, B, T, NH, NH, C / NH) : 0;
}
static inline size_t zt_cuda_ws_attention_bwd(int bf16, int B, int T, int C, int NH) {
    return NH > 0 ? zt_cuda_ws_gqa_bwd(bf16, B, T, NH, NH, C / NH) : 0;
}
/* rmsnorm_bwd [N, C]: partial dw, one double per chunk and column */
static inline size_t zt_cuda_ws_rmsnorm_bwd(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)zt_cuda_ws_col_chunks(N, NULL) * (size_t)C * sizeof(double);
}
/* qknorm_rope_bwd16 [N rows]: the q norm's partial dw (one double per
 * chunk of its N qnh (row, group) pairs and channel of its NH hd / qnh),
 * 256-byte aligned, then the k norm's; 0 for the shapes it refuses (odd
 * hd, groups not whole heads) */
static inline size_t zt_cuda_ws_qknorm_rope_bwd16(int N, int NH, int NKV, int qnh, int knh, int hd) {
    if (N <= 0 || NH <= 0 || NKV <= 0 || qnh <= 0 || knh <= 0 || hd <= 0 || hd % 2 || NH % qnh ||
        NKV % knh)
        return 0;
    return zt_cuda_ws_al256((size_t)zt_cuda_ws_col_chunks(N * qnh, NULL) * (size_t)(NH / qnh) * hd *
                            sizeof(double)) +
           (size_t)zt_cuda_ws_col_chunks(N * knh, NULL) * (size_t)(NKV / knh) * hd * sizeof(double);
}
/* encoder_bwd: CUB's radix sort of N (token, position) int pairs needs
 * temporary storage the library reports only at run time.  This is an upper
 * bound of what its one-sweep sort asks for (the alternate key and value
 * buffers, 4 N bytes each; the look-back array, at most 256 8-byte counters
 * per tile of >= 1024 items; the per-pass histograms and counters of each
 * 2^27-item portion; CUB's 256-byte alignment), and the kernel reserves
 * max(this, what CUB reports), so the prediction holds unless a CUB version
 * needs more than the bound (then the measured scratch exceeds it). */
static inline size_t zt_cuda_ws_sort_tmp_bound(int N) {
    if (N <= 0) return 256;
    const size_t n = (size_t)N, portions = n / ((size_t)1 << 27) + 1;
    const size_t tiles = ((n < ((size_t)1 << 28) ? n : ((size_t)1 << 28)) + 1023) / 1024;
    return zt_cuda_ws_al256(portions * 4 * 256 * 8) + zt_cuda_ws_al256(tiles * 256 * 8) +
           2 * zt_cuda_ws_al256(n * 4) + zt_cuda_ws_al256(portions * 4 * 8) + 256;
}
/* encoder_bwd over N = B*T tokens: positions in, sorted keys, sorted
 * positions, and the sort's temporary storage (sort_tmp: what CUB asks for,
 * or 0 for the bound alone) */
static inline size_t zt_cuda_ws_encoder_bwd(int N, size_t sort_tmp) {
    if (N <= 0) return 0;
    const size_t bound = zt_cuda_ws_sort_tmp_bound(N);
    return 3 * zt_cuda_ws_al256((size_t)N * sizeof(int)) +
           zt_cuda_ws_al256(sort_tmp > bound ? sort_tmp : bound);
}
/* One GEMM in bf16 mode: both stored operands rounded to bf16 (na, nb
 * elements, as stored with their leading dimensions).  0 in fp32 mode. */
static inline size_t zt_cuda_ws_gemm(int bf16, size_t na, size_t nb) {
    return bf16 ? zt_cuda_ws_al256(na * 2) + zt_cuda_ws_al256(nb * 2) : 0;
}
/* matmul_fwd out[N,OC] = inp[N,C] w[OC,C]^T: the GEMM's bf16 operands */
static inline size_t zt_cuda_ws_matmul_fwd(int bf16, int N, int C, int OC) {
    if (N <= 0 || OC <= 0 || C <= 0) return 0;
    return zt_cuda_ws_gemm(bf16, (size_t)C * OC, (size_t)C * N);
}
/* matmul_grouped_o16 (the MoE experts' grouped forward GEMM, bf16 mode)
 * over `rows` rows of C in G' non-empty blocks: the fp32 input rounded to
 * bf16 (in32; none for a bf16 input), then the A, B, C pointer arrays of
 * cublasGemmGroupedBatchedEx (G' pointers each).  0 without rows.  (The
 * per-block fallback asks matmul_fwd's request a block, smaller.) */
static inline size_t zt_cuda_ws_matmul_grouped(int in32, size_t rows, int C, int G) {
    if (rows == 0 || C <= 0 || G <= 0) return 0;
    return (in32 ? zt_cuda_ws_al256(rows * (size_t)C * 2) : 0) + zt_cuda_ws_al256(3 * (size_t)G * sizeof(void *));
}
/* matmul_bwd in bf16 mode: dout[N,OC] rounded once (both GEMMs read it),
 * then room for the larger of the other operands (w [OC,C] for dinp, inp
 * [N,C] for dw), each rounded in turn */
static inline size_t zt_cuda_ws_matmul_bwd16(int N, int C, int OC, int has_dinp, int has_dw) {
    size_t na = 0;
    if (has_dinp) na = (size_t)C * OC;
    if (has_dw && (size_t)C * N > na) na = (size_t)C * N;
    return zt_cuda_ws_al256((size_t)OC * N * 2) + zt_cuda_ws_al256(na * 2);
}
/* matmul_bwd_head16 (the LM head's backward on its bf16 gradient, bf16
 * mode): matmul_bwd16's room for the other operands (w16 copied to 256-byte
 * alignment for dinp, inp rounded for dw), no dout16 (the caller's) */
static inline size_t zt_cuda_ws_matmul_bwd_head16(int N, int C, int OC, int has_dinp, int has_dw) {
    if (N <= 0 || OC <= 0 || C <= 0 || (!has_dinp && !has_dw)) return 0;
    size_t na = 0;
    if (has_dinp) na = (size_t)C * OC;
    if (has_dw && (size_t)C * N > na) na = (size_t)C * N;
    return zt_cuda_ws_al256(na * 2);
}
/* matmul_bwd: the GEMMs' bf16 operands (bf16 mode), and the dbias column
 * sum (has_dbias) */
static inline size_t zt_cuda_ws_matmul_bwd(int bf16, int N, int C, int OC, int has_dinp,
                                           int has_dw, int has_dbias) {
    if (N <= 0 || OC <= 0) return 0;
    size_t w = 0, x;
    if (bf16 && C > 0 && (has_dinp || has_dw)) w = zt_cuda_ws_matmul_bwd16(N, C, OC, has_dinp, has_dw);
    if (has_dbias && (x = zt_cuda_ws_colsum(N, OC)) > w) w = x;
    return w;
}

/* matmul_dgelu_bwd: bf16 mode: matmul_bwd16's operands (dout rounded once
 * for the input-gradient GEMM and dw's) followed by the epilogue's bias
 * gradient (C floats, added to dpre_bias after); fp32: the bias gradient
 * alone.  Then the dbias column sum, and the column sum of dpre when
 * cuBLASLt has no algorithm for the epilogue */
static inline size_t zt_cuda_ws_matmul_dgelu_bwd(int bf16, int N, int C, int OC, int has_dw,
                                                 int has_dbias) {
    if (N <= 0 || OC <= 0 || C <= 0) return 0;
    size_t w = (bf16 ? zt_cuda_ws_matmul_bwd16(N, C, OC, 1, has_dw) : 0) +
               zt_cuda_ws_al256((size_t)C * 4), x;
    if (has_dbias && (x = zt_cuda_ws_colsum(N, OC)) > w) w = x;
    if ((x = zt_cuda_ws_colsum(N, C)) > w) w = x;
    return w;
}

#endif /* ZT_KERNELS_CUDA_WORKSPACE_H */
