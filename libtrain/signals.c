/* signals.c -- preemption signals (see signals.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "signals.h"

static volatile sig_atomic_t g_received = 0;

static struct {
    int installed;
    int signo[3];             /* SIGTERM, SIGUSR2 and the configured one (0 = unused) */
    struct sigaction old[3];
} g_inst;

static void on_signal(int signo) {
    /* async-signal-safe: one store to a sig_atomic_t */
    g_received = signo;
}

static const struct { const char *name; int signo; } g_names[] = {
    {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGHUP", SIGHUP},
};

int zt_signal_from_name(const char *name, int *signo, zt_status *st) {
    if (!name) return zt_fail(st, ZT_EINVAL, "no signal name");
    const char *n = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
    if (strcasecmp(n, "USR1") == 0)
        return zt_fail(st, ZT_EINVAL, "preemption signal %s refused: SIGUSR1 is reserved "
                       "(NCCL uses it); use SIGUSR2, SIGTERM, SIGINT or SIGHUP", name);
    for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; ++i)
        if (strcasecmp(n, g_names[i].name + 3) == 0) {
            *signo = g_names[i].signo;
            return ZT_OK;
        }
    return zt_fail(st, ZT_EINVAL, "unknown preemption signal '%s': use SIGUSR2, SIGTERM, "
                   "SIGINT or SIGHUP", name);
}

const char *zt_signal_name(int signo) {
    static char buf[32];
    for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; ++i)
        if (g_names[i].signo == signo) return g_names[i].name;
    if (signo == SIGUSR1) return "SIGUSR1";
    snprintf(buf, sizeof buf, "signal %d", signo);
    return buf;
}

void zt_preempt_uninstall(void) {
    if (!g_inst.installed) return;
    for (int i = 2; i >= 0; --i)
        if (g_inst.signo[i]) sigaction(g_inst.signo[i], &g_inst.old[i], NULL);
    memset(&g_inst, 0, sizeof g_inst);
}

int zt_preempt_install(int signo, zt_status *st) {
    if (signo == SIGUSR1)
        return zt_fail(st, ZT_EINVAL, "SIGUSR1 cannot be the preemption signal (NCCL uses it)");
    zt_preempt_uninstall();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;      /* I/O and MPI calls continue after the handler */
    /* SIGUSR2 always: launchers forward it (Open MPI's mpirun forwards
     * SIGUSR2 to every rank but turns SIGTERM into an abort), so
     * jobscripts/ztrain-mpirun.sh converts a SIGTERM/SIGINT/SIGHUP it
     * receives into SIGUSR2 whatever ztrain.preempt_signal is */
    int want[3] = {SIGTERM, SIGUSR2, signo != SIGTERM && signo != SIGUSR2 ? signo : 0};
    for (int i = 0; i < 3; ++i) {
        if (!want[i]) continue;
        if (sigaction(want[i], &sa, &g_inst.old[i]) != 0) {
            zt_preempt_uninstall();
            return zt_fail(st, ZT_EINTERNAL, "cannot install a handler for %s",
                           zt_signal_name(want[i]));
        }
        g_inst.signo[i] = want[i];
        g_inst.installed = 1;
    }
    return ZT_OK;
}

int zt_preempt_local(void) { return (int)g_received; }
void zt_preempt_clear(void) { g_received = 0; }

int zt_preempt_agree(zt_group *g, int *signo, int *aux, zt_status *st) {
    int32_t v[2] = {(int32_t)g_received, aux ? (int32_t)*aux : 0};
    if (g && g->size > 1) ZT_TRY(g->ops->allreduce_max(g, v, 2, ZT_I32, st));
    *signo = (int)v[0];
    if (aux) *aux = (int)v[1];
    return ZT_OK;
}
