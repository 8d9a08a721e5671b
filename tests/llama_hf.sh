#!/bin/bash
# llama_hf.sh -- the Llama model against transformers (the reference
# implementation of the architecture):
#  - the rotary frequencies (zt_llama_inv_freq) bitwise equal to transformers'
#    default and llama3 rope parameters, for a few head dims, bases and
#    llama3 settings;
#  - the whole forward: tests/llama_ref builds the model, runs a forward and
#    writes its parameters (our names), tokens, next-token distributions and
#    mean loss; the same weights loaded into LlamaForCausalLM (Qwen2ForCausalLM
#    for q/k/v biases: Llama's attention_bias also biases o_proj) by the
#    contract's name map give the same probabilities (max abs difference
#    <= 1e-5) and loss (relative 1e-5): grouped-query, multi-query and
#    multi-head attention, head_dim != n_embd / n_head, tied and untied heads,
#    llama3 rope scaling.
# Needs the reference Python stack (ZT_HF_PYTHON, default /opt/hfref/bin/python,
# with torch and transformers); skips without it.
. "$(dirname "$0")/lib.sh"
PY=${ZT_HF_PYTHON:-/opt/hfref/bin/python}
[ -x "$PY" ] && "$PY" -c "import torch, transformers" 2> /dev/null ||
    skip_all "no reference Python with torch + transformers ($PY)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
REF=$ZT_BUILDDIR/tests/llama_ref

for spec in "64 10000 none" "128 500000 none" "96 1000000 none" "128 500000 llama3 8 1 4 8192" \
            "64 500000 llama3 32 1 4 8192" "16 10000 llama3 8 1 4 64" "8 10000 llama3 4 2 8 128"; do
    set -- $spec
    "$REF" inv_freq "$@" > "$T/c.txt"
    "$PY" - "$T/c.txt" "$@" <<'PY' 2> "$T/err.txt"
import struct, sys
path, hd, theta, sc = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
kw = dict(hidden_size=hd, num_attention_heads=1, rope_theta=theta, max_position_embeddings=1 << 17)
if sc == "llama3":
    f, lo, hi, om = (float(x) for x in sys.argv[5:9])
    kw["rope_scaling"] = {"rope_type": "llama3", "factor": f, "low_freq_factor": lo,
                          "high_freq_factor": hi, "original_max_position_embeddings": int(om)}
c = LlamaConfig(**kw)
if sc == "llama3":
    ref = ROPE_INIT_FUNCTIONS["llama3"](c, "cpu")[0].tolist()
else:
    ref = LlamaRotaryEmbedding.compute_default_rope_parameters(config=c, device="cpu")[0].tolist()
mine = [float(x) for x in open(path)]
bad = [i for i, (a, b) in enumerate(zip(mine, ref)) if struct.pack("<f", a) != struct.pack("<f", b)]
print("# %s: %d frequencies, %d differ%s" % (" ".join(sys.argv[2:]), len(ref), len(bad),
      "" if not bad else " (first: %r vs %r)" % (mine[bad[0]], ref[bad[0]])))
sys.exit(0 if len(mine) == len(ref) and not bad else 1)
PY
    rc=$?
    [ $rc = 0 ] || diag "$T/err.txt"
    ok $rc "inv_freq bitwise transformers' for head dim $1, theta $2, scaling ${*:3}"
done

# forward L NH NKV C HD H V T TIED BIAS THETA SCALING: our forward vs transformers'
for spec in "2 4 2 32 8 48 40 12 1 0 10000 none" "2 4 1 32 8 40 37 10 0 0 500000 llama3" \
            "1 2 2 24 12 36 29 9 0 1 10000 none" "2 6 3 36 8 64 50 11 1 1 1000000 llama3"; do
    set -- $spec
    mkdir -p "$T/f" && rm -f "$T/f"/*
    if ! "$REF" forward "$T/f" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" 0 "${11}" "${12}" \
        2> "$T/err.txt"; then
        diag "$T/err.txt"; ok 1 "forward $*"; continue
    fi
    "$PY" - "$T/f" "$@" <<'PY' 2> "$T/err.txt"
import sys, torch
d = sys.argv[1]
L, NH, NKV, C, HD, H, V, T, tied, bias = (int(x) for x in sys.argv[2:12])
theta, sc = float(sys.argv[12]), sys.argv[13]
import transformers
kw = dict(vocab_size=V, hidden_size=C, intermediate_size=H, num_hidden_layers=L,
          num_attention_heads=NH, num_key_value_heads=NKV, head_dim=HD, max_position_embeddings=T,
          rms_norm_eps=1e-5, rope_theta=theta, tie_word_embeddings=bool(tied),
          attn_implementation="eager")
if sc == "llama3":
    kw["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
if bias:   # q/k/v biases only: Qwen2 (Llama's attention_bias also biases o_proj)
    cfg = transformers.Qwen2Config(use_sliding_window=False, **kw)
    model = transformers.Qwen2ForCausalLM(cfg)
else:
    cfg = transformers.LlamaConfig(attention_bias=False, mlp_bias=False, **kw)
    model = transformers.LlamaForCausalLM(cfg)
model = model.float().eval()
flat = torch.frombuffer(bytearray(open(d + "/params.bin", "rb").read()), dtype=torch.float32)
hf = {"embed.w": "model.embed_tokens.weight", "norm.w": "model.norm.weight", "lm_head.w": "lm_head.weight"}
sub = {"attn_norm.w": "input_layernorm.weight", "mlp_norm.w": "post_attention_layernorm.weight",
       "gate.w": "mlp.gate_proj.weight", "up.w": "mlp.up_proj.weight", "down.w": "mlp.down_proj.weight"}
for p in "qkvo":
    sub[p + ".w"] = "self_attn.%s_proj.weight" % p
    sub[p + ".b"] = "self_attn.%s_proj.bias" % p
sd = {}
for line in open(d + "/manifest.txt"):
    name, off, r, c = line.split()
    off, r, c = int(off), int(r), int(c)
    t = flat[off:off + r * c].reshape(r, c) if c > 1 else flat[off:off + r]
    if name in hf:
        key = hf[name]
    else:
        l, rest = name[1:].split(".", 1)
        key = "model.layers.%s.%s" % (l, sub[rest])
    sd[key] = t.clone()
if tied:
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
missing, unexpected = model.load_state_dict(sd, strict=False)
missing = [k for k in missing if "rotary" not in k]
assert not missing and not unexpected, (missing, unexpected)
tok = [int(x) for x in open(d + "/tokens.txt")]
N = 2 * T
inp = torch.tensor(tok[:N]).reshape(2, T)
tgt = torch.tensor(tok[N:]).reshape(2, T)
with torch.no_grad():
    logits = model(input_ids=inp).logits.double()
probs = torch.softmax(logits, -1).reshape(N, V)
loss = torch.nn.functional.cross_entropy(logits.reshape(N, V), tgt.reshape(N)).item()
ours = torch.frombuffer(bytearray(open(d + "/probs.bin", "rb").read()), dtype=torch.float32).double().reshape(N, V)
our_loss = float(open(d + "/loss.txt").read())
pd = (ours - probs).abs().max().item()
lr = abs(our_loss - loss) / abs(loss)
# the distributions are far from uniform (the comparison is not trivial)
peaked = probs.max().item() * V
print("# %s: max |p - p_hf| %.2e, loss %.6f vs %.6f (rel %.1e), largest p %.1f / V, %d parameters" %
      (" ".join(sys.argv[2:]), pd, our_loss, loss, lr, peaked, flat.numel()))
sys.exit(0 if pd <= 1e-5 and lr <= 1e-5 and peaked > 4 else 1)
PY
    rc=$?
    [ $rc = 0 ] || diag "$T/err.txt"
    ok $rc "forward == transformers' (L $1, heads $2/$3 kv, C $4, head dim $5, H $6, V $7, T $8, tied $9, bias ${10}, theta ${11}, ${12})"
done
done_testing
