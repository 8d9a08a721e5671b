/* crash.c -- one report line per fatal signal (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL) of the ztrain program, naming the rank, the faulting address, the
 * instruction and, when the instruction pointer is not in any loaded
 * object (a call through a NULL or stale function pointer), the call site
 * the return address on the stack points to; then a backtrace, and the
 * signal's default action (a core dump where the limits allow one).
 *
 * Open MPI's own handler prints only the frame inside libc for a jump to
 * address 0, which names nothing; this one is installed after MPI_Init and
 * replaces it.  Not installed in sanitizer builds (ASan reports better) or
 * with ZTRAIN_CRASH_REPORT=0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include "cli.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZT_CRASH_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ZT_CRASH_ASAN 1
#endif

#ifndef ZT_CRASH_ASAN
static int g_rank = -1;
static char g_altstack[64 * 1024];

/* ---------------------------------------------------------------- output
 * write(2) only: the heap and stdio may be what broke */
static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

static void put_hex(uintptr_t v) {
    char b[2 + 2 * sizeof v + 1], *p = b + sizeof b - 1;
    *p = '\0';
    do { *--p = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    *--p = 'x';
    *--p = '0';
    put(p);
}

static void put_dec(long v) {
    char b[24], *p = b + sizeof b - 1;
    int neg = v < 0;
    unsigned long u = neg ? -(unsigned long)v : (unsigned long)v;
    *p = '\0';
    do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
    if (neg) *--p = '-';
    put(p);
}

/* " (object+0xoff: symbol+0xoff)" when a in a loaded object; returns 0 if not */
static int put_where(const void *a) {
    Dl_info di;
    if (!a || !dladdr(a, &di) || !di.dli_fname) return 0;
    const char *f = strrchr(di.dli_fname, '/');
    put(" (");
    put(f ? f + 1 : di.dli_fname);
    put("+");
    put_hex((uintptr_t)a - (uintptr_t)di.dli_fbase);
    if (di.dli_sname && di.dli_saddr) {
        put(": ");
        put(di.dli_sname);
        put("+");
        put_hex((uintptr_t)a - (uintptr_t)di.dli_saddr);
    }
    put(")");
    return 1;
}

static const char *sig_name(int s) {
    switch (s) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "signal";
    }
}

static void on_fatal(int sig, siginfo_t *si, void *ucv) {
    const ucontext_t *uc = ucv;
    uintptr_t pc = 0, sp = 0;
#if defined(__x86_64__)
    pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    pc = (uintptr_t)uc->uc_mcontext.pc;
    sp = (uintptr_t)uc->uc_mcontext.sp;
#else
    (void)uc;
#endif
    put("ztrain: fatal: ");
    if (g_rank >= 0) { put("rank "); put_dec(g_rank); put(": "); }
    put(sig_name(sig));
    put(" at address ");
    put_hex((uintptr_t)si->si_addr);
    put(", instruction ");
    put_hex(pc);
    if (!put_where((const void *)pc)) {
        put(" (in no loaded object: a call through a bad function pointer?)");
#if defined(__x86_64__)
        /* right after a call the return address is on top of the stack */
        if (sp) {
            uintptr_t ret = *(const uintptr_t *)sp;
            put("; called from ");
            put_hex(ret);
            put_where((const void *)ret);
        }
#elif defined(__aarch64__)
        put("; called from ");
        put_hex((uintptr_t)uc->uc_mcontext.regs[30]);
        put_where((const void *)uc->uc_mcontext.regs[30]);
#endif
    }
    put("\n");
    void *frames[48];
    int n = backtrace(frames, 48);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    /* SA_RESETHAND restored the default action: re-raise it */
    raise(sig);
}

#endif /* ZT_CRASH_ASAN */

int cli_crash_report_install(int rank) {
#ifdef ZT_CRASH_ASAN
    (void)rank;
    return 0;
#else
    int on;
    zt_env_bool("ZTRAIN_CRASH_REPORT", 1, &on, NULL);   /* (cli_env_check) */
    if (!on) return 0;
    g_rank = rank;
    /* load libgcc's unwinder now, not inside the handler */
    void *warm[2];
    (void)backtrace(warm, 2);
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = g_altstack;
    ss.ss_size = sizeof g_altstack;
    int alt = sigaltstack(&ss, NULL) == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | (alt ? SA_ONSTACK : 0);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) sigaction(sigs[i], &sa, NULL);
    return 1;
#endif
}
