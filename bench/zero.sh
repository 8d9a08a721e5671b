#!/bin/bash
# zero.sh -- ZeRO stages 0-3 at the same global batch: training tokens/s with
# the ratio to stage 0 measured in the same run, and parameter + gradient
# bytes sent per step per rank against theory (stages 0-2: 2 Psi (N-1)/N
# fp32 elements, stage 3: 3 Psi (N-1)/N).
#   bench/zero.sh [STEPS]        (build first: make)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
[ -s data/tinyshakespeare_train.bin ] || ./ztrain prep --input data/tinyshakespeare.txt --output data/tinyshakespeare > /dev/null
for n in 2 4; do
    for s in 0 1 2 3; do
        mpirun --oversubscribe -np "$n" --bind-to none ./ztrain train --config configs/default.json \
            --stage "$s" --batch-size 32 --micro-batch $((32 / n)) --steps "$steps" --eval-every 0 \
            --val "" --sample-tokens 0 --log-every 1000 --save "$T/w.bin" --metrics "$T/m_${n}_$s.jsonl" \
            > "$T/o_${n}_$s.txt" 2>&1 || { cat "$T/o_${n}_$s.txt"; exit 1; }
    done
done
python3 - "$T" "$steps" <<'PY'
import json, re, sys
d, steps = sys.argv[1], int(sys.argv[2])
P = None
for n in (2, 4):
    base = None
    print("N = %d ranks, global batch 32, default model" % n)
    for s in range(4):
        rec = [json.loads(l) for l in open("%s/m_%d_%d.jsonl" % (d, n, s)) if '"loss"' in l]
        out = open("%s/o_%d_%d.txt" % (d, n, s)).read()
        P = int(re.search(r"model: (\d+) parameters", out).group(1))
        tail = rec[len(rec) // 3:]             # skip warm-up steps
        tps = sum(r["tokens_per_s"] for r in tail) / len(tail)
        sent = sum(r["comm_bytes"] for r in tail) / len(tail)
        theory = (3 if s == 3 else 2) * P * 4 * (n - 1) / n
        base = base or tps
        print("  stage %d: %9.0f tokens/s  ratio to stage 0 %.2f | %10.0f bytes/step/rank, theory %10.0f (%+.2f%%)"
              % (s, tps, tps / base, sent, theory, 100 * (sent - theory) / theory))
PY
