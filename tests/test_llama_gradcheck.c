/*
 * test_llama_gradcheck.c -- the Llama model's backward pass against finite
 * differences of the forward loss (summed in double), for EVERY parameter
 * tensor of several shapes: grouped-query (NH 4, NKV 2) with q/k/v biases
 * and a tied head; multi-query (NKV 1), an untied head and llama3 rope
 * scaling; full multi-head attention with an explicit head_dim != C / NH.
 * Each tensor: a directional derivative along a random direction restricted
 * to the tensor, plus three single elements.  Also: the layout contract
 * (tensor names, shapes, adjacency of q|k|v and gate|up), the rotary
 * frequencies against a double-precision evaluation of the formula, and
 * activation checkpointing (blocks, every-2) giving bitwise the gradients
 * of the run that keeps every activation, and the forward-only (eval) block
 * giving the training forward's loss.  Gemma 2 / 3 blocks ((1 + w) norms,
 * post norms, GeGLU, embedding scale, soft-caps, windows 2 and 3 < T with
 * full layers between, the sliding layers' own rotary base) the same way;
 * a backend without the Gemma kernels refused with a status.
 * A Mixture of Experts model's units: its experts' tensors in units of their
 * own after their block's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
#include "shard.h"
#include "tap.h"

enum { B = 2, T = 5 };
static int inputs[B * T], targets[B * T];

static double loss_of(zt_shard *sh, void *a) {
    double s = 0;
    zt_status st;
    if (zt_shard_forward(sh, a, inputs, targets, B, T, 1, &s, &st) != ZT_OK) return NAN;
    return s / (double)(B * T);
}

static zt_model_config base_config(void) {
    zt_model_config mc = {.n_layer = 2, .n_head = 4, .n_embd = 16, .context = 6, .vocab = 11,
                          .pad_token_id = -1};
    snprintf(mc.arch, sizeof mc.arch, "llama");
    snprintf(mc.rope_scaling, sizeof mc.rope_scaling, "none");
    mc.norm_eps = 1e-5;
    mc.rope_theta = 10000;
    mc.rope_factor = 8;
    mc.rope_low_freq_factor = 1;
    mc.rope_high_freq_factor = 4;
    mc.rope_original_max = 8192;
    mc.rope_beta_fast = 32;
    mc.rope_beta_slow = 1;
    mc.rope_truncate = 1;
    mc.tie_embeddings = 1;
    return mc;
}

typedef struct built {
    zt_llama *lm;
    zt_model *m;
    zt_shard *sh;
    void *a;
} built;

static int build(const zt_model_config *mc, int ckpt, built *b, zt_status *st) {
    const zt_backend *be = zt_backend_cpu();
    memset(b, 0, sizeof *b);
    ZT_TRY(zt_llama_new(mc, be, &b->lm, st));
    zt_llama_set_checkpointing(b->lm, ckpt);
    ZT_TRY(zt_model_create(zt_llama_ops(), b->lm, mc, be, ZT_MODEL_PARAMS | ZT_MODEL_GRADS, &b->m, st));
    ZT_TRY(zt_shard_create(b->m, 0, 1, NULL, &b->sh, st));
    zt_shard_init_params(b->sh, 7);
    /* move away from the symmetric init (norms ones, biases zeros) */
    for (size_t i = 0; i < b->m->num_params; ++i) b->m->params[i] += (float)(0.1 * zt_normal(99, i));
    return zt_llama_ops()->acts_create(b->lm, B, T, 1, ZT_MEM_ACTIVATIONS, &b->a, st);
}

static void unbuild(built *b) {
    if (b->a) zt_llama_ops()->acts_free(b->lm, b->a);
    zt_shard_free(b->sh);
    if (b->m) zt_model_free(b->m, 1);
    else zt_llama_free(b->lm);
}

/* The layout contract: names and shapes in order, unit names. */
static void check_layout(const zt_model *m, const zt_model_config *mc, const char *what) {
    const int C = mc->n_embd, NH = mc->n_head, NKV = zt_model_kv_heads(mc);
    const int hd = zt_model_head_dim(mc), H = zt_model_intermediate(mc), V = mc->vocab;
    char want[64][40];
    int rows[64], cols[64], n = 0;
#define W(nm, r, c) do { snprintf(want[n], 40, "%s", nm); rows[n] = r; cols[n] = c; n++; } while (0)
    W("embed.w", V, C);
    for (int l = 0; l < mc->n_layer; ++l) {
        char nm[40];
#define WL(s, r, c) do { snprintf(nm, sizeof nm, "h%d.%s", l, s); W(nm, r, c); } while (0)
        WL("attn_norm.w", C, 1); WL("q.w", NH * hd, C); WL("k.w", NKV * hd, C);
        WL("v.w", NKV * hd, C);
        if (mc->attention_bias) { WL("q.b", NH * hd, 1); WL("k.b", NKV * hd, 1); WL("v.b", NKV * hd, 1); }
        if (mc->qk_norm) { WL("q_norm.w", hd, 1); WL("k_norm.w", hd, 1); }
        WL("o.w", C, NH * hd);
        if (mc->gemma) WL("post_attn_norm.w", C, 1);
        WL("mlp_norm.w", C, 1); WL("gate.w", H, C); WL("up.w", H, C);
        WL("down.w", C, H);
        if (mc->gemma) WL("post_mlp_norm.w", C, 1);
#undef WL
    }
    W("norm.w", C, 1);
    if (!mc->tie_embeddings) W("lm_head.w", V, C);
#undef W
    int ok = m->n_tensors == n && m->n_units == mc->n_layer + 2 &&
             !strcmp(m->units[0].name, "embeddings") && !strcmp(m->units[1].name, "block.0") &&
             !strcmp(m->units[mc->n_layer + 1].name, "head");
    size_t off = 0;
    for (int i = 0; ok && i < n; ++i) {
        const zt_tensor_info *t = &m->tensors[i];
        ok = !strcmp(t->name, want[i]) && t->shape[0] == rows[i] && t->shape[1] == cols[i] &&
             t->offset == off;   /* contiguous: q|k|v and gate|up adjacent */
        if (!ok) tap_diag("tensor %d: %s [%d, %d] at %zu, want %s [%d, %d] at %zu", i, t->name,
                          t->shape[0], t->shape[1], t->offset, want[i], rows[i], cols[i], off);
        off += t->numel;
    }
    for (int u = 0; ok && u < m->n_units; ++u)
        ok = m->units[u].numel == zt_llama_unit_numel(mc, u);
    tap_ok(ok, "%s: layout (%d tensors, units embeddings / block.l / head, sizes)", what, n);
}

/* inv_freq against the formula evaluated in double (fp32 rounding apart). */
static void check_inv_freq(const zt_model_config *mc, const char *what) {
    const int hd = zt_model_head_dim(mc);
    float f[64];
    zt_llama_inv_freq(mc, f);
    int ok = 1, scaled = 0, smooth = 0;
    for (int j = 0; j < hd / 2; ++j) {
        double x = pow(mc->rope_theta, -2.0 * j / hd);
        if (!strcmp(mc->rope_scaling, "llama3")) {
            double wl = 6.283185307179586 / x, old = mc->rope_original_max;
            if (wl > old / mc->rope_low_freq_factor) { x /= mc->rope_factor; scaled++; }
            else if (wl >= old / mc->rope_high_freq_factor) {
                double s = (old / wl - mc->rope_low_freq_factor) /
                           (mc->rope_high_freq_factor - mc->rope_low_freq_factor);
                x = (1 - s) * x / mc->rope_factor + s * x;
                smooth++;
            }
        } else if (!strcmp(mc->rope_scaling, "linear")) {
            x /= mc->rope_factor;
            scaled++;
        } else if (!strcmp(mc->rope_scaling, "yarn")) {   /* the ramp over [lo, hi] */
            const double b = log(mc->rope_theta), om = mc->rope_original_max, pi2 = 6.283185307179586;
            double lo = floor(hd * log(om / (mc->rope_beta_fast * pi2)) / (2 * b));
            double hi = ceil(hd * log(om / (mc->rope_beta_slow * pi2)) / (2 * b));
            lo = lo < 0 ? 0 : lo;
            hi = hi > hd - 1 ? hd - 1 : hi;
            double r = (j - lo) / (hi - lo);
            r = r < 0 ? 0 : r > 1 ? 1 : r;
            x = x / mc->rope_factor * r + x * (1 - r);
            scaled += r == 1;
            smooth += r > 0 && r < 1;
        }
        if (fabs(f[j] - x) > 1e-6 * x) {
            ok = 0;
            tap_diag("inv_freq[%d] = %.9g, want %.9g", j, f[j], x);
        }
    }
    tap_ok(ok, "%s: rotary frequencies (%d scaled, %d smoothed)", what, scaled, smooth);
}

/* the finite-difference step (Gemma's post norms and soft-caps bend more:
 * a smaller one there) */
static double fd_eps = 1e-2;

static void gradcheck(const zt_model_config *mc, const char *what) {
    zt_status st;
    built b;
    if (build(mc, 0, &b, &st) != ZT_OK) {
        tap_ok(0, "%s: create: %s", what, st.msg);
        unbuild(&b);
        return;
    }
    zt_model *m = b.m;
    check_layout(m, mc, what);
    check_inv_freq(mc, what);
    m->be->zero(m->grads, m->num_params * sizeof(float));
    double L0 = loss_of(b.sh, b.a);
    int rc = zt_shard_backward(b.sh, b.a, 1.0f / (float)(B * T), &st);
    tap_ok(rc == ZT_OK && isfinite(L0) && L0 > 0, "%s: loss is finite and positive (%.4f)", what, L0);
    {   /* a forward-only block (one slot, ping-pong residuals) computes the same loss */
        void *ev = NULL;
        double le = NAN;
        if (zt_llama_ops()->acts_create(b.lm, B, T, 0, ZT_MEM_EVAL, &ev, &st) == ZT_OK) le = loss_of(b.sh, ev);
        tap_ok(le == L0, "%s: the eval block's forward gives the training forward's loss bitwise", what);
        zt_llama_ops()->acts_free(b.lm, ev);
    }

    const double eps = fd_eps;
    int bad = 0;
    for (int ti = 0; ti < m->n_tensors; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        float *p = m->params + t->offset;
        const float *g = m->grads + t->offset;
        double *d = malloc(sizeof(double) * t->numel), gd = 0.0, gn = 0.0;
        double inv = 1.0 / sqrt((double)t->numel);
        for (size_t j = 0; j < t->numel; ++j) {
            d[j] = (zt_hash3(5, (uint64_t)ti, j) & 1 ? 1.0 : -1.0) * inv;
            gd += d[j] * g[j];
            gn += (double)g[j] * g[j];
        }
        float *save = malloc(sizeof(float) * t->numel);
        memcpy(save, p, sizeof(float) * t->numel);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] + eps * d[j]);
        double Lp = loss_of(b.sh, b.a);
        for (size_t j = 0; j < t->numel; ++j) p[j] = (float)(save[j] - eps * d[j]);
        double Lm = loss_of(b.sh, b.a);
        memcpy(p, save, sizeof(float) * t->numel);
        double fd = (Lp - Lm) / (2 * eps);
        /* agreement, and a gradient that is not (near) zero */
        int ok = fabs(fd - gd) <= 2e-5 + 1e-2 * fabs(gd) && sqrt(gn) > 1e-3;
        if (!ok) {
            tap_diag("%s %s: analytic %.6e numeric %.6e (|g| %.2e)", what, t->name, gd, fd, sqrt(gn));
            bad++;
        }
        size_t idx[3] = {0, t->numel / 2, t->numel - 1};
        for (int k = 0; k < 3; ++k) {
            size_t j = idx[k];
            p[j] = save[j] + (float)eps;
            double lp = loss_of(b.sh, b.a);
            p[j] = save[j] - (float)eps;
            double lm = loss_of(b.sh, b.a);
            p[j] = save[j];
            double efd = (lp - lm) / (2 * eps);
            /* the fp32 loss's rounding (~1e-7 relative) divided by the step
             * is the difference quotient's noise floor: 3e-5 at eps 1e-2, so
             * the absolute term grows as 1 / eps (Gemma's smaller step; a
             * 6.8e-5 gradient was off by 4e-5 with another BLAS kernel) */
            if (fabs(efd - g[j]) > 3e-5 * (1e-2 / eps) + 3e-2 * fabs(g[j])) {
                bad++;
                tap_diag("%s %s[%zu]: analytic %.6e numeric %.6e", what, t->name, j, g[j], efd);
            }
        }
        free(d);
        free(save);
    }
    tap_ok(bad == 0, "%s: gradients of all %d tensors (directional + 3 elements each; %d off)",
           what, m->n_tensors, bad);
    unbuild(&b);
}

/* Activation checkpointing recomputes bitwise: the gradients (and loss) of
 * the ckpt runs equal those of the run that keeps everything. */
static void ckpt_bitwise(const zt_model_config *mc, const char *what) {
    zt_status st;
    built ref;
    float *g0 = NULL;
    double l0 = 0;
    size_t n = 0;
    const int ks[3] = {0, 1, 2};
    for (int i = 0; i < 3; ++i) {
        built b;
        if (build(mc, ks[i], &b, &st) != ZT_OK) {
            tap_ok(0, "%s: create: %s", what, st.msg);
            unbuild(&b);
            break;
        }
        b.m->be->zero(b.m->grads, b.m->num_params * sizeof(float));
        double l = loss_of(b.sh, b.a);
        int rc = zt_shard_backward(b.sh, b.a, 1.0f / (float)(B * T), &st);
        if (i == 0) {
            ref = b;
            n = b.m->num_params;
            g0 = b.m->grads;
            l0 = l;
            continue;
        }
        tap_ok(rc == ZT_OK && l == l0 && !memcmp(g0, b.m->grads, n * sizeof(float)),
               "%s: checkpointing group %d: loss and gradients bitwise those without", what, ks[i]);
        unbuild(&b);
    }
    if (g0) unbuild(&ref);
}

/* A Mixture of Experts model's units: the embeddings, per block its unit
 * and (a block with experts) the units block.<l>.experts_gu and
 * block.<l>.experts_down holding h<l>.experts.gate_up.w [E 2I, C] and
 * h<l>.experts.down.w [E C, I] alone (expert parallelism stores each rank's
 * experts: docs/moe.md), the head last; contiguous, sizes as
 * zt_llama_unit_numel's; Qwen-MoE's mixed blocks (decoder_sparse_step 2:
 * block 1 sparse of 3). */
static void check_moe_units(void) {
    zt_model_config mc = base_config();
    mc.n_layer = 3;
    mc.intermediate = 12;
    mc.n_experts = 4;
    mc.experts_per_token = 2;
    mc.moe_intermediate = 6;
    mc.decoder_sparse_step = 2;
    const int C = mc.n_embd, E = mc.n_experts, I = mc.moe_intermediate;
    zt_status st;
    zt_llama *lm = NULL;
    zt_model *m = NULL;
    int rc = zt_llama_new(&mc, zt_backend_cpu(), &lm, &st);
    if (rc == ZT_OK) rc = zt_model_create(zt_llama_ops(), lm, &mc, zt_backend_cpu(), 0, &m, &st);
    if (!tap_ok(rc == ZT_OK, "moe units: create%s%s", rc ? ": " : "", rc ? st.msg : "")) {
        if (!m) zt_llama_free(lm);
        zt_model_free(m, 1);
        return;
    }
    static const char *const names[] = {"embeddings", "block.0", "block.1", "block.1.experts_gu",
                                        "block.1.experts_down", "block.2", "head"};
    int ok = m->n_units == 7;
    size_t off = 0;
    for (int u = 0; ok && u < m->n_units; ++u) {
        const zt_unit_info *ui = &m->units[u];
        ok = !strcmp(ui->name, names[u]) && ui->offset == off &&
             ui->numel == zt_llama_unit_numel(&mc, u);
        off += ui->numel;
        if (ok && (u == 3 || u == 4)) {
            const zt_tensor_info *t = &m->tensors[ui->first_tensor];
            ok = ui->n_tensors == 1 &&
                 !strcmp(t->name, u == 3 ? "h1.experts.gate_up.w" : "h1.experts.down.w") &&
                 t->numel == (size_t)(u == 3 ? E * 2 * I * C : E * C * I) && t->numel == ui->numel;
        }
        if (!ok) tap_diag("unit %d: %s at %zu, %zu elements", u, ui->name, ui->offset, ui->numel);
    }
    ok = ok && off == m->num_params;
    tap_ok(ok, "moe units: each block's experts.gate_up.w and experts.down.w in units of their own "
           "after the block's, the head last, contiguous, sizes as zt_llama_unit_numel's");
    zt_model_free(m, 1);
}

int main(void) {
    zt_backend_cpu()->set_threads(1);
    for (int i = 0; i < B * T; ++i) {
        inputs[i] = (i * 7 + 3) % 11;
        targets[i] = (i * 5 + 1) % 11;
    }
    /* grouped-query attention, q/k/v biases, tied head */
    zt_model_config gqa = base_config();
    gqa.n_kv_head = 2;
    gqa.intermediate = 24;
    gqa.attention_bias = 1;
    gradcheck(&gqa, "gqa+bias+tied");
    check_moe_units();
    /* multi-query, untied head, llama3 rope scaling that scales, smooths and
     * keeps frequencies (hd 4: wavelengths 6.3, 628; original max 64 with
     * factors 1 / 4 keeps < 16, scales > 64; hd 8 adds the middle band) */
    zt_model_config mqa = base_config();
    mqa.n_head = 2;
    mqa.n_kv_head = 1;
    mqa.head_dim = 8;
    mqa.n_layer = 3;
    mqa.tie_embeddings = 0;
    snprintf(mqa.rope_scaling, sizeof mqa.rope_scaling, "llama3");
    mqa.rope_original_max = 64;
    gradcheck(&mqa, "mqa+untied+llama3");
    /* plain multi-head, head_dim 6 (NH * hd = 12 != C = 16), untied, bias */
    zt_model_config mha = base_config();
    mha.n_head = 2;
    mha.head_dim = 6;
    mha.intermediate = 20;
    mha.attention_bias = 1;
    mha.tie_embeddings = 0;
    mha.rope_theta = 500000;
    gradcheck(&mha, "mha+hd6+untied");
    /* Qwen3: per-head q/k RMSNorm (grouped-query, tied) */
    zt_model_config qkn = base_config();
    qkn.n_kv_head = 2;
    qkn.qk_norm = 1;
    gradcheck(&qkn, "gqa+qk_norm");
    /* yarn: blended frequencies (hd 16, original 64: the ramp over dimensions 0..3)
     * and cos / sin scaled by the attention factor 1 + 0.1 ln 4 */
    zt_model_config yarn = base_config();
    yarn.head_dim = 16;
    yarn.n_head = 2;
    snprintf(yarn.rope_scaling, sizeof yarn.rope_scaling, "yarn");
    yarn.rope_factor = 4;
    yarn.rope_original_max = 64;
    gradcheck(&yarn, "yarn");
    /* Gemma 2: soft-caps that bend (1.5 on scores, 2 on logits), window 3 <
     * T on layers 0 and 2, layer 1 full; query_pre_attn_scalar 3; tied */
    zt_model_config g2 = base_config();
    g2.n_layer = 3;
    g2.n_kv_head = 2;
    g2.intermediate = 24;
    g2.gemma = 2;
    g2.query_pre_attn_scalar = 3;
    g2.attn_softcap = 1.5;
    g2.final_softcap = 2;
    g2.sliding_window = 3;
    g2.sliding_pattern = 2;
    fd_eps = 2e-3;
    gradcheck(&g2, "gemma2");
    /* Gemma 3: q/k norms, multi-query, window 2 on layers 0-1, layer 2 full
     * with linear rope scaling, the sliding layers at rotary base 100; untied */
    zt_model_config g3 = base_config();
    g3.n_layer = 3;
    g3.n_head = 2;
    g3.n_kv_head = 1;
    g3.head_dim = 8;
    g3.qk_norm = 1;
    g3.gemma = 3;
    g3.sliding_window = 2;
    g3.sliding_pattern = 3;
    g3.rope_local_theta = 100;
    snprintf(g3.rope_scaling, sizeof g3.rope_scaling, "linear");
    g3.rope_factor = 2;
    g3.tie_embeddings = 0;
    gradcheck(&g3, "gemma3");
    fd_eps = 1e-2;
    /* Mistral: window 3 < T on every layer; Qwen2: q/k/v biases, window 2
     * from layer 1 of 3 (max_window_layers 1) */
    zt_model_config mis = base_config();
    mis.n_kv_head = 2;
    mis.sliding_window = 3;
    gradcheck(&mis, "mistral window");
    zt_model_config qsw = base_config();
    qsw.n_layer = 3;
    qsw.attention_bias = 1;
    qsw.sliding_window = 2;
    qsw.sliding_from = 1;
    gradcheck(&qsw, "qwen2 window from layer 1");
    {   /* a backend without the Gemma kernels: refused with a status */
        zt_backend nog = *zt_backend_cpu();
        nog.gqa_ext_fwd = NULL;
        zt_llama *lm = NULL;
        zt_status st;
        const int rc = zt_llama_new(&g3, &nog, &lm, &st);
        tap_ok(rc == ZT_EUNSUPPORTED && !lm && strstr(st.msg, "Gemma kernels"),
               "gemma on a backend lacking gqa_ext: refused (%s)", rc ? st.msg : "accepted");
        zt_llama_free(lm);
    }
    /* recomputation is bitwise, tied and untied (3 layers: groups 2 + 1) */
    ckpt_bitwise(&g2, "gemma2");
    ckpt_bitwise(&g3, "gemma3");
    ckpt_bitwise(&qkn, "qk_norm");
    ckpt_bitwise(&qsw, "qwen2 window");
    zt_model_config ck = gqa;
    ck.n_layer = 3;
    ckpt_bitwise(&ck, "tied");
    ckpt_bitwise(&mqa, "untied");
    return tap_done();
}
