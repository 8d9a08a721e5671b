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
    MPI_Comm world_comm;          /* duplicate of MPI_COMM_WORLD */
    MPI_Comm node_comm;
} zt_runtime;

/* The process-wide runtime (valid after zt_init). */
const zt_runtime *zt_rt(void);
/* Threads for compute on this rank: cfg value if > 0, else node cores divided
 * by the ranks on the node (at least 1). */
int zt_rt_default_threads(void);
/* Under Slurm (SLURM_PROCID set), check Slurm's task ids against MPI's.
 * Returns ZT_EINVAL with a message when they disagree. */
int zt_rt_check_slurm(zt_status *st);

#endif
