/*
 * cpu_backend.c -- the CPU backend table: threads, host memory, matmul
 * through CBLAS, elementwise ops and AdamW.  OpenMP with static schedules;
 * every reduction has a fixed order, so results are bitwise reproducible
 * for a fixed thread count.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "adamw_step.h"
#include "dropout.h"
#include "cpu_internal.h"

#ifdef ZT_HAVE_OPENBLAS
void openblas_set_num_threads(int);
#endif

/* Elementwise loops smaller than this run on one thread. */
#define ZT_PAR_MIN 32768

/* ------------------------------------------------------------ threads */

/* One threading layer for the whole step: OpenMP.  BLAS runs
 * single-threaded, called by each OpenMP thread on its share of a GEMM
 * (gemm_par).  Had OpenBLAS its own pthread pool as well, its threads would
 * spin after every GEMM on the cores that the next OpenMP region (and the
 * OpenMP threads spinning after it, on the next GEMM) needs: on two cores
 * the second thread then added 15-25% instead of ~90%. */
static void cpu_set_threads(int n) {
    if (n <= 0) return;
    omp_set_num_threads(n);
#ifdef ZT_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
}

/* ------------------------------------------------------------ memory */

static void *cpu_alloc(size_t bytes) {
    void *p = NULL;
    size_t sz = bytes ? bytes : 1;
    if (posix_memalign(&p, 64, sz) != 0) return NULL;
    memset(p, 0, sz);
    return p;
}

/* alloc_nz: cpu_alloc without the zero fill */
static void *cpu_alloc_nz(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) return NULL;
    return p;
}

static void cpu_free(void *p) { free(p); }

static void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memcpy(dst, src, bytes);
}

static void cpu_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height) {
    for (size_t r = 0; r < height && width; ++r)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

static void cpu_zero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}

/* ------------------------------------------------------------ helpers */

int zt_cpu_channel_block(int C, int max_block) {
    int nth = omp_get_max_threads();
    if (nth < 1) nth = 1;
    int cb = (C + nth - 1) / nth;
    cb = (cb + 15) & ~15;
    if (cb < 16) cb = 16;
    if (cb > max_block) cb = max_block;
    return cb;
}

#define ZT_COLSUM_BLOCK 256

void zt_cpu_colsum_acc(float *dst, const float *src, int N, int C, size_t ld) {
    if (N <= 0 || C <= 0) return;
    const int cb = zt_cpu_channel_block(C, ZT_COLSUM_BLOCK);
    const int nblk = (C + cb - 1) / cb;
#pragma omp parallel for schedule(static) if (nblk > 1 && (size_t)N * C >= ZT_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * cb;
        const int nc = C - c0 < cb ? C - c0 : cb;
        double acc[ZT_COLSUM_BLOCK];
        for (int c = 0; c < nc; c++) acc[c] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *row = src + (size_t)n * ld + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) acc[c] += row[c];
        }
        for (int c = 0; c < nc; c++) dst[c0 + c] += (float)acc[c];
    }
}

/* ------------------------------------------------------------ errors */

/* The only failure the CPU backend records: no memory for the bf16 copies
 * of matmul operands (the matmul then runs in fp32). */
static const char *cpu_err;

static const char *cpu_error(void) {
    const char *e = cpu_err;
    cpu_err = NULL;
    return e;
}

static void cpu_synchronize(void) {}

/* ------------------------------------------------------------ matmul */

static int cpu_mm_mode = ZT_MATMUL_FP32;

static void cpu_set_matmul_precision(int mode) {
    if (mode == ZT_MATMUL_FP32 || mode == ZT_MATMUL_BF16) cpu_mm_mode = mode;
}

int zt_cpu_matmul_mode(void) { return cpu_mm_mode; }

/* set_dw_fresh (backend.h): the weight gradients [fresh, fresh + fresh_n)
 * the dW GEMM overwrites (beta 0) */
static const float *cpu_fresh;
static size_t cpu_fresh_n;

static void cpu_set_dw_fresh(float *g, size_t n) {
    cpu_fresh = g && n ? g : NULL;
    cpu_fresh_n = g ? n : 0;
}

static float dw_beta(const float *dw) {
    return cpu_fresh && dw >= cpu_fresh && dw < cpu_fresh + cpu_fresh_n ? 0.0f : 1.0f;
}
/* dw_fresh (backend.h) */
static int cpu_dw_fresh(const float *dw) { return dw_beta(dw) == 0.0f; }

/* In bf16 mode, a copy of src[n] rounded to bf16 (free with free()); in
 * fp32 mode, or when out of memory (recorded), src itself. */
static const float *mm_operand(const float *src, size_t n, float **owned) {
    *owned = NULL;
    if (cpu_mm_mode != ZT_MATMUL_BF16 || n == 0) return src;
    float *d = malloc(n * sizeof(float));
    if (!d) {
        cpu_err = "cpu_backend.c: matmul: out of memory for the bf16 operand copies "
                  "(computed in fp32 instead)";
        return src;
    }
#pragma omp parallel for simd schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) d[i] = zt_cpu_round_bf16(src[i]);
    *owned = d;
    return d;
}

/* GEMMs smaller than this (2*M*N*K flops) run as one BLAS call. */
#define ZT_GEMM_PAR_MIN (1L << 22)

/* C[M,N] = op(A)[M,K] op(B)[K,N] + beta C (row-major; ta: A is stored
 * [K,M], tb: B is stored [N,K]), split among the OpenMP threads along the
 * larger of M and N in contiguous pieces (multiples of 16 but the last), one
 * single-threaded BLAS call per thread.  No split over K: every element is
 * summed by one call.  The pieces depend only on the shape and the thread
 * count, so the result is deterministic for a fixed thread count (the
 * backend's contract); across thread counts BLAS may round differently. */
static void gemm_par(int ta, int tb, int M, int N, int K, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    const enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE TB = tb ? CblasTrans : CblasNoTrans;
    const int nth = omp_get_max_threads();
    if (nth <= 1 || 2.0 * M * N * K < (double)ZT_GEMM_PAR_MIN || omp_in_parallel()) {
        cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int split_n = N >= M;
    const int D = split_n ? N : M;
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int per = (D + nt - 1) / nt;
        per = (per + 15) & ~15;
        const int d0 = id * per;
        const int nd = D - d0 < per ? D - d0 : per;
        if (nd > 0) {
            if (split_n)   /* columns [d0, d0 + nd) of C and of op(B) */
                cblas_sgemm(CblasRowMajor, TA, TB, M, nd, K, 1.0f, A, lda,
                            tb ? B + (size_t)d0 * ldb : B + d0, ldb, beta, C + d0, ldc);
            else           /* rows [d0, d0 + nd) of C and of op(A) */
                cblas_sgemm(CblasRowMajor, TA, TB, nd, N, K, 1.0f,
                            ta ? A + d0 : A + (size_t)d0 * lda, lda, B, ldb, beta,
                            C + (size_t)d0 * ldc, ldc);
        }
    }
}

static void cpu_matmul_fwd(float *out, const float *inp, const float *w,
                           const float *bias, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {
        memset(out, 0, (size_t)N * OC * sizeof(float));
    } else {
        float *own_i, *own_w;
        const float *a = mm_operand(inp, (size_t)N * C, &own_i);
        const float *b = mm_operand(w, (size_t)OC * C, &own_w);
        /* out[N,OC] = inp[N,C] @ w[OC,C]^T */
        gemm_par(0, 1, N, OC, C, a, C, b, C, 0.0f, out, OC);
        free(own_i);
        free(own_w);
    }
    if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= ZT_PAR_MIN)
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * OC;
#pragma omp simd
            for (int j = 0; j < OC; j++) o[j] += bias[j];
        }
    }
}

static void cpu_matmul_bwd(float *dinp, float *dw, float *dbias,
                           const float *dout, const float *inp, const float *w,
                           int N, int C, int OC) {
    if (N <= 0) return;
    float *own_d = NULL;
    /* bf16 mode: dout rounded once for both products (dbias uses fp32 dout) */
    const float *dr = (C > 0 && OC > 0 && (dinp || dw))
                          ? mm_operand(dout, (size_t)N * OC, &own_d) : dout;
    if (dinp && C > 0) {
        if (OC > 0) {
            /* dinp[N,C] = dout[N,OC] @ w[OC,C] */
            float *own_w;
            const float *b = mm_operand(w, (size_t)OC * C, &own_w);
            gemm_par(0, 0, N, C, OC, dr, OC, b, C, 0.0f, dinp, C);
            free(own_w);
        } else {
            memset(dinp, 0, (size_t)N * C * sizeof(float));
        }
    }
    if (OC > 0 && dw && C > 0) {
        /* dw[OC,C] += dout[N,OC]^T @ inp[N,C] (set_dw_fresh: =) */
        float *own_i;
        const float *a = mm_operand(inp, (size_t)N * C, &own_i);
        gemm_par(1, 0, OC, C, N, dr, OC, a, C, dw_beta(dw), dw, C);
        free(own_i);
    }
    free(own_d);
    if (OC > 0 && dbias) zt_cpu_colsum_acc(dbias, dout, N, OC, (size_t)OC);
}

/* the GELU layers of backend.h: exactly the unfused calls */
static void cpu_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                                const float *bias, int N, int C, int OC) {
    cpu_matmul_fwd(pre, inp, w, bias, N, C, OC);
    if (N > 0 && OC > 0) zt_cpu_gelu_fwd(out, pre, (size_t)N * OC);
}

static void cpu_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                 const float *dout, const float *inp, const float *pre,
                                 const float *w, int N, int C, int OC) {
    if (N <= 0) return;
    cpu_matmul_bwd(dpre, dw, dbias, dout, inp, w, N, C, OC);
    if (C <= 0) return;
    zt_cpu_gelu_bwd(dpre, pre, dpre, (size_t)N * C);
    if (dpre_bias) zt_cpu_colsum_acc(dpre_bias, dpre, N, C, (size_t)C);
}

/* the bf16-weight entries of backend.h: w16 widened (exact), then the fp32
 * entry, whose bf16 rounding of it is the identity */
static float *widen_w16(const uint16_t *w16, int OC, int C) {
    const size_t n = OC > 0 && C > 0 ? (size_t)OC * C : 0;
    float *w = malloc((n ? n : 1) * sizeof(float));
    if (!w) {
        cpu_err = "cpu_backend.c: matmul: out of memory for the fp32 copy of a bf16 weight "
                  "(nothing computed)";
        return NULL;
    }
    if (n) zt_cpu_from_bf16(w, w16, n);
    return w;
}
static void cpu_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16,
                               const float *bias, int N, int C, int OC) {
    float *w = widen_w16(w16, OC, C);
    if (w) cpu_matmul_fwd(out, inp, w, bias, N, C, OC);
    free(w);
}
static void cpu_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                               const float *inp, const uint16_t *w16, int N, int C, int OC) {
    float *w = widen_w16(w16, OC, C);
    if (w) cpu_matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
    free(w);
}
static void cpu_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                    const float *bias, int N, int C, int OC) {
    float *w = widen_w16(w16, OC, C);
    if (w) cpu_matmul_gelu_fwd(out, pre, inp, w, bias, N, C, OC);
    free(w);
}
static void cpu_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                     const float *dout, const float *inp, const float *pre,
                                     const uint16_t *w16, int N, int C, int OC) {
    float *w = widen_w16(w16, OC, C);
    if (w) cpu_matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, N, C, OC);
    free(w);
}

/* the bf16-input entries of backend.h: inp16 (and w16) widened (exact),
 * then the fp32 entry, whose bf16 rounding of them is the identity */
static float *widen_a16(const uint16_t *inp16, int N, int C) {
    const size_t n = N > 0 && C > 0 ? (size_t)N * C : 0;
    float *x = malloc((n ? n : 1) * sizeof(float));
    if (!x) {
        cpu_err = "cpu_backend.c: matmul: out of memory for the fp32 copy of a bf16 input "
                  "(nothing computed)";
        return NULL;
    }
    if (n) zt_cpu_from_bf16(x, inp16, n);
    return x;
}
/* the fp32 weight: w, or w16 widened into *own (NULL on failure) */
static const float *a16_weight(const float *w, const uint16_t *w16, int OC, int C, float **own) {
    *own = NULL;
    if (!w16) return w;
    return *own = widen_w16(w16, OC, C);
}
static void cpu_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w,
                               const uint16_t *w16, const float *bias, int N, int C, int OC) {
    float *own, *x = widen_a16(inp16, N, C);
    const float *ww = x ? a16_weight(w, w16, OC, C, &own) : NULL;
    if (ww) cpu_matmul_fwd(out, x, ww, bias, N, C, OC);
    if (x) free(own);
    free(x);
}
static void cpu_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                               const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                               int C, int OC) {
    float *own, *x = widen_a16(inp16, N, C);
    const float *ww = x ? a16_weight(w, w16, OC, C, &own) : NULL;
    if (ww || (x && !dinp)) cpu_matmul_bwd(dinp, dw, dbias, dout, x, ww, N, C, OC);
    if (x) free(own);
    free(x);
}
static void cpu_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                    const uint16_t *w16, const float *bias, int N, int C, int OC) {
    float *own, *x = widen_a16(inp16, N, C);
    const float *ww = x ? a16_weight(w, w16, OC, C, &own) : NULL;
    if (ww) cpu_matmul_gelu_fwd(out, pre, x, ww, bias, N, C, OC);
    if (x) free(own);
    free(x);
}
static void cpu_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                     const float *dout, const uint16_t *inp16, const float *pre,
                                     const float *w, const uint16_t *w16, int N, int C, int OC) {
    float *own, *x = widen_a16(inp16, N, C);
    const float *ww = x ? a16_weight(w, w16, OC, C, &own) : NULL;
    if (ww) cpu_matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, x, pre, ww, N, C, OC);
    if (x) free(own);
    free(x);
}

/* the bf16-output entries of backend.h: the fp32 sequence in tmp (tmp2),
 * then to_bf16; bitwise that sequence by construction */
static void cpu_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp,
                               const uint16_t *inp16, const float *w, const uint16_t *w16,
                               const float *bias, int N, int C, int OC) {
    float *own = NULL;
    if (!tmp && N > 0 && OC > 0) {   /* (the LM head: host scratch of our own) */
        tmp = own = malloc((size_t)N * OC * sizeof(float));
        if (!own) {
            cpu_err = "cpu_backend.c: matmul_fwd_o16: out of memory for the fp32 output "
                      "(nothing computed)";
            return;
        }
    }
    if (inp16) cpu_matmul_fwd_a16(tmp, inp16, w, w16, bias, N, C, OC);
    else if (w16) cpu_matmul_fwd_w16(tmp, inp, w16, bias, N, C, OC);
    else cpu_matmul_fwd(tmp, inp, w, bias, N, C, OC);
    if (N > 0 && OC > 0) zt_cpu_to_bf16(out16, tmp, (size_t)N * OC);
    free(own);
}
/* matmul_gelu_fwd_o16 (backend.h): matmul_fwd_o16's fp32 result in tmp,
 * pre16 its rounding, then gelu_fwd in place and out16 its rounding:
 * matmul_gelu_fwd (matmul_fwd then gelu_fwd) and to_bf16 of both */
static void cpu_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                    const uint16_t *inp16, const float *w, const uint16_t *w16,
                                    const float *bias, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (inp16) cpu_matmul_fwd_a16(tmp, inp16, w, w16, bias, N, C, OC);
    else if (w16) cpu_matmul_fwd_w16(tmp, inp, w16, bias, N, C, OC);
    else cpu_matmul_fwd(tmp, inp, w, bias, N, C, OC);
    const size_t n = (size_t)N * OC;
    zt_cpu_to_bf16(pre16, tmp, n);
    zt_cpu_gelu_fwd(tmp, tmp, n);
    zt_cpu_to_bf16(out16, tmp, n);
}
/* the LM head's backward on its bf16 gradient (backend.h): dout16 widened
 * (exact) into host scratch, then matmul_bwd (_w16; _a16 with inp16), whose
 * bf16 rounding of it is the identity */
static void cpu_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                                  const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                                  int C, int OC) {
    if (N <= 0 || (!dinp && !dw)) return;
    float *d = widen_a16(dout16, N, OC);
    if (!d) return;
    if (inp16) cpu_matmul_bwd_a16(dinp, dw, NULL, d, inp16, w, w16, N, C, OC);
    else if (w16) cpu_matmul_bwd_w16(dinp, dw, NULL, d, inp, w16, N, C, OC);
    else cpu_matmul_bwd(dinp, dw, NULL, d, inp, w, N, C, OC);
    free(d);
}
static void cpu_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n) {
    zt_cpu_from_bf16(tmp, in16, n);
    zt_cpu_gelu_fwd(tmp, tmp, n);
    zt_cpu_to_bf16(out16, tmp, n);
}
static void cpu_swiglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2,
                             int N, int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_from_bf16(tmp, gu16, (size_t)N * 2 * H);
    zt_cpu_swiglu_fwd(tmp2, tmp, N, H);
    zt_cpu_to_bf16(out16, tmp2, (size_t)N * H);
}
static void cpu_geglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2,
                            int N, int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_from_bf16(tmp, gu16, (size_t)N * 2 * H);
    zt_cpu_geglu_fwd(tmp2, tmp, N, H);
    zt_cpu_to_bf16(out16, tmp2, (size_t)N * H);
}
/* the fp32 input rounded, then the 16-bit entry on the rounded values
 * (backend.h gelu_fwd16r / swiglu_fwd16r / geglu_fwd16r: that very sequence) */
static void cpu_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp,
                            size_t n) {
    if (!n) return;
    zt_cpu_to_bf16(in16, in, n);
    cpu_gelu_fwd16(out16, in16, tmp, n);
}
static void cpu_swiglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N,
                              int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_to_bf16(gu16, gu, (size_t)N * 2 * H);
    cpu_swiglu_fwd16(out16, gu16, gu, tmp2, N, H);
}
static void cpu_geglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N,
                             int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_to_bf16(gu16, gu, (size_t)N * 2 * H);
    cpu_geglu_fwd16(out16, gu16, gu, tmp2, N, H);
}
static void cpu_swiglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_from_bf16(dgu, gu16, (size_t)N * 2 * H);
    zt_cpu_swiglu_bwd(dgu, dout, dgu, N, H);
}
static void cpu_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B,
                              int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hd <= 0) return;
    zt_cpu_from_bf16(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hd);
    zt_cpu_gqa_ext_fwd(out, lse, tmp, B, T, NH, NKV, hd, o);
}
static void cpu_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                              const float *out, const float *lse, int B, int T, int NH, int NKV,
                              int hd, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hd <= 0) return;
    zt_cpu_from_bf16(tmp, qkv16, (size_t)B * T * (NH + 2 * NKV) * hd);
    zt_cpu_gqa_ext_bwd(dqkv, dout, tmp, out, lse, B, T, NH, NKV, hd, o);
}
static void cpu_geglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    if (N <= 0 || H <= 0) return;
    zt_cpu_from_bf16(dgu, gu16, (size_t)N * 2 * H);
    zt_cpu_geglu_bwd(dgu, dout, dgu, N, H);
}

/* the bf16-gradient entries of backend.h: dout16 (and inp16, w16) widened
 * (exact), then the fp32 entry's GEMMs, whose bf16 rounding of them is the
 * identity; dbias from the fp32 dout, as the fp32 entry takes it */
static void cpu_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                               const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0) return;
    if (C > 0 && OC > 0 && (dinp || dw)) {
        float *d = widen_a16(dout16, N, OC), *x = NULL, *own = NULL;
        const float *xx = inp, *ww = w;
        int ok = d != NULL;
        if (ok && inp16 && dw) ok = (xx = x = widen_a16(inp16, N, C)) != NULL;
        if (ok && w16 && dinp) ok = (ww = own = widen_w16(w16, OC, C)) != NULL;
        if (ok) cpu_matmul_bwd(dinp, dw, NULL, d, xx, ww, N, C, OC);
        free(own);
        free(x);
        free(d);
    } else {
        cpu_matmul_bwd(dinp, dw, NULL, dout, inp, w, N, C, OC);
    }
    if (OC > 0 && dbias && dout) zt_cpu_colsum_acc(dbias, dout, N, OC, (size_t)OC);
    else if (OC > 0 && dbias) {   /* (dout NULL: the sums of fp32(dout16), the same in order) */
        float *d = widen_a16(dout16, N, OC);
        if (d) zt_cpu_colsum_acc(dbias, d, N, OC, (size_t)OC);
        free(d);
    }
}
static void cpu_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                     const float *dout, const uint16_t *dout16, const float *inp,
                                     const uint16_t *inp16, const float *pre, const float *w,
                                     const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0) return;
    cpu_matmul_bwd_d16(dpre, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    if (C <= 0) return;
    zt_cpu_gelu_bwd(dpre, pre, dpre, (size_t)N * C);
    if (dpre_bias) zt_cpu_colsum_acc(dpre_bias, dpre, N, C, (size_t)C);
}
/* matmul_bwd_o16 (backend.h): matmul_bwd_d16 into tmp, then to_bf16: that
 * sequence by construction */
static void cpu_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                               const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0) return;
    cpu_matmul_bwd_d16(tmp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    if (C > 0) zt_cpu_to_bf16(dinp16, tmp, (size_t)N * C);
}
/* matmul_dgelu_bwd_o16 (backend.h): pre16 widened (exact) into host
 * scratch, matmul_dgelu_bwd_d16 into tmp, then to_bf16: that sequence by
 * construction */
static void cpu_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                     float *dbias, const float *dout, const uint16_t *dout16,
                                     const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                     const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0) return;
    float *pre = NULL;
    if (C > 0 && !(pre = widen_a16(pre16, N, C))) return;
    cpu_matmul_dgelu_bwd_d16(tmp, dpre_bias, dw, dbias, dout, dout16, inp, inp16, pre, w, w16, N, C,
                             OC);
    if (C > 0) zt_cpu_to_bf16(dpre16, tmp, (size_t)N * C);
    free(pre);
}
static void cpu_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                                const float *dout, const float *inp, const float *w,
                                const float *mean, const float *rstd, int N, int C) {
    zt_cpu_layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    if (N > 0 && C > 0) zt_cpu_to_bf16(dinp16, dinp, (size_t)N * C);
}
static void cpu_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                              const float *inp, const float *w, const float *rstd, int N, int C) {
    zt_cpu_rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
    if (N > 0 && C > 0) zt_cpu_to_bf16(dinp16, dinp, (size_t)N * C);
}
/* rmsnorm_bwd16d (backend.h): dout16 widened into host scratch of our own,
 * then rmsnorm_bwd (and dinp16's rounding) on those exact values */
static void cpu_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                               const float *inp, const float *w, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    float *d = malloc((size_t)N * C * sizeof(float));
    if (!d) {
        cpu_err = "cpu_backend.c: rmsnorm_bwd16d: out of memory for the widened gradient "
                  "(nothing computed)";
        return;
    }
    zt_cpu_from_bf16(d, dout16, (size_t)N * C);
    zt_cpu_rmsnorm_bwd(dinp, dw, d, inp, w, rstd, N, C);
    if (dinp16) zt_cpu_to_bf16(dinp16, dinp, (size_t)N * C);
    free(d);
}
/* layernorm_bwd16d (backend.h): dout16 widened into host scratch of our
 * own (or the fp32 dout), layernorm_bwd on those values, dinp16's
 * rounding, and dsum the column sums matmul_bwd's dbias takes
 * (zt_cpu_colsum_acc) of the accumulated dinp */
static void cpu_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                                 const float *dout, const uint16_t *dout16, const float *inp,
                                 const float *w, const float *mean, const float *rstd, int N,
                                 int C) {
    if (N <= 0 || C <= 0) return;
    float *d = NULL;
    if (dout16) {
        if (!(d = malloc((size_t)N * C * sizeof(float)))) {
            cpu_err = "cpu_backend.c: layernorm_bwd16d: out of memory for the widened gradient "
                      "(nothing computed)";
            return;
        }
        zt_cpu_from_bf16(d, dout16, (size_t)N * C);
        dout = d;
    }
    zt_cpu_layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    if (dinp16) zt_cpu_to_bf16(dinp16, dinp, (size_t)N * C);
    if (dsum) zt_cpu_colsum_acc(dsum, dinp, N, C, (size_t)C);
    free(d);
}
/* (dgu NULL: the fp32 values made in host scratch of our own, then only
 * dgu16 written) */
static float *glu_dgu(float *dgu, int N, int H, float **own) {
    *own = NULL;
    if (dgu) return dgu;
    *own = malloc((size_t)N * 2 * H * sizeof(float));
    if (!*own)
        cpu_err = "cpu_backend.c: swiglu / geglu _bwd_d16: out of memory for the fp32 gradient "
                  "(nothing computed)";
    return *own;
}
static void cpu_swiglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout,
                               const uint16_t *gu16, int N, int H) {
    if (N <= 0 || H <= 0) return;
    float *own, *d = glu_dgu(dgu, N, H, &own);
    if (!d) return;
    cpu_swiglu_bwd16(d, dout, gu16, N, H);
    zt_cpu_to_bf16(dgu16, d, (size_t)N * 2 * H);
    free(own);
}
static void cpu_geglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                              int N, int H) {
    if (N <= 0 || H <= 0) return;
    float *own, *d = glu_dgu(dgu, N, H, &own);
    if (!d) return;
    cpu_geglu_bwd16(d, dout, gu16, N, H);
    zt_cpu_to_bf16(dgu16, d, (size_t)N * 2 * H);
    free(own);
}
/* swiglu_bwd_dd16 / geglu_bwd_dd16 (backend.h): dout16 widened into host
 * scratch of our own, then the _bwd_d16 entry on those exact values */
static void glu_bwd_dd16(int geglu, float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                         const uint16_t *gu16, int N, int H) {
    if (N <= 0 || H <= 0) return;
    float *d = malloc((size_t)N * H * sizeof(float));
    if (!d) {
        cpu_err = "cpu_backend.c: swiglu / geglu _bwd_dd16: out of memory for the widened "
                  "gradient (nothing computed)";
        return;
    }
    zt_cpu_from_bf16(d, dout16, (size_t)N * H);
    if (geglu) cpu_geglu_bwd_d16(dgu, dgu16, d, gu16, N, H);
    else cpu_swiglu_bwd_d16(dgu, dgu16, d, gu16, N, H);
    free(d);
}
static void cpu_swiglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                                const uint16_t *gu16, int N, int H) {
    glu_bwd_dd16(0, dgu, dgu16, dout16, gu16, N, H);
}
static void cpu_geglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                               const uint16_t *gu16, int N, int H) {
    glu_bwd_dd16(1, dgu, dgu16, dout16, gu16, N, H);
}

/* ------------------------------------------------------------ elementwise */

static void cpu_add(float *out, const float *a, const float *b, size_t n);

/* the residual add and the next norm of backend.h: exactly the unfused calls */
static void cpu_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                  const float *b, const float *w, const float *bias, int N, int C) {
    if (N <= 0 || C <= 0) return;
    cpu_add(res, a, b, (size_t)N * C);
    zt_cpu_layernorm_fwd(out, mean, rstd, res, w, bias, N, C);
}

static void cpu_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                                const float *w, float eps, int N, int C) {
    if (N <= 0 || C <= 0) return;
    cpu_add(res, a, b, (size_t)N * C);
    zt_cpu_rmsnorm_fwd(out, rstd, res, w, eps, N, C);
}

/* the norms writing bf16 (backend.h): the fp32 entry into tmp, then
 * to_bf16; bitwise that sequence by construction */
static void cpu_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                                const float *inp, const float *w, const float *b, int N, int C) {
    if (N <= 0 || C <= 0) return;
    zt_cpu_layernorm_fwd(tmp, mean, rstd, inp, w, b, N, C);
    zt_cpu_to_bf16(out16, tmp, (size_t)N * C);
}
static void cpu_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                              const float *w, float eps, int N, int C) {
    if (N <= 0 || C <= 0) return;
    zt_cpu_rmsnorm_fwd(tmp, rstd, inp, w, eps, N, C);
    zt_cpu_to_bf16(out16, tmp, (size_t)N * C);
}
static void cpu_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean,
                                    float *rstd, const float *a, const float *b, const float *w,
                                    const float *bias, int N, int C) {
    if (N <= 0 || C <= 0) return;
    cpu_add_layernorm_fwd(res, tmp, mean, rstd, a, b, w, bias, N, C);
    zt_cpu_to_bf16(out16, tmp, (size_t)N * C);
}
static void cpu_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd,
                                  const float *a, const float *b, const float *w, float eps, int N,
                                  int C) {
    if (N <= 0 || C <= 0) return;
    cpu_add_rmsnorm_fwd(res, tmp, rstd, a, b, w, eps, N, C);
    zt_cpu_to_bf16(out16, tmp, (size_t)N * C);
}
/* (the branch widened into tmp, then add_layernorm_fwd16: res written
 * before the norm overwrites tmp) */
static void cpu_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean,
                                     float *rstd, const float *a, const uint16_t *b16,
                                     const float *w, const float *bias, int N, int C) {
    if (N <= 0 || C <= 0) return;
    zt_cpu_from_bf16(tmp, b16, (size_t)N * C);
    cpu_add_layernorm_fwd16(res, out16, tmp, mean, rstd, a, tmp, w, bias, N, C);
}
/* (the branch widened into tmp, then add_rmsnorm_fwd16: res written before
 * the norm overwrites tmp) */
static void cpu_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                   const float *a, const uint16_t *b16, const float *w, float eps,
                                   int N, int C) {
    if (N <= 0 || C <= 0) return;
    zt_cpu_from_bf16(tmp, b16, (size_t)N * C);
    cpu_add_rmsnorm_fwd16(res, out16, tmp, rstd, a, tmp, w, eps, N, C);
}

/* the attention's output in bf16 (backend.h): gqa_ext_fwd16 into out,
 * then to_bf16; from_bf16 into out, then gqa_ext_bwd16: bitwise those
 * sequences by construction */
static void cpu_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16,
                               float *tmp, int B, int T, int NH, int NKV, int hd,
                               const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hd <= 0) return;
    cpu_gqa_ext_fwd16(out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    zt_cpu_to_bf16(out16, out, (size_t)B * T * NH * hd);
}
static void cpu_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                               const uint16_t *out16, float *out, const float *lse, int B, int T,
                               int NH, int NKV, int hd, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hd <= 0) return;
    zt_cpu_from_bf16(out, out16, (size_t)B * T * NH * hd);
    cpu_gqa_ext_bwd16(dqkv, dout, qkv16, tmp, out, lse, B, T, NH, NKV, hd, o);
}
/* the gradient in bf16 (backend.h gqa_ext_bwd16d): the cpu backends'
 * gradient is fp32, so gqa_ext_bwd16o, dqkv16 untouched (0) */
static int cpu_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                              float *tmp, const uint16_t *out16, float *out, const float *lse, int B,
                              int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    (void)dqkv16;
    cpu_gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    return 0;
}

/* RoPE's backward on the bf16 gradient (backend.h rope_bwd16): x16
 * widened into host scratch (exact), rope_bwd in place there, dbias the
 * column sums of those fp32 values (matmul_bwd's zt_cpu_colsum_acc), then
 * to_bf16 back into x16; bitwise that sequence by construction */
static void cpu_rope_bwd16(uint16_t *x16, float *dbias, const float *inv_freq, int B, int T,
                           int n_heads, int stride, int hd, float scale) {
    if (B <= 0 || T <= 0 || stride <= 0) return;
    float *x = widen_a16(x16, B * T, stride);
    if (!x) return;
    zt_cpu_rope_bwd(x, inv_freq, B, T, n_heads, stride, hd, scale);
    if (dbias) zt_cpu_colsum_acc(dbias, x, B * T, stride, (size_t)stride);
    zt_cpu_to_bf16(x16, x, (size_t)B * T * stride);
    free(x);
}

/* the output's gradient in bf16 (backend.h att_do16 / gqa_ext_bwd16do):
 * the cpu backends' attention backward reads the fp32 dout, so no path
 * reads dout16 as it is (0); gqa_ext_bwd16do widens dout16 (exact) into
 * host scratch and is gqa_ext_bwd16d on it */
static int cpu_att_do16(int B, int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    (void)B, (void)T, (void)NH, (void)NKV, (void)hd, (void)o;
    return 0;
}
static int cpu_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                               float *tmp, const uint16_t *out16, float *out, const float *lse, int B,
                               int T, int NH, int NKV, int hd, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hd <= 0) return 0;
    float *dout = widen_a16(dout16, B * T, NH * hd);
    if (!dout) return 0;
    const int r = cpu_gqa_ext_bwd16d(dqkv, dqkv16, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    free(dout);
    return r;
}

/* RoPE writing bf16 (backend.h): rope_fwd in place on x, then to_bf16 of
 * the rows; bitwise that sequence by construction */
static void cpu_rope_fwd16(uint16_t *qkv16, float *x, const float *inv_freq, int B, int T,
                           int n_heads, int stride, int hd, float scale) {
    if (B <= 0 || T <= 0 || stride <= 0) return;
    zt_cpu_rope_fwd(x, inv_freq, B, T, n_heads, stride, hd, scale);
    zt_cpu_to_bf16(qkv16, x, (size_t)B * T * stride);
}

/* Qwen3's q/k norms then RoPE writing bf16 (backend.h): headnorm_fwd on
 * the q and the k heads in place on x, then cpu_rope_fwd16; bitwise that
 * sequence by construction */
static void cpu_qknorm_rope_fwd16(uint16_t *qkv16, float *x, float *raw, float *rstd,
                                  const float *qw, const float *kw, float eps,
                                  const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                                  int knh, int stride, int hd, float scale) {
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const int N = B * T;
    const size_t AD = (size_t)NH * hd;
    if (qnh > 0) zt_cpu_headnorm_fwd(x, raw, rstd, qw, eps, N, qnh, stride, NH * hd / qnh);
    if (knh > 0)
        zt_cpu_headnorm_fwd(x + AD, raw + (size_t)N * AD, rstd + (size_t)N * NH, kw, eps, N, knh,
                            stride, NKV * hd / knh);
    cpu_rope_fwd16(qkv16, x, inv_freq, B, T, NH + NKV, stride, hd, scale);
}

/* Qwen3's q/k norms' backward on the bf16 gradient (backend.h
 * qknorm_rope_bwd16): the rows widened into host scratch (exact),
 * rope_bwd, headnorm_bwd on the q and the k groups in place there, then
 * the q and k heads' columns rounded back into dqkv16 (the v columns, not
 * touched, would round to themselves); bitwise that sequence by
 * construction */
static void cpu_qknorm_rope_bwd16(uint16_t *dqkv16, float *dqw, float *dkw, const float *raw,
                                  const float *rstd, const float *qw, const float *kw,
                                  const float *inv_freq, int B, int T, int NH, int NKV, int qnh,
                                  int knh, int stride, int hd, float scale) {
    if (B <= 0 || T <= 0 || stride <= 0) return;
    const int N = B * T;
    const size_t AD = NH > 0 && hd > 0 ? (size_t)NH * hd : 0;
    const size_t qk = NKV > 0 && hd > 0 ? AD + (size_t)NKV * hd : AD;
    if (qk > (size_t)stride) return;   /* (heads past the row: nothing computed) */
    float *x = widen_a16(dqkv16, N, stride);
    if (!x) return;
    zt_cpu_rope_bwd(x, inv_freq, B, T, NH + NKV, stride, hd, scale);
    if (qnh > 0 && NH > 0 && hd > 0)
        zt_cpu_headnorm_bwd(x, dqw, raw, qw, rstd, N, qnh, stride, NH * hd / qnh);
    if (knh > 0 && NKV > 0 && hd > 0)
        zt_cpu_headnorm_bwd(x + AD, dkw, raw + (size_t)N * AD, kw, rstd + (size_t)N * NH, N, knh,
                            stride, NKV * hd / knh);
    for (int n = 0; n < N; n++)
        zt_cpu_to_bf16(dqkv16 + (size_t)n * stride, x + (size_t)n * stride, qk);
    free(x);
}

static void cpu_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* matmul_dinp_acc (backend.h): matmul_bwd's dinp into host scratch, then
 * add: that sequence by construction (sgemm with beta = 1 would leave the
 * order of the sum to BLAS's blocking) */
static void cpu_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C,
                                int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    float *tmp = malloc((size_t)N * C * sizeof(float));
    if (!tmp) {
        cpu_err = "cpu_backend.c: matmul_dinp_acc: out of memory for the product (nothing computed)";
        return;
    }
    cpu_matmul_bwd(tmp, NULL, NULL, dout, NULL, w, N, C, OC);
    cpu_add(dinp, dinp, tmp, (size_t)N * C);
    free(tmp);
}

/* matmul_fwd_acc (backend.h): the beta-0 entry's product into host scratch,
 * then add (as matmul_dinp_acc: never sgemm with beta = 1) */
static void cpu_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                               const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    float *tmp = malloc((size_t)N * OC * sizeof(float));
    if (!tmp) {
        cpu_err = "cpu_backend.c: matmul_fwd_acc: out of memory for the product (nothing computed)";
        return;
    }
    if (inp16) cpu_matmul_fwd_a16(tmp, inp16, w, w16, NULL, N, C, OC);
    else if (w16) cpu_matmul_fwd_w16(tmp, inp, w16, NULL, N, C, OC);
    else cpu_matmul_fwd(tmp, inp, w, NULL, N, C, OC);
    cpu_add(out, out, tmp, (size_t)N * OC);
    free(tmp);
}

/* matmul_fwd_acc16 (backend.h): out widened (exact) into host scratch,
 * matmul_fwd_acc on it, then to_bf16: that sequence by construction */
static void cpu_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                 const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    const size_t n = (size_t)N * OC;
    float *out = malloc(n * sizeof(float));
    if (!out) {
        cpu_err = "cpu_backend.c: matmul_fwd_acc16: out of memory for the fp32 output (nothing computed)";
        return;
    }
    zt_cpu_from_bf16(out, out16, n);
    cpu_matmul_fwd_acc(out, inp, inp16, w, w16, N, C, OC);
    zt_cpu_to_bf16(out16, out, n);
    free(out);
}

/* matmul_bwd_acc (backend.h): the beta-0 entry's dinp into host scratch,
 * then add (as matmul_dinp_acc: never sgemm with beta = 1) */
static void cpu_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    float *tmp = malloc((size_t)N * C * sizeof(float));
    if (!tmp) {
        cpu_err = "cpu_backend.c: matmul_bwd_acc: out of memory for the product (nothing computed)";
        return;
    }
    if (dout16) cpu_matmul_bwd_d16(tmp, NULL, NULL, NULL, dout16, NULL, NULL, w, w16, N, C, OC);
    else if (w16) cpu_matmul_bwd_w16(tmp, NULL, NULL, dout, NULL, w16, N, C, OC);
    else cpu_matmul_bwd(tmp, NULL, NULL, dout, NULL, w, N, C, OC);
    cpu_add(dinp, dinp, tmp, (size_t)N * C);
    free(tmp);
}

/* matmul_bwd_acc16 (backend.h): dinp16 widened (exact) into host scratch,
 * matmul_bwd_acc on it, then to_bf16: that sequence by construction */
static void cpu_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                                 const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    const size_t n = (size_t)N * C;
    float *dinp = malloc(n * sizeof(float));
    if (!dinp) {
        cpu_err = "cpu_backend.c: matmul_bwd_acc16: out of memory for the fp32 gradient (nothing computed)";
        return;
    }
    zt_cpu_from_bf16(dinp, dinp16, n);
    cpu_matmul_bwd_acc(dinp, dout, dout16, w, w16, N, C, OC);
    zt_cpu_to_bf16(dinp16, dinp, n);
    free(dinp);
}

/* matmul_grouped_o16 (backend.h): the per-block matmul_fwd_o16 loop, the
 * fp32 values in host scratch of its own (the largest block's) */
static void cpu_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                   const uint16_t *w16, const int *n, int G, int C, int OC) {
    if (G <= 0 || OC <= 0 || !n) return;
    int mx = 0;
    for (int g = 0; g < G; ++g) mx = n[g] > mx ? n[g] : mx;
    if (mx == 0) return;
    float *tmp = malloc((size_t)mx * OC * sizeof(float));
    if (!tmp) {
        cpu_err = "cpu_backend.c: matmul_grouped_o16: out of memory for the fp32 outputs (nothing computed)";
        return;
    }
    size_t o = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        cpu_matmul_fwd_o16(out16 + o * OC, tmp, inp16 ? NULL : inp + o * C, inp16 ? inp16 + o * C : NULL,
                           NULL, w16 + (size_t)g * OC * C, NULL, n[g], C, OC);
        o += (size_t)n[g];
    }
    free(tmp);
}

/* matmul_grouped_bwd_o16 (backend.h): the per-block matmul_bwd_o16 loop
 * (input gradients alone), tmp each block's fp32 scratch in turn */
static void cpu_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16,
                                       const uint16_t *w16, const int *n, int G, int C, int OC) {
    if (G <= 0 || C <= 0 || !n) return;
    size_t o = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        cpu_matmul_bwd_o16(dinp16 + o * C, tmp, NULL, NULL, NULL, dout16 + o * OC, NULL, NULL, NULL,
                           w16 + (size_t)g * OC * C, n[g], C, OC);
        o += (size_t)n[g];
    }
}

/* matmul_grouped_dw16 (backend.h): per block with rows, the product as
 * matmul_bwd_d16's dW computes it (the bf16 operands widened, exact; beta
 * 0 into host scratch of its own), then dw_g = (fresh ? 0 : dw_g) +
 * round_bf16(product), in order; tmp16 unused */
static void cpu_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                    const uint16_t *inp16, const int *n, int G, int C, int OC) {
    (void)tmp16, (void)tmp_n;
    if (G <= 0 || C <= 0 || OC <= 0 || !n || !dw) return;
    const size_t wn = (size_t)OC * C;
    float *p = malloc(wn * sizeof(float));
    if (!p) {
        cpu_err = "cpu_backend.c: matmul_grouped_dw16: out of memory for a block's product (nothing computed)";
        return;
    }
    size_t o = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        float *d = widen_a16(dout16 + o * OC, n[g], OC), *x = d ? widen_a16(inp16 + o * C, n[g], C) : NULL;
        if (x) {
            gemm_par(1, 0, OC, C, n[g], d, OC, x, C, 0.0f, p, C);
            float *dg = dw + (size_t)g * wn;
            const int fresh = dw_beta(dg) == 0.0f;
#pragma omp parallel for simd schedule(static) if (wn >= ZT_PAR_MIN)
            for (size_t i = 0; i < wn; i++) dg[i] = (fresh ? 0.0f : dg[i]) + zt_cpu_round_bf16(p[i]);
        }
        free(x);
        free(d);
        if (!x) break;   /* (widen_a16 recorded it) */
        o += (size_t)n[g];
    }
    free(p);
}

static void cpu_scale(float *x, size_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_dropout(float *y, const float *x, size_t rows, size_t C, uint64_t key,
                        uint64_t row0, float p) {
    const float s = (float)(1.0 / (1.0 - (double)p));
    const size_t n = rows * C;
    const uint64_t c0 = row0 * (uint64_t)C;
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = zt_dropout_one(x[i], key, c0 + i, p, s);
}

/* Sum of squares in double over fixed-size chunks whose partials are added
 * in chunk order: the result does not depend on the thread count. */
#define ZT_SUMSQ_MAXCHUNKS 1024
/* In index order, one thread: the engine's loss sums (N = B*T values per
 * micro-batch) stay exactly the sequential double sum. */
static double cpu_sum(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

static double cpu_sumsq(const float *x, size_t n) {
    if (n == 0) return 0.0;
    size_t chunk = 65536;
    if (n / chunk >= ZT_SUMSQ_MAXCHUNKS) chunk = n / ZT_SUMSQ_MAXCHUNKS + 1;
    const size_t nchunks = (n + chunk - 1) / chunk;
    double part[ZT_SUMSQ_MAXCHUNKS];
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (size_t k = 0; k < nchunks; k++) {
        const size_t i0 = k * chunk;
        const size_t i1 = i0 + chunk < n ? i0 + chunk : n;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t i = i0; i < i1; i++) s += (double)x[i] * (double)x[i];
        part[k] = s;
    }
    double s = 0.0;
    for (size_t k = 0; k < nchunks; k++) s += part[k];
    return s;
}

/* ------------------------------------------------------------ AdamW */

/* AdamW, vectorized: with the default -fmath-errno GCC will not vectorize
 * sqrtf (nor does optimize("no-math-errno") help), so on x86-64 with AVX2
 * the 8-lane body is written with intrinsics: exactly zt_adamw_step's
 * operations, in its order, without FMA (target avx2 only), each correctly
 * rounded per lane, so the results are bitwise those of the scalar loop
 * (kernels/adamw_step.h: keep the two in step).  Returns the number of
 * elements done (a multiple of 8); the caller finishes the tail. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(ZT_NO_TARGET_CLONES)
#include <immintrin.h>
#define ZT_ADAMW_AVX2 1
__attribute__((target("avx2")))
static size_t adamw_avx2(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                         float b1, float b2, float ob1, float ob2, float eps, float wd,
                         float bc1, float bc2, float grad_scale) {
    const __m256 vlr = _mm256_set1_ps(lr), vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
    const __m256 vob1 = _mm256_set1_ps(ob1), vob2 = _mm256_set1_ps(ob2);
    const __m256 veps = _mm256_set1_ps(eps), vwd = _mm256_set1_ps(wd);
    const __m256 vbc1 = _mm256_set1_ps(bc1), vbc2 = _mm256_set1_ps(bc2);
    const __m256 vgs = _mm256_set1_ps(grad_scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), vgs);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)),
                                        _mm256_mul_ps(vob1, g));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                        _mm256_mul_ps(_mm256_mul_ps(vob2, g), g));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 mhat = _mm256_div_ps(mi, vbc1);
        const __m256 vhat = _mm256_div_ps(vi, vbc2);
        const __m256 pi = _mm256_loadu_ps(p + i);
        const __m256 q = _mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), veps));
        const __m256 r = _mm256_add_ps(q, _mm256_mul_ps(vwd, pi));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(vlr, r)));
    }
    return i;
}
#endif

static void adamw_chunk(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                        float b1, float b2, float ob1, float ob2, float eps, float wd,
                        float bc1, float bc2, float grad_scale, int avx2) {
    size_t i0 = 0;
#ifdef ZT_ADAMW_AVX2
    if (avx2) i0 = adamw_avx2(p, grad, m, v, n, lr, b1, b2, ob1, ob2, eps, wd, bc1, bc2, grad_scale);
#else
    (void)avx2;
#endif
    for (size_t i = i0; i < n; i++)
        zt_adamw_step(p, grad, m, v, i, lr, b1, b2, ob1, ob2, eps, wd, bc1, bc2, grad_scale);
}

#define ZT_ADAMW_CHUNK 16384

static void cpu_adamw(float *p, const float *grad, float *m, float *v, size_t n,
                      float lr, float b1, float b2, float eps, float wd,
                      float bc1, float bc2, float grad_scale) {
    const float ob1 = 1.0f - b1, ob2 = 1.0f - b2;
    const size_t nch = (n + ZT_ADAMW_CHUNK - 1) / ZT_ADAMW_CHUNK;
#ifdef ZT_ADAMW_AVX2
    const int avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx2 = 0;
#endif
#pragma omp parallel for schedule(static) if (n >= ZT_PAR_MIN)
    for (size_t k = 0; k < nch; k++) {
        const size_t i0 = k * ZT_ADAMW_CHUNK;
        const size_t c = n - i0 < ZT_ADAMW_CHUNK ? n - i0 : ZT_ADAMW_CHUNK;
        adamw_chunk(p + i0, grad + i0, m + i0, v + i0, c, lr, b1, b2, ob1, ob2, eps, wd,
                    bc1, bc2, grad_scale, avx2);
    }
}

/* ------------------------------------------------------------ the step without host reads */

static void cpu_sum_to(double *dst, const float *x, size_t n) { *dst += cpu_sum(x, n); }

static void cpu_sumsq_to(double *dst, const float *const *x, const size_t *n, int nr) {
    double s = 0.0;
    for (int r = 0; r < nr; r++)
        if (n[r]) s += cpu_sumsq(x[r], n[r]);
    *dst = s;
}

static void cpu_nonfinite_to(uint64_t *dst, const float *const *x, const size_t *n, int nr) {
    uint64_t c = 0;
    for (int r = 0; r < nr; r++)
        if (n[r]) c += (uint64_t)zt_cpu_nonfinite(x[r], n[r]);
    *dst = c;
}

/* Per segment: cpu_adamw on its elements, then its 16-bit copy rounded as
 * to_bf16 / to_f16 round it: what adamw per tensor and a narrowing pass
 * compute, element for element. */
static void cpu_adamw_multi(float *p, const float *grad, float *m, float *v, uint16_t *p16,
                            int hprec, unsigned logical, const zt_adamw_seg *seg, int nseg,
                            const zt_adamw_hyper *h) {
    float gs = h->grad_scale;
    if (h->gate) {
        const zt_step_scalars sc = *h->gate;
        if (sc.nonfinite || !isfinite(sc.loss_sum) || !isfinite(sc.sumsq)) return;
        gs = (float)zt_adamw_clip(sqrt(sc.sumsq), h->max_norm);
    }
    for (int i = 0; i < nseg; i++) {
        const size_t k = seg[i].start, n = seg[i].n;
        if (!n) continue;
        float *pp = p + k + (logical & ZT_ADAMW_P_LOGICAL ? seg[i].shift : 0);
        const float *gg = grad + k + (logical & ZT_ADAMW_G_LOGICAL ? seg[i].shift : 0);
        cpu_adamw(pp, gg, m + k, v + k, n, h->lr, h->b1, h->b2, h->eps, seg[i].wd, h->bc1, h->bc2,
                  gs);
        if (!hprec || !p16) continue;
        uint16_t *hh = p16 + k + (logical & ZT_ADAMW_H_LOGICAL ? seg[i].shift : 0);
        if (hprec == ZT_ADAMW_H_BF16) zt_cpu_to_bf16(hh, pp, n);
        else zt_cpu_to_f16(hh, pp, n);
    }
}

/* ------------------------------------------------------------ the table */

/* from_bf16_runs (backend.h): from_bf16 run by run, placed one after the
 * other */
static void cpu_from_bf16_runs(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr) {
    for (int r = 0; r < nr; ++r) {
        if (n[r]) zt_cpu_from_bf16(out, in + off[r], n[r]);
        out += n[r];
    }
}

static const zt_backend cpu_backend = {
    .name = "cpu",
    .set_threads = cpu_set_threads,
    .error = cpu_error,
    .synchronize = cpu_synchronize,
    .alloc = cpu_alloc,
    .alloc_nz = cpu_alloc_nz,
    .free = cpu_free,
    .copy = cpu_copy,
    .copy2d = cpu_copy2d,
    .to_host = cpu_copy,
    .to_device = cpu_copy,
    .zero = cpu_zero,
    .encoder_fwd = zt_cpu_encoder_fwd,
    .encoder_fwd_w16 = zt_cpu_encoder_fwd_w16,
    .encoder_bwd = zt_cpu_encoder_bwd,
    .layernorm_fwd = zt_cpu_layernorm_fwd,
    .layernorm_bwd = zt_cpu_layernorm_bwd,
    .matmul_fwd = cpu_matmul_fwd,
    .matmul_bwd = cpu_matmul_bwd,
    .set_matmul_precision = cpu_set_matmul_precision,
    .attention_fwd = zt_cpu_attention_fwd,
    .attention_bwd = zt_cpu_attention_bwd,
    .rmsnorm_fwd = zt_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = zt_cpu_rmsnorm_bwd,
    .headnorm_fwd = zt_cpu_headnorm_fwd,
    .headnorm_bwd = zt_cpu_headnorm_bwd,
    .rope_fwd = zt_cpu_rope_fwd,
    .rope_bwd = zt_cpu_rope_bwd,
    .swiglu_fwd = zt_cpu_swiglu_fwd,
    .swiglu_bwd = zt_cpu_swiglu_bwd,
    .gqa_fwd = zt_cpu_gqa_fwd,
    .gqa_bwd = zt_cpu_gqa_bwd,
    .gqa_ext_fwd = zt_cpu_gqa_ext_fwd,
    .gqa_ext_bwd = zt_cpu_gqa_ext_bwd,
    .geglu_fwd = zt_cpu_geglu_fwd,
    .geglu_bwd = zt_cpu_geglu_bwd,
    .moe_route_fwd = zt_cpu_moe_route_fwd,
    .moe_route_bwd = zt_cpu_moe_route_bwd,
    .rows_gather = zt_cpu_rows_gather,
    .rows_scatter = zt_cpu_rows_scatter,
    .rows_dot = zt_cpu_rows_dot,
    .moe_permute = zt_cpu_moe_permute,
    .moe_regroup = zt_cpu_moe_regroup,
    .sigmoid_fwd = zt_cpu_sigmoid_fwd,
    .sigmoid_bwd = zt_cpu_sigmoid_bwd,
    .softcap_fwd = zt_cpu_softcap_fwd,
    .softcap_bwd = zt_cpu_softcap_bwd,
    .gelu_fwd = zt_cpu_gelu_fwd,
    .gelu_bwd = zt_cpu_gelu_bwd,
    .add = cpu_add,
    .xent_fwd = zt_cpu_xent_fwd,
    .xent_bwd = zt_cpu_xent_bwd,
    .xent_fused = zt_cpu_xent_fused,
    .adamw = cpu_adamw,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .dropout = cpu_dropout,
    .to_bf16 = zt_cpu_to_bf16,
    .from_bf16 = zt_cpu_from_bf16,
    .to_f16 = zt_cpu_to_f16,
    .from_f16 = zt_cpu_from_f16,
    .nonfinite = zt_cpu_nonfinite,
    .nf4_dequant = zt_cpu_nf4_dequant,
    .sum = cpu_sum,
    .host_memory = 1,
    .sum_to = cpu_sum_to,
    .sumsq_to = cpu_sumsq_to,
    .nonfinite_to = cpu_nonfinite_to,
    .adamw_multi = cpu_adamw_multi,
    .matmul_gelu_fwd = cpu_matmul_gelu_fwd,
    .matmul_dgelu_bwd = cpu_matmul_dgelu_bwd,
    .matmul_fwd_w16 = cpu_matmul_fwd_w16,
    .matmul_bwd_w16 = cpu_matmul_bwd_w16,
    .matmul_gelu_fwd_w16 = cpu_matmul_gelu_fwd_w16,
    .matmul_dgelu_bwd_w16 = cpu_matmul_dgelu_bwd_w16,
    .matmul_fwd_a16 = cpu_matmul_fwd_a16,
    .matmul_bwd_a16 = cpu_matmul_bwd_a16,
    .matmul_gelu_fwd_a16 = cpu_matmul_gelu_fwd_a16,
    .matmul_dgelu_bwd_a16 = cpu_matmul_dgelu_bwd_a16,
    .add_layernorm_fwd = cpu_add_layernorm_fwd,
    .add_rmsnorm_fwd = cpu_add_rmsnorm_fwd,
    .matmul_fwd_o16 = cpu_matmul_fwd_o16,
    .gelu_fwd16 = cpu_gelu_fwd16,
    .swiglu_fwd16 = cpu_swiglu_fwd16,
    .geglu_fwd16 = cpu_geglu_fwd16,
    .gelu_fwd16r = cpu_gelu_fwd16r,
    .matmul_gelu_fwd_o16 = cpu_matmul_gelu_fwd_o16,
    .swiglu_fwd16r = cpu_swiglu_fwd16r,
    .geglu_fwd16r = cpu_geglu_fwd16r,
    .swiglu_bwd16 = cpu_swiglu_bwd16,
    .geglu_bwd16 = cpu_geglu_bwd16,
    .gqa_ext_fwd16 = cpu_gqa_ext_fwd16,
    .gqa_ext_bwd16 = cpu_gqa_ext_bwd16,
    .layernorm_fwd16 = cpu_layernorm_fwd16,
    .rmsnorm_fwd16 = cpu_rmsnorm_fwd16,
    .add_layernorm_fwd16 = cpu_add_layernorm_fwd16,
    .add_rmsnorm_fwd16 = cpu_add_rmsnorm_fwd16,
    .add_rmsnorm_fwd16b = cpu_add_rmsnorm_fwd16b,
    .add_layernorm_fwd16b = cpu_add_layernorm_fwd16b,
    .rope_fwd16 = cpu_rope_fwd16,
    .qknorm_rope_fwd16 = cpu_qknorm_rope_fwd16,
    .xent16_fwd = zt_cpu_xent16_fwd,
    .xent16_fused = zt_cpu_xent16_fused,
    .matmul_bwd_head16 = cpu_matmul_bwd_head16,
    .gqa_ext_fwd16o = cpu_gqa_ext_fwd16o,
    .gqa_ext_bwd16o = cpu_gqa_ext_bwd16o,
    .matmul_bwd_d16 = cpu_matmul_bwd_d16,
    .matmul_dgelu_bwd_d16 = cpu_matmul_dgelu_bwd_d16,
    .layernorm_bwd16 = cpu_layernorm_bwd16,
    .layernorm_bwd16d = cpu_layernorm_bwd16d,
    .rmsnorm_bwd16 = cpu_rmsnorm_bwd16,
    .rmsnorm_bwd16d = cpu_rmsnorm_bwd16d,
    .swiglu_bwd_d16 = cpu_swiglu_bwd_d16,
    .geglu_bwd_d16 = cpu_geglu_bwd_d16,
    .swiglu_bwd_dd16 = cpu_swiglu_bwd_dd16,
    .geglu_bwd_dd16 = cpu_geglu_bwd_dd16,
    .gqa_ext_bwd16d = cpu_gqa_ext_bwd16d,
    .matmul_dgelu_bwd_o16 = cpu_matmul_dgelu_bwd_o16,
    .rope_bwd16 = cpu_rope_bwd16,
    .att_do16 = cpu_att_do16,
    .matmul_bwd_o16 = cpu_matmul_bwd_o16,
    .gqa_ext_bwd16do = cpu_gqa_ext_bwd16do,
    .matmul_dinp_acc = cpu_matmul_dinp_acc,
    .matmul_fwd_acc = cpu_matmul_fwd_acc,
    .matmul_fwd_acc16 = cpu_matmul_fwd_acc16,
    .matmul_bwd_acc = cpu_matmul_bwd_acc,
    .matmul_bwd_acc16 = cpu_matmul_bwd_acc16,
    .matmul_grouped_o16 = cpu_matmul_grouped_o16,
    .rows_gather16 = zt_cpu_rows_gather16,
    .rows_dot16 = zt_cpu_rows_dot16,
    .rows_scatter16 = zt_cpu_rows_scatter16,
    .set_dw_fresh = cpu_set_dw_fresh,
    .qknorm_rope_bwd16 = cpu_qknorm_rope_bwd16,
    .matmul_grouped_bwd_o16 = cpu_matmul_grouped_bwd_o16,
    .rows_dot16h = zt_cpu_rows_dot16h,
    .dw_fresh = cpu_dw_fresh,
    .rows_sum16 = zt_cpu_rows_sum16,
    .matmul_grouped_dw16 = cpu_matmul_grouped_dw16,
    .rows_gather_o16 = zt_cpu_rows_gather_o16,
    .from_bf16_runs = cpu_from_bf16_runs,
};

const zt_backend *zt_backend_cpu(void) { return &cpu_backend; }
