/* test_crash.c -- the CLI's fatal-signal report (cli/crash.c): a call
 * through a NULL function pointer names the call site; a bad store names
 * its address and instruction; the process still dies by the signal; and
 * ZTRAIN_CRASH_REPORT=0 leaves the default action alone. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"
#include "tap.h"

typedef void (*fn_t)(void);
static volatile fn_t g_null_fn;          /* NULL: read through a volatile, not folded */
static volatile int *volatile g_bad_ptr = (int *)16;

/* an exported function, so that dladdr can name the call site */
__attribute__((noinline)) void zt_test_crash_caller(void) {
    g_null_fn();
    __asm__ volatile("" ::: "memory");   /* not a tail call */
}

static void crash_null(void) { zt_test_crash_caller(); }
static void crash_store(void) { *g_bad_ptr = 1; }

/* Run f in a child with the report installed (report: 1) or turned off;
 * its stderr into out[n]; returns the wait status. */
static int run_child(void (*f)(void), int report, char *out, size_t n) {
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        if (!report) setenv("ZTRAIN_CRASH_REPORT", "0", 1);
        cli_crash_report_install(7);
        f();
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < n && (k = read(p[0], out + got, n - 1 - got)) > 0) got += (size_t)k;
    out[got] = '\0';
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

int main(void) {
    /* the sanitizer build keeps ASan's own report */
    pid_t pid = fork();
    if (pid == 0) _exit(cli_crash_report_install(0) ? 0 : 3);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        tap_skip_all("sanitizer build: the report is not installed (ASan reports)");
        return 0;
    }

    char out[16384];
    status = run_child(crash_null, 1, out, sizeof out);
    tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "NULL call: the process dies by SIGSEGV");
    tap_ok(strstr(out, "ztrain: fatal: rank 7: SIGSEGV at address 0x0, instruction 0x0 (in no loaded object") != NULL,
           "NULL call: one line naming rank, signal, address and instruction");
    tap_diag("the report: %s", out);
#if defined(__x86_64__) || defined(__aarch64__)
    tap_ok(strstr(out, "; called from 0x") && strstr(out, ": zt_test_crash_caller+0x"),
           "NULL call: the call site is named (zt_test_crash_caller)");
#else
    tap_skip("NULL call: the call site is named", "x86-64 and aarch64 only");
#endif
    int lines = 0;
    for (const char *c = out; *c; ++c) lines += *c == '\n';
    tap_ok(lines >= 3, "NULL call: a backtrace follows the line (%d lines)", lines);

    status = run_child(crash_store, 1, out, sizeof out);
    tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "bad store: the process dies by SIGSEGV");
    tap_ok(strstr(out, "SIGSEGV at address 0x10, instruction 0x") != NULL, "bad store: the address is 0x10");
    tap_ok(strstr(out, "(in no loaded object") == NULL && strstr(out, "test_crash+0x") != NULL,
           "bad store: the instruction is located in the program");
    if (!strstr(out, "test_crash+0x")) tap_diag("stderr: %s", out);

    status = run_child(crash_null, 0, out, sizeof out);
    tap_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "ZTRAIN_CRASH_REPORT=0: still SIGSEGV");
    tap_ok(strstr(out, "ztrain: fatal:") == NULL, "ZTRAIN_CRASH_REPORT=0: no report");
    return tap_done();
}
