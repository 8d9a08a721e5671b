#!/bin/bash
# lora_peft.sh -- LoRA against PEFT itself (optional: needs a Python that
# imports torch + transformers + peft; SKIPs visibly otherwise).  For the
# llama, qwen2 and gpt2 fixtures of tests/fixtures/hf and a few LoRA
# settings (all-linear, PEFT's default targets with rslora, GPT-2's shared
# c_proj name), tests/lora_ref writes ztrain's adapters (every lora_B set
# non-zero), loss, adapter gradients and 3 AdamW steps; tests/lora_peft.py
# puts the same adapters into peft.get_peft_model(fixture) and checks the
# trainable parameters are exactly those, the loss (5e-6), every lora_A /
# lora_B gradient (2e-5 of its largest entry, test_hf_golden's tolerance),
# the 3 step losses and the loss after them (1e-5).
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
gpt2 2 4 all-linear false
LIST
done_testing
