/* jinja.c -- a Jinja subset for chat templates (jinja.h, docs/sft.md).
 *
 * lexer (data / {{ }} / {% %} / {# #} with jinja2's whitespace rules under
 * trim_blocks + lstrip_blocks) -> recursive-descent parser to an AST ->
 * evaluator over values none/bool/int/float/string/list/tuple/dict/
 * namespace/range/generator/loop.  Strings carry per-byte marks (the
 * assistant message a byte came from) so that the trained spans survive
 * concatenation, slicing, strip and split.  Parse and render allocate from
 * an arena freed at once; errors unwind with longjmp to the entry point,
 * which owns the arena.
 *
 * A template is untrusted input: every operation is bounds- and
 * overflow-checked (integers are 64-bit: a result outside is refused, never
 * wrapped), every recursion is bounded (the parse nesting limits, the value
 * depth), and one rendering has budgets of output bytes, memory and
 * evaluation steps (jinja.h ZT_JINJA_MAX_*): past one, one error naming the
 * limit and the line. */
#define _GNU_SOURCE   /* memmem */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "jinja.h"

/* ---------------------------------------------------------------- arena, errors, budgets */

typedef struct ablock { struct ablock *next; size_t used, cap; _Alignas(16) unsigned char data[]; } ablock;
typedef struct arena { ablock *head; } arena;

typedef struct jctx {
    arena *ar;
    zt_status *st;
    jmp_buf jb;
    int line;             /* of the construct being evaluated */
    size_t mem;           /* bytes taken from the system */
    long long steps;      /* evaluation steps (rendering) */
} jctx;

static void jfail(jctx *c, int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
static void jfail(jctx *c, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_fail(c->st, code, "chat template line %d: %s", c->line, msg);
    longjmp(c->jb, 1);
}

#define BUDGET "(ztrain's template budget)"
#define INT64_NOTE "(the template engine's integers are 64-bit)"

static void *aalloc(jctx *c, size_t n) {
    if (n > ZT_JINJA_MAX_MEMORY)
        jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
    n = (n + 15) & ~(size_t)15;
    ablock *b = c->ar->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (c->mem + cap + sizeof(ablock) > ZT_JINJA_MAX_MEMORY)
            jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
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

static void arena_free(arena *a) {
    for (ablock *b = a->head; b;) {
        ablock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

static char *adup(jctx *c, const char *s, size_t n) {
    char *p = aalloc(c, n + 1);
    memcpy(p, s, n);
    return p;
}
static const char *afmt(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *afmt(jctx *c, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return adup(c, buf, strlen(buf));
}

/* n evaluation steps: an expression, a statement, a loop iteration, an item
 * or 256 bytes of text an operation walks */
static void tick(jctx *c, long long n) {
    c->steps += n;
    if (c->steps > ZT_JINJA_MAX_STEPS)
        jfail(c, ZT_EDATA, "the template's evaluation passed the limit of %lld steps " BUDGET, ZT_JINJA_MAX_STEPS);
}
static void scan(jctx *c, size_t bytes) { tick(c, 1 + (long long)(bytes >> 8)); }

/* ---------------------------------------------------------------- values */

enum { V_UNSET = -1, V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC, V_RANGE, V_LOOP, V_METHOD };
enum { F_RAISE, F_STRFTIME, F_NAMESPACE, F_DICT, F_RANGE };
/* kinds of V_LIST: list, tuple, a one-shot iterator (generator, reversed...), dict views */
enum { K_LIST, K_TUPLE, K_GEN, K_KEYS, K_VALUES, K_ITEMS };

/* mark of a byte: low 16 bits the assistant message (index + 1) it came
 * from, high 16 bits a message whose (empty) text sat right before it.
 * markup: a |safe string (jinja2's Markup). ncp1: code points + 1 (0: not
 * counted yet). */
typedef struct jstr { const char *p; size_t n; uint32_t *mk; uint32_t tail; int markup; size_t ncp1; } jstr;
struct jlist;
struct jdict;
struct jrange;
struct jloop;
struct jmeth;
typedef struct jv {
    int t;
    union {
        int b;
        long long i;
        double f;
        jstr *s;
        struct jlist *l;
        struct jdict *d;
        int fn;
        struct jrange *rg;
        struct jloop *lp;
        struct jmeth *m;
        const char *hint;      /* V_UNDEF: why (NULL: a plain undefined value) */
    };
} jv;
/* what: a K_GEN's Python type (for messages); used: consumed (a second use is refused) */
typedef struct jlist { int n, cap; jv *v; int kind, used; const char *what; } jlist;
typedef struct jdict { int n, cap; jstr **k; jv *v; int *hx; int hcap; } jdict;
typedef struct jrange { long long start, stop, step, n; } jrange;
typedef struct jmeth { jv self; const char *name; } jmeth;

static const char *tname(int t) {
    static const char *const n[] = {"undefined", "none", "boolean", "integer", "float", "string", "list",
                                    "dict", "namespace", "function", "range", "loop", "method"};
    return n[t];
}
/* Python's type name of a value (jinja2's messages) */
static const char *pyname(jv v) {
    static const char *const n[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                    "dict", "Namespace", "function", "range", "LoopContext", "builtin_function_or_method"};
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

static jv vundef(void) { jv v = {.t = V_UNDEF}; return v; }
static jv vundefh(const char *hint) { jv v = {.t = V_UNDEF}; v.hint = hint; return v; }
static jv vnone(void) { jv v = {.t = V_NONE}; return v; }
static jv vbool(int b) { jv v = {.t = V_BOOL}; v.b = !!b; return v; }
static jv vint(long long i) { jv v = {.t = V_INT}; v.i = i; return v; }
static jv vfloat(double f) { jv v = {.t = V_FLOAT}; v.f = f; return v; }

static jstr *mkstr(jctx *c, const char *p, size_t n) {
    jstr *s = aalloc(c, sizeof *s);
    s->p = adup(c, p, n);
    s->n = n;
    return s;
}
static jv vstr(jstr *s) { jv v = {.t = V_STR}; v.s = s; return v; }

static jlist *mklist(jctx *c, int cap) {
    jlist *l = aalloc(c, sizeof *l);
    l->cap = cap > 4 ? cap : 4;
    l->v = aalloc(c, (size_t)l->cap * sizeof(jv));
    return l;
}
static void lpush(jctx *c, jlist *l, jv v) {
    if (l->n == l->cap) {
        jv *nv = aalloc(c, (size_t)l->cap * 2 * sizeof(jv));
        memcpy(nv, l->v, (size_t)l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}
static jv vlist(jlist *l) { jv v = {.t = V_LIST}; v.l = l; return v; }
static jv vlistk(jlist *l, int kind) { l->kind = kind; return vlist(l); }
static jv vgen(jlist *l, const char *what) { l->kind = K_GEN; l->what = what; return vlist(l); }
static jv pair(jctx *c, jv a, jv b) {
    jlist *p = mklist(c, 2);
    lpush(c, p, a);
    lpush(c, p, b);
    return vlistk(p, K_TUPLE);
}

/* dicts keep insertion order; past 8 keys a hash index (open addressing) */
static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) { h ^= (unsigned char)p[i]; h *= 1099511628211ULL; }
    return h;
}
static jdict *mkdict(jctx *c) {
    jdict *d = aalloc(c, sizeof *d);
    d->cap = 8;
    d->k = aalloc(c, 8 * sizeof(jstr *));
    d->v = aalloc(c, 8 * sizeof(jv));
    return d;
}
static void dindex(jctx *c, jdict *d) {
    d->hcap = 16;
    while (d->hcap < d->cap * 2) d->hcap *= 2;
    d->hx = aalloc(c, (size_t)d->hcap * sizeof(int));
    for (int i = 0; i < d->hcap; ++i) d->hx[i] = -1;
    for (int i = 0; i < d->n; ++i) {
        size_t h = (size_t)hash_bytes(d->k[i]->p, d->k[i]->n) & (size_t)(d->hcap - 1);
        while (d->hx[h] >= 0) h = (h + 1) & (size_t)(d->hcap - 1);
        d->hx[h] = i;
    }
}
static int dfind(const jdict *d, const char *k, size_t n) {
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
static void dset(jctx *c, jdict *d, jstr *k, jv v) {
    int i = dfind(d, k->p, k->n);
    if (i >= 0) { d->v[i] = v; return; }
    if (d->n == d->cap) {
        jstr **nk = aalloc(c, (size_t)d->cap * 2 * sizeof(jstr *));
        jv *nv = aalloc(c, (size_t)d->cap * 2 * sizeof(jv));
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

/* ---------------------------------------------------------------- UTF-8 and Python whitespace */

static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

static uint32_t u8at(const char *s, size_t n, size_t *len) {
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
static size_t u8valid(const unsigned char *s, size_t n) {
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
static void u8cache(jstr *s) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; ++i) k += ((unsigned char)s->p[i] & 0xc0) != 0x80;
    s->ncp1 = k + 1;
}
static size_t u8count(jctx *c, jstr *s) {
    if (!s->ncp1) {
        scan(c, s->n);
        u8cache(s);
    }
    return s->ncp1 - 1;
}
/* byte offset of code point i of s (0 <= i <= count), walking from the nearer end */
static size_t u8off(jctx *c, jstr *s, size_t i) {
    size_t n = u8count(c, s);
    if (n == s->n) return i;   /* ASCII */
    if (i >= n) return s->n;
    if (i <= n / 2) {
        size_t off = 0, k = 0;
        for (;; ++off)
            if (((unsigned char)s->p[off] & 0xc0) != 0x80 && k++ == i) break;
        scan(c, off);
        return off;
    }
    size_t off = s->n, k = n;   /* code points from the end */
    while (k > i) {
        --off;
        if (((unsigned char)s->p[off] & 0xc0) != 0x80) --k;
    }
    scan(c, s->n - off);
    return off;
}

/* ---------------------------------------------------------------- marked strings */

static uint32_t mark_of(const jstr *s, size_t i) { return s->mk ? s->mk[i] : 0; }

/* s[b, e) keeping marks; an empty result keeps the message of its position */
static jstr *substr(jctx *c, const jstr *s, size_t b, size_t e) {
    jstr *r = aalloc(c, sizeof *r);
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

/* a string being built; out: the rendering itself (its limit's message) */
typedef struct sbuf { char *p; uint32_t *mk; size_t n, cap; uint32_t tail; int marked, out; } sbuf;

static void sb_over(jctx *c, const sbuf *b) {
    if (b->out) jfail(c, ZT_EDATA, "the template's output passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
    jfail(c, ZT_EDATA, "a string passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
}
static void sb_reserve(jctx *c, sbuf *b, size_t add) {
    if (add > ZT_JINJA_MAX_OUTPUT - b->n) sb_over(c, b);
    if (b->n + add <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + add) cap *= 2;
    if (cap > ZT_JINJA_MAX_OUTPUT) cap = ZT_JINJA_MAX_OUTPUT;
    char *np = aalloc(c, cap + 1);
    if (b->n) memcpy(np, b->p, b->n);
    if (b->mk) {
        uint32_t *nm = aalloc(c, cap * sizeof(uint32_t));
        memcpy(nm, b->mk, b->n * sizeof(uint32_t));
        b->mk = nm;
    }
    b->p = np;
    b->cap = cap;
}
static void sb_put(jctx *c, sbuf *b, const jstr *s) {
    if (s->n == 0) {
        if (s->tail) { b->tail = s->tail; b->marked = 1; }
        return;
    }
    sb_reserve(c, b, s->n);
    memcpy(b->p + b->n, s->p, s->n);
    if ((s->mk || b->tail) && !b->mk) b->mk = aalloc(c, b->cap * sizeof(uint32_t));   /* marks from here on */
    if (s->mk) { memcpy(b->mk + b->n, s->mk, s->n * sizeof(uint32_t)); b->marked = 1; }
    else if (b->mk) memset(b->mk + b->n, 0, s->n * sizeof(uint32_t));
    if (b->tail && !(b->mk[b->n] >> 16)) { b->mk[b->n] |= b->tail << 16; }
    b->tail = 0;
    b->n += s->n;
    if (s->tail) { b->tail = s->tail; b->marked = 1; }
}
static void sb_raw(jctx *c, sbuf *b, const char *p, size_t n) {
    jstr t = {p, n, NULL, 0, 0, 0};
    sb_put(c, b, &t);
}
static void sb_cstr(jctx *c, sbuf *b, const char *p) { sb_raw(c, b, p, strlen(p)); }
static jstr *sb_str(jctx *c, sbuf *b) {
    jstr *r = aalloc(c, sizeof *r);
    r->p = b->p ? b->p : "";
    r->n = b->n;
    r->mk = b->marked && b->n ? b->mk : NULL;
    r->tail = b->tail;
    return r;
}

/* ---------------------------------------------------------------- lexer */

enum { T_EOF, T_DATA, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP };

typedef struct tok { int k, line; const char *p; size_t n; long long i; double f; } tok;
/* lpos/lline: the line of a position already seen (line numbers in one pass) */
typedef struct lexer { jctx *c; tok *t; int n, cap; const char *src, *lpos; int lline; } lexer;

static void tpush(lexer *L, int k, int line, const char *p, size_t n) {
    if (L->n == L->cap) {
        if (L->cap > INT_MAX / 2) jfail(L->c, ZT_EDATA, "too many tokens");
        int cap = L->cap ? L->cap * 2 : 256;
        tok *nt = aalloc(L->c, (size_t)cap * sizeof(tok));
        if (L->n) memcpy(nt, L->t, (size_t)L->n * sizeof(tok));
        L->t = nt;
        L->cap = cap;
    }
    tok *t = &L->t[L->n++];
    t->k = k;
    t->line = line;
    t->p = p;
    t->n = n;
}

static int lineof(lexer *L, const char *p) {
    if (p < L->lpos) { L->lpos = L->src; L->lline = 1; }
    for (const char *q = L->lpos; q < p; ++q) L->lline += *q == '\n';
    L->lpos = p;
    return L->lline;
}

/* Python's \s (str.isspace()): bytes of the white space code point at
 * s[0, n), 0 when there is none; ws_back: the one ending at s[n - 1] */
static size_t ws_at(const char *s, size_t n) {
    if (n == 0) return 0;
    size_t len;
    uint32_t c = u8at(s, n, &len);
    return py_space(c) ? len : 0;
}
static size_t ws_back(const char *s, size_t n) {
    size_t k = n;
    while (k > 0 && n - k < 4 && ((unsigned char)s[k - 1] & 0xc0) == 0x80) --k;
    if (k == 0) return 0;
    --k;
    size_t len = ws_at(s + k, n - k);
    return len == n - k ? len : 0;
}

static void put_u8(char *o, size_t *k, uint32_t cp) {
    if (cp < 0x80) o[(*k)++] = (char)cp;
    else if (cp < 0x800) { o[(*k)++] = (char)(0xc0 | (cp >> 6)); o[(*k)++] = (char)(0x80 | (cp & 0x3f)); }
    else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xe0 | (cp >> 12)); o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*k)++] = (char)(0xf0 | (cp >> 18)); o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[(*k)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* string literal body -> bytes (Python unicode-escape, as jinja2's lexer) */
static jstr *unescape(jctx *c, const char *p, size_t n) {
    char *o = aalloc(c, n * 4 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != '\\' || i + 1 == n) { o[k++] = p[i]; continue; }
        char e = p[++i];
        uint32_t cp = 0;
        int hex = 0;
        switch (e) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\n': break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        case 'N': jfail(c, ZT_EUNSUPPORTED, "named escapes (\\N{...}) in a string literal");
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && p[i] >= '0' && p[i] <= '7') { cp = cp * 8 + (uint32_t)(p[i] - '0'); ++i; ++d; }
                --i;
                hex = -1;
            } else if ((unsigned char)e >= 0x80) {
                /* jinja2 turns the character into \xNN / \uNNNN text first */
                jfail(c, ZT_EUNSUPPORTED, "a backslash before a non-ASCII character in a string literal");
            } else {
                o[k++] = '\\';
                o[k++] = e;
            }
        }
        if (hex > 0) {
            for (int d = 0; d < hex; ++d) {
                char h = i + 1 < n ? p[i + 1] : 0;
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                        h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0) jfail(c, ZT_EDATA, "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)v;
                ++i;
            }
        }
        if (hex) {
            if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
                jfail(c, ZT_EUNSUPPORTED, "escape \\%c for code point U+%04X in a string literal", e, cp);
            put_u8(o, &k, cp);
        }
    }
    jstr *s = aalloc(c, sizeof *s);
    s->p = o;
    s->n = k;
    return s;
}

/* (\d+_)*\d+ at s: its length (0: none) */
static size_t digits_(const char *s, size_t left, int (*ok)(char)) {
    size_t k = 0;
    if (!left || !ok(s[0])) return 0;
    for (;;) {
        while (k < left && ok(s[k])) ++k;
        if (k + 1 < left && s[k] == '_' && ok(s[k + 1])) { ++k; continue; }
        return k;
    }
}
static int is_dec(char ch) { return ch >= '0' && ch <= '9'; }
static int is_hex(char ch) { return is_dec(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }
static int is_oct(char ch) { return ch >= '0' && ch <= '7'; }
static int is_bin(char ch) { return ch == '0' || ch == '1'; }

/* a number literal at s as jinja2's lexer reads it (its float rule first,
 * then its integer rule); after_dot: s follows a '.' (no float there) */
static size_t lex_number(lexer *L, const char *s, size_t left, int after_dot, int line) {
    jctx *c = L->c;
    char buf[400];
    size_t m = 0;
    int fl = 0;
    if (!after_dot) {
        size_t k = digits_(s, left, is_dec);
        size_t f = 0, e = 0;
        if (k + 1 < left && s[k] == '.') f = digits_(s + k + 1, left - k - 1, is_dec);
        size_t at = k + (f ? f + 1 : 0);
        if (at < left && (s[at] == 'e' || s[at] == 'E')) {
            size_t sg = at + 1 < left && (s[at + 1] == '+' || s[at + 1] == '-');
            size_t d = digits_(s + at + 1 + sg, left - at - 1 - sg, is_dec);
            if (d) e = 1 + sg + d;
        }
        if (k && (e || f)) { m = at + e; fl = 1; }
    }
    int base = 10;
    if (!fl) {
        if (left >= 3 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B' || s[1] == 'o' || s[1] == 'O' || s[1] == 'x' ||
                                         s[1] == 'X')) {
            int (*ok)(char) = (s[1] | 32) == 'b' ? is_bin : (s[1] | 32) == 'o' ? is_oct : is_hex;
            base = (s[1] | 32) == 'b' ? 2 : (s[1] | 32) == 'o' ? 8 : 16;
            size_t k = 2;   /* (_?[digit])+ */
            for (;;) {
                if (k < left && ok(s[k])) ++k;
                else if (k + 1 < left && s[k] == '_' && ok(s[k + 1])) k += 2;
                else break;
            }
            m = k > 2 ? k : 0;
        }
        if (!m) {
            base = 10;
            if (s[0] == '0') {   /* 0(_?0)* */
                m = 1;
                for (;;) {
                    if (m < left && s[m] == '0') ++m;
                    else if (m + 1 < left && s[m] == '_' && s[m + 1] == '0') m += 2;
                    else break;
                }
            } else {
                m = digits_(s, left, is_dec);
            }
        }
    }
    size_t b = 0;
    for (size_t i = base == 10 ? 0 : 2; i < m; ++i) {
        if (s[i] == '_') continue;
        if (b + 1 >= sizeof buf) jfail(c, ZT_EUNSUPPORTED, "a number literal of more than %zu digits", sizeof buf - 1);
        buf[b++] = s[i];
    }
    buf[b] = 0;
    tpush(L, fl ? T_FLOAT : T_INT, line, s, m);
    if (fl) {
        L->t[L->n - 1].f = strtod(buf, NULL);
    } else {
        errno = 0;
        unsigned long long v = strtoull(buf, NULL, base);
        if (errno || v > (unsigned long long)LLONG_MAX)
            jfail(c, ZT_EUNSUPPORTED, "integer literal %.*s out of range " INT64_NOTE, (int)(m < 100 ? m : 100), s);
        L->t[L->n - 1].i = (long long)v;
    }
    return m;
}

static void lex(lexer *L, const char *src, size_t n) {
    jctx *c = L->c;
    L->src = L->lpos = src;
    L->lline = 1;
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        /* the next tag */
        const char *q = NULL;
        for (const char *x = src + pos; (x = memchr(x, '{', n - (size_t)(x - src))) && x + 1 < src + n; ++x)
            if (x[1] == '{' || x[1] == '%' || x[1] == '#') { q = x; break; }
        size_t tp = q ? (size_t)(q - src) : n;
        size_t te = tp;   /* end of the data */
        char kind = q ? q[1] : 0;
        char ctrl = q && tp + 2 < n ? src[tp + 2] : 0;
        if (q && ctrl == '-') {
            for (size_t w; te > pos && (w = ws_back(src + pos, te - pos));) te -= w;
        } else if (q && ctrl != '+' && kind != '{') {
            size_t lp = te;
            while (lp > pos && src[lp - 1] != '\n') --lp;
            if (lp > pos || line_starting) {
                size_t k = lp;
                for (size_t w; k < te && (w = ws_at(src + k, te - k));) k += w;
                if (k == te) te = lp;
            }
        }
        if (te > pos) tpush(L, T_DATA, lineof(L, src + pos), src + pos, te - pos);
        if (!q) break;
        int line = lineof(L, q);
        c->line = line;
        size_t p = tp + 2 + (ctrl == '-' || ctrl == '+');
        if (kind == '#') {
            const char *e = NULL;
            for (const char *x = src + p; (x = memchr(x, '#', n - (size_t)(x - src))) && x + 1 < src + n; ++x)
                if (x[1] == '}') { e = x; break; }
            if (!e) jfail(c, ZT_EDATA, "missing end of comment tag");
            size_t ep = (size_t)(e - src);
            size_t after = ep + 2;
            if (ep > p && src[ep - 1] == '-') { for (size_t w; after < n && (w = ws_at(src + after, n - after));) after += w; }
            else if (!(ep > p && src[ep - 1] == '+') && after < n && src[after] == '\n') ++after;
            pos = after;
            line_starting = src[pos - 1] == '\n';
            continue;
        }
        tpush(L, kind == '{' ? T_VBEGIN : T_BBEGIN, line, src + tp, 2);
        int bal = 0;
        for (;;) {
            for (size_t w; p < n && (w = ws_at(src + p, n - p));) p += w;
            if (p >= n) jfail(c, ZT_EDATA, "unexpected end of template inside a %s tag", kind == '{' ? "{{ }}" : "{% %}");
            const char *s = src + p;
            size_t left = n - p;
            line = lineof(L, s);
            c->line = line;
            if (bal == 0) {
                size_t m = 0;
                int trim = 0, strip = 0;
                if (kind == '{') {
                    if (left >= 3 && s[0] == '-' && s[1] == '}' && s[2] == '}') { m = 3; strip = 1; }
                    else if (left >= 2 && s[0] == '}' && s[1] == '}') m = 2;
                } else {
                    if (left >= 3 && s[0] == '-' && s[1] == '%' && s[2] == '}') { m = 3; strip = 1; }
                    else if (left >= 3 && s[0] == '+' && s[1] == '%' && s[2] == '}') m = 3;
                    else if (left >= 2 && s[0] == '%' && s[1] == '}') { m = 2; trim = 1; }
                }
                if (m) {
                    tpush(L, kind == '{' ? T_VEND : T_BEND, line, s, m);
                    p += m;
                    if (strip) for (size_t w; p < n && (w = ws_at(src + p, n - p));) p += w;
                    else if (trim && p < n && src[p] == '\n') ++p;
                    break;
                }
            }
            if ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_') {
                size_t k = 1;
                while (k < left && ((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') || s[k] == '_' ||
                                    (s[k] >= '0' && s[k] <= '9'))) ++k;
                if (k < left && (unsigned char)s[k] >= 0x80)
                    jfail(c, ZT_EUNSUPPORTED, "names with non-ASCII characters");
                tpush(L, T_NAME, line, s, k);
                p += k;
            } else if (s[0] >= '0' && s[0] <= '9') {
                p += lex_number(L, s, left, p > 0 && src[p - 1] == '.', line);
            } else if (s[0] == '\'' || s[0] == '"') {
                size_t k = 1;
                while (k < left && s[k] != s[0]) k += s[k] == '\\' ? 2 : 1;
                if (k >= left) jfail(c, ZT_EDATA, "unterminated string literal");
                tpush(L, T_STR, line, s + 1, k - 1);
                p += k + 1;
            } else {
                static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
                size_t m = 0;
                for (int i = 0; i < 6; ++i)
                    if (left >= 2 && s[0] == ops2[i][0] && s[1] == ops2[i][1]) m = 2;
                if (!m) {
                    if ((unsigned char)s[0] >= 0x80) {
                        size_t len;
                        uint32_t cp = u8at(s, left, &len);
                        jfail(c, ZT_EUNSUPPORTED, "the character U+%04X in a tag (names with non-ASCII characters)", cp);
                    }
                    if (!strchr("+-*/%~<>()[]{},.:|=", s[0]) || s[0] == 0) {
                        if ((unsigned char)s[0] < 0x20 || s[0] == 0x7f) jfail(c, ZT_EDATA, "unexpected character 0x%02x", (unsigned char)s[0]);
                        jfail(c, ZT_EDATA, "unexpected character '%c'", s[0]);
                    }
                    m = 1;
                    if (s[0] == '(' || s[0] == '[' || s[0] == '{') ++bal;
                    if (s[0] == ')' || s[0] == ']' || s[0] == '}') --bal;
                    if (bal < 0) jfail(c, ZT_EDATA, "unbalanced '%c'", s[0]);
                }
                tpush(L, T_OP, line, s, m);
                p += m;
            }
        }
        pos = p;
        line_starting = src[pos - 1] == '\n';
    }
    tpush(L, T_EOF, lineof(L, src + n), src + n, 0);
}

/* ---------------------------------------------------------------- AST */

enum {
    /* statements */
    S_DATA, S_OUT, S_IF, S_FOR, S_SET, S_SETATTR, S_BREAK, S_CONTINUE, S_GEN,
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NOT, E_NEG, E_POS, E_AND, E_OR,
    E_COND, E_LIST, E_TUPLE, E_DICT, E_CMP, E_CAT
};

typedef struct node {
    int k, line;
    int h;                         /* height of an expression tree */
    struct node *a, *b, *c, *d;    /* children (meaning per kind) */
    struct node **v;               /* args / elements / operands */
    const char **kw;               /* keyword of each arg (NULL positional) */
    int nv, capv;
    int *ops;                      /* E_CMP: the operator before each of v */
    const char *name, *name2;      /* names (NUL-terminated) */
    int op;                        /* E_BIN operator; E_TEST negated; E_FILTER/E_TEST 1: a name jinja2 lacks */
    jv cst;                        /* E_CONST, S_DATA */
    struct node *next;             /* statement lists; S_IF: elif (the next test of the same if) */
} node;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE,
       OP_IN, OP_NOTIN };
static const char *const opname[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=",
                                     "in", "not in"};

/* jinja2's filters and tests (a name outside these fails when the template is compiled, or when
 * reached inside an if) */
static const char *const jinja_filters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum",
    "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap",
    "xmlattr", NULL};
static const char *const jinja_tests[] = {
    "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto",
    "escaped", "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le",
    "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test",
    "true", "undefined", "upper", NULL};
static int in_names(const char *const *names, const char *s) {
    for (int i = 0; names[i]; ++i)
        if (!strcmp(names[i], s)) return 1;
    return 0;
}

/* nest: expression nesting; blocks, loops: statement nesting; inloop:
 * break/continue allowed; soft: inside an if or an inline if (a filter or
 * test jinja2 lacks fails there only when reached) */
/* a filter or test name jinja2 lacks, outside an if: an error once the expression is complete
 * and not inside an inline if (which jinja2 compiles as a whole in a soft frame) */
typedef struct pending { int line, test; const char *name; } pending;
typedef struct parser {
    jctx *c;
    tok *t;
    int i, nest, blocks, loops, inloop, soft;
    pending *pend;
    int npend, cappend;
} parser;

static void pend_add(parser *P, int line, int test, const char *name) {
    if (P->npend == P->cappend) {
        int cap = P->cappend ? P->cappend * 2 : 8;
        pending *np = aalloc(P->c, (size_t)cap * sizeof *np);
        if (P->npend) memcpy(np, P->pend, (size_t)P->npend * sizeof *np);
        P->pend = np;
        P->cappend = cap;
    }
    P->pend[P->npend++] = (pending){line, test, name};
}
/* a statement's expressions are complete */
static void pend_flush(parser *P) {
    if (!P->npend) return;
    P->c->line = P->pend[0].line;
    jfail(P->c, ZT_EDATA, "no %s named '%s'", P->pend[0].test ? "test" : "filter", P->pend[0].name);
}

static tok *cur(parser *P) { return &P->t[P->i]; }
static int is_op(parser *P, const char *op) {
    tok *t = cur(P);
    return t->k == T_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0;
}
static int is_name(parser *P, const char *nm) {
    tok *t = cur(P);
    return t->k == T_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0;
}
static int is_name_at(parser *P, int i, const char *nm) {
    tok *t = &P->t[P->i + i];
    return t->k == T_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0;
}
static const char *tokdesc(parser *P) {
    tok *t = cur(P);
    static __thread char buf[64];
    if (t->k == T_EOF) return "end of template";
    if (t->k == T_BEND || t->k == T_VEND) return "end of tag";
    snprintf(buf, sizeof buf, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->p);
    return buf;
}
static void expect_op(parser *P, const char *op) {
    P->c->line = cur(P)->line;
    if (!is_op(P, op)) jfail(P->c, ZT_EDATA, "expected '%s', found %s", op, tokdesc(P));
    P->i++;
}
static void enter(parser *P) {
    if (++P->nest > ZT_JINJA_MAX_NEST) {
        P->c->line = cur(P)->line;
        jfail(P->c, ZT_EDATA, "an expression nested deeper than %d levels (parentheses, brackets, calls, signs, "
              "not) " BUDGET, ZT_JINJA_MAX_NEST);
    }
}
static void leave(parser *P) { P->nest--; }

static const char *take_name(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_NAME) jfail(P->c, ZT_EDATA, "expected a name, found %s", tokdesc(P));
    tok *t = &P->t[P->i++];
    return adup(P->c, t->p, t->n);
}
/* an assignment target (set, for): a name that is not a constant */
static const char *take_target(parser *P) {
    const char *nm = take_name(P);
    static const char *const consts[] = {"true", "false", "none", "True", "False", "None", NULL};
    if (in_names(consts, nm)) jfail(P->c, ZT_EDATA, "can't assign to the constant '%s'", nm);
    return nm;
}
static node *mknode(parser *P, int k) {
    node *n = aalloc(P->c, sizeof *n);
    n->k = k;
    n->line = cur(P)->line;
    n->h = 1;
    return n;
}
/* an expression node complete: its height, bounded */
static node *fin(parser *P, node *n) {
    int h = 0;
    node *ch[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; ++i) if (ch[i] && ch[i]->h > h) h = ch[i]->h;
    for (int i = 0; i < n->nv; ++i) if (n->v[i]->h > h) h = n->v[i]->h;
    n->h = h + 1;
    if (n->h > ZT_JINJA_MAX_EXPR) {
        P->c->line = n->line;
        jfail(P->c, ZT_EDATA, "an expression deeper than %d levels (chained operators, filters, attributes) " BUDGET,
              ZT_JINJA_MAX_EXPR);
    }
    return n;
}
static void addarg(parser *P, node *n, node *a, const char *kw) {
    if (n->nv == n->capv) {
        if (n->capv > INT_MAX / 2) jfail(P->c, ZT_EDATA, "too many elements");
        int cap = n->capv ? n->capv * 2 : 4;
        node **v = aalloc(P->c, (size_t)cap * sizeof *v);
        const char **k = aalloc(P->c, (size_t)cap * sizeof *k);
        if (n->nv) { memcpy(v, n->v, (size_t)n->nv * sizeof *v); memcpy(k, n->kw, (size_t)n->nv * sizeof *k); }
        n->v = v;
        n->kw = k;
        n->capv = cap;
    }
    n->v[n->nv] = a;
    n->kw[n->nv] = kw;
    n->nv++;
}

static node *p_expr(parser *P);
static node *p_or(parser *P);

/* an expression of literals only (jinja2's optimizer may fold it); bounded by the parse limits */
static int literal(const node *n) {
    switch (n->k) {
    case E_CONST: return 1;
    case E_LIST: case E_TUPLE: case E_DICT: case E_BIN: case E_NEG: case E_POS: case E_NOT: case E_AND: case E_OR:
    case E_COND: case E_CMP: case E_CAT: case E_FILTER: case E_TEST: case E_ITEM: case E_SLICE: break;
    default: return 0;
    }
    const node *ch[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; ++i) if (ch[i] && !literal(ch[i])) return 0;
    for (int i = 0; i < n->nv; ++i) if (!literal(n->v[i])) return 0;
    return 1;
}
static node *p_unary(parser *P);

static void p_args(parser *P, node *n) {   /* after '(' up to and including ')' */
    int kw_seen = 0;
    while (!is_op(P, ")")) {
        const char *kw = NULL;
        P->c->line = cur(P)->line;
        if (is_op(P, "*") || is_op(P, "**")) jfail(P->c, ZT_EUNSUPPORTED, "calls with *args or **kwargs");
        if (cur(P)->k == T_NAME && P->t[P->i + 1].k == T_OP && P->t[P->i + 1].n == 1 && P->t[P->i + 1].p[0] == '=') {
            kw = take_name(P);
            P->i++;
            kw_seen = 1;
        } else if (kw_seen) {
            jfail(P->c, ZT_EDATA, "invalid syntax for function call expression (a positional argument after a keyword argument)");
        }
        addarg(P, n, p_expr(P), kw);
        if (!is_op(P, ",")) break;
        P->i++;
    }
    expect_op(P, ")");
}

static node *p_primary(parser *P) {
    tok *t = cur(P);
    P->c->line = t->line;
    node *n;
    if (t->k == T_NAME) {
        n = mknode(P, E_CONST);
        if (is_name(P, "true") || is_name(P, "True")) n->cst = vbool(1);
        else if (is_name(P, "false") || is_name(P, "False")) n->cst = vbool(0);
        else if (is_name(P, "none") || is_name(P, "None")) n->cst = vnone();
        else { n->k = E_NAME; n->name = adup(P->c, t->p, t->n); }
        P->i++;
    } else if (t->k == T_STR) {
        n = mknode(P, E_CONST);
        sbuf b = {0};
        while (cur(P)->k == T_STR) {     /* adjacent literals concatenate */
            P->c->line = cur(P)->line;
            sb_put(P->c, &b, unescape(P->c, cur(P)->p, cur(P)->n));
            P->i++;
        }
        n->cst = vstr(sb_str(P->c, &b));
        u8cache(n->cst.s);   /* counted now: a rendering never writes to the template (it may be shared) */
    } else if (t->k == T_INT) {
        n = mknode(P, E_CONST);
        n->cst = vint(t->i);
        P->i++;
    } else if (t->k == T_FLOAT) {
        n = mknode(P, E_CONST);
        n->cst = vfloat(t->f);
        P->i++;
    } else if (is_op(P, "(")) {   /* nesting counts the expressions inside (p_expr) */
        P->i++;
        if (is_op(P, ")")) {
            n = mknode(P, E_TUPLE);   /* () */
        } else {
            n = p_expr(P);
            if (is_op(P, ",")) {     /* a tuple */
                node *l = mknode(P, E_TUPLE);
                addarg(P, l, n, NULL);
                while (is_op(P, ",")) {
                    P->i++;
                    if (is_op(P, ")")) break;
                    addarg(P, l, p_expr(P), NULL);
                }
                n = fin(P, l);
            }
        }
        expect_op(P, ")");
    } else if (is_op(P, "[")) {
        P->i++;
        n = mknode(P, E_LIST);
        while (!is_op(P, "]")) {
            addarg(P, n, p_expr(P), NULL);
            if (!is_op(P, ",")) break;
            P->i++;
        }
        expect_op(P, "]");
        fin(P, n);
    } else if (is_op(P, "{")) {
        P->i++;
        n = mknode(P, E_DICT);
        while (!is_op(P, "}")) {
            addarg(P, n, p_expr(P), NULL);
            expect_op(P, ":");
            addarg(P, n, p_expr(P), NULL);
            if (!is_op(P, ",")) break;
            P->i++;
        }
        expect_op(P, "}");
        fin(P, n);
    } else {
        jfail(P->c, ZT_EDATA, "unexpected %s in an expression", tokdesc(P));
    }
    /* postfix: .name, [index], [a:b:c], (args) */
    for (;;) {
        if (is_op(P, ".")) {
            P->i++;
            node *a = mknode(P, E_ATTR);
            a->a = n;
            if (cur(P)->k == T_INT) {   /* x.0 */
                a->k = E_ITEM;
                a->b = mknode(P, E_CONST);
                a->b->cst = vint(cur(P)->i);
                P->i++;
            } else {
                a->name = take_name(P);
            }
            n = fin(P, a);
        } else if (is_op(P, "[")) {
            P->i++;
            node *s = NULL, *parts[3] = {NULL, NULL, NULL};
            int ncolon = 0;
            for (;;) {
                P->c->line = cur(P)->line;
                if (is_op(P, ":")) { if (++ncolon > 2) jfail(P->c, ZT_EDATA, "bad slice"); P->i++; continue; }
                if (is_op(P, "]")) break;
                if (is_op(P, ",")) jfail(P->c, ZT_EUNSUPPORTED, "subscripts with a tuple (x[a, b])");
                if (parts[ncolon]) jfail(P->c, ZT_EDATA, "expected ']' or ':', found %s", tokdesc(P));
                parts[ncolon] = p_expr(P);
            }
            P->i++;
            if (ncolon == 0) {
                if (!parts[0]) jfail(P->c, ZT_EDATA, "empty subscript");
                s = mknode(P, E_ITEM);
                s->a = n;
                s->b = parts[0];
            } else {
                s = mknode(P, E_SLICE);
                s->a = n;
                s->b = parts[0];
                s->c = parts[1];
                s->d = parts[2];
                /* all literals: jinja2 folds the slice when it compiles the template (an error
                 * there is an undefined value, printed as ''), the engine refuses such a slice */
                s->op = literal(n) && (!s->b || literal(s->b)) && (!s->c || literal(s->c)) && (!s->d || literal(s->d));
            }
            n = fin(P, s);
        } else if (is_op(P, "(")) {
            P->i++;
            node *call = mknode(P, E_CALL);
            call->a = n;
            p_args(P, call);
            n = fin(P, call);
        } else {
            break;
        }
    }
    return n;
}

/* filters and tests after a unary operand */
static node *p_filtertest(parser *P, node *n) {
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            node *f = mknode(P, E_FILTER);
            f->a = n;
            const char *nm = take_name(P);
            if (is_op(P, ".")) jfail(P->c, ZT_EUNSUPPORTED, "dotted filter name '%s.'", nm);
            f->name = nm;
            if (!in_names(jinja_filters, nm)) {
                if (!P->soft) pend_add(P, f->line, 0, nm);
                f->op = 1;
            }
            if (is_op(P, "(")) { P->i++; p_args(P, f); }
            n = fin(P, f);
        } else if (is_name(P, "is")) {
            P->i++;
            node *t = mknode(P, E_TEST);
            t->a = n;
            int neg = 0;
            if (is_name(P, "not")) { neg = 1; P->i++; }
            t->name = take_name(P);
            if (is_op(P, ".")) jfail(P->c, ZT_EUNSUPPORTED, "dotted test name '%s.'", t->name);
            t->op = neg;
            if (!in_names(jinja_tests, t->name)) {
                if (!P->soft) pend_add(P, t->line, 1, t->name);
                t->op |= 2;
            }
            if (is_op(P, "(")) { P->i++; p_args(P, t); }
            else {
                tok *k = cur(P);
                if ((k->k == T_NAME || k->k == T_STR || k->k == T_INT || k->k == T_FLOAT || is_op(P, "(") ||
                     is_op(P, "[") || is_op(P, "{")) && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
                    if (is_name(P, "is")) jfail(P->c, ZT_EDATA, "you cannot chain multiple tests with is");
                    addarg(P, t, p_primary(P), NULL);
                }
            }
            n = fin(P, t);
        } else {
            return n;
        }
    }
}

/* jinja2's parse_unary: a sign applies to the unfiltered operand, the
 * filters and tests that follow to the signed value */
static node *p_unary_(parser *P, int with_filter) {
    node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = mknode(P, is_op(P, "-") ? E_NEG : E_POS);
        P->i++;
        enter(P);
        n->a = p_unary_(P, 0);
        leave(P);
        fin(P, n);
    } else {
        n = p_primary(P);
    }
    return with_filter ? p_filtertest(P, n) : n;
}
static node *p_unary(parser *P) { return p_unary_(P, 1); }

static node *mkbin(parser *P, int op, node *a, node *b) {
    node *n = mknode(P, E_BIN);
    n->line = a->line;
    n->op = op;
    n->a = a;
    n->b = b;
    return fin(P, n);
}

static node *p_pow(parser *P) {
    node *n = p_unary(P);
    while (is_op(P, "**")) { P->i++; n = mkbin(P, OP_POW, n, p_unary(P)); }
    return n;
}
static node *p_math2(parser *P) {
    node *n = p_pow(P);
    for (;;) {
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FDIV : is_op(P, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        P->i++;
        n = mkbin(P, op, n, p_pow(P));
    }
}
static node *p_concat(parser *P) {   /* a ~ b ~ c: one node (jinja2's Concat) */
    node *n = p_math2(P);
    if (!is_op(P, "~")) return n;
    node *c = mknode(P, E_CAT);
    c->line = n->line;
    addarg(P, c, n, NULL);
    while (is_op(P, "~")) { P->i++; addarg(P, c, p_math2(P), NULL); }
    return fin(P, c);
}
static node *p_math1(parser *P) {
    node *n = p_concat(P);
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        P->i++;
        n = mkbin(P, op, n, p_concat(P));
    }
}
static node *p_compare(parser *P) {   /* a < b < c: one node (Python's chained comparison) */
    node *n = p_math1(P), *cmp = NULL;
    int nops = 0, capops = 0;
    for (;;) {
        int op = is_op(P, "==") ? OP_EQ : is_op(P, "!=") ? OP_NE : is_op(P, "<") ? OP_LT : is_op(P, ">") ? OP_GT :
                 is_op(P, "<=") ? OP_LE : is_op(P, ">=") ? OP_GE : is_name(P, "in") ? OP_IN :
                 (is_name(P, "not") && is_name_at(P, 1, "in")) ? OP_NOTIN : -1;
        if (op < 0) break;
        P->i += op == OP_NOTIN ? 2 : 1;
        if (!cmp) { cmp = mknode(P, E_CMP); cmp->line = n->line; cmp->a = n; }
        node *rhs = p_math1(P);
        if (nops == capops) {
            int cap = capops ? capops * 2 : 4;
            int *o = aalloc(P->c, (size_t)cap * sizeof(int));
            if (nops) memcpy(o, cmp->ops, (size_t)nops * sizeof(int));
            cmp->ops = o;
            capops = cap;
        }
        cmp->ops[nops++] = op;
        addarg(P, cmp, rhs, NULL);
    }
    return cmp ? fin(P, cmp) : n;
}
static node *p_not(parser *P) {
    if (is_name(P, "not")) {
        node *n = mknode(P, E_NOT);
        P->i++;
        enter(P);
        n->a = p_not(P);
        leave(P);
        return fin(P, n);
    }
    return p_compare(P);
}
static node *p_and(parser *P) {
    node *n = p_not(P);
    while (is_name(P, "and")) {
        node *a = mknode(P, E_AND);
        a->line = n->line;
        P->i++;
        a->a = n;
        a->b = p_not(P);
        n = fin(P, a);
    }
    return n;
}
static node *p_or(parser *P) {
    node *n = p_and(P);
    while (is_name(P, "or")) {
        node *a = mknode(P, E_OR);
        a->line = n->line;
        P->i++;
        a->a = n;
        a->b = p_and(P);
        n = fin(P, a);
    }
    return n;
}
static node *p_expr(parser *P) {
    enter(P);
    int npend = P->npend;
    node *n = p_or(P);
    if (is_name(P, "if")) {
        P->npend = npend;   /* an inline if is soft as a whole, its value too */
        P->soft++;
        while (is_name(P, "if")) {
            node *c = mknode(P, E_COND);
            c->line = n->line;
            P->i++;
            c->a = n;               /* value when true */
            c->b = p_or(P);         /* condition */
            if (is_name(P, "else")) { P->i++; c->c = p_expr(P); }
            n = fin(P, c);
        }
        P->soft--;
    }
    leave(P);
    return n;
}
/* an expression or a bare tuple (a, b): {{ }}, set, for ... in */
static node *p_tuple(parser *P, node *(*item)(parser *)) {
    node *n = item(P);
    if (!is_op(P, ",")) return n;
    node *l = mknode(P, E_TUPLE);
    l->line = n->line;
    addarg(P, l, n, NULL);
    while (is_op(P, ",")) {
        P->i++;
        if (cur(P)->k == T_BEND || cur(P)->k == T_VEND || is_name(P, "if") || is_name(P, "recursive")) break;
        addarg(P, l, item(P), NULL);
    }
    return fin(P, l);
}

static void end_block(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_BEND) jfail(P->c, ZT_EDATA, "expected end of tag, found %s", tokdesc(P));
    P->i++;
}

static void enter_block(parser *P, int loop) {
    P->c->line = cur(P)->line;
    if (++P->blocks > ZT_JINJA_MAX_BLOCKS)
        jfail(P->c, ZT_EDATA, "blocks (if, for, generation) nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_BLOCKS);
    if (loop && ++P->loops > ZT_JINJA_MAX_LOOPS)
        jfail(P->c, ZT_EDATA, "for loops nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_LOOPS);
}

/* statements until one of the block names in `ends` (NULL-terminated);
 * *which: its index (the name token is consumed, its arguments are not) */
static node *p_body(parser *P, const char *const *ends, int *which) {
    node head = {0}, *tail = &head;
    for (;;) {
        tok *t = cur(P);
        P->c->line = t->line;
        node *s = NULL;
        if (t->k == T_EOF) {
            if (!ends) { *which = -1; return head.next; }
            jfail(P->c, ZT_EDATA, "unexpected end of template (missing {%% %s %%})", ends[0]);
        } else if (t->k == T_DATA) {
            s = mknode(P, S_DATA);
            s->cst = vstr(mkstr(P->c, t->p, t->n));
            u8cache(s->cst.s);
            P->i++;
        } else if (t->k == T_VBEGIN) {
            P->i++;
            s = mknode(P, S_OUT);
            s->a = p_tuple(P, p_expr);
            pend_flush(P);
            P->c->line = cur(P)->line;
            if (cur(P)->k != T_VEND) jfail(P->c, ZT_EDATA, "expected '}}', found %s", tokdesc(P));
            P->i++;
        } else if (t->k == T_BBEGIN) {
            P->i++;
            P->c->line = cur(P)->line;
            for (int e = 0; ends && ends[e]; ++e)
                if (is_name(P, ends[e])) { P->i++; *which = e; return head.next; }
            if (is_name(P, "if")) {
                P->i++;
                s = mknode(P, S_IF);
                enter_block(P, 0);
                P->soft++;
                s->a = p_expr(P);
                end_block(P);
                static const char *const e_if[] = {"endif", "elif", "else", NULL};
                int w;
                s->b = p_body(P, e_if, &w);
                node *last = s;
                int nelif = 0;
                while (w == 1) {    /* elif: the next test of the same if (jinja2's If.elif_) */
                    if (++nelif > ZT_JINJA_MAX_ELIF)
                        jfail(P->c, ZT_EDATA, "an if with more than %d elif branches " BUDGET, ZT_JINJA_MAX_ELIF);
                    node *el = mknode(P, S_IF);
                    el->a = p_expr(P);
                    end_block(P);
                    el->b = p_body(P, e_if, &w);
                    last->d = el;
                    last = el;
                }
                if (w == 2) {
                    end_block(P);
                    static const char *const e_endif[] = {"endif", NULL};
                    last->c = p_body(P, e_endif, &w);
                }
                P->soft--;
                P->blocks--;
                end_block(P);
            } else if (is_name(P, "for")) {
                P->i++;
                s = mknode(P, S_FOR);
                enter_block(P, 1);
                if (is_op(P, "(")) jfail(P->c, ZT_EUNSUPPORTED, "parenthesized for loop targets");
                s->name = take_target(P);
                if (is_op(P, ",")) { P->i++; s->name2 = take_target(P); }
                if (is_op(P, ",")) jfail(P->c, ZT_EUNSUPPORTED, "for loops unpacking more than two names");
                if (!is_name(P, "in")) jfail(P->c, ZT_EDATA, "expected 'in', found %s", tokdesc(P));
                P->i++;
                s->a = p_tuple(P, p_or);     /* the iterable; a trailing 'if' filters */
                int soft = P->soft, inloop = P->inloop;
                P->soft = 0;                 /* the filter and the body: the loop's own frame */
                if (is_name(P, "if")) { P->i++; s->d = p_expr(P); }
                pend_flush(P);
                if (is_name(P, "recursive")) jfail(P->c, ZT_EUNSUPPORTED, "recursive for loops");
                end_block(P);
                static const char *const e_for[] = {"endfor", "else", NULL};
                int w;
                P->inloop = 1;
                s->b = p_body(P, e_for, &w);
                P->inloop = inloop;
                P->soft = soft;
                if (w == 1) {
                    end_block(P);
                    static const char *const e_endfor[] = {"endfor", NULL};
                    s->c = p_body(P, e_endfor, &w);
                }
                P->blocks--;
                P->loops--;
                end_block(P);
            } else if (is_name(P, "set")) {
                P->i++;
                const char *nm = take_target(P);
                if (is_op(P, ".")) {
                    P->i++;
                    s = mknode(P, S_SETATTR);
                    s->name = nm;
                    s->name2 = take_name(P);
                } else {
                    s = mknode(P, S_SET);
                    s->name = nm;
                    if (is_op(P, ",")) { P->i++; s->name2 = take_target(P); }
                    if (is_op(P, ",")) jfail(P->c, ZT_EUNSUPPORTED, "set unpacking more than two names");
                }
                if (!is_op(P, "=")) jfail(P->c, ZT_EUNSUPPORTED, "block set ({%% set %s %%}...{%% endset %%})", nm);
                P->i++;
                s->a = p_tuple(P, p_expr);
                pend_flush(P);
                end_block(P);
            } else if (is_name(P, "break") || is_name(P, "continue")) {
                int brk = is_name(P, "break");
                if (!P->inloop)
                    jfail(P->c, ZT_EDATA, "'%s' outside a for loop (jinja2 refuses it)", brk ? "break" : "continue");
                s = mknode(P, brk ? S_BREAK : S_CONTINUE);
                P->i++;
                end_block(P);
            } else if (is_name(P, "generation")) {
                P->i++;
                end_block(P);
                s = mknode(P, S_GEN);
                enter_block(P, 0);
                /* the body is a macro's (jinja2's CallBlock): its own frame, no loop around it */
                int soft = P->soft, inloop = P->inloop;
                P->soft = 0;
                P->inloop = 0;
                static const char *const e_gen[] = {"endgeneration", NULL};
                int w;
                s->b = p_body(P, e_gen, &w);
                P->soft = soft;
                P->inloop = inloop;
                P->blocks--;
                end_block(P);
            } else if (cur(P)->k == T_NAME) {
                jfail(P->c, ZT_EUNSUPPORTED, "statement '{%% %.*s %%}'", (int)(cur(P)->n < 40 ? cur(P)->n : 40), cur(P)->p);
            } else {
                jfail(P->c, ZT_EDATA, "expected a statement name, found %s", tokdesc(P));
            }
        } else {
            jfail(P->c, ZT_EDATA, "unexpected %s", tokdesc(P));
        }
        tail->next = s;
        tail = s;
    }
}

struct zt_jinja {
    arena ar;
    node *root;
};

int zt_jinja_parse(const char *src, size_t n, zt_jinja **out, zt_status *st) {
    *out = NULL;
    zt_jinja *j = calloc(1, sizeof *j);
    if (!j) return zt_fail(st, ZT_ENOMEM, "out of memory");
    jctx c = {.ar = &j->ar, .st = st, .line = 1};
    if (setjmp(c.jb)) {
        arena_free(&j->ar);
        free(j);
        return st ? st->code : ZT_EDATA;
    }
    /* a template is text: invalid UTF-8 is the template's fault (Python cannot read it as str) */
    for (size_t i = 0, len; i < n; i += len) {
        if (!(len = u8valid((const unsigned char *)src + i, n - i))) {
            for (size_t k = 0; k < i; ++k) c.line += src[k] == '\n';
            jfail(&c, ZT_EDATA, "the template is not valid UTF-8 (byte 0x%02x at offset %zu)", (unsigned char)src[i], i);
        }
    }
    /* newlines normalized to \n, one trailing newline dropped (keep_trailing_newline false) */
    char *s = aalloc(&c, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (src[i] == '\r') { s[k++] = '\n'; if (i + 1 < n && src[i + 1] == '\n') ++i; }
        else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') --k;
    lexer L = {.c = &c};
    lex(&L, s, k);
    parser P = {.c = &c, .t = L.t, .i = 0};
    int w;
    j->root = p_body(&P, NULL, &w);
    *out = j;
    return ZT_OK;
}

void zt_jinja_free(zt_jinja *j) {
    if (!j) return;
    arena_free(&j->ar);
    free(j);
}

/* ---------------------------------------------------------------- evaluation */

typedef struct scope { struct scope *up; jdict *vars; } scope;
/* a for loop's `loop` (one object per loop, as jinja2's LoopContext) */
typedef struct jloop { jlist *items; const jrange *rg; int i, n; jlist *chg; int has_chg; } jloop;

typedef struct rctx {
    jctx c;
    sbuf out;
    int brk, cont;        /* loop control pending */
} rctx;

static jv eval(rctx *r, node *n, scope *sc);
static jstr *to_str(rctx *r, jv v);

static void undef_fail(rctx *r, jv v, const char *what) __attribute__((noreturn));
static void undef_fail(rctx *r, jv v, const char *what) {
    jfail(&r->c, ZT_EDATA, "%s (used in %s; transformers raises UndefinedError)",
          v.hint ? v.hint : "an undefined value", what);
}

static int truthy(jv v) {
    switch (v.t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0.0;
    case V_STR: return v.s->n != 0;
    case V_LIST: return v.l->kind == K_GEN || v.l->n != 0;   /* an iterator is always true */
    case V_DICT: return v.d->n != 0;
    case V_RANGE: return v.rg->n != 0;
    default: return 1;
    }
}

static jv lookup(rctx *r, scope *sc, const char *name) {
    size_t n = strlen(name);
    for (; sc; sc = sc->up) {
        int i = dfind(sc->vars, name, n);
        if (i >= 0 && sc->vars->v[i].t != V_UNSET) return sc->vars->v[i];
    }
    if (!strcmp(name, "cycler") || !strcmp(name, "joiner") || !strcmp(name, "lipsum"))
        jfail(&r->c, ZT_EUNSUPPORTED, "function '%s'", name);
    return vundefh(afmt(&r->c, "'%.200s' is undefined", name));
}

/* ---- numbers: 64-bit integers (a result outside is refused), Python's float semantics */

static int isnum(jv v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static long long ival(jv v) { return v.t == V_INT ? v.i : v.b; }
static double fval(jv v) { return v.t == V_FLOAT ? v.f : (double)ival(v); }

static void int_range(rctx *r, long long a, const char *op, long long b) __attribute__((noreturn));
static void int_range(rctx *r, long long a, const char *op, long long b) {
    jfail(&r->c, ZT_EUNSUPPORTED, "integer result of %lld %s %lld out of range " INT64_NOTE, a, op, b);
}
static long long iadd(rctx *r, long long a, long long b) { long long z; if (__builtin_add_overflow(a, b, &z)) int_range(r, a, "+", b); return z; }
static long long isub(rctx *r, long long a, long long b) { long long z; if (__builtin_sub_overflow(a, b, &z)) int_range(r, a, "-", b); return z; }
static long long imul(rctx *r, long long a, long long b) { long long z; if (__builtin_mul_overflow(a, b, &z)) int_range(r, a, "*", b); return z; }
static long long ineg(rctx *r, long long a) {
    if (a == LLONG_MIN) jfail(&r->c, ZT_EUNSUPPORTED, "integer result of -(%lld) out of range " INT64_NOTE, a);
    return -a;
}
static long long ipow(rctx *r, long long a, long long e) {   /* e >= 0: by squaring, overflow-checked */
    if (a == 0) return e == 0;
    if (a == 1) return 1;
    if (a == -1) return (e & 1) ? -1 : 1;
    long long res = 1, base = a, k = e;
    for (;;) {
        if ((k & 1) && __builtin_mul_overflow(res, base, &res)) int_range(r, a, "**", e);
        k >>= 1;
        if (!k) return res;
        if (__builtin_mul_overflow(base, base, &base)) int_range(r, a, "**", e);
    }
}
static long long pymod(long long a, long long b) {   /* b != 0, b != -1 */
    long long m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
static long long pyfdiv(long long a, long long b) {  /* b != 0, not LLONG_MIN / -1 */
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
/* a / b correctly rounded, as Python's int true division */
static double int_truediv(long long a, long long b) {
    const long long lim = 1LL << 53;
    if (a >= -lim && a <= lim && b >= -lim && b <= lim) return (double)a / (double)b;
    int neg = (a < 0) != (b < 0);
    unsigned long long ua = a < 0 ? 0ULL - (unsigned long long)a : (unsigned long long)a;
    unsigned long long ub = b < 0 ? 0ULL - (unsigned long long)b : (unsigned long long)b;
    if (!ua) return neg ? -0.0 : 0.0;
    int la = 64 - __builtin_clzll(ua), lb = 64 - __builtin_clzll(ub);
    int s = 56 + lb - la;   /* the quotient gets 56 or 57 bits, the rest a sticky bit */
    unsigned long long q;
    int sticky;
    if (s > 0) {
        unsigned __int128 num = (unsigned __int128)ua << s;
        q = (unsigned long long)(num / ub);
        sticky = num % ub != 0;
    } else {
        q = ua / ub;
        sticky = ua % ub != 0;
        s = 0;
    }
    double d = ldexp((double)(q | (unsigned long long)sticky), -s);
    return neg ? -d : d;
}
/* three-way comparison of an integer with a float, exact; 2: unordered (NaN) */
static int cmp_if(long long i, double f) {
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double fl = floor(f);
    long long fi = (long long)fl;
    if (i != fi) return i < fi ? -1 : 1;
    return f > fl ? -1 : 0;
}
static int numcmp(jv a, jv b) {
    if (a.t != V_FLOAT && b.t != V_FLOAT) { long long x = ival(a), y = ival(b); return x < y ? -1 : x > y; }
    if (a.t == V_FLOAT && b.t == V_FLOAT) {
        if (isnan(a.f) || isnan(b.f)) return 2;
        return a.f < b.f ? -1 : a.f > b.f;
    }
    if (a.t == V_FLOAT) { int k = cmp_if(ival(b), a.f); return k == 2 ? 2 : -k; }
    return cmp_if(ival(a), b.f);
}
static double float_pow(rctx *r, double x, double y) {   /* Python's float ** float */
    if (y == 0) return 1.0;
    if (isnan(x) || isnan(y) || isinf(x) || isinf(y)) return pow(x, y);
    if (x == 0 && y < 0) jfail(&r->c, ZT_EDATA, "0.0 cannot be raised to a negative power (Python's ZeroDivisionError)");
    if (x < 0 && y != floor(y))
        jfail(&r->c, ZT_EUNSUPPORTED, "a negative number raised to a fractional power (Python gives a complex number)");
    double z = pow(x, y);
    if (isinf(z)) jfail(&r->c, ZT_EDATA, "float result of ** out of range (Python's OverflowError)");
    return z;
}
static void float_divmod(double vx, double wx, double *floordiv, double *mod) {   /* CPython's float_divmod */
    double m = fmod(vx, wx), div = (vx - m) / wx;
    if (m) {
        if ((wx < 0) != (m < 0)) { m += wx; div -= 1.0; }
    } else {
        m = copysign(0.0, wx);
    }
    if (div) {
        double fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
        div = fd;
    } else {
        div = copysign(0.0, vx / wx);
    }
    *floordiv = div;
    *mod = m;
}

static void fmt_float(double f, char *buf, size_t n) {
    if (isnan(f)) { snprintf(buf, n, "nan"); return; }
    if (isinf(f)) { snprintf(buf, n, f < 0 ? "-inf" : "inf"); return; }
    for (int p = 1; p <= 17; ++p) {
        snprintf(buf, n, "%.*g", p, f);
        if (strtod(buf, NULL) == f) break;
    }
    char *e = strchr(buf, 'e');
    int ex = 0;
    if (e) ex = atoi(e + 1);
    if (e && ex >= -4 && ex < 16) {       /* Python repr: positional from 1e-4 to below 1e16 */
        for (int p = 0; p <= 17; ++p) {
            snprintf(buf, n, "%.*f", p, f);
            if (strtod(buf, NULL) == f) break;
        }
    }
    if (!strchr(buf, 'e') && !strchr(buf, '.') && !strchr(buf, 'n') && !strchr(buf, 'i')) strncat(buf, ".0", n - strlen(buf) - 1);
}

/* ---- printing */

static void repr_into(rctx *r, sbuf *b, jv v, int depth);

static void depth_check(rctx *r, int depth) {
    if (depth > ZT_JINJA_MAX_VDEPTH)
        jfail(&r->c, ZT_EDATA, "a value nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_VDEPTH);
}
static void unprintable(rctx *r, jv v) __attribute__((noreturn));
static void unprintable(rctx *r, jv v) {
    if (v.t == V_LIST) jfail(&r->c, ZT_EUNSUPPORTED, "printing a %s (jinja2 prints its memory address)", v.l->what);
    jfail(&r->c, ZT_EUNSUPPORTED, "printing a %s (jinja2 prints its memory address)", tname(v.t));
}

static void range_repr(jctx *c, sbuf *b, const jrange *g) {
    char buf[96];
    if (g->step == 1) snprintf(buf, sizeof buf, "range(%lld, %lld)", g->start, g->stop);
    else snprintf(buf, sizeof buf, "range(%lld, %lld, %lld)", g->start, g->stop, g->step);
    sb_cstr(c, b, buf);
}

/* str(v) as Python / Jinja print it */
static jstr *to_str(rctx *r, jv v) {
    jctx *c = &r->c;
    char buf[64];
    switch (v.t) {
    case V_STR: return v.s;
    case V_UNDEF: return mkstr(c, "", 0);
    case V_NONE: return mkstr(c, "None", 4);
    case V_BOOL: return v.b ? mkstr(c, "True", 4) : mkstr(c, "False", 5);
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.i); return mkstr(c, buf, strlen(buf));
    case V_FLOAT: fmt_float(v.f, buf, sizeof buf); return mkstr(c, buf, strlen(buf));
    case V_LIST: case V_DICT: case V_NS: case V_RANGE: case V_LOOP: {
        sbuf b = {0};
        repr_into(r, &b, v, 0);
        return sb_str(c, &b);
    }
    default: unprintable(r, v);
    }
}

static void repr_into(rctx *r, sbuf *b, jv v, int depth) {
    jctx *c = &r->c;
    depth_check(r, depth);
    tick(c, 1);
    if (v.t == V_STR) {
        int sq = memchr(v.s->p, '\'', v.s->n) != NULL, dq = memchr(v.s->p, '"', v.s->n) != NULL;
        char q = sq && !dq ? '"' : '\'';
        sb_raw(c, b, &q, 1);
        for (size_t i = 0; i < v.s->n; ++i) {
            unsigned char ch = (unsigned char)v.s->p[i];
            char e[8];
            if (ch == '\\') sb_raw(c, b, "\\\\", 2);
            else if (ch == (unsigned char)q) { e[0] = '\\'; e[1] = q; sb_raw(c, b, e, 2); }
            else if (ch == '\n') sb_raw(c, b, "\\n", 2);
            else if (ch == '\r') sb_raw(c, b, "\\r", 2);
            else if (ch == '\t') sb_raw(c, b, "\\t", 2);
            else if (ch < 0x20 || ch == 0x7f) { snprintf(e, sizeof e, "\\x%02x", ch); sb_raw(c, b, e, 4); }
            else if (ch >= 0x80) jfail(c, ZT_EUNSUPPORTED, "printing a list or dict holding non-ASCII text");
            else sb_raw(c, b, (char *)&ch, 1);
        }
        sb_raw(c, b, &q, 1);
    } else if (v.t == V_LIST) {
        int k = v.l->kind;
        if (k == K_GEN) unprintable(r, v);
        if (k == K_KEYS) sb_cstr(c, b, "dict_keys(");
        if (k == K_VALUES) sb_cstr(c, b, "dict_values(");
        if (k == K_ITEMS) sb_cstr(c, b, "dict_items(");
        sb_raw(c, b, k == K_TUPLE ? "(" : "[", 1);
        for (int i = 0; i < v.l->n; ++i) {
            if (i) sb_raw(c, b, ", ", 2);
            repr_into(r, b, v.l->v[i], depth + 1);
        }
        if (k == K_TUPLE && v.l->n == 1) sb_raw(c, b, ",", 1);
        sb_raw(c, b, k == K_TUPLE ? ")" : "]", 1);
        if (k >= K_KEYS) sb_raw(c, b, ")", 1);
    } else if (v.t == V_DICT || v.t == V_NS) {
        if (v.t == V_NS) sb_cstr(c, b, "<Namespace ");
        sb_raw(c, b, "{", 1);
        for (int i = 0; i < v.d->n; ++i) {
            if (i) sb_raw(c, b, ", ", 2);
            repr_into(r, b, vstr(v.d->k[i]), depth + 1);
            sb_raw(c, b, ": ", 2);
            repr_into(r, b, v.d->v[i], depth + 1);
        }
        sb_raw(c, b, "}", 1);
        if (v.t == V_NS) sb_raw(c, b, ">", 1);
    } else if (v.t == V_UNDEF) {
        sb_cstr(c, b, "Undefined");
    } else if (v.t == V_RANGE) {
        range_repr(c, b, v.rg);
    } else if (v.t == V_LOOP) {
        char buf[64];
        snprintf(buf, sizeof buf, "<LoopContext %d/%d>", v.lp->i + 1, v.lp->n);
        sb_cstr(c, b, buf);
    } else if (v.t == V_FUNC || v.t == V_METHOD) {
        unprintable(r, v);
    } else {
        jstr *s = to_str(r, v);
        sb_raw(c, b, s->p, s->n);
    }
}

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) */
typedef struct jsonopt { int indent; const jstr *ind, *isep, *ksep; int sort, ascii; } jsonopt;

static void json_str(jctx *c, sbuf *b, const jstr *s, int ascii) {
    char buf[16];
    sb_raw(c, b, "\"", 1);
    for (size_t i = 0, len; i < s->n; i += len) {
        unsigned char ch = (unsigned char)s->p[i];
        len = 1;
        if (ch == '"') sb_raw(c, b, "\\\"", 2);
        else if (ch == '\\') sb_raw(c, b, "\\\\", 2);
        else if (ch == '\n') sb_raw(c, b, "\\n", 2);
        else if (ch == '\r') sb_raw(c, b, "\\r", 2);
        else if (ch == '\t') sb_raw(c, b, "\\t", 2);
        else if (ch == '\b') sb_raw(c, b, "\\b", 2);
        else if (ch == '\f') sb_raw(c, b, "\\f", 2);
        else if (ch < 0x20 || (ascii && ch == 0x7f)) { snprintf(buf, sizeof buf, "\\u%04x", ch); sb_raw(c, b, buf, 6); }
        else if (ch >= 0x80 && ascii) {
            uint32_t cp = u8at(s->p + i, s->n - i, &len);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
                sb_raw(c, b, buf, 12);
            } else {
                snprintf(buf, sizeof buf, "\\u%04x", cp);
                sb_raw(c, b, buf, 6);
            }
        } else {
            size_t k = i + 1;   /* a run of plain bytes at once */
            while (k < s->n && (unsigned char)s->p[k] >= 0x20 && s->p[k] != '"' && s->p[k] != '\\' &&
                   !(ascii && (unsigned char)s->p[k] >= 0x7f)) ++k;
            sb_raw(c, b, s->p + i, k - i);
            len = k - i;
        }
    }
    sb_raw(c, b, "\"", 1);
}
static void json_newline(jctx *c, sbuf *b, const jsonopt *o, int depth) {
    sb_raw(c, b, "\n", 1);
    for (int s = 0; s < depth; ++s) sb_raw(c, b, o->ind->p, o->ind->n);
}
static void json_into(rctx *r, sbuf *b, jv v, const jsonopt *o, int depth) {
    jctx *c = &r->c;
    char buf[64];
    depth_check(r, depth);
    tick(c, 1);
    switch (v.t) {
    case V_NONE: sb_raw(c, b, "null", 4); return;
    case V_BOOL: if (v.b) sb_raw(c, b, "true", 4); else sb_raw(c, b, "false", 5); return;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.i); sb_raw(c, b, buf, strlen(buf)); return;
    case V_FLOAT:
        if (isnan(v.f)) { sb_raw(c, b, "NaN", 3); return; }
        if (isinf(v.f)) { if (v.f < 0) sb_raw(c, b, "-Infinity", 9); else sb_raw(c, b, "Infinity", 8); return; }
        fmt_float(v.f, buf, sizeof buf);
        sb_raw(c, b, buf, strlen(buf));
        return;
    case V_STR: json_str(c, b, v.s, o->ascii); return;
    case V_LIST: case V_DICT: {
        if (v.t == V_LIST && v.l->kind != K_LIST && v.l->kind != K_TUPLE) break;
        int isl = v.t == V_LIST, n = isl ? v.l->n : v.d->n;
        sb_raw(c, b, isl ? "[" : "{", 1);
        if (n == 0) { sb_raw(c, b, isl ? "]" : "}", 1); return; }
        int *ord = aalloc(c, (size_t)n * sizeof(int));
        for (int i = 0; i < n; ++i) ord[i] = i;
        if (!isl && o->sort) {   /* by key bytes (= code point order); keys are unique: a merge sort */
            int *tmp = aalloc(c, (size_t)n * sizeof(int));
            for (int w = 1; w < n; w *= 2) {
                for (int lo = 0; lo < n; lo += 2 * w) {
                    int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, x = lo, y = mid, k = lo;
                    while (x < mid || y < hi) {
                        int take_x = y >= hi;
                        if (x < mid && y < hi) {
                            jstr *p = v.d->k[ord[x]], *q = v.d->k[ord[y]];
                            size_t m = p->n < q->n ? p->n : q->n;
                            int cmp = memcmp(p->p, q->p, m);
                            take_x = cmp < 0 || (cmp == 0 && p->n <= q->n);
                        }
                        tmp[k++] = take_x ? ord[x++] : ord[y++];
                    }
                }
                memcpy(ord, tmp, (size_t)n * sizeof(int));
                tick(c, n / 16 + 1);
            }
        }
        for (int i = 0; i < n; ++i) {
            if (i) sb_raw(c, b, o->isep->p, o->isep->n);
            if (o->indent) json_newline(c, b, o, depth + 1);
            if (!isl) {
                json_str(c, b, v.d->k[ord[i]], o->ascii);
                sb_raw(c, b, o->ksep->p, o->ksep->n);
            }
            json_into(r, b, isl ? v.l->v[i] : v.d->v[ord[i]], o, depth + 1);
        }
        if (o->indent) json_newline(c, b, o, depth);
        sb_raw(c, b, isl ? "]" : "}", 1);
        return;
    }
    default: break;
    }
    jfail(c, ZT_EDATA, "tojson: Object of type %s is not JSON serializable", pyname(v));
}

/* ---- comparisons */

static int veq(rctx *r, jv a, jv b, int depth);

/* == between two items of containers: Python compares identical objects equal (even NaN), which
 * the engine cannot see for floats */
static int veq_item(rctx *r, jv a, jv b, int depth) {
    if (a.t == V_FLOAT && b.t == V_FLOAT && isnan(a.f) && isnan(b.f))
        jfail(&r->c, ZT_EUNSUPPORTED, "comparing containers holding NaN (Python's answer depends on object identity)");
    return veq(r, a, b, depth);
}

/* item i (0 <= i < n) of a range: in range, but i * step may not be: computed modulo 2^64 */
static long long range_at(const jrange *g, long long i) {
    return (long long)((unsigned long long)g->start + (unsigned long long)i * (unsigned long long)g->step);
}

static int range_eq(const jrange *a, const jrange *b) {
    if (a->n != b->n) return 0;
    if (a->n == 0) return 1;
    if (a->start != b->start) return 0;
    return a->n == 1 || a->step == b->step;
}

static int veq(rctx *r, jv a, jv b, int depth) {
    depth_check(r, depth);
    tick(&r->c, 1);
    if (isnum(a) && isnum(b)) return numcmp(a, b) == 0;
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR:
        scan(&r->c, a.s->n);
        return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
    case V_LIST: {
        if (a.l == b.l) return 1;
        int ka = a.l->kind, kb = b.l->kind;
        if (ka == K_GEN || kb == K_GEN || ka == K_VALUES || kb == K_VALUES) return 0;   /* identity */
        if (ka == K_KEYS || ka == K_ITEMS || kb == K_KEYS || kb == K_ITEMS)
            jfail(&r->c, ZT_EUNSUPPORTED, "comparing dict views (Python compares them as sets)");
        if (ka != kb || a.l->n != b.l->n) return 0;
        for (int i = 0; i < a.l->n; ++i) if (!veq_item(r, a.l->v[i], b.l->v[i], depth + 1)) return 0;
        return 1;
    }
    case V_DICT:
        if (a.d == b.d) return 1;
        if (a.d->n != b.d->n) return 0;
        for (int i = 0; i < a.d->n; ++i) {
            int k = dfind(b.d, a.d->k[i]->p, a.d->k[i]->n);
            if (k < 0 || !veq_item(r, a.d->v[i], b.d->v[k], depth + 1)) return 0;
        }
        return 1;
    case V_RANGE: return range_eq(a.rg, b.rg);
    case V_FUNC: return a.fn == b.fn;
    case V_NS: return a.d == b.d;
    case V_LOOP: return a.lp == b.lp;
    default: jfail(&r->c, ZT_EUNSUPPORTED, "comparing %ss", tname(a.t));
    }
}

/* three-way <, >: -1, 0, 1, 2 unordered (NaN) */
static int vcmp(rctx *r, jv a, jv b, const char *op, int depth) {
    depth_check(r, depth);
    tick(&r->c, 1);
    if (a.t == V_UNDEF) undef_fail(r, a, op);
    if (b.t == V_UNDEF) undef_fail(r, b, op);
    if (isnum(a) && isnum(b)) return numcmp(a, b);
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.s->n < b.s->n ? a.s->n : b.s->n;
        scan(&r->c, m);
        int cmp = memcmp(a.s->p, b.s->p, m);
        return cmp ? (cmp < 0 ? -1 : 1) : (a.s->n < b.s->n ? -1 : a.s->n > b.s->n);
    }
    if (a.t == V_LIST && b.t == V_LIST && a.l->kind == b.l->kind && (a.l->kind == K_LIST || a.l->kind == K_TUPLE)) {
        int n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (int i = 0; i < n; ++i)   /* the first items that differ decide */
            if (!veq_item(r, a.l->v[i], b.l->v[i], depth + 1)) return vcmp(r, a.l->v[i], b.l->v[i], op, depth + 1);
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    if (a.t == V_LIST && b.t == V_LIST && (a.l->kind == K_KEYS || a.l->kind == K_ITEMS))
        jfail(&r->c, ZT_EUNSUPPORTED, "comparing dict views (Python compares them as sets)");
    jfail(&r->c, ZT_EDATA, "'%s' not supported between instances of '%s' and '%s'", op, pyname(a), pyname(b));
}
static int cmp_holds(int op, int k) {
    if (k == 2) return 0;
    switch (op) {
    case OP_LT: return k < 0;
    case OP_GT: return k > 0;
    case OP_LE: return k <= 0;
    default: return k >= 0;
    }
}

static jlist *consume(rctx *r, jv v, const char *what);

static int range_has(const jrange *g, long long x) {
    if (g->n == 0) return 0;
    if (g->step > 0 ? (x < g->start || x >= g->stop) : (x > g->start || x <= g->stop)) return 0;
    unsigned long long d = g->step > 0 ? (unsigned long long)x - (unsigned long long)g->start
                                       : (unsigned long long)g->start - (unsigned long long)x;
    unsigned long long s = g->step > 0 ? (unsigned long long)g->step : 0ULL - (unsigned long long)g->step;
    return d % s == 0;
}

static int contains(rctx *r, jv hay, jv x) {
    jctx *c = &r->c;
    if (hay.t == V_STR) {
        if (x.t != V_STR) jfail(c, ZT_EDATA, "'in <string>' requires string as left operand, not %s", pyname(x));
        scan(c, hay.s->n);
        if (x.s->n == 0) return 1;
        return memmem(hay.s->p, hay.s->n, x.s->p, x.s->n) != NULL;
    }
    if (hay.t == V_LIST) {
        if (hay.l->kind == K_KEYS && (x.t == V_DICT || (x.t == V_LIST && x.l->kind == K_LIST)))
            jfail(c, ZT_EDATA, "unhashable type: '%s'", pyname(x));
        jlist *l = hay.l->kind == K_GEN ? consume(r, hay, "in") : hay.l;
        for (int i = 0; i < l->n; ++i) if (veq_item(r, l->v[i], x, 0)) return 1;
        return 0;
    }
    if (hay.t == V_DICT) {
        if (x.t == V_DICT || (x.t == V_LIST && x.l->kind == K_LIST)) jfail(c, ZT_EDATA, "unhashable type: '%s'", pyname(x));
        if (x.t != V_STR) return 0;
        return dfind(hay.d, x.s->p, x.s->n) >= 0;
    }
    if (hay.t == V_RANGE) {
        if (x.t == V_INT || x.t == V_BOOL) return range_has(hay.rg, ival(x));
        if (x.t == V_FLOAT)
            return isfinite(x.f) && x.f == floor(x.f) && fabs(x.f) < 9.2e18 && range_has(hay.rg, (long long)x.f);
        return 0;
    }
    if (hay.t == V_UNDEF) return 0;
    if (hay.t == V_LOOP) jfail(c, ZT_EUNSUPPORTED, "'in' on a loop object");
    jfail(c, ZT_EDATA, "argument of type '%s' is not iterable", pyname(hay));
}

/* ---- sequences */

/* the items of an iterable (dict: keys, string: characters, range: its
 * numbers); an iterator is consumed: a second use is refused (jinja2 would
 * resume it where the first stopped) */
static jlist *consume(rctx *r, jv v, const char *what) {
    jlist *l = v.l;
    if (l->used)
        jfail(&r->c, ZT_EUNSUPPORTED, "%s: a %s used a second time (jinja2 resumes it where the first use "
              "stopped; convert it with |list)", what, l->what);
    l->used = 1;
    return l;
}
static jlist *items_of(rctx *r, jv v, const char *what) {
    jctx *c = &r->c;
    switch (v.t) {
    case V_LIST: return v.l->kind == K_GEN ? consume(r, v, what) : v.l;
    case V_UNDEF: return mklist(c, 0);
    case V_DICT: {
        jlist *l = mklist(c, v.d->n);
        tick(c, 1 + v.d->n / 16);
        for (int i = 0; i < v.d->n; ++i) lpush(c, l, vstr(v.d->k[i]));
        return l;
    }
    case V_STR: {
        size_t n = u8count(c, v.s), len;
        jlist *l = mklist(c, (int)n);
        tick(c, 1 + (long long)n / 16);
        for (size_t i = 0; i < v.s->n; i += len) {
            u8at(v.s->p + i, v.s->n - i, &len);
            lpush(c, l, vstr(substr(c, v.s, i, i + len)));
        }
        return l;
    }
    case V_RANGE: {
        jlist *l = mklist(c, (int)v.rg->n);
        tick(c, 1 + v.rg->n / 16);
        for (long long i = 0; i < v.rg->n; ++i) lpush(c, l, vint(range_at(v.rg, i)));
        return l;
    }
    case V_LOOP: jfail(c, ZT_EUNSUPPORTED, "%s: iterating a loop object", what);
    default: jfail(c, ZT_EDATA, "%s: '%s' object is not iterable", what, pyname(v));
    }
}
static jlist *newlist(jctx *c, const jlist *l, int kind) {
    jlist *o = aalloc(c, sizeof *o);
    o->n = o->cap = l->n;
    o->v = l->v;
    o->kind = kind;
    if (!o->cap) { o->cap = 4; o->v = aalloc(c, 4 * sizeof(jv)); }
    return o;
}

/* Python slice indices (PySlice_Unpack + PySlice_AdjustIndices, overflow-free) on n items:
 * the start, the adjusted stop, the step and the length; 0: an index is not an integer or None */
static int slice_arg(jv v, long long *out) {
    if (v.t == V_INT || v.t == V_BOOL) { *out = ival(v); return 1; }
    return v.t == V_NONE;
}
static int slice_bounds(rctx *r, jv vs, jv ve, jv vt, long long n, long long *start, long long *stop, long long *step,
                        long long *len) {
    long long st = 1, b, e;
    if (vt.t != V_NONE) {
        if (!slice_arg(vt, &st)) return 0;
        if (st == 0) jfail(&r->c, ZT_EDATA, "slice step cannot be zero");
        if (st < -LLONG_MAX) st = -LLONG_MAX;
    }
    b = st < 0 ? LLONG_MAX : 0;
    e = st < 0 ? LLONG_MIN : LLONG_MAX;
    if (vs.t != V_NONE && !slice_arg(vs, &b)) return 0;
    if (ve.t != V_NONE && !slice_arg(ve, &e)) return 0;
    if (b < 0) { b += n; if (b < 0) b = st < 0 ? -1 : 0; }
    else if (b >= n) b = st < 0 ? n - 1 : n;
    if (e < 0) { e += n; if (e < 0) e = st < 0 ? -1 : 0; }
    else if (e >= n) e = st < 0 ? n - 1 : n;
    long long k = 0;
    if (st < 0) { if (e < b) k = (b - e - 1) / (-st) + 1; }
    else if (b < e) k = (e - b - 1) / st + 1;
    *start = b;
    *stop = e;
    *step = st;
    *len = k;
    return 1;
}

static void slice_error(rctx *r, int folded, const char *msg) __attribute__((noreturn));
static void slice_error(rctx *r, int folded, const char *msg) {
    if (folded) jfail(&r->c, ZT_EUNSUPPORTED, "a slice of literals that fails (%s; jinja2 folds it when it reads the "
                      "template, printing an undefined value)", msg);
    jfail(&r->c, ZT_EDATA, "%s", msg);
}
#define bad_slice(r) slice_error(r, folded, "slice indices must be integers or None or have an __index__ method")

/* x[b:e:s]: jinja2 compiles a slice to Python's own subscript (errors are errors);
 * folded: all literals (see the parser) */
static jv do_slice(rctx *r, jv x, jv vs, jv ve, jv vt, int folded) {
    jctx *c = &r->c;
    long long b, e, st, k;
    if (x.t == V_UNDEF) undef_fail(r, x, "a slice");
    tick(c, 1);
    if (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)) {
        if (!slice_bounds(r, vs, ve, vt, x.l->n, &b, &e, &st, &k)) bad_slice(r);
        jlist *l = mklist(c, (int)k);
        tick(c, k / 16);
        for (long long i = 0; i < k; ++i) lpush(c, l, x.l->v[b + i * st]);
        return vlistk(l, x.l->kind);
    }
    if (x.t == V_STR) {
        long long n = (long long)u8count(c, x.s);
        if (!slice_bounds(r, vs, ve, vt, n, &b, &e, &st, &k)) bad_slice(r);
        if (st == 1) return vstr(substr(c, x.s, u8off(c, x.s, (size_t)b), u8off(c, x.s, (size_t)(b + k))));
        sbuf o = {0};
        if (k) {
            size_t *off = aalloc(c, ((size_t)n + 1) * sizeof(size_t));
            scan(c, x.s->n);
            size_t j = 0, len;
            for (size_t i = 0; i < x.s->n; i += len) { off[j++] = i; u8at(x.s->p + i, x.s->n - i, &len); }
            off[n] = x.s->n;
            tick(c, k / 16);
            for (long long i = 0; i < k; ++i) {
                long long p = b + i * st;
                sb_put(c, &o, substr(c, x.s, off[p], off[p + 1]));
            }
        }
        jstr *s = sb_str(c, &o);
        s->markup = x.s->markup;
        return vstr(s);
    }
    if (x.t == V_RANGE) {   /* a range: range(start + b*step, start + e*step, st*step), computed exactly */
        const jrange *g = x.rg;
        if (!slice_bounds(r, vs, ve, vt, g->n, &b, &e, &st, &k)) bad_slice(r);
        jrange *o = aalloc(c, sizeof *o);
        long long t1, t2, st0 = vt.t == V_NONE ? 1 : ival(vt);   /* the step itself, not clamped */
        if (__builtin_mul_overflow(b, g->step, &t1) || __builtin_add_overflow(g->start, t1, &o->start) ||
            __builtin_mul_overflow(e, g->step, &t2) || __builtin_add_overflow(g->start, t2, &o->stop) ||
            __builtin_mul_overflow(st0, g->step, &o->step))
            jfail(c, ZT_EUNSUPPORTED, "a slice of a range with bounds out of range " INT64_NOTE);
        o->n = k;
        jv v = {.t = V_RANGE};
        v.rg = o;
        return v;
    }
    slice_error(r, folded, afmt(c, "'%s' object is not subscriptable with a slice", pyname(x)));
}
#undef bad_slice

/* ---- attributes and items (jinja2's sandboxed getattr / getitem) */

static const char *const str_attrs[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format", "format_map",
    "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
    "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans", "partition",
    "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill", NULL};
static const char *const dict_attrs[] = {"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem",
                                         "setdefault", "update", "values", NULL};
static const char *const list_attrs[] = {"append", "clear", "copy", "count", "extend", "index", "insert", "pop",
                                         "remove", "reverse", "sort", NULL};
static const char *const tuple_attrs[] = {"count", "index", NULL};
static const char *const int_attrs[] = {"as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator",
                                        "from_bytes", "imag", "is_integer", "numerator", "real", "to_bytes", NULL};
static const char *const float_attrs[] = {"as_integer_ratio", "conjugate", "fromhex", "hex", "imag", "is_integer",
                                          "real", NULL};
static const char *const range_attrs[] = {"count", "index", "start", "step", "stop", NULL};
static const char *const gen_attrs[] = {"close", "gi_code", "gi_frame", "gi_running", "gi_suspended", "gi_yieldfrom",
                                        "send", "throw", "isdisjoint", "mapping", NULL};
/* the mutating methods ImmutableSandboxedEnvironment refuses */
static const char *const unsafe_attrs[] = {"append", "clear", "extend", "insert", "pop", "popitem", "remove",
                                           "reverse", "setdefault", "sort", "update", NULL};

static jv vmeth(rctx *r, jv self, const char *name) {
    jv v = {.t = V_METHOD};
    v.m = aalloc(&r->c, sizeof *v.m);
    v.m->self = self;
    v.m->name = name;
    return v;
}

static jv loop_attr(rctx *r, jloop *lp, const char *name, int *found);

/* Python's getattr(x, name) in the sandbox; *found 0: AttributeError */
static jv pyattr(rctx *r, jv x, const char *name, int *found) {
    jctx *c = &r->c;
    *found = 1;
    size_t nl = strlen(name);
    if (nl >= 4 && name[0] == '_' && name[1] == '_' && name[nl - 1] == '_' && name[nl - 2] == '_')
        jfail(c, ZT_EUNSUPPORTED, "attribute '%s'", name);
    switch (x.t) {
    case V_STR: if (in_names(str_attrs, name)) return vmeth(r, x, name); break;
    case V_DICT:
        if (in_names(dict_attrs, name)) {
            if (in_names(unsafe_attrs, name))
                return vundefh(afmt(c, "access to attribute '%s' of 'dict' object is unsafe", name));
            return vmeth(r, x, name);
        }
        break;
    case V_LIST: {
        int k = x.l->kind;
        if (k == K_LIST && in_names(list_attrs, name)) {
            if (in_names(unsafe_attrs, name))
                return vundefh(afmt(c, "access to attribute '%s' of 'list' object is unsafe", name));
            return vmeth(r, x, name);
        }
        if (k == K_TUPLE && in_names(tuple_attrs, name)) return vmeth(r, x, name);
        if (k >= K_GEN && in_names(gen_attrs, name)) jfail(c, ZT_EUNSUPPORTED, "attribute '%s' of a %s", name, pyname(x));
        break;
    }
    case V_INT: case V_BOOL:
        if (!strcmp(name, "real") || !strcmp(name, "numerator")) return vint(ival(x));
        if (!strcmp(name, "imag")) return vint(0);
        if (!strcmp(name, "denominator")) return vint(1);
        if (in_names(int_attrs, name)) return vmeth(r, x, name);
        break;
    case V_FLOAT:
        if (!strcmp(name, "real")) return x;
        if (!strcmp(name, "imag")) return vfloat(0.0);
        if (in_names(float_attrs, name)) return vmeth(r, x, name);
        break;
    case V_RANGE:
        if (!strcmp(name, "start")) return vint(x.rg->start);
        if (!strcmp(name, "stop")) return vint(x.rg->stop);
        if (!strcmp(name, "step")) return vint(x.rg->step);
        if (in_names(range_attrs, name)) return vmeth(r, x, name);
        break;
    case V_NS: {
        int i = dfind(x.d, name, nl);
        if (i >= 0) return x.d->v[i];
        break;
    }
    case V_LOOP: {
        jv v = loop_attr(r, x.lp, name, found);
        if (*found) return v;
        break;
    }
    case V_FUNC:
        if (x.fn == F_DICT && !strcmp(name, "fromkeys")) return vmeth(r, x, name);
        break;
    default: break;
    }
    *found = 0;
    return vundef();
}

static const char *objrepr(jv x) {   /* jinja2's object_type_repr */
    switch (x.t) {
    case V_NONE: return "None";
    default: return NULL;
    }
}
static jv no_attr(rctx *r, jv x, const char *name) {
    const char *o = objrepr(x);
    if (o) return vundefh(afmt(&r->c, "'%s' has no attribute '%.100s'", o, name));
    return vundefh(afmt(&r->c, "'%s object' has no attribute '%.100s'", pyname(x), name));
}

static jv getitem(rctx *r, jv x, jv k) {
    jctx *c = &r->c;
    if (x.t == V_UNDEF) undef_fail(r, x, "a subscript");
    tick(c, 1);
    if (x.t == V_DICT && k.t == V_STR) {
        int i = dfind(x.d, k.s->p, k.s->n);
        if (i >= 0) return x.d->v[i];
    }
    if ((k.t == V_INT || k.t == V_BOOL) &&
        (x.t == V_STR || x.t == V_RANGE || (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)))) {
        long long i = ival(k);
        long long n = x.t == V_LIST ? x.l->n : x.t == V_RANGE ? x.rg->n : (long long)u8count(c, x.s);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return vundefh(afmt(c, "%s object has no element %lld", pyname(x), ival(k)));
        if (x.t == V_LIST) return x.l->v[i];
        if (x.t == V_RANGE) return vint(range_at(x.rg, i));
        size_t b = u8off(c, x.s, (size_t)i), len;
        u8at(x.s->p + b, x.s->n - b, &len);
        return vstr(substr(c, x.s, b, b + len));
    }
    if (k.t == V_STR) {   /* obj[name] failed: jinja2 tries getattr(obj, name) */
        char nm[256];
        if (k.s->n >= sizeof nm || memchr(k.s->p, 0, k.s->n)) return vundef();
        memcpy(nm, k.s->p, k.s->n);
        nm[k.s->n] = 0;
        int found;
        jv v = pyattr(r, x, nm, &found);
        if (found) return v;
        if (x.t == V_DICT) return vundefh(afmt(c, "'dict object' has no attribute '%s'", nm));
    }
    return vundef();
}

static jv getattr_(rctx *r, jv x, const char *name) {
    if (x.t == V_UNDEF) undef_fail(r, x, afmt(&r->c, "attribute '%s'", name));
    tick(&r->c, 1);
    int found;
    jv v = pyattr(r, x, name, &found);   /* getattr(obj, name) first */
    if (found) return v;
    if (x.t == V_DICT) {                 /* then obj[name] */
        int i = dfind(x.d, name, strlen(name));
        if (i >= 0) return x.d->v[i];
    }
    return no_attr(r, x, name);
}

/* ---- string helpers (Python str semantics on UTF-8) */

static int in_chars(uint32_t cp, const jstr *chars) {
    size_t len;
    for (size_t i = 0; i < chars->n; i += len)
        if (u8at(chars->p + i, chars->n - i, &len) == cp) return 1;
    return 0;
}

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace */
static jstr *pystrip(rctx *r, jstr *s, const jstr *chars, int which) {
    size_t b = 0, e = s->n, len;
    scan(&r->c, s->n + (chars ? s->n * chars->n / 64 : 0));
    if (which & 1) {
        while (b < e) {
            uint32_t cp = u8at(s->p + b, e - b, &len);
            if (chars ? !in_chars(cp, chars) : !py_space(cp)) break;
            b += len;
        }
    }
    if (which & 2) {
        while (e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s->p[k] & 0xc0) == 0x80) --k;
            uint32_t cp = u8at(s->p + k, e - k, &len);
            if (chars ? !in_chars(cp, chars) : !py_space(cp)) break;
            e = k;
        }
    }
    return substr(&r->c, s, b, e);
}

static jv pysplit(rctx *r, jstr *s, jv sep, long long maxsplit) {
    jctx *c = &r->c;
    jlist *l = mklist(c, 4);
    scan(c, s->n);
    if (sep.t == V_NONE) {
        size_t i = 0, len;
        for (;;) {
            while (i < s->n && py_space(u8at(s->p + i, s->n - i, &len))) i += len;
            if (i >= s->n) break;
            if (maxsplit >= 0 && l->n == maxsplit) {   /* the rest, trailing white space kept */
                lpush(c, l, vstr(substr(c, s, i, s->n)));
                break;
            }
            size_t b = i;
            while (i < s->n && !py_space(u8at(s->p + i, s->n - i, &len))) i += len;
            lpush(c, l, vstr(substr(c, s, b, i)));
        }
        tick(c, l->n / 16);
        return vlist(l);
    }
    if (sep.t != V_STR) jfail(c, ZT_EDATA, "split: must be str or None, not %s", pyname(sep));
    if (sep.s->n == 0) jfail(c, ZT_EDATA, "split: empty separator");
    size_t b = 0;
    for (;;) {
        if (maxsplit >= 0 && l->n >= maxsplit) break;
        const char *f = memmem(s->p + b, s->n - b, sep.s->p, sep.s->n);
        if (!f) break;
        size_t i = (size_t)(f - s->p);
        lpush(c, l, vstr(substr(c, s, b, i)));
        b = i + sep.s->n;
    }
    lpush(c, l, vstr(substr(c, s, b, s->n)));
    tick(c, l->n / 16);
    return vlist(l);
}

static jstr *pyreplace(rctx *r, jstr *s, jstr *old, jstr *new_, long long count) {
    jctx *c = &r->c;
    sbuf o = {0};
    scan(c, s->n);
    long long done = 0;
    if (old->n == 0) {   /* the new text before each character and at the end */
        size_t len;
        for (size_t i = 0; i <= s->n; i += len) {
            if (count < 0 || done < count) { sb_raw(c, &o, new_->p, new_->n); done++; }
            if (i == s->n) break;
            u8at(s->p + i, s->n - i, &len);
            sb_put(c, &o, substr(c, s, i, i + len));
        }
        return sb_str(c, &o);
    }
    size_t b = 0;
    while (count < 0 || done < count) {
        const char *f = memmem(s->p + b, s->n - b, old->p, old->n);
        if (!f) break;
        size_t i = (size_t)(f - s->p);
        sb_put(c, &o, substr(c, s, b, i));
        sb_raw(c, &o, new_->p, new_->n);
        b = i + old->n;
        done++;
    }
    sb_put(c, &o, substr(c, s, b, s->n));
    return sb_str(c, &o);
}

/* ASCII case mapping; non-ASCII text is refused (Python maps it by Unicode tables).
 * mode 0 lower, 1 upper, 2 capitalize, 3 str.title(), 4 jinja2's |title */
static jstr *pycase(rctx *r, jstr *s, int mode, const char *what) {
    jctx *c = &r->c;
    scan(c, s->n);
    for (size_t i = 0; i < s->n; ++i)
        if ((unsigned char)s->p[i] >= 0x80) jfail(c, ZT_EUNSUPPORTED, "%s on non-ASCII text", what);
    jstr *o = aalloc(c, sizeof *o);
    char *p = aalloc(c, s->n + 1);
    int prev_alpha = 0;
    for (size_t i = 0; i < s->n; ++i) {
        char ch = s->p[i];
        int lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
        int to_up;
        if (mode == 4) {   /* a word starts after [-\s({[<] (jinja2's _word_beginning_split_re) */
            char pv = i ? s->p[i - 1] : 0;
            to_up = i == 0 || pv == '-' || pv == '(' || pv == '{' || pv == '[' || pv == '<' || py_space((unsigned char)pv);
        } else {
            to_up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && !prev_alpha);
        }
        if (to_up && lo) ch = (char)(ch - 32);
        else if (!to_up && up) ch = (char)(ch + 32);
        prev_alpha = lo || up;
        p[i] = ch;
    }
    o->p = p;
    o->n = s->n;
    o->mk = s->mk;
    o->tail = s->tail;
    o->markup = s->markup;
    return o;
}

/* markupsafe's escape (what Markup + str does to the str) */
static jstr *html_escape(rctx *r, jstr *s) {
    if (s->markup) return s;
    sbuf o = {0};
    size_t b = 0;
    scan(&r->c, s->n);
    for (size_t i = 0; i < s->n; ++i) {
        const char *e = s->p[i] == '&' ? "&amp;" : s->p[i] == '<' ? "&lt;" : s->p[i] == '>' ? "&gt;" :
                        s->p[i] == '"' ? "&#34;" : s->p[i] == '\'' ? "&#39;" : NULL;
        if (!e) continue;
        sb_put(&r->c, &o, substr(&r->c, s, b, i));
        sb_cstr(&r->c, &o, e);
        b = i + 1;
    }
    sb_put(&r->c, &o, substr(&r->c, s, b, s->n));
    return sb_str(&r->c, &o);
}

/* Python's int(s, base) (*v; 0 ok, 1 ValueError, 2 out of 64 bits) and float(s) */
static int py_int_parse(const char *s, size_t n, int base, long long *v) {
    size_t i = 0, e = n;
    int neg = 0;
    if (i < e && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (i + 1 < e && s[i] == '0') {
            int p = s[i + 1] | 32, pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
            if (pb && (base == 0 || base == pb)) {
                base = pb;
                i += 2;
                if (i < e && s[i] == '_') ++i;   /* 0x_1f */
            }
        }
        if (base == 0) {
            base = 10;   /* decimal: no leading zeros but for zero itself */
            if (i < e && s[i] == '0') {
                for (size_t k = i; k < e; ++k) if (s[k] != '0' && s[k] != '_') return 1;
            }
        }
    }
    if (i >= e) return 1;
    unsigned long long acc = 0;
    int over = 0, prev_us = 1;
    for (; i < e; ++i) {
        if (s[i] == '_') { if (prev_us) return 1; prev_us = 1; continue; }
        int d = s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : (s[i] | 32) >= 'a' && (s[i] | 32) <= 'z' ? (s[i] | 32) - 'a' + 10 : 99;
        if (d >= base) return 1;
        prev_us = 0;
        if (acc > (ULLONG_MAX - (unsigned)d) / (unsigned)base) over = 1;
        else acc = acc * (unsigned)base + (unsigned)d;
    }
    if (prev_us) return 1;
    if (over || acc > (unsigned long long)LLONG_MAX + (unsigned long long)neg) return 2;
    *v = neg ? (long long)(0ULL - acc) : (long long)acc;
    return 0;
}
static int py_float_parse(const char *s, size_t n, double *v) {
    char buf[512];
    size_t b = 0, i = 0;
    if (n >= sizeof buf) return 1;
    if (i < n && (s[i] == '+' || s[i] == '-')) buf[b++] = s[i++];
    size_t rest = n - i;
    const char *w = s + i;
    static const char *const sp[] = {"inf", "infinity", "nan", NULL};
    for (int k = 0; sp[k]; ++k)
        if (rest == strlen(sp[k]) && !strncasecmp(w, sp[k], rest)) {
            *v = strtod(s, NULL);
            return 0;
        }
    int digits = 0;
    for (; i < n; ++i) {   /* digits, '.', e[+-]digits; '_' only between digits */
        char ch = s[i];
        if (ch == '_') {
            if (!(i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) return 1;
            continue;
        }
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' || ch == '-')) return 1;
        digits += ch >= '0' && ch <= '9';
        buf[b++] = ch;
    }
    buf[b] = 0;
    if (!digits) return 1;
    char *end;
    *v = strtod(buf, &end);
    return *end != 0;
}

/* ---- arguments */

typedef struct args { int n; jv v[8]; const char *kw[8]; } args;

static void eval_args(rctx *r, node *n, scope *sc, args *a) {
    a->n = 0;
    if (n->nv > 8) jfail(&r->c, ZT_EUNSUPPORTED, "calls with more than 8 arguments");
    for (int i = 0; i < n->nv; ++i) {
        a->v[a->n] = eval(r, n->v[i], sc);
        a->kw[a->n++] = n->kw[i];
    }
}

/* positional i or keyword name; has: set to 1 when given */
static jv arg(args *a, int pos, const char *name, int *has) {
    int k = 0;
    for (int i = 0; i < a->n; ++i) {
        if (!a->kw[i]) {
            if (k++ == pos) { if (has) *has = 1; return a->v[i]; }
        } else if (name && strcmp(a->kw[i], name) == 0) {
            if (has) *has = 1;
            return a->v[i];
        }
    }
    if (has) *has = 0;
    return vundef();
}

static void check_args(rctx *r, args *a, int maxpos, const char *const *kws, const char *what) {
    int pos = 0;
    for (int i = 0; i < a->n; ++i) {
        if (!a->kw[i]) { if (++pos > maxpos) jfail(&r->c, ZT_EUNSUPPORTED, "%s with %d positional arguments", what, pos); continue; }
        int ok = 0;
        for (int k = 0; kws && kws[k]; ++k) ok |= strcmp(kws[k], a->kw[i]) == 0;
        if (!ok) jfail(&r->c, ZT_EUNSUPPORTED, "%s with the keyword argument '%s'", what, a->kw[i]);
    }
}
static void need_args(rctx *r, args *a, int minpos, const char *what) {
    int pos = 0;
    for (int i = 0; i < a->n; ++i) pos += !a->kw[i];
    if (pos < minpos) jfail(&r->c, ZT_EDATA, "%s: missing a required argument", what);
}

static jstr *need_str(rctx *r, jv v, const char *what) {
    if (v.t == V_UNDEF) undef_fail(r, v, what);
    if (v.t != V_STR) jfail(&r->c, ZT_EDATA, "%s: must be str, not %s", what, pyname(v));
    return v.s;
}
/* an optional integer argument (Python's index: int or bool); dflt when absent or None */
static long long opt_int(rctx *r, jv v, int has, long long dflt, const char *what) {
    if (!has || v.t == V_NONE) return dflt;
    if (v.t == V_INT || v.t == V_BOOL) return ival(v);
    if (v.t == V_UNDEF) undef_fail(r, v, what);
    jfail(&r->c, ZT_EDATA, "%s: '%s' object cannot be interpreted as an integer", what, pyname(v));
}
/* an optional str-or-None argument; NULL: None or absent */
static jstr *opt_chars(rctx *r, jv v, int has, const char *what) {
    if (!has || v.t == V_NONE) return NULL;
    if (v.t == V_STR) return v.s;
    if (v.t == V_UNDEF) undef_fail(r, v, what);
    jfail(&r->c, ZT_EDATA, "%s arg must be None or str, not %s", what, pyname(v));
}

static jv apply_filter(rctx *r, const char *name, int unknown, jv x, args *a);
static int apply_test(rctx *r, const char *name, int unknown, jv x, args *a);

static jv dict_view(rctx *r, jv x, int kind) {
    jctx *c = &r->c;
    jlist *l = mklist(c, x.d->n);
    tick(c, 1 + x.d->n / 16);
    for (int i = 0; i < x.d->n; ++i)
        lpush(c, l, kind == K_KEYS ? vstr(x.d->k[i]) : kind == K_VALUES ? x.d->v[i] : pair(c, vstr(x.d->k[i]), x.d->v[i]));
    return vlistk(l, kind);
}

/* str / dict / list / loop methods called as x.name(args) */
static jv call_method(rctx *r, jv x, const char *m, args *a) {
    jctx *c = &r->c;
    if (x.t == V_STR) {
        jstr *s = x.s;
        if (s->markup) jfail(c, ZT_EUNSUPPORTED, "method str.%s() of a |safe string (jinja2's Markup escapes)", m);
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jv p = arg(a, 0, NULL, NULL);
            int ends = m[0] == 'e', isl = p.t == V_LIST && p.l->kind == K_TUPLE, n = isl ? p.l->n : 1;
            if (p.t == V_UNDEF) undef_fail(r, p, m);
            if (p.t != V_STR && !isl) jfail(c, ZT_EDATA, "%s first arg must be str or a tuple of str, not %s", m, pyname(p));
            for (int i = 0; i < n; ++i) {
                jstr *q = need_str(r, isl ? p.l->v[i] : p, m);
                if (q->n <= s->n && memcmp(s->p + (ends ? s->n - q->n : 0), q->p, q->n) == 0) return vbool(1);
            }
            return vbool(0);
        }
        if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
            check_args(r, a, 1, NULL, m);
            int has;
            jv ch = arg(a, 0, NULL, &has);
            return vstr(pystrip(r, s, opt_chars(r, ch, has, m), m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3));
        }
        if (!strcmp(m, "split")) {
            static const char *const kws[] = {"sep", "maxsplit", NULL};
            check_args(r, a, 2, kws, m);
            int hs, hm;
            jv sep = arg(a, 0, "sep", &hs), ms = arg(a, 1, "maxsplit", &hm);
            if (hs && sep.t == V_UNDEF) undef_fail(r, sep, m);
            return pysplit(r, s, hs ? sep : vnone(), opt_int(r, ms, hm, -1, m));
        }
        if (!strcmp(m, "replace")) {
            static const char *const kws[] = {"count", NULL};
            check_args(r, a, 3, kws, m);
            need_args(r, a, 2, m);
            int has;
            jv cnt = arg(a, 2, "count", &has);
            return vstr(pyreplace(r, s, need_str(r, arg(a, 0, NULL, NULL), m), need_str(r, arg(a, 1, NULL, NULL), m),
                                  opt_int(r, cnt, has, -1, m)));
        }
        if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize")) {
            check_args(r, a, 0, NULL, m);
            return vstr(pycase(r, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3, m));
        }
        if (!strcmp(m, "join")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jlist *l = items_of(r, arg(a, 0, NULL, NULL), "join");
            sbuf o = {0};
            tick(c, l->n / 16);
            for (int i = 0; i < l->n; ++i) {
                if (i) sb_put(c, &o, s);
                jv e = l->v[i];
                if (e.t != V_STR) jfail(c, ZT_EDATA, "join: sequence item %d: expected str instance, %s found", i, pyname(e));
                sb_put(c, &o, e.s);
            }
            return vstr(sb_str(c, &o));
        }
        if (!strcmp(m, "find") || !strcmp(m, "count")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jstr *q = need_str(r, arg(a, 0, NULL, NULL), m);
            scan(c, s->n);
            if (m[0] == 'f') {
                const char *f = q->n ? memmem(s->p, s->n, q->p, q->n) : s->p;
                if (!f) return vint(-1);
                jstr pre = {s->p, (size_t)(f - s->p), NULL, 0, 0, 0};
                return vint((long long)u8count(c, &pre));
            }
            if (q->n == 0) return vint((long long)u8count(c, s) + 1);
            long long cnt = 0;
            for (size_t b = 0;;) {
                const char *f = memmem(s->p + b, s->n - b, q->p, q->n);
                if (!f) break;
                cnt++;
                b = (size_t)(f - s->p) + q->n;
            }
            return vint(cnt);
        }
    } else if (x.t == V_DICT) {
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            check_args(r, a, 0, NULL, m);
            return dict_view(r, x, m[0] == 'k' ? K_KEYS : m[0] == 'v' ? K_VALUES : K_ITEMS);
        }
        if (!strcmp(m, "get")) {
            check_args(r, a, 2, NULL, m);
            need_args(r, a, 1, m);
            jv k = arg(a, 0, NULL, NULL);
            if (k.t == V_DICT || (k.t == V_LIST && k.l->kind == K_LIST)) jfail(c, ZT_EDATA, "unhashable type: '%s'", pyname(k));
            int i = k.t == V_STR ? dfind(x.d, k.s->p, k.s->n) : -1;
            if (i >= 0) return x.d->v[i];
            int has;
            jv d = arg(a, 1, NULL, &has);
            return has ? d : vnone();
        }
        if (!strcmp(m, "copy")) {
            check_args(r, a, 0, NULL, m);
            jv d = {.t = V_DICT};
            d.d = mkdict(c);
            tick(c, 1 + x.d->n / 16);
            for (int i = 0; i < x.d->n; ++i) dset(c, d.d, x.d->k[i], x.d->v[i]);
            return d;
        }
    } else if (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)) {
        if (!strcmp(m, "count") || !strcmp(m, "index")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jv y = arg(a, 0, NULL, NULL);
            long long cnt = 0;
            for (int i = 0; i < x.l->n; ++i)
                if (veq_item(r, x.l->v[i], y, 0)) {
                    if (m[0] == 'i') return vint(i);
                    cnt++;
                }
            if (m[0] == 'i') jfail(c, ZT_EDATA, "%s.index(x): x not in %s", pyname(x), pyname(x));
            return vint(cnt);
        }
        if (!strcmp(m, "copy") && x.l->kind == K_LIST) {
            check_args(r, a, 0, NULL, m);
            return vlist(newlist(c, x.l, K_LIST));
        }
    } else if (x.t == V_LOOP) {
        jloop *lp = x.lp;
        if (!strcmp(m, "cycle")) {
            for (int i = 0; i < a->n; ++i) if (a->kw[i]) jfail(c, ZT_EDATA, "loop.cycle() takes no keyword arguments");
            if (a->n == 0) jfail(c, ZT_EDATA, "loop.cycle(): no items for cycling given");
            return a->v[lp->i % a->n];
        }
        if (!strcmp(m, "changed")) {
            for (int i = 0; i < a->n; ++i) if (a->kw[i]) jfail(c, ZT_EUNSUPPORTED, "loop.changed() with keyword arguments");
            jlist *t = mklist(c, a->n);
            for (int i = 0; i < a->n; ++i) lpush(c, t, a->v[i]);
            t->kind = K_TUPLE;
            if (lp->has_chg && veq(r, vlist(lp->chg), vlist(t), 0)) return vbool(0);
            lp->chg = t;
            lp->has_chg = 1;
            return vbool(1);
        }
    }
    jfail(c, ZT_EUNSUPPORTED, "method %s.%s()", pyname(x), m);
}

static jv mkrange(rctx *r, long long start, long long stop, long long step) {
    jctx *c = &r->c;
    if (step == 0) jfail(c, ZT_EDATA, "range() arg 3 must not be zero");
    unsigned long long n = 0;   /* Python's len(range(...)), exactly */
    if (step > 0 && start < stop)
        n = ((unsigned long long)stop - (unsigned long long)start - 1) / (unsigned long long)step + 1;
    else if (step < 0 && start > stop)
        n = ((unsigned long long)start - (unsigned long long)stop - 1) / (0ULL - (unsigned long long)step) + 1;
    if (n > ZT_JINJA_MAX_RANGE)
        jfail(c, ZT_EDATA, "range too big: the sandbox blocks ranges larger than MAX_RANGE (%d), as jinja2's",
              ZT_JINJA_MAX_RANGE);
    jv v = {.t = V_RANGE};
    v.rg = aalloc(c, sizeof *v.rg);
    v.rg->start = start;
    v.rg->stop = stop;
    v.rg->step = step;
    v.rg->n = (long long)n;
    return v;
}

static jv call_func(rctx *r, int fn, args *a) {
    jctx *c = &r->c;
    switch (fn) {
    case F_RAISE: {
        jstr *s = to_str(r, arg(a, 0, NULL, NULL));
        jfail(c, ZT_EDATA, "the template raised: %.*s", (int)(s->n < 300 ? s->n : 300), s->p);
    }
    case F_STRFTIME: {
        check_args(r, a, 1, NULL, "strftime_now");
        need_args(r, a, 1, "strftime_now");
        jstr *f = need_str(r, arg(a, 0, NULL, NULL), "strftime_now");
        char fmt[256], buf[256];
        if (f->n >= sizeof fmt || memchr(f->p, 0, f->n)) jfail(c, ZT_EUNSUPPORTED, "strftime_now format longer than 255 bytes");
        memcpy(fmt, f->p, f->n);
        fmt[f->n] = 0;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t k = strftime(buf, sizeof buf, fmt, &tm);
        return vstr(mkstr(c, buf, k));
    }
    case F_NAMESPACE: case F_DICT: {
        jv d = {.t = fn == F_NAMESPACE ? V_NS : V_DICT};
        d.d = mkdict(c);
        for (int i = 0; i < a->n; ++i) {
            if (!a->kw[i]) jfail(c, ZT_EUNSUPPORTED, "%s() with positional arguments", fn == F_DICT ? "dict" : "namespace");
            if (fn == F_NAMESPACE && a->kw[i][0] == '_')
                jfail(c, ZT_EDATA, "chat templates cannot store underscore-prefixed attributes on a namespace, "
                      "but got '%s' (transformers' SecurityError)", a->kw[i]);
            dset(c, d.d, mkstr(c, a->kw[i], strlen(a->kw[i])), a->v[i]);
        }
        return d;
    }
    default: {
        for (int i = 0; i < a->n; ++i) if (a->kw[i]) jfail(c, ZT_EDATA, "range() takes no keyword arguments");
        if (a->n == 0) jfail(c, ZT_EDATA, "range expected at least 1 argument, got 0");
        if (a->n > 3) jfail(c, ZT_EDATA, "range expected at most 3 arguments, got %d", a->n);
        long long p[3] = {0, 0, 1};
        for (int i = 0; i < a->n; ++i) {
            jv v = a->v[i];
            if (v.t == V_UNDEF) undef_fail(r, v, "range()");
            if (v.t != V_INT && v.t != V_BOOL) jfail(c, ZT_EDATA, "range(): '%s' object cannot be interpreted as an integer", pyname(v));
            p[i] = ival(v);
        }
        if (a->n == 1) { p[1] = p[0]; p[0] = 0; }
        return mkrange(r, p[0], p[1], p[2]);
    }
    }
}

static jv call_value(rctx *r, jv f, args *a) {
    if (f.t == V_FUNC) return call_func(r, f.fn, a);
    if (f.t == V_METHOD) return call_method(r, f.m->self, f.m->name, a);
    if (f.t == V_UNDEF) undef_fail(r, f, "a call");
    if (f.t == V_LOOP) jfail(&r->c, ZT_EUNSUPPORTED, "calling loop (recursive loops)");
    jfail(&r->c, ZT_EDATA, "'%s' object is not callable", pyname(f));
}

/* ---- tests */

static int test_mod(rctx *r, jv x, jv y, long long want, const char *t);

static int apply_test(rctx *r, const char *t, int unknown, jv x, args *a) {
    jctx *c = &r->c;
    if (unknown) jfail(c, ZT_EDATA, "no test named '%s'", t);
    int has;
    jv y = arg(a, 0, NULL, &has);
    static const char *const one[] = {"equalto", "eq", "==", "ne", "!=", "lt", "lessthan", "<", "gt", "greaterthan",
                                      ">", "le", "<=", "ge", ">=", "in", "sameas", "divisibleby", NULL};
    int nargs = in_names(one, t);
    check_args(r, a, nargs, NULL, afmt(c, "test '%s'", t));
    if (nargs) need_args(r, a, 1, afmt(c, "test '%s'", t));
    if (!strcmp(t, "defined")) return x.t != V_UNDEF;
    if (!strcmp(t, "undefined")) return x.t == V_UNDEF;
    if (!strcmp(t, "none")) return x.t == V_NONE;
    if (!strcmp(t, "string")) return x.t == V_STR;
    if (!strcmp(t, "number")) return isnum(x);
    if (!strcmp(t, "integer")) return x.t == V_INT;
    if (!strcmp(t, "float")) return x.t == V_FLOAT;
    if (!strcmp(t, "boolean")) return x.t == V_BOOL;
    if (!strcmp(t, "true")) return x.t == V_BOOL && x.b;
    if (!strcmp(t, "false")) return x.t == V_BOOL && !x.b;
    if (!strcmp(t, "mapping")) return x.t == V_DICT;
    if (!strcmp(t, "iterable"))
        return x.t == V_STR || x.t == V_LIST || x.t == V_DICT || x.t == V_UNDEF || x.t == V_RANGE || x.t == V_LOOP;
    if (!strcmp(t, "sequence"))
        return x.t == V_STR || (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)) || x.t == V_DICT ||
               x.t == V_UNDEF || x.t == V_RANGE;
    if (!strcmp(t, "callable")) return x.t == V_FUNC || x.t == V_METHOD || x.t == V_UNDEF || x.t == V_LOOP;
    if (!strcmp(t, "escaped")) return x.t == V_STR && x.s->markup;
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "==")) return veq(r, x, y, 0);
    if (!strcmp(t, "ne") || !strcmp(t, "!=")) return !veq(r, x, y, 0);
    if (!strcmp(t, "lt") || !strcmp(t, "lessthan") || !strcmp(t, "<")) return cmp_holds(OP_LT, vcmp(r, x, y, "<", 0));
    if (!strcmp(t, "gt") || !strcmp(t, "greaterthan") || !strcmp(t, ">")) return cmp_holds(OP_GT, vcmp(r, x, y, ">", 0));
    if (!strcmp(t, "le") || !strcmp(t, "<=")) return cmp_holds(OP_LE, vcmp(r, x, y, "<=", 0));
    if (!strcmp(t, "ge") || !strcmp(t, ">=")) return cmp_holds(OP_GE, vcmp(r, x, y, ">=", 0));
    if (!strcmp(t, "in")) return contains(r, y, x);
    if (!strcmp(t, "sameas")) {   /* identity: decidable here for none, booleans, containers */
        if (x.t != y.t || x.t == V_UNDEF) return 0;
        switch (x.t) {
        case V_NONE: return 1;
        case V_BOOL: return x.b == y.b;
        case V_LIST: return x.l == y.l;
        case V_DICT: case V_NS: return x.d == y.d;
        case V_RANGE: return x.rg == y.rg;
        case V_LOOP: return x.lp == y.lp;
        case V_FUNC: return x.fn == y.fn;
        default: jfail(c, ZT_EUNSUPPORTED, "'sameas' on %ss (Python's identity of numbers and strings is an "
                       "implementation detail)", tname(x.t));
        }
    }
    if (!strcmp(t, "odd")) return test_mod(r, x, vint(2), 1, t);
    if (!strcmp(t, "even")) return test_mod(r, x, vint(2), 0, t);
    if (!strcmp(t, "divisibleby")) return test_mod(r, x, y, 0, t);
    jfail(c, ZT_EUNSUPPORTED, "test 'is %s'", t);
}

/* ---- filters */

/* select / reject / selectattr / rejectattr */
static jv getpath(rctx *r, jv x, jstr *path, const char *what);

static jv do_select(rctx *r, jv seq, args *a, int attr, int keep, const char *what) {
    jctx *c = &r->c;
    if (!truthy(seq)) return vgen(mklist(c, 0), "generator");   /* jinja2: `if value:` first */
    jlist *l = items_of(r, seq, what);
    jlist *o = mklist(c, 4);
    int base = attr ? 1 : 0;
    jstr *an = NULL;
    if (attr) {
        need_args(r, a, 1, what);
        jv av = arg(a, 0, NULL, NULL);
        if (av.t != V_STR) jfail(c, ZT_EUNSUPPORTED, "%s with a %s attribute", what, tname(av.t));
        an = av.s;
    }
    for (int i = 0; i < a->n; ++i) if (a->kw[i]) jfail(c, ZT_EUNSUPPORTED, "%s with keyword arguments", what);
    int has;
    jv tn = arg(a, base, NULL, &has);
    args ta = {0};
    for (int i = base + 1; i < a->n && ta.n < 8; ++i) { ta.v[ta.n] = a->v[i]; ta.kw[ta.n++] = a->kw[i]; }
    char tnm[64] = "";
    if (has) {
        if (tn.t == V_UNDEF) undef_fail(r, tn, afmt(c, "%s's test name", what));
        jstr *ts = need_str(r, tn, what);
        snprintf(tnm, sizeof tnm, "%.*s", (int)(ts->n < 63 ? ts->n : 63), ts->p);
    }
    int unknown = has && !in_names(jinja_tests, tnm);
    for (int i = 0; i < l->n; ++i) {
        tick(c, 1);
        jv x = l->v[i];
        if (attr) x = getpath(r, x, an, what);
        int ok = has ? apply_test(r, tnm, unknown, x, &ta) : truthy(x);
        if (ok == keep) lpush(c, o, l->v[i]);
    }
    return vgen(o, "generator");
}

/* jinja2's make_attrgetter: environment.getitem per dotted part, digits as integers */
static jv getpath(rctx *r, jv x, jstr *path, const char *what) {
    size_t b = 0;
    for (;;) {
        const char *dot = memchr(path->p + b, '.', path->n - b);
        size_t e = dot ? (size_t)(dot - path->p) : path->n;
        jstr *part = substr(&r->c, path, b, e);
        int digits = part->n > 0;
        for (size_t i = 0; i < part->n; ++i) digits &= part->p[i] >= '0' && part->p[i] <= '9';
        long long k;
        if (digits && py_int_parse(part->p, part->n, 10, &k) == 0) x = getitem(r, x, vint(k));
        else x = getitem(r, x, vstr(part));
        if (!dot) return x;
        if (x.t == V_UNDEF) return x;
        b = e + 1;
        (void)what;
    }
}

static jv reversed(rctx *r, jv x) {
    jctx *c = &r->c;
    if (x.t == V_STR) return do_slice(r, x, vnone(), vnone(), vint(-1), 0);
    const char *what = NULL;
    jlist *l = NULL;
    if (x.t == V_LIST && x.l->kind == K_GEN) {   /* reversed() fails: list(value), reversed */
        l = consume(r, x, "reverse");
    } else {
        if (x.t == V_LIST) what = x.l->kind == K_LIST ? "list_reverseiterator" : x.l->kind == K_TUPLE ? "reversed" :
                                  x.l->kind == K_KEYS ? "dict_reversekeyiterator" :
                                  x.l->kind == K_VALUES ? "dict_reversevalueiterator" : "dict_reverseitemiterator";
        else if (x.t == V_RANGE) what = "range_iterator";
        else if (x.t == V_DICT) what = "dict_reversekeyiterator";
        else if (x.t == V_UNDEF) what = "reversed";
        else jfail(c, ZT_EDATA, "reverse: argument must be iterable (a %s)", pyname(x));
        l = items_of(r, x, "reverse");
    }
    jlist *o = mklist(c, l->n);
    tick(c, l->n / 16);
    for (int i = l->n - 1; i >= 0; --i) lpush(c, o, l->v[i]);
    return what ? vgen(o, what) : vlist(o);
}

static jv filter_int(rctx *r, jv x, args *a) {
    jctx *c = &r->c;
    static const char *const kws[] = {"default", "base", NULL};
    check_args(r, a, 2, kws, "int");
    int hd, hb;
    jv dflt = arg(a, 0, "default", &hd), bv = arg(a, 1, "base", &hb);
    if (!hd) dflt = vint(0);
    if (x.t == V_UNDEF) undef_fail(r, x, "int()");
    if (x.t == V_INT) return x;
    if (x.t == V_BOOL) return vint(x.b);
    if (x.t == V_FLOAT) {
        if (isnan(x.f)) return dflt;
        if (isinf(x.f)) jfail(c, ZT_EDATA, "int: cannot convert float infinity to integer (Python's OverflowError)");
        if (!(fabs(x.f) < 9223372036854775808.0))
            jfail(c, ZT_EUNSUPPORTED, "int of %g out of range " INT64_NOTE, x.f);
        return vint((long long)x.f);
    }
    if (x.t == V_STR) {
        jstr *s = pystrip(r, x.s, NULL, 3);
        for (size_t i = 0; i < s->n; ++i)
            if ((unsigned char)s->p[i] >= 0x80)
                jfail(c, ZT_EUNSUPPORTED, "int of a string with non-ASCII characters (Python reads all Unicode digits)");
        long long base = 10;
        int base_ok = 1;
        if (hb) {
            if (bv.t == V_INT || bv.t == V_BOOL) base = ival(bv);
            else if (bv.t == V_UNDEF) undef_fail(r, bv, "int()");
            else base_ok = 0;
            if (base != 0 && (base < 2 || base > 36)) base_ok = 0;
        }
        long long v;
        int rc = base_ok ? py_int_parse(s->p, s->n, (int)base, &v) : 1;
        if (rc == 0) return vint(v);
        if (rc == 2) jfail(c, ZT_EUNSUPPORTED, "int of '%.*s' out of range " INT64_NOTE, (int)(s->n < 60 ? s->n : 60), s->p);
        double d;   /* jinja2: int(float(value)) */
        if (py_float_parse(s->p, s->n, &d) || !isfinite(d)) return dflt;   /* its OverflowError too */
        if (!(fabs(d) < 9223372036854775808.0)) jfail(c, ZT_EUNSUPPORTED, "int of %g out of range " INT64_NOTE, d);
        return vint((long long)d);
    }
    return dflt;
}

static jv filter_tojson(rctx *r, jv x, args *a) {
    jctx *c = &r->c;
    static const char *const kws[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    check_args(r, a, 4, kws, "tojson");
    int hi, hs;
    jv ea = arg(a, 0, "ensure_ascii", NULL), ind = arg(a, 1, "indent", &hi), sep = arg(a, 2, "separators", &hs),
       sk = arg(a, 3, "sort_keys", NULL);
    jsonopt o = {0};
    o.ascii = truthy(ea);
    o.sort = truthy(sk);
    if (hi && ind.t != V_NONE) {
        o.indent = 1;
        if (ind.t == V_INT || ind.t == V_BOOL) {
            long long k = ival(ind);
            if (k > (long long)ZT_JINJA_MAX_OUTPUT) k = (long long)ZT_JINJA_MAX_OUTPUT + 1;
            sbuf s = {0};
            for (long long i = 0; i < k; ++i) sb_raw(c, &s, " ", 1);
            o.ind = sb_str(c, &s);
        } else if (ind.t == V_STR) {
            o.ind = ind.s;
        } else if (ind.t == V_UNDEF) {
            undef_fail(r, ind, "tojson's indent");
        } else {
            jfail(c, ZT_EDATA, "tojson: indent of type %s", pyname(ind));
        }
    }
    static jstr comma = {",", 1, NULL, 0, 0, 0}, comma_sp = {", ", 2, NULL, 0, 0, 0}, colon_sp = {": ", 2, NULL, 0, 0, 0};
    o.isep = o.indent ? &comma : &comma_sp;
    o.ksep = &colon_sp;
    if (hs && sep.t != V_NONE) {
        if (sep.t == V_UNDEF) undef_fail(r, sep, "tojson's separators");
        if (sep.t != V_LIST || (sep.l->kind != K_LIST && sep.l->kind != K_TUPLE) || sep.l->n != 2 ||
            sep.l->v[0].t != V_STR || sep.l->v[1].t != V_STR)
            jfail(c, ZT_EUNSUPPORTED, "tojson separators other than two strings");
        o.isep = sep.l->v[0].s;
        o.ksep = sep.l->v[1].s;
    }
    sbuf b = {0};
    json_into(r, &b, x, &o, 0);
    jstr *s = sb_str(c, &b);
    s->mk = NULL;
    s->tail = 0;
    return vstr(s);
}

static jv apply_filter(rctx *r, const char *f, int unknown, jv x, args *a) {
    jctx *c = &r->c;
    if (unknown) jfail(c, ZT_EDATA, "no filter named '%s'", f);
    if (x.t == V_STR && x.s->markup) {   /* jinja2's Markup: only what keeps its text as it is */
        static const char *const ok[] = {"safe", "string", "length", "count", "tojson", "default", "d", "list",
                                         "first", "last", "join", "int", NULL};
        if (!in_names(ok, f)) jfail(c, ZT_EUNSUPPORTED, "filter '%s' on a |safe string (jinja2's Markup escapes)", f);
    }
    if (!strcmp(f, "safe")) {
        check_args(r, a, 0, NULL, f);
        jstr *s = to_str(r, x), *o = aalloc(c, sizeof *o);
        *o = *s;
        o->markup = 1;
        return vstr(o);
    }
    if (!strcmp(f, "trim")) {
        check_args(r, a, 1, NULL, f);
        int has;
        jv ch = arg(a, 0, NULL, &has);
        return vstr(pystrip(r, to_str(r, x), opt_chars(r, ch, has, "strip"), 3));
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        check_args(r, a, 0, NULL, f);
        switch (x.t) {
        case V_STR: return vint((long long)u8count(c, x.s));
        case V_LIST: if (x.l->kind == K_GEN) break; return vint(x.l->n);
        case V_DICT: return vint(x.d->n);
        case V_RANGE: return vint(x.rg->n);
        case V_LOOP: return vint(x.lp->n);
        case V_UNDEF: return vint(0);
        default: break;
        }
        jfail(c, ZT_EDATA, "%s: object of type '%s' has no len()", f, pyname(x));
    }
    if (!strcmp(f, "string")) { check_args(r, a, 0, NULL, f); return vstr(to_str(r, x)); }
    if (!strcmp(f, "lower") || !strcmp(f, "upper") || !strcmp(f, "capitalize") || !strcmp(f, "title")) {
        check_args(r, a, 0, NULL, f);
        return vstr(pycase(r, to_str(r, x), f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 'c' ? 2 : 4, f));
    }
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        static const char *const kws[] = {"default_value", "boolean", NULL};
        check_args(r, a, 2, kws, "default");
        int hd;
        jv dv = arg(a, 0, "default_value", &hd), bo = arg(a, 1, "boolean", NULL);
        if (x.t == V_UNDEF || (truthy(bo) && !truthy(x))) return hd ? dv : vstr(mkstr(c, "", 0));
        return x;
    }
    if (!strcmp(f, "first")) {
        check_args(r, a, 0, NULL, f);
        jlist *l = items_of(r, x, f);
        return l->n ? l->v[0] : vundefh("no first item, sequence was empty");
    }
    if (!strcmp(f, "last")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_LIST && x.l->kind == K_GEN) jfail(c, ZT_EDATA, "last: '%s' object is not reversible", x.l->what);
        jlist *l = items_of(r, x, f);
        return l->n ? l->v[l->n - 1] : vundefh("no last item, sequence was empty");
    }
    if (!strcmp(f, "list")) {
        check_args(r, a, 0, NULL, f);
        return vlist(newlist(c, items_of(r, x, f), K_LIST));
    }
    if (!strcmp(f, "reverse")) { check_args(r, a, 0, NULL, f); return reversed(r, x); }
    if (!strcmp(f, "join")) {
        static const char *const kws[] = {"d", "attribute", NULL};
        check_args(r, a, 2, kws, "join");
        int has;
        jv at = arg(a, 1, "attribute", &has);
        jv sep = arg(a, 0, "d", NULL);
        jstr *s = to_str(r, sep);
        jlist *l = items_of(r, x, "join");
        sbuf o = {0};
        tick(c, l->n / 16);
        for (int i = 0; i < l->n; ++i) {
            if (i) sb_put(c, &o, s);
            jv e = l->v[i];
            if (has) {
                if (at.t != V_STR) jfail(c, ZT_EUNSUPPORTED, "join with a %s attribute", tname(at.t));
                e = getpath(r, e, at.s, "join");
            }
            sb_put(c, &o, to_str(r, e));
        }
        return vstr(sb_str(c, &o));
    }
    if (!strcmp(f, "items")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_UNDEF) return vgen(mklist(c, 0), "generator");
        if (x.t != V_DICT) jfail(c, ZT_EDATA, "items: can only get item pairs from a mapping (a %s)", pyname(x));
        jv v = dict_view(r, x, K_ITEMS);
        return vgen(v.l, "generator");
    }
    if (!strcmp(f, "tojson")) return filter_tojson(r, x, a);
    if (!strcmp(f, "replace")) {
        check_args(r, a, 3, NULL, f);
        need_args(r, a, 2, f);
        int has;
        jv cnt = arg(a, 2, NULL, &has);
        return vstr(pyreplace(r, to_str(r, x), to_str(r, arg(a, 0, NULL, NULL)), to_str(r, arg(a, 1, NULL, NULL)),
                              opt_int(r, cnt, has, -1, "replace")));
    }
    if (!strcmp(f, "int")) return filter_int(r, x, a);
    if (!strcmp(f, "abs")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_INT) return vint(x.i < 0 ? ineg(r, x.i) : x.i);
        if (x.t == V_BOOL) return vint(x.b);
        if (x.t == V_FLOAT) return vfloat(fabs(x.f));
        if (x.t == V_UNDEF) undef_fail(r, x, "abs()");
        jfail(c, ZT_EDATA, "bad operand type for abs(): '%s'", pyname(x));
    }
    if (!strcmp(f, "select")) return do_select(r, x, a, 0, 1, f);
    if (!strcmp(f, "reject")) return do_select(r, x, a, 0, 0, f);
    if (!strcmp(f, "selectattr")) return do_select(r, x, a, 1, 1, f);
    if (!strcmp(f, "rejectattr")) return do_select(r, x, a, 1, 0, f);
    if (!strcmp(f, "map")) {
        if (!truthy(x)) return vgen(mklist(c, 0), "generator");   /* jinja2: `if value:` first */
        jlist *l = items_of(r, x, "map");
        int has;
        jv at = arg(a, 99, "attribute", &has);
        jlist *o = mklist(c, l->n);
        if (has) {
            static const char *const kws[] = {"attribute", "default", NULL};
            check_args(r, a, 0, kws, "map");
            if (at.t != V_STR) jfail(c, ZT_EUNSUPPORTED, "map with a %s attribute", tname(at.t));
            int hd;
            jv dflt = arg(a, 99, "default", &hd);
            for (int i = 0; i < l->n; ++i) {
                tick(c, 1);
                jv v = getpath(r, l->v[i], at.s, "map");
                lpush(c, o, v.t == V_UNDEF && hd ? dflt : v);
            }
            return vgen(o, "generator");
        }
        need_args(r, a, 1, "map");
        jv fv = arg(a, 0, NULL, NULL);
        if (fv.t == V_UNDEF) undef_fail(r, fv, "map's filter name");
        jstr *fn = need_str(r, fv, "map");
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(fn->n < 63 ? fn->n : 63), fn->p);
        int unk = !in_names(jinja_filters, nm);
        args fa = {0};
        for (int i = 1; i < a->n && fa.n < 8; ++i) { fa.v[fa.n] = a->v[i]; fa.kw[fa.n++] = a->kw[i]; }
        for (int i = 0; i < l->n; ++i) { tick(c, 1); lpush(c, o, apply_filter(r, nm, unk, l->v[i], &fa)); }
        return vgen(o, "generator");
    }
    jfail(c, ZT_EUNSUPPORTED, "filter '%s'", f);
}

/* ---- operators */

static jstr *concat(rctx *r, jstr *a, jstr *b) {
    sbuf s = {0};
    sb_put(&r->c, &s, a);
    sb_put(&r->c, &s, b);
    return sb_str(&r->c, &s);
}

static jv arith(rctx *r, int op, jv a, jv b) {
    jctx *c = &r->c;
    if (a.t == V_UNDEF) undef_fail(r, a, afmt(c, "'%s'", opname[op]));
    if (b.t == V_UNDEF) undef_fail(r, b, afmt(c, "'%s'", opname[op]));
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) {
        if (a.s->markup || b.s->markup) {   /* Markup + str escapes the str */
            jstr *s = concat(r, html_escape(r, a.s), html_escape(r, b.s));
            s->markup = 1;
            return vstr(s);
        }
        return vstr(concat(r, a.s, b.s));
    }
    if (op == OP_ADD && a.t == V_LIST && b.t == V_LIST && a.l->kind == b.l->kind &&
        (a.l->kind == K_LIST || a.l->kind == K_TUPLE)) {
        if (a.l->n > INT_MAX / 2 - b.l->n) jfail(c, ZT_EDATA, "a list too long");
        jlist *l = mklist(c, a.l->n + b.l->n);
        tick(c, (a.l->n + b.l->n) / 16);
        for (int i = 0; i < a.l->n; ++i) lpush(c, l, a.l->v[i]);
        for (int i = 0; i < b.l->n; ++i) lpush(c, l, b.l->v[i]);
        return vlistk(l, a.l->kind);
    }
    if (op == OP_MUL && (((a.t == V_STR || a.t == V_LIST) && (b.t == V_INT || b.t == V_BOOL)) ||
                         ((b.t == V_STR || b.t == V_LIST) && (a.t == V_INT || a.t == V_BOOL)))) {
        jv s = a.t == V_STR || a.t == V_LIST ? a : b;
        long long k = ival(a.t == V_STR || a.t == V_LIST ? b : a);
        if (k < 0) k = 0;
        if (s.t == V_STR) {
            if (s.s->n && (unsigned long long)k > ZT_JINJA_MAX_OUTPUT / s.s->n)
                jfail(c, ZT_EDATA, "a string passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
            sbuf o = {0};
            sb_reserve(c, &o, s.s->n * (size_t)k);
            tick(c, (long long)(s.s->n * (size_t)k) >> 10);
            for (long long i = 0; i < k; ++i) sb_put(c, &o, s.s);
            jstr *res = sb_str(c, &o);
            res->markup = s.s->markup;
            return vstr(res);
        }
        if (s.l->kind != K_LIST && s.l->kind != K_TUPLE) goto bad;
        if (s.l->n && (unsigned long long)k > (ZT_JINJA_MAX_MEMORY / sizeof(jv)) / (unsigned long long)s.l->n)
            jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
        jlist *l = mklist(c, (int)(s.l->n * k));
        tick(c, s.l->n * k / 16);
        for (long long i = 0; i < k; ++i)
            for (int j = 0; j < s.l->n; ++j) lpush(c, l, s.l->v[j]);
        return vlistk(l, s.l->kind);
    }
    if (op == OP_MOD && a.t == V_STR) jfail(c, ZT_EUNSUPPORTED, "string formatting with %%");
    if (!isnum(a) || !isnum(b)) goto bad;
    if (a.t != V_FLOAT && b.t != V_FLOAT && op != OP_DIV) {
        long long x = ival(a), y = ival(b);
        switch (op) {
        case OP_ADD: return vint(iadd(r, x, y));
        case OP_SUB: return vint(isub(r, x, y));
        case OP_MUL: return vint(imul(r, x, y));
        case OP_FDIV:
            if (!y) jfail(c, ZT_EDATA, "integer division or modulo by zero");
            if (x == LLONG_MIN && y == -1) int_range(r, x, "//", y);
            return vint(pyfdiv(x, y));
        case OP_MOD:
            if (!y) jfail(c, ZT_EDATA, "integer modulo by zero");
            return vint(y == -1 ? 0 : pymod(x, y));
        case OP_POW:
            if (y >= 0) return vint(ipow(r, x, y));
            if (x == 0) jfail(c, ZT_EDATA, "0.0 cannot be raised to a negative power (Python's ZeroDivisionError)");
            return vfloat(float_pow(r, (double)x, (double)y));
        default: break;
        }
    }
    if (op == OP_DIV && a.t != V_FLOAT && b.t != V_FLOAT) {
        if (!ival(b)) jfail(c, ZT_EDATA, "division by zero");
        return vfloat(int_truediv(ival(a), ival(b)));
    }
    double x = fval(a), y = fval(b), q, m;
    switch (op) {
    case OP_ADD: return vfloat(x + y);
    case OP_SUB: return vfloat(x - y);
    case OP_MUL: return vfloat(x * y);
    case OP_DIV: if (y == 0) jfail(c, ZT_EDATA, "float division by zero"); return vfloat(x / y);
    case OP_FDIV:
        if (y == 0) jfail(c, ZT_EDATA, "float floor division by zero");
        float_divmod(x, y, &q, &m);
        return vfloat(q);
    case OP_MOD:
        if (y == 0) jfail(c, ZT_EDATA, "float modulo by zero");
        float_divmod(x, y, &q, &m);
        return vfloat(m);
    default: return vfloat(float_pow(r, x, y));
    }
bad:
    jfail(c, ZT_EDATA, "unsupported operand type(s) for %s: '%s' and '%s'", opname[op], pyname(a), pyname(b));
}

static int test_mod(rctx *r, jv x, jv y, long long want, const char *t) {
    if (x.t == V_UNDEF) undef_fail(r, x, afmt(&r->c, "test '%s'", t));
    jv m = arith(r, OP_MOD, x, y);
    return veq(r, m, vint(want), 0);
}

static int compare(rctx *r, int op, jv a, jv b) {
    switch (op) {
    case OP_EQ: return veq(r, a, b, 0);
    case OP_NE: return !veq(r, a, b, 0);
    case OP_IN: return contains(r, b, a);
    case OP_NOTIN: return !contains(r, b, a);
    default: return cmp_holds(op, vcmp(r, a, b, opname[op], 0));
    }
}

static jv eval(rctx *r, node *n, scope *sc) {
    jctx *c = &r->c;
    c->line = n->line;
    tick(c, 1);
    switch (n->k) {
    case E_CONST: return n->cst;
    case E_NAME: return lookup(r, sc, n->name);
    case E_ATTR: {
        jv x = eval(r, n->a, sc);
        c->line = n->line;
        return getattr_(r, x, n->name);
    }
    case E_ITEM: {
        jv x = eval(r, n->a, sc), k = eval(r, n->b, sc);
        c->line = n->line;
        return getitem(r, x, k);
    }
    case E_SLICE: {
        jv x = eval(r, n->a, sc);
        jv b = n->b ? eval(r, n->b, sc) : vnone(), e = n->c ? eval(r, n->c, sc) : vnone(),
           s = n->d ? eval(r, n->d, sc) : vnone();
        c->line = n->line;
        return do_slice(r, x, b, e, s, n->op);
    }
    case E_CALL: {
        jv f;
        if (n->a->k == E_ATTR) {
            jv x = eval(r, n->a->a, sc);
            c->line = n->line;
            f = getattr_(r, x, n->a->name);
        } else {
            f = eval(r, n->a, sc);
        }
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        return call_value(r, f, &a);
    }
    case E_FILTER: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        return apply_filter(r, n->name, n->op & 1, x, &a);
    }
    case E_TEST: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        int t = apply_test(r, n->name, (n->op & 2) != 0, x, &a);
        return vbool((n->op & 1) ? !t : t);
    }
    case E_BIN: {
        jv a = eval(r, n->a, sc), b = eval(r, n->b, sc);
        c->line = n->line;
        return arith(r, n->op, a, b);
    }
    case E_CMP: {
        jv a = eval(r, n->a, sc);
        for (int i = 0; i < n->nv; ++i) {
            jv b = eval(r, n->v[i], sc);
            c->line = n->line;
            if (!compare(r, n->ops[i], a, b)) return vbool(0);
            a = b;
        }
        return vbool(1);
    }
    case E_CAT: {   /* str() of each */
        sbuf b = {0};
        for (int i = 0; i < n->nv; ++i) {
            jv v = eval(r, n->v[i], sc);
            c->line = n->line;
            sb_put(c, &b, to_str(r, v));
        }
        return vstr(sb_str(c, &b));
    }
    case E_NOT: return vbool(!truthy(eval(r, n->a, sc)));
    case E_NEG: case E_POS: {
        jv x = eval(r, n->a, sc);
        c->line = n->line;
        if (x.t == V_INT) return n->k == E_NEG ? vint(ineg(r, x.i)) : x;
        if (x.t == V_FLOAT) { if (n->k == E_NEG) x.f = -x.f; return x; }
        if (x.t == V_BOOL) return vint(n->k == E_NEG ? -x.b : x.b);
        if (x.t == V_UNDEF) undef_fail(r, x, n->k == E_NEG ? "unary -" : "unary +");
        jfail(c, ZT_EDATA, "bad operand type for unary %c: '%s'", n->k == E_NEG ? '-' : '+', pyname(x));
    }
    case E_AND: { jv a = eval(r, n->a, sc); return truthy(a) ? eval(r, n->b, sc) : a; }
    case E_OR: { jv a = eval(r, n->a, sc); return truthy(a) ? a : eval(r, n->b, sc); }
    case E_COND:
        if (truthy(eval(r, n->b, sc))) return eval(r, n->a, sc);
        return n->c ? eval(r, n->c, sc) : vundefh("the inline if-expression evaluated to false and no else section was defined");
    case E_LIST: case E_TUPLE: {
        jlist *l = mklist(c, n->nv);
        for (int i = 0; i < n->nv; ++i) lpush(c, l, eval(r, n->v[i], sc));
        return vlistk(l, n->k == E_TUPLE ? K_TUPLE : K_LIST);
    }
    case E_DICT: {
        jv d = {.t = V_DICT};
        d.d = mkdict(c);
        for (int i = 0; i + 1 < n->nv; i += 2) {
            jv k = eval(r, n->v[i], sc);
            jv v = eval(r, n->v[i + 1], sc);
            c->line = n->line;
            if (k.t != V_STR) {
                if (k.t == V_UNDEF) undef_fail(r, k, "a dict key");
                jfail(c, ZT_EUNSUPPORTED, "dict literal with a %s key", tname(k.t));
            }
            dset(c, d.d, k.s, v);
        }
        return d;
    }
    default: jfail(c, ZT_EINTERNAL, "bad expression node %d", n->k);
    }
}

/* ---- statements */

static void emit(rctx *r, jstr *s) { sb_put(&r->c, &r->out, s); }

static void setvar(rctx *r, scope *sc, const char *name, jv v) {
    size_t n = strlen(name);
    int i = dfind(sc->vars, name, n);
    if (i >= 0) sc->vars->v[i] = v;   /* no new key (a loop's scope is reused) */
    else dset(&r->c, sc->vars, mkstr(&r->c, name, n), v);
}
/* a loop iteration's scope, emptied: its names unset (lookup passes them by) */
static void unset_all(jdict *d) {
    for (int i = 0; i < d->n; ++i) d->v[i].t = V_UNSET;
}

static void assign(rctx *r, scope *sc, node *n, jv v) {
    if (!n->name2) { setvar(r, sc, n->name, v); return; }
    jlist *l = items_of(r, v, "unpacking");
    if (l->n != 2)
        jfail(&r->c, ZT_EDATA, "%s values to unpack (expected 2, got %d)", l->n > 2 ? "too many" : "not enough", l->n);
    setvar(r, sc, n->name, l->v[0]);
    setvar(r, sc, n->name2, l->v[1]);
}

static jv loop_item(const jloop *lp, int i) {
    return lp->rg ? vint(range_at(lp->rg, i)) : lp->items->v[i];
}

static jv loop_attr(rctx *r, jloop *lp, const char *name, int *found) {
    int i = lp->i, n = lp->n;
    *found = 1;
    if (!strcmp(name, "index0")) return vint(i);
    if (!strcmp(name, "index")) return vint(i + 1);
    if (!strcmp(name, "revindex0")) return vint(n - 1 - i);
    if (!strcmp(name, "revindex")) return vint(n - i);
    if (!strcmp(name, "first")) return vbool(i == 0);
    if (!strcmp(name, "last")) return vbool(i == n - 1);
    if (!strcmp(name, "length")) return vint(n);
    if (!strcmp(name, "depth")) return vint(1);
    if (!strcmp(name, "depth0")) return vint(0);
    if (!strcmp(name, "previtem")) return i > 0 ? loop_item(lp, i - 1) : vundefh("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? loop_item(lp, i + 1) : vundefh("there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jv self = {.t = V_LOOP};
        self.lp = lp;
        return vmeth(r, self, name);
    }
    *found = 0;
    return vundef();
}

static void exec_body(rctx *r, node *s, scope *sc);

static void exec_for(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    jv it = eval(r, s->a, sc);
    c->line = s->line;
    /* a range is walked, not made into a list (unless filtered) */
    const jrange *rg = it.t == V_RANGE && !s->d ? it.rg : NULL;
    jlist *l = rg ? NULL : items_of(r, it, "for");
    /* the loop filter runs first (loop.length counts the kept items) */
    jlist *items = l;
    if (s->d) {
        items = mklist(c, l->n);
        scope fs = {sc, mkdict(c)};
        for (int i = 0; i < l->n; ++i) {
            tick(c, 1);
            unset_all(fs.vars);
            assign(r, &fs, s, l->v[i]);
            if (truthy(eval(r, s->d, &fs))) lpush(c, items, l->v[i]);
        }
    }
    int n = rg ? (int)rg->n : items->n;
    jloop *lp = aalloc(c, sizeof *lp);
    lp->items = items;
    lp->rg = rg;
    lp->n = n;
    jv loop = {.t = V_LOOP};
    loop.lp = lp;
    scope is = {sc, mkdict(c)};   /* one scope, emptied for each iteration */
    int completed = 0;            /* an iteration reached the end of the body (jinja2's else test) */
    for (int i = 0; i < n; ++i) {
        c->line = s->line;
        tick(c, 1);
        unset_all(is.vars);
        lp->i = i;
        setvar(r, &is, "loop", loop);
        assign(r, &is, s, loop_item(lp, i));
        exec_body(r, s->b, &is);
        if (!r->cont && !r->brk) completed = 1;
        r->cont = 0;
        if (r->brk) { r->brk = 0; break; }
    }
    /* jinja2 runs the else block unless an iteration got to the end of the body: when the loop had
     * no items, or each iteration ended in break or continue */
    if (!completed && s->c) {
        scope es = {sc, mkdict(c)};
        exec_body(r, s->c, &es);
    }
}

static void exec_body(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    for (; s && !r->brk && !r->cont; s = s->next) {
        c->line = s->line;
        tick(c, 1);
        switch (s->k) {
        case S_DATA: emit(r, s->cst.s); break;
        case S_OUT: {
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            emit(r, to_str(r, v));
            break;
        }
        case S_IF: {   /* if, its elifs (->d), the last one's else (->c) */
            node *x = s;
            for (;;) {
                c->line = x->line;
                if (truthy(eval(r, x->a, sc))) { exec_body(r, x->b, sc); break; }
                if (!x->d) { exec_body(r, x->c, sc); break; }
                x = x->d;
            }
            break;
        }
        case S_FOR: exec_for(r, s, sc); break;
        case S_SET: {
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            assign(r, sc, s, v);
            break;
        }
        case S_SETATTR: {
            jv ns = lookup(r, sc, s->name);
            c->line = s->line;
            if (ns.t != V_NS)
                jfail(c, ZT_EDATA, "set %s.%s: cannot assign attribute on non-namespace object (a %s)", s->name, s->name2,
                      tname(ns.t));
            if (s->name2[0] == '_')
                jfail(c, ZT_EDATA, "chat templates cannot store underscore-prefixed attributes on a namespace, "
                      "but got '%s' (transformers' SecurityError)", s->name2);
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            dset(c, ns.d, mkstr(c, s->name2, strlen(s->name2)), v);
            break;
        }
        case S_BREAK: r->brk = 1; break;
        case S_CONTINUE: r->cont = 1; break;
        case S_GEN: {   /* a call block: its own scope */
            scope gs = {sc, mkdict(c)};
            exec_body(r, s->b, &gs);
            break;
        }
        default: jfail(c, ZT_EINTERNAL, "bad statement node %d", s->k);
        }
    }
}

static jv from_json(rctx *r, const json_t *j, uint32_t mark, int depth) {
    jctx *c = &r->c;
    if (depth > 4096) jfail(c, ZT_EDATA, "a message nested deeper than 4096 levels");
    switch (json_typeof(j)) {
    case JSON_NULL: return vnone();
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    case JSON_INTEGER: return vint((long long)json_integer_value(j));
    case JSON_REAL: return vfloat(json_real_value(j));
    case JSON_STRING: {
        jstr *s = mkstr(c, json_string_value(j), json_string_length(j));
        if (mark) {
            s->mk = aalloc(c, (s->n ? s->n : 1) * sizeof(uint32_t));
            for (size_t i = 0; i < s->n; ++i) s->mk[i] = mark;
            if (!s->n) s->mk = NULL;
            s->tail = s->n ? 0 : mark;
        }
        return vstr(s);
    }
    case JSON_ARRAY: {
        if (json_array_size(j) > (size_t)INT_MAX / 2) jfail(c, ZT_EDATA, "a message list too long");
        jlist *l = mklist(c, (int)json_array_size(j));
        size_t i;
        const json_t *e;
        json_array_foreach((json_t *)j, i, e) lpush(c, l, from_json(r, e, 0, depth + 1));
        return vlist(l);
    }
    default: {
        jv d = {.t = V_DICT};
        d.d = mkdict(c);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)j, k, e) {
            dset(c, d.d, mkstr(c, k, strlen(k)), from_json(r, e, 0, depth + 1));
        }
        return d;
    }
    }
}

/* A message as transformers hands it to the template: keys whose value is
 * null dropped, and a reasoning (reasoning_content, thinking or reasoning,
 * the first present) copied to "thinking" (first) and "reasoning_content"
 * (chat_template_utils: _normalize_chat_messages, _alias_reasoning_fields).
 * mark: the content and reasoning strings of an assistant message. */
static int marked_key(const char *k) {
    return !strcmp(k, "content") || !strcmp(k, "reasoning_content") || !strcmp(k, "thinking") || !strcmp(k, "reasoning");
}
static jv message_value(rctx *r, const json_t *m, uint32_t mark) {
    jctx *c = &r->c;
    static const char *const rnames[] = {"reasoning_content", "thinking", "reasoning"};
    const json_t *reason = NULL;
    for (int i = 0; i < 3 && !reason; ++i) {
        const json_t *v = json_object_get(m, rnames[i]);
        if (v && !json_is_null(v)) reason = v;
    }
    jv d = {.t = V_DICT};
    d.d = mkdict(c);
    if (reason) dset(c, d.d, mkstr(c, "thinking", 8), from_json(r, reason, mark, 1));
    const char *k;
    const json_t *e;
    json_object_foreach((json_t *)m, k, e) {
        if (json_is_null(e)) continue;
        dset(c, d.d, mkstr(c, k, strlen(k)), from_json(r, e, marked_key(k) ? mark : 0, 1));
    }
    if (reason) dset(c, d.d, mkstr(c, "reasoning_content", 17), from_json(r, reason, mark, 1));
    return d;
}

int zt_jinja_render(const zt_jinja *j, const json_t *messages, const json_t *vars, zt_jinja_token_at token_at,
                    const void *tctx, zt_chat_text *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    arena ar = {0};
    rctx *r = calloc(1, sizeof *r);
    if (!r) return zt_fail(st, ZT_ENOMEM, "out of memory");
    r->c.ar = &ar;
    r->c.st = st;
    r->c.line = 0;
    r->out.out = 1;
    if (setjmp(r->c.jb)) {
        arena_free(&ar);
        free(r);
        zt_chat_text_free(out);
        return st && st->code ? st->code : ZT_EDATA;
    }
    jctx *c = &r->c;
    if (!json_is_array(messages)) jfail(c, ZT_EINVAL, "messages must be a list");
    size_t nm = json_array_size(messages);
    if (nm >= 0xffff) jfail(c, ZT_EUNSUPPORTED, "conversations of %zu messages (at most 65534)", nm);
    scope glob = {NULL, mkdict(c)};
    jlist *ml = mklist(c, (int)nm);
    for (size_t i = 0; i < nm; ++i) {
        const json_t *m = json_array_get(messages, i);
        if (!json_is_object(m)) jfail(c, ZT_EDATA, "message %zu is not an object", i);
        const json_t *role = json_object_get(m, "role");
        uint32_t mark = json_is_string(role) && !strcmp(json_string_value(role), "assistant") ? (uint32_t)(i + 1) : 0;
        lpush(c, ml, message_value(r, m, mark));
    }
    jv fn = {.t = V_FUNC};
    setvar(r, &glob, "messages", vlist(ml));
    setvar(r, &glob, "add_generation_prompt", vbool(0));
    setvar(r, &glob, "tools", vnone());
    setvar(r, &glob, "documents", vnone());
    fn.fn = F_RAISE; setvar(r, &glob, "raise_exception", fn);
    fn.fn = F_STRFTIME; setvar(r, &glob, "strftime_now", fn);
    fn.fn = F_NAMESPACE; setvar(r, &glob, "namespace", fn);
    fn.fn = F_DICT; setvar(r, &glob, "dict", fn);
    fn.fn = F_RANGE; setvar(r, &glob, "range", fn);
    if (vars) {
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)vars, k, e) setvar(r, &glob, k, from_json(r, e, 0, 1));
    }
    scope top = {&glob, mkdict(c)};
    exec_body(r, j->root, &top);
    /* the text */
    sbuf *o = &r->out;
    out->text = malloc(o->n + 1);
    if (!out->text) jfail(c, ZT_ENOMEM, "out of memory");
    memcpy(out->text, o->p ? o->p : "", o->n);
    out->text[o->n] = 0;
    out->len = out->cap = o->n;
    /* the spans: per assistant message, its first to last traced byte */
    size_t *lo = calloc(nm + 1, sizeof *lo), *hi = calloc(nm + 1, sizeof *hi);
    if (!lo || !hi) { free(lo); free(hi); jfail(c, ZT_ENOMEM, "out of memory"); }
    for (size_t i = 0; i <= nm; ++i) lo[i] = (size_t)-1;
    for (size_t i = 0; o->marked && o->mk && i < o->n; ++i) {
        uint32_t m = o->mk[i] & 0xffff, a = o->mk[i] >> 16;
        if (m && m <= nm) { if (lo[m] == (size_t)-1) lo[m] = i; hi[m] = i + 1; }
        if (a && a <= nm) { if (lo[a] == (size_t)-1 || i < lo[a]) lo[a] = i; if (i > hi[a]) hi[a] = i; }
    }
    if (o->tail && o->tail <= nm) { if (lo[o->tail] == (size_t)-1) lo[o->tail] = o->n; hi[o->tail] = o->n; }
    int nspan = 0;
    for (size_t i = 1; i <= nm; ++i) nspan += lo[i] != (size_t)-1;
    out->span = calloc((size_t)(nspan ? nspan : 1), sizeof *out->span);
    if (!out->span) { free(lo); free(hi); jfail(c, ZT_ENOMEM, "out of memory"); }
    for (size_t i = 1; i <= nm; ++i) {
        if (lo[i] == (size_t)-1) continue;
        size_t e = hi[i];
        if (token_at && e < o->n) e += token_at(tctx, o->p + e, o->n - e);
        out->span[out->nspan].begin = lo[i];
        out->span[out->nspan].end = e;
        out->span[out->nspan].turn = (int)(i - 1);
        out->nspan++;
    }
    out->capspan = nspan;
    free(lo);
    free(hi);
    arena_free(&ar);
    free(r);
    return ZT_OK;
}
