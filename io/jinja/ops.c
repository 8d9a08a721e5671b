/* ops.c -- the chat-template engine's values with Python's semantics (jinja_int.h): numbers,
 * printing (str, repr, tojson), comparisons, sequences and slices, attributes and items (jinja2's
 * sandbox), the operators. */
#define _GNU_SOURCE   /* memmem */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja_int.h"

static const char *const opname[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=",
                                     "in", "not in"};

void zj_undef_fail(rctx *r, jv v, const char *what) {
    zj_jfail(&r->c, ZT_EDATA, "%s (used in %s; transformers raises UndefinedError)",
             v.hint ? v.hint : "an undefined value", what);
}

int zj_truthy(jv v) {
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

/* ---- numbers: 64-bit integers (a result outside is refused), Python's float semantics */

static void int_range(rctx *r, long long a, const char *op, long long b) __attribute__((noreturn));
static void int_range(rctx *r, long long a, const char *op, long long b) {
    zj_jfail(&r->c, ZT_EUNSUPPORTED, "integer result of %lld %s %lld out of range " INT64_NOTE, a, op, b);
}
static long long iadd(rctx *r, long long a, long long b) { long long z; if (__builtin_add_overflow(a, b, &z)) int_range(r, a, "+", b); return z; }
static long long isub(rctx *r, long long a, long long b) { long long z; if (__builtin_sub_overflow(a, b, &z)) int_range(r, a, "-", b); return z; }
static long long imul(rctx *r, long long a, long long b) { long long z; if (__builtin_mul_overflow(a, b, &z)) int_range(r, a, "*", b); return z; }
long long zj_ineg(rctx *r, long long a) {
    if (a == LLONG_MIN) zj_jfail(&r->c, ZT_EUNSUPPORTED, "integer result of -(%lld) out of range " INT64_NOTE, a);
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
    if (x == 0 && y < 0) zj_jfail(&r->c, ZT_EDATA, "0.0 cannot be raised to a negative power (Python's ZeroDivisionError)");
    if (x < 0 && y != floor(y))
        zj_jfail(&r->c, ZT_EUNSUPPORTED, "a negative number raised to a fractional power (Python gives a complex number)");
    double z = pow(x, y);
    if (isinf(z)) zj_jfail(&r->c, ZT_EDATA, "float result of ** out of range (Python's OverflowError)");
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
        zj_jfail(&r->c, ZT_EDATA, "a value nested deeper than %d levels " BUDGET, ZT_JINJA_MAX_VDEPTH);
}
static void unprintable(rctx *r, jv v) __attribute__((noreturn));
static void unprintable(rctx *r, jv v) {
    if (v.t == V_LIST) zj_jfail(&r->c, ZT_EUNSUPPORTED, "printing a %s (jinja2 prints its memory address)", v.l->what);
    zj_jfail(&r->c, ZT_EUNSUPPORTED, "printing a %s (jinja2 prints its memory address)", zj_tname(v.t));
}

static void range_repr(jctx *c, sbuf *b, const jrange *g) {
    char buf[96];
    if (g->step == 1) snprintf(buf, sizeof buf, "range(%lld, %lld)", g->start, g->stop);
    else snprintf(buf, sizeof buf, "range(%lld, %lld, %lld)", g->start, g->stop, g->step);
    zj_sb_cstr(c, b, buf);
}

/* str(v) as Python / Jinja print it */
jstr *zj_to_str(rctx *r, jv v) {
    jctx *c = &r->c;
    char buf[64];
    switch (v.t) {
    case V_STR: return v.s;
    case V_UNDEF: return zj_mkstr(c, "", 0);
    case V_NONE: return zj_mkstr(c, "None", 4);
    case V_BOOL: return v.b ? zj_mkstr(c, "True", 4) : zj_mkstr(c, "False", 5);
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.i); return zj_mkstr(c, buf, strlen(buf));
    case V_FLOAT: fmt_float(v.f, buf, sizeof buf); return zj_mkstr(c, buf, strlen(buf));
    case V_LIST: case V_DICT: case V_NS: case V_RANGE: case V_LOOP: {
        sbuf b = {0};
        repr_into(r, &b, v, 0);
        return zj_sb_str(c, &b);
    }
    default: unprintable(r, v);
    }
}

static void repr_into(rctx *r, sbuf *b, jv v, int depth) {
    jctx *c = &r->c;
    depth_check(r, depth);
    zj_tick(c, 1);
    if (v.t == V_STR) {
        int sq = memchr(v.s->p, '\'', v.s->n) != NULL, dq = memchr(v.s->p, '"', v.s->n) != NULL;
        char q = sq && !dq ? '"' : '\'';
        zj_sb_raw(c, b, &q, 1);
        for (size_t i = 0; i < v.s->n; ++i) {
            unsigned char ch = (unsigned char)v.s->p[i];
            char e[8];
            if (ch == '\\') zj_sb_raw(c, b, "\\\\", 2);
            else if (ch == (unsigned char)q) { e[0] = '\\'; e[1] = q; zj_sb_raw(c, b, e, 2); }
            else if (ch == '\n') zj_sb_raw(c, b, "\\n", 2);
            else if (ch == '\r') zj_sb_raw(c, b, "\\r", 2);
            else if (ch == '\t') zj_sb_raw(c, b, "\\t", 2);
            else if (ch < 0x20 || ch == 0x7f) { snprintf(e, sizeof e, "\\x%02x", ch); zj_sb_raw(c, b, e, 4); }
            else if (ch >= 0x80) zj_jfail(c, ZT_EUNSUPPORTED, "printing a list or dict holding non-ASCII text");
            else zj_sb_raw(c, b, (char *)&ch, 1);
        }
        zj_sb_raw(c, b, &q, 1);
    } else if (v.t == V_LIST) {
        int k = v.l->kind;
        if (k == K_GEN) unprintable(r, v);
        if (k == K_KEYS) zj_sb_cstr(c, b, "dict_keys(");
        if (k == K_VALUES) zj_sb_cstr(c, b, "dict_values(");
        if (k == K_ITEMS) zj_sb_cstr(c, b, "dict_items(");
        zj_sb_raw(c, b, k == K_TUPLE ? "(" : "[", 1);
        for (int i = 0; i < v.l->n; ++i) {
            if (i) zj_sb_raw(c, b, ", ", 2);
            repr_into(r, b, v.l->v[i], depth + 1);
        }
        if (k == K_TUPLE && v.l->n == 1) zj_sb_raw(c, b, ",", 1);
        zj_sb_raw(c, b, k == K_TUPLE ? ")" : "]", 1);
        if (k >= K_KEYS) zj_sb_raw(c, b, ")", 1);
    } else if (v.t == V_DICT || v.t == V_NS) {
        if (v.t == V_NS) zj_sb_cstr(c, b, "<Namespace ");
        zj_sb_raw(c, b, "{", 1);
        for (int i = 0; i < v.d->n; ++i) {
            if (i) zj_sb_raw(c, b, ", ", 2);
            repr_into(r, b, vstr(v.d->k[i]), depth + 1);
            zj_sb_raw(c, b, ": ", 2);
            repr_into(r, b, v.d->v[i], depth + 1);
        }
        zj_sb_raw(c, b, "}", 1);
        if (v.t == V_NS) zj_sb_raw(c, b, ">", 1);
    } else if (v.t == V_UNDEF) {
        zj_sb_cstr(c, b, "Undefined");
    } else if (v.t == V_RANGE) {
        range_repr(c, b, v.rg);
    } else if (v.t == V_LOOP) {
        char buf[64];
        snprintf(buf, sizeof buf, "<LoopContext %d/%d>", v.lp->i + 1, v.lp->n);
        zj_sb_cstr(c, b, buf);
    } else if (v.t == V_FUNC || v.t == V_METHOD || v.t == V_MACRO) {
        unprintable(r, v);
    } else {
        jstr *s = zj_to_str(r, v);
        zj_sb_raw(c, b, s->p, s->n);
    }
}

/* n bytes of an escape, traced as the byte of s it stands for */
static void raw_as(jctx *c, sbuf *b, const char *p, size_t n, const jstr *s, size_t i) {
    if (!s->mk || !s->mk[i]) { zj_sb_raw(c, b, p, n); return; }
    uint32_t mk[16];
    for (size_t k = 0; k < n && k < 16; ++k) mk[k] = s->mk[i];
    jstr t = {p, n, mk, 0, 0, 0};
    zj_sb_put(c, b, &t);
}
/* a string as JSON; its traced bytes stay traced (an escape as the byte it stands for) */
static void json_str(jctx *c, sbuf *b, const jstr *s, int ascii) {
    char buf[16];
    zj_sb_raw(c, b, "\"", 1);
    if (!s->n && s->tail) { jstr t = {"", 0, NULL, s->tail, 0, 0}; zj_sb_put(c, b, &t); }
    for (size_t i = 0, len; i < s->n; i += len) {
        unsigned char ch = (unsigned char)s->p[i];
        len = 1;
        if (s->mk) {   /* traced: byte by byte (escapes) or a run of plain bytes with its marks */
            if (ch == '"') raw_as(c, b, "\\\"", 2, s, i);
            else if (ch == '\\') raw_as(c, b, "\\\\", 2, s, i);
            else if (ch == '\n') raw_as(c, b, "\\n", 2, s, i);
            else if (ch == '\r') raw_as(c, b, "\\r", 2, s, i);
            else if (ch == '\t') raw_as(c, b, "\\t", 2, s, i);
            else if (ch == '\b') raw_as(c, b, "\\b", 2, s, i);
            else if (ch == '\f') raw_as(c, b, "\\f", 2, s, i);
            else if (ch < 0x20 || (ascii && ch == 0x7f)) { snprintf(buf, sizeof buf, "\\u%04x", ch); raw_as(c, b, buf, 6, s, i); }
            else if (ch >= 0x80 && ascii) {
                uint32_t cp = zj_u8at(s->p + i, s->n - i, &len);
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
                    raw_as(c, b, buf, 12, s, i);
                } else {
                    snprintf(buf, sizeof buf, "\\u%04x", cp);
                    raw_as(c, b, buf, 6, s, i);
                }
            } else {
                size_t k = i + 1;
                while (k < s->n && (unsigned char)s->p[k] >= 0x20 && s->p[k] != '"' && s->p[k] != '\\' &&
                       !(ascii && (unsigned char)s->p[k] >= 0x7f)) ++k;
                jstr t = {s->p + i, k - i, s->mk + i, 0, 0, 0};
                zj_sb_put(c, b, &t);
                len = k - i;
            }
            continue;
        }
        if (ch == '"') zj_sb_raw(c, b, "\\\"", 2);
        else if (ch == '\\') zj_sb_raw(c, b, "\\\\", 2);
        else if (ch == '\n') zj_sb_raw(c, b, "\\n", 2);
        else if (ch == '\r') zj_sb_raw(c, b, "\\r", 2);
        else if (ch == '\t') zj_sb_raw(c, b, "\\t", 2);
        else if (ch == '\b') zj_sb_raw(c, b, "\\b", 2);
        else if (ch == '\f') zj_sb_raw(c, b, "\\f", 2);
        else if (ch < 0x20 || (ascii && ch == 0x7f)) { snprintf(buf, sizeof buf, "\\u%04x", ch); zj_sb_raw(c, b, buf, 6); }
        else if (ch >= 0x80 && ascii) {
            uint32_t cp = zj_u8at(s->p + i, s->n - i, &len);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
                zj_sb_raw(c, b, buf, 12);
            } else {
                snprintf(buf, sizeof buf, "\\u%04x", cp);
                zj_sb_raw(c, b, buf, 6);
            }
        } else {
            size_t k = i + 1;   /* a run of plain bytes at once */
            while (k < s->n && (unsigned char)s->p[k] >= 0x20 && s->p[k] != '"' && s->p[k] != '\\' &&
                   !(ascii && (unsigned char)s->p[k] >= 0x7f)) ++k;
            zj_sb_raw(c, b, s->p + i, k - i);
            len = k - i;
        }
    }
    zj_sb_raw(c, b, "\"", 1);
}
static void json_newline(jctx *c, sbuf *b, const jsonopt *o, int depth) {
    zj_sb_raw(c, b, "\n", 1);
    for (int s = 0; s < depth; ++s) zj_sb_raw(c, b, o->ind->p, o->ind->n);
}
void zj_json_into(rctx *r, sbuf *b, jv v, const jsonopt *o, int depth) {
    jctx *c = &r->c;
    char buf[64];
    depth_check(r, depth);
    zj_tick(c, 1);
    switch (v.t) {
    case V_NONE: zj_sb_raw(c, b, "null", 4); return;
    case V_BOOL: if (v.b) zj_sb_raw(c, b, "true", 4); else zj_sb_raw(c, b, "false", 5); return;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.i); zj_sb_raw(c, b, buf, strlen(buf)); return;
    case V_FLOAT:
        if (isnan(v.f)) { zj_sb_raw(c, b, "NaN", 3); return; }
        if (isinf(v.f)) { if (v.f < 0) zj_sb_raw(c, b, "-Infinity", 9); else zj_sb_raw(c, b, "Infinity", 8); return; }
        fmt_float(v.f, buf, sizeof buf);
        zj_sb_raw(c, b, buf, strlen(buf));
        return;
    case V_STR: json_str(c, b, v.s, o->ascii); return;
    case V_LIST: case V_DICT: {
        if (v.t == V_LIST && v.l->kind != K_LIST && v.l->kind != K_TUPLE) break;
        int isl = v.t == V_LIST, n = isl ? v.l->n : v.d->n;
        zj_sb_raw(c, b, isl ? "[" : "{", 1);
        if (n == 0) { zj_sb_raw(c, b, isl ? "]" : "}", 1); return; }
        int *ord = zj_aalloc(c, (size_t)n * sizeof(int));
        for (int i = 0; i < n; ++i) ord[i] = i;
        if (!isl && o->sort) {   /* by key bytes (= code point order); keys are unique: a merge sort */
            int *tmp = zj_aalloc(c, (size_t)n * sizeof(int));
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
                zj_tick(c, n / 16 + 1);
            }
        }
        for (int i = 0; i < n; ++i) {
            if (i) zj_sb_raw(c, b, o->isep->p, o->isep->n);
            if (o->indent) json_newline(c, b, o, depth + 1);
            if (!isl) {
                json_str(c, b, v.d->k[ord[i]], o->ascii);
                zj_sb_raw(c, b, o->ksep->p, o->ksep->n);
            }
            zj_json_into(r, b, isl ? v.l->v[i] : v.d->v[ord[i]], o, depth + 1);
        }
        if (o->indent) json_newline(c, b, o, depth);
        zj_sb_raw(c, b, isl ? "]" : "}", 1);
        return;
    }
    default: break;
    }
    zj_jfail(c, ZT_EDATA, "tojson: Object of type %s is not JSON serializable", zj_pyname(v));
}

/* ---- comparisons */


/* == between two items of containers: Python compares identical objects equal (even NaN), which
 * the engine cannot see for floats */
int zj_veq_item(rctx *r, jv a, jv b, int depth) {
    if (a.t == V_FLOAT && b.t == V_FLOAT && isnan(a.f) && isnan(b.f))
        zj_jfail(&r->c, ZT_EUNSUPPORTED, "comparing containers holding NaN (Python's answer depends on object identity)");
    return zj_veq(r, a, b, depth);
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

int zj_veq(rctx *r, jv a, jv b, int depth) {
    depth_check(r, depth);
    zj_tick(&r->c, 1);
    if (isnum(a) && isnum(b)) return numcmp(a, b) == 0;
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR:
        zj_scan(&r->c, a.s->n);
        return a.s->n == b.s->n && memcmp(a.s->p, b.s->p, a.s->n) == 0;
    case V_LIST: {
        if (a.l == b.l) return 1;
        int ka = a.l->kind, kb = b.l->kind;
        if (ka == K_GEN || kb == K_GEN || ka == K_VALUES || kb == K_VALUES) return 0;   /* identity */
        if (ka == K_KEYS || ka == K_ITEMS || kb == K_KEYS || kb == K_ITEMS)
            zj_jfail(&r->c, ZT_EUNSUPPORTED, "comparing dict views (Python compares them as sets)");
        if (ka != kb || a.l->n != b.l->n) return 0;
        for (int i = 0; i < a.l->n; ++i) if (!zj_veq_item(r, a.l->v[i], b.l->v[i], depth + 1)) return 0;
        return 1;
    }
    case V_DICT:
        if (a.d == b.d) return 1;
        if (a.d->n != b.d->n) return 0;
        for (int i = 0; i < a.d->n; ++i) {
            int k = zj_dfind(b.d, a.d->k[i]->p, a.d->k[i]->n);
            if (k < 0 || !zj_veq_item(r, a.d->v[i], b.d->v[k], depth + 1)) return 0;
        }
        return 1;
    case V_RANGE: return range_eq(a.rg, b.rg);
    case V_FUNC: return a.fn == b.fn;
    case V_MACRO: return a.mc == b.mc;
    case V_NS: return a.d == b.d;
    case V_LOOP: return a.lp == b.lp;
    default: zj_jfail(&r->c, ZT_EUNSUPPORTED, "comparing %ss", zj_tname(a.t));
    }
}

/* three-way <, >: -1, 0, 1, 2 unordered (NaN) */
int zj_vcmp(rctx *r, jv a, jv b, const char *op, int depth) {
    depth_check(r, depth);
    zj_tick(&r->c, 1);
    if (a.t == V_UNDEF) zj_undef_fail(r, a, op);
    if (b.t == V_UNDEF) zj_undef_fail(r, b, op);
    if (isnum(a) && isnum(b)) return numcmp(a, b);
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.s->n < b.s->n ? a.s->n : b.s->n;
        zj_scan(&r->c, m);
        int cmp = memcmp(a.s->p, b.s->p, m);
        return cmp ? (cmp < 0 ? -1 : 1) : (a.s->n < b.s->n ? -1 : a.s->n > b.s->n);
    }
    if (a.t == V_LIST && b.t == V_LIST && a.l->kind == b.l->kind && (a.l->kind == K_LIST || a.l->kind == K_TUPLE)) {
        int n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (int i = 0; i < n; ++i)   /* the first items that differ decide */
            if (!zj_veq_item(r, a.l->v[i], b.l->v[i], depth + 1)) return zj_vcmp(r, a.l->v[i], b.l->v[i], op, depth + 1);
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    if (a.t == V_LIST && b.t == V_LIST && (a.l->kind == K_KEYS || a.l->kind == K_ITEMS))
        zj_jfail(&r->c, ZT_EUNSUPPORTED, "comparing dict views (Python compares them as sets)");
    zj_jfail(&r->c, ZT_EDATA, "'%s' not supported between instances of '%s' and '%s'", op, zj_pyname(a), zj_pyname(b));
}
int zj_cmp_holds(int op, int k) {
    if (k == 2) return 0;
    switch (op) {
    case OP_LT: return k < 0;
    case OP_GT: return k > 0;
    case OP_LE: return k <= 0;
    default: return k >= 0;
    }
}


static int range_has(const jrange *g, long long x) {
    if (g->n == 0) return 0;
    if (g->step > 0 ? (x < g->start || x >= g->stop) : (x > g->start || x <= g->stop)) return 0;
    unsigned long long d = g->step > 0 ? (unsigned long long)x - (unsigned long long)g->start
                                       : (unsigned long long)g->start - (unsigned long long)x;
    unsigned long long s = g->step > 0 ? (unsigned long long)g->step : 0ULL - (unsigned long long)g->step;
    return d % s == 0;
}

int zj_contains(rctx *r, jv hay, jv x) {
    jctx *c = &r->c;
    if (hay.t == V_STR) {
        if (x.t != V_STR) zj_jfail(c, ZT_EDATA, "'in <string>' requires string as left operand, not %s", zj_pyname(x));
        zj_scan(c, hay.s->n);
        if (x.s->n == 0) return 1;
        return memmem(hay.s->p, hay.s->n, x.s->p, x.s->n) != NULL;
    }
    if (hay.t == V_LIST) {
        if (hay.l->kind == K_KEYS && (x.t == V_DICT || (x.t == V_LIST && x.l->kind == K_LIST)))
            zj_jfail(c, ZT_EDATA, "unhashable type: '%s'", zj_pyname(x));
        jlist *l = hay.l->kind == K_GEN ? zj_consume(r, hay, "in") : hay.l;
        for (int i = 0; i < l->n; ++i) if (zj_veq_item(r, l->v[i], x, 0)) return 1;
        return 0;
    }
    if (hay.t == V_DICT) {
        if (x.t == V_DICT || (x.t == V_LIST && x.l->kind == K_LIST)) zj_jfail(c, ZT_EDATA, "unhashable type: '%s'", zj_pyname(x));
        if (x.t != V_STR) return 0;
        return zj_dfind(hay.d, x.s->p, x.s->n) >= 0;
    }
    if (hay.t == V_RANGE) {
        if (x.t == V_INT || x.t == V_BOOL) return range_has(hay.rg, ival(x));
        if (x.t == V_FLOAT)
            return isfinite(x.f) && x.f == floor(x.f) && fabs(x.f) < 9.2e18 && range_has(hay.rg, (long long)x.f);
        return 0;
    }
    if (hay.t == V_UNDEF) return 0;
    if (hay.t == V_LOOP) zj_jfail(c, ZT_EUNSUPPORTED, "'in' on a loop object");
    zj_jfail(c, ZT_EDATA, "argument of type '%s' is not iterable", zj_pyname(hay));
}

/* ---- sequences */

/* the items of an iterable (dict: keys, string: characters, range: its
 * numbers); an iterator is consumed: a second use is refused (jinja2 would
 * resume it where the first stopped) */
jlist *zj_consume(rctx *r, jv v, const char *what) {
    jlist *l = v.l;
    if (l->used)
        zj_jfail(&r->c, ZT_EUNSUPPORTED, "%s: a %s used a second time (jinja2 resumes it where the first use "
                 "stopped; convert it with |list)", what, l->what);
    l->used = 1;
    return l;
}
jlist *zj_items_of(rctx *r, jv v, const char *what) {
    jctx *c = &r->c;
    switch (v.t) {
    case V_LIST: return v.l->kind == K_GEN ? zj_consume(r, v, what) : v.l;
    case V_UNDEF: return zj_mklist(c, 0);
    case V_DICT: {
        jlist *l = zj_mklist(c, v.d->n);
        zj_tick(c, 1 + v.d->n / 16);
        for (int i = 0; i < v.d->n; ++i) zj_lpush(c, l, vstr(v.d->k[i]));
        return l;
    }
    case V_STR: {
        size_t n = zj_u8count(c, v.s), len;
        jlist *l = zj_mklist(c, (int)n);
        zj_tick(c, 1 + (long long)n / 16);
        for (size_t i = 0; i < v.s->n; i += len) {
            zj_u8at(v.s->p + i, v.s->n - i, &len);
            zj_lpush(c, l, vstr(zj_substr(c, v.s, i, i + len)));
        }
        return l;
    }
    case V_RANGE: {
        jlist *l = zj_mklist(c, (int)v.rg->n);
        zj_tick(c, 1 + v.rg->n / 16);
        for (long long i = 0; i < v.rg->n; ++i) zj_lpush(c, l, vint(range_at(v.rg, i)));
        return l;
    }
    case V_LOOP: zj_jfail(c, ZT_EUNSUPPORTED, "%s: iterating a loop object", what);
    default: zj_jfail(c, ZT_EDATA, "%s: '%s' object is not iterable", what, zj_pyname(v));
    }
}
jlist *zj_newlist(jctx *c, const jlist *l, int kind) {
    jlist *o = zj_aalloc(c, sizeof *o);
    o->n = o->cap = l->n;
    o->v = l->v;
    o->kind = kind;
    if (!o->cap) { o->cap = 4; o->v = zj_aalloc(c, 4 * sizeof(jv)); }
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
        if (st == 0) zj_jfail(&r->c, ZT_EDATA, "slice step cannot be zero");
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
    if (folded) zj_jfail(&r->c, ZT_EUNSUPPORTED, "a slice of literals that fails (%s; jinja2 folds it when it reads the "
                         "template, printing an undefined value)", msg);
    zj_jfail(&r->c, ZT_EDATA, "%s", msg);
}
#define bad_slice(r) slice_error(r, folded, "slice indices must be integers or None or have an __index__ method")

/* x[b:e:s]: jinja2 compiles a slice to Python's own subscript (errors are errors);
 * folded: all literals (see the parser) */
jv zj_do_slice(rctx *r, jv x, jv vs, jv ve, jv vt, int folded) {
    jctx *c = &r->c;
    long long b, e, st, k;
    if (x.t == V_UNDEF) zj_undef_fail(r, x, "a slice");
    zj_tick(c, 1);
    if (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)) {
        if (!slice_bounds(r, vs, ve, vt, x.l->n, &b, &e, &st, &k)) bad_slice(r);
        jlist *l = zj_mklist(c, (int)k);
        zj_tick(c, k / 16);
        for (long long i = 0; i < k; ++i) zj_lpush(c, l, x.l->v[b + i * st]);
        return vlistk(l, x.l->kind);
    }
    if (x.t == V_STR) {
        long long n = (long long)zj_u8count(c, x.s);
        if (!slice_bounds(r, vs, ve, vt, n, &b, &e, &st, &k)) bad_slice(r);
        if (st == 1) return vstr(zj_substr(c, x.s, zj_u8off(c, x.s, (size_t)b), zj_u8off(c, x.s, (size_t)(b + k))));
        sbuf o = {0};
        if (k) {
            size_t *off = zj_aalloc(c, ((size_t)n + 1) * sizeof(size_t));
            zj_scan(c, x.s->n);
            size_t j = 0, len;
            for (size_t i = 0; i < x.s->n; i += len) { off[j++] = i; zj_u8at(x.s->p + i, x.s->n - i, &len); }
            off[n] = x.s->n;
            zj_tick(c, k / 16);
            for (long long i = 0; i < k; ++i) {
                long long p = b + i * st;
                zj_sb_put(c, &o, zj_substr(c, x.s, off[p], off[p + 1]));
            }
        }
        jstr *s = zj_sb_str(c, &o);
        s->markup = x.s->markup;
        return vstr(s);
    }
    if (x.t == V_RANGE) {   /* a range: range(start + b*step, start + e*step, st*step), computed exactly */
        const jrange *g = x.rg;
        if (!slice_bounds(r, vs, ve, vt, g->n, &b, &e, &st, &k)) bad_slice(r);
        jrange *o = zj_aalloc(c, sizeof *o);
        long long t1, t2, st0 = vt.t == V_NONE ? 1 : ival(vt);   /* the step itself, not clamped */
        if (__builtin_mul_overflow(b, g->step, &t1) || __builtin_add_overflow(g->start, t1, &o->start) ||
            __builtin_mul_overflow(e, g->step, &t2) || __builtin_add_overflow(g->start, t2, &o->stop) ||
            __builtin_mul_overflow(st0, g->step, &o->step))
            zj_jfail(c, ZT_EUNSUPPORTED, "a slice of a range with bounds out of range " INT64_NOTE);
        o->n = k;
        jv v = {.t = V_RANGE};
        v.rg = o;
        return v;
    }
    slice_error(r, folded, zj_afmt(c, "'%s' object is not subscriptable with a slice", zj_pyname(x)));
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
    v.m = zj_aalloc(&r->c, sizeof *v.m);
    v.m->self = self;
    v.m->name = name;
    return v;
}

jv zj_loop_item(const jloop *lp, int i) {
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
    if (!strcmp(name, "previtem")) return i > 0 ? zj_loop_item(lp, i - 1) : vundefh("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? zj_loop_item(lp, i + 1) : vundefh("there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jv self = {.t = V_LOOP};
        self.lp = lp;
        return vmeth(r, self, name);
    }
    *found = 0;
    return vundef();
}

/* Python's getattr(x, name) in the sandbox; *found 0: AttributeError */
static jv pyattr(rctx *r, jv x, const char *name, int *found) {
    jctx *c = &r->c;
    *found = 1;
    size_t nl = strlen(name);
    if (nl >= 4 && name[0] == '_' && name[1] == '_' && name[nl - 1] == '_' && name[nl - 2] == '_')
        zj_jfail(c, ZT_EUNSUPPORTED, "attribute '%s'", name);
    switch (x.t) {
    case V_STR: if (zj_in_names(str_attrs, name)) return vmeth(r, x, name); break;
    case V_DICT:
        if (zj_in_names(dict_attrs, name)) {
            if (zj_in_names(unsafe_attrs, name))
                return vundefh(zj_afmt(c, "access to attribute '%s' of 'dict' object is unsafe", name));
            return vmeth(r, x, name);
        }
        break;
    case V_LIST: {
        int k = x.l->kind;
        if (k == K_LIST && zj_in_names(list_attrs, name)) {
            if (zj_in_names(unsafe_attrs, name))
                return vundefh(zj_afmt(c, "access to attribute '%s' of 'list' object is unsafe", name));
            return vmeth(r, x, name);
        }
        if (k == K_TUPLE && zj_in_names(tuple_attrs, name)) return vmeth(r, x, name);
        if (k >= K_GEN && zj_in_names(gen_attrs, name)) zj_jfail(c, ZT_EUNSUPPORTED, "attribute '%s' of a %s", name, zj_pyname(x));
        break;
    }
    case V_INT: case V_BOOL:
        if (!strcmp(name, "real") || !strcmp(name, "numerator")) return vint(ival(x));
        if (!strcmp(name, "imag")) return vint(0);
        if (!strcmp(name, "denominator")) return vint(1);
        if (zj_in_names(int_attrs, name)) return vmeth(r, x, name);
        break;
    case V_FLOAT:
        if (!strcmp(name, "real")) return x;
        if (!strcmp(name, "imag")) return vfloat(0.0);
        if (zj_in_names(float_attrs, name)) return vmeth(r, x, name);
        break;
    case V_RANGE:
        if (!strcmp(name, "start")) return vint(x.rg->start);
        if (!strcmp(name, "stop")) return vint(x.rg->stop);
        if (!strcmp(name, "step")) return vint(x.rg->step);
        if (zj_in_names(range_attrs, name)) return vmeth(r, x, name);
        break;
    case V_NS: {
        int i = zj_dfind(x.d, name, nl);
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
    if (o) return vundefh(zj_afmt(&r->c, "'%s' has no attribute '%.100s'", o, name));
    return vundefh(zj_afmt(&r->c, "'%s object' has no attribute '%.100s'", zj_pyname(x), name));
}

jv zj_getitem(rctx *r, jv x, jv k) {
    jctx *c = &r->c;
    if (x.t == V_UNDEF) zj_undef_fail(r, x, "a subscript");
    zj_tick(c, 1);
    if (x.t == V_DICT && k.t == V_STR) {
        int i = zj_dfind(x.d, k.s->p, k.s->n);
        if (i >= 0) return x.d->v[i];
    }
    if ((k.t == V_INT || k.t == V_BOOL) &&
        (x.t == V_STR || x.t == V_RANGE || (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)))) {
        long long i = ival(k);
        long long n = x.t == V_LIST ? x.l->n : x.t == V_RANGE ? x.rg->n : (long long)zj_u8count(c, x.s);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return vundefh(zj_afmt(c, "%s object has no element %lld", zj_pyname(x), ival(k)));
        if (x.t == V_LIST) return x.l->v[i];
        if (x.t == V_RANGE) return vint(range_at(x.rg, i));
        size_t b = zj_u8off(c, x.s, (size_t)i), len;
        zj_u8at(x.s->p + b, x.s->n - b, &len);
        return vstr(zj_substr(c, x.s, b, b + len));
    }
    if (k.t == V_STR) {   /* obj[name] failed: jinja2 tries getattr(obj, name) */
        char nm[256];
        if (k.s->n >= sizeof nm || memchr(k.s->p, 0, k.s->n)) return vundef();
        memcpy(nm, k.s->p, k.s->n);
        nm[k.s->n] = 0;
        int found;
        jv v = pyattr(r, x, nm, &found);
        if (found) return v;
        if (x.t == V_DICT) return vundefh(zj_afmt(c, "'dict object' has no attribute '%s'", nm));
    }
    return vundef();
}

jv zj_getattr_(rctx *r, jv x, const char *name) {
    if (x.t == V_UNDEF) zj_undef_fail(r, x, zj_afmt(&r->c, "attribute '%s'", name));
    zj_tick(&r->c, 1);
    int found;
    jv v = pyattr(r, x, name, &found);   /* getattr(obj, name) first */
    if (found) return v;
    if (x.t == V_DICT) {                 /* then obj[name] */
        int i = zj_dfind(x.d, name, strlen(name));
        if (i >= 0) return x.d->v[i];
    }
    return no_attr(r, x, name);
}

/* ---- operators */

/* markupsafe's escape (what Markup + str does to the str) */
static jstr *html_escape(rctx *r, jstr *s) {
    if (s->markup) return s;
    sbuf o = {0};
    size_t b = 0;
    zj_scan(&r->c, s->n);
    for (size_t i = 0; i < s->n; ++i) {
        const char *e = s->p[i] == '&' ? "&amp;" : s->p[i] == '<' ? "&lt;" : s->p[i] == '>' ? "&gt;" :
                        s->p[i] == '"' ? "&#34;" : s->p[i] == '\'' ? "&#39;" : NULL;
        if (!e) continue;
        zj_sb_put(&r->c, &o, zj_substr(&r->c, s, b, i));
        zj_sb_cstr(&r->c, &o, e);
        b = i + 1;
    }
    zj_sb_put(&r->c, &o, zj_substr(&r->c, s, b, s->n));
    return zj_sb_str(&r->c, &o);
}

static jstr *concat(rctx *r, jstr *a, jstr *b) {
    sbuf s = {0};
    zj_sb_put(&r->c, &s, a);
    zj_sb_put(&r->c, &s, b);
    return zj_sb_str(&r->c, &s);
}

jv zj_arith(rctx *r, int op, jv a, jv b) {
    jctx *c = &r->c;
    if (a.t == V_UNDEF) zj_undef_fail(r, a, zj_afmt(c, "'%s'", opname[op]));
    if (b.t == V_UNDEF) zj_undef_fail(r, b, zj_afmt(c, "'%s'", opname[op]));
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
        if (a.l->n > INT_MAX / 2 - b.l->n) zj_jfail(c, ZT_EDATA, "a list too long");
        jlist *l = zj_mklist(c, a.l->n + b.l->n);
        zj_tick(c, (a.l->n + b.l->n) / 16);
        for (int i = 0; i < a.l->n; ++i) zj_lpush(c, l, a.l->v[i]);
        for (int i = 0; i < b.l->n; ++i) zj_lpush(c, l, b.l->v[i]);
        return vlistk(l, a.l->kind);
    }
    if (op == OP_MUL && (((a.t == V_STR || a.t == V_LIST) && (b.t == V_INT || b.t == V_BOOL)) ||
                         ((b.t == V_STR || b.t == V_LIST) && (a.t == V_INT || a.t == V_BOOL)))) {
        jv s = a.t == V_STR || a.t == V_LIST ? a : b;
        long long k = ival(a.t == V_STR || a.t == V_LIST ? b : a);
        if (k < 0) k = 0;
        if (s.t == V_STR) {
            if (s.s->n && (unsigned long long)k > ZT_JINJA_MAX_OUTPUT / s.s->n)
                zj_jfail(c, ZT_EDATA, "a string passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_OUTPUT);
            sbuf o = {0};
            zj_sb_reserve(c, &o, s.s->n * (size_t)k);
            zj_tick(c, (long long)(s.s->n * (size_t)k) >> 10);
            for (long long i = 0; i < k; ++i) zj_sb_put(c, &o, s.s);
            jstr *res = zj_sb_str(c, &o);
            res->markup = s.s->markup;
            return vstr(res);
        }
        if (s.l->kind != K_LIST && s.l->kind != K_TUPLE) goto bad;
        if (s.l->n && (unsigned long long)k > (ZT_JINJA_MAX_MEMORY / sizeof(jv)) / (unsigned long long)s.l->n)
            zj_jfail(c, ZT_EDATA, "the template's memory passed the limit of %zu bytes " BUDGET, ZT_JINJA_MAX_MEMORY);
        jlist *l = zj_mklist(c, (int)(s.l->n * k));
        zj_tick(c, s.l->n * k / 16);
        for (long long i = 0; i < k; ++i)
            for (int j = 0; j < s.l->n; ++j) zj_lpush(c, l, s.l->v[j]);
        return vlistk(l, s.l->kind);
    }
    if (op == OP_MOD && a.t == V_STR) zj_jfail(c, ZT_EUNSUPPORTED, "string formatting with %%");
    if (!isnum(a) || !isnum(b)) goto bad;
    if (a.t != V_FLOAT && b.t != V_FLOAT && op != OP_DIV) {
        long long x = ival(a), y = ival(b);
        switch (op) {
        case OP_ADD: return vint(iadd(r, x, y));
        case OP_SUB: return vint(isub(r, x, y));
        case OP_MUL: return vint(imul(r, x, y));
        case OP_FDIV:
            if (!y) zj_jfail(c, ZT_EDATA, "integer division or modulo by zero");
            if (x == LLONG_MIN && y == -1) int_range(r, x, "//", y);
            return vint(pyfdiv(x, y));
        case OP_MOD:
            if (!y) zj_jfail(c, ZT_EDATA, "integer modulo by zero");
            return vint(y == -1 ? 0 : pymod(x, y));
        case OP_POW:
            if (y >= 0) return vint(ipow(r, x, y));
            if (x == 0) zj_jfail(c, ZT_EDATA, "0.0 cannot be raised to a negative power (Python's ZeroDivisionError)");
            return vfloat(float_pow(r, (double)x, (double)y));
        default: break;
        }
    }
    if (op == OP_DIV && a.t != V_FLOAT && b.t != V_FLOAT) {
        if (!ival(b)) zj_jfail(c, ZT_EDATA, "division by zero");
        return vfloat(int_truediv(ival(a), ival(b)));
    }
    double x = fval(a), y = fval(b), q, m;
    switch (op) {
    case OP_ADD: return vfloat(x + y);
    case OP_SUB: return vfloat(x - y);
    case OP_MUL: return vfloat(x * y);
    case OP_DIV: if (y == 0) zj_jfail(c, ZT_EDATA, "float division by zero"); return vfloat(x / y);
    case OP_FDIV:
        if (y == 0) zj_jfail(c, ZT_EDATA, "float floor division by zero");
        float_divmod(x, y, &q, &m);
        return vfloat(q);
    case OP_MOD:
        if (y == 0) zj_jfail(c, ZT_EDATA, "float modulo by zero");
        float_divmod(x, y, &q, &m);
        return vfloat(m);
    default: return vfloat(float_pow(r, x, y));
    }
bad:
    zj_jfail(c, ZT_EDATA, "unsupported operand type(s) for %s: '%s' and '%s'", opname[op], zj_pyname(a), zj_pyname(b));
}

int zj_compare(rctx *r, int op, jv a, jv b) {
    switch (op) {
    case OP_EQ: return zj_veq(r, a, b, 0);
    case OP_NE: return !zj_veq(r, a, b, 0);
    case OP_IN: return zj_contains(r, b, a);
    case OP_NOTIN: return !zj_contains(r, b, a);
    default: return zj_cmp_holds(op, zj_vcmp(r, a, b, opname[op], 0));
    }
}

