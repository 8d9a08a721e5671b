/*
 * cublas.cc -- the cuBLAS / cuBLASLt subset of the CUDA simulator, written
 * from NVIDIA's documented semantics (tests/cudasim/README):
 *   D = alpha op(A) op(B) + beta C (+ bias[i] on row i with
 *   CUBLASLT_EPILOGUE_BIAS), column-major, element (i, j) of a matrix with
 *   leading dimension ld at [i + j ld]; op(X) = X (OP_N) or X^T (OP_T);
 *   op(A) is m x k, op(B) k x n, C and D m x n.  beta == 0: C is not read.
 * Argument checks as documented: m, n, k >= 0; lda >= max(1, OP_N ? m : k),
 * ldb >= max(1, OP_N ? k : n), ldc >= max(1, m) (GemmEx), a layout's ld >=
 * its rows (Lt), shapes that agree, supported type combinations, attribute
 * sizes that match, a workspace at least the algorithm's, operands aligned
 * as the preference promised the heuristic: otherwise
 * CUBLAS_STATUS_INVALID_VALUE (or NOT_SUPPORTED for types).  The product
 * runs on the handle's stream when the host synchronizes, like a kernel;
 * products accumulate in double and round once (the GPU's fp32 order is
 * unspecified: the tests compare within tolerances).
 */
#include "cublasLt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

bool zt_sim_is_device(const void *p, size_t bytes);

struct cublasContext {
    cudaStream_t stream;
    void *ws;
    size_t ws_bytes;
};
struct cublasLtContext {
    int unused;
};
struct cublasLtMatmulDescOpaque {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t ta, tb;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type;   /* -1: D's type */
    void *aux;           /* EPILOGUE_AUX_POINTER (GELU_AUX_BIAS: written; DGELU_BGRAD: read) */
    int64_t aux_ld;      /* EPILOGUE_AUX_LD, -1: not set */
};
struct cublasLtMatrixLayoutOpaque {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque {
    uint64_t max_ws;
    uint32_t align[4];   /* A, B, C, D */
};

static const uint64_t ALGO_MAGIC = 0x63756461'73696d31ull;   /* "cudasim1" */

extern "C" const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

static cublasStatus_t bad(cublasStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cublasStatus_t bad(cublasStatus_t s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudasim (cuBLAS): %s: ", cublasGetStatusString(s));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return s;
}

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasContext{nullptr, nullptr, 0};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    cudaDeviceSynchronize();
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && (!ws || ((uintptr_t)ws & 255) || !zt_sim_is_device(ws, bytes)))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace(%p, %zu): not 256-byte aligned device memory",
                   ws, bytes);
    h->ws = ws;
    h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
extern "C" cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t m) {
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

static size_t type_size(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

static double load(const void *p, cudaDataType_t t, size_t i) {
    switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_16BF: {
        const uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: {   /* CUDA_R_16F */
        const uint32_t h = ((const uint16_t *)p)[i];
        const uint32_t e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m | 1024), (int)e - 25);
        return (h & 0x8000) ? -v : v;
    }
    }
}

static void store_f32(void *p, cudaDataType_t t, size_t i, double v) {
    /* outputs: fp32, or bf16 (cuBLASLt's D, and GELU_AUX_BIAS's aux with a
     * bf16 D): the fp32 value rounded to nearest even */
    const float f = (float)v;
    if (t == CUDA_R_16BF) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) ((uint16_t *)p)[i] = (uint16_t)((u >> 16) | 0x40);
        else ((uint16_t *)p)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        return;
    }
    ((float *)p)[i] = f;
}

struct gemm_args {
    bool ta, tb;
    int m, n, k;
    float alpha, beta;
    const void *A, *B, *C, *bias;
    void *D;
    cudaDataType_t at, bt, ct, dt;
    int64_t lda, ldb, ldc, ldd;
    uint32_t epi;      /* CUBLASLT_EPILOGUE_GELU_AUX_BIAS / _DGELU_BGRAD, else 0 */
    void *aux;         /* [m, n], ld auxld, D's type (fp32 or bf16) */
    int64_t auxld;
    float *bgrad;      /* DGELU_BGRAD: [m] */
};

/* cuBLASLt's GELU is the tanh approximation (as kernels/ gelu_fwd), in fp32 */
static float sim_gelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
static float sim_dgelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    const float th = tanhf(u);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

/* D = alpha op(A) op(B) + beta C (+ bias) */
static void gemm_run(const gemm_args &g) {
    std::vector<double> out((size_t)g.m * g.n);
    for (int j = 0; j < g.n; j++)
        for (int i = 0; i < g.m; i++) {
            double s = 0.0;
            for (int p = 0; p < g.k; p++) {
                const double a = load(g.A, g.at, g.ta ? (size_t)p + (size_t)i * g.lda : (size_t)i + (size_t)p * g.lda);
                const double b = load(g.B, g.bt, g.tb ? (size_t)j + (size_t)p * g.ldb : (size_t)p + (size_t)j * g.ldb);
                s += a * b;
            }
            double v = (double)g.alpha * (double)(float)s;
            if (g.beta != 0.0f) v += (double)g.beta * load(g.C, g.ct, (size_t)i + (size_t)j * g.ldc);
            if (g.bias) v += ((const float *)g.bias)[i];
            if (g.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                /* aux (D's type): the GEMM + bias; D: its GELU, of the fp32 value */
                store_f32(g.aux, g.dt, (size_t)i + (size_t)j * g.auxld, v);
                v = sim_gelu((float)v);
            } else if (g.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
                /* (the aux read in D's type: bf16 with a bf16 D) */
                v = (float)v * sim_dgelu((float)load(g.aux, g.dt, (size_t)i + (size_t)j * g.auxld));
            }
            out[(size_t)i + (size_t)j * g.m] = v;
        }
    /* the bias gradient: row sums of D's fp32 values (before a bf16 D's
     * rounding: the epilogue reduces what it computes) */
    if (g.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
        for (int i = 0; i < g.m; i++) {
            double s = 0.0;
            for (int j = 0; j < g.n; j++) s += (double)(float)out[(size_t)i + (size_t)j * g.m];
            g.bgrad[i] = (float)s;
        }
    for (int j = 0; j < g.n; j++)
        for (int i = 0; i < g.m; i++) store_f32(g.D, g.dt, (size_t)i + (size_t)j * g.ldd, out[(size_t)i + (size_t)j * g.m]);
}

/* the operands lie in device memory */
static cublasStatus_t check_mem(const gemm_args &g, const char *who) {
    const size_t ra = g.ta ? g.k : g.m, ca = g.ta ? g.m : g.k;
    const size_t rb = g.tb ? g.n : g.k, cb = g.tb ? g.k : g.n;
    auto span = [](size_t r, size_t c, int64_t ld, size_t es) { return r && c ? ((c - 1) * (size_t)ld + r) * es : 0; };
    if ((g.k && g.m && !zt_sim_is_device(g.A, span(ra, ca, g.lda, type_size(g.at)))) ||
        (g.k && g.n && !zt_sim_is_device(g.B, span(rb, cb, g.ldb, type_size(g.bt)))) ||
        (g.beta != 0.0f && !zt_sim_is_device(g.C, span(g.m, g.n, g.ldc, type_size(g.ct)))) ||
        (g.m && g.n && !zt_sim_is_device(g.D, span(g.m, g.n, g.ldd, type_size(g.dt)))) ||
        (g.bias && !zt_sim_is_device(g.bias, (size_t)g.m * 4)) ||
        (g.aux && g.m && g.n && !zt_sim_is_device(g.aux, span(g.m, g.n, g.auxld, type_size(g.dt)))) ||
        (g.bgrad && !zt_sim_is_device(g.bgrad, (size_t)g.m * 4)))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "%s: an operand is not (entirely) in device memory", who);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                       int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                                       int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                                       void *C, cudaDataType_t ct, int ldc, cublasComputeType_t ctype,
                                       cublasGemmAlgo_t algo) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || lda < (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx(%s, %s, m=%d, n=%d, k=%d, lda=%d, ldb=%d, ldc=%d)",
                   ta == CUBLAS_OP_N ? "N" : "T", tb == CUBLAS_OP_N ? "N" : "T", m, n, k, lda, ldb, ldc);
    /* C fp32, or bf16 with bf16 A and B (the fp32 result rounded to nearest even) */
    const bool types_ok = ctype == CUBLAS_COMPUTE_32F && at == bt &&
                          (at == CUDA_R_32F || at == CUDA_R_16BF || at == CUDA_R_16F) &&
                          (ct == CUDA_R_32F || (ct == CUDA_R_16BF && at == CUDA_R_16BF));
    if (!types_ok || algo != CUBLAS_GEMM_DEFAULT)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: types A %d B %d C %d compute %d", at, bt, ct, ctype);
    gemm_args g = {ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, *(const float *)alpha, *(const float *)beta,
                   A, B, C, nullptr, C, at, bt, ct, ct, lda, ldb, ldc, ldc, 0, nullptr, 0, nullptr};
    if (!m || !n) return CUBLAS_STATUS_SUCCESS;
    cublasStatus_t s = check_mem(g, "cublasGemmEx");
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    zt_sim_enqueue(h->stream, [g]() { gemm_run(g); });
    return CUBLAS_STATUS_SUCCESS;
}

/* batch products, operand i at X + i strideX elements (cublasGemmStridedBatchedEx's
 * documented semantics); each one as cublasGemmEx */
extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
    const void *A, cudaDataType_t at, int lda, long long sA, const void *B, cudaDataType_t bt, int ldb,
    long long sB, const void *beta, void *C, cudaDataType_t ct, int ldc, long long sC, int batch,
    cublasComputeType_t ctype, cublasGemmAlgo_t algo) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (batch < 0 || sA < 0 || sB < 0 || sC < 0)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmStridedBatchedEx: batch %d, strides %lld %lld %lld",
                   batch, sA, sB, sC);
    for (int i = 0; i < batch; i++) {
        cublasStatus_t s = cublasGemmEx(h, ta, tb, m, n, k, alpha, (const char *)A + (size_t)i * sA * type_size(at),
                                        at, lda, (const char *)B + (size_t)i * sB * type_size(bt), bt, ldb, beta,
                                        (char *)C + (size_t)i * sC * type_size(ct), ct, ldc, ctype, algo);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* grouped products (cublasGemmGroupedBatchedEx's documented semantics):
 * group i's group_size[i] problems share transa/transb, m, n, k, alpha,
 * beta (host arrays, one entry a group) and ld's; the problems' A, B, C
 * pointers are device arrays (one entry a problem, groups in order), read
 * when the work runs on the stream; each product as cublasGemmEx computes
 * it.  Checks as documented: group_count >= 0, per group m, n, k,
 * group_size >= 0, lda / ldb / ldc >= max(1, rows of the stored matrix);
 * types: COMPUTE_32F with A, B, C all 16BF, all 16F or all 32F, or
 * COMPUTE_32F_FAST_TF32 with all 32F, else NOT_SUPPORTED.  Test hook:
 * ZT_SIM_CUBLAS_NO_GROUPED=1 makes every call NOT_SUPPORTED. */
extern "C" cublasStatus_t cublasGemmGroupedBatchedEx(
    cublasHandle_t h, const cublasOperation_t transa_array[], const cublasOperation_t transb_array[],
    const int m_array[], const int n_array[], const int k_array[], const void *alpha_array,
    const void *const Aarray[], cudaDataType_t at, const int lda_array[], const void *const Barray[],
    cudaDataType_t bt, const int ldb_array[], const void *beta_array, void *const Carray[], cudaDataType_t ct,
    const int ldc_array[], int group_count, const int group_size[], cublasComputeType_t ctype) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    const char *hook = getenv("ZT_SIM_CUBLAS_NO_GROUPED");
    if (hook && hook[0] == '1') return CUBLAS_STATUS_NOT_SUPPORTED;   /* (quietly: the fallback's test) */
    if (group_count < 0)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmGroupedBatchedEx: group_count %d", group_count);
    const bool types_ok = (ctype == CUBLAS_COMPUTE_32F && at == bt && bt == ct &&
                           (at == CUDA_R_16BF || at == CUDA_R_16F || at == CUDA_R_32F)) ||
                          (ctype == CUBLAS_COMPUTE_32F_FAST_TF32 && at == CUDA_R_32F && bt == CUDA_R_32F &&
                           ct == CUDA_R_32F);
    if (!types_ok)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmGroupedBatchedEx: types A %d B %d C %d compute %d", at,
                   bt, ct, ctype);
    if (group_count == 0) return CUBLAS_STATUS_SUCCESS;
    if (!transa_array || !transb_array || !m_array || !n_array || !k_array || !alpha_array || !beta_array ||
        !lda_array || !ldb_array || !ldc_array || !group_size)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmGroupedBatchedEx: a NULL host array");
    size_t total = 0;
    for (int i = 0; i < group_count; i++) {
        const cublasOperation_t ta = transa_array[i], tb = transb_array[i];
        const int m = m_array[i], n = n_array[i], k = k_array[i];
        if (m < 0 || n < 0 || k < 0 || group_size[i] < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
            (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) ||
            lda_array[i] < (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
            ldb_array[i] < (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc_array[i] < (m > 1 ? m : 1))
            return bad(CUBLAS_STATUS_INVALID_VALUE,
                       "cublasGemmGroupedBatchedEx: group %d (%s, %s, m=%d, n=%d, k=%d, lda=%d, ldb=%d, ldc=%d, "
                       "group_size=%d)",
                       i, ta == CUBLAS_OP_N ? "N" : "T", tb == CUBLAS_OP_N ? "N" : "T", m, n, k, lda_array[i],
                       ldb_array[i], ldc_array[i], group_size[i]);
        total += (size_t)group_size[i];
    }
    if (!total) return CUBLAS_STATUS_SUCCESS;
    const size_t pb = total * sizeof(void *);
    if (!zt_sim_is_device(Aarray, pb) || !zt_sim_is_device(Barray, pb) || !zt_sim_is_device(Carray, pb))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmGroupedBatchedEx: a pointer array not in device memory");
    /* (the problems' arguments but their pointers, which the stream work reads) */
    std::vector<gemm_args> probs;
    for (int i = 0; i < group_count; i++) {
        const float al = ((const float *)alpha_array)[i];   /* (fp32 scalars: both compute types) */
        const float be = ((const float *)beta_array)[i];
        for (int j = 0; j < group_size[i]; j++)
            probs.push_back(gemm_args{transa_array[i] == CUBLAS_OP_T, transb_array[i] == CUBLAS_OP_T, m_array[i],
                                      n_array[i], k_array[i], al, be, nullptr, nullptr, nullptr, nullptr, nullptr,
                                      at, bt, ct, ct, lda_array[i], ldb_array[i], ldc_array[i], ldc_array[i], 0,
                                      nullptr, 0, nullptr});
    }
    zt_sim_enqueue(h->stream, [probs, Aarray, Barray, Carray]() {
        for (size_t q = 0; q < probs.size(); q++) {
            gemm_args g = probs[q];
            g.A = Aarray[q];
            g.B = Barray[q];
            g.C = Carray[q];
            g.D = Carray[q];
            if (!g.m || !g.n) continue;
            if (check_mem(g, "cublasGemmGroupedBatchedEx") != CUBLAS_STATUS_SUCCESS) {
                fprintf(stderr, "cudasim: cublasGemmGroupedBatchedEx: problem %zu's operands are not device "
                                "memory when the stream ran it\n", q);
                abort();
            }
            gemm_run(g);
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ cuBLASLt */

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasLtContext{0};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct,
                                                   cudaDataType_t st) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    *d = new cublasLtMatmulDescOpaque{ct, st, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr, -1,
                                       nullptr, -1};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

#define SET(field, T)                                                                       \
    do {                                                                                    \
        if (bytes != sizeof(T))                                                             \
            return bad(CUBLAS_STATUS_INVALID_VALUE, "%s: attribute %d takes %zu bytes, not %zu", \
                       __func__, (int)a, sizeof(T), bytes);                                 \
        memcpy(&(field), buf, sizeof(T));                                                   \
    } while (0)

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                         const void *buf, size_t bytes) {
    if (!d || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: SET(d->ta, int32_t); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: SET(d->tb, int32_t); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: SET(d->epilogue, uint32_t); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: SET(d->bias, const void *); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: SET(d->bias_type, int32_t); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: SET(d->aux, void *); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: SET(d->aux_ld, int64_t); break;
    default: return bad(CUBLAS_STATUS_INVALID_VALUE, "matmul desc attribute %d: not in the simulator", (int)a);
    }
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows,
                                                     uint64_t cols, int64_t ld) {
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new cublasLtMatrixLayoutOpaque{t, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    *p = new cublasLtMatmulPreferenceOpaque{0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                               cublasLtMatmulPreferenceAttributes_t a,
                                                               const void *buf, size_t bytes) {
    if (!p || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    switch (a) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: SET(p->max_ws, uint64_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: SET(p->align[0], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: SET(p->align[1], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: SET(p->align[2], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: SET(p->align[3], uint32_t); break;
    default: return bad(CUBLAS_STATUS_INVALID_VALUE, "preference attribute %d: not in the simulator", (int)a);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* the problem the descriptors describe, or an error */
static cublasStatus_t lt_problem(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                 cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, gemm_args *g) {
    if (!op || !a || !b || !c || !d) return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLt: a NULL descriptor");
    if ((op->ta != CUBLAS_OP_N && op->ta != CUBLAS_OP_T) || (op->tb != CUBLAS_OP_N && op->tb != CUBLAS_OP_T))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLt: transpose %d / %d", op->ta, op->tb);
    const cublasLtMatrixLayout_t ls[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (ls[i]->ld < 0 || (uint64_t)ls[i]->ld < ls[i]->rows || ls[i]->rows > 0x7fffffff || ls[i]->cols > 0x7fffffff)
            return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLt: layout %c is %llu x %llu with ld %lld (ld < rows)",
                       "ABCD"[i], (unsigned long long)ls[i]->rows, (unsigned long long)ls[i]->cols,
                       (long long)ls[i]->ld);
    g->ta = op->ta == CUBLAS_OP_T;
    g->tb = op->tb == CUBLAS_OP_T;
    g->m = (int)d->rows;
    g->n = (int)d->cols;
    const uint64_t am = g->ta ? a->cols : a->rows, ak = g->ta ? a->rows : a->cols;
    const uint64_t bk = g->tb ? b->cols : b->rows, bn = g->tb ? b->rows : b->cols;
    g->k = (int)ak;
    if (am != d->rows || bn != d->cols || ak != bk || c->rows != d->rows || c->cols != d->cols)
        return bad(CUBLAS_STATUS_INVALID_VALUE,
                   "cublasLt: shapes disagree: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu, D %llux%llu",
                   (unsigned long long)am, (unsigned long long)ak, (unsigned long long)bk, (unsigned long long)bn,
                   (unsigned long long)c->rows, (unsigned long long)c->cols, (unsigned long long)d->rows,
                   (unsigned long long)d->cols);
    /* C and D: fp32, or bf16 (with bf16 A and B; C's type is D's) */
    const bool d16 = d->type == CUDA_R_16BF && c->type == CUDA_R_16BF && a->type == CUDA_R_16BF;
    if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F || a->type != b->type ||
        (a->type != CUDA_R_32F && a->type != CUDA_R_16BF) ||
        (!d16 && (c->type != CUDA_R_32F || d->type != CUDA_R_32F)))
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLt: types A %d B %d C %d D %d compute %d scale %d", a->type,
                   b->type, c->type, d->type, op->compute, op->scale);
    const uint32_t ep = op->epilogue;
    const bool gelu_aux = ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS, dgelu = ep == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    if (ep != CUBLASLT_EPILOGUE_DEFAULT && ep != CUBLASLT_EPILOGUE_BIAS && !gelu_aux && !dgelu)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLt: epilogue %u not in the simulator", ep);
    /* (a bf16 D: the aux in D's type, bf16: DGELU_BGRAD reads it,
     * GELU_AUX_BIAS writes the GEMM + bias rounded to nearest even) */
    /* the bias (or bias gradient) vector has D's type when D is not int8
     * (BIAS_DATA_TYPE -1); fp32 may be set (with a bf16 D too); a bf16
     * vector is not simulated */
    if (ep != CUBLASLT_EPILOGUE_DEFAULT && op->bias_type != CUDA_R_32F &&
        (op->bias_type != -1 || d->type != CUDA_R_32F))
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLt: bias type %d with D type %d not in the simulator",
                   op->bias_type, d->type);
    if (gelu_aux || dgelu) {
        /* EPILOGUE_AUX_POINTER (the heuristic depends on its value for the
         * alignment) needs EPILOGUE_AUX_LD: for the GELU input matrix a
         * multiple of 8, no less than D's rows */
        if (!op->aux)
            return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLt: epilogue %u without EPILOGUE_AUX_POINTER", ep);
        if (op->aux_ld < 0 || op->aux_ld % 8 || (uint64_t)op->aux_ld < d->rows)
            return bad(CUBLAS_STATUS_INVALID_VALUE,
                       "cublasLt: EPILOGUE_AUX_LD %lld for the GELU input (a multiple of 8, >= D's %llu rows)",
                       (long long)op->aux_ld, (unsigned long long)d->rows);
    }
    g->at = a->type;
    g->bt = b->type;
    g->ct = c->type;
    g->dt = d->type;
    g->lda = a->ld;
    g->ldb = b->ld;
    g->ldc = c->ld;
    g->ldd = d->ld;
    g->bias = ep == CUBLASLT_EPILOGUE_BIAS || gelu_aux ? op->bias : nullptr;
    g->epi = gelu_aux || dgelu ? ep : 0;
    g->aux = gelu_aux || dgelu ? op->aux : nullptr;
    g->auxld = op->aux_ld;
    g->bgrad = dgelu ? (float *)op->bias : nullptr;
    return CUBLAS_STATUS_SUCCESS;
}

static uint32_t align_of(const void *p) {
    uint32_t al = 256;
    while (al > 1 && ((uintptr_t)p & (al - 1))) al >>= 1;
    return al;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                         cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                         cublasLtMatmulPreference_t pref, int requested,
                                                         cublasLtMatmulHeuristicResult_t *res, int *nres) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pref || !res || !nres || requested <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    gemm_args g;
    cublasStatus_t s = lt_problem(op, a, b, c, d, &g);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    *nres = 0;
    /* the one algorithm: its workspace (up to 1 MiB, within the preference)
     * and the operand alignments it may assume (the preference's, at most 16) */
    memset(res, 0, sizeof *res);
    const uint64_t ws = pref->max_ws < ((uint64_t)1 << 20) ? pref->max_ws : ((uint64_t)1 << 20);
    res->algo.data[0] = ALGO_MAGIC;
    res->algo.data[1] = ws;
    for (int i = 0; i < 4; i++) res->algo.data[2 + i] = pref->align[i] < 16 ? pref->align[i] : 16;
    /* the aux matrix's alignment, as its pointer had it (at most 16) */
    if (g.aux) res->algo.data[6] = align_of(g.aux) < 16 ? align_of(g.aux) : 16;
    res->algo.data[7] = g.epi;
    const size_t es = type_size(a->type);
    for (int i = 0; i < 2; i++)
        if (res->algo.data[2 + i] < es) return CUBLAS_STATUS_NOT_SUPPORTED;   /* operands must be element-aligned */
    res->workspaceSize = ws;
    res->state = CUBLAS_STATUS_SUCCESS;
    res->wavesCount = 1.0f;
    *nres = 1;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                                         const void *A, cublasLtMatrixLayout_t la, const void *B,
                                         cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                                         cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                                         const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                                         cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta) return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: alpha or beta NULL");
    gemm_args g;
    cublasStatus_t st = lt_problem(op, la, lb, lc, ld, &g);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!algo || algo->data[0] != ALGO_MAGIC)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: no algorithm (the simulator has no default one)");
    if (ws_bytes < algo->data[1] || (algo->data[1] && (!ws || !zt_sim_is_device(ws, algo->data[1]))))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: workspace %p of %zu bytes, the algorithm needs %llu",
                   ws, ws_bytes, (unsigned long long)algo->data[1]);
    const void *ptr[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if (align_of(ptr[i]) < algo->data[2 + i])
            return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: %c at %p is less aligned than the %llu bytes "
                       "promised to the heuristic", "ABCD"[i], ptr[i], (unsigned long long)algo->data[2 + i]);
    if (algo->data[7] != g.epi)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm was chosen for epilogue %llu, not %u",
                   (unsigned long long)algo->data[7], g.epi);
    if (g.aux && align_of(g.aux) < algo->data[6])
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: aux at %p is less aligned than the %llu bytes "
                   "its pointer had at the heuristic", (void *)g.aux, (unsigned long long)algo->data[6]);
    g.alpha = *(const float *)alpha;
    g.beta = *(const float *)beta;
    g.A = A;
    g.B = B;
    g.C = C;
    g.D = D;
    if (!g.m || !g.n) return CUBLAS_STATUS_SUCCESS;
    if (g.bias == nullptr && (op->epilogue == CUBLASLT_EPILOGUE_BIAS || op->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS))
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: bias epilogue without a bias pointer");
    if (g.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD && !g.bgrad)
        return bad(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: DGELU_BGRAD without a bias gradient pointer");
    st = check_mem(g, "cublasLtMatmul");
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const size_t wsn = algo->data[1];
    zt_sim_enqueue(s, [g, ws, wsn]() {
        if (wsn) memset(ws, 0x5A, wsn);   /* the algorithm uses its workspace */
        gemm_run(g);
    });
    return CUBLAS_STATUS_SUCCESS;
}
