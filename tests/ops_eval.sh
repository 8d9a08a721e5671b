#!/bin/bash
# ops_eval.sh -- evaluation sees the same samples at any world size:
# ztrain.eval_batch_size is a global count split over the ranks (uneven
# splits padded), so the same weights give the same validation loss on 1, 2
# and 3 ranks (issue 16, item 6).
. "$(dirname "$0")/ckpt_lib.sh"

# 5 samples per eval batch: 5 on 1 rank, 3+2 on 2, 2+2+1 on 3
for np in 1 2 3; do
    [ $np = 3 ] && mb=4 || mb=$((12 / np))
    mpirun_np "$np" "$ZTRAIN" train "${COMMON[@]}" --micro-batch $mb --steps 2 --ckpt-dir E$np \
        --resume never --eval-batch-size 5 --eval-batches 2 --metrics e$np.jsonl > e$np.out 2> e$np.err
    ok $? "$np rank(s): 2 steps with a global eval batch of 5"
    sed -n 's/.*"val_loss": \([-0-9.e+]*\).*/\1/p' e$np.jsonl | tail -n 1 > v$np.txt
done
diag v1.txt v2.txt v3.txt
for np in 2 3; do
    ok $(awk -v a="$(cat v1.txt)" -v b="$(cat v$np.txt)" 'BEGIN { d = a - b; if (d < 0) d = -d;
         exit !(a != "" && b != "" && d / a < 1e-5) }'; echo $?) \
       "validation loss on $np ranks equals 1 rank's within 1e-5 relative ($(cat v$np.txt) vs $(cat v1.txt))"
done
# the derived default is the global batch (train_batch_size), whatever the
# world size, micro batch and accumulation
"$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 --grad-accum 2 --eval-batch-size 0 --print-config > p1.txt 2>&1
mpirun_np 2 "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 --eval-batch-size 0 --print-config > p2.txt 2>&1
ok $(grep -q 'eval_batch_size.* 12 ' p1.txt && grep -q 'eval_batch_size.* 12 ' p2.txt; echo $?) \
   "default ztrain.eval_batch_size = train_batch_size (12 on 1 rank x 2 micro batches of 6 and on 2 ranks)"
grep eval_batch_size p1.txt p2.txt | diag
# issue 45 item 7: with no eval batch pinned, the same weights (one step at
# lr 1e-30 leaves them as initialized) give the same validation loss, to the
# last printed digit, on 1 rank (micro 6 x 2), 2 ranks (6 x 1) and 3 ranks
# (2 x 2: a share of 4 samples in forwards of 2)
for np in 1 2 3; do
    case $np in 1) mb=6 ga=2 ;; 2) mb=6 ga=1 ;; 3) mb=2 ga=2 ;; esac
    mpirun_np "$np" "$ZTRAIN" train "${COMMON[@]}" --micro-batch $mb --grad-accum $ga --steps 1 --lr 1e-30 \
        --ckpt-dir D$np --resume never --eval-batch-size 0 --eval-batches 2 --metrics d$np.jsonl > d$np.out 2> d$np.err
    ok $? "$np rank(s), micro batch $mb x accumulation $ga: one step, default eval batch"
    sed -n 's/.*"val_loss": \([-0-9.e+]*\).*/\1/p' d$np.jsonl | tail -n 1 > w$np.txt
done
diag w1.txt w2.txt w3.txt
for np in 2 3; do
    ok $([ -s w1.txt ] && cmp -s w1.txt w$np.txt; echo $?) \
       "default eval batch: validation loss on $np ranks = 1 rank's ($(cat w$np.txt) vs $(cat w1.txt))"
done
done_testing
