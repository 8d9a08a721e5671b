/* test_jinja.c -- io/jinja/ as a sandbox for untrusted chat templates:
 * renders exactly as transformers' environment (jinja2 3.1's
 * ImmutableSandboxedEnvironment) or refuses with one clear error; never a
 * read past a value, a wrapped integer, a signal, a stack overflow, a hang
 * or unbounded memory.
 *   - tests/data/sft/jinja_cases.json (scripts/make_jinja_cases.py, from
 *     jinja2): small templates with jinja2's text, or its error, or the
 *     engine's documented refusal (64-bit integers, budgets, constructs
 *     outside the subset);
 *   - built here: values and expressions nested past the limits, each
 *     budget of jinja.h (output, string, steps, memory, nesting) with its
 *     message, a 2 MB template (the lexer and parser are linear), a message
 *     with 100000 keys, an invalid UTF-8 template, and the template's file
 *     named in the errors of zt_chat_auto_render. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "jinja.h"
#include "tap.h"

static json_t *msgs;   /* [{"role": "user", "content": "hi"}], as the cases were rendered */

static int render_with(const char *src, size_t n, const json_t *m, zt_chat_text *out, zt_status *st) {
    zt_jinja *j;
    memset(st, 0, sizeof *st);
    int rc = zt_jinja_parse(src, n, &j, st);
    if (rc != ZT_OK) return rc;
    rc = zt_jinja_render(j, m, NULL, NULL, NULL, out, st);
    zt_jinja_free(j);
    return rc;
}
static int render(const char *src, zt_chat_text *out, zt_status *st) {
    return render_with(src, strlen(src), msgs, out, st);
}

/* renders to exactly want */
static void renders(const char *src, const char *want, const char *what) {
    zt_chat_text out;
    zt_status st;
    int rc = render(src, &out, &st);
    int ok = rc == ZT_OK && out.len == strlen(want) && memcmp(out.text, want, out.len) == 0;
    tap_ok(ok, "%s", what);
    if (!ok) tap_diag("got rc %d %s [%.200s], want [%.200s]", rc, rc ? st.msg : "", rc ? "" : out.text, want);
    if (rc == ZT_OK) zt_chat_text_free(&out);
}
/* fails with code and a message holding words */
static void fails(const char *src, int code, const char *words, const char *what) {
    zt_chat_text out;
    zt_status st;
    int rc = render(src, &out, &st);
    int ok = rc == code && strstr(st.msg, words) != NULL;
    tap_ok(ok, "%s: %s", what, rc ? st.msg : "renders");
    if (!ok) tap_diag("want rc %d with '%s', got rc %d", code, words, rc);
    if (rc == ZT_OK) zt_chat_text_free(&out);
}

static void test_cases(const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!tap_ok(root != NULL, "read %s", path)) { tap_diag("%s", err.text); return; }
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *t = json_string_value(json_object_get(c, "template"));
        json_t *text = json_object_get(c, "text");
        char what[160];
        snprintf(what, sizeof what, "case %zu %.100s", i, t);
        if (text) renders(t, json_string_value(text), what);
        else fails(t, (int)json_integer_value(json_object_get(c, "code")), json_string_value(json_object_get(c, "error")), what);
    }
    json_decref(root);
}

/* a string of n copies of s */
static char *rep(const char *s, size_t n) {
    size_t k = strlen(s);
    char *o = malloc(k * n + 1);
    for (size_t i = 0; i < n; ++i) memcpy(o + i * k, s, k);
    o[k * n] = 0;
    return o;
}
static char *cat3(const char *a, const char *b, const char *c) {
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *o = malloc(na + nb + nc + 1);
    memcpy(o, a, na);
    memcpy(o + na, b, nb);
    memcpy(o + na + nb, c, nc + 1);
    return o;
}
/* open^n mid close^n */
static char *nest(const char *open, size_t n, const char *mid, const char *close) {
    char *a = rep(open, n), *c = rep(close, n), *o = cat3(a, mid, c);
    free(a);
    free(c);
    return o;
}

static void test_depth(void) {
    char buf[200];
    /* values: built 100000 deep (as jinja2 allows), printed / serialized / compared within the budget */
    const char *deep = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
                       "{% set ns.y = [ns.y] %}{% endfor %}";
    snprintf(buf, sizeof buf, "a value nested deeper than %d levels", ZT_JINJA_MAX_VDEPTH);
    static const char *const uses[] = {"{{ ns.x }}", "{{ ns.x|tojson }}", "{{ ns.x == ns.y }}", "{{ ns.x in [ns.y] }}",
                                       "{{ ns.x < ns.y }}", "{{ ns.x|string }}", NULL};
    for (int i = 0; uses[i]; ++i) {
        char *t = cat3(deep, uses[i], "");
        char what[100];
        snprintf(what, sizeof what, "a value 100000 deep: %s", uses[i]);
        fails(t, ZT_EDATA, buf, what);
        free(t);
    }
    char *t = cat3(deep, "{{ ns.x == ns.x }} {{ ns.x in [ns.x] }}", "");
    renders(t, "True True", "a value 100000 deep compared with itself (Python's identity)");
    free(t);
    /* within the budget: printed as jinja2 prints it */
    char pre[200];
    snprintf(pre, sizeof pre, "{%% set ns = namespace(x=[]) %%}{%% for i in range(%d) %%}{%% set ns.x = [ns.x] %%}{%% endfor %%}",
             ZT_JINJA_MAX_VDEPTH - 1);
    t = cat3(pre, "{{ ns.x }}|{{ ns.x|tojson }}", "");
    char *w1 = nest("[", ZT_JINJA_MAX_VDEPTH, "", "]"), *want = cat3(w1, "|", w1);
    snprintf(buf, sizeof buf, "a value %d deep prints, and serializes", ZT_JINJA_MAX_VDEPTH);
    renders(t, want, buf);
    free(t);
    free(w1);
    free(want);

    /* expressions: chains and nesting refused past the parse limits, not a stack overflow */
    char *ch = rep("+1", 60000);
    t = cat3("{{ 1", ch, " }}");
    snprintf(buf, sizeof buf, "an expression deeper than %d levels", ZT_JINJA_MAX_EXPR);
    fails(t, ZT_EDATA, buf, "60000 chained +1");
    free(t);
    free(ch);
    ch = rep("+1", ZT_JINJA_MAX_EXPR - 1);
    t = cat3("{{ 1", ch, " }}");
    snprintf(buf, sizeof buf, "%d", ZT_JINJA_MAX_EXPR);
    renders(t, buf, "a chain of +1 at the expression limit renders");
    free(ch);
    free(t);
    ch = rep(" ~ 'a'", 5000);
    t = cat3("{{ ''", ch, " }}");
    char *as = rep("a", 5000);
    renders(t, as, "5000 chained ~ render (one node, as jinja2's Concat)");
    free(ch);
    free(t);
    free(as);
    static const char *const opens[] = {"(", "[", "dict(a=", "-", "not ", "[1][", "1 if x else "};
    static const char *const closes[] = {")", "]", ")", "", "", "]", ""};
    for (int k = 0; k < 7; ++k) {
        /* p_expr at the top and one per level: MAX_NEST - 1 levels fit */
        t = nest(opens[k], ZT_JINJA_MAX_NEST - 1, "1", closes[k]);
        char *tt = cat3("{{ ", t, " is defined }}");
        snprintf(buf, sizeof buf, "%d nested '%s' render", ZT_JINJA_MAX_NEST - 1, opens[k]);
        renders(tt, k == 5 || k == 4 ? "False" : "True", buf);   /* [1][[1][...]]: undefined; not^31: False */
        free(t);
        free(tt);
        t = nest(opens[k], 100000, "1", closes[k]);
        tt = cat3("{{ ", t, " }}");
        snprintf(buf, sizeof buf, "an expression nested deeper than %d levels", ZT_JINJA_MAX_NEST);
        char what[100];
        snprintf(what, sizeof what, "100000 nested '%s'", opens[k]);
        fails(tt, ZT_EDATA, buf, what);
        free(t);
        free(tt);
    }
    /* blocks */
    t = nest("{% if 1 %}", ZT_JINJA_MAX_BLOCKS, "x", "{% endif %}");
    renders(t, "x", "ifs nested at the block limit render");
    free(t);
    t = nest("{% if 1 %}", ZT_JINJA_MAX_BLOCKS + 1, "x", "{% endif %}");
    snprintf(buf, sizeof buf, "blocks (if, for, generation) nested deeper than %d levels", ZT_JINJA_MAX_BLOCKS);
    fails(t, ZT_EDATA, buf, "one if more");
    free(t);
    t = nest("{% for i in [1] %}", ZT_JINJA_MAX_LOOPS, "x", "{% endfor %}");
    renders(t, "x", "for loops nested at the loop limit render");
    free(t);
    t = nest("{% for i in [1] %}", ZT_JINJA_MAX_LOOPS + 1, "x", "{% endfor %}");
    snprintf(buf, sizeof buf, "for loops nested deeper than %d levels", ZT_JINJA_MAX_LOOPS);
    fails(t, ZT_EDATA, buf, "one for loop more");
    free(t);
    ch = rep("{% elif 0 %}", ZT_JINJA_MAX_ELIF);
    t = cat3("{% if 0 %}", ch, "{% else %}e{% endif %}");
    renders(t, "e", "an if with as many elif branches as the limit renders (the branches are not nested)");
    free(ch);
    free(t);
    ch = rep("{% elif 0 %}", ZT_JINJA_MAX_ELIF + 1);
    t = cat3("{% if 0 %}", ch, "{% endif %}");
    snprintf(buf, sizeof buf, "an if with more than %d elif branches", ZT_JINJA_MAX_ELIF);
    fails(t, ZT_EDATA, buf, "one elif more");
    free(ch);
    free(t);
}

static void test_budgets(void) {
    char buf[200];
    snprintf(buf, sizeof buf, "chat template line 2: the template's output passed the limit of %zu bytes "
             "(ztrain's template budget)", ZT_JINJA_MAX_OUTPUT);
    fails("{% set s = 'x' * 1000 %}\n{% for i in range(100000) %}{{ s }}{% endfor %}", ZT_EDATA, buf,
          "100 MB of output");
    snprintf(buf, sizeof buf, "a string passed the limit of %zu bytes (ztrain's template budget)", ZT_JINJA_MAX_OUTPUT);
    fails("{{ 'a' * 10**10 }}", ZT_EDATA, buf, "'a' * 10**10");
    fails("{% set s = 'x' * 40000000 %}{{ (s ~ s)|length }}", ZT_EDATA, buf, "an 80 MB concatenation");
    snprintf(buf, sizeof buf, "the template's evaluation passed the limit of %lld steps (ztrain's template budget)",
             ZT_JINJA_MAX_STEPS);
    fails("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ZT_EDATA, buf,
          "10^10 loop iterations");
    fails("{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{{ 'y' in s }}{% endfor %}", ZT_EDATA, buf,
          "100000 searches of 60 MB");
    snprintf(buf, sizeof buf, "the template's memory passed the limit of %zu bytes (ztrain's template budget)",
             ZT_JINJA_MAX_MEMORY);
    char *t = malloc(1000);
    strcpy(t, "{% set s = 'x' * 60000000 %}{{ [");
    for (int i = 0; i < 20; ++i) sprintf(t + strlen(t), "%ss ~ %d", i ? ", " : "", i);
    strcat(t, "]|length }}");
    fails(t, ZT_EDATA, buf, "20 strings of 60 MB");
    free(t);
    /* a rendering within the budgets after budgets ran out: each rendering has its own */
    renders("{{ range(3)|list }}", "[0, 1, 2]", "the next rendering has its budgets again");
}

/* a 2 MB template with 250000 tags and a list literal of 100000 items: lexed and parsed in linear
 * time (quadratic before: the line of each token counted from the start) */
static void test_large(void) {
    const char *line = "abc {{ 1 }} {% if true %}y{% endif %} z\n";
    size_t lines = 50000;
    char *items = rep("1,", 100000), *body = rep(line, lines);
    char *t = malloc(strlen(items) + strlen(body) + 100);
    sprintf(t, "{%% set l = [%s] %%}{{ l|length }}\n%s", items, body);
    char *want = rep("abc 1 y z\n", lines);
    char *w = cat3("100000\n", want, "");
    w[strlen(w) - 1] = 0;   /* the template's last newline is dropped */
    zt_chat_text out;
    zt_status st;
    int rc = render(t, &out, &st);
    int ok = rc == ZT_OK && out.len == strlen(w) && memcmp(out.text, w, out.len) == 0;
    tap_ok(ok, "a %zu-byte template with %zu tags renders", strlen(t), lines * 3 + 2);
    if (!ok) tap_diag("rc %d %s", rc, rc ? st.msg : "");
    if (rc == ZT_OK) zt_chat_text_free(&out);
    free(items);
    free(body);
    free(t);
    free(want);
    free(w);
    /* a message with 100000 keys (the dicts' hash index) */
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("user"));
    for (int i = 0; i < 100000; ++i) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        json_object_set_new(m, k, json_integer(i));
    }
    json_t *ms = json_array();
    json_array_append_new(ms, m);
    const char *src = "{{ messages[0]|length }} {{ messages[0].k99999 }} {{ messages[0]['k5'] }}";
    rc = render_with(src, strlen(src), ms, &out, &st);
    tap_ok(rc == ZT_OK && !strcmp(out.text, "100001 99999 5"), "a message with 100000 keys: %s", rc ? st.msg : out.text);
    if (rc == ZT_OK) zt_chat_text_free(&out);
    json_decref(ms);
}

static void test_template_errors(void) {
    /* invalid UTF-8 is the template's fault, with its line */
    zt_jinja *j = NULL;
    zt_status st;
    memset(&st, 0, sizeof st);
    int rc = zt_jinja_parse("ok\n{{ 1 }}\xff\n", 12, &j, &st);
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "chat template line 2: the template is not valid UTF-8"),
           "invalid UTF-8 in a template: %s", st.msg);
    zt_jinja_free(j);
    memset(&st, 0, sizeof st);
    rc = zt_jinja_parse("\xed\xa0\x80", 3, &j, &st);   /* an encoded surrogate */
    tap_ok(rc == ZT_EDATA && strstr(st.msg, "not valid UTF-8"), "a surrogate in a template: %s", st.msg);
    zt_jinja_free(j);
    /* the errors of a template file name it */
    char dir[] = "/tmp/test_jinja_XXXXXX", path[300];
    if (!mkdtemp(dir)) { tap_ok(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/tmpl.jinja", dir);
    FILE *f = fopen(path, "w");
    fputs("line 1\n{{ raise_exception('no ' ~ messages|length) }}", f);
    fclose(f);
    zt_chat_auto *a = NULL;
    memset(&st, 0, sizeof st);
    rc = zt_chat_auto_file(path, dir, &a, &st);
    if (tap_ok(rc == ZT_OK, "load %s", path)) {
        zt_chat_text out;
        rc = zt_chat_auto_render(a, NULL, msgs, &out, &st);
        char want[400];
        snprintf(want, sizeof want, "%s: chat template line 2: the template raised: no 1", path);
        tap_ok(rc == ZT_EDATA && !strcmp(st.msg, want), "a rendering error names the template file: %s", st.msg);
        if (rc == ZT_OK) zt_chat_text_free(&out);
    }
    zt_chat_auto_free(a);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const char *s = getenv("ZT_SRCDIR");
    char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/sft/jinja_cases.json", s && *s ? s : ".");
    json_error_t err;
    msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}]", 0, &err);
    test_cases(p);
    test_depth();
    test_budgets();
    test_large();
    test_template_errors();
    json_decref(msgs);
    return tap_done();
}
