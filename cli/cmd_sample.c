/* cmd_sample.c -- `ztrain sample`: generate text from saved weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "tokenizer.h"

static int zt_fail_cli(zt_status *st, const char *msg) {
    st->code = ZT_EINVAL;
    snprintf(st->msg, sizeof st->msg, "%s", msg);
    return ZT_EINVAL;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !(x >= lo && x <= hi)) {
        cli_error("sample: --%s must be a number in [%g, %g], got '%s'", opt, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cmd_sample(int argc, char **argv) {
    const char *weights = NULL, *prompt = NULL, *backend = NULL, *tokenizer = NULL, *v;
    double length = 256, temperature = 0.8, top_k = 0, seed = 1337;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ztrain sample --weights FILE [--prompt TEXT] [--length N]\n"
                   "                     [--temperature T] [--top-k K] [--seed S]\n"
                   "                     [--tokenizer PATH] [--backend cpu|cuda|cpu-strict]\n"
                   "Generates N tokens (default 256) after PROMPT from an llm.c fp32 model\n"
                   "file (as written by 'ztrain train') and prints the text.  Without\n"
                   "--tokenizer tokens are bytes; with it (a tokenizer.json or its directory)\n"
                   "the prompt is encoded with its special tokens (BOS) and prompt + output are\n"
                   "decoded with it.  The default prompt is a newline, or with a tokenizer its\n"
                   "BOS (else EOS) token.\n");
            return ZT_EXIT_OK;
        }
        if ((r = cli_opt(argc, argv, &i, "weights", &v))) { if (r < 0) goto missing; weights = v; }
        else if ((r = cli_opt(argc, argv, &i, "prompt", &v))) { if (r < 0) goto missing; prompt = v; }
        else if ((r = cli_opt(argc, argv, &i, "backend", &v))) { if (r < 0) goto missing; backend = v; }
        else if ((r = cli_opt(argc, argv, &i, "tokenizer", &v))) { if (r < 0) goto missing; tokenizer = v; }
        else if ((r = cli_opt(argc, argv, &i, "length", &v))) {
            if (r < 0) goto missing;
            if (parse_num("length", v, 1, 1e6, &length)) return ZT_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "temperature", &v))) {
            if (r < 0) goto missing;
            if (parse_num("temperature", v, 1e-3, 100, &temperature)) return ZT_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "top-k", &v))) {
            if (r < 0) goto missing;
            if (parse_num("top-k", v, 0, 1e6, &top_k)) return ZT_EXIT_USAGE;
        } else if ((r = cli_opt(argc, argv, &i, "seed", &v))) {
            if (r < 0) goto missing;
            if (parse_num("seed", v, 0, 1e18, &seed)) return ZT_EXIT_USAGE;
        } else { cli_error("sample: unknown option '%s'", argv[i]); return ZT_EXIT_USAGE; }
        continue;
    missing:
        cli_error("sample: option '%s' needs a value", argv[i]);
        return ZT_EXIT_USAGE;
    }
    if (!weights) { cli_error("sample: --weights FILE is required"); return ZT_EXIT_USAGE; }

    zt_status st;
    zt_config *cfg = NULL;
    zt_ctx *ctx = NULL;
    zt_tokenizer *tk = NULL;
    int rc = zt_init(&argc, &argv, &st);
    int *in = NULL, *out = NULL, n = 0, N = (int)length;
    if (rc == ZT_OK && tokenizer) rc = zt_tok_load(tokenizer, &tk, &st);
    if (rc == ZT_OK && !(cfg = zt_config_new())) rc = ZT_ENOMEM;
    if (rc == ZT_OK) rc = zt_weights_read_shape(weights, cfg, &st);
    if (rc == ZT_OK) rc = zt_config_set(cfg, "train_micro_batch_size_per_gpu", "1", ZT_SRC_FLAG, &st);
    if (rc == ZT_OK) rc = zt_config_set(cfg, "ztrain.data.val", "", ZT_SRC_FLAG, &st);
    if (rc == ZT_OK && backend) rc = zt_config_set(cfg, "ztrain.backend", backend, ZT_SRC_FLAG, &st);
    if (rc == ZT_OK) rc = zt_ctx_create(cfg, NULL, &ctx, &st);
    if (rc == ZT_OK) rc = zt_load_weights(ctx, weights, &st);
    /* the prompt's ids: bytes, or the tokenizer's encoding (with BOS when its template adds one) */
    if (rc == ZT_OK && tk) {
        int32_t *ids = NULL;
        size_t m = 0;
        if (prompt && *prompt) rc = zt_tok_encode(tk, prompt, strlen(prompt), 1, &ids, &m, &st);
        if (rc == ZT_OK && m == 0) {
            free(ids);
            int start = zt_tok_bos_id(tk) >= 0 ? zt_tok_bos_id(tk) : zt_tok_eos_id(tk);
            if (start >= 0) { ids = malloc(sizeof *ids); if (ids) { ids[0] = start; m = 1; } }
            else rc = zt_tok_encode(tk, "\n", 1, 1, &ids, &m, &st);
        }
        if (rc == ZT_OK && (!ids || m == 0)) rc = zt_fail_cli(&st, "the prompt encodes to no tokens");
        if (rc == ZT_OK && !(in = malloc(sizeof(int) * m))) rc = ZT_ENOMEM;
        for (size_t i = 0; rc == ZT_OK && i < m; ++i) in[i] = ids[i];
        n = (int)m;
        free(ids);
    } else if (rc == ZT_OK) {
        if (!prompt) prompt = "\n";
        n = (int)strlen(prompt);
        if (!(in = malloc(sizeof(int) * (size_t)(n ? n : 1)))) rc = ZT_ENOMEM;
        else if (n == 0) { in[0] = '\n'; n = 1; }
        else for (int i = 0; i < n; ++i) in[i] = (unsigned char)prompt[i];
    }
    if (rc == ZT_OK && !(out = malloc(sizeof(int) * (size_t)N))) rc = ZT_ENOMEM;
    if (rc == ZT_OK) rc = zt_sample(ctx, in, n, N, temperature, (int)top_k, (uint64_t)seed, out, &st);
    if (rc == ZT_OK && zt_world_rank() == 0) {
        if (tk) {
            /* decode prompt + output together (decoders such as Metaspace depend on the position) */
            int32_t *all = malloc(sizeof *all * (size_t)(n + N));
            char *text = NULL;
            size_t tl = 0;
            if (!all) rc = ZT_ENOMEM;
            for (int i = 0; rc == ZT_OK && i < n + N; ++i) all[i] = i < n ? in[i] : out[i - n];
            if (rc == ZT_OK) rc = zt_tok_decode(tk, all, (size_t)(n + N), 0, &text, &tl, &st);
            if (rc == ZT_OK) { fwrite(text, 1, tl, stdout); putchar('\n'); }
            free(text);
            free(all);
        } else {
            fputs(prompt, stdout);
            for (int i = 0; i < N; ++i) putchar(out[i] & 0xff);
            putchar('\n');
        }
    }
    if (rc == ZT_ENOMEM && !st.msg[0]) snprintf(st.msg, sizeof st.msg, "out of memory");
    if (rc != ZT_OK && zt_world_rank() == 0) cli_error("%s", st.msg);
    free(in);
    free(out);
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    zt_tok_free(tk);
    zt_finalize();
    return cli_exit_code(rc);
}
