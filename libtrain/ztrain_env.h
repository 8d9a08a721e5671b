/*
 * ztrain_env.h -- the ZTRAIN_* environment contract.
 *
 * One header, included by both the Slurm SPANK plugin (plugin/, which SETS
 * these variables per task) and libtrain (which READS them as the
 * "environment" configuration source, between the JSON file and flags).
 * Plain C and POSIX, no other dependencies: the plugin must not pull in MPI,
 * CUDA or libtrain.
 *
 * Every configuration key also has a generic variable: ZTRAIN_ followed by
 * its JSON path in upper case with '.' replaced by '_' and a leading
 * "ztrain." dropped (optimizer.params.lr -> ZTRAIN_OPTIMIZER_PARAMS_LR,
 * ztrain.model.n_layer -> ZTRAIN_MODEL_N_LAYER).  The names below are the
 * short forms the plugin sets; they take the same values as the keys.
 */
#ifndef ZTRAIN_ENV_H
#define ZTRAIN_ENV_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* zero_optimization.stage: 0..3 */
#define ZTRAIN_ENV_STAGE        "ZTRAIN_STAGE"
/* ztrain.data.dataloaders: worker threads per rank, >= 1 */
#define ZTRAIN_ENV_DATALOADERS  "ZTRAIN_DATALOADERS"
/* ztrain.checkpoint.resume: auto | never | PATH */
#define ZTRAIN_ENV_RESUME       "ZTRAIN_RESUME"
/* ztrain.checkpoint.dir: PATH */
#define ZTRAIN_ENV_CKPT_DIR     "ZTRAIN_CKPT_DIR"
/* ztrain.checkpoint.every: steps between periodic checkpoints, 0 = off */
#define ZTRAIN_ENV_CKPT_EVERY   "ZTRAIN_CKPT_EVERY"
/* zero_optimization.offload_*: none | optimizer | params */
#define ZTRAIN_ENV_OFFLOAD      "ZTRAIN_OFFLOAD"
/* precision: fp32 | bf16 | fp16 (sets bf16.enabled / fp16.enabled) */
#define ZTRAIN_ENV_PRECISION    "ZTRAIN_PRECISION"
/* activation_checkpointing.policy: none | blocks | blocks-attn | every-K */
#define ZTRAIN_ENV_ACT_CKPT     "ZTRAIN_ACT_CKPT"

/* Informational variables set by the plugin (not configuration keys). */
/* GPU binding mode the plugin applied: none | local | map:LIST */
#define ZTRAIN_ENV_GPU_BIND     "ZTRAIN_GPU_BIND"
/* Number of times Slurm requeued/restarted this job (0 on first run). */
#define ZTRAIN_ENV_RESTART_COUNT "ZTRAIN_RESTART_COUNT"
/* Global task rank and node-local task id as Slurm saw them; libtrain
 * checks them against MPI's view. */
#define ZTRAIN_ENV_SLURM_RANK   "ZTRAIN_SLURM_RANK"
#define ZTRAIN_ENV_SLURM_LOCAL  "ZTRAIN_SLURM_LOCALID"
/* Set to "1" by the plugin so libtrain knows the contract was applied. */
#define ZTRAIN_ENV_PLUGIN       "ZTRAIN_PLUGIN"
/* OMP_NUM_THREADS value the plugin computed for the task (max(1, CPUs per
 * task - dataloaders)); marks OMP_NUM_THREADS as the plugin's, so a later
 * step (srun inside a batch script) recomputes it instead of keeping it. */
#define ZTRAIN_ENV_OMP_AUTO     "ZTRAIN_OMP_AUTO"

/* The site limits in force for this task, stated by the plugin from
 * slurmstepd (task_init, after the user's environment, so a user's own
 * value is replaced): "max_stage=N max_dataloaders=M".  libtrain refuses a
 * configuration beyond them from any source (file, environment, flag) and
 * keeps its automatic data-loader count within them. */
#define ZTRAIN_ENV_SITE_LIMITS  "ZTRAIN_SITE_LIMITS"

/* Allowed values, shared so both sides validate identically. */
#define ZTRAIN_STAGE_MIN 0
#define ZTRAIN_STAGE_MAX 3
#define ZTRAIN_DATALOADERS_MIN 1
#define ZTRAIN_DATALOADERS_MAX 256

/*
 * The one parser of the shared values that are not plain numbers, used by
 * the plugin (option callbacks and task_init) and by libtrain (every
 * configuration source), so both accept and refuse the same things.
 *
 * checkpoint.resume: "auto", "never" or a checkpoint path.  The keywords are
 * exact and lower case; a value equal to one of them but for case or blanks
 * ("AUTO", "auto ", " never") is refused rather than taken as a path, and so
 * are an empty value and control characters.  0 when valid, else -1 with
 * *why set to a static reason.
 */
static inline int ztrain_resume_check(const char *v, const char **why) {
    static const char *const kw[2] = {"auto", "never"};
    if (!v || !*v) { *why = "empty value"; return -1; }
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f) { *why = "control character in path"; return -1; }
    /* v stripped of blanks, compared without case */
    const char *b = v, *e = v;
    while (*b == ' ' || *b == '\t') b++;
    for (const char *p = b; *p; p++) if (*p != ' ' && *p != '\t') e = p + 1;
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        while (kw[k][n] && b + n < e && (b[n] | 0x20) == kw[k][n]) n++;
        if (kw[k][n] == '\0' && b + n == e) {
            if (b == v && *e == '\0' && !__builtin_strcmp(b, kw[k])) return 0;   /* exact */
            *why = k == 0 ? "did you mean auto? (keywords are lower case, without blanks)"
                          : "did you mean never? (keywords are lower case, without blanks)";
            return -1;
        }
    }
    return 0;
}

/*
 * Parse a ZTRAIN_SITE_LIMITS statement: space-separated max_stage=N and
 * max_dataloaders=M (each optional, each at most once, within the ranges
 * above).  Unset limits are left as given (callers start from the maxima).
 * 0 when valid, else -1 with *why set.
 */
static inline int ztrain_site_limits_parse(const char *v, int *max_stage, int *max_dataloaders,
                                           const char **why) {
    static const char *const names[2] = {"max_stage=", "max_dataloaders="};
    const int lo[2] = {ZTRAIN_STAGE_MIN, ZTRAIN_DATALOADERS_MIN};
    const int hi[2] = {ZTRAIN_STAGE_MAX, ZTRAIN_DATALOADERS_MAX};
    int *out[2] = {max_stage, max_dataloaders}, seen[2] = {0, 0};
    const char *p = v ? v : "";
    while (*p) {
        if (*p == ' ') { p++; continue; }
        int k = -1;
        for (int i = 0; i < 2 && k < 0; i++)
            if (!__builtin_strncmp(p, names[i], __builtin_strlen(names[i]))) k = i;
        if (k < 0) { *why = "unknown item (expected max_stage=N max_dataloaders=M)"; return -1; }
        if (seen[k]++) { *why = "an item given twice"; return -1; }
        p += __builtin_strlen(names[k]);
        long n = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9' && n <= 100000) { n = n * 10 + (*p++ - '0'); digits++; }
        if (!digits || (*p && *p != ' ') || n < lo[k] || n > hi[k]) {
            *why = "value not an integer in range";
            return -1;
        }
        *out[k] = (int)n;
    }
    return 0;
}

/*
 * The site-limit statement file: ZTRAIN_SITE_LIMITS is a copy a user can
 * unset or overwrite inside the task (`env -u`, a wrapper script), so the
 * plugin also states the limits where only root can write.  In slurmstepd
 * (slurm_spank_init, S_CTX_REMOTE, running as root) it writes
 *     /run/ztrain/stepd-<slurmstepd pid>
 * (root-owned, mode 0644, in a root-owned 0755 directory) holding two lines,
 *     start=<slurmstepd's start time, clock ticks since boot (/proc/PID/stat)>
 *     max_stage=N max_dataloaders=M
 * and removes it in slurm_spank_exit.  libtrain walks its own ancestors to
 * the nearest slurmstepd (every task of a step, and every rank mpirun or
 * orted starts in it, descends from one: Slurm's own process tracking rests
 * on the same tree or on cgroups the user cannot leave) and applies that
 * statement whatever the environment says.  A file whose start time is not
 * that slurmstepd's (left by a crashed step whose pid was reused) or that
 * is not root-owned and unwritable by others is ignored.
 */
#define ZTRAIN_STATEMENT_DIR    "/run/ztrain"
#define ZTRAIN_STATEMENT_PREFIX "stepd-"

/*
 * /proc/PID/stat of a process: its parent, its start time and its command
 * name (comm, as the kernel keeps it: at most 15 bytes).  0 on success,
 * -1 when the process is gone or the file is malformed.
 */
static inline int ztrain_proc_stat(long pid, long *ppid, unsigned long long *start, char *comm,
                                   size_t n) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* "pid (comm) state ppid ..." -- comm may hold blanks and ')' */
    char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
    if (!lp || !rp || rp < lp || !rp[1]) return -1;
    size_t cl = (size_t)(rp - lp - 1);
    if (n) {
        if (cl >= n) cl = n - 1;
        memcpy(comm, lp + 1, cl);
        comm[cl] = '\0';
    }
    /* fields after comm: 3 state, 4 ppid, ..., 22 starttime */
    char state;
    long pp;
    unsigned long long st = 0;
    if (sscanf(rp + 2, "%c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                       "%*d %llu", &state, &pp, &st) != 3)
        return -1;
    *ppid = pp;
    *start = st;
    return 0;
}

/*
 * The statement in force for this process: the one of its nearest
 * slurmstepd ancestor.  1 with *max_stage / *max_dataloaders lowered to it
 * and path set to its file; 0 when this process runs under no slurmstepd,
 * or its slurmstepd stated nothing (no plugin, or a stale or untrusted
 * file); -1 with *why when the file is there, trusted, but malformed.
 * Limits are only ever lowered (the stricter of what the caller had and
 * the statement).
 */
static inline int ztrain_statement_find(int *max_stage, int *max_dataloaders, char *path,
                                        size_t n, const char **why) {
    long pid = (long)getppid(), pp;
    unsigned long long start = 0;
    char comm[32];
    int depth = 0;
    for (;; pid = pp) {
        if (pid <= 1 || ++depth > 128 || ztrain_proc_stat(pid, &pp, &start, comm, sizeof comm))
            return 0;
        if (!strcmp(comm, "slurmstepd")) break;
    }
    struct stat ds, fs;
    if (lstat(ZTRAIN_STATEMENT_DIR, &ds) || !S_ISDIR(ds.st_mode) || ds.st_uid != 0 ||
        (ds.st_mode & 022))
        return 0;
    snprintf(path, n, ZTRAIN_STATEMENT_DIR "/" ZTRAIN_STATEMENT_PREFIX "%ld", pid);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[256];
    ssize_t len = -1;
    if (!fstat(fd, &fs) && S_ISREG(fs.st_mode) && fs.st_uid == 0 && !(fs.st_mode & 022))
        len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len < 0) return 0;
    buf[len] = '\0';
    unsigned long long said = 0;
    char *nl = strchr(buf, '\n');
    if (sscanf(buf, "start=%llu", &said) != 1 || !nl) { *why = "malformed (no start= line)"; return -1; }
    if (said != start) return 0;   /* another slurmstepd's, left behind */
    char *end = strchr(nl + 1, '\n');
    if (end) *end = '\0';
    int ms = ZTRAIN_STAGE_MAX, md = ZTRAIN_DATALOADERS_MAX;
    if (ztrain_site_limits_parse(nl + 1, &ms, &md, why)) return -1;
    if (ms < *max_stage) *max_stage = ms;
    if (md < *max_dataloaders) *max_dataloaders = md;
    return 1;
}

#endif /* ZTRAIN_ENV_H */
