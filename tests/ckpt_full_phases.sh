#!/bin/bash
# ckpt_full_phases.sh -- a disk that fills during a save, in every phase of
# it, synchronous and background (checkpoint.async) saves, 1 and 2 ranks
# (docs/checkpoints.md, "Failure model").  The LD_PRELOAD shim
# tests/faultshim.c makes the save's calls fail with ENOSPC: from rank 0's
# first write to the checkpoint file on (its metadata: the disk stays full),
# on every rank or rank 0 only; the creation of the file; rank 1's tensor
# data; the fsync of the data, of step-N.tmp; the commit's rename; `latest`.
# Every save must end in seconds with the failure agreed on every rank, and
# then ztrain.checkpoint.on_failure decides: `stop` exits 1 with one error
# line; `continue` warns once, trains on and commits the final checkpoint.
# ztrain.comm_timeout_s is 600 and every run is bounded by `timeout 120`: a
# save that hangs until the communication timeout or the watchdog fails the
# test (a full disk at the metadata used to hang every rank until
# comm_timeout_s).  The periodic save of step 11 fails; step-10 stays the
# newest checkpoint then, and verifies.
. "$(dirname "$0")/ckpt_lib.sh"
SHIM="$ZT_BUILDDIR/tests/.libs/libfaultshim.so"
[ -f "$SHIM" ] || skip_all "fault shim not built ($SHIM)"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
GUARD=120

for np in 1 2; do
    zrun $np --steps 10 --ckpt-dir B$np --resume never
    ok $? "base: 10 steps on $np rank(s), step-10 saved"
done

# frun NP MODE ON_FAILURE ENV...: resume a copy D of B<NP> at step 10, 14
# steps, periodic save at step 11 (MODE: sync or async) failing as ENV says;
# RC, and the lines of interest in ERRS, WARNS
frun() {
    local np=$1 mode=$2 onf=$3; shift 3
    rm -rf D; cp -r B$np D
    local async=true
    [ "$mode" = sync ] && async=false
    env LD_PRELOAD="$SHIM" ZT_FAULT_ERRNO=ENOSPC "$@" timeout -s KILL $GUARD \
        "$ZT_MPIRUN" --oversubscribe -np "$np" --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch $((12 / np)) --steps 14 --ckpt-every 11 --ckpt-async $async \
        --ckpt-on-failure "$onf" --ckpt-dir D --ztrain.comm_timeout_s=600 > run.out 2> run.err
    RC=$?
    ERRS=$(grep -c '^ztrain: error:' run.err)
    WARNS=$(cat run.out run.err | grep -c 'checkpoint: the save at step 11 failed and was abandoned on every rank')
}
# step-11 left nowhere; step-10 verifies
no11() {
    [ ! -e D/step-11 ] && [ ! -e D/step-11.tmp ] && ! ls D | grep -q corrupt &&
        "$ZTRAIN" ckpt verify D/step-10 > /dev/null 2>&1
}
# check NAME MSG-REGEX ON_FAILURE: the outcome of the last frun
expect() {
    local name=$1 re=$2 onf=$3
    diag <(grep -E '^ztrain: error|^warning: checkpoint' run.err | head -n 2)
    if [ "$onf" = stop ]; then
        ok $([ $RC = 1 ] && [ "$ERRS" = 1 ] && ! grep -q 'no progress' run.err &&
             grep -Eq "^ztrain: error: ($re)" run.err && [ "$(cat D/latest)" = step-10 ] && no11; echo $?) \
           "$name, on_failure=stop: exit $RC, one error ($ERRS), step-10 stays latest and verifies"
    else
        ok $([ $RC = 0 ] && [ "$ERRS" = 0 ] && [ "$WARNS" = 1 ] &&
             cat run.out run.err | grep -Eq "checkpoint: the save at step 11 failed and was abandoned on every rank: ($re).*; training continues .*the newest checkpoint is still D/step-10" &&
             [ "$(cat D/latest)" = step-14 ] && no11 && "$ZTRAIN" ckpt verify D/step-14 > /dev/null 2>&1; echo $?) \
           "$name, on_failure=continue: exit $RC, one warning ($WARNS) naming step-10 as the newest, training goes on, step-14 commits"
    fi
}

F=D/step-11.tmp/state.h5
META="D/step-11.tmp/state.h5: cannot write the checkpoint metadata \(No space left on device\)"
# the metadata: every combination
for np in 1 2; do
    for mode in sync async; do
        for onf in stop continue; do
            frun $np $mode $onf ZT_FAULT_PATH=$F ZT_FAULT_OPS=write ZT_FAULT_AT=1+ ZT_FAULT_RANK=0
            expect "$np rank(s), $mode save, full disk at rank 0's metadata" "$META" $onf
            if [ $np = 2 ]; then
                frun $np $mode $onf ZT_FAULT_PATH=$F ZT_FAULT_OPS=write ZT_FAULT_AT=1+
                expect "$np ranks, $mode save, full disk at every rank's first write (metadata)" "$META" $onf
            fi
        done
    done
done

# the other phases, 2 ranks, synchronous and background saves
for mode in sync async; do
    frun 2 $mode continue ZT_FAULT_PATH=$F ZT_FAULT_OPS=open ZT_FAULT_AT=1 ZT_FAULT_RANK=0
    expect "$mode save, creating the file" "$F: cannot create checkpoint file: No space left on device" continue
    frun 2 $mode continue ZT_FAULT_PATH=$F ZT_FAULT_OPS=write ZT_FAULT_AT=1+ ZT_FAULT_RANK=1
    expect "$mode save, rank 1's tensor data" "rank 1: $F: cannot write dataset [^ ]+ \(No space left on device\)" continue
    frun 2 $mode continue ZT_FAULT_PATH=$F ZT_FAULT_OPS=fsync ZT_FAULT_AT=1 ZT_FAULT_RANK=1
    expect "$mode save, rank 1's fsync of its data" "rank 1: $F: fsync failed: No space left on device" continue
    frun 2 $mode continue ZT_FAULT_PATH=D/step-11.tmp ZT_FAULT_OPS=fsync ZT_FAULT_AT=3 ZT_FAULT_RANK=0
    expect "$mode save, the fsync of step-11.tmp/" "D/step-11.tmp: fsync failed: No space left on device" continue
    frun 2 $mode continue ZT_FAULT_PATH=D/step-11.tmp ZT_FAULT_OPS=rename ZT_FAULT_AT=1 ZT_FAULT_RANK=0
    expect "$mode save, the commit's rename" "D/step-11.tmp: rename to D/step-11 failed: No space left on device" continue
    frun 2 $mode continue ZT_FAULT_PATH=D/latest.tmp ZT_FAULT_OPS=write ZT_FAULT_AT=1 ZT_FAULT_RANK=0
    expect "$mode save, writing \`latest\`" "D/latest.tmp: write failed: No space left on device" continue
done
done_testing
