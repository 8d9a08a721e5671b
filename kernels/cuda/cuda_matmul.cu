/*
 * cuda_matmul.cu -- the linear layer on cuBLAS.
 *
 * Row-major out[N,OC] = inp[N,C] @ w[OC,C]^T is the column-major product
 * out^T[OC,N] = op_T(w)[OC,C] @ inp^T[C,N], so no data is transposed:
 *   forward   out^T  = w^T'   inp^T     (m=OC, n=N,  k=C;  A=w T, B=inp N)
 *   dinp      dinp^T = w^T    dout^T    (m=C,  n=N,  k=OC; A=w N, B=dout N)
 *   dw (+=)   dw^T   = inp^T  dout      (m=C,  n=OC, k=N;  A=inp N, B=dout T)
 *
 * Precision: ZT_MATMUL_FP32 is plain fp32 (CUBLAS_COMPUTE_32F: no TF32).
 * ZT_MATMUL_BF16 rounds each operand to bf16 into scratch (nearest even)
 * and multiplies with fp32 accumulation and fp32 outputs.  The backward
 * rounds dout once (scratch [dout16 | the other operand]) and both of its
 * GEMMs (dinp, dw) read that copy: the same bits as rounding it for each.
 *
 * Implementation: cuBLASLt with a user-owned workspace (bitwise
 * reproducible run to run) and the bias added in the epilogue; the chosen
 * algorithm is cached per problem.  If Lt has no algorithm for a problem,
 * or zt_cuda_set_gemm_impl(0) was called, cublasGemmEx + a bias kernel.
 * dbias is a fixed-order column sum (zt_cuda_colsum_acc), never atomics.
 *
 * GPT-2's MLP fuses its GELU into the GEMMs' epilogues (cuBLASLt's GELU is
 * the tanh approximation, gelu_fwd's formula): matmul_gelu_fwd is the fc
 * GEMM with CUBLASLT_EPILOGUE_GELU_AUX_BIAS (D = gelu(pre), the aux output
 * pre = the GEMM + bias, kept for the backward); matmul_dgelu_bwd's
 * input-gradient GEMM takes CUBLASLT_EPILOGUE_DGELU_BGRAD (D = GEMM *
 * gelu'(aux = pre), and the column sums of D, fc's bias gradient, into
 * scratch, then added: the epilogue overwrites, the table accumulates).
 * Where Lt has no algorithm for an epilogue, or a pointer is less than 16
 * bytes aligned or the aux ld not a multiple of 8 (cuBLASLt's
 * requirement), the unfused kernels run instead.  The projection's own
 * bias gradient stays a column sum: CUBLASLT_EPILOGUE_BGRADB would reduce
 * the GEMM's operand, which in bf16 mode is dout rounded to bf16.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <string.h>

#include "cuda_convert.h"
#include "cuda_internal.cuh"

#define ZT_WS_BYTES ZT_CUDA_CUBLAS_WS_BYTES   /* cuBLAS(Lt) workspace (cuda_workspace.h) */

static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_ws;
static int g_mode = ZT_MATMUL_FP32;
static int g_use_lt = 1;

static const char *blas_hint(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED: return "out of GPU memory";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "this GPU does not support the operation";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "unsupported shape or type combination";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "a cuBLAS kernel failed to run";
    case CUBLAS_STATUS_INVALID_VALUE: return "bad argument (a bug: please report)";
    default: return NULL;
    }
}

static bool blas_ok(cublasStatus_t s, const char *file, int line, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    zt_cuda_fail(file, line, what, cublasGetStatusString(s), blas_hint(s));
    return false;
}
#define ZT_BLAS(call) blas_ok((call), __FILE__, __LINE__, #call)

bool zt_cuda_matmul_init(void) {
    if (!ZT_BLAS(cublasCreate(&g_blas))) return false;
    if (!ZT_BLAS(cublasLtCreate(&g_lt))) goto fail_blas;
    g_ws = zt_cuda_malloc_acct(ZT_WS_BYTES, "cuBLAS workspace");
    if (!g_ws) goto fail_lt;
    if (!ZT_BLAS(cublasSetStream(g_blas, zt_cu.stream)) ||
        !ZT_BLAS(cublasSetWorkspace(g_blas, g_ws, ZT_WS_BYTES)) ||
        !ZT_BLAS(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH)) ||
        !ZT_BLAS(cublasSetAtomicsMode(g_blas, CUBLAS_ATOMICS_NOT_ALLOWED)))
        goto fail_ws;
    return true;
fail_ws:
    zt_cuda_free_acct(g_ws);
    g_ws = NULL;
fail_lt:
    cublasLtDestroy(g_lt);
    g_lt = NULL;
fail_blas:
    cublasDestroy(g_blas);
    g_blas = NULL;
    return false;
}

void zt_cuda_matmul_fini(void) {
    if (g_lt) cublasLtDestroy(g_lt);
    if (g_blas) cublasDestroy(g_blas);
    zt_cuda_free_acct(g_ws);
    g_lt = NULL;
    g_blas = NULL;
    g_ws = NULL;
}

void zt_cuda_set_matmul_precision(int mode) {
    if (mode == ZT_MATMUL_FP32 || mode == ZT_MATMUL_BF16) g_mode = mode;
}

int zt_cuda_matmul_mode(void) { return g_mode; }

/* set_dw_fresh (backend.h): the weight gradients [g_fresh, g_fresh +
 * g_fresh_n) whose dW GEMM overwrites dw (beta 0: C not read) */
static const float *g_fresh;
static size_t g_fresh_n;

void zt_cuda_set_dw_fresh(float *g, size_t n) {
    g_fresh = g && n ? g : NULL;
    g_fresh_n = g ? n : 0;
}

/* dw_fresh (backend.h) */
int zt_cuda_dw_fresh(const float *dw) { return g_fresh && dw >= g_fresh && dw < g_fresh + g_fresh_n; }
/* the dW GEMM's beta: 0 into a fresh gradient, else 1 (dw +=) */
static float dw_beta(const float *dw) {
    return g_fresh && dw >= g_fresh && dw < g_fresh + g_fresh_n ? 0.0f : 1.0f;
}

extern "C" void zt_cuda_set_gemm_impl(int use_lt) { g_use_lt = use_lt ? 1 : 0; }

bool zt_cuda_gemm_bf16_batched(bool ta, bool tb, int m, int n, int k, const void *A, int lda,
                               long long sA, const void *B, int ldb, long long sB, float *C,
                               int ldc, long long sC, float beta, int batch) {
    const float alpha = 1.0f;
    return ZT_BLAS(cublasGemmStridedBatchedEx(
        g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A,
        CUDA_R_16BF, lda, sA, B, CUDA_R_16BF, ldb, sB, &beta, C, CUDA_R_32F, ldc, sC, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ------------------------------------------------------------ kernels */

__global__ void k_round_bf16(__nv_bfloat16_raw *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        __nv_bfloat16_raw r;
        r.x = zt_cvt_f32_to_bf16(in[i]);
        out[i] = r;
    }
}

/* column-major C[m, n] (ld) += bias[i] on row i */
__global__ void k_add_bias(float *c, const float *bias, int m, int n, int ld) {
    const size_t total = (size_t)m * n;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx % m);
        const size_t j = idx / m;
        c[j * ld + i] += bias[i];
    }
}

/* dst[n] += src[n] (the epilogue's bias gradient into the table's) */
__global__ void k_bgrad_acc(float *dst, const float *src, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

/* ------------------------------------------------------------ cuBLASLt */

/* An epilogue beyond the bias: GELU_AUX_BIAS (aux written: the GEMM +
 * bias) or DGELU_BGRAD (aux read: the GELU's input; bgrad written). */
enum { EPI_NONE = 0, EPI_GELU_AUX_BIAS = 1, EPI_DGELU_BGRAD = 2 };
struct lt_epi {
    int kind;
    void *aux;         /* [m, n] column-major, ld auxld; D's type (fp32, or bf16 with a bf16 D) */
    int64_t auxld;
    float *bgrad;      /* DGELU_BGRAD: [m] */
};

static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

struct lt_key {
    int m, n, k, ta, tb, bf16, bias, beta1;
    int lda, ldb, ldc;
    uint32_t aa, ab, ac;
    int epi;
    int64_t auxld;
    int d16;   /* C and D in bf16 (matmul_fwd_o16; matmul_dgelu_bwd_o16: the aux too) */
};
struct lt_entry {
    lt_key key;
    int ok;                       /* 0: Lt has no algorithm: use GemmEx */
    cublasLtMatmulAlgo_t algo;
};
#define ZT_LT_CACHE 256
static lt_entry g_cache[ZT_LT_CACHE];
static int g_ncache;

/* D = op(A) op(B) (+ beta C, C = D) (+ bias) with Lt; false when Lt has no
 * algorithm (nothing recorded) or on an error (recorded, *err set). */
static bool gemm_lt(bool ta, bool tb, int m, int n, int k, const void *A, int lda,
                    const void *B, int ldb, void *Cm, int ldc, float beta, const float *bias,
                    bool bf16, const lt_epi *epi, bool *err, bool d16 = false) {
    *err = false;
    lt_key key;
    memset(&key, 0, sizeof key);
    key.m = m; key.n = n; key.k = k; key.ta = ta; key.tb = tb; key.bf16 = bf16;
    key.bias = bias != NULL; key.beta1 = beta != 0.0f;
    key.lda = lda; key.ldb = ldb; key.ldc = ldc;
    key.aa = align_of(A); key.ab = align_of(B); key.ac = align_of(Cm); key.d16 = d16;
    if (bias && align_of(bias) < 16) return false;   /* keep the epilogue's loads simple */
    const int ek = epi ? epi->kind : EPI_NONE;
    if (ek != EPI_NONE) {
        /* the aux matrix: 16-byte aligned here, ld a multiple of 8 (cuBLASLt);
         * with a bf16 D in D's type, bf16 (DGELU_BGRAD reads it,
         * GELU_AUX_BIAS writes it: matmul_gelu_fwd_o16) */
        if (align_of(epi->aux) < 16 || epi->auxld % 8 || epi->auxld < m) return false;
        if (ek == EPI_GELU_AUX_BIAS && !bias) return false;
        if (ek == EPI_DGELU_BGRAD && (bias || align_of(epi->bgrad) < 16)) return false;
        key.epi = ek;
        key.auxld = epi->auxld;
    }
    lt_entry *hit = NULL;
    for (int i = 0; i < g_ncache; i++)
        if (!memcmp(&g_cache[i].key, &key, sizeof key)) { hit = &g_cache[i]; break; }
    if (hit && !hit->ok) return false;

    const cudaDataType_t ab_t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    bool done = false;
    const int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float alpha = 1.0f;

#define LT(call) do { if (!ZT_BLAS(call)) { *err = true; goto out; } } while (0)
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (bias || ek != EPI_NONE) {
        const cublasLtEpilogue_t e = ek == EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                     : ek == EPI_DGELU_BGRAD ? CUBLASLT_EPILOGUE_DGELU_BGRAD
                                                             : CUBLASLT_EPILOGUE_BIAS;
        const int32_t bias_t = CUDA_R_32F;
        const float *bp = ek == EPI_DGELU_BGRAD ? epi->bgrad : bias;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t,
                                          sizeof bias_t));
        if (ek != EPI_NONE) {
            /* set before the heuristic: it reads the pointer's alignment */
            const void *ap = epi->aux;
            const int64_t ald = epi->auxld;
            LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap,
                                              sizeof ap));
            LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald,
                                              sizeof ald));
        }
    }
    LT(cublasLtMatrixLayoutCreate(&la, ab_t, ta ? k : m, ta ? m : k, lda));
    LT(cublasLtMatrixLayoutCreate(&lb, ab_t, tb ? n : k, tb ? k : n, ldb));
    LT(cublasLtMatrixLayoutCreate(&lc, d16 ? CUDA_R_16BF : CUDA_R_32F, m, n, ldc));

    if (!hit) {
        LT(cublasLtMatmulPreferenceCreate(&pref));
        const uint64_t ws = ZT_WS_BYTES;
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof ws));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &key.aa, sizeof key.aa));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &key.ab, sizeof key.ab));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &key.ac, sizeof key.ac));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &key.ac, sizeof key.ac));
        cublasLtMatmulHeuristicResult_t res;
        memset(&res, 0, sizeof res);
        int nres = 0;
        cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, lc, lc, pref, 1, &res, &nres);
        /* NOT_SUPPORTED (or no result): Lt has no algorithm for this problem and GemmEx does it.
         * Anything else (INVALID_VALUE: the descriptors disagree) is a bug here: reported, not
         * hidden behind the fallback, and not cached */
        if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
            blas_ok(s, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic");
            *err = true;
            goto out;
        }
        lt_entry e;
        memset(&e, 0, sizeof e);
        e.key = key;
        e.ok = s == CUBLAS_STATUS_SUCCESS && nres > 0 && res.state == CUBLAS_STATUS_SUCCESS &&
               res.workspaceSize <= ZT_WS_BYTES;
        if (e.ok) e.algo = res.algo;
        if (g_ncache < ZT_LT_CACHE) {
            g_cache[g_ncache] = e;
            hit = &g_cache[g_ncache++];
        } else {
            /* cache full: use this result once */
            static lt_entry spare;
            spare = e;
            hit = &spare;
        }
        if (!e.ok) goto out;
    }
    LT(cublasLtMatmul(g_lt, op, &alpha, A, la, B, lb, &beta, Cm, lc, Cm, lc, &hit->algo, g_ws,
                      ZT_WS_BYTES, zt_cu.stream));
    done = true;
#undef LT
out:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return done;
}

/* ------------------------------------------------------------ gemm */

/* Column-major C[m,n] (ldc) = op(A) op(B) + beta C (+ bias[m] per row).
 * A, B are fp32; in bf16 mode they are rounded into scratch first.  With
 * an epilogue (epi): true when Lt applied it; false when the plain GEMM
 * ran instead (GELU_AUX_BIAS: into epi->aux, with the bias) or on an error
 * (recorded), and the caller does the rest.  bf16 mode only: a16 / b16 (may
 * be NULL) are A / B already in bf16 (a bf16 weight; the backward's dout16),
 * not rounded again (a16 copied when it is not 256-byte aligned); the others
 * are rounded into `room` (the caller sized it: zt_al256 of each stored
 * operand's elements * 2, A's first), or, room NULL, into scratch of
 * zt_cuda_ws_gemm (both operands' room, as always).  b16 may also be a
 * bf16 input (the *_a16 entries' forward), copied to B's place when not
 * 256-byte aligned; keep_req: request that scratch even when nothing is
 * rounded or copied (the entry's request stays its fp32 entry's). */
static bool gemm(bool ta, bool tb, int m, int n, int k, const float *A, int lda, const float *B,
                 int ldb, float *Cm, int ldc, float beta, const float *bias,
                 const lt_epi *epi = NULL, const __nv_bfloat16_raw *a16 = NULL,
                 const __nv_bfloat16_raw *b16 = NULL, char *room = NULL, bool keep_req = false,
                 uint16_t *d16 = NULL) {
    const bool bf16 = g_mode == ZT_MATMUL_BF16;
    const void *a = A, *b = B;
    if (bf16) {
        /* stored operands: A is (ta ? k : m) x (ta ? m : k) with ld lda */
        const size_t na = (size_t)lda * (size_t)(ta ? m : k);
        const size_t nb = (size_t)ldb * (size_t)(tb ? k : n);
        /* a bf16 A not 256-byte aligned (a weight inside the parameter block)
         * is copied to A's place in scratch: cuBLASLt then sees the operand
         * alignment the rounded copy had, so it picks the same algorithm
         * (the same bits) */
        const bool a_copy = a16 && ((uintptr_t)a16 & 255) != 0;
        /* (a bf16 B not 256-byte aligned likewise, to B's place) */
        const bool b_copy = b16 && ((uintptr_t)b16 & 255) != 0;
        char *s = room;
        if (!s && (!a16 || !b16 || a_copy || b_copy || keep_req) &&
            !(s = (char *)zt_cuda_scratch(zt_cuda_ws_gemm(1, na, nb), "bf16 matmul operands")))
            return false;
        if (a_copy) {
            if (!ZT_CU(cudaMemcpyAsync(s, a16, na * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))) return false;
            a16 = (const __nv_bfloat16_raw *)s;
            s += zt_al256(na * 2);
        } else if (!a16) {
            __nv_bfloat16_raw *r = (__nv_bfloat16_raw *)s;
            k_round_bf16<<<zt_ew_blocks(na), ZT_EW_THREADS, 0, zt_cu.stream>>>(r, A, na);
            if (!ZT_LAUNCHED("k_round_bf16")) return false;
            a16 = r;
            s += zt_al256(na * 2);
        }
        if (b_copy) {
            if (!ZT_CU(cudaMemcpyAsync(s, b16, nb * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))) return false;
            b16 = (const __nv_bfloat16_raw *)s;
        } else if (!b16) {
            __nv_bfloat16_raw *r = (__nv_bfloat16_raw *)s;
            k_round_bf16<<<zt_ew_blocks(nb), ZT_EW_THREADS, 0, zt_cu.stream>>>(r, B, nb);
            if (!ZT_LAUNCHED("k_round_bf16")) return false;
            b16 = r;
        }
        a = a16;
        b = b16;
    }
    if (d16) {
        /* a bf16 D (bf16 mode; no epilogue but the bias, or DGELU_BGRAD /
         * GELU_AUX_BIAS with a bf16 aux): true when Lt ran it, false
         * (nothing computed) when the caller must do it otherwise */
        bool err = false;
        return g_use_lt && bf16 &&
               gemm_lt(ta, tb, m, n, k, a, lda, b, ldb, d16, ldc, beta, bias, bf16, epi, &err, true);
    }
    if (g_use_lt) {
        bool err = false;
        if (gemm_lt(ta, tb, m, n, k, a, lda, b, ldb, Cm, ldc, beta, bias, bf16, epi, &err))
            return epi != NULL;
        if (err) return false;
    }
    if (epi && epi->kind == EPI_GELU_AUX_BIAS) {
        Cm = (float *)epi->aux;   /* the plain GEMM + bias is the GELU's input */
        ldc = (int)epi->auxld;
    }
    const float alpha = 1.0f;
    const cudaDataType_t ab_t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    if (!ZT_BLAS(cublasGemmEx(g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              m, n, k, &alpha, a, ab_t, lda, b, ab_t, ldb, &beta, Cm, CUDA_R_32F, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)))
        return false;
    if (bias) {
        k_add_bias<<<zt_ew_blocks((size_t)m * n), ZT_EW_THREADS, 0, zt_cu.stream>>>(Cm, bias, m, n, ldc);
        ZT_LAUNCHED("k_add_bias");
    }
    return false;
}

/* ------------------------------------------------------------ table entries */

typedef __nv_bfloat16_raw bf16_t;

/* the bf16-weight entries: bf16 matmul mode only */
static bool w16_ok(const uint16_t *w16, const char *who) {
    if (!w16 || g_mode == ZT_MATMUL_BF16) return true;
    zt_cuda_fail(__FILE__, __LINE__, who, "a bf16 weight in fp32 matmul mode",
                 "call the fp32-weight entry, or set_matmul_precision(ZT_MATMUL_BF16)");
    return false;
}

/* matmul_fwd; w16 (bf16 mode): the weight in bf16, read as it is (the
 * scratch request stays matmul_fwd's) */
static void fwd(float *out, const float *inp, const float *w, const bf16_t *w16, const float *bias,
                int N, int C, int OC, const bf16_t *x16 = NULL) {
    if (N <= 0 || OC <= 0) return;
    if (C <= 0) {
        if (!ZT_CU(cudaMemsetAsync(out, 0, (size_t)N * OC * sizeof(float), zt_cu.stream))) return;
        if (bias) {
            k_add_bias<<<zt_ew_blocks((size_t)N * OC), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, bias, OC,
                                                                                       N, OC);
            ZT_LAUNCHED("k_add_bias");
        }
        return;
    }
    gemm(true, false, OC, N, C, w, C, inp, C, out, OC, 0.0f, bias, NULL, w16, x16, NULL, x16 != NULL);
}

void zt_cuda_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                        int C, int OC) {
    fwd(out, inp, w, NULL, bias, N, C, OC);
}

/* bf16 mode: dout[N, OC] rounded once into scratch at s (the bf16 operand of
 * both backward GEMMs), the other operand's room after it
 * (zt_cuda_ws_matmul_bwd16), then `extra` bytes.  NULL on an error
 * (recorded). */
static char *round_dout(const float *dout, int N, int C, int OC, bool dinp, bool dw,
                        size_t extra) {
    const size_t nd = (size_t)OC * (size_t)N;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_bwd16(N, C, OC, dinp, dw) + extra,
                                      "bf16 matmul operands");
    if (!s) return NULL;
    k_round_bf16<<<zt_ew_blocks(nd), ZT_EW_THREADS, 0, zt_cu.stream>>>((bf16_t *)s, dout, nd);
    return ZT_LAUNCHED("k_round_bf16") ? s : NULL;
}

/* round_dout's scratch with dout16 given (the bf16-gradient entries; the
 * request stays the fp32 entry's): *d16 = dout16 read where it is, or,
 * when it is not 256-byte aligned, copied to s (cuBLASLt then sees the
 * alignment the rounded copy had: the same algorithm, the same bits).
 * NULL on an error (recorded). */
static char *given_dout(const bf16_t *dout16, int N, int C, int OC, bool dinp, bool dw,
                        size_t extra, const bf16_t **d16) {
    const size_t nd = (size_t)OC * (size_t)N;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_bwd16(N, C, OC, dinp, dw) + extra,
                                      "bf16 matmul operands");
    if (!s) return NULL;
    *d16 = dout16;
    if (((uintptr_t)dout16 & 255) == 0) return s;
    if (!ZT_CU(cudaMemcpyAsync(s, dout16, nd * 2, cudaMemcpyDeviceToDevice, zt_cu.stream)))
        return NULL;
    *d16 = (const bf16_t *)s;
    return s;
}

/* dinp and dw from dout16 (round_dout's s, or dd16: given_dout's); w16:
 * the weight in bf16 */
static void bwd16(char *s, float *dinp, float *dw, const float *dout, const float *inp,
                  const float *w, const bf16_t *w16, int N, int C, int OC, const bf16_t *x16,
                  const bf16_t *dd16 = NULL, float dbeta = 0.0f) {
    const bf16_t *d16 = dd16 ? dd16 : (const bf16_t *)s;
    char *room = s + zt_al256((size_t)OC * (size_t)N * 2);
    if (dinp) gemm(false, false, C, N, OC, w, C, dout, OC, dinp, C, dbeta, NULL, NULL, w16, d16, room);
    if (dw) gemm(false, true, C, OC, N, inp, C, dout, OC, dw, C, dw_beta(dw), NULL, NULL, x16, d16, room);
}

/* dbeta: the input-gradient GEMM's beta (1: matmul_bwd_acc, dinp += the
 * product, C = D; N, C and OC > 0 there) */
static void bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                const float *w, const bf16_t *w16, int N, int C, int OC, const bf16_t *x16 = NULL,
                const bf16_t *dout16 = NULL, float dbeta = 0.0f) {
    if (N <= 0) return;
    if (g_mode == ZT_MATMUL_BF16 && C > 0 && OC > 0 && (dinp || dw)) {
        const bf16_t *dd16 = NULL;
        char *s = dout16 ? given_dout(dout16, N, C, OC, dinp != NULL, dw != NULL, 0, &dd16)
                         : round_dout(dout, N, C, OC, dinp != NULL, dw != NULL, 0);
        if (!s) return;
        bwd16(s, dinp, dw, dout, inp, w, w16, N, C, OC, x16, dd16, dbeta);
        /* (dout NULL: matmul_bwd_d16's dbias from dout16) */
        if (dbias && dout) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
        else if (dbias) zt_cuda_colsum16_acc(dbias, (const uint16_t *)dout16, N, OC, (size_t)OC);
        return;
    }
    if (dinp && C > 0) {
        if (OC > 0) gemm(false, false, C, N, OC, w, C, dout, OC, dinp, C, dbeta, NULL);
        else ZT_CU(cudaMemsetAsync(dinp, 0, (size_t)N * C * sizeof(float), zt_cu.stream));
    }
    if (OC <= 0) return;
    if (dw && C > 0) gemm(false, true, C, OC, N, inp, C, dout, OC, dw, C, dw_beta(dw), NULL);
    if (dbias && dout) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
    else if (dbias) zt_cuda_colsum16_acc(dbias, (const uint16_t *)dout16, N, OC, (size_t)OC);
}

void zt_cuda_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                        const float *w, int N, int C, int OC) {
    bwd(dinp, dw, dbias, dout, inp, w, NULL, N, C, OC);
}

/* the input gradient accumulated (backend.h matmul_dinp_acc): matmul_bwd's
 * input-gradient GEMM with beta = 1 and C = D (D = dout w + dinp: the fp32
 * product, then one fp32 addition, the add after matmul_bwd into a
 * temporary); bf16 mode: dout rounded once as matmul_bwd rounds it, w into
 * the room after it (matmul_bwd's scratch with dinp alone) */
void zt_cuda_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    if (g_mode == ZT_MATMUL_BF16) {
        char *s = round_dout(dout, N, C, OC, true, false, 0);
        if (!s) return;
        gemm(false, false, C, N, OC, w, C, dout, OC, dinp, C, 1.0f, NULL, NULL, NULL, (const bf16_t *)s,
             s + zt_al256((size_t)OC * (size_t)N * 2));
        return;
    }
    gemm(false, false, C, N, OC, w, C, dout, OC, dinp, C, 1.0f, NULL);
}

/* fc + GELU: pre = inp w^T + bias, out = gelu(pre) (GELU_AUX_BIAS, or the
 * unfused kernels) */
static void gelu_fwd(float *out, float *pre, const float *inp, const float *w, const bf16_t *w16,
                     const float *bias, int N, int C, int OC, const bf16_t *x16 = NULL) {
    if (N <= 0 || OC <= 0) return;
    if (C > 0 && g_use_lt) {
        lt_epi e = {EPI_GELU_AUX_BIAS, pre, OC, NULL};
        if (gemm(true, false, OC, N, C, w, C, inp, C, out, OC, 0.0f, bias, &e, w16, x16, NULL,
                 x16 != NULL))
            return;
    } else {
        fwd(pre, inp, w, w16, bias, N, C, OC, x16);
    }
    zt_cuda_gelu_fwd(out, pre, (size_t)N * OC);
}

void zt_cuda_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                             const float *bias, int N, int C, int OC) {
    gelu_fwd(out, pre, inp, w, NULL, bias, N, C, OC);
}

/* the projection's backward through the GELU: dpre = (dout w) gelu'(pre)
 * (DGELU_BGRAD: dpre_bias from the epilogue's column sums), dw, dbias.
 * bf16 mode: dout rounded once for the input-gradient GEMM and dw's;
 * scratch [dout16 | the other operand | the epilogue's bias gradient]. */
static void dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias, const float *dout,
                      const float *inp, const float *pre, const float *w, const bf16_t *w16, int N,
                      int C, int OC, const bf16_t *x16 = NULL, const bf16_t *dout16 = NULL) {
    if (N <= 0) return;
    if (C > 0 && OC > 0 && g_use_lt) {
        const bool bf16 = g_mode == ZT_MATMUL_BF16;
        char *s, *room = NULL;
        const bf16_t *d16 = NULL;
        size_t off = 0;
        if (bf16) {
            const size_t ex = zt_al256((size_t)C * 4);
            s = dout16 ? given_dout(dout16, N, C, OC, true, dw != NULL, ex, &d16)
                       : round_dout(dout, N, C, OC, true, dw != NULL, ex);
            if (!s) return;
            if (!dout16) d16 = (const bf16_t *)s;
            room = s + zt_al256((size_t)OC * (size_t)N * 2);
            off = zt_cuda_ws_matmul_bwd16(N, C, OC, 1, dw != NULL);
        } else {
            s = (char *)zt_cuda_scratch(
                zt_cuda_ws_matmul_dgelu_bwd(0, N, C, OC, dw != NULL, dbias != NULL),
                "matmul backward through the GELU");
            if (!s) return;
        }
        float *bg = (float *)(s + off);
        lt_epi e = {EPI_DGELU_BGRAD, (void *)pre, C, bg};
        const bool fused =
            gemm(false, false, C, N, OC, w, C, dout, OC, dpre, C, 0.0f, NULL, &e, w16, d16, room);
        if (fused && dpre_bias) {
            k_bgrad_acc<<<(C + 255) / 256, 256, 0, zt_cu.stream>>>(dpre_bias, bg, C);
            if (!ZT_LAUNCHED("k_bgrad_acc")) return;
        }
        if (bf16) {
            if (dw) gemm(false, true, C, OC, N, inp, C, dout, OC, dw, C, dw_beta(dw), NULL, NULL, x16, d16, room);
            if (dbias) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
        } else {
            bwd(NULL, dw, dbias, dout, inp, w, NULL, N, C, OC);
        }
        if (fused) return;
        /* the plain GEMM ran into dpre: the GELU unfused */
    } else {
        bwd(dpre, dw, dbias, dout, inp, w, w16, N, C, OC, x16, dout16);
    }
    if (C <= 0) return;
    zt_cuda_gelu_bwd(dpre, pre, dpre, (size_t)N * C);
    if (dpre_bias) zt_cuda_colsum_acc(dpre_bias, dpre, N, C, (size_t)C);
}

void zt_cuda_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                              const float *dout, const float *inp, const float *pre, const float *w,
                              int N, int C, int OC) {
    dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, NULL, N, C, OC);
}

/* the bf16-weight entries (backend.h): the entries above with the weight's
 * GEMM operand w16 itself */
void zt_cuda_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16, const float *bias,
                            int N, int C, int OC) {
    if (w16_ok(w16, "matmul_fwd_w16")) fwd(out, inp, NULL, (const bf16_t *)w16, bias, N, C, OC);
}
void zt_cuda_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const uint16_t *w16, int N, int C, int OC) {
    if (w16_ok(w16, "matmul_bwd_w16")) bwd(dinp, dw, dbias, dout, inp, NULL, (const bf16_t *)w16, N, C, OC);
}
void zt_cuda_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                 const float *bias, int N, int C, int OC) {
    if (w16_ok(w16, "matmul_gelu_fwd_w16"))
        gelu_fwd(out, pre, inp, NULL, (const bf16_t *)w16, bias, N, C, OC);
}
void zt_cuda_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const float *inp, const float *pre,
                                  const uint16_t *w16, int N, int C, int OC) {
    if (w16_ok(w16, "matmul_dgelu_bwd_w16"))
        dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, NULL, (const bf16_t *)w16, N, C, OC);
}

/* the bf16-input entries (backend.h): the entries above with the input's
 * GEMM operand inp16 itself (bf16 matmul mode only) */
static bool a16_ok(const char *who) {
    if (g_mode == ZT_MATMUL_BF16) return true;
    zt_cuda_fail(__FILE__, __LINE__, who, "a bf16 input in fp32 matmul mode",
                 "call the fp32-input entry, or set_matmul_precision(ZT_MATMUL_BF16)");
    return false;
}
void zt_cuda_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                            const float *bias, int N, int C, int OC) {
    if (a16_ok("matmul_fwd_a16"))
        fwd(out, NULL, w16 ? NULL : w, (const bf16_t *)w16, bias, N, C, OC, (const bf16_t *)inp16);
}
void zt_cuda_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                            const uint16_t *inp16, const float *w, const uint16_t *w16, int N, int C,
                            int OC) {
    if (a16_ok("matmul_bwd_a16"))
        bwd(dinp, dw, dbias, dout, NULL, w16 ? NULL : w, (const bf16_t *)w16, N, C, OC,
            (const bf16_t *)inp16);
}
void zt_cuda_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                 const uint16_t *w16, const float *bias, int N, int C, int OC) {
    if (a16_ok("matmul_gelu_fwd_a16"))
        gelu_fwd(out, pre, NULL, w16 ? NULL : w, (const bf16_t *)w16, bias, N, C, OC,
                 (const bf16_t *)inp16);
}
void zt_cuda_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const uint16_t *inp16, const float *pre,
                                  const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (a16_ok("matmul_dgelu_bwd_a16"))
        dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, NULL, pre, w16 ? NULL : w, (const bf16_t *)w16, N,
                  C, OC, (const bf16_t *)inp16);
}

/* the forward product accumulated (backend.h matmul_fwd_acc): the forward
 * GEMM with beta = 1 and C = D (D = inp w^T + out: the fp32 product, then
 * one fp32 addition, the add after the beta-0 entry into a temporary); the
 * operands as matmul_fwd_a16 (inp16), matmul_fwd_w16 (w16) or matmul_fwd
 * take them, the scratch request theirs */
void zt_cuda_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                            const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    if (inp16 && !a16_ok("matmul_fwd_acc")) return;
    if (!w16_ok(w16, "matmul_fwd_acc")) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *wb = (const bf16_t *)w16;
    gemm(true, false, OC, N, C, wb ? NULL : w, C, x16 ? NULL : inp, C, out, OC, 1.0f, NULL, NULL, wb,
         x16, NULL, x16 != NULL);
}

/* the base input gradient accumulated (backend.h matmul_bwd_acc): the
 * input-gradient GEMM with beta = 1 and C = D (D = dout w + dinp: the fp32
 * product, then one fp32 addition, the add after the beta-0 entry into a
 * temporary); the operands as matmul_bwd_d16 (dout16), matmul_bwd_w16 (w16)
 * or matmul_bwd take them, the scratch request theirs with dinp alone */
void zt_cuda_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16, const float *w,
                            const uint16_t *w16, int N, int C, int OC) {
    if (N <= 0 || C <= 0 || OC <= 0) return;
    if (dout16 && !a16_ok("matmul_bwd_acc")) return;
    if (!w16_ok(w16, "matmul_bwd_acc")) return;
    bwd(dinp, NULL, NULL, dout, NULL, w16 ? NULL : w, (const bf16_t *)w16, N, C, OC, NULL,
        (const bf16_t *)dout16, 1.0f);
}

/* the bf16-gradient entries (backend.h): the entries above with the GEMMs'
 * dout operand dout16 itself (bf16 matmul mode only); dbias from the fp32
 * dout (matmul_bwd_d16 with dout NULL: from dout16, k_colsum16_part) */
void zt_cuda_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                            const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (a16_ok("matmul_bwd_d16"))
        bwd(dinp, dw, dbias, dout, inp16 ? NULL : inp, w16 ? NULL : w, (const bf16_t *)w16, N, C,
            OC, (const bf16_t *)inp16, (const bf16_t *)dout16);
}
void zt_cuda_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                  const float *dout, const uint16_t *dout16, const float *inp,
                                  const uint16_t *inp16, const float *pre, const float *w,
                                  const uint16_t *w16, int N, int C, int OC) {
    if (a16_ok("matmul_dgelu_bwd_d16"))
        dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp16 ? NULL : inp, pre, w16 ? NULL : w,
                  (const bf16_t *)w16, N, C, OC, (const bf16_t *)inp16, (const bf16_t *)dout16);
}

/* the input gradient written in bf16 (backend.h matmul_bwd_o16): the
 * input-gradient GEMM with a bf16 D (fp32 accumulation, D rounded to
 * nearest even: to_bf16 of the fp32 D matmul_bwd_d16 writes), dw's GEMM and
 * the bias gradient as matmul_bwd_d16's.  Scratch: matmul_bwd_d16's.
 * Where Lt has no such algorithm: the plain GEMM into tmp and to_bf16 of
 * it (that entry's values, then the rounding). */
void zt_cuda_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                            const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (!a16_ok("matmul_bwd_o16") || N <= 0) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *ww16 = (const bf16_t *)w16;
    if (x16) inp = NULL;
    if (ww16) w = NULL;
    if (C <= 0 || OC <= 0) {
        /* (no GEMM: the d16 entry's degenerate cases into tmp, then the rounding) */
        bwd(tmp, dw, dbias, dout, inp, w, ww16, N, C, OC, x16, (const bf16_t *)dout16);
        if (C > 0) zt_cuda_to_bf16(dinp16, tmp, (size_t)N * C);
        return;
    }
    const bf16_t *d16 = NULL;
    char *s = given_dout((const bf16_t *)dout16, N, C, OC, true, dw != NULL, 0, &d16);
    if (!s) return;
    char *room = s + zt_al256((size_t)OC * (size_t)N * 2);
    const bool lt = gemm(false, false, C, N, OC, w, C, dout, OC, NULL, C, 0.0f, NULL, NULL, ww16, d16, room,
                         false, dinp16);
    if (!lt) {
        /* the plain GEMM into tmp (cublasGemmEx), then the rounding */
        const int use = g_use_lt;
        g_use_lt = 0;
        gemm(false, false, C, N, OC, w, C, dout, OC, tmp, C, 0.0f, NULL, NULL, ww16, d16, room);
        g_use_lt = use;
    }
    if (dw) gemm(false, true, C, OC, N, inp, C, dout, OC, dw, C, dw_beta(dw), NULL, NULL, x16, d16, room);
    if (dbias && dout) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
    else if (dbias) zt_cuda_colsum16_acc(dbias, dout16, N, OC, (size_t)OC);
    if (!lt) zt_cuda_to_bf16(dinp16, tmp, (size_t)N * C);
}

/* the GELU backward writing bf16 (backend.h matmul_dgelu_bwd_o16): the
 * input-gradient GEMM with a bf16 D and DGELU_BGRAD, its aux pre16 read in
 * bf16 (cuBLASLt's aux has D's type), the bias gradient (fp32, the
 * epilogue's column sums of its fp32 values) into scratch and added: D =
 * bf16(GEMM * gelu'(pre)), the values matmul_dgelu_bwd_d16 makes in fp32
 * from the widened pre, rounded once.  Scratch: matmul_dgelu_bwd_d16's.
 * Where Lt has no such algorithm (or pre16 is not 16-byte aligned): the
 * plain GEMM into tmp, k_gelu_bwd_o16 (tmp = its gelu_bwd, dpre16 =
 * bf16(tmp)) and the column sum of tmp: that entry's unfused sequence. */
void zt_cuda_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                  float *dbias, const float *dout, const uint16_t *dout16,
                                  const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                  const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (!a16_ok("matmul_dgelu_bwd_o16") || N <= 0) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *ww16 = (const bf16_t *)w16;
    if (x16) inp = NULL;
    if (ww16) w = NULL;
    if (C <= 0 || OC <= 0) {
        /* (no GEMM: the d16 entry's degenerate cases, then the rounding) */
        if (C > 0) {
            if (!ZT_CU(cudaMemsetAsync(tmp, 0, (size_t)N * C * sizeof(float), zt_cu.stream))) return;
            zt_cuda_gelu_bwd_o16(dpre16, tmp, pre16, tmp, (size_t)N * C);
            if (dpre_bias) zt_cuda_colsum_acc(dpre_bias, tmp, N, C, (size_t)C);
        }
        if (OC > 0 && dbias) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
        return;
    }
    const size_t ex = zt_al256((size_t)C * 4);
    const bf16_t *d16 = NULL;
    char *s = given_dout((const bf16_t *)dout16, N, C, OC, true, dw != NULL, ex, &d16);
    if (!s) return;
    char *room = s + zt_al256((size_t)OC * (size_t)N * 2);
    float *bg = (float *)(s + zt_cuda_ws_matmul_bwd16(N, C, OC, 1, dw != NULL));
    lt_epi e = {EPI_DGELU_BGRAD, (void *)pre16, C, bg};
    const bool fused = gemm(false, false, C, N, OC, w, C, dout, OC, NULL, C, 0.0f, NULL, &e, ww16, d16,
                            room, false, dpre16);
    if (fused && dpre_bias) {
        k_bgrad_acc<<<(C + 255) / 256, 256, 0, zt_cu.stream>>>(dpre_bias, bg, C);
        if (!ZT_LAUNCHED("k_bgrad_acc")) return;
    }
    if (!fused) {
        /* the plain GEMM into tmp (cublasGemmEx, as dgelu_bwd's fallback) */
        const int lt = g_use_lt;
        g_use_lt = 0;
        gemm(false, false, C, N, OC, w, C, dout, OC, tmp, C, 0.0f, NULL, NULL, ww16, d16, room);
        g_use_lt = lt;
    }
    /* (dw's GEMM before the column sums, which may reuse the scratch
     * holding d16, bg and room) */
    if (dw) gemm(false, true, C, OC, N, inp, C, dout, OC, dw, C, dw_beta(dw), NULL, NULL, x16, d16, room);
    if (dbias) zt_cuda_colsum_acc(dbias, dout, N, OC, (size_t)OC);
    if (fused) return;
    /* the GELU unfused */
    zt_cuda_gelu_bwd_o16(dpre16, tmp, pre16, tmp, (size_t)N * C);
    if (dpre_bias) zt_cuda_colsum_acc(dpre_bias, tmp, N, C, (size_t)C);
}

/* D[m, n] (ldc) = op(A) B (+ C, beta 1: C = D) by cublasGemmEx with A, B,
 * C and D in bf16 (fp32 compute: C widened and added in fp32 before D's one
 * rounding); A [m, k] (ta: stored transposed) with lda, B [k, n] with ldb,
 * both already bf16 (gemmex_o16, zt_cuda_matmul_bwd_acc16) */
static void gemmex16(bool ta, int m, int n, int k, const bf16_t *a, int lda, const bf16_t *b, int ldb,
                     float beta, uint16_t *d16, int ldc) {
    const float alpha = 1.0f;
    ZT_BLAS(cublasGemmEx(g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a,
                         CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &beta, d16, CUDA_R_16BF, ldc,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The forward GEMM with a bf16 D by cublasGemmEx (fp32 compute; beta 1:
 * C = D, the bf16 out16 read and added in fp32 before D's one rounding):
 * the operands not given in bf16 rounded into the scratch of
 * zt_cuda_ws_matmul_fwd (matmul_fwd's request), a bf16 input not 256-byte
 * aligned copied where the rounded one would be.  N, C, OC > 0. */
static void gemmex_o16(uint16_t *out16, const float *inp, const bf16_t *x16, const float *w,
                       const bf16_t *ww16, int N, int C, int OC, float beta) {
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_fwd(1, N, C, OC), "bf16 matmul operands");
    if (!s) return;
    const size_t na = (size_t)C * OC, nb = (size_t)C * N;
    const bf16_t *a = ww16, *b = x16;
    if (!a) {
        k_round_bf16<<<zt_ew_blocks(na), ZT_EW_THREADS, 0, zt_cu.stream>>>((bf16_t *)s, w, na);
        if (!ZT_LAUNCHED("k_round_bf16")) return;
        a = (const bf16_t *)s;
    }
    if (!b) {
        bf16_t *r = (bf16_t *)(s + zt_al256(na * 2));
        k_round_bf16<<<zt_ew_blocks(nb), ZT_EW_THREADS, 0, zt_cu.stream>>>(r, inp, nb);
        if (!ZT_LAUNCHED("k_round_bf16")) return;
        b = r;
    } else if (((uintptr_t)b & 255) != 0) {
        /* (a bf16 input not 256-byte aligned, the final norm's rows:
         * copied where the rounded one would be, as gemm() does) */
        bf16_t *r = (bf16_t *)(s + zt_al256(na * 2));
        if (!ZT_CU(cudaMemcpyAsync(r, b, nb * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))) return;
        b = r;
    }
    gemmex16(true, OC, N, C, a, C, b, C, beta, out16, OC);
}

/* the bf16-output entry (backend.h): one cuBLASLt GEMM with D in bf16 (fp32
 * compute, the fp32 bias in its epilogue: D = bf16(acc + bias), round to
 * nearest); where Lt has no such algorithm (or the bias is not 16-byte
 * aligned), matmul_fwd into tmp and to_bf16: the same values */
void zt_cuda_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                            const float *w, const uint16_t *w16, const float *bias, int N, int C,
                            int OC) {
    if (!a16_ok("matmul_fwd_o16") || N <= 0 || OC <= 0) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *ww16 = (const bf16_t *)w16;
    if (x16) inp = NULL;
    if (ww16) w = NULL;
    if (C > 0 && g_use_lt && (!bias || align_of(bias) >= 16) &&
        gemm(true, false, OC, N, C, w, C, inp, C, NULL, OC, 0.0f, bias, NULL, ww16, x16, NULL,
             x16 != NULL, out16))
        return;
    if (!tmp) {
        /* (no fp32 scratch, the LM head: the plain GEMM writes the bf16 D) */
        if (bias) {
            zt_cuda_fail(__FILE__, __LINE__, "matmul_fwd_o16", "tmp NULL with a bias",
                         "pass tmp[N, OC] (a bug: please report)");
            return;
        }
        if (C <= 0) {
            ZT_CU(cudaMemsetAsync(out16, 0, (size_t)N * OC * 2, zt_cu.stream));
            return;
        }
        gemmex_o16(out16, inp, x16, w, ww16, N, C, OC, 0.0f);
        return;
    }
    fwd(tmp, inp, w, ww16, bias, N, C, OC, x16);
    zt_cuda_to_bf16(out16, tmp, (size_t)N * OC);
}

/* GPT-2's fc and GELU in bf16 (backend.h matmul_gelu_fwd_o16): one
 * cuBLASLt GEMM with a bf16 D and GELU_AUX_BIAS, its aux (the GEMM + bias)
 * bf16 too, each rounded to nearest from the fp32 epilogue's values; where
 * Lt has no such algorithm (or no bias, or the bias or the aux not 16-byte
 * aligned, the aux ld not a multiple of 8), matmul_fwd into tmp and
 * k_gelu_fwd16p: the same values where cuBLASLt's GELU is gelu_fwd's */
void zt_cuda_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                 const uint16_t *inp16, const float *w, const uint16_t *w16,
                                 const float *bias, int N, int C, int OC) {
    if (!a16_ok("matmul_gelu_fwd_o16") || N <= 0 || OC <= 0) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *ww16 = (const bf16_t *)w16;
    if (x16) inp = NULL;
    if (ww16) w = NULL;
    if (C > 0 && g_use_lt && bias && align_of(bias) >= 16) {
        lt_epi e = {EPI_GELU_AUX_BIAS, pre16, OC, NULL};
        if (gemm(true, false, OC, N, C, w, C, inp, C, NULL, OC, 0.0f, bias, &e, ww16, x16, NULL,
                 x16 != NULL, out16))
            return;
    }
    if (!tmp) {
        zt_cuda_fail(__FILE__, __LINE__, "matmul_gelu_fwd_o16", "tmp NULL",
                     "pass tmp[N, OC] (a bug: please report)");
        return;
    }
    fwd(tmp, inp, w, ww16, bias, N, C, OC, x16);
    zt_cuda_gelu_fwd16p(out16, pre16, tmp, (size_t)N * OC);
}

/* the MoE experts' grouped forward GEMM (backend.h matmul_grouped_o16):
 * out^T[OC, n_g] = w16_g^T' x_g^T a non-empty block, one
 * cublasGemmGroupedBatchedEx (bf16 A, B, C, fp32 compute, a group of one
 * each: m OC, n n_g, k C).  Scratch (zt_cuda_ws_matmul_grouped): the fp32
 * input rounded to bf16 once (k_round_bf16 over every row), then the A,
 * B, C pointer arrays, written on the device by k_grouped_ptrs from the
 * row counts passed by value (no host memory the stream reads later: a
 * cudaMemcpyAsync from pageable memory may wait for the stream).  Where
 * cuBLAS refuses (any status but SUCCESS: a cuBLAS before 12.5, a type or
 * shape it does not take), the per-block matmul_fwd_o16 loop, then and for
 * the rest of the run (g_grp_off; zt_cuda_grouped_report says why). */
static int g_grp_off;
static char g_grp_why[160];

extern "C" int zt_cuda_grouped_report(char *buf, size_t n) {
    if (buf && n)
        snprintf(buf, n, "%s", g_grp_off ? g_grp_why : "one cublasGemmGroupedBatchedEx a call (bf16)");
    return !g_grp_off;
}
extern "C" void zt_cuda_grouped_for_test(int on) {
    g_grp_off = !on;
    snprintf(g_grp_why, sizeof g_grp_why, "a GEMM an expert (zt_cuda_grouped_for_test(0))");
}

/* k_grouped_ptrs's by-value arguments: up to ZT_GRP_CHUNK blocks with
 * rows, each its expert g and its row count n, the weights' stride ws a
 * block and the row strides xs, os of the B operand and the output (2 KiB,
 * inside the 4 KiB of kernel parameters every architecture takes) */
#define ZT_GRP_CHUNK 256
struct zt_grp_args {
    const bf16_t *w, *x;
    bf16_t *out;
    size_t ws;
    int xs, os, gn;
    int g[ZT_GRP_CHUNK], n[ZT_GRP_CHUNK];
};

/* the grouped GEMM's pointer arrays for a.gn blocks whose first row is
 * o0: pa[q] = w + g_q ws, pb[q] = x + o_q xs, pc[q] = out + o_q os (one
 * thread: a.gn <= 256 stores each) */
__global__ void k_grouped_ptrs(const void **pa, const void **pb, void **pc, zt_grp_args a, size_t o0) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    size_t o = o0;
    for (int q = 0; q < a.gn; ++q) {
        pa[q] = a.w + (size_t)a.g[q] * a.ws;
        pb[q] = a.x + o * a.xs;
        pc[q] = a.out + o * a.os;
        o += (size_t)a.n[q];
    }
}

/* the per-block loop (cuBLAS refused the grouped call): the forward's
 * matmul_fwd_o16 (x the bf16 input or, x NULL, the fp32 inp), or (bwd)
 * matmul_bwd_o16's input gradient from the bf16 dout x, tmp its scratch */
static void grouped_loop(bool bwd, uint16_t *out16, float *tmp, const float *inp, const uint16_t *x,
                         const uint16_t *w16, const int *n, int G, int C, int OC) {
    size_t o = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        const uint16_t *wg = w16 + (size_t)g * OC * C;
        if (bwd)
            zt_cuda_matmul_bwd_o16(out16 + o * C, tmp, NULL, NULL, NULL, x + o * OC, NULL, NULL, NULL, wg, n[g], C,
                                   OC);
        else
            zt_cuda_matmul_fwd_o16(out16 + o * OC, NULL, x ? NULL : inp + o * C, x ? x + o * C : NULL, NULL, wg,
                                   NULL, n[g], C, OC);
        o += (size_t)n[g];
    }
}

/* one cublasGemmGroupedBatchedEx of gn problems (bf16 A, B, C, fp32
 * compute, alpha 1, beta 0, a group of one each), its A, B, C pointer
 * arrays at ptrs (3 gn, device), each problem m x n x k with lda, ldb, ldc,
 * but the dimension vary (0: n, 1: k) taken from rows[q].  0: done; 1:
 * cuBLAS refused (nothing computed; g_grp_off set, g_grp_why says `what`'s
 * call); -1: an error recorded. */
static int grouped_exec(const char *who, const char *what, void **ptrs, int gn, cublasOperation_t ta,
                        cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc, const int *rows,
                        int vary) {
    int *iv = (int *)malloc(7 * (size_t)gn * sizeof(int));
    float *sc = (float *)malloc(2 * (size_t)gn * sizeof(float));
    cublasOperation_t *op = (cublasOperation_t *)malloc(2 * (size_t)gn * sizeof(cublasOperation_t));
    if (!iv || !sc || !op) {
        free(iv), free(sc), free(op);
        zt_cuda_fail(__FILE__, __LINE__, who, "out of host memory for the GEMMs' arguments", "nothing computed");
        return -1;
    }
    int *m_ = iv, *n_ = iv + gn, *k_ = iv + 2 * gn, *lda_ = iv + 3 * gn, *ldb_ = iv + 4 * gn, *ldc_ = iv + 5 * gn,
        *one = iv + 6 * gn;
    for (int q = 0; q < gn; ++q) {
        m_[q] = m, n_[q] = vary == 0 ? rows[q] : n, k_[q] = vary == 1 ? rows[q] : k;
        lda_[q] = lda, ldb_[q] = ldb, ldc_[q] = ldc, one[q] = 1;
        sc[q] = 1.0f, sc[gn + q] = 0.0f;
        op[q] = ta, op[gn + q] = tb;
    }
    const cublasStatus_t st =
        cublasGemmGroupedBatchedEx(g_blas, op, op + gn, m_, n_, k_, sc, (const void *const *)ptrs, CUDA_R_16BF, lda_,
                                   (const void *const *)(ptrs + gn), CUDA_R_16BF, ldb_, sc + gn, ptrs + 2 * gn,
                                   CUDA_R_16BF, ldc_, gn, one, CUBLAS_COMPUTE_32F);
    free(iv), free(sc), free(op);
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    g_grp_off = 1;
    snprintf(g_grp_why, sizeof g_grp_why, "a GEMM an expert (cublasGemmGroupedBatchedEx refused the %s call: %s)",
             what, cublasGetStatusString(st));
    return 1;
}

/* the grouped call over the blocks with rows, gn of them: forward (m OC,
 * k C; A = w_g^T, B = x_g, ldc OC) or backward (m C, k OC; A = w_g, B =
 * dout_g, ldc C); ptrs: the pointer arrays' scratch.  0: done; 1: cuBLAS
 * refused (nothing computed, g_grp_off set); -1: an error recorded. */
static int grouped_call(bool bwd, const char *who, void **ptrs, bf16_t *out, const bf16_t *x, const uint16_t *w16,
                        const int *n, int G, int gn, int C, int OC) {
    int *rows = (int *)malloc((size_t)gn * sizeof(int));   /* (the blocks with rows' counts) */
    if (!rows) {
        zt_cuda_fail(__FILE__, __LINE__, who, "out of host memory for the GEMMs' arguments", "nothing computed");
        return -1;
    }
    const int M = bwd ? C : OC, Kd = bwd ? OC : C;
    zt_grp_args ga;
    ga.w = (const bf16_t *)w16, ga.x = x, ga.out = out, ga.ws = (size_t)OC * C, ga.xs = Kd, ga.os = M, ga.gn = 0;
    bool up = true;
    size_t o = 0, o0 = 0;
    int q = 0, q0 = 0;
    for (int g = 0; g < G && up; ++g) {
        if (n[g] <= 0) continue;
        ga.g[ga.gn] = g, ga.n[ga.gn] = n[g], ++ga.gn;
        rows[q] = n[g];
        o += (size_t)n[g];
        ++q;
        if (ga.gn == ZT_GRP_CHUNK || q == gn) {
            /* (ZT_GRP_CHUNK blocks with rows a launch, their experts and
             * row counts its by-value arguments) */
            k_grouped_ptrs<<<1, 1, 0, zt_cu.stream>>>((const void **)ptrs + q0, (const void **)ptrs + gn + q0,
                                                      ptrs + 2 * gn + q0, ga, o0);
            up = ZT_LAUNCHED("k_grouped_ptrs");
            q0 = q, o0 = o, ga.gn = 0;
        }
    }
    const int r = up ? grouped_exec(who, bwd ? "input gradients'" : "forward", ptrs, gn,
                                    bwd ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, M, 0, Kd, C, Kd, M, rows, 0)
                     : -1;
    free(rows);
    return r;
}

/* the rows of the blocks with rows and their count (0: none) */
static size_t grouped_rows(const int *n, int G, int *gn) {
    size_t rows = 0;
    *gn = 0;
    for (int g = 0; g < G; ++g)
        if (n[g] > 0) rows += (size_t)n[g], ++*gn;
    return rows;
}

void zt_cuda_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                const uint16_t *w16, const int *n, int G, int C, int OC) {
    if (!a16_ok("matmul_grouped_o16") || !n || G <= 0 || OC <= 0) return;
    int gn;
    const size_t rows = grouped_rows(n, G, &gn);
    if (!gn) return;
    if (C <= 0) {   /* (an empty product: zeros, as matmul_fwd_o16) */
        ZT_CU(cudaMemsetAsync(out16, 0, rows * OC * 2, zt_cu.stream));
        return;
    }
    if (g_grp_off) {
        grouped_loop(false, out16, NULL, inp, inp16, w16, n, G, C, OC);
        return;
    }
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_grouped(inp16 == NULL, rows, C, gn),
                                      "grouped GEMM operands");
    if (!s) return;
    const bf16_t *x = (const bf16_t *)inp16;
    size_t off = 0;
    if (!x) {
        k_round_bf16<<<zt_ew_blocks(rows * C), ZT_EW_THREADS, 0, zt_cu.stream>>>((bf16_t *)s, inp, rows * C);
        if (!ZT_LAUNCHED("k_round_bf16")) return;
        x = (const bf16_t *)s;
        off = zt_al256(rows * C * 2);
    }
    if (grouped_call(false, "matmul_grouped_o16", (void **)(s + off), (bf16_t *)out16, x, w16, n, G, gn, C, OC) == 1)
        grouped_loop(false, out16, NULL, inp, inp16, w16, n, G, C, OC);
}

/* the MoE experts' grouped input gradients (backend.h
 * matmul_grouped_bwd_o16): dinp^T[C, n_g] = w16_g dout_g^T a non-empty
 * block, one cublasGemmGroupedBatchedEx (bf16 A, B, C, fp32 compute, A N,
 * B N: m C, n n_g, k OC), its pointer arrays in scratch
 * (zt_cuda_ws_matmul_grouped(0, ...)); refused: the per-block
 * matmul_bwd_o16 loop (tmp its scratch), then and for the rest of the run
 * (the forward's g_grp_off). */
void zt_cuda_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16, const uint16_t *w16,
                                    const int *n, int G, int C, int OC) {
    if (!a16_ok("matmul_grouped_bwd_o16") || !n || G <= 0 || C <= 0) return;
    int gn;
    const size_t rows = grouped_rows(n, G, &gn);
    if (!gn) return;
    if (OC <= 0) {   /* (an empty product: zeros, as matmul_bwd_o16) */
        ZT_CU(cudaMemsetAsync(dinp16, 0, rows * C * 2, zt_cu.stream));
        return;
    }
    if (g_grp_off) {
        grouped_loop(true, dinp16, tmp, NULL, dout16, w16, n, G, C, OC);
        return;
    }
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_grouped(0, rows, OC, gn), "grouped GEMM operands");
    if (!s) return;
    if (grouped_call(true, "matmul_grouped_bwd_o16", (void **)s, (bf16_t *)dinp16, (const bf16_t *)dout16, w16, n,
                     G, gn, C, OC) == 1)
        grouped_loop(true, dinp16, tmp, NULL, dout16, w16, n, G, C, OC);
}

/* the MoE experts' grouped weight gradients (backend.h
 * matmul_grouped_dw16): a chunk of up to ZT_GRP_CHUNK blocks with rows,
 * each its expert g, its row count n and whether its gradient is fresh */
struct zt_dw_args {
    int gn;
    int g[ZT_GRP_CHUNK], n[ZT_GRP_CHUNK];
    unsigned char fresh[ZT_GRP_CHUNK];
};

/* the chunk's pointer arrays, its first row o0: pa[q] = inp + o_q C, pb[q] =
 * dout + o_q OC, pc[q] = tmp + q OC C (one thread: a.gn <= 256 stores each) */
__global__ void k_grouped_dw_ptrs(const void **pa, const void **pb, void **pc, const bf16_t *inp, const bf16_t *dout,
                                  bf16_t *tmp, int C, int OC, zt_dw_args a, size_t o0) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    size_t o = o0;
    for (int q = 0; q < a.gn; ++q) {
        pa[q] = inp + o * C;
        pb[q] = dout + o * OC;
        pc[q] = tmp + (size_t)q * OC * C;
        o += (size_t)a.n[q];
    }
}

/* dw_g += fp32(tmp_q) (fresh: =) over the chunk's blocks: block q of the
 * chunk is blockIdx.y, a thread an element of its wn = OC C */
__global__ void k_dw_add16(float *dw, const bf16_t *tmp, size_t wn, zt_dw_args a) {
    const int q = blockIdx.y;
    if (q >= a.gn) return;
    float *d = dw + (size_t)a.g[q] * wn;
    const bf16_t *t = tmp + (size_t)q * wn;
    const bool fresh = a.fresh[q] != 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < wn; i += (size_t)gridDim.x * blockDim.x)
        d[i] = (fresh ? 0.0f : d[i]) + zt_cvt_bf16_to_f32(t[i].x);
}

/* one chunk's products into tmp: the grouped call (m C, n OC, k n_q, A N
 * = inp_q, B T = dout_q, ldc C) or, after cuBLAS refused one (g_grp_off,
 * the forward's switch), a cublasGemmEx a block; then k_dw_add16.  The
 * pointer arrays in ptrs.  false: an error recorded. */
static bool grouped_dw_chunk(float *dw, bf16_t *tmp, const bf16_t *dout, const bf16_t *inp, void **ptrs,
                             const zt_dw_args &a, size_t o0, int C, int OC) {
    const float one = 1.0f, zero = 0.0f;
    const size_t wn = (size_t)OC * C;
    if (!g_grp_off) {
        k_grouped_dw_ptrs<<<1, 1, 0, zt_cu.stream>>>((const void **)ptrs, (const void **)ptrs + a.gn,
                                                     ptrs + 2 * a.gn, inp, dout, tmp, C, OC, a, o0);
        if (!ZT_LAUNCHED("k_grouped_dw_ptrs") ||
            grouped_exec("matmul_grouped_dw16", "weight gradients'", ptrs, a.gn, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, 0,
                         C, OC, C, a.n, 1) < 0)
            return false;
    }
    if (g_grp_off) {   /* (a block at a time, the same products into the same slots) */
        size_t o = o0;
        for (int q = 0; q < a.gn; ++q) {
            if (!ZT_BLAS(cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, a.n[q], &one, inp + o * C, CUDA_R_16BF,
                                      C, dout + o * OC, CUDA_R_16BF, OC, &zero, tmp + (size_t)q * wn, CUDA_R_16BF, C,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)))
                return false;
            o += (size_t)a.n[q];
        }
    }
    dim3 grid(zt_ew_blocks(wn), (unsigned)a.gn);
    k_dw_add16<<<grid, ZT_EW_THREADS, 0, zt_cu.stream>>>(dw, tmp, wn, a);
    return ZT_LAUNCHED("k_dw_add16");
}

/* matmul_grouped_dw16 (backend.h): the blocks with rows in chunks of
 * min(tmp_n / (OC C), ZT_GRP_CHUNK) (grouped_dw_chunk each), the pointer
 * arrays in scratch (zt_cuda_ws_matmul_grouped(0, ...), one chunk's at a
 * time: the stream orders a chunk's pointers after the last one's GEMM) */
void zt_cuda_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                 const uint16_t *inp16, const int *n, int G, int C, int OC) {
    if (!a16_ok("matmul_grouped_dw16") || !n || !dw || G <= 0 || C <= 0 || OC <= 0) return;
    int gn;
    const size_t rows = grouped_rows(n, G, &gn);
    if (!gn) return;
    const size_t wn = (size_t)OC * C;
    if (tmp_n < wn) {
        zt_cuda_fail(__FILE__, __LINE__, "matmul_grouped_dw16", "tmp16 holds less than one block's product",
                     "nothing computed");
        return;
    }
    const int cap = tmp_n / wn < ZT_GRP_CHUNK ? (int)(tmp_n / wn) : ZT_GRP_CHUNK;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_matmul_grouped(0, rows, C, gn < cap ? gn : cap),
                                      "grouped GEMM operands");
    if (!s) return;
    zt_dw_args a;
    a.gn = 0;
    size_t o = 0, o0 = 0;
    for (int g = 0; g < G; ++g) {
        if (n[g] <= 0) continue;
        a.g[a.gn] = g, a.n[a.gn] = n[g], a.fresh[a.gn] = (unsigned char)zt_cuda_dw_fresh(dw + (size_t)g * wn);
        ++a.gn;
        o += (size_t)n[g];
        if (a.gn == cap) {
            if (!grouped_dw_chunk(dw, (bf16_t *)tmp16, (const bf16_t *)dout16, (const bf16_t *)inp16, (void **)s, a,
                                  o0, C, OC))
                return;
            o0 = o, a.gn = 0;
        }
    }
    if (a.gn)
        grouped_dw_chunk(dw, (bf16_t *)tmp16, (const bf16_t *)dout16, (const bf16_t *)inp16, (void **)s, a, o0, C,
                         OC);
}

/* the forward product accumulated into a bf16 output (backend.h
 * matmul_fwd_acc16): one cuBLASLt GEMM with beta = 1, C = D in bf16 (fp32
 * compute: D = bf16(acc + fp32(C)), rounded once); where Lt has no such
 * algorithm, cublasGemmEx with the same types (gemmex_o16).  The scratch
 * request: matmul_fwd's (the operands rounded, or a bf16 input copied, as
 * the beta-0 entry's). */
void zt_cuda_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                              const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (!a16_ok("matmul_fwd_acc16") || N <= 0 || C <= 0 || OC <= 0) return;
    const bf16_t *x16 = (const bf16_t *)inp16, *ww16 = (const bf16_t *)w16;
    if (x16) inp = NULL;
    if (ww16) w = NULL;
    if (g_use_lt && gemm(true, false, OC, N, C, w, C, inp, C, NULL, OC, 1.0f, NULL, NULL, ww16, x16,
                         NULL, x16 != NULL, out16))
        return;
    gemmex_o16(out16, inp, x16, w, ww16, N, C, OC, 1.0f);
}

/* the base input gradient accumulated into a bf16 gradient (backend.h
 * matmul_bwd_acc16): matmul_bwd_acc's input-gradient GEMM with C = D in
 * bf16, beta 1 (fp32 compute: D = bf16(acc + fp32(C)), rounded once), by
 * cuBLASLt as matmul_fwd_acc16's (gemm with d16), where Lt has no such
 * algorithm by cublasGemmEx with the same types (gemmex16).  dout16 read as
 * matmul_bwd_acc reads it (given_dout: copied when not 256-byte aligned),
 * else dout rounded once (round_dout); the fp32 weight rounded into the
 * room after it (where gemm would round it): the scratch request is
 * matmul_bwd_acc's (the beta-0 entry's with dinp alone). */
void zt_cuda_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                              const float *w, const uint16_t *w16, int N, int C, int OC) {
    if (!a16_ok("matmul_bwd_acc16") || N <= 0 || C <= 0 || OC <= 0) return;
    const bf16_t *d16 = NULL;
    char *s = dout16 ? given_dout((const bf16_t *)dout16, N, C, OC, true, false, 0, &d16)
                     : round_dout(dout, N, C, OC, true, false, 0);
    if (!s) return;
    if (!d16) d16 = (const bf16_t *)s;
    char *room = s + zt_al256((size_t)OC * (size_t)N * 2);
    const bf16_t *a = (const bf16_t *)w16;
    if (!a) {
        const size_t na = (size_t)OC * (size_t)C;
        k_round_bf16<<<zt_ew_blocks(na), ZT_EW_THREADS, 0, zt_cu.stream>>>((bf16_t *)room, w, na);
        if (!ZT_LAUNCHED("k_round_bf16")) return;
        a = (const bf16_t *)room;
    }
    if (g_use_lt && gemm(false, false, C, N, OC, NULL, C, NULL, OC, NULL, C, 1.0f, NULL, NULL, a, d16,
                         room, false, dinp16))
        return;
    gemmex16(false, C, N, OC, a, C, d16, OC, 1.0f, dinp16, C);
}

/* the LM head's backward on its bf16 gradient (backend.h matmul_bwd_head16):
 * bwd16's two GEMMs with dout16 their bf16 operand as it is (no
 * round_dout), and inp16 (the final norm's bf16 output) dw's as it is, in
 * scratch only the room for the other operands (zt_cuda_ws_matmul_bwd_head16:
 * the request stays inp's, the room a misaligned inp16 row block is copied
 * to) */
void zt_cuda_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                               const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                               int C, int OC) {
    if (!a16_ok("matmul_bwd_head16") || N <= 0 || (!dinp && !dw)) return;
    if (((uintptr_t)dout16 & 255) != 0) {
        zt_cuda_fail(__FILE__, __LINE__, "matmul_bwd_head16", "dout16 not 256-byte aligned",
                     "a bug: please report");
        return;
    }
    if (C <= 0) return;
    if (OC <= 0) {
        if (dinp) ZT_CU(cudaMemsetAsync(dinp, 0, (size_t)N * C * sizeof(float), zt_cu.stream));
        return;
    }
    char *room = (char *)zt_cuda_scratch(
        zt_cuda_ws_matmul_bwd_head16(N, C, OC, dinp != NULL, dw != NULL), "bf16 matmul operands");
    if (!room) return;
    const bf16_t *d16 = (const bf16_t *)dout16, *ww16 = (const bf16_t *)w16;
    if (dinp)
        gemm(false, false, C, N, OC, ww16 ? NULL : w, C, NULL, OC, dinp, C, 0.0f, NULL, NULL, ww16, d16,
             room);
    const bf16_t *x16 = (const bf16_t *)inp16;
    if (dw)
        gemm(false, true, C, OC, N, x16 ? NULL : inp, C, NULL, OC, dw, C, dw_beta(dw), NULL, NULL, x16, d16,
             room);
}
