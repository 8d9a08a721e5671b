#!/bin/bash
# zero.sh -- ZeRO stages 0-3 at the same global batch: training tokens/s with
# the ratio to stage 0 measured in the same run, and parameter + gradient
# bytes sent per step per rank against theory (stages 0-2: 2 Psi (N-1)/N
# fp32 elements, stage 3: 3 Psi (N-1)/N).
# The stages run round-robin, ROUNDS times; a stage's ratio to stage 0 is
# taken within each round and the median over rounds is reported, so a
# machine whose load changes during the run biases no stage.
#   bench/zero.sh [STEPS] [ROUNDS]        (build first: make)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
rounds=${2:-3}
ZTRAIN=${ZTRAIN:-./ztrain}   # the binary (default: an in-tree build)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
[ -s data/tinyshakespeare_train.bin ] || "$ZTRAIN" prep --input data/tinyshakespeare.txt --output data/tinyshakespeare > /dev/null
for n in 2 4; do
    for r in $(seq 1 "$rounds"); do
        for s in 0 1 2 3; do
            mpirun --oversubscribe -np "$n" --bind-to none "$ZTRAIN" train --config configs/default.json \
                --stage "$s" --batch-size 32 --micro-batch $((32 / n)) --steps "$steps" --warmup 5 --eval-every 0 \
                --val "" --sample-tokens 0 --log-every 1000 --save "$T/w.bin" --ckpt-dir "$T/ck_${n}_${s}_$r" \
                --metrics "$T/m_${n}_${s}_$r.jsonl" > "$T/o_${n}_${s}_$r.txt" 2>&1 ||
                { cat "$T/o_${n}_${s}_$r.txt"; exit 1; }
        done
    done
done
python3 - "$T" "$steps" "$rounds" <<'PY'
import json, re, statistics, sys
d, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in (2, 4):
    print("N = %d ranks, global batch 32, default model, %d steps x %d rounds" % (n, steps, rounds))
    tps, sent = {}, {}
    for s in range(4):
        tps[s], sent[s] = [], []
        for r in range(1, rounds + 1):
            rec = [json.loads(l) for l in open("%s/m_%d_%d_%d.jsonl" % (d, n, s, r)) if '"loss"' in l]
            out = open("%s/o_%d_%d_%d.txt" % (d, n, s, r)).read()
            P = int(re.search(r"model: (\d+) parameters", out).group(1))
            tail = rec[len(rec) // 3:]             # skip warm-up steps
            tps[s].append(sum(x["tokens_per_s"] for x in tail) / len(tail))
            sent[s].append(sum(x["comm_bytes"] for x in tail) / len(tail))
    for s in range(4):
        # ratio to stage 0 within each round (same machine state), median over rounds
        ratio = statistics.median(a / b for a, b in zip(tps[s], tps[0]))
        b = statistics.median(sent[s])
        theory = (3 if s == 3 else 2) * P * 4 * (n - 1) / n
        print("  stage %d: %9.0f tokens/s (rounds: %s)  ratio to stage 0 %.2f | %10.0f bytes/step/rank, "
              "theory %10.0f (%+.2f%%)" % (s, statistics.median(tps[s]), " ".join("%.0f" % x for x in tps[s]),
                                           ratio, b, theory, 100 * (b - theory) / theory))
PY
