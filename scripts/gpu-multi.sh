#!/bin/bash
# gpu-multi.sh -- the checks and the scaling bench for a machine with several
# GPUs (no ztrain run has crossed two real GPUs yet): one bounded device call
# that runs NCCL with a GPU per rank, the engine against the cpu backend at
# that many ranks, and ZeRO's scaling from 1 to every GPU; every figure in
# OUTDIR/multi.json, a table in OUTDIR/multi.txt, every command's output in
# OUTDIR/multi.log.
#
#   scripts/gpu-multi.sh OUTDIR [--backend X] [--ztrain P] [--mpirun P]
#       [--src DIR] [--commit C]
#
# The GPU bundle runs it as `run.sh multi OUTDIR`.  SRC (default this
# script's ..) holds configs/, data/tinyshakespeare.txt and
# scripts/engine-check.sh.  Sections, most important first:
#   1. devices: nvidia-smi -L and topo -m; G = the GPUs it lists
#      (ZT_MULTI_GPUS: that many instead; a backend other than cuda: 2
#      ranks, sharing the host); fewer than 2 GPUs: the run says so and
#      stops (exit 3) after writing multi.json
#   2. test_comm_gpu at G ranks (ZT_MULTI_TEST_COMM: the command; the
#      collectives over NCCL, a GPU per rank)
#   3. engine check at G ranks (scripts/engine-check.sh): GPT-2 tiny at
#      stages 0-3, bf16 stage 3 and save + resume, over NCCL (a backend
#      other than cuda: host-staged MPI), against the cpu backend; the Llama
#      tiny in bf16 at stage 3 and with sequence parallelism 2
#   4. scaling (weak: a fixed micro batch a GPU): per shape of
#      ZT_MULTI_SHAPES ("NAME ARCH L,NH,NKV,C,H,V,B,T" separated by ';',
#      ARCH gpt2 or llama, B the micro batch a rank), per stage of
#      ZT_MULTI_STAGES (default "0 3"), per rank count n of 1, 2, 4, ... and
#      G: ztrain train --precision bf16 --stage S --micro-batch B
#      --batch-size B n for ZT_MULTI_STEPS (8) steps, --memory-report end
#   5. multi.json and the table: per run the median ms a step and tokens/s
#      of steps 3 on, tokens/s a GPU, the scaling efficiency (tokens/s over
#      n x the same shape and stage's at 1 rank), the bytes a rank sent a
#      step, the planner's peak and the measured one (rank 0's)
# Budget: ZT_MULTI_BUDGET seconds in all (default 470); a section that would
# start past it is recorded as skipped; each has its own timeout, cut to
# what is left.  No run writes a checkpoint but the engine check's resume.
# Exit status 0 when multi.json was written and every section that ran
# exited 0.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)

out=${1:-}; [ -n "$out" ] && shift
backend=cuda; zt=""; mpirun=${ZT_MPIRUN:-mpirun}; commit=""
while [ $# -ge 2 ]; do
    case "$1" in
        --backend) backend=$2 ;; --ztrain) zt=$2 ;; --mpirun) mpirun=$2 ;; --src) SRC=$2 ;;
        --commit) commit=$2 ;;
        *) break ;;
    esac
    shift 2
done
if [ -z "$out" ] || [ $# -gt 0 ]; then sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
SRC=$(cd "$SRC" && pwd) || exit 2
[ -n "$zt" ] || zt=$SRC/ztrain
case $zt in */*) zt=$(cd "$(dirname "$zt")" && pwd)/$(basename "$zt") ;; esac
[ -n "$commit" ] || commit=$(git -C "$SRC" rev-parse --short HEAD 2> /dev/null || echo "?")
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/ztmulti.XXXXXX")
trap 'rm -rf "$W"' EXIT
BUDGET=${ZT_MULTI_BUDGET:-470}
STEPS=${ZT_MULTI_STEPS:-8}
STAGES=${ZT_MULTI_STAGES:-"0 3"}
THREADS=${ZT_MULTI_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export ZTRAIN_REQUEUE=false
unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE ZTRAIN_BACKEND ZTRAIN_CONFIG
FAILED=0
LOG=$out/multi.log
: > "$LOG"
exec > >(tee "$out/multi.txt") 2>&1

# section DIR TAG LIMIT CMD...: CMD under a timeout of LIMIT seconds, cut to
# what is left of the budget; DIR/TAG.{out,rc,s}, or DIR/TAG.skip
section() {
    local d=$1 tag=$2 lim=$3; shift 3
    mkdir -p "$d"
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 5 ]; then
        echo "past the time budget (${BUDGET} s, ZT_MULTI_BUDGET)" > "$d/$tag.skip"
        printf '  %-24s SKIP: %s\n' "$tag" "$(cat "$d/$tag.skip")"
        return 99
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    local t0=$SECONDS
    timeout -k 5 "$lim" "$@" > "$d/$tag.out" 2>&1
    local rc=$?
    [ $rc = 0 ] || FAILED=$((FAILED + 1))
    echo $rc > "$d/$tag.rc"; echo $((SECONDS - t0)) > "$d/$tag.s"
    { echo "==== ${d#"$W"/} $tag: $* (exit $rc, $((SECONDS - t0)) s)"; cat "$d/$tag.out"; } >> "$LOG"
    printf '  %-24s exit %d%s (%d s)\n' "$tag" "$rc" "$([ $rc = 124 ] && echo ", timed out after ${lim} s")" \
        "$((SECONDS - t0))"
    return $rc
}
skip() {  # skip DIR TAG REASON
    mkdir -p "$1"; echo "$3" > "$1/$2.skip"; printf '  %-24s SKIP: %s\n' "$2" "$3"
}
json() {  # multi.json and the table from what is in $W now
    python3 - "$W" "$out/multi.json" "$commit" "$backend" "$BUDGET" > "$W/table.txt" 2> "$W/json.err" <<'PY' ||
import json, os, re, statistics, sys
W, dst, commit, backend, budget = sys.argv[1:6]

def read(p, default=None):
    try:
        with open(p, errors="replace") as f:
            return f.read()
    except OSError:
        return default

def section(d, tag):
    """a section's exit status and seconds, or why it was skipped (None: not run)"""
    s = read(os.path.join(d, tag + ".skip"))
    if s is not None:
        return {"skipped": s.strip()}
    rc = read(os.path.join(d, tag + ".rc"))
    if rc is None:
        return None
    return {"rc": int(rc), "seconds": int(read(os.path.join(d, tag + ".s"), "0"))}

def tap(d, tag):
    r = section(d, tag)
    text = read(os.path.join(d, tag + ".out"), "") or ""
    if r is not None and "rc" in r:
        r["ok"] = len(re.findall(r"^ok ", text, re.M))
        r["not_ok"] = [l[:200] for l in text.splitlines() if l.startswith("not ok")]
        r["skip"] = len(re.findall(r"^ok .*# SKIP", text, re.M))
    return r

rec = {"commit": commit, "backend": backend, "budget_s": int(budget), "date": (read(W + "/date", "") or "").strip(),
       "gpus": int((read(W + "/gpus", "0") or "0").strip() or 0),
       "devices": (read(W + "/devices/list.txt", "") or "").strip().splitlines(),
       "topology": read(W + "/devices/topo.txt"),
       "tests": {}, "runs": []}
for tag in ("test_comm_gpu", "engine_gpt2", "engine_llama"):
    rec["tests"][tag] = tap(W + "/tests", tag)
for d in sorted(os.listdir(W + "/scale")) if os.path.isdir(W + "/scale") else []:
    D = os.path.join(W, "scale", d)
    spec = (read(D + "/spec", "") or "").split()
    if len(spec) < 5:
        continue
    name, arch, dims, stage, n = spec[:5]
    L, NH, NKV, C, H, V, B, T = (int(v) for v in dims.split(","))
    r = {"shape": name, "arch": arch, "stage": int(stage), "ranks": int(n), "micro_batch": B, "T": T,
         "tokens_per_step": B * T * int(n), "train": section(D, "train")}
    ms, tok, comm = [], [], []
    mem = 0
    for line in (read(D + "/metrics.jsonl", "") or "").splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if "tokens_per_s" in m and m.get("step", 0) > 2:
            ms.append(m.get("step_ms", 0.0)); tok.append(m["tokens_per_s"]); comm.append(m.get("comm_bytes", 0))
        mem = max(mem, m.get("mem_peak_bytes", 0))
    r["steps_timed"] = len(ms)
    if ms:
        r["ms_per_step"] = statistics.median(ms)
        r["tokens_per_s"] = statistics.median(tok)
        r["tokens_per_s_per_gpu"] = r["tokens_per_s"] / int(n)
        r["comm_bytes_per_step"] = statistics.median(comm)
    text = read(D + "/train.out", "") or ""
    # (the device's line where the backend has one, else the accounted memory's)
    m = (re.search(r"^device memory peak per rank[^:]*: measured (\d+) bytes, predicted (\d+) bytes", text, re.M) or
         re.search(r"^memory peak per rank: accounted (\d+) bytes, predicted (\d+) bytes", text, re.M))
    if m:
        r["measured_peak_bytes"], r["predicted_peak_bytes"] = int(m.group(1)), int(m.group(2))
    elif mem:
        r["measured_peak_bytes"] = mem
    m = re.search(r"^model: (\d+) parameters", text, re.M)
    if m:
        r["params"] = int(m.group(1))
    err = [l for l in text.splitlines() if l.startswith("ztrain: error")]
    if err:
        r["error"] = err[0][:300]
    rec["runs"].append(r)
base = {(r["shape"], r["stage"]): r.get("tokens_per_s") for r in rec["runs"] if r["ranks"] == 1}
for r in rec["runs"]:
    b = base.get((r["shape"], r["stage"]))
    if b and r.get("tokens_per_s"):
        r["scaling_efficiency"] = r["tokens_per_s"] / (r["ranks"] * b)
with open(dst, "w") as f:
    json.dump(rec, f, indent=1)
print("gpus %d, backend %s, commit %s" % (rec["gpus"], backend, commit))
for tag, t in rec["tests"].items():
    if t is None:
        continue
    if "skipped" in t:
        print("%-14s SKIP: %s" % (tag, t["skipped"]))
    else:
        print("%-14s exit %d: %d ok, %d not ok%s" % (tag, t["rc"], t.get("ok", 0), len(t.get("not_ok", [])),
              "".join("\n    " + l for l in t.get("not_ok", []))))
print("%-14s %5s %5s %10s %12s %12s %8s %14s %14s %14s" % ("shape", "stage", "ranks", "ms/step", "tokens/s",
      "tok/s/GPU", "scaling", "sent/step", "peak", "predicted"))
for r in rec["runs"]:
    def f(k, fmt):
        return fmt % r[k] if r.get(k) is not None else "-"
    print("%-14s %5d %5d %10s %12s %12s %8s %14s %14s %14s%s" % (
        r["shape"], r["stage"], r["ranks"], f("ms_per_step", "%.1f"), f("tokens_per_s", "%.0f"),
        f("tokens_per_s_per_gpu", "%.0f"), f("scaling_efficiency", "%.3f"), f("comm_bytes_per_step", "%.0f"),
        f("measured_peak_bytes", "%d"), f("predicted_peak_bytes", "%d"),
        "" if "train" in r and r["train"] and r["train"].get("rc", 0) == 0 else "  (%s)" % (r.get("error") or r["train"])))
PY
        { echo "the JSON step failed:"; cat "$W/json.err"; }
}

echo "== ztrain multi-GPU $(date -u +%FT%TZ) on $(uname -n): commit $commit, backend $backend, budget $BUDGET s"
date -u +%FT%TZ > "$W/date"
# ---- 1. devices
mkdir -p "$W/devices"
G=0
if command -v nvidia-smi > /dev/null; then
    nvidia-smi -L > "$W/devices/list.txt" 2>&1
    nvidia-smi topo -m > "$W/devices/topo.txt" 2>&1
    G=$(grep -c '^GPU ' "$W/devices/list.txt")
    cat "$W/devices/list.txt" "$W/devices/topo.txt"
    { echo "==== nvidia-smi"; cat "$W/devices/list.txt" "$W/devices/topo.txt"; } >> "$LOG"
else
    echo "no nvidia-smi" | tee "$W/devices/list.txt"
fi
[ "$backend" != cuda ] && G=2
[ -n "${ZT_MULTI_GPUS:-}" ] && G=$ZT_MULTI_GPUS
echo "$G" > "$W/gpus"
if [ "$G" -lt 2 ]; then
    echo "== $G GPU(s): nothing to scale across (ZT_MULTI_GPUS overrides the count)"
    json; cat "$W/table.txt"
    exit 3
fi
comm=nccl; [ "$backend" = cuda ] || comm=mpi

# ---- 2. NCCL with a GPU per rank
T2=$W/tests
echo "== tests at $G ranks"
read -r -a TC <<< "${ZT_MULTI_TEST_COMM:-}"
[ ${#TC[@]} = 0 ] && [ -x "$SRC/tests/test_comm_gpu" ] && TC=("$SRC/libtool" --mode=execute "$SRC/tests/test_comm_gpu")
if [ "$backend" != cuda ]; then
    skip "$T2" test_comm_gpu "backend $backend: test_comm_gpu needs GPUs"
elif [ ${#TC[@]} = 0 ]; then
    skip "$T2" test_comm_gpu "no tests/test_comm_gpu (a build without --with-cuda)"
else
    section "$T2" test_comm_gpu 120 "$mpirun" -np "$G" --bind-to none "${TC[@]}"
fi
# ---- 3. the engine against the cpu backend at G ranks
ZT_ENGINE_THREADS=$THREADS ZT_ENGINE_TIMEOUT=120 section "$T2" engine_gpt2 200 \
    bash "$SRC/scripts/engine-check.sh" --backend "$backend" --ztrain "$zt" --mpirun "$mpirun" --np "$G" \
    --comm-backend "$comm" --cases "s0 s1 s2 s3 bf16s3 resume" --batch-size $((4 * G)) \
    --config "$SRC/configs/tiny.json" --text "$SRC/data/tinyshakespeare.txt"
grep -E '^(not )?ok' "$T2/engine_gpt2.out" 2> /dev/null | sed 's/^/    /'
# (--sp 2: G / 2 data-parallel groups, so the micro batch 4 G / (G / 2) = 8)
sp=(); [ $((G % 2)) = 0 ] && sp=(--case "sp2s3 fp32 --stage 3 --sp 2 --micro-batch 8 --act-ckpt blocks"
                                  --case "sp2bf16 bf16 --stage 3 --sp 2 --micro-batch 8")
ZT_ENGINE_THREADS=$THREADS ZT_ENGINE_TIMEOUT=120 section "$T2" engine_llama 150 \
    bash "$SRC/scripts/engine-check.sh" --backend "$backend" --ztrain "$zt" --mpirun "$mpirun" --np "$G" \
    --comm-backend "$comm" --cases "bf16s3" "${sp[@]}" --batch-size $((4 * G)) \
    --config "$SRC/configs/llama-tiny.json" --text "$SRC/data/tinyshakespeare.txt"
grep -E '^(not )?ok' "$T2/engine_llama.out" 2> /dev/null | sed 's/^/    /'
json

# ---- 4. scaling: 1, 2, 4, ... and G ranks at a fixed micro batch a rank
head -c 400000 "$SRC/data/tinyshakespeare.txt" > "$W/corpus.txt"
(cd "$W" && "$zt" prep --input corpus.txt --output c > prep.out 2>&1) || { echo "ztrain prep failed:"; cat "$W/prep.out"; }
SHAPES=${ZT_MULTI_SHAPES:-"gpt2-124m gpt2 12,12,12,768,3072,50304,8,1024;\
llama3.2-1b llama 16,32,8,2048,8192,128256,4,2048"}
IFS=';' read -r -a SHAPE_LIST <<< "$SHAPES"
NS=(1); n=2; while [ $n -lt "$G" ]; do NS+=($n); n=$((n * 2)); done; NS+=("$G")
thr=(); [ "$backend" != cuda ] && thr=(--threads "$THREADS")
i=0
for spec in "${SHAPE_LIST[@]}"; do
    read -r -a f <<< "$spec"
    [ ${#f[@]} -ge 3 ] || continue
    name=${f[0]}; arch=${f[1]}; dims=${f[2]}
    IFS=, read -r L NH NKV C H V Bt T <<< "$dims"
    if [ "$arch" = gpt2 ]; then
        args=(--config "$SRC/configs/tiny.json" --n-layer "$L" --n-head "$NH" --n-embd "$C" --vocab "$V"
              --context "$T")
    else
        args=(--config "$SRC/configs/llama-tiny.json" --n-layer "$L" --n-head "$NH" --n-kv-head "$NKV"
              --n-embd "$C" --intermediate-size "$H" --vocab "$V" --context "$T" --seq-len "$T")
    fi
    for s in $STAGES; do
        echo "== $name ($arch L=$L C=$C V=$V, micro batch $Bt x $T a rank), stage $s"
        for n in "${NS[@]}"; do
            i=$((i + 1)); D=$W/scale/$(printf '%02d' $i)-$name-s$s-n$n; mkdir -p "$D"
            echo "$name $arch $dims $s $n" > "$D/spec"
            section "$D" train 150 "$mpirun" -np "$n" --bind-to none "$zt" train "${args[@]}" \
                --micro-batch "$Bt" --batch-size $((Bt * n)) --precision bf16 --stage "$s" --backend "$backend" \
                --comm-backend "$comm" "${thr[@]}" --train "$W/c_train.bin" --val= --steps "$STEPS" \
                --log-every 1 --eval-every 0 --resume never --sample-tokens 0 --ckpt-final false \
                --ckpt-dir "$W/ck" --memory-report end --metrics "$D/metrics.jsonl"
            rm -rf "$W/ck"
            tail -n 1 "$D/train.out" 2> /dev/null | sed 's/^/    /'
        done
        json
    done
done
json
echo "== done in $SECONDS s (budget $BUDGET s); $FAILED section(s) failed"
cat "$W/table.txt"
[ -s "$out/multi.json" ] && [ "$FAILED" = 0 ]
