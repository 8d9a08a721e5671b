/*
 * lora_ref.c -- ztrain's side of the LoRA check against PEFT
 * (tests/lora_peft.sh, tests/lora_peft.py).
 *
 *   lora_ref FIXTURE_DIR REF_JSON R ALPHA TARGETS RSLORA OUT_JSON
 *
 * Loads a Hugging Face fixture (tests/fixtures/hf) with LoRA adapters of
 * rank R on TARGETS, sets every lora_B to fixed non-zero values (so that A
 * gets a gradient too: PEFT's B = 0 start gives A none), and writes to
 * OUT_JSON: the adapters as PEFT names and shapes them (lora_A [r, in],
 * lora_B [out, r]), the loss of the fixture's batch and the gradients of
 * every adapter, then the losses of 3 AdamW steps on that batch (lr 1e-3,
 * betas 0.9/0.95, eps 1e-8, weight decay 0.1, no clipping, constant lr) and
 * the loss after the third.
 */
#include <stdlib.h>
#include <jansson.h>
#include <math.h>
#include "ctx.h"
#include "lora.h"
#include "testutil.h"
#include "ztrain_ckpt.h"

typedef struct fixed_batch {
    int B, T;
    int *in, *tg;
} fixed_batch;

static int fixed_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    (void)step;
    fixed_batch *f = s;
    if (T != f->T || first + (uint64_t)count > (uint64_t)f->B)
        return zt_fail(st, ZT_EINVAL, "fixed batch: samples out of range");
    memcpy(in, f->in + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    memcpy(tg, f->tg + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    return ZT_OK;
}

/* Tensor t of the adapter model (x: its values) as PEFT's array: lora_B is
 * stored [r, out] and PEFT's is [out, r]. */
static json_t *peft_array(const zt_tensor_info *t, const float *x) {
    const int R = t->shape[0], C = t->shape[1];
    const int isb = strstr(t->name, ".lora_B") != NULL;
    json_t *a = json_array();
    for (int i = 0; i < (isb ? C : R); ++i)
        for (int j = 0; j < (isb ? R : C); ++j)
            json_array_append_new(a, json_real(isb ? x[(size_t)j * C + i] : x[(size_t)i * C + j]));
    return json_pack("{s:[i,i],s:o}", "shape", isb ? C : R, isb ? R : C, "data", a);
}

static int fail(const char *what, const zt_status *st) {
    fprintf(stderr, "lora_ref: %s: %s\n", what, st ? st->msg : "");
    return 1;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) return fail("zt_init", &st);
    if (argc != 8) {
        fprintf(stderr, "usage: lora_ref FIXTURE_DIR REF_JSON R ALPHA TARGETS RSLORA OUT_JSON\n");
        return 2;
    }
    json_error_t je;
    json_t *meta = json_load_file(argv[2], 0, &je);
    if (!meta) return fail(argv[2], NULL);
    const int B = (int)json_integer_value(json_object_get(meta, "B"));
    const int T = (int)json_integer_value(json_object_get(meta, "T"));
    json_t *tok = json_object_get(meta, "tokens");
    int *in = malloc(sizeof(int) * (size_t)(B * T)), *tg = malloc(sizeof(int) * (size_t)(B * T));
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            json_t *row = json_array_get(tok, (size_t)b);
            in[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t));
            tg[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t + 1));
        }
    zt_config *cfg = zt_config_new();
    if (zt_hf_read_config(argv[1], cfg, &st) != ZT_OK) return fail("zt_hf_read_config", &st);
    tu_set(cfg, "train_micro_batch_size_per_gpu", "%d", B);
    tu_set(cfg, "gradient_accumulation_steps", "1");
    tu_set(cfg, "zero_optimization.stage", "0");
    tu_set(cfg, "ztrain.seq_len", "%d", T);
    tu_set(cfg, "optimizer.params.lr", "1e-3");
    tu_set(cfg, "optimizer.params.betas", "[0.9, 0.95]");
    tu_set(cfg, "optimizer.params.eps", "1e-8");
    tu_set(cfg, "optimizer.params.weight_decay", "0.1");
    tu_set(cfg, "gradient_clipping", "0");
    tu_set(cfg, "scheduler.type", "none");
    tu_set(cfg, "ztrain.steps", "3");
    tu_set(cfg, "ztrain.threads", "1");
    tu_set(cfg, "ztrain.backend", "cpu");
    tu_set(cfg, "ztrain.data.train", "%s", "");
    tu_set(cfg, "ztrain.data.val", "%s", "");
    tu_set(cfg, "ztrain.lora.r", "%s", argv[3]);
    tu_set(cfg, "ztrain.lora.alpha", "%s", argv[4]);
    tu_set(cfg, "ztrain.lora.targets", "%s", argv[5]);
    tu_set(cfg, "ztrain.lora.rslora", "%s", argv[6]);
    /* QLoRA (tests/qlora_bnb.sh): the base stored as NF4 */
    if (getenv("ZT_LORA_BASE")) tu_set(cfg, "ztrain.lora.base", "%s", getenv("ZT_LORA_BASE"));
    zt_ctx *ctx = NULL;
    if (zt_ctx_create(cfg, NULL, &ctx, &st) != ZT_OK) return fail("zt_ctx_create", &st);
    if (zt_hf_load(ctx, argv[1], &st) != ZT_OK) return fail("zt_hf_load", &st);
    zt_model *lm = ctx->lmodel;
    if (!lm || !lm->params || !lm->grads) return fail("no stage-0 adapter blocks", NULL);
    /* B = fixed values of the order of A's */
    for (int i = 0; i < lm->n_tensors; ++i) {
        const zt_tensor_info *t = &lm->tensors[i];
        if (!strstr(t->name, ".lora_B")) continue;
        for (size_t j = 0; j < t->numel; ++j)
            lm->params[t->offset + j] = (float)(0.1 * sin(0.37 * (double)j + 1.1 * (double)i));
    }
    json_t *out = json_object(), *ad = json_object(), *gr = json_object();
    char tl[200];
    zt_lora lo;
    if (zt_lora_plan(&ctx->cfg->model, &lo, &st) != ZT_OK) return fail("zt_lora_plan", &st);
    zt_lora_target_list(&lo, tl, sizeof tl);
    json_object_set_new(out, "targets", json_string(tl));
    json_object_set_new(out, "scale", json_real(lo.scale));
    for (int i = 0; i < lm->n_tensors; ++i)
        json_object_set_new(ad, lm->tensors[i].name, peft_array(&lm->tensors[i],
                                                                 lm->params + lm->tensors[i].offset));
    /* forward and backward of the batch (mean loss) */
    zt_batch_buf *bb = &ctx->acts;
    memcpy(zt_batch_host_inputs(bb), in, sizeof(int) * (size_t)(B * T));
    memcpy(zt_batch_host_targets(bb), tg, sizeof(int) * (size_t)(B * T));
    zt_batch_buf_upload(ctx, bb, B * T, B * T);
    zt_shard_zero_grads(ctx->lsh);
    double ls = NAN;
    if (zt_shard_forward(ctx->sh, bb->acts, bb->inputs, bb->targets, B, T, 1, &ls, &st) != ZT_OK)
        return fail("forward", &st);
    if (zt_shard_backward(ctx->sh, bb->acts, 1.0f / (float)(B * T), &st) != ZT_OK)
        return fail("backward", &st);
    json_object_set_new(out, "loss", json_real(ls / (B * T)));
    for (int i = 0; i < lm->n_tensors; ++i)
        json_object_set_new(gr, lm->tensors[i].name, peft_array(&lm->tensors[i],
                                                                 lm->grads + lm->tensors[i].offset));
    json_object_set_new(out, "adapters", ad);
    json_object_set_new(out, "grads", gr);
    /* 3 AdamW steps */
    fixed_batch fb = {B, T, in, tg};
    zt_data_source src = {&fb, fixed_get, NULL, NULL}, none = {0};
    if (zt_ctx_set_data(ctx, src, none, &st) != ZT_OK) return fail("data", &st);
    json_t *sl = json_array();
    for (int k = 0; k < 3; ++k) {
        zt_metrics mt;
        if (zt_train_step(ctx, &mt, &st) != ZT_OK) return fail("step", &st);
        json_array_append_new(sl, json_real(mt.loss));
    }
    json_object_set_new(out, "step_losses", sl);
    double after = NAN;
    if (zt_loss(ctx, in, tg, B, T, &after, &st) != ZT_OK) return fail("zt_loss", &st);
    json_object_set_new(out, "loss_after", json_real(after));
    if (json_dump_file(out, argv[7], JSON_REAL_PRECISION(17))) return fail(argv[7], NULL);
    json_decref(out);
    json_decref(meta);
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    free(in);
    free(tg);
    zt_finalize();
    return 0;
}
