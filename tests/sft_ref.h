/* sft_ref.h -- an SFT example's ids and mask by definition, the slow way:
 * each trained span's boundaries found by encoding the whole prefix of the
 * rendering before them and comparing it with the full ids (what
 * zt_sft_encode_chat did before it kept to the segment after the last
 * special token).  tests/test_sft.c checks the linear algorithm against it;
 * bench/bench_sft.c times it as the baseline. */
#ifndef ZT_TESTS_SFT_REF_H
#define ZT_TESTS_SFT_REF_H
#include <stdlib.h>
#include <string.h>
#include "sft.h"

/* the tokens of text[0, at) that agree with ids[0, n): *k of them;
 * *straddle = the prefix's encoding goes on past them (a token across the
 * boundary) */
static inline int zt_sft_ref_boundary(const zt_tokenizer *t, const char *text, size_t at, const int32_t *ids,
                                      size_t n, size_t *k, int *straddle, zt_status *st) {
    int32_t *p = NULL;
    size_t np = 0, i = 0;
    int rc = zt_tok_encode(t, text, at, 0, &p, &np, st);
    while (rc == ZT_OK && i < np && i < n && p[i] == ids[i]) ++i;
    *k = i;
    *straddle = i < np;
    free(p);
    return rc;
}

/* ids, mask and length as zt_sft_encode_chat gives them (mode ZT_SFT_MASK_*);
 * nspan (may be NULL): the rendering's trained spans */
static inline int zt_sft_ref_encode(const zt_tokenizer *t, int tmpl, const char *bos, const char *eos,
                                    const zt_chat_msg *m, int n, int mode, int32_t **ids, uint8_t **mask,
                                    size_t *len, int *nspan, zt_status *st) {
    zt_chat_text r;
    ZT_TRY(zt_chat_render(tmpl, m, n, bos, eos, &r, st));
    if (nspan) *nspan = r.nspan;
    int rc = zt_tok_encode(t, r.text, r.len, 0, ids, len, st);
    *mask = rc == ZT_OK ? calloc(*len + 1, 1) : NULL;
    if (rc == ZT_OK && !*mask) rc = zt_fail(st, ZT_ENOMEM, "out of memory");
    if (rc == ZT_OK && mode == ZT_SFT_MASK_ALL) memset(*mask, 1, *len);
    const int first = mode == ZT_SFT_MASK_ALL ? r.nspan : mode == ZT_SFT_MASK_LAST ? r.nspan - 1 : 0;
    for (int s = first; rc == ZT_OK && s >= 0 && s < r.nspan; ++s) {
        size_t a, e;
        int sa, se;
        if (r.span[s].end == r.span[s].begin) continue;
        rc = zt_sft_ref_boundary(t, r.text, r.span[s].begin, *ids, *len, &a, &sa, st);
        if (rc == ZT_OK) rc = zt_sft_ref_boundary(t, r.text, r.span[s].end, *ids, *len, &e, &se, st);
        if (rc == ZT_OK && se && e < *len) e++;
        for (size_t k = a; rc == ZT_OK && k < e; ++k) (*mask)[k] = 1;
    }
    zt_chat_text_free(&r);
    return rc;
}

#endif
