/* ztrain.c -- entry point: the table of subcommands and its dispatch (the shared helpers: cli_util.c). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "ztrain_ckpt.h"

static void usage(FILE *fp);

static int cmd_version(int argc, char **argv) {
    printf("ztrain %d.%d.%d\n", ZTRAIN_VERSION_MAJOR, ZTRAIN_VERSION_MINOR, ZTRAIN_VERSION_PATCH);
    return ZT_EXIT_OK;
}

static int cmd_help(int argc, char **argv) {
    usage(stdout);
    return ZT_EXIT_OK;
}

/* The subcommands, in the order 'ztrain help' lists them.  env_check: the CLI's variables
 * (cli_env_check) are checked before the command runs (train checks them after MPI starts: rank 0
 * says it once).  help: its lines in 'ztrain help' after the name (NULL: an alias, not listed). */
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    int env_check;
    const char *help;
} commands[] = {
    {"train", cmd_train, 0,
     "train a model (run under mpirun/srun for data parallelism)\n"
     "           ztrain train --config FILE [--KEY VALUE ...]\n"},
    {"prep", cmd_prep, 1,
     "tokenize text into token files: byte-level, or with a Hugging Face\n"
     "           tokenizer (--tokenizer; JSON Lines, globs); re-shard token files;\n"
     "           chat data into loss-masked windows (--sft)\n"
     "           ztrain prep --input TEXT --output PREFIX [--tokenizer PATH] [...]\n"
     "           ztrain prep --tokens-in FILES --output PREFIX [--shard-tokens N]\n"
     "           ztrain prep --sft --input FILE.jsonl --tokenizer PATH [--template NAME]\n"
     "                       --seq-len N --output PREFIX\n"},
    {"sample", cmd_sample, 1,
     "generate text from saved weights or a checkpoint\n"
     "           (any checkpoint; LoRA/QLoRA: with the base it records)\n"
     "           ztrain sample (--weights FILE | --checkpoint PATH) [--tokenizer PATH]\n"
     "                         [--prompt TEXT | --chat TEXT] [--length N]\n"},
    {"ckpt", cmd_ckpt, 1,
     "list, inspect, verify or export checkpoints\n"
     "           ztrain ckpt list|inspect|verify|export ... (ztrain ckpt --help)\n"},
    {"estimate", cmd_estimate, 1,
     "predict peak memory per rank (device and host, per category)\n"
     "           ztrain estimate [--config FILE] [--model DIR] --world-size N [--json]\n"
     "                           [--plot FILE.svg]\n"
     "                           [--KEY VALUE ...]\n"},
    {"report", cmd_report, 1,
     "draw training runs' metrics files as one HTML page (loss, val loss, lr,\n"
     "           grad norm, tokens/s, memory; runs overlaid, configurations side by side)\n"
     "           ztrain report RUN.jsonl [RUN2.jsonl ...] -o REPORT.html\n"},
    {"version", cmd_version, 0, "print the version\n"},
    {"--version", cmd_version, 0, NULL},
    {"help", cmd_help, 0, NULL},
    {"--help", cmd_help, 0, NULL},
    {"-h", cmd_help, 0, NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *fp) {
    fprintf(fp, "usage: ztrain <command> [options]\n"
                "\n"
                "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; ++i)
        if (commands[i].help) fprintf(fp, "  %-8s %s", commands[i].name, commands[i].help);
    fprintf(fp,
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
    const char *name = argv[1];
    for (size_t i = 0; i < NCOMMANDS; ++i) {
        const struct command *c = &commands[i];
        if (strcmp(name, c->name)) continue;
        if (c->env_check) {
            zt_status st;
            if (cli_env_check(&st) != ZT_OK) {
                cli_error("%s", st.msg);
                return ZT_EXIT_USAGE;
            }
        }
        return c->run(argc - 1, argv + 1);
    }
    cli_error("unknown command '%s' (try 'ztrain help')", name);
    return ZT_EXIT_USAGE;
}
