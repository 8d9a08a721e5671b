/*
 * config_agree.c -- every rank must have read the same configuration.
 *
 * Each rank reads its configuration itself (file, ZTRAIN_* environment,
 * flags, the config.json of --init-from).  A file that differs per rank, an
 * environment variable set per rank, or a file that one rank cannot read
 * would otherwise surface later as a hang in a collective or as a bogus
 * internal error.  zt_config_agree compares them before they are used: a
 * hash of each rank's configuration JSON (zt_config_to_json, less the keys
 * that may differ per rank) and its load status go through one all-reduce
 * over the world; on a failure every rank gets the lowest failing rank's
 * error, on a mismatch the first differing key and both values.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "agree.h"
#include "config.h"
#include "mesh.h"
#include "runtime.h"

/* Keys that may differ per rank: they change nothing the ranks compute
 * together. */
static const char *const per_rank_keys[] = {"ztrain.threads", "ztrain.metrics",
                                            "ztrain.tensorboard.dir", "ztrain.memory_report"};

/* One line of zt_config_to_json's output (JSON_INDENT: one key per line):
 * its full key ("optimizer.params.lr"), its value text, and whether it
 * counts.  stack/depth: the enclosing objects and arrays. */
typedef struct jline {
    char key[256], value[256];
    int counts;
} jline;

static void line_parse(const char *s, size_t n, char stack[][64], int *depth, jline *out) {
    while (n && (*s == ' ' || *s == '\t')) { ++s; --n; }
    while (n && (s[n - 1] == ',' || s[n - 1] == ' ' || s[n - 1] == '\r')) --n;
    out->key[0] = out->value[0] = '\0';
    out->counts = 1;
    char name[64] = "";
    const char *v = s;
    size_t vn = n;
    if (n && *s == '"') {   /* "name": value */
        const char *q = memchr(s + 1, '"', n - 1);
        if (q && (size_t)(q - s) + 2 < n && q[1] == ':') {
            size_t kn = (size_t)(q - s - 1);
            snprintf(name, sizeof name, "%.*s", (int)(kn < 63 ? kn : 63), s + 1);
            v = q + 2;
            vn = n - (size_t)(v - s);
            while (vn && *v == ' ') { ++v; --vn; }
        }
    }
    size_t used = 0;
    for (int i = 0; i < *depth && used < sizeof out->key; ++i)   /* (the root has no name) */
        if (stack[i][0])
            used += (size_t)snprintf(out->key + used, sizeof out->key - used, "%s%s",
                                     used ? "." : "", stack[i]);
    if (name[0] && used < sizeof out->key)
        snprintf(out->key + used, sizeof out->key - used, "%s%s", used ? "." : "", name);
    snprintf(out->value, sizeof out->value, "%.*s", (int)(vn < 255 ? vn : 255), v);
    if (vn && (v[vn - 1] == '{' || v[vn - 1] == '[')) {   /* opens an object or array */
        if (*depth < 16) snprintf(stack[(*depth)++], 64, "%s", name);
        out->counts = 0;
    } else if (vn && (*v == '}' || *v == ']')) {
        if (*depth > 0) --*depth;
        out->counts = 0;
    }
    for (size_t i = 0; i < sizeof per_rank_keys / sizeof *per_rank_keys; ++i)
        if (!strcmp(out->key, per_rank_keys[i])) out->counts = 0;
}

/* zt_config_to_json's output as "key = value" lines, less the per-rank
 * keys (malloc'ed; NULL when out of memory). */
static char *json_lines(const char *json) {
    size_t cap = strlen(json) * 2 + 64, used = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    char stack[16][64];
    int depth = 0;
    jline l;
    for (const char *p = json; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        line_parse(p, n, stack, &depth, &l);
        p += n + (e ? 1 : 0);
        if (!l.counts) continue;
        size_t need = strlen(l.key) + strlen(l.value) + 5;
        if (used + need >= cap) {
            char *b = realloc(out, cap = 2 * cap + need);
            if (!b) { free(out); return NULL; }
            out = b;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s = %s\n", l.key, l.value);
    }
    return out;
}

static uint64_t text_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The next line of *p: its key (before " = ") and value; 0 at the end. */
static int next_kv(const char **p, char *key, size_t kn, char *val, size_t vn) {
    if (!**p) return 0;
    const char *e = strchr(*p, '\n');
    size_t n = e ? (size_t)(e - *p) : strlen(*p);
    const char *eq = memchr(*p, '=', n);
    size_t k = eq ? (size_t)(eq - *p) : n;
    while (k && (*p)[k - 1] == ' ') --k;
    snprintf(key, kn, "%.*s", (int)k, *p);
    const char *v = eq ? eq + 1 : *p + n;
    while (v < *p + n && *v == ' ') ++v;
    snprintf(val, vn, "%.*s", (int)(*p + n - v), v);
    *p += n + (e ? 1 : 0);
    return 1;
}

/* The first line that differs between mine (rank `rank`) and ref (rank 0). */
static void first_difference(const char *mine, const char *ref, int rank, char *out, size_t n) {
    char k1[256], v1[256], k0[256], v0[256];
    for (;;) {
        int h1 = next_kv(&mine, k1, sizeof k1, v1, sizeof v1);
        int h0 = next_kv(&ref, k0, sizeof k0, v0, sizeof v0);
        if (!h1 && !h0) break;
        if (!h1) { snprintf(out, n, "%s = %s on rank 0, missing on rank %d", k0, v0, rank); return; }
        if (!h0) { snprintf(out, n, "%s = %s on rank %d, missing on rank 0", k1, v1, rank); return; }
        if (strcmp(k1, k0)) {
            snprintf(out, n, "%s = %s on rank %d, %s = %s on rank 0", k1, v1, rank, k0, v0);
            return;
        }
        if (strcmp(v1, v0)) {
            snprintf(out, n, "%s = %s on rank %d, %s on rank 0", k1, v1, rank, v0);
            return;
        }
    }
    snprintf(out, n, "(no line differs: the hashes collide)");
}

/* The lowest rank with flag set (-1: none), through one max all-reduce. */
static int lowest(zt_group *g, int flag, zt_status *st, int *low) {
    int64_t v = flag ? (int64_t)(g->size - g->rank) : 0;
    ZT_TRY(g->ops->allreduce_max(g, &v, 1, ZT_I64, st));
    *low = v ? g->size - (int)v : -1;
    return ZT_OK;
}

/* Rank root's status to every rank of g (prefixed "rank R: " when
 * prefix and root > 0). */
static int bcast_status(zt_group *g, int root, int prefix, zt_status *mine, zt_status *st) {
    struct { int64_t code; char msg[sizeof mine->msg]; } b;
    memset(&b, 0, sizeof b);
    if (g->rank == root) {
        b.code = mine->code;
        snprintf(b.msg, sizeof b.msg, "%s", mine->msg);
    }
    ZT_TRY(g->ops->bcast(g, &b, sizeof b, ZT_U8, root, st));
    if (prefix && root > 0) return zt_fail(st, (int)b.code, "rank %d: %s", root, b.msg);
    return zt_fail(st, (int)b.code, "%s", b.msg);
}

int zt_agree_text(zt_group *g, const char *what, const char *hint, const char *text,
                  int load_rc, zt_status *st) {
    if (!g || g->size < 2) return load_rc;
    zt_status mine;
    zt_status_clear(&mine);
    if (load_rc != ZT_OK) {
        mine = *st;
        if (mine.code == ZT_OK) mine.code = load_rc;
    }
    /* 1. did every rank read it? */
    int low, rc;
    if ((rc = lowest(g, mine.code != ZT_OK, st, &low)) != ZT_OK) return rc;
    if (low >= 0) return bcast_status(g, low, 1, &mine, st);
    /* 2. the same? (min == max of the hash: the max of h and of ~h) */
    uint64_t h = text_hash(text);
    int64_t hv[4] = {(int64_t)(h >> 32), (int64_t)(h & 0xffffffffu), (int64_t)(~h >> 32),
                     (int64_t)(~h & 0xffffffffu)};
    ZT_TRY(g->ops->allreduce_max(g, hv, 4, ZT_I64, st));
    uint64_t hmax = (uint64_t)hv[0] << 32 | (uint64_t)hv[1];
    uint64_t nmax = (uint64_t)hv[2] << 32 | (uint64_t)hv[3];
    if (hmax == ~nmax) return ZT_OK;
    /* 3. they differ: rank 0's text to every rank; the lowest rank that
     * differs names its first differing line */
    int64_t len = g->rank == 0 ? (int64_t)strlen(text) : 0;
    ZT_TRY(g->ops->bcast(g, &len, 1, ZT_I64, 0, st));
    char *ref = g->rank == 0 ? (char *)text : calloc(1, (size_t)len + 1);
    /* (a rank that cannot hold it compares nothing and differs) */
    char none = 0;
    rc = g->ops->bcast(g, ref ? ref : &none, ref ? (size_t)len : 0, ZT_U8, 0, st);
    int differs = !ref || text_hash(ref) != h;
    if (rc == ZT_OK) rc = lowest(g, differs, st, &low);
    if (rc == ZT_OK) {
        char d[800] = "";
        if (g->rank == low) {
            if (ref) first_difference(text, ref, low, d, sizeof d);
            else snprintf(d, sizeof d, "rank %d: out of memory comparing them", low);
        }
        zt_fail(&mine, ZT_EINVAL, "%s: %s%s", what, d, hint ? hint : "");
        rc = low >= 0 ? bcast_status(g, low, 0, &mine, st)
                      : zt_fail(st, ZT_EINTERNAL, "%s: the hashes differ but no rank differs from "
                                "rank 0 (a bug: please report it)", what);
    }
    if (ref != text) free(ref);
    return rc;
}

int zt_config_agree(const zt_config *cfg, int load_rc, zt_status *st) {
    const zt_runtime *rt = zt_rt();
    if (!rt->initialized || rt->world < 2) return load_rc;
    /* the timeout: the configuration's when it was read, else the default */
    double timeout = cfg && load_rc == ZT_OK ? cfg->comm_timeout_s : 0;
    if (timeout <= 0) {
        zt_config *d = zt_config_new();
        timeout = d ? d->comm_timeout_s : 300;
        zt_config_free(d);
    }
    zt_group *g;
    zt_status gst;
    if (zt_mesh_world_group(timeout, &g, &gst) != ZT_OK) {
        *st = gst;
        return gst.code;
    }
    zt_group_where(g, "start-up: agreeing on the configuration");
    char *lines = NULL;
    if (load_rc == ZT_OK) {
        char *json = zt_config_to_json(cfg);
        lines = json ? json_lines(json) : NULL;
        free(json);
        if (!lines) load_rc = zt_fail(st, ZT_ENOMEM, "out of memory (configuration JSON)");
    }
    int rc = zt_agree_text(g, "the ranks read different configurations",
                           " (every rank must read the same configuration file, ZTRAIN_* "
                           "environment, flags and --init-from config.json)",
                           lines, load_rc, st);
    free(lines);
    zt_group_free(g);
    return rc;
}
