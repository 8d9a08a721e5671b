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
#include "tap.h"
#include "testutil.h"

enum { B = 2, T = 6 };
static int in_tok[B * T], tg_tok[B * T];

static int fixed_get(void *s, long step, uint64_t first, int count, int TT, int *in, int *tg,
                     zt_status *st) {
    (void)s; (void)step; (void)TT; (void)st;
    memcpy(in, in_tok + first * T, sizeof(int) * (size_t)count * T);
    memcpy(tg, tg_tok + first * T, sizeof(int) * (size_t)count * T);
    return ZT_OK;
}

static zt_config *config(const char *arch, const char *targets, int stage, double p) {
    zt_config *c = zt_config_new();
    tu_set(c, "ztrain.model.arch", "%s", arch);
    tu_set(c, "ztrain.model.n_layer", "2");
    tu_set(c, "ztrain.model.n_head", "4");
    tu_set(c, "ztrain.model.n_embd", "16");
    tu_set(c, "ztrain.model.context", "%d", T);
    tu_set(c, "ztrain.model.vocab", "13");
    if (!strcmp(arch, "llama")) {
        tu_set(c, "ztrain.model.n_kv_head", "2");
        tu_set(c, "ztrain.model.intermediate_size", "24");
        tu_set(c, "ztrain.model.attention_bias", "true");
    }
    tu_set(c, "train_micro_batch_size_per_gpu", "%d", B);
    tu_set(c, "gradient_accumulation_steps", "1");
    tu_set(c, "zero_optimization.stage", "%d", stage);
    tu_set(c, "gradient_clipping", "0");
    tu_set(c, "scheduler.type", "none");
    tu_set(c, "optimizer.params.lr", "1e-2");
    tu_set(c, "ztrain.steps", "3");
    tu_set(c, "ztrain.threads", "1");
    tu_set(c, "ztrain.data.train", "%s", "");
    tu_set(c, "ztrain.data.val", "%s", "");
    tu_set(c, "ztrain.lora.r", "2");
    tu_set(c, "ztrain.lora.alpha", "3");
    tu_set(c, "ztrain.lora.targets", "%s", targets);
    if (p > 0) tu_set(c, "ztrain.lora.dropout", "%g", p);
    return c;
}

static zt_ctx *make(zt_config *c, const char *what) {
    zt_status st;
    zt_ctx *ctx = NULL;
    if (!tap_ok(zt_ctx_create(c, NULL, &ctx, &st) == ZT_OK, "%s: context", what)) {
        tap_diag("%s", st.msg);
        return NULL;
    }
    return ctx;
}

/* every lora_B non-zero (so that A matters), the batch in place */
static void prepare(zt_ctx *ctx) {
    zt_model *lm = ctx->lmodel;
    for (int i = 0; i < lm->n_tensors; ++i)
        if (strstr(lm->tensors[i].name, ".lora_B"))
            for (size_t j = 0; j < lm->tensors[i].numel; ++j)
                lm->params[lm->tensors[i].offset + j] = (float)(0.3 * sin(0.9 * (double)j + i));
    memcpy(ctx->acts.inputs, in_tok, sizeof in_tok);
    memcpy(ctx->acts.targets, tg_tok, sizeof tg_tok);
}

static double loss_of(zt_ctx *ctx, int training) {
    double s = NAN;
    zt_status st;
    zt_batch_buf *bb = &ctx->acts;
    if (zt_shard_forward(ctx->sh, bb->acts, bb->inputs, bb->targets, B, T, training, &s, &st) !=
        ZT_OK)
        return NAN;
    return s / (B * T);
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

/* Finite differences of every adapter tensor with dropout on. */
static void gradcheck(const char *arch, const char *targets) {
    zt_status st;
    char what[96];
    snprintf(what, sizeof what, "%s %s p=0.3", arch, targets);
    zt_config *c = config(arch, targets, 0, 0.3);
    zt_ctx *ctx = make(c, what);
    if (!ctx) { zt_config_free(c); return; }
    prepare(ctx);
    zt_model *lm = ctx->lmodel;
    zt_shard_zero_grads(ctx->lsh);
    double l0 = loss_of(ctx, 1);
    int ok = isfinite(l0) && zt_shard_backward(ctx->sh, ctx->acts.acts, 1.0f / (B * T), &st) == ZT_OK;
    ok = ok && loss_of(ctx, 1) == l0;   /* the same mask again */
    double worst = 0;
    const double eps = 1e-2;
    for (int i = 0; ok && i < lm->n_tensors; ++i) {
        const zt_tensor_info *t = &lm->tensors[i];
        float *p = lm->params + t->offset;
        const float *g = lm->grads + t->offset;
        double an = 0, *dir = malloc(t->numel * sizeof(double)), nrm = 0;
        float *save = malloc(t->numel * sizeof(float));
        memcpy(save, p, t->numel * sizeof(float));
        for (size_t j = 0; j < t->numel; ++j) {
            dir[j] = sin(2.3 * (double)j + 0.7 * i);
            nrm += dir[j] * dir[j];
        }
        for (size_t j = 0; j < t->numel; ++j) {
            dir[j] /= sqrt(nrm);
            an += dir[j] * g[j];
        }
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] + eps * dir[j]);
        double lp = loss_of(ctx, 1);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] - eps * dir[j]);
        double lm2 = loss_of(ctx, 1);
        memcpy(p, save, t->numel * sizeof(float));
        const double fd = (lp - lm2) / (2.0 * eps), err = fabs(fd - an);
        if (!(err <= 2e-5 + 1e-2 * fabs(an))) {
            ok = 0;
            tap_diag("%s: %s: backward %.6g, finite differences %.6g", what, t->name, an, fd);
        }
        if (err / fmax(fabs(an), 1e-3) > worst) worst = err / fmax(fabs(an), 1e-3);
        free(dir);
        free(save);
    }
    tap_ok(ok && lm->n_tensors > 0, "%s: gradients of all %d adapter tensors equal finite "
           "differences (2e-5 + 1e-2 relative, worst %.2e)", what, lm->n_tensors, worst);
    zt_ctx_free(ctx);
    zt_config_free(c);
}

/* Training forward differs from p = 0, evaluation forward bitwise equal. */
static void active_and_eval(const char *arch) {
    zt_config *c0 = config(arch, "all-linear", 0, 0), *c1 = config(arch, "all-linear", 0, 0.3);
    zt_ctx *a = make(c0, "p=0"), *b = make(c1, "p=0.3");
    if (a && b) {
        prepare(a);
        prepare(b);
        const double t0 = loss_of(a, 1), t1 = loss_of(b, 1), e0 = loss_of(a, 0), e1 = loss_of(b, 0);
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
    zt_ctx *ctx = make(c, arch);
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
    for (int i = 0; i < B * T; ++i) {
        in_tok[i] = (7 * i + 3) % 13;
        tg_tok[i] = (5 * i + 1) % 13;
    }
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
