/*
 * test_lora.c -- LoRA (libtrain/lora.h) without any reference Python: on a
 * tiny llama (grouped-query, q/k/v biases) and a tiny gpt2, adapters on
 * every linear layer (all-linear) and on a subset:
 *
 *   gradients   the adapters' backward against central finite differences
 *               of the forward loss (directional derivative of every lora_A
 *               and lora_B along a random direction), every lora_B set
 *               non-zero first so that A has a gradient
 *   frozen      after 3 AdamW steps at ZeRO stages 0-3 (fp32) and stage 3
 *               bf16, the base is bitwise what it was, the adapters moved;
 *               the 3 step losses are bitwise equal at stages 0-3
 *   no state    the accounted gradients and AdamW state are the adapters'
 *               alone (4 and 8 bytes per adapter element at stage 0)
 *   planner     zt_memplan_compute's peak of every accounted category and of
 *               the total equals what 3 steps allocate (stages 0-3, fp32 and
 *               bf16, activation checkpointing)
 *   qlora       an NF4 base (nf4, nf4-dq; tied and untied head) at stages 0-3:
 *               the step losses and adapters bitwise those of the run on
 *               its dequantized base (zt_shard_full_params)
 *   errors      r < 0, targets matching no module, an unknown target
 *               module, other keys with r = 0: zt_config_finalize refuses
 *               with one message naming the key
 */
#include <math.h>
#include "ctx.h"
#include "lora.h"
#include "lora_case.h"
#include "memplan.h"
#include "shard.h"
#include "tap.h"
#include "testutil.h"

/* lora_case.h's model at ZeRO stage, fp32 or (bf16) bf16 */
static zt_config *config(const char *arch, const char *targets, int stage, int bf16) {
    zt_config *c = lc_config(arch, targets, stage);
    tu_set(c, "bf16.enabled", "%s", bf16 ? "true" : "false");
    return c;
}

/* Finite differences of every adapter tensor at stage 0, fp32. */
static void gradcheck(const char *arch, const char *targets) {
    char what[96];
    snprintf(what, sizeof what, "%s %s", arch, targets);
    lc_gradcheck(config(arch, targets, 0, 0), what);
}

/* 3 steps at a stage: the base unchanged bitwise, the adapters moved; the
 * step losses into losses[3]; the accounted state checked at stage 0. */
static void train(const char *arch, int stage, int bf16, double *losses) {
    zt_status st;
    zt_config *c = config(arch, "all-linear", stage, bf16);
    zt_ctx *ctx = NULL;
    if (!tap_ok(zt_ctx_create(c, NULL, &ctx, &st) == ZT_OK, "%s stage %d%s: context", arch, stage,
                bf16 ? " bf16" : "")) {
        tap_diag("%s", st.msg);
        zt_config_free(c);
        return;
    }
    const size_t nb = ctx->model->num_params, na = ctx->lmodel->num_params;
    float *before = malloc(nb * sizeof(float)), *abefore = malloc(na * sizeof(float)), *full;
    int owned;
    zt_shard_full_params(ctx->sh, &full, &owned, &st);
    memcpy(before, full, nb * sizeof(float));
    if (owned) zt_mem_free(full);
    zt_shard_full_params(ctx->lsh, &full, &owned, &st);
    memcpy(abefore, full, na * sizeof(float));
    if (owned) zt_mem_free(full);
    if (stage == 0 && !bf16) {
        zt_memory_report r;
        zt_memory(&r);
        tap_ok(r.current[ZT_MEM_GRADS] == na * 4 && r.current[ZT_MEM_OPTIMIZER] == na * 8,
               "%s: accounted gradients %llu B and AdamW state %llu B are the %zu adapter "
               "elements' alone (the base has %zu)", arch,
               (unsigned long long)r.current[ZT_MEM_GRADS],
               (unsigned long long)r.current[ZT_MEM_OPTIMIZER], na, nb);
    }
    zt_data_source src = {NULL, fixed_get, NULL, NULL}, none = {0};
    zt_ctx_set_data(ctx, src, none, &st);
    int ok = 1;
    for (int k = 0; k < 3 && ok; ++k) {
        zt_metrics mt;
        ok = zt_train_step(ctx, &mt, &st) == ZT_OK;
        losses[k] = mt.loss;
    }
    if (!ok) tap_diag("%s", st.msg);
    zt_shard_full_params(ctx->sh, &full, &owned, &st);
    const int same = ok && !memcmp(before, full, nb * sizeof(float));
    if (owned) zt_mem_free(full);
    zt_shard_full_params(ctx->lsh, &full, &owned, &st);
    const int moved = ok && memcmp(abefore, full, na * sizeof(float)) != 0;
    if (owned) zt_mem_free(full);
    tap_ok(same && moved, "%s stage %d%s: 3 steps; the %zu base parameters bitwise unchanged, the "
           "%zu adapter elements moved", arch, stage, bf16 ? " bf16" : "", nb, na);
    free(before);
    free(abefore);
    zt_ctx_free(ctx);
    zt_config_free(c);
}

/* The planner's prediction against the accounted peaks of 3 steps (an NF4
 * base when plan_base is set; plan_no16: with ZT_TEST_NO_NF4W16 set, its
 * bf16 block weights dequantized into the fp32 copy, precision.h). */
static const char *plan_base;
static int plan_no16;
static void plan_exact(const char *arch, int stage, int bf16, int ckpt) {
    zt_status st;
    zt_config *c = config(arch, "q_proj,v_proj,down_proj,c_attn,c_fc", stage, bf16);
    if (plan_base) tu_set(c, "ztrain.lora.base", "%s", plan_base);
    if (!strcmp(arch, "llama")) tu_set(c, "ztrain.lora.targets", "q_proj,v_proj,down_proj");
    else tu_set(c, "ztrain.lora.targets", "c_attn,c_fc");
    if (ckpt) tu_set(c, "activation_checkpointing.policy", "blocks");
    zt_memplan p;
    zt_memplan_opts o;
    zt_memplan_opts_init(&o, 1);
    if (plan_no16) setenv("ZT_TEST_NO_NF4W16", "1", 1);
    int ok = zt_memplan_compute(c, &o, &p, &st) == ZT_OK;
    if (!ok) tap_diag("plan: %s", st.msg);
    zt_mem_reset_peaks();
    zt_ctx *ctx = NULL;
    ok = ok && zt_ctx_create(c, NULL, &ctx, &st) == ZT_OK;
    unsetenv("ZT_TEST_NO_NF4W16");
    zt_data_source src = {NULL, fixed_get, NULL, NULL}, none = {0};
    if (ok) zt_ctx_set_data(ctx, src, none, &st);
    for (int k = 0; ok && k < 3; ++k) {
        zt_metrics mt;
        ok = zt_train_step(ctx, &mt, &st) == ZT_OK;
    }
    if (!ok) tap_diag("%s", st.msg);
    zt_memory_report r;
    zt_memory(&r);
    int same = ok && p.accounted_peak == r.peak_total;
    for (int t = 0; ok && t < ZT_MEM_CATEGORIES; ++t)
        if (p.cat[ZT_MP_HOST][t] != r.peak[t]) {
            same = 0;
            tap_diag("%s: predicted %llu, accounted %llu", r.name[t],
                     (unsigned long long)p.cat[ZT_MP_HOST][t], (unsigned long long)r.peak[t]);
        }
    tap_ok(same, "%s%s%s stage %d%s%s%s: the planner's peaks equal the accounted ones (total %llu B, "
           "predicted %llu B; adapters %llu of %llu parameters)", arch, plan_base ? " " : "",
           plan_base ? plan_base : "", stage, bf16 ? " bf16" : "",
           ckpt ? " checkpointing" : "", plan_no16 ? " ZT_TEST_NO_NF4W16" : "",
           (unsigned long long)r.peak_total,
           (unsigned long long)p.accounted_peak, (unsigned long long)p.lora_params,
           (unsigned long long)p.num_params);
    zt_ctx_free(ctx);
    zt_config_free(c);
}

/* QLoRA: 3 steps on a base stored as NF4 (base = "nf4" / "nf4-dq") or, ref,
 * on a base of the compute dtype set to deq (the NF4 run's dequantized base).
 * Step losses into losses[3], the adapters after the steps into *ad (malloc),
 * the base before the steps into *deq (NF4 run) when deq is not NULL. */
static int q_untied;   /* qrun: an untied LM head (its unit's bf16 rest kept, the fp32 copy
                        * without lm_head: zt_shard_full_params widens the unit whole) */
static int qrun(int stage, int bf16, const char *base, const float *set, double *losses, float **ad,
                float **deq) {
    zt_status st;
    zt_config *c = config("llama", "all-linear", stage, bf16);
    if (q_untied) tu_set(c, "ztrain.model.tie_embeddings", "false");
    if (base) tu_set(c, "ztrain.lora.base", "%s", base);
    zt_ctx *ctx = NULL;
    if (zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) {
        tap_diag("qlora context: %s", st.msg);
        zt_config_free(c);
        return 0;
    }
    const size_t nb = ctx->model->num_params, na = ctx->lmodel->num_params;
    if (set) zt_shard_set_full_params(ctx->sh, set);
    float *full, *before = malloc(nb * sizeof(float));
    int owned, ok = zt_shard_full_params(ctx->sh, &full, &owned, &st) == ZT_OK;
    if (ok) memcpy(before, full, nb * sizeof(float));
    if (ok && owned) zt_mem_free(full);
    if (ok && base && stage == 0 && !bf16) {   /* codes stored, not the fp32 weights */
        zt_memory_report r;
        zt_memory(&r);
        const size_t qb = zt_nf4s_bytes(ctx->sh);
        tap_ok(ctx->sh->q && r.current[ZT_MEM_PARAMS] == qb + na * 4 && qb < nb * 4 / 2, "%s stage 0: the base is stored in %zu bytes (accounted parameters %llu B = "
               "that + the adapters' %zu B; fp32 would be %zu B)", base, qb,
               (unsigned long long)r.current[ZT_MEM_PARAMS], na * 4, nb * 4);
    }
    zt_data_source src = {NULL, fixed_get, NULL, NULL}, none = {0};
    zt_ctx_set_data(ctx, src, none, &st);
    for (int k = 0; k < 3 && ok; ++k) {
        zt_metrics mt;
        ok = zt_train_step(ctx, &mt, &st) == ZT_OK;
        losses[k] = mt.loss;
    }
    if (!ok) tap_diag("%s", st.msg);
    ok = ok && zt_shard_full_params(ctx->sh, &full, &owned, &st) == ZT_OK;
    if (ok) {
        if (memcmp(before, full, nb * sizeof(float))) {
            ok = 0;
            tap_diag("the frozen base changed during training");
        }
        if (owned) zt_mem_free(full);
    }
    *ad = malloc(na * sizeof(float));
    ok = ok && zt_shard_full_params(ctx->lsh, &full, &owned, &st) == ZT_OK;
    if (ok) {
        memcpy(*ad, full, na * sizeof(float));
        if (owned) zt_mem_free(full);
    }
    if (deq) *deq = before;
    else free(before);
    zt_ctx_free(ctx);
    zt_config_free(c);
    return ok ? (int)na : 0;
}

/* An NF4 base equals the dequantized base bitwise: step losses and adapters
 * at stages 0-3 (fp32 and bf16, nf4 and nf4-dq). */
static void qlora(const char *base, int bf16) {
    double l0[3], l[3], lr[3];
    float *ad0 = NULL, *ad = NULL, *adr = NULL, *deq = NULL, *deq1 = NULL;
    int na = qrun(0, bf16, base, NULL, l0, &ad0, &deq);
    int ok = na > 0, stages = ok;
    for (int s = 1; ok && s < 4; ++s) {
        stages &= qrun(s, bf16, base, NULL, l, &ad, NULL) == na && !memcmp(l, l0, sizeof l) &&
                  !memcmp(ad, ad0, (size_t)na * sizeof(float));
        free(ad);
        ad = NULL;
    }
    const char *un = q_untied ? " untied" : "";
    tap_ok(stages, "%s%s%s: the 3 step losses and the adapters bitwise equal at stages 0-3 (%.7f "
           "%.7f %.7f)", base, bf16 ? " bf16" : "", un, l0[0], l0[1], l0[2]);
    /* the reference: the compute-dtype base set to the dequantized values */
    int same = ok && qrun(0, bf16, NULL, deq, lr, &adr, &deq1) == na && !memcmp(lr, l0, sizeof lr) &&
               !memcmp(adr, ad0, (size_t)na * sizeof(float));
    tap_ok(same, "%s%s%s: equal bitwise to the run on its dequantized base (losses %.7f %.7f %.7f)",
           base, bf16 ? " bf16" : "", un, lr[0], lr[1], lr[2]);
    free(ad0); free(adr); free(deq); free(deq1);
}

/* The quantization is real: the dequantized base differs from the base. */
static void qlora_differs(void) {
    double l[3];
    float *a1 = NULL, *a2 = NULL, *d1 = NULL, *d2 = NULL;
    int na = qrun(0, 0, "nf4", NULL, l, &a1, &d1);
    int nb = na ? qrun(0, 0, NULL, NULL, l, &a2, &d2) : 0;
    size_t diff = 0, n = 0;
    zt_status st;
    zt_config *c = config("llama", "all-linear", 0, 0);
    zt_ctx *ctx = NULL;
    if (nb && zt_ctx_create(c, NULL, &ctx, &st) == ZT_OK) {
        n = ctx->model->num_params;
        for (size_t i = 0; i < n; ++i) diff += d1[i] != d2[i];
        zt_ctx_free(ctx);
    }
    zt_config_free(c);
    tap_ok(diff > 0 && diff < n, "nf4: %zu of the %zu base values changed by the quantization "
           "(the linear weights; norms, biases, embeddings and head kept)", diff, n);
    free(a1); free(a2); free(d1); free(d2);
}

static void refuse(const char *what, const char *key, const char *val, const char *want) {
    zt_config *c = config("llama", "q_proj", 0, 0);
    tu_set(c, "ztrain.lora.targets", "%s", "");
    zt_status st;
    memset(&st, 0, sizeof st);
    int rc = zt_config_set(c, key, val, ZT_SRC_FLAG, &st);
    if (rc == ZT_OK) rc = zt_config_finalize(c, 1, &st);
    tap_ok(rc != ZT_OK && strstr(st.msg, want) != NULL, "%s refused: %s", what, st.msg);
    zt_config_free(c);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    lc_tokens();
    gradcheck("llama", "all-linear");
    gradcheck("llama", "k_proj,up_proj");
    gradcheck("gpt2", "all-linear");
    gradcheck("gpt2", "c_proj");
    for (int a = 0; a < 2; ++a) {
        const char *arch = a ? "gpt2" : "llama";
        double l[4][3], lb[3];
        for (int s = 0; s < 4; ++s) train(arch, s, 0, l[s]);
        train(arch, 3, 1, lb);
        int eq = 1;
        for (int s = 1; s < 4; ++s) eq &= !memcmp(l[s], l[0], sizeof l[0]);
        tap_ok(eq, "%s: the 3 step losses bitwise equal at stages 0-3 (%.7f %.7f %.7f)", arch,
               l[0][0], l[0][1], l[0][2]);
    }
    for (int s = 0; s < 4; ++s) plan_exact("llama", s, 0, 0);
    for (int s = 0; s < 4; ++s) plan_exact("llama", s, 1, s == 3);
    plan_exact("gpt2", 1, 0, 0);
    plan_exact("llama", 2, 0, 1);
    plan_exact("gpt2", 3, 1, 1);
    plan_base = "nf4";
    for (int s = 0; s < 4; ++s) plan_exact("llama", s, s == 2, s == 1);
    plan_base = "nf4-dq";
    plan_exact("llama", 3, 1, 1);
    plan_exact("llama", 0, 0, 0);
    plan_base = "nf4";   /* the blocks' NF4 weights dequantized into bf16, and into fp32 */
    plan_exact("llama", 0, 1, 0);
    plan_exact("llama", 3, 1, 0);
    plan_no16 = 1;
    plan_exact("llama", 0, 1, 0);
    plan_exact("llama", 3, 1, 1);
    plan_no16 = 0;
    plan_base = NULL;
    qlora("nf4", 0);
    qlora("nf4", 1);
    qlora("nf4-dq", 0);
    qlora("nf4-dq", 1);
    q_untied = 1;   /* the head's unit: norm in the fp32 copy, lm_head read as bf16 */
    qlora("nf4", 1);
    qlora("nf4-dq", 1);
    q_untied = 0;
    qlora_differs();
    refuse("an unknown base storage", "ztrain.lora.base", "nf8", "one of");
    {
        zt_config *c = config("gpt2", "c_attn", 0, 0);
        tu_set(c, "ztrain.lora.base", "nf4");
        int rc = zt_config_finalize(c, 1, &st);
        tap_ok(rc != ZT_OK && strstr(st.msg, "ztrain.lora.base=nf4") && strstr(st.msg, "gpt2"),
               "nf4 on gpt2 refused: %s", st.msg);
        zt_config_free(c);
        c = config("llama", "", 0, 0);
        tu_set(c, "ztrain.lora.r", "0");
        tu_set(c, "ztrain.lora.alpha", "8");
        tu_set(c, "ztrain.lora.base", "nf4");
        rc = zt_config_finalize(c, 1, &st);
        tap_ok(rc != ZT_OK && strstr(st.msg, "ztrain.lora.base is set"),
               "nf4 without LoRA refused: %s", st.msg);
        zt_config_free(c);
    }
    refuse("r < 0", "ztrain.lora.r", "-1", "ztrain.lora.r");
    refuse("a target matching no module", "ztrain.lora.targets", "c_attn", "matches no module");
    refuse("an unknown module among the targets", "ztrain.lora.targets", "q_proj,qq_proj",
           "'qq_proj' matches no module");
    {
        zt_config *c = config("llama", "q_proj", 0, 0);
        tu_set(c, "ztrain.lora.r", "0");
        int rc = zt_config_finalize(c, 1, &st);
        tap_ok(rc != ZT_OK && strstr(st.msg, "ztrain.lora.alpha is set"),
               "r = 0 with ztrain.lora.alpha given refused: %s", st.msg);
        zt_config_free(c);
    }
    int rc = tap_done();
    zt_finalize();
    return rc;
}
