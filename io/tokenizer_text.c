/* tokenizer_text.c -- the text stages of a Hugging Face tokenizer: UTF-8 helpers, patterns (PCRE2 with
 * UTF + UCP, JIT when available, iterated like Oniguruma's find_iter, which HF tokenizers uses),
 * normalizers (NFC/NFKC/NFD/NFKD via utf8proc, Prepend, Replace, Sequence), pre-tokenizers (ByteLevel,
 * Split, Metaspace, Sequence) and decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
 * Sequence).  Each stage follows the HF tokenizers 0.23 source behaviour for behaviour. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tokenizer_int.h"

/* ------------------------------------------------------------ buffers */
int zt_sbuf_put(zt_sbuf *b, const void *s, size_t n, zt_status *st) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory (%zu bytes)", cap);
        b->p = p; b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return ZT_OK;
}
void zt_sbuf_free(zt_sbuf *b) { free(b->p); b->p = NULL; b->len = b->cap = 0; }

int zt_pieces_add(zt_pieces *l, const char *s, size_t n, int32_t added, int orig0, zt_status *st) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        zt_piece *p = realloc(l->p, cap * sizeof *p);
        if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        l->p = p; l->cap = cap;
    }
    zt_piece *pc = &l->p[l->n++];
    pc->off = l->buf.len; pc->len = n; pc->added = added; pc->orig0 = orig0;
    return zt_sbuf_put(&l->buf, s, n, st);
}
void zt_pieces_reset(zt_pieces *l) { l->n = 0; l->buf.len = 0; }
void zt_pieces_free(zt_pieces *l) { free(l->p); zt_sbuf_free(&l->buf); memset(l, 0, sizeof *l); }

/* ------------------------------------------------------------ UTF-8 */
/* Length of the maximal prefix of s[n] that starts a valid sequence: returns the sequence length when s
 * begins with a complete valid sequence, else -k where k >= 1 is the length of the maximal invalid
 * subpart (Unicode "substitution of maximal subparts", as Rust's from_utf8_lossy). */
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need; unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return -1;
    for (int i = 1; i <= need; ++i) {
        if ((size_t)i >= n) return -i;
        unsigned d = s[i];
        if (i == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return -i;
    }
    return need + 1;
}

size_t zt_utf8_valid(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { ++i; continue; }
        int k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k < 0) return i;
        i += (size_t)k;
    }
    return n;
}

int zt_utf8_dec(const char *s, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) { *cp = u[0]; return 1; }
    if (u[0] < 0xE0) { *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); return 2; }
    if (u[0] < 0xF0) { *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F); return 3; }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
          (u[3] & 0x3F);
    return 4;
}

int zt_utf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int zt_utf8_lossy(zt_sbuf *b, const char *s, size_t n, zt_status *st) {
    size_t i = 0, run = 0;
    while (i < n) {
        int k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k > 0) { i += (size_t)k; continue; }
        ZT_TRY(zt_sbuf_put(b, s + run, i - run, st));
        ZT_TRY(zt_sbuf_put(b, "\xEF\xBF\xBD", 3, st));
        i += (size_t)(-k);
        run = i;
    }
    return zt_sbuf_put(b, s + run, n - run, st);
}

int zt_is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* ------------------------------------------------------------ ByteLevel tables */
uint32_t zt_byte2cp[256];
static int16_t cp2byte_tab[512];
static void bytelevel_build(void) {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        zt_byte2cp[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
    }
    for (int i = 0; i < 512; ++i) cp2byte_tab[i] = -1;
    for (int b = 0; b < 256; ++b) cp2byte_tab[zt_byte2cp[b]] = (int16_t)b;
}
void zt_bytelevel_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, bytelevel_build);
}
int zt_cp2byte(uint32_t cp) { return cp < 512 ? cp2byte_tab[cp] : -1; }

const char zt_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------ patterns */
/* HF tokenizers compiles Split/Replace regexes with Oniguruma (Ruby syntax) as built into the `tokenizers`
 * wheel: Unicode 16.0 tables.  PCRE2 10.42 (Debian 12) has Unicode 14.0 tables and other meanings for some
 * escapes.  So every character class escape is rewritten into explicit code-point ranges with exactly
 * Oniguruma's members (io/tokenizer_unicode.c, generated from tokenizers itself by
 * scripts/gen_tok_unicode.py): \p{NAME}, \P{NAME}, \p{^NAME} (Oniguruma's names: general categories,
 * POSIX-like properties, a set of scripts), \s \S \w \W \d \D, \h \H (hex digits in Ruby syntax), [:NAME:]
 * and [:^NAME:] in brackets.  Outside brackets a class becomes [...], (?-i:[...]) under (?i) (Oniguruma does
 * not case-fold a bare property; inside brackets it folds the whole class, as PCRE2 does).  Ruby-syntax differences:
 * \pL without braces is the literal "pL"; \v is U+000B only; \uHHHH is a code point; \b/\B use the \w
 * above; a nested [..] inside a class is a union; ^ and $ are line anchors (PCRE2_MULTILINE).
 * (The (?-i:..) wrapper is written only where the pattern is caseless.)  What would
 * differ and is not rewritten is refused by name: an unknown property, \X, a negated nested class,
 * class intersection (&&).  The rest goes to PCRE2 unchanged. */
int zt_uc_has(int cls, uint32_t cp) {
    const zt_uc_class *c = &zt_uc_classes[cls];
    int lo = 0, hi = c->nr - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < c->r[2 * mid]) hi = mid - 1;
        else if (cp > c->r[2 * mid + 1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}
static int uc_lookup(char kind, const char *name, size_t n);
int zt_uc_find(char kind, const char *name) { return uc_lookup(kind, name, strlen(name)); }

static int uc_lookup(char kind, const char *name, size_t n) {
    char k[64];
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
        char c = name[i];
        if (c == ' ' || c == '_' || c == '-') continue;
        if (m + 1 >= sizeof k) return -1;
        k[m++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    k[m] = 0;
    for (int i = 0; i < zt_uc_nnames; ++i)
        if (zt_uc_names[i].kind == kind && strcmp(zt_uc_names[i].name, k) == 0) return zt_uc_names[i].cls;
    return -1;
}

static int put_cp(zt_sbuf *o, uint32_t c, zt_status *st) {
    char b[16];
    int l = snprintf(b, sizeof b, "\\x{%X}", c);
    return zt_sbuf_put(o, b, (size_t)l, st);
}
static int put_range(zt_sbuf *o, uint32_t lo, uint32_t hi, zt_status *st) {
    /* PCRE2 in UTF mode refuses surrogate code points: split around them */
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) ZT_TRY(put_range(o, lo, 0xD7FF, st));
        return hi > 0xDFFF ? put_range(o, 0xE000, hi, st) : ZT_OK;
    }
    ZT_TRY(put_cp(o, lo, st));
    if (hi == lo) return ZT_OK;
    ZT_TRY(zt_sbuf_put(o, "-", 1, st));
    return put_cp(o, hi, st);
}
/* the members of class k (or its complement) as class items, without brackets */
static int put_items(zt_sbuf *o, int k, int neg, zt_status *st) {
    const zt_uc_class *c = &zt_uc_classes[k];
    if (!neg) {
        for (int i = 0; i < c->nr; ++i) ZT_TRY(put_range(o, c->r[2 * i], c->r[2 * i + 1], st));
        return ZT_OK;
    }
    uint32_t next = 0;
    for (int i = 0; i < c->nr; ++i) {
        if (c->r[2 * i] > next) ZT_TRY(put_range(o, next, c->r[2 * i] - 1, st));
        next = c->r[2 * i + 1] + 1;
    }
    return next <= 0x10FFFF ? put_range(o, next, 0x10FFFF, st) : ZT_OK;
}
/* class k as one atom: inside brackets its items, outside [items], or (?-i:[items]) where the pattern is
 * caseless there (a plain class keeps PCRE2's single-character repeat: a group repeated over a long run
 * would use stack per character); an empty class never matches */
static int put_class(zt_sbuf *o, int k, int neg, int in_class, int caseless, zt_status *st) {
    if (in_class) return put_items(o, k, neg, st);
    const zt_uc_class *c = &zt_uc_classes[k];
    if (c->nr == 0) return neg ? zt_sbuf_put(o, "(?s:.)", 6, st) : zt_sbuf_put(o, "(?!)", 4, st);
    if (caseless) ZT_TRY(zt_sbuf_put(o, "(?-i:", 5, st));
    ZT_TRY(zt_sbuf_put(o, neg ? "[^" : "[", neg ? 2 : 1, st));
    ZT_TRY(put_items(o, k, 0, st));
    ZT_TRY(zt_sbuf_put(o, "]", 1, st));
    return caseless ? zt_sbuf_put(o, ")", 1, st) : ZT_OK;
}

/* (?flags) / (?flags:...) at s[i] == '(': the caseless state of what follows; *scoped: a group (':') */
static int group_flags(const char *s, size_t n, size_t i, int cur, int *scoped) {
    *scoped = 1;
    if (i + 1 >= n || s[i + 1] != '?') return cur;
    int on = 1, v = cur;
    for (size_t j = i + 2; j < n; ++j) {
        char f = s[j];
        if (f == '-') on = 0;
        else if (f == 'i') v = on;
        else if (f == ':') return v;
        else if (f == ')') { *scoped = 0; return v; }
        else if (!strchr("mxsuUJnimax^", f)) return cur;   /* (?=, (?<, (?#, ...: not a flag group */
    }
    return cur;
}

static int onig_classes(const char *s, zt_sbuf *o, const char *what, zt_status *st) {
    int depth = 0;                                         /* bracket nesting */
    size_t n = strlen(s);
    /* Oniguruma's \w outside brackets also takes U+00B2 U+00B3 U+00B9 U+00BC-U+00BE (Latin-1 No); inside
     * brackets (\w, \W, \p{Word}, \P{Word}) it is [:word:], without them (probed over all code points) */
    int kw = uc_lookup('e', "w", 1), kwb = uc_lookup('x', "word", 4);
    int ci[256], nci = 0, caseless = 0;                    /* caseless state per open group */
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (depth == 0 && c == '(') {
            int scoped, v = group_flags(s, n, i, caseless, &scoped);
            if (scoped) {
                if (nci == (int)(sizeof ci / sizeof ci[0]))
                    return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%.100s...': groups nested too deep", what, s);
                ci[nci++] = caseless;
            }
            caseless = v;
        } else if (depth == 0 && c == ')' && nci > 0) caseless = ci[--nci];
        if (c == '\\' && i + 1 < n) {
            char e = s[i + 1];
            if (e == 'Q') {                                   /* \Q...\E: literal */
                const char *q = strstr(s + i + 2, "\\E");
                size_t end = q ? (size_t)(q - s) + 2 : n;
                ZT_TRY(zt_sbuf_put(o, s + i, end - i, st));
                i = end;
                continue;
            }
            if (strchr("sSwWdDhH", e)) {
                char lo = (char)(e | 0x20);
                int k = uc_lookup('e', &lo, 1);
                if (k < 0) return zt_fail(st, ZT_EINTERNAL, "%s: no table for \\%c", what, e);
                if (depth > 0 && k == kw && kwb >= 0) k = kwb;
                ZT_TRY(put_class(o, k, e != lo, depth > 0, caseless, st));
                i += 2;
                continue;
            }
            if (e == 'p' || e == 'P') {
                if (i + 2 >= n || s[i + 2] != '{') {         /* Ruby syntax: \pL is the literal "pL" */
                    ZT_TRY(zt_sbuf_put(o, &e, 1, st));
                    i += 2;
                    continue;
                }
                const char *q = memchr(s + i + 3, '}', n - i - 3);
                if (!q) return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s': unterminated \\%c{", what, s, e);
                const char *nm = s + i + 3;
                int neg = e == 'P';
                if (*nm == '^') { neg = !neg; ++nm; }
                int k = uc_lookup('p', nm, (size_t)(q - nm));
                if (k < 0)
                    return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex property \\%c{%.*s} is not supported (ztrain knows "
                                   "Oniguruma's general categories, POSIX-like properties and a set of scripts)",
                                   what, e, (int)(q - (s + i + 3)), s + i + 3);
                if (depth > 0 && k == kw && kwb >= 0) k = kwb;
                ZT_TRY(put_class(o, k, neg, depth > 0, caseless, st));
                i = (size_t)(q - s) + 1;
                continue;
            }
            if (e == 'v') { ZT_TRY(put_cp(o, 0x0B, st)); i += 2; continue; }
            if (e == 'u' && i + 5 < n + 0 && strspn(s + i + 2, "0123456789abcdefABCDEF") >= 4) {
                ZT_TRY(put_cp(o, (uint32_t)strtoul((char[]){s[i + 2], s[i + 3], s[i + 4], s[i + 5], 0}, NULL, 16), st));
                i += 6;
                continue;
            }
            if ((e == 'b' || e == 'B') && depth == 0 && kw >= 0) { /* word boundary with Oniguruma's \w */
                zt_sbuf w = {0};
                int rc = zt_sbuf_put(&w, "[", 1, st);
                if (rc == ZT_OK) rc = put_items(&w, kw, 0, st);
                if (rc == ZT_OK) rc = zt_sbuf_put(&w, "]", 1, st);
                const char *f = e == 'b' ? "(?-i:(?<=%s)(?!%s)|(?<!%s)(?=%s))" : "(?-i:(?<=%s)(?=%s)|(?<!%s)(?!%s))";
                char *x = NULL;
                if (rc == ZT_OK && asprintf(&x, f, w.p, w.p, w.p, w.p) < 0) rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
                if (rc == ZT_OK) rc = zt_sbuf_put(o, x, strlen(x), st);
                free(x);
                zt_sbuf_free(&w);
                ZT_TRY(rc);
                i += 2;
                continue;
            }
            if (e == 'X')
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s': \\X (grapheme cluster) is not supported", what, s);
            ZT_TRY(zt_sbuf_put(o, s + i, 2, st));
            i += 2;
            continue;
        }
        if (c == '[' && depth > 0 && i + 1 < n && s[i + 1] == ':') {   /* [:name:] / [:^name:] */
            const char *q = strstr(s + i + 2, ":]");
            if (q) {
                const char *nm = s + i + 2;
                int neg = *nm == '^';
                nm += neg;
                int k = uc_lookup('x', nm, (size_t)(q - nm));
                if (k < 0)
                    return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s': POSIX class [:%.*s:] is not supported", what, s,
                                   (int)(q - (s + i + 2)), s + i + 2);
                ZT_TRY(put_items(o, k, neg, st));
                i = (size_t)(q - s) + 2;
                continue;
            }
        }
        if (c == '[') {
            size_t j = i + 1;
            int neg = j < n && s[j] == '^';
            if (depth > 0 && neg)
                return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s': a negated class inside a class is not supported", what, s);
            if (neg) ++j;
            if (j < n && s[j] == ']') ++j;                   /* a leading ']' is literal */
            if (depth == 0) ZT_TRY(zt_sbuf_put(o, s + i, j - i, st));   /* nested: a union, no bracket */
            else if (j > i + 1) ZT_TRY(zt_sbuf_put(o, "\\]", 2, st));
            ++depth;
            i = j;
            continue;
        }
        if (depth > 0 && c == '&' && i + 1 < n && s[i + 1] == '&')
            return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s': class intersection && is not supported", what, s);
        if (depth > 0 && c == ']') {
            --depth;
            if (depth == 0) ZT_TRY(zt_sbuf_put(o, "]", 1, st));
            ++i;
            continue;
        }
        ZT_TRY(zt_sbuf_put(o, &c, 1, st));
        ++i;
    }
    return zt_sbuf_put(o, "", 0, st);
}
int zt_regex_compile(zt_regex *r, const char *s, int is_regex, const char *what, zt_status *st) {
    memset(r, 0, sizeof *r);
    if (!is_regex) {
        r->literal = 1;
        r->litlen = strlen(s);
        r->lit = strdup(s);
        if (!r->lit) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        return ZT_OK;
    }
    zt_sbuf pat = {0};
    int rc = onig_classes(s, &pat, what, st);
    if (rc) { zt_sbuf_free(&pat); return rc; }
    r->src = strdup(s); r->what = strdup(what);
    if (!r->src || !r->what) { zt_sbuf_free(&pat); return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); }
    int err; PCRE2_SIZE off;
    r->re = pcre2_compile((PCRE2_SPTR)pat.p, pat.len, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &off, NULL);
    zt_sbuf_free(&pat);
    if (!r->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return zt_fail(st, ZT_EUNSUPPORTED, "%s: regex '%s' does not compile (at offset %zu: %s)", what, s,
                       (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter is used without JIT */
    return ZT_OK;
}

void zt_regex_free(zt_regex *r) {
    if (r->re) pcre2_code_free(r->re);
    free(r->lit); free(r->src); free(r->what);
    memset(r, 0, sizeof *r);
}

/* per-thread match data and JIT stack */
typedef struct rx_tls { pcre2_match_data *md; pcre2_match_context *mc; pcre2_jit_stack *js; } rx_tls;
static pthread_key_t rx_key;
static void rx_tls_free(void *p) {
    rx_tls *t = p;
    if (!t) return;
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mc);
    pcre2_jit_stack_free(t->js);
    free(t);
}
static void rx_key_make(void) { pthread_key_create(&rx_key, rx_tls_free); }
static rx_tls *rx_get(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, rx_key_make);
    rx_tls *t = pthread_getspecific(rx_key);
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->md = pcre2_match_data_create(1, NULL);
    t->mc = pcre2_match_context_create(NULL);
    t->js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!t->md || !t->mc || !t->js) { rx_tls_free(t); return NULL; }
    pcre2_jit_stack_assign(t->mc, NULL, t->js);
    /* the step and depth limits are set per match (they grow with the text: a 20 MB run of spaces through
     * the Llama-3 pattern needs more than PCRE2's default 10 million steps); the heap limit is fixed */
    pcre2_set_heap_limit(t->mc, ZT_RX_HEAP_KIB);
    pthread_setspecific(rx_key, t);
    return t;
}

static int push_match(zt_matches *mm, size_t a, size_t b, zt_status *st) {
    if (mm->n == mm->cap) {
        size_t c = mm->cap ? 2 * mm->cap : 64;
        size_t *p = realloc(mm->m, 2 * c * sizeof *p);
        if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        mm->m = p; mm->cap = c;
    }
    mm->m[2 * mm->n] = a; mm->m[2 * mm->n + 1] = b; mm->n++;
    return ZT_OK;
}

int zt_regex_find(const zt_regex *r, const char *s, size_t n, zt_matches *mm, zt_status *st) {
    mm->n = 0;
    if (r->literal) {
        if (r->litlen == 0) return ZT_OK;
        for (size_t i = 0; i + r->litlen <= n;) {
            const char *p = memmem(s + i, n - i, r->lit, r->litlen);
            if (!p) break;
            size_t a = (size_t)(p - s);
            ZT_TRY(push_match(mm, a, a + r->litlen, st));
            i = a + r->litlen;
        }
        return ZT_OK;
    }
    rx_tls *t = rx_get();
    if (!t) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory (regex match data)");
    size_t pos = 0, last_end = (size_t)-1;
    while (pos <= n) {
        uint64_t lim = (uint64_t)ZT_RX_STEPS + (uint64_t)ZT_RX_STEPS_PER_BYTE * (n - pos);
        if (lim > UINT32_MAX) lim = UINT32_MAX;
        pcre2_set_match_limit(t->mc, (uint32_t)lim);
        pcre2_set_depth_limit(t->mc, (uint32_t)lim);
        int rc = pcre2_match(r->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, t->md, t->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            mm->n = 0;
            const char *why = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT
                                  ? " (the pattern backtracks without end on this text)" : "";
            return zt_fail(st, ZT_EDATA, "%s: regex '%.200s' failed at byte %zu of a %zu-byte piece: %s%s",
                           r->what ? r->what : "tokenizer", r->src ? r->src : "?", pos, n, (const char *)msg, why);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t a = ov[0], b = ov[1];
        if (a == b && last_end == b) { /* Oniguruma find_iter: no empty match right after the last one */
            if (pos >= n) break;
            uint32_t cp;
            pos += (size_t)zt_utf8_dec(s + pos, &cp);
            continue;
        }
        ZT_TRY(push_match(mm, a, b, st));
        pos = b; last_end = b;
    }
    return ZT_OK;
}

/* ------------------------------------------------------------ normalizers */
static int replace_all(const zt_regex *pat, const char *content, size_t clen, const char *s, size_t n,
                       zt_sbuf *out, int *orig0, zt_status *st) {
    zt_matches mm = {0};
    int rc = zt_regex_find(pat, s, n, &mm, st);
    size_t prev = 0;
    for (size_t i = 0; i < mm.n && rc == ZT_OK; ++i) {
        size_t a = mm.m[2 * i], b = mm.m[2 * i + 1];
        if (a == 0 && b > 0 && clen == 0 && orig0) *orig0 = 0;
        rc = zt_sbuf_put(out, s + prev, a - prev, st);
        if (rc == ZT_OK) rc = zt_sbuf_put(out, content, clen, st);
        prev = b;
    }
    free(mm.m);
    ZT_TRY(rc);
    return zt_sbuf_put(out, s + prev, n - prev, st);
}

int zt_norm_apply(const zt_norm *nm, const char *s, size_t n, zt_sbuf *out, int *orig0, zt_status *st) {
    out->len = 0;
    switch (nm->type) {
    case ZT_NORM_SEQ: {
        zt_sbuf a = {0}, b = {0};
        int rc = zt_sbuf_put(&a, s, n, st);
        for (int i = 0; i < nm->nsub && rc == ZT_OK; ++i) {
            rc = zt_norm_apply(&nm->sub[i], a.p, a.len, &b, orig0, st);
            zt_sbuf t = a; a = b; b = t;
        }
        if (rc == ZT_OK) rc = zt_sbuf_put(out, a.p, a.len, st);
        zt_sbuf_free(&a); zt_sbuf_free(&b);
        return rc;
    }
    case ZT_NORM_NFC: case ZT_NORM_NFKC: case ZT_NORM_NFD: case ZT_NORM_NFKD: {
        if (n == 0) return zt_sbuf_put(out, "", 0, st);
        int opt = UTF8PROC_STABLE;
        opt |= (nm->type == ZT_NORM_NFC || nm->type == ZT_NORM_NFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
        if (nm->type == ZT_NORM_NFKC || nm->type == ZT_NORM_NFKD) opt |= UTF8PROC_COMPAT;
        utf8proc_uint8_t *d = NULL;
        utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &d,
                                          (utf8proc_option_t)opt);
        if (k < 0) return zt_fail(st, ZT_EDATA, "tokenizer: normalization failed: %s", utf8proc_errmsg(k));
        int rc = zt_sbuf_put(out, d, (size_t)k, st);
        free(d);
        return rc;
    }
    case ZT_NORM_PREPEND:
        if (n > 0) ZT_TRY(zt_sbuf_put(out, nm->str, nm->strlen, st));
        return zt_sbuf_put(out, s, n, st);
    case ZT_NORM_REPLACE:
        return replace_all(&nm->pat, nm->str, nm->strlen, s, n, out, orig0, st);
    }
    return zt_fail(st, ZT_EINTERNAL, "tokenizer: bad normalizer type %d", nm->type);
}

void zt_norm_free(zt_norm *nm) {
    if (!nm) return;
    for (int i = 0; i < nm->nsub; ++i) zt_norm_free(&nm->sub[i]);
    free(nm->sub);
    free(nm->str);
    zt_regex_free(&nm->pat);
}

/* ------------------------------------------------------------ pre-tokenizers */
/* Split s[n] by the matches m[nm] with HF's SplitDelimiterBehavior; non-empty segments go to out. */
static int split_by(const char *s, size_t n, const zt_matches *mm, int behavior, int invert, int orig0,
                    zt_pieces *out, zt_tokws *ws, zt_status *st) {
    const size_t *m = mm->m, nm = mm->n;
    /* the segments (matches and the gaps between them), as (start, end, is_match) */
    size_t cap = 2 * nm + 2, ns = 0;
    if (cap > ws->segcap) {
        size_t (*p)[3] = realloc(ws->seg, cap * sizeof *p);
        if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        ws->seg = p; ws->segcap = cap;
    }
    size_t (*seg)[3] = ws->seg;
    size_t prev = 0;
    for (size_t i = 0; i < nm; ++i) {
        if (m[2 * i] != prev) { seg[ns][0] = prev; seg[ns][1] = m[2 * i]; seg[ns][2] = (size_t)invert; ++ns; }
        seg[ns][0] = m[2 * i]; seg[ns][1] = m[2 * i + 1]; seg[ns][2] = (size_t)!invert; ++ns;
        prev = m[2 * i + 1];
    }
    if (prev != n || ns == 0) { seg[ns][0] = prev; seg[ns][1] = n; seg[ns][2] = (size_t)invert; ++ns; }
    /* merge per behaviour into kept ranges (in place: kept ranges never outnumber segments) */
    size_t nk = 0;
    size_t (*keep)[3] = seg; /* [0],[1] range, [2] unused */
    if (behavior == ZT_SPLIT_REMOVED || behavior == ZT_SPLIT_ISOLATED) {
        for (size_t i = 0; i < ns; ++i)
            if (!(behavior == ZT_SPLIT_REMOVED && seg[i][2])) { keep[nk][0] = seg[i][0]; keep[nk][1] = seg[i][1]; ++nk; }
    } else if (behavior == ZT_SPLIT_PREV) {
        int prevm = 0;
        for (size_t i = 0; i < ns; ++i) {
            int ism = (int)seg[i][2];
            size_t a = seg[i][0], b = seg[i][1];
            if (ism && !prevm && nk > 0) keep[nk - 1][1] = b;
            else { keep[nk][0] = a; keep[nk][1] = b; ++nk; }
            prevm = ism;
        }
    } else if (behavior == ZT_SPLIT_NEXT) {
        /* right to left, then reverse */
        int prevm = 0;
        size_t (*tmp)[2] = malloc(ns * sizeof *tmp);
        if (!tmp) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
        size_t nt = 0;
        for (size_t i = ns; i-- > 0;) {
            int ism = (int)seg[i][2];
            if (ism && !prevm && nt > 0) tmp[nt - 1][0] = seg[i][0];
            else { tmp[nt][0] = seg[i][0]; tmp[nt][1] = seg[i][1]; ++nt; }
            prevm = ism;
        }
        for (size_t i = 0; i < nt; ++i) { keep[i][0] = tmp[nt - 1 - i][0]; keep[i][1] = tmp[nt - 1 - i][1]; }
        nk = nt;
        free(tmp);
    } else { /* Contiguous */
        int prevm = -1;
        for (size_t i = 0; i < ns; ++i) {
            int ism = (int)seg[i][2];
            if (ism == prevm && nk > 0) keep[nk - 1][1] = seg[i][1];
            else { keep[nk][0] = seg[i][0]; keep[nk][1] = seg[i][1]; ++nk; }
            prevm = ism;
        }
    }
    int rc = ZT_OK;
    for (size_t i = 0; i < nk && rc == ZT_OK; ++i)
        if (keep[i][1] > keep[i][0])
            rc = zt_pieces_add(out, s + keep[i][0], keep[i][1] - keep[i][0], -1, orig0 && keep[i][0] == 0, st);
    return rc;
}

/* s[n] bytes -> the GPT-2 byte-level characters, appended to b */
static int bytelevel_map(const char *s, size_t n, zt_sbuf *b, zt_status *st) {
    char tmp[512];
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (k + 2 > sizeof tmp) { ZT_TRY(zt_sbuf_put(b, tmp, k, st)); k = 0; }
        k += (size_t)zt_utf8_enc(zt_byte2cp[(unsigned char)s[i]], tmp + k);
    }
    return zt_sbuf_put(b, tmp, k, st);
}

static int pretok_one(const zt_pretok *pt, const char *s, size_t n, int orig0, zt_pieces *out, zt_tokws *ws,
                      zt_status *st) {
    zt_sbuf *scratch = &ws->scratch;
    switch (pt->type) {
    case ZT_PRE_SPLIT:
        ZT_TRY(zt_regex_find(&pt->pat, s, n, &ws->mm, st));
        return split_by(s, n, &ws->mm, pt->behavior, pt->invert, orig0, out, ws, st);
    case ZT_PRE_PRED: {
        /* HF split with a char predicate: every matching character is one match */
        ws->mm.n = 0;
        for (size_t k = 0; k < n;) {
            uint32_t cp;
            size_t l = (size_t)zt_utf8_dec(s + k, &cp);
            if (zt_uc_has(pt->cls, cp)) {
                if (ws->mm.n == ws->mm.cap) {
                    size_t c = ws->mm.cap ? 2 * ws->mm.cap : 64;
                    size_t *p = realloc(ws->mm.m, 2 * c * sizeof *p);
                    if (!p) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
                    ws->mm.m = p; ws->mm.cap = c;
                }
                ws->mm.m[2 * ws->mm.n] = k; ws->mm.m[2 * ws->mm.n + 1] = k + l; ws->mm.n++;
            }
            k += l;
        }
        return split_by(s, n, &ws->mm, pt->behavior, 0, orig0, out, ws, st);
    }
    case ZT_PRE_BYTELEVEL: {
        /* optional prefix space, the GPT-2 regex split, then every byte -> its printable character */
        const char *x = s;
        size_t xn = n;
        if (pt->add_prefix_space && n > 0 && s[0] != ' ') {
            scratch->len = 0;
            ZT_TRY(zt_sbuf_put(scratch, " ", 1, st));
            ZT_TRY(zt_sbuf_put(scratch, s, n, st));
            x = scratch->p; xn = scratch->len;
        }
        zt_pieces *parts = &ws->parts;
        zt_pieces_reset(parts);
        size_t nr = xn ? 1 : 0;
        if (pt->use_regex) {
            ZT_TRY(zt_regex_find(&pt->pat, x, xn, &ws->mm, st));
            ZT_TRY(split_by(x, xn, &ws->mm, ZT_SPLIT_ISOLATED, 0, orig0, parts, ws, st));
            nr = parts->n;
        }
        for (size_t i = 0; i < nr; ++i) {
            const char *ps = pt->use_regex ? parts->buf.p + parts->p[i].off : x;
            size_t pl = pt->use_regex ? parts->p[i].len : xn;
            int o0 = pt->use_regex ? parts->p[i].orig0 : orig0;
            size_t off = out->buf.len;
            ZT_TRY(zt_pieces_add(out, "", 0, -1, o0, st));
            ZT_TRY(bytelevel_map(ps, pl, &out->buf, st));
            out->p[out->n - 1].off = off;
            out->p[out->n - 1].len = out->buf.len - off;
        }
        return ZT_OK;
    }
    case ZT_PRE_METASPACE: {
        /* ' ' -> the replacement, then prepend per scheme (never to an empty piece) */
        zt_sbuf *t = &ws->tmp;
        t->len = 0;
        size_t prev = 0;
        for (size_t i = 0; i < n; ++i)
            if (s[i] == ' ') {
                ZT_TRY(zt_sbuf_put(t, s + prev, i - prev, st));
                ZT_TRY(zt_sbuf_put(t, pt->repl, pt->repllen, st));
                prev = i + 1;
            }
        ZT_TRY(zt_sbuf_put(t, s + prev, n - prev, st));
        int starts = t->len == 0 || (t->len >= pt->repllen && memcmp(t->p, pt->repl, pt->repllen) == 0);
        scratch->len = 0;
        if ((pt->prepend == ZT_PREPEND_ALWAYS && !starts) || (pt->prepend == ZT_PREPEND_FIRST && !starts && orig0))
            ZT_TRY(zt_sbuf_put(scratch, pt->repl, pt->repllen, st));
        ZT_TRY(zt_sbuf_put(scratch, t->p, t->len, st));
        if (!pt->split) return scratch->len ? zt_pieces_add(out, scratch->p, scratch->len, -1, orig0, st) : ZT_OK;
        zt_regex lit = {.literal = 1, .lit = (char *)pt->repl, .litlen = pt->repllen};
        ZT_TRY(zt_regex_find(&lit, scratch->p, scratch->len, &ws->mm, st));
        return split_by(scratch->p, scratch->len, &ws->mm, ZT_SPLIT_NEXT, 0, orig0, out, ws, st);
    }
    }
    return zt_fail(st, ZT_EINTERNAL, "tokenizer: bad pre-tokenizer type %d", pt->type);
}

int zt_pretok_apply(const zt_pretok *pt, const zt_pieces *in, zt_pieces *out, zt_tokws *ws, zt_status *st) {
    zt_pieces_reset(out);
    if (pt->type == ZT_PRE_SEQ) {
        /* in -> (level temporaries) -> out: the first step reads in, the last writes out */
        if (pt->nsub == 0) {
            for (size_t i = 0; i < in->n; ++i)
                ZT_TRY(zt_pieces_add(out, in->buf.p + in->p[i].off, in->p[i].len, in->p[i].added, in->p[i].orig0, st));
            return ZT_OK;
        }
        zt_pieces local[2] = {{0}, {0}};
        zt_pieces *tmp = ws->depth < ZT_SEQ_DEPTH ? ws->lv[ws->depth] : local;
        ws->depth++;
        const zt_pieces *src = in;
        int rc = ZT_OK;
        for (int k = 0; k < pt->nsub && rc == ZT_OK; ++k) {
            zt_pieces *dst = k == pt->nsub - 1 ? out : &tmp[k & 1];
            rc = zt_pretok_apply(&pt->sub[k], src, dst, ws, st);
            src = dst;
        }
        ws->depth--;
        zt_pieces_free(&local[0]); zt_pieces_free(&local[1]);
        return rc;
    }
    for (size_t i = 0; i < in->n; ++i) {
        const zt_piece *p = &in->p[i];
        if (p->added >= 0) ZT_TRY(zt_pieces_add(out, in->buf.p + p->off, p->len, p->added, p->orig0, st));
        else ZT_TRY(pretok_one(pt, in->buf.p + p->off, p->len, p->orig0, out, ws, st));
    }
    return ZT_OK;
}

void zt_tokws_free(zt_tokws *w) {
    for (int d = 0; d < ZT_SEQ_DEPTH; ++d) { zt_pieces_free(&w->lv[d][0]); zt_pieces_free(&w->lv[d][1]); }
    zt_pieces_free(&w->parts);
    zt_sbuf_free(&w->scratch); zt_sbuf_free(&w->tmp);
    free(w->mm.m); free(w->seg);
    memset(w, 0, sizeof *w);
}

void zt_pretok_free(zt_pretok *pt) {
    if (!pt) return;
    for (int i = 0; i < pt->nsub; ++i) zt_pretok_free(&pt->sub[i]);
    free(pt->sub);
    zt_regex_free(&pt->pat);
}

/* ------------------------------------------------------------ decoders */
/* Each decoder maps the token list in to out (HF decode_chain). */
static int dec_one(const zt_decoder *d, const zt_pieces *in, zt_pieces *out, zt_status *st) {
    zt_sbuf t = {0};
    int rc = ZT_OK;
    switch (d->type) {
    case ZT_DEC_BYTELEVEL: {
        /* all tokens -> one string: each token's chars through the byte table, or its own bytes when a
         * char is not in the table; then from_utf8_lossy */
        zt_sbuf bytes = {0};
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) {
            const char *s = in->buf.p + in->p[i].off;
            size_t n = in->p[i].len, k = 0, mark = bytes.len;
            int ok = 1;
            while (k < n && rc == ZT_OK) {
                uint32_t cp;
                k += (size_t)zt_utf8_dec(s + k, &cp);
                int b = zt_cp2byte(cp);
                if (b < 0) { ok = 0; break; }
                char c = (char)b;
                rc = zt_sbuf_put(&bytes, &c, 1, st);
            }
            if (!ok && rc == ZT_OK) { bytes.len = mark; rc = zt_sbuf_put(&bytes, s, n, st); }
        }
        if (rc == ZT_OK) rc = zt_utf8_lossy(&t, bytes.p ? bytes.p : "", bytes.len, st);
        if (rc == ZT_OK) rc = zt_pieces_add(out, t.p ? t.p : "", t.len, -1, 0, st);
        zt_sbuf_free(&bytes);
        break;
    }
    case ZT_DEC_METASPACE:
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) {
            const char *s = in->buf.p + in->p[i].off;
            size_t n = in->p[i].len, k = 0;
            t.len = 0;
            while (k < n && rc == ZT_OK) {
                uint32_t cp;
                int l = zt_utf8_dec(s + k, &cp);
                if (cp == d->cp) { if (!(i == 0 && d->prepend != ZT_PREPEND_NEVER)) rc = zt_sbuf_put(&t, " ", 1, st); }
                else rc = zt_sbuf_put(&t, s + k, (size_t)l, st);
                k += (size_t)l;
            }
            if (rc == ZT_OK) rc = zt_pieces_add(out, t.p ? t.p : "", t.len, -1, 0, st);
        }
        break;
    case ZT_DEC_BYTEFALLBACK: {
        zt_sbuf bytes = {0};
        for (size_t i = 0; i <= in->n && rc == ZT_OK; ++i) {
            int byte = -1;
            if (i < in->n) {
                const char *s = in->buf.p + in->p[i].off;
                if (in->p[i].len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
                    /* Rust u8::from_str_radix(&token[3..5], 16): hex digits, a leading '+' allowed */
                    int v = 0, ok = 1;
                    for (int k = 3; k < 5 && ok; ++k) {
                        char c = s[k];
                        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : (k == 3 && c == '+') ? -2 : -1;
                        if (h == -2) continue;
                        if (h < 0) ok = 0; else v = v * 16 + h;
                    }
                    if (ok && s[4] != '+') byte = v;
                }
            }
            if (byte >= 0) { char c = (char)byte; rc = zt_sbuf_put(&bytes, &c, 1, st); continue; }
            if (bytes.len) {
                if (zt_utf8_valid(bytes.p, bytes.len) == bytes.len) rc = zt_pieces_add(out, bytes.p, bytes.len, -1, 0, st);
                else
                    for (size_t k = 0; k < bytes.len && rc == ZT_OK; ++k)
                        rc = zt_pieces_add(out, "\xEF\xBF\xBD", 3, -1, 0, st);
                bytes.len = 0;
            }
            if (i < in->n && rc == ZT_OK) rc = zt_pieces_add(out, in->buf.p + in->p[i].off, in->p[i].len, -1, 0, st);
        }
        zt_sbuf_free(&bytes);
        break;
    }
    case ZT_DEC_FUSE:
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) rc = zt_sbuf_put(&t, in->buf.p + in->p[i].off, in->p[i].len, st);
        if (rc == ZT_OK) rc = zt_pieces_add(out, t.p ? t.p : "", t.len, -1, 0, st);
        break;
    case ZT_DEC_STRIP:
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) {
            const char *s = in->buf.p + in->p[i].off;
            size_t n = in->p[i].len;
            /* char boundaries */
            size_t nc = 0, k = 0;
            while (k < n) { uint32_t cp; k += (size_t)zt_utf8_dec(s + k, &cp); ++nc; }
            size_t a = 0, b = n, ca = 0;
            for (int j = 0; j < d->start && a < n; ++j) {
                uint32_t cp; int l = zt_utf8_dec(s + a, &cp);
                if (cp != d->cp) break;
                a += (size_t)l; ++ca;
            }
            for (int j = 0; j < d->stop && b > a && nc - ca > (size_t)j; ++j) {
                size_t q = b - 1;
                while (q > a && ((unsigned char)s[q] & 0xC0) == 0x80) --q;
                uint32_t cp; zt_utf8_dec(s + q, &cp);
                if (cp != d->cp) break;
                b = q;
            }
            rc = zt_pieces_add(out, s + a, b - a, -1, 0, st);
        }
        break;
    case ZT_DEC_WORDPIECE:
        /* tokens after the first: the prefix removed once where they start with it, else a space before;
         * cleanup: HF's cleanup() replacements, in its order */
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) {
            const char *s = in->buf.p + in->p[i].off;
            size_t n = in->p[i].len;
            t.len = 0;
            if (i > 0 && n >= d->strlen && memcmp(s, d->str, d->strlen) == 0) {
                /* Rust replacen(prefix, "", 1): the first occurrence, which is at 0 here */
                rc = zt_sbuf_put(&t, s + d->strlen, n - d->strlen, st);
            } else {
                if (i > 0) rc = zt_sbuf_put(&t, " ", 1, st);
                if (rc == ZT_OK) rc = zt_sbuf_put(&t, s, n, st);
            }
            static const char *const cl[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                                {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},
                                                {" 've", "'ve"}, {" 're", "'re"}};
            for (size_t k = 0; d->start && k < sizeof cl / sizeof cl[0] && rc == ZT_OK; ++k) {
                zt_sbuf u = {0};
                zt_regex lit = {.literal = 1, .lit = (char *)cl[k][0], .litlen = strlen(cl[k][0])};
                rc = replace_all(&lit, cl[k][1], strlen(cl[k][1]), t.p ? t.p : "", t.len, &u, NULL, st);
                if (rc == ZT_OK) { zt_sbuf_free(&t); t = u; } else zt_sbuf_free(&u);
            }
            if (rc == ZT_OK) rc = zt_pieces_add(out, t.p ? t.p : "", t.len, -1, 0, st);
        }
        break;
    case ZT_DEC_REPLACE:
        for (size_t i = 0; i < in->n && rc == ZT_OK; ++i) {
            t.len = 0;
            rc = replace_all(&d->pat, d->str, d->strlen, in->buf.p + in->p[i].off, in->p[i].len, &t, NULL, st);
            if (rc == ZT_OK) rc = zt_pieces_add(out, t.p ? t.p : "", t.len, -1, 0, st);
        }
        break;
    default:
        rc = zt_fail(st, ZT_EINTERNAL, "tokenizer: bad decoder type %d", d->type);
    }
    zt_sbuf_free(&t);
    return rc;
}

int zt_decoder_apply(const zt_decoder *d, zt_pieces *toks, zt_status *st) {
    if (d->type == ZT_DEC_SEQ) {
        for (int i = 0; i < d->nsub; ++i) ZT_TRY(zt_decoder_apply(&d->sub[i], toks, st));
        return ZT_OK;
    }
    zt_pieces out = {0};
    int rc = dec_one(d, toks, &out, st);
    if (rc) { zt_pieces_free(&out); return rc; }
    zt_pieces_free(toks);
    *toks = out;
    return ZT_OK;
}

void zt_decoder_free(zt_decoder *d) {
    if (!d) return;
    for (int i = 0; i < d->nsub; ++i) zt_decoder_free(&d->sub[i]);
    free(d->sub);
    free(d->str);
    zt_regex_free(&d->pat);
}
