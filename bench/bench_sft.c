/*
 * bench_sft.c -- the cost of one SFT example's ids and loss mask
 * (zt_sft_encode_chat, io/sftprep.c) against its number of turns.
 *
 *   bench_sft [--tokenizer PATH] [--template NAME] [--turns A,B] [--rounds N] [--no-baseline]
 *
 * Builds one conversation of A turns and one of B turns (user/assistant
 * alternating, the same ~90-byte contents), renders and masks each with
 * --mask assistant (best of N rounds, default 3), and prints ms, ms per turn
 * and the ratio time(B) / time(A) next to B / A: a cost linear in the turns
 * gives a ratio near B / A, a quadratic one near (B / A)^2.  It also prints
 * the bytes the encoder was given per byte rendered (zt_tok_work), the
 * machine-independent form of the same figure.  Defaults: the ChatML
 * fixture of the tests (tests/data/sft/chatml, run from the source tree),
 * template chatml, turns 200,1600.  Then the same for the baseline: the
 * ids and mask by their definition (every trained span's boundaries found by
 * encoding the whole prefix before them; the larger conversation once),
 * checked identical to zt_sft_encode_chat's (--no-baseline skips it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "sft.h"
#include "sft_ref.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *const contents[] = {
    "Could you summarise the main argument of the second chapter in two sentences, please?",
    "The chapter argues that prices follow costs over time; short-run deviations fade as firms enter.",
    "And what evidence does the author give for that claim, beyond the two case studies?",
    "Mostly survey data from 1990 to 2010, plus a comparison of three industries with high entry costs.",
};

/* one conversation of n turns: best-of-rounds ms (after one untimed warm-up call) and the encoder's bytes
 * per rendered byte; baseline: the whole-prefix definition instead, and its result must be identical */
static int measure(const zt_tokenizer *tok, int tmpl, const char *bos, const char *eos, int n, int rounds,
                   int baseline, double *best, double *work, zt_status *st) {
    zt_chat_msg *m = malloc((size_t)n * sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory");
    for (int k = 0; k < n; ++k) {
        m[k].role = k % 2 ? ZT_ROLE_ASSISTANT : ZT_ROLE_USER;
        m[k].content = contents[k % 4];
        m[k].len = strlen(contents[k % 4]);
    }
    zt_chat_text r;
    int rc = zt_chat_render(tmpl, m, n, bos, eos, &r, st);
    size_t rendered = rc == ZT_OK ? r.len : 1;
    if (rc == ZT_OK) zt_chat_text_free(&r);
    *best = 0;
    int32_t *ids0 = NULL;
    uint8_t *mask0 = NULL;
    size_t len0 = 0;
    int nspan0 = 0;
    if (rc == ZT_OK)   /* warm-up, and the reference result */
        rc = zt_sft_encode_chat(tok, tmpl, bos, eos, m, n, ZT_SFT_MASK_ASSISTANT, &ids0, &mask0, &len0, &nspan0, st);
    for (int i = 0; i < rounds && rc == ZT_OK; ++i) {
        int32_t *ids = NULL;
        uint8_t *mask = NULL;
        size_t len = 0;
        int nspan = 0;
        uint64_t w0 = zt_tok_work();
        double t0 = now_ms();
        rc = baseline ? zt_sft_ref_encode(tok, tmpl, bos, eos, m, n, ZT_SFT_MASK_ASSISTANT, &ids, &mask,
                                         &len, &nspan, st)
                      : zt_sft_encode_chat(tok, tmpl, bos, eos, m, n, ZT_SFT_MASK_ASSISTANT, &ids, &mask, &len,
                                           &nspan, st);
        double dt = now_ms() - t0;
        *work = (double)(zt_tok_work() - w0) / (double)rendered;
        if (i == 0 || dt < *best) *best = dt;
        if (rc == ZT_OK && (len != len0 || nspan != nspan0 || memcmp(ids, ids0, len * sizeof *ids) ||
                            memcmp(mask, mask0, len)))
            rc = zt_fail(st, ZT_EINTERNAL, "%d turns: the %s gave different ids or mask", n,
                         baseline ? "baseline" : "repeated call");
        free(ids);
        free(mask);
    }
    free(ids0);
    free(mask0);
    free(m);
    return rc;
}

int main(int argc, char **argv) {
    const char *tpath = "tests/data/sft/chatml", *tname = "chatml";
    int a = 200, b = 1600, rounds = 3, nobase = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tpath = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc) tname = argv[++i];
        else if (!strcmp(argv[i], "--turns") && i + 1 < argc && sscanf(argv[i + 1], "%d,%d", &a, &b) == 2) ++i;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-baseline")) nobase = 1;
        else {
            fprintf(stderr, "usage: bench_sft [--tokenizer PATH] [--template NAME] [--turns A,B] [--rounds N] [--no-baseline]\n");
            return 2;
        }
    }
    if (a < 2 || b < 2 || rounds < 1) { fprintf(stderr, "bench_sft: turns >= 2 and rounds >= 1\n"); return 2; }
    zt_status st = {0};
    zt_tokenizer *tok = NULL;
    int tmpl = zt_chat_template(tname);
    if (tmpl < 0) { fprintf(stderr, "bench_sft: unknown template '%s'\n", tname); return 2; }
    if (zt_tok_load(tpath, &tok, &st) != ZT_OK) { fprintf(stderr, "bench_sft: %s\n", st.msg); return 1; }
    int bi = zt_tok_bos_id(tok), ei = zt_tok_eos_id(tok);
    const char *bos = bi >= 0 ? zt_tok_token_str(tok, bi) : NULL, *eos = ei >= 0 ? zt_tok_token_str(tok, ei) : NULL;
    printf("template %s, tokenizer %s, --mask assistant, best of %d\n", tname, tpath, rounds);
    int rc = ZT_OK;
    for (int base = 0; base < 2 - nobase && rc == ZT_OK; ++base) {
        double ta, tb, wa, wb;
        rc = measure(tok, tmpl, bos, eos, a, rounds, base, &ta, &wa, &st);
        if (rc == ZT_OK) rc = measure(tok, tmpl, bos, eos, b, base ? 1 : rounds, base, &tb, &wb, &st);
        if (rc != ZT_OK) break;
        const char *what = base ? "baseline (whole prefixes)" : "zt_sft_encode_chat";
        printf("%s\n", what);
        printf("  %6d turns: %10.2f ms  %8.4f ms/turn  encoder bytes / rendered bytes %8.2f\n", a, ta, ta / a, wa);
        printf("  %6d turns: %10.2f ms  %8.4f ms/turn  encoder bytes / rendered bytes %8.2f\n", b, tb, tb / b, wb);
        printf("  ratio %d/%d turns: time %.2f (linear %.1f, quadratic %.1f)\n", b, a, tb / ta, (double)b / a,
               (double)b / a * b / a);
    }
    zt_tok_free(tok);
    if (rc != ZT_OK) { fprintf(stderr, "bench_sft: %s\n", st.msg); return 1; }
    return 0;
}
