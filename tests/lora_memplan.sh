#!/bin/bash
# lora_memplan.sh -- a LoRA run's device peak is the planner's, exactly
# (docs/memory.md, docs/lora.md): `ztrain train --init-from` a
# tests/fixtures/hf model with LoRA adapters on cpu-strict (which accounts
# every device allocation) at ZeRO stages 0-3, fp32 and bf16, with and without
# activation checkpointing, 1 rank (and 2 ranks at stages 1-3), QLoRA (nf4,
# nf4-dq, bf16; at stage 3 also with the 4-bit base offloaded), one step:
# the measured device peak equals the prediction of the run's memory line and
# `ztrain estimate --json`'s peak_bytes for the same configuration (the
# frozen base's load through a device buffer of its largest unit, and
# ztrain.lora.from's through one of all the adapters, are counted).
. "$(dirname "$0")/lib.sh"
need_python3
in_tmpdir
export OMP_NUM_THREADS=1
FIX="$ZT_SRCDIR/tests/fixtures/hf"
token_file one.bin 5 17 3 88 41 0 63 29 12 77 50 9 33 70 2 91 46
# args FIXTURE STAGE DTYPE ACT: the configuration's flags into A
args() {
    A=(--init-from "$FIX/$1" --seq-len 16 --train_micro_batch_size_per_gpu 1 --train one.bin --val ""
       --lora-r 4 --lora-alpha 8 --zero_optimization.stage "$2" --backend cpu-strict
       --activation-checkpointing "$4")
    [ "$3" = bf16 ] && A+=(--bf16.enabled true)
    case $1 in gpt2) A+=(--lora-targets c_attn,mlp.c_proj) ;; qwen2) A+=(--lora-targets all-linear) ;; esac
}
# peak NP NAME EXTRA...: one step of the configuration in A on NP ranks
peak() {
    local np=$1 name=$2; shift 2
    local out="o_$name.txt" meas pred est
    if [ "$np" = 1 ]; then
        "$ZTRAIN" train "${A[@]}" --steps 1 --lr 1e-3 --clip 0 --scheduler.type none --sample-tokens 0 \
            --threads 1 --memory-report --resume never --ckpt-dir "ck_$name" "$@" > "$out" 2>&1
    else
        mpirun_np "$np" "$ZTRAIN" train "${A[@]}" --steps 1 --lr 1e-3 --clip 0 --scheduler.type none \
            --sample-tokens 0 --threads 1 --memory-report --resume never --ckpt-dir "ck_$name" "$@" > "$out" 2>&1
    fi
    local rc=$?
    read -r meas pred <<< "$(dev_peaks "$out")"
    est=$("$ZTRAIN" estimate --world-size "$np" "${A[@]}" "$@" --json 2> "e_$name.txt" |
          sed -n 's/^  "peak_bytes": \([0-9]*\),$/\1/p')
    [ $rc = 0 ] && [ -n "$meas" ] && [ "$meas" = "$pred" ] && [ "$meas" = "$est" ]
    ok $? "$name: device peak measured ${meas:-?} bytes == the run's prediction ${pred:-?} == estimate's ${est:-?}"
    [ $rc = 0 ] && [ -n "$meas" ] || grep -i error "$out" "e_$name.txt" | diag
}
for fx in llama gpt2; do
    for stage in 0 1 2 3; do
        for dt in fp32 bf16; do
            args "$fx" "$stage" "$dt" none
            peak 1 "$fx, stage $stage, $dt"
        done
        args "$fx" "$stage" fp32 blocks
        peak 1 "$fx, stage $stage, fp32, checkpointing blocks"
    done
done
for stage in 1 2 3; do
    for dt in fp32 bf16; do
        args qwen2 "$stage" "$dt" none
        peak 2 "qwen2 all-linear on 2 ranks, stage $stage, $dt"
    done
done
# QLoRA (an NF4 base, bf16: the embeddings' unit has no fp32 copy, the lookup reads its bf16 rest)
for stage in 0 3; do
    args llama "$stage" bf16 blocks
    peak 1 "llama QLoRA nf4, stage $stage, bf16, checkpointing blocks" --lora-base nf4
done
args llama 3 bf16 none
peak 2 "llama QLoRA nf4-dq on 2 ranks, stage 3, bf16" --lora-base nf4-dq
# the 4-bit base offloaded (--offload params): its slices host memory, uploaded into the
# gathered copies (one rank too: not read in place); the device keeps nf4-dq's absmax2
args llama 3 bf16 blocks
peak 1 "llama QLoRA nf4 offloaded, stage 3, bf16, checkpointing blocks" --lora-base nf4 --offload params \
    --zero_optimization.offload_param.pin_memory true
args llama 3 bf16 none
peak 2 "llama QLoRA nf4-dq offloaded on 2 ranks, stage 3, bf16" --lora-base nf4-dq --offload params
# the adapters from a PEFT adapter (ztrain.lora.from): a step of the llama
# stage-0 run's checkpoint, exported
"$ZTRAIN" ckpt export "ck_llama, stage 0, fp32/step-1" --peft pe > o_pe.txt 2>&1
rc=$?
ok $rc "the llama stage-0 run's adapters exported --peft"
[ $rc = 0 ] || diag o_pe.txt
for dt in fp32 bf16; do
    args llama 0 "$dt" none
    peak 1 "llama, stage 0, $dt, --lora-from" --lora-from pe
done
done_testing
