/* chatauto.c -- the tokenizer's own chat template (`--template auto`) and
 * template files: loading as transformers does, the template variables, and
 * rendering through io/jinja/ (jinja.h, docs/sft.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "internal.h"
#include "jinja.h"
#include "json_py.h"

struct zt_chat_auto {
    zt_jinja *j;
    json_t *vars;
    char origin[1200];
};

static void dir_of(const char *path, char *dir, size_t n) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { snprintf(dir, n, "%s", path); return; }
    snprintf(dir, n, "%s", path);
    char *sl = strrchr(dir, '/');
    if (sl) *sl = 0; else snprintf(dir, n, ".");
}

static int read_file(const char *path, char **buf, size_t *len, zt_status *st) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_fail(st, ZT_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, fp);
        n += k;
        if (n < cap) break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!b) return zt_fail(st, ZT_ENOMEM, "out of memory reading %s", path);
    if (bad) { free(b); return zt_fail(st, ZT_EIO, "%s: read error", path); }
    *buf = b;
    *len = n;
    return ZT_OK;
}

/* tokenizer_config.json of dir: NULL (ZT_OK) when absent */
static int load_config(const char *dir, json_t **cfg, zt_status *st) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    *cfg = NULL;
    struct stat sb;
    if (stat(p, &sb) != 0) return ZT_OK;
    json_error_t je;
    *cfg = zt_json_load_file_py(p, JSON_ALLOW_NUL, &je);
    char why[200];
    if (!*cfg)
        return zt_fail(st, ZT_EDATA, "%s: not valid JSON (line %d, column %d: %s)", p, je.line, je.column,
                       zt_json_error_text(je.text, why, sizeof why));
    if (!json_is_object(*cfg)) {
        json_decref(*cfg);
        *cfg = NULL;
        return zt_fail(st, ZT_EDATA, "%s: the top level is not a JSON object", p);
    }
    return ZT_OK;
}

static int make(const char *src, size_t n, const char *origin, json_t *cfg, zt_chat_auto **out, zt_status *st) {
    zt_chat_auto *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(st, ZT_ENOMEM, "out of memory");
    snprintf(a->origin, sizeof a->origin, "%s", origin);
    a->vars = json_object();
    int rc = a->vars ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory");
    static const char *const names[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                                        "cls_token", "mask_token", NULL};
    for (int i = 0; rc == ZT_OK && cfg && names[i]; ++i) {
        json_t *v = json_object_get(cfg, names[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v) && json_object_set(a->vars, names[i], v) != 0)
            rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    if (rc == ZT_OK) {
        rc = zt_jinja_parse(src, n, &a->j, st);
        if (rc != ZT_OK) zt_fail_prefix(st, "%s", origin);
    }
    if (rc != ZT_OK) { zt_chat_auto_free(a); return rc; }
    *out = a;
    return ZT_OK;
}

int zt_chat_auto_load(const char *tokenizer_path, zt_chat_auto **out, zt_status *st) {
    *out = NULL;
    char dir[1024], p[1200];
    dir_of(tokenizer_path, dir, sizeof dir);
    json_t *cfg;
    ZT_TRY(load_config(dir, &cfg, st));
    int rc = ZT_OK;
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    struct stat sb;
    if (stat(p, &sb) == 0) {
        char *src;
        size_t n;
        rc = read_file(p, &src, &n, st);
        if (rc == ZT_OK) { rc = make(src, n, p, cfg, out, st); free(src); }
        json_decref(cfg);
        return rc;
    }
    json_t *t = cfg ? json_object_get(cfg, "chat_template") : NULL;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (json_is_array(t)) {   /* named templates: the default one */
        json_t *def = NULL, *e;
        size_t i;
        json_array_foreach(t, i, e) {
            json_t *nm = json_object_get(e, "name");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default")) def = json_object_get(e, "template");
        }
        if (!json_is_string(def)) {
            json_decref(cfg);
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: chat_template is a list without a \"default\" template", p);
        }
        t = def;
    }
    if (json_is_string(t)) rc = make(json_string_value(t), json_string_length(t), p, cfg, out, st);
    else if (t && !json_is_null(t)) rc = zt_fail(st, ZT_EDATA, "%s: chat_template must be a string or a list", p);
    json_decref(cfg);
    return rc;
}

int zt_chat_auto_file(const char *template_path, const char *tokenizer_path, zt_chat_auto **out, zt_status *st) {
    *out = NULL;
    char dir[1024];
    dir_of(tokenizer_path, dir, sizeof dir);
    json_t *cfg;
    ZT_TRY(load_config(dir, &cfg, st));
    char *src;
    size_t n;
    int rc = read_file(template_path, &src, &n, st);
    if (rc == ZT_OK) { rc = make(src, n, template_path, cfg, out, st); free(src); }
    json_decref(cfg);
    return rc;
}

int zt_chat_auto_set_var(zt_chat_auto *a, const char *name, const char *value, zt_status *st) {
    json_t *v = json_string(value);
    if (!v || json_object_set_new(a->vars, name, v) != 0)
        return zt_fail(st, ZT_EINVAL, "template variable %s: the value must be UTF-8 text", name);
    return ZT_OK;
}

int zt_chat_auto_set_bool(zt_chat_auto *a, const char *name, int value, zt_status *st) {
    if (json_object_set_new(a->vars, name, json_boolean(value)) != 0)
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

const char *zt_chat_auto_origin(const zt_chat_auto *a) { return a->origin; }

void zt_chat_auto_free(zt_chat_auto *a) {
    if (!a) return;
    zt_jinja_free(a->j);
    json_decref(a->vars);
    free(a);
}

static size_t added_at(const void *ctx, const char *s, size_t n) { return zt_tok_added_at(ctx, s, n); }

int zt_chat_auto_render(const zt_chat_auto *a, const zt_tokenizer *t, const json_t *messages, zt_chat_text *out,
                        zt_status *st) {
    return zt_chat_auto_render_tools(a, t, messages, NULL, NULL, out, st);
}

int zt_chat_auto_render_tools(const zt_chat_auto *a, const zt_tokenizer *t, const json_t *messages,
                              const json_t *tools, const json_t *documents, zt_chat_text *out, zt_status *st) {
    json_t *vars = a->vars;
    if (tools || documents) {   /* the template's variables and these two (a shallow copy) */
        vars = json_copy(a->vars);
        if (!vars || (tools && json_object_set(vars, "tools", (json_t *)tools)) ||
            (documents && json_object_set(vars, "documents", (json_t *)documents))) {
            json_decref(vars);
            memset(out, 0, sizeof *out);
            return zt_fail(st, ZT_ENOMEM, "out of memory");
        }
    }
    int rc = zt_jinja_render(a->j, messages, vars, t ? added_at : NULL, t, out, st);
    if (vars != a->vars) json_decref(vars);
    if (rc != ZT_OK) zt_fail_prefix(st, "%s", a->origin);   /* the template's errors name it */
    return rc;
}
