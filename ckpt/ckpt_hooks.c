/*
 * ckpt_hooks.c -- test-only fault injection: ZT_CKPT_CRASH_AT crash points
 * and the check of the test hooks' variables when a session opens
 * (docs/checkpoints.md "Test-only environment variables").
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt_internal.h"

/* The phases of ck_crash_point's calls. */
static const char *const crash_phases[] = {"startup", "save_tensors", "save_metadata", "after_data_write",
                                           "before_rename", "after_rename_before_latest", "during_prune", NULL};

/* ZT_CKPT_CRASH_AT's parts: stop, the phase's index, the step (-1: any). */
static int crash_at(const char *v, int *stop, int *phase, long *step) {
    *stop = strncmp(v, "stop:", 5) == 0;
    if (*stop) v += 5;
    *step = -1;
    const char *at = strchr(v, '@');
    size_t n = at ? (size_t)(at - v) : strlen(v);
    for (*phase = 0; crash_phases[*phase]; ++*phase)
        if (strlen(crash_phases[*phase]) == n && !strncmp(v, crash_phases[*phase], n)) break;
    if (!crash_phases[*phase]) return -1;
    if (!at) return 0;
    char *end;
    errno = 0;
    *step = strtol(at + 1, &end, 10);
    return end == at + 1 || *end || errno || *step < 0 || !isdigit((unsigned char)at[1]) ? -1 : 0;
}

int ck_env_check(int world, zt_status *st) {
    const char *v = getenv("ZT_CKPT_CRASH_AT");
    int stop, phase;
    long x;
    if (v && *v && crash_at(v, &stop, &phase, &x) != 0) {
        char list[256];
        size_t k = 0;
        for (int i = 0; crash_phases[i]; i++)
            k += (size_t)snprintf(list + k, k < sizeof list ? sizeof list - k : 0, "%s%s", i ? ", " : "",
                                  crash_phases[i]);
        return zt_fail(st, ZT_EINVAL, "ZT_CKPT_CRASH_AT='%s': expected [stop:]PHASE[@STEP] with PHASE one of "
                       "%s and STEP an integer >= 0", v, list);
    }
    ZT_TRY(zt_env_int("ZT_CKPT_CRASH_RANK", 0, world - 1, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_WRITE_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_COPY_DELAY_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_STEP_SLEEP_MS", 0, CK_ENV_MS_MAX, 0, &x, st));
    ZT_TRY(zt_env_int("ZT_CKPT_WRITER_NICE", 0, 19, 19, &x, st));
    return zt_env_bool("ZT_CKPT_DIRECT_IO", 1, &phase, st);
}

void ck_crash_point(const char *phase, long step) {
    const char *v = getenv("ZT_CKPT_CRASH_AT");
    int stop, k;
    long want, rank;
    if (!v || !*v || crash_at(v, &stop, &k, &want) != 0 || strcmp(crash_phases[k], phase)) return;
    if (want >= 0 && want != step) return;
    zt_env_int("ZT_CKPT_CRASH_RANK", 0, INT_MAX, -1, &rank, NULL);
    if (rank >= 0 && rank != zt_world_rank()) return;
    fprintf(stderr, "ZT_CKPT_CRASH_AT=%s: %s rank %d (pid %ld) at step %ld\n", v,
            stop ? "stopping" : "killing", zt_world_rank(), (long)getpid(), step);
    fflush(stderr);
    raise(stop ? SIGSTOP : SIGKILL);
}
