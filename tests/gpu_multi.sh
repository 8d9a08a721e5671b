#!/bin/bash
# gpu_multi.sh -- the logic of the GPU bundle's `run.sh multi`
# (scripts/gpu-multi.sh: the checks and ZeRO's scaling bench for a machine
# with several GPUs) on the CPU: backend cpu at 2 ranks (as 2 GPUs),
# tiny GPT-2 and Llama shapes at stages 0 and 3.  multi.json must parse and
# carry the engine checks' counts (every case ok), and per shape, stage and
# rank count (1 and 2) figures computed from the runs: ms/step and tokens/s
# the medians of steps 3..N the metrics show, tokens/s a rank, the scaling
# efficiency against the same shape and stage at 1 rank (1 there), the bytes
# a rank sent a step (0 at 1 rank; at 2 ranks the run's own count), the
# planner's predicted peak equal to the measured one; test_comm_gpu skipped
# with a reason; no checkpoint left.  Then 1 GPU (ZT_MULTI_GPUS=1): exit 3
# with the JSON written and nothing run; and a budget of 0 s: every section
# skipped, the JSON still written.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "python3 is needed"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export TMPDIR=$T
SHAPES="tg gpt2 2,2,2,32,128,256,2,32;tl llama 2,4,2,32,64,256,2,32"
M=(bash "$ZT_SRCDIR/scripts/gpu-multi.sh")
MA=(--backend cpu --ztrain "$ZTRAIN" --mpirun "$ZT_MPIRUN" --src "$ZT_SRCDIR" --commit testcommit)

ZT_MULTI_STEPS=5 ZT_MULTI_SHAPES=$SHAPES "${M[@]}" "$T/out" "${MA[@]}" > "$T/run.txt" 2>&1
RC=$?
diag <(tail -n 10 "$T/run.txt")
ok $([ $RC = 0 ] && python3 -m json.tool "$T/out/multi.json" > /dev/null; echo $?) \
   "run.sh multi's logic on cpu (2 ranks): exit $RC, multi.json parses"
ok $([ -s "$T/out/multi.log" ] && [ -s "$T/out/multi.txt" ] && [ "$(ls "$T/out" | wc -l)" = 3 ]; echo $?) \
   "three files: multi.json, multi.txt, multi.log"

python3 - "$T/out/multi.json" > "$T/check.txt" <<'PY'
import json, statistics, sys
J = json.load(open(sys.argv[1]))
bad = []
if J["gpus"] != 2 or J["backend"] != "cpu" or J["commit"] != "testcommit":
    bad.append("header %s %s %s" % (J["gpus"], J["backend"], J["commit"]))
t = J["tests"]
if "skipped" not in (t.get("test_comm_gpu") or {}):
    bad.append("test_comm_gpu not skipped: %s" % t.get("test_comm_gpu"))
# GPT-2: s0 s1 s2 s3 bf16s3 resume; Llama: bf16s3 and the two --sp 2 cases
for tag, n in (("engine_gpt2", 6), ("engine_llama", 3)):
    e = t.get(tag) or {}
    if e.get("rc") != 0 or e.get("ok") != n or e.get("not_ok"):
        bad.append("%s: %s (want %d ok)" % (tag, e, n))
runs = J["runs"]
keys = sorted((r["shape"], r["stage"], r["ranks"]) for r in runs)
want = sorted((s, st, n) for s in ("tg", "tl") for st in (0, 3) for n in (1, 2))
if keys != want:
    bad.append("runs %s, want %s" % (keys, want))
base = {(r["shape"], r["stage"]): r for r in runs if r["ranks"] == 1}
for r in runs:
    tag = "%s s%d n%d" % (r["shape"], r["stage"], r["ranks"])
    if (r.get("train") or {}).get("rc") != 0 or r.get("steps_timed") != 3:
        bad.append("%s: %s, %s steps timed" % (tag, r.get("train"), r.get("steps_timed")))
        continue
    if r["tokens_per_step"] != r["micro_batch"] * r["T"] * r["ranks"]:
        bad.append("%s: tokens_per_step %s" % (tag, r["tokens_per_step"]))
    if abs(r["tokens_per_s_per_gpu"] * r["ranks"] - r["tokens_per_s"]) > 1e-6 * r["tokens_per_s"]:
        bad.append("%s: tokens/s a GPU %s" % (tag, r["tokens_per_s_per_gpu"]))
    b = base[(r["shape"], r["stage"])]["tokens_per_s"]
    if abs(r["scaling_efficiency"] - r["tokens_per_s"] / (r["ranks"] * b)) > 1e-9:
        bad.append("%s: scaling %s" % (tag, r["scaling_efficiency"]))
    if (r["ranks"] == 1) != (r["comm_bytes_per_step"] == 0):
        bad.append("%s: bytes sent %s" % (tag, r["comm_bytes_per_step"]))
    if not r.get("predicted_peak_bytes") or r["predicted_peak_bytes"] != r["measured_peak_bytes"]:
        bad.append("%s: peak %s, predicted %s" % (tag, r.get("measured_peak_bytes"), r.get("predicted_peak_bytes")))
    if not r.get("params"):
        bad.append("%s: no parameter count" % tag)
# a stage-3 rank of 2 holds less than stage 0's at its peak (the sharded parameters and states)
for s in ("tg", "tl"):
    p3 = [r["measured_peak_bytes"] for r in runs if r["shape"] == s and r["stage"] == 3 and r["ranks"] == 2]
    p0 = [r["measured_peak_bytes"] for r in runs if r["shape"] == s and r["stage"] == 0 and r["ranks"] == 2]
    if not (p3 and p0 and p3[0] < p0[0]):
        bad.append("%s: stage-3 peak %s not below stage 0's %s at 2 ranks" % (s, p3, p0))
print("# %d runs, engine %s / %s; %s" % (len(runs), t["engine_gpt2"].get("ok"), t["engine_llama"].get("ok"),
      "; ".join(bad) or "all as computed"))
sys.exit(1 if bad else 0)
PY
ok $? "multi.json: engine checks at 2 ranks all ok; per shape, stage and rank count the medians, tokens/s a rank, the scaling efficiency, the bytes sent, peak == planner's"
diag "$T/check.txt"
grep -q "^shape .*scaling" "$T/out/multi.txt" && grep -q "^tl  *3  *2 " "$T/out/multi.txt"
ok $? "multi.txt ends with the table (a row per run)"
ok $([ ! -e "$T/ck" ] && ! ls "$T"/ztmulti.* > /dev/null 2>&1; echo $?) "no checkpoint or work directory left behind"

# one GPU: nothing to scale across
ZT_MULTI_GPUS=1 "${M[@]}" "$T/one" "${MA[@]}" > "$T/one.txt" 2>&1
RC=$?
python3 - "$T/one/multi.json" <<'PY'
import json, sys
J = json.load(open(sys.argv[1]))
sys.exit(0 if J["gpus"] == 1 and J["runs"] == [] and all(v is None for v in J["tests"].values()) else 1)
PY
J1=$?
ok $([ $RC = 3 ] && [ $J1 = 0 ] && grep -q "nothing to scale across" "$T/one.txt"; echo $?) \
   "1 GPU (ZT_MULTI_GPUS=1): exit $RC (3), the JSON written, nothing run"

# a budget of 0 s: every section skipped, the JSON still written
ZT_MULTI_BUDGET=0 ZT_MULTI_SHAPES="tg gpt2 2,2,2,32,128,256,2,32" ZT_MULTI_STAGES=3 "${M[@]}" "$T/b0" "${MA[@]}" \
    > "$T/b0.txt" 2>&1
RC=$?
python3 - "$T/b0/multi.json" <<'PY'
import json, sys
J = json.load(open(sys.argv[1]))
ok = all("skipped" in (J["tests"][k] or {}) for k in ("test_comm_gpu", "engine_gpt2", "engine_llama"))
ok = ok and len(J["runs"]) == 2 and all("skipped" in (r["train"] or {}) for r in J["runs"])
sys.exit(0 if ok else 1)
PY
J0=$?
ok $([ $RC = 0 ] && [ $J0 = 0 ]; echo $?) "a budget of 0 s: every section skipped (exit $RC), the JSON still written"
done_testing
