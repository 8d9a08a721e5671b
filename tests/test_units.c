/*
 * test_units.c -- the public unit API from a model's side, on a one-process
 * engine: layout validation, declarative initialization, and the engine's
 * answers to misuse (each a clear error, never a crash).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "shard.h"
#include "tap.h"

/* A toy model: unit "a" = w [4, 3] (normal 0.5) + g [4] (ones),
 * unit "b" = v [5] (zeros).  loss = sum(w) + sum(g) + sum(v) per position;
 * what forward/backward do wrong is chosen by `mode`. */
enum { OK_MODEL, TENSOR_FIRST, DUP_NAME, EMPTY_UNIT, BAD_SHAPE, LONG_NAME, NO_UNITS };
enum { RUN_OK, PARAMS_BAD_UNIT, GRADS_IN_FWD, SKIP_DONE, DONE_TWICE };
typedef struct toy { int layout, run; size_t off_w, off_g, off_v; } toy;

static int toy_describe(void *self, zt_layout *L, zt_status *st) {
    toy *t = self;
    switch (t->layout) {
    case TENSOR_FIRST: return zt_layout_tensor(L, "w", 4, 3, ZT_INIT_ZEROS, 0, 0, NULL, st);
    case NO_UNITS: return ZT_OK;
    default: break;
    }
    ZT_TRY(zt_layout_unit(L, "a", st));
    if (t->layout == EMPTY_UNIT) return zt_layout_unit(L, "b", st);
    if (t->layout == LONG_NAME)
        return zt_layout_tensor(L, "a_tensor_name_that_is_far_too_long_for_the_table", 1, 1,
                                ZT_INIT_ZEROS, 0, 0, NULL, st);
    ZT_TRY(zt_layout_tensor(L, "w", 4, t->layout == BAD_SHAPE ? 0 : 3, ZT_INIT_NORMAL, 0.5,
                            ZT_TENSOR_DECAY, &t->off_w, st));
    ZT_TRY(zt_layout_tensor(L, t->layout == DUP_NAME ? "w" : "g", 4, 1, ZT_INIT_ONES, 0, 0,
                            &t->off_g, st));
    ZT_TRY(zt_layout_unit(L, "b", st));
    return zt_layout_tensor(L, "v", 5, 1, ZT_INIT_ZEROS, 0, 0, &t->off_v, st);
}
static int toy_acts_create(void *self, int B, int T, int training, int cat, void **out,
                           zt_status *st) {
    (void)self; (void)training;
    *out = zt_alloc((size_t)B * T * sizeof(float), cat, st);
    return *out ? ZT_OK : st->code;
}
static void toy_acts_free(void *self, void *a) { (void)self; zt_free(a); }

static int toy_forward(void *self, zt_units *U, void *acts, const int *in, const int *tg,
                       int B, int T, double *loss, zt_status *st) {
    toy *t = self;
    (void)acts; (void)in; (void)tg;
    if (t->run == PARAMS_BAD_UNIT) return zt_unit_params(U, 7, st) ? ZT_OK : st->code;
    if (t->run == GRADS_IN_FWD) return zt_unit_grads(U, 0, st) ? ZT_OK : st->code;
    double s = 0;
    for (int u = 0; u < zt_units_count(U); ++u) {
        float *p = zt_unit_params(U, u, st);
        if (!p) return st->code;
        for (size_t i = 0; i < zt_unit_numel(U, u); ++i) s += p[i];
        ZT_TRY(zt_unit_release(U, u, st));
    }
    *loss = s * B * T;
    return ZT_OK;
}
static int toy_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    toy *t = self;
    (void)acts;
    for (int u = zt_units_count(U) - 1; u >= 0; --u) {
        float *g = zt_unit_grads(U, u, st);
        if (!g) return st->code;
        for (size_t i = 0; i < zt_unit_numel(U, u); ++i) g[i] += dloss;
        if (t->run == SKIP_DONE && u == 1) continue;
        ZT_TRY(zt_unit_grads_done(U, u, st));
        if (t->run == DONE_TWICE) ZT_TRY(zt_unit_grads_done(U, u, st));
    }
    return ZT_OK;
}
static const zt_model_ops toy_ops = {"toy", toy_describe, toy_acts_create, toy_acts_free,
                                     toy_forward, toy_backward, NULL, NULL};

static zt_model_config mc = {.n_layer = 1, .n_head = 1, .n_embd = 1, .context = 4, .vocab = 8};

static int make(toy *t, zt_model **m, zt_shard **sh, zt_status *st) {
    *sh = NULL;
    ZT_TRY(zt_model_create(&toy_ops, t, &mc, zt_backend_cpu(), ZT_MODEL_PARAMS | ZT_MODEL_GRADS, m, st));
    int rc = zt_shard_create(*m, 0, 1, NULL, sh, st);
    if (rc != ZT_OK) zt_model_free(*m, 0);
    return rc;
}

static void layout_case(int mode, const char *want, const char *what) {
    toy t = {mode, RUN_OK, 0, 0, 0};
    zt_model *m = NULL;
    zt_status st = {0, ""};
    int rc = zt_model_create(&toy_ops, &t, &mc, zt_backend_cpu(), 0, &m, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, want) && strstr(st.msg, "model 'toy'"),
           "%s is refused: %s", what, st.msg);
    if (rc == ZT_OK) zt_model_free(m, 0);
}

/* one forward + backward on the toy with run mode `run`; returns rc */
static int run_case(int run, zt_status *st, float *g0) {
    toy t = {OK_MODEL, run, 0, 0, 0};
    zt_model *m;
    zt_shard *sh;
    int rc = make(&t, &m, &sh, st);
    if (rc != ZT_OK) return rc;
    int in[4] = {0}, tg[4] = {0};
    void *a;
    double loss;
    toy_acts_create(&t, 1, 4, 1, ZT_MEM_ACTIVATIONS, &a, st);
    zt_shard_zero_grads(sh);
    rc = zt_shard_forward(sh, a, in, tg, 1, 4, 1, &loss, st);
    if (rc == ZT_OK) rc = zt_shard_backward(sh, a, 0.25f, st);
    if (rc == ZT_OK && g0) {
        rc = zt_shard_forward(sh, a, in, tg, 1, 4, 1, &loss, st);
        if (rc == ZT_OK) rc = zt_shard_backward(sh, a, 0.25f, st);
        *g0 = m->grads[0];
    }
    toy_acts_free(&t, a);
    zt_shard_free(sh);
    zt_model_free(m, 0);
    return rc;
}

int main(void) {
    zt_status st;
    /* ---- layout ---- */
    layout_case(TENSOR_FIRST, "before any zt_layout_unit", "a tensor before any unit");
    layout_case(DUP_NAME, "used twice", "a duplicate tensor name");
    layout_case(EMPTY_UNIT, "has no tensors", "an empty unit");
    layout_case(BAD_SHAPE, "must be positive", "a zero dimension");
    layout_case(LONG_NAME, "characters", "an over-long name");
    layout_case(NO_UNITS, "listed no units", "a model without units");

    toy t = {OK_MODEL, RUN_OK, 0, 0, 0};
    zt_model *m;
    zt_shard *sh;
    int rc = make(&t, &m, &sh, &st);
    tap_ok(rc == ZT_OK && m->n_units == 2 && m->n_tensors == 3 && m->num_params == 21 &&
           m->units[1].offset == 16 && t.off_g == 12 && t.off_v == 0,
           "layout: 2 units, 3 tensors, 21 elements, offsets inside units");
    tap_ok(m->tensors[0].decay && !m->tensors[1].decay && m->tensors[0].ndim == 2 &&
           m->tensors[1].ndim == 1, "decay flag and rank recorded per tensor");

    /* ---- initialization: declarative and a pure function of the element ---- */
    zt_shard_init_params(sh, 42);
    int ones = 1, zeros = 1;
    for (int i = 12; i < 16; ++i) ones &= m->params[i] == 1.0f;
    for (int i = 16; i < 21; ++i) zeros &= m->params[i] == 0.0f;
    tap_ok(ones && zeros, "ONES and ZEROS initializations");
    float part[21];
    zt_model_init_range(m, 42, 5, 21, part);
    tap_ok(!memcmp(part, m->params + 5, 16 * sizeof(float)),
           "initializing a slice gives the same values as the whole block");
    zt_model_init_range(m, 43, 0, 12, part);
    tap_ok(memcmp(part, m->params, 12 * sizeof(float)) != 0, "another seed, other values");
    zt_shard_free(sh);
    zt_model_free(m, 0);
    {   /* the normal init has the declared spread */
        size_t n = 20000;
        float *buf = malloc(n * sizeof(float));
        zt_model mm;
        memset(&mm, 0, sizeof mm);
        zt_tensor_info ti;
        memset(&ti, 0, sizeof ti);
        strcpy(ti.name, "x");
        ti.numel = n;
        ti.init = ZT_INIT_NORMAL;
        ti.init_std = 0.5;
        mm.tensors = &ti;
        mm.n_tensors = 1;
        zt_model_init_range(&mm, 1, 0, n, buf);
        double s = 0, s2 = 0;
        for (size_t i = 0; i < n; ++i) { s += buf[i]; s2 += (double)buf[i] * buf[i]; }
        double mean = s / n, sd = sqrt(s2 / n - mean * mean);
        tap_ok(fabs(mean) < 0.02 && fabs(sd - 0.5) < 0.02, "NORMAL init: mean %.4f, std %.4f (0.5 declared)", mean, sd);
        free(buf);
    }

    /* ---- the engine's answers ---- */
    float g0 = 0;
    rc = run_case(RUN_OK, &st, &g0);
    tap_ok(rc == ZT_OK && g0 == 0.5f, "forward/backward through the units; gradients accumulate (%g)", g0);
    rc = run_case(PARAMS_BAD_UNIT, &st, NULL);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "unit 7 out of range"), "unit out of range: %s", st.msg);
    rc = run_case(GRADS_IN_FWD, &st, NULL);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "only in backward"), "gradients in forward: %s", st.msg);
    rc = run_case(SKIP_DONE, &st, NULL);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "without zt_unit_grads_done for unit b"),
           "a unit never handed back: %s", st.msg);
    rc = run_case(DONE_TWICE, &st, NULL);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "without zt_unit_grads"), "grads_done twice: %s", st.msg);
    {
        toy t2 = {OK_MODEL, RUN_OK, 0, 0, 0};
        zt_model *m2;
        zt_shard *sh2;
        make(&t2, &m2, &sh2, &st);
        float *p = zt_unit_params(sh2, 0, &st);
        tap_ok(!p && st.code == ZT_EINVAL && strstr(st.msg, "outside forward/backward"),
               "parameters outside a pass: %s", st.msg);
        zt_shard_free(sh2);
        zt_model_free(m2, 0);
    }
    zt_model *m3 = NULL;
    zt_model_ops partial = toy_ops;
    partial.backward = NULL;
    rc = zt_model_create(&partial, &t, &mc, zt_backend_cpu(), 0, &m3, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "backward"), "incomplete operations: %s", st.msg);
    return tap_done();
}
