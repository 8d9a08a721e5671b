/* cmd_report.c -- `ztrain report RUN.jsonl [RUN2.jsonl ...] -o report.html`:
 * the metrics files that `ztrain train --metrics` writes, drawn as one
 * self-contained HTML page (inline SVG and CSS, no script, nothing fetched):
 * loss and validation loss, learning rate, gradient norm, tokens/s, the
 * model's TFLOP/s per device and the memory peak over the steps, the runs overlaid, and their configurations side
 * by side (RUN.config.json, which the trainer writes next to RUN.jsonl). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "svg.h"

enum { M_LOSS, M_VAL, M_LR, M_NORM, M_TOK, M_MEM, M_TFL, NMET };
static const char *const met_key[NMET] = {"loss", "val_loss", "lr", "grad_norm", "tokens_per_s",
                                          "mem_peak_bytes", "tflops"};

typedef struct series { long *step; double *v; int n, cap; } series;
typedef struct kv { char *key, *val; } kv;
typedef struct run {
    const char *path;
    char name[256];
    series s[NMET];
    kv *cfg;
    int ncfg, cfgcap, have_cfg;
    long records;
} run;

static void report_usage(void) {
    printf("usage: ztrain report RUN.jsonl [RUN2.jsonl ...] -o REPORT.html [--title TEXT]\n"
           "\n"
           "Draws the metrics files of training runs (ztrain train --metrics RUN.jsonl) as one\n"
           "self-contained HTML file (inline SVG, no network access): loss and validation loss,\n"
           "learning rate, gradient norm, tokens/s, the model's TFLOP/s per device and the memory\n"
           "peak per rank over the steps, every run overlaid in its own colour, and the runs'\n"
           "configurations side by side\n"
           "(RUN.config.json, written by the trainer next to RUN.jsonl; keys that differ first).\n"
           "\n"
           "  -o, --output FILE   the HTML file to write (required)\n"
           "  --title TEXT        the page's title (default: ztrain report)\n");
}

static int push(series *s, long step, double v) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        long *st = realloc(s->step, (size_t)cap * sizeof *st);
        if (!st) return -1;
        s->step = st;
        double *vv = realloc(s->v, (size_t)cap * sizeof *vv);
        if (!vv) return -1;
        s->v = vv;
        s->cap = cap;
    }
    s->step[s->n] = step;
    s->v[s->n++] = v;
    return 0;
}

static int cfg_add(run *r, const char *key, const char *val) {
    if (r->ncfg == r->cfgcap) {
        int cap = r->cfgcap ? 2 * r->cfgcap : 64;
        kv *c = realloc(r->cfg, (size_t)cap * sizeof *c);
        if (!c) return -1;
        r->cfg = c;
        r->cfgcap = cap;
    }
    r->cfg[r->ncfg].key = strdup(key);
    r->cfg[r->ncfg].val = strdup(val);
    if (!r->cfg[r->ncfg].key || !r->cfg[r->ncfg].val) return -1;
    r->ncfg++;
    return 0;
}

/* The configuration's leaves as "a.b.c" = value (strings unquoted). */
static int cfg_flatten(run *r, const char *prefix, json_t *j) {
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            char key[512];
            snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", k);
            if (cfg_flatten(r, key, v) != 0) return -1;
        }
        return 0;
    }
    if (json_is_string(j)) return cfg_add(r, prefix, json_string_value(j));
    if (json_is_real(j)) {   /* (the file's 0.0030000000000000001 is 0.003) */
        char b[64];
        snprintf(b, sizeof b, "%.10g", json_real_value(j));
        return cfg_add(r, prefix, b);
    }
    char *d = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    int rc = d ? cfg_add(r, prefix, d) : -1;
    free(d);
    return rc;
}

static void config_path(const char *m, char *out, size_t n) {
    size_t l = strlen(m);
    if (l > 6 && !strcmp(m + l - 6, ".jsonl")) snprintf(out, n, "%.*s.config.json", (int)(l - 6), m);
    else snprintf(out, n, "%s.config.json", m);
}

/* One metrics file: its step and evaluation records; a torn last line (a
 * run killed while writing it) is left out, any other line that is not a
 * JSON object with a "step" is an error naming the file and line. */
static int read_run(run *r, char *err, size_t errn) {
    FILE *f = fopen(r->path, "r");
    if (!f) {
        snprintf(err, errn, "%s: cannot read: %s", r->path, strerror(errno));
        return -1;
    }
    const char *b = strrchr(r->path, '/');
    snprintf(r->name, sizeof r->name, "%s", b ? b + 1 : r->path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long ln = 0;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        ++ln;
        if (line[n - 1] != '\n') break;   /* torn */
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)n, 0, &je);
        json_t *step = j ? json_object_get(j, "step") : NULL;
        if (!j || !json_is_object(j) || !json_is_integer(step)) {
            snprintf(err, errn, "%s:%ld: not a metrics record (a JSON object with \"step\")", r->path, ln);
            json_decref(j);
            rc = -1;
            break;
        }
        ++r->records;
        for (int m = 0; m < NMET; ++m) {
            json_t *v = json_object_get(j, met_key[m]);
            if (json_is_number(v) && isfinite(json_number_value(v)) &&
                push(&r->s[m], (long)json_integer_value(step), json_number_value(v)) != 0) {
                snprintf(err, errn, "out of memory");
                rc = -1;
            }
        }
        json_decref(j);
        if (rc) break;
    }
    free(line);
    fclose(f);
    if (rc) return rc;
    char cp[4096];
    config_path(r->path, cp, sizeof cp);
    json_error_t je;
    json_t *c = json_load_file(cp, 0, &je);
    if (c) {
        r->have_cfg = 1;
        rc = cfg_flatten(r, "", c);
        json_decref(c);
        if (rc) snprintf(err, errn, "out of memory");
    }
    return rc;
}

static void free_run(run *r) {
    for (int m = 0; m < NMET; ++m) free(r->s[m].step), free(r->s[m].v);
    for (int i = 0; i < r->ncfg; ++i) free(r->cfg[i].key), free(r->cfg[i].val);
    free(r->cfg);
}

/* ---- charts */

#define CW 720
#define CH 320
#define PL 86
#define PT 20
#define PW 610
#define PH 250

static void chart(FILE *f, const char *title, const run *runs, int nr, const int *mets, int nm, int bytes) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    long pts = 0;
    for (int i = 0; i < nr; ++i)
        for (int k = 0; k < nm; ++k) {
            const series *s = &runs[i].s[mets[k]];
            for (int j = 0; j < s->n; ++j) {
                xlo = fmin(xlo, (double)s->step[j]), xhi = fmax(xhi, (double)s->step[j]);
                ylo = fmin(ylo, s->v[j]), yhi = fmax(yhi, s->v[j]);
                ++pts;
            }
        }
    fprintf(f, "<section class=\"chart\" data-metric=\"%s\"><h2>", met_key[mets[0]]);
    svg_text(f, title);
    fprintf(f, "</h2>\n");
    if (!pts) {
        fprintf(f, "<p class=\"empty\">no records</p></section>\n");
        return;
    }
    double x0, dx, y0, dy;
    int kx, ky;
    svg_ticks(xlo, xhi, 8, &x0, &dx, &kx);
    if (bytes) {   /* ticks at round numbers of a binary unit */
        double u = 1;
        while (u * 1024 <= fmax(fabs(ylo), fabs(yhi))) u *= 1024;
        svg_ticks(ylo / u, yhi / u, 5, &y0, &dy, &ky);
        y0 *= u, dy *= u;
    } else
        svg_ticks(ylo, yhi, 5, &y0, &dy, &ky);
    if (x0 < 0 && xlo >= 0) x0 = 0;
    const double x1 = x0 + kx * dx, y1 = y0 + ky * dy;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", CW, CH, CW, CH);
    fprintf(f, "<rect class=\"bg\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", PL, PT, PW, PH);
    /* the grid and its labels */
    for (int t = 0; t <= ky; ++t) {
        double v = y0 + t * dy, y = PT + PH - (v - y0) / (y1 - y0) * PH;
        char lb[48];
        svg_label(v, bytes, lb, sizeof lb);
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>"
                   "<text class=\"yl\" x=\"%d\" y=\"%.2f\">%s</text>\n", PL, y, PL + PW, y, PL - 6, y + 4, lb);
    }
    for (int t = 0; t <= kx; ++t) {
        double v = x0 + t * dx, x = PL + (v - x0) / (x1 - x0) * PW;
        char lb[48];
        svg_label(v, 0, lb, sizeof lb);
        fprintf(f, "<line class=\"grid\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>"
                   "<text class=\"xl\" x=\"%.2f\" y=\"%d\">%s</text>\n", x, PT, x, PT + PH, x, PT + PH + 16, lb);
    }
    fprintf(f, "<text class=\"xt\" x=\"%d\" y=\"%d\">step</text>\n", PL + PW / 2, CH - 4);
    fprintf(f, "<g class=\"plot\" data-metric=\"%s\" data-x=\"%d\" data-y=\"%d\" data-w=\"%d\" data-h=\"%d\" "
               "data-xmin=\"%.17g\" data-xmax=\"%.17g\" data-ymin=\"%.17g\" data-ymax=\"%.17g\">\n",
            met_key[mets[0]], PL, PT, PW, PH, x0, x1, y0, y1);
    for (int i = 0; i < nr; ++i)
        for (int k = 0; k < nm; ++k) {
            const series *s = &runs[i].s[mets[k]];
            if (!s->n) continue;
            fprintf(f, "<polyline class=\"series%s\" data-run=\"%d\" data-metric=\"%s\" stroke=\"%s\" points=\"",
                    k ? " second" : "", i, met_key[mets[k]], svg_color(i));
            for (int j = 0; j < s->n; ++j)
                fprintf(f, "%s%.2f,%.2f", j ? " " : "", PL + ((double)s->step[j] - x0) / (x1 - x0) * PW,
                        PT + PH - (s->v[j] - y0) / (y1 - y0) * PH);
            fprintf(f, "\"/>\n");
            if (k)   /* the second series (validation loss): its points marked */
                for (int j = 0; j < s->n; ++j)
                    fprintf(f, "<circle class=\"mark\" cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
                            PL + ((double)s->step[j] - x0) / (x1 - x0) * PW,
                            PT + PH - (s->v[j] - y0) / (y1 - y0) * PH, svg_color(i));
        }
    fprintf(f, "</g>\n</svg>\n");
    if (nm > 1) fprintf(f, "<p class=\"note\">solid: training loss; dashed with dots: validation loss</p>\n");
    fprintf(f, "</section>\n");
}

/* ---- the page */

static double median(const series *s) {
    if (!s->n) return NAN;
    double *v = malloc((size_t)s->n * sizeof *v);
    if (!v) return NAN;
    memcpy(v, s->v, (size_t)s->n * sizeof *v);
    for (int i = 1; i < s->n; ++i)   /* (insertion sort: a few thousand steps) */
        for (int j = i; j > 0 && v[j - 1] > v[j]; --j) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    double m = s->n % 2 ? v[s->n / 2] : 0.5 * (v[s->n / 2 - 1] + v[s->n / 2]);
    free(v);
    return m;
}

static const char *cfg_get(const run *r, const char *key) {
    for (int i = 0; i < r->ncfg; ++i)
        if (!strcmp(r->cfg[i].key, key)) return r->cfg[i].val;
    return NULL;
}

static void config_rows(FILE *f, const run *runs, int nr, int differing) {
    /* the keys of every run, in the first run's order, then the others' new ones */
    for (int i = 0; i < nr; ++i)
        for (int k = 0; k < runs[i].ncfg; ++k) {
            const char *key = runs[i].cfg[k].key;
            int seen = 0;
            for (int p = 0; p < i && !seen; ++p) seen = cfg_get(&runs[p], key) != NULL;
            if (seen) continue;
            int diff = 0;
            const char *v0 = cfg_get(&runs[0], key);
            for (int p = 1; p < nr; ++p) {
                const char *v = cfg_get(&runs[p], key);
                diff |= !v0 || !v || strcmp(v0, v) != 0;
            }
            if (diff != differing) continue;
            fprintf(f, "<tr%s><th>", diff ? " class=\"diff\"" : "");
            svg_text(f, key);
            fprintf(f, "</th>");
            for (int p = 0; p < nr; ++p) {
                const char *v = cfg_get(&runs[p], key);
                fprintf(f, "<td>");
                svg_text(f, v ? v : "-");
                fprintf(f, "</td>");
            }
            fprintf(f, "</tr>\n");
        }
}

static void page(FILE *f, const char *title, const run *runs, int nr) {
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    svg_text(f, title);
    fprintf(f, "</title>\n<style>\n"
               "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\n"
               "h2{font-size:1.05em;margin:1em 0 .3em}\n"
               "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}\n"
               "tr.diff th,tr.diff td{background:#fff3c4}\n"
               ".sw{display:inline-block;width:1.6em;height:.35em;vertical-align:middle;margin-right:.4em}\n"
               "svg text{font-size:11px;fill:#444}.yl{text-anchor:end}.xl,.xt{text-anchor:middle}\n"
               "rect.bg{fill:#fafafa;stroke:#999}line.grid{stroke:#e3e3e3}\n"
               "polyline.series{fill:none;stroke-width:1.6}polyline.second{stroke-dasharray:5 3}\n"
               ".charts{display:flex;flex-wrap:wrap;gap:0 1.5em}.note,.empty{font-size:.8em;color:#666}\n"
               "</style></head><body>\n<h1>");
    svg_text(f, title);
    fprintf(f, "</h1>\n<h2>Runs</h2>\n<table class=\"runs\"><tr><th>run</th><th>records</th><th>steps</th>"
               "<th>last loss</th><th>best val loss</th><th>median tokens/s</th><th>memory peak</th></tr>\n");
    for (int i = 0; i < nr; ++i) {
        const run *r = &runs[i];
        const series *l = &r->s[M_LOSS], *v = &r->s[M_VAL], *m = &r->s[M_MEM];
        double best = INFINITY, peak = 0;
        for (int j = 0; j < v->n; ++j) best = fmin(best, v->v[j]);
        for (int j = 0; j < m->n; ++j) peak = fmax(peak, m->v[j]);
        char pk[48] = "-";
        if (m->n) svg_label(peak, 1, pk, sizeof pk);
        fprintf(f, "<tr class=\"run\" data-run=\"%d\"><td><span class=\"sw\" style=\"background:%s\"></span>",
                i, svg_color(i));
        svg_text(f, r->name);
        fprintf(f, "</td><td>%ld</td><td>%ld</td>", r->records, l->n ? l->step[l->n - 1] : 0L);
        if (l->n) fprintf(f, "<td>%.4f</td>", l->v[l->n - 1]);
        else fprintf(f, "<td>-</td>");
        if (v->n) fprintf(f, "<td>%.4f</td>", best);
        else fprintf(f, "<td>-</td>");
        if (r->s[M_TOK].n) fprintf(f, "<td>%.0f</td>", median(&r->s[M_TOK]));
        else fprintf(f, "<td>-</td>");
        fprintf(f, "<td>%s</td></tr>\n", pk);
    }
    fprintf(f, "</table>\n<div class=\"charts\">\n");
    static const int loss[] = {M_LOSS, M_VAL}, lr[] = {M_LR}, norm[] = {M_NORM}, tok[] = {M_TOK},
                     mem[] = {M_MEM}, tfl[] = {M_TFL};
    chart(f, "Loss (training, validation)", runs, nr, loss, 2, 0);
    chart(f, "Tokens per second", runs, nr, tok, 1, 0);
    chart(f, "Model TFLOP/s per device (docs/production.md)", runs, nr, tfl, 1, 0);
    chart(f, "Memory peak per rank (accounted bytes)", runs, nr, mem, 1, 1);
    chart(f, "Learning rate", runs, nr, lr, 1, 0);
    chart(f, "Gradient norm (before clipping)", runs, nr, norm, 1, 0);
    fprintf(f, "</div>\n<h2>Configurations</h2>\n");
    int any = 0;
    for (int i = 0; i < nr; ++i) any |= runs[i].have_cfg;
    if (!any) {
        fprintf(f, "<p class=\"note\">no RUN.config.json next to the metrics files</p>\n");
    } else {
        fprintf(f, "<table class=\"config\"><tr><th>key</th>");
        for (int i = 0; i < nr; ++i) {
            fprintf(f, "<th><span class=\"sw\" style=\"background:%s\"></span>", svg_color(i));
            svg_text(f, runs[i].name);
            fprintf(f, "%s</th>", runs[i].have_cfg ? "" : " (no configuration file)");
        }
        fprintf(f, "</tr>\n");
        if (nr > 1) config_rows(f, runs, nr, 1);
        fprintf(f, "</table>\n<details%s><summary>%s</summary><table class=\"config same\">\n",
                nr > 1 ? "" : " open", nr > 1 ? "the keys the runs share" : "every key");
        config_rows(f, runs, nr, 0);
        fprintf(f, "</table></details>\n");
    }
    fprintf(f, "</body></html>\n");
}

int cmd_report(int argc, char **argv) {
    const char *out = NULL, *title = "ztrain report";
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int np = 0;
    if (!paths) { cli_error("out of memory"); return ZT_EXIT_FAIL; }
    for (int i = 1; i < argc; ++i) {
        const char *v;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            report_usage();
            free(paths);
            return ZT_EXIT_OK;
        }
        if (!strcmp(argv[i], "-o")) {
            if (i + 1 >= argc) goto missing;
            out = argv[++i];
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "output", &v))) { if (r < 0) goto missing; out = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "title", &v))) { if (r < 0) goto missing; title = v; continue; }
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("report: unknown option '%s' (try 'ztrain report --help')", argv[i]);
            free(paths);
            return ZT_EXIT_USAGE;
        }
        paths[np++] = argv[i];
        continue;
    missing:
        cli_error("option '%s' needs a value", argv[i]);
        free(paths);
        return ZT_EXIT_USAGE;
    }
    if (!np || !out) {
        cli_error("report: %s (ztrain report RUN.jsonl [...] -o REPORT.html)",
                  !np ? "no metrics file given" : "-o REPORT.html is required");
        free(paths);
        return ZT_EXIT_USAGE;
    }
    run *runs = calloc((size_t)np, sizeof *runs);
    int rc = runs ? ZT_EXIT_OK : ZT_EXIT_FAIL;
    char err[4200] = "out of memory";
    for (int i = 0; runs && i < np && rc == ZT_EXIT_OK; ++i) {
        runs[i].path = paths[i];
        if (read_run(&runs[i], err, sizeof err) != 0) rc = ZT_EXIT_FAIL;
    }
    if (rc == ZT_EXIT_OK) {
        FILE *f = fopen(out, "w");
        if (!f) {
            snprintf(err, sizeof err, "%s: cannot write: %s", out, strerror(errno));
            rc = ZT_EXIT_FAIL;
        } else {
            page(f, title, runs, np);
            int bad = ferror(f);
            if (fclose(f) != 0 || bad) {
                snprintf(err, sizeof err, "%s: cannot write: %s", out, strerror(errno));
                rc = ZT_EXIT_FAIL;
            }
        }
    }
    if (rc != ZT_EXIT_OK) cli_error("%s", err);
    else printf("report: %d run%s, written to %s\n", np, np > 1 ? "s" : "", out);
    for (int i = 0; runs && i < np; ++i) free_run(&runs[i]);
    free(runs);
    free(paths);
    return rc;
}
