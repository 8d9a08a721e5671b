/*
 * test_classifier.c -- the LM head + loss in chunks of rows (libtrain/
 * classifier.h), on the cpu backend:
 *  - the chunk rows: ztrain.classifier_chunk_rows, auto (256 MiB of fp32
 *    logits: 523 rows at vocab 128256, 16 chunks of 512 for 8192 rows),
 *    balanced chunks, the rows the activations hold;
 *  - GPT-2 (tied), Llama (untied), Gemma 2 (tied, final logit soft-cap) with
 *    N = 10 rows, some targets -1: chunks of 1, 3 and 4 rows (4, 3 chunks:
 *    not dividing N) against one chunk (the head as one [N, V] array): the
 *    loss within 1e-6 relative, every gradient within 1e-6 of the largest
 *    (the measured figures are printed); the chunked run
 *    repeated is bitwise the same; the eval block's loss is the training
 *    forward's bitwise; a second backward without a forward (every chunk
 *    recomputed, the fused kernel on the last one too) gives the first's
 *    gradients bitwise; the probabilities of the last chunk's rows are the
 *    one-chunk run's within 1e-6 (bitwise where the BLAS sums as it did),
 *    the other rows have none (NULL);
 *  - the activation block holds one chunk: its bytes shrink by exactly
 *    (N - R) V floats (twice with the soft-cap), as the planner counts;
 *  - the fused head (classifier.h "fused": the engine told the backward's
 *    dloss before the forward, zt_model_config.w16 ZT_W16_HEADFUSE), chunks of 3 rows:
 *    the loss and every gradient bitwise the recomputing head's; a backward
 *    with another dloss fails (ZT_EINVAL), with nothing else wrong; with
 *    headfuse 0 the engine's dloss changes nothing (the path of before).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "classifier.h"
#include "gpt.h"
#include "llama.h"
#include "shard.h"
#include "tap.h"

enum { B = 2, T = 5, N = B * T };
static int inputs[N], targets[N];

typedef struct run {
    const zt_model_ops *ops;
    void *self;
    zt_model *m;
    zt_shard *sh;
    void *a;
} run;

static int build(const zt_model_config *mc, run *r, zt_status *st) {
    const zt_backend *be = zt_backend_cpu();
    memset(r, 0, sizeof *r);
    if (!strcmp(mc->arch, "llama")) {
        zt_llama *lm;
        ZT_TRY(zt_llama_new(mc, be, &lm, st));
        r->ops = zt_llama_ops();
        r->self = lm;
    } else {
        zt_gpt *g;
        ZT_TRY(zt_gpt_new(mc, be, &g, st));
        r->ops = zt_gpt_ops();
        r->self = g;
    }
    ZT_TRY(zt_model_create(r->ops, r->self, mc, be, ZT_MODEL_PARAMS | ZT_MODEL_GRADS, &r->m, st));
    ZT_TRY(zt_shard_create(r->m, 0, 1, NULL, &r->sh, st));
    zt_shard_init_params(r->sh, 7);
    for (size_t i = 0; i < r->m->num_params; ++i) r->m->params[i] += (float)(0.1 * zt_normal(99, i));
    return r->ops->acts_create(r->self, B, T, 1, ZT_MEM_ACTIVATIONS, &r->a, st);
}

static void unbuild(run *r) {
    if (r->a) r->ops->acts_free(r->self, r->a);
    zt_shard_free(r->sh);
    if (r->m) zt_model_free(r->m, 1);
    else if (r->self && r->ops == zt_llama_ops()) zt_llama_free(r->self);
    else if (r->self) zt_gpt_free(r->self);
}

/* forward (sum of the losses) and backward into zeroed gradients */
static int step(run *r, double *loss, zt_status *st) {
    zt_backend_cpu()->zero(r->m->grads, r->m->num_params * sizeof(float));
    ZT_TRY(zt_shard_forward(r->sh, r->a, inputs, targets, B, T, 1, loss, st));
    return zt_shard_backward(r->sh, r->a, 1.0f / (float)N, st);
}

/* build mc's run and take one step: a copy of its gradients (*np of them),
 * or NULL after a failed check named `what` (the run then unbuilt) */
static float *first_step(const zt_model_config *mc, run *r, double *loss, size_t *np,
                         const char *what) {
    zt_status st;
    if (build(mc, r, &st) != ZT_OK || step(r, loss, &st) != ZT_OK) {
        tap_ok(0, "%s: %s", what, st.msg);
        unbuild(r);
        return NULL;
    }
    *np = r->m->num_params;
    float *g = malloc(*np * sizeof(float));
    memcpy(g, r->m->grads, *np * sizeof(float));
    return g;
}

static size_t acts_bytes(const zt_model_config *mc, int training) {
    return !strcmp(mc->arch, "llama") ? zt_llama_acts_bytes_ckpt(mc, B, T, training, 0)
                                      : zt_gpt_acts_bytes_ckpt(mc, B, T, training, 0);
}

static void check_model(const zt_model_config *base, const char *what) {
    zt_status st;
    const int V = base->vocab, capped = base->gemma && base->final_softcap > 0;
    run ref;
    double l0 = NAN;
    size_t np = 0;
    char tag0[96];
    snprintf(tag0, sizeof tag0, "%s: one chunk", what);
    float *g0 = first_step(base, &ref, &l0, &np, tag0);
    if (!g0) return;
    double gmax = 0;
    for (size_t i = 0; i < np; ++i) gmax = fmax(gmax, fabs((double)g0[i]));
    /* the one-chunk run's probabilities (a forward of its own: after the
     * backward the buffer holds gradients) */
    float *p0 = malloc((size_t)N * V * sizeof(float));
    double unused;
    int pok = zt_shard_forward(ref.sh, ref.a, inputs, targets, B, T, 1, &unused, &st) == ZT_OK;
    for (int i = 0; pok && i < N; ++i) {
        const float *p = ref.ops->probs(ref.self, ref.a, i / T, i % T);
        if (p) memcpy(p0 + (size_t)i * V, p, (size_t)V * sizeof(float));
        else pok = 0;
    }
    tap_ok(pok, "%s: one chunk: the probabilities of all %d rows", what, N);

    const int rows[] = {1, 3, 4};
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ++ri) {
        zt_model_config mc = *base;
        mc.classifier_rows = rows[ri];
        const long R = zt_classifier_rows(&mc, N, 1, capped), nch = (N + R - 1) / R;
        char tag[96];
        snprintf(tag, sizeof tag, "%s, chunk rows %d (%ld chunks of %ld)", what, rows[ri], nch, R);
        run r;
        double l1 = NAN, l2 = NAN;
        if (build(&mc, &r, &st) != ZT_OK || step(&r, &l1, &st) != ZT_OK) {
            tap_ok(0, "%s: %s", tag, st.msg);
            unbuild(&r);
            continue;
        }
        double worst = 0;
        for (size_t i = 0; i < np; ++i) worst = fmax(worst, fabs((double)r.m->grads[i] - g0[i]));
        tap_ok(fabs(l1 - l0) <= 1e-6 * fabs(l0) && worst <= 1e-6 * gmax,
               "%s: loss %.9g vs one chunk %.9g (%s), gradients within %.2e of the largest %.3g",
               tag, l1 / N, l0 / N, l1 == l0 ? "bitwise" : "1e-6", worst, gmax);
        float *g1 = malloc(np * sizeof(float));
        memcpy(g1, r.m->grads, np * sizeof(float));
        int det = step(&r, &l2, &st) == ZT_OK && l2 == l1 && !memcmp(g1, r.m->grads, np * sizeof(float));
        tap_ok(det, "%s: deterministic (a second step bitwise the first)", tag);
        /* a backward with no forward before it: the last chunk recomputed too */
        zt_backend_cpu()->zero(r.m->grads, np * sizeof(float));
        int rec = zt_shard_backward(r.sh, r.a, 1.0f / (float)N, &st) == ZT_OK &&
                  !memcmp(g1, r.m->grads, np * sizeof(float));
        tap_ok(rec, "%s: a backward recomputing every chunk (xent_fused) gives the same gradients bitwise", tag);
        /* probabilities: the last chunk's rows, those of the one-chunk run
         * within 1e-6 (bitwise where the BLAS sums a row the same way at
         * every row count: OpenBLAS's small-matrix kernels (AVX-512
         * machines) sum a chunk of 1 row in another order than one of 10,
         * as the losses above show); no other row */
        double lf = NAN, pworst = 0;
        int prob = zt_shard_forward(r.sh, r.a, inputs, targets, B, T, 1, &lf, &st) == ZT_OK && lf == l1;
        const long last0 = (nch - 1) * R;
        for (int i = 0; prob && i < N; ++i) {
            const float *p = r.ops->probs(r.self, r.a, i / T, i % T);
            prob = i < last0 ? p == NULL : p != NULL;
            for (int v = 0; prob && i >= last0 && v < V; ++v)
                pworst = fmax(pworst, fabs((double)p[v] - p0[(size_t)i * V + v]));
        }
        tap_ok(prob && pworst <= 1e-6, "%s: probabilities of the last chunk's rows %ld..%d those of one chunk (%s: %.2e), "
               "none for the others", tag, last0, N - 1, pworst == 0 ? "bitwise" : "1e-6", pworst);
        {   /* an eval block's forward: the same loss */
            void *ev = NULL;
            double le = NAN;
            if (r.ops->acts_create(r.self, B, T, 0, ZT_MEM_EVAL, &ev, &st) == ZT_OK)
                zt_shard_forward(r.sh, ev, inputs, targets, B, T, 0, &le, &st);
            tap_ok(le == l1, "%s: the eval block's forward gives the training loss bitwise", tag);
            r.ops->acts_free(r.self, ev);
        }
        /* the activations hold one chunk of logits (and capped logits) */
        const size_t RV = ZT_ACTS_ROUND((size_t)R * V), NV = ZT_ACTS_ROUND((size_t)N * V);
        const size_t tr = acts_bytes(base, 1) - acts_bytes(&mc, 1), ev = acts_bytes(base, 0) - acts_bytes(&mc, 0);
        const long held = zt_classifier_buffer_rows(&mc, N, 1, capped);
        const size_t HV = ZT_ACTS_ROUND((size_t)held * V);
        tap_ok(held == (rows[ri] < N ? rows[ri] : N) && HV >= RV &&
                   tr == (NV - HV) * 4 * (capped ? 2 : 1) && ev == (NV - HV) * 4 &&
                   zt_classifier_chunk_bytes(&mc, N, 1, capped) == HV * 4 * (capped ? 2 : 1),
               "%s: the activations hold %ld rows of logits: %zu bytes fewer (training), %zu (eval)",
               tag, held, tr, ev);
        free(g1);
        unbuild(&r);
    }
    free(g0);
    free(p0);
    unbuild(&ref);
}

/* The fused head against the recomputing one (chunks of 3 rows). */
static void check_fused(const zt_model_config *base, const char *what) {
    zt_status st;
    zt_model_config mc = *base;
    mc.classifier_rows = 3;
    mc.w16 |= ZT_W16_HEADFUSE;
    run r;
    double l0 = NAN, l1 = NAN, l2 = NAN;
    const float dl = 1.0f / (float)N;
    size_t np = 0;
    char tag0[96];
    snprintf(tag0, sizeof tag0, "%s fused", what);
    float *g0 = first_step(&mc, &r, &l0, &np, tag0);
    if (!g0) return;
    /* told the dloss: fused */
    r.sh->fwd_dloss = dl;
    r.sh->fwd_dloss_set = 1;
    int ok = step(&r, &l1, &st) == ZT_OK;
    tap_ok(ok && l1 == l0 && !memcmp(g0, r.m->grads, np * sizeof(float)),
           "%s: the fused head's loss (%.9g) and gradients bitwise the recomputing head's%s%s", what, l1,
           ok ? "" : ": ", ok ? "" : st.msg);
    /* a backward with another dloss than the forward's */
    zt_backend_cpu()->zero(r.m->grads, np * sizeof(float));
    ok = zt_shard_forward(r.sh, r.a, inputs, targets, B, T, 1, &l2, &st) == ZT_OK;
    const int rc = ok ? zt_shard_backward(r.sh, r.a, 2.0f * dl, &st) : ZT_OK;
    tap_ok(ok && rc == ZT_EINVAL && strstr(st.msg, "fused") && l2 == l0,
           "%s: a backward with dloss 2 / N after a forward fused with 1 / N fails: %s", what, st.msg);
    /* the hook: headfuse 0, the dloss told, the path of before */
    r.sh->fwd_dloss_set = 0;
    unbuild(&r);
    mc.w16 &= ~ZT_W16_HEADFUSE;
    if (build(&mc, &r, &st) == ZT_OK) {
        r.sh->fwd_dloss = dl;
        r.sh->fwd_dloss_set = 1;
        ok = step(&r, &l1, &st) == ZT_OK;
        tap_ok(ok && l1 == l0 && !memcmp(g0, r.m->grads, np * sizeof(float)),
               "%s: headfuse 0 with the dloss told: bitwise the same (recomputing)", what);
    } else {
        tap_ok(0, "%s headfuse 0: %s", what, st.msg);
    }
    unbuild(&r);
    free(g0);
}

static zt_model_config llama_config(void) {
    zt_model_config mc = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .context = 6,
                          .vocab = 11, .pad_token_id = -1, .intermediate = 24};
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
    return mc;
}

/* The auto rows of a block (training, capped) of mc at vocab 128256 and 8192
 * rows: the most rows, the chunks' rows, the rows held, the rows the carve
 * sets (rmax) and the chunk's bytes, which must agree. */
static int auto_rows(const zt_model_config *mc, int training, int capped, long want_max,
                     long want_rows) {
    zt_carve cv = {0};
    zt_classifier c = {0};
    zt_classifier_carve(&cv, &c, mc, 8192, training, capped);
    const size_t RV = (size_t)want_max * (size_t)mc->vocab;
    const size_t bytes = zt_classifier_l16(mc, training, capped)
                             ? ((RV + 127) & ~(size_t)127) * 2
                             : ZT_ACTS_ROUND(RV) * (training && capped ? 2 : 1) * 4;
    return zt_classifier_max_rows(mc, training, capped) == want_max &&
           zt_classifier_rows(mc, 8192, training, capped) == want_rows &&
           zt_classifier_buffer_rows(mc, 8192, training, capped) == want_max && c.rmax == want_max &&
           zt_classifier_chunk_bytes(mc, 8192, training, capped) == bytes;
}

static void check_rows(void) {
    /* (the bf16 logits' rule: ZT_TEST_NO_L16 unset here, restored after) */
    const char *nl = getenv("ZT_TEST_NO_L16");
    char *nl_was = nl ? strdup(nl) : NULL;
    unsetenv("ZT_TEST_NO_L16");
    zt_model_config mc = {.vocab = 128256};
    const long rmax = zt_classifier_max_rows(&mc, 1, 0);
    tap_ok(rmax == (long)(ZT_CLASSIFIER_AUTO_BYTES / (128256 * 4)) && rmax == 523 &&
               zt_classifier_rows(&mc, 8192, 1, 0) == 512 &&
               zt_classifier_buffer_rows(&mc, 8192, 1, 0) == 523 &&
               zt_classifier_rows(&mc, 100, 1, 0) == 100 &&
               zt_classifier_buffer_rows(&mc, 100, 1, 0) == 100 &&
               zt_classifier_rows(&mc, 524, 1, 0) == 262 && auto_rows(&mc, 1, 0, 523, 512),
           "auto at vocab 128256, fp32 logits: %ld rows (256 MiB); 8192 rows in 16 chunks of 512 "
           "(the block holds 523), 100 rows in one, 524 in two of 262", rmax);
    /* bf16 logits (a training block with the bf16 activations, no soft-cap)
     * and a head that takes a gradient: 256 MiB of bf16 logits */
    mc.acts16 = 1;
    const long r16 = zt_classifier_max_rows(&mc, 1, 0);
    tap_ok(zt_classifier_l16(&mc, 1, 0) && r16 == (long)(ZT_CLASSIFIER_AUTO_BYTES / (128256 * 2)) &&
               r16 == 1046 && auto_rows(&mc, 1, 0, 1046, 1024) &&
               zt_classifier_rows(&mc, 1046, 1, 0) == 1046 && zt_classifier_rows(&mc, 1047, 1, 0) == 524,
           "auto, bf16 logits, full fine-tuning: %ld rows (256 MiB of bf16); 8192 rows in 8 chunks "
           "of 1024, 1047 in two of 524", r16);
    tap_ok(auto_rows(&mc, 0, 0, 523, 512) && auto_rows(&mc, 1, 1, 523, 512),
           "auto, the same model's eval block (fp32 logits) and a training block with a final "
           "soft-cap (fp32): 523 rows, 16 chunks of 512");
    setenv("ZT_TEST_NO_L16", "1", 1);
    tap_ok(!zt_classifier_l16(&mc, 1, 0) && auto_rows(&mc, 1, 0, 523, 512),
           "auto, ZT_TEST_NO_L16 (fp32 logits): 523 rows, 16 chunks of 512");
    unsetenv("ZT_TEST_NO_L16");
    /* LoRA: the head is frozen (no dw GEMM), the bf16 chunk keeps the rows
     * of fp32 logits (128 MiB) */
    mc.lora_r = 16;
    tap_ok(zt_classifier_l16(&mc, 1, 0) && auto_rows(&mc, 1, 0, 523, 512),
           "auto, bf16 logits, LoRA (the head frozen): 523 rows, 16 chunks of 512");
    mc.lora_r = 0;
    mc.acts16 = 0;
    tap_ok(auto_rows(&mc, 1, 0, 523, 512), "auto, fp32 activations (fp32 logits): 523 rows");
    /* set rows: as given, whatever the block */
    mc.acts16 = 1;
    mc.classifier_rows = 512;
    tap_ok(auto_rows(&mc, 1, 0, 512, 512) && auto_rows(&mc, 0, 0, 512, 512),
           "classifier_chunk_rows 512, bf16 logits, full fine-tuning: 16 chunks of 512 (the rows "
           "of before); eval 512");
    mc.classifier_rows = 0;
    mc.vocab = 1 << 30;
    tap_ok(zt_classifier_max_rows(&mc, 1, 0) == 1 && zt_classifier_max_rows(&mc, 0, 0) == 1,
           "auto: at least one row");
    mc.vocab = 11;
    mc.classifier_rows = 3;
    tap_ok(zt_classifier_max_rows(&mc, 1, 0) == 3 && zt_classifier_rows(&mc, 10, 1, 0) == 3 &&
               zt_classifier_rows(&mc, 9, 1, 0) == 3 && zt_classifier_rows(&mc, 2, 1, 0) == 2 &&
               zt_classifier_buffer_rows(&mc, 2, 1, 0) == 2,
           "classifier_chunk_rows 3: 10 rows in chunks of 3 (3, 3, 3, 1), 9 in 3, 2 in one");
    mc.classifier_rows = 4;
    tap_ok(zt_classifier_rows(&mc, 10, 1, 0) == 4 && zt_classifier_rows(&mc, 9, 0, 0) == 3,
           "classifier_chunk_rows 4: 10 rows in chunks of 4 (4, 4, 2), 9 in three of 3");
    if (nl_was) setenv("ZT_TEST_NO_L16", nl_was, 1);
    free(nl_was);
}

int main(void) {
    zt_backend_cpu()->set_threads(1);
    for (int i = 0; i < N; ++i) {
        inputs[i] = (i * 7 + 3) % 11;
        targets[i] = (i * 5 + 1) % 11;
    }
    targets[2] = targets[7] = -1;   /* ignored positions: loss 0, no gradient */
    check_rows();
    zt_model_config gpt = {.n_layer = 2, .n_head = 2, .n_embd = 8, .context = 6, .vocab = 11};
    snprintf(gpt.arch, sizeof gpt.arch, "gpt2");
    gpt.tie_embeddings = 1;
    gpt.pad_token_id = -1;
    check_model(&gpt, "gpt2");
    check_fused(&gpt, "gpt2");
    zt_model_config un = llama_config();
    un.tie_embeddings = 0;
    check_model(&un, "llama untied");
    check_fused(&un, "llama untied");
    zt_model_config g2 = llama_config();
    g2.tie_embeddings = 1;
    g2.gemma = 2;
    g2.query_pre_attn_scalar = 3;
    g2.attn_softcap = 1.5;
    g2.final_softcap = 2;
    check_model(&g2, "gemma2 soft-capped");
    check_fused(&g2, "gemma2 soft-capped");
    return tap_done();
}
