/*
 * comm.h -- the communication interface.
 *
 * Collectives on a group of ranks (world, shard group, replica group), typed,
 * blocking and non-blocking, with byte accounting per kind.  One interface,
 * several backends: MPI on host buffers (comm.c), MPI on device buffers
 * staged through the host (comm_staged.c), NCCL on device buffers
 * (comm_nccl.c, built with --with-cuda when NCCL is found).  Every call
 * returns a zt_code and fills zt_status on failure.  Every wait is
 * bounded by the group's timeout: a peer that died or hangs turns into an
 * error naming the operation and the caller's context (step, unit), never a
 * silent hang.
 */
#ifndef ZT_COMM_H
#define ZT_COMM_H
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"   /* ZT_HAVE_CUDA, ZT_HAVE_NCCL */
#endif
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
    ZT_COMM_ALLTOALL,       /* alltoall (sequence parallelism) and alltoallv */
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
    /* non-blocking form of reduce_scatter_sum; finish with wait (send and
     * recv must not be touched before) */
    int (*ireduce_scatter_sum)(zt_group *g, const void *send, void *recv, const int *counts,
                               zt_dtype t, zt_request *r, zt_status *st);
    /* backend resources of g, released by zt_group_free before the MPI
     * communicator and g itself (NULL: nothing to release) */
    void (*destroy)(zt_group *g);
    /* all-to-all of equal chunks: send[size][count] -> recv[size][count];
     * chunk j of send goes to rank j, chunk i of recv came from rank i
     * (send and recv must not overlap).  Accounted bytes: every chunk but
     * its own, (size - 1) x count x element size. */
    int (*alltoall)(zt_group *g, const void *send, void *recv, size_t count, zt_dtype t,
                    zt_status *st);
    /* all-to-all of variable counts (elements): rank i sends scounts[j]
     * elements from send + sdispls[j] to rank j, and receives rcounts[j]
     * elements from rank j into recv + rdispls[j] (send and recv must not
     * overlap; every rank's rcounts[j] must equal rank j's scounts[i] -- the
     * caller agrees counts first).  Accounted bytes (ZT_COMM_ALLTOALL):
     * every element sent to another rank. */
    int (*alltoallv)(zt_group *g, const void *send, const size_t *scounts, const size_t *sdispls,
                     void *recv, const size_t *rcounts, const size_t *rdispls, zt_dtype t,
                     zt_status *st);
    /* where wait() only orders the device (NCCL), the host's bounded check
     * that the collectives waited for so far have completed: a hung or
     * failed one is reported here, as wait would have (NULL: every wait
     * already waited on the host, nothing to check) */
    int (*fence)(zt_group *g, zt_status *st);
    /* non-blocking form of allreduce_sum; finish with wait (NULL: the
     * backend has none, use allreduce_sum) */
    int (*iallreduce_sum)(zt_group *g, void *buf, size_t n, zt_dtype t, zt_request *r,
                          zt_status *st);
    /* where fence() exists: its checks without its wait, for a host that
     * waits for something queued after the collectives (a copy; mesh.h
     * zt_mesh_copy_wait) and polls this meanwhile: an asynchronous failure
     * of a collective not yet confirmed, or one still unconfirmed more
     * than timeout_s after t0 (zt_now_s() when the host began to wait), is
     * reported as fence() would (the communicator aborted); ZT_OK
     * otherwise (NULL: nothing to check) */
    int (*poll)(zt_group *g, double t0, zt_status *st);
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

/*
 * Device buffers through the MPI backend, staged through host memory: every
 * collective copies its device buffers to the host with be->to_host, runs
 * the MPI collective, and copies the result back with be->to_device.  For
 * debugging a GPU run against MPI, and for several ranks sharing one GPU
 * (where NCCL cannot be used).  Works with any backend table (with the cpu
 * backend the copies are plain memcpy).  Same ranks as `mpi_parent` (its
 * MPI communicator is duplicated), same byte accounting as MPI.
 */
struct zt_backend;
int zt_group_host_staged(zt_group *mpi_parent, const char *name, const struct zt_backend *be,
                         zt_group **out, zt_status *st);

#ifdef ZT_HAVE_NCCL
/*
 * The NCCL backend (libtrain/comm_nccl.c): collectives on DEVICE buffers of
 * the CUDA backend, over the same ranks as the MPI group `mpi_parent` (rank
 * i of the new group is rank i of mpi_parent; its MPI communicator is
 * duplicated, so zt_group_split on the result gives MPI groups: wrap those
 * with zt_group_nccl again for hybrid sharding).  Collective over
 * mpi_parent.
 *
 * The NCCL unique id is made on rank 0 and broadcast over mpi_parent (a
 * bounded wait); then cudaSetDevice(device) and ncclCommInitRank.  `device`
 * must be the CUDA backend's device (zt_backend_cuda() first; see
 * zt_cuda_pick_device in gpu.h).  One GPU per rank: ranks that share a GPU
 * must use zt_group_host_staged instead.
 *
 * Ordering: collectives run on the group's own communication stream.  Each
 * one first waits (an event) for everything already queued on the CUDA
 * backend's compute stream, so it sees what earlier kernels wrote.
 * Blocking collectives then make the compute stream wait for their result
 * and wait for it on the host too (bounded by timeout_s).
 * iallgather_inplace / ireduce_scatter_sum / iallreduce_sum return at once
 * with a request whose impl is the completion event, so the transfer
 * overlaps the kernels queued after it (ZeRO-3 prefetch, ZeRO-2/3 gradient
 * reduce-scatter; the engine's other collectives of a step are these
 * followed at once by wait, so that the host never waits for them);
 * wait() makes the compute stream wait on that event and returns (no host
 * wait; NCCL's asynchronous errors so far are checked).  fence() is the
 * host's check: it waits (bounded) until the compute stream has passed
 * everything queued so far, this group's collectives included; so does
 * the next blocking collective.  A timeout or an asynchronous NCCL error
 * aborts the communicator (every later call on the group fails at once)
 * and returns ZT_ECOMM naming the operation, the group and `where` (at a
 * fence: the last collective waited for on the stream).  poll() is the
 * fence's check without its wait (the asynchronous errors, the bound), for
 * a host that waits for a copy queued after the collectives.
 *
 * Types: F32, F64, I32, I64, U8, BF16, F16.  Sums of BF16/F16 are NCCL's:
 * each addition in fp32, rounded back to the 16-bit type (like the MPI
 * backend's pairwise sums; the order of additions differs).  Max of 16-bit
 * types is supported too (the MPI backend refuses it).
 */
int zt_group_nccl(zt_group *mpi_parent, const char *name, int device, zt_group **out,
                  zt_status *st);
#endif


#endif
