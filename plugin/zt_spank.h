/*
 * zt_spank.h -- state shared by the per-context parts of the ztrain SPANK
 * plugin (spank_ztrain.c dispatches, zt_client.c runs in srun/sbatch/salloc,
 * zt_stepd.c runs in slurmstepd).  Internal: nothing here is exported from
 * spank_ztrain.so (see spank_ztrain.map).
 */
#ifndef ZT_SPANK_H
#define ZT_SPANK_H

#include <stdint.h>   /* spank.h needs it and does not include it */
#include <slurm/spank.h>

#include "zt_opts.h"

struct zt_state {
    spank_context_t ctx;
    struct zt_site site;
    int site_ok;                   /* plugstack.conf arguments parsed */
    char site_err[ZT_ERRLEN];      /* why not */
    char *raw[ZT_OPT_COUNT];       /* last value seen for each option */
};

extern struct zt_state zt_g;

/* Client side (S_CTX_LOCAL: srun, S_CTX_ALLOCATOR: sbatch/salloc). */
int zt_client_init(spank_t sp, int ac, char **av);
int zt_client_option(int id, const char *optarg);

/* slurmstepd side (S_CTX_REMOTE). */
int zt_stepd_init(spank_t sp, int ac, char **av);
int zt_stepd_task_init(spank_t sp, int ac, char **av);
/* slurm_spank_exit in slurmstepd: remove the site-limit statement file. */
void zt_stepd_exit(void);

/* Register the --ztrain-* options with Slurm (in slurm_spank_init only). */
int zt_register_options(spank_t sp);

#endif /* ZT_SPANK_H */
