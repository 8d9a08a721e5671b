#!/bin/bash
# gpu-measure.sh -- issue 41 item 7: one bounded device call that measures
# ztrain's training step at several model shapes next to PyTorch, the memory
# planner's and the cost model's predictions, and ends with compute-sanitizer;
# every figure in OUTDIR/measure.json (bench/measure_json.py), a table in
# OUTDIR/measure.txt, every command's output in OUTDIR/measure.log.
#
#   scripts/gpu-measure.sh OUTDIR [--backend X] [--ztrain P] [--mpirun P]
#       [--costmodel P] [--calib F] [--src DIR] [--py DIR] [--commit C]
#
# The GPU bundle runs it as `run.sh measure OUTDIR` (its programs, through its
# loader when needed; ZT_MEASURE_TEST_CUDA: the test_cuda command).  SRC (the
# source and build tree, default this script's ..) holds configs/,
# data/tinyshakespeare.txt, scripts/engine-check.sh.  Sections, most important first:
#   1. device: nvidia-smi name, driver, clocks, power (again at the end)
#   2. test_cuda with ZT_CUDA_TEST_QUICK=1 (its first checks: cuDNN's SDPA
#      plans at the GPT-2, SmolLM and 3B shapes, printed after it as
#      "== cuDNN SDPA plans": FINALIZED, or DECLINED / FAILED with cuDNN's
#      message); engine check case s0 (1 rank)
#   3. per shape (ZT_MEASURE_SHAPES): ztrain estimate --json (predicted device
#      peak), bench/costmodel (predicted step: the build's attention path, then
#      --attention ztrain), ztrain train --backend X --precision bf16 --stage 0
#      for ZT_MEASURE_STEPS steps (median of steps 3..; measured peak: the
#      metrics' mem_peak_bytes; nvidia-smi's process peak; the attention path
#      its start-up line names: cuDNN's fused attention in a build with cuDNN),
#      the same with ZT_CUDA_DETERMINISTIC=1 (ztrain's attention kernels) for
#      ZT_MEASURE_DET_STEPS steps, PyTorch eager (bench/*_torch.py, bf16
#      autocast, SDPA, fused AdamW) with ZT_MEASURE_PROFILE_STEPS (2) more
#      steps under torch.profiler: its per-kernel table, the attention
#      kernels' time per step (0: no profile)
#   4. per shape: PyTorch with torch.compile
#   5. compute-sanitizer memcheck: test_cuda quick (it has no filter: the whole
#      quick run, every kernel), then ztrain train (llama tiny, bf16, stage 0:
#      the step's newest kernels: adamw_multi, sumsq_to, nonfinite_to, xent_fused)
# Budget: ZT_MEASURE_BUDGET seconds in all (default 470); sections 3-4 stop
# ZT_MEASURE_SAN_RESERVE seconds (default 60) before it so that 5 runs; a
# section that would start past its limit is recorded as skipped; each has
# its own timeout, cut to what is left.  No run writes a checkpoint
# (--ckpt-final false) or a weights file.
#
# Exit status 0 when measure.json was written and every section that ran
# exited 0.  Environment: ZT_MEASURE_SHAPES: shapes separated by ';', each
#   "NAME ARCH L,NH,NKV,C,H,V,B,T [ztrain args...]" (ARCH gpt2 or llama; for
#   gpt2 NKV = NH, H = 4C; the args go to ztrain train and estimate; --lora-r R
#   and --tie-embeddings false are also given to the PyTorch baseline);
#   ZT_MEASURE_STEPS (8), ZT_MEASURE_DET_STEPS (6; 0: no deterministic run),
#   ZT_MEASURE_PROFILE_STEPS (2), ZT_MEASURE_TORCH (1; 0 = no PyTorch), ZT_MEASURE_PYTHON
#   (python3: the Python with PyTorch), ZT_MEASURE_TORCH_DEVICE (cuda; cpu: the
#   baselines on the CPU, for testing this script without a GPU),
#   ZT_MEASURE_COMPILE (1), ZT_MEASURE_PEAK_TFLOPS (the bf16 dense peak for
#   MFU; default by device name: 989.4 H100 SXM / H200, 756 H100 PCIe),
#   ZT_MEASURE_THREADS (host threads of cpu backends, 4), ZT_MEASURE_COSTMODEL and
#   ZT_MEASURE_TEST_CUDA (the commands, words split at spaces).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)

out=${1:-}; [ -n "$out" ] && shift
backend=cuda; zt=""; mpirun=${ZT_MPIRUN:-mpirun}; costmodel=""; calib=""
py=""; commit=""
while [ $# -ge 2 ]; do
    case "$1" in
        --backend) backend=$2 ;; --ztrain) zt=$2 ;; --mpirun) mpirun=$2 ;;
        --costmodel) costmodel=$2 ;; --calib) calib=$2 ;; --src) SRC=$2 ;; --py) py=$2 ;;
        --commit) commit=$2 ;;
        *) break ;;
    esac
    shift 2
done
if [ -z "$out" ] || [ $# -gt 0 ]; then sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
[ -n "$zt" ] || zt=$SRC/ztrain
[ -n "$py" ] || py=$SRC/bench
[ -n "$costmodel" ] || costmodel=$SRC/bench/costmodel
read -r -a CM <<< "${ZT_MEASURE_COSTMODEL:-$costmodel}"
[ -n "$calib" ] || calib=$SRC/bench/costmodel_h100.txt
[ -n "$commit" ] || commit=$(git -C "$SRC" rev-parse --short HEAD 2> /dev/null || echo "?")
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/ztmeasure.XXXXXX")
trap 'rm -rf "$W"' EXIT
BUDGET=${ZT_MEASURE_BUDGET:-470}
RESERVE=${ZT_MEASURE_SAN_RESERVE:-60}
STEPS=${ZT_MEASURE_STEPS:-8}
DET_STEPS=${ZT_MEASURE_DET_STEPS:-6}
PROF_STEPS=${ZT_MEASURE_PROFILE_STEPS:-2}
THREADS=${ZT_MEASURE_THREADS:-4}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export ZTRAIN_REQUEUE=false
unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE ZTRAIN_BACKEND ZTRAIN_CONFIG
FAILED=0
LOG=$out/measure.log
: > "$LOG"
exec > >(tee "$out/measure.txt") 2>&1

# section DIR TAG LIMIT UNTIL CMD...: run CMD under a timeout of LIMIT seconds
# cut to UNTIL - SECONDS; DIR/TAG.{out,rc,s}, or DIR/TAG.skip with the reason
section() {
    local d=$1 tag=$2 lim=$3 until=$4; shift 4
    mkdir -p "$d"
    local left=$((until - SECONDS))
    if [ "$left" -lt 5 ]; then
        echo "past the time budget (${BUDGET} s, ZT_MEASURE_BUDGET; ${RESERVE} s kept for the sanitizer)" > "$d/$tag.skip"
        printf '  %-28s SKIP: %s\n' "$tag" "$(cat "$d/$tag.skip")"
        return 99
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    local t0=$SECONDS
    timeout -k 5 "$lim" "$@" > "$d/$tag.out" 2>&1
    local rc=$?
    [ $rc = 0 ] || FAILED=$((FAILED + 1))
    echo $rc > "$d/$tag.rc"; echo $((SECONDS - t0)) > "$d/$tag.s"; echo "$lim" > "$d/$tag.limit"
    { echo "==== ${d#"$W"/} $tag: $* (exit $rc, $((SECONDS - t0)) s)"; grep -vE '^  [a-z_0-9.]+ += ' "$d/$tag.out"; } >> "$LOG"
    printf '  %-28s exit %d%s (%d s)\n' "$tag" "$rc" "$([ $rc = 124 ] && echo ", timed out after ${lim} s")" \
        "$((SECONDS - t0))"
    return $rc
}
skip() {  # skip DIR TAG REASON
    mkdir -p "$1"; echo "$3" > "$1/$2.skip"; printf '  %-28s SKIP: %s\n' "$2" "$3"
}
json() {  # measure.json and the table from what is in $W now
    python3 "$py/measure_json.py" --work "$W" --out "$out/measure.json" --budget "$BUDGET" \
        --steps "$STEPS" --det-steps "$DET_STEPS" --commit "$commit" --backend "$backend" ${ZT_MEASURE_PEAK_TFLOPS:+--peak-tflops "$ZT_MEASURE_PEAK_TFLOPS"} \
        > "$W/table.txt" 2> "$W/json.err" || { echo "measure_json.py failed:"; cat "$W/json.err"; }
}
smi() {  # smi FILE: one CSV line of the GPU's name, driver, clocks, power, temperature; FILE.reasons
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,pstate \
        --format=csv,noheader > "$1" 2> /dev/null ||
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$1" 2> /dev/null || rm -f "$1"
    # the clocks' limiting reasons (clocks_event_reasons; before driver 535: clocks_throttle_reasons)
    nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader > "$1.reasons" 2> /dev/null ||
        nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv,noheader > "$1.reasons" 2> /dev/null ||
        rm -f "$1.reasons"
}
PYT=${ZT_MEASURE_PYTHON:-python3}
TDEV=${ZT_MEASURE_TORCH_DEVICE:-cuda}
have_torch() {
    [ "${ZT_MEASURE_TORCH:-1}" = 1 ] || { echo "ZT_MEASURE_TORCH=0"; return 1; }
    local why
    if [ "$TDEV" = cuda ]; then
        why=$("$PYT" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "PyTorch has no GPU here")' 2>&1) &&
            return 0
        echo "PyTorch with CUDA not importable ($(echo "$why" | tail -n 1))"
    else
        why=$("$PYT" -c 'import torch' 2>&1) && return 0
        echo "PyTorch not importable ($(echo "$why" | tail -n 1))"
    fi
    return 1
}

echo "== ztrain measure $(date -u +%FT%TZ) on $(uname -n): commit $commit, backend $backend, budget $BUDGET s"
date -u +%FT%TZ > "$W/date"
echo "$commit" > "$W/commit"
# ---- 1. device
mkdir -p "$W/device"
if command -v nvidia-smi > /dev/null; then
    smi "$W/device/start.csv"
    nvidia-smi -L > "$W/device/list.txt" 2>&1
    nvidia-smi -q -d CLOCK > "$W/device/clocks.txt" 2>&1
    cat "$W/device/list.txt" "$W/device/start.csv" 2> /dev/null
    { echo "==== nvidia-smi"; cat "$W/device/list.txt" "$W/device/start.csv" "$W/device/clocks.txt"; } >> "$LOG" 2> /dev/null
else
    echo "no nvidia-smi: device $(uname -m) CPU" | tee "$W/device/none.txt"
fi
# cuDNN's libraries (run.sh: the directory with the shim and its sub-libraries first on the path)
[ -n "${ZT_BUNDLE_CUDNN:-}" ] && echo "cuDNN libraries: $ZT_BUNDLE_CUDNN" | tee "$W/device/cudnn.txt"

# ---- 2. test_cuda (quick), engine check s0
echo "== tests"
T2=$W/tests
# test_cuda: ZT_MEASURE_TEST_CUDA (run.sh measure: the bundle's, through its loader when needed),
# else the build's tests/test_cuda
read -r -a TC <<< "${ZT_MEASURE_TEST_CUDA:-}"
[ ${#TC[@]} = 0 ] && [ -x "$SRC/tests/test_cuda" ] && TC=("$SRC/libtool" --mode=execute "$SRC/tests/test_cuda")
if [ "$backend" != cuda ]; then
    skip "$T2" test_cuda "backend $backend: test_cuda needs a GPU"
elif [ ${#TC[@]} = 0 ]; then
    skip "$T2" test_cuda "no tests/test_cuda (a build without --with-cuda)"
else
    section "$T2" test_cuda 120 $((BUDGET - RESERVE)) env ZT_CUDA_TEST_QUICK=1 "${TC[@]}"
    # cuDNN's SDPA plans at the shapes below (test_cuda's first checks, test_cudnn_plans): whether
    # cuDNN's engine took the graphs, else cuDNN's own message; a DECLINED or FAILED plan means that
    # shape's attention ran ztrain's kernels
    if [ -f "$T2/test_cuda.out" ]; then
        echo "== cuDNN SDPA plans (test_cuda)"
        grep -E '^# cuDNN|cuDNN SDPA .* plan finalized' "$T2/test_cuda.out" | sed 's/^/  /' ||
            echo "  none reported (a build without cuDNN, or test_cuda stopped before them)"
        grep -qE '^not ok .*cuDNN SDPA' "$T2/test_cuda.out" &&
            echo "  !!!! cuDNN DECLINED OR FAILED AN SDPA PLAN: that attention runs ztrain's kernels (lines above) !!!!"
    fi
fi
ZT_ENGINE_THREADS=$THREADS ZT_ENGINE_TIMEOUT=90 section "$T2" engine_s0 120 $((BUDGET - RESERVE)) \
    bash "$SRC/scripts/engine-check.sh" --backend "$backend" --ztrain "$zt" --mpirun "$mpirun" --np 1 \
    --comm-backend mpi --cases s0 --config "$SRC/configs/tiny.json" --text "$SRC/data/tinyshakespeare.txt"
json

# the corpus: byte tokens of 200 kB of text (the shapes' vocabularies are larger: the cost is the shape's)
head -c 200000 "$SRC/data/tinyshakespeare.txt" > "$W/corpus.txt"
(cd "$W" && "$zt" prep --input corpus.txt --output c > prep.out 2>&1) || { echo "ztrain prep failed:"; cat "$W/prep.out"; }

# ---- 3. shapes
SHAPES=${ZT_MEASURE_SHAPES:-"gpt2-124m gpt2 12,12,12,768,3072,50304,8,1024;\
smollm-135m llama 30,9,3,576,1536,49152,8,2048;\
llama3.2-1b llama 16,32,8,2048,8192,128256,4,2048;\
llama3.2-3b llama 28,24,8,3072,8192,128256,4,2048;\
llama3-8b-lora llama 32,32,8,4096,14336,128256,2,2048 --tie-embeddings false --lora-r 16 --lora-targets all-linear"}
IFS=';' read -r -a SHAPE_LIST <<< "$SHAPES"
torch_ok=1; torch_why=$(have_torch) || torch_ok=0
[ $torch_ok = 1 ] || echo "PyTorch: skipped: $torch_why"
UNTIL=$((BUDGET - RESERVE))
i=0
for spec in "${SHAPE_LIST[@]}"; do
    read -r -a f <<< "$spec"
    [ ${#f[@]} -ge 3 ] || continue
    name=${f[0]}; arch=${f[1]}; dims=${f[2]}; extra=("${f[@]:3}")
    IFS=, read -r L NH NKV C H V Bt T <<< "$dims"
    i=$((i + 1)); D=$W/shape/$(printf '%02d' $i)-$name; mkdir -p "$D"
    printf '%s\n' "$spec" > "$D/spec"
    echo "== $name: $arch L=$L NH=$NH NKV=$NKV C=$C H=$H V=$V B=$Bt T=$T ${extra[*]}"
    if [ "$arch" = gpt2 ]; then
        args=(--config "$SRC/configs/tiny.json" --n-layer "$L" --n-head "$NH" --n-embd "$C" --vocab "$V"
              --context "$T")
        cms=gpt2:$L,$NH,$C,$V,$Bt,$T
    else
        args=(--config "$SRC/configs/llama-tiny.json" --n-layer "$L" --n-head "$NH" --n-kv-head "$NKV"
              --n-embd "$C" --intermediate-size "$H" --vocab "$V" --context "$T" --seq-len "$T")
        cms=llama:$L,$NH,$NKV,$C,$H,$V,$Bt,$T
    fi
    args+=(--micro-batch "$Bt" --batch-size "$Bt" --precision bf16 --stage 0 --train "$W/c_train.bin" --val=
           "${extra[@]}")
    lora=0; untied=0; prev=""; cml=(); lt=""
    for a in "${extra[@]}"; do
        [ "$prev" = --lora-r ] && lora=$a
        [ "$prev" = --lora-targets ] && lt=$a
        [ "$prev" = --lora-base ] && [ -n "$a" ] && cml+=(--lora-base "$a")
        [ "$prev" = --tie-embeddings ] && [ "$a" = false ] && untied=1
        prev=$a
    done
    # (the cost model's LoRA step: --lora R[:TARGETS], --lora-base)
    [ "$lora" != 0 ] && cml=(--lora "$lora${lt:+:$lt}" "${cml[@]}")
    [ $untied = 1 ] && cms=$cms,untied
    section "$D" estimate 60 $UNTIL "$zt" estimate --world-size 1 --device gpu --json "${args[@]}" --backend "$backend"
    if [ ! -x "${CM[0]}" ]; then
        skip "$D" costmodel "no bench/costmodel (${CM[0]})"
    else
        # the build's attention path (cuDNN's classes uncalibrated until a bench_gpu table with
        # cuDNN rows is fitted: "predicted step without attention"), then ztrain's kernels
        section "$D" costmodel 60 $UNTIL "${CM[@]}" --calib "$calib" --shape "$cms" --kernels 12 "${cml[@]}"
        section "$D" costmodel_ztrain 60 $UNTIL "${CM[@]}" --calib "$calib" --shape "$cms" --kernels 12 \
            --attention ztrain "${cml[@]}"
    fi
    thr=(); [ "$backend" != cuda ] && thr=(--threads "$THREADS")
    smi_pid=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits -lms 100 > "$D/smi_peak.txt" 2> /dev/null &
        smi_pid=$!
    fi
    section "$D" train 240 $UNTIL "$mpirun" -np 1 --bind-to none "$zt" train "${args[@]}" --backend "$backend" \
        "${thr[@]}" --steps "$STEPS" --log-every 1 --eval-every 0 --resume never --sample-tokens 0 \
        --ckpt-final false --ckpt-dir "$W/ck" --metrics "$D/metrics.jsonl"
    [ -n "$smi_pid" ] && { kill "$smi_pid" 2> /dev/null; wait "$smi_pid" 2> /dev/null; }
    [ -d "$W/ck" ] && { du -sh "$W/ck" | sed 's/^/  checkpoint dir (should be empty): /'; rm -rf "$W/ck"; }
    tail -n 2 "$D/train.out" 2> /dev/null | sed 's/^/    /'
    # ztrain's own attention kernels (deterministic mode), next to the run above
    if [ "$DET_STEPS" -gt 0 ] 2> /dev/null; then
        section "$D" train_det 240 $UNTIL env ZT_CUDA_DETERMINISTIC=1 "$mpirun" -np 1 --bind-to none \
            "$zt" train "${args[@]}" --backend "$backend" "${thr[@]}" --steps "$DET_STEPS" --log-every 1 --eval-every 0 \
            --resume never --sample-tokens 0 --ckpt-final false --ckpt-dir "$W/ck" --metrics "$D/metrics_det.jsonl"
        rm -rf "$W/ck"
        tail -n 1 "$D/train_det.out" 2> /dev/null | sed 's/^/    /'
    else
        skip "$D" train_det "ZT_MEASURE_DET_STEPS=0"
    fi
    if [ $torch_ok = 0 ]; then
        skip "$D" torch_eager "$torch_why"
    else
        tp=(--shape "$L,$NH,$C,$V,$Bt,$T"); script=gpt2_torch.py
        if [ "$arch" = llama ]; then
            script=llama_gpu_torch.py; tp=(--shape "$dims")
            [ $untied = 1 ] && tp+=(--untied)
            [ "$lora" != 0 ] && tp+=(--lora "$lora")
        fi
        [ "$TDEV" = cuda ] || tp+=(--device "$TDEV")
        # (no subshell: a failure must count in FAILED; both scripts import torch_common.py from beside them)
        printf '%s\n' "$py/$script ${tp[*]}" > "$D/torch_cmd"
        prof=(); [ "$PROF_STEPS" -gt 0 ] 2> /dev/null && prof=(--profile "$PROF_STEPS")
        section "$D" torch_eager 180 $UNTIL "$PYT" "$py/$script" "${tp[@]}" --only bf16 --steps "$STEPS" "${prof[@]}"
    fi
    json
done

# ---- 4. torch.compile, shape by shape
if [ $torch_ok = 1 ] && [ "${ZT_MEASURE_COMPILE:-1}" = 1 ]; then
    echo "== torch.compile"
    for D in "$W"/shape/*; do
        [ -f "$D/torch_cmd" ] || continue
        read -r -a tc <<< "$(cat "$D/torch_cmd")"
        echo "  ${D##*/}"
        section "$D" torch_compile 240 $UNTIL "$PYT" "${tc[@]}" --only bf16 --steps "$STEPS" --compile
        json
    done
else
    for D in "$W"/shape/*; do
        skip "$D" torch_compile "${torch_why:-ZT_MEASURE_COMPILE=0}" > /dev/null
    done
fi

# ---- 5. compute-sanitizer memcheck
echo "== compute-sanitizer"
S=$W/sanitizer
san=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2> /dev/null)
if [ "$backend" != cuda ]; then
    skip "$S" memcheck_train "backend $backend: compute-sanitizer needs the cuda backend"
    skip "$S" memcheck_test_cuda "backend $backend: compute-sanitizer needs the cuda backend"
elif [ -z "$san" ]; then
    skip "$S" memcheck_train "compute-sanitizer not found"
    skip "$S" memcheck_test_cuda "compute-sanitizer not found"
else
    so=(--tool memcheck --error-exitcode 3 --print-limit 20)
    if [ ${#TC[@]} = 0 ]; then
        skip "$S" memcheck_test_cuda "no test_cuda"
    elif [ "${TC[0]}" = "$SRC/libtool" ]; then
        section "$S" memcheck_test_cuda 150 "$BUDGET" env ZT_CUDA_TEST_QUICK=1 "${TC[@]:0:2}" "$san" "${so[@]}" "${TC[@]:2}"
    else
        section "$S" memcheck_test_cuda 150 "$BUDGET" env ZT_CUDA_TEST_QUICK=1 "$san" "${so[@]}" "${TC[@]}"
    fi
    section "$S" memcheck_train 120 "$BUDGET" "$mpirun" -np 1 --bind-to none "$san" "${so[@]}" "$zt" train \
        --config "$SRC/configs/llama-tiny.json" --train "$W/c_train.bin" --val= --backend cuda --precision bf16 \
        --stage 0 --steps 3 --log-every 1 --eval-every 0 --resume never --sample-tokens 0 --ckpt-final false \
        --ckpt-dir "$W/ck_san"
fi
command -v nvidia-smi > /dev/null && smi "$W/device/end.csv"
json
echo "== done in $SECONDS s (budget $BUDGET s); $FAILED section(s) failed"
cat "$W/table.txt"
ls -l "$out"
[ -s "$out/measure.json" ] && [ "$FAILED" = 0 ]
