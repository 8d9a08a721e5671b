#!/bin/bash
# gpu.sh -- GPU timings (in-tree build configured --with-cuda, or BUILDDIR=...):
#   1. bench/bench_gpu: each CUDA kernel on GPT-2 124M shapes, then a GPT-2
#      training step through the backend table (tests/table_gpt.h) in fp32 and
#      with bf16 matmuls: ms/step, tokens/s, MFU, peak GPU memory;
#   2. bench/gpt2_torch.py: the same model and step in PyTorch (fp32 with TF32
#      off, and bf16 autocast), when python3 can import torch.
#   bench/gpu.sh [STEPS] [extra bench_gpu flags, e.g. --shape 12,12,768,50304,4,1024]
# In the GPU bundle (scripts/gpu-bundle.sh) the same runs are `./run.sh bench`.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILDDIR:-$SRC}
steps=${1:-10}; shift || true
if [ -z "${ZT_BENCH_GPU:-}" ]; then
    make -s -C "$BUILD" bench/bench_gpu || exit 1
    ZT_BENCH_GPU="$BUILD/bench/bench_gpu"
fi
shape=12,12,768,50304,8,1024
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --shape ] && { j=$((i + 1)); shape=${!j}; }; done
echo "== ztrain CUDA backend (bench_gpu)"
"$ZT_BENCH_GPU" --steps "$steps" --shape "$shape" "$@"
rc=$?
echo "== PyTorch (bench/gpt2_torch.py)"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    python3 "$SRC/bench/gpt2_torch.py" --steps "$steps" --shape "$shape" || rc=1
else
    echo "skipped: python3 cannot import torch with CUDA"
fi
exit $rc
