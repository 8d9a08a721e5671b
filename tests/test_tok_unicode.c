/*
 * test_tok_unicode.c -- the Unicode classes of tokenizer regexes (issue 30), without Python, over all
 * 1,112,064 Unicode scalar values.
 *   1. io/tokenizer_unicode.c (generated from HF tokenizers' Oniguruma by scripts/gen_tok_unicode.py) is
 *      well formed: sorted, disjoint ranges, no surrogates, member counts as recorded; the 30 general
 *      categories partition the code space.
 *   2. Against utf8proc (Debian's, Unicode 15.0): every code point utf8proc assigns has the same general
 *      category in the tables; the code points utf8proc leaves unassigned and the tables assign are counted
 *      (Unicode 15.1 and 16.0 additions).
 *   3. Through the pattern compiler: each spelling (\p{Lu}, \P{Lu}, \p{^Lu}, [\P{L}], \w, \W, [\W], \s,
 *      [[:alpha:]], [[:^alpha:]], \h, ...) matches exactly the class's members, for every code point.
 *   4. Ruby-syntax meanings that PCRE2 does not share: \pL is the literal "pL", \v is U+000B, ^ and $ are
 *      line anchors, a nested class is a union, \b uses Oniguruma's \w.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tap.h"
#include "tokenizer_int.h"

static char *all_text(size_t *n) {          /* every scalar value once, in order */
    char *b = malloc(4 * 0x110000);
    size_t k = 0;
    for (uint32_t c = 0; c < 0x110000; ++c)
        if (c < 0xD800 || c > 0xDFFF) k += (size_t)zt_utf8_enc(c, b + k);
    *n = k;
    return b;
}

static const char *const GC2[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                                  "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
static const int UP[] = {UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LM,
                         UTF8PROC_CATEGORY_LO, UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_MC, UTF8PROC_CATEGORY_ME,
                         UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NO, UTF8PROC_CATEGORY_PC,
                         UTF8PROC_CATEGORY_PD, UTF8PROC_CATEGORY_PS, UTF8PROC_CATEGORY_PE, UTF8PROC_CATEGORY_PI,
                         UTF8PROC_CATEGORY_PF, UTF8PROC_CATEGORY_PO, UTF8PROC_CATEGORY_SM, UTF8PROC_CATEGORY_SC,
                         UTF8PROC_CATEGORY_SK, UTF8PROC_CATEGORY_SO, UTF8PROC_CATEGORY_ZS, UTF8PROC_CATEGORY_ZL,
                         UTF8PROC_CATEGORY_ZP, UTF8PROC_CATEGORY_CC, UTF8PROC_CATEGORY_CF, UTF8PROC_CATEGORY_CS,
                         UTF8PROC_CATEGORY_CO, UTF8PROC_CATEGORY_CN};

static void check_tables(void) {
    int ok = 1;
    for (int k = 0; k < zt_uc_nclasses && ok; ++k) {
        const zt_uc_class *c = &zt_uc_classes[k];
        long cnt = 0;
        for (int i = 0; i < c->nr; ++i) {
            uint32_t lo = c->r[2 * i], hi = c->r[2 * i + 1];
            if (lo > hi || hi > 0x10FFFF || (i && lo <= c->r[2 * i - 1] + 1) || (lo <= 0xDFFF && hi >= 0xD800)) {
                tap_diag("class %d range %d: [%X, %X] is not sorted/disjoint/valid", k, i, lo, hi);
                ok = 0;
                break;
            }
            cnt += hi - lo + 1;
        }
        if (ok && cnt != c->count) { tap_diag("class %d: %ld members, recorded %d", k, cnt, c->count); ok = 0; }
    }
    tap_ok(ok, "%d generated classes (%s): sorted disjoint ranges, no surrogates, counts as recorded", zt_uc_nclasses,
           zt_uc_source);
    int gc[30];
    for (int i = 0; i < 30; ++i) gc[i] = zt_uc_find('p', GC2[i]);
    int part = 1;
    long same = 0, newer = 0, differ = 0, changed = 0;
    for (uint32_t c = 0; c < 0x110000; ++c) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        int in = 0, which = -1;
        for (int i = 0; i < 30; ++i)
            if (gc[i] >= 0 && zt_uc_has(gc[i], c)) { in++; which = i; }
        if (in != 1) { if (part) tap_diag("U+%04X is in %d general categories", c, in); part = 0; continue; }
        int u = utf8proc_category((utf8proc_int32_t)c);
        if (u == UP[which]) same++;
        else if (u == UTF8PROC_CATEGORY_CN) newer++;
        /* the one category change from Unicode 15.0 to 16.0: U+1171E AHOM CONSONANT SIGN MEDIAL RA, Mn -> Mc */
        else if (c == 0x1171E && u == UTF8PROC_CATEGORY_MN && UP[which] == UTF8PROC_CATEGORY_MC) changed++;
        else { if (!differ) tap_diag("U+%04X: %s here, utf8proc category %d", c, GC2[which], u); differ++; }
    }
    tap_ok(part, "the 30 general categories partition the 1,112,064 code points");
    tap_ok(differ == 0 && same + newer + changed == 1112064,
           "general category == utf8proc %s's (Unicode %s) for all 1,112,064 code points: %ld the same, %ld assigned "
           "since (unassigned there), %ld known change (U+1171E Mn -> Mc), %ld other differences",
           utf8proc_version(), utf8proc_unicode_version(), same, newer, changed, differ);
}

/* the set a compiled pattern matches, one character at a time over all code points, vs class k (neg: its
 * complement) */
static void check_spelling(const char *text, size_t n, const char *pat, const char *name, char kind, int neg) {
    int k = zt_uc_find(kind, name);
    zt_regex r;
    zt_status st = {0};
    char full[128];
    snprintf(full, sizeof full, "%s+", pat);
    if (k < 0 || zt_regex_compile(&r, full, 1, "test", &st)) {
        tap_ok(0, "%s compiles (%s)", pat, k < 0 ? "no class" : st.msg);
        return;
    }
    zt_matches mm = {0};
    int rc = zt_regex_find(&r, text, n, &mm, &st);
    long bad = 0, members = 0;
    size_t pos = 0, mi = 0;
    uint32_t first = 0;
    while (rc == ZT_OK && pos < n) {
        uint32_t cp;
        size_t l = (size_t)zt_utf8_dec(text + pos, &cp);
        while (mi < mm.n && mm.m[2 * mi + 1] <= pos) ++mi;
        int got = mi < mm.n && mm.m[2 * mi] <= pos;
        int want = zt_uc_has(k, cp) != neg;
        members += got;
        if (got != want && !bad++) first = cp;
        pos += l;
    }
    tap_ok(rc == ZT_OK && bad == 0, "%-14s == Oniguruma's members for every code point (%ld members%s)", pat, members,
           bad ? ", DIFFERENT" : "");
    if (bad) tap_diag("%s: %ld code points differ, first U+%04X", pat, bad, first);
    free(mm.m);
    zt_regex_free(&r);
}

/* matches of pat in s as "a-b a-b ..." */
static void check_matches(const char *pat, const char *s, const char *want, const char *what) {
    zt_regex r;
    zt_status st = {0};
    char got[512] = "";
    int rc = zt_regex_compile(&r, pat, 1, "test", &st);
    if (rc == ZT_OK) {
        zt_matches mm = {0};
        rc = zt_regex_find(&r, s, strlen(s), &mm, &st);
        for (size_t i = 0; rc == ZT_OK && i < mm.n; ++i)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%zu-%zu", i ? " " : "", mm.m[2 * i], mm.m[2 * i + 1]);
        free(mm.m);
        zt_regex_free(&r);
    }
    tap_ok(rc == ZT_OK && !strcmp(got, want), "%s: '%s' on \"%s\" matches %s (got %s)", what, pat, s, want,
           rc ? st.msg : got);
}

int main(void) {
    check_tables();
    size_t n;
    char *text = all_text(&n);
    static const struct { const char *pat, *name; char kind; int neg; } sp[] = {
        {"\\p{L}", "l", 'p', 0}, {"\\p{Lu}", "lu", 'p', 0}, {"\\p{Ll}", "ll", 'p', 0}, {"\\p{Lt}", "lt", 'p', 0},
        {"\\p{Lm}", "lm", 'p', 0}, {"\\p{Lo}", "lo", 'p', 0}, {"\\p{M}", "m", 'p', 0}, {"\\p{Mn}", "mn", 'p', 0},
        {"\\p{N}", "n", 'p', 0}, {"\\p{Nd}", "nd", 'p', 0}, {"\\p{P}", "p", 'p', 0}, {"\\p{S}", "s", 'p', 0},
        {"\\p{So}", "so", 'p', 0}, {"\\p{Z}", "z", 'p', 0}, {"\\p{C}", "c", 'p', 0}, {"\\p{Cn}", "cn", 'p', 0},
        {"\\p{Co}", "co", 'p', 0}, {"\\p{Letter}", "l", 'p', 0}, {"\\p{Other_Letter}", "lo", 'p', 0},
        {"\\p{ l u }", "lu", 'p', 0}, {"\\p{Han}", "han", 'p', 0}, {"\\p{Latin}", "latin", 'p', 0},
        {"\\p{Alpha}", "alpha", 'p', 0}, {"\\p{Any}", "any", 'p', 0},
        {"\\P{L}", "l", 'p', 1}, {"\\p{^Lo}", "lo", 'p', 1}, {"\\P{^N}", "n", 'p', 0}, {"[\\P{P}]", "p", 'p', 1},
        {"[^\\p{L}\\p{N}]", NULL, 0, 0}, {"[\\p{L}\\p{M}]", NULL, 0, 0},
        {"\\s", "s", 'e', 0}, {"\\S", "s", 'e', 1}, {"[\\S]", "s", 'e', 1}, {"\\w", "w", 'e', 0}, {"\\W", "w", 'e', 1},
        {"[\\W]", "word", 'x', 1}, {"[\\w]", "word", 'x', 0}, {"[\\p{Word}]", "word", 'x', 0}, {"\\d", "d", 'e', 0}, {"\\D", "d", 'e', 1}, {"\\h", "h", 'e', 0},
        {"[[:alpha:]]", "alpha", 'x', 0}, {"[[:^alpha:]]", "alpha", 'x', 1}, {"[[:punct:]]", "punct", 'x', 0},
        {"[[:word:]]", "word", 'x', 0}, {"[[:upper:]]", "upper", 'x', 0},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; ++i) {
        if (!sp[i].name) continue;
        check_spelling(text, n, sp[i].pat, sp[i].name, sp[i].kind, sp[i].neg);
    }
    free(text);
    /* Ruby-syntax meanings (checked against tokenizers 0.23 by hand; tests/tok_unicode_hf.sh does it live) */
    check_matches("\\pL+", "apLLL b", "1-5", "\\pL without braces is the literal 'pL'");
    check_matches("\\v", "a\x0b\n", "1-2", "\\v is U+000B only");
    check_matches("a$", "a\na", "0-1 2-3", "$ is a line anchor");
    check_matches("^a", "a\na", "0-1 2-3", "^ is a line anchor");
    check_matches("[a[bc]]+", "xabcx[]", "1-4", "a nested class is a union");
    check_matches("\\bab", "ab ab.ab", "0-2 3-5 6-8", "\\b with Oniguruma's \\w");
    check_matches("\\u00e9", "caf\xc3\xa9", "3-5", "\\uHHHH is a code point");
    check_matches("(?i)\\p{Lu}", "aB", "1-2", "a bare property is not case-folded under (?i)");
    check_matches("(?i:x)\\p{Lu}|(?i)[\\p{Lu}]", "xaB", "0-1 1-2 2-3", "... nor after a (?i:) group; in brackets it is");
    check_matches("[\\p{Lo}]+", "\xf0\xae\xb2\x81", "0-4", "U+2EC81 (CJK Extension I, Unicode 15.1) is \\p{Lo}");
    check_matches("\\p{S}", "\xf0\x9f\x9d\xb5<s", "0-4 4-5", "U+1F775 (Unicode 15.0) is \\p{S}");
    return tap_done();
}
