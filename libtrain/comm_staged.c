/*
 * comm_staged.c -- the MPI backend on device buffers, staged through host
 * memory (comm.h: zt_group_host_staged).
 *
 * Each collective copies its device operands to a host buffer with the
 * backend's to_host (which waits for the kernels queued before it), runs
 * the MPI collective of an inner MPI group on the host buffer, and copies
 * the result back with to_device.  Byte accounting, timeouts and error
 * messages are the MPI backend's: the inner group's counters are added to
 * this group's after each call, and its timeout and `where` follow this
 * group's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "comm.h"

typedef struct staged_group {
    zt_group g;              /* first: a zt_group * is a staged_group * */
    zt_group *mpi;           /* the MPI group doing the work */
    const zt_backend *be;
    void *stage;             /* host buffer of the blocking collectives */
    size_t stage_bytes;
} staged_group;

/* r->impl of a non-blocking collective */
typedef struct staged_req {
    zt_request inner;
    char *host;              /* host copy (zt_mem_alloc, ZT_MEM_COMM | ZT_MEM_HOST) */
    void *dev;               /* result destination on the device */
    size_t res_off, res_bytes;  /* result = host[res_off, res_off + res_bytes) */
} staged_req;

static staged_group *SG(zt_group *g) { return (staged_group *)g; }

/* the inner group follows this one's timeout and context */
static void pre(staged_group *s) {
    s->mpi->timeout_s = s->g.timeout_s;
    memcpy(s->mpi->where, s->g.where, sizeof s->mpi->where);
}

typedef struct { uint64_t bytes[ZT_COMM_NKINDS], calls[ZT_COMM_NKINDS]; } counters;
static counters snap(staged_group *s) {
    counters c;
    memcpy(c.bytes, s->mpi->bytes, sizeof c.bytes);
    memcpy(c.calls, s->mpi->calls, sizeof c.calls);
    return c;
}
static void post(staged_group *s, const counters *c) {
    for (int k = 0; k < ZT_COMM_NKINDS; k++) {
        s->g.bytes[k] += s->mpi->bytes[k] - c->bytes[k];
        s->g.calls[k] += s->mpi->calls[k] - c->calls[k];
    }
}

/* a failure of the backend's copies (cuda records them) */
static int copies_ok(staged_group *s, int kind, zt_status *st) {
    const char *e = s->be->error ? s->be->error() : NULL;
    if (!e) return ZT_OK;
    return zt_fail(st, ZT_ECOMM, "host-staged %s on the %s group: device copy failed: %s",
                   zt_comm_kind_name(kind), s->g.name, e);
}

static int ensure(staged_group *s, size_t bytes, zt_status *st) {
    if (bytes <= s->stage_bytes && s->stage) return ZT_OK;
    zt_mem_free(s->stage);
    s->stage = NULL;
    s->stage_bytes = 0;
    s->stage = zt_mem_alloc(bytes ? bytes : 1, ZT_MEM_COMM | ZT_MEM_HOST, st);
    if (!s->stage) return zt_fail_prefix(st, "host staging buffer of the %s group", s->g.name);
    s->stage_bytes = bytes;
    return ZT_OK;
}

static size_t extent(const int *counts, const int *displs, int n) {
    size_t e = 0;
    for (int i = 0; i < n; i++) {
        const size_t end = (size_t)displs[i] + (size_t)counts[i];
        if (counts[i] > 0 && end > e) e = end;
    }
    return e;
}
static size_t total(const int *counts, int n) {
    size_t t = 0;
    for (int i = 0; i < n; i++) t += (size_t)counts[i];
    return t;
}

static int st_allreduce(zt_group *g, void *buf, size_t n, zt_dtype t, int max, zt_status *st) {
    staged_group *s = SG(g);
    const size_t b = n * zt_dtype_size(t);
    ZT_TRY(ensure(s, b, st));
    s->be->to_host(s->stage, buf, b);
    ZT_TRY(copies_ok(s, ZT_COMM_ALLREDUCE, st));
    pre(s);
    counters c = snap(s);
    int rc = max ? s->mpi->ops->allreduce_max(s->mpi, s->stage, n, t, st)
                 : s->mpi->ops->allreduce_sum(s->mpi, s->stage, n, t, st);
    post(s, &c);
    ZT_TRY(rc);
    s->be->to_device(buf, s->stage, b);
    return copies_ok(s, ZT_COMM_ALLREDUCE, st);
}
static int st_allreduce_sum(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return st_allreduce(g, buf, n, t, 0, st);
}
static int st_allreduce_max(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st) {
    return st_allreduce(g, buf, n, t, 1, st);
}

static int st_bcast(zt_group *g, void *buf, size_t n, zt_dtype t, int root, zt_status *st) {
    staged_group *s = SG(g);
    const size_t b = n * zt_dtype_size(t);
    ZT_TRY(ensure(s, b, st));
    if (g->rank == root) {
        s->be->to_host(s->stage, buf, b);
        ZT_TRY(copies_ok(s, ZT_COMM_BCAST, st));
    }
    pre(s);
    counters c = snap(s);
    int rc = s->mpi->ops->bcast(s->mpi, s->stage, n, t, root, st);
    post(s, &c);
    ZT_TRY(rc);
    if (g->rank != root) s->be->to_device(buf, s->stage, b);
    return copies_ok(s, ZT_COMM_BCAST, st);
}

static int st_barrier(zt_group *g, zt_status *st) {
    staged_group *s = SG(g);
    s->be->synchronize();
    pre(s);
    return s->mpi->ops->barrier(s->mpi, st);
}

static int st_reduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                 zt_dtype t, zt_status *st) {
    staged_group *s = SG(g);
    const size_t es = zt_dtype_size(t), tb = total(counts, g->size) * es;
    const size_t rb = (size_t)counts[g->rank] * es;
    ZT_TRY(ensure(s, tb + rb, st));
    char *h = s->stage;
    s->be->to_host(h, send, tb);
    ZT_TRY(copies_ok(s, ZT_COMM_REDUCE_SCATTER, st));
    pre(s);
    counters c = snap(s);
    int rc = s->mpi->ops->reduce_scatter_sum(s->mpi, h, h + tb, counts, t, st);
    post(s, &c);
    ZT_TRY(rc);
    s->be->to_device(recv, h + tb, rb);
    return copies_ok(s, ZT_COMM_REDUCE_SCATTER, st);
}

static int st_allgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                zt_dtype t, zt_status *st) {
    staged_group *s = SG(g);
    const size_t b = extent(counts, displs, g->size) * zt_dtype_size(t);
    ZT_TRY(ensure(s, b, st));
    s->be->to_host(s->stage, buf, b);
    ZT_TRY(copies_ok(s, ZT_COMM_ALLGATHER, st));
    pre(s);
    counters c = snap(s);
    int rc = s->mpi->ops->allgather_inplace(s->mpi, s->stage, counts, displs, t, st);
    post(s, &c);
    ZT_TRY(rc);
    s->be->to_device(buf, s->stage, b);
    return copies_ok(s, ZT_COMM_ALLGATHER, st);
}

static staged_req *new_req(size_t host_bytes, zt_status *st) {
    staged_req *q = calloc(1, sizeof *q);
    if (!q) {
        zt_fail(st, ZT_ENOMEM, "out of memory (host-staged request)");
        return NULL;
    }
    q->host = zt_mem_alloc(host_bytes ? host_bytes : 1, ZT_MEM_COMM | ZT_MEM_HOST, st);
    if (!q->host) {
        free(q);
        return NULL;
    }
    return q;
}
static void free_req(staged_req *q) {
    if (!q) return;
    zt_mem_free(q->host);
    free(q);
}

static int st_iallgather_inplace(zt_group *g, void *buf, const int *counts, const int *displs,
                                 zt_dtype t, zt_request *r, zt_status *st) {
    staged_group *s = SG(g);
    const size_t b = extent(counts, displs, g->size) * zt_dtype_size(t);
    staged_req *q = new_req(b, st);
    if (!q) return st ? st->code : ZT_ENOMEM;
    s->be->to_host(q->host, buf, b);
    int rc = copies_ok(s, ZT_COMM_ALLGATHER, st);
    if (rc == ZT_OK) {
        pre(s);
        counters c = snap(s);
        rc = s->mpi->ops->iallgather_inplace(s->mpi, q->host, counts, displs, t, &q->inner, st);
        post(s, &c);
    }
    if (rc != ZT_OK) {
        free_req(q);
        return rc;
    }
    q->dev = buf;
    q->res_off = 0;
    q->res_bytes = b;
    r->req = MPI_REQUEST_NULL;
    r->impl = q;
    r->kind = ZT_COMM_ALLGATHER;
    r->active = 1;
    return ZT_OK;
}

static int st_ireduce_scatter_sum(zt_group *g, const void *send, void *recv, const int *counts,
                                  zt_dtype t, zt_request *r, zt_status *st) {
    staged_group *s = SG(g);
    const size_t es = zt_dtype_size(t), tb = total(counts, g->size) * es;
    const size_t rb = (size_t)counts[g->rank] * es;
    staged_req *q = new_req(tb + rb, st);
    if (!q) return st ? st->code : ZT_ENOMEM;
    s->be->to_host(q->host, send, tb);
    int rc = copies_ok(s, ZT_COMM_REDUCE_SCATTER, st);
    if (rc == ZT_OK) {
        pre(s);
        counters c = snap(s);
        rc = s->mpi->ops->ireduce_scatter_sum(s->mpi, q->host, q->host + tb, counts, t, &q->inner, st);
        post(s, &c);
    }
    if (rc != ZT_OK) {
        free_req(q);
        return rc;
    }
    q->dev = recv;
    q->res_off = tb;
    q->res_bytes = rb;
    r->req = MPI_REQUEST_NULL;
    r->impl = q;
    r->kind = ZT_COMM_REDUCE_SCATTER;
    r->active = 1;
    return ZT_OK;
}

static int st_wait(zt_group *g, zt_request *r, zt_status *st) {
    staged_group *s = SG(g);
    if (!r->active) return ZT_OK;
    staged_req *q = r->impl;
    r->active = 0;
    r->impl = NULL;
    if (!q) return ZT_OK;
    pre(s);
    int rc = s->mpi->ops->wait(s->mpi, &q->inner, st);
    if (rc == ZT_OK) {
        s->be->to_device(q->dev, q->host + q->res_off, q->res_bytes);
        rc = copies_ok(s, r->kind, st);
    }
    free_req(q);
    return rc;
}

static int st_alltoall(zt_group *g, const void *send, void *recv, size_t count, zt_dtype t,
                       zt_status *st) {
    staged_group *s = SG(g);
    const size_t b = (size_t)g->size * count * zt_dtype_size(t);
    ZT_TRY(ensure(s, 2 * b, st));
    char *h = s->stage;
    s->be->to_host(h, send, b);
    ZT_TRY(copies_ok(s, ZT_COMM_ALLTOALL, st));
    pre(s);
    counters c = snap(s);
    int rc = s->mpi->ops->alltoall(s->mpi, h, h + b, count, t, st);
    post(s, &c);
    ZT_TRY(rc);
    s->be->to_device(recv, h + b, b);
    return copies_ok(s, ZT_COMM_ALLTOALL, st);
}

/* Only the spans counts/displs name travel: the send spans are packed
 * one after another into the staging buffer, the receive spans land packed
 * after them, and each is copied back to its place. */
static int st_alltoallv(zt_group *g, const void *send, const size_t *scounts,
                        const size_t *sdispls, void *recv, const size_t *rcounts,
                        const size_t *rdispls, zt_dtype t, zt_status *st) {
    staged_group *s = SG(g);
    const int P = g->size;
    const size_t es = zt_dtype_size(t);
    ZT_CHECK(es > 0 && scounts && sdispls && rcounts && rdispls, st);
    size_t *pk = malloc(2 * (size_t)P * sizeof *pk);   /* packed displacements */
    if (!pk) return zt_fail(st, ZT_ENOMEM, "out of memory (host-staged all-to-all)");
    size_t ns = 0, nr = 0, lim = SIZE_MAX / es;
    int rc = ZT_OK;
    for (int j = 0; j < P; j++) {
        pk[j] = ns;
        pk[P + j] = nr;
        if (scounts[j] > lim - ns - nr || rcounts[j] > lim - ns - nr - scounts[j]) {
            rc = zt_fail(st, ZT_EINVAL, "host-staged all-to-all on the %s group: the counts add up "
                         "to more than memory holds", g->name);
            break;
        }
        ns += scounts[j];
        nr += rcounts[j];
    }
    if (rc == ZT_OK) rc = ensure(s, (ns + nr) * es, st);
    char *h = s->stage;
    for (int j = 0; j < P && rc == ZT_OK; j++)
        if (scounts[j])
            s->be->to_host(h + pk[j] * es, (const char *)send + sdispls[j] * es, scounts[j] * es);
    if (rc == ZT_OK) rc = copies_ok(s, ZT_COMM_ALLTOALL, st);
    if (rc == ZT_OK) {
        pre(s);
        counters c = snap(s);
        rc = s->mpi->ops->alltoallv(s->mpi, h, scounts, pk, h + ns * es, rcounts, pk + P, t, st);
        post(s, &c);
    }
    for (int j = 0; j < P && rc == ZT_OK; j++)
        if (rcounts[j])
            s->be->to_device((char *)recv + rdispls[j] * es, h + (ns + pk[P + j]) * es,
                             rcounts[j] * es);
    free(pk);
    ZT_TRY(rc);
    return copies_ok(s, ZT_COMM_ALLTOALL, st);
}

static void st_destroy(zt_group *g) {
    staged_group *s = SG(g);
    zt_group_free(s->mpi);
    s->mpi = NULL;
    zt_mem_free(s->stage);
    s->stage = NULL;
}

static const zt_comm_ops staged_ops = {
    "mpi-host-staged", st_allreduce_sum, st_allreduce_max, st_bcast, st_barrier,
    st_reduce_scatter_sum, st_allgather_inplace, st_iallgather_inplace, st_wait,
    st_ireduce_scatter_sum, st_destroy, st_alltoall, st_alltoallv, NULL, NULL, NULL,
};

int zt_group_host_staged(zt_group *mpi_parent, const char *name, const zt_backend *be,
                         zt_group **out, zt_status *st) {
    *out = NULL;
    ZT_CHECK(mpi_parent != NULL && be != NULL && be->to_host && be->to_device && be->synchronize,
             st);
    zt_group *inner = NULL;
    ZT_TRY(zt_group_mpi(mpi_parent->comm, name, mpi_parent->timeout_s, &inner, st));
    staged_group *s = calloc(1, sizeof *s);
    MPI_Comm c = MPI_COMM_NULL;
    if (!s || MPI_Comm_dup(mpi_parent->comm, &c) != MPI_SUCCESS) {
        const int code = s ? ZT_ECOMM : ZT_ENOMEM;
        free(s);
        zt_group_free(inner);
        return zt_fail(st, code, "cannot create the host-staged %s group", name);
    }
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    s->g.ops = &staged_ops;
    s->g.name = name;
    s->g.rank = inner->rank;
    s->g.size = inner->size;
    s->g.comm = c;
    s->g.timeout_s = mpi_parent->timeout_s;
    s->mpi = inner;
    s->be = be;
    *out = &s->g;
    return ZT_OK;
}
