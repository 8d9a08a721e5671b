/* values.c -- the chat-template engine's memory and values (jinja_int.h): the arena, errors and
 * budgets; constructors and dicts; UTF-8 and Python's white space; marked strings and the buffers
 * strings are built in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja_int.h"

/* ---------------------------------------------------------------- arena, errors, budgets */

void zj_jfail(jctx *c, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->line > 0) zt_fail(c->st, code, "chat template line %d: %s", c->line, msg);
    else zt_fail(c->st, code, "%s", msg);   /* the messages, before the template runs */
    longjmp(c->jb, 1);
}

void *zj_aalloc(jctx *c, size_t n) {
    if (n > ZT_JINJA_MAX_MEMORY)
        zj_jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
    n = (n + 15) & ~(size_t)15;
    ablock *b = c->ar->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (c->mem + cap + sizeof(ablock) > ZT_JINJA_MAX_MEMORY)
            zj_jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
        b = malloc(sizeof(ablock) + cap);
        if (!b) { zt_fail(c->st, ZT_ENOMEM, "out of memory rendering a chat template"); longjmp(c->jb, 1); }
        c->mem += sizeof(ablock) + cap;
        b->next = c->ar->head;
        b->used = 0;
        b->cap = cap;
        c->ar->head = b;
    }
    unsigned char *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void zj_arena_free(arena *a) {
    for (ablock *b = a->head; b;) {
        ablock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

char *zj_adup(jctx *c, const char *s, size_t n) {
    char *p = zj_aalloc(c, n + 1);
    memcpy(p, s, n);
    return p;
}
const char *zj_afmt(jctx *c, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return zj_adup(c, buf, strlen(buf));
}

/* n evaluation steps: an expression, a statement, a loop iteration, an item
 * or 256 bytes of text an operation walks */
void zj_tick(jctx *c, long long n) {
    c->steps += n;
    if (c->steps > ZT_JINJA_MAX_STEPS)
        zj_jfail(c, ZT_EDATA, "the template's evaluation passed the limit of %lld steps " BUDGET, ZT_JINJA_MAX_STEPS);
}
void zj_scan(jctx *c, size_t bytes) { zj_tick(c, 1 + (long long)(bytes >> 8)); }

/* ---------------------------------------------------------------- values */

const char *zj_tname(int t) {
    static const char *const n[] = {"undefined", "none", "boolean", "integer", "float", "string", "list",
                                    "dict", "namespace", "function", "range", "loop", "method", "macro"};
    return n[t];
}
/* Python's type name of a value (jinja2's messages) */
const char *zj_pyname(jv v) {
    static const char *const n[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                    "dict", "Namespace", "function", "range", "LoopContext", "builtin_function_or_method", "Macro"};
    if (v.t == V_LIST) {
        switch (v.l->kind) {
        case K_TUPLE: return "tuple";
        case K_GEN: return v.l->what;
        case K_KEYS: return "dict_keys";
        case K_VALUES: return "dict_values";
        case K_ITEMS: return "dict_items";
        default: return "list";
        }
    }
    return n[v.t];
}

jstr *zj_mkstr(jctx *c, const char *p, size_t n) {
    jstr *s = zj_aalloc(c, sizeof *s);
    s->p = zj_adup(c, p, n);
    s->n = n;
    return s;
}

jlist *zj_mklist(jctx *c, int cap) {
    jlist *l = zj_aalloc(c, sizeof *l);
    l->cap = cap > 4 ? cap : 4;
    l->v = zj_aalloc(c, (size_t)l->cap * sizeof(jv));
    return l;
}
void zj_lpush(jctx *c, jlist *l, jv v) {
    if (l->n == l->cap) {
        jv *nv = zj_aalloc(c, (size_t)l->cap * 2 * sizeof(jv));
        memcpy(nv, l->v, (size_t)l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}
jv zj_pair(jctx *c, jv a, jv b) {
    jlist *p = zj_mklist(c, 2);
    zj_lpush(c, p, a);
    zj_lpush(c, p, b);
    return vlistk(p, K_TUPLE);
}

/* dicts keep insertion order; past 8 keys a hash index (open addressing) */
static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) { h ^= (unsigned char)p[i]; h *= 1099511628211ULL; }
    return h;
}
jdict *zj_mkdict(jctx *c) {
    jdict *d = zj_aalloc(c, sizeof *d);
    d->cap = 8;
    d->k = zj_aalloc(c, 8 * sizeof(jstr *));
    d->v = zj_aalloc(c, 8 * sizeof(jv));
    return d;
}
static void dindex(jctx *c, jdict *d) {
    d->hcap = 16;
    while (d->hcap < d->cap * 2) d->hcap *= 2;
    d->hx = zj_aalloc(c, (size_t)d->hcap * sizeof(int));
    for (int i = 0; i < d->hcap; ++i) d->hx[i] = -1;
    for (int i = 0; i < d->n; ++i) {
        size_t h = (size_t)hash_bytes(d->k[i]->p, d->k[i]->n) & (size_t)(d->hcap - 1);
        while (d->hx[h] >= 0) h = (h + 1) & (size_t)(d->hcap - 1);
        d->hx[h] = i;
    }
}
int zj_dfind(const jdict *d, const char *k, size_t n) {
    if (d->hx) {
        size_t h = (size_t)hash_bytes(k, n) & (size_t)(d->hcap - 1);
        for (; d->hx[h] >= 0; h = (h + 1) & (size_t)(d->hcap - 1)) {
            const jstr *s = d->k[d->hx[h]];
            if (s->n == n && memcmp(s->p, k, n) == 0) return d->hx[h];
        }
        return -1;
    }
    for (int i = 0; i < d->n; ++i)
        if (d->k[i]->n == n && memcmp(d->k[i]->p, k, n) == 0) return i;
    return -1;
}
void zj_dset(jctx *c, jdict *d, jstr *k, jv v) {
    int i = zj_dfind(d, k->p, k->n);
    if (i >= 0) { d->v[i] = v; return; }
    if (d->n == d->cap) {
        jstr **nk = zj_aalloc(c, (size_t)d->cap * 2 * sizeof(jstr *));
        jv *nv = zj_aalloc(c, (size_t)d->cap * 2 * sizeof(jv));
        memcpy(nk, d->k, (size_t)d->n * sizeof(jstr *));
        memcpy(nv, d->v, (size_t)d->n * sizeof(jv));
        d->k = nk;
        d->v = nv;
        d->cap *= 2;
        if (d->hx) dindex(c, d);
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    if (d->hx) {
        size_t h = (size_t)hash_bytes(k->p, k->n) & (size_t)(d->hcap - 1);
        while (d->hx[h] >= 0) h = (h + 1) & (size_t)(d->hcap - 1);
        d->hx[h] = d->n - 1;
    } else if (d->n > 8) {
        dindex(c, d);
    }
}

int zj_in_names(const char *const *names, const char *s) {
    for (int i = 0; names[i]; ++i)
        if (!strcmp(names[i], s)) return 1;
    return 0;
}

/* ---------------------------------------------------------------- UTF-8 and Python whitespace */

int zj_py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

uint32_t zj_u8at(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[0];
    int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (k <= 0 || (size_t)k >= n) { *len = 1; return k == 0 ? c : 0xfffd; }
    uint32_t v = c & (0x3f >> k);
    for (int i = 1; i <= k; ++i) {
        if ((u[i] & 0xc0) != 0x80) { *len = 1; return 0xfffd; }
        v = (v << 6) | (u[i] & 0x3f);
    }
    *len = (size_t)k + 1;
    return v;
}

/* bytes of a valid UTF-8 sequence at s[0, n) (Unicode's well-formed
 * sequences: no overlong forms, surrogates or code points past U+10FFFF), 0 when invalid */
size_t zj_u8valid(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) { k = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { k = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; ++i)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return k;
}

/* code points of s (cached).  The engine's strings are valid UTF-8 (the
 * template is checked, JSON and the escapes are): a code point is a byte
 * that is not a continuation byte. */
void zj_u8cache(jstr *s) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; ++i) k += ((unsigned char)s->p[i] & 0xc0) != 0x80;
    s->ncp1 = k + 1;
}
size_t zj_u8count(jctx *c, jstr *s) {
    if (!s->ncp1) {
        zj_scan(c, s->n);
        zj_u8cache(s);
    }
    return s->ncp1 - 1;
}
/* byte offset of code point i of s (0 <= i <= count), walking from the nearer end */
size_t zj_u8off(jctx *c, jstr *s, size_t i) {
    size_t n = zj_u8count(c, s);
    if (n == s->n) return i;   /* ASCII */
    if (i >= n) return s->n;
    if (i <= n / 2) {
        size_t off = 0, k = 0;
        for (;; ++off)
            if (((unsigned char)s->p[off] & 0xc0) != 0x80 && k++ == i) break;
        zj_scan(c, off);
        return off;
    }
    size_t off = s->n, k = n;   /* code points from the end */
    while (k > i) {
        --off;
        if (((unsigned char)s->p[off] & 0xc0) != 0x80) --k;
    }
    zj_scan(c, s->n - off);
    return off;
}

/* ---------------------------------------------------------------- marked strings */

static uint32_t mark_of(const jstr *s, size_t i) { return s->mk ? s->mk[i] : 0; }

/* s[b, e) keeping marks; an empty result keeps the message of its position */
jstr *zj_substr(jctx *c, const jstr *s, size_t b, size_t e) {
    jstr *r = zj_aalloc(c, sizeof *r);
    r->p = s->p + b;
    r->n = e - b;
    r->markup = s->markup;
    if (s->mk || s->tail) {
        if (e > b) {
            r->mk = s->mk ? s->mk + b : NULL;
            r->tail = e == s->n ? s->tail : 0;
        } else {
            uint32_t m = b < s->n ? mark_of(s, b) : b > 0 ? mark_of(s, b - 1) : s->tail;
            if (!m && b == s->n) m = s->tail;
            r->tail = (m & 0xffff) ? (m & 0xffff) : (m >> 16);
        }
    }
    return r;
}

static void sb_over(jctx *c, const sbuf *b) {
    if (b->out) zj_jfail(c, ZT_EDATA, "the template's output passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
    zj_jfail(c, ZT_EDATA, "a string passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
}
void zj_sb_reserve(jctx *c, sbuf *b, size_t add) {
    if (add > ZT_JINJA_MAX_OUTPUT - b->n) sb_over(c, b);
    if (b->n + add <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + add) cap *= 2;
    if (cap > ZT_JINJA_MAX_OUTPUT) cap = ZT_JINJA_MAX_OUTPUT;
    char *np = zj_aalloc(c, cap + 1);
    if (b->n) memcpy(np, b->p, b->n);
    if (b->mk) {
        uint32_t *nm = zj_aalloc(c, cap * sizeof(uint32_t));
        memcpy(nm, b->mk, b->n * sizeof(uint32_t));
        b->mk = nm;
    }
    b->p = np;
    b->cap = cap;
}
void zj_sb_put(jctx *c, sbuf *b, const jstr *s) {
    if (s->n == 0) {
        if (s->tail) { b->tail = s->tail; b->marked = 1; }
        return;
    }
    zj_sb_reserve(c, b, s->n);
    memcpy(b->p + b->n, s->p, s->n);
    if ((s->mk || b->tail) && !b->mk) b->mk = zj_aalloc(c, b->cap * sizeof(uint32_t));   /* marks from here on */
    if (s->mk) { memcpy(b->mk + b->n, s->mk, s->n * sizeof(uint32_t)); b->marked = 1; }
    else if (b->mk) memset(b->mk + b->n, 0, s->n * sizeof(uint32_t));
    if (b->tail && !(b->mk[b->n] >> 16)) { b->mk[b->n] |= b->tail << 16; }
    b->tail = 0;
    b->n += s->n;
    if (s->tail) { b->tail = s->tail; b->marked = 1; }
}
void zj_sb_raw(jctx *c, sbuf *b, const char *p, size_t n) {
    jstr t = {p, n, NULL, 0, 0, 0};
    zj_sb_put(c, b, &t);
}
void zj_sb_cstr(jctx *c, sbuf *b, const char *p) { zj_sb_raw(c, b, p, strlen(p)); }
jstr *zj_sb_str(jctx *c, sbuf *b) {
    jstr *r = zj_aalloc(c, sizeof *r);
    r->p = b->p ? b->p : "";
    r->n = b->n;
    r->mk = b->marked && b->n ? b->mk : NULL;
    r->tail = b->tail;
    return r;
}

