/*
 * ztrain_env.h -- the ZTRAIN_* environment contract.
 *
 * One header, included by both the Slurm SPANK plugin (plugin/, which SETS
 * these variables per task) and libtrain (which READS them as the
 * "environment" configuration source, between the JSON file and flags).
 * Plain C, no dependencies: the plugin must not pull in MPI, CUDA or libtrain.
 *
 * Every configuration key also has a generic variable: ZTRAIN_ followed by
 * its JSON path in upper case with '.' replaced by '_' and a leading
 * "ztrain." dropped (optimizer.params.lr -> ZTRAIN_OPTIMIZER_PARAMS_LR,
 * ztrain.model.n_layer -> ZTRAIN_MODEL_N_LAYER).  The names below are the
 * short forms the plugin sets; they take the same values as the keys.
 */
#ifndef ZTRAIN_ENV_H
#define ZTRAIN_ENV_H

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
/* activation_checkpointing.policy: none | blocks | every-K */
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

#endif /* ZTRAIN_ENV_H */
