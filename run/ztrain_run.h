/*
 * ztrain_run.h -- a whole training run (public API of libtrain, implemented
 * in run/): what `ztrain train` does between its argument parsing and its
 * exit code, for any embedding program.
 *
 *     zt_status st;
 *     zt_init(&argc, &argv, &st);
 *     zt_config *cfg = zt_config_new();
 *     zt_config_set(cfg, "ztrain.steps", "3", ZT_SRC_FLAG, &st);   // the caller's keys
 *     zt_run_options o = zt_run_defaults();
 *     o.config_file = "job.json";
 *     o.cb.log = my_log;                                           // progress lines, notes
 *     zt_run_result r;
 *     int rc = zt_run(cfg, &o, &r, &st);
 *     zt_config_free(cfg); zt_finalize();
 *
 * The steps, in order: the configuration (o.config_file, then the ZTRAIN_*
 * environment, then ztrain.init_from's config.json; every rank must read the
 * same), the context, the LoRA base and PEFT adapter, the data, the
 * checkpoint session (resume per checkpoint.resume, periodic and preemption
 * saves), the Hugging Face weights (unless a checkpoint was resumed), the
 * initial values still owed, training, the final weights file, a sample.
 * Collective: every rank calls it with the same options.  It prints
 * nothing: lines for the person running it go to the callbacks (rank 0's
 * only, except the log, which is every rank's, like zt_ctx_create's).
 */
#ifndef ZTRAIN_RUN_H
#define ZTRAIN_RUN_H

#include "ztrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start-up, for the "startup:" line: seconds this rank spent in each step
 * before the first training step, and where the weights came from. */
enum { ZT_RUN_CONFIG, ZT_RUN_PLANNING, ZT_RUN_ALLOCATION, ZT_RUN_WEIGHTS, ZT_RUN_DATA,
       ZT_RUN_NPHASES };
typedef struct zt_run_startup {
    double phase_s[ZT_RUN_NPHASES];
    const char *weights_from;   /* "" (random), " (checkpoint)", " (Hugging Face model)",
                                 * " (Hugging Face base)" */
    zt_startup ctx;             /* zt_ctx_startup's */
} zt_run_startup;

typedef struct zt_run_options {
    const char *config_file;    /* NULL: none (the keys already set in cfg, the environment) */
    int config_only;            /* stop after the effective configuration is known (its note) */
    const char *save_path;      /* the weights file at the end; NULL: <checkpoint.dir>/model.bin */
    int save_bf16;              /* its llm.c format: 0 version 3 (fp32), 1 version 5 (bf16) */
    int sample_tokens;          /* tokens sampled after training (0: none) */
    const char *sample_prompt;  /* its prompt (NULL: a newline) */
    /* the context's callbacks: the log (the training's progress lines and
     * warnings), metrics, the progress of a checkpoint restore and a
     * Hugging Face load (rank 0) */
    zt_callbacks cb;
    /* The caller's own checks of its settings, run where the configuration
     * is read: a failure is every rank's (NULL: none). */
    int (*check)(void *user, zt_status *st);
    /* Rank 0, once, just before the first training step (NULL: none). */
    void (*startup)(void *user, const zt_run_startup *su);
    /* Rank 0: one note for the person running it (the effective
     * configuration, where the weights were loaded from or saved to), text
     * ending with a newline (NULL: none). */
    void (*note)(void *user, const char *text);
    /* Rank 0: the sample, n tokens after the prompt (vocab 256: bytes) (NULL: none). */
    void (*sample)(void *user, const char *prompt, const int *tokens, int n, int vocab);
    void *user;                 /* for check, startup, note, sample */
    /* After a preemption save: 0, zt_run requeues the Slurm job (as
     * ztrain.requeue says) just before it returns; 1, it does not, and sets
     * r->requeue where the caller should, with zt_run_requeue, after its
     * own last line (the requeue starts the scheduler's kill of the job). */
    int defer_requeue;
} zt_run_options;

/* Options with their defaults: no file, no sample, nothing reported. */
zt_run_options zt_run_defaults(void);

typedef struct zt_run_result {
    long step;                  /* optimizer steps completed */
    char checkpoint[1024];      /* the newest checkpoint ("": none) */
    /* After a failure: */
    int config_refused;         /* the configuration was refused, before any work */
    int report;                 /* this rank is the one to report it (others failed
                                 * alike or quietly follow another rank's failure) */
    int name_rank;              /* its line should name the rank ("rank R: ...") */
    int abort_job;              /* a peer died or hangs (ZT_ECOMM, several ranks): the
                                 * context was not freed (that would wait for it); the
                                 * caller should end the job (MPI_Abort) */
    /* After ZT_EPREEMPTED with o->defer_requeue (rank 0): */
    int requeue;                /* the job should be requeued: zt_run_requeue */
    char requeue_mode[16];      /* ztrain.requeue */
} zt_run_result;

/* Runs it; cfg holds the caller's keys and is completed by the file, the
 * environment and ztrain.init_from.  ZT_OK; ZT_EPREEMPTED: stopped by a
 * preemption signal after a durable checkpoint (r->checkpoint; st says
 * so); any other code: st's line, and r says who reports it.  A rank that
 * succeeded while another failed returns ZT_ECOMM ("rank R failed") with
 * r->report 0. */
int zt_run(zt_config *cfg, const zt_run_options *o, zt_run_result *r, zt_status *st);
/* r->requeue set: requeue the Slurm job (`scontrol requeue`, as
 * ztrain.requeue says), its line to cb's log (NULL: none); else nothing. */
void zt_run_requeue(const zt_run_result *r, const zt_callbacks *cb);

#ifdef __cplusplus
}
#endif
#endif /* ZTRAIN_RUN_H */
