/* lex.c -- the chat-template engine's lexer (jinja_int.h): a template's text -> tokens, with
 * jinja2's whitespace rules under trim_blocks + lstrip_blocks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja_int.h"

/* ---------------------------------------------------------------- lexer */

static void tpush(lexer *L, int k, int line, const char *p, size_t n) {
    if (L->n == L->cap) {
        if (L->cap > INT_MAX / 2) zj_jfail(L->c, ZT_EDATA, "too many tokens");
        int cap = L->cap ? L->cap * 2 : 256;
        tok *nt = zj_aalloc(L->c, (size_t)cap * sizeof(tok));
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
    uint32_t c = zj_u8at(s, n, &len);
    return zj_py_space(c) ? len : 0;
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
jstr *zj_unescape(jctx *c, const char *p, size_t n) {
    char *o = zj_aalloc(c, n * 4 + 1);
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
        case 'N': zj_jfail(c, ZT_EUNSUPPORTED, "named escapes (\\N{...}) in a string literal");
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && p[i] >= '0' && p[i] <= '7') { cp = cp * 8 + (uint32_t)(p[i] - '0'); ++i; ++d; }
                --i;
                hex = -1;
            } else if ((unsigned char)e >= 0x80) {
                /* jinja2 turns the character into \xNN / \uNNNN text first */
                zj_jfail(c, ZT_EUNSUPPORTED, "a backslash before a non-ASCII character in a string literal");
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
                if (v < 0) zj_jfail(c, ZT_EDATA, "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)v;
                ++i;
            }
        }
        if (hex) {
            if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
                zj_jfail(c, ZT_EUNSUPPORTED, "escape \\%c for code point U+%04X in a string literal", e, cp);
            put_u8(o, &k, cp);
        }
    }
    jstr *s = zj_aalloc(c, sizeof *s);
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
        if (b + 1 >= sizeof buf) zj_jfail(c, ZT_EUNSUPPORTED, "a number literal of more than %zu digits", sizeof buf - 1);
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
            zj_jfail(c, ZT_EUNSUPPORTED, "integer literal %.*s out of range " INT64_NOTE, (int)(m < 100 ? m : 100), s);
        L->t[L->n - 1].i = (long long)v;
    }
    return m;
}

void zj_lex(lexer *L, const char *src, size_t n) {
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
            if (!e) zj_jfail(c, ZT_EDATA, "missing end of comment tag");
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
            if (p >= n) zj_jfail(c, ZT_EDATA, "unexpected end of template inside a %s tag", kind == '{' ? "{{ }}" : "{% %}");
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
                    zj_jfail(c, ZT_EUNSUPPORTED, "names with non-ASCII characters");
                tpush(L, T_NAME, line, s, k);
                p += k;
            } else if (s[0] >= '0' && s[0] <= '9') {
                p += lex_number(L, s, left, p > 0 && src[p - 1] == '.', line);
            } else if (s[0] == '\'' || s[0] == '"') {
                size_t k = 1;
                while (k < left && s[k] != s[0]) k += s[k] == '\\' ? 2 : 1;
                if (k >= left) zj_jfail(c, ZT_EDATA, "unterminated string literal");
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
                        uint32_t cp = zj_u8at(s, left, &len);
                        zj_jfail(c, ZT_EUNSUPPORTED, "the character U+%04X in a tag (names with non-ASCII characters)", cp);
                    }
                    if (!strchr("+-*/%~<>()[]{},.:|=", s[0]) || s[0] == 0) {
                        if ((unsigned char)s[0] < 0x20 || s[0] == 0x7f) zj_jfail(c, ZT_EDATA, "unexpected character 0x%02x", (unsigned char)s[0]);
                        zj_jfail(c, ZT_EDATA, "unexpected character '%c'", s[0]);
                    }
                    m = 1;
                    if (s[0] == '(' || s[0] == '[' || s[0] == '{') ++bal;
                    if (s[0] == ')' || s[0] == ']' || s[0] == '}') --bal;
                    if (bal < 0) zj_jfail(c, ZT_EDATA, "unbalanced '%c'", s[0]);
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
