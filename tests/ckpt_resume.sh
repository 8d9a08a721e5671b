#!/bin/bash
# ckpt_resume.sh -- resume equivalence.  For every ZeRO stage this build
# runs (the others are reported as SKIP with the reason) and world sizes
# 1-4: 40 uninterrupted steps vs 20 steps + final checkpoint + a NEW process
# that resumes (checkpoint.resume=auto) and runs 20 more.  The per-step
# losses and gradient norms must be identical (as printed in the metrics)
# and the final checkpoints bitwise identical (every params / m / v tensor
# checksum).  Then resharding: a checkpoint saved by 4 ranks restored onto
# 2 and 3 ranks (and across stages, 4 ranks stage 3 -> 2 ranks stage 1)
# continues within 1e-5 relative; the parallel restore mode is bitwise too.
. "$(dirname "$0")/ckpt_lib.sh"

for stage in 0 1 2 3; do
    if ! why=$(stage_ok $stage); then
        for np in 1 2 3 4; do
            TAP_N=$((TAP_N + 1))
            echo "ok $TAP_N - stage $stage, $np rank(s): resume equivalence # SKIP this build refuses --stage $stage: $why"
        done
        continue
    fi
    for np in 1 2 3 4; do
        d=s${stage}n$np
        zrun $np --stage $stage --steps 40 --ckpt-dir $d/A --resume never --metrics $d-a.jsonl
        ra=$?
        zrun $np --stage $stage --steps 20 --ckpt-dir $d/B --resume never --metrics $d-b1.jsonl
        rb=$?
        zrun $np --stage $stage --steps 40 --ckpt-dir $d/B --metrics $d-b2.jsonl
        rc=$?
        resumed=$(grep -c "resumed from $d/B/step-20 at step 20" run.out)
        ok $([ $ra$rb$rc = 000 ] && [ "$resumed" = 1 ]; echo $?) \
           "stage $stage, $np rank(s): 40 steps; 20 steps + save; new process resumes at 20 and runs to 40"
        [ $ra$rb$rc = 000 ] || { diag run.err; }
        losses $d-a.jsonl > $d-a.txt
        { losses $d-b1.jsonl; losses $d-b2.jsonl; } > $d-b.txt
        check "stage $stage, $np rank(s): all 40 losses and gradient norms identical" \
              bash -c "[ \$(wc -l < $d-a.txt) = 40 ] && cmp -s $d-a.txt $d-b.txt"
        tensor_sums $d/A/step-40 > $d-a.sums 2>&1
        tensor_sums $d/B/step-40 > $d-b.sums 2>&1
        check "stage $stage, $np rank(s): final params, m, v bitwise identical (84 tensor checksums)" \
              bash -c "[ \$(wc -l < $d-a.sums) = 84 ] && cmp -s $d-a.sums $d-b.sums"
    done
done

# ---------------------------------------------------------------- resharding
# saved at 4 ranks (stage 0), restored at 2 and 3 ranks
for np in 2 3; do
    rm -rf r$np; mkdir r$np; cp -r s0n4/B/step-20 r$np/
    zrun $np --steps 40 --ckpt-dir r$np --metrics r$np.jsonl
    rc=$?
    losses r$np.jsonl > r$np.txt
    rel=$(max_rel <(sed -n '21,40p' s0n4-a.txt) r$np.txt)
    diag <(echo "4 ranks -> $np ranks: max relative loss difference $rel")
    ok $([ $rc = 0 ] && grep -q "resharded: saved by 4 ranks" run.out &&
         [ "$(wc -l < r$np.txt)" = 20 ] && awk -v r="$rel" 'BEGIN { exit !(r != "nan" && r < 1e-5) }'; echo $?) \
       "saved at 4 ranks, restored at $np ranks: losses within 1e-5 relative of the 4-rank run"
done

# parallel restore mode: same world size -> bitwise
rm -rf p2; mkdir p2; cp -r s0n2/B/step-20 p2/
zrun 2 --steps 40 --ckpt-dir p2 --ckpt-restore parallel --metrics p2.jsonl
rc=$?
tensor_sums p2/step-40 > p2.sums 2>&1
ok $([ $rc = 0 ] && grep -q "parallel restore" run.out && cmp -s p2.sums s0n2-a.sums; echo $?) \
   "checkpoint.restore=parallel (2 ranks): resumes and ends bitwise equal to the uninterrupted run"
rm -rf p3; mkdir p3; cp -r s0n4/B/step-20 p3/
zrun 3 --steps 40 --ckpt-dir p3 --ckpt-restore parallel --metrics p3.jsonl
rc=$?
losses p3.jsonl > p3.txt
ok $([ $rc = 0 ] && cmp -s p3.txt r3.txt; echo $?) \
   "checkpoint.restore=parallel from 4 onto 3 ranks: same losses as the one-reader restore"

# across stages: 4 ranks stage 3 -> 2 ranks stage 1
if why3=$(stage_ok 3) && why1=$(stage_ok 1); then
    rm -rf x; mkdir x; cp -r s3n4/B/step-20 x/
    zrun 2 --stage 1 --steps 40 --ckpt-dir x --metrics x.jsonl
    rc=$?
    losses x.jsonl > x.txt
    rel=$(max_rel <(sed -n '21,40p' s3n4-a.txt) x.txt)
    diag <(echo "4 ranks stage 3 -> 2 ranks stage 1: max relative loss difference $rel")
    ok $([ $rc = 0 ] && grep -q "saved by 4 ranks at ZeRO stage 3" run.out &&
         awk -v r="$rel" 'BEGIN { exit !(r != "nan" && r < 1e-5) }'; echo $?) \
       "saved at 4 ranks stage 3, restored at 2 ranks stage 1: losses within 1e-5 relative"
else
    TAP_N=$((TAP_N + 1))
    echo "ok $TAP_N - saved at 4 ranks stage 3, restored at 2 ranks stage 1 # SKIP ${why3:-$why1}"
fi
# hybrid sharding (4 ranks, stage 3, shard groups of 2: only replica 0 writes)
if why3=$(stage_ok 3) && mpirun_np 4 "$ZTRAIN" train "${COMMON[@]}" --micro-batch 3 --stage 3 --shard-group 2 \
        --print-config > /dev/null 2>&1; then
    zrun 4 --stage 3 --shard-group 2 --steps 40 --ckpt-dir h/A --resume never
    ra=$?
    zrun 4 --stage 3 --shard-group 2 --steps 20 --ckpt-dir h/B --resume never
    rb=$?
    for mode in one-reader parallel; do
        rm -rf h/$mode; mkdir -p h/$mode; cp -r h/B/step-20 h/$mode/
        zrun 4 --stage 3 --shard-group 2 --steps 40 --ckpt-dir h/$mode --ckpt-restore $mode
        rc=$?
        tensor_sums h/A/step-40 > ha.sums 2>&1
        tensor_sums h/$mode/step-40 > hb.sums 2>&1
        ok $([ $ra$rb$rc = 000 ] && grep -q "shard group 2" <("$ZTRAIN" ckpt inspect h/B/step-20 --no-config) &&
             [ "$(wc -l < ha.sums)" = 84 ] && cmp -s ha.sums hb.sums; echo $?) \
           "hybrid sharding (4 ranks, stage 3, shard groups of 2), $mode restore: bitwise equal to 40 uninterrupted steps"
    done
else
    for mode in one-reader parallel; do
        TAP_N=$((TAP_N + 1))
        echo "ok $TAP_N - hybrid sharding, $mode restore # SKIP this build refuses --stage 3 --shard-group 2"
    done
fi
done_testing
