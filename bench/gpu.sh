#!/bin/bash
# gpu.sh -- GPU timings (in-tree build configured --with-cuda, or BUILDDIR=...):
#   1. bench/bench_gpu: each CUDA kernel on GPT-2 124M shapes, then a GPT-2
#      training step through the backend table (tests/table_gpt.h) in fp32 and
#      with bf16 matmuls: ms/step, tokens/s, MFU, peak GPU memory;
#   2. ztrain train --backend cuda on the same shape, bf16, 1 rank, ZeRO
#      stages $ZT_BENCH_STAGES (default "0 3"): the whole engine;
#   3. bench/gpt2_torch.py: the same model and step in PyTorch (fp32 with TF32
#      off, and bf16 autocast), when python3 can import torch;
#   then one table of all of them (bench/gpu_table.py).
#   bench/gpu.sh [STEPS] [extra bench_gpu flags, e.g. --shape 12,12,768,50304,4,1024]
# In the GPU bundle (scripts/gpu-bundle.sh) the same runs are `./run.sh bench`.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILDDIR:-$SRC}
steps=${1:-10}; shift || true
if [ -z "${ZT_BENCH_GPU:-}" ]; then
    make -s -C "$BUILD" bench/bench_gpu ztrain || exit 1
    ZT_BENCH_GPU="$BUILD/bench/bench_gpu"
fi
shape=12,12,768,50304,8,1024
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --shape ] && { j=$((i + 1)); shape=${!j}; }; done
IFS=, read -r L H C V B T <<< "$shape"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
echo "== ztrain CUDA backend (bench_gpu)"
"$ZT_BENCH_GPU" --steps "$steps" --shape "$shape" "$@" | tee "$W/bench_gpu.txt"
rc=${PIPESTATUS[0]}
zt=()
head -c 200000 "$SRC/data/tinyshakespeare.txt" > "$W/corpus.txt"
(cd "$W" && "$BUILD/ztrain" prep --input corpus.txt --output c > /dev/null) || rc=1
for s in ${ZT_BENCH_STAGES:-0 3}; do
    echo "== ztrain train --backend cuda, bf16, stage $s, 1 rank, $((steps + 2)) steps (byte tokens, vocab $V)"
    "$BUILD/ztrain" train --config "$SRC/configs/tiny.json" --train "$W/c_train.bin" --val= \
        --n-layer "$L" --n-head "$H" --n-embd "$C" --vocab "$V" --context "$T" --micro-batch "$B" \
        --batch-size "$B" --precision bf16 --stage "$s" --backend cuda --steps $((steps + 2)) --log-every 1 \
        --resume never --sample-tokens 0 --ckpt-dir "$W/ck" --save "$W/ck/model.bin" \
        --metrics "$W/zt_s$s.jsonl" 2>&1 | grep -vE '^  [a-z_0-9.]+ += ' | tee "$W/zt_s$s.out"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    rm -rf "$W/ck"
    zt+=(--ztrain "(engine, stage $s, 1 rank):$W/zt_s$s.jsonl:$W/zt_s$s.out")
done
echo "== PyTorch (bench/gpt2_torch.py)"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    python3 "$SRC/bench/gpt2_torch.py" --steps "$steps" --shape "$shape" | tee "$W/torch.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
else
    echo "skipped: python3 cannot import torch with CUDA"
fi
echo "== GPT-2 step, one table (ztrain: median of steps 3..$((steps + 2)))"
python3 "$SRC/bench/gpu_table.py" --bench-gpu "$W/bench_gpu.txt" --torch "$W/torch.txt" "${zt[@]}"
exit $rc
