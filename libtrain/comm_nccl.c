/*
 * comm_nccl.c -- the NCCL backend of the communication interface (comm.h:
 * zt_group_nccl).  Built with --with-cuda when NCCL is found.
 *
 * Buffers are device memory of the CUDA backend.  Every collective runs on
 * the group's own (high-priority) communication stream, after an event
 * recorded on the backend's compute stream: it sees everything the kernels
 * queued before it wrote.  Blocking collectives make the compute stream
 * wait for their completion event and wait for it on the host, polling the
 * event and ncclCommGetAsyncError, bounded by the group's timeout; the
 * non-blocking ones (all-gather, reduce-scatter, all-reduce sum) return the
 * completion event in zt_request.impl, and wait() only makes the compute
 * stream wait for it (a stream wait: the host goes on queueing).  Their
 * completion is confirmed on the host by fence() (the engine's one host
 * synchronization of a step, or the next blocking collective): the same
 * bounded poll, over everything queued so far; poll() is its check without
 * the wait, for a host waiting for a copy.  A timeout, an asynchronous
 * error or a failed NCCL call (whose peers may be waiting for it) aborts the
 * communicator (ncclCommAbort) and every later call fails at once.
 *
 * Byte accounting is comm.c's: what this rank sends in the ring algorithms
 * (all-reduce 2(N-1)/N x bytes, reduce-scatter and all-gather every chunk
 * but its own, broadcast (N-1)/N x bytes, all-to-all (equal or variable counts)
 * every chunk but its own).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm.h"
#include "cuda/zt_cuda.h"

typedef struct nccl_group {
    zt_group g;              /* first: a zt_group * is a nccl_group * */
    ncclComm_t nc;
    int device;
    int dead;                /* aborted: every call fails */
    cudaStream_t compute;    /* the CUDA backend's compute stream (not owned) */
    cudaStream_t stream;     /* communication stream */
    cudaEvent_t ev_ready;    /* compute -> communication ordering */
    cudaEvent_t ev_done;     /* completion of the blocking collectives */
    cudaEvent_t ev_fence;    /* fence(): the compute stream's point */
    float *d_one;            /* operand of the barrier */
    /* completion events of the non-blocking collectives: created on
     * demand, reused once waited for (the stream wait keeps the record it
     * waits for), destroyed with the group; ev_all holds every one, the
     * first ev_nfree of ev_free the ones not held by a request */
    cudaEvent_t *ev_all, *ev_free;
    int ev_n, ev_nfree, ev_cap;
    /* non-blocking collectives waited for on the stream only, not yet
     * confirmed on the host (fence, or a blocking collective after them):
     * how many, and the last one's kind and context for the messages */
    long unconfirmed;
    int last_kind;
    char last_where[sizeof ((zt_group *)0)->where];
} nccl_group;

static nccl_group *NG(zt_group *g) { return (nccl_group *)g; }

#define WHERE(g) (g)->where[0] ? " (" : "", (g)->where, (g)->where[0] ? ")" : ""

static int nccl_type(zt_dtype t, ncclDataType_t *out) {
    switch (t) {
    case ZT_F32: *out = ncclFloat32; return 1;
    case ZT_F64: *out = ncclFloat64; return 1;
    case ZT_I32: *out = ncclInt32; return 1;
    case ZT_I64: *out = ncclInt64; return 1;
    case ZT_U8: *out = ncclUint8; return 1;
    case ZT_BF16: *out = ncclBfloat16; return 1;
    case ZT_F16: *out = ncclFloat16; return 1;
    }
    return 0;
}

static int fail_nccl(nccl_group *n, int kind, ncclResult_t r, zt_status *st) {
    const char *last = n->nc ? ncclGetLastError(n->nc) : NULL;
    return zt_fail(st, ZT_ECOMM, "NCCL %s on the %s group failed%s%s%s: %s%s%s",
                   zt_comm_kind_name(kind), n->g.name, WHERE(&n->g), ncclGetErrorString(r),
                   last && *last ? ": " : "", last && *last ? last : "");
}

static int fail_cuda(nccl_group *n, int kind, const char *what, cudaError_t e, zt_status *st) {
    (void)cudaGetLastError();
    return zt_fail(st, ZT_ECOMM, "NCCL %s on the %s group%s%s%s: %s: %s", zt_comm_kind_name(kind),
                   n->g.name, WHERE(&n->g), what, cudaGetErrorString(e));
}

static void abort_comm(nccl_group *n) {
    if (n->dead) return;
    n->dead = 1;
    ncclCommAbort(n->nc);
    n->nc = NULL;
}

/* A failed NCCL call: this rank launched nothing, while its peers' calls
 * may have succeeded and now wait for it; the next collective here would
 * pair with theirs.  Abort, as for an asynchronous error. */
static int call_failed(nccl_group *n, int kind, ncclResult_t r, zt_status *st) {
    const int rc = fail_nccl(n, kind, r, st);
    abort_comm(n);
    return rc;
}

static int alive(nccl_group *n, int kind, zt_status *st) {
    if (!n->dead) return ZT_OK;
    return zt_fail(st, ZT_ECOMM, "%s on the %s group%s%s%s: its NCCL communicator was aborted "
                   "after an earlier failure", zt_comm_kind_name(kind), n->g.name, WHERE(&n->g));
}

/* The communication stream waits for everything queued on compute so far. */
static int begin(nccl_group *n, int kind, zt_status *st) {
    ZT_TRY(alive(n, kind, st));
    cudaError_t e = cudaEventRecord(n->ev_ready, n->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(n->stream, n->ev_ready, 0);
    if (e != cudaSuccess) return fail_cuda(n, kind, "ordering after the compute stream", e, st);
    return ZT_OK;
}

/* The bound on a host wait that began at t0: past timeout_s, abort. */
static int bound(nccl_group *n, int kind, double t0, zt_status *st) {
    const double el = zt_now_s() - t0;
    if (n->g.timeout_s <= 0 || el <= n->g.timeout_s) return ZT_OK;
    abort_comm(n);
    return zt_fail(st, ZT_ECOMM, "NCCL %s on the %s group timed out after %.0f s%s%s%s: "
                   "a rank died or hangs (ztrain.comm_timeout_s); the communicator "
                   "was aborted", zt_comm_kind_name(kind), n->g.name, el, WHERE(&n->g));
}

/* Wait on the host until ev has completed, bounded by timeout_s, watching
 * NCCL's asynchronous errors; a failure aborts the communicator. */
static int host_wait(nccl_group *n, cudaEvent_t ev, int kind, zt_status *st) {
    const double t0 = zt_now_s();
    for (unsigned spins = 0;; spins++) {
        const cudaError_t e = cudaEventQuery(ev);
        /* "not ready" is not an error: never leave it for the CUDA
         * backend's next launch check to find */
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        if (e == cudaSuccess) return ZT_OK;
        if (e != cudaErrorNotReady) {
            const int rc = fail_cuda(n, kind, "waiting for completion", e, st);
            abort_comm(n);
            return rc;
        }
        if ((spins & 63) == 63) {
            ncclResult_t a = ncclSuccess;
            const ncclResult_t r = ncclCommGetAsyncError(n->nc, &a);
            if (r != ncclSuccess || (a != ncclSuccess && a != ncclInProgress)) {
                const int rc = fail_nccl(n, kind, r != ncclSuccess ? r : a, st);
                abort_comm(n);
                return rc;
            }
            ZT_TRY(bound(n, kind, t0, st));
        }
        if (spins >= 256) sched_yield();
    }
}

/* Blocking completion: compute waits for the result, and so does the host. */
static int end_blocking(nccl_group *n, int kind, zt_status *st) {
    cudaError_t e = cudaEventRecord(n->ev_done, n->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(n->compute, n->ev_done, 0);
    if (e != cudaSuccess) {
        const int rc = fail_cuda(n, kind, "ordering the compute stream after it", e, st);
        abort_comm(n);
        return rc;
    }
    ZT_TRY(host_wait(n, n->ev_done, kind, st));
    n->unconfirmed = 0;   /* everything queued before it has completed too */
    return ZT_OK;
}

/* NCCL's asynchronous errors so far (a query: no wait); one aborts the
 * communicator */
static int check_async(nccl_group *n, int kind, zt_status *st) {
    ncclResult_t a = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(n->nc, &a);
    if (r == ncclSuccess && (a == ncclSuccess || a == ncclInProgress)) return ZT_OK;
    const int rc = fail_nccl(n, kind, r != ncclSuccess ? r : a, st);
    abort_comm(n);
    return rc;
}

/* An event of the pool for a request: a free one, else a new one (the
 * pool grows as needed); NULL with the error in *e */
static cudaEvent_t pool_get(nccl_group *n, cudaError_t *e) {
    *e = cudaSuccess;
    if (n->ev_nfree > 0) return n->ev_free[--n->ev_nfree];
    if (n->ev_n == n->ev_cap) {
        const int cap = n->ev_cap ? 2 * n->ev_cap : 16;
        cudaEvent_t *all = realloc(n->ev_all, (size_t)cap * sizeof *all);
        if (all) n->ev_all = all;
        cudaEvent_t *fr = all ? realloc(n->ev_free, (size_t)cap * sizeof *fr) : NULL;
        if (fr) n->ev_free = fr;
        if (!all || !fr) {
            *e = cudaErrorMemoryAllocation;
            return NULL;
        }
        n->ev_cap = cap;
    }
    cudaEvent_t ev = NULL;
    if ((*e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess) return NULL;
    n->ev_all[n->ev_n++] = ev;
    return ev;
}

/* back to the pool (every pool event fits in ev_free) */
static void pool_put(nccl_group *n, cudaEvent_t ev) {
    n->ev_free[n->ev_nfree++] = ev;
}

/* Non-blocking completion: an event of the pool in r->impl. */
static int end_request(nccl_group *n, int kind, zt_request *r, zt_status *st) {
    cudaError_t e = cudaSuccess;
    cudaEvent_t ev = pool_get(n, &e);
    if (ev) e = cudaEventRecord(ev, n->stream);
    if (e != cudaSuccess) {
        if (ev) pool_put(n, ev);
        const int rc = fail_cuda(n, kind, "recording the completion event", e, st);
        abort_comm(n);
        return rc;
    }
    r->req = MPI_REQUEST_NULL;
    r->impl = ev;
    r->kind = kind;
    r->active = 1;
    n->unconfirmed++;
    n->last_kind = kind;
    snprintf(n->last_where, sizeof n->last_where, "%s", n->g.where);
    return ZT_OK;
}

static int bad_type(nccl_group *n, int kind, zt_dtype t, zt_status *st) {
    return zt_fail(st, ZT_EUNSUPPORTED, "NCCL %s on the %s group: element type %d is not supported",
                   zt_comm_kind_name(kind), n->g.name, (int)t);
}

static uint64_t others_bytes(zt_group *g, const int *counts, zt_dtype t) {
    uint64_t total = 0;
    for (int i = 0; i < g->size; ++i) total += (uint64_t)counts[i];
    return (total - (uint64_t)counts[g->rank]) * zt_dtype_size(t);
}

/* ------------------------------------------------------------ collectives */

/* An in-place all-reduce: queued on the communication stream, then
 * completed blocking (r NULL) or as a request (r). */
static int nc_allreduce(zt_group *g, void *buf, size_t n, zt_dtype t, ncclRedOp_t op,
                        zt_request *rq, zt_status *st) {
    nccl_group *ng = NG(g);
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_ALLREDUCE, t, st);
    ZT_TRY(begin(ng, ZT_COMM_ALLREDUCE, st));
    if (n) {
        const ncclResult_t r = ncclAllReduce(buf, buf, n, nt, op, ng->nc, ng->stream);
        if (r != ncclSuccess) return call_failed(ng, ZT_COMM_ALLREDUCE, r, st);
    }
    if (rq) ZT_TRY(end_request(ng, ZT_COMM_ALLREDUCE, rq, st));
    else ZT_TRY(end_blocking(ng, ZT_COMM_ALLREDUCE, st));
    g->calls[ZT_COMM_ALLREDUCE]++;
    if (g->size > 1)
        g->bytes[ZT_COMM_ALLREDUCE] +=
            2 * (uint64_t)n * zt_dtype_size(t) * (uint64_t)(g->size - 1) / (uint64_t)g->size;
    return ZT_OK;
}

static int nc_allreduce_sum(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return nc_allreduce(g, buf, n, t, ncclSum, NULL, st);
}
static int nc_allreduce_max(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return nc_allreduce(g, buf, n, t, ncclMax, NULL, st);
}
static int nc_iallreduce_sum(zt_group *g, void *buf, size_t n, zt_dtype t, zt_request *r,
                             zt_status *st) {
    return nc_allreduce(g, buf, n, t, ncclSum, r, st);
}

static int nc_bcast(zt_group *g, void *buf, size_t n, zt_dtype t, int root, zt_status *st) {
    nccl_group *ng = NG(g);
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_BCAST, t, st);
    ZT_TRY(begin(ng, ZT_COMM_BCAST, st));
    if (n) {
        const ncclResult_t r = ncclBroadcast(buf, buf, n, nt, root, ng->nc, ng->stream);
        if (r != ncclSuccess) return call_failed(ng, ZT_COMM_BCAST, r, st);
    }
    ZT_TRY(end_blocking(ng, ZT_COMM_BCAST, st));
    g->calls[ZT_COMM_BCAST]++;
    if (g->size > 1)
        g->bytes[ZT_COMM_BCAST] +=
            (uint64_t)n * zt_dtype_size(t) * (uint64_t)(g->size - 1) / (uint64_t)g->size;
    return ZT_OK;
}

/* NCCL has no barrier: a one-element all-reduce, waited for on the host. */
static int nc_barrier(zt_group *g, zt_status *st) {
    nccl_group *ng = NG(g);
    ZT_TRY(begin(ng, ZT_COMM_BCAST, st));
    const ncclResult_t r = ncclAllReduce(ng->d_one, ng->d_one, 1, ncclFloat32, ncclMax, ng->nc,
                                         ng->stream);
    if (r != ncclSuccess) return call_failed(ng, ZT_COMM_BCAST, r, st);
    return end_blocking(ng, ZT_COMM_BCAST, st);
}

/* Queue a reduce-scatter on the communication stream. */
static int enqueue_reduce_scatter(nccl_group *ng, const void *send, void *recv, const int *counts,
                                  zt_dtype t, zt_status *st) {
    zt_group *g = &ng->g;
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_REDUCE_SCATTER, t, st);
    ZT_TRY(begin(ng, ZT_COMM_REDUCE_SCATTER, st));
    const size_t es = zt_dtype_size(t);
    int equal = 1;
    size_t total = 0;
    for (int i = 0; i < g->size; i++) {
        if (counts[i] != counts[0]) equal = 0;
        total += (size_t)counts[i];
    }
    if (total == 0) return ZT_OK;
    ncclResult_t r;
    if (equal) {
        r = ncclReduceScatter(send, recv, (size_t)counts[0], nt, ncclSum, ng->nc, ng->stream);
    } else {
        /* uneven shards: one reduce per root, fused into one group launch */
        r = ncclGroupStart();
        size_t off = 0;
        for (int i = 0; i < g->size && r == ncclSuccess; i++) {
            if (counts[i] > 0)
                r = ncclReduce((const char *)send + off * es, recv, (size_t)counts[i], nt, ncclSum, i,
                               ng->nc, ng->stream);
            off += (size_t)counts[i];
        }
        const ncclResult_t r2 = ncclGroupEnd();
        if (r == ncclSuccess) r = r2;
    }
    if (r != ncclSuccess) return call_failed(ng, ZT_COMM_REDUCE_SCATTER, r, st);
    g->calls[ZT_COMM_REDUCE_SCATTER]++;
    if (g->size > 1) g->bytes[ZT_COMM_REDUCE_SCATTER] += others_bytes(g, counts, t);
    return ZT_OK;
}

static int nc_reduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                 zt_dtype t, zt_status *st) {
    ZT_TRY(enqueue_reduce_scatter(NG(g), send, recv, counts, t, st));
    return end_blocking(NG(g), ZT_COMM_REDUCE_SCATTER, st);
}

static int nc_ireduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                  zt_dtype t, zt_request *r, zt_status *st) {
    ZT_TRY(enqueue_reduce_scatter(NG(g), send, recv, counts, t, st));
    return end_request(NG(g), ZT_COMM_REDUCE_SCATTER, r, st);
}

/* Queue an in-place all-gather on the communication stream. */
static int enqueue_allgather(nccl_group *ng, void *buf, const int *counts, const int *displs,
                             zt_dtype t, zt_status *st) {
    zt_group *g = &ng->g;
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_ALLGATHER, t, st);
    ZT_TRY(begin(ng, ZT_COMM_ALLGATHER, st));
    const size_t es = zt_dtype_size(t);
    int regular = 1;
    size_t total = 0;
    for (int i = 0; i < g->size; i++) {
        if (counts[i] != counts[0] || (size_t)displs[i] != (size_t)i * (size_t)counts[0]) regular = 0;
        total += (size_t)counts[i];
    }
    if (total == 0) return ZT_OK;
    char *b = buf;
    ncclResult_t r;
    if (regular) {
        /* NCCL's in-place form: sendbuff = recvbuff + rank * count */
        r = ncclAllGather(b + (size_t)displs[g->rank] * es, b, (size_t)counts[0], nt, ng->nc,
                          ng->stream);
    } else {
        r = ncclGroupStart();
        for (int i = 0; i < g->size && r == ncclSuccess; i++)
            if (counts[i] > 0)
                r = ncclBroadcast(b + (size_t)displs[i] * es, b + (size_t)displs[i] * es,
                                  (size_t)counts[i], nt, i, ng->nc, ng->stream);
        const ncclResult_t r2 = ncclGroupEnd();
        if (r == ncclSuccess) r = r2;
    }
    if (r != ncclSuccess) return call_failed(ng, ZT_COMM_ALLGATHER, r, st);
    g->calls[ZT_COMM_ALLGATHER]++;
    if (g->size > 1) g->bytes[ZT_COMM_ALLGATHER] += others_bytes(g, counts, t);
    return ZT_OK;
}

static int nc_allgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                zt_dtype t, zt_status *st) {
    ZT_TRY(enqueue_allgather(NG(g), buf, counts, displs, t, st));
    return end_blocking(NG(g), ZT_COMM_ALLGATHER, st);
}

static int nc_iallgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                 zt_dtype t, zt_request *r, zt_status *st) {
    ZT_TRY(enqueue_allgather(NG(g), buf, counts, displs, t, st));
    return end_request(NG(g), ZT_COMM_ALLGATHER, r, st);
}

/* All-to-all: NCCL has none; one ncclSend and one ncclRecv per peer in one
 * group launch (the chunk to itself is a device copy on the same stream). */
static int nc_alltoall(zt_group *g, const void *send, void *recv, size_t count, zt_dtype t,
                       zt_status *st) {
    nccl_group *ng = NG(g);
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_ALLTOALL, t, st);
    ZT_TRY(begin(ng, ZT_COMM_ALLTOALL, st));
    const size_t cb = count * zt_dtype_size(t);
    if (count) {
        const char *s = send;
        char *d = recv;
        const cudaError_t e = cudaMemcpyAsync(d + (size_t)g->rank * cb, s + (size_t)g->rank * cb, cb,
                                              cudaMemcpyDeviceToDevice, ng->stream);
        if (e != cudaSuccess) return fail_cuda(ng, ZT_COMM_ALLTOALL, "cudaMemcpyAsync", e, st);
        ncclResult_t r = ncclGroupStart();
        for (int i = 0; i < g->size && r == ncclSuccess; i++) {
            if (i == g->rank) continue;
            r = ncclSend(s + (size_t)i * cb, count, nt, i, ng->nc, ng->stream);
            if (r == ncclSuccess) r = ncclRecv(d + (size_t)i * cb, count, nt, i, ng->nc, ng->stream);
        }
        const ncclResult_t r2 = ncclGroupEnd();
        if (r == ncclSuccess) r = r2;
        if (r != ncclSuccess) return call_failed(ng, ZT_COMM_ALLTOALL, r, st);
    }
    ZT_TRY(end_blocking(ng, ZT_COMM_ALLTOALL, st));
    g->calls[ZT_COMM_ALLTOALL]++;
    g->bytes[ZT_COMM_ALLTOALL] += (uint64_t)(g->size - 1) * (uint64_t)cb;
    return ZT_OK;
}

/* All-to-all of variable counts: as nc_alltoall, one ncclSend / ncclRecv
 * per peer with a nonzero count in one group launch, the span to itself a
 * device copy on the communication stream. */
static int nc_alltoallv(zt_group *g, const void *send, const size_t *scounts,
                        const size_t *sdispls, void *recv, const size_t *rcounts,
                        const size_t *rdispls, zt_dtype t, zt_status *st) {
    nccl_group *ng = NG(g);
    const int P = g->size, R = g->rank;
    ncclDataType_t nt;
    if (!nccl_type(t, &nt)) return bad_type(ng, ZT_COMM_ALLTOALL, t, st);
    ZT_CHECK(scounts && sdispls && rcounts && rdispls, st);
    if (scounts[R] != rcounts[R])
        return zt_fail(st, ZT_EINVAL, "all-to-all on the %s group%s%s%s: rank %d sends %zu elements "
                       "to itself but expects to receive %zu", g->name, WHERE(g), R, scounts[R],
                       rcounts[R]);
    ZT_TRY(begin(ng, ZT_COMM_ALLTOALL, st));
    const size_t es = zt_dtype_size(t);
    const char *s = send;
    char *d = recv;
    uint64_t sent = 0;
    if (scounts[R]) {
        const cudaError_t e = cudaMemcpyAsync(d + rdispls[R] * es, s + sdispls[R] * es, scounts[R] * es,
                                              cudaMemcpyDeviceToDevice, ng->stream);
        if (e != cudaSuccess) return fail_cuda(ng, ZT_COMM_ALLTOALL, "cudaMemcpyAsync", e, st);
    }
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < P && r == ncclSuccess; i++) {
        if (i == R) continue;
        if (scounts[i]) r = ncclSend(s + sdispls[i] * es, scounts[i], nt, i, ng->nc, ng->stream);
        if (r == ncclSuccess && rcounts[i])
            r = ncclRecv(d + rdispls[i] * es, rcounts[i], nt, i, ng->nc, ng->stream);
        sent += (uint64_t)scounts[i] * es;
    }
    const ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) return call_failed(ng, ZT_COMM_ALLTOALL, r, st);
    ZT_TRY(end_blocking(ng, ZT_COMM_ALLTOALL, st));
    g->calls[ZT_COMM_ALLTOALL]++;
    g->bytes[ZT_COMM_ALLTOALL] += sent;
    return ZT_OK;
}

static int nc_wait(zt_group *g, zt_request *r, zt_status *st) {
    nccl_group *ng = NG(g);
    if (!r->active) return ZT_OK;
    r->active = 0;
    cudaEvent_t ev = (cudaEvent_t)r->impl;
    r->impl = NULL;
    if (!ev) return ZT_OK;
    /* a stream wait only: the kernels queued next run after the transfer;
     * the host confirms it at the next fence (or blocking collective) */
    int rc = alive(ng, r->kind, st);
    if (rc == ZT_OK) rc = check_async(ng, r->kind, st);
    if (rc == ZT_OK) {
        const cudaError_t e = cudaStreamWaitEvent(ng->compute, ev, 0);
        if (e != cudaSuccess) {
            rc = fail_cuda(ng, r->kind, "ordering the compute stream after it", e, st);
            abort_comm(ng);
        }
    }
    pool_put(ng, ev);   /* reusable now: the stream wait keeps the record it waits for */
    return rc;
}

/* The host confirms the collectives waited for on the stream: the compute
 * stream waits for everything queued on the communication stream, and the
 * host for the compute stream's point (one bounded poll, which also covers
 * the kernels queued so far: the caller's read after it does not wait
 * again).  Nothing unconfirmed: no wait. */
static int fence_wait(nccl_group *ng, int kind, zt_status *st) {
    ZT_TRY(alive(ng, kind, st));
    cudaError_t e = cudaEventRecord(ng->ev_done, ng->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(ng->compute, ng->ev_done, 0);
    if (e == cudaSuccess) e = cudaEventRecord(ng->ev_fence, ng->compute);
    if (e != cudaSuccess) {
        const int rc = fail_cuda(ng, kind, "ordering the compute stream after it", e, st);
        abort_comm(ng);
        return rc;
    }
    ZT_TRY(host_wait(ng, ng->ev_fence, kind, st));
    ng->unconfirmed = 0;
    return ZT_OK;
}

static int nc_fence(zt_group *g, zt_status *st) {
    nccl_group *ng = NG(g);
    if (!ng->unconfirmed) return ZT_OK;
    /* the messages name the last collective waited for on the stream */
    char where[sizeof g->where];
    memcpy(where, g->where, sizeof where);
    snprintf(g->where, sizeof g->where, "%s", ng->last_where);
    const int rc = fence_wait(ng, ng->last_kind, st);
    memcpy(g->where, where, sizeof where);
    return rc;
}

/* fence()'s checks without its wait, for a host waiting for a copy queued
 * after the collectives (mesh.c zt_mesh_copy_wait): NCCL's asynchronous
 * errors and the bound from t0, named as at the fence.  The collectives
 * stay unconfirmed (the copy may come before some of them). */
static int nc_poll(zt_group *g, double t0, zt_status *st) {
    nccl_group *ng = NG(g);
    if (!ng->unconfirmed) return ZT_OK;
    char where[sizeof g->where];
    memcpy(where, g->where, sizeof where);
    snprintf(g->where, sizeof g->where, "%s", ng->last_where);
    int rc = alive(ng, ng->last_kind, st);
    if (rc == ZT_OK) rc = check_async(ng, ng->last_kind, st);
    if (rc == ZT_OK) rc = bound(ng, ng->last_kind, t0, st);
    memcpy(g->where, where, sizeof where);
    return rc;
}

static void nc_destroy(zt_group *g) {
    nccl_group *ng = NG(g);
    if (ng->nc && !ng->dead) {
        cudaStreamSynchronize(ng->stream);
        ncclCommDestroy(ng->nc);
    }
    ng->nc = NULL;
    if (ng->ev_ready) cudaEventDestroy(ng->ev_ready);
    if (ng->ev_done) cudaEventDestroy(ng->ev_done);
    if (ng->ev_fence) cudaEventDestroy(ng->ev_fence);
    if (ng->stream) cudaStreamDestroy(ng->stream);
    if (ng->d_one) cudaFree(ng->d_one);
    for (int i = 0; i < ng->ev_n; i++) cudaEventDestroy(ng->ev_all[i]);
    free(ng->ev_all);
    free(ng->ev_free);
    ng->ev_all = ng->ev_free = NULL;
    ng->ev_n = ng->ev_nfree = ng->ev_cap = 0;
    ng->ev_ready = ng->ev_done = ng->ev_fence = NULL;
    ng->stream = NULL;
    ng->d_one = NULL;
}

static const zt_comm_ops nccl_ops = {
    "nccl", nc_allreduce_sum, nc_allreduce_max, nc_bcast, nc_barrier,
    nc_reduce_scatter_sum, nc_allgather_inplace, nc_iallgather_inplace, nc_wait,
    nc_ireduce_scatter_sum, nc_destroy, nc_alltoall, nc_alltoallv, nc_fence, nc_iallreduce_sum,
    nc_poll,
};

/* ------------------------------------------------------------ creation */

/* CUDA resources of the group; 0 or the failing call's error */
static cudaError_t make_cuda(nccl_group *ng) {
    int lo = 0, hi = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&lo, &hi);
    if (e != cudaSuccess) return e;
    /* hi is the greatest priority: communication kernels start promptly
     * next to long compute kernels */
    if ((e = cudaStreamCreateWithPriority(&ng->stream, cudaStreamNonBlocking, hi)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&ng->ev_ready, cudaEventDisableTiming)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&ng->ev_done, cudaEventDisableTiming)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&ng->ev_fence, cudaEventDisableTiming)) != cudaSuccess) return e;
    if ((e = cudaMalloc((void **)&ng->d_one, sizeof(float))) != cudaSuccess) return e;
    return cudaMemset(ng->d_one, 0, sizeof(float));
}

int zt_group_nccl(zt_group *mpi_parent, const char *name, int device, zt_group **out,
                  zt_status *st) {
    *out = NULL;
    ZT_CHECK(mpi_parent != NULL && mpi_parent->ops != NULL, st);
    if (strcmp(mpi_parent->ops->name, "mpi") != 0)
        return zt_fail(st, ZT_EINVAL, "NCCL %s group: the parent group must be an MPI group, not %s",
                       name, mpi_parent->ops->name);
    cudaStream_t compute = (cudaStream_t)zt_cuda_compute_stream();
    if (!compute)
        return zt_fail(st, ZT_EINVAL, "NCCL %s group: the CUDA backend is not set up "
                       "(zt_backend_cuda() first)", name);
    if (device != zt_cuda_device())
        return zt_fail(st, ZT_EINVAL, "NCCL %s group on device %d, but the CUDA backend runs on "
                       "device %d", name, device, zt_cuda_device());
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return zt_fail(st, ZT_ECOMM, "NCCL %s group: cudaSetDevice(%d): %s", name, device,
                       cudaGetErrorString(e));
    }

    /* the unique id: made on rank 0, broadcast with a bounded wait */
    struct { int32_t ok; ncclUniqueId id; } msg;
    memset(&msg, 0, sizeof msg);
    ncclResult_t r0 = ncclSuccess;
    if (mpi_parent->rank == 0) {
        r0 = ncclGetUniqueId(&msg.id);
        msg.ok = r0 == ncclSuccess;
    }
    ZT_TRY(mpi_parent->ops->bcast(mpi_parent, &msg, sizeof msg, ZT_U8, 0, st));
    if (!msg.ok)
        return zt_fail(st, ZT_ECOMM, "NCCL %s group: ncclGetUniqueId failed on rank 0%s%s", name,
                       mpi_parent->rank == 0 ? ": " : "",
                       mpi_parent->rank == 0 ? ncclGetErrorString(r0) : "");

    nccl_group *ng = calloc(1, sizeof *ng);
    if (!ng) return zt_fail(st, ZT_ENOMEM, "out of memory (NCCL %s group)", name);
    ng->g.ops = &nccl_ops;
    ng->g.name = name;
    ng->g.rank = mpi_parent->rank;
    ng->g.size = mpi_parent->size;
    ng->g.timeout_s = mpi_parent->timeout_s;
    ng->g.comm = MPI_COMM_NULL;
    ng->device = device;
    ng->compute = compute;

    int rc = ZT_OK;
    if ((e = make_cuda(ng)) != cudaSuccess) {
        (void)cudaGetLastError();
        rc = zt_fail(st, ZT_ECOMM, "NCCL %s group: CUDA setup on device %d: %s", name, device,
                     cudaGetErrorString(e));
    }
    /* every rank has its CUDA resources before anyone enters the NCCL init */
    int32_t bad = rc != ZT_OK;
    zt_status tmp;
    zt_status_clear(&tmp);
    if (mpi_parent->ops->allreduce_max(mpi_parent, &bad, 1, ZT_I32, &tmp) != ZT_OK) {
        if (rc == ZT_OK) rc = zt_fail(st, tmp.code, "%s", tmp.msg);
        bad = 1;
    }
    if (bad && rc == ZT_OK)
        rc = zt_fail(st, ZT_ECOMM, "NCCL %s group: CUDA setup failed on another rank", name);
    if (rc == ZT_OK) {
        const ncclResult_t r = ncclCommInitRank(&ng->nc, ng->g.size, msg.id, ng->g.rank);
        if (r != ncclSuccess) {
            const char *last = ncclGetLastError(NULL);
            ng->nc = NULL;
            rc = zt_fail(st, ZT_ECOMM, "NCCL %s group: ncclCommInitRank (rank %d of %d, device %d) "
                         "failed: %s%s%s", name, ng->g.rank, ng->g.size, device,
                         ncclGetErrorString(r), last && *last ? ": " : "", last && *last ? last : "");
        }
        /* all ranks agree on the outcome (bounded) */
        bad = rc != ZT_OK;
        zt_status_clear(&tmp);
        if (mpi_parent->ops->allreduce_max(mpi_parent, &bad, 1, ZT_I32, &tmp) != ZT_OK) {
            if (rc == ZT_OK) rc = zt_fail(st, tmp.code, "%s", tmp.msg);
        } else if (bad && rc == ZT_OK) {
            rc = zt_fail(st, ZT_ECOMM, "NCCL %s group: ncclCommInitRank failed on another rank", name);
        }
    }
    if (rc == ZT_OK && MPI_Comm_dup(mpi_parent->comm, &ng->g.comm) != MPI_SUCCESS)
        rc = zt_fail(st, ZT_ECOMM, "NCCL %s group: MPI_Comm_dup failed", name);
    if (rc != ZT_OK) {
        if (ng->nc) ncclCommAbort(ng->nc);
        ng->nc = NULL;
        ng->dead = 1;
        nc_destroy(&ng->g);
        free(ng);
        return rc;
    }
    MPI_Comm_set_errhandler(ng->g.comm, MPI_ERRORS_RETURN);
    *out = &ng->g;
    return ZT_OK;
}
