/*
 * test_tokenizer.c -- io/tokenizer.h against Hugging Face tokenizers 0.23, without Python: the fixtures in
 * tests/fixtures/tok (made by scripts/make_tokenizer_fixtures.py and make_tokenizer_fixtures_cov.py) hold,
 * for each tokenizer.json (gpt2, llama3, llama2, metaspace; deepseek3, classes, digits, punct, unigram,
 * unigram_unk, wordpiece), HF's ids for text.txt with and without special tokens and HF's decoded strings
 * (and for the second set HF's ids for unicode.txt: random code points of every plane, new ones included);
 * byte-level ones must give decode(encode(s)) == s.  Every check is exact.  Then: the lookups (vocab size, BOS/EOS, token <-> id),
 * concurrent encoding, invalid UTF-8 (refused, documented in tokenizer.h), and bad tokenizer.json files
 * (malformed, truncated, unsupported parts): one clear error naming the file and the thing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tap.h"
#include "testutil.h"
#include "tokenizer.h"

static char g_fix[1024];

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long m = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)m + 1);
    if (b && fread(b, 1, (size_t)m, f) != (size_t)m) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[m] = 0; if (n) *n = (size_t)m; }
    return b;
}

static int32_t *read_ids(const char *path, size_t *n) {
    char *s = slurp(path, NULL);
    *n = 0;
    if (!s) return NULL;
    size_t cap = 1024;
    int32_t *v = malloc(cap * sizeof *v);
    char *p = s, *e;
    for (;;) {
        long x = strtol(p, &e, 10);
        if (e == p) break;
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = (int32_t)x;
        p = e;
    }
    free(s);
    return v;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb, const char *what) {
    if (na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a))) return 1;
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) ++i;
    tap_diag("%s: %zu vs %zu ids, first difference at %zu (got %d, expected %d)", what, na, nb, i,
             i < na ? a[i] : -1, i < nb ? b[i] : -1);
    return 0;
}

/* ------------------------------------------------------------ the fixtures */
static void check_fixture(const char *name, int vocab, const char *bos, const char *eos) {
    char p[1200];
    zt_status st = {0};
    zt_tokenizer *t = NULL;
    snprintf(p, sizeof p, "%s/%s", g_fix, name);             /* a directory: tokenizer.json inside */
    int rc = zt_tok_load(p, &t, &st);
    if (!tap_ok(rc == ZT_OK, "%s: loads (%s)", name, rc ? st.msg : "ok")) return;
    size_t tn;
    snprintf(p, sizeof p, "%s/text.txt", g_fix);
    char *text = slurp(p, &tn);
    for (int sp = 0; sp < 2; ++sp) {
        size_t ne, ng;
        snprintf(p, sizeof p, "%s/%s/%s", g_fix, name, sp ? "ids_special.txt" : "ids.txt");
        int32_t *exp = read_ids(p, &ne), *got = NULL;
        rc = zt_tok_encode(t, text, tn, sp, &got, &ng, &st);
        tap_ok(rc == ZT_OK && exp && same_ids(got, ng, exp, ne, name),
               "%s: encode(text, add_special=%d) == HF's ids (%zu ids)", name, sp, ne);
        if (sp) {
            for (int skip = 0; skip < 2; ++skip) {
                char *dec = NULL; size_t dl = 0, el = 0;
                snprintf(p, sizeof p, "%s/%s/%s", g_fix, name, skip ? "decoded_skip.txt" : "decoded.txt");
                char *want = slurp(p, &el);
                rc = zt_tok_decode(t, got, ng, skip, &dec, &dl, &st);
                int ok = rc == ZT_OK && want && dl == el && !memcmp(dec, want, el) && dec[dl] == 0;
                tap_ok(ok, "%s: decode(ids, skip_special=%d) == HF's string (%zu bytes)", name, skip, el);
                free(dec); free(want);
            }
        }
        free(exp); free(got);
    }
    /* lookups */
    tap_ok(zt_tok_vocab_size(t) == vocab, "%s: vocab size %d (got %d)", name, vocab, zt_tok_vocab_size(t));
    int b = zt_tok_bos_id(t), e = zt_tok_eos_id(t);
    tap_ok((bos ? b >= 0 && !strcmp(zt_tok_token_str(t, b), bos) : b == -1) &&
           (eos ? e >= 0 && !strcmp(zt_tok_token_str(t, e), eos) : e == -1),
           "%s: BOS %s, EOS %s (ids %d, %d)", name, bos ? bos : "none", eos ? eos : "none", b, e);
    int rt = 1;
    int abc = zt_tok_token_id(t, "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3");   /* "ＡＢＣ" (metaspace only) */
    if (abc >= 0)
        tap_ok(zt_tok_token_str(t, abc) && !strcmp(zt_tok_token_str(t, abc), "ABC") && zt_tok_token_id(t, "ABC") == -1,
               "%s: a normalized added token: token_id(content), token_str = the normalized form (as HF)", name);
    for (int id = 0; id < zt_tok_vocab_size(t) && rt; ++id) {
        if (id == abc) continue;
        const char *s = zt_tok_token_str(t, id);
        rt = s && zt_tok_token_id(t, s) >= 0;
        if (!rt) tap_diag("id %d: no token string or no way back", id);
    }
    tap_ok(rt && zt_tok_token_str(t, -1) == NULL && zt_tok_token_str(t, zt_tok_vocab_size(t)) == NULL &&
           zt_tok_token_id(t, "\x01no such token\x02") == -1,
           "%s: token_str/token_id over the whole vocabulary; -1 and vocab_size have none", name);
    /* issue 30: HF's ids for random Unicode (every plane, code points assigned in Unicode 15.0-16.0) */
    snprintf(p, sizeof p, "%s/%s/ids_unicode.txt", g_fix, name);
    size_t une = 0, un = 0;
    int32_t *uexp = read_ids(p, &une);
    snprintf(p, sizeof p, "%s/unicode.txt", g_fix);
    char *utext = slurp(p, &un);
    if (uexp) {
        int32_t *got = NULL; size_t ng = 0;
        rc = zt_tok_encode(t, utext, un, 0, &got, &ng, &st);
        if (rc) tap_diag("%s", st.msg);
        tap_ok(rc == ZT_OK && same_ids(got, ng, uexp, une, name), "%s: encode(unicode.txt) == HF's ids (%zu ids)", name, une);
        free(got);
    }
    free(uexp);
    /* round trip through the tokenizer's own decode: lossless for byte-level (nothing dropped), on text.txt,
     * unicode.txt and 300 random strings of random code points (all planes, new ones included) */
    if (!strcmp(name, "gpt2") || !strcmp(name, "llama3") || !strcmp(name, "deepseek3") || !strcmp(name, "digits")) {
        int bad = 0, total = 0;
        unsigned seed = 30;
        char rnd[512];
        for (int k = 0; k < 302; ++k) {
            const char *x = k == 0 ? text : k == 1 ? utext : rnd;
            size_t xn = k == 0 ? tn : k == 1 ? un : 0;
            if (k >= 2) {
                int m = (int)(rand_r(&seed) % 40);
                for (int j = 0; j < m; ++j) {
                    unsigned r = (unsigned)rand_r(&seed), cp;
                    cp = r % 4 == 0 ? 0x20 + r % 0x60 : r % 4 == 1 ? r % 0x3000 : r % 4 == 2 ? 0x10000 + r % 0x30000 : r % 0x110000;
                    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x1F775;
                    char u[4]; int l;
                    if (cp < 0x80) { u[0] = (char)cp; l = 1; }
                    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); l = 2; }
                    else if (cp < 0x10000) { u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); l = 3; }
                    else { u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); l = 4; }
                    memcpy(rnd + xn, u, (size_t)l); xn += (size_t)l;
                }
            }
            int32_t *ids = NULL; size_t n = 0; char *dec = NULL; size_t dl = 0;
            rc = zt_tok_encode(t, x, xn, 0, &ids, &n, &st);
            if (rc == ZT_OK) rc = zt_tok_decode(t, ids, n, 0, &dec, &dl, &st);
            total++;
            if (rc != ZT_OK || dl != xn || memcmp(dec, x, xn)) {
                if (!bad) tap_diag("%s: round trip %d differs (%zu -> %zu bytes)", name, k, xn, dl);
                bad++;
            }
            free(ids); free(dec);
        }
        tap_ok(bad == 0, "%s: decode(encode(s)) == s for text.txt, unicode.txt and 300 random strings (%d of %d differ)",
               name, bad, total);
    }
    free(utext);
    /* concurrent encodes on one tokenizer agree with the serial one (per-thread caches) */
    {
        int32_t *ref; size_t nref;
        zt_tok_encode(t, text, tn, 1, &ref, &nref, &st);
        int bad = 0;
#pragma omp parallel for num_threads(4) reduction(+ : bad)
        for (int k = 0; k < 16; ++k) {
            zt_status s2;
            int32_t *ids; size_t n;
            /* different prefixes so the threads' caches see different words */
            size_t len = tn - (size_t)k * (tn / 64);
            while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80) --len;
            if (zt_tok_encode(t, text, len, 1, &ids, &n, &s2) != ZT_OK) { bad++; continue; }
            if (len == tn) bad += !(n == nref && !memcmp(ids, ref, n * sizeof *ids));
            free(ids);
        }
        tap_ok(bad == 0, "%s: 16 concurrent encodes on 4 threads: no error, full-text results identical", name);
        free(ref);
    }
    /* empty text */
    {
        int32_t *ids; size_t n0, n1;
        zt_tok_encode(t, "", 0, 0, &ids, &n0, &st); free(ids);
        zt_tok_encode(t, "", 0, 1, &ids, &n1, &st); free(ids);
        size_t want1 = !strcmp(name, "llama3") || !strcmp(name, "llama2") || !strcmp(name, "unigram") || !strcmp(name, "punct") ? 1
                       : !strcmp(name, "wordpiece") ? 2 : 0;
        tap_ok(n0 == 0 && n1 == want1,
               "%s: the empty text encodes to no ids (BOS only with add_special and a template)", name);
    }
    free(text);
    zt_tok_free(t);
}

/* ------------------------------------------------------------ invalid input */
static void check_invalid_utf8(void) {
    char p[1200];
    zt_status st = {0};
    zt_tokenizer *t = NULL;
    snprintf(p, sizeof p, "%s/gpt2/tokenizer.json", g_fix);
    if (zt_tok_load(p, &t, &st)) { tap_ok(0, "load gpt2: %s", st.msg); return; }
    static const struct { const char *s; size_t at; const char *what; } bad[] = {
        {"abc\xff" "def", 3, "a 0xFF byte"},
        {"caf\xc3", 3, "a truncated 2-byte sequence at the end"},
        {"x\xed\xa0\x80y", 1, "an encoded surrogate (U+D800)"},
        {"\xc0\xaf", 0, "an overlong '/'"},
        {"ok \xf4\x90\x80\x80", 3, "a code point above U+10FFFF"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
        int32_t *ids = (int32_t *)&st; size_t n = 7;
        char want[64];
        snprintf(want, sizeof want, "not valid UTF-8 (byte %zu)", bad[i].at);
        int rc = zt_tok_encode(t, bad[i].s, strlen(bad[i].s), 0, &ids, &n, &st);
        tap_ok(rc == ZT_EDATA && strstr(st.msg, want) && ids == NULL && n == 0,
               "invalid UTF-8 is refused, naming the byte: %s (%s)", bad[i].what, st.msg);
    }
    /* decode of ids outside the vocabulary: dropped, as HF does */
    int32_t ids[] = {zt_tok_token_id(t, "a"), 999999, -5, zt_tok_token_id(t, "b")};
    char *dec = NULL; size_t dl;
    int rc = zt_tok_decode(t, ids, 4, 0, &dec, &dl, &st);
    tap_ok(rc == ZT_OK && !strcmp(dec, "ab"), "decode drops ids outside the vocabulary (as HF)");
    free(dec);
    /* byte-level decode of a lone continuation byte: U+FFFD, as HF (from_utf8_lossy) */
    int32_t half[] = {zt_tok_token_id(t, "\xc3\x83")};  /* byte 0xC3 alone */
    rc = zt_tok_decode(t, half, 1, 0, &dec, &dl, &st);
    tap_ok(rc == ZT_OK && !strcmp(dec, "\xef\xbf\xbd"), "decode of an incomplete UTF-8 sequence gives U+FFFD");
    free(dec);
    zt_tok_free(t);
}

/* write a variant of fixture base's tokenizer.json with one substring replaced; returns its path */
static const char *variant_of(const char *base, const char *dir, const char *name, const char *from, const char *to,
                              size_t keep) {
    static char out[1200];
    char p[1200];
    size_t n;
    snprintf(p, sizeof p, "%s/%s/tokenizer.json", g_fix, base);
    char *s = slurp(p, &n);
    snprintf(out, sizeof out, "%s/%s.json", dir, name);
    FILE *f = fopen(out, "wb");
    if (!s || !f) { free(s); if (f) fclose(f); return out; }
    if (from) {
        char *at = strstr(s, from);
        if (at) {
            fwrite(s, 1, (size_t)(at - s), f);
            fputs(to, f);
            fputs(at + strlen(from), f);
        } else fputs("(pattern not found)", f);
    } else fwrite(s, 1, keep < n ? keep : n, f);
    fclose(f);
    free(s);
    return out;
}

/* a variant of the gpt2 fixture */
static const char *variant(const char *dir, const char *name, const char *from, const char *to, size_t keep) {
    return variant_of("gpt2", dir, name, from, to, keep);
}

static void expect_load_fail(const char *path, int code, const char *n1, const char *n2, const char *what) {
    zt_status st = {0};
    zt_tokenizer *t = (zt_tokenizer *)&st;
    int rc = zt_tok_load(path, &t, &st);
    int ok = code == ZT_OK ? rc == ZT_OK
                           : rc == code && t == NULL && strstr(st.msg, n1) && (!n2 || strstr(st.msg, n2)) &&
                             !strchr(st.msg, '\n');
    if (!ok) tap_diag("rc=%d msg='%s'", rc, st.msg);
    tap_ok(ok, "%s -> %s", what, rc == ZT_OK ? "loads" : st.msg);
    if (rc == ZT_OK && t != (zt_tokenizer *)&st) zt_tok_free(t);
}

static void check_bad_files(void) {
    char *dir = tu_tmpdir();
    char p[1200];
    snprintf(p, sizeof p, "%s/none.json", dir);
    expect_load_fail(p, ZT_EIO, "none.json", "No such file", "a missing file");
    expect_load_fail(dir, ZT_EIO, "tokenizer.json", NULL, "a directory without tokenizer.json");
    expect_load_fail(variant(dir, "trunc", NULL, NULL, 20000), ZT_EDATA, "trunc.json: not valid JSON", NULL,
                     "a truncated tokenizer.json");
    expect_load_fail(variant(dir, "empty", NULL, NULL, 0), ZT_EDATA, "empty.json: not valid JSON", NULL,
                     "an empty tokenizer.json");
    expect_load_fail(variant(dir, "garbage", "{\"version\"", "[{\"version\"", 0), ZT_EDATA, "garbage.json: not valid JSON",
                     NULL, "malformed JSON");
    expect_load_fail(variant(dir, "wl", "\"type\":\"BPE\"", "\"type\":\"WordLevel\"", 0), ZT_EUNSUPPORTED,
                     "wl.json", "model type 'WordLevel' is not supported", "model WordLevel");
    expect_load_fail(variant(dir, "wp", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"", 0), ZT_EDATA,
                     "wp.json", "WordPiece: 'continuing_subword_prefix' must be a string", "a WordPiece without its settings");
    expect_load_fail(variant(dir, "uni", "\"type\":\"BPE\"", "\"type\":\"Unigram\"", 0), ZT_EDATA,
                     "uni.json", "Unigram: 'vocab' must be a non-empty list", "a Unigram with a BPE vocabulary");
    expect_load_fail(variant(dir, "lower", "\"normalizer\":null", "\"normalizer\":{\"type\":\"Lowercase\"}", 0),
                     ZT_EUNSUPPORTED, "lower.json", "normalizer 'Lowercase' is not supported", "normalizer Lowercase");
    expect_load_fail(variant(dir, "seqn", "\"normalizer\":null",
                             "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"StripAccents\"}]}", 0),
                     ZT_EUNSUPPORTED, "seqn.json", "normalizer 'StripAccents'", "an unknown normalizer inside a Sequence");
    expect_load_fail(variant(dir, "ws", "\"pre_tokenizer\":{\"type\":\"ByteLevel\"", "\"pre_tokenizer\":{\"type\":\"CharDelimiterSplit\"", 0),
                     ZT_EUNSUPPORTED, "ws.json", "pre_tokenizer 'CharDelimiterSplit'", "pre-tokenizer CharDelimiterSplit");
    expect_load_fail(variant(dir, "punb", "\"pre_tokenizer\":{\"type\":\"ByteLevel\"", "\"pre_tokenizer\":{\"type\":\"Punctuation\",\"behavior\":\"Sideways\"", 0),
                     ZT_EUNSUPPORTED, "punb.json", "Punctuation behavior 'Sideways'", "an unknown Punctuation behavior");
    expect_load_fail(variant(dir, "dec", "\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"CTC\"", 0),
                     ZT_EUNSUPPORTED, "dec.json", "decoder 'CTC'", "decoder CTC");
    expect_load_fail(variant(dir, "prop", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
                             "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{Balinese}+\"},\"behavior\":\"Isolated\",\"invert\":false}", 0),
                     ZT_EUNSUPPORTED, "prop.json", "regex property \\p{Balinese} is not supported", "a property without a table");
    expect_load_fail(variant(dir, "gx", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
                             "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\X\"},\"behavior\":\"Isolated\",\"invert\":false}", 0),
                     ZT_EUNSUPPORTED, "gx.json", "\\X (grapheme cluster) is not supported", "\\X");
    expect_load_fail(variant(dir, "pp", "\"post_processor\":{\"type\":\"ByteLevel\"", "\"post_processor\":{\"type\":\"BertProcessing\"", 0),
                     ZT_EUNSUPPORTED, "pp.json", "post_processor 'BertProcessing'", "post-processor BertProcessing");
    expect_load_fail(variant(dir, "drop", "\"dropout\":null", "\"dropout\":0.1", 0), ZT_EUNSUPPORTED, "drop.json",
                     "dropout", "BPE dropout");
    expect_load_fail(variant(dir, "sw", "\"single_word\":false", "\"single_word\":true", 0), ZT_EUNSUPPORTED, "sw.json",
                     "single_word", "an added token with single_word");
    expect_load_fail(variant(dir, "trunc2", "\"truncation\":null", "\"truncation\":{\"max_length\":8}", 0),
                     ZT_OK, "", NULL, "truncation settings are accepted (no effect on prep)");
    expect_load_fail(variant(dir, "trunc3", "\"truncation\":null", "\"truncation\":8", 0),
                     ZT_EDATA, "trunc3.json", "'truncation' must be null or an object", "a truncation that is not an object");
    expect_load_fail(variant(dir, "rx", "\"use_regex\":true},\"post", "\"use_regex\":true},\"post", 0), ZT_OK, "", NULL,
                     "(control: an unchanged copy loads)");
    expect_load_fail(variant(dir, "badre", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
                             "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\",\"invert\":false}", 0),
                     ZT_EUNSUPPORTED, "badre.json", "regex '(unclosed' does not compile", "a regex that does not compile");
    expect_load_fail(variant(dir, "merge", "\"merges\":[\"", "\"merges\":[\"nosuchtoken x\",\"", 0), ZT_EDATA, "merge.json",
                     "merge token 'nosuchtoken' is not in the vocabulary", "a merge of an unknown token");
    expect_load_fail(variant(dir, "nomodel", "\"model\":{", "\"modelx\":{", 0), ZT_EDATA, "nomodel.json", "no 'model'",
                     "no model");
    expect_load_fail(variant(dir, "three", "\"merges\":[\"", "\"merges\":[\"a b c\",\"", 0), ZT_EDATA, "three.json",
                     "merge 1 ('a b c') is not two tokens separated by one space", "a merge of three tokens");
    /* a "#version" line before the merges is skipped (ranks count from the line after it), as HF */
    {
        zt_status st = {0};
        zt_tokenizer *t = NULL;
        char p[1200];
        size_t tn, ne, ng;
        snprintf(p, sizeof p, "%s/text.txt", g_fix);
        char *text = slurp(p, &tn);
        snprintf(p, sizeof p, "%s/gpt2/ids.txt", g_fix);
        int32_t *exp = read_ids(p, &ne), *got = NULL;
        int rc = zt_tok_load(variant(dir, "ver", "\"merges\":[\"", "\"merges\":[\"#version: 0.2\",\"", 0), &t, &st);
        if (rc == ZT_OK) rc = zt_tok_encode(t, text, tn, 0, &got, &ng, &st);
        tap_ok(rc == ZT_OK && same_ids(got, ng, exp, ne, "ver"), "a '#version' merges line is skipped (same ids)");
        free(text); free(exp); free(got);
        zt_tok_free(t);
    }
    tu_rmdir(dir);
}

/* ------------------------------------------------------------ issue 45 item 6c: HF's field rules */
/* encode the fixture text with tokenizer file a and b: the same ids (and both load) */
static int same_encoding(const char *a, const char *b, const char *what) {
    char p[1200];
    size_t tn, na = 0, nb = 0;
    snprintf(p, sizeof p, "%s/text.txt", g_fix);
    char *text = slurp(p, &tn);
    zt_status st = {0};
    zt_tokenizer *ta = NULL, *tb = NULL;
    int32_t *ia = NULL, *ib = NULL;
    int rc = zt_tok_load(a, &ta, &st);
    if (rc == ZT_OK) rc = zt_tok_load(b, &tb, &st);
    if (rc == ZT_OK) rc = zt_tok_encode(ta, text, tn, 1, &ia, &na, &st);
    if (rc == ZT_OK) rc = zt_tok_encode(tb, text, tn, 1, &ib, &nb, &st);
    if (rc != ZT_OK) tap_diag("%s: %s", what, st.msg);
    int ok = rc == ZT_OK && na > 0 && same_ids(ia, na, ib, nb, what);
    free(text); free(ia); free(ib);
    zt_tok_free(ta); zt_tok_free(tb);
    return ok;
}

/* the decoding of the fixture text's ids with tokenizer file a and b: the same string */
static int same_decoding(const char *a, const char *b, const char *what) {
    char p[1200];
    size_t tn, n = 0, la = 0, lb = 0;
    snprintf(p, sizeof p, "%s/text.txt", g_fix);
    char *text = slurp(p, &tn), *da = NULL, *db = NULL;
    zt_status st = {0};
    zt_tokenizer *ta = NULL, *tb = NULL;
    int32_t *ids = NULL;
    int rc = zt_tok_load(a, &ta, &st);
    if (rc == ZT_OK) rc = zt_tok_load(b, &tb, &st);
    if (rc == ZT_OK) rc = zt_tok_encode(ta, text, tn, 0, &ids, &n, &st);
    if (rc == ZT_OK) rc = zt_tok_decode(ta, ids, n, 0, &da, &la, &st);
    if (rc == ZT_OK) rc = zt_tok_decode(tb, ids, n, 0, &db, &lb, &st);
    if (rc != ZT_OK) tap_diag("%s: %s", what, st.msg);
    int ok = rc == ZT_OK && la == lb && !memcmp(da, db, la);
    free(text); free(ids); free(da); free(db);
    zt_tok_free(ta); zt_tok_free(tb);
    return ok;
}

/* What Hugging Face tokenizers (0.23, serde) refuses, ztrain refuses, and what it accepts, ztrain accepts:
 * a plain field must be there and not null, a field with a default may be missing, an Option may be null,
 * counts are any integer >= 0, ids any u32 (scripts/tok_fields_probe.py compares the two on every field). */
static void check_hf_fields(void) {
    char *dir = tu_tmpdir();
    char keep[1200];
#define BL_PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}"
#define BL_DEC "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true}"
#define BL_POST "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":true}"
    /* refused, as HF refuses them (ztrain took a default) */
    expect_load_fail(variant_of("digits", dir, "dg", "{\"type\":\"Digits\",\"individual_digits\":true}", "{\"type\":\"Digits\"}", 0),
                     ZT_EDATA, "dg.json", "pre_tokenizer Digits: missing field 'individual_digits' (true or false)",
                     "Digits without individual_digits (HF: missing field)");
    expect_load_fail(variant(dir, "blp", BL_PRE, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"trim_offsets\":true}", 0), ZT_EDATA,
                     "blp.json", "pre_tokenizer ByteLevel: missing field 'add_prefix_space'",
                     "pre-tokenizer ByteLevel without add_prefix_space");
    expect_load_fail(variant(dir, "blt", BL_PRE, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":null}", 0),
                     ZT_EDATA, "blt.json", "pre_tokenizer ByteLevel: 'trim_offsets' must be true or false",
                     "pre-tokenizer ByteLevel with trim_offsets null");
    expect_load_fail(variant(dir, "bld", BL_DEC, "\"decoder\":{\"type\":\"ByteLevel\"}", 0), ZT_EDATA, "bld.json",
                     "decoder ByteLevel: missing field 'add_prefix_space'", "decoder ByteLevel without its fields");
    expect_load_fail(variant(dir, "blq", BL_POST, "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":null}", 0),
                     ZT_EDATA, "blq.json", "post_processor ByteLevel: 'use_regex' must be true or false",
                     "post-processor ByteLevel with use_regex null");
    expect_load_fail(variant(dir, "spi", BL_PRE, "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Isolated\"}", 0),
                     ZT_EDATA, "spi.json", "pre_tokenizer Split: missing field 'invert'", "Split without invert");
    expect_load_fail(variant_of("metaspace", dir, "msp", "\"prepend_scheme\":\"first\"", "\"prepend_scheme\":null", 0), ZT_EDATA,
                     "msp.json", "pre_tokenizer Metaspace: 'prepend_scheme' must be a string", "Metaspace prepend_scheme null");
    expect_load_fail(variant_of("punct", dir, "pun", "\"behavior\":\"MergedWithNext\"", "\"behavior\":1", 0), ZT_EDATA,
                     "pun.json", "pre_tokenizer Punctuation: 'behavior' must be a string", "Punctuation behavior 1");
    expect_load_fail(variant_of("wordpiece", dir, "wpd", "\"prefix\":\"##\",\"cleanup\":true", "\"prefix\":\"##\"", 0), ZT_EDATA,
                     "wpd.json", "decoder WordPiece: missing field 'cleanup'", "decoder WordPiece without cleanup");
    expect_load_fail(variant_of("wordpiece", dir, "tpp", "\"pair\":", "\"pairs\":", 0), ZT_EDATA, "tpp.json",
                     "TemplateProcessing needs 'single' and 'pair' (lists)", "TemplateProcessing without pair");
    expect_load_fail(variant(dir, "unk5", "\"unk_token\":null", "\"unk_token\":5", 0), ZT_EDATA, "unk5.json",
                     "model: 'unk_token' must be a string", "BPE unk_token 5");
    expect_load_fail(variant_of("unigram", dir, "ubf", "\"byte_fallback\":true", "\"byte_fallback\":null", 0), ZT_EDATA,
                     "ubf.json", "model Unigram: 'byte_fallback' must be true or false", "Unigram byte_fallback null");
    expect_load_fail(variant(dir, "ats", ",\"special\":true}", "}", 0), ZT_EDATA, "ats.json",
                     "added_tokens: missing field 'special'", "an added token without special");
    expect_load_fail(variant(dir, "atl", "\"lstrip\":false", "\"lstrip\":null", 0), ZT_EDATA, "atl.json",
                     "added_tokens: 'lstrip' must be true or false", "an added token with lstrip null");
    /* accepted, as HF accepts them (ztrain refused them or cut them to an int) */
    snprintf(keep, sizeof keep, "%s", variant_of("wordpiece", dir, "wpm", "\"max_input_chars_per_word\":12",
                                                 "\"max_input_chars_per_word\":1000000", 0));
    tap_ok(same_encoding(keep, variant_of("wordpiece", dir, "wpx", "\"max_input_chars_per_word\":12",
                                          "\"max_input_chars_per_word\":4611686018427387904", 0), "wpx"),
           "WordPiece max_input_chars_per_word 2^62 (a usize in HF) loads and encodes as 1000000 does");
    snprintf(keep, sizeof keep, "%s", variant(dir, "aid0", "\"dropout\":null", "\"dropout\":null", 0));
    tap_ok(same_encoding(keep, variant(dir, "aid", "{\"id\":0,\"content\":\"<|endoftext|>\"", "{\"id\":4294967295,\"content\":\"<|endoftext|>\"", 0), "aid"),
           "an added token's written id 4294967295 (a u32 in HF, not used) loads, the same ids");
    expect_load_fail(variant(dir, "aidx", "{\"id\":0,\"content\":\"<|endoftext|>\"", "{\"id\":4294967296,\"content\":\"<|endoftext|>\"", 0),
                     ZT_EDATA, "aidx.json", "an 'id' (an integer from 0 to 4294967295)", "  ... 4294967296 does not");
    snprintf(keep, sizeof keep, "%s", variant_of("llama2", dir, "stm", "\"start\":1,", "\"start\":1000000,", 0));
    tap_ok(same_decoding(keep, variant_of("llama2", dir, "stx", "\"start\":1,", "\"start\":4611686018427387904,", 0), "stx"),
           "decoder Strip start 2^62 (a usize in HF) strips as 1000000 does (it was cut to 0)");
    expect_load_fail(variant_of("llama2", dir, "stn", "\"start\":1,", "\"start\":-1,", 0), ZT_EDATA, "stn.json",
                     "decoder Strip: 'start' must be a count (an integer >= 0)", "  ... a negative start does not");
#undef BL_PRE
#undef BL_DEC
#undef BL_POST
    tu_rmdir(dir);
}

/* ------------------------------------------------------------ issue 31: inputs that block, explode or leak */
static zt_tokenizer *load_ok(const char *path, const char *what) {
    zt_status st = {0};
    zt_tokenizer *t = NULL;
    if (zt_tok_load(path, &t, &st)) { tap_ok(0, "%s: load: %s", what, st.msg); return NULL; }
    return t;
}

static void check_robustness(void) {
    char *dir = tu_tmpdir();
    char p[1400];
    /* a Split regex that backtracks without end on 200 bytes: the encode returns an error naming the pattern
     * (HF tokenizers: "retry-limit-in-match over"); the alarm fails the test where the match never ends */
    zt_tokenizer *t = load_ok(variant(dir, "bt", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
                                      "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\\\\w+\\\\s?)+$\"},\"behavior\":\"Isolated\",\"invert\":false}", 0),
                              "backtracking Split");
    if (t) {
        char text[201];
        memset(text, 'a', 199); text[199] = '!'; text[200] = 0;
        zt_status st = {0};
        int32_t *ids = NULL; size_t n = 0;
        alarm(120);
        int rc = zt_tok_encode(t, text, 200, 0, &ids, &n, &st);
        alarm(0);
        tap_ok(rc == ZT_EDATA && strstr(st.msg, "bt.json: pre_tokenizer Split") && strstr(st.msg, "regex '(\\w+\\s?)+$'") &&
               strstr(st.msg, "backtracks") && ids == NULL && n == 0,
               "a regex that backtracks without end stops with an error naming it (%s)", st.msg);
        free(ids);
        /* and the same tokenizer still encodes text the pattern handles */
        rc = zt_tok_encode(t, "ab cd", 5, 0, &ids, &n, &st);
        tap_ok(rc == ZT_OK && n > 0, "the same tokenizer encodes a short text afterwards");
        free(ids);
        zt_tok_free(t);
    }
    /* a regex that does not compile inside a normalizer Sequence (and one refused while rewritten): refused,
     * and nothing leaks (the leak-check pass runs this test under LeakSanitizer) */
    expect_load_fail(variant(dir, "seqre", "\"normalizer\":null",
                             "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"x\"},"
                             "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(unclosed\"},\"content\":\"y\"}]}", 0),
                     ZT_EUNSUPPORTED, "seqre.json", "regex '(unclosed' does not compile",
                     "a Replace normalizer whose regex does not compile, inside a Sequence");
    expect_load_fail(variant(dir, "seqcls", "\"normalizer\":null",
                             "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"a[b[^c]]\"},\"content\":\"y\"}]}", 0),
                     ZT_EUNSUPPORTED, "seqcls.json", "a negated class inside a class is not supported",
                     "a Replace normalizer regex refused while rewritten (a negated nested class)");
    expect_load_fail(variant(dir, "decre", "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true}",
                             "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(x\"},\"content\":\"y\"}]}", 0),
                     ZT_EUNSUPPORTED, "decre.json", "does not compile", "a Replace decoder in a Sequence, bad regex");
    /* an absurd vocabulary id: refused by name, no table of 747 million entries */
    expect_load_fail(variant(dir, "bigid", "\"!\":1,", "\"!\":747333333,", 0), ZT_EDATA, "bigid.json",
                     "vocab entry '!' has id 747333333", "a vocabulary id of 747,333,333");
    /* added tokens take HF's ids: a content already in the vocabulary keeps the vocabulary's id, a new one
     * the next id (the file's 'id' is only advice, as in tokenizers' TokenizerVisitor), a repeated content
     * its first id */
    snprintf(p, sizeof p, "%s/gpt2/tokenizer.json", g_fix);
    zt_tokenizer *ref = load_ok(p, "gpt2");
    t = load_ok(variant(dir, "addv", "\"added_tokens\":[",
                        "\"added_tokens\":[{\"id\":1300,\"content\":\"other\",\"single_word\":false,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":false},"
                        "{\"id\":5000,\"content\":\"qqzz\",\"single_word\":false,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":false},"
                        "{\"id\":7,\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":true},", 0), "added tokens");
    if (t && ref) {
        zt_status st = {0};
        int32_t *ids = NULL; size_t n = 0;
        int vo = zt_tok_token_id(ref, "other"), eot = zt_tok_token_id(ref, "<|endoftext|>");
        int rc = zt_tok_encode(t, "otherqqzz<|endoftext|>", 22, 0, &ids, &n, &st);
        tap_ok(rc == ZT_OK && vo > 0 && n == 3 && ids[0] == vo && ids[1] == 1200 && ids[2] == eot,
               "added tokens: 'other' (in the vocabulary) -> its vocabulary id %d, a new 'qqzz' -> 1200, a repeated "
               "'<|endoftext|>' -> its first id %d (got %zu ids: %d %d %d)", vo, eot, n, n > 0 ? ids[0] : -1,
               n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
        tap_ok(zt_tok_vocab_size(t) == 1201 && zt_tok_token_id(t, "qqzz") == 1200 && zt_tok_token_str(t, 1300) == NULL &&
               zt_tok_token_str(t, 5000) == NULL, "added tokens: vocabulary size 1201, the file's ids 1300/5000 unused");
        free(ids);
    }
    zt_tok_free(t); zt_tok_free(ref);
    /* a malformed tokenizer_config.json beside tokenizer.json: refused, naming it and the JSON error */
    snprintf(p, sizeof p, "%s/cfg", dir);
    mkdir(p, 0755);
    {
        char q[1500];
        snprintf(q, sizeof q, "%s/cfg/tokenizer.json", dir);
        size_t n;
        char src[1300];
        snprintf(src, sizeof src, "%s/gpt2/tokenizer.json", g_fix);
        char *s = slurp(src, &n);
        FILE *f = fopen(q, "wb");
        if (f && s) fwrite(s, 1, n, f);
        if (f) fclose(f);
        free(s);
        snprintf(q, sizeof q, "%s/cfg/tokenizer_config.json", dir);
        f = fopen(q, "w");
        if (f) { fputs("{\"eos_token\": \"<|endoftext|>\",, }\n", f); fclose(f); }
    }
    expect_load_fail(p, ZT_EDATA, "cfg/tokenizer_config.json: not valid JSON", "line 1",
                     "a malformed tokenizer_config.json");
    tu_rmdir(dir);
}

int main(void) {
    const char *src = getenv("ZT_SRCDIR");
    snprintf(g_fix, sizeof g_fix, "%s/tests/fixtures/tok", src && *src ? src : ".");
    check_fixture("gpt2", 1200, "<|endoftext|>", "<|endoftext|>");
    check_fixture("llama3", 1506, "<|begin_of_text|>", "<|end_of_text|>");
    check_fixture("llama2", 1256, "<s>", "</s>");
    check_fixture("metaspace", 1258, "<s>", "</s>");
    /* issue 30: Unicode classes as Oniguruma's, Digits/Punctuation/WhitespaceSplit/BertPreTokenizer, padding and
     * truncation (accepted, no effect), Unigram, WordPiece (scripts/make_tokenizer_fixtures_cov.py) */
    check_fixture("deepseek3", 3000, "<|endoftext|>", "<|endoftext|>");
    check_fixture("classes", 3000, "<|endoftext|>", "<|endoftext|>");
    check_fixture("digits", 3000, "<|endoftext|>", "<|endoftext|>");
    check_fixture("punct", 1256, "<s>", "</s>");
    check_fixture("unigram", 956, "<s>", "</s>");
    check_fixture("unigram_unk", 700, "<s>", "</s>");
    check_fixture("wordpiece", 800, "[CLS]", "[SEP]");
    check_invalid_utf8();
    check_bad_files();
    check_hf_fields();
    check_robustness();
    return tap_done();
}
