/*
 * costmodel.h -- a GPU step time from counts (bench/costmodel, tests).
 *
 * The counting backend (kernels/count.h) gives every launch of a step with
 * its FLOPs and global-memory bytes.  Each kernel class gets a roofline:
 *
 *   t = max(flops / (peak * eff), bytes / (bw * eff_mem)) + t0
 *
 * compute classes (GEMMs, attention): peak = the dense bf16 or fp32 peak,
 * eff fitted, eff_mem the stream class's; memory classes: only the bytes
 * term, with their own eff; t0 the fixed cost of a launch (fitted for the
 * stream class and the two GEMM classes, the stream class's elsewhere).  A
 * step is the sum over its launches, plus each host transfer (bytes over
 * an assumed bus rate plus its latency) and each host synchronization
 * (an assumed cost): the kernels of a step run back to back on one stream.
 *
 * The constants live in a calibration file (bench/costmodel_h100.txt),
 * fitted by cm_fit() on the per-kernel rows of a recorded bench_gpu table
 * (`bench/costmodel --calibrate bench.txt`): each row's calls are replayed
 * through the counting backend, and each class's constants minimize the
 * squared log error of its rows, one class after another (the classes a
 * row also contains are fitted before it).  The engine steps recorded in
 * the same file are kept for comparison only, never fitted.
 */
#ifndef ZT_BENCH_COSTMODEL_H
#define ZT_BENCH_COSTMODEL_H

#include <stddef.h>
#include <stdio.h>
#include "count.h"

typedef struct cm_class {
    double eff;      /* of the peak (compute classes) or of the bandwidth (memory classes);
                      * 0: uncalibrated (cudnn_fwd / cudnn_bwd only: no row of the source timed it) */
    double t0_us;    /* fixed cost per launch */
    int rows;        /* table rows it was fitted on (0: not fitted, a default) */
    int assumed;     /* eff set by hand (bench/costmodel --assume): a what-if, not a fit */
} cm_class;

#define CM_MAX_MEASURED 8
typedef struct cm_measured {
    char what[32];     /* "gpt2" / "llama" */
    char shape[64];    /* L,H,C,V,B,T (gpt2) or L,NH,NKV,C,I,V,B,T (llama) */
    double ms;         /* the engine's step, stage 0, 1 rank (median) */
} cm_measured;

typedef struct cm_calib {
    char source[256];          /* the bench.txt it was fitted on */
    char device[128];
    double peak_bf16, peak_fp32;  /* TFLOP/s, dense */
    double bw_gbs;                /* HBM bandwidth the efficiencies refer to, GB/s */
    double host_gbs, host_us;     /* host <-> device transfers (assumed) */
    double sync_us;               /* a host synchronization (assumed) */
    cm_class cls[ZT_CC_N];
    int nmeasured;
    cm_measured measured[CM_MAX_MEASURED];
    double rms_log_err;           /* over the fitted rows */
    int nrows;
} cm_calib;

/* 1 when the class is compute-bound by nature (a TFLOP/s efficiency) */
int cm_compute_class(int cls);
/* 1 for the classes a calibration may leave uncalibrated: cuDNN's fused
 * attention (cudnn_fwd, cudnn_bwd), which only a bench_gpu table of a
 * build with cuDNN times; the fit gives them no default from another class */
int cm_may_be_uncalibrated(int cls);
/* 1 when c has no efficiency for cls (eff 0): cm_kernel_s gives 0 and
 * cm_step_s leaves its launches out; the caller says so */
int cm_uncalibrated(const cm_calib *c, int cls);
/* seconds of one launch of class cls */
double cm_kernel_s(const cm_calib *c, int cls, double flops, double bytes);
/* Seconds of a counted step: its kernels (per_class[ZT_CC_N] gets each
 * class's share, may be NULL), transfers and syncs; launches of
 * uncalibrated classes are left out (0 s). */
double cm_step_s(const cm_calib *c, const zt_count_kernel *k, size_t nk, const zt_count_totals *t,
                 double *per_class);

/* Calibration files: 0 on success, else -1 with a message in err. */
int cm_load(const char *path, cm_calib *c, char *err, size_t n);
void cm_write(FILE *f, const cm_calib *c);

/* One row of a bench_gpu kernel table, replayed through the counting
 * backend. */
typedef struct cm_row {
    char name[96];
    double ms;             /* measured per call */
    int fit;               /* used in the fit */
    zt_count_kernel *k;    /* its launches */
    size_t nk;
    zt_count_totals tot;
    double pred_ms;        /* after the fit */
} cm_row;

typedef struct cm_table {
    char device[128];
    double peak_fp32, peak_bf16;
    int B, T, C, NH, V;
    cm_row *rows;
    int nrows;
    int nmeasured;
    cm_measured measured[CM_MAX_MEASURED];
} cm_table;

/* Parse a bench.txt (bench/gpu.sh or scripts/gpu-bundle.sh output): the
 * device, the kernel table of bench_gpu and the engine steps of the
 * one-table summaries.  Rows are replayed through the counting backend
 * (rows that bench_gpu no longer prints are kept with nk = 0, not fitted).
 * 0 on success, -1 with err. */
int cm_table_read(const char *path, cm_table *t, char *err, size_t n);
void cm_table_free(cm_table *t);
/* Fit c's classes on t's rows (c's peaks, bandwidth and assumed constants
 * as given; source and device are filled from t).  Fills each row's
 * pred_ms. */
void cm_fit(cm_calib *c, cm_table *t, const char *source);
/* Defaults before a fit: H100 SXM peaks, 3350 GB/s, assumed host costs. */
void cm_defaults(cm_calib *c);

#endif /* ZT_BENCH_COSTMODEL_H */
