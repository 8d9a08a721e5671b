#!/bin/bash
# example_mlp.sh -- the example model of examples/mlp_lm.c (a model of its
# own on the public unit API) trains under the ZeRO engine: at 1-3 ranks and
# stages 0-3 every run gives the per-step losses of the 1-rank stage-0 run,
# and the loss falls (the synthetic corpus is exactly learnable).
. "$(dirname "$0")/lib.sh"
bin="$ZT_BUILDDIR/examples/mlp_lm"
[ -x "$bin" ] || skip_all "examples/mlp_lm not built"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

run() {  # run NAME NP ARGS...
    local name=$1 np=$2; shift 2
    mpirun_np "$np" "$bin" ztrain.steps=25 train_batch_size=12 "$@" > "$T/$name.out" 2> "$T/$name.err"
}

run ref 1 zero_optimization.stage=0
check "1 rank, stage 0 runs" test -s "$T/ref.out"
first=$(awk 'NR==1{print $4}' "$T/ref.out"); last=$(awk 'END{print $4}' "$T/ref.out")
echo "loss step 1: $first, step 25: $last" | diag
check "loss falls by more than half in 25 steps ($first -> $last)" \
    awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a / 2)}'
check "25 step lines" test "$(wc -l < "$T/ref.out")" -eq 25

for np in 2 3; do
    for s in 0 1 2 3; do
        run "n${np}s$s" "$np" zero_optimization.stage=$s
        check "$np ranks, stage $s: losses match the 1-rank run within 1e-5 relative" \
            awk 'NR==FNR{ref[$2]=$4; next} {d=$4-ref[$2]; if (d<0) d=-d; if (d > 1e-5*ref[$2]) bad=1; n++}
                 END{exit bad || n != 25}' "$T/ref.out" "$T/n${np}s$s.out"
    done
done
run hyb 4 zero_optimization.stage=3 zero_optimization.shard_group_size=2
check "hybrid 4 = 2 x 2, stage 3: losses match" \
    awk 'NR==FNR{ref[$2]=$4; next} {d=$4-ref[$2]; if (d<0) d=-d; if (d > 1e-5*ref[$2]) bad=1; n++}
         END{exit bad || n != 25}' "$T/ref.out" "$T/hyb.out"
if ! run bad 1 ztrain.model.vocab=1; then
    check "a bad config is one clear line" grep -q "mlp_lm: .*vocab" "$T/bad.err"
else
    check "a bad config is refused" false
fi
done_testing
