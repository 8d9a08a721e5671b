#!/bin/bash
# llama_cpu.sh -- CPU training throughput of a Llama-shaped model (SmolLM-135M's
# shape: hidden 576, 9 heads, 3 KV heads, SwiGLU 1536, vocab 49152, tied; fewer
# layers, short sequences): `ztrain train` and, when torch + transformers import,
# PyTorch eager fp32 (bench/llama_torch.py) on the same shape, batch and thread
# count, in the same run.  Prints tokens/s of both and the ratio.
#
#   bench/llama_cpu.sh [STEPS] [THREADS] [LAYERS] [BATCH] [SEQ]     (defaults 8 2 4 4 128)
#
# ZTRAIN=path/to/ztrain runs another build; ZT_BENCH_PYTHON picks the Python
# (default: /opt/hfref/bin/python if present, else python3).  One rank; the
# thread count is given to both (OMP_NUM_THREADS, --threads, torch.set_num_threads).
# Tokens are the bytes of data/tinyshakespeare.txt (ids < 256 of the 49152).
# Both report the median step after the first (warm-up) step.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8} threads=${2:-2} layers=${3:-4} batch=${4:-4} seq=${5:-128}
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
     "vocab 49152, tied; batch $batch x $seq tokens; $threads threads; $steps steps + 1 warm-up"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 >/dev/null
# ztrain's exit status is not the benchmark's business once the steps ran
# (the end of `ztrain train` saves weights); the metrics file is.
"$ZTRAIN" train --arch llama --n-layer "$layers" --n-head 9 --n-kv-head 3 --n-embd 576 \
    --intermediate-size 1536 --vocab 49152 --tie-embeddings true --context "$seq" --seq-len "$seq" \
    --train_micro_batch_size_per_gpu "$batch" --gradient_accumulation_steps 1 \
    --steps $((steps + 1)) --threads "$threads" --train "$tmp/tok_train.bin" --val "" \
    --ckpt-dir "$tmp/ck" --sample-tokens 0 --metrics "$tmp/m.jsonl" \
    > "$tmp/ztrain.out" 2>&1 || true
zt=$(awk -F'"tokens_per_s": ' 'NR > 1 && NF > 1 { split($2, a, ","); print a[1] }' "$tmp/m.jsonl" 2>/dev/null |
     sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }' || true)
if [ -z "$zt" ]; then
    echo "ztrain produced no step metrics:" >&2
    tail -5 "$tmp/ztrain.out" >&2
    exit 1
fi
echo "ztrain tokens/s: $zt (median of $steps steps after 1 warm-up; $(grep -m1 -o '[0-9]* parameters' "$tmp/ztrain.out" || true))"

if ! "$ZT_BENCH_PYTHON" -c 'import torch, transformers' 2>/dev/null; then
    echo "torch: SKIP (torch + transformers not importable by $ZT_BENCH_PYTHON)"
    exit 0
fi
line=$("$ZT_BENCH_PYTHON" bench/llama_torch.py --threads "$threads" --steps "$steps" --layers "$layers" \
       --batch "$batch" --seq "$seq" --tokens data/tinyshakespeare.txt 2>/dev/null | grep 'torch tokens/s')
echo "$line"
pt=$(echo "$line" | awk '{ print $3 }')
awk -v a="$zt" -v b="$pt" 'BEGIN { printf "ratio ztrain / torch: %.2f\n", a / b }'
