/*
 * comm.c -- MPI backend of the communication interface.
 * Byte accounting uses the bandwidth-optimal (ring) volume each rank sends:
 * all-reduce 2(N-1)/N x bytes, broadcast (N-1)/N x bytes (pipelined).
 */
#include <stdlib.h>
#include "comm.h"

size_t zt_dtype_size(zt_dtype t) {
    switch (t) {
    case ZT_F32: case ZT_I32: return 4;
    case ZT_F64: case ZT_I64: return 8;
    case ZT_U8: return 1;
    }
    return 0;
}

const char *zt_comm_kind_name(int kind) {
    static const char *n[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast"};
    return (kind >= 0 && kind < ZT_COMM_NKINDS) ? n[kind] : "?";
}

static MPI_Datatype mpi_type(zt_dtype t) {
    switch (t) {
    case ZT_F32: return MPI_FLOAT;
    case ZT_F64: return MPI_DOUBLE;
    case ZT_I32: return MPI_INT32_T;
    case ZT_I64: return MPI_INT64_T;
    case ZT_U8: return MPI_UINT8_T;
    }
    return MPI_DATATYPE_NULL;
}

static int mpi_err(zt_status *st, int rc, const char *op) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return zt_fail(st, ZT_ECOMM, "MPI %s failed: %s", op, s);
}

/* MPI counts are int: split large buffers. */
#define CHUNK ((size_t)1 << 30)

static int mpi_allreduce_op(zt_group *g, void *buf, size_t n, zt_dtype t,
                            MPI_Op op, zt_status *st) {
    size_t es = zt_dtype_size(t);
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t c = n - off < CHUNK ? n - off : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * es, (int)c,
                               mpi_type(t), op, g->comm);
        if (rc != MPI_SUCCESS) return mpi_err(st, rc, "all-reduce");
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
        int rc = MPI_Bcast((char *)buf + off * es, (int)c, mpi_type(t), root, g->comm);
        if (rc != MPI_SUCCESS) return mpi_err(st, rc, "broadcast");
    }
    g->calls[ZT_COMM_BCAST]++;
    if (g->size > 1)
        g->bytes[ZT_COMM_BCAST] += (uint64_t)n * es * (uint64_t)(g->size - 1) / (uint64_t)g->size;
    return ZT_OK;
}

static int mpi_barrier(zt_group *g, zt_status *st) {
    int rc = MPI_Barrier(g->comm);
    return rc == MPI_SUCCESS ? ZT_OK : mpi_err(st, rc, "barrier");
}

static const zt_comm_ops mpi_ops = {
    "mpi", mpi_allreduce_sum, mpi_allreduce_max, mpi_bcast, mpi_barrier,
};

int zt_group_mpi(MPI_Comm comm, zt_group **out, zt_status *st) {
    zt_group *g = calloc(1, sizeof *g);
    if (!g) return zt_fail(st, ZT_ENOMEM, "out of memory (comm group)");
    if (MPI_Comm_dup(comm, &g->comm) != MPI_SUCCESS) {
        free(g);
        return zt_fail(st, ZT_ECOMM, "MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    g->ops = &mpi_ops;
    *out = g;
    return ZT_OK;
}

void zt_group_free(zt_group *g) {
    if (!g) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&g->comm);
    free(g);
}
