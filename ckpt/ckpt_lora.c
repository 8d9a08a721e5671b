/*
 * ckpt_lora.c -- LoRA checkpoints (docs/lora.md): a checkpoint of a LoRA run
 * holds the adapters and their AdamW state as its tensors (zt_ctx_owned_state
 * is the adapters' engine), and the string dataset /lora: the LoRA settings
 * and the frozen base's fingerprint, JSON
 *
 *   {"r": 16, "alpha": 32, "dropout": 0, "rslora": false, "scale": 2,
 *    "targets": "q_proj,v_proj",
 *    "base": {"init_from": DIR, "seed": S, "config_fnv": HEX,
 *             "tensors": {"embed.w": HEX, ...}}}
 *
 * (tensors: FNV-1a 64 of each base tensor's fp32 values as loaded; absent
 * for a random base, which the seed names).  A resume reloads the base from
 * ztrain.init_from first, and ck_lora_check refuses a checkpoint whose base
 * is another one, naming it; `ckpt export --hf --merge` checks the base
 * directory with the same comparison (base_config_same, base_tensors_same)
 * of the fingerprint computed as the load computes it (hf_model.c).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "arch.h"
#include "devmem.h"
#include "nf4.h"
#include "precision.h"
#include "lora.h"
#include "json_py.h"

static void hex64(char *b, uint64_t v) { snprintf(b, 17, "%016llx", (unsigned long long)v); }

char *ck_lora_json(zt_ctx *ctx) {
    const zt_config *c = zt_ctx_config(ctx);
    const zt_model_config *mc = &c->model;
    zt_lora lo;
    if (zt_lora_plan(mc, &lo, NULL) != ZT_OK) return NULL;
    char tl[200], h[17];
    zt_lora_target_list(&lo, tl, sizeof tl);
    json_t *base = json_pack("{s:s,s:I}", "init_from", c->init_from, "seed", (json_int_t)c->seed);
    uint64_t cf;
    const uint64_t *fnv = zt_ctx_base_fingerprint(ctx, &cf);
    if (fnv) {
        const zt_model *m = zt_ctx_model(ctx);
        json_t *t = json_object();
        for (int i = 0; i < m->n_tensors; ++i) {
            hex64(h, fnv[i]);
            json_object_set_new(t, m->tensors[i].name, json_string(h));
        }
        hex64(h, cf);
        json_object_set_new(base, "config_fnv", json_string(h));
        json_object_set_new(base, "tensors", t);
    }
    json_t *j = json_pack("{s:i,s:f,s:f,s:b,s:f,s:s,s:o}", "r", mc->lora_r, "alpha",
                          mc->lora_alpha, "dropout", mc->lora_dropout, "rslora", mc->lora_rslora,
                          "scale", (double)lo.scale, "targets", tl, "base", base);
    if (j && mc->lora_base[0]) {   /* QLoRA: how the base was stored (absent: the compute dtype),
                                    * and the dtype it was rounded to before quantization */
        json_object_set_new(j, "base_storage", json_string(mc->lora_base));
        json_object_set_new(j, "base_dtype", json_string(c->bf16_enabled   ? "bf16"
                                                         : c->fp16_enabled ? "fp16"
                                                                           : "fp32"));
    }
    char *s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    return s;
}

/* The base's fingerprint now (ck_hf_base_config_fnv, ck_hf_base_fingerprint
 * or the one zt_hf_load recorded) against the one the adapters were trained
 * on (b: /lora's "base"); file: the checkpoint.  The resume and `ckpt export
 * --hf --merge` both check with these. */
static int base_config_same(const char *file, json_t *b, uint64_t cf, zt_status *st) {
    char h[17];
    hex64(h, cf);
    const char *bdir = json_string_value(json_object_get(b, "init_from"));
    const char *scf = json_string_value(json_object_get(b, "config_fnv"));
    if (!scf || strcmp(scf, h))
        return zt_fail(st, ZT_EINVAL, "%s: the base '%s' has changed since the adapters were "
                       "trained: its config.json differs", file, bdir ? bdir : "");
    return ZT_OK;
}

static int base_tensors_same(const char *file, json_t *b, const zt_model *m, const uint64_t *fnv,
                             zt_status *st) {
    char h[17];
    const char *bdir = json_string_value(json_object_get(b, "init_from"));
    json_t *tens = json_object_get(b, "tensors");
    for (int i = 0; i < m->n_tensors; ++i) {
        const char *v = json_string_value(json_object_get(tens, m->tensors[i].name));
        hex64(h, fnv[i]);
        if (!v || strcmp(v, h))
            return zt_fail(st, ZT_EINVAL, "%s: the base '%s' has changed since the adapters were "
                           "trained: tensor %s differs (checksum %s, then %s)", file,
                           bdir ? bdir : "", m->tensors[i].name, h, v ? v : "none");
    }
    return ZT_OK;
}

int ck_lora_check(zt_ctx *ctx, hid_t f, const char *file, zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    const zt_model_config *mc = &c->model;
    char *s = ck_get_str_dataset(f, "lora");
    const int want = zt_ctx_lora_model(ctx) != NULL;
    if (!s && !want) return ZT_OK;
    if (!s)
        return zt_fail(st, ZT_EINVAL, "%s: a full fine-tuning checkpoint; this run trains LoRA "
                       "adapters (ztrain.lora.r=%d): resume it without --lora-r, or start the "
                       "adapters from its exported weights", file, mc->lora_r);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    free(s);
    int rc = ZT_OK;
    json_t *b = json_object_get(j, "base");
    if (!j || !b) {
        rc = zt_fail(st, ZT_EDATA, "%s: /lora is not readable JSON", file);
        goto out;
    }
    const int r = (int)json_integer_value(json_object_get(j, "r"));
    const char *bdir = json_string_value(json_object_get(b, "init_from"));
    if (!want) {
        rc = zt_fail(st, ZT_EINVAL, "%s: holds LoRA adapters (r=%d) of the base '%s'; resume with "
                     "--lora-r %d --init-from %s", file, r, bdir ? bdir : "", r,
                     bdir && bdir[0] ? bdir : "(random base)");
        goto out;
    }
    zt_lora lo;
    char tl[200];
    if ((rc = zt_lora_plan(mc, &lo, st)) != ZT_OK) goto out;
    zt_lora_target_list(&lo, tl, sizeof tl);
    const char *ct = json_string_value(json_object_get(j, "targets"));
    if (r != mc->lora_r || !ct || strcmp(ct, tl) ||
        json_real_value(json_object_get(j, "alpha")) != mc->lora_alpha ||
        json_is_true(json_object_get(j, "rslora")) != (mc->lora_rslora != 0)) {
        rc = zt_fail(st, ZT_EINVAL, "%s: the checkpoint's LoRA (r=%d, alpha=%g, targets %s%s) "
                     "differs from the configured one (r=%d, alpha=%g, targets %s%s)", file, r,
                     json_real_value(json_object_get(j, "alpha")), ct ? ct : "?",
                     json_is_true(json_object_get(j, "rslora")) ? ", rslora" : "", mc->lora_r,
                     mc->lora_alpha, tl, mc->lora_rslora ? ", rslora" : "");
        goto out;
    }
    const char *bs = json_string_value(json_object_get(j, "base_storage"));
    if (strcmp(bs ? bs : "", mc->lora_base)) {
        rc = zt_fail(st, ZT_EINVAL, "%s: the adapters were trained on a base stored as %s, this run "
                     "stores it as %s (ztrain.lora.base)", file, bs ? bs : "the compute dtype",
                     mc->lora_base[0] ? mc->lora_base : "the compute dtype");
        goto out;
    }
    if (!bdir || strcmp(bdir, c->init_from)) {
        rc = zt_fail(st, ZT_EINVAL, "%s: the adapters were trained on the base '%s', not on "
                     "ztrain.init_from='%s'", file, bdir && bdir[0] ? bdir : "(random, seed)",
                     c->init_from);
        goto out;
    }
    json_t *tens = json_object_get(b, "tensors");
    uint64_t cf;
    const uint64_t *fnv = zt_ctx_base_fingerprint(ctx, &cf);
    if (!tens) {   /* a random base: the seed makes it */
        if ((unsigned long long)json_integer_value(json_object_get(b, "seed")) != c->seed)
            rc = zt_fail(st, ZT_EINVAL, "%s: the adapters were trained on the random base of "
                         "ztrain.seed=%lld, not %llu", file,
                         (long long)json_integer_value(json_object_get(b, "seed")), c->seed);
        goto out;
    }
    if (!fnv) {
        rc = zt_fail(st, ZT_EINVAL, "%s: the base '%s' is not loaded (load it with zt_hf_load "
                     "before the restore)", file, bdir);
        goto out;
    }
    if ((rc = base_config_same(file, b, cf, st)) == ZT_OK)
        rc = base_tensors_same(file, b, zt_ctx_model(ctx), fnv, st);
out:
    json_decref(j);
    return rc;
}

/* ------------------------------------------------------------ export */


/* An adapter tensor "h<l>.<path>.lora_A|B": its block, module path and kind
 * ('A' or 'B'); -1 when not one. */
static int parse_adapter(const char *name, int *l, char *path, size_t n, char *kind) {
    int used = 0;
    if (sscanf(name, "h%d.%n", l, &used) != 1 || !used) return -1;
    const char *rest = name + used, *dot = strrchr(rest, '.');
    if (!dot || (strcmp(dot, ".lora_A") && strcmp(dot, ".lora_B")) || (size_t)(dot - rest) >= n)
        return -1;
    snprintf(path, n, "%.*s", (int)(dot - rest), rest);
    *kind = dot[6];
    return 0;
}

static int out_dir_ok(const char *out_dir, zt_status *st) {
    struct stat sb;
    if (stat(out_dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return zt_fail(st, ZT_EINVAL, "%s: exists and is not a directory", out_dir);
        int n = 0;
        DIR *d = opendir(out_dir);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
        if (d) closedir(d);
        if (n) return zt_fail(st, ZT_EINVAL, "%s: exists and is not empty (nothing overwritten)",
                              out_dir);
        return ZT_OK;
    }
    return ck_mkdir_p(out_dir, st);
}

/* The checkpoint's adapters, read whole (small): tensor table, values. */
typedef struct adapters {
    hid_t f;
    char file[ZT_PATH_MAX + 64];
    zt_ckpt_info in;
    ck_tlist L;
    float **v;          /* [L.n], ours ([r, in] A, [r, out] B^T) */
    json_t *lora;
    const zt_arch *arch;
} adapters;

static int gather_sink(void *user, const float *x, uint64_t first, uint64_t n) {
    memcpy((float *)user + first, x, n * sizeof(float));
    return 0;
}

static void adapters_free(adapters *a) {
    for (int i = 0; a->v && i < a->L.n; ++i) free(a->v[i]);
    free(a->v);
    free(a->L.t);
    json_decref(a->lora);
    zt_ckpt_info_free(&a->in);
    if (a->f >= 0) H5Fclose(a->f);
    memset(a, 0, sizeof *a);
    a->f = -1;
}

static int adapters_read(const char *path, adapters *a, zt_status *st) {
    memset(a, 0, sizeof *a);
    a->f = -1;
    ZT_TRY(ck_open_table(path, a->file, sizeof a->file, &a->f, &a->in, 0, &a->L, st));
    char *s = ck_get_str_dataset(a->f, "lora");
    if (!s) return zt_fail(st, ZT_EINVAL, "%s: not a LoRA checkpoint (no /lora: it was not trained "
                           "with ztrain.lora.r > 0)", a->file);
    a->lora = json_loads(s, 0, NULL);
    free(s);
    if (!a->lora) return zt_fail(st, ZT_EDATA, "%s: /lora is not readable JSON", a->file);
    a->arch = zt_arch_find(a->in.model.arch);
    if (!a->arch || !a->arch->hf_block)
        return zt_fail(st, ZT_EDATA, "%s: architecture '%s' has no LoRA modules", a->file,
                       a->in.model.arch);
    float *buf = malloc(CK_CHUNK_ELEMS * sizeof(float));
    if (!buf || !(a->v = calloc((size_t)(a->L.n ? a->L.n : 1), sizeof *a->v))) {
        free(buf);
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    int rc = ZT_OK;
    for (int i = 0; rc == ZT_OK && i < a->L.n; ++i) {
        const ck_tinfo *t = &a->L.t[i];
        char name[160];
        uint64_t sum = 0;
        ck_dataset_name(name, sizeof name, CK_PARAMS, t->name);
        if (!(a->v[i] = malloc(t->numel * sizeof(float)))) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
        if (rc == ZT_OK)
            rc = ck_read_checksum(a->f, a->file, name, t, buf, &sum, gather_sink, a->v[i], st);
        if (rc == ZT_OK) rc = ck_check_sum(a->f, a->file, name, sum, st);
    }
    free(buf);
    return rc;
}

static int write_json_file(json_t *j, const char *path, zt_status *st) {
    if (json_dump_file(j, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)))
        return zt_fail(st, ZT_EIO, "%s: cannot write", path);
    return ZT_OK;
}

int zt_ckpt_export_peft(const char *path, const char *out_dir, zt_status *st) {
    zt_status_clear(st);
    adapters a;
    int rc = adapters_read(path, &a, st);
    int n = a.L.n;
    zt_st_spec *specs = calloc((size_t)(n ? n : 1), sizeof *specs);
    char (*names)[256] = calloc((size_t)(n ? n : 1), sizeof *names);
    zt_st_writer w;
    memset(&w, 0, sizeof w);
    json_t *mods = json_array();
    if (rc == ZT_OK && (!specs || !names)) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int i = 0; rc == ZT_OK && i < n; ++i) {
        const ck_tinfo *t = &a.L.t[i];
        int l;
        char p[128], kind, blk[64];
        if (parse_adapter(t->name, &l, p, sizeof p, &kind) || t->ndim != 2) {
            rc = zt_fail(st, ZT_EDATA, "%s: params/%s is not a LoRA adapter", a.file, t->name);
            break;
        }
        snprintf(blk, sizeof blk, a.arch->hf_block, l);
        snprintf(names[i], sizeof names[i], "base_model.model.%s%s.lora_%c.weight", blk, p, kind);
        specs[i].name = names[i];
        specs[i].ndim = 2;
        /* A [r, in] as stored; B^T [r, out] -> PEFT's [out, r] */
        specs[i].shape[0] = kind == 'B' ? t->dims[1] : t->dims[0];
        specs[i].shape[1] = kind == 'B' ? t->dims[0] : t->dims[1];
    }
    if (rc == ZT_OK) rc = out_dir_ok(out_dir, st);
    char fp[ZT_PATH_MAX + 64];
    snprintf(fp, sizeof fp, "%s/adapter_model.safetensors", out_dir);
    const char *meta[] = {"format", "pt"};
    if (rc == ZT_OK) rc = zt_st_write_begin(&w, fp, specs, n, ZT_ST_F32, meta, 1, st);
    for (int i = 0; rc == ZT_OK && i < n; ++i) {
        const ck_tinfo *t = &a.L.t[i];
        if (specs[i].shape[0] == t->dims[0]) {
            rc = zt_st_write_values(&w, a.v[i], t->numel, st);
            continue;
        }
        const uint64_t R = t->dims[0], C = t->dims[1];
        float *row = malloc(R * sizeof(float));
        if (!row) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
        for (uint64_t c = 0; rc == ZT_OK && c < C; ++c) {
            for (uint64_t r = 0; r < R; ++r) row[r] = a.v[i][r * C + c];
            rc = zt_st_write_values(&w, row, R, st);
        }
        free(row);
    }
    if (rc == ZT_OK) rc = zt_st_write_end(&w, st);
    zt_st_write_abort(&w);
    if (rc == ZT_OK) {
        /* target_modules: the modules the checkpoint holds adapters of, as
         * entries PEFT selects exactly them with (a name, or a path where
         * another module has the name: GPT-2's c_proj) */
        zt_lora_mod all[ZT_LORA_MAX_MODS];
        int ng = 0, want[ZT_LORA_MAX_MODS] = {0};
        const int na = a.arch->lora_mods(&a.in.model, all, &ng);
        for (int i = 0; i < n; ++i) {
            int l;
            char p[128], kind;
            if (parse_adapter(a.L.t[i].name, &l, p, sizeof p, &kind)) continue;
            for (int k = 0; k < na; ++k) want[k] |= !strcmp(all[k].path, p);
        }
        char buf[256];
        zt_lora_label_list(all, na, want, buf, sizeof buf);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
            json_array_append_new(mods, json_string(tok));
        json_t *b = json_object_get(a.lora, "base");
        const char *bdir = json_string_value(json_object_get(b, "init_from"));
        /* what was trained: plain LoRA on those modules of every block, one
         * rank and alpha; the keys of what it is not, with PEFT's off values */
        json_t *cfg = json_pack(
            "{s:s,s:s,s:i,s:O,s:O,s:O,s:O,s:s,s:b,s:b,s:b,s:s,s:n,s:s}", "peft_type", "LORA",
            "task_type", "CAUSAL_LM", "r", (int)json_integer_value(json_object_get(a.lora, "r")),
            "lora_alpha", json_object_get(a.lora, "alpha"), "lora_dropout",
            json_object_get(a.lora, "dropout"), "use_rslora", json_object_get(a.lora, "rslora"),
            "target_modules", mods, "bias", "none", "fan_in_fan_out",
            !strcmp(a.arch->name, "gpt2"), "inference_mode", 1, "init_lora_weights", 1,
            "base_model_name_or_path", bdir ? bdir : "", "modules_to_save", "revision", "main");
        json_t *off = json_pack("{s:b,s:b,s:n,s:n,s:n,s:{},s:{},s:n,s:n,s:n,s:n,s:{}}", "use_dora", 0,
                                "lora_bias", 0, "layers_to_transform", "layers_pattern",
                                "exclude_modules", "rank_pattern", "alpha_pattern", "megatron_config",
                                "layer_replication", "trainable_token_indices", "target_parameters",
                                "loftq_config");
        if (cfg && off) json_object_update(cfg, off);
        json_decref(off);
        snprintf(fp, sizeof fp, "%s/adapter_config.json", out_dir);
        rc = cfg ? write_json_file(cfg, fp, st) : zt_fail(st, ZT_ENOMEM, "out of memory");
        json_decref(cfg);
    }
    json_decref(mods);
    free(specs);
    free(names);
    adapters_free(&a);
    return rc;
}

/* ---- merged */

typedef struct merge_ctx {
    adapters *a;
    double scale;
    int gpt2;                  /* Conv1D weights [in, out] */
    zt_st_spec *specs;
    char (*names)[256];
    int n, cap;
    zt_st_writer *w;           /* NULL: the first pass collects the specs */
    int merged;
    int nf4;                   /* QLoRA: 1 nf4, 2 nf4-dq: the quantized weights dequantized */
    zt_precision round;        /* ... after rounding to this dtype (and back to it after) */
} merge_ctx;

/* QLoRA: x[n] (HF weight `name`) replaced by what the NF4 base computed with:
 * rounded to the base dtype, quantized, dequantized, rounded again. */
static int nf4_roundtrip(merge_ctx *m, const char *name, float *x, uint64_t n, zt_status *st) {
    static const char *const mods[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                       "mlp.down_proj"};
    int l, used = 0, hit = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &used) != 1 || !used) return ZT_OK;
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; ++i) {
        char w[64];
        snprintf(w, sizeof w, "%s.weight", mods[i]);
        hit |= !strcmp(name + used, w);
    }
    if (!hit) return ZT_OK;
    const zt_backend *cpu = zt_backend_cpu();
    uint16_t *h = m->round != ZT_PREC_FP32 ? malloc(n * 2) : NULL;
    zt_nf4 q;
    char err[200];
    int rc = ZT_OK;
    if ((m->round != ZT_PREC_FP32 && !h) || zt_nf4_alloc(&q, n, m->nf4 == 2) != ZT_NF4_OK) {
        free(h);
        return zt_fail(st, ZT_ENOMEM, "out of memory (%s)", name);
    }
    if (h) {
        zt_prec_narrow(cpu, m->round, h, x, n);
        zt_prec_widen(cpu, m->round, x, h, n);
    }
    if (zt_nf4_quantize(&q, x, ZT_NF4_F32, NULL, err, sizeof err) != ZT_NF4_OK ||
        zt_nf4_dequantize(&q, x, ZT_NF4_F32, err, sizeof err) != ZT_NF4_OK)
        rc = zt_fail(st, ZT_EDATA, "%s: NF4: %s", name, err);
    if (rc == ZT_OK && h) {
        zt_prec_narrow(cpu, m->round, h, x, n);
        zt_prec_widen(cpu, m->round, x, h, n);
    }
    zt_nf4_free(&q);
    free(h);
    return rc;
}

/* The adapter pair (A [r, in], B^T [r, out]) of HF weight `name`, if any. */
static int find_pair(const adapters *a, const char *name, const float **A, const float **BT,
                     const ck_tinfo **ta, const ck_tinfo **tb) {
    *A = *BT = NULL;
    for (int i = 0; i < a->L.n; ++i) {
        int l;
        char p[128], kind, full[256], blk[64];
        if (parse_adapter(a->L.t[i].name, &l, p, sizeof p, &kind)) continue;
        snprintf(blk, sizeof blk, a->arch->hf_block, l);
        snprintf(full, sizeof full, "%s%s.weight", blk, p);
        const char *opt = a->arch->hf_optional_prefix;
        if (strcmp(full, name) && !(opt && !strncmp(full, opt, strlen(opt)) &&
                                    !strcmp(full + strlen(opt), name)))
            continue;
        if (kind == 'A') { *A = a->v[i]; *ta = &a->L.t[i]; }
        else { *BT = a->v[i]; *tb = &a->L.t[i]; }
    }
    return *A && *BT ? 0 : -1;
}

static int merge_tensor(void *user, const zt_st_file *f, const zt_st_tensor *t, zt_status *st) {
    merge_ctx *m = user;
    if (!m->w) {   /* pass 1: the output's table */
        if (m->n == m->cap) {
            m->cap = m->cap ? 2 * m->cap : 64;
            m->specs = realloc(m->specs, (size_t)m->cap * sizeof *m->specs);
            m->names = realloc(m->names, (size_t)m->cap * sizeof *m->names);
            if (!m->specs || !m->names) return zt_fail(st, ZT_ENOMEM, "out of memory");
        }
        if (t->ndim > 2) return zt_fail(st, ZT_EUNSUPPORTED, "%s: tensor %s has %d dimensions",
                                        f->path, t->name, t->ndim);
        snprintf(m->names[m->n], sizeof m->names[m->n], "%s", t->name);
        m->specs[m->n].ndim = t->ndim;
        m->specs[m->n].shape[0] = t->ndim ? t->shape[0] : 1;
        m->specs[m->n].shape[1] = t->ndim == 2 ? t->shape[1] : 0;
        m->n++;
        return ZT_OK;
    }
    ZT_TRY(zt_st_check_float(f, t, st));
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; ++d) numel *= t->shape[d];
    float *x = malloc((numel ? numel : 1) * sizeof(float));
    if (!x) return zt_fail(st, ZT_ENOMEM, "out of memory (%s)", t->name);
    int rc = zt_st_read(f, t, 0, numel, x, st);
    if (rc == ZT_OK && m->nf4 && t->ndim == 2) rc = nf4_roundtrip(m, t->name, x, numel, st);
    const float *A, *BT;
    const ck_tinfo *ta = NULL, *tb = NULL;
    if (rc == ZT_OK && t->ndim == 2 && !find_pair(m->a, t->name, &A, &BT, &ta, &tb)) {
        /* delta[out, in] = s * B A = s * sum_k BT[k, o] A[k, i] */
        const uint64_t r = ta->dims[0], in = ta->dims[1], out = tb->dims[1];
        const uint64_t R0 = t->shape[0], C0 = t->shape[1];
        if (!(m->gpt2 ? R0 == in && C0 == out : R0 == out && C0 == in))
            rc = zt_fail(st, ZT_EDATA, "%s: %s is [%llu, %llu], its adapters [%llu, %llu] -> "
                         "[%llu, %llu]", f->path, t->name, (unsigned long long)R0,
                         (unsigned long long)C0, (unsigned long long)r, (unsigned long long)in,
                         (unsigned long long)r, (unsigned long long)out);
        for (uint64_t o = 0; rc == ZT_OK && o < out; ++o)
            for (uint64_t i = 0; i < in; ++i) {
                double s = 0;
                for (uint64_t k = 0; k < r; ++k) s += (double)BT[k * out + o] * A[k * in + i];
                float *dst = m->gpt2 ? &x[i * out + o] : &x[o * in + i];
                *dst = (float)((double)*dst + m->scale * s);
            }
        m->merged++;
    }
    if (rc == ZT_OK) rc = zt_st_write_values(m->w, x, numel, st);
    free(x);
    return rc;
}

/* The base's tensors as loaded against the checkpoint's fingerprint of
 * them (after its config.json was found unchanged): the model its
 * config.json describes, as the training run read it (zt_hf_read_config),
 * laid out without values; its tensors read as zt_hf_load reads them. */
static int base_unchanged(const adapters *a, json_t *b, zt_status *st) {
    if (!json_is_object(json_object_get(b, "tensors")))
        return zt_fail(st, ZT_EDATA, "%s: /lora holds no fingerprint of the base's tensors",
                       a->file);
    const char *bdir = json_string_value(json_object_get(b, "init_from"));
    const zt_model_ops *ops = NULL;
    void *self = NULL;
    zt_model *m = NULL;
    uint64_t *fnv = NULL;
    zt_config *c = zt_config_new();
    int rc = c ? zt_hf_read_config(bdir, c, st) : zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) rc = zt_config_finalize_plan(c, 1, st);
    if (rc == ZT_OK) rc = zt_arch_of(&c->model)->create(&c->model, zt_backend_cpu(), 0, &ops, &self, st);
    if (rc == ZT_OK && (rc = zt_model_create(ops, self, &c->model, zt_backend_cpu(), 0, &m, st)) != ZT_OK)
        ops->destroy(self);
    if (rc == ZT_OK && !(fnv = calloc((size_t)m->n_tensors, sizeof *fnv)))
        rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK) rc = ck_hf_base_fingerprint(m, bdir, fnv, st);
    if (rc == ZT_OK) rc = base_tensors_same(a->file, b, m, fnv, st);
    free(fnv);
    if (m) zt_model_free(m, 1);
    zt_config_free(c);
    return rc;
}

int zt_ckpt_export_merged(const char *path, const char *out_dir, int bf16, zt_status *st) {
    zt_status_clear(st);
    adapters a;
    int rc = adapters_read(path, &a, st);
    merge_ctx m;
    memset(&m, 0, sizeof m);
    zt_st_writer w;
    memset(&w, 0, sizeof w);
    json_t *b = rc == ZT_OK ? json_object_get(a.lora, "base") : NULL;
    const char *bdir = json_string_value(json_object_get(b, "init_from"));
    if (rc == ZT_OK && (!bdir || !bdir[0]))
        rc = zt_fail(st, ZT_EINVAL, "%s: the adapters were trained on a random base (no "
                     "ztrain.init_from): there is no Hugging Face base to merge into", a.file);
    char p[ZT_PATH_MAX + 64];
    /* the base as when the adapters were trained: the fingerprint a resume
     * checks (config.json, then every tensor as loaded) */
    uint64_t cf = 0;
    if (rc == ZT_OK) rc = ck_hf_base_config_fnv(bdir, &cf, st);
    if (rc == ZT_OK) rc = base_config_same(a.file, b, cf, st);
    if (rc == ZT_OK) rc = base_unchanged(&a, b, st);
    if (rc == ZT_OK) {
        m.a = &a;
        m.scale = json_real_value(json_object_get(a.lora, "scale"));
        m.gpt2 = !strcmp(a.arch->name, "gpt2");
        const char *bs = json_string_value(json_object_get(a.lora, "base_storage"));
        const char *bt = json_string_value(json_object_get(a.lora, "base_dtype"));
        m.nf4 = !bs ? 0 : !strcmp(bs, "nf4") ? 1 : !strcmp(bs, "nf4-dq") ? 2 : -1;
        m.round = bt && !strcmp(bt, "bf16") ? ZT_PREC_BF16 : bt && !strcmp(bt, "fp16") ? ZT_PREC_FP16
                                                                                      : ZT_PREC_FP32;
        if (m.nf4 < 0)
            rc = zt_fail(st, ZT_EDATA, "%s: unknown base storage '%s'", a.file, bs);
        else rc = ck_hf_each_tensor(bdir, merge_tensor, &m, st);   /* pass 1: the table */
    }
    for (int i = 0; rc == ZT_OK && i < m.n; ++i) m.specs[i].name = m.names[i];
    if (rc == ZT_OK) rc = out_dir_ok(out_dir, st);
    snprintf(p, sizeof p, "%s/model.safetensors", out_dir);
    const char *meta[] = {"format", "pt"};
    if (rc == ZT_OK)
        rc = zt_st_write_begin(&w, p, m.specs, m.n, bf16 ? ZT_ST_BF16 : ZT_ST_F32, meta, 1, st);
    m.w = &w;
    if (rc == ZT_OK) rc = ck_hf_each_tensor(bdir, merge_tensor, &m, st);   /* pass 2: values */
    if (rc == ZT_OK) rc = zt_st_write_end(&w, st);
    zt_st_write_abort(&w);
    if (rc == ZT_OK && 2 * m.merged != a.L.n)
        rc = zt_fail(st, ZT_EDATA, "%s: %d adapter pairs, %d of them matched a weight of the base "
                     "'%s'", a.file, a.L.n / 2, m.merged, bdir);
    for (int k = 0; rc == ZT_OK && k < CK_HF_SIDE_FILES; ++k) {   /* config.json, tokenizer */
        char from[ZT_PATH_MAX + 64], to[ZT_PATH_MAX + 64];
        snprintf(from, sizeof from, "%s/%s", bdir, ck_hf_side_files[k]);
        snprintf(to, sizeof to, "%s/%s", out_dir, ck_hf_side_files[k]);
        FILE *in = fopen(from, "rb");
        if (!in) continue;
        FILE *out = fopen(to, "wb");
        char buf[8192];
        size_t k2;
        int bad = !out;
        while (!bad && (k2 = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, k2, out) != k2;
        if (out && fclose(out) != 0) bad = 1;
        fclose(in);
        if (bad) rc = zt_fail(st, ZT_EIO, "%s: cannot write", to);
    }
    free(m.specs);
    free(m.names);
    adapters_free(&a);
    return rc;
}

/* ------------------------------------------------------------ import */

static int peft_load_local(zt_ctx *ctx, const char *dir, float *full, zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    const zt_model_config *mc = &c->model;
    const zt_model *lm = zt_ctx_lora_model(ctx);
    const zt_arch *arch = zt_arch_of(mc);
    char p[ZT_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    json_error_t je;
    json_t *j = zt_json_load_file_py(p, 0, &je);
    char why[200];
    if (!j) return zt_fail(st, ZT_EIO, "%s: not readable JSON: %s", p, zt_json_error_text(je.text, why, sizeof why));
    int rc = json_is_object(j) ? ck_peft_config_check(mc, j, p, st)
                               : zt_fail(st, ZT_EDATA, "%s: not a JSON object", p);
    const char *bm = json_string_value(json_object_get(j, "base_model_name_or_path"));
    if (rc == ZT_OK && bm && bm[0] && c->init_from[0]) {
        char a[ZT_PATH_MAX], b[ZT_PATH_MAX];
        /* a directory here: it must be the run's base (a hub name cannot be checked) */
        if (realpath(bm, a) && realpath(c->init_from, b) && strcmp(a, b))
            rc = zt_fail(st, ZT_EINVAL, "%s: a PEFT adapter for the base '%s', not for "
                         "ztrain.init_from='%s'", dir, bm, c->init_from);
    }
    json_decref(j);
    if (rc != ZT_OK) return rc;
    zt_st_file f;
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    ZT_TRY(zt_st_open(p, &f, st));
    int used = 0;
    unsigned char *seen = calloc((size_t)(f.n ? f.n : 1), 1);
    if (!seen) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int i = 0; rc == ZT_OK && i < lm->n_tensors; ++i) {
        const zt_tensor_info *t = &lm->tensors[i];
        int l;
        char path[128], kind, blk[64], name[256];
        if (parse_adapter(t->name, &l, path, sizeof path, &kind)) continue;
        snprintf(blk, sizeof blk, arch->hf_block, l);
        snprintf(name, sizeof name, "base_model.model.%s%s.lora_%c.weight", blk, path, kind);
        const zt_st_tensor *x = zt_st_find(&f, name);
        const uint64_t R = (uint64_t)t->shape[0], C = (uint64_t)t->shape[1];
        /* ours: A [r, in]; B^T [r, out] (PEFT's B is [out, r]) */
        const uint64_t w0 = kind == 'B' ? C : R, w1 = kind == 'B' ? R : C;
        if (!x) {
            rc = zt_fail(st, ZT_EDATA, "%s: %s missing", p, name);
            break;
        }
        if (x->ndim != 2 || x->shape[0] != w0 || x->shape[1] != w1) {
            rc = zt_fail(st, ZT_EDATA, "%s: %s is not [%llu, %llu]", p, name,
                         (unsigned long long)w0, (unsigned long long)w1);
            break;
        }
        used++;
        seen[x - f.t] = 1;
        float *dst = full + t->offset;
        if (kind == 'A') {
            rc = zt_st_read(&f, x, 0, t->numel, dst, st);
            continue;
        }
        float *tmp = malloc(t->numel * sizeof(float));
        if (!tmp) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
        rc = zt_st_read(&f, x, 0, t->numel, tmp, st);
        for (uint64_t o = 0; rc == ZT_OK && o < C; ++o)
            for (uint64_t k = 0; k < R; ++k) dst[k * C + o] = tmp[o * R + k];
        free(tmp);
    }
    for (int i = 0; rc == ZT_OK && used != f.n && i < f.n; ++i)
        if (!seen[i])
            rc = zt_fail(st, ZT_EDATA, "%s: %d tensors, %d of them adapters of this run's targets; "
                         "%s is not one (unexpected keys)", p, f.n, used, f.t[i].name);
    free(seen);
    zt_st_close(&f);
    return rc;
}

int zt_lora_load_peft(zt_ctx *ctx, const char *dir, zt_status *st) {
    zt_status_clear(st);
    const zt_model *lm = zt_ctx_lora_model(ctx);
    if (!lm) return zt_fail(st, ZT_EINVAL, "ztrain.lora.from=%s needs ztrain.lora.r >= 1", dir);
    const zt_backend *be = zt_ctx_backend(ctx);
    float *full = calloc(lm->num_params ? lm->num_params : 1, sizeof(float)), *dev = NULL;
    int rc = full ? peft_load_local(ctx, dir, full, st) : zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK && zt_be_device(be)) {
        if (!(dev = zt_mem_alloc(lm->num_params * sizeof(float), ZT_MEM_WORKSPACE, st))) rc = st->code;
        else be->to_device(dev, full, lm->num_params * sizeof(float));
    }
    if ((rc = ck_agree(ctx, rc, st)) == ZT_OK) {
        zt_shard_set_full_params(zt_ctx_lora_shard(ctx), dev ? dev : full);
        rc = ck_agree(ctx, zt_be_check(be, "loading the PEFT adapter", st), st);
    }
    if (rc == ZT_OK)
        zt_log(ctx, ZT_LOG_INFO, "init: the LoRA adapters (%zu parameters) start from the PEFT "
               "adapter %s", lm->num_params, dir);
    zt_mem_free(dev);
    free(full);
    return rc;
}
