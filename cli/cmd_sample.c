/* cmd_sample.c -- `ztrain sample`: generate text from saved weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "ztrain_ckpt.h"
#include "jinja.h"
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

/* The model configuration saved in a checkpoint (its effective
 * configuration, through a temporary file). */
static int config_of_checkpoint(const char *path, zt_config *cfg, zt_status *st) {
    zt_ckpt_info in;
    int rc = zt_ckpt_read_info(path, &in, st);
    if (rc != ZT_OK) return rc;
    if (!in.config_json) {
        zt_ckpt_info_free(&in);
        snprintf(st->msg, sizeof st->msg, "%s: the checkpoint holds no configuration", path);
        return st->code = ZT_EDATA;
    }
    char tmp[] = "/tmp/ztrain-sample-XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = f && fputs(in.config_json, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    else if (fd >= 0) close(fd);
    zt_ckpt_info_free(&in);
    if (!ok) {
        if (fd >= 0) unlink(tmp);
        snprintf(st->msg, sizeof st->msg, "cannot write a temporary configuration file in /tmp");
        return st->code = ZT_EIO;
    }
    rc = zt_config_load_file(cfg, tmp, st);
    unlink(tmp);
    return rc;
}

/* --chat TEXT: a conversation of one user message rendered through the
 * tokenizer's own chat template with add_generation_prompt, as transformers'
 * apply_chat_template(messages, add_generation_prompt=True) does, and its ids
 * (the template writes any BOS itself: no special tokens are added). */
static int chat_ids(const zt_tokenizer *tk, const char *tok_path, const char *text, int32_t **ids,
                    size_t *m, zt_status *st) {
    zt_chat_auto *a = NULL;
    int rc = zt_chat_auto_load(tok_path, &a, st);
    if (rc == ZT_OK && !a) {
        snprintf(st->msg, sizeof st->msg, "sample --chat: %s has no chat template (chat_template.jinja "
                 "or tokenizer_config.json's chat_template)", tok_path);
        return st->code = ZT_EINVAL;
    }
    if (rc == ZT_OK) rc = zt_chat_auto_set_bool(a, "add_generation_prompt", 1, st);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
    zt_chat_text t;
    memset(&t, 0, sizeof t);
    if (rc == ZT_OK && !msgs) rc = zt_fail_cli(st, "sample --chat: the text must be UTF-8");
    if (rc == ZT_OK) rc = zt_chat_auto_render(a, tk, msgs, &t, st);
    if (rc == ZT_OK) rc = zt_tok_encode(tk, t.text, t.len, 0, ids, m, st);
    zt_chat_text_free(&t);
    json_decref(msgs);
    zt_chat_auto_free(a);
    return rc;
}

int cmd_sample(int argc, char **argv) {
    const char *weights = NULL, *ckpt = NULL, *prompt = NULL, *backend = NULL, *tokenizer = NULL, *v;
    const char *chat = NULL;
    double length = 256, temperature = 0.8, top_k = 0, seed = 1337;
    for (int i = 1; i < argc; ++i) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: ztrain sample (--weights FILE | --checkpoint PATH) [--prompt TEXT | --chat TEXT]\n"
                   "                     [--length N] [--temperature T] [--top-k K] [--seed S]\n"
                   "                     [--tokenizer PATH] [--backend cpu|cuda|cpu-strict]\n"
                   "Generates N tokens (default 256) after PROMPT from an llm.c fp32 model\n"
                   "file (as written by 'ztrain train'; GPT-2) or from a checkpoint (any\n"
                   "model: a step-N directory, its state.h5, or a checkpoint directory: its\n"
                   "newest committed one).  Without --tokenizer the prompt's bytes are its\n"
                   "token ids, and byte-level models (vocab 256) print text, others the token\n"
                   "ids.  With --tokenizer (a tokenizer.json or its directory) the prompt is\n"
                   "encoded with its special tokens (BOS) and prompt + output are decoded with\n"
                   "it.  The default prompt is a newline, or with a tokenizer its BOS (else\n"
                   "EOS) token.  Every checkpoint the trainer writes samples: a LoRA or QLoRA\n"
                   "checkpoint loads the base model it records (ztrain.init_from) and applies its\n"
                   "adapters.  --chat TEXT: the prompt is a conversation of one user message,\n"
                   "rendered with add_generation_prompt through the chat template of the\n"
                   "tokenizer (--tokenizer, else the checkpoint's ztrain.init_from directory).\n");
            return ZT_EXIT_OK;
        }
        if ((r = cli_opt(argc, argv, &i, "weights", &v))) { if (r < 0) goto missing; weights = v; }
        else if ((r = cli_opt(argc, argv, &i, "checkpoint", &v))) { if (r < 0) goto missing; ckpt = v; }
        else if ((r = cli_opt(argc, argv, &i, "prompt", &v))) { if (r < 0) goto missing; prompt = v; }
        else if ((r = cli_opt(argc, argv, &i, "chat", &v))) { if (r < 0) goto missing; chat = v; }
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
    if (!weights == !ckpt) {
        cli_error("sample: give one of --weights FILE and --checkpoint PATH");
        return ZT_EXIT_USAGE;
    }
    if (chat && prompt) {
        cli_error("sample: give one of --prompt TEXT and --chat TEXT");
        return ZT_EXIT_USAGE;
    }
    char cpath[4200] = "";
    int is_dir = 0;
    if (ckpt && cli_ckpt_pick(ckpt, cpath, sizeof cpath, &is_dir) != 0) {
        cli_error("sample: %s: no committed checkpoint", ckpt);
        return ZT_EXIT_FAIL;
    }

    zt_status st;
    zt_config *cfg = NULL;
    zt_ctx *ctx = NULL;
    zt_tokenizer *tk = NULL;
    int rc = zt_init(&argc, &argv, &st);
    int *in = NULL, *out = NULL, n = 0, N = (int)length;
    if (rc == ZT_OK && !(cfg = zt_config_new())) rc = ZT_ENOMEM;
    if (rc == ZT_OK) rc = weights ? zt_weights_read_shape(weights, cfg, &st)
                                  : config_of_checkpoint(cpath, cfg, &st);
    /* --chat without --tokenizer: the run's model directory's tokenizer */
    char tokdir[sizeof cfg->init_from + 32];
    struct stat sb;
    if (rc == ZT_OK && chat && !tokenizer && cfg->init_from[0]) {
        snprintf(tokdir, sizeof tokdir, "%s/tokenizer.json", cfg->init_from);
        if (stat(tokdir, &sb) == 0) tokenizer = strcpy(tokdir, cfg->init_from);
    }
    if (rc == ZT_OK && chat && !tokenizer)
        rc = zt_fail_cli(&st, "sample --chat needs a tokenizer with a chat template: --tokenizer PATH "
                              "(the checkpoint's ztrain.init_from has no tokenizer.json)");
    if (rc == ZT_OK && tokenizer) rc = zt_tok_load(tokenizer, &tk, &st);
    /* one sample at a time, no data, the saved run's batch and accumulation gone */
    static const char *const reset[][2] = {
        {"train_micro_batch_size_per_gpu", "1"}, {"gradient_accumulation_steps", "1"},
        {"train_batch_size", "0"}, {"ztrain.data.train", ""}, {"ztrain.data.val", ""},
        {"zero_optimization.stage", "0"}, {"zero_optimization.shard_group_size", "0"},
        {"zero_optimization.offload_optimizer.device", "none"},
        {"zero_optimization.offload_param.device", "none"}, {"ztrain.memory_limit", "0"},
        {"activation_checkpointing.policy", "none"}, {"sequence_parallel_size", "1"},
        {"expert_parallel_size", "1"}};
    for (size_t k = 0; ckpt && rc == ZT_OK && k < sizeof reset / sizeof reset[0]; ++k)
        rc = zt_config_set(cfg, reset[k][0], reset[k][1], ZT_SRC_FLAG, &st);
    if (rc == ZT_OK) rc = zt_config_set(cfg, "train_micro_batch_size_per_gpu", "1", ZT_SRC_FLAG, &st);
    if (rc == ZT_OK) rc = zt_config_set(cfg, "ztrain.data.val", "", ZT_SRC_FLAG, &st);
    if (rc == ZT_OK && backend) rc = zt_config_set(cfg, "ztrain.backend", backend, ZT_SRC_FLAG, &st);
    zt_callbacks cb;   /* no log lines; the restore's progress */
    cli_progress pr;
    memset(&cb, 0, sizeof cb);
    cb.progress = cli_progress_init(&pr, "restore");
    /* the weights or the checkpoint write every parameter: no random
     * initial values are computed first (ZT_CTX_DEFER_INIT) */
    if (rc == ZT_OK) rc = zt_ctx_create_ex(cfg, &cb, ZT_CTX_DEFER_INIT, &ctx, &st);
    /* LoRA / QLoRA: the checkpoint holds the adapters; the frozen base comes
     * from the model directory it records, as on a resume (run/run.c) */
    const zt_config *ec = ctx ? zt_ctx_config(ctx) : NULL;
    if (rc == ZT_OK && ckpt && ec->model.lora_r > 0 && ec->init_from[0])
        rc = zt_hf_load(ctx, ec->init_from, &st);
    if (rc == ZT_OK) rc = weights ? zt_load_weights(ctx, weights, &st)
                                  : zt_ckpt_restore(ctx, cpath, ZT_CKPT_ONE_READER, &st);
    cli_progress_end(&pr);
    /* the prompt's ids: bytes, or the tokenizer's encoding (with BOS when its template adds one) */
    if (rc == ZT_OK && tk) {
        int32_t *ids = NULL;
        size_t m = 0;
        if (chat) rc = chat_ids(tk, tokenizer, chat, &ids, &m, &st);
        else if (prompt && *prompt) rc = zt_tok_encode(tk, prompt, strlen(prompt), 1, &ids, &m, &st);
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
        } else if (zt_ctx_config(ctx)->model.vocab == 256) {   /* bytes: text */
            fputs(prompt, stdout);
            for (int i = 0; i < N; ++i) putchar(out[i]);
            putchar('\n');
        } else {
            for (int i = 0; i < N; ++i) printf("%s%d", i ? " " : "", out[i]);
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
