#!/bin/bash
# sft_mpi.sh -- masked-loss (SFT) training is independent of the world size,
# the ZeRO stage and the accumulation: per-step losses, validation losses
# and final parameters of 1 to 4 ranks, stages 0-3 and micro-batch splits
# against the 1-rank stage-0 run, on chat data made by ztrain prep --sft
# (llama3 template, tokenizer fixture, assistant-only mask).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "no python3 (compares the metrics files)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

"$ZTRAIN" prep --sft --input "$ZT_SRCDIR/tests/data/sft/chats.jsonl" --tokenizer "$ZT_SRCDIR/tests/fixtures/tok/llama3" \
    --template llama3 --seq-len 64 --allow-split --output c --val-fraction 0.25 > prep.out 2>&1
ok $? "prep --sft (llama3, assistant mask, seq_len 64)"
# every window has pad / prompt tokens: the mask really removes targets
python3 - c_train.sft <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read(); h = struct.unpack("<256i", b[:1024])
n, W, es = h[2], h[3], h[4]; R = 4 + W * es + W
counts = [struct.unpack("<I", b[1024 + w * R:1028 + w * R])[0] for w in range(n)]
print("# %d windows of %d tokens, %d of %d targets counted" % (n, W, sum(counts), n * (W - 1)))
sys.exit(0 if n >= 12 and 0 < sum(counts) < n * (W - 1) // 2 else 1)
PY
ok $? "the train file masks most targets"
. "$ZT_SRCDIR/tests/world_lib.sh"
RUN_ARGS=(--train c_train.sft --val c_val.sft --vocab 1536 --context 64 --seq-len 64 --eval-every 10
          --eval-batch-size 12 --eval-batches 1)
check_stages "masked losses"
check_accum
# resume: 10 steps + checkpoint, then a new process resumes and runs to 20;
# the losses and the weights are those of the uninterrupted run (the LR
# schedule's length fixed at 20 steps in all three runs)
resume_run() {  # resume_run TAG STEPS ARGS...
    local tag=$1 steps=$2; shift 2
    mpirun_np 2 "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.sft --val c_val.sft \
        --vocab 1536 --context 64 --seq-len 64 --threads 1 --steps "$steps" --eval-every 0 --sample-tokens 0 \
        --stage 2 --micro-batch 3 --grad-accum 2 --scheduler.params.total_num_steps 20 --save "w_$tag.bin" \
        --metrics "m_$tag.jsonl" "$@" \
        > "o_$tag.txt" 2>&1
}
resume_run r0 20 --ckpt-dir ck_r0 --resume never && resume_run r1 10 --ckpt-dir ck_r --resume never &&
    resume_run r2 20 --ckpt-dir ck_r && grep -q "resumed from ck_r/step-10 at step 10" o_r2.txt &&
    python3 - m_r0.jsonl m_r1.jsonl m_r2.jsonl <<'PY' && cmp -s w_r0.bin w_r2.bin
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2]) + losses(sys.argv[3])
sys.exit(0 if len(a) == 20 and a == b else 1)
PY
ok $? "SFT data, 2 ranks, stage 2: 10 steps + checkpoint + resume to 20 == 20 steps (losses, weights bitwise)"
[ -f o_r2.txt ] && ! grep -q "resumed from" o_r2.txt && diag o_r2.txt
# LoRA on the masked loss: adapters only (all-linear, r 4), 1 rank stage 0
# against 2 ranks stage 3 with accumulation 2: the same losses and eval losses
lora_run() {  # lora_run TAG NP ARGS...
    local tag=$1 np=$2; shift 2
    mpirun_np "$np" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.sft --val c_val.sft \
        --vocab 1536 --context 64 --seq-len 64 --threads 1 --steps 6 --eval-every 3 --eval-batch-size 12 \
        --eval-batches 1 --sample-tokens 0 --resume never --batch-size 12 --lora-r 4 --lora-alpha 8 \
        --lora-targets all-linear --metrics "m_$tag.jsonl" "$@" > "o_$tag.txt" 2>&1
}
lora_run l1 1 --stage 0 --micro-batch 12 && lora_run l2 2 --stage 3 --micro-batch 3 --grad-accum 2 &&
    python3 - m_l1.jsonl m_l2.jsonl <<'PY'
import json, sys
def vals(p): return [(k, r[k]) for r in map(json.loads, open(p)) for k in ("loss", "val_loss") if k in r]
a, b = vals(sys.argv[1]), vals(sys.argv[2])
print("# LoRA SFT: %d values, worst relative difference %.1e" % (len(a), max(
    [abs(x[1] - y[1]) / abs(x[1]) for x, y in zip(a, b)] or [1])))
sys.exit(0 if len(a) == len(b) == 8 and all(x[0] == y[0] and abs(x[1] - y[1]) <= 1e-6 * abs(x[1])
                                            for x, y in zip(a, b)) else 1)
PY
ok $? "LoRA on SFT data: 2 ranks, stage 3, accumulation 2 == 1 rank, stage 0 (losses, eval losses)"
[ -f m_l2.jsonl ] || diag o_l2.txt
# the masked mean is not the unmasked one: a run on the same windows with
# every target counted reports different losses
"$ZTRAIN" prep --sft --input "$ZT_SRCDIR/tests/data/sft/chats.jsonl" --tokenizer "$ZT_SRCDIR/tests/fixtures/tok/llama3" \
    --template llama3 --seq-len 64 --allow-split --mask all --output c_all --val-fraction 0.25 > /dev/null 2>&1 &&
    cp c_all_train.sft c_train.sft && cp c_all_val.sft c_val.sft && run all 1 --stage 0 --micro-batch 12
python3 - m_ref.jsonl m_all.jsonl <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"loss"' in l]
sys.exit(0 if len(a) == len(b) == 20 and abs(a[0] - b[0]) > 1e-3 else 1)
PY
ok $? "control: --mask all gives other losses than the assistant mask"
done_testing
