/* fuzz_jinja.c -- the chat-template engine (io/jinja/): the input after its first byte is a template,
 * parsed (zt_jinja_parse) and, when it parses, rendered (zt_jinja_render) with one of four fixed
 * conversations and variable sets picked by the first byte: a plain system/user/assistant chat with
 * bos/eos tokens; tool calls, reasoning, a content list and a tools list; no message at all; and values of
 * every JSON type (nested lists and dicts, numbers at the int64 edges, null, true) in both messages and
 * variables.  Trained spans are traced with an end-of-turn token ("</s>" or "<|im_end|>").  Any status is
 * fine; a rendering must be NUL-terminated at its length, and its spans must lie inside it and name
 * assistant messages in increasing order. */
#include <jansson.h>
#include "fuzz.h"
#include "jinja.h"

static const char *const fixtures[4][2] = {
    {"[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi <b>&</b> 'q' \\\"dq\\\"\"},"
     "{\"role\":\"assistant\",\"content\":\"Hello! Ünïcode ✓\"},{\"role\":\"user\",\"content\":\"\"},"
     "{\"role\":\"assistant\",\"content\":\"  bye\\n\"}]",
     "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}"},
    {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"weather?\"},{\"type\":\"text\",\"text\":\"!\"}]},"
     "{\"role\":\"assistant\",\"reasoning_content\":\"think\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\","
     "\"function\":{\"name\":\"get\",\"arguments\":{\"city\":\"Paris\",\"n\":3}}}]},"
     "{\"role\":\"tool\",\"content\":\"{\\\"t\\\": 21}\",\"name\":\"get\"},{\"role\":\"assistant\",\"content\":\"21 C\"}]",
     "{\"bos_token\":\"<|begin_of_text|>\",\"eos_token\":\"<|im_end|>\",\"date_string\":\"26 Nov 2026\","
     "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"description\":\"d\",\"parameters\":"
     "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]}"},
    {"[]", NULL},
    {"[{\"role\":\"assistant\",\"content\":\"x\",\"n\":9223372036854775807,\"m\":-9223372036854775808,"
     "\"f\":1e308,\"z\":-0.0,\"b\":true,\"l\":[[],[[1,2],{\"k\":null}],\"s\"],\"d\":{\"a\":{\"b\":{\"c\":[0]}}}},"
     "{\"role\":\"user\",\"content\":null}]",
     "{\"bos_token\":\"\",\"eos_token\":\"</s>\",\"n\":-1,\"big\":9223372036854775807,\"xs\":[3,1,2],"
     "\"d\":{\"z\":1,\"a\":[true,false,null]},\"s\":\"a,b,,c\",\"f\":0.5}"},
};
static json_t *msgs[4], *vars[4];

static size_t token_at(const void *ctx, const char *s, size_t n) {
    (void)ctx;
    static const char *const tok[] = {"</s>", "<|im_end|>"};
    for (int i = 0; i < 2; ++i) {
        size_t k = strlen(tok[i]);
        if (n >= k && memcmp(s, tok[i], k) == 0) return k;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!msgs[0]) {
        for (int i = 0; i < 4; ++i) {
            json_error_t e;
            msgs[i] = json_loads(fixtures[i][0], 0, &e);
            vars[i] = fixtures[i][1] ? json_loads(fixtures[i][1], 0, &e) : NULL;
            if (!msgs[i] || (fixtures[i][1] && !vars[i])) { fprintf(stderr, "fuzz: fixture %d: %s\n", i, e.text); abort(); }
        }
    }
    int k = data[0] & 3;
    zt_status st = {0};
    zt_jinja *j = NULL;
    if (zt_jinja_parse((const char *)data + 1, size - 1, &j, &st) != ZT_OK) return 0;
    zt_chat_text out;
    if (zt_jinja_render(j, msgs[k], vars[k], data[0] & 4 ? token_at : NULL, NULL, &out, &st) == ZT_OK) {
        if (!out.text || out.text[out.len] != 0) abort();
        int nm = (int)json_array_size(msgs[k]);
        for (int s = 0; s < out.nspan; ++s)
            if (out.span[s].begin > out.span[s].end || out.span[s].end > out.len || out.span[s].turn < 0 ||
                out.span[s].turn >= nm || (s && out.span[s].turn <= out.span[s - 1].turn))
                abort();
        zt_chat_text_free(&out);
    }
    zt_jinja_free(j);
    return 0;
}
