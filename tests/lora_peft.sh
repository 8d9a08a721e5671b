#!/bin/bash
# lora_peft.sh -- LoRA against PEFT itself (optional: needs a Python that
# imports torch + transformers + peft; SKIPs visibly otherwise).  For the
# llama, qwen2, gpt2, gemma2 and gemma3 fixtures of tests/fixtures/hf and a few LoRA
# settings (all-linear, PEFT's default targets with rslora, GPT-2's shared
# c_proj name), and the Mixture of Experts fixtures mixtral (attention),
# qwen2_moe (q, v and the shared expert's gate/up/down) and qwen3_moe_mixed
# (dense and sparse blocks; q, o), tests/lora_ref writes ztrain's adapters (every lora_B set
# non-zero), loss, adapter gradients and 3 AdamW steps; tests/lora_peft.py
# puts the same adapters into peft.get_peft_model(fixture) and checks the
# trainable parameters are exactly those, the loss (5e-6), every lora_A /
# lora_B gradient (2e-5 of its largest entry, test_hf_golden's tolerance),
# the 3 step losses and the loss after them (1e-5).
# Then the exports (llama, qwen2, gpt2, gemma3 all-linear; mixtral, qwen2_moe as
# above, qwen2_moe also at expert parallelism 2, its exports byte-equal to the
# run without): `ztrain train --init-from FIXTURE --lora-r 4` 4 steps at 2
# ranks, stage 3, on a token file of one window (each step's logged loss is
# that window's loss before the step's update), `ztrain ckpt export step-3
# --peft` and `--hf --merge`: PEFT loads the adapter with no unexpected or
# missing lora_ key and the merged directory loads in transformers with none
# missing, and both give the loss ztrain logged at step 4 (1e-5)
# (tests/lora_peft_load.py).
# Then --lora-from's adapter_config.json variants (tests/lora_peft_keys.py):
# PEFT loads each one ztrain accepts into exactly ztrain's adapters, and each
# refused selection, pattern or setting into something else.
#
# ZT_HF_PYTHON picks the Python (default /opt/hfref/bin/python if present, else python3).
. "$(dirname "$0")/lib.sh"
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi
if ! "$ZT_HF_PYTHON" -c 'import torch, transformers, peft' >/dev/null 2>&1; then
    echo "ok 1 # SKIP torch + transformers + peft not importable (by $ZT_HF_PYTHON)"
    echo "1..1"
    exit 0
fi
FIX="$ZT_SRCDIR/tests/fixtures/hf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 PYTHONHASHSEED=0
# name fixture r alpha targets rslora
while read -r fx r alpha targets rslora; do
    tag="$fx r=$r alpha=$alpha targets=$targets rslora=$rslora"
    "$ZT_BUILDDIR/tests/lora_ref" "$FIX/$fx" "$FIX/$fx.ref.json" "$r" "$alpha" "$targets" "$rslora" \
        "$tmp/z.json" > "$tmp/ref.out" 2>&1
    rc=$?
    ok $rc "$tag: ztrain's adapters, gradients and 3 steps (tests/lora_ref)"
    [ $rc -eq 0 ] || { diag "$tmp/ref.out"; continue; }
    "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft.py" "$FIX/$fx" "$tmp/z.json" "$r" "$alpha" "$rslora" \
        > "$tmp/peft.out" 2>&1
    rc=$?
    grep -E '^(ok|not ok|#) ' "$tmp/peft.out" | grep -v ' shape (' | diag
    ok $rc "$tag: PEFT agrees (loss, every lora_A / lora_B gradient, 3 AdamW steps)"
    [ $rc -eq 0 ] || diag "$tmp/peft.out"
done <<'LIST'
llama 4 8 all-linear false
qwen2 8 16 q_proj,v_proj true
gpt2 4 8 c_attn,c_proj false
gpt2 4 8 c_attn,mlp.c_proj false
gpt2 2 4 all-linear false
gemma2 4 8 all-linear false
gemma3 8 16 q_proj,v_proj true
mixtral 4 8 q_proj,k_proj,v_proj,o_proj false
qwen2_moe 4 8 q_proj,v_proj,gate_proj,up_proj,down_proj false
qwen3_moe_mixed 8 16 q_proj,o_proj true
LIST
# fixture[@EP]:targets (Mixture of Experts: attention, Qwen2-MoE's shared expert; @2: the run at
# expert parallelism 2)
for spec in llama:all-linear qwen2:all-linear gpt2:all-linear gemma3:all-linear \
            mixtral:q_proj,k_proj,v_proj,o_proj qwen2_moe:q_proj,v_proj,gate_proj,up_proj,down_proj \
            qwen2_moe@2:q_proj,v_proj,gate_proj,up_proj,down_proj; do
    fx=${spec%%:*}
    targets=${spec#*:}
    ep=1
    case $fx in *@*) ep=${fx#*@}; fx=${fx%@*} ;; esac
    d="$tmp/x$fx"
    [ "$ep" = 1 ] || d="$tmp/x$fx.ep$ep"
    mkdir -p "$d"
    "$ZT_HF_PYTHON" - "$FIX/$fx.ref.json" "$d/one.bin" "$d/tokens.txt" <<'PY'
import json, struct, sys
tok = json.load(open(sys.argv[1]))["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
open(sys.argv[3], "w").write(" ".join(map(str, tok)) + "\n")
PY
    mpirun_np 2 "$ZTRAIN" train --init-from "$FIX/$fx" --stage 3 --ep "$ep" --seq-len 16 \
        --train_micro_batch_size_per_gpu 1 --steps 4 --lr 1e-2 --clip 0 --scheduler.type none \
        --lora-r 4 --lora-alpha 8 --lora-targets "$targets" --train "$d/one.bin" --val "" \
        --ckpt-dir "$d/ck" --ckpt-every 3 --ckpt-keep 2 --metrics "$d/m.jsonl" --sample-tokens 0 \
        --threads 1 > "$d/train.out" 2>&1 &&
        "$ZTRAIN" ckpt export "$d/ck/step-3" --peft "$d/peft" > "$d/export.out" 2>&1 &&
        "$ZTRAIN" ckpt export "$d/ck/step-3" --hf "$d/merged" --merge >> "$d/export.out" 2>&1
    rc=$?
    ok $rc "$fx: LoRA ($targets) at 2 ranks, stage 3, expert parallel $ep, 4 steps; ckpt export step-3 --peft and --hf --merge"
    [ $rc -eq 0 ] || { grep -v '^ ' "$d/train.out" | diag; diag "$d/export.out"; continue; }
    want=$("$ZT_HF_PYTHON" -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"loss\"" in l][3])' "$d/m.jsonl")
    "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft_load.py" "$FIX/$fx" "$d/peft" "$d/merged" \
        "$d/tokens.txt" "$want" > "$d/load.out" 2>&1
    rc=$?
    grep -E '^(ok|not ok) ' "$d/load.out" | diag
    ok $rc "$fx (expert parallel $ep): the PEFT adapter and the merged model load and give ztrain's step-4 loss"
    [ $rc -eq 0 ] || diag "$d/load.out"
    if [ "$ep" != 1 ]; then
        cmp "$d/peft/adapter_model.safetensors" "$tmp/x$fx/peft/adapter_model.safetensors" &&
            cmp "$d/merged/model.safetensors" "$tmp/x$fx/merged/model.safetensors"
        ok $? "$fx: the exports at expert parallel $ep byte-equal to those without"
    fi
done
# --lora-from's adapter_config.json keys (tests/lora_peft_keys.py, whose
# verdicts tests/lora_adapters.sh checks): PEFT loads each variant ztrain
# accepts into exactly the run's adapters (modules, r, scaling, dropout, no
# DoRA, no lora_B bias, nothing else trainable) and each refused selection,
# pattern or setting into something else, or refuses it
d="$tmp/keys"
mkdir -p "$d"
"$ZTRAIN" train --init-from "$FIX/llama" --seq-len 16 --train_micro_batch_size_per_gpu 1 --steps 1 \
    --lora-r 4 --lora-alpha 8 --train "$tmp/xllama/one.bin" --val "" --ckpt-dir "$d/ck" --ckpt-every 1 \
    --sample-tokens 0 --threads 1 > "$d/train.out" 2>&1 &&
    "$ZTRAIN" ckpt export "$d/ck/step-1" --peft "$d/pe" > "$d/export.out" 2>&1 &&
    "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft_keys.py" make "$d/pe" "$d/v"
rc=$?
ok $rc "llama: a LoRA run (q_proj, v_proj) exported --peft, its adapter_config.json variants"
if [ $rc -eq 0 ]; then
    "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft_keys.py" peft "$FIX/llama" "$d/v" > "$d/keys.out" 2>&1
    rc=$?
    grep -E '^(not ok|#) ' "$d/keys.out" | diag
    ok $rc "adapter_config.json keys: PEFT loads what ztrain accepts as ztrain's run, what it refuses otherwise ($(grep -c '^ok' "$d/keys.out") variants)"
    [ $rc -eq 0 ] || tail -5 "$d/keys.out" | diag
fi
done_testing
