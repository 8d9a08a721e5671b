/* progress.c -- the CLI's receiver of zt_progress (cli.h): one updating
 * line on a terminal, a plain line now and then otherwise (like tqdm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "512.0 kB", "12.3 MB", "1.2 GB" or "42 tokens" */
static void amount(char *b, size_t n, double v, const char *unit) {
    if (strcmp(unit, "B")) snprintf(b, n, "%.0f %s", v, unit);
    else if (v < 1e6) snprintf(b, n, "%.1f kB", v / 1e3);
    else if (v < 1e9) snprintf(b, n, "%.1f MB", v / 1e6);
    else snprintf(b, n, "%.2f GB", v / 1e9);
}

static void draw(cli_progress *p, int final) {
    double t = now_s() - p->t0, rate = t > 0 ? (double)p->done / t : 0;
    char d[32], d2[32], tot[48] = "", r[48], eta[32] = "";
    amount(d, sizeof d, (double)p->done, p->unit);
    if (p->total) {
        char x[32];
        amount(x, sizeof x, (double)p->total, p->unit);
        snprintf(tot, sizeof tot, " of %s (%.0f%%)", x, 100.0 * (double)p->done / (double)p->total);
    }
    amount(d2, sizeof d2, rate, p->unit);
    snprintf(r, sizeof r, "%s/s", d2);
    if (p->total && rate > 0 && !final) {
        long s = (long)(((double)p->total - (double)p->done) / rate + 0.5);
        snprintf(eta, sizeof eta, ", ETA %ld:%02ld", s / 60, s % 60);
    } else if (final) {
        snprintf(eta, sizeof eta, ", %.1f s", t);
    }
    if (p->tty) fprintf(stderr, "\r%s: %s%s, %s%s\033[K%s", p->label, d, tot, r, eta, final ? "\n" : "");
    else fprintf(stderr, "ztrain: %s: %s%s, %s%s\n", p->label, d, tot, r, eta);
    fflush(stderr);
    p->shown = 1;
    p->last = now_s();
}

static void update(void *user, const char *what, uint64_t done, uint64_t total, const char *unit,
                   int final) {
    cli_progress *p = user;
    if (p->off) return;
    if (what && *what) p->label = what;
    p->done = done;
    p->total = total;
    p->unit = unit && *unit ? unit : "items";
    double t = now_s();
    if (!p->active) {   /* a new piece of work */
        p->active = 1;
        p->shown = 0;
        p->t0 = p->last = t;
    }
    if (final) {
        if (p->shown) draw(p, 1);
        p->active = p->shown = 0;
        return;
    }
    if (!p->shown && t - p->t0 < p->delay) return;
    if (p->shown && t - p->last < p->every) return;
    draw(p, 0);
}

zt_progress cli_progress_init(cli_progress *p, const char *label) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->tty = isatty(fileno(stderr));
    int on;
    double v;   /* (cli_env_check refused a value of neither kind) */
    zt_env_bool("ZTRAIN_PROGRESS", 1, &on, NULL);
    zt_env_double("ZTRAIN_PROGRESS_INTERVAL", 0, CLI_PROGRESS_INTERVAL_MAX, -1, &v, NULL);
    p->off = !on;
    p->delay = v >= 0 ? v : p->tty ? 0.5 : 30;
    p->every = p->tty ? (v >= 0 && v < 0.2 ? v : 0.2) : (v >= 0 ? v : 30);
    zt_progress z = {update, p};
    return z;
}

void cli_progress_end(cli_progress *p) {
    if (p->tty && p->shown) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    p->shown = 0;
}

int cli_env_check(zt_status *st) {
    int b;
    double v;
    int rc = zt_env_bool("ZTRAIN_PROGRESS", 1, &b, st);
    if (rc == ZT_OK) rc = zt_env_double("ZTRAIN_PROGRESS_INTERVAL", 0, CLI_PROGRESS_INTERVAL_MAX, -1, &v, st);
    if (rc == ZT_OK) rc = zt_env_bool("ZTRAIN_CRASH_REPORT", 1, &b, st);
    return rc;
}
