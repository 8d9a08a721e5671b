/*
 * comm.h -- the communication interface.
 *
 * Collectives on a group of ranks, typed, with byte accounting per kind.
 * One interface, several backends: MPI on host buffers (comm.c) now; NCCL
 * later.  Every call returns a zt_code and fills zt_status on failure.
 */
#ifndef ZT_COMM_H
#define ZT_COMM_H
#include <mpi.h>
#include "internal.h"

typedef enum zt_dtype { ZT_F32 = 0, ZT_F64, ZT_I32, ZT_I64, ZT_U8 } zt_dtype;
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

typedef struct zt_comm_ops {
    const char *name;
    /* in-place sum over the group */
    int (*allreduce_sum)(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st);
    /* max over the group (diagnostics, agreement) */
    int (*allreduce_max)(zt_group *g, void *buf, size_t n, zt_dtype t, zt_status *st);
    int (*bcast)(zt_group *g, void *buf, size_t n, zt_dtype t, int root, zt_status *st);
    int (*barrier)(zt_group *g, zt_status *st);
} zt_comm_ops;

struct zt_group {
    const zt_comm_ops *ops;
    int rank, size;
    MPI_Comm comm;                      /* MPI backend */
    uint64_t bytes[ZT_COMM_NKINDS];     /* bytes sent by this rank, per kind */
    uint64_t calls[ZT_COMM_NKINDS];
};

/* A group over MPI (duplicates comm).  */
int zt_group_mpi(MPI_Comm comm, zt_group **out, zt_status *st);
void zt_group_free(zt_group *g);

#endif
