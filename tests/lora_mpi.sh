#!/bin/bash
# lora_mpi.sh -- LoRA (docs/lora.md) with `ztrain train` at 1-4 ranks on the
# bundled byte corpus, adapters on every linear layer of the tiny llama
# (configs/llama-tiny.json, random frozen base from the seed) and the tiny gpt2:
#  - ZeRO stages 1-3 at 2-4 ranks, hybrid 2 x 2 and accumulation: per-step
#    losses within 1e-5 relative and the final adapters within 1e-5 of the
#    1-rank stage-0 run;
#  - the cpu-strict backend (device-memory discipline) bitwise equal to cpu,
#    with and without parameter offload;
#  - a resume: 3 steps + 3 resumed steps give bitwise the losses and the
#    checkpoint (adapters and AdamW moments) of 6 straight steps, and a
#    resume at another world size and stage matches within 1e-5;
#  - LoRA's copy2d B^T and bf16 dy bitwise the path of before (ZT_TEST_NO_LORABT=1): llama
#    with sequence parallel 2 and gpt2 checkpointed, bf16 matmuls;
#  - gpt2's bf16 paths with LoRA bitwise the fp32 ones of before (ZT_TEST_NO_GPT16=1): c_attn
#    and c_fc at stage 3 and all-linear at stage 1 checkpointed, 2 ranks, bf16 matmuls;
#  - the adapters' GEMMs reading their bf16 storage bitwise the fp32 adapters rounded per GEMM
#    (ZT_TEST_NO_LORA16=1): llama accumulating 2, gpt2 checkpointed with dropout, and a resume;
#  - a LoRA checkpoint holds only the adapters and their state: its size
#    against a full fine-tuning checkpoint of the same model;
#  - a full fine-tuning checkpoint refuses a LoRA resume and back;
#  - QLoRA (--lora-base nf4 / nf4-dq): 3 ranks at stage 3 (NF4 codes sharded)
#    match 1 rank at stage 0, a resume is bitwise, cpu-strict is bitwise cpu,
#    the base offloaded (--offload params: the NF4 slices in host memory) is
#    bitwise the run without, on cpu and cpu-strict, 2 ranks (nf4, bf16) and
#    1 rank (nf4-dq: the one-rank group's store uploaded, not read in place),
#    and a resume on a base stored otherwise is refused;
#  - ztrain ckpt export --peft, then --lora-from that adapter: on a token file
#    of one window (every step's loss is that window's loss before the step's
#    update) the new run's first loss is the exporting run's next one.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null
STEPS=6
LORA=(--lora-r 4 --lora-alpha 8 --lora-targets all-linear --lr 1e-2)

# run TAG NRANKS CONFIG ARGS...: STEPS steps at a global batch of 12
run() {
    local tag=$1 n=$2 cfg=$3; shift 3
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/$cfg" --train c_train.bin \
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

run ref 1 llama-tiny.json --stage 0 --micro-batch 12 --resume never "${LORA[@]}" &&
    grep -q "^weights: the LoRA adapters are in the final checkpoint" o_ref.txt
ok $? "llama reference: 1 rank, stage 0, adapters on all-linear"
for v in "2 1 6" "3 2 4" "4 3 3"; do
    set -- $v
    run "n$1s$2" "$1" llama-tiny.json --stage "$2" --micro-batch "$3" --resume never "${LORA[@]}" &&
        compare ref "n$1s$2"
    ok $? "llama, $1 ranks, stage $2: losses and adapters match the reference"
done
run h3 4 llama-tiny.json --stage 3 --shard-group 2 --micro-batch 3 --resume never "${LORA[@]}" &&
    compare ref h3
ok $? "llama, hybrid 4 = 2 x 2, stage 3: losses and adapters match the reference"
run a2 2 llama-tiny.json --stage 2 --micro-batch 3 --grad-accum 2 --resume never "${LORA[@]}" &&
    compare ref a2
ok $? "llama, 2 ranks, stage 2, accumulation 2 x micro 3 matches 1 x 12"
run gref 1 tiny.json --stage 0 --micro-batch 12 --resume never "${LORA[@]}" &&
    run g3 3 tiny.json --stage 3 --micro-batch 4 --resume never "${LORA[@]}" && compare gref g3
ok $? "gpt2: 3 ranks, stage 3 match 1 rank, stage 0"

# the device-memory discipline: cpu-strict (every operand must be device memory)
# gives bitwise the run of the cpu backend (2 ranks, stage 3, bf16)
run sc 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --resume never "${LORA[@]}" &&
    run scs 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --resume never \
        --backend cpu-strict "${LORA[@]}" && same sc scs
ok $? "cpu-strict, 2 ranks, stage 3, bf16: losses and checkpoint bitwise those of the cpu backend"
run so 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --offload params --resume never \
    "${LORA[@]}" &&
    run sos 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --offload params \
        --resume never --backend cpu-strict "${LORA[@]}" && same so sos && compare sc so
ok $? "parameter offload (the frozen base's shards in host memory): cpu-strict bitwise cpu, and the run matches the one without"
# LoRA's B^T placed by one copy2d a module, its gradient taken out by one copy2d a module and one
# add a group, and the adapters' backward GEMMs reading the model's bf16 copy of dy (lora.c):
# bitwise the row copies and the rounded dy (ZT_TEST_NO_LORABT=1), bf16 matmuls, llama at 2
# ranks with sequence parallel 2 (each rank's rows: dy and its bf16 copy), stage 3, and gpt2
# at 2 ranks, stage 1, checkpointed
BF=(--bf16.enabled true --ztrain.matmul_precision bf16 --resume never)
run bt 2 llama-tiny.json --stage 3 --micro-batch 6 --grad-accum 2 --sp 2 "${BF[@]}" "${LORA[@]}" &&
    ZT_TEST_NO_LORABT=1 run btn 2 llama-tiny.json --stage 3 --micro-batch 6 --grad-accum 2 --sp 2 "${BF[@]}" \
        "${LORA[@]}" && same bt btn
ok $? "copy2d B^T and bf16 dy: llama, 2 ranks, sequence parallel 2, stage 3, bf16: losses and checkpoint bitwise ZT_TEST_NO_LORABT=1"
run gbt 2 tiny.json --stage 1 --micro-batch 6 --activation-checkpointing blocks "${BF[@]}" \
    "${LORA[@]}" &&
    ZT_TEST_NO_LORABT=1 run gbtn 2 tiny.json --stage 1 --micro-batch 6 \
        --activation-checkpointing blocks "${BF[@]}" "${LORA[@]}" && same gbt gbtn
ok $? "copy2d B^T and bf16 dy: gpt2, 2 ranks, stage 1, checkpointed, bf16: losses and checkpoint bitwise ZT_TEST_NO_LORABT=1"
# gpt2 with LoRA taking the bf16 paths of its matmuls without adapters and the bf16 gradients
# its adapters read (config.h ZT_W16_GPT16): bitwise the fp32 paths (ZT_TEST_NO_GPT16=1).
# (The projections without adapters keep their fp32 outputs in both runs, ZT_TEST_NO_GBRANCH16:
# their bf16 branches, one rounding more, are tests/test_count's gpt_branch16)
CA=(--lora-r 4 --lora-alpha 8 --lora-targets c_attn,c_fc --lr 1e-2)
ZT_TEST_NO_GBRANCH16=1 run g16 2 tiny.json --stage 3 --micro-batch 6 "${BF[@]}" "${CA[@]}" &&
    ZT_TEST_NO_GBRANCH16=1 ZT_TEST_NO_GPT16=1 run g16n 2 tiny.json --stage 3 --micro-batch 6 "${BF[@]}" \
        "${CA[@]}" &&
    same g16 g16n
ok $? "gpt2 bf16 paths with LoRA: c_attn and c_fc, 2 ranks, stage 3, bf16: losses and checkpoint bitwise ZT_TEST_NO_GPT16=1"
run g16a 2 tiny.json --stage 1 --micro-batch 6 --activation-checkpointing blocks "${BF[@]}" \
    "${LORA[@]}" &&
    ZT_TEST_NO_GPT16=1 run g16an 2 tiny.json --stage 1 --micro-batch 6 \
        --activation-checkpointing blocks "${BF[@]}" "${LORA[@]}" && same g16a g16an
ok $? "gpt2 bf16 paths with LoRA: all-linear, 2 ranks, stage 1, checkpointed, bf16: losses and checkpoint bitwise ZT_TEST_NO_GPT16=1"
# the adapters' GEMMs reading the adapter engine's bf16 storage as their weight (lora.h ad16,
# config.h ZT_W16_LORA16): bitwise the fp32 adapters rounded per GEMM (ZT_TEST_NO_LORA16=1) over
# the 6 steps (the bf16 copy follows each optimizer step), bf16 matmuls: llama at 2 ranks, stage
# 2, accumulation 2; gpt2 at 2 ranks, stage 1, checkpointed, with the adapters' dropout; and a
# resume (3 + 3 steps, the bf16 storage restored) bitwise 6 straight steps of the path of before
run l16 2 llama-tiny.json --stage 2 --micro-batch 3 --grad-accum 2 "${BF[@]}" "${LORA[@]}" &&
    ZT_TEST_NO_LORA16=1 run l16n 2 llama-tiny.json --stage 2 --micro-batch 3 --grad-accum 2 \
        "${BF[@]}" "${LORA[@]}" && same l16 l16n
ok $? "bf16 adapters: llama, 2 ranks, stage 2, accumulation 2, bf16: losses and checkpoint bitwise ZT_TEST_NO_LORA16=1"
run g16d 2 tiny.json --stage 1 --micro-batch 6 --activation-checkpointing blocks \
    --ztrain.lora.dropout 0.1 "${BF[@]}" "${LORA[@]}" &&
    ZT_TEST_NO_LORA16=1 run g16dn 2 tiny.json --stage 1 --micro-batch 6 --activation-checkpointing blocks \
        --ztrain.lora.dropout 0.1 "${BF[@]}" "${LORA[@]}" && same g16d g16dn
ok $? "bf16 adapters: gpt2, 2 ranks, stage 1, checkpointed, dropout 0.1, bf16: losses and checkpoint bitwise ZT_TEST_NO_LORA16=1"
BR=(--bf16.enabled true --ztrain.matmul_precision bf16)
STEPS=3 run l16r 2 llama-tiny.json --stage 1 --micro-batch 6 --resume never --ckpt-every 3 "${BR[@]}" \
    "${LORA[@]}" &&
    run l16r 2 llama-tiny.json --stage 1 --micro-batch 6 --resume auto "${BR[@]}" "${LORA[@]}" &&
    grep -q "^checkpoint: resumed from ck_l16r/step-3" o_l16r.txt &&
    ZT_TEST_NO_LORA16=1 run l16rn 2 llama-tiny.json --stage 1 --micro-batch 6 --resume never "${BR[@]}" \
        "${LORA[@]}" && same l16rn l16r
ok $? "bf16 adapters: resume at step 3 (2 ranks, stage 1, bf16): losses and checkpoint bitwise 6 straight steps with ZT_TEST_NO_LORA16=1"

# resume: 3 + 3 steps == 6 steps, bitwise (2 ranks, stage 2)
run r6 2 llama-tiny.json --stage 2 --micro-batch 6 --resume never "${LORA[@]}" &&
    STEPS=3 run r3 2 llama-tiny.json --stage 2 --micro-batch 6 --resume never --ckpt-every 3 "${LORA[@]}" &&
    run r3 2 llama-tiny.json --stage 2 --micro-batch 6 --resume auto "${LORA[@]}" &&
    grep -q "^checkpoint: resumed from ck_r3/step-3" o_r3.txt && same r6 r3
ok $? "resume at step 3 (2 ranks, stage 2): losses and checkpoint bitwise those of 6 straight steps"
STEPS=3 run x3 1 llama-tiny.json --stage 0 --micro-batch 12 --resume never --ckpt-every 3 "${LORA[@]}" &&
    run x3 3 llama-tiny.json --stage 3 --micro-batch 4 --resume auto "${LORA[@]}" && compare ref x3
ok $? "saved on 1 rank at stage 0, resumed on 3 ranks at stage 3: matches the reference"

# QLoRA (--lora-base nf4): the NF4 codes sharded in 64-blocks at stage 3 over 3
# ranks match 1 rank at stage 0; a resume is bitwise; another base storage refused
QL=(--lora-base nf4-dq)
run qref 1 llama-tiny.json --stage 0 --micro-batch 12 --resume never "${LORA[@]}" "${QL[@]}" &&
    run q3 3 llama-tiny.json --stage 3 --micro-batch 4 --resume never "${LORA[@]}" "${QL[@]}" &&
    compare qref q3
ok $? "QLoRA nf4-dq: 3 ranks, stage 3 (codes sharded) match 1 rank, stage 0"
run qr6 2 llama-tiny.json --stage 3 --micro-batch 6 --resume never "${LORA[@]}" --lora-base nf4 &&
    STEPS=3 run qr3 2 llama-tiny.json --stage 3 --micro-batch 6 --resume never --ckpt-every 3 \
        "${LORA[@]}" --lora-base nf4 &&
    run qr3 2 llama-tiny.json --stage 3 --micro-batch 6 --resume auto "${LORA[@]}" --lora-base nf4 &&
    grep -q "^checkpoint: resumed from ck_qr3/step-3" o_qr3.txt && same qr6 qr3
ok $? "QLoRA nf4, resume at step 3 (2 ranks, stage 3): losses and checkpoint bitwise those of 6 straight steps"
run qc 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --resume never \
    "${LORA[@]}" --lora-base nf4 &&
    run qcs 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --resume never \
        --backend cpu-strict "${LORA[@]}" --lora-base nf4 && same qc qcs
ok $? "QLoRA nf4 on cpu-strict, 2 ranks, stage 3, bf16: losses and checkpoint bitwise those of the cpu backend"
run qo 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --offload params --resume never \
    "${LORA[@]}" --lora-base nf4 &&
    run qos 2 llama-tiny.json --stage 3 --micro-batch 6 --bf16.enabled true --offload params \
        --zero_optimization.offload_param.pin_memory true --resume never --backend cpu-strict \
        "${LORA[@]}" --lora-base nf4 && same qc qo && same qc qos
ok $? "QLoRA nf4 with the 4-bit base offloaded (--offload params), 2 ranks, stage 3, bf16: cpu and cpu-strict losses and checkpoint bitwise those without offload"
run qd 1 llama-tiny.json --stage 3 --micro-batch 12 --resume never "${LORA[@]}" "${QL[@]}" &&
    run qdo 1 llama-tiny.json --stage 3 --micro-batch 12 --offload params --resume never \
        --backend cpu-strict "${LORA[@]}" "${QL[@]}" && same qd qdo
ok $? "QLoRA nf4-dq offloaded on 1 rank (stage 3, the store uploaded, not read in place) on cpu-strict: bitwise the cpu run without offload"
run qx 1 llama-tiny.json --stage 0 --micro-batch 12 --resume auto --ckpt-dir ck_qr6 "${LORA[@]}"
grep -q "trained on a base stored as nf4, this run stores it as the compute dtype" o_qx.txt
ok $? "adapters trained on an nf4 base refuse a resume on a base of the compute dtype"

# the size of a LoRA checkpoint against a full one of the same model
STEPS=1 run full 1 llama-tiny.json --stage 0 --micro-batch 12 --resume never --ckpt-every 1
lb=$(stat -c %s ck_ref/step-6/state.h5) fb=$(stat -c %s ck_full/step-1/state.h5)
echo "# LoRA checkpoint $lb bytes, full fine-tuning checkpoint $fb bytes"
[ -n "$lb" ] && [ -n "$fb" ] && [ $((lb * 5)) -lt "$fb" ]
ok $? "the LoRA checkpoint ($lb B) is under a fifth of the full one ($fb B)"
run fl 1 llama-tiny.json --stage 0 --micro-batch 12 --resume auto --ckpt-dir ck_full "${LORA[@]}"
grep -q "a full fine-tuning checkpoint; this run trains LoRA adapters" o_fl.txt
ok $? "a full fine-tuning checkpoint refuses a LoRA resume"
run lf 1 llama-tiny.json --stage 0 --micro-batch 12 --resume auto --ckpt-dir ck_ref
grep -q "holds LoRA adapters (r=4)" o_lf.txt
ok $? "a LoRA checkpoint refuses a full fine-tuning resume"
# --peft out, --lora-from in (one window of 33 byte tokens)
python3 - one.bin <<'PY'
import struct, sys
tok = list(b"Before we proceed any further, hear me")[:33]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
one() {  # one TAG STEPS ARGS...: 2 ranks, stage 3, the one window
    local tag=$1 n=$2; shift 2
    mpirun_np 2 "$ZTRAIN" train --config "$ZT_SRCDIR/configs/llama-tiny.json" --train one.bin --val '' \
        --threads 1 --steps "$n" --sample-tokens 0 --micro-batch 1 --grad-accum 1 --stage 3 \
        --scheduler.type none --clip 0 --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" --resume never \
        "${LORA[@]}" "$@" > "o_$tag.txt" 2>&1 || { diag "o_$tag.txt" | tail -5; return 1; }
}
one e1 4 --ckpt-every 3 && "$ZTRAIN" ckpt export ck_e1/step-3 --peft pe > o_pe.txt 2>&1 &&
    [ -s pe/adapter_config.json ] && [ -s pe/adapter_model.safetensors ] &&
    one e2 2 --lora-from pe && grep -q "start from the PEFT adapter pe" o_e2.txt &&
    python3 - m_e1.jsonl m_e2.jsonl <<'PY'
import json, sys
a = [d["loss"] for d in map(json.loads, open(sys.argv[1])) if "loss" in d]
b = [d["loss"] for d in map(json.loads, open(sys.argv[2])) if "loss" in d]
print("# step-4 loss %.7f, --lora-from step-1 loss %.7f" % (a[3], b[0]))
sys.exit(0 if abs(a[3] - b[0]) <= 1e-6 and a[3] != a[0] else 1)
PY
ok $? "ckpt export --peft, then --lora-from it: the new run's first loss is the old run's next"
! "$ZTRAIN" ckpt export ck_e1/step-3 --hf hfx > o_hfx.txt 2>&1 && grep -q "a LoRA checkpoint (adapters only): export it with --hf OUTDIR --merge" o_hfx.txt && [ ! -e hfx ]
ok $? "ckpt export --hf of a LoRA checkpoint without --merge is refused, pointing at --merge and --peft"
one e3 2 --lora-from pe --lora-r 8
grep -q "the adapter has r=4" o_e3.txt
ok $? "--lora-from an adapter of another rank is refused naming both"
done_testing
