/* ztrain.c -- entry point: subcommand dispatch and shared CLI helpers. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "ztrain_ckpt.h"

void cli_error(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ztrain: error: %s\n", buf);
    fflush(stderr);
}

int cli_exit_code(int code) {
    switch (code) {
    case ZT_OK: return ZT_EXIT_OK;
    case ZT_EINVAL: case ZT_EUNSUPPORTED: return ZT_EXIT_USAGE;
    case ZT_EPREEMPTED: return ZT_EXIT_PREEMPTED;
    default: return ZT_EXIT_FAIL;
    }
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    if (strncmp(a, "--", 2) != 0) return 0;
    a += 2;
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') { *val = a + n + 1; return 1; }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *val = argv[++*i];
    return 1;
}

int cli_first_failed_rank(int rc) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return rc ? 0 : -1;
    int me = zt_world_rank(), v = rc ? me : 1 << 30, out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out == 1 << 30 ? -1 : out;
}

int cli_any_rank(int flag) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return flag;
    int v = flag != 0, out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: ztrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  train    train a model (run under mpirun/srun for data parallelism)\n"
            "           ztrain train --config FILE [--KEY VALUE ...]\n"
            "  prep     tokenize text into token files: byte-level, or with a Hugging Face\n"
            "           tokenizer (--tokenizer; JSON Lines, globs); re-shard token files;\n"
            "           chat data into loss-masked windows (--sft)\n"
            "           ztrain prep --input TEXT --output PREFIX [--tokenizer PATH] [...]\n"
            "           ztrain prep --tokens-in FILES --output PREFIX [--shard-tokens N]\n"
            "           ztrain prep --sft --input FILE.jsonl --tokenizer PATH [--template NAME]\n"
            "                       --seq-len N --output PREFIX\n"
            "  sample   generate text from saved weights or a checkpoint\n"
            "           ztrain sample (--weights FILE | --checkpoint PATH) [--tokenizer PATH]\n"
            "                         [--prompt TEXT] [--length N]\n"
            "  ckpt     list, inspect, verify or export checkpoints\n"
            "           ztrain ckpt list|inspect|verify|export ... (ztrain ckpt --help)\n"
            "  estimate predict peak memory per rank (device and host, per category)\n"
            "           ztrain estimate [--config FILE] [--model DIR] --world-size N [--json]\n"
            "                           [--KEY VALUE ...]\n"
            "  version  print the version\n"
            "\n"
            "'ztrain <command> --help' describes a command's options.\n"
            "Long work (prep, export, checkpoint restore, Hugging Face loads) shows its\n"
            "progress on stderr: one updating line on a terminal, else a line every 30 s\n"
            "(ZTRAIN_PROGRESS=0: none; ZTRAIN_PROGRESS_INTERVAL=SECONDS).\n"
            "Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration,\n"
            "3 preempted (SIGTERM or ztrain.preempt_signal): a checkpoint was saved.\n");
}

/* The checkpoint watchdog's end of a hung job (zt_watchdog_set_handler): the
 * one error line, then the runtime-failure status; mpirun stops the other
 * ranks. */
static void watchdog_exit(const char *line, void *user) {
    (void)user;
    ssize_t k = write(STDERR_FILENO, line, strlen(line));
    (void)k;
    _exit(ZT_EXIT_FAIL);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return ZT_EXIT_USAGE; }
    zt_watchdog_set_handler(watchdog_exit, NULL);
    const char *cmd = argv[1];
    /* (train checks them after MPI starts: rank 0 says it once) */
    if (!strcmp(cmd, "prep") || !strcmp(cmd, "sample") || !strcmp(cmd, "ckpt") || !strcmp(cmd, "estimate")) {
        zt_status st;
        if (cli_env_check(&st) != ZT_OK) {
            cli_error("%s", st.msg);
            return ZT_EXIT_USAGE;
        }
    }
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "prep")) return cmd_prep(argc - 1, argv + 1);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc - 1, argv + 1);
    if (!strcmp(cmd, "ckpt")) return cmd_ckpt(argc - 1, argv + 1);
    if (!strcmp(cmd, "estimate")) return cmd_estimate(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("ztrain %d.%d.%d\n", ZTRAIN_VERSION_MAJOR, ZTRAIN_VERSION_MINOR, ZTRAIN_VERSION_PATCH);
        return ZT_EXIT_OK;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return ZT_EXIT_OK;
    }
    cli_error("unknown command '%s' (try 'ztrain help')", cmd);
    return ZT_EXIT_USAGE;
}

int cli_config_flag(zt_config *cfg, int argc, char **argv, int *i, const char *cmd,
                    zt_status *st) {
    const char *a = argv[*i], *v;
    if (strncmp(a, "--", 2) != 0 || !a[2]) {
        snprintf(st->msg, sizeof st->msg, "unexpected argument '%s' (options start with --)", a);
        return st->code = ZT_EINVAL;
    }
    char key[256];
    const char *eq = strchr(a + 2, '=');
    size_t kl = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
    if (kl >= sizeof key) kl = sizeof key - 1;
    memcpy(key, a + 2, kl);
    key[kl] = '\0';
    int isbool = zt_config_key_is_bool(key);
    /* --no-FLAG: a boolean flag set to false (e.g. --no-ckpt-async) */
    if (isbool < 0 && !strncmp(key, "no-", 3) && zt_config_key_is_bool(key + 3) == 1) {
        if (eq) {
            snprintf(st->msg, sizeof st->msg, "option '--%s' takes no value (use --%s=VALUE)", key,
                     key + 3);
            return st->code = ZT_EINVAL;
        }
        return zt_config_set(cfg, key + 3, "false", ZT_SRC_FLAG, st);
    }
    if (isbool < 0) {
        snprintf(st->msg, sizeof st->msg, "unknown option '--%s' (see 'ztrain %s --help' and "
                 "docs/config.md)", key, cmd);
        return st->code = ZT_EINVAL;
    }
    if (eq) v = eq + 1;
    else if (isbool == 1 && (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0)) v = "true";
    else if (*i + 1 < argc) v = argv[++*i];
    else {
        snprintf(st->msg, sizeof st->msg, "option '%s' needs a value", a);
        return st->code = ZT_EINVAL;
    }
    return zt_config_set(cfg, key, v, ZT_SRC_FLAG, st);
}
