#!/bin/bash
# ckpt_stall.sh -- a rank stopped (SIGSTOP) during a checkpoint save and
# during start-up: the job ends within ztrain.comm_timeout_s + a few seconds
# with an error naming the phase, no rank is left behind, and the previous
# checkpoint stays `latest` and verifies (docs/checkpoints.md, "Failure
# model").  The stop comes from the test hook ZT_CKPT_CRASH_AT=stop:<point>
# with ZT_CKPT_CRASH_RANK=1 (or 0).  The final save is synchronous; a rank
# stopped inside a periodic save's background writer (checkpoint.async)
# ends the job the same way.
. "$(dirname "$0")/ckpt_lib.sh"
TIMEOUT=5
BOUND=$((TIMEOUT + 15))

zrun 2 --steps 20 --ckpt-every 10 --ckpt-dir B --resume never
ok $? "base: 20 steps on 2 ranks, checkpoints at 10 and 20"

# srun POINT [RANK [FLAGS]]: resume a copy D of B (FLAGS: --steps 21), stop
# rank RANK (default 1) at POINT; RC, EL
srun() {
    rm -rf D; cp -r B D
    local t0=$SECONDS
    ZT_CKPT_CRASH_AT="stop:$1" ZT_CKPT_CRASH_RANK=${2:-1} timeout -s KILL $((BOUND + 30)) \
        "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 \
        ${3:---steps 21} --ckpt-dir "$T/D" --ztrain.comm_timeout_s=$TIMEOUT > run.out 2> run.err
    RC=$?; EL=$((SECONDS - t0))
    sleep 1
    LEFT=$(pgrep -f "ztrain train.*$T/D" | wc -l)
}

srun save_tensors@21
diag <(grep -E '^ztrain: error|CRASH' run.err)
ok $([ $RC != 0 ] && [ $RC != 137 ] && [ $EL -le $BOUND ] && [ "$LEFT" = 0 ] &&
     grep -q "^ztrain: error: rank 0: .*checkpoint save.*step 21\|^ztrain: error: rank 0: checkpoint: .*(checkpoint save: " run.err; echo $?) \
   "rank 1 stopped during a save: the job ends after ${EL}s (bound ${BOUND}s), exit $RC, the error names the save phase, no rank left"
ok $([ "$(cat D/latest)" = step-20 ] && [ ! -e D/step-21 ] && [ ! -e D/step-21.tmp ] &&
     "$ZTRAIN" ckpt verify D/step-20 > /dev/null 2>&1; echo $?) \
   "step-20 stays latest and verifies; nothing of step-21 is left"
zrun 2 --steps 21 --ckpt-dir D
ok $([ $? = 0 ] && grep -q "resumed from D/step-20 at step 20" run.out; echo $?) "a rerun resumes from step-20"

# a periodic save written in the background (checkpoint.async, the
# default): rank 0 or rank 1 stopped inside its background writer (the
# whole process stops); the other rank times out in a training collective
# (the error then names the save in flight) or in the save's own per-step
# agreement or final wait (named); a collective without a name (the
# preemption agreement, the evaluation) is reported as a timeout only
for r in 1 0; do
    srun save_tensors@22 $r "--steps 24 --ckpt-every 22"
    diag <(grep -E '^ztrain: error|CRASH' run.err)
    ok $([ $RC != 0 ] && [ $RC != 137 ] && [ $EL -le $BOUND ] && [ "$LEFT" = 0 ] &&
         grep -q 'step 22 .*in the background' run.out &&
         grep -Eq "^ztrain: error: rank [01]: .*(checkpoint save at step 22|the background checkpoint save of step 22 in flight is abandoned \(the newest checkpoint is still [^ ]*D/step-20\)|timed out after [0-9]+ s)" run.err &&
         [ "$(cat D/latest)" = step-20 ] && [ ! -e D/step-22 ] && [ ! -e D/step-24 ] &&
         { [ $r = 0 ] || [ ! -e D/step-22.tmp ]; } &&
         "$ZTRAIN" ckpt verify D/step-20 > /dev/null 2>&1; echo $?) \
       "rank $r stopped in its background writer (save of step 22): the job ends after ${EL}s (bound ${BOUND}s), exit $RC, one error (the save or a timeout), no rank left; step-20 stays latest and verifies, step-22 is not committed$([ $r = 1 ] && echo ' and rank 0 removed its .tmp')"
done
# (rank 0 stopped: nobody removes step-22.tmp; the rerun does)
zrun 2 --steps 24 --ckpt-every 22 --ckpt-dir D
ok $([ $? = 0 ] && grep -q "resumed from D/step-20 at step 20" run.out && [ ! -e D/step-22.tmp ] &&
     [ "$(cat D/latest)" = step-24 ]; echo $?) "a rerun resumes from step-20, removes the stale step-22.tmp and saves step-24"

srun startup
diag <(grep -E '^ztrain: error|CRASH' run.err)
ok $([ $RC != 0 ] && [ $RC != 137 ] && [ $EL -le $BOUND ] && [ "$LEFT" = 0 ] &&
     grep -q "^ztrain: error: rank 0: .*start-up" run.err; echo $?) \
   "rank 1 stopped at start-up: the job ends after ${EL}s (bound ${BOUND}s), exit $RC, the error names start-up, no rank left"
done_testing
