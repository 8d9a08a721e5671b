/* lora_case.h -- what test_lora.c and test_lora_dropout.c share: the tiny
 * llama and gpt2 with adapters (r 2, alpha 3) on a fixed batch of [B, T]
 * tokens, a data source repeating it, and the check of the adapters'
 * gradients against central finite differences of the training loss. */
#ifndef ZT_TESTS_LORA_CASE_H
#define ZT_TESTS_LORA_CASE_H
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "lora.h"
#include "tap.h"
#include "testutil.h"

enum { B = 2, T = 6 };
static int in_tok[B * T], tg_tok[B * T];

/* the fixed batch: in_tok, tg_tok [B, T] */
static void lc_tokens(void) {
    for (int i = 0; i < B * T; ++i) {
        in_tok[i] = (7 * i + 3) % 13;
        tg_tok[i] = (5 * i + 1) % 13;
    }
}

/* a zt_data_source's get: every batch the fixed one */
static int fixed_get(void *s, long step, uint64_t first, int count, int TT, int *in, int *tg,
                     zt_status *st) {
    (void)s; (void)step; (void)TT; (void)st;
    memcpy(in, in_tok + first * T, sizeof(int) * (size_t)count * T);
    memcpy(tg, tg_tok + first * T, sizeof(int) * (size_t)count * T);
    return ZT_OK;
}

/* 2 layers, 4 heads (llama: 2 kv heads, q/k/v biases), C 16, vocab 13,
 * context T, micro batch B, 3 steps of AdamW at lr 1e-2, no clipping, no
 * schedule, one thread, no data files; adapters on targets at ZeRO stage */
static zt_config *lc_config(const char *arch, const char *targets, int stage) {
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
    return c;
}

/* a context of c, or NULL (a failed check "what: context") */
static zt_ctx *lc_make(zt_config *c, const char *what) {
    zt_status st;
    zt_ctx *ctx = NULL;
    if (!tap_ok(zt_ctx_create(c, NULL, &ctx, &st) == ZT_OK, "%s: context", what)) {
        tap_diag("%s", st.msg);
        return NULL;
    }
    return ctx;
}

/* every lora_B non-zero (so that A matters), the batch in place */
static void lc_prepare(zt_ctx *ctx) {
    zt_model *lm = ctx->lmodel;
    for (int i = 0; i < lm->n_tensors; ++i)
        if (strstr(lm->tensors[i].name, ".lora_B"))
            for (size_t j = 0; j < lm->tensors[i].numel; ++j)
                lm->params[lm->tensors[i].offset + j] = (float)(0.3 * sin(0.9 * (double)j + i));
    memcpy(ctx->acts.inputs, in_tok, sizeof in_tok);
    memcpy(ctx->acts.targets, tg_tok, sizeof tg_tok);
}

/* the mean loss of a forward of the batch in place (training: a training
 * pass); NAN when it fails */
static double lc_loss(zt_ctx *ctx, int training) {
    double s = NAN;
    zt_status st;
    zt_batch_buf *bb = &ctx->acts;
    if (zt_shard_forward(ctx->sh, bb->acts, bb->inputs, bb->targets, B, T, training, &s, &st) !=
        ZT_OK)
        return NAN;
    return s / (B * T);
}

/* Finite differences of every adapter tensor at stage 0 (c: lc_config's,
 * freed): the gradient of one training backward along a unit direction a
 * tensor against central differences of the training loss, 2e-5 + 1e-2
 * relative; the training loss is the same again after the backward (a
 * dropout mask is fixed). */
static void lc_gradcheck(zt_config *c, const char *what) {
    zt_status st;
    zt_ctx *ctx = lc_make(c, what);
    if (!ctx) { zt_config_free(c); return; }
    lc_prepare(ctx);
    zt_model *lm = ctx->lmodel;
    zt_shard_zero_grads(ctx->lsh);
    double l0 = lc_loss(ctx, 1);
    int ok = isfinite(l0) && zt_shard_backward(ctx->sh, ctx->acts.acts, 1.0f / (B * T), &st) == ZT_OK;
    ok = ok && lc_loss(ctx, 1) == l0;
    double worst = 0;
    const double eps = 1e-2;
    for (int i = 0; ok && i < lm->n_tensors; ++i) {
        const zt_tensor_info *t = &lm->tensors[i];
        float *p = lm->params + t->offset;
        const float *g = lm->grads + t->offset;
        /* a unit direction; the parameters restored from a copy */
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
        double lp = lc_loss(ctx, 1);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] - eps * dir[j]);
        double lm2 = lc_loss(ctx, 1);
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

#endif
