/*
 * test_train.c -- end-to-end behaviour of the library in one process:
 * overfitting, determinism, accumulation equivalence, schedule, clipping,
 * sampling, weights round trip, metrics, memory accounting.
 */
#include <math.h>
#include "ctx.h"
#include "ztrain_ckpt.h"
#include "ztrain_io.h"
#include "tap.h"
#include "testutil.h"

/* A data source returning one fixed batch whatever is asked. */
typedef struct fixed_src { int V; } fixed_src;
static int fixed_get(void *s, long step, uint64_t first, int count, int T, int *in, int *tg,
                     zt_status *st) {
    fixed_src *f = s;
    for (int i = 0; i < count; ++i)
        for (int t = 0; t < T; ++t) {
            uint64_t h = zt_hash3(11, first + (uint64_t)i, (uint64_t)t);
            in[i * T + t] = (int)(h % (uint64_t)f->V);
            tg[i * T + t] = (int)((h >> 20) % (uint64_t)f->V);
        }
    return ZT_OK;
}
static zt_data_source fixed_source(fixed_src *f) {
    zt_data_source d = {f, fixed_get, NULL, NULL};
    return d;
}

static zt_ctx *make_ctx(zt_config *c) {
    zt_ctx *ctx = NULL;
    zt_status st;
    if (zt_ctx_create(c, NULL, &ctx, &st) != ZT_OK) printf("# ctx: %s\n", st.msg);
    return ctx;
}

static int run_losses(zt_config *c, zt_data_source src, int steps, double *losses) {
    zt_ctx *ctx = make_ctx(c);
    if (!ctx) return -1;
    zt_status st;
    zt_data_source none = {0};
    zt_ctx_set_data(ctx, src, none, &st);
    for (int i = 0; i < steps; ++i) {
        zt_metrics m;
        if (zt_train_step(ctx, &m, &st) != ZT_OK) { printf("# step: %s\n", st.msg); zt_ctx_free(ctx); return -1; }
        losses[i] = m.loss;
    }
    zt_ctx_free(ctx);
    return 0;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) { tap_ok(0, "zt_init: %s", st.msg); return tap_done(); }
    char *dir = tu_tmpdir();
    char path[512];

    /* ---- overfit one fixed batch ---- */
    {
        fixed_src fs = {16};
        zt_config *c = tu_tiny_config(2, 2, 32, 16, 16, 4);
        tu_set(c, "optimizer.params.lr", "3e-3");
        tu_set(c, "optimizer.params.weight_decay", "0");
        tu_set(c, "scheduler.type", "none");
        tu_set(c, "ztrain.steps", "300");
        double losses[300];
        int rc = run_losses(c, fixed_source(&fs), 300, losses);
        tap_ok(rc == 0 && losses[0] > 2.0, "initial loss near log(16) (%.3f)", rc ? -1 : losses[0]);
        tap_ok(rc == 0 && losses[299] < 0.05, "overfitting one batch drives the loss below 0.05 (%.4f)", rc ? -1 : losses[299]);
        zt_config_free(c);
    }

    /* ---- determinism ---- */
    snprintf(path, sizeof path, "%s/train.bin", dir);
    tu_write_tokens(path, 20000, 32, 3);
    {
        zt_config *c = tu_tiny_config(2, 2, 16, 16, 32, 4);
        tu_set(c, "ztrain.data.train", "%s", path);
        double a[20], b[20], d[20];
        zt_ctx *ctx;
        int ok = 1;
        for (int rep = 0; rep < 2; ++rep) {
            ctx = make_ctx(c);
            ok &= ctx && zt_ctx_open_data(ctx, &st) == ZT_OK;
            for (int i = 0; ok && i < 20; ++i) {
                zt_metrics m;
                ok &= zt_train_step(ctx, &m, &st) == ZT_OK;
                (rep ? b : a)[i] = m.loss;
            }
            zt_ctx_free(ctx);
        }
        tap_ok(ok && memcmp(a, b, sizeof a) == 0, "same seed: bitwise-identical losses over 20 steps");
        tu_set(c, "ztrain.seed", "4242");
        ctx = make_ctx(c);
        ok = ctx && zt_ctx_open_data(ctx, &st) == ZT_OK;
        for (int i = 0; ok && i < 20; ++i) { zt_metrics m; ok &= zt_train_step(ctx, &m, &st) == ZT_OK; d[i] = m.loss; }
        zt_ctx_free(ctx);
        tap_ok(ok && memcmp(a, d, sizeof a) != 0, "a different seed gives different losses");
        zt_config_free(c);
    }

    /* ---- gradient accumulation: 4 x micro 2 == 1 x micro 8 ---- */
    {
        double l1[10], l2[10];
        zt_config *c1 = tu_tiny_config(2, 2, 16, 16, 32, 2);
        tu_set(c1, "ztrain.data.train", "%s", path);
        tu_set(c1, "gradient_accumulation_steps", "4");
        zt_config *c2 = tu_tiny_config(2, 2, 16, 16, 32, 8);
        tu_set(c2, "ztrain.data.train", "%s", path);
        zt_ctx *x1 = make_ctx(c1), *x2 = make_ctx(c2);
        int ok = x1 && x2 && zt_ctx_open_data(x1, &st) == ZT_OK && zt_ctx_open_data(x2, &st) == ZT_OK;
        double maxrel = 0;
        for (int i = 0; ok && i < 10; ++i) {
            zt_metrics m1, m2;
            ok &= zt_train_step(x1, &m1, &st) == ZT_OK && zt_train_step(x2, &m2, &st) == ZT_OK;
            l1[i] = m1.loss; l2[i] = m2.loss;
            double r = fabs(l1[i] - l2[i]) / fabs(l2[i]);
            if (r > maxrel) maxrel = r;
        }
        tap_ok(ok && maxrel < 1e-5, "accumulation 4 x 2 matches 1 x 8 (max rel loss diff %.2e)", maxrel);
        double pmax = 0;
        for (size_t j = 0; ok && j < x1->model->num_params; ++j) {
            double dlt = fabs(x1->model->params[j] - x2->model->params[j]);
            if (dlt > pmax) pmax = dlt;
        }
        tap_ok(ok && pmax < 1e-5, "accumulation: final parameters within 1e-5 (%.2e)", pmax);
        zt_ctx_free(x1); zt_ctx_free(x2);
        zt_config_free(c1); zt_config_free(c2);
    }

    /* ---- schedule and clipping ---- */
    {
        zt_config *c = tu_tiny_config(1, 1, 8, 8, 16, 1);
        tu_set(c, "optimizer.params.lr", "1e-3");
        tu_set(c, "scheduler.params.warmup_num_steps", "10");
        tu_set(c, "scheduler.params.cos_min_ratio", "0.1");
        tu_set(c, "ztrain.steps", "110");
        zt_config_finalize(c, 1, &st);
        tap_close(zt_lr_at(c, 0), 1e-4, 1e-9, 0, "linear warmup: step 0 lr = lr/10");
        tap_close(zt_lr_at(c, 9), 1e-3, 1e-9, 0, "warmup reaches lr at its last step");
        tap_close(zt_lr_at(c, 60), 1e-3 * (0.1 + 0.9 * 0.5), 1e-9, 0, "cosine midpoint");
        tap_close(zt_lr_at(c, 110), 1e-4, 1e-9, 0, "cosine ends at cos_min_ratio x lr");
        tap_close(zt_clip_scale(5.0, 1.0), 0.2, 1e-6, 0, "clip scale = max_norm / norm");
        tap_ok(zt_clip_scale(0.5, 1.0) == 1.0 && zt_clip_scale(5.0, 0.0) == 1.0, "no clipping below the norm or when disabled");
        zt_config_free(c);
    }

    /* ---- a context end to end: memory, weights, sampling, metrics ---- */
    {
        char mpath[512], wpath[512], vpath[512];
        snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
        snprintf(wpath, sizeof wpath, "%s/w.bin", dir);
        snprintf(vpath, sizeof vpath, "%s/val.bin", dir);
        tu_write_tokens(vpath, 3000, 32, 9);
        zt_config *c = tu_tiny_config(2, 2, 16, 16, 32, 4);
        tu_set(c, "ztrain.data.train", "%s", path);
        tu_set(c, "ztrain.data.val", "%s", vpath);
        tu_set(c, "ztrain.metrics", "%s", mpath);
        tu_set(c, "ztrain.steps", "6");
        tu_set(c, "ztrain.eval_every", "3");
        tu_set(c, "ztrain.eval_batch_size", "8");
        zt_ctx *ctx = make_ctx(c);
        int ok = ctx && zt_ctx_open_data(ctx, &st) == ZT_OK && zt_train(ctx, &st) == ZT_OK;
        tap_ok(ok, "zt_train runs 6 steps with evaluation");
        size_t P = ctx ? ctx->model->num_params : 0;
        zt_mem_stats ms;
        zt_mem_get(&ms);
        tap_ok(ms.cur[ZT_MEM_PARAMS] == 4 * P && ms.cur[ZT_MEM_GRADS] == 4 * P &&
               ms.cur[ZT_MEM_OPTIMIZER] == 8 * P, "stage 0 model states: params 4P, grads 4P, AdamW 8P bytes");
        tap_ok(ms.cur[ZT_MEM_EVAL] == zt_gpt_acts_bytes(&ctx->cfg->model, 8, 16, 0) + 2 * 8 * 16 * sizeof(int) &&
               ms.cur[ZT_MEM_EVAL] < ms.cur[ZT_MEM_ACTIVATIONS],
               "eval activations accounted separately, forward-only (%llu < %llu bytes)",
               (unsigned long long)ms.cur[ZT_MEM_EVAL], (unsigned long long)ms.cur[ZT_MEM_ACTIVATIONS]);
        FILE *fp = fopen(mpath, "r");
        int steps = 0, evals = 0;
        char line[512];
        while (fp && fgets(line, sizeof line, fp)) {
            if (strstr(line, "\"val_loss\"")) evals++;
            else if (strstr(line, "\"loss\"") && strstr(line, "\"lr\"") && strstr(line, "\"grad_norm\"") &&
                     strstr(line, "\"tokens_per_s\"") && strstr(line, "\"step_ms\"")) steps++;
        }
        if (fp) fclose(fp);
        tap_ok(steps == 6 && evals == 2, "metrics JSONL: 6 step lines and 2 eval lines (%d, %d)", steps, evals);
        /* weights round trip */
        int in[16], tg[16];
        for (int i = 0; i < 16; ++i) { in[i] = (i * 3) % 32; tg[i] = (i * 5 + 1) % 32; }
        double la = 0, lb = -1;
        ok = ok && zt_save_weights(ctx, wpath, &st) == ZT_OK && zt_loss(ctx, in, tg, 1, 16, &la, &st) == ZT_OK;
        zt_config *c2 = zt_config_new();
        tu_set(c2, "ztrain.data.val", "%s", "");
        ok = ok && zt_weights_read_shape(wpath, c2, &st) == ZT_OK;
        zt_ctx *ctx2 = ok ? make_ctx(c2) : NULL;
        ok = ok && ctx2 && zt_load_weights(ctx2, wpath, &st) == ZT_OK && zt_loss(ctx2, in, tg, 1, 16, &lb, &st) == ZT_OK;
        tap_ok(ok && la == lb, "weights saved and loaded give a bitwise-identical loss (%.6f)", la);
        /* sampling */
        int prompt[3] = {1, 2, 3}, s1[20], s2[20], s3[20];
        ok = zt_sample(ctx, prompt, 3, 20, 1.0, 0, 5, s1, &st) == ZT_OK &&
             zt_sample(ctx, prompt, 3, 20, 1.0, 0, 5, s2, &st) == ZT_OK &&
             zt_sample(ctx, prompt, 3, 20, 1.0, 0, 6, s3, &st) == ZT_OK;
        tap_ok(ok && !memcmp(s1, s2, sizeof s1) && memcmp(s1, s3, sizeof s1), "sampling is deterministic in its seed");
        int g1[1];
        ok = zt_sample(ctx, prompt, 3, 1, 1.0, 1, 5, g1, &st) == ZT_OK;
        int seq[3] = {1, 2, 3}, dummy[3] = {0, 0, 0};
        double l0;
        zt_loss(ctx, seq, dummy, 1, 3, &l0, &st);  /* leaves probs in a scratch block: recompute argmax */
        zt_batch_buf a;
        zt_batch_buf_alloc(ctx, &a, 1, 3, 0, ZT_MEM_WORKSPACE, &st);
        memcpy(a.inputs, seq, sizeof seq);
        double unused;
        zt_shard_forward(ctx->sh, a.acts, a.inputs, NULL, 1, 3, 0, &unused, &st);
        const float *pr = ctx->model->ops->probs(ctx->model->self, a.acts, 0, 2);
        int arg = 0;
        for (int v = 1; v < 32; ++v) if (pr[v] > pr[arg]) arg = v;
        zt_batch_buf_free(ctx, &a);
        tap_ok(ok && g1[0] == arg, "top-k 1 sampling is greedy (token %d)", g1[0]);
        tap_ok(zt_sample(ctx, prompt, 3, 1, 0.0, 0, 5, g1, &st) == ZT_EINVAL, "temperature 0 rejected");
        zt_ctx_free(ctx2);
        zt_config_free(c2);
        zt_ctx_free(ctx);
        zt_config_free(c);
    }

    /* ---- errors come back as statuses ---- */
    {
        zt_config *c = tu_tiny_config(2, 2, 16, 16, 32, 4);
        tu_set(c, "ztrain.data.train", "%s/nope.bin", dir);
        zt_ctx *ctx = make_ctx(c);
        int rc = ctx ? zt_ctx_open_data(ctx, &st) : -1;
        tap_ok(rc == ZT_EIO && strstr(st.msg, "nope.bin"), "missing data file: status names it");
        zt_metrics m;
        tap_ok(ctx && zt_train_step(ctx, &m, &st) == ZT_EINVAL, "training without data is an error, not a crash");
        zt_ctx_free(ctx);
        zt_config_free(c);
    }

    /* ---- the model's FLOPs a token (bench/README.md's count) and the
     * metrics' TFLOP/s and MFU; the parameters counted here in closed form ---- */
    {
        const double L = 2, C = 32, T = 16, V = 64;
        /* GPT-2: wte, wpe, a block's 2 norms, qkv, proj, fc, fc proj with
         * biases, the final norm */
        {
            zt_config *c = tu_tiny_config(2, 2, 32, 16, 64, 2);
            zt_ctx *ctx = make_ctx(c);
            const double P = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
            const double want = 6 * P + 6 * L * C * T;
            const double got = ctx ? zt_ctx_flops_per_token(ctx) : -1;
            tap_ok(got == want, "GPT-2: 6 x %.0f parameters + 6 L C T = %.0f FLOPs a token (%.0f)", P, want, got);
            char src[64] = "x";
            tap_ok(ctx && zt_ctx_peak_tflops(ctx, src, sizeof src) == 0 && !src[0],
                   "the cpu backend: no known peak");
            /* one step: TFLOP/s = FLOPs a token x tokens/s, no MFU */
            fixed_src fs = {64};
            zt_data_source none = {0};
            zt_metrics m;
            int rc = ctx ? zt_ctx_set_data(ctx, fixed_source(&fs), none, &st) : -1;
            if (rc == ZT_OK) rc = zt_train_step(ctx, &m, &st);
            tap_ok(rc == ZT_OK && fabs(m.tflops - want * m.tokens_per_s * 1e-12) <= 1e-12 * m.tflops &&
                   m.tflops > 0 && isnan(m.mfu),
                   "a step's tflops = FLOPs a token x tokens/s (%g), mfu NaN without a peak", rc ? -1 : m.tflops);
            zt_ctx_free(ctx);
            /* ztrain.peak_tflops: the MFU against it */
            tu_set(c, "ztrain.peak_tflops", "0.002");
            ctx = make_ctx(c);
            rc = ctx ? zt_ctx_set_data(ctx, fixed_source(&fs), none, &st) : -1;
            if (rc == ZT_OK) rc = zt_train_step(ctx, &m, &st);
            tap_ok(rc == ZT_OK && zt_ctx_peak_tflops(ctx, src, sizeof src) == 0.002 &&
                   !strcmp(src, "ztrain.peak_tflops") && m.mfu == m.tflops / 0.002,
                   "ztrain.peak_tflops 0.002: mfu = tflops / 0.002 (%g)", rc ? -1 : m.mfu);
            zt_ctx_free(ctx);
            zt_config_free(c);
        }
        /* the known GPUs' dense peaks by the names CUDA gives them */
        {
            static const struct { const char *name; double b16, f32; } G[] = {
                {"NVIDIA H100 80GB HBM3", 989.4, 66.9}, {"NVIDIA H100 PCIe", 756.0, 51.2},
                {"NVIDIA H100 NVL", 835.5, 60.0},       {"NVIDIA H200", 989.4, 66.9},
                {"NVIDIA H200 NVL", 835.5, 60.0},       {"NVIDIA GH200 480GB", 989.4, 66.9},
                {"NVIDIA A100-SXM4-80GB", 312.0, 19.5}, {"NVIDIA A100 80GB PCIe", 312.0, 19.5},
                {"NVIDIA L4", 0, 0}, {"cudasim (a CPU simulator of an sm_90 device)", 0, 0}, {"", 0, 0}};
            int bad = 0;
            for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
                if (zt_peak_tflops_of_name(G[i].name, 1) != G[i].b16 ||
                    zt_peak_tflops_of_name(G[i].name, 0) != G[i].f32) {
                    printf("# %s: %g %g\n", G[i].name, zt_peak_tflops_of_name(G[i].name, 1),
                           zt_peak_tflops_of_name(G[i].name, 0));
                    bad++;
                }
            tap_ok(bad == 0 && zt_peak_tflops_of_name(NULL, 1) == 0,
                   "dense peaks by device name: H100 SXM / PCIe / NVL, H200, H200 NVL, GH200, A100; "
                   "none for others");
        }
        /* Llama (GQA 4/2 heads of 8, tied): the embedding, a block's 2
         * norms, q, k, v, o, gate, up, down, the final norm; a Mixture of
         * Experts (4 experts of 24, top 2): the router and the experts in
         * place of the MLP, a token running 2 of them; LoRA r=2 on q_proj
         * and v_proj: 6 a trained adapter parameter, 4 a frozen one */
        const double NH = 4, NKV = 2, hd = 8, I = 48, E = 4, K = 2, Im = 24, r = 2;
        const double att = 6 * L * NH * hd * T;
        const double blk = 2 * C + C * NH * hd + 2 * C * NKV * hd + NH * hd * C;
        for (int v = 0; v < 3; ++v) {
            zt_config *c = tu_tiny_config(2, 4, 32, 16, 64, 2);
            tu_set(c, "ztrain.model.arch", "llama");
            tu_set(c, "ztrain.model.n_kv_head", "2");
            tu_set(c, "ztrain.model.intermediate_size", "48");
            double P = V * C + C, want;
            const char *what;
            if (v == 1) {
                tu_set(c, "ztrain.model.n_experts", "4");
                tu_set(c, "ztrain.model.experts_per_token", "2");
                tu_set(c, "ztrain.model.moe_intermediate_size", "24");
                P += L * (blk + C * E + E * 3 * C * Im);
                want = 6 * (P - L * (E - K) * 3 * C * Im) + att;
                what = "a Mixture of Experts: 6 x the active parameters";
            } else if (v == 2) {
                tu_set(c, "ztrain.lora.r", "2");
                P += L * (blk + 3 * C * I);
                const double ad = L * (r * (C + NH * hd) + r * (C + NKV * hd));
                want = 6 * ad + 4 * P + att;
                what = "LoRA: 6 x the adapters' + 4 x the frozen base's parameters";
            } else {
                P += L * (blk + 3 * C * I);
                want = 6 * P + att;
                what = "Llama: 6 x the parameters";
            }
            zt_ctx *ctx = make_ctx(c);
            const double got = ctx ? zt_ctx_flops_per_token(ctx) : -1;
            tap_ok(got == want, "%s + 6 L n_head head_dim T = %.0f FLOPs a token (%.0f)", what, want, got);
            zt_ctx_free(ctx);
            zt_config_free(c);
        }
    }

    tu_rmdir(dir);
    zt_finalize();
    return tap_done();
}
