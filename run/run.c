/* run.c -- a whole training run (ztrain_run.h): the configuration, the
 * context, the weights, the data, the checkpoint session, training, the final
 * weights file and a sample, in named steps.  `ztrain train` is this plus its
 * argument parsing, printing and exit codes (cli/cmd_train.c). */
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "ztrain_run.h"
#include "config.h"
#include "arch.h"
#include "engine.h"
#include "runtime.h"
#include "ztrain_ckpt.h"
#include "ztrain_io.h"

/* One run's state, passed from step to step. */
typedef struct run {
    zt_config *cfg;
    const zt_run_options *o;
    zt_run_result *r;
    zt_status *st;
    int rank, nranks;
    zt_ctx *ctx;
    zt_ckpt_session *ck;
    int lora;
    const char *init_from;   /* the finalized configuration's ztrain.init_from */
    zt_run_startup su;
    double t;                /* the current phase's start */
    int reporter;            /* after a step all ranks agree on: the lowest failing rank */
    int quiet;               /* this rank succeeded while another failed (agreed) */
    /* the end of the run against the memory limit (check_end): a step that
     * does not fit on some rank is skipped, why says why (rank 0) */
    int skip_export, skip_sample;
    char why_export[512], why_sample[512];
    char saved[ZT_PATH_MAX + 16];   /* the weights file written ("": none) */
} run;

zt_run_options zt_run_defaults(void) {
    zt_run_options o;
    memset(&o, 0, sizeof o);
    return o;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the time since R->t, added to phase P; the next phase starts now */
static void lap(run *R, int p) {
    double now = mono_s();
    R->su.phase_s[p] += now - R->t;
    R->t = now;
}

static int fail(zt_status *st, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(zt_status *st, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return st->code = code;
}

/* Across the ranks: the lowest rank whose rc != 0, or -1 when all succeeded
 * (every rank calls it). */
static int first_failed_rank(int rc) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return rc ? 0 : -1;
    int me = zt_world_rank(), v = rc ? me : 1 << 30, out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out == 1 << 30 ? -1 : out;
}

static int any_rank(int flag) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return flag;
    int v = flag != 0, out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

/* A step every rank agrees on: rc, or ZT_ECOMM on a rank that succeeded
 * while R->reporter failed. */
static int agreed(run *R, int rc) {
    R->reporter = first_failed_rank(rc);
    if (R->reporter >= 0 && rc == ZT_OK) {
        R->quiet = 1;
        rc = fail(R->st, ZT_ECOMM, "rank %d failed", R->reporter);
    }
    return rc;
}

static void note(run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(run *R, const char *fmt, ...) {
    if (R->rank != 0 || !R->o->note) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!text) return;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    R->o->note(R->o->user, text);
    free(text);
}

static int mkdir_p(const char *dir) {
    char buf[ZT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; ++p) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return (mkdir(buf, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

/* 1. The configuration: the file, the environment, the caller's checks,
 * ztrain.init_from's config.json; every rank must have read the same, or
 * every rank fails with the failing (or differing) rank's error. */
static int configure(run *R) {
    zt_status *st = R->st;
    int rc = ZT_OK, hf_err = 0;
    if (R->o->config_file) rc = zt_config_load_file(R->cfg, R->o->config_file, st);
    if (rc == ZT_OK) rc = zt_config_load_env(R->cfg, st);
    if (rc == ZT_OK && R->o->check) rc = R->o->check(R->o->user, st);
    if (rc == ZT_OK) rc = zt_hf_record_init_from(R->cfg, st);   /* what export checks */
    if (rc == ZT_OK && R->cfg->init_from[0]) {   /* the model comes from its config.json */
        rc = zt_hf_read_config(R->cfg->init_from, R->cfg, st);
        hf_err = rc != ZT_OK;
    }
    rc = zt_config_agree(R->cfg, rc, st);
    hf_err = any_rank(hf_err);
    if (rc != ZT_OK) {   /* agreed: identical on every rank; rank 0 reports */
        /* anything wrong with the configuration (not an unreadable model directory) */
        R->r->config_refused = !hf_err;
        R->reporter = 0;
    }
    return rc;
}

/* 2. The context (its initial values owed, not computed: a checkpoint or
 * ztrain.init_from writes the parameters first; the first step's buffers
 * are populated meanwhile), and the effective configuration's note. */
static int create_context(run *R) {
    int rc = zt_ctx_create_ex(R->cfg, &R->o->cb, ZT_CTX_DEFER_INIT | ZT_CTX_PREFAULT, &R->ctx, R->st);
    if ((rc = agreed(R, rc)) != ZT_OK) return rc;
    zt_startup su;
    zt_ctx_startup(R->ctx, &su);
    double d = mono_s() - R->t;
    R->su.phase_s[ZT_RUN_PLANNING] = su.planning_s;
    R->su.phase_s[ZT_RUN_ALLOCATION] = d - su.planning_s - su.init_s;
    R->su.phase_s[ZT_RUN_WEIGHTS] = su.init_s;
    R->t = mono_s();
    const zt_config *ec = zt_ctx_config(R->ctx);
    R->lora = ec->model.lora_r > 0;
    R->init_from = ec->init_from;
    if (R->rank == 0 && R->o->note) {
        char *desc = zt_config_describe(ec);
        note(R, "effective configuration (%d rank%s):\n%s", R->nranks, R->nranks > 1 ? "s" : "",
             desc ? desc : "");
        free(desc);
    }
    if (R->init_from[0]) {   /* sliding window vs the training length */
        rc = zt_hf_check_config(R->init_from, ec, R->st);
        rc = agreed(R, rc);
    }
    lap(R, ZT_RUN_CONFIG);
    return rc;
}

/* Does this run write an llm.c weights file at its end (save_weights)? */
static int writes_weights(const run *R) {
    const zt_config *ec = zt_ctx_config(R->ctx);
    return (R->o->save_path || ec->ckpt_final) && !R->lora &&
           (R->o->save_path || zt_arch_of(&ec->model)->llmc_file);
}

/* The sample's longest forward (zt_sample's window): prompt and new tokens
 * but the last, at most the context; 0: no sample. */
static int sample_window(const run *R) {
    const zt_config *ec = zt_ctx_config(R->ctx);
    if (R->o->sample_tokens <= 0 || ec->model.seq_parallel > 1 || ec->model.expert_parallel > 1) return 0;
    size_t np = strlen(R->o->sample_prompt ? R->o->sample_prompt : "\n");
    long w = (long)(np ? np : 1) + R->o->sample_tokens - 1;
    if (w > ec->model.context) w = ec->model.context;
    return w > 1 ? (int)w : 1;
}

/* One end step against the pre-flight check's limit on every rank: 1 when
 * some rank's does not fit (why: rank 0's reason, or the rank's number). */
static int end_over(run *R, int step, int window, char *why, size_t n) {
    int fits = zt_ctx_end_fits(R->ctx, step, window, why, n);
    int r = first_failed_rank(!fits);
    if (r > 0 && R->rank == 0) snprintf(why, n, "it does not fit the memory limit on rank %d", r);
    return r >= 0;
}

/* 2b. Before step 1: the end of the run (the llm.c weights file, the text
 * sample) against the memory limit training fits.  A step that would not
 * fit is skipped at the end, with a line saying why and how to get it; the
 * weights file only when the final checkpoint holds the weights. */
static int check_end(run *R) {
    const zt_config *ec = zt_ctx_config(R->ctx);
    const int w = sample_window(R);
    if (writes_weights(R) && end_over(R, ZT_END_EXPORT, w, R->why_export, sizeof R->why_export)) {
        R->skip_export = ec->ckpt_final;
        if (R->skip_export)
            note(R, "memory: the llm.c weights file at the end of the run does not fit: %s; it will "
                 "not be written (the weights stay in the final checkpoint: ztrain ckpt export "
                 "--output FILE writes it)\n", R->why_export);
        else
            note(R, "memory: the llm.c weights file at the end of the run does not fit: %s; it is "
                 "still written, as no final checkpoint keeps the weights (checkpoint.final false)\n",
                 R->why_export);
    }
    if (w && end_over(R, ZT_END_SAMPLE, w, R->why_sample, sizeof R->why_sample)) {
        R->skip_sample = 1;
        note(R, "memory: the text sample at the end of the run ([1, %d] forward) does not fit: %s; it "
             "will be skipped (sample from the checkpoint on a larger device: ztrain sample "
             "--checkpoint DIR)\n", w, R->why_sample);
    }
    return ZT_OK;
}

/* 3. LoRA: the frozen base comes from ztrain.init_from on a resume too (a
 * checkpoint holds only the adapters; the restore checks the base's
 * fingerprint against the one the adapters were trained on); the adapters
 * start from a PEFT adapter (a resumed checkpoint wins).  Every rank
 * returns the same status. */
static int load_lora(run *R) {
    int rc = ZT_OK;
    if (R->lora && R->init_from[0]) rc = zt_hf_load(R->ctx, R->init_from, R->st);
    const char *peft = zt_ctx_config(R->ctx)->model.lora_from;
    if (rc == ZT_OK && R->lora && peft[0]) rc = zt_lora_load_peft(R->ctx, peft, R->st);
    lap(R, ZT_RUN_WEIGHTS);
    return rc;
}

/* 4. The token files. */
static int open_data(run *R) {
    int rc = agreed(R, zt_ctx_open_data(R->ctx, R->st));
    lap(R, ZT_RUN_DATA);
    return rc;
}

/* 5. Checkpoints: resume per checkpoint.resume, periodic/final/preemption
 * saves.  (A restore disarms the watchdog when it ends.) */
static int attach_checkpoints(run *R) {
    int rc = zt_ckpt_attach(R->ctx, &R->ck, R->st);
    /* (a preemption's requeue at zt_run's end, or the caller's) */
    zt_ckpt_session_defer_requeue(R->ck);
    zt_watchdog_arm(R->rank, R->nranks, R->cfg->comm_timeout_s,
                    "start-up (after the checkpoint resume)");
    rc = agreed(R, rc);
    zt_watchdog_disarm();
    if (rc == ZT_OK && zt_ckpt_session_last(R->ck)[0])
        snprintf(R->r->checkpoint, sizeof R->r->checkpoint, "%s", zt_ckpt_session_last(R->ck));
    return rc;
}

/* 6. The Hugging Face weights of ztrain.init_from (a resumed ztrain
 * checkpoint wins: auto-resume after a preemption), then the initial values
 * no load wrote. */
static int load_weights(run *R) {
    int rc = ZT_OK;
    const char *last = zt_ckpt_session_last(R->ck);
    R->su.weights_from = "";
    if (R->init_from[0] && !R->lora) {
        if (last[0]) {
            note(R, "init: resumed from checkpoint %s at step %ld; the Hugging Face weights of %s "
                 "are not loaded\n", last, zt_ctx_step(R->ctx), R->init_from);
        } else {
            rc = zt_hf_load(R->ctx, R->init_from, R->st);   /* every rank returns the same status */
            if (rc != ZT_OK) return rc;
            R->su.weights_from = " (Hugging Face model)";
        }
    }
    if (last[0]) R->su.weights_from = " (checkpoint)";
    else if (R->lora && R->init_from[0]) R->su.weights_from = " (Hugging Face base)";
    rc = agreed(R, zt_ctx_init_pending(R->ctx, R->st));
    lap(R, ZT_RUN_WEIGHTS);
    if (rc == ZT_OK && R->rank == 0 && R->o->startup) {
        zt_ctx_startup(R->ctx, &R->su.ctx);
        R->o->startup(R->o->user, &R->su);
    }
    return rc;
}

/* 7. Training to ztrain.steps. */
static int train(run *R) {
    zt_status *st = R->st;
    int rc = zt_train(R->ctx, st);
    R->r->step = zt_ctx_step(R->ctx);
    const char *last = zt_ckpt_session_last(R->ck);
    snprintf(R->r->checkpoint, sizeof R->r->checkpoint, "%s", last);
    if (rc == ZT_EPREEMPTED) {   /* every rank agreed, the checkpoint is durable */
        R->reporter = 0;
        return fail(st, rc, "preempted after step %ld: checkpoint %s saved", R->r->step, last);
    }
    if (rc != ZT_OK) {
        /* training failed with a background save in flight (a rank stopped
         * or died inside its writer shows as a training collective's
         * timeout): say so; zt_ckpt_detach abandons it */
        long inflight = zt_ckpt_session_inflight(R->ck);
        size_t l = strlen(st->msg);
        if (inflight >= 0 && l + 1 < sizeof st->msg)
            snprintf(st->msg + l, sizeof st->msg - l, "; the background checkpoint save of step %ld "
                     "in flight is abandoned (the newest checkpoint is still %s)", inflight,
                     last[0] ? last : "none");
    }
    return rc;
}

/* 7b. Training is over: the training and eval activation blocks are freed
 * before the weights file and the sample (the memory plan's end of run). */
static int release(run *R) {
    zt_ctx_release_activations(R->ctx);
    return ZT_OK;
}

/* 8. The weights file: an llm.c model file (GPT-2s); LoRA adapters and
 * other architectures stay in the final checkpoint. */
static int save_weights(run *R) {
    const zt_config *ec = zt_ctx_config(R->ctx);
    const char *save = R->o->save_path, *last = zt_ckpt_session_last(R->ck);
    if (!save && !ec->ckpt_final) {
        note(R, "weights: not saved (checkpoint.final false and no --save)\n");
        return ZT_OK;
    }
    if (R->lora) {   /* an llm.c file of the base alone would not be the trained model */
        note(R, "weights: the LoRA adapters are in the final checkpoint %s (ztrain ckpt export %s "
             "--peft DIR: a PEFT adapter; --hf DIR --merge: merged weights)\n", last, last);
        return ZT_OK;
    }
    if (!save && !zt_arch_of(&ec->model)->llmc_file) {
        note(R, "weights: in the final checkpoint %s (no llm.c model file for arch %s; a Hugging "
             "Face directory: ztrain ckpt export %s --hf DIR)\n", last, ec->model.arch, last);
        return ZT_OK;
    }
    char path[ZT_PATH_MAX + 16];
    if (save) snprintf(path, sizeof path, "%s", save);
    else snprintf(path, sizeof path, "%s/model.bin", ec->ckpt_dir);
    if (R->skip_export && last[0]) {
        note(R, "weights: %s not written, it does not fit: %s; the weights are in the final checkpoint "
             "%s (ztrain ckpt export %s --output %s writes it, on a larger device or the host)\n", path,
             R->why_export, last, last, path);
        return ZT_OK;
    }
    int rc = ZT_OK;
    if (!save && R->rank == 0 && mkdir_p(ec->ckpt_dir) != 0)
        rc = fail(R->st, ZT_EIO, "%s: cannot create directory: %s", ec->ckpt_dir, strerror(errno));
    if ((rc = agreed(R, rc)) != ZT_OK) return rc;
    rc = zt_save_weights_dtype(R->ctx, path, R->o->save_bf16, R->st);
    if (rc == ZT_OK) snprintf(R->saved, sizeof R->saved, "%s", path);
    if (rc == ZT_OK) note(R, "saved weights to %s\n", path);
    return rc;
}

/* 9. A sample (every rank: at stage 3 sampling gathers parameters). */
static int sample(run *R) {
    const zt_config *ec = zt_ctx_config(R->ctx);
    int n_new = R->o->sample_tokens;
    if (n_new <= 0) return ZT_OK;
    if (ec->model.seq_parallel > 1) {
        note(R, "sample: skipped (sequence_parallel_size=%d; sample from the checkpoint: ztrain "
             "sample --checkpoint DIR)\n", ec->model.seq_parallel);
        return ZT_OK;
    }
    if (ec->model.expert_parallel > 1) {
        note(R, "sample: skipped (expert_parallel_size=%d; sample from the checkpoint: ztrain "
             "sample --checkpoint DIR)\n", ec->model.expert_parallel);
        return ZT_OK;
    }
    if (R->skip_sample) {
        const char *last = zt_ckpt_session_last(R->ck);
        char how[ZT_PATH_MAX + 128];
        if (last[0]) snprintf(how, sizeof how, "ztrain sample --checkpoint %s on a larger device", last);
        else if (R->saved[0]) snprintf(how, sizeof how, "ztrain sample --weights %s", R->saved);
        else snprintf(how, sizeof how, "no checkpoint keeps the weights: checkpoint.final false");
        note(R, "sample: skipped, it does not fit: %s (%s; --sample-tokens sets its length, 0 none)\n",
             R->why_sample, how);
        return ZT_OK;
    }
    const char *prompt = R->o->sample_prompt ? R->o->sample_prompt : "\n";
    int V = ec->model.vocab, n = (int)strlen(prompt);
    int *in = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *out = malloc(sizeof(int) * (size_t)n_new);
    int rc = ZT_OK;
    if (!in || !out) {
        rc = fail(R->st, ZT_ENOMEM, "out of memory");
    } else {
        if (n == 0) { in[0] = 0; n = 1; }
        else for (int i = 0; i < n; ++i) in[i] = (unsigned char)prompt[i] % V;
        rc = zt_sample(R->ctx, in, n, n_new, 0.8, 0, ec->seed, out, R->st);
        if (rc == ZT_OK && R->rank == 0 && R->o->sample)
            R->o->sample(R->o->user, prompt, out, n_new, V);
    }
    free(in);
    free(out);
    return rc;
}

/* Who reports a failure: the configuration's (agreed) and a preemption:
 * rank 0, plainly; errors before an agreement point are the same on every
 * rank (rank 0 reports); after one, the lowest failing rank; a
 * communication failure is seen differently by each rank and the job is
 * aborted right after: every failing rank reports, naming itself.  A rank
 * that succeeded while another failed stays quiet. */
static void who_reports(run *R, int rc, int config_failed) {
    zt_run_result *r = R->r;
    if (R->quiet) return;
    if (config_failed || rc == ZT_EPREEMPTED) { r->report = R->rank == 0; return; }
    int reporter = R->reporter < 0 ? 0 : R->reporter;
    if (rc == ZT_ECOMM) reporter = R->rank;
    r->report = R->rank == reporter;
    r->name_rank = reporter > 0 || (rc == ZT_ECOMM && R->nranks > 1);
}

int zt_run(zt_config *cfg, const zt_run_options *o, zt_run_result *r, zt_status *st) {
    zt_run_options none = zt_run_defaults();
    zt_status st0;
    if (!st) st = &st0;
    memset(r, 0, sizeof *r);
    if (!o) o = &none;
    run R = {.cfg = cfg, .o = o, .r = r, .st = st, .rank = zt_world_rank(),
             .nranks = zt_world_size(), .reporter = -1, .t = mono_s()};
    R.su.weights_from = "";
    st->code = ZT_OK;
    st->msg[0] = '\0';
    if (!cfg) return fail(st, ZT_EINVAL, "zt_run: no configuration");

    int rc = configure(&R), config_failed = rc != ZT_OK;
    if (rc == ZT_OK) {
        /* start-up runs collectives no timeout covers (context creation, the
         * agreements below): the watchdog bounds them */
        zt_watchdog_arm(R.rank, R.nranks, cfg->comm_timeout_s,
                        "start-up (context, data, checkpoint resume)");
        lap(&R, ZT_RUN_CONFIG);
        rc = create_context(&R);
        int (*const steps[])(run *) = {check_end, load_lora, open_data, attach_checkpoints, load_weights,
                                       train, release, save_weights, sample};
        for (size_t i = 0; rc == ZT_OK && !o->config_only && i < sizeof steps / sizeof steps[0]; ++i)
            rc = steps[i](&R);
    }
    if (rc != ZT_OK) who_reports(&R, rc, config_failed);
    if (R.ctx) r->step = zt_ctx_step(R.ctx);
    const int requeue = rc == ZT_EPREEMPTED && zt_ckpt_session_requeue_pending(R.ck);
    zt_ckpt_detach(R.ck);
    if (rc == ZT_ECOMM && !R.quiet && R.nranks > 1) {
        /* a peer died or hangs: freeing the context would wait for it */
        r->abort_job = 1;
        return rc;
    }
    /* freeing the groups (and the caller's MPI_Finalize) are collective too */
    zt_watchdog_arm(R.rank, R.nranks, cfg->comm_timeout_s, "shutdown");
    zt_ctx_free(R.ctx);
    if (requeue) {
        /* last: the requeue starts the scheduler's kill of the job (the
         * caller deferring it says its own last line first) */
        snprintf(r->requeue_mode, sizeof r->requeue_mode, "%s", cfg->requeue);
        r->requeue = 1;
        if (!o->defer_requeue) {
            zt_run_requeue(r, &o->cb);
            r->requeue = 0;
        }
    }
    st->code = rc;
    return rc;
}

void zt_run_requeue(const zt_run_result *r, const zt_callbacks *cb) {
    if (r && r->requeue) zt_rt_requeue_as(r->requeue_mode, cb);
}
