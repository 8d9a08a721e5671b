/* runtime.h -- process runtime: MPI, topology, thread counts, signals. */
#ifndef ZT_RUNTIME_H
#define ZT_RUNTIME_H
#include <mpi.h>
#include "internal.h"

typedef struct zt_runtime {
    int initialized;
    int we_initialized_mpi;
    int rank, world;
    int local_rank, local_size;   /* ranks sharing this node */
    int node_cores;               /* online CPUs on this node */
    int node, n_nodes;            /* this rank's node (0-based, ordered by
                                     lowest rank) and the number of nodes */
    MPI_Comm world_comm;          /* duplicate of MPI_COMM_WORLD */
    MPI_Comm node_comm;
} zt_runtime;

/* The process-wide runtime (valid after zt_init). */
const zt_runtime *zt_rt(void);
/* Threads for compute on this rank: cfg value if > 0, else node cores divided
 * by the ranks on the node (at least 1). */
int zt_rt_default_threads(void);
/* Under Slurm (SLURM_PROCID set), check Slurm's task ids against MPI's.
 * Returns ZT_EINVAL with a message when they disagree, or when one of them
 * or ZTRAIN_GPU_BIND is not a value of its kind (zt_env_int / _choice). */
int zt_rt_check_slurm(zt_status *st);
/* Rank 0, after a preemption checkpoint is durable: requeue the Slurm job
 * (`scontrol requeue <job>`; an array task as <array job id>_<task id>) as
 * ztrain.requeue says -- auto: only when `scontrol show job` says Requeue=1;
 * true: whenever SLURM_JOB_ID is set; false: never.  One log line says what
 * was done (docs/checkpoints.md "Preemption"); nothing fails. */
void zt_rt_requeue(const zt_ctx *ctx);
/* The same from the ztrain.requeue mode ("auto", "true", "false"), its
 * lines to cb's log (cb or its log NULL: said to no one): for a caller whose
 * context is gone (zt_run_requeue, after the caller's last words). */
void zt_rt_requeue_as(const char *mode, const zt_callbacks *cb);
/* The node (0-based) of world rank R, or -1 before zt_init / out of range. */
int zt_rt_node_of(int r);
/* One line about the placement of the ranks, for the log: "4 ranks on 2
 * nodes (2 per node): zn1 ranks 0-1, zn2 ranks 2-3" (host names as the ranks
 * see them; a node whose ranks report different host names is flagged). */
void zt_rt_topology(char *buf, size_t n);
/* L if every node runs exactly L ranks and they are consecutive (node k has
 * ranks kL .. kL+L-1: block placement), else 0.  1 outside MPI. */
int zt_rt_node_block(void);

#endif
