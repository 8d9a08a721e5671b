#!/bin/bash
# prec_train.sh -- bf16 / fp16 training end to end (ztrain train):
#  - 200 steps of the tiny model, 1 rank: bf16 and fp16 per-step losses stay
#    within 0.5% (relative) of fp32's at every step, and the final validation
#    losses within 0.5%; the measured maximum deviations are printed;
#  - bf16 at ZeRO stages 0-3 on 1 and 2 ranks, and on 2 ranks with 3
#    gradient-accumulation steps (same global batch): every run's per-step
#    losses within 1e-5 relative of 1 rank stage 0;
#  - fp16 resume: 20 steps (overflows injected at steps 3, 4 and 12, window
#    5 so the scale also grows) vs 10 steps + checkpoint + a new process
#    that resumes: identical per-step records (loss, norm, scale, skipped),
#    bitwise identical final checkpoint, same loss-scaler state saved;
#  - the loss scale at its minimum: exit 1 with a clear message;
#  - offload_optimizer=cpu: the memory report shows the optimizer state in
#    host memory; refused at stage 0.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export ZTRAIN_REQUEUE=false
unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE ZTRAIN_PRECISION ZTRAIN_OFFLOAD
head -c 200000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
COMMON=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
        --sample-tokens 0 --log-every 1000 --resume never)

# ---------------------------------------------------------------- 200 steps vs fp32
for p in fp32 bf16 fp16; do
    "$ZTRAIN" train "${COMMON[@]}" --steps 200 --eval-every 0 --precision "$p" --metrics "t_$p.jsonl" \
        --ckpt-dir "ck_t$p" > "t_$p.out" 2>&1
    ok $? "$p: 200 steps"
done
for p in bf16 fp16; do
    python3 - t_fp32.jsonl "t_$p.jsonl" "$p" <<'PY'
import json, sys
def load(f):
    recs = [json.loads(l) for l in open(f)]
    return [r["loss"] for r in recs if "loss" in r], [r["val_loss"] for r in recs if "val_loss" in r]
a, va = load(sys.argv[1]); b, vb = load(sys.argv[2])
assert len(a) == len(b) == 200, (len(a), len(b))
rel = [abs(x - y) / abs(x) for x, y in zip(a, b)]
worst = max(rel); at = rel.index(worst) + 1
vrel = abs(va[-1] - vb[-1]) / va[-1]
print("# %s vs fp32 over 200 steps: max relative loss deviation %.2e (step %d, tolerance 5e-3); "
      "final loss %.4f vs %.4f; final val loss %.4f vs %.4f (relative %.2e, tolerance 5e-3)"
      % (sys.argv[3], worst, at, b[-1], a[-1], vb[-1], va[-1], vrel))
sys.exit(0 if worst <= 5e-3 and vrel <= 5e-3 and a != b else 1)
PY
    ok $? "$p tracks fp32: every step's loss within 0.5% over 200 steps, final val loss within 0.5%, not identical"
done
check "the run logs its precision" grep -q "precision: bf16 parameters, fp32 master weights" t_bf16.out
check "fp16 metrics carry the loss scale" grep -q '"loss_scale": 65536, "skipped": false' t_fp16.jsonl

# ---------------------------------------------------------------- bf16 stages x world sizes
run() {  # run TAG NP ARGS...: 20 steps at a global batch of 12
    local tag=$1 n=$2; shift 2
    mpirun_np "$n" "$ZTRAIN" train "${COMMON[@]}" --steps 20 --eval-every 0 --batch-size 12 \
        --micro-batch $((12 / n)) --grad-accum 1 --precision bf16 --metrics "m_$tag.jsonl" \
        --ckpt-dir "ck_$tag" "$@" > "o_$tag.txt" 2>&1
}
for n in 1 2; do
    for s in 0 1 2 3; do
        run "s${s}n$n" "$n" --stage "$s"
        ok $? "bf16 stage $s on $n rank(s): 20 steps"
    done
done
# gradient accumulation: 2 ranks x micro batch 2 x 3 micro-steps (stages 2-3
# reduce every micro-step and accumulate the reduced gradients in fp32)
for st in 0 1 2 3; do
    run "a${st}n2" 2 --stage "$st" --micro-batch 2 --grad-accum 3
    ok $? "bf16 stage $st on 2 ranks with 3 accumulation steps: 20 steps"
done
python3 - m_s0n1.jsonl m_s*n*.jsonl m_a*n2.jsonl <<'PY'
import json, sys
def losses(f): return [json.loads(l)["loss"] for l in open(f) if '"loss"' in l]
ref = losses(sys.argv[1]); worst = 0.0
for f in sys.argv[2:]:
    x = losses(f)
    assert len(x) == 20, (f, len(x))
    worst = max([worst] + [abs(p - q) / abs(p) for p, q in zip(ref, x)])
print("# bf16, stages 0-3 x 1-2 ranks (and x 3 accumulation steps) vs 1 rank stage 0: "
      "max relative loss difference %.2e" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
ok $? "bf16: stages 0-3 on 1 and 2 ranks, with and without accumulation, agree with 1 rank stage 0 within 1e-5 relative"

# ---------------------------------------------------------------- fp16 resume
F16=(--precision fp16 --stage 2 --fp16.loss_scale_window 5 --batch-size 12 --micro-batch 6
     --grad-accum 1 --scheduler.params.total_num_steps 20 --eval-every 0)
export ZT_TEST_OVERFLOW_STEPS=3,4,12
mpirun_np 2 "$ZTRAIN" train "${COMMON[@]}" "${F16[@]}" --steps 20 --ckpt-dir A --metrics a.jsonl > a.out 2>&1
ra=$?
mpirun_np 2 "$ZTRAIN" train "${COMMON[@]}" "${F16[@]}" --steps 10 --ckpt-dir B --metrics b1.jsonl > b1.out 2>&1
rb=$?
mpirun_np 2 "$ZTRAIN" train "${COMMON[@]}" "${F16[@]}" --steps 20 --ckpt-dir B --metrics b2.jsonl \
    --resume auto > b2.out 2>&1
rc=$?
unset ZT_TEST_OVERFLOW_STEPS
ok $([ $ra$rb$rc = 000 ] && grep -q "resumed from B/step-10 at step 10" b2.out; echo $?) \
   "fp16, 2 ranks, stage 2: 20 steps; 10 steps + save; a new process resumes at 10 and runs to 20"
python3 - a.jsonl b1.jsonl b2.jsonl <<'PY'
import json, sys
keep = ("step", "loss", "grad_norm", "lr", "loss_scale", "skipped")
def recs(f): return [{k: r[k] for k in keep} for r in map(json.loads, open(f)) if "loss" in r]
a = recs(sys.argv[1]); b = recs(sys.argv[2]) + recs(sys.argv[3])
sk = [r["step"] for r in a if r["skipped"]]
scales = sorted(set(r["loss_scale"] for r in a))
print("# skipped steps %s; scales seen %s" % (sk, scales))
sys.exit(0 if len(a) == 20 and a == b and sk == [3, 4, 12] and len(scales) >= 3 else 1)
PY
ok $? "fp16 resume: all 20 records identical (loss, norm, scale, skipped; skipped 3, 4, 12; the scale shrank and grew)"
python3 - a.jsonl <<'PY'
import json, sys
a = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
lr = {r["step"]: r["lr"] for r in a}
# a skipped step leaves the schedule where it was: the step after it shows the
# same learning rate; steps that applied an update move it
same = [s for s in (3, 4, 12) if lr[s + 1] == lr[s]]
moved = [s for s in list(range(5, 12)) + list(range(13, 20)) if lr[s + 1] != lr[s]]
print("# lr at steps 3-7 and 12-14: %s" % [lr[s] for s in (3, 4, 5, 6, 7, 12, 13, 14)])
sys.exit(0 if same == [3, 4, 12] and len(moved) == 14 else 1)
PY
ok $? "fp16: a step skipped on overflow does not advance the learning-rate schedule (as DeepSpeed)"
"$ZTRAIN" ckpt inspect A/step-20 --tensors --no-config > ia.txt 2>&1
"$ZTRAIN" ckpt inspect B/step-20 --tensors --no-config > ib.txt 2>&1
check "fp16 resume: final params, m, v bitwise identical (every tensor checksum)" \
      bash -c "[ \$(grep -c ' checksum ' ia.txt) -gt 0 ] && cmp -s <(grep ' checksum ' ia.txt) <(grep ' checksum ' ib.txt)"
check "fp16 resume: the same loss-scaler state saved" \
      bash -c "grep -q '^loss scaler  fp16: scale' ia.txt && cmp -s <(grep '^loss scaler' ia.txt) <(grep '^loss scaler' ib.txt)"
diag <(grep '^loss scaler' ia.txt)

# ---------------------------------------------------------------- errors
ZT_TEST_OVERFLOW_STEPS=2 "$ZTRAIN" train "${COMMON[@]}" --steps 5 --precision fp16 \
    --fp16.initial_scale_power 0 --fp16.hysteresis 1 --ckpt-dir E > e.out 2> e.err
rc=$?
ok $([ $rc = 1 ] && grep -q "error: fp16 loss scale already at minimum (1 = fp16.min_loss_scale) and the gradients of step 2 still overflow" e.err; echo $?) \
   "overflow at the minimum loss scale: exit 1 and one clear error line"
diag e.err

# ---------------------------------------------------------------- offload
"$ZTRAIN" train "${COMMON[@]}" --steps 3 --precision bf16 --stage 1 --offload optimizer --ckpt-dir O > o.out 2>&1
ok $? "bf16 stage 1 with offload_optimizer=cpu trains"
check "the memory report shows the optimizer state in host memory" \
      grep -qE '^ *optimizer +[0-9.]+ MiB  \(offloaded: [0-9.]+ MiB in host memory\)' o.out
"$ZTRAIN" train "${COMMON[@]}" --steps 3 --stage 0 --offload optimizer --ckpt-dir O0 > o0.out 2> o0.err
ok $([ $? = 2 ] && grep -q "offload_optimizer.device=cpu needs zero_optimization.stage >= 1" o0.err; echo $?) \
   "offload_optimizer at stage 0 is refused (exit 2)"
done_testing
