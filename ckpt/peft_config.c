/*
 * peft_config.c -- a PEFT LoRA adapter's adapter_config.json against the run
 * that starts from it (ztrain.lora.from; docs/lora.md, "Starting from a PEFT
 * adapter").  Every key of PEFT 0.21's LoraConfig is
 *
 *  - applied as PEFT applies it and checked against the run: r, lora_alpha,
 *    use_rslora, lora_dropout; the modules the adapter adapts, computed from
 *    target_modules (a list, a regular expression, "all-linear" or null),
 *    exclude_modules, layers_to_transform and layers_pattern with PEFT's own
 *    rule (tuners_utils.check_target_module_exists) over every linear layer
 *    of every block; the rank and alpha rank_pattern / alpha_pattern give
 *    each of those modules (PEFT's get_pattern_key);
 *  - refused by name when it asks for what ztrain does not do (DoRA, trained
 *    biases, modules_to_save, LoRA on part of the blocks, per-module ranks or
 *    alphas, an initialization that changes the base weights, ...);
 *  - or inert: metadata (task_type, revision, ...), and keys PEFT itself
 *    ignores here (fan_in_fan_out, which PEFT sets from the layer type;
 *    loftq_config and the other initializers' settings when
 *    init_lora_weights does not select them).
 *
 * A key PEFT 0.21 does not have is accepted when its value is null, false,
 * "", [] or {} and refused by name otherwise.  All refusals of a file are
 * reported in one message.  Regular expressions (PEFT's are Python's re) are
 * matched with PCRE2, which reads the same syntax for the patterns used on
 * module names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "lora.h"

typedef struct pc {
    const zt_model_config *mc;
    const zt_arch *arch;
    json_t *j;
    char why[2048];     /* the refusals, "; "-joined */
    size_t nw;
    int bad;            /* a malformed value or pattern (no matching attempted) */
} pc;

static void refuse(pc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(pc *p, const char *fmt, ...) {
    if (p->nw + 8 >= sizeof p->why) return;
    if (p->nw) p->nw += (size_t)snprintf(p->why + p->nw, sizeof p->why - p->nw, "; ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(p->why + p->nw, sizeof p->why - p->nw, fmt, ap);
    va_end(ap);
    if (k > 0) p->nw += (size_t)k;
    if (p->nw >= sizeof p->why) p->nw = sizeof p->why - 1;
}

/* A value as JSON, compact, cut at 60 characters. */
static void val(json_t *v, char *b, size_t n) {
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    if (!s) snprintf(b, n, "null");
    else if (strlen(s) > 60) snprintf(b, n, "%.57s...", s);
    else snprintf(b, n, "%s", s);
    free(s);
}

/* null, false, "", [] or {} (or absent) */
static int is_off(json_t *v) {
    return !v || json_is_null(v) || json_is_false(v) ||
           (json_is_string(v) && !json_string_length(v)) ||
           (json_is_array(v) && !json_array_size(v)) || (json_is_object(v) && !json_object_size(v));
}

/* ------------------------------------------------------------ regular expressions */

/* Python's re.match (opts PCRE2_ANCHORED) or re.fullmatch (+ PCRE2_ENDANCHORED)
 * of pat against s: 1 a match, 0 none, -1 a pattern PCRE2 cannot compile
 * (refused, naming key).  *idx: the group "idx" as a number (-1: none). */
static int re_match(pc *p, const char *key, const char *pat, const char *s, uint32_t opts, long *idx) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(err, msg, sizeof msg);
        if (!p->bad)
            refuse(p, "%s: the regular expression '%s' does not compile (%s at offset %zu)", key,
                   pat, (const char *)msg, (size_t)off);
        p->bad = 1;
        return -1;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, opts, md, NULL) : -1;
    if (idx) {
        *idx = -1;
        int g = pcre2_substring_number_from_name(re, (PCRE2_SPTR) "idx");
        PCRE2_SIZE *ov = rc > 0 ? pcre2_get_ovector_pointer(md) : NULL;
        if (ov && g > 0 && g < rc && ov[2 * g] != PCRE2_UNSET)
            *idx = strtol(s + ov[2 * g], NULL, 10);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc > 0;
}

/* key ends with "." + t */
static int ends_dot(const char *key, const char *t) {
    size_t k = strlen(key), n = strlen(t);
    return k > n && key[k - n - 1] == '.' && !strcmp(key + k - n, t);
}

/* ------------------------------------------------------------ the adapted modules */

/* PEFT's check_target_module_exists for the module `key` (a linear layer
 * of a block; outside: a module outside the blocks): 1 it gets an adapter,
 * 0 not. */
static int targeted(pc *p, const char *key, int outside) {
    json_t *ex = json_object_get(p->j, "exclude_modules"), *v;
    size_t i;
    if (json_is_string(ex) && json_string_length(ex)) {
        if (re_match(p, "exclude_modules", json_string_value(ex), key,
                     PCRE2_ANCHORED | PCRE2_ENDANCHORED, NULL) == 1)
            return 0;
    } else if (json_is_array(ex)) {
        json_array_foreach(ex, i, v) {
            const char *e = json_string_value(v);
            if (e && (!strcmp(key, e) || ends_dot(key, e))) return 0;
        }
    }
    json_t *tm = json_object_get(p->j, "target_modules");
    if (json_is_string(tm)) {
        const char *t = json_string_value(tm);
        if (!strcasecmp(t, "all-linear")) return !outside;   /* the linear layers of the blocks */
        return re_match(p, "target_modules", t, key, PCRE2_ANCHORED | PCRE2_ENDANCHORED, NULL) == 1;
    }
    /* a list; null: PEFT's default for the model type (the architecture's) */
    char def[128];
    const char *names[ZT_LORA_MAX_MODS * 2];
    int nn = 0;
    if (!json_is_array(tm)) {
        snprintf(def, sizeof def, "%s", p->arch->lora_default ? p->arch->lora_default : "");
        for (char *s = strtok(def, ","); s && nn < (int)(sizeof names / sizeof names[0]); s = strtok(NULL, ","))
            names[nn++] = s;
    }
    int found = 0;
    if (json_is_array(tm)) {
        json_array_foreach(tm, i, v) if (json_string_value(v) && !strcmp(key, json_string_value(v))) return 1;
        json_array_foreach(tm, i, v) found |= json_string_value(v) && ends_dot(key, json_string_value(v));
    } else {
        for (int k = 0; k < nn; ++k) if (!strcmp(key, names[k])) return 1;
        for (int k = 0; k < nn; ++k) found |= ends_dot(key, names[k]);
    }
    json_t *lt = json_object_get(p->j, "layers_to_transform");
    const int by_layer = json_is_integer(lt) || (json_is_array(lt) && json_array_size(lt));
    if (!found || !by_layer) return found;
    json_t *lp = json_object_get(p->j, "layers_pattern");
    long idx = -1;
    if (!lp || json_is_null(lp) || (json_is_string(lp) && !json_string_length(lp)) ||
        (json_is_array(lp) && !json_array_size(lp))) {
        re_match(p, "layers_pattern", ".*?\\.[^.]*\\.(?P<idx>\\d+)\\.", key, PCRE2_ANCHORED, &idx);
    } else {
        const size_t n = json_is_array(lp) ? json_array_size(lp) : 1;
        for (size_t k = 0; k < n && idx < 0; ++k) {
            const char *pat = json_string_value(json_is_array(lp) ? json_array_get(lp, k) : lp);
            char re[512];
            snprintf(re, sizeof re, "(?:^|.*?\\.)%s\\.(?P<idx>\\d+)\\.", pat ? pat : "");
            re_match(p, "layers_pattern", re, key, PCRE2_ANCHORED, &idx);
        }
    }
    if (idx < 0) return 0;
    if (json_is_integer(lt)) return json_integer_value(lt) == idx;
    json_array_foreach(lt, i, v) if (json_integer_value(v) == idx) return 1;
    return 0;
}

/* The value rank_pattern / alpha_pattern (pat) gives the module `key`, as
 * PEFT's get_pattern_key: the first pattern k (in the file's order) with
 * re.match("(.*\.)?(k)$", key); NULL: none (the default applies). */
static json_t *pattern_value(pc *p, const char *what, json_t *pat, const char *key, const char **which) {
    const char *k;
    json_t *v;
    if (!json_is_object(pat)) return NULL;
    json_object_foreach(pat, k, v) {
        char re[512];
        snprintf(re, sizeof re, "(.*\\.)?(%s)$", k);
        if (re_match(p, what, re, key, PCRE2_ANCHORED, NULL) == 1) {
            *which = k;
            return v;
        }
    }
    return NULL;
}

/* "q_proj,v_proj" for the modules `want` of a block, or "none" */
static void label(const zt_lora_mod *all, int na, const int *want, char *b, size_t n) {
    zt_lora_label_list(all, na, want, b, n);
    if (!b[0]) snprintf(b, n, "none");
}

/* The keys that select the modules, as given ("target_modules=[...],
 * exclude_modules=..."). */
static void selection(pc *p, char *b, size_t n) {
    static const char *const keys[] = {"target_modules", "exclude_modules", "layers_to_transform",
                                       "layers_pattern"};
    size_t k = 0;
    b[0] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && k < n; ++i) {
        json_t *v = json_object_get(p->j, keys[i]);
        if (i && is_off(v)) continue;
        char s[80];
        val(v, s, sizeof s);
        k += (size_t)snprintf(b + k, n - k, "%s%s=%s", k ? ", " : "", keys[i], s);
    }
}

static void check_modules(pc *p, const zt_lora *lo) {
    zt_lora_mod all[ZT_LORA_MAX_MODS];
    int ng = 0;
    const int na = p->arch->lora_mods(p->mc, all, &ng), L = p->mc->n_layer;
    int run[ZT_LORA_MAX_MODS] = {0}, first[ZT_LORA_MAX_MODS] = {0};
    for (int i = 0; i < na; ++i)
        for (int k = 0; k < lo->n; ++k) run[i] |= !strcmp(all[i].path, lo->mods[k].path);
    char sel[400], a[160], b[160];
    selection(p, sel, sizeof sel);
    for (int l = 0; l < L && !p->bad; ++l) {
        int got[ZT_LORA_MAX_MODS] = {0};
        char blk[64], key[256];
        snprintf(blk, sizeof blk, p->arch->hf_block, l);
        for (int i = 0; i < na; ++i) {
            snprintf(key, sizeof key, "%s%s", blk, all[i].path);
            got[i] = targeted(p, key, 0);
        }
        if (p->bad) return;
        if (!l) {
            memcpy(first, got, sizeof got);
            continue;
        }
        if (memcmp(first, got, sizeof got)) {
            label(all, na, first, a, sizeof a);
            label(all, na, got, b, sizeof b);
            refuse(p, "%s adapt other modules in block %d (%s) than in block 0 (%s): LoRA on part "
                   "of the blocks is not supported by ztrain", sel, l, b, a);
            return;
        }
    }
    /* the modules outside the blocks PEFT could adapt (embeddings, LM head)
     * and their neighbours: none selected */
    static const char *const outside_llama[] = {"model.embed_tokens", "model.norm", "lm_head", NULL};
    static const char *const outside_gpt2[] = {"transformer.wte", "transformer.wpe",
                                               "transformer.ln_f", "lm_head", NULL};
    const char *const *out = !strcmp(p->arch->name, "gpt2") ? outside_gpt2 : outside_llama;
    for (int k = 0; out[k] && !p->bad; ++k)
        if (targeted(p, out[k], 1) && !p->bad) {
            refuse(p, "%s select %s, which ztrain does not adapt (LoRA on the linear layers of "
                   "the blocks only)", sel, out[k]);
            return;
        }
    if (p->bad) return;
    if (memcmp(first, run, sizeof run)) {
        label(all, na, first, a, sizeof a);
        label(all, na, run, b, sizeof b);
        refuse(p, "%s adapt %s in every block; the run's ztrain.lora.targets are %s", sel, a, b);
        return;
    }
    /* each adapted module's rank and alpha */
    json_t *rp = json_object_get(p->j, "rank_pattern"), *ap = json_object_get(p->j, "alpha_pattern");
    for (int l = 0; l < L && !p->bad; ++l)
        for (int i = 0; i < na; ++i) {
            if (!run[i]) continue;
            char blk[64], key[256];
            snprintf(blk, sizeof blk, p->arch->hf_block, l);
            snprintf(key, sizeof key, "%s%s", blk, all[i].path);
            const char *k = NULL;
            json_t *r = pattern_value(p, "rank_pattern", rp, key, &k);
            if (r && (!json_is_integer(r) || json_integer_value(r) != p->mc->lora_r)) {
                val(r, a, sizeof a);
                refuse(p, "rank_pattern[\"%s\"]=%s gives %s another rank than r=%d: per-module "
                       "ranks are not supported by ztrain", k, a, key, p->mc->lora_r);
                return;
            }
            r = pattern_value(p, "alpha_pattern", ap, key, &k);
            if (r && (!json_is_number(r) || json_number_value(r) != p->mc->lora_alpha)) {
                val(r, a, sizeof a);
                refuse(p, "alpha_pattern[\"%s\"]=%s gives %s another alpha than lora_alpha=%g: "
                       "per-module alphas are not supported by ztrain", k, a, key,
                       p->mc->lora_alpha);
                return;
            }
        }
}

/* ------------------------------------------------------------ the keys */

enum { INERT, OFF, NUL, SPECIAL };
static const struct {
    const char *key;
    int kind;
    const char *what;     /* OFF / NUL: what a value asks for */
} KEYS[] = {
    /* metadata; base_model_name_or_path is checked by the caller */
    {"peft_type", SPECIAL, NULL}, {"task_type", INERT, NULL}, {"base_model_name_or_path", INERT, NULL},
    {"revision", INERT, NULL}, {"inference_mode", INERT, NULL}, {"auto_mapping", INERT, NULL},
    {"peft_version", INERT, NULL},
    /* applied */
    {"r", SPECIAL, NULL}, {"lora_alpha", SPECIAL, NULL}, {"use_rslora", SPECIAL, NULL},
    {"lora_dropout", SPECIAL, NULL}, {"target_modules", SPECIAL, NULL},
    {"exclude_modules", SPECIAL, NULL}, {"layers_to_transform", SPECIAL, NULL},
    {"layers_pattern", SPECIAL, NULL}, {"rank_pattern", SPECIAL, NULL},
    {"alpha_pattern", SPECIAL, NULL}, {"bias", SPECIAL, NULL}, {"init_lora_weights", SPECIAL, NULL},
    /* PEFT sets it from the layer type (Linear: false, GPT-2's Conv1D: true) */
    {"fan_in_fan_out", INERT, NULL},
    /* used only with an init_lora_weights that is refused, or a switch that is */
    {"loftq_config", INERT, NULL}, {"eva_config", INERT, NULL}, {"corda_config", INERT, NULL},
    {"lora_ga_config", INERT, NULL}, {"megatron_core", INERT, NULL},
    {"qalora_group_size", INERT, NULL},
    /* ties adapters of embedding layers (never adapted here) */
    {"ensure_weight_tying", INERT, NULL},
    /* PEFT drops it when loading */
    {"runtime_config", INERT, NULL},
    /* off: null, false, [] or {} */
    {"use_dora", OFF, "DoRA: a trained magnitude vector per module"},
    {"lora_bias", OFF, "a trained bias of lora_B"},
    {"use_qalora", OFF, "QA-LoRA (GPTQ bases)"},
    {"modules_to_save", OFF, "whole modules trained and saved beside the adapters"},
    {"layer_replication", OFF, "blocks repeated in the model"},
    {"megatron_config", OFF, "Megatron's parallel linear layers"},
    {"target_parameters", OFF, "LoRA on parameters (MoE experts) instead of modules"},
    /* any value but null selects them (PEFT makes {} a default config of a
     * LoRA variant; [] of trainable tokens is a wrapper of the embeddings) */
    {"alora_invocation_tokens", NUL, "activated LoRA (aLoRA)"},
    {"trainable_token_indices", NUL, "trained rows of the embeddings"},
    {"velora_config", NUL, "VeLoRA"},
    {"monteclora_config", NUL, "MonteCLoRA"},
    {"use_bdlora", NUL, "block-diagonal LoRA (BD-LoRA)"},
    {"arrow_config", NUL, "Arrow routing"},
    {"kasa_config", NUL, "KaSA"},
};

static void check_keys(pc *p) {
    const char *k;
    json_t *v;
    char s[80];
    json_object_foreach(p->j, k, v) {
        int kind = -1;
        const char *what = NULL;
        for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; ++i)
            if (!strcmp(KEYS[i].key, k)) {
                kind = KEYS[i].kind;
                what = KEYS[i].what;
            }
        val(v, s, sizeof s);
        if (kind == OFF && !is_off(v))
            refuse(p, "%s=%s (%s) is not supported by ztrain", k, s, what);
        else if (kind == NUL && !json_is_null(v))
            refuse(p, "%s=%s (%s) is not supported by ztrain", k, s, what);
        else if (kind < 0 && !is_off(v))
            refuse(p, "%s=%s is not a key of PEFT 0.21's LoraConfig: unknown to ztrain", k, s);
    }
    /* bias: "none" */
    json_t *b = json_object_get(p->j, "bias");
    if (b && !json_is_null(b) && !(json_is_string(b) && !strcmp(json_string_value(b), "none"))) {
        val(b, s, sizeof s);
        refuse(p, "bias=%s (the base model's biases trained and saved) is not supported by ztrain", s);
    }
    /* init_lora_weights: how PEFT draws the adapters before the file's values
     * replace them -- unless it changes the base weights or the training */
    json_t *iw = json_object_get(p->j, "init_lora_weights");
    if (iw && !json_is_boolean(iw) && !json_is_null(iw)) {
        const char *x = json_string_value(iw);
        val(iw, s, sizeof s);
        if (!x)
            refuse(p, "init_lora_weights=%s is not a PEFT initialization", s);
        else if (!strcasecmp(x, "gaussian") || !strcmp(x, "orthogonal") || !strcmp(x, "eva"))
            ;   /* A and B only: the file's values replace them */
        else if (!strncmp(x, "pissa", 5) || !strncmp(x, "corda", 5) || !strcasecmp(x, "olora") ||
                 !strcmp(x, "loftq") || !strcmp(x, "lora_ga"))
            refuse(p, "init_lora_weights=%s (the adapter goes with base weights that initialization "
                   "changed: a residual base) is not supported by ztrain", s);
        else if (!strcasecmp(x, "mica"))
            refuse(p, "init_lora_weights=%s (MiCA: lora_B frozen, lora_A trained) is not supported "
                   "by ztrain", s);
        else
            refuse(p, "init_lora_weights=%s is not a PEFT initialization", s);
    }
    /* the shapes PEFT accepts (LoraConfig.__post_init__ and the matching) */
    json_t *tm = json_object_get(p->j, "target_modules"), *lt = json_object_get(p->j, "layers_to_transform"),
           *lp = json_object_get(p->j, "layers_pattern"), *ex = json_object_get(p->j, "exclude_modules");
    size_t i;
    int list_ok = 1;
    if (tm && !json_is_null(tm) && !json_is_string(tm) && !json_is_array(tm)) list_ok = 0;
    json_array_foreach(tm, i, v) list_ok &= json_is_string(v);
    if (!list_ok) {
        val(tm, s, sizeof s);
        refuse(p, "target_modules=%s: not a list of module names, a regular expression or null", s);
        p->bad = 1;
    }
    list_ok = !ex || json_is_null(ex) || json_is_string(ex) || json_is_array(ex);
    json_array_foreach(ex, i, v) list_ok &= json_is_string(v);
    if (!list_ok) {
        val(ex, s, sizeof s);
        refuse(p, "exclude_modules=%s: not a list of module names, a regular expression or null", s);
        p->bad = 1;
    }
    list_ok = !lt || json_is_null(lt) || json_is_integer(lt) || json_is_array(lt);
    json_array_foreach(lt, i, v) list_ok &= json_is_integer(v);
    if (!list_ok) {
        val(lt, s, sizeof s);
        refuse(p, "layers_to_transform=%s: not a layer index, a list of them or null", s);
        p->bad = 1;
    }
    list_ok = !lp || json_is_null(lp) || json_is_string(lp) || json_is_array(lp);
    json_array_foreach(lp, i, v) list_ok &= json_is_string(v);
    if (!list_ok) {
        val(lp, s, sizeof s);
        refuse(p, "layers_pattern=%s: not a name, a list of them or null", s);
        p->bad = 1;
    }
    json_t *rp = json_object_get(p->j, "rank_pattern"), *ap = json_object_get(p->j, "alpha_pattern");
    if ((rp && !json_is_null(rp) && !json_is_object(rp)) || (ap && !json_is_null(ap) && !json_is_object(ap))) {
        refuse(p, "rank_pattern / alpha_pattern: not an object");
        p->bad = 1;
    }
    if (json_is_string(tm) && lt && !json_is_null(lt)) {
        refuse(p, "layers_to_transform with target_modules as a string: PEFT refuses it");
        p->bad = 1;
    }
    if (json_is_string(tm) && lp && !json_is_null(lp)) {
        refuse(p, "layers_pattern with target_modules as a string: PEFT refuses it");
        p->bad = 1;
    }
    if (!is_off(lp) && (!lt || json_is_null(lt))) {
        refuse(p, "layers_pattern without layers_to_transform: PEFT refuses it");
        p->bad = 1;
    }
}

int ck_peft_config_check(const zt_model_config *mc, json_t *j, const char *file, zt_status *st) {
    pc p;
    memset(&p, 0, sizeof p);
    p.mc = mc;
    p.arch = zt_arch_of(mc);
    p.j = j;
    zt_lora lo;
    ZT_TRY(zt_lora_plan(mc, &lo, st));
    const char *pt = json_string_value(json_object_get(j, "peft_type"));
    if (!pt || strcmp(pt, "LORA"))
        return zt_fail(st, ZT_EINVAL, "%s: peft_type is '%s', not LORA", file, pt ? pt : "?");
    /* the settings, as the run's */
    json_t *r = json_object_get(j, "r"), *al = json_object_get(j, "lora_alpha"),
           *rs = json_object_get(j, "use_rslora"), *dr = json_object_get(j, "lora_dropout");
    char have[256] = "", want[256] = "", s[80];
    size_t kh = 0, kw = 0;
    /* absent or null: PEFT's default (r 8, lora_alpha 8, use_rslora false, lora_dropout 0) */
    const int r_ok = !r || json_is_null(r) ? mc->lora_r == 8
                                           : json_is_integer(r) && json_integer_value(r) == mc->lora_r;
    const int al_ok = !al || json_is_null(al) ? mc->lora_alpha == 8
                                              : json_is_number(al) && json_number_value(al) == mc->lora_alpha;
    const int rs_ok = !rs || json_is_null(rs) ? !mc->lora_rslora
                                              : json_is_boolean(rs) && json_is_true(rs) == (mc->lora_rslora != 0);
    const int dr_ok = !dr || json_is_null(dr) ? mc->lora_dropout == 0
                                              : json_is_number(dr) && json_number_value(dr) == mc->lora_dropout;
#define DIFF(ok, key, runkey, runfmt, runval)                                                     \
    if (!(ok)) {                                                                                  \
        json_t *x_ = json_object_get(j, key);                                                     \
        if (x_) val(x_, s, sizeof s);                                                             \
        else snprintf(s, sizeof s, "(absent: PEFT's default)");                                   \
        kh += (size_t)snprintf(have + kh, kh < sizeof have ? sizeof have - kh : 0, "%s%s=%s",     \
                               kh ? ", " : "", key, s);                                           \
        kw += (size_t)snprintf(want + kw, kw < sizeof want ? sizeof want - kw : 0,                \
                               "%s" runkey "=" runfmt, kw ? ", " : "", runval);                   \
    }
    DIFF(r_ok, "r", "ztrain.lora.r", "%d", mc->lora_r)
    DIFF(al_ok, "lora_alpha", "ztrain.lora.alpha", "%g", mc->lora_alpha)
    DIFF(rs_ok, "use_rslora", "ztrain.lora.rslora", "%s", mc->lora_rslora ? "true" : "false")
    DIFF(dr_ok, "lora_dropout", "ztrain.lora.dropout", "%g", mc->lora_dropout)
#undef DIFF
    if (kh) refuse(&p, "the adapter has %s; the run has %s", have, want);
    check_keys(&p);
    if (!p.bad && p.arch->lora_mods) check_modules(&p, &lo);
    if (p.nw) return zt_fail(st, ZT_EINVAL, "%s: %s", file, p.why);
    return ZT_OK;
}
