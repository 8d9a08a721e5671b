/* test_chat_auto.c -- `--template auto`: the models' own chat templates
 * rendered by io/jinja/ against transformers' apply_chat_template
 * (tests/data/sft/auto.json, written by scripts/make_chat_auto_fixtures.py):
 * the text, the trained spans, the token ids and the masks of 30
 * conversations per template (and 12 function-calling ones per template
 * with a tools branch, issue 44); small templates covering the subset's
 * semantics, its errors and the constructs it refuses; and the built-in
 * templates' Jinja sources rendered by the engine == the built-in C
 * renderers (text and spans); where a tool-call message without content
 * starts its span (after the generation prompt). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>
#include "jinja.h"
#include "json_py.h"
#include "sft.h"
#include "tap.h"
#include "tokenizer.h"

static char srcdir[512];

typedef struct { char *p; size_t n; } sbuf_t;
static void sb_cat(sbuf_t *b, const char *s) {
    size_t k = strlen(s);
    char *np = b->p || !b->n ? realloc(b->p, b->n + k + 1) : NULL;
    if (!np) { free(b->p); b->p = NULL; b->n = 1; return; }
    memcpy(np + b->n, s, k + 1);
    b->p = np;
    b->n += k;
}

static const char *path_of(char *buf, size_t n, const char *rel) {
    snprintf(buf, n, "%s/%s", srcdir, rel);
    return buf;
}

static int render_src(const char *src, const json_t *msgs, const json_t *vars, zt_chat_text *out, zt_status *st) {
    zt_jinja *j;
    int rc = zt_jinja_parse(src, strlen(src), &j, st);
    if (rc != ZT_OK) return rc;
    rc = zt_jinja_render(j, msgs, vars, NULL, NULL, out, st);
    zt_jinja_free(j);
    return rc;
}

static void test_snippets(json_t *root) {
    json_t *msgs = json_object_get(root, "snippet_messages"), *c;
    size_t i;
    json_array_foreach(json_object_get(root, "snippets"), i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        json_t *text = json_object_get(c, "text"), *unsup = json_object_get(c, "unsupported");
        zt_status st;
        memset(&st, 0, sizeof st);
        zt_chat_text out;
        int rc = render_src(src, msgs, NULL, &out, &st);
        if (unsup) {
            tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, json_string_value(unsup)),
                   "snippet %zu refused naming '%s' (%s)", i, json_string_value(unsup), st.msg);
        } else if (text) {
            int ok = rc == ZT_OK && out.len == json_string_length(text) &&
                     memcmp(out.text, json_string_value(text), out.len) == 0;
            tap_ok(ok, "snippet %zu renders as transformers", i);
            if (!ok) tap_diag("template %s\n got rc %d %s: [%s]\n want [%s]", src, rc, st.msg,
                              rc == ZT_OK ? out.text : "", json_string_value(text));
        } else {
            tap_ok(rc == ZT_EDATA, "snippet %zu fails as in transformers (%s): %s", i,
                   json_string_value(json_object_get(c, "error")), st.msg);
        }
        if (rc == ZT_OK) zt_chat_text_free(&out);
    }
}

static int same_ints(const json_t *a, const int32_t *b, size_t n) {
    if (json_array_size(a) != n) return 0;
    for (size_t i = 0; i < n; ++i)
        if (json_integer_value(json_array_get(a, i)) != b[i]) return 0;
    return 1;
}
static int same_bytes(const json_t *a, const uint8_t *b, size_t n) {
    if (json_array_size(a) != n) return 0;
    for (size_t i = 0; i < n; ++i)
        if (json_integer_value(json_array_get(a, i)) != b[i]) return 0;
    return 1;
}

static void test_templates(json_t *root, const zt_tokenizer *tok, const char *tokdir) {
    const char *name;
    json_t *tv;
    /* strftime_now (gpt-oss, Mistral Small 3.2) at the time the references were rendered at */
    char epoch[32];
    snprintf(epoch, sizeof epoch, "%lld", (long long)json_integer_value(json_object_get(root, "source_date_epoch")));
    setenv("SOURCE_DATE_EPOCH", epoch, 1);
    json_object_foreach(json_object_get(root, "templates"), name, tv) {
        char p[1024], rel[256];
        snprintf(rel, sizeof rel, "tests/data/sft/templates/%s", json_string_value(json_object_get(tv, "file")));
        zt_chat_auto *a = NULL;
        zt_status st;
        memset(&st, 0, sizeof st);
        int rc = zt_chat_auto_file(path_of(p, sizeof p, rel), tokdir, &a, &st);
        if (!tap_ok(rc == ZT_OK, "%s: template parses (%s)", name, st.msg)) continue;
        json_t *b = json_object_get(tv, "bos"), *e = json_object_get(tv, "eos");
        if (json_is_string(b)) zt_chat_auto_set_var(a, "bos_token", json_string_value(b), &st);
        if (json_is_string(e)) zt_chat_auto_set_var(a, "eos_token", json_string_value(e), &st);
        const char *vn;
        json_t *vv;
        json_object_foreach(json_object_get(tv, "vars"), vn, vv) zt_chat_auto_set_var(a, vn, json_string_value(vv), &st);
        int n = 0, bad_text = 0, bad_span = 0, bad_ids = 0, bad_mask = 0, bad_err = 0, nerr = 0, nspans = 0, ntools = 0;
        json_t *want_n = json_object_get(tv, "conversations"), *want_t = json_object_get(tv, "with_tools");
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(root, "cases"), i, c) {
            if (strcmp(json_string_value(json_object_get(c, "template")), name) != 0) continue;
            n++;
            json_t *msgs = json_object_get(c, "messages"), *tools = json_object_get(c, "tools");
            ntools += tools != NULL;
            zt_chat_text out;
            memset(&st, 0, sizeof st);
            rc = zt_chat_auto_render_tools(a, tok, msgs, tools, NULL, &out, &st);
            if (json_object_get(c, "error")) {
                nerr++;
                const char *want = json_string_value(json_object_get(c, "error"));
                if (rc != ZT_EDATA || !strstr(st.msg, want)) {
                    bad_err++;
                    tap_diag("%s case %zu: want the error '%s', got rc %d: %s", name, i, want, rc, st.msg);
                }
                if (rc == ZT_OK) zt_chat_text_free(&out);
                continue;
            }
            if (rc != ZT_OK) {
                bad_text++;
                tap_diag("%s case %zu: %s", name, i, st.msg);
                continue;
            }
            json_t *text = json_object_get(c, "text");
            if (out.len != json_string_length(text) || memcmp(out.text, json_string_value(text), out.len) != 0) {
                if (!bad_text) tap_diag("%s case %zu:\n got  [%s]\n want [%s]", name, i, out.text, json_string_value(text));
                bad_text++;
            }
            json_t *spans = json_object_get(c, "spans");
            int sok = (size_t)out.nspan == json_array_size(spans);
            for (int s = 0; sok && s < out.nspan; ++s) {
                json_t *w = json_array_get(spans, (size_t)s);
                sok = (size_t)json_integer_value(json_array_get(w, 0)) == out.span[s].begin &&
                      (size_t)json_integer_value(json_array_get(w, 1)) == out.span[s].end &&
                      json_integer_value(json_array_get(w, 2)) == out.span[s].turn;
            }
            if (!sok) {
                if (!bad_span) {
                    tap_diag("%s case %zu: %d spans, want %zu", name, i, out.nspan, json_array_size(spans));
                    for (int s = 0; s < out.nspan; ++s)
                        tap_diag("  got [%zu, %zu) message %d", out.span[s].begin, out.span[s].end, out.span[s].turn);
                }
                bad_span++;
            }
            nspans += out.nspan;
            zt_chat_text_free(&out);
            int32_t *ids;
            uint8_t *mask;
            size_t len;
            int ns;
            rc = zt_sft_encode_auto_tools(tok, a, msgs, tools, NULL, ZT_SFT_MASK_ASSISTANT, &ids, &mask, &len, &ns, &st);
            if (rc != ZT_OK) { bad_ids++; tap_diag("%s case %zu: %s", name, i, st.msg); continue; }
            bad_ids += !same_ints(json_object_get(c, "ids"), ids, len);
            if (!same_bytes(json_object_get(c, "mask"), mask, len)) {
                if (!bad_mask) tap_diag("%s case %zu: mask differs", name, i);
                bad_mask++;
            }
            free(ids);
            free(mask);
        }
        tap_ok(n == (want_n ? (int)json_integer_value(want_n) : 30) && ntools == (int)json_integer_value(want_t),
               "%s: %d conversations, %d with tools", name, n, ntools);
        tap_ok(bad_text == 0, "%s: %d renderings == transformers' apply_chat_template (%d differ)", name, n - nerr, bad_text);
        tap_ok(bad_span == 0, "%s: trained spans (%d) == the traced ones (%d differ)", name, nspans, bad_span);
        tap_ok(bad_ids == 0, "%s: token ids == tokenizer(text) (%d differ)", name, bad_ids);
        tap_ok(bad_mask == 0, "%s: masks == the spans' tokens as transformers maps them (%d differ)", name, bad_mask);
        tap_ok(bad_err == 0, "%s: the %d conversations the template refuses are refused with its message", name, nerr);
        zt_chat_auto_free(a);
    }
    unsetenv("SOURCE_DATE_EPOCH");
}

/* the built-in templates' Jinja sources through the engine == the built-in renderers */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void test_builtins(const zt_tokenizer *tok, const char *tokdir) {
    static const char *const texts[] = {"hi", "", "  spaced  ", "multi\nline\n", "naïve 東京 🙂", "\u3000wide\u3000",
                                        "a <|im_end|> inside", "x"};
    static const char *const roles[] = {"system", "user", "assistant"};
    const char *bos[ZT_TMPL_COUNT] = {"<|begin_of_text|>", NULL, NULL, "<s>"};
    const char *eos[ZT_TMPL_COUNT] = {"<|eot_id|>", "<|im_end|>", "<|im_end|>", "</s>"};
    for (int t = 0; t < ZT_TMPL_COUNT; ++t) {
        char p[1024], rel[256];
        snprintf(rel, sizeof rel, "tests/data/sft/templates/builtin-%s.jinja", zt_chat_template_name(t));
        zt_chat_auto *a = NULL;
        zt_status st;
        memset(&st, 0, sizeof st);
        if (!tap_ok(zt_chat_auto_file(path_of(p, sizeof p, rel), tokdir, &a, &st) == ZT_OK, "%s: %s", rel, st.msg))
            continue;
        if (bos[t]) zt_chat_auto_set_var(a, "bos_token", bos[t], &st);
        if (eos[t]) zt_chat_auto_set_var(a, "eos_token", eos[t], &st);
        int same = 0, total = 0, errs_same = 0;
        for (int k = 0; k < 200; ++k) {
            int n = 1 + (int)rnd(6);
            zt_chat_msg m[8];
            json_t *msgs = json_array();
            for (int i = 0; i < n; ++i) {
                int role = t == ZT_TMPL_MISTRAL && rnd(8) ? (i == 0 && rnd(2) ? 0 : (i % 2 == 0) ? 1 : 2)
                                                           : (int)rnd(3);
                if (t == ZT_TMPL_MISTRAL && role == 0 && i > 0) role = 1;
                const char *x = texts[rnd(8)];
                m[i].role = role;
                m[i].content = x;
                m[i].len = strlen(x);
                json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", roles[role], "content", x));
            }
            zt_chat_text b, e;
            zt_status s1, s2;
            memset(&s1, 0, sizeof s1);
            memset(&s2, 0, sizeof s2);
            int rb = zt_chat_render(t, m, n, bos[t], eos[t], &b, &s1);
            int re = zt_chat_auto_render(a, tok, msgs, &e, &s2);
            total++;
            if (rb != ZT_OK || re != ZT_OK) {
                errs_same += (rb != ZT_OK) == (re != ZT_OK);
                same += (rb != ZT_OK) == (re != ZT_OK);
            } else {
                int ok = b.len == e.len && memcmp(b.text, e.text, b.len) == 0 && b.nspan == e.nspan;
                for (int s = 0; ok && s < b.nspan; ++s)
                    ok = b.span[s].begin == e.span[s].begin && b.span[s].end == e.span[s].end &&
                         b.span[s].turn == e.span[s].turn;
                if (!ok && same == total - 1) tap_diag("%s: built-in [%s] vs engine [%s]", zt_chat_template_name(t), b.text, e.text);
                same += ok;
            }
            if (rb == ZT_OK) zt_chat_text_free(&b);
            if (re == ZT_OK) zt_chat_text_free(&e);
            json_decref(msgs);
        }
        tap_ok(same == total, "%s: the template's Jinja source through the engine == the built-in renderer, text and "
               "trained spans (%d of %d random chats, %d refused by both)", zt_chat_template_name(t), same, total, errs_same);
        zt_chat_auto_free(a);
    }
}

static void test_misc(void) {
    zt_status st;
    zt_chat_text out;
    json_t *none = json_array();
    /* strftime_now is the local date, as Python's datetime.now().strftime */
    char d0[64], d1[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(d0, sizeof d0, "%d %b %Y", &tm);
    int rc = render_src("{{ strftime_now('%d %b %Y') }}", none, NULL, &out, &st);
    now = time(NULL);
    localtime_r(&now, &tm);
    strftime(d1, sizeof d1, "%d %b %Y", &tm);
    tap_ok(rc == ZT_OK && (!strcmp(out.text, d0) || !strcmp(out.text, d1)), "strftime_now('%%d %%b %%Y') = %s",
           rc == ZT_OK ? out.text : st.msg);
    if (rc == ZT_OK) zt_chat_text_free(&out);
    /* SOURCE_DATE_EPOCH: that time in UTC, whatever the local time zone */
    char *tz = getenv("TZ") ? strdup(getenv("TZ")) : NULL;
    setenv("TZ", "XYZ-9", 1);   /* UTC+9, a POSIX zone needing no tz database */
    tzset();
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    rc = render_src("{{ strftime_now('%Y-%m-%d %H:%M:%S') }}", none, NULL, &out, &st);
    tap_ok(rc == ZT_OK && !strcmp(out.text, "2023-11-14 22:13:20"),
           "with SOURCE_DATE_EPOCH=1700000000 strftime_now formats 2023-11-14 22:13:20 (UTC): %s", rc == ZT_OK ? out.text : st.msg);
    if (rc == ZT_OK) zt_chat_text_free(&out);
    setenv("SOURCE_DATE_EPOCH", "17e8", 1);
    rc = render_src("{{ strftime_now('%Y') }}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EINVAL && strstr(st.msg, "SOURCE_DATE_EPOCH '17e8'"), "a SOURCE_DATE_EPOCH that is not a number "
           "of seconds is refused by name: %s", rc == ZT_OK ? out.text : st.msg);
    if (rc == ZT_OK) zt_chat_text_free(&out);
    unsetenv("SOURCE_DATE_EPOCH");
    if (tz) setenv("TZ", tz, 1);
    else unsetenv("TZ");
    free(tz);
    tzset();
    /* errors name the line */
    rc = render_src("line1\n{% if x %}\n{% for %}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "line 3"), "a syntax error names its line: %s", st.msg);
    rc = render_src("{% if true %}unterminated", none, NULL, &out, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "endif"), "a missing endif is an error: %s", st.msg);
    rc = render_src("{% include 'x' %}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, "include"), "include is refused by name: %s", st.msg);
    rc = render_src("{{ 'a'.zfill(3) }}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, "zfill"), "an unknown method is refused by name: %s", st.msg);
    rc = render_src("{{ x | dictsort }}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, "dictsort"), "an unknown filter is refused by name: %s", st.msg);
    rc = render_src("{{ x is upper }}", none, NULL, &out, &st);
    tap_ok(rc == ZT_EUNSUPPORTED && strstr(st.msg, "upper"), "an unknown test is refused by name: %s", st.msg);
    /* nesting is bounded: refused, not a stack overflow */
    size_t deep = 100000;
    char *src = malloc(2 * deep + 16);
    memcpy(src, "{{ ", 3);
    memset(src + 3, '(', deep);
    src[3 + deep] = '1';
    memset(src + 4 + deep, ')', deep);
    memcpy(src + 4 + 2 * deep, " }}", 4);
    rc = render_src(src, none, NULL, &out, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "nested deeper than"), "100000 nested parentheses: %s", st.msg);
    for (size_t i = 0; i < deep / 10; ++i) memcpy(src + 10 * i, "{% if 1 %}", 10);
    src[deep] = 0;
    rc = render_src(src, none, NULL, &out, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "nested deeper than"), "10000 nested if blocks: %s", st.msg);
    memcpy(src, "{% if 0 %}", 10);
    for (size_t i = 1; i < deep / 12; ++i) memcpy(src + 12 * i - 2, "{% elif 0 %}", 12);
    strcpy(src + 12 * (deep / 12) - 2, "{% endif %}");
    rc = render_src(src, none, NULL, &out, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "elif branches"), "8332 elif branches: %s", st.msg);
    free(src);
    rc = render_src("{{ ((((1)))) }}{% if 1 %}{% if 1 %}{% if 1 %}x{% endif %}{% endif %}{% endif %}", none, NULL, &out, &st);
    tap_ok(rc == ZT_OK && !strcmp(out.text, "1x"), "a little nesting renders");
    {   /* issue 44: macro calls nested to their limit, each at the block and expression limits */
        sbuf_t b = {0};
        sb_cat(&b, "{% macro f(n) %}");
        for (int i = 0; i < 63; ++i) sb_cat(&b, "{% if true %}");
        sb_cat(&b, "{{ (f(n + 1)");
        for (int i = 0; i < 120; ++i) sb_cat(&b, "|trim");
        sb_cat(&b, ") }}");
        for (int i = 0; i < 63; ++i) sb_cat(&b, "{% endif %}");
        sb_cat(&b, "{% endmacro %}{{ f(0) }}");
        zt_chat_text o2;
        int r2 = b.p ? render_src(b.p, none, NULL, &o2, &st) : ZT_ENOMEM;
        tap_ok(r2 == ZT_EDATA && strstr(st.msg, "macro calls nested deeper than 16 levels"),
               "a macro recursing at the block and expression limits stops at the call limit: %s", st.msg);
        if (r2 == ZT_OK) zt_chat_text_free(&o2);
        free(b.p);
    }
    if (rc == ZT_OK) zt_chat_text_free(&out);
    json_decref(none);
}


/* issue 44: JSON as Python writes it (json_py.h): integers beyond 64 bits, NaN, Infinity */
static void test_pyjson(const char *tokdir) {
    static const char txt[] = "[1000000000000000019884624838656, -9223372036854775808, 9223372036854775807, "
                              "9223372036854775808, NaN, Infinity, -Infinity, \"NaN 1e999 \\\" 99999999999999999999\", "
                              "1e400, 1.5e3, -1e30, {\"k\": -Infinity}, ";
    char big[401], doc[1000];
    memset(big, '7', 400);
    big[400] = 0;
    snprintf(doc, sizeof doc, "%s%s]", txt, big);
    json_error_t je;
    json_t *j = zt_json_loadb_py(doc, strlen(doc), 0, &je);
    tap_ok(j && json_array_size(j) == 13, "Python's JSON numbers are read (%s)", j ? "ok" : je.text);
    if (j) {
        tap_ok(json_is_real(json_array_get(j, 0)) && json_real_value(json_array_get(j, 0)) == 1e30,
               "int(1e30) reads as the real 1e30");
        tap_ok(json_integer_value(json_array_get(j, 1)) == INT64_MIN && json_integer_value(json_array_get(j, 2)) == INT64_MAX,
               "the 64-bit extremes stay integers");
        tap_ok(json_is_real(json_array_get(j, 3)) && json_real_value(json_array_get(j, 3)) == 9223372036854775808.0,
               "2**63 reads as a real");
        tap_ok(!strcmp(json_string_value(json_array_get(j, 4)), "NaN") &&
               !strcmp(json_string_value(json_array_get(j, 5)), "Infinity") &&
               !strcmp(json_string_value(json_array_get(j, 6)), "-Infinity"),
               "NaN, Infinity, -Infinity read as the strings of their names");
        tap_ok(!strcmp(json_string_value(json_array_get(j, 7)), "NaN 1e999 \" 99999999999999999999"),
               "strings are left as they are");
        tap_ok(!strcmp(json_string_value(json_array_get(j, 8)), "Infinity") &&
               json_real_value(json_array_get(j, 9)) == 1500.0 && json_real_value(json_array_get(j, 10)) == -1e30 &&
               !strcmp(json_string_value(json_object_get(json_array_get(j, 11), "k")), "-Infinity") &&
               !strcmp(json_string_value(json_array_get(j, 12)), big),
               "1e400 reads as \"Infinity\", a 400-digit integer as its digits; other reals as they are");
        json_decref(j);
    }
    static const char bad[] = "{\"a\": 1,\n \"b\": NaNx}";
    j = zt_json_loadb_py(bad, strlen(bad), 0, &je);
    tap_ok(!j && je.line == 2, "an invalid token is still refused, on its line (%d: %s)", je.line, je.text);
    if (j) json_decref(j);
    /* a tokenizer directory whose tokenizer_config.json Python wrote with such numbers */
    char dir[] = "/tmp/zt_pyjson_XXXXXX", p[1200], q[1200];
    if (!mkdtemp(dir)) { tap_ok(0, "mkdtemp"); return; }
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    snprintf(q, sizeof q, "%s/tokenizer.json", tokdir);
    char *abs = realpath(q, NULL);   /* the link's target, absolute (the source dir may be relative) */
    tap_ok(abs && symlink(abs, p) == 0, "link %s", q);
    free(abs);
    snprintf(q, sizeof q, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(q, "w");
    if (f) {
        fputs("{\"model_max_length\": 1000000000000000019884624838656, \"clean_up\": NaN, \"t\": Infinity,\n"
              " \"eos_token\": \"<|im_end|>\", \"chat_template\": \"{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}\"}\n", f);
        fclose(f);
    }
    zt_tokenizer *tok = NULL;
    zt_status st;
    int rc = zt_tok_load(dir, &tok, &st);
    tap_ok(rc == ZT_OK, "a tokenizer_config.json with model_max_length int(1e30), NaN, Infinity loads (%s)", st.msg);
    zt_chat_auto *a = NULL;
    rc = zt_chat_auto_load(dir, &a, &st);
    tap_ok(rc == ZT_OK && a, "its chat template loads (%s)", st.msg);
    if (a) {
        json_t *m = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}]", 0, NULL);
        zt_chat_text out;
        rc = zt_chat_auto_render(a, tok, m, &out, &st);
        tap_ok(rc == ZT_OK && !strcmp(out.text, "hi<|im_end|>"), "and renders (%s)", rc == ZT_OK ? out.text : st.msg);
        if (rc == ZT_OK) zt_chat_text_free(&out);
        json_decref(m);
        zt_chat_auto_free(a);
    }
    if (tok) zt_tok_free(tok);
    unlink(q);
    unlink(p);
    rmdir(dir);
}

/* issue 44: contents as lists of typed parts render and train as string contents */
static void test_list_contents(void) {
    static const char tpl[] = "{% for m in messages %}<{{ m.role }}>{% if m.content is string %}{{ m.content }}"
                              "{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}|{% endfor %}";
    json_t *s = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"ab\"},"
                           " {\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"cd\"}]", 0, NULL);
    json_t *l = json_loads("[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]},"
                           " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]},"
                           " {\"role\": \"user\", \"content\": \"q\"},"
                           " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"cd\"}]}]", 0, NULL);
    zt_chat_text a, b;
    zt_status st;
    int ra = render_src(tpl, s, NULL, &a, &st), rb = render_src(tpl, l, NULL, &b, &st);
    int same = ra == ZT_OK && rb == ZT_OK && !strcmp(a.text, b.text) && a.nspan == 2 && b.nspan == 2;
    for (int i = 0; same && i < 2; ++i)
        same = a.span[i].begin == b.span[i].begin && a.span[i].end == b.span[i].end && a.span[i].turn == b.span[i].turn;
    tap_ok(same, "list contents render and trace as string contents (%s, %d spans)", rb == ZT_OK ? b.text : st.msg,
           rb == ZT_OK ? b.nspan : -1);
    if (ra == ZT_OK) zt_chat_text_free(&a);
    if (rb == ZT_OK) zt_chat_text_free(&b);
    json_t *img = json_loads("[{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"url\": \"x.png\"}, "
                             "{\"type\": \"text\", \"text\": \"what?\"}]}]", 0, NULL);
    int rc = render_src(tpl, img, NULL, &a, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "'image'") && strstr(st.msg, "message 0"),
           "an image part is refused by name: %s", st.msg);
    if (rc == ZT_OK) zt_chat_text_free(&a);
    json_decref(s);
    json_decref(l);
    json_decref(img);
}

/* an assistant message with tool calls and no content trains from the end of the generation prompt
 * (the rendering of the messages before it with add_generation_prompt, when a byte prefix), else from
 * its first traced byte; a message with content from its content */
static void test_tool_call_start(void) {
    static const char tpl[] = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% for t in m.tool_calls %}"
                              "[CALL {{ t.function.name }}]{% endfor %}|{% endfor %}"
                              "{% if add_generation_prompt %}<assistant>{% endif %}";
    static const char other[] = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% for t in m.tool_calls %}"
                                "[CALL {{ t.function.name }}]{% endfor %}|{% endfor %}"
                                "{% if add_generation_prompt %}<bot>{% endif %}";
    static const char *const msgs[] = {
        "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"tool_calls\": "
        "[{\"function\": {\"name\": \"f\"}}]}]",
        "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
        "[{\"function\": {\"name\": \"f\"}}]}]",
        "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"ok\", \"tool_calls\": "
        "[{\"function\": {\"name\": \"f\"}}]}]"};
    /* "<user>hi|<assistant>" is 20 bytes, "[CALL " 6 more, "f" ends at 27 */
    static const struct { const char *tpl; int m; size_t b, e; const char *what; } k[] = {
        {tpl, 0, 20, 27, "no content: from the generation prompt's end (the call's markup trained)"},
        {tpl, 1, 20, 27, "content \"\": from the generation prompt's end"},
        {tpl, 2, 20, 29, "content \"ok\": from the content"},
        {other, 0, 26, 27, "a generation prompt that is not a prefix: from the first traced byte"}};
    for (size_t i = 0; i < sizeof k / sizeof *k; ++i) {
        json_t *m = json_loads(msgs[k[i].m], 0, NULL);
        zt_chat_text out;
        zt_status st;
        memset(&st, 0, sizeof st);
        int rc = render_src(k[i].tpl, m, NULL, &out, &st);
        tap_ok(rc == ZT_OK && out.nspan == 1 && out.span[0].turn == 1 && out.span[0].begin == k[i].b &&
                   out.span[0].end == k[i].e, "%s: [%zu, %zu) of %s", k[i].what, rc == ZT_OK && out.nspan ? out.span[0].begin : 0,
               rc == ZT_OK && out.nspan ? out.span[0].end : 0, rc == ZT_OK ? out.text : st.msg);
        if (rc == ZT_OK) zt_chat_text_free(&out);
        json_decref(m);
    }
}

int main(void) {
    const char *s = getenv("ZT_SRCDIR");
    snprintf(srcdir, sizeof srcdir, "%s", s && *s ? s : ".");
    char p[1024], tokdir[1024];
    json_error_t err;
    json_t *root = json_load_file(path_of(p, sizeof p, "tests/data/sft/auto.json"), 0, &err);
    if (!tap_ok(root != NULL, "read %s", p)) { tap_diag("%s", err.text); return tap_done(); }
    test_snippets(root);
    path_of(tokdir, sizeof tokdir, "tests/data/sft/auto");
    zt_tokenizer *tok = NULL;
    zt_status st;
    if (tap_ok(zt_tok_load(tokdir, &tok, &st) == ZT_OK, "load the tokenizer fixture %s", tokdir)) {
        test_templates(root, tok, tokdir);
        test_builtins(tok, tokdir);
        test_pyjson(tokdir);
        zt_tok_free(tok);
    }
    test_misc();
    test_list_contents();
    test_tool_call_start();
    json_decref(root);
    return tap_done();
}
