#!/bin/bash
# ckpt_async_kill.sh -- kill -9 of one rank or of all ranks at a random
# moment of a background checkpoint write (ztrain.checkpoint.async, a save
# every step, the writer slowed by ZT_CKPT_WRITE_DELAY_MS so that the kill
# lands inside the write): no torn checkpoint (every committed one
# verifies), none lost (the one `latest` named just before the kill is still
# committed and `latest` does not go back), and a rerun resumes and ends
# bitwise equal to the uninterrupted run.  ZT_ASYNC_KILL_TRIES tries
# (default 6; docs/checkpoints.md reports a 24-try run).
. "$(dirname "$0")/ckpt_lib.sh"
# reference: 12 steps, saved every step
REF=(--steps 12 --ckpt-every 1 --ckpt-keep 3 --ckpt-async true)
zrun 2 "${REF[@]}" --ckpt-dir R --resume never
ok $? "reference: 12 steps on 2 ranks, a background save every step"
tensor_sums R/step-12 > ref.sums
committed() { (cd "$1" && ls -d step-* 2> /dev/null | grep -E '^step-[0-9]+$' | sort -t- -k2 -n | tr '\n' ' '); }
TRIES=${ZT_ASYNC_KILL_TRIES:-6}
torn=0 lost=0 bad=0 hit=0
for i in $(seq "$TRIES"); do
    rm -rf K
    target=$((RANDOM % 7 + 3))
    # each background write takes ~0.2 s (ZT_CKPT_WRITE_DELAY_MS=10 per piece)
    ZT_CKPT_WRITE_DELAY_MS=10 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch 6 "${REF[@]}" --ckpt-dir K --resume never > kill.out 2> kill.err &
    mp=$!
    n=0
    until [ -e K/step-$target.tmp/state.h5 ] || [ $n -ge 3000 ] ||
          ! kill -0 $mp 2> /dev/null; do
        sleep 0.01; n=$((n + 1))
    done
    sleep "0.$((RANDOM % 20))"
    before=$(cat K/latest 2> /dev/null)
    ranks=$(rank_pids $mp | tr '\n' ' ')
    case $((RANDOM % 3)) in
    0) victims=$(echo $ranks | cut -d' ' -f1); who="rank 0" ;;
    1) victims=$(echo $ranks | cut -d' ' -f2); who="rank 1" ;;
    *) victims=$ranks; who="all ranks" ;;
    esac
    [ -n "$victims" ] && kill -9 $victims 2> /dev/null
    wait $mp
    rc=$?
    for p in $ranks; do while kill -0 $p 2> /dev/null; do sleep 0.05; done; done
    steps=$(committed K)
    inflight=$(ls K | grep -E '^step-[0-9]+\.tmp$' | tr '\n' ' ')
    diag <(echo "kill -9 #$i of $who at save $target + (mpirun exit $rc): latest before: ${before:-none}, committed after: $steps, in flight: ${inflight:-none}, latest after: $(cat K/latest 2> /dev/null)")
    if [ $rc = 0 ] || [ -z "$victims" ]; then
        ok 0 "kill -9 #$i: the run finished before the kill (nothing to check) # SKIP timing"
        continue
    fi
    [ -n "$inflight" ] && hit=$((hit + 1))
    "$ZTRAIN" ckpt verify K > verify.out 2>&1 || torn=$((torn + 1))
    latest=$(cat K/latest 2> /dev/null)
    if [ -n "$before" ] && { [ ! -d "K/$before" ] || [ -z "$latest" ] ||
                             [ "${latest#step-}" -lt "${before#step-}" ]; }; then lost=$((lost + 1)); fi
    zrun 2 "${REF[@]}" --ckpt-dir K
    rc2=$?
    tensor_sums K/step-12 > k.sums 2>&1
    [ $rc2 = 0 ] && cmp -s k.sums ref.sums && [ -z "$(ls K | grep '\.tmp$')" ] || bad=$((bad + 1))
    ok $([ $torn = 0 ] && [ $lost = 0 ] && [ $bad = 0 ]; echo $?) \
       "kill -9 #$i of $who during a background write: every committed checkpoint verifies, ${before:-none} is kept, the rerun ends bitwise equal to the reference"
done
diag <(echo "kill -9: $TRIES tries, $hit with a save in flight, $torn torn, $lost lost, $bad bad resumes")
done_testing
