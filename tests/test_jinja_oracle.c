/* test_jinja_oracle.c -- io/jinja/ against jinja2's own test-suite templates as transformers' chat-template
 * environment renders them (tests/data/jinja/oracle.json, written by scripts/make_jinja_oracle.py; issue 45).
 * Each entry is parsed and rendered with the fixture's messages and variables (plus the entry's own) and
 * classified:
 *   equal     -- ztrain renders exactly jinja2's text                                      ok
 *   refused   -- ztrain refuses it (a parse or render error with a message), whatever
 *                jinja2 did: a construct outside the subset                                ok, "refused: MSG"
 *   DIFFERENT -- both render, the texts differ                                             not ok
 *   RENDERED-WHERE-JINJA2-RAISES -- jinja2 raises, ztrain renders a text                   not ok
 * One TAP line per entry and a summary line with the four counts.
 *
 *   test_jinja_oracle [FIXTURE [N]]     N: only the N-th entry (1-based; to isolate a crash)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja.h"
#include "tap.h"

/* s[0, n) on one line: control bytes and backslashes escaped, at most max bytes ('#' -> "<hash>" when
 * the text goes into a TAP description, where "# SKIP" would be a directive) */
static void put_escaped(const char *s, size_t n, size_t max, int in_description) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; ++i, ++k) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\t') fputs("\\t", stdout);
        else if (ch == '\\') fputs("\\\\", stdout);
        else if (ch == '#' && in_description) fputs("<hash>", stdout);
        else if (ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
        else putchar(ch);
    }
    if (n > max) printf("... (%zu bytes)", n);
}

static void diag_text(const char *what, const char *s, size_t n) {
    printf("#   %-9s [", what);
    put_escaped(s, n, 600, 0);
    printf("]\n");
}

int main(int argc, char **argv) {
    char path[1024];
    const char *src = getenv("ZT_SRCDIR");
    if (argc > 1) snprintf(path, sizeof path, "%s", argv[1]);
    else snprintf(path, sizeof path, "%s/tests/data/jinja/oracle.json", src && *src ? src : ".");
    long only = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        tap_ok(0, "read %s: %s (line %d)", path, err.text, err.line);
        return tap_done();
    }
    json_t *msgs = json_object_get(root, "messages"), *base = json_object_get(root, "vars"),
           *entries = json_object_get(root, "entries");
    if (!tap_ok(json_is_array(msgs) && json_is_object(base) && json_array_size(entries) > 0,
                "%s: messages, vars and %zu entries (jinja2 %s, transformers %s)", path, json_array_size(entries),
                json_string_value(json_object_get(root, "jinja2")),
                json_string_value(json_object_get(root, "transformers")))) {
        json_decref(root);
        return tap_done();
    }
    int equal = 0, refused = 0, different = 0, rendered = 0;
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (only && (long)i + 1 != only) continue;
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *tmpl = json_object_get(e, "template"), *want = json_object_get(e, "expected"),
               *raises = json_object_get(e, "raises");
        json_t *vars = json_deep_copy(base);
        json_object_update(vars, json_object_get(e, "vars"));
        zt_status st;
        memset(&st, 0, sizeof st);
        zt_jinja *j = NULL;
        zt_chat_text out;
        memset(&out, 0, sizeof out);
        int rc = zt_jinja_parse(json_string_value(tmpl), json_string_length(tmpl), &j, &st);
        if (rc == ZT_OK) {
            rc = zt_jinja_render(j, msgs, vars, NULL, NULL, &out, &st);
            zt_jinja_free(j);
        }
        json_decref(vars);
        if (rc != ZT_OK) {
            refused++;
            printf("ok %d - %s refused: ", ++tap_n, name);
            put_escaped(st.msg, strlen(st.msg), 300, 1);
            printf("\n");
            continue;
        }
        if (want && out.len == json_string_length(want) && memcmp(out.text, json_string_value(want), out.len) == 0) {
            equal++;
            tap_ok(1, "%s", name);
        } else if (want) {
            different++;
            tap_ok(0, "%s DIFFERENT", name);
            diag_text("template", json_string_value(tmpl), json_string_length(tmpl));
            if (json_object_get(e, "vars")) {
                char *v = json_dumps(json_object_get(e, "vars"), JSON_COMPACT);
                diag_text("vars", v ? v : "?", v ? strlen(v) : 1);
                free(v);
            }
            diag_text("jinja2", json_string_value(want), json_string_length(want));
            diag_text("ztrain", out.text, out.len);
        } else {
            rendered++;
            tap_ok(0, "%s RENDERED-WHERE-JINJA2-RAISES", name);
            diag_text("template", json_string_value(tmpl), json_string_length(tmpl));
            if (json_object_get(e, "vars")) {
                char *v = json_dumps(json_object_get(e, "vars"), JSON_COMPACT);
                diag_text("vars", v ? v : "?", v ? strlen(v) : 1);
                free(v);
            }
            const char *r = json_string_value(raises);
            diag_text("jinja2", r ? r : "(no expected text)", r ? strlen(r) : 18);
            diag_text("ztrain", out.text, out.len);
        }
        zt_chat_text_free(&out);
    }
    tap_diag("%d equal, %d refused, %d different, %d rendered where jinja2 raises (of %d)", equal, refused,
             different, rendered, equal + refused + different + rendered);
    json_decref(root);
    return tap_done();
}
