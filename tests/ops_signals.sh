#!/bin/bash
# ops_signals.sh -- every documented preemption signal sent to the launcher
# ends with exit 3 and one "preempted" line: jobscripts/ztrain-mpirun.sh
# turns SIGTERM/SIGHUP/SIGUSR2 into SIGUSR2 for mpirun to forward (Open MPI's
# mpirun itself aborts on SIGTERM with exit 1), and ztrain catches SIGUSR2
# whatever ztrain.preempt_signal says (issue 16, item 3).
. "$(dirname "$0")/ckpt_lib.sh"
mkdir bin && ln -s "$ZTRAIN" bin/ztrain
cp "$ZT_SRCDIR/configs/tiny.json" tiny.json

# launch SIG [flags]: start the wrapper on 2 ranks, send SIG to the wrapper
# once 5 steps are logged (of 400: a loaded machine may take seconds to
# forward the signal); sets prc and pstep
launch() {
    local sig=$1; shift
    rm -rf P m.jsonl
    PATH="$T/bin:$PATH" NP=2 MPIRUN="$ZT_MPIRUN" MPIRUN_ARGS="--oversubscribe --bind-to none" \
        STAGE=1 DATALOADERS=1 CKPT_DIR="$T/P" RESUME=never ZT_CKPT_STEP_SLEEP_MS=60 \
        bash "$ZT_SRCDIR/jobscripts/ztrain-mpirun.sh" tiny.json "${COMMON[@]:2}" --micro-batch 6 \
        --steps 400 --metrics m.jsonl "$@" > w.out 2> w.err &
    local wp=$! n=0
    while [ "$(cat m.jsonl 2>/dev/null | grep -c '"loss"')" -lt 5 ] && [ $n -lt 1500 ] &&
          kill -0 $wp 2>/dev/null; do
        sleep 0.02; n=$((n + 1))
    done
    kill -"$sig" $wp
    wait $wp
    prc=$?
    pstep=$(sed -n 's/.*preempted after step \([0-9]*\).*/\1/p' w.err | head -n 1)
}
# a signal ignored when the test started (nohup: SIGHUP) cannot be trapped
# by a shell started from it (bash keeps it ignored)
ignored() {   # ignored SIGNUM: 0 if this shell ignores it
    local mask
    mask=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status 2>/dev/null)
    [ -n "$mask" ] && [ $(( 0x$mask >> ($1 - 1) & 1 )) = 1 ]
}
for s in TERM HUP USR2; do
    if [ $s = HUP ] && ignored 1; then
        skip "SIGHUP to ztrain-mpirun.sh" "SIGHUP is ignored in this test's environment (started under nohup?)"
        continue
    fi
    launch $s
    ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && [ "$pstep" -lt 400 ] &&
         [ "$(grep -c 'ztrain: preempted after step' w.err)" = 1 ] && [ "$(cat P/latest)" = "step-$pstep" ]; echo $?) \
       "SIG$s to ztrain-mpirun.sh: exit $prc (3 expected), one preempted line, checkpoint step-${pstep:-?}"
    [ "$prc" = 3 ] || diag w.err
done
# a bare mpirun: SIGUSR2 (the signal docs/production.md names for it) is
# forwarded to every rank and mpirun's status is theirs, 3
rm -rf P m.jsonl
ZT_CKPT_STEP_SLEEP_MS=60 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 --steps 400 \
    --ckpt-dir P --resume never --metrics m.jsonl > w.out 2> w.err &
mp=$! n=0
while [ "$(cat m.jsonl 2>/dev/null | grep -c '"loss"')" -lt 5 ] && [ $n -lt 1500 ] && kill -0 $mp 2>/dev/null; do
    sleep 0.02; n=$((n + 1))
done
kill -USR2 $mp
wait $mp; prc=$?
pstep=$(sed -n 's/.*preempted after step \([0-9]*\).*/\1/p' w.err | head -n 1)
ok $([ "$prc" = 3 ] && [ -n "$pstep" ] && [ "$(grep -c 'ztrain: preempted after step' w.err)" = 1 ] &&
     [ "$(cat P/latest)" = "step-$pstep" ]; echo $?) \
   "SIGUSR2 to a bare mpirun: exit $prc (3 expected), one preempted line, checkpoint step-${pstep:-?}"
[ "$prc" = 3 ] || diag w.err
launch TERM --preempt-signal SIGHUP
ok $([ "$prc" = 3 ] && [ -n "$pstep" ]; echo $?) \
   "ztrain.preempt_signal=SIGHUP: SIGTERM to the launcher still preempts (SIGUSR2 is always caught), exit $prc"
done_testing
