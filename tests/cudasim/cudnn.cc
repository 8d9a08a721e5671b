/*
 * cudnn.cc -- the cuDNN 9 backend (graph) API subset of the CUDA simulator
 * (tests/cudasim/README), the one kernels/cuda/cuda_sdpa.cu builds its
 * fused-attention graphs with: tensor, pointwise, matmul, reduction and
 * reshape descriptors and operations, the operation graph, engine
 * heuristics, engine configs, the execution plan and the variant pack.
 *
 * Checks as cuDNN documents them: a set attribute's type and element count
 * (CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE / BAD_PARAM), setting on a
 * finalized descriptor (BAD_PARAM), finalize order (an operation over an
 * unfinalized tensor, a graph over an unfinalized operation, a plan over a
 * config heuristics did not fill: BAD_PARAM_NOT_FINALIZED), tensor
 * dims/strides (1..8 dims, positive, as many strides as dims), unique ids
 * (DUPLICATED_ENTRIES), operand shapes (SHAPE_MISMATCH), and at execution
 * every non-virtual tensor's pointer in the variant pack, device memory
 * (by-value scalars: host) aligned to its declared byte alignment, and a
 * workspace at least the plan's.  What the fused attention engine does not
 * take is CUDNN_STATUS_NOT_SUPPORTED (heuristics return no engine, the plan
 * does not finalize): matmul I/O not bf16/fp16, neither of the last two
 * strides 1, a head
 * size not a multiple of 8 or above 256, byte alignment below 16; and
 * where the graph differs from what cudnn-frontend builds (its SDPA nodes,
 * v1.0 to v1.23, the reference known to run on cuDNN 9: docs/gpu.md): a
 * matmul operand not bf16/fp16, virtual ones included (the frontend sets
 * P to the I/O type: "Requirement by cudnn backend to take in bmm2 aType
 * as i/o type"), but for the fp32 dS of the matmul into dQ_accum; a
 * non-virtual matmul output another operation reads other than dQ_accum
 * (fp32, read by pointwise operations only: the GQA full-head dK / dV are
 * virtual without ragged offsets); the backward's dQ = dS K with K other
 * than a reshape of the K^T tensor Q K^T reads; a comparison not in
 * BOOLEAN math into a BOOLEAN tensor, a select whose mask is not BOOLEAN,
 * a gen-index not into INT32; the backward at s_q = s_kv = 1.  The version
 * (cudnnGetVersion: ZT_SIM_CUDNN_VERSION, else this header's 9.19.0): no
 * engine before 9.0, nor for a window (a CMP_GT) before 9.2; and a
 * backward on 9.10.0 / 9.10.1, or at s_kv not a multiple of 128 up to
 * 9.15, writes NaN into its outputs (the known bugs the frontend refuses or
 * works around: what real cuDNN computes there is not known, so the
 * simulator makes it unmissable).  ZT_SIM_CUDNN_SUBLIB=missing: cudnnCreate
 * fails with SUBLIBRARY_LOADING_FAILED, as cuDNN 9 without its run-time
 * loaded sub-libraries.  cudnnGetLastErrorString: the reason for the last
 * failed call.
 *
 * The graph runs on the handle's stream, like a kernel, through an
 * interpreter: each tensor a dense fp32 array over its dims, operands
 * broadcast where a dim is 1 or divides the output's (grouped heads:
 * index i reads i / (out / dim)), reductions fold a dim to 1 or to a
 * divisor (heads), matmuls accumulate in fp32, every result is rounded to
 * its tensor's type (bf16: nearest even; virtual tensors too, so a bf16
 * transposed P is rounded as cuDNN's kernels round it).  The workspace: 4 bytes per
 * element of every non-virtual matmul output (an fp32 accumulator, as
 * cuDNN's dQ accumulator), overwritten by the run.
 *
 * Accumulation: a matmul whose output is a non-virtual fp32 tensor that a
 * pointwise operation reads (the SDPA backward's dQ accumulator: dQ = dS K
 * summed in fp32 into dQ_accum, then cast to dQ by an IDENTITY) ADDS into
 * what that tensor holds, as cuDNN's SDPA backward engines before 9.6 add
 * each key block's partial dQ into dQ_accum (cudnn-frontend zeroes it for
 * them: its memset workspace modification; cuda_sdpa.cu zeroes it before
 * each execution), so a caller that does not zero it gets a wrong dQ here
 * too.  Every other output (the full-head dK / dV a reduction reads, which
 * cudnn-frontend never zeroes) is overwritten.
 */
#include "cudnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

bool zt_sim_is_device(const void *p, size_t bytes);

/* the message cudnnGetLastErrorString returns: the last failure's */
static char g_last_err[512];
static cudnnStatus_t fail(cudnnStatus_t s, const char *why) {
    snprintf(g_last_err, sizeof g_last_err, "cudasim cudnn: %s", why);
    return s;
}
static long sim_version(void) {
    const char *e = getenv("ZT_SIM_CUDNN_VERSION");
    const long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v > 0 ? v : (long)CUDNN_VERSION;
}
void zt_sim_enqueue(cudaStream_t s, std::function<void()> op);

struct cudnnContext {
    cudaStream_t stream;
};

namespace {

struct Desc {
    cudnnBackendDescriptorType_t type;
    bool final = false;
    /* tensor */
    cudnnDataType_t dtype = (cudnnDataType_t)-1;
    std::vector<int64_t> dims, strides;
    int64_t uid = -1, align = 0;
    bool virt = false, byval = false;
    /* pointwise / reduction / matmul descriptors */
    int64_t mode = -1, axis = -1;
    cudnnDataType_t comp = (cudnnDataType_t)-1;
    /* operations: x, b, t, y (pointwise); a, b, c (matmul: x, b, y); x, y (reduction, reshape) */
    Desc *op = nullptr, *x = nullptr, *b = nullptr, *t = nullptr, *y = nullptr;
    /* graph, heuristics, config, plan */
    std::vector<Desc *> ops;
    Desc *graph = nullptr, *cfg = nullptr;
    cudnnHandle_t handle = nullptr;
    bool supported = false;
    int64_t ws = 0;
    /* variant pack */
    std::vector<int64_t> uids;
    std::vector<void *> ptrs;
    void *wsp = nullptr;
    bool have_ws = false;
};

int64_t numel(const Desc *t) {
    int64_t n = 1;
    for (int64_t d : t->dims) n *= d;
    return n;
}
size_t tsize(cudnnDataType_t t) {
    switch (t) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_DOUBLE: case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_BOOLEAN: return 1;
    }
    return 0;
}
/* bytes from the first to one past the last element */
size_t span(const Desc *t) {
    size_t last = 0;
    for (size_t i = 0; i < t->dims.size(); i++) last += (size_t)(t->dims[i] - 1) * (size_t)t->strides[i];
    return (last + 1) * tsize(t->dtype);
}

float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}
float load(const void *p, cudnnDataType_t t, size_t i) {
    switch (t) {
    case CUDNN_DATA_FLOAT: return ((const float *)p)[i];
    case CUDNN_DATA_BFLOAT16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case CUDNN_DATA_INT32: return (float)((const int32_t *)p)[i];
    default: return 0.0f;
    }
}
void store(void *p, cudnnDataType_t t, size_t i, float v) {
    switch (t) {
    case CUDNN_DATA_FLOAT: ((float *)p)[i] = v; break;
    case CUDNN_DATA_BFLOAT16: {
        float r = bf16_round(v);
        uint32_t u;
        memcpy(&u, &r, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
    case CUDNN_DATA_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: break;
    }
}

bool is_op(const Desc *d) {
    return d->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
           d->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
           d->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
           d->type == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

/* operand dim a broadcasts to output dim o: equal, 1, or a divisor (heads) */
bool bcast_ok(int64_t a, int64_t o) { return a == o || a == 1 || (a > 0 && o % a == 0); }
bool bcast_shape(const Desc *a, const Desc *o) {
    if (!a) return true;
    if (a->dims.size() != o->dims.size()) return false;
    for (size_t i = 0; i < a->dims.size(); i++)
        if (!bcast_ok(a->dims[i], o->dims[i])) return false;
    return true;
}

int pw_arity(int64_t m) {
    switch (m) {
    case CUDNN_POINTWISE_EXP: case CUDNN_POINTWISE_LOG: case CUDNN_POINTWISE_IDENTITY:
    case CUDNN_POINTWISE_GEN_INDEX: return 1;
    case CUDNN_POINTWISE_BINARY_SELECT: return 3;
    case CUDNN_POINTWISE_ADD: case CUDNN_POINTWISE_MUL: case CUDNN_POINTWISE_DIV: case CUDNN_POINTWISE_SUB:
    case CUDNN_POINTWISE_CMP_GT: case CUDNN_POINTWISE_CMP_GE: case CUDNN_POINTWISE_CMP_LT:
    case CUDNN_POINTWISE_CMP_LE: return 2;
    }
    return 0;
}

cudnnStatus_t finalize_op(Desc *d) {
    if (d->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
        if (!d->op || !d->x || !d->y) return CUDNN_STATUS_BAD_PARAM;
        const int ar = pw_arity(d->op->mode);
        if ((ar >= 2) != (d->b != nullptr) || (ar == 3) != (d->t != nullptr)) return CUDNN_STATUS_BAD_PARAM;
        if (!d->op->final || !d->x->final || !d->y->final || (d->b && !d->b->final) || (d->t && !d->t->final))
            return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        if (!bcast_shape(d->x, d->y) || !bcast_shape(d->b, d->y) || !bcast_shape(d->t, d->y))
            return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
        if (d->op->mode == CUDNN_POINTWISE_GEN_INDEX &&
            (d->op->axis < 0 || d->op->axis >= (int64_t)d->y->dims.size() || d->x->dims != d->y->dims))
            return CUDNN_STATUS_BAD_PARAM;
    } else if (d->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
        if (!d->op || !d->x || !d->b || !d->y) return CUDNN_STATUS_BAD_PARAM;
        if (!d->op->final || !d->x->final || !d->b->final || !d->y->final)
            return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        const size_t n = d->y->dims.size();
        if (n < 2 || d->x->dims.size() != n || d->b->dims.size() != n) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
        const auto &A = d->x->dims, &B = d->b->dims, &C = d->y->dims;
        if (A[n - 2] != C[n - 2] || B[n - 1] != C[n - 1] || A[n - 1] != B[n - 2])
            return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
        for (size_t i = 0; i + 2 < n; i++)
            if (!bcast_ok(A[i], C[i]) || !bcast_ok(B[i], C[i])) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    } else if (d->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR) {
        if (!d->op || !d->x || !d->y) return CUDNN_STATUS_BAD_PARAM;
        if (!d->op->final || !d->x->final || !d->y->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        if (!bcast_shape(d->y, d->x)) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    } else {   /* reshape: the simulator takes a transpose of the last two dims */
        if (!d->x || !d->y) return CUDNN_STATUS_BAD_PARAM;
        if (!d->x->final || !d->y->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        const size_t n = d->x->dims.size();
        if (n < 2 || d->y->dims.size() != n || numel(d->x) != numel(d->y)) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    }
    d->final = true;
    return CUDNN_STATUS_SUCCESS;
}

/* every tensor of the graph's ops */
void graph_tensors(const Desc *g, std::vector<Desc *> &out) {
    for (Desc *o : g->ops)
        for (Desc *t : {o->x, o->b, o->t, o->y})
            if (t) {
                bool seen = false;
                for (Desc *u : out) seen |= u == t;
                if (!seen) out.push_back(t);
            }
}

cudnnStatus_t finalize_graph(Desc *g) {
    if (g->ops.empty() || !g->handle) return CUDNN_STATUS_BAD_PARAM;
    for (Desc *o : g->ops)
        if (!o->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    std::vector<Desc *> ts;
    graph_tensors(g, ts);
    std::map<int64_t, Desc *> byuid;
    for (Desc *t : ts) {
        auto it = byuid.find(t->uid);
        if (it != byuid.end() && it->second != t) return CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES;
        byuid[t->uid] = t;
    }
    /* each tensor written by at most one op; a virtual one read must be written */
    for (Desc *t : ts) {
        int w = 0;
        for (Desc *o : g->ops) w += o->y == t;
        if (w > 1 || (t->virt && w == 0)) return CUDNN_STATUS_BAD_PARAM;
    }
    g->final = true;
    return CUDNN_STATUS_SUCCESS;
}

/* the operation of the graph that writes t (NULL: none) */
const Desc *writer(const Desc *g, const Desc *t) {
    for (const Desc *o : g->ops)
        if (o->y == t) return o;
    return nullptr;
}
bool is16(const Desc *t) { return t->dtype == CUDNN_DATA_BFLOAT16 || t->dtype == CUDNN_DATA_HALF; }
/* a matmul into a non-virtual fp32 tensor: the backward's dQ_accum */
bool is_dq_acc(const Desc *o) {
    return o->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR && !o->y->virt && o->y->dtype == CUDNN_DATA_FLOAT;
}
/* the backward graph: it has the dQ accumulation */
bool is_bwd(const Desc *g) {
    for (const Desc *o : g->ops)
        if (is_dq_acc(o)) return true;
    return false;
}
/* s_kv: the last dim of the first matmul's output (Q K^T) */
int64_t s_kv(const Desc *g) {
    for (const Desc *o : g->ops)
        if (o->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) return o->y->dims.back();
    return 0;
}

/* what the fused attention engine takes (else NOT_SUPPORTED; why: the
 * reason, for cudnnGetLastErrorString) */
bool graph_supported(const Desc *g, int64_t *ws, const char **why) {
    *ws = 0;
    int mm = 0;
    const long ver = sim_version();
    if (ver < 90000) return *why = "no fused attention engine before cuDNN 9.0", false;
    for (const Desc *o : g->ops) {
        for (const Desc *t : {o->x, o->b, o->t, o->y}) {
            if (!t || t->virt) continue;
            if (t->align < 16 && !t->byval) return *why = "a tensor's byte alignment below 16", false;
            /* the head dim contiguous (the last, or next to last in a transposed view) */
            const size_t n = t->strides.size();
            if (!t->byval && t->strides[n - 1] != 1 && (n < 2 || t->strides[n - 2] != 1))
                return *why = "neither of a tensor's last two strides 1", false;
        }
        if (o->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
            const int64_t m = o->op->mode;
            if (m == CUDNN_POINTWISE_CMP_GT || m == CUDNN_POINTWISE_CMP_GE || m == CUDNN_POINTWISE_CMP_LT ||
                m == CUDNN_POINTWISE_CMP_LE) {
                if (o->op->comp != CUDNN_DATA_BOOLEAN || o->y->dtype != CUDNN_DATA_BOOLEAN)
                    return *why = "a comparison not in BOOLEAN math into a BOOLEAN tensor (cudnn-frontend's)", false;
                if (m == CUDNN_POINTWISE_CMP_GT && ver < 90200)
                    return *why = "a sliding window (col + window > row) before cuDNN 9.2", false;
            }
            if (m == CUDNN_POINTWISE_BINARY_SELECT && o->t->dtype != CUDNN_DATA_BOOLEAN)
                return *why = "a select's mask not BOOLEAN", false;
            if (m == CUDNN_POINTWISE_GEN_INDEX && o->y->dtype != CUDNN_DATA_INT32)
                return *why = "a gen-index not into INT32", false;
        }
        /* a non-virtual tensor written by a matmul and read in the graph:
         * only dQ_accum (fp32, read by pointwise operations) */
        if (o->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR && !o->y->virt)
            for (const Desc *r : g->ops)
                if (r != o && (r->x == o->y || r->b == o->y || r->t == o->y) &&
                    (r->type != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR || o->y->dtype != CUDNN_DATA_FLOAT))
                    return *why = "a non-virtual matmul output read by a reduction or matmul (cudnn-frontend's "
                                  "full-head dK / dV are virtual without ragged offsets)", false;
        if (o->type != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) continue;
        mm++;
        /* every operand bf16 / fp16, virtual ones too (P of P V, P^T, dS^T), but
         * the fp32 dS of dQ_accum = dS K */
        if (!is16(o->b) || (!is16(o->x) && !is_dq_acc(o)))
            return *why = "a matmul operand not bf16 / fp16 (cudnn-frontend sets P to the I/O type)", false;
        const int64_t k = o->x->dims.back();
        const int64_t n = o->y->dims.back();
        /* the head size is the inner dim of Q.K^T or the outer of P.V */
        const int64_t hd = o->x->virt ? n : k;
        if (hd % 8 != 0 || hd > 256) return *why = "a head size not a multiple of 8 or above 256", false;
        if (!o->y->virt) *ws += 4 * numel(o->y);
    }
    if (mm < 2) return *why = "fewer than 2 matmuls", false;
    if (is_bwd(g)) {
        /* K of dQ = dS K: a reshape of the K^T that Q K^T reads (cudnn-frontend's reshape_k) */
        const Desc *first = nullptr, *acc = nullptr;
        for (const Desc *o : g->ops)
            if (o->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
                if (!first) first = o;
                if (is_dq_acc(o)) acc = o;
            }
        const Desc *rk = writer(g, acc->b);
        if (!acc->b->virt || !rk || rk->type != CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR || rk->x != first->b)
            return *why = "the backward's dQ = dS K with K not a reshape of the K^T of Q K^T", false;
        const std::vector<int64_t> &sd = first->y->dims;
        if (sd[sd.size() - 1] == 1 && sd[sd.size() - 2] == 1)
            return *why = "the backward at s_q = s_kv = 1", false;
    }
    return true;
}

/* ---- the interpreter ---- */
typedef std::vector<float> Buf;

/* flat index into a dense array of dims `od` of element `idx` of an
 * operand with dims `ad` (broadcast) */
size_t bidx(const std::vector<int64_t> &ad, const std::vector<int64_t> &od, const int64_t *idx) {
    size_t f = 0;
    for (size_t i = 0; i < ad.size(); i++) {
        const int64_t a = ad[i] == od[i] ? idx[i] : ad[i] == 1 ? 0 : idx[i] / (od[i] / ad[i]);
        f = f * (size_t)ad[i] + (size_t)a;
    }
    return f;
}
void unflat(const std::vector<int64_t> &dims, size_t f, int64_t *idx) {
    for (size_t i = dims.size(); i-- > 0;) {
        idx[i] = (int64_t)(f % (size_t)dims[i]);
        f /= (size_t)dims[i];
    }
}

struct Run {
    bool poison = false;   /* a known-bug backward: NaN outputs (the header) */
    std::vector<Desc *> ops;
    std::map<const Desc *, void *> ptr;
    std::map<const Desc *, Buf> val;
    float *ws;
};

void read_tensor(Run &r, const Desc *t) {
    if (r.val.count(t)) return;
    Buf &v = r.val[t];
    v.resize((size_t)numel(t));
    const void *p = r.ptr.at(t);
    int64_t idx[8];
    for (size_t f = 0; f < v.size(); f++) {
        unflat(t->dims, f, idx);
        size_t off = 0;
        for (size_t i = 0; i < t->dims.size(); i++) off += (size_t)(idx[i] * t->strides[i]);
        v[f] = load(p, t->byval ? CUDNN_DATA_FLOAT : t->dtype, t->byval ? 0 : off);
    }
}
void write_tensor(Run &r, const Desc *t) {
    const Buf &v = r.val.at(t);
    void *p = r.ptr.at(t);
    int64_t idx[8];
    for (size_t f = 0; f < v.size(); f++) {
        unflat(t->dims, f, idx);
        size_t off = 0;
        for (size_t i = 0; i < t->dims.size(); i++) off += (size_t)(idx[i] * t->strides[i]);
        store(p, t->dtype, off, r.poison ? NAN : v[f]);
    }
}
/* a value as stored in the tensor's type (virtual ones too: bf16 rounds) */
float as_type(const Desc *t, float v) { return t->dtype != CUDNN_DATA_BFLOAT16 ? v : bf16_round(v); }

const Buf &in(Run &r, const Desc *t) {
    if (!t->virt) read_tensor(r, t);
    return r.val.at(t);
}

/* a matmul that adds into its output (the dQ accumulator; the header):
 * a non-virtual fp32 output some pointwise operation reads */
bool accumulates(const Run &r, const Desc *o) {
    const Desc *Y = o->y;
    if (Y->virt || Y->dtype != CUDNN_DATA_FLOAT) return false;
    for (const Desc *p : r.ops)
        if (p->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR && (p->x == Y || p->b == Y)) return true;
    return false;
}

void run_op(Run &r, const Desc *o) {
    const Desc *Y = o->y;
    Buf out((size_t)numel(Y));
    int64_t idx[8];
    if (o->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
        const Buf &X = in(r, o->x);
        const Buf *Bv = o->b ? &in(r, o->b) : nullptr, *Tv = o->t ? &in(r, o->t) : nullptr;
        for (size_t f = 0; f < out.size(); f++) {
            unflat(Y->dims, f, idx);
            const float x = X[bidx(o->x->dims, Y->dims, idx)];
            const float b = Bv ? (*Bv)[bidx(o->b->dims, Y->dims, idx)] : 0.0f;
            float v = 0.0f;
            switch (o->op->mode) {
            case CUDNN_POINTWISE_ADD: v = x + b; break;
            case CUDNN_POINTWISE_SUB: v = x - b; break;
            case CUDNN_POINTWISE_MUL: v = x * b; break;
            case CUDNN_POINTWISE_DIV: v = x / b; break;
            case CUDNN_POINTWISE_EXP: v = expf(x); break;
            case CUDNN_POINTWISE_LOG: v = logf(x); break;
            case CUDNN_POINTWISE_IDENTITY: v = x; break;
            case CUDNN_POINTWISE_GEN_INDEX: v = (float)idx[o->op->axis]; break;
            case CUDNN_POINTWISE_CMP_GT: v = x > b; break;
            case CUDNN_POINTWISE_CMP_GE: v = x >= b; break;
            case CUDNN_POINTWISE_CMP_LT: v = x < b; break;
            case CUDNN_POINTWISE_CMP_LE: v = x <= b; break;
            case CUDNN_POINTWISE_BINARY_SELECT: v = (*Tv)[bidx(o->t->dims, Y->dims, idx)] != 0.0f ? x : b; break;
            }
            out[f] = as_type(Y, v);
        }
    } else if (o->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
        const Buf &A = in(r, o->x), &B = in(r, o->b);
        const size_t n = Y->dims.size();
        const int64_t M = Y->dims[n - 2], N = Y->dims[n - 1], K = o->x->dims[n - 1];
        std::vector<int64_t> bd(Y->dims.begin(), Y->dims.end() - 2), ad(o->x->dims.begin(), o->x->dims.end() - 2),
            bbd(o->b->dims.begin(), o->b->dims.end() - 2);
        size_t nb = 1;
        for (int64_t d : bd) nb *= (size_t)d;
        /* the accumulator: what the tensor holds now, added to */
        const bool acc = accumulates(r, o);
        Buf held;
        if (acc) {
            read_tensor(r, Y);
            held = std::move(r.val[Y]);
            r.val.erase(Y);
        }
        for (size_t bi = 0; bi < nb; bi++) {
            unflat(bd, bi, idx);
            const size_t ab = bidx(ad, bd, idx) * (size_t)(M * K), bb = bidx(bbd, bd, idx) * (size_t)(K * N);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    const size_t f = bi * (size_t)(M * N) + (size_t)(i * N + j);
                    float s = acc ? held[f] : 0.0f;
                    for (int64_t k = 0; k < K; k++) s += A[ab + (size_t)(i * K + k)] * B[bb + (size_t)(k * N + j)];
                    if (!Y->virt) r.ws[0] = s, r.ws++;   /* the accumulator, in the workspace */
                    out[f] = as_type(Y, s);
                }
        }
    } else if (o->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR) {
        const Buf &X = in(r, o->x);
        const bool mx = o->op->mode == CUDNN_REDUCE_TENSOR_MAX;
        std::vector<bool> have(out.size(), false);
        std::vector<float> acc(out.size(), 0.0f);
        for (size_t f = 0; f < X.size(); f++) {
            unflat(o->x->dims, f, idx);
            const size_t yi = bidx(Y->dims, o->x->dims, idx);
            if (!have[yi]) acc[yi] = X[f], have[yi] = true;
            else acc[yi] = mx ? fmaxf(acc[yi], X[f]) : acc[yi] + X[f];
        }
        for (size_t f = 0; f < out.size(); f++) out[f] = as_type(Y, acc[f]);
    } else {   /* reshape: the last two dims swapped */
        const Buf &X = in(r, o->x);
        const size_t n = Y->dims.size();
        std::vector<int64_t> xd = Y->dims;
        std::swap(xd[n - 1], xd[n - 2]);
        for (size_t f = 0; f < out.size(); f++) {
            unflat(Y->dims, f, idx);
            std::swap(idx[n - 1], idx[n - 2]);
            size_t g = 0;
            for (size_t i = 0; i < n; i++) g = g * (size_t)xd[i] + (size_t)idx[i];
            out[f] = as_type(Y, X[g]);
        }
    }
    r.val[Y] = std::move(out);
    if (!Y->virt) write_tensor(r, Y);
}

void run_graph(Run &r) {
    /* topological: an op runs once all its virtual inputs exist */
    std::vector<bool> done(r.ops.size(), false);
    for (size_t left = r.ops.size(); left;) {
        size_t before = left;
        for (size_t i = 0; i < r.ops.size(); i++) {
            if (done[i]) continue;
            const Desc *o = r.ops[i];
            bool ready = true;
            for (const Desc *t : {o->x, o->b, o->t})
                if (t && t != o->y) {
                    bool produced = false;
                    for (const Desc *p : r.ops) produced |= p->y == t;
                    if (produced && !r.val.count(t)) ready = false;
                }
            if (!ready) continue;
            run_op(r, o);
            done[i] = true;
            left--;
        }
        if (left == before) {
            fprintf(stderr, "cudasim cudnn: the operation graph has a cycle\n");
            abort();
        }
    }
}

template <class T>
bool get1(int64_t count, const void *e, T *out) {
    if (count != 1 || !e) return false;
    memcpy(out, e, sizeof(T));
    return true;
}

}  // namespace

extern "C" size_t cudnnGetVersion(void) { return (size_t)sim_version(); }

extern "C" void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", g_last_err);
    g_last_err[0] = 0;
}

extern "C" const char *cudnnGetErrorString(cudnnStatus_t s) {
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES: return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    }
    return "CUDNN_STATUS_UNKNOWN";
}

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    if (!h) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    /* ZT_SIM_CUDNN_SUBLIB=missing: as cuDNN 9 whose sub-libraries (loaded at
     * run time) are not on the machine */
    const char *sub = getenv("ZT_SIM_CUDNN_SUBLIB");
    if (sub && strcmp(sub, "missing") == 0)
        return fail(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, "libcudnn_graph.so.9 not found (ZT_SIM_CUDNN_SUBLIB)");
    *h = new cudnnContext();
    (*h)->stream = nullptr;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
    delete h;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
    if (!h) return CUDNN_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                      cudnnBackendDescriptor_t *d) {
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    switch ((int)type) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: break;
    default: return CUDNN_STATUS_NOT_SUPPORTED;   /* not in the simulator's subset */
    }
    Desc *x = new Desc();
    x->type = type;
    *d = x;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
    delete (Desc *)d;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t dd, cudnnBackendAttributeName_t name,
                                                  cudnnBackendAttributeType_t type, int64_t count,
                                                  const void *e) {
    Desc *d = (Desc *)dd;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (d->final) return CUDNN_STATUS_BAD_PARAM;
    if (count < 0 || (count > 0 && !e)) return CUDNN_STATUS_BAD_PARAM;
#define NEED(T) do { if (type != (T)) return CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE; } while (0)
#define ONE(T, dst) do { NEED(T); if (!get1(count, e, &(dst))) return CUDNN_STATUS_BAD_PARAM; } while (0)
#define DESC1(dst, want) do { NEED(CUDNN_TYPE_BACKEND_DESCRIPTOR); Desc *v_; \
        if (!get1(count, e, &v_) || !v_ || v_->type != (want)) { return CUDNN_STATUS_BAD_PARAM; } \
        dst = v_; } while (0)
    const int n = (int)name;
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_TENSOR_DATA_TYPE: ONE(CUDNN_TYPE_DATA_TYPE, d->dtype); break;
        case CUDNN_ATTR_TENSOR_DIMENSIONS: case CUDNN_ATTR_TENSOR_STRIDES: {
            NEED(CUDNN_TYPE_INT64);
            if (count < 1 || count > 8) return CUDNN_STATUS_BAD_PARAM;
            std::vector<int64_t> v((const int64_t *)e, (const int64_t *)e + count);
            (n == CUDNN_ATTR_TENSOR_DIMENSIONS ? d->dims : d->strides) = v;
            break;
        }
        case CUDNN_ATTR_TENSOR_UNIQUE_ID: ONE(CUDNN_TYPE_INT64, d->uid); break;
        case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: ONE(CUDNN_TYPE_INT64, d->align); break;
        case CUDNN_ATTR_TENSOR_IS_VIRTUAL: ONE(CUDNN_TYPE_BOOLEAN, d->virt); break;
        case CUDNN_ATTR_TENSOR_IS_BY_VALUE: ONE(CUDNN_TYPE_BOOLEAN, d->byval); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_POINTWISE_MODE: { cudnnPointwiseMode_t m; ONE(CUDNN_TYPE_POINTWISE_MODE, m); d->mode = m; break; }
        case CUDNN_ATTR_POINTWISE_MATH_PREC: ONE(CUDNN_TYPE_DATA_TYPE, d->comp); break;
        case CUDNN_ATTR_POINTWISE_AXIS: ONE(CUDNN_TYPE_INT64, d->axis); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
        if (n != CUDNN_ATTR_MATMUL_COMP_TYPE) return CUDNN_STATUS_BAD_PARAM;
        ONE(CUDNN_TYPE_DATA_TYPE, d->comp);
        break;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_REDUCTION_OPERATOR: { cudnnReduceTensorOp_t m; ONE(CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, m); d->mode = m; break; }
        case CUDNN_ATTR_REDUCTION_COMP_TYPE: ONE(CUDNN_TYPE_DATA_TYPE, d->comp); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: DESC1(d->op, CUDNN_BACKEND_POINTWISE_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_POINTWISE_XDESC: DESC1(d->x, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: DESC1(d->b, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_POINTWISE_TDESC: DESC1(d->t, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_POINTWISE_YDESC: DESC1(d->y, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_OPERATION_MATMUL_DESC: DESC1(d->op, CUDNN_BACKEND_MATMUL_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_MATMUL_ADESC: DESC1(d->x, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_MATMUL_BDESC: DESC1(d->b, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_MATMUL_CDESC: DESC1(d->y, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_OPERATION_REDUCTION_DESC: DESC1(d->op, CUDNN_BACKEND_REDUCTION_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_REDUCTION_XDESC: DESC1(d->x, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_REDUCTION_YDESC: DESC1(d->y, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_OPERATION_RESHAPE_XDESC: DESC1(d->x, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        case CUDNN_ATTR_OPERATION_RESHAPE_YDESC: DESC1(d->y, CUDNN_BACKEND_TENSOR_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: ONE(CUDNN_TYPE_HANDLE, d->handle); break;
        case CUDNN_ATTR_OPERATIONGRAPH_OPS: {
            NEED(CUDNN_TYPE_BACKEND_DESCRIPTOR);
            if (count < 1) return CUDNN_STATUS_BAD_PARAM;
            d->ops.clear();
            for (int64_t i = 0; i < count; i++) {
                Desc *o = ((Desc *const *)e)[i];
                if (!o || !is_op(o)) return CUDNN_STATUS_BAD_PARAM;
                d->ops.push_back(o);
            }
            break;
        }
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_ENGINEHEUR_MODE: { cudnnBackendHeurMode_t m; ONE(CUDNN_TYPE_HEUR_MODE, m); d->mode = m; break; }
        case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: DESC1(d->graph, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: ONE(CUDNN_TYPE_HANDLE, d->handle); break;
        case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: DESC1(d->cfg, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR); break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        switch (n) {
        case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
            NEED(CUDNN_TYPE_INT64);
            d->uids.assign((const int64_t *)e, (const int64_t *)e + count);
            break;
        case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
            NEED(CUDNN_TYPE_VOID_PTR);
            d->ptrs.assign((void *const *)e, (void *const *)e + count);
            break;
        case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
            NEED(CUDNN_TYPE_VOID_PTR);
            if (count != 1) return CUDNN_STATUS_BAD_PARAM;
            d->wsp = *(void *const *)e;
            d->have_ws = true;
            break;
        default: return CUDNN_STATUS_BAD_PARAM;
        }
        break;
    default: return CUDNN_STATUS_BAD_PARAM;   /* ENGINECFG: filled by heuristics only here */
    }
#undef NEED
#undef ONE
#undef DESC1
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t dd) {
    Desc *d = (Desc *)dd;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (d->final) return CUDNN_STATUS_BAD_PARAM;
    switch ((int)d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        if ((int)d->dtype < 0 || d->dims.empty() || d->dims.size() != d->strides.size() || d->uid < 0 ||
            d->align <= 0 || (d->virt && d->byval))
            return CUDNN_STATUS_BAD_PARAM;
        for (size_t i = 0; i < d->dims.size(); i++)
            if (d->dims[i] <= 0 || d->strides[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        if (pw_arity(d->mode) == 0) return CUDNN_STATUS_NOT_SUPPORTED;
        if ((int)d->comp < 0) return CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
        if (d->comp != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
        break;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        if (d->mode != CUDNN_REDUCE_TENSOR_ADD && d->mode != CUDNN_REDUCE_TENSOR_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
        if ((int)d->comp < 0) return CUDNN_STATUS_BAD_PARAM;
        break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        return finalize_op(d);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return finalize_graph(d);
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        if (!d->graph || d->mode < 0) return CUDNN_STATUS_BAD_PARAM;
        if (!d->graph->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        {
        const char *why = "";
        d->supported = graph_supported(d->graph, &d->ws, &why);
        if (!d->supported) fail(CUDNN_STATUS_NOT_SUPPORTED, why);
        break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
        if (!d->handle || !d->cfg) return CUDNN_STATUS_BAD_PARAM;
        if (!d->cfg->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
        if (!d->cfg->supported) return CUDNN_STATUS_NOT_SUPPORTED;
        d->graph = d->cfg->graph;
        d->ws = d->cfg->ws;
        break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        if (d->uids.size() != d->ptrs.size() || !d->have_ws) return CUDNN_STATUS_BAD_PARAM;
        break;
    }
    d->final = true;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const dd, cudnnBackendAttributeName_t name,
                                                  cudnnBackendAttributeType_t type, int64_t requested,
                                                  int64_t *count, void *e) {
    Desc *d = (Desc *)dd;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!d->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
        if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE;
        const int64_t have = d->supported ? 1 : 0;
        if (count) *count = requested == 0 ? have : (requested < have ? requested : have);
        if (requested > 0) {
            if (!e) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
            for (int64_t i = 0; i < requested && i < have; i++) {
                Desc *c = ((Desc **)e)[i];
                if (!c || c->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || c->final) return CUDNN_STATUS_BAD_PARAM;
                c->graph = d->graph, c->supported = true, c->ws = d->ws, c->final = true;
            }
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
        if (type != CUDNN_TYPE_INT64) return CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE;
        if (requested != 1 || !e) return CUDNN_STATUS_BAD_PARAM;
        memcpy(e, &d->ws, 8);
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    return CUDNN_STATUS_NOT_SUPPORTED;   /* not in the simulator's subset */
}

extern "C" cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t pp, cudnnBackendDescriptor_t vv) {
    Desc *p = (Desc *)pp, *v = (Desc *)vv;
    if (!h) return CUDNN_STATUS_NOT_INITIALIZED;
    if (!p || !v) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE;
    if (!p->final || !v->final) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    auto r = std::make_shared<Run>();
    r->ops = p->graph->ops;
    std::vector<Desc *> ts;
    graph_tensors(p->graph, ts);
    for (Desc *t : ts) {
        if (t->virt) continue;
        void *ptr = nullptr;
        bool found = false;
        for (size_t i = 0; i < v->uids.size(); i++)
            if (v->uids[i] == t->uid) ptr = v->ptrs[i], found = true;
        if (!found || !ptr) return CUDNN_STATUS_BAD_PARAM;
        if (t->byval) {
            if (zt_sim_is_device(ptr, 4)) return CUDNN_STATUS_BAD_PARAM;   /* a host value */
        } else {
            if ((uintptr_t)ptr % (uintptr_t)t->align) return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
            if (!zt_sim_is_device(ptr, span(t))) return CUDNN_STATUS_BAD_PARAM;
        }
        r->ptr[t] = ptr;
    }
    if (p->ws && (!v->wsp || !zt_sim_is_device(v->wsp, (size_t)p->ws))) return CUDNN_STATUS_BAD_PARAM;
    /* by-value scalars are read now, as cuDNN copies them at the call */
    for (Desc *t : ts)
        if (t->byval) read_tensor(*r, t);
    r->ws = (float *)v->wsp;
    const long ver = sim_version();
    r->poison = is_bwd(p->graph) && (ver == 91000 || ver == 91001 || (ver <= 91500 && s_kv(p->graph) % 128 != 0));
    zt_sim_enqueue(h->stream, [r]() { run_graph(*r); });
    return CUDNN_STATUS_SUCCESS;
}
