#!/bin/bash
# gpu_measure.sh -- the logic of the GPU bundle's `run.sh measure`
# (scripts/gpu-measure.sh + bench/measure_json.py) on the CPU: backend
# cpu-strict, tiny GPT-2, Llama and Llama-LoRA shapes (ZT_MEASURE_SHAPES).
# measure.json must parse and carry, per shape, figures computed from the
# runs: ms/step and tokens/s the medians of steps 3..N the log shows, TFLOP/s
# and MFU from the FLOPs formula and the params ztrain reported, the planner's
# predicted and the run's measured peak, the cost model's prediction (LoRA:
# of the LoRA step, --lora R:TARGETS; also with --attention ztrain, against
# the deterministic run); the GPU-only sections (test_cuda, compute-sanitizer) skipped with
# a reason; no checkpoint or weights file written.  Then a budget of 0 s:
# every section skipped, the JSON still written.  Then, when $ZT_HF_PYTHON
# (default /opt/hfref/bin/python) has PyTorch, the PyTorch eager baselines on
# the CPU (ZT_MEASURE_TORCH_DEVICE=cpu): their figures parsed and set against
# ztrain's, the torch.profiler table's attention time; skipped visibly otherwise.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
command -v python3 > /dev/null || skip_all "python3 is needed"
CM=$ZT_BUILDDIR/bench/costmodel
[ -x "$CM" ] || skip_all "no bench/costmodel ($CM; make check builds it)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export TMPDIR=$T
SHAPES="tg gpt2 2,2,2,32,128,256,2,32;tl llama 2,4,2,32,64,256,2,32;tlora llama 2,4,2,32,64,256,2,32 --tie-embeddings false --lora-r 4 --lora-targets all-linear"
M=(bash "$ZT_SRCDIR/scripts/gpu-measure.sh")
MA=(--backend cpu-strict --ztrain "$ZTRAIN" --mpirun "$ZT_MPIRUN" --costmodel "$CM"
    --calib "$ZT_SRCDIR/bench/costmodel_h100.txt" --src "$ZT_SRCDIR" --py "$ZT_SRCDIR/bench" --commit testcommit)

ZT_MEASURE_STEPS=5 ZT_MEASURE_DET_STEPS=4 ZT_MEASURE_THREADS=1 ZT_MEASURE_PEAK_TFLOPS=2.5 ZT_MEASURE_SHAPES=$SHAPES \
    "${M[@]}" "$T/out" "${MA[@]}" > "$T/run.txt" 2>&1
RC=$?
diag <(tail -n 12 "$T/run.txt")
ok $([ $RC = 0 ] && python3 -m json.tool "$T/out/measure.json" > /dev/null; echo $?) \
   "run.sh measure's logic on cpu-strict: exit $RC, measure.json parses"
ok $([ -s "$T/out/measure.log" ] && [ -s "$T/out/measure.txt" ] && [ "$(ls "$T/out" | wc -l)" = 3 ]; echo $?) \
   "three files: measure.json, measure.txt, measure.log"

python3 - "$T/out/measure.json" "$T/out/measure.log" > "$T/check.txt" <<'PY'
import json, re, statistics, sys
J = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
bad = []
def want(cond, what):
    print(("ok: " if cond else "BAD: ") + what)
    if not cond:
        bad.append(what)
want(J["commit"] == "testcommit" and J["backend"] == "cpu-strict" and J["steps"] == 5 and J["det_steps"] == 4, "header")
want(J["device"]["bf16_dense_peak_tflops"] == 2.5, "peak from ZT_MEASURE_PEAK_TFLOPS")
want("GPU" in J["tests"]["test_cuda"].get("skipped", ""), "test_cuda skipped with its reason")
e = J["tests"]["engine_s0"]
want(e.get("rc") == 0 and e.get("ok") == 1 and e.get("not_ok") == 0, f"engine check s0: {e}")
for t in ("memcheck_train", "memcheck_test_cuda"):
    want("cuda backend" in J["sanitizer"][t].get("skipped", ""), f"{t} skipped with its reason")
names = [s["name"] for s in J["shapes"]]
want(names == ["tg", "tl", "tlora"], f"shapes in order: {names}")
# each shape's train output in the log, in order: its step lines
steps, dsteps = {}, {}
for tag, n, into in (("train", 5, steps), ("train_det", 4, dsteps)):
    blocks = re.split(r"^==== shape/\d+-(\w+) %s: " % tag, log, flags=re.M)
    for i in range(1, len(blocks), 2):
        rows = re.findall(r"^step\s+(\d+)/%d \|.*\|\s+(\d+) tok/s \|\s+([\d.]+) ms/step" % n, blocks[i + 1], re.M)
        into[blocks[i]] = [(int(a), float(b), float(c)) for a, b, c in rows]
want(all(re.search(r"^==== shape/\d+-%s train_det: env ZT_CUDA_DETERMINISTIC=1 " % n, log, re.M) for n in names),
     "each shape's second run with ZT_CUDA_DETERMINISTIC=1")
for s in J["shapes"]:
    n, z = s["name"], s["ztrain"]
    L, C, T, B = s["L"], s["C"], s["T"], s["B"]
    rows = [r for r in steps.get(n, []) if r[0] >= 3]
    want(z.get("rc") == 0 and z.get("steps_timed") == 3 and len(rows) == 3, f"{n}: steps 3..5 timed, in the log")
    if rows:
        want(abs(z["ms_per_step"] - statistics.median(r[2] for r in rows)) <= 0.051, f"{n}: ms/step {z['ms_per_step']} = median of the log's")
        want(abs(z["tokens_per_s"] - statistics.median(r[1] for r in rows)) <= 0.51, f"{n}: tokens/s {z['tokens_per_s']} = median of the log's")
    zd = s["ztrain_det"]
    drows = [r for r in dsteps.get(n, []) if r[0] >= 3]
    want(zd.get("rc") == 0 and zd.get("steps_timed") == 2 and len(drows) == 2 and
         abs(zd["ms_per_step"] - statistics.median(r[2] for r in drows)) <= 0.051 and
         abs(zd["det_over_default"] - zd["ms_per_step"] / z["ms_per_step"]) < 1e-12,
         f"{n}: ZT_CUDA_DETERMINISTIC=1 run: steps 3..4 timed as the log's, its ratio to the first run")
    P = z.get("model_params")
    want(P and s["params"] == P, f"{n}: params {s['params']} = the run's {P}")
    if s["lora_adapter_params"]:
        hd = C // s["NH"]
        io = [(C, s["NH"] * hd), (C, s["NKV"] * hd), (C, s["NKV"] * hd), (s["NH"] * hd, C), (C, s["H"]), (C, s["H"]), (s["H"], C)]
        A = L * sum(4 * (a + b) for a, b in io)
        want(s["lora_adapter_params"] == A, f"{n}: adapter params {s['lora_adapter_params']} = {A} (r 4, all-linear)")
        fpt = 4 * P + 6 * A + 6 * L * C * T
        want(f"  LoRA r=4 on all-linear, the base frozen in bf16: {A} trained parameters" in log,
             f"{n}: the cost model's step is the LoRA step ({A} adapter parameters)")
    else:
        fpt = 6 * P + 6 * L * C * T
    cm, cz = s["costmodel"], s["costmodel_ztrain"]
    # the build's path: a predicted step (no cuDNN), or the step without cuDNN's uncalibrated classes
    want(cm.get("rc") == 0 and ((cm.get("predicted_ms", 0) > 0 and
                                 abs(cm["predicted_over_measured"] - cm["predicted_ms"] / z["ms_per_step"]) < 1e-9) or
                                (cm.get("predicted_without_attention_ms", 0) > 0 and "cudnn" in cm.get("uncalibrated", ""))),
         f"{n}: cost model {cm.get('predicted_ms', cm.get('predicted_without_attention_ms'))} ms predicted, ratio to measured")
    want(cz.get("rc") == 0 and cz.get("predicted_ms", 0) > 0 and cz.get("attention", "").startswith("ztrain's kernels") and
         abs(cz["predicted_over_measured"] - cz["predicted_ms"] / zd["ms_per_step"]) < 1e-9,
         f"{n}: cost model --attention ztrain {cz.get('predicted_ms')} ms, ratio to the ZT_CUDA_DETERMINISTIC=1 run")
    want(s["flops_per_token"] == fpt, f"{n}: FLOPs/token {s['flops_per_token']} = {fpt}")
    tf = fpt * z["tokens_per_s"] * 1e-12
    want(abs(z["tflops"] - tf) <= 1e-12 + 1e-9 * tf and abs(z["mfu"] - tf / 2.5) <= 1e-9, f"{n}: TFLOP/s {z['tflops']:.3g}, MFU {z['mfu']:.3g}")
    # the run's own TFLOP/s (zt_ctx_flops_per_token x tokens/s, the metrics' tflops) agree with this
    # count (the metrics' tokens/s rounded to 0.1, their tflops to 6 digits)
    want(z.get("reported_tflops", 0) > 0 and abs(z["reported_tflops"] - tf) <= 2e-4 * tf,
         f"{n}: the run's metrics' TFLOP/s {z.get('reported_tflops')} = {tf:.6g}")
    pred = s["estimate"].get("predicted_device_peak_bytes")
    meas = z.get("measured_peak_bytes")
    want(pred and pred > 0 and meas and meas > 0 and abs(z["measured_over_predicted_peak"] - meas / pred) < 1e-12,
         f"{n}: peak measured {meas} vs predicted {pred}")
    for t in ("torch_eager", "torch_compile"):
        r = s[t]
        want(("skipped" in r and r["skipped"]) or r.get("tokens_per_s", 0) > 0, f"{n}: {t} skipped with a reason or measured")
want(log.count("checkpoint: no save at the end of training (checkpoint.final false)") == 6 and
     log.count("weights: not saved (checkpoint.final false") == 6, "no run saved a checkpoint or weights")
sys.exit(1 if bad else 0)
PY
RC=$?
diag <(grep BAD "$T/check.txt")
ok $RC "measure.json: $(grep -c '^ok' "$T/check.txt") checks of the figures against the runs ($(grep -c BAD "$T/check.txt") wrong)"

# a budget of 0 s: nothing runs, every section says why, the JSON is written
ZT_MEASURE_BUDGET=0 ZT_MEASURE_SAN_RESERVE=0 ZT_MEASURE_SHAPES=$SHAPES "${M[@]}" "$T/out0" "${MA[@]}" > "$T/run0.txt" 2>&1
RC=$?
ok $([ $RC = 0 ] && python3 - "$T/out0/measure.json" <<'PY'
import json, sys
J = json.load(open(sys.argv[1]))
b = "past the time budget"
ok = b in J["tests"]["engine_s0"]["skipped"] and len(J["shapes"]) == 3 and all(
    b in s[k]["skipped"] for s in J["shapes"] for k in ("estimate", "ztrain", "ztrain_det", "torch_eager")
    if not ("skipped" in s[k] and "PyTorch" in s[k]["skipped"]))
ok = ok and all(b in s[k]["skipped"] for s in J["shapes"] for k in ("costmodel", "costmodel_ztrain"))
sys.exit(0 if ok else 1)
PY
echo $?) "ZT_MEASURE_BUDGET=0: exit $RC, every section skipped as past the budget, measure.json written"

# a section that fails (a "Python" that imports torch but whose baseline exits 3): recorded with its
# status, the later sections still run, the exit status is 1
printf '#!/bin/sh\n[ "$1" = -c ] && exit 0\necho "baseline failed" >&2; exit 3\n' > "$T/fakepy"; chmod +x "$T/fakepy"
ZT_MEASURE_STEPS=3 ZT_MEASURE_DET_STEPS=0 ZT_MEASURE_THREADS=1 ZT_MEASURE_PYTHON=$T/fakepy ZT_MEASURE_TORCH_DEVICE=cpu \
    ZT_MEASURE_SHAPES="tl llama 2,4,2,32,64,256,2,32" "${M[@]}" "$T/outf" "${MA[@]}" > "$T/runf.txt" 2>&1
RC=$?
ok $([ $RC = 1 ] && python3 - "$T/outf/measure.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["shapes"][0]
sys.exit(0 if s["torch_eager"]["rc"] == 3 and s["torch_compile"]["rc"] == 3 and s["ztrain"]["rc"] == 0
         and s["ztrain_det"]["skipped"] == "ZT_MEASURE_DET_STEPS=0"
         and s["ztrain"]["tokens_per_s"] > 0 and "ztrain_speed_ratio" not in s["torch_eager"] else 1)
PY
echo $?) "a failing baseline: exit $RC, recorded with its exit status 3 (eager and compile), ztrain's figures kept"

# the PyTorch rows, with PyTorch on the CPU
HFPY=${ZT_HF_PYTHON:-/opt/hfref/bin/python}
if [ -x "$HFPY" ] && "$HFPY" -c 'import torch' 2> /dev/null; then
    ZT_MEASURE_STEPS=4 ZT_MEASURE_DET_STEPS=0 ZT_MEASURE_THREADS=1 ZT_MEASURE_PYTHON=$HFPY ZT_MEASURE_TORCH_DEVICE=cpu ZT_MEASURE_COMPILE=0 \
        ZT_MEASURE_SHAPES="tg gpt2 2,2,2,32,128,256,2,32;tlora llama 2,4,2,32,64,256,2,32 --tie-embeddings false --lora-r 4 --lora-targets all-linear" \
        "${M[@]}" "$T/outt" "${MA[@]}" > "$T/runt.txt" 2>&1
    RC=$?
    diag <(grep -E 'torch|PyTorch' "$T/runt.txt" | head -n 6)
    ok $([ $RC = 0 ] && python3 - "$T/outt/measure.json" "$T/outt/measure.log" <<'PY'
import json, re, sys
J = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
ok = len(J["shapes"]) == 2
for s in J["shapes"]:
    t, z = s["torch_eager"], s["ztrain"]
    m = re.search(r"^==== shape/\d+-%s torch_eager: .*?bf16 autocast:\s+([\d.]+) ms/step\s+([\d.]+) tokens/s" % s["name"],
                  log, re.M | re.S)
    ok = ok and t.get("rc") == 0 and t.get("device") == "cpu" and m is not None
    ok = ok and t["ms_per_step"] == float(m.group(1)) and t["tokens_per_s"] == float(m.group(2))
    ok = ok and abs(t["tflops"] - s["flops_per_token"] * t["tokens_per_s"] * 1e-12) < 1e-15
    ok = ok and abs(t["ztrain_speed_ratio"] - z["tokens_per_s"] / t["tokens_per_s"]) < 1e-12
    ok = ok and s["torch_compile"].get("skipped") == "ZT_MEASURE_COMPILE=0"
    ok = ok and ("--lora 4" in log) == True
    # the profile of 2 more steps (torch.profiler): as the log's PROFILE_JSON line, the attention operators found
    p = t.get("profile") or {}
    m = re.search(r"^==== shape/\d+-%s torch_eager: .*?^PROFILE_JSON (.*?)$" % s["name"], log, re.M | re.S)
    pj = json.loads(m.group(1)) if m else {}
    ok = ok and p.get("steps") == 2 and p.get("attention_ms_per_step") == pj.get("attention_ms_per_step")
    ok = ok and p["attention_ms_per_step"] > 0 and abs(p["attention_ms_per_step"] - p["attention_fwd_ms_per_step"] -
                                                         p["attention_bwd_ms_per_step"]) < 1e-9
    ok = ok and any(k["attention"] and "scaled_dot_product" in k["name"] for k in p["kernels"])
sys.exit(0 if ok else 1)
PY
    echo $?) "PyTorch eager on the CPU ($HFPY): exit $RC, ms/step and tokens/s as the log's, TFLOP/s, ztrain's speed ratio, the torch.profiler table's attention time; compile skipped (ZT_MEASURE_COMPILE=0)"
else
    skip "PyTorch eager rows on the CPU" "no PyTorch in $HFPY (ZT_HF_PYTHON)"
fi
done_testing
