/* jinja.c -- a Jinja subset for chat templates (jinja.h, docs/sft.md).
 *
 * lexer (data / {{ }} / {% %} / {# #} with jinja2's whitespace rules under
 * trim_blocks + lstrip_blocks) -> recursive-descent parser to an AST ->
 * evaluator over values none/bool/int/float/string/list/dict/namespace.
 * Strings carry per-byte marks (the assistant message a byte came from) so
 * that the trained spans survive concatenation, slicing, strip and split.
 * Parse and render allocate from an arena freed at once; errors unwind with
 * longjmp to the entry point, which owns the arena. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "jinja.h"

/* ---------------------------------------------------------------- arena, errors */

typedef struct ablock { struct ablock *next; size_t used, cap; _Alignas(16) unsigned char data[]; } ablock;
typedef struct arena { ablock *head; } arena;

typedef struct jctx {
    arena *ar;
    zt_status *st;
    jmp_buf jb;
    int line;             /* of the construct being evaluated */
} jctx;

static void jfail(jctx *c, int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
static void jfail(jctx *c, int code, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_fail(c->st, code, "chat template line %d: %s", c->line, msg);
    longjmp(c->jb, 1);
}

static void *aalloc(jctx *c, size_t n) {
    n = (n + 15) & ~(size_t)15;
    ablock *b = c->ar->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof(ablock) + cap);
        if (!b) { zt_fail(c->st, ZT_ENOMEM, "out of memory rendering a chat template"); longjmp(c->jb, 1); }
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

/* ---------------------------------------------------------------- values */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC };
enum { F_RAISE, F_STRFTIME, F_NAMESPACE, F_DICT, F_RANGE };

/* mark of a byte: low 16 bits the assistant message (index + 1) it came
 * from, high 16 bits a message whose (empty) text sat right before it */
typedef struct jstr { const char *p; size_t n; uint32_t *mk; uint32_t tail; } jstr;
typedef struct jv {
    int t;
    union { int b; long long i; double f; jstr *s; struct jlist *l; struct jdict *d; int fn; };
} jv;
typedef struct jlist { int n, cap; jv *v; } jlist;
typedef struct jdict { int n, cap; jstr **k; jv *v; } jdict;

static const char *tname(int t) {
    static const char *const n[] = {"undefined", "none", "boolean", "integer", "float", "string", "list",
                                    "dict", "namespace", "function"};
    return n[t];
}

static jv vundef(void) { jv v = {.t = V_UNDEF}; return v; }
static jv vnone(void) { jv v = {.t = V_NONE}; return v; }
static jv vbool(int b) { jv v = {.t = V_BOOL}; v.b = !!b; return v; }
static jv vint(long long i) { jv v = {.t = V_INT}; v.i = i; return v; }

static jstr *mkstr(jctx *c, const char *p, size_t n) {
    jstr *s = aalloc(c, sizeof *s);
    s->p = adup(c, p, n);
    s->n = n;
    return s;
}
static jv vstr(jstr *s) { jv v = {.t = V_STR}; v.s = s; return v; }
static jv vcstr(jctx *c, const char *p) { return vstr(mkstr(c, p, strlen(p))); }

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

static jdict *mkdict(jctx *c) {
    jdict *d = aalloc(c, sizeof *d);
    d->cap = 8;
    d->k = aalloc(c, 8 * sizeof(jstr *));
    d->v = aalloc(c, 8 * sizeof(jv));
    return d;
}
static int dfind(const jdict *d, const char *k, size_t n) {
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
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
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

/* code point count; *off (optional, n+1 entries) the byte offset of each */
static size_t u8count(jctx *c, const jstr *s, size_t **off) {
    size_t k = 0, len;
    for (size_t i = 0; i < s->n; i += len, ++k) u8at(s->p + i, s->n - i, &len);
    if (off) {
        *off = aalloc(c, (k + 1) * sizeof(size_t));
        size_t j = 0;
        for (size_t i = 0; i < s->n; i += len) { (*off)[j++] = i; u8at(s->p + i, s->n - i, &len); }
        (*off)[k] = s->n;
    }
    return k;
}

/* ---------------------------------------------------------------- marked strings */

static uint32_t mark_of(const jstr *s, size_t i) { return s->mk ? s->mk[i] : 0; }

/* s[b, e) keeping marks; an empty result keeps the message of its position */
static jstr *substr(jctx *c, const jstr *s, size_t b, size_t e) {
    jstr *r = aalloc(c, sizeof *r);
    r->p = s->p + b;
    r->n = e - b;
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

typedef struct sbuf { char *p; uint32_t *mk; size_t n, cap; uint32_t tail; int marked; } sbuf;

static void sb_put(jctx *c, sbuf *b, const jstr *s) {
    if (s->n == 0) {
        if (s->tail) { b->tail = s->tail; b->marked = 1; }
        return;
    }
    if (b->n + s->n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + s->n) cap *= 2;
        char *np = aalloc(c, cap + 1);
        uint32_t *nm = aalloc(c, cap * sizeof(uint32_t));
        if (b->n) { memcpy(np, b->p, b->n); memcpy(nm, b->mk, b->n * sizeof(uint32_t)); }
        b->p = np;
        b->mk = nm;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s->p, s->n);
    if (s->mk) { memcpy(b->mk + b->n, s->mk, s->n * sizeof(uint32_t)); b->marked = 1; }
    if (b->tail && !(b->mk[b->n] >> 16)) { b->mk[b->n] |= b->tail << 16; }
    b->tail = 0;
    b->n += s->n;
    if (s->tail) { b->tail = s->tail; b->marked = 1; }
}
static void sb_raw(jctx *c, sbuf *b, const char *p, size_t n) {
    jstr t = {p, n, NULL, 0};
    sb_put(c, b, &t);
}
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
typedef struct lexer { jctx *c; tok *t; int n, cap; } lexer;

static void tpush(lexer *L, int k, int line, const char *p, size_t n) {
    if (L->n == L->cap) {
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

static int lineof(const char *src, const char *p) {
    int l = 1;
    for (const char *q = src; q < p; ++q) l += *q == '\n';
    return l;
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
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && p[i] >= '0' && p[i] <= '7') { cp = cp * 8 + (uint32_t)(p[i] - '0'); ++i; ++d; }
                --i;
                hex = -1;
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
            if (cp < 0x80) o[k++] = (char)cp;
            else if (cp < 0x800) { o[k++] = (char)(0xc0 | (cp >> 6)); o[k++] = (char)(0x80 | (cp & 0x3f)); }
            else if (cp < 0x10000) {
                o[k++] = (char)(0xe0 | (cp >> 12)); o[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                o[k++] = (char)(0x80 | (cp & 0x3f));
            } else {
                o[k++] = (char)(0xf0 | (cp >> 18)); o[k++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                o[k++] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[k++] = (char)(0x80 | (cp & 0x3f));
            }
        }
    }
    jstr *s = aalloc(c, sizeof *s);
    s->p = o;
    s->n = k;
    return s;
}

static void lex(lexer *L, const char *src, size_t n) {
    jctx *c = L->c;
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        /* the next tag */
        const char *q = NULL;
        for (size_t i = pos; i + 1 < n; ++i)
            if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) { q = src + i; break; }
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
        if (te > pos) tpush(L, T_DATA, lineof(src, src + pos), src + pos, te - pos);
        if (!q) break;
        int line = lineof(src, q);
        c->line = line;
        size_t p = tp + 2 + (ctrl == '-' || ctrl == '+');
        if (kind == '#') {
            size_t e = p;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}')) ++e;
            if (e + 1 >= n) jfail(c, ZT_EDATA, "missing end of comment tag");
            size_t after = e + 2;
            if (e > p && src[e - 1] == '-') { for (size_t w; after < n && (w = ws_at(src + after, n - after));) after += w; }
            else if (!(e > p && src[e - 1] == '+') && after < n && src[after] == '\n') ++after;
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
            line = lineof(src, s);
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
                tpush(L, T_NAME, line, s, k);
                p += k;
            } else if (s[0] >= '0' && s[0] <= '9') {
                size_t k = 0;
                while (k < left && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_')) ++k;
                int fl = 0;
                if (k + 1 < left && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
                    fl = 1;
                    ++k;
                    while (k < left && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_')) ++k;
                }
                if (k < left && (s[k] == 'e' || s[k] == 'E')) jfail(c, ZT_EUNSUPPORTED, "number literals with an exponent");
                char buf[64];
                size_t b = 0;
                for (size_t i = 0; i < k && b < 63; ++i) if (s[i] != '_') buf[b++] = s[i];
                buf[b] = 0;
                tpush(L, fl ? T_FLOAT : T_INT, line, s, k);
                if (fl) L->t[L->n - 1].f = strtod(buf, NULL);
                else {
                    errno = 0;
                    L->t[L->n - 1].i = strtoll(buf, NULL, 10);
                    if (errno) jfail(c, ZT_EUNSUPPORTED, "integer literal %s beyond 64 bits", buf);
                }
                p += k;
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
                    if (!strchr("+-*/%~<>()[]{},.:|=", s[0]))
                        jfail(c, ZT_EDATA, "unexpected character '%c'", s[0]);
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
    tpush(L, T_EOF, lineof(src, src + n), src + n, 0);
}

/* ---------------------------------------------------------------- AST */

enum {
    /* statements */
    S_DATA, S_OUT, S_IF, S_FOR, S_SET, S_SETATTR, S_BREAK, S_CONTINUE, S_GEN,
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NOT, E_NEG, E_POS, E_AND, E_OR,
    E_COND, E_LIST, E_DICT
};

typedef struct node {
    int k, line;
    struct node *a, *b, *c, *d;    /* children (meaning per kind) */
    struct node **v;               /* args / elements */
    const char **kw;               /* keyword of each arg (NULL positional) */
    int nv;
    const char *name, *name2;      /* names (NUL-terminated) */
    int op;                        /* E_BIN operator */
    jv cst;                        /* E_CONST, S_DATA */
    struct node *next;             /* statement lists */
} node;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE,
       OP_IN, OP_NOTIN };

typedef struct parser { jctx *c; tok *t; int i, depth; } parser;

/* nesting bound (parenthesis, unary chains, blocks): deeper templates are
 * refused instead of exhausting the stack (jinja2 hits Python's limit) */
#define MAX_DEPTH 200
static void enter(parser *P);
static void leave(parser *P) { P->depth--; }

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
    if (++P->depth > MAX_DEPTH) {
        P->c->line = P->t[P->i].line;
        jfail(P->c, ZT_EUNSUPPORTED, "nesting deeper than %d levels", MAX_DEPTH);
    }
}

static const char *take_name(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_NAME) jfail(P->c, ZT_EDATA, "expected a name, found %s", tokdesc(P));
    tok *t = &P->t[P->i++];
    return adup(P->c, t->p, t->n);
}
static node *mknode(parser *P, int k) {
    node *n = aalloc(P->c, sizeof *n);
    n->k = k;
    n->line = cur(P)->line;
    return n;
}
static void addarg(parser *P, node *n, node *a, const char *kw) {
    node **v = aalloc(P->c, (size_t)(n->nv + 1) * sizeof *v);
    const char **k = aalloc(P->c, (size_t)(n->nv + 1) * sizeof *k);
    if (n->nv) { memcpy(v, n->v, (size_t)n->nv * sizeof *v); memcpy(k, n->kw, (size_t)n->nv * sizeof *k); }
    v[n->nv] = a;
    k[n->nv] = kw;
    n->v = v;
    n->kw = k;
    n->nv++;
}

static node *p_expr(parser *P);
static node *p_or(parser *P);
static node *p_unary(parser *P);

static void p_args(parser *P, node *n) {   /* after '(' up to and including ')' */
    while (!is_op(P, ")")) {
        const char *kw = NULL;
        if (cur(P)->k == T_NAME && P->t[P->i + 1].k == T_OP && P->t[P->i + 1].n == 1 && P->t[P->i + 1].p[0] == '=') {
            kw = take_name(P);
            P->i++;
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
            sb_put(P->c, &b, unescape(P->c, cur(P)->p, cur(P)->n));
            P->i++;
        }
        n->cst = vstr(sb_str(P->c, &b));
    } else if (t->k == T_INT) {
        n = mknode(P, E_CONST);
        n->cst = vint(t->i);
        P->i++;
    } else if (t->k == T_FLOAT) {
        n = mknode(P, E_CONST);
        n->cst.t = V_FLOAT;
        n->cst.f = t->f;
        P->i++;
    } else if (is_op(P, "(")) {
        P->i++;
        if (is_op(P, ")")) jfail(P->c, ZT_EUNSUPPORTED, "tuples (empty '()')");
        n = p_expr(P);
        if (is_op(P, ",")) {    /* a tuple: a list for our purposes */
            node *l = mknode(P, E_LIST);
            addarg(P, l, n, NULL);
            while (is_op(P, ",")) {
                P->i++;
                if (is_op(P, ")")) break;
                addarg(P, l, p_expr(P), NULL);
            }
            n = l;
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
            n = a;
        } else if (is_op(P, "[")) {
            P->i++;
            node *s = NULL, *parts[3] = {NULL, NULL, NULL};
            int ncolon = 0;
            for (;;) {
                if (is_op(P, ":")) { if (++ncolon > 2) jfail(P->c, ZT_EDATA, "bad slice"); P->i++; continue; }
                if (is_op(P, "]")) break;
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
            }
            n = s;
        } else if (is_op(P, "(")) {
            P->i++;
            node *call = mknode(P, E_CALL);
            call->a = n;
            p_args(P, call);
            n = call;
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
            while (is_op(P, ".")) {   /* dotted filter names are not supported */
                jfail(P->c, ZT_EUNSUPPORTED, "dotted filter name '%s.'", nm);
            }
            f->name = nm;
            if (is_op(P, "(")) { P->i++; p_args(P, f); }
            n = f;
        } else if (is_name(P, "is")) {
            P->i++;
            node *t = mknode(P, E_TEST);
            t->a = n;
            int neg = 0;
            if (is_name(P, "not")) { neg = 1; P->i++; }
            t->name = take_name(P);
            t->op = neg;
            if (is_op(P, "(")) { P->i++; p_args(P, t); }
            else {
                tok *k = cur(P);
                if ((k->k == T_NAME || k->k == T_STR || k->k == T_INT || k->k == T_FLOAT || is_op(P, "[") ||
                     is_op(P, "{")) && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                    !is_name(P, "if") && !is_name(P, "is") && !is_name(P, "in") && !is_name(P, "not"))
                    addarg(P, t, p_primary(P), NULL);
            }
            n = t;
        } else {
            return n;
        }
    }
}

/* jinja2's parse_unary: a sign applies to the unfiltered operand, the
 * filters and tests that follow to the signed value */
static node *p_unary_(parser *P, int with_filter) {
    node *n;
    enter(P);
    if (is_op(P, "-") || is_op(P, "+")) {
        n = mknode(P, is_op(P, "-") ? E_NEG : E_POS);
        P->i++;
        n->a = p_unary_(P, 0);
    } else {
        n = p_primary(P);
    }
    n = with_filter ? p_filtertest(P, n) : n;
    leave(P);
    return n;
}
static node *p_unary(parser *P) { return p_unary_(P, 1); }

static node *mkbin(parser *P, int op, node *a, node *b) {
    node *n = mknode(P, E_BIN);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
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
static node *p_concat(parser *P) {
    node *n = p_math2(P);
    while (is_op(P, "~")) { P->i++; n = mkbin(P, OP_CAT, n, p_math2(P)); }
    return n;
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
static node *p_compare(parser *P) {
    node *n = p_math1(P);
    for (;;) {
        int op = is_op(P, "==") ? OP_EQ : is_op(P, "!=") ? OP_NE : is_op(P, "<") ? OP_LT : is_op(P, ">") ? OP_GT :
                 is_op(P, "<=") ? OP_LE : is_op(P, ">=") ? OP_GE : is_name(P, "in") ? OP_IN :
                 (is_name(P, "not") && is_name_at(P, 1, "in")) ? OP_NOTIN : -1;
        if (op < 0) return n;
        P->i += op == OP_NOTIN ? 2 : 1;
        n = mkbin(P, op, n, p_math1(P));
    }
}
static node *p_not(parser *P) {
    if (is_name(P, "not")) {
        node *n = mknode(P, E_NOT);
        P->i++;
        enter(P);
        n->a = p_not(P);
        leave(P);
        return n;
    }
    return p_compare(P);
}
static node *p_and(parser *P) {
    node *n = p_not(P);
    while (is_name(P, "and")) {
        node *a = mknode(P, E_AND);
        P->i++;
        a->a = n;
        a->b = p_not(P);
        n = a;
    }
    return n;
}
static node *p_or(parser *P) {
    node *n = p_and(P);
    while (is_name(P, "or")) {
        node *a = mknode(P, E_OR);
        P->i++;
        a->a = n;
        a->b = p_and(P);
        n = a;
    }
    return n;
}
static node *p_expr(parser *P) {
    enter(P);
    node *n = p_or(P);
    while (is_name(P, "if")) {
        node *c = mknode(P, E_COND);
        P->i++;
        c->a = n;               /* value when true */
        c->b = p_or(P);         /* condition */
        if (is_name(P, "else")) { P->i++; c->c = p_expr(P); }
        n = c;
    }
    leave(P);
    return n;
}

static void end_block(parser *P) {
    P->c->line = cur(P)->line;
    if (cur(P)->k != T_BEND) jfail(P->c, ZT_EDATA, "expected end of tag, found %s", tokdesc(P));
    P->i++;
}

/* statements until one of the block names in `ends` (NULL-terminated);
 * *which: its index (the name token is consumed, its arguments are not) */
static node *p_body(parser *P, const char *const *ends, int *which) {
    node head = {0}, *tail = &head;
    enter(P);
    for (;;) {
        tok *t = cur(P);
        P->c->line = t->line;
        node *s = NULL;
        if (t->k == T_EOF) {
            if (!ends) { *which = -1; leave(P); return head.next; }
            jfail(P->c, ZT_EDATA, "unexpected end of template (missing {%% %s %%})", ends[0]);
        } else if (t->k == T_DATA) {
            s = mknode(P, S_DATA);
            s->cst = vstr(mkstr(P->c, t->p, t->n));
            P->i++;
        } else if (t->k == T_VBEGIN) {
            P->i++;
            s = mknode(P, S_OUT);
            s->a = p_expr(P);
            P->c->line = cur(P)->line;
            if (cur(P)->k != T_VEND) jfail(P->c, ZT_EDATA, "expected '}}', found %s", tokdesc(P));
            P->i++;
        } else if (t->k == T_BBEGIN) {
            P->i++;
            P->c->line = cur(P)->line;
            for (int e = 0; ends && ends[e]; ++e)
                if (is_name(P, ends[e])) { P->i++; *which = e; leave(P); return head.next; }
            if (is_name(P, "if")) {
                P->i++;
                s = mknode(P, S_IF);
                s->a = p_expr(P);
                end_block(P);
                static const char *const e_if[] = {"endif", "elif", "else", NULL};
                int w;
                s->b = p_body(P, e_if, &w);
                node *last = s;
                int nelif = 0;
                while (w == 1) {    /* elif: a nested if in the else branch (nesting when run) */
                    enter(P);
                    nelif++;
                    node *el = mknode(P, S_IF);
                    el->a = p_expr(P);
                    end_block(P);
                    el->b = p_body(P, e_if, &w);
                    last->c = el;
                    last = el;
                }
                if (w == 2) {
                    end_block(P);
                    static const char *const e_endif[] = {"endif", NULL};
                    last->c = p_body(P, e_endif, &w);
                }
                P->depth -= nelif;
                end_block(P);
            } else if (is_name(P, "for")) {
                P->i++;
                s = mknode(P, S_FOR);
                s->name = take_name(P);
                if (is_op(P, ",")) { P->i++; s->name2 = take_name(P); }
                if (is_op(P, ",")) jfail(P->c, ZT_EUNSUPPORTED, "for loops unpacking more than two names");
                if (!is_name(P, "in")) jfail(P->c, ZT_EDATA, "expected 'in', found %s", tokdesc(P));
                P->i++;
                s->a = p_or(P);     /* the iterable; a trailing 'if' filters */
                if (is_name(P, "if")) { P->i++; s->d = p_expr(P); }
                if (is_name(P, "recursive")) jfail(P->c, ZT_EUNSUPPORTED, "recursive for loops");
                end_block(P);
                static const char *const e_for[] = {"endfor", "else", NULL};
                int w;
                s->b = p_body(P, e_for, &w);
                if (w == 1) {
                    end_block(P);
                    static const char *const e_endfor[] = {"endfor", NULL};
                    s->c = p_body(P, e_endfor, &w);
                }
                end_block(P);
            } else if (is_name(P, "set")) {
                P->i++;
                const char *nm = take_name(P);
                if (is_op(P, ".")) {
                    P->i++;
                    s = mknode(P, S_SETATTR);
                    s->name = nm;
                    s->name2 = take_name(P);
                } else {
                    s = mknode(P, S_SET);
                    s->name = nm;
                    if (is_op(P, ",")) { P->i++; s->name2 = take_name(P); }
                    if (is_op(P, ",")) jfail(P->c, ZT_EUNSUPPORTED, "set unpacking more than two names");
                }
                if (!is_op(P, "=")) jfail(P->c, ZT_EUNSUPPORTED, "block set ({%% set %s %%}...{%% endset %%})", nm);
                P->i++;
                s->a = p_expr(P);
                end_block(P);
            } else if (is_name(P, "break") || is_name(P, "continue")) {
                s = mknode(P, is_name(P, "break") ? S_BREAK : S_CONTINUE);
                P->i++;
                end_block(P);
            } else if (is_name(P, "generation")) {
                P->i++;
                end_block(P);
                s = mknode(P, S_GEN);
                static const char *const e_gen[] = {"endgeneration", NULL};
                int w;
                s->b = p_body(P, e_gen, &w);
                end_block(P);
            } else if (cur(P)->k == T_NAME) {
                jfail(P->c, ZT_EUNSUPPORTED, "statement '{%% %.*s %%}'", (int)cur(P)->n, cur(P)->p);
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

typedef struct rctx {
    jctx c;
    sbuf out;
    int brk, cont;        /* loop control pending */
} rctx;

static jv eval(rctx *r, node *n, scope *sc);

static int truthy(jv v) {
    switch (v.t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0.0;
    case V_STR: return v.s->n != 0;
    case V_LIST: return v.l->n != 0;
    case V_DICT: return v.d->n != 0;
    default: return 1;
    }
}

static jv lookup(scope *sc, const char *name) {
    size_t n = strlen(name);
    for (; sc; sc = sc->up) {
        int i = dfind(sc->vars, name, n);
        if (i >= 0) return sc->vars->v[i];
    }
    return vundef();
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
    else {
        double a = fabs(f);
        ex = a >= 1 ? (int)floor(log10(a)) : 0;
    }
    if (e && ex >= -4 && ex < 16) {       /* Python repr: positional below 1e16 */
        for (int p = 0; p <= 17; ++p) {
            snprintf(buf, n, "%.*f", p, f);
            if (strtod(buf, NULL) == f) break;
        }
    }
    if (!strchr(buf, 'e') && !strchr(buf, '.')) strncat(buf, ".0", n - strlen(buf) - 1);
}

static void repr_into(rctx *r, sbuf *b, jv v, int top);

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
    case V_LIST: case V_DICT: {
        sbuf b = {0};
        repr_into(r, &b, v, 1);
        return sb_str(c, &b);
    }
    default: jfail(c, ZT_EUNSUPPORTED, "printing a %s", tname(v.t));
    }
    return NULL;
}

static void repr_into(rctx *r, sbuf *b, jv v, int top) {
    jctx *c = &r->c;
    (void)top;
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
        sb_raw(c, b, "[", 1);
        for (int i = 0; i < v.l->n; ++i) {
            if (i) sb_raw(c, b, ", ", 2);
            repr_into(r, b, v.l->v[i], 0);
        }
        sb_raw(c, b, "]", 1);
    } else if (v.t == V_DICT) {
        sb_raw(c, b, "{", 1);
        for (int i = 0; i < v.d->n; ++i) {
            if (i) sb_raw(c, b, ", ", 2);
            repr_into(r, b, vstr(v.d->k[i]), 0);
            sb_raw(c, b, ": ", 2);
            repr_into(r, b, v.d->v[i], 0);
        }
        sb_raw(c, b, "}", 1);
    } else if (v.t == V_UNDEF) {
        jfail(c, ZT_EUNSUPPORTED, "printing a list or dict holding an undefined value");
    } else {
        jstr *s = to_str(r, v);
        sb_raw(c, b, s->p, s->n);
    }
}

/* json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort) */
static void json_into(rctx *r, sbuf *b, jv v, int indent, int sort, int depth) {
    jctx *c = &r->c;
    char buf[64];
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
    case V_STR:
        sb_raw(c, b, "\"", 1);
        for (size_t i = 0; i < v.s->n; ++i) {
            unsigned char ch = (unsigned char)v.s->p[i];
            if (ch == '"') sb_raw(c, b, "\\\"", 2);
            else if (ch == '\\') sb_raw(c, b, "\\\\", 2);
            else if (ch == '\n') sb_raw(c, b, "\\n", 2);
            else if (ch == '\r') sb_raw(c, b, "\\r", 2);
            else if (ch == '\t') sb_raw(c, b, "\\t", 2);
            else if (ch == '\b') sb_raw(c, b, "\\b", 2);
            else if (ch == '\f') sb_raw(c, b, "\\f", 2);
            else if (ch < 0x20) { snprintf(buf, sizeof buf, "\\u%04x", ch); sb_raw(c, b, buf, 6); }
            else sb_raw(c, b, (char *)&ch, 1);
        }
        sb_raw(c, b, "\"", 1);
        return;
    case V_LIST: case V_DICT: {
        int isl = v.t == V_LIST, n = isl ? v.l->n : v.d->n;
        sb_raw(c, b, isl ? "[" : "{", 1);
        if (n == 0) { sb_raw(c, b, isl ? "]" : "}", 1); return; }
        int *ord = aalloc(c, (size_t)n * sizeof(int));
        for (int i = 0; i < n; ++i) ord[i] = i;
        if (!isl && sort)   /* insertion sort by key bytes (= code point order) */
            for (int i = 1; i < n; ++i)
                for (int k = i; k > 0; --k) {
                    jstr *x = v.d->k[ord[k - 1]], *y = v.d->k[ord[k]];
                    size_t m = x->n < y->n ? x->n : y->n;
                    int cmp = memcmp(x->p, y->p, m);
                    if (cmp < 0 || (cmp == 0 && x->n <= y->n)) break;
                    int t = ord[k]; ord[k] = ord[k - 1]; ord[k - 1] = t;
                }
        for (int i = 0; i < n; ++i) {
            if (i) sb_raw(c, b, indent >= 0 ? "," : ", ", indent >= 0 ? 1 : 2);
            if (indent >= 0) {
                sb_raw(c, b, "\n", 1);
                for (int s = 0; s < indent * (depth + 1); ++s) sb_raw(c, b, " ", 1);
            }
            if (!isl) {
                json_into(r, b, vstr(v.d->k[ord[i]]), indent, sort, depth + 1);
                sb_raw(c, b, ": ", 2);
            }
            json_into(r, b, isl ? v.l->v[i] : v.d->v[ord[i]], indent, sort, depth + 1);
        }
        if (indent >= 0) {
            sb_raw(c, b, "\n", 1);
            for (int s = 0; s < indent * depth; ++s) sb_raw(c, b, " ", 1);
        }
        sb_raw(c, b, isl ? "]" : "}", 1);
        return;
    }
    default: jfail(c, ZT_EDATA, "tojson: object of type %s is not JSON serializable", tname(v.t));
    }
}

static int veq(jv a, jv b) {
    if ((a.t == V_INT || a.t == V_FLOAT || a.t == V_BOOL) && (b.t == V_INT || b.t == V_FLOAT || b.t == V_BOOL)) {
        double x = a.t == V_FLOAT ? a.f : a.t == V_INT ? (double)a.i : a.b;
        double y = b.t == V_FLOAT ? b.f : b.t == V_INT ? (double)b.i : b.b;
        if (a.t != V_FLOAT && b.t != V_FLOAT)
            return (a.t == V_INT ? a.i : a.b) == (b.t == V_INT ? b.i : b.b);
        return x == y;
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
    case V_LIST:
        if (a.l->n != b.l->n) return 0;
        for (int i = 0; i < a.l->n; ++i) if (!veq(a.l->v[i], b.l->v[i])) return 0;
        return 1;
    case V_DICT:
        if (a.d->n != b.d->n) return 0;
        for (int i = 0; i < a.d->n; ++i) {
            int k = dfind(b.d, a.d->k[i]->p, a.d->k[i]->n);
            if (k < 0 || !veq(a.d->v[i], b.d->v[k])) return 0;
        }
        return 1;
    default: return a.d == b.d;
    }
}

static int vcmp(rctx *r, jv a, jv b, const char *op) {
    int na = a.t == V_INT || a.t == V_FLOAT || a.t == V_BOOL, nb = b.t == V_INT || b.t == V_FLOAT || b.t == V_BOOL;
    if (na && nb) {
        double x = a.t == V_FLOAT ? a.f : a.t == V_INT ? (double)a.i : a.b;
        double y = b.t == V_FLOAT ? b.f : b.t == V_INT ? (double)b.i : b.b;
        if (a.t != V_FLOAT && b.t != V_FLOAT) {
            long long p = a.t == V_INT ? a.i : a.b, q = b.t == V_INT ? b.i : b.b;
            return p < q ? -1 : p > q;
        }
        return x < y ? -1 : x > y;
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.s->n < b.s->n ? a.s->n : b.s->n;
        int cmp = memcmp(a.s->p, b.s->p, m);
        return cmp ? (cmp < 0 ? -1 : 1) : (a.s->n < b.s->n ? -1 : a.s->n > b.s->n);
    }
    jfail(&r->c, ZT_EDATA, "'%s' not supported between %s and %s", op, tname(a.t), tname(b.t));
    return 0;
}

static int contains(rctx *r, jv hay, jv x) {
    if (hay.t == V_STR) {
        if (x.t != V_STR) jfail(&r->c, ZT_EDATA, "'in <string>' requires a string, not %s", tname(x.t));
        if (x.s->n == 0) return 1;
        for (size_t i = 0; i + x.s->n <= hay.s->n; ++i)
            if (memcmp(hay.s->p + i, x.s->p, x.s->n) == 0) return 1;
        return 0;
    }
    if (hay.t == V_LIST) {
        for (int i = 0; i < hay.l->n; ++i) if (veq(hay.l->v[i], x)) return 1;
        return 0;
    }
    if (hay.t == V_DICT || hay.t == V_NS) {
        if (x.t != V_STR) return 0;
        return dfind(hay.d, x.s->p, x.s->n) >= 0;
    }
    if (hay.t == V_UNDEF) return 0;
    jfail(&r->c, ZT_EDATA, "'in' on a %s", tname(hay.t));
    return 0;
}

static jstr *concat(rctx *r, jstr *a, jstr *b) {
    sbuf s = {0};
    sb_put(&r->c, &s, a);
    sb_put(&r->c, &s, b);
    return sb_str(&r->c, &s);
}

static long long pymod(long long a, long long b) { long long m = a % b; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }
static long long pyfdiv(long long a, long long b) { long long q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }

static jv binop(rctx *r, int op, jv a, jv b) {
    jctx *c = &r->c;
    static const char *const opn[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=",
                                      "in", "not in"};
    switch (op) {
    case OP_EQ: return vbool(veq(a, b));
    case OP_NE: return vbool(!veq(a, b));
    case OP_LT: return vbool(vcmp(r, a, b, "<") < 0);
    case OP_GT: return vbool(vcmp(r, a, b, ">") > 0);
    case OP_LE: return vbool(vcmp(r, a, b, "<=") <= 0);
    case OP_GE: return vbool(vcmp(r, a, b, ">=") >= 0);
    case OP_IN: return vbool(contains(r, b, a));
    case OP_NOTIN: return vbool(!contains(r, b, a));
    case OP_CAT: return vstr(concat(r, to_str(r, a), to_str(r, b)));
    default: break;
    }
    if (a.t == V_UNDEF || b.t == V_UNDEF)
        jfail(c, ZT_EDATA, "an undefined value in '%s' (transformers raises UndefinedError)", opn[op]);
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) return vstr(concat(r, a.s, b.s));
    if (op == OP_ADD && a.t == V_LIST && b.t == V_LIST) {
        jlist *l = mklist(c, a.l->n + b.l->n);
        for (int i = 0; i < a.l->n; ++i) lpush(c, l, a.l->v[i]);
        for (int i = 0; i < b.l->n; ++i) lpush(c, l, b.l->v[i]);
        return vlist(l);
    }
    if (op == OP_MUL && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
        jstr *s = a.t == V_STR ? a.s : b.s;
        long long k = a.t == V_INT ? a.i : b.i;
        sbuf o = {0};
        for (long long i = 0; i < k; ++i) sb_put(c, &o, s);
        return vstr(sb_str(c, &o));
    }
    int na = a.t == V_INT || a.t == V_BOOL || a.t == V_FLOAT, nb = b.t == V_INT || b.t == V_BOOL || b.t == V_FLOAT;
    if (!na || !nb) jfail(c, ZT_EDATA, "unsupported operand types for %s: %s and %s", opn[op], tname(a.t), tname(b.t));
    if (a.t != V_FLOAT && b.t != V_FLOAT && op != OP_DIV) {
        long long x = a.t == V_INT ? a.i : a.b, y = b.t == V_INT ? b.i : b.b;
        switch (op) {
        case OP_ADD: return vint(x + y);
        case OP_SUB: return vint(x - y);
        case OP_MUL: return vint(x * y);
        case OP_FDIV: if (!y) jfail(c, ZT_EDATA, "integer division by zero"); return vint(pyfdiv(x, y));
        case OP_MOD: if (!y) jfail(c, ZT_EDATA, "integer modulo by zero"); return vint(pymod(x, y));
        case OP_POW: {
            if (y < 0) break;
            long long p = 1;
            for (long long i = 0; i < y; ++i) p *= x;
            return vint(p);
        }
        default: break;
        }
    }
    double x = a.t == V_FLOAT ? a.f : a.t == V_INT ? (double)a.i : a.b;
    double y = b.t == V_FLOAT ? b.f : b.t == V_INT ? (double)b.i : b.b;
    jv v = {.t = V_FLOAT};
    switch (op) {
    case OP_ADD: v.f = x + y; break;
    case OP_SUB: v.f = x - y; break;
    case OP_MUL: v.f = x * y; break;
    case OP_DIV: if (y == 0) jfail(c, ZT_EDATA, "division by zero"); v.f = x / y; break;
    case OP_FDIV: if (y == 0) jfail(c, ZT_EDATA, "division by zero"); v.f = floor(x / y); break;
    case OP_MOD: if (y == 0) jfail(c, ZT_EDATA, "modulo by zero"); v.f = fmod(x, y); if (v.f != 0 && ((v.f < 0) != (y < 0))) v.f += y; break;
    default: v.f = pow(x, y); break;
    }
    return v;
}

/* Python index/slice bounds on a sequence of n items */
static void slice_bounds(rctx *r, jv vs, jv ve, jv vt, long long n, long long *start, long long *stop, long long *step) {
    long long st = 1;
    if (vt.t == V_INT) st = vt.i;
    else if (vt.t != V_NONE && vt.t != V_UNDEF) jfail(&r->c, ZT_EDATA, "slice step must be an integer");
    if (st == 0) jfail(&r->c, ZT_EDATA, "slice step cannot be zero");
    long long lo = st < 0 ? -1 : 0, hi = st < 0 ? n - 1 : n;
    long long b = st < 0 ? hi : lo, e = st < 0 ? lo : hi;
    if (vs.t == V_INT) { b = vs.i < 0 ? vs.i + n : vs.i; if (b < lo) b = lo; if (b > hi) b = hi; }
    else if (vs.t != V_NONE && vs.t != V_UNDEF) jfail(&r->c, ZT_EDATA, "slice indices must be integers");
    if (ve.t == V_INT) { e = ve.i < 0 ? ve.i + n : ve.i; if (e < lo) e = lo; if (e > hi) e = hi; }
    else if (ve.t != V_NONE && ve.t != V_UNDEF) jfail(&r->c, ZT_EDATA, "slice indices must be integers");
    *start = b;
    *stop = e;
    *step = st;
}

static jv do_slice(rctx *r, jv x, jv vs, jv ve, jv vt) {
    jctx *c = &r->c;
    long long b, e, st;
    if (x.t == V_LIST) {
        slice_bounds(r, vs, ve, vt, x.l->n, &b, &e, &st);
        jlist *l = mklist(c, 4);
        for (long long i = b; st > 0 ? i < e : i > e; i += st) lpush(c, l, x.l->v[i]);
        return vlist(l);
    }
    if (x.t == V_STR) {
        size_t *off;
        long long n = (long long)u8count(c, x.s, &off);
        slice_bounds(r, vs, ve, vt, n, &b, &e, &st);
        if (st == 1) return vstr(substr(c, x.s, off[b], off[e > b ? e : b]));
        sbuf o = {0};
        for (long long i = b; st > 0 ? i < e : i > e; i += st)
            sb_put(c, &o, substr(c, x.s, off[i], off[i + 1]));
        return vstr(sb_str(c, &o));
    }
    jfail(c, ZT_EDATA, "slicing a %s", tname(x.t));
    return vundef();
}

static jv getitem(rctx *r, jv x, jv k) {
    jctx *c = &r->c;
    if (x.t == V_DICT || x.t == V_NS) {
        if (k.t != V_STR) return vundef();
        int i = dfind(x.d, k.s->p, k.s->n);
        return i >= 0 ? x.d->v[i] : vundef();
    }
    if ((x.t == V_LIST || x.t == V_STR) && (k.t == V_INT || k.t == V_BOOL)) {
        long long i = k.t == V_INT ? k.i : k.b;
        if (x.t == V_LIST) {
            if (i < 0) i += x.l->n;
            return i >= 0 && i < x.l->n ? x.l->v[i] : vundef();
        }
        size_t *off;
        long long n = (long long)u8count(c, x.s, &off);
        if (i < 0) i += n;
        return i >= 0 && i < n ? vstr(substr(c, x.s, off[i], off[i + 1])) : vundef();
    }
    if (x.t == V_UNDEF) jfail(c, ZT_EDATA, "subscript of an undefined value (transformers raises UndefinedError)");
    if (x.t == V_LIST || x.t == V_STR) return vundef();
    jfail(c, ZT_EDATA, "subscript of a %s", tname(x.t));
    return vundef();
}

static jv getattr_(rctx *r, jv x, const char *name) {
    if (x.t == V_UNDEF)
        jfail(&r->c, ZT_EDATA, "attribute '%s' of an undefined value (transformers raises UndefinedError)", name);
    if (x.t == V_DICT || x.t == V_NS) return getitem(r, x, vcstr(&r->c, name));
    if (x.t == V_NONE) jfail(&r->c, ZT_EDATA, "attribute '%s' of none", name);
    return vundef();
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
    if (sep.t == V_NONE || sep.t == V_UNDEF) {
        size_t i = 0, len;
        for (;;) {
            while (i < s->n && py_space(u8at(s->p + i, s->n - i, &len))) i += len;
            if (i >= s->n) break;
            if (maxsplit >= 0 && l->n == maxsplit) {
                size_t e = s->n;
                jstr *rest = substr(c, s, i, e);
                lpush(c, l, vstr(pystrip(r, rest, NULL, 2)));
                break;
            }
            size_t b = i;
            while (i < s->n && !py_space(u8at(s->p + i, s->n - i, &len))) i += len;
            lpush(c, l, vstr(substr(c, s, b, i)));
        }
        return vlist(l);
    }
    if (sep.t != V_STR) jfail(c, ZT_EDATA, "split: separator must be a string, not %s", tname(sep.t));
    if (sep.s->n == 0) jfail(c, ZT_EDATA, "split: empty separator");
    size_t b = 0;
    for (size_t i = 0; i + sep.s->n <= s->n;) {
        if ((maxsplit < 0 || l->n < maxsplit) && memcmp(s->p + i, sep.s->p, sep.s->n) == 0) {
            lpush(c, l, vstr(substr(c, s, b, i)));
            i += sep.s->n;
            b = i;
        } else {
            ++i;
        }
    }
    lpush(c, l, vstr(substr(c, s, b, s->n)));
    return vlist(l);
}

static jstr *pyreplace(rctx *r, jstr *s, jstr *old, jstr *new_, long long count) {
    jctx *c = &r->c;
    if (old->n == 0) jfail(c, ZT_EUNSUPPORTED, "replace with an empty old string");
    sbuf o = {0};
    size_t b = 0;
    long long done = 0;
    for (size_t i = 0; i + old->n <= s->n;) {
        if ((count < 0 || done < count) && memcmp(s->p + i, old->p, old->n) == 0) {
            sb_put(c, &o, substr(c, s, b, i));
            sb_raw(c, &o, new_->p, new_->n);
            i += old->n;
            b = i;
            done++;
        } else {
            ++i;
        }
    }
    sb_put(c, &o, substr(c, s, b, s->n));
    return sb_str(c, &o);
}

/* ASCII case mapping; non-ASCII text is refused (Python maps it by Unicode tables) */
static jstr *pycase(rctx *r, jstr *s, int mode /* 0 lower 1 upper 2 capitalize 3 title */, const char *what) {
    jctx *c = &r->c;
    for (size_t i = 0; i < s->n; ++i)
        if ((unsigned char)s->p[i] >= 0x80) jfail(c, ZT_EUNSUPPORTED, "%s on non-ASCII text", what);
    jstr *o = aalloc(c, sizeof *o);
    char *p = aalloc(c, s->n + 1);
    int prev_alpha = 0;
    for (size_t i = 0; i < s->n; ++i) {
        char ch = s->p[i];
        int lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
        int to_up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && !prev_alpha);
        if (to_up && lo) ch = (char)(ch - 32);
        else if (!to_up && up) ch = (char)(ch + 32);
        prev_alpha = lo || up;
        p[i] = ch;
    }
    o->p = p;
    o->n = s->n;
    o->mk = s->mk;
    o->tail = s->tail;
    return o;
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

static jstr *need_str(rctx *r, jv v, const char *what) {
    if (v.t != V_STR) jfail(&r->c, ZT_EDATA, "%s: expected a string, got %s", what, tname(v.t));
    return v.s;
}

static jv iterable(rctx *r, jv v, const char *what);
static jv apply_filter(rctx *r, const char *name, jv x, args *a);
static int apply_test(rctx *r, const char *name, jv x, args *a);

/* str / dict / list methods called as x.name(args) */
static jv call_method(rctx *r, jv x, const char *m, args *a) {
    jctx *c = &r->c;
    if (x.t == V_STR) {
        jstr *s = x.s;
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            check_args(r, a, 1, NULL, m);
            jv p = arg(a, 0, NULL, NULL);
            int ends = m[0] == 'e', n = p.t == V_LIST ? p.l->n : 1;
            for (int i = 0; i < n; ++i) {
                jstr *q = need_str(r, p.t == V_LIST ? p.l->v[i] : p, m);
                if (q->n <= s->n && memcmp(s->p + (ends ? s->n - q->n : 0), q->p, q->n) == 0) return vbool(1);
            }
            return vbool(0);
        }
        if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
            check_args(r, a, 1, NULL, m);
            jv ch = arg(a, 0, NULL, NULL);
            const jstr *chars = ch.t == V_STR ? ch.s : NULL;
            if (ch.t != V_STR && ch.t != V_UNDEF && ch.t != V_NONE) jfail(c, ZT_EDATA, "%s: chars must be a string", m);
            return vstr(pystrip(r, s, chars, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3));
        }
        if (!strcmp(m, "split")) {
            static const char *const kws[] = {"sep", "maxsplit", NULL};
            check_args(r, a, 2, kws, m);
            jv ms = arg(a, 1, "maxsplit", NULL);
            return pysplit(r, s, arg(a, 0, "sep", NULL), ms.t == V_INT ? ms.i : -1);
        }
        if (!strcmp(m, "replace")) {
            check_args(r, a, 3, NULL, m);
            jv cnt = arg(a, 2, NULL, NULL);
            return vstr(pyreplace(r, s, need_str(r, arg(a, 0, NULL, NULL), m), need_str(r, arg(a, 1, NULL, NULL), m),
                                  cnt.t == V_INT ? cnt.i : -1));
        }
        if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize")) {
            check_args(r, a, 0, NULL, m);
            return vstr(pycase(r, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3, m));
        }
        if (!strcmp(m, "join")) {
            check_args(r, a, 1, NULL, m);
            jv l = iterable(r, arg(a, 0, NULL, NULL), "join");
            sbuf o = {0};
            for (int i = 0; i < l.l->n; ++i) {
                if (i) sb_put(c, &o, s);
                sb_put(c, &o, need_str(r, l.l->v[i], "join"));
            }
            return vstr(sb_str(c, &o));
        }
        if (!strcmp(m, "find") || !strcmp(m, "count")) {
            check_args(r, a, 1, NULL, m);
            jstr *q = need_str(r, arg(a, 0, NULL, NULL), m);
            long long cnt = 0;
            for (size_t i = 0; i + q->n <= s->n;) {
                if (memcmp(s->p + i, q->p, q->n) == 0) {
                    if (m[0] == 'f') {
                        jstr pre = {s->p, i, NULL, 0};
                        return vint((long long)u8count(c, &pre, NULL));
                    }
                    cnt++;
                    i += q->n ? q->n : 1;
                } else {
                    ++i;
                }
            }
            if (m[0] == 'c' && q->n == 0) cnt = (long long)u8count(c, s, NULL) + 1;
            return vint(m[0] == 'f' ? -1 : cnt);
        }
    } else if (x.t == V_DICT) {
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            check_args(r, a, 0, NULL, m);
            jlist *l = mklist(c, x.d->n);
            for (int i = 0; i < x.d->n; ++i) {
                if (m[0] == 'k') lpush(c, l, vstr(x.d->k[i]));
                else if (m[0] == 'v') lpush(c, l, x.d->v[i]);
                else {
                    jlist *p = mklist(c, 2);
                    lpush(c, p, vstr(x.d->k[i]));
                    lpush(c, p, x.d->v[i]);
                    lpush(c, l, vlist(p));
                }
            }
            return vlist(l);
        }
        if (!strcmp(m, "get")) {
            check_args(r, a, 2, NULL, m);
            jv v = getitem(r, x, arg(a, 0, NULL, NULL));
            if (v.t == V_UNDEF) { int has; jv d = arg(a, 1, NULL, &has); return has ? d : vnone(); }
            return v;
        }
    }
    jfail(c, ZT_EUNSUPPORTED, "method %s.%s()", tname(x.t), m);
    return vundef();
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
        jstr *f = need_str(r, arg(a, 0, NULL, NULL), "strftime_now");
        char fmt[256], buf[256];
        if (f->n >= sizeof fmt) jfail(c, ZT_EUNSUPPORTED, "strftime_now format longer than 255 bytes");
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
            dset(c, d.d, mkstr(c, a->kw[i], strlen(a->kw[i])), a->v[i]);
        }
        return d;
    }
    default: {
        check_args(r, a, 3, NULL, "range");
        long long p[3] = {0, 0, 1};
        int np = 0;
        for (int i = 0; i < a->n; ++i) {
            if (a->v[i].t != V_INT) jfail(c, ZT_EDATA, "range() takes integers");
            p[np++] = a->v[i].i;
        }
        if (np == 1) { p[1] = p[0]; p[0] = 0; }
        if (p[2] == 0) jfail(c, ZT_EDATA, "range() step must not be zero");
        if ((p[1] - p[0]) / p[2] > 100000) jfail(c, ZT_EUNSUPPORTED, "range() of more than 100000 items");
        jlist *l = mklist(c, 4);
        for (long long i = p[0]; p[2] > 0 ? i < p[1] : i > p[1]; i += p[2]) lpush(c, l, vint(i));
        return vlist(l);
    }
    }
}

/* a value as a list to iterate (dict: its keys, string: its characters) */
static jv iterable(rctx *r, jv v, const char *what) {
    jctx *c = &r->c;
    if (v.t == V_LIST) return v;
    jlist *l = mklist(c, 4);
    if (v.t == V_UNDEF) return vlist(l);
    if (v.t == V_DICT) {
        for (int i = 0; i < v.d->n; ++i) lpush(c, l, vstr(v.d->k[i]));
        return vlist(l);
    }
    if (v.t == V_STR) {
        size_t *off;
        size_t n = u8count(c, v.s, &off);
        for (size_t i = 0; i < n; ++i) lpush(c, l, vstr(substr(c, v.s, off[i], off[i + 1])));
        return vlist(l);
    }
    jfail(c, ZT_EDATA, "%s: a %s is not iterable", what, tname(v.t));
    return v;
}

static int apply_test(rctx *r, const char *t, jv x, args *a) {
    jv y = arg(a, 0, NULL, NULL);
    if (!strcmp(t, "defined")) return x.t != V_UNDEF;
    if (!strcmp(t, "undefined")) return x.t == V_UNDEF;
    if (!strcmp(t, "none")) return x.t == V_NONE;
    if (!strcmp(t, "string")) return x.t == V_STR;
    if (!strcmp(t, "number")) return x.t == V_INT || x.t == V_FLOAT || x.t == V_BOOL;
    if (!strcmp(t, "integer")) return x.t == V_INT;
    if (!strcmp(t, "float")) return x.t == V_FLOAT;
    if (!strcmp(t, "boolean")) return x.t == V_BOOL;
    if (!strcmp(t, "true")) return x.t == V_BOOL && x.b;
    if (!strcmp(t, "false")) return x.t == V_BOOL && !x.b;
    if (!strcmp(t, "mapping")) return x.t == V_DICT;
    if (!strcmp(t, "iterable")) return x.t == V_STR || x.t == V_LIST || x.t == V_DICT || x.t == V_UNDEF;
    if (!strcmp(t, "sequence")) return x.t == V_STR || x.t == V_LIST || x.t == V_DICT || x.t == V_UNDEF;
    if (!strcmp(t, "callable")) return x.t == V_FUNC;
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "==")) return veq(x, y);
    if (!strcmp(t, "ne") || !strcmp(t, "!=")) return !veq(x, y);
    if (!strcmp(t, "lt") || !strcmp(t, "lessthan")) return vcmp(r, x, y, "<") < 0;
    if (!strcmp(t, "gt") || !strcmp(t, "greaterthan")) return vcmp(r, x, y, ">") > 0;
    if (!strcmp(t, "le")) return vcmp(r, x, y, "<=") <= 0;
    if (!strcmp(t, "ge")) return vcmp(r, x, y, ">=") >= 0;
    if (!strcmp(t, "in")) return contains(r, y, x);
    if (!strcmp(t, "sameas")) return x.t == y.t && (x.t <= V_NONE || (x.t == V_BOOL && x.b == y.b));
    if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
        if (x.t != V_INT) jfail(&r->c, ZT_EDATA, "test '%s' on a %s", t, tname(x.t));
        if (t[0] == 'o') return pymod(x.i, 2) == 1;
        if (t[0] == 'e') return pymod(x.i, 2) == 0;
        if (y.t != V_INT || y.i == 0) jfail(&r->c, ZT_EDATA, "divisibleby needs a non-zero integer");
        return pymod(x.i, y.i) == 0;
    }
    jfail(&r->c, ZT_EUNSUPPORTED, "test 'is %s'", t);
    return 0;
}

/* select / reject / selectattr / rejectattr */
static jv do_select(rctx *r, jv seq, args *a, int attr, int keep) {
    jctx *c = &r->c;
    jv l = iterable(r, seq, "select");
    jlist *o = mklist(c, 4);
    int base = attr ? 1 : 0;
    jstr *an = attr ? need_str(r, arg(a, 0, NULL, NULL), "selectattr") : NULL;
    int has;
    jv tn = arg(a, base, NULL, &has);
    args ta = {0};
    for (int i = base + 1; i < a->n && ta.n < 8; ++i) { ta.v[ta.n] = a->v[i]; ta.kw[ta.n++] = a->kw[i]; }
    for (int i = 0; i < l.l->n; ++i) {
        jv x = l.l->v[i];
        if (attr) {
            char nm[256];
            snprintf(nm, sizeof nm, "%.*s", (int)an->n, an->p);
            if (strchr(nm, '.')) jfail(c, ZT_EUNSUPPORTED, "dotted attribute '%s' in selectattr", nm);
            x = (x.t == V_DICT || x.t == V_NS) ? getitem(r, x, vstr(an)) : getattr_(r, x, nm);
        }
        int ok;
        if (!has) ok = truthy(x);
        else {
            char tnm[64];
            jstr *ts = need_str(r, tn, "select test");
            snprintf(tnm, sizeof tnm, "%.*s", (int)ts->n, ts->p);
            ok = apply_test(r, tnm, x, &ta);
        }
        if (ok == keep) lpush(c, o, l.l->v[i]);
    }
    return vlist(o);
}

static jv apply_filter(rctx *r, const char *f, jv x, args *a) {
    jctx *c = &r->c;
    if (!strcmp(f, "safe")) return x;
    if (!strcmp(f, "trim")) {
        check_args(r, a, 1, NULL, "trim");
        jv ch = arg(a, 0, NULL, NULL);
        return vstr(pystrip(r, to_str(r, x), ch.t == V_STR ? ch.s : NULL, 3));
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        if (x.t == V_STR) return vint((long long)u8count(c, x.s, NULL));
        if (x.t == V_LIST) return vint(x.l->n);
        if (x.t == V_DICT) return vint(x.d->n);
        if (x.t == V_UNDEF) return vint(0);
        jfail(c, ZT_EDATA, "length of a %s", tname(x.t));
    }
    if (!strcmp(f, "string")) return vstr(to_str(r, x));
    if (!strcmp(f, "lower") || !strcmp(f, "upper") || !strcmp(f, "capitalize") || !strcmp(f, "title"))
        return vstr(pycase(r, to_str(r, x), f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 'c' ? 2 : 3, f));
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        static const char *const kws[] = {"default_value", "boolean", NULL};
        check_args(r, a, 2, kws, "default");
        jv dv = arg(a, 0, "default_value", NULL), bo = arg(a, 1, "boolean", NULL);
        if (x.t == V_UNDEF || (truthy(bo) && !truthy(x))) return dv.t == V_UNDEF ? vstr(mkstr(c, "", 0)) : dv;
        return x;
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        jv l = iterable(r, x, f);
        if (!l.l->n) return vundef();
        return l.l->v[f[0] == 'f' ? 0 : l.l->n - 1];
    }
    if (!strcmp(f, "list")) return iterable(r, x, "list");
    if (!strcmp(f, "reverse")) {
        if (x.t == V_STR) return do_slice(r, x, vnone(), vnone(), vint(-1));
        jv l = iterable(r, x, "reverse");
        return do_slice(r, l, vnone(), vnone(), vint(-1));
    }
    if (!strcmp(f, "join")) {
        static const char *const kws[] = {"d", "attribute", NULL};
        check_args(r, a, 2, kws, "join");
        int has;
        jv at = arg(a, 1, "attribute", &has);
        if (has) jfail(c, ZT_EUNSUPPORTED, "join with attribute=");
        (void)at;
        jv sep = arg(a, 0, "d", NULL);
        jstr *s = sep.t == V_UNDEF ? mkstr(c, "", 0) : to_str(r, sep);
        jv l = iterable(r, x, "join");
        sbuf o = {0};
        for (int i = 0; i < l.l->n; ++i) {
            if (i) sb_put(c, &o, s);
            sb_put(c, &o, to_str(r, l.l->v[i]));
        }
        return vstr(sb_str(c, &o));
    }
    if (!strcmp(f, "items")) {
        if (x.t == V_UNDEF) return vlist(mklist(c, 1));
        if (x.t != V_DICT) jfail(c, ZT_EDATA, "items of a %s", tname(x.t));
        args none = {0};
        return call_method(r, x, "items", &none);
    }
    if (!strcmp(f, "tojson")) {
        static const char *const kws[] = {"indent", "ensure_ascii", "sort_keys", NULL};
        check_args(r, a, 1, kws, "tojson");
        jv ind = arg(a, 0, "indent", NULL), ea = arg(a, 99, "ensure_ascii", NULL), sk = arg(a, 99, "sort_keys", NULL);
        if (truthy(ea)) jfail(c, ZT_EUNSUPPORTED, "tojson(ensure_ascii=True)");
        if (ind.t != V_UNDEF && ind.t != V_NONE && ind.t != V_INT) jfail(c, ZT_EUNSUPPORTED, "tojson indent of type %s", tname(ind.t));
        sbuf o = {0};
        json_into(r, &o, x, ind.t == V_INT ? (int)ind.i : -1, truthy(sk), 0);
        jstr *s = sb_str(c, &o);
        s->mk = NULL;
        s->tail = 0;
        return vstr(s);
    }
    if (!strcmp(f, "replace")) {
        check_args(r, a, 3, NULL, "replace");
        jv cnt = arg(a, 2, NULL, NULL);
        return vstr(pyreplace(r, to_str(r, x), to_str(r, arg(a, 0, NULL, NULL)), to_str(r, arg(a, 1, NULL, NULL)),
                              cnt.t == V_INT ? cnt.i : -1));
    }
    if (!strcmp(f, "int")) {
        if (x.t == V_INT) return x;
        if (x.t == V_BOOL) return vint(x.b);
        if (x.t == V_FLOAT) return vint((long long)x.f);
        if (x.t == V_STR) {
            char buf[64];
            jstr *s = pystrip(r, x.s, NULL, 3);
            snprintf(buf, sizeof buf, "%.*s", (int)(s->n < 63 ? s->n : 63), s->p);
            char *e;
            errno = 0;
            long long v = strtoll(buf, &e, 10);
            if (!*e && *buf && !errno) return vint(v);
            double d = strtod(buf, &e);     /* jinja2: int(float(value)) */
            return vint(!*e && *buf && isfinite(d) && fabs(d) < 9.2e18 ? (long long)d : 0);
        }
        return vint(0);
    }
    if (!strcmp(f, "abs")) {
        if (x.t == V_INT) return vint(x.i < 0 ? -x.i : x.i);
        if (x.t == V_FLOAT) { x.f = fabs(x.f); return x; }
        jfail(c, ZT_EDATA, "abs of a %s", tname(x.t));
    }
    if (!strcmp(f, "select")) return do_select(r, x, a, 0, 1);
    if (!strcmp(f, "reject")) return do_select(r, x, a, 0, 0);
    if (!strcmp(f, "selectattr")) return do_select(r, x, a, 1, 1);
    if (!strcmp(f, "rejectattr")) return do_select(r, x, a, 1, 0);
    if (!strcmp(f, "map")) {
        jv l = iterable(r, x, "map");
        int has;
        jv at = arg(a, 99, "attribute", &has);
        jlist *o = mklist(c, l.l->n);
        if (has) {
            static const char *const kws[] = {"attribute", "default", NULL};
            check_args(r, a, 0, kws, "map");
            jstr *an = need_str(r, at, "map attribute");
            jv dflt = arg(a, 99, "default", NULL);
            for (int i = 0; i < l.l->n; ++i) {
                jv v = l.l->v[i];
                char nm[256];
                snprintf(nm, sizeof nm, "%.*s", (int)an->n, an->p);
                if (strchr(nm, '.')) jfail(c, ZT_EUNSUPPORTED, "dotted attribute '%s' in map", nm);
                v = (v.t == V_DICT || v.t == V_NS) ? getitem(r, v, vstr(an)) : getattr_(r, v, nm);
                lpush(c, o, v.t == V_UNDEF && dflt.t != V_UNDEF ? dflt : v);
            }
            return vlist(o);
        }
        jstr *fn = need_str(r, arg(a, 0, NULL, NULL), "map filter");
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)fn->n, fn->p);
        args fa = {0};
        for (int i = 1; i < a->n && fa.n < 8; ++i) { fa.v[fa.n] = a->v[i]; fa.kw[fa.n++] = a->kw[i]; }
        for (int i = 0; i < l.l->n; ++i) lpush(c, o, apply_filter(r, nm, l.l->v[i], &fa));
        return vlist(o);
    }
    jfail(c, ZT_EUNSUPPORTED, "filter '%s'", f);
    return vundef();
}

static jv eval(rctx *r, node *n, scope *sc) {
    jctx *c = &r->c;
    c->line = n->line;
    switch (n->k) {
    case E_CONST: return n->cst;
    case E_NAME: return lookup(sc, n->name);
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
        return do_slice(r, x, b, e, s);
    }
    case E_CALL: {
        args a;
        if (n->a->k == E_ATTR) {
            jv x = eval(r, n->a->a, sc);
            if (x.t == V_STR || x.t == V_DICT || x.t == V_LIST) {
                eval_args(r, n, sc, &a);
                c->line = n->line;
                return call_method(r, x, n->a->name, &a);
            }
            jv f = getattr_(r, x, n->a->name);
            if (f.t != V_FUNC) jfail(c, ZT_EDATA, "'%s' is not callable (a %s)", n->a->name, tname(f.t));
            eval_args(r, n, sc, &a);
            return call_func(r, f.fn, &a);
        }
        jv f = eval(r, n->a, sc);
        c->line = n->line;
        if (f.t != V_FUNC) {
            if (n->a->k == E_NAME) jfail(c, ZT_EUNSUPPORTED, "function '%s' (undefined here)", n->a->name);
            jfail(c, ZT_EDATA, "calling a %s", tname(f.t));
        }
        eval_args(r, n, sc, &a);
        c->line = n->line;
        return call_func(r, f.fn, &a);
    }
    case E_FILTER: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        return apply_filter(r, n->name, x, &a);
    }
    case E_TEST: {
        jv x = eval(r, n->a, sc);
        args a;
        eval_args(r, n, sc, &a);
        c->line = n->line;
        int t = apply_test(r, n->name, x, &a);
        return vbool(n->op ? !t : t);
    }
    case E_BIN: {
        jv a = eval(r, n->a, sc), b = eval(r, n->b, sc);
        c->line = n->line;
        return binop(r, n->op, a, b);
    }
    case E_NOT: return vbool(!truthy(eval(r, n->a, sc)));
    case E_NEG: case E_POS: {
        jv x = eval(r, n->a, sc);
        c->line = n->line;
        if (x.t == V_INT) return n->k == E_NEG ? vint(-x.i) : x;
        if (x.t == V_FLOAT) { if (n->k == E_NEG) x.f = -x.f; return x; }
        if (x.t == V_BOOL) return vint(n->k == E_NEG ? -x.b : x.b);
        jfail(c, ZT_EDATA, "unary %c on a %s", n->k == E_NEG ? '-' : '+', tname(x.t));
    }
    case E_AND: { jv a = eval(r, n->a, sc); return truthy(a) ? eval(r, n->b, sc) : a; }
    case E_OR: { jv a = eval(r, n->a, sc); return truthy(a) ? a : eval(r, n->b, sc); }
    case E_COND:
        if (truthy(eval(r, n->b, sc))) return eval(r, n->a, sc);
        return n->c ? eval(r, n->c, sc) : vundef();
    case E_LIST: {
        jlist *l = mklist(c, n->nv);
        for (int i = 0; i < n->nv; ++i) lpush(c, l, eval(r, n->v[i], sc));
        return vlist(l);
    }
    case E_DICT: {
        jv d = {.t = V_DICT};
        d.d = mkdict(c);
        for (int i = 0; i + 1 < n->nv; i += 2) {
            jv k = eval(r, n->v[i], sc);
            if (k.t != V_STR) jfail(c, ZT_EUNSUPPORTED, "dict literal with a %s key", tname(k.t));
            dset(c, d.d, k.s, eval(r, n->v[i + 1], sc));
        }
        return d;
    }
    default: jfail(c, ZT_EINTERNAL, "bad expression node %d", n->k);
    }
    return vundef();
}

static void emit(rctx *r, jstr *s) { sb_put(&r->c, &r->out, s); }

static void setvar(rctx *r, scope *sc, const char *name, jv v) {
    dset(&r->c, sc->vars, mkstr(&r->c, name, strlen(name)), v);
}

static void assign(rctx *r, scope *sc, node *n, jv v) {
    if (!n->name2) { setvar(r, sc, n->name, v); return; }
    jv l = iterable(r, v, "unpacking");
    if (l.l->n != 2) jfail(&r->c, ZT_EDATA, "cannot unpack %d values into 2 names", l.l->n);
    setvar(r, sc, n->name, l.l->v[0]);
    setvar(r, sc, n->name2, l.l->v[1]);
}

static void exec_body(rctx *r, node *s, scope *sc);

static void exec_for(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    jv it = eval(r, s->a, sc);
    c->line = s->line;
    if (it.t == V_NONE) jfail(c, ZT_EDATA, "'NoneType' object is not iterable");
    jv l = iterable(r, it, "for");
    /* the loop filter runs first (loop.length counts the kept items) */
    jlist *items = l.l;
    if (s->d) {
        items = mklist(c, l.l->n);
        for (int i = 0; i < l.l->n; ++i) {
            scope fs = {sc, mkdict(c)};
            assign(r, &fs, s, l.l->v[i]);
            if (truthy(eval(r, s->d, &fs))) lpush(c, items, l.l->v[i]);
        }
    }
    int n = items->n;
    for (int i = 0; i < n; ++i) {
        scope is = {sc, mkdict(c)};
        jv loop = {.t = V_DICT};
        loop.d = mkdict(c);
        setvar(r, &(scope){NULL, loop.d}, "index0", vint(i));
        setvar(r, &(scope){NULL, loop.d}, "index", vint(i + 1));
        setvar(r, &(scope){NULL, loop.d}, "revindex0", vint(n - 1 - i));
        setvar(r, &(scope){NULL, loop.d}, "revindex", vint(n - i));
        setvar(r, &(scope){NULL, loop.d}, "first", vbool(i == 0));
        setvar(r, &(scope){NULL, loop.d}, "last", vbool(i == n - 1));
        setvar(r, &(scope){NULL, loop.d}, "length", vint(n));
        setvar(r, &(scope){NULL, loop.d}, "depth", vint(1));
        setvar(r, &(scope){NULL, loop.d}, "depth0", vint(0));
        if (i > 0) setvar(r, &(scope){NULL, loop.d}, "previtem", items->v[i - 1]);
        if (i + 1 < n) setvar(r, &(scope){NULL, loop.d}, "nextitem", items->v[i + 1]);
        setvar(r, &is, "loop", loop);
        assign(r, &is, s, items->v[i]);
        exec_body(r, s->b, &is);
        r->cont = 0;
        if (r->brk) { r->brk = 0; return; }
    }
    if (n == 0 && s->c) {
        scope es = {sc, mkdict(c)};
        exec_body(r, s->c, &es);
    }
}

static void exec_body(rctx *r, node *s, scope *sc) {
    jctx *c = &r->c;
    for (; s && !r->brk && !r->cont; s = s->next) {
        c->line = s->line;
        switch (s->k) {
        case S_DATA: emit(r, s->cst.s); break;
        case S_OUT: {
            jv v = eval(r, s->a, sc);
            c->line = s->line;
            emit(r, to_str(r, v));
            break;
        }
        case S_IF:   /* elif: a lone S_IF as the else branch */
            exec_body(r, truthy(eval(r, s->a, sc)) ? s->b : s->c, sc);
            break;
        case S_FOR: exec_for(r, s, sc); break;
        case S_SET: assign(r, sc, s, eval(r, s->a, sc)); break;
        case S_SETATTR: {
            jv ns = lookup(sc, s->name);
            c->line = s->line;
            if (ns.t != V_NS) jfail(c, ZT_EDATA, "set %s.%s: '%s' is not a namespace (a %s)", s->name, s->name2, s->name, tname(ns.t));
            dset(c, ns.d, mkstr(c, s->name2, strlen(s->name2)), eval(r, s->a, sc));
            break;
        }
        case S_BREAK: r->brk = 1; break;
        case S_CONTINUE: r->cont = 1; break;
        case S_GEN: exec_body(r, s->b, sc); break;
        default: jfail(c, ZT_EINTERNAL, "bad statement node %d", s->k);
        }
    }
}

static jv from_json(rctx *r, const json_t *j, uint32_t mark) {
    jctx *c = &r->c;
    switch (json_typeof(j)) {
    case JSON_NULL: return vnone();
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    case JSON_INTEGER: return vint((long long)json_integer_value(j));
    case JSON_REAL: { jv v = {.t = V_FLOAT}; v.f = json_real_value(j); return v; }
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
        jlist *l = mklist(c, (int)json_array_size(j));
        size_t i;
        const json_t *e;
        json_array_foreach((json_t *)j, i, e) lpush(c, l, from_json(r, e, 0));
        return vlist(l);
    }
    default: {
        jv d = {.t = V_DICT};
        d.d = mkdict(c);
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)j, k, e) {
            dset(c, d.d, mkstr(c, k, strlen(k)), from_json(r, e, 0));
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
    if (reason) dset(c, d.d, mkstr(c, "thinking", 8), from_json(r, reason, mark));
    const char *k;
    const json_t *e;
    json_object_foreach((json_t *)m, k, e) {
        if (json_is_null(e)) continue;
        dset(c, d.d, mkstr(c, k, strlen(k)), from_json(r, e, marked_key(k) ? mark : 0));
    }
    if (reason) dset(c, d.d, mkstr(c, "reasoning_content", 17), from_json(r, reason, mark));
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
        json_object_foreach((json_t *)vars, k, e) setvar(r, &glob, k, from_json(r, e, 0));
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
    for (size_t i = 0; o->marked && i < o->n; ++i) {
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
