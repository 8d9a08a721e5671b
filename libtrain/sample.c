/* sample.c -- autoregressive text generation from the current weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ctx.h"
#include "devmem.h"

/* Draw from probs[V] after temperature and top-k, with uniform u in [0,1). */
static int draw(const float *probs, int V, double temperature, int top_k, double u,
                double *w /* [V] scratch */) {
    double inv_t = 1.0 / temperature;
    double kth = -1.0;
    if (top_k > 0 && top_k < V) {
        /* k-th largest probability by partial selection on a copy */
        for (int i = 0; i < V; ++i) w[i] = probs[i];
        for (int k = 0; k < top_k; ++k) {
            int best = k;
            for (int i = k + 1; i < V; ++i) if (w[i] > w[best]) best = i;
            double tmp = w[k]; w[k] = w[best]; w[best] = tmp;
        }
        kth = w[top_k - 1];
    }
    double sum = 0.0;
    for (int i = 0; i < V; ++i) {
        double p = probs[i] >= kth ? pow((double)probs[i] > 0 ? probs[i] : 0.0, inv_t) : 0.0;
        w[i] = p;
        sum += p;
    }
    double target = u * sum, acc = 0.0;
    int last = 0;
    for (int i = 0; i < V; ++i) {
        if (w[i] <= 0) continue;
        acc += w[i];
        last = i;
        if (acc > target) return i;
    }
    return last;
}

int zt_sample(zt_ctx *ctx, const int *prompt, int n_prompt, int n_new,
              double temperature, int top_k, uint64_t seed, int *out, zt_status *st) {
    zt_status_clear(st);
    const zt_model_config *mc = &ctx->cfg->model;
    if (n_prompt < 1)
        return zt_fail(st, ZT_EINVAL, "sampling needs a prompt of at least one token");
    if (!(temperature > 0))
        return zt_fail(st, ZT_EINVAL, "temperature must be > 0, got %g", temperature);
    for (int i = 0; i < n_prompt; ++i)
        if (prompt[i] < 0 || prompt[i] >= mc->vocab)
            return zt_fail(st, ZT_EINVAL, "prompt token %d at %d outside vocab %d",
                           prompt[i], i, mc->vocab);
    const zt_model *m = ctx->model;
    if (mc->seq_parallel > 1)
        return zt_fail(st, ZT_EUNSUPPORTED, "sampling with sequence_parallel_size=%d is not "
                       "supported: sample from the checkpoint with sequence_parallel_size=1",
                       mc->seq_parallel);
    if (mc->expert_parallel > 1)
        return zt_fail(st, ZT_EUNSUPPORTED, "sampling with expert_parallel_size=%d is not "
                       "supported: sample from the checkpoint with expert_parallel_size=1",
                       mc->expert_parallel);
    if (!m->ops->probs)
        return zt_fail(st, ZT_EUNSUPPORTED, "model '%s' does not provide next-token "
                       "probabilities (zt_model_ops.probs): it cannot be sampled",
                       m->ops->name ? m->ops->name : "?");
    /* activations for the longest window this call forwards (prompt and
     * new tokens but the last, at most the context), not the whole context:
     * a 256-token sample of a 128k-context model needs [1, 256] */
    const long want = (long)n_prompt + n_new - 1 < mc->context ? (long)n_prompt + n_new - 1
                                                               : mc->context;
    const int need = want > 1 ? (int)want : 1;
    if (ctx->sample_acts.acts && ctx->sample_acts.T < need) zt_batch_buf_free(ctx, &ctx->sample_acts);
    if (!ctx->sample_acts.acts)
        ZT_TRY(zt_batch_buf_alloc(ctx, &ctx->sample_acts, 1, need, 0, ZT_MEM_WORKSPACE, st));
    int total = n_prompt + n_new;
    int *seq = malloc(sizeof(int) * (size_t)total);
    double *w = malloc(sizeof(double) * (size_t)mc->vocab);
    /* device backends: the next-token distribution is copied to the host */
    const int dev = zt_be_device(ctx->be);
    float *hp = dev ? malloc(sizeof(float) * (size_t)mc->vocab) : NULL;
    if (!seq || !w || (dev && !hp)) {
        free(seq); free(w); free(hp);
        return zt_fail(st, ZT_ENOMEM, "out of memory (sampling)");
    }
    memcpy(seq, prompt, sizeof(int) * (size_t)n_prompt);
    int len = n_prompt;
    zt_batch_buf *a = &ctx->sample_acts;
    for (int i = 0; i < n_new; ++i) {
        int T = len < mc->context ? len : mc->context;
        zt_xcopy(ctx->be, a->inputs, 1, seq + len - T, 0, sizeof(int) * (size_t)T);
        double unused;
        int rc = zt_shard_forward(ctx->sh, a->acts, a->inputs, NULL, 1, T, 0, &unused, st);
        const float *p = rc == ZT_OK ? m->ops->probs(m->self, a->acts, 0, T - 1) : NULL;
        if (rc == ZT_OK && !p)
            rc = zt_fail(st, ZT_EINTERNAL, "model '%s' kept no next-token probabilities for the "
                         "last position of its forward", m->ops->name ? m->ops->name : "?");
        if (rc == ZT_OK && dev) {
            ctx->be->to_host(hp, p, sizeof(float) * (size_t)mc->vocab);
            p = hp;
        }
        if (rc == ZT_OK) rc = zt_be_check(ctx->be, "sampling", st);
        if (rc != ZT_OK) { free(seq); free(w); free(hp); return rc; }
        int tok = draw(p, mc->vocab, temperature, top_k, zt_u01(zt_hash3(seed, (uint64_t)i, 0x73616d70ULL)), w);
        seq[len++] = tok;
        out[i] = tok;
    }
    free(seq);
    free(w);
    free(hp);
    return ZT_OK;
}
