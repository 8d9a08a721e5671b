#!/bin/bash
# ckpt_disk_full.sh -- a real full disk during a 2-rank save (no fault
# shim): the checkpoint directory is on a 3 MiB tmpfs
# filled with ordinary files.  (1) Not enough room for the next checkpoint:
# the free-space check fails the save before anything is written, naming
# the directory, its file system and the bytes free and needed.  (2) Room
# at the check, but the disk fills up while the tensors are written (rank 0
# is stopped there by ZT_CKPT_CRASH_AT=stop:save_tensors and the disk
# filled): the write error reaches the save's agreement and the save is
# abandoned on every rank.  (3) The same with the disk filled while rank 0
# is stopped before it writes the file's metadata
# (ZT_CKPT_CRASH_AT=stop:save_metadata; a full disk there used to hang every
# rank until comm_timeout_s).  Case (1) is also warned at start-up, before
# step 1 (ck_space_preflight), once.  Each ends with exit 1 and one error long
# before ztrain.comm_timeout_s (left at its default, 300 s: no watchdog
# line), and step-10 stays `latest` and verifies.  Needs root (mount);
# skipped otherwise.
. "$(dirname "$0")/ckpt_lib.sh"
. "$ZT_SRCDIR/tests/ckpt_full_lib.sh"   # (the working directory is $T now)

# run2 ENV...: 11 steps on 2 ranks from M/ck (saves step-11); RC
run2() {
    env "$@" timeout -s KILL $GUARD "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch 6 --steps 11 --ckpt-dir M/ck > run.out 2> run.err
    RC=$?
    return $RC
}
# intact: step-10 is latest and verifies, nothing of step-11 is left
intact() {
    [ "$(cat M/ck/latest)" = step-10 ] && [ ! -e M/ck/step-11 ] && [ ! -e M/ck/step-11.tmp ] &&
        "$ZTRAIN" ckpt verify M/ck/step-10 > /dev/null 2>&1
}

zrun 2 --steps 10 --ckpt-dir M/ck --resume never
ok $([ $? = 0 ] && ! grep -q 'no space for the next checkpoint' run.err; echo $?) \
   "base: 10 steps on 2 ranks, step-10 saved on a 3 MiB tmpfs ($(avail) bytes left), no start-up space warning"

# (1) 300 KB left: step-11 does not fit
leave 300000
run2
diag <(grep -v 'pwritev' run.err | head -n 3)
ok $(failed_once "^ztrain: error: checkpoint: no space for step 11 in M/ck: the file system mounted at $M has $FREE bytes free \(.*\), the checkpoint needs [0-9]+ bytes"; echo $?) \
   "disk too full for step-11: exit $RC, one error naming M/ck, its file system and $FREE bytes free vs needed"
ok $(grep -Eq "warning: checkpoint: no space for the next checkpoint in M/ck: the file system mounted at $M has $FREE bytes free \(.*\), a checkpoint of this run needs [0-9]+ bytes .*checked at start, before step 1" run.err &&
     [ "$(grep -c 'no space for the next checkpoint' run.err)" = 1 ]; echo $?) \
   "the start-up check warned once, before step 1, with the same $FREE bytes free"
ok $(intact; echo $?) "step-10 stays latest and verifies; nothing of step-11 is left"

# (2) room at the check; the disk fills while rank 0 is stopped before
# writing its tensors
fill_during run2 save_tensors@11
ok $([ -n "$pid" ] && failed_once "^ztrain: error: (rank 1: )?M/ck/step-11.tmp/state.h5: cannot write dataset .*\(disk full\? the file system of M/ck, mounted at $M, has [0-9]+ bytes free \(.*\); the checkpoint needs [0-9]+ bytes"; echo $?) \
   "disk filled during the write ($FILLED bytes left): exit $RC, one error naming the write, the file system and bytes free vs needed"
ok $(intact; echo $?) "step-10 stays latest and verifies; nothing of step-11 is left"

# (3) room at the check; the disk fills while rank 0 is stopped before
# writing the file's metadata
fill_during run2 save_metadata@11
ok $([ -n "$pid" ] && failed_once "^ztrain: error: M/ck/step-11.tmp/state.h5: cannot write the checkpoint metadata \(No space left on device\) \(disk full\? the file system of M/ck, mounted at $M, has [0-9]+ bytes free \(.*\); the checkpoint needs [0-9]+ bytes"; echo $?) \
   "disk filled before the metadata is written ($FILLED bytes left): exit $RC, one error naming the metadata, the file system and bytes free vs needed"
ok $(intact; echo $?) "step-10 stays latest and verifies; nothing of step-11 is left"

# room again: a rerun resumes from step-10 and saves step-11
rm -f M/fill
zrun 2 --steps 11 --ckpt-dir M/ck
ok $([ $? = 0 ] && grep -q "resumed from M/ck/step-10 at step 10" run.out && [ "$(cat M/ck/latest)" = step-11 ] &&
     "$ZTRAIN" ckpt verify M/ck/step-11 > /dev/null 2>&1; echo $?) \
   "with room again a rerun resumes from step-10 and saves step-11"
done_testing
