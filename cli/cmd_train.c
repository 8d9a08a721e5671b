/* cmd_train.c -- `ztrain train`: configuration, training, weights, sample. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "arch.h"
#include "ztrain_ckpt.h"
#include "ztrain_io.h"

static void log_cb(void *user, int level, const char *msg) {
    (void)user;
    if (zt_world_rank() != 0) return;
    FILE *fp = level <= ZT_LOG_WARN ? stderr : stdout;
    fprintf(fp, "%s%s\n", level == ZT_LOG_WARN ? "warning: " : "", msg);
    fflush(fp);
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

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds since this process started (the kernel's start time, in clock
 * ticks since boot: /proc/self/stat field 22), i.e. before main -- the
 * loading of the shared libraries included; 0 where unknown. */
static double since_process_start(void) {
    FILE *fp = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp) fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');   /* after the command name, which may hold spaces */
    unsigned long long start = 0;
    /* fields 3.. after ')': state ppid ... starttime is field 22 */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                            "%*d %*d %llu", &start) != 1)
        return 0.0;
    struct timespec ts;
    const long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return 0.0;
    double d = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - (double)start / (double)hz;
    return d > 0.0 && d < 60.0 ? d : 0.0;
}

/* Start-up phases (seconds, this rank) for the "startup:" line. */
enum { SU_START, SU_MPI, SU_CONFIG, SU_PLANNING, SU_ALLOCATION, SU_WEIGHTS, SU_DATA, SU_N };
static const char *const su_name[SU_N] = {"start", "mpi", "config", "planning", "allocation",
                                          "weights", "data"};

/* "startup: T s to the first step: start .. s, mpi .. s, ..., data .. s;
 * random init: ..." (rank 0's phases; `weights` says where they came from) */
static void startup_line(const zt_ctx *ctx, const double *ph, double t_main, const char *from) {
    zt_startup su;
    zt_ctx_startup(ctx, &su);
    double total = ph[SU_START] + (mono_s() - t_main);
    char line[1024];
    int n = snprintf(line, sizeof line, "startup: %.2f s to the first step%s:", total,
                     zt_world_size() > 1 ? " (rank 0)" : "");
    for (int i = 0; i < SU_N && n > 0 && (size_t)n < sizeof line; ++i)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %.2f s%s", i ? "," : "", su_name[i],
                      ph[i], i == SU_WEIGHTS ? from : "");
    if (n > 0 && (size_t)n < sizeof line) {
        if (su.init_params)
            snprintf(line + n, sizeof line - (size_t)n, "; random init: %llu of %llu parameters "
                     "(%.2f s)", (unsigned long long)su.init_params,
                     (unsigned long long)su.num_params, su.init_s);
        else
            snprintf(line + n, sizeof line - (size_t)n, "; random init: none (all %llu "
                     "parameters loaded)", (unsigned long long)su.num_params);
    }
    printf("%s\n", line);
    fflush(stdout);
}

static void train_usage(void) {
    printf("usage: ztrain train [--config FILE] [--KEY VALUE | --KEY=VALUE ...]\n"
           "\n"
           "Trains a GPT model. Every configuration key can be given as a flag, by its\n"
           "JSON path (--optimizer.params.lr 1e-3) or short alias (--lr 1e-3); see\n"
           "docs/config.md. Precedence: flag > ZTRAIN_* environment > file > default.\n"
           "The config file may also come from ZTRAIN_CONFIG.\n"
           "\n"
           "  --config FILE          DeepSpeed-style JSON configuration\n"
           "  --init-from DIR        start from a Hugging Face model directory: its config.json\n"
           "                         sets ztrain.model.*, its safetensors weights the\n"
           "                         parameters (a resumed checkpoint wins; docs/huggingface.md)\n"
           "  --save PATH            weights file written at the end\n"
           "                         (default: <checkpoint.dir>/model.bin)\n"
           "  --save-dtype fp32|bf16 its llm.c format: version 3 (fp32, default) or 5 (bf16)\n"
           "  --sample-tokens N      generate N tokens after training (default 256; 0: none)\n"
           "  --sample-prompt TEXT   prompt for that sample (default: a newline)\n"
           "  --print-config         print the effective configuration and exit\n"
           "\nconfiguration keys:\n");
    char *h = zt_config_help_text();
    if (h) fputs(h, stdout);
    free(h);
}

int cmd_train(int argc, char **argv) {
    const char *config_path = getenv("ZTRAIN_CONFIG"), *save_path = NULL;
    const char *prompt = "\n";
    int sample_tokens = 256, print_only = 0, save_bf16 = 0;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { train_usage(); return ZT_EXIT_OK; }

    double ph[SU_N] = {0}, t_main = mono_s(), t = t_main;
    ph[SU_START] = since_process_start();
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    ph[SU_MPI] = mono_s() - t;
    t = mono_s();
    int rank = zt_world_rank();
    cli_crash_report_install(rank);
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    zt_ckpt_session *ck = NULL;
    int rc = ZT_OK, exit_code = ZT_EXIT_OK, reporter = 0;
    cli_progress progress;
    memset(&progress, 0, sizeof progress);
    if (!cfg) { rc = ZT_ENOMEM; snprintf(st.msg, sizeof st.msg, "out of memory"); goto done; }

    /* Flags first (they win whatever the order), then the file, then env. */
    for (int i = 1; i < argc && rc == ZT_OK; ++i) {
        const char *a = argv[i], *v = NULL;
        int r;
        if ((r = cli_opt(argc, argv, &i, "config", &v))) { if (r < 0) goto missing; config_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "save", &v))) { if (r < 0) goto missing; save_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "sample-prompt", &v))) { if (r < 0) goto missing; prompt = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "sample-tokens", &v))) {
            if (r < 0) goto missing;
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 0 || n > 1000000) {
                snprintf(st.msg, sizeof st.msg, "--sample-tokens must be an integer in [0, 1000000], got '%s'", v);
                rc = ZT_EINVAL;
            }
            sample_tokens = (int)n;
            continue;
        }
        if (!strcmp(a, "--print-config")) { print_only = 1; continue; }
        if ((r = cli_opt(argc, argv, &i, "save-dtype", &v))) {
            if (r < 0) goto missing;
            if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
                snprintf(st.msg, sizeof st.msg, "--save-dtype must be fp32 or bf16, got '%s'", v);
                rc = ZT_EINVAL;
            }
            save_bf16 = !strcmp(v, "bf16");
            continue;
        }
        rc = cli_config_flag(cfg, argc, argv, &i, "train", &st);
        if (rc != ZT_OK) break;
        continue;
    missing:
        snprintf(st.msg, sizeof st.msg, "option '%s' needs a value", a);
        rc = ZT_EINVAL;
    }
    if (rc == ZT_OK && config_path) rc = zt_config_load_file(cfg, config_path, &st);
    if (rc == ZT_OK) rc = zt_config_load_env(cfg, &st);
    if (rc == ZT_OK) rc = cli_env_check(&st);
    int hf_err = 0;
    if (rc == ZT_OK) rc = zt_hf_record_init_from(cfg, &st);   /* what export checks */
    if (rc == ZT_OK && cfg->init_from[0]) {   /* the model comes from its config.json */
        rc = zt_hf_read_config(cfg->init_from, cfg, &st);
        hf_err = rc != ZT_OK;
    }
    /* each rank read its own: every rank must have read the same one, or
     * every rank fails with the failing (or differing) rank's error */
    rc = zt_config_agree(cfg, rc, &st);
    hf_err = cli_any_rank(hf_err);
    if (rc != ZT_OK) {            /* agreed: identical on every rank */
        if (rank == 0) cli_error("%s", st.msg);
        /* anything wrong with the configuration; an unreadable model directory: 1 */
        exit_code = hf_err ? cli_exit_code(rc) : ZT_EXIT_USAGE;
        goto cleanup;
    }

    /* start-up runs collectives no timeout covers (context creation, the
     * agreements below): the watchdog bounds them */
    zt_watchdog_arm(rank, zt_world_size(), cfg->comm_timeout_s,
                    "start-up (context, data, checkpoint resume)");
    zt_callbacks cb = {log_cb, NULL, NULL, {NULL, NULL}};
    if (rank == 0) cb.progress = cli_progress_init(&progress, "load");   /* restore, HF load */
    ph[SU_CONFIG] = mono_s() - t;
    t = mono_s();
    /* the initial values are owed, not computed: a checkpoint or
     * --init-from writes the parameters first (zt_ctx_init_pending below);
     * the first step's buffers are populated meanwhile (ZT_CTX_PREFAULT) */
    rc = zt_ctx_create_ex(cfg, &cb, ZT_CTX_DEFER_INIT | ZT_CTX_PREFAULT, &ctx, &st);
    if ((reporter = cli_first_failed_rank(rc)) >= 0) goto agreed_fail;
    {
        zt_startup su;
        zt_ctx_startup(ctx, &su);
        ph[SU_PLANNING] = su.planning_s;
        ph[SU_ALLOCATION] = mono_s() - t - su.planning_s - su.init_s;
        ph[SU_WEIGHTS] = su.init_s;
    }
    t = mono_s();
    if (rank == 0) {
        char *d = zt_config_describe(zt_ctx_config(ctx));
        printf("effective configuration (%d rank%s):\n%s", zt_world_size(),
               zt_world_size() > 1 ? "s" : "", d ? d : "");
        fflush(stdout);
        free(d);
    }
    const char *init_from = zt_ctx_config(ctx)->init_from;
    if (init_from[0]) {   /* sliding window vs the training length */
        rc = zt_hf_check_config(init_from, zt_ctx_config(ctx), &st);
        if ((reporter = cli_first_failed_rank(rc)) >= 0) goto agreed_fail;
    }
    if (print_only) goto done;
    ph[SU_CONFIG] += mono_s() - t;
    t = mono_s();
    const char *from = "";
    const int lora = zt_ctx_config(ctx)->model.lora_r > 0;
    if (lora && init_from[0]) {
        /* LoRA: the frozen base comes from ztrain.init_from on a resume too
         * (a checkpoint holds only the adapters; the restore checks the
         * base's fingerprint against the one the adapters were trained on) */
        rc = zt_hf_load(ctx, init_from, &st);
        if (rc != ZT_OK) goto done;
    }
    if (lora && zt_ctx_config(ctx)->model.lora_from[0]) {
        /* the adapters start from a PEFT adapter (a resumed checkpoint wins) */
        rc = zt_lora_load_peft(ctx, zt_ctx_config(ctx)->model.lora_from, &st);
        if (rc != ZT_OK) goto done;
    }
    ph[SU_WEIGHTS] += mono_s() - t;
    t = mono_s();
    rc = zt_ctx_open_data(ctx, &st);
    if ((reporter = cli_first_failed_rank(rc)) >= 0) goto agreed_fail;
    ph[SU_DATA] = mono_s() - t;
    t = mono_s();
    /* checkpoints: resume per checkpoint.resume, periodic/final/preemption saves */
    rc = zt_ckpt_attach(ctx, &ck, &st);
    /* (a restore disarms the watchdog when it ends) */
    zt_watchdog_arm(rank, zt_world_size(), cfg->comm_timeout_s, "start-up (after the checkpoint resume)");
    reporter = cli_first_failed_rank(rc);
    zt_watchdog_disarm();
    if (reporter >= 0) goto agreed_fail;
    if (init_from[0] && !lora) {
        /* a resumed ztrain checkpoint (auto-resume after a preemption) wins */
        if (zt_ckpt_session_last(ck)[0]) {
            if (rank == 0)
                printf("init: resumed from checkpoint %s at step %ld; the Hugging Face weights "
                       "of %s are not loaded\n", zt_ckpt_session_last(ck), zt_ctx_step(ctx),
                       init_from);
        } else {
            rc = zt_hf_load(ctx, init_from, &st);   /* every rank returns the same status */
            if (rc != ZT_OK) goto done;
            from = " (Hugging Face model)";
        }
        fflush(stdout);
    }
    if (zt_ckpt_session_last(ck)[0]) from = " (checkpoint)";
    else if (lora && init_from[0]) from = " (Hugging Face base)";
    /* what no load wrote gets its initial values now (none after a load) */
    rc = zt_ctx_init_pending(ctx, &st);
    if ((reporter = cli_first_failed_rank(rc)) >= 0) goto agreed_fail;
    ph[SU_WEIGHTS] += mono_s() - t;
    if (rank == 0) startup_line(ctx, ph, t_main, from);
    rc = zt_train(ctx, &st);
    if (rc == ZT_EPREEMPTED) {      /* every rank agreed, the checkpoint is durable */
        if (rank == 0) {
            fprintf(stderr, "ztrain: preempted after step %ld: checkpoint %s saved; exit code %d "
                    "(run again with checkpoint.resume=auto to continue)\n", zt_ctx_step(ctx),
                    zt_ckpt_session_last(ck), ZT_EXIT_PREEMPTED);
            fflush(stderr);
        }
        exit_code = ZT_EXIT_PREEMPTED;
        goto cleanup;
    }
    if (rc != ZT_OK) {
        /* training failed with a background save in flight (a rank stopped
         * or died inside its writer shows as a training collective's
         * timeout): say so; zt_ckpt_detach abandons it */
        long inflight = zt_ckpt_session_inflight(ck);
        size_t l = strlen(st.msg);
        if (inflight >= 0 && l + 1 < sizeof st.msg)
            snprintf(st.msg + l, sizeof st.msg - l, "; the background checkpoint save of step %ld "
                     "in flight is abandoned (the newest checkpoint is still %s)", inflight,
                     zt_ckpt_session_last(ck)[0] ? zt_ckpt_session_last(ck) : "none");
        goto done;
    }

    char path[ZT_PATH_MAX + 16];
    const zt_config *ec = zt_ctx_config(ctx);
    if (save_path) snprintf(path, sizeof path, "%s", save_path);
    else snprintf(path, sizeof path, "%s/model.bin", ec->ckpt_dir);
    if (lora) {
        /* an llm.c file of the base alone would not be the trained model */
        if (rank == 0)
            printf("weights: the LoRA adapters are in the final checkpoint %s (ztrain ckpt export "
                   "%s --peft DIR: a PEFT adapter; --hf DIR --merge: merged weights)\n",
                   zt_ckpt_session_last(ck), zt_ckpt_session_last(ck));
        goto after_save;
    }
    if (!save_path && !zt_arch_of(&ec->model)->llmc_file) {
        /* llm.c model files hold GPT-2s only: the final checkpoint has the weights */
        if (rank == 0)
            printf("weights: in the final checkpoint %s (no llm.c model file for arch %s; a "
                   "Hugging Face directory: ztrain ckpt export %s --hf DIR)\n",
                   zt_ckpt_session_last(ck), ec->model.arch, zt_ckpt_session_last(ck));
        goto after_save;
    }
    if (!save_path && rank == 0 && mkdir_p(ec->ckpt_dir) != 0) {
        rc = ZT_EIO;
        snprintf(st.msg, sizeof st.msg, "%s: cannot create directory: %s", ec->ckpt_dir, strerror(errno));
    }
    if ((reporter = cli_first_failed_rank(rc)) >= 0) goto agreed_fail;
    rc = zt_save_weights_dtype(ctx, path, save_bf16, &st);
    if (rc != ZT_OK) goto done;
    if (rank == 0) printf("saved weights to %s\n", path);
after_save:

    if (sample_tokens > 0 && ec->model.seq_parallel > 1) {
        if (rank == 0)
            printf("sample: skipped (sequence_parallel_size=%d; sample from the checkpoint: ztrain "
                   "sample --checkpoint DIR)\n", ec->model.seq_parallel);
        sample_tokens = 0;
    }
    if (sample_tokens > 0) {   /* every rank: at stage 3 sampling gathers parameters */
        int V = ec->model.vocab, n = (int)strlen(prompt);
        int *in = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
        int *outt = malloc(sizeof(int) * (size_t)sample_tokens);
        if (!in || !outt) { free(in); free(outt); rc = ZT_ENOMEM; snprintf(st.msg, sizeof st.msg, "out of memory"); goto done; }
        if (n == 0) { in[0] = 0; n = 1; }
        else for (int i = 0; i < n; ++i) in[i] = (unsigned char)prompt[i] % V;
        rc = zt_sample(ctx, in, n, sample_tokens, 0.8, 0, ec->seed, outt, &st);
        if (rc == ZT_OK && rank == 0) {
            printf("---- sample (%d tokens, temperature 0.8) ----\n%s", sample_tokens, prompt);
            for (int i = 0; i < sample_tokens; ++i) {
                if (V == 256) putchar(outt[i]);
                else printf("%d ", outt[i]);
            }
            printf("\n---- end of sample ----\n");
        }
        free(in);
        free(outt);
    }

    goto done;
agreed_fail:
    /* Another rank failed while this one succeeded: exit quietly. */
    if (rc == ZT_OK) { exit_code = ZT_EXIT_FAIL; goto cleanup; }
done:
    /* One line from one rank: errors before an agreement point are the
     * same on every rank (rank 0 reports); after one, the lowest failing
     * rank reports. */
    if (reporter < 0) reporter = 0;
    /* A communication failure is seen differently by each rank and the
     * job is aborted right after: every failing rank reports. */
    if (rc == ZT_ECOMM) reporter = rank;
    if (rank == 0) cli_progress_end(&progress);
    if (rc != ZT_OK) {
        if (rank == reporter) {
            if (reporter > 0 || (rc == ZT_ECOMM && zt_world_size() > 1)) cli_error("rank %d: %s", rank, st.msg);
            else cli_error("%s", st.msg);
        }
        exit_code = cli_exit_code(rc);
    }
cleanup:
    zt_ckpt_detach(ck);
    if (rc == ZT_ECOMM && zt_world_size() > 1) {
        /* A peer died or hangs: finalizing would wait for it forever. */
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : ZT_EXIT_FAIL);
    }
    /* freeing the groups and MPI_Finalize are collective too */
    if (cfg) zt_watchdog_arm(rank, zt_world_size(), cfg->comm_timeout_s, "shutdown");
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    zt_finalize();
    return exit_code;
}
