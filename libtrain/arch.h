/*
 * arch.h -- one descriptor per built-in architecture (ztrain.model.arch).
 *
 * Everything the rest of the tree needs to know about an architecture is
 * asked of its descriptor instead of testing the architecture by name: the
 * configuration's validation, the memory planner (units, activation layout,
 * CUDA kernel scratch), checkpoints (/model attributes), Hugging Face
 * config.json in and out, tensor names, and the CLI's summaries.  The
 * descriptors live beside their models: zt_arch_gpt2 in gpt.c,
 * zt_arch_llama in llama.c; arch.c holds the registry, the setting table
 * and the helpers that only read descriptors.  docs/units.md "Adding an
 * architecture variant" says what a new variant touches.
 */
#ifndef ZT_ARCH_H
#define ZT_ARCH_H
#include <stddef.h>
#include <stdint.h>
#include "config.h"

struct zt_backend;
struct json_t;
struct zt_lora_mod;
struct zt_mesh;
struct zt_model;

/* The attention calls' scratch as the memory planner counts it
 * (kernel_ws): the backend's answer (kernels/backend.h att_scratch: the
 * path it takes for the shape; cuda with cuDNN: the fused attention's
 * buffers and its plan's workspace) when be has the query, else ztrain's
 * kernels' need (kernels/cuda/cuda_workspace.h zt_cuda_ws_gqa_ext_*).
 * cudnn counts the calls the backend counted on cuDNN's path. */
struct zt_attn_opts;
typedef struct zt_att_ws {
    const struct zt_backend *be;   /* NULL: ztrain's kernels assumed (no device asked) */
    int asked;                     /* out: calls the backend answered */
    int cudnn;                     /* out: of them, counted on cuDNN's path */
} zt_att_ws;
uint64_t zt_att_ws_of(zt_att_ws *a, int bwd, int bf16, int in16, int B, int T, int NH, int NKV, int hs,
                      const struct zt_attn_opts *o);
/* The attention entries a block of the model calls (att_scratch's in16,
 * backend.h ZT_ATT_IN*), as gpt.c and llama.c decide them: a training
 * block with the bf16 activations (zt_acts16_on, the backend's bf16-input
 * and bf16-logits entries), without sequence parallelism (sp <= 1), reads
 * the bf16 q|k|v (the o16 entries; ZT_ATT_IN16) and with ao16 also writes
 * and reads the bf16 output (ZT_ATT_IN16O), and with ab16 (GPT-2, or with
 * rb16 and the backend's rope_bwd16 Llama without q/k norms, or with them,
 * no q|k|v bias, qkb16 and the backend's qknorm_rope_bwd16; without
 * LoRA, the backend's gqa_ext_bwd16d and bf16-gradient entries) its
 * backward writes the bf16 q|k|v gradient the GEMM reads (ZT_ATT_IN16OD:
 * on cuDNN's path; gpt.c places dqkv16 in d4b past the output's staging,
 * llama.c in stq, the q|k|v's fp32 staging);
 * other blocks, or be NULL, the fp32 entries (ZT_ATT_IN32). */
int zt_att_in16_of(const zt_model_config *mc, const struct zt_backend *be, int training, int sp);
/* 1 when mc's adapters (if any) let the q|k|v GEMMs' backward read the
 * bf16 q|k|v gradient alone: no LoRA, or LoRA whose backward GEMMs read
 * the bf16 copy of dy (ZT_W16_LORABT, lora.h zt_lora_bwd dy16, dropout's
 * too) with ZT_W16_QKV16 (ZT_TEST_NO_QKV16: the fp32 gradient for them,
 * the path of before) */
int zt_lora_dq16_of(const zt_model_config *mc);
/* The attention output's gradient in bf16 (do16): the projection's
 * backward writes it in bf16 (backend.h matmul_bwd_o16) and the attention
 * backward reads it as it is (gqa_ext_bwd16do), with no fp32 copy and no
 * rounding of one: 1 when the model may, a training block on the bf16
 * output's path (zt_att_in16_of >= ZT_ATT_IN16O, sp <= 1) with the bf16
 * residual gradient (d16, the GEMM's dout16), without LoRA (adapters on
 * the projection add their fp32 input gradient to it), where the backend
 * has the entries; the block then asks att_do16 at its shape, which
 * answers 1 only on a path whose dO is bf16 anyway (cuDNN's: its
 * softmax_sum rowsum(dO O) reads the bf16 dO too), so the values are
 * bitwise the fp32 path's (ZT_TEST_NO_DO16); ztrain's own kernels read
 * the fp32 dout (their rowdot D and the fp32 paths): there the old path.
 * GPT-2 and Llama (whose RoPE lies before the q|k|v, not between dO and
 * the attention). */
int zt_do16_of(const zt_model_config *mc, const struct zt_backend *be, int training, int sp);

/* The residual add folded across the block boundary (config.h
 * ZT_W16_ADDFOLD, gpt.c and llama.c; ZT_TEST_NO_ADDFOLD restores the separate
 * add).  Where the backend has add_layernorm_fwd / add_rmsnorm_fwd, block
 * l does not add its last residual y = res2 + scratch itself: it leaves it
 * pending (acts->fold = l + 1) and the next reader of residual l + 1 adds
 * it in its norm, add_X_fwd(res = y, a = res2 of block l's slot, b =
 * scratch): bitwise the add followed by the norm, y written as before (the
 * backward and a checkpoint group read it).  The reader folds only where
 * it runs right after block l in the same pass, when nothing has written
 * either operand since: block l + 1's first norm (its first kernel; the
 * units' gathers, the adapters' dropout draw and Gemma's 1 + w between
 * them write neither) or the final norm (l = L - 1).  Every other pass
 * starts with nothing pending: the forward's embedding and every block's
 * backward set fold 0, so a recomputed checkpoint group's first block reads
 * its kept input with the plain norm.  The one pending add no block reads
 * is a recomputed group's top block's: its y is a kept residual (the next
 * group's input, or res[L]) the forward wrote, which the backward reads as
 * it is.  An eval block's single slot is read (res2) before the next block
 * writes it (ln1 / xn, the statistics: other arrays).  Llama with
 * ZT_W16_BRANCH16 (config.h): the pending scratch may hold down's output in
 * bf16 (acts->fold16), which the reader widens (add_rmsnorm_fwd16b). */

/* ---- settings: the architecture keys of zt_model_config (ztrain.model.<key>,
 * and the /model attribute of the same name in a checkpoint) */
enum { ZT_AS_INT, ZT_AS_BOOL, ZT_AS_DOUBLE, ZT_AS_STR };
typedef struct zt_arch_setting {
    const char *key;           /* ztrain.model.<key> = checkpoint attribute */
    int type;                  /* ZT_AS_* */
    size_t offset, size;       /* the field in zt_model_config (size: ZT_AS_STR) */
    /* the resolved value of an int setting whose 0 means "derive"
     * (n_kv_head 0 = n_head), NULL: the field itself */
    int (*resolve)(const zt_model_config *mc);
    /* whether the setting matters for this configuration (the llama3
     * factors only with that scaling), NULL: always */
    int (*applies)(const zt_model_config *mc);
    unsigned archs;            /* bit (1 << ZT_ARCH_*) of each architecture that reads it */
} zt_arch_setting;

/* Every architecture setting, in checkpoint attribute order. */
const zt_arch_setting *zt_arch_settings(int *n);

/* ---- tensors: one table per architecture, in layout order */
enum { ZT_AT_EMBED = 0, ZT_AT_BLOCK = 1, ZT_AT_HEAD = 2 };   /* which unit(s) */
enum { ZT_AT_ONES, ZT_AT_ZEROS, ZT_AT_NORMAL, ZT_AT_NORMAL_RESID };   /* initialization */
typedef struct zt_arch_tensor {
    const char *name;          /* ours; a block tensor is "h<l>." + name */
    const char *hf;            /* Hugging Face name ("%d" = the block), NULL: none */
    int unit;                  /* ZT_AT_EMBED | ZT_AT_BLOCK | ZT_AT_HEAD */
    int init;                  /* ZT_AT_*: normal std 0.02, resid 0.02 / sqrt(2 L) */
    int transpose;             /* Hugging Face stores it [cols, rows] (GPT-2's Conv1D) */
} zt_arch_tensor;

/* ---- Hugging Face families an architecture reads and writes */
enum {
    ZT_HF_QKV_BIAS = 1,        /* q/k/v projections always have biases (Qwen2); the other
                                * families have none (= ztrain.model.attention_bias) */
    ZT_HF_BIAS_KEYS = 2,       /* attention_bias / mlp_bias keys, which bias o_proj and the
                                * MLP too (Llama): read as refusals, written false */
    ZT_HF_SLIDING = 4,         /* sliding_window (Mistral); exported as the original's */
    ZT_HF_SLIDING_OPT = 8,     /* sliding_window behind use_sliding_window (Qwen2) */
    ZT_HF_QK_NORM = 16,        /* per-head q_norm / k_norm (Qwen3; = ztrain.model.qk_norm) */
    ZT_HF_NO_WINDOW = 32,      /* with ZT_HF_SLIDING: an absent sliding_window is none (Phi-3) */
    ZT_HF_GEMMA2 = 64,         /* Gemma 2 (= ztrain.model.gemma 2): its keys, soft-caps, windows */
    ZT_HF_GEMMA3 = 128,        /* Gemma 3 text (= ztrain.model.gemma 3): q/k norms, local rope */
    ZT_HF_MOE = 256,           /* Mixture of Experts (= ztrain.model.n_experts > 0; docs/moe.md) */
    ZT_HF_SHARED_EXPERT = 512, /* with ZT_HF_MOE: shared_expert_intermediate_size (Qwen2-MoE) */
    ZT_HF_QK_FULL = 1024,      /* with ZT_HF_QK_NORM: over the whole projection (OLMoE;
                                * = ztrain.model.qk_norm_full) */
};
/* A Mixture of Experts family's per-expert file tensors (what hub
 * checkpoints hold) besides transformers 5's packed ones (the tensor
 * table's): read either way. */
typedef struct zt_arch_experts {
    const char *router;        /* the router's name beside the per-expert tensors ("%d" =
                                * the block), NULL: the table's */
    const char *gate, *up, *down;   /* "%d" the block, then "%d" the expert */
} zt_arch_experts;
/* A family's own Hugging Face name of one of our block tensors (Gemma's
 * pre-MLP norm is pre_feedforward_layernorm, Llama's post_attention_layernorm). */
typedef struct zt_arch_rename {
    const char *ours, *hf;     /* a block tensor; "%d" = the block */
    int sparse_only;           /* 1: in Mixture of Experts blocks only (Qwen2-MoE's shared
                                * expert; its dense blocks keep the table's name) */
} zt_arch_rename;
/* A Hugging Face tensor holding several of our adjacent block tensors, row
 * after row (Phi-3's qkv_proj = q | k | v, gate_up_proj = gate | up): split
 * on load, written whole on export. */
typedef struct zt_arch_fuse {
    const char *hf;            /* the file tensor, "%d" = the block */
    const char *first, *last;  /* our block tensors it holds, in table order */
} zt_arch_fuse;
typedef struct zt_arch_hf {
    const char *architectures; /* config.json architectures[0] */
    const char *model_type;
    unsigned flags;            /* ZT_HF_* */
    /* transformers' defaults for keys absent from config.json */
    long vocab, hidden, inter, layers, heads, kv, maxpos;   /* kv -1: = heads */
    double eps;
    int tie;
    long head_dim;             /* head_dim absent from config.json (0: hidden / heads) */
    long pad;                  /* pad_token_id absent from config.json (-1: None) */
    const zt_arch_fuse *fuse;  /* fused file tensors (NULL-terminated by hf), or NULL */
    const zt_arch_rename *rename;   /* the family's own names (NULL-terminated), or NULL */
    const zt_arch_experts *experts; /* ZT_HF_MOE: its per-expert tensors, else NULL */
} zt_arch_hf;

/* summary styles (zt_arch.summary) */
enum { ZT_ARCH_SUM_LOG, ZT_ARCH_SUM_ESTIMATE, ZT_ARCH_SUM_INSPECT };

typedef struct zt_arch {
    const char *name;          /* ztrain.model.arch */
    int id;                    /* ZT_ARCH_* */
    /* validation of a configured model (after the keys' own ranges) */
    int (*check)(const zt_model_config *mc, zt_status *st);
    const zt_model_ops *model_ops;   /* the built-in model's operations */
    /* a model of this architecture on backend be, checkpointing group k */
    int (*create)(const zt_model_config *mc, const struct zt_backend *be, int ckpt_k,
                  const zt_model_ops **ops, void **self, zt_status *st);
    /* the rank layout (mesh.h), once, before the engine: the model takes the
     * groups of the parallelisms it implements (sequence parallelism through
     * seqpar.h's zt_seqpar_of); NULL: none (a mesh of one rank per axis) */
    int (*set_mesh)(void *self, const struct zt_mesh *mesh, zt_status *st);
    /* tensors, and the shape [rows, cols] of entry k (rows 0: absent) in
     * block l (block entries; l is ignored for the others) */
    const zt_arch_tensor *tensors;
    int n_tensors;
    void (*tensor_shape)(const zt_model_config *mc, int l, int k, int *rows, int *cols);
    /* the kind of block l (0 or 1: blocks of one kind share their layout;
     * a Mixture of Experts' dense and sparse blocks), NULL: one kind */
    int (*block_kind)(const zt_model_config *mc, int l);
    /* 1: entry k is read only as the weight of a GEMM that takes the bf16
     * storage (model.h zt_mm_fwd; ZT_TENSOR_GEMM), NULL: none is */
    int (*gemm_weight)(const zt_model_config *mc, int k);
    /* entry k's initialization (ZT_AT_*) in this configuration, NULL: the table's */
    int (*tensor_init)(const zt_model_config *mc, int k);
    /* a block entry that, where present, lives in a unit of its own after
     * its block's unit ("block.<l>." + the name returned; a Mixture of
     * Experts' expert tensors, which expert parallelism stores per rank),
     * NULL: in the block's unit; the hook NULL: none does */
    const char *(*own_unit)(int k);
    const char *head_unit;     /* the last unit's name ("final_norm", "head") */
    int tied_head;             /* 1: the LM head may be the embedding (tie_embeddings) */
    int llmc_file;             /* 1: llm.c's model file holds it (ztrain train's model.bin) */
    /* parameters a token does not use (a Mixture of Experts' unrouted
     * experts: the active count is the total less these), NULL: none */
    uint64_t (*inactive_params)(const zt_model_config *mc);
    /* a model's auxiliary loss of its last forward, logged apart from the
     * loss (a Mixture of Experts' load-balancing loss): 1 and *aux, or 0
     * (none); NULL: never */
    int (*aux_loss)(const struct zt_model *m, double *aux);
    /* DeepSpeed's "largest layer" (elements) */
    uint64_t (*largest_layer)(const zt_model_config *mc);
    /* bytes of the activation block for [B, T] (checkpointing group ckpt_k;
     * elem: the bytes of a large array, 4 = fp32) */
    uint64_t (*acts_bytes)(const zt_model_config *mc, int B, int T, int training, int ckpt_k,
                           int elem);
    /* the largest CUDA scratch request of the model's kernel sequence
     * (kernels/cuda/cuda_workspace.h) for a [B, T] step, an eval forward
     * [E, T] (E = 0: none), the sample's [1, T] and reductions over psi
     * gradients; bf16: the matmul precision is ZT_MATMUL_BF16 (operands
     * rounded into scratch; attention on tensor cores); att: how the
     * attention calls' scratch is counted (zt_att_ws_of) */
    uint64_t (*kernel_ws)(const zt_model_config *mc, int B, int T, int E, uint64_t psi, int bf16,
                          struct zt_att_ws *att);
    /* the sequence parallel exchanges a training block sends in bf16
     * (seqpar.h ZT_SP16_*: what the GEMMs after them round to bf16 anyway),
     * NULL: none (all fp32) */
    int (*sp16)(const zt_model_config *mc);
    /* one-line summaries of the architecture's settings (ZT_ARCH_SUM_*) */
    void (*summary)(const zt_model_config *mc, int style, char *buf, size_t n);
    /* Hugging Face: families (the first is the default export), file
     * tensors that are no parameters (suffixes), a name prefix older
     * files omit */
    const zt_arch_hf *hf;
    int n_hf;
    const char *const *hf_ignore;
    const char *hf_optional_prefix;
    /* the family a model exports as when none is stored (NULL: hf[0]) */
    const zt_arch_hf *(*hf_default)(const zt_model_config *mc);
    /* can the family express this configuration? NULL or a reason */
    const char *(*hf_refuse)(const zt_arch_hf *f, const zt_model_config *mc);
    /* export: config.json's keys of family f after architectures and
     * model_type (orig: the original config.json, NULL: none) */
    void (*hf_config)(const zt_model_config *mc, const zt_arch_hf *f, struct json_t *out,
                      struct json_t *orig);
    /* LoRA (lora.h): every linear layer of a block that can get an adapter,
     * in layout order (out[ZT_LORA_MAX_MODS]); returns their number and sets
     * *n_groups, the base matmuls they belong to */
    int (*lora_mods)(const zt_model_config *mc, struct zt_lora_mod *out, int *n_groups);
    const char *lora_default;  /* PEFT's default target_modules for the model type */
    const char *hf_block;      /* a block's Hugging Face prefix ("model.layers.%d.") */
} zt_arch;

extern const zt_arch zt_arch_gpt2, zt_arch_llama;

/* Lookup: by name (NULL if unknown), by configuration (mc->arch; GPT-2
 * when unset), every descriptor (NULL-terminated). */
const zt_arch *zt_arch_find(const char *name);
const zt_arch *zt_arch_of(const zt_model_config *mc);
const zt_arch *const *zt_arch_all(void);
/* The architecture whose built-in model has these operations, NULL: a
 * model of the caller's own. */
const zt_arch *zt_arch_of_ops(const zt_model_ops *ops);

/* Does architecture a read setting s (and does it apply to mc)? */
int zt_arch_uses(const zt_arch *a, const zt_arch_setting *s, const zt_model_config *mc);
/* A setting's resolved value: as an int (int, bool), a double, a string. */
int zt_arch_setting_int(const zt_arch_setting *s, const zt_model_config *mc);
double zt_arch_setting_double(const zt_arch_setting *s, const zt_model_config *mc);
const char *zt_arch_setting_str(const zt_arch_setting *s, const zt_model_config *mc);
/* The first setting a reads that differs between x and y (resolved; the
 * applies() of x), with both values as text ("%g", or "%.17g" when "%g"
 * cannot tell them apart); NULL when none does. */
const zt_arch_setting *zt_arch_diff(const zt_arch *a, const zt_model_config *x,
                                    const zt_model_config *y, char *xs, char *ys, size_t n);

/* The units: 0 the embeddings, then per block l its unit and the units of
 * its own_unit entries present (table order), the head last.  The count;
 * the first unit of block l (l = n_layer: the head's) and *n its units. */
int zt_arch_n_units(const zt_arch *a, const zt_model_config *mc);
int zt_arch_block_unit(const zt_arch *a, const zt_model_config *mc, int l, int *n);
/* Elements of unit u. */
uint64_t zt_arch_unit_numel(const zt_arch *a, const zt_model_config *mc, int u);
/* Is unit u an own_unit entry's (an expert unit: expert parallelism stores
 * a window of it per rank, zt_unit_info.expert)? */
int zt_arch_unit_expert(const zt_arch *a, const zt_model_config *mc, int u);
/* The same less the GEMM-only tensors (gemm_weight): the unit's fp32 copy
 * where the GEMMs read the bf16 storage (shard.c make_view) ... */
uint64_t zt_arch_unit_numel32(const zt_arch *a, const zt_model_config *mc, int u);
/* ... and each other tensor's offset in that copy, laid out as describe's
 * off (a GEMM-only tensor's entry is left as it was) */
void zt_arch_offsets32(const zt_arch *a, const zt_model_config *mc, size_t *off32);
/* Is the LM head the embedding? */
int zt_arch_tied(const zt_arch *a, const zt_model_config *mc);
/* Lay out every tensor of the table (units "embeddings", "block.<l>" and
 * its own_unit entries' "block.<l>.<name>", a->head_unit), offsets into off[k] per table entry (block entries: the
 * offset inside every block unit of its kind, off[kind * n_tensors + k] with
 * a->block_kind: off then holds 2 n_tensors). */
int zt_arch_describe(const zt_arch *a, const zt_model_config *mc, zt_layout *L, size_t *off,
                     zt_status *st);
/* The Hugging Face name of our tensor (transpose: stored [cols, rows]);
 * -1 when it has none. */
int zt_arch_hf_name(const zt_arch *a, const char *ours, char *out, size_t n, int *transpose);
/* The same in family f (NULL: the architecture's names), for a tensor f
 * fuses with others: the fused tensor's name, the row it starts at and the
 * fused tensor's rows (*row0 0 and *rows = its own otherwise). */
int zt_arch_hf_part(const zt_arch *a, const zt_arch_hf *f, const zt_model_config *mc,
                    const char *ours, char *out, size_t n, int *transpose, long *row0, long *rows);
/* Is a file tensor of an HF model no parameter (skipped when loading)? */
int zt_arch_hf_ignorable(const zt_arch *a, const zt_model_config *mc, const char *name);
/* The family config.json names (architectures[0], else model_type): its
 * architecture and family entry; NULL when none is known. */
const zt_arch_hf *zt_arch_hf_find(const char *architectures, const char *model_type,
                                  const zt_arch **arch);
/* The family a model exports as: mc->hf_architecture when set; else (a
 * checkpoint from before that key) orig, the original config.json's
 * architectures[0] (NULL: none), when it can express mc; else the
 * architecture's default.  NULL (and a reason in why) when the stored
 * family cannot express mc. */
const zt_arch_hf *zt_arch_hf_export(const zt_model_config *mc, const char *orig, char *why,
                                    size_t n);
/* "LlamaForCausalLM, ..." -- every family, for messages. */
void zt_arch_hf_list(char *buf, size_t n);

#endif
