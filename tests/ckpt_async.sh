#!/bin/bash
# ckpt_async.sh -- asynchronous checkpoints (ztrain.checkpoint.async,
# docs/checkpoints.md; on by default).  (1) At ZeRO stages 0-3 on 1, 2 and 3
# ranks, the checkpoints a run with background saves commits are those of
# the same run saving synchronously (--ckpt-async false): h5diff finds no difference in any dataset or
# attribute but the save time (/@created_unix), the configuration JSON
# (checkpoint.async itself) and their metadata checksums; the same with the
# state in device memory (backend cpu-strict).  The background
# writer is slowed (ZT_CKPT_WRITE_DELAY_MS) so that saves are committed
# steps later and the next save waits for the one in flight.  (2) A run
# resumed from a background checkpoint ends bitwise equal to the
# uninterrupted run.  kill -9 during a background write: ckpt_async_kill.sh.
. "$(dirname "$0")/ckpt_lib.sh"
command -v h5diff > /dev/null || skip_all "no h5diff (HDF5 tools)"
export ZT_CKPT_WRITE_DELAY_MS=2

# same_ckpt A B: no difference but the save time, the configuration and
# their metadata checksums (the save times, in whole seconds, may also agree)
same_ckpt() {
    h5diff "$1/state.h5" "$2/state.h5" > h5diff.out 2>&1
    [ $? -le 1 ] || return 1
    ! grep -v -E '^(attribute: <created_unix of </>> and <created_unix of </>>|dataset: </config> and </config>|dataset: </meta_checksums> and </meta_checksums>|[0-9]+ differences? found)$' h5diff.out | grep -q . &&
        h5dump -d /meta_checksums "$1/state.h5" | grep -oE '[0-9a-f]{16} [^" ]+' | sort -k2 > m1 &&
        h5dump -d /meta_checksums "$2/state.h5" | grep -oE '[0-9a-f]{16} [^" ]+' | sort -k2 > m2 &&
        [ "$(wc -l < m1)" -gt 20 ] && [ "$(cut -d' ' -f2 m1)" = "$(cut -d' ' -f2 m2)" ] &&
        [ "$(diff m1 m2 | grep '^[<>]' | cut -d' ' -f3 | grep -vx '/@created_unix' | sort -u | tr '\n' ' ')" = "/config " ]
}

# ---------------------------------------------------------------- (1) sync == async
for np in 1 2 3; do
    for stage in 0 1 2 3; do
        why=$(stage_ok $stage) || { skip "stage $stage on $np ranks" "$why"; continue; }
        A=(--steps 5 --ckpt-every 2 --stage $stage --resume never)
        zrun $np "${A[@]}" --ckpt-dir S$np$stage --ckpt-keep 4 --ckpt-async false
        rs=$?
        zrun $np "${A[@]}" --ckpt-dir A$np$stage --ckpt-keep 4 --ckpt-async true --memory-report end
        ra=$?
        # the planner counts the snapshot: predicted peak == accounted peak
        mem=$(sed -n 's/^memory peak per rank: accounted \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' run.out)
        [ -n "$mem" ] && [ "${mem% *}" = "${mem#* }" ] || { ra=1; diag <(echo "memory: $mem"); }
        bg=$(grep -c 'writing the tensors in the background' run.out)
        cm=$(grep -c 'checkpoint: saved step [24] .*in the background' run.out)
        good=0
        for s in 2 4 5; do same_ckpt S$np$stage/step-$s A$np$stage/step-$s || { good=1; diag h5diff.out; }; done
        ok $([ $rs = 0 ] && [ $ra = 0 ] && [ $bg = 2 ] && [ $cm = 2 ] && [ $good = 0 ] &&
             [ "$(cat A$np$stage/latest)" = step-5 ] && "$ZTRAIN" ckpt verify A$np$stage > /dev/null; echo $?) \
           "$np rank(s), stage $stage: steps 2 and 4 saved in the background ($bg started, $cm committed), 5 at the end; equal to the synchronous run's but for the save time and the configuration; memory peak as planned"
    done
done
# state in device memory (cpu-strict: memory the host cannot touch): the
# snapshot is the backend's device-to-host copy
A=(--steps 5 --ckpt-every 2 --stage 3 --resume never --backend cpu-strict --ckpt-keep 4)
zrun 2 "${A[@]}" --ckpt-dir SD --ckpt-async false
rs=$?
zrun 2 "${A[@]}" --ckpt-dir AD --ckpt-async true
ra=$?
good=0
for s in 2 4 5; do same_ckpt SD/step-$s AD/step-$s || { good=1; diag h5diff.out; }; done
ok $([ $rs = 0 ] && [ $ra = 0 ] && [ "$(grep -c 'writing the tensors in the background' run.out)" = 2 ] &&
     [ $good = 0 ]; echo $?) \
   "backend cpu-strict (device state), 2 ranks, stage 3: background checkpoints equal to the synchronous ones"

# the tensor data written through the page cache (ZT_CKPT_DIRECT_IO=0; by
# default the writer uses O_DIRECT for each piece's aligned blocks where
# the file system allows, as /tmp here): the same checkpoints
if [ -d S21 ]; then
    ZT_CKPT_DIRECT_IO=0 zrun 2 --steps 5 --ckpt-every 2 --stage 1 --resume never --ckpt-dir AB --ckpt-keep 4 --ckpt-async true
    ra=$?
    good=0
    for s in 2 4 5; do same_ckpt S21/step-$s AB/step-$s || { good=1; diag h5diff.out; }; done
    ok $([ $ra = 0 ] && [ "$(grep -c 'writing the tensors in the background' run.out)" = 2 ] && [ $good = 0 ]; echo $?) \
       "2 ranks, stage 1, buffered writes (ZT_CKPT_DIRECT_IO=0): background checkpoints equal to the synchronous ones"
else
    skip "2 ranks, stage 1, buffered writes (ZT_CKPT_DIRECT_IO=0)" "stage 1 not run"
fi

# the snapshot's copy deferred into the next step (host state): the
# background thread starts it 300 ms late (ZT_CKPT_COPY_DELAY_MS, test-only),
# so the next optimizer update comes first and only the fence before it
# (the training threads copy what is left, libtrain's state fence) keeps the
# checkpoint that of the save step.  A save every step, 2 micro-batches per
# step (several forward/backward passes between the save and the update).
for cfg in "1 0" "2 1" "2 3"; do
    read -r np stage <<< "$cfg"
    why=$(stage_ok $stage) || { skip "deferred copy, stage $stage on $np ranks" "$why"; continue; }
    A=(--steps 4 --ckpt-every 1 --ckpt-keep 5 --stage $stage --resume never --grad-accum 2 --micro-batch $((6 / np)))
    zrun $np "${A[@]}" --ckpt-dir FS$np$stage --ckpt-async false
    rs=$?
    ZT_CKPT_COPY_DELAY_MS=300 zrun $np "${A[@]}" --ckpt-dir FA$np$stage --ckpt-async true
    ra=$?
    dc=$(grep -c "state recorded in .* the snapshot's copy" run.out)
    good=0
    for s in 1 2 3 4; do same_ckpt FS$np$stage/step-$s FA$np$stage/step-$s || { good=1; diag h5diff.out; }; done
    ok $([ $rs = 0 ] && [ $ra = 0 ] && [ "$dc" = 3 ] && [ $good = 0 ]; echo $?) \
       "$np rank(s), stage $stage, a save every step, grad-accum 2, the background copy delayed past the next update ($dc deferred): the fence keeps the checkpoints equal to the synchronous ones"
done

# ---------------------------------------------------------------- pre-flight
# a memory limit between the synchronous and the asynchronous plan: refused,
# naming synchronous checkpoints among the changes that fit
est() { "$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin \
            --batch-size 12 --grad-accum 1 --eval-every 0 --eval-batches 1 --world-size 2 --micro-batch 6 --ckpt-every 2 "$@" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes"])'; }
ps=$(est --ckpt-async false) pa=$(est --ckpt-async true)
zrun 2 --steps 3 --ckpt-every 2 --ckpt-dir P --resume never --ckpt-async true --memory-limit $(((ps + pa) / 2))
rc=$?
diag <(grep '^ztrain: error' run.err)
ok $([ $rc = 1 ] && [ "$pa" -gt "$ps" ] && grep -q "^ztrain: error: predicted peak .*synchronous checkpoints (--ckpt-async false)" run.err; echo $?) \
   "pre-flight: the snapshot ($((pa - ps)) bytes) does not fit the limit and checkpoint.async=true was asked for: refused, naming synchronous checkpoints"
# checkpoint.async left at its default (true): the same limit falls back to
# synchronous saves, with one warning naming them, and the run goes on
pd=$(est)
zrun 2 --steps 3 --ckpt-every 2 --ckpt-dir P --resume never --memory-limit $(((ps + pa) / 2))
rc=$?
diag <(grep -E '^(ztrain: error|warning)' run.err)
ok $([ $rc = 0 ] && [ "$pd" = "$pa" ] && [ "$(grep -c 'falling back to synchronous checkpoints' run.err)" = 1 ] &&
     grep -q "^warning: memory: the checkpoint.async host snapshot (.* per rank) does not fit the limit .*: falling back to synchronous checkpoints (checkpoint.async=false, --ckpt-async false)" run.err &&
     ! grep -q 'in the background' run.out && grep -q 'saved step 2 ' run.out &&
     "$ZTRAIN" ckpt verify P/step-2 > /dev/null; echo $?) \
   "pre-flight, checkpoint.async at its default: the snapshot does not fit, one warning, synchronous saves (step-2 saved, verifies)"

# ---------------------------------------------------------------- saves faster than the disk
# the writer slowed (30 ms a piece) so that each periodic save waits for the
# previous one's write: one warning, naming the wait and an interval that
# would hide it; the final save's wait for the last write is not warned of
ZT_CKPT_WRITE_DELAY_MS=30 zrun 2 --steps 7 --ckpt-every 2 --ckpt-dir W --resume never --ckpt-async true
rc=$?
diag <(grep '^warning' run.err)
ok $([ $rc = 0 ] && [ "$(grep -c '^warning' run.err)" = 1 ] &&
     grep -q '^warning: checkpoint: the save at step 4 waited [0-9.]* s for the background save of step 2 to reach the disk ([0-9.]* s after it started): saves 2 steps ([0-9.]* s) apart come faster than the disk takes them, and each one loses such a wait; checkpoint.every >= [0-9]* (--ckpt-every) would hide the writes (said once)$' run.err &&
     grep -q 'saved step 6 .*in the background' run.out; echo $?) \
   "saves every 2 steps, each write slowed past the next save: one warning at step 4, naming the wait and a --ckpt-every that would hide it"
ZT_CKPT_WRITE_DELAY_MS=30 zrun 2 --steps 3 --ckpt-every 2 --ckpt-dir W2 --resume never --ckpt-async true
rc=$?
diag <(grep '^warning' run.err)
ok $([ $rc = 0 ] && ! grep -q '^warning' run.err && grep -q 'saved step 2 .*in the background' run.out &&
     grep -q 'saved step 3 ' run.out; echo $?) \
   "the final save waiting for the last background write: no warning"

# ---------------------------------------------------------------- (2) resume from a background checkpoint
zrun 2 --steps 8 --ckpt-every 4 --ckpt-keep 3 --ckpt-dir B --resume never --ckpt-async true
ok $? "8 steps on 2 ranks, step-4 saved in the background"
tensor_sums B/step-8 > b8.sums
rm -rf B/step-8
zrun 2 --steps 8 --ckpt-every 4 --ckpt-keep 3 --ckpt-dir B --ckpt-async true
rc=$?
tensor_sums B/step-8 > r8.sums
ok $([ $rc = 0 ] && grep -q "resumed from B/step-4 at step 4" run.out && [ -s b8.sums ] &&
     cmp -s b8.sums r8.sums; echo $?) \
   "resumed from the background checkpoint step-4: step-8 is bitwise that of the uninterrupted run"

done_testing
