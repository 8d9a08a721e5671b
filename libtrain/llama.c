/* llama.c -- the built-in Llama-family model on the public unit API:
 * layout, activations, forward, backward (layout and data flow: llama.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devmem.h"
#include "llama.h"
#include "model_acts.h"
#include "model_skel.h"
#include <jansson.h>
#include "arch.h"
#include "seqpar.h"
#include "cuda/cuda_workspace.h"

/* The tensor table (arch.h), in layout order.  The three biases exist only
 * with attention_bias, q_norm.w / k_norm.w [hd] with qk_norm, the norms
 * after attention and after the MLP [C] with gemma (their Hugging Face
 * names: post_attention_layernorm, post_feedforward_layernorm; Gemma's
 * pre-MLP norm mlp_norm.w is pre_feedforward_layernorm, gemma_rename),
 * lm_head.w only untied. */
enum { E_EMBED, T_ANORM, T_QW, T_KW, T_VW, T_QB, T_KB, T_VB, T_QNORM, T_KNORM, T_OW, T_PANORM, T_MNORM,
       T_GATEW, T_UPW, T_DOWNW, T_ROUTER, T_EXGU, T_EXDOWN, T_SHGATE, T_PMNORM, E_NORM, E_LM_HEAD,
       LLAMA_NT };
#define HB(x) "model.layers.%d." x
static const zt_arch_tensor llama_tensors[LLAMA_NT] = {
    {"embed.w", "model.embed_tokens.weight", ZT_AT_EMBED, ZT_AT_NORMAL, 0},
    {"attn_norm.w", HB("input_layernorm.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"q.w", HB("self_attn.q_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"k.w", HB("self_attn.k_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"v.w", HB("self_attn.v_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"q.b", HB("self_attn.q_proj.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"k.b", HB("self_attn.k_proj.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"v.b", HB("self_attn.v_proj.bias"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"q_norm.w", HB("self_attn.q_norm.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"k_norm.w", HB("self_attn.k_norm.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"o.w", HB("self_attn.o_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"post_attn_norm.w", HB("post_attention_layernorm.weight"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"mlp_norm.w", HB("post_attention_layernorm.weight"), ZT_AT_BLOCK, ZT_AT_ONES, 0},
    {"gate.w", HB("mlp.gate_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"up.w", HB("mlp.up_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"down.w", HB("mlp.down_proj.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    /* Mixture of Experts (moe.h): transformers 5's names (the hub files'
     * per-expert tensors: zt_arch_hf.experts) */
    {"router.w", HB("mlp.gate.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"experts.gate_up.w", HB("mlp.experts.gate_up_proj"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"experts.down.w", HB("mlp.experts.down_proj"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"shared_gate.w", HB("mlp.shared_expert_gate.weight"), ZT_AT_BLOCK, ZT_AT_NORMAL, 0},
    {"post_mlp_norm.w", HB("post_feedforward_layernorm.weight"), ZT_AT_BLOCK, ZT_AT_ZEROS, 0},
    {"norm.w", "model.norm.weight", ZT_AT_HEAD, ZT_AT_ONES, 0},
    {"lm_head.w", "lm_head.weight", ZT_AT_HEAD, ZT_AT_NORMAL, 0},
};
#undef HB

/* LoRA's groups: the block's matmuls (lora.h) */
enum { LG_QKV, LG_O, LG_GU, LG_DOWN };

/* The model's shape, derived once from the configuration. */
typedef struct shape {
    int C, L, V, NH, NKV, hd, H;
    int QKV;                   /* (NH + 2 NKV) * hd: one qkv row */
    int AD;                    /* NH * hd: attention output width */
    int bias, tied;
    /* sequence parallelism (seqpar.h): group size, and per rank the query
     * and key/value heads, the head-sharded qkv row and attention width */
    int sp, NHl, NKVl, QKVl, ADl;
    int qkn;                   /* per-head q/k RMSNorm (Qwen3) */
    /* the q and k norms' heads and width: per head (NH or NKV of hd), or one
     * over the whole projection (qk_norm_full, OLMoE) */
    int qnh, qw, knh, kw;
    /* Gemma 2/3: (1 + w) norms, post-attention / post-MLP norms, GeGLU,
     * embedding scale; attention scale, soft-caps, sliding window and
     * pattern, the sliding layers' own rotary frequencies */
    int gemma;
    float escale, ascale, acap, fcap;
    int window, pattern, from, local_rope;
    /* Mixture of Experts (moe.h): experts E (0: a dense MLP), top-k K, their
     * width I; H is then the shared expert's width (0: none).  Hd: a dense
     * block's MLP width (intermediate_size; every block without experts),
     * Hmax the widest MLP of any block, Ls the blocks with experts */
    int E, K, I, norm;
    int ep;                    /* expert_parallel_size (moe.h), 1: off */
    int Hd, Hmax, Ls;
} shape;

/* Block l's MLP width (its SwiGLU; a sparse block's shared expert) */
static int layer_H(const shape *s, int sparse) { return sparse ? s->H : s->Hd; }

/* Is block l a sliding layer (transformers' "sliding_attention": Gemma 3's
 * local rotary embedding), and does it attend through a window? */
static int layer_sliding_type(const shape *s, int l) {
    return l >= s->from && !(s->pattern > 0 && (l + 1) % s->pattern == 0);
}
static int layer_slides(const shape *s, int l) { return s->window > 0 && layer_sliding_type(s, l); }

static shape shape_of(const zt_model_config *mc) {
    shape s;
    s.C = mc->n_embd;
    s.L = mc->n_layer;
    s.V = mc->vocab;
    s.NH = mc->n_head;
    s.NKV = zt_model_kv_heads(mc);
    s.hd = zt_model_head_dim(mc);
    s.E = mc->n_experts > 0 ? mc->n_experts : 0;
    s.K = s.E ? mc->experts_per_token : 0;
    s.I = s.E ? mc->moe_intermediate : 0;
    s.norm = mc->moe_norm_topk != 0;
    s.ep = s.E && mc->expert_parallel > 1 ? mc->expert_parallel : 1;
    s.H = s.E ? (mc->shared_expert > 0 ? mc->shared_expert : 0) : zt_model_intermediate(mc);
    s.Hd = zt_model_intermediate(mc);
    s.Ls = s.E ? zt_model_sparse_layers(mc) : 0;
    s.Hmax = s.Ls < mc->n_layer && s.Hd > s.H ? s.Hd : s.H;
    s.QKV = (s.NH + 2 * s.NKV) * s.hd;
    s.AD = s.NH * s.hd;
    s.bias = mc->attention_bias != 0;
    s.tied = mc->tie_embeddings != 0;
    s.sp = mc->seq_parallel > 1 ? mc->seq_parallel : 1;
    s.NHl = s.NH / s.sp;
    s.NKVl = s.NKV / s.sp;
    s.QKVl = s.QKV / s.sp;
    s.ADl = s.AD / s.sp;
    s.qkn = mc->qk_norm != 0;
    const int full = s.qkn && mc->qk_norm_full;
    s.qnh = full ? 1 : s.NH;
    s.qw = full ? s.AD : s.hd;
    s.knh = full ? 1 : s.NKV;
    s.kw = full ? s.NKV * s.hd : s.hd;
    s.gemma = mc->gemma != 0;
    /* transformers: the normalizer sqrt(hidden) in the hidden dtype (fp32),
     * the scale query_pre_attn_scalar ** -0.5 as an fp32 factor */
    s.escale = s.gemma ? (float)sqrt((double)s.C) : 1.0f;
    s.ascale = s.gemma && mc->query_pre_attn_scalar > 0 ? (float)pow(mc->query_pre_attn_scalar, -0.5)
                                                        : 1.0f / sqrtf((float)s.hd);
    s.acap = s.gemma ? (float)mc->attn_softcap : 0.0f;
    s.fcap = s.gemma ? (float)mc->final_softcap : 0.0f;
    s.window = mc->sliding_window;   /* Gemma; Mistral, Phi-3, Qwen2/3 */
    s.pattern = mc->sliding_pattern;
    s.from = mc->sliding_from;
    s.local_rope = s.gemma && mc->rope_local_theta > 0;
    return s;
}

struct zt_llama {
    zt_skel sk;                        /* the unit skeleton, LoRA's adapters (model_skel.h) */
    zt_model_config cfg;
    shape s;
    const zt_backend *be;
    float rope_scale;                  /* cos / sin scale (zt_llama_rope_scale) */
    size_t off[2 * LLAMA_NT];          /* in its unit (block tensors: in every block unit of
                                        * its kind, off[sparse * LLAMA_NT + k]) */
    size_t off32[2 * LLAMA_NT];        /* the same in the fp32 copy without the GEMM weights */
    unsigned char *sparse;             /* [L] block l has experts (zt_model_layer_sparse) */
    zt_llama_params p, g;              /* views, bound unit by unit */
    int ckpt;                          /* activation checkpointing group size, 0 = none */
    zt_seqpar sp;                      /* sequence parallelism (n = 1: off) */
    zt_sp_slices qkv_sl, att_sl;       /* its exchanges: q|k|v rows, attention rows */
    zt_moe_shape ms;                   /* Mixture of Experts (s.E > 0; moe.h) */
    zt_moe_host mh;
    /* the load-balancing loss of the last forward (moe.h zt_moe_aux): top-k
     * counts and probability sums over its layers, while a forward (not a
     * backward's recomputation) runs; its value and token count */
    double *aux_cnt, *aux_psum;
    float *aux_buf;                    /* [E] host staging */
    int aux_fwd, aux_N, aux_have;
    double aux;
    const uint16_t **p16;              /* [nu]: each unit's bf16 bits (zt_unit_params16), or NULL */
    /* the units (zt_arch_describe): 0 the embeddings, per block its unit and,
     * with experts, the units of experts.gate_up.w and experts.down.w, the
     * head last (nu - 1) */
    int nu;
    int *ub;                           /* [L + 1]: block l's first unit (ub[L]: the head's) */
    int *ublk, *ukind;                 /* [nu]: its block (-1 embeddings, L head) and entry
                                        * (0: the block's own unit, else T_EXGU / T_EXDOWN) */
};

/* set_mesh (arch.h): sequence parallelism's group (seqpar.h), expert
 * parallelism's (moe.h) */
static int llama_set_mesh(void *self, const zt_mesh *mesh, zt_status *st) {
    zt_llama *m = self;
    const shape *s = &m->s;
    ZT_TRY(zt_skel_seqpar(mesh, s->sp, "llama", &m->sp, st));
    if (s->E) ZT_TRY(zt_moe_set_mesh(&m->mh, &m->ms, mesh, st));
    const size_t hd = (size_t)s->hd, KV = (size_t)s->NKV * hd;
    m->qkv_sl = (zt_sp_slices){3, (size_t)s->QKV, {0, (size_t)s->AD, (size_t)s->AD + KV},
                               {(size_t)s->NHl * hd, (size_t)s->NKVl * hd, (size_t)s->NKVl * hd}};
    m->att_sl = (zt_sp_slices){1, (size_t)s->AD, {0, 0, 0}, {(size_t)s->ADl, 0, 0}};
    return ZT_OK;
}

void zt_llama_set_checkpointing(zt_llama *m, int k) { m->ckpt = k > 0 ? k : 0; }

/* ------------------------------------------------------------ layout */

/* Rows and columns of tensor k (rows 0: absent in this shape) in a block
 * with experts (sparse) or without. */
static void tensor_shape(const shape *s, int sparse, int k, int *rows, int *cols) {
    int r = s->C, c = 1;
    const int E = sparse ? s->E : 0, H = layer_H(s, sparse);
    switch (k) {
    case E_EMBED: r = s->V; c = s->C; break;
    case T_QW: r = s->AD; c = s->C; break;
    case T_KW: case T_VW: r = s->NKV * s->hd; c = s->C; break;
    case T_QB: r = s->bias ? s->AD : 0; break;
    case T_KB: case T_VB: r = s->bias ? s->NKV * s->hd : 0; break;
    case T_QNORM: r = s->qkn ? s->qw : 0; break;
    case T_KNORM: r = s->qkn ? s->kw : 0; break;
    case T_PANORM: case T_PMNORM: r = s->gemma ? s->C : 0; break;
    case T_OW: c = s->AD; break;
    case T_GATEW: case T_UPW: r = H; c = s->C; break;
    case T_DOWNW: r = H ? s->C : 0; c = H; break;
    case T_ROUTER: r = E; c = s->C; break;
    case T_EXGU: r = E * 2 * s->I; c = s->C; break;
    case T_EXDOWN: r = E * s->C; c = s->I; break;
    case T_SHGATE: r = E && H ? 1 : 0; c = s->C; break;
    case E_LM_HEAD: r = s->tied ? 0 : s->V; c = s->C; break;
    default: break;   /* the norms: [C] */
    }
    *rows = r;
    *cols = c;
}

/* Gemma applies its norms as 1 + w: they start at 0 (transformers' init) */
static int llama_tensor_init(const zt_model_config *mc, int k) {
    if (mc->gemma && llama_tensors[k].init == ZT_AT_ONES) return ZT_AT_ZEROS;
    return llama_tensors[k].init;
}

/* The experts' tensors live in units of their own (expert parallelism
 * stores each rank's experts alone: docs/moe.md) */
static const char *llama_own_unit(int k) {
    return k == T_EXGU ? "experts_gu" : k == T_EXDOWN ? "experts_down" : NULL;
}

/* zt_arch.gemm_weight: q, k, v, o, gate, up, down, the shared expert's
 * gate, the router and experts (moe.c), an untied LM head (read through
 * zt_mm_* and the classifier), the embedding (zt_enc_fwd; a tied head's
 * classifier) */
static int llama_gemm_weight(const zt_model_config *mc, int k) {
    (void)mc;
    return k == T_QW || k == T_KW || k == T_VW || k == T_OW || k == T_GATEW || k == T_UPW ||
           k == T_DOWNW || k == T_SHGATE || k == T_ROUTER || k == T_EXGU || k == T_EXDOWN ||
           k == E_LM_HEAD || k == E_EMBED;
}

static int llama_block_kind(const zt_model_config *mc, int l) {
    return zt_model_layer_sparse(mc, l);
}

static void llama_tensor_shape(const zt_model_config *mc, int l, int k, int *rows, int *cols) {
    const shape s = shape_of(mc);
    tensor_shape(&s, llama_tensors[k].unit == ZT_AT_BLOCK && zt_model_layer_sparse(mc, l), k, rows,
                 cols);
}

size_t zt_llama_unit_numel(const zt_model_config *mc, int u) {
    return (size_t)zt_arch_unit_numel(&zt_arch_llama, mc, u);
}

static int llama_describe(void *self, zt_layout *Lo, zt_status *st) {
    zt_llama *m = self;
    zt_arch_offsets32(&zt_arch_llama, &m->cfg, m->off32);
    return zt_arch_describe(&zt_arch_llama, &m->cfg, Lo, m->off, st);
}

/* Point the tensors of unit u in a view (grads: the gradients') at a
 * unit-sized buffer (zt_skel_ops.bind). */
static void bind_unit(void *self, int u, float *base, int grads) {
    zt_llama *m = self;
    zt_llama_params *v = grads == ZT_BIND_GRADS ? &m->g : &m->p;
    const int L = m->s.L, l = m->ublk[u];
    const int c32 = grads == ZT_BIND_PARAMS32;   /* GEMM weights: NULL (the bf16 storage's) */
    const size_t *o = c32 ? m->off32 : m->off;
    if (l >= 0 && l < L && m->sparse[l]) o += LLAMA_NT;
    if (l >= 0 && l < L && m->ukind[u]) {   /* an expert tensor's own unit (GEMM-only: its fp32
                                             * copy is empty) */
        float *w = c32 ? NULL : base;
        if (m->ukind[u] == T_EXGU) v->h[l].exgu = w;
        else v->h[l].exdown = w;
        return;
    }
    if (u == 0) {
        v->embed = c32 ? NULL : base + o[E_EMBED];
    } else if (l == L) {
        v->norm = base + o[E_NORM];
        v->lm_head = m->s.tied || c32 ? NULL : base + o[E_LM_HEAD];
    } else {
        zt_llama_layer *h = &v->h[l];
        const int moe = m->sparse[l];
        h->attn_norm = base + o[T_ANORM];
        h->qkvw = c32 ? NULL : base + o[T_QW];            /* q.w | k.w | v.w */
        h->qkvb = m->s.bias ? base + o[T_QB] : NULL;   /* q.b | k.b | v.b */
        h->q_norm = m->s.qkn ? base + o[T_QNORM] : NULL;
        h->k_norm = m->s.qkn ? base + o[T_KNORM] : NULL;
        h->ow = c32 ? NULL : base + o[T_OW];
        h->post_attn_norm = m->s.gemma ? base + o[T_PANORM] : NULL;
        h->mlp_norm = base + o[T_MNORM];
        h->guw = layer_H(&m->s, moe) && !c32 ? base + o[T_GATEW] : NULL;   /* gate.w | up.w */
        h->downw = layer_H(&m->s, moe) && !c32 ? base + o[T_DOWNW] : NULL;
        h->post_mlp_norm = m->s.gemma ? base + o[T_PMNORM] : NULL;
        h->router = moe && !c32 ? base + o[T_ROUTER] : NULL;   /* (the experts: units of their own) */
        h->shgate = moe && m->s.H && !c32 ? base + o[T_SHGATE] : NULL;
    }
}

/* zt_skel_ops.bind16 */
static void bind16_unit(void *self, int u, const uint16_t *base16) {
    zt_llama *m = self;
    m->p16[u] = base16;
}
/* block tensor t's bf16 bits for the layer whose views are w (model.h
 * zt_mm_fwd), or NULL */
static const uint16_t *w16_of(const zt_llama *m, const zt_llama_layer *w, int t) {
    const int l = (int)(w - m->p.h);
    int u = m->ub[l];   /* the block's unit, or the expert tensor's own */
    if (t == T_EXGU || t == T_EXDOWN) {
        u = -1;
        for (int i = m->ub[l] + 1; i < m->ub[l + 1]; ++i)
            if (m->ukind[i] == t) u = i;
        if (u < 0) return NULL;
    }
    const uint16_t *u16 = m->p16[u];
    return u16 ? u16 + m->off[(m->sparse[l] ? LLAMA_NT : 0) + t] : NULL;   /* (its kind's layout) */
}
#define LW16(m, w, t) w16_of((m), (w), (t))

static const zt_skel_ops llama_skel;

int zt_llama_new(const zt_model_config *mc, const zt_backend *be, zt_llama **out, zt_status *st) {
    *out = NULL;
    const shape s = shape_of(mc);
    if (s.L < 1 || s.NH < 1 || s.C < 1 || mc->context < 1 || s.V < 2 || s.NKV < 1 ||
        s.NH % s.NKV || s.hd < 2 || s.hd % 2 || (s.H < 1 && !s.E) || !(mc->norm_eps > 0) ||
        !(mc->rope_theta > 0))
        return zt_fail(st, ZT_EINVAL, "invalid llama shape (n_layer %d, n_head %d, n_kv_head %d, "
                       "head_dim %d, n_embd %d, intermediate %d, context %d, vocab %d, "
                       "rms_norm_eps %g, rope_theta %g)", s.L, s.NH, s.NKV, s.hd, s.C, s.H,
                       mc->context, s.V, mc->norm_eps, mc->rope_theta);
    if (s.gemma && be &&
        (!be->gqa_ext_fwd || !be->gqa_ext_bwd || !be->geglu_fwd || !be->geglu_bwd ||
         (s.fcap > 0 && (!be->softcap_fwd || !be->softcap_bwd))))
        return zt_fail(st, ZT_EUNSUPPORTED, "llama: the %s backend lacks the Gemma kernels "
                       "(gqa_ext, geglu, softcap)", be->name ? be->name : "?");
    if (s.E && (s.K < 1 || s.K > s.E || s.I < 1))
        return zt_fail(st, ZT_EINVAL, "invalid Mixture of Experts shape (n_experts %d, "
                       "experts_per_token %d, moe_intermediate_size %d)", s.E, s.K, s.I);
    if (s.E && s.E % s.ep)
        return zt_fail(st, ZT_EINVAL, "expert_parallel_size=%d must divide the %d experts", s.ep,
                       s.E);
    if (s.E && s.Ls < 1)
        return zt_fail(st, ZT_EINVAL, "invalid Mixture of Experts layout: no block has experts "
                       "(ztrain.model.decoder_sparse_step, mlp_only_layers)");
    if (s.E && s.Ls < s.L && s.Hd < 1)
        return zt_fail(st, ZT_EINVAL, "invalid dense block width (intermediate_size %d)", s.Hd);
    if (s.E) ZT_TRY(zt_moe_check_backend(be, st));
    zt_llama *m = calloc(1, sizeof *m);
    if (!m) return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    m->ms = (zt_moe_shape){s.C, s.E, s.K, s.I, s.norm, s.ep, 0, 0, 0, 0, 0, 0};
    if (s.E) {
        m->aux_cnt = calloc((size_t)s.E, sizeof(double));
        m->aux_psum = calloc((size_t)s.E, sizeof(double));
        m->aux_buf = calloc((size_t)s.E, sizeof(float));
        if (!m->aux_cnt || !m->aux_psum || !m->aux_buf) {
            zt_llama_free(m);
            return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
        }
    }
    m->cfg = *mc;
    /* (a backend without the bf16-input or the bf16-logits entries) */
    if (!zt_acts16_ok(be) || !zt_l16_ok(be)) m->cfg.acts16 = 0;
    /* the bf16-output paths, decided once (model.h; precision.h zt_out16_of) */
    zt_w16_keep_if(&m->cfg, ZT_W16_O16, zt_o16_ok(be));
    /* (the MoE blocks' bf16 input and routed rows: the bf16 row gather) */
    zt_w16_keep_if(&m->cfg, ZT_W16_MX16, be->rows_gather16 != NULL);
    zt_w16_keep_if(&m->cfg, ZT_W16_MOED16, be->matmul_bwd_d16 && be->swiglu_bwd_d16);
    zt_w16_keep_if(&m->cfg, ZT_W16_MOEGB, zt_w16_on(&m->cfg, ZT_W16_MOED16) && be->matmul_grouped_bwd_o16 &&
                   be->rows_dot16h && be->swiglu_bwd_dd16 && be->rows_scatter16);
    zt_w16_keep_if(&m->cfg, ZT_W16_EPGB, zt_w16_on(&m->cfg, ZT_W16_MOED16) && be->matmul_grouped_bwd_o16 &&
                   be->swiglu_bwd_dd16);
    zt_w16_keep_if(&m->cfg, ZT_W16_MOEGW, zt_w16_on(&m->cfg, ZT_W16_MOEGB) && zt_w16_on(&m->cfg, ZT_W16_MX16) &&
                   be->matmul_grouped_dw16);
    zt_w16_keep_if(&m->cfg, ZT_W16_N16, zt_n16_ok(be));
    zt_w16_keep_if(&m->cfg, ZT_W16_R16, zt_r16_ok(be));
    zt_w16_keep_if(&m->cfg, ZT_W16_AO16, zt_ao16_ok(be));
    zt_w16_keep_if(&m->cfg, ZT_W16_D16, zt_d16_ok(be));
    /* (sp16: the q|k|v gradient's bf16 copy read by matmul_bwd_d16) */
    zt_w16_keep_if(&m->cfg, ZT_W16_SP16, be->matmul_bwd_d16 != NULL);
    /* (each block's last residual add in the next norm: arch.h addfold) */
    zt_w16_keep_if(&m->cfg, ZT_W16_ADDFOLD, be->add_rmsnorm_fwd &&
                   (!zt_w16_on(&m->cfg, ZT_W16_N16) || be->add_rmsnorm_fwd16));
    /* (the o / down projections' outputs in bf16, the residual add widening
     * them: with the bf16 GEMM output and the fused norm reading bf16, the
     * norms writing bf16 and the add folded into them) */
    zt_w16_keep_if(&m->cfg, ZT_W16_BRANCH16, be->add_rmsnorm_fwd16b && be->matmul_fwd_o16 &&
                   zt_w16_on(&m->cfg, ZT_W16_N16) && zt_w16_on(&m->cfg, ZT_W16_ADDFOLD));
    /* (and with adapters on o / down: their delta in bf16, the base GEMM
     * adding into it, lora_lin_fwd16) */
    zt_w16_keep_if(&m->cfg, ZT_W16_LBRANCH16, zt_w16_on(&m->cfg, ZT_W16_BRANCH16) &&
                   be->matmul_fwd_acc16 && be->matmul_bwd_o16);
    /* (LoRA's products added by their GEMMs: the activations' d, lora.h) */
    zt_w16_keep_if(&m->cfg, ZT_W16_LORAACC, be->matmul_dinp_acc != NULL);
    /* (LoRA's delta first, the base GEMM adding into it: lora.h zt_lora_fwd_first) */
    zt_w16_keep_if(&m->cfg, ZT_W16_LORASWAP, be->matmul_fwd_acc != NULL);
    /* (the adapters' input gradient first, the base dinp GEMM adding into
     * it: lora.h zt_lora_bwd_first) */
    zt_w16_keep_if(&m->cfg, ZT_W16_BWDSWAP, be->matmul_bwd_acc != NULL);
    /* (and with adapters on q|k|v / gate|up / down: their share of the bf16
     * input gradient first, the base dinp GEMM adding into it,
     * zt_skel_lora_lin_bwd16; ZT_TEST_NO_DOUT16N takes it off for down too) */
    zt_w16_keep_if(&m->cfg, ZT_W16_LGRAD16, zt_w16_on(&m->cfg, ZT_W16_DOUT16N) &&
                   zt_w16_on(&m->cfg, ZT_W16_BWDSWAP) && be->matmul_bwd_acc16 &&
                   be->matmul_bwd_o16);
    /* (Qwen3's q/k norms and RoPE in one entry, with r16) */
    /* (Gemma 3: both weights 1 + w at once, in the staging a->w1 of
     * max(C, hd) floats: where it holds 2 hd) */
    zt_w16_keep_if(&m->cfg, ZT_W16_QKR16, s.qkn && zt_w16_on(&m->cfg, ZT_W16_R16) && zt_qkr16_ok(be) &&
                   (!s.gemma || s.C >= 2 * s.hd));
    m->s = s;
    m->be = be;
    m->sp.n = 1;
    if (s.sp > 1 && (s.NH % s.sp || s.NKV % s.sp)) {
        free(m);
        return zt_fail(st, ZT_EINVAL, "llama: sequence parallel size %d must divide the %d query "
                       "and %d key/value heads", s.sp, s.NH, s.NKV);
    }
    m->rope_scale = zt_llama_rope_scale(mc);
    int rc = zt_skel_init(&m->sk, &llama_skel, m, mc, be, s.tied, st);
    if (rc != ZT_OK) {
        free(m);
        return rc;
    }
    m->p.h = calloc((size_t)s.L, sizeof(zt_llama_layer));
    m->g.h = calloc((size_t)s.L, sizeof(zt_llama_layer));
    m->sparse = calloc((size_t)s.L, 1);
    m->nu = zt_arch_n_units(&zt_arch_llama, mc);
    m->p16 = calloc((size_t)m->nu, sizeof *m->p16);
    m->ub = calloc((size_t)s.L + 1, sizeof *m->ub);
    m->ublk = calloc((size_t)m->nu, sizeof *m->ublk);
    m->ukind = calloc((size_t)m->nu, sizeof *m->ukind);
    if (!m->p.h || !m->g.h || !m->sparse || !m->p16 || !m->ub || !m->ublk || !m->ukind) {
        zt_llama_free(m);
        return zt_fail(st, ZT_ENOMEM, "out of memory (model)");
    }
    for (int l = 0; l < s.L; ++l) m->sparse[l] = (unsigned char)zt_model_layer_sparse(mc, l);
    /* the unit map (zt_arch_describe's order) */
    m->ublk[0] = -1;
    for (int l = 0, u = 1; l <= s.L; ++l) {
        m->ub[l] = u;
        m->ublk[u++] = l;
        if (l < s.L && s.E && m->sparse[l]) {
            m->ublk[u] = l;
            m->ukind[u++] = T_EXGU;
            m->ublk[u] = l;
            m->ukind[u++] = T_EXDOWN;
        }
    }
    *out = m;
    return ZT_OK;
}

void zt_llama_free(zt_llama *m) {
    if (!m) return;
    zt_moe_host_free(&m->mh);
    free(m->aux_cnt);
    free(m->aux_psum);
    free(m->aux_buf);
    free(m->p.h);
    free(m->g.h);
    free(m->p16);
    free(m->ub);
    free(m->ublk);
    free(m->ukind);
    free(m->sparse);
    free(m);
}

static void llama_destroy(void *self) { zt_llama_free(self); }

/* ------------------------------------------------------------ rotary frequencies */

/* transformers' yarn get_mscale */
static double yarn_mscale(double scale) { return scale <= 1 ? 1.0 : 0.1 * log(scale) + 1.0; }

/* transformers' _compute_longrope_parameters default attention factor */
static double longrope_mscale(double factor, int original) {
    return factor <= 1 ? 1.0 : sqrt(1 + log(factor) / log((double)original));
}

static int is_longrope(const zt_model_config *mc) { return !strcmp(mc->rope_scaling, "longrope"); }

float zt_llama_rope_scale(const zt_model_config *mc) {
    if (mc->rope_attention_factor > 0 && (is_longrope(mc) || !strcmp(mc->rope_scaling, "yarn")))
        return (float)mc->rope_attention_factor;
    if (is_longrope(mc)) return (float)longrope_mscale(mc->rope_factor, mc->rope_original_max);
    if (strcmp(mc->rope_scaling, "yarn") != 0) return 1.0f;
    return (float)yarn_mscale(mc->rope_factor);
}

int zt_rope_factors_parse(const char *s, int n, float *out) {
    int k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        const double v = strtod(p, &end);
        if (end == p || errno || !(v > 0) || !isfinite(v) || !isfinite((float)v) || (float)v <= 0)
            return -1;
        if (k < n && out) out[k] = (float)v;
        ++k;
        p = end;
        while (*p == ' ') ++p;
        if (*p == ',') {
            ++p;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    return k;
}

int zt_llama_rope_long(const zt_model_config *mc, int T) {
    return is_longrope(mc) && T > mc->rope_original_max;
}

/* yarn (transformers' _compute_yarn_parameters, its fp32 steps in fp32):
 * the extrapolated (plain) and interpolated (/ factor) frequencies blended
 * by a linear ramp over the dimensions between the correction range's
 * bounds (double), which beta_fast / beta_slow rotations over the original
 * context give. */
static void yarn_inv_freq(const zt_model_config *mc, int hd, float *inv_freq) {
    const double base = mc->rope_theta, om = mc->rope_original_max;
    const double lo_d = hd * log(om / (mc->rope_beta_fast * 2 * 3.141592653589793)) / (2 * log(base));
    const double hi_d = hd * log(om / (mc->rope_beta_slow * 2 * 3.141592653589793)) / (2 * log(base));
    double lo = mc->rope_truncate ? floor(lo_d) : lo_d, hi = mc->rope_truncate ? ceil(hi_d) : hi_d;
    if (lo < 0) lo = 0;
    if (hi > hd - 1) hi = hd - 1;
    if (lo == hi) hi += 0.001;
    const float factor = (float)mc->rope_factor, flo = (float)lo, span = (float)(hi - lo);
    for (int j = 0; j < hd / 2; ++j) {
        const float pos = powf((float)base, (float)(2 * j) / (float)hd);
        const float extra = 1.0f / pos, inter = 1.0f / (factor * pos);
        float ramp = ((float)j - flo) / span;
        ramp = ramp < 0 ? 0.0f : ramp > 1 ? 1.0f : ramp;
        const float ef = 1.0f - ramp;
        inv_freq[j] = inter * (1.0f - ef) + extra * ef;
    }
}

void zt_llama_inv_freq_at(const zt_model_config *mc, int T, float *inv_freq) {
    const int hd = zt_model_head_dim(mc);
    if (is_longrope(mc)) {
        /* transformers, in float32: 1 / (ext * base ** (arange(0, hd, 2) / hd))
         * with ext = long_factor past original_max_position_embeddings, else
         * short_factor (llama_check: hd / 2 positive numbers each) */
        const float base = (float)mc->rope_theta;
        float *ext = inv_freq;   /* the factors, then divided in place */
        if (zt_rope_factors_parse(zt_llama_rope_long(mc, T) ? mc->rope_long_factor
                                                            : mc->rope_short_factor, hd / 2, ext) != hd / 2)
            for (int j = 0; j < hd / 2; ++j) ext[j] = 1.0f;   /* unreachable after llama_check */
        for (int j = 0; j < hd / 2; ++j)
            inv_freq[j] = 1.0f / (ext[j] * powf(base, (float)(2 * j) / (float)hd));
        return;
    }
    if (!strcmp(mc->rope_scaling, "yarn")) {
        yarn_inv_freq(mc, hd, inv_freq);
        return;
    }
    double base_d = mc->rope_theta;
    if (!strcmp(mc->rope_scaling, "dynamic")) {
        /* NTK-aware: base * (factor * L / P - (factor - 1)) ^ (hd / (hd - 2)) at
         * L = max(sequence length, P), P = max_position_embeddings (= context):
         * transformers recomputes only past P, and training stays within it */
        const double f = mc->rope_factor, L = mc->context, P = mc->context;
        base_d = base_d * pow(f * L / P - (f - 1), (double)hd / (hd - 2));
    }
    const float base = (float)base_d;
    const int linear = !strcmp(mc->rope_scaling, "linear");
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
        if (linear) f /= (float)mc->rope_factor;
        inv_freq[j] = f;
    }
}

void zt_llama_inv_freq(const zt_model_config *mc, float *inv_freq) {
    zt_llama_inv_freq_at(mc, 1, inv_freq);
}

/* ------------------------------------------------------------ activations */

/* sp16 (arch.h): the sequence parallel exchanges a training block with the
 * bf16 activations sends in bf16 (seqpar.h ZT_SP16_*; config.h ZT_W16_SP16,
 * ZT_TEST_NO_SP16 unset).  The attention output: the o projection's GEMMs
 * (matmul_fwd_a16, the weight gradient's) and LoRA's read it rounded to
 * bf16, nothing else reads it: kept as atty16 alone.  The q|k|v gradient:
 * the qkv GEMMs round it (matmul_bwd_d16 reads the bf16 copy) unless the
 * Qwen3 q/k norms' backward, a qkv bias's column sums or LoRA's adapters
 * (ZT_TEST_NO_QKV16 or _NO_LORABT, arch.h zt_lora_dq16_of; else they read
 * the bf16 copy too) read the fp32 values (then fp32).  The exchanges of
 * q|k|v (RoPE and the attention read fp32) and of the attention output's
 * gradient (the attention backward reads fp32) stay fp32. */
static int llama_sp16(const zt_model_config *mc) {
    const shape s = shape_of(mc);
    if (s.sp <= 1 || !zt_w16_on(mc, ZT_W16_SP16) || !zt_acts16_on(mc)) return 0;
    return ZT_SP16_ATT | (!s.qkn && !s.bias && zt_lora_dq16_of(mc) ? ZT_SP16_DQKV : 0);
}

/* Carve the activation block (gpt.c's scheme; base == NULL: sizes only).
 * Every array is rounded up to 16 elements. */
/* (config.h ZT_W16_MX16: with the bf16 experts (moe.h b16), every block
 * sparse, no LoRA, no expert parallelism: the MoE blocks' input and routed
 * rows in bf16, moe.h x16) */
static int llama_mx16(const zt_model_config *mc, const shape *sh) {
    return sh->E && sh->Ls == sh->L && sh->ep <= 1 && mc->lora_r <= 0 &&
           zt_w16_on(mc, ZT_W16_MX16);
}

static zt_carve carve(const zt_model_config *mc, int B, int T, int training, int ckpt,
                      zt_llama_acts *a, float *base) {
    const shape sh = shape_of(mc);
    size_t N = (size_t)B * T, C = (size_t)sh.C, L = (size_t)sh.L;
    /* (slot s holds blocks s, s + slots, ...: their widest MLP, the experts'
     * arrays when one of them has experts; H: the backward's, any block) */
    size_t QKV = (size_t)sh.QKV, AD = (size_t)sh.AD, H = (size_t)sh.Hmax;
    size_t k = zt_acts_ckpt_group(ckpt, training, L);
    size_t slots = zt_acts_n_slots(training, k, L);
    zt_carve cv = {base, 0, 0};
    const int a16 = training && zt_acts16_on(mc);   /* (bf16 activations) */
    const int sp16 = llama_sp16(mc);                /* (bf16 exchanges) */
    /* (blocks-attn: each layer's attention output and lse, model_acts.h) */
    const int katt = zt_acts_katt_on(mc, training, k);
#define TAKE(ptr, n) do { float *p_ = zt_carve_take(&cv, (n), 0); if (base) (ptr) = p_; } while (0)
#define TAKE16(ptr, n) do { uint16_t *p_ = zt_carve_take16(&cv, (n)); if (base) (ptr) = p_; } while (0)
#define TAKES(ptr, n) do { float *p_ = zt_carve_take(&cv, (n), 1); if (base) (ptr) = p_; } while (0)
    /* (bf16 GEMM outputs: q|k|v, the attention output, gate|up, without
     * sequence parallel for the first two; sequence parallel with sp16:
     * the attention output exchanged in bf16 into atty16) */
    const int o16 = a16 && sh.sp <= 1;
    const int att16 = o16 || (a16 && (sp16 & ZT_SP16_ATT));
    /* (blocks-attn: first, at the block's aligned start; bf16 where the
     * slot's atty16 would be; sequence parallel: the head-sharded atth
     * too) */
    if (katt) zt_carve_katt(&cv, &a->katt, L, att16, N * AD, (size_t)B * sh.NH * T, sh.sp);
    /* longrope: the short frequencies, then the long ones */
    TAKES(a->inv_freq, (size_t)sh.hd / 2 * (is_longrope(mc) ? 2 : 1));
    if (sh.local_rope) TAKES(a->inv_freq_local, (size_t)sh.hd / 2);
    const size_t CW = C > (size_t)sh.hd ? C : (size_t)sh.hd;
    if (sh.gemma) { TAKES(a->w1, CW); TAKES(a->ones, CW); }
    cv.off = zt_acts_carve_res(a->res, base, cv.off, training, L, k, N * C);
    zt_moe_acts mx;   /* (expert parallelism: the MoE blocks' shared rows) */
    memset(&mx, 0, sizeof mx);
    /* (mx16: every block sparse, the bf16 experts (b16), no LoRA, no expert
     * parallelism: the sparse slots keep the MLP norm's output in bf16
     * (xn216) and the routed rows are bf16 (moe.h x16); config.h
     * ZT_W16_MX16) */
    const int b16 = a16 && zt_w16_on(mc, ZT_W16_O16);
    const int mx16 = b16 && llama_mx16(mc, &sh);
    if (sh.E) {
        /* (the rows sent: no shared xs with ep_x16, moe.h) */
        const zt_moe_shape ms = {sh.C, sh.E, sh.K, sh.I, sh.norm, sh.ep, b16, zt_w16_on(mc, ZT_W16_EP16), mx16,
                                 0, 0, zt_w16_on(mc, ZT_W16_EP16) && zt_w16_on(mc, ZT_W16_EPX16)};
        zt_moe_carve_shared(&cv, &mx, &ms, N, base);
    }
    for (size_t s = 0; s < slots; ++s) {
        struct zt_llama_layer_acts *la = &a->layer[base ? s : 0];
        int sp_any = 0, sp_all = 1;
        size_t Hs = 0;
        for (size_t l = s; l < L; l += slots) {
            const int sp = zt_model_layer_sparse(mc, (int)l);
            const size_t Hl = (size_t)layer_H(&sh, sp);
            sp_any |= sp;
            sp_all &= sp;
            if (Hl > Hs) Hs = Hl;
        }
        if (a16) TAKE16(la->xn16, N * C); else TAKE(la->xn, N * C);
        TAKES(la->rstd1, N);
        /* (sequence parallel: qkv [B, N_sp T, QKV/N_sp] head-sharded, the
         * same count; atth the head-sharded attention output [B, N_sp T,
         * AD/N_sp]; lse [B, NH/N_sp, N_sp T]) */
        /* (o16, att16: above) */
        if (o16) TAKE16(la->qkv16, N * QKV); else TAKE(la->qkv, N * QKV);
        if (sh.qkn) {
            TAKE(la->qkraw, N * (QKV - (size_t)sh.NKV * sh.hd));
            TAKES(la->qkrstd, N * (size_t)(sh.NH + sh.NKV));
        }
        /* (blocks-attn: carved per layer at the block's start, katt) */
        if (!katt) {
            if (att16) TAKE16(la->atty16, N * AD); else TAKE(la->atty, N * AD);
            TAKES(la->lse, (size_t)B * sh.NH * T);
            if (sh.sp > 1) TAKE(la->atth, N * AD);
        }
        TAKE(la->res2, N * C);
        /* (a slot holding a sparse block: its MLP half in fp32, the
         * experts' path, moe_fwd; ZT_W16_MOE16; but for a slot of sparse
         * blocks alone without LoRA the shared expert's gate|up and h in
         * bf16, g16: its gate|up GEMM writing them rounded, moe_fwd) */
        const int m16 = a16 && !sp_any;
        const int g16 = m16 || (a16 && sp_all && Hs && mc->lora_r <= 0 && zt_w16_on(mc, ZT_W16_O16));
        if (m16 || (mx16 && sp_all)) TAKE16(la->xn216, N * C); else TAKE(la->xn2, N * C);
        TAKES(la->rstd2, N);
        if (g16) TAKE16(la->gu16, N * 2 * Hs); else TAKE(la->gu, N * 2 * Hs);
        if (g16) TAKE16(la->h16, N * Hs); else TAKE(la->h, N * Hs);
        if (sh.gemma) {
            TAKE(la->ao, N * C); TAKES(la->rstd3, N);
            TAKE(la->mo, N * C); TAKES(la->rstd4, N);
        }
        if (sp_any) {
            /* (b16: the experts' gate|up and SwiGLU output in bf16, moe.h) */
            /* (ex16: its row exchanges in bf16, moe.h; ZT_W16_EP16) */
            /* (ep_yp16: its outputs received and kept in bf16, moe.h;
             * ZT_W16_EPYP16 with ZT_W16_EP16; ep_x16: the rows its
             * experts receive kept in bf16, ZT_W16_EPX16) */
            const zt_moe_shape ms = {sh.C, sh.E, sh.K, sh.I, sh.norm, sh.ep, b16,
                                     zt_w16_on(mc, ZT_W16_EP16), mx16,
                                     !zt_w16_on(mc, ZT_W16_NOYP),
                                     zt_w16_on(mc, ZT_W16_EP16) && zt_w16_on(mc, ZT_W16_EPYP16),
                                     zt_w16_on(mc, ZT_W16_EP16) && zt_w16_on(mc, ZT_W16_EPX16)};
            zt_moe_carve(&cv, &la->moe, &ms, N, base, &mx);
            if (base) la->moe.x16 = la->xn216;
            /* (the experts' backward GEMMs on bf16 output gradients, each
             * rounded once a layer: ZT_W16_MOED16) */
            if (base) la->moe.d16 = ms.b16 && zt_w16_on(mc, ZT_W16_MOED16);
            /* (and their input gradients in grouped bf16 GEMMs: ZT_W16_MOEGB) */
            if (base) la->moe.gb16 = la->moe.d16 && zt_w16_on(mc, ZT_W16_MOEGB);
            /* (and their weight gradients too: ZT_W16_MOEGW) */
            if (base) la->moe.gw16 = la->moe.gb16 && zt_w16_on(mc, ZT_W16_MOEGW);
            /* (with expert parallelism's bf16 exchanges: the received
             * output gradients regrouped in bf16, ZT_W16_EPDY16; the input
             * gradients sent back in bf16, ZT_W16_EPDX16) */
            if (base) la->moe.epdy16 = la->moe.d16 && ms.ex16 && zt_w16_on(mc, ZT_W16_EPDY16);
            if (base) la->moe.epdx16 = la->moe.d16 && ms.ex16 && zt_w16_on(mc, ZT_W16_EPDX16);
            /* (and the experts' backward GEMMs grouped: ZT_W16_EPGB) */
            if (base) la->moe.epgb16 = la->moe.epdx16 && zt_w16_on(mc, ZT_W16_EPGB);
            /* (the backward's rows gathered straight into bf16: ZT_W16_GATHER16) */
            if (base) la->moe.gd16 = ms.b16 && zt_w16_on(mc, ZT_W16_GATHER16);
            if (sh.H) { TAKE(la->so, N * C); TAKES(la->sgl, N); TAKES(la->sg, N); }
        }
        zt_carve_lora_keep(&cv, la->lora_h, mc, N, training);
    }
    TAKE(a->scratch, N * C);
    if (sh.E) TAKES(a->moe_psum, (size_t)sh.E);
    if (sh.sp > 1) {   /* the all-to-alls' buffers and the local q|k|v rows */
        TAKE(a->sp_send, N * QKV); TAKE(a->sp_recv, N * QKV);
        /* (sp16's bf16 q|k|v gradient: the local q|k|v rows in recv, the
         * head-sharded attention output gradient in send, the exchanged
         * gradient in bf16: block_fwd, block_bwd) */
        if (a16 && (sp16 & ZT_SP16_DQKV)) TAKE16(a->sp_dq16, N * QKV);
        else TAKE(a->sp_h, N * QKV);
    }
    /* (the LM head's input: in bf16 alone with the bf16 activations, the
     * final norm writing it, ZT_W16_X16; the bf16 gradient copy over it) */
    const int x16 = a16 && zt_w16_on(mc, ZT_W16_X16);
    size_t lnf_off, lnf_n;
    zt_carve_lnf(&cv, x16, N * C, &a->lnf, &a->lnf16, &lnf_off, &lnf_n);
    TAKES(a->lnf_rstd, N);
    zt_classifier_carve(&cv, &a->cls, mc, N, training, sh.fcap > 0);
    if (base) a->cls.x16 = a->lnf16;
    /* int and float are both 4 bytes: the -1 targets share the block */
    float *nt = zt_carve_take(&cv, N, 1);
    if (base) a->no_targets = (int *)(void *)nt;
    if (training) {
        TAKE(a->dres, N * C); TAKE(a->dbuf, N * C); TAKE(a->datt, N * AD);
        TAKE(a->dqkv, N * QKV); TAKE(a->dh, N * H); TAKE(a->dgu, N * 2 * H);
        /* (the bf16 gradient copies: [N, C] over lnf, which the LM head's
         * backward was the last to read; gate|up's in place of the slot's
         * gu16, block_bwd) */
        if (a16 && !zt_carve_over16(&cv, lnf_off, lnf_n, N * C, &a->dc16))
            TAKE16(a->dc16, N * C);
        /* (the experts' backward scratch: only moe_bwd uses it) */
        size_t moe_ri = 0, moe_nkc = 0;   /* (its [R, I] and [N K, C] floats) */
        if (sh.E) {
            const zt_moe_shape ms = {sh.C, sh.E, sh.K, sh.I, sh.norm, sh.ep, 0, 0, 0, 0, 0, 0};
            zt_moe_carve_grad(&cv, &a->moeg, &ms, N, base);
            TAKES(a->moe_dp, (size_t)sh.E);
            TAKES(a->dsg, N); TAKES(a->dsgl, N);
            moe_ri = zt_moe_recv_rows(&ms, N) * (size_t)sh.I;
            moe_nkc = N * (size_t)sh.K * C;
        }
        if (a16) {
            /* (the fp32 stagings over the MLP's gradients where they fit,
             * else, a Mixture of Experts, over the experts' backward
             * scratch: dgup [R, 2I], dyp and dxp [N K, C], which no
             * staging's reader outlives, moe_bwd their only user) */
            const size_t W = C > H ? C : H;
            if (W <= 2 * H) { if (base) a->f32 = a->dgu; }
            else if (N * W <= 2 * moe_ri) { if (base) a->f32 = a->moeg.dgup; }
            else TAKE(a->f32, N * W);
            if (sh.sp <= 1) {   /* the backward's fp32 q|k|v and attention output */
                if (QKV <= 2 * H) { if (base) a->stq = a->dgu; }
                else if (N * QKV <= moe_nkc) { if (base) a->stq = a->moeg.dyp; }
                else TAKE(a->stq, N * QKV);
                if (AD <= H) { if (base) a->sta = a->dh; }
                else if (N * AD <= moe_nkc) { if (base) a->sta = a->moeg.dxp; }
                else TAKE(a->sta, N * AD);
            }
        }
    }
    zt_carve_lora(&cv, &a->lora, &a->dnorm, mc, N, training, CW);
#undef TAKE
#undef TAKE16
#undef TAKES
    return cv;
}

/* Sizes only: a scratch struct with one slot to carve into. */
static size_t acts_bytes(const zt_model_config *mc, int B, int T, int training, int ckpt, int elem) {
    zt_llama_acts a;
    struct zt_llama_layer_acts one;
    memset(&a, 0, sizeof a);
    a.layer = &one;
    zt_carve cv = carve(mc, B, T, training, ckpt, &a, NULL);
    return zt_carve_bytes(&cv, elem);
}

size_t zt_llama_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt) {
    return acts_bytes(mc, B, T, training, ckpt, (int)sizeof(float));
}

static void llama_acts_free(void *self, void *acts) {
    (void)self;
    zt_llama_acts *a = acts;
    ZT_ACTS_FREE(a);
}

/* llama_acts_free with the rotary frequencies' host staging buffer */
static void acts_free_with_freq(float *freq, zt_llama_acts *a) {
    free(freq);
    llama_acts_free(NULL, a);
}

static int llama_acts_create(void *self, int B, int T, int training, int mem_tag, void **out,
                             zt_status *st) {
    const zt_llama *m = self;
    *out = NULL;
    zt_llama_acts *a;
    ZT_ACTS_NEW(a, B, T, training, m->ckpt, m->s.L, m->cfg.context, st);
    const size_t nf = (size_t)(m->s.hd / 2) * (is_longrope(&m->cfg) ? 2 : 1);
    const size_t CW = m->s.C > m->s.hd ? (size_t)m->s.C : (size_t)m->s.hd;
    /* the staging buffer also holds the local frequencies and the ones */
    float *freq = malloc(sizeof(float) * (nf + CW));
    if (!a->res || !a->layer || !freq) {
        free(freq);
        llama_acts_free(self, a);
        return zt_fail(st, ZT_ENOMEM, "out of memory");
    }
    ZT_ACTS_ALLOC(a, zt_llama_acts_bytes_ckpt(&m->cfg, B, T, training, m->ckpt), mem_tag,
                  acts_free_with_freq, freq, st);
    carve(&m->cfg, B, T, training, m->ckpt, a, a->block);
    /* the rotary frequencies (device memory: staged) */
    zt_llama_inv_freq(&m->cfg, freq);
    if (is_longrope(&m->cfg))
        zt_llama_inv_freq_at(&m->cfg, m->cfg.rope_original_max + 1, freq + m->s.hd / 2);
    zt_xcopy(m->be, a->inv_freq, 1, freq, 0, sizeof(float) * nf);
    if (m->s.local_rope) {
        /* Gemma 3's sliding layers: the default rotary embedding at
         * rope_local_theta (transformers' rope_parameters["sliding_attention"]) */
        zt_model_config lc = m->cfg;
        lc.rope_theta = m->cfg.rope_local_theta;
        snprintf(lc.rope_scaling, sizeof lc.rope_scaling, "none");
        zt_llama_inv_freq(&lc, freq);
        zt_xcopy(m->be, a->inv_freq_local, 1, freq, 0, sizeof(float) * (size_t)(m->s.hd / 2));
    }
    if (m->s.gemma) {
        for (size_t i = 0; i < CW; ++i) freq[i] = 1.0f;
        zt_xcopy(m->be, a->ones, 1, freq, 0, sizeof(float) * CW);
    }
    free(freq);
    /* the -1 targets of a forward without targets */
    zt_acts_fill_no_targets(m->be, a->no_targets, (size_t)B * T);
    *out = a;
    return ZT_OK;
}

/* ------------------------------------------------------------ forward */

/* The frozen base's gradient view of unit u (LoRA; zt_skel_ops.frozen):
 * matmul weight gradients are skipped, the norms' go to a discarded [C]. */
static void frozen_grads(void *self, void *acts, int u) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    zt_llama_params *g = &m->g;
    const int l = m->ublk[u];
    if (u == 0) {
        g->embed = NULL;
    } else if (l == m->s.L) {
        g->norm = a->dnorm;
        g->lm_head = NULL;
    } else if (m->ukind[u]) {   /* an expert tensor: no weight gradient (the block's memset) */
        return;
    } else {
        zt_llama_layer *h = &g->h[l];
        memset(h, 0, sizeof *h);
        h->attn_norm = h->mlp_norm = a->dnorm;
        if (m->s.qkn) h->q_norm = h->k_norm = a->dnorm;
        if (m->s.gemma) h->post_attn_norm = h->post_mlp_norm = a->dnorm;
    }
}

/* Token embeddings into res[0] (gemma: * sqrt(C)). */
static void embed_fwd(void *self, void *acts) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const int B = a->fB, T = a->fT, C = m->s.C;
    zt_enc_fwd(m->be, ZT_ACTS_RES(a, 0), a->inputs, m->p.embed,
               m->p16[0] ? m->p16[0] + m->off[E_EMBED] : NULL, NULL, B, T, C);
    if (m->s.gemma) m->be->scale(ZT_ACTS_RES(a, 0), (size_t)B * T * C, m->s.escale);
    a->fold = 0;   /* (a pass starts with no residual add pending: arch.h addfold) */
}

/* The rotary frequencies of a sequence of T tokens (all of them, across the
 * sequence-parallel ranks): longrope's long set past the original context,
 * as transformers picks by max(position_ids) + 1 */
static const float *rope_freq(const zt_llama *m, const zt_llama_acts *a, int T) {
    return a->inv_freq + (zt_llama_rope_long(&m->cfg, T) ? m->s.hd / 2 : 0);
}

/* ... of block l: Gemma 3's sliding layers have their own (unscaled) */
static const float *layer_freq(const zt_llama *m, const zt_llama_acts *a, int l, int T) {
    return m->s.local_rope && layer_sliding_type(&m->s, l) ? a->inv_freq_local : rope_freq(m, a, T);
}
static float layer_rope_scale(const zt_llama *m, int l) {
    return m->s.local_rope && layer_sliding_type(&m->s, l) ? 1.0f : m->rope_scale;
}

/* The weight a norm applies: w, or Gemma's 1 + w (fp32, as transformers'
 * (1.0 + weight.float())) built in a->w1 */
static const float *norm_w(const zt_llama *m, const zt_llama_acts *a, const float *w, int n) {
    if (!m->s.gemma) return w;
    m->be->add(a->w1, a->ones, w, (size_t)n);
    return a->w1;
}
/* q_norm's and k_norm's weights together, as norm_w gives each (Gemma 3:
 * a->w1 holds the two 1 + w of hd floats), for the fused q/k-norm entries */
static void qk_norm_w(const zt_llama *m, const zt_llama_acts *a, const float *qw, const float *kw,
                      const float **qo, const float **ko) {
    const int hd = m->s.hd;
    *qo = qw;
    *ko = kw;
    if (!m->s.gemma) return;
    m->be->add(a->w1, a->ones, qw, (size_t)hd);
    m->be->add(a->w1 + hd, a->ones, kw, (size_t)hd);
    *qo = a->w1;
    *ko = a->w1 + hd;
}

/* Block l's attention over T tokens: Llama's gqa, Gemma's with its scale,
 * soft-cap and (sliding layers) window; the other families' sliding layers
 * (Mistral, Phi-3, Qwen2/3) through gqa_ext with the plain scale when the
 * window is shorter than T (keys u > t - window: at window >= T every key
 * u <= t, the plain gqa's result). 0, or a window gqa_ext does not have. */
static int attn_window(const zt_llama *m, int l, int T) {
    const shape *s = &m->s;
    const int w = layer_slides(s, l) ? s->window : 0;
    return s->gemma || w < T ? w : 0;
}
static int attn_fwd(const zt_llama *m, int l, float *out, float *lse, const float *qkv, int B,
                    int T, int NH, int NKV, zt_status *st) {
    const shape *s = &m->s;
    const int w = attn_window(m, l, T);
    if (!s->gemma && !w) {
        m->be->gqa_fwd(out, lse, qkv, B, T, NH, NKV, s->hd);
        return ZT_OK;
    }
    if (!m->be->gqa_ext_fwd || !m->be->gqa_ext_bwd)
        return zt_fail(st, ZT_EUNSUPPORTED, "llama: the %s backend lacks sliding-window attention "
                       "(gqa_ext) for layer %d's window %d < %d tokens", m->be->name ? m->be->name
                       : "?", l, w, T);
    const zt_attn_opts o = {s->ascale, s->acap, w};
    m->be->gqa_ext_fwd(out, lse, qkv, B, T, NH, NKV, s->hd, &o);
    return ZT_OK;
}
/* the same with q|k|v in bf16 (qkv16; tmp the backend's fp32 staging,
 * backend.h gqa_ext_fwd16): gqa_fwd's options without a window or Gemma */
static zt_attn_opts attn_opts(const zt_llama *m, int l, int T) {
    const shape *s = &m->s;
    const int w = attn_window(m, l, T);
    if (!s->gemma && !w) return (zt_attn_opts){1.0f / sqrtf((float)s->hd), 0.0f, 0};
    return (zt_attn_opts){s->ascale, s->acap, w};
}
static void attn_fwd16(const zt_llama *m, int l, float *out, float *lse, const uint16_t *qkv16,
                       float *tmp, int B, int T, int NH, int NKV) {
    const zt_attn_opts o = attn_opts(m, l, T);
    m->be->gqa_ext_fwd16(out, lse, qkv16, tmp, B, T, NH, NKV, m->s.hd, &o);
}
/* the same writing the bf16 output out16 (out: the backend's fp32
 * staging, backend.h gqa_ext_fwd16o / _bwd16o) */
static void attn_fwd16o(const zt_llama *m, int l, uint16_t *out16, float *out, float *lse,
                        const uint16_t *qkv16, float *tmp, int B, int T, int NH, int NKV) {
    const zt_attn_opts o = attn_opts(m, l, T);
    m->be->gqa_ext_fwd16o(out16, out, lse, qkv16, tmp, B, T, NH, NKV, m->s.hd, &o);
}
static void attn_bwd16o(const zt_llama *m, int l, float *dqkv, const float *dout,
                        const uint16_t *qkv16, float *tmp, const uint16_t *out16, float *out,
                        const float *lse, int B, int T, int NH, int NKV) {
    const zt_attn_opts o = attn_opts(m, l, T);
    m->be->gqa_ext_bwd16o(dqkv, dout, qkv16, tmp, out16, out, lse, B, T, NH, NKV, m->s.hd, &o);
}
static void attn_bwd16(const zt_llama *m, int l, float *dqkv, const float *dout,
                       const uint16_t *qkv16, float *tmp, const float *out, const float *lse, int B,
                       int T, int NH, int NKV) {
    const zt_attn_opts o = attn_opts(m, l, T);
    m->be->gqa_ext_bwd16(dqkv, dout, qkv16, tmp, out, lse, B, T, NH, NKV, m->s.hd, &o);
}
static void attn_bwd(const zt_llama *m, int l, float *dqkv, const float *dout, const float *qkv,
                     const float *out, const float *lse, int B, int T, int NH, int NKV) {
    const shape *s = &m->s;
    const int w = attn_window(m, l, T);
    if (!s->gemma && !w) {
        m->be->gqa_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, s->hd);
        return;
    }
    const zt_attn_opts o = {s->ascale, s->acap, w};   /* the forward checked gqa_ext */
    m->be->gqa_ext_bwd(dqkv, dout, qkv, out, lse, B, T, NH, NKV, s->hd, &o);
}

/* Block l's last residual add y = res2 + scratch, or with addfold left
 * pending for the next norm to add (arch.h addfold) */
static void res_add(const zt_llama *m, zt_llama_acts *a, float *y,
                    const struct zt_llama_layer_acts *s, int l) {
    a->fold16 = 0;
    if (zt_w16_on(&m->cfg, ZT_W16_ADDFOLD)) a->fold = l + 1;
    else m->be->add(y, s->res2, a->scratch, (size_t)a->fB * a->fT * m->s.C);
}

/* Mixture of Experts MLP (moe.h): y = res2 + experts(xn2) (+ the shared
 * expert's SwiGLU scaled by sigmoid(shared_gate . xn2), Qwen2-MoE) */
static int moe_fwd(zt_llama *m, zt_llama_acts *a, struct zt_llama_layer_acts *s,
                   const zt_llama_layer *w, float *y, int l, zt_status *st) {
    const zt_backend *be = m->be;
    const int N = a->fB * a->fT, C = m->s.C, H = m->s.H;
    const zt_moe_w mw = {w->router, w->exgu, w->exdown, LW16(m, w, T_ROUTER), LW16(m, w, T_EXGU),
                         LW16(m, w, T_EXDOWN)};
    ZT_TRY(zt_moe_forward(&m->ms, be, &m->mh, &mw, &s->moe, &a->moeg, s->xn2, a->scratch, N, st));
    if (m->aux_fwd) {
        /* the load-balancing loss's sums: top-k counts (the routing's groups)
         * and the probabilities' column sums (a matmul backward's bias sum) */
        for (int e = 0; e < m->s.E; ++e) m->aux_cnt[e] += m->mh.count[e + 1] - m->mh.count[e];
        be->matmul_bwd(NULL, NULL, a->moe_psum, s->moe.probs, NULL, NULL, N, 1, m->s.E);
    }
    if (H && s->gu16) {
        /* (bf16, no LoRA: the shared expert's gate|up rounded once by its
         * GEMM, SwiGLU reading and writing bf16, down reading it; dgu and
         * dh the cpu backends' fp32 staging, free in a forward) */
        be->matmul_fwd_o16(s->gu16, a->dgu, s->xn216 ? NULL : s->xn2, s->xn216, w->guw,
                           LW16(m, w, T_GATEW), NULL, N, C, 2 * H);
        be->swiglu_fwd16(s->h16, s->gu16, a->dgu, a->dh, N, H);
        be->matmul_fwd_a16(s->so, s->h16, w->downw, LW16(m, w, T_DOWNW), NULL, N, H, C);
    } else if (H) {   /* (LoRA: the shared expert's gate|up and down, Qwen2-MoE) */
        zt_mm_fwd(be, s->gu, s->xn2, w->guw, LW16(m, w, T_GATEW), NULL, N, C, 2 * H);
        zt_skel_lora_fwd(&m->sk, LG_GU, s->xn2, s->gu, N, &a->lora);
        be->swiglu_fwd(s->h, s->gu, N, H);
        zt_mm_fwd(be, s->so, s->h, w->downw, LW16(m, w, T_DOWNW), NULL, N, H, C);
        zt_skel_lora_fwd(&m->sk, LG_DOWN, s->h, s->so, N, &a->lora);
    }
    if (H) {
        zt_mm_fwd_x(be, s->sgl, s->xn2, s->xn216, w->shgate, LW16(m, w, T_SHGATE), NULL, N, C, 1);
        be->sigmoid_fwd(s->sg, s->sgl, (size_t)N);
        be->rows_scatter(a->scratch, s->so, NULL, s->sg, N, C);
    }
    res_add(m, a, y, s, l);
    return ZT_OK;
}

/* Its backward from dres: a->dbuf = the gradient of xn2 */
static int moe_bwd(zt_llama *m, zt_llama_acts *a, const struct zt_llama_layer_acts *s,
                   const zt_llama_layer *w, zt_llama_layer *gw, zt_status *st) {
    const zt_backend *be = m->be;
    const int N = a->fB * a->fT, C = m->s.C, H = m->s.H;
    const zt_moe_w mw = {w->router, w->exgu, w->exdown, LW16(m, w, T_ROUTER), LW16(m, w, T_EXGU),
                         LW16(m, w, T_EXDOWN)};
    zt_moe_w gmw = {gw->router, gw->exgu, gw->exdown, NULL, NULL, NULL};
    zt_moe_grad *g = &a->moeg;
    ZT_TRY(zt_moe_backward(&m->ms, be, &m->mh, &mw, &gmw, &s->moe, g, s->xn2, a->dres,
                           m->cfg.router_aux_loss_coef > 0 ? a->moe_dp : NULL, N, st));
    if (!H) {
        be->copy(a->dbuf, g->dx, (size_t)N * C * sizeof(float));
        return ZT_OK;
    }
    /* the shared expert's gate, then its SwiGLU with dso = sigmoid * dres */
    be->rows_dot(a->dsg, a->dres, NULL, s->so, N, C);
    be->sigmoid_bwd(a->dsgl, a->dsg, s->sg, (size_t)N);
    zt_mm_bwd_x(be, a->dbuf, gw->shgate, NULL, a->dsgl, s->xn2, s->xn216, w->shgate,
                LW16(m, w, T_SHGATE), N, C, 1);
    be->add(g->dx, g->dx, a->dbuf, (size_t)N * C);
    be->rows_gather(a->scratch, a->dres, NULL, s->sg, N, C);
    zt_mm_bwd_x(be, a->dh, gw->downw, NULL, a->scratch, s->h, s->h16, w->downw, LW16(m, w, T_DOWNW),
                N, H, C);
    if (s->gu16) {   /* (bf16: moe_fwd; no adapters) */
        be->swiglu_bwd16(a->dgu, a->dh, s->gu16, N, H);
    } else {
        zt_skel_lora_bwd(&m->sk, LG_DOWN, s->h, a->scratch, a->dh, N, &a->lora);
        be->swiglu_bwd(a->dgu, a->dh, s->gu, N, H);
    }
    zt_mm_bwd_x(be, a->dbuf, gw->guw, NULL, a->dgu, s->xn2, s->xn216, w->guw, LW16(m, w, T_GATEW),
                N, C, 2 * H);
    if (!s->xn216) zt_skel_lora_bwd(&m->sk, LG_GU, s->xn2, a->dgu, a->dbuf, N, &a->lora);
    be->add(a->dbuf, a->dbuf, g->dx, (size_t)N * C);
    return ZT_OK;
}

/* A dense block's linear layer with its LoRA group grp: out[N, OC] = x
 * w^T (+ bias) + the adapters' delta.  Without a bias, where the group's
 * delta can go first (lora.h zt_lora_fwd_first: swap on, adapters, no
 * dropout), it is written and the base GEMM adds into it (matmul_fwd_acc:
 * beta 1 under a compute-bound GEMM, where the delta's beta-1 GEMM read and
 * wrote all of out); else the base GEMM, then the delta added.  The same
 * bits either way (config.h ZT_W16_LORASWAP). */
static void lora_lin_fwd(const zt_skel *sk, const zt_backend *be, int grp, float *out,
                         const float *x, const uint16_t *x16, const float *w, const uint16_t *w16,
                         const float *bias, int N, int C, int OC, const zt_lora_scratch *ls) {
    if (!bias && zt_skel_lora_first16(sk, grp, x, x16, out, N, ls)) {
        /* (w16 where zt_mm_fwd_x reads it: the a16 entry, or matmul_fwd_w16) */
        be->matmul_fwd_acc(out, x, x16, w, x16 || be->matmul_fwd_w16 ? w16 : NULL, N, C, OC);
        return;
    }
    zt_mm_fwd_x(be, out, x, x16, w, w16, bias, N, C, OC);
    zt_skel_lora_fwd16(sk, grp, x, x16, out, N, ls);
}

/* (lbranch16) Llama's o / down projection with adapters writing the residual
 * branch in bf16: out16[N, OC] = bf16(x w^T + fp32(bf16(delta))), the
 * adapters' delta written in bf16 first (lora.h zt_lora_fwd_first16: h kept
 * as zt_lora_fwd's, rounded into h16 = dh, f32 the product's fp32 staging,
 * both free in the forward and in a checkpointed block's recompute) and the
 * base GEMM adding into it in place (matmul_fwd_acc16), as gate|up's
 * ZT_W16_GU16 path.  Returns 1 when it wrote out16; 0 with nothing done
 * (ZT_TEST_NO_LBRANCH16, no matmul_fwd_acc16, no bf16 weight w16 (a stage
 * 3 without it), n r above dh's 2 H bf16 a row, or zt_lora_fwd_first16
 * declining: dropout, no swap, no matmul_bwd_o16): the caller's fp32
 * branch then.  NOT the values of that fp32 branch (the delta rounded to
 * bf16 once before the add, config.h ZT_W16_LBRANCH16). */
static int lora_lin_fwd16(const zt_llama *m, zt_llama_acts *a, int grp, uint16_t *out16,
                          const float *x, const uint16_t *x16, const float *w, const uint16_t *w16,
                          int N, int C, int OC, int H) {
    const zt_skel *sk = &m->sk;
    const zt_backend *be = m->be;
    if (!zt_w16_on(&m->cfg, ZT_W16_LBRANCH16) || !be->matmul_fwd_acc16 || !w16 ||
        (size_t)sk->lo.groups[grp].n * (size_t)sk->lo.r > 2 * (size_t)H ||
        !zt_skel_lora_first16o(sk, grp, x, x16, out16, a->f32, (uint16_t *)(void *)a->dh, N,
                               &a->lora))
        return 0;
    /* (w16 where matmul_fwd_acc16 reads it: the a16 entry, or matmul_fwd_w16) */
    be->matmul_fwd_acc16(out16, x, x16, w, x16 || be->matmul_fwd_w16 ? w16 : NULL, N, C, OC);
    return 1;
}

/* Its backward: dx[N, C] = dy w (dw, dbias: the base's gradients, NULL when
 * frozen) + the adapters' share of the input gradient.  With a frozen base
 * (no dw, no dbias), where the group's backward can go first (lora.h
 * zt_lora_bwd_first: bswap on, adapters, no dropout), it writes dx and the
 * base dinp GEMM adds into it (matmul_bwd_acc: beta 1 under a
 * compute-bound GEMM, where the adapters' beta-1 GEMM of K = n r read and
 * wrote all of dx); else the base GEMM, then the adapters' product added.
 * The same bits either way (config.h ZT_W16_BWDSWAP). */
static void lora_lin_bwd(const zt_skel *sk, const zt_backend *be, int grp, float *dx, float *dw,
                         float *dbias, const float *dy, const uint16_t *dy16, const float *x,
                         const uint16_t *x16, const float *w, const uint16_t *w16, int N, int C,
                         int OC, const zt_lora_scratch *ls) {
    if (!dw && !dbias && zt_skel_lora_bwd_first16(sk, grp, x, x16, dy, dy16, dx, N, ls)) {
        /* (w16 where zt_mm_bwd_d reads it: the d16 / a16 entries, or matmul_bwd_w16) */
        be->matmul_bwd_acc(dx, dy, dy16, w, dy16 || x16 || be->matmul_bwd_w16 ? w16 : NULL, N, C,
                           OC);
        return;
    }
    zt_mm_bwd_d(be, dx, dw, dbias, dy, dy16, x, x16, w, w16, N, C, OC);
    zt_skel_lora_bwd16(sk, grp, x, x16, dy, dy16, dx, N, ls);
}

/* (lgrad16) Its backward writing the input gradient in bf16 is
 * model_skel.h zt_skel_lora_lin_bwd16 (the mirror of lora_lin_fwd16):
 * q|k|v's and gate|up's dx16 (dn16_of's) read by rmsnorm_bwd16d, down's
 * (dh16_of's) by swiglu_bwd_dd16, tmp the fp32 scratch the GEMM without
 * adapters would have used (dbuf / dgu); where it declines, the caller's
 * fp32 gradient (lora_lin_bwd).  NOT the values of that fp32 gradient
 * rounded (the share rounded to bf16 once before the add, config.h
 * ZT_W16_LGRAD16). */

/* llama.h: the config's gate of the o projection's bf16 dO (the model's
 * own is zt_skel_lora_on(sk, LG_O), model_skel.c: the same plan).  With
 * adapters on o (lo16, ZT_W16_LO16): every condition under which block_bwd's
 * zt_skel_lora_lin_bwd16 takes o's bf16 dO, so the planner's cuDNN workspace (no
 * dO buffer of its own, zt_do16_of) is the engine's: no dropout (lora.c
 * zt_lora_bwd_first16's drop.on), the swapped backward (model_skel.c
 * lo.bswap: ZT_W16_BWDSWAP and matmul_bwd_acc), matmul_bwd_acc16 (and
 * zt_do16_of's matmul_bwd_o16); the base is frozen (no dw) and the LoRA
 * scratch h always carved (model_acts.h zt_carve_lora). */
int zt_llama_lora_do16(const zt_model_config *mc, const zt_backend *be) {
    zt_lora lo;
    if (mc->lora_r <= 0) return 1;
    if (zt_lora_plan(mc, &lo, NULL) != ZT_OK) return 0;
    if (lo.groups[LG_O].n == 0) return zt_w16_on(mc, ZT_W16_LORAPATH);
    return zt_w16_on(mc, ZT_W16_LO16) && zt_w16_on(mc, ZT_W16_BWDSWAP) && mc->lora_dropout <= 0 &&
           be && be->matmul_bwd_acc && be->matmul_bwd_acc16 && be->matmul_bwd_o16;
}

/* Block l's forward from res[l] into its slot and res[l+1]; backward runs it
 * again to recompute a checkpointed block (bitwise the same values). */
static int block_fwd(void *self, void *acts, int l, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const zt_skel *sk = &m->sk;
    const zt_backend *be = m->be;
    const shape *sh = &m->s;
    const int B = a->fB, T = a->fT, N = B * T, C = sh->C, H = layer_H(sh, m->sparse[l]);
    const float eps = (float)m->cfg.norm_eps;
    const zt_llama_layer *w = &m->p.h[l];
    struct zt_llama_layer_acts *s = ZT_ACTS_SLOT(a, l);
    a->lora.keep = s->lora_h;   /* (LoRA's kept h, lora.h) */
    /* (blocks-attn: layer l's kept attention output and lse, which the
     * backward's recompute (sk->redo) reads as the forward left them) */
    const int katt = a->training && a->katt.lse;
    if (katt) zt_acts_katt_at(&a->katt, l, &s->atty, &s->atty16, &s->lse, &s->atth);
    const int skip = katt && sk->redo;
    float *x = ZT_ACTS_RES(a, l), *y = ZT_ACTS_RES(a, l + 1);
    /* attention: res2 = x + o(gqa(rope(qkv(rmsnorm(x))))) (gemma: the o
     * projection's output ao normalized before the residual add) */
    /* (bf16 activations: the norm into f32, rounded once into xn16) */
    /* (n16: the norms write the bf16 xn / xn2 themselves, f32 the cpu
     * backends' staging: the same values) */
    const int n16 = zt_w16_on(&m->cfg, ZT_W16_N16);
    /* (addfold: block l - 1 left x = its res2 + scratch pending, added here
     * by the fused norm, which writes x as the add did: arch.h) */
    const int fold = l > 0 && a->fold == l;
    const float *pa = fold ? ZT_ACTS_SLOT(a, l - 1)->res2 : NULL;
    const float *nw = norm_w(m, a, w->attn_norm, C);
    a->fold = 0;
    if (s->xn16 && n16) {
        if (fold && a->fold16)   /* (branch16: block l - 1's down output in bf16) */
            be->add_rmsnorm_fwd16b(x, s->xn16, a->f32, s->rstd1, pa,
                                   (const uint16_t *)(void *)a->scratch, nw, eps, N, C);
        else if (fold)
            be->add_rmsnorm_fwd16(x, s->xn16, a->f32, s->rstd1, pa, a->scratch, nw, eps, N, C);
        else
            be->rmsnorm_fwd16(s->xn16, a->f32, s->rstd1, x, nw, eps, N, C);
    } else {
        float *xn = s->xn16 ? a->f32 : s->xn;
        if (fold) be->add_rmsnorm_fwd(x, xn, s->rstd1, pa, a->scratch, nw, eps, N, C);
        else be->rmsnorm_fwd(xn, s->rstd1, x, nw, eps, N, C);
        if (s->xn16) be->to_bf16(s->xn16, a->f32, (size_t)N * C);
    }
    if (sh->sp > 1) {
        /* sequence parallel: the local rows' q|k|v (Qwen3: q, k heads
         * normalized, per row and head, before the exchange), exchanged for
         * all T positions of NH/N_sp heads; RoPE at the global positions */
        const int Tf = T * sh->sp;
        /* (no sp_h, sp16: the local rows in recv, packed before the exchange
         * overwrites it) */
        float *ql = a->sp_h ? a->sp_h : a->sp_recv;
        zt_mm_fwd_x(be, ql, s->xn, s->xn16, w->qkvw, LW16(m, w, T_QW), w->qkvb, N, C, sh->QKV);
        zt_skel_lora_fwd16(sk, LG_QKV, s->xn, s->xn16, ql, N, &a->lora);
        if (sh->qkn) {
            be->headnorm_fwd(ql, s->qkraw, s->qkrstd, norm_w(m, a, w->q_norm, sh->hd), eps, N,
                             sh->qnh, sh->QKV, sh->qw);
            be->headnorm_fwd(ql + sh->AD, s->qkraw + (size_t)N * sh->AD,
                             s->qkrstd + (size_t)N * sh->NH, norm_w(m, a, w->k_norm, sh->hd), eps, N,
                             sh->knh, sh->QKV, sh->kw);
        }
        zt_group_where(m->sp.g, "block %d attention, forward", l);
        ZT_TRY(zt_sp_to_heads(&m->sp, be, s->qkv, ql, B, T, &m->qkv_sl, a->sp_send, a->sp_recv,
                              st));
        be->rope_fwd(s->qkv, layer_freq(m, a, l, Tf), B, Tf, sh->NHl + sh->NKVl, sh->QKVl, sh->hd,
                     layer_rope_scale(m, l));
        /* (blocks-attn's recompute: the head-sharded output and lse the
         * attention backward reads, and the token-sharded output the o
         * projection reads, kept from the forward: neither the attention nor
         * the output's exchange runs; send and recv are scratch, nothing
         * reads what the exchange would have left in them) */
        if (!skip) {
            ZT_TRY(attn_fwd(m, l, s->atth, s->lse, s->qkv, B, Tf, sh->NHl, sh->NKVl, st));
            /* (sp16: exchanged in bf16 into atty16, the values the o
             * projection rounds) */
            if (s->atty16)
                ZT_TRY(zt_sp_to_tokens16(&m->sp, be, s->atty16, s->atth, B, T, &m->att_sl,
                                         a->sp_send, a->sp_recv, st));
            else
                ZT_TRY(zt_sp_to_tokens(&m->sp, be, s->atty, s->atth, B, T, &m->att_sl, a->sp_send,
                                       a->sp_recv, st));
        }
    } else {
        /* (bf16 GEMM outputs: q|k|v made in dqkv and the attention output in
         * datt, free in the forward, then rounded once) */
        float *qkv = s->qkv16 ? a->dqkv : s->qkv, *atty = s->atty16 ? a->datt : s->atty;
        lora_lin_fwd(sk, be, LG_QKV, qkv, s->xn, s->xn16, w->qkvw, LW16(m, w, T_QW), w->qkvb, N, C,
                     sh->QKV, &a->lora);
        /* (qkr16: the q/k norms and RoPE in one entry writing the bf16 q|k|v,
         * below) */
        const int qkr16 = sh->qkn && s->qkv16 && zt_w16_on(&m->cfg, ZT_W16_QKR16);
        if (sh->qkn && !qkr16) {   /* Qwen3, Gemma 3: q and k heads normalized before the rotation */
            be->headnorm_fwd(qkv, s->qkraw, s->qkrstd, norm_w(m, a, w->q_norm, sh->hd), eps, N,
                             sh->qnh, sh->QKV, sh->qw);
            be->headnorm_fwd(qkv + sh->AD, s->qkraw + (size_t)N * sh->AD,
                             s->qkrstd + (size_t)N * sh->NH, norm_w(m, a, w->k_norm, sh->hd), eps, N,
                             sh->knh, sh->QKV, sh->kw);
        }
        /* (o16: the attention reads the bf16 q|k|v itself; qkv the cpu
         * backends' fp32 staging) */
        const int o16 = s->qkv16 && zt_w16_on(&m->cfg, ZT_W16_O16);
        if (qkr16) {
            /* (qkr16: the q and k heads normalized and rotated in one entry
             * writing the bf16 q|k|v, qkv its scratch: the same values,
             * qkraw and qkrstd as headnorm_fwd writes them) */
            const float *qw, *kw;
            qk_norm_w(m, a, w->q_norm, w->k_norm, &qw, &kw);
            be->qknorm_rope_fwd16(s->qkv16, qkv, s->qkraw, s->qkrstd, qw, kw, eps,
                                  layer_freq(m, a, l, T), B, T, sh->NH, sh->NKV, sh->qnh, sh->knh,
                                  sh->QKV, sh->hd, layer_rope_scale(m, l));
            if (!o16) be->from_bf16(qkv, s->qkv16, (size_t)N * sh->QKV);
        } else if (s->qkv16 && zt_w16_on(&m->cfg, ZT_W16_R16)) {
            /* (r16: RoPE writes the bf16 q|k|v itself, qkv its scratch) */
            be->rope_fwd16(s->qkv16, qkv, layer_freq(m, a, l, T), B, T, sh->NH + sh->NKV, sh->QKV,
                           sh->hd, layer_rope_scale(m, l));
            if (!o16) be->from_bf16(qkv, s->qkv16, (size_t)N * sh->QKV);
        } else {
            be->rope_fwd(qkv, layer_freq(m, a, l, T), B, T, sh->NH + sh->NKV, sh->QKV, sh->hd,
                         layer_rope_scale(m, l));
            if (s->qkv16) {   /* (the attention reads q|k|v rounded: the same values) */
                be->to_bf16(s->qkv16, qkv, (size_t)N * sh->QKV);
                if (!o16) be->from_bf16(qkv, s->qkv16, (size_t)N * sh->QKV);
            }
        }
        if (skip) {
            /* (blocks-attn's recompute: the attention output kept) */
        } else if (o16 && s->atty16 && zt_w16_on(&m->cfg, ZT_W16_AO16)) {
            /* (the attention writes its bf16 output itself, atty its fp32
             * staging: the same values) */
            attn_fwd16o(m, l, s->atty16, atty, s->lse, s->qkv16, qkv, B, T, sh->NH, sh->NKV);
        } else {
            if (o16) attn_fwd16(m, l, atty, s->lse, s->qkv16, qkv, B, T, sh->NH, sh->NKV);
            else ZT_TRY(attn_fwd(m, l, atty, s->lse, qkv, B, T, sh->NH, sh->NKV, st));
            if (s->atty16) be->to_bf16(s->atty16, atty, (size_t)N * sh->AD);
        }
    }
    /* (branch16: in a training block with the bf16 activations, a
     * projection (no Gemma post norm; with adapters: lbranch16 below) writes its output,
     * the residual branch, in bf16 as autocast's Linear does (matmul_fwd_o16
     * into scratch, f32 the cpu backends' staging) and the residual add
     * widens it (add_rmsnorm_fwd16b): no fp32 branch written or read.  NOT
     * the values of before (the branch rounded once more before the add);
     * ZT_TEST_NO_BRANCH16: the fp32 branch, config.h) */
    /* (not a sparse block's: its xn216 is moe.h x16's, no branch16) */
    const int br16 = !sh->gemma && !m->sparse[l] && s->xn216 && s->h16 && n16 &&
                     zt_w16_on(&m->cfg, ZT_W16_BRANCH16);
    uint16_t *b16 = (uint16_t *)(void *)a->scratch;
    const float *mlp_w;
    /* (lbranch16: with adapters on o, their delta in bf16 and the base GEMM
     * adding into it, lora_lin_fwd16; where it declines, the fp32 branch) */
    int bw16 = 0;   /* 1: o's branch written in bf16 into b16 */
    if (br16 && !zt_skel_lora_on(sk, LG_O)) {
        be->matmul_fwd_o16(b16, a->f32, s->atty, s->atty16, w->ow, LW16(m, w, T_OW), NULL, N,
                           sh->AD, C);
        bw16 = 1;
    } else if (br16) {
        bw16 = lora_lin_fwd16(m, a, LG_O, b16, s->atty, s->atty16, w->ow, LW16(m, w, T_OW), N,
                              sh->AD, C, H);
    }
    if (bw16) {
        mlp_w = norm_w(m, a, w->mlp_norm, C);
        be->add_rmsnorm_fwd16b(s->res2, s->xn216, a->f32, s->rstd2, x, b16, mlp_w, eps, N, C);
        goto mlp;
    }
    float *ao = sh->gemma ? s->ao : a->scratch;
    lora_lin_fwd(sk, be, LG_O, ao, s->atty, s->atty16, w->ow, LW16(m, w, T_OW), NULL, N, sh->AD, C,
                 &a->lora);
    if (sh->gemma)
        be->rmsnorm_fwd(a->scratch, s->rstd3, ao, norm_w(m, a, w->post_attn_norm, C), eps, N, C);
    /* MLP: y = res2 + down(swiglu(gate|up(rmsnorm(res2)))) (gemma: geglu,
     * and the down projection's output mo normalized before the add) */
    mlp_w = norm_w(m, a, w->mlp_norm, C);
    float *xn2 = s->xn216 ? a->f32 : s->xn2;
    if (s->xn216 && n16) {   /* (xn2 written in bf16 by the fused kernel) */
        be->add_rmsnorm_fwd16(s->res2, s->xn216, a->f32, s->rstd2, x, a->scratch, mlp_w, eps, N, C);
    } else {
        if (be->add_rmsnorm_fwd) {   /* the residual add and the MLP's norm in one kernel */
            be->add_rmsnorm_fwd(s->res2, xn2, s->rstd2, x, a->scratch, mlp_w, eps, N, C);
        } else {
            be->add(s->res2, x, a->scratch, (size_t)N * C);
            be->rmsnorm_fwd(xn2, s->rstd2, s->res2, mlp_w, eps, N, C);
        }
        if (s->xn216) be->to_bf16(s->xn216, a->f32, (size_t)N * C);
    }
mlp:
    if (m->sparse[l]) {
        m->mh.layer = l;
        return moe_fwd(m, a, s, w, y, l, st);
    }
    /* (bf16 GEMM outputs: gate|up made in dgu, rounded once, and SwiGLU
     * reading the rounded values into dh, both free in the forward) */
    float *gu = s->gu16 ? a->dgu : s->gu;
    if (s->gu16 && s->h16 && zt_w16_on(&m->cfg, ZT_W16_O16)) {
        /* (the GEMM writes the bf16 gate|up itself (LoRA: the fp32 output
         * with its adapters' delta, rounded once), SwiGLU / GeGLU read it
         * and write the bf16 h; dgu and dh the cpu backends' fp32 staging:
         * the same values as below, without their fp32 round trip) */
        /* (lgate: with LoRA, only a gate|up with adapters makes its output in
         * fp32; ZT_TEST_NO_LGATE: every block with adapters did) */
        /* (gu16: with adapters on gate|up, their delta written in bf16 into
         * gu16 first, the base GEMM adding into it in place and rounding
         * once: no fp32 gate|up; h16 scratch [N, n r] in dh, dgu the cpu
         * backends' fp32 staging.  NOT today's values: the delta rounded
         * before the add; ZT_TEST_NO_GU16: the fp32 path below.  With the
         * bf16 weight only: a stage 3 without it keeps the fp32 path) */
        const uint16_t *guw16 = LW16(m, w, T_GATEW);
        if (!sk->lora || (zt_w16_on(&m->cfg, ZT_W16_LGATE) && !zt_skel_lora_on(sk, LG_GU))) {
            be->matmul_fwd_o16(s->gu16, gu, s->xn2, s->xn216, w->guw, guw16, NULL, N, C, 2 * H);
        } else if (zt_w16_on(&m->cfg, ZT_W16_GU16) && be->matmul_fwd_acc16 && guw16 &&
                   (size_t)sk->lo.groups[LG_GU].n * (size_t)sk->lo.r <= 2 * (size_t)H &&
                   zt_skel_lora_first16o(sk, LG_GU, s->xn2, s->xn216, s->gu16, gu,
                                         (uint16_t *)a->dh, N, &a->lora)) {
            be->matmul_fwd_acc16(s->gu16, s->xn2, s->xn216, w->guw,
                                 s->xn216 || be->matmul_fwd_w16 ? guw16 : NULL, N, C, 2 * H);
        } else {
            lora_lin_fwd(sk, be, LG_GU, gu, s->xn2, s->xn216, w->guw, LW16(m, w, T_GATEW), NULL, N, C,
                         2 * H, &a->lora);
            /* (the rounding and SwiGLU / GeGLU in one entry: gu read once,
             * gu16 written beside h16; config.h ZT_W16_GLUROUND) */
            void (*glur)(uint16_t *, uint16_t *, float *, float *, int, int) =
                sh->gemma ? be->geglu_fwd16r : be->swiglu_fwd16r;
            if (glur && zt_w16_on(&m->cfg, ZT_W16_GLUROUND)) {
                glur(s->h16, s->gu16, gu, a->dh, N, H);
                goto down;
            }
            be->to_bf16(s->gu16, gu, (size_t)N * 2 * H);
        }
        if (sh->gemma) be->geglu_fwd16(s->h16, s->gu16, gu, a->dh, N, H);
        else be->swiglu_fwd16(s->h16, s->gu16, gu, a->dh, N, H);
        goto down;
    }
    lora_lin_fwd(sk, be, LG_GU, gu, s->xn2, s->xn216, w->guw, LW16(m, w, T_GATEW), NULL, N, C, 2 * H,
                 &a->lora);
    if (s->gu16) {
        be->to_bf16(s->gu16, gu, (size_t)N * 2 * H);
        be->from_bf16(gu, s->gu16, (size_t)N * 2 * H);
    }
    float *hf = s->h16 ? a->dh : s->h;
    if (sh->gemma) be->geglu_fwd(hf, gu, N, H);
    else be->swiglu_fwd(hf, gu, N, H);
    if (s->h16) be->to_bf16(s->h16, hf, (size_t)N * H);
down:;
    /* (branch16: down's output in bf16 likewise, left pending for the next
     * norm, which widens it: the block above's first norm or the final norm,
     * both writing bf16 then (the final one: the LM head's bf16 input)) */
    /* (lbranch16: with adapters on down likewise, lora_lin_fwd16) */
    bw16 = 0;
    if (br16 && (l + 1 < sh->L || a->lnf16)) {
        if (!zt_skel_lora_on(sk, LG_DOWN)) {
            be->matmul_fwd_o16(b16, a->f32, s->h, s->h16, w->downw, LW16(m, w, T_DOWNW), NULL, N,
                               H, C);
            bw16 = 1;
        } else {
            bw16 = lora_lin_fwd16(m, a, LG_DOWN, b16, s->h, s->h16, w->downw, LW16(m, w, T_DOWNW),
                                  N, H, C, H);
        }
    }
    if (bw16) {
        a->fold = l + 1;
        a->fold16 = 1;
        return ZT_OK;
    }
    float *mo = sh->gemma ? s->mo : a->scratch;
    lora_lin_fwd(sk, be, LG_DOWN, mo, s->h, s->h16, w->downw, LW16(m, w, T_DOWNW), NULL, N, H, C,
                 &a->lora);
    if (sh->gemma)
        be->rmsnorm_fwd(a->scratch, s->rstd4, mo, norm_w(m, a, w->post_mlp_norm, C), eps, N, C);
    res_add(m, a, y, s, l);
    return ZT_OK;
}

/* Final RMSNorm: lnf = rmsnorm(res[L]); with lnf16 (the bf16 activations)
 * written in bf16 alone, as the blocks' xn (f32: the cpu backends' fp32
 * staging, free in the forward) */
static void norm_fwd(void *self, void *acts) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const int N = a->fB * a->fT, C = m->s.C;
    const zt_backend *be = m->be;
    const float *w = norm_w(m, a, m->p.norm, C), eps = (float)m->cfg.norm_eps;
    /* (addfold: the last block's res2 + scratch added here into res[L]) */
    const int L = m->s.L, fold = L > 0 && a->fold == L;
    const float *pa = fold ? ZT_ACTS_SLOT(a, L - 1)->res2 : NULL;
    float *res = ZT_ACTS_RES(a, L);
    a->fold = 0;
    if (a->lnf16 && zt_w16_on(&m->cfg, ZT_W16_N16)) {
        if (fold && a->fold16)   /* (branch16: the last block's down output in bf16) */
            be->add_rmsnorm_fwd16b(res, a->lnf16, a->f32, a->lnf_rstd, pa,
                                   (const uint16_t *)(void *)a->scratch, w, eps, N, C);
        else if (fold)
            be->add_rmsnorm_fwd16(res, a->lnf16, a->f32, a->lnf_rstd, pa, a->scratch, w, eps, N,
                                  C);
        else
            be->rmsnorm_fwd16(a->lnf16, a->f32, a->lnf_rstd, res, w, eps, N, C);
    } else {
        float *lnf = a->lnf16 ? a->f32 : a->lnf;
        if (fold) be->add_rmsnorm_fwd(res, lnf, a->lnf_rstd, pa, a->scratch, w, eps, N, C);
        else be->rmsnorm_fwd(lnf, a->lnf_rstd, res, w, eps, N, C);
        if (a->lnf16) be->to_bf16(a->lnf16, a->f32, (size_t)N * C);
    }
}

/* the head weight's bf16 bits: embed.w (tied, unit 0) or lm_head.w (the head unit) */
static const uint16_t *head16(const zt_llama *m) {
    const uint16_t *u16 = m->p16[m->s.tied ? 0 : m->nu - 1];
    return u16 ? u16 + m->off[m->s.tied ? E_EMBED : E_LM_HEAD] : NULL;
}

/* LM head and loss (classifier.h), chunk by chunk: logits = lnf @ W^T (lnf16: a->cls.x16)
 * (Gemma 2: cap tanh(logits / cap)), W = embed.w (tied) or lm_head.w;
 * fuse: with head_bwd's gradients (dlnf into dbuf, dW +=) */
/* the LM head's weight [V, C] and its gradient: the embedding's when tied */
static const float *head_w(const zt_llama *m) { return m->s.tied ? m->p.embed : m->p.lm_head; }
static float *head_dw(const zt_llama *m) { return m->s.tied ? m->g.embed : m->g.lm_head; }

static void head_fwd(void *self, void *acts, int has_targets, double *loss_sum, double *loss_acc,
                     const float *fuse) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const int N = a->fB * a->fT, C = m->s.C, V = m->s.V;
    a->cls.w16 = head16(m);
    if (fuse) {
        zt_classifier_forward_fused(m->be, &a->cls, a->dbuf, head_dw(m), a->lnf, head_w(m), a->targets,
                                    *fuse, N, C, V, m->s.fcap, loss_sum, loss_acc);
        return;
    }
    zt_classifier_forward(m->be, &a->cls, a->lnf, head_w(m), a->targets, N, C, V, m->s.fcap,
                          has_targets, loss_sum, loss_acc);
}

static int llama_forward(void *self, zt_units *U, void *acts, const int *inputs,
                         const int *targets, int B, int T, double *loss_sum, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    ZT_ACTS_FORWARD_BEGIN(a, B, T, inputs, targets, st);
    const int E = m->s.E;
    m->mh.step = zt_units_step(U);
    if (!E) return zt_skel_forward(&m->sk, U, ZT_SKEL_ACTS(a), targets != NULL, loss_sum, st);
    m->be->zero(a->moe_psum, (size_t)E * sizeof(float));
    memset(m->aux_cnt, 0, (size_t)E * sizeof(double));
    m->aux_fwd = 1;
    m->aux_have = 0;
    const int rc = zt_skel_forward(&m->sk, U, ZT_SKEL_ACTS(a), targets != NULL, loss_sum, st);
    m->aux_fwd = 0;
    if (rc != ZT_OK) return rc;
    /* (over NCCL a bounded read: after the pass's collectives) */
    ZT_TRY(zt_moe_read_small(&m->mh, &m->ms, m->be, m->aux_buf, a->moe_psum, (size_t)E * sizeof(float), st));
    for (int e = 0; e < E; ++e) m->aux_psum[e] = m->aux_buf[e];
    m->aux_N = B * T;
    m->aux = zt_moe_aux(E, m->s.Ls, m->aux_N, m->aux_cnt, m->aux_psum, 0, NULL);
    m->aux_have = 1;
    return ZT_OK;
}

static const float *llama_probs(void *self, void *acts, int b, int t) {
    const zt_llama *m = self;
    const zt_llama_acts *a = acts;
    return zt_classifier_probs(&a->cls, (long)b * a->fT + t, m->s.V);
}

/* ------------------------------------------------------------ backward */

/* LM head, chunk by chunk (classifier.h; Gemma 2: through the soft-cap):
 * dlnf = dlogits @ W ; dW += dlogits^T @ lnf, W = embed.w (tied, unit 0)
 * or lm_head.w (unit L+1) */
static void head_bwd(void *self, void *acts, float dloss) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const int N = a->fB * a->fT, C = m->s.C, V = m->s.V;
    a->cls.w16 = head16(m);
    zt_classifier_backward(m->be, &a->cls, a->dbuf, head_dw(m), a->lnf, head_w(m), a->targets, dloss,
                           N, C, V, m->s.fcap);
}

static uint16_t *d16_of(const zt_llama *m, uint16_t *p);
static void rms_bwd(const zt_backend *be, float *dinp, uint16_t *dinp16, float *dw,
                    const float *dout, const float *inp, const float *w, const float *rstd, int N,
                    int C);

/* Final RMSNorm: dres = rmsnorm'(dlnf) */
static void norm_bwd(void *self, void *acts) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const int N = a->fB * a->fT, C = m->s.C;
    m->be->zero(a->dres, (size_t)N * C * sizeof(float));
    /* (and the residual gradient's bf16 copy, the down projection's dout16:
     * gemma's reads the post-MLP norm's instead) */
    rms_bwd(m->be, a->dres, m->s.gemma ? NULL : d16_of(m, a->dc16), m->g.norm, a->dbuf,
            a->res[m->s.L], norm_w(m, a, m->p.norm, C), a->lnf_rstd, N, C);
}

/* the bf16 gradient copies the backward GEMMs read (zt_d16_ok), or NULL */
static uint16_t *d16_of(const zt_llama *m, uint16_t *p) {
    return p && zt_w16_on(&m->cfg, ZT_W16_D16) ? p : NULL;
}
/* dinp (+=) of the rmsnorm backward, and with dinp16 its bf16 copy */
static void rms_bwd(const zt_backend *be, float *dinp, uint16_t *dinp16, float *dw,
                    const float *dout, const float *inp, const float *w, const float *rstd, int N,
                    int C) {
    if (dinp16) be->rmsnorm_bwd16(dinp, dinp16, dw, dout, inp, w, rstd, N, C);
    else be->rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C);
}

/* dout16n (config.h ZT_W16_DOUT16N): q|k|v's or gate|up's input gradient
 * (group grp, its output's gradient in bf16, dy16) written in bf16 by the
 * GEMM (backend.h matmul_bwd_o16, dbuf its fp32 scratch) and read by the
 * norm backward below it (rmsnorm_bwd16d): [N, C] bf16 over dh ([N, H]
 * floats; gate|up: SwiGLU / GeGLU's backward has read it; q|k|v: sta over
 * it is dead once the attention backward has run; the next writer is block
 * l - 1's down projection).  With adapters on grp only where their share
 * may go first in bf16 (config.h ZT_W16_LGRAD16, zt_skel_lora_lin_bwd16, which may
 * still decline: the caller then takes the fp32 gradient).  NULL: the fp32
 * gradient in dbuf, as with adapters on grp otherwise (they add into it),
 * Gemma (post-norms), MoE blocks, sequence parallelism, fp32 gradients. */
static uint16_t *dn16_of(const zt_llama *m, const zt_llama_acts *a, int l, int grp,
                         const uint16_t *dy16) {
    const shape *sh = &m->s;
    if (!dy16 || !a->dh || sh->gemma || sh->sp > 1 || m->sparse[l] ||
        !zt_w16_on(&m->cfg, ZT_W16_DOUT16N) ||
        (zt_skel_lora_on(&m->sk, grp) && !zt_w16_on(&m->cfg, ZT_W16_LGRAD16)) ||
        !m->be->matmul_bwd_o16 || !m->be->rmsnorm_bwd16d ||
        (size_t)sh->H * sizeof(float) < (size_t)sh->C * sizeof(uint16_t))
        return NULL;
    return (uint16_t *)a->dh;
}

/* dh16 (config.h ZT_W16_DH16): the down projection's input gradient dh
 * written in bf16 by its GEMM (backend.h matmul_bwd_o16, dy16 its output's
 * gradient in bf16) over dh's own bytes ([N, H] bf16 in the first half of
 * the [N, H] floats), the GEMM's fp32 scratch in dgu ([N, 2H] floats, which
 * nothing reads before SwiGLU / GeGLU's backward writes it), and read by
 * that backward (swiglu_bwd_dd16 / geglu_bwd_dd16), which writes gate|up's
 * gradient in bf16 over gu16 (gu16_d, d16_of) and, only for gate|up's
 * adapters, in fp32 into dgu: dh is dead once it has run (the next writer
 * is dn16_of's gate|up input gradient over it).  With adapters on down
 * only where their share may go first in bf16 (config.h ZT_W16_LGRAD16,
 * zt_skel_lora_lin_bwd16, which may still decline: the caller then takes the fp32
 * dh; not Gemma).  NULL: the fp32 dh, as with adapters on down otherwise
 * (they add into it), MoE blocks, no bf16 gate|up gradient, fp32
 * gradients, the backend without the entries. */
static uint16_t *dh16_of(const zt_llama *m, const zt_llama_acts *a, int l, const uint16_t *dy16,
                         const uint16_t *gu16_d) {
    const shape *sh = &m->s;
    const zt_backend *be = m->be;
    if (!dy16 || !gu16_d || !a->dh || !a->dgu || m->sparse[l] ||
        !zt_w16_on(&m->cfg, ZT_W16_DH16) || !zt_w16_on(&m->cfg, ZT_W16_O16) ||
        (zt_skel_lora_on(&m->sk, LG_DOWN) &&
         (!zt_w16_on(&m->cfg, ZT_W16_LGRAD16) || sh->gemma)) ||
        !be->matmul_bwd_o16 ||
        !(sh->gemma ? be->geglu_bwd_dd16 : be->swiglu_bwd_dd16))
        return NULL;
    return (uint16_t *)a->dh;
}

/* Block l's backward: dres of res[l+1] in, dres of res[l] out (its
 * activations forward's or recomputed). */
static int block_bwd(void *self, void *acts, int l, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const zt_backend *be = m->be;
    const zt_skel *sk = &m->sk;
    const shape *sh = &m->s;
    const int B = a->fB, T = a->fT, C = sh->C, H = layer_H(sh, m->sparse[l]), N = B * T;
    const size_t NC = (size_t)N * C;
    const zt_llama_layer *w = &m->p.h[l];
    zt_llama_layer *gw = &m->g.h[l];
    struct zt_llama_layer_acts *s = ZT_ACTS_SLOT(a, l);
    a->lora.keep = s->lora_h;   /* (the forward's kept h, lora.h) */
    /* (blocks-attn: layer l's kept attention output and lse; block_fwd of
     * layer l, the recompute or the forward's last block, pointed the slot
     * at them already: bound again so the backward reads layer l's whatever
     * ran before it) */
    if (a->katt.lse) zt_acts_katt_at(&a->katt, l, &s->atty, &s->atty16, &s->lse, &s->atth);
    const zt_lora_scratch *ls = &a->lora;
    a->fold = 0;   /* (a recomputed block's next reads its kept input: arch.h addfold) */
    /* MLP: dres flows to res2 unchanged and into the down projection */
    /* (gemma: through the post-MLP norm first, into scratch) */
    const float *dmo = a->dres;
    /* (d16: the [N, C] gradient the down and o projections read, its bf16
     * copy written by the norm backward producing it: the final norm's or
     * block l + 1's attn_norm, then mlp_norm's (gemma: the post norms'); and
     * gate|up's by SwiGLU / GeGLU's backward, over the slot's gu16) */
    uint16_t *dc16 = d16_of(m, a->dc16);
    const uint16_t *dgu16 = NULL;
    float *dgu = a->dgu;   /* (NULL: gate|up's gradient in bf16 only) */
    uint16_t *dn16 = NULL;   /* (dout16n: the norms' output gradient in bf16, dn16_of) */
    if (m->sparse[l]) {
        m->mh.layer = l;
        ZT_TRY(moe_bwd(m, a, s, w, gw, st));
        goto mlp_norm;
    }
    if (sh->gemma) {
        be->zero(a->scratch, NC * sizeof(float));
        rms_bwd(be, a->scratch, dc16, gw->post_mlp_norm, a->dres, s->mo,
                norm_w(m, a, w->post_mlp_norm, C), s->rstd4, N, C);
        dmo = a->scratch;
    }
    /* (dh16: dh written in bf16 over dh, dh16_of; only with the bf16
     * gate|up gradient below) */
    uint16_t *dh16 = s->gu16 ? dh16_of(m, a, l, dc16, d16_of(m, s->gu16)) : NULL;
    if (dh16 && zt_skel_lora_on(sk, LG_DOWN)) {
        /* (lgrad16: the adapters' share first in bf16, the base adding
         * into it, dgu the fp32 staging; declined: the fp32 dh below) */
        if (!zt_skel_lora_lin_bwd16(sk, be, LG_DOWN, dh16, a->dgu, gw->downw, dmo, dc16, s->h,
                                    s->h16, w->downw, LW16(m, w, T_DOWNW), N, H, C, ls))
            dh16 = NULL;
    } else if (dh16) {
        be->matmul_bwd_o16(dh16, a->dgu, gw->downw, NULL, dmo, dc16, s->h, s->h16,
                           w->downw, LW16(m, w, T_DOWNW), N, H, C);
    }
    if (!dh16)
        lora_lin_bwd(sk, be, LG_DOWN, a->dh, gw->downw, NULL, dmo, dc16, s->h, s->h16, w->downw,
                     LW16(m, w, T_DOWNW), N, H, C, ls);
    /* (bf16 gate|up: its values widened into dgu, the gradient made in place) */
    const float *gu = s->gu;
    if (s->gu16 && zt_w16_on(&m->cfg, ZT_W16_O16)) {   /* (the kernel reads gate|up in bf16) */
        /* (and writes gate|up's gradient in bf16 too, in place of gate|up:
         * each element read before its gradient is written, and gu16 has no
         * reader after this) */
        if ((dgu16 = d16_of(m, s->gu16))) {
            /* (the fp32 gradient only for gate|up's adapters, and not even
             * for them where their GEMMs read dgu16 too, ZT_W16_LORABT
             * (lora.h dy16): the GEMMs read dgu16, and gate|up has no bias) */
            if (!zt_skel_lora_on(sk, LG_GU) || sk->lo.bt2d) dgu = NULL;
            if (dh16 && sh->gemma) be->geglu_bwd_dd16(dgu, s->gu16, dh16, s->gu16, N, H);
            else if (dh16) be->swiglu_bwd_dd16(dgu, s->gu16, dh16, s->gu16, N, H);
            else if (sh->gemma) be->geglu_bwd_d16(dgu, s->gu16, a->dh, s->gu16, N, H);
            else be->swiglu_bwd_d16(dgu, s->gu16, a->dh, s->gu16, N, H);
        } else if (sh->gemma) {
            be->geglu_bwd16(a->dgu, a->dh, s->gu16, N, H);
        } else {
            be->swiglu_bwd16(a->dgu, a->dh, s->gu16, N, H);
        }
        goto gu_bwd;
    }
    if (s->gu16) {
        be->from_bf16(a->dgu, s->gu16, (size_t)N * 2 * H);
        gu = a->dgu;
    }
    if (sh->gemma) be->geglu_bwd(a->dgu, a->dh, gu, N, H);
    else be->swiglu_bwd(a->dgu, a->dh, gu, N, H);
gu_bwd:
    /* (dout16n: gate|up's input gradient in bf16 into dn16, dn16_of) */
    dn16 = dn16_of(m, a, l, LG_GU, dgu16);
    if (dn16 && zt_skel_lora_on(sk, LG_GU)) {
        /* (lgrad16: the adapters' share first in bf16, the base adding
         * into it; declined: the fp32 gradient below) */
        if (!zt_skel_lora_lin_bwd16(sk, be, LG_GU, dn16, a->dbuf, gw->guw, dgu, dgu16, s->xn2,
                                    s->xn216, w->guw, LW16(m, w, T_GATEW), N, C, 2 * H, ls))
            dn16 = NULL;
    } else if (dn16) {
        be->matmul_bwd_o16(dn16, a->dbuf, gw->guw, NULL, NULL, dgu16, s->xn2, s->xn216, w->guw,
                           LW16(m, w, T_GATEW), N, C, 2 * H);
    }
    if (!dn16)
        lora_lin_bwd(sk, be, LG_GU, a->dbuf, gw->guw, NULL, dgu, dgu16, s->xn2, s->xn216, w->guw,
                     LW16(m, w, T_GATEW), N, C, 2 * H, ls);
mlp_norm:
    if (dn16)
        be->rmsnorm_bwd16d(a->dres, dc16, gw->mlp_norm, dn16, s->res2, norm_w(m, a, w->mlp_norm, C),
                           s->rstd2, N, C);
    else
        rms_bwd(be, a->dres, sh->gemma ? NULL : dc16, gw->mlp_norm, a->dbuf, s->res2,
                norm_w(m, a, w->mlp_norm, C), s->rstd2, N, C);
    /* attention; the rotation's gradient is the inverse rotation (gemma:
     * through the post-attention norm first) */
    const float *dao = a->dres;
    if (sh->gemma) {
        be->zero(a->scratch, NC * sizeof(float));
        rms_bwd(be, a->scratch, dc16, gw->post_attn_norm, a->dres, s->ao,
                norm_w(m, a, w->post_attn_norm, C), s->rstd3, N, C);
        dao = a->scratch;
    }
    /* (do16: the output's gradient written in bf16 into datt's memory, [N,
     * AD] bf16, read by the attention backward as its dO: arch.h
     * zt_do16_of; sta the GEMM's fp32 scratch; no fp32 copy) */
    const zt_attn_opts dao_o = attn_opts(m, l, T);
    uint16_t *do16 = NULL;
    /* (LoRA: where o has no adapters (ZT_TEST_NO_LORAPATH: only without
     * LoRA), or (lo16, ZT_W16_LO16) where it has them and their share can
     * go first in bf16 (zt_skel_lora_lin_bwd16: the share, then the base adding
     * into it; zt_do16_of's zt_llama_lora_do16 takes the same decision from
     * the config, the planner's cuDNN workspace); q|k|v's read the
     * attention backward's gradient as they do without do16) */
    const int o_lora = zt_skel_lora_on(sk, LG_O);
    if (dc16 && s->qkv16 && s->atty16 && zt_do16_of(&m->cfg, be, 1, sh->sp) &&
        be->att_do16(B, T, sh->NH, sh->NKV, sh->hd, &dao_o))
        do16 = (uint16_t *)a->datt;
    if (do16 && o_lora) {
        /* (sta the share's fp32 scratch, [N, AD] as the GEMM's below; a
         * decline, which the gate above rules out, the fp32 dO below) */
        if (!zt_skel_lora_lin_bwd16(sk, be, LG_O, do16, a->sta, gw->ow, dao, dc16, s->atty,
                                    s->atty16, w->ow, LW16(m, w, T_OW), N, sh->AD, C, ls))
            do16 = NULL;
    } else if (do16) {
        be->matmul_bwd_o16(do16, a->sta, gw->ow, NULL, dao, dc16, s->atty, s->atty16, w->ow, LW16(m, w, T_OW),
                           N, sh->AD, C);
    }
    if (!do16)
        lora_lin_bwd(sk, be, LG_O, a->datt, gw->ow, NULL, dao, dc16, s->atty, s->atty16, w->ow,
                     LW16(m, w, T_OW), N, sh->AD, C, ls);
    float *dq = a->dqkv;   /* the local rows' q|k|v gradient */
    /* (sp16: exchanged in bf16 into dq16, sp_dq16, which the qkv GEMMs
     * read, llama_sp16; rb16: gqa_ext_bwd16d's bf16 values, rotated by
     * rope_bwd16, or with q/k norms qknorm_rope_bwd16: qkb16) */
    uint16_t *dq16 = NULL;
    int qkb16 = 0;
    if (sh->sp > 1) {
        /* sequence parallel: the forward's exchanges in reverse */
        const int Tf = T * sh->sp;
        zt_group_where(m->sp.g, "block %d attention, backward", l);
        /* (no sp_h, sp16: the head-sharded gradient in send, dead once the
         * exchange has read it, and dead again before the next one packs) */
        float *dh = a->sp_h ? a->sp_h : a->sp_send;
        ZT_TRY(zt_sp_to_heads(&m->sp, be, dh, a->datt, B, T, &m->att_sl, a->sp_send, a->sp_recv,
                              st));
        attn_bwd(m, l, a->dqkv, dh, s->qkv, s->atth, s->lse, B, Tf, sh->NHl, sh->NKVl);
        be->rope_bwd(a->dqkv, layer_freq(m, a, l, Tf), B, Tf, sh->NHl + sh->NKVl, sh->QKVl, sh->hd,
                     layer_rope_scale(m, l));
        if (a->sp_dq16) {
            dq16 = a->sp_dq16;
            ZT_TRY(zt_sp_to_tokens16(&m->sp, be, dq16, a->dqkv, B, T, &m->qkv_sl, a->sp_send,
                                     a->sp_recv, st));
        } else {
            ZT_TRY(zt_sp_to_tokens(&m->sp, be, a->sp_h, a->dqkv, B, T, &m->qkv_sl, a->sp_send,
                                   a->sp_recv, st));
        }
        dq = a->sp_h;
    } else {
        /* (bf16 q|k|v and attention output: widened into stq and sta) */
        const float *qkv = s->qkv, *atty = s->atty;
        const int o16 = s->qkv16 && zt_w16_on(&m->cfg, ZT_W16_O16);   /* (q|k|v read in bf16: stq staging) */
        if (s->qkv16 && !o16) {
            be->from_bf16(a->stq, s->qkv16, (size_t)N * sh->QKV);
            qkv = a->stq;
        }
        /* (ao16: the backward reads the bf16 output itself, sta its staging) */
        const int ao16 = o16 && s->atty16 && zt_w16_on(&m->cfg, ZT_W16_AO16);
        if (s->atty16 && !ao16) {
            be->from_bf16(a->sta, s->atty16, (size_t)N * sh->AD);
            atty = a->sta;
        }
        /* (rb16: the backward writes the q|k|v gradient in bf16 where its
         * path makes it so, cuDNN's, into dq16 over stq [N, QKV] floats,
         * the q|k|v's fp32 staging, which that path leaves alone (256-byte
         * aligned where that fits); RoPE's backward rotates it there in
         * bf16 and the GEMM below reads it as it is, and LoRA's adapters
         * too where they may, zt_lora_dq16_of; with q/k norms, qkb16,
         * qknorm_rope_bwd16 takes it through RoPE and the norms in bf16,
         * zt_att_in16_of deciding: no q|k|v bias then) */
        if (ao16 && zt_lora_dq16_of(&m->cfg) && a->stq &&
            zt_att_in16_of(&m->cfg, be, 1, sh->sp) == ZT_ATT_IN16OD) {
            const uintptr_t lo = (uintptr_t)a->stq, hi = (uintptr_t)(a->stq + (size_t)N * sh->QKV);
            const size_t need = (size_t)N * sh->QKV * 2;
            uintptr_t p = (lo + 255) & ~(uintptr_t)255;
            if (p + need > hi) p = (lo + 15) & ~(uintptr_t)15;
            if (p + need <= hi) dq16 = (uint16_t *)p;
        }
        if (do16) {   /* (cuDNN reads the bf16 dO; dq16 NULL: the fp32 gradient in dqkv) */
            if (!be->gqa_ext_bwd16do(a->dqkv, dq16, do16, s->qkv16, a->stq, s->atty16, a->sta, s->lse,
                                     B, T, sh->NH, sh->NKV, sh->hd, &dao_o))
                dq16 = NULL;   /* (the fp32 gradient in dqkv) */
        } else if (dq16) {
            const zt_attn_opts ao = attn_opts(m, l, T);
            if (!be->gqa_ext_bwd16d(a->dqkv, dq16, a->datt, s->qkv16, a->stq, s->atty16, a->sta, s->lse,
                                    B, T, sh->NH, sh->NKV, sh->hd, &ao))
                dq16 = NULL;   /* (the fp32 gradient in dqkv) */
        } else if (ao16) {
            attn_bwd16o(m, l, a->dqkv, a->datt, s->qkv16, a->stq, s->atty16, a->sta, s->lse, B, T,
                        sh->NH, sh->NKV);
        } else if (o16) {
            attn_bwd16(m, l, a->dqkv, a->datt, s->qkv16, a->stq, atty, s->lse, B, T, sh->NH, sh->NKV);
        } else {
            attn_bwd(m, l, a->dqkv, a->datt, qkv, atty, s->lse, B, T, sh->NH, sh->NKV);
        }
        /* (dq16: the bias gradient the column sums of the fp32 values
         * rope_bwd gives, taken by rope_bwd16 before it rounds them, as the
         * GEMM took them from the fp32 dqkv: bitwise; with q/k norms
         * (qkb16, no bias) qknorm_rope_bwd16: rope_bwd then headnorm_bwd on
         * the q and the k groups, bitwise, the rows rounded after as the
         * GEMM rounded the fp32 dqkv) */
        if (dq16 && sh->qkn) {
            const float *qw, *kw;
            qk_norm_w(m, a, w->q_norm, w->k_norm, &qw, &kw);
            be->qknorm_rope_bwd16(dq16, gw->q_norm, gw->k_norm, s->qkraw, s->qkrstd, qw, kw,
                                  layer_freq(m, a, l, T), B, T, sh->NH, sh->NKV, sh->qnh, sh->knh,
                                  sh->QKV, sh->hd, layer_rope_scale(m, l));
            qkb16 = 1;
        } else if (dq16)
            be->rope_bwd16(dq16, gw->qkvb, layer_freq(m, a, l, T), B, T, sh->NH + sh->NKV, sh->QKV,
                           sh->hd, layer_rope_scale(m, l));
        else
            be->rope_bwd(a->dqkv, layer_freq(m, a, l, T), B, T, sh->NH + sh->NKV, sh->QKV, sh->hd,
                         layer_rope_scale(m, l));
    }
    if (sh->qkn && !qkb16) {
        be->headnorm_bwd(dq, gw->q_norm, s->qkraw, norm_w(m, a, w->q_norm, sh->hd), s->qkrstd, N,
                         sh->qnh, sh->QKV, sh->qw);
        be->headnorm_bwd(dq + sh->AD, gw->k_norm, s->qkraw + (size_t)N * sh->AD,
                         norm_w(m, a, w->k_norm, sh->hd), s->qkrstd + (size_t)N * sh->NH, N,
                         sh->knh, sh->QKV, sh->kw);
    }
    if (dq16) {   /* (sp16: no q/k norms or bias, llama_sp16; rb16: the bias gradient
                   * taken by rope_bwd16 above; LoRA's GEMMs read dq16 as their
                   * dy16, no fp32 dy, zt_lora_dq16_of) */
        /* (dout16n: the input gradient in bf16 into dn16, dn16_of) */
        dn16 = dn16_of(m, a, l, LG_QKV, dq16);
        if (dn16 && zt_skel_lora_on(sk, LG_QKV)) {
            /* (lgrad16: the adapters' share first in bf16, the base adding
             * into it; declined: the fp32 gradient below) */
            if (!zt_skel_lora_lin_bwd16(sk, be, LG_QKV, dn16, a->dbuf, gw->qkvw, NULL, dq16, s->xn,
                                        s->xn16, w->qkvw, LW16(m, w, T_QW), N, C, sh->QKV, ls))
                dn16 = NULL;
        } else if (dn16) {
            be->matmul_bwd_o16(dn16, a->dbuf, gw->qkvw, NULL, NULL, dq16, s->xn, s->xn16, w->qkvw,
                               LW16(m, w, T_QW), N, C, sh->QKV);
        }
        if (!dn16)
            lora_lin_bwd(sk, be, LG_QKV, a->dbuf, gw->qkvw, NULL, NULL, dq16, s->xn, s->xn16,
                         w->qkvw, LW16(m, w, T_QW), N, C, sh->QKV, ls);
    } else {
        dn16 = NULL;
        lora_lin_bwd(sk, be, LG_QKV, a->dbuf, gw->qkvw, gw->qkvb, dq, NULL, s->xn, s->xn16, w->qkvw,
                     LW16(m, w, T_QW), N, C, sh->QKV, ls);
    }
    /* (block 0's: the embedding reads the fp32 value) */
    if (dn16)
        be->rmsnorm_bwd16d(a->dres, l == 0 ? NULL : dc16, gw->attn_norm, dn16, a->res[l],
                           norm_w(m, a, w->attn_norm, C), s->rstd1, N, C);
    else
        rms_bwd(be, a->dres, sh->gemma || l == 0 ? NULL : dc16, gw->attn_norm, a->dbuf, a->res[l],
                norm_w(m, a, w->attn_norm, C), s->rstd1, N, C);
    return ZT_OK;
}

/* Token embeddings: dembed += dres (gemma: scaled), the padding row kept. */
static void embed_bwd(void *self, void *acts) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    const zt_backend *be = m->be;
    const shape *sh = &m->s;
    const int B = a->fB, T = a->fT, C = sh->C;
    const size_t NC = (size_t)B * T * C;
    if (sh->gemma) be->scale(a->dres, NC, sh->escale);   /* the embedding's scale */
    /* the padding row (transformers' nn.Embedding padding_idx): the lookup
     * adds nothing to it, so it keeps what it held before the lookup (a tied
     * LM head's gradient, earlier micro-steps): saved to scratch (free by
     * now), put back after.  Bitwise the other rows' sums are unchanged. */
    const int pad = m->cfg.pad_token_id;
    float *prow = pad >= 0 ? m->g.embed + (size_t)pad * C : NULL;
    if (prow) be->copy(a->scratch, prow, (size_t)C * sizeof(float));
    be->encoder_bwd(m->g.embed, NULL, a->dres, a->inputs, B, T, C);
    if (prow) be->copy(prow, a->scratch, (size_t)C * sizeof(float));
}

static int llama_backward(void *self, zt_units *U, void *acts, float dloss, zt_status *st) {
    zt_llama *m = self;
    zt_llama_acts *a = acts;
    ZT_ACTS_BACKWARD_BEGIN(a, st);
    m->mh.step = zt_units_step(U);
    if (m->s.E && m->cfg.router_aux_loss_coef > 0) {
        /* the objective's coef x aux, at the head's scale (dloss per token) */
        if (!m->aux_have)
            return zt_fail(st, ZT_EINTERNAL, "llama: backward without the forward's routing");
        zt_moe_aux(m->s.E, m->s.Ls, m->aux_N, m->aux_cnt, m->aux_psum,
                   m->cfg.router_aux_loss_coef * (double)dloss * m->aux_N, m->aux_buf);
        zt_xcopy(m->be, a->moe_dp, 1, m->aux_buf, 0, (size_t)m->s.E * sizeof(float));
    }
    return zt_skel_backward(&m->sk, U, ZT_SKEL_ACTS(a), dloss, st);
}

/* zt_skel_ops.block_units */
static int block_units(void *self, int l, int *first) {
    const zt_llama *m = self;
    *first = m->ub[l];
    return l < m->s.L ? m->ub[l + 1] - m->ub[l] : 1;
}

static const zt_skel_ops llama_skel = {
    bind_unit, frozen_grads, embed_fwd, block_fwd, norm_fwd, head_fwd,
    head_bwd, norm_bwd, block_bwd, embed_bwd, bind16_unit, block_units,
};

static const zt_model_ops llama_ops = {
    "llama", llama_describe, llama_acts_create, llama_acts_free, llama_forward, llama_backward,
    llama_probs, llama_destroy,
};

const zt_model_ops *zt_llama_ops(void) { return &llama_ops; }
int zt_model_is_llama(const zt_model *m) { return m->ops == &llama_ops; }

int zt_llama_aux_loss(const zt_model *m, double *aux) {
    const zt_llama *l = zt_model_is_llama(m) ? m->self : NULL;
    if (!l || !l->s.E || !l->aux_have) return 0;
    *aux = l->aux;
    return 1;
}

/* ------------------------------------------------------------ descriptor (arch.h) */

static int moe_lora_check(const zt_model_config *m, zt_status *st);

static int llama_check(const zt_model_config *m, zt_status *st) {
    int kv = zt_model_kv_heads(m), hd = zt_model_head_dim(m);
    if (m->n_head % kv != 0)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.n_kv_head=%d must divide "
                       "ztrain.model.n_head=%d", kv, m->n_head);
    if (m->head_dim == 0 && m->n_embd % m->n_head != 0)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.n_embd=%d is not divisible by "
                       "ztrain.model.n_head=%d: give ztrain.model.head_dim", m->n_embd, m->n_head);
    if (hd < 2 || hd % 2)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.head_dim=%d must be even (rotary embeddings "
                       "rotate pairs)", hd);
    if (m->pad_token_id < -1 || m->pad_token_id >= m->vocab)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.pad_token_id=%d must be below "
                       "ztrain.model.vocab=%d (-1 = none)", m->pad_token_id, m->vocab);
    if ((double)hd * m->n_head > 1048576.0 || (double)zt_model_intermediate(m) > 1048576.0)
        return zt_fail(st, ZT_EINVAL, "llama shape too large (n_head * head_dim %d x %d, "
                       "intermediate %d)", m->n_head, hd, zt_model_intermediate(m));
    if (!strcmp(m->rope_scaling, "llama3") && !(m->rope_high_freq_factor > m->rope_low_freq_factor))
        return zt_fail(st, ZT_EINVAL, "ztrain.model.rope_high_freq_factor=%g must exceed "
                       "ztrain.model.rope_low_freq_factor=%g", m->rope_high_freq_factor,
                       m->rope_low_freq_factor);
    if (is_longrope(m)) {
        const char *key[2] = {"rope_short_factor", "rope_long_factor"};
        const char *val[2] = {m->rope_short_factor, m->rope_long_factor};
        for (int i = 0; i < 2; ++i) {
            const int k = zt_rope_factors_parse(val[i], 0, NULL);
            if (k < 0)
                return zt_fail(st, ZT_EINVAL, "ztrain.model.%s must hold head_dim / 2 = %d positive "
                               "numbers, comma-separated (longrope); it is malformed", key[i], hd / 2);
            if (k != hd / 2)
                return zt_fail(st, ZT_EINVAL, "ztrain.model.%s must hold head_dim / 2 = %d positive "
                               "numbers, comma-separated (longrope); it holds %d", key[i], hd / 2, k);
        }
    }
    if (m->n_experts > 0) {
        if (m->experts_per_token < 1 || m->experts_per_token > m->n_experts)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.experts_per_token=%d must be 1 to "
                           "ztrain.model.n_experts=%d", m->experts_per_token, m->n_experts);
        if (m->moe_intermediate < 1)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.moe_intermediate_size must be set (the "
                           "experts' width) with ztrain.model.n_experts=%d", m->n_experts);
        if (m->gemma)
            return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.model.n_experts with Gemma blocks is not "
                           "supported");
        const int ml = zt_mlp_only_parse(m->mlp_only_layers, 0, NULL);
        if (ml < 0)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.mlp_only_layers='%s' must be "
                           "comma-separated block numbers (from 0)", m->mlp_only_layers);
        int *bl = ml > 0 ? malloc((size_t)ml * sizeof(int)) : NULL, bad = -1;
        if (ml > 0 && !bl) return zt_fail(st, ZT_ENOMEM, "out of memory (mlp_only_layers)");
        zt_mlp_only_parse(m->mlp_only_layers, ml, bl);
        for (int i = 0; i < ml && bad < 0; ++i)
            if (bl[i] >= m->n_layer) bad = bl[i];
        free(bl);
        if (bad >= 0)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.mlp_only_layers holds block %d; the model "
                           "has ztrain.model.n_layer=%d (blocks 0 to %d)", bad, m->n_layer,
                           m->n_layer - 1);
        if (m->decoder_sparse_step < 1)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.decoder_sparse_step=%d must be at least 1",
                           m->decoder_sparse_step);
        if (zt_model_sparse_layers(m) < 1)
            return zt_fail(st, ZT_EINVAL, "no block has experts (ztrain.model.decoder_sparse_step=%d, "
                           "mlp_only_layers='%s', n_layer=%d): set ztrain.model.n_experts=0 for a "
                           "dense model", m->decoder_sparse_step, m->mlp_only_layers, m->n_layer);
        if (m->lora_r > 0) ZT_TRY(moe_lora_check(m, st));
    }
    if (m->qk_norm_full && (!m->qk_norm || m->gemma))
        return zt_fail(st, ZT_EINVAL, "ztrain.model.qk_norm_full needs ztrain.model.qk_norm=true "
                       "(and no Gemma blocks)");
    if (m->gemma != 0 && m->gemma != 2 && m->gemma != 3)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.gemma=%d must be 0, 2 or 3", m->gemma);
    if (!m->gemma) {
        const char *g = m->query_pre_attn_scalar != 0 ? "query_pre_attn_scalar"
                      : m->attn_softcap != 0 ? "attn_softcap"
                      : m->final_softcap != 0 ? "final_softcap"
                      : m->rope_local_theta != 0 ? "rope_local_theta" : NULL;
        if (g)
            return zt_fail(st, ZT_EINVAL, "ztrain.model.%s is a Gemma setting: set "
                           "ztrain.model.gemma=2 or 3", g);
    }
    if (m->sliding_window < 0 || m->sliding_pattern < 0 || m->sliding_from < 0)
        return zt_fail(st, ZT_EINVAL, "ztrain.model.sliding_window=%d, sliding_pattern=%d and "
                       "sliding_from=%d must not be negative", m->sliding_window, m->sliding_pattern,
                       m->sliding_from);
    char why[160];
    const zt_arch_hf *fam = zt_arch_hf_export(m, NULL, why, sizeof why);
    if (!fam) return zt_fail(st, ZT_EINVAL, "%s", why);
    /* PEFT names Phi-3's adapters after its fused modules (qkv_proj,
     * gate_up_proj), ours after the split ones */
    if (m->lora_r > 0 && fam->fuse)
        return zt_fail(st, ZT_EUNSUPPORTED, "LoRA on %s (fused qkv_proj / gate_up_proj) is not "
                       "supported: train it in full (ztrain.lora.r=0)", fam->architectures);
    return ZT_OK;
}

/* LoRA on a Mixture of Experts model: attention, the shared expert when
 * every block has one; never the experts (nor PEFT's all-linear, which
 * would take Qwen2-MoE's shared_expert_gate too), no 4-bit base yet. */
static int moe_lora_check(const zt_model_config *m, zt_status *st) {
    const int shared = m->shared_expert > 0 && zt_model_sparse_layers(m) == m->n_layer;
    const char *mods = shared ? "q_proj, k_proj, v_proj, o_proj and the shared expert's gate_proj, "
                                "up_proj, down_proj"
                              : "q_proj, k_proj, v_proj, o_proj";
    const char *t = m->lora_targets;
    if (m->lora_base[0])
        return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.base=%s on a Mixture of Experts model "
                       "(ztrain.model.n_experts=%d) is not supported yet (QLoRA): use "
                       "ztrain.lora.base=\"\" (the compute dtype)", m->lora_base, m->n_experts);
    if (strstr(t, "all-linear"))
        return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.targets=all-linear on a Mixture of Experts "
                       "model is not supported: name the modules (%s)", mods);
    for (const char *p = t; *p;) {   /* each target: its last name */
        while (*p == ' ' || *p == ',') ++p;
        const size_t n = strcspn(p, ", ");
        if (!n) break;
        char tok[160];
        snprintf(tok, sizeof tok, "%.*s", (int)n, p);
        const char *dot = strrchr(tok, '.'), *last = dot ? dot + 1 : tok;
        if (strstr(tok, "experts") || !strcmp(last, "gate") || !strcmp(last, "router") ||
            !strcmp(last, "w1") || !strcmp(last, "w2") || !strcmp(last, "w3") ||
            !strcmp(last, "gate_up_proj"))
            return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.targets: '%.*s': the experts and "
                           "routers of a Mixture of Experts model (mlp.experts.*, "
                           "block_sparse_moe.experts.*, the router mlp.gate) are not LoRA targets; "
                           "this model has %s", (int)n, p, mods);
        p += n;
    }
    if (!shared && (strstr(t, "gate_proj") || strstr(t, "up_proj") || strstr(t, "down_proj")))
        return zt_fail(st, ZT_EUNSUPPORTED, "ztrain.lora.targets='%s': %s; LoRA on the MLP of a "
                       "Mixture of Experts model is on Qwen2-MoE's shared expert with every block "
                       "sparse; this model has %s", t,
                       m->shared_expert > 0 ? "its dense blocks' MLPs differ from the shared expert"
                                            : "it has no shared expert", mods);
    return ZT_OK;
}

static int llama_create(const zt_model_config *mc, const zt_backend *be, int ckpt_k,
                        const zt_model_ops **ops, void **self, zt_status *st) {
    zt_llama *m;
    ZT_TRY(zt_llama_new(mc, be, &m, st));
    zt_llama_set_checkpointing(m, ckpt_k);
    *ops = &llama_ops;
    *self = m;
    return ZT_OK;
}

/* LoRA's modules (lora.h): the four matmuls of a block and their columns.
 * A Mixture of Experts model: attention, and the shared expert's MLP when
 * every block has it (Qwen2-MoE's mlp.shared_expert.*, not mixed); the
 * experts are no target (llama_check names them). */
static int llama_lora_mods(const zt_model_config *mc, zt_lora_mod *o, int *n_groups) {
    const shape s = shape_of(mc);
    const int KV = s.NKV * s.hd;
    const int shared = s.E && s.H > 0 && s.Ls == s.L;
    const zt_lora_mod t[] = {
        {"q_proj", "self_attn.q_proj", LG_QKV, s.C, s.AD, 0},
        {"k_proj", "self_attn.k_proj", LG_QKV, s.C, KV, s.AD},
        {"v_proj", "self_attn.v_proj", LG_QKV, s.C, KV, s.AD + KV},
        {"o_proj", "self_attn.o_proj", LG_O, s.AD, s.C, 0},
        {"gate_proj", shared ? "mlp.shared_expert.gate_proj" : "mlp.gate_proj", LG_GU, s.C, s.H, 0},
        {"up_proj", shared ? "mlp.shared_expert.up_proj" : "mlp.up_proj", LG_GU, s.C, s.H, s.H},
        {"down_proj", shared ? "mlp.shared_expert.down_proj" : "mlp.down_proj", LG_DOWN, s.H, s.C, 0},
    };
    const int n = s.E && !shared ? 4 : (int)(sizeof t / sizeof t[0]);
    for (int i = 0; i < n; ++i) o[i] = t[i];
    *n_groups = 4;
    return n;
}

/* A token's unrouted experts: (E - K) of every sparse block's E experts. */
static uint64_t llama_inactive_params(const zt_model_config *mc) {
    const shape s = shape_of(mc);
    return (uint64_t)s.Ls * (uint64_t)(s.E - s.K) * 3u * (uint64_t)s.I * (uint64_t)s.C;
}

/* DeepSpeed's largest layer: embed / lm_head, q, k|v, o, gate|up, down. */
static uint64_t llama_largest_layer(const zt_model_config *mc) {
    const shape s = shape_of(mc);
    const uint64_t C = (uint64_t)s.C, V = (uint64_t)s.V, AD = (uint64_t)s.AD;
    const uint64_t KV = (uint64_t)s.NKV * (uint64_t)s.hd, H = (uint64_t)s.Hmax;
    uint64_t m = V * C;
    if (AD * C > m) m = AD * C;
    if (KV * C > m) m = KV * C;
    if (H * C > m) m = H * C;
    return m;
}

static uint64_t llama_acts_bytes(const zt_model_config *mc, int B, int T, int training,
                                 int ckpt_k, int elem) {
    return acts_bytes(mc, B, T, training, ckpt_k, elem);
}

/* The largest scratch request of llama_forward's and llama_backward's CUDA
 * kernels (RMSNorm forward, RoPE and SwiGLU take none), the optimizer's
 * reductions, the eval and sample forwards (gpt.c's gpt_kernel_ws). */
static uint64_t llama_kernel_ws(const zt_model_config *mc, int B, int T, int E, uint64_t psi,
                                int bf16, zt_att_ws *att) {
    const shape s = shape_of(mc);
    const int C = s.C, V = s.V, N = B * T, H = s.Hmax, AD = s.AD, QKV = s.QKV;
    /* the attention over T * sp tokens (attn_window, attn_opts): the full
     * layers' options and, where layers slide and the window is shorter
     * (Gemma: any window), the sliding layers' (another cuDNN plan) */
    const int Ta = T * s.sp, slide = s.window > 0 && (s.gemma || s.window < Ta);
    const float asc = s.gemma ? s.ascale : 1.0f / sqrtf((float)s.hd);
    const zt_attn_opts ao[2] = {{asc, s.acap, 0}, {asc, s.acap, s.window}};
    /* (the training blocks' attention entries; eval and sample: fp32 q|k|v) */
    const int in16 = zt_att_in16_of(mc, att ? att->be : NULL, 1, s.sp);
    /* (do16: cuDNN reads the caller's bf16 dO, no buffer of its own) */
    const int do16 = zt_do16_of(mc, att ? att->be : NULL, 1, s.sp) ? ZT_ATT_DO16 : 0;
    uint64_t w = 0;
#define WS(x) do { uint64_t v_ = (uint64_t)(x); if (v_ > w) w = v_; } while (0)
    /* a forward of [Bf, T]: the training step's, eval's [E, T], sample's [1, T] */
#define FWD(Bf, I16, TR)                                                         \
    do {                                                                         \
        const int Nf = (Bf) * T;                                                 \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, C, QKV));                             \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, AD, C));                              \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, C, 2 * H));                           \
        WS(zt_cuda_ws_matmul_fwd(bf16, Nf, H, C));                               \
        /* head chunk (TR: a training block's rows) */                           \
        WS(zt_cuda_ws_matmul_fwd(bf16, (int)zt_classifier_rows(mc, Nf, (TR), s.fcap > 0), C, V)); \
        for (int k_ = 0; k_ <= slide; ++k_)                                      \
            WS(zt_att_ws_of(att, 0, bf16, (I16), (Bf), Ta, s.NHl, s.NKVl, s.hd, &ao[k_])); \
    } while (0)
    FWD(B, in16, 1);
    /* the training blocks' bf16 experts (moe.h b16, moe.c): one grouped
     * GEMM for every local expert's gate|up (the fp32 routed rows rounded
     * in scratch) and one for their down (the bf16 SwiGLU output as it is),
     * over the rows they receive (zt_moe_recv_rows) */
    if (s.E > 0 && bf16 && zt_acts16_on(mc) && zt_w16_on(mc, ZT_W16_O16)) {
        const zt_moe_shape ms = {C, s.E, s.K, s.I, s.norm, s.ep, 1, 0, 0, 0, 0, 0};
        const size_t R = zt_moe_recv_rows(&ms, (size_t)N);
        const int El = s.E / (s.ep > 1 ? s.ep : 1);
        /* (mx16, or expert parallelism's received rows kept in bf16
         * (moe.h ep_x16): bf16 rows, nothing rounded) */
        const int r16 = llama_mx16(mc, &s) ||
                        (s.ep > 1 && zt_w16_on(mc, ZT_W16_EP16) && zt_w16_on(mc, ZT_W16_EPX16));
        WS(zt_cuda_ws_matmul_grouped(!r16, R, C, El));
        WS(zt_cuda_ws_matmul_grouped(0, R, s.I, El));
    }
    WS(zt_cuda_ws_reduce((size_t)N));
    /* LM head chunk (bf16 logits: its bf16 gradient read as it is) */
    const int Rh = (int)zt_classifier_rows(mc, N, 1, s.fcap > 0);
    WS(zt_classifier_l16(mc, 1, s.fcap > 0) ? zt_cuda_ws_matmul_bwd_head16(Rh, C, V, 1, 1)
                                            : zt_cuda_ws_matmul_bwd(bf16, Rh, C, V, 1, 1, 0));
    WS(zt_cuda_ws_rmsnorm_bwd(N, C));                         /* final, mlp, attn norms */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, H, C, 1, 1, 0));       /* down */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, C, 2 * H, 1, 1, 0));   /* gate | up */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, AD, C, 1, 1, 0));      /* o */
    /* (sequence parallel: all T, NH/N heads; Gemma 2's soft-cap keeps its derivative) */
    const int cud0 = att ? att->cudnn : 0;
    for (int k = 0; k <= slide; ++k)
        WS(zt_att_ws_of(att, 1, bf16, in16 | do16, B, Ta, s.NHl, s.NKVl, s.hd, &ao[k]));
    /* (of those backward calls, on cuDNN's path: with ZT_ATT_IN16OD they
     * write the bf16 gradient, gqa_ext_bwd16d answering 1; the others the
     * fp32 one) */
    const int cud = att ? att->cudnn - cud0 : 0;
    /* q_norm (k_norm: no more); ZT_ATT_IN16OD with them (qkb16), where
     * cuDNN's path writes the bf16 gradient: qknorm_rope_bwd16's both
     * norms' partial dw, more */
    if (s.qkn && in16 == ZT_ATT_IN16OD && cud > 0)
        WS(zt_cuda_ws_qknorm_rope_bwd16(N, s.NH, s.NKV, s.qnh, s.knh, s.hd));
    if (s.qkn && !(in16 == ZT_ATT_IN16OD && cud == slide + 1))
        WS(zt_cuda_ws_rmsnorm_bwd(N * s.qnh, s.qw));
    /* (ZT_ATT_IN16OD: the GEMM without the bias gradient, rope_bwd16 taking
     * it, zt_cuda_ws_colsum(N, QKV): the same largest request) */
    WS(zt_cuda_ws_matmul_bwd(bf16, N, C, QKV, 1, 1, s.bias));
    WS(zt_cuda_ws_encoder_bwd(N, 0));
    WS(zt_cuda_ws_reduce((size_t)psi));
    if (E > 0) WS(zt_cuda_ws_reduce((size_t)E * (size_t)T));
    if (E > 0) FWD(E, ZT_ATT_IN32, 0);
    FWD(1, ZT_ATT_IN32, 0);
#undef FWD
#undef WS
    return w;
}

static void llama_summary(const zt_model_config *mc, int style, char *buf, size_t n) {
    const int llama3 = !strcmp(mc->rope_scaling, "llama3");
    const int scaled = strcmp(mc->rope_scaling, "none") != 0;
    const char *tied = mc->tie_embeddings ? "tied" : "untied";
    char gem[160] = "", moe[160] = "";   /* Gemma's blocks, window and soft-caps; experts */
    if (mc->n_experts > 0) {
        int k = snprintf(moe, sizeof moe, ", %d experts of width %d (top-%d%s)", mc->n_experts,
                         mc->moe_intermediate, mc->experts_per_token,
                         mc->moe_norm_topk ? ", renormalised" : "");
        if (mc->shared_expert > 0 && k > 0 && (size_t)k < sizeof moe)
            k += snprintf(moe + k, sizeof moe - (size_t)k, ", shared expert %d", mc->shared_expert);
        const int ns = zt_model_sparse_layers(mc);
        if (ns < mc->n_layer && k > 0 && (size_t)k < sizeof moe)
            snprintf(moe + k, sizeof moe - (size_t)k, " in %d of %d blocks (the others dense, %d)", ns,
                     mc->n_layer, zt_model_intermediate(mc));
    }
    if (mc->gemma) {
        int k = snprintf(gem, sizeof gem, ", Gemma %d blocks", mc->gemma);
        if (mc->sliding_window > 0 && k > 0 && (size_t)k < sizeof gem)
            k += snprintf(gem + k, sizeof gem - (size_t)k, ", window %d (full every %d layers)",
                          mc->sliding_window, mc->sliding_pattern);
        if ((mc->attn_softcap > 0 || mc->final_softcap > 0) && k > 0 && (size_t)k < sizeof gem)
            snprintf(gem + k, sizeof gem - (size_t)k, ", soft-caps %g / %g", mc->attn_softcap,
                     mc->final_softcap);
    } else if (mc->sliding_window > 0) {   /* Mistral, Phi-3, Qwen2/3 */
        snprintf(gem, sizeof gem, ", window %d (layers %d and later)", mc->sliding_window,
                 mc->sliding_from);
    }
    if (style == ZT_ARCH_SUM_LOG) {
        snprintf(buf, n, ": %d kv heads, head dim %d, intermediate %d, %s head%s%s%s%s%s%s%s",
                 zt_model_kv_heads(mc), zt_model_head_dim(mc), zt_model_intermediate(mc), tied,
                 mc->attention_bias ? ", q/k/v biases" : "", mc->qk_norm ? ", q/k norms" : "",
                 scaled ? ", " : "", scaled ? mc->rope_scaling : "", scaled ? " rope scaling" : "", gem,
                 moe);
    } else if (style == ZT_ARCH_SUM_ESTIMATE) {
        if (mc->n_experts > 0)
            snprintf(buf, n, " (%d key/value), head dim %d, %s head%s%s%s", zt_model_kv_heads(mc),
                     zt_model_head_dim(mc), tied, mc->qk_norm ? ", q/k norms" : "", gem, moe);
        else
            snprintf(buf, n, " (%d key/value), head dim %d, MLP %d, %s head%s%s", zt_model_kv_heads(mc),
                     zt_model_head_dim(mc), zt_model_intermediate(mc), tied,
                     mc->qk_norm ? ", q/k norms" : "", gem);
    } else {
        char rope[160] = "";
        if (llama3)
            snprintf(rope, sizeof rope, ", llama3 scaling (factor %g, low %g, high %g, original %d)",
                     mc->rope_factor, mc->rope_low_freq_factor, mc->rope_high_freq_factor,
                     mc->rope_original_max);
        else if (!strcmp(mc->rope_scaling, "yarn"))
            snprintf(rope, sizeof rope, ", yarn scaling (factor %g, original %d, attention factor %g, "
                     "beta %g/%g%s)", mc->rope_factor, mc->rope_original_max,
                     (double)zt_llama_rope_scale(mc), mc->rope_beta_fast, mc->rope_beta_slow,
                     mc->rope_truncate ? "" : ", not truncated");
        else if (is_longrope(mc))
            snprintf(rope, sizeof rope, ", longrope scaling (factor %g, original %d, attention factor "
                     "%g)", mc->rope_factor, mc->rope_original_max, (double)zt_llama_rope_scale(mc));
        else if (scaled)
            snprintf(rope, sizeof rope, ", %s scaling (factor %g)", mc->rope_scaling, mc->rope_factor);
        snprintf(buf, n, "llama: %d layers, %d heads (%d kv, head dim %d), %d wide, intermediate "
                 "%d, context %d, vocab %d, rope theta %g%s, rms_norm_eps %g, %s head%s%s%s%s",
                 mc->n_layer, mc->n_head, zt_model_kv_heads(mc), zt_model_head_dim(mc), mc->n_embd,
                 zt_model_intermediate(mc), mc->context, mc->vocab, mc->rope_theta, rope,
                 mc->norm_eps, tied, mc->attention_bias ? ", q/k/v biases" : "",
                 mc->qk_norm ? ", q/k norms" : "", gem, moe);
    }
}

/* The Hugging Face families (transformers 5.23's defaults for keys absent
 * from config.json, models/<m>/configuration_<m>.py).  Llama first: the
 * default export. */
static const zt_arch_fuse phi3_fuse[] = {
    {"model.layers.%d.self_attn.qkv_proj.weight", "q.w", "v.w"},
    {"model.layers.%d.mlp.gate_up_proj.weight", "gate.w", "up.w"},
    {NULL, NULL, NULL},
};
static const zt_arch_rename gemma_rename[] = {
    {"mlp_norm.w", "model.layers.%d.pre_feedforward_layernorm.weight", 0},
    {NULL, NULL, 0},
};
/* Mixture of Experts: the hub files' per-expert tensors (transformers 5's
 * conversion_mapping.py: Mixtral's block_sparse_moe.experts.E.w1 / w3 / w2
 * and Qwen-MoE's / OLMoE's mlp.experts.E.gate_proj / up_proj / down_proj,
 * stacked into gate_up_proj [E, 2I, C] gate first and down_proj [E, C, I]) */
static const zt_arch_experts mixtral_experts = {
    "model.layers.%d.block_sparse_moe.gate.weight",
    "model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
    "model.layers.%d.block_sparse_moe.experts.%d.w3.weight",
    "model.layers.%d.block_sparse_moe.experts.%d.w2.weight",
};
static const zt_arch_experts qwen_experts = {
    NULL,
    "model.layers.%d.mlp.experts.%d.gate_proj.weight",
    "model.layers.%d.mlp.experts.%d.up_proj.weight",
    "model.layers.%d.mlp.experts.%d.down_proj.weight",
};
/* Qwen2-MoE's shared expert is our dense MLP of a sparse block (a dense
 * block's MLP keeps mlp.gate_proj ...) */
static const zt_arch_rename qwen2_moe_rename[] = {
    {"gate.w", "model.layers.%d.mlp.shared_expert.gate_proj.weight", 1},
    {"up.w", "model.layers.%d.mlp.shared_expert.up_proj.weight", 1},
    {"down.w", "model.layers.%d.mlp.shared_expert.down_proj.weight", 1},
    {NULL, NULL, 0},
};
static const zt_arch_hf llama_hf[] = {
    {"LlamaForCausalLM", "llama", ZT_HF_BIAS_KEYS, 32000, 4096, 11008, 32, 32, -1, 2048, 1e-6, 0, 0, -1, NULL, NULL, NULL},
    {"MistralForCausalLM", "mistral", ZT_HF_SLIDING, 32000, 4096, 14336, 32,
     32, 8, 131072, 1e-6, 0, 0, -1, NULL, NULL, NULL},
    {"Qwen2ForCausalLM", "qwen2", ZT_HF_QKV_BIAS | ZT_HF_SLIDING_OPT, 151936, 4096, 22016, 32, 32,
     32, 32768, 1e-6, 0, 0, -1, NULL, NULL, NULL},
    {"Qwen3ForCausalLM", "qwen3", ZT_HF_QK_NORM | ZT_HF_BIAS_KEYS | ZT_HF_SLIDING_OPT, 151936, 4096,
     22016, 32, 32, 32, 32768, 1e-6, 0, 128, -1, NULL, NULL, NULL},
    {"Phi3ForCausalLM", "phi3", ZT_HF_SLIDING | ZT_HF_NO_WINDOW, 32064, 3072, 8192, 32, 32, -1, 4096,
     1e-5, 0, 0, 32000, phi3_fuse, NULL, NULL},
    {"Gemma2ForCausalLM", "gemma2", ZT_HF_GEMMA2, 256000, 2304, 9216, 26, 8, 4, 8192, 1e-6, 1, 256,
     0, NULL, gemma_rename, NULL},
    {"Gemma3ForCausalLM", "gemma3_text", ZT_HF_GEMMA3 | ZT_HF_QK_NORM, 262208, 2304, 9216, 26, 8, 4,
     131072, 1e-6, 1, 256, 0, NULL, gemma_rename, NULL},
    {"MixtralForCausalLM", "mixtral", ZT_HF_SLIDING | ZT_HF_NO_WINDOW | ZT_HF_MOE, 32000, 4096,
     14336, 32, 32, 8, 131072, 1e-5, 0, 0, -1, NULL, NULL, &mixtral_experts},
    {"Qwen2MoeForCausalLM", "qwen2_moe", ZT_HF_QKV_BIAS | ZT_HF_SLIDING_OPT | ZT_HF_MOE |
     ZT_HF_SHARED_EXPERT, 151936, 2048, 5632, 24, 16, 16, 32768, 1e-6, 0, 0, -1, NULL,
     qwen2_moe_rename, &qwen_experts},
    {"Qwen3MoeForCausalLM", "qwen3_moe", ZT_HF_QK_NORM | ZT_HF_BIAS_KEYS | ZT_HF_SLIDING_OPT |
     ZT_HF_MOE, 151936, 2048, 6144, 24, 32, 4, 32768, 1e-6, 0, 0, -1, NULL, NULL, &qwen_experts},
    {"OlmoeForCausalLM", "olmoe", ZT_HF_QK_NORM | ZT_HF_QK_FULL | ZT_HF_BIAS_KEYS | ZT_HF_MOE, 50304,
     2048, 2048, 16, 16, -1, 4096, 1e-5, 0, 0, 1, NULL, NULL, &qwen_experts},
};
enum { HF_LLAMA, HF_MISTRAL, HF_QWEN2, HF_QWEN3, HF_PHI3, HF_GEMMA2, HF_GEMMA3, HF_MIXTRAL,
       HF_QWEN2_MOE, HF_QWEN3_MOE, HF_OLMOE };
static const char *const llama_hf_ignore[] = {".rotary_emb.inv_freq", NULL};

/* Without a stored family: q/k norms are Qwen3's; q/k/v biases without an
 * o_proj bias are Qwen2's (Llama's attention_bias biases o_proj too); else
 * Llama. */
static const zt_arch_hf *llama_hf_default(const zt_model_config *mc) {
    if (mc->gemma) return &llama_hf[mc->gemma == 2 ? HF_GEMMA2 : HF_GEMMA3];
    if (mc->n_experts > 0)
        return &llama_hf[mc->qk_norm_full ? HF_OLMOE : mc->qk_norm ? HF_QWEN3_MOE
                         : mc->attention_bias ? HF_QWEN2_MOE : HF_MIXTRAL];
    if (mc->qk_norm) return &llama_hf[HF_QWEN3];
    if (mc->attention_bias) return &llama_hf[HF_QWEN2];
    return mc->sliding_window > 0 ? &llama_hf[HF_MISTRAL] : &llama_hf[HF_LLAMA];
}

static const char *llama_hf_refuse(const zt_arch_hf *f, const zt_model_config *mc) {
    if ((f->flags & ZT_HF_MOE) && mc->n_experts < 1)
        return "it is a Mixture of Experts; set ztrain.model.n_experts";
    if (!(f->flags & ZT_HF_MOE) && mc->n_experts > 0)
        return "it has no experts (ztrain.model.n_experts is set)";
    if (!(f->flags & ZT_HF_SHARED_EXPERT) && mc->n_experts > 0 && mc->shared_expert > 0)
        return "it has no shared expert (ztrain.model.shared_expert_size is Qwen2-MoE's)";
    if ((f->flags & ZT_HF_SHARED_EXPERT) && mc->shared_expert < 1)
        return "it has a shared expert; set ztrain.model.shared_expert_size";
    if (!!(f->flags & ZT_HF_QK_FULL) != !!(mc->qk_norm && mc->qk_norm_full))
        return (f->flags & ZT_HF_QK_FULL) ? "its q/k norms span the whole projection; set "
                                            "ztrain.model.qk_norm=true and qk_norm_full=true"
                                          : "its q/k norms, if any, are per head (ztrain.model.qk_norm_full "
                                            "is OLMoE's)";
    if (!(f->flags & ZT_HF_SHARED_EXPERT) && strcmp(f->model_type, "qwen3_moe") && mc->n_experts > 0 &&
        zt_model_sparse_layers(mc) < mc->n_layer)
        return "every block has experts (dense blocks: decoder_sparse_step, mlp_only_layers are "
               "Qwen-MoE's)";
    if (!strcmp(f->model_type, "mixtral") && !mc->moe_norm_topk)
        return "it renormalises the top-k routing weights (ztrain.model.moe_norm_topk=true)";
    const int fg = (f->flags & ZT_HF_GEMMA2) ? 2 : (f->flags & ZT_HF_GEMMA3) ? 3 : 0;
    if (fg != mc->gemma)
        return fg == 2   ? "it is Gemma 2; set ztrain.model.gemma=2"
             : fg == 3   ? "it is Gemma 3; set ztrain.model.gemma=3"
                         : "it has no Gemma blocks (ztrain.model.gemma is set)";
    if (fg == 2 && mc->rope_local_theta > 0 && mc->rope_local_theta != mc->rope_theta)
        return "its sliding layers share the rotary embedding (ztrain.model.rope_local_theta is "
               "Gemma 3's)";
    if (fg && mc->attention_bias) return "it has no q/k/v biases";
    if ((f->flags & ZT_HF_QK_NORM) && !mc->qk_norm)
        return "it normalizes q and k per head; set ztrain.model.qk_norm=true";
    if (!(f->flags & ZT_HF_QK_NORM) && mc->qk_norm)
        return "it has no q/k norms (ztrain.model.qk_norm=true is Qwen3's)";
    if ((f->flags & ZT_HF_QKV_BIAS) && !mc->attention_bias)
        return "its q/k/v projections have biases; set ztrain.model.attention_bias=true";
    if (!(f->flags & ZT_HF_QKV_BIAS) && mc->attention_bias)
        return "it has no q/k/v-only biases (ztrain.model.attention_bias=true is Qwen2's)";
    /* which layers slide: Gemma's pattern, Qwen2/3's from max_window_layers on, Mistral's and
     * Phi-3's all; Llama has no window */
    const int slides = mc->sliding_window > 0;
    if (!fg && !(f->flags & (ZT_HF_SLIDING | ZT_HF_SLIDING_OPT)) && slides)
        return "it has no sliding window (ztrain.model.sliding_window is set)";
    if (!fg && mc->sliding_pattern != 0)
        return "its layers are not a Gemma pattern (ztrain.model.sliding_pattern is Gemma's)";
    if (!(f->flags & ZT_HF_SLIDING_OPT) && mc->sliding_from != 0)
        return "its sliding layers start at the first one (ztrain.model.sliding_from is Qwen2/3's "
               "max_window_layers)";
    return NULL;
}

/* a longrope factor list as a JSON array (its numbers as written) */
static json_t *factor_array(const char *s) {
    json_t *a = json_array();
    for (const char *p = s; a && *p;) {
        char *end;
        const double v = strtod(p, &end);
        if (end == p) break;   /* llama_check parsed it */
        json_array_append_new(a, json_real(v));
        p = end;
        while (*p == ' ' || *p == ',') ++p;
    }
    return a;
}

/* A number, or null for 0 (Gemma's soft-caps and window). */
static json_t *num_or_null(double v) { return v != 0 ? json_real(v) : json_null(); }

/* Gemma 2 / 3's own keys over llama_hf_config's */
static void gemma_hf_config(const zt_model_config *mc, const zt_arch_hf *f, json_t *c) {
    const shape s = shape_of(mc);
    json_object_del(c, "hidden_act");
    json_object_set_new(c, "hidden_activation", json_string("gelu_pytorch_tanh"));
    /* an int in Gemma2Config / Gemma3TextConfig (strict types) */
    const double qs = mc->query_pre_attn_scalar > 0 ? mc->query_pre_attn_scalar : s.hd;
    json_object_set_new(c, "query_pre_attn_scalar",
                        qs == floor(qs) && qs < 1e15 ? json_integer((json_int_t)qs) : json_real(qs));
    json_object_set_new(c, "attn_logit_softcapping", num_or_null(mc->attn_softcap));
    json_object_set_new(c, "final_logit_softcapping", num_or_null(mc->final_softcap));
    json_object_set_new(c, "sliding_window", mc->sliding_window > 0 ? json_integer(mc->sliding_window)
                                                                    : json_null());
    json_t *lt = json_array();
    for (int l = 0; l < mc->n_layer; ++l)
        json_array_append_new(lt, json_string(layer_sliding_type(&s, l) ? "sliding_attention"
                                                                    : "full_attention"));
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "attention_bias", json_false());
    if (f->flags & ZT_HF_GEMMA3) {
        /* transformers 5's per-layer-type rotary parameters: the full layers'
         * (rope_theta, rope_scaling), the sliding layers' default at the local base */
        json_t *rs = json_object_get(c, "rope_scaling");
        json_t *full = json_is_object(rs) ? json_deep_copy(rs) : json_pack("{s:s}", "rope_type", "default");
        json_object_set_new(full, "rope_theta", json_real(mc->rope_theta));
        json_object_set_new(c, "rope_parameters", json_pack("{s:o,s:{s:s,s:o}}", "full_attention", full,
                            "sliding_attention", "rope_type", "default", "rope_theta",
                            json_real(mc->rope_local_theta > 0 ? mc->rope_local_theta : mc->rope_theta)));
        json_object_del(c, "rope_scaling");
        json_object_del(c, "rope_theta");
    }
}

/* Mixture of Experts keys (transformers 5.24's MixtralConfig, Qwen2MoeConfig,
 * Qwen3MoeConfig): every block sparse, no load-balancing loss in the
 * training loss (output_router_logits false) */
static void moe_hf_config(const zt_model_config *mc, const zt_arch_hf *f, json_t *c) {
    const int mixtral = !strcmp(f->model_type, "mixtral"), olmoe = !strcmp(f->model_type, "olmoe");
    json_object_set_new(c, mixtral ? "num_local_experts" : "num_experts", json_integer(mc->n_experts));
    json_object_set_new(c, "num_experts_per_tok", json_integer(mc->experts_per_token));
    if (mixtral) {
        json_object_set_new(c, "intermediate_size", json_integer(mc->moe_intermediate));
        json_object_set_new(c, "router_jitter_noise", json_real(0.0));
    } else if (olmoe) {
        json_object_set_new(c, "intermediate_size", json_integer(mc->moe_intermediate));
        json_object_set_new(c, "norm_topk_prob", json_boolean(mc->moe_norm_topk));
        json_object_set_new(c, "clip_qkv", json_null());
        json_object_del(c, "max_window_layers");
        json_object_del(c, "mlp_bias");
    } else {
        json_object_set_new(c, "moe_intermediate_size", json_integer(mc->moe_intermediate));
        json_object_set_new(c, "norm_topk_prob", json_boolean(mc->moe_norm_topk));
        json_object_set_new(c, "decoder_sparse_step",
                            json_integer(mc->decoder_sparse_step > 0 ? mc->decoder_sparse_step : 1));
        json_t *mlo = json_array();
        int b[256];   /* (the key's 512 bytes hold at most 256 numbers) */
        const int n = zt_mlp_only_parse(mc->mlp_only_layers, 256, b);
        for (int i = 0; i < n && i < 256; ++i) json_array_append_new(mlo, json_integer(b[i]));
        json_object_set_new(c, "mlp_only_layers", mlo);
    }
    if (f->flags & ZT_HF_SHARED_EXPERT)
        json_object_set_new(c, "shared_expert_intermediate_size", json_integer(mc->shared_expert));
    json_object_set_new(c, "output_router_logits", json_boolean(mc->router_aux_loss_coef > 0));
    if (mc->router_aux_loss_coef > 0)
        json_object_set_new(c, "router_aux_loss_coef", json_real(mc->router_aux_loss_coef));
}

/* config.json's keys of family f (after architectures and model_type) */
static void llama_hf_config(const zt_model_config *mc, const zt_arch_hf *f, json_t *c, json_t *orig) {
    json_object_set_new(c, "vocab_size", json_integer(mc->vocab));
    json_object_set_new(c, "hidden_size", json_integer(mc->n_embd));
    json_object_set_new(c, "intermediate_size", json_integer(zt_model_intermediate(mc)));
    json_object_set_new(c, "num_hidden_layers", json_integer(mc->n_layer));
    json_object_set_new(c, "num_attention_heads", json_integer(mc->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(zt_model_kv_heads(mc)));
    json_object_set_new(c, "head_dim", json_integer(zt_model_head_dim(mc)));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "max_position_embeddings", json_integer(mc->context));
    json_object_set_new(c, "rms_norm_eps", json_real(mc->norm_eps));
    json_object_set_new(c, "rope_theta", json_real(mc->rope_theta));
    if (!strcmp(mc->rope_scaling, "llama3"))
        json_object_set_new(c, "rope_scaling", json_pack("{s:s,s:o,s:o,s:o,s:i}", "rope_type",
                            "llama3", "factor", json_real(mc->rope_factor), "low_freq_factor",
                            json_real(mc->rope_low_freq_factor), "high_freq_factor",
                            json_real(mc->rope_high_freq_factor), "original_max_position_embeddings",
                            mc->rope_original_max));
    else if (!strcmp(mc->rope_scaling, "yarn"))   /* the attention factor resolved */
        json_object_set_new(c, "rope_scaling", json_pack("{s:s,s:o,s:i,s:o,s:o,s:o,s:b}", "rope_type",
                            "yarn", "factor", json_real(mc->rope_factor),
                            "original_max_position_embeddings", mc->rope_original_max,
                            "attention_factor", json_real(mc->rope_attention_factor > 0
                                ? mc->rope_attention_factor : yarn_mscale(mc->rope_factor)),
                            "beta_fast", json_real(mc->rope_beta_fast), "beta_slow",
                            json_real(mc->rope_beta_slow), "truncate", mc->rope_truncate != 0));
    else if (is_longrope(mc)) {   /* the attention factor resolved; the original context also
                                   * at the top, where Phi-3 reads it first */
        json_object_set_new(c, "rope_scaling", json_pack("{s:s,s:o,s:i,s:o,s:o,s:o}", "rope_type",
                            "longrope", "factor", json_real(mc->rope_factor),
                            "original_max_position_embeddings", mc->rope_original_max,
                            "attention_factor", json_real(mc->rope_attention_factor > 0 ? mc->rope_attention_factor
                                : longrope_mscale(mc->rope_factor, mc->rope_original_max)),
                            "short_factor", factor_array(mc->rope_short_factor),
                            "long_factor", factor_array(mc->rope_long_factor)));
        json_object_set_new(c, "original_max_position_embeddings", json_integer(mc->rope_original_max));
    } else if (strcmp(mc->rope_scaling, "none") != 0)   /* linear, dynamic */
        json_object_set_new(c, "rope_scaling", json_pack("{s:s,s:o}", "rope_type", mc->rope_scaling,
                                                         "factor", json_real(mc->rope_factor)));
    else
        json_object_set_new(c, "rope_scaling", json_null());
    json_object_set_new(c, "tie_word_embeddings", json_boolean(mc->tie_embeddings));
    if (f->flags & ZT_HF_BIAS_KEYS) {
        json_object_set_new(c, "attention_bias", json_false());
        json_object_set_new(c, "mlp_bias", json_false());
    }
    if ((f->flags & ZT_HF_SLIDING_OPT) && mc->sliding_window > 0) {   /* layers from max_window_layers on */
        json_object_set_new(c, "use_sliding_window", json_true());
        json_object_set_new(c, "sliding_window", json_integer(mc->sliding_window));
        json_object_set_new(c, "max_window_layers", json_integer(mc->sliding_from));
    } else {
        if (f->flags & ZT_HF_SLIDING_OPT) json_object_set_new(c, "use_sliding_window", json_false());
        if (f->flags & ZT_HF_QK_NORM) json_object_set_new(c, "max_window_layers", json_integer(mc->n_layer));
    }
    if (f->flags & ZT_HF_SLIDING) {
        /* Mistral, Phi-3: the original's window (its null or absence too), else ours (none:
         * null, not Mistral's default 4096) */
        json_t *sw = orig ? json_object_get(orig, "sliding_window") : NULL;
        const int dflt = (f->flags & ZT_HF_NO_WINDOW) ? 0 : 4096;   /* the class's, when absent */
        if (sw && !(mc->sliding_window > 0 && json_integer_value(sw) != mc->sliding_window))
            json_object_set(c, "sliding_window", sw);
        else if (!(orig && !sw && mc->sliding_window == dflt))   /* absent in the original too */
            json_object_set_new(c, "sliding_window", mc->sliding_window > 0
                                ? json_integer(mc->sliding_window) : json_null());
    }
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    if (mc->gemma) gemma_hf_config(mc, f, c);
    if (f->flags & ZT_HF_MOE) moe_hf_config(mc, f, c);
}

const zt_arch zt_arch_llama = {
    .name = "llama",
    .id = ZT_ARCH_LLAMA,
    .check = llama_check,
    .model_ops = &llama_ops,
    .create = llama_create,
    .set_mesh = llama_set_mesh,
    .tensors = llama_tensors,
    .n_tensors = LLAMA_NT,
    .tensor_shape = llama_tensor_shape,
    .gemm_weight = llama_gemm_weight,
    .block_kind = llama_block_kind,
    .tensor_init = llama_tensor_init,
    .own_unit = llama_own_unit,
    .head_unit = "head",
    .tied_head = 1,
    .largest_layer = llama_largest_layer,
    .inactive_params = llama_inactive_params,
    .aux_loss = zt_llama_aux_loss,
    .acts_bytes = llama_acts_bytes,
    .kernel_ws = llama_kernel_ws,
    .sp16 = llama_sp16,
    .summary = llama_summary,
    .hf = llama_hf,
    .n_hf = (int)(sizeof llama_hf / sizeof llama_hf[0]),
    .hf_ignore = llama_hf_ignore,
    .hf_optional_prefix = NULL,
    .hf_default = llama_hf_default,
    .hf_refuse = llama_hf_refuse,
    .hf_config = llama_hf_config,
    .lora_mods = llama_lora_mods,
    .lora_default = "q_proj,v_proj",
    .hf_block = "model.layers.%d.",
};
