/*
 * spank_ztrain.c -- entry points of the ztrain SPANK plugin.
 *
 * Slurm loads spank_ztrain.so in every process of a job (srun, sbatch,
 * salloc, slurmd, slurmstepd, prolog/epilog).  The entry points here only
 * dispatch on the context, pyxis style:
 *   S_CTX_LOCAL / S_CTX_ALLOCATOR  -> zt_client.c (validate at submission)
 *   S_CTX_REMOTE                   -> zt_stepd.c  (validate again, export
 *                                                  ZTRAIN_* per task)
 *   S_CTX_SLURMD / S_CTX_JOB_SCRIPT-> nothing but a log line for a broken
 *                                     configuration.
 * Option parsing and validation live in zt_opts.c (no Slurm dependency).
 */
#include "zt_spank.h"

#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(ztrain, 1)

struct zt_state zt_g;

/*
 * Option callback.  It runs in srun/sbatch when the option is parsed (from
 * the command line, #SBATCH lines or SLURM_SPANK_* variables) and, in
 * slurmstepd, once per copy of the option in the job environment -- twice
 * for an srun step -- so it only remembers the last value (idempotent).
 * Remotely it never fails: a failing remote callback is only logged by
 * slurmstepd and the job runs without the option, so the value is checked
 * again in task_init, which can refuse the task with a message.
 */
static int zt_opt_cb(int val, const char *optarg, int remote) {
    if (val < 0 || val >= ZT_OPT_COUNT) return -1;
    char *copy = strdup(optarg ? optarg : "");
    if (!copy) return remote ? 0 : -1;
    free(zt_g.raw[val]);
    zt_g.raw[val] = copy;
    if (remote) return 0;
    return zt_client_option(val, optarg);
}

int zt_register_options(spank_t sp) {
    static struct spank_option opts[ZT_OPT_COUNT];
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        opts[i].name = (char *)zt_opt_table[i].name;
        opts[i].arginfo = (char *)zt_opt_table[i].arginfo;
        opts[i].usage = (char *)zt_opt_table[i].usage;
        opts[i].has_arg = 1;
        opts[i].val = i;
        opts[i].cb = zt_opt_cb;
        spank_err_t rc = spank_option_register(sp, &opts[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("%s cannot register --%s: %s", ZT_TAG, zt_opt_table[i].name,
                        spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
    memset(&zt_g, 0, sizeof zt_g);
    zt_g.ctx = spank_context();
    switch (zt_g.ctx) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
        return zt_client_init(sp, ac, av);
    case S_CTX_REMOTE:
        return zt_stepd_init(sp, ac, av);
    case S_CTX_SLURMD: {
        /* Tell the admin early (slurmd log) but never stop slurmd. */
        char err[ZT_ERRLEN];
        if (zt_site_parse(&zt_g.site, ac, av, err, sizeof err))
            slurm_error("%s %s", ZT_TAG, err);
        return 0;
    }
    default:
        return 0;
    }
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
    if (zt_g.ctx != S_CTX_REMOTE || !spank_remote(sp)) return 0;
    return zt_stepd_task_init(sp, ac, av);
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
    (void)sp; (void)ac; (void)av;
    if (zt_g.ctx == S_CTX_REMOTE) zt_stepd_exit();
    for (int i = 0; i < ZT_OPT_COUNT; i++) {
        free(zt_g.raw[i]);
        zt_g.raw[i] = NULL;
    }
    return 0;
}
