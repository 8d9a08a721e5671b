/* svg.c -- shared pieces of the CLI's SVG charts (svg.h). */
#include "svg.h"
#include <math.h>
#include <string.h>

void svg_ticks(double lo, double hi, int n, double *t0, double *dt, int *k) {
    if (!(hi > lo)) {   /* one value: a unit around it */
        double w = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= w, hi += w;
    }
    double raw = (hi - lo) / (n > 0 ? n : 1), p = pow(10, floor(log10(raw))), f = raw / p;
    double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
    double a = floor(lo / step) * step, b = ceil(hi / step) * step;
    if (b <= a) b = a + step;
    *t0 = a;
    *dt = step;
    *k = (int)lround((b - a) / step);
}

void svg_label(double v, int bytes, char *buf, size_t n) {
    double a = fabs(v);
    if (bytes) {
        static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        int i = 0;
        while (a >= 1024 && i < 4) a /= 1024, v /= 1024, ++i;
        snprintf(buf, n, "%.4g %s", v, u[i]);
    } else if (a >= 1e9) snprintf(buf, n, "%.3gG", v / 1e9);
    else if (a >= 1e6) snprintf(buf, n, "%.3gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, n, "%.3gk", v / 1e3);
    else snprintf(buf, n, "%.4g", v);
}

void svg_text(FILE *f, const char *s) {
    for (; *s; ++s) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

const char *svg_color(int i) {
    static const char *c[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    return c[(i < 0 ? -i : i) % 10];
}
