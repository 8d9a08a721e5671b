#!/bin/bash
# cpu_compare.sh -- ztrain against llm.c's CPU trainer and PyTorch eager, in one run, on the same shape
# and threads: GPT-2 124M (12 layers, 12 heads, 768 wide, vocab 50257), B=4, T=64, fp32.
#   bench/cpu_compare.sh [STEPS] [ROUNDS] [THREADS...]      (default 5 steps, 2 rounds, threads "1 NPROC")
# For each thread count, each round runs, back to back:
#   llm.c    bench/llmc/train_gpt2.c (unmodified source, MIT: bench/llmc/LICENSE), built here in
#            $ZT_BENCH_WORK (never part of ztrain) with gcc -Ofast -march=native -fopenmp, STEPS steps
#            patched in, one validation batch, no sampling; a random GPT-2 124M checkpoint and random
#            tokens (numpy); OMP_NUM_THREADS=N; median of the step times after the first step.
#   PyTorch  bench/torch_gpt2_cpu.py with $TORCH_PYTHON (default python3): transformers GPT2LMHeadModel,
#            eager fp32, torch.set_num_threads(N); SKIPPED, saying so, when torch or transformers is
#            not importable.
#   ztrain   bench/bench_train --threads N --breakdown (tokens/s, the sgemm ratio on the model's
#            own GEMM shapes measured in the same run, the per-phase breakdown).
# then ztrain with NPROC ranks x 1 thread (stage 0 data parallelism; tokens/s and sgemm ratio per rank).
# It prints ztrain / PyTorch and ztrain / llm.c for every round and the median over rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
steps=${1:-5}; rounds=${2:-2}; shift $(( $# < 2 ? $# : 2 ))
NP=$(nproc)
threads=("$@"); [ ${#threads[@]} -gt 0 ] || threads=(1 "$NP")
PY=${TORCH_PYTHON:-python3}
W=${ZT_BENCH_WORK:-${TMPDIR:-/tmp}/ztrain-cpu-compare}
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make -s bench/bench_train

# ---- llm.c, built outside the tree (its inputs made with numpy: the first of $NUMPY_PYTHON,
# python3, /usr/bin/python3, $TORCH_PYTHON that imports it)
NPY=
for p in ${NUMPY_PYTHON:-} python3 /usr/bin/python3 "$PY"; do
    if "$p" -c 'import numpy' 2>/dev/null; then NPY=$p; break; fi
done
have_llmc=1
if [ ! -x "$W/llmc/train_gpt2" ] || \
   [ "$(cat "$W/llmc/.steps" 2>/dev/null)" != "$steps" ]; then
    rm -rf "$W/llmc"; mkdir -p "$W/llmc"
    cp -r "$SRC/bench/llmc/." "$W/llmc/"
    if [ -z "$NPY" ] || ! (cd "$W/llmc" && "$NPY" - "$steps" <<'PY'
import os, sys
import numpy as np
steps = int(sys.argv[1])
s = open('train_gpt2.c').read()
for a, b in [('step <= 40', 'step <= %d' % steps), ('int val_num_batches = 5;', 'int val_num_batches = 1;'),
             ('if (step > 0 && step % 20 == 0)', 'if (0)')]:
    assert a in s, a
    s = s.replace(a, b)
open('train_gpt2.c', 'w').write(s)
rng = np.random.default_rng(0)
L, NH, C, V, Vp, maxT = 12, 12, 768, 50257, 50304, 1024
hdr = np.zeros(256, np.int32); hdr[:8] = [20240326, 3, maxT, V, L, NH, C, Vp]
shapes = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C), (L, C), (L, C),
          (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
with open('gpt2_124M.bin', 'wb') as f:
    f.write(hdr.tobytes())
    for sh in shapes: f.write((rng.standard_normal(sh) * 0.02).astype(np.float32).tobytes())
os.makedirs('dev/data/tinyshakespeare', exist_ok=True)
for n, k in [('train', 400000), ('val', 40000)]:
    h = np.zeros(256, np.int32); h[:3] = [20240520, 1, k]
    with open(f'dev/data/tinyshakespeare/tiny_shakespeare_{n}.bin', 'wb') as f:
        f.write(h.tobytes()); f.write(rng.integers(0, V, k).astype(np.uint16).tobytes())
th = np.zeros(256, np.int32); th[:3] = [20240328, 2, V]; th[3] = 50256
with open('gpt2_tokenizer.bin', 'wb') as f:
    f.write(th.tobytes())
    for i in range(V): f.write(bytes([1]) + bytes([65 + i % 26]))
PY
    ) || ! (cd "$W/llmc" && gcc -Ofast -march=native -fopenmp -DOMP train_gpt2.c -lm -lgomp -o train_gpt2 \
            > build.log 2>&1); then
        echo "SKIP llm.c: could not prepare or build it (needs numpy and gcc; see $W/llmc)"; have_llmc=0
    else
        echo "$steps" > "$W/llmc/.steps"
    fi
fi
llmc_tps() {   # threads -> tokens/s (median step after the first), or empty
    (cd "$W/llmc" && OMP_NUM_THREADS=$1 ./train_gpt2 > "$W/llmc.log" 2>&1) || { tail -3 "$W/llmc.log"; return 0; }
    grep -o 'took [0-9.]* ms' "$W/llmc.log" | awk 'NR>1{print $2}' | sort -n |
        awk '{a[NR]=$1} END{if (NR) printf "%.1f\n", 256000/a[int((NR+1)/2)]}'
}

# ---- PyTorch
have_torch=1
if ! "$PY" -c 'import torch, transformers' 2>/dev/null; then
    echo "SKIP PyTorch: '$PY' cannot import torch and transformers (set TORCH_PYTHON to a venv's python)"
    have_torch=0
fi
torch_tps() {
    "$PY" "$SRC/bench/torch_gpt2_cpu.py" "$1" "$steps" > "$W/torch.log" 2>&1 || { tail -3 "$W/torch.log"; return 0; }
    cat "$W/torch.log" >&2
    grep -o '=> [0-9.]* tok/s' "$W/torch.log" | awk '{print $2}'
}

zt_run() {   # threads [mpirun np] -> the bench_train output
    if [ "${2:-1}" -gt 1 ]; then
        mpirun --oversubscribe -np "$2" --bind-to none ./bench/bench_train --steps "$steps" --threads "$1" \
            --shape gpt2-124m --breakdown
    else
        ./bench/bench_train --steps "$steps" --threads "$1" --shape gpt2-124m --breakdown
    fi
}
zt_field() { grep -o "[0-9.]* $1" | head -1 | awk '{print $1}'; }
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; else echo "-"; fi; }
median() { tr ' ' '\n' | grep -v '^-*$' | sort -n | awk '{a[NR]=$1} END{if (NR) print a[int((NR+1)/2)]; else print "-"}'; }

echo "== $(date -u '+%F %H:%M UTC'); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
summary=()
for th in "${threads[@]}"; do
    rt=""; rl=""; rs=""
    for r in $(seq 1 "$rounds"); do
        echo "== $th thread(s), round $r (load $(cut -d' ' -f1 /proc/loadavg))"
        l=""; t=""
        [ $have_llmc = 1 ] && l=$(llmc_tps "$th")
        echo "llm.c train_gpt2   : ${l:-?} tokens/s"
        [ $have_torch = 1 ] && t=$(torch_tps "$th")
        echo "PyTorch eager      : ${t:-skipped} tokens/s"
        out=$(zt_run "$th"); echo "$out"
        z=$(echo "$out" | zt_field "tokens/s")
        s=$(echo "$out" | grep -o 'ratio [0-9.]*' | head -1 | awk '{print $2}')
        echo "ztrain             : $z tokens/s | / PyTorch $(ratio "$z" "$t") | / llm.c $(ratio "$z" "$l") | / sgemm $s"
        rt="$rt $(ratio "$z" "$t")"; rl="$rl $(ratio "$z" "$l")"; rs="$rs $s"
    done
    summary+=("$th thread(s): ztrain / PyTorch median $(echo $rt | median) ($rt ), ztrain / llm.c median $(echo $rl | median) ($rl ), ztrain / sgemm median $(echo $rs | median) ($rs )")
done
if [ "$NP" -gt 1 ]; then
    rs=""
    for r in $(seq 1 "$rounds"); do
        echo "== $NP ranks x 1 thread, round $r (load $(cut -d' ' -f1 /proc/loadavg))"
        out=$(zt_run 1 "$NP"); echo "$out"
        rs="$rs $(echo "$out" | grep -o 'ratio [0-9.]*' | head -1 | awk '{print $2}')"
    done
    summary+=("$NP ranks x 1 thread: ztrain / sgemm per rank median $(echo $rs | median) ($rs )")
fi
echo "== summary (load now: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "${summary[@]}"
