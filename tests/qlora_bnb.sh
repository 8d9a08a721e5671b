#!/bin/bash
# qlora_bnb.sh -- QLoRA against bitsandbytes + PEFT (optional: needs a Python
# that imports torch + transformers + peft + bitsandbytes; SKIPs visibly
# otherwise).  For the llama fixture of tests/fixtures/hf, ztrain with
# ztrain.lora.base=nf4 and nf4-dq (tests/lora_ref, ZT_LORA_BASE) against the
# fixture loaded with BitsAndBytesConfig(load_in_4bit=True,
# bnb_4bit_quant_type="nf4"[, bnb_4bit_use_double_quant=True]) and
# peft.get_peft_model (tests/lora_peft.py): the loss, every lora_A / lora_B
# gradient and 3 AdamW steps, at lora_peft.sh's tolerances.
#
# ZT_HF_PYTHON picks the Python (default /opt/hfref/bin/python if present, else python3).
. "$(dirname "$0")/lib.sh"
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi
if ! "$ZT_HF_PYTHON" -c 'import torch, transformers, peft, bitsandbytes' >/dev/null 2>&1; then
    echo "ok 1 # SKIP torch + transformers + peft + bitsandbytes not importable (by $ZT_HF_PYTHON)"
    echo "1..1"
    exit 0
fi
FIX="$ZT_SRCDIR/tests/fixtures/hf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 PYTHONHASHSEED=0
for base in nf4 nf4-dq; do
    tag="llama $base r=4 alpha=8 all-linear"
    ZT_LORA_BASE=$base "$ZT_BUILDDIR/tests/lora_ref" "$FIX/llama" "$FIX/llama.ref.json" 4 8 all-linear \
        false "$tmp/z.json" > "$tmp/ref.out" 2>&1
    rc=$?
    ok $rc "$tag: ztrain's adapters, gradients and 3 steps on the NF4 base (tests/lora_ref)"
    [ $rc -eq 0 ] || { diag "$tmp/ref.out"; continue; }
    ZT_LORA_BASE=$base "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft.py" "$FIX/llama" "$tmp/z.json" 4 8 \
        false > "$tmp/peft.out" 2>&1
    rc=$?
    grep -E '^(ok|not ok|#) ' "$tmp/peft.out" | grep -v ' shape (' | diag
    ok $rc "$tag: bitsandbytes + PEFT agree (loss, every lora_A / lora_B gradient, 3 AdamW steps)"
    [ $rc -eq 0 ] || diag "$tmp/peft.out"
done
done_testing
