/*
 * lora.h -- LoRA adapters on a frozen base (ztrain.lora.*, docs/lora.md).
 *
 * A target linear layer y = W x (+ b) becomes, as PEFT's LoRA Linear,
 *
 *     y = W x (+ b) + s * B (A (dropout(x))),   s = alpha / r  (alpha / sqrt(r) rslora)
 *
 * (dropout: inverted, one mask per module, training passes only; zt_lora_drop)
 *
 * with A [r, in] initialised U(-1/sqrt(in), 1/sqrt(in)) (PEFT's Kaiming-
 * uniform, a = sqrt(5)) from ztrain.seed and B [out, r] zero.
 *
 * The base model keeps its layout, units and engine; that engine runs
 * FROZEN (shard.h: no gradients, no optimizer state, no master weights, no
 * gradient communication; its parameters follow the stage's sharding and
 * stage-3 per-unit gathering).  The adapters are a second model of their own
 * ("lora" below): one unit per block, "lora.<l>", with every targeted
 * module's tensors, trained by a normal engine (sharded like any trainable
 * parameter at stages 0-3).  The base engine's forward and backward passes
 * open the adapter engine's pass too (zt_shard.peer), and the model asks
 * for block l's adapters with zt_unit_params / zt_unit_grads on
 * zt_units_peer(U).
 *
 * The linear layers of an architecture form GROUPS, one base matmul each
 * (llama: qkv = q|k|v, o, gate|up, down; gpt2: c_attn, attn.c_proj, c_fc,
 * mlp.c_proj); a module is a column range [ooff, ooff + out) of its group's
 * output.  In an adapter unit each group's targeted modules are adjacent:
 * their A's ("h<l>.<path>.lora_A" [r, in], PEFT's lora_A.weight), then
 * their B's, stored TRANSPOSED ("h<l>.<path>.lora_B" [r, out]; PEFT's
 * lora_B.weight is [out, r]).  So the A's of a group are one [n r, in]
 * matrix and h = x A^T is one matmul; the B^T rows of the group are placed
 * into a zero [n r, OUT] matrix at their column offsets (one strided copy
 * per module, copy2d; r contiguous copies with ZT_TEST_NO_LORABT) and the
 * group's delta is one matmul too.
 */
#ifndef ZT_LORA_H
#define ZT_LORA_H
#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "config.h"

#define ZT_LORA_MAX_MODS 8
#define ZT_LORA_MAX_GROUPS 4

/* One linear layer of a block that can get an adapter. */
typedef struct zt_lora_mod {
    const char *name;      /* PEFT's module name ("q_proj", "c_proj") */
    const char *path;      /* inside a block, as PEFT names it ("self_attn.q_proj") */
    int group;             /* its matmul */
    int in, out, ooff;     /* A [r, in]; output columns [ooff, ooff + out) */
} zt_lora_mod;

/* One base matmul with its targeted modules. */
typedef struct zt_lora_group {
    int in, OUT;           /* the matmul's input and output widths */
    int first, n;          /* its targeted modules: mods[first .. first + n) */
    size_t aoff;           /* the group's A's [n r, in] in the adapter unit */
} zt_lora_group;

typedef struct zt_lora {
    int r;
    float scale;                       /* alpha / r, alpha / sqrt(r) with rslora */
    float dropout;                     /* p of the adapters' input dropout (training only) */
    int n;                             /* targeted modules, group by group */
    zt_lora_mod mods[ZT_LORA_MAX_MODS];
    size_t boff[ZT_LORA_MAX_MODS];     /* each module's B^T [r, out] in the unit */
    zt_lora_group groups[ZT_LORA_MAX_GROUPS];   /* indexed by the architecture's group */
    int n_groups;                      /* the architecture's groups (some may have n = 0) */
    size_t unit_numel;                 /* elements of one adapter unit */
    int L;                             /* blocks = adapter units */
    size_t max_nr, max_out, max_w;     /* largest n r, OUT, max(in, OUT) over targeted groups */
    char targets[256];                 /* zt_lora_target_list */
    /* 1: each adapter product is added into its output by its GEMM
     * (backend.h matmul_dinp_acc: out += h B, dx += dh A), bitwise the
     * product into d and an add (0; ZT_TEST_NO_LORAACC, config.h
     * ZT_W16_LORAACC) */
    int acc;
    /* config.h ZT_W16_LORABT (set by the model, model_skel.c; 0 from
     * zt_lora_plan): a group's B^T placed and its gradient taken with one
     * copy2d a module, and the backward's GEMMs reading dy16 */
    int bt2d;
    /* config.h ZT_W16_LORASWAP (set by the model, model_skel.c, where the
     * backend has matmul_fwd_acc; 0 from zt_lora_plan): zt_lora_fwd_first
     * writes the delta, the caller's base GEMM then adds into it */
    int swap;
    /* config.h ZT_W16_BWDSWAP (set by the model, model_skel.c, where the
     * backend has matmul_bwd_acc; 0 from zt_lora_plan): zt_lora_bwd_first
     * writes the adapters' input gradient, the caller's base dinp GEMM then
     * adds into it */
    int bswap;
    /* config.h ZT_W16_LORA16 (set by the model, model_skel.c, where the
     * backend has the bf16-weight entries; 0 from zt_lora_plan): the
     * adapters' GEMMs read the adapter engine's bf16 storage
     * (zt_lora_scratch.ad16) as their weight operand -- A as it is, a
     * group's B^T placed in bf16 -- where it has one, so nothing rounds
     * the adapters per GEMM */
    int w16;
} zt_lora;

/* The plan of mc's adapters (mc->lora_r > 0): targets resolved against the
 * architecture's modules; unknown names and targets that match no module
 * are errors. */
int zt_lora_plan(const zt_model_config *mc, zt_lora *lo, zt_status *st);
/* Validation only (configuration finalize). */
int zt_lora_check(const zt_model_config *mc, zt_status *st);
/* ztrain.lora.base (QLoRA, docs/lora.md): 0 the compute dtype, 1 nf4, 2
 * nf4-dq; -1 with a message for an unknown value or an architecture without
 * a 4-bit base (llama-family only). */
int zt_lora_base_kind(const zt_model_config *mc, zt_status *st);
/* 1: the base tensor (model tensor name, "h3.q.w") is stored as NF4. */
int zt_lora_base_quantized(const zt_model_config *mc, const char *tensor);
/* "q_proj,v_proj": the targeted modules as PEFT's target_modules entries
 * that select exactly them: a module's name, or its path ("mlp.c_proj")
 * when a module it does not target shares the name (GPT-2's c_proj). */
void zt_lora_target_list(const zt_lora *lo, char *buf, size_t n);
/* The same list for the modules all[i] with want[i] set (all: the
 * architecture's lora_mods, na of them). */
void zt_lora_label_list(const zt_lora_mod *all, int na, const int *want, char *buf, size_t n);

/* The adapter model's operations (describe only) and creation. */
struct zt_model;
int zt_lora_model_create(const zt_lora *lo, const zt_model_config *mc, const struct zt_backend *be,
                         int flags, struct zt_model **out, zt_status *st);
/* Adapter elements of the whole model. */
size_t zt_lora_num_params(const zt_lora *lo);
/* The floats of the scratch d for N rows: [N, max_w] (the products [N,
 * OUT] before their add, dropout's input [N, in]); with acc, [N, in] of
 * the widest input with dropout (its masked input, and the backward's
 * product dh A before the mask), none without. */
size_t zt_lora_d_numel(const zt_lora *lo, size_t N);

/* Scratch the adapters need in a model's activation block (floats, each to
 * be rounded by the carver): h [N, max_nr], d (zt_lora_d_numel), bt
 * [max_nr, max_out]; training adds dh [N, max_nr], dbt [max_nr, max_out]. */
/* Dropout of the adapters' input (p = zt_lora.dropout > 0, training passes
 * only): module i of block l drops the elements of x [N, in] by the
 * backend's dropout with the key mix(seed, step, l, i) and the global row
 * sample0 * T + n -- a pure function of (seed, step, sample, position,
 * block, module, column): the same at any world size, ZeRO stage or
 * micro batch split, regenerated by the backward and by a checkpointed
 * block's recompute.  on = 0: no dropout (evaluation, sampling, p = 0). */
typedef struct zt_lora_drop {
    int on;
    uint64_t key;          /* of (seed, step, block) */
    uint64_t row0;         /* global row of the batch's first row */
} zt_lora_drop;

typedef struct zt_lora_scratch {
    float *h, *d, *bt;     /* forward */
    float *dh, *dbt;       /* backward */
    zt_lora_drop drop;     /* the block's dropout, set by zt_lora_drop_at */
    /* the current block's kept h of each group (indexed by the
     * architecture's group), [N, n r] in its activation slot, set by the
     * model per block (zt_lora_keeph_on; NULL: none kept, or a block
     * without them): the forward writes h there, the backward reads it in
     * place of its recompute (no dropout; with dropout h is per module of
     * a masked input: recomputed) */
    float *const *keep;
    /* the block's adapters as bf16 bits, laid out as the fp32 ones
     * (zt_unit_params16 of the adapter engine: its 16-bit storage, which
     * the optimizer step writes and the fp32 copy is widened from, so each
     * value is the fp32 one exactly), or NULL: the GEMMs read the fp32
     * adapters and round them (fp32 or fp16 storage, fp32 matmuls, ZeRO
     * stage 3, zt_lora.w16 off).  Set by the model with the adapters. */
    const uint16_t *ad16;
} zt_lora_scratch;

/* 1 when a training activation slot keeps each targeted group's h = s x
 * A^T of the forward for the backward (lora.h zt_lora_scratch.keep): LoRA
 * without dropout, config.h ZT_W16_KEEPH (off: ZT_TEST_NO_KEEPH, the
 * backward recomputing h). */
static inline int zt_lora_keeph_on(const zt_model_config *mc) {
    return mc->lora_r > 0 && !(mc->lora_dropout > 0) && zt_w16_on(mc, ZT_W16_KEEPH);
}

/* Block l's dropout into sc->drop from the base engine's pass (U; T: the
 * batch's sequence length); off outside training passes or with p = 0. */
struct zt_units;
void zt_lora_drop_at(zt_lora_scratch *sc, const zt_lora *lo, const struct zt_units *U, int l,
                     int T);
/* The key of module i (lo->mods index) of a block's dropout. */
uint64_t zt_lora_drop_key(const zt_lora_drop *d, int i);

/* Group g's delta: out[N, OUT] += s * (x A^T) B for the targeted modules
 * (x [N, in]); ad: the block's adapter unit.  x16 != NULL: x is that bf16
 * input instead (a model's bf16 activation, bf16 matmuls; the backend's
 * *_a16 entries; no dropout: the models keep fp32 inputs with dropout). */
void zt_lora_fwd(const zt_backend *be, const zt_lora *lo, int g, const float *ad, const float *x,
                 const uint16_t *x16, float *out, int N, const zt_lora_scratch *sc);
/* The swapped order (lo->swap): group g's delta written, out[N, OUT] = s *
 * (x A^T) B (beta 0: the product zt_lora_fwd adds, rounded to fp32 once),
 * for the caller to add its base GEMM's product into (backend.h
 * matmul_fwd_acc): fl(delta + base) = fl(base + delta), bitwise
 * zt_lora_fwd after the base GEMM.  Returns 1 when it wrote out; 0 with
 * nothing done (no swap, no adapters in the group, or dropout on: a group
 * sums one product a module then, ((base + p1) + p2), not reorderable) --
 * the caller then takes the old order. */
int zt_lora_fwd_first(const zt_backend *be, const zt_lora *lo, int g, const float *ad,
                      const float *x, const uint16_t *x16, float *out, int N,
                      const zt_lora_scratch *sc);
/* zt_lora_fwd_first's delta written in bf16 (config.h ZT_W16_GU16; bf16
 * matmul mode): out16[N, OUT] = bf16(s * (x A^T) B), the fp32 product
 * zt_lora_fwd_first writes rounded once to nearest even (h rounded to bf16
 * into h16 [N, n r] first, as the product's GEMM rounds it; backend.h
 * matmul_bwd_o16, tmp [N, OUT] its fp32 scratch), for the caller's base
 * GEMM to add into (backend.h matmul_fwd_acc16).  Returns 1 when it wrote
 * out16; 0 with nothing done where zt_lora_fwd_first would do nothing, or
 * the backend has no matmul_bwd_o16. */
int zt_lora_fwd_first16(const zt_backend *be, const zt_lora *lo, int g, const float *ad,
                        const float *x, const uint16_t *x16, uint16_t *out16, float *tmp,
                        uint16_t *h16, int N, const zt_lora_scratch *sc);
/* Group g's backward: gradients of its A's and B's added into gad (the
 * block's adapter gradient unit), and dx[N, in] += the adapters' share of
 * the input gradient, from dy [N, OUT].  dy16 != NULL: to_bf16(dy), the
 * model's bf16 copy of it (bf16 matmul mode only), which the GEMMs reading
 * dy then read as it is (the *_a16 entries: bitwise, nothing rounds dy;
 * with lo->bt2d, else unused).  With dy16 and lo->bt2d nothing reads the
 * fp32 dy: it may be NULL (Llama's gate|up, whose fp32 gradient is then not
 * written). */
void zt_lora_bwd(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                 const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                 float *dx, int N, const zt_lora_scratch *sc);

/* The swapped order of the backward (lo->bswap): zt_lora_bwd with the
 * group's input gradient written, dx[N, in] = dh A (beta 0: the product
 * zt_lora_bwd adds, rounded to fp32 once), for the caller to add its base
 * dinp GEMM's product into (backend.h matmul_bwd_acc): fl(lora + base) =
 * fl(base + lora), bitwise zt_lora_bwd after the base GEMM.  Returns 1
 * when it wrote dx (and added the adapters' gradients into gad); 0 with
 * nothing done (no bswap, no adapters in the group, or dropout on: each
 * module's product is added then, ((base + p1) + p2), not reorderable) --
 * the caller then takes the old order. */
int zt_lora_bwd_first(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                      const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                      float *dx, int N, const zt_lora_scratch *sc);

/* zt_lora_bwd_first's input gradient written in bf16 (config.h
 * ZT_W16_LGRAD16; bf16 matmul mode): dx16[N, in] = bf16(dh A), the fp32
 * product zt_lora_bwd_first writes rounded once to nearest even (dh rounded
 * to bf16 first into the scratch h, dead by then, as that product's GEMM
 * rounds it; backend.h matmul_bwd_o16, tmp [N, in] its fp32 scratch), for
 * the caller's base dinp GEMM to add into (backend.h matmul_bwd_acc16);
 * the adapters' gradients added into gad as zt_lora_bwd_first adds them
 * (bitwise).  Returns 1 when it wrote dx16; 0 with nothing done where
 * zt_lora_bwd_first would do nothing, or the backend has no
 * matmul_bwd_o16. */
int zt_lora_bwd_first16(const zt_backend *be, const zt_lora *lo, int g, const float *ad, float *gad,
                        const float *x, const uint16_t *x16, const float *dy, const uint16_t *dy16,
                        uint16_t *dx16, float *tmp, int N, const zt_lora_scratch *sc);

/* The adapter engine of a base engine (NULL without LoRA). */
struct zt_units *zt_units_peer(struct zt_units *U);
/* 1 in a training pass of U, with the step, the micro batch's first global
 * sample and ztrain.seed (for zt_lora_drop_at); 0 otherwise. */
int zt_units_drop_pass(const struct zt_units *U, long *step, uint64_t *sample0, uint64_t *seed);

#endif
