/*
 * gpt.h -- the built-in GPT-2, a model written against the public unit API
 * (ztrain.h "models: the unit API").
 *
 * Units, in the order forward first uses them: "embeddings" (wte [V, C],
 * wpe [maxT, C]), "block.0" .. "block.L-1" (12 tensors each, names
 * "h<l>.ln1.w" ...), "final_norm" (lnf.w, lnf.b).  The LM head is tied to
 * wte, so forward asks for the embedding unit again after the final norm.
 */
#ifndef ZT_GPT_H
#define ZT_GPT_H
#include "classifier.h"
#include "lora.h"
#include "model_acts.h"   /* zt_acts_katt */
#include "model.h"

/* Pointers into a unit-shaped buffer, one family per tensor kind. */
typedef struct zt_gpt_layer {
    float *ln1w, *ln1b;        /* [C], [C]            */
    float *qkvw, *qkvb;        /* [3C, C], [3C]       */
    float *attprojw, *attprojb;/* [C, C], [C]         */
    float *ln2w, *ln2b;        /* [C], [C]            */
    float *fcw, *fcb;          /* [4C, C], [4C]       */
    float *fcprojw, *fcprojb;  /* [C, 4C], [C]        */
} zt_gpt_layer;
typedef struct zt_gpt_params {
    float *wte;                /* [V, C]    token embedding, tied LM head */
    float *wpe;                /* [maxT, C] position embedding */
    zt_gpt_layer *h;           /* [L] blocks */
    float *lnfw, *lnfb;        /* [C], [C]  final LayerNorm */
} zt_gpt_params;

/* Activations for batches up to [B, T].  A training block keeps every
 * layer's activations for backward; an eval block (n_slots == 1) reuses one
 * layer's worth and ping-pongs the residual stream. */
typedef struct zt_gpt_acts {
    int B, T, training, n_slots;
    int ckpt;                  /* activation checkpointing group size, 0 = none */
    int fB, fT;                /* shape of the last forward */
    float *block;              /* the one allocation */
    size_t bytes;
    const int *inputs, *targets;  /* the last forward's tokens [fB, fT] */
    int *no_targets;           /* [B, T] of -1: forward without targets */
    float **res;               /* [L+1 or 2] x [N, C] residual stream (with
                                  checkpointing, blocks inside a group share
                                  scratch residuals) */
    struct zt_layer_acts {
        float *ln1, *ln1_mean, *ln1_rstd;   /* [N,C], [N], [N] */
        float *qkv;                          /* [N, 3C] */
        float *atty, *lse;                   /* [N, C], [B, NH, T] */
        float *atth;                         /* sequence parallel: [B, N_sp T, C/N_sp] (else NULL) */
        float *res2;                         /* [N, C] after attention */
        float *ln2, *ln2_mean, *ln2_rstd;   /* [N,C], [N], [N] */
        float *fch, *fch_gelu;               /* [N, 4C] x 2 */
        /* bf16 activations (a training block with zt_acts16_on; ln1, ln2 and
         * fch_gelu are then NULL): the same values rounded, read only by GEMMs */
        uint16_t *ln116, *ln216, *fchg16;
        /* bf16 GEMM outputs (the same blocks; qkv, atty and fch are then
         * NULL; q|k|v and the attention output without sequence parallel):
         * q|k|v (the attention rounds them to bf16 anyway), the attention
         * output, fc's output (the GELU reads the rounded values, forward
         * and backward) */
        uint16_t *qkv16, *atty16, *fch16;
        float *lora_h[ZT_LORA_MAX_GROUPS];   /* LoRA: each group's kept h [N, n r] (a
                                              * training slot, lora.h zt_lora_keeph_on) */
    } *layer;                  /* [n_slots]; block l uses layer[l % n_slots] */
    float *scratch;            /* [N, C] projection outputs */
    int fold;                  /* residual l + 1 = res2 + scratch of block l pending
                                  (arch.h addfold), 0 none */
    int fold16;                /* the pending branch (scratch) in bf16 (gpt.c gbr16_on) */
    float *sp_send, *sp_recv;  /* sequence parallel: [N, 3C] all-to-all buffers ... */
    float *sp_h;               /* ... and [N, 3C] local q|k|v rows (else NULL) */
    float *lnf, *lnf_mean, *lnf_rstd;       /* [N,C], [N], [N] (lnf NULL with lnf16) */
    uint16_t *lnf16;           /* [N,C] the final norm's output in bf16 alone (a training
                                * block with the bf16 activations, ZT_W16_X16: the
                                * LM head's input, cls.x16), else NULL */
    zt_classifier cls;         /* LM head + loss: [N] losses, one chunk of logits (classifier.h) */
    /* backward scratch (training only) */
    float *dres, *dbuf, *dqkv, *d4a, *d4b;  /* [N,C] [N,C] [N,3C] [N,4C] [N,4C] */
    float *mlpsum;             /* [L, C] the MLP projections' bias gradients summed by the
                                * norm backward above each (a training block with the bf16
                                * activations, ZT_W16_MLPSUM: gpt.c mlpsum_cfg), else NULL */
    uint16_t *dres16;          /* bf16 activations: [N,C] the residual gradient's bf16 copy
                                * (written by the norm backward adding into it, read by the
                                * projections' GEMMs: zt_d16_ok); laid over lnf / lnf16
                                * (dead after the LM head's backward) where it fits */
    /* LoRA (ztrain.lora.r > 0) */
    zt_lora_scratch lora;      /* the adapter matmuls' scratch (lora.h) */
    float *dnorm;              /* [2C] the frozen LayerNorms' gradients (discarded) */
    zt_acts_katt katt;         /* blocks-attn: every layer's attention output and lse
                                * (and atth with sequence parallel; model_acts.h;
                                * katt.lse NULL: the slot's own) */
} zt_gpt_acts;

typedef struct zt_gpt zt_gpt;

/* The GPT's operations (self = a zt_gpt from zt_gpt_new). */
const zt_model_ops *zt_gpt_ops(void);
int zt_gpt_new(const zt_model_config *mc, const zt_backend *be, zt_gpt **out, zt_status *st);
void zt_gpt_free(zt_gpt *g);
/* Is this model the built-in GPT? */
int zt_model_is_gpt(const zt_model *m);
/* Bytes of the activation block for [B, T] (what acts_create allocates). */
size_t zt_gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training);
/* The same with activation checkpointing group size ckpt (0 none, 1 blocks,
 * K every-K: keep the input of every K-th block, recompute groups of K). */
size_t zt_gpt_acts_bytes_ckpt(const zt_model_config *mc, int B, int T, int training, int ckpt);
/* Use activation checkpointing in activation blocks created from now on. */
void zt_gpt_set_checkpointing(zt_gpt *g, int ckpt);
/* With LoRA (ztrain.lora.r > 0): 1 when GPT-2's attention takes a bf16
 * path of no LoRA (ZT_W16_GPT16; arch.h zt_att_in16_of, zt_do16_of):
 * do16 != 0, the projection's backward writing dO in bf16 (no adapters on
 * the attention's c_proj, which add into the fp32 dO); else ab16, the q|k|v
 * GEMM reading the attention backward's bf16 gradient (no adapters on
 * c_attn, or theirs reading it too, ZT_W16_LORABT) */
int zt_gpt_lora_att16(const zt_model_config *mc, int do16);
/* With LoRA: 1 when GPT-2's c_proj backward writes the attention's dO in
 * bf16 (arch.h zt_do16_of, be its backend or NULL): c_proj without adapters
 * (zt_gpt_lora_att16(mc, 1)), or with adapters whose share of dO goes first
 * in bf16 (ZT_W16_LO16: no dropout, ZT_W16_BWDSWAP, be's matmul_bwd_acc,
 * matmul_bwd_acc16 and matmul_bwd_o16) */
int zt_gpt_lora_do16(const zt_model_config *mc, const zt_backend *be);

#endif
