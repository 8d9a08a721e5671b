/*
 * moe.h -- the Mixture of Experts MLP of the llama-family model
 * (ztrain.model.n_experts > 0; docs/moe.md): a router, top-k selection
 * (dropless: every token reaches its k experts, no capacity), the tokens
 * permuted into per-expert groups (on the backend: moe_permute; only the
 * counts come to the host), each expert's SwiGLU as backend matmuls on its
 * group, unpermuted with the routing weights; and its backward.
 * transformers' MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock (the shared
 * expert is the llama model's dense MLP, llama.c).  Internal to libtrain.
 *
 * Tensors of a block (llama.h): router.w [E, C]; experts.gate_up.w
 * [E * 2I, C], expert e's rows [e 2I, e 2I + I) its gate, the next I its up
 * (transformers 5's gate_up_proj [E, 2I, C]); experts.down.w [E * C, I]
 * (down_proj [E, C, I]).
 *
 * Expert parallelism (expert_parallel_size P > 1, the mesh's expert axis):
 * the P consecutive ranks of an expert group split the experts, rank c of
 * the group running experts [c E/P, (c+1) E/P).  Per layer every rank
 * routes its own tokens, the ranks agree on the rows each sends to each
 * (an all-gather of every rank's per-(rank, local expert) counts and its
 * buffer's capacity, host ints: a routing beyond a rank's buffer is refused
 * on every rank before any row moves), the
 * routed rows go to the rank of their expert (arriving by rank, regrouped
 * there by local expert so that each expert runs one GEMM over its rows
 * from every rank) and the expert outputs come back (regrouped by rank)
 * with all-to-alls of variable counts (the group's device twin); the
 * backward sends the output gradients the same way and the input gradients
 * back.  The expert weights (and gradients) a rank passes are its own
 * experts only, local expert l at l (the engine stores each rank's window of
 * the expert units: shard.h); their gradients cover the rows of the whole
 * group and are summed over the expert-data-parallel ranks (shard.c).
 */
#ifndef ZT_MOE_H
#define ZT_MOE_H
#include "internal.h"
#include "mesh.h"
#include "model_acts.h"

typedef struct zt_moe_shape {
    int C, E, K, I, norm;
    int P;                     /* expert_parallel_size (0 or 1: off) */
    /* the experts' gate|up and SwiGLU output kept in bf16 (zt_moe_carve:
     * gup16, hp16; a training block with the bf16 activations, llama.c) */
    int b16;
    /* with b16 and expert parallelism: three of the four row exchanges in
     * bf16 (zt_moe_acts ex16) */
    int ex16;
    /* with b16, without expert parallelism: the block's input x (the MLP
     * norm's output) and the routed rows in bf16 (zt_moe_acts x16, xp16;
     * config.h ZT_W16_MX16) */
    int x16;
    /* with b16 and no expert parallelism: the experts' outputs kept in
     * bf16 for the backward (zt_moe_acts yp16; config.h ZT_W16_NOYP off,
     * the test hook ZT_TEST_MOE_KEEP_YP) */
    int keep_yp;
    /* with b16, ex16 and expert parallelism: the experts' outputs received
     * and kept for the backward in bf16 (zt_moe_acts yp16 instead of the
     * fp32 yp: the down GEMMs rounded them, the exchange sent them in
     * bf16; config.h ZT_W16_EPYP16) */
    int ep_yp16;
    /* with b16, ex16 and expert parallelism: the rows the experts receive
     * kept in bf16 for their GEMMs and gate|up's weight gradients
     * (zt_moe_acts xr16 instead of the fp32 xr: they came in bf16;
     * config.h ZT_W16_EPX16) */
    int ep_x16;
} zt_moe_shape;

/* Routed rows one rank's experts can receive in a forward of N tokens per
 * rank: N K without expert parallelism, else the worst case P N min(K, E/P)
 * (every token of every rank of the group routed to this rank's experts).
 * The received-row buffers (zt_moe_carve, zt_moe_carve_grad) hold this many. */
size_t zt_moe_recv_rows(const zt_moe_shape *s, size_t N);

/* A block's expert weights (or their gradients): router [E, C]; gate_up and
 * down this rank's E / P experts (all E without expert parallelism). */
typedef struct zt_moe_w {
    float *router, *gate_up, *down;
    /* the same as bf16 bits (zt_unit_params16: the GEMMs read them; then
     * the fp32 views are NULL), or NULL: none */
    const uint16_t *router16, *gate_up16, *down16;
} zt_moe_w;

/* One block's kept activations (N tokens, NK = N K routed rows). */
typedef struct zt_moe_acts {
    float *logits, *probs;     /* [N, E] */
    float *wts;                /* [N, K] routing weights */
    int *idx;                  /* [N, K] experts */
    int *off;                  /* [E + 1] each expert's first row in perm (backend moe_permute) */
    int *perm;                 /* [NK] routed slot n K + k of each row, grouped by expert */
    int *rows;                 /* [NK] its token n */
    float *wsel;               /* [NK] its weight */
    float *xp;                 /* [NK, C] the routed inputs: the rows every block shares
                                * (zt_moe_carve_shared; expert parallelism: = xs), not
                                * kept: the backward gathers them again */
    float *yp;                 /* [NK, C] expert outputs */
    /* (zt_moe_shape x16: the block's input in bf16, [N, C] (the caller's
     * kept norm output; x unused), and the routed rows in bf16 instead of
     * xp (xp, xr NULL): gathered by rows_gather16, read by the router's
     * and the experts' gate|up GEMMs and their weight gradients as bf16
     * inputs; every one of them rounded x to bf16 before: the same values) */
    const uint16_t *x16;
    uint16_t *xp16;            /* [NK, C] */
    /* the rows this rank's experts run, R = zt_moe_recv_rows, grouped by
     * local expert (each expert's rows from every rank of the group
     * together, in rank order: one GEMM an expert); without expert
     * parallelism xr = xp, yr = yp: the same rows */
    float *xr;                 /* [R, C] received inputs, by expert */
    uint16_t *xr16;            /* [R, C] the same in bf16 (zt_moe_shape ep_x16; xr and yr NULL:
                                * the outputs by rank in bf16 from dyr's bytes), else NULL */
    float *gup;                /* [R, 2I] gate | up */
    float *hp;                 /* [R, I] swiglu */
    /* b16 (zt_moe_shape): the same in bf16 instead (gup, hp NULL): each
     * expert's gate|up GEMM writes its output rounded once (matmul_fwd_o16),
     * SwiGLU reads and writes bf16 (swiglu_fwd16), the down GEMMs read it
     * (the a16 entries), the backward's SwiGLU reads gup16 (swiglu_bwd16):
     * the dense blocks' policy (docs/precision.md) */
    uint16_t *gup16, *hp16;
    /* b16: each expert's down GEMM writes its output rounded once
     * (matmul_fwd_o16; autocast's bf16 expert outputs).  Without expert
     * parallelism not kept (yp, yr NULL): written in bf16 into the
     * backward's dxp (free in a forward), widened into its dyp for the
     * weighted sum; the backward's routing-weight gradient needs no outputs
     * (dy_i . W hp_i = (W^T dy_i) . hp_i, moe.c down_bwd16).  With it
     * widened into yr (the exchanges' fp32 rows): the same values.
     * yp16: zt_moe_shape keep_yp's [NK, C] bf16 outputs, kept (the
     * backward's routing-weight gradient dy_i . yp_i and its down GEMMs
     * on the weighted rows, as with expert parallelism), or with expert
     * parallelism ep_yp16's: the rows the exchange brings back, received
     * in bf16 (yp NULL, the weighted sum reading them as the layout
     * without does); else NULL */
    uint16_t *yp16;
    /* b16 with expert parallelism (zt_moe_shape ex16; config.h
     * ZT_W16_EP16): the routed inputs, the experts' outputs and their
     * gradients exchanged in bf16, half the bytes, the same values (every
     * reader of the inputs and the output gradients is a bf16 GEMM that
     * rounds them, the outputs are rounded already); the input gradients,
     * which the backward sums, in fp32.  The bf16 rows lie in the
     * backward's scratch (dxr, dyr, dxp), free around each exchange. */
    int ex16;
    /* b16: the experts' backward GEMMs read their output gradients in
     * bf16, rounded once a layer (config.h ZT_W16_MOED16; set by the
     * model after zt_moe_carve): the down GEMMs' rows by one to_bf16 into
     * the backward's dxr (free until gate|up's input gradients), gate|up's
     * written by swiglu_bwd_d16 in place of gup16 (its last reader) */
    int d16;
    /* d16: the experts' input gradients in grouped GEMMs writing bf16
     * (config.h ZT_W16_MOEGB; set by the model; moe.c zt_moe_backward
     * takes it where the outputs are not kept, there is no expert
     * parallelism and the bf16 expert weights are bound) */
    int gb16;
    /* gb16: the experts' weight gradients in grouped GEMMs too, each
     * expert's product rounded to bf16 in the backward's dyp, then added
     * (config.h ZT_W16_MOEGW; set by the model; moe.c takes it with gb16's
     * path, the bf16 routed rows, a projection at a time where an
     * expert's gradient has at most 2^23 elements and dyp holds one
     * expert's product: moe.c grouped_dw_fits) */
    int gw16;
    /* d16 with ex16 (expert parallelism): the received output gradients
     * regrouped by expert in bf16, not widened (config.h ZT_W16_EPDY16;
     * set by the model) */
    int epdy16;
    /* d16 with ex16: the experts' input gradients written, regrouped and
     * sent back in bf16, summed per token in fp32 (config.h
     * ZT_W16_EPDX16; set by the model) */
    int epdx16;
    /* epdx16: the experts' backward GEMMs in grouped calls (config.h
     * ZT_W16_EPGB; set by the model; moe.c ep_bwd_grouped): the input
     * gradients by one grouped call a projection, the down projection's
     * written in bf16 for SwiGLU's backward; the weight gradients too
     * where gw16 (and grouped_dw_fits) */
    int epgb16;
    /* b16: the backward's output-gradient rows gathered straight into
     * bf16 where only bf16 readers take them (rows_gather_o16: the d16
     * rows, the bf16 exchange's rows; config.h ZT_W16_GATHER16; set by
     * the model) */
    int gd16;
    float *yr;                 /* [R, C] received rows by rank, then the outputs by expert */
    size_t rcap;               /* R */
    /* expert parallelism only (else NULL): the same for every block
     * (zt_moe_carve_shared), used within one forward or backward call */
    float *xs;                 /* [R, C] the rows sent (routed inputs; outputs by rank) */
    int *gperm, *ginv;         /* [R] backend moe_regroup of gcnt: by expert <-> by rank */
    int *gcnt;                 /* [E] the rows received per (rank, local expert) */
} zt_moe_acts;

/* Backward scratch (one for all blocks). */
typedef struct zt_moe_grad {
    float *dyp, *dxp;          /* [NK, C] */
    float *dyr, *dxr;          /* [R, C] at the experts (= dyp, dxp without expert parallelism) */
    float *dhp;                /* [R, I] */
    float *dgup;               /* [R, 2I] */
    float *dwsel;              /* [NK] */
    float *dwts;               /* [N, K] */
    float *dlogits;            /* [N, E] */
    float *dx;                 /* [N, C] */
} zt_moe_grad;

/* The expert group (zt_moe_set_mesh): P ranks, this rank's place c. */
typedef struct zt_moe_ep {
    int n, rank;
    zt_group *g;               /* host buffers (the counts) */
    zt_group *dg;              /* its device twin (the rows); not owned */
} zt_moe_ep;

/* The host side of the routing (per model): the counts (the GEMMs' row
 * counts and the exchanges' sizes). */
typedef struct zt_moe_host {
    int *idx;                  /* [NK] the test hook's routing (ZT_TEST_MOE_ROUTE_ALL) */
    int *count;                /* [E + 1] a->off, copied (a device run: page-locked, from
                                * zt_moe_set_mesh, count_acct) */
    int count_acct;            /* count is an accounted block (zt_mem_alloc) */
    size_t cap;
    zt_moe_ep ep;
    const zt_mesh *mesh;       /* zt_moe_set_mesh's (the counts' bounded read); not owned */
    int32_t *scnt, *rcnt;      /* [E]: rows sent to rank j's local expert l (j E/P + l), and
                                * received from rank i for local expert l (i E/P + l) */
    int *nloc;                 /* [E/P] the rows each local expert runs (every rank's) */
    size_t *sc, *sd, *rc, *rd; /* [P] the exchanges' counts and displacements (elements) */
    int32_t *all;              /* [P, E + 1] every rank's scnt and its buffer's rows (agreed) */
    int *agc, *agd;            /* [P] that all-gather's counts and displacements */
    int layer;                 /* the block (error messages), set by the caller */
    long step;                 /* the step (error messages), set by the caller */
} zt_moe_host;

/* The step a pass of engine U belongs to (shard.c; messages). */
long zt_units_step(const struct zt_units *U);

/* Take the mesh's expert axis (mesh.h); its size must be s->P. */
int zt_moe_set_mesh(zt_moe_host *h, const zt_moe_shape *s, const zt_mesh *mesh, zt_status *st);

/* A block's arrays; x: the shared ones (zt_moe_carve_shared, NULL when
 * base is) */
void zt_moe_carve(zt_carve *cv, zt_moe_acts *a, const zt_moe_shape *s, size_t N, float *base,
                  const zt_moe_acts *x);
/* The arrays every block shares (expert parallelism: xs, gperm, ginv,
 * gcnt; without: xp) */
void zt_moe_carve_shared(zt_carve *cv, zt_moe_acts *x, const zt_moe_shape *s, size_t N,
                         float *base);
void zt_moe_carve_grad(zt_carve *cv, zt_moe_grad *g, const zt_moe_shape *s, size_t N, float *base);

/* Whether backend be has the kernels (else a ZT_EUNSUPPORTED naming it). */
int zt_moe_check_backend(const zt_backend *be, zt_status *st);

/* y[N, C] (overwritten) = the experts' weighted sum for x[N, C]; g: the
 * backward's scratch, the bf16 path's fp32 staging (a->gup16; else unused,
 * may be NULL). */
int zt_moe_forward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h, const zt_moe_w *w,
                   zt_moe_acts *a, const zt_moe_grad *g, const float *x, float *y, int N,
                   zt_status *st);
/* From dy[N, C] (and dprobs[E], NULL: none, added to every token's
 * routing probabilities' gradient: the load-balancing loss's): g->dx[N, C]
 * (overwritten), the weight gradients (+=). */
int zt_moe_backward(const zt_moe_shape *s, const zt_backend *be, zt_moe_host *h,
                    const zt_moe_w *w, zt_moe_w *gw, const zt_moe_acts *a, zt_moe_grad *g,
                    const float *x, const float *dy, const float *dprobs, int N, zt_status *st);

/* The load-balancing loss (transformers' load_balancing_loss_func, no
 * attention mask) over a forward's L layers of N tokens: cnt[e] the top-k
 * assignments to expert e, psum[e] the sum of its routing probabilities,
 * both over every layer; aux = E sum_e (cnt_e / (L N)) (psum_e / (L N)).
 * Its gradient on every token's probability of e in every layer is
 * E cnt_e / (L N)^2 (the counts do not move): coef_e[e] = that times
 * scale. */
double zt_moe_aux(int E, int L, int N, const double *cnt, const double *psum, double scale,
                  float *coef_e);
void zt_moe_host_free(zt_moe_host *h);
/* Read bytes (at most (E + 1) ints) of device memory src into host dst as
 * the routing counts are read: over NCCL through the page-locked counts
 * (their contents are overwritten: between passes only), waited for with
 * the collectives' bound (mesh.h); else synchronously.  The router's
 * probability sums after a forward (the load-balancing loss). */
int zt_moe_read_small(zt_moe_host *h, const zt_moe_shape *s, const zt_backend *be, void *dst,
                      const void *src, size_t bytes, zt_status *st);

#endif
