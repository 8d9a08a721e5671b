#!/bin/bash
# moe.sh -- expert parallelism (docs/moe.md) at EP 2 against EP 1 on the CPU,
# both on 2 ranks with the same global batch: the median step time, the
# activations' accounted peak per rank (the memory report's "activations"
# row) and the all-to-all bytes one rank sends per step (the metrics'
# alltoall_bytes: routing-dependent, shown with the balanced routing's
# expectation); then EP 2 with every token forced on rank 0's experts
# (ZT_TEST_MOE_ROUTE_ALL=0), whose bytes equal the formula exactly.
#
#   bench/moe.sh [STEPS] [THREADS] [LAYERS] [SEQ] [ROUNDS]   (defaults 3 1 2 128 2)
#
# Shape: a small Mixtral-like llama (hidden 256, 8 heads / 4 KV heads, 8
# experts of width 512, top-2, vocab 256, tied), fp32, ZeRO stage 0,
# micro-batch 2 per rank.  Step time: the median step after the first; the
# modes run round-robin ROUNDS times.  On a shared machine with fewer cores
# than ranks x threads the times are upper bounds.  ZTRAIN=... runs another
# build; MPIRUN=... another launcher.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} threads=${2:-1} layers=${3:-2} seq=${4:-128} rounds=${5:-2}
ZTRAIN=${ZTRAIN:-./ztrain}
MPIRUN=${MPIRUN:-mpirun}
[ -x "$ZTRAIN" ] || { echo "moe.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "moe.sh: needs python3" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "shape: llama MoE, $layers layers, hidden 256, 8 heads / 4 KV heads, 8 experts of width 512, top-2," \
     "vocab 256; fp32, 2 ranks x 2 samples x $seq tokens per step, stage 0, $threads threads per rank;" \
     "$steps steps + 1 warm-up; $rounds rounds"
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 > /dev/null
# run TAG EP: writes $tmp/TAG.{jsonl,out}
run() {
    local tag=$1 ep=$2
    rm -rf "$tmp/ck"
    "$MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train --arch llama \
        --n-layer "$layers" --n-head 8 --n-kv-head 4 --n-embd 256 --vocab 256 --tie-embeddings true \
        --ztrain.model.n_experts 8 --ztrain.model.experts_per_token 2 \
        --ztrain.model.moe_intermediate_size 512 --context "$seq" --seq-len "$seq" --ep "$ep" \
        --train_micro_batch_size_per_gpu 2 --gradient_accumulation_steps 1 \
        --steps $((steps + 1)) --threads "$threads" --train "$tmp/tok_train.bin" --val "" \
        --ckpt-dir "$tmp/ck" --ckpt-every 0 --sample-tokens 0 --memory-report end \
        --metrics "$tmp/$tag.jsonl" > "$tmp/$tag.out" 2>&1
}
for r in $(seq 1 "$rounds"); do run "ep1_$r" 1; run "ep2_$r" 2; done
ZT_TEST_MOE_ROUTE_ALL=0 run forced 2
python3 - "$tmp" "$rounds" "$seq" "$layers" <<'PY'
import json, re, statistics, sys
tmp, rounds, S, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def recs(p): return [json.loads(l) for l in open(p) if '"loss"' in l]
def step_ms(p): return statistics.median([r["step_ms"] for r in recs(p)][1:])
def acts(p):
    for l in open(p):
        m = re.match(r"\s+activations\s+\S+ \S+\s+(\S+) (\S+)", l)
        if m: return m.group(1) + " " + m.group(2)
    return "?"
def a2a(p): return recs(p)[-1].get("alltoall_bytes", 0)
t1 = [step_ms("%s/ep1_%d.jsonl" % (tmp, r)) for r in range(1, rounds + 1)]
t2 = [step_ms("%s/ep2_%d.jsonl" % (tmp, r)) for r in range(1, rounds + 1)]
ratio = statistics.median([b / a for a, b in zip(t1, t2)])
P, N, K, C = 2, 2 * S, 2, 256
balanced = L * 4 * (P - 1) * N * K // P * C * 4      # 2 exchanges each way, half the rows away
forced = L * 2 * N * K * C * 4                       # rank 0 returns rank 1's rows, both passes
print("%-10s %12s %14s %22s" % ("EP", "step (ms)", "activations", "all-to-all B/step/rank"))
print("%-10s %12.1f %14s %22d" % ("1", statistics.median(t1), acts("%s/ep1_1.out" % tmp), 0))
print("%-10s %12.1f %14s %22d" % ("2", statistics.median(t2), acts("%s/ep2_1.out" % tmp), a2a("%s/ep2_1.jsonl" % tmp)))
got = a2a("%s/forced.jsonl" % tmp)
print("%-10s %12.1f %14s %22d" % ("2 forced", step_ms("%s/forced.jsonl" % tmp), acts("%s/forced.out" % tmp), got))
print("step time EP 2 / EP 1: %.2fx (median of %d rounds); all-to-all at a balanced routing: %d bytes;"
      " forced imbalance: formula %d bytes, %s" % (ratio, rounds, balanced, forced,
                                                  "equal" if got == forced else "DIFFERS"))
PY
