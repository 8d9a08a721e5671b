/*
 * comm.c -- MPI backend of the communication interface.
 *
 * Every collective is started non-blocking and completed by a polling wait
 * bounded by the group's timeout, so a dead or hung peer becomes an error
 * naming the operation instead of a hang.  Byte accounting counts what this
 * rank sends in the bandwidth-optimal (ring) algorithms: all-reduce
 * 2(N-1)/N x bytes; reduce-scatter and all-gather: every chunk but one's own;
 * broadcast (N-1)/N x bytes; all-to-all (equal or variable counts): every
 * chunk but its own.
 */
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "half.h"

size_t zt_dtype_size(zt_dtype t) {
    switch (t) {
    case ZT_F32: case ZT_I32: return 4;
    case ZT_F64: case ZT_I64: return 8;
    case ZT_U8: return 1;
    case ZT_BF16: case ZT_F16: return 2;
    }
    return 0;
}

const char *zt_comm_kind_name(int kind) {
    static const char *n[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast",
                              "all-to-all"};
    return (kind >= 0 && kind < ZT_COMM_NKINDS) ? n[kind] : "?";
}

static MPI_Datatype mpi_type(zt_dtype t) {
    switch (t) {
    case ZT_F32: return MPI_FLOAT;
    case ZT_F64: return MPI_DOUBLE;
    case ZT_I32: return MPI_INT32_T;
    case ZT_I64: return MPI_INT64_T;
    case ZT_U8: return MPI_UINT8_T;
    case ZT_BF16: case ZT_F16: return MPI_UINT16_T;   /* sums use the ops below */
    }
    return MPI_DATATYPE_NULL;
}

void zt_group_where(zt_group *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->where, sizeof g->where, fmt, ap);
    va_end(ap);
}

static int mpi_err(zt_group *g, zt_status *st, int rc, int kind) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return zt_fail(st, ZT_ECOMM, "MPI %s on the %s group failed%s%s%s: %s", zt_comm_kind_name(kind),
                   g->name, g->where[0] ? " (" : "", g->where, g->where[0] ? ")" : "", s);
}

static int wait_req(zt_group *g, MPI_Request *req, int kind, zt_status *st) {
    double t0 = zt_now_s();
    int done = 0;
    unsigned spins = 0;
    for (;;) {
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, kind);
        if (done) return ZT_OK;
        if ((++spins & 1023) == 0) {
            sched_yield();
            double el = zt_now_s() - t0;
            if (g->timeout_s > 0 && el > g->timeout_s)
                return zt_fail(st, ZT_ECOMM, "%s on the %s group timed out after %.0f s%s%s%s: "
                               "a rank died or hangs (ztrain.comm_timeout_s)",
                               zt_comm_kind_name(kind), g->name, el, g->where[0] ? " (" : "",
                               g->where, g->where[0] ? ")" : "");
        }
    }
}

/* MPI counts are int: split large buffers. */
#define CHUNK ((size_t)1 << 30)

/* ---- sums over 16-bit floats: user-defined commutative MPI_Ops that add
 * each pair of elements in fp32 and round the result back once (half.h).
 * Created on first use; freed when MPI finalizes, through the delete
 * callback of an attribute on MPI_COMM_SELF (MPI deletes those first thing
 * in MPI_Finalize, while ops can still be freed). */

static void sum_bf16_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    const int n = *len;
    for (int i = 0; i < n; i++) b[i] = zt_bf16_add(a[i], b[i]);
}

static void sum_f16_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    const int n = *len;
    for (int i = 0; i < n; i++) b[i] = zt_f16_add(a[i], b[i]);
}

static MPI_Op op_sum_bf16 = MPI_OP_NULL, op_sum_f16 = MPI_OP_NULL;
static int ops_keyval = MPI_KEYVAL_INVALID;

static int free_ops_cb(MPI_Comm c, int keyval, void *attr, void *extra) {
    (void)c; (void)attr; (void)extra;
    if (op_sum_bf16 != MPI_OP_NULL) MPI_Op_free(&op_sum_bf16);
    if (op_sum_f16 != MPI_OP_NULL) MPI_Op_free(&op_sum_f16);
    MPI_Comm_free_keyval(&keyval);
    ops_keyval = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

static int create_ops(zt_group *g, int kind, zt_status *st) {
    int rc = MPI_Op_create(sum_bf16_fn, 1, &op_sum_bf16);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(sum_f16_fn, 1, &op_sum_f16);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_ops_cb, &ops_keyval, NULL);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_attr(MPI_COMM_SELF, ops_keyval, NULL);
    if (rc != MPI_SUCCESS) {
        if (op_sum_bf16 != MPI_OP_NULL) MPI_Op_free(&op_sum_bf16);
        if (op_sum_f16 != MPI_OP_NULL) MPI_Op_free(&op_sum_f16);
        if (ops_keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&ops_keyval);
        return mpi_err(g, st, rc, kind);
    }
    return ZT_OK;
}

/* The MPI_Op computing `op` (MPI_SUM or MPI_MAX) over elements of type t. */
static int op_for(zt_group *g, zt_dtype t, MPI_Op op, int kind, MPI_Op *out, zt_status *st) {
    *out = op;
    if (t != ZT_BF16 && t != ZT_F16) return ZT_OK;
    if (op != MPI_SUM)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s (max) of 16-bit floats on the %s group is not "
                       "supported by the MPI backend", zt_comm_kind_name(kind), g->name);
    if (op_sum_bf16 == MPI_OP_NULL) ZT_TRY(create_ops(g, kind, st));
    *out = t == ZT_BF16 ? op_sum_bf16 : op_sum_f16;
    return ZT_OK;
}

static int mpi_allreduce_op(zt_group *g, void *buf, size_t n, zt_dtype t, MPI_Op op0, zt_status *st) {
    size_t es = zt_dtype_size(t);
    MPI_Op op;
    ZT_TRY(op_for(g, t, op0, ZT_COMM_ALLREDUCE, &op, st));
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t c = n - off < CHUNK ? n - off : CHUNK;
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * es, (int)c, mpi_type(t), op,
                                g->comm, &r);
        if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_ALLREDUCE);
        ZT_TRY(wait_req(g, &r, ZT_COMM_ALLREDUCE, st));
    }
    g->calls[ZT_COMM_ALLREDUCE]++;
    if (g->size > 1)
        g->bytes[ZT_COMM_ALLREDUCE] += 2 * (uint64_t)n * es * (uint64_t)(g->size - 1) / (uint64_t)g->size;
    return ZT_OK;
}

static int mpi_allreduce_sum(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return mpi_allreduce_op(g, buf, n, t, MPI_SUM, st);
}
static int mpi_allreduce_max(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return mpi_allreduce_op(g, buf, n, t, MPI_MAX, st);
}

static int mpi_bcast(zt_group *g, void *buf, size_t n, zt_dtype t, int root, zt_status *st) {
    size_t es = zt_dtype_size(t);
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t c = n - off < CHUNK ? n - off : CHUNK;
        MPI_Request r;
        int rc = MPI_Ibcast((char *)buf + off * es, (int)c, mpi_type(t), root, g->comm, &r);
        if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_BCAST);
        ZT_TRY(wait_req(g, &r, ZT_COMM_BCAST, st));
    }
    g->calls[ZT_COMM_BCAST]++;
    if (g->size > 1)
        g->bytes[ZT_COMM_BCAST] += (uint64_t)n * es * (uint64_t)(g->size - 1) / (uint64_t)g->size;
    return ZT_OK;
}

static int mpi_barrier(zt_group *g, zt_status *st) {
    MPI_Request r;
    int rc = MPI_Ibarrier(g->comm, &r);
    if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_BCAST);
    return wait_req(g, &r, ZT_COMM_BCAST, st);
}

static uint64_t others_bytes(zt_group *g, const int *counts, zt_dtype t) {
    uint64_t total = 0;
    for (int i = 0; i < g->size; ++i) total += (uint64_t)counts[i];
    return (total - (uint64_t)counts[g->rank]) * zt_dtype_size(t);
}

static int mpi_reduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                  zt_dtype t, zt_status *st) {
    MPI_Op op;
    ZT_TRY(op_for(g, t, MPI_SUM, ZT_COMM_REDUCE_SCATTER, &op, st));
    MPI_Request r;
    int rc = MPI_Ireduce_scatter(send, recv, counts, mpi_type(t), op, g->comm, &r);
    if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_REDUCE_SCATTER);
    ZT_TRY(wait_req(g, &r, ZT_COMM_REDUCE_SCATTER, st));
    g->calls[ZT_COMM_REDUCE_SCATTER]++;
    if (g->size > 1) g->bytes[ZT_COMM_REDUCE_SCATTER] += others_bytes(g, counts, t);
    return ZT_OK;
}

static int mpi_iallgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                  zt_dtype t, zt_request *r, zt_status *st) {
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, mpi_type(t),
                             g->comm, &r->req);
    if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_ALLGATHER);
    r->kind = ZT_COMM_ALLGATHER;
    r->active = 1;
    g->calls[ZT_COMM_ALLGATHER]++;
    if (g->size > 1) g->bytes[ZT_COMM_ALLGATHER] += others_bytes(g, counts, t);
    return ZT_OK;
}

static int mpi_wait(zt_group *g, zt_request *r, zt_status *st) {
    if (!r->active) return ZT_OK;
    r->active = 0;
    return wait_req(g, &r->req, r->kind, st);
}

static int mpi_allgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                 zt_dtype t, zt_status *st) {
    zt_request r;
    ZT_TRY(mpi_iallgather_inplace(g, buf, counts, displs, t, &r, st));
    return mpi_wait(g, &r, st);
}

static int mpi_ireduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                   zt_dtype t, zt_request *r, zt_status *st) {
    MPI_Op op;
    ZT_TRY(op_for(g, t, MPI_SUM, ZT_COMM_REDUCE_SCATTER, &op, st));
    int rc = MPI_Ireduce_scatter(send, recv, counts, mpi_type(t), op, g->comm, &r->req);
    if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_REDUCE_SCATTER);
    r->kind = ZT_COMM_REDUCE_SCATTER;
    r->active = 1;
    g->calls[ZT_COMM_REDUCE_SCATTER]++;
    if (g->size > 1) g->bytes[ZT_COMM_REDUCE_SCATTER] += others_bytes(g, counts, t);
    return ZT_OK;
}

/* MPI_Ialltoall over chunks up to CHUNK elements (counts are int): one
 * exchange per CHUNK-sized slice of every chunk, through derived types
 * whose extent is the whole chunk. */
static int mpi_alltoall(zt_group *g, const void *send, void *recv, size_t count, zt_dtype t,
                        zt_status *st) {
    const size_t es = zt_dtype_size(t);
    for (size_t off = 0; off < count; off += CHUNK) {
        const size_t c = count - off < CHUNK ? count - off : CHUNK;
        MPI_Datatype blk = mpi_type(t), piece;
        int rc = MPI_SUCCESS;
        if (c == count) {
            piece = blk;
        } else {
            MPI_Datatype v;
            rc = MPI_Type_contiguous((int)c, blk, &v);
            if (rc == MPI_SUCCESS)
                rc = MPI_Type_create_resized(v, 0, (MPI_Aint)(count * es), &piece);
            if (rc == MPI_SUCCESS) MPI_Type_free(&v);
            if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&piece);
            if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_ALLTOALL);
        }
        MPI_Request r;
        const int n = c == count ? (int)c : 1;
        rc = MPI_Ialltoall((const char *)send + off * es, n, piece, (char *)recv + off * es, n,
                           piece, g->comm, &r);
        if (c != count) MPI_Type_free(&piece);
        if (rc != MPI_SUCCESS) return mpi_err(g, st, rc, ZT_COMM_ALLTOALL);
        ZT_TRY(wait_req(g, &r, ZT_COMM_ALLTOALL, st));
    }
    g->calls[ZT_COMM_ALLTOALL]++;
    g->bytes[ZT_COMM_ALLTOALL] += (uint64_t)(g->size - 1) * (uint64_t)count * es;
    return ZT_OK;
}

/* Wait for all n requests, bounded like wait_req.  On failure the pending
 * receives are cancelled and every request still pending is released, so
 * that nothing writes into the caller's buffers after the error. */
static int wait_all(zt_group *g, MPI_Request *rq, int n, int kind, zt_status *st) {
    const double t0 = zt_now_s();
    int rc = ZT_OK;
    for (unsigned spins = 0;; spins++) {
        int done = 0;
        const int mrc = MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
        if (mrc != MPI_SUCCESS) { rc = mpi_err(g, st, mrc, kind); break; }
        if (done) return ZT_OK;
        if ((spins & 1023) == 1023) {
            sched_yield();
            const double el = zt_now_s() - t0;
            if (g->timeout_s > 0 && el > g->timeout_s) {
                rc = zt_fail(st, ZT_ECOMM, "%s on the %s group timed out after %.0f s%s%s%s: "
                             "a rank died or hangs (ztrain.comm_timeout_s)",
                             zt_comm_kind_name(kind), g->name, el, g->where[0] ? " (" : "",
                             g->where, g->where[0] ? ")" : "");
                break;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (rq[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rq[i]);
            MPI_Request_free(&rq[i]);
        }
    return rc;
}

/* the span [displ, displ + count) elements of es bytes is addressable */
static int span_fits(size_t displ, size_t count, size_t es) {
    return displ <= SIZE_MAX / es && count <= SIZE_MAX / es - displ;
}

/* All-to-all of variable counts: the chunk to itself is a memcpy; every
 * other one is point to point (MPI_Isend / MPI_Irecv of at most CHUNK
 * elements each, so counts and displacements need not fit in int; the
 * pieces of a pair match in order, MPI messages not overtaking). */
static int mpi_alltoallv(zt_group *g, const void *send, const size_t *scounts,
                         const size_t *sdispls, void *recv, const size_t *rcounts,
                         const size_t *rdispls, zt_dtype t, zt_status *st) {
    const size_t es = zt_dtype_size(t);
    const int P = g->size, R = g->rank;
    ZT_CHECK(es > 0 && scounts && sdispls && rcounts && rdispls, st);
    if (scounts[R] != rcounts[R])
        return zt_fail(st, ZT_EINVAL, "all-to-all on the %s group%s%s%s: rank %d sends %zu elements "
                       "to itself but expects to receive %zu", g->name, g->where[0] ? " (" : "",
                       g->where, g->where[0] ? ")" : "", R, scounts[R], rcounts[R]);
    size_t nreq = 0;
    uint64_t sent = 0;
    for (int j = 0; j < P; j++) {
        if (!span_fits(sdispls[j], scounts[j], es) || !span_fits(rdispls[j], rcounts[j], es))
            return zt_fail(st, ZT_EINVAL, "all-to-all on the %s group: the span of rank %d "
                           "(%zu + %zu or %zu + %zu elements) does not fit in memory", g->name, j,
                           sdispls[j], scounts[j], rdispls[j], rcounts[j]);
        if (j == R) continue;
        nreq += (scounts[j] + CHUNK - 1) / CHUNK + (rcounts[j] + CHUNK - 1) / CHUNK;
        sent += (uint64_t)scounts[j] * es;
    }
    if (nreq > (size_t)INT_MAX / 2)
        return zt_fail(st, ZT_EINVAL, "all-to-all on the %s group: %zu messages are too many",
                       g->name, nreq);
    if (scounts[R])
        memcpy((char *)recv + rdispls[R] * es, (const char *)send + sdispls[R] * es, scounts[R] * es);
    MPI_Request *rq = nreq ? malloc(nreq * sizeof *rq) : NULL;
    if (nreq && !rq) return zt_fail(st, ZT_ENOMEM, "out of memory (all-to-all requests)");
    const MPI_Datatype mt = mpi_type(t);
    const int tag = 7411;
    int n = 0, mrc = MPI_SUCCESS;
    /* receives first, then sends, each peer in turn starting after this rank */
    for (int pass = 0; pass < 2 && mrc == MPI_SUCCESS; pass++)
        for (int k = 1; k < P && mrc == MPI_SUCCESS; k++) {
            const int j = pass ? (R + k) % P : (R - k + P) % P;
            const size_t cnt = pass ? scounts[j] : rcounts[j];
            for (size_t off = 0; off < cnt && mrc == MPI_SUCCESS; off += CHUNK) {
                const int c = (int)(cnt - off < CHUNK ? cnt - off : CHUNK);
                if (pass)
                    mrc = MPI_Isend((const char *)send + (sdispls[j] + off) * es, c, mt, j, tag,
                                    g->comm, &rq[n]);
                else
                    mrc = MPI_Irecv((char *)recv + (rdispls[j] + off) * es, c, mt, j, tag, g->comm,
                                    &rq[n]);
                if (mrc == MPI_SUCCESS) n++;
            }
        }
    int rc = ZT_OK;
    if (mrc != MPI_SUCCESS) {
        rc = mpi_err(g, st, mrc, ZT_COMM_ALLTOALL);
        for (int i = 0; i < n; i++) {   /* the peers wait in vain: they time out */
            MPI_Cancel(&rq[i]);
            MPI_Request_free(&rq[i]);
        }
    } else if (n) {
        rc = wait_all(g, rq, n, ZT_COMM_ALLTOALL, st);
    }
    free(rq);
    ZT_TRY(rc);
    g->calls[ZT_COMM_ALLTOALL]++;
    g->bytes[ZT_COMM_ALLTOALL] += sent;
    return ZT_OK;
}

static const zt_comm_ops mpi_ops = {
    "mpi", mpi_allreduce_sum, mpi_allreduce_max, mpi_bcast, mpi_barrier,
    mpi_reduce_scatter_sum, mpi_allgather_inplace, mpi_iallgather_inplace, mpi_wait,
    mpi_ireduce_scatter_sum, NULL, mpi_alltoall, mpi_alltoallv, NULL, NULL, NULL,
};

static int wrap(MPI_Comm c, const char *name, double timeout_s, zt_group **out, zt_status *st) {
    zt_group *g = calloc(1, sizeof *g);
    if (!g) { MPI_Comm_free(&c); return zt_fail(st, ZT_ENOMEM, "out of memory (comm group)"); }
    g->comm = c;
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    g->ops = &mpi_ops;
    g->name = name;
    g->timeout_s = timeout_s;
    *out = g;
    return ZT_OK;
}

int zt_group_mpi(MPI_Comm comm, const char *name, double timeout_s, zt_group **out, zt_status *st) {
    MPI_Comm c;
    if (MPI_Comm_dup(comm, &c) != MPI_SUCCESS) return zt_fail(st, ZT_ECOMM, "MPI_Comm_dup failed");
    return wrap(c, name, timeout_s, out, st);
}

int zt_group_split(zt_group *parent, int color, int key, const char *name, zt_group **out,
                   zt_status *st) {
    MPI_Comm c;
    if (MPI_Comm_split(parent->comm, color, key, &c) != MPI_SUCCESS)
        return zt_fail(st, ZT_ECOMM, "MPI_Comm_split (%s group) failed", name);
    return wrap(c, name, parent->timeout_s, out, st);
}

void zt_group_free(zt_group *g) {
    if (!g) return;
    if (g->ops && g->ops->destroy) g->ops->destroy(g);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&g->comm);
    free(g);
}
