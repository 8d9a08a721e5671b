/*
 * tap.h -- minimal TAP producer for ztrain's C tests (header-only).
 * Each check prints "ok N - name" or "not ok N - name" plus a diagnostic;
 * tap_done() prints the plan and returns the exit status.  The automake TAP
 * driver counts every check, so the suite total is the number of checks.
 */
#ifndef ZT_TAP_H
#define ZT_TAP_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int tap_n = 0, tap_failed = 0;

static inline void tap_vok(int cond, const char *fmt, va_list ap) {
    ++tap_n;
    printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    if (!cond) tap_failed++;
}
static inline int tap_ok(int cond, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt); tap_vok(cond, fmt, ap); va_end(ap);
    return cond;
}
/* |a-b| <= atol + rtol*|b| */
static inline int tap_close(double a, double b, double rtol, double atol,
                            const char *what) {
    int c = fabs(a - b) <= atol + rtol * fabs(b) && !isnan(a) && !isnan(b);
    if (!c) printf("# %s: got %.9g expected %.9g (rtol %g atol %g)\n", what, a, b, rtol, atol);
    return tap_ok(c, "%s", what);
}
static inline void tap_diag(const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    printf("# "); vprintf(fmt, ap); printf("\n"); fflush(stdout);
    va_end(ap);
}
static inline void tap_skip_all(const char *why) {
    printf("1..0 # SKIP %s\n", why); fflush(stdout);
}
static inline void tap_skip(const char *name, const char *why) {
    ++tap_n;
    printf("ok %d - %s # SKIP %s\n", tap_n, name, why); fflush(stdout);
}
static inline int tap_done(void) {
    printf("1..%d\n", tap_n); fflush(stdout);
    return tap_failed ? 1 : 0;
}
#endif
