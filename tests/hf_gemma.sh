#!/bin/bash
# hf_gemma.sh -- Gemma 2 / 3 settings through checkpoints (no Python model
# code; tests/hf_transformers.sh does the transformers side).  On the
# committed fixtures tests/fixtures/hf/gemma2 (soft-caps, window 5 < T) and
# gemma3 (q/k norms, local rotary base, layers 0-1 sliding):
#   - the run on cpu-strict (engine memory the host cannot touch) gives the
#     cpu run's losses;
#   - `ztrain ckpt inspect` shows the Gemma settings read back from the
#     checkpoint's /model attributes (ztrain.model.gemma, soft-caps, window,
#     pattern, rope_local_theta);
#   - resuming from step 1 gives the uninterrupted run's step-2 and step-3
#     losses exactly (the model rebuilt from the attributes computes the same);
#   - resuming with another window (a config.json saying 4) is refused by
#     the checkpoint's sliding_window attribute;
#   - `ckpt export --hf` of step 2 loads back (zt_hf_load, tests/hf_logprobs)
#     with the loss the run logged at step 3.
. "$(dirname "$0")/lib.sh"
FIX="$ZT_SRCDIR/tests/fixtures/hf"
LOGPROBS="$ZT_BUILDDIR/tests/hf_logprobs"
in_tmpdir
export OMP_NUM_THREADS=1

# one window of T+1 = 17 tokens (an llm.c token shard: 256 int32 header, uint16 tokens)
tok="5 17 3 88 41 0 63 29 12 77 50 9 33 70 2 91 46"
# shellcheck disable=SC2086
token_file one.bin $tok
run() {  # run MODELDIR CKDIR STEPS [ARGS...]
    local dir=$1 ck=$2 steps=$3
    shift 3
    "$ZTRAIN" train --init-from "$dir" --seq-len 16 --train_micro_batch_size_per_gpu 1 \
        --steps "$steps" --lr 1e-3 --clip 0 --scheduler.type none --train one.bin --val "" \
        --sample-tokens 0 --threads 1 --ckpt-every 1 --ckpt-keep 5 --ckpt-dir "$ck" \
        --metrics "$ck.m" "$@" > "$ck.out" 2>&1
}
loss_at() { sed -n "s/.*\"step\": *$2,.*\"loss\": *\([0-9.e+-]*\).*/\1/p" "$1" | head -1; }

for spec in "gemma2:Gemma 2 blocks, window 5 (full every 2 layers), soft-caps 2 / 3" \
            "gemma3:q/k norms, Gemma 3 blocks, window 5 (full every 3 layers)"; do
    name=${spec%%:*}
    want=${spec#*:}
    run "$FIX/$name" "$name" 3
    ok $? "$name: 3 steps from the fixture, checkpoints at steps 1-3"
    # cpu-strict: no host access to engine memory, no host pointer to a kernel
    run "$FIX/$name" "$name.s" 3 --backend cpu-strict
    rc=$?
    ok $([ $rc = 0 ] && grep -q "backend cpu-strict" "$name.s.out" &&
         cmp -s <(grep -o '"loss": *[0-9.e+-]*' "$name.m") <(grep -o '"loss": *[0-9.e+-]*' "$name.s.m"); echo $?) \
       "$name: on cpu-strict, the same 3 losses (exit $rc)"
    [ $rc = 0 ] || diag "$name.s.out"
    "$ZTRAIN" ckpt inspect "$name/step-2" > "$name.inspect" 2>&1
    ok $(grep -q "^model .*$want" "$name.inspect"; echo $?) \
       "$name: ckpt inspect reads the Gemma settings back: $want"
    if [ "$name" = gemma3 ]; then
        ok $(grep -q '"rope_local_theta": 100' "$name.inspect" && grep -q '"gemma": 3' "$name.inspect"; echo $?) \
           "$name: the stored configuration holds gemma 3 and rope_local_theta 100"
    fi
    # resume from step 1 in a fresh directory
    mkdir -p "$name.r"
    cp -r "$name/step-1" "$name.r/"
    run "$FIX/$name" "$name.r" 3
    rc=$?
    l2=$(loss_at "$name.m" 2) l3=$(loss_at "$name.m" 3)
    r2=$(loss_at "$name.r.m" 2) r3=$(loss_at "$name.r.m" 3)
    ok $([ $rc = 0 ] && [ -n "$l2" ] && [ "$l2" = "$r2" ] && [ "$l3" = "$r3" ]; echo $?) \
       "$name: resumed from step 1, steps 2 and 3 losses $r2 $r3 = the run's $l2 $l3"
    [ $rc = 0 ] || diag "$name.r.out"
    # resuming with a model whose config.json has another window: the
    # checkpoint's /model attribute is compared and named
    mkdir -p "$name.x"
    cp -r "$name/step-1" "$name.x/"
    cp -r "$FIX/$name" "$name.w4"
    sed -i 's/"sliding_window": 5/"sliding_window": 4/' "$name.w4/config.json"
    run "$name.w4" "$name.x" 2
    rc=$?
    ok $([ $rc != 0 ] && grep -q "ztrain.model.sliding_window is 5 in the checkpoint, 4 configured" "$name.x.out"; echo $?) \
       "$name: resuming with another sliding_window is refused by the checkpoint's attribute (exit $rc)"
    [ $rc != 0 ] || diag "$name.x.out"
    # export step 2, load it back
    "$ZTRAIN" ckpt export "$name/step-2" --hf "$name.hf" > "$name.exp" 2>&1
    ok $? "$name: ckpt export step-2 --hf"
    # shellcheck disable=SC2086
    "$LOGPROBS" "$name.hf" $tok > "$name.lp" 2> "$name.lperr"
    rc=$?
    zl=$(awk 'NR == 1 { print $2 }' "$name.lp")
    ok $([ $rc = 0 ] && awk -v a="$zl" -v b="$l3" 'BEGIN { d = a - b; exit !(d <= 2e-5 && d >= -2e-5) }'; echo $?) \
       "$name: the export loads back (zt_hf_load) with the step-3 loss: $zl vs $l3"
done
done_testing
