#!/bin/bash
# ckpt_preempt.sh -- preemption without Slurm: SIGUSR2 (or SIGTERM, or the
# configured ztrain.preempt_signal) sent to ONE rank of an mpirun job makes
# every rank stop at the same step boundary after a checkpoint; the program
# exits 3 (documented); a resumed run finishes with the same final loss and
# bitwise the same state as an uninterrupted run, also with periodic saves
# in flight in the background (checkpoint.async) when the signal lands.
# Steps are slowed with the test-only ZT_CKPT_STEP_SLEEP_MS so the signal
# lands mid-run.
. "$(dirname "$0")/ckpt_lib.sh"

zrun 2 --steps 40 --ckpt-dir R --resume never --metrics r.jsonl
ok $? "reference: 40 uninterrupted steps on 2 ranks"
tensor_sums R/step-40 > ref.sums
losses r.jsonl > r.txt

# preempt NP SIGNAL WHICH [extra flags]: start, signal rank WHICH (0-based)
# once 8 steps are logged; sets prc (exit status) and pstep (stopping step)
preempt() {
    local np=$1 sig=$2 which=$3; shift 3
    rm -rf P p1.jsonl
    ZT_CKPT_STEP_SLEEP_MS=40 "$ZT_MPIRUN" --oversubscribe -np "$np" --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch $((12 / np)) --steps 40 --ckpt-dir P --resume never \
        --metrics p1.jsonl "$@" > p.out 2> p.err &
    local mp=$! n=0
    while [ "$(cat p1.jsonl 2>/dev/null | grep -c '"loss"')" -lt 8 ] && [ $n -lt 600 ] &&
          kill -0 $mp 2>/dev/null; do
        sleep 0.02; n=$((n + 1))
    done
    local pid
    pid=$(ps -o pid= --ppid $mp | tr -d ' ' | sed -n "$((which + 1))p")
    kill -"$sig" "$pid"
    wait $mp
    prc=$?
    pstep=$(sed -n 's/.*preempted after step \([0-9]*\).*/\1/p' p.err | head -n 1)
}

# resume_check NAME: resume in P, compare with the reference
resume_check() {
    rm -f p2.jsonl   # a metrics file is appended to on resume (records past the step dropped)
    zrun 2 --steps 40 --ckpt-dir P --metrics p2.jsonl
    local rc=$?
    losses p2.jsonl > p2.txt
    ok $([ $rc = 0 ] && grep -q "resumed from P/step-$pstep at step $pstep" run.out &&
         [ "$(tail -n 1 p2.txt)" = "$(tail -n 1 r.txt)" ] &&
         cmp -s <(sed -n "$((pstep + 1)),40p" r.txt) p2.txt; echo $?) \
       "$1: the resumed run continues from step $pstep and has the reference's losses (final: $(tail -n 1 p2.txt | cut -d' ' -f2))"
    tensor_sums P/step-40 > p.sums 2>&1
    check "$1: final state bitwise equal to the uninterrupted run" cmp -s p.sums ref.sums
}

# periodic saves every 3 steps, written in the background (checkpoint.async,
# the default) and slowed (ZT_CKPT_WRITE_DELAY_MS) so that one is in flight
# when the signal lands: it is committed before the preemption checkpoint;
# the synchronous path: the SIGTERM case
export ZT_CKPT_WRITE_DELAY_MS=5
preempt 2 USR2 1 --ckpt-every 3
diag p.err
ok $([ "$prc" = 3 ]; echo $?) "SIGUSR2 to rank 1 only: mpirun exits 3 (ztrain's preemption exit code)"
ok $([ -n "$pstep" ] && [ "$pstep" -lt 40 ] && [ "$(grep -c 'ztrain: preempted after step' p.err)" = 1 ] &&
     grep -q "preemption: SIGUSR2 received; all ranks stop after step $pstep" p.out; echo $?) \
   "all ranks agreed on step ${pstep:-?}; one line on stderr says so"
"$ZTRAIN" ckpt verify P > /dev/null 2>&1
ok $([ $? = 0 ] && [ "$(cat P/latest)" = step-$pstep ] && [ -z "$(ls P | grep '\.tmp$')" ] &&
     grep -q 'saving step 3 (checkpoint.every, in the background)' p.out; echo $?) \
   "the preemption checkpoint step-$pstep is committed, latest and verifies, as do the background saves before it; no .tmp left"
check "the metrics stop at that step" test "$(grep -c '"loss"' p1.jsonl)" = "$pstep"
resume_check "SIGUSR2"

preempt 2 TERM 0 --ckpt-every 3 --ckpt-async false
ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && grep -q "SIGTERM received" p.out; echo $?) \
   "SIGTERM to rank 0 (always caught), synchronous periodic saves: checkpoint at step ${pstep:-?}, exit 3"
resume_check "SIGTERM"

preempt 2 HUP 1 --preempt-signal SIGHUP
ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && grep -q "SIGHUP received" p.out; echo $?) \
   "ztrain.preempt_signal=SIGHUP: SIGHUP to rank 1 preempts at step ${pstep:-?}, exit 3"

preempt 3 USR2 2
ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && [ "$(cat P/latest)" = "step-$pstep" ]; echo $?) \
   "3 ranks, SIGUSR2 to rank 2: checkpoint step-${pstep:-?}, exit 3"
rm -f p2.jsonl
zrun 2 --steps 40 --ckpt-dir P --metrics p2.jsonl
rc=$?
losses p2.jsonl > p2.txt
rel=$(max_rel r.txt p2.txt)
ok $([ $rc = 0 ] && grep -q "resumed from P/step-$pstep" run.out && [ "$(wc -l < p2.txt)" = $((40 - pstep)) ] &&
     awk -v r="$rel" 'BEGIN { exit !(r != "nan" && r < 1e-5) }'; echo $?) \
   "preempted on 3 ranks, resumed on 2: losses within 1e-5 relative of the reference (max $rel)"

# The Llama-family model (configs/llama-tiny.json: GQA, RMSNorm, rotary, SwiGLU) at ZeRO stage 3: the same
# preemption protocol, and the resumed run bitwise equal to an uninterrupted one.
COMMON=("${COMMON[@]/%configs\/tiny.json/configs/llama-tiny.json}" --stage 3)
zrun 2 --steps 40 --ckpt-dir R --resume never --metrics r.jsonl
ok $? "llama, stage 3: reference of 40 uninterrupted steps on 2 ranks"
check "llama: the run is the llama architecture" grep -q "architecture llama" run.out
tensor_sums R/step-40 > ref.sums
losses r.jsonl > r.txt
preempt 2 USR2 1 --ckpt-every 3
diag p.err
ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && [ "$pstep" -lt 40 ] && [ "$(cat P/latest)" = "step-$pstep" ] &&
     "$ZTRAIN" ckpt verify P > /dev/null 2>&1; echo $?) \
   "llama, stage 3, background saves every 3 steps: SIGUSR2 to rank 1 checkpoints step-${pstep:-?} and exits 3"
resume_check "llama SIGUSR2"
done_testing
