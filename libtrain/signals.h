/*
 * signals.h -- preemption signals: catch, agree at a step boundary.
 *
 * zt_preempt_install() installs an async-signal-safe handler for SIGTERM,
 * SIGUSR2 (what launchers forward) and the configured ztrain.preempt_signal
 * (default SIGUSR2).  The handler only
 * records the signal number in a sig_atomic_t flag; nothing else happens in
 * signal context.  At every optimizer-step boundary the checkpoint step hook
 * calls zt_preempt_agree(), an all-reduce (max) of the local flags over the
 * world group, so that every rank sees the same decision at the same step
 * even when the signal reached only some ranks.
 *
 * SIGUSR1 is never used: NCCL uses it.  (The key table, config_keys.c,
 * refuses it for ztrain.preempt_signal.)
 */
#ifndef ZT_SIGNALS_H
#define ZT_SIGNALS_H
#include "comm.h"

/* Signal number for "SIGUSR2", "USR2", "SIGTERM", "SIGINT", "SIGHUP"
 * (case-insensitive).  SIGUSR1 and anything else: ZT_EINVAL. */
int zt_signal_from_name(const char *name, int *signo, zt_status *st);
/* Name of a signal number ("SIGUSR2"; "signal N" for others). */
const char *zt_signal_name(int signo);

/* Catch SIGTERM, SIGUSR2 and `signo` (may be either of them).  The previous actions
 * are kept and put back by zt_preempt_uninstall().  Process-wide; a second
 * install without uninstall only updates the set of signals. */
int zt_preempt_install(int signo, zt_status *st);
void zt_preempt_uninstall(void);

/* The last preemption signal this process received (0: none).
 * Async-signal-safe to read. */
int zt_preempt_local(void);
/* Forget a received signal (after it was acted on). */
void zt_preempt_clear(void);

/* Step-boundary agreement, collective over g: *signo becomes the largest
 * signal number any rank received (0: none) and *aux the largest of the
 * ranks' *aux values (one collective for both; e.g. "a timed checkpoint is
 * due" decided on rank 0). */
int zt_preempt_agree(zt_group *g, int *signo, int *aux, zt_status *st);

#endif
