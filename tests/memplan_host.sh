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
#    predicted; with optimizer offload the state is host memory: none either;
#  - cpu-strict on 2 ranks, stages 0-3 (a GPT-2, fp32 and bf16 with optimizer
#    offload): the host-staged collectives' buffers (comm_staged.c);
#  - --init-from on 2 ranks (cpu: rank 0's read buffer; cpu-strict: every
#    rank's) and a checkpoint restore (cpu-strict, 1 and 2 ranks, no save
#    after it): the load's 16 MiB host buffer, then the restored state's
#    all-gathers.
. "$(dirname "$0")/lib.sh"
need_python3
in_tmpdir
export OMP_NUM_THREADS=1
FIX="$ZT_SRCDIR/tests/fixtures/hf"
token_file one.bin 5 17 3 88 41 0 63 29 12 77 50 9 33 70 2 91 46
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
        read -r meas dpred <<< "$(dev_peaks "$out")"
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
for s in 0 1 2; do
    run 2 "cpu-strict, 2 ranks, stage $s" --backend cpu-strict --zero_optimization.stage $s
done
run 2 "cpu-strict, 2 ranks, stage 3, n_embd 256, checkpoint.final false" --backend cpu-strict \
    --zero_optimization.stage 3 --n-embd 256 --ztrain.checkpoint.final false
run 2 "cpu-strict, 2 ranks, stage 2, overlap_comm false" --backend cpu-strict --zero_optimization.stage 2 \
    --zero_optimization.overlap_comm false
run 2 "cpu-strict, 2 ranks, stage 2, bf16, bf16 reductions" --backend cpu-strict --zero_optimization.stage 2 \
    --bf16.enabled true --communication_data_type bf16
run 2 "cpu-strict, 2 ranks, gpt2, bf16, stage 0" --init-from "$FIX/gpt2" --backend cpu-strict \
    --bf16.enabled true --zero_optimization.stage 0
for s in 2 3; do
    run 2 "cpu-strict, 2 ranks, gpt2, bf16, stage $s, optimizer offload" --init-from "$FIX/gpt2" \
        --backend cpu-strict --bf16.enabled true --zero_optimization.stage $s \
        --zero_optimization.offload_optimizer.device cpu
done
# a restore on 2 ranks: step 1 saved, then resumed with no save after it
# (nothing left to train: the restore is the peak)
mpirun_np 2 "$ZTRAIN" train --seq-len 16 --train one.bin --val "" --steps 1 --sample-tokens 0 --threads 1 \
    --resume never --ckpt-dir R --backend cpu-strict > save.txt 2>&1
check "cpu-strict, 2 ranks: the checkpoint to resume is saved" test -d R/step-1
run 2 "cpu-strict, 2 ranks, resumed, nothing left to train, checkpoint.final false" --backend cpu-strict \
    --ckpt-dir R --resume auto --ztrain.checkpoint.final false
# a Hugging Face load's read buffer (rank 0) is accounted: the run's
# workspace peak holds its ZT_CKPT_STAGE_ELEMS floats
read -r a b <<< "$(sed -n 's/^#define ZT_CKPT_STAGE_ELEMS ((size_t)\([0-9]*\) << \([0-9]*\))$/\1 \2/p' \
                  "$ZT_SRCDIR/libtrain/state.h")"
stage=$(( ${a:-0} * (1 << ${b:-0}) * 4 ))
"$ZTRAIN" train --seq-len 16 --train one.bin --val "" --steps 1 --sample-tokens 0 --threads 1 \
    --resume never --ckpt-dir W --init-from "$FIX/llama" --memory-report --metrics w.jsonl > w.txt 2>&1
ws=$(sed -n 's/.*"memory": {.*"workspace": \[[0-9]*, \([0-9]*\)\].*/\1/p' w.jsonl | head -1)
ok $([ "$stage" -gt 0 ] && [ -n "$ws" ] && [ "$ws" -ge "$stage" ]; echo $?) \
   "cpu, llama, --init-from: the accounted workspace peak ${ws:-?} holds the load's buffer ($stage bytes)"
done_testing
