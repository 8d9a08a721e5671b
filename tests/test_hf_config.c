/*
 * test_hf_config.c -- Hugging Face config.json into the configuration
 * (zt_hf_read_config, zt_hf_check_config; docs/huggingface.md): both rope
 * forms (transformers 4.x rope_theta + rope_scaling with "type" or
 * "rope_type", 5.x rope_parameters) give the same keys; transformers'
 * per-architecture defaults for absent keys (Llama, Mistral, Qwen2, GPT-2);
 * Qwen2's q/k/v biases; refusals by name (architecture, rope type, hidden_act,
 * Llama attention_bias / mlp_bias, partial rotary, GPT-2 epsilon / n_inner);
 * a flag that disagrees names both values; sliding windows as transformers
 * applies them (Mistral, Phi-3: every layer; Qwen2: from max_window_layers
 * on, or as layer_types says) at any training length, the others refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tap.h"
#include "ztrain.h"
#include "ztrain_ckpt.h"

static char dir[64], path[128];

static void put(const char *json) {
    FILE *fp = fopen(path, "w");
    fputs(json, fp);
    fclose(fp);
}

/* keys: "key=value;key=value" as zt_config_get shows them */
static int has(const zt_config *c, const char *keys) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", keys);
    int good = 1;
    for (char *kv = strtok(buf, ";"); kv; kv = strtok(NULL, ";")) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        char v[128];
        zt_status st;
        if (zt_config_get(c, kv, v, sizeof v, &st) != ZT_OK || strcmp(v, eq + 1) != 0) {
            tap_diag("%s = %s, expected %s", kv, v, eq + 1);
            good = 0;
        }
    }
    return good;
}

static void reads(const char *name, const char *json, const char *keys) {
    put(json);
    zt_config *c = zt_config_new();
    zt_status st;
    memset(&st, 0, sizeof st);
    int rc = zt_hf_read_config(dir, c, &st);
    tap_ok(rc == ZT_OK && has(c, keys), "%s%s%s", name, rc ? ": " : "", rc ? st.msg : "");
    zt_config_free(c);
}

static void refuses(const char *name, const char *json, int code, const char *needle) {
    put(json);
    zt_config *c = zt_config_new();
    zt_status st;
    memset(&st, 0, sizeof st);
    int rc = zt_hf_read_config(path, c, &st);
    tap_ok(rc == code && strstr(st.msg, needle) && strstr(st.msg, path), "%s: refused (%s)", name, st.msg);
    zt_config_free(c);
}

#define LLAMA(extra)                                                                         \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, " \
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 300, "             \
    "\"max_position_embeddings\": 128" extra "}"

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zt_hfc_XXXXXX");
    if (!mkdtemp(dir)) tap_skip_all("mkdtemp failed");
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *l3 = "ztrain.model.rope_scaling=llama3;ztrain.model.rope_theta=500000.0;"
                     "ztrain.model.rope_factor=8.0;ztrain.model.rope_low_freq_factor=1.0;"
                     "ztrain.model.rope_high_freq_factor=4.0;ztrain.model.rope_original_max_positions=64";
    reads("4.x: rope_theta + rope_scaling {rope_type: llama3}",
          LLAMA(", \"num_key_value_heads\": 2, \"rope_theta\": 500000.0, \"rope_scaling\": "
                "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"), l3);
    reads("4.x: rope_scaling {type: llama3} (older key)",
          LLAMA(", \"rope_theta\": 500000.0, \"rope_scaling\": {\"type\": \"llama3\", \"factor\": "
                "8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                "\"original_max_position_embeddings\": 64}"), l3);
    reads("5.x: rope_parameters {rope_theta, rope_type: llama3, ...}, rope_scaling null",
          LLAMA(", \"rope_scaling\": null, \"rope_parameters\": {\"rope_theta\": 500000.0, "
                "\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"), l3);
    reads("llama3 without original_max_position_embeddings: max_position_embeddings",
          LLAMA(", \"rope_parameters\": {\"rope_theta\": 1e4, \"rope_type\": \"llama3\", "
                "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0}"),
          "ztrain.model.rope_original_max_positions=128");
    /* issue 44: config.json as Python's json writes it -- an integer beyond 64 bits, NaN, Infinity in
     * keys ztrain does not use are read (and ignored) */
    reads("unused keys holding int(1e30), NaN, -Infinity (Python's json)",
          LLAMA(", \"model_max_length\": 1000000000000000019884624838656, \"x_nan\": NaN, "
                "\"x_inf\": -Infinity, \"x\": [Infinity, 123456789012345678901234567890]"),
          "ztrain.model.context=128;ztrain.model.vocab=300");
    refuses("a used key holding NaN", LLAMA(", \"rms_norm_eps\": NaN"), ZT_EDATA, "rms_norm_eps");
    reads("Llama defaults: kv heads = heads, head_dim = hidden / heads, eps 1e-6, untied, theta 1e4",
          LLAMA(""), "ztrain.model.arch=llama;ztrain.model.n_layer=2;ztrain.model.n_head=4;"
          "ztrain.model.n_embd=64;ztrain.model.context=128;ztrain.model.vocab=300;"
          "ztrain.model.n_kv_head=4;ztrain.model.head_dim=16;ztrain.model.intermediate_size=96;"
          "ztrain.model.rms_norm_eps=1e-06;ztrain.model.tie_embeddings=false;"
          "ztrain.model.rope_theta=10000.0;ztrain.model.rope_scaling=none;"
          "ztrain.model.attention_bias=false");
    reads("explicit head_dim, tied, 5.x default rope",
          LLAMA(", \"head_dim\": 32, \"tie_word_embeddings\": true, \"rope_parameters\": "
                "{\"rope_theta\": 10000.0, \"rope_type\": \"default\"}"),
          "ztrain.model.head_dim=32;ztrain.model.tie_embeddings=true;ztrain.model.rope_scaling=none");
    reads("Qwen2: q/k/v biases, its kv default (32 -> here 4 given)",
          "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4,"
          " \"num_key_value_heads\": 4, \"num_hidden_layers\": 1, \"intermediate_size\": 96}",
          "ztrain.model.attention_bias=true;ztrain.model.vocab=151936;ztrain.model.context=32768");
    reads("Mistral: num_key_value_heads absent -> 8",
          "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 16,"
          " \"num_hidden_layers\": 1, \"intermediate_size\": 96, \"sliding_window\": null}",
          "ztrain.model.n_kv_head=8;ztrain.model.context=131072;ztrain.model.head_dim=4");
    reads("GPT-2: n_positions -> context, tied, model_type when no architectures",
          "{\"model_type\": \"gpt2\", \"n_embd\": 48, \"n_layer\": 3, \"n_head\": 3, "
          "\"n_positions\": 40, \"vocab_size\": 500, \"layer_norm_epsilon\": 1e-05}",
          "ztrain.model.arch=gpt2;ztrain.model.n_embd=48;ztrain.model.n_layer=3;"
          "ztrain.model.context=40;ztrain.model.vocab=500;ztrain.model.tie_embeddings=true");

    /* pad_token_id (nn.Embedding padding_idx): null none, absent the class default
     * (none for Llama; Phi-3 32000, none outside the vocabulary), negative from the end */
    reads("pad_token_id absent (Llama: none)", LLAMA(""), "ztrain.model.pad_token_id=-1");
    reads("pad_token_id 7", LLAMA(", \"pad_token_id\": 7"), "ztrain.model.pad_token_id=7");
    reads("pad_token_id null", LLAMA(", \"pad_token_id\": null"), "ztrain.model.pad_token_id=-1");
    reads("pad_token_id -1 counts from the end (torch)", LLAMA(", \"pad_token_id\": -1"),
          "ztrain.model.pad_token_id=299");
    refuses("pad_token_id outside the vocabulary", LLAMA(", \"pad_token_id\": 300"), ZT_EDATA,
            "pad_token_id=300 is outside the vocabulary (vocab_size=300");
    reads("Phi-3 without pad_token_id: Phi3Config's 32000",
          "{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
          "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"sliding_window\": null}",
          "ztrain.model.vocab=32064;ztrain.model.pad_token_id=32000");
    reads("Phi-3 without pad_token_id, 32000 outside its vocabulary: none",
          "{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
          "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 300, "
          "\"sliding_window\": null}", "ztrain.model.pad_token_id=-1");

    refuses("unknown architecture", "{\"architectures\": [\"BertForMaskedLM\"]}", ZT_EUNSUPPORTED,
            "architecture BertForMaskedLM is not supported");
    refuses("rope_type yarn without original_max_position_embeddings",
            LLAMA(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
            ZT_EDATA, "(yarn) needs original_max_position_embeddings");
    reads("Phi-3 rope type su = longrope; original_max_position_embeddings at the top wins",
          "{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
          "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 300, "
          "\"max_position_embeddings\": 128, \"original_max_position_embeddings\": 32, "
          "\"sliding_window\": null, \"rope_scaling\": {\"type\": \"su\", "
          "\"original_max_position_embeddings\": 16, \"short_factor\": [1, 1, 1, 1, 1, 1.1, 1.3, 1.5], "
          "\"long_factor\": [1.0800000429153442, 2, 3, 4, 5, 6, 7, 8]}}",
          "ztrain.model.rope_scaling=longrope;ztrain.model.rope_original_max_positions=32;"
          "ztrain.model.rope_factor=4.0;ztrain.model.rope_attention_factor=0.0;"
          "ztrain.model.rope_short_factor=1,1,1,1,1,1.1,1.3,1.5;"
          "ztrain.model.rope_long_factor=1.0800000429153442,2,3,4,5,6,7,8");
    reads("Phi-3 longrope without the top-level original_max_position_embeddings: Phi3Config's "
          "4096 replaces the dictionary's",
          "{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, "
          "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 300, "
          "\"max_position_embeddings\": 8192, \"sliding_window\": null, \"rope_scaling\": "
          "{\"rope_type\": \"longrope\", \"original_max_position_embeddings\": 16, "
          "\"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1], \"long_factor\": [2, 2, 2, 2, 2, 2, 2, 2]}}",
          "ztrain.model.rope_original_max_positions=4096;ztrain.model.rope_factor=2.0");
    refuses("rope type longrope (4.x) without its factor lists",
            LLAMA(", \"rope_scaling\": {\"type\": \"longrope\", \"factor\": 2.0, "
                  "\"original_max_position_embeddings\": 16}"),
            ZT_EDATA, "(longrope) needs short_factor");
    refuses("rope type longrope without original_max_position_embeddings",
            LLAMA(", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1], "
                  "\"long_factor\": [2]}"),
            ZT_EDATA, "(longrope) needs original_max_position_embeddings");
    refuses("rope type proportional", LLAMA(", \"rope_scaling\": {\"rope_type\": \"proportional\"}"),
            ZT_EUNSUPPORTED, "rope_type 'proportional' is not supported");
    refuses("llama3 without factor", LLAMA(", \"rope_scaling\": {\"rope_type\": \"llama3\"}"),
            ZT_EDATA, "needs a number factor");
    refuses("hidden_act gelu", LLAMA(", \"hidden_act\": \"gelu\""), ZT_EUNSUPPORTED, "hidden_act 'gelu'");
    refuses("Llama attention_bias", LLAMA(", \"attention_bias\": true"), ZT_EUNSUPPORTED, "o_proj");
    refuses("mlp_bias", LLAMA(", \"mlp_bias\": true"), ZT_EUNSUPPORTED, "mlp_bias");
    refuses("partial rotary", LLAMA(", \"partial_rotary_factor\": 0.5"), ZT_EUNSUPPORTED,
            "partial_rotary_factor=0.5");
    refuses("kv heads not dividing", LLAMA(", \"num_key_value_heads\": 3"), ZT_EDATA,
            "num_key_value_heads=3 must be a positive integer that divides");
    refuses("kv heads -1", LLAMA(", \"num_key_value_heads\": -1"), ZT_EDATA,
            "num_key_value_heads=-1 must be a positive integer");
    refuses("kv heads 0", LLAMA(", \"num_key_value_heads\": 0"), ZT_EDATA,
            "num_key_value_heads=0 must be a positive integer");
    refuses("head_dim -8", LLAMA(", \"head_dim\": -8"), ZT_EDATA, "head_dim=-8 must be a positive integer");
    refuses("rms_norm_eps -1e-6", LLAMA(", \"rms_norm_eps\": -1e-6"), ZT_EDATA, "rms_norm_eps=-1e-06 must be positive");
    refuses("GPT-2 epsilon 1e-6", "{\"architectures\": [\"GPT2LMHeadModel\"], \"layer_norm_epsilon\": 1e-6}",
            ZT_EUNSUPPORTED, "layer_norm_epsilon");
    refuses("GPT-2 n_inner", "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_inner\": 100}",
            ZT_EUNSUPPORTED, "n_inner");
    refuses("a string where a number belongs", LLAMA(", \"rope_theta\": \"big\""), ZT_EDATA,
            "rope_theta must be a number");
    refuses("not JSON", "{\"architectures\": ", ZT_EDATA, "line");

    /* flags against config.json */
    put(LLAMA(""));
    zt_config *c = zt_config_new();
    zt_status st;
    zt_config_set(c, "ztrain.model.n_layer", "3", ZT_SRC_FLAG, &st);
    int rc = zt_hf_read_config(dir, c, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "ztrain.model.n_layer=3 (flag)") &&
           strstr(st.msg, "num_hidden_layers gives 2"), "a disagreeing flag: names both values (%s)", st.msg);
    zt_config_free(c);
    c = zt_config_new();
    zt_config_set(c, "ztrain.model.n_layer", "2", ZT_SRC_FLAG, &st);
    zt_config_set(c, "ztrain.model.rms_norm_eps", "1e-6", ZT_SRC_ENV, &st);
    zt_config_set(c, "ztrain.seq_len", "100", ZT_SRC_FLAG, &st);
    rc = zt_hf_read_config(dir, c, &st);
    tap_ok(rc == ZT_OK, "agreeing flag and environment values are fine (%s)", rc ? st.msg : "ok");
    zt_config_free(c);

    /* sliding window vs the training length, after finalize */
    const char *mistral = "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 32, "
                          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                          "\"num_hidden_layers\": 1, \"intermediate_size\": 48, \"vocab_size\": 256, "
                          "\"max_position_embeddings\": 64, \"sliding_window\": 16}";
    put(mistral);
    for (int T = 16; T <= 17; ++T) {
        c = zt_config_new();
        char v[16];
        snprintf(v, sizeof v, "%d", T);
        zt_config_set(c, "ztrain.seq_len", v, ZT_SRC_FLAG, &st);
        zt_config_set(c, "train_micro_batch_size_per_gpu", "1", ZT_SRC_FLAG, &st);
        rc = zt_hf_read_config(dir, c, &st);
        if (rc == ZT_OK) rc = zt_config_finalize(c, 1, &st);
        if (rc == ZT_OK) rc = zt_hf_check_config(dir, c, &st);
        tap_ok(rc == ZT_OK && has(c, "ztrain.model.sliding_window=16;ztrain.model.sliding_from=0"),
               "Mistral sliding_window 16, seq_len %d: accepted, every layer slides (%s)", T,
               rc ? st.msg : "ok");
        zt_config_free(c);
    }
    /* Qwen2: only with use_sliding_window, from max_window_layers on (or layer_types) */
#define QW(extra) "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 32, " \
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 3, " \
    "\"intermediate_size\": 48, \"vocab_size\": 256, \"max_position_embeddings\": 64" extra "}"
    reads("Qwen2 use_sliding_window, max_window_layers 1", QW(", \"use_sliding_window\": true, "
          "\"sliding_window\": 8, \"max_window_layers\": 1"),
          "ztrain.model.sliding_window=8;ztrain.model.sliding_from=1");
    reads("Qwen2 use_sliding_window without max_window_layers: 28", QW(", \"use_sliding_window\": true, "
          "\"sliding_window\": 8"), "ztrain.model.sliding_window=8;ztrain.model.sliding_from=28");
    reads("Qwen2 without use_sliding_window: no window", QW(", \"sliding_window\": 8, "
          "\"max_window_layers\": 1"), "ztrain.model.sliding_window=0;ztrain.model.sliding_from=0");
    reads("Qwen2 layer_types full, sliding, sliding", QW(", \"use_sliding_window\": true, "
          "\"sliding_window\": 8, \"max_window_layers\": 0, \"layer_types\": [\"full_attention\", "
          "\"sliding_attention\", \"sliding_attention\"]"),
          "ztrain.model.sliding_window=8;ztrain.model.sliding_from=1");
    refuses("Qwen2 layer_types with a full layer after a sliding one", QW(", \"use_sliding_window\": "
            "true, \"layer_types\": [\"full_attention\", \"sliding_attention\", \"full_attention\"]"),
            ZT_EUNSUPPORTED, "full-attention layer 2 after the sliding layer 1");
    refuses("Qwen2 sliding layer_types without a window", QW(", \"layer_types\": [\"full_attention\", "
            "\"sliding_attention\", \"sliding_attention\"]"), ZT_EUNSUPPORTED,
            "layer_types has sliding layers but there is no window");
    refuses("Qwen2 layer_types of another length", QW(", \"use_sliding_window\": true, "
            "\"layer_types\": [\"full_attention\"]"), ZT_EDATA, "layer_types has 1 entries for 3 layers");
    refuses("Mistral sliding_window 0", "{\"architectures\": [\"MistralForCausalLM\"], "
            "\"sliding_window\": 0}", ZT_EDATA, "sliding_window=0 must be a positive integer");
#undef QW
    unlink(path);
    rmdir(dir);
    return tap_done();
}
