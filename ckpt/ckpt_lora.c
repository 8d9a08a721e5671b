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
 * is another one, naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "ckpt_internal.h"
#include "lora.h"

char *ck_get_str_dataset(hid_t f, const char *name) {
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return NULL;
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    size_t sz = t >= 0 ? H5Tget_size(t) : 0;
    char *s = calloc(1, sz + 1);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, sz ? sz : 1);
    if (s && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) {
        free(s);
        s = NULL;
    }
    H5Tclose(mt);
    if (t >= 0) H5Tclose(t);
    H5Dclose(d);
    H5Eclear2(H5E_DEFAULT);
    return s;
}

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
    char *s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    return s;
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
    char h[17];
    hex64(h, cf);
    const char *scf = json_string_value(json_object_get(b, "config_fnv"));
    if (!scf || strcmp(scf, h)) {
        rc = zt_fail(st, ZT_EINVAL, "%s: the base '%s' has changed since the adapters were "
                     "trained: its config.json differs", file, bdir);
        goto out;
    }
    const zt_model *m = zt_ctx_model(ctx);
    for (int i = 0; i < m->n_tensors; ++i) {
        const char *v = json_string_value(json_object_get(tens, m->tensors[i].name));
        hex64(h, fnv[i]);
        if (!v || strcmp(v, h)) {
            rc = zt_fail(st, ZT_EINVAL, "%s: the base '%s' has changed since the adapters were "
                         "trained: tensor %s differs (checksum %s, then %s)", file, bdir,
                         m->tensors[i].name, h, v ? v : "none");
            goto out;
        }
    }
out:
    json_decref(j);
    return rc;
}
