#!/bin/bash
# ckpt_async_disk_full.sh -- a real full disk during a 2-rank background
# save (ztrain.checkpoint.async; no fault shim), ending as the synchronous
# save does (tests/ckpt_disk_full.sh): the checkpoint directory is on a
# 3 MiB tmpfs filled with ordinary files.  (1) Not enough room for the next
# checkpoint: the free-space check fails the save at its start, naming the
# directory, its file system and the bytes free and needed.  (2) Room at the
# check, but the disk fills up while the background writer writes the
# tensors (rank 0 is stopped there by ZT_CKPT_CRASH_AT=stop:save_tensors and
# the disk filled): the writer's ENOSPC is reported at the next step on
# every rank and the save abandoned.  Both end with exit 1 and one error
# long before ztrain.comm_timeout_s, and step-10 stays `latest` and
# verifies.  (3) The same with checkpoint.on_failure=continue: one warning,
# training goes on and the final save commits.  Needs root (mount).
. "$(dirname "$0")/ckpt_lib.sh"
. "$ZT_SRCDIR/tests/ckpt_full_lib.sh"   # (the working directory is $T now)
EXTRA=()

# run2 ENV...: 12 steps on 2 ranks from M/ck (step-11 saved in the background); RC
run2() {
    env "$@" timeout -s KILL $GUARD "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch 6 --steps 12 --ckpt-every 11 --ckpt-async true --ckpt-dir M/ck \
        "${EXTRA[@]}" > run.out 2> run.err
    RC=$?
    return $RC
}
# intact: step-10 is latest and verifies, nothing of step-11 is left
intact() {
    [ "$(cat M/ck/latest)" = step-10 ] && [ ! -e M/ck/step-11 ] && [ ! -e M/ck/step-11.tmp ] &&
        [ ! -e M/ck/step-12 ] &&
        "$ZTRAIN" ckpt verify M/ck/step-10 > /dev/null 2>&1
}

zrun 2 --steps 10 --ckpt-dir M/ck --resume never
ok $? "base: 10 steps on 2 ranks, step-10 saved on a 3 MiB tmpfs ($(avail) bytes left)"

# (1) 300 KB left: step-11 does not fit
leave 300000
run2
diag <(grep -v 'pwritev' run.err | head -n 3)
ok $(failed_once "^ztrain: error: checkpoint: no space for step 11 in M/ck: the file system mounted at $M has $FREE bytes free \(.*\), the checkpoint needs [0-9]+ bytes"; echo $?) \
   "background save, disk too full for step-11: exit $RC, one error naming M/ck, its file system and $FREE bytes free vs needed"
ok $(intact; echo $?) "step-10 stays latest and verifies; nothing of step-11 is left"

# (2) room at the check; the disk fills while rank 0 is stopped before
# writing its tensors
fill_during run2 save_tensors@11
ok $([ -n "$pid" ] && failed_once "^ztrain: error: (rank 1: )?M/ck/step-11.tmp/state.h5: cannot write dataset .*\(disk full\? the file system of M/ck, mounted at $M, has [0-9]+ bytes free \(.*\); the checkpoint needs [0-9]+ bytes"; echo $?) \
   "disk filled during the background write ($FILLED bytes left): exit $RC, one error naming the write, the file system and bytes free vs needed"
ok $(intact; echo $?) "step-10 stays latest and verifies; nothing of step-11 is left"

# (3) the same with on_failure=continue: one warning, training goes on (2 s
# per step here, so that the disk is freed before the final save)
rm -f M/fill
run3() {
    env "$@" ZT_CKPT_STEP_SLEEP_MS=2000 timeout -s KILL $GUARD "$ZT_MPIRUN" --oversubscribe -np 2 \
        --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 --steps 14 --ckpt-every 11 \
        --ckpt-async true --ckpt-dir M/ck --ckpt-on-failure continue --ckpt-keep 3 > run.out 2> run.err
}
run3 ZT_CKPT_CRASH_AT=stop:save_tensors@11 ZT_CKPT_CRASH_RANK=0 &
job=$!
stop_fill
for _ in $(seq 600); do grep -q 'failed and was abandoned' run.out run.err 2> /dev/null && break; sleep 0.1; done
rm -f M/fill
wait $job
RC=$?
diag <(grep -v 'pwritev' run.err | head -n 3)
ok $([ -n "$pid" ] && [ $RC = 0 ] && ! grep -q '^ztrain: error:' run.err &&
     grep -q "resumed from M/ck/step-10 at step 10" run.out &&
     grep -q "checkpoint: the save at step 11 failed and was abandoned on every rank: .*cannot write dataset .*disk full" run.out run.err &&
     [ "$(cat M/ck/latest)" = step-14 ] && [ ! -e M/ck/step-11 ] && [ ! -e M/ck/step-11.tmp ] &&
     "$ZTRAIN" ckpt verify M/ck > /dev/null 2>&1; echo $?) \
   "on_failure=continue: resumed from step-10, one warning naming the write and the full disk, training goes on, step-14 commits and verifies"
done_testing
