#!/bin/bash
# lora_dropout.sh -- LoRA dropout (--lora-dropout, docs/lora.md) with
# `ztrain train` on the bundled byte corpus, the tiny llama, adapters on
# every linear layer:
#  - 2 ranks at stage 3 and 3 ranks at stage 1 match 1 rank at stage 0
#    (per-step losses and final adapters within 1e-5: the mask depends on
#    the global sample, not on the rank that computes it), and the run
#    differs from the same run without dropout;
#  - cpu-strict bitwise equal to cpu (the dropout op on device memory);
#  - a resume: 3 + 3 steps give bitwise the losses and the checkpoint of
#    6 straight steps (the mask of a step depends on the step, not the run).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null
STEPS=6
LORA=(--lora-r 4 --lora-alpha 8 --lora-targets all-linear --lr 1e-2 --lora-dropout 0.1)

# run TAG NRANKS ARGS...: STEPS steps at a global batch of 12
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/llama-tiny.json" --train c_train.bin \
        --val c_val.bin --threads 1 --steps "$STEPS" --eval-every 0 --sample-tokens 0 \
        --batch-size 12 --scheduler.params.total_num_steps 6 --metrics "m_$tag.jsonl" \
        --ckpt-dir "ck_$tag" "$@" > "o_$tag.txt" 2>&1 || { diag "o_$tag.txt" | tail -5; return 1; }
    "$ZTRAIN" ckpt export "ck_$tag" --output "w_$tag.safetensors" > /dev/null 2>&1
}
compare() {
    python3 "$ZT_SRCDIR/tests/run_compare.py" "m_$1.jsonl" "m_$2.jsonl" "w_$1.safetensors" "w_$2.safetensors" 1e-5 "$STEPS"
}
same() {   # losses equal and every checkpoint tensor's checksum equal
    python3 - "m_$1.jsonl" "m_$2.jsonl" <<'PY' || return 1
import json, sys
def losses(p): return [(d["step"], d["loss"]) for d in map(json.loads, open(p)) if "loss" in d]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
sys.exit(0 if a and a[-len(b):] == b and a[-1][0] == 6 else 1)
PY
    "$ZTRAIN" ckpt inspect "ck_$1" --tensors --no-config | sed -n '/^tensors:/,$p' > t_$1.txt &&
    "$ZTRAIN" ckpt inspect "ck_$2" --tensors --no-config | sed -n '/^tensors:/,$p' > t_$2.txt &&
    [ "$(grep -c lora_ "t_$1.txt")" -gt 20 ] && cmp -s "t_$1.txt" "t_$2.txt"
}
differ() {   # the last losses of two runs differ
    python3 - "m_$1.jsonl" "m_$2.jsonl" <<'PY'
import json, sys
def losses(p): return [d["loss"] for d in map(json.loads, open(p)) if "loss" in d]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print("# last loss %.7f with dropout, %.7f without" % (a[-1], b[-1]))
sys.exit(0 if len(a) == len(b) == 6 and a[-1] != b[-1] else 1)
PY
}

run ref 1 --stage 0 --micro-batch 12 --resume never "${LORA[@]}" &&
    run off 1 --stage 0 --micro-batch 12 --resume never "${LORA[@]}" --lora-dropout 0 && differ ref off
ok $? "1 rank, stage 0, dropout 0.1: trains, and its losses differ from dropout 0"
run n2s3 2 --stage 3 --micro-batch 6 --resume never "${LORA[@]}" && compare ref n2s3
ok $? "2 ranks, stage 3, dropout 0.1: losses and adapters match 1 rank"
run n3s1 3 --stage 1 --micro-batch 2 --grad-accum 2 --resume never "${LORA[@]}" && compare ref n3s1
ok $? "3 ranks, stage 1, accumulation 2 x micro 2, dropout 0.1: losses and adapters match 1 rank"
run sc 2 --stage 2 --micro-batch 6 --resume never "${LORA[@]}" &&
    run scs 2 --stage 2 --micro-batch 6 --resume never --backend cpu-strict "${LORA[@]}" && same sc scs
ok $? "cpu-strict, 2 ranks, stage 2, dropout 0.1: losses and checkpoint bitwise those of cpu"
STEPS=3 run r3 2 --stage 2 --micro-batch 6 --resume never --ckpt-every 3 "${LORA[@]}" &&
    run r3 2 --stage 2 --micro-batch 6 --resume auto "${LORA[@]}" &&
    grep -q "^checkpoint: resumed from ck_r3/step-3" o_r3.txt && same sc r3
ok $? "resume at step 3 (2 ranks, stage 2, dropout 0.1): losses and checkpoint bitwise those of 6 straight steps"
done_testing
