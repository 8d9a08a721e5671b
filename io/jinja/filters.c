/* filters.c -- the chat-template engine's builtins (jinja_int.h): Python's str helpers, call
 * arguments, the str / dict / list / loop methods, the global functions (range, namespace, dict,
 * raise_exception, strftime_now), tests and filters. */
#define _GNU_SOURCE   /* memmem */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "jinja_int.h"

/* ---- string helpers (Python str semantics on UTF-8) */

static int in_chars(uint32_t cp, const jstr *chars) {
    size_t len;
    for (size_t i = 0; i < chars->n; i += len)
        if (zj_u8at(chars->p + i, chars->n - i, &len) == cp) return 1;
    return 0;
}

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL = whitespace */
static jstr *pystrip(rctx *r, jstr *s, const jstr *chars, int which) {
    size_t b = 0, e = s->n, len;
    zj_scan(&r->c, s->n + (chars ? s->n * chars->n / 64 : 0));
    if (which & 1) {
        while (b < e) {
            uint32_t cp = zj_u8at(s->p + b, e - b, &len);
            if (chars ? !in_chars(cp, chars) : !zj_py_space(cp)) break;
            b += len;
        }
    }
    if (which & 2) {
        while (e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s->p[k] & 0xc0) == 0x80) --k;
            uint32_t cp = zj_u8at(s->p + k, e - k, &len);
            if (chars ? !in_chars(cp, chars) : !zj_py_space(cp)) break;
            e = k;
        }
    }
    return zj_substr(&r->c, s, b, e);
}

static jv pysplit(rctx *r, jstr *s, jv sep, long long maxsplit) {
    jctx *c = &r->c;
    jlist *l = zj_mklist(c, 4);
    zj_scan(c, s->n);
    if (sep.t == V_NONE) {
        size_t i = 0, len;
        for (;;) {
            while (i < s->n && zj_py_space(zj_u8at(s->p + i, s->n - i, &len))) i += len;
            if (i >= s->n) break;
            if (maxsplit >= 0 && l->n == maxsplit) {   /* the rest, trailing white space kept */
                zj_lpush(c, l, vstr(zj_substr(c, s, i, s->n)));
                break;
            }
            size_t b = i;
            while (i < s->n && !zj_py_space(zj_u8at(s->p + i, s->n - i, &len))) i += len;
            zj_lpush(c, l, vstr(zj_substr(c, s, b, i)));
        }
        zj_tick(c, l->n / 16);
        return vlist(l);
    }
    if (sep.t != V_STR) zj_jfail(c, ZT_EDATA, "split: must be str or None, not %s", zj_pyname(sep));
    if (sep.s->n == 0) zj_jfail(c, ZT_EDATA, "split: empty separator");
    size_t b = 0;
    for (;;) {
        if (maxsplit >= 0 && l->n >= maxsplit) break;
        const char *f = memmem(s->p + b, s->n - b, sep.s->p, sep.s->n);
        if (!f) break;
        size_t i = (size_t)(f - s->p);
        zj_lpush(c, l, vstr(zj_substr(c, s, b, i)));
        b = i + sep.s->n;
    }
    zj_lpush(c, l, vstr(zj_substr(c, s, b, s->n)));
    zj_tick(c, l->n / 16);
    return vlist(l);
}

static jstr *pyreplace(rctx *r, jstr *s, jstr *old, jstr *new_, long long count) {
    jctx *c = &r->c;
    sbuf o = {0};
    zj_scan(c, s->n);
    long long done = 0;
    if (old->n == 0) {   /* the new text before each character and at the end */
        size_t len;
        for (size_t i = 0; i <= s->n; i += len) {
            if (count < 0 || done < count) { zj_sb_raw(c, &o, new_->p, new_->n); done++; }
            if (i == s->n) break;
            zj_u8at(s->p + i, s->n - i, &len);
            zj_sb_put(c, &o, zj_substr(c, s, i, i + len));
        }
        return zj_sb_str(c, &o);
    }
    size_t b = 0;
    while (count < 0 || done < count) {
        const char *f = memmem(s->p + b, s->n - b, old->p, old->n);
        if (!f) break;
        size_t i = (size_t)(f - s->p);
        zj_sb_put(c, &o, zj_substr(c, s, b, i));
        zj_sb_raw(c, &o, new_->p, new_->n);
        b = i + old->n;
        done++;
    }
    zj_sb_put(c, &o, zj_substr(c, s, b, s->n));
    return zj_sb_str(c, &o);
}

/* ASCII case mapping; non-ASCII text is refused (Python maps it by Unicode tables).
 * mode 0 lower, 1 upper, 2 capitalize, 3 str.title(), 4 jinja2's |title */
static jstr *pycase(rctx *r, jstr *s, int mode, const char *what) {
    jctx *c = &r->c;
    zj_scan(c, s->n);
    for (size_t i = 0; i < s->n; ++i)
        if ((unsigned char)s->p[i] >= 0x80) zj_jfail(c, ZT_EUNSUPPORTED, "%s on non-ASCII text", what);
    jstr *o = zj_aalloc(c, sizeof *o);
    char *p = zj_aalloc(c, s->n + 1);
    int prev_alpha = 0;
    for (size_t i = 0; i < s->n; ++i) {
        char ch = s->p[i];
        int lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
        int to_up;
        if (mode == 4) {   /* a word starts after [-\s({[<] (jinja2's _word_beginning_split_re) */
            char pv = i ? s->p[i - 1] : 0;
            to_up = i == 0 || pv == '-' || pv == '(' || pv == '{' || pv == '[' || pv == '<' || zj_py_space((unsigned char)pv);
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
        if (!a->kw[i]) { if (++pos > maxpos) zj_jfail(&r->c, ZT_EUNSUPPORTED, "%s with %d positional arguments", what, pos); continue; }
        int ok = 0;
        for (int k = 0; kws && kws[k]; ++k) ok |= strcmp(kws[k], a->kw[i]) == 0;
        if (!ok) zj_jfail(&r->c, ZT_EUNSUPPORTED, "%s with the keyword argument '%s'", what, a->kw[i]);
    }
}
static void need_args(rctx *r, args *a, int minpos, const char *what) {
    int pos = 0;
    for (int i = 0; i < a->n; ++i) pos += !a->kw[i];
    if (pos < minpos) zj_jfail(&r->c, ZT_EDATA, "%s: missing a required argument", what);
}

static jstr *need_str(rctx *r, jv v, const char *what) {
    if (v.t == V_UNDEF) zj_undef_fail(r, v, what);
    if (v.t != V_STR) zj_jfail(&r->c, ZT_EDATA, "%s: must be str, not %s", what, zj_pyname(v));
    return v.s;
}
/* an optional integer argument (Python's index: int or bool); dflt when absent or None */
static long long opt_int(rctx *r, jv v, int has, long long dflt, const char *what) {
    if (!has || v.t == V_NONE) return dflt;
    if (v.t == V_INT || v.t == V_BOOL) return ival(v);
    if (v.t == V_UNDEF) zj_undef_fail(r, v, what);
    zj_jfail(&r->c, ZT_EDATA, "%s: '%s' object cannot be interpreted as an integer", what, zj_pyname(v));
}
/* an optional str-or-None argument; NULL: None or absent */
static jstr *opt_chars(rctx *r, jv v, int has, const char *what) {
    if (!has || v.t == V_NONE) return NULL;
    if (v.t == V_STR) return v.s;
    if (v.t == V_UNDEF) zj_undef_fail(r, v, what);
    zj_jfail(&r->c, ZT_EDATA, "%s arg must be None or str, not %s", what, zj_pyname(v));
}

static jv dict_view(rctx *r, jv x, int kind) {
    jctx *c = &r->c;
    jlist *l = zj_mklist(c, x.d->n);
    zj_tick(c, 1 + x.d->n / 16);
    for (int i = 0; i < x.d->n; ++i)
        zj_lpush(c, l, kind == K_KEYS ? vstr(x.d->k[i]) : kind == K_VALUES ? x.d->v[i] : zj_pair(c, vstr(x.d->k[i]), x.d->v[i]));
    return vlistk(l, kind);
}

/* str / dict / list / loop methods called as x.name(args) */
static jv call_method(rctx *r, jv x, const char *m, args *a) {
    jctx *c = &r->c;
    if (x.t == V_STR) {
        jstr *s = x.s;
        if (s->markup) zj_jfail(c, ZT_EUNSUPPORTED, "method str.%s() of a |safe string (jinja2's Markup escapes)", m);
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jv p = arg(a, 0, NULL, NULL);
            int ends = m[0] == 'e', isl = p.t == V_LIST && p.l->kind == K_TUPLE, n = isl ? p.l->n : 1;
            if (p.t == V_UNDEF) zj_undef_fail(r, p, m);
            if (p.t != V_STR && !isl) zj_jfail(c, ZT_EDATA, "%s first arg must be str or a tuple of str, not %s", m, zj_pyname(p));
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
            if (hs && sep.t == V_UNDEF) zj_undef_fail(r, sep, m);
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
            jlist *l = zj_items_of(r, arg(a, 0, NULL, NULL), "join");
            sbuf o = {0};
            zj_tick(c, l->n / 16);
            for (int i = 0; i < l->n; ++i) {
                if (i) zj_sb_put(c, &o, s);
                jv e = l->v[i];
                if (e.t != V_STR) zj_jfail(c, ZT_EDATA, "join: sequence item %d: expected str instance, %s found", i, zj_pyname(e));
                zj_sb_put(c, &o, e.s);
            }
            return vstr(zj_sb_str(c, &o));
        }
        if (!strcmp(m, "find") || !strcmp(m, "count")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jstr *q = need_str(r, arg(a, 0, NULL, NULL), m);
            zj_scan(c, s->n);
            if (m[0] == 'f') {
                const char *f = q->n ? memmem(s->p, s->n, q->p, q->n) : s->p;
                if (!f) return vint(-1);
                jstr pre = {s->p, (size_t)(f - s->p), NULL, 0, 0, 0};
                return vint((long long)zj_u8count(c, &pre));
            }
            if (q->n == 0) return vint((long long)zj_u8count(c, s) + 1);
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
            if (k.t == V_DICT || (k.t == V_LIST && k.l->kind == K_LIST)) zj_jfail(c, ZT_EDATA, "unhashable type: '%s'", zj_pyname(k));
            int i = k.t == V_STR ? zj_dfind(x.d, k.s->p, k.s->n) : -1;
            if (i >= 0) return x.d->v[i];
            int has;
            jv d = arg(a, 1, NULL, &has);
            return has ? d : vnone();
        }
        if (!strcmp(m, "copy")) {
            check_args(r, a, 0, NULL, m);
            jv d = {.t = V_DICT};
            d.d = zj_mkdict(c);
            zj_tick(c, 1 + x.d->n / 16);
            for (int i = 0; i < x.d->n; ++i) zj_dset(c, d.d, x.d->k[i], x.d->v[i]);
            return d;
        }
    } else if (x.t == V_LIST && (x.l->kind == K_LIST || x.l->kind == K_TUPLE)) {
        if (!strcmp(m, "count") || !strcmp(m, "index")) {
            check_args(r, a, 1, NULL, m);
            need_args(r, a, 1, m);
            jv y = arg(a, 0, NULL, NULL);
            long long cnt = 0;
            for (int i = 0; i < x.l->n; ++i)
                if (zj_veq_item(r, x.l->v[i], y, 0)) {
                    if (m[0] == 'i') return vint(i);
                    cnt++;
                }
            if (m[0] == 'i') zj_jfail(c, ZT_EDATA, "%s.index(x): x not in %s", zj_pyname(x), zj_pyname(x));
            return vint(cnt);
        }
        if (!strcmp(m, "copy") && x.l->kind == K_LIST) {
            check_args(r, a, 0, NULL, m);
            return vlist(zj_newlist(c, x.l, K_LIST));
        }
    } else if (x.t == V_LOOP) {
        jloop *lp = x.lp;
        if (!strcmp(m, "cycle")) {
            for (int i = 0; i < a->n; ++i) if (a->kw[i]) zj_jfail(c, ZT_EDATA, "loop.cycle() takes no keyword arguments");
            if (a->n == 0) zj_jfail(c, ZT_EDATA, "loop.cycle(): no items for cycling given");
            return a->v[lp->i % a->n];
        }
        if (!strcmp(m, "changed")) {
            for (int i = 0; i < a->n; ++i) if (a->kw[i]) zj_jfail(c, ZT_EUNSUPPORTED, "loop.changed() with keyword arguments");
            jlist *t = zj_mklist(c, a->n);
            for (int i = 0; i < a->n; ++i) zj_lpush(c, t, a->v[i]);
            t->kind = K_TUPLE;
            if (lp->has_chg && zj_veq(r, vlist(lp->chg), vlist(t), 0)) return vbool(0);
            lp->chg = t;
            lp->has_chg = 1;
            return vbool(1);
        }
    }
    zj_jfail(c, ZT_EUNSUPPORTED, "method %s.%s()", zj_pyname(x), m);
}

static jv mkrange(rctx *r, long long start, long long stop, long long step) {
    jctx *c = &r->c;
    if (step == 0) zj_jfail(c, ZT_EDATA, "range() arg 3 must not be zero");
    unsigned long long n = 0;   /* Python's len(range(...)), exactly */
    if (step > 0 && start < stop)
        n = ((unsigned long long)stop - (unsigned long long)start - 1) / (unsigned long long)step + 1;
    else if (step < 0 && start > stop)
        n = ((unsigned long long)start - (unsigned long long)stop - 1) / (0ULL - (unsigned long long)step) + 1;
    if (n > ZT_JINJA_MAX_RANGE)
        zj_jfail(c, ZT_EDATA, "range too big: the sandbox blocks ranges larger than MAX_RANGE (%d), as jinja2's",
                 ZT_JINJA_MAX_RANGE);
    jv v = {.t = V_RANGE};
    v.rg = zj_aalloc(c, sizeof *v.rg);
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
        jstr *s = zj_to_str(r, arg(a, 0, NULL, NULL));
        zj_jfail(c, ZT_EDATA, "the template raised: %.*s", (int)(s->n < 300 ? s->n : 300), s->p);
    }
    case F_STRFTIME: {
        check_args(r, a, 1, NULL, "strftime_now");
        need_args(r, a, 1, "strftime_now");
        jstr *f = need_str(r, arg(a, 0, NULL, NULL), "strftime_now");
        char fmt[256], buf[256];
        if (f->n >= sizeof fmt || memchr(f->p, 0, f->n)) zj_jfail(c, ZT_EUNSUPPORTED, "strftime_now format longer than 255 bytes");
        memcpy(fmt, f->p, f->n);
        fmt[f->n] = 0;
        /* SOURCE_DATE_EPOCH (reproducible builds): that time, in UTC; else now, local */
        const char *sde = getenv("SOURCE_DATE_EPOCH");
        struct tm tm;
        if (sde && *sde) {
            char *end;
            errno = 0;
            long long v = strtoll(sde, &end, 10);
            time_t t = (time_t)v;
            if (*end || errno || v < 0 || (long long)t != v || !gmtime_r(&t, &tm))
                zj_jfail(c, ZT_EINVAL, "strftime_now: SOURCE_DATE_EPOCH '%.40s' is not a number of seconds since "
                         "1970-01-01 UTC", sde);
        } else {
            time_t now = time(NULL);
            localtime_r(&now, &tm);
        }
        size_t k = strftime(buf, sizeof buf, fmt, &tm);
        return vstr(zj_mkstr(c, buf, k));
    }
    case F_NAMESPACE: case F_DICT: {
        jv d = {.t = fn == F_NAMESPACE ? V_NS : V_DICT};
        d.d = zj_mkdict(c);
        for (int i = 0; i < a->n; ++i) {
            if (!a->kw[i]) zj_jfail(c, ZT_EUNSUPPORTED, "%s() with positional arguments", fn == F_DICT ? "dict" : "namespace");
            if (fn == F_NAMESPACE && a->kw[i][0] == '_')
                zj_jfail(c, ZT_EDATA, "chat templates cannot store underscore-prefixed attributes on a namespace, "
                         "but got '%s' (transformers' SecurityError)", a->kw[i]);
            zj_dset(c, d.d, zj_mkstr(c, a->kw[i], strlen(a->kw[i])), a->v[i]);
        }
        return d;
    }
    default: {
        for (int i = 0; i < a->n; ++i) if (a->kw[i]) zj_jfail(c, ZT_EDATA, "range() takes no keyword arguments");
        if (a->n == 0) zj_jfail(c, ZT_EDATA, "range expected at least 1 argument, got 0");
        if (a->n > 3) zj_jfail(c, ZT_EDATA, "range expected at most 3 arguments, got %d", a->n);
        long long p[3] = {0, 0, 1};
        for (int i = 0; i < a->n; ++i) {
            jv v = a->v[i];
            if (v.t == V_UNDEF) zj_undef_fail(r, v, "range()");
            if (v.t != V_INT && v.t != V_BOOL) zj_jfail(c, ZT_EDATA, "range(): '%s' object cannot be interpreted as an integer", zj_pyname(v));
            p[i] = ival(v);
        }
        if (a->n == 1) { p[1] = p[0]; p[0] = 0; }
        return mkrange(r, p[0], p[1], p[2]);
    }
    }
}

jv zj_call_value(rctx *r, jv f, args *a) {
    if (f.t == V_FUNC) return call_func(r, f.fn, a);
    if (f.t == V_METHOD) return call_method(r, f.m->self, f.m->name, a);
    if (f.t == V_UNDEF) zj_undef_fail(r, f, "a call");
    if (f.t == V_LOOP) zj_jfail(&r->c, ZT_EUNSUPPORTED, "calling loop (recursive loops)");
    zj_jfail(&r->c, ZT_EDATA, "'%s' object is not callable", zj_pyname(f));
}

/* ---- tests */

static int test_mod(rctx *r, jv x, jv y, long long want, const char *t) {
    if (x.t == V_UNDEF) zj_undef_fail(r, x, zj_afmt(&r->c, "test '%s'", t));
    jv m = zj_arith(r, OP_MOD, x, y);
    return zj_veq(r, m, vint(want), 0);
}


int zj_apply_test(rctx *r, const char *t, int unknown, jv x, args *a) {
    jctx *c = &r->c;
    if (unknown) zj_jfail(c, ZT_EDATA, "no test named '%s'", t);
    int has;
    jv y = arg(a, 0, NULL, &has);
    static const char *const one[] = {"equalto", "eq", "==", "ne", "!=", "lt", "lessthan", "<", "gt", "greaterthan",
                                      ">", "le", "<=", "ge", ">=", "in", "sameas", "divisibleby", NULL};
    int nargs = zj_in_names(one, t);
    check_args(r, a, nargs, NULL, zj_afmt(c, "test '%s'", t));
    if (nargs) need_args(r, a, 1, zj_afmt(c, "test '%s'", t));
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
    if (!strcmp(t, "callable")) return x.t == V_FUNC || x.t == V_METHOD || x.t == V_MACRO || x.t == V_UNDEF || x.t == V_LOOP;
    if (!strcmp(t, "escaped")) return x.t == V_STR && x.s->markup;
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "==")) return zj_veq(r, x, y, 0);
    if (!strcmp(t, "ne") || !strcmp(t, "!=")) return !zj_veq(r, x, y, 0);
    if (!strcmp(t, "lt") || !strcmp(t, "lessthan") || !strcmp(t, "<")) return zj_cmp_holds(OP_LT, zj_vcmp(r, x, y, "<", 0));
    if (!strcmp(t, "gt") || !strcmp(t, "greaterthan") || !strcmp(t, ">")) return zj_cmp_holds(OP_GT, zj_vcmp(r, x, y, ">", 0));
    if (!strcmp(t, "le") || !strcmp(t, "<=")) return zj_cmp_holds(OP_LE, zj_vcmp(r, x, y, "<=", 0));
    if (!strcmp(t, "ge") || !strcmp(t, ">=")) return zj_cmp_holds(OP_GE, zj_vcmp(r, x, y, ">=", 0));
    if (!strcmp(t, "in")) return zj_contains(r, y, x);
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
        case V_MACRO: return x.mc == y.mc;
        default: zj_jfail(c, ZT_EUNSUPPORTED, "'sameas' on %ss (Python's identity of numbers and strings is an "
                          "implementation detail)", zj_tname(x.t));
        }
    }
    if (!strcmp(t, "odd")) return test_mod(r, x, vint(2), 1, t);
    if (!strcmp(t, "even")) return test_mod(r, x, vint(2), 0, t);
    if (!strcmp(t, "divisibleby")) return test_mod(r, x, y, 0, t);
    zj_jfail(c, ZT_EUNSUPPORTED, "test 'is %s'", t);
}

/* ---- filters */

/* select / reject / selectattr / rejectattr */
static jv getpath(rctx *r, jv x, jstr *path, const char *what);

static jv do_select(rctx *r, jv seq, args *a, int attr, int keep, const char *what) {
    jctx *c = &r->c;
    if (!zj_truthy(seq)) return vgen(zj_mklist(c, 0), "generator");   /* jinja2: `if value:` first */
    jlist *l = zj_items_of(r, seq, what);
    jlist *o = zj_mklist(c, 4);
    int base = attr ? 1 : 0;
    jstr *an = NULL;
    if (attr) {
        need_args(r, a, 1, what);
        jv av = arg(a, 0, NULL, NULL);
        if (av.t != V_STR) zj_jfail(c, ZT_EUNSUPPORTED, "%s with a %s attribute", what, zj_tname(av.t));
        an = av.s;
    }
    for (int i = 0; i < a->n; ++i) if (a->kw[i]) zj_jfail(c, ZT_EUNSUPPORTED, "%s with keyword arguments", what);
    int has;
    jv tn = arg(a, base, NULL, &has);
    args ta = {0};
    for (int i = base + 1; i < a->n && ta.n < 8; ++i) { ta.v[ta.n] = a->v[i]; ta.kw[ta.n++] = a->kw[i]; }
    char tnm[64] = "";
    if (has) {
        if (tn.t == V_UNDEF) zj_undef_fail(r, tn, zj_afmt(c, "%s's test name", what));
        jstr *ts = need_str(r, tn, what);
        snprintf(tnm, sizeof tnm, "%.*s", (int)(ts->n < 63 ? ts->n : 63), ts->p);
    }
    int unknown = has && !zj_in_names(zj_jinja_tests, tnm);
    for (int i = 0; i < l->n; ++i) {
        zj_tick(c, 1);
        jv x = l->v[i];
        if (attr) x = getpath(r, x, an, what);
        int ok = has ? zj_apply_test(r, tnm, unknown, x, &ta) : zj_truthy(x);
        if (ok == keep) zj_lpush(c, o, l->v[i]);
    }
    return vgen(o, "generator");
}

/* jinja2's make_attrgetter: environment.getitem per dotted part, digits as integers */
static jv getpath(rctx *r, jv x, jstr *path, const char *what) {
    size_t b = 0;
    for (;;) {
        const char *dot = memchr(path->p + b, '.', path->n - b);
        size_t e = dot ? (size_t)(dot - path->p) : path->n;
        jstr *part = zj_substr(&r->c, path, b, e);
        int digits = part->n > 0;
        for (size_t i = 0; i < part->n; ++i) digits &= part->p[i] >= '0' && part->p[i] <= '9';
        long long k;
        if (digits && py_int_parse(part->p, part->n, 10, &k) == 0) x = zj_getitem(r, x, vint(k));
        else x = zj_getitem(r, x, vstr(part));
        if (!dot) return x;
        if (x.t == V_UNDEF) return x;
        b = e + 1;
        (void)what;
    }
}

static jv reversed(rctx *r, jv x) {
    jctx *c = &r->c;
    if (x.t == V_STR) return zj_do_slice(r, x, vnone(), vnone(), vint(-1), 0);
    const char *what = NULL;
    jlist *l = NULL;
    if (x.t == V_LIST && x.l->kind == K_GEN) {   /* reversed() fails: list(value), reversed */
        l = zj_consume(r, x, "reverse");
    } else {
        if (x.t == V_LIST) what = x.l->kind == K_LIST ? "list_reverseiterator" : x.l->kind == K_TUPLE ? "reversed" :
                                  x.l->kind == K_KEYS ? "dict_reversekeyiterator" :
                                  x.l->kind == K_VALUES ? "dict_reversevalueiterator" : "dict_reverseitemiterator";
        else if (x.t == V_RANGE) what = "range_iterator";
        else if (x.t == V_DICT) what = "dict_reversekeyiterator";
        else if (x.t == V_UNDEF) what = "reversed";
        else zj_jfail(c, ZT_EDATA, "reverse: argument must be iterable (a %s)", zj_pyname(x));
        l = zj_items_of(r, x, "reverse");
    }
    jlist *o = zj_mklist(c, l->n);
    zj_tick(c, l->n / 16);
    for (int i = l->n - 1; i >= 0; --i) zj_lpush(c, o, l->v[i]);
    return what ? vgen(o, what) : vlist(o);
}

static jv filter_int(rctx *r, jv x, args *a) {
    jctx *c = &r->c;
    static const char *const kws[] = {"default", "base", NULL};
    check_args(r, a, 2, kws, "int");
    int hd, hb;
    jv dflt = arg(a, 0, "default", &hd), bv = arg(a, 1, "base", &hb);
    if (!hd) dflt = vint(0);
    if (x.t == V_UNDEF) zj_undef_fail(r, x, "int()");
    if (x.t == V_INT) return x;
    if (x.t == V_BOOL) return vint(x.b);
    if (x.t == V_FLOAT) {
        if (isnan(x.f)) return dflt;
        if (isinf(x.f)) zj_jfail(c, ZT_EDATA, "int: cannot convert float infinity to integer (Python's OverflowError)");
        if (!(fabs(x.f) < 9223372036854775808.0))
            zj_jfail(c, ZT_EUNSUPPORTED, "int of %g out of range " INT64_NOTE, x.f);
        return vint((long long)x.f);
    }
    if (x.t == V_STR) {
        jstr *s = pystrip(r, x.s, NULL, 3);
        for (size_t i = 0; i < s->n; ++i)
            if ((unsigned char)s->p[i] >= 0x80)
                zj_jfail(c, ZT_EUNSUPPORTED, "int of a string with non-ASCII characters (Python reads all Unicode digits)");
        long long base = 10;
        int base_ok = 1;
        if (hb) {
            if (bv.t == V_INT || bv.t == V_BOOL) base = ival(bv);
            else if (bv.t == V_UNDEF) zj_undef_fail(r, bv, "int()");
            else base_ok = 0;
            if (base != 0 && (base < 2 || base > 36)) base_ok = 0;
        }
        long long v;
        int rc = base_ok ? py_int_parse(s->p, s->n, (int)base, &v) : 1;
        if (rc == 0) return vint(v);
        if (rc == 2) zj_jfail(c, ZT_EUNSUPPORTED, "int of '%.*s' out of range " INT64_NOTE, (int)(s->n < 60 ? s->n : 60), s->p);
        double d;   /* jinja2: int(float(value)) */
        if (py_float_parse(s->p, s->n, &d) || !isfinite(d)) return dflt;   /* its OverflowError too */
        if (!(fabs(d) < 9223372036854775808.0)) zj_jfail(c, ZT_EUNSUPPORTED, "int of %g out of range " INT64_NOTE, d);
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
    o.ascii = zj_truthy(ea);
    o.sort = zj_truthy(sk);
    if (hi && ind.t != V_NONE) {
        o.indent = 1;
        if (ind.t == V_INT || ind.t == V_BOOL) {
            long long k = ival(ind);
            if (k > (long long)ZT_JINJA_MAX_OUTPUT) k = (long long)ZT_JINJA_MAX_OUTPUT + 1;
            sbuf s = {0};
            for (long long i = 0; i < k; ++i) zj_sb_raw(c, &s, " ", 1);
            o.ind = zj_sb_str(c, &s);
        } else if (ind.t == V_STR) {
            o.ind = ind.s;
        } else if (ind.t == V_UNDEF) {
            zj_undef_fail(r, ind, "tojson's indent");
        } else {
            zj_jfail(c, ZT_EDATA, "tojson: indent of type %s", zj_pyname(ind));
        }
    }
    static jstr comma = {",", 1, NULL, 0, 0, 0}, comma_sp = {", ", 2, NULL, 0, 0, 0}, colon_sp = {": ", 2, NULL, 0, 0, 0};
    o.isep = o.indent ? &comma : &comma_sp;
    o.ksep = &colon_sp;
    if (hs && sep.t != V_NONE) {
        if (sep.t == V_UNDEF) zj_undef_fail(r, sep, "tojson's separators");
        if (sep.t != V_LIST || (sep.l->kind != K_LIST && sep.l->kind != K_TUPLE) || sep.l->n != 2 ||
            sep.l->v[0].t != V_STR || sep.l->v[1].t != V_STR)
            zj_jfail(c, ZT_EUNSUPPORTED, "tojson separators other than two strings");
        o.isep = sep.l->v[0].s;
        o.ksep = sep.l->v[1].s;
    }
    sbuf b = {0};
    zj_json_into(r, &b, x, &o, 0);
    return vstr(zj_sb_str(c, &b));   /* traced strings stay traced (an escape as its character) */
}

jv zj_apply_filter(rctx *r, const char *f, int unknown, jv x, args *a) {
    jctx *c = &r->c;
    if (unknown) zj_jfail(c, ZT_EDATA, "no filter named '%s'", f);
    if (x.t == V_STR && x.s->markup) {   /* jinja2's Markup: only what keeps its text as it is */
        static const char *const ok[] = {"safe", "string", "length", "count", "tojson", "default", "d", "list",
                                         "first", "last", "join", "int", NULL};
        if (!zj_in_names(ok, f)) zj_jfail(c, ZT_EUNSUPPORTED, "filter '%s' on a |safe string (jinja2's Markup escapes)", f);
    }
    if (!strcmp(f, "safe")) {
        check_args(r, a, 0, NULL, f);
        jstr *s = zj_to_str(r, x), *o = zj_aalloc(c, sizeof *o);
        *o = *s;
        o->markup = 1;
        return vstr(o);
    }
    if (!strcmp(f, "trim")) {
        check_args(r, a, 1, NULL, f);
        int has;
        jv ch = arg(a, 0, NULL, &has);
        return vstr(pystrip(r, zj_to_str(r, x), opt_chars(r, ch, has, "strip"), 3));
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        check_args(r, a, 0, NULL, f);
        switch (x.t) {
        case V_STR: return vint((long long)zj_u8count(c, x.s));
        case V_LIST: if (x.l->kind == K_GEN) break; return vint(x.l->n);
        case V_DICT: return vint(x.d->n);
        case V_RANGE: return vint(x.rg->n);
        case V_LOOP: return vint(x.lp->n);
        case V_UNDEF: return vint(0);
        default: break;
        }
        zj_jfail(c, ZT_EDATA, "%s: object of type '%s' has no len()", f, zj_pyname(x));
    }
    if (!strcmp(f, "string")) { check_args(r, a, 0, NULL, f); return vstr(zj_to_str(r, x)); }
    if (!strcmp(f, "lower") || !strcmp(f, "upper") || !strcmp(f, "capitalize") || !strcmp(f, "title")) {
        check_args(r, a, 0, NULL, f);
        return vstr(pycase(r, zj_to_str(r, x), f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 'c' ? 2 : 4, f));
    }
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        static const char *const kws[] = {"default_value", "boolean", NULL};
        check_args(r, a, 2, kws, "default");
        int hd;
        jv dv = arg(a, 0, "default_value", &hd), bo = arg(a, 1, "boolean", NULL);
        if (x.t == V_UNDEF || (zj_truthy(bo) && !zj_truthy(x))) return hd ? dv : vstr(zj_mkstr(c, "", 0));
        return x;
    }
    if (!strcmp(f, "first")) {
        check_args(r, a, 0, NULL, f);
        jlist *l = zj_items_of(r, x, f);
        return l->n ? l->v[0] : vundefh("no first item, sequence was empty");
    }
    if (!strcmp(f, "last")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_LIST && x.l->kind == K_GEN) zj_jfail(c, ZT_EDATA, "last: '%s' object is not reversible", x.l->what);
        jlist *l = zj_items_of(r, x, f);
        return l->n ? l->v[l->n - 1] : vundefh("no last item, sequence was empty");
    }
    if (!strcmp(f, "list")) {
        check_args(r, a, 0, NULL, f);
        return vlist(zj_newlist(c, zj_items_of(r, x, f), K_LIST));
    }
    if (!strcmp(f, "reverse")) { check_args(r, a, 0, NULL, f); return reversed(r, x); }
    if (!strcmp(f, "join")) {
        static const char *const kws[] = {"d", "attribute", NULL};
        check_args(r, a, 2, kws, "join");
        int has;
        jv at = arg(a, 1, "attribute", &has);
        jv sep = arg(a, 0, "d", NULL);
        jstr *s = zj_to_str(r, sep);
        jlist *l = zj_items_of(r, x, "join");
        sbuf o = {0};
        zj_tick(c, l->n / 16);
        for (int i = 0; i < l->n; ++i) {
            if (i) zj_sb_put(c, &o, s);
            jv e = l->v[i];
            if (has) {
                if (at.t != V_STR) zj_jfail(c, ZT_EUNSUPPORTED, "join with a %s attribute", zj_tname(at.t));
                e = getpath(r, e, at.s, "join");
            }
            zj_sb_put(c, &o, zj_to_str(r, e));
        }
        return vstr(zj_sb_str(c, &o));
    }
    if (!strcmp(f, "items")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_UNDEF) return vgen(zj_mklist(c, 0), "generator");
        if (x.t != V_DICT) zj_jfail(c, ZT_EDATA, "items: can only get item pairs from a mapping (a %s)", zj_pyname(x));
        jv v = dict_view(r, x, K_ITEMS);
        return vgen(v.l, "generator");
    }
    if (!strcmp(f, "tojson")) return filter_tojson(r, x, a);
    if (!strcmp(f, "replace")) {
        check_args(r, a, 3, NULL, f);
        need_args(r, a, 2, f);
        int has;
        jv cnt = arg(a, 2, NULL, &has);
        return vstr(pyreplace(r, zj_to_str(r, x), zj_to_str(r, arg(a, 0, NULL, NULL)), zj_to_str(r, arg(a, 1, NULL, NULL)),
                              opt_int(r, cnt, has, -1, "replace")));
    }
    if (!strcmp(f, "int")) return filter_int(r, x, a);
    if (!strcmp(f, "abs")) {
        check_args(r, a, 0, NULL, f);
        if (x.t == V_INT) return vint(x.i < 0 ? zj_ineg(r, x.i) : x.i);
        if (x.t == V_BOOL) return vint(x.b);
        if (x.t == V_FLOAT) return vfloat(fabs(x.f));
        if (x.t == V_UNDEF) zj_undef_fail(r, x, "abs()");
        zj_jfail(c, ZT_EDATA, "bad operand type for abs(): '%s'", zj_pyname(x));
    }
    if (!strcmp(f, "select")) return do_select(r, x, a, 0, 1, f);
    if (!strcmp(f, "reject")) return do_select(r, x, a, 0, 0, f);
    if (!strcmp(f, "selectattr")) return do_select(r, x, a, 1, 1, f);
    if (!strcmp(f, "rejectattr")) return do_select(r, x, a, 1, 0, f);
    if (!strcmp(f, "map")) {
        if (!zj_truthy(x)) return vgen(zj_mklist(c, 0), "generator");   /* jinja2: `if value:` first */
        jlist *l = zj_items_of(r, x, "map");
        int has;
        jv at = arg(a, 99, "attribute", &has);
        jlist *o = zj_mklist(c, l->n);
        if (has) {
            static const char *const kws[] = {"attribute", "default", NULL};
            check_args(r, a, 0, kws, "map");
            if (at.t != V_STR) zj_jfail(c, ZT_EUNSUPPORTED, "map with a %s attribute", zj_tname(at.t));
            int hd;
            jv dflt = arg(a, 99, "default", &hd);
            for (int i = 0; i < l->n; ++i) {
                zj_tick(c, 1);
                jv v = getpath(r, l->v[i], at.s, "map");
                zj_lpush(c, o, v.t == V_UNDEF && hd ? dflt : v);
            }
            return vgen(o, "generator");
        }
        need_args(r, a, 1, "map");
        jv fv = arg(a, 0, NULL, NULL);
        if (fv.t == V_UNDEF) zj_undef_fail(r, fv, "map's filter name");
        jstr *fn = need_str(r, fv, "map");
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(fn->n < 63 ? fn->n : 63), fn->p);
        int unk = !zj_in_names(zj_jinja_filters, nm);
        args fa = {0};
        for (int i = 1; i < a->n && fa.n < 8; ++i) { fa.v[fa.n] = a->v[i]; fa.kw[fa.n++] = a->kw[i]; }
        for (int i = 0; i < l->n; ++i) { zj_tick(c, 1); zj_lpush(c, o, zj_apply_filter(r, nm, unk, l->v[i], &fa)); }
        return vgen(o, "generator");
    }
    zj_jfail(c, ZT_EUNSUPPORTED, "filter '%s'", f);
}

