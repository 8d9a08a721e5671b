/*
 * test_hf_moe.c -- ztrain's Mixture of Experts against transformers 5.24 on
 * the tiny models of tests/fixtures/hf (scripts/make_hf_fixtures.py; no
 * Python here): mixtral (4 experts, top-2 renormalised, untied; the hub's
 * per-expert block_sparse_moe.experts.E.w1/w3/w2), mixtral_packed (the
 * same weights in transformers 5's packed experts.gate_up_proj [E, 2I, C] /
 * down_proj [E, C, I]), qwen2_moe (q/k/v biases, top-2 not renormalised, a
 * shared expert behind its sigmoid gate), qwen3_moe (per-head q/k norms,
 * renormalised, tied), olmoe (q/k norms over the whole projection, not
 * renormalised), mixtral_aux (output_router_logits: 0.05 x the
 * routers' load-balancing loss in the objective, so in every gradient).
 * Each step's load-balancing loss (zt_metrics.aux_loss) is transformers'
 * load_balancing_loss_func's.  For each, on one rank, CPU backend: config.json
 * read, the weights loaded, the loss and log-softmax of a fixed batch and
 * every parameter's gradient against transformers' (by its transformers 5
 * name) at ZeRO stage 0, and the losses of 3 AdamW steps at stages 0-3.  A wrong
 * split of the experts' tensors (gate and up exchanged, an expert's rows
 * misplaced) misses the loss by far more than the tolerance, a file tensor
 * of the wrong shape is refused; DeepSeek and gpt-oss are refused by name.
 * Mixed dense and sparse blocks: qwen2_moe_mixed (decoder_sparse_step 2, the
 * load-balancing loss in the objective; and packed), qwen3_moe_mixed
 * (mlp_only_layers [0]); layouts the model cannot have are refused.  LoRA on
 * these models: attention and Qwen2-MoE's shared expert accepted, the
 * experts / routers / all-linear / a 4-bit base refused naming them (PEFT's
 * numbers: tests/lora_peft.sh).
 * Tolerances as test_hf_golden's.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include "ctx.h"
#include "tap.h"
#include "testutil.h"
#include "ztrain_ckpt.h"
#include "safetensors.h"

#define TOL_LOGPROB 3e-5
#define TOL_LOSS 5e-6
#define TOL_GRAD 2e-5
#define TOL_STEP 1e-5

typedef struct fixed_batch { int B, T; const int *in, *tg; } fixed_batch;
static int fixed_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    (void)step;
    const fixed_batch *f = s;
    if (T != f->T || first + (uint64_t)count > (uint64_t)f->B)
        return zt_fail(st, ZT_EINVAL, "fixed batch: samples %llu + %d of length %d",
                       (unsigned long long)first, count, T);
    memcpy(in, f->in + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    memcpy(tg, f->tg + first * (uint64_t)T, sizeof(int) * (size_t)count * (size_t)T);
    return ZT_OK;
}

/* transformers 5's name of our tensor (written here from the layout
 * contract, llama.h / moe.h, independently of the loader) */
static void hf_of(const char *ours, unsigned dense, char *out, size_t n) {
    static const struct { const char *o, *h; } blk[] = {
        {"attn_norm.w", "input_layernorm.weight"}, {"q.w", "self_attn.q_proj.weight"},
        {"k.w", "self_attn.k_proj.weight"}, {"v.w", "self_attn.v_proj.weight"},
        {"q.b", "self_attn.q_proj.bias"}, {"k.b", "self_attn.k_proj.bias"},
        {"v.b", "self_attn.v_proj.bias"}, {"q_norm.w", "self_attn.q_norm.weight"},
        {"k_norm.w", "self_attn.k_norm.weight"}, {"o.w", "self_attn.o_proj.weight"},
        {"mlp_norm.w", "post_attention_layernorm.weight"}, {"router.w", "mlp.gate.weight"},
        {"experts.gate_up.w", "mlp.experts.gate_up_proj"}, {"experts.down.w", "mlp.experts.down_proj"},
        {"shared_gate.w", "mlp.shared_expert_gate.weight"},
        {"gate.w", "mlp.shared_expert.gate_proj.weight"}, {"up.w", "mlp.shared_expert.up_proj.weight"},
        {"down.w", "mlp.shared_expert.down_proj.weight"},
    };
    int l, used = 0;
    snprintf(out, n, "?%s", ours);
    if (!strcmp(ours, "embed.w")) snprintf(out, n, "model.embed_tokens.weight");
    else if (!strcmp(ours, "norm.w")) snprintf(out, n, "model.norm.weight");
    else if (!strcmp(ours, "lm_head.w")) snprintf(out, n, "lm_head.weight");
    else if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used)
        for (size_t i = 0; i < sizeof blk / sizeof blk[0]; ++i)
            if (!strcmp(ours + used, blk[i].o)) snprintf(out, n, "model.layers.%d.%s", l, blk[i].h);
    /* a dense block (mixed models: bit l of dense) has Qwen-MoE's plain MLP */
    if (sscanf(ours, "h%d.%n", &l, &used) == 1 && used && (dense >> l & 1u) &&
        (!strcmp(ours + used, "gate.w") || !strcmp(ours + used, "up.w") ||
         !strcmp(ours + used, "down.w")))
        snprintf(out, n, "model.layers.%d.mlp.%.*s_proj.weight", l,
                 (int)(strlen(ours + used) - 2), ours + used);
}

static double jnum(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static void run_mixed(const char *root, const char *name, const char *ref_name, int stage, int E,
                      int K, int I, int shared, int norm, double coef, unsigned dense) {
    char dir[768], path[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    zt_status st;
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    zt_st_file ref;
    int have_ref = 0;
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s.ref.json", root, ref_name);
    json_t *meta = json_load_file(path, 0, &je);
    snprintf(path, sizeof path, "%s/%s.ref.safetensors", root, ref_name);
    have_ref = zt_st_open(path, &ref, &st) == ZT_OK;
    const int B = (int)json_integer_value(json_object_get(meta, "B"));
    const int T = (int)json_integer_value(json_object_get(meta, "T"));
    const int V = (int)json_integer_value(json_object_get(meta, "vocab"));
    int *in = calloc((size_t)(B * T) + 1, sizeof(int)), *tg = calloc((size_t)(B * T) + 1, sizeof(int));
    if (!tap_ok(meta && have_ref && B > 0, "%s (stage %d): reference readable", name, stage)) goto out;
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            json_t *row = json_array_get(json_object_get(meta, "tokens"), (size_t)b);
            in[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t));
            tg[b * T + t] = (int)json_integer_value(json_array_get(row, (size_t)t + 1));
        }
    if (!tap_ok(zt_hf_read_config(dir, cfg, &st) == ZT_OK, "%s: zt_hf_read_config", name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    tu_set(cfg, "train_micro_batch_size_per_gpu", "%d", B);
    tu_set(cfg, "gradient_accumulation_steps", "1");
    tu_set(cfg, "zero_optimization.stage", "%d", stage);
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
    if (!tap_ok(zt_ctx_create(cfg, NULL, &ctx, &st) == ZT_OK, "%s: context created", name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    const zt_model_config *mc = &zt_ctx_config(ctx)->model;
    tap_ok(mc->n_experts == E && mc->experts_per_token == K && mc->moe_intermediate == I &&
           mc->shared_expert == shared && !!mc->moe_norm_topk == norm &&
           mc->router_aux_loss_coef == coef,
           "%s: config.json -> %d experts, top-%d, width %d, shared %d, renormalised %d, "
           "load-balancing loss coefficient %g", name, mc->n_experts, mc->experts_per_token,
           mc->moe_intermediate, mc->shared_expert, mc->moe_norm_topk, mc->router_aux_loss_coef);
    if (!tap_ok(zt_hf_load(ctx, dir, &st) == ZT_OK, "%s: zt_hf_load", name)) {
        tap_diag("%s", st.msg);
        goto out;
    }
    zt_model *m = ctx->model;
    zt_batch_buf *bb = &ctx->acts;
    if (stage == 0) {   /* forward, log-probs, every gradient */
        memcpy(zt_batch_host_inputs(bb), in, sizeof(int) * (size_t)(B * T));
        memcpy(zt_batch_host_targets(bb), tg, sizeof(int) * (size_t)(B * T));
        zt_batch_buf_upload(ctx, bb, B * T, B * T);
        zt_shard_zero_grads(ctx->sh);
        double ls = NAN;
        if (!tap_ok(zt_shard_forward(ctx->sh, bb->acts, bb->inputs, bb->targets, B, T, 1, &ls, &st) ==
                    ZT_OK, "%s: forward", name)) {
            tap_diag("%s", st.msg);
            goto out;
        }
        char what[200];
        snprintf(what, sizeof what, "%s: loss of the fixed batch (|diff| %.2e)", name,
                 fabs(ls / (B * T) - jnum(meta, "loss")));
        tap_close(ls / (B * T), jnum(meta, "loss"), 0, TOL_LOSS, what);
        const zt_st_tensor *lp = zt_st_find(&ref, "logprobs");
        float *lpv = malloc(sizeof(float) * (size_t)B * T * V);
        double worst = lp && lpv && zt_st_read(&ref, lp, 0, (uint64_t)B * T * V, lpv, &st) == ZT_OK ? 0 : INFINITY;
        for (int r = 0; r < B * T && isfinite(worst); ++r) {
            const float *p = m->ops->probs(m->self, bb->acts, r / T, r % T);
            for (int v = 0; p && v < V; ++v) {
                const double d = fabs(log((double)p[v]) - lpv[(size_t)r * V + v]);
                if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
            }
        }
        free(lpv);
        tap_ok(worst <= TOL_LOGPROB, "%s: log-softmax of the logits, max |diff| %.2e", name, worst);
        if (!tap_ok(zt_shard_backward(ctx->sh, bb->acts, 1.0f / (float)(B * T), &st) == ZT_OK,
                    "%s: backward", name)) {
            tap_diag("%s", st.msg);
            goto out;
        }
        int gok = 1, ng = 0;
        double gw = 0;
        for (int i = 0; i < m->n_tensors; ++i) {
            const zt_tensor_info *t = &m->tensors[i];
            char hn[200], gn[220];
            hf_of(t->name, dense, hn, sizeof hn);
            snprintf(gn, sizeof gn, "grad.%s", hn);
            const zt_st_tensor *g = zt_st_find(&ref, gn);
            float *gv = malloc(sizeof(float) * t->numel + 1);
            if (!g || !gv || zt_st_read(&ref, g, 0, t->numel, gv, &st) != ZT_OK || g->shape[0] *
                (g->ndim > 1 ? g->shape[1] : 1) * (g->ndim > 2 ? g->shape[2] : 1) != t->numel) {
                tap_diag("%s: no reference %s of %zu elements", name, gn, t->numel);
                gok = 0;
                free(gv);
                continue;
            }
            double d = 0, mx = 0;
            for (size_t k = 0; k < t->numel; ++k) {
                const double e = fabs((double)m->grads[t->offset + k] - gv[k]);
                if (!(e <= d)) d = isnan(e) ? INFINITY : e;
                if (fabs(gv[k]) > mx) mx = fabs(gv[k]);
            }
            free(gv);
            const double rel = d / (mx > 0 ? mx : 1);
            if (!(rel <= TOL_GRAD)) {
                gok = 0;
                tap_diag("%s: gradient of %s: %.3g of its largest entry %.3g", name, t->name, rel, mx);
            }
            if (rel > gw) gw = rel;
            ng++;
        }
        tap_ok(gok && ng == (int)json_array_size(json_object_get(meta, "params")),
               "%s: gradients of all %d parameter tensors (worst %.2e of the tensor's largest)", name,
               ng, gw);
    }
    fixed_batch fb = {B, T, in, tg};
    zt_data_source src = {&fb, fixed_get, NULL, NULL}, none = {0};
    if (!tap_ok(zt_ctx_set_data(ctx, src, none, &st) == ZT_OK, "%s: data source", name)) goto out;
    json_t *sl = json_object_get(meta, "step_losses"), *sa = json_object_get(meta, "step_aux_losses");
    int sok = json_array_size(sl) == 3, aok = json_array_size(sa) == 3;
    double sw = 0, aw = 0;
    for (size_t i = 0; i < json_array_size(sl) && sok; ++i) {
        zt_metrics mt;
        if (zt_train_step(ctx, &mt, &st) != ZT_OK) { tap_diag("step %zu: %s", i + 1, st.msg); sok = 0; break; }
        const double d = fabs(mt.loss - json_real_value(json_array_get(sl, i)));
        const double da = fabs(mt.aux_loss - json_real_value(json_array_get(sa, i)));
        sok &= d <= TOL_STEP;
        aok &= da <= TOL_STEP;
        if (!(d <= sw)) sw = d;
        if (!(da <= aw)) aw = isnan(da) ? INFINITY : da;
    }
    tap_ok(sok, "%s (ZeRO stage %d): losses of 3 AdamW steps match torch.optim.AdamW (max |diff| %.2e)",
           name, stage, sw);
    tap_ok(aok, "%s (ZeRO stage %d): the steps' load-balancing losses (aux_loss, apart from the loss) "
           "match transformers' load_balancing_loss_func (max |diff| %.2e)", name, stage, aw);
    double after = NAN;
    const int rc = zt_loss(ctx, in, tg, B, T, &after, &st);
    char what[200];
    snprintf(what, sizeof what, "%s (ZeRO stage %d): loss after the third update", name, stage);
    tap_close(rc == ZT_OK ? after : NAN, jnum(meta, "loss_after"), 0, TOL_STEP, what);
out:
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    if (have_ref) zt_st_close(&ref);
    json_decref(meta);
    free(in);
    free(tg);
}

static void run(const char *root, const char *name, const char *ref_name, int stage, int E, int K,
                int I, int shared, int norm, double coef) {
    run_mixed(root, name, ref_name, stage, E, K, I, shared, norm, coef, 0);
}

/* A model directory dir: src's weights (a symlink) under src's config.json
 * with one key's value replaced; zt_hf_load must refuse it with a message
 * holding want. */
static void wrong_split(const char *root, const char *src, const char *dir, const char *key,
                        const char *from, const char *to, const char *want) {
    char path[1024], cfgp[1024], lnk[1024], text[8192];
    snprintf(path, sizeof path, "%s/%s/config.json", root, src);
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    if (fp) fclose(fp);
    text[n] = '\0';
    char pat[128], *at;
    snprintf(pat, sizeof pat, "\"%s\": %s,", key, from);
    int ok = (at = strstr(text, pat)) != NULL;
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    fp = ok ? fopen(cfgp, "w") : NULL;
    if (fp) {
        fprintf(fp, "%.*s\"%s\": %s,%s", (int)(at - text), text, key, to, at + strlen(pat));
        fclose(fp);
    }
    char real[1024];
    snprintf(lnk, sizeof lnk, "%s/model.safetensors", dir);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", root, src);
    ok &= realpath(path, real) != NULL && symlink(real, lnk) == 0;
    zt_status st;
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    int rc = -1;
    if (ok && zt_hf_read_config(dir, cfg, &st) == ZT_OK) {
        tu_set(cfg, "ztrain.backend", "cpu");
        tu_set(cfg, "ztrain.data.train", "%s", "");
        tu_set(cfg, "ztrain.data.val", "%s", "");
        tu_set(cfg, "ztrain.seq_len", "16");
        if (zt_ctx_create(cfg, NULL, &ctx, &st) == ZT_OK) rc = zt_hf_load(ctx, dir, &st);
    }
    tap_ok(ok && rc == ZT_EDATA && strstr(st.msg, want), "%s with %s %s -> %s: refused (%s)", src,
           key, from, to, rc == ZT_OK ? "loaded" : st.msg);
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    unlink(lnk);    /* the link and the edited copy (never the fixture) */
    unlink(cfgp);
}

/* LoRA on a MoE model (src's config, ztrain.lora.r=4, key = val): want
 * NULL: the context is created; else refused at creation with want in the
 * message. */
static void lora_moe(const char *root, const char *src, const char *key, const char *val,
                     const char *want) {
    char dir[768];
    snprintf(dir, sizeof dir, "%s/%s", root, src);
    zt_status st;
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    int rc = zt_hf_read_config(dir, cfg, &st);
    if (rc == ZT_OK) {
        tu_set(cfg, "ztrain.backend", "cpu");
        tu_set(cfg, "ztrain.data.train", "%s", "");
        tu_set(cfg, "ztrain.data.val", "%s", "");
        tu_set(cfg, "ztrain.seq_len", "16");
        tu_set(cfg, "ztrain.lora.r", "4");
        rc = zt_config_set(cfg, key, val, ZT_SRC_FLAG, &st);
        if (rc == ZT_OK) rc = zt_ctx_create(cfg, NULL, &ctx, &st);
    }
    if (want)
        tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, want), "%s LoRA with %s=%s: refused (%s)",
               src, key, val, rc == ZT_OK ? "created" : st.msg);
    else
        tap_ok(rc == ZT_OK, "%s LoRA with %s=%s: created (%s)", src, key, val,
               rc == ZT_OK ? "ok" : st.msg);
    zt_ctx_free(ctx);
    zt_config_free(cfg);
}

/* A mixed block layout the model cannot have is refused at creation, naming
 * the key (qwen3_moe's config with key = val). */
static void layout_refused(const char *root, const char *src, const char *key, const char *val,
                           const char *want) {
    char dir[768];
    snprintf(dir, sizeof dir, "%s/%s", root, src);
    zt_status st;
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    int rc = zt_hf_read_config(dir, cfg, &st);
    if (rc == ZT_OK) {
        tu_set(cfg, "ztrain.backend", "cpu");
        tu_set(cfg, "ztrain.data.train", "%s", "");
        tu_set(cfg, "ztrain.data.val", "%s", "");
        tu_set(cfg, "ztrain.seq_len", "16");
        rc = zt_config_set(cfg, key, val, ZT_SRC_FLAG, &st);
        if (rc == ZT_OK) rc = zt_ctx_create(cfg, NULL, &ctx, &st);
    }
    tap_ok(rc != ZT_OK && strstr(st.msg, want), "%s with %s=%s: refused (%s)", src, key, val,
           rc == ZT_OK ? "created" : st.msg);
    zt_ctx_free(ctx);
    zt_config_free(cfg);
}

/* Architectures refused by name (their message names the class). */
static void refused(const char *dir, const char *cls, const char *type) {
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fprintf(fp, "{\"architectures\": [\"%s\"], \"model_type\": \"%s\"}\n", cls, type);
        fclose(fp);
    }
    zt_config *cfg = zt_config_new();
    zt_status st;
    const int rc = zt_hf_read_config(dir, cfg, &st);
    tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, cls) && strstr(st.msg, "Mixtral"),
           "%s refused by name: %s", cls, rc == ZT_OK ? "(accepted)" : st.msg);
    zt_config_free(cfg);
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    const char *src = getenv("ZT_SRCDIR");
    char root[512];
    snprintf(root, sizeof root, "%s/tests/fixtures/hf", src && *src ? src : ".");
    for (int stage = 0; stage <= 3; ++stage) {
        run(root, "mixtral", "mixtral", stage, 4, 2, 16, 0, 1, 0);
        run(root, "mixtral_packed", "mixtral", stage, 4, 2, 16, 0, 1, 0);
        run(root, "qwen2_moe", "qwen2_moe", stage, 4, 2, 16, 24, 0, 0);
        run(root, "qwen3_moe", "qwen3_moe", stage, 4, 2, 16, 0, 1, 0);
        run(root, "olmoe", "olmoe", stage, 4, 2, 16, 0, 0, 0);
        /* output_router_logits: coef 0.05 x the load-balancing loss in the objective */
        run(root, "mixtral_aux", "mixtral_aux", stage, 4, 2, 16, 0, 1, 0.05);
        /* mixed dense and sparse blocks: decoder_sparse_step 2 (blocks 0 and 2
         * dense; the load-balancing loss over block 1 only, in the objective),
         * the same weights packed, mlp_only_layers [0] */
        run_mixed(root, "qwen2_moe_mixed", "qwen2_moe_mixed", stage, 4, 2, 16, 24, 0, 0.05, 5u);
        run_mixed(root, "qwen2_moe_mixed_packed", "qwen2_moe_mixed", stage, 4, 2, 16, 24, 0, 0.05, 5u);
        run_mixed(root, "qwen3_moe_mixed", "qwen3_moe_mixed", stage, 4, 2, 16, 0, 1, 0, 1u);
    }
    /* LoRA on MoE models: attention, Qwen2-MoE's shared expert; the experts,
     * the routers, all-linear and a 4-bit base refused by name */
    lora_moe(root, "mixtral", "ztrain.lora.targets", "q_proj,k_proj,v_proj,o_proj", NULL);
    lora_moe(root, "qwen2_moe", "ztrain.lora.targets", "q_proj,gate_proj,up_proj,down_proj", NULL);
    lora_moe(root, "qwen3_moe_mixed", "ztrain.lora.targets", "q_proj,v_proj", NULL);
    lora_moe(root, "mixtral", "ztrain.lora.targets", "q_proj,experts", "are not LoRA targets");
    lora_moe(root, "mixtral", "ztrain.lora.targets", "w1", "are not LoRA targets");
    lora_moe(root, "qwen2_moe", "ztrain.lora.targets", "mlp.gate", "are not LoRA targets");
    lora_moe(root, "mixtral", "ztrain.lora.targets", "gate_proj", "it has no shared expert");
    lora_moe(root, "qwen2_moe_mixed", "ztrain.lora.targets", "up_proj",
             "its dense blocks' MLPs differ from the shared expert");
    lora_moe(root, "qwen2_moe", "ztrain.lora.targets", "all-linear", "all-linear on a Mixture");
    lora_moe(root, "mixtral", "ztrain.lora.base", "nf4", "(QLoRA)");
    layout_refused(root, "qwen3_moe_mixed", "ztrain.model.mlp_only_layers", "0,x",
                   "ztrain.model.mlp_only_layers='0,x' must be comma-separated block numbers");
    layout_refused(root, "qwen3_moe_mixed", "ztrain.model.mlp_only_layers", "0,3",
                   "ztrain.model.mlp_only_layers holds block 3; the model has ztrain.model.n_layer=3");
    layout_refused(root, "qwen3_moe_mixed", "ztrain.model.mlp_only_layers", "0,1,2",
                   "no block has experts");
    layout_refused(root, "qwen3_moe_mixed", "ztrain.model.decoder_sparse_step", "4",
                   "no block has experts");
    layout_refused(root, "qwen3_moe_mixed", "ztrain.model.decoder_sparse_step", "0",
                   "ztrain.model.decoder_sparse_step");
    layout_refused(root, "mixtral", "ztrain.model.mlp_only_layers", "0",
                   "every block has experts");
    char tmp[] = "/tmp/zt_hf_moe_XXXXXX";
    if (mkdtemp(tmp)) {
        refused(tmp, "DeepseekV3ForCausalLM", "deepseek_v3");
        refused(tmp, "DeepseekV2ForCausalLM", "deepseek_v2");
        refused(tmp, "GptOssForCausalLM", "gpt_oss");
        /* a wrong split of the experts' tensors is refused, never loaded: the
         * per-expert w1 [16, 32] for experts of width 8; the packed
         * gate_up_proj [4, 32, 32] for experts of width 8 ([4 x 2 x 8, 32]) */
        wrong_split(root, "mixtral", tmp, "intermediate_size", "16", "8",
                    "block_sparse_moe.experts.0.w1.weight has shape [16, 32]; expert 0 of the "
                    "configured model's h0.experts.gate_up.w needs [8, 32]");
        wrong_split(root, "mixtral_packed", tmp, "intermediate_size", "16", "8",
                    "mlp.experts.gate_up_proj has shape [4, 32, 32]; the configured model's "
                    "h0.experts.gate_up.w needs [64, 32]");
        char p[600];
        snprintf(p, sizeof p, "%s/config.json", tmp);
        remove(p);
        rmdir(tmp);
    }
    int rc = tap_done();
    zt_finalize();
    return rc;
}
