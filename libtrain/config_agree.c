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
#include "config.h"
#include "runtime.h"

/* Keys that may differ per rank: they change nothing the ranks compute
 * together. */
static const char *const per_rank_keys[] = {"ztrain.threads", "ztrain.metrics",
                                            "ztrain.memory_report"};

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

/* Iterate the counting lines of json: *pos advances; 0 at the end. */
typedef struct jiter { const char *p; char stack[16][64]; int depth; } jiter;
static int next_line(jiter *it, jline *l) {
    while (*it->p) {
        const char *e = strchr(it->p, '\n');
        size_t n = e ? (size_t)(e - it->p) : strlen(it->p);
        line_parse(it->p, n, it->stack, &it->depth, l);
        it->p += n + (e ? 1 : 0);
        if (l->counts) return 1;
    }
    return 0;
}

static uint64_t json_hash(const char *json) {
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a over key=value lines */
    jiter it = {json, {{0}}, 0};
    jline l;
    while (next_line(&it, &l)) {
        for (const char *c = l.key; *c; ++c) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        h = (h ^ '=') * 1099511628211ULL;
        for (const char *c = l.value; *c; ++c) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        h = (h ^ '\n') * 1099511628211ULL;
    }
    return h;
}

/* The first key whose value differs between mine and ref (rank 0's):
 * "key = mine on rank R, ref on rank 0". */
static void first_difference(const char *mine, const char *ref, int rank, char *out, size_t n) {
    jiter a = {mine, {{0}}, 0}, b = {ref, {{0}}, 0};
    jline x, y;
    for (;;) {
        int ha = next_line(&a, &x), hb = next_line(&b, &y);
        if (!ha && !hb) break;
        if (!ha) { snprintf(out, n, "%s = %s on rank 0, missing on rank %d", y.key, y.value, rank); return; }
        if (!hb) { snprintf(out, n, "%s = %s on rank %d, missing on rank 0", x.key, x.value, rank); return; }
        if (strcmp(x.key, y.key) || strcmp(x.value, y.value)) {
            if (strcmp(x.key, y.key))
                snprintf(out, n, "%s = %s on rank %d, %s = %s on rank 0", x.key, x.value, rank,
                         y.key, y.value);
            else
                snprintf(out, n, "%s = %s on rank %d, %s on rank 0", x.key, x.value, rank, y.value);
            return;
        }
    }
    snprintf(out, n, "(no key differs: the hashes collide)");
}

/* The lowest rank with flag set (-1: none), through one max all-reduce. */
static int lowest(zt_group *g, int flag, zt_status *st, int *low) {
    int64_t v = flag ? (int64_t)(g->size - g->rank) : 0;
    ZT_TRY(g->ops->allreduce_max(g, &v, 1, ZT_I64, st));
    *low = v ? g->size - (int)v : -1;
    return ZT_OK;
}

/* Rank root's status to every rank of g. */
static int bcast_status(zt_group *g, int root, zt_status *mine, zt_status *st) {
    struct { int64_t code; char msg[sizeof mine->msg]; } b;
    memset(&b, 0, sizeof b);
    if (g->rank == root) {
        b.code = mine->code;
        snprintf(b.msg, sizeof b.msg, "%s", mine->msg);
    }
    ZT_TRY(g->ops->bcast(g, &b, sizeof b, ZT_U8, root, st));
    if (root > 0) return zt_fail(st, (int)b.code, "rank %d: %s", root, b.msg);
    return zt_fail(st, (int)b.code, "%s", b.msg);
}

static int agree(zt_group *g, const zt_config *cfg, int load_rc, zt_status *st) {
    zt_status mine;
    zt_status_clear(&mine);
    if (load_rc != ZT_OK) {
        mine = *st;
        if (mine.code == ZT_OK) mine.code = load_rc;
    }
    char *json = load_rc == ZT_OK ? zt_config_to_json(cfg) : NULL;
    if (load_rc == ZT_OK && !json) zt_fail(&mine, ZT_ENOMEM, "out of memory (configuration JSON)");
    /* 1. did every rank read its configuration? */
    int low, rc;
    if ((rc = lowest(g, mine.code != ZT_OK, st, &low)) != ZT_OK || low >= 0) {
        if (rc == ZT_OK) rc = bcast_status(g, low, &mine, st);
        free(json);
        return rc;
    }
    /* 2. the same one? (min == max of the hash: max of h and of ~h) */
    uint64_t h = json_hash(json);
    int64_t hv[4] = {(int64_t)(h >> 32), (int64_t)(h & 0xffffffffu), (int64_t)(~h >> 32),
                     (int64_t)(~h & 0xffffffffu)};
    if ((rc = g->ops->allreduce_max(g, hv, 4, ZT_I64, st)) != ZT_OK) { free(json); return rc; }
    uint64_t hmax = (uint64_t)hv[0] << 32 | (uint64_t)hv[1];
    uint64_t nmax = (uint64_t)hv[2] << 32 | (uint64_t)hv[3];
    if (hmax == ~nmax) { free(json); return ZT_OK; }
    /* 3. they differ: rank 0's JSON to every rank, the lowest differing
     * rank names the first key that differs */
    int64_t len = g->rank == 0 ? (int64_t)strlen(json) : 0;
    char *ref = NULL;
    if ((rc = g->ops->bcast(g, &len, 1, ZT_I64, 0, st)) == ZT_OK) {
        ref = g->rank == 0 ? json : calloc(1, (size_t)len + 1);
        if (!ref) rc = zt_fail(st, ZT_ENOMEM, "out of memory (configuration JSON)");
    }
    /* (an allocation failure here cannot be agreed cheaply: it is a comm
     * error on that rank; the others time out) */
    if (rc == ZT_OK) rc = g->ops->bcast(g, ref, (size_t)len, ZT_U8, 0, st);
    int differs = rc == ZT_OK && json_hash(ref) != h;
    if (rc == ZT_OK) rc = lowest(g, differs, st, &low);
    if (rc == ZT_OK) {
        char d[700] = "";
        if (g->rank == low) first_difference(json, ref, low, d, sizeof d);
        zt_fail(&mine, ZT_EINVAL, "the ranks read different configurations: %s (every rank "
                "must read the same configuration file, ZTRAIN_* environment, flags and "
                "--init-from config.json)", d);
        rc = low >= 0 ? bcast_status(g, low, &mine, st)
                      : zt_fail(st, ZT_EINTERNAL, "configuration hashes differ but no rank differs "
                                "from rank 0 (a bug: please report it)");
        /* the message already names the rank */
        if (low > 0 && !strncmp(st->msg, "rank ", 5)) {
            char *colon = strstr(st->msg, ": ");
            if (colon) memmove(st->msg, colon + 2, strlen(colon + 2) + 1);
        }
    }
    if (ref != json) free(ref);
    free(json);
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
    if (zt_group_mpi(rt->world_comm, "world", timeout, &g, &gst) != ZT_OK) {
        *st = gst;
        return gst.code;
    }
    zt_group_where(g, "start-up: agreeing on the configuration");
    int rc = agree(g, cfg, load_rc, st);
    zt_group_free(g);
    return rc;
}
