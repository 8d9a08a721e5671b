/*
 * hf_model.c -- Hugging Face model directories: config.json into the
 * configuration (zt_hf_read_config, zt_hf_check_config) and the weights
 * (model.safetensors or sharded model-0000K-of-0000N.safetensors with
 * model.safetensors.index.json) into a context's fp32 master parameters
 * (zt_hf_load).  docs/huggingface.md.
 *
 * Loading works like a one-reader checkpoint restore (ckpt_restore.c):
 * rank 0 opens the files alone, validates every header and matches every
 * tensor against the model before anything is written, then reads each
 * tensor in pieces of at most CK_CHUNK_ELEMS elements (pread; converted to
 * fp32) and sends every piece to the ranks owning parts of it
 * (zt_ctx_owned_state), so no rank holds more than its own shard plus one
 * piece.  AdamW moments are zeroed and the step counters reset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "devmem.h"
#include "json_py.h"

/* ================================================================ config.json */

typedef struct hf_cfg {
    char path[ZT_PATH_MAX + 16];  /* config.json */
    json_t *root;
    const zt_arch *arch;          /* the architecture and the family config.json names */
    const zt_arch_hf *family;
    /* the ztrain keys and values it sets, with the config.json field each
     * comes from */
    int n;
    struct { const char *key, *from; char val[64]; const char *text; } kv[48];
    /* longrope's factor lists (the kv entries' text) */
    char factors[2][ZT_ROPE_FACTORS_LEN];
    char mlp_only[512];        /* mlp_only_layers, comma-separated (Qwen-MoE) */
} hf_cfg;

static void hf_cfg_free(hf_cfg *h) {
    if (h->root) json_decref(h->root);
    h->root = NULL;
}

static void add_kv(hf_cfg *h, const char *key, const char *from, const char *fmt, ...)
    ZT_PRINTF(4, 5);
static void add_kv(hf_cfg *h, const char *key, const char *from, const char *fmt, ...) {
    if (h->n >= (int)(sizeof h->kv / sizeof h->kv[0])) return;   /* table sized for all */
    h->kv[h->n].key = key;
    h->kv[h->n].from = from;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->kv[h->n].val, sizeof h->kv[h->n].val, fmt, ap);
    va_end(ap);
    h->kv[h->n].text = h->kv[h->n].val;
    h->n++;
}
/* a value longer than the table's: its text stays in h */
static void add_kv_text(hf_cfg *h, const char *key, const char *from, const char *text) {
    if (h->n >= (int)(sizeof h->kv / sizeof h->kv[0])) return;
    h->kv[h->n].key = key;
    h->kv[h->n].from = from;
    h->kv[h->n].val[0] = '\0';
    h->kv[h->n].text = text;
    h->n++;
}

/* Typed getters: a missing key or JSON null gives the default. */
static int get_int(hf_cfg *h, json_t *obj, const char *key, long def, long *out, zt_status *st) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) { *out = def; return ZT_OK; }
    if (json_is_integer(v)) { *out = (long)json_integer_value(v); return ZT_OK; }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 1e15) {
        *out = (long)json_real_value(v);
        return ZT_OK;
    }
    return zt_fail(st, ZT_EDATA, "%s: %s must be an integer", h->path, key);
}
static int get_num(hf_cfg *h, json_t *obj, const char *key, double def, double *out,
                   zt_status *st) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) { *out = def; return ZT_OK; }
    if (json_is_number(v)) { *out = json_number_value(v); return ZT_OK; }
    return zt_fail(st, ZT_EDATA, "%s: %s must be a number", h->path, key);
}
static int get_bool(hf_cfg *h, json_t *obj, const char *key, int def, int *out, zt_status *st) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) { *out = def; return ZT_OK; }
    if (json_is_boolean(v)) { *out = json_is_true(v); return ZT_OK; }
    return zt_fail(st, ZT_EDATA, "%s: %s must be true or false", h->path, key);
}
static int get_str(hf_cfg *h, json_t *obj, const char *key, const char *def, const char **out,
                   zt_status *st) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) { *out = def; return ZT_OK; }
    if (json_is_string(v)) { *out = json_string_value(v); return ZT_OK; }
    return zt_fail(st, ZT_EDATA, "%s: %s must be a string", h->path, key);
}
/* A positive integer that fits an int (shape fields). */
static int get_dim(hf_cfg *h, const char *key, long def, long *out, zt_status *st) {
    ZT_TRY(get_int(h, h->root, key, def, out, st));
    if (*out < 1 || *out > 1 << 30)
        return zt_fail(st, ZT_EDATA, "%s: %s=%ld must be a positive integer", h->path, key, *out);
    return ZT_OK;
}

/* dir_or_json: a model directory (its config.json) or a .json file. */
static int hf_open(const char *dir_or_json, hf_cfg *h, zt_status *st) {
    memset(h, 0, sizeof *h);
    struct stat sb;
    if (stat(dir_or_json, &sb) != 0)
        return zt_fail(st, ZT_EIO, "%s: no such Hugging Face model directory or config.json: %s",
                       dir_or_json, strerror(errno));
    if (S_ISDIR(sb.st_mode)) snprintf(h->path, sizeof h->path, "%s/config.json", dir_or_json);
    else snprintf(h->path, sizeof h->path, "%s", dir_or_json);
    json_error_t je;
    char why[200];
    h->root = zt_json_load_file_py(h->path, JSON_REJECT_DUPLICATES, &je);
    if (!h->root) {
        if (stat(h->path, &sb) != 0)
            return zt_fail(st, ZT_EIO, "%s: missing (not a Hugging Face model directory)", h->path);
        return zt_fail(st, ZT_EDATA, "%s: line %d: %s", h->path, je.line, zt_json_error_text(je.text, why, sizeof why));
    }
    if (!json_is_object(h->root)) {
        hf_cfg_free(h);
        return zt_fail(st, ZT_EDATA, "%s: not a JSON object", h->path);
    }
    return ZT_OK;
}

static int hf_family(hf_cfg *h, zt_status *st) {
    json_t *a = json_object_get(h->root, "architectures");
    const char *name = NULL, *mt = NULL;
    if (json_is_array(a) && json_array_size(a) > 0) {
        if (json_array_size(a) != 1 || !json_is_string(json_array_get(a, 0)))
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: architectures must name exactly one model "
                           "class", h->path);
        name = json_string_value(json_array_get(a, 0));
    }
    ZT_TRY(get_str(h, h->root, "model_type", NULL, &mt, st));
    if ((h->family = zt_arch_hf_find(name, mt, &h->arch))) return ZT_OK;
    /* Mixture of Experts models ztrain does not build (docs/models.md) */
    static const struct { const char *cls, *type, *why; } moe[] = {
        {"DeepseekV2ForCausalLM", "deepseek_v2", "multi-head latent attention (MLA) and grouped routing"},
        {"DeepseekV3ForCausalLM", "deepseek_v3", "multi-head latent attention (MLA) and grouped routing"},
        {"GptOssForCausalLM", "gpt_oss", "attention sinks, clamped SwiGLU experts with biases"},
    };
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; ++i)
        if ((name && !strcmp(name, moe[i].cls)) || (!name && mt && !strcmp(mt, moe[i].type)))
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: architecture %s is not supported: ztrain's "
                           "Mixture of Experts models are Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE (%s has "
                           "%s)", h->path, moe[i].cls, moe[i].cls, moe[i].why);
    char all[256];
    zt_arch_hf_list(all, sizeof all);
    return zt_fail(st, ZT_EUNSUPPORTED, "%s: architecture %s is not supported (supported: %s)",
                   h->path, name ? name : mt ? mt : "(none: no architectures or model_type)", all);
}

/* longrope (transformers' _compute_longrope_parameters with the
 * standardization before it): original_max_position_embeddings at the top
 * of config.json first (Phi-3 keeps it there; Phi3Config's default 4096
 * when absent), then in the rope dictionary;
 * factor null = max_position_embeddings / original; attention_factor null =
 * derived (0 here); short_factor / long_factor: head_dim / 2 numbers each
 * (llama_check counts them). */
static int hf_longrope(hf_cfg *h, json_t *d, const char *from, long maxpos, zt_status *st) {
    long om;
    double fac, att;
    /* Phi3Config always has the top-level key (default 4096), which then
     * replaces the dictionary's */
    const int phi3 = !strcmp(h->family->model_type, "phi3");
    if (!phi3 && !json_is_integer(json_object_get(d, "original_max_position_embeddings")) &&
        !json_is_integer(json_object_get(h->root, "original_max_position_embeddings")))
        return zt_fail(st, ZT_EDATA, "%s: %s (longrope) needs original_max_position_embeddings",
                       h->path, from);
    if (phi3) om = 4096;
    else ZT_TRY(get_int(h, d, "original_max_position_embeddings", maxpos, &om, st));
    ZT_TRY(get_int(h, h->root, "original_max_position_embeddings", om, &om, st));
    if (om < 1)
        return zt_fail(st, ZT_EDATA, "%s: original_max_position_embeddings=%ld must be positive",
                       h->path, om);
    ZT_TRY(get_num(h, d, "factor", (double)maxpos / (double)om, &fac, st));
    ZT_TRY(get_num(h, d, "attention_factor", 0, &att, st));
    if (!(fac > 0))
        return zt_fail(st, ZT_EDATA, "%s: %s (longrope) factor=%g must be positive", h->path, from, fac);
    if (att < 0)
        return zt_fail(st, ZT_EDATA, "%s: %s (longrope) attention_factor=%g must not be negative",
                       h->path, from, att);
    const char *name[2] = {"short_factor", "long_factor"};
    for (int i = 0; i < 2; ++i) {
        json_t *a = json_object_get(d, name[i]);
        if (!json_is_array(a) || json_array_size(a) == 0)
            return zt_fail(st, ZT_EDATA, "%s: %s (longrope) needs %s, a list of numbers", h->path,
                           from, name[i]);
        size_t at = 0, k;
        json_t *v;
        char *buf = h->factors[i];
        json_array_foreach(a, k, v) {
            const double x = json_number_value(v);
            if (!json_is_number(v) || !(x > 0) || !isfinite(x))
                return zt_fail(st, ZT_EDATA, "%s: %s (longrope) %s[%zu] must be a positive number",
                               h->path, from, name[i], k);
            char num[32];   /* the shortest text that reads back as x */
            snprintf(num, sizeof num, "%.15g", x);
            if (strtod(num, NULL) != x) snprintf(num, sizeof num, "%.17g", x);
            const int w = snprintf(buf + at, ZT_ROPE_FACTORS_LEN - at, "%s%s", k ? "," : "", num);
            if (w < 0 || (size_t)w >= ZT_ROPE_FACTORS_LEN - at)
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: %s (longrope) %s is too long (%zu numbers)",
                               h->path, from, name[i], json_array_size(a));
            at += (size_t)w;
        }
    }
    add_kv(h, "ztrain.model.rope_scaling", from, "longrope");
    add_kv(h, "ztrain.model.rope_factor", "factor", "%.17g", fac);
    add_kv(h, "ztrain.model.rope_original_max_positions", "original_max_position_embeddings",
           "%ld", om);
    add_kv(h, "ztrain.model.rope_attention_factor", "attention_factor", "%.17g", att);
    add_kv_text(h, "ztrain.model.rope_short_factor", "short_factor", h->factors[0]);
    add_kv_text(h, "ztrain.model.rope_long_factor", "long_factor", h->factors[1]);
    return ZT_OK;
}

/* Rotary settings in either writer's form: transformers 4.x rope_theta +
 * rope_scaling {rope_type|type, factor, ...}; 5.x rope_parameters
 * {rope_theta, rope_type, ...}.  rope_scaling wins when both are objects
 * (as in transformers' convert_rope_params_to_dict). */
static int hf_rope(hf_cfg *h, long maxpos, zt_status *st) {
    json_t *rs = json_object_get(h->root, "rope_scaling"), *rp = json_object_get(h->root, "rope_parameters");
    const int g3 = (h->family->flags & ZT_HF_GEMMA3) != 0;
    if (g3) {
        /* Gemma 3: the sliding layers' default rotary embedding at
         * rope_local_base_freq (transformers 5: rope_parameters
         * {"sliding_attention": {...}, "full_attention": {...}}); the full
         * layers' rope_theta (default 1e6) and scaling as the other families' */
        double local;
        const char *lt = "default";
        ZT_TRY(get_num(h, h->root, "rope_local_base_freq", 10000.0, &local, st));
        json_t *sl = json_is_object(rp) ? json_object_get(rp, "sliding_attention") : NULL;
        json_t *fu = json_is_object(rp) ? json_object_get(rp, "full_attention") : NULL;
        if (json_is_object(sl) || json_is_object(fu)) {
            ZT_TRY(get_num(h, sl, "rope_theta", local, &local, st));
            ZT_TRY(get_str(h, sl, "rope_type", lt, &lt, st));
            rp = json_is_object(fu) ? fu : NULL;
        }
        if (strcmp(lt, "default") != 0)
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: rope_parameters.sliding_attention rope_type '%s' "
                           "is not supported (the sliding layers' rotary embedding is the default "
                           "one)", h->path, lt);
        if (!(local > 0))
            return zt_fail(st, ZT_EDATA, "%s: the sliding layers' rope_theta=%g must be positive",
                           h->path, local);
        add_kv(h, "ztrain.model.rope_local_theta", "rope_local_base_freq", "%.17g", local);
    }
    json_t *d = json_is_object(rs) ? rs : json_is_object(rp) ? rp : NULL;
    const char *from = d == rs ? "rope_scaling" : "rope_parameters";
    if (d) {
        const char *k;
        json_t *v;
        json_object_foreach(d, k, v)
            if (json_is_object(v))
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: %s holds per-layer-type rotary "
                               "parameters (%s); ztrain has one rotary embedding", h->path, from, k);
    }
    double theta, prf, prf2;
    ZT_TRY(get_num(h, h->root, "rope_theta", g3 ? 1e6 : 10000.0, &theta, st));
    ZT_TRY(get_num(h, d, "rope_theta", theta, &theta, st));
    ZT_TRY(get_num(h, h->root, "partial_rotary_factor", 1.0, &prf, st));
    ZT_TRY(get_num(h, d, "partial_rotary_factor", prf, &prf2, st));
    if (prf2 != 1.0)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: partial_rotary_factor=%g is not supported "
                       "(ztrain rotates the whole head)", h->path, prf2);
    if (!(theta > 0))
        return zt_fail(st, ZT_EDATA, "%s: rope_theta=%g must be positive", h->path, theta);
    const char *type = "default";
    ZT_TRY(get_str(h, d, "type", type, &type, st));
    ZT_TRY(get_str(h, d, "rope_type", type, &type, st));
    /* transformers' Phi3Config reads rope types su and yarn as longrope */
    if (!strcmp(h->family->model_type, "phi3") && (!strcmp(type, "su") || !strcmp(type, "yarn")))
        type = "longrope";
    add_kv(h, "ztrain.model.rope_theta", "rope_theta", "%.17g", theta);
    if (!strcmp(type, "default")) {
        add_kv(h, "ztrain.model.rope_scaling", from, "none");
        return ZT_OK;
    }
    if (!strcmp(type, "linear") || !strcmp(type, "dynamic")) {
        double fac;
        if (!json_is_number(json_object_get(d, "factor")))
            return zt_fail(st, ZT_EDATA, "%s: %s (%s) needs a number factor", h->path, from, type);
        ZT_TRY(get_num(h, d, "factor", 0, &fac, st));
        add_kv(h, "ztrain.model.rope_scaling", from, "%s", type);
        add_kv(h, "ztrain.model.rope_factor", "factor", "%.17g", fac);
        return ZT_OK;
    }
    if (!strcmp(type, "yarn")) {
        /* transformers' _compute_yarn_parameters: factor null = P / original;
         * attention_factor null = get_mscale(factor, mscale) /
         * get_mscale(factor, mscale_all_dim) when both are given, else
         * get_mscale(factor); beta_fast / beta_slow null or 0 = 32 / 1 */
        double fac, att, ms, msa, bf, bs;
        long om;
        int trunc;
        if (!json_is_integer(json_object_get(d, "original_max_position_embeddings")) &&
            !json_is_integer(json_object_get(h->root, "original_max_position_embeddings")))
            return zt_fail(st, ZT_EDATA, "%s: %s (yarn) needs original_max_position_embeddings",
                           h->path, from);
        ZT_TRY(get_int(h, h->root, "original_max_position_embeddings", maxpos, &om, st));
        ZT_TRY(get_int(h, d, "original_max_position_embeddings", om, &om, st));
        if (om < 1)
            return zt_fail(st, ZT_EDATA, "%s: original_max_position_embeddings=%ld must be "
                           "positive", h->path, om);
        ZT_TRY(get_num(h, d, "factor", (double)maxpos / (double)om, &fac, st));
        ZT_TRY(get_num(h, d, "attention_factor", 0, &att, st));
        ZT_TRY(get_num(h, d, "mscale", 0, &ms, st));
        ZT_TRY(get_num(h, d, "mscale_all_dim", 0, &msa, st));
        ZT_TRY(get_num(h, d, "beta_fast", 32, &bf, st));
        ZT_TRY(get_num(h, d, "beta_slow", 1, &bs, st));
        ZT_TRY(get_bool(h, d, "truncate", 1, &trunc, st));
        if (bf == 0) bf = 32;
        if (bs == 0) bs = 1;
        if (!(fac >= 1))
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: %s (yarn) factor=%g below 1 is not supported",
                           h->path, from, fac);
        if (att <= 0 && ms != 0 && msa != 0) {
            const double a1 = fac <= 1 ? 1.0 : 0.1 * ms * log(fac) + 1.0;
            const double a2 = fac <= 1 ? 1.0 : 0.1 * msa * log(fac) + 1.0;
            att = a1 / a2;
        }
        add_kv(h, "ztrain.model.rope_scaling", from, "yarn");
        add_kv(h, "ztrain.model.rope_factor", "factor", "%.17g", fac);
        add_kv(h, "ztrain.model.rope_original_max_positions", "original_max_position_embeddings",
               "%ld", om);
        add_kv(h, "ztrain.model.rope_attention_factor", "attention_factor", "%.17g",
               att > 0 ? att : 0.0);
        add_kv(h, "ztrain.model.rope_beta_fast", "beta_fast", "%.17g", bf);
        add_kv(h, "ztrain.model.rope_beta_slow", "beta_slow", "%.17g", bs);
        add_kv(h, "ztrain.model.rope_truncate", "truncate", "%s", trunc ? "true" : "false");
        return ZT_OK;
    }
    if (!strcmp(type, "longrope")) return hf_longrope(h, d, from, maxpos, st);
    if (strcmp(type, "llama3") != 0)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: %s rope_type '%s' is not supported (default, "
                       "llama3, linear, dynamic, yarn and longrope are)", h->path, from, type);
    double fac, lo, hi;
    long om;
    const char *need[] = {"factor", "low_freq_factor", "high_freq_factor"};
    for (int i = 0; i < 3; ++i)
        if (!json_is_number(json_object_get(d, need[i])))
            return zt_fail(st, ZT_EDATA, "%s: %s (llama3) needs a number %s", h->path, from,
                           need[i]);
    ZT_TRY(get_num(h, d, "factor", 0, &fac, st));
    ZT_TRY(get_num(h, d, "low_freq_factor", 0, &lo, st));
    ZT_TRY(get_num(h, d, "high_freq_factor", 0, &hi, st));
    ZT_TRY(get_int(h, d, "original_max_position_embeddings", maxpos, &om, st));
    add_kv(h, "ztrain.model.rope_scaling", from, "llama3");
    add_kv(h, "ztrain.model.rope_factor", "factor", "%.17g", fac);
    add_kv(h, "ztrain.model.rope_low_freq_factor", "low_freq_factor", "%.17g", lo);
    add_kv(h, "ztrain.model.rope_high_freq_factor", "high_freq_factor", "%.17g", hi);
    add_kv(h, "ztrain.model.rope_original_max_positions", "original_max_position_embeddings",
           "%ld", om);
    return ZT_OK;
}

/* Gemma 2 / 3 (transformers' Gemma2Config / Gemma3TextConfig): the tanh
 * GeGLU, query_pre_attn_scalar, the soft-caps (null: none), the sliding
 * window (null: none) and which layers slide: layer_types, which must be a
 * pattern "full every P-th layer" (P from its first full layer; none: all
 * slide), else Gemma 2's every other layer, Gemma 3's sliding_window_pattern
 * (default 6). */
static int hf_gemma(hf_cfg *h, int gem, zt_status *st) {
    const char *act;
    double qs, ac, fc;
    long win, P;
    int bidir, ab;
    ZT_TRY(get_str(h, h->root, "hidden_activation", "gelu_pytorch_tanh", &act, st));
    if (strcmp(act, "gelu_pytorch_tanh") != 0 && strcmp(act, "gelu_new") != 0)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: hidden_activation '%s' is not supported (Gemma's "
                       "GeGLU uses the tanh GELU, gelu_pytorch_tanh)", h->path, act);
    ZT_TRY(get_num(h, h->root, "query_pre_attn_scalar", 256, &qs, st));
    ZT_TRY(get_num(h, h->root, "attn_logit_softcapping", gem == 2 ? 50.0 : 0.0, &ac, st));
    if (json_is_null(json_object_get(h->root, "attn_logit_softcapping"))) ac = 0;
    ZT_TRY(get_num(h, h->root, "final_logit_softcapping", gem == 2 ? 30.0 : 0.0, &fc, st));
    if (json_is_null(json_object_get(h->root, "final_logit_softcapping"))) fc = 0;
    ZT_TRY(get_int(h, h->root, "sliding_window", 4096, &win, st));
    if (json_is_null(json_object_get(h->root, "sliding_window"))) win = 0;
    ZT_TRY(get_bool(h, h->root, "use_bidirectional_attention", 0, &bidir, st));
    ZT_TRY(get_bool(h, h->root, "attention_bias", 0, &ab, st));
    if (bidir)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: use_bidirectional_attention=true is not supported "
                       "(ztrain's attention is causal)", h->path);
    if (ab)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: attention_bias=true is not supported for %s",
                       h->path, h->family->architectures);
    if (!(qs > 0) || ac < 0 || fc < 0 || win < 0 || win > 1 << 30)
        return zt_fail(st, ZT_EDATA, "%s: query_pre_attn_scalar=%g must be positive, the soft-caps "
                       "(%g, %g) and sliding_window=%ld not negative", h->path, qs, ac, fc, win);
    if (gem == 2) P = 2;
    else ZT_TRY(get_int(h, h->root, "sliding_window_pattern", 6, &P, st));
    json_t *lt = json_object_get(h->root, "layer_types");
    if (json_is_array(lt)) {
        size_t n = json_array_size(lt), i;
        P = 0;
        for (i = 0; i < n; ++i) {
            const char *t = json_string_value(json_array_get(lt, i));
            if (!t || (strcmp(t, "full_attention") && strcmp(t, "sliding_attention")))
                return zt_fail(st, ZT_EDATA, "%s: layer_types[%zu] must be \"full_attention\" or "
                               "\"sliding_attention\"", h->path, i);
            if (!P && !strcmp(t, "full_attention")) P = (long)i + 1;
        }
        for (i = 0; i < n; ++i) {
            const int full = !strcmp(json_string_value(json_array_get(lt, i)), "full_attention");
            if (full != (P > 0 && (long)(i + 1) % P == 0))
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: layer_types is not a repeating pattern "
                               "(a full-attention layer every P-th, the others sliding): layer %zu "
                               "breaks it", h->path, i);
        }
    } else if (lt && !json_is_null(lt)) {
        return zt_fail(st, ZT_EDATA, "%s: layer_types must be a list", h->path);
    }
    if (P < 0 || P > 1 << 30)
        return zt_fail(st, ZT_EDATA, "%s: sliding_window_pattern=%ld must not be negative", h->path, P);
    add_kv(h, "ztrain.model.gemma", "architectures", "%d", gem);
    add_kv(h, "ztrain.model.query_pre_attn_scalar", "query_pre_attn_scalar", "%.17g", qs);
    add_kv(h, "ztrain.model.attn_softcap", "attn_logit_softcapping", "%.17g", ac);
    add_kv(h, "ztrain.model.final_softcap", "final_logit_softcapping", "%.17g", fc);
    add_kv(h, "ztrain.model.sliding_window", "sliding_window", "%ld", win);
    add_kv(h, "ztrain.model.sliding_pattern", json_is_array(lt) ? "layer_types" : "sliding_window_pattern",
           "%ld", P);
    return ZT_OK;
}

/* Mistral, Phi-3 (ZT_HF_SLIDING): every layer slides when sliding_window
 * is set (Mistral's default 4096, Phi-3's none); Qwen2/3 (ZT_HF_SLIDING_OPT):
 * the window only with use_sliding_window, on the layers layer_types calls
 * "sliding_attention", by default those from max_window_layers (28) on.  A
 * sliding layer's query t sees keys t - window < u <= t (transformers'
 * sliding_window_overlay), ztrain.model.sliding_window from
 * ztrain.model.sliding_from on. */
static int hf_window(hf_cfg *h, long L, zt_status *st) {
    const zt_arch_hf *df = h->family;
    const int opt = (df->flags & ZT_HF_SLIDING_OPT) != 0;
    long win = 0, from = 0;
    int use = 1;
    if (opt) ZT_TRY(get_bool(h, h->root, "use_sliding_window", 0, &use, st));
    if (use) ZT_TRY(get_int(h, h->root, "sliding_window", (df->flags & ZT_HF_NO_WINDOW) ? 0 : 4096,
                            &win, st));
    if (json_is_null(json_object_get(h->root, "sliding_window"))) win = 0;
    else if (use && json_object_get(h->root, "sliding_window") && (win < 1 || win > 1 << 30))
        return zt_fail(st, ZT_EDATA, "%s: sliding_window=%ld must be a positive integer (or null: "
                       "none)", h->path, win);
    if (opt) {
        json_t *lt = json_object_get(h->root, "layer_types");
        ZT_TRY(get_int(h, h->root, "max_window_layers", 28, &from, st));
        if (from < 0 || from > 1 << 30)
            return zt_fail(st, ZT_EDATA, "%s: max_window_layers=%ld must not be negative", h->path,
                           from);
        if (json_is_array(lt)) {   /* written out: it wins over max_window_layers */
            const size_t n = json_array_size(lt);
            if ((long)n != L)
                return zt_fail(st, ZT_EDATA, "%s: layer_types has %zu entries for %ld layers",
                               h->path, n, L);
            from = L;
            for (size_t i = 0; i < n; ++i) {
                const char *t = json_string_value(json_array_get(lt, i));
                if (!t || (strcmp(t, "full_attention") && strcmp(t, "sliding_attention")))
                    return zt_fail(st, ZT_EDATA, "%s: layer_types[%zu] must be \"full_attention\" "
                                   "or \"sliding_attention\"", h->path, i);
                const int sl = !strcmp(t, "sliding_attention");
                if (sl && from == L) from = (long)i;
                if (!sl && from < L)
                    return zt_fail(st, ZT_EUNSUPPORTED, "%s: layer_types has a full-attention layer "
                                   "%zu after the sliding layer %ld: ztrain slides the layers from "
                                   "one on (max_window_layers)", h->path, i, from);
            }
            if (from < L && win == 0)
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: layer_types has sliding layers but there "
                               "is no window (use_sliding_window=false or sliding_window=null)",
                               h->path);
        } else if (lt && !json_is_null(lt)) {
            return zt_fail(st, ZT_EDATA, "%s: layer_types must be a list", h->path);
        }
    }
    if (win > 0) {
        add_kv(h, "ztrain.model.sliding_window", "sliding_window", "%ld", win);
        add_kv(h, "ztrain.model.sliding_from", opt ? "max_window_layers" : "sliding_window", "%ld",
               from);
    }
    return ZT_OK;
}

/* Mixture of Experts keys (transformers 5.24's MixtralConfig, Qwen2MoeConfig,
 * Qwen3MoeConfig defaults); H: intermediate_size (Mixtral's expert width) */
static int hf_moe(hf_cfg *h, long H, long L, zt_status *st) {
    const zt_arch_hf *df = h->family;
    const int mixtral = !strcmp(df->model_type, "mixtral");
    const int olmoe = !strcmp(df->model_type, "olmoe");   /* num_experts; experts at intermediate_size */
    /* MixtralConfig and Qwen3MoeConfig hold num_local_experts and read num_experts as it
     * (attribute_map; the hub's Qwen3-MoE files write num_experts); Qwen2MoeConfig has
     * num_experts only */
    const int local = !(df->flags & ZT_HF_SHARED_EXPERT) && !olmoe;
    const char *ek = local && json_object_get(h->root, "num_local_experts") ? "num_local_experts"
                                                                            : "num_experts";
    if (local && json_object_get(h->root, "num_local_experts") && json_object_get(h->root, "num_experts") &&
        !json_equal(json_object_get(h->root, "num_local_experts"), json_object_get(h->root, "num_experts")))
        return zt_fail(st, ZT_EDATA, "%s: num_experts and num_local_experts disagree", h->path);
    long E, K, I, S = 0, step = 1;
    int norm = 1, out_logits;
    double jitter = 0;
    ZT_TRY(get_dim(h, ek, mixtral ? 8 : df->flags & ZT_HF_SHARED_EXPERT ? 60 : olmoe ? 64 : 128, &E,
                   st));
    ZT_TRY(get_dim(h, "num_experts_per_tok", mixtral ? 2 : df->flags & ZT_HF_SHARED_EXPERT ? 4 : 8,
                   &K, st));
    if (olmoe) {
        double clip;
        I = H;
        ZT_TRY(get_bool(h, h->root, "norm_topk_prob", 0, &norm, st));
        ZT_TRY(get_num(h, h->root, "clip_qkv", 0, &clip, st));
        if (json_object_get(h->root, "clip_qkv") && !json_is_null(json_object_get(h->root, "clip_qkv")))
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: clip_qkv=%g is not supported (null: none)",
                           h->path, clip);
    } else if (mixtral) {
        I = H;
        ZT_TRY(get_num(h, h->root, "router_jitter_noise", 0, &jitter, st));
    } else {
        ZT_TRY(get_dim(h, "moe_intermediate_size", df->flags & ZT_HF_SHARED_EXPERT ? 1408 : 768, &I,
                       st));
        ZT_TRY(get_bool(h, h->root, "norm_topk_prob", 0, &norm, st));
        ZT_TRY(get_int(h, h->root, "decoder_sparse_step", 1, &step, st));
        json_t *mlo = json_object_get(h->root, "mlp_only_layers");
        if (step < 1)
            return zt_fail(st, ZT_EDATA, "%s: decoder_sparse_step=%ld must be at least 1", h->path,
                           step);
        if (mlo && !json_is_null(mlo) && !json_is_array(mlo))
            return zt_fail(st, ZT_EDATA, "%s: mlp_only_layers must be a list of layer numbers",
                           h->path);
        size_t k = 0, i;
        json_t *v;
        h->mlp_only[0] = '\0';
        json_array_foreach(mlo, i, v) {   /* (a null or absent list: none) */
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= (json_int_t)L)
                return zt_fail(st, ZT_EDATA, "%s: mlp_only_layers[%zu] must be a layer number, 0 "
                               "to num_hidden_layers - 1 = %ld", h->path, i, L - 1);
            const int w = snprintf(h->mlp_only + k, sizeof h->mlp_only - k, "%s%lld", k ? "," : "",
                                   (long long)json_integer_value(v));
            if (w < 0 || (size_t)w >= sizeof h->mlp_only - k)
                return zt_fail(st, ZT_EDATA, "%s: mlp_only_layers is too long", h->path);
            k += (size_t)w;
        }
        if (df->flags & ZT_HF_SHARED_EXPERT)
            ZT_TRY(get_dim(h, "shared_expert_intermediate_size", 5632, &S, st));
    }
    double coef;
    ZT_TRY(get_bool(h, h->root, "output_router_logits", 0, &out_logits, st));
    ZT_TRY(get_num(h, h->root, "router_aux_loss_coef", olmoe ? 0.01 : 0.001, &coef, st));
    if (!(coef >= 0) || !isfinite(coef))
        return zt_fail(st, ZT_EDATA, "%s: router_aux_loss_coef=%g must not be negative", h->path, coef);
    if (jitter != 0)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: router_jitter_noise=%g is not supported (0: none)",
                       h->path, jitter);
    if (K > E)
        return zt_fail(st, ZT_EDATA, "%s: num_experts_per_tok=%ld exceeds %s=%ld", h->path, K, ek, E);
    add_kv(h, "ztrain.model.n_experts", ek, "%ld", E);
    add_kv(h, "ztrain.model.experts_per_token", "num_experts_per_tok", "%ld", K);
    add_kv(h, "ztrain.model.moe_intermediate_size", mixtral || olmoe ? "intermediate_size"
           : "moe_intermediate_size", "%ld", I);
    add_kv(h, "ztrain.model.moe_norm_topk", mixtral ? "architectures" : "norm_topk_prob", "%s",
           norm ? "true" : "false");
    add_kv(h, "ztrain.model.shared_expert_size", "shared_expert_intermediate_size", "%ld", S);
    if (!mixtral && !olmoe) {
        add_kv(h, "ztrain.model.decoder_sparse_step", "decoder_sparse_step", "%ld", step);
        add_kv_text(h, "ztrain.model.mlp_only_layers", "mlp_only_layers", h->mlp_only);
    }
    /* transformers adds the loss only with output_router_logits */
    add_kv(h, "ztrain.model.router_aux_loss_coef", out_logits ? "router_aux_loss_coef"
           : "output_router_logits", "%.17g", out_logits ? coef : 0.0);
    return ZT_OK;
}

static int hf_llama(hf_cfg *h, zt_status *st) {
    const zt_arch_hf *df = h->family;
    long V, C, H, L, NH, KV, P, hd;
    double eps;
    int tie, bias = (df->flags & ZT_HF_QKV_BIAS) != 0, mlp_bias;
    const char *act;
    ZT_TRY(get_dim(h, "vocab_size", df->vocab, &V, st));
    ZT_TRY(get_dim(h, "hidden_size", df->hidden, &C, st));
    ZT_TRY(get_dim(h, "intermediate_size", df->inter, &H, st));
    ZT_TRY(get_dim(h, "num_hidden_layers", df->layers, &L, st));
    ZT_TRY(get_dim(h, "num_attention_heads", df->heads, &NH, st));
    /* absent: the family's default (-1 there: as many as the attention heads); null: that many too; a
     * value written in the file must be a positive divisor of num_attention_heads (checked below) */
    ZT_TRY(get_int(h, h->root, "num_key_value_heads", df->kv, &KV, st));
    if (json_is_null(json_object_get(h->root, "num_key_value_heads")) ||
        (KV < 0 && !json_object_get(h->root, "num_key_value_heads")))
        KV = NH;
    ZT_TRY(get_dim(h, "max_position_embeddings", df->maxpos, &P, st));
    ZT_TRY(get_int(h, h->root, "head_dim", df->head_dim > 0 ? df->head_dim : C / NH, &hd, st));
    ZT_TRY(get_num(h, h->root, "rms_norm_eps", df->eps, &eps, st));
    ZT_TRY(get_bool(h, h->root, "tie_word_embeddings", df->tie, &tie, st));
    const int gem = (df->flags & ZT_HF_GEMMA2) ? 2 : (df->flags & ZT_HF_GEMMA3) ? 3 : 0;
    ZT_TRY(get_bool(h, h->root, "mlp_bias", 0, &mlp_bias, st));
    if (gem) {
        ZT_TRY(hf_gemma(h, gem, st));
    } else {
        ZT_TRY(get_str(h, h->root, "hidden_act", "silu", &act, st));
        if (strcmp(act, "silu") != 0)
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (the llama "
                           "family's SwiGLU uses silu)", h->path, act);
    }
    if (mlp_bias)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: mlp_bias=true is not supported (the MLP has no "
                       "biases)", h->path);
    if (df->flags & ZT_HF_BIAS_KEYS) {
        int ab;
        ZT_TRY(get_bool(h, h->root, "attention_bias", 0, &ab, st));
        if (ab)
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: attention_bias=true is not supported for "
                           "%s (it also puts a bias on o_proj; ztrain has q/k/v biases only, as "
                           "Qwen2)", h->path, df->architectures);
    }
    if (KV < 1 || NH % KV != 0)
        return zt_fail(st, ZT_EDATA, "%s: num_key_value_heads=%ld must be a positive integer that divides "
                       "num_attention_heads=%ld", h->path, KV, NH);
    if (hd < 1 || hd > 1 << 30)
        return zt_fail(st, ZT_EDATA, "%s: head_dim=%ld must be a positive integer", h->path, hd);
    if (!(eps > 0) || !isfinite(eps))
        return zt_fail(st, ZT_EDATA, "%s: rms_norm_eps=%g must be positive", h->path, eps);
    /* pad_token_id: nn.Embedding's padding_idx (no lookup gradient on that
     * row).  null: none; absent: the class's default (Phi-3 32000, Gemma 0),
     * none when outside this vocabulary; negative: counted from the end, as
     * torch does; a value written in the file outside [-V, V) is refused
     * (torch cannot build that embedding either) */
    long pad;
    json_t *pj = json_object_get(h->root, "pad_token_id");
    if (!pj) pad = df->pad >= 0 && df->pad < V ? df->pad : -1;
    else if (json_is_null(pj)) pad = -1;
    else {
        ZT_TRY(get_int(h, h->root, "pad_token_id", -1, &pad, st));
        if (pad < -V || pad >= V)
            return zt_fail(st, ZT_EDATA, "%s: pad_token_id=%ld is outside the vocabulary "
                           "(vocab_size=%ld; null = no padding token)", h->path, pad, V);
        if (pad < 0) pad += V;
    }
    if (df->flags & (ZT_HF_SLIDING | ZT_HF_SLIDING_OPT)) ZT_TRY(hf_window(h, L, st));
    if (df->flags & ZT_HF_MOE) ZT_TRY(hf_moe(h, H, L, st));
    add_kv(h, "ztrain.model.arch", "architectures", "llama");
    add_kv(h, "ztrain.model.vocab", "vocab_size", "%ld", V);
    add_kv(h, "ztrain.model.n_embd", "hidden_size", "%ld", C);
    add_kv(h, "ztrain.model.intermediate_size", "intermediate_size", "%ld", H);
    add_kv(h, "ztrain.model.n_layer", "num_hidden_layers", "%ld", L);
    add_kv(h, "ztrain.model.n_head", "num_attention_heads", "%ld", NH);
    add_kv(h, "ztrain.model.n_kv_head", "num_key_value_heads", "%ld", KV);
    add_kv(h, "ztrain.model.head_dim", "head_dim", "%ld", hd);
    add_kv(h, "ztrain.model.context", "max_position_embeddings", "%ld", P);
    add_kv(h, "ztrain.model.rms_norm_eps", "rms_norm_eps", "%.17g", eps);
    add_kv(h, "ztrain.model.attention_bias", bias ? "architectures" : "attention_bias", "%s",
           bias ? "true" : "false");
    add_kv(h, "ztrain.model.qk_norm", "architectures", "%s",
           (df->flags & ZT_HF_QK_NORM) ? "true" : "false");
    add_kv(h, "ztrain.model.qk_norm_full", "architectures", "%s",
           (df->flags & ZT_HF_QK_FULL) ? "true" : "false");
    add_kv(h, "ztrain.model.tie_embeddings", "tie_word_embeddings", "%s", tie ? "true" : "false");
    add_kv(h, "ztrain.model.pad_token_id", "pad_token_id", "%ld", pad);
    return hf_rope(h, P, st);
}

static int hf_gpt2(hf_cfg *h, zt_status *st) {
    const zt_arch_hf *df = h->family;
    long V, C, L, NH, P, inner;
    double eps;
    int tie, scale, by_idx, cross;
    const char *act;
    ZT_TRY(get_dim(h, "vocab_size", df->vocab, &V, st));
    ZT_TRY(get_dim(h, "n_embd", df->hidden, &C, st));
    ZT_TRY(get_dim(h, "n_layer", df->layers, &L, st));
    ZT_TRY(get_dim(h, "n_head", df->heads, &NH, st));
    ZT_TRY(get_dim(h, "n_positions", df->maxpos, &P, st));
    ZT_TRY(get_int(h, h->root, "n_inner", 4 * C, &inner, st));
    ZT_TRY(get_num(h, h->root, "layer_norm_epsilon", df->eps, &eps, st));
    ZT_TRY(get_bool(h, h->root, "tie_word_embeddings", 1, &tie, st));
    ZT_TRY(get_str(h, h->root, "activation_function", "gelu_new", &act, st));
    ZT_TRY(get_bool(h, h->root, "scale_attn_weights", 1, &scale, st));
    ZT_TRY(get_bool(h, h->root, "scale_attn_by_inverse_layer_idx", 0, &by_idx, st));
    ZT_TRY(get_bool(h, h->root, "add_cross_attention", 0, &cross, st));
    const char *bad = inner != 4 * C ? "n_inner (ztrain's MLP is 4 n_embd wide)"
                    : fabs(eps - 1e-5) > 1e-12 ? "layer_norm_epsilon (ztrain's LayerNorm uses 1e-5)"
                    : !tie ? "tie_word_embeddings=false (ztrain's GPT-2 ties its LM head)"
                    : strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")
                        ? "activation_function (ztrain uses the tanh GELU: gelu_new)"
                    : !scale ? "scale_attn_weights=false"
                    : by_idx ? "scale_attn_by_inverse_layer_idx=true"
                    : cross ? "add_cross_attention=true" : NULL;
    if (bad)
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: GPT2LMHeadModel setting not supported: %s",
                       h->path, bad);
    add_kv(h, "ztrain.model.arch", "architectures", "gpt2");
    add_kv(h, "ztrain.model.vocab", "vocab_size", "%ld", V);
    add_kv(h, "ztrain.model.n_embd", "n_embd", "%ld", C);
    add_kv(h, "ztrain.model.n_layer", "n_layer", "%ld", L);
    add_kv(h, "ztrain.model.n_head", "n_head", "%ld", NH);
    add_kv(h, "ztrain.model.context", "n_positions", "%ld", P);
    add_kv(h, "ztrain.model.tie_embeddings", "tie_word_embeddings", "true");
    return ZT_OK;
}

/* Parse config.json into h (keys to set, sliding window). */
static int hf_parse(const char *dir_or_json, hf_cfg *h, zt_status *st) {
    ZT_TRY(hf_open(dir_or_json, h, st));
    /* each architecture's reader of its families' config.json */
    static int (*const read_arch[])(hf_cfg *, zt_status *) = {
        [ZT_ARCH_GPT2] = hf_gpt2, [ZT_ARCH_LLAMA] = hf_llama};
    int rc = hf_family(h, st);
    if (rc == ZT_OK) rc = read_arch[h->arch->id](h, st);
    if (rc == ZT_OK)   /* the class the model came from (and exports as) */
        add_kv(h, "ztrain.model.hf_architecture", "architectures", "%s", h->family->architectures);
    if (rc != ZT_OK) hf_cfg_free(h);
    return rc;
}

int zt_hf_read_config(const char *dir_or_config_json, zt_config *cfg, zt_status *st) {
    zt_status_clear(st);
    hf_cfg h;
    ZT_TRY(hf_parse(dir_or_config_json, &h, st));
    /* the canonical text of each value, as zt_config_get shows it */
    zt_config *want = zt_config_dup(cfg);
    int rc = want ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int i = 0; i < h.n && rc == ZT_OK; ++i) {
        rc = zt_config_set(want, h.kv[i].key, h.kv[i].text, ZT_SRC_DERIVED, st);
        if (rc != ZT_OK) zt_fail_prefix(st, "%s: %s", h.path, h.kv[i].from);
    }
    /* a value the user gave (flag, environment or configuration file) must
     * agree with config.json: the weights are only meaningful with it */
    for (int i = 0; i < h.n && rc == ZT_OK; ++i) {
        int src = zt_config_source(cfg, h.kv[i].key);
        if (src == ZT_SRC_DEFAULT || src == ZT_SRC_DERIVED) continue;
        char have[ZT_ROPE_FACTORS_LEN], need[ZT_ROPE_FACTORS_LEN];
        if (zt_config_get(cfg, h.kv[i].key, have, sizeof have, st) != ZT_OK ||
            zt_config_get(want, h.kv[i].key, need, sizeof need, st) != ZT_OK) {
            rc = st->code;
            break;
        }
        if (strcmp(have, need) != 0)
            rc = zt_fail(st, ZT_EINVAL, "%s=%s (%s) disagrees with %s: %s gives %s; drop the "
                         "setting or use a matching model", h.kv[i].key, have,
                         zt_source_name(src), h.path, h.kv[i].from, need);
    }
    for (int i = 0; i < h.n && rc == ZT_OK; ++i)
        rc = zt_config_set(cfg, h.kv[i].key, h.kv[i].text, ZT_SRC_FILE, st);
    zt_config_free(want);
    hf_cfg_free(&h);
    return rc;
}

int zt_hf_check_config(const char *dir_or_config_json, const zt_config *cfg, zt_status *st) {
    zt_status_clear(st);
    hf_cfg h;
    ZT_TRY(hf_parse(dir_or_config_json, &h, st));
    (void)cfg;   /* the windows are the model's (zt_hf_read_config): any training length */
    hf_cfg_free(&h);
    return ZT_OK;
}

const char *zt_hf_arch_name(const char *dir_or_config_json) {
    hf_cfg h;
    zt_status st;
    if (hf_open(dir_or_config_json, &h, &st) != ZT_OK) return NULL;
    const char *name = hf_family(&h, &st) == ZT_OK ? h.family->architectures : NULL;
    hf_cfg_free(&h);
    return name;
}

/* ================================================================ weights */

typedef struct hf_files {
    char dir[ZT_PATH_MAX];
    int n;
    zt_st_file *f;
    char **shard;            /* file names (index) */
    unsigned char **used;    /* per file, per tensor */
} hf_files;

static void hf_files_close(hf_files *F) {
    for (int i = 0; i < F->n; ++i) {
        zt_st_close(&F->f[i]);
        if (F->shard) free(F->shard[i]);
        if (F->used) free(F->used[i]);
    }
    free(F->f);
    free(F->shard);
    free(F->used);
    memset(F, 0, sizeof *F);
}

/* Open dir/name once (*idx: its index in F). */
static int add_file(hf_files *F, const char *name, int *idx, zt_status *st) {
    for (int i = 0; i < F->n; ++i)
        if (!strcmp(F->shard[i], name)) { *idx = i; return ZT_OK; }
    zt_st_file *nf = realloc(F->f, (size_t)(F->n + 1) * sizeof *nf);
    if (nf) F->f = nf;
    char **ns = realloc(F->shard, (size_t)(F->n + 1) * sizeof *ns);
    if (ns) F->shard = ns;
    unsigned char **nu = realloc(F->used, (size_t)(F->n + 1) * sizeof *nu);
    if (nu) F->used = nu;
    if (!nf || !ns || !nu) return zt_fail(st, ZT_ENOMEM, "out of memory");
    int i = F->n;
    memset(&F->f[i], 0, sizeof F->f[i]);
    F->f[i].fd = -1;
    F->used[i] = NULL;
    if (!(F->shard[i] = strdup(name))) return zt_fail(st, ZT_ENOMEM, "out of memory");
    F->n++;
    char p[ZT_PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", F->dir, name);
    ZT_TRY(zt_st_open(p, &F->f[i], st));
    if (!(F->used[i] = calloc((size_t)(F->f[i].n ? F->f[i].n : 1), 1)))
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    *idx = i;
    return ZT_OK;
}

/* Open the model's safetensors file(s): model.safetensors when it exists,
 * else the index and every shard it names -- transformers' order
 * (from_pretrained takes model.safetensors first), so that a directory
 * holding both loads the same weights in both. */
static int hf_files_open(const char *dir, hf_files *F, zt_status *st) {
    memset(F, 0, sizeof *F);
    snprintf(F->dir, sizeof F->dir, "%s", dir);
    char idx[ZT_PATH_MAX + 64], one[ZT_PATH_MAX + 64];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    snprintf(one, sizeof one, "%s/model.safetensors", dir);
    struct stat sb;
    if (stat(one, &sb) == 0) {
        int i;
        return add_file(F, "model.safetensors", &i, st);
    }
    if (stat(idx, &sb) != 0)
        return zt_fail(st, ZT_EIO, "%s: neither model.safetensors nor "
                       "model.safetensors.index.json (only safetensors weights are read)", dir);
    json_error_t je;
    json_t *root = zt_json_load_file_py(idx, 0, &je);
    char why[200];
    if (!root) return zt_fail(st, ZT_EDATA, "%s: line %d: %s", idx, je.line, zt_json_error_text(je.text, why, sizeof why));
    json_t *wm = json_object_get(root, "weight_map");
    int rc = ZT_OK;
    if (!json_is_object(wm)) rc = zt_fail(st, ZT_EDATA, "%s: no weight_map object", idx);
    const char *name;
    json_t *v;
    if (rc == ZT_OK)
        json_object_foreach(wm, name, v) {
            const char *shard = json_string_value(v);
            if (!shard || !*shard || strchr(shard, '/')) {
                rc = zt_fail(st, ZT_EDATA, "%s: weight_map[%s] is not a file name in the "
                             "directory", idx, name);
                break;
            }
            int i;
            if ((rc = add_file(F, shard, &i, st)) != ZT_OK) {
                zt_fail_prefix(st, "%s maps tensor %s to %s", idx, name, shard);
                break;
            }
            if (!zt_st_find(&F->f[i], name)) {
                rc = zt_fail(st, ZT_EDATA, "%s: maps tensor %s to %s, which does not hold it",
                             idx, name, shard);
                break;
            }
        }
    if (rc == ZT_OK && F->n == 0) rc = zt_fail(st, ZT_EDATA, "%s: weight_map is empty", idx);
    json_decref(root);
    return rc;
}

typedef struct hf_match {
    int file;                /* index into F->f */
    const zt_st_tensor *t;
    int transpose;
    uint64_t off;            /* elements before ours in a fused file tensor (Phi-3) */
    char hf[200];
    /* Mixture of Experts from per-expert file tensors: part p is the whole of
     * file tensor parts[p].t, our elements [at, at + n) */
    int nparts;
    struct hf_part { int file; const zt_st_tensor *t; uint64_t at, n; } *parts;
} hf_match;

static void hf_match_free(hf_match *mt, int n) {
    for (int i = 0; mt && i < n; ++i) free(mt[i].parts);
    free(mt);
}

static const zt_st_tensor *hf_find(hf_files *F, const char *name, int *file) {
    for (int i = 0; i < F->n; ++i) {
        const zt_st_tensor *t = zt_st_find(&F->f[i], name);
        if (t) { *file = i; return t; }
    }
    return NULL;
}

/* Our expert tensor t from the per-expert file tensors of the family (ex):
 * 1 matched (x->parts), 0 not an expert tensor (or its router under the
 * table's name), -1 failed (st).  experts.gate_up.w [E 2I, C] holds per
 * expert its gate's I rows, then its up's; experts.down.w [E C, I] the
 * experts' down one after the other.  Each file tensor must have exactly
 * its part's shape: a wrong split is refused, never loaded. */
static int hf_match_experts(const zt_model *m, const zt_arch_experts *ex, hf_files *F,
                            const zt_tensor_info *t, hf_match *x, zt_status *st) {
    int l, used = 0;
    if (sscanf(t->name, "h%d.%n", &l, &used) != 1 || used == 0) return 0;
    const char *rest = t->name + used;
    const int E = m->cfg.n_experts;
    if (!strcmp(rest, "router.w")) {
        if (!ex->router) return 0;
        char alt[200];
        snprintf(alt, sizeof alt, ex->router, l);
        if (!hf_find(F, alt, &x->file)) return 0;
        snprintf(x->hf, sizeof x->hf, "%s", alt);
        x->t = hf_find(F, alt, &x->file);
        return 0;   /* checked as usual */
    }
    const int gu = !strcmp(rest, "experts.gate_up.w");
    if (!gu && strcmp(rest, "experts.down.w")) return 0;
    const int np = gu ? 2 * E : E;
    const uint64_t R = (uint64_t)t->shape[0] / (uint64_t)np, C = (uint64_t)t->shape[1];
    if (!(x->parts = calloc((size_t)np, sizeof *x->parts)))
        return zt_fail(st, ZT_ENOMEM, "out of memory"), -1;
    x->nparts = np;
    for (int p = 0; p < np; ++p) {
        const int e = gu ? p / 2 : p;
        char name[200], fs[64], ws[64];
        snprintf(name, sizeof name, gu ? (p % 2 ? ex->up : ex->gate) : ex->down, l, e);
        struct hf_part *q = &x->parts[p];
        q->t = hf_find(F, name, &q->file);
        uint64_t want[2] = {R, C};
        zt_st_shape_str(2, want, ws, sizeof ws);
        if (!q->t) {
            if (p == 0) {   /* neither layout: name the packed tensor */
                free(x->parts);
                x->parts = NULL;
                x->nparts = 0;
                return 0;
            }
            return zt_fail(st, ZT_EDATA, "%s: tensor %s %s missing (expert %d of ztrain's %s)",
                           F->dir, name, ws, e, t->name), -1;
        }
        if (zt_st_check_float(&F->f[q->file], q->t, st) != ZT_OK) return -1;
        zt_st_shape_str(q->t->ndim, q->t->shape, fs, sizeof fs);
        if (q->t->ndim != 2 || q->t->shape[0] != R || q->t->shape[1] != C)
            return zt_fail(st, ZT_EDATA, "%s: tensor %s has shape %s; expert %d of the configured "
                           "model's %s needs %s", F->f[q->file].path, name, fs, e, t->name, ws), -1;
        q->at = (uint64_t)p * R * C;
        q->n = R * C;
        F->used[q->file][q->t - F->f[q->file].t] = 1;
    }
    snprintf(x->hf, sizeof x->hf, "%s", gu ? ex->gate : ex->down);
    x->t = x->parts[0].t;
    x->file = x->parts[0].file;
    return 1;
}

/* Match every tensor of the model with one in the files (rank 0). */
static int hf_match_all(const zt_model *m, hf_files *F, hf_match *mt, zt_status *st) {
    const zt_arch *arch = zt_arch_of(&m->cfg);
    /* the family's names (a fused file tensor holds several of ours) */
    const zt_arch_hf *fam = m->cfg.hf_architecture[0] ? zt_arch_hf_find(m->cfg.hf_architecture,
                                                                         NULL, NULL) : NULL;
    for (int ti = 0; ti < m->n_tensors; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        hf_match *x = &mt[ti];
        uint64_t want[2] = {(uint64_t)t->shape[0], (uint64_t)t->shape[1]};
        if (t->ndim == 1) want[0] = t->numel;
        char ws[64], fs[128];
        long row0 = 0, rows = 0;
        if (zt_arch_hf_part(arch, fam, &m->cfg, t->name, x->hf, sizeof x->hf, &x->transpose, &row0,
                            &rows) != 0)
            return zt_fail(st, ZT_EUNSUPPORTED, "tensor %s of model '%s' has no Hugging Face "
                           "name: only the built-in gpt2 and llama models load Hugging Face weights",
                           t->name, m->ops && m->ops->name ? m->ops->name : "?");
        if (x->transpose && t->ndim == 2) {
            uint64_t s = want[0];
            want[0] = want[1];
            want[1] = s;
        }
        if (t->ndim == 2 && rows > t->shape[0]) {   /* rows [row0, row0 + ours) of a fused one */
            want[0] = (uint64_t)rows;
            x->off = (uint64_t)row0 * (uint64_t)t->shape[1];
        }
        zt_st_shape_str(t->ndim, want, ws, sizeof ws);
        x->t = hf_find(F, x->hf, &x->file);
        if (!x->t && fam && fam->experts) {   /* the hub's per-expert tensors */
            int r = hf_match_experts(m, fam->experts, F, t, x, st);
            if (r < 0) return st->code;
            if (r > 0) continue;
        }
        const char *pfx = arch->hf_optional_prefix;   /* original GPT-2 files omit it */
        if (!x->t && pfx && !strncmp(x->hf, pfx, strlen(pfx))) {
            x->t = hf_find(F, x->hf + strlen(pfx), &x->file);
            if (x->t) memmove(x->hf, x->hf + strlen(pfx), strlen(x->hf + strlen(pfx)) + 1);
        }
        if (!x->t) {   /* the file, or the index of the shards */
            char where[ZT_PATH_MAX + 64];
            if (F->n == 1 && !strcmp(F->shard[0], "model.safetensors"))
                snprintf(where, sizeof where, "%s", F->f[0].path);
            else
                snprintf(where, sizeof where, "%s/model.safetensors.index.json", F->dir);
            return zt_fail(st, ZT_EDATA, "%s: tensor %s %s missing (ztrain's %s)", where, x->hf,
                           ws, t->name);
        }
        const zt_st_file *f = &F->f[x->file];
        ZT_TRY(zt_st_check_float(f, x->t, st));
        zt_st_shape_str(x->t->ndim, x->t->shape, fs, sizeof fs);
        const int packed = x->t->ndim == 3 && t->ndim == 2 && fam && fam->experts;   /* [E, R, C] */
        if (packed ? x->t->shape[0] != (uint64_t)m->cfg.n_experts ||
                         x->t->shape[0] * x->t->shape[1] != want[0] || x->t->shape[2] != want[1]
                   : x->t->ndim != t->ndim || x->t->shape[0] != want[0] ||
                         (t->ndim == 2 && x->t->shape[1] != want[1]))
            return zt_fail(st, ZT_EDATA, "%s: tensor %s has shape %s; the configured model's %s "
                           "needs %s", f->path, x->hf, fs, t->name, ws);
        F->used[x->file][x->t - f->t] = 1;
    }
    for (int i = 0; i < F->n; ++i)
        for (int k = 0; k < F->f[i].n; ++k) {
            const zt_st_tensor *t = &F->f[i].t[k];
            /* no parameters: lm_head.weight of a tied model, GPT-2's causal
             * mask buffers, old Llama files' rotary inv_freq (arch.h) */
            if (F->used[i][k] || zt_arch_hf_ignorable(arch, &m->cfg, t->name)) continue;
            char fs[128];
            zt_st_shape_str(t->ndim, t->shape, fs, sizeof fs);
            return zt_fail(st, ZT_EDATA, "%s: unexpected tensor %s %s: not part of the "
                           "configured model", F->f[i].path, t->name, fs);
        }
    return ZT_OK;
}

/* Flat elements [a, b) of ours [R, C] from a file tensor stored [C, R]:
 * per column c one contiguous run of the file's row c. */
static int read_transposed(const zt_st_file *f, const zt_st_tensor *t, uint64_t R, uint64_t C,
                           uint64_t a, uint64_t b, float *out, float *tmp, zt_status *st) {
    for (uint64_t c = 0; c < C; ++c) {
        uint64_t r0 = a <= c ? 0 : (a - c + C - 1) / C;
        uint64_t r1 = b - 1 >= c ? (b - 1 - c) / C + 1 : 0;
        if (r0 >= r1) continue;
        ZT_TRY(zt_st_read(f, t, c * R + r0, r1 - r0, tmp, st));
        for (uint64_t r = r0; r < r1; ++r) out[r * C + c - a] = tmp[r - r0];
    }
    return ZT_OK;
}

/* Zero this rank's owned AdamW moments. */
static void zero_moments(const zt_train_state *s) {
    for (int i = 0; i < s->n_ranges; ++i) {
        const zt_owned_range *rg = &s->ranges[i];
        size_t bytes = (rg->hi - rg->lo) * sizeof(float);
        if (s->on_device) {
            s->be->zero(rg->m, bytes);
            s->be->zero(rg->v, bytes);
        } else {
            memset(rg->m, 0, bytes);
            memset(rg->v, 0, bytes);
        }
    }
}

/* config.json against the context's model (rank 0). */
static int hf_check_model(zt_ctx *ctx, const char *dir, zt_status *st) {
    zt_config *c = zt_config_new();
    if (!c) return zt_fail(st, ZT_ENOMEM, "out of memory");
    int rc = zt_hf_read_config(dir, c, st);
    if (rc == ZT_OK) rc = zt_hf_check_config(dir, zt_ctx_config(ctx), st);
    const zt_model_config *a = &zt_ctx_config(ctx)->model, *b = &c->model;
    struct { const char *key; double have, want; } k[] = {
        {"n_layer", a->n_layer, b->n_layer}, {"n_head", a->n_head, b->n_head},
        {"n_embd", a->n_embd, b->n_embd}, {"context", a->context, b->context},
        {"vocab", a->vocab, b->vocab}};
    if (rc == ZT_OK && zt_model_arch(a) != zt_model_arch(b))
        rc = zt_fail(st, ZT_EINVAL, "%s/config.json describes a %s model; the context's is %s",
                     dir, b->arch, a->arch);
    for (size_t i = 0; i < sizeof k / sizeof k[0] && rc == ZT_OK; ++i)
        if (k[i].have != k[i].want)
            rc = zt_fail(st, ZT_EINVAL, "%s/config.json: the model it describes has "
                         "ztrain.model.%s=%.17g; the context's model has %.17g (read the "
                         "configuration with zt_hf_read_config first)", dir, k[i].key, k[i].want,
                         k[i].have);
    char x[32], y[32];   /* and every setting of the architecture */
    const zt_arch_setting *d = rc == ZT_OK ? zt_arch_diff(zt_arch_of(a), a, b, x, y, sizeof x) : NULL;
    if (d)
        rc = zt_fail(st, ZT_EINVAL, "%s/config.json: the model it describes has ztrain.model.%s=%s; "
                     "the context's model has %s (read the configuration with zt_hf_read_config "
                     "first)", dir, d->key, y, x);
    zt_config_free(c);
    return rc;
}

/* FNV-1a 64 of n bytes, continuing h. */
#define FNV_BASIS 1469598103934665603ULL
static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* Elements [a, b) of tensor t as a load reads them (mt: its match; tmp:
 * t's rows when transposed) into out. */
static int hf_read_range(const hf_files *F, const hf_match *mt, const zt_tensor_info *t, uint64_t a,
                         uint64_t b, float *out, float *tmp, zt_status *st) {
    for (int p = 0; p < mt->nparts; ++p) {   /* per-expert file tensors */
        const struct hf_part *q = &mt->parts[p];
        const uint64_t lo = a > q->at ? a : q->at, hi = b < q->at + q->n ? b : q->at + q->n;
        if (lo < hi) ZT_TRY(zt_st_read(&F->f[q->file], q->t, lo - q->at, hi - lo, out + (lo - a), st));
    }
    if (mt->nparts) return ZT_OK;
    const zt_st_file *f = &F->f[mt->file];
    if (mt->transpose && t->ndim == 2)
        return read_transposed(f, mt->t, (uint64_t)t->shape[0], (uint64_t)t->shape[1], a, b, out,
                               tmp, st);
    return zt_st_read(f, mt->t, mt->off + a, b - a, out, st);
}

/* The base fingerprint's config part: FNV-1a 64 of dir/config.json's bytes. */
static int hf_config_fnv(const char *dir, uint64_t *h, zt_status *st) {
    char path[ZT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot read: %s", path, strerror(errno));
    unsigned char b[4096];
    size_t k;
    *h = FNV_BASIS;
    while ((k = fread(b, 1, sizeof b, fp)) > 0) *h = fnv_bytes(*h, b, k);
    const int bad = ferror(fp);
    fclose(fp);
    return bad ? zt_fail(st, ZT_EIO, "%s: read error", path) : ZT_OK;
}

int ck_hf_base_config_fnv(const char *dir, uint64_t *config_fnv, zt_status *st) {
    return hf_config_fnv(dir, config_fnv, st);
}

int ck_hf_base_fingerprint(const zt_model *m, const char *dir, uint64_t *fnv, zt_status *st) {
    hf_files F;
    memset(&F, 0, sizeof F);
    hf_match *mt = calloc((size_t)m->n_tensors, sizeof *mt);
    enum { CHUNK = 1 << 20 };
    float *buf = malloc(CHUNK * sizeof(float)), *tmp = NULL;
    uint64_t maxrows = 1;
    int rc = mt && buf ? hf_files_open(dir, &F, st) : zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) rc = hf_match_all(m, &F, mt, st);
    for (int ti = 0; rc == ZT_OK && ti < m->n_tensors; ++ti)
        if (mt[ti].transpose && (uint64_t)m->tensors[ti].shape[0] > maxrows)
            maxrows = (uint64_t)m->tensors[ti].shape[0];
    if (rc == ZT_OK && !(tmp = malloc(maxrows * sizeof(float))))
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    /* FNV-1a runs over the bytes in order: chunk by chunk is the whole */
    for (int ti = 0; rc == ZT_OK && ti < m->n_tensors; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        uint64_t h = FNV_BASIS;
        for (uint64_t a = 0; rc == ZT_OK && a < t->numel; a += CHUNK) {
            const uint64_t b = a + CHUNK < t->numel ? a + CHUNK : t->numel;
            rc = hf_read_range(&F, &mt[ti], t, a, b, buf, tmp, st);
            if (rc == ZT_OK) h = fnv_bytes(h, buf, (b - a) * sizeof(float));
        }
        fnv[ti] = h;
    }
    hf_files_close(&F);
    hf_match_free(mt, m->n_tensors);
    free(buf);
    free(tmp);
    return rc;
}

/* LoRA's frozen base: every rank reads the model unit by unit into an fp32
 * host buffer of the largest unit, moves it to the backend and hands it to
 * the frozen engine (zt_shard_set_unit_params: it keeps its stage's share,
 * rounded to 16 bits when mixed) -- nothing model-sized is allocated -- and
 * records the base's fingerprint, a checksum of each tensor as loaded and
 * of config.json, for the checkpoints of the adapters (ckpt_lora.c). */
static int hf_load_frozen(zt_ctx *ctx, const char *dir, zt_status *st) {
    const zt_model *m = zt_ctx_model(ctx);
    const zt_backend *be = zt_ctx_backend(ctx);
    hf_files F;
    memset(&F, 0, sizeof F);
    hf_match *mt = NULL;
    float *unit = NULL, *tmp = NULL, *dev = NULL;
    uint64_t *fnv = NULL, maxrows = 1, maxu = 1, cfnv = FNV_BASIS;
    double t0 = zt_now_s();
    for (int u = 0; u < m->n_units; ++u)
        if (m->units[u].numel > maxu) maxu = m->units[u].numel;
    int rc = hf_check_model(ctx, dir, st);
    if (rc == ZT_OK) rc = hf_files_open(dir, &F, st);
    if (rc == ZT_OK && (!(mt = calloc((size_t)m->n_tensors, sizeof *mt)) ||
                        !(fnv = calloc((size_t)m->n_tensors, sizeof *fnv)) ||
                        !(unit = malloc(maxu * sizeof(float)))))
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (loading the frozen base)");
    if (rc == ZT_OK) rc = hf_match_all(m, &F, mt, st);
    for (int ti = 0; rc == ZT_OK && ti < m->n_tensors; ++ti)
        if (mt[ti].transpose && (uint64_t)m->tensors[ti].shape[0] > maxrows)
            maxrows = (uint64_t)m->tensors[ti].shape[0];
    if (rc == ZT_OK && !(tmp = malloc(maxrows * sizeof(float))))
        rc = zt_fail(st, ZT_ENOMEM, "out of memory (load buffer)");
    if (rc == ZT_OK && zt_be_device(be) &&
        !(dev = zt_mem_alloc(maxu * sizeof(float), ZT_MEM_WORKSPACE, st)))
        rc = st->code;
    if (rc == ZT_OK) rc = hf_config_fnv(dir, &cfnv, st);
    for (int u = 0; rc == ZT_OK && u < m->n_units; ++u) {
        const zt_unit_info *ui = &m->units[u];
        for (int ti = ui->first_tensor; rc == ZT_OK && ti < ui->first_tensor + ui->n_tensors; ++ti) {
            const zt_tensor_info *t = &m->tensors[ti];
            float *dst = unit + (t->offset - ui->offset);
            rc = hf_read_range(&F, &mt[ti], t, 0, t->numel, dst, tmp, st);
            if (rc == ZT_OK) fnv[ti] = fnv_bytes(FNV_BASIS, dst, t->numel * sizeof(float));
        }
        if (rc != ZT_OK) break;
        if (dev) be->to_device(dev, unit, ui->numel * sizeof(float));
        if ((rc = zt_shard_set_unit_params(zt_ctx_shard(ctx), u, dev ? dev : unit, st)) != ZT_OK) break;
        if (zt_ctx_rank(ctx) == 0)
            zt_progress_report(zt_ctx_progress(ctx), "init", (ui->offset + ui->numel) * sizeof(float),
                               m->num_params * sizeof(float), "B", u + 1 == m->n_units);
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    zt_ctx_set_base_fingerprint(ctx, fnv, cfnv);
    rc = ck_agree(ctx, zt_be_check(be, "loading the frozen base", st), st);
    if (rc == ZT_OK)
        zt_log(ctx, ZT_LOG_INFO, "init: loaded the frozen LoRA base (%d tensors, %zu parameters) "
               "from the Hugging Face model %s in %.2f s", m->n_tensors, m->num_params, dir,
               zt_now_s() - t0);
out:
    hf_files_close(&F);
    hf_match_free(mt, m->n_tensors);
    free(fnv);
    free(unit);
    free(tmp);
    zt_mem_free(dev);
    return rc;
}

int ck_hf_each_tensor(const char *dir, ck_hf_tensor_fn fn, void *user, zt_status *st) {
    hf_files F;
    int rc = hf_files_open(dir, &F, st);
    for (int i = 0; rc == ZT_OK && i < F.n; ++i)
        for (int k = 0; rc == ZT_OK && k < F.f[i].n; ++k)
            rc = fn(user, &F.f[i], &F.f[i].t[k], st);
    hf_files_close(&F);
    return rc;
}

int zt_hf_load(zt_ctx *ctx, const char *dir, zt_status *st) {
    zt_status_clear(st);
    if (zt_ctx_lora_model(ctx)) return hf_load_frozen(ctx, dir, st);
    const zt_model *m = zt_ctx_model(ctx);
    int root = zt_ctx_rank(ctx) == 0, rc = ZT_OK, hfail = 0;
    hf_files F;
    memset(&F, 0, sizeof F);
    hf_match *mt = NULL;
    float *buf = NULL, *tmp = NULL, *h = NULL;
    MPI_Request *reqs = NULL;
    ck_plan plan;
    memset(&plan, 0, sizeof plan);
    double t0 = zt_now_s();
    zt_train_state s;
    rc = zt_ctx_owned_state(ctx, &s, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    rc = ck_plan_build(ctx, &s, &plan, st);
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) return rc;
    if (!root) h = ck_stage_buf(&s, &hfail, st);   /* device state, receivers */
    if ((rc = ck_agree(ctx, hfail ? st->code : ZT_OK, st)) != ZT_OK) goto out;

    /* rank 0: every check before anything is written */
    uint64_t maxrows = 1, bytes = 0;
    if (root) {
        rc = hf_check_model(ctx, dir, st);
        if (rc == ZT_OK) rc = hf_files_open(dir, &F, st);
        if (rc == ZT_OK && !(mt = calloc((size_t)m->n_tensors, sizeof *mt)))
            rc = zt_fail(st, ZT_ENOMEM, "out of memory");
        if (rc == ZT_OK) rc = hf_match_all(m, &F, mt, st);
        for (int ti = 0; rc == ZT_OK && ti < m->n_tensors; ++ti) {
            if (mt[ti].transpose && (uint64_t)m->tensors[ti].shape[0] > maxrows)
                maxrows = (uint64_t)m->tensors[ti].shape[0];
            for (int p = 0; p < mt[ti].nparts; ++p) bytes += mt[ti].parts[p].t->end - mt[ti].parts[p].t->begin;
            if (mt[ti].off == 0 && !mt[ti].nparts) bytes += mt[ti].t->end - mt[ti].t->begin;
        }
        if (rc == ZT_OK) {
            /* (accounted workspace: the memory plan counts it) */
            buf = zt_mem_alloc(CK_CHUNK_ELEMS * sizeof(float), ZT_MEM_WORKSPACE | ZT_MEM_HOST, st);
            tmp = malloc(maxrows * sizeof(float));
            reqs = malloc((size_t)(plan.total > 0 ? plan.total : 1) * sizeof *reqs);
            if (!buf || !tmp || !reqs) rc = zt_fail(st, ZT_ENOMEM, "out of memory (load buffer)");
        }
    }
    if ((rc = ck_root_status(ctx, rc, st)) != ZT_OK) goto out;

    for (int ti = 0; ti < m->n_tensors && rc == ZT_OK; ++ti) {
        const zt_tensor_info *t = &m->tensors[ti];
        for (uint64_t a = 0; a < t->numel && rc == ZT_OK; a += CK_CHUNK_ELEMS) {
            uint64_t b = t->numel - a > CK_CHUNK_ELEMS ? a + CK_CHUNK_ELEMS : t->numel;
            if (root) rc = hf_read_range(&F, &mt[ti], t, a, b, buf, tmp, st);
            if ((rc = ck_root_status(ctx, rc, st)) == ZT_OK)
                rc = ck_scatter(ctx, &s, &plan, t->offset + a, t->offset + b, buf, CK_PARAMS, reqs,
                                h, "loading Hugging Face weights", st);
        }
        if (root && rc == ZT_OK)   /* fp32 bytes placed so far */
            zt_progress_report(zt_ctx_progress(ctx), "init", (t->offset + t->numel) * sizeof(float),
                               m->num_params * sizeof(float), "B", ti + 1 == m->n_tensors);
    }
    if ((rc = ck_agree(ctx, rc, st)) != ZT_OK) goto out;
    if (!zt_ctx_moments_fresh(ctx)) zero_moments(&s);   /* (fresh: zero, untouched) */
    rc = zt_ctx_state_restored(ctx, 0, 0, st);
    rc = ck_agree(ctx, rc, st);
    if (rc == ZT_OK)
        zt_log(ctx, ZT_LOG_INFO, "init: loaded %d tensors (%zu parameters, %.1f MiB) from the "
               "Hugging Face model %s in %.2f s; AdamW moments zero, step 0", m->n_tensors,
               m->num_params, (double)bytes / 1048576.0, dir, zt_now_s() - t0);
out:
    hf_files_close(&F);
    hf_match_free(mt, m->n_tensors);
    zt_mem_free(buf);
    free(tmp);
    free(reqs);
    zt_mem_free(h);
    ck_plan_free(&plan);
    return rc;
}
