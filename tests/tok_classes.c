/* tok_classes.c -- test helper for tests/tok_unicode_hf.sh (not a test itself): for each pattern (one per
 * line of the file), the code points that ztrain's pattern compiler matches, as Oniguruma's members are
 * probed there: the matches of PATTERN+ over one text of all 1,112,064 Unicode scalar values.
 *   tests/tok_classes PATTERNS      ->  one line per pattern: "lo-hi lo-hi ..." (hex), or "ERR message" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer_int.h"

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: tok_classes PATTERNS\n"); return 2; }
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 1; }
    char *text = malloc(4 * 0x110000);
    uint32_t *cpat = malloc(0x110000 * sizeof *cpat);   /* byte offset -> code point, via index */
    size_t *off = malloc((0x110000 + 1) * sizeof *off);
    if (!text || !cpat || !off) return 1;
    size_t n = 0, m = 0;
    for (uint32_t c = 0; c < 0x110000; ++c)
        if (c < 0xD800 || c > 0xDFFF) { off[m] = n; cpat[m++] = c; n += (size_t)zt_utf8_enc(c, text + n); }
    off[m] = n;
    char line[4096];
    zt_matches mm = {0};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char full[4200];
        snprintf(full, sizeof full, "%s+", line);
        zt_regex r;
        zt_status st = {0};
        if (zt_regex_compile(&r, full, 1, "pattern", &st) || zt_regex_find(&r, text, n, &mm, &st)) {
            printf("ERR %s\n", st.msg);
            zt_regex_free(&r);
            continue;
        }
        /* matches are byte ranges at character boundaries: map to code point ranges (split at surrogates) */
        size_t k = 0;
        for (size_t i = 0; i < mm.n; ++i) {
            size_t a = mm.m[2 * i], b = mm.m[2 * i + 1];
            while (off[k] < a) ++k;
            size_t s = k;
            while (off[k] < b) ++k;
            for (size_t j = s; j < k;) {              /* runs of consecutive code points */
                size_t e = j;
                while (e + 1 < k && cpat[e + 1] == cpat[e] + 1) ++e;
                printf("%X-%X ", cpat[j], cpat[e]);
                j = e + 1;
            }
        }
        printf("\n");
        zt_regex_free(&r);
    }
    free(mm.m); free(text); free(cpat); free(off);
    fclose(f);
    return 0;
}
