/* cmd_train.c -- `ztrain train`: its flags, what it prints and its exit codes; the run itself
 * (configuration, training, weights, sample) is the library's zt_run (run/ztrain_run.h). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "ztrain_run.h"

static void log_cb(void *user, int level, const char *msg) {
    (void)user;
    if (zt_world_rank() != 0) return;
    FILE *fp = level <= ZT_LOG_WARN ? stderr : stdout;
    fprintf(fp, "%s%s\n", level == ZT_LOG_WARN ? "warning: " : "", msg);
    fflush(fp);
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

/* What `ztrain train` prints of a run (rank 0; zt_run's callbacks). */
typedef struct train_out {
    double ph[SU_N];   /* start, mpi: before zt_run; config: the argument parsing too */
    double t_main;
} train_out;

/* "startup: T s to the first step: start .. s, mpi .. s, ..., data .. s;
 * random init: ..." (rank 0's phases; `weights` says where they came from) */
static void startup_line(void *user, const zt_run_startup *su) {
    train_out *o = user;
    double ph[SU_N];
    memcpy(ph, o->ph, sizeof ph);
    for (int i = 0; i < ZT_RUN_NPHASES; ++i) ph[SU_CONFIG + i] += su->phase_s[i];
    double total = ph[SU_START] + (mono_s() - o->t_main);
    char line[1024];
    int n = snprintf(line, sizeof line, "startup: %.2f s to the first step%s:", total,
                     zt_world_size() > 1 ? " (rank 0)" : "");
    for (int i = 0; i < SU_N && n > 0 && (size_t)n < sizeof line; ++i)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %.2f s%s", i ? "," : "", su_name[i],
                      ph[i], i == SU_WEIGHTS ? su->weights_from : "");
    if (n > 0 && (size_t)n < sizeof line) {
        if (su->ctx.init_params)
            snprintf(line + n, sizeof line - (size_t)n, "; random init: %llu of %llu parameters "
                     "(%.2f s)", (unsigned long long)su->ctx.init_params,
                     (unsigned long long)su->ctx.num_params, su->ctx.init_s);
        else
            snprintf(line + n, sizeof line - (size_t)n, "; random init: none (all %llu "
                     "parameters loaded)", (unsigned long long)su->ctx.num_params);
    }
    printf("%s\n", line);
    fflush(stdout);
}

static void note_line(void *user, const char *text) {
    (void)user;
    fputs(text, stdout);
    fflush(stdout);
}

static void sample_text(void *user, const char *prompt, const int *tok, int n, int vocab) {
    (void)user;
    printf("---- sample (%d tokens, temperature 0.8) ----\n%s", n, prompt);
    for (int i = 0; i < n; ++i) {
        if (vocab == 256) putchar(tok[i]);
        else printf("%d ", tok[i]);
    }
    printf("\n---- end of sample ----\n");
    fflush(stdout);
}

static int env_check(void *user, zt_status *st) {
    (void)user;
    return cli_env_check(st);
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
    zt_run_options o = zt_run_defaults();
    o.config_file = getenv("ZTRAIN_CONFIG");
    o.sample_tokens = 256;
    o.sample_prompt = "\n";
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { train_usage(); return ZT_EXIT_OK; }

    train_out out;
    memset(&out, 0, sizeof out);
    double t = out.t_main = mono_s();
    out.ph[SU_START] = since_process_start();
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { cli_error("%s", st.msg); return ZT_EXIT_FAIL; }
    out.ph[SU_MPI] = mono_s() - t;
    t = mono_s();
    int rank = zt_world_rank();
    cli_crash_report_install(rank);
    zt_config *cfg = zt_config_new();
    int rc = ZT_OK, exit_code = ZT_EXIT_OK;
    if (!cfg) { cli_error("out of memory"); zt_finalize(); return ZT_EXIT_FAIL; }

    /* Flags first (they win whatever the order), then the file, then env
     * (zt_run). */
    for (int i = 1; i < argc && rc == ZT_OK; ++i) {
        const char *a = argv[i], *v = NULL;
        int r;
        if ((r = cli_opt(argc, argv, &i, "config", &v))) { if (r < 0) goto missing; o.config_file = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "save", &v))) { if (r < 0) goto missing; o.save_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "sample-prompt", &v))) { if (r < 0) goto missing; o.sample_prompt = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "sample-tokens", &v))) {
            if (r < 0) goto missing;
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 0 || n > 1000000) {
                snprintf(st.msg, sizeof st.msg, "--sample-tokens must be an integer in [0, 1000000], got '%s'", v);
                rc = ZT_EINVAL;
            }
            o.sample_tokens = (int)n;
            continue;
        }
        if (!strcmp(a, "--print-config")) { o.config_only = 1; continue; }
        if ((r = cli_opt(argc, argv, &i, "save-dtype", &v))) {
            if (r < 0) goto missing;
            if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
                snprintf(st.msg, sizeof st.msg, "--save-dtype must be fp32 or bf16, got '%s'", v);
                rc = ZT_EINVAL;
            }
            o.save_bf16 = !strcmp(v, "bf16");
            continue;
        }
        rc = cli_config_flag(cfg, argc, argv, &i, "train", &st);
        if (rc != ZT_OK) break;
        continue;
    missing:
        snprintf(st.msg, sizeof st.msg, "option '%s' needs a value", a);
        rc = ZT_EINVAL;
    }
    cli_progress progress;
    memset(&progress, 0, sizeof progress);
    o.cb.log = log_cb;
    if (rank == 0) {
        o.cb.progress = cli_progress_init(&progress, "load");   /* restore, HF load */
        o.startup = startup_line;
        o.note = note_line;
        o.sample = sample_text;
    }
    o.check = env_check;
    o.defer_requeue = 1;   /* (zt_run_requeue below, after the last line) */
    o.user = &out;
    out.ph[SU_CONFIG] = mono_s() - t;   /* the flags: zt_run adds the rest */
    zt_run_result res;
    if (rc == ZT_OK) {
        rc = zt_run(cfg, &o, &res, &st);
    } else {   /* a bad flag: the same on every rank, checked with the configuration's */
        int flag_rc = rc;
        rc = zt_config_agree(cfg, flag_rc, &st);
        memset(&res, 0, sizeof res);
        res.config_refused = 1;
        res.report = rank == 0;
    }
    if (rc == ZT_EPREEMPTED) {      /* every rank agreed, the checkpoint is durable */
        if (rank == 0) {
            fprintf(stderr, "ztrain: %s; exit code %d (run again with checkpoint.resume=auto to "
                    "continue)\n", st.msg, ZT_EXIT_PREEMPTED);
            fflush(stderr);
            /* the Slurm job requeued after that line: the requeue starts the
             * scheduler's kill (KillWait), which could cut it off */
            zt_run_requeue(&res, &o.cb);
            fflush(NULL);
        }
        exit_code = ZT_EXIT_PREEMPTED;
    } else if (rc != ZT_OK) {
        if (rank == 0 && !res.config_refused) cli_progress_end(&progress);
        if (res.report) {
            if (res.name_rank) cli_error("rank %d: %s", rank, st.msg);
            else cli_error("%s", st.msg);
        }
        exit_code = res.config_refused ? ZT_EXIT_USAGE : cli_exit_code(rc);
        if (res.abort_job) {
            /* A peer died or hangs: finalizing would wait for it forever. */
            fflush(NULL);
            MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : ZT_EXIT_FAIL);
        }
    } else if (rank == 0) {
        cli_progress_end(&progress);
    }
    zt_config_free(cfg);
    zt_finalize();
    return exit_code;
}
