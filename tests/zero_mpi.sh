#!/bin/bash
# zero_mpi.sh -- ZeRO memory and communication accounting (tests/test_zero)
# at 1 to 4 ranks, and per-step losses / final parameters of every stage,
# world size and hybrid layout against the 1-rank stage-0 run.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for n in 1 2 3 4; do tap_mpi "$n" "$ZT_BUILDDIR/tests/test_zero"; done
for n in 1 2 3; do tap_mpi "$n" "$ZT_BUILDDIR/tests/test_overlap"; done

cd "$T" || exit 1
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null
. "$ZT_SRCDIR/tests/world_lib.sh"
RUN_ARGS=(--train c_train.bin --val c_val.bin --eval-every 0)
check_stages losses
for s in 1 2 3; do
    run_compare "h$s" 4 --stage "$s" --shard-group 2 --micro-batch 3
    ok $? "hybrid 4 = 2 x 2, stage $s: losses and parameters match the reference"
done
check_accum
# overlap_comm (default on) against the blocking reduce-scatter: bitwise
# equal losses and parameters, and the same bytes sent
same() {  # same A B: per-step losses and the weights file byte for byte
    python3 - "m_$1.jsonl" "m_$2.jsonl" <<'PY' && cmp -s "w_$1.bin" "w_$2.bin"
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
sys.exit(0 if len(a) == 20 and a == b else 1)
PY
}
for v in "n3s3 3 --stage 3 --micro-batch 4" "a3 2 --stage 3 --micro-batch 3 --grad-accum 2" \
         "h3 4 --stage 3 --shard-group 2 --micro-batch 3" "n3s2 3 --stage 2 --micro-batch 4" \
         "b3 3 --stage 3 --micro-batch 4 --bf16.enabled true --comm-dtype bf16"; do
    set -- $v; tag=$1; shift
    { [ -f "m_$tag.jsonl" ] || run "$tag" "$@"; } && run "$tag-seq" "$@" --overlap-comm false && same "$tag" "$tag-seq"
    ok $? "overlap_comm on vs off ($*): bitwise equal losses and parameters"
done
done_testing
