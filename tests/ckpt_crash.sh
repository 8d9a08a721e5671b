#!/bin/bash
# ckpt_crash.sh -- a rank killed (SIGKILL) during a save never leaves a torn
# checkpoint behind: resume always finds a complete one that verifies.
# Deterministic points through the test-only fault injection
# ZT_CKPT_CRASH_AT=<phase>@<step> (docs/checkpoints.md): inside the HDF5
# writes, before the rename, between the rename and the `latest` update,
# during pruning.  Then kill -9 at random moments of a run that saves every
# step.  After each crash the resumed run ends bitwise equal to an
# uninterrupted one.
. "$(dirname "$0")/ckpt_lib.sh"

ARGS=(--steps 40 --ckpt-every 10 --ckpt-keep 2)
zrun 2 "${ARGS[@]}" --ckpt-dir R --resume never
ok $? "reference: 40 steps on 2 ranks, checkpoints every 10"
tensor_sums R/step-40 > ref.sums

committed() { (cd "$1" && ls -d step-* 2>/dev/null | grep -E '^step-[0-9]+$' | sort -t- -k2 -n | tr '\n' ' '); }

# phase, newest committed checkpoint expected after the crash, latest pointer expected
for c in "after_data_write 20 step-20" "before_rename 20 step-20" \
         "after_rename_before_latest 30 step-20" "during_prune 30 step-30"; do
    set -- $c
    phase=$1 want=$2 latest=$3
    rm -rf D
    ZT_CKPT_CRASH_AT=$phase@30 zrun 2 "${ARGS[@]}" --ckpt-dir D --resume never
    rc=$?
    ok $([ $rc -ne 0 ] && grep -q "ZT_CKPT_CRASH_AT=$phase@30: killing rank 0" run.err; echo $?) \
       "$phase: rank 0 killed by SIGKILL while saving step 30 (mpirun exit $rc)"
    newest=$(committed D | awk '{print $NF}')
    diag <(echo "$phase: left behind: $(ls D | tr '\n' ' ')")
    is_latest=$(cat D/latest 2>/dev/null)
    ok $([ "$newest" = "step-$want" ] && [ "$is_latest" = "$latest" ]; echo $?) \
       "$phase: newest committed checkpoint is step-$want, latest -> $latest"
    "$ZTRAIN" ckpt verify D > verify.out 2>&1
    ok $? "$phase: every committed checkpoint verifies (ztrain ckpt verify D)"
    zrun 2 "${ARGS[@]}" --ckpt-dir D
    rc=$?
    tensor_sums D/step-40 > d.sums 2>&1
    ok $([ $rc = 0 ] && grep -q "resumed from D/step-$want at step $want" run.out &&
         [ -z "$(ls D | grep '\.tmp$')" ] && cmp -s d.sums ref.sums; echo $?) \
       "$phase: resume starts at step $want, removes the stale .tmp, ends bitwise equal to the reference"
done

# ---------------------------------------------------------------- random kill -9
# checkpoint every step; kill one rank (SIGKILL) at a random moment: once a
# random step in 3..30 is committed, after a random 0-49 ms more
for i in 1 2 3; do
    rm -rf K
    target=$((RANDOM % 28 + 3))
    # mpirun itself in the background (not a shell function): $! is its pid
    "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 \
        --steps 40 --ckpt-every 1 --ckpt-dir K --resume never > kill.out 2> kill.err &
    mp=$!
    n=0
    while at=$(sed 's/^step-//' K/latest 2>/dev/null); [ "${at:-0}" -lt $target ] && [ $n -lt 1000 ] &&
          kill -0 $mp 2>/dev/null; do
        sleep 0.01; n=$((n + 1))
    done
    sleep "0.0$((RANDOM % 5))$((RANDOM % 10))"
    ranks=$(rank_pids $mp | tr '\n' ' ')
    victim=$(echo $ranks | cut -d' ' -f$((RANDOM % 2 + 1)))
    [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
    wait $mp
    rc=$?
    for p in $ranks; do while kill -0 $p 2>/dev/null; do sleep 0.05; done; done
    steps=$(committed K)
    diag <(echo "kill -9 #$i (rank pid ${victim:-none} of $ranks, mpirun exit $rc): committed: $steps; other: $(ls K | grep -v -E '^step-[0-9]+$' | tr '\n' ' ')")
    if [ $rc = 0 ]; then
        ok 0 "kill -9 #$i: the run finished before the kill (nothing to check) # SKIP timing"
        continue
    fi
    newest=$(echo $steps | awk '{print $NF}') prev=$(echo $steps | awk '{print $(NF-1)}')
    latest=$(cat K/latest 2>/dev/null)
    ntmp=$(ls K | grep -E '^step-[0-9]+\.tmp$' | sed 's/^step-\([0-9]*\).*/\1/')
    ok $([ -n "$newest" ] && { [ "$latest" = "$newest" ] || [ "$latest" = "$prev" ]; } &&
         { [ -z "$ntmp" ] || [ "$ntmp" -gt "${newest#step-}" ]; }; echo $?) \
       "kill -9 #$i: latest names the newest or the previous committed checkpoint; only a newer step is incomplete"
    "$ZTRAIN" ckpt verify K > verify.out 2>&1
    ok $? "kill -9 #$i at a random moment: every committed checkpoint verifies"
    zrun 2 --steps 40 --ckpt-every 10 --ckpt-dir K
    rc=$?
    tensor_sums K/step-40 > k.sums 2>&1
    ok $([ $rc = 0 ] && grep -q "resumed from K/$newest at" run.out && cmp -s k.sums ref.sums; echo $?) \
       "kill -9 #$i: resume from the newest committed checkpoint ends bitwise equal to the reference"
done
done_testing
