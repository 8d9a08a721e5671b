/*
 * cuda_sdpa.cu -- attention through cuDNN's fused scaled-dot-product
 * attention (the library PyTorch's SDPA uses), built with cuDNN 9's backend
 * (graph) API the way cudnn-frontend builds its SDPA graphs: operations on
 * tensor descriptors, an operation graph, an engine from the heuristics,
 * an execution plan (cached per shape) and a variant pack per call.
 *
 * Layout (backend.h, cuda_attention.cu): qkv[B, T, R], R = (NH + 2 NKV) hs,
 * in bf16 (q16: the bf16 entries' qkv16 itself, the fp32 entries' rounded
 * once) is read by cuDNN in place through strides: Q [B, NH, T, hs] strides [T R, hs, R, 1], K and V
 * [B, NKV, T, hs] at columns NH hs and (NH + NKV) hs; q head h uses kv head
 * h / (NH / NKV) (the matmuls broadcast K and V over the group: GQA, MQA).
 *
 * Forward graph: S = Q K^T (fp32), S *= scale, causal mask (gen-index of
 * rows and columns, row >= col, select -inf), with a window also
 * row - col < window, then softmax with its stats: m = max, e = exp(S - m),
 * s = sum e, Stats = m + log s (our lse[B, NH, T], fp32, written in place),
 * P = e / s, O = P V (bf16 [B, NH, T, hs]: the *16o entries' out16
 * itself, else widened into out).
 *
 * Backward graph (cudnn-frontend's composite SDPA backward):
 * softmax_sum = rowsum(dO * O) (x 1, the dropout-scale slot), P = exp(S
 * scale - Stats) masked, dV = P^T dO, dP = dO V^T, dS = P (dP - softmax_sum)
 * scale, dK = dS^T Q, dQ = dS K accumulated in fp32 (dQ_accum) then cast;
 * with NKV < NH, dK and dV are computed per q head (fp32 dK_fullhead,
 * dV_fullhead) and summed over the group by a reduction.  dQ, dK, dV are
 * bf16 in place of q16 (dqkv16), widened into dqkv; O is the *16o entries'
 * out16 itself, else out rounded; dO is dout rounded.  softmax_sum, dQ_accum
 * and the full-head buffers live in the backend's scratch (dQ_accum zeroed
 * before each execution: cuDNN accumulates into it), with cuDNN's
 * workspace after them (zt_cuda_ws_sdpa_fwd / _bwd: our buffers, plus the
 * plan's workspace, which cuDNN reports at run time).
 *
 * Which path: zt_cuda_sdpa_rule() (one rule for forward and backward).  A
 * shape cuDNN declines (heuristics give no engine, or no engine's plan
 * finalizes: CUDNN_STATUS_NOT_SUPPORTED*) is remembered and runs on our
 * kernels; any other cuDNN error is recorded like a CUDA error.
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_convert.h"
#include "cuda_internal.cuh"

/* ------------------------------------------------------------ the rule */

static int g_det = -1;          /* deterministic mode: -1 not read yet */
static int g_cudnn_on = 1;      /* tests: 0 keeps every call on our kernels */
static long g_calls[3];         /* cuDNN forwards, backwards, declined shapes */

static bool det_mode(void) {
    if (g_det < 0) {
        const char *e = getenv("ZT_CUDA_DETERMINISTIC");
        g_det = e && *e && strcmp(e, "0") != 0;
    }
    return g_det != 0;
}

extern "C" void zt_cuda_att_cudnn_for_test(int on, int deterministic) {
    g_cudnn_on = on != 0;
    g_det = deterministic != 0;
}
extern "C" void zt_cuda_att_cudnn_calls_for_test(long *fwd, long *bwd, long *declined) {
    if (fwd) *fwd = g_calls[0];
    if (bwd) *bwd = g_calls[1];
    if (declined) *declined = g_calls[2];
}

/* covered: cuDNN built, not deterministic mode, bf16 matmul mode, no
 * soft-cap, head size a multiple of 8 up to 256 (rule_in: in matmul
 * precision `mode`, the planner's question before the run sets it) */
static inline int rule_in(int mode, int hs, const zt_attn_opts *o) {
#ifdef ZT_HAVE_CUDNN
    return g_cudnn_on && !det_mode() && mode == ZT_MATMUL_BF16 && o->softcap == 0.0f && hs % 8 == 0 &&
           hs <= 256;
#else
    (void)mode, (void)hs, (void)o;
    return 0;
#endif
}
static inline int rule(int hs, const zt_attn_opts *o) { return rule_in(zt_cuda_matmul_mode(), hs, o); }

extern "C" const char *zt_cuda_attention_path(void) {
#ifdef ZT_HAVE_CUDNN
    if (det_mode())
        return "ztrain's kernels (deterministic mode: ZT_CUDA_DETERMINISTIC is set)";
    return "cuDNN fused attention in bf16 matmul mode (no soft-cap, head size a multiple of 8 up to 256, "
           "shapes cuDNN takes); ztrain's kernels otherwise";
#else
    return "ztrain's kernels (this build has no cuDNN)";
#endif
}

#ifdef ZT_HAVE_CUDNN
#include <cudnn.h>

#include <vector>

/* ------------------------------------------------------------ conversions */

__global__ void k_sdpa_round(uint16_t *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_f32_to_bf16(in[i]);
}
__global__ void k_sdpa_widen(float *out, const uint16_t *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = zt_cvt_bf16_to_f32(in[i]);
}
static bool round_to(uint16_t *out, const float *in, size_t n) {
    k_sdpa_round<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    return ZT_LAUNCHED("k_sdpa_round");
}
static bool widen_to(float *out, const uint16_t *in, size_t n) {
    k_sdpa_widen<<<zt_ew_blocks(n), ZT_EW_THREADS, 0, zt_cu.stream>>>(out, in, n);
    return ZT_LAUNCHED("k_sdpa_widen");
}

/* ------------------------------------------------------------ graph building */

/* the attributes cuDNN 9 marks deprecated (the handle of a graph and of a
 * plan), by value so that the build does not warn */
static const cudnnBackendAttributeName_t ATTR_GRAPH_HANDLE = (cudnnBackendAttributeName_t)800;
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE = (cudnnBackendAttributeName_t)400;

/* tensor unique ids of the variant pack */
enum {
    U_Q = 1, U_KT, U_V, U_O, U_STATS, U_SCALE, U_NINF, U_WIN, U_DO, U_VT, U_KN, U_ONE, U_SSUM, U_DQACC,
    U_DKF, U_DVF, U_DQ, U_DK, U_DV, U_VIRT = 100
};

struct Graph {
    std::vector<cudnnBackendDescriptor_t> all, ops;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    const char *where = "";
    int64_t next_virt = U_VIRT;

    bool ok(cudnnStatus_t s, const char *w) {
        if (st == CUDNN_STATUS_SUCCESS && s != CUDNN_STATUS_SUCCESS) st = s, where = w;
        return st == CUDNN_STATUS_SUCCESS;
    }
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t) {
        cudnnBackendDescriptor_t d = NULL;
        if (st != CUDNN_STATUS_SUCCESS) return NULL;
        if (!ok(cudnnBackendCreateDescriptor(t, &d), "cudnnBackendCreateDescriptor")) return NULL;
        all.push_back(d);
        return d;
    }
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t,
             int64_t count, const void *v) {
        if (st == CUDNN_STATUS_SUCCESS) ok(cudnnBackendSetAttribute(d, n, t, count, v), "cudnnBackendSetAttribute");
    }
    void fin(cudnnBackendDescriptor_t d) {
        if (st == CUDNN_STATUS_SUCCESS) ok(cudnnBackendFinalize(d), "cudnnBackendFinalize");
    }
    void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendDescriptor_t v) {
        set(d, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
    }
    /* a 4-d tensor; strides NULL: dense */
    cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t *dims, const int64_t *strides,
                                    bool virt = false, bool byval = false) {
        int64_t s[4];
        if (!strides) {
            s[3] = 1;
            for (int i = 2; i >= 0; i--) s[i] = s[i + 1] * dims[i + 1];
            strides = s;
        }
        cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int64_t align = 16;
        set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
        set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
        set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
        if (byval) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval);
        fin(d);
        return d;
    }
    cudnnBackendDescriptor_t virt(cudnnDataType_t dt, const int64_t *dims) {
        return tensor(next_virt++, dt, dims, NULL, true);
    }
    cudnnBackendDescriptor_t scalar(int64_t uid) {
        const int64_t one[4] = {1, 1, 1, 1};
        return tensor(uid, CUDNN_DATA_FLOAT, one, one, false, true);
    }
    void add_op(cudnnBackendDescriptor_t op) {
        fin(op);
        if (st == CUDNN_STATUS_SUCCESS) ops.push_back(op);
    }
    /* y = mode(x, b, t); axis for GEN_INDEX */
    cudnnBackendDescriptor_t pw(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                                cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
        cudnnBackendDescriptor_t p = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        set(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        set(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        if (axis >= 0) set(p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
        fin(p);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, p);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
        if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
        if (t) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
        set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
        add_op(op);
        return y;
    }
    cudnnBackendDescriptor_t matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                                    cudnnBackendDescriptor_t c) {
        const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        cudnnBackendDescriptor_t m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
        fin(m);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
        set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
        add_op(op);
        return c;
    }
    cudnnBackendDescriptor_t reduce(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                    cudnnBackendDescriptor_t y) {
        const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
        cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
        set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
        fin(r);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
        add_op(op);
        return y;
    }
    /* the transpose of the last two dims of a virtual [b, h, m, n] tensor, in bf16 */
    cudnnBackendDescriptor_t transposed(cudnnBackendDescriptor_t x, const int64_t *dims) {
        const int64_t td[4] = {dims[0], dims[1], dims[3], dims[2]};
        const int64_t ts[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], 1, dims[3]};
        cudnnBackendDescriptor_t y = tensor(next_virt++, CUDNN_DATA_BFLOAT16, td, ts, true);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
        add_op(op);
        return y;
    }
    /* s masked: causal (row >= col) and, with a window, row - col < window */
    cudnnBackendDescriptor_t mask(cudnnBackendDescriptor_t s, const int64_t *sd, bool window) {
        cudnnBackendDescriptor_t row = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd),
                                          CUDNN_DATA_INT32, 2);
        cudnnBackendDescriptor_t col = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd),
                                          CUDNN_DATA_INT32, 3);
        cudnnBackendDescriptor_t ninf = scalar(U_NINF);
        cudnnBackendDescriptor_t m = pw(CUDNN_POINTWISE_CMP_GE, row, col, NULL, virt(CUDNN_DATA_BOOLEAN, sd),
                                        CUDNN_DATA_INT32);
        s = pw(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, m, virt(CUDNN_DATA_FLOAT, sd));
        if (window) {
            cudnnBackendDescriptor_t d = pw(CUDNN_POINTWISE_SUB, row, col, NULL, virt(CUDNN_DATA_INT32, sd),
                                            CUDNN_DATA_INT32);
            cudnnBackendDescriptor_t w = pw(CUDNN_POINTWISE_CMP_LT, d, scalar(U_WIN), NULL,
                                            virt(CUDNN_DATA_BOOLEAN, sd));
            s = pw(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, w, virt(CUDNN_DATA_FLOAT, sd));
        }
        return s;
    }
    void destroy() {
        for (cudnnBackendDescriptor_t d : all) cudnnBackendDestroyDescriptor(d);
        all.clear();
        ops.clear();
    }
};

/* one cached plan per shape and direction */
struct Plan {
    int bwd, B, T, NH, NKV, hs, window;
    int state;   /* 1 ready, 0 declined by cuDNN, -1 failed (recorded) */
    cudnnBackendDescriptor_t plan;
    int64_t ws;
    Graph g;
};
static cudnnHandle_t g_handle;
static std::vector<Plan *> g_plans;

static void fail_cudnn(const char *what, cudnnStatus_t s) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s", cudnnGetErrorString(s));
    zt_cuda_fail(__FILE__, __LINE__, what, msg, "a cuDNN attention graph failed: ZT_CUDA_DETERMINISTIC=1 "
                 "runs ztrain's own kernels");
}
static bool declined(cudnnStatus_t s) { return s >= 3000 && s < 4000; }   /* CUDNN_STATUS_NOT_SUPPORTED* */

/* Q, K^T, V views into q16 (the forward's and the backward's) */
static void qkv_dims(int B, int T, int NH, int NKV, int hs, int64_t *qd, int64_t *qs, int64_t *kd,
                     int64_t *kts, int64_t *ktd) {
    const int64_t R = (int64_t)(NH + 2 * NKV) * hs;
    const int64_t q[4] = {B, NH, T, hs}, s[4] = {T * R, hs, R, 1}, k[4] = {B, NKV, T, hs};
    const int64_t kt[4] = {B, NKV, hs, T}, kts_[4] = {T * R, hs, 1, R};
    memcpy(qd, q, sizeof q), memcpy(qs, s, sizeof s), memcpy(kd, k, sizeof k);
    memcpy(ktd, kt, sizeof kt), memcpy(kts, kts_, sizeof kts_);
}

static void build_fwd(Graph &g, int B, int T, int NH, int NKV, int hs, bool window) {
    int64_t qd[4], qs[4], kd[4], kts[4], ktd[4];
    qkv_dims(B, T, NH, NKV, hs, qd, qs, kd, kts, ktd);
    const int64_t AD = (int64_t)NH * hs;
    const int64_t od[4] = {B, NH, T, hs}, os[4] = {T * AD, hs, AD, 1};
    const int64_t sd[4] = {B, NH, T, T}, st[4] = {B, NH, T, 1}, sts[4] = {(int64_t)NH * T, T, 1, 1};
    cudnnBackendDescriptor_t Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, qd, qs);
    cudnnBackendDescriptor_t Kt = g.tensor(U_KT, CUDNN_DATA_BFLOAT16, ktd, kts);
    cudnnBackendDescriptor_t V = g.tensor(U_V, CUDNN_DATA_BFLOAT16, kd, qs);
    cudnnBackendDescriptor_t O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, od, os);
    cudnnBackendDescriptor_t Stats = g.tensor(U_STATS, CUDNN_DATA_FLOAT, st, sts);
    cudnnBackendDescriptor_t S = g.matmul(Q, Kt, g.virt(CUDNN_DATA_FLOAT, sd));
    S = g.pw(CUDNN_POINTWISE_MUL, S, g.scalar(U_SCALE), NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    S = g.mask(S, sd, window);
    cudnnBackendDescriptor_t mx = g.reduce(CUDNN_REDUCE_TENSOR_MAX, S, g.virt(CUDNN_DATA_FLOAT, st));
    cudnnBackendDescriptor_t e = g.pw(CUDNN_POINTWISE_SUB, S, mx, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    e = g.pw(CUDNN_POINTWISE_EXP, e, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    cudnnBackendDescriptor_t sum = g.reduce(CUDNN_REDUCE_TENSOR_ADD, e, g.virt(CUDNN_DATA_FLOAT, st));
    cudnnBackendDescriptor_t lg = g.pw(CUDNN_POINTWISE_LOG, sum, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, st));
    g.pw(CUDNN_POINTWISE_ADD, mx, lg, NULL, Stats);
    cudnnBackendDescriptor_t P = g.pw(CUDNN_POINTWISE_DIV, e, sum, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    g.matmul(P, V, O);
}

static void build_bwd(Graph &g, int B, int T, int NH, int NKV, int hs, bool window) {
    int64_t qd[4], qs[4], kd[4], kts[4], ktd[4];
    qkv_dims(B, T, NH, NKV, hs, qd, qs, kd, kts, ktd);
    const int64_t AD = (int64_t)NH * hs;
    const int64_t od[4] = {B, NH, T, hs}, os[4] = {T * AD, hs, AD, 1};
    const int64_t sd[4] = {B, NH, T, T}, st[4] = {B, NH, T, 1}, sts[4] = {(int64_t)NH * T, T, 1, 1};
    const bool gqa = NKV != NH;
    cudnnBackendDescriptor_t Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, qd, qs);
    cudnnBackendDescriptor_t Kt = g.tensor(U_KT, CUDNN_DATA_BFLOAT16, ktd, kts);
    cudnnBackendDescriptor_t Kn = g.tensor(U_KN, CUDNN_DATA_BFLOAT16, kd, qs);
    cudnnBackendDescriptor_t Vt = g.tensor(U_VT, CUDNN_DATA_BFLOAT16, ktd, kts);
    cudnnBackendDescriptor_t O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, od, os);
    cudnnBackendDescriptor_t dO = g.tensor(U_DO, CUDNN_DATA_BFLOAT16, od, os);
    cudnnBackendDescriptor_t Stats = g.tensor(U_STATS, CUDNN_DATA_FLOAT, st, sts);
    cudnnBackendDescriptor_t ssum = g.tensor(U_SSUM, CUDNN_DATA_FLOAT, st, sts);
    cudnnBackendDescriptor_t dQacc = g.tensor(U_DQACC, CUDNN_DATA_FLOAT, od, NULL);
    cudnnBackendDescriptor_t dQ = g.tensor(U_DQ, CUDNN_DATA_BFLOAT16, qd, qs);
    cudnnBackendDescriptor_t dK = g.tensor(U_DK, CUDNN_DATA_BFLOAT16, kd, qs);
    cudnnBackendDescriptor_t dV = g.tensor(U_DV, CUDNN_DATA_BFLOAT16, kd, qs);
    cudnnBackendDescriptor_t scale = g.scalar(U_SCALE);
    /* softmax_sum = rowsum(dO * O) * 1 */
    cudnnBackendDescriptor_t doo = g.pw(CUDNN_POINTWISE_MUL, dO, O, NULL, g.virt(CUDNN_DATA_FLOAT, od));
    doo = g.reduce(CUDNN_REDUCE_TENSOR_ADD, doo, g.virt(CUDNN_DATA_FLOAT, st));
    g.pw(CUDNN_POINTWISE_MUL, doo, g.scalar(U_ONE), NULL, ssum);
    /* P = exp(S scale - Stats), masked */
    cudnnBackendDescriptor_t S = g.matmul(Q, Kt, g.virt(CUDNN_DATA_FLOAT, sd));
    S = g.pw(CUDNN_POINTWISE_MUL, S, scale, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    S = g.pw(CUDNN_POINTWISE_SUB, S, Stats, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    S = g.mask(S, sd, window);
    cudnnBackendDescriptor_t P = g.pw(CUDNN_POINTWISE_EXP, S, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    /* dV = P^T dO (per q head, then summed over the group) */
    cudnnBackendDescriptor_t Pt = g.transposed(P, sd);
    if (gqa) {
        cudnnBackendDescriptor_t dVf = g.tensor(U_DVF, CUDNN_DATA_FLOAT, od, NULL);
        g.reduce(CUDNN_REDUCE_TENSOR_ADD, g.matmul(Pt, dO, dVf), dV);
    } else {
        g.matmul(Pt, dO, dV);
    }
    /* dS = P (dO V^T - softmax_sum) scale */
    cudnnBackendDescriptor_t dP = g.matmul(dO, Vt, g.virt(CUDNN_DATA_FLOAT, sd));
    dP = g.pw(CUDNN_POINTWISE_SUB, dP, ssum, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    dP = g.pw(CUDNN_POINTWISE_MUL, dP, P, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    cudnnBackendDescriptor_t dS = g.pw(CUDNN_POINTWISE_MUL, dP, scale, NULL, g.virt(CUDNN_DATA_FLOAT, sd));
    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dSt = g.transposed(dS, sd);
    if (gqa) {
        cudnnBackendDescriptor_t dKf = g.tensor(U_DKF, CUDNN_DATA_FLOAT, od, NULL);
        g.reduce(CUDNN_REDUCE_TENSOR_ADD, g.matmul(dSt, Q, dKf), dK);
    } else {
        g.matmul(dSt, Q, dK);
    }
    /* dQ = dS K in fp32, then bf16 */
    g.pw(CUDNN_POINTWISE_IDENTITY, g.matmul(dS, Kn, dQacc), NULL, NULL, dQ);
}

/* the plan of a shape: built (graph, heuristics, the first engine config
 * whose plan finalizes) on first use, then cached */
static Plan *get_plan(int bwd, int B, int T, int NH, int NKV, int hs, int window) {
    for (Plan *p : g_plans)
        if (p->bwd == bwd && p->B == B && p->T == T && p->NH == NH && p->NKV == NKV && p->hs == hs &&
            p->window == window)
            return p;
    Plan *p = new Plan();
    p->bwd = bwd, p->B = B, p->T = T, p->NH = NH, p->NKV = NKV, p->hs = hs, p->window = window;
    p->state = -1, p->plan = NULL, p->ws = 0;
    g_plans.push_back(p);
    if (!g_handle) {
        cudnnStatus_t s = cudnnCreate(&g_handle);
        if (s != CUDNN_STATUS_SUCCESS) {
            g_handle = NULL;
            fail_cudnn("cudnnCreate", s);
            return p;
        }
    }
    cudnnStatus_t s = cudnnSetStream(g_handle, zt_cu.stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        fail_cudnn("cudnnSetStream", s);
        return p;
    }
    Graph &g = p->g;
    if (bwd) build_bwd(g, B, T, NH, NKV, hs, window != 0);
    else build_fwd(g, B, T, NH, NKV, hs, window != 0);
    cudnnBackendDescriptor_t graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(graph, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_handle);
    if (g.st == CUDNN_STATUS_SUCCESS)
        g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)g.ops.size(),
              g.ops.data());
    g.fin(graph);
    cudnnBackendDescriptor_t heur = g.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    g.set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    g.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    g.fin(heur);
    int64_t n = 0;
    if (g.st == CUDNN_STATUS_SUCCESS)
        g.ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n,
                                      NULL),
             "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    std::vector<cudnnBackendDescriptor_t> cfgs;
    for (int64_t i = 0; i < n && g.st == CUDNN_STATUS_SUCCESS; i++)
        cfgs.push_back(g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t got = 0;
    if (n > 0 && g.st == CUDNN_STATUS_SUCCESS)
        g.ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                      cfgs.data()),
             "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    if (g.st == CUDNN_STATUS_SUCCESS && got == 0) g.ok(CUDNN_STATUS_NOT_SUPPORTED, "engine heuristics: no engine");
    /* the heuristics' order: the first config whose plan finalizes */
    for (int64_t i = 0; i < got && g.st == CUDNN_STATUS_SUCCESS; i++) {
        cudnnBackendDescriptor_t plan = g.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        g.set(plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_handle);
        g.set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[(size_t)i]);
        if (g.st != CUDNN_STATUS_SUCCESS) break;
        const cudnnStatus_t fs = cudnnBackendFinalize(plan);
        if (fs == CUDNN_STATUS_SUCCESS) {
            p->plan = plan;
            break;
        }
        if (!declined(fs) || i + 1 == got) g.ok(fs, "cudnnBackendFinalize(EXECUTION_PLAN)");
    }
    if (p->plan && g.st == CUDNN_STATUS_SUCCESS)
        g.ok(cudnnBackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                      &p->ws),
             "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
    if (g.st == CUDNN_STATUS_SUCCESS && p->plan) {
        p->state = 1;
    } else if (declined(g.st)) {
        p->state = 0;
        g_calls[2]++;
    } else {
        fail_cudnn(g.where, g.st);
    }
    return p;
}

static bool execute(Plan *p, const int64_t *uids, void *const *ptrs, int n, void *ws) {
    Graph g;
    cudnnBackendDescriptor_t pack = g.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    g.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    g.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    g.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    g.fin(pack);
    if (g.st == CUDNN_STATUS_SUCCESS) g.ok(cudnnBackendExecute(g_handle, p->plan, pack), "cudnnBackendExecute");
    const bool ok = g.st == CUDNN_STATUS_SUCCESS;
    if (!ok) fail_cudnn(g.where, g.st);
    g.destroy();
    return ok;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" void zt_cuda_sdpa_fini(void) {
    for (Plan *p : g_plans) {
        p->g.destroy();
        delete p;
    }
    g_plans.clear();
    if (g_handle) cudnnDestroy(g_handle);
    g_handle = NULL;
}

/* cuDNN reads the caller's bf16 q|k|v in place (Q at its base, K and V at
 * columns NH hs and (NH + NKV) hs, rows R apart) when every one of them is
 * 16-byte aligned, as the tensors' byte alignment says; else a copy */
static bool qkv16_direct(const uint16_t *qkv16, int NH, int NKV, int hs) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs;
    return qkv16 && aligned16(qkv16) && ((size_t)NH * hs * 2) % 16 == 0 && ((size_t)(NH + NKV) * hs * 2) % 16 == 0 &&
           (R * 2) % 16 == 0;
}

bool zt_cuda_sdpa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int hs,
                      const zt_attn_opts *o, uint16_t *out16, const uint16_t *qkv16) {
    if (!rule(hs, o) || !aligned16(lse)) return false;
    const int window = o->window > 0 && o->window < T ? 1 : 0;
    Plan *p = get_plan(0, B, T, NH, NKV, hs, window);
    if (p->state == 0) return false;
    if (p->state < 0) return true;
    const int R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const size_t nqkv = (size_t)B * T * R, nout = (size_t)B * T * AD;
    /* (the bf16 q|k|v and output read and stored as they are: no buffers) */
    const bool qd = qkv16_direct(qkv16, NH, NKV, hs), od = out16 && aligned16(out16);
    const int in16 = !qd ? ZT_ATT_IN32 : !od ? ZT_ATT_IN16 : ZT_ATT_IN16O;
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_sdpa_fwd(in16, B, T, NH, NKV, hs, (size_t)p->ws),
                                      "attention forward (cuDNN)");
    if (!s) return true;
    const uint16_t *q16 = qkv16;
    if (!qd) {
        uint16_t *c = (uint16_t *)s;
        s += zt_al256(nqkv * 2);
        if (qkv16 ? !ZT_CU(cudaMemcpyAsync(c, qkv16, nqkv * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
                  : !round_to(c, qkv, nqkv))
            return true;
        q16 = c;
    }
    uint16_t *o16 = out16;
    if (!od) {
        o16 = (uint16_t *)s;
        s += zt_al256(nout * 2);
    }
    void *ws = s;
    float scale = o->scale, ninf = -INFINITY, win = (float)o->window;
    const int64_t uids[] = {U_Q, U_KT, U_V, U_O, U_STATS, U_SCALE, U_NINF, U_WIN};
    void *const ptrs[] = {(void *)q16, (void *)(q16 + (size_t)NH * hs), (void *)(q16 + (size_t)(NH + NKV) * hs),
                          o16, lse, &scale, &ninf, &win};
    if (!execute(p, uids, ptrs, window ? 8 : 7, ws)) return true;
    if (!out16) widen_to(out, o16, nout);
    else if (o16 != out16)
        ZT_CU(cudaMemcpyAsync(out16, o16, nout * 2, cudaMemcpyDeviceToDevice, zt_cu.stream));
    g_calls[0]++;
    return true;
}

bool zt_cuda_sdpa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                      int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o,
                      const uint16_t *out16, const uint16_t *qkv16, uint16_t *dqkv16, bool *d16,
                      const uint16_t *dout16) {
    if (d16) *d16 = false;
    if (!rule(hs, o) || !aligned16(lse)) return false;
    const int window = o->window > 0 && o->window < T ? 1 : 0;
    Plan *p = get_plan(1, B, T, NH, NKV, hs, window);
    if (p->state == 0) return false;
    if (p->state < 0) return true;
    const int R = (NH + 2 * NKV) * hs, AD = NH * hs;
    const size_t nqkv = (size_t)B * T * R, nout = (size_t)B * T * AD, nst = (size_t)B * NH * T;
    /* (the bf16 q|k|v and O read as they are: the values round_to would give) */
    const bool qd = qkv16_direct(qkv16, NH, NKV, hs), od = out16 && aligned16(out16);
    /* (dqkv16, gqa_ext_bwd16d's: cuDNN's dQ, dK, dV written there, no
     * widening, when aligned as the q|k|v) */
    const bool dd = qd && od && qkv16_direct(dqkv16, NH, NKV, hs);
    /* (dout16, gqa_ext_bwd16do's: cuDNN's dO as it is when 16-byte aligned,
     * no buffer of its own) */
    const bool dod = dout16 && aligned16(dout16);
    const int in16 = (!qd ? ZT_ATT_IN32 : !od ? ZT_ATT_IN16 : !dd ? ZT_ATT_IN16O : ZT_ATT_IN16OD) |
                     (dod ? ZT_ATT_DO16 : 0);
    char *s = (char *)zt_cuda_scratch(zt_cuda_ws_sdpa_bwd(in16, B, T, NH, NKV, hs, (size_t)p->ws),
                                      "attention backward (cuDNN)");
    if (!s) return true;
    const uint16_t *q16 = qkv16;
    if (!qd) {
        uint16_t *c = (uint16_t *)s;
        s += zt_al256(nqkv * 2);
        if (qkv16 ? !ZT_CU(cudaMemcpyAsync(c, qkv16, nqkv * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
                  : !round_to(c, qkv, nqkv))
            return true;
        q16 = c;
    }
    uint16_t *dq16 = dqkv16;
    if (!dd) {
        dq16 = (uint16_t *)s;
        s += zt_al256(nqkv * 2);
    }
    const uint16_t *o16 = out16;
    if (!od) {
        uint16_t *c = (uint16_t *)s;
        s += zt_al256(nout * 2);
        if (out16 ? !ZT_CU(cudaMemcpyAsync(c, out16, nout * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
                  : !round_to(c, out, nout))
            return true;
        o16 = c;
    }
    uint16_t *do16 = (uint16_t *)dout16;
    if (!dod) {
        do16 = (uint16_t *)s;
        s += zt_al256(nout * 2);
    }
    float *ssum = (float *)s;
    s += zt_al256(nst * 4);
    float *dqacc = (float *)s;
    s += zt_al256(nout * 4);
    float *dkf = NULL, *dvf = NULL;
    if (NKV != NH) {
        dkf = (float *)s;
        s += zt_al256(nout * 4);
        dvf = (float *)s;
        s += zt_al256(nout * 4);
    }
    void *ws = s;
    /* (dout16: no k_sdpa_round; copied into the buffer when not 16-byte aligned) */
    if (!dod && (dout16 ? !ZT_CU(cudaMemcpyAsync(do16, dout16, nout * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
                        : !round_to(do16, dout, nout)))
        return true;
    /* cuDNN accumulates dQ into dQ_accum: zeroed first, as cudnn-frontend's
     * SDPA backward does (its workspace memset of dQ_accum) */
    if (!ZT_CU(cudaMemsetAsync(dqacc, 0, nout * sizeof(float), zt_cu.stream))) return true;
    float scale = o->scale, ninf = -INFINITY, win = (float)o->window, one = 1.0f;
    const size_t ko = (size_t)NH * hs, vo = (size_t)(NH + NKV) * hs;
    std::vector<int64_t> uids = {U_Q, U_KT, U_KN, U_VT, U_O, U_DO, U_STATS, U_SSUM, U_DQACC,
                                 U_DQ, U_DK, U_DV, U_SCALE, U_NINF, U_ONE};
    std::vector<void *> ptrs = {(void *)q16, (void *)(q16 + ko), (void *)(q16 + ko), (void *)(q16 + vo),
                                (void *)o16, do16, (void *)lse, ssum, dqacc, dq16, dq16 + ko, dq16 + vo,
                                &scale, &ninf, &one};
    if (window) uids.push_back(U_WIN), ptrs.push_back(&win);
    if (NKV != NH) {
        uids.push_back(U_DKF), ptrs.push_back(dkf);
        uids.push_back(U_DVF), ptrs.push_back(dvf);
    }
    if (!execute(p, uids.data(), ptrs.data(), (int)uids.size(), ws)) return true;
    if (dd) *d16 = true;
    else widen_to(dqkv, dq16, nqkv);
    g_calls[1]++;
    return true;
}

/* the workspace of the shape's cached plan (built now if new): 1 when
 * cuDNN takes the shape, 0 when it declines or failed (recorded) */
static int plan_ws(int bwd, int B, int T, int NH, int NKV, int hs, int window, size_t *ws) {
    Plan *p = get_plan(bwd, B, T, NH, NKV, hs, window);
    *ws = p->state == 1 ? (size_t)p->ws : 0;
    return p->state == 1;
}

#else /* no cuDNN in this build: ztrain's kernels always */

static int plan_ws(int bwd, int B, int T, int NH, int NKV, int hs, int window, size_t *ws) {
    (void)bwd, (void)B, (void)T, (void)NH, (void)NKV, (void)hs, (void)window;
    *ws = 0;
    return 0;
}

extern "C" void zt_cuda_sdpa_fini(void) {}
bool zt_cuda_sdpa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int hs,
                      const zt_attn_opts *o, uint16_t *out16, const uint16_t *qkv16) {
    return false;
}
bool zt_cuda_sdpa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                      int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o, const uint16_t *out16,
                      const uint16_t *qkv16, uint16_t *dqkv16, bool *d16, const uint16_t *dout16) {
    if (d16) *d16 = false;
    return false;
}

#endif

/* backend.h att_scratch: what zt_cuda_gqa_ext_fwd / _bwd will ask
 * zt_cuda_scratch for at this shape (the memory planner's question, asked
 * by the pre-flight): on cuDNN's path (the rule, and cuDNN takes the
 * shape) zt_cuda_ws_sdpa_fwd / _bwd with the workspace of the very plan the
 * call will run, else our kernels' (cuda_workspace.h) */
extern "C" size_t zt_cuda_att_scratch(int bwd, int mode, int in16, int B, int T, int NH, int NKV, int hs,
                                      const zt_attn_opts *o, int *cudnn) {
    if (cudnn) *cudnn = 0;
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hs <= 0 || !o) return 0;
    const int bf16 = mode == ZT_MATMUL_BF16;
    const size_t ours = bwd ? zt_cuda_ws_gqa_ext_bwd(bf16, B, T, NH, NKV, hs, o->softcap)
                            : zt_cuda_ws_gqa_ext_fwd(bf16, B, T, NH, NKV, hs, o->softcap);
    size_t ws = 0;
    if (!rule_in(mode, hs, o) || NH % NKV != 0 ||
        !plan_ws(bwd, B, T, NH, NKV, hs, o->window > 0 && o->window < T ? 1 : 0, &ws))
        return ours;
    if (cudnn) *cudnn = 1;
    return bwd ? zt_cuda_ws_sdpa_bwd(in16, B, T, NH, NKV, hs, ws) : zt_cuda_ws_sdpa_fwd(in16, B, T, NH, NKV, hs, ws);
}

/* backend.h att_do16: the backward takes cuDNN's path at this shape (the
 * rule, and cuDNN takes the shape: its plan built now, or the cached one),
 * whose dO is bf16: gqa_ext_bwd16do reads dout16 as it is */
extern "C" int zt_cuda_att_do16(int B, int T, int NH, int NKV, int hs, const zt_attn_opts *o) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || hs <= 0 || !o || NH % NKV != 0 || !rule(hs, o)) return 0;
    size_t ws = 0;
    return plan_ws(1, B, T, NH, NKV, hs, o->window > 0 && o->window < T ? 1 : 0, &ws);
}
