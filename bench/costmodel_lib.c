/*
 * costmodel_lib.c -- the roofline of costmodel.h: kernel times, the
 * calibration file, the bench_gpu table and its fit.
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"

/* ------------------------------------------------------------ the model */

int cm_compute_class(int cls) {
    switch (cls) {
    case ZT_CC_GEMM_BF16: case ZT_CC_GEMM_FP32: case ZT_CC_ATT_GEMM: case ZT_CC_FLASH_FWD:
    case ZT_CC_FLASH_BWD: case ZT_CC_ATT32_FWD: case ZT_CC_ATT32_BWD: case ZT_CC_CUDNN_FWD:
    case ZT_CC_CUDNN_BWD:
        return 1;
    default:
        return 0;
    }
}

int cm_may_be_uncalibrated(int cls) { return cls == ZT_CC_CUDNN_FWD || cls == ZT_CC_CUDNN_BWD; }

int cm_uncalibrated(const cm_calib *c, int cls) {
    return cls >= 0 && cls < ZT_CC_N && cls != ZT_CC_HOST && !(c->cls[cls].eff > 0);
}

/* fp32 peak for the fp32 GEMMs and attention, bf16 for the rest */
static double peak_of(const cm_calib *c, int cls) {
    return cls == ZT_CC_GEMM_FP32 || cls == ZT_CC_ATT32_FWD || cls == ZT_CC_ATT32_BWD ? c->peak_fp32
                                                                                     : c->peak_bf16;
}

double cm_kernel_s(const cm_calib *c, int cls, double flops, double bytes) {
    const cm_class *k = &c->cls[cls];
    if (cls == ZT_CC_HOST) return bytes / (c->host_gbs * 1e9) + c->host_us * 1e-6;
    if (cm_uncalibrated(c, cls)) return 0.0;
    double t = bytes / (c->bw_gbs * 1e9 * (cm_compute_class(cls) ? c->cls[ZT_CC_STREAM].eff : k->eff));
    if (cm_compute_class(cls)) {
        const double tf = flops / (peak_of(c, cls) * 1e12 * k->eff);
        if (tf > t) t = tf;
    }
    return t + k->t0_us * 1e-6;
}

double cm_step_s(const cm_calib *c, const zt_count_kernel *k, size_t nk, const zt_count_totals *t,
                 double *per_class) {
    double s = 0.0;
    if (per_class) memset(per_class, 0, sizeof(double) * ZT_CC_N);
    for (size_t i = 0; i < nk; i++) {
        const double d = (double)k[i].launches * cm_kernel_s(c, k[i].cls, k[i].flops, k[i].bytes);
        s += d;
        if (per_class) per_class[k[i].cls] += d;
    }
    const double sy = (double)t->syncs * c->sync_us * 1e-6;
    return s + sy;
}

void cm_defaults(cm_calib *c) {
    memset(c, 0, sizeof *c);
    c->peak_bf16 = 989.4;   /* H100 SXM dense bf16 (bench_gpu's figure) */
    c->peak_fp32 = 66.9;
    c->bw_gbs = 3350;       /* H100 SXM HBM3 data sheet */
    c->host_gbs = 20;       /* assumed: pageable host memory over PCIe 5 */
    c->host_us = 10;        /* assumed */
    c->sync_us = 10;        /* assumed: a host wait, then the queue refilled */
    for (int i = 0; i < ZT_CC_N; i++) c->cls[i].eff = 1.0;
}

/* ------------------------------------------------------------ the file */

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

void cm_write(FILE *f, const cm_calib *c) {
    fprintf(f, "# ztrain cost model calibration (bench/costmodel.h): a roofline per kernel class,\n");
    fprintf(f, "# fitted on the per-kernel rows of the bench_gpu table in `source` (never on engine steps).\n");
    fprintf(f, "# Regenerate: bench/costmodel --calibrate SOURCE > THIS_FILE\n");
    fprintf(f, "source %s\n", c->source);
    fprintf(f, "device %s\n", c->device);
    fprintf(f, "peak_bf16_tflops %.6g\n", c->peak_bf16);
    fprintf(f, "peak_fp32_tflops %.6g\n", c->peak_fp32);
    fprintf(f, "bw_gbs %.6g\n", c->bw_gbs);
    fprintf(f, "host_gbs %.6g   # assumed\n", c->host_gbs);
    fprintf(f, "host_us %.6g    # assumed\n", c->host_us);
    fprintf(f, "sync_us %.6g    # assumed\n", c->sync_us);
    fprintf(f, "fit_rows %d\n", c->nrows);
    fprintf(f, "fit_rms_log_err %.4f\n", c->rms_log_err);
    fprintf(f, "# class  eff (of peak or bandwidth)  t0_us (per launch)  rows (0: default, not fitted)\n");
    for (int i = 0; i < ZT_CC_N; i++) {
        if (i == ZT_CC_HOST) continue;
        if (cm_uncalibrated(c, i))
            fprintf(f, "class %-10s uncalibrated   # no bench_gpu row of the source timed it\n",
                    zt_count_class_name(i));
        else
            fprintf(f, "class %-10s eff %.5f t0_us %.3f rows %d\n", zt_count_class_name(i), c->cls[i].eff,
                    c->cls[i].t0_us, c->cls[i].rows);
    }
    fprintf(f, "# engine steps recorded in the source (ms, stage 0, 1 rank): for comparison only\n");
    for (int i = 0; i < c->nmeasured; i++)
        fprintf(f, "measured %s %s %.6g\n", c->measured[i].what, c->measured[i].shape, c->measured[i].ms);
}

int cm_load(const char *path, cm_calib *c, char *err, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, n, "cannot open calibration file %s", path);
        return -1;
    }
    cm_defaults(c);
    for (int i = 0; i < ZT_CC_N; i++) c->cls[i].eff = 0;
    char line[512];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h) *h = '\0';
        char *s = trim(line);
        if (!*s) continue;
        char key[32], a[128], b[128];
        double v;
        if (sscanf(s, "%31s", key) != 1) continue;
        const char *rest = trim(s + strlen(key));
        if (!strcmp(key, "source")) snprintf(c->source, sizeof c->source, "%s", rest);
        else if (!strcmp(key, "device")) snprintf(c->device, sizeof c->device, "%s", rest);
        else if (!strcmp(key, "class")) {
            double e, t0;
            int rows, k = -1;
            if (sscanf(rest, "%127s %127s", a, b) == 2 && !strcmp(b, "uncalibrated")) {
                for (int i = 0; i < ZT_CC_N; i++)
                    if (!strcmp(a, zt_count_class_name(i))) k = i;
                if (k < 0 || !cm_may_be_uncalibrated(k)) goto bad;
                c->cls[k] = (cm_class){0, 0, 0, 0};
                continue;
            }
            if (sscanf(rest, "%127s eff %lf t0_us %lf rows %d", a, &e, &t0, &rows) != 4) goto bad;
            for (int i = 0; i < ZT_CC_N; i++)
                if (!strcmp(a, zt_count_class_name(i))) k = i;
            if (k < 0 || !(e > 0)) goto bad;
            c->cls[k] = (cm_class){e, t0, rows, 0};
        } else if (!strcmp(key, "measured")) {
            if (c->nmeasured == CM_MAX_MEASURED || sscanf(rest, "%31s %63s %lf", a, b, &v) != 3) goto bad;
            cm_measured *m = &c->measured[c->nmeasured++];
            snprintf(m->what, sizeof m->what, "%s", a);
            snprintf(m->shape, sizeof m->shape, "%s", b);
            m->ms = v;
        } else if (sscanf(rest, "%lf", &v) == 1) {
            if (!strcmp(key, "peak_bf16_tflops")) c->peak_bf16 = v;
            else if (!strcmp(key, "peak_fp32_tflops")) c->peak_fp32 = v;
            else if (!strcmp(key, "bw_gbs")) c->bw_gbs = v;
            else if (!strcmp(key, "host_gbs")) c->host_gbs = v;
            else if (!strcmp(key, "host_us")) c->host_us = v;
            else if (!strcmp(key, "sync_us")) c->sync_us = v;
            else if (!strcmp(key, "fit_rows")) c->nrows = (int)v;
            else if (!strcmp(key, "fit_rms_log_err")) c->rms_log_err = v;
            else goto bad;
        } else {
            goto bad;
        }
        continue;
    bad:
        snprintf(err, n, "%s:%d: cannot read '%s'", path, ln, s);
        rc = -1;
        break;
    }
    fclose(f);
    if (rc == 0)
        for (int i = 0; i < ZT_CC_N; i++)
            if (i != ZT_CC_HOST && !cm_may_be_uncalibrated(i) && !(c->cls[i].eff > 0)) {
                snprintf(err, n, "%s: no line 'class %s eff ...'", path, zt_count_class_name(i));
                return -1;
            }
    return rc;
}

/* ------------------------------------------------------------ replay */

/* Never dereferenced (the counting backend computes nothing): 256-byte
 * aligned like cudaMalloc's blocks. */
#define FAKE(type, slot) ((type *)(uintptr_t)(0x100000u * (slot)))

/* Issue the call(s) of bench_gpu's row `name` at t's shape on the counting
 * table; 1 when bench_gpu prints such a row.  The order and the names are
 * bench/bench_gpu.c's. */
static int replay(const zt_backend *be, const cm_table *t, const char *name) {
    const int B = t->B, T = t->T, C = t->C, NH = t->NH, V = t->V;
    const size_t N = (size_t)B * T;
    float *x = FAKE(float, 1), *y = FAKE(float, 2), *z = FAKE(float, 3), *w = FAKE(float, 4);
    float *dw = FAKE(float, 5), *bias = FAKE(float, 6), *logits = FAKE(float, 7), *lse = FAKE(float, 8);
    float *mean = FAKE(float, 9), *rstd = FAKE(float, 10), *g = FAKE(float, 11), *f = FAKE(float, 12);
    int *tok = FAKE(int, 13);
    char nm[96];
#define ROW(...)                                   \
    snprintf(nm, sizeof nm, __VA_ARGS__);          \
    if (!strcmp(nm, name))
    struct { const char *what; int oc, c; } mm[] = {
        {"qkv", 3 * C, C}, {"attn proj", C, C}, {"fc", 4 * C, C}, {"fc proj", C, 4 * C}, {"lm head", V, C}};
    for (int mode = 0; mode < 2; mode++) {
        const char *p = mode ? "bf16" : "fp32";
        be->set_matmul_precision(mode);
        for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
            const int oc = mm[k].oc, c = mm[k].c;
            float *out = oc == V ? logits : z;
            ROW("matmul_fwd %s %s [%zu,%d]x[%d,%d]", p, mm[k].what, N, c, c, oc) {
                be->matmul_fwd(out, x, w, bias, (int)N, c, oc);
                return 1;
            }
            ROW("matmul_bwd %s %s (dinp, dw, dbias)", p, mm[k].what) {
                be->matmul_bwd(y, dw, bias, out, x, w, (int)N, c, oc);
                return 1;
            }
        }
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);
    ROW("attention_fwd") { be->attention_fwd(z, lse, x, B, T, C, NH); return 1; }
    ROW("attention_bwd") { be->attention_bwd(y, x, x, z, lse, B, T, C, NH); return 1; }
    be->set_matmul_precision(ZT_MATMUL_BF16);
    ROW("attention_fwd bf16 (tensor cores)") { be->attention_fwd(z, lse, x, B, T, C, NH); return 1; }
    ROW("attention_bwd bf16 (tensor cores)") { be->attention_bwd(y, x, x, z, lse, B, T, C, NH); return 1; }
    zt_count_set_flash(0);
    ROW("attention_fwd bf16 (cuBLAS path)") { be->attention_fwd(z, lse, x, B, T, C, NH); return 1; }
    ROW("attention_bwd bf16 (cuBLAS path)") { be->attention_bwd(y, x, x, z, lse, B, T, C, NH); return 1; }
    zt_count_set_flash(1);
    be->set_matmul_precision(ZT_MATMUL_FP32);
    ROW("layernorm_fwd") { be->layernorm_fwd(z, mean, rstd, x, g, g, (int)N, C); return 1; }
    ROW("layernorm_bwd") { be->layernorm_bwd(z, dw, dw, y, x, g, mean, rstd, (int)N, C); return 1; }
    ROW("gelu_fwd [N,4C]") { be->gelu_fwd(z, x, N * 4 * C); return 1; }
    ROW("gelu_bwd [N,4C]") { be->gelu_bwd(z, x, y, N * 4 * C); return 1; }
    ROW("add [N,C]") { be->add(z, x, y, N * C); return 1; }
    {
        const int hs = C / NH, NKV = NH % 4 ? NH : NH / 4, H = 2 * C, R = (NH + 2 * NKV) * hs;
        ROW("rmsnorm_fwd") { be->rmsnorm_fwd(z, rstd, x, g, 1e-5f, (int)N, C); return 1; }
        ROW("rmsnorm_bwd") { be->rmsnorm_bwd(z, dw, y, x, g, rstd, (int)N, C); return 1; }
        ROW("rope_fwd (q and k heads of [N,%d])", R) { be->rope_fwd(z, f, B, T, NH + NKV, R, hs, 1.0f); return 1; }
        ROW("swiglu_fwd [N,%d]", H) { be->swiglu_fwd(z, x, (int)N, H); return 1; }
        ROW("swiglu_bwd [N,%d]", H) { be->swiglu_bwd(z, y, x, (int)N, H); return 1; }
        ROW("gqa_fwd (NKV=%d)", NKV) { be->gqa_fwd(z, lse, x, B, T, NH, NKV, hs); return 1; }
        ROW("gqa_bwd (NKV=%d)", NKV) { be->gqa_bwd(y, x, x, z, lse, B, T, NH, NKV, hs); return 1; }
        be->set_matmul_precision(ZT_MATMUL_BF16);
        ROW("gqa_fwd bf16 (NKV=%d, tensor cores)", NKV) { be->gqa_fwd(z, lse, x, B, T, NH, NKV, hs); return 1; }
        ROW("gqa_bwd bf16 (NKV=%d, tensor cores)", NKV) {
            be->gqa_bwd(y, x, x, z, lse, B, T, NH, NKV, hs);
            return 1;
        }
        be->set_matmul_precision(ZT_MATMUL_FP32);
    }
    {
        /* attention at a model's shape on either path (bench_gpu's attention shapes) */
        char dir[4], path[64];
        int b, tt, nh, nkv, hs;
        if (sscanf(name, "gqa_%3[fwdb] bf16 B=%d T=%d NH=%d NKV=%d hs=%d (%63[^)])", dir, &b, &tt, &nh, &nkv, &hs,
                   path) == 7 &&
            (!strcmp(dir, "fwd") || !strcmp(dir, "bwd")) && (!strcmp(path, "cuDNN") || !strcmp(path, "ztrain's kernels"))) {
            const int was = zt_count_cudnn();
            zt_count_set_cudnn(!strcmp(path, "cuDNN"));
            be->set_matmul_precision(ZT_MATMUL_BF16);
            if (!strcmp(dir, "fwd")) be->gqa_fwd(z, lse, x, b, tt, nh, nkv, hs);
            else be->gqa_bwd(y, x, x, z, lse, b, tt, nh, nkv, hs);
            be->set_matmul_precision(ZT_MATMUL_FP32);
            zt_count_set_cudnn(was);
            return 1;
        }
    }
    ROW("xent_fwd (in place)") { be->xent_fwd(z, logits, logits, tok, (int)N, V); return 1; }
    ROW("xent_bwd (in place)") { be->xent_bwd(logits, logits, tok, 1.0f, (int)N, V); return 1; }
    ROW("encoder_fwd") { be->encoder_fwd(z, tok, w, x, B, T, C); return 1; }
    ROW("encoder_bwd") { be->encoder_bwd(dw, y, x, tok, B, T, C); return 1; }
    const size_t P = 124000000;
    ROW("adamw (124M params)") { be->adamw(x, y, z, w, P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f, 1.0f); return 1; }
    ROW("sumsq (124M)") { (void)be->sumsq(y, P); return 1; }
    ROW("scale (124M)") { be->scale(y, P, 1.0f); return 1; }
    ROW("to_bf16 (124M)") { be->to_bf16((uint16_t *)w, x, P); return 1; }
    ROW("nonfinite (124M)") { (void)be->nonfinite(x, P); return 1; }
#undef ROW
    return 0;
}

/* ------------------------------------------------------------ the table */

void cm_table_free(cm_table *t) {
    for (int i = 0; i < t->nrows; i++) free(t->rows[i].k);
    free(t->rows);
    memset(t, 0, sizeof *t);
}

/* "| ztrain train (engine, ...) | prec | shape | ms | ..." : the cells */
static int cells(char *s, char **out, int max) {
    int n = 0;
    if (*s != '|') return 0;
    s++;
    while (n < max) {
        char *e = strchr(s, '|');
        if (!e) break;
        *e = '\0';
        out[n++] = trim(s);
        s = e + 1;
    }
    return n;
}

int cm_table_read(const char *path, cm_table *t, char *err, size_t n) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, n, "cannot open %s", path);
        return -1;
    }
    char line[1024], llama_shape[64] = "";
    int in_kernels = 0, cap = 0;
    const zt_backend *be = zt_backend_count();
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        s[strcspn(s, "\n")] = '\0';
        if (!strncmp(s, "device ", 7) && !t->device[0]) {
            const char *a = strchr(s, ':'), *b = strstr(s, " (sm_");
            if (a && b && b > a + 2) snprintf(t->device, sizeof t->device, "%.*s", (int)(b - a - 2), a + 2);
        } else if (!strncmp(s, "MFU against dense peaks of ", 27)) {
            sscanf(s + 27, "%lf (fp32) / %lf (bf16)", &t->peak_fp32, &t->peak_bf16);
        } else if (!strncmp(s, "kernels (", 9)) {
            in_kernels = sscanf(s, "kernels (B=%d T=%d C=%d NH=%d V=%d)", &t->B, &t->T, &t->C, &t->NH,
                                &t->V) == 5;
        } else if (in_kernels && !strncmp(s, "  ", 2)) {
            char *ms = strstr(s, " ms");
            if (!ms) continue;
            char *p = ms;
            while (p > s && (isdigit((unsigned char)p[-1]) || p[-1] == '.')) p--;
            if (p == ms) continue;
            const double v = atof(p);
            *p = '\0';
            if (t->nrows == cap) {
                cap = cap ? 2 * cap : 64;
                cm_row *r = realloc(t->rows, (size_t)cap * sizeof *r);
                if (!r) {
                    fclose(f);
                    snprintf(err, n, "out of memory");
                    return -1;
                }
                t->rows = r;
            }
            cm_row *r = &t->rows[t->nrows++];
            memset(r, 0, sizeof *r);
            snprintf(r->name, sizeof r->name, "%s", trim(s));
            r->ms = v;
        } else if (in_kernels) {
            in_kernels = 0;
        }
        if (!strncmp(s, "== llama ", 9)) {
            const char *e = strstr(s, "L,NH,NKV,C,H,V,B,T = ");
            if (e && sscanf(e + 21, "%63[0-9,]", llama_shape) == 1) {
                const size_t l = strlen(llama_shape);
                if (l && llama_shape[l - 1] == ',') llama_shape[l - 1] = '\0';
            }
        }
        if (!strncmp(s, "| ztrain train (engine,", 23) && t->nmeasured < CM_MAX_MEASURED) {
            char *c[8];
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", s);
            if (cells(buf, c, 8) < 4 || !strstr(c[0], "stage 0, 1 rank")) continue;
            cm_measured *m = &t->measured[t->nmeasured];
            const int llama = strstr(c[0], "Llama") != NULL;
            if (llama && !llama_shape[0]) continue;
            snprintf(m->what, sizeof m->what, "%s", llama ? "llama" : "gpt2");
            snprintf(m->shape, sizeof m->shape, "%s", llama ? llama_shape : c[2]);
            m->ms = atof(c[3]);
            if (m->ms > 0) t->nmeasured++;
        }
    }
    fclose(f);
    if (!t->nrows || t->B <= 0) {
        snprintf(err, n, "%s: no bench_gpu kernel table ('kernels (B=.. T=.. C=.. NH=.. V=..)' and its rows)",
                 path);
        cm_table_free(t);
        return -1;
    }
    /* every table recorded so far ran the kernels of before dout's one
     * rounding and the bf16 weights: replay it so (count.h) */
    zt_count_set_whatif(ZT_COUNT_AS_RECORDED);
    /* bench_gpu keeps its rows on ztrain's kernels but those it names (cuDNN) */
    const int cudnn_was = zt_count_cudnn();
    zt_count_set_cudnn(0);
    for (int i = 0; i < t->nrows; i++) {
        cm_row *r = &t->rows[i];
        zt_count_reset();
        if (!replay(be, t, r->name)) continue;
        const zt_count_kernel *k;
        const size_t nk = zt_count_kernels(&k);
        r->k = malloc((nk ? nk : 1) * sizeof *r->k);
        if (!r->k) continue;
        memcpy(r->k, k, nk * sizeof *k);
        r->nk = nk;
        zt_count_totals_get(&r->tot);
        r->fit = nk > 0 && r->ms > 0;
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);
    zt_count_set_flash(1);
    zt_count_set_cudnn(cudnn_was);
    zt_count_set_whatif(0);
    zt_count_reset();
    return 0;
}

/* ------------------------------------------------------------ the fit */

static double row_s(const cm_calib *c, const cm_row *r) { return cm_step_s(c, r->k, r->nk, &r->tot, NULL); }

static int row_has(const cm_row *r, int cls) {
    for (size_t i = 0; i < r->nk; i++)
        if (r->k[i].cls == cls) return 1;
    return 0;
}

/* the rows of class cls: they contain it, and every other class they
 * contain is fitted already */
static int rows_of(const cm_table *t, const int *done, int cls, int *idx) {
    int m = 0;
    for (int i = 0; i < t->nrows; i++) {
        const cm_row *r = &t->rows[i];
        if (!r->fit || !row_has(r, cls)) continue;
        int ok = 1;
        for (size_t j = 0; j < r->nk; j++)
            if (r->k[j].cls != cls && !done[r->k[j].cls]) ok = 0;
        if (ok) idx[m++] = i;
    }
    return m;
}

static double sq_err(cm_calib *c, const cm_table *t, const int *idx, int m) {
    double e = 0;
    for (int i = 0; i < m; i++) {
        const double d = log(row_s(c, &t->rows[idx[i]]) / (t->rows[idx[i]].ms * 1e-3));
        e += d * d;
    }
    return e;
}

/* the best eff (log-space golden section) with t0 as set */
static double best_eff(cm_calib *c, const cm_table *t, int cls, const int *idx, int m) {
    const double gr = 0.5 * (sqrt(5.0) - 1.0);
    double a = log(1e-3), b = log(2.0);
    double x1 = b - gr * (b - a), x2 = a + gr * (b - a);
    c->cls[cls].eff = exp(x1);
    double f1 = sq_err(c, t, idx, m);
    c->cls[cls].eff = exp(x2);
    double f2 = sq_err(c, t, idx, m);
    for (int it = 0; it < 90; it++) {
        if (f1 < f2) {
            b = x2; x2 = x1; f2 = f1;
            x1 = b - gr * (b - a);
            c->cls[cls].eff = exp(x1);
            f1 = sq_err(c, t, idx, m);
        } else {
            a = x1; x1 = x2; f1 = f2;
            x2 = a + gr * (b - a);
            c->cls[cls].eff = exp(x2);
            f2 = sq_err(c, t, idx, m);
        }
    }
    c->cls[cls].eff = exp(0.5 * (a + b));
    return sq_err(c, t, idx, m);
}

static void fit_class(cm_calib *c, cm_table *t, int *done, int cls, int with_t0) {
    int *idx = malloc((size_t)t->nrows * sizeof *idx);
    if (!idx) return;
    const int m = rows_of(t, done, cls, idx);
    c->cls[cls].rows = m;
    if (m == 0) {
        free(idx);
        return;   /* stays at its default */
    }
    if (with_t0 && m >= 2) {
        double best = INFINITY, bt = 0, be = 1;
        for (int k = 0; k <= 1000; k++) {
            c->cls[cls].t0_us = 0.05 * k;
            const double e = best_eff(c, t, cls, idx, m);
            if (e < best) {
                best = e;
                bt = c->cls[cls].t0_us;
                be = c->cls[cls].eff;
            }
        }
        c->cls[cls].t0_us = bt;
        c->cls[cls].eff = be;
    } else {
        best_eff(c, t, cls, idx, m);
    }
    done[cls] = 1;
    free(idx);
}

void cm_fit(cm_calib *c, cm_table *t, const char *source) {
    snprintf(c->source, sizeof c->source, "%s", source);
    snprintf(c->device, sizeof c->device, "%s", t->device[0] ? t->device : "?");
    if (t->peak_bf16 > 0) c->peak_bf16 = t->peak_bf16;
    if (t->peak_fp32 > 0) c->peak_fp32 = t->peak_fp32;
    int done[ZT_CC_N] = {0};
    for (int i = 0; i < ZT_CC_N; i++) c->cls[i] = (cm_class){1.0, 0.0, 0, 0};
    /* the stream class first (its t0 is every other class's until fitted) */
    fit_class(c, t, done, ZT_CC_STREAM, 1);
    for (int i = 0; i < ZT_CC_N; i++)
        if (i != ZT_CC_STREAM) c->cls[i] = (cm_class){c->cls[ZT_CC_STREAM].eff, c->cls[ZT_CC_STREAM].t0_us, 0, 0};
    done[ZT_CC_HOST] = 1;
    static const struct { int cls, t0; } order[] = {
        {ZT_CC_CONVERT, 0}, {ZT_CC_OPTIM, 0}, {ZT_CC_REDUCE, 0}, {ZT_CC_ROWNORM, 0},
        {ZT_CC_COLSUM, 0}, {ZT_CC_SOFTMAX, 0}, {ZT_CC_SCATTER, 0}, {ZT_CC_GEMM_BF16, 1},
        {ZT_CC_GEMM_FP32, 1}, {ZT_CC_FLASH_FWD, 0}, {ZT_CC_FLASH_BWD, 0}, {ZT_CC_ATT32_FWD, 0},
        {ZT_CC_ATT32_BWD, 0}, {ZT_CC_ATT_GEMM, 0}};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) fit_class(c, t, done, order[i].cls, order[i].t0);
    /* device copies (no row measures them) keep the stream class's constants */
    c->cls[ZT_CC_COPY] = (cm_class){c->cls[ZT_CC_STREAM].eff, c->cls[ZT_CC_STREAM].t0_us, 0, 0};
    done[ZT_CC_COPY] = 1;
    /* cuDNN's attention last (its backward rows hold the dQ_accum memset, a
     * copy), from the rows of a build with cuDNN; without such rows it stays
     * uncalibrated: no other class's efficiency stands in for it */
    static const int cudnn[] = {ZT_CC_CUDNN_FWD, ZT_CC_CUDNN_BWD};
    for (size_t i = 0; i < sizeof cudnn / sizeof cudnn[0]; i++) {
        fit_class(c, t, done, cudnn[i], 0);
        if (!c->cls[cudnn[i]].rows) c->cls[cudnn[i]] = (cm_class){0, 0, 0, 0};
    }
    double e = 0;
    int m = 0;
    for (int i = 0; i < t->nrows; i++) {
        cm_row *r = &t->rows[i];
        if (!r->nk) continue;
        r->pred_ms = 1e3 * row_s(c, r);
        if (!r->fit) continue;
        const double d = log(r->pred_ms / r->ms);
        e += d * d;
        m++;
    }
    c->nrows = m;
    c->rms_log_err = m ? sqrt(e / m) : 0;
    c->nmeasured = t->nmeasured;
    memcpy(c->measured, t->measured, sizeof c->measured);
}
