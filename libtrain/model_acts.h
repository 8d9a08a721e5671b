/*
 * model_acts.h -- what the built-in models (gpt.c, llama.c) share in their
 * activation blocks and unit traversal: the checkpointing group rule, the
 * residual-stream carve, the -1 targets, slot/residual lookup, freeing the
 * activations.  The unit traversal itself: model_skel.h.  Internal to
 * libtrain.
 *
 * An activations struct used with these helpers has the fields
 *   int training, n_slots; void *block; float **res; <slot type> *layer;
 */
#ifndef ZT_MODEL_ACTS_H
#define ZT_MODEL_ACTS_H
#include <stdlib.h>
#include "devmem.h"
#include "lora.h"

/* Elements of one array in an activation block: rounded up to 16. */
#define ZT_ACTS_ROUND(n) (((size_t)(n) + 15) & ~(size_t)15)

/* An activation block being carved (base == NULL: sizes only).  off
 * counts floats; small counts the 4-byte arrays among them (statistics,
 * losses, the -1 targets), which stay 4 bytes when the planner asks for an
 * elem-byte what-if of the large ones (zt_carve_bytes). */
typedef struct zt_carve { float *base; size_t off, small; } zt_carve;
static inline float *zt_carve_take(zt_carve *c, size_t n, int small) {
    float *p = c->base ? c->base + c->off : NULL;
    c->off += ZT_ACTS_ROUND(n);
    if (small) c->small += ZT_ACTS_ROUND(n);
    return p;
}
/* A bf16 array of n elements (zt_model_config.acts16): 256-byte aligned in
 * the block (the GEMMs read it in place, as they read their rounded
 * operands' scratch), n rounded up to 128. */
static inline uint16_t *zt_carve_take16(zt_carve *c, size_t n) {
    c->off = (c->off + 63) & ~(size_t)63;
    uint16_t *p = c->base ? (uint16_t *)(void *)(c->base + c->off) : NULL;
    c->off += (((size_t)n + 127) & ~(size_t)127) / 2;
    return p;
}
/* A bf16 array of n elements laid over the fp32 array of m elements at
 * element offset off of the block (an array dead whenever the bf16 one is
 * live), with zt_carve_take16's alignment and rounding: 1 (and *p, when
 * the block has a base) where it fits inside, else 0 (carve it then).  The
 * same answer with base == NULL: the planner's sizes are the block's. */
static inline int zt_carve_over16(const zt_carve *c, size_t off, size_t m, size_t n,
                                  uint16_t **p) {
    const size_t at = (off + 63) & ~(size_t)63;
    if (at + (((size_t)n + 127) & ~(size_t)127) / 2 > off + ZT_ACTS_ROUND(m)) return 0;
    if (c->base) *p = (uint16_t *)(void *)(c->base + at);
    return 1;
}
/* The final norm's output [n], the LM head's input: bf16 alone (*lnf16)
 * when x16, else fp32 (*lnf); set when the block has a base.  *off and *m:
 * where it lies (element offset, floats) for a later zt_carve_over16 of a
 * bf16 array over it (the bf16 array from its aligned start to its end). */
static inline void zt_carve_lnf(zt_carve *c, int x16, size_t n, float **lnf, uint16_t **lnf16,
                                size_t *off, size_t *m) {
    *off = c->off;
    *m = n;
    if (x16) {
        uint16_t *p = zt_carve_take16(c, n);
        if (c->base) *lnf16 = p;
        *off = (*off + 63) & ~(size_t)63;
        *m = c->off - *off;
    } else {
        float *p = zt_carve_take(c, n, 0);
        if (c->base) *lnf = p;
    }
}
/* Whether a model keeps its GEMM-only activations in bf16: the engine asked
 * (mc->acts16), and none of them has another reader that needs the fp32
 * values (LoRA's dropout of the adapters' input).  A Mixture of Experts
 * model too (config.h ZT_W16_MOE16): a slot that holds a sparse block keeps
 * its MLP half in fp32 but the experts' gate|up and SwiGLU output (llama.c
 * carve, moe.h b16). */
static inline int zt_acts16_on(const zt_model_config *mc) {
    return mc->acts16 && (mc->n_experts <= 0 || zt_w16_on(mc, ZT_W16_MOE16)) &&
           !(mc->lora_r > 0 && mc->lora_dropout > 0);
}
static inline size_t zt_carve_bytes(const zt_carve *c, int elem) {
    return (c->off - c->small) * (size_t)elem + c->small * sizeof(float);
}

/* The LoRA scratch (ztrain.lora.r > 0; lora.h) of the block being carved:
 * the adapter matmuls', and in a training block their gradients' and
 * ndnorm floats for the frozen norms' discarded gradients (*dnorm). */
static inline void zt_carve_lora(zt_carve *c, zt_lora_scratch *ls, float **dnorm,
                                 const zt_model_config *mc, size_t N, int training,
                                 size_t ndnorm) {
    zt_lora lo;
    if (mc->lora_r <= 0 || zt_lora_plan(mc, &lo, NULL) != ZT_OK) return;
    /* (d: none where the products accumulate in their GEMMs without dropout) */
    const size_t nd = zt_lora_d_numel(&lo, N);
    float *h = zt_carve_take(c, N * lo.max_nr, 0), *d = nd ? zt_carve_take(c, nd, 0) : NULL;
    float *bt = zt_carve_take(c, lo.max_nr * lo.max_out, 1);
    if (c->base) { ls->h = h; ls->d = d; ls->bt = bt; }
    if (!training) return;
    float *dh = zt_carve_take(c, N * lo.max_nr, 0), *dbt = zt_carve_take(c, lo.max_nr * lo.max_out, 1);
    float *dn = zt_carve_take(c, ndnorm, 1);
    if (c->base) { ls->dh = dh; ls->dbt = dbt; *dnorm = dn; }
}

/* A training slot's kept LoRA h (lora.h zt_lora_scratch.keep,
 * zt_lora_keeph_on): [N, n r] a targeted group into keep[g] (indexed by
 * the architecture's group; the others NULL). */
static inline void zt_carve_lora_keep(zt_carve *c, float **keep, const zt_model_config *mc,
                                      size_t N, int training) {
    zt_lora lo;
    if (!training || !zt_lora_keeph_on(mc) || zt_lora_plan(mc, &lo, NULL) != ZT_OK) return;
    for (int g = 0; g < lo.n_groups; ++g) {
        if (!lo.groups[g].n) continue;
        float *p = zt_carve_take(c, N * (size_t)lo.groups[g].n * (size_t)lo.r, 0);
        if (c->base) keep[g] = p;
    }
}

/* Activation checkpointing's blocks-attn (zt_model_config.ckpt_attn): a
 * training block with checkpointing group size 1 keeps every layer's
 * attention output ([N, AD]: bf16 att16 where the slot would hold atty16,
 * else fp32 att) and softmax statistics (lse, [B, NH, T] fp32) through the
 * forward, L of each carved one after the other (at the start of the
 * block, the slot carving neither), so the backward's recompute of a block
 * skips the attention.  With sequence parallel (sp > 1) the att / att16
 * arrays are the token-sharded output the o projection reads (what the
 * forward's to-tokens exchange wrote), lse the head-sharded statistics
 * [B, NH/sp, sp T], and L more fp32 arrays atth hold the head-sharded
 * output [B, sp T, AD/sp] the attention backward reads (the same count as
 * att): the recompute skips the attention and the output's exchange, and
 * still runs q|k|v's GEMM and to-heads exchange (the attention backward
 * reads the head-sharded q|k|v).  Strides in elements of their type (the
 * bf16 ones rounded to 128 elements, 256-byte aligned as zt_carve_take16's;
 * the fp32 ones to 16). */
typedef struct zt_acts_katt {
    float *att;
    uint16_t *att16;
    float *lse;            /* NULL: no kept attention (the slot's own arrays) */
    float *atth;           /* sequence parallel: the head-sharded output (else NULL) */
    size_t att_st, lse_st, atth_st;
} zt_acts_katt;
/* Whether a block carved with these settings keeps the attention per layer
 * (with or without sequence parallel). */
static inline int zt_acts_katt_on(const zt_model_config *mc, int training, size_t k) {
    return training && mc->ckpt_attn && k == 1;
}
/* sp > 1: the atth arrays too (natt fp32 elements each, after the lse). */
static inline void zt_carve_katt(zt_carve *c, zt_acts_katt *ka, size_t L, int att16, size_t natt,
                                 size_t nlse, int sp) {
    float *att = NULL, *lse = NULL, *atth = NULL;
    uint16_t *a16 = NULL;
    for (size_t l = 0; l < L; ++l) {
        if (att16) {
            uint16_t *p = zt_carve_take16(c, natt);
            if (!l) a16 = p;
        } else {
            float *p = zt_carve_take(c, natt, 0);
            if (!l) att = p;
        }
    }
    for (size_t l = 0; l < L; ++l) {
        float *p = zt_carve_take(c, nlse, 1);
        if (!l) lse = p;
    }
    for (size_t l = 0; sp > 1 && l < L; ++l) {
        float *p = zt_carve_take(c, natt, 0);
        if (!l) atth = p;
    }
    if (!c->base) return;
    ka->att = att;
    ka->att16 = a16;
    ka->lse = lse;
    ka->atth = atth;
    ka->att_st = att16 ? (((size_t)natt + 127) & ~(size_t)127) : ZT_ACTS_ROUND(natt);
    ka->lse_st = ZT_ACTS_ROUND(nlse);
    ka->atth_st = ZT_ACTS_ROUND(natt);
}
/* Layer l's kept attention output and lse into a slot's pointers (the one
 * of *att / *att16 the block carves; *atth with sequence parallel). */
static inline void zt_acts_katt_at(const zt_acts_katt *ka, int l, float **att, uint16_t **att16,
                                   float **lse, float **atth) {
    if (ka->att16) *att16 = ka->att16 + (size_t)l * ka->att_st;
    else *att = ka->att + (size_t)l * ka->att_st;
    *lse = ka->lse + (size_t)l * ka->lse_st;
    if (ka->atth) *atth = ka->atth + (size_t)l * ka->atth_st;
}

/* Group size of the checkpointing layout for a training block of L layers
 * (0: every layer's activations are kept). */
static inline size_t zt_acts_ckpt_group(int ckpt, int training, size_t L) {
    if (!training || ckpt <= 0) return 0;
    return (size_t)ckpt < L ? (size_t)ckpt : L;
}

/* Layer slots of an activation block: one per layer for training (k with
 * checkpointing group size k), one for eval. */
static inline size_t zt_acts_n_slots(int training, size_t k, size_t L) {
    return training ? (k ? k : L) : 1;
}

/* Carve the residual stream of [NC] arrays at element offset off of the
 * block (base == NULL: sizes only, res untouched); returns the new offset.
 * An eval block ping-pongs res[0] and res[1].  A training block without
 * checkpointing keeps all L+1 residuals.  With checkpointing group size k
 * it keeps the input of every k-th block and the final residual, and k-1
 * scratch residuals for the group being recomputed; res[l] of a block
 * inside a group points at its scratch residual. */
static inline size_t zt_acts_carve_res(float **res, float *base, size_t off, int training,
                                       size_t L, size_t k, size_t NC) {
    if (!training) {
        for (size_t l = 0; l < 2; ++l) {
            if (base) res[l] = base + off;
            off += ZT_ACTS_ROUND(NC);
        }
        return off;
    }
    for (size_t l = 0; l <= L; ++l)
        if (!k || l % k == 0 || l == L) {
            if (base) res[l] = base + off;
            off += ZT_ACTS_ROUND(NC);
        }
    for (size_t j = 0; k && j + 1 < k; ++j) {
        float *scr = base ? base + off : NULL;
        off += ZT_ACTS_ROUND(NC);
        for (size_t l = 0; base && l < L; ++l)
            if (l % k == j + 1) res[l] = scr;
    }
    return off;
}

/* Fill the [N] -1 targets of a forward without targets (device memory:
 * staged through a host chunk). */
static inline void zt_acts_fill_no_targets(const zt_backend *be, int *no_targets, size_t N) {
    int ones[256];
    for (size_t i = 0; i < 256; ++i) ones[i] = -1;
    for (size_t i = 0; i < N; i += 256)
        zt_xcopy(be, no_targets + i, 1, ones, 0, (N - i < 256 ? N - i : 256) * sizeof(int));
}

/* Free an activations struct a (any of the models'); NULL is a no-op. */
#define ZT_ACTS_FREE(a) do { if (a) { zt_mem_free((a)->block); free((a)->res); \
                                      free((a)->layer); free(a); } } while (0)

/* Block l's slot of layer activations, and residual l (an eval block
 * ping-pongs two). */
#define ZT_ACTS_SLOT(a, l) (&(a)->layer[(l) % (a)->n_slots])
#define ZT_ACTS_RES(a, l) ((a)->training ? (a)->res[(l)] : (a)->res[(l) & 1])

/* Checkpointing with group size k > 0: whether block l of L is the top
 * block of its group (backward recomputes the group from its kept input
 * there), and the group's first block. */
static inline int zt_acts_ckpt_top(int k, int L, int l) {
    return k > 0 && (l == L - 1 || (l + 1) % k == 0);
}
static inline int zt_acts_ckpt_first(int k, int l) { return (l / k) * k; }
/* ... and whether the backward recomputes block l's group (keep: the last
 * group's blocks kept from the training forward, precision.h
 * zt_ckptkeep_of: its slots and scratch residuals still hold them), and how
 * many of L blocks it recomputes so (seqpar.h's recomputed layers). */
static inline int zt_acts_ckpt_redo(int k, int L, int l, int keep) {
    return k > 0 && !(keep && zt_acts_ckpt_first(k, l) == zt_acts_ckpt_first(k, L - 1));
}
static inline int zt_acts_ckpt_recomputed(int k, int L, int keep) {
    return k <= 0 ? 0 : keep ? zt_acts_ckpt_first(k, L - 1) : L;
}

/* Shared by the models' acts_create: a calloc'ed activations struct a
 * with B, T, training, ckpt, n_slots, res and layer set for a model of L
 * layers using checkpointing group size ckpt (0 none) and context maxT;
 * the caller sizes and allocates the block.  Slot size: sizeof *a->layer. */
#define ZT_ACTS_NEW(a, B_, T_, training_, ckpt_, L_, maxT, st) do { \
        if ((B_) < 1 || (T_) < 1 || (T_) > (maxT)) \
            return zt_fail((st), ZT_EINVAL, "batch shape B=%d T=%d invalid (context %d)", \
                           (B_), (T_), (maxT)); \
        (a) = calloc(1, sizeof *(a)); \
        if (!(a)) return zt_fail((st), ZT_ENOMEM, "out of memory"); \
        (a)->B = (B_); (a)->T = (T_); (a)->training = (training_); \
        (a)->ckpt = (int)zt_acts_ckpt_group((ckpt_), (training_), (size_t)(L_)); \
        (a)->n_slots = (int)zt_acts_n_slots((training_), (size_t)(a)->ckpt, (size_t)(L_)); \
        (a)->res = calloc((size_t)((training_) ? (L_) + 1 : 2), sizeof(float *)); \
        (a)->layer = calloc((size_t)(a)->n_slots, sizeof *(a)->layer); \
    } while (0)

/* The models' forward prologue: a forward of [B, T] within the
 * activations' shape records the shape and tokens (no targets: the -1
 * targets). */
static inline int zt_acts_forward_begin(int B, int T, int aB, int aT, int *fB, int *fT,
                                        const int **a_inputs, const int **a_targets,
                                        const int *inputs, const int *targets,
                                        const int *no_targets, zt_status *st) {
    if (B < 1 || B > aB || T < 1 || T > aT)
        return zt_fail(st, ZT_EINVAL, "forward on B=%d T=%d exceeds the activations' %dx%d",
                       B, T, aB, aT);
    *fB = B;
    *fT = T;
    *a_inputs = inputs;
    *a_targets = targets ? targets : no_targets;
    return ZT_OK;
}
#define ZT_ACTS_FORWARD_BEGIN(a, B, T, inputs, targets, st) \
    ZT_TRY(zt_acts_forward_begin((B), (T), (a)->B, (a)->T, &(a)->fB, &(a)->fT, &(a)->inputs, \
                                 &(a)->targets, (inputs), (targets), (a)->no_targets, (st)))

/* Allocate the activation block of bytes in category mem_tag; on failure
 * free a with free_fn(self, a) and return from the caller. */
#define ZT_ACTS_ALLOC(a, bytes_, mem_tag, free_fn, self, st) do { \
        (a)->block = zt_mem_alloc((bytes_), (mem_tag), (st)); \
        if (!(a)->block) { \
            const int B_ = (a)->B, T_ = (a)->T; \
            free_fn((self), (a)); \
            return zt_fail_prefix((st), "activations for B=%d T=%d", B_, T_); \
        } \
        (a)->bytes = (bytes_); \
    } while (0)

/* The models' backward prologue: training activations only. */
#define ZT_ACTS_BACKWARD_BEGIN(a, st) do { \
        if (!(a)->training) \
            return zt_fail((st), ZT_EINTERNAL, "backward on forward-only activations"); \
    } while (0)

#endif
