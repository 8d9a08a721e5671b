#!/bin/bash
# qlora_bnb.sh -- QLoRA against bitsandbytes + PEFT (optional: needs a Python
# that imports torch + transformers + peft + bitsandbytes; SKIPs visibly
# otherwise).  For the llama fixture of tests/fixtures/hf, ztrain with
# ztrain.lora.base=nf4 and nf4-dq (tests/lora_ref, ZT_LORA_BASE) against the
# fixture loaded with BitsAndBytesConfig(load_in_4bit=True,
# bnb_4bit_quant_type="nf4"[, bnb_4bit_use_double_quant=True]) and
# peft.get_peft_model (tests/lora_peft.py): the loss, every lora_A / lora_B
# gradient and 3 AdamW steps, at lora_peft.sh's tolerances.  Then a QLoRA
# run (nf4-dq, 2 ranks, stage 3) exported with --peft (loaded by PEFT on the
# bitsandbytes base) and --hf --merge (the dequantized weights + s B A, loaded
# by transformers in fp32): both give ztrain's loss (1e-5).
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
# the exports of a QLoRA run: 2 ranks, stage 3, nf4-dq, 4 steps on one window of the fixture's tokens
d="$tmp/x"
mkdir -p "$d"
"$ZT_HF_PYTHON" - "$FIX/llama.ref.json" "$d/one.bin" "$d/tokens.txt" <<'PY'
import json, struct, sys
tok = json.load(open(sys.argv[1]))["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
open(sys.argv[3], "w").write(" ".join(map(str, tok)) + "\n")
PY
mpirun_np 2 "$ZTRAIN" train --init-from "$FIX/llama" --stage 3 --seq-len 16 \
    --train_micro_batch_size_per_gpu 1 --steps 4 --lr 1e-2 --clip 0 --scheduler.type none \
    --lora-r 4 --lora-alpha 8 --lora-targets q_proj,v_proj,down_proj --lora-base nf4-dq \
    --train "$d/one.bin" --val "" --ckpt-dir "$d/ck" --ckpt-every 3 --ckpt-keep 2 \
    --metrics "$d/m.jsonl" --sample-tokens 0 --threads 1 > "$d/train.out" 2>&1 &&
    "$ZTRAIN" ckpt export "$d/ck/step-3" --peft "$d/peft" > "$d/export.out" 2>&1 &&
    "$ZTRAIN" ckpt export "$d/ck/step-3" --hf "$d/merged" --merge >> "$d/export.out" 2>&1
rc=$?
ok $rc "llama nf4-dq: QLoRA at 2 ranks, stage 3, 4 steps; ckpt export step-3 --peft and --hf --merge"
if [ $rc -eq 0 ]; then
    want=$("$ZT_HF_PYTHON" -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"loss\"" in l][3])' "$d/m.jsonl")
    ZT_LORA_BASE=nf4-dq "$ZT_HF_PYTHON" "$ZT_SRCDIR/tests/lora_peft_load.py" "$FIX/llama" "$d/peft" \
        "$d/merged" "$d/tokens.txt" "$want" > "$d/load.out" 2>&1
    rc=$?
    grep -E '^(ok|not ok) ' "$d/load.out" | diag
    ok $rc "llama nf4-dq: the PEFT adapter on the bitsandbytes base and the merged model (dequantized W + s B A) give ztrain's step-4 loss"
    [ $rc -eq 0 ] || diag "$d/load.out"
else
    grep -v '^ ' "$d/train.out" | diag; diag "$d/export.out"
fi
done_testing
