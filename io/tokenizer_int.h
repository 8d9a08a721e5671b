/*
 * tokenizer_int.h -- internals shared by io/tokenizer*.c (not installed).
 *
 *   tokenizer.c       tokenizer.json loading, added tokens, encode/decode driver, API
 *   tokenizer_text.c  UTF-8, regex (PCRE2), normalizers, pre-tokenizers, decoders
 *   tokenizer_bpe.c   string/pair hash tables, the BPE model, the per-thread cache
 */
#ifndef ZT_IO_TOKENIZER_INT_H
#define ZT_IO_TOKENIZER_INT_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>
#include "internal.h"
#include "tokenizer.h"

/* ------------------------------------------------------------ growable byte buffer */
typedef struct zt_sbuf { char *p; size_t len, cap; } zt_sbuf;
int zt_sbuf_put(zt_sbuf *b, const void *s, size_t n, zt_status *st);
void zt_sbuf_free(zt_sbuf *b);

/* A list of text pieces (offset/length into one buffer).  added >= 0: the piece is that added token and
 * later stages pass it through.  orig0: the piece starts at offset 0 of the original text (Metaspace
 * prepend_scheme "first"). */
typedef struct zt_piece { size_t off, len; int32_t added; int orig0; } zt_piece;
typedef struct zt_pieces { zt_piece *p; size_t n, cap; zt_sbuf buf; } zt_pieces;
int zt_pieces_add(zt_pieces *l, const char *s, size_t n, int32_t added, int orig0, zt_status *st);
void zt_pieces_reset(zt_pieces *l);
void zt_pieces_free(zt_pieces *l);

/* ------------------------------------------------------------ UTF-8 */
/* Length of the valid UTF-8 prefix of s[n] (== n when all valid). */
size_t zt_utf8_valid(const char *s, size_t n);
/* Decode one code point at s (valid UTF-8 assumed); returns its byte length. */
int zt_utf8_dec(const char *s, uint32_t *cp);
int zt_utf8_enc(uint32_t cp, char *out);
/* Append s[n] to b with Rust String::from_utf8_lossy semantics (U+FFFD per maximal invalid subpart). */
int zt_utf8_lossy(zt_sbuf *b, const char *s, size_t n, zt_status *st);
int zt_is_white_space(uint32_t cp); /* Unicode White_Space (Rust char::is_whitespace) */

/* ------------------------------------------------------------ Unicode classes (io/tokenizer_unicode.c) */
/* Oniguruma's (HF tokenizers') character classes as sorted [lo, hi] code-point ranges, generated from
 * tokenizers itself by scripts/gen_tok_unicode.py.  zt_uc_names maps a spelling to its class: kind 'p' for
 * \p{NAME} (NAME lower-cased, without ' ', '_', '-'), 'x' for [:NAME:], 'e' for the escapes \w \d \s \h. */
typedef struct zt_uc_class { const uint32_t *r; int nr; int count; } zt_uc_class;
typedef struct zt_uc_name { char kind; const char *name; int cls; } zt_uc_name;
extern const zt_uc_class zt_uc_classes[];
extern const int zt_uc_nclasses;
extern const zt_uc_name zt_uc_names[];
extern const int zt_uc_nnames;
extern const char zt_uc_source[];
int zt_uc_has(int cls, uint32_t cp);     /* cp is a member of class cls (binary search) */
int zt_uc_find(char kind, const char *name); /* the class of a spelling, -1 if none */

/* ------------------------------------------------------------ patterns (Split, Replace) */
/* src/what: the pattern as written and its owner ("file: pre_tokenizer Split"), for the errors of a match */
typedef struct zt_regex { pcre2_code *re; int literal; char *lit; size_t litlen; char *src, *what; } zt_regex;
/* pattern: the {"String": s} or {"Regex": r} value; what names the owner in errors */
int zt_regex_compile(zt_regex *r, const char *s, int is_regex, const char *what, zt_status *st);
void zt_regex_free(zt_regex *r);
/* All matches in s[n], left to right, non-overlapping (Oniguruma find_iter semantics): mm->n (start, end)
 * pairs in mm->m (2 * mm->n entries; the buffer is the caller's, grown as needed and reused). */
typedef struct zt_matches { size_t *m; size_t n, cap; } zt_matches;
/* A match that backtracks without end (a pattern like (\w+\s?)+$) stops at a step limit that grows with the
 * text (ZT_RX_STEPS + ZT_RX_STEPS_PER_BYTE per byte left, as Oniguruma's retry-limit-in-match stops it in
 * HF tokenizers) and fails with ZT_EDATA naming the pattern; so does one past the heap/depth limits. */
#define ZT_RX_STEPS 10000000u
#define ZT_RX_STEPS_PER_BYTE 64u
#define ZT_RX_HEAP_KIB (1u << 20)             /* 1 GiB of backtracking memory (interpreter only) */
int zt_regex_find(const zt_regex *r, const char *s, size_t n, zt_matches *mm, zt_status *st);

/* ------------------------------------------------------------ normalizers / pre-tokenizers / decoders */
enum { ZT_NORM_SEQ, ZT_NORM_NFC, ZT_NORM_NFKC, ZT_NORM_NFD, ZT_NORM_NFKD, ZT_NORM_PREPEND, ZT_NORM_REPLACE };
typedef struct zt_norm {
    int type;
    struct zt_norm *sub; int nsub;      /* Sequence */
    char *str; size_t strlen;            /* Prepend: prefix; Replace: content */
    zt_regex pat;                        /* Replace */
} zt_norm;

enum { ZT_SPLIT_REMOVED, ZT_SPLIT_ISOLATED, ZT_SPLIT_PREV, ZT_SPLIT_NEXT, ZT_SPLIT_CONTIG };
enum { ZT_PRE_SEQ, ZT_PRE_BYTELEVEL, ZT_PRE_SPLIT, ZT_PRE_METASPACE, ZT_PRE_PRED };
enum { ZT_PREPEND_ALWAYS, ZT_PREPEND_FIRST, ZT_PREPEND_NEVER };
typedef struct zt_pretok {
    int type;
    struct zt_pretok *sub; int nsub;     /* Sequence */
    int add_prefix_space, use_regex;     /* ByteLevel */
    zt_regex pat; int behavior, invert;  /* Split (ByteLevel use_regex: the GPT-2 pattern); PRED: behavior */
    int cls;                             /* PRED: split on each character of this zt_uc_classes entry */
    char repl[8]; size_t repllen; uint32_t replcp; int prepend, split; /* Metaspace */
} zt_pretok;

enum { ZT_DEC_SEQ, ZT_DEC_BYTELEVEL, ZT_DEC_METASPACE, ZT_DEC_BYTEFALLBACK, ZT_DEC_FUSE, ZT_DEC_STRIP,
       ZT_DEC_REPLACE, ZT_DEC_WORDPIECE };
typedef struct zt_decoder {
    int type;
    struct zt_decoder *sub; int nsub;    /* Sequence */
    uint32_t cp; int start, stop;        /* Strip: content char and counts; Metaspace: cp = replacement */
    int prepend;                         /* Metaspace */
    zt_regex pat; char *str; size_t strlen; /* Replace; WordPiece: str = prefix, start = cleanup */
} zt_decoder;

/* The GPT-2 pattern of the ByteLevel pre-tokenizer (use_regex true). */
extern const char zt_gpt2_pattern[];

int zt_norm_apply(const zt_norm *nm, const char *s, size_t n, zt_sbuf *out, int *orig0, zt_status *st);
void zt_norm_free(zt_norm *nm);
/* Scratch space of the pre-tokenizers, kept per thread between calls (no allocation per document). */
#define ZT_SEQ_DEPTH 4
typedef struct zt_tokws {
    zt_pieces lv[ZT_SEQ_DEPTH][2];       /* Sequence temporaries per nesting level */
    zt_pieces parts;                     /* ByteLevel: the regex split before the byte mapping */
    zt_sbuf scratch, tmp;
    zt_matches mm;
    size_t (*seg)[3]; size_t segcap;     /* split segments */
    int depth;
} zt_tokws;
void zt_tokws_free(zt_tokws *w);
/* Pre-tokenize every non-added piece of in into out (added pieces pass through). */
int zt_pretok_apply(const zt_pretok *pt, const zt_pieces *in, zt_pieces *out, zt_tokws *ws, zt_status *st);
void zt_pretok_free(zt_pretok *pt);
/* Decode: toks (a list of pieces) -> out string (appended). */
int zt_decoder_apply(const zt_decoder *d, zt_pieces *toks, zt_status *st);
void zt_decoder_free(zt_decoder *d);
/* GPT-2 byte <-> unicode tables */
extern uint32_t zt_byte2cp[256];
int zt_cp2byte(uint32_t cp);          /* -1 when cp is not one of the 256 */
void zt_bytelevel_init(void);

/* ------------------------------------------------------------ hash tables, BPE */
typedef struct zt_strmap { uint32_t *slot; size_t cap, n; const char **key; uint32_t *klen; int32_t *val; } zt_strmap;
int zt_strmap_put(zt_strmap *m, const char *k, size_t kn, int32_t v, zt_status *st); /* k not copied */
int32_t zt_strmap_get(const zt_strmap *m, const char *k, size_t kn);                  /* -1 if none */
void zt_strmap_free(zt_strmap *m);

/* model vocabulary ids must stay below 2 x its entries + this (tables are indexed by id) */
#define ZT_TOK_ID_SLACK (1 << 20)
typedef struct zt_bpe {
    zt_strmap vocab;                     /* token -> id */
    char **id2tok; int nid;              /* model id -> token (NULL for holes), strings in arena */
    char *arena;
    uint64_t *mkey; uint64_t *mval; size_t mcap; /* merges: (a<<32|b) -> (rank<<32 | new_id) */
    int ignore_merges, byte_fallback, fuse_unk;
    int32_t unk;                         /* -1: none */
    int32_t bytetok[256];                /* <0xNN> ids when byte_fallback, else -1 */
    uint64_t serial;                     /* identifies this model in the per-thread caches */
    int model;                           /* ZT_MODEL_*: BPE, or Unigram / WordPiece (same vocab tables) */
    double *score, min_score; size_t maxlen; /* Unigram: score per id, their minimum, longest piece (bytes) */
    char *wp_prefix; size_t wp_prefixlen; int wp_maxchars; /* WordPiece */
} zt_bpe;
enum { ZT_MODEL_BPE, ZT_MODEL_UNIGRAM, ZT_MODEL_WORDPIECE };
int zt_bpe_merge_put(zt_bpe *b, int32_t a, int32_t c, uint32_t rank, int32_t new_id, zt_status *st);
/* Tokenize one pre-token s[n]; append ids to *ids (growable: *n, *cap). */
int zt_bpe_tokenize(const zt_bpe *b, const char *s, size_t n, int32_t **ids, size_t *nids, size_t *cap,
                    zt_status *st);
void zt_bpe_free(zt_bpe *b);
int zt_ids_push(int32_t **ids, size_t *n, size_t *cap, int32_t v, zt_status *st);

/* ------------------------------------------------------------ the tokenizer */
/* shared: another added token has the same id (only a vocabulary listing one id twice can do that) */
typedef struct zt_added { char *content; size_t len; int32_t id; int special, lstrip, rstrip, normalized, shared; } zt_added;

/* added tokens by first byte, longest first: one set matched on the raw text, one on normalized pieces */
typedef struct zt_addset { int32_t *idx[256]; int n[256]; int total; } zt_addset;

struct zt_tokenizer {
    char path[1024];
    zt_bpe bpe;
    zt_norm *norm;                       /* NULL: none */
    zt_pretok *pre;                      /* NULL: none */
    zt_decoder *dec;                     /* NULL: none (tokens joined with ' ') */
    zt_added *added; int nadded;
    zt_addset add_raw, add_norm;         /* indexes into added[] */
    char **norm_content; size_t *norm_len; /* normalized contents of normalized added tokens */
    int32_t *id2added;                   /* id -> index into added[], -1 (vocab_size entries) */
    zt_strmap special;                   /* contents of special added tokens */
    int32_t *tmpl_pre, *tmpl_post; int ntmpl_pre, ntmpl_post, has_tmpl; /* single template ids around $A */
    int vocab_size;
    int bos, eos;
};
#endif
