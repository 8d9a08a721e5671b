/*
 * test_arch.c -- the architecture descriptors (libtrain/arch.h): for every
 * built-in architecture, the model its descriptor creates has exactly the
 * descriptor's units (sizes from the tensor table and shape function) and
 * every tensor has a distinct Hugging Face name; the planner's activation
 * bytes are the descriptor's; lookup by name and by Hugging Face class;
 * ztrain.model.hf_architecture: the class a model exports as, refused when
 * it cannot express the model, and the fallback without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arch.h"
#include "memplan.h"
#include "model.h"
#include "tap.h"

static zt_config *config(const char *const *kv, zt_status *st) {
    zt_config *c = zt_config_new();
    for (int i = 0; c && kv[i]; i += 2)
        if (zt_config_set(c, kv[i], kv[i + 1], ZT_SRC_FLAG, st) != ZT_OK) {
            zt_config_free(c);
            return NULL;
        }
    return c;
}

/* The descriptor's model against the descriptor's tables. */
static void check_layout(const char *what, const char *const *kv) {
    zt_status st;
    zt_config *c = config(kv, &st);
    int rc = c ? zt_config_finalize(c, 1, &st) : ZT_EINVAL;
    const zt_model_config *mc = c ? &c->model : NULL;
    const zt_arch *a = mc ? zt_arch_of(mc) : NULL;
    const zt_model_ops *ops = NULL;
    void *self = NULL;
    zt_model *m = NULL;
    if (rc == ZT_OK) rc = a->create(mc, zt_backend_cpu(), 0, &ops, &self, &st);
    if (rc == ZT_OK) rc = zt_model_create(ops, self, mc, zt_backend_cpu(), 0, &m, &st);
    if (!tap_ok(rc == ZT_OK && ops == a->model_ops, "%s: the descriptor creates its model (%s)",
                what, rc ? st.msg : "")) {
        zt_config_free(c);
        return;
    }
    int units_ok = m->n_units == mc->n_layer + 2;
    for (int u = 0; units_ok && u < m->n_units; ++u)
        units_ok = m->units[u].numel == zt_arch_unit_numel(a, mc, u);
    tap_ok(units_ok, "%s: %d units, each of the size the tensor table gives", what, m->n_units);
    int named = 1;
    char (*hf)[128] = calloc((size_t)m->n_tensors, sizeof *hf);
    char why[160];
    const zt_arch_hf *fam = zt_arch_hf_export(mc, NULL, why, sizeof why);   /* its export's names */
    for (int t = 0; hf && named && t < m->n_tensors; ++t) {
        int tr;
        long r0, rows;
        named = zt_arch_hf_part(a, fam, mc, m->tensors[t].name, hf[t], sizeof hf[t], &tr, &r0,
                                &rows) == 0;
        for (int u = 0; named && u < t; ++u) named = strcmp(hf[u], hf[t]) != 0;
        if (!named) tap_diag("tensor %s: no or a repeated Hugging Face name", m->tensors[t].name);
    }
    tap_ok(hf && named, "%s: all %d tensors have distinct Hugging Face names", what, m->n_tensors);
    free(hf);
    tap_ok(zt_memplan_acts_bytes(mc, 3, 7, 1, 2, 4) ==
               a->acts_bytes(mc, 3, 7, 1, 2, 4) + 2 * 3 * 7 * 4,
           "%s: the planner's activation bytes are the descriptor's", what);
    zt_model_free(m, 1);
    zt_config_free(c);
}

/* finalize's verdict on a model configuration; the message in msg */
static int finalize(const char *const *kv, char *msg, size_t n) {
    zt_status st;
    zt_config *c = config(kv, &st);
    int rc = c ? zt_config_finalize(c, 1, &st) : st.code;
    snprintf(msg, n, "%s", rc ? st.msg : "");
    zt_config_free(c);
    return rc;
}

int main(void) {
    static const char *const gpt[] = {"ztrain.model.n_layer", "2", NULL};
    static const char *const llama[] = {"ztrain.model.arch", "llama", "ztrain.model.n_layer", "2",
                                        "ztrain.model.n_kv_head", "2", "ztrain.model.attention_bias",
                                        "true", "ztrain.model.tie_embeddings", "false", NULL};
    check_layout("gpt2", gpt);
    check_layout("llama (GQA, q/k/v biases, untied)", llama);
    static const char *const qwen3[] = {"ztrain.model.arch", "llama", "ztrain.model.n_layer", "2",
                                        "ztrain.model.n_kv_head", "2", "ztrain.model.qk_norm", "true", NULL};
    check_layout("llama (GQA, q/k norms, tied)", qwen3);
    static const char *const gemma2[] = {"ztrain.model.arch", "llama", "ztrain.model.n_layer", "2",
                                         "ztrain.model.gemma", "2", "ztrain.model.sliding_window", "4",
                                         "ztrain.model.sliding_pattern", "2", NULL};
    check_layout("llama (Gemma 2: post norms, Gemma's names)", gemma2);
    static const char *const gemma3[] = {"ztrain.model.arch", "llama", "ztrain.model.n_layer", "3",
                                         "ztrain.model.gemma", "3", "ztrain.model.qk_norm", "true",
                                         "ztrain.model.rope_local_theta", "10000",
                                         "ztrain.model.tie_embeddings", "false", NULL};
    check_layout("llama (Gemma 3: q/k norms, post norms, untied)", gemma3);

    const zt_arch *a = NULL;
    tap_ok(zt_arch_find("llama") == &zt_arch_llama && zt_arch_find("gpt2") == &zt_arch_gpt2 &&
               !zt_arch_find("gpt3"), "lookup by name");
    const zt_arch_hf *f = zt_arch_hf_find(NULL, "qwen2", &a);
    tap_ok(f && a == &zt_arch_llama && !strcmp(f->architectures, "Qwen2ForCausalLM") &&
               zt_arch_hf_find("GPT2LMHeadModel", "llama", &a) && a == &zt_arch_gpt2 &&
               zt_arch_hf_find("Qwen3ForCausalLM", NULL, NULL) && !zt_arch_hf_find("GemmaForCausalLM", NULL, NULL) &&
               zt_arch_hf_find(NULL, "gemma3_text", &a) && a == &zt_arch_llama,
           "lookup by Hugging Face class (architectures before model_type)");

    char msg[512];
    static const char *const qwen_nobias[] = {"ztrain.model.arch", "llama", "ztrain.model.hf_architecture",
                                              "Qwen2ForCausalLM", NULL};
    tap_ok(finalize(qwen_nobias, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "attention_bias=true"),
           "hf_architecture=Qwen2ForCausalLM without q/k/v biases is refused (%s)", msg);
    static const char *const llama_bias[] = {"ztrain.model.arch", "llama", "ztrain.model.attention_bias",
                                             "true", "ztrain.model.hf_architecture", "LlamaForCausalLM", NULL};
    tap_ok(finalize(llama_bias, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "Qwen2"),
           "hf_architecture=LlamaForCausalLM with q/k/v biases is refused (%s)", msg);
    static const char *const qwen3_nonorm[] = {"ztrain.model.arch", "llama", "ztrain.model.hf_architecture",
                                                "Qwen3ForCausalLM", NULL};
    tap_ok(finalize(qwen3_nonorm, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "qk_norm=true"),
           "hf_architecture=Qwen3ForCausalLM without q/k norms is refused (%s)", msg);
    static const char *const llama_qkn[] = {"ztrain.model.arch", "llama", "ztrain.model.qk_norm", "true",
                                            "ztrain.model.hf_architecture", "LlamaForCausalLM", NULL};
    tap_ok(finalize(llama_qkn, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "Qwen3"),
           "hf_architecture=LlamaForCausalLM with q/k norms is refused (%s)", msg);
    static const char *const gpt_qkn[] = {"ztrain.model.qk_norm", "true", NULL};
    tap_ok(finalize(gpt_qkn, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "qk_norm is a llama setting"),
           "qk_norm on gpt2 is refused (%s)", msg);
    static const char *const no_gemma[] = {"ztrain.model.arch", "llama", "ztrain.model.attn_softcap",
                                           "50", NULL};
    tap_ok(finalize(no_gemma, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "attn_softcap is a Gemma setting"),
           "a Gemma setting without ztrain.model.gemma is refused (%s)", msg);
    static const char *const gemma2_q3[] = {"ztrain.model.arch", "llama", "ztrain.model.gemma", "2",
                                            "ztrain.model.hf_architecture", "Gemma3ForCausalLM", NULL};
    tap_ok(finalize(gemma2_q3, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "gemma=3"),
           "hf_architecture=Gemma3ForCausalLM for a Gemma 2 model is refused (%s)", msg);
    static const char *const llama_gemma[] = {"ztrain.model.arch", "llama", "ztrain.model.gemma", "3",
                                              "ztrain.model.qk_norm", "true", "ztrain.model.hf_architecture",
                                              "Qwen3ForCausalLM", NULL};
    tap_ok(finalize(llama_gemma, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "no Gemma blocks"),
           "hf_architecture=Qwen3ForCausalLM for a Gemma 3 model is refused (%s)", msg);
    static const char *const gemma_bad[] = {"ztrain.model.arch", "llama", "ztrain.model.gemma", "1", NULL};
    tap_ok(finalize(gemma_bad, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "0, 2 or 3"),
           "ztrain.model.gemma=1 is refused (%s)", msg);
    static const char *const gpt_gemma[] = {"ztrain.model.gemma", "2", NULL};
    tap_ok(finalize(gpt_gemma, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "gemma is a llama setting"),
           "gemma on gpt2 is refused (%s)", msg);
    static const char *const pad_big[] = {"ztrain.model.arch", "llama", "ztrain.model.vocab", "50",
                                          "ztrain.model.pad_token_id", "50", NULL};
    tap_ok(finalize(pad_big, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "pad_token_id=50 must be below"),
           "pad_token_id outside the vocabulary is refused (%s)", msg);
    static const char *const gpt_pad[] = {"ztrain.model.pad_token_id", "3", NULL};
    tap_ok(finalize(gpt_pad, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "pad_token_id is a llama setting"),
           "pad_token_id on gpt2 is refused (%s)", msg);
    static const char *const gpt_llama[] = {"ztrain.model.hf_architecture", "MistralForCausalLM", NULL};
    tap_ok(finalize(gpt_llama, msg, sizeof msg) == ZT_EINVAL && strstr(msg, "gpt2 architecture"),
           "a class of another architecture is refused (%s)", msg);
    static const char *const mistral[] = {"ztrain.model.arch", "llama", "ztrain.model.hf_architecture",
                                          "MistralForCausalLM", NULL};
    tap_ok(finalize(mistral, msg, sizeof msg) == ZT_OK, "hf_architecture=MistralForCausalLM (%s)", msg);

    /* the class an export writes */
    zt_status st;
    zt_config *c = config(mistral, &st);
    char why[200];
    f = c ? zt_arch_hf_export(&c->model, NULL, why, sizeof why) : NULL;
    tap_ok(f && !strcmp(f->architectures, "MistralForCausalLM") && !strcmp(f->model_type, "mistral"),
           "a stored class is exported (Mistral without its original directory)");
    if (c) zt_config_set(c, "ztrain.model.hf_architecture", "", ZT_SRC_FLAG, &st);
    f = c ? zt_arch_hf_export(&c->model, "Qwen2ForCausalLM", why, sizeof why) : NULL;
    tap_ok(f && !strcmp(f->architectures, "LlamaForCausalLM"),
           "none stored: an original class that cannot express the model falls back to Llama");
    f = c ? zt_arch_hf_export(&c->model, "MistralForCausalLM", why, sizeof why) : NULL;
    tap_ok(f && !strcmp(f->architectures, "MistralForCausalLM"),
           "none stored: the original directory's class (checkpoints from before the key)");
    if (c) zt_config_set(c, "ztrain.model.attention_bias", "true", ZT_SRC_FLAG, &st);
    f = c ? zt_arch_hf_export(&c->model, NULL, why, sizeof why) : NULL;
    tap_ok(f && !strcmp(f->architectures, "Qwen2ForCausalLM"),
           "none stored: q/k/v biases export as Qwen2 (Llama's attention_bias also biases o_proj)");
    zt_config_free(c);
    return tap_done();
}
