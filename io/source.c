/* source.c -- random-window data source over a token shard; wires the
 * configured data files into a context. */
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "internal.h"
#include "tokens.h"

typedef struct window_source {
    zt_token_file *f;
    uint64_t seed;
    int T;
} window_source;

static int window_get(void *state, long step, uint64_t first, int count, int T,
                      int *inputs, int *targets, zt_status *st) {
    window_source *s = state;
    if (T > s->T)
        return zt_fail(st, ZT_EINTERNAL, "window of %d tokens requested from a source built for %d", T, s->T);
    uint64_t nwin = s->f->ntok - (uint64_t)T;   /* start positions with T+1 tokens */
    for (int i = 0; i < count; ++i) {
        uint64_t h = zt_hash3(s->seed, (uint64_t)step, first + (uint64_t)i);
        uint64_t off = h % nwin;
        const uint16_t *w = s->f->tokens + off;
        for (int t = 0; t < T; ++t) {
            inputs[(size_t)i * T + t] = w[t];
            targets[(size_t)i * T + t] = w[t + 1];
        }
    }
    return ZT_OK;
}

static void window_close(void *state) {
    window_source *s = state;
    zt_tokens_close(s->f);
    free(s);
}

int zt_data_source_tokens(const char *path, int vocab, int T, uint64_t seed,
                          zt_data_source *out, zt_status *st) {
    memset(out, 0, sizeof *out);
    zt_token_file *f;
    ZT_TRY(zt_tokens_open(path, vocab, &f, st));
    if (f->ntok < (size_t)T + 1) {
        int rc = zt_fail(st, ZT_EDATA, "%s: %zu tokens, shorter than one sequence of %d (+1) tokens",
                         path, f->ntok, T);
        zt_tokens_close(f);
        return rc;
    }
    window_source *s = calloc(1, sizeof *s);
    if (!s) { zt_tokens_close(f); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    s->f = f;
    s->seed = seed;
    s->T = T;
    out->state = s;
    out->get = window_get;
    out->close = window_close;
    return ZT_OK;
}

int zt_ctx_open_data(zt_ctx *ctx, zt_status *st) {
    const zt_config *c = zt_ctx_config(ctx);
    zt_data_source tr, va;
    memset(&va, 0, sizeof va);
    if (!c->data_train[0]) return zt_fail(st, ZT_EINVAL, "ztrain.data.train is empty: no training data");
    /* Distinct streams for train and val windows. */
    ZT_TRY(zt_data_source_tokens(c->data_train, c->model.vocab, c->model.context, c->seed, &tr, st));
    if (c->data_val[0]) {
        int rc = zt_data_source_tokens(c->data_val, c->model.vocab, c->model.context,
                                       zt_mix64(c->seed ^ 0x76616cULL), &va, st);
        if (rc != ZT_OK) { tr.close(tr.state); return rc; }
    }
    return zt_ctx_set_data(ctx, tr, va, st);
}
