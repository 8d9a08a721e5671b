#!/bin/bash
# hf_io.sh -- Hugging Face model directories in and out (docs/huggingface.md):
# `ztrain train --init-from DIR` on a GPT-2 directory written by
# tests/hf_fixture.py (stdlib Python: struct + json) at ZeRO stages 0-3 on 1
# and 2 ranks gives the same first-step loss; the loaded weights are exactly
# the file's (llm.c weights file saved with a vanishing learning rate,
# compared tensor by tensor with Conv1D transposes); `ztrain ckpt export
# --hf` (single file and sharded + index, F32 and BF16) loads back with the
# same loss; a resumed checkpoint wins over --init-from; every bad input
# gives one error line naming the file and tensor, its exit code and writes
# nothing; --resume at a non-checkpoint directory is an error; `ztrain
# estimate --model`.  The Llama family runs when this build has it.  With
# transformers ($ZT_HF_PYTHON, default /opt/hfref/bin/python) the exports are
# also loaded there (no missing/unexpected keys) and its loss compared.
. "$(dirname "$0")/ckpt_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FIX="$ZT_SRCDIR/tests/hf_fixture.py"
HFPY="${ZT_HF_PYTHON:-/opt/hfref/bin/python}"
# the model comes from config.json: a configuration without ztrain.model
"$PY" - "$ZT_SRCDIR/configs/tiny.json" > hf.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["ztrain"]["model"]; print(json.dumps(c))
PY
COMMON=(--config hf.json --train c_train.bin --val c_val.bin --threads 1 --sample-tokens 0
        --batch-size 12 --grad-accum 1 --scheduler.params.total_num_steps 40 --eval-every 0
        --eval-batches 1 --eval-batch-size 4 --log-every 100)
# one step at a vanishing learning rate: the step's loss is the loaded
# model's, the saved weights are the loaded ones (|update| << ulp)
hrun() {   # hrun NP OUT_PREFIX ARGS...
    local np=$1 pre=$2; shift 2
    rm -rf "$pre.d" "$pre.m"
    zrun "$np" --steps 1 --lr 1e-30 --ckpt-dir "$pre.d" --resume never --metrics "$pre.m" "$@"
}
first_loss() { losses "$1" | awk '$1 == 1 { print $2 }'; }
val_loss() { sed -n 's/.*"val_loss": \([-0-9.]*\)}.*/\1/p' "$1" | tail -1; }
# bad NAME CODE PATTERN ARGS...: ztrain train fails with exit CODE, exactly
# one "ztrain: error:" line matching PATTERN, and writes nothing
bad() {
    local name=$1 code=$2 pat=$3; shift 3
    rm -rf bad.d
    zrun "${BAD_NP:-1}" --steps 1 --ckpt-dir bad.d --resume never "$@"
    local rc=$? n
    n=$(grep -c '^ztrain: error:' run.err)
    ok $([ $rc = "$code" ] && [ "$n" = 1 ] && grep -q "^ztrain: error: .*$pat" run.err &&
         { [ ! -e bad.d ] || [ -z "$(ls -A bad.d)" ]; }; echo $?) \
       "$name: exit $code, one error line naming it (got exit $rc, $n lines: $(grep '^ztrain: error:' run.err | head -1 | cut -c1-220))"
}

# ---------------------------------------------------------------- GPT-2 in
"$PY" "$FIX" gpt2 g || { echo "Bail out! hf_fixture.py failed"; exit 1; }
echo '{"version": "1.0", "model": {"type": "BPE"}}' > g/tokenizer.json   # copied by export --hf
echo '{"bos_token_id": 0}' > g/generation_config.json
hrun 1 s0 --init-from g
ok $? "train --init-from a GPT-2 directory (stage 0, 1 rank)"
L0=$(first_loss s0.m)
grep -q '^init: loaded 28 tensors (34688 parameters' run.out
ok $? "one info line: init: loaded 28 tensors (34688 parameters ...) ($(grep '^init:' run.out | cut -c1-120))"
"$PY" "$FIX" compare-llmc s0.d/model.bin g > cmp.out 2>&1
ok $? "the loaded parameters are the file's, bit for bit (Conv1D transposed): $(cat cmp.out)"
for np in 1 2; do
    for stage in 0 1 2 3; do
        [ "$np$stage" = 10 ] && continue
        why=$(stage_ok "$stage") || { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - stage $stage # SKIP $why"; continue; }
        hrun $np s$np$stage --init-from g --stage $stage
        rc=$?
        L=$(first_loss s$np$stage.m)
        ok $([ $rc = 0 ] && [ -n "$L" ] && [ "$L" = "$L0" ]; echo $?) \
           "--init-from on $np rank(s), stage $stage: first-step loss $L == $L0 (bitwise as printed)"
    done
done
hrun 2 sh3 --init-from g --stage 3 --scheduler.params.total_num_steps 40 > /dev/null
"$PY" "$FIX" compare-llmc sh3.d/model.bin g > cmp.out 2>&1
ok $? "2 ranks, stage 3: the gathered parameters are the file's: $(cat cmp.out)"

hrun 4 hy --init-from g --stage 3 --zero_optimization.shard_group_size 2
ok $([ $? = 0 ] && [ "$(first_loss hy.m)" = "$L0" ] && "$PY" "$FIX" compare-llmc hy.d/model.bin g > cmp.out 2>&1; echo $?) \
   "4 ranks, stage 3 in shard groups of 2 (replicas receive their slices too): loss $(first_loss hy.m), parameters: $(cat cmp.out)"

# original GPT-2 files: names without "transformer.", BF16 / F16, sharded,
# a tied copy of lm_head.weight, old causal-mask buffers (attn.bias)
"$PY" "$FIX" gpt2 g16 --dtype BF16 --no-prefix --shards 3 --lm-head
hrun 2 b16 --init-from g16 --stage 2
ok $? "BF16, no transformer. prefix, 3 shards + index, lm_head.weight copy: loads on 2 ranks, stage 2"
"$PY" "$FIX" gpt2 gf16 --dtype F16
"$PY" - gf16/model.safetensors <<'PY'
import json, struct, sys
p = sys.argv[1]; raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
h["transformer.h.0.attn.bias"] = {"dtype": "F16", "shape": [1, 1, 2, 2], "data_offsets": [len(data), len(data) + 8]}
hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + data + b"\0" * 8)
PY
hrun 1 f16 --init-from gf16
ok $? "F16 with an h.0.attn.bias mask buffer (ignored): loads"

# ---------------------------------------------------------------- export
"$ZTRAIN" ckpt export s0.d/step-1 --hf E > exp.out 2>&1
ok $([ $? = 0 ] && [ -f E/config.json ] && [ -f E/model.safetensors ] && [ ! -e E.tmp ]; echo $?) \
   "ckpt export --hf: config.json + model.safetensors, no E.tmp left"
"$PY" "$FIX" compare E g > cmp.out 2>&1
ok $? "the export holds the same tensors, names and values as the original: $(cat cmp.out)"
cmp -s g/tokenizer.json E/tokenizer.json && cmp -s g/generation_config.json E/generation_config.json &&
    [ ! -e E/vocab.json ]
ok $? "the tokenizer files of ztrain.init_from (g) are copied, only those present"
grep -q '"lm_head.weight"' E/model.safetensors
ok $([ $? != 0 ]; echo $?) "tied: no lm_head.weight in the export"
hrun 1 re --init-from E
ok $([ $? = 0 ] && [ "$(first_loss re.m)" = "$L0" ]; echo $?) "--init-from the export: same first-step loss ($(first_loss re.m))"
"$ZTRAIN" ckpt export s0.d/step-1 --hf E2 --dtype bf16 --max-shard-size 40K > exp.out 2>&1
ok $([ $? = 0 ] && [ -f E2/model.safetensors.index.json ] && [ -f E2/model-00002-of-00002.safetensors ] &&
     grep -q '"torch_dtype": "bfloat16"' E2/config.json; echo $?) \
   "export --dtype bf16 --max-shard-size 40K: 2 shards + model.safetensors.index.json"
"$PY" "$FIX" compare E2 g --tol 0.004 > cmp.out 2>&1
ok $? "the BF16 shards hold the values rounded to bfloat16: $(cat cmp.out)"
hrun 2 re2 --init-from E2 --stage 3
L2=$(first_loss re2.m)
ok $([ $? = 0 ] && awk -v a="$L2" -v b="$L0" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }'; echo $?) \
   "the sharded BF16 export loads back (2 ranks, stage 3): loss $L2 ~ $L0"
# device-resident state (cpu-strict emulates a device), bf16 parameters from
# the fp32 master, parameters offloaded at stage 3: the master holds the
# file's values exactly, the forward sees them rounded to bf16
hrun 2 cs --init-from g --backend cpu-strict --precision bf16 --stage 3 --offload params
rc=$?
rm -rf csE && "$ZTRAIN" ckpt export cs.d/step-1 --hf csE > exp.out 2>&1 && "$PY" "$FIX" compare csE g > cmp.out 2>&1
rc2=$?
ok $([ $rc = 0 ] && [ $rc2 = 0 ] && [ "$(first_loss cs.m)" = "$L2" ]; echo $?) \
   "cpu-strict, bf16, stage 3 + offload params, 2 ranks: fp32 master == the file ($(cat cmp.out)); loss $(first_loss cs.m) == the BF16 export's $L2"
"$ZTRAIN" ckpt export s0.d/step-1 --hf E > exp.out 2>&1
ok $([ $? = 2 ] && grep -q 'exists and is not an empty directory' exp.out; echo $?) \
   "export --hf into a non-empty directory: refused, exit 2"
"$ZTRAIN" ckpt export s0.d/step-1 --hf E4 --max-shard-size lots > exp.out 2>&1
ok $([ $? = 2 ] && grep -q "max-shard-size must be a size" exp.out && [ ! -e E4 ]; echo $?) "export --max-shard-size lots: exit 2"
if command -v h5dump > /dev/null; then
    mkdir -p broken && cp s0.d/step-1/state.h5 broken/state.h5
    off=$(h5dump -p -d /params/h1.mlp.fc.w -H broken/state.h5 2>/dev/null | sed -n 's/.*OFFSET \([0-9][0-9]*\).*/\1/p' | head -n 1)
    b=$(od -An -tu1 -j $((off + 99)) -N1 broken/state.h5 | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 0x5a)))" | dd of=broken/state.h5 bs=1 seek=$((off + 99)) conv=notrunc 2>/dev/null
    "$ZTRAIN" ckpt export broken --hf E3 > exp.out 2>&1
    rc=$?
    ok $([ $rc = 1 ] && grep -q 'tensor params/h1.mlp.fc.w: checksum mismatch' exp.out && [ ! -e E3 ] && [ ! -e E3.tmp ]; echo $?) \
       "export --hf of a corrupt checkpoint: exit 1 naming the tensor, nothing left (got $rc: $(grep error exp.out | cut -c1-160))"
else
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - export of a corrupt checkpoint # SKIP h5dump not installed"
fi

# ---------------------------------------------------------------- resume wins
rm -rf ar.d
zrun 1 --steps 2 --ckpt-dir ar.d --resume auto --init-from g --metrics ar.m
zrun 1 --steps 3 --ckpt-dir ar.d --resume auto --init-from g --metrics ar.m
ok $([ $? = 0 ] && grep -q '^init: resumed from checkpoint ar.d/step-2 at step 2; the Hugging Face weights of .*/g are not loaded' run.out &&
     ! grep -q '^init: loaded' run.out; echo $?) "auto-resume wins over --init-from (and says so)"

# ---------------------------------------------------------------- bad inputs
mkdir -p x1 && cp g/model.safetensors x1/ && sed 's/GPT2LMHeadModel/BertForMaskedLM/' g/config.json > x1/config.json
bad "unsupported architecture" 2 "x1/config.json: architecture BertForMaskedLM is not supported" --init-from x1
"$PY" "$FIX" gpt2 x2 --shards 2 && rm x2/model-00002-of-00002.safetensors
bad "missing shard file" 1 "index.json maps tensor .* to model-00002-of-00002.safetensors: .*/x2/model-00002-of-00002.safetensors: cannot open" --init-from x2
"$PY" "$FIX" gpt2 x3 && "$PY" "$FIX" mutate x3/model.safetensors truncate
bad "truncated safetensors" 1 "x3/model.safetensors: tensor transformer.ln_f.bias: data_offsets .* outside the data region" --init-from x3
"$PY" "$FIX" gpt2 x4 && "$PY" "$FIX" mutate x4/model.safetensors lie-offsets transformer.h.1.ln_2.bias
bad "header lying about offsets (overlap)" 1 "x4/model.safetensors: tensors .* overlap" --init-from x4
"$PY" "$FIX" gpt2 x5 && "$PY" "$FIX" mutate x5/model.safetensors dtype-i64 transformer.wpe.weight
bad "unreadable dtype I64" 2 "x5/model.safetensors: tensor transformer.wpe.weight has dtype I64" --init-from x5
"$PY" "$FIX" gpt2 x6 && "$PY" "$FIX" mutate x6/model.safetensors reshape transformer.h.0.attn.c_attn.weight
bad "mis-shaped tensor" 1 "x6/model.safetensors: tensor transformer.h.0.attn.c_attn.weight has shape \[96, 32\]; the configured model's h0.attn.qkv.w needs \[32, 96\]" --init-from x6
"$PY" "$FIX" gpt2 x7 && "$PY" "$FIX" mutate x7/model.safetensors drop transformer.h.1.mlp.c_fc.bias
bad "missing tensor" 1 "x7/model.safetensors: tensor transformer.h.1.mlp.c_fc.bias \[128\] missing" --init-from x7
"$PY" "$FIX" gpt2 x8 && "$PY" "$FIX" mutate x8/model.safetensors add
bad "unexpected tensor" 1 "x8/model.safetensors: unexpected tensor model.extra_thing.weight \[4\]" --init-from x8
BAD_NP=2 bad "2 ranks, stage 3: mis-shaped tensor (every rank agrees, no hang)" 1 "x6/model.safetensors: tensor transformer.h.0.attn.c_attn.weight has shape" --init-from x6 --stage 3
BAD_NP=2 bad "2 ranks, stage 1: truncated file" 1 "x3/model.safetensors: tensor transformer.ln_f.bias" --init-from x3 --stage 1
bad "a flag disagreeing with config.json" 2 "ztrain.model.n_layer=3 (flag) disagrees with .*/g/config.json: n_layer gives 2" --init-from g --n-layer 3
mkdir -p x9 && cp g/model.safetensors x9/ && sed 's/"layer_norm_epsilon": 1e-05/"layer_norm_epsilon": 1e-06/' g/config.json > x9/config.json
bad "GPT-2 layer_norm_epsilon other than 1e-5" 2 "layer_norm_epsilon" --init-from x9
bad "no such directory" 1 "nope: no such Hugging Face model directory" --init-from nope

# ---------------------------------------------------------------- --resume
bad "--resume at a Hugging Face directory" 2 "checkpoint.resume=g: a Hugging Face model directory (config.json), not a ztrain checkpoint: start from its weights with --init-from g" --resume g
mkdir -p notckpt && echo hi > notckpt/readme.txt
bad "--resume at a non-empty non-checkpoint directory" 2 "checkpoint.resume=notckpt: the directory holds no ztrain checkpoint" --resume notckpt
mkdir -p emptyd
bad "--resume at an empty directory (explicit path: no fresh start)" 2 "checkpoint.resume=emptyd: an empty directory holds no checkpoint to resume" --resume emptyd
zrun 1 --steps 1 --ckpt-dir emptyd --resume auto
ok $? "--resume auto at an empty checkpoint directory: a fresh start"
bad "--resume /etc (explicit path without a checkpoint)" 2 "checkpoint.resume=/etc: the directory holds no ztrain checkpoint" --resume /etc

# ---------------------------------------------------------------- estimate
"$ZTRAIN" estimate --model g --world-size 2 > est.out 2>&1
ok $([ $? = 0 ] && grep -q '^model: gpt2 (GPT2LMHeadModel), 34688 parameters' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model DIR (GPT-2): the table, model line with architecture and parameter count"
"$ZTRAIN" estimate --model x1/config.json --world-size 2 > est.out 2>&1
ok $([ $? = 2 ] && grep -q 'BertForMaskedLM is not supported' est.out; echo $?) "estimate --model: unsupported architecture, exit 2"
# config.json refusals by name (no weights read)
"$PY" "$FIX" llama l5 --rope-form 5 --llama3 --kv 2
for edit in 's/"silu"/"gelu"/|hidden_act' 's/"rope_type": "llama3"/"rope_type": "proportional"/|proportional'; do
    mkdir -p l6 && sed "${edit%%|*}" l5/config.json > l6/config.json
    "$ZTRAIN" estimate --model l6 --world-size 1 > est.out 2>&1
    ok $([ $? = 2 ] && grep -q "^ztrain: error: l6/config.json: .*${edit##*|}" est.out; echo $?) \
       "config.json with ${edit##*|}: refused by name, exit 2 ($(head -1 est.out | cut -c1-150))"
done

# longrope: a Phi-3-mini-128k-shaped config.json (48 factors each; synthetic values)
mkdir -p lr lr2
"$PY" - lr/config.json lr2/config.json <<'EOF'
import json, sys
c = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
     "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32,
     "num_key_value_heads": 32, "vocab_size": 32064, "max_position_embeddings": 131072,
     "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
     "sliding_window": 262144, "tie_word_embeddings": False,
     "rope_scaling": {"type": "longrope", "short_factor": [1 + 0.02 * i for i in range(48)],
                      "long_factor": [1 + 0.5 * i for i in range(48)]}}
json.dump(c, open(sys.argv[1], "w"))
c["rope_scaling"]["long_factor"].pop()
json.dump(c, open(sys.argv[2], "w"))
EOF
"$ZTRAIN" estimate --model lr/config.json --world-size 8 --seq-len 8192 > est.out 2>&1
ok $([ $? = 0 ] && grep -q '^model: llama (Phi3ForCausalLM), 3821079552 parameters' est.out; echo $?) \
   "estimate --model: Phi-3-mini-128k-shaped longrope config.json, 3821079552 parameters"
"$ZTRAIN" estimate --model lr2/config.json --world-size 1 > est.out 2>&1
ok $([ $? = 2 ] && grep -q 'rope_long_factor must hold head_dim / 2 = 48 .*it holds 47' est.out; echo $?) \
   "estimate --model: longrope long_factor of 47 numbers at head_dim 96 refused, exit 2"

# ---------------------------------------------------------------- transformers (optional)
if "$HFPY" -c "import torch, transformers" 2> /dev/null; then
    for d in g E; do
        ref=$("$HFPY" "$ZT_SRCDIR/tests/hf_ref.py" $d c_val.bin 4 32 2> ref.err)
        rc=$?
        [ $rc = 0 ] || diag ref.err
        ok $([ $rc = 0 ] && [ "$ref" = "$(val_loss s0.m)" ]; echo $?) \
           "transformers loads $d (no missing/unexpected keys); its loss $ref == ztrain's $(val_loss s0.m)"
    done
else
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - transformers check # SKIP $HFPY cannot import torch + transformers"
fi

# ---------------------------------------------------------------- llama family
if [ -f "$ZT_SRCDIR/libtrain/llama.c" ]; then
cat > l8b.json <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
 "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
 "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false,
 "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
 "torch_dtype": "bfloat16"}
EOF
"$ZTRAIN" estimate --model l8b.json --world-size 8 --device gpu --device-memory 80G --seq-len 4096 \
    --micro-batch 1 --precision bf16 --act-ckpt blocks > est.out 2>&1
ok $(grep -q '^model: llama (LlamaForCausalLM), 8030261248 parameters' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model Llama-3-8B config.json: 8030261248 parameters and the table"
diag < <(grep '^model:' est.out)
# Phi-3-mini-4k-instruct's config.json: fused qkv_proj / gate_up_proj (split on load);
# 3821079552 = transformers' Phi3ForCausalLM built from it
cat > p3.json <<'EOF'
{"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_dropout": 0.0, "bos_token_id": 1,
 "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
 "intermediate_size": 8192, "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0,
 "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 32064}
EOF
"$ZTRAIN" estimate --model p3.json --world-size 2 --seq-len 2048 --micro-batch 1 > est.out 2>&1
ok $(grep -q '^model: llama (Phi3ForCausalLM), 3821079552 parameters' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model Phi-3-mini-4k config.json: 3821079552 parameters (transformers' count)"
# Qwen3-0.6B's config.json: per-head q/k norms, head_dim 128 != hidden / heads, tied;
# 596049920 = sum(p.numel()) of transformers' Qwen3ForCausalLM built from it
cat > q3.json <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false, "head_dim": 128,
 "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 40960,
 "max_window_layers": 28, "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_sliding_window": false, "vocab_size": 151936}
EOF
"$ZTRAIN" estimate --model q3.json --world-size 2 --seq-len 4096 --micro-batch 1 > est.out 2>&1
ok $(grep -q '^model: llama (Qwen3ForCausalLM), 596049920 parameters.*q/k norms' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model Qwen3-0.6B config.json: 596049920 parameters (transformers' count), q/k norms"
# gemma-2-2b's and gemma-3-1b-pt's config.json: Gemma blocks, head_dim 256, tied;
# 2614341888 and 999885952 = sum(p.numel()) of transformers' Gemma2ForCausalLM /
# Gemma3ForCausalLM built from them
cat > g2.json <<'EOF'
{"architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": 50.0,
 "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
 "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
 "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
 "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
 "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32", "use_cache": true, "vocab_size": 256000}
EOF
"$ZTRAIN" estimate --model g2.json --world-size 2 --seq-len 4096 --micro-batch 1 > est.out 2>&1
ok $(grep -q '^model: llama (Gemma2ForCausalLM), 2614341888 parameters.*Gemma 2 blocks, window 4096 (full every 2 layers), soft-caps 50 / 30' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model gemma-2-2b config.json: 2614341888 parameters (transformers' count)"
cat > g3.json <<'EOF'
{"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": null,
 "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": null, "head_dim": 256,
 "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912,
 "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
 "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
 "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512,
 "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 262144}
EOF
"$ZTRAIN" estimate --model g3.json --world-size 2 --seq-len 4096 --micro-batch 1 > est.out 2>&1
ok $(grep -q '^model: llama (Gemma3ForCausalLM), 999885952 parameters.*q/k norms, Gemma 3 blocks, window 512 (full every 6 layers)' est.out && grep -q '^peak_bytes per rank' est.out; echo $?) \
   "estimate --model gemma-3-1b-pt config.json: 999885952 parameters (transformers' count), window 512, every 6th layer full"
# config.json forms and refusals (no weights needed)
    for v in "lu --kv 2:untied GQA" "lt --kv 1 --tied:tied multi-query" "lq --kv 2 --arch Qwen2ForCausalLM:Qwen2 (q/k/v biases)" \
             "lm --kv 4 --arch MistralForCausalLM --rope-form 5 --llama3:Mistral, 5.x rope_parameters, llama3"; do
        spec=${v%%:*}; name=${v##*:}; d=${spec%% *}
        # shellcheck disable=SC2086
        "$PY" "$FIX" llama $spec
        hrun 1 ${d}1 --init-from $d
        rc=$?
        La=$(first_loss ${d}1.m)
        hrun 2 ${d}3 --init-from $d --stage 3
        ok $([ $rc = 0 ] && [ -n "$La" ] && [ "$(first_loss ${d}3.m)" = "$La" ]; echo $?) \
           "llama $name: loads on 1 rank stage 0 and 2 ranks stage 3, same first-step loss ($La, $(first_loss ${d}3.m))"
        rm -rf ${d}E
        "$ZTRAIN" ckpt export ${d}1.d/step-1 --hf ${d}E > exp.out 2>&1
        "$PY" "$FIX" compare ${d}E $d > cmp.out 2>&1
        ok $? "llama $name: export --hf == the original tensors: $(cat cmp.out)"
        if "$HFPY" -c "import torch, transformers" 2> /dev/null; then
            ref=$("$HFPY" "$ZT_SRCDIR/tests/hf_ref.py" ${d}E c_val.bin 4 64 2> ref.err)
            ok $([ $? = 0 ] && awk -v a="$ref" -v b="$(val_loss ${d}1.m)" 'BEGIN { d = a - b; exit !(d <= 5e-6 && d >= -5e-6) }'; echo $?) \
               "llama $name: transformers loads the export; loss $ref vs ztrain $(val_loss ${d}1.m)"
        fi
    done
    "$PY" "$FIX" llama lw --kv 2 --arch MistralForCausalLM --positions 64
    sed -i 's/"sliding_window": 64/"sliding_window": 16, "pad_token_id": 3/' lw/config.json
    hrun 1 lw1 --init-from lw
    rc=$?
    ok $([ $rc = 0 ] && [ -n "$(first_loss lw1.m)" ] &&
         grep -q "window 16 (layers 0 and later)" run.out; echo $?) \
       "Mistral sliding_window=16 < seq_len 64 trains through the window (exit $rc, loss $(first_loss lw1.m))"
    # Qwen2 with its window on layer 1 of 2 (max_window_layers 1); both exported
    # with their windows, which transformers applies to the same loss
    "$PY" "$FIX" llama qs --kv 2 --arch Qwen2ForCausalLM --positions 64
    sed -i 's/"use_sliding_window": false/"use_sliding_window": true, "sliding_window": 16, "max_window_layers": 1/' qs/config.json
    hrun 1 qs1 --init-from qs
    rc=$?
    ok $([ $rc = 0 ] && grep -q "window 16 (layers 1 and later)" run.out; echo $?) \
       "Qwen2 use_sliding_window=true, window 16 from layer 1 trains (exit $rc, loss $(first_loss qs1.m))"
    for w in lw qs; do
        rm -rf ${w}E
        "$ZTRAIN" ckpt export ${w}1.d/step-1 --hf ${w}E > exp.out 2>&1
        "$PY" - ${w}E/config.json $w <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
want = {"sliding_window": 16, "pad_token_id": 3} if sys.argv[2] == "lw" else \
       {"use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1, "pad_token_id": None}
sys.exit(any(k not in c or c[k] != v for k, v in want.items()))
PYEOF
        ok $? "$w: export --hf writes the window and pad_token_id ($(grep -o '"[a-z_]*window[a-z_]*": [a-z0-9]*\|"pad_token_id": [a-z0-9]*' ${w}E/config.json | tr '\n' ' '))"
        if "$HFPY" -c "import torch, transformers" 2> /dev/null; then
            ref=$("$HFPY" "$ZT_SRCDIR/tests/hf_ref.py" ${w}E c_val.bin 4 64 2> ref.err)
            ok $([ $? = 0 ] && awk -v a="$ref" -v b="$(val_loss ${w}1.m)" 'BEGIN { d = a - b; exit !(d <= 5e-6 && d >= -5e-6) }'; echo $?) \
               "$w: transformers applies the exported window: loss $ref vs ztrain $(val_loss ${w}1.m)"
        fi
    done
    "$PY" "$FIX" llama qw --kv 2 --arch Qwen2ForCausalLM --positions 64
    "$PY" - qw/config.json <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(use_sliding_window=True, sliding_window=16, layer_types=["sliding_attention", "full_attention"])
json.dump(c, open(sys.argv[1], "w"))
PYEOF
    bad "Qwen2 layer_types with a full layer after a sliding one" 2 "layer_types has a full-attention layer 1 after the sliding layer 0" --init-from qw
else
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - llama family # SKIP this build has no llama model (libtrain/llama.c)"
fi
done_testing
