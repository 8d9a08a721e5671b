/* gpt.c -- the built-in GPT-2 on the public unit API: layout, activations,
 * forward, backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devmem.h"
#include "gpt.h"
#include "model_acts.h"

/* Per-block tensor family, in layout order (zt_gpt_layer's field order). */
enum { T_LN1W, T_LN1B, T_QKVW, T_QKVB, T_PROJW, T_PROJB, T_LN2W, T_LN2B,
       T_FCW, T_FCB, T_FCPW, T_FCPB, T_PER_LAYER };
static const char *layer_names[T_PER_LAYER] = {
    "ln1.w", "ln1.b", "attn.qkv.w", "attn.qkv.b", "attn.proj.w", "attn.proj.b",
    "ln2.w", "ln2.b", "mlp.fc.w", "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"};

struct zt_gpt {
    zt_model_config cfg;
    const zt_backend *be;
    size_t off_wte, off_wpe;           /* in the embedding unit */
    size_t off_layer[T_PER_LAYER];     /* in every block unit (same layout) */
    size_t off_lnfw, off_lnfb;         /* in the final-norm unit */
    zt_gpt_params p, g;                /* views, bound unit by unit */
    int ckpt;                          /* activation checkpointing group size, 0 = none */
};

void zt_gpt_set_checkpointing(zt_gpt *g, int k) { g->ckpt = k > 0 ? k : 0; }

/* ------------------------------------------------------------ layout */

static int gpt_describe(void *self, zt_layout *L, zt_status *st) {
    zt_gpt *g = self;
    const zt_model_config *mc = &g->cfg;
    int C = mc->n_embd, nl = mc->n_layer;
    double std = 0.02, resid = 0.02 / sqrt(2.0 * nl);   /* GPT-2 scaled residual init */
    ZT_TRY(zt_layout_unit(L, "embeddings", st));
    ZT_TRY(zt_layout_tensor(L, "wte", mc->vocab, C, ZT_INIT_NORMAL, std, ZT_TENSOR_DECAY, &g->off_wte, st));
    ZT_TRY(zt_layout_tensor(L, "wpe", mc->context, C, ZT_INIT_NORMAL, std, ZT_TENSOR_DECAY, &g->off_wpe, st));
    for (int l = 0; l < nl; ++l) {
        char un[24], tn[40];
        snprintf(un, sizeof un, "block.%d", l);
        ZT_TRY(zt_layout_unit(L, un, st));
        for (int k = 0; k < T_PER_LAYER; ++k) {
            int rows = C, cols = 1;
            zt_init_kind init = ZT_INIT_ZEROS;
            double s = 0.0;
            unsigned fl = 0;
            switch (k) {
            case T_LN1W: case T_LN2W: init = ZT_INIT_ONES; break;
            case T_QKVW: rows = 3 * C; cols = C; break;
            case T_QKVB: rows = 3 * C; break;
            case T_PROJW: cols = C; break;
            case T_FCW: rows = 4 * C; cols = C; break;
            case T_FCB: rows = 4 * C; break;
            case T_FCPW: cols = 4 * C; break;
            default: break;
            }
            if (cols > 1) {   /* weights: normal, decayed; projections scaled */
                init = ZT_INIT_NORMAL;
                s = (k == T_PROJW || k == T_FCPW) ? resid : std;
                fl = ZT_TENSOR_DECAY;
            }
            snprintf(tn, sizeof tn, "h%d.%s", l, layer_names[k]);
            size_t off;
            ZT_TRY(zt_layout_tensor(L, tn, rows, cols, init, s, fl, &off, st));
            g->off_layer[k] = off;
        }
    }
    ZT_TRY(zt_layout_unit(L, "final_norm", st));
    ZT_TRY(zt_layout_tensor(L, "lnf.w", C, 1, ZT_INIT_ONES, 0, 0, &g->off_lnfw, st));
    ZT_TRY(zt_layout_tensor(L, "lnf.b", C, 1, ZT_INIT_ZEROS, 0, 0, &g->off_lnfb, st));
    return ZT_OK;
}

/* Point the tensors of unit u in a view at a unit-sized buffer. */
static void bind_unit(const zt_gpt *g, int u, float *base, zt_gpt_params *v) {
    int L = g->cfg.n_layer;
    if (u == 0) {
        v->wte = base + g->off_wte;
        v->wpe = base + g->off_wpe;
    } else if (u == L + 1) {
        v->lnfw = base + g->off_lnfw;
        v->lnfb = base + g->off_lnfb;
    } else {
        float **f = (float **)&v->h[u - 1];   /* zt_gpt_layer is T_PER_LAYER pointers */
        for (int k = 0; k < T_PER_LAYER; ++k) f[k] = base + g->off_layer[k];
    }
}

int zt_gpt_new(const zt_model_config *mc, const zt_backend *be, zt_gpt **out, zt_status *st) {
    *out = NULL;
    if (mc->n_layer < 1 || mc->n_head < 1 || mc->n_embd < 1 || mc->context < 1 ||
        mc->vocab < 2 || mc->n_embd % mc->n_head)
        return zt_fail(st, ZT_EINVAL, "invalid model shape (n_layer %d, n_head %d, "
                       "n_embd %d, context %d, vocab %d)", mc->n_layer, mc->n_head,
                       mc->n_embd, mc->context, mc->vocab);
    zt_gpt *g = calloc(1, sizeof *g);
    if (!g) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    g->cfg = *mc;
    g->be = be;
    g->p.h = calloc((size_t)mc->n_layer, sizeof(zt_gpt_layer));
    g->g.h = calloc((size_t)mc->n_layer, sizeof(zt_gpt_layer));
    if (!g->p.h || !g->g.h) {
        zt_gpt_free(g);
        return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    }
    *out = g;
    return ZT_OK;
}

void zt_gpt_free(zt_gpt *g) {
    if (!g) return;
    free(g->p.h);
    free(g->g.h);
    free(g);
}

static void gpt_destroy(void *self) { zt_gpt_free(self); }

/* ------------------------------------------------------------ activations */

/* Carve the activation block.  With base == NULL only sizes are computed.
 * Residual stream: zt_acts_carve_res; a training block keeps L layer
 * slots, or k with checkpointing group size k. */
static size_t carve(const zt_model_config *mc, int B, int T, int training, int ckpt,
                    zt_gpt_acts *a, float *base) {
    size_t N = (size_t)B * T, C = (size_t)mc->n_embd, V = (size_t)mc->vocab;
    size_t NH = (size_t)mc->n_head, L = (size_t)mc->n_layer;
    size_t k = zt_acts_ckpt_group(ckpt, training, L);
    size_t slots = zt_acts_n_slots(training, k, L);
    size_t off = 0;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += ((size_t)(n) + 15) & ~(size_t)15; } while (0)
    float *dummy;
    (void)dummy;
    off = zt_acts_carve_res(a->res, base, off, training, L, k, N * C);
    for (size_t s = 0; s < slots; ++s) {
        struct zt_layer_acts *la = base ? &a->layer[s] : NULL;
#define LTAKE(f, n) do { if (la) { TAKE(la->f, n); } else { TAKE(dummy, n); } } while (0)
        LTAKE(ln1, N * C); LTAKE(ln1_mean, N); LTAKE(ln1_rstd, N);
        LTAKE(qkv, N * 3 * C); LTAKE(atty, N * C); LTAKE(lse, (size_t)B * NH * T);
        LTAKE(res2, N * C);
        LTAKE(ln2, N * C); LTAKE(ln2_mean, N); LTAKE(ln2_rstd, N);
        LTAKE(fch, N * 4 * C); LTAKE(fch_gelu, N * 4 * C);
#undef LTAKE
    }
    TAKE(a->scratch, N * C);
    TAKE(a->lnf, N * C); TAKE(a->lnf_mean, N); TAKE(a->lnf_rstd, N);
    TAKE(a->probs, N * V); TAKE(a->losses, N);
    /* int and float are both 4 bytes: the -1 targets share the block */
    if (base) a->no_targets = (int *)(void *)(base + off);
    off += (N + 15) & ~(size_t)15;
    if (training) {
        TAKE(a->dres, N * C); TAKE(a->dbuf, N * C); TAKE(a->dqkv, N * 3 * C);
        TAKE(a->d4a, N * 4 * C); TAKE(a->d4b, N * 4 * C);
    }
#undef TAKE
    return off * sizeof(float);
}

size_t zt_gpt_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt) {
    zt_gpt_acts a;
    memset(&a, 0, sizeof a);
    return carve(mc, B, T, training, ckpt, &a, NULL);
}

size_t zt_gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training) {
    return zt_gpt_acts_bytes_ckpt(mc, B, T, training, 0);
}

static void gpt_acts_free(void *self, void *acts) {
    (void)self;
    zt_gpt_acts *a = acts;
    ZT_ACTS_FREE(a);
}

static int gpt_acts_create(void *self, int B, int T, int training, int mem_tag, void **out,
                           zt_status *st) {
    const zt_gpt *g = self;
    *out = NULL;
    if (B < 1 || T < 1 || T > g->cfg.context)
        return zt_fail(st, ZT_EINVAL, "batch shape B=%d T=%d invalid (context %d)",
                       B, T, g->cfg.context);
    zt_gpt_acts *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(st, ZT_ENOMEM, "out of memory");
    int L = g->cfg.n_layer;
    a->B = B; a->T = T; a->training = training;
    a->ckpt = (int)zt_acts_ckpt_group(g->ckpt, training, (size_t)L);
    a->n_slots = (int)zt_acts_n_slots(training, (size_t)a->ckpt, (size_t)L);
    a->res = calloc((size_t)(training ? L + 1 : 2), sizeof(float *));
    a->layer = calloc((size_t)a->n_slots, sizeof *a->layer);
    if (!a->res || !a->layer) { gpt_acts_free(self, a); return zt_fail(st, ZT_ENOMEM, "out of memory"); }
    size_t bytes = zt_gpt_acts_bytes_ckpt(&g->cfg, B, T, training, g->ckpt);
    a->block = zt_mem_alloc(bytes, mem_tag, st);
    if (!a->block) {
        gpt_acts_free(self, a);
        return zt_fail_prefix(st, "activations for B=%d T=%d", B, T);
    }
    a->bytes = bytes;
    carve(&g->cfg, B, T, training, g->ckpt, a, a->block);
    /* the -1 targets of a forward without targets (device memory: staged) */
    zt_acts_fill_no_targets(g->be, a->no_targets, (size_t)B * T);
    *out = a;
    return ZT_OK;
}

/* ------------------------------------------------------------ forward */

/* Bind unit u's parameters (PARAMS) or gradient buffer (GRADS) into the
 * views; return from the caller on failure (model_acts.h). */
#define PARAMS(u) ZT_UNIT_PARAMS(g, u)
#define GRADS(u) ZT_UNIT_GRADS(g, u)
#define RELEASE(u) ZT_UNIT_RELEASE(u)

/* Block l's forward from res[l] into its slot and res[l+1] (the block's
 * parameters are bound in g->p).  Backward runs it again to recompute a
 * checkpointed block: same kernels, same inputs, bitwise the same values. */
static void block_fwd(zt_gpt *g, zt_gpt_acts *a, int l) {
    const zt_backend *be = g->be;
    int B = a->fB, T = a->fT, C = g->cfg.n_embd, NH = g->cfg.n_head, N = B * T;
    const zt_gpt_layer *w = &g->p.h[l];
    struct zt_layer_acts *s = ZT_ACTS_SLOT(a, l);
    float *x = ZT_ACTS_RES(a, l), *y = ZT_ACTS_RES(a, l + 1);
    /* attention sub-block: res2 = x + proj(attn(qkv(ln1(x)))) */
    be->layernorm_fwd(s->ln1, s->ln1_mean, s->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
    be->matmul_fwd(s->qkv, s->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
    be->attention_fwd(s->atty, s->lse, s->qkv, B, T, C, NH);
    be->matmul_fwd(a->scratch, s->atty, w->attprojw, w->attprojb, N, C, C);
    be->add(s->res2, x, a->scratch, (size_t)N * C);
    /* MLP sub-block: y = res2 + proj(gelu(fc(ln2(res2)))) */
    be->layernorm_fwd(s->ln2, s->ln2_mean, s->ln2_rstd, s->res2, w->ln2w, w->ln2b, N, C);
    be->matmul_fwd(s->fch, s->ln2, w->fcw, w->fcb, N, C, 4 * C);
    be->gelu_fwd(s->fch_gelu, s->fch, (size_t)N * 4 * C);
    be->matmul_fwd(a->scratch, s->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    be->add(y, s->res2, a->scratch, (size_t)N * C);
}

/* block_fwd with the block's unit acquired and released (zt_block_fwd_unit_fn). */
static int block_fwd_unit(void *self, zt_units *U, void *acts, int l, zt_status *st) {
    zt_gpt *g = self;
    PARAMS(1 + l);
    block_fwd(g, acts, l);
    RELEASE(1 + l);
    return ZT_OK;
}

static int gpt_forward(void *self, zt_units *U, void *acts, const int *inputs,
                       const int *targets, int B, int T, double *loss_sum, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const zt_backend *be = g->be;
    int C = g->cfg.n_embd, V = g->cfg.vocab, L = g->cfg.n_layer;
    if (B < 1 || B > a->B || T < 1 || T > a->T)
        return zt_fail(st, ZT_EINVAL, "forward on B=%d T=%d exceeds the activations' %dx%d",
                       B, T, a->B, a->T);
    int N = B * T;
    a->fB = B; a->fT = T;
    a->inputs = inputs;
    a->targets = targets ? targets : a->no_targets;

    PARAMS(0);
    be->encoder_fwd(ZT_ACTS_RES(a, 0), inputs, g->p.wte, g->p.wpe, B, T, C);
    for (int l = 0; l < L; ++l) ZT_TRY(block_fwd_unit(g, U, a, l, st));
    PARAMS(L + 1);
    be->layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, ZT_ACTS_RES(a, L), g->p.lnfw,
                      g->p.lnfb, N, C);
    RELEASE(L + 1);
    /* tied LM head: logits[N,V] = lnf @ wte^T.  The embedding unit is asked
     * for again (at ZeRO-3 it was released after the encoder unless the
     * engine kept it); a training pass keeps it for the head's backward. */
    PARAMS(0);
    be->matmul_fwd(a->probs, a->lnf, g->p.wte, NULL, N, C, V);
    if (!a->training) RELEASE(0);
    be->xent_fwd(a->losses, a->probs, a->probs, a->targets, N, V);
    /* the sum of the losses on the device (in index order on the cpu) */
    *loss_sum = targets ? be->sum(a->losses, (size_t)N) : 0.0;
    return ZT_OK;
}

/* A pointer into the activations: device memory on a device backend. */
static const float *gpt_probs(void *self, void *acts, int b, int t) {
    const zt_gpt *g = self;
    const zt_gpt_acts *a = acts;
    return a->probs + ((size_t)b * a->fT + (size_t)t) * g->cfg.vocab;
}

/* ------------------------------------------------------------ backward */

static int gpt_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    zt_gpt *g = self;
    zt_gpt_acts *a = acts;
    const zt_backend *be = g->be;
    int B = a->fB, T = a->fT, C = g->cfg.n_embd, NH = g->cfg.n_head, V = g->cfg.vocab;
    int L = g->cfg.n_layer, N = B * T;
    size_t NC = (size_t)N * C;
    if (!a->training)
        return zt_fail(st, ZT_EINTERNAL, "backward on forward-only activations");

    be->xent_bwd(a->probs, a->probs, a->targets, dloss, N, V);
    /* LM head (tied): dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
    PARAMS(0);
    GRADS(0);
    be->matmul_bwd(a->dbuf, g->g.wte, NULL, a->probs, a->lnf, g->p.wte, N, C, V);
    RELEASE(0);
    be->zero(a->dres, NC * sizeof(float));
    PARAMS(L + 1);
    GRADS(L + 1);
    be->layernorm_bwd(a->dres, g->g.lnfw, g->g.lnfb, a->dbuf, a->res[L], g->p.lnfw,
                      a->lnf_mean, a->lnf_rstd, N, C);
    RELEASE(L + 1);
    ZT_TRY(zt_unit_grads_done(U, L + 1, st));
    const int k = a->ckpt;
    for (int l = L - 1; l >= 0; --l) {
        /* checkpointing: at the top block of a group [g0, e), recompute the
         * blocks below it from the kept input res[g0]; the top block is
         * recomputed inside its own window below */
        int top;
        ZT_TRY(zt_acts_recompute_below(block_fwd_unit, g, U, a, k, L, l, &top, st));
        PARAMS(1 + l);
        GRADS(1 + l);
        if (top) block_fwd(g, a, l);
        const zt_gpt_layer *w = &g->p.h[l];
        zt_gpt_layer *gw = &g->g.h[l];
        struct zt_layer_acts *s = ZT_ACTS_SLOT(a, l);
        /* MLP: dres flows to res2 unchanged and into the projection */
        be->matmul_bwd(a->d4a, gw->fcprojw, gw->fcprojb, a->dres, s->fch_gelu, w->fcprojw,
                       N, 4 * C, C);
        be->gelu_bwd(a->d4b, s->fch, a->d4a, (size_t)N * 4 * C);
        be->matmul_bwd(a->dbuf, gw->fcw, gw->fcb, a->d4b, s->ln2, w->fcw, N, C, 4 * C);
        be->layernorm_bwd(a->dres, gw->ln2w, gw->ln2b, a->dbuf, s->res2, w->ln2w,
                          s->ln2_mean, s->ln2_rstd, N, C);
        /* attention */
        be->matmul_bwd(a->dbuf, gw->attprojw, gw->attprojb, a->dres, s->atty, w->attprojw,
                       N, C, C);
        be->attention_bwd(a->dqkv, a->dbuf, s->qkv, s->atty, s->lse, B, T, C, NH);
        be->matmul_bwd(a->dbuf, gw->qkvw, gw->qkvb, a->dqkv, s->ln1, w->qkvw, N, C, 3 * C);
        be->layernorm_bwd(a->dres, gw->ln1w, gw->ln1b, a->dbuf, a->res[l], w->ln1w,
                          s->ln1_mean, s->ln1_rstd, N, C);
        RELEASE(1 + l);
        ZT_TRY(zt_unit_grads_done(U, 1 + l, st));
    }
    /* embeddings.  The encoder's backward reads no parameters, but the unit
     * is acquired like every unit before its backward (ZeRO-3's second
     * gather of a unit), which keeps the engine's order uniform. */
    PARAMS(0);
    GRADS(0);
    be->encoder_bwd(g->g.wte, g->g.wpe, a->dres, a->inputs, B, T, C);
    RELEASE(0);
    ZT_TRY(zt_unit_grads_done(U, 0, st));
    return ZT_OK;
}

static const zt_model_ops gpt_ops = {
    "gpt2", gpt_describe, gpt_acts_create, gpt_acts_free, gpt_forward, gpt_backward,
    gpt_probs, gpt_destroy,
};

const zt_model_ops *zt_gpt_ops(void) { return &gpt_ops; }
int zt_model_is_gpt(const zt_model *m) { return m->ops == &gpt_ops; }
