/*
 * profile.c -- the timing wrapper of a backend table (profile.h).
 *
 * The wrapper is a copy of the wrapped table whose compute entries time the
 * wrapped kernel and charge it to its family.  One wrapped backend per
 * process (the benchmarks build one context at a time).
 */
#ifdef HAVE_CONFIG_H
#include "ztconfig.h"
#endif

#include <string.h>
#include <time.h>

#include "profile.h"

static int prof_on;
static const zt_backend *inner;      /* the wrapped table */
static zt_backend wrapped;
static zt_prof_stat stat[ZT_PROF_NFAM];
static double acc_s;                 /* time charged so far (kernels and marks): an enclosing
                                      * mark subtracts it, so nothing is counted twice */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void zt_prof_enable(int on) {
    prof_on = on != 0;
    zt_prof_reset();
}

int zt_prof_enabled(void) { return prof_on; }

void zt_prof_reset(void) {
    memset(stat, 0, sizeof stat);
    acc_s = 0.0;
}

void zt_prof_get(zt_prof_stat *out) { memcpy(out, stat, sizeof stat); }

const char *zt_prof_family_name(int f) {
    static const char *names[ZT_PROF_NFAM] = {
        "matmul fwd", "matmul bwd", "attention fwd", "attention bwd", "layernorm/rmsnorm",
        "gelu/swiglu/rope", "residual add", "embedding", "softmax+xent", "adamw",
        "grad norm/scale", "memory (zero/copy/cvt)", "comm + engine", "data"};
    return f >= 0 && f < ZT_PROF_NFAM ? names[f] : "?";
}

void zt_prof_begin(zt_prof_mark *m) {
    m->on = prof_on;
    if (!m->on) return;
    m->t0 = now_s();
    m->k0 = acc_s;
}

void zt_prof_end(zt_prof_mark *m, int family) {
    if (!m->on || family < 0 || family >= ZT_PROF_NFAM) return;
    double dt = now_s() - m->t0 - (acc_s - m->k0);
    if (dt < 0) dt = 0.0;
    stat[family].seconds += dt;
    stat[family].calls++;
    acc_s += dt;
}

/* Kernel timing: on a device backend the queue is drained before and after
 * (the kernel's own time, not its launch). */
static double k_begin(void) {
    if (!inner->host_memory) inner->synchronize();
    return now_s();
}

static void k_end(double t0, int f, double flops, double bytes) {
    if (!inner->host_memory) inner->synchronize();
    const double dt = now_s() - t0;
    stat[f].seconds += dt;
    stat[f].flops += flops;
    stat[f].bytes += bytes;
    stat[f].calls++;
    acc_s += dt;
}

#define F4 4.0   /* bytes per float */

static void p_zero(void *p, size_t bytes) {
    double t = k_begin();
    inner->zero(p, bytes);
    k_end(t, ZT_PROF_MEM, 0, (double)bytes);
}
static void p_copy(void *d, const void *s, size_t bytes) {
    double t = k_begin();
    inner->copy(d, s, bytes);
    k_end(t, ZT_PROF_MEM, 0, 2.0 * (double)bytes);
}
static void p_copy2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h) {
    double t = k_begin();
    inner->copy2d(d, dp, s, sp, w, h);
    k_end(t, ZT_PROF_MEM, 0, 2.0 * (double)w * (double)h);
}
static void p_to_host(void *d, const void *s, size_t bytes) {
    double t = k_begin();
    inner->to_host(d, s, bytes);
    k_end(t, ZT_PROF_MEM, 0, 2.0 * (double)bytes);
}
static void p_to_device(void *d, const void *s, size_t bytes) {
    double t = k_begin();
    inner->to_device(d, s, bytes);
    k_end(t, ZT_PROF_MEM, 0, 2.0 * (double)bytes);
}
static void p_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe,
                          int B, int T, int C) {
    double t = k_begin();
    inner->encoder_fwd(out, inp, wte, wpe, B, T, C);
    k_end(t, ZT_PROF_EMBED, (double)B * T * C, F4 * 3.0 * B * T * C);
}
static void p_encoder_fwd_w16(float *out, const int *inp, const uint16_t *wte16, const float *wpe,
                              int B, int T, int C) {
    double t = k_begin();
    inner->encoder_fwd_w16(out, inp, wte16, wpe, B, T, C);
    k_end(t, ZT_PROF_EMBED, wpe ? (double)B * T * C : 0.0,
          (double)B * T * C * (2.0 + F4 + (wpe ? F4 : 0.0)));
}
static void p_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp,
                          int B, int T, int C) {
    double t = k_begin();
    inner->encoder_bwd(dwte, dwpe, dout, inp, B, T, C);
    k_end(t, ZT_PROF_EMBED, 2.0 * B * T * C, F4 * 5.0 * B * T * C);
}
static void p_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, int N, int C) {
    double t = k_begin();
    inner->layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    k_end(t, ZT_PROF_NORM, 8.0 * N * C, F4 * 2.0 * N * C);
}
static void p_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, const float *mean,
                            const float *rstd, int N, int C) {
    double t = k_begin();
    inner->layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    k_end(t, ZT_PROF_NORM, 16.0 * N * C, F4 * 4.0 * N * C);
}
static void p_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, float eps,
                          int N, int C) {
    double t = k_begin();
    inner->rmsnorm_fwd(out, rstd, inp, w, eps, N, C);
    k_end(t, ZT_PROF_NORM, 4.0 * N * C, F4 * 2.0 * N * C);
}
static void p_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int N, int C) {
    double t = k_begin();
    inner->rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
    k_end(t, ZT_PROF_NORM, 10.0 * N * C, F4 * 4.0 * N * C);
}
static void p_rope_fwd(float *x, const float *f, int B, int T, int nh, int stride, int hd,
                       float sc) {
    double t = k_begin();
    inner->rope_fwd(x, f, B, T, nh, stride, hd, sc);
    k_end(t, ZT_PROF_ACT, 3.0 * B * T * nh * hd, F4 * 2.0 * B * T * nh * hd);
}
static void p_rope_bwd(float *x, const float *f, int B, int T, int nh, int stride, int hd,
                       float sc) {
    double t = k_begin();
    inner->rope_bwd(x, f, B, T, nh, stride, hd, sc);
    k_end(t, ZT_PROF_ACT, 3.0 * B * T * nh * hd, F4 * 2.0 * B * T * nh * hd);
}
/* RoPE writing bf16: rope_fwd's family and FLOPs, the rotated values
 * written in 2 bytes, the rows' other columns read and written too */
static void p_rope_fwd16(uint16_t *q16, float *x, const float *f, int B, int T, int nh, int stride,
                         int hd, float sc) {
    double t = k_begin();
    inner->rope_fwd16(q16, x, f, B, T, nh, stride, hd, sc);
    k_end(t, ZT_PROF_ACT, 3.0 * B * T * nh * hd, (F4 + 2.0) * B * T * stride);
}
/* RoPE's backward on the bf16 gradient: rope_bwd's family and FLOPs, the
 * rows read and written in 2 bytes (and read again for dbias) */
static void p_rope_bwd16(uint16_t *x16, float *db, const float *f, int B, int T, int nh, int stride,
                         int hd, float sc) {
    double t = k_begin();
    inner->rope_bwd16(x16, db, f, B, T, nh, stride, hd, sc);
    k_end(t, ZT_PROF_ACT, 3.0 * B * T * nh * hd, (db ? 6.0 : 4.0) * B * T * stride);
}
/* Qwen3's q/k norms then RoPE writing bf16: the norm family, headnorm_fwd's
 * FLOPs and the rotation's, x read, raw written (4 bytes each) and the rows
 * written in 2 bytes */
static void p_qknorm_rope_fwd16(uint16_t *q16, float *x, float *raw, float *rstd, const float *qw,
                                const float *kw, float eps, const float *f, int B, int T, int NH,
                                int NKV, int qnh, int knh, int stride, int hd, float sc) {
    double t = k_begin();
    inner->qknorm_rope_fwd16(q16, x, raw, rstd, qw, kw, eps, f, B, T, NH, NKV, qnh, knh, stride, hd,
                             sc);
    const double nhd = (double)B * T * (NH + NKV) * hd;
    k_end(t, ZT_PROF_NORM, 7.0 * nhd, (F4 + 2.0) * B * T * stride + F4 * nhd);
}
/* Qwen3's q/k norms' backward on the bf16 gradient: the norm family,
 * headnorm_bwd's FLOPs and the rotation's (8 + 3 a value), the q and k heads read and
 * written in 2 bytes, raw read (4 bytes) */
static void p_qknorm_rope_bwd16(uint16_t *d16, float *dqw, float *dkw, const float *raw,
                                const float *rstd, const float *qw, const float *kw, const float *f,
                                int B, int T, int NH, int NKV, int qnh, int knh, int stride, int hd,
                                float sc) {
    double t = k_begin();
    inner->qknorm_rope_bwd16(d16, dqw, dkw, raw, rstd, qw, kw, f, B, T, NH, NKV, qnh, knh, stride,
                             hd, sc);
    const double nhd = (double)B * T * (NH + NKV) * hd;
    k_end(t, ZT_PROF_NORM, 11.0 * nhd, (4.0 + F4) * nhd);
}
static void p_headnorm_fwd(float *x, float *raw, float *rstd, const float *w, float eps, int N,
                           int nh, int stride, int hd) {
    double t = k_begin();
    inner->headnorm_fwd(x, raw, rstd, w, eps, N, nh, stride, hd);
    k_end(t, ZT_PROF_NORM, 4.0 * N * nh * hd, F4 * 3.0 * N * nh * hd);
}
static void p_headnorm_bwd(float *dx, float *dw, const float *raw, const float *w,
                           const float *rstd, int N, int nh, int stride, int hd) {
    double t = k_begin();
    inner->headnorm_bwd(dx, dw, raw, w, rstd, N, nh, stride, hd);
    k_end(t, ZT_PROF_NORM, 8.0 * N * nh * hd, F4 * 4.0 * N * nh * hd);
}
static void p_swiglu_fwd(float *out, const float *gu, int N, int H) {
    double t = k_begin();
    inner->swiglu_fwd(out, gu, N, H);
    k_end(t, ZT_PROF_ACT, 0, F4 * 3.0 * N * H);
}
static void p_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    double t = k_begin();
    inner->swiglu_bwd(dgu, dout, gu, N, H);
    k_end(t, ZT_PROF_ACT, 0, F4 * 5.0 * N * H);
}
/* set_dw_fresh (backend.h): the gradients p_fresh[0, p_fresh_n) whose dW
 * GEMM writes dw without reading it; dw_rw: dw's elements moved, 1 or 2 a
 * weight (read and written) */
static const float *p_fresh;
static size_t p_fresh_n;
static void p_set_dw_fresh(float *g, size_t n) {
    p_fresh = g && n ? g : NULL;
    p_fresh_n = g ? n : 0;
    inner->set_dw_fresh(g, n);
}
static double dw_rw(const float *dw) {
    return p_fresh && dw >= p_fresh && dw < p_fresh + p_fresh_n ? 1.0 : 2.0;
}
static void p_matmul_fwd(float *out, const float *inp, const float *w, const float *bias,
                         int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_fwd(out, inp, w, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          F4 * ((double)N * C + (double)OC * C + (double)N * OC));
}
static void p_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, (dinp ? g : 0) + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + (dinp ? (double)OC * C + (double)N * C : 0) +
                (dw ? dw_rw(dw) * OC * C + (double)N * C : 0)));
}
/* the input gradient accumulated: matmul_bwd's dinp GEMM with dinp read too */
static void p_matmul_dinp_acc(float *dinp, const float *dout, const float *w, int N, int C,
                              int OC) {
    double t = k_begin();
    inner->matmul_dinp_acc(dinp, dout, w, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_BWD, 2.0 * N * C * OC,
          F4 * ((double)N * OC + (double)OC * C + 2.0 * N * C));
}
/* the fused GELU layers: the matmul's family (the GELU rides in its epilogue) */
static void p_matmul_gelu_fwd(float *out, float *pre, const float *inp, const float *w,
                              const float *bias, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_gelu_fwd(out, pre, inp, w, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          F4 * ((double)N * C + (double)OC * C + 2.0 * N * OC));
}
/* the bf16-weight entries: their fp32-weight entries' counts (the weight
 * read in 2 bytes an element) */
static void p_matmul_fwd_w16(float *out, const float *inp, const uint16_t *w16, const float *bias,
                             int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_fwd_w16(out, inp, w16, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          F4 * ((double)N * C + (double)N * OC) + 2.0 * OC * C);
}
static void p_matmul_bwd_w16(float *dinp, float *dw, float *dbias, const float *dout,
                             const float *inp, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_w16(dinp, dw, dbias, dout, inp, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, (dinp ? g : 0) + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + (dinp ? (double)N * C : 0) + (dw ? dw_rw(dw) * OC * C + (double)N * C : 0)) +
              (dinp ? 2.0 * OC * C : 0));
}
static void p_matmul_gelu_fwd_w16(float *out, float *pre, const float *inp, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_gelu_fwd_w16(out, pre, inp, w16, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          F4 * ((double)N * C + 2.0 * N * OC) + 2.0 * OC * C);
}
static void p_matmul_dgelu_bwd_w16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const float *inp, const float *pre,
                                   const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_dgelu_bwd_w16(dpre, dpre_bias, dw, dbias, dout, inp, pre, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + 2.0 * N * C + (dw ? dw_rw(dw) * OC * C + (double)N * C : 0)) + 2.0 * OC * C);
}
/* the bf16-output entries: matmul_fwd's counts with the output written in 2
 * bytes an element; the elementwise ones with the bf16 tensors in 2 */
static void p_matmul_fwd_o16(uint16_t *out16, float *tmp, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, const float *bias, int N, int C,
                             int OC) {
    double t = k_begin();
    inner->matmul_fwd_o16(out16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          (inp16 ? 2.0 : F4) * N * C + 2.0 * N * OC + (w16 ? 2.0 : F4) * OC * C);
}
static void p_gelu_fwd16(uint16_t *out16, const uint16_t *in16, float *tmp, size_t n) {
    double t = k_begin();
    inner->gelu_fwd16(out16, in16, tmp, n);
    k_end(t, ZT_PROF_ACT, 0, 4.0 * n);
}
static void p_swiglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                           int H) {
    double t = k_begin();
    inner->swiglu_fwd16(out16, gu16, tmp, tmp2, N, H);
    k_end(t, ZT_PROF_ACT, 0, 6.0 * N * H);
}
static void p_geglu_fwd16(uint16_t *out16, const uint16_t *gu16, float *tmp, float *tmp2, int N,
                          int H) {
    double t = k_begin();
    inner->geglu_fwd16(out16, gu16, tmp, tmp2, N, H);
    k_end(t, ZT_PROF_ACT, 0, 6.0 * N * H);
}
static void p_gelu_fwd16r(uint16_t *out16, uint16_t *in16, const float *in, float *tmp, size_t n) {
    double t = k_begin();
    inner->gelu_fwd16r(out16, in16, in, tmp, n);
    k_end(t, ZT_PROF_ACT, 0, (F4 + 4.0) * n);
}
static void p_swiglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H) {
    double t = k_begin();
    inner->swiglu_fwd16r(out16, gu16, gu, tmp2, N, H);
    k_end(t, ZT_PROF_ACT, 0, (2.0 * F4 + 6.0) * N * H);
}
static void p_geglu_fwd16r(uint16_t *out16, uint16_t *gu16, float *gu, float *tmp2, int N, int H) {
    double t = k_begin();
    inner->geglu_fwd16r(out16, gu16, gu, tmp2, N, H);
    k_end(t, ZT_PROF_ACT, 0, (2.0 * F4 + 6.0) * N * H);
}
static void p_swiglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    double t = k_begin();
    inner->swiglu_bwd16(dgu, dout, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (4.0 + F4 * 3.0) * N * H);
}
static void p_geglu_bwd16(float *dgu, const float *dout, const uint16_t *gu16, int N, int H) {
    double t = k_begin();
    inner->geglu_bwd16(dgu, dout, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (4.0 + F4 * 3.0) * N * H);
}
/* the bf16-input entries: their fp32 entries' counts with the input read
 * in 2 bytes an element (and the weight too with w16) */
static double p_wbytes(const uint16_t *w16, int OC, int C) { return (w16 ? 2.0 : F4) * OC * C; }
static void p_matmul_fwd_a16(float *out, const uint16_t *inp16, const float *w, const uint16_t *w16,
                             const float *bias, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_fwd_a16(out, inp16, w, w16, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          2.0 * N * C + F4 * (double)N * OC + p_wbytes(w16, OC, C));
}
/* the forward product accumulated into bf16: matmul_fwd_o16's counts with
 * out16 read too */
static void p_matmul_fwd_acc16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_fwd_acc16(out16, inp, inp16, w, w16, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          (inp16 ? 2.0 : F4) * N * C + 2.0 * 2.0 * N * OC + p_wbytes(w16, OC, C));
}
/* the forward product accumulated: matmul_fwd's GEMM with out read too */
static void p_matmul_fwd_acc(float *out, const float *inp, const uint16_t *inp16, const float *w,
                             const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_fwd_acc(out, inp, inp16, w, w16, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          (inp16 ? 2.0 : F4) * N * C + 2.0 * F4 * (double)N * OC + p_wbytes(w16, OC, C));
}
/* the base input gradient accumulated: matmul_bwd's dinp GEMM with dinp read too */
static void p_matmul_bwd_acc(float *dinp, const float *dout, const uint16_t *dout16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_acc(dinp, dout, dout16, w, w16, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_BWD, 2.0 * N * C * OC,
          (dout16 ? 2.0 : F4) * N * OC + 2.0 * F4 * (double)N * C + p_wbytes(w16, OC, C));
}
/* the MoE's grouped forward GEMM: the blocks' matmul_fwd_o16 counts
 * together */
static void p_matmul_grouped_o16(uint16_t *out16, const float *inp, const uint16_t *inp16,
                                 const uint16_t *w16, const int *n, int G, int C, int OC) {
    double t = k_begin();
    inner->matmul_grouped_o16(out16, inp, inp16, w16, n, G, C, OC);
    double rows = 0, wb = 0;
    for (int g = 0; g < G; ++g)
        if (n[g] > 0) rows += n[g], wb += 2.0 * OC * C;
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * rows * C * OC, (inp16 ? 2.0 : F4) * rows * C + 2.0 * rows * OC + wb);
}
/* the MoE's grouped backward input gradients: the blocks' dinp GEMMs
 * together (bf16 operands and output) */
static void p_matmul_grouped_bwd_o16(uint16_t *dinp16, float *tmp, const uint16_t *dout16,
                                     const uint16_t *w16, const int *n, int G, int C, int OC) {
    double t = k_begin();
    inner->matmul_grouped_bwd_o16(dinp16, tmp, dout16, w16, n, G, C, OC);
    double rows = 0, wb = 0;
    for (int g = 0; g < G; ++g)
        if (n[g] > 0) rows += n[g], wb += 2.0 * OC * C;
    k_end(t, ZT_PROF_MATMUL_BWD, 2.0 * rows * C * OC, 2.0 * rows * OC + 2.0 * rows * C + wb);
}
/* the MoE's grouped weight gradients: the blocks' dW GEMMs together (bf16
 * operands, the bf16 products written and read again, dw read and
 * written) */
static void p_matmul_grouped_dw16(float *dw, uint16_t *tmp16, size_t tmp_n, const uint16_t *dout16,
                                  const uint16_t *inp16, const int *n, int G, int C, int OC) {
    double t = k_begin();
    inner->matmul_grouped_dw16(dw, tmp16, tmp_n, dout16, inp16, n, G, C, OC);
    double rows = 0, wb = 0;
    for (int g = 0; g < G; ++g)
        if (n[g] > 0) rows += n[g], wb += (2.0 + 2.0 + 2 * F4) * OC * C;
    k_end(t, ZT_PROF_MATMUL_BWD, 2.0 * rows * C * OC, 2.0 * rows * OC + 2.0 * rows * C + wb);
}
/* the base input gradient accumulated into bf16: matmul_bwd_acc's counts
 * with dinp16 read and written in bf16 */
static void p_matmul_bwd_acc16(uint16_t *dinp16, const float *dout, const uint16_t *dout16,
                               const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_acc16(dinp16, dout, dout16, w, w16, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_BWD, 2.0 * N * C * OC,
          (dout16 ? 2.0 : F4) * N * OC + 2.0 * 2.0 * N * C + p_wbytes(w16, OC, C));
}
static void p_matmul_bwd_a16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                             int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_a16(dinp, dw, dbias, dout, inp16, w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, (dinp ? g : 0) + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + (dinp ? (double)N * C : 0) + (dw ? dw_rw(dw) * OC * C : 0)) +
              (dw ? 2.0 * N * C : 0) + (dinp ? p_wbytes(w16, OC, C) : 0));
}
static void p_matmul_gelu_fwd_a16(float *out, float *pre, const uint16_t *inp16, const float *w,
                                  const uint16_t *w16, const float *bias, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_gelu_fwd_a16(out, pre, inp16, w, w16, bias, N, C, OC);
    k_end(t, ZT_PROF_MATMUL_FWD, 2.0 * N * C * OC,
          2.0 * N * C + F4 * 2.0 * N * OC + p_wbytes(w16, OC, C));
}
static void p_matmul_dgelu_bwd_a16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *inp16, const float *pre,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_dgelu_bwd_a16(dpre, dpre_bias, dw, dbias, dout, inp16, pre, w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + 2.0 * N * C + (dw ? dw_rw(dw) * OC * C : 0)) + (dw ? 2.0 * N * C : 0) +
              p_wbytes(w16, OC, C));
}
/* the bf16-gradient entries: the bf16-input entries' counts with dout
 * read in 2 bytes an element (4 more for dbias's column sum) and the input
 * in 2 (inp16) or 4; the producers: their fp32 kernels' with the bf16 copy
 * written (2 bytes an element more) */
static void p_matmul_bwd_d16(float *dinp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_d16(dinp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, (dinp ? g : 0) + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          2.0 * N * OC + (dbias ? F4 * N * OC : 0) +
              F4 * ((dinp ? (double)N * C : 0) + (dw ? dw_rw(dw) * OC * C : 0)) +
              (dw ? (inp16 ? 2.0 : F4) * N * C : 0) + (dinp ? p_wbytes(w16, OC, C) : 0));
}
static void p_matmul_dgelu_bwd_d16(float *dpre, float *dpre_bias, float *dw, float *dbias,
                                   const float *dout, const uint16_t *dout16, const float *inp,
                                   const uint16_t *inp16, const float *pre, const float *w,
                                   const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_dgelu_bwd_d16(dpre, dpre_bias, dw, dbias, dout, dout16, inp, inp16, pre, w, w16,
                                N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          2.0 * N * OC + (dbias ? F4 * N * OC : 0) + F4 * (2.0 * N * C + (dw ? dw_rw(dw) * OC * C : 0)) +
              (dw ? (inp16 ? 2.0 : F4) * N * C : 0) + p_wbytes(w16, OC, C));
}
/* (matmul_dgelu_bwd_d16's with dpre written in bf16 and pre read in bf16) */
static void p_matmul_bwd_o16(uint16_t *dinp16, float *tmp, float *dw, float *dbias, const float *dout,
                             const uint16_t *dout16, const float *inp, const uint16_t *inp16,
                             const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_o16(dinp16, tmp, dw, dbias, dout, dout16, inp, inp16, w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          2.0 * N * OC + (dbias ? (dout ? F4 : 2.0) * N * OC : 0) + 2.0 * N * C + (dw ? F4 * dw_rw(dw) * OC * C : 0) +
              (dw ? (inp16 ? 2.0 : F4) * N * C : 0) + p_wbytes(w16, OC, C));
}
static void p_matmul_dgelu_bwd_o16(uint16_t *dpre16, float *tmp, float *dpre_bias, float *dw,
                                   float *dbias, const float *dout, const uint16_t *dout16,
                                   const float *inp, const uint16_t *inp16, const uint16_t *pre16,
                                   const float *w, const uint16_t *w16, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_dgelu_bwd_o16(dpre16, tmp, dpre_bias, dw, dbias, dout, dout16, inp, inp16, pre16,
                                w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          2.0 * N * OC + (dbias ? F4 * N * OC : 0) + 2.0 * 2.0 * N * C + (dw ? F4 * dw_rw(dw) * OC * C : 0) +
              (dw ? (inp16 ? 2.0 : F4) * N * C : 0) + p_wbytes(w16, OC, C));
}
static void p_layernorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, float *db,
                              const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C) {
    double t = k_begin();
    inner->layernorm_bwd16(dinp, dinp16, dw, db, dout, inp, w, mean, rstd, N, C);
    k_end(t, ZT_PROF_NORM, 16.0 * N * C, (F4 * 4.0 + 2.0) * N * C);
}
static void p_matmul_gelu_fwd_o16(uint16_t *out16, uint16_t *pre16, float *tmp, const float *inp,
                                  const uint16_t *inp16, const float *w, const uint16_t *w16,
                                  const float *bias, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_gelu_fwd_o16(out16, pre16, tmp, inp, inp16, w, w16, bias, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_FWD, g + 9.0 * N * OC,
          (inp16 ? 2.0 : F4) * N * C + 2.0 * 2.0 * N * OC + p_wbytes(w16, OC, C));
}
static void p_layernorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, float *db, float *dsum,
                               const float *dout, const uint16_t *dout16, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C) {
    double t = k_begin();
    inner->layernorm_bwd16d(dinp, dinp16, dw, db, dsum, dout, dout16, inp, w, mean, rstd, N, C);
    k_end(t, ZT_PROF_NORM, (dsum ? 17.0 : 16.0) * N * C,
          (F4 * 3.0 + (dout16 ? 2.0 : F4) + (dinp16 ? 2.0 : 0.0)) * N * C);
}
static void p_rmsnorm_bwd16(float *dinp, uint16_t *dinp16, float *dw, const float *dout,
                            const float *inp, const float *w, const float *rstd, int N, int C) {
    double t = k_begin();
    inner->rmsnorm_bwd16(dinp, dinp16, dw, dout, inp, w, rstd, N, C);
    k_end(t, ZT_PROF_NORM, 10.0 * N * C, (F4 * 4.0 + 2.0) * N * C);
}
static void p_rmsnorm_bwd16d(float *dinp, uint16_t *dinp16, float *dw, const uint16_t *dout16,
                             const float *inp, const float *w, const float *rstd, int N, int C) {
    double t = k_begin();
    inner->rmsnorm_bwd16d(dinp, dinp16, dw, dout16, inp, w, rstd, N, C);
    k_end(t, ZT_PROF_NORM, 10.0 * N * C, (F4 * 3.0 + 2.0 + (dinp16 ? 2.0 : 0.0)) * N * C);
}
static void p_swiglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                             int N, int H) {
    double t = k_begin();
    inner->swiglu_bwd_d16(dgu, dgu16, dout, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (8.0 + F4 * (dgu ? 3.0 : 1.0)) * N * H);
}
static void p_geglu_bwd_d16(float *dgu, uint16_t *dgu16, const float *dout, const uint16_t *gu16,
                            int N, int H) {
    double t = k_begin();
    inner->geglu_bwd_d16(dgu, dgu16, dout, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (8.0 + F4 * (dgu ? 3.0 : 1.0)) * N * H);
}
static void p_swiglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                              const uint16_t *gu16, int N, int H) {
    double t = k_begin();
    inner->swiglu_bwd_dd16(dgu, dgu16, dout16, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (10.0 + F4 * (dgu ? 2.0 : 0.0)) * N * H);
}
static void p_geglu_bwd_dd16(float *dgu, uint16_t *dgu16, const uint16_t *dout16,
                             const uint16_t *gu16, int N, int H) {
    double t = k_begin();
    inner->geglu_bwd_dd16(dgu, dgu16, dout16, gu16, N, H);
    k_end(t, ZT_PROF_ACT, 0, (10.0 + F4 * (dgu ? 2.0 : 0.0)) * N * H);
}
static void p_matmul_dgelu_bwd(float *dpre, float *dpre_bias, float *dw, float *dbias,
                               const float *dout, const float *inp, const float *pre,
                               const float *w, int N, int C, int OC) {
    double t = k_begin();
    inner->matmul_dgelu_bwd(dpre, dpre_bias, dw, dbias, dout, inp, pre, w, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, g + (dw ? g : 0) + (dbias ? (double)N * OC : 0),
          F4 * ((double)N * OC + (double)OC * C + 2.0 * N * C + (dw ? dw_rw(dw) * OC * C + (double)N * C : 0)));
}
/* the residual add and the next norm: the norm's family */
static void p_add_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                const float *b, const float *w, const float *bias, int N, int C) {
    double t = k_begin();
    inner->add_layernorm_fwd(res, out, mean, rstd, a, b, w, bias, N, C);
    k_end(t, ZT_PROF_NORM, 0, F4 * 4.0 * N * C);
}
static void p_add_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                              const float *w, float eps, int N, int C) {
    double t = k_begin();
    inner->add_rmsnorm_fwd(res, out, rstd, a, b, w, eps, N, C);
    k_end(t, ZT_PROF_NORM, 0, F4 * 4.0 * N * C);
}
/* the norms writing bf16: the fp32 norms' family and counts, out in 2
 * bytes an element */
static void p_layernorm_fwd16(uint16_t *out16, float *tmp, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b, int N, int C) {
    double t = k_begin();
    inner->layernorm_fwd16(out16, tmp, mean, rstd, inp, w, b, N, C);
    k_end(t, ZT_PROF_NORM, 8.0 * N * C, (F4 + 2.0) * N * C);
}
static void p_rmsnorm_fwd16(uint16_t *out16, float *tmp, float *rstd, const float *inp,
                            const float *w, float eps, int N, int C) {
    double t = k_begin();
    inner->rmsnorm_fwd16(out16, tmp, rstd, inp, w, eps, N, C);
    k_end(t, ZT_PROF_NORM, 4.0 * N * C, (F4 + 2.0) * N * C);
}
static void p_add_layernorm_fwd16(float *res, uint16_t *out16, float *tmp, float *mean,
                                  float *rstd, const float *a, const float *b, const float *w,
                                  const float *bias, int N, int C) {
    double t = k_begin();
    inner->add_layernorm_fwd16(res, out16, tmp, mean, rstd, a, b, w, bias, N, C);
    k_end(t, ZT_PROF_NORM, 0, (F4 * 3.0 + 2.0) * N * C);
}
static void p_add_rmsnorm_fwd16(float *res, uint16_t *out16, float *tmp, float *rstd,
                                const float *a, const float *b, const float *w, float eps, int N,
                                int C) {
    double t = k_begin();
    inner->add_rmsnorm_fwd16(res, out16, tmp, rstd, a, b, w, eps, N, C);
    k_end(t, ZT_PROF_NORM, 0, (F4 * 3.0 + 2.0) * N * C);
}
static void p_add_rmsnorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *rstd,
                                 const float *a, const uint16_t *b16, const float *w, float eps,
                                 int N, int C) {
    double t = k_begin();
    inner->add_rmsnorm_fwd16b(res, out16, tmp, rstd, a, b16, w, eps, N, C);
    k_end(t, ZT_PROF_NORM, 0, (F4 * 2.0 + 4.0) * N * C);
}
static void p_add_layernorm_fwd16b(float *res, uint16_t *out16, float *tmp, float *mean,
                                   float *rstd, const float *a, const uint16_t *b16, const float *w,
                                   const float *bias, int N, int C) {
    double t = k_begin();
    inner->add_layernorm_fwd16b(res, out16, tmp, mean, rstd, a, b16, w, bias, N, C);
    k_end(t, ZT_PROF_NORM, 0, (F4 * 2.0 + 4.0) * N * C);
}
/* causal attention: QK^T and PV over the lower triangle (T(T+1)/2 pairs) */
static double att_flops(int B, int T, int NH, int hd) {
    return 2.0 * 2.0 * B * NH * hd * (double)T * (T + 1) / 2.0;
}
static void p_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int C,
                            int NH) {
    double t = k_begin();
    inner->attention_fwd(out, lse, qkv, B, T, C, NH);
    k_end(t, ZT_PROF_ATTN_FWD, att_flops(B, T, NH, NH ? C / NH : 0), F4 * 4.0 * B * T * C);
}
static void p_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int C, int NH) {
    double t = k_begin();
    inner->attention_bwd(dqkv, dout, qkv, out, lse, B, T, C, NH);
    /* recomputed scores, dout.v, dq, dk, dv: 2.5x the forward's products */
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_flops(B, T, NH, NH ? C / NH : 0),
          F4 * 8.0 * B * T * C);
}
static void p_gqa_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                      int hd) {
    double t = k_begin();
    inner->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hd);
    k_end(t, ZT_PROF_ATTN_FWD, att_flops(B, T, NH, hd),
          F4 * ((double)B * T * (NH + 2 * NKV) * hd + (double)B * T * NH * hd));
}
static void p_gqa_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                      const float *lse, int B, int T, int NH, int NKV, int hd) {
    double t = k_begin();
    inner->gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd);
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_flops(B, T, NH, hd),
          F4 * (2.0 * B * T * (NH + 2 * NKV) * hd + 2.0 * B * T * NH * hd));
}
/* windowed attention: the pairs within the window */
static double att_ext_flops(int B, int T, int NH, int hd, const zt_attn_opts *o) {
    const int w = o && o->window > 0 && o->window < T ? o->window : T;
    /* rows t < w see t + 1 keys, the others w */
    const double pairs = (double)w * (w + 1) / 2.0 + (double)(T - w) * w;
    return 2.0 * 2.0 * B * NH * hd * pairs;
}
static void p_gqa_ext_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH,
                          int NKV, int hd, const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_FWD, att_ext_flops(B, T, NH, hd, o),
          F4 * ((double)B * T * (NH + 2 * NKV) * hd + (double)B * T * NH * hd));
}
/* (the bf16-input forms: q|k|v read in 2 bytes an element) */
static void p_gqa_ext_fwd16(float *out, float *lse, const uint16_t *qkv16, float *tmp, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_fwd16(out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_FWD, att_ext_flops(B, T, NH, hd, o),
          2.0 * B * T * (NH + 2 * NKV) * hd + F4 * ((double)B * T * NH * hd));
}
static void p_gqa_ext_bwd16(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                            const float *out, const float *lse, int B, int T, int NH, int NKV,
                            int hd, const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_bwd16(dqkv, dout, qkv16, tmp, out, lse, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_ext_flops(B, T, NH, hd, o),
          (2.0 + F4) * B * T * (NH + 2 * NKV) * hd + F4 * 2.0 * B * T * NH * hd);
}
/* (the bf16-output forms: out also in 2 bytes an element) */
static void p_gqa_ext_fwd16o(uint16_t *out16, float *out, float *lse, const uint16_t *qkv16,
                             float *tmp, int B, int T, int NH, int NKV, int hd,
                             const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_fwd16o(out16, out, lse, qkv16, tmp, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_FWD, att_ext_flops(B, T, NH, hd, o),
          2.0 * B * T * (NH + 2 * NKV) * hd + 2.0 * B * T * NH * hd);
}
static void p_gqa_ext_bwd16o(float *dqkv, const float *dout, const uint16_t *qkv16, float *tmp,
                             const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_ext_flops(B, T, NH, hd, o),
          (2.0 + F4) * B * T * (NH + 2 * NKV) * hd + (F4 + 2.0) * B * T * NH * hd);
}

static int p_gqa_ext_bwd16d(float *dqkv, uint16_t *dqkv16, const float *dout, const uint16_t *qkv16,
                            float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                            int NH, int NKV, int hd, const zt_attn_opts *o) {
    double t = k_begin();
    const int r = inner->gqa_ext_bwd16d(dqkv, dqkv16, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    /* (1: the gradient written in bf16, 2 bytes an element in place of 4) */
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_ext_flops(B, T, NH, hd, o),
          (2.0 + (r ? 2.0 : F4)) * B * T * (NH + 2 * NKV) * hd + (F4 + 2.0) * B * T * NH * hd);
    return r;
}

/* (the output's gradient read in bf16: 2 bytes an element in place of 4) */
static int p_gqa_ext_bwd16do(float *dqkv, uint16_t *dqkv16, const uint16_t *dout16, const uint16_t *qkv16,
                             float *tmp, const uint16_t *out16, float *out, const float *lse, int B, int T,
                             int NH, int NKV, int hd, const zt_attn_opts *o) {
    double t = k_begin();
    const int r = inner->gqa_ext_bwd16do(dqkv, dqkv16, dout16, qkv16, tmp, out16, out, lse, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_ext_flops(B, T, NH, hd, o),
          (2.0 + (r ? 2.0 : F4)) * B * T * (NH + 2 * NKV) * hd + (2.0 + 2.0) * B * T * NH * hd);
    return r;
}

static void p_gqa_ext_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int B, int T, int NH, int NKV, int hd,
                          const zt_attn_opts *o) {
    double t = k_begin();
    inner->gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, hd, o);
    k_end(t, ZT_PROF_ATTN_BWD, 2.5 * att_ext_flops(B, T, NH, hd, o),
          F4 * (2.0 * B * T * (NH + 2 * NKV) * hd + 2.0 * B * T * NH * hd));
}
static void p_geglu_fwd(float *out, const float *gu, int N, int H) {
    double t = k_begin();
    inner->geglu_fwd(out, gu, N, H);
    k_end(t, ZT_PROF_ACT, 0, F4 * 3.0 * N * H);
}
static void p_geglu_bwd(float *dgu, const float *dout, const float *gu, int N, int H) {
    double t = k_begin();
    inner->geglu_bwd(dgu, dout, gu, N, H);
    k_end(t, ZT_PROF_ACT, 0, F4 * 5.0 * N * H);
}
static void p_softcap_fwd(float *y, const float *x, size_t n, float cap) {
    double t = k_begin();
    inner->softcap_fwd(y, x, n, cap);
    k_end(t, ZT_PROF_ACT, 0, F4 * 2.0 * (double)n);
}
static void p_softcap_bwd(float *dx, const float *dy, const float *y, size_t n, float cap) {
    double t = k_begin();
    inner->softcap_bwd(dx, dy, y, n, cap);
    k_end(t, ZT_PROF_ACT, 0, F4 * 3.0 * (double)n);
}
static void p_gelu_fwd(float *out, const float *inp, size_t n) {
    double t = k_begin();
    inner->gelu_fwd(out, inp, n);
    k_end(t, ZT_PROF_ACT, 0, F4 * 2.0 * (double)n);
}
static void p_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n) {
    double t = k_begin();
    inner->gelu_bwd(dinp, inp, dout, n);
    k_end(t, ZT_PROF_ACT, 0, F4 * 3.0 * (double)n);
}
static void p_add(float *out, const float *a, const float *b, size_t n) {
    double t = k_begin();
    inner->add(out, a, b, n);
    k_end(t, ZT_PROF_RESID, (double)n, F4 * 3.0 * (double)n);
}
static void p_xent_fwd(float *losses, float *probs, const float *logits, const int *targets,
                       int N, int V) {
    double t = k_begin();
    inner->xent_fwd(losses, probs, logits, targets, N, V);
    k_end(t, ZT_PROF_XENT, 0, F4 * 2.0 * N * V);
}
static void p_xent_bwd(float *dlogits, const float *probs, const int *targets, float dloss,
                       int N, int V) {
    double t = k_begin();
    inner->xent_bwd(dlogits, probs, targets, dloss, N, V);
    k_end(t, ZT_PROF_XENT, (double)N * V, F4 * 2.0 * N * V);
}
static void p_xent_fused(float *losses, float *logits, const int *targets, float dloss, int N,
                         int V) {
    double t = k_begin();
    inner->xent_fused(losses, logits, targets, dloss, N, V);
    k_end(t, ZT_PROF_XENT, (double)N * V, F4 * 2.0 * N * V);
}
/* the LM head's bf16 logits: the row read once (and, fused, again with the
 * gradient written over it) in 2 bytes */
static void p_xent16_fwd(float *losses, const uint16_t *logits16, const int *targets, int N, int V) {
    double t = k_begin();
    inner->xent16_fwd(losses, logits16, targets, N, V);
    k_end(t, ZT_PROF_XENT, 0, 2.0 * N * V);
}
static void p_xent16_fused(float *losses, uint16_t *logits16, const int *targets, float dloss, int N,
                           int V) {
    double t = k_begin();
    inner->xent16_fused(losses, logits16, targets, dloss, N, V);
    k_end(t, ZT_PROF_XENT, (double)N * V, 2.0 * 3.0 * N * V);
}
static void p_matmul_bwd_head16(float *dinp, float *dw, const uint16_t *dout16, const float *inp,
                                const uint16_t *inp16, const float *w, const uint16_t *w16, int N,
                                int C, int OC) {
    double t = k_begin();
    inner->matmul_bwd_head16(dinp, dw, dout16, inp, inp16, w, w16, N, C, OC);
    const double g = 2.0 * N * C * OC;
    k_end(t, ZT_PROF_MATMUL_BWD, (dinp ? g : 0) + (dw ? g : 0),
          2.0 * N * OC + (dinp ? F4 * N * C + (w16 ? 2.0 : F4) * OC * C : 0) +
              (dw ? 2.0 * F4 * OC * C + (inp16 ? 2.0 : F4) * N * C : 0));
}
static void p_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                    float b1, float b2, float eps, float wd, float bc1, float bc2, float gs) {
    double t = k_begin();
    inner->adamw(p, grad, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, gs);
    k_end(t, ZT_PROF_ADAMW, 16.0 * (double)n, F4 * 7.0 * (double)n);
}
static double p_sumsq(const float *x, size_t n) {
    double t = k_begin();
    double r = inner->sumsq(x, n);
    k_end(t, ZT_PROF_GNORM, 2.0 * (double)n, F4 * (double)n);
    return r;
}
static void p_scale(float *x, size_t n, float s) {
    double t = k_begin();
    inner->scale(x, n, s);
    k_end(t, ZT_PROF_GNORM, (double)n, F4 * 2.0 * (double)n);
}
static size_t p_nonfinite(const float *x, size_t n) {
    double t = k_begin();
    size_t r = inner->nonfinite(x, n);
    k_end(t, ZT_PROF_GNORM, 0, F4 * (double)n);
    return r;
}
static void p_to_bf16(uint16_t *out, const float *in, size_t n) {
    double t = k_begin();
    inner->to_bf16(out, in, n);
    k_end(t, ZT_PROF_MEM, 0, 6.0 * (double)n);
}
static void p_from_bf16(float *out, const uint16_t *in, size_t n) {
    double t = k_begin();
    inner->from_bf16(out, in, n);
    k_end(t, ZT_PROF_MEM, 0, 6.0 * (double)n);
}
static void p_from_bf16_runs(float *out, const uint16_t *in, const size_t *off, const size_t *n, int nr) {
    double t = k_begin();
    inner->from_bf16_runs(out, in, off, n, nr);
    size_t all = 0;
    for (int r = 0; r < nr; ++r) all += n[r];
    k_end(t, ZT_PROF_MEM, 0, 6.0 * (double)all);
}
static void p_to_f16(uint16_t *out, const float *in, size_t n) {
    double t = k_begin();
    inner->to_f16(out, in, n);
    k_end(t, ZT_PROF_MEM, 0, 6.0 * (double)n);
}
static void p_from_f16(float *out, const uint16_t *in, size_t n) {
    double t = k_begin();
    inner->from_f16(out, in, n);
    k_end(t, ZT_PROF_MEM, 0, 6.0 * (double)n);
}
static double p_sum(const float *x, size_t n) {
    double t = k_begin();
    double r = inner->sum(x, n);
    k_end(t, ZT_PROF_MEM, (double)n, F4 * (double)n);
    return r;
}

const zt_backend *zt_prof_wrap(const zt_backend *be) {
    if (!prof_on || !be) return be;
    if (be == &wrapped) return be;
    inner = be;
    wrapped = *be;   /* names, memory, async copies, precision: as the wrapped */
    /* an entry the wrapped table lacks stays NULL */
#define W(f) wrapped.f = be->f ? p_##f : NULL
    W(zero);
    W(copy);
    W(copy2d);
    W(to_host);
    W(to_device);
    W(encoder_fwd);
    W(encoder_fwd_w16);
    W(encoder_bwd);
    W(layernorm_fwd);
    W(layernorm_bwd);
    W(rmsnorm_fwd);
    W(rmsnorm_bwd);
    W(rope_fwd);
    W(rope_bwd);
    W(headnorm_fwd);
    W(headnorm_bwd);
    W(swiglu_fwd);
    W(swiglu_bwd);
    W(matmul_fwd);
    W(matmul_bwd);
    W(attention_fwd);
    W(attention_bwd);
    W(gqa_fwd);
    W(gqa_bwd);
    W(gqa_ext_fwd);
    W(gqa_ext_bwd);
    W(geglu_fwd);
    W(geglu_bwd);
    W(softcap_fwd);
    W(softcap_bwd);
    W(gelu_fwd);
    W(gelu_bwd);
    W(add);
    W(xent_fwd);
    W(xent_bwd);
    W(xent_fused);
    W(matmul_gelu_fwd);
    W(matmul_dgelu_bwd);
    W(matmul_fwd_w16);
    W(matmul_bwd_w16);
    W(matmul_gelu_fwd_w16);
    W(matmul_dgelu_bwd_w16);
    W(matmul_fwd_a16);
    W(matmul_bwd_a16);
    W(matmul_gelu_fwd_a16);
    W(matmul_dgelu_bwd_a16);
    W(add_layernorm_fwd);
    W(add_rmsnorm_fwd);
    W(matmul_fwd_o16);
    W(gelu_fwd16);
    W(swiglu_fwd16);
    W(geglu_fwd16);
    W(gelu_fwd16r);
    W(swiglu_fwd16r);
    W(geglu_fwd16r);
    W(swiglu_bwd16);
    W(geglu_bwd16);
    W(gqa_ext_fwd16);
    W(gqa_ext_bwd16);
    W(layernorm_fwd16);
    W(rmsnorm_fwd16);
    W(add_layernorm_fwd16);
    W(add_rmsnorm_fwd16);
    W(add_rmsnorm_fwd16b);
    W(add_layernorm_fwd16b);
    W(rope_fwd16);
    W(qknorm_rope_fwd16);
    W(xent16_fwd);
    W(xent16_fused);
    W(matmul_bwd_head16);
    W(gqa_ext_fwd16o);
    W(gqa_ext_bwd16o);
    W(matmul_bwd_d16);
    W(matmul_dgelu_bwd_d16);
    W(matmul_dgelu_bwd_o16);
    W(layernorm_bwd16);
    W(rmsnorm_bwd16);
    W(rmsnorm_bwd16d);
    W(layernorm_bwd16d);
    W(matmul_gelu_fwd_o16);
    W(swiglu_bwd_d16);
    W(geglu_bwd_d16);
    W(swiglu_bwd_dd16);
    W(geglu_bwd_dd16);
    W(gqa_ext_bwd16d);
    W(rope_bwd16);
    W(matmul_bwd_o16);
    W(gqa_ext_bwd16do);
    W(matmul_dinp_acc);
    W(matmul_fwd_acc);
    W(matmul_bwd_acc);
    W(matmul_fwd_acc16);
    W(set_dw_fresh);
    W(qknorm_rope_bwd16);
    W(matmul_bwd_acc16);
    W(matmul_grouped_o16);
    W(matmul_grouped_bwd_o16);
    W(matmul_grouped_dw16);
    W(adamw);
    W(sumsq);
    W(scale);
    W(nonfinite);
    W(to_bf16);
    W(from_bf16);
    W(from_bf16_runs);
    W(to_f16);
    W(from_f16);
    W(sum);
#undef W
    return &wrapped;
}
