/* llama.c -- the built-in Llama-family model on the public unit API:
 * layout, activations, forward, backward (layout and data flow: llama.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devmem.h"
#include "llama.h"
#include "model_acts.h"

/* Per-block tensor family, in layout order.  The three biases exist only
 * with attention_bias. */
enum { T_ANORM, T_QW, T_KW, T_VW, T_QB, T_KB, T_VB, T_OW, T_MNORM, T_GATEW, T_UPW, T_DOWNW,
       T_PER_LAYER };
static const char *layer_names[T_PER_LAYER] = {
    "attn_norm.w", "q.w", "k.w", "v.w", "q.b", "k.b", "v.b", "o.w", "mlp_norm.w",
    "gate.w", "up.w", "down.w"};

/* The model's shape, derived once from the configuration. */
typedef struct shape {
    int C, L, V, NH, NKV, hd, H;
    int QKV;                   /* (NH + 2 NKV) * hd: one qkv row */
    int AD;                    /* NH * hd: attention output width */
    int bias, tied;
} shape;

static shape shape_of(const zt_model_config *mc) {
    shape s;
    s.C = mc->n_embd;
    s.L = mc->n_layer;
    s.V = mc->vocab;
    s.NH = mc->n_head;
    s.NKV = zt_model_kv_heads(mc);
    s.hd = zt_model_head_dim(mc);
    s.H = zt_model_intermediate(mc);
    s.QKV = (s.NH + 2 * s.NKV) * s.hd;
    s.AD = s.NH * s.hd;
    s.bias = mc->attention_bias != 0;
    s.tied = mc->tie_embeddings != 0;
    return s;
}

struct zt_llama {
    zt_model_config cfg;
    shape s;
    const zt_backend *be;
    size_t off_embed;                  /* in the embedding unit */
    size_t off_layer[T_PER_LAYER];     /* in every block unit (same layout) */
    size_t off_norm, off_lm_head;      /* in the head unit */
    zt_llama_params p, g;              /* views, bound unit by unit */
    int ckpt;                          /* activation checkpointing group size, 0 = none */
};

void zt_llama_set_checkpointing(zt_llama *m, int k) { m->ckpt = k > 0 ? k : 0; }

/* ------------------------------------------------------------ layout */

/* Rows and columns of block tensor k (rows 0: absent in this shape). */
static void layer_tensor_shape(const shape *s, int k, int *rows, int *cols) {
    int r = s->C, c = 1;
    switch (k) {
    case T_QW: r = s->AD; c = s->C; break;
    case T_KW: case T_VW: r = s->NKV * s->hd; c = s->C; break;
    case T_QB: r = s->bias ? s->AD : 0; break;
    case T_KB: case T_VB: r = s->bias ? s->NKV * s->hd : 0; break;
    case T_OW: c = s->AD; break;
    case T_GATEW: case T_UPW: r = s->H; c = s->C; break;
    case T_DOWNW: c = s->H; break;
    default: break;   /* the norms: [C] */
    }
    *rows = r;
    *cols = c;
}

size_t zt_llama_unit_numel(const zt_model_config *mc, int u) {
    shape s = shape_of(mc);
    if (u == 0) return (size_t)s.V * s.C;
    if (u == s.L + 1) return (size_t)s.C + (s.tied ? 0 : (size_t)s.V * s.C);
    size_t n = 0;
    for (int k = 0; k < T_PER_LAYER; ++k) {
        int r, c;
        layer_tensor_shape(&s, k, &r, &c);
        n += (size_t)r * (size_t)c;
    }
    return n;
}

static int llama_describe(void *self, zt_layout *Lo, zt_status *st) {
    zt_llama *m = self;
    const shape *s = &m->s;
    const double std = 0.02;
    ZT_TRY(zt_layout_unit(Lo, "embeddings", st));
    ZT_TRY(zt_layout_tensor(Lo, "embed.w", s->V, s->C, ZT_INIT_NORMAL, std, ZT_TENSOR_DECAY,
                            &m->off_embed, st));
    for (int l = 0; l < s->L; ++l) {
        char un[24], tn[40];
        snprintf(un, sizeof un, "block.%d", l);
        ZT_TRY(zt_layout_unit(Lo, un, st));
        for (int k = 0; k < T_PER_LAYER; ++k) {
            int rows, cols;
            layer_tensor_shape(s, k, &rows, &cols);
            if (!rows) continue;
            /* matrices: normal, decayed; norms ones; biases zeros */
            const int mat = cols > 1;
            const zt_init_kind init = mat ? ZT_INIT_NORMAL
                                          : (k == T_ANORM || k == T_MNORM) ? ZT_INIT_ONES : ZT_INIT_ZEROS;
            snprintf(tn, sizeof tn, "h%d.%s", l, layer_names[k]);
            ZT_TRY(zt_layout_tensor(Lo, tn, rows, cols, init, mat ? std : 0.0,
                                    mat ? ZT_TENSOR_DECAY : 0, &m->off_layer[k], st));
        }
    }
    ZT_TRY(zt_layout_unit(Lo, "head", st));
    ZT_TRY(zt_layout_tensor(Lo, "norm.w", s->C, 1, ZT_INIT_ONES, 0, 0, &m->off_norm, st));
    if (!s->tied)
        ZT_TRY(zt_layout_tensor(Lo, "lm_head.w", s->V, s->C, ZT_INIT_NORMAL, std, ZT_TENSOR_DECAY,
                                &m->off_lm_head, st));
    return ZT_OK;
}

/* Point the tensors of unit u in a view at a unit-sized buffer. */
static void bind_unit(const zt_llama *m, int u, float *base, zt_llama_params *v) {
    const int L = m->s.L;
    if (u == 0) {
        v->embed = base + m->off_embed;
    } else if (u == L + 1) {
        v->norm = base + m->off_norm;
        v->lm_head = m->s.tied ? NULL : base + m->off_lm_head;
    } else {
        zt_llama_layer *h = &v->h[u - 1];
        const size_t *o = m->off_layer;
        h->attn_norm = base + o[T_ANORM];
        h->qkvw = base + o[T_QW];            /* q.w | k.w | v.w */
        h->qkvb = m->s.bias ? base + o[T_QB] : NULL;   /* q.b | k.b | v.b */
        h->ow = base + o[T_OW];
        h->mlp_norm = base + o[T_MNORM];
        h->guw = base + o[T_GATEW];          /* gate.w | up.w */
        h->downw = base + o[T_DOWNW];
    }
}

int zt_llama_new(const zt_model_config *mc, const zt_backend *be, zt_llama **out, zt_status *st) {
    *out = NULL;
    const shape s = shape_of(mc);
    if (s.L < 1 || s.NH < 1 || s.C < 1 || mc->context < 1 || s.V < 2 || s.NKV < 1 ||
        s.NH % s.NKV || s.hd < 2 || s.hd % 2 || s.H < 1 || !(mc->norm_eps > 0) ||
        !(mc->rope_theta > 0))
        return zt_fail(st, ZT_EINVAL, "invalid llama shape (n_layer %d, n_head %d, n_kv_head %d, "
                       "head_dim %d, n_embd %d, intermediate %d, context %d, vocab %d, "
                       "rms_norm_eps %g, rope_theta %g)", s.L, s.NH, s.NKV, s.hd, s.C, s.H,
                       mc->context, s.V, mc->norm_eps, mc->rope_theta);
    zt_llama *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    m->cfg = *mc;
    m->s = s;
    m->be = be;
    m->p.h = calloc((size_t)s.L, sizeof(zt_llama_layer));
    m->g.h = calloc((size_t)s.L, sizeof(zt_llama_layer));
    if (!m->p.h || !m->g.h) {
        zt_llama_free(m);
        return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    }
    *out = m;
    return ZT_OK;
}

void zt_llama_free(zt_llama *m) {
    if (!m) return;
    free(m->p.h);
    free(m->g.h);
    free(m);
}

static void llama_destroy(void *self) { zt_llama_free(self); }

/* ------------------------------------------------------------ rotary frequencies */

void zt_llama_inv_freq(const zt_model_config *mc, float *inv_freq) {
    const int hd = zt_model_head_dim(mc);
    const float base = (float)mc->rope_theta;
    const int llama3 = strcmp(mc->rope_scaling, "llama3") == 0;
    /* transformers, all in float32: 1 / base ** (arange(0, hd, 2) / hd);
     * llama3: wavelen = 2 pi / f (torch: reciprocal(f) * 2 pi).  Bitwise
     * transformers' values (tests/llama_hf.sh). */
    const float factor = (float)mc->rope_factor, low = (float)mc->rope_low_freq_factor;
    const float old = (float)mc->rope_original_max;
    const float low_wavelen = (float)((double)mc->rope_original_max / mc->rope_low_freq_factor);
    const float high_wavelen = (float)((double)mc->rope_original_max / mc->rope_high_freq_factor);
    const float span = (float)(mc->rope_high_freq_factor - mc->rope_low_freq_factor);
    for (int j = 0; j < hd / 2; ++j) {
        float e = (float)(2 * j) / (float)hd;
        float f = 1.0f / powf(base, e);
        if (llama3) {
            float wavelen = (1.0f / f) * (float)6.283185307179586;
            if (wavelen > low_wavelen) {
                f = f / factor;
            } else if (!(wavelen < high_wavelen)) {
                float smooth = ((1.0f / wavelen) * old - low) / span;
                f = (1.0f - smooth) * f / factor + smooth * f;
            }
        }
        inv_freq[j] = f;
    }
}

/* ------------------------------------------------------------ activations */

/* Carve the activation block (gpt.c's scheme; base == NULL: sizes only).
 * Every array is rounded up to 16 elements. */
static size_t carve(const zt_model_config *mc, int B, int T, int training, int ckpt,
                    zt_llama_acts *a, float *base) {
    const shape sh = shape_of(mc);
    size_t N = (size_t)B * T, C = (size_t)sh.C, V = (size_t)sh.V, L = (size_t)sh.L;
    size_t QKV = (size_t)sh.QKV, AD = (size_t)sh.AD, H = (size_t)sh.H;
    size_t k = zt_acts_ckpt_group(ckpt, training, L);
    size_t slots = zt_acts_n_slots(training, k, L);
    size_t off = 0;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += ((size_t)(n) + 15) & ~(size_t)15; } while (0)
    float *dummy;
    (void)dummy;
    TAKE(a->inv_freq, (size_t)sh.hd / 2);
    off = zt_acts_carve_res(a->res, base, off, training, L, k, N * C);
    for (size_t s = 0; s < slots; ++s) {
        struct zt_llama_layer_acts *la = base ? &a->layer[s] : NULL;
#define LTAKE(f, n) do { if (la) { TAKE(la->f, n); } else { TAKE(dummy, n); } } while (0)
        LTAKE(xn, N * C); LTAKE(rstd1, N);
        LTAKE(qkv, N * QKV); LTAKE(atty, N * AD); LTAKE(lse, (size_t)B * sh.NH * T);
        LTAKE(res2, N * C);
        LTAKE(xn2, N * C); LTAKE(rstd2, N);
        LTAKE(gu, N * 2 * H); LTAKE(h, N * H);
#undef LTAKE
    }
    TAKE(a->scratch, N * C);
    TAKE(a->lnf, N * C); TAKE(a->lnf_rstd, N);
    TAKE(a->probs, N * V); TAKE(a->losses, N);
    /* int and float are both 4 bytes: the -1 targets share the block */
    if (base) a->no_targets = (int *)(void *)(base + off);
    off += (N + 15) & ~(size_t)15;
    if (training) {
        TAKE(a->dres, N * C); TAKE(a->dbuf, N * C); TAKE(a->datt, N * AD);
        TAKE(a->dqkv, N * QKV); TAKE(a->dh, N * H); TAKE(a->dgu, N * 2 * H);
    }
#undef TAKE
    return off * sizeof(float);
}

size_t zt_llama_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt) {
    zt_llama_acts a;
    memset(&a, 0, sizeof a);
    return carve(mc, B, T, training, ckpt, &a, NULL);
}

static void llama_acts_free(void *self, void *acts) {
    (void)self;
    zt_llama_acts *a = acts;
    ZT_ACTS_FREE(a);
}

static int llama_acts_create(void *self, int B, int T, int training, int mem_tag, void **out,
                             zt_status *st) {
    const zt_llama *m = self;
    *out = NULL;
    if (B < 1 || T < 1 || T > m->cfg.context)
        return zt_fail(st, ZT_EINVAL, "batch shape B=%d T=%d invalid (context %d)",
                       B, T, m->cfg.context);
    zt_llama_acts *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(st, ZT_ENOMEM, "out of memory");
    const int L = m->s.L;
    a->B = B; a->T = T; a->training = training;
    a->ckpt = (int)zt_acts_ckpt_group(m->ckpt, training, (size_t)L);
    a->n_slots = (int)zt_acts_n_slots(training, (size_t)a->ckpt, (size_t)L);
    a->res = calloc((size_t)(training ? L + 1 : 2), sizeof(float *));
    a->layer = calloc((size_t)a->n_slots, sizeof *a->layer);
    float *freq = malloc(sizeof(float) * (size_t)(m->s.hd / 2));
    if (!a->res || !a->layer || !freq) {
        free(freq);
        llama_acts_free(self, a);
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    size_t bytes = zt_llama_acts_bytes_ckpt(&m->cfg, B, T, training, m->ckpt);
    a->block = zt_mem_alloc(bytes, mem_tag, st);
    if (!a->block) {
        free(freq);
        llama_acts_free(self, a);
        return zt_fail_prefix(st, "activations for B=%d T=%d", B, T);
    }
    a->bytes = bytes;
    carve(&m->cfg, B, T, training, m->ckpt, a, a->block);
    /* the rotary frequencies (device memory: staged) */
    zt_llama_inv_freq(&m->cfg, freq);
    zt_xcopy(m->be, a->inv_freq, 1, freq, 0, sizeof(float) * (size_t)(m->s.hd / 2));
    free(freq);
    /* the -1 targets of a forward without targets */
    zt_acts_fill_no_targets(m->be, a->no_targets, (size_t)B * T);
    *out = a;
    return ZT_OK;
}

/* ------------------------------------------------------------ forward */

/* Unit binding and release (model_acts.h). */
#define PARAMS(u) ZT_UNIT_PARAMS(m, u)
#define GRADS(u) ZT_UNIT_GRADS(m, u)
#define RELEASE(u) ZT_UNIT_RELEASE(u)

/* Block l's forward from res[l] into its slot and res[l+1]; backward runs it
 * again to recompute a checkpointed block (bitwise the same values). */
static void block_fwd(zt_llama *m, zt_llama_acts *a, int l) {
    const zt_backend *be = m->be;
    const shape *sh = &m->s;
    const int B = a->fB, T = a->fT, N = B * T, C = sh->C, H = sh->H;
    const float eps = (float)m->cfg.norm_eps;
    const zt_llama_layer *w = &m->p.h[l];
    struct zt_llama_layer_acts *s = ZT_ACTS_SLOT(a, l);
    float *x = ZT_ACTS_RES(a, l), *y = ZT_ACTS_RES(a, l + 1);
    /* attention: res2 = x + o(gqa(rope(qkv(rmsnorm(x))))) */
    be->rmsnorm_fwd(s->xn, s->rstd1, x, w->attn_norm, eps, N, C);
    be->matmul_fwd(s->qkv, s->xn, w->qkvw, w->qkvb, N, C, sh->QKV);
    be->rope_fwd(s->qkv, a->inv_freq, B, T, sh->NH + sh->NKV, sh->QKV, sh->hd);
    be->gqa_fwd(s->atty, s->lse, s->qkv, B, T, sh->NH, sh->NKV, sh->hd);
    be->matmul_fwd(a->scratch, s->atty, w->ow, NULL, N, sh->AD, C);
    be->add(s->res2, x, a->scratch, (size_t)N * C);
    /* MLP: y = res2 + down(swiglu(gate|up(rmsnorm(res2)))) */
    be->rmsnorm_fwd(s->xn2, s->rstd2, s->res2, w->mlp_norm, eps, N, C);
    be->matmul_fwd(s->gu, s->xn2, w->guw, NULL, N, C, 2 * H);
    be->swiglu_fwd(s->h, s->gu, N, H);
    be->matmul_fwd(a->scratch, s->h, w->downw, NULL, N, H, C);
    be->add(y, s->res2, a->scratch, (size_t)N * C);
}

/* block_fwd with the block's unit acquired and released (zt_block_fwd_unit_fn). */
static int block_fwd_unit(void *self, zt_units *U, void *acts, int l, zt_status *st) {
    zt_llama *m = self;
    PARAMS(1 + l);
    block_fwd(m, acts, l);
    RELEASE(1 + l);
    return ZT_OK;
}

static int llama_forward(void *self, zt_units *U, void *acts, const int *inputs,
                         const int *targets, int B, int T, double *loss_sum, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const zt_backend *be = m->be;
    const int C = m->s.C, V = m->s.V, L = m->s.L, tied = m->s.tied;
    if (B < 1 || B > a->B || T < 1 || T > a->T)
        return zt_fail(st, ZT_EINVAL, "forward on B=%d T=%d exceeds the activations' %dx%d",
                       B, T, a->B, a->T);
    const int N = B * T;
    a->fB = B; a->fT = T;
    a->inputs = inputs;
    a->targets = targets ? targets : a->no_targets;

    PARAMS(0);
    be->encoder_fwd(ZT_ACTS_RES(a, 0), inputs, m->p.embed, NULL, B, T, C);
    if (!tied) RELEASE(0);   /* tied: kept for the LM head, as the GPT */
    for (int l = 0; l < L; ++l) ZT_TRY(block_fwd_unit(m, U, a, l, st));
    PARAMS(L + 1);
    be->rmsnorm_fwd(a->lnf, a->lnf_rstd, ZT_ACTS_RES(a, L), m->p.norm, (float)m->cfg.norm_eps, N, C);
    if (tied) {
        /* logits[N,V] = lnf @ embed^T; a training pass keeps the embedding
         * unit gathered for the head's backward */
        RELEASE(L + 1);
        PARAMS(0);
        be->matmul_fwd(a->probs, a->lnf, m->p.embed, NULL, N, C, V);
        if (!a->training) RELEASE(0);
    } else {
        be->matmul_fwd(a->probs, a->lnf, m->p.lm_head, NULL, N, C, V);
        RELEASE(L + 1);
    }
    be->xent_fwd(a->losses, a->probs, a->probs, a->targets, N, V);
    *loss_sum = targets ? be->sum(a->losses, (size_t)N) : 0.0;
    return ZT_OK;
}

static const float *llama_probs(void *self, void *acts, int b, int t) {
    const zt_llama *m = self;
    const zt_llama_acts *a = acts;
    return a->probs + ((size_t)b * a->fT + (size_t)t) * m->s.V;
}

/* ------------------------------------------------------------ backward */

static int llama_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const zt_backend *be = m->be;
    const shape *sh = &m->s;
    const int B = a->fB, T = a->fT, C = sh->C, V = sh->V, L = sh->L, H = sh->H, N = B * T;
    const size_t NC = (size_t)N * C;
    if (!a->training)
        return zt_fail(st, ZT_EINTERNAL, "backward on forward-only activations");

    be->xent_bwd(a->probs, a->probs, a->targets, dloss, N, V);
    /* LM head: dlnf = dlogits @ W ; dW += dlogits^T @ lnf, W = embed.w
     * (tied, unit 0) or lm_head.w (unit L+1); then the final RMSNorm */
    if (sh->tied) {
        PARAMS(0);
        GRADS(0);
        be->matmul_bwd(a->dbuf, m->g.embed, NULL, a->probs, a->lnf, m->p.embed, N, C, V);
        RELEASE(0);
        PARAMS(L + 1);
        GRADS(L + 1);
    } else {
        PARAMS(L + 1);
        GRADS(L + 1);
        be->matmul_bwd(a->dbuf, m->g.lm_head, NULL, a->probs, a->lnf, m->p.lm_head, N, C, V);
    }
    be->zero(a->dres, NC * sizeof(float));
    be->rmsnorm_bwd(a->dres, m->g.norm, a->dbuf, a->res[L], m->p.norm, a->lnf_rstd, N, C);
    RELEASE(L + 1);
    ZT_TRY(zt_unit_grads_done(U, L + 1, st));
    const int k = a->ckpt;
    for (int l = L - 1; l >= 0; --l) {
        /* checkpointing (gpt.c's groups): at the top block of a group,
         * recompute the blocks below it from the kept input */
        int top;
        ZT_TRY(zt_acts_recompute_below(block_fwd_unit, m, U, a, k, L, l, &top, st));
        PARAMS(1 + l);
        GRADS(1 + l);
        if (top) block_fwd(m, a, l);
        const zt_llama_layer *w = &m->p.h[l];
        zt_llama_layer *gw = &m->g.h[l];
        struct zt_llama_layer_acts *s = ZT_ACTS_SLOT(a, l);
        /* MLP: dres flows to res2 unchanged and into the down projection */
        be->matmul_bwd(a->dh, gw->downw, NULL, a->dres, s->h, w->downw, N, H, C);
        be->swiglu_bwd(a->dgu, a->dh, s->gu, N, H);
        be->matmul_bwd(a->dbuf, gw->guw, NULL, a->dgu, s->xn2, w->guw, N, C, 2 * H);
        be->rmsnorm_bwd(a->dres, gw->mlp_norm, a->dbuf, s->res2, w->mlp_norm, s->rstd2, N, C);
        /* attention; the rotation's gradient is the inverse rotation */
        be->matmul_bwd(a->datt, gw->ow, NULL, a->dres, s->atty, w->ow, N, sh->AD, C);
        be->gqa_bwd(a->dqkv, a->datt, s->qkv, s->atty, s->lse, B, T, sh->NH, sh->NKV, sh->hd);
        be->rope_bwd(a->dqkv, a->inv_freq, B, T, sh->NH + sh->NKV, sh->QKV, sh->hd);
        be->matmul_bwd(a->dbuf, gw->qkvw, gw->qkvb, a->dqkv, s->xn, w->qkvw, N, C, sh->QKV);
        be->rmsnorm_bwd(a->dres, gw->attn_norm, a->dbuf, a->res[l], w->attn_norm, s->rstd1, N, C);
        RELEASE(1 + l);
        ZT_TRY(zt_unit_grads_done(U, 1 + l, st));
    }
    /* embeddings (acquired like every unit before its backward) */
    PARAMS(0);
    GRADS(0);
    be->encoder_bwd(m->g.embed, NULL, a->dres, a->inputs, B, T, C);
    RELEASE(0);
    ZT_TRY(zt_unit_grads_done(U, 0, st));
    return ZT_OK;
}

static const zt_model_ops llama_ops = {
    "llama", llama_describe, llama_acts_create, llama_acts_free, llama_forward, llama_backward,
    llama_probs, llama_destroy,
};

const zt_model_ops *zt_llama_ops(void) { return &llama_ops; }
int zt_model_is_llama(const zt_model *m) { return m->ops == &llama_ops; }
