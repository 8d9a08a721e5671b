/* svg.h -- the few pieces of SVG the CLI's charts share (cli/svg.c): `ztrain
 * report`'s curves and `ztrain estimate --plot`'s bars.  Every chart's plot
 * area carries its mapping as data-* attributes (data-x, data-y, data-w,
 * data-h: the area in user units; data-xmin/xmax, data-ymin/ymax: the values
 * at its edges) so that a test can map the drawn coordinates back. */
#ifndef ZT_CLI_SVG_H
#define ZT_CLI_SVG_H
#include <stdio.h>

/* Ticks for [lo, hi]: about n "nice" steps (1, 2, 5 x 10^k); *t0 <= lo and
 * *t0 + *k * *dt >= hi (the axis runs from *t0 to *t0 + *k * *dt). */
void svg_ticks(double lo, double hi, int n, double *t0, double *dt, int *k);
/* v as a short axis label: bytes (1.5 GiB) when bytes, else 3 significant digits
 * (12.3k, 4.5M). */
void svg_label(double v, int bytes, char *buf, size_t n);
/* s with & < > " escaped. */
void svg_text(FILE *f, const char *s);
/* The i-th of the series colours (any i). */
const char *svg_color(int i);

#endif
