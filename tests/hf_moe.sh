#!/bin/bash
# hf_moe.sh -- Mixture of Experts models through training, checkpoints,
# resume and export (docs/moe.md), on the committed fixtures
# tests/fixtures/hf/mixtral, qwen2_moe, olmoe, mixtral_aux (the load-balancing loss
# in the objective) and the mixed dense / sparse qwen2_moe_mixed (decoder_sparse_step 2)
# and qwen3_moe_mixed (mlp_only_layers [0]) (made by scripts/make_hf_fixtures.py):
#   - 3 steps from the fixture, each step's aux_loss in the metrics; on
#     cpu-strict (engine memory the host cannot touch) the same losses, the
#     measured device peak equal to the planner's;
#   - `ztrain ckpt inspect` reads the expert settings back from /model;
#   - resuming from step 1 gives the uninterrupted run's step-2 and step-3
#     losses exactly, at ZeRO stage 0 and 3;
#   - `ckpt export --hf` of step 2 writes the hub's per-expert tensors (and
#     no packed one) and loads back (zt_hf_load, tests/hf_logprobs) with the
#     loss the run logged at step 3;
#   - with transformers importable (ZT_HF_PYTHON, default /opt/hfref/bin/python),
#     transformers loads the export with no missing or unexpected key and
#     the same loss (else that check SKIPs);
#   - the mixed models' export writes a dense block's MLP as mlp.gate_proj /
#     up_proj / down_proj and no router or expert for it;
#   - `ztrain estimate --model` of Mixtral-8x7B's and Qwen3-30B-A3B's
#     config.json and two mixed ones (tests/fixtures/moe) gives the total and per-token active
#     parameter counts transformers' models have (tests/fixtures/moe/counts.json,
#     scripts/moe_param_counts.py).
. "$(dirname "$0")/lib.sh"
FIX="$ZT_SRCDIR/tests/fixtures/hf"
LOGPROBS="$ZT_BUILDDIR/tests/hf_logprobs"
in_tmpdir
export OMP_NUM_THREADS=1
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi

tok="5 17 3 88 41 0 63 29 12 77 50 9 33 70 2 91 46"
# shellcheck disable=SC2086
token_file one.bin $tok
run() {  # run MODELDIR CKDIR STEPS [ARGS...]
    local dir=$1 ck=$2 steps=$3
    shift 3
    "$ZTRAIN" train --init-from "$dir" --seq-len 16 --train_micro_batch_size_per_gpu 1 \
        --steps "$steps" --lr 1e-3 --clip 0 --scheduler.type none --train one.bin --val "" \
        --sample-tokens 0 --threads 1 --ckpt-every 1 --ckpt-keep 5 --ckpt-dir "$ck" \
        --metrics "$ck.m" "$@" > "$ck.out" 2>&1
}
loss_at() { sed -n "s/.*\"step\": *$2,.*\"loss\": *\([0-9.e+-]*\).*/\1/p" "$1" | head -1; }

# name:stage:the export's per-expert tensors (3 x 4 per sparse block)
for spec in "mixtral:0:24" "qwen2_moe:3:24" "mixtral_aux:1:24" "olmoe:2:24" "qwen2_moe_mixed:3:12" \
            "qwen3_moe_mixed:1:24"; do
    name=${spec%%:*}
    rest=${spec#*:}
    stage=${rest%%:*}
    nexp=${rest#*:}
    run "$FIX/$name" "$name" 3 --zero_optimization.stage "$stage"
    ok $? "$name: 3 steps from the fixture at ZeRO stage $stage, checkpoints at steps 1-3"
    [ -s "$name.m" ] || diag "$name.out"
    ok $([ "$(grep -c '"aux_loss": [0-9]' "$name.m")" = 3 ]; echo $?) \
       "$name: every step's metrics record the load-balancing loss (aux_loss) apart from the loss"
    run "$FIX/$name" "$name.s" 3 --zero_optimization.stage "$stage" --backend cpu-strict --memory-report
    rc=$?
    ok $([ $rc = 0 ] && cmp -s <(grep -o '"loss": *[0-9.e+-]*' "$name.m") <(grep -o '"loss": *[0-9.e+-]*' "$name.s.m"); echo $?) \
       "$name: on cpu-strict, the same 3 losses (exit $rc)"
    [ $rc = 0 ] || diag "$name.s.out"
    read -r meas pred <<< "$(dev_peaks "$name.s.out")"
    ok $([ -n "$meas" ] && [ "$meas" = "$pred" ]; echo $?) \
       "$name: on cpu-strict, the device peak $meas bytes == the planner's $pred"
    "$ZTRAIN" ckpt inspect "$name/step-2" > "$name.inspect" 2>&1
    ok $(grep -q '"n_experts": 4' "$name.inspect" && grep -q '"experts_per_token": 2' "$name.inspect"; echo $?) \
       "$name: ckpt inspect reads n_experts 4, experts_per_token 2 back"
    mkdir -p "$name.r"
    cp -r "$name/step-1" "$name.r/"
    run "$FIX/$name" "$name.r" 3 --zero_optimization.stage "$stage"
    rc=$?
    l2=$(loss_at "$name.m" 2) l3=$(loss_at "$name.m" 3)
    r2=$(loss_at "$name.r.m" 2) r3=$(loss_at "$name.r.m" 3)
    ok $([ $rc = 0 ] && [ -n "$l2" ] && [ "$l2" = "$r2" ] && [ "$l3" = "$r3" ]; echo $?) \
       "$name: resumed from step 1, steps 2 and 3 losses $r2 $r3 = the run's $l2 $l3"
    [ $rc = 0 ] || diag "$name.r.out"
    "$ZTRAIN" ckpt export "$name/step-2" --hf "$name.hf" > "$name.exp" 2>&1
    ok $? "$name: ckpt export step-2 --hf"
    if [ "$name" = mixtral_aux ]; then
        ok $(python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["output_router_logits"] is True and c["router_aux_loss_coef"] == 0.05))' "$name.hf/config.json"; echo $?) \
           "$name: the export's config.json keeps output_router_logits and router_aux_loss_coef 0.05"
    fi
    # the hub's names: per expert, no packed tensor
    python3 - "$name.hf/model.safetensors" > "$name.names" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
for k, v in sorted(json.loads(b[8:8 + n]).items()):
    if k != "__metadata__":
        print(k, v["shape"])
PY
    ok $(grep -q "experts.3.*\[32, 16\]" "$name.names" && ! grep -q "gate_up_proj\|experts.down_proj" "$name.names" &&
         [ "$(grep -c 'experts\.' "$name.names")" = "$nexp" ]; echo $?) \
       "$name: the export holds 3 x 4 per-expert tensors per sparse layer ($nexp), no packed one"
    case $name in
    qwen2_moe_mixed)   # blocks 0 and 2 dense (intermediate_size 40), block 1 sparse
        ok $(grep -q "layers.0.mlp.gate_proj.weight \[40, 32\]" "$name.names" &&
             grep -q "layers.2.mlp.down_proj.weight \[32, 40\]" "$name.names" &&
             grep -q "layers.1.mlp.shared_expert.up_proj.weight \[24, 32\]" "$name.names" &&
             ! grep -q "layers.[02].mlp.\(gate.weight\|experts\|shared\)" "$name.names" &&
             python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["decoder_sparse_step"] == 2 and c["mlp_only_layers"] == [] and c["intermediate_size"] == 40))' "$name.hf/config.json"; echo $?) \
           "$name: dense blocks 0 and 2 export mlp.gate/up/down_proj at width 40, no router or expert; config.json decoder_sparse_step 2" ;;
    qwen3_moe_mixed)   # block 0 dense
        ok $(grep -q "layers.0.mlp.up_proj.weight \[40, 32\]" "$name.names" &&
             ! grep -q "layers.0.mlp.\(gate.weight\|experts\)" "$name.names" &&
             python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["mlp_only_layers"] == [0]))' "$name.hf/config.json"; echo $?) \
           "$name: dense block 0 exports mlp.gate/up/down_proj at width 40, no router or expert; config.json mlp_only_layers [0]" ;;
    esac
    # shellcheck disable=SC2086
    "$LOGPROBS" "$name.hf" $tok > "$name.lp" 2> "$name.lperr"
    rc=$?
    zl=$(awk 'NR == 1 { print $2 }' "$name.lp")
    ok $([ $rc = 0 ] && awk -v a="$zl" -v b="$l3" 'BEGIN { d = a - b; exit !(d <= 2e-5 && d >= -2e-5) }'; echo $?) \
       "$name: the export loads back (zt_hf_load) with the step-3 loss: $zl vs $l3"
    [ $rc = 0 ] || diag "$name.lperr"
    if "$ZT_HF_PYTHON" -c 'import torch, transformers' >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        "$ZT_HF_PYTHON" - "$name.hf" $tok > "$name.py" 2>&1 <<'PY'
import sys, torch, transformers
import torch.nn.functional as F
d, tok = sys.argv[1], [int(x) for x in sys.argv[2:]]
cls = getattr(transformers, transformers.AutoConfig.from_pretrained(d).architectures[0])
m, info = cls.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                              experts_implementation="eager", output_loading_info=True)
t = torch.tensor([tok])
logits = m.eval()(input_ids=t[:, :-1]).logits
print("missing", len(info["missing_keys"]), "unexpected", len(info["unexpected_keys"]),
      "mismatched", len(info["mismatched_keys"]))
print("loss %.9f" % F.cross_entropy(logits[0], t[0, 1:]).item())
PY
        hl=$(sed -n 's/^loss //p' "$name.py")
        ok $(grep -q "missing 0 unexpected 0 mismatched 0" "$name.py" &&
             awk -v a="$hl" -v b="$l3" 'BEGIN { d = a - b; exit !(d <= 2e-5 && d >= -2e-5) }'; echo $?) \
           "$name: transformers loads the export, no missing or unexpected key, loss $hl vs $l3"
        grep -q "^loss" "$name.py" || diag "$name.py"
    else
        skip "$name: transformers loads the export" "transformers not importable by $ZT_HF_PYTHON"
    fi
done

# the mixed models with activation checkpointing (a slot serves blocks of both kinds), bf16, stage 2
for name in qwen2_moe_mixed qwen3_moe_mixed; do
    run "$FIX/$name" "$name.k" 2 --zero_optimization.stage 2 --backend cpu-strict --memory-report \
        --precision bf16 --act-ckpt every-2
    rc=$?
    read -r meas pred <<< "$(dev_peaks "$name.k.out")"
    ok $([ $rc = 0 ] && [ -n "$meas" ] && [ "$meas" = "$pred" ]; echo $?) \
       "$name: bf16, stage 2, checkpointing every 2 blocks on cpu-strict: device peak $meas bytes == the planner's $pred"
    [ $rc = 0 ] || diag "$name.k.out"
done

# a long mlp_only_layers (82 characters) survives the checkpoint and the export whole
L=$(seq -s, 0 30)
"$ZTRAIN" train --ztrain.model.arch llama --ztrain.model.n_layer 34 --ztrain.model.n_head 2 \
    --ztrain.model.n_embd 8 --ztrain.model.vocab 96 --ztrain.model.context 16 \
    --ztrain.model.intermediate_size 12 --ztrain.model.n_experts 2 --ztrain.model.experts_per_token 1 \
    --ztrain.model.moe_intermediate_size 4 --ztrain.model.qk_norm true \
    --ztrain.model.mlp_only_layers "$L" --seq-len 16 --train_micro_batch_size_per_gpu 1 --steps 1 \
    --train one.bin --val "" --sample-tokens 0 --threads 1 --ckpt-dir long --ckpt-every 1 > long.out 2>&1 &&
    "$ZTRAIN" ckpt export long/step-1 --hf long.hf > long.exp 2>&1
rc=$?
ok $([ $rc = 0 ] && python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["architectures"] == ["Qwen3MoeForCausalLM"] and c["mlp_only_layers"] == list(range(31))))' long.hf/config.json; echo $?) \
   "a 34-block Qwen3-MoE with mlp_only_layers 0-30: the export's config.json holds all 31"
[ $rc = 0 ] || { diag long.out; diag long.exp; }

for f in mixtral-8x7b qwen3-30b-a3b qwen2-moe-mixed qwen3-moe-mixed; do
    "$ZTRAIN" estimate --model "$ZT_SRCDIR/tests/fixtures/moe/$f.config.json" --world-size 8 --json \
        > "$f.est" 2> "$f.esterr"
    rc=$?
    got=$(python3 - "$f.est" "$ZT_SRCDIR/tests/fixtures/moe/counts.json" "$f.config.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["model"]
want = json.load(open(sys.argv[2]))[sys.argv[3]]
print("%d %d %d %d" % (m["num_params"], m["active_params"], want["total"], want["active"]))
PY
)
    set -- $got
    ok $([ $rc = 0 ] && [ -n "$4" ] && [ "$1" = "$3" ] && [ "$2" = "$4" ]; echo $?) \
       "estimate --model $f: $1 parameters, $2 active per token (transformers: $3, $4)"
    [ $rc = 0 ] || diag "$f.esterr"
done
done_testing
