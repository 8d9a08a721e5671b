#!/usr/bin/env python3
"""make_hf_fixtures.py -- the tiny Hugging Face models and reference numbers
that tests/test_hf_golden.c checks ztrain against.

Run once (the output is committed; CI never needs Python):

    /opt/hfref/bin/python scripts/make_hf_fixtures.py [OUTDIR [NAME...]]

OUTDIR defaults to tests/fixtures/hf next to this script's repository.  For
each model NAME it writes

  NAME/                   save_pretrained output (config.json, safetensors,
                          generation_config.json); llama is sharded, so the
                          model.safetensors.index.json path is covered
  NAME.ref.safetensors    F32 arrays: "logprobs" [B, T, V] (log-softmax of
                          the logits of the fixed batch) and "grad.<HF name>"
                          for every parameter (the gradient of the mean
                          cross-entropy loss, laid out like the HF tensor)
  NAME.ref.json           the batch ("tokens" [B][T+1]: inputs are [:, :T],
                          targets [:, 1:]), "loss", "step_losses" (the losses
                          of 3 torch.optim.AdamW steps on that batch, lr 1e-3,
                          betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the
                          2-D tensors only -- ztrain's ZT_TENSOR_DECAY rule --,
                          no clipping, constant lr), "loss_after" (loss after
                          the third update) and "fp32_error": how far the
                          same computation in fp32 lands from these values;
                          longrope fixtures add "rope": transformers' float32
                          frequencies at original_max_position_embeddings
                          tokens (short_factor) and at one more (long_factor),
                          and the cos/sin scale.

The reference values are computed in float64 (arrays rounded to float32 when
stored; the RoPE tables too, which transformers builds in float32 even in a
float64 model); the computation is then repeated in float32 and the largest
deviations are recorded, so the tolerances of the C test are grounded in
what an fp32 implementation legitimately misses by.  Everything is seeded:
rerunning reproduces the files bit for bit (same torch version, CPU).
"""
import json
import math
import os
import shutil
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                          Phi3Config, Phi3ForCausalLM, Gemma2Config, Gemma2ForCausalLM,
                          Gemma3TextConfig, Gemma3ForCausalLM, MistralConfig,
                          MistralForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM, OlmoeConfig,
                          OlmoeForCausalLM)

B, T = 2, 16
STEPS = 3
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def llama_config():
    # head_dim 8: inv_freq = 1000^(-j/4), wavelengths 2*pi/f = 6.3, 35.3, 199, 1117.
    # llama3 scaling with original_max 48 (< max_position_embeddings 64): wavelength
    # < 48/4 = 12 keeps f (j=0), > 48 divides by 8 (j=2, 3), and j=1 lies in the
    # smooth band -- every branch of the formula changes what the model computes.
    return LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 1000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 48},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen2_config():
    return Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def mistral_config():
    # sliding_window 5 < T = 16 on every layer (keys t - 5 < u <= t); GQA; untied
    return MistralConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen2_swa_config():
    # use_sliding_window with max_window_layers 1 of 2: layer 0 full, layer 1
    # slides with window 4 < T = 16 (transformers' layer_types)
    return Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=True,
        sliding_window=4, max_window_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen3_config():
    # per-head q_norm / k_norm; head_dim given (Qwen3's default is 128, not hidden / heads)
    return Qwen3Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def rope_config(rope):
    """Llama with another rope_type (linear, dynamic, yarn): theta 1000, head_dim 8."""
    def make():
        return LlamaConfig(
            vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False,
            rope_parameters=dict(rope, rope_theta=1000.0),
            bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    return make


def phi3_config():
    # fused qkv_proj [(4 + 2 + 2) * 8, 32] and gate_up_proj [2 * 64, 32]; no sliding window;
    # pad_token_id null (Phi-3's 32000 is outside this vocabulary)
    return Phi3Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        original_max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, sliding_window=None,
        bos_token_id=1, eos_token_id=2, pad_token_id=None, attn_implementation="eager")


def longrope_config():
    # Phi-3 128k's longrope at head_dim 8: original context 8 < T = 16, so the
    # training batch takes long_factor; factor 64 / 8 = 8, cos / sin x sqrt(2)
    return Phi3Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        original_max_position_embeddings=8, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "longrope", "rope_theta": 1000.0,
                         "short_factor": [1.0, 1.25, 1.5, 2.0], "long_factor": [1.0, 2.0, 4.5, 8.25]},
        sliding_window=None, bos_token_id=1, eos_token_id=2, pad_token_id=None,
        attn_implementation="eager")


def pad_config():
    # Qwen2, tied, with pad_token_id 5: token 5 is an input at positions 6 and 9 of
    # sequence 0 and 13 of sequence 1 (seed 1014's batch), so nn.Embedding(padding_idx)
    # keeps those positions out of the lookup's gradient while the tied LM head's
    # gradient on row 5 (a target there) still flows
    return Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, pad_token_id=5, attn_implementation="eager")


def gemma2_config():
    # head_dim 16 (4 heads: attention width 64 against hidden 32); query_pre_attn_scalar
    # 24 (not head_dim); soft-caps 2 and 3, small enough to bend O(1) scores and logits;
    # layer 0 slides with window 5 < T = 16, layer 1 is full; tied.  pad_token_id null (as
    # phi3): nn.Embedding(padding_idx) would keep token 0's row out of the gradient
    return Gemma2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True, query_pre_attn_scalar=24,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, pad_token_id=None, attn_implementation="eager")


def gemma3_config():
    # q/k norms; 3 layers, sliding, sliding, full (pattern 3), window 5; the sliding
    # layers' rotary base 100, the full layer's 10000 with linear scaling 2; MQA;
    # query_pre_attn_scalar 16 = head_dim; untied
    return Gemma3TextConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=False, query_pre_attn_scalar=16,
        sliding_window=5, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}},
        bos_token_id=1, eos_token_id=2, pad_token_id=None, attn_implementation="eager")


def mixtral_config():
    # 4 experts of width 16, top-2 renormalised (softmax, top-k, / sum); GQA; untied
    return MixtralConfig(
        vocab_size=96, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
        num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.02,
        output_router_logits=False, router_jitter_noise=0.0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen2_moe_config():
    # q/k/v biases; 4 experts of width 16, top-2 not renormalised (norm_topk_prob false);
    # a shared expert of width 24 behind its sigmoid gate; every layer sparse
    return Qwen2MoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
        tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=0.02,
        output_router_logits=False, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen3_moe_config():
    # per-head q/k norms, head_dim 8; 4 experts of width 16, top-2 renormalised; tied
    return Qwen3MoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True, num_experts=4,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        router_aux_loss_coef=0.02, output_router_logits=False, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen2_moe_mixed_config():
    # mixed blocks: decoder_sparse_step 2 over 3 layers (block 1 has experts and the
    # shared expert; blocks 0 and 2 a dense MLP of width intermediate_size 40); the
    # load-balancing loss (over block 1's router only) in the objective
    return Qwen2MoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=40, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
        tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=2, mlp_only_layers=[], router_aux_loss_coef=0.05,
        output_router_logits=True, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def qwen3_moe_mixed_config():
    # mixed blocks: mlp_only_layers [0] over 3 layers (block 0 a dense MLP of width
    # intermediate_size 40, blocks 1 and 2 experts); tied
    return Qwen3MoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=40, moe_intermediate_size=16,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True, num_experts=4,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[0],
        router_aux_loss_coef=0.02, output_router_logits=False, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, attn_implementation="eager")


def mixtral_aux_config():
    # mixtral with output_router_logits: the training loss adds router_aux_loss_coef x
    # the load-balancing loss (its gradient reaches the routers)
    c = mixtral_config()
    c.output_router_logits = True
    c.router_aux_loss_coef = 0.05
    return c


def olmoe_config():
    # q/k RMSNorm over the whole projection (not per head); 4 experts, top-2, not renormalised
    return OlmoeConfig(
        vocab_size=96, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=False, clip_qkv=None, router_aux_loss_coef=0.02,
        output_router_logits=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1, eos_token_id=2, pad_token_id=None, attn_implementation="eager")


def gpt2_config():
    return GPT2Config(
        vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=32,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager")


MODELS = [
    # name, model class, config, seed, max_shard_size (None = one file)
    ("llama", LlamaForCausalLM, llama_config, 1001, 40000),
    ("qwen2", Qwen2ForCausalLM, qwen2_config, 1002, None),
    ("gpt2", GPT2LMHeadModel, gpt2_config, 1003, None),
    ("qwen3", Qwen3ForCausalLM, qwen3_config, 1004, None),
    # linear: every frequency / 2; dynamic: equal to the default within the
    # context (transformers rescales only past max_position_embeddings);
    # yarn: with original 48 the correction range is dimensions [0, 2] (j = 0
    # extrapolated, j = 1 half, j >= 2 interpolated), cos / sin x 1.1386
    ("phi3", Phi3ForCausalLM, phi3_config, 1008, None),
    ("rope_linear", LlamaForCausalLM, rope_config({"rope_type": "linear", "factor": 2.0}), 1005, None),
    ("rope_dynamic", LlamaForCausalLM, rope_config({"rope_type": "dynamic", "factor": 4.0}), 1006, None),
    ("rope_yarn", LlamaForCausalLM, rope_config({"rope_type": "yarn", "factor": 4.0,
                                                  "original_max_position_embeddings": 48}), 1007, None),
    ("rope_longrope", Phi3ForCausalLM, longrope_config, 1009, None),
    ("gemma2", Gemma2ForCausalLM, gemma2_config, 1010, None),
    ("gemma3", Gemma3ForCausalLM, gemma3_config, 1011, None),
    ("mistral", MistralForCausalLM, mistral_config, 1012, None),
    ("qwen2_swa", Qwen2ForCausalLM, qwen2_swa_config, 1013, None),
    ("pad", Qwen2ForCausalLM, pad_config, 1014, None),
    # Mixture of Experts (docs/moe.md): the files hold the hub's per-expert
    # tensors (save_pretrained's format); mixtral_packed/ holds the same weights
    # in transformers 5's packed layout (experts.gate_up_proj [E, 2I, H], gate
    # first; experts.down_proj [E, H, I]) -- see write_packed
    ("mixtral", MixtralForCausalLM, mixtral_config, 1015, None),
    ("qwen2_moe", Qwen2MoeForCausalLM, qwen2_moe_config, 1016, None),
    ("qwen3_moe", Qwen3MoeForCausalLM, qwen3_moe_config, 1017, None),
    ("olmoe", OlmoeForCausalLM, olmoe_config, 1018, None),
    ("mixtral_aux", MixtralForCausalLM, mixtral_aux_config, 1019, None),
    # mixed dense and sparse blocks (decoder_sparse_step, mlp_only_layers);
    # qwen2_moe_mixed_packed/ holds its weights in the packed layout
    ("qwen2_moe_mixed", Qwen2MoeForCausalLM, qwen2_moe_mixed_config, 1020, None),
    ("qwen3_moe_mixed", Qwen3MoeForCausalLM, qwen3_moe_mixed_config, 1021, None),
]


def randomize(model, seed):
    """Every parameter random, with a modest scale: norm gains around 1,
    biases and matrices small, so no gradient is structurally zero and the
    logits stay O(1)."""
    g = torch.Generator().manual_seed(seed)
    # fan-in of each matrix: nn.Linear stores [out, in], GPT-2's Conv1D [in, out]
    conv1d = {mn + ".weight" for mn, m in model.named_modules() if type(m).__name__ == "Conv1D"}
    gemma = model.config.model_type.startswith("gemma")   # norms apply 1 + w
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if p.ndim == 1 and ("norm" in name or "ln_" in name) and name.endswith("weight"):
                v = (0.0 if gemma else 1.0) + 0.2 * z   # RMSNorm / LayerNorm gains
            elif p.ndim == 1:
                v = 0.1 * z                  # biases (qwen2 q/k/v, gpt2 everywhere)
            else:                            # matrices and embeddings: z / sqrt(fan-in)
                v = z / math.sqrt(p.shape[0] if name in conv1d else p.shape[-1])
            p.copy_(v.to(p.dtype))


def inv_freq64(cfg):
    """RoPE inverse frequencies in float64, llama3 scaling included (the
    formula of docs: wavelength 2*pi/f against original_max / low and
    original_max / high, smooth interpolation between)."""
    rp = cfg.rope_parameters
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    f = 1.0 / (rp["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if rp.get("rope_type", "default") == "llama3":
        old, fac = rp["original_max_position_embeddings"], rp["factor"]
        lo, hi = rp["low_freq_factor"], rp["high_freq_factor"]
        wl = 2 * math.pi / f
        smooth = (old / wl - lo) / (hi - lo)
        f = torch.where(wl < old / hi, f,
                        torch.where(wl > old / lo, f / fac, (1 - smooth) * f / fac + smooth * f))
    return f


def rope_in_float64(model):
    """HF builds the rotary tables in float32 even in a float64 model; make the
    reference exact by computing them in float64 (after checking that our
    float64 frequencies agree with HF's float32 ones)."""
    rot = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rot is None:
        return
    if hasattr(rot, "layer_types"):   # Gemma 3: one table per layer type
        hd = model.config.head_dim
        fs = {}
        for lt in rot.layer_types:
            rp = model.config.rope_parameters[lt]
            f = 1.0 / (rp["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            if rp.get("rope_type", "default") == "linear":
                f = f / rp["factor"]
            else:
                assert rp.get("rope_type", "default") == "default", rp
            got = getattr(rot, lt + "_inv_freq").to(torch.float64)
            assert torch.allclose(f, got, rtol=1e-6, atol=0), (lt, f, got)
            fs[lt] = f

        def forward_lt(x, position_ids, layer_type):
            emb = position_ids[..., None].to(torch.float64) * fs[layer_type]
            emb = torch.cat((emb, emb), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        rot.forward = forward_lt
        return
    scale = 1.0
    if model.config.rope_parameters.get("rope_type", "default") in ("default", "llama3"):
        f = inv_freq64(model.config)
        assert torch.allclose(f, rot.inv_freq.to(torch.float64), rtol=1e-6, atol=0), (f, rot.inv_freq)
    elif model.config.rope_parameters["rope_type"] == "longrope":
        # the set the forward picks for T tokens (long past the original context)
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
        f32, scale = ROPE_INIT_FUNCTIONS["longrope"](model.config, None, seq_len=T)
        f = f32.to(torch.float64)
        scale = float(scale)
    else:   # linear, dynamic, yarn: transformers' own fp32 frequencies and cos/sin scale
        f = rot.inv_freq.to(torch.float64)
        scale = float(rot.attention_scaling)
    rot.inv_freq = f

    def forward(x, position_ids):
        emb = position_ids[..., None].to(torch.float64) * f
        emb = torch.cat((emb, emb), dim=-1)
        return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)
    rot.forward = forward


def EAGER_EXPERTS(cls):
    """MoE models: the experts' plain loop (transformers' default grouped_mm
    has no float64)"""
    return {"experts_implementation": "eager"} if "moe" in cls.__name__.lower() or "Mixtral" in cls.__name__ else {}


def batch(seed, V):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (B, T + 1), generator=g)


def loss_and_logprobs(model, tok, with_aux=False):
    """The mean cross-entropy and log-probs; with_aux: also the objective,
    the cross-entropy plus router_aux_loss_coef x the load-balancing loss
    when config.output_router_logits (transformers' own sum), and that loss"""
    moe = getattr(model.config, "num_experts_per_tok", None) is not None
    out = model(input_ids=tok[:, :T], **({"output_router_logits": True} if moe else {}))
    logits = out.logits                                   # [B, T, V]
    V = logits.shape[-1]
    loss = F.cross_entropy(logits.reshape(-1, V), tok[:, 1:].reshape(-1))
    if not with_aux:
        return loss, torch.log_softmax(logits, dim=-1)
    aux = out.aux_loss if moe else None
    total = loss + model.config.router_aux_loss_coef * aux if moe and model.config.output_router_logits else loss
    return loss, torch.log_softmax(logits, dim=-1), total, aux


def run(model, tok):
    """Loss, log-probs, gradients, then 3 AdamW steps on the same batch."""
    model.zero_grad(set_to_none=True)
    loss, lp, total, aux = loss_and_logprobs(model, tok, True)
    total.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    out = {"loss": loss.item(), "logprobs": lp.detach().clone(), "grads": grads}
    if aux is not None:
        out["aux"] = aux.item()
    # (ztrain keeps the 3-D expert tensors as 2-D matrices: decayed too)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    nodecay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"],
                            foreach=False)
    losses, auxes = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _, total, aux = loss_and_logprobs(model, tok, True)
        total.backward()
        opt.step()
        losses.append(loss.item())
        if aux is not None:
            auxes.append(aux.item())
    if auxes:
        out["step_aux_losses"] = auxes
    with torch.no_grad():
        out["loss_after"] = loss_and_logprobs(model, tok)[0].item()
    out["step_losses"] = losses
    return out


def build(name, cls, make_config, seed, shard, outdir):
    torch.manual_seed(seed)
    cfg = make_config()
    model = cls(cfg).to(torch.float32).eval()   # eval: no dropout (pdrop is 0 anyway)
    randomize(model, seed)
    d = os.path.join(outdir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    model.save_pretrained(d, **({"max_shard_size": shard} if shard else {}))
    tok = batch(seed + 7, cfg.vocab_size)
    if cfg.pad_token_id is not None:   # the padding token must be an input, past position 0
        assert (tok[:, 1:T] == cfg.pad_token_id).any(), (name, cfg.pad_token_id)

    # the reference in float64 from the saved float32 weights, then float32
    m64 = cls.from_pretrained(d, dtype=torch.float64, attn_implementation="eager", **EAGER_EXPERTS(cls)).eval()
    rope_in_float64(m64)
    ref = run(m64, tok)
    f32 = run(cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", **EAGER_EXPERTS(cls)).eval(), tok)

    def maxabs(a, b):
        return float((a.to(torch.float64) - b.to(torch.float64)).abs().max())
    names = [n for n, _ in cls.from_pretrained(d).named_parameters()]
    gerr = {n: maxabs(ref["grads"][n], f32["grads"][n]) for n in names}
    grel = {n: gerr[n] / max(float(ref["grads"][n].abs().max()), 1e-30) for n in names}
    meta = {
        "model": name,
        "architecture": cls.__name__,
        "B": B, "T": T, "vocab": cfg.vocab_size,
        "tokens": tok.tolist(),
        "loss": ref["loss"],
        "step_losses": ref["step_losses"],
        "loss_after": ref["loss_after"],
        "optimizer": {"type": "AdamW", "lr": ADAMW["lr"], "betas": list(ADAMW["betas"]),
                      "eps": ADAMW["eps"], "weight_decay": ADAMW["weight_decay"],
                      "decay": "2-D tensors only", "clip": 0, "schedule": "constant"},
        "params": names,
        "fp32_error": {
            "loss": abs(ref["loss"] - f32["loss"]),
            "logprobs_max_abs": maxabs(ref["logprobs"], f32["logprobs"]),
            "grad_max_abs_rel_to_tensor_max": max(grel.values()),
            "step_losses_max_abs": max(abs(a - b) for a, b in zip(ref["step_losses"], f32["step_losses"])),
            "loss_after": abs(ref["loss_after"] - f32["loss_after"]),
        },
        "generator": "scripts/make_hf_fixtures.py (torch %s, transformers %s)" % (
            torch.__version__.split("+")[0], __import__("transformers").__version__),
    }
    if getattr(cfg, "num_experts_per_tok", None):
        # the router's load-balancing loss (transformers' load_balancing_loss_func over
        # every layer's router logits) on the fixed batch before any update, and at
        # each of the 3 steps; in the objective only with output_router_logits.  An
        # fp32 run must route every token the same way (else its loss is off)
        meta["aux_loss"] = ref["aux"]
        meta["step_aux_losses"] = ref["step_aux_losses"]
        meta["router_aux_loss_coef"] = cfg.router_aux_loss_coef
        meta["output_router_logits"] = cfg.output_router_logits
        assert meta["fp32_error"]["loss"] < 1e-5 and meta["fp32_error"]["loss_after"] < 1e-5, meta
    if cfg.rope_parameters.get("rope_type") == "longrope":
        # transformers' float32 frequencies on both sides of the switch: a
        # sequence of original tokens takes short_factor, one more long_factor
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
        om = cfg.rope_parameters["original_max_position_embeddings"]
        fs, scale = ROPE_INIT_FUNCTIONS["longrope"](cfg, None, seq_len=om)
        fl, _ = ROPE_INIT_FUNCTIONS["longrope"](cfg, None, seq_len=om + 1)
        meta["rope"] = {"original_max_position_embeddings": om, "inv_freq_short": fs.tolist(),
                        "inv_freq_long": fl.tolist(), "attention_scaling": float(scale)}
    arrays = {"logprobs": ref["logprobs"].to(torch.float32).contiguous()}
    for n in names:
        arrays["grad." + n] = ref["grads"][n].to(torch.float32).contiguous()
    save_file(arrays, os.path.join(outdir, name + ".ref.safetensors"))
    with open(os.path.join(outdir, name + ".ref.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    if name == "llama":
        describe_rope(model)
    if name in ("mixtral", "qwen2_moe_mixed"):
        write_packed(cls, d, os.path.join(outdir, name + "_packed"), tok, ref["loss"])
    print("%-6s params %6d  loss %.6f  steps %s  after %.6f" % (
        name, sum(p.numel() for p in model.parameters()), ref["loss"],
        " ".join("%.6f" % x for x in ref["step_losses"]), ref["loss_after"]))
    print("       fp32 vs fp64: " + ", ".join("%s %.2e" % kv for kv in meta["fp32_error"].items()))


def write_packed(cls, src, d, tok, loss):
    """The model of directory src in transformers 5's own (packed) names:
    state_dict() as the model holds it, config.json copied; transformers must
    load it with no missing or unexpected key and give the same loss."""
    from safetensors.torch import save_file as save
    m = cls.from_pretrained(src, dtype=torch.float32)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    sd = {k: v.contiguous() for k, v in m.state_dict().items()}
    if m.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    assert any(k.endswith("experts.gate_up_proj") for k in sd), sorted(sd)
    save(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(src, "config.json"), d)
    m2, info = cls.from_pretrained(d, dtype=torch.float64, output_loading_info=True,
                                   attn_implementation="eager", experts_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    got = loss_and_logprobs(m2.eval(), tok)[0].item()
    assert abs(got - loss) < 1e-5, (got, loss)


def describe_rope(model):
    """Show that llama3 scaling changes the frequencies (sanity of the fixture)."""
    cfg = model.config
    hd = cfg.head_dim
    base = cfg.rope_parameters["rope_theta"]
    plain = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    scaled = inv_freq64(cfg)
    print("       rope inv_freq plain  " + " ".join("%.4e" % x for x in plain.tolist()))
    print("       rope inv_freq llama3 " + " ".join("%.4e" % x for x in scaled.tolist()))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "hf")
    os.makedirs(outdir, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    only = sys.argv[2:]   # names to (re)build; none: all
    for spec in MODELS:
        if not only or spec[0] in only:
            build(*spec, outdir)


if __name__ == "__main__":
    main()
