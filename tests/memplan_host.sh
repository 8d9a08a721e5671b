#!/bin/bash
# memplan_host.sh -- the run's own "memory peak per rank: accounted A bytes,
# predicted P bytes" line has A == P (docs/memory.md, Accuracy) for the runs
# that used to differ:
#  - cpu backend, --init-from a tests/fixtures/hf model, with a token file
#    shorter than the validation scan's chunk: a dense Llama, a MoE (1 rank
#    and 2 ranks with expert parallelism), LoRA on the Llama: the scan buffer
#    is the one the plan counts whatever the file's size;
#  - cpu-strict (a device backend): LoRA and full fine-tuning, the final
#    checkpoint save's host staging buffer is predicted (and the device peak
#    still is exact); with checkpoint.final false there is none, and none is
#    predicted; with optimizer offload the state is host memory: none either.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export OMP_NUM_THREADS=1
FIX="$ZT_SRCDIR/tests/fixtures/hf"
python3 - <<'PY' || { echo "Bail out! python3 failed"; exit 1; }
import struct
tok = [5, 17, 3, 88, 41, 0, 63, 29, 12, 77, 50, 9, 33, 70, 2, 91, 46]
hdr = [20240520, 1, len(tok)] + [0] * 253
open("one.bin", "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
# run NP NAME ARGS...: one step on NP ranks; the run's accounted peak ==
# its predicted peak (and, on cpu-strict, the device peak too)
run() {
    local np=$1 name=$2; shift 2
    local out="o_${np}_$RANDOM.txt" acc pred meas dpred
    local A=(train --seq-len 16 --train_micro_batch_size_per_gpu 1 --train one.bin --val "" --steps 1
             --lr 1e-3 --clip 0 --scheduler.type none --sample-tokens 0 --threads 1 --memory-report
             --resume never --ckpt-dir "ck_$RANDOM" "$@")
    if [ "$np" = 1 ]; then "$ZTRAIN" "${A[@]}" > "$out" 2>&1; else mpirun_np "$np" "$ZTRAIN" "${A[@]}" > "$out" 2>&1; fi
    local rc=$?
    read -r acc pred <<< "$(sed -n 's/^memory peak per rank: accounted \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' "$out" | head -1)"
    local good=1
    [ $rc = 0 ] && [ -n "$acc" ] && [ "$acc" = "$pred" ] || good=0
    local dev=""
    if grep -q -- "cpu-strict" <<< "$*"; then
        read -r meas dpred <<< "$(sed -n 's/.*device memory peak per rank (.*): measured \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' "$out" | head -1)"
        [ -n "$meas" ] && [ "$meas" = "$dpred" ] || good=0
        dev="; device peak measured ${meas:-?} == predicted ${dpred:-?}"
    fi
    [ $good = 1 ]
    ok $? "$name: accounted peak ${acc:-?} bytes == predicted ${pred:-?}$dev"
    [ $rc = 0 ] && [ -n "$acc" ] || grep -i error "$out" | diag
}
run 1 "cpu, llama" --init-from "$FIX/llama"
run 1 "cpu, qwen2_moe" --init-from "$FIX/qwen2_moe"
run 2 "cpu, qwen2_moe, 2 ranks, expert_parallel_size 2" --init-from "$FIX/qwen2_moe" --expert_parallel_size 2
run 1 "cpu, llama, LoRA" --init-from "$FIX/llama" --lora-r 4 --lora-alpha 8
run 1 "cpu, qwen2_moe, LoRA q_proj,v_proj" --init-from "$FIX/qwen2_moe" --lora-r 4 --lora-alpha 8 --lora-targets q_proj,v_proj
run 1 "cpu-strict, llama, LoRA" --init-from "$FIX/llama" --lora-r 4 --lora-alpha 8 --backend cpu-strict
run 1 "cpu-strict, llama, LoRA, bf16" --init-from "$FIX/llama" --lora-r 4 --lora-alpha 8 --backend cpu-strict \
    --bf16.enabled true
run 1 "cpu-strict, llama" --init-from "$FIX/llama" --backend cpu-strict
run 1 "cpu-strict, llama, LoRA, checkpoint.final false" --init-from "$FIX/llama" --lora-r 4 --lora-alpha 8 \
    --backend cpu-strict --ztrain.checkpoint.final false
run 1 "cpu-strict, llama, stage 1, optimizer offload" --init-from "$FIX/llama" --backend cpu-strict \
    --zero_optimization.stage 1 --zero_optimization.offload_optimizer.device cpu
done_testing
