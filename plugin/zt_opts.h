/*
 * zt_opts.h -- option parsing and validation for the ztrain SPANK plugin.
 *
 * Everything in zt_opts.c is plain C with no Slurm dependency, so the unit
 * test (tests/slurm/test_spank_opts.c) links it without libslurm.  The SPANK
 * glue (spank_ztrain.c, zt_local.c, zt_remote.c) calls these functions from
 * both sides of a job: the client (srun/sbatch/salloc) refuses bad values at
 * submission, and slurmstepd checks them again in task_init, because values
 * can also arrive through the environment and skip the client-side check.
 */
#ifndef ZT_OPTS_H
#define ZT_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "ztrain_env.h"

#define ZT_ERRLEN 512        /* size of every error buffer */
#define ZT_VALLEN 4096       /* longest accepted option value (a path) */
#define ZT_GPU_MAP_MAX 128   /* entries accepted in --ztrain-gpu-bind=map:LIST */
#define ZT_GPU_ID_MAX 1023   /* largest GPU id accepted in map:LIST */
#define ZT_CKPT_EVERY_MAX 1000000000L

/* Message prefix used on every line the plugin prints. */
#define ZT_TAG "[ztrain]"

enum zt_opt_id {
    ZT_OPT_STAGE = 0,
    ZT_OPT_DATALOADERS,
    ZT_OPT_GPU_BIND,
    ZT_OPT_RESUME,
    ZT_OPT_CKPT_DIR,
    ZT_OPT_CKPT_EVERY,
    ZT_OPT_OFFLOAD,
    ZT_OPT_PRECISION,
    ZT_OPT_COUNT
};

struct zt_opt_desc {
    const char *name;     /* command-line option without "--" */
    const char *arginfo;  /* one word shown by --help */
    const char *usage;    /* help text, starts with "[ztrain]" */
    const char *env;      /* ZTRAIN_* variable exported per task, or NULL */
};

/* Indexed by enum zt_opt_id. */
extern const struct zt_opt_desc zt_opt_table[ZT_OPT_COUNT];

enum zt_gpu_mode { ZT_GPU_NONE = 0, ZT_GPU_LOCAL, ZT_GPU_MAP };

struct zt_gpu_bind {
    enum zt_gpu_mode mode;
    int n;                      /* entries in ids (map only) */
    int ids[ZT_GPU_MAP_MAX];
};

/*
 * Site configuration: the key=value arguments after the plugin path in
 * plugstack.conf.  Unset defaults are -1 / "" and mean "export nothing, let
 * libtrain use its own default".
 */
struct zt_site {
    int default_stage;          /* -1 = unset */
    int max_stage;              /* ZTRAIN_STAGE_MAX unless lowered */
    int default_dataloaders;    /* -1 = unset */
    int max_dataloaders;        /* ZTRAIN_DATALOADERS_MAX unless lowered */
    long default_ckpt_every;    /* -1 = unset */
    char default_precision[8];  /* "" = unset */
    char default_offload[16];   /* "" = unset */
    char default_resume[8];     /* "" = unset (auto|never only) */
    char default_gpu_bind[ZT_VALLEN]; /* "" = unset, else canonical form */
    char ckpt_root[ZT_VALLEN];  /* "" = use the submit directory */
};

/* Fill in the built-in defaults (no site configuration). */
void zt_site_init(struct zt_site *s);

/*
 * Parse plugstack.conf arguments strictly: every argument must be key=value
 * with a known key, a valid value and no repetition.  Returns 0, or -1 with
 * a one-line message in err.
 */
int zt_site_parse(struct zt_site *s, int argc, char *const argv[], char *err, size_t errlen);

/* Short list of the keys zt_site_parse accepts (for messages and docs). */
extern const char zt_site_keys[];

/*
 * Validate one option value against the built-in rules and the site limits.
 * On success returns 0 and writes the canonical value (what is exported)
 * into canon; on failure returns -1 and writes one line (naming the option,
 * the value and what is allowed) into err.
 */
int zt_opt_check(enum zt_opt_id id, const char *val, const struct zt_site *s,
                 char *canon, size_t canonlen, char *err, size_t errlen);

/* Option id for a name with or without the "ztrain-" prefix; -1 if unknown. */
int zt_opt_lookup(const char *name);

/* Parse none | local | map:ID[,ID...] into b.  0 or -1 (err set). */
int zt_gpu_bind_parse(const char *val, struct zt_gpu_bind *b, char *err, size_t errlen);

/*
 * The effective settings of one task: each option from the user if given,
 * otherwise from the site default, otherwise absent.
 */
struct zt_settings {
    int have[ZT_OPT_COUNT];
    int from_site[ZT_OPT_COUNT];     /* value came from a site default */
    char val[ZT_OPT_COUNT][ZT_VALLEN];
};

/*
 * raw[i] is the value the user gave for option i, or NULL.  Validates every
 * given value (the first bad one is reported) and applies site defaults.
 */
int zt_settings_resolve(struct zt_settings *out, const char *const raw[ZT_OPT_COUNT],
                        const struct zt_site *s, char *err, size_t errlen);

/*
 * GPU selection for one task.
 *   step_gpus: the step's GPU list as Slurm exported it (CUDA_VISIBLE_DEVICES,
 *              else SLURM_STEP_GPUS), comma separated; NULL or "" if none.
 *   local_id / local_ntasks: this task's node-local id and the node's task count.
 * none     -> returns 1 (leave CUDA_VISIBLE_DEVICES alone).
 * local    -> tasks share the list in contiguous blocks: with G GPUs and T
 *             tasks, G >= T gives task i a block of G/T (the first G%T tasks
 *             get one more); G < T assigns round-robin (task i gets GPU i%G,
 *             so several tasks share a GPU).  No GPUs -> error.
 * map:LIST -> task i gets LIST[i % n] (a short list is reused cyclically,
 *             as Slurm's --gpu-bind=map_gpu does).  Every id must appear in
 *             the step's list when there is one.
 * Returns 0 with the CUDA_VISIBLE_DEVICES value in out, 1 for none, -1 on
 * error (err set).
 */
int zt_gpu_assign(const struct zt_gpu_bind *b, const char *step_gpus,
                  unsigned local_id, unsigned local_ntasks,
                  char *out, size_t outlen, char *err, size_t errlen);

/* max(1, cpus_per_task - dataloaders); dataloaders < 0 counts as 0. */
int zt_omp_threads(int cpus_per_task, int dataloaders);

/*
 * Default checkpoint directory: <root>/ztrain-<jobid>, or for array jobs
 * <root>/ztrain-<array_job_id>_<array_task_id>; root is ckpt_root if set,
 * else submit_dir.  Trailing slashes of root are dropped.  array_job_id 0
 * means "not an array job".  Returns 0, or -1 (err set) when there is no
 * root or the result does not fit.
 */
int zt_ckpt_dir_default(char *out, size_t outlen, const char *ckpt_root,
                        const char *submit_dir, uint32_t jobid,
                        uint32_t array_job_id, uint32_t array_task_id,
                        char *err, size_t errlen);

/*
 * Strict unsigned decimal parse: digits only (no sign, blanks or suffix),
 * value <= max.  Returns 0 and stores into *out, or -1.
 */
int zt_parse_ulong(const char *s, unsigned long max, unsigned long *out);

/* SLURM_RESTART_COUNT value -> count; NULL, empty or malformed -> 0. */
unsigned long zt_restart_count(const char *env_value);

#endif /* ZT_OPTS_H */
