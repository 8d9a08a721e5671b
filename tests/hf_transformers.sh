#!/bin/bash
# hf_transformers.sh -- the Hugging Face round trip against transformers itself
# (optional: needs a Python that imports torch + transformers; SKIPs visibly
# otherwise).  For each fixture of tests/fixtures/hf (llama, qwen2, gpt2, qwen3, phi3,
# rope_linear, rope_dynamic, rope_yarn, rope_longrope, gemma2, gemma3, mistral,
# qwen2_swa;
# ZT_HF_FIXTURES picks some):
#
#   1. `ztrain train --init-from FIXTURE` 4 steps at 2 ranks, ZeRO stage 3, on
#      a token file holding one window (so every sample is that window and each
#      step's logged loss is the loss of that window before the step's update);
#      checkpoints at steps 3 and 4
#   2. `ztrain ckpt export CK/step-3 --hf OUT`
#   3. transformers: AutoModelForCausalLM.from_pretrained(OUT,
#      output_loading_info=True) reports no missing, unexpected or mismatched
#      keys; the weights moved away from the fixture's
#   4. its log-softmax of the logits on the window equals ztrain's
#      (tests/hf_logprobs: zt_hf_load of OUT, whose import test_hf_golden
#      checks independently), and its loss equals the loss ztrain logged at
#      step 4 (computed from the step-3 state in memory, before any export)
#
# ZT_HF_PYTHON picks the Python (default /opt/hfref/bin/python if present, else python3).
. "$(dirname "$0")/lib.sh"
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi
if ! "$ZT_HF_PYTHON" -c 'import torch, transformers' >/dev/null 2>&1; then
    echo "ok 1 # SKIP transformers not importable (by $ZT_HF_PYTHON)"
    echo "1..1"
    exit 0
fi
FIX="$ZT_SRCDIR/tests/fixtures/hf"
LOGPROBS="$ZT_BUILDDIR/tests/hf_logprobs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 PYTHONHASHSEED=0

for name in ${ZT_HF_FIXTURES:-llama qwen2 gpt2 qwen3 phi3 rope_linear rope_dynamic rope_yarn rope_longrope gemma2 gemma3 mistral qwen2_swa}; do
    d="$tmp/$name"
    mkdir -p "$d"
    # one window of T+1 = 17 tokens below the vocabulary: the fixture's own batch row 0
    "$ZT_HF_PYTHON" - "$FIX/$name.ref.json" "$d/one.bin" "$d/tokens.txt" <<'EOF'
import json, struct, sys
meta = json.load(open(sys.argv[1]))
tok = meta["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253          # llm.c token shard: 256 int32, uint16 tokens
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
open(sys.argv[3], "w").write(" ".join(map(str, tok)) + "\n")
EOF
    mpirun_np 2 "$ZTRAIN" train --init-from "$FIX/$name" --stage 3 --seq-len 16 \
        --train_micro_batch_size_per_gpu 1 --steps 4 --lr 1e-3 --clip 0 --scheduler.type none \
        --train "$d/one.bin" --val "" --ckpt-dir "$d/ck" --ckpt-every 3 --ckpt-keep 2 \
        --metrics "$d/metrics.jsonl" --sample-tokens 0 --threads 1 > "$d/train.out" 2>&1
    rc=$?
    ok $rc "$name: ztrain train --init-from at 2 ranks, stage 3, 4 steps, exit status 0"
    [ $rc -eq 0 ] || grep -v '^ ' "$d/train.out" | diag
    # the checks below need only the step-3 checkpoint and the metrics
    [ -d "$d/ck/step-3" ] || continue
    "$ZTRAIN" ckpt export "$d/ck/step-3" --hf "$d/out" > "$d/export.out" 2>&1
    rc=$?
    ok $rc "$name: ztrain ckpt export step-3 --hf"
    [ $rc -eq 0 ] || { diag "$d/export.out"; continue; }
    # shellcheck disable=SC2046
    "$LOGPROBS" "$d/out" $(cat "$d/tokens.txt") > "$d/zt.txt" 2> "$d/zt.err"
    rc=$?
    ok $rc "$name: ztrain's log-probs of the exported model (zt_hf_load)"
    [ $rc -eq 0 ] || { diag "$d/zt.err"; continue; }

    "$ZT_HF_PYTHON" - "$d" "$FIX/$name" <<'EOF' > "$d/py.out" 2> "$d/py.err"
import json, sys
import torch
from transformers import AutoModelForCausalLM
d, fixture = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
n = 0
def ok(cond, msg):
    print(("ok - " if cond else "not ok - ") + msg)
model, info = AutoModelForCausalLM.from_pretrained(d + "/out", output_loading_info=True, dtype=torch.float32)
model.eval()
keys = {k: sorted(map(str, v)) for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
ok(all(not v for v in keys.values()), "from_pretrained: no missing, unexpected or mismatched keys %s" % json.dumps(keys))
ref = AutoModelForCausalLM.from_pretrained(fixture, dtype=torch.float32)
moved = max(float((p - ref.state_dict()[k]).abs().max()) for k, p in model.state_dict().items() if k in ref.state_dict())
ok(moved > 1e-4, "training moved the weights away from the fixture (max |change| %.2e)" % moved)
tok = torch.tensor([[int(x) for x in open(d + "/tokens.txt").read().split()]])
with torch.no_grad():
    lp = torch.log_softmax(model(input_ids=tok[:, :-1]).logits.double(), dim=-1)[0]
loss = float(torch.nn.functional.nll_loss(lp, tok[0, 1:]))
lines = open(d + "/zt.txt").read().split("\n")
zl = float(lines[0].split()[1])
zt = torch.tensor([[float(x) for x in l.split()] for l in lines[1:] if l.strip()], dtype=torch.float64)
diff = float((zt - lp).abs().max()) if zt.shape == lp.shape else float("inf")
# both fp32 computations of the same weights: the golden test's log-prob tolerance
ok(diff <= 3e-5, "log-softmax of the logits [%d, %d]: transformers vs ztrain, max |diff| %.2e" % (*lp.shape, diff))
ok(abs(loss - zl) <= 1e-5, "loss: transformers %.7f, ztrain (exported model) %.7f" % (loss, zl))
steps = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"loss"' in l and '"step"' in l]
s4 = [s["loss"] for s in steps if s.get("step") == 4]
ok(len(s4) == 1 and abs(loss - s4[0]) <= 2e-5,
   "loss: transformers %.7f, ztrain's step-4 loss before export %s" % (loss, "%.7f" % s4[0] if s4 else "missing"))
EOF
    rc=$?
    while IFS= read -r line; do
        case "$line" in
        "ok - "*) ok 0 "$name: ${line#ok - }" ;;
        "not ok - "*) ok 1 "$name: ${line#not ok - }" ;;
        esac
    done < "$d/py.out"
    ok $rc "$name: the transformers check ran to the end"
    [ $rc -eq 0 ] || diag "$d/py.err"
done
done_testing
