/*
 * tokenizer.h -- Hugging Face tokenizer.json (tokenizers library) in C.
 *
 * Implemented (exact to HF tokenizers 0.23; docs/tokenizers.md is the full
 * support matrix): model BPE (merges as "a b" strings or ["a", "b"] pairs,
 * ignore_merges, byte_fallback, unk_token, fuse_unk); normalizers NFC, NFKC,
 * Prepend, Replace, Sequence; pre-tokenizers ByteLevel, Split (PCRE2, UTF+UCP),
 * Metaspace, Sequence; decoders ByteLevel, Metaspace, ByteFallback, Fuse,
 * Strip, Replace, Sequence; post-processors TemplateProcessing, ByteLevel;
 * added_tokens matched before the model, longest match first.  Everything else
 * is refused by name at load (ZT_EUNSUPPORTED), never approximated.
 *
 * Text is UTF-8.  Invalid UTF-8 input to zt_tok_encode is refused with
 * ZT_EDATA ("invalid UTF-8 at byte N"): HF's Python API only accepts str, so
 * there is no HF behaviour to match for such bytes.
 */
#ifndef ZT_IO_TOKENIZER_H
#define ZT_IO_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "ztrain.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zt_tokenizer zt_tokenizer;
/* path: a tokenizer.json file or a directory holding one.  Anything in the file that is not implemented is
 * refused here, by name (ZT_EUNSUPPORTED); malformed/truncated JSON -> ZT_EDATA with the file name. */
int  zt_tok_load(const char *path, zt_tokenizer **out, zt_status *st);
void zt_tok_free(zt_tokenizer *t);
/* Encode text[len] (UTF-8) exactly like HF tokenizers' encode(text, add_special_tokens=add_special):
 * added/special tokens split out first, normalizer, pre-tokenizer, model, and the post-processor (BOS/EOS) only
 * when add_special.  *ids is malloc'd (caller frees).  Thread-safe for concurrent calls on one tokenizer. */
int  zt_tok_encode(const zt_tokenizer *t, const char *text, size_t len, int add_special,
                   int32_t **ids, size_t *n, zt_status *st);
/* zt_tok_encode(text, add_special = 0) that also reports its cuts: every added token matched on the raw
 * text (normalized false), without lstrip, whose content does not start with white space, as the bytes
 * [off, end) it took (rstrip included) and the index k of its id in *ids.  For any at >= end, the encoding of
 * text[0, at) is ids[0, k) followed by the encoding of text[off, at) (the added tokens split the text before
 * any other stage): what makes prefix encodings cost the length of their last segment (io/sftprep.c).
 * *cuts malloc'd (caller frees; NULL when none), in text order. */
typedef struct zt_tok_cut { size_t off, end, k; } zt_tok_cut;
int  zt_tok_encode_cuts(const zt_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                        zt_tok_cut **cuts, size_t *ncuts, zt_status *st);
/* Bytes this thread has passed to the encoder so far (every zt_tok_encode / zt_tok_encode_cuts call): the
 * work a caller's encoding strategy costs, independent of the machine's speed. */
uint64_t zt_tok_work(void);
/* Decode like HF decode(ids, skip_special_tokens=skip_special); *text malloc'd, NUL-terminated. */
int  zt_tok_decode(const zt_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                   char **text, size_t *len, zt_status *st);
int  zt_tok_vocab_size(const zt_tokenizer *t);       /* max id + 1, added tokens included */
int  zt_tok_token_id(const zt_tokenizer *t, const char *token);
/* Bytes of the longest added token whose content starts s[0, n) (0: none). */
size_t zt_tok_added_at(const zt_tokenizer *t, const char *s, size_t n);  /* exact token string -> id, -1 if none */
const char *zt_tok_token_str(const zt_tokenizer *t, int id);     /* id -> token string, NULL if none */
/* BOS / EOS ids as the file or a tokenizer_config.json beside it defines them (post-processor template,
 * tokenizer_config bos_token/eos_token); -1 when unknown. */
int  zt_tok_bos_id(const zt_tokenizer *t);
int  zt_tok_eos_id(const zt_tokenizer *t);

#ifdef __cplusplus
}
#endif
#endif /* ZT_IO_TOKENIZER_H */
