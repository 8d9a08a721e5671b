/*
 * config_output.c -- the configuration written out: zt_config_describe (the
 * effective values with their sources), zt_config_get, zt_config_to_json
 * (reads back to the same configuration) and the help text of every key.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* ================================================================ output */

/* Text of a value as describe prints it. */
static void value_text(const zt_config *c, const keydef *k, char *buf, size_t n) {
    const void *f = cfieldp(c, k);
    char a[64], b[64];
    switch (k->type) {
    case T_INT:
        if ((k->kf & KF_FIT) && *(const int *)f == ZT_MICRO_BATCH_AUTO) snprintf(buf, n, "\"auto\"");
        else if ((k->kf & KF_NODE) && *(const int *)f == ZT_SHARD_GROUP_NODE) snprintf(buf, n, "\"node\"");
        else snprintf(buf, n, "%d", *(const int *)f);
        break;
    case T_LONG: snprintf(buf, n, "%ld", *(const long *)f); break;
    case T_U64: snprintf(buf, n, "%llu", *(const unsigned long long *)f); break;
    case T_BOOL: snprintf(buf, n, "%s", *(const int *)f ? "true" : "false"); break;
    case T_DOUBLE: zt_cfg_fmt_double(*(const double *)f, buf, n); break;
    case T_PAIR:
        zt_cfg_fmt_double(((const double *)f)[0], a, sizeof a);
        zt_cfg_fmt_double(((const double *)f)[1], b, sizeof b);
        snprintf(buf, n, "[%s, %s]", a, b);
        break;
    case T_STRING:
    case T_ENUM: snprintf(buf, n, "\"%s\"", (const char *)f); break;
    default: snprintf(buf, n, "?");
    }
}

int zt_config_get(const zt_config *cfg, const char *key, char *buf, size_t n, zt_status *st) {
    int i = cfg && key ? zt_cfg_lookup(key) : -1;
    if (i < 0 || zt_cfg_keys[i].type == T_PSEUDO)
        return zt_fail(st, ZT_EINVAL, "unknown configuration key '%s'", key ? key : "(null)");
    if (zt_cfg_keys[i].type == T_STRING || zt_cfg_keys[i].type == T_ENUM)
        snprintf(buf, n, "%s", (const char *)cfieldp(cfg, &zt_cfg_keys[i]));
    else if ((zt_cfg_keys[i].kf & KF_FIT) && *(const int *)cfieldp(cfg, &zt_cfg_keys[i]) == ZT_MICRO_BATCH_AUTO)
        snprintf(buf, n, "auto");
    else if ((zt_cfg_keys[i].kf & KF_NODE) && *(const int *)cfieldp(cfg, &zt_cfg_keys[i]) == ZT_SHARD_GROUP_NODE)
        snprintf(buf, n, "node");
    else
        value_text(cfg, &zt_cfg_keys[i], buf, n);
    return ZT_OK;
}

char *zt_config_describe(const zt_config *cfg) {
    if (!cfg) return NULL;
    size_t kw = 0, vw = 0, total = 1;
    char val[ZT_PATH_MAX + 64];
    for (int i = 0; i < NKEYS; i++) {
        if (zt_cfg_keys[i].type == T_PSEUDO) continue;
        value_text(cfg, &zt_cfg_keys[i], val, sizeof val);
        size_t kl = strlen(zt_cfg_keys[i].key), vl = strlen(val);
        if (kl > kw) kw = kl;
        if (vl > vw) vw = vl;
    }
    for (int i = 0; i < NKEYS; i++) {
        if (zt_cfg_keys[i].type == T_PSEUDO) continue;
        total += 2 + kw + 3 + vw + 3 + 2 + 16 + 1;
    }
    char *out = malloc(total);
    if (!out) return NULL;
    size_t j = 0;
    for (int i = 0; i < NKEYS; i++) {
        if (zt_cfg_keys[i].type == T_PSEUDO) continue;
        value_text(cfg, &zt_cfg_keys[i], val, sizeof val);
        int w = snprintf(out + j, total - j, "  %-*s = %-*s   (%s)\n", (int)kw, zt_cfg_keys[i].key,
                         (int)vw, val, zt_source_name(cfg->src[i]));
        if (w < 0 || (size_t)w >= total - j) break;
        j += (size_t)w;
    }
    out[j] = '\0';
    return zt_cfg_describe_ds(cfg, out);
}

/* Minimum "%.*g" precision with which every double of cfg reads back. */
static int needed_precision(const zt_config *c) {
    int need = 15;
    for (int i = 0; i < NKEYS; i++) {
        int nv = zt_cfg_keys[i].type == T_DOUBLE ? 1 : zt_cfg_keys[i].type == T_PAIR ? 2 : 0;
        for (int j = 0; j < nv; j++) {
            double x = ((const double *)cfieldp(c, &zt_cfg_keys[i]))[j];
            char buf[64];
            int p = 15;
            for (; p < 17; p++) {
                snprintf(buf, sizeof buf, "%.*g", p, x);
                if (strtod(buf, NULL) == x) break;
            }
            if (p > need) need = p;
        }
    }
    return need;
}

static json_t *leaf_json(const zt_config *c, const keydef *k) {
    const void *f = cfieldp(c, k);
    switch (k->type) {
    case T_INT:
        if ((k->kf & KF_FIT) && *(const int *)f == ZT_MICRO_BATCH_AUTO) return json_string("auto");
        if ((k->kf & KF_NODE) && *(const int *)f == ZT_SHARD_GROUP_NODE) return json_string("node");
        return json_integer(*(const int *)f);
    case T_LONG: return json_integer(*(const long *)f);
    case T_U64: {
        unsigned long long u = *(const unsigned long long *)f;
        if (u <= (unsigned long long)LLONG_MAX) return json_integer((json_int_t)u);
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", u);
        return json_string(buf);   /* read back by the strict string parser */
    }
    case T_BOOL: return json_boolean(*(const int *)f);
    case T_DOUBLE: return json_real(*(const double *)f);
    case T_PAIR:
        return json_pack("[ff]", ((const double *)f)[0], ((const double *)f)[1]);
    case T_STRING:
    case T_ENUM: return json_string((const char *)f);
    default: return NULL;
    }
}

char *zt_config_to_json(const zt_config *cfg) {
    if (!cfg) return NULL;
    json_t *root = json_object();
    if (!root) return NULL;
    for (int i = 0; i < NKEYS; i++) {
        if (zt_cfg_keys[i].type == T_PSEUDO) continue;
        /* walk/create the parent objects */
        json_t *parent = root;
        const char *p = zt_cfg_keys[i].key;
        const char *dot;
        int ok = 1;
        while (ok && (dot = strchr(p, '.')) != NULL) {
            char comp[128];
            size_t n = (size_t)(dot - p);
            if (n >= sizeof comp) { ok = 0; break; }
            memcpy(comp, p, n);
            comp[n] = '\0';
            json_t *child = json_object_get(parent, comp);
            if (!child) {
                child = json_object();
                if (!child || json_object_set_new(parent, comp, child) != 0) ok = 0;
            }
            parent = child;
            p = dot + 1;
        }
        json_t *leaf = ok ? leaf_json(cfg, &zt_cfg_keys[i]) : NULL;
        if (!leaf || json_object_set_new(parent, p, leaf) != 0) {
            json_decref(root);
            return NULL;
        }
    }
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                         JSON_REAL_PRECISION(needed_precision(cfg)));
    json_decref(root);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    }
    free(s);
    return out;
}

/* ================================================================ help */

char *zt_config_help_text(void) {
    size_t cap = 8192, j = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        const keydef *k = &zt_cfg_keys[i];
        char flags[256], env[256], req[256], line[1536];
        size_t fj = (size_t)snprintf(flags, sizeof flags, "--%s", k->key);
        if (k->flags && fj < sizeof flags) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", k->flags);
            for (char *save = NULL, *t = strtok_r(buf, " ", &save); t;
                 t = strtok_r(NULL, " ", &save)) {
                if (strcmp(t, k->key) == 0) continue;
                int w = snprintf(flags + fj, sizeof flags - fj, ", --%s", t);
                if (w < 0 || (size_t)w >= sizeof flags - fj) break;
                fj += (size_t)w;
            }
        }
        zt_cfg_env_generic(k->key, env, sizeof env);
        if (k->env) {
            size_t el = strlen(env);
            snprintf(env + el, sizeof env - el, ", %s", k->env);
        }
        zt_cfg_requirement(k, req, sizeof req);
        int w = snprintf(line, sizeof line, "  %s\n      %s; env %s; %s; default %s\n",
                         flags, k->help, env, req + strlen("must be "),
                         !k->def ? "(sets other keys)" : *k->def ? k->def : "\"\"");
        if (w < 0) continue;
        if (j + (size_t)w + 1 > cap) {
            size_t ncap = (j + (size_t)w + 1) * 2;
            char *nb = realloc(out, ncap);
            if (!nb) { free(out); return NULL; }
            out = nb;
            cap = ncap;
        }
        memcpy(out + j, line, (size_t)w + 1);
        j += (size_t)w;
    }
    return out;
}
