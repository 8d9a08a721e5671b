/*
 * shard.h -- the ZeRO sharding engine; to a model it is the zt_units of the
 * public unit API (ztrain.h), which it implements.
 *
 * Units (model.h) are cut into contiguous slices over a shard group of G
 * consecutive ranks: the rank with group index r owns [r*S, min((r+1)*S, n))
 * of every unit of n elements, S = ceil(n / G) -- so any parameter count
 * works with any world size.  W / G replica groups hold identical slices
 * (hybrid sharding, HSDP); gradients are reduced across them.
 *
 * Expert parallelism (mesh.h's expert axis of N > 1): an expert unit
 * (zt_unit_info.expert) is stored per rank as its window [c n/N, (c+1) n/N)
 * (c the expert coordinate), sliced over the expert shard group instead
 * (the G / N ranks of the shard group with the same experts; at stage 0
 * held, and its gradient all-reduced, by the expert-data-parallel group);
 * the full blocks hold the windows at running offsets (zt_unit_shard.coff).
 *
 *   stage 0  everything replicated; gradients all-reduced over the world
 *   stage 1  AdamW state sharded; gradients reduce-scattered per unit after
 *            the last micro-step; each rank updates its slice; parameters
 *            all-gathered per unit
 *   stage 2  as 1, and gradients sharded: each unit's gradient is
 *            reduce-scattered from a unit-sized bucket as soon as that
 *            unit's backward finishes (no full-model gradient buffer).
 *            With overlap_comm (the default) the reduce-scatter is started
 *            non-blocking and runs while the backward of the next units
 *            computes; at most ZT_RS_INFLIGHT are in flight (starting one
 *            more first finishes the oldest: wait, add its slice into the
 *            owned gradients, free its bucket), and the backward pass
 *            finishes them all before it returns.  Sums and the order they
 *            are added in are those of the blocking path: bitwise equal.
 *   stage 3  as 2, and parameters sharded: a unit is all-gathered just
 *            before its forward and again before its backward and freed
 *            after use; the next unit's gather is started non-blocking while
 *            the current one computes (unit u+1 in forward, u-1 in
 *            backward, started when unit u is first asked for in a pass).
 *            A model keeps a unit gathered by not releasing it (the GPT
 *            keeps its tied embedding from the encoder to the head's
 *            backward).
 *
 * Mixed precision (bf16 / fp16, precision.h): parameters are stored in 16
 * bits -- the full block at stages 0-2, the owned slices at stage 3 -- and
 * the parameter all-gathers move 16-bit elements.  The fp32 master weights
 * of the elements a rank updates sit beside its AdamW moments (same compact
 * layout: all of them at stage 0, the owned slices otherwise); the update
 * writes them and rounds them into the 16-bit storage (then all-gathers it
 * at stages 1-2).  zt_unit_params hands the model an fp32 copy of the unit
 * widened from the 16-bit storage (after the gather at stage 3), freed at
 * release or at the end of the pass.  Gradients are fp32 (the model
 * accumulates into fp32 buffers; stages 2-3 add each reduced micro-step
 * into the fp32 shard), and are summed across ranks in grad_comm: a 16-bit
 * grad_comm rounds each rank's contribution and each partial sum.
 *
 * Offload (zt_shard_prec): offload_optimizer puts the master weights and
 * AdamW state in host memory; offload_param (stage 3, with it) the owned
 * parameter shards too -- on a device backend every gather then uploads the
 * own slice from the host shard into the device gather buffer, AdamW's
 * result is written into the host shard (fp32: the shard is the master;
 * mixed: rounded on the host), and nothing else of the parameters stays on
 * the device between uses.  pin_* page-lock those blocks where the backend
 * can (mem.c, ZT_MEM_PIN).
 */
#ifndef ZT_SHARD_H
#define ZT_SHARD_H
#include "comm.h"
#include "mesh.h"
#include "model.h"
#include "optim.h"
#include "precision.h"

/* Precision options of the engine (zt_shard_create_ex). */
typedef struct zt_shard_prec {
    zt_precision prec;        /* parameter storage: fp32, bf16, fp16 */
    zt_dtype grad_comm;       /* element type of gradient reductions: ZT_F32, ZT_BF16, ZT_F16 */
    int offload_optimizer;    /* fp32 master weights and AdamW state in host memory; on a
                               * device backend AdamW then runs on the host (cpu kernels) */
    int comm;                 /* device backends: collectives on device buffers through
                               * ZT_SHARD_COMM_STAGED (host-staged MPI) or _NCCL */
    int device;               /* NCCL: the CUDA device of this rank */
    int overlap_comm;         /* stages 2-3: gradient reduce-scatters run while the backward of
                               * the next units computes (zero_optimization.overlap_comm) */
    int offload_param;        /* stage 3 (with offload_optimizer): the owned parameter shards
                               * in host memory (an NF4 base's slices too, shard_nf4.c);
                               * gathers upload the own slice */
    int pin_optimizer;        /* pin_memory: page-lock the offloaded master weights (and */
    int pin_param;            /* AdamW state: optim.c) / the offloaded parameter shards */
    int frozen;               /* LoRA's base (lora.h): parameters only -- no gradients, no
                               * optimizer state or master weights, no gradient communication;
                               * mixed precision keeps the 16-bit storage alone */
    int nf4;                  /* frozen only (QLoRA, shard_nf4.c): 1 nf4, 2 nf4-dq: the model
                               * tensors marked in nf4_tensor are stored as NF4 codes */
    const unsigned char *nf4_tensor;   /* [m->n_tensors]: 1 = quantized (read at creation) */
    int w16;                  /* bf16 storage with bf16 matmuls (train.c: on cuda):
                               * zt_unit_params16 hands the model the 16-bit storage for its
                               * GEMMs (stages 0-2) */
    int nf4w16;               /* QLoRA with w16: a unit's NF4 tensors dequantized straight into
                               * a bf16 copy of the unit that its GEMMs read (shard_nf4.c;
                               * precision.h zt_nf4w16_of), else into its fp32 copy */
    int nf4view;              /* QLoRA: a unit's compute copy built without zero-filling the
                               * buffers it overwrites (ZT_MEM_NOZERO) and, unsharded (stages
                               * 0-2, a one-rank group), from the store in place -- no gathered
                               * copies of its codes, absmax and rest (shard_nf4.c; precision.h
                               * zt_nf4view_of) */
} zt_shard_prec;
enum { ZT_SHARD_COMM_STAGED = ZT_MESH_COMM_STAGED, ZT_SHARD_COMM_NCCL = ZT_MESH_COMM_NCCL };

typedef struct zt_unit_shard {
    size_t n;          /* the unit's elements this rank stores (an expert unit under expert
                        * parallelism: its window, n / N) */
    size_t off;        /* their offset in the logical flat block (the unit's + w0) */
    size_t w0;         /* the window's start in the unit (0: the whole unit) */
    int win;           /* an expert unit stored as a window (expert parallelism) */
    size_t coff;       /* its offset in the full blocks this rank keeps (the model's
                        * params / grads, the 16-bit p16): the windows' running sum */
    size_t lo, len;    /* this rank's slice within the unit */
    size_t soff;       /* offset of the slice in compact shard buffers */
    int g, r;          /* the group the unit is sliced over: its size (1 at stage 0) and
                        * this rank's index in it */
    zt_group *grp, *dgrp;  /* that group (the shard group; an expert window's: the expert
                            * shard group) and its device twin, for the unit's gathers and
                            * reduce-scatters */
    int hg, hr;            /* stage 0: the ranks holding the same values (the world; an
                            * expert window's: its expert-data-parallel group) and this
                            * rank's index; their group and twin (NULL when hg == 1): the
                            * gradient all-reduce, a restore's all-gather */
    zt_group *hgrp, *hdgrp;
    int *counts, *displs;  /* per rank of that group, for the collectives */
} zt_unit_shard;

/* Gradient reduce-scatters in flight at once with overlap_comm. */
#define ZT_RS_INFLIGHT 2

/* One gradient reduce-scatter in flight (overlap_comm). */
typedef struct zt_rs_pending {
    int u;                    /* the unit */
    zt_request req;
    void *send16;             /* 16-bit grad_comm: the narrowed bucket [n] (the fp32 bucket is
                               * freed once narrowed); fp32: NULL, the bucket is sent */
    void *recv;               /* this rank's reduced slice [len] in grad_comm's type */
} zt_rs_pending;

typedef struct zt_units zt_shard;
enum { ZT_PASS_NONE = 0, ZT_PASS_FWD, ZT_PASS_BWD };

struct zt_units {
    int stage;
    int G, r;                 /* shard group size and index in it */
    int R, rr;                /* replica groups and index in them */
    /* the mesh's groups (mesh.h; the engine borrows them): shard == world
     * when G == W; replica NULL when R == 1 */
    const zt_mesh *mesh;
    zt_mesh *own_mesh;        /* zt_shard_create_ex's own mesh over its world, else NULL */
    zt_group *world, *shard, *replica;
    /* The same groups for collectives on device buffers: on a device backend
     * host-staged MPI or NCCL groups over the same ranks, otherwise the
     * groups above.  Scalars on the host (norms, flags) use the groups above. */
    zt_group *dworld, *dshard, *dreplica;
    int dev;                  /* the backend's memory is not host memory */
    int host_opt;             /* dev and offload_optimizer: master weights and AdamW state in
                               * host memory, AdamW on the host; master exists at fp32 too */
    int host_params;          /* dev and offload_param (stage 3, implies host_opt): pshard /
                               * pshard16 in host memory; with fp32 pshard is the master */
    float *hgrad;             /* host_opt: one owned gradient slice on the host [max slice] */
    uint16_t *h16;            /* host_opt, mixed: one narrowed slice on the host [max slice] */
    size_t max_len;           /* largest owned slice */
    zt_model *m;
    const zt_backend *be;
    int nu;
    zt_unit_shard *u;
    /* expert parallelism (mesh.h's expert axis, N > 1): each expert unit
     * (zt_unit_info.expert) stored as this rank's window [c n/N, (c+1) n/N),
     * sliced over the expert shard group; win: some unit is */
    int epn, epc, win;
    zt_group *ep, *dep;       /* the expert group and its twin (windows' all-gathers) */
    size_t nblk;              /* elements of the full blocks (num_params without windows) */
    size_t shard_total;       /* elements this rank owns (sum of len) */
    size_t max_unit;
    float *pshard;            /* stage 3, fp32: owned parameters (host memory: host_params) */
    float *gshard;            /* stage >= 2: owned gradients, accumulated */
    float *rs_buf;            /* reduce-scatter receive buffer [max slice] */
    void **gathered;          /* stage 3: per unit gathered params (storage type) or NULL */
    zt_request *req;          /* stage 3: per unit pending gather */
    float **bucket;           /* stage >= 2: per unit gradient bucket or NULL */
    unsigned char *seen;      /* per unit: asked for in the current pass */
    unsigned char *gopen;     /* per unit: zt_unit_grads without grads_done yet */
    int overlap;              /* stages 2-3 with G > 1 and overlap_comm */
    int npend;                /* reduce-scatters in flight, oldest first in pend[] */
    zt_rs_pending pend[ZT_RS_INFLIGHT];
    int pass;                 /* ZT_PASS_* */
    int frozen;               /* zt_shard_prec.frozen */
    int w16;                  /* zt_shard_prec.w16 */
    struct zt_units *peer;    /* a frozen base: the adapters' engine, whose passes open and
                               * close with this one's (lora.h); NULL: none */
    long step;                /* for error context; LoRA dropout's mask */
    /* LoRA dropout (lora.h, zt_lora_drop_at): set by the train step */
    int training;             /* the pass is a training one (zt_shard_forward's flag) */
    uint64_t sample0;         /* global index of the micro batch's first sample in the step */
    uint64_t seed;            /* ztrain.seed */
    struct zt_nf4_store *q;   /* a frozen NF4 base (shard_nf4.c), else NULL */
    /* deferred initialization (zt_shard_defer_init): per unit, 1 while its
     * random values are still owed (no load wrote it); NULL: none owed */
    unsigned char *init_todo;
    uint64_t init_seed;
    uint64_t init_elems;      /* parameters given their random initial values so far */
    int grads_zero;           /* the gradient storage still holds the zeros it was
                               * allocated with (nothing wrote it yet) */
    int widen_runs;           /* precision.h zt_widen_runs_of (make_view) */

    /* precision (fp32: prec == ZT_PREC_FP32 and every pointer below NULL) */
    zt_precision prec;
    size_t pes;               /* bytes per stored parameter element: 4 or 2 */
    zt_dtype pdt;             /* their element type */
    zt_dtype gdt;             /* gradient reductions */
    uint16_t *p16;            /* mixed, stages 0-2: the full 16-bit parameter block */
    uint16_t *pshard16;       /* mixed, stage 3: owned 16-bit parameters (host: host_params) */
    float *master;            /* mixed (or host_opt): fp32 master weights, laid out like the
                               * AdamW state (unit u's slice at u.soff); host memory when
                               * host_opt, else the backend's */
    float **view;             /* mixed: per unit fp32 compute copy or NULL */
    uint16_t *g16;            /* 16-bit gradient reductions: send buffer [max_unit] */
    uint16_t *rs16;           /* ... and reduce-scatter receive buffer [max slice] */

    /* the step without host reads (train.c) */
    double *loss_acc;         /* a training step's loss accumulator (backend memory), or NULL */
    int loss_taken;           /* forwards that added their loss there (zt_units_loss_acc) */
    /* the fused LM head (classifier.h): the dloss the step's backward will
     * be called with, with fwd_dloss_set set by train.c around each of a
     * step's training forwards only (zt_units_fwd_dloss); fwd_grads: that forward took gradient
     * units (zt_unit_grads), which stay open into the backward */
    float fwd_dloss;
    int fwd_dloss_set, fwd_grads;
    const float **rx;         /* the owned gradient ranges [nu]: stage 0 the full block, */
    size_t *rn;               /* else the owned slices (zt_shard_grad_ranges) */
    int nr;
    zt_adamw_seg *seg;        /* adamw_multi's segments [n_tensors + nu] (zt_shard_update_ex) */
};

/* Build the plan and allocate shard buffers over the mesh's axes: the
 * parameters are sharded over shard_axis's group and replicated over
 * replica_axis's (ZT_AX_SHARD and ZT_AX_REPLICA: hybrid sharding); the
 * engine borrows the mesh's groups (it must outlive the engine).  The model
 * must have been created with the blocks the stage keeps
 * (zt_shard_model_flags_prec).  prec NULL: fp32 (its comm and device are
 * the mesh's). */
int zt_shard_create_on(zt_model *m, int stage, const zt_mesh *mesh, int shard_axis,
                       int replica_axis, const zt_shard_prec *prec, zt_shard **out, zt_status *st);
/* The elements of the full blocks (zt_model_alloc_blocks) the engine over
 * mesh expects: num_params, less, under expert parallelism (N > 1), each
 * expert unit's (N - 1) n / N the rank does not store. */
size_t zt_shard_block_elems(const zt_model *m, const zt_mesh *mesh);
/* The same over a world group of the caller's, with shard groups of
 * shard_group ranks (a mesh of its own, zt_mesh_over).  world may be NULL:
 * one process, no communication (stage 0 only). */
int zt_shard_create_ex(zt_model *m, int stage, int shard_group, zt_group *world,
                       const zt_shard_prec *prec, zt_shard **out, zt_status *st);
/* zt_shard_create_ex in fp32. */
int zt_shard_create(zt_model *m, int stage, int shard_group, zt_group *world, zt_shard **out,
                    zt_status *st);
void zt_shard_free(zt_shard *sh);
/* Which full blocks the model keeps at a stage (ZT_MODEL_* flags): fp32,
 * and for a precision (mixed: never the fp32 parameter block). */
int zt_shard_model_flags(int stage);
int zt_shard_model_flags_prec(int stage, zt_precision prec);
/* ... and for a frozen base (parameters only, fp32 stages 0-2). */
int zt_shard_model_flags_frozen(int stage, zt_precision prec);

/* Run the model's forward through the engine.  training: a backward on
 * the same acts follows (units the model keeps stay gathered); otherwise
 * every gathered unit is released afterwards. */
int zt_shard_forward(zt_shard *sh, void *acts, const int *inputs, const int *targets, int B,
                     int T, int training, double *loss_sum, zt_status *st);
/* Run the model's backward of the last training forward. */
int zt_shard_backward(zt_shard *sh, void *acts, float dloss, zt_status *st);

/* Initialize parameters (every stage: identical values to a replicated init).
 * Values are computed on the host and staged to a device in bounded chunks. */
int zt_shard_init_params(zt_shard *sh, uint64_t seed);
/* The same values, owed instead of written now: a unit that a load writes
 * first (zt_shard_set_unit_params, zt_shard_set_full_params,
 * zt_shard_params_written) never gets them; the others get them from
 * zt_shard_init_pending, which every reader of the parameters here calls
 * first (forward, export).  A unit's initial values are a pure function of
 * the seed, so the result is the eager one bit for bit. */
int zt_shard_defer_init(zt_shard *sh, uint64_t seed);
/* Unit u (u < 0: every unit) was written by a load: nothing owed for it. */
void zt_shard_params_written(zt_shard *sh, int u);
/* Write the initial values still owed (none: nothing happens). */
int zt_shard_init_pending(zt_shard *sh);
/* Start a step: zero gradient storage. */
void zt_shard_zero_grads(zt_shard *sh);
/* Gradients written fresh (backend.h set_dw_fresh; precision.h
 * zt_gradfresh_of): 1 when the engine can prove that each GEMM weight of
 * the blocks (ZT_TENSOR_GEMM outside the first unit, the embeddings, and the
 * last, the head) gets its gradient's first write of a step from one
 * whole-tensor dW GEMM of the first micro-batch's backward (a Mixture of
 * Experts' expert tensors: one dW GEMM an expert with rows, the others
 * zeroed by moe.c, which asks the backend's dw_fresh), and that no other
 * dW GEMM writes into the blocks: stages 0 and 1 (the full local gradient
 * block, the model's backward writing it in place), a built-in model
 * (GPT-2, Llama) without LoRA (with experts: without expert parallelism
 * and with the backend's dw_fresh), a backend with set_dw_fresh.  Then *g, *n: the blocks' gradients m->grads[lo, lo + n),
 * for set_dw_fresh around that backward.  0 otherwise (the step zeroes all
 * of them: zt_shard_zero_grads). */
int zt_shard_fresh_range(const zt_shard *sh, float **g, size_t *n);
/* The tied LM head's gradient written fresh too (config.h
 * ZT_W16_HEADFRESH, decided by train.c with ZT_W16_HEADFUSE: a training
 * forward takes the head's gradient, classifier.h
 * zt_classifier_forward_fused, whose first chunk's dW GEMM writes the whole
 * [V, C] gradient): where zt_shard_fresh_range answers 1, the head is the
 * embedding (zt_arch_tied) and the backend has dw_fresh: the embedding
 * tensor's index, and in *g, *n its gradient m->grads[off, off + V C), for
 * set_dw_fresh around the first micro-batch's forward (train.c: zeroed
 * after that forward where no GEMM took the range).  -1 otherwise (*g
 * NULL, *n 0). */
int zt_shard_head_fresh(const zt_shard *sh, float **g, size_t *n);
/* zt_shard_zero_grads less the blocks' GEMM weights (zt_shard_fresh_range
 * answered 1) and tensor head_t (zt_shard_head_fresh's answer; -1: none):
 * each run of the other tensors (norms, biases, embeddings, the head)
 * zeroed with one memset. */
void zt_shard_zero_grads_fresh(zt_shard *sh, int head_t);
/* After the last micro-step: finish the gradient reduction. */
int zt_shard_reduce_grads(zt_shard *sh, zt_status *st);
/* Test hook: make this rank's first owned gradient +inf (forced overflow). */
void zt_shard_poison_grad(zt_shard *sh);
/* The step's gradient scalars without host reads (backend memory): fp16's
 * unscaling of the owned gradients (g *= inv_scale, skipped when 1) and
 * their non-finite count into *nonfinite (nonfinite_to; NULL: neither),
 * and this rank's sum of their squares into *sumsq (sumsq_to: stage 0 the
 * full block, else every unit's owned slice, added in unit order).  The
 * global norm squared is that summed over the shard group
 * (zt_shard_sumsq_reduce; the same on every rank). */
int zt_shard_grad_scalars(zt_shard *sh, float inv_scale, uint64_t *nonfinite, double *sumsq,
                          zt_status *st);
/* *sq (this rank's sum of squares, read back) summed over the shard group
 * (a host all-reduce at stages 1-3 with G > 1). */
int zt_shard_sumsq_reduce(zt_shard *sh, double *sq, zt_status *st);
/* AdamW on this rank's slices, then re-assemble parameters (stages 1-2). */
int zt_shard_update(zt_shard *sh, zt_adamw *o, double lr, double grad_scale, zt_status *st);
/* zt_shard_update with the multi-tensor adamw_multi (one launch for the
 * owned elements, the 16-bit storage written in the same pass) and, with
 * gate (the step's scalars in backend memory; not with offloaded state),
 * the clipping factor of max_norm and the decision to skip computed on the
 * device (backend.h, zt_adamw_hyper).  Offloaded state: AdamW on the host
 * as zt_shard_update, gate must be NULL.  zt_adamw_begin is called here. */
int zt_shard_update_ex(zt_shard *sh, zt_adamw *o, double lr, double grad_scale,
                       const zt_step_scalars *gate, double max_norm, zt_status *st);
/* The fp32 values this rank updates for unit u (master weights when mixed,
 * else the parameters themselves), unit u's slice. */
float *zt_shard_param_slice(zt_shard *sh, int u);
/* Mixed: round the master weights into the 16-bit storage and, at stages
 * 1-2, all-gather it (collective).  fp32: nothing. */
int zt_shard_refresh_params(zt_shard *sh, zt_status *st);
/* Moments this rank keeps: Psi at stage 0, the owned slice otherwise. */
size_t zt_shard_optim_elems(const zt_shard *sh);

/* Full fp32 parameters for export (the master weights when mixed), in the
 * backend's memory: a pointer to a full block this rank has (fp32 stages
 * 0-2, mixed stage 0) or a gathered copy (otherwise; collective; *owned = 1:
 * free with zt_mem_free). */
int zt_shard_full_params(zt_shard *sh, float **out, int *owned, zt_status *st);
/* Set every parameter (the master weights when mixed, and the 16-bit
 * storage from them) from a full fp32 block in the backend's memory,
 * present on every rank. */
void zt_shard_set_full_params(zt_shard *sh, const float *full);
/* A frozen engine (LoRA's base): set unit u's parameters from its fp32
 * values vals[n] in the backend's memory (this rank keeps its stage's
 * share, rounded to 16 bits when mixed; quantized with an NF4 base: a
 * non-finite weight is an error); no communication. */
int zt_shard_set_unit_params(zt_shard *sh, int u, const float *vals, zt_status *st);
/* 1 when the owned fp32 values (zt_shard_param_slice) and the AdamW state
 * are in the backend's memory, 0 when in host memory (offloaded on a
 * device backend; with offload_param the fp32 parameter shard itself). */
int zt_shard_state_on_device(const zt_shard *sh);

/* ---- a frozen NF4 base (QLoRA; shard_nf4.c, docs/lora.md) ----
 * Each unit is stored as its quantized tensors' NF4 blocks (codes + absmax,
 * or qabsmax with nf4-dq) and its other elements ("rest", compact, in the
 * storage precision); at stage 3 both are sharded over the shard group
 * (the blocks in whole 64-element blocks) and gathered per unit; the unit's
 * fp32 compute copy is the rest widened plus the tensors dequantized (and
 * rounded to the storage precision when mixed).  With offload_param
 * (stage 3) the rank's slices are host memory (ZT_MEM_ON_HOST, | ZT_MEM_PIN
 * with pin_memory), uploaded into the gathered copies; absmax2 stays on
 * the device. */
int zt_nf4s_create(zt_shard *sh, const zt_shard_prec *p, zt_status *st);
void zt_nf4s_free(zt_shard *sh);
/* unit u's compute copy into sh->view[u] (collective at stage 3) */
int zt_nf4s_view(zt_shard *sh, int u, zt_status *st);
/* shard.c: the models' GEMMs read 16-bit weights (zt_unit_params16) */
int zt_shard_weights16(const zt_shard *sh);
/* quantize / store unit u from its fp32 values in host memory */
int zt_nf4s_set_unit_host(zt_shard *sh, int u, const float *vals, zt_status *st);
/* bytes this rank stores (codes, absmax, rest) */
size_t zt_nf4s_bytes(const zt_shard *sh);
/* of them, those in host memory (offload_param: all but nf4-dq's absmax2; else 0) */
size_t zt_nf4s_host_bytes(const zt_shard *sh);
/* 1 when sh->gathered[u] is the store's own rest, lent (a unit without NF4
 * tensors read in place): the release drops it without freeing it */
int zt_nf4s_lent(const zt_shard *sh, int u);
/* 1 when unit u's rest segments and NF4 tensors tile it, [0, numel) each
 * element once (zt_nf4s_create checks it; the compute copy is then
 * allocated unzeroed) */
int zt_nf4s_tiled(const zt_shard *sh, int u);

#endif
