#!/bin/bash
# lora_adapters.sh -- adapters are never silently different (docs/lora.md):
#  - `ztrain train --lora-from DIR`: every adapter_config.json variant of
#    tests/lora_peft_keys.py (each key of PEFT 0.21's LoraConfig, off, inert,
#    applied or set to what ztrain does not do) is accepted, and the run starts
#    from the adapter, or refused in one line naming the key and value;
#  - `ztrain ckpt export --peft` writes the modules it trained (GPT-2's
#    mlp.c_proj alone as "mlp.c_proj", not "c_proj") and PEFT's off values of
#    the keys of what it did not train; a run with another c_proj selection
#    refuses it;
#  - `ztrain ckpt export --hf OUT --merge` checks the base's fingerprint as a
#    resume does: one changed value of one base tensor is refused naming the
#    base and the tensor (the resume's message), nothing written; the
#    unchanged base merges.
# On the llama and gpt2 fixtures of tests/fixtures/hf, one window of tokens.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "no python3"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FIX="$ZT_SRCDIR/tests/fixtures/hf"
python3 - "$FIX/llama.ref.json" one.bin <<'PY'
import json, struct, sys
tok = json.load(open(sys.argv[1]))["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
cp -r "$FIX/llama" base && cp -r "$FIX/gpt2" g2
# tr OUT BASE STEPS ARGS...: a LoRA run (r 4, alpha 8) of the one window, 1 rank
tr() {
    local out=$1 base=$2 n=$3; shift 3
    "$ZTRAIN" train --init-from "$base" --seq-len 16 --train_micro_batch_size_per_gpu 1 --steps "$n" \
        --lr 1e-2 --clip 0 --scheduler.type none --lora-r 4 --lora-alpha 8 --train one.bin --val "" \
        --sample-tokens 0 --threads 1 "$@" > "$out" 2>&1
}
tr o_ck.txt base 2 --ckpt-dir ck --ckpt-every 2 --resume never &&
    "$ZTRAIN" ckpt export ck/step-2 --peft pe > o_pe.txt 2>&1
ok $? "llama fixture: 2 LoRA steps (q_proj, v_proj), exported --peft"

# ---------------------------------------------------------------- --lora-from
python3 - pe/adapter_config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
want = {"use_dora": False, "lora_bias": False, "bias": "none", "layers_to_transform": None,
        "layers_pattern": None, "exclude_modules": None, "rank_pattern": {}, "alpha_pattern": {},
        "modules_to_save": None, "megatron_config": None, "layer_replication": None,
        "trainable_token_indices": None, "target_parameters": None, "init_lora_weights": True,
        "use_rslora": False, "fan_in_fan_out": False, "target_modules": ["q_proj", "v_proj"],
        "r": 4, "lora_alpha": 8, "lora_dropout": 0}
bad = {k: (c.get(k, "(absent)"), v) for k, v in want.items() if c.get(k, "(absent)") != v}
print("# differs (have, want): %s" % bad if bad else "# %d keys" % len(c))
sys.exit(1 if bad else 0)
PY
ok $? "the exported adapter_config.json states what was trained and PEFT's off values of the rest"
python3 "$ZT_SRCDIR/tests/lora_peft_keys.py" make pe v || { echo "Bail out! lora_peft_keys.py make failed"; exit 1; }
while IFS=$'\t' read -r name expect peft; do
    tr "o_$name.txt" base 1 --ckpt-dir "ck_$name" --resume never --lora-from "v/$name"
    rc=$?
    if [ "$expect" = ok ]; then
        [ $rc = 0 ] && grep -q "start from the PEFT adapter v/$name" "o_$name.txt"
        rc=$?
        ok $rc "--lora-from $name: accepted, the adapters start from it"
    else
        [ $rc != 0 ] && [ "$(grep -c 'error' "o_$name.txt")" = 1 ] &&
            grep "^ztrain: error: v/$name/adapter_config.json: " "o_$name.txt" | grep -qF -- "$expect"
        rc=$?
        ok $rc "--lora-from $name: refused in one line naming it"
    fi
    [ $rc = 0 ] || grep error "o_$name.txt" | diag
done < v/list.tsv
# the file holds an adapter of a module the run does not adapt
mkdir -p xt && cp pe/adapter_config.json xt/ && python3 - pe/adapter_model.safetensors xt/adapter_model.safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
e = h["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
h["base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight"] = {
    "dtype": e["dtype"], "shape": e["shape"], "data_offsets": [len(data), len(data) + e["data_offsets"][1] - e["data_offsets"][0]]}
data += data[e["data_offsets"][0]:e["data_offsets"][1]]
hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PY
tr o_xt.txt base 1 --ckpt-dir ck_xt --resume never --lora-from xt
[ $? != 0 ] && grep -q "xt/adapter_model.safetensors: 9 tensors, 8 of them adapters of this run's targets; base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight is not one" o_xt.txt
rc=$?
ok $rc "an adapter tensor of a module the run does not adapt is refused naming it"
[ $rc = 0 ] || tail -n 5 o_xt.txt | diag

# ---------------------------------------------------------------- GPT-2's c_proj
python3 - "$FIX/gpt2.ref.json" g1.bin <<'PY'
import json, struct, sys
tok = json.load(open(sys.argv[1]))["tokens"][0]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[2], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
cp one.bin one_llama.bin && cp g1.bin one.bin
tr o_g.txt g2 1 --ckpt-dir ckg --ckpt-every 1 --resume never --lora-targets c_attn,mlp.c_proj &&
    "$ZTRAIN" ckpt export ckg/step-1 --peft pg > o_pg.txt 2>&1 &&
    python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["target_modules"]; print("# target_modules", t); sys.exit(t != ["c_attn", "mlp.c_proj"])' pg/adapter_config.json
rc=$?
ok $rc "gpt2, adapters on c_attn and mlp.c_proj: exported as target_modules [c_attn, mlp.c_proj]"
[ $rc = 0 ] || tail -n 5 o_g.txt o_pg.txt 2> /dev/null | diag
tr o_g2.txt g2 1 --ckpt-dir ckg2 --resume never --lora-targets c_attn,mlp.c_proj --lora-from pg
rc=$?
ok $rc "... and a run with the same targets starts from it"
[ $rc = 0 ] || tail -n 5 o_g2.txt | diag
tr o_g3.txt g2 1 --ckpt-dir ckg3 --resume never --lora-targets c_attn,c_proj --lora-from pg
grep -q 'pg/adapter_config.json: target_modules=\["c_attn","mlp.c_proj"\] adapt c_attn,mlp.c_proj in every block; the run.s ztrain.lora.targets are c_attn,c_proj' o_g3.txt
rc=$?
ok $rc "... a run adapting both c_proj refuses it naming both selections"
[ $rc = 0 ] || tail -n 5 o_g3.txt | diag
cp one_llama.bin one.bin

# ---------------------------------------------------------------- --merge
"$ZTRAIN" ckpt export ck/step-2 --hf m0 --merge > o_m0.txt 2>&1 && [ -s m0/model.safetensors ]
rc=$?
ok $rc "export --hf --merge against the base the adapters were trained on"
[ $rc = 0 ] || tail -n 5 o_m0.txt | diag
cp -r base base.orig
python3 "$ZT_SRCDIR/tests/hf_fixture.py" mutate base/model-00002-of-00003.safetensors nudge \
    model.layers.1.self_attn.q_proj.weight
"$ZTRAIN" ckpt export ck/step-2 --hf m1 --merge > o_m1.txt 2>&1
rc=$?
msg="the base '$T/base' has changed since the adapters were trained: tensor h1.q.w differs"
[ $rc != 0 ] && grep -qF "ztrain: error: ck/step-2/state.h5: $msg" o_m1.txt && [ ! -e m1 ]
rc=$?
ok $rc "one value of model.layers.1.self_attn.q_proj.weight changed: --merge refused naming the base and the tensor, nothing written"
[ $rc = 0 ] || diag o_m1.txt
tr o_r1.txt base 3 --ckpt-dir ck --resume auto
[ $? != 0 ] && grep -qF "$msg" o_r1.txt
ok $? "... the resume refuses it with the same words"
rm -rf base && cp -r base.orig base && echo " " >> base/config.json
"$ZTRAIN" ckpt export ck/step-2 --hf m2 --merge > o_m2.txt 2>&1
[ $? != 0 ] && grep -qF "the base '$T/base' has changed since the adapters were trained: its config.json differs" o_m2.txt && [ ! -e m2 ]
ok $? "config.json changed: --merge refused"
rm -rf base && cp -r base.orig base
"$ZTRAIN" ckpt export ck/step-2 --hf m3 --merge > o_m3.txt 2>&1 && cmp -s m0/model.safetensors m3/model.safetensors
rc=$?
ok $rc "the base restored: --merge writes the same model again"
[ $rc = 0 ] || tail -n 5 o_m3.txt | diag
done_testing
