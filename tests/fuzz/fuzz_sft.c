/* fuzz_sft.c -- the SFT JSON Lines parser and packer (io/sftprep.c, io/chat.c): the input as the JSON
 * Lines file of `ztrain prep --sft`; the first byte picks the template (llama3 with the llama3 fixture
 * tokenizer, chatml / qwen2 with the ChatML fixture, mistral with the llama2 fixture), the mask mode and
 * the packing (--allow-split / --truncate, seq_len 8 to 64); outputs go to the scratch directory.
 * Under `make check` the written window files are opened back (zt_tokens_open). */
#include "fuzz.h"
#include "sft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const struct { const char *tmpl, *tok; } tm[] = {
        {"llama3", "tests/fixtures/tok/llama3"}, {"chatml", "tests/data/sft/chatml"},
        {"qwen2", "tests/data/sft/chatml"}, {"mistral", "tests/fixtures/tok/llama2"},
    };
    unsigned c = data[0];
    const char *in = fz_write("chats.jsonl", data + 1, size - 1);
    char tok[1024], prefix[512];
    snprintf(tok, sizeof tok, "%s/%s", fz_srcdir(), tm[c & 3].tok);
    snprintf(prefix, sizeof prefix, "%s/out", fz_tmpdir());
    zt_sft_prep_opts o;
    memset(&o, 0, sizeof o);
    o.input = in;
    o.tokenizer = tok;
    o.template_name = tm[c & 3].tmpl;
    o.prefix = prefix;
    o.seq_len = 8 << ((c >> 2) & 3);
    o.mask = (int)((c >> 4) % 3);
    o.allow_split = (c >> 6) == 1;
    o.truncate = (c >> 6) == 2;
    o.val_fraction = (c >> 6) == 3 ? 0.5 : 0.0;
    o.pad_id = -1;
    zt_sft_prep_result r;
    zt_status st = {0};
    if (zt_sft_prep(&o, &r, &st) == ZT_OK) {
        char p[600];
        zt_sft_path(p, sizeof p, prefix, "train");
        zt_token_file *f = NULL;
        if (zt_tokens_open(p, 0, &f, &st) != ZT_OK) abort();   /* what prep wrote must read back */
        zt_tokens_close(f);
    }
    return 0;
}
