#!/bin/bash
# run.sh -- training throughput benchmarks (build first: make bench).
#   bench/run.sh [STEPS]
# 1 rank with all cores, then 2 ranks splitting them (stage 0 data parallel).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s bench/bench_train
steps=${1:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== 1 rank"
./bench/bench_train --steps "$steps" --shape gpt2-124m --shape default
echo "== 2 ranks (mpirun -np 2)"
mpirun --oversubscribe -np 2 --bind-to none ./bench/bench_train --steps "$steps" --shape gpt2-124m --shape default
