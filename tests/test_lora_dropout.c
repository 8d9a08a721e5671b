/*
 * test_lora_dropout.c -- LoRA dropout (ztrain.lora.dropout, lora.h's
 * zt_lora_drop; PEFT's lora_dropout: y = W x + s B A dropout(x), inverted,
 * one mask per module, training passes only) on a tiny llama and gpt2:
 *
 *   backend     the dropout op keeps a fraction near 1 - p (within 5 sigma),
 *               each kept value is x / (1 - p), the rest 0; the mask does not
 *               depend on how the rows are split (row0), and another key
 *               gives another mask
 *   gradients   with p = 0.3 the adapters' backward equals central finite
 *               differences of the training forward (the mask is a pure
 *               function of seed, step, sample, block and module: fixed)
 *   active      the training loss with dropout differs from the one without;
 *               an evaluation forward (training = 0) is bitwise that of p = 0
 *   stages      3 steps: the step losses bitwise equal at ZeRO stages 0-3,
 *               and with activation checkpointing (the recompute regenerates
 *               the same mask)
 */
#include <math.h>
#include "ctx.h"
#include "lora.h"
#include "lora_case.h"
#include "tap.h"
#include "testutil.h"

/* lora_case.h's model at ZeRO stage with dropout p (0: none) */
static zt_config *config(const char *arch, const char *targets, int stage, double p) {
    zt_config *c = lc_config(arch, targets, stage);
    if (p > 0) tu_set(c, "ztrain.lora.dropout", "%g", p);
    return c;
}

static void backend_op(void) {
    const zt_backend *be = zt_backend_cpu();
    enum { R = 500, C = 200, N = R * C };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)),
          *z = malloc(N * sizeof(float)), *w = malloc(N * sizeof(float));
    for (int i = 0; i < N; ++i) x[i] = (float)(1.0 + 0.001 * (i % 977));
    const float ps[3] = {0.1f, 0.25f, 0.6f};
    for (int k = 0; k < 3; ++k) {
        const float p = ps[k], s = (float)(1.0 / (1.0 - (double)p));
        be->dropout(y, x, R, C, 12345, 70, p);
        size_t kept = 0, bad = 0;
        for (int i = 0; i < N; ++i) {
            if (y[i] != 0.0f) {
                kept++;
                bad += y[i] != x[i] * s;
            }
        }
        const double f = (double)kept / N, sd = sqrt((double)p * (1 - p) / N);
        tap_ok(fabs(f - (1 - p)) <= 5 * sd && !bad, "dropout p=%.2f: kept fraction %.4f (1-p = "
               "%.2f, 5 sigma %.4f), every kept value x / (1 - p)", p, f, 1 - p, 5 * sd);
        /* the rows in two calls at their global rows: bitwise the same */
        be->dropout(z, x, 123, C, 12345, 70, p);
        be->dropout(z + 123 * C, x + 123 * C, R - 123, C, 12345, 70 + 123, p);
        memcpy(w, x, N * sizeof(float));
        be->dropout(w, w, R, C, 12345, 70, p);   /* in place */
        int split = !memcmp(y, z, N * sizeof(float)) && !memcmp(y, w, N * sizeof(float));
        be->dropout(z, x, R, C, 12346, 70, p);
        size_t same = 0;
        for (int i = 0; i < N; ++i) same += (y[i] == 0) == (z[i] == 0);
        /* two independent masks agree on p^2 + (1-p)^2 of the elements */
        const double agree = (double)same / N, want = p * p + (1 - p) * (1 - p);
        tap_ok(split && fabs(agree - want) < 0.01, "dropout p=%.2f: split rows and in place "
               "bitwise the same; another key agrees on %.4f of the mask (independent: %.4f)",
               p, agree, want);
    }
    free(x); free(y); free(z); free(w);
}

/* Finite differences of every adapter tensor with dropout on (the mask
 * the same again: the training loss after the backward bitwise the same). */
static void gradcheck(const char *arch, const char *targets) {
    char what[96];
    snprintf(what, sizeof what, "%s %s p=0.3", arch, targets);
    lc_gradcheck(config(arch, targets, 0, 0.3), what);
}

/* Training forward differs from p = 0, evaluation forward bitwise equal. */
static void active_and_eval(const char *arch) {
    zt_config *c0 = config(arch, "all-linear", 0, 0), *c1 = config(arch, "all-linear", 0, 0.3);
    zt_ctx *a = lc_make(c0, "p=0"), *b = lc_make(c1, "p=0.3");
    if (a && b) {
        lc_prepare(a);
        lc_prepare(b);
        const double t0 = lc_loss(a, 1), t1 = lc_loss(b, 1), e0 = lc_loss(a, 0), e1 = lc_loss(b, 0);
        tap_ok(isfinite(t1) && t1 != t0, "%s: the training loss with dropout 0.3 (%.7f) differs "
               "from p = 0 (%.7f)", arch, t1, t0);
        tap_ok(isfinite(e1) && e1 == e0 && e0 == t0, "%s: the evaluation loss with dropout 0.3 "
               "(%.9f) is bitwise that of p = 0 (%.9f)", arch, e1, e0);
    }
    if (a) zt_ctx_free(a);
    if (b) zt_ctx_free(b);
    zt_config_free(c0);
    zt_config_free(c1);
}

static int train(const char *arch, int stage, int ckpt, double p, double *losses) {
    zt_status st;
    zt_config *c = config(arch, "all-linear", stage, p);
    if (ckpt) tu_set(c, "activation_checkpointing.policy", "blocks");
    zt_ctx *ctx = lc_make(c, arch);
    int ok = ctx != NULL;
    zt_data_source src = {NULL, fixed_get, NULL, NULL}, none = {0};
    if (ok) zt_ctx_set_data(ctx, src, none, &st);
    for (int k = 0; k < 3 && ok; ++k) {
        zt_metrics mt;
        ok = zt_train_step(ctx, &mt, &st) == ZT_OK;
        if (!ok) tap_diag("%s", st.msg);
        losses[k] = mt.loss;
    }
    if (ctx) zt_ctx_free(ctx);
    zt_config_free(c);
    return ok;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    lc_tokens();
    backend_op();
    gradcheck("llama", "all-linear");
    gradcheck("llama", "k_proj,v_proj,up_proj");
    gradcheck("gpt2", "all-linear");
    active_and_eval("llama");
    active_and_eval("gpt2");
    for (int a = 0; a < 2; ++a) {
        const char *arch = a ? "gpt2" : "llama";
        double l[4][3], lc[3], l0[3];
        int ok = 1;
        for (int s = 0; s < 4; ++s) ok &= train(arch, s, 0, 0.2, l[s]);
        ok &= train(arch, 3, 1, 0.2, lc) && train(arch, 0, 0, 0, l0);
        int eq = ok;
        for (int s = 1; s < 4; ++s) eq &= !memcmp(l[s], l[0], sizeof l[0]);
        tap_ok(eq && l[0][1] != l0[1], "%s, dropout 0.2: the 3 step losses bitwise equal at "
               "stages 0-3 (%.7f %.7f %.7f; p = 0: %.7f %.7f %.7f)", arch, l[0][0], l[0][1],
               l[0][2], l0[0], l0[1], l0[2]);
        tap_ok(ok && !memcmp(lc, l[0], sizeof lc), "%s, dropout 0.2: stage 3 with activation "
               "checkpointing bitwise the same losses", arch);
    }
    int rc = tap_done();
    zt_finalize();
    return rc;
}
