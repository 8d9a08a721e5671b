/* tokenizer.c -- Hugging Face tokenizer.json: loading (everything not implemented is refused by name),
 * added tokens (split out before the model, longest match first), the encode/decode drivers and the API of
 * tokenizer.h.  The text stages are in tokenizer_text.c, the BPE model in tokenizer_bpe.c. */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tokenizer_int.h"
#include "json_py.h"

static _Atomic uint64_t tok_serial = 1;

/* ------------------------------------------------------------ JSON helpers */
typedef struct ld { const char *file; zt_status *st; } ld;

static int bad(ld *L, const char *fmt, ...) ZT_PRINTF(2, 3);
static int bad(ld *L, const char *fmt, ...) {
    char m[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return zt_fail(L->st, ZT_EDATA, "%s: %s", L->file, m);
}
static int unsup(ld *L, const char *what, const char *name) {
    return zt_fail(L->st, ZT_EUNSUPPORTED, "%s: %s '%s' is not supported (docs/tokenizers.md lists what is)",
                   L->file, what, name);
}
/* Fields as Hugging Face tokenizers' serde reads them: a plain field must be there (B_REQ), a field with a
 * serde default may be missing, and only an Option field may be null (B_NULL); a value of the wrong type is
 * refused.  A bool member: its value, dflt when missing (or null with B_NULL); -1 with the error set. */
enum { B_OPT = 0, B_REQ = 1, B_NULL = 2 };
static int field_bool(ld *L, json_t *o, const char *key, int dflt, int how, const char *where) {
    json_t *v = json_object_get(o, key);
    if (!v && (how & B_REQ)) { bad(L, "%s: missing field '%s' (true or false)", where, key); return -1; }
    if (!v || (json_is_null(v) && (how & B_NULL))) return dflt;
    if (!json_is_boolean(v)) { bad(L, "%s: '%s' must be true or false", where, key); return -1; }
    return json_is_true(v);
}
/* an Option<bool> member (missing or null: dflt) */
static int get_bool(ld *L, json_t *o, const char *key, int dflt, const char *where) {
    return field_bool(L, o, key, dflt, B_NULL, where);
}
/* A string member that may be missing (or null with B_NULL): ZT_OK with *out NULL; another type is refused. */
static int opt_str(ld *L, json_t *o, const char *key, int how, const char *where, const char **out) {
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || (json_is_null(v) && (how & B_NULL))) return ZT_OK;
    if (!json_is_string(v)) return bad(L, "%s: '%s' must be a string", where, key);
    *out = json_string_value(v);
    return ZT_OK;
}
/* ByteLevel (pre-tokenizer, decoder, post-processor: one struct in HF): add_prefix_space and trim_offsets
 * required, use_regex defaulting to true */
static int load_bytelevel(ld *L, json_t *o, const char *where, int *add_prefix_space, int *use_regex) {
    int a = field_bool(L, o, "add_prefix_space", 1, B_REQ, where), u = a < 0 ? -1 : field_bool(L, o, "use_regex", 1, B_OPT, where);
    if (a < 0 || u < 0 || field_bool(L, o, "trim_offsets", 1, B_REQ, where) < 0) return L->st->code;
    if (add_prefix_space) *add_prefix_space = a;
    if (use_regex) *use_regex = u;
    return ZT_OK;
}
/* A count (usize in HF): any integer >= 0, held as an int (a larger one does what INT_MAX does: no word,
 * no strip reaches it) */
static int get_count(ld *L, json_t *o, const char *key, const char *where, int *out) {
    json_t *v = json_object_get(o, key);
    if (!v) return bad(L, "%s: missing field '%s' (a count)", where, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return bad(L, "%s: '%s' must be a count (an integer >= 0)", where, key);
    *out = json_integer_value(v) > INT_MAX ? INT_MAX : (int)json_integer_value(v);
    return ZT_OK;
}
static const char *get_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* {"String": s} or {"Regex": r} */
static int load_pattern(ld *L, json_t *o, const char *where, zt_regex *r) {
    json_t *p = json_object_get(o, "pattern");
    const char *s;
    if (json_is_object(p) && (s = get_str(p, "String"))) return zt_regex_compile(r, s, 0, where, L->st);
    if (json_is_object(p) && (s = get_str(p, "Regex"))) {
        char w[300];
        snprintf(w, sizeof w, "%s: %s", L->file, where);
        return zt_regex_compile(r, s, 1, w, L->st);
    }
    return bad(L, "%s: 'pattern' must be {\"String\": ...} or {\"Regex\": ...}", where);
}

static int one_char(ld *L, const char *s, const char *where, uint32_t *cp) {
    size_t n = strlen(s);
    if (n == 0 || zt_utf8_valid(s, n) != n) return bad(L, "%s: '%s' must be one character", where, s);
    int l = zt_utf8_dec(s, cp);
    if ((size_t)l != n) return bad(L, "%s: '%s' must be one character", where, s);
    return ZT_OK;
}

/* Metaspace's prepend_scheme ("always" | "first" | "never"), or the older add_prefix_space bool */
static int load_prepend(ld *L, json_t *o, const char *where, int *out) {
    const char *ps;
    ZT_TRY(opt_str(L, o, "prepend_scheme", B_OPT, where, &ps));
    if (field_bool(L, o, "split", 1, B_NULL, where) < 0) return L->st->code;
    if (ps) {
        if (!strcmp(ps, "always")) *out = ZT_PREPEND_ALWAYS;
        else if (!strcmp(ps, "first")) *out = ZT_PREPEND_FIRST;
        else if (!strcmp(ps, "never")) *out = ZT_PREPEND_NEVER;
        else return unsup(L, "Metaspace prepend_scheme", ps);
        return ZT_OK;
    }
    int a = get_bool(L, o, "add_prefix_space", 1, where);
    if (a < 0) return L->st->code;
    *out = a ? ZT_PREPEND_ALWAYS : ZT_PREPEND_NEVER;
    return ZT_OK;
}

/* ------------------------------------------------------------ normalizers */
static int load_norm(ld *L, json_t *o, zt_norm *nm) {
    memset(nm, 0, sizeof *nm);
    const char *type = get_str(o, "type");
    if (!type) return bad(L, "normalizer without a 'type'");
    if (!strcmp(type, "Sequence")) {
        json_t *a = json_object_get(o, "normalizers");
        if (!json_is_array(a)) return bad(L, "normalizer Sequence: 'normalizers' must be a list");
        nm->type = ZT_NORM_SEQ;
        nm->sub = calloc(json_array_size(a) + 1, sizeof *nm->sub);
        if (!nm->sub) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); ++i) {
            nm->nsub++;                  /* counted first: a part-built entry is freed with the rest */
            ZT_TRY(load_norm(L, json_array_get(a, i), &nm->sub[i]));
        }
        return ZT_OK;
    }
    if (!strcmp(type, "NFC")) { nm->type = ZT_NORM_NFC; return ZT_OK; }
    if (!strcmp(type, "NFKC")) { nm->type = ZT_NORM_NFKC; return ZT_OK; }
    if (!strcmp(type, "NFD")) { nm->type = ZT_NORM_NFD; return ZT_OK; }
    if (!strcmp(type, "NFKD")) { nm->type = ZT_NORM_NFKD; return ZT_OK; }
    if (!strcmp(type, "Prepend")) {
        const char *p = get_str(o, "prepend");
        if (!p) return bad(L, "normalizer Prepend: 'prepend' must be a string");
        nm->type = ZT_NORM_PREPEND;
        nm->str = strdup(p); nm->strlen = strlen(p);
        return nm->str ? ZT_OK : zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
    }
    if (!strcmp(type, "Replace")) {
        const char *c = get_str(o, "content");
        if (!c) return bad(L, "normalizer Replace: 'content' must be a string");
        nm->type = ZT_NORM_REPLACE;
        nm->str = strdup(c); nm->strlen = strlen(c);
        if (!nm->str) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        return load_pattern(L, o, "normalizer Replace", &nm->pat);
    }
    return unsup(L, "normalizer", type);
}

/* ------------------------------------------------------------ pre-tokenizers */
static int load_pre(ld *L, json_t *o, zt_pretok *pt) {
    memset(pt, 0, sizeof *pt);
    const char *type = get_str(o, "type");
    if (!type) return bad(L, "pre_tokenizer without a 'type'");
    if (!strcmp(type, "Sequence")) {
        json_t *a = json_object_get(o, "pretokenizers");
        if (!json_is_array(a)) return bad(L, "pre_tokenizer Sequence: 'pretokenizers' must be a list");
        pt->type = ZT_PRE_SEQ;
        pt->sub = calloc(json_array_size(a) + 1, sizeof *pt->sub);
        if (!pt->sub) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); ++i) {
            pt->nsub++;                  /* counted first: a part-built entry is freed with the rest */
            ZT_TRY(load_pre(L, json_array_get(a, i), &pt->sub[i]));
        }
        return ZT_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        pt->type = ZT_PRE_BYTELEVEL;
        ZT_TRY(load_bytelevel(L, o, "pre_tokenizer ByteLevel", &pt->add_prefix_space, &pt->use_regex));
        char w[300];
        snprintf(w, sizeof w, "%s: pre_tokenizer ByteLevel", L->file);
        return pt->use_regex ? zt_regex_compile(&pt->pat, zt_gpt2_pattern, 1, w, L->st) : ZT_OK;
    }
    if (!strcmp(type, "Split")) {
        pt->type = ZT_PRE_SPLIT;
        const char *b = get_str(o, "behavior");
        if (!b) return bad(L, "pre_tokenizer Split: 'behavior' must be a string");
        if (!strcmp(b, "Removed")) pt->behavior = ZT_SPLIT_REMOVED;
        else if (!strcmp(b, "Isolated")) pt->behavior = ZT_SPLIT_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) pt->behavior = ZT_SPLIT_PREV;
        else if (!strcmp(b, "MergedWithNext")) pt->behavior = ZT_SPLIT_NEXT;
        else if (!strcmp(b, "Contiguous")) pt->behavior = ZT_SPLIT_CONTIG;
        else return unsup(L, "Split behavior", b);
        if ((pt->invert = field_bool(L, o, "invert", 0, B_REQ, "pre_tokenizer Split")) < 0) return L->st->code;
        return load_pattern(L, o, "pre_tokenizer Split", &pt->pat);
    }
    if (!strcmp(type, "Metaspace")) {
        pt->type = ZT_PRE_METASPACE;
        const char *r = get_str(o, "replacement");
        if (!r) return bad(L, "pre_tokenizer Metaspace: 'replacement' must be a string");
        ZT_TRY(one_char(L, r, "pre_tokenizer Metaspace replacement", &pt->replcp));
        pt->repllen = strlen(r);
        memcpy(pt->repl, r, pt->repllen);
        ZT_TRY(load_prepend(L, o, "pre_tokenizer Metaspace", &pt->prepend));
        if ((pt->split = get_bool(L, o, "split", 1, "pre_tokenizer Metaspace")) < 0) return L->st->code;
        return ZT_OK;
    }
    /* the char-predicate pre-tokenizers; their predicates (Rust's char methods and the unicode_categories
     * crate in HF) are tables taken from tokenizers itself (io/tokenizer_unicode.c) */
    const char *hcls = NULL;
    int beh = ZT_SPLIT_ISOLATED;
    if (!strcmp(type, "WhitespaceSplit")) { hcls = "whitespace"; beh = ZT_SPLIT_REMOVED; }
    else if (!strcmp(type, "Digits")) {
        int ind = field_bool(L, o, "individual_digits", 0, B_REQ, "pre_tokenizer Digits");
        if (ind < 0) return L->st->code;
        hcls = "numeric"; beh = ind ? ZT_SPLIT_ISOLATED : ZT_SPLIT_CONTIG;
    } else if (!strcmp(type, "Punctuation")) {
        const char *b;
        ZT_TRY(opt_str(L, o, "behavior", B_OPT, "pre_tokenizer Punctuation", &b));
        hcls = "punct";
        if (!b || !strcmp(b, "Isolated")) beh = ZT_SPLIT_ISOLATED;
        else if (!strcmp(b, "Removed")) beh = ZT_SPLIT_REMOVED;
        else if (!strcmp(b, "MergedWithPrevious")) beh = ZT_SPLIT_PREV;
        else if (!strcmp(b, "MergedWithNext")) beh = ZT_SPLIT_NEXT;
        else if (!strcmp(b, "Contiguous")) beh = ZT_SPLIT_CONTIG;
        else return unsup(L, "Punctuation behavior", b);
    } else if (!strcmp(type, "BertPreTokenizer")) {
        /* white space removed, then each punctuation character isolated */
        pt->type = ZT_PRE_SEQ;
        if (!(pt->sub = calloc(2, sizeof *pt->sub))) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        pt->nsub = 2;
        pt->sub[0].type = pt->sub[1].type = ZT_PRE_PRED;
        pt->sub[0].cls = zt_uc_find('h', "whitespace"); pt->sub[0].behavior = ZT_SPLIT_REMOVED;
        pt->sub[1].cls = zt_uc_find('h', "punct"); pt->sub[1].behavior = ZT_SPLIT_ISOLATED;
        if (pt->sub[0].cls < 0 || pt->sub[1].cls < 0) return zt_fail(L->st, ZT_EINTERNAL, "tokenizer: no predicate tables");
        return ZT_OK;
    } else if (!strcmp(type, "Whitespace")) {
        /* HF: the regex \w+|[^\w\s]+, its matches kept (invert + Removed) */
        pt->type = ZT_PRE_SPLIT; pt->behavior = ZT_SPLIT_REMOVED; pt->invert = 1;
        char w[300];
        snprintf(w, sizeof w, "%s: pre_tokenizer Whitespace", L->file);
        return zt_regex_compile(&pt->pat, "\\w+|[^\\w\\s]+", 1, w, L->st);
    }
    if (hcls) {
        pt->type = ZT_PRE_PRED; pt->behavior = beh;
        if ((pt->cls = zt_uc_find('h', hcls)) < 0) return zt_fail(L->st, ZT_EINTERNAL, "tokenizer: no table '%s'", hcls);
        return ZT_OK;
    }
    return unsup(L, "pre_tokenizer", type);
}

/* ------------------------------------------------------------ decoders */
static int load_dec(ld *L, json_t *o, zt_decoder *d) {
    memset(d, 0, sizeof *d);
    const char *type = get_str(o, "type");
    if (!type) return bad(L, "decoder without a 'type'");
    if (!strcmp(type, "Sequence")) {
        json_t *a = json_object_get(o, "decoders");
        if (!json_is_array(a)) return bad(L, "decoder Sequence: 'decoders' must be a list");
        d->type = ZT_DEC_SEQ;
        d->sub = calloc(json_array_size(a) + 1, sizeof *d->sub);
        if (!d->sub) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); ++i) {
            d->nsub++;                  /* counted first: a part-built entry is freed with the rest */
            ZT_TRY(load_dec(L, json_array_get(a, i), &d->sub[i]));
        }
        return ZT_OK;
    }
    if (!strcmp(type, "ByteLevel")) { d->type = ZT_DEC_BYTELEVEL; return load_bytelevel(L, o, "decoder ByteLevel", NULL, NULL); }
    if (!strcmp(type, "ByteFallback")) { d->type = ZT_DEC_BYTEFALLBACK; return ZT_OK; }
    if (!strcmp(type, "Fuse")) { d->type = ZT_DEC_FUSE; return ZT_OK; }
    if (!strcmp(type, "Metaspace")) {
        d->type = ZT_DEC_METASPACE;
        const char *r = get_str(o, "replacement");
        if (!r) return bad(L, "decoder Metaspace: 'replacement' must be a string");
        ZT_TRY(one_char(L, r, "decoder Metaspace replacement", &d->cp));
        ZT_TRY(load_prepend(L, o, "decoder Metaspace", &d->prepend));
        return ZT_OK;
    }
    if (!strcmp(type, "Strip")) {
        d->type = ZT_DEC_STRIP;
        const char *c = get_str(o, "content");
        if (!c) return bad(L, "decoder Strip needs 'content' (a character), 'start' and 'stop' (counts)");
        ZT_TRY(one_char(L, c, "decoder Strip content", &d->cp));
        ZT_TRY(get_count(L, o, "start", "decoder Strip", &d->start));
        return get_count(L, o, "stop", "decoder Strip", &d->stop);
    }
    if (!strcmp(type, "Replace")) {
        d->type = ZT_DEC_REPLACE;
        const char *c = get_str(o, "content");
        if (!c) return bad(L, "decoder Replace: 'content' must be a string");
        d->str = strdup(c); d->strlen = strlen(c);
        if (!d->str) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        return load_pattern(L, o, "decoder Replace", &d->pat);
    }
    if (!strcmp(type, "WordPiece")) {
        d->type = ZT_DEC_WORDPIECE;
        const char *p = get_str(o, "prefix");
        if (!p) return bad(L, "decoder WordPiece: 'prefix' must be a string");
        if ((d->start = field_bool(L, o, "cleanup", 1, B_REQ, "decoder WordPiece")) < 0) return L->st->code;
        d->str = strdup(p); d->strlen = strlen(p);
        return d->str ? ZT_OK : zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
    }
    return unsup(L, "decoder", type);
}

/* ------------------------------------------------------------ model */
/* Unigram: "vocab" a list of [piece, score] (the id is the position), "unk_id", "byte_fallback" */
static int load_unigram(ld *L, json_t *m, zt_bpe *b) {
    b->model = ZT_MODEL_UNIGRAM;
    if ((b->byte_fallback = field_bool(L, m, "byte_fallback", 0, B_OPT, "model Unigram")) < 0) return L->st->code;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0) return bad(L, "model Unigram: 'vocab' must be a non-empty list");
    size_t nv = json_array_size(vocab), total = 0;
    if (nv > INT32_MAX - 1) return bad(L, "model Unigram: too many pieces");
    for (size_t i = 0; i < nv; ++i) {
        json_t *e = json_array_get(vocab, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return bad(L, "model Unigram: vocab entry %zu is not [piece, score]", i);
        total += json_string_length(json_array_get(e, 0)) + 1;
    }
    b->arena = malloc(total + 1);
    b->nid = (int)nv;
    b->id2tok = calloc(nv + 1, sizeof *b->id2tok);
    b->score = malloc(nv * sizeof *b->score);
    if (!b->arena || !b->id2tok || !b->score) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory (vocab)");
    size_t off = 0;
    b->min_score = INFINITY;
    for (size_t i = 0; i < nv; ++i) {
        json_t *e = json_array_get(vocab, i), *k = json_array_get(e, 0);
        size_t kl = json_string_length(k);
        char *d = b->arena + off;
        memcpy(d, json_string_value(k), kl); d[kl] = 0; off += kl + 1;
        ZT_TRY(zt_strmap_put(&b->vocab, d, kl, (int32_t)i, L->st));
        b->id2tok[i] = d;
        b->score[i] = json_number_value(json_array_get(e, 1));
        if (b->score[i] < b->min_score) b->min_score = b->score[i];
        if (kl > b->maxlen) b->maxlen = kl;
    }
    json_t *u = json_object_get(m, "unk_id");
    b->unk = -1;
    if (u && !json_is_null(u)) {
        if (!json_is_integer(u) || json_integer_value(u) < 0 || (size_t)json_integer_value(u) >= nv)
            return bad(L, "model Unigram: unk_id must be the index of a piece");
        b->unk = (int32_t)json_integer_value(u);
    }
    for (int i = 0; i < 256; ++i) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", i);
        b->bytetok[i] = b->byte_fallback ? zt_strmap_get(&b->vocab, t, 6) : -1;
    }
    b->serial = atomic_fetch_add(&tok_serial, 1);
    return ZT_OK;
}

static int load_bpe(ld *L, json_t *m, zt_bpe *b) {
    char **arena = &b->arena;
    const char *type = get_str(m, "type");
    if (!type) return bad(L, "model without a 'type'");
    if (!strcmp(type, "Unigram")) return load_unigram(L, m, b);
    int wp = !strcmp(type, "WordPiece");
    if (strcmp(type, "BPE") && !wp) return unsup(L, "model type", type);
    if (wp) {
        b->model = ZT_MODEL_WORDPIECE;
        const char *pre = get_str(m, "continuing_subword_prefix");
        json_t *mx = json_object_get(m, "max_input_chars_per_word");
        if (!pre) return bad(L, "model WordPiece: 'continuing_subword_prefix' must be a string");
        (void)mx;
        ZT_TRY(get_count(L, m, "max_input_chars_per_word", "model WordPiece", &b->wp_maxchars));
        b->wp_prefixlen = strlen(pre);
        if (!(b->wp_prefix = strdup(pre))) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
    }
    json_t *v = json_object_get(m, "dropout");
    if (v && !json_is_null(v) && !json_is_number(v)) return bad(L, "model: 'dropout' must be a number or null");
    if (v && !json_is_null(v)) return unsup(L, "BPE setting", "dropout (non-null)");
    const char *p;
    ZT_TRY(opt_str(L, m, "continuing_subword_prefix", B_NULL, "model", &p));
    if (p && *p && !wp) return unsup(L, "BPE setting", "continuing_subword_prefix");
    ZT_TRY(opt_str(L, m, "end_of_word_suffix", B_NULL, "model", &p));
    if (p && *p) return unsup(L, "BPE setting", "end_of_word_suffix");
    ZT_TRY(opt_str(L, m, "unk_token", B_NULL, "model", &p));
    if ((b->ignore_merges = get_bool(L, m, "ignore_merges", 0, "model")) < 0 ||
        (b->byte_fallback = get_bool(L, m, "byte_fallback", 0, "model")) < 0 ||
        (b->fuse_unk = get_bool(L, m, "fuse_unk", 0, "model")) < 0)
        return L->st->code;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab)) return bad(L, "model: 'vocab' must be an object");
    /* keys live in one arena */
    size_t total = 0, maxid = 0;
    const char *key; size_t klen; json_t *val;
    json_object_keylen_foreach(vocab, key, klen, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > INT32_MAX - 1)
            return bad(L, "model: vocab entry '%s' has no valid id", key);
        total += klen + 1;
        if ((size_t)json_integer_value(val) > maxid) maxid = (size_t)json_integer_value(val);
    }
    /* the id -> token table (and the model's embedding) is as long as the largest id: an id far past the
     * number of entries is a broken file, not a vocabulary */
    size_t idcap = 2 * json_object_size(vocab) + ZT_TOK_ID_SLACK;
    if (maxid >= idcap)
        json_object_keylen_foreach(vocab, key, klen, val)
            if ((size_t)json_integer_value(val) >= idcap)
                return bad(L, "model: vocab entry '%.*s' has id %lld, absurd for a vocabulary of %zu entries "
                              "(ids up to %zu are accepted)", (int)(klen < 200 ? klen : 200), key,
                           (long long)json_integer_value(val), json_object_size(vocab), idcap - 1);
    *arena = malloc(total + 1);
    b->nid = json_object_size(vocab) ? (int)maxid + 1 : 0;
    b->id2tok = calloc((size_t)b->nid + 1, sizeof *b->id2tok);
    if (!*arena || !b->id2tok) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory (vocab)");
    size_t off = 0;
    json_object_keylen_foreach(vocab, key, klen, val) {
        char *k = *arena + off;
        memcpy(k, key, klen); k[klen] = 0; off += klen + 1;
        int32_t id = (int32_t)json_integer_value(val);
        ZT_TRY(zt_strmap_put(&b->vocab, k, klen, id, L->st));
        b->id2tok[id] = k;
    }
    const char *unk = get_str(m, "unk_token");
    b->unk = -1;
    if (wp) {                            /* HF fails only when the unk token is needed: so does ztrain */
        if (!unk) return bad(L, "model WordPiece: 'unk_token' must be a string");
        b->unk = zt_strmap_get(&b->vocab, unk, strlen(unk));
        b->serial = atomic_fetch_add(&tok_serial, 1);
        return ZT_OK;
    }
    if (unk && (b->unk = zt_strmap_get(&b->vocab, unk, strlen(unk))) < 0)
        return bad(L, "model: unk_token '%s' is not in the vocabulary", unk);
    for (int i = 0; i < 256; ++i) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", i);
        b->bytetok[i] = b->byte_fallback ? zt_strmap_get(&b->vocab, t, 6) : -1;
    }
    json_t *merges = json_object_get(m, "merges");
    if (!json_is_array(merges)) return bad(L, "model: 'merges' must be a list");
    uint32_t rank = 0;
    char buf[1024];
    for (size_t i = 0; i < json_array_size(merges); ++i) {
        json_t *e = json_array_get(merges, i);
        const char *a, *c; size_t al, cl;
        char *tmp = NULL;
        if (json_is_string(e)) {
            const char *s = json_string_value(e);
            if (!strncmp(s, "#version", 8)) continue;
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                snprintf(buf, sizeof buf, "%zu", i + 1);
                return bad(L, "model: merge %s ('%s') is not two tokens separated by one space", buf, s);
            }
            a = s; al = (size_t)(sp - s); c = sp + 1; cl = strlen(c);
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0)); al = json_string_length(json_array_get(e, 0));
            c = json_string_value(json_array_get(e, 1)); cl = json_string_length(json_array_get(e, 1));
        } else {
            snprintf(buf, sizeof buf, "%zu", i + 1);
            return bad(L, "model: merge %s is neither \"a b\" nor [\"a\", \"b\"]", buf);
        }
        int32_t ia = zt_strmap_get(&b->vocab, a, al), ic = zt_strmap_get(&b->vocab, c, cl);
        if (ia < 0 || ic < 0) {
            snprintf(buf, sizeof buf, "%.*s", (int)(ia < 0 ? al : cl), ia < 0 ? a : c);
            return bad(L, "model: merge token '%s' is not in the vocabulary", buf);
        }
        char sbuf[512];
        tmp = al + cl <= sizeof sbuf ? sbuf : malloc(al + cl);
        if (!tmp) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
        memcpy(tmp, a, al); memcpy(tmp + al, c, cl);
        int32_t inew = zt_strmap_get(&b->vocab, tmp, al + cl);
        if (inew < 0) snprintf(buf, sizeof buf, "%.*s", (int)(al + cl), tmp);
        if (tmp != sbuf) free(tmp);
        if (inew < 0) return bad(L, "model: merged token '%s' is not in the vocabulary", buf);
        ZT_TRY(zt_bpe_merge_put(b, ia, ic, rank++, inew, L->st));
    }
    b->serial = atomic_fetch_add(&tok_serial, 1);
    return ZT_OK;
}

/* ------------------------------------------------------------ post-processor */
static int load_post(ld *L, json_t *o, zt_tokenizer *t) {
    const char *type = get_str(o, "type");
    if (!type) return bad(L, "post_processor without a 'type'");
    if (!strcmp(type, "ByteLevel")) return load_bytelevel(L, o, "post_processor ByteLevel", NULL, NULL);   /* offsets only */
    if (!strcmp(type, "Sequence")) {
        json_t *a = json_object_get(o, "processors");
        if (!json_is_array(a)) return bad(L, "post_processor Sequence: 'processors' must be a list");
        for (size_t i = 0; i < json_array_size(a); ++i) ZT_TRY(load_post(L, json_array_get(a, i), t));
        return ZT_OK;
    }
    if (strcmp(type, "TemplateProcessing")) return unsup(L, "post_processor", type);
    if (t->has_tmpl) return unsup(L, "post_processor", "two TemplateProcessing in one Sequence");
    json_t *single = json_object_get(o, "single"), *sp = json_object_get(o, "special_tokens");
    if (!json_is_array(single) || !json_is_object(sp) || !json_is_array(json_object_get(o, "pair")))
        return bad(L, "post_processor TemplateProcessing needs 'single' and 'pair' (lists) and 'special_tokens'");
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); ++i) {
        json_t *e = json_array_get(single, i), *x;
        if ((x = json_object_get(e, "Sequence"))) {
            const char *id = get_str(x, "id");
            if (!id || strcmp(id, "A") || seen_a)
                return unsup(L, "TemplateProcessing single piece", id ? id : "(no id)");
            seen_a = 1;
        } else if ((x = json_object_get(e, "SpecialToken"))) {
            const char *id = get_str(x, "id");
            json_t *def = id ? json_object_get(sp, id) : NULL, *ids = def ? json_object_get(def, "ids") : NULL;
            if (!json_is_array(ids)) return bad(L, "TemplateProcessing: special token '%s' is not defined", id ? id : "?");
            for (size_t k = 0; k < json_array_size(ids); ++k) {
                json_t *v = json_array_get(ids, k);
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
                    return bad(L, "TemplateProcessing: special token '%s' has a bad id", id);
                int32_t **arr = seen_a ? &t->tmpl_post : &t->tmpl_pre;
                int *n = seen_a ? &t->ntmpl_post : &t->ntmpl_pre;
                int32_t *p = realloc(*arr, ((size_t)*n + 1) * sizeof *p);
                if (!p) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
                *arr = p; p[(*n)++] = (int32_t)json_integer_value(v);
            }
        } else return bad(L, "TemplateProcessing: a 'single' piece is neither Sequence nor SpecialToken");
    }
    if (!seen_a) return unsup(L, "TemplateProcessing single template", "without $A");
    t->has_tmpl = 1;
    return ZT_OK;
}

/* ------------------------------------------------------------ added tokens */
static int addset_build(zt_tokenizer *t, zt_addset *s, int normalized) {
    for (int i = 0; i < t->nadded; ++i) {
        if (t->added[i].normalized != normalized) continue;
        const char *c = normalized ? t->norm_content[i] : t->added[i].content;
        size_t n = normalized ? t->norm_len[i] : t->added[i].len;
        if (n == 0) continue;
        unsigned f = (unsigned char)c[0];
        int32_t *p = realloc(s->idx[f], ((size_t)s->n[f] + 1) * sizeof *p);
        if (!p) return ZT_ENOMEM;
        s->idx[f] = p;
        /* keep longest first (stable for equal lengths) */
        int k = s->n[f]++;
        while (k > 0) {
            int j = p[k - 1];
            size_t lj = normalized ? t->norm_len[j] : t->added[j].len;
            if (lj >= n) break;
            p[k] = p[k - 1]; --k;
        }
        p[k] = i;
        s->total++;
    }
    return ZT_OK;
}

/* The ids of added tokens are HF's (tokenizers' TokenizerVisitor + AddedVocabulary::add_tokens), not the 'id'
 * written beside them (HF only warns when the two differ): a content already added keeps its id (the later
 * entry's flags replace the earlier ones; special is a set of contents, so it only grows); a content in the
 * model vocabulary takes the vocabulary's id; anything else takes the next id (the number of vocabulary
 * entries, or one past the largest added id once that is past them).  Empty contents are ignored. */
static int load_added(ld *L, json_t *a, zt_tokenizer *t) {
    if (!a || json_is_null(a)) return ZT_OK;
    if (!json_is_array(a)) return bad(L, "'added_tokens' must be a list");
    t->added = calloc(json_array_size(a) + 1, sizeof *t->added);
    if (!t->added) return zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory");
    zt_strmap seen = {0};                /* content -> index into added[] */
    /* the model's vocabulary size: Unigram counts its list (a piece listed twice too), the others their map */
    int64_t maxid = -1, nvocab = t->bpe.model == ZT_MODEL_UNIGRAM ? (int64_t)t->bpe.nid : (int64_t)t->bpe.vocab.n;
    int rc = ZT_OK;
    for (size_t i = 0; i < json_array_size(a) && rc == ZT_OK; ++i) {
        json_t *e = json_array_get(a, i), *id = json_object_get(e, "id"), *c = json_object_get(e, "content");
        /* (the id written is checked, not used: HF's ids are computed, see above) */
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > UINT32_MAX ||
            !json_is_string(c)) {
            rc = bad(L, "added_tokens: entry needs an 'id' (an integer from 0 to 4294967295) and a 'content'");
            break;
        }
        zt_added y = {0};
        int sw = 0;
        if ((y.special = field_bool(L, e, "special", 0, B_REQ, "added_tokens")) < 0 ||
            (y.lstrip = field_bool(L, e, "lstrip", 0, B_REQ, "added_tokens")) < 0 ||
            (y.rstrip = field_bool(L, e, "rstrip", 0, B_REQ, "added_tokens")) < 0 ||
            (y.normalized = field_bool(L, e, "normalized", 1, B_REQ, "added_tokens")) < 0 ||
            (sw = field_bool(L, e, "single_word", 0, B_REQ, "added_tokens")) < 0) {
            rc = L->st->code;
            break;
        }
        if (sw) { rc = unsup(L, "added token setting single_word=true on", json_string_value(c)); break; }
        size_t len = json_string_length(c);
        if (len == 0) continue;
        int32_t k = zt_strmap_get(&seen, json_string_value(c), len);
        if (k >= 0) {                    /* the same content again: same id, the new flags */
            zt_added *x = &t->added[k];
            x->special |= y.special;
            x->lstrip = y.lstrip; x->rstrip = y.rstrip; x->normalized = y.normalized;
            continue;
        }
        int64_t nid = zt_strmap_get(&t->bpe.vocab, json_string_value(c), len);
        if (nid < 0) nid = maxid < 0 ? nvocab : maxid >= nvocab || nvocab == 0 ? maxid + 1 : nvocab;
        if (nid > INT32_MAX - 1) { rc = bad(L, "added_tokens: too many tokens"); break; }
        if (nid > maxid) maxid = nid;
        zt_added *x = &t->added[t->nadded];
        *x = y;
        x->len = len;
        x->id = (int32_t)nid;
        x->content = malloc(len + 1);
        if (!x->content) { rc = zt_fail(L->st, ZT_ENOMEM, "tokenizer: out of memory"); break; }
        memcpy(x->content, json_string_value(c), len + 1);
        rc = zt_strmap_put(&seen, x->content, len, t->nadded, L->st);
        t->nadded++;
    }
    zt_strmap_free(&seen);
    return rc;
}

/* ------------------------------------------------------------ tokenizer_config.json beside the file */
static int config_token(zt_tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    const char *s = json_is_string(v) ? json_string_value(v) : json_is_object(v) ? get_str(v, "content") : NULL;
    return s ? zt_tok_token_id(t, s) : -1;
}

/* absent: nothing to read; present but not a JSON object: refused, naming the file and the JSON error (a
 * silent skip would leave BOS/EOS unknown and blame them later) */
static int load_config(zt_tokenizer *t, const char *dir, zt_status *st) {
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    struct stat sb;
    if (stat(p, &sb) != 0 && errno == ENOENT) return ZT_OK;
    json_error_t je;
    char why[200];
    json_t *cfg = zt_json_load_file_py(p, 0, &je);
    if (!cfg)
        return zt_fail(st, ZT_EDATA, "%s: not valid JSON (line %d, column %d: %s)", p, je.line, je.column,
                       zt_json_error_text(je.text, why, sizeof why));
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return zt_fail(st, ZT_EDATA, "%s: the top level is not a JSON object", p);
    }
    int b = config_token(t, cfg, "bos_token"), e = config_token(t, cfg, "eos_token");
    if (b >= 0) t->bos = b;
    if (e >= 0) t->eos = e;
    json_decref(cfg);
    return ZT_OK;
}

/* ------------------------------------------------------------ load */
int zt_tok_load(const char *path, zt_tokenizer **out, zt_status *st) {
    *out = NULL;
    zt_bytelevel_init();
    zt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
    t->bos = t->eos = -1;
    struct stat sb;
    char dir[1024];
    if (stat(path, &sb) != 0) { free(t); return zt_fail(st, ZT_EIO, "%s: %s", path, strerror(errno)); }
    if (S_ISDIR(sb.st_mode)) {
        snprintf(t->path, sizeof t->path, "%s/tokenizer.json", path);
        snprintf(dir, sizeof dir, "%s", path);
    } else {
        snprintf(t->path, sizeof t->path, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0; else snprintf(dir, sizeof dir, ".");
    }
    FILE *fp = fopen(t->path, "rb");
    if (!fp) { int e = errno; zt_fail(st, ZT_EIO, "%s: %s", t->path, strerror(e)); free(t); return ZT_EIO; }
    json_error_t je;
    char why[200];
    fclose(fp);
    json_t *root = zt_json_load_file_py(t->path, JSON_ALLOW_NUL, &je);
    if (!root) {
        zt_fail(st, ZT_EDATA, "%s: not valid JSON (line %d, column %d: %s)", t->path, je.line, je.column,
                zt_json_error_text(je.text, why, sizeof why));
        free(t);
        return ZT_EDATA;
    }
    ld L = {t->path, st};
    int rc = ZT_OK;
    json_t *v;
    if (!json_is_object(root)) { rc = bad(&L, "the top level is not a JSON object"); goto done; }
    /* "truncation" and "padding" are accepted and have no effect: prep and SFT encode whole documents and
     * pack them, they neither cut nor pad (docs/tokenizers.md); HF's encode applies them, so the comparisons
     * with HF switch them off (no_truncation, no_padding) */
    if ((v = json_object_get(root, "truncation")) && !json_is_null(v) && !json_is_object(v)) { rc = bad(&L, "'truncation' must be null or an object"); goto done; }
    if ((v = json_object_get(root, "padding")) && !json_is_null(v) && !json_is_object(v)) { rc = bad(&L, "'padding' must be null or an object"); goto done; }
    if (!json_is_object(v = json_object_get(root, "model"))) { rc = bad(&L, "no 'model' object"); goto done; }
    if ((rc = load_bpe(&L, v, &t->bpe))) goto done;
    if ((v = json_object_get(root, "normalizer")) && !json_is_null(v)) {
        if (!(t->norm = calloc(1, sizeof *t->norm))) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); goto done; }
        if ((rc = load_norm(&L, v, t->norm))) goto done;
    }
    if ((v = json_object_get(root, "pre_tokenizer")) && !json_is_null(v)) {
        if (!(t->pre = calloc(1, sizeof *t->pre))) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); goto done; }
        if ((rc = load_pre(&L, v, t->pre))) goto done;
    }
    if ((v = json_object_get(root, "decoder")) && !json_is_null(v)) {
        if (!(t->dec = calloc(1, sizeof *t->dec))) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); goto done; }
        if ((rc = load_dec(&L, v, t->dec))) goto done;
    }
    if ((v = json_object_get(root, "post_processor")) && !json_is_null(v) && (rc = load_post(&L, v, t))) goto done;
    if ((rc = load_added(&L, json_object_get(root, "added_tokens"), t))) goto done;
    /* vocabulary size, id -> added token, special contents, normalized contents */
    t->vocab_size = t->bpe.nid;
    for (int i = 0; i < t->nadded; ++i)
        if (t->added[i].id + 1 > t->vocab_size) t->vocab_size = t->added[i].id + 1;
    t->id2added = malloc(((size_t)t->vocab_size + 1) * sizeof *t->id2added);
    t->norm_content = calloc((size_t)t->nadded + 1, sizeof *t->norm_content);
    t->norm_len = calloc((size_t)t->nadded + 1, sizeof *t->norm_len);
    if (!t->id2added || !t->norm_content || !t->norm_len) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); goto done; }
    for (int i = 0; i < t->vocab_size; ++i) t->id2added[i] = -1;
    for (int i = 0; i < t->nadded && rc == ZT_OK; ++i) {
        zt_added *x = &t->added[i];
        if (t->id2added[x->id] >= 0) x->shared = t->added[t->id2added[x->id]].shared = 1;
        t->id2added[x->id] = i;
        if (x->special) rc = zt_strmap_put(&t->special, x->content, x->len, x->id, st);
        if (rc == ZT_OK && x->normalized) {
            zt_sbuf nb = {0};
            int o0 = 1;
            rc = t->norm ? zt_norm_apply(t->norm, x->content, x->len, &nb, &o0, st) : zt_sbuf_put(&nb, x->content, x->len, st);
            t->norm_content[i] = nb.p; t->norm_len[i] = nb.len;
        }
    }
    if (rc) goto done;
    if (addset_build(t, &t->add_raw, 0) || addset_build(t, &t->add_norm, 1)) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); goto done; }
    for (int i = 0; i < t->ntmpl_pre + t->ntmpl_post; ++i) {
        int32_t id = i < t->ntmpl_pre ? t->tmpl_pre[i] : t->tmpl_post[i - t->ntmpl_pre];
        if (id >= t->vocab_size) { rc = bad(&L, "TemplateProcessing: special token id beyond the vocabulary"); goto done; }
    }
    if (t->ntmpl_pre == 1) t->bos = t->tmpl_pre[0];
    if (t->ntmpl_post == 1) t->eos = t->tmpl_post[0];
    rc = load_config(t, dir, st);
done:
    json_decref(root);
    if (rc) { zt_tok_free(t); return rc; }
    *out = t;
    return ZT_OK;
}

void zt_tok_free(zt_tokenizer *t) {
    if (!t) return;
    zt_bpe_free(&t->bpe);
    if (t->norm) { zt_norm_free(t->norm); free(t->norm); }
    if (t->pre) { zt_pretok_free(t->pre); free(t->pre); }
    if (t->dec) { zt_decoder_free(t->dec); free(t->dec); }
    for (int i = 0; i < t->nadded; ++i) {
        free(t->added[i].content);
        if (t->norm_content) free(t->norm_content[i]);
    }
    free(t->added); free(t->norm_content); free(t->norm_len); free(t->id2added);
    for (int k = 0; k < 256; ++k) { free(t->add_raw.idx[k]); free(t->add_norm.idx[k]); }
    zt_strmap_free(&t->special);
    free(t->tmpl_pre); free(t->tmpl_post);
    free(t);
}

/* ------------------------------------------------------------ encode */
static size_t ws_left_end(const char *s, size_t n) {
    /* start of the run of White_Space characters that ends s[n] */
    size_t i = n;
    while (i > 0) {
        size_t q = i - 1;
        while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) --q;
        uint32_t cp; zt_utf8_dec(s + q, &cp);
        if (!zt_is_white_space(cp)) break;
        i = q;
    }
    return i;
}
static size_t ws_right_len(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp; int l = zt_utf8_dec(s + i, &cp);
        if (!zt_is_white_space(cp)) break;
        i += (size_t)l;
    }
    return i;
}

/* Split s[n] on the added tokens of set (HF AddedVocabulary::find_matches, leftmost-longest). */
static int split_added(const zt_tokenizer *t, const zt_addset *set, int normalized, const char *s, size_t n,
                       int orig0, zt_pieces *out, zt_status *st) {
    size_t start_off = 0;
    if (set->total)
        for (size_t i = 0; i < n;) {
            unsigned f = (unsigned char)s[i];
            int hit = -1;
            for (int k = 0; k < set->n[f]; ++k) {
                int j = set->idx[f][k];
                const char *c = normalized ? t->norm_content[j] : t->added[j].content;
                size_t l = normalized ? t->norm_len[j] : t->added[j].len;
                if (l <= n - i && memcmp(s + i, c, l) == 0) { hit = j; break; }
            }
            if (hit < 0) { ++i; continue; }
            const zt_added *x = &t->added[hit];
            size_t a = i, b = i + (normalized ? t->norm_len[hit] : x->len);
            if (x->lstrip) { size_t na = ws_left_end(s, a); a = na > start_off ? na : start_off; }
            if (x->rstrip) b += ws_right_len(s + b, n - b);
            if (start_off < a) ZT_TRY(zt_pieces_add(out, s + start_off, a - start_off, -1, orig0 && start_off == 0, st));
            ZT_TRY(zt_pieces_add(out, s + a, b - a, x->id, orig0 && a == 0, st));
            start_off = b;
            i += normalized ? t->norm_len[hit] : x->len;  /* the matcher resumes after the match itself */
            if (i < b) i = b;
        }
    if (start_off < n) ZT_TRY(zt_pieces_add(out, s + start_off, n - start_off, -1, orig0 && start_off == 0, st));
    return ZT_OK;
}

/* per-thread encode buffers, reused from call to call */
typedef struct enc_ws { zt_pieces a, b, c; zt_sbuf nb; zt_tokws tw; } enc_ws;
static pthread_key_t ws_key;
static void ws_free(void *p) {
    enc_ws *w = p;
    if (!w) return;
    zt_pieces_free(&w->a); zt_pieces_free(&w->b); zt_pieces_free(&w->c);
    zt_sbuf_free(&w->nb);
    zt_tokws_free(&w->tw);
    free(w);
}
static void ws_key_make(void) { pthread_key_create(&ws_key, ws_free); }
static enc_ws *ws_get(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ws_key_make);
    enc_ws *w = pthread_getspecific(ws_key);
    if (!w && (w = calloc(1, sizeof *w))) pthread_setspecific(ws_key, w);
    return w;
}

/* A cut: an added token matched on the raw text (not normalized), without lstrip and not starting with white
 * space (tokenizer.h: zt_tok_encode_cuts). */
static int is_cut(const zt_added *x) {
    if (x->normalized || x->lstrip || x->shared || x->len == 0) return 0;
    uint32_t cp;
    zt_utf8_dec(x->content, &cp);
    return !zt_is_white_space(cp);
}

static _Thread_local uint64_t tok_work;
uint64_t zt_tok_work(void) { return tok_work; }

static int encode(const zt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                  zt_tok_cut **cuts, size_t *ncuts, zt_status *st) {
    *ids = NULL; *n = 0;
    tok_work += len;
    size_t cutcap = 0, ncut = 0, added_seen = 0;
    size_t *cut_ord = NULL;               /* ordinal of each cut among the added pieces of b */
    if (cuts) { *cuts = NULL; *ncuts = 0; }
    size_t bad_at = zt_utf8_valid(text, len);
    if (bad_at != len)
        return zt_fail(st, ZT_EDATA, "tokenizer: the text is not valid UTF-8 (byte %zu)", bad_at);
    enc_ws *w = ws_get();
    if (!w) return zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory");
    zt_pieces *a = &w->a, *b = &w->b, *c = &w->c;
    zt_sbuf *nb = &w->nb;
    zt_pieces_reset(a); zt_pieces_reset(b); zt_pieces_reset(c);
    w->tw.depth = 0;
    size_t cap = 0;
    int rc = ZT_OK;
    if (add_special)
        for (int i = 0; i < t->ntmpl_pre && rc == ZT_OK; ++i) rc = zt_ids_push(ids, n, &cap, t->tmpl_pre[i], st);
    /* 1. added tokens matched on the raw text; 2. normalize the rest, then match the normalized ones */
    if (rc == ZT_OK) rc = split_added(t, &t->add_raw, 0, text, len, 1, a, st);
    for (size_t i = 0; i < a->n && rc == ZT_OK; ++i) {
        zt_piece *p = &a->p[i];
        if (p->added >= 0) {
            /* the raw pieces tile the text: p->off is the byte offset in text */
            if (cuts && is_cut(&t->added[t->id2added[p->added]])) {
                if (ncut == cutcap) {
                    size_t c = cutcap ? 2 * cutcap : 16;
                    zt_tok_cut *q = realloc(*cuts, c * sizeof *q);
                    size_t *o = realloc(cut_ord, c * sizeof *o);
                    if (q) *cuts = q;
                    if (o) cut_ord = o;
                    if (!q || !o) { rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); break; }
                    cutcap = c;
                }
                (*cuts)[ncut].off = p->off;
                (*cuts)[ncut].end = p->off + p->len;
                cut_ord[ncut++] = added_seen;
            }
            added_seen++;
            rc = zt_pieces_add(b, a->buf.p + p->off, p->len, p->added, p->orig0, st);
            continue;
        }
        const char *s = a->buf.p + p->off;
        size_t sn = p->len;
        int o0 = p->orig0;
        if (t->norm) {
            rc = zt_norm_apply(t->norm, s, sn, nb, &o0, st);
            if (rc) break;
            s = nb->p ? nb->p : ""; sn = nb->len;
        }
        size_t before = b->n;
        rc = split_added(t, &t->add_norm, 1, s, sn, o0, b, st);
        for (size_t k = before; k < b->n; ++k) added_seen += b->p[k].added >= 0;
    }
    /* 3. pre-tokenize; 4. the model */
    const zt_pieces *fin = b;
    if (rc == ZT_OK && t->pre) { rc = zt_pretok_apply(t->pre, b, c, &w->tw, st); fin = c; }
    size_t ord = 0, next = 0;             /* added pieces pass the pre-tokenizer in order */
    for (size_t i = 0; i < fin->n && rc == ZT_OK; ++i) {
        const zt_piece *p = &fin->p[i];
        if (p->added >= 0) {
            if (next < ncut && cut_ord[next] == ord) (*cuts)[next++].k = *n;
            ord++;
            rc = zt_ids_push(ids, n, &cap, p->added, st);
        } else rc = zt_bpe_tokenize(&t->bpe, fin->buf.p + p->off, p->len, ids, n, &cap, st);
    }
    if (rc == ZT_OK && next != ncut)
        rc = zt_fail(st, ZT_EINTERNAL, "tokenizer: %zu of %zu added-token cuts lost by the pre-tokenizer", ncut - next, ncut);
    if (add_special)
        for (int i = 0; i < t->ntmpl_post && rc == ZT_OK; ++i) rc = zt_ids_push(ids, n, &cap, t->tmpl_post[i], st);
    if (rc == ZT_OK && !*ids) { *ids = malloc(sizeof **ids); if (!*ids) rc = zt_fail(st, ZT_ENOMEM, "tokenizer: out of memory"); }
    if (rc) { free(*ids); *ids = NULL; *n = 0; }
    free(cut_ord);
    if (cuts) {
        if (rc) { free(*cuts); *cuts = NULL; ncut = 0; }
        *ncuts = ncut;
    }
    /* a huge document should not keep its buffers for the rest of the thread's life */
    if (w->a.buf.cap > ((size_t)64 << 20) || w->c.buf.cap > ((size_t)64 << 20)) {
        zt_pieces_free(&w->a); zt_pieces_free(&w->b); zt_pieces_free(&w->c);
        zt_sbuf_free(&w->nb); zt_tokws_free(&w->tw);
    }
    return rc;
}

int zt_tok_encode(const zt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                  zt_status *st) {
    return encode(t, text, len, add_special, ids, n, NULL, NULL, st);
}

int zt_tok_encode_cuts(const zt_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                       zt_tok_cut **cuts, size_t *ncuts, zt_status *st) {
    return encode(t, text, len, 0, ids, n, cuts, ncuts, st);
}

/* ------------------------------------------------------------ decode */
int zt_tok_decode(const zt_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
                  zt_status *st) {
    *text = NULL; if (len) *len = 0;
    zt_pieces toks = {0};
    int rc = ZT_OK;
    for (size_t i = 0; i < n && rc == ZT_OK; ++i) {
        const char *s = zt_tok_token_str(t, ids[i]);
        if (!s) continue;                     /* unknown ids are dropped, as HF does */
        size_t sl = strlen(s);
        if (t->id2added[ids[i]] >= 0) {
            int a = t->id2added[ids[i]];
            sl = t->added[a].normalized ? t->norm_len[a] : t->added[a].len;
        }
        if (skip_special && zt_strmap_get(&t->special, s, sl) >= 0) continue;
        rc = zt_pieces_add(&toks, s, sl, -1, 0, st);
    }
    if (rc == ZT_OK && t->dec) rc = zt_decoder_apply(t->dec, &toks, st);
    zt_sbuf out = {0};
    for (size_t i = 0; i < toks.n && rc == ZT_OK; ++i) {
        if (!t->dec && i > 0) rc = zt_sbuf_put(&out, " ", 1, st);
        if (rc == ZT_OK) rc = zt_sbuf_put(&out, toks.buf.p + toks.p[i].off, toks.p[i].len, st);
    }
    if (rc == ZT_OK) rc = zt_sbuf_put(&out, "", 0, st);
    zt_pieces_free(&toks);
    if (rc) { zt_sbuf_free(&out); return rc; }
    *text = out.p;
    if (len) *len = out.len;
    return ZT_OK;
}

/* ------------------------------------------------------------ lookups */
int zt_tok_vocab_size(const zt_tokenizer *t) { return t->vocab_size; }
int zt_tok_bos_id(const zt_tokenizer *t) { return t->bos; }
int zt_tok_eos_id(const zt_tokenizer *t) { return t->eos; }

size_t zt_tok_added_at(const zt_tokenizer *t, const char *s, size_t n) {
    if (n == 0) return 0;
    const zt_addset *sets[2] = {&t->add_raw, &t->add_norm};
    size_t best = 0;
    for (int k = 0; k < 2; ++k) {
        unsigned char b = (unsigned char)s[0];
        for (int i = 0; i < sets[k]->n[b]; ++i) {
            const zt_added *a = &t->added[sets[k]->idx[b][i]];
            if (a->len <= n && a->len > best && memcmp(a->content, s, a->len) == 0) best = a->len;
        }
    }
    return best;
}

int zt_tok_token_id(const zt_tokenizer *t, const char *token) {
    size_t n = strlen(token);
    for (int i = 0; i < t->nadded; ++i)
        if (t->added[i].len == n && memcmp(t->added[i].content, token, n) == 0) return t->added[i].id;
    return zt_strmap_get(&t->bpe.vocab, token, n);
}

const char *zt_tok_token_str(const zt_tokenizer *t, int id) {
    if (id < 0 || id >= t->vocab_size) return NULL;
    /* added tokens: their normalized form when they are matched after normalization (as HF) */
    if (t->id2added[id] >= 0) {
        int a = t->id2added[id];
        return t->added[a].normalized ? t->norm_content[a] : t->added[a].content;
    }
    return id < t->bpe.nid ? t->bpe.id2tok[id] : NULL;
}
