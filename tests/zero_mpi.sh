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
# run TAG NRANKS ARGS...: 20 steps at a global batch of 12
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin \
        --val c_val.bin --threads 1 --steps 20 --eval-every 0 --sample-tokens 0 --save "w_$tag.bin" \
        --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" "$@" > "o_$tag.txt" 2>&1
}
# compare TAG: per-step losses within 1e-5 relative, final parameters within 1e-5
compare() {
    python3 - "m_ref.jsonl" "m_$1.jsonl" "w_ref.bin" "w_$1.bin" <<'PY'
import json, struct, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
def weights(p):
    b = open(p, "rb").read(); n = (len(b) - 1024) // 4
    return struct.unpack("<%df" % n, b[1024:])
a, b = losses(sys.argv[1]), losses(sys.argv[2])
wa, wb = weights(sys.argv[3]), weights(sys.argv[4])
assert len(a) == len(b) == 20 and len(wa) == len(wb)
lr = max(abs(x - y) / abs(x) for x, y in zip(a, b))
pd = max(abs(x - y) for x, y in zip(wa, wb))
print("# max relative loss difference %.2e, max parameter difference %.2e" % (lr, pd))
sys.exit(0 if lr <= 1e-5 and pd <= 1e-5 else 1)
PY
}
run ref 1 --stage 0 --micro-batch 12
ok $? "reference: 1 rank, stage 0, micro-batch 12"
for n in 1 2 3 4; do
    for s in 0 1 2 3; do
        [ "$n" = 1 ] && [ "$s" = 0 ] && continue
        if run "n${n}s$s" "$n" --stage "$s" --micro-batch $((12 / n)); then compare "n${n}s$s"; else diag "o_n${n}s$s.txt"; false; fi
        ok $? "$n ranks, stage $s: losses and parameters match the reference"
    done
done
for s in 1 2 3; do
    if run "h$s" 4 --stage "$s" --shard-group 2 --micro-batch 3; then compare "h$s"; else diag "o_h$s.txt"; false; fi
    ok $? "hybrid 4 = 2 x 2, stage $s: losses and parameters match the reference"
done
# gradient accumulation: 2 ranks x 2 micro-steps x 3 == 1 rank x 12
for s in 0 2 3; do
    if run "a$s" 2 --stage "$s" --micro-batch 3 --grad-accum 2; then compare "a$s"; else diag "o_a$s.txt"; false; fi
    ok $? "2 ranks, stage $s, accumulation 2 x micro 3 matches 1 x 12"
done
if run "acc4" 1 --stage 0 --micro-batch 3 --grad-accum 4; then compare acc4; else false; fi
ok $? "1 rank: accumulation 4 x micro 3 matches 1 x micro 12"
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
