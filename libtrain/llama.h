/*
 * llama.h -- the built-in Llama-family model (Llama 2/3, Qwen2-style q/k/v
 * biases), beside the GPT on the same public unit API (ztrain.h "models:
 * the unit API"): every ZeRO stage, hybrid sharding, accumulation,
 * activation checkpointing, offload, mixed precision and resharding
 * restore work for it unchanged.
 *
 * Units, in the order forward first uses them (the layout contract shared
 * with the HF loader / exporter):
 *   unit 0      "embeddings": "embed.w" [V, C]
 *   unit 1+l    "block.l":    "h<l>.attn_norm.w" [C], "h<l>.q.w" [NH*hd, C],
 *                             "h<l>.k.w" [NKV*hd, C], "h<l>.v.w" [NKV*hd, C],
 *                             (attention_bias: "h<l>.q.b", ".k.b", ".v.b"),
 *                             (qk_norm: "h<l>.q_norm.w" [hd], "h<l>.k_norm.w" [hd]),
 *                             "h<l>.o.w" [C, NH*hd], (gemma: "h<l>.post_attn_norm.w" [C]),
 *                             "h<l>.mlp_norm.w" [C],
 *                             "h<l>.gate.w" [H, C], "h<l>.up.w" [H, C],
 *                             "h<l>.down.w" [C, H], (gemma: "h<l>.post_mlp_norm.w" [C]);
 *                             n_experts > 0 (moe.h): "h<l>.router.w" [E, C],
 *                             "h<l>.experts.gate_up.w" [E 2I, C], "h<l>.experts.down.w"
 *                             [E C, I], and gate/up/down at H = shared_expert_size with
 *                             "h<l>.shared_gate.w" [1, C] (none at 0); a dense block of a
 *                             mixed model (zt_model_layer_sparse 0) has gate/up/down at
 *                             H = intermediate_size and no router or experts
 *   unit L+1    "head":       "norm.w" [C] (+ "lm_head.w" [V, C] untied)
 * q|k|v are adjacent (one matmul gives the qkv row of QKV = (NH+2NKV)*hd
 * floats) and so are gate|up (one matmul gives gu[N, 2H]).  Tied: the LM
 * head uses embed.w, and unit 0 stays gathered from the head's forward to
 * its backward, as the GPT's.
 */
#ifndef ZT_LLAMA_H
#define ZT_LLAMA_H
#include "classifier.h"
#include "lora.h"
#include "model_acts.h"   /* zt_acts_katt */
#include "model.h"
#include "moe.h"

/* Pointers into a unit-shaped buffer. */
typedef struct zt_llama_layer {
    float *attn_norm;          /* [C]                          */
    float *qkvw, *qkvb;        /* [QKV, C], [QKV] or NULL      */
    float *q_norm, *k_norm;    /* [hd] each (qk_norm) or NULL  */
    float *ow;                 /* [C, NH*hd]                   */
    float *post_attn_norm;     /* [C] (gemma) or NULL          */
    float *mlp_norm;           /* [C]                          */
    float *guw;                /* [2H, C]: gate | up           */
    float *downw;              /* [C, H]                       */
    float *post_mlp_norm;      /* [C] (gemma) or NULL          */
    /* Mixture of Experts (moe.h; NULL without): the router [E, C], the experts
     * [E 2I, C] and [E C, I], the shared expert's gate [1, C] (its MLP: guw,
     * downw at width H = shared_expert_size; guw, downw NULL at width 0) */
    float *router, *exgu, *exdown, *shgate;
} zt_llama_layer;
typedef struct zt_llama_params {
    float *embed;              /* [V, C] token embedding (tied: also the LM head) */
    zt_llama_layer *h;         /* [L] blocks */
    float *norm;               /* [C] final RMSNorm */
    float *lm_head;            /* [V, C] untied LM head, or NULL */
} zt_llama_params;

/* Activations for batches up to [B, T] (the GPT's scheme: a training block
 * keeps every layer's slot, an eval block one slot and two ping-pong
 * residuals, checkpointing keeps every k-th block's input). */
typedef struct zt_llama_acts {
    int B, T, training, n_slots;
    int ckpt;                  /* activation checkpointing group size, 0 = none */
    int fB, fT;                /* shape of the last forward */
    float *block;              /* the one allocation */
    size_t bytes;
    const int *inputs, *targets;
    int *no_targets;           /* [B, T] of -1 */
    float *inv_freq;           /* [hd/2] rotary frequencies (in the block) */
    float *inv_freq_local;     /* [hd/2] the sliding layers' (gemma rope_local_theta) or NULL */
    float *w1;                 /* gemma: [max(C, hd)] a norm's 1 + w */
    float *ones;               /* gemma: [max(C, hd)] of 1 */
    float **res;               /* [L+1 or 2] x [N, C] residual stream */
    struct zt_llama_layer_acts {
        float *xn, *rstd1;     /* [N, C], [N] attention RMSNorm */
        float *qkv;            /* [N, QKV] q and k rotated */
        float *qkraw, *qkrstd; /* qk_norm: q, k before their norm [N, NH*hd] | [N, NKV*hd];
                                * rstd [N, NH] | [N, NKV] */
        float *atty, *lse;     /* [N, NH*hd], [B, NH, T] */
        float *atth;           /* sequence parallel: [B, N_sp T, NH/N_sp hd] (else NULL) */
        float *res2;           /* [N, C] after attention */
        float *xn2, *rstd2;    /* [N, C], [N] MLP RMSNorm */
        float *gu;             /* [N, 2H] gate | up */
        float *h;              /* [N, H] swiglu (gemma: geglu) */
        /* bf16 activations (a training block with zt_acts16_on; xn, xn2 and
         * h are then NULL): the same values rounded, read only by GEMMs */
        uint16_t *xn16, *xn216, *h16;
        /* bf16 GEMM outputs (the same blocks; qkv, atty and gu are then
         * NULL; q|k|v and the attention output without sequence parallel):
         * q|k|v after the rotation (the attention rounds them to bf16
         * anyway), the attention output, gate|up (SwiGLU reads the rounded
         * values, forward and backward) */
        uint16_t *qkv16, *atty16, *gu16;
        /* gemma: the attention block's output before its post norm, the
         * MLP's before its post norm, and their rstd */
        float *ao, *rstd3;     /* [N, C], [N] */
        float *mo, *rstd4;     /* [N, C], [N] */
        zt_moe_acts moe;       /* Mixture of Experts: the routing and the experts' rows */
        float *so, *sgl, *sg;  /* the shared expert's output [N, C], gate logit and sigmoid [N] */
        float *lora_h[ZT_LORA_MAX_GROUPS];   /* LoRA: each group's kept h [N, n r] (a
                                * training slot, lora.h zt_lora_keeph_on), else NULL */
    } *layer;                  /* [n_slots]; block l uses layer[l % n_slots] */
    float *scratch;            /* [N, C] projection outputs */
    int fold;                  /* residual l + 1 = res2 + scratch of block l pending
                                  (arch.h addfold), 0 none */
    int fold16;                /* 1: that pending scratch holds the branch in bf16
                                  (uint16_t [N, C], config.h ZT_W16_BRANCH16) */
    float *sp_send, *sp_recv;  /* sequence parallel: [N, QKV] all-to-all buffers ... */
    float *sp_h;               /* ... and [N, QKV] local q|k|v rows (else NULL) */
    uint16_t *sp_dq16;         /* sequence parallel with sp16's bf16 q|k|v gradient (a training
                                * block; llama.c llama_sp16): [N, QKV] bf16, the exchanged
                                * gradient, in place of sp_h (NULL), else NULL */
    float *lnf, *lnf_rstd;     /* [N, C], [N] final RMSNorm (lnf NULL with lnf16) */
    uint16_t *lnf16;           /* [N, C] its output in bf16 alone (a training block with the
                                * bf16 activations, ZT_W16_X16: the LM head's
                                * input, cls.x16), else NULL */
    zt_classifier cls;         /* LM head + loss: [N] losses, one chunk of logits (and
                                * gemma final_softcap, training: of capped logits;
                                * classifier.h) */
    /* backward scratch (training only) */
    float *dres, *dbuf;        /* [N, C] x 2 */
    float *datt;               /* [N, NH*hd] */
    float *dqkv;               /* [N, QKV] */
    float *dh, *dgu;           /* [N, H], [N, 2H] */
    uint16_t *dc16;            /* bf16 activations: the bf16 copy of the [N, C] gradient
                                * the down and o projections' backward GEMMs read
                                * (zt_d16_ok; the residual gradient's, gemma: the
                                * post-norms' input gradient), written by the norm
                                * backward producing it; laid over lnf / lnf16 (dead
                                * after the LM head's backward) where it fits.  (Gate|up's bf16
                                * gradient is written in place of the slot's gu16.) */
    float *f32;                /* bf16 activations: the fp32 values before their rounding,
                                * [N, max(C, H)] (dgu, free in the forward, when it fits) */
    float *stq, *sta;          /* bf16 GEMM outputs: the backward's fp32 copies of q|k|v
                                * [N, QKV] and the attention output [N, NH*hd] (dgu and
                                * dh, free then, when they fit) */
    zt_moe_grad moeg;          /* Mixture of Experts backward scratch */
    float *moe_psum;           /* [E] routing probabilities summed over a forward's layers */
    float *moe_dp;             /* [E] the load-balancing loss's probability gradient */
    float *dsg, *dsgl;         /* [N] the shared expert gate's */
    /* LoRA (ztrain.lora.r > 0) */
    zt_lora_scratch lora;      /* the adapter matmuls' scratch (lora.h) */
    float *dnorm;              /* [C] the frozen norms' weight gradients (discarded) */
    zt_acts_katt katt;         /* blocks-attn: every layer's attention output and lse
                                * (and atth with sequence parallel; model_acts.h;
                                * katt.lse NULL: the slot's own) */
} zt_llama_acts;

typedef struct zt_llama zt_llama;

const zt_model_ops *zt_llama_ops(void);
/* mc->arch need not say "llama": the shape helpers (zt_model_kv_heads ...)
 * give the defaults. */
int zt_llama_new(const zt_model_config *mc, const zt_backend *be, zt_llama **out, zt_status *st);
void zt_llama_free(zt_llama *m);
int zt_model_is_llama(const zt_model *m);
/* A Mixture of Experts model's load-balancing loss of its last forward
 * (moe.h zt_moe_aux) into *aux: 1, or 0 (no experts, no forward yet). */
int zt_llama_aux_loss(const zt_model *m, double *aux);
/* Use activation checkpointing (group size k as zt_gpt_set_checkpointing)
 * in activation blocks created from now on. */
void zt_llama_set_checkpointing(zt_llama *m, int k);
/* With LoRA (ztrain.lora.r > 0): 1 when Llama's o projection's backward
 * writes the attention's dO in bf16 (arch.h zt_do16_of, be its backend or
 * NULL): o without adapters (q_proj,v_proj) taking the path of no LoRA
 * (ZT_W16_LORAPATH), or o with adapters whose share of dO is written in
 * bf16 first and the base GEMM adds into it (ZT_W16_LO16: no dropout, the
 * swapped backward ZT_W16_BWDSWAP, be's matmul_bwd_acc, matmul_bwd_acc16
 * and matmul_bwd_o16) */
int zt_llama_lora_do16(const zt_model_config *mc, const zt_backend *be);
/* Bytes of the activation block acts_create allocates for [B, T] with
 * checkpointing group size ckpt (the planner's activation bytes). */
size_t zt_llama_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt);
/* Elements of the tensors in unit u of the layout (u = 0 .. n_layer + 1). */
size_t zt_llama_unit_numel(const zt_model_config *mc, int u);
/* The rotary frequencies inv_freq[hd/2] in fp32 as transformers computes
 * them for mc->rope_scaling (none = default, llama3, linear, dynamic at a
 * sequence length within the context, yarn, longrope within the original
 * context), and the scale of cos and sin (transformers' attention_scaling:
 * yarn's and longrope's attention factor, else 1). */
void zt_llama_inv_freq(const zt_model_config *mc, float *inv_freq);
/* ... for a sequence of T tokens: longrope uses long_factor when T >
 * rope_original_max (zt_llama_rope_long), short_factor otherwise; the
 * other types do not depend on T */
void zt_llama_inv_freq_at(const zt_model_config *mc, int T, float *inv_freq);
int zt_llama_rope_long(const zt_model_config *mc, int T);
float zt_llama_rope_scale(const zt_model_config *mc);
/* Parse a longrope factor list (comma-separated positive numbers): the count
 * (out[0 .. min(count, n)) filled as float), -1 on a malformed list. */
int zt_rope_factors_parse(const char *s, int n, float *out);

#endif
