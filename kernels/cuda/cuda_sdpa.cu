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
 * Forward graph (cudnn-frontend's CompositeSDPANode, checked against its
 * source, v1.0 to v1.23: docs/gpu.md "### Attention through cuDNN"): S =
 * Q K^T (fp32), S *= scale, causal mask (gen-index of rows and columns,
 * row >= col in BOOLEAN, select the mask value), with a window a second
 * mask on its own gen-index (col + window > row: the window a FLOAT
 * by-value scalar added to the column), then softmax with its stats: m =
 * max, e = exp(S - m), s = sum e, Stats = m + log s (our lse[B, NH, T],
 * fp32, written in place), P = e / s in bf16 (the frontend sets P to the
 * I/O type: cuDNN's second matmul takes bf16 operands), O = P V (bf16 [B,
 * NH, T, hs]: the *16o entries' out16 itself, else widened into out).  The
 * mask value: -FLT_MAX before cuDNN 9.10, -inf from 9.10 (the frontend's
 * get_negative_inf_value()).
 *
 * Backward graph (cudnn-frontend's CompositeSDPABackwardNode):
 * softmax_sum = rowsum(dO * O) (x 1, the dropout-scale slot), P = exp(S
 * scale - Stats) masked, dV = P^T dO, dP = dO V^T, dS = P (dP - softmax_sum)
 * scale, dK = dS^T Q, dQ = dS K (K a reshape of the K^T tensor, as the
 * frontend's "reshape_k") accumulated in fp32 (dQ_accum) then cast; with
 * NKV < NH, dK and dV are computed per q head (dK_fullhead, dV_fullhead:
 * virtual bf16 tensors, as the frontend's without ragged offsets) and
 * summed over the group by a reduction.  dQ, dK, dV are bf16 in place of
 * q16 (dqkv16), widened into dqkv; O is the *16o entries' out16 itself,
 * else out rounded; dO is dout rounded.  softmax_sum and dQ_accum live in
 * the backend's scratch (dQ_accum zeroed before each execution: cuDNN
 * before 9.6 accumulates into it, the frontend zeroes it there), with
 * cuDNN's workspace after them (zt_cuda_ws_sdpa_fwd / _bwd: our buffers,
 * plus the plan's workspace, which cuDNN reports at run time).
 *
 * Which path: zt_cuda_sdpa_rule() (one rule for forward and backward).  A
 * shape cuDNN declines (heuristics give no engine, or no engine's plan
 * finalizes: CUDNN_STATUS_NOT_SUPPORTED*) is remembered and runs on our
 * kernels; so is one the cuDNN found at run time (cudnnGetVersion, not the
 * header's) or the device is known not to take or to get wrong, as the
 * frontend refuses or works around it: cuDNN before 9.0, a device before
 * sm_80, a window before 9.2, cuDNN 9.10.0 and 9.10.1, a head size above
 * 128 before 9.9 on sm_80 / sm_100 (forward) or off sm_90 (backward); the
 * backward at s_q = s_kv = 1 and at T not a multiple of 128 up to 9.15
 * (the frontend adds a padding mask there for a backend bug).
 * Any other cuDNN error is recorded like a CUDA error, with cuDNN's own
 * message (cudnnGetLastErrorString).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <float.h>
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
    U_Q = 1, U_KT, U_V, U_O, U_STATS, U_SCALE, U_NINF, U_WIN, U_DO, U_VT, U_ONE, U_SSUM, U_DQACC, U_DQ, U_DK,
    U_DV, U_VIRT = 100
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
    /* y = mode(x, b, t) in math precision prec; axis: GEN_INDEX's (the
     * frontend sets CUDNN_ATTR_POINTWISE_AXIS for GEN_INDEX only) */
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
    /* the transpose of the last two dims of a [b, h, m, n] tensor of
     * strides xs (NULL: dense), a virtual bf16 tensor of x's strides
     * swapped (a reshape, as the frontend's reshape_p / reshape_dS /
     * reshape_k) */
    cudnnBackendDescriptor_t transposed(cudnnBackendDescriptor_t x, const int64_t *dims,
                                        const int64_t *xs = NULL) {
        const int64_t td[4] = {dims[0], dims[1], dims[3], dims[2]};
        const int64_t ds[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
        if (!xs) xs = ds;
        const int64_t ts[4] = {xs[0], xs[1], xs[3], xs[2]};
        cudnnBackendDescriptor_t y = tensor(next_virt++, CUDNN_DATA_BFLOAT16, td, ts, true);
        cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
        set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
        add_op(op);
        return y;
    }
    /* s masked as cudnn-frontend's sliding_window_mask builds it (top-left
     * diagonal; its CompositeDiagonalBandMaskNode): the right bound 0, row
     * >= col (the causal mask), then with a window the left bound on the
     * masked scores' own indices, col + window > row, the window a FLOAT
     * by-value scalar added to the column index in FLOAT; indices INT32,
     * comparisons in BOOLEAN */
    cudnnBackendDescriptor_t mask(cudnnBackendDescriptor_t s, const int64_t *sd, bool window) {
        cudnnBackendDescriptor_t row = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd),
                                          CUDNN_DATA_INT32, 2);
        cudnnBackendDescriptor_t col = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd),
                                          CUDNN_DATA_INT32, 3);
        cudnnBackendDescriptor_t ninf = scalar(U_NINF);
        cudnnBackendDescriptor_t m = pw(CUDNN_POINTWISE_CMP_GE, row, col, NULL, virt(CUDNN_DATA_BOOLEAN, sd),
                                        CUDNN_DATA_BOOLEAN);
        s = pw(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, m, virt(CUDNN_DATA_FLOAT, sd));
        if (window) {
            row = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd), CUDNN_DATA_INT32, 2);
            col = pw(CUDNN_POINTWISE_GEN_INDEX, s, NULL, NULL, virt(CUDNN_DATA_INT32, sd), CUDNN_DATA_INT32, 3);
            cudnnBackendDescriptor_t cw = pw(CUDNN_POINTWISE_ADD, col, scalar(U_WIN), NULL,
                                             virt(CUDNN_DATA_FLOAT, sd), CUDNN_DATA_FLOAT);
            cudnnBackendDescriptor_t w = pw(CUDNN_POINTWISE_CMP_GT, cw, row, NULL, virt(CUDNN_DATA_BOOLEAN, sd),
                                            CUDNN_DATA_BOOLEAN);
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
    int state;   /* 1 ready, 0 declined by cuDNN (or by the version rules), -1 failed (recorded) */
    cudnnBackendDescriptor_t plan;
    int64_t ws;
    float ninf;      /* the mask value: -FLT_MAX before cuDNN 9.10, else -inf */
    char why[400];   /* state 1: the engine config taken; else why not (cuDNN's own message) */
    Graph g;
};
static cudnnHandle_t g_handle;
static std::vector<Plan *> g_plans;
static long g_ver_test;   /* tests: the cuDNN version assumed (0: cudnnGetVersion()'s) */
static int g_sm_test;     /* tests: the compute capability major assumed (0: the device's) */

/* the cuDNN found at run time (the library loaded, not the header built against) */
static long cudnn_version(void) { return g_ver_test > 0 ? g_ver_test : (long)cudnnGetVersion(); }
/* the device's compute capability major (0: unknown) */
static int sm_major(void) {
    int major = 0;
    if (g_sm_test > 0) return g_sm_test;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, zt_cu.device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major;
}

/* cuDNN's message for its last failed call (cuDNN 9: cudnnGetLastErrorString) */
static void last_error(char *buf, size_t n) {
    buf[0] = 0;
    cudnnGetLastErrorString(buf, n);
    buf[n - 1] = 0;
    for (char *c = buf; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

static void fail_cudnn(const char *what, cudnnStatus_t s, const char *detail = NULL) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s%s%s", cudnnGetErrorString(s), detail && *detail ? ": " : "",
             detail ? detail : "");
    zt_cuda_fail(__FILE__, __LINE__, what, msg, "a cuDNN attention graph failed: ZT_CUDA_DETERMINISTIC=1 "
                 "runs ztrain's own kernels");
}
/* CUDNN_STATUS_NOT_SUPPORTED*, and the NOT_INITIALIZED category
 * (SUBLIBRARY_LOADING_FAILED, SUBLIBRARY_VERSION_MISMATCH: cuDNN 9 loads
 * its sub-libraries, libcudnn_graph, _engines_*, _heuristic, at run time,
 * so a machine without them, or with another version's, fails only then):
 * our kernels run the shape */
static bool declined(cudnnStatus_t s) { return (s >= 3000 && s < 4000) || (s >= 1000 && s < 2000); }

/* the graphs' shapes and strides (the forward's and the backward's): Q,
 * K^T, V views into q16 (qd, qs; ktd, kts; kd), O and dO (od, os), the
 * scores (sd) and the per-row statistics (st, sts) */
struct Dims {
    int64_t qd[4], qs[4], kd[4], kts[4], ktd[4], od[4], os[4], sd[4], st[4], sts[4];
    Dims(int B, int T, int NH, int NKV, int hs) {
        const int64_t R = (int64_t)(NH + 2 * NKV) * hs, AD = (int64_t)NH * hs;
        const int64_t q[4] = {B, NH, T, hs}, s[4] = {T * R, hs, R, 1}, k[4] = {B, NKV, T, hs};
        const int64_t kt[4] = {B, NKV, hs, T}, kts_[4] = {T * R, hs, 1, R};
        const int64_t o[4] = {B, NH, T, hs}, os_[4] = {T * AD, hs, AD, 1};
        const int64_t sd_[4] = {B, NH, T, T}, st_[4] = {B, NH, T, 1}, sts_[4] = {(int64_t)NH * T, T, 1, 1};
        memcpy(qd, q, sizeof q), memcpy(qs, s, sizeof s), memcpy(kd, k, sizeof k);
        memcpy(ktd, kt, sizeof kt), memcpy(kts, kts_, sizeof kts_);
        memcpy(od, o, sizeof o), memcpy(os, os_, sizeof os_);
        memcpy(sd, sd_, sizeof sd_), memcpy(st, st_, sizeof st_), memcpy(sts, sts_, sizeof sts_);
    }
};

static void build_fwd(Graph &g, int B, int T, int NH, int NKV, int hs, bool window) {
    const Dims d(B, T, NH, NKV, hs);
    cudnnBackendDescriptor_t Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, d.qd, d.qs);
    cudnnBackendDescriptor_t Kt = g.tensor(U_KT, CUDNN_DATA_BFLOAT16, d.ktd, d.kts);
    cudnnBackendDescriptor_t V = g.tensor(U_V, CUDNN_DATA_BFLOAT16, d.kd, d.qs);
    cudnnBackendDescriptor_t O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, d.od, d.os);
    cudnnBackendDescriptor_t Stats = g.tensor(U_STATS, CUDNN_DATA_FLOAT, d.st, d.sts);
    cudnnBackendDescriptor_t S = g.matmul(Q, Kt, g.virt(CUDNN_DATA_FLOAT, d.sd));
    S = g.pw(CUDNN_POINTWISE_MUL, S, g.scalar(U_SCALE), NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    S = g.mask(S, d.sd, window);
    cudnnBackendDescriptor_t mx = g.reduce(CUDNN_REDUCE_TENSOR_MAX, S, g.virt(CUDNN_DATA_FLOAT, d.st));
    cudnnBackendDescriptor_t e = g.pw(CUDNN_POINTWISE_SUB, S, mx, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    e = g.pw(CUDNN_POINTWISE_EXP, e, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    cudnnBackendDescriptor_t sum = g.reduce(CUDNN_REDUCE_TENSOR_ADD, e, g.virt(CUDNN_DATA_FLOAT, d.st));
    cudnnBackendDescriptor_t lg = g.pw(CUDNN_POINTWISE_LOG, sum, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, d.st));
    g.pw(CUDNN_POINTWISE_ADD, mx, lg, NULL, Stats);
    /* P in bf16: "Requirement by cudnn backend to take in bmm2 aType as i/o
     * type" (the frontend sets P's data type to Q's) */
    cudnnBackendDescriptor_t P = g.pw(CUDNN_POINTWISE_DIV, e, sum, NULL, g.virt(CUDNN_DATA_BFLOAT16, d.sd));
    g.matmul(P, V, O);
}

static void build_bwd(Graph &g, int B, int T, int NH, int NKV, int hs, bool window) {
    const Dims d(B, T, NH, NKV, hs);
    const bool gqa = NKV != NH;
    cudnnBackendDescriptor_t Q = g.tensor(U_Q, CUDNN_DATA_BFLOAT16, d.qd, d.qs);
    cudnnBackendDescriptor_t Kt = g.tensor(U_KT, CUDNN_DATA_BFLOAT16, d.ktd, d.kts);
    cudnnBackendDescriptor_t Vt = g.tensor(U_VT, CUDNN_DATA_BFLOAT16, d.ktd, d.kts);
    cudnnBackendDescriptor_t O = g.tensor(U_O, CUDNN_DATA_BFLOAT16, d.od, d.os);
    cudnnBackendDescriptor_t dO = g.tensor(U_DO, CUDNN_DATA_BFLOAT16, d.od, d.os);
    cudnnBackendDescriptor_t Stats = g.tensor(U_STATS, CUDNN_DATA_FLOAT, d.st, d.sts);
    cudnnBackendDescriptor_t ssum = g.tensor(U_SSUM, CUDNN_DATA_FLOAT, d.st, d.sts);
    cudnnBackendDescriptor_t dQacc = g.tensor(U_DQACC, CUDNN_DATA_FLOAT, d.od, NULL);
    cudnnBackendDescriptor_t dQ = g.tensor(U_DQ, CUDNN_DATA_BFLOAT16, d.qd, d.qs);
    cudnnBackendDescriptor_t dK = g.tensor(U_DK, CUDNN_DATA_BFLOAT16, d.kd, d.qs);
    cudnnBackendDescriptor_t dV = g.tensor(U_DV, CUDNN_DATA_BFLOAT16, d.kd, d.qs);
    cudnnBackendDescriptor_t scale = g.scalar(U_SCALE);
    /* softmax_sum = rowsum(dO * O) * 1 */
    cudnnBackendDescriptor_t doo = g.pw(CUDNN_POINTWISE_MUL, dO, O, NULL, g.virt(CUDNN_DATA_FLOAT, d.od));
    doo = g.reduce(CUDNN_REDUCE_TENSOR_ADD, doo, g.virt(CUDNN_DATA_FLOAT, d.st));
    g.pw(CUDNN_POINTWISE_MUL, doo, g.scalar(U_ONE), NULL, ssum);
    /* P = exp(S scale - Stats), masked */
    cudnnBackendDescriptor_t S = g.matmul(Q, Kt, g.virt(CUDNN_DATA_FLOAT, d.sd));
    S = g.pw(CUDNN_POINTWISE_MUL, S, scale, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    S = g.pw(CUDNN_POINTWISE_SUB, S, Stats, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    S = g.mask(S, d.sd, window);
    cudnnBackendDescriptor_t P = g.pw(CUDNN_POINTWISE_EXP, S, NULL, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    /* dV = P^T dO (per q head, then summed over the group) */
    cudnnBackendDescriptor_t Pt = g.transposed(P, d.sd);
    if (gqa) {
        /* (dV_fullhead [B, NH, T, hs]: virtual, bf16, as the frontend's) */
        cudnnBackendDescriptor_t dVf = g.virt(CUDNN_DATA_BFLOAT16, d.od);
        g.reduce(CUDNN_REDUCE_TENSOR_ADD, g.matmul(Pt, dO, dVf), dV);
    } else {
        g.matmul(Pt, dO, dV);
    }
    /* dS = P (dO V^T - softmax_sum) scale */
    cudnnBackendDescriptor_t dP = g.matmul(dO, Vt, g.virt(CUDNN_DATA_FLOAT, d.sd));
    dP = g.pw(CUDNN_POINTWISE_SUB, dP, ssum, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    dP = g.pw(CUDNN_POINTWISE_MUL, dP, P, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    cudnnBackendDescriptor_t dS = g.pw(CUDNN_POINTWISE_MUL, dP, scale, NULL, g.virt(CUDNN_DATA_FLOAT, d.sd));
    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dSt = g.transposed(dS, d.sd);
    if (gqa) {
        cudnnBackendDescriptor_t dKf = g.virt(CUDNN_DATA_BFLOAT16, d.od);
        g.reduce(CUDNN_REDUCE_TENSOR_ADD, g.matmul(dSt, Q, dKf), dK);
    } else {
        g.matmul(dSt, Q, dK);
    }
    /* dQ = dS K in fp32, then bf16; K the reshape of K^T (one K tensor in
     * the graph, as the frontend's reshape_k) */
    cudnnBackendDescriptor_t Kn = g.transposed(Kt, d.ktd, d.kts);
    g.pw(CUDNN_POINTWISE_IDENTITY, g.matmul(dS, Kn, dQacc), NULL, NULL, dQ);
}

/* the engine configs heuristics mode `mode` lists for the finalized
 * operation graph, in its order: the first whose plan finalizes (p->plan);
 * CUDNN_STATUS_NOT_SUPPORTED* when none does (or none is listed), another
 * status for any other failure (*where: the call) */
static cudnnStatus_t plan_from(Graph &g, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, Plan *p,
                               const char **where) {
    cudnnStatus_t s;
#define TRY(call, w)                                                                                                \
    do {                                                                                                            \
        if ((s = (call)) != CUDNN_STATUS_SUCCESS) {                                                                 \
            *where = (w);                                                                                           \
            return s;                                                                                               \
        }                                                                                                           \
    } while (0)
    cudnnBackendDescriptor_t heur = NULL;
    TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), "cudnnBackendCreateDescriptor");
    g.all.push_back(heur);
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &graph),
        "cudnnBackendSetAttribute(ENGINEHEUR_OPERATION_GRAPH)");
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode),
        "cudnnBackendSetAttribute(ENGINEHEUR_MODE)");
    TRY(cudnnBackendFinalize(heur), "cudnnBackendFinalize(ENGINEHEUR)");
    int64_t n = 0, got = 0;
    TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL),
        "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    std::vector<cudnnBackendDescriptor_t> cfgs;
    for (int64_t i = 0; i < n; i++) {
        cudnnBackendDescriptor_t c = NULL;
        TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c), "cudnnBackendCreateDescriptor");
        g.all.push_back(c);
        cfgs.push_back(c);
    }
    if (n > 0)
        TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                     cfgs.data()),
            "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    *where = "engine heuristics: no engine config";
    s = CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; i < got && i < n; i++) {
        cudnnBackendDescriptor_t plan = NULL;
        TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
            "cudnnBackendCreateDescriptor");
        g.all.push_back(plan);
        TRY(cudnnBackendSetAttribute(plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g_handle),
            "cudnnBackendSetAttribute(EXECUTION_PLAN_HANDLE)");
        TRY(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfgs[(size_t)i]),
            "cudnnBackendSetAttribute(EXECUTION_PLAN_ENGINE_CONFIG)");
        s = cudnnBackendFinalize(plan);
        if (s == CUDNN_STATUS_SUCCESS) {
            p->plan = plan;
            snprintf(p->why, sizeof p->why, "heuristics mode %s, engine config %lld of %lld",
                     mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK", (long long)i + 1, (long long)got);
            return s;
        }
        *where = "cudnnBackendFinalize(EXECUTION_PLAN)";
        if (!declined(s)) return s;
    }
    return s;
#undef TRY
}

/* the plan of a shape: built (graph, heuristics mode A, the first engine
 * config whose plan finalizes; then mode FALLBACK's, as cudnn-frontend's
 * create_execution_plans({A, FALLBACK})) on first use, then cached */
static Plan *get_plan(int bwd, int B, int T, int NH, int NKV, int hs, int window) {
    for (Plan *p : g_plans)
        if (p->bwd == bwd && p->B == B && p->T == T && p->NH == NH && p->NKV == NKV && p->hs == hs &&
            p->window == window)
            return p;
    Plan *p = new Plan();
    p->bwd = bwd, p->B = B, p->T = T, p->NH = NH, p->NKV = NKV, p->hs = hs, p->window = window;
    p->state = -1, p->plan = NULL, p->ws = 0, p->why[0] = 0;
    g_plans.push_back(p);
    /* what the cuDNN found at run time does not take, or gets wrong (as
     * cudnn-frontend refuses or works around it): declined */
    const long v = cudnn_version();
    const int sm = sm_major();
    p->ninf = v < 91000 ? -FLT_MAX : -INFINITY;
    const char *no = v < 90000 ? "cuDNN before 9.0"
                     : sm > 0 && sm < 8 ? "a device before sm_80 (cudnn-frontend: SDPA bf16 needs Ampere)"
                     : window && v < 90200 ? "a sliding window before cuDNN 9.2"
                     : v == 91000 || v == 91001
                         ? "cuDNN 9.10.0 / 9.10.1 (known SDPA bugs: cudnn-frontend refuses them)"
                     : !bwd && hs > 128 && ((sm == 8 && v <= 90900) || (sm == 10 && v < 90900))
                         ? "a head size above 128 on this device before cuDNN 9.9 (cudnn-frontend refuses it)"
                     : bwd && hs > 128 && sm != 9
                         ? "the backward at a head size above 128 off sm_90 (cudnn-frontend refuses it)"
                     : bwd && T == 1 ? "the backward at s_q = s_kv = 1 (cudnn-frontend refuses it)"
                     : bwd && T % 128 != 0 && v <= 91500
                         ? "the backward at T not a multiple of 128 up to cuDNN 9.15 (a backend bug "
                           "cudnn-frontend works around with a padding mask)"
                         : NULL;
    if (no) {
        snprintf(p->why, sizeof p->why, "cuDNN %ld: %s", v, no);
        p->state = 0;
        g_calls[2]++;
        return p;
    }
    if (!g_handle) {
        cudnnStatus_t s = cudnnCreate(&g_handle);
        if (s != CUDNN_STATUS_SUCCESS) {
            char msg[300];
            g_handle = NULL;
            last_error(msg, sizeof msg);
            snprintf(p->why, sizeof p->why, "cudnnCreate: %s (%s)", cudnnGetErrorString(s), msg[0] ? msg : "-");
            if (declined(s)) {
                p->state = 0;
                g_calls[2]++;
            } else {
                fail_cudnn("cudnnCreate", s, msg);
            }
            return p;
        }
    }
    cudnnStatus_t s = cudnnSetStream(g_handle, zt_cu.stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        last_error(p->why, sizeof p->why);
        fail_cudnn("cudnnSetStream", s, p->why);
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
    const char *where = g.where;
    s = g.st;
    char msg[400] = "";
    if (s == CUDNN_STATUS_SUCCESS) {
        s = plan_from(g, graph, CUDNN_HEUR_MODE_A, p, &where);
        if (declined(s)) {
            last_error(msg, sizeof msg);
            const char *wa = where;
            const cudnnStatus_t sa = s;
            s = plan_from(g, graph, CUDNN_HEUR_MODE_FALLBACK, p, &where);
            if (declined(s)) {
                char m2[400];
                last_error(m2, sizeof m2);
                snprintf(p->why, sizeof p->why, "mode A: %s: %s (%s); mode FALLBACK: %s: %s (%s)", wa,
                         cudnnGetErrorString(sa), msg[0] ? msg : "-",
                         where, cudnnGetErrorString(s), m2[0] ? m2 : "-");
            }
        }
    }
    int64_t cnt = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt,
                                     &p->ws),
        where = "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)";
    if (s == CUDNN_STATUS_SUCCESS) {
        p->state = 1;
    } else if (declined(s)) {
        if (!p->why[0]) {
            last_error(msg, sizeof msg);
            snprintf(p->why, sizeof p->why, "%s: %s (%s)", where, cudnnGetErrorString(s), msg[0] ? msg : "-");
        }
        p->plan = NULL;
        p->state = 0;
        g_calls[2]++;
        g.destroy();   /* (a declined shape keeps only its state and why) */
    } else {
        last_error(msg, sizeof msg);
        snprintf(p->why, sizeof p->why, "%s: %s (%s)", where, cudnnGetErrorString(s), msg[0] ? msg : "-");
        p->plan = NULL;
        fail_cudnn(where, s, msg);
        g.destroy();
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
    if (!ok) {
        char msg[400];
        last_error(msg, sizeof msg);
        fail_cudnn(g.where, g.st, msg);
    }
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

extern "C" void zt_cuda_att_cudnn_version_for_test(long version, int sm) {
    zt_cuda_sdpa_fini();
    g_ver_test = version > 0 ? version : 0;
    g_sm_test = sm > 0 ? sm : 0;
}

extern "C" int zt_cuda_att_cudnn_report(char *buf, size_t n) {
    size_t off = 0;
    if (buf && n) buf[0] = 0;
    if (buf && n && !g_plans.empty()) {
        const int w = snprintf(buf, n, "cuDNN %ld at run time (built against %d)\n", cudnn_version(),
                               (int)CUDNN_VERSION);
        off = w > 0 ? (size_t)w : 0;
    }
    for (const Plan *p : g_plans) {
        if (!buf || off >= n) continue;
        const int w = snprintf(buf + off, n - off, "cuDNN SDPA %s B=%d T=%d NH=%d NKV=%d hs=%d%s: %s%s%s\n",
                               p->bwd ? "backward" : "forward", p->B, p->T, p->NH, p->NKV, p->hs,
                               p->window ? " window" : "",
                               p->state == 1 ? "FINALIZED" : p->state == 0 ? "DECLINED" : "FAILED",
                               p->why[0] ? ": " : "", p->why);
        off += w > 0 ? (size_t)w : 0;
    }
    return (int)g_plans.size();
}

/* cuDNN reads the caller's bf16 q|k|v in place (Q at its base, K and V at
 * columns NH hs and (NH + NKV) hs, rows R apart) when every one of them is
 * 16-byte aligned, as the tensors' byte alignment says; else a copy */
static bool qkv16_direct(const uint16_t *qkv16, int NH, int NKV, int hs) {
    const size_t R = (size_t)(NH + 2 * NKV) * hs;
    return qkv16 && aligned16(qkv16) && ((size_t)NH * hs * 2) % 16 == 0 && ((size_t)(NH + NKV) * hs * 2) % 16 == 0 &&
           (R * 2) % 16 == 0;
}

/* a bf16 operand of n elements cuDNN reads: src16 as it is when direct,
 * else a buffer carved from the scratch at *s (*s moved past it) holding
 * src16's copy or, src16 NULL, src's rounding; NULL when that failed
 * (recorded) */
static const uint16_t *operand16(char **s, bool direct, const uint16_t *src16, const float *src, size_t n) {
    if (direct) return src16;
    uint16_t *c = (uint16_t *)*s;
    *s += zt_al256(n * 2);
    if (src16 ? !ZT_CU(cudaMemcpyAsync(c, src16, n * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
              : !round_to(c, src, n))
        return NULL;
    return c;
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
    const uint16_t *q16 = operand16(&s, qd, qkv16, qkv, nqkv);
    if (!q16) return true;
    uint16_t *o16 = out16;
    if (!od) {
        o16 = (uint16_t *)s;
        s += zt_al256(nout * 2);
    }
    void *ws = s;
    float scale = o->scale, ninf = p->ninf, win = (float)o->window;
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
    const uint16_t *q16 = operand16(&s, qd, qkv16, qkv, nqkv);
    if (!q16) return true;
    uint16_t *dq16 = dqkv16;
    if (!dd) {
        dq16 = (uint16_t *)s;
        s += zt_al256(nqkv * 2);
    }
    const uint16_t *o16 = operand16(&s, od, out16, out, nout);
    if (!o16) return true;
    uint16_t *do16 = (uint16_t *)dout16;
    if (!dod) {
        do16 = (uint16_t *)s;
        s += zt_al256(nout * 2);
    }
    float *ssum = (float *)s;
    s += zt_al256(nst * 4);
    float *dqacc = (float *)s;
    s += zt_al256(nout * 4);
    void *ws = s;
    /* (dout16: no k_sdpa_round; copied into the buffer when not 16-byte aligned) */
    if (!dod && (dout16 ? !ZT_CU(cudaMemcpyAsync(do16, dout16, nout * 2, cudaMemcpyDeviceToDevice, zt_cu.stream))
                        : !round_to(do16, dout, nout)))
        return true;
    /* cuDNN accumulates dQ into dQ_accum: zeroed first, as cudnn-frontend's
     * SDPA backward does (its workspace memset of dQ_accum) */
    if (!ZT_CU(cudaMemsetAsync(dqacc, 0, nout * sizeof(float), zt_cu.stream))) return true;
    float scale = o->scale, ninf = p->ninf, win = (float)o->window, one = 1.0f;
    const size_t ko = (size_t)NH * hs, vo = (size_t)(NH + NKV) * hs;
    std::vector<int64_t> uids = {U_Q, U_KT, U_VT, U_O, U_DO, U_STATS, U_SSUM, U_DQACC,
                                 U_DQ, U_DK, U_DV, U_SCALE, U_NINF, U_ONE};
    std::vector<void *> ptrs = {(void *)q16, (void *)(q16 + ko), (void *)(q16 + vo), (void *)o16, do16,
                                (void *)lse, ssum, dqacc, dq16, dq16 + ko, dq16 + vo, &scale, &ninf, &one};
    if (window) uids.push_back(U_WIN), ptrs.push_back(&win);
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
extern "C" void zt_cuda_att_cudnn_version_for_test(long version, int sm) { (void)version, (void)sm; }
extern "C" int zt_cuda_att_cudnn_report(char *buf, size_t n) {
    if (buf && n) buf[0] = 0;
    return 0;
}
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
