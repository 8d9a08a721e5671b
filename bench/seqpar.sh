#!/bin/bash
# seqpar.sh -- sequence parallelism (docs/long-context.md) at N = 2 against
# N = 1 on the CPU, the same global batch and sequence: the median step time,
# the activations' accounted peak per rank (the memory report's
# "activations" row) and the all-to-all bytes one rank sends per step (the
# metrics' alltoall_bytes, with the formula's value beside it).
#
#   bench/seqpar.sh [STEPS] [THREADS] [LAYERS] [SEQ] [ROUNDS]   (defaults 3 1 2 512 2)
#
# Shape: a small Llama (hidden 256, 8 heads / 4 KV heads, head dim 32, SwiGLU
# 704, vocab 256, tied), fp32, ZeRO stage 0, micro-batch 1.  N = 1 runs on
# 1 rank, N = 2 on 2 ranks (mpirun --oversubscribe): both train one sample of
# SEQ tokens per step.  Step time: the median step after the first; the two
# modes run round-robin ROUNDS times.  On a shared machine with fewer cores
# than ranks x threads the N = 2 step time is an upper bound.  ZTRAIN=...
# runs another build; MPIRUN=... another launcher.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} threads=${2:-1} layers=${3:-2} seq=${4:-512} rounds=${5:-2}
ZTRAIN=${ZTRAIN:-./ztrain}
MPIRUN=${MPIRUN:-mpirun}
[ -x "$ZTRAIN" ] || { echo "seqpar.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "seqpar.sh: needs python3" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "shape: llama, $layers layers, hidden 256, 8 heads / 4 KV heads, intermediate 704, vocab 256;" \
     "fp32, 1 sample x $seq tokens per step, stage 0, $threads threads per rank; $steps steps + 1" \
     "warm-up; $rounds rounds"
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 > /dev/null
# run N ROUND: writes $tmp/spN_ROUND.{jsonl,out}
run() {
    local n=$1 r=$2
    rm -rf "$tmp/ck"
    "$MPIRUN" --oversubscribe -np "$n" --bind-to none "$ZTRAIN" train --arch llama \
        --n-layer "$layers" --n-head 8 --n-kv-head 4 --n-embd 256 --intermediate-size 704 \
        --vocab 256 --tie-embeddings true --context "$seq" --seq-len "$seq" --sp "$n" \
        --train_micro_batch_size_per_gpu 1 --gradient_accumulation_steps 1 \
        --steps $((steps + 1)) --threads "$threads" --train "$tmp/tok_train.bin" --val "" \
        --ckpt-dir "$tmp/ck" --ckpt-every 0 --sample-tokens 0 --memory-report end \
        --metrics "$tmp/sp${n}_$r.jsonl" > "$tmp/sp${n}_$r.out" 2>&1
}
for r in $(seq 1 "$rounds"); do run 1 "$r"; run 2 "$r"; done
python3 - "$tmp" "$rounds" "$seq" "$layers" <<'PY'
import json, re, statistics, sys
tmp, rounds, S, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def step_ms(p):
    ms = [json.loads(l)["step_ms"] for l in open(p) if '"loss"' in l][1:]
    return statistics.median(ms)
def acts(p):
    for l in open(p):
        m = re.match(r"\s+activations\s+\S+ \S+\s+(\S+) (\S+)", l)
        if m: return m.group(1) + " " + m.group(2)
    return "?"
def a2a(p):
    return [json.loads(l).get("alltoall_bytes", 0) for l in open(p) if '"loss"' in l][-1]
t1 = [step_ms("%s/sp1_%d.jsonl" % (tmp, r)) for r in range(1, rounds + 1)]
t2 = [step_ms("%s/sp2_%d.jsonl" % (tmp, r)) for r in range(1, rounds + 1)]
ratio = statistics.median([b / a for a, b in zip(t1, t2)])
QKV, AD = (8 + 2 * 4) * 32, 8 * 32
want = (2 * L) * 1 * (S // 2 * QKV // 2 + S // 2 * AD // 2) * 4
print("%-6s %12s %14s %22s" % ("N", "step (ms)", "activations", "all-to-all B/step/rank"))
print("%-6s %12.1f %14s %22d" % ("1", statistics.median(t1), acts("%s/sp1_1.out" % tmp), 0))
print("%-6s %12.1f %14s %22d" % ("2", statistics.median(t2), acts("%s/sp2_1.out" % tmp), a2a("%s/sp2_1.jsonl" % tmp)))
print("step time N=2 / N=1: %.2fx (median of %d rounds); all-to-all formula: %d bytes" % (ratio, rounds, want))
PY
