/*
 * config.h -- the effective configuration (internal view of zt_config).
 *
 * Keys follow DeepSpeed's ds_config.json names where they exist; ztrain's own
 * keys live under "ztrain".  Every key is settable from the JSON file, a
 * ZTRAIN_* environment variable and a `ztrain train` flag; precedence is
 * flag > environment > file > default.  config_keys.c holds the one table
 * that maps key paths, flags, env names, types, ranges and defaults to the
 * fields below; config_int.h says which config_*.c file does the rest.
 */
#ifndef ZT_CONFIG_H
#define ZT_CONFIG_H

#include "ztrain.h"

#define ZT_PATH_MAX 1024
/* room for one of longrope's factor lists (head_dim / 2 comma-separated
 * numbers: 128 of up to 30 characters) */
#define ZT_ROPE_FACTORS_LEN 4096

typedef struct zt_model_config {
    int n_layer;   /* ztrain.model.n_layer   >= 1                 */
    int n_head;    /* ztrain.model.n_head    >= 1                 */
    int n_embd;    /* ztrain.model.n_embd    >= 1 (hidden size)   */
    int context;   /* ztrain.model.context   >= 1: the model's maximum positions
                    * (GPT-2: rows of the position table; Llama:
                    * max_position_embeddings).  The training length is
                    * zt_config.seq_len (<= context).                  */
    int vocab;     /* ztrain.model.vocab     2..2^20              */
    /* ---- architecture (ztrain.model.arch) and its Llama-family settings;
     * GPT-2 ignores them (finalize refuses non-default values for it) */
    char arch[16];          /* ztrain.model.arch: gpt2 | llama              */
    int n_kv_head;          /* ztrain.model.n_kv_head: GQA key/value heads, 0 = n_head;
                             * must divide n_head (1 = multi-query)          */
    int head_dim;           /* ztrain.model.head_dim, 0 = n_embd / n_head     */
    int intermediate;       /* ztrain.model.intermediate_size: SwiGLU width, 0 = 4 n_embd */
    double norm_eps;        /* ztrain.model.rms_norm_eps (RMSNorm), default 1e-5 */
    double rope_theta;      /* ztrain.model.rope_theta, default 10000       */
    char rope_scaling[16];  /* ztrain.model.rope_scaling: none | llama3 | linear | dynamic | yarn
                             * | longrope */
    double rope_factor;     /* ztrain.model.rope_factor (llama3, linear, dynamic, yarn, longrope),
                             * default 8 */
    double rope_low_freq_factor;  /* ztrain.model.rope_low_freq_factor, default 1  */
    double rope_high_freq_factor; /* ztrain.model.rope_high_freq_factor, default 4 */
    int rope_original_max;  /* ztrain.model.rope_original_max_positions (llama3, yarn, longrope),
                             * default 8192 */
    double rope_attention_factor; /* ztrain.model.rope_attention_factor (yarn, longrope): cos/sin
                                   * scale, 0 = yarn: 0.1 ln(factor) + 1 (transformers' get_mscale);
                                   * longrope: sqrt(1 + ln(factor) / ln(original)) */
    double rope_beta_fast, rope_beta_slow; /* ztrain.model.rope_beta_fast / _slow (yarn), 32 / 1 */
    int rope_truncate;      /* ztrain.model.rope_truncate (yarn): round the correction range */
    /* ztrain.model.rope_short_factor / _long_factor (longrope): head_dim / 2
     * comma-separated numbers that divide the frequencies, short_factor while
     * the sequence stays within rope_original_max, long_factor past it */
    char rope_short_factor[ZT_ROPE_FACTORS_LEN], rope_long_factor[ZT_ROPE_FACTORS_LEN];
    int attention_bias;     /* ztrain.model.attention_bias: q/k/v biases (Qwen2) */
    int qk_norm;            /* ztrain.model.qk_norm: per-head RMSNorm of q and k (Qwen3) */
    int qk_norm_full;       /* ztrain.model.qk_norm_full: with qk_norm, one RMSNorm over the whole
                             * q and k projections instead of each head (OLMoE) */
    /* ---- Gemma 2 / 3 (ztrain.model.gemma != 0): RMSNorm weights applied as
     * (1 + w), a norm after attention and after the MLP besides the two
     * before them, GeGLU (tanh GELU) MLP, embeddings scaled by sqrt(n_embd) */
    int gemma;              /* ztrain.model.gemma: 0 (not Gemma), 2 or 3 */
    double query_pre_attn_scalar; /* ztrain.model.query_pre_attn_scalar: attention scale
                                   * scalar^-0.5, 0 = head_dim */
    double attn_softcap;    /* ztrain.model.attn_softcap: attention logit soft-cap, 0 = none */
    double final_softcap;   /* ztrain.model.final_softcap: final logit soft-cap, 0 = none */
    int sliding_window;     /* ztrain.model.sliding_window: keys within the window, 0 = none */
    int sliding_pattern;    /* ztrain.model.sliding_pattern: P > 0: layer l is full attention
                             * when (l + 1) % P == 0, the others slide; 0: every layer slides */
    int sliding_from;       /* ztrain.model.sliding_from: layers l < it are full attention
                             * (Qwen2/3's max_window_layers); 0: from the first layer */
    double rope_local_theta; /* ztrain.model.rope_local_theta: rotary base of the sliding
                              * layers (no scaling), 0 = as the full layers (Gemma 3: 10000) */
    int tie_embeddings;     /* ztrain.model.tie_embeddings: LM head = token embedding
                             * (GPT-2: always true)                          */
    int pad_token_id;       /* ztrain.model.pad_token_id (llama): the embedding lookup adds
                             * no gradient to this row (transformers' nn.Embedding
                             * padding_idx; a tied LM head's gradient still flows); -1 = none
                             * (zt_config_new's default; a config built by hand, zero-
                             * initialized, must set -1: 0 is token 0) */
    /* ---- Mixture of Experts (llama, ztrain.model.n_experts > 0; libtrain/moe.h):
     * every block's MLP is a router over n_experts SwiGLU experts of width
     * moe_intermediate_size, each token sent to its experts_per_token best */
    int n_experts;          /* ztrain.model.n_experts, 0 = a dense MLP */
    int experts_per_token;  /* ztrain.model.experts_per_token (top-k) */
    int moe_intermediate;   /* ztrain.model.moe_intermediate_size: an expert's width */
    int moe_norm_topk;      /* ztrain.model.moe_norm_topk: the top-k weights renormalised to 1 */
    int shared_expert;      /* ztrain.model.shared_expert_size: width of the shared expert behind
                             * its sigmoid gate (Qwen2-MoE), 0 = none */
    /* Qwen-MoE's mixed blocks: block l is sparse iff l is not in mlp_only_layers and
     * (l + 1) % decoder_sparse_step == 0 (zt_model_layer_sparse), else a dense MLP
     * of width intermediate_size */
    int decoder_sparse_step;  /* ztrain.model.decoder_sparse_step (default 1) */
    char mlp_only_layers[512]; /* ztrain.model.mlp_only_layers: comma-separated blocks ("" = none) */
    double router_aux_loss_coef; /* ztrain.model.router_aux_loss_coef: the load-balancing loss
                                  * (transformers' load_balancing_loss_func) times this joins
                                  * the training objective; 0 = logged only */
    char hf_architecture[32]; /* ztrain.model.hf_architecture: the Hugging Face class the
                               * model came from and exports as ("" = the architecture's
                               * default; arch.h zt_arch_hf_export) */
    /* ---- LoRA (ztrain.lora.*, libtrain/lora.h): kept with the model's shape
     * because the layout, the activations and the memory plan depend on it */
    int lora_r;               /* ztrain.lora.r: adapter rank, 0 = off (full fine-tuning) */
    double lora_alpha;        /* ztrain.lora.alpha: scale alpha / r (alpha / sqrt(r) rslora) */
    double lora_dropout;      /* ztrain.lora.dropout: on the adapter's input, [0, 1) */
    char lora_targets[160];   /* ztrain.lora.targets: PEFT module names, comma-separated,
                               * "all-linear", "" = PEFT's default for the architecture */
    int lora_rslora;          /* ztrain.lora.rslora */
    char lora_from[1024];     /* ztrain.lora.from: a PEFT adapter directory the adapters start
                               * from ("" = A random, B zero) */
    char lora_base[16];       /* ztrain.lora.base: the frozen base's storage, "" (the compute
                               * dtype), "nf4" or "nf4-dq" (QLoRA, lora.h) */
    /* ---- sequence parallelism (libtrain/seqpar.h): kept with the model's
     * shape because the activations and the memory plan depend on it */
    int seq_parallel;         /* sequence_parallel_size: ranks sharing each sequence, 1 = off */
    /* ---- expert parallelism (libtrain/moe.h): the activations and the memory
     * plan depend on it */
    int expert_parallel;      /* expert_parallel_size: ranks splitting the experts, 1 = off */
    /* ---- the LM head's chunks (libtrain/classifier.h): kept with the model's
     * shape because the activations and the memory plan depend on it */
    int classifier_rows;      /* ztrain.classifier_chunk_rows: rows per chunk, 0 = auto */
    /* ---- activation checkpointing's blocks-attn: not a key; set by the
     * engine (train.c) and the memory planner from zt_config_act_ckpt_attn,
     * 0 in a config.  1 with checkpointing group size 1: a training block's
     * attention output (atty16 or atty) and lse carved per layer, not per
     * slot, and the backward's recompute of a block skips the attention
     * (gpt.c, llama.c; sequence parallel: the head-sharded output atth kept
     * per layer too, the recompute skipping the output's all-to-all) */
    int ckpt_attn;
    /* ---- bf16 activation storage: not a key; set by the engine (train.c)
     * and the memory planner from zt_acts16_of (precision.h), 0 in a config.
     * 1: the saved activations only GEMMs read (norm outputs, the MLP's
     * GELU/SwiGLU output) are kept in bf16 (the GEMMs round them to bf16
     * anyway: bitwise the same results), and so are the GEMM outputs q|k|v,
     * the attention output and fc / gate|up (their other readers read the
     * rounded values: not bitwise); the activations depend on it */
    int acts16;
    /* ---- the bf16-output paths (zt_w16_on, ZT_W16_*, below): not keys;
     * set by the engine (train.c) and the memory planner from zt_out16_of
     * (precision.h) once a run, each bit set unless its test hook is, then
     * cleared by the model (gpt.c, llama.c) where the backend lacks the
     * entries; 0 in a config (the to_bf16 paths, the separate add, the head
     * recomputed in backward) */
    uint64_t w16;
} zt_model_config;

/* The bits of zt_model_config.w16, each a path bitwise the one of before
 * (tests/test_count.c compares the two), and the test hook that clears it
 * (precision.c zt_out16_of; outside the ZTRAIN_ namespace on purpose):
 *   ZT_W16_O16      ZT_TEST_NO_O16: the GEMM outputs, the MLP's activations
 *                   and the attention's q|k|v written in bf16 directly
 *                   (model.h zt_o16_ok)
 *   ZT_W16_N16      ZT_TEST_NO_N16: the norms writing bf16 (zt_n16_ok)
 *   ZT_W16_R16      ZT_TEST_NO_R16: RoPE writing bf16 (zt_r16_ok)
 *   ZT_W16_AO16     ZT_TEST_NO_AO16: the attention's output written (and its
 *                   backward reading it) in bf16 (zt_ao16_ok)
 *   ZT_W16_D16      ZT_TEST_NO_D16: the norms' and SwiGLU/GeGLU's backward
 *                   writing the bf16 gradient copies the GEMMs read (zt_d16_ok)
 *   ZT_W16_QKR16    ZT_TEST_NO_QKR16: Qwen3's q/k norms and RoPE in one entry
 *                   writing bf16 (zt_qkr16_ok)
 *   ZT_W16_AB16     ZT_TEST_NO_AB16: the attention backward's bf16 gradient
 *                   read by the q|k|v GEMM as it is (arch.h zt_att_in16_of
 *                   ZT_ATT_IN16OD)
 *   ZT_W16_X16      ZT_TEST_NO_X16: the final norm writing the LM head's
 *                   bf16 input alone (a training block with acts16: no fp32
 *                   copy; the activations depend on it)
 *   ZT_W16_G16      ZT_TEST_NO_G16: GPT-2's fc backward through the GELU
 *                   writing its gradient in bf16 (zt_g16_ok, with D16)
 *   ZT_W16_SP16     ZT_TEST_NO_SP16: sequence parallelism's all-to-alls of the
 *                   attention output (forward) and the q|k|v gradient
 *                   (backward) sent in bf16 where the GEMMs after them round
 *                   those values anyway (arch.h sp16; the activations depend
 *                   on it)
 *   ZT_W16_RB16     ZT_TEST_NO_RB16: Llama's blocks (no q/k norms) taking
 *                   AB16's bf16 gradient through RoPE's backward in bf16
 *                   (rope_bwd16) into the q|k|v GEMM
 *   ZT_W16_DO16     ZT_TEST_NO_DO16: the attention projection's backward
 *                   writing the output's gradient in bf16, cuDNN's dO as it
 *                   is (arch.h zt_do16_of)
 *   ZT_W16_ADDFOLD  ZT_TEST_NO_ADDFOLD: each block's last residual add folded
 *                   into the next block's first norm (or the final norm;
 *                   arch.h)
 *   ZT_W16_LORAACC  ZT_TEST_NO_LORAACC: LoRA's adapter products added into
 *                   their outputs by the GEMM (backend.h matmul_dinp_acc; no
 *                   [N, OUT] scratch product and add; lora.h zt_lora.acc)
 *   ZT_W16_LORABT   ZT_TEST_NO_LORABT: LoRA's group B^T placed, and its
 *                   gradient taken out, with one copy2d a module (and one
 *                   add a group), and the adapters' backward GEMMs reading
 *                   the bf16 copy of dy the model's GEMM reads (lora.h
 *                   zt_lora_bwd dy16; Llama's gate|up gradient then only
 *                   in bf16, as without adapters)
 *   ZT_W16_QKV16    ZT_TEST_NO_QKV16: with LoRA (and ZT_W16_LORABT), Llama's
 *                   q|k|v gradient in bf16 alone as without adapters (the
 *                   attention backward's, RoPE's in bf16, sp16's exchange:
 *                   ZT_ATT_IN16OD, ZT_SP16_DQKV), the q|k|v adapters' GEMMs
 *                   reading it as their dy16 (arch.h zt_lora_dq16_of)
 *   ZT_W16_GPT16    ZT_TEST_NO_GPT16: GPT-2 with LoRA taking the bf16 paths
 *                   of its matmuls without adapters (the GEMMs writing bf16,
 *                   g16, do16, ab16), and the bf16 gradient paths where the
 *                   adapters read the bf16 output gradient (LORABT): fc's
 *                   (g16, or the gradient rounded once) and q|k|v's (ab16)
 *   ZT_W16_LORASWAP ZT_TEST_NO_LORASWAP: a LoRA group's forward delta written
 *                   first (beta 0) and the base GEMM adding its product into
 *                   it (backend.h matmul_fwd_acc), not the base output then
 *                   the delta added: the same fp32 sum of the same two fp32
 *                   numbers (lora.h zt_lora_fwd_first; Llama's dense blocks
 *                   without a bias, no dropout)
 *   ZT_W16_BWDSWAP  ZT_TEST_NO_BWDSWAP: a LoRA group's input gradient dx =
 *                   dh A written first (beta 0) and the base dinp GEMM
 *                   adding its product into it (backend.h matmul_bwd_acc),
 *                   not the base dinp then the adapters' product added: the
 *                   same fp32 sum of the same two fp32 numbers (lora.h
 *                   zt_lora_bwd_first; Llama's dense blocks whose base has
 *                   no weight or bias gradient, no dropout)
 *   ZT_W16_GLUROUND ZT_TEST_NO_GLUROUND: with LoRA on fc / gate|up, its fp32
 *                   output rounded to bf16 and the GELU / SwiGLU / GeGLU
 *                   of the rounded values in one entry (backend.h
 *                   gelu_fwd16r / swiglu_fwd16r / geglu_fwd16r, where the
 *                   backend has it), not to_bf16 then the 16-bit entry
 *                   reading the rounding back: the same values
 *   ZT_W16_KEEPH    ZT_TEST_NO_KEEPH: LoRA's h = s x A^T of each group kept
 *                   from the forward in the block's activation slot for the
 *                   backward ([N, n r] fp32 a group; checkpointing: the
 *                   recomputed blocks' slots), not recomputed there (its
 *                   GEMM reading x and its scale; lora.h zt_lora_keeph_on,
 *                   no dropout)
 *   ZT_W16_LORA16   ZT_TEST_NO_LORA16: LoRA's adapter GEMMs reading the adapter
 *                   engine's bf16 storage as their weight (lora.h
 *                   zt_lora_scratch.ad16; a group's B^T placed in bf16), not
 *                   the fp32 adapters rounded to the same bf16 by each GEMM
 *   ZT_W16_LGATE    ZT_TEST_NO_LGATE: with LoRA, Llama's gate|up GEMM writing
 *                   its bf16 output itself (the path of no LoRA) where
 *                   gate|up has no adapters (q_proj,v_proj), not its fp32
 *                   output rounded wherever the block has adapters: the
 *                   same values
 *   ZT_W16_GU16     ZT_TEST_NO_GU16: with adapters on Llama's gate|up (bf16
 *                   matmul mode, no dropout), their delta written in bf16
 *                   first (lora.h zt_lora_fwd_first16) and the base GEMM
 *                   adding into it in place, writing the bf16 gate|up
 *                   (backend.h matmul_fwd_acc16), SwiGLU / GeGLU reading
 *                   it: no fp32 [N, 2I] gate|up.  NOT the same values: the
 *                   delta rounded to bf16 once before the add (off: the
 *                   fp32 delta, the fp32 sum rounded; docs/precision.md)
 *   ZT_W16_LORAPATH ZT_TEST_NO_LORAPATH: with LoRA, a path of no LoRA taken
 *                   where only a group without adapters is involved, not
 *                   only where the model has none: Llama's o projection's
 *                   backward writing cuDNN's bf16 dO (zt_do16_of) where o
 *                   has none (q_proj,v_proj): the same values
 *   ZT_W16_BRANCH16 ZT_TEST_NO_BRANCH16: Llama's o and down projections
 *                   without adapters (a training block with the bf16
 *                   activations, no Gemma post norms, no MoE) writing
 *                   their output, the residual branch, in bf16 (backend.h
 *                   matmul_fwd_o16), the residual add + RMSNorm widening
 *                   it (add_rmsnorm_fwd16b): no fp32 [N, C] branch.  NOT
 *                   the same values: the branch rounded to bf16 before the
 *                   add, PyTorch autocast's Linear output (off: the fp32
 *                   branch; docs/precision.md).  With adapters on o / down:
 *                   ZT_W16_LBRANCH16
 *   ZT_W16_DOUT16N  ZT_TEST_NO_DOUT16N: Llama's q|k|v and gate|up GEMMs (no
 *                   adapters there, with them ZT_W16_LGRAD16; bf16
 *                   gradients in, not Gemma, no sequence
 *                   parallelism) writing their input gradient in bf16
 *                   (backend.h matmul_bwd_o16) and the norm backward reading
 *                   it (rmsnorm_bwd16d): no fp32 norm-output gradient.  NOT
 *                   the same values: that gradient rounded to bf16 once
 *                   (PyTorch autocast's bf16 dX of a Linear; off: fp32,
 *                   docs/precision.md)
 *   ZT_W16_DH16     ZT_TEST_NO_DH16: Llama's and Gemma's down projection (no
 *                   adapters there, bf16 gradients in, the bf16 gate|up and
 *                   its bf16 gradient, no MoE) writing its input gradient dh
 *                   in bf16 (backend.h matmul_bwd_o16) and SwiGLU / GeGLU's
 *                   backward reading it (swiglu_bwd_dd16 / geglu_bwd_dd16):
 *                   no fp32 [N, H] dh.  NOT the same values: dh rounded to
 *                   bf16 once (PyTorch autocast's bf16 dX of a Linear; off:
 *                   fp32, docs/precision.md)
 *   ZT_W16_LBRANCH16 ZT_TEST_NO_LBRANCH16: ZT_W16_BRANCH16's bf16 residual
 *                   branch also where o / down have adapters (no dropout,
 *                   the bf16 weight): their delta written in bf16 first
 *                   (lora.h zt_lora_fwd_first16) and the base GEMM adding
 *                   into it in place (backend.h matmul_fwd_acc16), the
 *                   residual add + RMSNorm widening it (add_rmsnorm_fwd16b),
 *                   as gate|up's ZT_W16_GU16: no fp32 [N, C] branch.  NOT
 *                   the same values: the delta rounded to bf16 once before
 *                   the add, the sum rounded to bf16 (off: the fp32 delta
 *                   and branch; docs/precision.md)
 *   ZT_W16_QKB16    ZT_TEST_NO_QKB16: Llama's blocks with q/k norms (Qwen3,
 *                   Gemma 3, OLMoE; no q|k|v bias) taking AB16's bf16
 *                   gradient through RoPE's and the norms' backward in bf16
 *                   (qknorm_rope_bwd16) into the q|k|v GEMM, as RB16 without
 *                   norms (arch.h zt_att_in16_of ZT_ATT_IN16OD): the same
 *                   values (off: widened, rope_bwd, headnorm_bwd twice in
 *                   fp32, rounded by the GEMM)
 *   ZT_W16_LGRAD16  ZT_TEST_NO_LGRAD16: ZT_W16_DOUT16N's bf16 input
 *                   gradient also where q|k|v / gate|up have adapters, and
 *                   ZT_W16_DH16's where down has them (not Gemma; a frozen
 *                   base, no dropout, the backward's order swapped,
 *                   ZT_W16_BWDSWAP): the adapters' share written in bf16
 *                   first (lora.h zt_lora_bwd_first16) and the base dinp
 *                   GEMM adding into it in place (backend.h
 *                   matmul_bwd_acc16), the norm backward reading it
 *                   (rmsnorm_bwd16d; down's: swiglu_bwd_dd16): no fp32
 *                   [N, C] norm-output gradient, no fp32 [N, I] dh.
 *                   NOT the same values: the adapters' share rounded to
 *                   bf16 once before the add, the sum rounded to bf16 (off:
 *                   the fp32 share and gradient; docs/precision.md)
 *   ZT_W16_LO16     ZT_TEST_NO_LO16: ZT_W16_DO16's bf16 dO also where
 *                   Llama's o projection or GPT-2's c_proj has adapters (a
 *                   frozen base, no dropout, the backward's order swapped,
 *                   ZT_W16_BWDSWAP; llama.h zt_llama_lora_do16, gpt.h
 *                   zt_gpt_lora_do16, the planner's gate too): the
 *                   adapters' share written in bf16 first into datt's (GPT-2:
 *                   dbuf's) memory (model_skel.h zt_skel_lora_lin_bwd16,
 *                   lora.h zt_lora_bwd_first16) and the base dinp
 *                   GEMM adding into it in place (backend.h
 *                   matmul_bwd_acc16), the attention backward reading it as
 *                   its dO (gqa_ext_bwd16do): no fp32 [N, AD] dO, no
 *                   conversion of it by the attention backward.  NOT the
 *                   same values: the share rounded to bf16 once before the
 *                   add (off: the fp32 share and dO, rounded by the
 *                   attention backward; docs/precision.md)
 *   ZT_W16_MOE16    ZT_TEST_NO_MOE16: a Mixture of Experts model takes the
 *                   bf16 activations too (model_acts.h zt_acts16_on): every
 *                   block's attention half and the dense blocks' MLP, the
 *                   LM head's bf16 input and logits, the routed experts'
 *                   gate|up, SwiGLU output and outputs (moe.h b16, with
 *                   ZT_W16_O16), the shared expert's gate|up and h where
 *                   the slot holds sparse blocks alone and LoRA is off; an
 *                   activation slot holding a sparse block keeps the rest
 *                   of its MLP half
 *                   in fp32 (the norm's output, the routed rows).  NOT the
 *                   same values (the bf16 GEMM outputs and branches of the
 *                   dense models; off: the fp32 activations everywhere, as
 *                   before)
 *   ZT_W16_EP16     ZT_TEST_NO_EP16: with ZT_W16_MOE16's bf16 experts and
 *                   expert parallelism, the routed inputs, the experts'
 *                   outputs and their gradients exchanged in bf16 (moe.h
 *                   ex16): half the bytes of three of the four all-to-alls,
 *                   the same values (bitwise: tests/moe_ep.sh)
 *   ZT_W16_MX16     ZT_TEST_NO_MX16: with ZT_W16_MOE16's bf16 experts, every
 *                   block sparse, no LoRA and no expert parallelism, the
 *                   sparse blocks' MLP norm output kept in bf16 (xn216, the
 *                   dense blocks' policy) and the routed rows gathered in
 *                   bf16 (backend.h rows_gather16; moe.h x16): the router's,
 *                   the experts' gate|up and the shared expert's GEMMs read
 *                   them as bf16 inputs.  The same values (each rounded x
 *                   to bf16 before; bitwise: tests/test_count.c)
 *   ZT_W16_NOYP     ZT_TEST_MOE_KEEP_YP: with ZT_W16_MOE16's bf16 experts
 *                   and no expert parallelism, the experts' outputs not
 *                   kept for the backward (moe.c down_bwd16: the routing
 *                   weights' gradient as (W^T dy_i) . hp_i).  Off: kept in
 *                   bf16 (moe.h zt_moe_acts yp16, NK C bf16 more a block),
 *                   the routing weights' gradient dy_i . yp_i and the down
 *                   GEMMs' backward on the weighted rows, as with expert
 *                   parallelism.  NOT the same values (the input-gradient
 *                   GEMMs round dy_i instead of wsel_i dy_i; tests/moe_ep.sh)
 *   ZT_W16_MOED16   ZT_TEST_NO_MOED16: with ZT_W16_MOE16's bf16 experts, the
 *                   experts' backward GEMMs read their output gradients in
 *                   bf16, each rounded once a layer: the down GEMMs' rows
 *                   (to_bf16 over every routed row, then matmul_bwd_d16 an
 *                   expert), SwiGLU's backward writing gate|up's gradient
 *                   in bf16 in place of gate|up (swiglu_bwd_d16, as the
 *                   dense MLP), then matmul_bwd_d16 an expert; instead of
 *                   each expert's GEMMs rounding their slice.  The same
 *                   values (bitwise: tests/test_count.c)
 *   ZT_W16_MOEGB    ZT_TEST_NO_MOEGB: with ZT_W16_MOED16, the experts' output
 *                   kept off (ZT_W16_NOYP), the bf16 expert weights bound and
 *                   the backend's grouped entries (backend.h
 *                   matmul_grouped_bwd_o16, rows_dot16h, swiglu_bwd_dd16,
 *                   rows_scatter16), the experts' input gradients in two
 *                   grouped GEMMs a layer writing bf16 (down's into dhp's
 *                   bytes, its routing-weight dot and weighting in bf16 by
 *                   rows_dot16h, read by swiglu_bwd_dd16; gate|up's into
 *                   dxr's bytes, summed per token by rows_scatter16); the
 *                   weight gradients a GEMM an expert (ZT_W16_MOEGW groups them).  NOT the same
 *                   values (down's and gate|up's input gradients rounded to
 *                   bf16, the weighting rounded again; tests/test_count.c's
 *                   bounds)
 *   ZT_W16_MOEGW    ZT_TEST_NO_MOEGW: with ZT_W16_MOEGB's grouped input
 *                   gradients, the bf16 routed rows (ZT_W16_MX16) and the
 *                   backend's matmul_grouped_dw16, the experts' weight
 *                   gradients too in grouped GEMMs (down's, then gate|up's:
 *                   each expert's product rounded to bf16 in the backward's
 *                   free dyp, then added into its fp32 gradient, chunks of
 *                   as many experts as dyp holds; a projection whose
 *                   expert gradient has more than 2^23 elements, or where
 *                   dyp holds fewer than one expert's, a GEMM an expert as
 *                   before: moe.c grouped_dw_fits).  NOT the same
 *                   values (each expert's weight gradient rounded to bf16
 *                   once a micro-batch, autocast's bf16 Linear;
 *                   tests/test_count.c's bounds)
 *   ZT_W16_EPYP16   ZT_TEST_NO_EPYP16: with ZT_W16_EP16's bf16 exchanges
 *                   (expert parallelism), the experts' outputs received in
 *                   bf16 and kept so for the backward (moe.h ep_yp16, yp16:
 *                   N K C bf16 a MoE block instead of fp32), the weighted
 *                   sum reading them in bf16 (rows_sum16 / rows_scatter16),
 *                   the routing weights' gradient widening them first.  The
 *                   same values (the down GEMMs rounded them, the exchange
 *                   sent them in bf16; bitwise: tests/moe_ep.sh)
 *   ZT_W16_EPX16    ZT_TEST_NO_EPX16: with ZT_W16_EP16's bf16 exchanges
 *                   (expert parallelism), the rows each rank's experts
 *                   receive kept in bf16 (moe.h ep_x16, xr16: R C bf16 a
 *                   MoE block instead of fp32, R its worst-case rows),
 *                   gathered by expert as they came (rows_gather16) and
 *                   read so by gate|up's GEMMs and weight gradients; the
 *                   experts' outputs gathered by rank in bf16 as the down
 *                   GEMMs wrote them and sent so (no fp32 [R, C] yr a
 *                   block), the rows sent gathered in the backward's free
 *                   dyp (no fp32 [R, C] xs shared by the blocks).  The
 *                   same values (bitwise: tests/moe_ep.sh)
 *   ZT_W16_EPDY16   ZT_TEST_NO_EPDY16: with ZT_W16_EP16's bf16 exchanges
 *                   and ZT_W16_MOED16 (expert parallelism), the output
 *                   gradients the backward receives regrouped by expert in
 *                   bf16 as they came (rows_gather16) into the buffer the
 *                   down GEMMs read, instead of widened, regrouped in fp32
 *                   and rounded again: three passes over [R, C] fewer.  The
 *                   same values (bitwise: tests/moe_ep.sh)
 *   ZT_W16_EPDX16   ZT_TEST_NO_EPDX16: with ZT_W16_EP16's bf16 exchanges
 *                   and ZT_W16_MOED16 (expert parallelism), the experts'
 *                   input gradients written in bf16 by gate|up's GEMMs
 *                   (matmul_bwd_o16), regrouped by rank in bf16, sent back
 *                   in bf16 (the fourth exchange: half its bytes) and summed
 *                   per token in fp32 (rows_sum16), as the grouped input
 *                   gradients without expert parallelism (ZT_W16_MOEGB).
 *                   NOT the same values (each routed row's input gradient
 *                   rounded to bf16 once, autocast's bf16 Linear;
 *                   tests/moe_ep.sh's bounds)
 *   ZT_W16_GATHER16 ZT_TEST_NO_GATHER16: with ZT_W16_MOED16's bf16 output
 *                   gradients (or expert parallelism's bf16 exchanges),
 *                   the MoE backward's output-gradient rows gathered
 *                   straight into bf16 (rows_gather_o16: the routed rows
 *                   of dy, weighted where the GEMMs read them so) instead
 *                   of an fp32 [N K, C] gather then to_bf16.  The same
 *                   values (bitwise: tests/test_count "MoE rows gathered
 *                   in bf16", tests/moe_ep.sh)
 *   ZT_W16_EPGB     ZT_TEST_NO_EPGB: with ZT_W16_EPDX16 (expert
 *                   parallelism), the experts' backward GEMMs in grouped
 *                   calls as without expert parallelism (ZT_W16_MOEGB,
 *                   ZT_W16_MOEGW): one for the down projection's input
 *                   gradients, written in bf16 and read so by SwiGLU's
 *                   backward, one for gate|up's, and one a projection for
 *                   the weight gradients (each expert's product rounded to
 *                   bf16, then added) where ZT_W16_MOEGW, instead of two
 *                   GEMMs an expert a projection.  NOT the same values (the
 *                   down projection's input gradient rounded to bf16, the
 *                   weight gradients' products; tests/moe_ep.sh's bounds)
 *   ZT_W16_GPTN16   ZT_TEST_NO_GPTN16: GPT-2's fc and q|k|v GEMMs (full
 *                   fine-tuning, their output gradient in bf16: fc's with
 *                   ZT_W16_G16, q|k|v's on cuDNN's path) writing their
 *                   input gradient, the gradient of ln_2's / ln_1's
 *                   output, in bf16 (matmul_bwd_o16), read by the
 *                   LayerNorm backward (backend.h layernorm_bwd16d), as
 *                   Llama's ZT_W16_DOUT16N.  NOT the same values (that
 *                   gradient rounded once; tests/test_count "GPT-2's
 *                   norms' bf16 output gradient")
 *   ZT_W16_LNSUM    ZT_TEST_NO_LNSUM: GPT-2's attention projection's bias
 *                   gradient (full fine-tuning, bf16 gradients) summed by
 *                   ln_2's backward over the residual gradient it leaves
 *                   (layernorm_bwd16d's dsum) instead of a column sum by
 *                   the projection's backward.  The same values (bitwise:
 *                   tests/test_count "GPT-2's c_proj bias summed by ln_2")
 *   ZT_W16_GELUE    ZT_TEST_NO_GELUE: GPT-2's fc GEMM and GELU in one bf16
 *                   entry (backend.h matmul_gelu_fwd_o16; cuda: cuBLASLt's
 *                   GELU_AUX_BIAS with a bf16 D and aux) where fc has no
 *                   adapters, instead of matmul_fwd_o16 then gelu_fwd16.
 *                   NOT the same values: the GELU of the fp32 pre, not of
 *                   its bf16 rounding (tests/test_count "GPT-2's fc and
 *                   GELU in one bf16 GEMM")
 *   ZT_W16_GBRANCH16 ZT_TEST_NO_GBRANCH16: GPT-2's attention and MLP
 *                   projections (without adapters) writing their outputs,
 *                   the residual branches, in bf16 (matmul_fwd_o16) and the
 *                   residual add fused with the next norm reading them
 *                   widened (add_layernorm_fwd16b), as Llama's
 *                   ZT_W16_BRANCH16.  NOT the same values (the branch
 *                   rounded once; tests/test_count "GPT-2's residual
 *                   branches in bf16")
 *   ZT_W16_MLPSUM   ZT_TEST_NO_MLPSUM: GPT-2's MLP projection's bias
 *                   gradient (full fine-tuning, bf16 gradients) summed by
 *                   the norm backward that leaves its output gradient (the
 *                   next block's ln_1, or the final norm: layernorm_bwd16d's
 *                   dsum) into a row of the activations' mlpsum [L, C],
 *                   then added to the bias gradient by the block's own
 *                   backward (whose gradient unit is bound only then),
 *                   instead of a column sum by the projection's backward.
 *                   The same values (bitwise: tests/test_count "GPT-2's MLP
 *                   projection bias summed by the norm above")
 *   ZT_W16_HEADFRESH ZT_TEST_NO_HEADFRESH: with the blocks' weight
 *                   gradients written fresh (stages 0 and 1, full
 *                   fine-tuning: shard.h zt_shard_fresh_range), a tied LM
 *                   head's gradient (the embedding's) too: left out of the
 *                   step's zeroing and written by the first dW GEMM of the
 *                   first micro-batch's fused head (ZT_W16_HEADFUSE;
 *                   shard.h zt_shard_head_fresh), zeroed after that forward
 *                   where no GEMM wrote it.  The same values (bitwise but
 *                   -0.0: tests/test_count "the tied head's gradient
 *                   written fresh") */
/* (macros, not an enum: bit 32 and on need 64 bits) */
#define ZT_W16_O16        (UINT64_C(1) << 0)
#define ZT_W16_N16        (UINT64_C(1) << 1)
#define ZT_W16_R16        (UINT64_C(1) << 2)
#define ZT_W16_AO16       (UINT64_C(1) << 3)
#define ZT_W16_D16        (UINT64_C(1) << 4)
#define ZT_W16_QKR16      (UINT64_C(1) << 5)
#define ZT_W16_AB16       (UINT64_C(1) << 6)
#define ZT_W16_X16        (UINT64_C(1) << 7)
#define ZT_W16_G16        (UINT64_C(1) << 8)
#define ZT_W16_SP16       (UINT64_C(1) << 9)
#define ZT_W16_RB16       (UINT64_C(1) << 10)
#define ZT_W16_DO16       (UINT64_C(1) << 11)
#define ZT_W16_ADDFOLD    (UINT64_C(1) << 12)
#define ZT_W16_HEADFUSE   (UINT64_C(1) << 13)
#define ZT_W16_LORAACC    (UINT64_C(1) << 14)
#define ZT_W16_LORABT     (UINT64_C(1) << 15)
#define ZT_W16_LORASWAP   (UINT64_C(1) << 16)
#define ZT_W16_QKV16      (UINT64_C(1) << 17)
#define ZT_W16_BWDSWAP    (UINT64_C(1) << 18)
#define ZT_W16_GPT16      (UINT64_C(1) << 19)
#define ZT_W16_GLUROUND   (UINT64_C(1) << 20)
#define ZT_W16_KEEPH      (UINT64_C(1) << 21)
#define ZT_W16_LORA16     (UINT64_C(1) << 22)
#define ZT_W16_LGATE      (UINT64_C(1) << 23)
#define ZT_W16_GU16       (UINT64_C(1) << 24)
#define ZT_W16_LORAPATH   (UINT64_C(1) << 25)
#define ZT_W16_BRANCH16   (UINT64_C(1) << 26)
#define ZT_W16_DOUT16N    (UINT64_C(1) << 27)
#define ZT_W16_DH16       (UINT64_C(1) << 28)
#define ZT_W16_LBRANCH16  (UINT64_C(1) << 29)
#define ZT_W16_QKB16      (UINT64_C(1) << 30)
#define ZT_W16_LGRAD16    (UINT64_C(1) << 31)
#define ZT_W16_LO16       (UINT64_C(1) << 32)
#define ZT_W16_MOE16      (UINT64_C(1) << 33)
#define ZT_W16_EP16       (UINT64_C(1) << 34)
#define ZT_W16_MX16       (UINT64_C(1) << 35)
#define ZT_W16_NOYP       (UINT64_C(1) << 36)
#define ZT_W16_MOED16     (UINT64_C(1) << 37)
#define ZT_W16_MOEGB      (UINT64_C(1) << 38)
#define ZT_W16_MOEGW      (UINT64_C(1) << 39)
#define ZT_W16_EPYP16     (UINT64_C(1) << 40)
#define ZT_W16_EPX16      (UINT64_C(1) << 41)
#define ZT_W16_EPDY16     (UINT64_C(1) << 42)
#define ZT_W16_EPDX16     (UINT64_C(1) << 43)
#define ZT_W16_GATHER16   (UINT64_C(1) << 44)
#define ZT_W16_EPGB       (UINT64_C(1) << 45)
#define ZT_W16_GPTN16     (UINT64_C(1) << 46)
#define ZT_W16_LNSUM      (UINT64_C(1) << 47)
#define ZT_W16_GELUE      (UINT64_C(1) << 48)
#define ZT_W16_GBRANCH16  (UINT64_C(1) << 49)
#define ZT_W16_MLPSUM     (UINT64_C(1) << 50)
#define ZT_W16_HEADFRESH  (UINT64_C(1) << 51)
/* 1 when mc takes the path of bit (one ZT_W16_*) */
static inline int zt_w16_on(const zt_model_config *mc, uint64_t bit) { return (mc->w16 & bit) != 0; }
/* bit (one ZT_W16_*) kept only where ok: the model's copy of the config
 * drops a path its backend (or its shape) cannot take */
static inline void zt_w16_keep_if(zt_model_config *mc, uint64_t bit, int ok) {
    if (!ok) mc->w16 &= ~bit;
}

struct zt_config {
    /* DeepSpeed batch triple: train_batch_size ==
     * micro_batch * grad_accum * world_size; any two determine the third.
     * 0 = not given (resolved by zt_config_finalize). */
    int train_batch_size;
    int micro_batch;          /* train_micro_batch_size_per_gpu */
    int grad_accum;           /* gradient_accumulation_steps */
    double grad_clip;         /* gradient_clipping, >= 0, 0 = off; default 1.0 */

    int zero_stage;           /* zero_optimization.stage 0..3 */

    int bf16_enabled;         /* bf16.enabled */
    int fp16_enabled;         /* fp16.enabled */
    double fp16_loss_scale;   /* fp16.loss_scale (0 = dynamic) */
    int fp16_initial_scale_power; /* fp16.initial_scale_power, default 16 */
    int fp16_loss_scale_window;   /* fp16.loss_scale_window, default 1000 */
    int fp16_hysteresis;          /* fp16.hysteresis, default 2 */
    double fp16_min_loss_scale;   /* fp16.min_loss_scale, default 1 */
    char comm_dtype[8];           /* communication_data_type: fp32 | bf16 | fp16 (gradient
                                   * reductions), default fp32 */
    char matmul_precision[8];     /* ztrain.matmul_precision: auto | fp32 | bf16 (GEMM and
                                   * attention operands; auto = bf16 with bf16.enabled on
                                   * cuda, else fp32) */

    /* optimizer: type must be "AdamW" */
    char optimizer_type[32];
    double lr;                /* optimizer.params.lr, default 3e-4 */
    double beta1, beta2;      /* optimizer.params.betas [0.9, 0.95] */
    double eps;               /* optimizer.params.eps 1e-8 */
    double weight_decay;      /* optimizer.params.weight_decay 0.1 */

    /* scheduler: type "WarmupCosineLR" (or "none": constant lr) */
    char scheduler_type[32];
    int warmup_steps;         /* scheduler.params.warmup_num_steps */
    int total_steps;          /* scheduler.params.total_num_steps, 0 = ztrain.steps */
    double warmup_min_ratio;  /* scheduler.params.warmup_min_ratio, default 0 */
    double cos_min_ratio;     /* scheduler.params.cos_min_ratio, default 0.1 */
    char warmup_type[16];     /* scheduler.params.warmup_type: linear | log */

    zt_model_config model;    /* ztrain.model.* */

    int seq_len;              /* ztrain.seq_len: tokens per training/eval sample, 0 = derive
                               * (= model.context); at most model.context */
    char init_from[ZT_PATH_MAX]; /* ztrain.init_from: a Hugging Face model directory whose
                                  * weights start the run ("" = random initialization) */
    char init_from_files[512]; /* ztrain.init_from_files: "NAME=HEX16 ..." per file of init_from
                                * (recorded by zt_hf_record_init_from; read by export) */

    char data_train[ZT_PATH_MAX]; /* ztrain.data.train (file or glob) */
    char data_val[ZT_PATH_MAX];   /* ztrain.data.val ("" = no eval) */
    int dataloaders;              /* ztrain.data.dataloaders, 0 = auto */

    long steps;               /* ztrain.steps >= 1 */
    unsigned long long seed;  /* ztrain.seed */
    int eval_every;           /* ztrain.eval_every, 0 = only at the end */
    int eval_batch_size;      /* ztrain.eval_batch_size, 0 = train_batch_size */
    int eval_batches;         /* ztrain.eval_batches, batches per eval */
    int log_every;            /* ztrain.log_every >= 1 */
    char metrics[ZT_PATH_MAX];/* ztrain.metrics: JSONL path, "" = none */
    char tensorboard_dir[ZT_PATH_MAX]; /* ztrain.tensorboard.dir: event files, "" = none */
    int threads;              /* ztrain.threads: OpenMP threads per rank, 0 = auto */
    char backend[16];         /* ztrain.backend: cpu | cuda | cpu-strict (debugging) */
    char comm_backend[8];     /* ztrain.comm_backend: auto | mpi | nccl (device buffers) */

    char ckpt_dir[ZT_PATH_MAX];   /* ztrain.checkpoint.dir */
    int ckpt_every;               /* ztrain.checkpoint.every, 0 = off */
    int ckpt_keep;                /* ztrain.checkpoint.keep >= 2 */
    char ckpt_resume[ZT_PATH_MAX];/* ztrain.checkpoint.resume auto|never|PATH */
    double ckpt_every_minutes;    /* ztrain.checkpoint.every_minutes, 0 = off */
    char ckpt_restore[16];        /* ztrain.checkpoint.restore: one-reader | parallel */
    char ckpt_on_failure[16];     /* ztrain.checkpoint.on_failure: stop | continue */
    char ckpt_lock[16];           /* ztrain.checkpoint.lock: on | break | off */
    int ckpt_async;               /* ztrain.checkpoint.async: periodic/timed saves written in the background */
    int ckpt_final;               /* ztrain.checkpoint.final: save after the last step (default 1) */
    char preempt_signal[16];      /* ztrain.preempt_signal: SIGUSR2 | SIGTERM | SIGINT | SIGHUP */
    char requeue[8];              /* ztrain.requeue: auto | true | false */

    /* provenance of every table entry, indexed like the table in config_keys.c */
    unsigned char *src;
    /* DeepSpeed compatibility, filled by zt_config_load_file, shown by
     * zt_config_describe: keys accepted with no effect in ztrain, and keys
     * given as "auto" that keep ztrain's own value (comma-separated) */
    char ds_noeffect[1024];
    char ds_auto[1024];
    char ds_mapped[256];      /* DeepSpeed keys mapped onto a ztrain key */
    int adam_w_mode;          /* optimizer.params.adam_w_mode (Adam: true = AdamW) */
    double warmup_min_lr;     /* scheduler.params.warmup_min_lr (WarmupLR, WarmupDecayLR) */

    int finalized;
    int world_size;           /* set by finalize */

    /* ZeRO offload targets (added by config_keys.c's table; enum strings) */
    char offload_optimizer[8];    /* zero_optimization.offload_optimizer.device: none | cpu */
    char offload_param[8];        /* zero_optimization.offload_param.device: none | cpu */
    int pin_optimizer;            /* zero_optimization.offload_optimizer.pin_memory */
    int pin_param;                /* zero_optimization.offload_param.pin_memory */
    int shard_group_size;         /* zero_optimization.shard_group_size, 0 = world,
                                   * ZT_SHARD_GROUP_NODE = the ranks of one node */
    int overlap_comm;             /* zero_optimization.overlap_comm (stages 2-3) */
    double comm_timeout_s;        /* ztrain.comm_timeout_s, 0 = no limit */
    double peak_tflops;           /* ztrain.peak_tflops: a device's dense peak for the
                                   * metrics' MFU, 0 = a known GPU's (zt_ctx_peak_tflops) */

    /* memory planner (memplan.h, docs/memory.md) */
    char act_ckpt[16];            /* activation_checkpointing.policy: none | blocks | blocks-attn
                                   * | every-K */
    unsigned long long memory_limit; /* ztrain.memory_limit bytes per rank, 0 = auto */
    unsigned long long strict_device_memory; /* ztrain.strict_device_memory: cpu-strict's
                                              * emulated capacity, 0 = none */
    int force;                    /* ztrain.force: start even if predicted not to fit */
    char memory_report[16];       /* ztrain.memory_report: off | end | N */
};

/* train_micro_batch_size_per_gpu = "auto" is stored as this value; it is
 * resolved against the memory limit (memplan.h) before finalize.  Without a
 * train_batch_size to keep it means the default, as an absent key does. */
#define ZT_MICRO_BATCH_AUTO (-1)

/* zero_optimization.shard_group_size = "node" is stored as this value: shard
 * inside each node, replicate across nodes (FSDP's HYBRID_SHARD).  It is
 * resolved against the ranks per node by zt_config_shard_group. */
#define ZT_SHARD_GROUP_NODE (-1)

/* The shard group a run of WORLD ranks with RANKS_PER_NODE ranks on each node
 * uses: the configured size, WORLD for 0, RANKS_PER_NODE (at least 1, at most
 * WORLD) for "node".  Stage 0 is not special-cased here. */
int zt_config_shard_group(const zt_config *cfg, int world, int ranks_per_node);

/* Copy (deep) a configuration. Returns NULL on allocation failure. */
zt_config *zt_config_dup(const zt_config *cfg);
/* Source of a key (JSON path); -1 if unknown. */
int zt_config_source(const zt_config *cfg, const char *key);
/* Like zt_config_load_env but reading variables through `get` (tests). */
int zt_config_load_env_with(zt_config *cfg,
                            const char *(*get)(void *user, const char *name),
                            void *user, zt_status *st);
/* Name of a zt_source ("default", "file", "env", "flag", "derived"). */
const char *zt_source_name(int src);
/* 1 if the key (JSON path or flag alias) is boolean (so a flag may be given
 * without a value), 0 if it takes a value, -1 if unknown. */
int zt_config_key_is_bool(const char *key_or_alias);
/* Like zt_config_finalize, but accepts settings this build cannot run yet
 * (bf16/fp16, offload, the cuda backend): for memory estimates only. */
int zt_config_finalize_plan(zt_config *cfg, int world_size, zt_status *st);
/* activation_checkpointing.policy as a group size: 0 none, 1 blocks or
 * blocks-attn, K every-K. */
int zt_config_act_ckpt_k(const zt_config *cfg);
/* 1 for blocks-attn: each block's attention output and softmax statistics
 * (lse) kept per layer through the forward, the backward's recompute of a
 * block skipping the attention (zt_model_config.ckpt_attn, which the engine
 * and the planner set from it); else 0. */
int zt_config_act_ckpt_attn(const zt_config *cfg);
/* Rows of one evaluation forward on a rank of dp data parallel groups (after
 * finalize): the rank's share of ztrain.eval_batch_size, ceil(E / dp); the
 * derived default (E = train_batch_size) in forwards of at most
 * train_micro_batch_size_per_gpu rows, as much memory as a micro batch. */
int zt_config_eval_rows(const zt_config *cfg, int dp);
/* Model helpers (valid after finalize or on any set config); the
 * architecture's descriptor: arch.h zt_arch_of. */
enum { ZT_ARCH_GPT2 = 0, ZT_ARCH_LLAMA = 1 };
int zt_model_arch(const zt_model_config *mc);            /* ZT_ARCH_* (arch.c) */
int zt_model_kv_heads(const zt_model_config *mc);        /* n_kv_head or n_head */
int zt_model_head_dim(const zt_model_config *mc);        /* head_dim or n_embd / n_head */
int zt_model_intermediate(const zt_model_config *mc);    /* intermediate or 4 n_embd */
/* Is block l's MLP a Mixture of Experts (n_experts > 0, l not in
 * mlp_only_layers, (l + 1) % decoder_sparse_step == 0: transformers'
 * Qwen2MoeDecoderLayer)?  zt_model_sparse_layers: how many are. */
int zt_model_layer_sparse(const zt_model_config *mc, int l);
int zt_model_sparse_layers(const zt_model_config *mc);
/* Parse ztrain.model.mlp_only_layers: the count of its integers (each also
 * stored in out[k] while k < n), -1 when malformed or one is negative. */
int zt_mlp_only_parse(const char *s, int n, int *out);
/* ztrain.memory_report: -1 off, 0 at the end only, N every N steps. */
int zt_config_memory_report(const zt_config *cfg);
/* Parse a byte size ("8G", "512MiB", "1.5T", "123", "auto" = 0); -1 if malformed. */
int zt_parse_size(const char *s, unsigned long long *out);
/* Help text for every key: flags, env names, type/range, default, meaning.
 * Caller frees with free(); NULL on allocation failure. */
char *zt_config_help_text(void);

/* The site limit on data-loader threads (ZTRAIN_SITE_LIMITS, ztrain_env.h),
 * ZTRAIN_DATALOADERS_MAX when none is stated. */
int zt_config_site_max_dataloaders(void);

#endif /* ZT_CONFIG_H */
