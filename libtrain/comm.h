/*
 * comm.h -- the communication interface.
 *
 * Collectives on a group of ranks (world, shard group, replica group), typed,
 * blocking and non-blocking, with byte accounting per kind.  One interface,
 * several backends: MPI on host buffers (comm.c) now; NCCL later.  Every
 * call returns a zt_code and fills zt_status on failure.  Every wait is
 * bounded by the group's timeout: a peer that died or hangs turns into an
 * error naming the operation and the caller's context (step, unit), never a
 * silent hang.
 */
#ifndef ZT_COMM_H
#define ZT_COMM_H
#include <mpi.h>
#include "internal.h"

/* Element types.  ZT_BF16 / ZT_F16 are 16-bit storage (bfloat16, IEEE
 * binary16) held in uint16_t; sums over them accumulate in fp32. */
typedef enum zt_dtype { ZT_F32 = 0, ZT_F64, ZT_I32, ZT_I64, ZT_U8, ZT_BF16, ZT_F16 } zt_dtype;
size_t zt_dtype_size(zt_dtype t);

typedef enum zt_comm_kind {
    ZT_COMM_ALLREDUCE = 0,
    ZT_COMM_REDUCE_SCATTER,
    ZT_COMM_ALLGATHER,
    ZT_COMM_BCAST,
    ZT_COMM_NKINDS
} zt_comm_kind;
const char *zt_comm_kind_name(int kind);

typedef struct zt_group zt_group;

/* A pending non-blocking collective. */
typedef struct zt_request {
    MPI_Request req;   /* MPI backend */
    void *impl;        /* other backends (e.g. a CUDA event) */
    int kind;
    int active;
} zt_request;

typedef struct zt_comm_ops {
    const char *name;
    /* in-place sum / max over the group */
    int (*allreduce_sum)(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st);
    int (*allreduce_max)(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st);
    int (*bcast)(zt_group *g, void *buf, size_t n, zt_dtype t, int root, zt_status *st);
    int (*barrier)(zt_group *g, zt_status *st);
    /* reduce-scatter: send[sum(counts)] summed over the group; rank i
     * receives elements [displ_i, displ_i + counts[i]) into recv
     * (displ_i = counts[0] + ... + counts[i-1]). */
    int (*reduce_scatter_sum)(zt_group *g, const void *send, void *recv,
                              const int *counts, zt_dtype t, zt_status *st);
    /* in-place all-gather: rank i's counts[i] elements already sit at
     * buf + displs[i]; afterwards every rank has all of them. */
    int (*allgather_inplace)(zt_group *g, void *buf, const int *counts,
                             const int *displs, zt_dtype t, zt_status *st);
    /* non-blocking form of allgather_inplace; finish with wait */
    int (*iallgather_inplace)(zt_group *g, void *buf, const int *counts,
                              const int *displs, zt_dtype t, zt_request *r, zt_status *st);
    int (*wait)(zt_group *g, zt_request *r, zt_status *st);
} zt_comm_ops;

struct zt_group {
    const zt_comm_ops *ops;
    const char *name;                   /* "world", "shard", "replica" */
    int rank, size;
    MPI_Comm comm;                      /* MPI backend */
    double timeout_s;                   /* bound on every wait (<= 0: none) */
    char where[128];                    /* caller's context for error messages */
    uint64_t bytes[ZT_COMM_NKINDS];     /* bytes sent by this rank, per kind */
    uint64_t calls[ZT_COMM_NKINDS];
};

/* A group over MPI (duplicates comm). */
int zt_group_mpi(MPI_Comm comm, const char *name, double timeout_s, zt_group **out,
                 zt_status *st);
/* Split a group: ranks with equal color form a group, ordered by key. */
int zt_group_split(zt_group *parent, int color, int key, const char *name,
                   zt_group **out, zt_status *st);
void zt_group_free(zt_group *g);
/* Set the context shown in error messages ("step 12, unit block.3"). */
void zt_group_where(zt_group *g, const char *fmt, ...) ZT_PRINTF(2, 3);

#endif
