/* sftprep.c -- `ztrain prep --sft`: JSON Lines of chats or prompt/completion
 * pairs -> rendered with a built-in chat template, tokenized, masked and
 * packed into SFT window files (sft.h, docs/sft.md).  The input is streamed
 * (one line, one example and one window in memory); outputs are written to
 * temporary files and renamed into place only when everything succeeded. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include "fileio.h"
#include "internal.h"
#include "sft.h"
#include "jinja.h"

void zt_sft_path(char *buf, size_t n, const char *prefix, const char *split) {
    snprintf(buf, n, "%s_%s.sft", prefix, split);
}

/* ---------------------------------------------------------------- packing */

typedef struct packer {
    zt_sft_writer *w;
    int W, pad, allow_split;
    uint32_t *tok;
    uint8_t *mask;
    int pos;
    uint64_t examples, dropped, pad_tokens, targets;
} packer;

/* Pad the open window with masked pad tokens and write it; a window left
 * with no counted target is dropped (it would add nothing to the loss). */
static int flush(packer *p, zt_status *st) {
    if (p->pos == 0) return ZT_OK;
    for (int k = p->pos; k < p->W; ++k) {
        p->tok[k] = (uint32_t)p->pad;
        p->mask[k] = 0;
    }
    p->pad_tokens += (uint64_t)(p->W - p->pos);
    p->mask[0] = 0;   /* the first token of a window is never a target */
    p->pos = 0;
    uint64_t counted = 0;
    for (int k = 1; k < p->W; ++k) counted += p->mask[k];
    p->targets += counted;
    if (!counted) {
        p->dropped++;
        return ZT_OK;
    }
    return zt_sft_writer_put(p->w, p->tok, p->mask, st);
}

/* Append one example of n tokens (n <= W unless allow_split). */
static int pack(packer *p, const int32_t *ids, const uint8_t *mask, size_t n, zt_status *st) {
    if (!p->allow_split && (size_t)p->pos + n > (size_t)p->W) ZT_TRY(flush(p, st));
    for (size_t i = 0; i < n;) {
        size_t take = (size_t)(p->W - p->pos) < n - i ? (size_t)(p->W - p->pos) : n - i;
        for (size_t k = 0; k < take; ++k) {
            p->tok[p->pos + (int)k] = (uint32_t)ids[i + k];
            p->mask[p->pos + (int)k] = mask[i + k];
        }
        p->pos += (int)take;
        i += take;
        if (p->pos == p->W) ZT_TRY(flush(p, st));
    }
    p->examples++;
    return ZT_OK;
}

/* ---------------------------------------------------------------- examples */

typedef struct example {
    zt_chat_msg *msg;
    int n, cap;
    json_t *root;
    json_t *msgs;     /* auto templates: the messages as given (owned) */
    int any_role;     /* auto templates: roles and contents are the template's business */
} example;

static int add_msg(example *e, int role, json_t *content, const char *where, int idx, zt_status *st) {
    if (!json_is_string(content))
        return zt_fail(st, ZT_EDATA, "%s: message %d: \"content\" must be a string", where, idx);
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 8;
        zt_chat_msg *m = realloc(e->msg, (size_t)cap * sizeof *m);
        if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory");
        e->msg = m;
        e->cap = cap;
    }
    e->msg[e->n].role = role;
    e->msg[e->n].content = json_string_value(content);
    e->msg[e->n].len = json_string_length(content);
    e->n++;
    return ZT_OK;
}

/* A content given as a list of typed parts, for a built-in template: the texts of its "text" parts
 * joined, put in place of the list (so that e->root owns it); another part type is refused by name. */
static int join_parts(json_t *m, const char *where, size_t idx, zt_status *st) {
    json_t *c = json_object_get(m, "content"), *p;
    if (!json_is_array(c)) return ZT_OK;
    size_t n = 0, i;
    json_array_foreach(c, i, p) {
        json_t *ty = json_object_get(p, "type"), *tx = json_object_get(p, "text");
        if (!json_is_string(ty))
            return zt_fail(st, ZT_EDATA, "%s: message %zu: content part %zu is not an object with a string \"type\"",
                           where, idx, i);
        if (strcmp(json_string_value(ty), "text") != 0)
            return zt_fail(st, ZT_EDATA, "%s: message %zu: content part %zu of type '%.60s' (only \"text\" parts are "
                           "rendered)", where, idx, i, json_string_value(ty));
        if (!json_is_string(tx))
            return zt_fail(st, ZT_EDATA, "%s: message %zu: content part %zu (type text) has no string \"text\"",
                           where, idx, i);
        n += json_string_length(tx);
    }
    char *s = malloc(n + 1);
    if (!s) return zt_fail(st, ZT_ENOMEM, "out of memory");
    n = 0;
    json_array_foreach(c, i, p) {
        json_t *tx = json_object_get(p, "text");
        memcpy(s + n, json_string_value(tx), json_string_length(tx));
        n += json_string_length(tx);
    }
    json_t *j = json_stringn_nocheck(s, n);
    free(s);
    if (!j || json_object_set_new(m, "content", j) != 0) return zt_fail(st, ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* One JSON line -> the messages of e (pointing into e->root).  where:
 * "FILE:LINE". */
static int parse_example(const char *line, size_t len, const char *where, example *e, zt_status *st) {
    e->n = 0;
    json_error_t err;
    e->root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
    char why[200];
    if (!e->root)
        return zt_fail(st, ZT_EDATA, "%s: malformed JSON: %s (column %d)", where,
                       zt_json_error_text(err.text, why, sizeof why), err.column);
    if (!json_is_object(e->root))
        return zt_fail(st, ZT_EDATA, "%s: expected a JSON object with \"messages\" or \"prompt\" and "
                       "\"completion\"", where);
    json_t *msgs = json_object_get(e->root, "messages");
    json_t *prompt = json_object_get(e->root, "prompt"), *completion = json_object_get(e->root, "completion");
    if (msgs && (prompt || completion))
        return zt_fail(st, ZT_EDATA, "%s: has both \"messages\" and \"prompt\"/\"completion\" (give one form)",
                       where);
    /* an example's tools and documents: the template's variables of the same names */
    static const char *const lists[] = {"tools", "documents"};
    for (int k = 0; k < 2; ++k) {
        json_t *v = json_object_get(e->root, lists[k]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_array(v)) return zt_fail(st, ZT_EDATA, "%s: \"%s\" must be a list", where, lists[k]);
        if (!e->any_role)
            return zt_fail(st, ZT_EDATA, "%s: \"%s\" needs the model's own chat template (--template auto or a "
                           ".jinja file); the built-in templates have no %s", where, lists[k], lists[k]);
    }
    if (!msgs) {
        if (!prompt || !completion)
            return zt_fail(st, ZT_EDATA, "%s: expected \"messages\" (a list of {\"role\", \"content\"}) or "
                           "\"prompt\" and \"completion\"", where);
        if (!json_is_string(prompt) || !json_is_string(completion))
            return zt_fail(st, ZT_EDATA, "%s: \"prompt\" and \"completion\" must be strings", where);
        if (e->any_role) {
            e->msgs = json_pack("[{s:s,s:O},{s:s,s:O}]", "role", "user", "content", prompt, "role", "assistant",
                                "content", completion);
            return e->msgs ? ZT_OK : zt_fail(st, ZT_ENOMEM, "out of memory");
        }
        ZT_TRY(add_msg(e, ZT_ROLE_USER, prompt, where, 0, st));
        return add_msg(e, ZT_ROLE_ASSISTANT, completion, where, 1, st);
    }
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return zt_fail(st, ZT_EDATA, "%s: \"messages\" must be a non-empty list", where);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        if (!json_is_string(role))
            return zt_fail(st, ZT_EDATA, "%s: message %zu: expected an object with a string \"role\"", where, i);
        if (e->any_role) continue;
        int r = zt_chat_role(json_string_value(role));
        if (r < 0)
            return zt_fail(st, ZT_EDATA, "%s: message %zu: unknown role '%s' (expected system, user or "
                           "assistant)", where, i, json_string_value(role));
        ZT_TRY(join_parts(m, where, i, st));
        ZT_TRY(add_msg(e, r, json_object_get(m, "content"), where, (int)i, st));
    }
    if (e->any_role) e->msgs = json_incref(msgs);
    return ZT_OK;
}

/* Length of the common prefix of a[na] and b[nb]. */
static size_t lcp(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) ++i;
    return i;
}

/* The first token whose text reaches byte `at` of the rendering: ids of
 * text[0, at) share a prefix of k tokens with the full encoding; the token
 * after it holds byte at (when the prefix encodes to exactly k tokens, it
 * starts there).  *straddle: the prefix's own encoding differs from the
 * full one after k tokens (token k holds bytes on both sides of at).
 *
 * The prefix is not encoded from byte 0: with the last cut c ending at or
 * before at (tokenizer.h: zt_tok_encode_cuts), its encoding is ids[0, c.k)
 * followed by the encoding of text[c.off, at), so only that segment is
 * encoded and compared.  The chat templates put a special token in every
 * turn, so a conversation costs time linear in its turns, with the ids and
 * masks of encoding each whole prefix. */
static int boundary(const zt_tokenizer *t, const char *text, size_t at, const int32_t *ids, size_t n,
                    const zt_tok_cut *cuts, size_t ncuts, size_t *k, int *straddle, zt_status *st) {
    /* the last cut with end <= at (cuts are in text order) */
    size_t lo = 0, hi = ncuts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cuts[mid].end <= at) lo = mid + 1;
        else hi = mid;
    }
    size_t from = lo ? cuts[lo - 1].off : 0, k0 = lo ? cuts[lo - 1].k : 0;
    int32_t *p = NULL;
    size_t np = 0;
    ZT_TRY(zt_tok_encode(t, text + from, at - from, 0, &p, &np, st));
    *k = k0 + lcp(p, np, ids + k0, n - k0);
    *straddle = *k - k0 < np;
    free(p);
    return ZT_OK;
}

static int encode_masked(const zt_tokenizer *t, const zt_chat_text *r, int mode, int32_t **ids, size_t *n,
                         uint8_t **mask, zt_status *st) {
    *ids = NULL;
    *mask = NULL;
    zt_tok_cut *cuts = NULL;
    size_t ncuts = 0;
    ZT_TRY(zt_tok_encode_cuts(t, r->text, r->len, ids, n, &cuts, &ncuts, st));
    *mask = calloc(*n ? *n : 1, 1);
    if (!*mask) { free(cuts); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    if (mode == ZT_SFT_MASK_ALL) {
        memset(*mask, 1, *n);
        free(cuts);
        return ZT_OK;
    }
    int rc = ZT_OK;
    for (int s = mode == ZT_SFT_MASK_LAST ? r->nspan - 1 : 0; rc == ZT_OK && s >= 0 && s < r->nspan; ++s) {
        const zt_chat_span *sp = &r->span[s];
        if (sp->end == sp->begin) continue;
        size_t a, e;
        int sa, se;
        rc = boundary(t, r->text, sp->begin, *ids, *n, cuts, ncuts, &a, &sa, st);
        if (rc == ZT_OK) rc = boundary(t, r->text, sp->end, *ids, *n, cuts, ncuts, &e, &se, st);
        if (rc != ZT_OK) break;
        if (se && e < *n) e++;
        for (size_t k = a; k < e; ++k) (*mask)[k] = 1;
    }
    free(cuts);
    return rc;
}

int zt_sft_encode_chat(const zt_tokenizer *t, int tmpl, const char *bos, const char *eos,
                       const zt_chat_msg *m, int n, int mode, int32_t **ids, uint8_t **mask, size_t *len,
                       int *nspan, zt_status *st) {
    *ids = NULL;
    *mask = NULL;
    *len = 0;
    zt_chat_text r;
    ZT_TRY(zt_chat_render(tmpl, m, n, bos, eos, &r, st));
    *nspan = r.nspan;
    int rc = encode_masked(t, &r, mode, ids, len, mask, st);
    if (rc != ZT_OK) {
        free(*ids);
        free(*mask);
        *ids = NULL;
        *mask = NULL;
    }
    zt_chat_text_free(&r);
    return rc;
}

int zt_sft_encode_auto(const zt_tokenizer *t, const zt_chat_auto *a, const json_t *messages, int mode,
                       int32_t **ids, uint8_t **mask, size_t *len, int *nspan, zt_status *st) {
    return zt_sft_encode_auto_tools(t, a, messages, NULL, NULL, mode, ids, mask, len, nspan, st);
}

int zt_sft_encode_auto_tools(const zt_tokenizer *t, const zt_chat_auto *a, const json_t *messages,
                             const json_t *tools, const json_t *documents, int mode, int32_t **ids, uint8_t **mask,
                             size_t *len, int *nspan, zt_status *st) {
    *ids = NULL;
    *mask = NULL;
    *len = 0;
    zt_chat_text r;
    ZT_TRY(zt_chat_auto_render_tools(a, t, messages, tools, documents, &r, st));
    *nspan = r.nspan;
    int rc = encode_masked(t, &r, mode, ids, len, mask, st);
    if (rc != ZT_OK) {
        free(*ids);
        free(*mask);
        *ids = NULL;
        *mask = NULL;
    }
    zt_chat_text_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- driver */

typedef struct prep_state {
    const zt_sft_prep_opts *o;
    zt_tokenizer *tok;
    int tmpl;                  /* -1: auto (the tokenizer's template or a file) */
    zt_chat_auto *autot;
    const char *bos, *eos;
    packer pk[2];              /* train, val */
    example ex;
    uint64_t tokens, truncated;
} prep_state;

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!isspace((unsigned char)s[i])) return 0;
    return 1;
}

static int do_example(prep_state *ps, const char *line, size_t len, const char *where, packer *p,
                      zt_status *st) {
    const zt_sft_prep_opts *o = ps->o;
    int32_t *ids = NULL;
    uint8_t *mask = NULL;
    size_t n = 0;
    int nspan = 0;
    int rc = parse_example(line, len, where, &ps->ex, st);
    if (rc == ZT_OK) {
        if (ps->autot)
            rc = zt_sft_encode_auto_tools(ps->tok, ps->autot, ps->ex.msgs, json_object_get(ps->ex.root, "tools"),
                                          json_object_get(ps->ex.root, "documents"), o->mask, &ids, &mask, &n,
                                          &nspan, st);
        else
            rc = zt_sft_encode_chat(ps->tok, ps->tmpl, ps->bos, ps->eos, ps->ex.msg, ps->ex.n, o->mask, &ids,
                                    &mask, &n, &nspan, st);
        if (rc != ZT_OK) {
            char msg[sizeof st->msg];
            memcpy(msg, st->msg, sizeof msg);
            rc = zt_fail(st, rc, "%s: %s", where, msg);
        }
    }
    if (rc == ZT_OK && o->mask != ZT_SFT_MASK_ALL && nspan == 0)
        rc = zt_fail(st, ZT_EDATA, "%s: no assistant message: nothing to train on with --mask %s", where,
                     o->mask == ZT_SFT_MASK_LAST ? "last" : "assistant");
    if (rc == ZT_OK && n > (size_t)p->W && !o->allow_split) {
        if (o->truncate) {
            n = (size_t)p->W;
            ps->truncated++;
        } else {
            rc = zt_fail(st, ZT_EDATA, "%s: the example is %zu tokens, longer than a window of %d tokens "
                         "(seq_len %d + 1); use --truncate, --allow-split or a larger --seq-len", where, n,
                         p->W, p->W - 1);
        }
    }
    if (rc == ZT_OK) {
        ps->tokens += n;
        rc = pack(p, ids, mask, n, st);
    }
    free(ids);
    free(mask);
    json_decref(ps->ex.root);
    json_decref(ps->ex.msgs);
    ps->ex.root = NULL;
    ps->ex.msgs = NULL;
    return rc;
}

/* Examples (non-blank lines) in the file: the val split needs the count.
 * Lines longer than the limit are refused here, before any work. */
static int count_examples(FILE *fp, const zt_sft_prep_opts *o, uint64_t in_total, uint64_t *n,
                          zt_status *st) {
    zt_lines lr;
    zt_lines_init(&lr, fp, o->input, o->max_line_bytes);
    size_t len;
    int rc;
    *n = 0;
    while ((rc = zt_lines_next(&lr, &len, st)) == ZT_OK && len > 0) {
        if (!is_blank(lr.buf, len)) (*n)++;
        char label[96];
        snprintf(label, sizeof label, "prep --sft: counting (%llu lines)", (unsigned long long)lr.lineno);
        zt_progress_report(&o->progress, label, lr.bytes, in_total, "B", 0);
    }
    if (rc == ZT_OK) {
        char label[96];
        snprintf(label, sizeof label, "prep --sft: counting (%llu lines)", (unsigned long long)lr.lineno);
        zt_progress_report(&o->progress, label, lr.bytes, in_total, "B", 1);
    }
    zt_lines_free(&lr);
    if (rc == ZT_OK) rewind(fp);
    return rc;
}

static int check_tokens(prep_state *ps, zt_status *st) {
    const zt_sft_prep_opts *o = ps->o;
    if (ps->autot) return ZT_OK;   /* the template writes what it writes, as with transformers */
    const char *const *need = zt_chat_template_tokens(ps->tmpl);
    for (int i = 0; need[i]; ++i)
        if (zt_tok_token_id(ps->tok, need[i]) < 0)
            return zt_fail(st, ZT_EINVAL, "%s: template %s writes %s, which is not a token of this tokenizer",
                           o->tokenizer, o->template_name, need[i]);
    int bos = zt_tok_bos_id(ps->tok), eos = zt_tok_eos_id(ps->tok);
    ps->bos = bos >= 0 ? zt_tok_token_str(ps->tok, bos) : NULL;
    ps->eos = eos >= 0 ? zt_tok_token_str(ps->tok, eos) : NULL;
    if (zt_chat_template_needs_bos(ps->tmpl) && !ps->bos)
        return zt_fail(st, ZT_EINVAL, "%s: template %s needs a BOS token, and this tokenizer defines none",
                       o->tokenizer, o->template_name);
    if (zt_chat_template_needs_eos(ps->tmpl) && !ps->eos)
        return zt_fail(st, ZT_EINVAL, "%s: template %s needs an EOS token, and this tokenizer defines none",
                       o->tokenizer, o->template_name);
    return ZT_OK;
}

int zt_sft_prep(const zt_sft_prep_opts *o, zt_sft_prep_result *res, zt_status *st) {
    zt_status_clear(st);
    if (res) memset(res, 0, sizeof *res);
    if (!o->input || !o->tokenizer || !o->prefix || !*o->prefix)
        return zt_fail(st, ZT_EINVAL, "prep --sft needs an input, a tokenizer and an output prefix");
    if (o->seq_len < 1) return zt_fail(st, ZT_EINVAL, "prep --sft: seq_len %d < 1", o->seq_len);
    if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
        return zt_fail(st, ZT_EINVAL, "val fraction must be in [0, 1), got %g", o->val_fraction);
    if (o->mask < ZT_SFT_MASK_ALL || o->mask > ZT_SFT_MASK_LAST)
        return zt_fail(st, ZT_EINVAL, "unknown mask mode %d", o->mask);
    if (o->allow_split && o->truncate)
        return zt_fail(st, ZT_EINVAL, "--allow-split and --truncate exclude each other");
    prep_state ps;
    memset(&ps, 0, sizeof ps);
    ps.o = o;
    const char *tn = o->template_name ? o->template_name : "auto";
    size_t tl = strlen(tn);
    if (!strcmp(tn, "auto")) {
        ps.tmpl = -1;
        ZT_TRY(zt_chat_auto_load(o->tokenizer, &ps.autot, st));
        if (!ps.autot)
            return zt_fail(st, ZT_EINVAL, "%s: no chat template (neither chat_template.jinja nor a chat_template in "
                           "tokenizer_config.json); give --template NAME (%s) or --template FILE.jinja", o->tokenizer,
                           zt_chat_template_list());
    } else if (strchr(tn, '/') || (tl > 6 && !strcmp(tn + tl - 6, ".jinja"))) {
        ps.tmpl = -1;
        ZT_TRY(zt_chat_auto_file(tn, o->tokenizer, &ps.autot, st));
    } else {
        ps.tmpl = zt_chat_template(tn);
        if (ps.tmpl < 0)
            return zt_fail(st, ZT_EINVAL, "unknown chat template '%s' (known: auto, %s, or a FILE.jinja)", tn,
                           zt_chat_template_list());
    }
    ps.ex.any_role = ps.autot != NULL;
    if (!ps.autot && o->template_vars && o->template_vars[0])
        return zt_fail(st, ZT_EINVAL, "template variables (%s) apply to --template auto or FILE.jinja, not to the "
                       "built-in template %s", o->template_vars[0], tn);
    for (int v = 0; ps.autot && o->template_vars && o->template_vars[v]; ++v) {
        const char *eq = strchr(o->template_vars[v], '=');
        char name[128];
        if (!eq || eq == o->template_vars[v] || (size_t)(eq - o->template_vars[v]) >= sizeof name) {
            zt_chat_auto_free(ps.autot);
            return zt_fail(st, ZT_EINVAL, "template variable '%s': expected NAME=VALUE", o->template_vars[v]);
        }
        memcpy(name, o->template_vars[v], (size_t)(eq - o->template_vars[v]));
        name[eq - o->template_vars[v]] = 0;
        int rc = zt_chat_auto_set_var(ps.autot, name, eq + 1, st);
        if (rc != ZT_OK) { zt_chat_auto_free(ps.autot); return rc; }
    }
    FILE *fp = fopen(o->input, "rb");
    if (!fp) {
        zt_chat_auto_free(ps.autot);
        return zt_fail(st, ZT_EIO, "%s: cannot open: %s", o->input, strerror(errno));
    }
    int rc = zt_tok_load(o->tokenizer, &ps.tok, st);
    if (rc == ZT_OK) rc = check_tokens(&ps, st);
    uint64_t total = 0, in_total = 0;
    struct stat sb;
    if (fstat(fileno(fp), &sb) == 0) in_total = (uint64_t)sb.st_size;
    if (rc == ZT_OK) rc = count_examples(fp, o, in_total, &total, st);
    if (rc == ZT_OK && total == 0) rc = zt_fail(st, ZT_EDATA, "%s: no examples (the file is empty)", o->input);
    uint64_t nval = (uint64_t)((double)total * o->val_fraction);
    const int W = o->seq_len + 1;
    const int vocab = ps.tok ? zt_tok_vocab_size(ps.tok) : 0;
    const int elsize = vocab > 65536 ? 4 : 2;
    const int pad = o->pad_id >= 0 ? o->pad_id : (ps.tok && zt_tok_eos_id(ps.tok) >= 0 ? zt_tok_eos_id(ps.tok) : 0);
    if (rc == ZT_OK && pad >= vocab)
        rc = zt_fail(st, ZT_EINVAL, "pad id %d is not below the tokenizer's vocabulary size %d", pad, vocab);
    const int flags = (o->allow_split ? ZT_SFT_FLAG_SPLIT : 0) | (o->truncate ? ZT_SFT_FLAG_TRUNCATE : 0);
    char made[1200] = "";   /* the directories this prep created */
    if (rc == ZT_OK) rc = zt_prep_make_dirs(o->prefix, made, sizeof made, st);
    const char *split[2] = {"train", "val"};
    char path[2][1200];
    for (int s = 0; s < 2 && rc == ZT_OK; ++s) {
        if (s == 1 && nval == 0) break;
        packer *p = &ps.pk[s];
        p->W = W;
        p->pad = pad;
        p->allow_split = o->allow_split;
        p->tok = malloc((size_t)W * sizeof *p->tok);
        p->mask = malloc((size_t)W);
        if (!p->tok || !p->mask) { rc = zt_fail(st, ZT_ENOMEM, "out of memory"); break; }
        zt_sft_path(path[s], sizeof path[s], o->prefix, split[s]);
        rc = zt_sft_writer_open(path[s], W, elsize, vocab, pad, o->mask, flags, &p->w, st);
    }
    zt_lines lr;
    zt_lines_init(&lr, fp, o->input, o->max_line_bytes);
    size_t len;
    uint64_t ex = 0;
    char label[160];
    while (rc == ZT_OK && (rc = zt_lines_next(&lr, &len, st)) == ZT_OK && len > 0) {
        snprintf(label, sizeof label, "prep --sft (%llu lines, %llu examples, %llu tokens)",
                 (unsigned long long)lr.lineno, (unsigned long long)ex, (unsigned long long)ps.tokens);
        zt_progress_report(&o->progress, label, lr.bytes, in_total, "B", 0);
        const char *line = lr.buf;
        if (is_blank(line, len)) continue;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        char where[1100];
        snprintf(where, sizeof where, "%s:%llu", o->input, (unsigned long long)lr.lineno);
        rc = do_example(&ps, line, len, where, &ps.pk[ex >= total - nval], st);
        ex++;
    }
    snprintf(label, sizeof label, "prep --sft (%llu lines, %llu examples, %llu tokens)",
             (unsigned long long)lr.lineno, (unsigned long long)ex, (unsigned long long)ps.tokens);
    if (rc == ZT_OK) zt_progress_report(&o->progress, label, lr.bytes, in_total, "B", 1);
    zt_lines_free(&lr);
    if (rc == ZT_OK && ex != total)
        rc = zt_fail(st, ZT_EIO, "%s: the file changed while being read", o->input);
    for (int s = 0; s < 2 && rc == ZT_OK; ++s)
        if (ps.pk[s].w) rc = flush(&ps.pk[s], st);
    if (rc == ZT_OK && zt_sft_writer_windows(ps.pk[0].w) == 0)
        rc = zt_fail(st, ZT_EDATA, "%s: no training window has a target to train on", o->input);
    if (rc == ZT_OK && ps.pk[1].w && zt_sft_writer_windows(ps.pk[1].w) == 0)
        rc = zt_fail(st, ZT_EDATA, "%s: no validation window has a target to train on", o->input);
    for (int s = 0; s < 2 && rc == ZT_OK; ++s)
        if (ps.pk[s].w) rc = zt_sft_writer_close(ps.pk[s].w, ps.pk[s].examples, st);
    for (int s = 0; s < 2 && rc == ZT_OK; ++s)
        if (ps.pk[s].w) rc = zt_sft_writer_commit(ps.pk[s].w, st);
    if (rc == ZT_OK && res) {
        res->train_examples = ps.pk[0].examples;
        res->val_examples = ps.pk[1].examples;
        res->train_windows = zt_sft_writer_windows(ps.pk[0].w);
        res->val_windows = ps.pk[1].w ? zt_sft_writer_windows(ps.pk[1].w) : 0;
        res->tokens = ps.tokens;
        res->targets = ps.pk[0].targets + ps.pk[1].targets;
        res->truncated = ps.truncated;
        res->dropped_windows = ps.pk[0].dropped + ps.pk[1].dropped;
        res->pad_tokens = ps.pk[0].pad_tokens + ps.pk[1].pad_tokens;
        res->pad_id = pad;
        res->elsize = elsize;
    }
    for (int s = 0; s < 2; ++s) {
        zt_sft_writer_free(ps.pk[s].w);
        free(ps.pk[s].tok);
        free(ps.pk[s].mask);
    }
    free(ps.ex.msg);
    zt_chat_auto_free(ps.autot);
    zt_tok_free(ps.tok);
    fclose(fp);
    if (rc != ZT_OK) zt_prep_remove_dirs(o->prefix, made);   /* the writers removed their files */
    return rc;
}
