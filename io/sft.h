/*
 * sft.h -- instruction / chat data with loss masks (docs/sft.md).
 *
 * SFT window file (".sft"; detected by its magic, not its name),
 * little-endian: a 1024-byte header of 256 int32 --
 *   [0] = 20261124 (magic), [1] = 1 (version), [2] = N windows,
 *   [3] = W tokens per window (the seq_len it was packed for, + 1),
 *   [4] = bytes per token (2 = uint16, 4 = uint32), [5] = vocabulary size
 *   (0 = unknown), [6] = pad token id, [7] = examples packed,
 *   [8] = mask mode (ZT_SFT_MASK_*), [9] = flags (bit 0: --allow-split,
 *   bit 1: --truncate), [10..255] = 0 --
 * then N window records of R = 4 + W * bytes_per_token + W bytes each:
 *   uint32 count       number of targets of the window that count (the sum
 *                      of mask[1..W-1]),
 *   W tokens           uint16 or uint32,
 *   W mask bytes       1: token k is a counted target (the prediction of
 *                      token k from tokens 0..k-1 enters the loss), 0: not;
 *                      mask[0] is 0 (the first token is never a target).
 * The file size must be exactly 1024 + N * R.  Opening validates the
 * header, the size, every token (< vocab), every mask byte and every count.
 *
 * As a dataset (data.h) such a file is its N windows; files of one dataset
 * must all be SFT files with W = seq_len + 1 (a plain token file and an SFT
 * file cannot be mixed).  zt_dataset_read returns the W tokens with
 * ZT_SFT_NOTARGET set on every token whose mask byte is 0.
 */
#ifndef ZT_IO_SFT_H
#define ZT_IO_SFT_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer.h"
#include "tokens.h"

#define ZT_SFT_MAGIC 20261124
#define ZT_SFT_VERSION 1
#define ZT_SFT_NOTARGET 0x80000000u   /* flag on a token read from an SFT window */
#define ZT_SFT_FLAG_SPLIT 1
#define ZT_SFT_FLAG_TRUNCATE 2

enum { ZT_SFT_MASK_ALL = 0, ZT_SFT_MASK_ASSISTANT = 1, ZT_SFT_MASK_LAST = 2 };

/* ---------------------------------------------------------------- reading */

/* Called by zt_tokens_open for a file whose first int32 is ZT_SFT_MAGIC:
 * checks the header h (already little-endian decoded) against the file size
 * and fills f (format ZT_FMT_SFT, window, ntok = N * W). */
int zt_sft_open_header(const char *path, const int32_t *h, uint64_t size, zt_token_file *f,
                       zt_status *st);
/* Stream every record: tokens < vocab (when vocab > 0), mask bytes 0/1,
 * mask[0] = 0, count = sum of the mask.  buf: cap bytes of scratch. */
int zt_sft_validate(const zt_token_file *f, int vocab, void *buf, size_t cap, zt_status *st);
/* Tokens [start, start+n) of the concatenated windows (no mask flags),
 * each checked < vocab when vocab > 0 (zt_tokens_read of an SFT file). */
int zt_sft_read_tokens(const zt_token_file *f, uint64_t start, size_t n, int vocab, uint32_t *out,
                       zt_status *st);
/* Window w: its W tokens, ZT_SFT_NOTARGET set where the mask is 0. */
int zt_sft_read_window(const zt_token_file *f, uint64_t w, int vocab, uint32_t *tok,
                       zt_status *st);
/* Window w's count of counted targets. */
int zt_sft_window_count(const zt_token_file *f, uint64_t w, uint32_t *count, zt_status *st);

/* ---------------------------------------------------------------- writing */

/* Streaming writer: "<path>.tmp.<pid>", header completed by close, renamed
 * into place by commit, removed by free when not committed. */
typedef struct zt_sft_writer zt_sft_writer;
int zt_sft_writer_open(const char *path, int window, int elsize, int vocab, int pad_id,
                       int mask_mode, int flags, zt_sft_writer **out, zt_status *st);
/* One window: W tokens and W mask bytes (mask[0] must be 0). */
int zt_sft_writer_put(zt_sft_writer *w, const uint32_t *tok, const uint8_t *mask, zt_status *st);
int zt_sft_writer_close(zt_sft_writer *w, uint64_t examples, zt_status *st);
int zt_sft_writer_commit(zt_sft_writer *w, zt_status *st);
void zt_sft_writer_free(zt_sft_writer *w);
uint64_t zt_sft_writer_windows(const zt_sft_writer *w);

/* ---------------------------------------------------------------- chat templates */

enum { ZT_ROLE_SYSTEM = 0, ZT_ROLE_USER = 1, ZT_ROLE_ASSISTANT = 2 };
/* "system" | "user" | "assistant" -> ZT_ROLE_*, -1 otherwise. */
int zt_chat_role(const char *name);

typedef struct zt_chat_msg {
    int role;                 /* ZT_ROLE_* */
    const char *content;      /* UTF-8, len bytes */
    size_t len;
} zt_chat_msg;

/* The bytes [begin, end) of the rendering that an assistant turn trains
 * on (its content and its end-of-turn token); turn = the message index. */
typedef struct zt_chat_span {
    size_t begin, end;
    int turn;
} zt_chat_span;

typedef struct zt_chat_text {
    char *text;               /* NUL-terminated, len bytes */
    size_t len, cap;
    zt_chat_span *span;       /* in order, one per assistant message */
    int nspan, capspan;
} zt_chat_text;

enum { ZT_TMPL_LLAMA3 = 0, ZT_TMPL_CHATML, ZT_TMPL_QWEN2, ZT_TMPL_MISTRAL, ZT_TMPL_COUNT };
/* Template id of a name, -1 if unknown; the list of names for messages. */
int zt_chat_template(const char *name);
const char *zt_chat_template_name(int tmpl);
const char *zt_chat_template_list(void);
/* Special-token strings a template writes literally (NULL-terminated list):
 * the tokenizer must have each as a token. */
const char *const *zt_chat_template_tokens(int tmpl);
/* 1 when the template writes bos_token / eos_token. */
int zt_chat_template_needs_bos(int tmpl);
int zt_chat_template_needs_eos(int tmpl);
/* Render messages exactly as the family's Jinja chat template (docs/sft.md)
 * with add_generation_prompt=False.  bos / eos: the tokenizer's BOS / EOS
 * token strings (NULL when the template does not use them).  Errors (the
 * template's own raise_exception cases) are ZT_EDATA without a location:
 * the caller names the line. */
int zt_chat_render(int tmpl, const zt_chat_msg *m, int n, const char *bos, const char *eos,
                   zt_chat_text *out, zt_status *st);
void zt_chat_text_free(zt_chat_text *t);

/* ---------------------------------------------------------------- prep --sft */

/* Render messages with template tmpl (bos / eos: the tokenizer's token
 * strings, as zt_chat_render), tokenize the rendering as HF's
 * tokenizer(text, add_special_tokens=False) and mask it (mode ZT_SFT_MASK_*):
 * a token is 1 when it overlaps a trained span (transformers' assistant-mask
 * rule: from the token holding the span's first byte to the one holding its
 * last).  *ids, *mask malloc'd (caller frees); *nspan: assistant messages.
 * Errors carry no location (the caller names the line). */
int zt_sft_encode_chat(const zt_tokenizer *t, int tmpl, const char *bos, const char *eos,
                       const zt_chat_msg *m, int n, int mode, int32_t **ids, uint8_t **mask, size_t *len,
                       int *nspan, zt_status *st);

typedef struct zt_sft_prep_opts {
    const char *input;        /* JSON Lines */
    const char *tokenizer;    /* tokenizer.json or a directory holding one */
    const char *template_name; /* a built-in name, "auto" (also NULL) or a FILE.jinja */
    const char *const *template_vars; /* NULL-terminated "NAME=VALUE" for auto / file templates (or NULL) */
    const char *prefix;       /* PREFIX_train.sft [, PREFIX_val.sft] */
    int seq_len;              /* windows of seq_len + 1 tokens */
    int mask;                 /* ZT_SFT_MASK_* */
    int allow_split;          /* examples may cross windows */
    int truncate;             /* cut examples longer than a window (else error) */
    double val_fraction;      /* the last fraction of the examples -> val */
    int pad_id;               /* < 0: the tokenizer's EOS, else 0 */
    size_t max_line_bytes;    /* the longest line; 0 = 64 MiB (fileio.h) */
    zt_progress progress;     /* optional: input bytes counted, then done (with the lines,
                                 examples and tokens so far) */
} zt_sft_prep_opts;

typedef struct zt_sft_prep_result {
    uint64_t train_examples, val_examples, train_windows, val_windows;
    uint64_t tokens, targets;  /* example tokens packed, counted targets */
    uint64_t truncated, dropped_windows, pad_tokens;
    int pad_id, elsize;
} zt_sft_prep_result;

int zt_sft_prep(const zt_sft_prep_opts *o, zt_sft_prep_result *res, zt_status *st);
/* Output name: PREFIX_split.sft */
void zt_sft_path(char *buf, size_t n, const char *prefix, const char *split);

#endif
