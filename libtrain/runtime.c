/* runtime.c -- MPI initialization, node topology, the environment, Slurm
 * (its task ids; the requeue after a preemption checkpoint). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ctx.h"
#include "engine.h"
#include "gpu.h"
#include "runtime.h"
#include "ztrain_env.h"

static zt_runtime g_rt = {0};

/* Every rank's node and short host name, gathered once at zt_init. */
#define ZT_HOST_MAX 64
static int *g_node_of;        /* [world] */
static char *g_hosts;         /* [world][ZT_HOST_MAX] */

/* Gather the node (the MPI shared-memory domain) and host name of every
 * rank.  Collective; a rank short of memory makes all of them skip it. */
static void gather_nodes(void) {
    const int W = g_rt.world;
    int leader = g_rt.rank;   /* world rank of this node's first rank */
    MPI_Bcast(&leader, 1, MPI_INT, 0, g_rt.node_comm);
    char host[ZT_HOST_MAX];
    memset(host, 0, sizeof host);
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    char *dot = strchr(host, '.');
    if (dot) *dot = '\0';
    int *leaders = malloc((size_t)W * sizeof *leaders);
    g_node_of = malloc((size_t)W * sizeof *g_node_of);
    g_hosts = malloc((size_t)W * ZT_HOST_MAX);
    int have = leaders && g_node_of && g_hosts, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, g_rt.world_comm);
    if (all) {
        MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, g_rt.world_comm);
        MPI_Allgather(host, ZT_HOST_MAX, MPI_CHAR, g_hosts, ZT_HOST_MAX, MPI_CHAR, g_rt.world_comm);
        int k = 0;
        for (int r = 0; r < W; ++r)   /* a leader precedes its node's other ranks */
            g_node_of[r] = leaders[r] == r ? k++ : g_node_of[leaders[r]];
        g_rt.n_nodes = k;
        g_rt.node = g_node_of[g_rt.rank];
    } else {
        free(g_node_of); free(g_hosts);
        g_node_of = NULL; g_hosts = NULL;
        g_rt.n_nodes = 0;
        g_rt.node = -1;
    }
    free(leaders);
}

int zt_rt_node_of(int r) {
    if (!g_rt.initialized || !g_node_of || r < 0 || r >= g_rt.world) return -1;
    return g_node_of[r];
}

int zt_rt_node_block(void) {
    if (!g_rt.initialized || g_rt.world <= 1) return 1;
    const int L = g_rt.local_size;
    if (!g_node_of || L < 1 || g_rt.world % L) return 0;
    for (int r = 0; r < g_rt.world; ++r)   /* node ids follow the lowest rank */
        if (g_node_of[r] != r / L) return 0;
    return L;
}

/* append to buf[*len..n) like snprintf, never past the end */
static void cat(char *buf, size_t n, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cat(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    if (*len >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

void zt_rt_topology(char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    size_t len = 0;
    const int W = zt_world_size(), N = g_rt.n_nodes;
    if (!g_rt.initialized || !g_node_of || N < 1) {
        cat(buf, n, &len, "%d rank%s, nodes unknown", W, W > 1 ? "s" : "");
        return;
    }
    int lo = W, hi = 0;
    for (int k = 0; k < N; ++k) {
        int c = 0;
        for (int r = 0; r < W; ++r) c += g_node_of[r] == k;
        if (c < lo) lo = c;
        if (c > hi) hi = c;
    }
    cat(buf, n, &len, "%d rank%s on %d node%s (", W, W > 1 ? "s" : "", N, N > 1 ? "s" : "");
    if (lo == hi) cat(buf, n, &len, "%d per node)", lo);
    else cat(buf, n, &len, "%d to %d per node)", lo, hi);
    const int shown = N <= 8 ? N : 4;
    int mixed = -1, mixed_first = -1;
    for (int k = 0; k < N; ++k) {
        int first = -1;
        for (int r = 0; r < W; ++r) {
            if (g_node_of[r] != k) continue;
            if (first < 0) first = r;
            else if (strcmp(g_hosts + (size_t)r * ZT_HOST_MAX, g_hosts + (size_t)first * ZT_HOST_MAX) &&
                     mixed < 0) {
                mixed = r;
                mixed_first = first;
            }
        }
        if (k >= shown) continue;
        cat(buf, n, &len, "%s %s rank%s ", k ? "," : ":", g_hosts + (size_t)first * ZT_HOST_MAX,
            hi > 1 ? "s" : "");
        /* the node's ranks as ranges: 0-1,4-5 */
        int sep = 0;
        for (int r = first; r < W; ++r) {
            if (g_node_of[r] != k) continue;
            int e = r;
            while (e + 1 < W && g_node_of[e + 1] == k) ++e;
            if (e > r) cat(buf, n, &len, "%s%d-%d", sep ? "," : "", r, e);
            else cat(buf, n, &len, "%s%d", sep ? "," : "", r);
            sep = 1;
            r = e;
        }
    }
    if (shown < N) cat(buf, n, &len, ", and %d more node%s", N - shown, N - shown > 1 ? "s" : "");
    if (mixed >= 0)
        cat(buf, n, &len, "; warning: rank %d reports host %s but shares a node with rank %d on %s",
            mixed, g_hosts + (size_t)mixed * ZT_HOST_MAX, mixed_first,
            g_hosts + (size_t)mixed_first * ZT_HOST_MAX);
}

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
    gather_nodes();
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    g_rt.node_cores = nc > 0 ? (int)nc : 1;
    g_rt.initialized = 1;
    return ZT_OK;
}

void zt_finalize(void) {
    if (!g_rt.initialized) return;
    free(g_node_of);
    free(g_hosts);
    g_node_of = NULL;
    g_hosts = NULL;
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

/* ---------------------------------------------------------------- environment */

static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int zt_env_int(const char *name, long min, long max, long def, long *out, zt_status *st) {
    *out = def;
    const char *v = env_value(name);
    if (!v) return ZT_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || isspace((unsigned char)v[0]) || x < min || x > max)
        return zt_fail(st, ZT_EINVAL, "%s='%s': expected an integer from %ld to %ld", name, v, min, max);
    *out = x;
    return ZT_OK;
}

int zt_env_double(const char *name, double min, double max, double def, double *out, zt_status *st) {
    *out = def;
    const char *v = env_value(name);
    if (!v) return ZT_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || isspace((unsigned char)v[0]) || !isfinite(x) || !(x >= min && x <= max))
        return zt_fail(st, ZT_EINVAL, "%s='%s': expected a number from %g to %g", name, v, min, max);
    *out = x;
    return ZT_OK;
}

int zt_env_bool(const char *name, int def, int *out, zt_status *st) {
    *out = def;
    const char *v = env_value(name);
    if (!v) return ZT_OK;
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; ++i) {
        if (!strcasecmp(v, yes[i])) { *out = 1; return ZT_OK; }
        if (!strcasecmp(v, no[i])) { *out = 0; return ZT_OK; }
    }
    return zt_fail(st, ZT_EINVAL, "%s='%s': expected 1 or 0 (true/false, yes/no, on/off)", name, v);
}

int zt_env_choice(const char *name, const char *const *choices, int def, int *out, zt_status *st) {
    *out = def;
    const char *v = env_value(name);
    if (!v) return ZT_OK;
    char list[256] = "";
    size_t n = 0;
    for (int i = 0; choices[i]; ++i) {
        size_t len = strlen(choices[i]);
        int prefix = len > 0 && choices[i][len - 1] == '*';
        if (prefix ? !strncmp(v, choices[i], len - 1) && v[len - 1] : !strcmp(v, choices[i])) {
            *out = i;
            return ZT_OK;
        }
        if (n < sizeof list)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%.*s%s", i ? ", " : "", (int)(len - (size_t)prefix),
                                  choices[i], prefix ? "..." : "");
    }
    return zt_fail(st, ZT_EINVAL, "%s='%s': expected one of %s", name, v, list);
}

static const char *const gpu_bind_modes[] = {"none", "local", "map:*", NULL};

int zt_rt_gpu_bound(void) {
    int mode;
    zt_env_choice(ZTRAIN_ENV_GPU_BIND, gpu_bind_modes, 0, &mode, NULL);
    return mode > 0;
}

/* A Slurm task id: unset is 0 (not under Slurm), garbage an error. */
static int env_id(const char *name, long max, int *have, int *out, zt_status *st) {
    long x;
    ZT_TRY(zt_env_int(name, 0, max, -1, &x, st));
    *have = x >= 0;
    *out = (int)x;
    return ZT_OK;
}

int zt_rt_check_slurm(zt_status *st) {
    int procid, localid, ntasks, have, mode;
    ZT_TRY(zt_env_choice(ZTRAIN_ENV_GPU_BIND, gpu_bind_modes, 0, &mode, st));
    /* The plugin's copies win (they are what Slurm said for this task). */
    ZT_TRY(env_id(ZTRAIN_ENV_SLURM_RANK, INT_MAX, &have, &procid, st));
    if (!have) ZT_TRY(env_id("SLURM_PROCID", INT_MAX, &have, &procid, st));
    if (!have) return ZT_OK;
    /* Launched by mpirun inside an allocation: SLURM_PROCID belongs to the
     * batch step, not to us.  Only srun-launched tasks have SLURM_STEP_ID
     * matching and one task per MPI rank. */
    ZT_TRY(env_id("SLURM_STEP_NUM_TASKS", INT_MAX, &have, &ntasks, st));
    if (!have || ntasks != g_rt.world) return ZT_OK;
    if (procid != g_rt.rank)
        return zt_fail(st, ZT_EINVAL,
                       "Slurm task %d is MPI rank %d: the launcher and MPI disagree "
                       "(srun --mpi=pmix or pmi2 needed?)", procid, g_rt.rank);
    ZT_TRY(env_id(ZTRAIN_ENV_SLURM_LOCAL, INT_MAX, &have, &localid, st));
    if (!have) ZT_TRY(env_id("SLURM_LOCALID", INT_MAX, &have, &localid, st));
    if (have && localid != g_rt.local_rank)
        return zt_fail(st, ZT_EINVAL,
                       "Slurm local task id %d but MPI local rank %d on this node",
                       localid, g_rt.local_rank);
    return ZT_OK;
}

/* ---------------------------------------------------------------- Slurm requeue */

extern char **environ;

/* Run argv; stdout into out (if given).  Returns the exit status, -1 if it
 * could not run. */
static int run_cmd(char *const argv[], char *out, size_t n) {
    int fds[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out) {
        if (pipe(fds) != 0) { posix_spawn_file_actions_destroy(&fa); return -1; }
        posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
        posix_spawn_file_actions_addclose(&fa, fds[1]);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out) {
        close(fds[1]);
        size_t used = 0;
        if (rc == 0) {
            ssize_t k;
            while ((k = read(fds[0], out + used, n - 1 - used)) > 0 && used + 1 < n) used += (size_t)k;
            char sink[512];
            while ((k = read(fds[0], sink, sizeof sink)) > 0) {}
        }
        out[used] = '\0';
        close(fds[0]);
    }
    if (rc != 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* a line of zt_rt_requeue_as to cb's log */
static void rq_log(const zt_callbacks *cb, int level, const char *fmt, ...) {
    if (!cb || !cb->log) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cb->log(cb->user, level, buf);
}

void zt_rt_requeue_as(const char *mode, const zt_callbacks *cb) {
    const char *job = getenv("SLURM_JOB_ID");
    if (!strcmp(mode, "false")) {
        if (job && *job) rq_log(cb, ZT_LOG_INFO, "preemption: ztrain.requeue=false: not requeueing job %s", job);
        return;
    }
    if (!job || !*job) {
        if (!strcmp(mode, "true"))
            rq_log(cb, ZT_LOG_WARN, "preemption: ztrain.requeue=true but not running under Slurm "
                   "(SLURM_JOB_ID unset): nothing to requeue");
        return;
    }
    char ref[128];
    const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID");
    if (aj && *aj && at && *at) snprintf(ref, sizeof ref, "%s_%s", aj, at);
    else snprintf(ref, sizeof ref, "%s", job);
    if (!strcmp(mode, "auto")) {
        /* requeue only a job Slurm allows to requeue (sbatch --requeue, or
         * JobRequeue=1 in slurm.conf): "Requeue=1" in its record */
        char out[16384];
        char *show[] = {"scontrol", "show", "job", "-o", ref, NULL};
        int rc = run_cmd(show, out, sizeof out);
        if (rc != 0) {
            rq_log(cb, ZT_LOG_WARN, "preemption: 'scontrol show job %s' failed (%s); not requeueing",
                   ref, rc < 0 ? "scontrol not found" : "non-zero exit");
            return;
        }
        if (!strstr(out, "Requeue=1")) {
            rq_log(cb, ZT_LOG_INFO, "preemption: job %s is not requeueable (submit it with sbatch "
                   "--requeue, or set ztrain.requeue=true); not requeueing", ref);
            return;
        }
    }
    char *rq[] = {"scontrol", "requeue", ref, NULL};
    int rc = run_cmd(rq, NULL, 0);
    if (rc == 0)
        rq_log(cb, ZT_LOG_INFO, "preemption: requeued Slurm job %s; it resumes from the newest "
               "checkpoint", ref);
    else
        rq_log(cb, ZT_LOG_WARN, "preemption: 'scontrol requeue %s' failed (exit %d); the "
               "checkpoint is saved, requeue the job by hand", ref, rc);
}

void zt_rt_requeue(const zt_ctx *ctx) {
    zt_rt_requeue_as(zt_ctx_config(ctx)->requeue, &ctx->cb);
}
