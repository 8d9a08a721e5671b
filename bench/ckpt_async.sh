#!/bin/bash
# ckpt_async.sh -- training time lost per checkpoint save, synchronous vs
# asynchronous (ztrain.checkpoint.async), on the GPT-2 124M shape (12
# layers, 12 heads, 768 wide, vocab 50257, context 1024; trained on
# sequences of SEQ tokens, micro batch 1, so that a step is short on a CPU).
# Three modes run round-robin, ROUNDS times: no periodic save, a synchronous
# save every EVERY steps, a background save every EVERY steps (the final
# save is synchronous in all three).  Each output line is stamped as it
# arrives; the training span runs from the "step 1/" line to the final
# save's "saving step N (end of training)" line, so it holds the periodic
# saves (and, async, every wait for the writer -- the last one included --
# and the background thread's competition for CPU and memory) but neither
# start-up nor the final save.  Lost per save = (span - span of the
# run without saves) / saves, median over rounds; the async runs also report
# the main thread's own count ("training stopped for X s") and the
# background thread's CPU time per save (checksums, tensor data).
#   bench/ckpt_async.sh [STEPS] [EVERY] [ROUNDS] [SEQ] [NP]   (build first: make)
# Environment: ZTRAIN (the binary), BENCH_ARGS (more ztrain flags, e.g.
# "--backend cuda"), CKPT_BENCH_LOGS (a directory to keep the runs' output in).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-7}
every=${2:-3}
rounds=${3:-2}
seq=${4:-16}
np=${5:-1}
ZTRAIN=${ZTRAIN:-./ztrain}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d "${CKPT_BENCH_DIR:-${TMPDIR:-/tmp}}/ckpt_async.XXXXXX"); trap 'rm -rf "$T"' EXIT
[ -s data/tinyshakespeare_train.bin ] || "$ZTRAIN" prep --input data/tinyshakespeare.txt --output data/tinyshakespeare > /dev/null
stamp() { python3 -u -c 'import sys, time
for l in sys.stdin: sys.stdout.write("%.4f %s" % (time.monotonic(), l)); sys.stdout.flush()'; }
for r in $(seq 1 "$rounds"); do
    for mode in none sync async; do
        ev=$every; as=false
        [ $mode = none ] && ev=0
        [ $mode = async ] && as=true
        rm -rf "$T/ck"
        mpirun --oversubscribe -np "$np" --bind-to none "$ZTRAIN" train --n-layer 12 --n-head 12 --n-embd 768 \
            --vocab 50257 --context 1024 --seq-len "$seq" --batch-size "$np" --micro-batch 1 --grad-accum 1 \
            --train data/tinyshakespeare_train.bin --val "" --eval-every 0 --sample-tokens 0 --log-every 1 \
            --steps "$steps" --ckpt-every "$ev" --ckpt-async "$as" --ckpt-dir "$T/ck" --resume never \
            --save "$T/w.bin" ${BENCH_ARGS:-} 2>&1 | stamp > "$T/o_${mode}_$r.txt"
        [ -z "${CKPT_BENCH_LOGS:-}" ] || cp "$T/o_${mode}_$r.txt" "$CKPT_BENCH_LOGS/"
        grep -q "saved step $steps" "$T/o_${mode}_$r.txt" || { cat "$T/o_${mode}_$r.txt"; exit 1; }
    done
done
python3 - "$T" "$steps" "$every" "$rounds" "$seq" "$np" <<'PY'
import re, statistics, sys
d, steps, every, rounds, seq, np = sys.argv[1], *map(int, sys.argv[2:])
nsaves = (steps - 1) // every
def run(mode, r):
    t0 = t1 = None; stall = 0.0; save = []; cpu = []
    for l in open("%s/o_%s_%d.txt" % (d, mode, r)):
        ts, _, rest = l.partition(" ")
        if rest.startswith("step ") and re.match(r"step +1/", rest): t0 = float(ts)
        if "saving step %d (end of training)" % steps in rest: t1 = float(ts)
        m = re.search(r"saved step (\d+) .* in ([0-9.]+) s", rest)
        if m and int(m.group(1)) < steps: save.append(float(m.group(2)))
        m = re.search(r"training stopped for ([0-9.]+) s", rest)
        if m: stall += float(m.group(1))
        m = re.search(r"background thread used ([0-9.]+) s of CPU: checksums ([0-9.]+) s, tensor data ([0-9.]+) s", rest)
        if m: cpu.append(tuple(map(float, m.groups())))
    return t1 - t0, save, stall, cpu
span = {m: [run(m, r) for r in range(1, rounds + 1)] for m in ("none", "sync", "async")}
print("GPT-2 124M shape, %d rank(s), seq %d, micro batch 1, %d steps, a save every %d steps (%d saves), %d rounds"
      % (np, seq, steps, every, nsaves, rounds))
for r in range(rounds):
    print("  round %d: span none %.2f s, sync %.2f s, async %.2f s" % (r + 1, span["none"][r][0],
          span["sync"][r][0], span["async"][r][0]))
lost = {m: statistics.median([(span[m][r][0] - span["none"][r][0]) / nsaves for r in range(rounds)])
        for m in ("sync", "async")}
ssave = statistics.median([x for r in range(rounds) for x in span["sync"][r][1]])
astall = statistics.median([span["async"][r][2] / nsaves for r in range(rounds)])
print("synchronous save (its own log): %.2f s median" % ssave)
cpu = [c for r in range(rounds) for c in span["async"][r][3]]
if cpu:
    print("async background thread (rank 0), CPU per save: %.2f s median (checksums %.2f s, tensor data %.2f s)"
          % tuple(statistics.median([c[k] for c in cpu]) for k in range(3)))
print("lost per save: sync %.2f s, async %.2f s = %.0f%% of sync (async main thread's own count: %.2f s per save = %.0f%%)"
      % (lost["sync"], lost["async"], 100 * lost["async"] / lost["sync"], astall, 100 * astall / lost["sync"]))
PY
