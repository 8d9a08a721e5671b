/*
 * test_kernels_llama.c -- the Llama kernels of the CPU backend table
 * (rmsnorm, rope, swiglu, gqa; encoder without position embeddings)
 * against naive double-precision references written here.
 *
 * Forwards: element by element against the reference (rel 1e-5).
 * Backwards: against the reference's analytic gradient (double) AND
 * against central finite differences of the double reference forward of
 * L = sum(out * R), R fixed and random (h = 1e-6).
 * Also: the shared per-element math (kernels/llama_math.h, what the CUDA
 * kernels compile) at extreme inputs; rope_bwd(rope_fwd(x)) == x; grouped-
 * query attention with NKV = NH, NH/2, 1, head_dim 6 and 16, T not a
 * multiple of the tiles (4 rows, 128 keys), B > 1; gqa with NKV = NH
 * bitwise equal to GPT-2's attention_fwd/bwd; every kernel bitwise equal at
 * 1 and 2 threads (the promise of kernels/cpu: results do not depend on the
 * thread count); cpu-strict bitwise equal to cpu.
 * The Gemma entries: gqa_ext (scale, soft-cap, sliding window shorter than
 * T; GQA and MQA; fp32 and bf16 matmul mode; default options bitwise
 * gqa_fwd/bwd), geglu (tanh GELU), softcap, against double references and
 * finite differences, thread-count and cpu-strict bitwise.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "llama_math.h"
#include "tap.h"

static const zt_backend *be;

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double rnd(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) { perror("calloc"); exit(99); }
    return p;
}
static float *fvec(size_t n, double scale) {
    float *p = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * rnd());
    return p;
}
static float *fdup(const float *x, size_t n) {
    float *p = xcalloc(n, sizeof(float));
    memcpy(p, x, n * sizeof(float));
    return p;
}
static double *dvec(size_t n) { return xcalloc(n, sizeof(double)); }
static double *dcopy(const float *x, size_t n) {
    double *d = dvec(n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* max over i of |got - ref| / (atol + rtol |ref|) <= 1 */
static int check_arr(const char *what, const float *got, const double *ref, size_t n,
                     double rtol, double atol) {
    double worst = 0.0;
    size_t wi = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isnan(ref[i])) { nan = 1; wi = i; break; }
        const double e = fabs(got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
        if (e > worst) { worst = e; wi = i; }
    }
    const int ok = !nan && worst <= 1.0;
    if (!ok)
        tap_diag("%s: worst at %zu: got %.9g ref %.9g (rtol %g atol %g)", what, wi,
                 n ? got[wi] : 0.0, n ? ref[wi] : 0.0, rtol, atol);
    return tap_ok(ok, "%s [worst %.3g of tolerance over %zu]", what, worst, n);
}
static int bitwise(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* the FD gradient of L(x) = sum(f(x) * R) over x[n] (double, every
 * element or every `step`-th one; the others are copied from `fill`) */
typedef double (*loss_fn)(double *x, void *ctx);
static void fd_grad(double *g, double *x, size_t n, size_t step, const double *fill,
                    loss_fn L, void *ctx) {
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        if (i % step) { g[i] = fill[i]; continue; }
        const double x0 = x[i];
        x[i] = x0 + h;
        const double lp = L(x, ctx);
        x[i] = x0 - h;
        const double lm = L(x, ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * h);
    }
}

/* ------------------------------------------------------------ the shared math */

static void test_math(void) {
    /* the vectorizable exp of SwiGLU: relative error over its range, and
     * its saturation */
    double worst = 0;
    for (int i = 0; i <= 1000000; i++) {
        const float x = -87.25f + (float)i * (175.5f / 1000000.0f);
        worst = fmax(worst, fabs(zt_llama_expf(x) / exp((double)x) - 1.0));
    }
    tap_ok(worst < 3e-7, "llama_math.h: zt_llama_expf within 3e-7 relative on [-87.25, 88.25] "
           "[max %.3g]", worst);
    tap_ok(zt_llama_expf(-90.0f) == 0.0f && zt_llama_expf(-INFINITY) == 0.0f &&
               isinf(zt_llama_expf(89.0f)) && isinf(zt_llama_expf(INFINITY)) &&
               isnan(zt_llama_expf(NAN)) && zt_llama_expf(0.0f) == 1.0f,
           "llama_math.h: zt_llama_expf(-90) = exp(-inf) = 0, exp(89) = exp(inf) = inf, "
           "exp(NaN) = NaN, exp(0) = 1");
    /* silu and its derivative over a range, and at the extremes */
    const float xs[] = {-1e30f, -200.0f, -88.0f, -20.0f, -3.5f, -1.0f, -1e-3f, 0.0f,
                        1e-3f,  0.7f,    2.0f,   17.0f,  89.0f, 1e30f};
    int bad = 0;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        const double x = xs[i];
        const double sig = 1.0 / (1.0 + exp(-x));
        const double s = x * sig, ds = sig * (1.0 + x * (1.0 - sig));
        const float u = 0.75f, d = -1.25f;
        float dg, du;
        zt_swiglu_bwd(&dg, &du, xs[i], u, d);
        const float f = zt_swiglu(xs[i], u);
        bad += !isfinite(f) || fabs(f - s * u) > 1e-6 * fabs(s * u) + 1e-30;
        bad += !isfinite(dg) || fabs(dg - d * u * ds) > 1e-6 * fabs(d * u * ds) + 1e-30;
        bad += !isfinite(du) || fabs(du - d * s) > 1e-6 * fabs(d * s) + 1e-30;
        bad += zt_silu(xs[i]) * u != f;
        if (bad) { tap_diag("swiglu math at x = %g", x); break; }
    }
    tap_ok(bad == 0, "llama_math.h: silu, swiglu and their gradients finite and within 1e-6 "
                     "from -1e30 to 1e30");
    /* one rotation then its inverse */
    float a = 0.3f, b = -1.7f;
    const float c = cosf(0.9f), s = sinf(0.9f);
    zt_rope_rotate(&a, &b, c, s);
    const double ra = 0.3 * cos(0.9) + 1.7 * sin(0.9), rb = -1.7 * cos(0.9) + 0.3 * sin(0.9);
    const int fwd_ok = fabs(a - ra) < 1e-6 && fabs(b - rb) < 1e-6;
    zt_rope_rotate(&a, &b, c, -s);
    tap_ok(fwd_ok && fabs(a - 0.3f) < 1e-6 && fabs(b + 1.7f) < 1e-6,
           "llama_math.h: rope rotation, and the inverse rotation undoes it");
    tap_ok(zt_rms_rstd(4.0 * 8, 8, 0.0f) == 0.5f &&
               fabsf(zt_rms_rstd(0.0, 8, 1e-6f) - 1000.0f) < 1e-3f,
           "llama_math.h: rmsnorm rstd = 1/sqrt(mean(x^2) + eps)");
}

/* ------------------------------------------------------------ RMSNorm */

typedef struct { int N, C; double eps; const double *w, *x, *R; int wrt; } rms_ctx;

static void rms_ref(double *out, double *rstd, const double *x, const double *w, double eps,
                    int N, int C) {
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[(size_t)n * C + c] * x[(size_t)n * C + c];
        const double r = 1.0 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = x[(size_t)n * C + c] * r * w[c];
        if (rstd) rstd[n] = r;
    }
}
static double rms_loss(double *v, void *vc) {
    rms_ctx *c = vc;
    const size_t NC = (size_t)c->N * c->C;
    double *out = dvec(NC);
    rms_ref(out, NULL, c->wrt ? c->x : v, c->wrt ? v : c->w, c->eps, c->N, c->C);
    double L = 0;
    for (size_t i = 0; i < NC; i++) L += out[i] * c->R[i];
    free(out);
    return L;
}

static void test_rmsnorm(int N, int C) {
    char name[160];
    const size_t NC = (size_t)N * C;
    const float eps = 1e-5f;
    float *x = fvec(NC, 2.0), *w = fvec(C, 1.0), *R = fvec(NC, 1.0);
    float *out = fvec(NC, 1.0), *rstd = fvec(N, 1.0);
    double *dx = dcopy(x, NC), *dw = dcopy(w, C), *dR = dcopy(R, NC);
    double *rout = dvec(NC), *rr = dvec(N);
    for (int c = 0; c < C; c++) w[c] += 1.0f, dw[c] += 1.0;   /* weights near 1 */
    rms_ref(rout, rr, dx, dw, eps, N, C);
    be->rmsnorm_fwd(out, rstd, x, w, eps, N, C);
    snprintf(name, sizeof name, "rmsnorm_fwd N=%d C=%d: out vs double reference", N, C);
    check_arr(name, out, rout, NC, 1e-5, 1e-6);
    snprintf(name, sizeof name, "rmsnorm_fwd N=%d C=%d: rstd", N, C);
    check_arr(name, rstd, rr, N, 1e-5, 0);

    /* backward: dinp and dw accumulate onto what is there */
    float *gi = fvec(NC, 1.0), *gw = fvec(C, 1.0);
    double *gi0 = dcopy(gi, NC), *gw0 = dcopy(gw, C);
    be->rmsnorm_bwd(gi, gw, R, x, w, rstd, N, C);
    double *agi = dvec(NC), *agw = dvec(C);
    for (int n = 0; n < N; n++) {
        double s = 0;
        const double r = rr[n];
        for (int c = 0; c < C; c++) s += dw[c] * dR[(size_t)n * C + c] * dx[(size_t)n * C + c];
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            agi[i] = r * dw[c] * dR[i] - dx[i] * r * r * r * s / C;
            agw[c] += dx[i] * r * dR[i];
        }
    }
    double *e1 = dvec(NC), *e2 = dvec(C);
    for (size_t i = 0; i < NC; i++) e1[i] = gi0[i] + agi[i];
    for (int c = 0; c < C; c++) e2[c] = gw0[c] + agw[c];
    snprintf(name, sizeof name, "rmsnorm_bwd N=%d C=%d: dinp (+=) vs analytic reference", N, C);
    check_arr(name, gi, e1, NC, 1e-5, 1e-6);
    snprintf(name, sizeof name, "rmsnorm_bwd N=%d C=%d: dw (+=) vs analytic reference", N, C);
    check_arr(name, gw, e2, C, 1e-5, 1e-6);
    /* finite differences of the reference forward */
    rms_ctx ctx = {N, C, eps, dw, dx, dR, 0};
    double *fd = dvec(NC), *fdw = dvec(C);
    fd_grad(fd, dx, NC, 1, agi, rms_loss, &ctx);
    ctx.wrt = 1;
    fd_grad(fdw, dw, C, 1, agw, rms_loss, &ctx);
    float *k1 = xcalloc(NC, sizeof(float)), *k2 = xcalloc(C, sizeof(float));
    be->rmsnorm_bwd(k1, k2, R, x, w, rstd, N, C);
    snprintf(name, sizeof name, "rmsnorm_bwd N=%d C=%d: dinp vs finite differences", N, C);
    check_arr(name, k1, fd, NC, 1e-4, 1e-5);
    snprintf(name, sizeof name, "rmsnorm_bwd N=%d C=%d: dw vs finite differences", N, C);
    check_arr(name, k2, fdw, C, 1e-4, 1e-5);
    /* rmsnorm_bwd16d: dout in bf16 (R rounded), its widened values the
     * analytic reference's dout; dinp and dw (+=) onto gi0, gw0; dinp16 the
     * accumulated dinp rounded (to_bf16), exactly; and with dinp16 NULL */
    uint16_t *R16 = xcalloc(NC, 2), *d16 = xcalloc(NC, 2), *e16 = xcalloc(NC, 2);
    float *Rw = xcalloc(NC, sizeof(float));
    be->to_bf16(R16, R, NC);
    be->from_bf16(Rw, R16, NC);
    for (int c = 0; c < C; c++) agw[c] = 0;
    for (int n = 0; n < N; n++) {
        double s = 0;
        const double r = rr[n];
        for (int c = 0; c < C; c++) s += dw[c] * Rw[(size_t)n * C + c] * dx[(size_t)n * C + c];
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)n * C + c;
            e1[i] = gi0[i] + r * dw[c] * Rw[i] - dx[i] * r * r * r * s / C;
            agw[c] += dx[i] * r * Rw[i];
        }
    }
    for (int c = 0; c < C; c++) e2[c] = gw0[c] + agw[c];
    for (int n16 = 0; n16 < 2; n16++) {
        for (size_t i = 0; i < NC; i++) gi[i] = (float)gi0[i];
        for (int c = 0; c < C; c++) gw[c] = (float)gw0[c];
        be->rmsnorm_bwd16d(gi, n16 ? NULL : d16, gw, R16, x, w, rstd, N, C);
        snprintf(name, sizeof name, "rmsnorm_bwd16d N=%d C=%d%s: dinp (+=) vs analytic reference", N, C,
                 n16 ? " (no dinp16)" : "");
        check_arr(name, gi, e1, NC, 1e-5, 1e-6);
        snprintf(name, sizeof name, "rmsnorm_bwd16d N=%d C=%d%s: dw (+=) vs analytic reference", N, C,
                 n16 ? " (no dinp16)" : "");
        check_arr(name, gw, e2, C, 1e-5, 1e-6);
    }
    /* (dinp16 from the first pass: gi of the second is the same values) */
    be->to_bf16(e16, gi, NC);
    snprintf(name, sizeof name, "rmsnorm_bwd16d N=%d C=%d: dinp16 its dinp rounded, exactly", N, C);
    tap_ok(memcmp(d16, e16, NC * 2) == 0, "%s", name);
    free(R16); free(d16); free(e16); free(Rw);
    free(x); free(w); free(R); free(out); free(rstd); free(dx); free(dw); free(dR);
    free(rout); free(rr); free(gi); free(gw); free(gi0); free(gw0); free(agi); free(agw);
    free(e1); free(e2); free(fd); free(fdw); free(k1); free(k2);
}

/* ------------------------------------------------------------ residual add + RMSNorm, bf16 branch */

/* add_rmsnorm_fwd16b: res = a + the bf16 branch widened (exactly: the float
 * sum bitwise), rstd and out against the double reference of that res (out
 * rounded to bf16 once: within 2^-8 relative), tmp only scratch; in place
 * (res = a) the same bits; cpu-strict the same bits, no error */
static void test_add_rmsnorm16b(int N, int C) {
    char name[160];
    const size_t NC = (size_t)N * C;
    const float eps = 1e-5f;
    float *a = fvec(NC, 2.0), *b = fvec(NC, 1.0), *w = fvec(C, 1.0), *bw = fvec(NC, 0.0);
    float *res = fvec(NC, 0.0), *tmp = fvec(NC, 0.0), *rstd = fvec(N, 0.0), *out = fvec(NC, 0.0);
    float *sum = fvec(NC, 0.0);
    uint16_t *b16 = xcalloc(NC, 2), *o16 = xcalloc(NC, 2), *o2 = xcalloc(NC, 2);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    be->to_bf16(b16, b, NC);
    be->from_bf16(bw, b16, NC);
    for (size_t i = 0; i < NC; i++) sum[i] = a[i] + bw[i];
    be->add_rmsnorm_fwd16b(res, o16, tmp, rstd, a, b16, w, eps, N, C);
    double *dres = dcopy(sum, NC), *dw = dcopy(w, C), *rout = dvec(NC), *rr = dvec(N);
    rms_ref(rout, rr, dres, dw, eps, N, C);
    tap_ok(!memcmp(res, sum, NC * sizeof(float)),
           "add_rmsnorm_fwd16b N=%d C=%d: res bitwise a + the widened bf16 branch", N, C);
    be->from_bf16(out, o16, NC);
    snprintf(name, sizeof name, "add_rmsnorm_fwd16b N=%d C=%d: out16 vs double reference", N, C);
    check_arr(name, out, rout, NC, 4e-3, 1e-6);   /* (bf16: 2^-8, and fp32's error) */
    snprintf(name, sizeof name, "add_rmsnorm_fwd16b N=%d C=%d: rstd vs double reference", N, C);
    check_arr(name, rstd, rr, N, 1e-5, 0);
    /* in place: res = a */
    float *r2 = fdup(a, NC), *s2 = fvec(N, 0.0);
    be->add_rmsnorm_fwd16b(r2, o2, tmp, s2, r2, b16, w, eps, N, C);
    tap_ok(!memcmp(r2, res, NC * sizeof(float)) && !memcmp(o2, o16, NC * 2) &&
               !memcmp(s2, rstd, (size_t)N * sizeof(float)),
           "add_rmsnorm_fwd16b N=%d C=%d in place (res = a): the same bits", N, C);
    const zt_backend *S = zt_backend_cpu_strict();
    if (!S) {
        tap_skip("cpu-strict add_rmsnorm_fwd16b", "no cpu-strict backend (mmap/mprotect)");
    } else {
        float *sa = S->alloc(NC * 4), *sr = S->alloc(NC * 4), *st = S->alloc(NC * 4);
        float *ss = S->alloc((size_t)N * 4), *sw = S->alloc((size_t)C * 4);
        uint16_t *sb = S->alloc(NC * 2), *so = S->alloc(NC * 2);
        S->to_device(sa, a, NC * 4);
        S->to_device(sw, w, (size_t)C * 4);
        S->to_device(sb, b16, NC * 2);
        S->add_rmsnorm_fwd16b(sr, so, st, ss, sa, sb, sw, eps, N, C);
        S->to_host(r2, sr, NC * 4);
        S->to_host(o2, so, NC * 2);
        S->to_host(s2, ss, (size_t)N * 4);
        tap_ok(!memcmp(r2, res, NC * sizeof(float)) && !memcmp(o2, o16, NC * 2) &&
                   !memcmp(s2, rstd, (size_t)N * sizeof(float)) && !S->error(),
               "cpu-strict add_rmsnorm_fwd16b N=%d C=%d: bitwise the cpu's, no error", N, C);
        S->free(sa); S->free(sr); S->free(st); S->free(ss); S->free(sw); S->free(sb); S->free(so);
    }
    free(a); free(b); free(w); free(bw); free(res); free(tmp); free(rstd); free(out); free(sum);
    free(b16); free(o16); free(o2); free(dres); free(dw); free(rout); free(rr); free(r2); free(s2);
}

/* ------------------------------------------------------------ per-head RMSNorm */

/* headnorm over the first nh heads of rows of `stride` floats: each head as
 * rms_ref of one hd-row; the rest of the row untouched; raw = the input; the
 * backward in place against the analytic gradient (dw +=) */
static void test_headnorm(int N, int nh, int stride, int hd) {
    char name[160];
    const size_t NS = (size_t)N * stride, R = (size_t)N * nh;
    const float eps = 1e-6f;
    float *x = fvec(NS, 2.0), *w = fvec(hd, 1.0), *raw = fvec(R * hd, 1.0), *rstd = fvec(R, 1.0);
    for (int c = 0; c < hd; c++) w[c] += 1.0f;
    double *x0 = dcopy(x, NS), *dw = dcopy(w, hd);
    double *ref = dcopy(x, NS), *rr = dvec(R), *head = dvec(hd), *hout = dvec(hd), *hraw = dvec(R * hd);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nh; h++) {
            const size_t o = (size_t)n * stride + (size_t)h * hd, r = (size_t)n * nh + h;
            for (int c = 0; c < hd; c++) head[c] = hraw[r * hd + c] = x0[o + c];
            rms_ref(hout, &rr[r], head, dw, eps, 1, hd);
            for (int c = 0; c < hd; c++) ref[o + c] = hout[c];
        }
    be->headnorm_fwd(x, raw, rstd, w, eps, N, nh, stride, hd);
    snprintf(name, sizeof name, "headnorm_fwd N=%d heads=%d stride=%d hd=%d: x in place vs double "
             "reference (other columns untouched)", N, nh, stride, hd);
    check_arr(name, x, ref, NS, 1e-5, 1e-6);
    snprintf(name, sizeof name, "headnorm_fwd N=%d heads=%d hd=%d: raw keeps the input, rstd", N, nh, hd);
    check_arr(name, raw, hraw, R * hd, 0, 0);
    check_arr(name, rstd, rr, R, 1e-5, 0);
    /* backward, in place: dx holds the output gradient */
    float *d = fvec(NS, 1.0), *gw = fvec(hd, 1.0);
    double *d0 = dcopy(d, NS), *gw0 = dcopy(gw, hd), *e = dcopy(d, NS), *ew = dcopy(gw, hd);
    be->headnorm_bwd(d, gw, raw, w, rstd, N, nh, stride, hd);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nh; h++) {
            const size_t o = (size_t)n * stride + (size_t)h * hd, r = (size_t)n * nh + h;
            double sm = 0;
            for (int c = 0; c < hd; c++) sm += dw[c] * d0[o + c] * hraw[r * hd + c];
            for (int c = 0; c < hd; c++) {
                e[o + c] = rr[r] * dw[c] * d0[o + c] - hraw[r * hd + c] * rr[r] * rr[r] * rr[r] * sm / hd;
                ew[c] += hraw[r * hd + c] * rr[r] * d0[o + c];
            }
        }
    (void)gw0;
    snprintf(name, sizeof name, "headnorm_bwd N=%d heads=%d hd=%d: dx in place vs analytic", N, nh, hd);
    check_arr(name, d, e, NS, 1e-5, 1e-6);
    snprintf(name, sizeof name, "headnorm_bwd N=%d heads=%d hd=%d: dw (+=) vs analytic", N, nh, hd);
    check_arr(name, gw, ew, hd, 1e-5, 1e-6);
    free(x); free(w); free(raw); free(rstd); free(x0); free(dw); free(ref); free(rr); free(head);
    free(hout); free(hraw); free(d); free(gw); free(d0); free(gw0); free(e); free(ew);
}

/* ------------------------------------------------------------ RoPE */

static float *inv_freq_of(int hd, double theta) {
    float *f = xcalloc(hd / 2 > 0 ? hd / 2 : 1, sizeof(float));
    for (int j = 0; j < hd / 2; j++) f[j] = (float)pow(theta, -2.0 * j / hd);
    return f;
}
/* rotate (sign +1) or rotate back (sign -1) in double, angle (float)t*f */
static void rope_ref(double *x, const float *f, int B, int T, int nh, int stride, int hd,
                     double sign) {
    const int h2 = hd / 2;
    for (int n = 0; n < B * T; n++)
        for (int h = 0; h < nh; h++)
            for (int j = 0; j < h2; j++) {
                const double a = (double)((float)(n % T) * f[j]);
                double *p = x + (size_t)n * stride + (size_t)h * hd;
                const double x1 = p[j], x2 = p[j + h2];
                p[j] = x1 * cos(a) - x2 * sign * sin(a);
                p[j + h2] = x2 * cos(a) + x1 * sign * sin(a);
            }
}

static void test_rope(int B, int T, int nh, int stride, int hd) {
    char name[160];
    const size_t n = (size_t)B * T * stride;
    float *f = inv_freq_of(hd, 10000.0);
    float *x = fvec(n, 1.0), *y = fdup(x, n);
    double *r = dcopy(x, n);
    be->rope_fwd(y, f, B, T, nh, stride, hd, 1.0f);
    rope_ref(r, f, B, T, nh, stride, hd, 1.0);
    snprintf(name, sizeof name, "rope_fwd B=%d T=%d heads=%d stride=%d hd=%d vs double reference",
             B, T, nh, stride, hd);
    check_arr(name, y, r, n, 1e-5, 1e-6);
    /* the rest of each row (v heads of a qkv row) is untouched, bitwise */
    int untouched = 1;
    for (size_t i = 0; i < n; i++)
        if ((int)(i % stride) >= nh * hd && y[i] != x[i]) untouched = 0;
    tap_ok(untouched, "rope_fwd hd=%d: elements past n_heads*hd in each row unchanged", hd);
    /* rope_bwd is the gradient: the transpose of the (linear) rotation, so
     * <rope(x), g> == <x, rope_bwd(g)>, and rope_bwd(rope_fwd(x)) == x */
    float *g = fvec(n, 1.0), *gb = fdup(g, n);
    be->rope_bwd(gb, f, B, T, nh, stride, hd, 1.0f);
    double *rg = dcopy(g, n);
    rope_ref(rg, f, B, T, nh, stride, hd, -1.0);
    snprintf(name, sizeof name, "rope_bwd hd=%d: the inverse rotation (double reference)", hd);
    check_arr(name, gb, rg, n, 1e-5, 1e-6);
    double l1 = 0, l2 = 0, sc = 0;
    for (size_t i = 0; i < n; i++) {
        l1 += (double)y[i] * g[i];
        l2 += (double)x[i] * gb[i];
        sc += fabs((double)y[i] * g[i]);
    }
    tap_ok(fabs(l1 - l2) <= 1e-6 * sc, "rope_bwd hd=%d: the adjoint of rope_fwd "
           "(<rope(x),g> = <x,rope_bwd(g)>: %.9g vs %.9g)", hd, l1, l2);
    be->rope_bwd(y, f, B, T, nh, stride, hd, 1.0f);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
    tap_ok(worst <= 1e-6, "rope_bwd(rope_fwd(x)) == x within 1e-6 (hd=%d, T=%d) [max %.3g]",
           hd, T, worst);
    /* yarn's attention factor: cos and sin scaled, forward and backward
     * (the gradient of s R(a) x is s R(-a) g) */
    const float s = 1.1386294f;
    float *ys = fdup(x, n), *gs = fdup(g, n);
    be->rope_fwd(ys, f, B, T, nh, stride, hd, s);
    double *rs = dcopy(x, n), *rgs = dcopy(g, n);
    rope_ref(rs, f, B, T, nh, stride, hd, 1.0);
    rope_ref(rgs, f, B, T, nh, stride, hd, -1.0);
    for (size_t i = 0; i < n; i++)
        if ((int)(i % stride) < nh * hd) rs[i] *= s, rgs[i] *= s;
    snprintf(name, sizeof name, "rope_fwd hd=%d scale %g: cos and sin scaled (double reference)", hd, s);
    check_arr(name, ys, rs, n, 1e-5, 1e-6);
    be->rope_bwd(gs, f, B, T, nh, stride, hd, s);
    snprintf(name, sizeof name, "rope_bwd hd=%d scale %g: the scaled inverse rotation", hd, s);
    check_arr(name, gs, rgs, n, 1e-5, 1e-6);
    free(f); free(x); free(y); free(r); free(g); free(gb); free(rg); free(ys); free(gs); free(rs);
    free(rgs);
}

/* ------------------------------------------------------------ SwiGLU */

typedef struct { int N, H; const double *R; } sw_ctx;
static double sw_loss(double *gu, void *vc) {
    sw_ctx *c = vc;
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int i = 0; i < c->H; i++) {
            const double g = gu[(size_t)n * 2 * c->H + i], u = gu[(size_t)n * 2 * c->H + c->H + i];
            L += g / (1.0 + exp(-g)) * u * c->R[(size_t)n * c->H + i];
        }
    return L;
}

static void test_swiglu(int N, int H) {
    char name[160];
    const size_t NH = (size_t)N * H;
    float *gu = fvec(2 * NH, 4.0), *R = fvec(NH, 1.0), *out = fvec(NH, 1.0);
    float *dgu = fvec(2 * NH, 1.0);
    double *dgu_d = dcopy(gu, 2 * NH), *dR = dcopy(R, NH), *ro = dvec(NH), *rg = dvec(2 * NH);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++) {
            const size_t gi = (size_t)n * 2 * H + i, ui = gi + H, oi = (size_t)n * H + i;
            const double g = dgu_d[gi], u = dgu_d[ui], sig = 1.0 / (1.0 + exp(-g));
            ro[oi] = g * sig * u;
            rg[gi] = dR[oi] * u * sig * (1.0 + g * (1.0 - sig));
            rg[ui] = dR[oi] * g * sig;
        }
    be->swiglu_fwd(out, gu, N, H);
    snprintf(name, sizeof name, "swiglu_fwd N=%d H=%d vs double reference", N, H);
    check_arr(name, out, ro, NH, 1e-5, 1e-6);
    be->swiglu_bwd(dgu, R, gu, N, H);
    snprintf(name, sizeof name, "swiglu_bwd N=%d H=%d: dgu (overwritten) vs analytic reference",
             N, H);
    check_arr(name, dgu, rg, 2 * NH, 1e-5, 1e-6);
    sw_ctx ctx = {N, H, dR};
    double *fd = dvec(2 * NH);
    fd_grad(fd, dgu_d, 2 * NH, 1, rg, sw_loss, &ctx);
    snprintf(name, sizeof name, "swiglu_bwd N=%d H=%d: dgu vs finite differences", N, H);
    check_arr(name, dgu, fd, 2 * NH, 1e-4, 1e-5);
    free(gu); free(R); free(out); free(dgu); free(dgu_d); free(dR); free(ro); free(rg); free(fd);
}

/* ------------------------------------------------------------ GQA */

typedef struct { int B, T, NH, NKV, hd; const double *R; double scale, cap; int win; } gqa_ctx;

/* the options of gqa_ext (scale, soft-cap, window); gqa_fwd's: 1/sqrt(hd), 0, 0 */
typedef struct { double scale, cap; int win; } ref_opts;
static ref_opts plain_opts(int hd) { return (ref_opts){1.0 / sqrt((double)hd), 0.0, 0}; }
static int ref_first(int t, int win) { return win > 0 && t - win + 1 > 0 ? t - win + 1 : 0; }

/* naive causal GQA in double: out[B,T,NH*hd], lse[B,NH,T]; score
 * x = (q.k) scale, then cap tanh(x / cap) with cap > 0, keys j > t - win
 * with win > 0 */
static void gqa_ref(double *out, double *lse, const double *qkv, int B, int T, int NH, int NKV,
                    int hd, ref_opts ro) {
    const size_t Rw = (size_t)(NH + 2 * NKV) * hd, C = (size_t)NH * hd;
    const double scale = ro.scale;
    double *s = dvec(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int kh = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * Rw + (size_t)h * hd;
                const int j0 = ref_first(t, ro.win);
                double m = -INFINITY;
                for (int j = j0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * Rw + (size_t)(NH + kh) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += q[i] * k[i];
                    s[j] = d * scale;
                    if (ro.cap > 0) s[j] = ro.cap * tanh(s[j] / ro.cap);
                    m = fmax(m, s[j]);
                }
                double l = 0;
                for (int j = j0; j <= t; j++) l += exp(s[j] - m);
                double *o = out + ((size_t)b * T + t) * C + (size_t)h * hd;
                for (int i = 0; i < hd; i++) o[i] = 0;
                for (int j = j0; j <= t; j++) {
                    const double p = exp(s[j] - m) / l;
                    const double *v =
                        qkv + ((size_t)b * T + j) * Rw + (size_t)(NH + NKV + kh) * hd;
                    for (int i = 0; i < hd; i++) o[i] += p * v[i];
                }
                if (lse) lse[((size_t)b * NH + h) * T + t] = m + log(l);
            }
        }
    free(s);
}
/* its analytic gradient: dqkv (overwritten) from dout */
static void gqa_ref_bwd(double *dqkv, const double *dout, const double *qkv, int B, int T,
                        int NH, int NKV, int hd, ref_opts ro) {
    const size_t Rw = (size_t)(NH + 2 * NKV) * hd, C = (size_t)NH * hd;
    const double scale = ro.scale;
    double *dc = dvec(T);   /* d(capped score) / d(scaled score) */
    memset(dqkv, 0, (size_t)B * T * Rw * sizeof(double));
    double *p = dvec(T), *dp = dvec(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int kh = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                const size_t qo = ((size_t)b * T + t) * Rw + (size_t)h * hd;
                const double *q = qkv + qo, *g = dout + ((size_t)b * T + t) * C + (size_t)h * hd;
                const int j0 = ref_first(t, ro.win);
                double m = -INFINITY;
                for (int j = j0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * Rw + (size_t)(NH + kh) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += q[i] * k[i];
                    p[j] = d * scale;
                    dc[j] = 1.0;
                    if (ro.cap > 0) {
                        const double th = tanh(p[j] / ro.cap);
                        p[j] = ro.cap * th;
                        dc[j] = 1.0 - th * th;
                    }
                    m = fmax(m, p[j]);
                }
                double l = 0;
                for (int j = j0; j <= t; j++) l += (p[j] = exp(p[j] - m));
                double sdp = 0;
                for (int j = j0; j <= t; j++) {
                    p[j] /= l;
                    const double *v =
                        qkv + ((size_t)b * T + j) * Rw + (size_t)(NH + NKV + kh) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += g[i] * v[i];
                    dp[j] = d;
                    sdp += p[j] * d;
                }
                for (int j = j0; j <= t; j++) {
                    const size_t ko = ((size_t)b * T + j) * Rw + (size_t)(NH + kh) * hd;
                    const size_t vo = ko + (size_t)NKV * hd;
                    const double ds = p[j] * (dp[j] - sdp) * dc[j] * scale;
                    for (int i = 0; i < hd; i++) {
                        dqkv[qo + i] += ds * qkv[ko + i];
                        dqkv[ko + i] += ds * q[i];
                        dqkv[vo + i] += p[j] * g[i];
                    }
                }
            }
        }
    free(p);
    free(dp);
    free(dc);
}
static double gqa_loss(double *qkv, void *vc) {
    gqa_ctx *c = vc;
    const size_t n = (size_t)c->B * c->T * c->NH * c->hd;
    double *out = dvec(n);
    gqa_ref(out, NULL, qkv, c->B, c->T, c->NH, c->NKV, c->hd,
            (ref_opts){c->scale, c->cap, c->win});
    double L = 0;
    for (size_t i = 0; i < n; i++) L += out[i] * c->R[i];
    free(out);
    return L;
}

static void test_gqa(int B, int T, int NH, int NKV, int hd, size_t fd_step) {
    char name[200], cfg[96];
    snprintf(cfg, sizeof cfg, "B=%d T=%d NH=%d NKV=%d hd=%d", B, T, NH, NKV, hd);
    const size_t nq = (size_t)B * T * (NH + 2 * NKV) * hd, no = (size_t)B * T * NH * hd;
    const size_t nl = (size_t)B * NH * T;
    float *qkv = fvec(nq, 1.5), *out = fvec(no, 1.0), *lse = fvec(nl, 1.0);
    float *R = fvec(no, 1.0), *dqkv = fvec(nq, 1.0);   /* garbage: dqkv is overwritten */
    double *dq = dcopy(qkv, nq), *dR = dcopy(R, no), *ro = dvec(no), *rl = dvec(nl);
    double *rg = dvec(nq), *fd = dvec(nq);
    gqa_ref(ro, rl, dq, B, T, NH, NKV, hd, plain_opts(hd));
    be->gqa_fwd(out, lse, qkv, B, T, NH, NKV, hd);
    snprintf(name, sizeof name, "gqa_fwd %s: out vs double reference", cfg);
    check_arr(name, out, ro, no, 1e-5, 1e-6);
    snprintf(name, sizeof name, "gqa_fwd %s: lse", cfg);
    check_arr(name, lse, rl, nl, 1e-5, 1e-6);
    be->gqa_bwd(dqkv, R, qkv, out, lse, B, T, NH, NKV, hd);
    gqa_ref_bwd(rg, dR, dq, B, T, NH, NKV, hd, plain_opts(hd));
    snprintf(name, sizeof name, "gqa_bwd %s: dqkv vs analytic reference", cfg);
    check_arr(name, dqkv, rg, nq, 1e-5, 1e-5);
    gqa_ctx ctx = {B, T, NH, NKV, hd, dR, 1.0 / sqrt((double)hd), 0.0, 0};
    fd_grad(fd, dq, nq, fd_step, rg, gqa_loss, &ctx);
    snprintf(name, sizeof name, "gqa_bwd %s: dqkv vs finite differences (every %zu-th)", cfg,
             fd_step);
    check_arr(name, dqkv, fd, nq, 1e-4, 1e-5);
    if (NKV == NH) {
        /* GPT-2's attention is this case: bitwise the same */
        const int C = NH * hd;
        float *o2 = fvec(no, 1.0), *l2 = fvec(nl, 1.0), *d2 = fvec(nq, 1.0);
        be->attention_fwd(o2, l2, qkv, B, T, C, NH);
        be->attention_bwd(d2, R, qkv, out, lse, B, T, C, NH);
        tap_ok(bitwise(o2, out, no) && bitwise(l2, lse, nl) && bitwise(d2, dqkv, nq),
               "gqa %s with NKV = NH: bitwise attention_fwd/bwd (C=%d)", cfg, C);
        free(o2); free(l2); free(d2);
    }
    free(qkv); free(out); free(lse); free(R); free(dqkv); free(dq); free(dR); free(ro);
    free(rl); free(rg); free(fd);
}

/* ------------------------------------------------------------ GQA with options (Gemma) */

/* gqa_ext_fwd/bwd with scale, soft-cap, window against the double
 * reference and finite differences; masked keys do not matter (exactly);
 * in bf16 matmul mode against the reference at bf16 tolerance, and the
 * default options bitwise gqa_fwd/bwd in both modes. */
static void test_gqa_ext(int B, int T, int NH, int NKV, int hd, float scale, float cap, int win,
                         size_t fd_step) {
    char name[240], cfg[160];
    snprintf(cfg, sizeof cfg, "B=%d T=%d NH=%d NKV=%d hd=%d scale=%g cap=%g window=%d", B, T,
             NH, NKV, hd, scale, cap, win);
    const size_t nq = (size_t)B * T * (NH + 2 * NKV) * hd, no = (size_t)B * T * NH * hd;
    const size_t nl = (size_t)B * NH * T;
    const zt_attn_opts o = {scale, cap, win};
    const ref_opts rop = {(double)scale, (double)cap, win};
    float *qkv = fvec(nq, 3.0), *out = fvec(no, 1.0), *lse = fvec(nl, 1.0);
    float *R = fvec(no, 1.0), *dqkv = fvec(nq, 1.0);
    double *dq = dcopy(qkv, nq), *dR = dcopy(R, no), *ro = dvec(no), *rl = dvec(nl);
    double *rg = dvec(nq), *fd = dvec(nq);
    gqa_ref(ro, rl, dq, B, T, NH, NKV, hd, rop);
    be->gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, hd, &o);
    snprintf(name, sizeof name, "gqa_ext_fwd %s: out vs double reference", cfg);
    check_arr(name, out, ro, no, 1e-5, 1e-6);
    snprintf(name, sizeof name, "gqa_ext_fwd %s: lse", cfg);
    check_arr(name, lse, rl, nl, 1e-5, 1e-6);
    be->gqa_ext_bwd(dqkv, R, qkv, out, lse, B, T, NH, NKV, hd, &o);
    gqa_ref_bwd(rg, dR, dq, B, T, NH, NKV, hd, rop);
    snprintf(name, sizeof name, "gqa_ext_bwd %s: dqkv vs analytic reference", cfg);
    check_arr(name, dqkv, rg, nq, 1e-5, 1e-5);
    gqa_ctx ctx = {B, T, NH, NKV, hd, dR, (double)scale, (double)cap, win};
    fd_grad(fd, dq, nq, fd_step, rg, gqa_loss, &ctx);
    snprintf(name, sizeof name, "gqa_ext_bwd %s: dqkv vs finite differences (every %zu-th)",
             cfg, fd_step);
    check_arr(name, dqkv, fd, nq, 1e-4, 1e-5);

    if (win > 0 && win < T) {
        /* the key and value of position 0 are outside the window of the
         * last row: changing them leaves that row's output bitwise */
        float *q2 = fdup(qkv, nq), *o2 = fvec(no, 1.0), *l2 = fvec(nl, 1.0);
        const size_t Rw = (size_t)(NH + 2 * NKV) * hd, C = (size_t)NH * hd;
        for (size_t i = (size_t)NH * hd; i < Rw; i++) q2[i] += 1.0f;
        be->gqa_ext_fwd(o2, l2, q2, B, T, NH, NKV, hd, &o);
        const size_t last = (size_t)(T - 1) * C;
        tap_ok(bitwise(o2 + last, out + last, C) && !bitwise(o2 + C * (size_t)(win - 1),
                                                             out + C * (size_t)(win - 1), C),
               "gqa_ext_fwd %s: key 0 outside the last row's window is ignored (row win-1 "
               "sees it)", cfg);
        free(q2); free(o2); free(l2);
    }

    /* bf16 matmul mode: operands, p and dS rounded to bf16 */
    be->set_matmul_precision(ZT_MATMUL_BF16);
    float *ob = fvec(no, 1.0), *lb = fvec(nl, 1.0), *db = fvec(nq, 1.0);
    be->gqa_ext_fwd(ob, lb, qkv, B, T, NH, NKV, hd, &o);
    be->gqa_ext_bwd(db, R, qkv, ob, lb, B, T, NH, NKV, hd, &o);
    snprintf(name, sizeof name, "gqa_ext_fwd bf16 mode %s: out vs double reference", cfg);
    check_arr(name, ob, ro, no, 3e-2, 3e-2);
    snprintf(name, sizeof name, "gqa_ext_fwd bf16 mode %s: lse", cfg);
    check_arr(name, lb, rl, nl, 2e-2, 2e-2);
    snprintf(name, sizeof name, "gqa_ext_bwd bf16 mode %s: dqkv vs analytic reference", cfg);
    check_arr(name, db, rg, nq, 5e-2, 5e-2);
    be->set_matmul_precision(ZT_MATMUL_FP32);

    /* the default options: gqa_fwd/bwd bitwise, fp32 and bf16 modes; a
     * window >= T is no window */
    const zt_attn_opts d0 = {1.0f / sqrtf((float)hd), 0.0f, 0}, dT = {d0.scale, 0.0f, T};
    for (int mode = 0; mode < 2; mode++) {
        be->set_matmul_precision(mode ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32);
        float *o1 = fvec(no, 1.0), *l1 = fvec(nl, 1.0), *g1 = fvec(nq, 1.0);
        float *o2 = fvec(no, 1.0), *l2 = fvec(nl, 1.0), *g2 = fvec(nq, 1.0);
        float *o3 = fvec(no, 1.0), *l3 = fvec(nl, 1.0), *g3 = fvec(nq, 1.0);
        be->gqa_fwd(o1, l1, qkv, B, T, NH, NKV, hd);
        be->gqa_bwd(g1, R, qkv, o1, l1, B, T, NH, NKV, hd);
        be->gqa_ext_fwd(o2, l2, qkv, B, T, NH, NKV, hd, &d0);
        be->gqa_ext_bwd(g2, R, qkv, o2, l2, B, T, NH, NKV, hd, &d0);
        be->gqa_ext_fwd(o3, l3, qkv, B, T, NH, NKV, hd, &dT);
        be->gqa_ext_bwd(g3, R, qkv, o3, l3, B, T, NH, NKV, hd, &dT);
        tap_ok(bitwise(o1, o2, no) && bitwise(l1, l2, nl) && bitwise(g1, g2, nq) &&
                   bitwise(o1, o3, no) && bitwise(l1, l3, nl) && bitwise(g1, g3, nq),
               "gqa_ext B=%d T=%d NH=%d NKV=%d hd=%d, default options (and window T), %s "
               "mode: bitwise gqa_fwd/bwd", B, T, NH, NKV, hd, mode ? "bf16" : "fp32");
        free(o1); free(l1); free(g1); free(o2); free(l2); free(g2); free(o3); free(l3);
        free(g3);
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);
    free(ob); free(lb); free(db);
    free(qkv); free(out); free(lse); free(R); free(dqkv); free(dq); free(dR); free(ro);
    free(rl); free(rg); free(fd);
}

/* ------------------------------------------------------------ GeGLU, soft-cap */

static double gelu_tanh_d(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
typedef struct { int N, H; const double *R; } gg_ctx;
static double gg_loss(double *gu, void *vc) {
    gg_ctx *c = vc;
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int i = 0; i < c->H; i++) {
            const double g = gu[(size_t)n * 2 * c->H + i], u = gu[(size_t)n * 2 * c->H + c->H + i];
            L += gelu_tanh_d(g) * u * c->R[(size_t)n * c->H + i];
        }
    return L;
}

static void test_geglu(int N, int H) {
    char name[160];
    const size_t NH = (size_t)N * H;
    float *gu = fvec(2 * NH, 4.0), *R = fvec(NH, 1.0), *out = fvec(NH, 1.0);
    float *dgu = fvec(2 * NH, 1.0);
    double *dgu_d = dcopy(gu, 2 * NH), *dR = dcopy(R, NH), *ro = dvec(NH), *fd = dvec(2 * NH);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++)
            ro[(size_t)n * H + i] =
                gelu_tanh_d(dgu_d[(size_t)n * 2 * H + i]) * dgu_d[(size_t)n * 2 * H + H + i];
    be->geglu_fwd(out, gu, N, H);
    snprintf(name, sizeof name, "geglu_fwd N=%d H=%d vs double reference (tanh GELU)", N, H);
    check_arr(name, out, ro, NH, 1e-5, 1e-6);
    be->geglu_bwd(dgu, R, gu, N, H);
    gg_ctx ctx = {N, H, dR};
    fd_grad(fd, dgu_d, 2 * NH, 1, NULL, gg_loss, &ctx);
    snprintf(name, sizeof name, "geglu_bwd N=%d H=%d: dgu (overwritten) vs finite differences",
             N, H);
    check_arr(name, dgu, fd, 2 * NH, 1e-4, 1e-5);
    free(gu); free(R); free(out); free(dgu); free(dgu_d); free(dR); free(ro); free(fd);
}

/* swiglu_bwd_dd16 / geglu_bwd_dd16 (the down projection's input gradient
 * in bf16): dout16 the bf16 rounding of R, gate|up in bf16; dgu against the
 * analytic gradient in double at the widened dout16 and gate|up; dgu16 its
 * dgu rounded (to_bf16), exactly; with dgu NULL and in place of gu16
 * (dgu16 == gu16, the models' call) the same dgu16 */
static void test_glu_bwd_dd16(int geglu, int N, int H) {
    char name[200];
    const char *fn = geglu ? "geglu_bwd_dd16" : "swiglu_bwd_dd16";
    const size_t NH = (size_t)N * H;
    float *gu = fvec(2 * NH, 4.0), *R = fvec(NH, 1.0), *guw = xcalloc(2 * NH, sizeof(float));
    float *Rw = xcalloc(NH, sizeof(float)), *dgu = fvec(2 * NH, 1.0);
    uint16_t *gu16 = xcalloc(2 * NH, 2), *R16 = xcalloc(NH, 2), *o16 = xcalloc(2 * NH, 2);
    uint16_t *e16 = xcalloc(2 * NH, 2), *p16 = xcalloc(2 * NH, 2);
    double *rg = dvec(2 * NH);
    be->to_bf16(gu16, gu, 2 * NH);
    be->from_bf16(guw, gu16, 2 * NH);
    be->to_bf16(R16, R, NH);
    be->from_bf16(Rw, R16, NH);
    /* (the widened dout differs from R: the bf16 values are what is read) */
    int differs = 0;
    for (size_t i = 0; i < NH; i++) differs += Rw[i] != R[i];
    for (int n = 0; n < N; n++)
        for (int i = 0; i < H; i++) {
            const size_t gi = (size_t)n * 2 * H + i, ui = gi + H, oi = (size_t)n * H + i;
            const double g = guw[gi], u = guw[ui], d = Rw[oi];
            if (geglu) {
                const double k = 0.7978845608028654, t = tanh(k * (g + 0.044715 * g * g * g));
                const double dgel = 0.5 * (1.0 + t) +
                                    0.5 * g * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * g * g);
                rg[gi] = d * u * dgel;
                rg[ui] = d * gelu_tanh_d(g);
            } else {
                const double sig = 1.0 / (1.0 + exp(-g));
                rg[gi] = d * u * sig * (1.0 + g * (1.0 - sig));
                rg[ui] = d * g * sig;
            }
        }
    if (geglu) be->geglu_bwd_dd16(dgu, o16, R16, gu16, N, H);
    else be->swiglu_bwd_dd16(dgu, o16, R16, gu16, N, H);
    snprintf(name, sizeof name, "%s N=%d H=%d: dgu vs analytic reference at the widened dout16 "
             "(%d of %zu dout elements changed by the rounding)", fn, N, H, differs, NH);
    check_arr(name, dgu, rg, 2 * NH, 1e-5, 1e-6);
    be->to_bf16(e16, dgu, 2 * NH);
    tap_ok(differs > 0 && memcmp(o16, e16, 2 * NH * 2) == 0,
           "%s N=%d H=%d: dgu16 its dgu rounded, exactly", fn, N, H);
    /* dgu NULL, in place of gate|up */
    memcpy(p16, gu16, 2 * NH * 2);
    if (geglu) be->geglu_bwd_dd16(NULL, p16, R16, p16, N, H);
    else be->swiglu_bwd_dd16(NULL, p16, R16, p16, N, H);
    tap_ok(memcmp(p16, e16, 2 * NH * 2) == 0,
           "%s N=%d H=%d dgu NULL in place of gu16: the same dgu16", fn, N, H);
    free(gu); free(R); free(guw); free(Rw); free(dgu); free(gu16); free(R16); free(o16);
    free(e16); free(p16); free(rg);
}

static void test_softcap(size_t n, float cap) {
    char name[160];
    float *x = fvec(n, 4.0 * cap), *y = fvec(n, 1.0), *dy = fvec(n, 1.0), *dx = fvec(n, 1.0);
    double *ry = dvec(n), *rd = dvec(n);
    for (size_t i = 0; i < n; i++) {
        const double t = tanh((double)x[i] / cap);
        ry[i] = cap * t;
        rd[i] = dy[i] * (1.0 - t * t);
    }
    be->softcap_fwd(y, x, n, cap);
    snprintf(name, sizeof name, "softcap_fwd n=%zu cap=%g vs double reference", n, cap);
    check_arr(name, y, ry, n, 2e-6, 1e-7);
    be->softcap_bwd(dx, dy, y, n, cap);
    snprintf(name, sizeof name, "softcap_bwd n=%zu cap=%g vs the derivative 1 - tanh^2", n, cap);
    check_arr(name, dx, rd, n, 1e-5, 1e-6);
    /* in place: y aliasing x, dx aliasing dy */
    float *x2 = fdup(x, n), *d2 = fdup(dy, n);
    be->softcap_fwd(x2, x2, n, cap);
    be->softcap_bwd(d2, d2, x2, n, cap);
    tap_ok(bitwise(x2, y, n) && bitwise(d2, dx, n), "softcap n=%zu in place: bitwise", n);
    free(x); free(y); free(dy); free(dx); free(ry); free(rd); free(x2); free(d2);
}

/* the Gemma kernels above the parallel thresholds: 1 and 2 threads, and
 * cpu-strict, bitwise equal */
static void test_ext_threads_strict(void) {
    const int B = 2, T = 70, NH = 4, NKV = 2, hd = 16, N = 64, H = 1030;
    const size_t nq = (size_t)B * T * (NH + 2 * NKV) * hd, no = (size_t)B * T * NH * hd;
    const size_t nl = (size_t)B * NH * T, ng = (size_t)N * H, ns = 40000;
    const zt_attn_opts o = {0.3f, 5.0f, 9};
    enum { NI = 5, NO = 7 };
    const size_t isz[NI] = {nq, no, 2 * ng, ng, ns};
    const size_t osz[NO] = {no, nl, nq, ng, 2 * ng, ns, ns};
    const char *names[NO] = {"gqa_ext out", "gqa_ext lse", "gqa_ext dqkv", "geglu out",
                             "geglu dgu", "softcap y", "softcap dx"};
    float *in[NI], *r[3][NO];
    for (int i = 0; i < NI; i++) in[i] = fvec(isz[i], i == 0 ? 3.0 : i == 4 ? 20.0 : 1.0);
    const zt_backend *S = zt_backend_cpu_strict();
    for (int run = 0; run < 3; run++) {
        const zt_backend *t = run < 2 ? be : S;
        if (!t) { for (int i = 0; i < NO; i++) r[run][i] = NULL; continue; }
        be->set_threads(run == 0 ? 1 : 2);
        float *di[NI], *dout[NO];
        for (int i = 0; i < NI; i++) {
            di[i] = t->alloc(isz[i] * sizeof(float));
            t->to_device(di[i], in[i], isz[i] * sizeof(float));
        }
        for (int i = 0; i < NO; i++) dout[i] = t->alloc(osz[i] * sizeof(float));
        t->gqa_ext_fwd(dout[0], dout[1], di[0], B, T, NH, NKV, hd, &o);
        t->gqa_ext_bwd(dout[2], di[1], di[0], dout[0], dout[1], B, T, NH, NKV, hd, &o);
        t->geglu_fwd(dout[3], di[2], N, H);
        t->geglu_bwd(dout[4], di[3], di[2], N, H);
        t->softcap_fwd(dout[5], di[4], ns, 30.0f);
        t->softcap_bwd(dout[6], di[4], dout[5], ns, 30.0f);
        if (t->error && t->error()) tap_diag("%s: %s", t->name, t->error());
        tap_ok(!(t->error && t->error()), "%s: the Gemma kernels run without error", t->name);
        for (int i = 0; i < NO; i++) {
            r[run][i] = fvec(osz[i], 0.0);
            t->to_host(r[run][i], dout[i], osz[i] * sizeof(float));
            t->free(dout[i]);
        }
        for (int i = 0; i < NI; i++) t->free(di[i]);
    }
    for (int i = 0; i < NO; i++)
        tap_ok(bitwise(r[0][i], r[1][i], osz[i]), "%s: 1 and 2 threads bitwise equal", names[i]);
    if (!S)
        tap_skip("cpu-strict Gemma kernels bitwise equal to cpu", "no cpu-strict backend");
    else
        for (int i = 0; i < NO; i++)
            tap_ok(bitwise(r[2][i], r[1][i], osz[i]), "cpu-strict %s bitwise equal to cpu",
                   names[i]);
    for (int run = 0; run < 3; run++)
        for (int i = 0; i < NO; i++) free(r[run][i]);
    for (int i = 0; i < NI; i++) free(in[i]);
}

/* ------------------------------------------------------------ encoder, no wpe */

static void test_encoder_nowpe(void) {
    const int B = 2, T = 5, C = 7, V = 11;
    const int N = B * T;
    int inp[10] = {3, 0, 10, 3, 5, 7, 7, 1, 3, 9};
    float *wte = fvec((size_t)V * C, 1.0), *out = fvec((size_t)N * C, 1.0);
    float *dout = fvec((size_t)N * C, 1.0), *dwte = fvec((size_t)V * C, 1.0);
    double *e = dvec((size_t)N * C), *ew = dcopy(dwte, (size_t)V * C);
    be->encoder_fwd(out, inp, wte, NULL, B, T, C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            e[(size_t)n * C + c] = wte[(size_t)inp[n] * C + c];
            ew[(size_t)inp[n] * C + c] += dout[(size_t)n * C + c];
        }
    check_arr("encoder_fwd with wpe NULL: out = wte[inp] exactly", out, e, (size_t)N * C, 0, 0);
    be->encoder_bwd(dwte, NULL, dout, inp, B, T, C);
    check_arr("encoder_bwd with dwpe NULL: dwte (+=) summed over rows in order", dwte, ew,
              (size_t)V * C, 1e-6, 0);
    free(wte); free(out); free(dout); free(dwte); free(e); free(ew);
}

/* ------------------------------------------------------------ threads, strict */

/* every kernel on shapes above the parallel thresholds, into outputs
 * o[0..9] (sizes sz[]) */
typedef struct {
    int N, C, B, T, nh, stride, hd, H, NH, NKV, ahd;
    float *x, *w, *dy, *rope_x, *f, *gu, *dout_h, *qkv, *dout_a;
} big_case;
#define NOUT 10

static void big_sizes(const big_case *k, size_t sz[NOUT]) {
    const size_t NC = (size_t)k->N * k->C, NQ = (size_t)k->B * k->T * (k->NH + 2 * k->NKV) * k->ahd;
    const size_t NO = (size_t)k->B * k->T * k->NH * k->ahd;
    sz[0] = NC; sz[1] = k->N; sz[2] = NC; sz[3] = k->C;                    /* rmsnorm */
    sz[4] = (size_t)k->B * k->T * k->stride;                               /* rope */
    sz[5] = (size_t)k->N * k->H; sz[6] = 2 * (size_t)k->N * k->H;          /* swiglu */
    sz[7] = NO; sz[8] = (size_t)k->B * k->NH * k->T; sz[9] = NQ;           /* gqa */
}

/* run every kernel of `t` on k's inputs (already in t's memory: in[]) */
static void big_run(const zt_backend *t, const big_case *k, float *const in[9], float *o[NOUT]) {
    t->rmsnorm_fwd(o[0], o[1], in[0], in[1], 1e-6f, k->N, k->C);
    t->rmsnorm_bwd(o[2], o[3], in[2], in[0], in[1], o[1], k->N, k->C);
    t->rope_fwd(o[4], in[4], k->B, k->T, k->nh, k->stride, k->hd, 1.0f);
    t->rope_bwd(o[4], in[4], k->B, k->T, k->nh, k->stride, k->hd, 1.0f);
    t->rope_fwd(o[4], in[4], k->B, k->T, k->nh, k->stride, k->hd, 0.75f);
    t->swiglu_fwd(o[5], in[5], k->N, k->H);
    t->swiglu_bwd(o[6], in[6], in[5], k->N, k->H);
    t->gqa_fwd(o[7], o[8], in[7], k->B, k->T, k->NH, k->NKV, k->ahd);
    t->gqa_bwd(o[9], in[8], in[7], o[7], o[8], k->B, k->T, k->NH, k->NKV, k->ahd);
}

static void test_threads_strict(void) {
    big_case k = {.N = 64, .C = 1032, .B = 2, .T = 66, .nh = 10, .stride = 10 * 64 + 32,
                  .hd = 64, .H = 1030, .NH = 4, .NKV = 2, .ahd = 16};
    size_t sz[NOUT];
    big_sizes(&k, sz);
    const size_t isz[9] = {sz[0], (size_t)k.C, sz[0], 0, (size_t)k.hd / 2, sz[6], sz[5],
                           sz[9], sz[7]};
    float *in[9];
    for (int i = 0; i < 9; i++) in[i] = fvec(isz[i], i == 7 ? 1.5 : 1.0);
    float *rope_x = fvec(sz[4], 1.0);
    free(in[4]);
    in[4] = inv_freq_of(k.hd, 500000.0);
    float *o1[NOUT], *o2[NOUT];
    for (int i = 0; i < NOUT; i++) {
        o1[i] = fvec(sz[i], 0.0);
        o2[i] = fvec(sz[i], 0.0);
    }
    memcpy(o1[4], rope_x, sz[4] * sizeof(float));
    memcpy(o2[4], rope_x, sz[4] * sizeof(float));
    const char *names[NOUT] = {"rmsnorm out", "rmsnorm rstd", "rmsnorm dinp", "rmsnorm dw",
                               "rope", "swiglu out", "swiglu dgu", "gqa out", "gqa lse",
                               "gqa dqkv"};
    be->set_threads(1);
    big_run(be, &k, in, o1);
    be->set_threads(2);
    big_run(be, &k, in, o2);
    for (int i = 0; i < NOUT; i++)
        tap_ok(bitwise(o1[i], o2[i], sz[i]), "%s: 1 and 2 threads bitwise equal", names[i]);

    const zt_backend *S = zt_backend_cpu_strict();
    if (!S) {
        tap_skip("cpu-strict bitwise equal to cpu", "no cpu-strict backend (mmap/mprotect)");
    } else {
        float *din[9], *dout[NOUT];
        for (int i = 0; i < 9; i++) {
            din[i] = isz[i] ? S->alloc(isz[i] * sizeof(float)) : NULL;
            if (isz[i]) S->to_device(din[i], in[i], isz[i] * sizeof(float));
        }
        for (int i = 0; i < NOUT; i++) dout[i] = S->alloc(sz[i] * sizeof(float));
        S->to_device(dout[4], rope_x, sz[4] * sizeof(float));
        big_run(S, &k, din, dout);
        const char *err = S->error();
        int same = err == NULL;
        if (err) tap_diag("cpu-strict: %s", err);
        for (int i = 0; i < NOUT; i++) {
            float *h = fvec(sz[i], 0.0);
            S->to_host(h, dout[i], sz[i] * sizeof(float));
            if (!bitwise(h, o2[i], sz[i])) {
                tap_diag("cpu-strict differs from cpu in %s", names[i]);
                same = 0;
            }
            free(h);
            S->free(dout[i]);
        }
        for (int i = 0; i < 9; i++)
            if (din[i]) S->free(din[i]);
        tap_ok(same, "cpu-strict: every Llama kernel bitwise equal to cpu, no error");
    }
    for (int i = 0; i < 9; i++) free(in[i]);
    for (int i = 0; i < NOUT; i++) {
        free(o1[i]);
        free(o2[i]);
    }
    free(rope_x);
}

/* RoPE's backward on a bf16 gradient (rope_bwd16): x16 bitwise to_bf16 of
 * rope_bwd on its widened rows (every column: the v heads as they were),
 * the same with dbias NULL; dbias (+=) the column sums of those fp32 rows
 * (a double reference: the same sums in fp32 within 1e-6); cpu-strict
 * bitwise the cpu's */
static void test_rope_bwd16(int B, int T, int nh, int stride, int hd) {
    char name[160];
    const size_t n = (size_t)B * T * stride;
    float *f = inv_freq_of(hd, 10000.0), *x = fvec(n, 2.0), *y = xcalloc(n, sizeof(float));
    uint16_t *x16 = xcalloc(n, 2), *a16 = xcalloc(n, 2), *c16 = xcalloc(n, 2), *r16 = xcalloc(n, 2);
    be->to_bf16(x16, x, n);
    memcpy(a16, x16, n * 2);
    memcpy(c16, x16, n * 2);
    float *db = fvec((size_t)stride, 1.0), *db0 = fdup(db, (size_t)stride);
    be->rope_bwd16(a16, db, f, B, T, nh, stride, hd, 1.125f);
    be->rope_bwd16(c16, NULL, f, B, T, nh, stride, hd, 1.125f);
    be->from_bf16(y, x16, n);
    be->rope_bwd(y, f, B, T, nh, stride, hd, 1.125f);
    be->to_bf16(r16, y, n);
    int vsame = 1;
    for (size_t i = 0; i < n; i++)
        if ((int)(i % stride) >= nh * hd && a16[i] != x16[i]) vsame = 0;
    snprintf(name, sizeof name, "rope_bwd16 B=%d T=%d heads=%d stride=%d hd=%d: bitwise from_bf16, rope_bwd, "
             "to_bf16 (dbias or not), the other columns as they were", B, T, nh, stride, hd);
    tap_ok(!memcmp(a16, r16, n * 2) && !memcmp(c16, r16, n * 2) && vsame, "%s", name);
    double *ref = dvec((size_t)stride);
    for (int c = 0; c < stride; c++) {
        double acc = 0;
        for (int r = 0; r < B * T; r++) acc += y[(size_t)r * stride + c];
        ref[c] = db0[c] + acc;
    }
    snprintf(name, sizeof name, "rope_bwd16 hd=%d: dbias += the column sums of rope_bwd's fp32 rows", hd);
    check_arr(name, db, ref, (size_t)stride, 1e-6, 1e-6);
    /* cpu-strict: the same bits */
    const zt_backend *S = zt_backend_cpu_strict();
    uint16_t *s16 = S->alloc(n * 2);
    float *sf = S->alloc((size_t)(hd / 2) * sizeof(float)), *sb = S->alloc((size_t)stride * sizeof(float));
    uint16_t *h16 = xcalloc(n, 2);
    float *hb = xcalloc((size_t)stride, sizeof(float));
    S->to_device(s16, x16, n * 2);
    S->to_device(sf, f, (size_t)(hd / 2) * sizeof(float));
    S->to_device(sb, db0, (size_t)stride * sizeof(float));
    S->rope_bwd16(s16, sb, sf, B, T, nh, stride, hd, 1.125f);
    S->to_host(h16, s16, n * 2);
    S->to_host(hb, sb, (size_t)stride * sizeof(float));
    tap_ok(!memcmp(h16, a16, n * 2) && !memcmp(hb, db, (size_t)stride * sizeof(float)) && !S->error(),
           "cpu-strict rope_bwd16 hd=%d: bitwise the cpu's, no error", hd);
    S->free(s16); S->free(sf); S->free(sb);
    free(h16); free(hb); free(f); free(x); free(y); free(x16); free(a16); free(c16); free(r16);
    free(db); free(db0); free(ref);
}

/* Qwen3's q/k norms' backward on a bf16 gradient (qknorm_rope_bwd16): the
 * q and k heads bitwise to_bf16 of from_bf16, rope_bwd, headnorm_bwd on
 * the q groups and on the k groups (raw and rstd the forward's
 * headnorm_fwd's), the v heads as they were, dqw and dkw (+=) bitwise
 * that sequence's; cpu-strict bitwise the cpu's */
static void test_qknorm_rope_bwd16(int B, int T, int NH, int NKV, int qnh, int knh, int hd) {
    char name[200];
    const int N = B * T, stride = (NH + 2 * NKV) * hd, AD = NH * hd;
    const int qg = NH * hd / qnh, kg = NKV * hd / knh;
    const size_t n = (size_t)N * stride, nraw = (size_t)N * (NH + NKV) * hd, nrs = (size_t)N * NH + (size_t)N * knh;
    float *f = inv_freq_of(hd, 10000.0), *x = fvec(n, 2.0), *g = fvec(n, 0.5), *y = xcalloc(n, sizeof(float));
    float *raw = xcalloc(nraw, sizeof(float)), *rs = xcalloc(nrs, sizeof(float));
    float *qw = fvec((size_t)qg, 1.0), *kw = fvec((size_t)kg, 1.0);
    /* (the forward's raw and rstd) */
    be->headnorm_fwd(x, raw, rs, qw, 1e-6f, N, qnh, stride, qg);
    be->headnorm_fwd(x + AD, raw + (size_t)N * AD, rs + (size_t)N * NH, kw, 1e-6f, N, knh, stride, kg);
    uint16_t *x16 = xcalloc(n, 2), *a16 = xcalloc(n, 2), *r16 = xcalloc(n, 2);
    be->to_bf16(x16, g, n);
    memcpy(a16, x16, n * 2);
    float *dq = fvec((size_t)qg, 1.0), *dk = fvec((size_t)kg, 1.0);
    float *dq0 = fdup(dq, (size_t)qg), *dk0 = fdup(dk, (size_t)kg);
    float *rq = fdup(dq, (size_t)qg), *rk = fdup(dk, (size_t)kg);
    be->qknorm_rope_bwd16(a16, dq, dk, raw, rs, qw, kw, f, B, T, NH, NKV, qnh, knh, stride, hd, 1.125f);
    be->from_bf16(y, x16, n);
    be->rope_bwd(y, f, B, T, NH + NKV, stride, hd, 1.125f);
    be->headnorm_bwd(y, rq, raw, qw, rs, N, qnh, stride, qg);
    be->headnorm_bwd(y + AD, rk, raw + (size_t)N * AD, kw, rs + (size_t)N * NH, N, knh, stride, kg);
    be->to_bf16(r16, y, n);
    int qk = 1, v = 1;
    for (size_t i = 0; i < n; i++) {
        if ((int)(i % stride) < (NH + NKV) * hd) qk &= a16[i] == r16[i];
        else v &= a16[i] == x16[i];
    }
    snprintf(name, sizeof name, "qknorm_rope_bwd16 B=%d T=%d NH=%d NKV=%d groups %d|%d hd=%d: q|k bitwise from_bf16, "
             "rope_bwd, headnorm_bwd (q, k), to_bf16; v as it was; dqw, dkw bitwise", B, T, NH, NKV, qnh, knh, hd);
    tap_ok(qk && v && bitwise(dq, rq, (size_t)qg) && bitwise(dk, rk, (size_t)kg) &&
               !bitwise(dq, dq0, (size_t)qg) && !bitwise(dk, dk0, (size_t)kg),
           "%s", name);
    /* cpu-strict: the same bits */
    const zt_backend *S = zt_backend_cpu_strict();
    uint16_t *s16 = S->alloc(n * 2);
    float *sraw = S->alloc(nraw * sizeof(float)), *srs = S->alloc(nrs * sizeof(float));
    float *sqw = S->alloc((size_t)qg * sizeof(float)), *skw = S->alloc((size_t)kg * sizeof(float));
    float *sdq = S->alloc((size_t)qg * sizeof(float)), *sdk = S->alloc((size_t)kg * sizeof(float));
    float *sf = S->alloc((size_t)(hd / 2) * sizeof(float));
    S->to_device(s16, x16, n * 2);
    S->to_device(sraw, raw, nraw * sizeof(float));
    S->to_device(srs, rs, nrs * sizeof(float));
    S->to_device(sqw, qw, (size_t)qg * sizeof(float));
    S->to_device(skw, kw, (size_t)kg * sizeof(float));
    S->to_device(sdq, dq0, (size_t)qg * sizeof(float));
    S->to_device(sdk, dk0, (size_t)kg * sizeof(float));
    S->to_device(sf, f, (size_t)(hd / 2) * sizeof(float));
    S->qknorm_rope_bwd16(s16, sdq, sdk, sraw, srs, sqw, skw, sf, B, T, NH, NKV, qnh, knh, stride, hd, 1.125f);
    uint16_t *h16 = xcalloc(n, 2);
    float *hq = xcalloc((size_t)qg, sizeof(float)), *hk = xcalloc((size_t)kg, sizeof(float));
    S->to_host(h16, s16, n * 2);
    S->to_host(hq, sdq, (size_t)qg * sizeof(float));
    S->to_host(hk, sdk, (size_t)kg * sizeof(float));
    const char *err = S->error();
    tap_ok(!memcmp(h16, a16, n * 2) && bitwise(hq, dq, (size_t)qg) && bitwise(hk, dk, (size_t)kg) && !err,
           "cpu-strict qknorm_rope_bwd16 groups %d|%d hd=%d: bitwise the cpu's, no error%s%s", qnh, knh, hd,
           err ? ": " : "", err ? err : "");
    S->free(s16); S->free(sraw); S->free(srs); S->free(sqw); S->free(skw); S->free(sdq); S->free(sdk);
    S->free(sf);
    free(h16); free(hq); free(hk); free(f); free(x); free(g); free(y); free(raw); free(rs); free(qw);
    free(kw); free(x16); free(a16); free(r16); free(dq); free(dk); free(dq0); free(dk0); free(rq); free(rk);
}

/* ------------------------------------------------------------ the base input gradient into bf16 */

/* the bf16 value of x (round to nearest even), widened back: exact */
static double bf16_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* matmul_bwd_acc16 (Llama's LoRA q|k|v and gate|up, lgrad16): dinp16 =
 * bf16(dout @ w + fp32(dinp16)) in place, bitwise matmul_bwd_acc on the
 * widened dinp16 followed by to_bf16 (each operand form: fp32, w16,
 * dout16, both; fp32 and bf16 matmul mode); near the double-precision sum
 * (bf16 mode: of the rounded operands) within one bf16 rounding; small
 * integers exact; N, C or OC 0: dinp16 unchanged; cpu-strict bitwise the
 * cpu's, no error */
static void test_matmul_bwd_acc16(int n, int c, int oc) {
    static const char *vname[] = {"fp32 operands", "w16", "dout16", "dout16 w16"};
    const size_t nd = (size_t)n * oc, nw = (size_t)oc * c, ni = (size_t)n * c;
    float *dout = fvec(nd, 1.0), *w = fvec(nw, 1.0), *startf = fvec(ni, 4.0);
    uint16_t *d16 = xcalloc(nd, 2), *w16 = xcalloc(nw, 2), *start16 = xcalloc(ni, 2);
    uint16_t *acc16 = xcalloc(ni, 2), *seq16 = xcalloc(ni, 2), *st16 = xcalloc(ni, 2);
    float *seq = fvec(ni, 0.0), *got = fvec(ni, 0.0);
    double *ref = dvec(ni);
    char name[192];
    be->to_bf16(d16, dout, nd);
    be->to_bf16(w16, w, nw);
    be->to_bf16(start16, startf, ni);
    const zt_backend *S = zt_backend_cpu_strict();
    for (int mode = 0; mode < 2; mode++) {
        be->set_matmul_precision(mode ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32);
        if (S) S->set_matmul_precision(mode ? ZT_MATMUL_BF16 : ZT_MATMUL_FP32);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < c; j++) {
                double s = 0.0;
                for (int o = 0; o < oc; o++) {
                    const float a = dout[(size_t)i * oc + o], b = w[(size_t)o * c + j];
                    s += mode ? bf16_of(a) * bf16_of(b) : (double)a * b;
                }
                float st;
                be->from_bf16(&st, &start16[(size_t)i * c + j], 1);
                ref[(size_t)i * c + j] = (double)st + s;
            }
        for (int v = 0; v < (mode ? 4 : 1); v++) {
            const uint16_t *vw16 = v & 1 ? w16 : NULL, *vd16 = v & 2 ? d16 : NULL;
            const float *vw = vw16 ? NULL : w, *vd = vd16 ? NULL : dout;
            memcpy(acc16, start16, ni * 2);
            be->matmul_bwd_acc16(acc16, vd, vd16, vw, vw16, n, c, oc);
            be->from_bf16(seq, start16, ni);
            be->matmul_bwd_acc(seq, vd, vd16, vw, vw16, n, c, oc);
            be->to_bf16(seq16, seq, ni);
            snprintf(name, sizeof name, "matmul_bwd_acc16 N=%d C=%d OC=%d %s %s: bitwise matmul_bwd_acc "
                     "on the widened dinp16, then to_bf16", n, c, oc, mode ? "bf16" : "fp32", vname[v]);
            tap_ok(!memcmp(acc16, seq16, ni * 2), "%s", name);
            be->from_bf16(got, acc16, ni);
            snprintf(name, sizeof name, "matmul_bwd_acc16 N=%d C=%d OC=%d %s %s: bf16(dinp16 + dout w)",
                     n, c, oc, mode ? "bf16" : "fp32", vname[v]);
            /* (one bf16 rounding of the sum, 2^-8 relative, and fp32's sums) */
            check_arr(name, got, ref, ni, 1.0 / 256 + 1e-5, 1e-5 * sqrt((double)oc));
            if (!S) {
                tap_skip("cpu-strict matmul_bwd_acc16", "no cpu-strict backend (mmap/mprotect)");
                continue;
            }
            uint16_t *sa = S->alloc(ni * 2), *sd16 = S->alloc(nd * 2), *sw16 = S->alloc(nw * 2);
            float *sd = S->alloc(nd * 4), *sw = S->alloc(nw * 4);
            S->to_device(sa, start16, ni * 2);
            S->to_device(sd16, d16, nd * 2);
            S->to_device(sw16, w16, nw * 2);
            S->to_device(sd, dout, nd * 4);
            S->to_device(sw, w, nw * 4);
            S->matmul_bwd_acc16(sa, vd ? sd : NULL, vd16 ? sd16 : NULL, vw ? sw : NULL,
                                vw16 ? sw16 : NULL, n, c, oc);
            S->to_host(st16, sa, ni * 2);
            tap_ok(!memcmp(st16, acc16, ni * 2) && !S->error(),
                   "cpu-strict matmul_bwd_acc16 N=%d C=%d OC=%d %s %s: bitwise the cpu's, no error",
                   n, c, oc, mode ? "bf16" : "fp32", vname[v]);
            S->free(sa); S->free(sd16); S->free(sw16); S->free(sd); S->free(sw);
        }
        /* N, C or OC 0: dinp16 unchanged */
        memcpy(acc16, start16, ni * 2);
        be->matmul_bwd_acc16(acc16, dout, NULL, w, NULL, 0, c, oc);
        be->matmul_bwd_acc16(acc16, dout, NULL, w, NULL, n, 0, oc);
        be->matmul_bwd_acc16(acc16, dout, NULL, w, NULL, n, c, 0);
        tap_ok(!memcmp(acc16, start16, ni * 2),
               "matmul_bwd_acc16 %s N=%d C=%d OC=%d: N, C or OC 0 leave dinp16 unchanged",
               mode ? "bf16" : "fp32", n, c, oc);
    }
    {
        /* small integers: the product, the sum and its bf16 all exact */
        enum { N = 5, Cc = 7, OC = 6 };
        float di[N * OC], wi[OC * Cc], st[N * Cc], want[N * Cc], g2[N * Cc];
        uint16_t s16[N * Cc];
        for (int i = 0; i < N * OC; i++) di[i] = (float)(i % 5 - 2);
        for (int i = 0; i < OC * Cc; i++) wi[i] = (float)(i % 3 - 1);
        for (int i = 0; i < N * Cc; i++) st[i] = (float)(i % 9 - 4);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < Cc; j++) {
                float s = st[i * Cc + j];
                for (int o = 0; o < OC; o++) s += di[i * OC + o] * wi[o * Cc + j];
                want[i * Cc + j] = s;
            }
        be->set_matmul_precision(ZT_MATMUL_BF16);
        be->to_bf16(s16, st, N * Cc);
        be->matmul_bwd_acc16(s16, di, NULL, wi, NULL, N, Cc, OC);
        be->from_bf16(g2, s16, N * Cc);
        tap_ok(!memcmp(g2, want, sizeof g2), "matmul_bwd_acc16 bf16, small integers: exact");
    }
    be->set_matmul_precision(ZT_MATMUL_FP32);
    if (S) S->set_matmul_precision(ZT_MATMUL_FP32);
    tap_ok(be->error() == NULL, "matmul_bwd_acc16 N=%d C=%d OC=%d: no backend error recorded", n, c, oc);
    free(dout); free(w); free(startf); free(d16); free(w16); free(start16); free(acc16);
    free(seq16); free(st16); free(seq); free(got); free(ref);
}

int main(void) {
    be = zt_backend_cpu();
    be->set_threads(2);
    test_math();
    test_rmsnorm(7, 13);
    test_rmsnorm(3, 300);
    test_add_rmsnorm16b(7, 13);
    test_add_rmsnorm16b(3, 300);
    test_headnorm(5, 3, 40, 8);      /* 3 heads of a 40-wide row (q heads of a qkv row) */
    test_headnorm(70, 4, 128, 32);   /* above the parallel threshold */
    test_rope(2, 9, 3, 3 * 6 + 6, 6);     /* q, k heads of a qkv row; hd 6 */
    test_rope(2, 7, 3, 3 * 16, 16);
    test_rope(1, 4101, 1, 16, 16);        /* large positions: range reduction */
    test_rope_bwd16(2, 9, 3, 3 * 6 + 6, 6);      /* q, k heads rotated; the v heads as they were */
    test_rope_bwd16(1, 300, 5, 5 * 16 + 16, 16); /* GQA 4 + 1 | 1 */
    test_qknorm_rope_bwd16(2, 9, 3, 1, 3, 1, 6);     /* per head, hd 6 */
    test_qknorm_rope_bwd16(1, 37, 4, 2, 4, 2, 16);   /* per head, GQA, 37 rows */
    test_qknorm_rope_bwd16(3, 11, 4, 2, 1, 1, 8);    /* qk_norm_full: one group a projection */
    test_qknorm_rope_bwd16(2, 300, 4, 2, 4, 2, 32);  /* above the parallel threshold */
    test_swiglu(5, 11);
    test_gqa(2, 13, 4, 4, 6, 1);
    test_gqa(2, 13, 4, 2, 6, 1);
    test_gqa(2, 13, 4, 1, 6, 1);
    test_gqa(2, 11, 4, 4, 16, 1);
    test_gqa(2, 11, 4, 2, 16, 1);
    test_gqa(2, 11, 4, 1, 16, 1);
    test_gqa(2, 133, 2, 1, 6, 37);        /* T past one 128-key block */
    /* Gemma: query_pre_attn_scalar scale, soft-cap 50 (Gemma 2's) and a
     * small one that bites, windows shorter than T, GQA and MQA */
    test_gqa_ext(2, 13, 4, 2, 6, 0.25f, 0.0f, 5, 1);
    test_gqa_ext(2, 13, 4, 4, 6, 0.5f, 2.0f, 0, 1);
    test_gqa_ext(2, 13, 4, 1, 16, 0.25f, 1.5f, 4, 1);
    test_gqa_ext(1, 11, 2, 2, 16, 0.25f, 50.0f, 1, 1);   /* window 1: each row sees itself */
    test_gqa_ext(1, 140, 2, 1, 6, 0.4f, 3.0f, 131, 37);  /* past one 128-key block */
    test_geglu(5, 11);
    test_glu_bwd_dd16(0, 5, 11);
    test_glu_bwd_dd16(1, 5, 11);
    test_glu_bwd_dd16(0, 3, 300);
    test_softcap(1000, 30.0f);
    test_softcap(77, 50.0f);
    test_ext_threads_strict();
    test_encoder_nowpe();
    test_threads_strict();
    test_matmul_bwd_acc16(37, 29, 48);    /* odd N */
    test_matmul_bwd_acc16(300, 256, 64);  /* above the parallel threshold */
    test_matmul_bwd_acc16(33, 40, 400);
    return tap_done();
}
