/* cli.h -- the ztrain command-line program. */
#ifndef ZT_CLI_H
#define ZT_CLI_H
#include "ztrain.h"

/* Exit codes (documented in README): */
#define ZT_EXIT_OK 0
#define ZT_EXIT_FAIL 1      /* runtime failure: data, I/O, communication */
#define ZT_EXIT_USAGE 2     /* bad command line or configuration */
#define ZT_EXIT_PREEMPTED 3 /* stopped by a preemption signal after saving a checkpoint */

int cmd_train(int argc, char **argv);
int cmd_prep(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* ---- the helpers the subcommands share (cli_util.c) */

/* Print "ztrain: error: <msg>" on stderr (one line). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* PATH -> a checkpoint: a file or a step directory as is; a
 * directory of checkpoints -> its newest committed one (*is_dir = 1); -1 if
 * it has none. */
int cli_ckpt_pick(const char *path, char *out, size_t n, int *is_dir);
/* Exit code for a zt_code. */
int cli_exit_code(int code);
/* Option parsing: is argv[*i] "--name" or "--name=value"?  On a match sets
 * *val (the value, from "=" or the next argument, advancing *i) and
 * returns 1; returns -1 when the value is missing. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* A generic configuration option: argv[*i] is "--key" or "--key=value"
 * for any config key or flag alias (a bare boolean means true; other keys
 * take "=value" or the next argument, advancing *i).  Sets the key with
 * flag precedence.  Returns ZT_OK or a code with st filled; `cmd` names the
 * subcommand for the help hint. */
int cli_config_flag(zt_config *cfg, int argc, char **argv, int *i, const char *cmd,
                    zt_status *st);

/* Progress of long work on stderr (cli/progress.c), fed by a library's
 * zt_progress: on a terminal one line redrawn with \r (done / total, rate,
 * ETA) at most every 0.2 s from 0.5 s on; otherwise a plain line every 30 s.
 * ZTRAIN_PROGRESS=0 turns it off; ZTRAIN_PROGRESS_INTERVAL=SECONDS sets the
 * plain lines' interval and the terminal's first delay (tests use 0). */
typedef struct cli_progress {
    const char *label;
    int tty, off, shown, active;
    const char *unit;
    double t0, last, delay, every;
    uint64_t done, total;
} cli_progress;
zt_progress cli_progress_init(cli_progress *p, const char *label);
/* Work that ended early (an error): a terminal's line is finished with a
 * newline.  (A final update does that itself.) */
void cli_progress_end(cli_progress *p);
#define CLI_PROGRESS_INTERVAL_MAX 1e6   /* seconds */
/* The CLI's own variables, checked before a command runs: ZTRAIN_PROGRESS
 * and ZTRAIN_CRASH_REPORT (booleans: 1/0, true/false, yes/no, on/off) and
 * ZTRAIN_PROGRESS_INTERVAL (seconds, 0 to 1e6).  ZT_EINVAL naming the
 * variable, its value and what it takes (zt_env_bool, zt_env_double). */
int cli_env_check(zt_status *st);

/* The fatal-signal report (cli/crash.c): after MPI_Init, a SIGSEGV, SIGBUS,
 * SIGFPE or SIGILL prints "ztrain: fatal: rank R: SIGSEGV at address A,
 * instruction P (object+off: symbol+off)" -- for an instruction in no
 * loaded object (a NULL function pointer) also the call site -- and a
 * backtrace, then takes the default action.  Returns 1 when installed (0:
 * a sanitizer build, or ZTRAIN_CRASH_REPORT=0). */
int cli_crash_report_install(int rank);

#endif
