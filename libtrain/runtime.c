/* runtime.c -- MPI initialization and node topology. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime.h"
#include "ztrain_env.h"

static zt_runtime g_rt = {0};

const zt_runtime *zt_rt(void) { return &g_rt; }

int zt_init(int *argc, char ***argv, zt_status *st) {
    zt_status_clear(st);
    if (g_rt.initialized) return ZT_OK;
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return zt_fail(st, ZT_ECOMM, "MPI_Init_thread failed");
        g_rt.we_initialized_mpi = 1;
    }
    /* Errors come back as codes so that we can report them ourselves. */
    MPI_Comm_dup(MPI_COMM_WORLD, &g_rt.world_comm);
    MPI_Comm_set_errhandler(g_rt.world_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_rt.world_comm, &g_rt.rank);
    MPI_Comm_size(g_rt.world_comm, &g_rt.world);
    MPI_Comm_split_type(g_rt.world_comm, MPI_COMM_TYPE_SHARED, g_rt.rank,
                        MPI_INFO_NULL, &g_rt.node_comm);
    MPI_Comm_rank(g_rt.node_comm, &g_rt.local_rank);
    MPI_Comm_size(g_rt.node_comm, &g_rt.local_size);
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    g_rt.node_cores = nc > 0 ? (int)nc : 1;
    g_rt.initialized = 1;
    return ZT_OK;
}

void zt_finalize(void) {
    if (!g_rt.initialized) return;
    MPI_Comm_free(&g_rt.node_comm);
    MPI_Comm_free(&g_rt.world_comm);
    int fin = 0;
    MPI_Finalized(&fin);
    if (g_rt.we_initialized_mpi && !fin) MPI_Finalize();
    g_rt.initialized = 0;
}

int zt_world_rank(void) { return g_rt.rank; }
int zt_world_size(void) { return g_rt.initialized ? g_rt.world : 1; }
int zt_local_rank(void) { return g_rt.local_rank; }
int zt_local_size(void) { return g_rt.initialized ? g_rt.local_size : 1; }

int zt_rt_default_threads(void) {
    int per = g_rt.node_cores / (g_rt.local_size > 0 ? g_rt.local_size : 1);
    return per > 0 ? per : 1;
}

static int env_int(const char *name, int *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end) return 0;
    *out = (int)x;
    return 1;
}

int zt_rt_check_slurm(zt_status *st) {
    int procid, localid;
    /* The plugin's copies win (they are what Slurm said for this task). */
    if (!env_int(ZTRAIN_ENV_SLURM_RANK, &procid) && !env_int("SLURM_PROCID", &procid))
        return ZT_OK;
    /* Launched by mpirun inside an allocation: SLURM_PROCID belongs to the
     * batch step, not to us.  Only srun-launched tasks have SLURM_STEP_ID
     * matching and one task per MPI rank. */
    int ntasks;
    if (!env_int("SLURM_STEP_NUM_TASKS", &ntasks) || ntasks != g_rt.world) return ZT_OK;
    if (procid != g_rt.rank)
        return zt_fail(st, ZT_EINVAL,
                       "Slurm task %d is MPI rank %d: the launcher and MPI disagree "
                       "(srun --mpi=pmix or pmi2 needed?)", procid, g_rt.rank);
    if ((env_int(ZTRAIN_ENV_SLURM_LOCAL, &localid) || env_int("SLURM_LOCALID", &localid)) &&
        localid != g_rt.local_rank)
        return zt_fail(st, ZT_EINVAL,
                       "Slurm local task id %d but MPI local rank %d on this node",
                       localid, g_rt.local_rank);
    return ZT_OK;
}
