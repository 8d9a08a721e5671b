/*
 * config_sources.c -- where values come from and which one wins.
 *
 * Sources rank default < file < env < flag; a value set from a lower source
 * than the one it currently has is validated and then ignored, so file, env
 * and flags can be applied in any order.  Values computed by
 * zt_config_finalize carry ZT_SRC_DERIVED and are recomputed by every
 * finalize (an explicit set always replaces a derived value).  A file or the
 * environment is applied to a copy and committed only when all of it is
 * valid.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_int.h"

/* ================================================================ storing */

static int src_allows(const zt_config *cfg, int idx, int src) {
    int cur = cfg->src[idx];
    return cur == ZT_SRC_DERIVED || src >= cur;
}

void zt_cfg_store_raw(zt_config *cfg, int idx, const kval *v) {
    const keydef *k = &zt_cfg_keys[idx];
    void *f = fieldp(cfg, k);
    switch (k->type) {
    case T_INT:
    case T_BOOL: *(int *)f = (int)v->i; break;
    case T_LONG: *(long *)f = (long)v->i; break;
    case T_U64: *(unsigned long long *)f = v->u; break;
    case T_DOUBLE: *(double *)f = v->d[0]; break;
    case T_PAIR: memcpy(f, v->d, 2 * sizeof(double)); break;
    case T_STRING:
    case T_ENUM: snprintf((char *)f, k->size, "%s", v->s); break;
    default: break;
    }
}

/* Store a parsed value honoring precedence; expands pseudo-keys. */
void zt_cfg_store(zt_config *cfg, int idx, const kval *v, int src) {
    const keydef *k = &zt_cfg_keys[idx];
    if (k->type == T_PSEUDO) {
        const char *names[2] = {NULL, NULL};
        kval sub[2];
        memset(sub, 0, sizeof sub);
        if (strcmp(k->key, "precision") == 0) {
            names[0] = "bf16.enabled";
            names[1] = "fp16.enabled";
            sub[0].i = strcmp(v->s, "bf16") == 0;
            sub[1].i = strcmp(v->s, "fp16") == 0;
        } else { /* offload */
            names[0] = "zero_optimization.offload_optimizer.device";
            names[1] = "zero_optimization.offload_param.device";
            sub[0].s = strcmp(v->s, "none") == 0 ? "none" : "cpu";
            sub[1].s = strcmp(v->s, "params") == 0 ? "cpu" : "none";
        }
        for (int j = 0; j < 2; j++) zt_cfg_store(cfg, zt_cfg_key_index(names[j]), &sub[j], src);
        if (src_allows(cfg, idx, src)) cfg->src[idx] = (unsigned char)src;
        return;
    }
    if (!src_allows(cfg, idx, src)) return;
    zt_cfg_store_raw(cfg, idx, v);
    cfg->src[idx] = (unsigned char)src;
    cfg->finalized = 0;
}

/* ================================================================ lifecycle */

zt_config *zt_config_new(void) {
    zt_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return NULL;
    cfg->src = calloc((size_t)NKEYS, 1);
    if (!cfg->src) { free(cfg); return NULL; }
    for (int i = 0; i < NKEYS; i++) {
        if (!zt_cfg_keys[i].def) continue;
        kval v;
        memset(&v, 0, sizeof v);
        if (zt_cfg_parse_str(&zt_cfg_keys[i], zt_cfg_keys[i].def, &v) != ZT_OK) {   /* table bug */
            zt_config_free(cfg);
            return NULL;
        }
        zt_cfg_store(cfg, i, &v, ZT_SRC_DEFAULT);
    }
    cfg->world_size = 0;
    cfg->finalized = 0;
    return cfg;
}

void zt_config_free(zt_config *cfg) {
    if (!cfg) return;
    free(cfg->src);
    free(cfg);
}

zt_config *zt_config_dup(const zt_config *cfg) {
    if (!cfg) return NULL;
    zt_config *c = malloc(sizeof *c);
    if (!c) return NULL;
    memcpy(c, cfg, sizeof *c);
    c->src = malloc((size_t)NKEYS);
    if (!c->src) { free(c); return NULL; }
    memcpy(c->src, cfg->src, (size_t)NKEYS);
    return c;
}

/* Replace dst's contents by tmp's (and free tmp). */
void zt_cfg_commit(zt_config *dst, zt_config *tmp) {
    unsigned char *old = dst->src;
    memcpy(dst, tmp, sizeof *dst);
    free(old);
    free(tmp);
}

int zt_config_source(const zt_config *cfg, const char *key) {
    if (!cfg) return -1;
    int i = zt_cfg_lookup(key);
    return i < 0 ? -1 : cfg->src[i];
}

int zt_config_key_is_bool(const char *key_or_alias) {
    int i = zt_cfg_lookup(key_or_alias);
    if (i < 0) return -1;
    return zt_cfg_keys[i].type == T_BOOL || (zt_cfg_keys[i].kf & KF_REPORT) != 0;
}

/* ================================================================ set */

static int bad_src(int src) { return src < ZT_SRC_DEFAULT || src > ZT_SRC_DERIVED; }

int zt_config_set(zt_config *cfg, const char *key, const char *value, zt_source src,
                  zt_status *st) {
    if (!cfg || !key) return zt_fail(st, ZT_EINVAL, "zt_config_set: no config or key");
    if (bad_src((int)src))
        return zt_fail(st, ZT_EINVAL, "zt_config_set: invalid source %d", (int)src);
    const char *name = key;
    while (*name == '-') name++;
    int idx = zt_cfg_lookup(name);
    if (idx < 0) {
        const char *hint = zt_cfg_suggest_key(name, 1);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "unknown key '%s' (did you mean '%s'?)", name, hint);
        return zt_fail(st, ZT_EINVAL, "unknown key '%s'", name);
    }
    const keydef *k = &zt_cfg_keys[idx];
    if (!value) {
        if (k->type != T_BOOL && !(k->kf & KF_REPORT))
            return zt_fail(st, ZT_EINVAL, "key '%s' needs a value", k->key);
        value = "true";
    }
    kval v;
    memset(&v, 0, sizeof v);
    int rc = zt_cfg_parse_str(k, value, &v);
    if (rc != ZT_OK) {
        char req[256];
        zt_cfg_requirement(k, req, sizeof req);
        if (src == ZT_SRC_FLAG)
            return zt_fail(st, rc, "--%s=%s: %s %s", name, value, k->key, req);
        return zt_fail(st, rc, "key '%s' %s, got \"%s\"", k->key, req, value);
    }
    zt_cfg_store(cfg, idx, &v, (int)src);
    return ZT_OK;
}

/* ================================================================ file */

/* Is `path` a proper prefix (at a '.') of some key path or JSON alias? */
static int is_prefix(const char *path) {
    size_t n = strlen(path);
    for (int i = 0; i < NKEYS; i++) {
        const char *c[2] = {zt_cfg_keys[i].key, zt_cfg_keys[i].json_alias};
        for (int j = 0; j < 2; j++)
            if (c[j] && strncmp(c[j], path, n) == 0 && c[j][n] == '.') return 1;
    }
    return 0;
}

static int file_key_index(const char *path) {
    int i = zt_cfg_key_index(path);
    if (i >= 0) return i;
    for (i = 0; i < NKEYS; i++)
        if (zt_cfg_keys[i].json_alias && strcmp(zt_cfg_keys[i].json_alias, path) == 0) return i;
    return -1;
}

static int walk(zt_config *cfg, const char *file, const char *prefix, json_t *obj,
                zt_status *st) {
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v) {
        char path[512];
        int n = prefix[0] ? snprintf(path, sizeof path, "%s.%s", prefix, name)
                          : snprintf(path, sizeof path, "%s", name);
        if (n < 0 || (size_t)n >= sizeof path)
            return zt_fail(st, ZT_EINVAL, "%s: unknown key '%.60s...'", file, path);
        int dc = zt_cfg_ds_compat(cfg, file, path, v, st);
        if (dc < 0) return st ? st->code : ZT_EINVAL;
        if (dc > 0) continue;
        int idx = file_key_index(path);
        if (zt_cfg_ds_auto(cfg, idx, path, v)) continue;
        if (idx >= 0) {
            const keydef *k = &zt_cfg_keys[idx];
            kval kv;
            memset(&kv, 0, sizeof kv);
            int rc = zt_cfg_parse_json(k, v, &kv);
            if (rc != ZT_OK) {
                char req[256];
                zt_cfg_requirement(k, req, sizeof req);
                char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
                zt_fail(st, rc, "%s: key '%s' %s, got %.200s%s", file, path, req,
                        got ? got : "?", got && strlen(got) > 200 ? "..." : "");
                free(got);
                return rc;
            }
            zt_cfg_store(cfg, idx, &kv, ZT_SRC_FILE);
            continue;
        }
        if (is_prefix(path)) {
            if (!json_is_object(v))
                return zt_fail(st, ZT_EINVAL, "%s: key '%s' must be an object", file, path);
            ZT_TRY(walk(cfg, file, path, v, st));
            continue;
        }
        const char *hint = zt_cfg_suggest_key(path, 0);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "%s: unknown key '%s' (did you mean '%s'?)",
                           file, path, hint);
        return zt_fail(st, ZT_EINVAL, "%s: unknown key '%s'", file, path);
    }
    return ZT_OK;
}

int zt_config_load_file(zt_config *cfg, const char *path, zt_status *st) {
    if (!cfg || !path) return zt_fail(st, ZT_EINVAL, "zt_config_load_file: no config or path");
    FILE *f = fopen(path, "rb");
    if (!f)
        return zt_fail(st, ZT_EIO, "cannot open config file '%s': %s", path, strerror(errno));
    json_error_t err;
    char why[200];
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    int rerr = ferror(f);
    fclose(f);
    if (!root) {
        if (rerr) return zt_fail(st, ZT_EIO, "cannot read config file '%s'", path);
        return zt_fail(st, ZT_EINVAL, "%s:%d:%d: %s", path, err.line, err.column,
                       zt_json_error_text(err.text, why, sizeof why));
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return zt_fail(st, ZT_EINVAL, "%s: the top level must be a JSON object", path);
    }
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) {
        json_decref(root);
        return zt_fail(st, ZT_ENOMEM, "out of memory loading '%s'", path);
    }
    int rc = walk(tmp, path, "", root, st);
    json_decref(root);
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    zt_cfg_commit(cfg, tmp);
    return ZT_OK;
}

/* ================================================================ env */

static int apply_env(zt_config *cfg, int idx, const char *name, const char *val,
                     zt_status *st) {
    const keydef *k = &zt_cfg_keys[idx];
    kval v;
    memset(&v, 0, sizeof v);
    int rc = zt_cfg_parse_str(k, val, &v);
    if (rc != ZT_OK) {
        char req[256];
        zt_cfg_requirement(k, req, sizeof req);
        return zt_fail(st, rc, "%s=%s: %s %s", name, val, k->key, req);
    }
    zt_cfg_store(cfg, idx, &v, ZT_SRC_ENV);
    return ZT_OK;
}

int zt_config_load_env_with(zt_config *cfg,
                            const char *(*get)(void *user, const char *name),
                            void *user, zt_status *st) {
    if (!cfg || !get) return zt_fail(st, ZT_EINVAL, "zt_config_load_env_with: bad arguments");
    zt_config *tmp = zt_config_dup(cfg);
    if (!tmp) return zt_fail(st, ZT_ENOMEM, "out of memory reading the environment");
    int rc = ZT_OK;
    for (int i = 0; i < NKEYS && rc == ZT_OK; i++) {
        char gen[256];
        zt_cfg_env_generic(zt_cfg_keys[i].key, gen, sizeof gen);
        const char *gv = get(user, gen);
        const char *sv = zt_cfg_keys[i].env ? get(user, zt_cfg_keys[i].env) : NULL;
        if (gv && sv && strcmp(gv, sv) != 0) {
            rc = zt_fail(st, ZT_EINVAL, "%s=%s conflicts with %s=%s (both set %s)",
                         zt_cfg_keys[i].env, sv, gen, gv, zt_cfg_keys[i].key);
            break;
        }
        if (gv) rc = apply_env(tmp, i, gen, gv, st);
        if (rc == ZT_OK && sv) rc = apply_env(tmp, i, zt_cfg_keys[i].env, sv, st);
    }
    if (rc != ZT_OK) {
        zt_config_free(tmp);
        return rc;
    }
    zt_cfg_commit(cfg, tmp);
    return ZT_OK;
}

static const char *getenv_cb(void *user, const char *name) {
    (void)user;
    return getenv(name);
}

int zt_config_load_env(zt_config *cfg, zt_status *st) {
    if (!cfg) return zt_fail(st, ZT_EINVAL, "zt_config_load_env: no config");
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "ZTRAIN_", 7) != 0) continue;
        char name[256];
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (zt_cfg_env_is_known(name)) continue;
        char hbuf[256];
        const char *hint = zt_cfg_suggest_env(name, hbuf, sizeof hbuf);
        if (hint)
            return zt_fail(st, ZT_EINVAL, "unknown environment variable %s (did you mean %s?)",
                           name, hint);
        return zt_fail(st, ZT_EINVAL, "unknown environment variable %s", name);
    }
    return zt_config_load_env_with(cfg, getenv_cb, NULL, st);
}
