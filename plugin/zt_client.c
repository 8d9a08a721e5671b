/*
 * zt_client.c -- the ztrain plugin in srun (S_CTX_LOCAL) and sbatch/salloc
 * (S_CTX_ALLOCATOR): register the options and refuse bad values before
 * anything is submitted.
 */
#include "zt_spank.h"

#include <stdlib.h>

int zt_client_init(spank_t sp, int ac, char **av) {
    if (zt_site_parse(&zt_g.site, ac, av, zt_g.site_err, sizeof zt_g.site_err)) {
        /* Refuse to load: with "required" in plugstack.conf srun/sbatch stop
         * here; with "optional" they go on without the --ztrain-* options. */
        slurm_error("%s plugin disabled: %s", ZT_TAG, zt_g.site_err);
        return -1;
    }
    zt_g.site_ok = 1;
    return zt_register_options(sp);
}

/*
 * Called from the option callback while srun/sbatch/salloc parse their
 * options (command line, #SBATCH lines, SLURM_SPANK_* variables), before
 * anything is allocated or submitted.  A bad value ends the command right
 * here with one line naming the option, the value and what is allowed:
 * returning -1 would make Slurm add a second, vaguer line ("Invalid
 * --ztrain-stage argument: 7" or "Invalid argument (7) for environment
 * variable: ...") and exit anyway.
 */
int zt_client_option(int id, const char *optarg) {
    char canon[ZT_VALLEN], err[ZT_ERRLEN];
    if (zt_opt_check((enum zt_opt_id)id, optarg, &zt_g.site, canon, sizeof canon, err, sizeof err)) {
        slurm_error("%s %s", ZT_TAG, err);
        exit(1);
    }
    return 0;
}
