/*
 * model_skel.h -- the unit skeleton the built-in models (gpt.c, llama.c)
 * share around their math: when each unit (0 the embedding, 1 + l block l,
 * L + 1 the final norm / head) is acquired, bound, released and its
 * gradients handed back; the loops over the blocks with activation
 * checkpointing (recompute); the LoRA adapters' units (the peer engine,
 * lora.h); the order of embedding, blocks, final norm and LM head in
 * forward and backward.  A model embeds a zt_skel and gives its math as
 * hooks (zt_skel_ops) that run on bound views.  Internal to libtrain.
 */
#ifndef ZT_MODEL_SKEL_H
#define ZT_MODEL_SKEL_H
#include "lora.h"
#include "model.h"
#include "seqpar.h"

/* A model's math, each step on the views the skeleton bound (self: the
 * model, acts: its activations). */
/* bind's views: the parameters (laid out as describe's units), the
 * gradients (the same), or the parameters' fp32 copy without the GEMM-only
 * tensors (ZT_TENSOR_GEMM; zt_arch_offsets32), whose views are then NULL:
 * the GEMMs read the bf16 storage bind16 hands over */
enum { ZT_BIND_PARAMS = 0, ZT_BIND_GRADS = 1, ZT_BIND_PARAMS32 = 2 };
typedef struct zt_skel_ops {
    /* point unit u's tensors in the parameter view (grads 0) or the
     * gradient view (grads 1) at a unit-sized buffer */
    void (*bind)(void *self, int u, float *base, int grads);   /* grads: ZT_BIND_* */
    /* LoRA: the frozen base's gradient view of unit u (its matmul
     * gradients skipped, its norms' into a discarded buffer) */
    void (*frozen)(void *self, void *acts, int u);
    /* forward: the embedding into residual 0; block l from residual l into
     * its slot and residual l + 1 (backward runs it again to recompute a
     * checkpointed block: bitwise the same values, zt_skel.redo set); the final norm; the LM
     * head and loss (has_targets, loss_sum, the engine's loss_acc); fuse
     * non-NULL: the fused head (classifier.h) with dloss *fuse, its
     * gradients into the bound gradient view and dbuf (head_bwd's) */
    void (*embed_fwd)(void *self, void *acts);
    int (*block_fwd)(void *self, void *acts, int l, zt_status *st);
    void (*norm_fwd)(void *self, void *acts);
    void (*head_fwd)(void *self, void *acts, int has_targets, double *loss_sum, double *loss_acc,
                     const float *fuse);
    /* backward, in reverse: the LM head (scaled by dloss), the final norm
     * (into a zeroed dres), block l, the embedding */
    void (*head_bwd)(void *self, void *acts, float dloss);
    void (*norm_bwd)(void *self, void *acts);
    int (*block_bwd)(void *self, void *acts, int l, zt_status *st);
    void (*embed_bwd)(void *self, void *acts);
    /* optional (NULL: none): unit u's parameters as bf16 bits, laid out as
     * bind's base (zt_unit_params16; NULL: none), with every bind of them */
    void (*bind16)(void *self, int u, const uint16_t *base16);
    /* optional (NULL: unit 1 + l alone, the head L + 1): block l's units,
     * *first the first of them (l = L: the head's unit); acquired in order
     * in a forward, in reverse in a backward */
    int (*block_units)(void *self, int l, int *first);
} zt_skel_ops;

/* The skeleton's part of a model (zt_skel_init). */
typedef struct zt_skel {
    const zt_skel_ops *ops;
    void *self;                        /* the model the hooks get */
    const zt_backend *be;
    int L;                             /* blocks */
    int tied;                          /* LM head = the embedding (unit 0); else in the head's unit */
    int lora;                          /* LoRA adapters on a frozen base (lora.h) */
    int headfuse;                      /* ZT_W16_HEADFUSE (classifier.h "fused") */
    int fused;                         /* the last forward fused the head ... */
    float fused_dloss;                 /* ... with this dloss (the backward's, checked) */
    int ckkeep;                        /* precision.h zt_ckptkeep_of ... */
    const void *kept;                  /* ... and the acts whose training forward ran last
                                        * (the backward that follows runs the last
                                        * checkpoint group on them: model_acts.h
                                        * zt_acts_ckpt_redo), NULL once a backward began */
    int redo;                          /* 1 while the backward recomputes a block
                                        * (block_fwd: blocks-attn skips the attention,
                                        * zt_model_config.ckpt_attn) */
    zt_lora lo;
    const float *ad;                   /* the current block's adapters ... */
    float *gad;                        /* ... and their gradients (backward) */
} zt_skel;

/* What the skeleton reads of a model's activations (fields every model's
 * acts struct has): ZT_SKEL_ACTS(a) after the forward's prologue. */
typedef struct zt_skel_acts {
    void *acts;
    int training, ckpt, fT;
    zt_lora_scratch *lora;
} zt_skel_acts;
#define ZT_SKEL_ACTS(a) (&(zt_skel_acts){(a), (a)->training, (a)->ckpt, (a)->fT, &(a)->lora})

/* Set sk up for model self of configuration mc (plans LoRA with
 * ztrain.lora.r > 0: its failure returned). */
int zt_skel_init(zt_skel *sk, const zt_skel_ops *ops, void *self, const zt_model_config *mc,
                 const zt_backend *be, int tied, zt_status *st);

/* set_mesh (arch.h): the mesh's sequence parallel group into *out, which
 * must be the n the model was laid out for (name: the model's, for the
 * message). */
int zt_skel_seqpar(const zt_mesh *mesh, int n, const char *name, zt_seqpar *out, zt_status *st);

/* The model ops' forward (after ZT_ACTS_FORWARD_BEGIN) and backward (after
 * ZT_ACTS_BACKWARD_BEGIN). */
int zt_skel_forward(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, int has_targets,
                    double *loss_sum, zt_status *st);
int zt_skel_backward(zt_skel *sk, zt_units *U, const zt_skel_acts *sa, float dloss,
                     zt_status *st);

/* The block's LoRA delta of group grp (lora.h) on the current block's
 * adapters; no-ops without LoRA. */
static inline void zt_skel_lora_fwd(const zt_skel *sk, int grp, const float *x, float *y, int N,
                                    const zt_lora_scratch *ls) {
    if (sk->lora) zt_lora_fwd(sk->be, &sk->lo, grp, sk->ad, x, NULL, y, N, ls);
}
static inline void zt_skel_lora_bwd(const zt_skel *sk, int grp, const float *x, const float *dy,
                                    float *dx, int N, const zt_lora_scratch *ls) {
    if (sk->lora) zt_lora_bwd(sk->be, &sk->lo, grp, sk->ad, sk->gad, x, NULL, dy, NULL, dx, N, ls);
}
/* 1 when group grp has adapters (their backward reads the fp32 output
 * gradient dy) */
static inline int zt_skel_lora_on(const zt_skel *sk, int grp) {
    return sk->lora && sk->lo.groups[grp].n > 0;
}
/* (x16 != NULL: the input is that bf16 activation instead of x; dy16 !=
 * NULL: the bf16 copy of dy the model's own GEMM reads, to_bf16(dy), which
 * the adapters' GEMMs then read too: lora.h) */
static inline void zt_skel_lora_fwd16(const zt_skel *sk, int grp, const float *x,
                                      const uint16_t *x16, float *y, int N,
                                      const zt_lora_scratch *ls) {
    if (sk->lora) zt_lora_fwd(sk->be, &sk->lo, grp, sk->ad, x, x16, y, N, ls);
}
/* 1: group grp's delta written into y first (lora.h zt_lora_fwd_first), the
 * caller's base GEMM then adding into it (matmul_fwd_acc); 0: nothing done */
static inline int zt_skel_lora_first16(const zt_skel *sk, int grp, const float *x,
                                       const uint16_t *x16, float *y, int N,
                                       const zt_lora_scratch *ls) {
    return sk->lora && zt_lora_fwd_first(sk->be, &sk->lo, grp, sk->ad, x, x16, y, N, ls);
}
/* 1: group grp's delta written into y16 in bf16 first (lora.h
 * zt_lora_fwd_first16; tmp [N, OUT] fp32 and h16 [N, n r] bf16 scratch),
 * the caller's base GEMM then adding into it (matmul_fwd_acc16); 0:
 * nothing done */
static inline int zt_skel_lora_first16o(const zt_skel *sk, int grp, const float *x,
                                        const uint16_t *x16, uint16_t *y16, float *tmp,
                                        uint16_t *h16, int N, const zt_lora_scratch *ls) {
    return sk->lora &&
           zt_lora_fwd_first16(sk->be, &sk->lo, grp, sk->ad, x, x16, y16, tmp, h16, N, ls);
}
/* 1: group grp's input gradient written into dx first (lora.h
 * zt_lora_bwd_first: its adapters' backward done), the caller's base dinp
 * GEMM then adding into it (matmul_bwd_acc); 0: nothing done */
static inline int zt_skel_lora_bwd_first16(const zt_skel *sk, int grp, const float *x,
                                           const uint16_t *x16, const float *dy,
                                           const uint16_t *dy16, float *dx, int N,
                                           const zt_lora_scratch *ls) {
    return sk->lora &&
           zt_lora_bwd_first(sk->be, &sk->lo, grp, sk->ad, sk->gad, x, x16, dy, dy16, dx, N, ls);
}
/* 1: group grp's input gradient written into dx16 in bf16 first (lora.h
 * zt_lora_bwd_first16: its adapters' backward done; tmp [N, in] fp32
 * scratch), the caller's base dinp GEMM then adding into it
 * (matmul_bwd_acc16); 0: nothing done */
static inline int zt_skel_lora_bwd_first16o(const zt_skel *sk, int grp, const float *x,
                                            const uint16_t *x16, const float *dy,
                                            const uint16_t *dy16, uint16_t *dx16, float *tmp,
                                            int N, const zt_lora_scratch *ls) {
    return sk->lora && zt_lora_bwd_first16(sk->be, &sk->lo, grp, sk->ad, sk->gad, x, x16, dy, dy16,
                                           dx16, tmp, N, ls);
}
/* A frozen base GEMM's input gradient in bf16 with group grp's adapters
 * (GPT-2 and Llama): the adapters' share written first into dx16
 * (zt_skel_lora_bwd_first16o; tmp [N, C] fp32 scratch), then the base's
 * dinp GEMM adding into it in place (matmul_bwd_acc16, w16 where
 * matmul_bwd_acc would read it).  1: done; 0: nothing done (a trained base,
 * dw; no matmul_bwd_acc16; the adapters' first pass declining: dropout, no
 * swapped order), the caller then takes the fp32 path. */
static inline int zt_skel_lora_lin_bwd16(const zt_skel *sk, const zt_backend *be, int grp,
                                         uint16_t *dx16, float *tmp, const float *dw,
                                         const float *dy, const uint16_t *dy16, const float *x,
                                         const uint16_t *x16, const float *w, const uint16_t *w16,
                                         int N, int C, int OC, const zt_lora_scratch *ls) {
    if (dw || !be->matmul_bwd_acc16 ||
        !zt_skel_lora_bwd_first16o(sk, grp, x, x16, dy, dy16, dx16, tmp, N, ls))
        return 0;
    be->matmul_bwd_acc16(dx16, dy, dy16, w, dy16 || x16 || be->matmul_bwd_w16 ? w16 : NULL, N, C,
                         OC);
    return 1;
}
static inline void zt_skel_lora_bwd16(const zt_skel *sk, int grp, const float *x,
                                      const uint16_t *x16, const float *dy, const uint16_t *dy16,
                                      float *dx, int N, const zt_lora_scratch *ls) {
    if (sk->lora) zt_lora_bwd(sk->be, &sk->lo, grp, sk->ad, sk->gad, x, x16, dy, dy16, dx, N, ls);
}

#endif
