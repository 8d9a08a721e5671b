#!/bin/bash
# llama_cpu.sh -- CPU training throughput of a Llama-shaped model (SmolLM-135M's
# shape: hidden 576, 9 heads, 3 KV heads, SwiGLU 1536, vocab 49152, tied; fewer
# layers, short sequences): `ztrain train` and, when torch + transformers import,
# PyTorch eager fp32 (bench/llama_torch.py) on the same shape, batch and thread
# count, in the same run.  Prints tokens/s of both and the ratio.
#
#   bench/llama_cpu.sh [STEPS] [THREADS] [LAYERS] [BATCH] [SEQ] [ROUNDS]   (defaults 6 2 4 2 128 3)
#
# ZTRAIN=path/to/ztrain runs another build; ZT_BENCH_PYTHON picks the Python
# (default: /opt/hfref/bin/python if present, else python3).  One rank; the
# thread count is given to both (OMP_NUM_THREADS, --threads, torch.set_num_threads).
# Tokens are the bytes of data/tinyshakespeare.txt (ids < 256 of the 49152).
# Both report the median step after the first (warm-up) step.  The two run
# alternately ROUNDS times; the ratio is taken within each round and its
# median reported (a machine shared with other jobs biases neither side), and
# the best round of each side and their ratio (the figure closest to a quiet
# machine when other jobs come and go).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6} threads=${2:-2} layers=${3:-4} batch=${4:-2} seq=${5:-128} rounds=${6:-3}
ZTRAIN=${ZTRAIN:-./ztrain}
if [ -z "${ZT_BENCH_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_BENCH_PYTHON=/opt/hfref/bin/python; else ZT_BENCH_PYTHON=python3; fi
fi
[ -x "$ZTRAIN" ] || { echo "llama_cpu.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "shape: SmolLM-135M-like, $layers layers, hidden 576, 9 heads / 3 KV heads, intermediate 1536," \
     "vocab 49152, tied; batch $batch x $seq tokens; $threads threads; $steps steps + 1 warm-up; $rounds rounds"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 >/dev/null
have_torch=1
"$ZT_BENCH_PYTHON" -c 'import torch, transformers' 2>/dev/null || have_torch=0

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

run_ztrain() {  # prints the median tokens/s of the steps after the first
    rm -rf "$tmp/ck" "$tmp/m.jsonl"
    # the exit status is not the benchmark's business once the steps ran (the
    # end of `ztrain train` saves weights); the metrics file is
    "$ZTRAIN" train --arch llama --n-layer "$layers" --n-head 9 --n-kv-head 3 --n-embd 576 \
        --intermediate-size 1536 --vocab 49152 --tie-embeddings true --context "$seq" --seq-len "$seq" \
        --train_micro_batch_size_per_gpu "$batch" --gradient_accumulation_steps 1 \
        --steps $((steps + 1)) --threads "$threads" --train "$tmp/tok_train.bin" --val "" \
        --ckpt-dir "$tmp/ck" --sample-tokens 0 --metrics "$tmp/m.jsonl" > "$tmp/ztrain.out" 2>&1 || true
    awk -F'"tokens_per_s": ' 'NR > 1 && NF > 1 { split($2, a, ","); print a[1] }' "$tmp/m.jsonl" 2>/dev/null |
        median || true
}

zts="" pts="" ratios=""
for r in $(seq 1 "$rounds"); do
    zt=$(run_ztrain)
    if [ -z "$zt" ]; then
        echo "ztrain produced no step metrics:" >&2
        tail -5 "$tmp/ztrain.out" >&2
        exit 1
    fi
    zts="$zts $zt"
    line="torch: SKIP (torch + transformers not importable by $ZT_BENCH_PYTHON)" pt=""
    if [ $have_torch = 1 ]; then
        line=$("$ZT_BENCH_PYTHON" bench/llama_torch.py --threads "$threads" --steps "$steps" --layers "$layers" \
               --batch "$batch" --seq "$seq" --tokens data/tinyshakespeare.txt 2>/dev/null | grep 'torch tokens/s' || true)
        pt=$(echo "$line" | awk '{ print $3 }')
    fi
    if [ -n "$pt" ]; then
        ratio=$(awk -v a="$zt" -v b="$pt" 'BEGIN { printf "%.2f", a / b }')
        pts="$pts $pt" ratios="$ratios $ratio"
        echo "round $r: ztrain $zt tokens/s, torch $pt tokens/s, ratio $ratio"
    else
        echo "round $r: ztrain $zt tokens/s; ${line:-torch: no result}"
    fi
done
best() { sort -g | tail -1; }
zbest=$(echo $zts | tr ' ' '\n' | best)
echo "ztrain tokens/s: $(echo $zts | tr ' ' '\n' | median) median, $zbest best of $rounds rounds" \
     "($(grep -m1 -o '[0-9]* parameters' "$tmp/ztrain.out" || true))"
if [ -n "$pts" ]; then
    pbest=$(echo $pts | tr ' ' '\n' | best)
    echo "torch tokens/s: $(echo $pts | tr ' ' '\n' | median) median, $pbest best of $rounds rounds" \
         "($(echo "$line" | sed 's/^[^(]*(//; s/)$//'))"
    echo "ratio ztrain / torch: $(echo $ratios | tr ' ' '\n' | median) (median of the per-round ratios:$ratios);" \
         "best vs best: $(awk -v a="$zbest" -v b="$pbest" 'BEGIN { printf "%.2f", a / b }')"
fi
