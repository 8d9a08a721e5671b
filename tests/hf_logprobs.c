/*
 * hf_logprobs.c -- helper of tests/hf_transformers.sh: load a Hugging Face
 * model directory with zt_hf_read_config + zt_hf_load (one rank, fp32, cpu)
 * and print ztrain's log-softmax of the logits for one token sequence.
 *
 *   tests/hf_logprobs DIR TOK0 TOK1 ... TOKn
 *
 * Inputs are TOK0..TOKn-1 (T = n), targets TOK1..TOKn.  Output: the line
 * "loss L" (mean cross-entropy), then T lines of V log-probs.  Exit 0 on
 * success, 1 with one `hf_logprobs: error: ...` line otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ctx.h"
#include "testutil.h"
#include "ztrain_ckpt.h"

static int fail(const char *what, const zt_status *st) {
    fprintf(stderr, "hf_logprobs: error: %s: %s\n", what, st ? st->msg : "");
    return 1;
}

int main(int argc, char **argv) {
    zt_status st;
    if (zt_init(&argc, &argv, &st) != ZT_OK) return fail("zt_init", &st);
    if (argc < 4) return fail("usage: hf_logprobs DIR TOK0 TOK1 ... (at least 2 tokens)", NULL);
    const char *dir = argv[1];
    const int T = argc - 3;
    int *in = malloc(sizeof(int) * (size_t)T), *tg = malloc(sizeof(int) * (size_t)T);
    for (int t = 0; t < T; ++t) {
        in[t] = atoi(argv[2 + t]);
        tg[t] = atoi(argv[3 + t]);
    }
    zt_config *cfg = zt_config_new();
    zt_ctx *ctx = NULL;
    int rc = 1;
    if (zt_hf_read_config(dir, cfg, &st) != ZT_OK) { rc = fail("zt_hf_read_config", &st); goto out; }
    tu_set(cfg, "train_micro_batch_size_per_gpu", "1");
    tu_set(cfg, "zero_optimization.stage", "0");
    tu_set(cfg, "ztrain.seq_len", "%d", T);
    tu_set(cfg, "ztrain.threads", "1");
    tu_set(cfg, "ztrain.backend", "cpu");
    tu_set(cfg, "ztrain.classifier_chunk_rows", "%d", T);   /* one chunk: every position's probabilities */
    tu_set(cfg, "ztrain.data.train", "%s", "");
    tu_set(cfg, "ztrain.data.val", "%s", "");
    if (zt_ctx_create(cfg, NULL, &ctx, &st) != ZT_OK) { rc = fail("context", &st); goto out; }
    if (zt_hf_load(ctx, dir, &st) != ZT_OK) { rc = fail("zt_hf_load", &st); goto out; }
    zt_model *m = ctx->model;
    zt_batch_buf *bb = &ctx->acts;
    memcpy(zt_batch_host_inputs(bb), in, sizeof(int) * (size_t)T);
    memcpy(zt_batch_host_targets(bb), tg, sizeof(int) * (size_t)T);
    zt_batch_buf_upload(ctx, bb, T, T);
    double ls;
    if (zt_shard_forward(ctx->sh, bb->acts, bb->inputs, bb->targets, 1, T, 1, &ls, &st) != ZT_OK) {
        rc = fail("forward", &st);
        goto out;
    }
    if (!m->ops->probs) { rc = fail("the model has no probs op", NULL); goto out; }
    printf("loss %.9g\n", ls / T);
    for (int t = 0; t < T; ++t) {
        const float *p = m->ops->probs(m->self, bb->acts, 0, t);
        if (!p) { rc = fail("the model kept no probabilities for a position", NULL); goto out; }
        for (int v = 0; v < m->cfg.vocab; ++v) printf(v ? " %.9g" : "%.9g", log((double)p[v]));
        printf("\n");
    }
    rc = 0;
out:
    zt_ctx_free(ctx);
    zt_config_free(cfg);
    free(in);
    free(tg);
    zt_finalize();
    return rc;
}
