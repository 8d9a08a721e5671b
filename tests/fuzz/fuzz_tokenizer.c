/* fuzz_tokenizer.c -- tokenizer.json loading (io/tokenizer.c), then encode and decode with what loaded:
 * the input as tokenizer.json; when it loads, a few fixed texts and the input itself (when it is valid
 * UTF-8, capped at 4 KiB) are encoded with and without special tokens, and the ids decoded back. */
#include "fuzz.h"
#include "tokenizer.h"

static const char *const texts[] = {
    "Hello world! It's 2026 -- caf\xc3\xa9, na\xc3\xafve \xf0\x9f\x99\x82",
    "  leading and trailing spaces  \n\n\ttabs\r\n",
    "<|endoftext|><s></s><|im_start|>user\nhi<|im_end|>",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_write("tokenizer.json", data, size);
    zt_status st = {0};
    zt_tokenizer *t = NULL;
    if (zt_tok_load(p, &t, &st) != ZT_OK) return 0;
    size_t ntext = sizeof texts / sizeof *texts;
    for (size_t i = 0; i <= ntext; ++i) {
        const char *s = i < ntext ? texts[i] : (const char *)data;
        size_t n = i < ntext ? strlen(s) : size < 4096 ? size : 4096;
        for (int special = 0; special < 2; ++special) {
            int32_t *ids = NULL;
            size_t nids = 0;
            if (zt_tok_encode(t, s, n, special, &ids, &nids, &st) == ZT_OK) {
                char *back = NULL;
                size_t blen = 0;
                if (zt_tok_decode(t, ids, nids, special, &back, &blen, &st) == ZT_OK) free(back);
            }
            free(ids);
        }
    }
    int v = zt_tok_vocab_size(t);
    for (int id = -1; id <= v && id < 4096; ++id) {
        const char *s = zt_tok_token_str(t, id);
        if (s) (void)zt_tok_token_id(t, s);
    }
    zt_tok_free(t);
    return 0;
}
