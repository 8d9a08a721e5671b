/* cli_util.c -- the helpers the subcommands of cli/ share (cli.h): the error line and exit codes,
 * option parsing, a configuration key given as a flag, and the checkpoint a PATH names. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* PATH -> a checkpoint: a file or a step directory as is; a directory of
 * checkpoints -> its newest committed one (*is_dir = 1; -1 if none). */
int cli_ckpt_pick(const char *path, char *out, size_t n, int *is_dir) {
    struct stat sb;
    char probe[4200];
    *is_dir = 0;
    snprintf(out, n, "%s", path);
    snprintf(probe, sizeof probe, "%s/%s", path, ZT_CKPT_FILE);
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || stat(probe, &sb) == 0) return 0;
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    if (!strncmp(base, "step-", 5)) return 0;     /* a step directory missing its file */
    *is_dir = 1;
    zt_ckpt_entry *e = NULL;
    int k = 0, found = 0;
    zt_status st;
    if (zt_ckpt_list(path, &e, &k, &st) != ZT_OK) return -1;
    for (int i = 0; i < k && !found; ++i)
        if (e[i].state == 0) { snprintf(out, n, "%s/%s", path, e[i].name); found = 1; }
    free(e);
    return found ? 0 : -1;
}
