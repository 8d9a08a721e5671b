#!/bin/bash
# ckpt_stall.sh -- a rank stopped (SIGSTOP) during a checkpoint save and
# during start-up: the job ends within ztrain.comm_timeout_s + a few seconds
# with an error naming the phase, no rank is left behind, and the previous
# checkpoint stays `latest` and verifies (docs/checkpoints.md, "Failure
# model").  The stop comes from the test hook ZT_CKPT_CRASH_AT=stop:<point>
# with ZT_CKPT_CRASH_RANK=1.
. "$(dirname "$0")/ckpt_lib.sh"
TIMEOUT=5
BOUND=$((TIMEOUT + 15))

zrun 2 --steps 20 --ckpt-every 10 --ckpt-dir B --resume never
ok $? "base: 20 steps on 2 ranks, checkpoints at 10 and 20"

# srun POINT: resume a copy D of B, stop rank 1 at POINT; RC, EL
srun() {
    rm -rf D; cp -r B D
    local t0=$SECONDS
    ZT_CKPT_CRASH_AT="stop:$1" ZT_CKPT_CRASH_RANK=1 timeout -s KILL $((BOUND + 30)) \
        "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 \
        --steps 21 --ckpt-dir "$T/D" --ztrain.comm_timeout_s=$TIMEOUT > run.out 2> run.err
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

srun startup
diag <(grep -E '^ztrain: error|CRASH' run.err)
ok $([ $RC != 0 ] && [ $RC != 137 ] && [ $EL -le $BOUND ] && [ "$LEFT" = 0 ] &&
     grep -q "^ztrain: error: rank 0: .*start-up" run.err; echo $?) \
   "rank 1 stopped at start-up: the job ends after ${EL}s (bound ${BOUND}s), exit $RC, the error names start-up, no rank left"
done_testing
