/*
 * model.h -- GPT-2 model: parameter layout, forward and backward.
 *
 * Parameters live in ONE contiguous block, laid out unit by unit (the units
 * are what the sharding engine cuts): embeddings, then each transformer
 * block, then the final LayerNorm.  The LM head is tied to wte.  Gradients
 * mirror the parameter layout in a second block; activations are one block
 * per batch shape.
 */
#ifndef ZT_MODEL_H
#define ZT_MODEL_H
#include "backend.h"
#include "config.h"
#include "internal.h"

typedef struct zt_tensor_info {
    char name[40];
    int unit;          /* index into units */
    size_t offset;     /* elements from the start of the parameter block */
    size_t numel;
    int ndim;
    int shape[2];
    int decay;         /* AdamW weight decay applies (2-D weights only) */
} zt_tensor_info;

typedef struct zt_unit_info {
    char name[24];
    size_t offset, numel;
    int first_tensor, n_tensors;
} zt_unit_info;

/* Pointers into a parameter-shaped block, one family per tensor kind. */
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

/* Activations for one batch shape [B, T].  A training block keeps every
 * layer's activations for backward; an eval block (n_slots == 1) reuses one
 * layer's worth and ping-pongs the residual stream. */
typedef struct zt_gpt_acts {
    int B, T, training, n_slots;
    float *block;              /* the one allocation */
    size_t bytes;
    int *inputs, *targets;     /* [B, T] */
    float **res;               /* [L+1 or 2] x [N, C] residual stream */
    struct zt_layer_acts {
        float *ln1, *ln1_mean, *ln1_rstd;   /* [N,C], [N], [N] */
        float *qkv;                          /* [N, 3C] */
        float *atty, *lse;                   /* [N, C], [B, NH, T] */
        float *res2;                         /* [N, C] after attention */
        float *ln2, *ln2_mean, *ln2_rstd;   /* [N,C], [N], [N] */
        float *fch, *fch_gelu;               /* [N, 4C] x 2 */
    } *layer;                  /* [n_slots] */
    float *scratch;            /* [N, C] projection outputs */
    float *lnf, *lnf_mean, *lnf_rstd;       /* [N,C], [N], [N] */
    float *probs;              /* [N, V] logits -> probs -> dlogits */
    float *losses;             /* [N] */
    /* backward scratch (training only) */
    float *dres, *dbuf, *dqkv, *d4a, *d4b;  /* [N,C] [N,C] [N,3C] [N,4C] [N,4C] */
} zt_gpt_acts;

/* Unit hooks: how a sharding engine takes part in forward and backward.
 * need(u, phase): unit u's parameters (and, in backward, a gradient target
 * for them) must be bound in m->p / m->g before the call returns.
 * done(u, phase): the pass no longer needs unit u's parameters.
 * grads_ready(u): backward has finished writing unit u's gradients.
 * NULL hooks: everything is resident (stage 0). */
enum { ZT_FWD = 0, ZT_BWD = 1 };
typedef struct zt_unit_hooks {
    void *user;
    int (*need)(void *user, int unit, int phase, zt_status *st);
    int (*done)(void *user, int unit, int phase, zt_status *st);
    int (*grads_ready)(void *user, int unit, zt_status *st);
} zt_unit_hooks;

typedef struct zt_gpt {
    zt_model_config cfg;
    const zt_backend *be;
    int n_tensors, n_units;
    zt_tensor_info *tensors;
    zt_unit_info *units;
    size_t num_params;
    float *params, *grads;     /* [num_params] each (grads may be NULL) */
    zt_gpt_params p, g;        /* views into params / grads */
    zt_unit_hooks hooks;
} zt_gpt;

/* Lay out the model; allocates the full parameter block (ZT_GPT_PARAMS)
 * and/or the full gradient block (ZT_GPT_GRADS). */
enum { ZT_GPT_PARAMS = 1, ZT_GPT_GRADS = 2 };
int zt_gpt_create(const zt_model_config *mc, const zt_backend *be, int flags,
                  zt_gpt **out, zt_status *st);
void zt_gpt_free(zt_gpt *m);
/* GPT-2 initialization, a pure function of (seed, tensor, element):
 * writes the initial values of flat elements [lo, hi) to dst[0 .. hi-lo). */
void zt_gpt_init_range(const zt_gpt *m, uint64_t seed, size_t lo, size_t hi, float *dst);
/* Initialize the full parameter block. */
void zt_gpt_init_params(zt_gpt *m, uint64_t seed);
/* Point a zt_gpt_params view at a parameter-shaped block. */
void zt_gpt_bind(const zt_gpt *m, float *block, zt_gpt_params *view);
/* Point the tensors of unit u in a view at a unit-sized buffer. */
void zt_gpt_bind_unit(const zt_gpt *m, int u, float *unit_base, zt_gpt_params *view);
const zt_tensor_info *zt_gpt_find_tensor(const zt_gpt *m, const char *name);

int zt_gpt_acts_alloc(const zt_gpt *m, int B, int T, int training, int mem_tag,
                      zt_gpt_acts *a, zt_status *st);
void zt_gpt_acts_free(zt_gpt_acts *a);
/* Bytes an activation block for [B, T] needs (for estimates). */
size_t zt_gpt_acts_bytes(const zt_model_config *mc, int B, int T, int training);

/* Forward over a.inputs (and a.targets when with_targets).  *loss_sum gets
 * the SUM of per-position losses (targets < 0 excluded; 0 without targets).
 * After it, a.probs holds the softmax probabilities.  Fails only when a
 * hook fails. */
int zt_gpt_forward(zt_gpt *m, zt_gpt_acts *a, int T, int with_targets, double *loss_sum,
                   zt_status *st);
/* Backward from the last forward; accumulates into the gradient views.
 * dloss is the weight of each position's loss (1 / positions in the global
 * batch). */
int zt_gpt_backward(zt_gpt *m, zt_gpt_acts *a, float dloss, zt_status *st);

#endif
