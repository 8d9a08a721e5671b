/*
 * test_precision.c -- 16-bit float storage and the mixed-precision helpers.
 *
 * Kernels (CPU backend table: to_bf16, from_bf16, to_f16, from_f16,
 * nonfinite), against references written independently here (double
 * arithmetic with nearbyint, not bit tricks):
 *   - all 65536 patterns of each format widen exactly and narrow back to
 *     the same pattern (NaNs included);
 *   - every midpoint between adjacent representable values rounds to the
 *     even one, and the floats just below/above it to the nearer one
 *     (overflow to infinity, subnormals and zero included);
 *   - named edge cases, random fp32 patterns of all magnitudes, and GCC's
 *     _Float16 conversion where the compiler has it;
 *   - parallel results (large arrays, 1 and 3 threads) equal the serial ones;
 *   - the non-finite count.
 * Loss scaler and helpers (libtrain/precision.h): see the second half.
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "precision.h"
#include "tap.h"

static const zt_backend *be;

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

/* ---------------------------------------------------------------- references */

/* value of a binary16 pattern (NaN for NaN patterns) */
static double ref_f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}
static double ref_bf16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -133);
    else v = ldexp(128 + m, e - 134);
    return s ? -v : v;
}

/* x rounded to nearest-even with p significant bits, minimum exponent emin
 * (of the leading bit; below it the step is fixed: subnormals) and
 * overflow threshold `big` (|x| >= big -> inf). */
static double ref_round(double x, int p, int emin, double big) {
    if (isnan(x)) return x;
    double ax = fabs(x), q;
    if (ax >= big) q = INFINITY;
    else {
        int e;
        frexp(ax, &e);            /* ax = f 2^e, f in [0.5, 1): leading bit 2^(e-1) */
        int lead = e - 1;
        if (lead < emin) lead = emin;
        double ulp = ldexp(1.0, lead - (p - 1));
        q = nearbyint(ax / ulp) * ulp;   /* default rounding: to nearest even */
    }
    return copysign(q, x);
}
static double ref_f16_round(double x) { return ref_round(x, 11, -14, 65520.0); }
static double ref_bf16_round(double x) {
    return ref_round(x, 8, -126, ldexp(511, 119));   /* (2 - 2^-8) 2^127 */
}

/* same value and, for zeros, same sign; NaN matches NaN */
static int same_value(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* ---------------------------------------------------------------- exhaustive */

typedef void (*to16_fn)(uint16_t *, const float *, size_t);
typedef void (*from16_fn)(float *, const uint16_t *, size_t);

static void test_all_patterns(const char *name, to16_fn to, from16_fn from,
                              double (*value)(uint16_t)) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    from(f, h, N);
    to(back, f, N);
    int bad_val = -1, bad_rt = -1, nnan = 0;
    for (int i = 0; i < N; i++) {
        if (!same_value(f[i], value(h[i])) && bad_val < 0) bad_val = i;
        if (back[i] != h[i] && bad_rt < 0) bad_rt = i;
        nnan += isnan(f[i]) != 0;
    }
    if (bad_val >= 0)
        tap_diag("%s: pattern 0x%04x widens to %.9g, expected %.9g", name, bad_val,
                 (double)f[bad_val], value((uint16_t)bad_val));
    tap_ok(bad_val < 0, "%s: all 65536 patterns widen to their exact value", name);
    if (bad_rt >= 0)
        tap_diag("%s: 0x%04x -> %08x -> 0x%04x", name, bad_rt, fbits(f[bad_rt]), back[bad_rt]);
    tap_ok(bad_rt < 0, "%s: all 65536 patterns round-trip bit-exactly (NaN payloads included)",
           name);
    tap_ok(nnan == (name[0] == 'b' ? 2 * 127 : 2 * 1023), "%s: NaN patterns widen to NaN (%d)",
           name, nnan);
    free(h); free(back); free(f);
}

/* Every midpoint between adjacent values h, h+1 (same sign, h+1 may be
 * infinity) rounds to the even one; one float below goes to h, above to h+1. */
static void test_midpoints(const char *name, to16_fn to, double (*value)(uint16_t),
                           uint16_t inf_bits) {
    int nmid = 0, bad = 0;
    for (int sgn = 0; sgn < 2; sgn++) {
        for (uint32_t k = 0; k < inf_bits; k++) {
            const uint16_t h = (uint16_t)(k | (sgn ? 0x8000u : 0));
            const uint16_t h1 = (uint16_t)(h + 1);
            const double lo = fabs(value(h));
            /* h+1 is the next larger magnitude; for h = largest finite the
             * next "value" is lo + ulp (the overflow threshold's twin) */
            double hi = fabs(value(h1));
            if (isinf(hi)) hi = lo + (lo - fabs(value((uint16_t)(h - 1))));
            const double midd = (lo + hi) / 2;
            const float mid = (float)(sgn ? -midd : midd);
            if ((double)fabsf(mid) != midd) { bad++; continue; }  /* must be exact */
            const float below = nextafterf(mid, 0.0f);
            const float above = nextafterf(mid, sgn ? -INFINITY : INFINITY);
            uint16_t r[3];
            const float in[3] = {mid, below, above};
            to(r, in, 3);
            const uint16_t even = (h & 1) ? h1 : h;
            nmid++;
            if (r[0] != even || r[1] != h || r[2] != h1) {
                if (bad < 5)
                    tap_diag("%s: between 0x%04x and 0x%04x: mid -> 0x%04x (want 0x%04x), "
                             "below -> 0x%04x, above -> 0x%04x", name, h, h1, r[0], even,
                             r[1], r[2]);
                bad++;
            }
        }
    }
    tap_ok(bad == 0 && nmid == 2 * (int)inf_bits,
           "%s: all %d midpoints round to even, their neighbours to nearest", name, nmid);
}

/* ---------------------------------------------------------------- edges */

static void test_edges(void) {
    struct { float x; uint16_t f16, bf16; const char *what; } c[] = {
        {0.0f, 0x0000, 0x0000, "+0"},
        {-0.0f, 0x8000, 0x8000, "-0"},
        {1.0f, 0x3c00, 0x3f80, "1"},
        {-2.0f, 0xc000, 0xc000, "-2"},
        {65504.0f, 0x7bff, 0x4780, "f16 max"},
        {65519.996f, 0x7bff, 0x4780, "just below 65520"},
        {65520.0f, 0x7c00, 0x4780, "65520 (tie with infinity)"},
        {-1e10f, 0xfc00, 0xd015, "-1e10"},
        {INFINITY, 0x7c00, 0x7f80, "+inf"},
        {-INFINITY, 0xfc00, 0xff80, "-inf"},
        {0x1p-24f, 0x0001, 0x3380, "2^-24 (smallest f16 subnormal)"},
        {0x1p-25f, 0x0000, 0x3300, "2^-25 (tie: to 0)"},
        {0x1.000002p-25f, 0x0001, 0x3300, "just above 2^-25"},
        {0x1.8p-24f, 0x0002, 0x33c0, "1.5 2^-24 (tie: to 2)"},
        {0x1.ffcp-15f, 0x0400, 0x3880, "rounds up to the smallest normal 2^-14"},
        {0x1p-14f, 0x0400, 0x3880, "2^-14"},
        {0x1.ff8p-15f, 0x03ff, 0x3880, "largest subnormal"},
        {1e-30f, 0x0000, 0x0da2, "1e-30 underflows f16 to +0"},
        {-1e-30f, 0x8000, 0x8da2, "-1e-30 underflows f16 to -0"},
        {FLT_MIN, 0x0000, 0x0080, "FLT_MIN"},
        {0x1p-149f, 0x0000, 0x0000, "smallest fp32 subnormal (tie in bf16: to 0)"},
        {0x1.fffffep127f, 0x7c00, 0x7f80, "FLT_MAX overflows both to inf"},
        {0x1.fep127f, 0x7c00, 0x7f7f, "bf16 max"},
        {1.00390625f, 0x3c04, 0x3f80, "1 + 2^-8 (bf16 tie: to 1)"},
        {1.01171875f, 0x3c0c, 0x3f82, "1 + 3 2^-8 (bf16 tie: up to even)"},
        {1.00048828125f, 0x3c00, 0x3f80, "1 + 2^-11 (f16 tie: to 1)"},
        {1.00146484375f, 0x3c02, 0x3f80, "1 + 3 2^-11 (f16 tie: up to even)"},
    };
    const int n = (int)(sizeof c / sizeof c[0]);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint16_t a, b;
        be->to_f16(&a, &c[i].x, 1);
        be->to_bf16(&b, &c[i].x, 1);
        if (a != c[i].f16 || b != c[i].bf16) {
            tap_diag("edge %s (%a): f16 0x%04x (want 0x%04x), bf16 0x%04x (want 0x%04x)",
                     c[i].what, (double)c[i].x, a, c[i].f16, b, c[i].bf16);
            bad++;
        }
    }
    tap_ok(bad == 0, "%d named edge cases (signed zeros, max, overflow, subnormals, ties)", n);

    /* NaNs: quiet, signalling, payload only in the low (dropped) bits */
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xff800fffu,
                             0x7fffffffu};
    int nan_ok = 1;
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float x = bitsf(nans[i]), y, z;
        uint16_t a, b;
        be->to_f16(&a, &x, 1);
        be->to_bf16(&b, &x, 1);
        be->from_f16(&y, &a, 1);
        be->from_bf16(&z, &b, 1);
        if ((a & 0x7c00) != 0x7c00 || !(a & 0x3ff) || (b & 0x7f80) != 0x7f80 || !(b & 0x7f) ||
            !isnan(y) || !isnan(z) || (a >> 15) != (nans[i] >> 31) || (b >> 15) != (nans[i] >> 31))
            nan_ok = 0;
    }
    tap_ok(nan_ok, "NaN (quiet, signalling, low payload, either sign) stays NaN with its sign");
}

/* ---------------------------------------------------------------- random */

static void test_random(void) {
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    uint16_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (int i = 0; i < N; i++) {
        uint32_t u = rnd32();
        if (i & 1) {
            /* magnitudes around binary16's range: exponents 2^-30 .. 2^20 */
            u = (u & 0x807fffffu) | ((uint32_t)(97 + rnd32() % 51) << 23);
        }
        x[i] = bitsf(u);
    }
    be->to_f16(a, x, N);
    be->from_f16(y, a, N);
    be->to_bf16(b, x, N);
    be->from_bf16(z, b, N);
    long bad16 = 0, badb = 0;
    for (int i = 0; i < N; i++) {
        if (!same_value(y[i], ref_f16_round(x[i]))) {
            if (bad16 < 3) tap_diag("f16(%a) = %a, want %a", (double)x[i], (double)y[i],
                                    ref_f16_round(x[i]));
            bad16++;
        }
        if (!same_value(z[i], ref_bf16_round(x[i]))) {
            if (badb < 3) tap_diag("bf16(%a) = %a, want %a", (double)x[i], (double)z[i],
                                   ref_bf16_round(x[i]));
            badb++;
        }
    }
    tap_ok(bad16 == 0, "to_f16: %d random floats round as the nearbyint reference", N);
    tap_ok(badb == 0, "to_bf16: %d random floats round as the nearbyint reference", N);
#if defined(__FLT16_MAX__) && !defined(__clang__)
    long badc = 0;
    for (int i = 0; i < N; i++) {
        _Float16 h = (_Float16)x[i];
        uint16_t hb;
        memcpy(&hb, &h, 2);
        if (hb != a[i] && !(isnan(x[i]) && (a[i] & 0x7fff) > 0x7c00)) badc++;
    }
    tap_ok(badc == 0, "to_f16 equals the compiler's _Float16 conversion on %d floats", N);
#else
    tap_skip("to_f16 equals the compiler's _Float16 conversion", "no _Float16");
#endif
    free(x); free(y); free(z); free(a); free(b);
}

/* ---------------------------------------------------------------- parallel */

static void test_parallel(void) {
    const size_t n = 1000003;   /* several chunks, odd tail */
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y3 = malloc(n * sizeof *y3);
    uint16_t *a1 = malloc(n * 2), *a3 = malloc(n * 2), *ser = malloc(n * 2);
    for (size_t i = 0; i < n; i++) x[i] = bitsf(rnd32() & 0xbfffffffu);  /* |x| < 2 */
    for (int fmt = 0; fmt < 2; fmt++) {
        to16_fn to = fmt ? be->to_bf16 : be->to_f16;
        from16_fn from = fmt ? be->from_bf16 : be->from_f16;
        const char *nm = fmt ? "bf16" : "f16";
        be->set_threads(1);
        to(a1, x, n);
        from(y1, a1, n);
        be->set_threads(3);
        to(a3, x, n);
        from(y3, a3, n);
        for (size_t i = 0; i < n; i++) to(ser + i, x + i, 1);
        tap_ok(memcmp(a1, a3, n * 2) == 0 && memcmp(a1, ser, n * 2) == 0,
               "%s narrowing: 1 thread, 3 threads and element by element agree (n = %zu)", nm, n);
        tap_ok(memcmp(y1, y3, n * 4) == 0, "%s widening: 1 and 3 threads agree", nm);
    }
    be->set_threads(1);
    free(x); free(y1); free(y3); free(a1); free(a3); free(ser);
}

/* ---------------------------------------------------------------- nonfinite */

static void test_nonfinite(void) {
    const size_t n = 300001;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i % 1000) - 500) * 1e30f;  /* finite */
    x[1] = FLT_MAX;
    x[2] = -FLT_MAX;
    x[3] = 0x1p-149f;
    tap_ok(be->nonfinite(x, n) == 0, "nonfinite: finite values (incl. FLT_MAX, subnormals) count 0");
    tap_ok(be->nonfinite(x, 0) == 0, "nonfinite: n = 0 gives 0");
    const size_t pos[] = {0, 7, 16383, 16384, 65536, 200000, n - 1};
    const uint32_t pat[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffffffffu, 0x7f800001u,
                            0x7fc00000u, 0xff800000u};
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) x[pos[k]] = bitsf(pat[k]);
    const size_t want = sizeof pos / sizeof pos[0];
    be->set_threads(1);
    size_t c1 = be->nonfinite(x, n);
    be->set_threads(3);
    size_t c3 = be->nonfinite(x, n);
    be->set_threads(1);
    tap_ok(c1 == want && c3 == want, "nonfinite: counts %zu inf/nan among %zu (1 thread: %zu, "
           "3 threads: %zu)", want, n, c1, c3);
    tap_ok(be->nonfinite(x, n - 1) == want - 1 && be->nonfinite(x + 1, 6) == 0,
           "nonfinite: counts only within [x, x+n)");
    free(x);
}


/* environment lookup over a NULL-terminated name/value list (config tests) */
static const char *env_get(void *user, const char *name) {
    const char *const *kv = *(const char *const *const *)user;
    for (; kv[0]; kv += 2)
        if (strcmp(kv[0], name) == 0) return kv[1];
    return NULL;
}

/* ================================================================ loss scaler */

static zt_config *fp16_config(const char *const *kv) {
    zt_config *c = zt_config_new();
    zt_status st;
    if (zt_config_set(c, "fp16.enabled", "true", ZT_SRC_FLAG, &st)) tap_diag("%s", st.msg);
    for (; kv && kv[0]; kv += 2)
        if (zt_config_set(c, kv[0], kv[1], ZT_SRC_FLAG, &st)) tap_diag("%s", st.msg);
    return c;
}

/* DeepSpeed's DynamicLossScaler.update_scale, transcribed literally
 * (consecutive_hysteresis = False, raise_error_at_min_scale = True). */
typedef struct ds_scaler {
    double cur_scale, min_scale, scale_factor;
    long cur_iter, last_overflow_iter;
    int scale_window, delayed_shift, cur_hysteresis;
} ds_scaler;
static int ds_update(ds_scaler *d, int overflow) {   /* 1 = raised */
    if (overflow) {
        if (d->delayed_shift == 1 || d->cur_hysteresis == 1) {
            if (d->cur_scale == d->min_scale) return 1;
            double next = d->cur_scale / d->scale_factor;
            d->cur_scale = next > d->min_scale ? next : d->min_scale;
        } else {
            d->cur_hysteresis -= 1;
        }
        d->last_overflow_iter = d->cur_iter;
    } else {
        if ((d->cur_iter - d->last_overflow_iter) % d->scale_window == 0) {
            d->cur_hysteresis = d->delayed_shift;
            d->cur_scale *= d->scale_factor;
        }
    }
    d->cur_iter += 1;
    return 0;
}

static void test_scaler_defaults(void) {
    zt_config *c = fp16_config(NULL);
    zt_loss_scaler ls;
    zt_scaler_init(&ls, c);
    tap_ok(ls.enabled && ls.dynamic && ls.s.scale == 65536.0 && zt_scaler_scale(&ls) == 65536.0f &&
           ls.s.hysteresis_left == 2 && ls.window == 1000 && ls.min_scale == 1.0,
           "fp16 defaults: dynamic, scale 2^16, hysteresis 2, window 1000, min 1");
    zt_config_free(c);

    c = zt_config_new();
    zt_scaler_init(&ls, c);
    int skip = -1;
    zt_status st;
    int rc = zt_scaler_update(&ls, 1, 5, &skip, &st);
    tap_ok(!ls.enabled && zt_scaler_scale(&ls) == 1.0f && rc == ZT_OK && skip == 0,
           "fp32: scaler disabled, scale 1, an overflow never skips");
    zt_config_set(c, "bf16.enabled", "true", ZT_SRC_FLAG, &st);
    zt_scaler_init(&ls, c);
    rc = zt_scaler_update(&ls, 1, 5, &skip, &st);
    tap_ok(!ls.enabled && zt_scaler_scale(&ls) == 1.0f && rc == ZT_OK && skip == 0,
           "bf16: no loss scaling");
    zt_config_free(c);
}

static void test_scaler_overflow(void) {
    const char *kv[] = {"fp16.loss_scale_window", "4", NULL};
    zt_config *c = fp16_config(kv);
    zt_loss_scaler ls;
    zt_scaler_init(&ls, c);
    zt_status st;
    int skip = 0, rc;
    rc = zt_scaler_update(&ls, 1, 1, &skip, &st);
    tap_ok(rc == ZT_OK && skip == 1 && ls.s.scale == 65536.0 && ls.s.hysteresis_left == 1,
           "first overflow: step skipped, hysteresis 2 -> 1, scale kept");
    rc = zt_scaler_update(&ls, 1, 2, &skip, &st);
    tap_ok(rc == ZT_OK && skip == 1 && ls.s.scale == 32768.0 && ls.s.hysteresis_left == 1,
           "second overflow (hysteresis exhausted): skipped, scale halves to 32768");
    rc = zt_scaler_update(&ls, 1, 3, &skip, &st);
    tap_ok(rc == ZT_OK && skip == 1 && ls.s.scale == 16384.0,
           "further overflows halve at once until the scale grows again");
    int grew_early = 0;
    for (int i = 0; i < 3; i++) {
        zt_scaler_update(&ls, 0, 4 + i, &skip, &st);
        grew_early |= ls.s.scale != 16384.0 || skip;
    }
    tap_ok(!grew_early && ls.s.good_steps == 3, "3 good steps (window 4): no growth, no skip");
    zt_scaler_update(&ls, 0, 7, &skip, &st);
    tap_ok(ls.s.scale == 32768.0 && ls.s.hysteresis_left == 2 && ls.s.good_steps == 0 && !skip,
           "4th good step: scale doubles to 32768, hysteresis refilled to 2");
    for (int i = 0; i < 3; i++) zt_scaler_update(&ls, 0, 8 + i, &skip, &st);
    zt_scaler_update(&ls, 1, 11, &skip, &st);
    for (int i = 0; i < 3; i++) zt_scaler_update(&ls, 0, 12 + i, &skip, &st);
    tap_ok(ls.s.scale == 32768.0 && ls.s.hysteresis_left == 1 && ls.s.good_steps == 3,
           "an overflow restarts the window (3 + overflow + 3 good: no growth)");
    zt_scaler_update(&ls, 0, 15, &skip, &st);
    tap_ok(ls.s.scale == 65536.0 && ls.skipped == 4 && ls.shrinks == 2 && ls.grows == 2,
           "window completes after the overflow: 65536; counters 4 skipped, 2 shrinks, 2 grows");
    zt_config_free(c);
}

static void test_scaler_min(void) {
    const char *kv[] = {"fp16.initial_scale_power", "2", "fp16.min_loss_scale", "3",
                        "fp16.hysteresis", "1", NULL};
    zt_config *c = fp16_config(kv);
    zt_loss_scaler ls;
    zt_scaler_init(&ls, c);
    zt_status st;
    zt_status_clear(&st);
    int skip = 0;
    int rc = zt_scaler_update(&ls, 1, 1, &skip, &st);
    tap_ok(rc == ZT_OK && skip && ls.s.scale == 3.0,
           "halving is floored at fp16.min_loss_scale (4 -> 3, hysteresis 1)");
    zt_scaler_state before = ls.s;
    skip = -1;
    rc = zt_scaler_update(&ls, 1, 42, &skip, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "loss scale already at minimum") &&
           strstr(st.msg, "step 42") && strstr(st.msg, "fp16.min_loss_scale") && !strchr(st.msg, '\n'),
           "overflow at the minimum scale: clear error (%s)", st.msg);
    tap_ok(memcmp(&before, &ls.s, sizeof before) == 0, "the failed update leaves the state as it was");
    zt_config_free(c);

    /* with hysteresis, the first overflow at the minimum only counts down */
    const char *kv2[] = {"fp16.initial_scale_power", "0", "fp16.hysteresis", "2", NULL};
    c = fp16_config(kv2);
    zt_scaler_init(&ls, c);
    rc = zt_scaler_update(&ls, 1, 1, &skip, &st);
    int rc2 = zt_scaler_update(&ls, 1, 2, &skip, &st);
    tap_ok(rc == ZT_OK && rc2 == ZT_EDATA, "at minimum with hysteresis 2: first overflow skips, "
           "second fails");
    zt_config_free(c);
}

static void test_scaler_static(void) {
    const char *kv[] = {"fp16.loss_scale", "128", "fp16.loss_scale_window", "1", NULL};
    zt_config *c = fp16_config(kv);
    zt_loss_scaler ls;
    zt_scaler_init(&ls, c);
    zt_status st;
    int skip, bad = 0, nskip = 0;
    for (int i = 0; i < 50; i++) {
        int ov = i % 3 == 0;
        if (zt_scaler_update(&ls, ov, i, &skip, &st) != ZT_OK) bad++;
        nskip += skip;
        if (skip != ov || ls.s.scale != 128.0) bad++;
    }
    tap_ok(!ls.dynamic && bad == 0 && nskip == 17,
           "static scale 128: overflowing steps skipped, scale never changes, never fails");
    zt_config_free(c);
}

/* the dynamic scaler follows DeepSpeed's algorithm step for step */
static void test_scaler_vs_deepspeed(void) {
    static const struct { int power, window, hyst; double minsc; int prob_pct; } cfgs[] = {
        {16, 1000, 2, 1, 1}, {8, 7, 3, 1, 30}, {5, 3, 1, 2, 45}, {12, 1, 2, 1, 50},
        {20, 5, 4, 0.25, 40},
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        char p[16], w[16], h[16], m[32];
        snprintf(p, sizeof p, "%d", cfgs[k].power);
        snprintf(w, sizeof w, "%d", cfgs[k].window);
        snprintf(h, sizeof h, "%d", cfgs[k].hyst);
        snprintf(m, sizeof m, "%g", cfgs[k].minsc);
        const char *kv[] = {"fp16.initial_scale_power", p, "fp16.loss_scale_window", w,
                            "fp16.hysteresis", h, "fp16.min_loss_scale", m, NULL};
        zt_config *c = fp16_config(kv);
        zt_loss_scaler ls;
        zt_scaler_init(&ls, c);
        ds_scaler d = {ldexp(1, cfgs[k].power), cfgs[k].minsc, 2.0, 0, -1, cfgs[k].window,
                       cfgs[k].hyst, cfgs[k].hyst};
        int mismatch = -1, steps = 0, raised = 0;
        zt_status st;
        for (int i = 0; i < 20000; i++) {
            /* bursts: overflow probability alternates between phases */
            int prob = (i / 500) % 2 ? cfgs[k].prob_pct : cfgs[k].prob_pct / 4;
            int ov = (int)(rnd32() % 100) < prob;
            int skip;
            int rc = zt_scaler_update(&ls, ov, i, &skip, &st);
            int dr = ds_update(&d, ov);
            steps++;
            if ((rc != ZT_OK) != dr || (rc == ZT_OK && (skip != ov || ls.s.scale != d.cur_scale ||
                                                        ls.s.hysteresis_left != d.cur_hysteresis))) {
                mismatch = i;
                break;
            }
            if (dr) { raised = 1; break; }
        }
        if (mismatch >= 0) tap_diag("config %zu: differs from DeepSpeed at step %d", k, mismatch);
        tap_ok(mismatch < 0, "dynamic scaler == DeepSpeed's DynamicLossScaler (2^%d, window %d, "
               "hysteresis %d, min %g): %d steps%s", cfgs[k].power, cfgs[k].window, cfgs[k].hyst,
               cfgs[k].minsc, steps, raised ? ", both fail at the minimum" : "");
        zt_config_free(c);
    }
}

static void test_scaler_state(void) {
    zt_config *c = fp16_config(NULL);
    zt_loss_scaler a, b;
    zt_scaler_init(&a, c);
    zt_scaler_init(&b, c);
    zt_status st;
    int skip;
    for (int i = 0; i < 37; i++) zt_scaler_update(&a, i == 5 || i == 6 || i == 20, i, &skip, &st);
    tap_ok(zt_scaler_set_state(&b, &a.s, &st) == ZT_OK && memcmp(&a.s, &b.s, sizeof a.s) == 0,
           "state saves and restores");
    int same = 1;
    for (int i = 0; i < 3000; i++) {
        int ov = (i % 997) == 3;
        int s1, s2;
        zt_scaler_update(&a, ov, i, &s1, &st);
        zt_scaler_update(&b, ov, i, &s2, &st);
        same &= s1 == s2 && memcmp(&a.s, &b.s, sizeof a.s) == 0;
    }
    tap_ok(same, "a restored scaler continues exactly like the original");
    zt_scaler_state bad = a.s;
    bad.scale = 0;
    int r1 = zt_scaler_set_state(&b, &bad, &st);
    bad.scale = NAN;
    int r2 = zt_scaler_set_state(&b, &bad, &st);
    bad = a.s;
    bad.hysteresis_left = 0;
    int r3 = zt_scaler_set_state(&b, &bad, &st);
    bad = a.s;
    bad.good_steps = -1;
    int r4 = zt_scaler_set_state(&b, &bad, &st);
    tap_ok(r1 == ZT_EDATA && r2 == ZT_EDATA && r3 == ZT_EDATA && r4 == ZT_EDATA &&
           memcmp(&a.s, &b.s, sizeof a.s) == 0,
           "corrupt states (scale 0/NaN, hysteresis 0, negative count) are refused");
    zt_config_free(c);
}

static void test_helpers(void) {
    const size_t n = 100000;
    float *g = malloc(n * sizeof *g), *w = malloc(n * sizeof *w);
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) g[i] = (float)((int)(i % 200) - 100) * 1024.0f;
    size_t nf = zt_prec_unscale_check(be, g, n, 1.0f / 1024.0f);
    int exact = 1;
    for (size_t i = 0; i < n; i++) exact &= g[i] == (float)((int)(i % 200) - 100);
    tap_ok(nf == 0 && exact, "unscale_check: unscales in place, no overflow");
    g[77] = INFINITY;
    g[n - 1] = NAN;
    tap_ok(zt_prec_unscale_check(be, g, n, 0.5f) == 2, "unscale_check: counts inf and nan");
    g[77] = 1e38f;
    g[n - 1] = 1.0f;
    tap_ok(zt_prec_unscale_check(be, g, n, 4.0f) == 1,
           "unscale_check: a scale below 1 that pushes values past fp32 range is an overflow");
    int ov = -1;
    zt_status st;
    tap_ok(zt_prec_overflow_any(NULL, 3, &ov, &st) == ZT_OK && ov == 1 &&
           zt_prec_overflow_any(NULL, 0, &ov, &st) == ZT_OK && ov == 0,
           "overflow_any without a group: local count decides");

    for (size_t i = 0; i < n; i++) g[i] = (float)(i % 1000) * 0.001f - 0.5f;
    const zt_precision modes[] = {ZT_PREC_FP32, ZT_PREC_BF16, ZT_PREC_FP16};
    for (int k = 0; k < 3; k++) {
        zt_precision p = modes[k];
        void *dst = p == ZT_PREC_FP32 ? (void *)w : (void *)h;
        zt_prec_narrow(be, p, dst, g, n);
        float *back = malloc(n * sizeof *back);
        zt_prec_widen(be, p, back, dst, n);
        /* half an ulp: 2^-8 (bf16) / 2^-11 (fp16) relative; fp16 subnormals 2^-25 */
        double rel = p == ZT_PREC_FP32 ? 0 : p == ZT_PREC_BF16 ? 0x1p-8 : 0x1p-11;
        double abs_ = p == ZT_PREC_FP16 ? 0x1p-25 : 0;
        int ok = 1;
        for (size_t i = 0; i < n; i++) ok &= fabs((double)back[i] - g[i]) <= rel * fabs(g[i]) + abs_;
        tap_ok(ok && zt_precision_elem_size(p) == (p == ZT_PREC_FP32 ? 4u : 2u),
               "%s: narrow + widen within half an ulp (rel %g), %zu-byte elements",
               zt_precision_name(p), rel, zt_precision_elem_size(p));
        free(back);
    }
    free(g); free(w); free(h);
}

static void test_config_keys(void) {
    zt_config *c = zt_config_new();
    zt_status st;
    tap_ok(strcmp(c->comm_dtype, "fp32") == 0 && zt_comm_dtype_of(c) == ZT_F32,
           "communication_data_type defaults to fp32");
    int rc = zt_config_set(c, "communication_data_type", "bf16", ZT_SRC_FILE, &st);
    tap_ok(rc == ZT_OK && zt_comm_dtype_of(c) == ZT_BF16, "communication_data_type=bf16");
    rc = zt_config_set(c, "--comm-dtype", "FP16", ZT_SRC_FLAG, &st);
    tap_ok(rc == ZT_OK && zt_comm_dtype_of(c) == ZT_F16 && strcmp(c->comm_dtype, "fp16") == 0,
           "flag --comm-dtype (case-insensitive, canonical spelling kept)");
    rc = zt_config_set(c, "communication_data_type", "fp8", ZT_SRC_FLAG, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "communication_data_type") &&
           strstr(st.msg, "fp32, bf16, fp16"), "bad value refused naming the key and the "
           "allowed values (%s)", st.msg);
    zt_config_free(c);
    c = zt_config_new();
    const char *envs[] = {"ZTRAIN_COMMUNICATION_DATA_TYPE", "bf16", NULL};
    struct envset { const char *const *kv; } es = {envs};
    rc = zt_config_load_env_with(c, env_get, &es, &st);
    tap_ok(rc == ZT_OK && zt_comm_dtype_of(c) == ZT_BF16,
           "ZTRAIN_COMMUNICATION_DATA_TYPE sets it");
    zt_config_set(c, "precision", "fp16", ZT_SRC_FLAG, &st);
    tap_ok(zt_precision_of(c) == ZT_PREC_FP16 && zt_precision_dtype(ZT_PREC_FP16) == ZT_F16 &&
           zt_precision_dtype(ZT_PREC_BF16) == ZT_BF16 && zt_precision_dtype(ZT_PREC_FP32) == ZT_F32,
           "precision=fp16 selects fp16 storage");
    zt_config_free(c);
}

void test_scaler_all(void) {
    test_scaler_defaults();
    test_scaler_overflow();
    test_scaler_min();
    test_scaler_static();
    test_scaler_vs_deepspeed();
    test_scaler_state();
    test_helpers();
    test_config_keys();
}

/* ---------------------------------------------------------------- main */

int main(void) {
    be = zt_backend_cpu();
    tap_ok(be->to_bf16 && be->from_bf16 && be->to_f16 && be->from_f16 && be->nonfinite,
           "cpu backend registers the precision entries");
    test_all_patterns("f16", be->to_f16, be->from_f16, ref_f16_value);
    test_all_patterns("bf16", be->to_bf16, be->from_bf16, ref_bf16_value);
    test_midpoints("f16", be->to_f16, ref_f16_value, 0x7c00);
    test_midpoints("bf16", be->to_bf16, ref_bf16_value, 0x7f80);
    test_edges();
    test_random();
    test_parallel();
    test_nonfinite();
    test_scaler_all();
    return tap_done();
}
