/*
 * config_keys.c -- the configuration table and the lookups in it.
 *
 * One table (`zt_cfg_keys` below) lists every configuration key: its JSON
 * path, flag aliases, extra environment name, type, field, range, default,
 * allowed values and help text.  Parsing (JSON file, environment, flags),
 * validation, precedence, provenance, describe/to_json output and the help
 * text are all derived from it (config_int.h says which file does what).
 * Adding a key = adding one row (and a field in config.h); a rule between
 * keys goes into config_check.c.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config_int.h"
#include "ztrain_env.h"

/* ================================================================ table */

const keydef zt_cfg_keys[] = {
    /* ---- DeepSpeed batch triple and clipping */
    {"train_batch_size", "batch-size", NULL, NULL, T_INT, FLD(train_batch_size),
     0, 0, KF_NO_HI | KF_AUTO, "0", NULL,
     "global batch (samples per optimizer step); 0 or \"auto\" = derive from the other two"},
    {"train_micro_batch_size_per_gpu", "micro-batch", NULL, NULL, T_INT, FLD(micro_batch),
     0, 0, KF_NO_HI | KF_AUTO | KF_FIT, "0", NULL,
     "samples per rank per micro-step; 0 = derive (16 if nothing is given); \"auto\" = the "
     "largest that fits the memory limit, keeping train_batch_size (see docs/memory.md); "
     "without train_batch_size, \"auto\" is 0"},
    {"gradient_accumulation_steps", "grad-accum", NULL, NULL, T_INT, FLD(grad_accum),
     0, 0, KF_NO_HI | KF_AUTO, "0", NULL,
     "micro-steps per optimizer step; 0 or \"auto\" = derive"},
    {"gradient_clipping", "clip", NULL, NULL, T_DOUBLE, FLD(grad_clip),
     0, 0, KF_NO_HI, "1.0", NULL,
     "clip the global gradient norm to this value; 0 = off"},

    /* ---- ZeRO */
    {"zero_optimization.stage", "stage", ZTRAIN_ENV_STAGE, NULL, T_INT, FLD(zero_stage),
     ZTRAIN_STAGE_MIN, ZTRAIN_STAGE_MAX, 0, "0", NULL,
     "ZeRO stage: 0 = replicated, 1 = optimizer state, 2 = +gradients, 3 = +parameters"},
    {"zero_optimization.shard_group_size", "shard-group", NULL, NULL, T_INT, FLD(shard_group_size),
     0, 0, KF_NO_HI | KF_NODE, "0", NULL,
     "shard inside groups of this many consecutive ranks, replicate across groups "
     "(hybrid sharding); 0 = the world size; \"node\" = the ranks of one node"},
    {"zero_optimization.overlap_comm", "overlap-comm", NULL, NULL, T_BOOL, FLD(overlap_comm),
     0, 0, 0, "true", NULL,
     "stages 2-3: start each unit's gradient reduce-scatter as soon as its backward is done and "
     "let it run while the backward of the next units computes (at most 2 in flight: up to 2 "
     "more unit-sized gradient buckets live at once); false = reduce each unit before going on"},
    {"zero_optimization.offload_optimizer.device", NULL, NULL, NULL, T_ENUM,
     FLD(offload_optimizer), 0, 0, 0, "none", "none|cpu",
     "where optimizer state lives"},
    {"zero_optimization.offload_optimizer.pin_memory", NULL, NULL, NULL, T_BOOL,
     FLD(pin_optimizer), 0, 0, 0, "false", NULL,
     "page-lock the offloaded optimizer state (a backend that can pin: cuda)"},
    {"zero_optimization.offload_param.device", NULL, NULL, NULL, T_ENUM,
     FLD(offload_param), 0, 0, 0, "none", "none|cpu",
     "where sharded parameters live (stage 3, with offload_optimizer.device=cpu)"},
    {"zero_optimization.offload_param.pin_memory", NULL, NULL, NULL, T_BOOL,
     FLD(pin_param), 0, 0, 0, "false", NULL,
     "page-lock the offloaded parameter shards (a backend that can pin: cuda)"},

    {"sequence_parallel_size", "sp", NULL, NULL, T_INT, FLD(model.seq_parallel),
     1, 4096, 0, "1", NULL,
     "sequence parallelism (DeepSpeed-Ulysses): groups of this many consecutive ranks share "
     "each sample, each rank holding seq_len / N consecutive tokens; attention exchanges heads "
     "for tokens with all-to-alls; data parallel degree = ranks / N (docs/long-context.md)"},
    {"expert_parallel_size", "ep", NULL, NULL, T_INT, FLD(model.expert_parallel),
     1, 4096, 0, "1", NULL,
     "expert parallelism (Mixture of Experts): groups of this many consecutive ranks split each "
     "MoE block's experts, tokens sent to their experts and back with all-to-alls "
     "(docs/moe.md)"},

    /* ---- precision */
    {"bf16.enabled", NULL, NULL, NULL, T_BOOL, FLD(bf16_enabled),
     0, 0, 0, "false", NULL, "bfloat16 mixed precision"},
    {"fp16.enabled", NULL, NULL, NULL, T_BOOL, FLD(fp16_enabled),
     0, 0, 0, "false", NULL, "float16 mixed precision with loss scaling"},
    {"fp16.loss_scale", NULL, NULL, NULL, T_DOUBLE, FLD(fp16_loss_scale),
     0, 0, KF_NO_HI, "0", NULL, "static loss scale; 0 = dynamic"},
    {"fp16.initial_scale_power", NULL, NULL, NULL, T_INT, FLD(fp16_initial_scale_power),
     0, 64, 0, "16", NULL, "dynamic loss scale starts at 2^this"},
    {"fp16.loss_scale_window", NULL, NULL, NULL, T_INT, FLD(fp16_loss_scale_window),
     1, 0, KF_NO_HI, "1000", NULL, "overflow-free steps before the scale grows"},
    {"fp16.hysteresis", NULL, NULL, NULL, T_INT, FLD(fp16_hysteresis),
     1, 0, KF_NO_HI, "2", NULL, "overflows tolerated before the scale shrinks"},
    {"fp16.min_loss_scale", NULL, NULL, NULL, T_DOUBLE, FLD(fp16_min_loss_scale),
     0, 0, KF_LO_OPEN | KF_NO_HI, "1", NULL, "lower bound of the dynamic loss scale"},
    {"ztrain.matmul_precision", "matmul-precision", NULL, NULL, T_ENUM, FLD(matmul_precision),
     0, 0, 0, "auto", "auto|fp32|bf16",
     "operands of the matmuls and attention products: bf16 rounds them to bfloat16 (fp32 "
     "accumulation and outputs; on cuda attention runs on tensor cores), fp32 keeps them; auto "
     "= bf16 when bf16.enabled on the cuda backend, else fp32"},
    {"communication_data_type", "comm-dtype", NULL, NULL, T_ENUM, FLD(comm_dtype),
     0, 0, 0, "fp32", "fp32|bf16|fp16",
     "element type of gradient reductions (all-reduce, reduce-scatter); sums accumulate in "
     "fp32 per element either way. fp32 in every precision mode unless set: bf16/fp16 halve "
     "the reduction bytes but round every partial sum"},

    /* ---- optimizer */
    {"optimizer.type", NULL, NULL, NULL, T_ENUM, FLD(optimizer_type),
     0, 0, 0, "AdamW", "AdamW|Adam",
     "optimizer (case-insensitive); Adam is DeepSpeed's Adam, AdamW with adam_w_mode=true"},
    {"optimizer.params.adam_w_mode", NULL, NULL, NULL, T_BOOL, FLD(adam_w_mode),
     0, 0, 0, "true", NULL,
     "Adam: decoupled weight decay (AdamW); false (L2 regularization) is not implemented"},
    {"optimizer.params.lr", "lr", NULL, "scheduler.params.warmup_max_lr", T_DOUBLE, FLD(lr),
     0, 0, KF_LO_OPEN | KF_NO_HI, "3e-4", NULL, "peak learning rate"},
    {"optimizer.params.betas", NULL, NULL, NULL, T_PAIR, offsetof(struct zt_config, beta1),
     2 * sizeof(double), 0, 1, KF_HI_OPEN, "[0.9, 0.95]", NULL,
     "AdamW beta1, beta2"},
    {"optimizer.params.eps", NULL, NULL, NULL, T_DOUBLE, FLD(eps),
     0, 0, KF_LO_OPEN | KF_NO_HI, "1e-8", NULL, "AdamW epsilon"},
    {"optimizer.params.weight_decay", "weight-decay", NULL, NULL, T_DOUBLE, FLD(weight_decay),
     0, 0, KF_NO_HI, "0.1", NULL, "decoupled weight decay (matrices only)"},

    /* ---- scheduler */
    {"scheduler.type", NULL, NULL, NULL, T_ENUM, FLD(scheduler_type),
     0, 0, 0, "WarmupCosineLR", "WarmupCosineLR|WarmupLR|WarmupDecayLR|none",
     "learning-rate schedule: WarmupCosineLR; DeepSpeed's WarmupLR (warmup, then constant) and "
     "WarmupDecayLR (warmup, then linear decay to warmup_min_lr at total_num_steps); none = "
     "constant lr. WarmupLR/WarmupDecayLR: warmup_max_lr is optimizer.params.lr"},
    {"scheduler.params.warmup_min_lr", NULL, NULL, NULL, T_DOUBLE, FLD(warmup_min_lr),
     0, 0, KF_NO_HI, "0", NULL, "WarmupLR, WarmupDecayLR: learning rate at step 0"},
    {"scheduler.params.warmup_num_steps", "warmup", NULL, NULL, T_INT, FLD(warmup_steps),
     0, 0, KF_NO_HI, "0", NULL, "warmup steps"},
    {"scheduler.params.total_num_steps", NULL, NULL, NULL, T_INT, FLD(total_steps),
     0, 0, KF_NO_HI, "0", NULL, "schedule length; 0 = ztrain.steps"},
    {"scheduler.params.warmup_min_ratio", NULL, NULL, NULL, T_DOUBLE, FLD(warmup_min_ratio),
     0, 1, 0, "0.0", NULL, "warmup starts at lr * this"},
    {"scheduler.params.cos_min_ratio", NULL, NULL, NULL, T_DOUBLE, FLD(cos_min_ratio),
     0, 1, 0, "0.1", NULL, "cosine decay ends at lr * this"},
    {"scheduler.params.warmup_type", NULL, NULL, NULL, T_ENUM, FLD(warmup_type),
     0, 0, 0, "linear", "linear|log", "warmup curve"},

    /* ---- model */
    {"ztrain.model.n_layer", "n-layer", NULL, NULL, T_INT, FLD(model.n_layer),
     1, 4096, 0, "4", NULL, "transformer blocks"},
    {"ztrain.model.n_head", "n-head", NULL, NULL, T_INT, FLD(model.n_head),
     1, 4096, 0, "4", NULL, "attention heads (must divide n_embd)"},
    {"ztrain.model.n_embd", "n-embd", NULL, NULL, T_INT, FLD(model.n_embd),
     1, 65536, 0, "128", NULL, "embedding width"},
    {"ztrain.model.context", "context", NULL, NULL, T_INT, FLD(model.context),
     1, 1048576, 0, "128", NULL,
     "the model's maximum positions (GPT-2: rows of the position table; Llama: "
     "max_position_embeddings); the training length is ztrain.seq_len"},
    {"ztrain.model.vocab", "vocab", NULL, NULL, T_INT, FLD(model.vocab),
     2, 1048576, 0, "256", NULL, "vocabulary size"},
    {"ztrain.model.arch", "arch", NULL, NULL, T_ENUM, FLD(model.arch),
     0, 0, 0, "gpt2", "gpt2|llama",
     "architecture: gpt2 (learned positions, LayerNorm, GELU, tied head) or llama (RMSNorm, "
     "rotary positions, SwiGLU, grouped-query attention: Llama, Mistral, Qwen2, SmolLM)"},
    {"ztrain.model.n_kv_head", "n-kv-head", NULL, NULL, T_INT, FLD(model.n_kv_head),
     0, 4096, 0, "0", NULL,
     "llama: key/value heads (grouped-query attention; must divide n_head; 1 = multi-query); "
     "0 = n_head"},
    {"ztrain.model.head_dim", "head-dim", NULL, NULL, T_INT, FLD(model.head_dim),
     0, 65536, 0, "0", NULL, "llama: width of one attention head (even); 0 = n_embd / n_head"},
    {"ztrain.model.intermediate_size", "intermediate-size", NULL, NULL, T_INT,
     FLD(model.intermediate), 0, 1048576, 0, "0", NULL,
     "llama: SwiGLU MLP width; 0 = 4 * n_embd"},
    {"ztrain.model.rms_norm_eps", "rms-norm-eps", NULL, NULL, T_DOUBLE, FLD(model.norm_eps),
     0, 1, KF_LO_OPEN, "1e-5", NULL, "llama: RMSNorm epsilon"},
    {"ztrain.model.rope_theta", "rope-theta", NULL, NULL, T_DOUBLE, FLD(model.rope_theta),
     0, 0, KF_LO_OPEN | KF_NO_HI, "10000", NULL, "llama: rotary embedding base"},
    {"ztrain.model.rope_scaling", "rope-scaling", NULL, NULL, T_ENUM, FLD(model.rope_scaling),
     0, 0, 0, "none", "none|llama3|linear|dynamic|yarn|longrope",
     "llama: rotary frequency scaling, as transformers' rope_type (llama3: Llama 3.1's "
     "wavelength-dependent scaling; linear: frequencies / factor; dynamic: NTK-aware, which "
     "equals none while the training length stays within the context; yarn; longrope: Phi-3's "
     "per-dimension short/long factors)"},
    {"ztrain.model.rope_factor", NULL, NULL, NULL, T_DOUBLE, FLD(model.rope_factor),
     1, 0, KF_NO_HI, "8", NULL, "llama3, linear, dynamic, yarn and longrope rope scaling: factor"},
    {"ztrain.model.rope_low_freq_factor", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.rope_low_freq_factor), 0, 0, KF_LO_OPEN | KF_NO_HI, "1", NULL,
     "llama3 rope scaling: low_freq_factor"},
    {"ztrain.model.rope_high_freq_factor", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.rope_high_freq_factor), 0, 0, KF_LO_OPEN | KF_NO_HI, "4", NULL,
     "llama3 rope scaling: high_freq_factor (> low_freq_factor)"},
    {"ztrain.model.rope_original_max_positions", NULL, NULL, NULL, T_INT,
     FLD(model.rope_original_max), 1, 0, KF_NO_HI, "8192", NULL,
     "llama3, yarn and longrope rope scaling: original_max_position_embeddings"},
    {"ztrain.model.rope_attention_factor", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.rope_attention_factor), 0, 0, KF_NO_HI, "0", NULL,
     "yarn and longrope rope scaling: attention_factor (cos and sin scaled by it); 0 = yarn: "
     "0.1 ln(factor) + 1, longrope: sqrt(1 + ln(factor) / ln(original)) (1 at factor <= 1)"},
    {"ztrain.model.rope_beta_fast", NULL, NULL, NULL, T_DOUBLE, FLD(model.rope_beta_fast),
     0, 0, KF_LO_OPEN | KF_NO_HI, "32", NULL, "yarn rope scaling: beta_fast"},
    {"ztrain.model.rope_beta_slow", NULL, NULL, NULL, T_DOUBLE, FLD(model.rope_beta_slow),
     0, 0, KF_LO_OPEN | KF_NO_HI, "1", NULL, "yarn rope scaling: beta_slow"},
    {"ztrain.model.rope_truncate", NULL, NULL, NULL, T_BOOL, FLD(model.rope_truncate), 0, 0, 0,
     "true", NULL, "yarn rope scaling: truncate (round the correction range to whole dimensions)"},
    {"ztrain.model.rope_short_factor", NULL, NULL, NULL, T_STRING, FLD(model.rope_short_factor),
     0, 0, 0, "", NULL, "longrope rope scaling: short_factor, head_dim / 2 comma-separated numbers "
     "(used while the sequence length <= original_max_position_embeddings)"},
    {"ztrain.model.rope_long_factor", NULL, NULL, NULL, T_STRING, FLD(model.rope_long_factor),
     0, 0, 0, "", NULL, "longrope rope scaling: long_factor, head_dim / 2 comma-separated numbers "
     "(used past original_max_position_embeddings)"},
    {"ztrain.model.attention_bias", "attention-bias", NULL, NULL, T_BOOL,
     FLD(model.attention_bias), 0, 0, 0, "false", NULL, "llama: q/k/v projections have biases (Qwen2)"},
    {"ztrain.model.qk_norm", "qk-norm", NULL, NULL, T_BOOL, FLD(model.qk_norm), 0, 0, 0,
     "false", NULL, "llama: per-head RMSNorm of the queries and keys before the rotation (Qwen3)"},
    {"ztrain.model.n_experts", NULL, NULL, NULL, T_INT, FLD(model.n_experts), 0, 1 << 16, 0, "0",
     NULL, "llama: Mixture of Experts (docs/moe.md): experts in every block's MLP (Mixtral's "
     "num_local_experts, Qwen-MoE's num_experts); 0 = a dense MLP"},
    {"ztrain.model.experts_per_token", NULL, NULL, NULL, T_INT, FLD(model.experts_per_token), 0,
     1 << 16, 0, "0", NULL, "llama MoE: experts each token is routed to (num_experts_per_tok, top-k)"},
    {"ztrain.model.moe_intermediate_size", NULL, NULL, NULL, T_INT, FLD(model.moe_intermediate),
     0, 0, KF_NO_HI, "0", NULL, "llama MoE: an expert's SwiGLU width (Qwen-MoE's "
     "moe_intermediate_size, Mixtral's intermediate_size)"},
    {"ztrain.model.moe_norm_topk", NULL, NULL, NULL, T_BOOL, FLD(model.moe_norm_topk), 0, 0, 0,
     "true", NULL, "llama MoE: the top-k routing weights divided by their sum (Mixtral always; "
     "Qwen-MoE's norm_topk_prob)"},
    {"ztrain.model.shared_expert_size", NULL, NULL, NULL, T_INT, FLD(model.shared_expert), 0, 0,
     KF_NO_HI, "0", NULL, "llama MoE: width of a shared expert every token goes through, "
     "scaled by sigmoid(shared_expert_gate) (Qwen2-MoE's shared_expert_intermediate_size); 0 = none"},
    {"ztrain.model.decoder_sparse_step", NULL, NULL, NULL, T_INT, FLD(model.decoder_sparse_step),
     1, 0, KF_NO_HI, "1", NULL, "llama MoE: block l has experts only when (l + 1) is a multiple "
     "of this (Qwen-MoE's decoder_sparse_step); the others a dense MLP of width intermediate_size"},
    {"ztrain.model.mlp_only_layers", NULL, NULL, NULL, T_STRING, FLD(model.mlp_only_layers),
     0, 0, 0, "", NULL, "llama MoE: comma-separated blocks (from 0) whose MLP is dense, width "
     "intermediate_size, with no experts (Qwen-MoE's mlp_only_layers); \"\" = none"},
    {"ztrain.model.router_aux_loss_coef", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.router_aux_loss_coef), 0, 0, KF_NO_HI, "0", NULL,
     "llama MoE: the routers' load-balancing loss (transformers' load_balancing_loss_func) "
     "times this is added to the training objective (config.json's router_aux_loss_coef with "
     "output_router_logits true); 0 = computed and logged (aux_loss), not trained on"},
    {"ztrain.model.qk_norm_full", NULL, NULL, NULL, T_BOOL, FLD(model.qk_norm_full), 0, 0, 0,
     "false", NULL, "llama: with qk_norm, one RMSNorm over the whole q and k projections "
     "(weights [n_head head_dim] and [n_kv_head head_dim]) instead of each head (OLMoE)"},
    {"ztrain.model.gemma", "gemma", NULL, NULL, T_INT, FLD(model.gemma), 0, 3, 0, "0", NULL,
     "llama: Gemma 2 or 3 blocks (2 | 3; 0 = none): RMSNorm weights applied as 1 + w, norms "
     "after attention and after the MLP too, GeGLU MLP (tanh GELU), embeddings scaled by "
     "sqrt(n_embd)"},
    {"ztrain.model.query_pre_attn_scalar", NULL, NULL, NULL, T_DOUBLE,
     FLD(model.query_pre_attn_scalar), 0, 0, KF_NO_HI, "0", NULL,
     "gemma: attention scores scaled by query_pre_attn_scalar^-0.5; 0 = head_dim"},
    {"ztrain.model.attn_softcap", NULL, NULL, NULL, T_DOUBLE, FLD(model.attn_softcap), 0, 0,
     KF_NO_HI, "0", NULL, "gemma: attention logit soft-capping cap * tanh(x / cap); 0 = none"},
    {"ztrain.model.final_softcap", NULL, NULL, NULL, T_DOUBLE, FLD(model.final_softcap), 0, 0,
     KF_NO_HI, "0", NULL, "gemma: final logit soft-capping cap * tanh(x / cap); 0 = none"},
    {"ztrain.model.sliding_window", NULL, NULL, NULL, T_INT, FLD(model.sliding_window), 0, 0,
     KF_NO_HI, "0", NULL, "llama: sliding-window attention width of the sliding layers "
     "(query t sees keys t - window < u <= t; Gemma 2/3, Mistral, Phi-3, Qwen2/3); 0 = none"},
    {"ztrain.model.sliding_pattern", NULL, NULL, NULL, T_INT, FLD(model.sliding_pattern), 0, 0,
     KF_NO_HI, "0", NULL, "gemma: with P > 0, layer l (from 0) is full attention when (l + 1) % P "
     "== 0 and the others slide (Gemma 2: 2, Gemma 3: 6); 0 = every layer slides"},
    {"ztrain.model.sliding_from", NULL, NULL, NULL, T_INT, FLD(model.sliding_from), 0, 0,
     KF_NO_HI, "0", NULL, "llama: with a window, layers l < it are full attention and the "
     "later ones slide (Qwen2/3's max_window_layers); 0 = from the first layer"},
    {"ztrain.model.rope_local_theta", NULL, NULL, NULL, T_DOUBLE, FLD(model.rope_local_theta),
     0, 0, KF_NO_HI, "0", NULL, "gemma: rotary base of the sliding layers, without rope "
     "scaling (Gemma 3's rope_local_base_freq); 0 = the full layers' rotary embedding"},
    {"ztrain.model.pad_token_id", NULL, NULL, NULL, T_INT, FLD(model.pad_token_id), -1, 0,
     KF_NO_HI, "-1", NULL, "llama: the padding token (transformers' nn.Embedding padding_idx, "
     "from config.json's pad_token_id): positions whose input is this token add nothing to the "
     "embedding lookup's gradient (a tied LM head's gradient on the row still flows); must be "
     "below ztrain.model.vocab; -1 = none"},
    {"ztrain.model.tie_embeddings", "tie-embeddings", NULL, NULL, T_BOOL,
     FLD(model.tie_embeddings), 0, 0, 0, "true", NULL,
     "the LM head is the token embedding (gpt2: always)"},
    {"ztrain.model.hf_architecture", "hf-architecture", NULL, NULL, T_STRING,
     FLD(model.hf_architecture), 0, 0, 0, "", NULL,
     "the Hugging Face class the model exports as (set by --init-from); \"\" = the "
     "architecture's default (llama: Qwen3ForCausalLM with qk_norm, Qwen2ForCausalLM with attention_bias, else LlamaForCausalLM)"},

    /* ---- LoRA (docs/lora.md) */
    {"ztrain.lora.r", "lora-r", NULL, NULL, T_INT, FLD(model.lora_r),
     0, 65536, 0, "0", NULL,
     "LoRA adapter rank: train low-rank adapters on a frozen base instead of every weight; "
     "0 = off (full fine-tuning)"},
    {"ztrain.lora.alpha", "lora-alpha", NULL, NULL, T_DOUBLE, FLD(model.lora_alpha),
     0, 0, KF_LO_OPEN | KF_NO_HI, "8", NULL,
     "LoRA scale numerator: the adapter output is scaled by alpha / r (PEFT's lora_alpha)"},
    {"ztrain.lora.dropout", "lora-dropout", NULL, NULL, T_DOUBLE, FLD(model.lora_dropout),
     0, 1, KF_HI_OPEN, "0", NULL, "LoRA dropout on the adapter input (PEFT's lora_dropout): inverted, one mask per "
     "module, training passes only; the mask is a function of the seed, step, sample, block and module"},
    {"ztrain.lora.targets", "lora-targets", NULL, NULL, T_STRING, FLD(model.lora_targets),
     0, 0, 0, "", NULL,
     "modules that get adapters, PEFT's names (llama: q_proj,k_proj,v_proj,o_proj,gate_proj,"
     "up_proj,down_proj; gpt2: c_attn,c_proj,c_fc) comma-separated, or all-linear; \"\" = "
     "PEFT's default (llama: q_proj,v_proj; gpt2: c_attn)"},
    {"ztrain.lora.from", "lora-from", NULL, NULL, T_STRING, FLD(model.lora_from),
     0, 0, 0, "", NULL,
     "a PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) the "
     "adapters start from, on top of ztrain.init_from; its r, alpha, targets and base must be "
     "the run's; \"\" = a fresh start (A random, B zero)"},
    {"ztrain.lora.base", "lora-base", NULL, NULL, T_STRING, FLD(model.lora_base),
     0, 0, 0, "", NULL,
     "storage of the frozen base's decoder linear weights (llama: q,k,v,o,gate,up,down): \"\" = "
     "the compute dtype; nf4 = QLoRA's 4-bit NormalFloat codes + an fp32 absmax per 64 "
     "(bitsandbytes' quantize_4bit), dequantized per unit for the matmuls; nf4-dq = with the "
     "absmax double-quantized (bitsandbytes' compress_statistics)"},
    {"ztrain.lora.rslora", "lora-rslora", NULL, NULL, T_BOOL, FLD(model.lora_rslora),
     0, 0, 0, "false", NULL, "rank-stabilized LoRA: scale alpha / sqrt(r) (PEFT's use_rslora)"},

    {"ztrain.seq_len", "seq-len", NULL, NULL, T_INT, FLD(seq_len),
     0, 1048576, 0, "0", NULL,
     "tokens per training and evaluation sample; 0 = ztrain.model.context (at most that)"},
    {"ztrain.init_from", "init-from", NULL, NULL, T_STRING, FLD(init_from),
     0, 0, 0, "", NULL,
     "a Hugging Face model directory (config.json + safetensors): its config.json sets "
     "ztrain.model.* and its weights start the run; \"\" = random initialization"},
    {"ztrain.init_from_files", NULL, NULL, NULL, T_STRING, FLD(init_from_files),
     0, 0, 0, "", NULL,
     "recorded by ztrain train, not set by hand (a value given is replaced): the FNV-1a 64 "
     "fingerprints of the config.json and tokenizer files of ztrain.init_from when the run "
     "started, which ztrain ckpt export --hf checks before copying them"},

    /* ---- data */
    {"ztrain.data.train", "train", NULL, NULL, T_STRING, FLD(data_train),
     0, 0, 0, "data/tinyshakespeare_train.bin", NULL, "training token shards (file or glob)"},
    {"ztrain.data.val", "val", NULL, NULL, T_STRING, FLD(data_val),
     0, 0, 0, "data/tinyshakespeare_val.bin", NULL, "validation token shards; \"\" = no eval"},
    {"ztrain.data.dataloaders", "dataloaders", ZTRAIN_ENV_DATALOADERS, NULL, T_INT,
     FLD(dataloaders), 0, ZTRAIN_DATALOADERS_MAX, 0, "0", NULL,
     "data-loader threads per rank; 0 = auto"},

    /* ---- run */
    {"ztrain.steps", "steps", NULL, NULL, T_LONG, FLD(steps),
     1, 0, KF_NO_HI, "1000", NULL, "optimizer steps to train"},
    {"ztrain.seed", "seed", NULL, NULL, T_U64, FLD(seed),
     0, 0, 0, "1337", NULL, "seed of initialization and data order"},
    {"ztrain.eval_every", "eval-every", NULL, NULL, T_INT, FLD(eval_every),
     0, 0, KF_NO_HI, "100", NULL, "evaluate every N steps; 0 = only at the end"},
    {"ztrain.eval_batch_size", "eval-batch-size", NULL, NULL, T_INT, FLD(eval_batch_size),
     0, 0, KF_NO_HI, "0", NULL, "samples per eval batch, all ranks together; 0 = train_batch_size"},
    {"ztrain.eval_batches", "eval-batches", NULL, NULL, T_INT, FLD(eval_batches),
     1, 0, KF_NO_HI, "8", NULL, "batches per evaluation"},
    {"ztrain.log_every", "log-every", NULL, "steps_per_print", T_INT, FLD(log_every),
     1, 0, KF_NO_HI, "10", NULL, "log every N steps (DeepSpeed: steps_per_print)"},
    {"ztrain.metrics", "metrics", NULL, NULL, T_STRING, FLD(metrics),
     0, 0, 0, "", NULL, "JSONL metrics file written by rank 0; \"\" = none"},
    {"ztrain.tensorboard.dir", "tensorboard", NULL, NULL, T_STRING, FLD(tensorboard_dir),
     0, 0, 0, "", NULL, "TensorBoard event files written there by rank 0; \"\" = none"},
    {"ztrain.threads", "threads", NULL, NULL, T_INT, FLD(threads),
     0, 1024, 0, "0", NULL, "OpenMP threads per rank; 0 = auto"},
    {"ztrain.comm_timeout_s", "comm-timeout", NULL, NULL, T_DOUBLE, FLD(comm_timeout_s),
     0, 0, KF_NO_HI, "300", NULL,
     "a collective waiting longer than this many seconds fails with the operation, "
     "step and unit (a rank died or hangs); 0 = wait forever"},
    {"ztrain.peak_tflops", "peak-tflops", NULL, NULL, T_DOUBLE, FLD(peak_tflops),
     0, 0, KF_NO_HI, "0", NULL,
     "one device's dense peak in TFLOP/s at the run's matmul precision, for the MFU of the progress "
     "line and the metrics; 0 = a known GPU's, by its name (none on the CPU: TFLOP/s alone)"},
    {"ztrain.backend", "backend", NULL, NULL, T_ENUM, FLD(backend),
     0, 0, 0, "cpu", "cpu|cuda|cpu-strict",
     "compute backend (cpu-strict: the cpu kernels on memory the host cannot touch, for "
     "debugging the engine's device discipline)"},
    {"ztrain.comm_backend", "comm-backend", NULL, NULL, T_ENUM, FLD(comm_backend),
     0, 0, 0, "auto", "auto|mpi|nccl",
     "collectives on device buffers: mpi = host-staged MPI, nccl = NCCL (cuda, one rank per "
     "GPU), auto = nccl when built with it and every rank of a node has its own GPU, else mpi"},

    /* ---- checkpoints */
    {"ztrain.checkpoint.dir", "ckpt-dir", ZTRAIN_ENV_CKPT_DIR, NULL, T_STRING, FLD(ckpt_dir),
     0, 0, KF_NONEMPTY, "checkpoints", NULL, "checkpoint directory"},
    {"ztrain.checkpoint.every", "ckpt-every", ZTRAIN_ENV_CKPT_EVERY, NULL, T_INT,
     FLD(ckpt_every), 0, 0, KF_NO_HI, "0", NULL, "checkpoint every N steps; 0 = off"},
    {"ztrain.checkpoint.keep", "ckpt-keep", NULL, NULL, T_INT, FLD(ckpt_keep),
     2, 0, KF_NO_HI, "2", NULL, "checkpoints kept on disk"},
    {"ztrain.checkpoint.resume", "resume", ZTRAIN_ENV_RESUME, NULL, T_STRING, FLD(ckpt_resume),
     0, 0, KF_NONEMPTY, "auto", NULL,
     "auto (newest verifying checkpoint in checkpoint.dir) | never | PATH of a checkpoint"},
    {"ztrain.checkpoint.every_minutes", "ckpt-every-minutes", NULL, NULL, T_DOUBLE,
     FLD(ckpt_every_minutes), 0, 0, KF_NO_HI, "0", NULL,
     "also checkpoint when this many minutes passed since the last save; 0 = off"},
    {"ztrain.checkpoint.restore", "ckpt-restore", NULL, NULL, T_ENUM, FLD(ckpt_restore),
     0, 0, 0, "one-reader", "one-reader|parallel",
     "restore: rank 0 reads and sends each slice (one-reader) or every rank reads its own (parallel)"},
    {"ztrain.checkpoint.on_failure", "ckpt-on-failure", NULL, NULL, T_ENUM, FLD(ckpt_on_failure),
     0, 0, 0, "stop", "stop|continue",
     "a save that fails on any rank is abandoned everywhere (the previous checkpoint stays latest); "
     "then stop (exit 1) or continue training and retry at the next save, with a warning"},
    {"ztrain.checkpoint.lock", "ckpt-lock", NULL, NULL, T_ENUM, FLD(ckpt_lock),
     0, 0, 0, "on", "on|break|off",
     "one run per checkpoint.dir: rank 0 holds a lock on checkpoint.dir/.ztrain.lock for the "
     "run's life and a second run on the directory is refused naming the first; break = take "
     "the directory over from a run that holds it (one run, when that run is gone but its "
     "lock stays); off = no lock"},
    {"ztrain.checkpoint.final", "ckpt-final", NULL, NULL, T_BOOL, FLD(ckpt_final), 0, 0, 0,
     "true", NULL,
     "save a checkpoint after the last step (and, without --save, the weights file beside it); "
     "false = no save at the end (benchmarks: nothing big written; checkpoint.every still saves)"},
    {"ztrain.checkpoint.async", "ckpt-async", NULL, NULL, T_BOOL, FLD(ckpt_async), 0, 0, 0,
     "true", NULL,
     "periodic and timed saves: snapshot the state to host memory, keep training, write the "
     "checkpoint in a background thread (same file and commit; the final and preemption saves "
     "stay synchronous); false = synchronous saves.  Left at the default, a snapshot that "
     "does not fit the memory limit falls back to synchronous saves"},
    {"ztrain.preempt_signal", "preempt-signal", NULL, NULL, T_ENUM, FLD(preempt_signal),
     0, 0, 0, "SIGUSR2", "SIGUSR2|SIGTERM|SIGINT|SIGHUP",
     "signal that makes every rank checkpoint and stop at the next step (SIGTERM always does; "
     "SIGUSR1 is refused: NCCL uses it)"},
    {"ztrain.requeue", "requeue", NULL, NULL, T_ENUM, FLD(requeue),
     0, 0, 0, "auto", "auto|true|false",
     "after a preemption checkpoint under Slurm rank 0 runs scontrol requeue: auto = when the "
     "job is requeueable (Requeue=1)"},

    /* ---- memory planner (docs/memory.md) */
    {"activation_checkpointing.policy", "activation-checkpointing act-ckpt", ZTRAIN_ENV_ACT_CKPT,
     NULL, T_STRING, FLD(act_ckpt), 0, 0, KF_ACKPT, "none", NULL,
     "keep only block inputs and recompute blocks in backward: none | blocks | blocks-attn "
     "| every-K (blocks-attn: blocks keeping each block's attention output and softmax "
     "statistics, the recompute skipping the attention; every-K: keep the input of every "
     "K-th block, recompute groups of K blocks)"},
    {"ztrain.classifier_chunk_rows", "classifier-chunk-rows", NULL, NULL, T_INT,
     FLD(model.classifier_rows), 0, 0, KF_NO_HI, "0", NULL,
     "rows of each chunk of the LM head + loss (logits, loss and their gradient chunk by "
     "chunk; never all positions' logits at once); 0 = auto (chunks of at most 256 MiB of "
     "fp32 logits; of 256 MiB of bf16 logits, twice the rows, where a training block keeps "
     "them in bf16 and the head is trained: full fine-tuning, not LoRA); a value >= "
     "micro-batch x seq_len: one chunk"},
    {"ztrain.memory_limit", "memory-limit", NULL, NULL, T_U64,
     FLD(memory_limit), 0, 0, KF_SIZE, "0", NULL,
     "memory one rank may use (bytes; K/M/G/T suffixes are binary: 8G = 8 GiB); the "
     "pre-flight check refuses a run predicted to exceed it; 0 or auto = available memory / "
     "ranks per node (CPU), free device memory (GPU)"},
    {"ztrain.strict_device_memory", "strict-device-memory", NULL, NULL, T_U64,
     FLD(strict_device_memory), 0, 0, KF_SIZE, "0", NULL,
     "backend cpu-strict only: emulate a device of this capacity per rank (bytes; K/M/G/T "
     "binary): allocations beyond it fail and the pre-flight check sees it as free device "
     "memory; 0 = none"},
    {"ztrain.force", "force", NULL, NULL, T_BOOL, FLD(force), 0, 0, 0, "false", NULL,
     "start even when the pre-flight check predicts that the run does not fit"},
    {"ztrain.memory_report", "memory-report", NULL, NULL, T_STRING, FLD(memory_report),
     0, 0, KF_REPORT, "off", NULL,
     "current/peak/predicted memory per category: off | end (at the end) | N (every N steps, "
     "after each evaluation and at the end); --memory-report alone = end"},

    /* ---- pseudo-keys (not printed; they set the keys named in `help`) */
    {"precision", "precision", NULL, NULL, T_PSEUDO, NOFLD, 0, 0, 0, NULL, "fp32|bf16|fp16",
     "sets bf16.enabled and fp16.enabled"},
    {"offload", "offload", NULL, NULL, T_PSEUDO, NOFLD, 0, 0, 0, NULL, "none|optimizer|params",
     "sets zero_optimization.offload_{optimizer,param}.device (params implies both)"},
};

const int zt_cfg_nkeys = (int)(sizeof zt_cfg_keys / sizeof zt_cfg_keys[0]);

/* Environment variables that are not configuration keys but are allowed. */
static const char *const env_informational[] = {
    ZTRAIN_ENV_GPU_BIND, ZTRAIN_ENV_RESTART_COUNT, ZTRAIN_ENV_SLURM_RANK,
    ZTRAIN_ENV_SLURM_LOCAL, ZTRAIN_ENV_PLUGIN, ZTRAIN_ENV_SITE_LIMITS,
#ifdef ZTRAIN_ENV_OMP_AUTO
    ZTRAIN_ENV_OMP_AUTO,
#endif
    "ZTRAIN_CONFIG",   /* config-file path read by the CLI */
    "ZTRAIN_PROGRESS", "ZTRAIN_PROGRESS_INTERVAL",   /* the CLI's progress lines */
    "ZTRAIN_CRASH_REPORT",   /* the CLI's fatal-signal report */
};

/* ================================================================ lookups */

int zt_cfg_key_index(const char *key) {
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(zt_cfg_keys[i].key, key) == 0) return i;
    return -1;
}

/* Flag aliases compare with '-' and '_' interchangeable. */
static int alias_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char ca = *a == '_' ? '-' : *a, cb = *b == '_' ? '-' : *b;
        if (ca != cb) return 0;
    }
    return *a == *b;
}

static int has_alias(const char *list, const char *name) {
    if (!list) return 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char buf[64];
        if (n < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            if (alias_eq(buf, name)) return 1;
        }
        p += n;
        while (*p == ' ') p++;
    }
    return 0;
}

/* A key path, a flag alias (with or without leading "--") or a JSON alias. */
int zt_cfg_lookup(const char *name) {
    if (!name) return -1;
    while (*name == '-') name++;
    int i = zt_cfg_key_index(name);
    if (i >= 0) return i;
    for (i = 0; i < NKEYS; i++)
        if (has_alias(zt_cfg_keys[i].flags, name) ||
            (zt_cfg_keys[i].json_alias && strcmp(zt_cfg_keys[i].json_alias, name) == 0))
            return i;
    return -1;
}

/* Generic environment name: ZTRAIN_ + path upper-cased, '.' -> '_',
 * leading "ztrain." dropped. */
void zt_cfg_env_generic(const char *key, char *buf, size_t n) {
    if (strncmp(key, "ztrain.", 7) == 0) key += 7;
    size_t j = 0;
    const char *pre = "ZTRAIN_";
    for (; *pre && j + 1 < n; pre++) buf[j++] = *pre;
    for (; *key && j + 1 < n; key++)
        buf[j++] = *key == '.' ? '_' : (char)toupper((unsigned char)*key);
    buf[j] = '\0';
}

/* Optimal-string-alignment distance (Levenshtein + adjacent transposition),
 * three rolling rows. */
static int edit_distance(const char *a, const char *b) {
    enum { MAXL = 200 };
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAXL || lb > MAXL) return 1000;
    int r0[MAXL + 1], r1[MAXL + 1], r2[MAXL + 1];   /* rows i-2, i-1, i */
    int *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= lb; j++) p[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        c[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = p[j] + 1;
            if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
            if (p[j - 1] + cost < v) v = p[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
        }
        int *t = pp; pp = p; p = c; c = t;
    }
    return p[lb];
}

static int close_enough(const char *name, int dist) {
    int len = (int)strlen(name);
    int lim = len / 3;
    if (lim < 1) lim = 1;
    if (lim > 3) lim = 3;
    return dist <= lim;
}

static const char *last_component(const char *path) {
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

/* Best known key path for an unknown one (NULL if none is close).  Also
 * matches a known key whose last component equals the unknown's, so
 * "ztrain.n_layer" suggests "ztrain.model.n_layer". */
const char *zt_cfg_suggest_key(const char *name, int with_aliases) {
    const char *best = NULL;
    int bestd = 1000;
    for (int i = 0; i < NKEYS; i++) {
        const char *cands[2] = {zt_cfg_keys[i].key, zt_cfg_keys[i].json_alias};
        for (int c = 0; c < 2; c++) {
            if (!cands[c]) continue;
            int d = edit_distance(name, cands[c]);
            if (d < bestd) { bestd = d; best = cands[c]; }
        }
        if (with_aliases && zt_cfg_keys[i].flags) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", zt_cfg_keys[i].flags);
            for (char *save = NULL, *t = strtok_r(buf, " ", &save); t;
                 t = strtok_r(NULL, " ", &save)) {
                int d = edit_distance(name, t);
                if (d < bestd) { bestd = d; best = zt_cfg_keys[i].key; }
            }
        }
    }
    if (best && bestd > 0 && close_enough(name, bestd)) return best;
    const char *leaf = last_component(name);
    if (leaf != name) {
        for (int i = 0; i < NKEYS; i++)
            if (strcmp(last_component(zt_cfg_keys[i].key), leaf) == 0) return zt_cfg_keys[i].key;
    }
    return NULL;
}

int zt_cfg_env_is_known(const char *name) {
    char buf[256];
    for (int i = 0; i < NKEYS; i++) {
        zt_cfg_env_generic(zt_cfg_keys[i].key, buf, sizeof buf);
        if (strcmp(buf, name) == 0) return 1;
        if (zt_cfg_keys[i].env && strcmp(zt_cfg_keys[i].env, name) == 0) return 1;
    }
    for (size_t j = 0; j < sizeof env_informational / sizeof env_informational[0]; j++)
        if (strcmp(env_informational[j], name) == 0) return 1;
    return 0;
}

/* Closest known ZTRAIN_ name into best[n]; returns best or NULL. */
const char *zt_cfg_suggest_env(const char *name, char *best, size_t n) {
    char buf[256];
    int bestd = 1000;
    best[0] = '\0';
    for (int i = 0; i < NKEYS; i++) {
        const char *c[2] = {buf, zt_cfg_keys[i].env};
        zt_cfg_env_generic(zt_cfg_keys[i].key, buf, sizeof buf);
        for (int k = 0; k < 2; k++) {
            if (!c[k]) continue;
            int d = edit_distance(name, c[k]);
            if (d < bestd) { bestd = d; snprintf(best, n, "%s", c[k]); }
        }
    }
    for (size_t j = 0; j < sizeof env_informational / sizeof env_informational[0]; j++) {
        int d = edit_distance(name, env_informational[j]);
        if (d < bestd) { bestd = d; snprintf(best, n, "%s", env_informational[j]); }
    }
    /* the length allowance counts the part after ZTRAIN_ */
    const char *tail = strncmp(name, "ZTRAIN_", 7) == 0 ? name + 7 : name;
    if (bestd > 0 && bestd < 1000 && close_enough(tail, bestd)) return best;
    return NULL;
}

const char *zt_source_name(int src) {
    switch (src) {
    case ZT_SRC_DEFAULT: return "default";
    case ZT_SRC_FILE: return "file";
    case ZT_SRC_ENV: return "env";
    case ZT_SRC_FLAG: return "flag";
    case ZT_SRC_DERIVED: return "derived";
    default: return "unknown";
    }
}
