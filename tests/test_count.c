/*
 * test_count.c -- the counting backend (kernels/count.h) and the GPU cost
 * model (bench/costmodel.h); computed, never timed:
 *   - each entry's launches, FLOPs and bytes on small shapes equal the
 *     formulas of the CUDA kernels (exact integers): GEMMs in both
 *     precisions (the k_round_bf16 launches, dbias, the bias epilogue),
 *     flash attention's tiles, cross-entropy, AdamW, reductions and their
 *     syncs, transfers, the embedding backward, the what-ifs, the step's
 *     reductions into device memory and the multi-tensor AdamW (launches
 *     per run of ranges / segments), copy_wait covered by a later sync;
 *   - a tiny GPT-2 and a tiny Llama step of the engine (bf16 and fp32,
 *     stages 0 and 3) make the same calls, launches, FLOPs, bytes, syncs
 *     and transfers on the counting table as on the cpu-strict backend
 *     (which computes) seen through the same counter: zeros and a loss of
 *     0 do not change what the engine runs; each step makes one optimizer
 *     launch, at most one host synchronization at stages 0 and 1 (one rank),
 *     and moves only the token arrays and the step's scalars over the bus
 *     (no collective at one rank, stage 3 included);
 *   - the committed calibration (bench/costmodel_h100.txt) is what
 *     `bench/costmodel --calibrate` makes of its source table; the fit does
 *     not read the engine steps of the table;
 *   - cuDNN's fused attention (count.c's model of kernels/cuda/cuda_sdpa.cu):
 *     the launches, FLOPs (useful causal: seen pairs, 4 hs / 10 hs) and
 *     bytes of the forward and backward (with GQA, a window, bf16 q|k|v),
 *     each fallback of the rule; the committed calibration leaves cudnn_fwd
 *     and cudnn_bwd uncalibrated and a step leaves them out; the fit
 *     recovers a known efficiency from a synthetic table's cuDNN rows;
 *   - from each recorded H100 table of the flash kernels (7856b57: the
 *     committed calibration; d8da6d9: fitted here), the GPT-2 engine step
 *     (its kernels are the table's) is predicted within 10% and the SmolLM
 *     step (out of sample: no row of that shape) within 20% of the
 *     recorded engine steps.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costmodel_run.h"
#include "cuda/cuda_workspace.h"
#include "ctx.h"
#include "tap.h"

static const zt_backend *K;

#define FAKE(type, slot) ((type *)(uintptr_t)(0x100000u * (slot)))

/* the launches counted since the reset, by kernel name */
static long launches_of(const char *name, double *flops, double *bytes) {
    const zt_count_kernel *k;
    const size_t n = zt_count_kernels(&k);
    long c = 0;
    double f = 0, b = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i].name, name)) {
            c += k[i].launches;
            f += k[i].flops * k[i].launches;
            b += k[i].bytes * k[i].launches;
        }
    if (flops) *flops = f;
    if (bytes) *bytes = b;
    return c;
}

static double bytes_of_k(const zt_count_kernel *k, size_t n, const char *name) {
    double b = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i].name, name)) b += k[i].bytes * (double)k[i].launches;
    return b;
}

static long launches_of_k(const zt_count_kernel *k, size_t n, const char *name) {
    long c = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i].name, name)) c += k[i].launches;
    return c;
}

static zt_count_totals tot(void) {
    zt_count_totals t;
    zt_count_totals_get(&t);
    return t;
}

static void check_kernel(const char *what, const char *name, long n, double flops, double bytes) {
    double f, b;
    const long c = launches_of(name, &f, &b);
    if (!tap_ok(c == n && f == flops && b == bytes, "%s: %s x%ld, %.0f FLOPs, %.0f bytes", what, name, n,
                flops, bytes))
        tap_diag("got %s x%ld, %.0f FLOPs, %.0f bytes", name, c, f, b);
}

/* The Mixture of Experts entries (cuda_moe.cu; count.c's formulas): N = 6
 * tokens, E = 4 experts, top-K = 2, NK = 12 rows of C = 5 */
static void moe_formulas(void) {
    float *x = FAKE(float, 11), *y = FAKE(float, 12), *w = FAKE(float, 13), *p = FAKE(float, 14);
    int *idx = FAKE(int, 15), *off = FAKE(int, 16), *perm = FAKE(int, 17), *rows = FAKE(int, 18);
    const double N = 6, E = 4, K2 = 2, NK = 12, C = 5, f = 4, i4 = 4;
    zt_count_reset();
    K->moe_route_fwd(w, idx, p, x, 6, 4, 2, 1);
    check_kernel("moe_route_fwd", "k_moe_route_fwd", 1, N * (5 * E + K2 * E + K2 + K2),
                 2 * N * E * f + N * K2 * (f + i4));
    zt_count_reset();
    K->moe_route_bwd(y, w, p, x, idx, 6, 4, 2, 1);
    check_kernel("moe_route_bwd, norm, dprobs", "k_moe_route_bwd", 1, N * (6 * K2 + E + 4 * E),
                 2 * N * E * f + N * K2 * (f + i4) + E * f);
    zt_count_reset();
    K->moe_route_bwd(y, w, NULL, x, idx, 6, 4, 2, 0);
    check_kernel("moe_route_bwd", "k_moe_route_bwd", 1, N * (3 * K2 + 4 * E), 2 * N * E * f + N * K2 * (f + i4));
    zt_count_reset();
    K->rows_gather(y, x, rows, w, 12, 5);
    check_kernel("rows_gather, rows and w", "k_rows_gather", 1, NK * C, 2 * NK * C * f + NK * i4 + NK * f);
    zt_count_reset();
    K->rows_gather(y, x, NULL, NULL, 12, 5);
    check_kernel("rows_gather", "k_rows_gather", 1, 0, 2 * NK * C * f);
    zt_count_reset();
    K->rows_gather16((uint16_t *)(void *)y, (const uint16_t *)(const void *)x, rows, 12, 5);
    check_kernel("rows_gather16, rows", "k_rows_gather16", 1, 0, 2 * NK * C * 2 + NK * i4);
    zt_count_reset();
    K->rows_gather16((uint16_t *)(void *)y, (const uint16_t *)(const void *)x, NULL, 12, 5);
    check_kernel("rows_gather16", "k_rows_gather16", 1, 0, 2 * NK * C * 2);
    zt_count_reset();
    K->rows_gather_o16((uint16_t *)(void *)y, x, rows, w, 12, 5);
    check_kernel("rows_gather_o16, rows and w", "k_rows_gather_o16", 1, NK * C, NK * C * (f + 2) + NK * i4 + NK * f);
    zt_count_reset();
    K->rows_gather_o16((uint16_t *)(void *)y, x, NULL, NULL, 12, 5);
    check_kernel("rows_gather_o16", "k_rows_gather_o16", 1, 0, NK * C * (f + 2));
    zt_count_reset();
    K->rows_scatter(y, x, rows, w, 12, 5);
    check_kernel("rows_scatter, rows and w", "k_rows_scatter", 1, 2 * NK * C,
                 3 * NK * C * f + NK * i4 + NK * f);
    zt_count_reset();
    K->rows_scatter(y, x, rows, NULL, 12, 1);
    check_kernel("rows_scatter, C 1", "k_rows_scatter", 1, NK, 3 * NK * f + NK * i4);
    zt_count_reset();
    K->rows_dot(y, x, rows, w, 12, 5);
    check_kernel("rows_dot", "k_rows_dot", 1, 2 * NK * C, 2 * NK * C * f + NK * i4 + NK * f);
    /* rows_dot16: a and b16 read once, out written, with w the scaled a
     * written back (and w read) in the same launch */
    uint16_t *x16 = FAKE(uint16_t, 19);
    const double h2 = 2;
    zt_count_reset();
    K->rows_dot16(y, x, x16, NULL, 12, 5);
    check_kernel("rows_dot16", "k_rows_dot16", 1, 2 * NK * C, NK * C * (f + h2) + NK * f);
    zt_count_reset();
    K->rows_dot16(y, x, x16, w, 12, 5);
    check_kernel("rows_dot16, w", "k_rows_dot16", 1, 3 * NK * C, NK * C * (2 * f + h2) + 2 * NK * f);
    zt_count_reset();
    K->rows_dot16(y, x, x16, w, 12, 0);
    check_kernel("rows_dot16, C 0 (launched: zeros)", "k_rows_dot16", 1, 0, 2 * NK * f);
    zt_count_reset();
    K->rows_dot16(y, x, x16, w, 0, 5);
    tap_ok(tot().launches == 0 && tot().calls[ZT_CE_rows_dot16] == 1, "rows_dot16, n 0: counted, no launch");
    zt_count_reset();
    K->rows_scatter16(y, x16, rows, w, 12, 5);
    check_kernel("rows_scatter16, rows and w", "k_rows_scatter16", 1, 2 * NK * C,
                 NK * C * (2 * f + h2) + NK * i4 + NK * f);
    zt_count_reset();
    K->rows_scatter16(y, x16, NULL, NULL, 12, 5);
    check_kernel("rows_scatter16", "k_rows_scatter16", 1, NK * C, NK * C * (2 * f + h2));
    zt_count_reset();
    K->rows_scatter16(y, x16, rows, w, 12, 0);
    tap_ok(tot().launches == 0 && tot().calls[ZT_CE_rows_scatter16] == 1, "rows_scatter16, C 0: counted, no launch");
    zt_count_reset();
    K->sigmoid_fwd(y, x, 10);
    check_kernel("sigmoid_fwd", "k_sigmoid_fwd", 1, 40, 80);
    K->sigmoid_bwd(y, x, w, 10);
    check_kernel("sigmoid_bwd", "k_sigmoid_bwd", 1, 30, 120);
    /* empty shapes: nothing launched, as cuda_moe.cu's early returns */
    zt_count_reset();
    K->moe_route_fwd(w, idx, p, x, 0, 4, 2, 1);
    K->moe_route_bwd(y, w, NULL, x, idx, 6, 4, 0, 0);
    K->rows_gather(y, x, rows, w, 0, 5);
    K->rows_gather16((uint16_t *)(void *)y, (const uint16_t *)(const void *)x, rows, 12, 0);
    K->rows_scatter(y, x, rows, w, 12, 0);
    K->rows_dot(y, x, rows, w, 0, 5);
    K->moe_permute(off, perm, rows, idx, 6, 2, 0);
    K->moe_regroup(perm, rows, idx, 0, 2);
    K->sigmoid_fwd(y, x, 0);
    tap_ok(tot().launches == 0 && tot().calls[ZT_CE_rows_gather] == 1 && tot().calls[ZT_CE_moe_permute] == 1,
           "MoE entries on empty shapes: counted calls, no launch");
    zt_count_reset();
    K->rows_dot(y, x, rows, w, 12, 0);
    check_kernel("rows_dot, C 0 (launched: zeros)", "k_rows_dot", 1, 0, NK * i4 + NK * f);

    /* moe_permute: k_moe_count, k_moe_offsets, k_moe_fill; the bare table
     * knows no idx: the balanced routing, NK / E = 3 rows an expert,
     * read back by to_host (route_groups' read: D2H and a sync) */
    zt_count_reset();
    K->moe_permute(off, perm, rows, idx, 6, 2, 4);
    check_kernel("moe_permute", "k_moe_count", 1, E * NK, NK * i4 + (E + 1) * i4);
    check_kernel("moe_permute", "k_moe_offsets", 1, E, (2 * E + 1) * i4);
    check_kernel("moe_permute", "k_moe_fill", 1, E * NK + E * 128 * 7, E * i4 + NK * i4 + 2 * NK * i4);
    int o[5] = {-1, -1, -1, -1, -1};
    K->to_host(o, off, sizeof o);
    tap_ok(o[0] == 0 && o[1] == 3 && o[2] == 6 && o[3] == 9 && o[4] == 12 && tot().launches == 3 &&
               tot().syncs == 1 && tot().host_bytes == 20,
           "moe_permute, bare: the balanced offsets read back (0 3 6 9 12), 3 launches, 1 sync, 20 bytes");
    /* 7 rows: 5 tokens of K 1 + an expert outside [0, E) left out */
    int ix[12] = {1, 1, 3, 1, 0, 9, 1, 0, 3, 1, 1, 2};
    K->to_device(idx, ix, sizeof ix);
    zt_count_reset();
    K->moe_permute(off, perm, rows, idx, 6, 2, 4);
    K->to_host(o, off, sizeof o);
    tap_ok(o[0] == 0 && o[1] == 2 && o[2] == 8 && o[3] == 9 && o[4] == 11,
           "moe_permute, bare, a known idx: its counts (0 2 8 9 11: the slot of expert 9 left out)");
    check_kernel("moe_permute, 11 rows", "k_moe_fill", 1, E * NK + E * 128 * 7, E * i4 + NK * i4 + 2 * 11 * i4);
    /* a routing the router wrote (moe_route_fwd: unknown): balanced again */
    K->moe_route_fwd(w, idx, p, x, 6, 4, 2, 1);
    K->moe_permute(off, perm, rows, idx, 6, 2, 4);
    K->to_host(o, off, sizeof o);
    tap_ok(o[1] == 3 && o[4] == 12, "moe_permute after moe_route_fwd: idx forgotten, balanced");
    zt_count_reset();
    K->moe_permute(off, perm, rows, idx, 0, 2, 4);
    tap_ok(tot().launches == 2 && launches_of("k_moe_fill", NULL, NULL) == 0,
           "moe_permute of no rows: k_moe_count and k_moe_offsets only");
    /* moe_regroup: P 2 ranks x El 2 experts, R = 10 rows (cnt known) */
    int cnt[4] = {1, 2, 3, 4};
    K->to_device(idx, cnt, sizeof cnt);
    zt_count_reset();
    K->moe_regroup(perm, rows, idx, 2, 2);
    check_kernel("moe_regroup", "k_moe_regroup", 1, 4 * 3 / 2 + 16, 4 * i4 + 2 * 10 * i4);
    /* over cpu: the same counts, the cpu's results */
    const zt_backend *cpu = zt_backend_cpu(), *O = zt_backend_count_over(cpu);
    float lg[12], pr[12], pr2[12], wt[4], wt2[4];
    int id[4], id2[4], of[7], of2[7], pe[4], pe2[4], ro[4], ro2[4];   /* (off: E + 1 = 7) */
    for (int k = 0; k < 12; k++) lg[k] = (float)((k * 7) % 5) * 0.25f - 0.3f;
    zt_count_reset();
    O->moe_route_fwd(wt, id, pr, lg, 2, 6, 2, 1);
    cpu->moe_route_fwd(wt2, id2, pr2, lg, 2, 6, 2, 1);
    O->moe_permute(of, pe, ro, id, 2, 2, 6);
    cpu->moe_permute(of2, pe2, ro2, id2, 2, 2, 6);
    tap_ok(!memcmp(wt, wt2, sizeof wt) && !memcmp(id, id2, sizeof id) && !memcmp(pr, pr2, sizeof pr) &&
               !memcmp(of, of2, sizeof of) && !memcmp(pe, pe2, sizeof pe) && !memcmp(ro, ro2, sizeof ro),
           "count over cpu: moe_route_fwd and moe_permute bitwise the cpu's");
    check_kernel("moe_permute over cpu", "k_moe_fill", 1, 6 * 4 + 6 * 128 * 7.0, 6 * 4 + 4 * 4 + 2 * 4 * 4.0);
    K = zt_backend_count();
    zt_count_reset();
}

static void formulas(void) {
    float *x = FAKE(float, 1), *y = FAKE(float, 2), *w = FAKE(float, 3), *b = FAKE(float, 4);
    float *dw = FAKE(float, 5), *mis = (float *)((uintptr_t)FAKE(float, 6) + 4);
    const double N = 6, C = 5, OC = 7;

    /* fp32 linear layer: one GEMM, the bias in cuBLASLt's epilogue */
    K->set_matmul_precision(ZT_MATMUL_FP32);
    zt_count_reset();
    K->matmul_fwd(y, x, w, b, 6, 5, 7);
    check_kernel("matmul_fwd fp32", "cublasLt gemm fp32", 1, 2 * N * C * OC,
                 (OC * C + C * N) * 4 + N * OC * 4 + OC * 4);
    tap_ok(tot().launches == 1, "matmul_fwd fp32: 1 launch");

    /* from_bf16_runs: a k_from_bf16_runs launch per ZT_CUDA_WIDEN_RUNS (64)
     * non-empty runs, 6 bytes an element; empty runs count for nothing */
    {
        size_t off[130], n[130];
        double el = 0;
        for (int r = 0; r < 130; r++) {
            off[r] = (size_t)r * 3;
            n[r] = r % 5 == 4 ? 0 : (size_t)(r % 7 + 1);
            el += (double)n[r];
        }
        zt_count_reset();
        K->from_bf16_runs(x, (const uint16_t *)(void *)y, off, n, 130);
        check_kernel("from_bf16_runs, 130 runs (104 not empty)", "k_from_bf16_runs", 2, 0, el * 6);
        tap_ok(tot().launches == 2 && tot().calls[ZT_CE_from_bf16_runs] == 1,
               "from_bf16_runs: 2 launches, 1 call");
        zt_count_reset();
        K->from_bf16_runs(x, (const uint16_t *)(void *)y, off, n, 4);
        check_kernel("from_bf16_runs, 4 runs", "k_from_bf16_runs", 1, 0, (1 + 2 + 3 + 4) * 6.0);
        zt_count_reset();
        K->from_bf16_runs(x, (const uint16_t *)(void *)y, off + 4, n + 4, 1);
        tap_ok(tot().launches == 0, "from_bf16_runs, one empty run: no launch");
    }

    /* bf16: both operands rounded first (6 bytes an element), then the GEMM on bf16 */
    K->set_matmul_precision(ZT_MATMUL_BF16);
    zt_count_reset();
    K->matmul_fwd(y, x, w, b, 6, 5, 7);
    check_kernel("matmul_fwd bf16", "k_round_bf16", 2, 0, (OC * C + C * N) * 6);
    check_kernel("matmul_fwd bf16", "cublasLt gemm bf16", 1, 2 * N * C * OC,
                 (OC * C + C * N) * 2 + N * OC * 4 + OC * 4);
    /* a bias the epilogue cannot take (not 16-byte aligned): cublasGemmEx + k_add_bias */
    zt_count_reset();
    K->matmul_fwd(y, x, w, mis, 6, 5, 7);
    check_kernel("matmul_fwd, misaligned bias", "k_add_bias", 1, N * OC, 2 * N * OC * 4 + OC * 4);
    check_kernel("matmul_fwd, misaligned bias", "cublasLt gemm bf16", 1, 2 * N * C * OC,
                 (OC * C + C * N) * 2 + N * OC * 4);
    /* GPT-2's fc and GELU in bf16 (matmul_gelu_fwd_o16): 8 outputs a row,
     * the aux ld a multiple of 8: one GEMM with GELU_AUX_BIAS, D and aux in
     * bf16 (2 N OC h written), the GELU's 9 N OC FLOPs in it; 7 (OC): the
     * fallback, matmul_fwd (fp32 D) and k_gelu_fwd16p (N OC f read, 2 N OC h
     * written) */
    zt_count_reset();
    K->matmul_gelu_fwd_o16(FAKE(uint16_t, 20), FAKE(uint16_t, 21), FAKE(float, 22), x, NULL, w, NULL, b,
                           6, 5, 8);
    check_kernel("matmul_gelu_fwd_o16", "cublasLt gemm bf16", 1, 2 * N * C * 8 + 9 * N * 8,
                 (8 * C + C * N) * 2 + 2 * N * 8 * 2 + 8 * 4);
    check_kernel("matmul_gelu_fwd_o16", "k_round_bf16", 2, 0, (8 * C + C * N) * 6);
    tap_ok(tot().launches == 3, "matmul_gelu_fwd_o16: 2 rounds + 1 GEMM");
    zt_count_reset();
    K->matmul_gelu_fwd_o16(FAKE(uint16_t, 20), FAKE(uint16_t, 21), FAKE(float, 22), x, NULL, w, NULL, b,
                           6, 5, 7);
    check_kernel("matmul_gelu_fwd_o16, ld 7", "cublasLt gemm bf16", 1, 2 * N * C * OC,
                 (OC * C + C * N) * 2 + N * OC * 4 + OC * 4);
    check_kernel("matmul_gelu_fwd_o16, ld 7", "k_gelu_fwd16p", 1, 9 * N * OC, N * OC * (4 + 2 * 2));
    tap_ok(tot().launches == 4, "matmul_gelu_fwd_o16, ld 7: 2 rounds + 1 GEMM + k_gelu_fwd16p");

    /* backward: dinp (beta 0), dw (+=: read and written), dbias column sum;
     * dout rounded once, both GEMMs read it; w and inp rounded each */
    zt_count_reset();
    K->matmul_bwd(x, dw, b, y, x, w, 6, 5, 7);
    const double P = 1;   /* column-sum chunks of 6 rows */
    check_kernel("matmul_bwd bf16", "k_round_bf16", 3, 0, (OC * N + C * OC + C * N) * 6);
    check_kernel("matmul_bwd bf16", "cublasLt gemm bf16", 2, 2 * 2 * N * C * OC,
                 (C * OC + OC * N) * 2 + N * C * 4 + (C * N + N * OC) * 2 + C * OC * 4 * 2);
    check_kernel("matmul_bwd bf16", "k_colsum_part", 1, N * OC, N * OC * 4 + P * OC * 8);
    check_kernel("matmul_bwd bf16", "k_colsum_final", 1, P * OC, P * OC * 8 + 2 * OC * 4);
    tap_ok(tot().launches == 7 && tot().syncs == 0, "matmul_bwd bf16: 7 launches, no sync");
    zt_count_reset();
    K->matmul_bwd(NULL, dw, NULL, y, x, w, 6, 5, 7);
    tap_ok(tot().launches == 3, "matmul_bwd without dinp and dbias: 2 rounds + 1 GEMM");
    /* the input gradient accumulated (matmul_dinp_acc): matmul_bwd's dinp
     * GEMM with beta 1 (dinp read and written, no k_add); bf16: dout and w
     * rounded first */
    zt_count_reset();
    K->matmul_dinp_acc(x, y, w, 6, 5, 7);
    check_kernel("matmul_dinp_acc bf16", "k_round_bf16", 2, 0, (OC * N + C * OC) * 6);
    check_kernel("matmul_dinp_acc bf16", "cublasLt gemm bf16", 1, 2 * N * C * OC,
                 (C * OC + OC * N) * 2 + 2 * N * C * 4);
    tap_ok(tot().launches == 3 && tot().calls[ZT_CE_matmul_dinp_acc] == 1,
           "matmul_dinp_acc bf16: 2 rounds + 1 GEMM, one call");
    K->set_matmul_precision(ZT_MATMUL_FP32);
    zt_count_reset();
    K->matmul_dinp_acc(x, y, w, 6, 5, 7);
    check_kernel("matmul_dinp_acc fp32", "cublasLt gemm fp32", 1, 2 * N * C * OC,
                 (C * OC + OC * N) * 4 + 2 * N * C * 4);
    tap_ok(tot().launches == 1, "matmul_dinp_acc fp32: 1 launch");
    zt_count_reset();
    K->matmul_dinp_acc(x, y, w, 6, 5, 0);
    K->matmul_dinp_acc(x, y, w, 0, 5, 7);
    tap_ok(tot().launches == 0 && tot().calls[ZT_CE_matmul_dinp_acc] == 2,
           "matmul_dinp_acc with OC = 0 or N = 0: nothing launched");
    K->set_matmul_precision(ZT_MATMUL_BF16);

    /* the GELU layers, fp32: GELU_AUX_BIAS is one GEMM that also writes the
     * aux matrix (ld OC = 8, a multiple of 8); at OC = 7 the GEMM + k_gelu_fwd */
    K->set_matmul_precision(ZT_MATMUL_FP32);
    {
        const double O8 = 8;
        zt_count_reset();
        K->matmul_gelu_fwd(y, FAKE(float, 7), x, w, b, 6, 5, 8);
        check_kernel("matmul_gelu_fwd fp32", "cublasLt gemm fp32", 1, 2 * N * C * O8 + 9 * N * O8,
                     (O8 * C + C * N) * 4 + 2 * N * O8 * 4 + O8 * 4);
        tap_ok(tot().launches == 1, "matmul_gelu_fwd fp32: 1 launch (the epilogue)");
        zt_count_reset();
        K->matmul_gelu_fwd(y, FAKE(float, 7), x, w, b, 6, 5, 7);
        check_kernel("matmul_gelu_fwd, aux ld 7", "k_gelu_fwd", 1, 9 * N * OC, 2 * N * OC * 4);
        tap_ok(tot().launches == 2, "matmul_gelu_fwd, aux ld 7: the GEMM and k_gelu_fwd");
        /* DGELU_BGRAD: the input-gradient GEMM reads the aux matrix [N, 8] and
         * writes the bias gradient; k_bgrad_acc adds it; dw GEMM, dbias sums */
        zt_count_reset();
        K->matmul_dgelu_bwd(x, b, dw, FAKE(float, 8), y, x, FAKE(float, 7), w, 6, 8, 7);
        check_kernel("matmul_dgelu_bwd fp32", "cublasLt gemm fp32", 2,
                     2 * O8 * N * OC + 16 * N * O8 + 2 * O8 * OC * N,
                     (O8 * OC + OC * N) * 4 + 2 * N * O8 * 4 + O8 * 4 +
                         (O8 * N + N * OC) * 4 + O8 * OC * 4 * 2);
        check_kernel("matmul_dgelu_bwd fp32", "k_bgrad_acc", 1, O8, 3 * O8 * 4);
        check_kernel("matmul_dgelu_bwd fp32", "k_colsum_part", 1, N * OC, N * OC * 4 + OC * 8);
        tap_ok(tot().launches == 5 && launches_of("k_gelu_bwd", NULL, NULL) == 0,
               "matmul_dgelu_bwd fp32: 2 GEMMs, k_bgrad_acc, the dbias sums, no k_gelu_bwd");
        zt_count_reset();
        K->matmul_dgelu_bwd(x, b, dw, FAKE(float, 8), y, x, FAKE(float, 7), w, 6, 5, 7);
        tap_ok(tot().launches == 7 && launches_of("k_gelu_bwd", NULL, NULL) == 1 &&
                   launches_of("k_colsum_part", NULL, NULL) == 2,
               "matmul_dgelu_bwd, aux ld 5: unfused (2 GEMMs, k_gelu_bwd, two column sums)");
    }
    K->set_matmul_precision(ZT_MATMUL_BF16);
    {
        /* bf16 DGELU_BGRAD: dout rounded once for both GEMMs, then w, then inp */
        const double O8 = 8;
        zt_count_reset();
        K->matmul_dgelu_bwd(x, b, dw, FAKE(float, 8), y, x, FAKE(float, 7), w, 6, 8, 7);
        check_kernel("matmul_dgelu_bwd bf16", "k_round_bf16", 3, 0, (OC * N + O8 * OC + O8 * N) * 6);
        check_kernel("matmul_dgelu_bwd bf16", "cublasLt gemm bf16", 2,
                     2 * O8 * N * OC + 16 * N * O8 + 2 * O8 * OC * N,
                     (O8 * OC + OC * N) * 2 + 2 * N * O8 * 4 + O8 * 4 +
                         (O8 * N + N * OC) * 2 + O8 * OC * 4 * 2);
        tap_ok(tot().launches == 8, "matmul_dgelu_bwd bf16: 3 roundings, 2 GEMMs, k_bgrad_acc, the dbias sums");
    }

    /* the residual add and the next norm: one row-norm kernel, a and b read,
     * res and out written */
    zt_count_reset();
    K->add_layernorm_fwd(y, FAKE(float, 7), FAKE(float, 8), FAKE(float, 9), x, dw, w, b, 6, 5);
    check_kernel("add_layernorm_fwd", "k_add_layernorm_fwd", 1, 9 * N * C,
                 4 * N * C * 4 + 2 * C * 4 + 2 * N * 4);
    zt_count_reset();
    /* add_layernorm_fwd16b: the branch read in bf16, out written in bf16
     * (2 N C f + 2 N C h), the statistics and the weights as there */
    zt_count_reset();
    K->add_layernorm_fwd16b(y, FAKE(uint16_t, 10), FAKE(float, 11), FAKE(float, 8), FAKE(float, 9), x,
                            FAKE(uint16_t, 12), w, b, 6, 5);
    check_kernel("add_layernorm_fwd16b", "k_add_layernorm_fwd16b", 1, 9 * N * C,
                 N * C * (2 * 4 + 2 * 2) + 2 * C * 4 + 2 * N * 4);
    tap_ok(tot().launches == 1, "add_layernorm_fwd16b: 1 launch");
    zt_count_reset();
    K->add_rmsnorm_fwd(y, FAKE(float, 7), FAKE(float, 9), x, dw, w, 1e-6f, 6, 5);
    check_kernel("add_rmsnorm_fwd", "k_add_rmsnorm_fwd", 1, 5 * N * C, 4 * N * C * 4 + C * 4 + N * 4);
    tap_ok(tot().launches == 1, "add_rmsnorm_fwd: 1 launch");

    /* the norm backwards in one pass: dout and the input read once for
     * dinp and the weight gradient's chunk partials (P = 1 chunk of the 6
     * rows), then the partials' final sums; NORM_BWD_SPLIT (the recorded
     * tables' kernels): the dx kernel, then the partials reading them again */
    {
        uint16_t *d16 = FAKE(uint16_t, 10);
        const double P = 1, cb = 1;
        zt_count_reset();
        K->layernorm_bwd(y, dw, b, x, w, FAKE(float, 7), FAKE(float, 8), FAKE(float, 9), 6, 5);
        check_kernel("layernorm_bwd", "k_layernorm_bwd", 1, 17 * N * C,
                     4 * N * C * 4 + C * 4 + 2 * N * 4 + 2 * P * C * 8);
        check_kernel("layernorm_bwd", "k_colsum_final", 1, 2 * P * C, 2 * P * C * 8 + 4 * C * 4);
        tap_ok(tot().launches == 2, "layernorm_bwd: 2 launches");
        zt_count_reset();
        K->layernorm_bwd16(y, d16, dw, b, x, w, FAKE(float, 7), FAKE(float, 8), FAKE(float, 9), 6, 5);
        check_kernel("layernorm_bwd16", "k_layernorm_bwd", 1, 17 * N * C,
                     4 * N * C * 4 + N * C * 2 + C * 4 + 2 * N * 4 + 2 * P * C * 8);
        tap_ok(tot().launches == 2, "layernorm_bwd16: 2 launches");
        /* layernorm_bwd16d: dout read in bf16 (N C h for N C f); dinp16
         * NULL: no bf16 copy; dsum: N C FLOPs and a third P C 8 of
         * partials more, summed by the same k_colsum_final */
        zt_count_reset();
        K->layernorm_bwd16d(y, d16, dw, b, NULL, NULL, FAKE(uint16_t, 11), w, FAKE(float, 7),
                            FAKE(float, 8), FAKE(float, 9), 6, 5);
        check_kernel("layernorm_bwd16d dout16", "k_layernorm_bwd", 1, 17 * N * C,
                     3 * N * C * 4 + N * C * 2 + N * C * 2 + C * 4 + 2 * N * 4 + 2 * P * C * 8);
        tap_ok(tot().launches == 2, "layernorm_bwd16d dout16: 2 launches");
        zt_count_reset();
        K->layernorm_bwd16d(y, NULL, dw, b, FAKE(float, 12), x, NULL, w, FAKE(float, 7),
                            FAKE(float, 8), FAKE(float, 9), 6, 5);
        check_kernel("layernorm_bwd16d dsum", "k_layernorm_bwd", 1, 18 * N * C,
                     4 * N * C * 4 + C * 4 + 2 * N * 4 + 3 * P * C * 8);
        check_kernel("layernorm_bwd16d dsum", "k_colsum_final", 1, 3 * P * C,
                     3 * P * C * 8 + 6 * C * 4);
        tap_ok(tot().launches == 2, "layernorm_bwd16d dsum: 2 launches");
        zt_count_reset();
        K->rmsnorm_bwd(y, dw, x, w, FAKE(float, 7), FAKE(float, 9), 6, 5);
        check_kernel("rmsnorm_bwd", "k_rmsnorm_bwd", 1, 11 * N * C,
                     4 * N * C * 4 + C * 4 + N * 4 + P * C * 8);
        check_kernel("rmsnorm_bwd", "k_colsum_final", 1, P * C, P * C * 8 + 2 * C * 4);
        tap_ok(tot().launches == 2, "rmsnorm_bwd: 2 launches");
        zt_count_reset();
        K->rmsnorm_bwd16(y, d16, dw, x, w, FAKE(float, 7), FAKE(float, 9), 6, 5);
        check_kernel("rmsnorm_bwd16", "k_rmsnorm_bwd", 1, 11 * N * C,
                     4 * N * C * 4 + N * C * 2 + C * 4 + N * 4 + P * C * 8);
        tap_ok(tot().launches == 2, "rmsnorm_bwd16: 2 launches");
        /* per head: 6 rows of 3 heads of 5 (R = 18 pairs, one chunk) in rows of 20 */
        const double R = 18, hd = 5;
        zt_count_reset();
        K->headnorm_bwd(y, dw, x, w, FAKE(float, 9), 6, 3, 20, 5);
        check_kernel("headnorm_bwd", "k_headnorm_bwd", 1, 11 * R * hd,
                     3 * R * hd * 4 + R * 4 + hd * 4 + P * hd * 8);
        check_kernel("headnorm_bwd", "k_colsum_final", 1, P * hd, P * hd * 8 + 2 * hd * 4);
        tap_ok(tot().launches == 2, "headnorm_bwd: 2 launches");

        zt_count_set_whatif(ZT_COUNT_WHATIF_NORM_BWD_SPLIT);
        zt_count_reset();
        K->layernorm_bwd16(y, d16, dw, b, x, w, FAKE(float, 7), FAKE(float, 8), FAKE(float, 9), 6, 5);
        check_kernel("what-if norm-bwd-split: layernorm_bwd16", "k_layernorm_bwd_dx", 1, 12 * N * C,
                     4 * N * C * 4 + N * C * 2 + C * 4 + 2 * N * 4);
        check_kernel("what-if norm-bwd-split: layernorm_bwd16", "k_layernorm_bwd_part", 1, 5 * N * C,
                     2 * N * C * 4 + cb * 2 * N * 4 + 2 * P * C * 8);
        tap_ok(tot().launches == 3, "what-if norm-bwd-split: layernorm_bwd16: 3 launches");
        zt_count_reset();
        K->rmsnorm_bwd(y, dw, x, w, FAKE(float, 7), FAKE(float, 9), 6, 5);
        check_kernel("what-if norm-bwd-split: rmsnorm_bwd", "k_rmsnorm_bwd_dx", 1, 8 * N * C,
                     4 * N * C * 4 + C * 4 + N * 4);
        check_kernel("what-if norm-bwd-split: rmsnorm_bwd", "k_rmsnorm_bwd_part", 1, 3 * N * C,
                     2 * N * C * 4 + cb * N * 4 + P * C * 8);
        tap_ok(tot().launches == 3, "what-if norm-bwd-split: rmsnorm_bwd: 3 launches");
        zt_count_reset();
        K->headnorm_bwd(y, dw, x, w, FAKE(float, 9), 6, 3, 20, 5);
        check_kernel("what-if norm-bwd-split: headnorm_bwd", "k_headnorm_bwd_part", 1, 3 * R * hd,
                     2 * R * hd * 4 + R * 4 + P * hd * 8);
        check_kernel("what-if norm-bwd-split: headnorm_bwd", "k_headnorm_bwd_dx", 1, 8 * R * hd,
                     3 * R * hd * 4 + R * 4 + hd * 4);
        tap_ok(tot().launches == 3, "what-if norm-bwd-split: headnorm_bwd: 3 launches");
        tap_ok((ZT_COUNT_AS_RECORDED & ZT_COUNT_WHATIF_NORM_BWD_SPLIT) != 0,
               "the recorded tables are replayed with the norm backward split");
        zt_count_set_whatif(0);
    }

    /* what-if: bf16 operands need no rounding */
    zt_count_set_whatif(ZT_COUNT_WHATIF_BF16_OPERANDS);
    zt_count_reset();
    K->matmul_fwd(y, x, w, b, 6, 5, 7);
    tap_ok(tot().launches == 1 && launches_of("k_round_bf16", NULL, NULL) == 0,
           "what-if bf16-operands: the GEMM alone");
    zt_count_set_whatif(0);

    /* flash attention on tensor cores: whole 64 x 64 tiles of the causal
     * triangle, nt (nt + 1) / 2 of them per head; forward 6 HSP per pair,
     * backward 8 HSP (dk, dv) + 6 HSP (dq) */
    {
        const int B = 2, T = 100, NH = 4, NKV = 2, hs = 16;   /* HSP 16, nt 2 */
        const double nt = 2, pairs = 64.0 * 64.0 * nt * (nt + 1) / 2, R = (NH + 2 * NKV) * hs;
        zt_count_reset();
        K->gqa_fwd(y, x, x, B, T, NH, NKV, hs);
        check_kernel("gqa_fwd bf16", "k_att_tc_round", 1, 0, B * T * R * 6);
        check_kernel("gqa_fwd bf16", "k_ft_fwd", 1, B * NH * pairs * 6 * 16,
                     B * T * R * 2 + B * T * NH * hs * 4.0 + B * NH * T * 4.0);
        zt_count_reset();
        K->gqa_bwd(x, y, x, y, x, B, T, NH, NKV, hs);
        const double in = B * T * R * 2 + B * T * NH * hs * 2.0 + 2.0 * B * NH * T * 4;
        check_kernel("gqa_bwd bf16", "k_att_rowdot", 1, 2.0 * B * T * NH * hs,
                     2.0 * B * T * NH * hs * 4 + B * NH * T * 4.0);
        check_kernel("gqa_bwd bf16", "k_att_tc_round", 2, 0, (B * T * R + B * T * NH * hs) * 6);
        check_kernel("gqa_bwd bf16", "k_ft_bwd_dkv", 1, B * NH * pairs * 8 * 16,
                     in + B * T * 2.0 * NKV * hs * 4);
        check_kernel("gqa_bwd bf16", "k_ft_bwd_dq", 1, B * NH * pairs * 6 * 16, in + B * T * NH * hs * 4.0);
        /* fp32: one kernel, 32 x 32 tiles, 4 hs per pair */
        K->set_matmul_precision(ZT_MATMUL_FP32);
        zt_count_reset();
        K->gqa_fwd(y, x, x, B, T, NH, NKV, hs);
        const double nt32 = 4, p32 = 32.0 * 32.0 * nt32 * (nt32 + 1) / 2;
        check_kernel("gqa_fwd fp32", "k_att_fwd", 1, B * NH * p32 * 4 * 16,
                     B * T * R * 4 + B * T * NH * hs * 4.0 + B * NH * T * 4.0);
        tap_ok(tot().launches == 1, "gqa_fwd fp32: 1 launch");
        K->set_matmul_precision(ZT_MATMUL_BF16);
    }

    /* softmax + cross-entropy: the row read three times and written */
    zt_count_reset();
    K->xent_fwd(x, y, y, FAKE(int, 7), 3, 10);
    check_kernel("xent_fwd", "k_xent_fwd", 1, 5 * 30.0, 4 * 30.0 * 4 + 3 * (8 + 4.0));
    zt_count_reset();
    K->xent_bwd(y, y, FAKE(int, 7), 1.0f, 3, 10);
    check_kernel("xent_bwd", "k_xent_bwd", 1, 30, 2 * 30.0 * 4 + 3 * 4.0);
    K->xent_fused(x, y, FAKE(int, 7), 1.0f, 3, 10);
    check_kernel("xent_fused", "k_xent_fused", 1, 6 * 30.0, 4 * 30.0 * 4 + 3 * (8 + 4.0));
    zt_count_set_whatif(ZT_COUNT_WHATIF_FUSED_XENT);
    zt_count_reset();
    K->xent_fwd(x, y, y, FAKE(int, 7), 3, 10);
    K->xent_bwd(y, y, FAKE(int, 7), 1.0f, 3, 10);
    check_kernel("what-if fused-xent", "k_xent_fwd", 1, 5 * 30.0, 2 * 30.0 * 4 + 3 * (8 + 4.0));
    tap_ok(tot().launches == 1, "what-if fused-xent: xent_bwd launches nothing");
    zt_count_set_whatif(0);

    /* AdamW: p, grad, m, v read, p, m, v written */
    zt_count_reset();
    K->adamw(x, y, w, b, 1000, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f, 1.0f);
    check_kernel("adamw", "k_adamw", 1, 14000, 28000);

    /* reductions: the kernel, the partials back to the host, a sync */
    zt_count_reset();
    (void)K->sumsq(x, 5000);
    const double nb = 2;   /* ceil(5000 / (256 * 16)) blocks */
    check_kernel("sumsq", "k_sum_d<sumsq>", 1, 10000, 5000 * 4 + nb * 8);
    check_kernel("sumsq", "cudaMemcpyAsync D2H", 1, 0, nb * 8);
    tap_ok(tot().syncs == 1 && tot().transfers == 1 && tot().launches == 1,
           "sumsq: 1 launch, 1 transfer, 1 sync");
    tap_ok(K->sumsq(x, 5000) == 0.0 && K->sum(x, 10) == 0.0 && K->nonfinite(x, 10) == 0,
           "sum / sumsq / nonfinite return 0");

    /* the step's reductions into device memory (sum_to, sumsq_to,
     * nonfinite_to): per launch of at most 128 non-empty ranges the
     * partials kernel and k_finish_ranges; no transfer, no sync */
    {
        enum { NR = 300 };
        static const float *xs[NR];
        static size_t ns[NR];
        double sn = 0, snb = 0;
        for (int r = 0; r < NR; r++) {
            xs[r] = x;
            ns[r] = r == 5 ? 0 : 5000 + (size_t)r;   /* 2 blocks of 4096 each */
            sn += (double)ns[r];
            snb += ns[r] ? 2 : 0;
        }
        zt_count_reset();
        K->sumsq_to(FAKE(double, 8), xs, ns, NR);
        /* 299 non-empty ranges: launches of 128, 128 and 43; the last two finishes add to *dst */
        check_kernel("sumsq_to, 300 ranges", "k_sum_ranges<sumsq>", 3, 2 * sn, sn * 4 + snb * 8);
        check_kernel("sumsq_to, 300 ranges", "k_finish_ranges", 3, snb + 299, snb * 8 + 3 * 8 + 2 * 8);
        tap_ok(tot().launches == 6 && tot().syncs == 0 && tot().transfers == 0,
               "sumsq_to: 6 launches, no transfer, no sync");
        zt_count_reset();
        K->nonfinite_to(FAKE(uint64_t, 8), xs, ns, NR);
        check_kernel("nonfinite_to, 300 ranges", "k_nonfinite_ranges", 3, sn, sn * 4 + snb * 8);
        zt_count_reset();
        K->sum_to(FAKE(double, 8), x, 5000);
        check_kernel("sum_to", "k_sum_ranges<sum>", 1, 5000, 5000 * 4 + 2 * 8);
        check_kernel("sum_to", "k_finish_ranges", 1, 2 + 1, 2 * 8 + 8 + 8);
        zt_count_reset();
        K->sum_to(FAKE(double, 8), x, 0);
        K->sumsq_to(FAKE(double, 8), xs, ns, 0);
        check_kernel("sum_to of nothing, sumsq_to of no range", "k_finish_ranges", 1, 0, 8);
        tap_ok(tot().launches == 1, "sum_to of nothing launches nothing; sumsq_to of no range: the finish");
    }
    /* adamw_multi: one k_adamw_multi per run of at most 160 contiguous
     * segments: 7 f + the 16-bit copy h per element, the gate's 32 bytes */
    {
        enum { NS = 200 };
        static zt_adamw_seg seg[NS];
        size_t k = 0;
        for (int i = 0; i < NS; i++) {
            if (i == 170) k += 3;   /* a gap: a new run */
            seg[i] = (zt_adamw_seg){k, 10, (size_t)i, i % 2 ? 0.1f : 0.0f};
            k += 10;
        }
        zt_step_scalars *gate = FAKE(zt_step_scalars, 9);
        const zt_adamw_hyper hy = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, 0.5f, 1.0f, gate, 1.0};
        zt_count_reset();
        K->adamw_multi(x, y, w, b, FAKE(uint16_t, 10), ZT_ADAMW_H_BF16, ZT_ADAMW_H_LOGICAL, seg, NS, &hy);
        /* runs of 160, 10 and 30 segments */
        check_kernel("adamw_multi, 200 segments, a gap", "k_adamw_multi", 3, 14 * 2000.0,
                     (7 * 4 + 2) * 2000.0 + 3 * 32);
        const zt_adamw_hyper hn = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, 0.5f, 1.0f, NULL, 0.0};
        zt_count_reset();
        K->adamw_multi(x, y, w, b, NULL, ZT_ADAMW_H_NONE, 0, seg, 100, &hn);
        check_kernel("adamw_multi fp32, 100 segments, no gate", "k_adamw_multi", 1, 14 * 1000.0,
                     7 * 4 * 1000.0);
        tap_ok(tot().syncs == 0 && tot().transfers == 0, "adamw_multi: no transfer, no sync");
    }
    /* copy_wait: a sync unless a later sync already covered the copy */
    {
        char hb[64];
        memset(hb, 0, sizeof hb);
        zt_count_reset();
        void *h1 = K->to_device_async(x, hb, 64);
        void *h2 = K->to_host_async(hb, y, 64);
        K->copy_wait(h2);   /* waits: everything queued before it is done too */
        K->copy_wait(h1);   /* already complete */
        void *h3 = K->to_device_async(x, hb, 64);
        K->copy_wait(h3);
        const zt_count_totals t = tot();
        tap_ok(h1 && h2 && h3 && h1 != h3 && t.syncs == 2 && t.calls[ZT_CE_copy_wait] == 3 && t.transfers == 3,
               "copy_wait: 3 waits, 2 syncs (the wait on a copy a later sync covered is none)");
    }

    /* memory: transfers sync (the CUDA backend's to_device is synchronous) */
    zt_count_reset();
    char host[64];
    memset(host, 1, sizeof host);
    K->to_device(x, host, 64);
    K->to_host(host, x, 64);
    K->copy(y, x, 100);
    K->zero(y, 100);
    K->synchronize();
    const zt_count_totals t = tot();
    tap_ok(t.syncs == 3 && t.transfers == 2 && t.host_bytes == 128 && t.launches == 2 && t.bytes == 300,
           "to_device, to_host, copy, zero, synchronize: 3 syncs, 2 transfers, 2 launches");
    tap_ok(host[0] == 1 && host[63] == 1, "to_host of what to_device wrote: its bytes (count.c known words)");
    K->to_host(host, y, 64);
    tap_ok(host[0] == 0 && host[63] == 0, "to_host of a buffer the bare table cannot know: zeros");
    K->zero(x, 4);
    memset(host, 1, sizeof host);
    K->to_host(host, x, 64);
    tap_ok(host[0] == 0 && host[63] == 0, "to_host after a zero(): forgotten, zeros");
    tap_ok(t.calls[ZT_CE_to_device] == 1 && t.calls[ZT_CE_copy] == 1 && t.calls[ZT_CE_synchronize] == 1,
           "entry tallies");

    /* the embedding backward: wpe sum, iota, the radix sort (histogram,
     * scan, 4 passes), the per-token sums */
    zt_count_reset();
    K->encoder_bwd(dw, y, x, FAKE(int, 7), 2, 8, 16);
    tap_ok(tot().launches == 9, "encoder_bwd: 9 launches");
    check_kernel("encoder_bwd", "cub radix sort: onesweep pass", 4, 0, 4 * 16 * 16.0);
    check_kernel("encoder_bwd", "k_encoder_bwd_wte", 1, 16 * 16.0, 3 * 16 * 16 * 4.0 + 8 * 16);

    moe_formulas();

    /* memory is address space only: 64 GiB "fits" */
    size_t cur0, peak;
    K->mem_stats(&cur0, &peak);
    void *big = K->alloc((size_t)64 << 30);
    size_t cur1;
    K->mem_stats(&cur1, &peak);
    tap_ok(big && cur1 - cur0 == ((size_t)64 << 30), "alloc(64 GiB): reserved, counted");
    K->free(big);
    K->mem_stats(&cur1, &peak);
    tap_ok(cur1 == cur0, "free: uncounted");
    K->set_matmul_precision(ZT_MATMUL_FP32);
    zt_count_reset();
}

/* ------------------------------------------------------------ the engine */

static int same_counts(const cm_counts *a, const cm_counts *b, const char *what) {
    int ok = a->tot.launches == b->tot.launches && a->tot.syncs == b->tot.syncs &&
             a->tot.transfers == b->tot.transfers && a->tot.flops == b->tot.flops &&
             a->tot.bytes == b->tot.bytes && a->tot.host_bytes == b->tot.host_bytes && a->nk == b->nk;
    for (int e = 0; e < ZT_CE_N; e++)
        if (a->tot.calls[e] != b->tot.calls[e]) {
            tap_diag("%s: %s called %ld times on count, %ld on cpu-strict", what, zt_count_entry_name(e),
                     a->tot.calls[e], b->tot.calls[e]);
            ok = 0;
        }
    if (!ok)
        tap_diag("%s: count %ld launches %ld syncs %ld transfers %.0f FLOPs %.0f bytes; cpu-strict %ld %ld "
                 "%ld %.0f %.0f",
                 what, a->tot.launches, a->tot.syncs, a->tot.transfers, a->tot.flops, a->tot.bytes,
                 b->tot.launches, b->tot.syncs, b->tot.transfers, b->tot.flops, b->tot.bytes);
    return tap_ok(ok, "%s: the same calls, launches, FLOPs, bytes, syncs and transfers as computing on "
                      "cpu-strict (%ld launches, %ld syncs)",
                  what, a->tot.launches, a->tot.syncs);
}

static void engine(void) {
    static const struct { const char *shape; int stage, fp32; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, 0}, {"gpt2:2,2,32,64,2,16", 1, 0}, {"gpt2:2,2,32,64,2,16", 2, 0},
        {"gpt2:2,2,32,64,2,16", 3, 0}, {"gpt2:2,2,32,64,2,16", 0, 1}, {"gpt2:2,2,32,64,2,16", 1, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, 0}, {"llama:2,4,2,32,48,64,2,16", 1, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, 0}, {"llama:2,4,2,32,48,64,2,16,untied", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cm_shape s;
        char what[128];
        snprintf(what, sizeof what, "%s stage %d %s", cases[i].shape, cases[i].stage,
                 cases[i].fp32 ? "fp32" : "bf16");
        if (cm_shape_parse(cases[i].shape, &s)) {
            tap_ok(0, "%s: shape parses", what);
            continue;
        }
        const cm_run_opts o = {cases[i].stage, cases[i].fp32, 0, 1, 0, CM_ATT_AS_SET, 0, "", "", "", CM_OFFLOAD_NONE};
        cm_counts a, b;
        zt_status st;
        memset(&st, 0, sizeof st);
        const int ra = cm_count_step(&s, &o, zt_backend_count(), &a, &st);
        if (ra) tap_diag("count: %s", st.msg);
        const int rb = ra ? ra : cm_count_step(&s, &o, zt_backend_count_over(zt_backend_cpu_strict()), &b, &st);
        if (!ra && rb) tap_diag("cpu-strict: %s", st.msg);
        if (tap_ok(!ra && !rb, "%s: a step on count and on cpu-strict", what)) {
            same_counts(&a, &b, what);
            cm_counts_free(&b);
            /* one optimizer launch; at one rank at most one host sync a
             * step at stages 0 and 1 (the step's scalars read once), and
             * no collective at any stage */
            const long opt = launches_of_k(a.k, a.nk, "k_adamw_multi"),
                       old = launches_of_k(a.k, a.nk, "k_adamw");
            tap_ok(opt == 1 && old == 0, "%s: one optimizer launch (k_adamw_multi x%ld, k_adamw x%ld)", what,
                   opt, old);
            if (cases[i].stage <= 1)
                tap_ok(a.tot.syncs <= 1, "%s: at most one host synchronization a step (%ld)", what,
                       a.tot.syncs);
            else
                tap_diag("%s: %ld host synchronizations a step", what, a.tot.syncs);
            tap_ok(a.tot.calls[ZT_CE_to_host] == 1 && a.tot.transfers == 3,
                   "%s: the bus carries the two token arrays and the step's scalars (%ld transfers)", what,
                   a.tot.transfers);
        }
        if (!ra) cm_counts_free(&a);
    }
}

/* ------------------------------------------------------------ bf16 weights
 * The GEMMs read the engine's bf16 parameter storage (zt_unit_params16,
 * the *_w16 entries) at stages 0-2: every loss and gradient norm of a few
 * steps bitwise those of the path that rounds the fp32 widened copy
 * (ZT_TEST_NO_W16=1), on the CPU backend seen through the counter; the
 * counts show which entries ran and that the rounding of weights is gone. */
static int w16_tokens(void *st_, long step, uint64_t first, int count, int T, int *in, int *tg,
                      zt_status *st) {
    const int V = *(int *)st_;
    (void)st;
    for (int i = 0; i < count * T; ++i) {
        uint64_t h = ((uint64_t)step * 0x9E3779B97F4A7C15ull) ^ (first + (uint64_t)i) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        h *= 0x94D049BB133111EBull;
        in[i] = (int)(h % (uint64_t)V);
        tg[i] = (int)((h >> 24) % (uint64_t)V);
    }
    return ZT_OK;
}
/* (mem: the fp32 copies' accounted peak, the plan's, and the bytes the
 * widening kernels moved) */
typedef struct w16_mem {
    uint64_t peak, plan;
    double widened;
    uint64_t acts_peak, acts_plan;   /* the activations' accounted peak and the plan's */
    uint64_t comm_peak, comm_plan;   /* the gradient buckets' (ZT_MEM_COMM) peak and the plan's */
    long a16;                        /* calls of the bf16-input entries */
    long enc16, enc;   /* encoder_fwd_w16 and encoder_fwd calls */
    long o16;          /* calls of the bf16-output entries (matmul_fwd_o16, gelu / swiglu / geglu 16) */
    long to16;         /* k_to_bf16 launches */
    long n16;          /* calls of the norms writing bf16 (layernorm_fwd16, ...) */
    long r16, rope;    /* rope_fwd16 and rope_fwd calls */
    long qkr, hn;      /* qknorm_rope_fwd16 and headnorm_fwd calls */
    long qkr_k, hn_k;  /* k_qknorm_rope_fwd16 and k_headnorm_fwd launches */
    /* the LM head's bf16 logits: xent16_fwd, xent16_fused, matmul_bwd_head16
     * calls; the head's matmul_fwd_o16 calls (one a forward chunk, one a
     * recomputed chunk: all fused calls but each step's last chunk's, 4
     * steps), left out of a16 and o16; xent_fwd + xent_fused calls; the
     * plan's chunk bytes */
    long x16f, x16b, h16, o16h, xent;
    uint64_t logits_plan;
    long ao16, att16;  /* gqa_ext_fwd16o + _bwd16o, gqa_ext_fwd16 + _bwd16 calls */
    long from16;       /* k_from_bf16 launches */
    long d16;          /* calls of the bf16-gradient entries (matmul_bwd_d16, ...) */
    long ab16;         /* gqa_ext_bwd16d calls */
    double glu_b;      /* bytes a launch of k_swiglu_bwd16 / k_geglu_bwd16 (-1: not all the same) */
    long g16;          /* matmul_dgelu_bwd_o16 calls */
    long rb16, ropeb;  /* rope_bwd16 and rope_bwd calls */
    long do16q, do16;  /* att_do16 calls; matmul_bwd_o16 + gqa_ext_bwd16do calls */
    long add, addn;    /* k_add launches; add_layernorm_fwd / add_rmsnorm_fwd (and 16) calls */
    long gemm;         /* cublasLt gemm launches (bf16 and fp32) */
    long xf;           /* the head's loss-only calls: xent16_fwd + xent_fwd */
    long dacc;         /* matmul_dinp_acc calls */
    long facc;         /* matmul_fwd_acc calls */
    long bacc;         /* matmul_bwd_acc calls */
    long bwds;         /* matmul_bwd + _w16 + _a16 + _d16 calls */
    long fwd, bwd;     /* matmul_fwd + _w16 + _a16 calls; matmul_bwd calls */
    /* bytes of the cublasLt gemm launches (bf16 and fp32) and of k_dw_add16
     * (the grouped weight gradients' add: the fp32 gradient read unless
     * fresh, as a dW GEMM's C) */
    double gemm_b;
    long copy, copy2d; /* copy and copy2d calls (device to device) */
    long memset_n, d2d_n;       /* cudaMemsetAsync and cudaMemcpyAsync D2D launches */
    double memset_b, d2d_b;     /* and their bytes */
    long alloc, alloc_nz;       /* alloc and alloc_nz calls */
    long dequant;               /* nf4_dequant calls */
    long glur;                  /* gelu_fwd16r + swiglu_fwd16r + geglu_fwd16r calls */
    double all_b;               /* the bytes of every launch */
    long scale;                 /* scale calls */
    long fo16, bo16;            /* matmul_fwd_o16 and matmul_bwd_o16 calls */
    long facc16, glu16;         /* matmul_fwd_acc16 calls; swiglu_fwd16 + geglu_fwd16 calls */
    long bacc16;                /* matmul_bwd_acc16 calls */
    long anb16, an16;           /* add_rmsnorm_fwd16b and add_rmsnorm_fwd16 calls */
    long rbd, rmsb;             /* rmsnorm_bwd16d calls; rmsnorm_bwd + _bwd16 + _bwd16d calls */
    long lbd, lnb;              /* layernorm_bwd16d calls; layernorm_bwd + _bwd16 + _bwd16d calls */
    long cpart;                 /* k_colsum_part launches */
    long gfo16, gelu16;         /* matmul_gelu_fwd_o16 calls; gelu_fwd16 + gelu_fwd16r calls */
    long alb16, aln16;          /* add_layernorm_fwd16b and add_layernorm_fwd16 calls */
    long wruns, launches;       /* k_from_bf16_runs launches; all launches */
    long gdd16, gd16;           /* swiglu_bwd_dd16 + geglu_bwd_dd16 calls; swiglu_bwd_d16 +
                                 * geglu_bwd_d16 calls */
    long qkb, hnb;              /* qknorm_rope_bwd16 and headnorm_bwd calls */
    /* launches and bytes of k_qknorm_rope_bwd16, k_headnorm_bwd, k_rope,
     * k_round_bf16, k_sdpa_widen, k_colsum_final (qkb16's kernels) */
    long qkb_k, hnb_k, rope_k, final_k;
    double qkb_b, hnb_b, rope_b, round_b, widen_b, final_b;
    /* the bytes of the attention backward's kernels (cuDNN's path the
     * counter models for gqa_ext_bwd16d, the tensor-core flash kernels for
     * gqa_ext_bwd16o over the cpu, and the memsets) */
    double attb_b;
    /* the last step's gradient block (stages 0 and 1: m->grads): a hash of
     * its bits with -0.0 read as +0.0 (ghave 0: none), its -0.0 elements */
    int ghave;
    uint64_t ghash;
    long gneg0;
    /* the GEMMs' FLOPs and launches (every GEMM class), the attention
     * forwards (every forward entry's calls) */
    double gemm_fl;
    long gemm_n, attf;
} w16_mem;
/* no_w16: the bits of w16_hooks (or'ed), each its test hook set while the
 * run is set up (zt_ctx_create: the model reads them once), 64 =
 * ZT_TEST_NO_L16 over the whole run; 32 = ZT_TEST_NO_O16, ZT_TEST_NO_N16
 * and ZT_TEST_NO_R16 set only after the setup, for the steps.  The runs
 * count over the cpu backend, or over g_w16_inner where set.  (w16_bits:
 * 64 of them, the int of before full at 1 << 30) */
typedef unsigned long long w16_bits;
static const struct {
    w16_bits bit;
    const char *env;
} w16_hooks[] = {
    {1, "ZT_TEST_NO_W16"},        {2, "ZT_TEST_NO_ACT16"},    {4, "ZT_TEST_NO_O16"},
    {8, "ZT_TEST_NO_N16"},        {16, "ZT_TEST_NO_R16"},     {64, "ZT_TEST_NO_L16"},
    {128, "ZT_TEST_NO_AO16"},     {256, "ZT_TEST_NO_D16"},    {512, "ZT_TEST_NO_NF4W16"},
    {1024, "ZT_TEST_NO_QKR16"},   {2048, "ZT_TEST_NO_G16"},   {4096, "ZT_TEST_NO_AB16"},
    {8192, "ZT_TEST_NO_X16"},     {16384, "ZT_TEST_NO_RB16"}, {32768, "ZT_TEST_NO_DO16"},
    {65536, "ZT_TEST_NO_ADDFOLD"}, {131072, "ZT_TEST_NO_HEADFUSE"}, {262144, "ZT_TEST_NO_LORAACC"},
    {524288, "ZT_TEST_NO_LORABT"}, {1048576, "ZT_TEST_NO_LORASWAP"}, {2097152, "ZT_TEST_NO_QKV16"},
    {4194304, "ZT_TEST_NO_NF4VIEW"}, {8388608, "ZT_TEST_NO_GPT16"}, {16777216, "ZT_TEST_NO_BWDSWAP"},
    {33554432, "ZT_TEST_NO_GLUROUND"}, {67108864, "ZT_TEST_NO_KEEPH"}, {134217728, "ZT_TEST_NO_LORA16"},
    {268435456, "ZT_TEST_NO_LGATE"}, {536870912, "ZT_TEST_NO_GU16"},
    {1073741824, "ZT_TEST_NO_LORAPATH"}, {2147483648ULL, "ZT_TEST_NO_GRADFRESH"},
    {4294967296ULL, "ZT_TEST_NO_BRANCH16"}, {8589934592ULL, "ZT_TEST_NO_DOUT16N"},
    {17179869184ULL, "ZT_TEST_NO_DH16"},
    {34359738368ULL, "ZT_TEST_NO_LBRANCH16"}, {68719476736ULL, "ZT_TEST_NO_QKB16"},
    {137438953472ULL, "ZT_TEST_NO_LGRAD16"}, {274877906944ULL, "ZT_TEST_NO_LO16"},
    {549755813888ULL, "ZT_TEST_NO_CKPTKEEP"}, {1099511627776ULL, "ZT_TEST_NO_MOE16"},
    {2199023255552ULL, "ZT_TEST_NO_GPTN16"}, {4398046511104ULL, "ZT_TEST_NO_LNSUM"},
    {8796093022208ULL, "ZT_TEST_NO_GELUE"}, {17592186044416ULL, "ZT_TEST_NO_GBRANCH16"},
    {1125899906842624ULL, "ZT_TEST_NO_MLPSUM"}, {2251799813685248ULL, "ZT_TEST_NO_HEADFRESH"},
    {4503599627370496ULL, "ZT_TEST_NO_WIDENRUNS"}};
#define W16_NHOOKS (sizeof w16_hooks / sizeof w16_hooks[0])
static const zt_backend *g_w16_inner;
/* 0: every run's checkpointing recomputes every group (ZT_TEST_NO_CKPTKEEP
 * added to its no_w16: the sections' counts of a checkpointed step are of P
 * = 2 forwards a block), 1: the default's kept last group (ckpt_keep, which
 * counts what it saves against that) */
static int g_w16_ckkeep;
/* the last w16_run's totals and a few of its launches (moe_counted) */
static zt_count_totals g_w16_tot;
typedef struct { long count, offsets, fill, gather, gather16, sw16; double sw16b; } w16_moek;
static w16_moek g_w16_moek;
/* 1: a Mixture of Experts runs on the cpu backend itself, uncounted; 2:
 * every run on the inner table without the counter (backend cuda) */
static int g_w16_moe_cpu;
/* matmul_fwd_acc's calls with the bf16 weight and with the bf16 input
 * (LoRA's swapped order, lora_swap: the base GEMM the *_w16 / *_a16 entries
 * made before), counted by a table over the one w16_run counts over */
static long g_facc_w16, g_facc_x16;
static const zt_backend *g_facc_inner;
static zt_backend g_facc_table;
static void facc_wrap(float *out, const float *inp, const uint16_t *inp16, const float *w,
                      const uint16_t *w16, int N, int C, int OC) {
    g_facc_w16 += w16 && !inp16;   /* (with inp16: the a16 entry's call) */
    g_facc_x16 += inp16 != NULL;
    g_facc_inner->matmul_fwd_acc(out, inp, inp16, w, w16, N, C, OC);
}
/* matmul_bwd_acc's calls with the bf16 weight and a fp32 gradient, and
 * with the bf16 gradient (LoRA's swapped backward, lora_bswap: the base
 * dinp GEMM the *_w16 / *_d16 entries made before; a base that took the
 * a16 entry with a fp32 gradient counts as the w16 one here) */
static long g_bacc_w16, g_bacc_d16;
static void bacc_wrap(float *dinp, const float *dout, const uint16_t *dout16, const float *w,
                      const uint16_t *w16, int N, int C, int OC) {
    g_bacc_w16 += w16 && !dout16;   /* (with dout16: the d16 entry's call) */
    g_bacc_d16 += dout16 != NULL;
    g_facc_inner->matmul_bwd_acc(dinp, dout, dout16, w, w16, N, C, OC);
}
static const zt_backend *facc_over(const zt_backend *inner) {
    g_facc_inner = inner;
    g_facc_table = *inner;
    if (inner->matmul_fwd_acc) g_facc_table.matmul_fwd_acc = facc_wrap;
    if (inner->matmul_bwd_acc) g_facc_table.matmul_bwd_acc = bacc_wrap;
    return &g_facc_table;
}
static int w16_run(const cm_shape *s, int stage, const char *extra, w16_bits no_w16, double res[4][2],
                   long *w16_calls, long *rounds, w16_mem *mem, zt_status *st) {
    zt_config *c = zt_config_new();
    char v[64];
    int rc = c ? ZT_OK : ZT_ENOMEM;
    if (!g_w16_ckkeep) no_w16 |= 549755813888ULL;
#define SET(k, fmt, x)                                                          \
    do {                                                                        \
        snprintf(v, sizeof v, fmt, x);                                          \
        if (rc == ZT_OK) rc = zt_config_set(c, k, v, ZT_SRC_FLAG, st);          \
    } while (0)
    SET("ztrain.model.n_layer", "%d", s->L);
    SET("ztrain.model.n_head", "%d", s->NH);
    SET("ztrain.model.n_embd", "%d", s->C);
    SET("ztrain.model.vocab", "%d", s->V);
    if (s->llama) {
        SET("ztrain.model.arch", "%s", "llama");
        SET("ztrain.model.n_kv_head", "%d", s->NKV);
        SET("ztrain.model.intermediate_size", "%d", s->I);
        SET("ztrain.model.tie_embeddings", "%s", s->untied ? "false" : "true");
    }
    SET("ztrain.model.context", "%d", s->T);
    SET("ztrain.seq_len", "%d", s->T);
    SET("train_micro_batch_size_per_gpu", "%d", s->B);
    SET("train_batch_size", "%d", s->B);
    SET("zero_optimization.stage", "%d", stage);
    SET("gradient_clipping", "%s", "1.0");
    /* (a Mixture of Experts: counted as every run since count.c has its
     * kernels; g_w16_moe_cpu: the cpu backend itself, uncounted, as before,
     * for moe_counted's bitwise comparison) */
    const int moe = extra && strstr(extra, "n_experts") && g_w16_moe_cpu;
    SET("ztrain.backend", "%s", moe ? "cpu" : "cuda");
    SET("ztrain.comm_backend", "%s", "mpi");
    SET("bf16.enabled", "%s", "true");
    SET("ztrain.threads", "%d", 1);
    SET("ztrain.data.val", "%s", "");
    SET("ztrain.classifier_chunk_rows", "%d", s->B * s->T / 2);   /* the head in 2 chunks */
#undef SET
    /* extra: "key=value key=value ..." */
    char kv[512];
    snprintf(kv, sizeof kv, "%s", extra ? extra : "");
    for (char *sv = NULL, *t = strtok_r(kv, " ", &sv); t && rc == ZT_OK; t = strtok_r(NULL, " ", &sv)) {
        char *eq = strchr(t, '=');
        if (!eq) continue;
        *eq = 0;
        rc = zt_config_set(c, t, eq + 1, ZT_SRC_FLAG, st);
    }
    for (size_t i = 0; i < W16_NHOOKS; i++)
        if (no_w16 & w16_hooks[i].bit) setenv(w16_hooks[i].env, "1", 1);
    zt_ctx *ctx = NULL;
    zt_mem_reset_peaks();
    if (rc == ZT_OK) {
        const zt_backend *in = facc_over(g_w16_inner ? g_w16_inner : zt_backend_cpu());
        /* (g_w16_moe_cpu 2: the same table uncounted, backend cuda) */
        if (!moe) zt_backend_set_stand_in(g_w16_moe_cpu == 2 ? in : zt_backend_count_over(in));
        rc = zt_ctx_create(c, NULL, &ctx, st);
        zt_backend_set_stand_in(NULL);
    }
    for (size_t i = 0; i < W16_NHOOKS; i++)   /* (but ZT_TEST_NO_L16: the whole run) */
        if (w16_hooks[i].bit != 64) unsetenv(w16_hooks[i].env);
    if (no_w16 & 32) {
        setenv("ZT_TEST_NO_O16", "1", 1);
        setenv("ZT_TEST_NO_N16", "1", 1);
        setenv("ZT_TEST_NO_R16", "1", 1);
    }
    int *V = NULL;
    if (rc == ZT_OK && !(V = malloc(sizeof *V))) rc = ZT_ENOMEM;
    if (rc == ZT_OK) {
        *V = s->V;
        zt_data_source d = {V, w16_tokens, free, NULL}, none = {0};
        rc = zt_ctx_set_data(ctx, d, none, st);
        if (rc != ZT_OK) free(V);
    }
    zt_count_reset();
    g_facc_w16 = g_facc_x16 = g_bacc_w16 = g_bacc_d16 = 0;
    memset(res, 0, 4 * sizeof res[0]);
    for (int k = 0; rc == ZT_OK && k < 4; k++) {
        zt_metrics m;
        memset(&m, 0, sizeof m);
        rc = zt_train_step(ctx, &m, st);
        res[k][0] = m.loss;
        res[k][1] = m.grad_norm;
    }
    unsetenv("ZT_TEST_NO_O16");
    unsetenv("ZT_TEST_NO_N16");
    unsetenv("ZT_TEST_NO_R16");
    unsetenv("ZT_TEST_NO_L16");
    zt_count_totals t;
    zt_count_totals_get(&t);
    g_w16_tot = t;
    {
        const zt_count_kernel *kk;
        const size_t nkk = zt_count_kernels(&kk);
        g_w16_moek.count = launches_of_k(kk, nkk, "k_moe_count");
        g_w16_moek.offsets = launches_of_k(kk, nkk, "k_moe_offsets");
        g_w16_moek.fill = launches_of_k(kk, nkk, "k_moe_fill");
        g_w16_moek.gather = launches_of_k(kk, nkk, "k_rows_gather");
        g_w16_moek.gather16 = launches_of_k(kk, nkk, "k_rows_gather16");
        g_w16_moek.sw16 = launches_of_k(kk, nkk, "k_swiglu_fwd16");
        g_w16_moek.sw16b = bytes_of_k(kk, nkk, "k_swiglu_fwd16");
    }
    *w16_calls = t.calls[ZT_CE_matmul_fwd_w16] + t.calls[ZT_CE_matmul_bwd_w16] +
                 t.calls[ZT_CE_matmul_gelu_fwd_w16] + t.calls[ZT_CE_matmul_dgelu_bwd_w16] +
                 g_facc_w16 + g_bacc_w16;
    const zt_count_kernel *k;
    const size_t nk = zt_count_kernels(&k);
    *rounds = launches_of_k(k, nk, "k_round_bf16");
    memset(mem, 0, sizeof *mem);
    mem->enc16 = t.calls[ZT_CE_encoder_fwd_w16];
    mem->enc = t.calls[ZT_CE_encoder_fwd];
    for (size_t i = 0; i < nk; i++) {
        if (!strcmp(k[i].name, "k_from_bf16") || !strcmp(k[i].name, "k_from_bf16_runs"))
            mem->widened += k[i].bytes * (double)k[i].launches;
        if (k[i].launches && (!strcmp(k[i].name, "k_swiglu_bwd16") || !strcmp(k[i].name, "k_geglu_bwd16")))
            mem->glu_b = mem->glu_b == 0 || mem->glu_b == k[i].bytes ? k[i].bytes : -1;
    }
    zt_mem_stats ms;
    zt_mem_get(&ms);
    mem->peak = ms.peak[ZT_MEM_GATHERED];
    mem->acts_peak = ms.peak[ZT_MEM_ACTIVATIONS];
    mem->comm_peak = ms.peak[ZT_MEM_COMM];
    /* (matmul_fwd_o16 is called with the bf16 input: a bf16-input call too) */
    mem->x16f = t.calls[ZT_CE_xent16_fwd];
    mem->x16b = t.calls[ZT_CE_xent16_fused];
    mem->h16 = t.calls[ZT_CE_matmul_bwd_head16];
    /* (the head's forward GEMMs: one a chunk in the forward, and the
     * recomputed chunks, all but the last, in backward; fused
     * (classifier.h), no xent16_fwd: one a chunk) */
    mem->o16h = mem->x16b ? (mem->x16f ? mem->x16f + mem->x16b - 4 : mem->x16b) : 0;
    mem->xent = t.calls[ZT_CE_xent_fwd] + t.calls[ZT_CE_xent_fused];
    /* (the blocks' matmul_fwd_o16 calls take the bf16 input: bf16-input
     * calls too; the head's, o16h, left out: they take the final norm's
     * bf16 output, or its fp32 one with ZT_TEST_NO_X16) */
    mem->a16 = t.calls[ZT_CE_matmul_fwd_a16] + t.calls[ZT_CE_matmul_bwd_a16] +
               t.calls[ZT_CE_matmul_gelu_fwd_a16] + t.calls[ZT_CE_matmul_dgelu_bwd_a16] +
               t.calls[ZT_CE_matmul_fwd_o16] - mem->o16h + t.calls[ZT_CE_matmul_bwd_d16] +
               t.calls[ZT_CE_matmul_dgelu_bwd_d16] + t.calls[ZT_CE_matmul_dgelu_bwd_o16] +
               t.calls[ZT_CE_matmul_bwd_o16] + t.calls[ZT_CE_matmul_gelu_fwd_o16] + g_facc_x16 +
               g_bacc_d16;
    mem->g16 = t.calls[ZT_CE_matmul_dgelu_bwd_o16];
    mem->glur = t.calls[ZT_CE_gelu_fwd16r] + t.calls[ZT_CE_swiglu_fwd16r] +
                t.calls[ZT_CE_geglu_fwd16r];
    for (size_t i = 0; i < nk; i++) mem->all_b += k[i].bytes * (double)k[i].launches;
    mem->o16 = t.calls[ZT_CE_matmul_fwd_o16] - mem->o16h + t.calls[ZT_CE_gelu_fwd16] +
               t.calls[ZT_CE_swiglu_fwd16] + t.calls[ZT_CE_geglu_fwd16] + mem->glur +
               t.calls[ZT_CE_swiglu_bwd16] + t.calls[ZT_CE_geglu_bwd16] +
               t.calls[ZT_CE_gqa_ext_fwd16] + t.calls[ZT_CE_gqa_ext_bwd16] +
               t.calls[ZT_CE_gqa_ext_fwd16o] + t.calls[ZT_CE_gqa_ext_bwd16o] +
               t.calls[ZT_CE_gqa_ext_bwd16d] + t.calls[ZT_CE_swiglu_bwd_d16] +
               t.calls[ZT_CE_geglu_bwd_d16] + t.calls[ZT_CE_swiglu_bwd_dd16] +
               t.calls[ZT_CE_geglu_bwd_dd16] + t.calls[ZT_CE_gqa_ext_bwd16do];
    /* (gqa_ext_bwd16d: gqa_ext_bwd16o where its path has no bf16 gradient) */
    mem->ao16 = t.calls[ZT_CE_gqa_ext_fwd16o] + t.calls[ZT_CE_gqa_ext_bwd16o] +
                t.calls[ZT_CE_gqa_ext_bwd16d] + t.calls[ZT_CE_gqa_ext_bwd16do];
    mem->ab16 = t.calls[ZT_CE_gqa_ext_bwd16d];
    mem->do16q = t.calls[ZT_CE_att_do16];
    mem->do16 = t.calls[ZT_CE_matmul_bwd_o16] + t.calls[ZT_CE_gqa_ext_bwd16do];
    mem->att16 = t.calls[ZT_CE_gqa_ext_fwd16] + t.calls[ZT_CE_gqa_ext_bwd16];
    mem->to16 = launches_of_k(k, nk, "k_to_bf16");
    mem->add = launches_of_k(k, nk, "k_add");
    mem->gemm = launches_of_k(k, nk, "cublasLt gemm bf16") + launches_of_k(k, nk, "cublasLt gemm fp32");
    mem->xf = t.calls[ZT_CE_xent16_fwd] + t.calls[ZT_CE_xent_fwd];
    mem->dacc = t.calls[ZT_CE_matmul_dinp_acc];
    mem->facc = t.calls[ZT_CE_matmul_fwd_acc];
    mem->bacc = t.calls[ZT_CE_matmul_bwd_acc];
    mem->bwds = t.calls[ZT_CE_matmul_bwd] + t.calls[ZT_CE_matmul_bwd_w16] +
                t.calls[ZT_CE_matmul_bwd_a16] + t.calls[ZT_CE_matmul_bwd_d16];
    mem->fwd = t.calls[ZT_CE_matmul_fwd] + t.calls[ZT_CE_matmul_fwd_w16] + t.calls[ZT_CE_matmul_fwd_a16];
    mem->bwd = t.calls[ZT_CE_matmul_bwd];
    for (size_t i = 0; i < nk; i++)
        if (!strcmp(k[i].name, "cublasLt gemm bf16") || !strcmp(k[i].name, "cublasLt gemm fp32") ||
            !strcmp(k[i].name, "k_dw_add16"))
            mem->gemm_b += k[i].bytes * (double)k[i].launches;
    for (size_t i = 0; i < nk; i++)
        if (k[i].cls == ZT_CC_GEMM_BF16 || k[i].cls == ZT_CC_GEMM_FP32) {
            mem->gemm_fl += k[i].flops * (double)k[i].launches;
            mem->gemm_n += k[i].launches;
        }
    mem->attf = t.calls[ZT_CE_attention_fwd] + t.calls[ZT_CE_gqa_fwd] + t.calls[ZT_CE_gqa_ext_fwd] +
                t.calls[ZT_CE_gqa_ext_fwd16] + t.calls[ZT_CE_gqa_ext_fwd16o];
    mem->copy = t.calls[ZT_CE_copy];
    mem->copy2d = t.calls[ZT_CE_copy2d];
    mem->alloc = t.calls[ZT_CE_alloc];
    mem->alloc_nz = t.calls[ZT_CE_alloc_nz];
    mem->dequant = t.calls[ZT_CE_nf4_dequant];
    mem->scale = t.calls[ZT_CE_scale];
    mem->fo16 = t.calls[ZT_CE_matmul_fwd_o16];
    mem->bo16 = t.calls[ZT_CE_matmul_bwd_o16];
    mem->rbd = t.calls[ZT_CE_rmsnorm_bwd16d];
    mem->rmsb = t.calls[ZT_CE_rmsnorm_bwd] + t.calls[ZT_CE_rmsnorm_bwd16] + mem->rbd;
    mem->lbd = t.calls[ZT_CE_layernorm_bwd16d];
    mem->lnb = t.calls[ZT_CE_layernorm_bwd] + t.calls[ZT_CE_layernorm_bwd16] + mem->lbd;
    mem->cpart = launches_of_k(k, nk, "k_colsum_part");
    mem->gfo16 = t.calls[ZT_CE_matmul_gelu_fwd_o16];
    mem->gelu16 = t.calls[ZT_CE_gelu_fwd16] + t.calls[ZT_CE_gelu_fwd16r];
    mem->alb16 = t.calls[ZT_CE_add_layernorm_fwd16b];
    mem->aln16 = t.calls[ZT_CE_add_layernorm_fwd16];
    mem->gdd16 = t.calls[ZT_CE_swiglu_bwd_dd16] + t.calls[ZT_CE_geglu_bwd_dd16];
    mem->gd16 = t.calls[ZT_CE_swiglu_bwd_d16] + t.calls[ZT_CE_geglu_bwd_d16];
    mem->facc16 = t.calls[ZT_CE_matmul_fwd_acc16];
    mem->bacc16 = t.calls[ZT_CE_matmul_bwd_acc16];
    mem->glu16 = t.calls[ZT_CE_swiglu_fwd16] + t.calls[ZT_CE_geglu_fwd16];
    mem->anb16 = t.calls[ZT_CE_add_rmsnorm_fwd16b];
    mem->an16 = t.calls[ZT_CE_add_rmsnorm_fwd16];
    mem->qkb = t.calls[ZT_CE_qknorm_rope_bwd16];
    mem->hnb = t.calls[ZT_CE_headnorm_bwd];
    mem->qkb_k = launches_of_k(k, nk, "k_qknorm_rope_bwd16");
    mem->hnb_k = launches_of_k(k, nk, "k_headnorm_bwd");
    mem->rope_k = launches_of_k(k, nk, "k_rope");
    mem->final_k = launches_of_k(k, nk, "k_colsum_final");
    mem->qkb_b = bytes_of_k(k, nk, "k_qknorm_rope_bwd16");
    mem->hnb_b = bytes_of_k(k, nk, "k_headnorm_bwd");
    mem->rope_b = bytes_of_k(k, nk, "k_rope");
    mem->round_b = bytes_of_k(k, nk, "k_round_bf16");
    mem->widen_b = bytes_of_k(k, nk, "k_sdpa_widen");
    mem->final_b = bytes_of_k(k, nk, "k_colsum_final");
    {
        static const char *const att[] = {"cudnnBackendExecute (SDPA backward)", "k_sdpa_round",
                                          "cudaMemsetAsync", "k_att_rowdot", "k_att_tc_round",
                                          "k_ft_bwd_dkv", "k_ft_bwd_dq"};
        for (size_t j = 0; j < sizeof att / sizeof att[0]; j++) mem->attb_b += bytes_of_k(k, nk, att[j]);
    }
    for (size_t i = 0; i < nk; i++) {
        if (!strcmp(k[i].name, "cudaMemsetAsync")) {
            mem->memset_n += k[i].launches;
            mem->memset_b += k[i].bytes * (double)k[i].launches;
        } else if (!strcmp(k[i].name, "cudaMemcpyAsync D2D")) {
            mem->d2d_n += k[i].launches;
            mem->d2d_b += k[i].bytes * (double)k[i].launches;
        }
    }
    mem->addn = t.calls[ZT_CE_add_layernorm_fwd] + t.calls[ZT_CE_add_rmsnorm_fwd] +
                t.calls[ZT_CE_add_layernorm_fwd16] + t.calls[ZT_CE_add_rmsnorm_fwd16] +
                t.calls[ZT_CE_add_rmsnorm_fwd16b] + t.calls[ZT_CE_add_layernorm_fwd16b];
    mem->from16 = launches_of_k(k, nk, "k_from_bf16");
    mem->wruns = launches_of_k(k, nk, "k_from_bf16_runs");
    mem->launches = t.launches;
    mem->rb16 = t.calls[ZT_CE_rope_bwd16];
    mem->ropeb = t.calls[ZT_CE_rope_bwd];
    mem->r16 = t.calls[ZT_CE_rope_fwd16];
    mem->rope = t.calls[ZT_CE_rope_fwd];
    mem->qkr = t.calls[ZT_CE_qknorm_rope_fwd16];
    mem->hn = t.calls[ZT_CE_headnorm_fwd];
    mem->qkr_k = launches_of_k(k, nk, "k_qknorm_rope_fwd16");
    mem->hn_k = launches_of_k(k, nk, "k_headnorm_fwd");
    mem->n16 = t.calls[ZT_CE_layernorm_fwd16] + t.calls[ZT_CE_rmsnorm_fwd16] +
               t.calls[ZT_CE_add_layernorm_fwd16] + t.calls[ZT_CE_add_rmsnorm_fwd16] +
               t.calls[ZT_CE_add_rmsnorm_fwd16b] + t.calls[ZT_CE_add_layernorm_fwd16b];
    mem->d16 = t.calls[ZT_CE_matmul_bwd_d16] + t.calls[ZT_CE_matmul_dgelu_bwd_d16] +
               t.calls[ZT_CE_layernorm_bwd16] + t.calls[ZT_CE_rmsnorm_bwd16] +
               t.calls[ZT_CE_swiglu_bwd_d16] + t.calls[ZT_CE_geglu_bwd_d16] +
               t.calls[ZT_CE_swiglu_bwd_dd16] + t.calls[ZT_CE_geglu_bwd_dd16] +
               t.calls[ZT_CE_matmul_bwd_o16] + g_bacc_d16;
    if (ctx && rc == ZT_OK && ctx->sh->m->grads && !ctx->lsh) {
        const size_t n = ctx->sh->m->num_params;
        float *g = malloc((n ? n : 1) * sizeof *g);
        if (g) {
            ctx->be->to_host(g, ctx->sh->m->grads, n * sizeof *g);
            uint64_t h = 1469598103934665603ULL;
            for (size_t i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, &g[i], sizeof b);
                if (b == 0x80000000u) {
                    mem->gneg0++;
                    b = 0;
                }
                h = (h ^ b) * 1099511628211ULL;
            }
            mem->ghave = 1;
            mem->ghash = h;
            free(g);
        }
    }
    if (ctx && ctx->have_plan) {
        mem->plan = ctx->plan.cat[ZT_MP_HOST][ZT_MEM_GATHERED] +
                    ctx->plan.cat[ZT_MP_DEVICE][ZT_MEM_GATHERED];
        mem->acts_plan = ctx->plan.cat[ZT_MP_HOST][ZT_MEM_ACTIVATIONS] +
                         ctx->plan.cat[ZT_MP_DEVICE][ZT_MEM_ACTIVATIONS];
        mem->logits_plan = ctx->plan.logits_bytes;
        mem->comm_plan = ctx->plan.cat[ZT_MP_HOST][ZT_MEM_COMM] + ctx->plan.cat[ZT_MP_DEVICE][ZT_MEM_COMM];
    }
    if (ctx) zt_ctx_free(ctx);
    if (c) zt_config_free(c);
    zt_count_reset();
    return rc;
}

/* The bounds of the bf16 activations' losses and gradient norms (bf16
 * activations, below, says why these) */
#define ACT16_LOSS_TOL 0x1p-12
#define ACT16_GNORM_TOL 0x1p-9

/* A bf16 section's check: the path under test against the one without it
 * (w16_run with the no_w16 bit `bit` added), and how their losses compare */
typedef struct w16_kind {
    w16_bits bit;          /* the no_w16 bit of the run without */
    const char *steps;     /* the words after "4 steps" */
    const char *ref;       /* the path the losses are held against (NULL: not here) */
    const char *rounded;   /* NULL: bitwise; else within ACT16_*_TOL and not bitwise, for this */
} w16_kind;
/* one case's two runs: a with the path, b without; s set by the caller */
typedef struct w16_pair {
    cm_shape s;
    double a[4][2], b[4][2];
    long wa, wb, ra, rb;
    w16_mem ma, mb;
} w16_pair;
/* the counts a check holds the same in both runs of a pair (w16_same, or'ed) */
enum {
    W16_SAME_ROUNDS = 1 << 0,    /* ra, rb: k_round_bf16 launches */
    W16_SAME_W16 = 1 << 1,       /* wa, wb: bf16-weight calls */
    /* w16_mem's counts of those names (o16, n16, a16, d16, ao16, ab16, h16,
     * to16, from16) */
    W16_SAME_O16 = 1 << 2,
    W16_SAME_N16 = 1 << 3,
    W16_SAME_A16 = 1 << 4,
    W16_SAME_D16 = 1 << 5,
    W16_SAME_AO16 = 1 << 6,
    W16_SAME_AB16 = 1 << 7,
    W16_SAME_H16 = 1 << 8,
    W16_SAME_TO16 = 1 << 9,
    W16_SAME_FROM16 = 1 << 10,
    W16_SAME_ACTS = 1 << 11,     /* the activations' peak and plan */
    W16_SAME_GATHERED = 1 << 12, /* the gathered parameters' peak and plan */
};
/* 1 when every count of `same` (W16_SAME_*) is the same in both runs */
static int w16_same(const w16_pair *p, unsigned same) {
    const w16_mem *a = &p->ma, *b = &p->mb;
    const struct { unsigned bit; int eq; } t[] = {
        {W16_SAME_ROUNDS, p->ra == p->rb},
        {W16_SAME_W16, p->wa == p->wb},
        {W16_SAME_O16, a->o16 == b->o16},
        {W16_SAME_N16, a->n16 == b->n16},
        {W16_SAME_A16, a->a16 == b->a16},
        {W16_SAME_D16, a->d16 == b->d16},
        {W16_SAME_AO16, a->ao16 == b->ao16},
        {W16_SAME_AB16, a->ab16 == b->ab16},
        {W16_SAME_H16, a->h16 == b->h16},
        {W16_SAME_TO16, a->to16 == b->to16},
        {W16_SAME_FROM16, a->from16 == b->from16},
        {W16_SAME_ACTS, a->acts_peak == b->acts_peak && a->acts_plan == b->acts_plan},
        {W16_SAME_GATHERED, a->peak == b->peak && a->plan == b->plan}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if ((same & t[i].bit) && !t[i].eq) return 0;
    return 1;
}
/* Runs both at `stage` with `extra` (no_w16 `no`, then no | k->bit), each
 * failure a diagnostic named `what`; checks the 4 steps ran and the losses
 * and gradient norms, both named `label`.  0 when a run failed (the counts
 * are not to be checked). */
static int w16_pair_run(w16_pair *p, const w16_kind *k, int stage, const char *extra, w16_bits no,
                        const char *what, const char *label) {
    zt_status st;
    memset(&st, 0, sizeof st);
    p->wa = p->wb = p->ra = p->rb = 0;
    const int r1 = w16_run(&p->s, stage, extra, no, p->a, &p->wa, &p->ra, &p->ma, &st);
    if (r1) tap_diag("%s: %s", what, st.msg);
    const int r2 =
        r1 ? r1 : w16_run(&p->s, stage, extra, no | k->bit, p->b, &p->wb, &p->rb, &p->mb, &st);
    if (!r1 && r2) tap_diag("%s: %s", what, st.msg);
    if (!tap_ok(!r1 && !r2, "%s bf16: 4 steps%s", label, k->steps)) return 0;
    if (!k->ref) return 1;
    const double(*a)[2] = p->a, (*b)[2] = p->b;
    if (!k->rounded) {
        tap_ok(!memcmp(a, b, sizeof p->a),
               "%s: losses and gradient norms bitwise the %s (%.9g %.9g ... %.9g)", label, k->ref,
               a[0][0], a[1][0], a[3][0]);
        return 1;
    }
    /* the largest relative differences of the losses and of the gradient
     * norms (steps 1-4) */
    double dl = 0, dg = 0;
    for (int i = 0; i < 4; i++) {
        const double el = fabs(a[i][0] - b[i][0]) / fabs(b[i][0]);
        const double eg = fabs(a[i][1] - b[i][1]) / fabs(b[i][1]);
        if (el > dl) dl = el;
        if (eg > dg) dg = eg;
    }
    tap_ok(memcmp(a, b, sizeof p->a) != 0 && dl <= ACT16_LOSS_TOL && dg <= ACT16_GNORM_TOL,
           "%s: losses within %.2g relative of the %s (%.3g; %.9g %.9g ... %.9g), gradient norms "
           "within %.2g (%.3g), not bitwise (%s)",
           label, ACT16_LOSS_TOL, k->ref, dl, a[0][0], a[1][0], a[3][0], ACT16_GNORM_TOL, dg,
           k->rounded);
    return 1;
}

/* The cases of bf16 outputs, norms and gradients: GPT-2 and Llama (and
 * Gemma 2), stages 0 and 3, with activation checkpointing and without,
 * LoRA */
static const char w16_ck[] = "activation_checkpointing.policy=blocks";
static const char w16_gemma[] = "ztrain.model.gemma=2";
static const char w16_lora[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear";
static const char w16_qv[] = "ztrain.lora.r=8 ztrain.lora.alpha=16 ztrain.lora.targets=q_proj,v_proj";
/* the LoRA cases (all-linear, r 4) many sections share: checkpointed,
 * QLoRA's nf4 base, the fp32 matmuls, the adapters' dropout */
static const char w16_lck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "activation_checkpointing.policy=blocks";
static const char w16_lnf4[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.base=nf4";
static const char w16_lf32[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "bf16.enabled=false";
static const char w16_ldrop[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.dropout=0.25";
/* a case: the shape, the stage, the extra config words, and the section's
 * own number (the no_w16 bits of both runs, or whether the path is taken) */
typedef struct w16_case {
    const char *shape;
    int stage;
    const char *extra;
    w16_bits arg;
} w16_case;
/* an extra's name in the case's name */
typedef struct w16_xname {
    const char *extra, *name;
} w16_xname;
static const w16_xname w16_names[] = {
    {w16_ck, " checkpointed"}, {w16_gemma, " gemma"}, {w16_lora, " LoRA"},
    {w16_qv, " LoRA q_proj,v_proj"}, {w16_lck, " LoRA checkpointed"}, {w16_lnf4, " QLoRA"},
    {w16_lf32, " LoRA fp32"}, {w16_ldrop, " LoRA dropout"}, {NULL, NULL}};
static const w16_case w16_common[] = {
    {"gpt2:2,2,32,64,2,16", 0, NULL, 0}, {"gpt2:2,2,32,64,2,16", 3, w16_ck, 0},
    {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},
    {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0},
    {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}};
/* ZT_TEST_NO_BRANCH16's bit for a Llama shape, ZT_TEST_NO_GBRANCH16's for
 * a GPT-2 shape: the sections whose counts and bitwise losses hold the fp32
 * residual branch (the o / down or the projections' outputs in bf16 depend
 * on the paths they switch off: branch16, gpt_branch16 below) */
static w16_bits w16_nobr16(const char *shape) {
    if (!strncmp(shape, "gpt2", 4)) return 17592186044416ULL;
    return strncmp(shape, "llama", 5) ? 0 : 4294967296ULL;
}
/* w16_pair_run on case c with no_w16 `no`, named (in what, n bytes) "shape
 * stage N", the extra's name (own's, else w16_names'; none: ""), the
 * hooks of `no` (" ZT_TEST_NO_..." each) and tail (NULL: none) */
static int w16_case_run(w16_pair *p, const w16_kind *k, const w16_case *c, w16_bits no,
                        const w16_xname *own, const char *tail, char *what, size_t n) {
    cm_shape_parse(c->shape, &p->s);
    const char *xn = "";
    for (const w16_xname *t = own; c->extra && t && t->extra && !*xn; t++)
        if (t->extra == c->extra) xn = t->name;
    for (const w16_xname *t = w16_names; c->extra && t->extra && !*xn; t++)
        if (t->extra == c->extra) xn = t->name;
    size_t m = (size_t)snprintf(what, n, "%s stage %d%s", c->shape, c->stage, xn);
    for (size_t i = 0; i < W16_NHOOKS && m < n; i++)
        if (no & w16_hooks[i].bit) m += (size_t)snprintf(what + m, n - m, " %s", w16_hooks[i].env);
    if (tail && m < n) snprintf(what + m, n - m, "%s", tail);
    return w16_pair_run(p, k, c->stage, c->extra, no, what, what);
}

/* ZT_TEST_NO_DH16's bit for a Llama shape (else 0): the down projection's
 * input gradient dh in fp32 (SwiGLU / GeGLU's backward reading it,
 * swiglu_bwd_d16); the bf16 dh, not bitwise, is bf16_dh16's */
static w16_bits w16_dh32(const char *shape) {
    return !strncmp(shape, "llama", 5) ? 17179869184ULL : 0;
}
/* ZT_TEST_NO_DOUT16N's bit for a Llama shape, and ZT_TEST_NO_DH16's
 * (w16_dh32); for a GPT-2 shape ZT_TEST_NO_GPTN16's, ZT_TEST_NO_LNSUM's,
 * ZT_TEST_NO_GELUE's, ZT_TEST_NO_GBRANCH16's and ZT_TEST_NO_MLPSUM's: the
 * sections whose counts and bitwise losses are those of the fp32
 * norm-output gradient (q|k|v's and gate|up's, GPT-2's fc's and q|k|v's
 * dinp in fp32), of the fp32 dh, of the projections' own bias column sums,
 * of GPT-2's GELU on the rounded fc output and of its fp32 residual
 * branches set them in both runs; the bf16 gradients, not bitwise, are
 * bf16_dout16n's, bf16_dh16's and gpt_norm16's, the bias sums gpt_norm16's
 * and gpt_mlpsum's, the fused GELU and the bf16 branches gpt_gelue's */
static w16_bits w16_dout32(const char *shape) {
    if (!strncmp(shape, "gpt2", 4))
        return 2199023255552ULL | 4398046511104ULL | 8796093022208ULL | 17592186044416ULL |
               1125899906842624ULL;
    return !strncmp(shape, "llama", 5) ? 8589934592ULL | w16_dh32(shape) : 0;
}

static void bf16_weights(void) {
    static const w16_kind kind = {1, " with and without the bf16 weights", "rounding path's", NULL};
    /* (a Llama block's GEMMs: q|k|v, o, gate|up, down) */
    /* (extra: LoRA's frozen base, its adapters on every linear layer; QLoRA;
     * a Mixture of Experts with a shared expert: every GEMM of its blocks,
     * the router's and the routed experts' (moe.c) too, takes the bf16
     * weights) */
    static const char lora[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear";
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24 ztrain.model.shared_expert_size=16";
    static const struct { const char *shape; int stage; const char *extra; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL}, {"gpt2:2,2,32,64,2,16", 1, NULL},
        {"gpt2:2,2,32,64,2,16", 2, NULL}, {"gpt2:2,2,32,64,2,16", 3, NULL},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL}, {"llama:2,4,2,32,48,64,2,16,untied", 1, NULL},
        {"llama:2,4,2,32,48,64,2,16", 3, NULL}, {"gpt2:2,2,32,64,2,16", 2, lora},
        {"llama:2,4,2,32,48,64,2,16", 0, lora}, {"llama:2,4,2,32,48,64,2,16,untied", 3, lora},
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4},
        {"llama:2,4,2,32,48,1024,2,16,untied", 3, w16_lnf4},
        {"llama:2,4,2,32,48,64,2,16", 0, moe}, {"llama:2,4,2,32,48,64,2,16,untied", 2, moe},
        {"llama:2,4,2,32,48,64,2,16", 3, moe}, {"llama:2,4,2,32,48,64,2,16,untied", 3, NULL},
        {"gpt2:2,2,32,64,2,16", 3, lora}, {"llama:2,4,2,32,48,1024,2,16", 3, w16_lnf4},
        {"llama:2,4,2,32,48,1024,2,16", 0, w16_lnf4}, {"llama:2,4,2,32,48,64,2,16", 2, NULL},
        {"llama:2,4,2,32,48,64,2,16,untied", 2, lora}, {"llama:2,4,2,32,48,1024,2,16", 1, w16_lnf4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        cm_shape_parse(cases[i].shape, &p.s);
        const char *ex = cases[i].extra;
        char what[96];
        snprintf(what, sizeof what, "%s%s", cases[i].shape,
                 ex == lora ? " LoRA" : ex == w16_lnf4 ? " QLoRA" : ex == moe ? " MoE" : "");
        char label[112];
        snprintf(label, sizeof label, "%s stage %d", what, cases[i].stage);
        /* (the activations in fp32: every GEMM through the *_w16 entries;
         * the adapters' GEMMs rounding their fp32 weights, ZT_TEST_NO_LORA16:
         * the base's GEMMs counted) */
        if (!w16_pair_run(&p, &kind, cases[i].stage, ex, 2 | 134217728, what, label)) continue;
        /* a step (GPT-2, Llama): 4 GEMM calls forward and 4 backward per block; the
         * head's 2 chunks forward and backward (fused in the forward,
         * classifier.h: no chunk's logits again); 4 steps.  Stage 3:
         * the GEMMs read the gathered unit, the tied head's too (the
         * embedding is the encoder's zt_enc_fwd's only other reader: it reads
         * the bf16 bits, so the table is a GEMM-only tensor).
         * Each call rounds no weight.  QLoRA: the blocks' weights are NF4,
         * dequantized straight into bf16 (shard_nf4.c), the head's bf16.  A
         * Mixture of Experts (E = 4, every expert taking rows in every
         * block and step of these tokens' routing): per block forward and
         * backward q|k|v, o, the router, the shared expert's gate|up, down
         * and gate, and each expert's gate|up and down, 6 + 2 E calls. */
        const long want = ex == moe ? 4L * (2 * p.s.L * (6 + 2 * 4) + 2 + 2) : 4L * (8 * p.s.L + 2 + 2);
        /* the embedding lookup: one a step, on the bf16 table */
        tap_ok(p.ma.enc16 == 4 && p.ma.enc == 0 && p.mb.enc16 == 0 && p.mb.enc == 4,
               "%s stage %d: the embedding lookup on the bf16 table: %ld calls (%ld on fp32; "
               "without: %ld and %ld)",
               what, cases[i].stage, p.ma.enc16, p.ma.enc, p.mb.enc16, p.mb.enc);
        tap_ok(p.wa == want && p.wb == 0 && p.ra == p.rb - want,
               "%s stage %d: %ld bf16-weight calls (%ld without), %ld weight roundings fewer", what,
               cases[i].stage, p.wa, p.wb, p.rb - p.ra);
        /* the fp32 copy leaves the GEMM weights out: its accounted peak is
         * the plan's, below the rounding path's, and the widening moves
         * fewer bytes */
        tap_ok(p.ma.peak == p.ma.plan && p.mb.peak == p.mb.plan && p.ma.peak < p.mb.peak &&
                   p.ma.widened < p.mb.widened,
               "%s stage %d: the fp32 copies' peak %llu bytes (planned %llu; %llu without the bf16 "
               "weights, planned %llu), widened %.0f bytes (%.0f)",
               what, cases[i].stage, (unsigned long long)p.ma.peak, (unsigned long long)p.ma.plan,
               (unsigned long long)p.mb.peak, (unsigned long long)p.mb.plan, p.ma.widened,
               p.mb.widened);
    }
}

/* ------------------------------------------------------------ QLoRA NF4 weights in bf16
 * QLoRA's NF4 block weights dequantized straight into bf16 (shard_nf4.c)
 * against the fp32 copy's path (ZT_TEST_NO_NF4W16=1, read at the setup):
 * 4 steps, stages 0 and 3, tied and untied head, nf4 and nf4-dq: losses and
 * gradient norms bitwise; the blocks' GEMMs (4 forward, 4 backward a block
 * and step) take the bf16-weight entries and round no weight, the fp32
 * copy leaves the NF4 matrices out (fewer bytes widened, fewer k_to_bf16),
 * and the fp32 copies' accounted peak is the plan's, below the fp32 copy
 * path's (untied: not above it; the head's unit makes the peak). */
static void bf16_nf4w16(void) {
    static const w16_kind kind = {
        512, " with the NF4 weights dequantized into bf16 and into the fp32 copy",
        "fp32 copy's path's", NULL};
    static const char dq[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=q_proj,down_proj "
                             "ztrain.lora.base=nf4-dq activation_checkpointing.policy=blocks";
    static const struct { const char *shape; int stage; const char *extra; } cases[] = {
        {"llama:2,4,2,32,48,1024,2,16", 0, w16_lnf4}, {"llama:2,4,2,32,48,1024,2,16", 3, w16_lnf4},
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4},
        {"llama:2,4,2,32,48,1024,2,16,untied", 3, w16_lnf4},
        {"llama:2,4,2,32,48,1024,2,16", 3, dq}, {"llama:2,4,2,32,48,1024,2,16,untied", 0, dq}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        cm_shape_parse(cases[i].shape, &p.s);
        const char *ex = cases[i].extra;
        char what[128];
        snprintf(what, sizeof what, "%s stage %d QLoRA %s", cases[i].shape, cases[i].stage,
                 ex == dq ? "nf4-dq checkpointed" : "nf4");
        /* (the activations in fp32: every GEMM through the *_w16 entries;
         * the adapters' GEMMs rounding their fp32 weights, ZT_TEST_NO_LORA16:
         * the base's GEMMs counted) */
        if (!w16_pair_run(&p, &kind, cases[i].stage, ex, 2 | 134217728, what, what)) continue;
        /* (checkpointed: the blocks' forward GEMMs twice) */
        /* (the head: 2 chunks forward and backward, fused: classifier.h) */
        const long blocks = 4L * p.s.L * (4 * (1 + (ex == dq)) + 4), head = 4L * (2 + 2);
        tap_ok(p.wa == blocks + head && p.wb == head && p.rb - p.ra == blocks,
               "%s: %ld bf16-weight calls (%ld expected; %ld on the fp32 copy's path, the head's), "
               "%ld weight roundings fewer", what, p.wa, blocks + head, p.wb, p.rb - p.ra);
        /* (untied: the peak is the head unit's, the same either way) */
        tap_ok(p.ma.peak == p.ma.plan && p.mb.peak == p.mb.plan &&
                   (p.s.untied ? p.ma.peak <= p.mb.peak : p.ma.peak < p.mb.peak) &&
                   p.ma.widened < p.mb.widened && p.ma.to16 < p.mb.to16,
               "%s: the fp32 copies' peak %llu bytes (planned %llu; %llu on the fp32 copy's path, "
               "planned %llu), widened %.0f bytes (%.0f), %ld k_to_bf16 (%ld)",
               what, (unsigned long long)p.ma.peak, (unsigned long long)p.ma.plan,
               (unsigned long long)p.mb.peak, (unsigned long long)p.mb.plan, p.ma.widened,
               p.mb.widened, p.ma.to16, p.mb.to16);
    }
}

/* ------------------------------------------------------------ bf16 activations
 * The saved activations only GEMMs read (the norms' outputs, the MLP's
 * GELU / SwiGLU output) are kept in bf16 and read by the *_a16 entries, and
 * so are the GEMM outputs q|k|v, the attention output and fc's (GPT-2) or
 * gate|up (Llama), whose other readers (the attention, GELU, SwiGLU) read
 * the rounded values: every loss and gradient norm of a few steps within a
 * bound of those of the fp32 activations (ZT_TEST_NO_ACT16=1), and not
 * bitwise, with the bf16 weights, GPT-2 and Llama, stages 0 and 3, with
 * activation checkpointing and without, a LoRA base; the activations'
 * accounted peak is the plan's and below the fp32 one's.
 * The bounds, from bf16's unit roundoff u = 2^-8 (each rounded value is
 * within u of its fp32 value, relative): a gradient norm within u/2 = 2^-9
 * (measured at most 7.7e-4, Llama LoRA), a loss, the mean of many tokens'
 * whose rounding errors partly cancel, within u/16 = 2^-12 (measured at
 * most 2.4e-5). */
static void bf16_activations(void) {
    static const w16_kind kind = {2, " with and without the bf16 activations", "fp32 activations'",
                                  "the GEMM outputs rounded"};
    static const char ck[] = "activation_checkpointing.policy=blocks";
    static const char lora[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear";
    static const struct { const char *shape; int stage; const char *extra; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL}, {"gpt2:2,2,32,64,2,16", 3, ck},
        {"gpt2:2,2,32,64,2,16", 3, lora}, {"gpt2:2,2,32,64,2,16", 0, w16_lck},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL}, {"llama:2,4,2,32,48,64,2,16,untied", 3, NULL},
        {"llama:2,4,2,32,48,64,2,16", 0, ck}, {"llama:2,4,2,32,48,64,2,16,untied", 3, ck},
        {"llama:2,4,2,32,48,64,2,16", 0, lora}, {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        cm_shape_parse(cases[i].shape, &p.s);
        const char *ex = cases[i].extra;
        const int is_lora = ex == lora || ex == w16_lck, is_ck = ex == ck || ex == w16_lck;
        char what[96];
        snprintf(what, sizeof what, "%s stage %d%s%s", cases[i].shape, cases[i].stage,
                 is_lora ? " LoRA" : "", is_ck ? " checkpointed" : "");
        /* (LoRA: the backward's order of before, ZT_TEST_NO_BWDSWAP, whose
         * base dinp GEMMs these counts name: q|k|v's an a16 call; lora_bswap) */
        if (!w16_pair_run(&p, &kind, cases[i].stage, ex, is_lora ? 16777216 : 0, what, what)) continue;
        /* a block's four GEMMs reading a bf16 input (q|k|v, the attention
         * projection, fc / gate|up, the MLP's projection) forward, again
         * when recomputed, and backward; LoRA's adapters on them: x A^T
         * forward, and backward dA (h kept from the forward, lora.h
         * zt_lora_scratch.keep: no x A^T again), and the two GEMMs
         * reading dy of each group whose dy the model has in bf16 (lora.h
         * dy16: GPT-2's projections and fc, its gradient rounded once,
         * config.h ZT_W16_GPT16, 3; Llama's o, gate|up and down, 3) */
        const long fwd = 1 + is_ck, g16 = is_lora ? 3 : 0,
                   want = 4L * p.s.L * (4 * fwd * (1 + is_lora) + 4 * (1 + is_lora) + 2 * g16);
        tap_ok(p.ma.a16 == want && p.mb.a16 == 0 && p.ra < p.rb,
               "%s: %ld bf16-input calls (%ld without; %d expected), %ld roundings (%ld without)",
               what, p.ma.a16, p.mb.a16, (int)want, p.ra, p.rb);
        /* (the plan also has the host token arrays a GPU run's data source
         * writes, which this test's source does not: the same bytes in both) */
        tap_ok(p.ma.acts_peak < p.mb.acts_peak &&
                   p.ma.acts_plan - p.ma.acts_peak == p.mb.acts_plan - p.mb.acts_peak &&
                   p.ma.acts_plan - p.ma.acts_peak == 2 * (uint64_t)p.s.B * p.s.T * 4,
               "%s: activations' peak %llu bytes (planned %llu), fp32 activations %llu (planned %llu)",
               what, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.ma.acts_plan,
               (unsigned long long)p.mb.acts_peak, (unsigned long long)p.mb.acts_plan);
    }
}

/* ------------------------------------------------------------ bf16 outputs
 * The bf16 GEMM outputs and MLP activations written directly (backend.h
 * matmul_fwd_o16: a bf16-output GEMM; gelu_fwd16, swiglu / geglu _fwd16 and
 * _bwd16 reading and writing bf16; the attention reading the bf16 q|k|v,
 * gqa_ext_fwd16 / _bwd16): every loss and gradient norm bitwise
 * those of the fp32 values rounded by to_bf16 (ZT_TEST_NO_O16=1, the path
 * of before), GPT-2 and Llama (and Gemma's GeGLU), stages 0 and 3, with
 * activation checkpointing and without, LoRA; per block and forward (recomputed
 * too) GPT-2's q|k|v and fc GEMMs and the GELU (3), Llama's gate|up GEMM
 * and SwiGLU (2), and SwiGLU's backward take the new entries, and 3 (GPT-2) or 2
 * (Llama) k_to_bf16 fewer a forward (with LoRA, whose adapters add into the
 * fp32 GEMM outputs, rounded once after: the GELU / SwiGLU, 1, and fc's /
 * gate|up's rounding in the fused entry, gelu_fwd16r / swiglu_fwd16r, 1), and
 * the attention forward and backward (its
 * output written in bf16 too, gqa_ext_fwd16o: one k_to_bf16 fewer a
 * forward, LoRA too); the activations' peak unchanged. */
static void bf16_outputs(void) {
    static const w16_kind kind = {4, " with and without the bf16-output entries", "to_bf16 path's",
                                  NULL};
    for (size_t i = 0; i < sizeof w16_common / sizeof w16_common[0]; i++) {
        const w16_case *c = &w16_common[i];
        const int is_ck = c->extra == w16_ck, is_lora = c->extra == w16_lora;
        w16_pair p;
        char what[128];
        /* (Llama LoRA: gate|up's fp32 delta, ZT_TEST_NO_GU16: the counts
         * below; its bf16 delta, not bitwise, is lora_gu16's) */
        /* (ZT_TEST_NO_BRANCH16: o's and down's fp32 outputs, the counts
         * below; their bf16 ones are branch16's) */
        if (!w16_case_run(&p, &kind, c,
                          (is_lora && !strncmp(c->shape, "llama", 5) ? 536870912 : 0) |
                              w16_nobr16(c->shape) | w16_dout32(c->shape),
                          NULL, NULL, what, sizeof what))
            continue;
        /* forwards a step: 1, or 2 checkpointed (the recompute) */
        const long fwd = 1 + is_ck;
        /* (the attention forward and backward too; with LoRA the GEMMs
         * keep the to_bf16 path, the forward's GELU / SwiGLU read and
         * write bf16) */
        const long want = 4L * p.s.L *
                          (fwd + 1 + (is_lora ? p.s.llama + fwd : p.s.llama ? 2 * fwd + 1 : 3 * fwd));
        /* (and the attention output's, which the attention writes in bf16
         * itself, gqa_ext_fwd16o, with LoRA too) */
        const long fewer = 4L * p.s.L * fwd * ((is_lora ? 2 : p.s.llama ? 2 : 3) + 1);
        /* (Llama: without them SwiGLU's backward is the fp32 one, which
         * writes no bf16 copy of gate|up's gradient (bf16 gradients): its
         * GEMMs round it, one k_round_bf16 more a block, and with LoRA the
         * two adapter GEMMs reading it (lora.h dy16), two more) */
        const long more = p.s.llama ? 4L * p.s.L * (1 + 2 * is_lora) : 0;
        tap_ok(p.ma.o16 == want && p.mb.o16 == 0 && p.mb.to16 - p.ma.to16 == fewer &&
                   p.rb - p.ra == more && p.ma.acts_peak == p.mb.acts_peak,
               "%s: %ld bf16-output calls (%ld expected, %ld without), %ld k_to_bf16 (%ld without, %ld "
               "fewer expected), %ld roundings (%ld without), activations' peak %llu bytes (%llu without)",
               what, p.ma.o16, want, p.mb.o16, p.ma.to16, p.mb.to16, fewer, p.ra, p.rb,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ bf16 norms
 * The norms writing the bf16 normalized activations directly (backend.h
 * layernorm_fwd16, rmsnorm_fwd16, add_layernorm_fwd16, add_rmsnorm_fwd16):
 * every loss and gradient norm bitwise those of the fp32 norm rounded by
 * to_bf16 (ZT_TEST_NO_N16=1, the path of before), GPT-2 and Llama (and
 * Gemma 2), stages 0 and 3, with activation checkpointing and without,
 * LoRA; per block and forward (recomputed too) the two norms take the new
 * entries (the second the fused residual add), 2 k_to_bf16 fewer, and so
 * does the final norm (the LM head's bf16 input) once a forward; the other
 * counts and the activations' peak unchanged. */
static void bf16_norms(void) {
    static const w16_kind kind = {8, " with and without the bf16 norms",
                                  "fp32 norms + to_bf16 path's", NULL};
    for (size_t i = 0; i < sizeof w16_common / sizeof w16_common[0]; i++) {
        const w16_case *c = &w16_common[i];
        const int is_ck = c->extra == w16_ck;
        w16_pair p;
        char what[128];
        /* (ZT_TEST_NO_BRANCH16 in both runs: without the bf16 norms the
         * fp32 branch's path, branch16 below) */
        if (!w16_case_run(&p, &kind, c, w16_nobr16(c->shape), NULL, NULL, what, sizeof what))
            continue;
        /* forwards a step: 1, or 2 checkpointed (the recompute); 2 norms a
         * block, and the final norm once a step */
        const long want = 4L * p.s.L * (1 + is_ck) * 2 + 4;
        tap_ok(p.ma.n16 == want && p.mb.n16 == 0 && p.mb.to16 - p.ma.to16 == want &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_ACTS),
               "%s: %ld bf16-norm calls (%ld expected, %ld without), %ld k_to_bf16 (%ld without), "
               "activations' peak %llu bytes (%llu without)",
               what, p.ma.n16, want, p.mb.n16, p.ma.to16, p.mb.to16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ bf16 RoPE
 * RoPE writing the bf16 q|k|v directly (backend.h rope_fwd16): every loss
 * and gradient norm bitwise those of rope_fwd rounded by to_bf16
 * (ZT_TEST_NO_R16=1, the path of before), Llama (Qwen3's q/k norms, Gemma
 * 2), stages 0 and 3, with activation checkpointing and without, LoRA, and
 * with the attention reading fp32 (ZT_TEST_NO_O16: q|k|v widened back);
 * per block and forward (recomputed too) one rope_fwd16 (Qwen3's q/k
 * norms: one qknorm_rope_fwd16, below), one rope_fwd and one k_to_bf16
 * fewer, the other counts and the activations' peak unchanged.  GPT-2 (no
 * RoPE): no call, nothing else changes. */
static void bf16_rope(void) {
    static const w16_kind kind = {16, " with and without the bf16 RoPE",
                                  "rope_fwd + to_bf16 path's", NULL};
    static const char qwen3[] = "ztrain.model.qk_norm=true";
    static const w16_xname names[] = {{qwen3, " qk_norm"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, {"llama:2,4,2,32,48,64,2,16", 3, qwen3, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 4},
        {"gpt2:2,2,32,64,2,16", 0, NULL, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[128];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const char *ex = c->extra;
        const int is_ck = ex == w16_ck, gpt2 = !strncmp(c->shape, "gpt2", 4);
        /* forwards a step: 1, or 2 checkpointed (the recompute); 1 RoPE a block */
        const long want = gpt2 ? 0 : 4L * p.s.L * (1 + is_ck);
        tap_ok(p.ma.r16 + p.ma.qkr == want && p.ma.qkr == (ex == qwen3 ? want : 0) && p.mb.r16 == 0 &&
                   p.mb.qkr == 0 && p.ma.rope == 0 && p.mb.rope == want &&
                   p.mb.to16 - p.ma.to16 == want &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 |
                                W16_SAME_ACTS),
               "%s: %ld rope_fwd16 calls (%ld expected, %ld without), %ld rope_fwd (%ld without), "
               "%ld k_to_bf16 (%ld without), activations' peak %llu bytes (%llu without)",
               what, p.ma.r16, want, p.mb.r16, p.ma.rope, p.mb.rope, p.ma.to16, p.mb.to16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ the stand-in's blocks
 * The counting stand-in over the cpu backend (w16_run's) has host memory:
 * the accounted blocks are mem.c's host blocks, and count.c's CUDA rules
 * read their pointers (matmul_bwd_head16's dout16, the head's bf16 logits in
 * the activation block: nothing launched when not 256-byte aligned; a bf16
 * operand not 256-byte aligned: a device copy).  Every block is 256-byte
 * aligned, as the cuda backend's cudaMalloc blocks, whatever the heap's
 * layout (with 64, the counts of two runs of one model differed as it
 * varied), small blocks and large (mmap'd) ones, with odd-sized heap
 * allocations between them. */
static void stand_in_blocks(void) {
    static const size_t sizes[] = {1, 3, 60, 64, 100, 255, 256, 1000, 4096, 4100, 65536 + 12,
                                   200000, 1u << 20, (1u << 20) + 4, 64u << 20};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    void *p[NS], *q[NS];
    zt_status st;
    memset(&st, 0, sizeof st);
    zt_mem_set_backend(zt_backend_count_over(zt_backend_cpu()));
    int ok = 1;
    size_t bad = 0;
    for (size_t i = 0; i < NS; i++) {
        q[i] = malloc(1 + 24 * i);   /* (the heap moved along between the blocks) */
        p[i] = zt_mem_alloc(sizes[i], ZT_MEM_ACTIVATIONS, &st);
        if (!p[i] || ((uintptr_t)p[i] & 255)) {
            if (ok) bad = sizes[i];
            ok = 0;
        }
    }
    for (size_t i = 0; i < NS; i++) {
        zt_mem_free(p[i]);
        free(q[i]);
    }
    zt_mem_set_backend(NULL);
    char why[64] = "";
    if (!ok) snprintf(why, sizeof why, "; not the one of %zu bytes", bad);
    tap_ok(ok, "the stand-in's accounted blocks (host memory): %d blocks of 1 byte to 64 MiB, each "
           "256-byte aligned (as cudaMalloc's)%s", (int)NS, why);
}

/* ------------------------------------------------------------ Qwen3's q/k norms and RoPE
 * Qwen3's q/k norms and RoPE in one entry writing the bf16 q|k|v
 * (backend.h qknorm_rope_fwd16): every loss and gradient norm bitwise
 * those of headnorm_fwd on the q and k heads then rope_fwd16
 * (ZT_TEST_NO_QKR16=1, the path of before), per head (Qwen3) and over the
 * whole projections (qk_norm_full, OLMoE), Gemma 3's 1 + w weights, stages
 * 0 and 3, with activation checkpointing and without, LoRA, and with the
 * attention reading fp32 (ZT_TEST_NO_O16); per block and forward
 * (recomputed too) one qknorm_rope_fwd16 (one k_qknorm_rope_fwd16 launch)
 * for two headnorm_fwd and one rope_fwd16 (three launches), the other
 * counts (k_to_bf16, the bf16-output and norm entries) and the
 * activations' peak unchanged.  Without q/k norms: no call. */
static void bf16_qknorm_rope(void) {
    static const w16_kind kind = {1024, " with and without the fused q/k norms and RoPE",
                                  "headnorm_fwd + rope_fwd16 path's", NULL};
    static const char ck[] = "ztrain.model.qk_norm=true activation_checkpointing.policy=blocks";
    static const char qwen3[] = "ztrain.model.qk_norm=true";
    static const char full[] = "ztrain.model.qk_norm=true ztrain.model.qk_norm_full=true";
    static const char gemma3[] = "ztrain.model.qk_norm=true ztrain.model.gemma=3";
    static const char lora[] = "ztrain.model.qk_norm=true ztrain.lora.r=4 ztrain.lora.alpha=8 "
                               "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{qwen3, " qk_norm"}, {ck, " qk_norm checkpointed"},
                                      {full, " qk_norm full"}, {gemma3, " qk_norm gemma 3"},
                                      {lora, " qk_norm LoRA"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, qwen3, 0}, {"llama:2,4,2,32,48,64,2,16", 3, qwen3, 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, ck, 0}, {"llama:2,4,2,32,48,64,2,16", 0, full, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, gemma3, 0}, {"llama:2,4,2,32,48,64,2,16", 3, lora, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, qwen3, 4}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const char *ex = c->extra;
        const int is_ck = ex == ck;
        /* forwards a step: 1, or 2 checkpointed (the recompute); 1 a block */
        const long want = ex ? 4L * p.s.L * (1 + is_ck) : 0, r16 = 4L * p.s.L * (1 + is_ck);
        tap_ok(p.ma.qkr == want && p.mb.qkr == 0 && p.ma.qkr_k == want && p.mb.qkr_k == 0 &&
                   p.mb.hn - p.ma.hn == 2 * want && p.mb.hn_k - p.ma.hn_k == 2 * want &&
                   p.ma.r16 == r16 - want && p.mb.r16 == r16 && p.ma.rope == 0 && p.mb.rope == 0 &&
                   w16_same(&p, W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 | W16_SAME_TO16 |
                                W16_SAME_FROM16 | W16_SAME_ACTS),
               "%s: %ld qknorm_rope_fwd16 calls, %ld launches (%ld expected, %ld without), "
               "headnorm_fwd %ld (%ld without), rope_fwd16 %ld (%ld without), %ld k_to_bf16 (%ld "
               "without), activations' peak %llu bytes (%llu without)",
               what, p.ma.qkr, p.ma.qkr_k, want, p.mb.qkr, p.ma.hn, p.mb.hn, p.ma.r16, p.mb.r16,
               p.ma.to16, p.mb.to16, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ bf16 logits
 * The LM head's logits in bf16, as autocast has them (classifier.h: the
 * head GEMM writes them, matmul_fwd_o16 without tmp; xent16_fwd's losses,
 * xent16_fused's bf16 gradient in place, matmul_bwd_head16 reading it;
 * fused in a training step's forward: xent16_fused gives the losses too):
 * against the fp32 logits (ZT_TEST_NO_L16=1, the path of before), GPT-2
 * and Llama (tied and untied head), stages 0 and 3, in chunks of rows (2;
 * 7 of 5 rows) and in one chunk, LoRA (a frozen head: no dw): 4 steps'
 * losses and gradient norms within the bounds of the bf16 activations (not
 * bitwise: the logits are rounded); every chunk takes the new entries and
 * no fp32 xent runs; the plan's chunk is the bf16 [R, V] (the fp32 one
 * before), the activations' peak lower by the difference (up to 252 bytes
 * of the bf16 array's alignment) and still the plan's. */
static void bf16_logits(void) {
    static const w16_kind kind = {64, " with bf16 and with fp32 logits", "fp32 logits'",
                                  "the logits rounded"};
    static const char one[] = "ztrain.classifier_chunk_rows=32";   /* B T = 32 rows: one chunk */
    static const char small[] = "ztrain.classifier_chunk_rows=5";  /* 7 chunks: 6 of 5 rows, 1 of 2 */
    static const char lora[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear";
    static const struct { const char *shape; int stage; const char *extra; int rows; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 16}, {"gpt2:2,2,32,64,2,16", 3, one, 32},
        {"gpt2:2,2,32,64,2,16", 0, small, 5}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 16},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, NULL, 16}, {"llama:2,4,2,32,48,64,2,16", 3, one, 32},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, small, 5}, {"llama:2,4,2,32,48,64,2,16", 0, lora, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        cm_shape_parse(cases[i].shape, &p.s);
        const char *ex = cases[i].extra;
        const long BT = (long)p.s.B * p.s.T, R = cases[i].rows < BT ? cases[i].rows : BT;
        const long nch = (BT + R - 1) / R;
        char what[128];
        snprintf(what, sizeof what, "%s stage %d, %ld chunk%s of %ld rows%s", cases[i].shape,
                 cases[i].stage, nch, nch > 1 ? "s" : "", R, ex == lora ? " LoRA" : "");
        if (!w16_pair_run(&p, &kind, cases[i].stage, ex, 0, what, what)) continue;
        /* a step: every chunk's loss and gradient in one call (xent16_fused
         * with the losses) and its backward GEMMs (matmul_bwd_head16), fused
         * in the forward (classifier.h): no xent16_fwd; the fp32 path:
         * xent_fused per chunk */
        tap_ok(p.ma.x16f == 0 && p.ma.x16b == 4 * nch && p.ma.h16 == 4 * nch &&
                   p.ma.xent == 0 && p.mb.x16f == 0 && p.mb.x16b == 0 && p.mb.h16 == 0 &&
                   p.mb.xent == 4 * nch,
               "%s: %ld xent16_fwd, %ld xent16_fused, %ld matmul_bwd_head16 calls (0, %ld, %ld "
               "expected), no fp32 xent (%ld with fp32 logits)",
               what, p.ma.x16f, p.ma.x16b, p.ma.h16, 4 * nch, 4 * nch, p.mb.xent);
        const uint64_t RV = (uint64_t)R * (uint64_t)p.s.V;
        const uint64_t want16 = ((RV + 127) & ~(uint64_t)127) * 2, want32 = ((RV + 15) & ~(uint64_t)15) * 4;
        const uint64_t d = p.mb.logits_plan - p.ma.logits_plan;
        tap_ok(p.ma.logits_plan == want16 && p.mb.logits_plan == want32 &&
                   p.mb.acts_peak - p.ma.acts_peak <= d &&
                   p.mb.acts_peak - p.ma.acts_peak + 252 >= d &&
                   p.ma.acts_plan - p.ma.acts_peak == p.mb.acts_plan - p.mb.acts_peak &&
                   p.ma.acts_plan - p.ma.acts_peak == 2 * (uint64_t)p.s.B * p.s.T * 4,
               "%s: the chunk %llu bytes of bf16 logits (%llu of fp32), activations' peak %llu bytes "
               "(planned %llu; fp32 logits %llu, planned %llu)",
               what, (unsigned long long)p.ma.logits_plan, (unsigned long long)p.mb.logits_plan,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.ma.acts_plan,
               (unsigned long long)p.mb.acts_peak, (unsigned long long)p.mb.acts_plan);
    }
}

/* ------------------------------------------------------------ bf16 attention output
 * The attention writing its bf16 output directly and its backward reading
 * it (backend.h gqa_ext_fwd16o / _bwd16o): every loss and gradient norm
 * bitwise those of gqa_ext_fwd16 rounded by to_bf16 and gqa_ext_bwd16 on
 * the widened output (ZT_TEST_NO_AO16=1, the path of before), GPT-2 and
 * Llama (Gemma 2: soft-cap and window), stages 0 and 3, with activation
 * checkpointing and without, LoRA; per block and forward (recomputed too)
 * one gqa_ext_fwd16o in place of gqa_ext_fwd16 and one k_to_bf16 fewer,
 * per block and backward one gqa_ext_bwd16o in place of gqa_ext_bwd16 and
 * one k_from_bf16 fewer (the flash kernel stores the bf16 output, D =
 * dout . O reads it), the other counts and the activations' peak
 * unchanged.  With the attention reading fp32 q|k|v (ZT_TEST_NO_O16):
 * neither entry is called, nothing changes. */
static void bf16_att_out(void) {
    static const w16_kind kind = {128, " with and without the bf16 attention output",
                                  "gqa_ext_fwd16 + to_bf16 path's", NULL};
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 0}, {"gpt2:2,2,32,64,2,16", 3, w16_ck, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0}, {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[128];
        if (!w16_case_run(&p, &kind, c, c->arg, NULL, NULL, what, sizeof what)) continue;
        const int is_ck = c->extra == w16_ck, no = c->arg;
        /* forwards a step: 1, or 2 checkpointed (the recompute); backwards 1 */
        const long fw = no & 4 ? 0 : 4L * p.s.L * (1 + is_ck), bw = no & 4 ? 0 : 4L * p.s.L;
        tap_ok(p.ma.ao16 == fw + bw && p.mb.ao16 == 0 && p.mb.att16 - p.ma.att16 == fw + bw &&
                   p.mb.to16 - p.ma.to16 == fw && p.mb.from16 - p.ma.from16 == bw &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 |
                                W16_SAME_A16 | W16_SAME_ACTS),
               "%s: %ld gqa_ext_fwd16o + _bwd16o calls (%ld expected, %ld without), %ld k_to_bf16 "
               "(%ld without), %ld k_from_bf16 (%ld without), activations' peak %llu bytes (%llu "
               "without)",
               what, p.ma.ao16, fw + bw, p.mb.ao16, p.ma.to16, p.mb.to16, p.ma.from16, p.mb.from16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ the attention backward's bf16 gradient
 * GPT-2's training blocks call gqa_ext_bwd16d (ZT_ATT_IN16OD) in place of
 * gqa_ext_bwd16o, once a block and backward, without LoRA; over the cpu
 * backend it answers 0 (its gradient is fp32) and the q|k|v GEMM reads the
 * fp32 dqkv as before: every loss and gradient norm bitwise those of
 * ZT_TEST_NO_AB16=1 (gqa_ext_bwd16o, the path of before), stages 0 and 3,
 * checkpointed; the other counts and the activations' peak and plan
 * unchanged.  LoRA (all-linear: c_attn's adapters read its bf16 gradient,
 * config.h ZT_W16_GPT16, lora_gpt16): called too; Llama (no q/k norms) calls it too, RoPE's
 * backward in bf16 between (bf16_rope_bwd16).  (cuDNN's path, which
 * answers 1: cudnn_formulas, cudnn_model; its values: test_cuda on the
 * simulator.) */
static void bf16_att_bwd16(void) {
    static const w16_kind kind = {4096, " with and without the attention backward's bf16 gradient",
                                  "gqa_ext_bwd16o path's", NULL};
    /* (arg: the path taken) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1}, {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 1}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        char what[128];
        if (!w16_case_run(&p, &kind, &cases[i], 0, NULL, NULL, what, sizeof what)) continue;
        const long bw = cases[i].arg ? 4L * p.s.L : 0;
        tap_ok(p.ma.ab16 == bw && p.mb.ab16 == 0 &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_A16 |
                                W16_SAME_D16 | W16_SAME_AO16 | W16_SAME_TO16 | W16_SAME_FROM16 |
                                W16_SAME_ACTS | W16_SAME_GATHERED),
               "%s: %ld gqa_ext_bwd16d calls (%ld expected, %ld without), the bf16-output calls %ld "
               "(%ld without), activations' peak %llu bytes (%llu without), plan %llu",
               what, p.ma.ab16, bw, p.mb.ab16, p.ma.ao16, p.mb.ao16, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak, (unsigned long long)p.ma.acts_plan);
    }
}

/* ------------------------------------------------------------ RoPE's backward in bf16
 * A backend whose attention backward's q|k|v gradient is bf16 by
 * construction, as cuDNN's is (cuda_sdpa.cu: dQ, dK, dV written in bf16):
 * the cpu backend's gradient rounded to bf16, which gqa_ext_bwd16o widens
 * into dqkv (the path of before: fp32 rope_bwd, the GEMM rounding dout, the
 * bias gradient from the fp32 values) and gqa_ext_bwd16d writes into
 * dqkv16, answering 1 (the new path: rope_bwd16 in place, matmul_bwd_d16
 * with dout NULL). */
static zt_backend g_bf16g;
static void bf16g_round(float *x, size_t n) {
    uint16_t *h = malloc((n ? n : 1) * 2);
    if (!h) return;   /* (the run's gradients then differ: the check fails) */
    zt_backend_cpu()->to_bf16(h, x, n);
    zt_backend_cpu()->from_bf16(x, h, n);
    free(h);
}
static void bf16g_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp, const uint16_t *out16,
                         float *out, const float *lse, int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    zt_backend_cpu()->gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    bf16g_round(dqkv, (size_t)B * T * (NH + 2 * NKV) * hd);
}
static int bf16g_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16, float *tmp,
                        const uint16_t *out16, float *out, const float *lse, int B, int T, int NH, int NKV, int hd,
                        const zt_attn_opts *o) {
    (void)dqkv;   /* (untouched: the gradient made in scratch of its own) */
    const size_t n = (size_t)B * T * (NH + 2 * NKV) * hd;
    float *g = malloc((n ? n : 1) * sizeof(float));
    if (!g) return 0;
    zt_backend_cpu()->gqa_ext_bwd16o(g, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    zt_backend_cpu()->to_bf16(dqkv16, g, n);
    free(g);
    return 1;
}

/* g_bf16g: the cpu backend with the bf16-gradient attention backward
 * (bf16g_bwd16o / bf16g_bwd16d) */
static void bf16g_init(void) {
    g_bf16g = *zt_backend_cpu();
    g_bf16g.gqa_ext_bwd16o = bf16g_bwd16o;
    g_bf16g.gqa_ext_bwd16d = bf16g_bwd16d;
}

/* Llama's training blocks without q/k norms call gqa_ext_bwd16d; where it
 * answers 1 (the bf16-gradient backend above) RoPE's backward runs in bf16
 * on it (rope_bwd16: the bias gradient from its fp32 values) and the q|k|v
 * GEMM reads it (matmul_bwd_d16), no rope_bwd: every loss and gradient norm
 * bitwise those of ZT_TEST_NO_RB16=1 (gqa_ext_bwd16o, rope_bwd in fp32,
 * the GEMM rounding it: the path of before), stages 0 and 3, checkpointed,
 * untied, Qwen2.5's q|k|v biases, Gemma 2; the bf16-output calls and the
 * activations' peak and plan unchanged.  Over the cpu backend (0: its
 * gradient is fp32) the fp32 gradient's path, as before.  q/k norms
 * (Qwen3) with ZT_TEST_NO_QKB16: neither entry called (ZT_ATT_IN16O; with
 * the hook off, qknorm_rope_bwd16: bf16_qknorm_bwd16).  (LoRA: lora_qkv16.) */
static void bf16_rope_bwd16(void) {
    static const w16_kind kind = {16384, " with and without RoPE's backward in bf16", "rope_bwd path's", NULL};
    static const char bias[] = "ztrain.model.attention_bias=true";
    static const char qkn[] = "ztrain.model.qk_norm=true";
    static const w16_xname names[] = {{bias, " q|k|v biases"}, {qkn, " q/k norms"}, {NULL, NULL}};
    /* (arg: the path taken) */
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 1}, {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, bias, 1}, {"llama:2,4,2,32,48,64,2,16", 3, bias, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 1}, {"llama:2,4,2,32,48,64,2,16", 0, qkn, 0}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (!b16 && i > 1) continue;   /* (over the cpu: the first two) */
            w16_pair p;
            char what[160];
            /* (the fp32 norm-output gradient, ZT_TEST_NO_DOUT16N; q/k norms:
             * ZT_TEST_NO_QKB16, their fp32 backward) */
            if (!w16_case_run(&p, &kind, &cases[i],
                              w16_dout32(cases[i].shape) | (cases[i].extra == qkn ? 68719476736ULL : 0),
                              names, b16 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
                continue;
            const long bw = 4L * p.s.L, d = cases[i].arg ? bw : 0, r = cases[i].arg && b16 ? bw : 0;
            tap_ok(p.ma.ab16 == d && p.mb.ab16 == 0 && p.ma.rb16 == r && p.mb.rb16 == 0 &&
                       p.ma.ropeb == bw - r && p.mb.ropeb == bw && p.ma.d16 == p.mb.d16 + r &&
                       p.ra + r == p.rb &&
                       w16_same(&p, W16_SAME_W16 | W16_SAME_O16 | W16_SAME_A16 | W16_SAME_AO16 |
                                    W16_SAME_TO16 | W16_SAME_FROM16 | W16_SAME_ACTS | W16_SAME_GATHERED),
                   "%s: %ld gqa_ext_bwd16d calls (%ld expected, %ld without), %ld rope_bwd16 (%ld expected, "
                   "%ld without), %ld rope_bwd (%ld without), bf16-gradient calls %ld (%ld without), "
                   "k_round_bf16 %ld (%ld without: the GEMM's dout rounding), activations' peak %llu bytes "
                   "(%llu without)",
                   what, p.ma.ab16, d, p.mb.ab16, p.ma.rb16, r, p.mb.rb16, p.ma.ropeb, p.mb.ropeb, p.ma.d16,
                   p.mb.d16, p.ra, p.rb, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ the q/k norms' backward in bf16
 * Llama's training blocks with q/k norms (Qwen3 per head, OLMoE's whole
 * projections, Gemma 3's 1 + w weights) call gqa_ext_bwd16d; where it
 * answers 1 (the bf16-gradient backend of bf16_rope_bwd16) RoPE's and the
 * norms' backward run on its bf16 values in place (qknorm_rope_bwd16, one
 * call and one k_qknorm_rope_bwd16 launch a block and backward) and the
 * q|k|v GEMM reads them (matmul_bwd_d16, or matmul_bwd_o16 with the bf16
 * norm-output gradient): every loss and gradient norm, and the last step's
 * gradients (stages 0 and 1), bitwise those of ZT_TEST_NO_QKB16=1
 * (gqa_ext_bwd16o widening them, rope_bwd, headnorm_bwd on the q and the k
 * heads in fp32, the GEMM rounding dout: the path of before), stages 0 and
 * 3, checkpointed, LoRA (all-linear, and q_proj,v_proj: q|k|v's adapters
 * read dq16); a block and backward 2 headnorm_bwd, 1 rope_bwd, 1 k_rope
 * and 1 k_round_bf16 fewer (3 with q|k|v adapters: their dy GEMMs'), the k_colsum_final launches the same; a k_qknorm_rope_bwd16
 * launch moves the q and k heads' gradient read and written in bf16 (2 + 2
 * bytes a value), raw (4 a value), rstd (4 a group), the two weights, hd/2
 * inv_freq and the two norms' partial dw (8 bytes a chunk and channel);
 * the kernels of the path of before (k_headnorm_bwd, k_rope, k_round_bf16,
 * k_sdpa_widen) and of the new one move fewer bytes in all, and the bytes
 * of the step differ by theirs and the attention backward's alone (the
 * counter models gqa_ext_bwd16d as cuDNN's path, gqa_ext_bwd16o over the
 * cpu as the flash kernels); the activations' peak and plan unchanged, and
 * the bf16-output, -input and -weight calls (with q|k|v adapters the
 * latter two not: their dy GEMMs read dq16 through the bf16-input entries,
 * lora_qkv16's accounting).  Over the cpu
 * (gqa_ext_bwd16d answers 0) and with q|k|v biases (ZT_ATT_IN16O: no
 * gqa_ext_bwd16d) the path of before. */
static void bf16_qknorm_bwd16(void) {
    static const w16_kind kind = {68719476736ULL, " with and without the q/k norms' backward in bf16",
                                  "fp32 q/k norm backward path's", NULL};
    static const char qwen3[] = "ztrain.model.qk_norm=true";
    static const char ck[] = "ztrain.model.qk_norm=true activation_checkpointing.policy=blocks";
    static const char full[] = "ztrain.model.qk_norm=true ztrain.model.qk_norm_full=true";
    static const char gemma3[] = "ztrain.model.qk_norm=true ztrain.model.gemma=3";
    static const char lora[] = "ztrain.model.qk_norm=true ztrain.lora.r=4 ztrain.lora.alpha=8 "
                               "ztrain.lora.targets=all-linear";
    static const char lqv[] = "ztrain.model.qk_norm=true ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj";
    static const char bias[] = "ztrain.model.qk_norm=true ztrain.model.attention_bias=true";
    static const w16_xname names[] = {{qwen3, " qk_norm"}, {ck, " qk_norm checkpointed"},
                                      {full, " qk_norm full"}, {gemma3, " qk_norm gemma 3"},
                                      {lora, " qk_norm LoRA"}, {lqv, " qk_norm LoRA q,v"},
                                      {bias, " qk_norm q|k|v biases"}, {NULL, NULL}};
    /* (arg: 1 the bf16-gradient backend (else the cpu), 2 the path taken;
     * ZT_TEST_NO_DOUT16N, w16_dout32, in both runs: with the bf16
     * norm-output gradient the new path's q|k|v GEMM would write its input
     * gradient in bf16, not bitwise, bf16_dout16n's) */
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, qwen3, 3}, {"llama:2,4,2,32,48,64,2,16", 3, qwen3, 3},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, ck, 3}, {"llama:2,4,2,32,48,64,2,16", 0, full, 3},
        {"llama:2,4,2,32,48,64,2,16", 0, gemma3, 3},
        {"llama:2,4,2,32,48,64,2,16", 0, lora, 3}, {"llama:2,4,2,32,48,64,2,16", 3, lqv, 3},
        {"llama:2,4,2,32,48,64,2,16", 0, bias, 1}, {"llama:2,4,2,32,48,64,2,16", 0, qwen3, 0}};
    bf16g_init();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        g_w16_inner = c->arg & 1 ? &g_bf16g : NULL;
        w16_pair p;
        char what[192];
        if (!w16_case_run(&p, &kind, c, w16_dout32(c->shape), names,
                          c->arg & 1 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
            continue;
        const long bw = 4L * p.s.L, want = c->arg & 2 ? bw : 0;
        const long ab = c->extra == bias ? 0 : bw;   /* (gqa_ext_bwd16d asked) */
        /* (k_round_bf16 fewer: the GEMM's dout rounding, and with q|k|v
         * adapters their two dy GEMMs', which read dq16 too, lora_qkv16) */
        const int lq = c->extra == lora || c->extra == lqv;
        const long rounds = want + (lq ? 2 * want : 0);
        const w16_mem *a = &p.ma, *b = &p.mb;
        const double ka = a->qkb_b + a->hnb_b + a->rope_b + a->round_b + a->widen_b + a->final_b;
        const double kb = b->qkb_b + b->hnb_b + b->rope_b + b->round_b + b->widen_b + b->final_b;
        /* (a launch's bytes: N = B T rows, groups of qg and kg channels) */
        const int isfull = c->extra == full, hd = p.s.C / p.s.NH, N = p.s.B * p.s.T;
        const int qnh = isfull ? 1 : p.s.NH, knh = isfull ? 1 : p.s.NKV;
        const double qg = (double)p.s.NH * hd / qnh, kg = (double)p.s.NKV * hd / knh;
        const double vals = (double)N * (p.s.NH + p.s.NKV) * hd;
        const double one = vals * (2 + 2 + 4) + (double)N * (qnh + knh) * 4 + (qg + kg) * 4 +
                           (hd / 2) * 4.0 +
                           (zt_cuda_ws_col_chunks(N * qnh, NULL) * qg +
                            zt_cuda_ws_col_chunks(N * knh, NULL) * kg) * 8;
        /* (the last step's gradients: not with LoRA, whose frozen base has none captured) */
        const int grads = a->ghave == b->ghave && (!a->ghave || a->ghash == b->ghash);
        tap_ok(a->qkb == want && b->qkb == 0 && a->qkb_k == want && b->qkb_k == 0 &&
                   a->ab16 == ab && b->ab16 == 0 && a->rb16 == 0 && b->rb16 == 0 &&
                   b->hnb - a->hnb == 2 * want && b->hnb_k - a->hnb_k == 2 * want &&
                   b->ropeb - a->ropeb == want && b->rope_k - a->rope_k == want &&
                   p.rb - p.ra == rounds && a->final_k == b->final_k && grads &&
                   a->qkb_b == want * one && (want ? ka < kb : ka == kb) &&
                   b->all_b - a->all_b == (kb - ka) + (b->attb_b - a->attb_b) &&
                   w16_same(&p, (lq ? 0 : W16_SAME_W16 | W16_SAME_A16) | W16_SAME_O16 |
                                    W16_SAME_AO16 | W16_SAME_TO16 | W16_SAME_FROM16 |
                                    W16_SAME_ACTS | W16_SAME_GATHERED),
               "%s: %ld qknorm_rope_bwd16 calls, %ld launches (%ld expected, %ld without), "
               "%ld gqa_ext_bwd16d (%ld expected), headnorm_bwd %ld (%ld without), rope_bwd %ld (%ld "
               "without), k_rope %ld (%ld), k_round_bf16 %ld (%ld, %ld fewer expected), "
               "k_colsum_final %ld (%ld), the last gradients %s, k_qknorm_rope_bwd16 %.0f bytes (%.0f a launch expected), bytes "
               "%.0f (%.0f without; qkb16's kernels %.0f, %.0f without; the attention backward's "
               "%.0f, %.0f without), bf16-gradient calls %ld (%ld without), bf16-input %ld (%ld), "
               "bf16-weight %ld (%ld), activations' peak %llu bytes (%llu without)",
               what, a->qkb, a->qkb_k, want, b->qkb, a->ab16, ab, a->hnb, b->hnb, a->ropeb, b->ropeb,
               a->rope_k, b->rope_k, p.ra, p.rb, rounds, a->final_k, b->final_k,
               !a->ghave ? "(not captured)" : grads ? "bitwise" : "DIFFER", a->qkb_b, one, a->all_b,
               b->all_b, ka, kb, a->attb_b, b->attb_b, a->d16, b->d16, a->a16, b->a16, p.wa, p.wb,
               (unsigned long long)a->acts_peak,
               (unsigned long long)b->acts_peak);
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ the attention output's bf16 gradient
 * The training blocks of GPT-2 and Llama with the bf16 output and residual
 * gradient, without LoRA, ask att_do16 once a block and backward whether
 * the attention backward reads a bf16 dO as it is (arch.h zt_do16_of);
 * over the cpu backend it answers 0 (its kernels read the fp32 dout), so
 * no matmul_bwd_o16 or gqa_ext_bwd16do call and every loss and gradient
 * norm bitwise those of ZT_TEST_NO_DO16=1 (no question asked), stages 0
 * and 3, checkpointed; the other counts and the activations' peak and plan
 * unchanged.  LoRA with adapters on the output projection (all-linear,
 * Llama's o and GPT-2's c_proj): no question with ZT_TEST_NO_LO16 (with
 * it: lora_o16; without them: lora_lorapath).  (cuDNN's path, which answers 1:
 * cudnn_model; its values: test_cuda and engine.sh on the simulator.) */
static void bf16_att_do16(void) {
    static const w16_kind kind = {32768, " with and without the attention output's bf16 gradient",
                                  "fp32 dO path's", NULL};
    /* (arg: the question asked) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1}, {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_ck, 1}, {"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        char what[128];
        /* (Llama LoRA: gate|up's fp32 delta, ZT_TEST_NO_GU16: its bf16
         * delta's forward is a matmul_bwd_o16 call, lora_gu16) */
        const int lgu = cases[i].extra == w16_lora && !strncmp(cases[i].shape, "llama", 5);
        /* (and the fp32 norm-output gradient, ZT_TEST_NO_DOUT16N: its GEMMs
         * are matmul_bwd_o16 calls otherwise; o's and down's fp32 delta,
         * ZT_TEST_NO_LBRANCH16: their bf16 delta's forward is a
         * matmul_bwd_o16 call each, lora_branch16; and o's fp32 dO,
         * ZT_TEST_NO_LO16: with it the question is asked, lora_o16) */
        /* (GPT-2 LoRA: c_proj's fp32 dO, ZT_TEST_NO_LO16, as Llama's o) */
        const int lg2 = cases[i].extra == w16_lora && !lgu;
        if (!w16_case_run(&p, &kind, &cases[i],
                          (lgu ? 536870912 | 34359738368ULL | 274877906944ULL : 0) |
                              (lg2 ? 274877906944ULL : 0) | w16_dout32(cases[i].shape), NULL,
                          NULL, what, sizeof what))
            continue;
        const long q = cases[i].arg ? 4L * p.s.L : 0;
        tap_ok(p.ma.do16q == q && p.mb.do16q == 0 && p.ma.do16 == 0 && p.mb.do16 == 0 &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_A16 |
                                W16_SAME_D16 | W16_SAME_AO16 | W16_SAME_AB16 | W16_SAME_TO16 |
                                W16_SAME_FROM16 | W16_SAME_ACTS | W16_SAME_GATHERED),
               "%s: %ld att_do16 questions (%ld expected, %ld without), %ld matmul_bwd_o16 + "
               "gqa_ext_bwd16do calls (%ld without), the bf16-output calls %ld (%ld without), "
               "activations' peak %llu bytes (%llu without)",
               what, p.ma.do16q, q, p.mb.do16q, p.ma.do16, p.mb.do16, p.ma.ao16, p.mb.ao16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ bf16 gradients
 * The gradients the backward GEMMs read written in bf16 by the kernels
 * producing them (backend.h matmul_bwd_d16, matmul_dgelu_bwd_d16,
 * layernorm_bwd16, rmsnorm_bwd16, swiglu_bwd_d16, geglu_bwd_d16): every
 * loss and gradient norm bitwise those of the GEMM entries rounding the
 * fp32 gradients (ZT_TEST_NO_D16=1, the path of before), GPT-2 and Llama
 * (and Gemma 2's GeGLU and post norms), stages 0 and 3, with activation
 * checkpointing and without, LoRA.  Per backward: GPT-2 the final norm, and
 * per block the fc projection's GEMMs (through the GELU), the attention
 * projection's, ln2 and ln1 (but block 0's) take the new entries, and 2
 * k_round_bf16 fewer a block (the residual gradient's, read by the two
 * projections; 3 without LoRA: fc's GEMMs then read the gradient through
 * the GELU in bf16, which needs the bf16 residual gradient); Llama the final norm, and per block the down, gate|up and
 * o GEMMs, SwiGLU's backward, mlp_norm and attn_norm (but block 0's); Gemma
 * 2 per block the two post norms, the three GEMMs and GeGLU's backward: 3
 * k_round_bf16 fewer a block; the other counts (the bf16-output ones with
 * swiglu / geglu _bwd_d16 for _bwd16) and the activations' peak and plan
 * unchanged.  (Device copies are not compared: under the counter the cpu's
 * blocks are 64-byte aligned, so which bf16 operands get copied to 256-byte
 * alignment varies from run to run.) */
static void bf16_gradients(void) {
    static const w16_kind kind = {256, " with and without the bf16 gradients",
                                  "rounding GEMM entries'", NULL};
    for (size_t i = 0; i < sizeof w16_common / sizeof w16_common[0]; i++) {
        const w16_case *c = &w16_common[i];
        w16_pair p;
        char what[96];
        /* (LoRA: the backward's order of before, ZT_TEST_NO_BWDSWAP: the
         * base dinp GEMMs of these counts; lora_bswap.  And the adapters'
         * GEMMs rounding their fp32 weights, ZT_TEST_NO_LORA16: the bf16 dy
         * moves their B^T's bf16-weight calls to the bf16-input entry
         * otherwise.  Llama's gate|up: its fp32 delta, ZT_TEST_NO_GU16, the
         * bf16 delta's forward a matmul_bwd_o16 call, lora_gu16) */
        const int lgu = c->extra == w16_lora && !strncmp(c->shape, "llama", 5);
        /* (and the fp32 norm-output gradient, ZT_TEST_NO_DOUT16N: these
         * counts' matmul_bwd_d16 and rmsnorm_bwd16 calls; Llama's o and down:
         * their fp32 delta, ZT_TEST_NO_LBRANCH16, lora_branch16) */
        if (!w16_case_run(&p, &kind, c,
                          (c->extra == w16_lora
                               ? 16777216 | 134217728 | (lgu ? 536870912 | 34359738368ULL : 0)
                               : 0) |
                              w16_dout32(c->shape),
                          NULL, NULL, what, sizeof what))
            continue;
        /* one backward a step; GPT-2: 4 calls a block (block 0: 3) and the
         * final norm; Llama: 6 (block 0: 5) and the final norm; Gemma 2: 6 */
        /* (GPT-2 LoRA all-linear: fc's gradient rounded once for its GEMMs
         * and adapters, config.h ZT_W16_GPT16: fc's GEMMs a bf16-gradient
         * call more, and one k_to_bf16 more a block) */
        const int is_lora = c->extra == w16_lora, gl = is_lora && !p.s.llama;
        const long want = 4L * (p.s.llama ? 6L * p.s.L : (4L + gl) * p.s.L), to16 = 4L * p.s.L * gl;
        /* (GPT-2 without LoRA: and fc's GEMMs read the gradient through
         * the GELU in bf16, bf16 GELU gradients below: one more; LoRA: the
         * two adapter GEMMs reading dy of each group with its bf16 copy,
         * lora.h dy16: GPT-2's 2 projections, Llama's o, gate|up and down;
         * GPT-2's fc: its GEMMs' rounding and its adapters' 2) */
        const long fewer = 4L * p.s.L * (p.s.llama ? 3 + 6 * is_lora : is_lora ? 2 + 4 + 3 : 3);
        tap_ok(p.ma.d16 == want && p.mb.d16 == 0 && p.rb - p.ra == fewer &&
                   p.ma.to16 - p.mb.to16 == to16 &&
                   w16_same(&p, W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 | W16_SAME_ACTS),
               "%s: %ld bf16-gradient calls (%ld expected, %ld without), %ld k_round_bf16 (%ld "
               "without, %ld fewer expected), %ld k_to_bf16 (%ld without, %ld more expected), "
               "activations' peak %llu bytes (%llu without)",
               what, p.ma.d16, want, p.mb.d16, p.ra, p.rb, fewer, p.ma.to16, p.mb.to16, to16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
        if (!p.s.llama) continue;
        /* SwiGLU / GeGLU's backward: gate|up (bf16) and dout (fp32) read,
         * the bf16 gradient written, and no fp32 one (the GEMMs read the
         * bf16 one, and so do LoRA's adapters, lora_bt below): N H (4 h +
         * f) bytes a launch; without the bf16 gradients (swiglu_bwd16) N H
         * (2 h + 3 f) */
        const double nh = (double)p.s.B * p.s.T * p.s.I;
        const double gw = nh * (4 * 2 + 4), gwo = nh * (2 * 2 + 3 * 4);
        tap_ok(p.ma.glu_b == gw && p.mb.glu_b == gwo,
               "%s: the gate|up backward kernel moves %.0f bytes a launch (%.0f expected; %.0f "
               "without the bf16 gradients, %.0f expected)",
               what, p.ma.glu_b, gw, p.mb.glu_b, gwo);
    }
}

/* ------------------------------------------------------------ residual add folded
 * Each block's last residual add folded into the next block's first norm or
 * the final norm (arch.h addfold: add_layernorm_fwd / add_rmsnorm_fwd and
 * their bf16-output forms): every loss and gradient norm bitwise those of
 * the separate k_add (ZT_TEST_NO_ADDFOLD=1, the path of before), GPT-2 and
 * Llama (Gemma 2's post norms), stages 0 and 3, with activation
 * checkpointing (every block its own group, or groups of 2 of 3 blocks,
 * recomputed) and without, LoRA,
 * the norms' to_bf16 path (ZT_TEST_NO_N16), the fp32 activations
 * (ZT_TEST_NO_ACT16), a Mixture of Experts (counted: count.c has its
 * kernels).  Per step L k_add fewer in the forward, and with
 * checkpointing L more in the recompute (a recomputed block's y is the kept
 * residual, added by nobody again); L fused calls more, and with
 * checkpointing each recomputed block's but a group's first (which reads
 * its kept input with the plain norm), as many norm
 * calls writing bf16 (layernorm_fwd16 became add_layernorm_fwd16); the
 * other counts and the activations' peak and plan unchanged. */
static void residual_fold(void) {
    static const w16_kind kind = {65536, " with and without the residual add folded",
                                  "separate add's", NULL};
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24 ztrain.model.shared_expert_size=16";
    /* (groups of 2 blocks: the recompute folds inside a group) */
    static const char ck2[] = "activation_checkpointing.policy=every-2";
    static const w16_xname names[] = {{ck2, " checkpointed every 2"}, {moe, " MoE"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 0},         {"gpt2:2,2,32,64,2,16", 3, w16_ck, 0},
        {"gpt2:3,2,32,64,2,16", 0, ck2, 0},          {"llama:3,4,2,32,48,64,2,16", 3, ck2, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},     {"gpt2:2,2,32,64,2,16", 0, NULL, 8},
        {"gpt2:2,2,32,64,2,16", 3, NULL, 2},         {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, NULL, 8},   {"llama:2,4,2,32,48,64,2,16", 0, w16_ck, 2},
        {"llama:2,4,2,32,48,64,2,16", 0, moe, 0},    {"llama:2,4,2,32,48,64,2,16,untied", 3, moe, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        char what[128];
        /* (ZT_TEST_NO_BRANCH16 in both runs: without the fold the fp32
         * branch's path, branch16 below) */
        if (!w16_case_run(&p, &kind, &cases[i], cases[i].arg | w16_nobr16(cases[i].shape), names,
                          NULL, what, sizeof what))
            continue;
        const char *ex = cases[i].extra;
        /* 4 steps: L a forward, L more a recompute (every block); the
         * fused calls L a forward, and in a recompute each block but a
         * group's first (k = 1: none) */
        const int ck = ex == w16_ck || ex == ck2, k = ex == ck2 ? 2 : 1;
        const long L = p.s.L, groups = (L + k - 1) / k;
        const long fewer = 4 * L * (ck ? 2 : 1), more = 4 * (L + (ck ? L - groups : 0));
        tap_ok(p.mb.add - p.ma.add == fewer && p.ma.addn - p.mb.addn == more &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 |
                                W16_SAME_D16 | W16_SAME_TO16 | W16_SAME_ACTS),
               "%s: %ld k_add (%ld without, %ld fewer expected), %ld fused add-norm calls (%ld "
               "without, %ld more expected), %ld norm calls writing bf16 (%ld without), activations' "
               "peak %llu bytes (%llu without)",
               what, p.ma.add, p.mb.add, fewer, p.ma.addn, p.mb.addn, more, p.ma.n16, p.mb.n16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LM head fused
 * A training step's forward computing the LM head's gradients (classifier.h
 * "fused": xent16_fused / xent_fused with the losses, then the head's
 * backward GEMMs, chunk by chunk; the backward starts at the final norm):
 * every loss and gradient norm over 4 steps (so the parameters too) bitwise
 * those of the head recomputed in backward (ZT_TEST_NO_HEADFUSE=1, the path
 * of before), GPT-2 and Llama (tied and untied), stages 0, 2 and 3,
 * gradient accumulation 2, activation checkpointing, LoRA (a frozen head:
 * dx alone), Gemma 2's final soft-cap (fp32 logits), the fp32 activations
 * (fp32 logits), fp32 and fp16 (dloss with the loss scale) runs, a Mixture
 * of Experts (counted: count.c has its kernels).  With the
 * head in 2 chunks (w16_run), per micro-batch one head GEMM fewer (the
 * recomputed chunk's: no head GEMM in backward), no loss-only xent call
 * (xent16_fwd / xent_fwd) left, and the gathered units' and activations'
 * peaks and plans unchanged. */
static void head_fused(void) {
    static const w16_kind kind = {131072, " with and without the LM head fused",
                                  "recomputing head's", NULL};
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24 ztrain.model.shared_expert_size=16";
    static const char acc[] = "train_batch_size=4";
    static const char acc_ck[] = "train_batch_size=4 activation_checkpointing.policy=blocks";
    static const char f32[] = "bf16.enabled=false";
    static const char f16[] = "bf16.enabled=false fp16.enabled=true";
    static const struct { const char *shape; int stage; const char *extra; int no; int A; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 0, 1},      {"gpt2:2,2,32,64,2,16", 3, w16_ck, 0, 1},
        {"gpt2:2,2,32,64,2,16", 0, acc, 0, 2},       {"gpt2:2,2,32,64,2,16", 2, acc_ck, 0, 2},
        {"gpt2:2,2,32,64,2,16", 3, acc, 0, 2},       {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0, 1},
        {"gpt2:2,2,32,64,2,16", 3, NULL, 2, 1},      {"gpt2:2,2,32,64,2,16", 0, f32, 0, 1},
        {"gpt2:2,2,32,64,2,16", 3, f16, 0, 1},       {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, acc, 0, 2},
        {"llama:2,4,2,32,48,64,2,16,untied", 2, w16_lora, 0, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_gemma, 0, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 2, 1}, {"llama:2,4,2,32,48,64,2,16,untied", 3, f32, 0, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, moe, 0, 1}, {"llama:2,4,2,32,48,64,2,16,untied", 3, moe, 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        cm_shape_parse(cases[i].shape, &p.s);
        const char *ex = cases[i].extra;
        const int no = cases[i].no;
        char what[160];
        snprintf(what, sizeof what, "%s stage %d%s%s%s%s%s%s%s%s%s", cases[i].shape, cases[i].stage,
                 ex == w16_ck || ex == acc_ck ? " checkpointed" : "",
                 ex == acc || ex == acc_ck ? " accumulating 2" : "", ex == w16_gemma ? " gemma" : "",
                 ex == w16_lora ? " LoRA" : "", ex == moe ? " MoE" : "", ex == f32 ? " fp32" : "",
                 ex == f16 ? " fp16" : "", no & 2 ? " ZT_TEST_NO_ACT16" : "", "");
        if (!w16_pair_run(&p, &kind, cases[i].stage, ex, no, what, what)) continue;
        /* 4 steps of A micro-batches, the head in 2 chunks: one head GEMM
         * fewer each */
        const long fewer = 4L * cases[i].A;
        tap_ok(p.mb.gemm - p.ma.gemm == fewer && p.ma.xf == 0 && p.mb.xf == 4L * cases[i].A * 2 &&
                   p.ma.peak == p.mb.peak && p.ma.plan == p.mb.plan &&
                   p.ma.comm_peak == p.mb.comm_peak && p.ma.comm_plan == p.mb.comm_plan &&
                   p.ma.acts_peak == p.mb.acts_peak && p.ma.acts_plan == p.mb.acts_plan,
               "%s: %ld GEMMs (%ld without, %ld fewer expected), %ld loss-only xent calls (%ld "
               "without), gathered peak %llu (%llu without), gradient buckets' peak %llu (%llu "
               "without; plan %llu, %llu), activations' peak %llu bytes (%llu without)",
               what, p.ma.gemm, p.mb.gemm, fewer, p.ma.xf, p.mb.xf, (unsigned long long)p.ma.peak,
               (unsigned long long)p.mb.peak, (unsigned long long)p.ma.comm_peak,
               (unsigned long long)p.mb.comm_peak, (unsigned long long)p.ma.comm_plan,
               (unsigned long long)p.mb.comm_plan, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA products accumulated
 * LoRA's adapter products added into their outputs by their GEMMs
 * (backend.h matmul_dinp_acc: beta 1, C = D; lora.h zt_lora.acc): every
 * loss and gradient norm over 4 steps bitwise those of the product into
 * the scratch d and a k_add (ZT_TEST_NO_LORAACC=1, the path of before),
 * GPT-2 and Llama (tied and untied), stages 0, 2 and 3, all-linear and a
 * part of a group (q_proj, v_proj), with activation checkpointing and
 * without, with the adapters' dropout and without, the fp32 activations.
 * Per step and block: without dropout one matmul_dinp_acc a targeted group
 * forward (again when recomputed) and one backward (dx += dh A); with
 * dropout one a targeted module forward and none backward (dx's product is
 * masked before its add); as many k_add fewer, the GEMM launches and
 * k_round_bf16 the same; the activations' peak and plan smaller by the
 * scratch no path reads any more: d [N, max(in, OUT)] without dropout, its
 * part beyond [N, max in] (dropout's masked input) with it; each run's peak
 * its plan. */
static void lora_acc(void) {
    static const w16_kind kind = {262144, " with and without the LoRA products accumulated",
                                  "product-and-add path's", NULL};
    static const char all[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear";
    static const char drop_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                                  "ztrain.lora.dropout=0.25 activation_checkpointing.policy=blocks";
    static const w16_xname names[] = {{all, " LoRA"}, {drop_ck, " LoRA dropout checkpointed"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, all, 0},          {"gpt2:2,2,32,64,2,16", 3, w16_lck, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_ldrop, 0},         {"gpt2:2,2,32,64,2,16", 2, all, 2},
        {"llama:2,4,2,32,48,64,2,16", 0, all, 0},    {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_ldrop, 0},   {"llama:2,4,2,32,48,64,2,16,untied", 0, drop_ck, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_qv, 0}, {"llama:2,4,2,32,48,64,2,16", 2, all, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        char what[160];
        /* (the order of before, ZT_TEST_NO_LORASWAP: each forward delta
         * added after its base GEMM, as these counts have it; the swapped
         * order's: lora_swap.  And ZT_TEST_NO_BWDSWAP: dx's product added
         * after the base dinp GEMM, as these counts have it; lora_bswap.  And
         * the adapters' GEMMs rounding their fp32 weights, ZT_TEST_NO_LORA16:
         * lora16) */
        if (!w16_case_run(&p, &kind, &cases[i], cases[i].arg | 1048576 | 16777216 | 134217728, names,
                          NULL, what, sizeof what))
            continue;
        const char *ex = cases[i].extra;
        const cm_shape *s = &p.s;
        const int ck = ex == w16_lck || ex == drop_ck, dr = ex == w16_ldrop || ex == drop_ck;
        /* the targeted groups and modules; the widest of their inputs and
         * outputs (max_w) and of their inputs: GPT-2's c_attn [C, 3C],
         * attn.c_proj [C, C], c_fc [C, 4C], mlp.c_proj [4C, C]; Llama's q|k|v
         * [C, (NH + 2 NKV) hd] (q_proj, v_proj: that group alone), o [NH hd,
         * C], gate|up [C, 2I], down [I, C] */
        const long C = s->C, QKV = (long)(s->NH + 2 * s->NKV) * (s->C / s->NH);
        const long ng = s->llama && ex == w16_qv ? 1 : 4, nm = !s->llama ? 4 : ex == w16_qv ? 2 : 7;
        const long mw = !s->llama ? 4 * C : ex == w16_qv ? (QKV > C ? QKV : C) : (2L * s->I > QKV ? 2L * s->I : QKV);
        const long mi = !s->llama ? 4 * C : ex == w16_qv ? C : (s->I > C ? s->I : C);
        const long L = s->L, want = dr ? 4 * L * nm * (1 + ck) : 4 * L * ng * (2 + ck);
        const uint64_t N = (uint64_t)s->B * s->T, fewer = N * (uint64_t)(mw - (dr ? mi : 0)) * 4;
        tap_ok(p.ma.dacc == want && p.mb.dacc == 0 && p.mb.add - p.ma.add == want &&
                   p.ma.gemm == p.mb.gemm && p.ra == p.rb,
               "%s: %ld matmul_dinp_acc calls (%ld expected, %ld without), %ld k_add (%ld without), "
               "%ld GEMMs (%ld without), %ld k_round_bf16 (%ld without)",
               what, p.ma.dacc, want, p.mb.dacc, p.ma.add, p.mb.add, p.ma.gemm, p.mb.gemm, p.ra, p.rb);
        /* (the plan also has the host token arrays, 2 B T ints) */
        const uint64_t tok = 2 * N * 4;
        tap_ok(p.mb.acts_peak - p.ma.acts_peak == fewer && p.ma.acts_plan - p.ma.acts_peak == tok &&
                   p.mb.acts_plan - p.mb.acts_peak == tok,
               "%s: activations' peak %llu bytes (planned %llu), %llu without (planned %llu): %llu "
               "fewer (%llu expected)",
               what, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.ma.acts_plan,
               (unsigned long long)p.mb.acts_peak, (unsigned long long)p.mb.acts_plan,
               (unsigned long long)(p.mb.acts_peak - p.ma.acts_peak), (unsigned long long)fewer);
    }
}

/* ------------------------------------------------------------ LoRA's delta first
 * A LoRA group's forward delta written first (beta 0, matmul_bwd into the
 * output) and the base GEMM adding its product into it (backend.h
 * matmul_fwd_acc: beta 1, C = D under a compute-bound GEMM), not the base
 * output then the delta added by the adapters' beta-1 GEMM
 * (matmul_dinp_acc): every loss and gradient norm over 4 steps bitwise
 * those of the order of before (ZT_TEST_NO_LORASWAP=1): Llama all-linear,
 * stages 0 and 3, with activation checkpointing and without, the fp32
 * activations, fp32 matmuls, QLoRA (nf4 base), a part of a group
 * (q_proj,v_proj), Qwen2's q|k|v bias (that group keeps the old order);
 * with the adapters' dropout and GPT-2 nothing changes.  Per step and block,
 * ng the swapped groups (no bias), P the forward passes (2 checkpointed):
 * ng P matmul_fwd_acc calls, as many base forward calls (matmul_fwd, _w16,
 * _a16) and matmul_dinp_acc fewer, as many matmul_bwd more (the delta's
 * beta-0 product); the GEMM launches, their bytes (the output's read moved
 * from the rank-r GEMM to the base's), the k_add and k_round_bf16 launches
 * and the activations' peak and plan the same. */
static void lora_swap(void) {
    static const w16_kind kind = {1048576, " with and without LoRA's delta first",
                                  "delta-after path's", NULL};
    static const char bias[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.model.attention_bias=true";
    static const w16_xname names[] = {{bias, " LoRA qkv bias"}, {NULL, NULL}};
    /* (arg: no_w16 of both runs; ng: the swapped groups) */
    static const struct { w16_case c; int ng; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 2}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lf32, 0}, 4},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 3, w16_lnf4, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_qv, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, bias, 0}, 3},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        /* (the adapters' GEMMs rounding their fp32 weights, as these counts
         * have it, ZT_TEST_NO_LORA16: the bf16 adapters' counts, lora16) */
        /* (ZT_TEST_NO_GU16: Llama's gate|up with its fp32 delta, the order
         * swapped or not; the bf16 delta takes the swapped order alone,
         * lora_gu16; ZT_TEST_NO_LBRANCH16 likewise for o and down,
         * lora_branch16) */
        if (!w16_case_run(&p, &kind, c, c->arg | 134217728 | 536870912 | 34359738368ULL, names,
                          NULL, what, sizeof what))
            continue;
        const long want = 4 * p.s.L * cases[i].ng * (1 + (c->extra == w16_lck));
        tap_ok(p.ma.facc == want && p.mb.facc == 0 && p.mb.fwd - p.ma.fwd == want &&
                   p.mb.dacc - p.ma.dacc == want && p.ma.bwd - p.mb.bwd == want &&
                   p.ma.gemm == p.mb.gemm && p.ma.gemm_b == p.mb.gemm_b && p.ma.add == p.mb.add &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_ACTS),
               "%s: %ld matmul_fwd_acc calls (%ld expected, %ld without), %ld base forward calls "
               "(%ld without), %ld matmul_dinp_acc (%ld without), %ld matmul_bwd (%ld without), "
               "%ld GEMMs of %.0f bytes (%ld of %.0f without), %ld k_add (%ld without), "
               "%ld k_round_bf16 (%ld without), activations' peak %llu bytes (%llu without)",
               what, p.ma.facc, want, p.mb.facc, p.ma.fwd, p.mb.fwd, p.ma.dacc, p.mb.dacc, p.ma.bwd,
               p.mb.bwd, p.ma.gemm, p.ma.gemm_b, p.mb.gemm, p.mb.gemm_b, p.ma.add, p.mb.add, p.ra,
               p.rb, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's input gradient first
 * A LoRA group's input gradient written first (zt_lora_bwd_first: dx = dh
 * A, beta 0, matmul_bwd into dx) and the base dinp GEMM adding its product
 * into it (backend.h matmul_bwd_acc: beta 1, C = D under a compute-bound
 * GEMM), not the base dinp then the adapters' product added by their
 * rank-r beta-1 GEMM (matmul_dinp_acc): every loss and gradient norm over 4
 * steps (so the adapters' gradients too) bitwise those of the order of
 * before (ZT_TEST_NO_BWDSWAP=1): Llama all-linear, stages 0 and 3, with
 * activation checkpointing and without, the fp32 activations, fp32
 * matmuls, QLoRA (nf4 base), a part of a group (q_proj,v_proj), Qwen2's
 * q|k|v bias (frozen: no bias gradient, swapped too), ZT_TEST_NO_LORABT
 * (the adapters rounding dy), ZT_TEST_NO_LORAACC (their product and an
 * add before); with the adapters' dropout and GPT-2 nothing changes.  Per
 * step and block, ng the swapped groups (one backward a step, checkpointed
 * or not): ng matmul_bwd_acc calls, as many matmul_dinp_acc fewer (with
 * ZT_TEST_NO_LORAACC: as many k_add fewer), the base dinp entries (matmul_bwd,
 * _w16, _a16, _d16) and the adapters' beta-0 product together as many as
 * those calls were; the GEMM launches, the k_round_bf16 launches and the
 * activations' peak and plan the same; the GEMMs' bytes the same (dx's
 * read moved from the rank-r GEMM to the base's; with ZT_TEST_NO_LORAACC
 * N in f more a swapped group, the base's read of dx, where the k_add read
 * and wrote it). */
static void lora_bswap(void) {
    static const w16_kind kind = {16777216, " with and without LoRA's input gradient first",
                                  "base-first path's", NULL};
    static const char bias[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.model.attention_bias=true";
    static const w16_xname names[] = {{bias, " LoRA qkv bias"}, {NULL, NULL}};
    /* (arg: no_w16 of both runs; ng: the swapped groups) */
    static const struct { w16_case c; int ng; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 2}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lf32, 0}, 4},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 3, w16_lnf4, 0}, 4},
        {{"llama:2,4,2,32,48,1024,2,16", 0, w16_lnf4, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_qv, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, bias, 0}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 524288}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 262144}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 1048576}, 4},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        /* (ZT_TEST_NO_LGRAD16: q|k|v's and gate|up's swapped input
         * gradient in fp32, this section's path; its bf16 one is
         * lora_grad16's) */
        if (!w16_case_run(&p, &kind, c, c->arg | 137438953472ULL, names, NULL, what, sizeof what))
            continue;
        const long want = 4 * p.s.L * cases[i].ng;
        const int acc = !(c->arg & 262144);
        /* (the swapped groups' inputs: q|k|v's, gate|up's C, o's NH hd, down's I) */
        const double N = (double)p.s.B * p.s.T, hd = p.s.C / p.s.NH;
        const double in = cases[i].ng == 4 ? 2.0 * p.s.C + p.s.NH * hd + p.s.I : p.s.C;
        const double more = acc || !cases[i].ng ? 0 : 4 * p.s.L * N * in * 4;
        /* (the adapters' bf16 A, lora16, at stages 0-2 with bf16 matmuls:
         * dx = dh A written reads it, where matmul_dinp_acc rounded A) */
        const long r16 = c->stage < 3 && c->extra != w16_lf32 ? want : 0;
        tap_ok(p.ma.bacc == want && p.mb.bacc == 0 && p.mb.dacc - p.ma.dacc == (acc ? want : 0) &&
                   p.mb.add - p.ma.add == (acc ? 0 : want) &&
                   p.ma.bwds + p.ma.dacc + p.ma.bacc == p.mb.bwds + p.mb.dacc &&
                   p.ma.gemm == p.mb.gemm && p.ma.gemm_b - p.mb.gemm_b == more &&
                   p.rb - p.ra == r16 && w16_same(&p, W16_SAME_ACTS),
               "%s: %ld matmul_bwd_acc calls (%ld expected, %ld without), %ld matmul_dinp_acc "
               "(%ld without), %ld k_add (%ld without), %ld base dinp entries (%ld without), "
               "%ld GEMMs of %.0f bytes (%ld of %.0f without, %.0f more expected), "
               "%ld k_round_bf16 (%ld without, %ld fewer expected), activations' peak %llu bytes "
               "(%llu without)",
               what, p.ma.bacc, want, p.mb.bacc, p.ma.dacc, p.mb.dacc, p.ma.add, p.mb.add, p.ma.bwds,
               p.mb.bwds, p.ma.gemm, p.ma.gemm_b, p.mb.gemm, p.mb.gemm_b, more, p.ra, p.rb, r16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's gate|up rounded
 * With LoRA on fc / gate|up (whose adapters add into the fp32 GEMM output),
 * that output's bf16 rounding and the GELU / SwiGLU / GeGLU of the rounded
 * values in one entry (backend.h gelu_fwd16r, swiglu_fwd16r / geglu_fwd16r),
 * not to_bf16 then gelu_fwd16 / swiglu_fwd16 / geglu_fwd16 reading the
 * rounding back (ZT_TEST_NO_GLUROUND=1, the path of before): every loss and
 * gradient norm over 4 steps bitwise, GPT-2 and Llama all-linear (Gemma 2's
 * GeGLU too), stages 0 and 3, with activation checkpointing and without,
 * QLoRA; a LoRA leaving gate|up alone (q_proj,v_proj: its GEMM writes
 * bf16 itself, lora_lgate), the fp32 activations and the bf16 outputs off
 * (ZT_TEST_NO_O16) change nothing.
 * Per step, block and forward pass (2 checkpointed: the recompute) one
 * fused call and one k_to_bf16 fewer, as many bf16-output calls, and the
 * bytes moved smaller by 2 N W a call (W: the [N, W] fp32 output, 4 C or
 * 2 I; gate|up's rounding not read back); the k_round_bf16 launches and
 * the activations' peak and plan the same. */
static void lora_gluround(void) {
    static const w16_kind kind = {33554432, " with and without the rounding and activation in one",
                                  "to_bf16 path's", NULL};
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{gemma, " gemma LoRA"}, {NULL, NULL}};
    /* (arg: no_w16 of both runs (4: ZT_TEST_NO_O16); on: the path taken) */
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, gemma, 0}, 1},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 3, w16_lck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 0},
        {{"gpt2:2,2,32,64,2,16", 3, w16_lora, 4}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        /* (ZT_TEST_NO_GU16: Llama's fp32 gate|up, which the fused rounding
         * reads; the bf16 one has no fp32 values to round, lora_gu16) */
        if (!w16_case_run(&p, &kind, c, c->arg | 536870912, names, NULL, what, sizeof what))
            continue;
        const long want = cases[i].on ? 4 * p.s.L * (1 + (c->extra == w16_lck)) : 0;
        const double W = p.s.llama ? 2.0 * p.s.I : 4.0 * p.s.C,
                     fewer = (double)want * 2.0 * p.s.B * p.s.T * W;
        tap_ok(p.ma.glur == want && p.mb.glur == 0 && p.mb.to16 - p.ma.to16 == want &&
                   p.mb.all_b - p.ma.all_b == fewer &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_O16 | W16_SAME_ACTS),
               "%s: %ld fused calls (%ld expected, %ld without), %ld k_to_bf16 (%ld without), "
               "%.0f bytes moved (%.0f without, %.0f fewer expected), %ld bf16-output calls "
               "(%ld without), %ld k_round_bf16 (%ld without), activations' peak %llu bytes "
               "(%llu without)",
               what, p.ma.glur, want, p.mb.glur, p.ma.to16, p.mb.to16, p.ma.all_b, p.mb.all_b, fewer,
               p.ma.o16, p.mb.o16, p.ra, p.rb, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's untargeted gate|up
 * With LoRA, Llama's gate|up GEMM writing its bf16 output itself (then
 * SwiGLU / GeGLU reading it: the path of no LoRA) where gate|up has no
 * adapters, not only where the model has none (ZT_TEST_NO_LGATE=1, the path
 * of before: gate|up's fp32 output rounded by swiglu_fwd16r / geglu_fwd16r
 * in every block with adapters): every loss and gradient norm over 4
 * steps bitwise, q_proj,v_proj at stages 0 and 3, checkpointed (the
 * recompute: gate|up again), QLoRA, Gemma 2's GeGLU, q_proj,v_proj,o_proj;
 * all-linear and the fp32 activations change nothing.  Per step, block and
 * forward pass (2 checkpointed) one swiglu_fwd16r / geglu_fwd16r call fewer
 * and one matmul_fwd_o16 more; the o projection's backward unchanged
 * (matmul_bwd_o16 the same), the k_round_bf16 launches and the activations'
 * peak and plan the same. */
static void lora_lgate(void) {
    static const w16_kind kind = {268435456, " with and without LoRA's untargeted gate|up in bf16",
                                  "fp32 outputs' path's", NULL};
    static const char qvck[] = "ztrain.lora.r=8 ztrain.lora.alpha=16 ztrain.lora.targets=q_proj,v_proj "
                               "activation_checkpointing.policy=blocks";
    static const char qvo[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj,o_proj";
    static const char qvq[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=q_proj,v_proj "
                              "ztrain.lora.base=nf4";
    static const char qvg[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj";
    static const char qv32[] = "ztrain.lora.r=8 ztrain.lora.alpha=16 ztrain.lora.targets=q_proj,v_proj "
                               "bf16.enabled=false";
    static const w16_xname names[] = {{qvck, " LoRA q_proj,v_proj checkpointed"},
                                      {qvo, " LoRA q_proj,v_proj,o_proj"}, {qvq, " QLoRA q_proj,v_proj"},
                                      {qvg, " gemma LoRA q_proj,v_proj"}, {qv32, " LoRA q_proj,v_proj fp32"},
                                      {NULL, NULL}};
    /* (gu: whether gate|up's path changes) */
    static const struct { w16_case c; int gu; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, qvck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, qvo, 0}, 1},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, qvq, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, qvg, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, qv32, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const long F = c->extra == qvck ? 2 : 1;
        const long gu = cases[i].gu ? 4 * p.s.L * F : 0;
        tap_ok(p.mb.glur - p.ma.glur == gu && p.ma.fo16 - p.mb.fo16 == gu &&
                   p.ma.bo16 == p.mb.bo16 && w16_same(&p, W16_SAME_ROUNDS | W16_SAME_ACTS),
               "%s: %ld fused rounding calls (%ld without, %ld fewer expected), %ld matmul_fwd_o16 "
               "(%ld without, %ld more expected), %ld matmul_bwd_o16 (%ld without), "
               "%ld k_round_bf16 (%ld without), activations' peak %llu bytes (%llu without)",
               what, p.ma.glur, p.mb.glur, gu, p.ma.fo16, p.mb.fo16, gu, p.ma.bo16, p.mb.bo16, p.ra,
               p.rb, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's untargeted o projection
 * With LoRA, Llama's o projection's backward writing the attention's dO in
 * bf16 (the path of no LoRA, arch.h zt_do16_of) where o has no adapters
 * (q_proj,v_proj), not only where the model has none (ZT_TEST_NO_LORAPATH=1,
 * the path of before: the fp32 dO of every block with adapters).  Over the
 * cpu backend att_do16 answers 0: one question a block and backward more,
 * nothing else.  Over a backend whose attention backward reads dO rounded
 * to bf16, as cuDNN's does (cuda_sdpa.cu k_sdpa_round), and answers 1: a
 * block and backward one matmul_bwd_o16 for matmul_bwd_d16 and one
 * gqa_ext_bwd16do for gqa_ext_bwd16d.  Both: every loss and gradient norm
 * over 4 steps bitwise, q_proj,v_proj at stages 0 and 3, checkpointed,
 * QLoRA, Gemma 2; q_proj,v_proj,o_proj and GPT-2's c_attn (whose c_proj already took
 * it, gpt.c lora_off) unchanged; k_round_bf16, the bf16-gradient calls and
 * the activations' peak and plan the same. */
static zt_backend g_do16b;
/* dout rounded to bf16 in scratch of its own, then the cpu backend's */
static float *do16b_round(const float *dout, size_t n) {
    float *d = malloc((n ? n : 1) * sizeof(float));
    if (!d) return NULL;   /* (the entry then computes nothing: the check fails) */
    memcpy(d, dout, n * sizeof(float));
    bf16g_round(d, n);
    return d;
}
static int do16b_q(int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    (void)B, (void)T, (void)NH, (void)NKV, (void)hd, (void)o;
    return 1;
}
static void do16b_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp, const uint16_t *out16,
                         float *out, const float *lse, int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    float *d = do16b_round(dout, (size_t)B * T * NH * hd);
    if (d) zt_backend_cpu()->gqa_ext_bwd16o(dqkv, d, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    free(d);
}
static int do16b_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16, float *tmp,
                        const uint16_t *out16, float *out, const float *lse, int B, int T, int NH, int NKV, int hd,
                        const zt_attn_opts *o) {
    float *d = do16b_round(dout, (size_t)B * T * NH * hd);
    const int r = d ? zt_backend_cpu()->gqa_ext_bwd16d(dqkv, dqkv16, d, qkv16, tmp, out16, out, lse, B, T, NH,
                                                        NKV, hd, o)
                    : 0;
    free(d);
    return r;
}
/* (dout16 widened: exact, so the values do16b_bwd16d reads) */
static int do16b_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16, float *tmp,
                         const uint16_t *out16, float *out, const float *lse, int B, int T, int NH, int NKV,
                         int hd, const zt_attn_opts *o) {
    const size_t n = (size_t)B * T * NH * hd;
    float *d = malloc((n ? n : 1) * sizeof(float));
    if (!d) return 0;
    zt_backend_cpu()->from_bf16(d, dout16, n);
    const int r = do16b_bwd16d(dqkv, dqkv16, d, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    free(d);
    return r;
}
static void lora_lorapath(void) {
    static const w16_kind kind = {1073741824, " with and without LoRA's untargeted o in bf16 dO",
                                  "fp32 dO path's", NULL};
    static const char qvck[] = "ztrain.lora.r=8 ztrain.lora.alpha=16 ztrain.lora.targets=q_proj,v_proj "
                               "activation_checkpointing.policy=blocks";
    static const char qvo[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj,o_proj";
    static const char qvq[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=q_proj,v_proj "
                              "ztrain.lora.base=nf4";
    static const char qvg[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj";
    static const char cattn[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=c_attn";
    static const char cattn_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=c_attn "
                                   "activation_checkpointing.policy=blocks";
    static const w16_xname names[] = {{qvck, " LoRA q_proj,v_proj checkpointed"},
                                      {qvo, " LoRA q_proj,v_proj,o_proj"}, {qvq, " QLoRA q_proj,v_proj"},
                                      {qvg, " gemma LoRA q_proj,v_proj"}, {cattn, " LoRA c_attn"},
                                      {cattn_ck, " LoRA c_attn checkpointed"}, {NULL, NULL}};
    /* (arg: whether the path changes) */
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 1},       {"llama:2,4,2,32,48,64,2,16,untied", 3, qvck, 1},
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, qvq, 1}, {"llama:2,4,2,32,48,64,2,16", 3, qvg, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, qvo, 0},
        {"gpt2:2,2,32,64,2,16", 0, cattn, 0},              {"gpt2:2,2,32,64,2,16", 3, cattn_ck, 0}};
    g_do16b = *zt_backend_cpu();
    g_do16b.att_do16 = do16b_q;
    g_do16b.gqa_ext_bwd16o = do16b_bwd16o;
    g_do16b.gqa_ext_bwd16d = do16b_bwd16d;
    g_do16b.gqa_ext_bwd16do = do16b_bwd16do;
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_do16b : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i];
            w16_pair p;
            char what[192];
            if (!w16_case_run(&p, &kind, c, 0, names, b16 ? " (bf16-dO backend)" : " (cpu)", what, sizeof what))
                continue;
            /* (a block and backward: one question; the bf16-dO backend's
             * answer 1: one matmul_bwd_o16 for matmul_bwd_d16, one
             * gqa_ext_bwd16do for gqa_ext_bwd16d (ab16) or _bwd16o) */
            const long n = c->arg ? 4L * p.s.L : 0, o = b16 ? n : 0;
            tap_ok(p.ma.do16q - p.mb.do16q == n && p.ma.bo16 - p.mb.bo16 == o &&
                       p.ma.do16 - p.mb.do16 == 2 * o && p.mb.ab16 - p.ma.ab16 == o &&
                       p.ma.bwds - p.mb.bwds == -o &&
                       w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_O16 | W16_SAME_A16 |
                                        W16_SAME_D16 | W16_SAME_AO16 | W16_SAME_TO16 | W16_SAME_FROM16 |
                                        W16_SAME_ACTS | W16_SAME_GATHERED),
                   "%s: %ld att_do16 questions (%ld without, %ld more expected), %ld matmul_bwd_o16 (%ld "
                   "without, %ld more expected), %ld matmul_bwd_o16 + gqa_ext_bwd16do (%ld without), %ld "
                   "gqa_ext_bwd16d (%ld without), %ld matmul_bwd* (%ld without), %ld k_round_bf16 (%ld "
                   "without), activations' peak %llu bytes (%llu without)",
                   what, p.ma.do16q, p.mb.do16q, n, p.ma.bo16, p.mb.bo16, o, p.ma.do16, p.mb.do16, p.ma.ab16,
                   p.mb.ab16, p.ma.bwds, p.mb.bwds, p.ra, p.rb, (unsigned long long)p.ma.acts_peak,
                   (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ fresh weight gradients
 * Full fine-tuning at stages 0 and 1: each block GEMM weight's gradient
 * written by its first micro-batch's dW GEMM (beta 0, backend.h
 * set_dw_fresh) and left out of the step's zeroing (shard.h
 * zt_shard_fresh_range), against ZT_TEST_NO_GRADFRESH=1 (the whole block
 * zeroed, every dW GEMM adding into it).  Every loss and gradient norm
 * over 4 steps bitwise (a -0.0 gradient element is +0.0 there: the same
 * square, the same AdamW update; any other difference would show in the
 * norms and the later steps' losses), and at stages 0 and 1 the last
 * step's gradient block bitwise, -0.0 read as +0.0: GPT-2 and Llama, tied and untied,
 * stages 0 and 1, gradient accumulation 2, checkpointed, bf16 and fp32
 * matmuls, Gemma 2.  The counts: a step's memsets 4 W bytes fewer (W: the
 * blocks' GEMM weights' elements; but the first step's: the gradients are
 * still the allocation's zeros, zeroed in neither run) and its
 * cublasLt GEMMs 4 W bytes fewer (dw not read: the first micro-batch's
 * only), every GEMM and every call the same.  A Mixture of Experts (every
 * token on experts 1 and 2, ZT_TEST_MOE_ROUTE_ALL=1: experts 0 and 3 get
 * no rows, so no dW GEMM writes their gradients, which moe.c zeroes where
 * they are fresh, backend.h dw_fresh) at stages 0 and 1, with gradient
 * accumulation 2 and checkpointed: the same, the GEMM bytes 4 W' fewer a
 * step (W': the weights dW GEMMs write, the empty experts' not; in bf16 the
 * experts' are the grouped weight gradients' k_dw_add16, config.h
 * ZT_W16_MOEGW, whose fp32 read a fresh gradient skips as a GEMM's) and the
 * memsets 4 (W - W') bytes more a step (the empty experts zeroed, in the
 * first step too).  And 16 experts of 1 a token on the model's own router
 * (4 steps of 32 tokens: experts without rows in some steps, with rows in
 * others, the gradient a fresh step would leave stale if moe.c did not
 * zero it): bitwise, more memsets (the counts not checked exactly).  Stages
 * 2 and 3 and LoRA: unchanged (the same counts, losses bitwise). */
/* W: q|k|v, the attention's output projection, the MLP's matrices, per
 * block; and a tied head's V C (its gradient the embedding's, written fresh
 * by the fused head: config.h ZT_W16_HEADFRESH, head_fresh below) */
static double fresh_elems(const cm_shape *s) {
    const double C = s->C, head = s->untied ? 0 : (double)s->V * C;
    if (!s->llama) return s->L * 12.0 * C * C + head;
    const double hd = C / s->NH;
    return s->L * (C * (s->NH + 2.0 * s->NKV) * hd + s->NH * hd * C + 3.0 * s->I * C) + head;
}
/* a Mixture of Experts of E experts of width Im, every block sparse: W
 * (all the blocks' GEMM weights: attention, router, experts) and W' (less
 * the E - K experts that get no rows) */
static void fresh_elems_moe(const cm_shape *s, int E, int K, int Im, double *w, double *wrows) {
    const double C = s->C, hd = C / s->NH, head = s->untied ? 0 : (double)s->V * C;
    const double att = C * (s->NH + 2.0 * s->NKV) * hd + s->NH * hd * C, ex = 3.0 * Im * C;
    *w = s->L * (att + E * C + E * ex) + head;
    *wrows = s->L * (att + E * C + K * ex) + head;
}
/* the last step's gradient block of a pair bitwise, -0.0 read as +0.0
 * (the fresh gradients' sections) */
static void fresh_grads_check(const w16_pair *p, const char *what) {
    tap_ok(p->ma.ghave && p->mb.ghave && p->ma.ghash == p->mb.ghash,
           "%s: the last step's gradients bitwise, -0.0 as +0.0 (hash %016llx, %016llx without; %ld "
           "-0.0 elements, %ld without)",
           what, (unsigned long long)p->ma.ghash, (unsigned long long)p->mb.ghash, p->ma.gneg0, p->mb.gneg0);
}
static void grad_fresh(void) {
    static const w16_kind kind = {2147483648ULL, " with and without the fresh weight gradients",
                                  "zeroed gradients' path's", NULL};
    static const char acc[] = "gradient_accumulation_steps=2 train_batch_size=4";
    static const char fp32[] = "bf16.enabled=false";
#define MOE "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 ztrain.model.moe_intermediate_size=24"
    static const char moe[] = MOE;
    static const char moe_acc[] = MOE " gradient_accumulation_steps=2 train_batch_size=4";
    static const char moe_ck[] = MOE " activation_checkpointing.policy=blocks";
    static const char moe_fp32[] = MOE " bf16.enabled=false";
#undef MOE
    static const char moe16[] = "ztrain.model.n_experts=16 ztrain.model.experts_per_token=1 "
                                "ztrain.model.moe_intermediate_size=24";
    static const char moe16_fp32[] = "ztrain.model.n_experts=16 ztrain.model.experts_per_token=1 "
                                     "ztrain.model.moe_intermediate_size=24 bf16.enabled=false";
    static const w16_xname names[] = {{acc, " accumulation 2"}, {fp32, " fp32"}, {moe, " MoE"},
                                      {moe_acc, " MoE accumulation 2"}, {moe_ck, " MoE checkpointed"},
                                      {moe_fp32, " MoE fp32"}, {moe16, " MoE 16 experts"},
                                      {moe16_fp32, " MoE 16 experts fp32"}, {NULL, NULL}};
    /* (arg: whether the path is taken) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1},         {"gpt2:2,2,32,64,2,16", 1, NULL, 1},
        {"gpt2:2,2,32,64,2,16", 0, acc, 1},          {"gpt2:2,2,32,64,2,16", 1, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 0, fp32, 1},         {"gpt2:2,2,32,64,2,16", 2, NULL, 0},
        {"gpt2:2,2,32,64,2,16", 3, NULL, 0},         {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 1},   {"llama:2,4,2,32,48,64,2,16,untied", 1, NULL, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, acc, 1}, {"llama:2,4,2,32,48,64,2,16", 1, acc, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_ck, 1}, {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 1, fp32, 1}, {"llama:2,4,2,32,48,64,2,16", 2, NULL, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16", 1, w16_lora, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, moe, 1},    {"llama:2,4,2,32,48,64,2,16,untied", 1, moe_acc, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, moe_ck, 1}, {"llama:2,4,2,32,48,64,2,16", 1, moe_fp32, 1},
        {"llama:2,4,2,32,48,64,2,16", 2, moe, 0},    {"llama:2,4,2,32,48,64,2,16", 0, moe16, 2},
        {"llama:2,4,2,32,48,64,2,16,untied", 1, moe16_fp32, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[192];
        const int ismoe = c->extra == moe || c->extra == moe_acc || c->extra == moe_ck || c->extra == moe_fp32;
        if (ismoe) setenv("ZT_TEST_MOE_ROUTE_ALL", "1", 1);
        const int ran = w16_case_run(&p, &kind, c, 0, names, NULL, what, sizeof what);
        unsetenv("ZT_TEST_MOE_ROUTE_ALL");
        if (!ran) continue;
        double w4 = c->arg ? 4 * fresh_elems(&p.s) : 0, empty4 = 0;
        if (ismoe && c->arg) {   /* (W and W' of the MoE: the empty experts' zeroed every step) */
            double wa, wr;
            fresh_elems_moe(&p.s, 4, 2, 24, &wa, &wr);
            w4 = 4 * wr;
            empty4 = 4 * (wa - wr);
        }
        const double dm = p.mb.memset_b - p.ma.memset_b + 4 * empty4, dg = p.mb.gemm_b - p.ma.gemm_b;
        if (c->arg == 2) {   /* (the model's routing: the counts vary) */
            tap_ok(p.ma.ghave && p.mb.ghave && p.ma.ghash == p.mb.ghash && p.ma.memset_n > p.mb.memset_n &&
                       p.ma.gemm == p.mb.gemm,
                   "%s: the last step's gradients bitwise, -0.0 as +0.0 (hash %016llx, %016llx without), "
                   "%ld memsets (%ld without), %ld GEMMs", what, (unsigned long long)p.ma.ghash,
                   (unsigned long long)p.mb.ghash, p.ma.memset_n, p.mb.memset_n, p.ma.gemm);
            continue;
        }
        if (c->stage <= 1 && c->extra != w16_lora)
            fresh_grads_check(&p, what);
        tap_ok(dg == 4 * w4 && dm == 3 * (w4 + empty4) && p.ma.gemm == p.mb.gemm &&
                   p.ma.bwds == p.mb.bwds && (c->arg ? p.ma.memset_n > p.mb.memset_n : p.ma.memset_n == p.mb.memset_n),
               "%s: memsets %.0f bytes in %ld launches (%.0f in %ld without: %.0f fewer, 4 W = %.0f a "
               "step), cublasLt GEMMs %.0f bytes (%.0f without: %.0f fewer, 4 steps' 4 W expected), "
               "%ld GEMMs and %ld matmul_bwd* (%ld, %ld without)",
               what, p.ma.memset_b, p.ma.memset_n, p.mb.memset_b, p.mb.memset_n, dm, w4, p.ma.gemm_b,
               p.mb.gemm_b, dg, p.ma.gemm, p.ma.bwds, p.mb.gemm, p.mb.bwds);
    }
}

/* ------------------------------------------------------------ the tied head's gradient written fresh
 * With the blocks' weight gradients written fresh (grad_fresh above), a
 * tied LM head's gradient (the embedding's [V, C]) too: left out of the
 * step's zeroing and written by the first dW GEMM of the first
 * micro-batch's fused head (config.h ZT_W16_HEADFRESH, shard.h
 * zt_shard_head_fresh; the head's other chunk, and the other micro-batch's
 * chunks, add into it), against ZT_TEST_NO_HEADFRESH=1 (the embedding
 * zeroed with its run of tensors, every chunk adding).  Every loss and
 * gradient norm over 4 steps bitwise, and at stages 0 and 1 the last
 * step's gradient block bitwise, -0.0 read as +0.0.  The counts: a step's
 * memsets 4 V C bytes fewer, in as many launches (the embedding's run of
 * tensors starts after it; but the first step's: the allocation's zeros,
 * zeroed in neither run), the cublasLt GEMMs 4 V C bytes fewer a step (the
 * first chunk's dw not read), every GEMM and call the same.  GPT-2 and
 * Llama tied, stages 0 and 1, gradient accumulation 2, checkpointed, fp32
 * matmuls, the head in one chunk, Gemma 2 (its soft-capped fp32 logits),
 * a Mixture of Experts.  Not taken (the same counts, bitwise): untied,
 * stages 2 and 3, LoRA, the head unfused (ZT_TEST_NO_HEADFUSE in both
 * runs), the weight gradients zeroed (ZT_TEST_NO_GRADFRESH in both). */
static void head_fresh(void) {
    static const w16_kind kind = {2251799813685248ULL, " with and without the tied head's gradient written fresh",
                                  "zeroed head gradient's", NULL};
    static const w16_kind same = {2251799813685248ULL,
                                  " with and without the tied head's gradient written fresh (not taken)",
                                  "zeroed head gradient's", NULL};
    static const char acc[] = "gradient_accumulation_steps=2 train_batch_size=4";
    static const char fp32[] = "bf16.enabled=false";
    static const char one[] = "ztrain.classifier_chunk_rows=64";
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24";
    static const w16_xname names[] = {{acc, " accumulation 2"}, {fp32, " fp32"}, {one, " head in one chunk"},
                                      {moe, " MoE"}, {NULL, NULL}};
    /* (taken: the path's; no: the hooks of both runs) */
    static const struct { w16_case c; int taken; w16_bits no; } cases[] = {
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 1, NULL, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 0, acc, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 1, w16_ck, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 0, fp32, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 0, one, 0}, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 2, NULL, 0}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 3, NULL, 0}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 0, 131072},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 0, 2147483648ULL},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 1, acc, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, moe, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16,untied", 0, NULL, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16,untied", 1, acc, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 2, NULL, 0}, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        const int on = cases[i].taken;
        w16_pair p;
        char what[192];
        if (!w16_case_run(&p, on ? &kind : &same, c, cases[i].no, names, NULL, what, sizeof what)) continue;
        const double vc4 = on ? 4.0 * p.s.V * p.s.C : 0;
        const double dm = p.mb.memset_b - p.ma.memset_b, dg = p.mb.gemm_b - p.ma.gemm_b;
        if (c->stage <= 1 && c->extra != w16_lora)
            fresh_grads_check(&p, what);
        tap_ok(dm == 3 * vc4 && dg == 4 * vc4 && p.ma.memset_n == p.mb.memset_n && p.ma.gemm == p.mb.gemm &&
                   p.ma.bwds == p.mb.bwds && p.ma.h16 == p.mb.h16 &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
               "%s: memsets %.0f bytes in %ld launches (%.0f in %ld without: %.0f fewer, 3 steps' 4 V C "
               "= %.0f expected), cublasLt GEMMs %.0f bytes (%.0f without: %.0f fewer, 4 steps' 4 V C "
               "expected), %ld GEMMs and %ld matmul_bwd* (%ld, %ld without)",
               what, p.ma.memset_b, p.ma.memset_n, p.mb.memset_b, p.mb.memset_n, dm, 3 * vc4, p.ma.gemm_b,
               p.mb.gemm_b, dg, p.ma.gemm, p.ma.bwds, p.mb.gemm, p.mb.bwds);
    }
}

/* ------------------------------------------------------------ a unit's fp32 copy in one launch
 * With bf16 parameter storage, each unit's fp32 copy of its tensors other
 * than the GEMM-only ones (shard.c make_view: the norms, the biases, the
 * embeddings) made by one from_bf16_runs call (one k_from_bf16_runs
 * launch) where it was a from_bf16 a run of adjacent tensors (GPT-2's
 * block: 5 runs), against ZT_TEST_NO_WIDENRUNS=1.  Bitwise (the same
 * widening): every loss and gradient norm over 4 steps, the stage 0-1
 * gradient block.  The counts: the same bytes widened (k_from_bf16 and
 * k_from_bf16_runs), k_from_bf16_runs launches (none without), fewer
 * k_from_bf16 launches, and the launches differ by exactly that (F - R:
 * F fewer k_from_bf16, R k_from_bf16_runs); every GEMM, the gathered
 * parameters' peak and plan the same.  GPT-2 and Llama at stages 0 and 3
 * (the gathered unit's copy), checkpointed, Gemma 2 (its four norms a
 * block), a Mixture of Experts, LoRA's frozen base at stages 1 and 3.  Not
 * taken (the same counts): the fp32 storage (bf16.enabled=false), QLoRA
 * (the NF4 base's copies are dequantized, shard_nf4.c). */
static void widen_runs(void) {
    static const w16_kind kind = {4503599627370496ULL, " with and without a unit's fp32 copy in one launch",
                                  "per-run widening's", NULL};
    static const w16_kind same = {4503599627370496ULL,
                                  " with and without a unit's fp32 copy in one launch (not taken)",
                                  "per-run widening's", NULL};
    static const char fp32[] = "bf16.enabled=false";
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24";
    static const w16_xname names[] = {{fp32, " fp32"}, {moe, " MoE"}, {NULL, NULL}};
    /* (arg: 1 where taken) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1},        {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 1, w16_lora, 1},    {"gpt2:2,2,32,64,2,16", 0, fp32, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 1},  {"llama:2,4,2,32,48,64,2,16,untied", 3, NULL, 1},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 1}, {"llama:2,4,2,32,48,64,2,16", 0, moe, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 1}, {"llama:2,4,2,32,48,64,2,16,untied", 1, fp32, 0},
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, c->arg ? &kind : &same, c, 0, names, NULL, what, sizeof what)) continue;
        const long f = p.mb.from16 - p.ma.from16, r = p.ma.wruns;
        if (c->stage <= 1 && c->extra != w16_lora && c->extra != w16_lnf4 && c->extra != moe)
            tap_ok(p.ma.ghave && p.mb.ghave && p.ma.ghash == p.mb.ghash,
                   "%s: the last step's gradient block bitwise (hash %016llx, %016llx without)", what,
                   (unsigned long long)p.ma.ghash, (unsigned long long)p.mb.ghash);
        tap_ok((c->arg ? r > 0 && f > r : r == 0 && f == 0) && p.mb.wruns == 0 &&
                   p.mb.launches - p.ma.launches == f - r && p.ma.widened == p.mb.widened &&
                   p.ma.gemm == p.mb.gemm && w16_same(&p, W16_SAME_GATHERED | W16_SAME_ACTS),
               "%s: %ld k_from_bf16_runs (%ld without), %ld k_from_bf16 (%ld without: %ld fewer), %ld "
               "launches (%ld without: %ld fewer, %ld - %ld expected), %.0f bytes widened (%.0f without), "
               "%ld GEMMs (%ld), the gathered parameters' peak %llu (%llu)",
               what, r, p.mb.wruns, p.ma.from16, p.mb.from16, f, p.ma.launches, p.mb.launches,
               p.mb.launches - p.ma.launches, f, r, p.ma.widened, p.mb.widened, p.ma.gemm, p.mb.gemm,
               (unsigned long long)p.ma.peak, (unsigned long long)p.mb.peak);
    }
}

/* ------------------------------------------------------------ LoRA's gate|up in bf16
 * With adapters on Llama's gate|up (bf16 activations, no dropout), their
 * delta written in bf16 first (lora.h zt_lora_fwd_first16: h rounded by
 * one k_to_bf16, the product by matmul_bwd_o16) and the base GEMM adding
 * into it in place (matmul_fwd_acc16), SwiGLU / GeGLU reading the bf16
 * gate|up (swiglu_fwd16 / geglu_fwd16), against the fp32 delta, the fp32
 * sum (matmul_fwd_acc) and its fused rounding (swiglu_fwd16r / geglu_fwd16r;
 * ZT_TEST_NO_GU16=1).  NOT bitwise: the delta rounded to bf16 once more
 * before the add, a relative change of at most 2^-9 of the delta, itself a
 * small part of gate|up (B starts at zero: step 1 is the same); the
 * losses within 2^-12 and the gradient norms within 2^-9 relative
 * (ACT16_*_TOL: the bounds the bf16 activations' rounding of gate|up
 * itself keeps, one rounding of a part of those values here), and not
 * bitwise over the 4 steps.  Per step, block and forward pass (2
 * checkpointed): one matmul_fwd_acc16 call, one matmul_bwd_o16 and one
 * k_to_bf16 (h) more; one matmul_fwd_acc, one fused rounding call and one
 * k_round_bf16 (w_dinp's of h) fewer; one swiglu_fwd16 / geglu_fwd16 more;
 * fewer bytes moved (no fp32 [N, 2I] gate|up written, read back and
 * rounded); the activations' peak and plan the same.  All-linear at stages
 * 0 and 3, checkpointed, QLoRA, Gemma 2's GeGLU.  Bitwise and the same
 * counts: q_proj,v_proj (no adapters on gate|up), the fp32 matmuls, the fp32
 * activations (ZT_TEST_NO_ACT16), the adapters' dropout, GPT-2 (its fc
 * keeps the fp32 path). */
static void lora_gu16(void) {
    static const w16_kind kind = {536870912, " with and without LoRA's gate|up in bf16",
                                  "fp32 gate|up's", "the adapters' delta rounded to bf16"};
    static const w16_kind same = {536870912, " with and without LoRA's gate|up in bf16 (not taken)",
                                  "fp32 gate|up's", NULL};
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{gemma, " gemma LoRA"}, {NULL, NULL}};
    /* (on: whether gate|up's path changes; arg: the no_w16 bits of both runs) */
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lora, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, gemma, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 2}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[192];
        /* (ZT_TEST_NO_LBRANCH16: o's and down's fp32 delta in both runs, the
         * counts below gate|up's alone; lora_branch16) */
        if (!w16_case_run(&p, cases[i].on ? &kind : &same, c, c->arg | 34359738368ULL, names, NULL,
                          what, sizeof what))
            continue;
        const long F = c->extra == w16_lck ? 2 : 1;
        const long n = cases[i].on ? 4 * p.s.L * F : 0;
        tap_ok(p.ma.facc16 == n && p.mb.facc16 == 0 && p.mb.facc - p.ma.facc == n &&
                   p.ma.bo16 - p.mb.bo16 == n && p.mb.glur - p.ma.glur == n &&
                   p.ma.glu16 - p.mb.glu16 == n && p.ma.to16 - p.mb.to16 == n &&
                   p.rb - p.ra == n && (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                   w16_same(&p, W16_SAME_ACTS),
               "%s: %ld matmul_fwd_acc16 (%ld expected, %ld without), %ld matmul_fwd_acc (%ld "
               "without), %ld matmul_bwd_o16 (%ld without), %ld fused rounding calls (%ld without), "
               "%ld swiglu_fwd16 / geglu_fwd16 (%ld without), %ld k_to_bf16 (%ld without), %ld "
               "k_round_bf16 (%ld without), %.0f bytes moved (%.0f without), activations' peak %llu "
               "bytes (%llu without)",
               what, p.ma.facc16, n, p.mb.facc16, p.ma.facc, p.mb.facc, p.ma.bo16, p.mb.bo16,
               p.ma.glur, p.mb.glur, p.ma.glu16, p.mb.glu16, p.ma.to16, p.mb.to16, p.ra, p.rb,
               p.ma.all_b, p.mb.all_b, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ the residual branch in bf16
 * Llama's o and down projections without adapters writing their outputs,
 * the residual branches, in bf16 (matmul_fwd_o16, PyTorch autocast's
 * Linear) and the residual add + RMSNorm widening them (add_rmsnorm_fwd16b:
 * the attention's in the MLP's norm, down's in the block above's first norm
 * or the final norm, the add folded there), against the fp32 branches
 * (ZT_TEST_NO_BRANCH16=1).  NOT bitwise: each branch rounded to bf16 once
 * before the add, a relative change of at most 2^-9 of the branch, itself a
 * part of the residual; the losses within 2^-12 and the gradient norms
 * within 2^-9 relative (ACT16_*_TOL: the bounds of the bf16 activations,
 * which round the normalized residual itself, a larger value, each block;
 * measured: the printed differences), and not bitwise over the 4 steps.
 * Per step and forward pass (2 checkpointed: the recompute writes both
 * branches again, its down output left pending for nobody): L matmul_fwd_o16
 * calls more for o and L for down (ZT_TEST_NO_X16: L - 1, the last block's
 * down fp32 for the fp32 final norm), as many bf16-input GEMM calls
 * (matmul_fwd_a16) fewer; L + L add_rmsnorm_fwd16b calls in the forward
 * (the MLP's norms, and each block's first norm but block 0's and the final
 * norm; ZT_TEST_NO_X16: the final norm's not) and L in a recompute, as many
 * add_rmsnorm_fwd16 fewer; the same k_to_bf16 and k_round_bf16; fewer bytes
 * moved (no fp32 [N, C] branch written and read back: 4 bytes an element
 * written and read, against 2 and 2), the activations' peak and plan the
 * same (the branch in the [N, C] fp32 scratch it took).  Bitwise and the
 * same counts where the path is not taken: adapters on o and down
 * (all-linear), Gemma 2's post norms, the fp32 matmuls, the fp32
 * activations (ZT_TEST_NO_ACT16; so a Mixture of Experts, whose blocks keep
 * the fp32 activations, model_acts.h zt_acts16_on; counted), the separate residual add (ZT_TEST_NO_ADDFOLD),
 * GPT-2. */
static void branch16(void) {
    static const w16_kind kind = {4294967296ULL, " with and without the bf16 residual branches",
                                  "fp32 branches'", "the o / down outputs rounded to bf16"};
    static const w16_kind same = {4294967296ULL,
                                  " with and without the bf16 residual branches (not taken)",
                                  "fp32 branches'", NULL};
    static const char f32[] = "bf16.enabled=false";
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24";
    static const w16_xname names[] = {{f32, " fp32"}, {moe, " MoE"}, {NULL, NULL}};
    /* (on: whether the path is taken; arg: the no_w16 bits of both runs) */
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 1},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_ck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_qv, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 0, NULL, 8192}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, moe, 0}, 0},
        /* (adapters on o / down: their fp32 branch, ZT_TEST_NO_LBRANCH16;
         * the bf16 one is lora_branch16's) */
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 34359738368ULL}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, f32, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 2}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 3, NULL, 65536}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, cases[i].on ? &kind : &same, c, c->arg, names, NULL, what, sizeof what))
            continue;
        const long F = c->extra == w16_ck ? 2 : 1, L = p.s.L;
        /* down's bf16 outputs a pass: L, or L - 1 with the fp32 final norm */
        const long Ld = c->arg & 8192 ? L - 1 : L;
        const long o16 = cases[i].on ? 4 * (L + Ld) * F : 0;
        const long nb = cases[i].on ? 4 * (L * F + Ld) : 0;
        tap_ok(p.ma.fo16 - p.mb.fo16 == o16 && p.mb.fwd - p.ma.fwd == o16 && p.ma.anb16 == nb &&
                   p.mb.anb16 == 0 && p.mb.an16 - p.ma.an16 == nb &&
                   (o16 ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_TO16 | W16_SAME_N16 | W16_SAME_ACTS),
               "%s: %ld matmul_fwd_o16 (%ld without, %ld more expected), %ld matmul_fwd* (%ld "
               "without), %ld add_rmsnorm_fwd16b (%ld expected, %ld without), %ld "
               "add_rmsnorm_fwd16 (%ld without), %ld k_to_bf16 (%ld without), %ld k_round_bf16 "
               "(%ld without), %.0f bytes moved (%.0f without), activations' peak %llu bytes (%llu "
               "without)",
               what, p.ma.fo16, p.mb.fo16, o16, p.ma.fwd, p.mb.fwd, p.ma.anb16, nb, p.mb.anb16,
               p.ma.an16, p.mb.an16, p.ma.to16, p.mb.to16, p.ra, p.rb, p.ma.all_b, p.mb.all_b,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ a Mixture of Experts with the bf16 activations
 * A MoE model (config.h ZT_W16_MOE16) takes the bf16 activations of the
 * dense models in every block's attention half, the dense blocks' MLP and
 * the LM head; an activation slot holding a sparse block keeps its MLP half
 * in fp32 (the experts' path, moe.c), against the fp32 activations
 * everywhere (ZT_TEST_NO_MOE16=1).  NOT bitwise (the GEMM outputs kept in
 * bf16: q|k|v, the attention output, the dense gate|up; the bf16 branches
 * and logits), the losses within 2^-12 and the gradient norms within 2^-9
 * relative of the fp32 activations' (ACT16_*_TOL), the activations' peak
 * lower and the plan following it exactly (the planner's carve is the
 * model's).  All blocks sparse with a shared expert, stages 0 and 3, and
 * checkpointed; dense and sparse blocks mixed (decoder_sparse_step 2: block
 * 1 sparse), also checkpointed (slots holding both kinds); expert
 * parallelism is moe_ep.sh's.  Not taken, bitwise and the same peak: the
 * fp32 matmuls (ztrain.matmul_precision=fp32; the bf16 activations need
 * bf16 GEMMs), fp32.  Counted (backend cuda over cpu, as every case; the
 * counts of the experts' path: moe_counted). */
/* ------------------------------------------------------------ a MoE step counted
 * A Mixture of Experts (E 4 experts, top-2, width 24; libtrain/moe.c) on
 * the counting table over cpu (backend cuda, as every case): 4 steps'
 * losses and gradient norms bitwise those of the same run on the cpu table
 * without the counter (counting changes no value; the cpu backend itself,
 * ztrain.backend=cpu, is another configuration: no bf16 weight storage,
 * not bitwise), and per step and MoE block (P forwards: 2 checkpointed,
 * every block recomputed) the entries moe.c calls: moe_route_fwd and
 * moe_permute (k_moe_count, k_moe_offsets, k_moe_fill) P, rows_gather P
 * (the weights), rows_gather_o16 2 (dy's rows unweighted for the down
 * GEMMs' input gradients, dy's rows weighted for the down weights'
 * gradients, gathered straight into bf16: moe.c down_bwd16, the bf16
 * experts' outputs not kept; config.h ZT_W16_GATHER16), rows_gather16 P + 1
 * (x's bf16 routed rows, gathered again by the backward; config.h
 * ZT_W16_MX16: with ZT_TEST_NO_MX16 they are rows_gather's, the losses
 * bitwise the same), rows_dot16 1 (d wsel_i = g_i . hp_i and the rows'
 * scale wsel_i g_i in one pass), rows_sum16 P (the output, from the
 * bf16 outputs), rows_scatter 2 (dwts, dx),
 * moe_route_bwd, swiglu_bwd16 1, swiglu_fwd16 P (one over every routed
 * row), moe_regroup none (no expert parallelism); a shared expert (llama.c
 * moe_fwd / moe_bwd, fp32) adds per block swiglu_fwd, sigmoid_fwd and
 * rows_scatter P (its gated output), swiglu_bwd, sigmoid_bwd, rows_dot and
 * rows_gather 1 (none without one).  With every token on
 * experts 1 and 2 (ZT_TEST_MOE_ROUTE_ALL=1: K of E take rows, N each): the
 * bf16 experts' path's matmul_fwd_o16 1 + K a forward (q|k|v's and the
 * experts' gate|up), one k_swiglu_fwd16 of N K rows (3 N K Im 2 bytes),
 * matmul_fwd_a16 and matmul_bwd_a16 K each more than ZT_TEST_NO_MOE16's
 * fp32 experts (which call swiglu_fwd K a forward and swiglu_bwd K, no
 * 16-bit SwiGLU).  The bare table (no values) through bench/costmodel's
 * step: with the forced routing (idx known to it: to_device) the same
 * GEMMs and MoE kernels (launches, FLOPs, bytes) as over cpu (the rest
 * differs by the host-memory table's staging: memsets, transfers); the
 * routing counts read back
 * (route_groups: E + 1 ints, a D2H and a host sync) 2 a block and step
 * (forward and backward), 1 more a recomputed block. */
/* moe_counted's grouped paths, one case: 4 steps by default (rg, mg, tg),
 * with the test hook env set (rn, mn, tn) and on the cpu table without one
 * entry (nob, its entry NULL: rt, tt); *dl, *dn the largest relative
 * differences of the losses and gradient norms between the first two.
 * 0: a run failed (reported as a failed check, its message a diagnostic). */
static int moe_grouped_runs(const cm_shape *s, int stage, const char *extra, const char *env,
                            const zt_backend *nob, const char *what, double rg[4][2], double rn[4][2],
                            double rt[4][2], w16_mem *mg, w16_mem *mn, zt_count_totals *tg, zt_count_totals *tn,
                            zt_count_totals *tt, double *dl, double *dn) {
    long w = 0, r = 0;
    w16_mem mt;
    zt_status st;
    memset(&st, 0, sizeof st);
    int rc = w16_run(s, stage, extra, 0, rg, &w, &r, mg, &st);
    *tg = g_w16_tot;
    setenv(env, "1", 1);
    if (rc == ZT_OK) rc = w16_run(s, stage, extra, 0, rn, &w, &r, mn, &st);
    unsetenv(env);
    *tn = g_w16_tot;
    g_w16_inner = nob;
    if (rc == ZT_OK) rc = w16_run(s, stage, extra, 0, rt, &w, &r, &mt, &st);
    g_w16_inner = NULL;
    *tt = g_w16_tot;
    if (!tap_ok(rc == ZT_OK, "%s: 4 steps, grouped and not", what)) {
        tap_diag("%s", st.msg);
        return 0;
    }
    *dl = *dn = 0;
    for (int q = 0; q < 4; q++) {
        const double a = fabs(rg[q][0] - rn[q][0]) / fabs(rn[q][0]);
        const double b = fabs(rg[q][1] - rn[q][1]) / fabs(rn[q][1]);
        if (!(a <= *dl)) *dl = a;
        if (!(b <= *dn)) *dn = b;
    }
    return 1;
}

static void moe_counted(void) {
#define MOE "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 ztrain.model.moe_intermediate_size=24 " \
            "ztrain.matmul_precision=bf16"
    static const char base[] = MOE;
    static const char ck[] = MOE " activation_checkpointing.policy=blocks";
    static const char sh[] = MOE " ztrain.model.shared_expert_size=16";
#undef MOE
    static const struct { const char *shape; int stage; const char *extra, *name; int P, shared; } cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, base, "", 1, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, ck, " checkpointed", 2, 0},
        {"llama:3,4,2,32,48,64,2,16,untied", 3, sh, " shared expert", 1, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, ck, " checkpointed", 2, 0}};
    /* (the checks below are of the per-expert input gradients, the paths
     * they compare bitwise; the grouped ones, config.h ZT_W16_MOEGB, not
     * the same values, are checked after them) */
    setenv("ZT_TEST_NO_MOEGB", "1", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cm_shape s;
        cm_shape_parse(cases[i].shape, &s);
        char what[160];
        snprintf(what, sizeof what, "MoE counted %s stage %d%s", cases[i].shape, cases[i].stage, cases[i].name);
        double ra[4][2], rb[4][2];
        long w = 0, r = 0;
        w16_mem ma, mb;
        zt_status st;
        memset(&st, 0, sizeof st);
        g_w16_moe_cpu = 2;
        int rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rb, &w, &r, &mb, &st);
        g_w16_moe_cpu = 0;
        /* (ZT_TEST_NO_MX16: the fp32 norm output and routed rows) */
        double rx[4][2];
        w16_mem mx;
        setenv("ZT_TEST_NO_MX16", "1", 1);
        if (rc == ZT_OK) rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rx, &w, &r, &mx, &st);
        unsetenv("ZT_TEST_NO_MX16");
        const zt_count_totals tx = g_w16_tot;
        const long gx = g_w16_moek.gather, gx16 = g_w16_moek.gather16;
        if (rc == ZT_OK) rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, ra, &w, &r, &ma, &st);
        if (!tap_ok(rc == ZT_OK, "%s: 4 steps, counted and not", what)) {
            tap_diag("%s", st.msg);
            continue;
        }
        const zt_count_totals t = g_w16_tot;
        /* the sparse blocks' norm output and routed rows in bf16 (config.h
         * ZT_W16_MX16): every reader rounded them before, so the same
         * losses and gradient norms; x's routed rows gathered in bf16 each
         * forward and again by the backward (rows_gather16 P + 1), the
         * activations' planned and counted peaks smaller, each exact */
        const long nn = 4L * s.L, PP = cases[i].P;
        tap_ok(!memcmp(ra, rx, sizeof ra) && t.calls[ZT_CE_rows_gather16] == nn * (PP + 1) &&
                   g_w16_moek.gather16 == nn * (PP + 1) && tx.calls[ZT_CE_rows_gather16] == 0 &&
                   gx16 == 0 && tx.calls[ZT_CE_rows_gather] == t.calls[ZT_CE_rows_gather] + nn * (PP + 1) &&
                   gx == g_w16_moek.gather + nn * (PP + 1) && ma.acts_peak < mx.acts_peak &&
                   ma.acts_plan == ma.acts_peak + (mx.acts_plan - mx.acts_peak),
               "%s: the bf16 norm output and routed rows: losses and gradient norms bitwise "
               "ZT_TEST_NO_MX16's, %ld rows_gather16 (%ld without), activations' peak %llu bytes "
               "(planned %llu; without %llu, planned %llu)",
               what, t.calls[ZT_CE_rows_gather16], tx.calls[ZT_CE_rows_gather16],
               (unsigned long long)ma.acts_peak, (unsigned long long)ma.acts_plan,
               (unsigned long long)mx.acts_peak, (unsigned long long)mx.acts_plan);
        /* the experts' backward GEMMs on output gradients rounded once a
         * layer (config.h ZT_W16_MOED16): the same losses and gradient
         * norms as ZT_TEST_NO_MOED16's, where each expert's GEMMs round
         * their slice; the experts' SwiGLU backward writes gate|up's
         * gradient in bf16 (swiglu_bwd_d16 for swiglu_bwd16), 2 to_bf16
         * more a block's backward (dy's rows unweighted and weighted:
         * down_bwd16), fewer launches (with K experts of rows a block
         * 3 K matmul entries that each rounded their dout) */
        {
            const w16_moek moek = g_w16_moek;   /* (the default run's, checked below) */
            double rd[4][2];
            w16_mem md;
            setenv("ZT_TEST_NO_MOED16", "1", 1);
            int rd_rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rd, &w, &r, &md, &st);
            unsetenv("ZT_TEST_NO_MOED16");
            const zt_count_totals td = g_w16_tot;
            tap_ok(rd_rc == ZT_OK && !memcmp(ra, rd, sizeof ra) &&
                       td.calls[ZT_CE_swiglu_bwd16] == t.calls[ZT_CE_swiglu_bwd16] + nn &&
                       t.calls[ZT_CE_swiglu_bwd_d16] == td.calls[ZT_CE_swiglu_bwd_d16] + nn &&
                       t.calls[ZT_CE_to_bf16] == td.calls[ZT_CE_to_bf16] &&
                       t.calls[ZT_CE_rows_gather_o16] == 2 * nn && td.calls[ZT_CE_rows_gather_o16] == 0 &&
                       td.calls[ZT_CE_rows_gather] == t.calls[ZT_CE_rows_gather] + 2 * nn &&
                       t.launches < td.launches && ma.acts_peak == md.acts_peak,
                   "%s: the experts' output gradients rounded once a layer: losses and gradient norms "
                   "bitwise ZT_TEST_NO_MOED16's, swiglu_bwd16 %ld (%ld), swiglu_bwd_d16 %ld (%ld), "
                   "rows_gather_o16 %ld (%ld: rows_gather %ld, %ld), to_bf16 %ld (%ld), launches %ld (%ld)",
                   what, t.calls[ZT_CE_swiglu_bwd16], td.calls[ZT_CE_swiglu_bwd16],
                   t.calls[ZT_CE_swiglu_bwd_d16], td.calls[ZT_CE_swiglu_bwd_d16],
                   t.calls[ZT_CE_rows_gather_o16], td.calls[ZT_CE_rows_gather_o16], t.calls[ZT_CE_rows_gather],
                   td.calls[ZT_CE_rows_gather], t.calls[ZT_CE_to_bf16],
                   td.calls[ZT_CE_to_bf16], t.launches, td.launches);
            /* the output gradients' rows gathered straight into bf16
             * (config.h ZT_W16_GATHER16): bitwise ZT_TEST_NO_GATHER16's
             * fp32 gathers then to_bf16, 2 a block's backward (dy's rows
             * unweighted and weighted: down_bwd16), N K C (4 + 4 + 2)
             * bytes fewer moved each */
            double rq[4][2];
            w16_mem mq;
            setenv("ZT_TEST_NO_GATHER16", "1", 1);
            int rq_rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rq, &w, &r, &mq, &st);
            unsetenv("ZT_TEST_NO_GATHER16");
            const zt_count_totals tq = g_w16_tot;
            const double NKC = 2.0 * s.B * s.T * s.C;   /* (2 experts a token) */
            tap_ok(rq_rc == ZT_OK && !memcmp(ra, rq, sizeof ra) && tq.calls[ZT_CE_rows_gather_o16] == 0 &&
                       tq.calls[ZT_CE_rows_gather] == t.calls[ZT_CE_rows_gather] + 2 * nn &&
                       tq.calls[ZT_CE_to_bf16] == t.calls[ZT_CE_to_bf16] + 2 * nn &&
                       tq.launches == t.launches + 2 * nn && tq.bytes - t.bytes == 2 * nn * NKC * 8 &&
                       ma.acts_peak == mq.acts_peak,
                   "%s: the MoE rows gathered in bf16: losses and gradient norms bitwise "
                   "ZT_TEST_NO_GATHER16's, rows_gather_o16 %ld, rows_gather %ld (%ld), to_bf16 %ld (%ld), "
                   "%.0f bytes fewer (2 a block's backward x N K C x 8)",
                   what, t.calls[ZT_CE_rows_gather_o16], t.calls[ZT_CE_rows_gather], tq.calls[ZT_CE_rows_gather],
                   t.calls[ZT_CE_to_bf16], tq.calls[ZT_CE_to_bf16], tq.bytes - t.bytes);
            if (i == 0) {
                /* (and on the kept outputs' path, ZT_TEST_MOE_KEEP_YP=1:
                 * the down GEMMs' rows rounded once, gathered so:
                 * one rows_gather_o16 a block for a rows_gather) */
                double rk1[4][2], rk2[4][2];
                w16_mem mk1, mk2;
                setenv("ZT_TEST_MOE_KEEP_YP", "1", 1);
                int rk_rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rk1, &w, &r, &mk1, &st);
                const zt_count_totals tk1 = g_w16_tot;
                setenv("ZT_TEST_NO_MOED16", "1", 1);
                if (rk_rc == ZT_OK) rk_rc = w16_run(&s, cases[i].stage, cases[i].extra, 0, rk2, &w, &r, &mk2, &st);
                unsetenv("ZT_TEST_NO_MOED16");
                unsetenv("ZT_TEST_MOE_KEEP_YP");
                const zt_count_totals tk2 = g_w16_tot;
                tap_ok(rk_rc == ZT_OK && !memcmp(rk1, rk2, sizeof rk1) &&
                           tk1.calls[ZT_CE_to_bf16] == tk2.calls[ZT_CE_to_bf16] &&
                           tk1.calls[ZT_CE_rows_gather_o16] == nn &&
                           tk2.calls[ZT_CE_rows_gather] == tk1.calls[ZT_CE_rows_gather] + nn &&
                           tk1.calls[ZT_CE_swiglu_bwd_d16] == tk2.calls[ZT_CE_swiglu_bwd_d16] + nn &&
                           tk1.launches < tk2.launches,
                       "%s, ZT_TEST_MOE_KEEP_YP=1: the experts' output gradients rounded once a layer, "
                       "bitwise ZT_TEST_NO_MOED16's; to_bf16 %ld (%ld), launches %ld (%ld)",
                       what, tk1.calls[ZT_CE_to_bf16], tk2.calls[ZT_CE_to_bf16], tk1.launches, tk2.launches);
            }
            g_w16_moek = moek;
        }
        tap_ok(!memcmp(ra, rb, sizeof ra), "%s: losses and gradient norms bitwise the uncounted run's "
               "(%.9g %.9g ... %.9g)", what, ra[0][0], ra[1][0], ra[3][0]);
        const long n = 4L * s.L, P = cases[i].P, sh1 = cases[i].shared;
        const long perm = g_w16_moek.count;
        tap_ok(t.calls[ZT_CE_moe_route_fwd] == n * P && t.calls[ZT_CE_moe_permute] == n * P &&
                   perm == n * P && g_w16_moek.offsets == n * P &&
                   g_w16_moek.fill == n * P && t.calls[ZT_CE_moe_route_bwd] == n &&
                   t.calls[ZT_CE_moe_regroup] == 0,
               "%s: %ld moe_route_fwd, %ld moe_permute (%ld k_moe_count), %ld moe_route_bwd, %ld "
               "moe_regroup (4 steps x %d blocks x %ld forwards)",
               what, t.calls[ZT_CE_moe_route_fwd], t.calls[ZT_CE_moe_permute], perm,
               t.calls[ZT_CE_moe_route_bwd], t.calls[ZT_CE_moe_regroup], s.L, P);
        tap_ok(t.calls[ZT_CE_rows_gather] == n * (P + sh1) && t.calls[ZT_CE_rows_gather_o16] == 2 * n &&
                   t.calls[ZT_CE_rows_scatter] == n * (2 + sh1 * P) && t.calls[ZT_CE_rows_dot] == n * sh1 &&
                   t.calls[ZT_CE_rows_sum16] == n * P && t.calls[ZT_CE_rows_scatter16] == 0 &&
                   t.calls[ZT_CE_rows_dot16] == n &&
                   g_w16_moek.gather == n * (P + sh1),
               "%s: %ld rows_gather (the weights' a forward; the routed rows in rows_gather16), %ld "
               "rows_gather_o16 (the backward's 2: dy's rows unweighted and weighted), %ld rows_scatter, "
               "%ld rows_sum16 (the forward's output), %ld rows_dot, %ld rows_dot16 (the routing weights' "
               "gradient and the rows' scale)",
               what, t.calls[ZT_CE_rows_gather], t.calls[ZT_CE_rows_gather_o16], t.calls[ZT_CE_rows_scatter],
               t.calls[ZT_CE_rows_sum16],
               t.calls[ZT_CE_rows_dot], t.calls[ZT_CE_rows_dot16]);
        /* (the shared expert's SwiGLU in bf16 too: its slot holds sparse
         * blocks alone, no LoRA; llama.c moe_fwd) */
        tap_ok(t.calls[ZT_CE_swiglu_fwd16] == n * P * (1 + sh1) &&
                   t.calls[ZT_CE_swiglu_bwd16] == n * sh1 && t.calls[ZT_CE_swiglu_bwd_d16] == n &&
                   t.calls[ZT_CE_swiglu_fwd] == 0 &&
                   t.calls[ZT_CE_swiglu_bwd] == 0 && t.calls[ZT_CE_sigmoid_fwd] == n * P * sh1 &&
                   t.calls[ZT_CE_sigmoid_bwd] == n * sh1,
               "%s: %ld swiglu_fwd16 (one over every routed row, and the shared expert's), %ld "
               "swiglu_bwd16 (the shared expert's), %ld swiglu_bwd_d16 (the experts': gate|up's "
               "gradient in bf16), %ld swiglu_fwd and %ld swiglu_bwd, %ld sigmoid_fwd, %ld sigmoid_bwd",
               what, t.calls[ZT_CE_swiglu_fwd16], t.calls[ZT_CE_swiglu_bwd16], t.calls[ZT_CE_swiglu_bwd_d16],
               t.calls[ZT_CE_swiglu_fwd],
               t.calls[ZT_CE_swiglu_bwd], t.calls[ZT_CE_sigmoid_fwd], t.calls[ZT_CE_sigmoid_bwd]);
    }

    /* the bf16 experts' path against ZT_TEST_NO_MOE16, every token on
     * experts 1 and 2 */
    {
        static const char ex[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                                 "ztrain.model.moe_intermediate_size=24 ztrain.matmul_precision=bf16";
        cm_shape s;
        cm_shape_parse("llama:2,4,2,32,48,64,2,16", &s);
        const long n = 4L * s.L, K2 = 2, NKr = 2L * s.B * s.T;
        double ra[4][2], rb[4][2];
        long w = 0, r = 0;
        w16_mem ma, mb;
        zt_status st;
        memset(&st, 0, sizeof st);
        setenv("ZT_TEST_MOE_ROUTE_ALL", "1", 1);
        int rc = w16_run(&s, 0, ex, 1099511627776ULL, rb, &w, &r, &mb, &st);
        const zt_count_totals tb = g_w16_tot;
        if (rc == ZT_OK) rc = w16_run(&s, 0, ex, 0, ra, &w, &r, &ma, &st);
        const zt_count_totals ta = g_w16_tot;
        const double sb = g_w16_moek.sw16b;
        const long sl = g_w16_moek.sw16;
        /* (and over a cpu table without the grouped GEMM: moe.c's
         * per-expert matmul_fwd_o16 loop) */
        static zt_backend nogrp;
        nogrp = *zt_backend_cpu();
        nogrp.matmul_grouped_o16 = NULL;
        double rg[4][2];
        w16_mem mg;
        g_w16_inner = &nogrp;
        if (rc == ZT_OK) rc = w16_run(&s, 0, ex, 0, rg, &w, &r, &mg, &st);
        g_w16_inner = NULL;
        const zt_count_totals tg = g_w16_tot;
        /* (and over a cpu table without rows_dot16, rows_scatter16 and
         * rows_sum16: moe.c's from_bf16 widenings, rows_dot and rows_gather
         * in place, rows_scatter) */
        static zt_backend no16;
        no16 = *zt_backend_cpu();
        no16.rows_dot16 = NULL;
        no16.rows_scatter16 = NULL;
        no16.rows_sum16 = NULL;
        double r16[4][2];
        w16_mem m16;
        g_w16_inner = &no16;
        if (rc == ZT_OK) rc = w16_run(&s, 0, ex, 0, r16, &w, &r, &m16, &st);
        g_w16_inner = NULL;
        const zt_count_totals t16 = g_w16_tot;
        /* (and with the expert outputs kept in bf16, ZT_TEST_MOE_KEEP_YP=1:
         * expert parallelism's backward at one rank) */
        double rk[4][2];
        w16_mem mk;
        setenv("ZT_TEST_MOE_KEEP_YP", "1", 1);
        if (rc == ZT_OK) rc = w16_run(&s, 0, ex, 0, rk, &w, &r, &mk, &st);
        unsetenv("ZT_TEST_MOE_KEEP_YP");
        const zt_count_totals tk = g_w16_tot;
        unsetenv("ZT_TEST_MOE_ROUTE_ALL");
        if (tap_ok(rc == ZT_OK, "MoE experts 1 and 2: 4 steps with the bf16 experts' path and without")) {
            /* (the experts' gate|up and down GEMMs: one matmul_grouped_o16
             * each a forward, the q|k|v's matmul_fwd_o16 a forward; over
             * the table without the grouped entry K gate|up's and K
             * down's matmul_fwd_o16 more a forward, the same
             * losses and gradient norms bitwise, the same GEMM FLOPs, and
             * at least 3 K - 5 launches fewer a forward of a block (K =
             * the experts with rows: each block's 2 K per-expert GEMMs,
             * their K input roundings and the copies of misaligned bf16
             * operands become 2 grouped GEMMs, one rounding and the 2
             * k_grouped_ptrs writing their pointer arrays), and no
             * transfer more (the pointers written on the device)) */
            tap_ok(ta.calls[ZT_CE_matmul_fwd_o16] == n && ta.calls[ZT_CE_matmul_grouped_o16] == 2 * n &&
                       tg.calls[ZT_CE_matmul_fwd_o16] == n * (1 + 2 * K2) &&
                       tg.calls[ZT_CE_matmul_grouped_o16] == 0 && !memcmp(ra, rg, sizeof ra) &&
                       ta.flops == tg.flops && ta.launches <= tg.launches - n * (3 * K2 - 5) &&
                       ta.transfers == tg.transfers,
                   "MoE experts 1 and 2, bf16 experts: %ld matmul_grouped_o16 (gate|up's and down's a forward), "
                   "%ld matmul_fwd_o16 (q|k|v's); without the grouped entry %ld matmul_fwd_o16 (+ K gate|up's "
                   "and K down's a forward), losses and gradient norms bitwise, FLOPs %.0f == %.0f; launches "
                   "%ld vs %ld (at least 3 K - 5 fewer a forward of a block), transfers %ld == %ld (the "
                   "pointers written on the device)",
                   ta.calls[ZT_CE_matmul_grouped_o16], ta.calls[ZT_CE_matmul_fwd_o16],
                   tg.calls[ZT_CE_matmul_fwd_o16], ta.flops, tg.flops, ta.launches, tg.launches, ta.transfers,
                   tg.transfers);
            /* (rows_dot16 a backward of a block where from_bf16, rows_dot
             * and an in-place rows_gather were, rows_sum16 a forward where
             * from_bf16 and rows_scatter were: the same losses and
             * gradient norms bitwise, 2 launches fewer a backward and 1
             * more a forward (rows_sum16's memset, inverse permutation and
             * sum for the widening and the scatter)) */
            tap_ok(!memcmp(ra, r16, sizeof ra) && t16.calls[ZT_CE_rows_dot16] == 0 &&
                       t16.calls[ZT_CE_rows_sum16] == 0 && ta.calls[ZT_CE_rows_dot16] == n &&
                       ta.calls[ZT_CE_rows_sum16] == n && t16.calls[ZT_CE_from_bf16] == ta.calls[ZT_CE_from_bf16] + 2 * n && t16.calls[ZT_CE_rows_dot] == n &&
                       t16.calls[ZT_CE_rows_gather] == ta.calls[ZT_CE_rows_gather] + n &&
                       ta.launches == t16.launches - n,
                   "MoE experts 1 and 2, bf16 experts: %ld rows_dot16, %ld rows_sum16; without them "
                   "%ld from_bf16 (%ld), %ld rows_dot, rows_gather %ld vs %ld, losses and gradient norms bitwise, "
                   "launches %ld vs %ld",
                   ta.calls[ZT_CE_rows_dot16], ta.calls[ZT_CE_rows_sum16], t16.calls[ZT_CE_from_bf16],
                   ta.calls[ZT_CE_from_bf16], t16.calls[ZT_CE_rows_dot], ta.calls[ZT_CE_rows_gather], t16.calls[ZT_CE_rows_gather],
                   ta.launches, t16.launches);
            /* (the kept outputs: NK C bf16 a block more in the
             * activations, counted and planned; the routing weights'
             * gradient dy_i . yp_i by rows_dot, no rows_dot16; the
             * forward's sum from them by rows_scatter16; within bf16
             * roundings of the default, not bitwise) */
            double dk = 0;
            for (int q = 0; q < 4; q++)
                for (int j = 0; j < 2; j++) {
                    const double d = fabs(rk[q][j] - ra[q][j]) / fabs(ra[q][j]);
                    if (d > dk) dk = d;
                }
            const uint64_t kept = (uint64_t)s.L * NKr * s.C * 2;
            tap_ok(mk.acts_plan == ma.acts_plan + kept && mk.acts_peak == ma.acts_peak + kept && tk.calls[ZT_CE_rows_dot16] == 0 &&
                       tk.calls[ZT_CE_rows_dot] == n && tk.calls[ZT_CE_rows_sum16] == n &&
                       dk < 1e-2 && memcmp(rk, ra, sizeof ra),
                   "MoE experts 1 and 2, bf16 experts, ZT_TEST_MOE_KEEP_YP=1: activations' peak %llu bytes "
                   "(planned %llu), the default's %llu (planned %llu) + L N K C 2 = %llu; %ld rows_dot, %ld "
                   "rows_dot16, %ld rows_sum16; losses and gradient norms within %.2e relative of the "
                   "default's, not bitwise",
                   (unsigned long long)mk.acts_peak, (unsigned long long)mk.acts_plan,
                   (unsigned long long)ma.acts_peak, (unsigned long long)ma.acts_plan, (unsigned long long)kept,
                   tk.calls[ZT_CE_rows_dot], tk.calls[ZT_CE_rows_dot16], tk.calls[ZT_CE_rows_sum16], dk);
            tap_ok(ta.calls[ZT_CE_swiglu_fwd16] == n &&
                       sl == n && sb == (double)n * 3 * NKr * 24 * 2 && ta.calls[ZT_CE_swiglu_bwd_d16] == n &&
                       ta.calls[ZT_CE_swiglu_bwd16] == 0 && ta.calls[ZT_CE_swiglu_fwd] == 0 &&
                       ta.calls[ZT_CE_swiglu_bwd] == 0,
                   "MoE experts 1 and 2, bf16 experts: %ld k_swiglu_fwd16 of N K = %ld rows (%.0f bytes), "
                   "%ld swiglu_bwd_d16", sl, NKr, sb, ta.calls[ZT_CE_swiglu_bwd_d16]);
            tap_ok(tb.calls[ZT_CE_swiglu_fwd] == n * K2 && tb.calls[ZT_CE_swiglu_bwd] == n * K2 &&
                       tb.calls[ZT_CE_swiglu_fwd16] == 0 && tb.calls[ZT_CE_swiglu_bwd16] == 0 &&
                       ta.calls[ZT_CE_matmul_bwd_a16] - tb.calls[ZT_CE_matmul_bwd_a16] >= n * K2,
                   "MoE experts 1 and 2, ZT_TEST_NO_MOE16: %ld swiglu_fwd and %ld swiglu_bwd (K a "
                   "block), no 16-bit SwiGLU; matmul_fwd_a16 %ld (bf16 path %ld), matmul_bwd_a16 %ld (%ld)",
                   tb.calls[ZT_CE_swiglu_fwd], tb.calls[ZT_CE_swiglu_bwd], tb.calls[ZT_CE_matmul_fwd_a16],
                   ta.calls[ZT_CE_matmul_fwd_a16], tb.calls[ZT_CE_matmul_bwd_a16],
                   ta.calls[ZT_CE_matmul_bwd_a16]);
        }
    }

    unsetenv("ZT_TEST_NO_MOEGB");

    /* the experts' input gradients in grouped bf16 GEMMs (config.h
     * ZT_W16_MOEGB, the default): down's and gate|up's one
     * matmul_grouped_bwd_o16 each a block's backward, the routing weights'
     * dot and the rows' scale over bf16 (rows_dot16h for rows_dot16),
     * SwiGLU's backward reading the bf16 dh (swiglu_bwd_dd16 for
     * swiglu_bwd_d16), the rows' input gradients summed from bf16
     * (rows_scatter16 for the rows_scatter of dx); the weight gradients a
     * GEMM an expert as before.  Against ZT_TEST_NO_MOEGB: losses within
     * 2^-12 and gradient norms within 2^-7 relative (dh, the weighted dh
     * and the rows' input gradients rounded to bf16), not bitwise; fewer
     * launches; the same activations.  A cpu table without the grouped
     * entry: bitwise ZT_TEST_NO_MOEGB's. */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cm_shape s;
        cm_shape_parse(cases[i].shape, &s);
        char what[160];
        snprintf(what, sizeof what, "MoE grouped input gradients %s stage %d%s", cases[i].shape, cases[i].stage,
                 cases[i].name);
        double rg[4][2], rn[4][2], rt[4][2], dl, dn;
        w16_mem mg, mn;
        zt_count_totals tg, tn, tt;
        static zt_backend nogb;
        nogb = *zt_backend_cpu();
        nogb.matmul_grouped_bwd_o16 = NULL;
        if (!moe_grouped_runs(&s, cases[i].stage, cases[i].extra, "ZT_TEST_NO_MOEGB", &nogb, what, rg, rn, rt, &mg,
                              &mn, &tg, &tn, &tt, &dl, &dn))
            continue;
        const long n = 4L * s.L, P = cases[i].P, sh1 = cases[i].shared;
        tap_ok(dl <= 0x1p-12 && dn <= 0x1p-7 && memcmp(rg, rn, sizeof rg) != 0 && mg.acts_peak == mn.acts_peak &&
                   mg.acts_plan == mn.acts_plan,
               "%s: losses within %.2e and gradient norms within %.2e relative of ZT_TEST_NO_MOEGB's (bounds "
               "2^-12, 2^-7), not bitwise; the same activations (peak %llu, planned %llu)",
               what, dl, dn, (unsigned long long)mg.acts_peak, (unsigned long long)mg.acts_plan);
        tap_ok(tg.calls[ZT_CE_matmul_grouped_bwd_o16] == 2 * n && tg.calls[ZT_CE_rows_dot16h] == n &&
                   tg.calls[ZT_CE_rows_dot16] == 0 && tg.calls[ZT_CE_swiglu_bwd_dd16] == n &&
                   tg.calls[ZT_CE_swiglu_bwd_d16] == 0 && tg.calls[ZT_CE_rows_sum16] == n * (P + 1) &&
                   tg.calls[ZT_CE_rows_scatter] == n * (1 + sh1 * P) &&
                   tn.calls[ZT_CE_matmul_grouped_bwd_o16] == 0 && tn.calls[ZT_CE_rows_dot16h] == 0 &&
                   tn.calls[ZT_CE_rows_dot16] == n && tn.calls[ZT_CE_swiglu_bwd_d16] == n &&
                   tg.launches < tn.launches && tg.flops == tn.flops,
               "%s: %ld matmul_grouped_bwd_o16 (2 a block's backward), %ld rows_dot16h, %ld swiglu_bwd_dd16, "
               "%ld rows_sum16 (+ dx's), %ld rows_scatter; ZT_TEST_NO_MOEGB: %ld rows_dot16, %ld "
               "swiglu_bwd_d16; launches %ld (%ld), FLOPs the same",
               what, tg.calls[ZT_CE_matmul_grouped_bwd_o16], tg.calls[ZT_CE_rows_dot16h],
               tg.calls[ZT_CE_swiglu_bwd_dd16], tg.calls[ZT_CE_rows_sum16], tg.calls[ZT_CE_rows_scatter],
               tn.calls[ZT_CE_rows_dot16], tn.calls[ZT_CE_swiglu_bwd_d16], tg.launches, tn.launches);
        tap_ok(!memcmp(rt, rn, sizeof rt) && tt.calls[ZT_CE_matmul_grouped_bwd_o16] == 0 &&
                   tt.calls[ZT_CE_rows_dot16h] == 0,
               "%s: a table without matmul_grouped_bwd_o16: the per-expert path, bitwise ZT_TEST_NO_MOEGB's", what);
    }

    /* the experts' weight gradients in grouped GEMMs too (config.h
     * ZT_W16_MOEGW, the default): down's and gate|up's one
     * matmul_grouped_dw16 each a block's backward (each expert's product
     * rounded to bf16 in dyp, then added into its fp32 gradient), no
     * per-expert matmul_bwd_d16 (2 K a block's backward, K experts with rows
     * of E... here every expert: those calls 2 E fewer at most, and at
     * least 2 fewer a block); the FLOPs the same.  Against ZT_TEST_NO_MOEGW:
     * losses within 2^-12 and gradient norms within 2^-7 relative (each
     * expert's weight gradient rounded to bf16 once a micro-batch), not
     * bitwise; the same activations.  A cpu table without the entry:
     * bitwise ZT_TEST_NO_MOEGW's. */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cm_shape s;
        cm_shape_parse(cases[i].shape, &s);
        char what[160];
        snprintf(what, sizeof what, "MoE grouped weight gradients %s stage %d%s", cases[i].shape, cases[i].stage,
                 cases[i].name);
        double rg[4][2], rn[4][2], rt[4][2], dl, dn;
        w16_mem mg, mn;
        zt_count_totals tg, tn, tt;
        static zt_backend nogw;
        nogw = *zt_backend_cpu();
        nogw.matmul_grouped_dw16 = NULL;
        if (!moe_grouped_runs(&s, cases[i].stage, cases[i].extra, "ZT_TEST_NO_MOEGW", &nogw, what, rg, rn, rt, &mg,
                              &mn, &tg, &tn, &tt, &dl, &dn))
            continue;
        const long n = 4L * s.L;
        tap_ok(dl <= 0x1p-12 && dn <= 0x1p-7 && memcmp(rg, rn, sizeof rg) != 0 && mg.acts_peak == mn.acts_peak &&
                   mg.acts_plan == mn.acts_plan,
               "%s: losses within %.2e and gradient norms within %.2e relative of ZT_TEST_NO_MOEGW's (bounds "
               "2^-12, 2^-7), not bitwise; the same activations (peak %llu, planned %llu)",
               what, dl, dn, (unsigned long long)mg.acts_peak, (unsigned long long)mg.acts_plan);
        const long db = tn.calls[ZT_CE_matmul_bwd_d16] - tg.calls[ZT_CE_matmul_bwd_d16];
        tap_ok(tg.calls[ZT_CE_matmul_grouped_dw16] == 2 * n && tn.calls[ZT_CE_matmul_grouped_dw16] == 0 &&
                   db >= 2 * n && db <= 2 * 4 * n && tg.calls[ZT_CE_matmul_grouped_bwd_o16] == 2 * n &&
                   tg.flops == tn.flops,
               "%s: %ld matmul_grouped_dw16 (2 a block's backward), %ld matmul_bwd_d16 fewer than "
               "ZT_TEST_NO_MOEGW's (a GEMM an expert with rows), the grouped input gradients kept (%ld), FLOPs "
               "the same (%.0f, %.0f)",
               what, tg.calls[ZT_CE_matmul_grouped_dw16], db, tg.calls[ZT_CE_matmul_grouped_bwd_o16], tg.flops,
               tn.flops);
        tap_ok(!memcmp(rt, rn, sizeof rt) && tt.calls[ZT_CE_matmul_grouped_dw16] == 0,
               "%s: a table without matmul_grouped_dw16: a GEMM an expert, bitwise ZT_TEST_NO_MOEGW's", what);
    }

    /* the bare table through bench/costmodel's step */
    for (int ckp = 0; ckp < 2; ckp++) {
        cm_shape s;
        cm_shape_parse("llama:2,4,2,32,48,64,2,16,moe=4:2:24", &s);
        cm_run_opts o;
        memset(&o, 0, sizeof o);
        if (ckp) snprintf(o.act_ckpt, sizeof o.act_ckpt, "blocks");
        zt_status st;
        memset(&st, 0, sizeof st);
        cm_counts bare, over;
        setenv("ZT_TEST_MOE_ROUTE_ALL", "1", 1);
        int rc = cm_count_step(&s, &o, zt_backend_count(), &bare, &st);
        if (rc == ZT_OK) {
            rc = cm_count_step(&s, &o, zt_backend_count_over(zt_backend_cpu()), &over, &st);
            if (rc != ZT_OK) cm_counts_free(&bare);
        }
        unsetenv("ZT_TEST_MOE_ROUTE_ALL");
        K = zt_backend_count();
        if (!tap_ok(rc == ZT_OK, "MoE costmodel step%s: bare and over cpu", ckp ? " checkpointed" : "")) {
            tap_diag("%s", st.msg);
            continue;
        }
        static const char *const names[] = {"cublasLt gemm bf16", "k_moe_route_fwd", "k_moe_route_bwd",
                                            "k_rows_gather", "k_rows_scatter", "k_rows_dot16h",
                                            "k_rows_sum16", "k_moe_inverse", "k_moe_count",
                                            "k_moe_offsets", "k_moe_fill", "k_swiglu_fwd16", "k_swiglu_bwd16",
                                            "cublasGemmGroupedBatchedEx bf16",
                                            "cublasGemmGroupedBatchedEx bf16 dinp"};
        int same = 1;
        long nb = 0;
        for (size_t q = 0; q < sizeof names / sizeof names[0]; q++) {
            double f[2] = {0, 0}, b[2] = {0, 0};
            long l[2] = {0, 0};
            for (int side = 0; side < 2; side++) {
                const cm_counts *c = side ? &over : &bare;
                for (size_t j = 0; j < c->nk; j++)
                    if (!strcmp(c->k[j].name, names[q])) {
                        l[side] += c->k[j].launches;
                        f[side] += c->k[j].flops * (double)c->k[j].launches;
                        b[side] += c->k[j].bytes * (double)c->k[j].launches;
                    }
            }
            if (l[0] != l[1] || f[0] != f[1] || b[0] != b[1] || !l[0]) {
                same = 0;
                tap_diag("%s: bare x%ld %.0f FLOPs %.0f bytes, over cpu x%ld %.0f %.0f", names[q], l[0], f[0],
                         b[0], l[1], f[1], b[1]);
            }
            nb += l[0];
        }
        tap_ok(same, "MoE costmodel step%s, experts 1 and 2: the GEMMs and MoE kernels (%ld launches) the same "
               "bare and over cpu", ckp ? " checkpointed" : "", nb);
        long d2h = 0;
        for (size_t j = 0; j < bare.nk; j++)
            if (!strcmp(bare.k[j].name, "cudaMemcpyAsync D2H") && bare.k[j].bytes == 5 * 4) d2h += bare.k[j].launches;
        const long want = 2L * s.L + (ckp ? s.L - 1 : 0);
        tap_ok(d2h == want, "MoE costmodel step%s, bare: %ld reads of the routing's E + 1 counts (%ld: 2 a "
               "block%s)", ckp ? " checkpointed" : "", d2h, want, ckp ? ", 1 a recomputed block (the last kept)" : "");
        cm_counts_free(&bare);
        cm_counts_free(&over);
    }
}

static void moe16(void) {
    static const w16_kind kind = {1099511627776ULL, " with and without a MoE's bf16 activations",
                                  "fp32 activations'", "the bf16 activations of the dense models"};
    static const w16_kind same = {1099511627776ULL,
                                  " with and without a MoE's bf16 activations (not taken)",
                                  "fp32 activations'", NULL};
#define MOE "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 ztrain.model.moe_intermediate_size=24 "
    static const char all[] = MOE "ztrain.model.shared_expert_size=16 ztrain.matmul_precision=bf16";
    static const char allck[] = MOE "ztrain.model.shared_expert_size=16 ztrain.matmul_precision=bf16 "
                                    "activation_checkpointing.policy=blocks";
    static const char mix[] = MOE "ztrain.model.decoder_sparse_step=2 ztrain.matmul_precision=bf16";
    static const char mixck[] = MOE "ztrain.model.decoder_sparse_step=2 ztrain.matmul_precision=bf16 "
                                    "activation_checkpointing.policy=every-2";
    static const char mixsh[] = MOE "ztrain.model.decoder_sparse_step=2 ztrain.model.shared_expert_size=16 "
                                    "ztrain.matmul_precision=bf16";
    static const char mixshck[] = MOE "ztrain.model.decoder_sparse_step=2 ztrain.model.shared_expert_size=16 "
                                      "ztrain.matmul_precision=bf16 activation_checkpointing.policy=every-2";
    static const char lsh[] = MOE "ztrain.model.shared_expert_size=16 ztrain.matmul_precision=bf16 "
                                  "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                  "ztrain.lora.targets=q_proj,v_proj,gate_proj,up_proj,down_proj";
    static const char f32mm[] = MOE "ztrain.model.shared_expert_size=16 ztrain.matmul_precision=fp32";
    static const char f32[] = MOE "ztrain.model.shared_expert_size=16 bf16.enabled=false "
                                  "ztrain.matmul_precision=bf16";
#undef MOE
    static const w16_xname names[] = {{all, " MoE"}, {allck, " MoE checkpointed"},
                                      {mix, " MoE mixed"}, {mixck, " MoE mixed checkpointed every 2"},
                                      {mixsh, " MoE mixed, shared expert"},
                                      {mixshck, " MoE mixed, shared expert, checkpointed every 2"},
                                      {lsh, " MoE LoRA on the shared expert"},
                                      {f32mm, " MoE fp32 matmuls"}, {f32, " MoE fp32"},
                                      {NULL, NULL}};
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, all, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, all, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, allck, 0}, 1},
        {{"llama:3,4,2,32,48,64,2,16", 0, mix, 0}, 1},
        {{"llama:4,4,2,32,48,64,2,16,untied", 0, mixck, 0}, 1},
        {{"llama:3,4,2,32,48,64,2,16", 3, mixsh, 0}, 1},
        {{"llama:4,4,2,32,48,64,2,16", 0, mixshck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 0, lsh, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, f32mm, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, f32, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[200];
        if (!w16_case_run(&p, cases[i].on ? &kind : &same, c, c->arg, names, NULL, what, sizeof what))
            continue;
        const w16_mem *a = &p.ma, *b = &p.mb;
        tap_ok((cases[i].on ? a->acts_peak < b->acts_peak : a->acts_peak == b->acts_peak) &&
                   a->acts_plan - a->acts_peak == b->acts_plan - b->acts_peak,
               "%s: activations' peak %llu bytes (planned %llu), fp32 activations %llu (planned %llu)",
               what, (unsigned long long)a->acts_peak, (unsigned long long)a->acts_plan,
               (unsigned long long)b->acts_peak, (unsigned long long)b->acts_plan);
    }
}

/* ------------------------------------------------------------ LoRA's residual branch in bf16
 * Llama's o and down projections WITH adapters (bf16 activations, no
 * dropout, the bf16 weight) writing the residual branch in bf16 as branch16
 * does without adapters: the adapters' delta written in bf16 first (lora.h
 * zt_lora_fwd_first16: h rounded by one k_to_bf16, the product by
 * matmul_bwd_o16) and the base GEMM adding into it in place
 * (matmul_fwd_acc16), the residual add + RMSNorm widening it
 * (add_rmsnorm_fwd16b), against the fp32 delta, the fp32 sum
 * (matmul_fwd_acc) and the fp32 branch (add_rmsnorm_fwd16;
 * ZT_TEST_NO_LBRANCH16=1).  NOT bitwise: the delta rounded to bf16 once
 * before the add and the branch rounded once after it; the losses within
 * 2^-12 and the gradient norms within 2^-9 relative (ACT16_*_TOL, the
 * bounds branch16 and lora_gu16 hold), and not bitwise over the 4 steps.
 * Per step and forward pass (2 checkpointed), n = 4 L a projection: n
 * matmul_fwd_acc16 calls, n matmul_bwd_o16 and n k_to_bf16 (h) more for o
 * and as many for down (Ld blocks: L, or L - 1 with ZT_TEST_NO_X16, whose
 * last block's down output stays fp32 for the fp32 final norm); as many
 * matmul_fwd_acc, k_round_bf16 (w_dinp's rounding of h) and bf16-weight
 * calls (w_dinp's matmul_bwd_w16 of the adapters' bf16 B^T; stage 3,
 * without the bf16 adapters, its matmul_bwd rounds B: the same) fewer;
 * add_rmsnorm_fwd16b: L (the MLP's norms) and Ld (the norms reading down's
 * pending branch) in the forward, L in a recompute (its down output pending
 * for nobody), as many add_rmsnorm_fwd16 fewer.  Bytes: each bf16 branch
 * written by the delta's GEMM, read and written by the base GEMM's beta 1
 * and read by the norm in 2 bytes an element, not 4: 8 N C bytes fewer a
 * projection, 6 N C for a recompute's down (no norm reads it), exactly
 * (the rest of the launches the same bytes).  The activations' peak and
 * plan the same (the branch in the [N, C] scratch, h16 in dh, the delta's
 * fp32 staging in f32: no buffer added).  All-linear at stages 0 and 3,
 * untied, checkpointed, QLoRA (nf4 base: its GEMMs read the dequantized
 * bf16 block), ZT_TEST_NO_X16; a checkpointed run's losses and gradient
 * norms bitwise those of the same run without checkpointing, with the path
 * and without (the recompute's delta, kept h and branch the same values).  Bitwise and the same counts where not
 * taken: q_proj,v_proj (o and down without adapters: branch16's path both
 * runs), the adapters' dropout, the fp32 matmuls, Gemma 2's post norms,
 * ZT_TEST_NO_BRANCH16 (the fp32 branch both runs), GPT-2. */
static void lora_branch16(void) {
    static const w16_kind kind = {34359738368ULL, " with and without LoRA's bf16 residual branches",
                                  "fp32 branches'", "o / down's delta and branch rounded to bf16"};
    static const w16_kind same = {34359738368ULL,
                                  " with and without LoRA's bf16 residual branches (not taken)",
                                  "fp32 branches'", NULL};
    static const char qlck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.base=nf4 activation_checkpointing.policy=blocks";
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{qlck, " QLoRA checkpointed"}, {gemma, " gemma LoRA"}, {NULL, NULL}};
    /* (on: whether the path is taken; arg: the no_w16 bits of both runs;
     * of: a checkpointed case's uncheckpointed one, index + 1 (0: none),
     * whose losses and gradient norms its own must equal bitwise with the
     * path and without it: the recompute writes the same values) */
    static const struct { w16_case c; int on, of; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1, 0},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_lora, 0}, 1, 0},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1, 2},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 1, 0},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, qlck, 0}, 1, 4},
        {{"llama:2,4,2,32,48,64,2,16,untied", 0, w16_lora, 8192}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 3, gemma, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 4294967296ULL}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0, 0}};
    static double ra[sizeof cases / sizeof cases[0]][4][2], rb[sizeof cases / sizeof cases[0]][4][2];
    static int ran[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[192];
        if (!w16_case_run(&p, cases[i].on ? &kind : &same, c, c->arg, names, NULL, what, sizeof what))
            continue;
        memcpy(ra[i], p.a, sizeof p.a);
        memcpy(rb[i], p.b, sizeof p.b);
        ran[i] = 1;
        if (cases[i].of) {
            const int j = cases[i].of - 1;
            tap_ok(ran[j] && !memcmp(ra[j], p.a, sizeof p.a) && !memcmp(rb[j], p.b, sizeof p.b),
                   "%s: losses and gradient norms bitwise those of the run without checkpointing, "
                   "with the bf16 branches (%.9g ... %.9g) and without (%.9g ... %.9g)",
                   what, p.a[0][0], p.a[3][0], p.b[0][0], p.b[3][0]);
        }
        const int ckd = c->extra == w16_lck || c->extra == qlck;
        const long F = ckd ? 2 : 1, L = p.s.L;
        /* down's bf16 outputs a pass: L, or L - 1 with the fp32 final norm */
        const long Ld = c->arg & 8192 ? L - 1 : L;
        const long n = cases[i].on ? 4 * (L + Ld) * F : 0;
        const long nb = cases[i].on ? 4 * (L * F + Ld) : 0;
        /* 8 N C bytes fewer a projection, 6 N C a recompute's down */
        const double NC = (double)p.s.B * p.s.T * p.s.C;
        const double fewer =
            cases[i].on ? 4.0 * NC * (8.0 * (L + Ld) + (ckd ? 8.0 * L + 6.0 * Ld : 0)) : 0;
        tap_ok(p.ma.facc16 - p.mb.facc16 == n && p.mb.facc - p.ma.facc == n &&
                   p.ma.bo16 - p.mb.bo16 == n && p.ma.to16 - p.mb.to16 == n && p.rb - p.ra == n &&
                   p.ma.anb16 - p.mb.anb16 == nb && p.mb.an16 - p.ma.an16 == nb &&
                   p.wb - p.wa == (c->stage < 3 ? n : 0) && p.mb.all_b - p.ma.all_b == fewer &&
                   w16_same(&p, W16_SAME_ACTS),
               "%s: %ld matmul_fwd_acc16 (%ld without, %ld more expected), %ld matmul_fwd_acc "
               "(%ld without), %ld matmul_bwd_o16 (%ld without), %ld bf16-weight calls (%ld "
               "without), %ld k_to_bf16 (%ld without), %ld "
               "k_round_bf16 (%ld without), %ld add_rmsnorm_fwd16b (%ld without, %ld more "
               "expected), %ld add_rmsnorm_fwd16 (%ld without), %.0f bytes moved (%.0f without, "
               "%.0f fewer expected), activations' peak %llu bytes (%llu without)",
               what, p.ma.facc16, p.mb.facc16, n, p.ma.facc, p.mb.facc, p.ma.bo16, p.mb.bo16,
               p.wa, p.wb, p.ma.to16, p.mb.to16, p.ra, p.rb, p.ma.anb16, p.mb.anb16, nb, p.ma.an16,
               p.mb.an16,
               p.ma.all_b, p.mb.all_b, fewer, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's input gradient in bf16
 * Llama's q|k|v and gate|up WITH adapters (a frozen base, bf16 gradients
 * in, no dropout, the backward's swapped order) writing their input
 * gradient in bf16 as dout16n does without adapters: the adapters' share
 * written in bf16 first (lora.h zt_lora_bwd_first16: dh rounded by one
 * k_to_bf16, the product by matmul_bwd_o16) and the base dinp GEMM adding
 * into it in place (matmul_bwd_acc16), the norm backward reading it
 * (rmsnorm_bwd16d), against the fp32 share, the fp32 sum (matmul_bwd_acc)
 * and the fp32 norm-output gradient (rmsnorm_bwd16 / rmsnorm_bwd;
 * ZT_TEST_NO_LGRAD16=1); and down WITH adapters likewise as dh16 does
 * without them (its bf16 dh read by swiglu_bwd_dd16, not swiglu_bwd_d16;
 * not Gemma).  NOT bitwise: the share rounded to bf16 once
 * before the add and the sum rounded once after it; the losses within
 * 2^-12 and the gradient norms within 2^-9 relative (ACT16_*_TOL, the
 * bounds of bf16_dout16n and lora_branch16), not bitwise over the 4 steps.
 * Over the cpu backend (its attention gradient fp32: q|k|v keeps the fp32
 * path) gate|up's only; over the bf16-gradient backend (g_bf16g) both.
 * Per step and path (one backward a step, checkpointed or not), n = 4 L
 * paths: n matmul_bwd_acc16, matmul_bwd_o16 and k_to_bf16 more, and per
 * norm path rmsnorm_bwd16d, per down path _bwd_dd16 more and _bwd_d16
 * fewer; as many matmul_bwd_acc, k_round_bf16 (w_dinp's rounding of dh)
 * and other backward GEMM calls (w_dinp's matmul_bwd_w16 / matmul_bwd)
 * fewer, as many bf16-weight calls fewer where the adapters are bf16
 * (stages 0-2: w_dinp's matmul_bwd_w16 of A; stage 3 its matmul_bwd rounds
 * A, as matmul_bwd_o16 does); the norm backward calls and the GEMM launches
 * the same.  Bytes: the share written in bf16 (2 N C fewer), read and
 * written by the base GEMM's beta 1 in bf16 (4 N C fewer) and read by the
 * norm in bf16 (2 N C fewer): 8 N C bytes fewer a path, exactly, 8 N I a
 * down path (N = B T, I the intermediate size; the GLU backward's read of
 * dh the last 2 N I; dh's k_to_bf16 moves what its k_round_bf16 did).  The activations' peak
 * and plan the same (the bf16 gradient over dh as dout16n's, dh16 in the
 * LoRA scratch h, the product's fp32 staging in dbuf: no buffer added).
 * All-linear at stages 0 and 3, untied, checkpointed (bitwise the run
 * without checkpointing, with the path and without), QLoRA (nf4 base),
 * q_proj,v_proj (q|k|v's path only, on the bf16-gradient backend; down
 * without adapters takes dh16 both runs).
 * Bitwise and the same counts where not taken: no LoRA, the adapters'
 * dropout, the fp32 matmuls, Gemma 2's post norms, ZT_TEST_NO_DOUT16N and
 * ZT_TEST_NO_BWDSWAP (the fp32 gradient both runs), GPT-2. */
static void lora_grad16(void) {
    static const w16_kind kind = {137438953472ULL, " with and without LoRA's bf16 input gradients",
                                  "fp32 gradients'", "the adapters' share and the sum rounded to bf16"};
    static const w16_kind same = {137438953472ULL,
                                  " with and without LoRA's bf16 input gradients (not taken)",
                                  "fp32 gradients'", NULL};
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{gemma, " gemma LoRA"}, {NULL, NULL}};
    /* (gu, qkv, dn: gate|up's, q|k|v's and down's paths taken over the
     * bf16-gradient backend, over the cpu q|k|v's never; arg: the no_w16
     * bits of both runs; of: a checkpointed case's uncheckpointed one,
     * index + 1) */
    static const struct { w16_case c; int gu, qkv, dn, of; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1, 1, 1, 0},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_lora, 0}, 1, 1, 1, 0},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1, 1, 1, 2},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 1, 1, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 0, 1, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 0, 0, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0, 0, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 0, 0, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 3, gemma, 0}, 0, 0, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 8589934592ULL}, 0, 0, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 16777216}, 0, 0, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0, 0, 0, 0}};
    enum { NC_ = sizeof cases / sizeof cases[0] };
    static double ra[NC_][4][2], rb[NC_][4][2];
    static int ran[NC_];
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        memset(ran, 0, sizeof ran);
        for (size_t i = 0; i < NC_; i++) {
            const w16_case *c = &cases[i].c;
            const int npaths = cases[i].gu + (b16 ? cases[i].qkv : 0), paths = npaths + cases[i].dn;
            w16_pair p;
            char what[192];
            if (!w16_case_run(&p, paths ? &kind : &same, c, c->arg, names,
                              b16 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
                continue;
            memcpy(ra[i], p.a, sizeof p.a);
            memcpy(rb[i], p.b, sizeof p.b);
            ran[i] = 1;
            if (cases[i].of) {
                const int j = cases[i].of - 1;
                tap_ok(ran[j] && !memcmp(ra[j], p.a, sizeof p.a) && !memcmp(rb[j], p.b, sizeof p.b),
                       "%s: losses and gradient norms bitwise those of the run without "
                       "checkpointing, with the bf16 input gradients (%.9g ... %.9g) and without "
                       "(%.9g ... %.9g)",
                       what, p.a[0][0], p.a[3][0], p.b[0][0], p.b[3][0]);
            }
            const long n = 4L * p.s.L * paths, nn = 4L * p.s.L * npaths, nd = 4L * p.s.L * cases[i].dn;
            const double NC = (double)p.s.B * p.s.T * p.s.C, NI = (double)p.s.B * p.s.T * p.s.I;
            const double fewer = 8.0 * NC * (double)nn + 8.0 * NI * (double)nd;
            /* (the adapters' bf16 A where the block has them: stages 0-2
             * with bf16 matmuls) */
            const long w16n = c->stage < 3 ? n : 0;
            tap_ok(p.ma.bacc16 == n && p.mb.bacc16 == 0 && p.mb.bacc - p.ma.bacc == n &&
                       p.ma.bo16 - p.mb.bo16 == n && p.ma.rbd - p.mb.rbd == nn &&
                       p.ma.gdd16 - p.mb.gdd16 == nd && p.mb.gd16 - p.ma.gd16 == nd &&
                       p.ma.rmsb == p.mb.rmsb && p.ma.to16 - p.mb.to16 == n && p.rb - p.ra == n &&
                       p.mb.bwds - p.ma.bwds == n && p.wb - p.wa == w16n &&
                       p.ma.gemm == p.mb.gemm && p.mb.all_b - p.ma.all_b == fewer &&
                       w16_same(&p, W16_SAME_ACTS),
                   "%s: %ld matmul_bwd_acc16 (%ld expected, %ld without), %ld matmul_bwd_acc (%ld "
                   "without), %ld matmul_bwd_o16 (%ld without), %ld rmsnorm_bwd16d (%ld without), "
                   "%ld _bwd_dd16 (%ld without, %ld more expected), %ld _bwd_d16 (%ld without), "
                   "%ld norm backward calls (%ld without), %ld k_to_bf16 (%ld without), %ld "
                   "k_round_bf16 (%ld without), %ld other backward GEMM calls (%ld without), %ld "
                   "bf16-weight calls (%ld without, %ld fewer expected), %ld GEMMs (%ld without), "
                   "%.0f bytes moved (%.0f without, %.0f fewer expected), activations' peak %llu "
                   "bytes (%llu without)",
                   what, p.ma.bacc16, n, p.mb.bacc16, p.ma.bacc, p.mb.bacc, p.ma.bo16, p.mb.bo16,
                   p.ma.rbd, p.mb.rbd, p.ma.gdd16, p.mb.gdd16, nd, p.ma.gd16, p.mb.gd16, p.ma.rmsb,
                   p.mb.rmsb, p.ma.to16, p.mb.to16, p.ra, p.rb,
                   p.ma.bwds, p.mb.bwds, p.wa, p.wb, w16n, p.ma.gemm, p.mb.gemm, p.ma.all_b,
                   p.mb.all_b, fewer, (unsigned long long)p.ma.acts_peak,
                   (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ LoRA's o with a bf16 dO
 * Llama's o projection WITH adapters (a frozen base, bf16 gradients in, no
 * dropout, the backward's swapped order) writing the attention's dO in
 * bf16 into datt's memory as it does without adapters (do16): the
 * adapters' share written in bf16 first (lora.h zt_lora_bwd_first16: dh
 * rounded by one k_to_bf16, the product by matmul_bwd_o16) and the base
 * dinp GEMM adding into it in place (matmul_bwd_acc16), the attention
 * backward reading it as its dO (gqa_ext_bwd16do), against the fp32 share,
 * the fp32 sum (matmul_bwd_acc) and the attention backward rounding the
 * fp32 dO itself (gqa_ext_bwd16d / _bwd16o; ZT_TEST_NO_LO16=1).  NOT
 * bitwise: the share rounded to bf16 once before the add; the losses
 * within 2^-12 and the gradient norms within 2^-9 relative (ACT16_*_TOL,
 * lora_grad16's bounds).  Over the bf16-dO backend (g_do16b: att_do16
 * answering 1, lora_lorapath's), per step and block (n = 4 L): n att_do16
 * questions more (none without: zt_do16_of says no for o with adapters),
 * n matmul_bwd_acc16, matmul_bwd_o16, gqa_ext_bwd16do and k_to_bf16 more,
 * as many matmul_bwd_acc, gqa_ext_bwd16d + _bwd16o, k_round_bf16 (w_dinp's
 * rounding of dh) and other backward GEMM calls (w_dinp's) fewer, as many
 * bf16-weight calls fewer at stages 0-2 (w_dinp's matmul_bwd_w16 of A), the
 * GEMM launches the same; fewer bytes, not an exact figure here (count.c
 * counts gqa_ext_bwd16do as cuDNN's graph whatever the inner answers, and
 * gqa_ext_bwd16d, which the cpu inner answers 0, as the flash kernels':
 * the exact figure, 12 N AD bytes fewer a block, is the cuDNN step's in
 * cudnn_model).  The activations' peak and
 * plan the same (the bf16 dO in datt, dh16 in the LoRA scratch h, the
 * share's fp32 staging in sta: no buffer added).  Over the cpu backend
 * (att_do16 answering 0): n questions more, nothing else: bitwise.
 * All-linear at stages 0 and 3 (untied, checkpointed), q_proj,v_proj,o_proj,
 * QLoRA (nf4 base), Gemma 2's post norms (dO through the post-attention
 * norm's backward as without adapters).  Bitwise and the same counts where
 * not taken: no LoRA, q_proj,v_proj (o without adapters: lora_lorapath's
 * path both runs), the adapters' dropout, the fp32 matmuls,
 * ZT_TEST_NO_BWDSWAP (the fp32 share both runs).  GPT-2's c_proj with
 * adapters too (gpt.h zt_gpt_lora_do16, model_skel.h
 * zt_skel_lora_lin_bwd16, the same entries): its fp32 path is the
 * unswapped order (the base GEMM writing dO, the adapters adding theirs
 * through matmul_dinp_acc, whose fp32 A it rounds with dh), so against it
 * no matmul_bwd_acc fewer, the bf16-weight calls the same, and n
 * k_round_bf16 fewer (dh's) plus n at stages 0-2 (A's: the new product
 * reads A's bf16 copy; stage 3 has none and rounds A both runs). */
static void lora_o16(void) {
    static const w16_kind kind = {274877906944ULL, " with and without LoRA's o in bf16 dO",
                                  "fp32 dO's", "the adapters' share rounded to bf16 before the add"};
    static const w16_kind same = {274877906944ULL,
                                  " with and without LoRA's o in bf16 dO (not taken)", "fp32 dO's",
                                  NULL};
    static const char qvo[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=q_proj,v_proj,o_proj";
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const w16_xname names[] = {{qvo, " LoRA q_proj,v_proj,o_proj"},
                                      {gemma, " gemma LoRA"},
                                      {NULL, NULL}};
    /* (on: the path taken where att_do16 answers 1; arg: the no_w16 bits
     * of both runs) */
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1},
        {{"llama:3,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, qvo, 0}, 1},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, gemma, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 16777216}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 3, w16_lck, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 0, w16_ldrop, 0}, 0}};
    g_do16b = *zt_backend_cpu();
    g_do16b.att_do16 = do16b_q;
    g_do16b.gqa_ext_bwd16o = do16b_bwd16o;
    g_do16b.gqa_ext_bwd16d = do16b_bwd16d;
    g_do16b.gqa_ext_bwd16do = do16b_bwd16do;
    double dl = 0, dg = 0;   /* (the largest relative differences, reported) */
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_do16b : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i].c;
            const int on = b16 && cases[i].on;
            w16_pair p;
            char what[192];
            if (!w16_case_run(&p, on ? &kind : &same, c, c->arg, names,
                              b16 ? " (bf16-dO backend)" : " (cpu)", what, sizeof what))
                continue;
            for (int k = 0; on && k < 4; k++) {
                const double el = fabs(p.a[k][0] - p.b[k][0]) / fabs(p.b[k][0]);
                const double eg = fabs(p.a[k][1] - p.b[k][1]) / fabs(p.b[k][1]);
                if (el > dl) dl = el;
                if (eg > dg) dg = eg;
            }
            /* (q: the questions asked where o has adapters and the gate
             * says yes; the cpu answers 0) */
            const long q = cases[i].on ? 4L * p.s.L : 0, n = on ? q : 0;
            /* (GPT-2: against the unswapped fp32 path, above) */
            const int gpt = !strncmp(c->shape, "gpt2", 4);
            const long w16n = c->stage < 3 && !gpt ? n : 0, accn = gpt ? 0 : n,
                       rn = gpt && c->stage < 3 ? 2 * n : n;
            tap_ok(p.ma.do16q - p.mb.do16q == q && p.ma.do16 - p.mb.do16 == 2 * n &&
                       p.ma.bacc16 - p.mb.bacc16 == n && p.mb.bacc - p.ma.bacc == accn &&
                       p.ma.bo16 - p.mb.bo16 == n &&
                       (p.mb.ab16 + p.mb.ao16) - (p.ma.ab16 + p.ma.ao16) == n &&
                       p.ma.to16 - p.mb.to16 == n && p.rb - p.ra == rn &&
                       p.mb.bwds - p.ma.bwds == n && p.wb - p.wa == w16n &&
                       p.ma.gemm == p.mb.gemm &&
                       (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                       w16_same(&p, W16_SAME_ACTS),
                   "%s: %ld att_do16 questions (%ld without, %ld more expected), %ld "
                   "matmul_bwd_o16 + gqa_ext_bwd16do (%ld without), %ld matmul_bwd_acc16 (%ld "
                   "without), %ld matmul_bwd_acc (%ld without), %ld matmul_bwd_o16 (%ld without), "
                   "%ld gqa_ext_bwd16d + _bwd16o (%ld without), %ld k_to_bf16 (%ld without), %ld "
                   "k_round_bf16 (%ld without), %ld other backward GEMM calls (%ld without), %ld "
                   "bf16-weight calls (%ld without, %ld fewer expected), %ld GEMMs (%ld without), "
                   "%.0f bytes moved (%.0f without), activations' peak %llu bytes (%llu without)",
                   what, p.ma.do16q, p.mb.do16q, q, p.ma.do16, p.mb.do16, p.ma.bacc16, p.mb.bacc16,
                   p.ma.bacc, p.mb.bacc, p.ma.bo16, p.mb.bo16, p.ma.ab16 + p.ma.ao16,
                   p.mb.ab16 + p.mb.ao16, p.ma.to16, p.mb.to16, p.ra, p.rb, p.ma.bwds, p.mb.bwds,
                   p.wa, p.wb, w16n, p.ma.gemm, p.mb.gemm, p.ma.all_b, p.mb.all_b,
                   (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
    tap_diag("lora_o16: the largest relative differences with the bf16 dO: losses %.3g, "
             "gradient norms %.3g", dl, dg);
}

/* ------------------------------------------------------------ the norms' bf16 output gradient
 * Llama's q|k|v and gate|up GEMMs, where their output's gradient is bf16
 * and they have no adapters, writing their input gradient in bf16
 * (matmul_bwd_o16, not matmul_bwd_d16) and mlp_norm's / attn_norm's
 * backward reading it (rmsnorm_bwd16d, not rmsnorm_bwd16 / rmsnorm_bwd),
 * against the fp32 gradient (ZT_TEST_NO_DOUT16N=1).  NOT bitwise: that
 * gradient rounded to bf16 once (a relative change of at most 2^-9 an
 * element, PyTorch autocast's bf16 dX); the residual gradient it adds into
 * stays fp32, so the losses stay within 2^-12 and the gradient norms
 * within 2^-9 relative (ACT16_*_TOL: the bounds of the bf16 activations,
 * whose roundings of the GEMMs' inputs are of the same size and more of
 * them), and not bitwise over the 4 steps (step 1's loss the same: the
 * forward is unchanged).  Over the cpu backend (its attention gradient
 * fp32: q|k|v's GEMM keeps the fp32 path) gate|up's only; over the
 * bf16-gradient backend (g_bf16g: q|k|v's gradient in bf16, rb16) both.
 * Per step and block: n = 4 L (a path) matmul_bwd_o16 and rmsnorm_bwd16d
 * calls more (none without), as many matmul_bwd_d16 fewer, the norm
 * backward calls the same, the weight roundings the same, fewer bytes
 * moved, the activations' peak and plan the same (the bf16 gradient over
 * dh, the GEMM's fp32 scratch dbuf: no buffer added or dropped).
 * Checkpointed at stage 3, untied; LoRA q_proj,v_proj (gate|up without
 * adapters: its path; q|k|v's adapters add into its fp32 gradient: not);
 * Qwen3's q/k norms (q|k|v's gradient bf16 from qknorm_rope_bwd16, qkb16).
 * Bitwise and the same counts where not taken: LoRA all-linear, Gemma 2
 * (post norms), the fp32 activations (ZT_TEST_NO_ACT16), GPT-2. */
static void bf16_dout16n(void) {
    static const w16_kind kind = {8589934592ULL, " with and without the norms' bf16 output gradient",
                                  "fp32 gradient's", "q|k|v's and gate|up's dinp rounded to bf16"};
    static const w16_kind same = {8589934592ULL,
                                  " with and without the norms' bf16 output gradient (not taken)",
                                  "fp32 gradient's", NULL};
    static const char qkn[] = "ztrain.model.qk_norm=true";
    static const w16_xname names[] = {{qkn, " q/k norms"}, {NULL, NULL}};
    /* (gu, qkv: gate|up's and q|k|v's paths taken over the bf16-gradient
     * backend; over the cpu q|k|v's never) */
    static const struct { w16_case c; int gu, qkv; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, qkn, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 2}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 0, 0}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i].c;
            const int paths = cases[i].gu + (b16 ? cases[i].qkv : 0);
            w16_pair p;
            char what[192];
            /* (ZT_TEST_NO_LGRAD16: the groups with adapters keep the fp32
             * input gradient both runs; with them, lora_grad16) */
            if (!w16_case_run(&p, paths ? &kind : &same, c, c->arg | 137438953472ULL, names,
                              b16 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
                continue;
            const long n = 4L * p.s.L * paths;
            tap_ok(p.ma.rbd == n && p.mb.rbd == 0 && p.ma.bo16 - p.mb.bo16 == n &&
                       p.ma.rmsb == p.mb.rmsb && p.mb.bwds - p.ma.bwds == n &&
                       (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                       w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
                   "%s: %ld rmsnorm_bwd16d (%ld expected, %ld without), %ld matmul_bwd_o16 (%ld "
                   "without), %ld other backward GEMM calls (%ld without), %ld norm backward calls "
                   "(%ld without), %.0f bytes moved (%.0f without), activations' peak %llu bytes "
                   "(%llu without)",
                   what, p.ma.rbd, n, p.mb.rbd, p.ma.bo16, p.mb.bo16, p.ma.bwds, p.mb.bwds, p.ma.rmsb,
                   p.mb.rmsb,
                   p.ma.all_b, p.mb.all_b, (unsigned long long)p.ma.acts_peak,
                   (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ GPT-2's norms' bf16 output gradient
 * GPT-2's fc and q|k|v GEMMs (full fine-tuning; fc's output gradient in
 * bf16 through the GELU, ZT_W16_G16; q|k|v's where the attention backward
 * writes it in bf16, cuDNN's path) writing their input gradient in bf16
 * (matmul_bwd_o16, not matmul_bwd_d16) and ln_2's / ln_1's backward reading
 * it (layernorm_bwd16d, not layernorm_bwd16 / layernorm_bwd), against the
 * fp32 gradient (ZT_TEST_NO_GPTN16=1; both runs ZT_TEST_NO_LNSUM=1, the
 * projection's own bias column sum).  NOT bitwise: that gradient rounded to
 * bf16 once, as Llama's (bf16_dout16n: the same bounds, ACT16_*_TOL).  Over
 * the cpu backend fc's path only (its attention gradient is fp32), over the
 * bf16-gradient backend (g_bf16g) both: per step and block n = 4 L (a path)
 * layernorm_bwd16d and matmul_bwd_o16 calls more, as many matmul_bwd_d16
 * fewer, the norm backward calls the same, fewer bytes moved, the weight
 * roundings and the activations' peak and plan the same (the bf16 gradient
 * over d4b / d4a, the GEMM's fp32 scratch dbuf).  Checkpointed at stage 3.
 * Bitwise and the same counts where not taken: LoRA all-linear, the fp32
 * activations (ZT_TEST_NO_ACT16), Llama.
 * Then the attention projection's bias gradient summed by ln_2's backward
 * (ZT_W16_LNSUM, layernorm_bwd16d's dsum) against its own column sum
 * (ZT_TEST_NO_LNSUM=1): BITWISE every loss and gradient norm and, at stages
 * 0 and 1, the last step's gradient block; per step and block one
 * k_colsum_part and one k_colsum_final fewer (ln_2's one final launch sums
 * the projection's partials too), fewer bytes; with the bf16 norm gradient
 * (the default) and without it (then ln_2's backward is a layernorm_bwd16d
 * call on the fp32 gradient: n more), over both backends; not taken (the
 * same counts): LoRA, the fp32 activations, Llama. */
static void gpt_norm16(void) {
    static const w16_kind kind = {2199023255552ULL, " with and without GPT-2's norms' bf16 output gradient",
                                  "fp32 gradient's", "fc's and q|k|v's dinp rounded to bf16"};
    static const w16_kind same = {2199023255552ULL,
                                  " with and without GPT-2's norms' bf16 output gradient (not taken)",
                                  "fp32 gradient's", NULL};
    static const w16_kind sum = {4398046511104ULL, " with and without the c_proj bias summed by ln_2",
                                 "projection's column sum's", NULL};
    static const w16_kind sum0 = {4398046511104ULL,
                                  " with and without the c_proj bias summed by ln_2 (not taken)",
                                  "projection's column sum's", NULL};
    /* (fc, qkv: fc's and q|k|v's paths taken over the bf16-gradient
     * backend; over the cpu q|k|v's never) */
    static const struct { w16_case c; int fc, qkv; } cases[] = {
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 1, 1},
        {{"gpt2:2,2,32,64,2,16", 1, NULL, 0}, 1, 1},
        {{"gpt2:2,2,32,64,2,16", 3, w16_ck, 0}, 1, 1},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 2}, 0, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 0, 0}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        const char *tail = b16 ? " (bf16-gradient backend)" : " (cpu)";
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i].c;
            const int paths = cases[i].fc + (b16 ? cases[i].qkv : 0);
            w16_pair p;
            char what[192];
            if (w16_case_run(&p, paths ? &kind : &same, c, c->arg | 4398046511104ULL | 1125899906842624ULL,
                             NULL, tail, what, sizeof what)) {
                const long n = 4L * p.s.L * paths;
                tap_ok(p.ma.lbd == n && p.mb.lbd == 0 && p.ma.bo16 - p.mb.bo16 == n &&
                           p.ma.lnb == p.mb.lnb && p.mb.bwds - p.ma.bwds == n &&
                           (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                           w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
                       "%s: %ld layernorm_bwd16d (%ld expected, %ld without), %ld matmul_bwd_o16 (%ld "
                       "without), %ld other backward GEMM calls (%ld without), %ld norm backward calls "
                       "(%ld without), %.0f bytes moved (%.0f without), activations' peak %llu bytes "
                       "(%llu without)",
                       what, p.ma.lbd, n, p.mb.lbd, p.ma.bo16, p.mb.bo16, p.ma.bwds, p.mb.bwds,
                       p.ma.lnb, p.mb.lnb, p.ma.all_b, p.mb.all_b,
                       (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
            }
            /* the bias sums: with the bf16 norm gradient (no bit) and without */
            const int on = paths > 0 || (cases[i].fc && !b16);
            for (int n16 = 0; n16 < 2; n16++) {
                const w16_bits nb = c->arg | 1125899906842624ULL | (n16 ? 2199023255552ULL : 0);
                if (!w16_case_run(&p, on ? &sum : &sum0, c, nb, NULL, tail, what, sizeof what)) continue;
                const long n = on ? 4L * p.s.L : 0;
                /* (without the bf16 norm gradient ln_2's backward is a
                 * layernorm_bwd16d call only for the sums) */
                const long lb = n16 ? n : 0;
                const int grads = p.ma.ghave == p.mb.ghave && (!p.ma.ghave || p.ma.ghash == p.mb.ghash) &&
                                  (c->stage > 1 || c->extra == w16_lora || p.ma.ghave);
                tap_ok(p.mb.cpart - p.ma.cpart == n && p.mb.final_k - p.ma.final_k == n &&
                           p.ma.lbd - p.mb.lbd == lb && p.ma.lnb == p.mb.lnb && grads &&
                           (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                           w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
                       "%s: %ld k_colsum_part (%ld without, %ld fewer expected), %ld k_colsum_final (%ld "
                       "without), %ld layernorm_bwd16d (%ld without), the last gradient block %s, %.0f "
                       "bytes moved (%.0f without)",
                       what, p.ma.cpart, p.mb.cpart, n, p.ma.final_k, p.mb.final_k, p.ma.lbd, p.mb.lbd,
                       p.ma.ghave ? "bitwise" : "(stage 3 or LoRA: not kept)", p.ma.all_b, p.mb.all_b);
            }
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ GPT-2's MLP projection bias summed by the norm above
 * GPT-2's MLP projection's bias gradient (full fine-tuning, the bf16
 * gradients) summed by the norm backward that leaves its output gradient,
 * block l + 1's ln_1 or the final norm (ZT_W16_MLPSUM, layernorm_bwd16d's
 * dsum), into row l of the activations' mlpsum [L, C] (zeroed by the final
 * norm's backward), and added to the bias gradient by block l's backward,
 * against the projection's own column sum (ZT_TEST_NO_MLPSUM=1; both runs
 * with the bias of c_proj summed by ln_2 and the other GPT-2 paths as they
 * are).  BITWISE every loss and gradient norm and, at stages 0 and 1, the
 * last step's gradient block: the sum is the same fixed-order column sum
 * rounded once, added once to the bias gradient.  Per backward (n, two a
 * step with accumulation): L k_colsum_part and L k_colsum_final fewer (the
 * norm's one final launch sums its dsum partials too), L k_add and one
 * memset more, 1 + (L - 1) layernorm_bwd16d calls more over the cpu (the
 * final norm's and ln_1's, a layernorm_bwd16 before), 1 over the
 * bf16-gradient backend (ln_1's is one already, its q|k|v path taken), the
 * norm backward calls the same, fewer bytes; the activations' peak and plan
 * [L, C] floats more (the carve's rounding), the planner exact.  Stages 0,
 * 1, 2 (the gradient buckets the sums wait for), 3 checkpointed, with
 * gradient accumulation at 0 and 2.  Not taken (the same counts, bitwise):
 * LoRA all-linear, the fp32 activations, Llama. */
static void gpt_mlpsum(void) {
    static const w16_kind kind = {1125899906842624ULL,
                                  " with and without the MLP projection's bias summed by the norm above",
                                  "projection's column sum's", NULL};
    static const w16_kind same = {1125899906842624ULL,
                                  " with and without the MLP projection's bias summed by the norm above "
                                  "(not taken)",
                                  "projection's column sum's", NULL};
    static const char acc[] = "gradient_accumulation_steps=2 train_batch_size=4";
    static const w16_xname names[] = {{acc, " accumulating"}, {NULL, NULL}};
    /* (arg: the hooks of both runs; taken: the path's) */
    static const struct { w16_case c; int taken; } cases[] = {
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 1, NULL, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 2, NULL, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 3, w16_ck, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 0, acc, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 2, acc, 0}, 1},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 2}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 0}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        const char *tail = b16 ? " (bf16-gradient backend)" : " (cpu)";
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i].c;
            const int on = cases[i].taken;
            w16_pair p;
            char what[192];
            if (!w16_case_run(&p, on ? &kind : &same, c, c->arg, names, tail, what, sizeof what)) continue;
            const long L = p.s.L, nb = 4L * (c->extra == acc ? 2 : 1) * on;
            const long lb = nb * (b16 ? 1 : L);
            const uint64_t da = p.ma.acts_peak - p.mb.acts_peak, want = on ? 4 * (((uint64_t)L * p.s.C + 15) & ~(uint64_t)15) : 0;
            const int grads = p.ma.ghave == p.mb.ghave && (!p.ma.ghave || p.ma.ghash == p.mb.ghash) &&
                              (c->stage > 1 || c->extra == w16_lora || p.ma.ghave);
            tap_ok(p.mb.cpart - p.ma.cpart == nb * L && p.mb.final_k - p.ma.final_k == nb * L &&
                       p.ma.lbd - p.mb.lbd == lb && p.ma.lnb == p.mb.lnb && p.ma.add - p.mb.add == nb * L &&
                       p.ma.memset_n - p.mb.memset_n == nb && grads &&
                       (nb ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                       p.ma.acts_peak >= p.mb.acts_peak && da == want &&
                       p.ma.acts_plan - p.mb.acts_plan == da &&
                       w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16),
                   "%s: %ld k_colsum_part (%ld without, %ld fewer expected), %ld k_colsum_final (%ld "
                   "without), %ld layernorm_bwd16d (%ld without, %ld more expected), %ld k_add (%ld "
                   "without), %ld memsets (%ld without), the last gradient block %s, %.0f bytes moved "
                   "(%.0f without), activations' peak %llu bytes (%llu without, %llu more expected), "
                   "planned %llu (%llu without)",
                   what, p.ma.cpart, p.mb.cpart, nb * L, p.ma.final_k, p.mb.final_k, p.ma.lbd, p.mb.lbd,
                   lb, p.ma.add, p.mb.add, p.ma.memset_n, p.mb.memset_n,
                   p.ma.ghave ? "bitwise" : "(stage 2-3 or LoRA: not kept)", p.ma.all_b, p.mb.all_b,
                   (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak,
                   (unsigned long long)want, (unsigned long long)p.ma.acts_plan,
                   (unsigned long long)p.mb.acts_plan);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ GPT-2's fc and GELU in one bf16 GEMM
 * GPT-2's fc GEMM and GELU in one entry where fc has no adapters
 * (matmul_gelu_fwd_o16; cuda: cuBLASLt's GELU_AUX_BIAS with a bf16 D and
 * aux), both bf16 outputs rounded from the fp32 pre, against
 * matmul_fwd_o16 then gelu_fwd16 (ZT_TEST_NO_GELUE=1), whose GELU reads
 * the rounded pre.  NOT bitwise (the GELU's input one rounding less; the
 * backward reads the same bf16 pre either way), so the losses within
 * 2^-12 and the gradient norms within 2^-9 relative (ACT16_*_TOL).  Per
 * block and forward (recomputed too) one matmul_gelu_fwd_o16 call for one
 * matmul_fwd_o16 and one gelu_fwd16, fewer bytes moved, the activations'
 * peak and plan the same (no buffer added: the GEMM writes fch16 and
 * fchg16, d4b the cpu backends' staging).  Stages 0 and 3 checkpointed,
 * LoRA on c_attn (fc without adapters: taken).  The same counts and
 * bitwise where not taken: LoRA on c_fc, the fp32 activations, Llama. */
static void gpt_gelue(void) {
    static const w16_kind kind = {8796093022208ULL, " with and without fc and the GELU in one bf16 GEMM",
                                  "two calls'", "the GELU of the fp32 pre"};
    static const w16_kind same = {8796093022208ULL,
                                  " with and without fc and the GELU in one bf16 GEMM (not taken)",
                                  "two calls'", NULL};
    static const char cattn[] = "ztrain.lora.r=4 ztrain.lora.alpha=8";
    static const char cfc[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=c_fc";
    static const w16_xname names[] = {{cattn, " LoRA c_attn"}, {cfc, " LoRA c_fc"}, {NULL, NULL}};
    /* (arg: 1 where taken) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1},  {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 1, cattn, 1}, {"gpt2:2,2,32,64,2,16", 0, cfc, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, c->arg ? &kind : &same, c, 0, names, NULL, what, sizeof what)) continue;
        const long n = c->arg ? 4L * p.s.L * (1 + (c->extra == w16_ck)) : 0;
        tap_ok(p.ma.gfo16 == n && p.mb.gfo16 == 0 && p.mb.fo16 - p.ma.fo16 == n &&
                   p.mb.gelu16 - p.ma.gelu16 == n &&
                   (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
               "%s: %ld matmul_gelu_fwd_o16 (%ld expected, %ld without), %ld matmul_fwd_o16 (%ld "
               "without), %ld GELU calls (%ld without), %.0f bytes moved (%.0f without), activations' "
               "peak %llu bytes (%llu without)",
               what, p.ma.gfo16, n, p.mb.gfo16, p.ma.fo16, p.mb.fo16, p.ma.gelu16, p.mb.gelu16,
               p.ma.all_b, p.mb.all_b, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ GPT-2's residual branches in bf16
 * GPT-2's attention and MLP projections without adapters writing their
 * outputs in bf16 (matmul_fwd_o16, the bias in the epilogue) and the
 * residual add fused with the next norm reading them widened
 * (add_layernorm_fwd16b: the attention's into ln_2, the MLP's into the next
 * block's ln_1 or the final norm, the add folded), against the fp32
 * branches (ZT_TEST_NO_GBRANCH16=1), as Llama's (branch16).  NOT bitwise:
 * the branch rounded once, so the losses within 2^-12 and the gradient
 * norms within 2^-9 relative (ACT16_*_TOL).  Per block forward (n, 4 L a
 * step, twice checkpointed) 2 matmul_fwd_o16 calls more; each
 * add_layernorm_fwd16b call one add_layernorm_fwd16 fewer: 2 n of them
 * (checkpointed: 2 n - 4 L, a recomputed top block's MLP branch is left to
 * its backward, which reads none); fewer bytes; the activations' peak and
 * plan the same (the bf16 branch in the fp32 scratch's bytes).  LoRA on
 * c_attn (the projections without adapters: taken).  Not taken (the same
 * counts, bitwise): LoRA all-linear, the fp32 activations, Llama. */
static void gpt_branch16(void) {
    static const w16_kind kind = {17592186044416ULL, " with and without GPT-2's bf16 residual branches",
                                  "fp32 branches'", "the branch rounded"};
    static const w16_kind same = {17592186044416ULL,
                                  " with and without GPT-2's bf16 residual branches (not taken)",
                                  "fp32 branches'", NULL};
    static const char cattn[] = "ztrain.lora.r=4 ztrain.lora.alpha=8";
    static const w16_xname names[] = {{cattn, " LoRA c_attn"}, {NULL, NULL}};
    /* (arg: 1 where taken) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 1}, {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:2,2,32,64,2,16", 1, cattn, 1}, {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},
        {"gpt2:2,2,32,64,2,16", 0, NULL, 2}, {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        const int on = c->arg == 1, ck = c->extra == w16_ck;
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, on ? &kind : &same, c, c->arg == 2 ? 2 : 0, names, NULL, what, sizeof what))
            continue;
        const long n = on ? 4L * p.s.L * (1 + ck) : 0, nb = on ? 2 * n - (ck ? 4L * p.s.L : 0) : 0;
        tap_ok(p.ma.fo16 - p.mb.fo16 == 2 * n && p.ma.alb16 == nb && p.mb.alb16 == 0 &&
                   p.mb.aln16 - p.ma.aln16 == nb &&
                   (n ? p.ma.all_b < p.mb.all_b : p.ma.all_b == p.mb.all_b) &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
               "%s: %ld add_layernorm_fwd16b (%ld expected, %ld without), %ld add_layernorm_fwd16 (%ld "
               "without), %ld matmul_fwd_o16 (%ld without, %ld more expected), %.0f bytes moved (%.0f "
               "without), activations' peak %llu bytes (%llu without)",
               what, p.ma.alb16, nb, p.mb.alb16, p.ma.aln16, p.mb.aln16, p.ma.fo16, p.mb.fo16, 2 * n,
               p.ma.all_b, p.mb.all_b, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ the down projection's bf16 dh
 * Llama's and Gemma's down projection, where its output's gradient is bf16,
 * it has no adapters and gate|up's gradient is written in bf16, writing its
 * input gradient dh in bf16 (matmul_bwd_o16, not matmul_bwd_d16) and SwiGLU
 * / GeGLU's backward reading it (swiglu_bwd_dd16 / geglu_bwd_dd16, not
 * swiglu_bwd_d16 / geglu_bwd_d16), against the fp32 dh (ZT_TEST_NO_DH16=1).
 * NOT bitwise: dh rounded to bf16 once (a relative change of at most 2^-9
 * an element, PyTorch autocast's bf16 dX of a Linear), so the losses within
 * 2^-12 and the gradient norms within 2^-9 relative (ACT16_*_TOL, as
 * bf16_dout16n), not bitwise over the 4 steps.  Per step and block (n = 4
 * L calls): n matmul_bwd_o16 and n _bwd_dd16 calls more, as many
 * matmul_bwd_d16 and _bwd_d16 calls fewer, and exactly 4 N H bytes a call
 * fewer moved (N = B T, H the intermediate size): the GEMM's D in bf16 (2 N
 * H of the cublasLt launches' bytes) and the GLU backward's dout read in
 * bf16 (2 N H of its launch's); the weight roundings and the activations'
 * peak and plan the same (the bf16 dh over dh's own bytes, the GEMM's fp32
 * scratch dgu: no buffer added or dropped).  Checkpointed at stage 3,
 * untied; LoRA q_proj,v_proj (down without adapters: taken); Gemma 2
 * (geglu_bwd_dd16).  Bitwise and the same counts where not taken: LoRA
 * all-linear (down's adapters add into its fp32 dh), a Mixture of Experts
 * (its blocks' MLP is moe.c's; counted), the fp32 activations (ZT_TEST_NO_ACT16: no
 * bf16 gate|up), the bf16 gradients off (ZT_TEST_NO_D16), GPT-2.  Over the
 * cpu backend (the path needs no bf16 attention gradient).  (LoRA's down
 * with the path, its adapters' share first in bf16: lora_grad16; here
 * ZT_TEST_NO_LGRAD16 both runs.) */
static void bf16_dh16(void) {
    static const w16_kind kind = {17179869184ULL, " with and without the down projection's bf16 dh",
                                  "fp32 dh's", "down's dinp rounded to bf16"};
    static const w16_kind same = {17179869184ULL,
                                  " with and without the down projection's bf16 dh (not taken)",
                                  "fp32 dh's", NULL};
    static const char moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                              "ztrain.model.moe_intermediate_size=24 ztrain.model.shared_expert_size=16";
    static const w16_xname names[] = {{moe, " MoE"}, {NULL, NULL}};
    static const struct { w16_case c; int on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, moe, 0}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 2}, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, NULL, 256}, 0},
        {{"gpt2:2,2,32,64,2,16", 0, NULL, 0}, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[192];
        /* (the MoE's experts: their own bf16 dh with the grouped input
         * gradients, config.h ZT_W16_MOEGB, moe_counted's; off here) */
        if (c->extra == moe) setenv("ZT_TEST_NO_MOEGB", "1", 1);
        const int ran = w16_case_run(&p, cases[i].on ? &kind : &same, c, c->arg | 137438953472ULL, names,
                                     " (cpu)", what, sizeof what);
        unsetenv("ZT_TEST_NO_MOEGB");
        if (!ran) continue;
        const long n = cases[i].on ? 4L * p.s.L : 0;
        /* (the bytes a call fewer: the GEMM's D and the GLU's dout, 2 N H each) */
        const double nh = (double)p.s.B * p.s.T * p.s.I, gemm = n * 2 * nh, all = n * 4 * nh;
        tap_ok(p.ma.gdd16 == n && p.mb.gdd16 == 0 && p.mb.gd16 - p.ma.gd16 == n &&
                   p.ma.bo16 - p.mb.bo16 == n && p.mb.bwds - p.ma.bwds == n &&
                   p.mb.gemm_b - p.ma.gemm_b == gemm && p.mb.all_b - p.ma.all_b == all &&
                   p.ma.gemm == p.mb.gemm &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_ACTS),
               "%s: %ld _bwd_dd16 (%ld expected, %ld without), %ld _bwd_d16 (%ld without), %ld "
               "matmul_bwd_o16 (%ld without), %ld other backward GEMM calls (%ld without), GEMM "
               "bytes %.0f (%.0f without, %.0f fewer expected), bytes moved %.0f (%.0f without, "
               "%.0f fewer expected), %ld GEMM launches (%ld without), activations' peak %llu "
               "bytes (%llu without)",
               what, p.ma.gdd16, n, p.mb.gdd16, p.ma.gd16, p.mb.gd16, p.ma.bo16, p.mb.bo16,
               p.ma.bwds, p.mb.bwds, p.ma.gemm_b, p.mb.gemm_b, gemm, p.ma.all_b, p.mb.all_b, all,
               p.ma.gemm, p.mb.gemm, (unsigned long long)p.ma.acts_peak,
               (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's kept h
 * LoRA's h = s x A^T of each targeted group kept from the forward in the
 * block's activation slot for the backward (lora.h zt_lora_scratch.keep),
 * not recomputed there: every loss and gradient norm over 4 steps (so the
 * adapters' gradients too) bitwise those of the recompute
 * (ZT_TEST_NO_KEEPH=1), GPT-2 and Llama all-linear, stages 0 and 3, with
 * activation checkpointing (the recomputed block's forward keeps it again)
 * and without, the fp32 activations, fp32 matmuls, QLoRA (nf4 base), a part
 * of a group (q_proj,v_proj); with the adapters' dropout nothing changes.
 * Per step and block, ng the targeted groups: ng forward GEMM calls
 * (matmul_fwd, _a16), GEMM launches and scale calls fewer, the other GEMM
 * calls (matmul_bwd, matmul_dinp_acc) and k_add the same; the activations'
 * peak larger by the kept h, [N, n r] fp32 a group (each rounded to 16
 * elements) a slot (L slots, 1 checkpointed), and each run's peak its plan
 * (but for the host token arrays). */
static void lora_keeph(void) {
    static const w16_kind kind = {67108864, " with and without LoRA's kept h",
                                  "recompute path's", NULL};
    static const w16_xname names[] = {{NULL, NULL}};
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 2},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lf32, 0},
        {"llama:2,4,2,32,48,1024,2,16,untied", 3, w16_lnf4, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_ldrop, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},
        {"gpt2:2,2,32,64,2,16", 3, w16_lck, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_lf32, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_ldrop, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const cm_shape *s = &p.s;
        const int dr = c->extra == w16_ldrop;
        /* the targeted groups' modules: Llama's q|k|v 3, o, gate|up 2, down
         * (q_proj,v_proj: q|k|v's 2); GPT-2's four groups one each */
        static const int nl[4] = {3, 1, 2, 1}, nq[4] = {2, 0, 0, 0}, ngp[4] = {1, 1, 1, 1};
        const int *nm = !s->llama ? ngp : c->extra == w16_qv ? nq : nl;
        const int r = c->extra == w16_qv ? 8 : 4;
        const uint64_t N = (uint64_t)s->B * s->T;
        long ng = 0;
        uint64_t slot = 0;   /* the kept h of a slot, bytes */
        for (int g = 0; g < 4; g++)
            if (nm[g]) {
                ng++;
                slot += ((N * (uint64_t)(nm[g] * r) + 15) & ~(uint64_t)15) * 4;
            }
        const long want = dr ? 0 : 4 * s->L * ng;
        const uint64_t more = dr ? 0 : slot * (uint64_t)(c->extra == w16_lck ? 1 : s->L);
        const uint64_t tok = 2 * N * 4;
        tap_ok(p.mb.fwd - p.ma.fwd == want && p.mb.gemm - p.ma.gemm == want &&
                   p.mb.scale - p.ma.scale == want && p.ma.bwd == p.mb.bwd &&
                   p.ma.dacc == p.mb.dacc && p.ma.add == p.mb.add &&
                   p.ma.acts_peak - p.mb.acts_peak == more &&
                   p.ma.acts_plan - p.ma.acts_peak == tok && p.mb.acts_plan - p.mb.acts_peak == tok,
               "%s: %ld forward GEMM calls (%ld without, %ld fewer expected), %ld GEMMs (%ld "
               "without), %ld scale (%ld without), %ld matmul_bwd (%ld without), %ld "
               "matmul_dinp_acc (%ld without), %ld k_add (%ld without), activations' peak %llu "
               "bytes (planned %llu), %llu without (planned %llu): %llu more expected",
               what, p.ma.fwd, p.mb.fwd, want, p.ma.gemm, p.mb.gemm, p.ma.scale, p.mb.scale,
               p.ma.bwd, p.mb.bwd, p.ma.dacc, p.mb.dacc, p.ma.add, p.mb.add,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.ma.acts_plan,
               (unsigned long long)p.mb.acts_peak, (unsigned long long)p.mb.acts_plan,
               (unsigned long long)more);
    }
}

/* ------------------------------------------------------------ LoRA's bf16 adapters
 * LoRA's adapter GEMMs reading the adapter engine's bf16 storage as their
 * weight (lora.h zt_lora_scratch.ad16: A as it is, a group's B^T placed in
 * bf16 into the scratch bt), not the fp32 adapters rounded by each GEMM:
 * every loss and gradient norm over 4 steps (the adapters trained, so the
 * bf16 storage the optimizer writes is followed) bitwise those of the
 * rounding path (ZT_TEST_NO_LORA16=1, the path of before), Llama and GPT-2,
 * all-linear and q_proj,v_proj, stages 0, 2 and 3, activation
 * checkpointing, QLoRA (nf4 base), gradient accumulation 2, the adapters'
 * dropout, the products added (matmul_dinp_acc) and not
 * (ZT_TEST_NO_LORAACC), fp32.  Per step, micro-batch and block, F the
 * forward passes (2 checkpointed): a targeted group without dropout F (1 +
 * f) + 1 k_round_bf16 fewer (A in the forward, B^T in the backward's dy B;
 * the backward reads the forward's h, lora_keeph, and recomputes no x A^T;
 * f = 1 where the forward's delta reads B^T through a bf16-weight entry:
 * Llama's delta first, or no matmul_dinp_acc; dx += dh A stays
 * matmul_dinp_acc's fp32 A but in Llama's input gradient first, lora_bswap,
 * where dx = dh A is written through matmul_bwd_w16: 1 more), with
 * dropout a targeted module F (1 + f) + 3 (A_j forward, A_j, B_j^T and A_j
 * again backward; f = 1 without matmul_dinp_acc), and without
 * matmul_dinp_acc a group 1 more (dx += dh A through matmul_bwd_w16);
 * none at stage 3 (the gathered adapters have no bf16 storage at hand) and
 * in fp32.  The GEMM launches, the cudaMemsetAsync and copy2d calls (the
 * placement in bf16: the same calls, half the bytes) and the activations'
 * and gathered parameters' peaks and plans the same.  (Device copies are
 * not compared, as bf16 gradients says: a bf16 adapter not 256-byte
 * aligned is copied to alignment, which varies with the cpu's blocks under
 * the counter; at the shapes of bench/costmodel's 8B step none is.) */
static void lora16(void) {
    static const w16_kind kind = {134217728, " with and without LoRA's bf16 adapters",
                                  "rounding path's", NULL};
    static const char drop_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                                  "ztrain.lora.dropout=0.25 activation_checkpointing.policy=blocks";
    static const char acc[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                              "train_batch_size=4";
    static const w16_xname names[] = {{drop_ck, " LoRA dropout checkpointed"}, {acc, " LoRA accumulating 2"},
                                      {NULL, NULL}};
    /* (c.arg: no_w16 of both runs; ng, nm: the targeted groups and modules;
     * swap: Llama's delta first; on: 0 where the path is not taken) */
    static const struct { w16_case c; int ng, nm, swap, on; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 4, 7, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 2, w16_lck, 0}, 4, 7, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_qv, 0}, 1, 2, 1, 1},
        {{"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, 4, 7, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 2, acc, 0}, 4, 7, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_ldrop, 0}, 4, 7, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 0, drop_ck, 262144}, 4, 7, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 262144 | 1048576}, 4, 7, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, 4, 7, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lf32, 0}, 4, 7, 1, 0},
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 0}, 4, 4, 0, 1},
        {{"gpt2:2,2,32,64,2,16", 2, w16_lck, 262144}, 4, 4, 0, 1},
        {{"gpt2:2,2,32,64,2,16", 0, w16_ldrop, 0}, 4, 4, 0, 1},
        {{"gpt2:2,2,32,64,2,16", 3, w16_lck, 0}, 4, 4, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[200];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const char *ex = c->extra;
        const long F = ex == w16_lck || ex == drop_ck ? 2 : 1, A = ex == acc ? 2 : 1;
        const int dr = ex == w16_ldrop || ex == drop_ck, noacc = (c->arg & 262144) != 0;
        const long f = dr ? noacc : cases[i].swap || noacc;
        /* (bs: Llama's input gradient first, lora_bswap: dx = dh A written
         * through matmul_bwd_w16, as without matmul_dinp_acc; h kept from
         * the forward, lora_keeph: no recompute of x A^T in the backward) */
        const int bs = p.s.llama && !dr;
        const long per = dr ? cases[i].nm * (F * (1 + f) + 3)
                            : cases[i].ng * (F * (1 + f) + 1 + (noacc || bs));
        const long fewer = cases[i].on ? 4 * A * p.s.L * per : 0;
        tap_ok(p.rb - p.ra == fewer && p.ma.gemm == p.mb.gemm && p.ma.memset_n == p.mb.memset_n &&
                   p.ma.copy2d == p.mb.copy2d && w16_same(&p, W16_SAME_ACTS | W16_SAME_GATHERED),
               "%s: %ld k_round_bf16 (%ld without, %ld fewer expected), %ld GEMMs (%ld without), "
               "%ld cudaMemsetAsync (%ld without), %ld copy2d (%ld without), activations' peak "
               "%llu bytes (%llu without), gathered peak %llu (%llu without)",
               what, p.ra, p.rb, fewer, p.ma.gemm, p.mb.gemm, p.ma.memset_n, p.mb.memset_n,
               p.ma.copy2d, p.mb.copy2d,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak,
               (unsigned long long)p.ma.peak, (unsigned long long)p.mb.peak);
    }
}

/* ------------------------------------------------------------ LoRA's B^T and bf16 dy
 * LoRA's group B^T placed with one copy2d a module (lora.c group_bt: r
 * copies before), its gradient gathered out of dbt with one copy2d a module
 * and added with ONE add a group (one add a row and module before), and
 * the adapters' backward GEMMs reading the bf16 copy of dy the model's own
 * GEMM reads (lora.h dy16: matmul_fwd_a16 / matmul_bwd_a16, which round
 * nothing of dy): every loss and gradient norm over 4 steps (so the
 * adapters' gradients too) bitwise those of the path of before
 * (ZT_TEST_NO_LORABT=1), GPT-2 and Llama all-linear, stages 0 and 3, with
 * activation checkpointing (the recompute places B^T again) and without,
 * Gemma 2 (dy of o and down: the post norms' gradients), a q|k|v group of
 * two modules and a gate|up group of one not spanning its output
 * (q_proj,v_proj,o_proj,up_proj), the adapters' dropout (the per-module
 * backward), the bf16 gradients off (ZT_TEST_NO_D16: no bf16 dy), and
 * fp32.  Per step and block, with nq the targeted modules of the groups
 * that place B^T (Llama all-linear: q|k|v's 3 and gate|up's 2; GPT-2's
 * groups are single modules spanning their outputs: none), ng those groups,
 * P the passes that place it (forward, backward, and the recompute): r nq P
 * copy calls fewer (none left at stage 0, where the engine copies nothing
 * itself), nq P + nq copy2d calls more, r nq
 * - ng k_add fewer, and 2 k_round_bf16 fewer (2 bf16-input calls more) for
 * each group whose dy the model has in bf16 (g16: GPT-2's two projections,
 * Llama's o, gate|up and down), and where gate|up's is one of them SwiGLU /
 * GeGLU's backward writes no fp32 gate|up gradient (N H (4 h + f) bytes a
 * launch, N H (4 h + 3 f) without, as bf16 gradients above); the
 * activations' peak and plan unchanged (the gathered gradient lands in the
 * forward's B^T scratch). */
static void lora_bt(void) {
    static const w16_kind kind = {524288, " with and without LoRA's copy2d B^T and bf16 dy",
                                  "row copies' path's", NULL};
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const char part[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                               "ztrain.lora.targets=q_proj,v_proj,o_proj,up_proj";
    static const char drop[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.dropout=0.1";
    static const w16_xname names[] = {{gemma, " gemma LoRA"},
                                      {part, " LoRA q,v,o,up"}, {drop, " LoRA dropout"},
                                      {NULL, NULL}};
    /* (arg: no_w16 of both runs; GPT-2: ZT_TEST_NO_GPT16, whose fc and
     * q|k|v paths follow ZT_W16_LORABT too: lora_gpt16 below) */
    static const struct { w16_case c; int nq, ng, g16; } cases[] = {
        {{"gpt2:2,2,32,64,2,16", 0, w16_lora, 8388608}, 0, 0, 2},
        {{"gpt2:2,2,32,64,2,16", 3, w16_lck, 8388608}, 0, 0, 2},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 5, 2, 3},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 5, 2, 3},
        {{"llama:2,4,2,32,48,64,2,16", 0, gemma, 0}, 5, 2, 3},
        /* (q|k|v: q and v, 2 modules; gate|up: up alone, 1; no dy16 for q|k|v) */
        {{"llama:2,4,2,32,48,64,2,16", 3, part, 0}, 3, 2, 2},
        /* (dropout: fp32 activations, no bf16 gradient copies to read) */
        {{"llama:2,4,2,32,48,64,2,16", 0, drop, 0}, 5, 2, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 256}, 5, 2, 0},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lf32, 0}, 5, 2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i].c;
        w16_pair p;
        char what[160];
        /* (the adapters' GEMMs rounding their fp32 weights, as these counts
         * have it, ZT_TEST_NO_LORA16: the bf16 adapters' counts, lora16;
         * and the fp32 dh, ZT_TEST_NO_DH16: these bytes a launch of the
         * gate|up backward read it, q,v,o,up's down has no adapters) */
        if (!w16_case_run(&p, &kind, c, c->arg | 134217728 | w16_dh32(c->shape), names, NULL,
                          what, sizeof what))
            continue;
        const long r = 4, L = p.s.L, P = 2 + (c->extra == w16_lck), nq = cases[i].nq,
                   ng = cases[i].ng, g16 = cases[i].g16;
        const long copies = 4 * L * r * nq * P, c2d = 4 * L * (nq * P + nq),
                   adds = 4 * L * (r * nq - ng), rounds = 4 * L * 2 * g16;
        /* (Llama's SwiGLU / GeGLU backward: bytes a launch with and without) */
        const double nh = (double)p.s.B * p.s.T * p.s.I, h = 2, f = 4;
        const double glu = !p.s.llama ? 0 : g16 ? nh * (4 * h + f) : p.ma.glu_b,
                     gluo = !p.s.llama ? 0 : g16 ? nh * (4 * h + 3 * f) : p.ma.glu_b;
        tap_ok(p.ma.glu_b == glu && p.mb.glu_b == gluo,
               "%s: the gate|up backward kernel moves %.0f bytes a launch (%.0f expected; %.0f "
               "without, %.0f expected)", what, p.ma.glu_b, glu, p.mb.glu_b, gluo);
        tap_ok(p.mb.copy - p.ma.copy == copies && (c->stage || p.ma.copy == 0) &&
                   p.ma.copy2d - p.mb.copy2d == c2d &&
                   p.mb.add - p.ma.add == adds && p.rb - p.ra == rounds &&
                   p.ma.a16 - p.mb.a16 == rounds &&
                   w16_same(&p, W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 | W16_SAME_D16 |
                                W16_SAME_TO16 | W16_SAME_FROM16 | W16_SAME_ACTS),
               "%s: %ld copy calls (%ld without, %ld fewer expected), %ld copy2d (%ld without, %ld "
               "more expected), %ld k_add (%ld without, %ld fewer expected), %ld k_round_bf16 (%ld "
               "without, %ld fewer expected), %ld bf16-input calls (%ld without), activations' peak "
               "%llu bytes (%llu without)",
               what, p.ma.copy, p.mb.copy, copies, p.ma.copy2d, p.mb.copy2d, c2d, p.ma.add,
               p.mb.add, adds, p.ra, p.rb, rounds, p.ma.a16, p.mb.a16,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ LoRA's q|k|v gradient in bf16
 * Llama with LoRA (and ZT_W16_LORABT) takes the q|k|v gradient's bf16 path
 * as without adapters (arch.h zt_lora_dq16_of): over the bf16-gradient
 * backend of bf16_rope_bwd16, gqa_ext_bwd16d writes it in bf16, RoPE's
 * backward rotates it in bf16 (rope_bwd16), the q|k|v GEMM reads it
 * (matmul_bwd_d16) and so do the q|k|v adapters' two dy GEMMs (lora.h
 * dy16: matmul_fwd_a16 / matmul_bwd_a16, for the fp32 dy they rounded):
 * every loss and gradient norm over 4 steps (the adapters' gradients in
 * them) bitwise those of ZT_TEST_NO_QKV16=1 (gqa_ext_bwd16o widening,
 * rope_bwd in fp32, the GEMMs rounding dy: the path of before), all-linear
 * at stages 0 and 3, checkpointed, untied, a q|k|v group of two modules
 * (q_proj,v_proj,o_proj,up_proj), adapters on o and down alone (none on
 * q|k|v: the path all the same), Qwen2.5's q|k|v biases (frozen), Gemma 2.
 * Per step and block (bw = 4 L): gqa_ext_bwd16d and rope_bwd16 bw calls
 * (none without), no rope_bwd (bw without) and as many gqa_ext_bwd16o
 * fewer, the bf16-output attention calls the same (cuda: k_rope and
 * k_sdpa_widen gone), bw bf16-gradient calls more, and bw
 * k_round_bf16 fewer (the GEMM's dout rounding) plus 2 bw fewer with q|k|v
 * adapters (2 bw bf16-input calls more; the GEMM's matmul_bwd_d16 one in
 * place of its matmul_bwd_a16); the activations' peak and plan
 * unchanged (dq16 over stq, as without adapters).  Neither path changes
 * anything where it is not taken: q/k norms (Qwen3) with ZT_TEST_NO_QKB16
 * (without it: bf16_qknorm_bwd16), the adapters' dropout
 * (fp32 activations), ZT_TEST_NO_LORABT (the adapters' GEMMs read fp32 dy)
 * and ZT_TEST_NO_RB16 set in both runs, and over the cpu backend (its
 * gradient fp32). */
static void lora_qkv16(void) {
    static const w16_kind kind = {2097152, " with and without LoRA's q|k|v gradient in bf16",
                                  "fp32 q|k|v gradient's path's", NULL};
    static const char part[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                               "ztrain.lora.targets=q_proj,v_proj,o_proj,up_proj";
    static const char od[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=o_proj,down_proj";
    static const char bias[] = "ztrain.model.attention_bias=true ztrain.lora.r=4 ztrain.lora.alpha=8 "
                               "ztrain.lora.targets=all-linear";
    static const char gemma[] = "ztrain.model.gemma=2 ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                "ztrain.lora.targets=all-linear";
    static const char qkn[] = "ztrain.model.qk_norm=true ztrain.lora.r=4 ztrain.lora.alpha=8 "
                              "ztrain.lora.targets=all-linear";
    static const char drop[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.dropout=0.1";
    static const w16_xname names[] = {{part, " LoRA q,v,o,up"},
                                      {od, " LoRA o,down"}, {bias, " LoRA q|k|v biases"},
                                      {gemma, " gemma LoRA"}, {qkn, " LoRA q/k norms"},
                                      {drop, " LoRA dropout"}, {NULL, NULL}};
    /* (arg: no_w16 of both runs; taken: the path taken; qkv: adapters on q|k|v) */
    static const struct { w16_case c; int taken, qkv; } cases[] = {
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16,untied", 3, w16_lck, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, part, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, od, 0}, 1, 0},
        {{"llama:2,4,2,32,48,64,2,16", 0, bias, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, gemma, 0}, 1, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, qkn, 68719476736ULL}, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, drop, 0}, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 524288}, 0, 1},
        {{"llama:2,4,2,32,48,64,2,16", 0, w16_lora, 16384}, 0, 1}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (!b16 && i > 0) continue;   /* (over the cpu: the first) */
            const w16_case *c = &cases[i].c;
            w16_pair p;
            char what[192];
            /* (the backward's order of before, ZT_TEST_NO_BWDSWAP: q|k|v's
             * base dinp GEMM the a16 / d16 entry these counts name; lora_bswap;
             * the adapters' GEMMs rounding their fp32 weights, as these
             * counts have it, ZT_TEST_NO_LORA16: the bf16 adapters', lora16) */
            /* (and the fp32 norm-output gradient, ZT_TEST_NO_DOUT16N: o,down's
             * q|k|v GEMM a matmul_bwd_o16 call otherwise; and down's fp32 dh,
             * ZT_TEST_NO_DH16, w16_dout32: its GEMM one too) */
            if (!w16_case_run(&p, &kind, c, c->arg | 16777216 | 134217728 | w16_dout32(c->shape),
                              names, b16 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
                continue;
            const long bw = 4L * p.s.L, t = cases[i].taken && b16 ? bw : 0,
                       lq = cases[i].qkv ? 2 * t : 0;
            /* (over the cpu gqa_ext_bwd16d is called, answering 0, as without adapters) */
            const long ab = cases[i].taken ? bw : 0;
            tap_ok(p.ma.ab16 == ab && p.mb.ab16 == 0 && p.ma.rb16 == t && p.mb.rb16 == 0 &&
                       p.mb.ropeb - p.ma.ropeb == t && p.ma.d16 - p.mb.d16 == t &&
                       p.rb - p.ra == t + lq && p.ma.a16 - p.mb.a16 == lq &&
                       w16_same(&p, W16_SAME_W16 | W16_SAME_O16 | W16_SAME_N16 | W16_SAME_AO16 |
                                    W16_SAME_TO16 | W16_SAME_FROM16 | W16_SAME_ACTS |
                                    W16_SAME_GATHERED),
                   "%s: %ld gqa_ext_bwd16d calls (%ld expected, %ld without), %ld rope_bwd16 (%ld "
                   "expected, %ld without), %ld rope_bwd (%ld without), %ld bf16-output attention "
                   "calls (%ld without), bf16-gradient calls %ld (%ld without), k_round_bf16 %ld (%ld without, "
                   "%ld fewer expected), bf16-input calls %ld (%ld without, %ld more expected), "
                   "activations' peak %llu bytes (%llu without)",
                   what, p.ma.ab16, ab, p.mb.ab16, p.ma.rb16, t, p.mb.rb16, p.ma.ropeb, p.mb.ropeb,
                   p.ma.ao16, p.mb.ao16, p.ma.d16, p.mb.d16, p.ra, p.rb, t + lq, p.ma.a16, p.mb.a16, lq,
                   (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ GPT-2's bf16 paths with LoRA
 * GPT-2 with LoRA (config.h ZT_W16_GPT16) takes the bf16 paths of no LoRA
 * for its matmuls without adapters, and the bf16 gradient paths where the
 * adapters read the bf16 output gradient (ZT_W16_LORABT): every loss and
 * gradient norm over 4 steps (so the adapters' gradients too) bitwise those
 * of the path of before (ZT_TEST_NO_GPT16=1), c_attn (the default), c_fc,
 * all-linear, stages 0 and 3, with activation checkpointing and without,
 * the adapters' dropout (fp32 activations: nothing changes), and
 * ZT_TEST_NO_LORABT (the adapters read the fp32 gradient), over the cpu
 * backend and the bf16-gradient one (bf16_rope_bwd16's: the attention
 * backward's gradient in bf16, as cuDNN's).  Per step and block: fc's
 * backward through the GELU in bf16 (matmul_dgelu_bwd_o16, g16) without
 * adapters on mlp.c_proj and with c_fc's reading bf16 dy; the att_do16
 * question without adapters on attn.c_proj; gqa_ext_bwd16d (ab16) with
 * c_attn's adapters reading bf16 dy (or none); fc's forward GEMM writing
 * bf16 (matmul_fwd_o16) without c_fc adapters (q|k|v's: one k_to_bf16 fewer;
 * fc's: the same, gelu_fwd16r rounding it without); with mlp.c_proj's and c_fc's
 * adapters (all-linear) fc's gradient rounded once (one k_to_bf16) for the
 * GEMMs and the adapters; k_round_bf16: none more, fewer where a path is
 * taken; the activations' peak and plan unchanged. */
static void lora_gpt16(void) {
    static const w16_kind kind = {8388608, " with and without GPT-2's bf16 paths with LoRA",
                                  "LoRA fp32 paths'", NULL};
    static const char cattn[] = "ztrain.lora.r=4 ztrain.lora.alpha=8";
    static const char cattn_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 "
                                   "activation_checkpointing.policy=blocks";
    static const char cfc[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=c_fc";
    static const char drop[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                               "ztrain.lora.dropout=0.1";
    static const w16_xname names[] = {{cattn, " LoRA c_attn"}, {cattn_ck, " LoRA c_attn checkpointed"},
                                      {cfc, " LoRA c_fc"}, {drop, " LoRA dropout"}, {NULL, NULL}};
    /* (arg: no_w16 of both runs) */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, cattn, 0},     {"gpt2:2,2,32,64,2,16", 3, cattn_ck, 0},
        {"gpt2:2,2,32,64,2,16", 0, cfc, 0},       {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},
        {"gpt2:2,2,32,64,2,16", 3, w16_lck, 0},    {"gpt2:2,2,32,64,2,16", 0, drop, 0},
        {"gpt2:2,2,32,64,2,16", 0, cattn, 524288}, {"gpt2:2,2,32,64,2,16", 3, w16_lora, 524288}};
    bf16g_init();
    for (int b16 = 0; b16 < 2; b16++) {
        g_w16_inner = b16 ? &g_bf16g : NULL;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const w16_case *c = &cases[i];
            w16_pair p;
            char what[192];
            /* (the adapters' GEMMs rounding their fp32 weights, as these
             * counts have it, ZT_TEST_NO_LORA16: the bf16 adapters', lora16) */
            /* (and c_proj's fp32 dO with adapters, ZT_TEST_NO_LO16: the att_do16
             * question is asked otherwise, lora_o16; fc's GEMM and GELU as
             * two calls, ZT_TEST_NO_GELUE, the counts below: fc without
             * adapters takes the fused one otherwise, gpt_gelue) */
            if (!w16_case_run(&p, &kind, c,
                              c->arg | 134217728 | 274877906944ULL | 8796093022208ULL | 17592186044416ULL, names,
                              b16 ? " (bf16-gradient backend)" : " (cpu)", what, sizeof what))
                continue;
            const char *ex = c->extra;
            const int bt = !(c->arg & 524288), dr = ex == drop;
            /* the targeted groups */
            const int qkv = ex != cfc, proj = ex == w16_lora || ex == w16_lck || dr,
                      fc = ex != cattn && ex != cattn_ck, fcp = proj;
            const long n = 4L * p.s.L, P = 1 + (ex == cattn_ck || ex == w16_lck);
            const long g16 = !dr && !fcp && (!fc || bt) ? n : 0;
            const long q = !dr && !proj ? n : 0, ab = !dr && (!qkv || bt) ? n : 0;
            /* (the forward GEMMs without adapters writing bf16, each forward
             * (and recompute): q|k|v's, fc's, one k_to_bf16 fewer each
             * (fc's: none, its rounding being gelu_fwd16r's without:
             * lora_gluround); all-linear fc's gradient rounded once, one
             * k_to_bf16 more) */
            const long o16 = !dr ? n * P * (!qkv + !fc) : 0, to16 = !dr && fc && fcp && bt ? n : 0,
                       to16o = !dr ? n * P * !qkv : 0;
            /* (k_round_bf16 a block and backward: fc's bf16 gradient (g16 or
             * to16) spares its GEMMs' rounding and, with c_fc's adapters,
             * theirs 2; the attention's bf16 gradient (the bf16-gradient
             * backend: gqa_ext_bwd16d answers 1) the q|k|v GEMM's and, with
             * c_attn's adapters, theirs 2; each adapter GEMM so is a
             * bf16-input call, and each model GEMM a bf16-gradient one) */
            const int fcb = g16 || to16, qb = ab && b16;
            const long rounds = (fcb ? n * (1 + 2 * fc) : 0) + (qb ? n * (1 + 2 * qkv) : 0);
            const long a16 = (fcb ? 2 * n * fc : 0) + (qb ? 2 * n * qkv : 0);
            const long d16 = (to16 ? n : 0) + (qb ? n : 0);
            tap_ok(p.ma.g16 == g16 && p.mb.g16 == 0 && p.ma.do16q == q && p.mb.do16q == 0 &&
                       p.ma.ab16 == ab && p.mb.ab16 == 0 && p.ma.o16 - p.mb.o16 == o16 &&
                       p.ma.to16 - p.mb.to16 == to16 - to16o && p.rb - p.ra == rounds &&
                       p.ma.a16 - p.mb.a16 == a16 && p.ma.d16 - p.mb.d16 == d16 &&
                       w16_same(&p, W16_SAME_W16 | W16_SAME_ACTS | W16_SAME_GATHERED),
                   "%s: %ld matmul_dgelu_bwd_o16 calls (%ld expected, %ld without), %ld att_do16 "
                   "questions (%ld expected, %ld without), %ld gqa_ext_bwd16d calls (%ld expected, %ld "
                   "without), %ld bf16-output calls (%ld without, %ld more expected), %ld k_to_bf16 "
                   "(%ld without), %ld k_round_bf16 (%ld without, %ld fewer expected), %ld bf16-input "
                   "calls (%ld without, %ld more expected), %ld bf16-gradient calls (%ld without, %ld "
                   "more expected), activations' peak %llu bytes (%llu without)",
                   what, p.ma.g16, g16, p.mb.g16, p.ma.do16q, q, p.mb.do16q, p.ma.ab16, ab, p.mb.ab16,
                   p.ma.o16, p.mb.o16, o16, p.ma.to16, p.mb.to16, p.ra, p.rb, rounds, p.ma.a16,
                   p.mb.a16, a16, p.ma.d16, p.mb.d16, d16, (unsigned long long)p.ma.acts_peak,
                   (unsigned long long)p.mb.acts_peak);
        }
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ QLoRA's compute copy
 * A frozen NF4 base's compute copy of a unit (shard_nf4.c zt_nf4s_view)
 * built in buffers allocated without the zero fill (ZT_MEM_NOZERO: every
 * one is wholly overwritten) and, the store not being sharded here (stages
 * 0-2, or stage 3 on one rank), from the store's codes, absmax / qabsmax and
 * rest read in place, against the path of before (ZT_TEST_NO_NF4VIEW=1:
 * every buffer zero-filled, the store's arrays copied into gathered
 * buffers): 4 steps, Llama tied and untied, stages 0 and 3, nf4 and nf4-dq,
 * losses and gradient norms bitwise.  Per view of a unit (the compute copy
 * built once a pass: the forward's units, then the backward's, all but the
 * embeddings -- the frozen base has no embedding backward; tied, the head
 * reads the embeddings' copy of the forward) the path of before queued a memset for
 * each of its buffers: the fp32 copy (the norms' 2C elements a block, one
 * placeholder element for the embeddings, whose table only GEMMs and the
 * bf16 lookup read, the final norm's C for the head), a block's bf16 copy
 * (its numel), the gathered rest (2 bytes an element: a block's norms, the
 * table, the head's final norm and, untied, its weight), codes (32 bytes a
 * block of 64 weights, a placeholder block where there are none) and absmax
 * (4 bytes a block; nf4-dq qabsmax 1) -- none now -- and a D2D copy of the
 * rest and, with NF4 tensors, of the codes and absmax (none now).  The rest
 * is unchanged: the same kernels otherwise, the gathered parameters' peak the
 * plan's in both runs, and lower now. */
static void nf4_view(void) {
    static const w16_kind kind = {4194304, " with and without the NF4 view in place and unzeroed",
                                  "zero-filled copies' path's", NULL};
    static const char dq[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=q_proj,down_proj "
                             "ztrain.lora.base=nf4-dq";
    static const w16_xname names[] = {{w16_lnf4, " QLoRA nf4"}, {dq, " QLoRA nf4-dq"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, w16_lnf4, 0}, {"llama:2,4,2,32,48,1024,2,16", 3, w16_lnf4, 0},
        {"llama:2,4,2,32,48,1024,2,16", 0, dq, 0}, {"llama:2,4,2,32,48,1024,2,16,untied", 3, dq, 0}};
    /* (over cpu-strict: its memory is the device's, so the engine's blocks
     * come from the counted alloc / alloc_nz, and alloc_nz fills them with
     * NaN: a read before the write would change the losses) */
    g_w16_inner = zt_backend_cpu_strict();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, &kind, c, c->arg, names, NULL, what, sizeof what)) continue;
        const double C = p.s.C, I = p.s.I, V = p.s.V, hd = C / p.s.NH, kv = p.s.NKV * hd;
        const int dqk = c->extra == dq, tied = !p.s.untied;
        /* a block: q, o [C, C], k, v [kv, C], gate, up [I, C], down [C, I]
         * quantized in blocks of 64 (each a whole number of them here), the
         * two norms (2C) the rest */
        const double blocks = (2 * C * C + 2 * kv * C + 3 * I * C) / 64, rest = 2 * C;
        const double numel = 64 * blocks + rest, amb = dqk ? 1 : 4;
        const double blk_b = 4 * rest + 2 * numel + 2 * rest + 32 * blocks + amb * blocks;
        const double blk_c = 2 * (2 * rest + 32 * blocks + amb * blocks);
        /* the embeddings (tied: the head's GEMM weight too) and the head:
         * fp32 copy, rest, placeholder codes and absmax */
        const double emb_b = 4 + 2 * V * C + 32 + amb, emb_c = 2 * (2 * V * C);
        const double head_b = tied ? 4 * C + 2 * C + 32 + amb : 4 * C + 2 * (V * C + C) + 32 + amb;
        const double head_c = tied ? 2 * (2 * C) : 2 * (2 * (V * C + C));
        const long L = p.s.L, S = 4;   /* 4 steps */
        const long vb = S * 2 * L, ve = S, vh = S * 2;   /* views */
        const long mset = 5 * vb + 4 * ve + 4 * vh, cps = 3 * vb + ve + vh;
        const double mset_b = vb * blk_b + ve * emb_b + vh * head_b;
        const double cps_b = vb * blk_c + ve * emb_c + vh * head_c;
        tap_ok(p.mb.memset_n - p.ma.memset_n == mset && p.mb.memset_b - p.ma.memset_b == mset_b &&
                   p.mb.d2d_n - p.ma.d2d_n == cps && p.mb.d2d_b - p.ma.d2d_b == cps_b,
               "%s: %ld cudaMemsetAsync, %.0f bytes (%ld, %.0f without: %ld, %.0f fewer expected); "
               "%ld D2D copies, %.0f bytes (%ld, %.0f without: %ld, %.0f fewer expected)",
               what, p.ma.memset_n, p.ma.memset_b, p.mb.memset_n, p.mb.memset_b, mset, mset_b,
               p.ma.d2d_n, p.ma.d2d_b, p.mb.d2d_n, p.mb.d2d_b, cps, cps_b);
        tap_ok(p.ma.dequant == p.mb.dequant && p.ma.dequant == S * 2 * L * 7 && p.mb.alloc_nz == 0 &&
                   p.ma.peak == p.ma.plan && p.mb.peak == p.mb.plan && p.ma.peak < p.mb.peak &&
                   w16_same(&p, W16_SAME_ROUNDS | W16_SAME_W16 | W16_SAME_TO16 | W16_SAME_FROM16 |
                                W16_SAME_ACTS),
               "%s: %ld nf4_dequant calls (%ld without, %ld expected), %ld alloc_nz calls (%ld "
               "without), the gathered parameters' peak %llu bytes (planned %llu; %llu without, "
               "planned %llu)", what, p.ma.dequant, p.mb.dequant, S * 2 * L * 7, p.ma.alloc_nz,
               p.mb.alloc_nz, (unsigned long long)p.ma.peak, (unsigned long long)p.ma.plan,
               (unsigned long long)p.mb.peak, (unsigned long long)p.mb.plan);
    }
    g_w16_inner = NULL;
}

/* ------------------------------------------------------------ bf16 GELU gradients
 * GPT-2's fc backward through the GELU writing its gradient in bf16
 * (backend.h matmul_dgelu_bwd_o16: the bf16 fc output read as it is, the
 * gradient written in bf16 for fc's GEMMs, fc's bias gradient the fp32
 * values' column sums): every loss and gradient norm bitwise those of the
 * path of before (ZT_TEST_NO_G16=1: the fc output widened by from_bf16,
 * matmul_dgelu_bwd_d16 writing the fp32 gradient, fc's GEMMs rounding it),
 * stages 0 and 3, with activation checkpointing and without; per block and
 * backward matmul_dgelu_bwd_o16 for matmul_dgelu_bwd_d16, one k_from_bf16
 * and one k_round_bf16 fewer, the bf16-gradient calls (fc's GEMMs now
 * matmul_bwd_d16) the same, and the activations' peak and plan unchanged;
 * with LoRA (its adapters read the fp32 gradient) and on Llama nothing
 * changes. */
static void bf16_gelu_grad(void) {
    static const w16_kind kind = {2048, " with and without the bf16 GELU gradients",
                                  "widening path's", NULL};
    for (size_t i = 0; i < sizeof w16_common / sizeof w16_common[0]; i++) {
        const w16_case *c = &w16_common[i];
        w16_pair p;
        char what[96];
        /* (GPT-2's fp32 norm-output gradient, w16_dout32: fc's bf16 input
         * gradient needs the bf16 GELU gradient) */
        if (!w16_case_run(&p, &kind, c, w16_dout32(c->shape), NULL, NULL, what, sizeof what))
            continue;
        const long n = !p.s.llama && c->extra != w16_lora ? 4L * p.s.L : 0;
        tap_ok(p.ma.g16 == n && p.mb.g16 == 0 && p.mb.from16 - p.ma.from16 == n && p.rb - p.ra == n &&
                   w16_same(&p, W16_SAME_A16 | W16_SAME_D16 | W16_SAME_ACTS),
               "%s: %ld matmul_dgelu_bwd_o16 calls (%ld expected, %ld without), %ld k_from_bf16 "
               "(%ld without), %ld k_round_bf16 (%ld without), %ld bf16-gradient calls (%ld "
               "without), activations' peak %llu bytes (%llu without)",
               what, p.ma.g16, n, p.mb.g16, p.ma.from16, p.mb.from16, p.ra, p.rb, p.ma.d16,
               p.mb.d16, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
}

/* ------------------------------------------------------------ bf16 final norm
 * The final norm writing the LM head's input in bf16 alone (config.h
 * ZT_W16_X16: layernorm_fwd16 / rmsnorm_fwd16, no fp32 copy), the head GEMMs
 * reading it as their bf16 input (matmul_fwd_o16's and matmul_bwd_head16's
 * inp16; with fp32 logits matmul_fwd_a16 / matmul_bwd_a16): every loss and
 * gradient norm bitwise those of the fp32 final norm the GEMMs round
 * (ZT_TEST_NO_X16=1, the path of before), GPT-2 and Llama (Gemma 2, and
 * with its final soft-cap: fp32 logits), stages 0 and 3, with activation
 * checkpointing and without, LoRA (a frozen head: no dw), the fp32 logits
 * (ZT_TEST_NO_L16), the norms' to_bf16 path (ZT_TEST_NO_N16).  Per step
 * (2 chunks of rows) 4 k_round_bf16 fewer (the 2 chunks' head GEMMs, dw's
 * 2; LoRA: 2, no dw; the head fused in the forward, classifier.h: no
 * chunk recomputed); one norm call a step writing bf16 more
 * (ZT_TEST_NO_N16: one k_to_bf16 more); with fp32 logits the 4 head GEMM
 * entries a step are bf16-input ones; the activations' peak
 * lower by the fp32 [N, C] less the bf16 one (up to 252 bytes of its
 * alignment) and still the plan's. */
static void bf16_final_norm(void) {
    static const w16_kind kind = {8192, " with and without the bf16 final norm",
                                  "fp32 final norm's", NULL};
    static const char cap[] = "ztrain.model.gemma=2 ztrain.model.final_softcap=30";
    static const w16_xname names[] = {{cap, " gemma final soft-cap"}, {NULL, NULL}};
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, NULL, 0},         {"gpt2:2,2,32,64,2,16", 3, w16_ck, 0},
        {"gpt2:2,2,32,64,2,16", 0, w16_lora, 0},     {"gpt2:2,2,32,64,2,16", 3, NULL, 64},
        {"gpt2:2,2,32,64,2,16", 0, NULL, 8},         {"llama:2,4,2,32,48,64,2,16", 0, NULL, 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 0},
        {"llama:2,4,2,32,48,64,2,16", 0, w16_gemma, 0}, {"llama:2,4,2,32,48,64,2,16", 3, cap, 0},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lora, 0}, {"llama:2,4,2,32,48,64,2,16,untied", 0, NULL, 64},
        {"llama:2,4,2,32,48,64,2,16", 3, NULL, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w16_pair p;
        char what[128];
        /* (ZT_TEST_NO_BRANCH16 in both runs: without the bf16 final norm
         * the last block's fp32 down output, branch16 below) */
        if (!w16_case_run(&p, &kind, &cases[i], cases[i].arg | w16_nobr16(cases[i].shape), names,
                          NULL, what, sizeof what))
            continue;
        const char *ex = cases[i].extra;
        const int no = cases[i].arg, is_lora = ex == w16_lora;
        /* the fp32 logits: ZT_TEST_NO_L16, or the final soft-cap */
        const int f32l = (no & 64) || ex == cap;
        const long fewer = 4L * (is_lora ? 2 : 4), n16 = no & 8 ? 0 : 4, to16 = no & 8 ? 4 : 0;
        /* (with fp32 logits the head's GEMMs are bf16-input calls, which
         * were bf16-weight calls: the head weight's bf16 storage) */
        const long a16 = f32l ? fewer : 0;
        tap_ok(p.rb - p.ra == fewer && p.ma.n16 - p.mb.n16 == n16 && p.ma.to16 - p.mb.to16 == to16 &&
                   p.ma.a16 - p.mb.a16 == a16 && p.wb - p.wa == a16 &&
                   w16_same(&p, W16_SAME_O16 | W16_SAME_D16 | W16_SAME_H16),
               "%s: %ld k_round_bf16 (%ld without, %ld fewer expected), %ld norm calls writing bf16 "
               "(%ld without), %ld k_to_bf16 (%ld without), %ld bf16-input calls (%ld without), %ld "
               "bf16-weight calls (%ld without)",
               what, p.ra, p.rb, fewer, p.ma.n16, p.mb.n16, p.ma.to16, p.mb.to16, p.ma.a16, p.mb.a16,
               p.wa, p.wb);
        const uint64_t nc2 = 2 * (uint64_t)p.s.B * p.s.T * (uint64_t)p.s.C;
        const uint64_t d = p.mb.acts_peak - p.ma.acts_peak;
        tap_ok(p.mb.acts_peak > p.ma.acts_peak && d <= nc2 && d + 252 >= nc2 &&
                   p.ma.acts_plan - p.ma.acts_peak == p.mb.acts_plan - p.mb.acts_peak &&
                   p.mb.acts_plan - p.ma.acts_plan == d,
               "%s: activations' peak %llu bytes (planned %llu), %llu lower than with the fp32 final "
               "norm (planned %llu; the fp32 [N, C] less the bf16 one: %llu)",
               what, (unsigned long long)p.ma.acts_peak, (unsigned long long)p.ma.acts_plan,
               (unsigned long long)d, (unsigned long long)p.mb.acts_plan, (unsigned long long)nc2);
    }
}

/* ------------------------------------------------------------ the model */

static char srcdir[512];

static const char *src(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", srcdir, rel);
    return buf;
}

static const cm_measured *measured(const cm_table *t, const char *what) {
    for (int i = 0; i < t->nmeasured; i++)
        if (!strcmp(t->measured[i].what, what)) return &t->measured[i];
    return NULL;
}

/* predictions of cal for the counted GPT-2 and SmolLM steps against t's
 * recorded engine steps */
static void predict(const cm_calib *cal, const cm_table *t, const char *what, const cm_counts *gpt2,
                    const cm_counts *smol) {
    const cm_measured *mg = measured(t, "gpt2"), *ms = measured(t, "llama");
    if (!tap_ok(mg && ms && !strcmp(mg->shape, "12,12,768,50304,8,1024") &&
                    !strcmp(ms->shape, "30,9,3,576,1536,49152,8,2048"),
                "%s: the recorded engine steps of GPT-2 and SmolLM shapes", what))
        return;
    const double pg = 1e3 * cm_step_s(cal, gpt2->k, gpt2->nk, &gpt2->tot, NULL);
    const double ps = 1e3 * cm_step_s(cal, smol->k, smol->nk, &smol->tot, NULL);
    tap_diag("%s: GPT-2 predicted %.1f ms, recorded %.1f ms (%.3f); SmolLM predicted %.1f ms, recorded "
             "%.1f ms (%.3f)",
             what, pg, mg->ms, pg / mg->ms, ps, ms->ms, ps / ms->ms);
    tap_ok(fabs(pg / mg->ms - 1) <= 0.10, "%s: GPT-2 step (in sample) within 10%%: %.1f vs %.1f ms", what, pg,
           mg->ms);
    tap_ok(fabs(ps / ms->ms - 1) <= 0.20, "%s: SmolLM step (out of sample) within 20%%: %.1f vs %.1f ms", what,
           ps, ms->ms);
}

static int same_calib(const cm_calib *a, const cm_calib *b) {
    int ok = a->nrows == b->nrows;
    for (int i = 0; i < ZT_CC_N; i++) {
        if (i == ZT_CC_HOST) continue;
        if (fabs(a->cls[i].eff - b->cls[i].eff) > 1e-5 + 1e-4 * b->cls[i].eff ||
            fabs(a->cls[i].t0_us - b->cls[i].t0_us) > 1e-3 || a->cls[i].rows != b->cls[i].rows) {
            tap_diag("class %s: eff %.6f t0 %.4f rows %d vs eff %.6f t0 %.4f rows %d", zt_count_class_name(i),
                     a->cls[i].eff, a->cls[i].t0_us, a->cls[i].rows, b->cls[i].eff, b->cls[i].t0_us,
                     b->cls[i].rows);
            ok = 0;
        }
    }
    return ok;
}

static void model(void) {
    char p[1024], err[512];
    cm_calib cal;
    if (!tap_ok(cm_load(src("bench/costmodel_h100.txt", p, sizeof p), &cal, err, sizeof err) == 0,
                "the committed calibration loads"))
        tap_diag("%s", err);
    cm_table t;
    const int rt = cm_table_read(src(cal.source, p, sizeof p), &t, err, sizeof err);
    if (!tap_ok(rt == 0, "its source table %s reads", cal.source)) {
        tap_diag("%s", err);
        return;
    }
    int replayed = 0;
    for (int i = 0; i < t.nrows; i++) replayed += t.rows[i].nk > 0;
    tap_ok(replayed == t.nrows && t.nrows == 49, "every one of its %d bench_gpu rows is replayed", t.nrows);
    cm_calib fit;
    cm_defaults(&fit);
    cm_fit(&fit, &t, cal.source);
    tap_ok(same_calib(&fit, &cal), "bench/costmodel --calibrate %s gives the committed constants", cal.source);
    /* the engine steps of the table are not fitted: changing them changes nothing */
    cm_table t2;
    if (cm_table_read(src(cal.source, p, sizeof p), &t2, err, sizeof err) == 0) {
        for (int i = 0; i < t2.nmeasured; i++) t2.measured[i].ms *= 3;
        cm_calib f2;
        cm_defaults(&f2);
        cm_fit(&f2, &t2, cal.source);
        tap_ok(same_calib(&f2, &fit), "the fit does not depend on the recorded engine steps");
        cm_table_free(&t2);
    }

    /* the steps, counted once */
    cm_shape g, s;
    cm_shape_parse("gpt2", &g);
    cm_shape_parse("smollm", &s);
    /* as the recorded runs computed them: the LM head in one chunk, the
     * kernels of then (count.h ZT_COUNT_AS_RECORDED) */
    const cm_run_opts og = {0, 0, ZT_COUNT_AS_RECORDED, 2, g.B * g.T, CM_ATT_ZTRAIN, 0, "", "", "", CM_OFFLOAD_NONE},
                      os = {0, 0, ZT_COUNT_AS_RECORDED, 2, s.B * s.T, CM_ATT_ZTRAIN, 0, "", "", "", CM_OFFLOAD_NONE};
    cm_counts cg, cs;
    zt_status st;
    memset(&st, 0, sizeof st);
    const int r1 = cm_count_step(&g, &og, zt_backend_count(), &cg, &st);
    if (r1) tap_diag("gpt2: %s", st.msg);
    const int r2 = r1 ? r1 : cm_count_step(&s, &os, zt_backend_count(), &cs, &st);
    if (!r1 && r2) tap_diag("smollm: %s", st.msg);
    if (tap_ok(!r1 && !r2, "the GPT-2 and SmolLM steps counted on the counting backend")) {
        /* the GEMMs of a GPT-2 step: 12 layers of 4 forward + 8 backward, the head's 3 */
        tap_ok(launches_of_k(cg.k, cg.nk, "cublasLt gemm bf16") == 12 * 12 + 3 &&
                   launches_of_k(cg.k, cg.nk, "k_round_bf16") == 2 * (12 * 12 + 3) &&
                   launches_of_k(cg.k, cg.nk, "k_ft_fwd") == 12,
               "GPT-2 step as recorded, the head in one chunk: 147 bf16 GEMMs, 294 roundings, 12 flash "
               "forwards");
        /* as recorded: the residual add unfolded (ZT_COUNT_WHATIF_ADD_SPLIT),
         * the counts of ZT_TEST_NO_ADDFOLD=1, 12 k_add, 12 k_add_layernorm_fwd */
        {
            cm_counts cu;
            setenv("ZT_TEST_NO_ADDFOLD", "1", 1);
            const int ru = cm_count_step(&g, &og, zt_backend_count(), &cu, &st);
            unsetenv("ZT_TEST_NO_ADDFOLD");
            if (tap_ok(ru == ZT_OK, "GPT-2 step as recorded counted with ZT_TEST_NO_ADDFOLD=1")) {
                const long ka = launches_of_k(cg.k, cg.nk, "k_add"), kb = launches_of_k(cu.k, cu.nk, "k_add");
                tap_ok(ka == 12 && kb == 12 && cg.tot.launches == cu.tot.launches && cg.tot.bytes == cu.tot.bytes &&
                           launches_of_k(cg.k, cg.nk, "k_add_layernorm_fwd") == 12 &&
                           (ZT_COUNT_AS_RECORDED & ZT_COUNT_WHATIF_ADD_SPLIT) != 0,
                       "the recorded tables are replayed with the residual add unfolded: %ld k_add (%ld with "
                       "ZT_TEST_NO_ADDFOLD=1), %ld launches (%ld)", ka, kb, cg.tot.launches, cu.tot.launches);
                cm_counts_free(&cu);
            }
        }
        /* today: dout rounded once per backward (12 * 4 + 1 fewer); the
         * weights' bf16 storage read as it is (12 * 8 + 2 fewer); the
         * activations ln1, ln2 and the GELU's output kept in bf16, each
         * rounded once (k_to_bf16) instead of by its forward and weight-
         * gradient GEMMs (12 * 6 fewer); the GEMM outputs q|k|v, the
         * attention output and fc's output kept in bf16 (12 * 3 more
         * k_to_bf16), the attention output read so by the projection's
         * forward and weight-gradient GEMMs (12 * 2 fewer roundings), and
         * widened (k_from_bf16) for their fp32 readers: fc's output for
         * the GELU backward, the attention output for the attention
         * backward (12 * 2); the GELU backward reads fc's output in bf16
         * and writes its gradient in bf16 for fc's GEMMs
         * (matmul_dgelu_bwd_o16: no widening of fc's output, 12 roundings
         * fewer); q|k|v, fc's output and the GELU's output
         * written in bf16 by their GEMMs and the GELU (k_gelu_fwd16)
         * themselves, and ln1 and ln2 by their norms (k_layernorm_fwd16,
         * k_add_layernorm_fwd16), and the attention output by the flash
         * kernel (gqa_ext_fwd16o), so no k_to_bf16 is left; the attention
         * reads q|k|v in bf16 as they are (gqa_ext_fwd16 / _bwd16: 12 * 2
         * k_att_tc_round fewer), and its backward the bf16 output
         * (gqa_ext_bwd16o: no widening left beyond the recorded runs'); the
         * residual gradient's bf16 copy written by the LayerNorm backward
         * adding into it, read so by the two projections' backward GEMMs
         * (12 * 2 fewer roundings); the LM
         * head's gradient written in bf16 (k_xent16_fused) and read so by
         * its backward GEMMs (matmul_bwd_head16: its dout rounding, 1,
         * gone); the final norm's output written in bf16 (k_layernorm_fwd16,
         * a 13th) and read so by the head's forward and weight-gradient
         * GEMMs (2 fewer roundings); each block's last residual add folded
         * into the next block's ln1 or the final norm (arch.h addfold: 12
         * k_add_layernorm_fwd16 for 12 k_layernorm_fwd16, no k_add); the
         * head fused in the forward (classifier.h: k_xent16_fused gives the
         * losses, no k_xent16_fwd); the GELU in fc's GEMM
         * (matmul_gelu_fwd_o16: GELU_AUX_BIAS with bf16 D and aux, no
         * k_gelu_fwd16); the projections' outputs in bf16, read so by the
         * residual add in the next norm (k_add_layernorm_fwd16b); the MLP
         * projections' bias gradients summed by the norm above each
         * (ZT_W16_MLPSUM: a k_add a block adds the sum to the gradient) */
        cm_counts cn;
        const cm_run_opts on = {0, 0, 0, 2, g.B * g.T, CM_ATT_ZTRAIN, 0, "", "", "", CM_OFFLOAD_NONE};
        if (tap_ok(cm_count_step(&g, &on, zt_backend_count(), &cn, &st) == ZT_OK,
                   "the GPT-2 step counted with today's kernels")) {
            tap_ok(launches_of_k(cn.k, cn.nk, "cublasLt gemm bf16") == 12 * 12 + 3 &&
                       launches_of_k(cn.k, cn.nk, "k_round_bf16") == 2 * (12 * 12 + 3) - (12 * 4 + 1) -
                                                                        (12 * 8 + 2) - 12 * 6 - 12 * 2 - 1 - 12 * 2 -
                                                                        2 - 12 &&
                       launches_of_k(cn.k, cn.nk, "k_xent16_fwd") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_xent16_fused") == 1 &&
                       launches_of_k(cn.k, cn.nk, "k_xent_fwd") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_xent_fused") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_to_bf16") ==
                           launches_of_k(cg.k, cg.nk, "k_to_bf16") &&
                       launches_of_k(cn.k, cn.nk, "k_from_bf16") ==
                           launches_of_k(cg.k, cg.nk, "k_from_bf16") &&
                       launches_of_k(cn.k, cn.nk, "k_att_tc_round") ==
                           launches_of_k(cg.k, cg.nk, "k_att_tc_round") - 12 * 2 &&
                       launches_of_k(cn.k, cn.nk, "k_gelu_fwd16") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_gelu_fwd16p") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_gelu_fwd") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_layernorm_fwd16") == 1 &&
                       launches_of_k(cn.k, cn.nk, "k_add_layernorm_fwd16") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_add_layernorm_fwd16b") == 12 + 12 &&
                       launches_of_k(cn.k, cn.nk, "k_add") == 12 &&
                       launches_of_k(cn.k, cn.nk, "k_layernorm_fwd") == 0 &&
                       launches_of_k(cn.k, cn.nk, "k_add_layernorm_fwd") == 0,
                   "GPT-2 step, the head in one chunk: %ld roundings (294 - 49 of dout - 98 of weights "
                   "- 96 of activations - the head's bf16 gradient - 24 of gradients - 2 of the head's "
                   "input - 12 of GELU gradients), bf16 logits (k_xent16_fused alone: fused), %ld "
                   "conversions (%ld as recorded), %ld widenings (%ld as recorded + 12 activations), 24 "
                   "q|k|v roundings fewer in the attention, the GELU in fc's bf16 GEMM (no k_gelu_fwd16), 25 bf16 LayerNorms (the final "
                   "one's the head's input; 24 with the residual add before them, its branch in bf16), 12 k_add (the "
                   "MLP projections' bias sums, no residual add)",
                   launches_of_k(cn.k, cn.nk, "k_round_bf16"), launches_of_k(cn.k, cn.nk, "k_to_bf16"),
                   launches_of_k(cg.k, cg.nk, "k_to_bf16"), launches_of_k(cn.k, cn.nk, "k_from_bf16"),
                   launches_of_k(cg.k, cg.nk, "k_from_bf16"));
            cm_counts_free(&cn);
        }
        tap_ok(cg.tot.syncs <= 1 && cs.tot.syncs <= 1 && launches_of_k(cg.k, cg.nk, "k_adamw_multi") == 1 &&
                   launches_of_k(cs.k, cs.nk, "k_adamw_multi") == 1,
               "GPT-2 and SmolLM steps (stage 0): one optimizer launch, %ld and %ld host syncs, %ld and %ld "
               "launches", cg.tot.syncs, cs.tot.syncs, cg.tot.launches, cs.tot.launches);
        /* the default head: chunks of 2668 rows (256 MiB of bf16 logits at V 50304: a training
         * block's bf16 logits, the head trained; classifier.c) over 8192 rows, 4 chunks of 2048;
         * fused in the forward (classifier.h): no chunk recomputes its logits, no k_xent16_fwd
         * (ZT_TEST_NO_HEADFUSE=1: 3 GEMMs and 4 k_xent16_fwd more) */
        cm_counts cd;
        const cm_run_opts od = {0, 0, 0, 2, 0, CM_ATT_ZTRAIN, 0, "", "", "", CM_OFFLOAD_NONE};
        if (tap_ok(cm_count_step(&g, &od, zt_backend_count(), &cd, &st) == ZT_OK,
                   "the GPT-2 step counted with the default chunked head")) {
            tap_ok(launches_of_k(cd.k, cd.nk, "cublasLt gemm bf16") == 12 * 12 + 3 * 4 &&
                       launches_of_k(cd.k, cd.nk, "k_xent16_fused") == 4 &&
                       launches_of_k(cd.k, cd.nk, "k_xent16_fwd") == 0,
                   "GPT-2 step, default head: %ld bf16 GEMMs (144 + 3 per chunk, none recomputed), %ld fused "
                   "xent on bf16 logits (every chunk, in the forward), %ld xent forwards",
                   launches_of_k(cd.k, cd.nk, "cublasLt gemm bf16"),
                   launches_of_k(cd.k, cd.nk, "k_xent16_fused"), launches_of_k(cd.k, cd.nk, "k_xent16_fwd"));
            cm_counts_free(&cd);
        }
        predict(&cal, &t, "7856b57 table (committed calibration)", &cg, &cs);
        cm_table t3;
        if (tap_ok(cm_table_read(src("docs/gpu-runs/2026-11-26-h100-flash/bench.txt", p, sizeof p), &t3, err,
                                 sizeof err) == 0,
                   "the d8da6d9 table reads")) {
            cm_calib c3;
            cm_defaults(&c3);
            cm_fit(&c3, &t3, "docs/gpu-runs/2026-11-26-h100-flash/bench.txt");
            predict(&c3, &t3, "d8da6d9 table (fitted here)", &cg, &cs);
            cm_table_free(&t3);
        }
        cm_counts_free(&cg);
        cm_counts_free(&cs);
    } else if (!r1) {
        cm_counts_free(&cg);
    }
    cm_table_free(&t);
}

/* ------------------------------------------------------------ read once
 * The bf16-output paths are decided once, when the run's model is set up
 * (precision.h zt_out16_of; model.h), not per block: ZT_TEST_NO_O16, _N16
 * and _R16 set only after zt_ctx_create change nothing (the same calls of
 * the bf16-output entries, norms and RoPE, the same k_to_bf16 launches,
 * bitwise the same losses); set during it they turn the paths off (the
 * checks above). */
static void bf16_hooks_once(void) {
    static const w16_kind kind = {32, ", and 4 with ZT_TEST_NO_O16/_N16/_R16 set after the setup",
                                  NULL, NULL};
    w16_pair p;
    cm_shape_parse("llama:2,4,2,32,48,64,2,16", &p.s);
    if (!w16_pair_run(&p, &kind, 0, NULL, 0, "read once", "llama")) return;
    tap_ok(p.ma.o16 > 0 && p.ma.n16 > 0 && p.ma.r16 > 0 && p.mb.o16 == p.ma.o16 &&
               p.mb.n16 == p.ma.n16 && p.mb.r16 == p.ma.r16 && p.mb.to16 == p.ma.to16 &&
               !memcmp(p.a, p.b, sizeof p.a),
           "ZT_TEST_NO_O16/_N16/_R16 set after the setup: read once, at the setup (bf16-output %ld, "
           "norm %ld, RoPE %ld calls, %ld k_to_bf16; set after it: %ld, %ld, %ld, %ld; losses bitwise)",
           p.ma.o16, p.ma.n16, p.ma.r16, p.ma.to16, p.mb.o16, p.mb.n16, p.mb.r16, p.mb.to16);
}

/* ------------------------------------------------------------ cuDNN attention */

/* the (query, key) pairs a causal head computes, within a window (0: none),
 * counted row by row */
static double seen_pairs(int T, int window) {
    double n = 0;
    for (int t = 0; t < T; t++) n += window > 0 && window < T && t + 1 > window ? window : t + 1;
    return n;
}

/* kernels/count.c's cuDNN path against kernels/cuda/cuda_sdpa.cu: the
 * launches of zt_cuda_sdpa_fwd / _bwd (q|k|v, out and dout rounded into
 * bf16, dQ_accum zeroed, one graph execution, the result widened), their
 * bytes from the buffers cuda_sdpa.cu hands cuDNN, the useful causal FLOPs
 * (4 hs forward, 10 hs backward per seen pair and q head); and the rule's
 * fallbacks to ztrain's kernels */
static void cudnn_formulas(void) {
    float *x = FAKE(float, 1), *y = FAKE(float, 2), *z = FAKE(float, 3), *lse = FAKE(float, 4);
    float *mis = (float *)((uintptr_t)FAKE(float, 5) + 4);
    uint16_t *q16 = FAKE(uint16_t, 6), *h16 = FAKE(uint16_t, 7);
    uint16_t *q16m = (uint16_t *)((uintptr_t)FAKE(uint16_t, 8) + 8), *h16m = (uint16_t *)((uintptr_t)FAKE(uint16_t, 9) + 8);
    const double f = 4, h = 2;
    K = zt_backend_count();   /* the bare table again (the tests before counted over cpu-strict) */
    static const struct { int B, T, NH, NKV, hs, window; } cs[] = {
        {2, 40, 4, 2, 16, 0}, {2, 40, 4, 4, 24, 0}, {1, 70, 6, 2, 32, 9}};
    zt_count_set_cudnn(1);
    K->set_matmul_precision(ZT_MATMUL_BF16);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const int B = cs[i].B, T = cs[i].T, NH = cs[i].NH, NKV = cs[i].NKV, hs = cs[i].hs, W = cs[i].window;
        const double BT = (double)B * T, R = (double)(NH + 2 * NKV) * hs, AD = (double)NH * hs;
        const double st = (double)B * NH * T, pairs = seen_pairs(T, W) * B * NH;
        char what[96];
        snprintf(what, sizeof what, "cuDNN B=%d T=%d NH=%d NKV=%d hs=%d window %d", B, T, NH, NKV, hs, W);
        zt_attn_opts o = {1.0f / sqrtf((float)hs), 0.0f, W};
        zt_count_reset();
        K->gqa_ext_fwd(z, lse, x, B, T, NH, NKV, hs, &o);
        check_kernel(what, "k_sdpa_round", 1, 0, BT * R * (f + h));
        check_kernel(what, "cudnnBackendExecute (SDPA forward)", 1, pairs * 4 * hs, BT * R * h + BT * AD * h + st * f);
        check_kernel(what, "k_sdpa_widen", 1, 0, BT * AD * (h + f));
        tap_ok(tot().launches == 3 && launches_of("k_ft_fwd", NULL, NULL) == 0, "%s: forward, 3 launches", what);
        zt_count_reset();
        K->gqa_ext_bwd(y, z, x, z, lse, B, T, NH, NKV, hs, &o);
        double fr, br;
        const long nr = launches_of("k_sdpa_round", &fr, &br);
        tap_ok(nr == 3 && fr == 0 && br == (BT * R + 2 * BT * AD) * (f + h),
               "%s: backward rounds q|k|v, out and dout (3 k_sdpa_round, %.0f bytes)", what, br);
        check_kernel(what, "cudaMemsetAsync", 1, 0, BT * AD * f);
        check_kernel(what, "cudnnBackendExecute (SDPA backward)", 1, pairs * 10 * hs,
                     BT * R * h + 2 * BT * AD * h + st * f + 2 * st * f + 2 * BT * AD * f + BT * R * h);
        check_kernel(what, "k_sdpa_widen", 1, 0, BT * R * (h + f));
        tap_ok(tot().launches == 6 && launches_of("k_att_rowdot", NULL, NULL) == 0,
               "%s: backward, 6 launches, no k_att_rowdot", what);
        /* q|k|v in bf16 (gqa_ext_fwd16 / _bwd16): cuDNN's Q, K, V as they are (no k_att_widen, no
         * k_sdpa_round of q|k|v); O widened into out, out rounded for the backward */
        zt_count_reset();
        K->gqa_ext_fwd16(z, lse, q16, y, B, T, NH, NKV, hs, &o);
        check_kernel(what, "cudnnBackendExecute (SDPA forward)", 1, pairs * 4 * hs, BT * R * h + BT * AD * h + st * f);
        check_kernel(what, "k_sdpa_widen", 1, 0, BT * AD * (h + f));
        tap_ok(tot().launches == 2 && launches_of("k_from_bf16", NULL, NULL) == 0 &&
                   launches_of("k_sdpa_round", NULL, NULL) == 0,
               "%s: bf16 q|k|v forward: 2 launches (the graph, O widened)", what);
        zt_count_reset();
        K->gqa_ext_bwd16(y, z, q16, x, z, lse, B, T, NH, NKV, hs, &o);
        const long nr16 = launches_of("k_sdpa_round", &fr, &br);
        tap_ok(nr16 == 2 && br == 2 * BT * AD * (f + h) && tot().launches == 5 &&
                   launches_of("k_from_bf16", NULL, NULL) == 0 &&
                   launches_of("cudnnBackendExecute (SDPA backward)", NULL, NULL) == 1 &&
                   launches_of("cudaMemsetAsync", NULL, NULL) == 1 && launches_of("k_sdpa_widen", NULL, NULL) == 1,
               "%s: bf16 q|k|v backward: out and dout rounded, memset, the graph, dqkv widened (5 launches)", what);
        /* and the output in bf16 (gqa_ext_fwd16o / _bwd16o): O stored in out16, read there */
        zt_count_reset();
        K->gqa_ext_fwd16o(h16, z, lse, q16, y, B, T, NH, NKV, hs, &o);
        tap_ok(tot().launches == 1 && launches_of("cudnnBackendExecute (SDPA forward)", NULL, NULL) == 1 &&
                   tot().bytes == BT * R * h + BT * AD * h + st * f,
               "%s: bf16 q|k|v and output forward: the graph alone (1 launch, %.0f bytes)", what, tot().bytes);
        zt_count_reset();
        K->gqa_ext_bwd16o(y, z, q16, x, h16, z, lse, B, T, NH, NKV, hs, &o);
        tap_ok(tot().launches == 4 && launches_of("k_sdpa_round", &fr, &br) == 1 && br == BT * AD * (f + h) &&
                   launches_of("cudaMemsetAsync", NULL, NULL) == 1 && launches_of("k_sdpa_widen", NULL, NULL) == 1 &&
                   launches_of("cudnnBackendExecute (SDPA backward)", NULL, NULL) == 1,
               "%s: bf16 q|k|v and output backward: dout rounded, memset, the graph, dqkv widened (4 launches)",
               what);
        /* not 16-byte aligned: q|k|v and out16 copied for cuDNN (cudaMemcpyAsync D2D) */
        zt_count_reset();
        K->gqa_ext_fwd16o(h16m, z, lse, q16m, y, B, T, NH, NKV, hs, &o);
        const long nc = launches_of("cudaMemcpyAsync D2D", &fr, &br);
        tap_ok(tot().launches == 3 && nc == 2 && br == 2 * (BT * R + BT * AD) * h,
               "%s: q|k|v and out16 8 bytes past 16-byte alignment: both copied (2 cudaMemcpyAsync, %.0f bytes)",
               what, br);
        zt_count_reset();
        K->gqa_ext_bwd16o(y, z, q16m, x, h16m, z, lse, B, T, NH, NKV, hs, &o);
        tap_ok(tot().launches == 6 && launches_of("cudaMemcpyAsync D2D", &fr, &br) == 2 &&
                   br == 2 * (BT * R + BT * AD) * h,
               "%s: the backward on them: both copied, then the 4 launches", what);
        /* the gradient in bf16 (gqa_ext_bwd16d): cuDNN's dQ|dK|dV written
         * into the caller's dqkv16, not widened (1); dqkv16 not 16-byte
         * aligned: gqa_ext_bwd16o's launches, widened (0) */
        uint16_t *d16 = FAKE(uint16_t, 10), *d16m = (uint16_t *)((uintptr_t)FAKE(uint16_t, 11) + 8);
        zt_count_reset();
        const int r1 = K->gqa_ext_bwd16d(y, d16, z, q16, x, h16, z, lse, B, T, NH, NKV, hs, &o);
        tap_ok(r1 == 1 && tot().launches == 3 && launches_of("k_sdpa_widen", NULL, NULL) == 0 &&
                   launches_of("k_sdpa_round", &fr, &br) == 1 && br == BT * AD * (f + h) &&
                   launches_of("cudaMemsetAsync", NULL, NULL) == 1,
               "%s: bf16 gradient backward: dout rounded, memset, the graph, no widening (3 launches, 1)", what);
        check_kernel(what, "cudnnBackendExecute (SDPA backward)", 1, pairs * 10 * hs,
                     BT * R * h + 2 * BT * AD * h + st * f + 2 * st * f + 2 * BT * AD * f + BT * R * h);
        zt_count_reset();
        const int r0 = K->gqa_ext_bwd16d(y, d16m, z, q16, x, h16, z, lse, B, T, NH, NKV, hs, &o);
        tap_ok(r0 == 0 && tot().launches == 4 && launches_of("k_sdpa_widen", &fr, &br) == 1 && br == BT * R * (h + f),
               "%s: dqkv16 8 bytes past 16-byte alignment: widened into dqkv (4 launches, 0)", what);
    }
    /* the q|k|v GEMM on that gradient: matmul_bwd_d16 with dout NULL, the
     * bias gradient from dout16 (k_colsum16_part reads it in bf16) */
    {
        const int N = 80, C = 64, OC = 192;
        const double P = 3;   /* column-sum chunks of 27 rows (at most 32 a chunk) */
        zt_count_reset();
        K->matmul_bwd_d16(x, y, z, NULL, FAKE(uint16_t, 10), NULL, q16, NULL, h16, N, C, OC);
        check_kernel("q|k|v GEMM on the bf16 gradient", "k_colsum16_part", 1, (double)N * OC,
                     (double)N * OC * h + P * OC * 8);
        tap_ok(launches_of("k_colsum_part", NULL, NULL) == 0 && launches_of("k_colsum_final", NULL, NULL) == 1 &&
                   launches_of("k_round_bf16", NULL, NULL) == 0,
               "q|k|v GEMM on the bf16 gradient: no k_colsum_part, no k_round_bf16 (%ld launches)", tot().launches);
    }
    /* the rule: each condition alone sends the call to ztrain's kernels */
    const int B = 2, T = 40, NH = 4, NKV = 2, hs = 16;
    zt_attn_opts o = {0.25f, 0.0f, 0}, capped = {0.25f, 30.0f, 0};
    struct { const char *why; int cudnn, mode, hs; const zt_attn_opts *o; float *lse; const char *det; int want; } r[] = {
        {"the rule's case", 1, ZT_MATMUL_BF16, hs, &o, lse, NULL, 1},
        {"ZT_CUDA_DETERMINISTIC=0", 1, ZT_MATMUL_BF16, hs, &o, lse, "0", 1},
        {"a build without cuDNN", 0, ZT_MATMUL_BF16, hs, &o, lse, NULL, 0},
        {"fp32 matmul mode", 1, ZT_MATMUL_FP32, hs, &o, lse, NULL, 0},
        {"a soft-cap", 1, ZT_MATMUL_BF16, hs, &capped, lse, NULL, 0},
        {"head size 12 (not a multiple of 8)", 1, ZT_MATMUL_BF16, 12, &o, lse, NULL, 0},
        {"lse not 16-byte aligned", 1, ZT_MATMUL_BF16, hs, &o, mis, NULL, 0},
        {"ZT_CUDA_DETERMINISTIC=1", 1, ZT_MATMUL_BF16, hs, &o, lse, "1", 0},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        zt_count_set_cudnn(r[i].cudnn);
        K->set_matmul_precision(r[i].mode);
        if (r[i].det) setenv("ZT_CUDA_DETERMINISTIC", r[i].det, 1);
        zt_count_reset();
        K->gqa_ext_fwd(z, r[i].lse, x, B, T, NH, NKV, r[i].hs, r[i].o);
        const long fw = launches_of("cudnnBackendExecute (SDPA forward)", NULL, NULL);
        const long ours = launches_of("k_ft_fwd", NULL, NULL) + launches_of("k_att_fwd", NULL, NULL) +
                          launches_of("cublas gemm bf16 batched (attention)", NULL, NULL);
        zt_count_reset();
        K->gqa_ext_bwd(y, z, x, z, r[i].lse, B, T, NH, NKV, r[i].hs, r[i].o);
        const long bw = launches_of("cudnnBackendExecute (SDPA backward)", NULL, NULL);
        const long rd = launches_of("k_att_rowdot", NULL, NULL);
        if (r[i].det) unsetenv("ZT_CUDA_DETERMINISTIC");
        tap_ok(r[i].want ? fw == 1 && bw == 1 && ours == 0 && rd == 0 : fw == 0 && bw == 0 && ours > 0 && rd == 1,
               "cuDNN's rule: %s: %s (forward %ld, backward %ld graph executions; %ld of ztrain's forward "
               "launches)", r[i].why, r[i].want ? "cuDNN" : "ztrain's kernels", fw, bw, ours);
    }
    zt_count_set_cudnn(0);
    K->set_matmul_precision(ZT_MATMUL_FP32);
    zt_count_reset();
}

/* the cost model of a cuDNN step: the committed calibration has no cuDNN
 * rows, so its classes are uncalibrated (no efficiency from another class)
 * and a step leaves their launches out; a bench_gpu table with cuDNN rows
 * (synthetic here: the committed table plus rows whose times the model
 * gives at a known efficiency) fits them back, the other classes as they
 * were */
static void cudnn_model(void) {
    char p[1024], err[512];
    cm_calib cal;
    if (!tap_ok(cm_load(src("bench/costmodel_h100.txt", p, sizeof p), &cal, err, sizeof err) == 0,
                "cuDNN model: the committed calibration loads"))
        return;
    tap_ok(cm_uncalibrated(&cal, ZT_CC_CUDNN_FWD) && cm_uncalibrated(&cal, ZT_CC_CUDNN_BWD) &&
               !cm_uncalibrated(&cal, ZT_CC_FLASH_FWD) &&
               cm_kernel_s(&cal, ZT_CC_CUDNN_FWD, 1e12, 1e9) == 0.0,
           "the committed calibration: cudnn_fwd and cudnn_bwd uncalibrated (no row timed them), flash_fwd "
           "fitted");
    /* a GPT-2-like step with cuDNN attention: its launches, and the step without them */
    cm_shape g;
    cm_shape_parse("gpt2:2,4,64,512,2,96", &g);
    const cm_run_opts oc = {0, 0, 0, 1, 0, CM_ATT_CUDNN, 0, "", "", "", CM_OFFLOAD_NONE},
                      oz = {0, 0, 0, 1, 0, CM_ATT_ZTRAIN, 0, "", "", "", CM_OFFLOAD_NONE};
    cm_counts a, b;
    zt_status st;
    memset(&st, 0, sizeof st);
    if (!tap_ok(cm_count_step(&g, &oc, zt_backend_count(), &a, &st) == ZT_OK, "a tiny GPT-2 step counted with cuDNN"))
        return;
    if (!tap_ok(cm_count_step(&g, &oz, zt_backend_count(), &b, &st) == ZT_OK, "and with ztrain's kernels")) {
        cm_counts_free(&a);
        return;
    }
    double rest = 0, per[ZT_CC_N];
    for (size_t i = 0; i < a.nk; i++)
        if (a.k[i].cls != ZT_CC_CUDNN_FWD && a.k[i].cls != ZT_CC_CUDNN_BWD)
            rest += a.k[i].launches * cm_kernel_s(&cal, a.k[i].cls, a.k[i].flops, a.k[i].bytes);
    rest += a.tot.syncs * cal.sync_us * 1e-6;
    const double sa = cm_step_s(&cal, a.k, a.nk, &a.tot, per);
    tap_ok(launches_of_k(a.k, a.nk, "cudnnBackendExecute (SDPA forward)") == 2 &&
               launches_of_k(a.k, a.nk, "cudnnBackendExecute (SDPA backward)") == 2 &&
               launches_of_k(a.k, a.nk, "k_ft_fwd") == 0 && launches_of_k(b.k, b.nk, "k_ft_fwd") == 2 &&
               launches_of_k(b.k, b.nk, "cudnnBackendExecute (SDPA forward)") == 0 &&
               zt_count_cudnn() == 0,
           "2 layers: 2 cuDNN forwards and backwards (no k_ft_*); with ztrain's kernels 2 k_ft_fwd; the "
           "counting backend's setting restored");
    tap_ok(sa == rest && per[ZT_CC_CUDNN_FWD] == 0 && per[ZT_CC_CUDNN_BWD] == 0,
           "the step with uncalibrated cuDNN classes: the sum over the other launches (%.6f ms), cuDNN's left out",
           sa * 1e3);
    /* the attention backward's bf16 gradient (gqa_ext_bwd16d): no k_sdpa_widen in the step, the q|k|v
     * bias gradient from it (k_colsum16_part) a block; ZT_TEST_NO_AB16=1: widened, as before */
    cm_counts c;
    setenv("ZT_TEST_NO_AB16", "1", 1);
    const int rc_c = cm_count_step(&g, &oc, zt_backend_count(), &c, &st);
    unsetenv("ZT_TEST_NO_AB16");
    if (tap_ok(rc_c == ZT_OK, "and with cuDNN, ZT_TEST_NO_AB16=1")) {
        tap_ok(launches_of_k(a.k, a.nk, "k_sdpa_widen") == 0 && launches_of_k(a.k, a.nk, "k_colsum16_part") == 2 &&
                   launches_of_k(c.k, c.nk, "k_sdpa_widen") == 2 && launches_of_k(c.k, c.nk, "k_colsum16_part") == 0 &&
                   a.tot.launches + 2 * 2 == c.tot.launches && a.tot.bytes < c.tot.bytes,
               "cuDNN step: dq|dk|dv not widened, the q|k|v GEMM reads them (2 k_colsum16_part, %ld launches); "
               "ZT_TEST_NO_AB16=1: 2 k_sdpa_widen, %ld launches", a.tot.launches, c.tot.launches);
        cm_counts_free(&c);
    }
    /* Llama without q/k norms: the bf16 gradient through RoPE's backward in bf16 (rope_bwd16) into the
     * q|k|v GEMM: no k_sdpa_widen, no k_rope and no k_round_bf16 of the GEMM's dout a block, a
     * k_rope_bwd16 (no bias: no column sums); ZT_TEST_NO_RB16=1: widened, rotated in fp32, rounded */
    {
        cm_shape ls;
        cm_shape_parse("llama:2,4,2,64,96,512,2,96", &ls);
        cm_counts la, lb;
        const int r1 = cm_count_step(&ls, &oc, zt_backend_count(), &la, &st);
        setenv("ZT_TEST_NO_RB16", "1", 1);
        const int r2 = r1 ? r1 : cm_count_step(&ls, &oc, zt_backend_count(), &lb, &st);
        unsetenv("ZT_TEST_NO_RB16");
        if (tap_ok(!r1 && !r2, "a tiny Llama step counted with cuDNN, and with ZT_TEST_NO_RB16=1")) {
            const long ra = launches_of_k(la.k, la.nk, "k_round_bf16"), rb = launches_of_k(lb.k, lb.nk, "k_round_bf16");
            tap_ok(launches_of_k(la.k, la.nk, "k_sdpa_widen") == 0 && launches_of_k(la.k, la.nk, "k_rope") == 0 &&
                       launches_of_k(la.k, la.nk, "k_rope_bwd16") == 2 &&
                       launches_of_k(la.k, la.nk, "k_rope_colsum16_part") == 0 &&
                       launches_of_k(lb.k, lb.nk, "k_sdpa_widen") == 2 && launches_of_k(lb.k, lb.nk, "k_rope") == 2 &&
                       launches_of_k(lb.k, lb.nk, "k_rope_bwd16") == 0 && ra + 2 == rb &&
                       la.tot.launches + 2 * 2 == lb.tot.launches && la.tot.bytes < lb.tot.bytes,
                   "cuDNN Llama step: dq|dk|dv not widened, rotated back in bf16 (2 k_rope_bwd16, no k_rope), the "
                   "q|k|v GEMM reads them (%ld k_round_bf16, %ld launches); ZT_TEST_NO_RB16=1: 2 k_sdpa_widen, "
                   "2 k_rope, %ld k_round_bf16, %ld launches",
                   ra, la.tot.launches, rb, lb.tot.launches);
        }
        if (!r1) cm_counts_free(&la);
        if (!r1 && !r2) cm_counts_free(&lb);
    }
    /* the attention output's gradient in bf16 (do16): per block one
     * matmul_bwd_o16 for matmul_bwd_d16 and gqa_ext_bwd16do for
     * gqa_ext_bwd16d, no k_sdpa_round of the fp32 dout (2 fewer), the same
     * GEMM launches; ZT_TEST_NO_DO16=1: rounded, as before.  Llama (GQA) too,
     * its q|k|v gradient in bf16 through rope_bwd16 either way (rb16).
     * (Here and in the LoRA case below ZT_TEST_NO_DOUT16N=1: q|k|v's and
     * gate|up's input gradients in fp32, no matmul_bwd_o16 calls of theirs;
     * bf16_dout16n counts those.  And ZT_TEST_NO_LBRANCH16=1: o's adapters'
     * delta in fp32, not a matmul_bwd_o16 call a block; lora_branch16.) */
    setenv("ZT_TEST_NO_DOUT16N", "1", 1);
    setenv("ZT_TEST_NO_GPTN16", "1", 1);   /* (GPT-2's: fc's and q|k|v's, gpt_norm16) */
    setenv("ZT_TEST_NO_DH16", "1", 1);   /* (and down's fp32 dh: no matmul_bwd_o16 of its) */
    setenv("ZT_TEST_NO_LBRANCH16", "1", 1);
    static const char *const do_shapes[] = {"gpt2:2,4,64,512,2,96", "llama:2,4,2,64,96,512,2,96"};
    for (size_t i = 0; i < sizeof do_shapes / sizeof do_shapes[0]; i++) {
        cm_shape gs;
        cm_counts d, e;
        cm_shape_parse(do_shapes[i], &gs);
        const int rc_d = cm_count_step(&gs, &oc, zt_backend_count(), &d, &st);
        const long calls_d = rc_d == ZT_OK ? d.tot.calls[ZT_CE_matmul_bwd_o16] : -1;
        const long att_d = rc_d == ZT_OK ? d.tot.calls[ZT_CE_gqa_ext_bwd16do] : -1;
        setenv("ZT_TEST_NO_DO16", "1", 1);
        const int rc_e = cm_count_step(&gs, &oc, zt_backend_count(), &e, &st);
        unsetenv("ZT_TEST_NO_DO16");
        const long calls_e = rc_e == ZT_OK ? e.tot.calls[ZT_CE_matmul_bwd_o16] : -1;
        if (tap_ok(rc_d == ZT_OK && rc_e == ZT_OK, "%s: a cuDNN step counted with and without ZT_TEST_NO_DO16=1",
                   do_shapes[i])) {
            tap_ok(calls_d == 2 && att_d == 2 && calls_e == 0 && launches_of_k(d.k, d.nk, "k_sdpa_round") == 0 &&
                       launches_of_k(e.k, e.nk, "k_sdpa_round") == 2 &&
                       launches_of_k(d.k, d.nk, "cublasLt gemm bf16") ==
                           launches_of_k(e.k, e.nk, "cublasLt gemm bf16") &&
                       d.tot.launches + 2 == e.tot.launches && d.tot.bytes < e.tot.bytes,
                   "%s cuDNN step: %ld matmul_bwd_o16 and %ld gqa_ext_bwd16do calls (2 each), no k_sdpa_round "
                   "(%ld), %ld launches; ZT_TEST_NO_DO16=1: %ld matmul_bwd_o16, %ld k_sdpa_round, %ld launches",
                   do_shapes[i], calls_d, att_d, launches_of_k(d.k, d.nk, "k_sdpa_round"), d.tot.launches,
                   calls_e, launches_of_k(e.k, e.nk, "k_sdpa_round"), e.tot.launches);
        }
        if (rc_d == ZT_OK) cm_counts_free(&d);
        if (rc_e == ZT_OK) cm_counts_free(&e);
    }
    /* LoRA: Llama's o projection without adapters (q_proj,v_proj) takes do16
     * as without LoRA (arch.h zt_do16_of): the same per block against
     * ZT_TEST_NO_LORAPATH=1; with o_proj's adapters (q_proj,v_proj,o_proj)
     * neither run takes it (ZT_TEST_NO_LO16=1 here: their bf16 dO below) */
    static const struct { const char *targets; int on; } lt[] = {{"q_proj,v_proj", 1},
                                                                  {"q_proj,v_proj,o_proj", 0}};
    for (size_t i = 0; i < sizeof lt / sizeof lt[0]; i++) {
        cm_shape gs;
        cm_counts d, e;
        cm_run_opts ol = oc;
        ol.lora_r = 4;
        snprintf(ol.lora_targets, sizeof ol.lora_targets, "%s", lt[i].targets);
        cm_shape_parse(do_shapes[1], &gs);
        setenv("ZT_TEST_NO_LO16", "1", 1);
        const int rc_d = cm_count_step(&gs, &ol, zt_backend_count(), &d, &st);
        setenv("ZT_TEST_NO_LORAPATH", "1", 1);
        const int rc_e = cm_count_step(&gs, &ol, zt_backend_count(), &e, &st);
        unsetenv("ZT_TEST_NO_LORAPATH");
        unsetenv("ZT_TEST_NO_LO16");
        if (tap_ok(rc_d == ZT_OK && rc_e == ZT_OK,
                   "%s LoRA %s: a cuDNN step counted with and without ZT_TEST_NO_LORAPATH=1", do_shapes[1],
                   lt[i].targets)) {
            const long n = lt[i].on ? 2 : 0;
            const long od = d.tot.calls[ZT_CE_matmul_bwd_o16], oe = e.tot.calls[ZT_CE_matmul_bwd_o16];
            const long ad = d.tot.calls[ZT_CE_gqa_ext_bwd16do], ae = e.tot.calls[ZT_CE_gqa_ext_bwd16do];
            const long rd = launches_of_k(d.k, d.nk, "k_sdpa_round"), re = launches_of_k(e.k, e.nk, "k_sdpa_round");
            tap_ok(od == n && ad == n && oe == 0 && ae == 0 && re - rd == n &&
                       launches_of_k(d.k, d.nk, "cublasLt gemm bf16") ==
                           launches_of_k(e.k, e.nk, "cublasLt gemm bf16") &&
                       d.tot.launches + n == e.tot.launches && (n ? d.tot.bytes < e.tot.bytes : d.tot.bytes == e.tot.bytes),
                   "%s LoRA %s cuDNN step: %ld matmul_bwd_o16 and %ld gqa_ext_bwd16do calls (%ld each), %ld "
                   "k_sdpa_round, %ld launches; ZT_TEST_NO_LORAPATH=1: %ld, %ld, %ld k_sdpa_round, %ld launches",
                   do_shapes[1], lt[i].targets, od, ad, n, rd, d.tot.launches, oe, ae, re, e.tot.launches);
        }
        if (rc_d == ZT_OK) cm_counts_free(&d);
        if (rc_e == ZT_OK) cm_counts_free(&e);
    }
    /* LoRA WITH adapters on o (q_proj,v_proj,o_proj; all-linear): o's bf16
     * dO (config.h ZT_W16_LO16, arch.h zt_do16_of): per block the
     * adapters' share by one matmul_bwd_o16 (its dh rounded by k_to_bf16,
     * not the fp32 w_dinp GEMM's k_round_bf16), the base by
     * matmul_bwd_acc16 (not matmul_bwd_acc), gqa_ext_bwd16do for
     * gqa_ext_bwd16d: no k_sdpa_round of the fp32 dO (one launch fewer a
     * block), the same GEMM launches, and 12 N AD bytes fewer a block (the
     * share written in bf16 2 N AD, the base's beta 1 read and write 4 N
     * AD, k_sdpa_round's 6 N AD; lora_o16), against ZT_TEST_NO_LO16=1 */
    static const char *const lo_t[] = {"q_proj,v_proj,o_proj", "all-linear"};
    for (size_t i = 0; i < sizeof lo_t / sizeof lo_t[0]; i++) {
        cm_shape gs;
        cm_counts d, e;
        cm_run_opts ol = oc;
        ol.lora_r = 4;
        snprintf(ol.lora_targets, sizeof ol.lora_targets, "%s", lo_t[i]);
        cm_shape_parse(do_shapes[1], &gs);
        const int rc_d = cm_count_step(&gs, &ol, zt_backend_count(), &d, &st);
        setenv("ZT_TEST_NO_LO16", "1", 1);
        const int rc_e = cm_count_step(&gs, &ol, zt_backend_count(), &e, &st);
        unsetenv("ZT_TEST_NO_LO16");
        if (tap_ok(rc_d == ZT_OK && rc_e == ZT_OK,
                   "%s LoRA %s: a cuDNN step counted with and without ZT_TEST_NO_LO16=1", do_shapes[1],
                   lo_t[i])) {
            const long n = gs.L;
            const double fewer = 12.0 * gs.B * gs.T * gs.C * (double)n;   /* (AD = C here) */
            const long od = d.tot.calls[ZT_CE_matmul_bwd_o16], oe = e.tot.calls[ZT_CE_matmul_bwd_o16];
            const long ad = d.tot.calls[ZT_CE_gqa_ext_bwd16do], ae = e.tot.calls[ZT_CE_gqa_ext_bwd16do];
            const long bd = d.tot.calls[ZT_CE_matmul_bwd_acc16], be_ = e.tot.calls[ZT_CE_matmul_bwd_acc16];
            const long rd = launches_of_k(d.k, d.nk, "k_sdpa_round"), re = launches_of_k(e.k, e.nk, "k_sdpa_round");
            tap_ok(od - oe == n && ad == n && ae == 0 && bd - be_ == n &&
                       e.tot.calls[ZT_CE_matmul_bwd_acc] - d.tot.calls[ZT_CE_matmul_bwd_acc] == n &&
                       re - rd == n &&
                       launches_of_k(d.k, d.nk, "cublasLt gemm bf16") ==
                           launches_of_k(e.k, e.nk, "cublasLt gemm bf16") &&
                       d.tot.launches + n == e.tot.launches && e.tot.bytes - d.tot.bytes == fewer,
                   "%s LoRA %s cuDNN step: %ld matmul_bwd_o16 (%ld without), %ld gqa_ext_bwd16do (%ld "
                   "without), %ld matmul_bwd_acc16 (%ld without), %ld k_sdpa_round (%ld without), %ld "
                   "launches (%ld without), %.0f bytes (%.0f without, %.0f fewer expected)",
                   do_shapes[1], lo_t[i], od, oe, ad, ae, bd, be_, rd, re, d.tot.launches,
                   e.tot.launches, d.tot.bytes, e.tot.bytes, fewer);
        }
        if (rc_d == ZT_OK) cm_counts_free(&d);
        if (rc_e == ZT_OK) cm_counts_free(&e);
    }
    unsetenv("ZT_TEST_NO_DOUT16N");
    unsetenv("ZT_TEST_NO_GPTN16");
    unsetenv("ZT_TEST_NO_DH16");
    unsetenv("ZT_TEST_NO_LBRANCH16");
    cm_counts_free(&a);
    cm_counts_free(&b);

    /* a synthetic table: the committed source plus cuDNN and ztrain rows at
     * two attention shapes, timed by the committed model with cuDNN at a
     * known efficiency (6 decimals: the fit's resolution, not the rows') */
    const double eff_fwd = 0.41, eff_bwd = 0.29;
    cm_calib truth = cal;
    truth.cls[ZT_CC_CUDNN_FWD] = (cm_class){eff_fwd, cal.cls[ZT_CC_STREAM].t0_us, 0, 0};
    truth.cls[ZT_CC_CUDNN_BWD] = (cm_class){eff_bwd, cal.cls[ZT_CC_STREAM].t0_us, 0, 0};
    char tp[64];
    snprintf(tp, sizeof tp, "/tmp/zt_test_count_cudnn_XXXXXX");
    const int fd = mkstemp(tp);
    FILE *in = fopen(src(cal.source, p, sizeof p), "r"), *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!tap_ok(in && out, "the synthetic table %s written", tp)) {
        if (in) fclose(in);
        if (out) fclose(out);
        return;
    }
    static const struct { int B, T, NH, NKV, hs; } sh[] = {{8, 1024, 12, 12, 64}, {8, 2048, 9, 3, 64}};
    char line[1024];
    int rows = 0;
    while (fgets(line, sizeof line, in)) {
        fputs(line, out);
        if (strncmp(line, "kernels (", 9)) continue;
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
            for (int bwd = 0; bwd < 2; bwd++)
                for (int cu = 0; cu < 2; cu++) {
                    zt_count_set_cudnn(cu);
                    K->set_matmul_precision(ZT_MATMUL_BF16);
                    zt_count_reset();
                    float *q = FAKE(float, 1), *o = FAKE(float, 3), *l = FAKE(float, 4);
                    if (bwd) K->gqa_bwd(FAKE(float, 2), q, q, o, l, sh[i].B, sh[i].T, sh[i].NH, sh[i].NKV, sh[i].hs);
                    else K->gqa_fwd(o, l, q, sh[i].B, sh[i].T, sh[i].NH, sh[i].NKV, sh[i].hs);
                    const zt_count_kernel *k;
                    const size_t nk = zt_count_kernels(&k);
                    const zt_count_totals t = tot();
                    fprintf(out, "  gqa_%s bf16 B=%d T=%d NH=%d NKV=%d hs=%d (%s) %12.6f ms\n", bwd ? "bwd" : "fwd",
                            sh[i].B, sh[i].T, sh[i].NH, sh[i].NKV, sh[i].hs, cu ? "cuDNN" : "ztrain's kernels",
                            1e3 * cm_step_s(&truth, k, nk, &t, NULL));
                    rows++;
                }
    }
    fclose(in);
    fclose(out);
    zt_count_set_cudnn(0);
    K->set_matmul_precision(ZT_MATMUL_FP32);
    cm_table t;
    if (tap_ok(cm_table_read(tp, &t, err, sizeof err) == 0, "the synthetic table reads")) {
        int replayed = 0;
        for (int i = 0; i < t.nrows; i++) replayed += t.rows[i].nk > 0;
        tap_ok(t.nrows == 49 + rows && replayed == t.nrows, "its %d rows replayed (49 + %d attention rows)",
               t.nrows, rows);
        cm_calib fit;
        cm_defaults(&fit);
        cm_fit(&fit, &t, cal.source);
        const cm_class *ff = &fit.cls[ZT_CC_CUDNN_FWD], *fb = &fit.cls[ZT_CC_CUDNN_BWD];
        tap_ok(ff->rows == 2 && fb->rows == 2 && fabs(ff->eff / eff_fwd - 1) < 1e-4 &&
                   fabs(fb->eff / eff_bwd - 1) < 1e-4,
               "the fit recovers cudnn_fwd %.5f (%g) and cudnn_bwd %.5f (%g) from 2 rows each", ff->eff, eff_fwd,
               fb->eff, eff_bwd);
        int same = 1;
        for (int c = 0; c < ZT_CC_N; c++) {
            if (c == ZT_CC_HOST || c == ZT_CC_CUDNN_FWD || c == ZT_CC_CUDNN_BWD || c == ZT_CC_FLASH_FWD ||
                c == ZT_CC_FLASH_BWD)
                continue;
            if (fabs(fit.cls[c].eff - cal.cls[c].eff) > 1e-5 + 1e-4 * cal.cls[c].eff ||
                fit.cls[c].rows != cal.cls[c].rows) {
                tap_diag("class %s: eff %.6f rows %d vs %.6f rows %d", zt_count_class_name(c), fit.cls[c].eff,
                         fit.cls[c].rows, cal.cls[c].eff, cal.cls[c].rows);
                same = 0;
            }
        }
        tap_ok(same && fit.cls[ZT_CC_FLASH_FWD].rows == cal.cls[ZT_CC_FLASH_FWD].rows + 2,
               "the other classes as committed; flash_fwd fitted on 2 more rows (the ztrain rows)");
        /* and the written calibration carries the fit, the committed one says uncalibrated */
        char buf[4096];
        FILE *m = fmemopen(buf, sizeof buf, "w");
        if (m) {
            cm_write(m, &fit);
            fclose(m);
            tap_ok(strstr(buf, "class cudnn_fwd  eff 0.41") != NULL && !strstr(buf, "uncalibrated"),
                   "--calibrate writes the fitted cuDNN classes");
        }
        cm_table_free(&t);
    }
    unlink(tp);
}

/* ------------------------------------------------------------ checkpoint keep
 * Activation checkpointing with group size k keeps the last group: right
 * after the training forward the backward runs the last group's blocks on
 * what that forward left in their slots and scratch residuals, and
 * recomputes only the R = (L - 1) / k * k blocks below it (precision.h
 * zt_ckptkeep_of, model_acts.h zt_acts_ckpt_redo).  Against every group
 * recomputed (ZT_TEST_NO_CKPTKEEP), GPT-2 and Llama, stages 0 and 3, groups
 * of 1 and of 2 of 3 blocks, Gemma 2, Qwen3's q/k norms, LoRA (with
 * dropout), QLoRA, gradient accumulation: 4 steps' losses and gradient
 * norms bitwise, and the last step's gradients where the counter keeps
 * them; over the run without checkpointing (n) the recompute's GEMM FLOPs
 * and launches exactly R / L of the full recompute's, (keep - n) L ==
 * (all - n) R, R attention forwards a step more; the planner's peak of the
 * gathered units the measured one on both paths, the activations' peak the
 * same on both, and planned so (the slots are the same arrays). */
static void ckpt_keep(void) {
    static const w16_kind kind = {549755813888ULL, " kept and recomputed",
                                  "run recomputing every checkpoint group", NULL};
    static const char ck2[] = "activation_checkpointing.policy=every-2";
    static const char drop_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                                  "ztrain.lora.dropout=0.25 activation_checkpointing.policy=blocks";
    static const char nf4_ck[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                                 "ztrain.lora.base=nf4 activation_checkpointing.policy=blocks";
    static const char gemma_ck[] = "ztrain.model.gemma=2 activation_checkpointing.policy=blocks";
    static const char qk_ck[] = "ztrain.model.qk_norm=true activation_checkpointing.policy=blocks";
    static const char acc_ck[] = "train_batch_size=4 activation_checkpointing.policy=blocks";
    static const w16_xname names[] = {
        {ck2, " checkpointed every 2"},
        {drop_ck, " LoRA dropout checkpointed"}, {nf4_ck, " QLoRA checkpointed"},
        {gemma_ck, " gemma checkpointed"}, {qk_ck, " qk_norm checkpointed"},
        {acc_ck, " accumulation 2 checkpointed"}, {NULL, NULL}};
    /* arg: the group size */
    static const w16_case cases[] = {
        {"gpt2:2,2,32,64,2,16", 3, w16_ck, 1},
        {"gpt2:3,2,32,64,2,16", 0, ck2, 2},
        {"gpt2:2,2,32,64,2,16", 0, w16_lck, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, w16_ck, 1},
        {"llama:3,4,2,32,48,64,2,16,untied", 0, ck2, 2},
        {"llama:3,4,2,32,48,64,2,16", 3, ck2, 2},
        {"llama:2,4,2,32,48,64,2,16", 0, gemma_ck, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, qk_ck, 1},
        {"llama:2,4,2,32,48,64,2,16", 3, w16_lck, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, drop_ck, 1},
        {"llama:2,4,2,32,48,1024,2,16,untied", 0, nf4_ck, 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 1, acc_ck, 1}};
    g_w16_ckkeep = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const w16_case *c = &cases[i];
        w16_pair p;
        char what[160];
        if (!w16_case_run(&p, &kind, c, 0, names, NULL, what, sizeof what)) continue;
        /* the run without checkpointing */
        char none[512];
        snprintf(none, sizeof none, "%s activation_checkpointing.policy=none", c->extra);
        double res[4][2];
        long wn = 0, rn = 0;
        w16_mem mn;
        zt_status st;
        memset(&st, 0, sizeof st);
        const int rc = w16_run(&p.s, c->stage, none, 0, res, &wn, &rn, &mn, &st);
        if (!tap_ok(rc == ZT_OK, "%s: 4 steps without checkpointing", what)) {
            tap_diag("%s", st.msg);
            continue;
        }
        const int L = p.s.L, k = (int)c->arg, R = (L - 1) / k * k;
        /* micro-batches a step (accumulation 2: 2) */
        const long mb = c->extra == acc_ck ? 2 : 1, steps = 4 * mb;
        tap_ok(p.ma.ghave == p.mb.ghave && (!p.ma.ghave || p.ma.ghash == p.mb.ghash),
               "%s: the last step's gradients bitwise%s", what,
               p.ma.ghave ? "" : " (not kept by the counter at this stage: the losses above)");
        const double fa = p.ma.gemm_fl - mn.gemm_fl, fb = p.mb.gemm_fl - mn.gemm_fl;
        const long na = p.ma.gemm_n - mn.gemm_n, nb = p.mb.gemm_n - mn.gemm_n;
        tap_ok(fb > 0 && nb > 0 && fa * L == fb * R && na * L == nb * R &&
                   p.ma.attf == mn.attf + steps * R && p.mb.attf == mn.attf + steps * L,
               "%s: the recompute's GEMMs %.0f FLOPs in %ld launches (every group: %.0f in %ld; "
               "R / L = %d / %d), %ld attention forwards (%ld, %ld without checkpointing)",
               what, fa, na, fb, nb, R, L, p.ma.attf, p.mb.attf, mn.attf);
        tap_ok(p.ma.peak == p.ma.plan && p.mb.peak == p.mb.plan && p.ma.acts_peak == p.mb.acts_peak &&
                   p.ma.acts_plan == p.mb.acts_plan && p.ma.peak <= p.mb.peak,
               "%s: gathered units' peak %llu bytes (planned %llu; every group %llu, planned %llu), "
               "activations' %llu (%llu), planned the same",
               what, (unsigned long long)p.ma.peak, (unsigned long long)p.ma.plan,
               (unsigned long long)p.mb.peak, (unsigned long long)p.mb.plan,
               (unsigned long long)p.ma.acts_peak, (unsigned long long)p.mb.acts_peak);
    }
    g_w16_ckkeep = 0;
}

/* ------------------------------------------------------------ blocks-attn
 * Activation checkpointing's blocks-attn (zt_model_config.ckpt_attn): the
 * blocks policy with each layer's attention output (bf16 here: the runs'
 * bf16 activations) and softmax statistics lse kept through the forward, so
 * the backward's recompute of a block skips the attention.  Against blocks
 * (the last block kept from the forward, the L - 1 below it recomputed)
 * and against no checkpointing, GPT-2 and Llama (tied and untied), stages
 * 0, 1 and 3, LoRA, Gemma 2, Qwen3's q/k norms, accumulation 2, every block
 * recomputed (ZT_TEST_NO_CKPTKEEP), a Mixture of Experts: 4 steps' losses
 * and gradient norms bitwise, and the last step's gradients where the
 * counter keeps them; counted (the MoE too): L attention forwards a
 * micro-batch (blocks: 2L - 1, 2L with every block recomputed; none: L),
 * the GEMMs' FLOPs and launches those of blocks; the
 * activations' peak blocks' plus exactly (L - 1) (A + S) bytes, A the
 * attention output [N, AD] in bf16 (rounded up to 128 elements, 2 bytes
 * each; the MoE's as well, counted on the cuda table) and S lse [B, NH, T] (rounded up to 16 floats): the shapes keep
 * every array a multiple of 256 bytes, so no alignment pad moves
 * (model_acts.h zt_carve_katt); the planner's activations the measured
 * ones on both policies (a cuda plan's with the host's tokens and targets,
 * 8 B T bytes, which the cpu-backed counter does not allocate), and its
 * gathered units' peak the measured one. */
static void ckpt_attn(void) {
    static const char sac[] = "activation_checkpointing.policy=blocks-attn";
    static const char sac_lora[] = "ztrain.lora.r=4 ztrain.lora.alpha=8 ztrain.lora.targets=all-linear "
                                   "activation_checkpointing.policy=blocks-attn";
    static const char sac_moe[] = "ztrain.model.n_experts=4 ztrain.model.experts_per_token=2 "
                                  "ztrain.model.moe_intermediate_size=24 "
                                  "activation_checkpointing.policy=blocks-attn";
    static const char sac_gemma[] = "ztrain.model.gemma=2 activation_checkpointing.policy=blocks-attn";
    static const char sac_qk[] = "ztrain.model.qk_norm=true activation_checkpointing.policy=blocks-attn";
    static const char sac_acc[] = "train_batch_size=4 activation_checkpointing.policy=blocks-attn";
    /* keep 0: every block recomputed (ZT_TEST_NO_CKPTKEEP; blocks: 2L
     * forwards a micro-batch, blocks-attn still L) */
    static const struct { const char *shape; int stage; const char *extra, *name; int keep; } cases[] = {
        {"gpt2:2,2,32,64,2,16", 0, sac, "", 1},
        {"gpt2:3,2,32,64,2,16", 3, sac, "", 1},
        {"gpt2:2,2,32,64,2,16", 0, sac_lora, " LoRA", 1},
        {"gpt2:3,2,32,64,2,16", 0, sac, " ZT_TEST_NO_CKPTKEEP", 0},
        {"llama:2,4,2,32,48,64,2,16", 0, sac, "", 1},
        {"llama:3,4,2,32,48,64,2,16,untied", 3, sac, "", 1},
        {"llama:3,4,2,32,48,64,2,16", 3, sac, "", 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, sac_lora, " LoRA", 1},
        {"llama:2,4,2,32,48,64,2,16", 3, sac_lora, " LoRA", 1},
        {"llama:2,4,2,32,48,64,2,16", 0, sac_gemma, " gemma", 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 3, sac_qk, " qk_norm", 1},
        {"llama:2,4,2,32,48,64,2,16,untied", 1, sac_acc, " accumulation 2", 1},
        {"llama:3,4,2,32,48,64,2,16,untied", 3, sac, " ZT_TEST_NO_CKPTKEEP", 0},
        {"llama:2,4,2,32,48,64,2,16,untied", 0, sac_moe, " MoE", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_w16_ckkeep = cases[i].keep;
        cm_shape sh;
        cm_shape_parse(cases[i].shape, &sh);
        char what[160];
        snprintf(what, sizeof what, "blocks-attn %s stage %d%s", cases[i].shape, cases[i].stage,
                 cases[i].name);
        /* the same run with blocks and without checkpointing */
        char blk[512], none[512];
        snprintf(blk, sizeof blk, "%s activation_checkpointing.policy=blocks", cases[i].extra);
        snprintf(none, sizeof none, "%s activation_checkpointing.policy=none", cases[i].extra);
        double ra[4][2], rb[4][2], rn[4][2];
        long w = 0, r = 0;
        w16_mem ma, mb, mn;
        zt_status st;
        memset(&st, 0, sizeof st);
        int rc = w16_run(&sh, cases[i].stage, cases[i].extra, 0, ra, &w, &r, &ma, &st);
        if (rc == ZT_OK) rc = w16_run(&sh, cases[i].stage, blk, 0, rb, &w, &r, &mb, &st);
        if (rc == ZT_OK) rc = w16_run(&sh, cases[i].stage, none, 0, rn, &w, &r, &mn, &st);
        if (!tap_ok(rc == ZT_OK, "%s: 4 steps, and with blocks and none", what)) {
            tap_diag("%s", st.msg);
            continue;
        }
        tap_ok(!memcmp(ra, rb, sizeof ra) && !memcmp(ra, rn, sizeof ra),
               "%s: losses and gradient norms bitwise blocks' and none's (%.9g %.9g ... %.9g)",
               what, ra[0][0], ra[1][0], ra[3][0]);
        tap_ok(ma.ghave == mb.ghave && ma.ghave == mn.ghave &&
                   (!ma.ghave || (ma.ghash == mb.ghash && ma.ghash == mn.ghash)),
               "%s: the last step's gradients bitwise%s", what,
               ma.ghave ? "" : " (not kept by the counter at this stage: the losses above)");
        const int L = sh.L;
        /* micro-batches in the 4 steps (accumulation 2: 8) */
        const long mbs = cases[i].extra == sac_acc ? 8 : 4;
        {   /* (the MoE counted too: count.c has its kernels) */
            tap_ok(ma.attf == mbs * L && mb.attf == mbs * (cases[i].keep ? 2 * L - 1 : 2 * L) &&
                       mn.attf == mbs * L &&
                       ma.gemm_fl == mb.gemm_fl && ma.gemm_n == mb.gemm_n && ma.gemm_fl > mn.gemm_fl,
                   "%s: %ld attention forwards in %ld micro-batches (blocks %ld, none %ld), the GEMMs "
                   "blocks' %.0f FLOPs in %ld launches (%.0f in %ld; none %.0f)",
                   what, ma.attf, mbs, mb.attf, mn.attf, ma.gemm_fl, ma.gemm_n, mb.gemm_fl, mb.gemm_n,
                   mn.gemm_fl);
        }
        /* (AD = C for both architectures' shapes here: NH hd = C) */
        const uint64_t N = (uint64_t)sh.B * sh.T;
        /* (the MoE's activations bf16 too on the cuda backend the counter
         * stands in for: model_acts.h zt_acts16_on, config.h ZT_W16_MOE16) */
        const uint64_t A = ((N * (uint64_t)sh.C + 127) & ~(uint64_t)127) * 2;
        const uint64_t S = (((uint64_t)sh.B * sh.NH * sh.T + 15) & ~(uint64_t)15) * 4;
        const uint64_t d = (uint64_t)(L - 1) * (A + S);
        /* (the plan of a cuda run adds the host's [B, T] tokens and targets,
         * memplan.c, which the cpu-backed counter does not allocate) */
        const uint64_t host = N * 4 * 2;
        tap_ok(ma.acts_peak == mb.acts_peak + d && ma.acts_plan == ma.acts_peak + host &&
                   mb.acts_plan == mb.acts_peak + host && ma.acts_peak < mn.acts_peak &&
                   ma.peak == ma.plan && mb.peak == mb.plan,
               "%s: activations' peak %llu bytes, blocks' %llu + (L - 1) (%llu + %llu) = %llu "
               "(none %llu); planned %llu and %llu (+ %llu host tokens)",
               what, (unsigned long long)ma.acts_peak, (unsigned long long)mb.acts_peak,
               (unsigned long long)A, (unsigned long long)S, (unsigned long long)d,
               (unsigned long long)mn.acts_peak, (unsigned long long)ma.acts_plan,
               (unsigned long long)mb.acts_plan, (unsigned long long)host);
    }
    g_w16_ckkeep = 0;
}

/* bench/costmodel --act-ckpt blocks: the engine's checkpointed step
 * counted as it runs.  A tiny Llama (no biases, untied head, cuDNN's
 * attention): each block's forward but the last's (kept from the forward:
 * ckpt_keep below) runs once more inside the backward, so the bf16 GEMMs do
 * exactly (L - 1) / L of the blocks' forward FLOPs more (2 N of q|k|v, o,
 * gate|up and down each: 2 N C (QKV + AD + 2 I) + 2 N I C a block) and
 * cuDNN runs L - 1 forwards more; every group recomputed
 * (ZT_TEST_NO_CKPTKEEP): all of them, L more; the predicted step is longer
 * (longer still recomputing every group); none: the default's counts,
 * bitwise. */
static double gemm_flops_of(const cm_counts *c) {
    double f = 0;
    for (size_t i = 0; i < c->nk; i++)
        if (c->k[i].cls == ZT_CC_GEMM_BF16) f += c->k[i].flops * (double)c->k[i].launches;
    return f;
}

static void costmodel_ckpt(void) {
    char p[1024], err[512];
    cm_calib cal;
    if (!tap_ok(cm_load(src("bench/costmodel_h100.txt", p, sizeof p), &cal, err, sizeof err) == 0,
                "checkpointed model: the committed calibration loads"))
        return;
    cal.cls[ZT_CC_CUDNN_FWD] = (cm_class){0.35, cal.cls[ZT_CC_STREAM].t0_us, 0, 1};
    cal.cls[ZT_CC_CUDNN_BWD] = (cm_class){0.35, cal.cls[ZT_CC_STREAM].t0_us, 0, 1};
    cm_shape ls;
    cm_shape_parse("llama:3,4,2,64,96,512,2,96,untied", &ls);
    cm_run_opts o0 = {0, 0, 0, 1, 0, CM_ATT_CUDNN, 0, "", "", "", CM_OFFLOAD_NONE}, on = o0, ob = o0;
    snprintf(on.act_ckpt, sizeof on.act_ckpt, "none");
    snprintf(ob.act_ckpt, sizeof ob.act_ckpt, "blocks");
    cm_counts a, n, b;
    zt_status st;
    memset(&st, 0, sizeof st);
    const int r0 = cm_count_step(&ls, &o0, zt_backend_count(), &a, &st);
    if (r0) tap_diag("default: %s", st.msg);
    const int r1 = r0 ? r0 : cm_count_step(&ls, &on, zt_backend_count(), &n, &st);
    if (!r0 && r1) tap_diag("none: %s", st.msg);
    const int r2 = r1 ? r1 : cm_count_step(&ls, &ob, zt_backend_count(), &b, &st);
    if (!r1 && r2) tap_diag("blocks: %s", st.msg);
    /* (every group recomputed, the last one too: ZT_TEST_NO_CKPTKEEP) */
    cm_counts e;
    setenv("ZT_TEST_NO_CKPTKEEP", "1", 1);
    const int r3 = r2 ? r2 : cm_count_step(&ls, &ob, zt_backend_count(), &e, &st);
    unsetenv("ZT_TEST_NO_CKPTKEEP");
    if (!r2 && r3) tap_diag("blocks, every group recomputed: %s", st.msg);
    if (!tap_ok(!r0 && !r1 && !r2 && !r3, "a tiny Llama step counted without, with 'none' and with "
                                          "'blocks' activation checkpointing (and every group recomputed)"))
        goto out;
    const double L = ls.L, N = (double)ls.B * ls.T, C = ls.C, I = ls.I, hd = (double)ls.C / ls.NH;
    const double QKV = (ls.NH + 2.0 * ls.NKV) * hd, AD = ls.NH * hd;
    const double fwd = L * (2 * N * C * (QKV + AD + 2 * I) + 2 * N * I * C);
    const double ga = gemm_flops_of(&a), gb = gemm_flops_of(&b), ge = gemm_flops_of(&e);
    const long fa = launches_of_k(a.k, a.nk, "cudnnBackendExecute (SDPA forward)"),
               fb = launches_of_k(b.k, b.nk, "cudnnBackendExecute (SDPA forward)"),
               fe = launches_of_k(e.k, e.nk, "cudnnBackendExecute (SDPA forward)");
    /* (the last block kept from the forward: L - 1 recomputed) */
    tap_ok(gb - ga == fwd * (L - 1) / L && fa == ls.L && fb == 2 * ls.L - 1 &&
               b.tot.launches > a.tot.launches,
           "blocks: the bf16 GEMMs %.0f FLOPs more (the %d blocks' forwards but the last's: %.0f), %ld "
           "cuDNN forwards (%ld without), %ld launches (%ld)", gb - ga, ls.L, fwd * (L - 1) / L, fb, fa,
           b.tot.launches, a.tot.launches);
    tap_ok(ge - ga == fwd && fe == 2 * ls.L && e.tot.launches > b.tot.launches,
           "blocks, every group recomputed: the bf16 GEMMs %.0f FLOPs more (the %d blocks' forwards: "
           "%.0f), %ld cuDNN forwards, %ld launches (%ld kept)", ge - ga, ls.L, fwd, fe, e.tot.launches,
           b.tot.launches);
    double per[ZT_CC_N];
    const double sa = cm_step_s(&cal, a.k, a.nk, &a.tot, per), sb = cm_step_s(&cal, b.k, b.nk, &b.tot, per),
                 sn = cm_step_s(&cal, n.k, n.nk, &n.tot, per), se = cm_step_s(&cal, e.k, e.nk, &e.tot, per);
    tap_ok(se > sb && sb > sa && sn == sa && n.tot.launches == a.tot.launches && n.tot.bytes == a.tot.bytes &&
               n.tot.flops == a.tot.flops,
           "the checkpointed step predicted longer (%.4f ms against %.4f; every group recomputed "
           "%.4f); 'none' the default's counts and time", sb * 1e3, sa * 1e3, se * 1e3);
out:
    if (!r0) cm_counts_free(&a);
    if (!r1) cm_counts_free(&n);
    if (!r2) cm_counts_free(&b);
    if (!r3) cm_counts_free(&e);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) {
        printf("not ok 1 - init: %s\n", st.msg);
        return 1;
    }
    const char *sd = getenv("ZT_SRCDIR");
    snprintf(srcdir, sizeof srcdir, "%s", sd && *sd ? sd : ".");
    K = zt_backend_count();
    tap_ok(K && !strcmp(K->name, "count") && K->host_memory == 0, "zt_backend_count(): a device table");
    /* every count here as a build without cuDNN, whatever this build has (the cuDNN path: cudnn_*) */
    zt_count_set_cudnn(0);
    formulas();
    engine();
    model();
    bf16_weights();
    bf16_nf4w16();
    bf16_activations();
    bf16_outputs();
    bf16_norms();
    bf16_rope();
    stand_in_blocks();
    bf16_qknorm_rope();
    bf16_logits();
    bf16_att_out();
    bf16_att_bwd16();
    bf16_rope_bwd16();
    bf16_qknorm_bwd16();
    bf16_att_do16();
    bf16_gradients();
    bf16_final_norm();
    bf16_gelu_grad();
    residual_fold();
    head_fused();
    lora_acc();
    lora_bt();
    lora_swap();
    lora_bswap();
    lora_gluround();
    lora_lgate();
    lora_lorapath();
    grad_fresh();
    head_fresh();
    widen_runs();
    lora_gu16();
    branch16();
    moe16();
    moe_counted();
    lora_branch16();
    lora_grad16();
    lora_o16();
    bf16_dout16n();
    gpt_norm16();
    gpt_mlpsum();
    gpt_gelue();
    gpt_branch16();
    bf16_dh16();
    lora_keeph();
    lora_qkv16();
    lora_gpt16();
    lora16();
    nf4_view();
    bf16_hooks_once();
    cudnn_formulas();
    cudnn_model();
    costmodel_ckpt();
    ckpt_keep();
    ckpt_attn();
    zt_finalize();
    return tap_done();
}
