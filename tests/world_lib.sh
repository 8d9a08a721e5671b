# world_lib.sh -- shared by the shell tests whose training runs must not
# depend on the world size, the ZeRO stage or the gradient accumulation
# (zero_mpi.sh, sft_mpi.sh; sourced after lib.sh, in the work directory).
# The caller sets RUN_ARGS (data, shape and evaluation flags); every run is
# 20 steps of configs/tiny.json at a global batch of 12, against the 1-rank
# stage-0 reference "ref".

# run TAG NRANKS ARGS...: metrics m_TAG.jsonl, weights w_TAG.bin, output o_TAG.txt
run() {
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" "${RUN_ARGS[@]}" \
        --threads 1 --steps 20 --sample-tokens 0 --save "w_$tag.bin" \
        --metrics "m_$tag.jsonl" --ckpt-dir "ck_$tag" "$@" > "o_$tag.txt" 2>&1
}
# compare TAG: per-step and validation losses within 1e-5 relative, final
# parameters within 1e-5, against the reference run
compare() {
    python3 - "m_ref.jsonl" "m_$1.jsonl" "w_ref.bin" "w_$1.bin" <<'PY'
import json, struct, sys
def losses(p, k): return [json.loads(l)[k] for l in open(p) if '"%s"' % k in l]
def weights(p):
    b = open(p, "rb").read(); n = (len(b) - 1024) // 4
    return struct.unpack("<%df" % n, b[1024:])
a, b = losses(sys.argv[1], "loss"), losses(sys.argv[2], "loss")
va, vb = losses(sys.argv[1], "val_loss"), losses(sys.argv[2], "val_loss")
wa, wb = weights(sys.argv[3]), weights(sys.argv[4])
assert len(a) == len(b) == 20 and len(va) == len(vb) >= 1 and len(wa) == len(wb)
lr = max(abs(x - y) / abs(x) for x, y in zip(a + va, b + vb))
pd = max(abs(x - y) for x, y in zip(wa, wb))
print("# max relative loss difference %.2e (val %s vs %s), max parameter difference %.2e" % (lr, va, vb, pd))
sys.exit(0 if lr <= 1e-5 and pd <= 1e-5 else 1)
PY
}
# run_compare TAG NRANKS ARGS...: run, then compare (the output as diagnostics on failure)
run_compare() {
    if run "$@"; then compare "$1"; else diag "o_$1.txt"; false; fi
}
# check_stages WHAT: the reference, then 1-4 ranks x stages 0-3 against it
check_stages() {
    run ref 1 --stage 0 --micro-batch 12
    ok $? "reference: 1 rank, stage 0, micro-batch 12"
    local n s
    for n in 1 2 3 4; do
        for s in 0 1 2 3; do
            [ "$n" = 1 ] && [ "$s" = 0 ] && continue
            run_compare "n${n}s$s" "$n" --stage "$s" --micro-batch $((12 / n))
            ok $? "$n ranks, stage $s: $1 and parameters match the reference"
        done
    done
}
# check_accum: gradient accumulation, 2 ranks x 2 micro-steps x 3 and 1 rank
# x 4 x 3, against 1 rank x 12
check_accum() {
    local s
    for s in 0 2 3; do
        run_compare "a$s" 2 --stage "$s" --micro-batch 3 --grad-accum 2
        ok $? "2 ranks, stage $s, accumulation 2 x micro 3 matches 1 x 12"
    done
    run_compare acc4 1 --stage 0 --micro-batch 3 --grad-accum 4
    ok $? "1 rank: accumulation 4 x micro 3 matches 1 x micro 12"
}
