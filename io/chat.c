/* chat.c -- the built-in chat templates: each renders a conversation
 * exactly as its family's Jinja chat template does (add_generation_prompt
 * False), and records which bytes an assistant turn trains on.  The Jinja
 * sources are quoted in docs/sft.md and scripts/make_sft_fixtures.py;
 * tests/test_sft checks these renderings against transformers' output. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "sft.h"

static const char *const template_names[ZT_TMPL_COUNT] = {"llama3", "chatml", "qwen2", "mistral"};

int zt_chat_template(const char *name) {
    for (int i = 0; i < ZT_TMPL_COUNT; ++i)
        if (name && strcmp(name, template_names[i]) == 0) return i;
    return -1;
}

const char *zt_chat_template_name(int tmpl) {
    return tmpl >= 0 && tmpl < ZT_TMPL_COUNT ? template_names[tmpl] : "?";
}

const char *zt_chat_template_list(void) { return "llama3, chatml, qwen2, mistral"; }

const char *const *zt_chat_template_tokens(int tmpl) {
    static const char *const llama3[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", NULL};
    static const char *const chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
    static const char *const none[] = {NULL};
    switch (tmpl) {
    case ZT_TMPL_LLAMA3: return llama3;
    case ZT_TMPL_CHATML: case ZT_TMPL_QWEN2: return chatml;
    default: return none;
    }
}

int zt_chat_template_needs_bos(int tmpl) { return tmpl == ZT_TMPL_LLAMA3 || tmpl == ZT_TMPL_MISTRAL; }
int zt_chat_template_needs_eos(int tmpl) { return tmpl == ZT_TMPL_MISTRAL; }

int zt_chat_role(const char *name) {
    static const char *const roles[] = {"system", "user", "assistant"};
    for (int i = 0; i < 3; ++i)
        if (strcmp(name, roles[i]) == 0) return i;
    return -1;
}

static const char *role_name(int role) {
    return role == ZT_ROLE_SYSTEM ? "system" : role == ZT_ROLE_USER ? "user" : "assistant";
}

void zt_chat_text_free(zt_chat_text *t) {
    free(t->text);
    free(t->span);
    memset(t, 0, sizeof *t);
}

static int put(zt_chat_text *t, const char *s, size_t n, zt_status *st) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1) cap *= 2;
        char *p = realloc(t->text, cap);
        if (!p) return zt_fail(st, ZT_ENOMEM, "out of memory rendering a chat");
        t->text = p;
        t->cap = cap;
    }
    memcpy(t->text + t->len, s, n);
    t->len += n;
    t->text[t->len] = 0;
    return ZT_OK;
}

static int puts_(zt_chat_text *t, const char *s, zt_status *st) { return put(t, s, strlen(s), st); }

/* Open (end < 0) or close the span of assistant message `turn`. */
static int span_begin(zt_chat_text *t, int turn, zt_status *st) {
    if (t->nspan == t->capspan) {
        int cap = t->capspan ? 2 * t->capspan : 8;
        zt_chat_span *p = realloc(t->span, (size_t)cap * sizeof *p);
        if (!p) return zt_fail(st, ZT_ENOMEM, "out of memory rendering a chat");
        t->span = p;
        t->capspan = cap;
    }
    t->span[t->nspan].begin = t->len;
    t->span[t->nspan].end = t->len;
    t->span[t->nspan].turn = turn;
    t->nspan++;
    return ZT_OK;
}

static void span_end(zt_chat_text *t) { t->span[t->nspan - 1].end = t->len; }

/* Python's str.isspace() code points (Jinja's trim filter is str.strip()). */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* Decode the UTF-8 code point at s[i] (n bytes left); *len its bytes.
 * Invalid bytes decode as themselves (never whitespace). */
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t *len) {
    uint32_t c = s[0];
    int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (k <= 0 || (size_t)k >= n) { *len = 1; return k == 0 ? c : 0xfffd; }
    uint32_t v = c & (0x3f >> k);
    for (int i = 1; i <= k; ++i) {
        if ((s[i] & 0xc0) != 0x80) { *len = 1; return 0xfffd; }
        v = (v << 6) | (s[i] & 0x3f);
    }
    *len = (size_t)k + 1;
    return v;
}

/* content with leading and trailing Python whitespace removed */
static void trim(const char *s, size_t n, const char **out, size_t *outn) {
    const unsigned char *u = (const unsigned char *)s;
    size_t b = 0, e = 0, len;
    /* first non-space code point, and the end of the last one */
    int seen = 0;
    for (size_t i = 0; i < n; i += len) {
        uint32_t c = utf8_at(u + i, n - i, &len);
        if (!py_space(c)) {
            if (!seen) b = i;
            seen = 1;
            e = i + len;
        }
    }
    *out = s + b;
    *outn = seen ? e - b : 0;
}

/* Llama-3-Instruct (Meta-Llama-3-8B-Instruct tokenizer_config.json). */
static int render_llama3(const zt_chat_msg *m, int n, const char *bos, zt_chat_text *t, zt_status *st) {
    for (int i = 0; i < n; ++i) {
        if (i == 0) ZT_TRY(puts_(t, bos, st));
        ZT_TRY(puts_(t, "<|start_header_id|>", st));
        ZT_TRY(puts_(t, role_name(m[i].role), st));
        ZT_TRY(puts_(t, "<|end_header_id|>\n\n", st));
        if (m[i].role == ZT_ROLE_ASSISTANT) ZT_TRY(span_begin(t, i, st));
        const char *c;
        size_t cn;
        trim(m[i].content, m[i].len, &c, &cn);
        ZT_TRY(put(t, c, cn, st));
        ZT_TRY(puts_(t, "<|eot_id|>", st));
        if (m[i].role == ZT_ROLE_ASSISTANT) span_end(t);
    }
    return ZT_OK;
}

/* ChatML; qwen2 (Qwen2-Instruct) adds a default system turn when the first
 * message is not a system message. */
static int render_chatml(const zt_chat_msg *m, int n, int qwen2, zt_chat_text *t, zt_status *st) {
    for (int i = 0; i < n; ++i) {
        if (qwen2 && i == 0 && m[0].role != ZT_ROLE_SYSTEM)
            ZT_TRY(puts_(t, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", st));
        ZT_TRY(puts_(t, "<|im_start|>", st));
        ZT_TRY(puts_(t, role_name(m[i].role), st));
        ZT_TRY(puts_(t, "\n", st));
        if (m[i].role == ZT_ROLE_ASSISTANT) ZT_TRY(span_begin(t, i, st));
        ZT_TRY(put(t, m[i].content, m[i].len, st));
        ZT_TRY(puts_(t, "<|im_end|>", st));
        if (m[i].role == ZT_ROLE_ASSISTANT) span_end(t);
        ZT_TRY(puts_(t, "\n", st));
    }
    return ZT_OK;
}

/* Mistral-7B-Instruct v0.1 / v0.2 (the template with an optional system
 * message folded into the first user turn). */
static int render_mistral(const zt_chat_msg *m, int n, const char *bos, const char *eos, zt_chat_text *t,
                          zt_status *st) {
    const zt_chat_msg *sys = NULL;
    if (n > 0 && m[0].role == ZT_ROLE_SYSTEM) {
        sys = &m[0];
        m++;
        n--;
    }
    ZT_TRY(puts_(t, bos, st));
    for (int i = 0; i < n; ++i) {
        if ((m[i].role == ZT_ROLE_USER) != (i % 2 == 0))
            return zt_fail(st, ZT_EDATA, "template mistral: after the optional system message, conversation "
                           "roles must alternate user/assistant/user/assistant/... (message %d is %s)",
                           i + (sys != NULL), role_name(m[i].role));
        if (m[i].role == ZT_ROLE_USER) {
            ZT_TRY(puts_(t, " [INST] ", st));
            if (i == 0 && sys) {
                ZT_TRY(put(t, sys->content, sys->len, st));
                ZT_TRY(puts_(t, "\n\n", st));
            }
            ZT_TRY(put(t, m[i].content, m[i].len, st));
            ZT_TRY(puts_(t, " [/INST]", st));
        } else if (m[i].role == ZT_ROLE_ASSISTANT) {
            ZT_TRY(puts_(t, " ", st));
            ZT_TRY(span_begin(t, i + (sys != NULL), st));
            ZT_TRY(put(t, m[i].content, m[i].len, st));
            ZT_TRY(puts_(t, eos, st));
            span_end(t);
        } else {
            return zt_fail(st, ZT_EDATA, "template mistral: only user and assistant roles are supported, "
                           "with the exception of an initial optional system message (message %d is %s)",
                           i + (sys != NULL), role_name(m[i].role));
        }
    }
    return ZT_OK;
}

int zt_chat_render(int tmpl, const zt_chat_msg *m, int n, const char *bos, const char *eos,
                   zt_chat_text *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    if (tmpl < 0 || tmpl >= ZT_TMPL_COUNT)
        return zt_fail(st, ZT_EINVAL, "unknown chat template %d (known: %s)", tmpl, zt_chat_template_list());
    if ((zt_chat_template_needs_bos(tmpl) && !bos) || (zt_chat_template_needs_eos(tmpl) && !eos))
        return zt_fail(st, ZT_EINVAL, "template %s needs the tokenizer's %s token", template_names[tmpl],
                       !bos && zt_chat_template_needs_bos(tmpl) ? "BOS" : "EOS");
    for (int i = 0; i < n; ++i)
        if (m[i].role < ZT_ROLE_SYSTEM || m[i].role > ZT_ROLE_ASSISTANT)
            return zt_fail(st, ZT_EINVAL, "message %d: bad role %d", i, m[i].role);
    int rc = ZT_OK;
    switch (tmpl) {
    case ZT_TMPL_LLAMA3: rc = render_llama3(m, n, bos, out, st); break;
    case ZT_TMPL_CHATML: rc = render_chatml(m, n, 0, out, st); break;
    case ZT_TMPL_QWEN2: rc = render_chatml(m, n, 1, out, st); break;
    default: rc = render_mistral(m, n, bos, eos, out, st); break;
    }
    if (rc == ZT_OK && !out->text) rc = put(out, "", 0, st);
    if (rc != ZT_OK) zt_chat_text_free(out);
    return rc;
}
