#!/bin/bash
# lora.sh -- LoRA against full fine-tuning on the same shape, in the same run
# (issue 27, item 7): the median step time and the peak memory per rank of
# full fine-tuning, LoRA r=16 on all-linear, the same with
# --lora-dropout 0.1, and QLoRA (the same adapters on an NF4 base,
# --lora-base nf4), each with its ratio to full fine-tuning.
#
#   bench/lora.sh [STEPS] [THREADS] [LAYERS] [BATCH] [SEQ] [ROUNDS]   (defaults 3 1 4 2 128 2)
#
# Shape: SmolLM-135M's (hidden 576, 9 heads, 3 KV heads, SwiGLU 1536, vocab
# 49152, tied) with fewer layers, random weights, one rank on the CPU, fp32.
# Tokens are the bytes of data/tinyshakespeare.txt.  Step time: the median
# step after the first (warm-up) step; the modes run round-robin ROUNDS
# times and a mode's ratio is taken within each round (median over rounds),
# so a machine whose load changes biases no mode.  Memory: the engine's
# accounted peak per rank ("memory per rank (accounted, peak)", the
# metrics' mem_peak_bytes) and the process's measured peak resident set
# (getrusage's ru_maxrss of the child: code, BLAS and allocator overheads
# included).  ZTRAIN=path/to/ztrain runs another build.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} threads=${2:-1} layers=${3:-4} batch=${4:-2} seq=${5:-128} rounds=${6:-2}
ZTRAIN=${ZTRAIN:-./ztrain}
[ -x "$ZTRAIN" ] || { echo "lora.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "lora.sh: needs python3 (the resource module)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "shape: SmolLM-135M-like, $layers layers, hidden 576, 9 heads / 3 KV heads, intermediate 1536," \
     "vocab 49152, tied; fp32, batch $batch x $seq tokens, 1 rank, $threads threads; $steps steps + 1 warm-up;" \
     "$rounds rounds"
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 > /dev/null

modes=(full lora lora_drop qlora)
declare -A extra=([full]="" [lora]="--lora-r 16 --lora-alpha 32 --lora-targets all-linear"
                  [lora_drop]="--lora-r 16 --lora-alpha 32 --lora-targets all-linear --lora-dropout 0.1"
                  [qlora]="--lora-r 16 --lora-alpha 32 --lora-targets all-linear --lora-base nf4")
# run MODE ROUND: one training run; writes $tmp/MODE_ROUND.{jsonl,out,rss}
run() {
    local m=$1 r=$2
    rm -rf "$tmp/ck"
    # shellcheck disable=SC2086
    python3 - "$tmp/${m}_$r.rss" "$ZTRAIN" train --arch llama --n-layer "$layers" --n-head 9 \
        --n-kv-head 3 --n-embd 576 --intermediate-size 1536 --vocab 49152 --tie-embeddings true \
        --context "$seq" --seq-len "$seq" --train_micro_batch_size_per_gpu "$batch" \
        --gradient_accumulation_steps 1 --steps $((steps + 1)) --threads "$threads" \
        --train "$tmp/tok_train.bin" --val "" --ckpt-dir "$tmp/ck" --ckpt-every 0 --sample-tokens 0 \
        --metrics "$tmp/${m}_$r.jsonl" ${extra[$m]} > "$tmp/${m}_$r.out" 2>&1 <<'PY'
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d %d\n" % (rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}
for r in $(seq 1 "$rounds"); do
    for m in "${modes[@]}"; do
        run "$m" "$r"
        [ -s "$tmp/${m}_$r.jsonl" ] || { echo "lora.sh: $m produced no metrics:" >&2; tail -5 "$tmp/${m}_$r.out" >&2; exit 1; }
    done
done
python3 - "$tmp" "$rounds" "${modes[@]}" <<'PY'
import json, re, statistics, sys
tmp, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def one(m, r):
    rows = [json.loads(l) for l in open("%s/%s_%d.jsonl" % (tmp, m, r)) if '"step_ms"' in l]
    ms = statistics.median([d["step_ms"] for d in rows[1:]])
    acc = max(d["mem_peak_bytes"] for d in rows)
    rss = int(open("%s/%s_%d.rss" % (tmp, m, r)).read().split()[1]) * 1024
    out = open("%s/%s_%d.out" % (tmp, m, r)).read()
    p = re.search(r"model: (\d+) parameters", out)
    return ms, acc, rss, int(p.group(1)) if p else 0
res = {m: [one(m, r) for r in range(1, rounds + 1)] for m in modes}
full = res["full"]
print("%-10s %12s %8s %16s %8s %16s %8s" % ("mode", "step ms", "ratio", "accounted peak", "ratio",
                                             "max RSS", "ratio"))
for m in modes:
    v = res[m]
    ms = statistics.median(x[0] for x in v)
    rt = statistics.median(v[i][0] / full[i][0] for i in range(rounds))
    acc, rss = max(x[1] for x in v), max(x[2] for x in v)
    facc, frss = max(x[1] for x in full), max(x[2] for x in full)
    print("%-10s %12.1f %8.2f %12.1f MiB %8.3f %12.1f MiB %8.3f" % (m, ms, rt, acc / 2**20, acc / facc,
                                                                   rss / 2**20, rss / frss))
print("(step ms: median over rounds of the median step after the first; ratio: median of the per-round "
      "ratios to full; %d parameters)" % full[0][3])
PY
