#!/bin/bash
# moe_paths.sh -- the Mixture of Experts' bf16 experts' backward paths
# (docs/moe.md "Cost model") timed against each other in one run, next to
# bench/costmodel's prediction of each: the default (the experts' input and
# weight gradients in grouped GEMMs), ZT_TEST_NO_MOEGW=1 (the weight
# gradients a GEMM an expert), ZT_TEST_NO_MOEGB=1 (the input gradients too).
# Prints each path's median step and its ratio to the default's; the paths
# run round-robin ROUNDS times.
#
#   bench/moe_paths.sh [--backend cpu|cuda] [--steps N] [--rounds N] [--threads N]
#                      [--shape L,NH,NKV,C,H,V,B,T,E,K,I]
#
# Shape: a llama with E experts of width I, K a token, every block sparse,
# untied; bf16, ZeRO stage 0, one rank, micro-batch B of T tokens.  Default on
# cpu: 2,4,2,64,128,256,2,64,16,4,32 (seconds); on cuda a Qwen3-30B-A3B block
# (4 of its 48 layers, vocabulary 32000): 4,32,4,2048,6144,32000,1,4096,128,8,768.
# Step time: the median of the steps after the first.  The cost model's
# step is bench/costmodel's for the same shape, path and backend (--attention
# cudnn --assume cudnn=0.35 on cuda: a what-if, docs/gpu.md).  ZTRAIN=...,
# COSTMODEL=... (words split at spaces), MPIRUN=... run other builds; a GPU
# bundle runs it as `run.sh moe-paths [ARGS]` (scripts/gpu-bundle.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
backend=cpu steps=4 rounds=2 threads=1 shape=""
while [ $# -ge 2 ]; do
    case "$1" in
        --backend) backend=$2 ;; --steps) steps=$2 ;; --rounds) rounds=$2 ;; --threads) threads=$2 ;;
        --shape) shape=$2 ;;
        *) break ;;
    esac
    shift 2
done
[ $# = 0 ] || { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
if [ -z "$shape" ]; then
    shape=2,4,2,64,128,256,2,64,16,4,32
    [ "$backend" = cuda ] && shape=4,32,4,2048,6144,32000,1,4096,128,8,768
fi
IFS=, read -r L NH NKV C H V B T E K I <<< "$shape"
[ -n "$I" ] || { echo "moe_paths.sh: --shape takes 11 numbers (L,NH,NKV,C,H,V,B,T,E,K,I)" >&2; exit 2; }
ZTRAIN=${ZTRAIN:-./ztrain}
read -r -a CM <<< "${COSTMODEL:-bench/costmodel}"   # (words: a loader and its program)
MPIRUN=${MPIRUN:-mpirun}
[ -x "$ZTRAIN" ] || { echo "moe_paths.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "moe_paths.sh: needs python3" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "shape: llama MoE, $L layers, hidden $C, $NH heads / $NKV KV heads, $E experts of width $I, top-$K," \
     "vocab $V, untied; bf16, stage 0, 1 rank, $B x $T tokens a step; backend $backend; $steps steps + 1" \
     "warm-up; $rounds rounds"
[ "$backend" = cpu ] && echo "machine: $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
head -c 400000 data/tinyshakespeare.txt > "$tmp/corpus.txt"
"$ZTRAIN" prep --input "$tmp/corpus.txt" --output "$tmp/tok" --val-fraction 0 > /dev/null
PATHS=("default" "ZT_TEST_NO_MOEGW=1" "ZT_TEST_NO_MOEGB=1")
ENVS=("ZT_MOE_PATHS_DEFAULT=1" "ZT_TEST_NO_MOEGW=1" "ZT_TEST_NO_MOEGB=1")   # (the first: no hook)
thr=(); [ "$backend" = cpu ] && thr=(--threads "$threads")
# run TAG P: path P's run, $tmp/TAG.{jsonl,out}
run() {
    local tag=$1 e=${ENVS[$2]}
    rm -rf "$tmp/ck"
    env "$e" "$MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train \
        --arch llama --n-layer "$L" --n-head "$NH" --n-kv-head "$NKV" --n-embd "$C" --intermediate-size "$H" \
        --vocab "$V" --tie-embeddings false --context "$T" --seq-len "$T" \
        --ztrain.model.n_experts "$E" --ztrain.model.experts_per_token "$K" \
        --ztrain.model.moe_intermediate_size "$I" --precision bf16 --stage 0 --backend "$backend" "${thr[@]}" \
        --micro-batch "$B" --batch-size "$B" --steps $((steps + 1)) --log-every 1 --eval-every 0 \
        --train "$tmp/tok_train.bin" --val= --resume never --sample-tokens 0 --ckpt-final false \
        --ckpt-dir "$tmp/ck" --metrics "$tmp/$tag.jsonl" > "$tmp/$tag.out" 2>&1 ||
        { echo "moe_paths.sh: the ${PATHS[$2]} run failed:" >&2; tail -5 "$tmp/$tag.out" >&2; exit 1; }
}
for r in $(seq 1 "$rounds"); do
    for p in 0 1 2; do run "p${p}_$r" "$p"; done
done
# the cost model's step, each path (the what-if line's on cuda)
cmo=(--shape "llama:$L,$NH,$NKV,$C,$H,$V,$B,$T,untied,moe=$E:$K:$I" --kernels 0)
[ "$backend" = cuda ] && cmo+=(--attention cudnn --assume cudnn=0.35)
for p in 0 1 2; do
    if [ -x "${CM[0]}" ]; then
        env "${ENVS[$p]}" "${CM[@]}" "${cmo[@]}" > "$tmp/cm$p.txt" 2>&1 || true
    else
        echo "no ${CM[0]}" > "$tmp/cm$p.txt"
    fi
done
python3 - "$tmp" "$rounds" "${PATHS[@]}" <<'PY'
import json, re, statistics, sys
tmp, rounds, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def step_ms(p):
    rs = [json.loads(l) for l in open(p) if '"loss"' in l]
    return statistics.median([r["step_ms"] for r in rs][1:])
def cm_ms(p):
    s = open(p).read()
    m = re.search(r"WHAT-IF step \([^)]*\) ([0-9.]+) ms", s) or re.search(r"predicted step[^0-9]*([0-9.]+) ms", s)
    return float(m.group(1)) if m else None
t = [[step_ms("%s/p%d_%d.jsonl" % (tmp, p, r)) for r in range(1, rounds + 1)] for p in range(3)]
print("%-22s %12s %18s %16s %18s" % ("path", "step (ms)", "/ default (meas.)", "cost model (ms)", "/ default (model)"))
c0 = cm_ms("%s/cm0.txt" % tmp)
for p in range(3):
    ratio = statistics.median([b / a for a, b in zip(t[0], t[p])])
    c = cm_ms("%s/cm%d.txt" % (tmp, p))
    print("%-22s %12.1f %18.3f %16s %18s" % (paths[p], statistics.median(t[p]), ratio,
          "%.1f" % c if c else "-", "%.3f" % (c / c0) if c and c0 else "-"))
PY
