/* tok_batch.c -- test helper for tests/tok_hf.sh (not a test itself): encodes and decodes records with
 * io/tokenizer.h so that a script can compare every stage with Hugging Face tokenizers.
 *   tests/tok_batch TOKENIZER RECORDS
 * RECORDS: repeated "<byte length>\n<bytes>".  For each record one line:
 *   ids(add_special=0) | ids(add_special=1) | hex(decode(ids1, skip=0)) | hex(decode(ids1, skip=1)) |
 * or "ERR <message>|" for a failed step.  Exit 1 when the tokenizer does not load. */
#include <stdio.h>
#include <stdlib.h>
#include "tokenizer.h"

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: tok_batch TOKENIZER RECORDS\n"); return 2; }
    zt_status st;
    zt_tokenizer *t;
    if (zt_tok_load(argv[1], &t, &st)) { fprintf(stderr, "%s\n", st.msg); return 1; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); zt_tok_free(t); return 1; }
    size_t len;
    while (fscanf(f, "%zu", &len) == 1) {
        fgetc(f);
        char *b = malloc(len + 1);
        if (!b || fread(b, 1, len, f) != len) { free(b); break; }
        for (int s = 0; s < 2; ++s) {
            int32_t *ids;
            size_t m;
            if (zt_tok_encode(t, b, len, s, &ids, &m, &st)) { printf("ERR %s|", st.msg); continue; }
            for (size_t i = 0; i < m; ++i) printf("%s%d", i ? " " : "", ids[i]);
            printf("|");
            for (int k = 0; s == 1 && k < 2; ++k) {
                char *txt;
                size_t tl;
                if (zt_tok_decode(t, ids, m, k, &txt, &tl, &st)) { printf("ERR %s|", st.msg); continue; }
                for (size_t i = 0; i < tl; ++i) printf("%02x", (unsigned char)txt[i]);
                printf("|");
                free(txt);
            }
            free(ids);
        }
        printf("\n");
        free(b);
    }
    fclose(f);
    zt_tok_free(t);
    return 0;
}
