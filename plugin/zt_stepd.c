/*
 * zt_stepd.c -- the ztrain plugin inside slurmstepd (S_CTX_REMOTE).
 *
 * Nothing here may fail the step before task_init: a non-zero return from
 * init, user_init or task_post_fork of a batch step drains the node.  Errors
 * found earlier are remembered and reported in task_init, which runs in the
 * task's own process just before exec (as the user, with the task's
 * stdout/stderr already connected): task_fail() writes one line that
 * reaches the user's terminal or output file and ends that task process
 * (see there why it does not just return -1), so the job fails and the node
 * stays in service.
 */
#include "zt_spank.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Special step ids (slurm.h): batch script, extern, interactive, pending. */
#define ZT_STEP_SPECIAL_MIN 0xfffffff0u

/* Marker telling a later step that OMP_NUM_THREADS was set by this plugin
 * (and may be recomputed) rather than by the user. */
#define ZT_ENV_OMP_MARK ZTRAIN_ENV_OMP_AUTO

/* Remote option variables: _SLURM_SPANK_OPTION_<plugin>_<option>, with the
 * option's '-' written as '_' (--ztrain-stage -> ..._ztrain_ztrain_stage);
 * sbatch also exports them with a SLURM_SPANK_ prefix for later sruns. */
#define ZT_OPT_ENV_PREFIX "_SLURM_SPANK_OPTION_ztrain_"
#define ZT_OPT_ENV_PREFIX2 "SLURM_SPANK__SLURM_SPANK_OPTION_ztrain_"

static char zt_bad_env[ZT_ERRLEN];   /* unknown option variable seen in init */

/* Is NAME (up to '=') the variable of one of our options? */
static int known_opt_var(const char *name, size_t len) {
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        const char *o = zt_opt_table[i].name;
        size_t ol = strlen(o), k;
        if (ol != len) continue;
        for (k = 0; k < len; k++)
            if (name[k] != (o[k] == '-' ? '_' : o[k])) break;
        if (k == len) return 1;
    }
    return 0;
}

/*
 * A hand-set variable with our prefix but no matching option (a typo, or the
 * short form _SLURM_SPANK_OPTION_ztrain_stage) would be dropped silently by
 * slurmstepd; remember it so that task_init refuses the task instead.
 */
static void check_option_env(spank_t sp) {
    char **env = NULL;
    zt_bad_env[0] = '\0';
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) return;
    for (char **e = env; *e; e++) {
        const char *v = *e, *rest;
        if (!strncmp(v, ZT_OPT_ENV_PREFIX, strlen(ZT_OPT_ENV_PREFIX)))
            rest = v + strlen(ZT_OPT_ENV_PREFIX);
        else if (!strncmp(v, ZT_OPT_ENV_PREFIX2, strlen(ZT_OPT_ENV_PREFIX2)))
            rest = v + strlen(ZT_OPT_ENV_PREFIX2);
        else
            continue;
        const char *eq = strchr(rest, '=');
        size_t len = eq ? (size_t)(eq - rest) : strlen(rest);
        if (known_opt_var(rest, len)) continue;
        int namelen = (int)(eq ? (size_t)(eq - v) : strlen(v));
        snprintf(zt_bad_env, sizeof zt_bad_env,
                 "%.*s is not a ztrain option variable (the options travel as "
                 ZT_OPT_ENV_PREFIX "ztrain_stage, " ZT_OPT_ENV_PREFIX "ztrain_dataloaders, ...; "
                 "better use the --ztrain-* options)", namelen > 120 ? 120 : namelen, v);
        return;
    }
}

/*
 * The site-limit statement file (ztrain_env.h): written as root from
 * slurmstepd before any task exists, removed in exit.  Its path while it
 * exists; why it could not be written otherwise (task_init then refuses
 * tasks when the site set limits: they must hold or nothing runs).
 */
static char zt_stmt_path[128];
static char zt_stmt_err[ZT_ERRLEN];
static pid_t zt_stmt_pid;          /* the slurmstepd that wrote it */

static int site_has_limits(void) {
    return zt_g.site.max_stage < ZTRAIN_STAGE_MAX || zt_g.site.max_dataloaders < ZTRAIN_DATALOADERS_MAX;
}

static void write_statement(void) {
    char tmp[160], text[160], comm[32];
    long pid = (long)getpid(), pp;
    unsigned long long start;
    struct stat ds;
    zt_stmt_path[0] = zt_stmt_err[0] = '\0';
    if (ztrain_proc_stat(pid, &pp, &start, comm, sizeof comm)) {
        snprintf(zt_stmt_err, sizeof zt_stmt_err, "cannot read /proc/%ld/stat", pid);
        return;
    }
    if (mkdir(ZTRAIN_STATEMENT_DIR, 0755) && errno != EEXIST) {
        snprintf(zt_stmt_err, sizeof zt_stmt_err, "cannot create " ZTRAIN_STATEMENT_DIR ": %s",
                 strerror(errno));
        return;
    }
    if (lstat(ZTRAIN_STATEMENT_DIR, &ds) || !S_ISDIR(ds.st_mode) || ds.st_uid != 0 || (ds.st_mode & 022)) {
        snprintf(zt_stmt_err, sizeof zt_stmt_err, ZTRAIN_STATEMENT_DIR " is not a root-owned "
                 "directory writable only by root");
        return;
    }
    snprintf(zt_stmt_path, sizeof zt_stmt_path, ZTRAIN_STATEMENT_DIR "/" ZTRAIN_STATEMENT_PREFIX "%ld", pid);
    snprintf(tmp, sizeof tmp, "%s.tmp", zt_stmt_path);
    int n = snprintf(text, sizeof text, "start=%llu\nmax_stage=%d max_dataloaders=%d\n", start,
                     zt_g.site.max_stage, zt_g.site.max_dataloaders);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int ok = fd >= 0 && fchmod(fd, 0644) == 0 && write(fd, text, (size_t)n) == n;
    if (fd >= 0 && close(fd)) ok = 0;
    if (!ok || rename(tmp, zt_stmt_path)) {
        snprintf(zt_stmt_err, sizeof zt_stmt_err, "cannot write %s: %s", zt_stmt_path, strerror(errno));
        unlink(tmp);
        zt_stmt_path[0] = '\0';
        return;
    }
    zt_stmt_pid = getpid();
}

void zt_stepd_exit(void) {
    if (zt_stmt_path[0] && getpid() == zt_stmt_pid) unlink(zt_stmt_path);
    zt_stmt_path[0] = '\0';
}

int zt_stepd_init(spank_t sp, int ac, char **av) {
    if (zt_site_parse(&zt_g.site, ac, av, zt_g.site_err, sizeof zt_g.site_err))
        slurm_error("%s %s", ZT_TAG, zt_g.site_err);   /* reported in task_init */
    else
        zt_g.site_ok = 1;
    if (zt_g.site_ok) {
        write_statement();
        if (zt_stmt_err[0]) slurm_error("%s site-limit statement: %s", ZT_TAG, zt_stmt_err);
    }
    /* Options must be registered here too, or slurmstepd drops their values. */
    if (zt_register_options(sp))
        slurm_error("%s option registration failed in slurmstepd", ZT_TAG);
    check_option_env(sp);
    return 0;
}

/*
 * Refuse the task: one line to the task's stderr (slurmstepd points its log
 * at the task's stderr before task_init; it also lands in slurmd.log), then
 * end the task process with status 1.  Returning -1 is not enough: Slurm
 * ignores task_init errors of plugins marked "optional" in plugstack.conf
 * and would run the task without the setting.  task_init runs in the forked
 * task process just before exec, so this ends only that task, exactly as a
 * failed exec would; the job fails and the node stays up.
 */
static void task_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void task_fail(const char *fmt, ...) {
    char msg[ZT_ERRLEN + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slurm_error("%s %s", ZT_TAG, msg);
    _exit(1);
}

static int getenv_buf(spank_t sp, const char *name, char *buf, int len) {
    buf[0] = '\0';
    return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS;
}

static void set_env(spank_t sp, const char *name, const char *val) {
    spank_err_t rc = spank_setenv(sp, name, val, 1);
    if (rc != ESPANK_SUCCESS)
        task_fail("cannot set %s: %s", name, spank_strerror(rc));
}

static void set_env_ul(spank_t sp, const char *name, unsigned long v) {
    char b[32];
    snprintf(b, sizeof b, "%lu", v);
    set_env(sp, name, b);
}

static int any_option_given(void) {
    for (int i = 0; i < ZT_OPT_COUNT; i++)
        if (zt_g.raw[i]) return 1;
    return 0;
}

/* CPUs of this task: SLURM_CPUS_PER_TASK (-c), else the step's CPUs on this
 * node divided by its tasks on this node. */
static int cpus_per_task(spank_t sp, uint32_t ntasks) {
    char b[64];
    unsigned long v;
    if (getenv_buf(sp, "SLURM_CPUS_PER_TASK", b, sizeof b) && !zt_parse_ulong(b, 1u << 20, &v) && v)
        return (int)v;
    uint16_t ncpus = 0;
    if (spank_get_item(sp, S_JOB_NCPUS, &ncpus) == ESPANK_SUCCESS && ncpus) {
        int per = (int)(ncpus / (ntasks ? ntasks : 1));
        return per > 0 ? per : 1;
    }
    return 1;
}

static void export_gpu_binding(spank_t sp, const struct zt_settings *st,
                              uint32_t local_id, uint32_t ntasks) {
    char err[ZT_ERRLEN], cvd[ZT_VALLEN], gpus[ZT_VALLEN];
    struct zt_gpu_bind b;
    const char *mode = st->val[ZT_OPT_GPU_BIND];
    const char *src = "CUDA_VISIBLE_DEVICES";

    if (zt_gpu_bind_parse(mode, &b, err, sizeof err))  /* already validated */
        task_fail("--ztrain-gpu-bind=%s: %s", mode, err);
    if (!getenv_buf(sp, "CUDA_VISIBLE_DEVICES", gpus, sizeof gpus) || !gpus[0]) {
        src = "SLURM_STEP_GPUS";
        getenv_buf(sp, "SLURM_STEP_GPUS", gpus, sizeof gpus);
    }
    if (b.mode != ZT_GPU_NONE && !gpus[0] && st->from_site[ZT_OPT_GPU_BIND]) {
        /* a site default must not break CPU-only jobs */
        slurm_debug("%s no GPUs in this step: site default gpu_bind=%s not applied", ZT_TAG, mode);
        set_env(sp, ZTRAIN_ENV_GPU_BIND, "none");
        return;
    }
    int rc = zt_gpu_assign(&b, gpus, local_id, ntasks, cvd, sizeof cvd, err, sizeof err);
    if (rc < 0) task_fail("%s", err);
    if (rc == 0) {
        slurm_debug("%s task %u: %s=%s -> CUDA_VISIBLE_DEVICES=%s", ZT_TAG, local_id, src, gpus, cvd);
        set_env(sp, "CUDA_VISIBLE_DEVICES", cvd);
        set_env(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    set_env(sp, ZTRAIN_ENV_GPU_BIND, mode);
}

static void export_omp(spank_t sp, const struct zt_settings *st, uint32_t ntasks) {
    char cur[64], mark[64];
    int have_cur = getenv_buf(sp, "OMP_NUM_THREADS", cur, sizeof cur);
    int have_mark = getenv_buf(sp, ZT_ENV_OMP_MARK, mark, sizeof mark);
    /* The user's own OMP_NUM_THREADS wins; ours (marked) is recomputed. */
    if (have_cur && cur[0] && !(have_mark && !strcmp(cur, mark))) return;
    int dl = st->have[ZT_OPT_DATALOADERS] ? atoi(st->val[ZT_OPT_DATALOADERS]) : 0;
    int n = zt_omp_threads(cpus_per_task(sp, ntasks), dl);
    set_env_ul(sp, "OMP_NUM_THREADS", (unsigned long)n);
    set_env_ul(sp, ZT_ENV_OMP_MARK, (unsigned long)n);
}

int zt_stepd_task_init(spank_t sp, int ac, char **av) {
    (void)ac; (void)av;
    char err[ZT_ERRLEN], buf[ZT_VALLEN];
    static struct zt_settings st;   /* large; one task per process */

    if (zt_bad_env[0]) task_fail("%s", zt_bad_env);
    if (!zt_g.site_ok) {
        /* A broken site configuration must not stop jobs that do not use
         * ztrain; jobs that asked for ztrain options are refused. */
        if (!any_option_given()) return 0;
        task_fail("the ztrain plugin is misconfigured on this node (%s); "
                  "ask your administrator", zt_g.site_err);
    }
    if (zt_stmt_err[0] && site_has_limits())
        task_fail("the site limits (max_stage=%d max_dataloaders=%d) cannot be stated to the task "
                  "(%s); refusing to start it; ask your administrator", zt_g.site.max_stage,
                  zt_g.site.max_dataloaders, zt_stmt_err);
    if (zt_settings_resolve(&st, (const char *const *)zt_g.raw, &zt_g.site, err, sizeof err))
        task_fail("%s (refusing to start the task)", err);

    uint32_t jobid = 0, stepid = 0, local_ntasks = 1, gid = 0, array_id = 0, array_task = 0;
    int local_id = 0;
    spank_get_item(sp, S_JOB_ID, &jobid);
    spank_get_item(sp, S_JOB_STEPID, &stepid);
    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_ntasks);
    spank_get_item(sp, S_TASK_ID, &local_id);
    spank_get_item(sp, S_TASK_GLOBAL_ID, &gid);
    /* non-array jobs: array id 0, or the job id with task id NO_VAL */
    if (spank_get_item(sp, S_JOB_ARRAY_ID, &array_id) != ESPANK_SUCCESS) array_id = 0;
    if (array_id && (spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &array_task) != ESPANK_SUCCESS ||
                     array_task >= ZT_STEP_SPECIAL_MIN))
        array_id = 0;
    if (!array_id && getenv_buf(sp, "SLURM_ARRAY_JOB_ID", buf, sizeof buf)) {
        unsigned long a, t;
        char tb[32];
        if (!zt_parse_ulong(buf, UINT32_MAX, &a) && getenv_buf(sp, "SLURM_ARRAY_TASK_ID", tb, sizeof tb) &&
            !zt_parse_ulong(tb, UINT32_MAX, &t)) {
            array_id = (uint32_t)a;
            array_task = (uint32_t)t;
        }
    }
    int special = stepid >= ZT_STEP_SPECIAL_MIN;  /* batch script and friends */

    /* Site limits that hold: the user's own exports of the limited keys
     * (short or generic names) are checked here, and the limits are stated
     * to the task in ZTRAIN_SITE_LIMITS, set after the user's environment
     * (a user's own value is replaced), for libtrain to refuse settings
     * beyond them from any source: file, environment or flag. */
    {
        static const struct { const char *var; int opt; } lim[] = {
            {ZTRAIN_ENV_STAGE, ZT_OPT_STAGE}, {"ZTRAIN_ZERO_OPTIMIZATION_STAGE", ZT_OPT_STAGE},
            {ZTRAIN_ENV_DATALOADERS, ZT_OPT_DATALOADERS},
            {"ZTRAIN_DATA_DATALOADERS", ZT_OPT_DATALOADERS},
        };
        for (size_t k = 0; k < sizeof lim / sizeof lim[0]; k++) {
            unsigned long v;
            int max = lim[k].opt == ZT_OPT_STAGE ? zt_g.site.max_stage : zt_g.site.max_dataloaders;
            if (st.have[lim[k].opt] || !getenv_buf(sp, lim[k].var, buf, sizeof buf)) continue;
            if (zt_parse_ulong(buf, 1000000, &v) == 0 && v > (unsigned long)max)
                task_fail("%s=%s exceeds the site limit %s=%d (plugstack.conf); refusing to start "
                          "the task", lim[k].var, buf,
                          lim[k].opt == ZT_OPT_STAGE ? "max_stage" : "max_dataloaders", max);
        }
        char lims[96];
        snprintf(lims, sizeof lims, "max_stage=%d max_dataloaders=%d", zt_g.site.max_stage,
                 zt_g.site.max_dataloaders);
        set_env(sp, ZTRAIN_ENV_SITE_LIMITS, lims);
    }

    /* configuration variables: options given or site defaults */
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        if (i == ZT_OPT_GPU_BIND || !st.have[i]) continue;
        set_env(sp, zt_opt_table[i].env, st.val[i]);
    }
    if (!st.have[ZT_OPT_CKPT_DIR]) {
        char submit[ZT_VALLEN];
        if (!getenv_buf(sp, "SLURM_SUBMIT_DIR", submit, sizeof submit) && !getcwd(submit, sizeof submit))
            submit[0] = '\0';
        if (zt_ckpt_dir_default(buf, sizeof buf, zt_g.site.ckpt_root, submit, jobid, array_id,
                                array_task, err, sizeof err))
            slurm_info("%s no default checkpoint directory: %s", ZT_TAG, err);
        else
            set_env(sp, ZTRAIN_ENV_CKPT_DIR, buf);
    }

    /* SLURM_RESTART_COUNT: the item reads 0 in a requeued batch step (22.05) */
    getenv_buf(sp, "SLURM_RESTART_COUNT", buf, sizeof buf);
    set_env_ul(sp, ZTRAIN_ENV_RESTART_COUNT, zt_restart_count(buf));

    if (special) {
        /* The job script is not a training rank: per-task values set here
         * would be inherited by mpirun-launched ranks and be wrong.  srun
         * steps inside the script get their own. */
        spank_unsetenv(sp, ZTRAIN_ENV_SLURM_RANK);
        spank_unsetenv(sp, ZTRAIN_ENV_SLURM_LOCAL);
        spank_unsetenv(sp, ZTRAIN_ENV_GPU_BIND);
    } else {
        set_env_ul(sp, ZTRAIN_ENV_SLURM_RANK, gid);
        set_env_ul(sp, ZTRAIN_ENV_SLURM_LOCAL, (unsigned long)local_id);
        if (st.have[ZT_OPT_GPU_BIND])
            export_gpu_binding(sp, &st, (uint32_t)local_id, local_ntasks);
    }
    export_omp(sp, &st, special ? 1 : local_ntasks);
    set_env(sp, ZTRAIN_ENV_PLUGIN, "1");
    return 0;
}
