#!/usr/bin/env python3
"""lora_peft_keys.py -- PEFT adapter_config.json variants for `--lora-from`
(docs/lora.md, "Starting from a PEFT adapter"; tests/lora_adapters.sh and,
with PEFT installed, tests/lora_peft.sh).

  lora_peft_keys.py make ADAPTER OUT
      ADAPTER: `ztrain ckpt export --peft` of a run with r 4, lora_alpha 8,
      the default targets (q_proj, v_proj) on a 2-block llama.  Writes one
      directory per variant (the adapter with its adapter_config.json
      changed) and OUT/list.tsv: NAME, EXPECT (ok, or a fragment of the
      one-line refusal), PEFT (same: PEFT loads it into exactly the run's
      adapters; differs: PEFT loads something else or refuses; -: not
      compared).  Standard library only.
  lora_peft_keys.py peft BASE OUT
      (torch + transformers + peft) every variant with PEFT same / differs
      loaded by peft.PeftModel.from_pretrained(BASE, variant): its adapted
      modules with their r, scaling, dropout, DoRA and lora_B bias, and any
      other trainable parameter, against the run's.  TAP.
"""
import json
import os
import shutil
import sys

# PEFT 0.21.2's LoraConfig().save_pretrained (target_modules, r, lora_alpha,
# peft_type and base_model_name_or_path left as the export wrote them)
PEFT_DEFAULTS = {
    "alora_invocation_tokens": None, "alpha_pattern": {}, "arrow_config": None,
    "auto_mapping": None, "bias": "none", "corda_config": None, "ensure_weight_tying": False,
    "eva_config": None, "exclude_modules": None, "fan_in_fan_out": False, "inference_mode": False,
    "init_lora_weights": True, "kasa_config": None, "layer_replication": None,
    "layers_pattern": None, "layers_to_transform": None, "loftq_config": {}, "lora_bias": False,
    "lora_dropout": 0.0, "lora_ga_config": None, "megatron_config": None,
    "megatron_core": "megatron.core", "modules_to_save": None, "monteclora_config": None,
    "peft_version": "0.21.2", "qalora_group_size": 16, "rank_pattern": {}, "revision": None,
    "target_parameters": None, "task_type": None, "trainable_token_indices": None,
    "use_bdlora": None, "use_dora": False, "use_qalora": False, "use_rslora": False,
    "velora_config": None,
}
QKV3 = ["q_proj", "k_proj", "v_proj"]
BLOCK_SOME = "LoRA on part of the blocks is not supported by ztrain"
# name, changes ({key: value}; "-KEYS": keys removed), expect, PEFT
VARIANTS = [
    ("exported", {}, "ok", "same"),
    ("peft-0.21-defaults", PEFT_DEFAULTS, "ok", "same"),
    ("minimal", {"-KEYS": "*"}, "ok", "same"),
    ("off-values", {"use_dora": False, "bias": "none", "modules_to_save": [], "alpha_pattern": {},
                    "rank_pattern": {}, "layers_to_transform": [], "lora_bias": False,
                    "megatron_config": {}, "layer_replication": [], "target_parameters": [],
                    "exclude_modules": [], "use_qalora": False},
     "ok", "same"),
    ("metadata", {"task_type": None, "revision": "v1", "inference_mode": False,
                  "peft_version": "0.99.0", "megatron_core": "x.core", "qalora_group_size": 32,
                  "ensure_weight_tying": True, "runtime_config": {"ephemeral_gpu_offload": False},
                  "auto_mapping": {"base_model_class": "LlamaForCausalLM",
                                   "parent_library": "transformers.models.llama.modeling_llama"}},
     "ok", "same"),
    ("fan-in-fan-out", {"fan_in_fan_out": True}, "ok", "same"),
    ("init-gaussian", {"init_lora_weights": "gaussian", "loftq_config": {"loftq_bits": 4},
                       "eva_config": {}}, "ok", "same"),
    ("init-false", {"init_lora_weights": False}, "ok", "same"),
    ("init-orthogonal", {"init_lora_weights": "orthogonal"}, "ok", "same"),
    ("targets-null", {"target_modules": None}, "ok", "same"),
    ("targets-regex", {"target_modules": r".*\.(q|v)_proj"}, "ok", "same"),
    ("targets-paths", {"target_modules": ["self_attn.q_proj", "v_proj"]}, "ok", "same"),
    ("exclude-list", {"target_modules": QKV3, "exclude_modules": ["k_proj"]}, "ok", "same"),
    ("exclude-regex", {"target_modules": QKV3, "exclude_modules": r".*\.k_proj"}, "ok", "same"),
    ("layers-all", {"layers_to_transform": [0, 1]}, "ok", "same"),
    ("layers-all-pattern", {"layers_to_transform": [1, 0], "layers_pattern": "layers"}, "ok", "same"),
    ("layers-all-patterns", {"layers_to_transform": [0, 1], "layers_pattern": ["h", "layers"]},
     "ok", "same"),
    ("patterns-inert", {"rank_pattern": {"q_proj": 4}, "alpha_pattern": {"o_proj": 99}}, "ok", "same"),
    ("unknown-off", {"enable_lora": None, "merge_weights": False}, "ok", "same"),
    # the modules: refused, and PEFT adapts others
    ("layers-0", {"layers_to_transform": [0]}, BLOCK_SOME, "differs"),
    ("layers-int", {"layers_to_transform": 1}, BLOCK_SOME, "differs"),
    ("targets-regex-block0", {"target_modules": r"model\.layers\.0\.self_attn\.(q|v)_proj"},
     BLOCK_SOME, "differs"),
    ("layers-pattern-none", {"layers_to_transform": [0, 1], "layers_pattern": "h"},
     "adapt none in every block; the run's ztrain.lora.targets are q_proj,v_proj", "differs"),
    ("exclude-v", {"exclude_modules": ["v_proj"]},
     "adapt q_proj in every block; the run's ztrain.lora.targets are q_proj,v_proj", "differs"),
    ("all-linear", {"target_modules": "all-linear"},
     "adapt q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj in every block", "differs"),
    ("lm-head", {"target_modules": ["q_proj", "v_proj", "lm_head"]},
     "select lm_head, which ztrain does not adapt", "differs"),
    ("rank-pattern", {"rank_pattern": {"v_proj": 8}},
     "rank_pattern[\"v_proj\"]=8 gives model.layers.0.self_attn.v_proj another rank than r=4: "
     "per-module ranks are not supported by ztrain", "differs"),
    ("alpha-pattern", {"alpha_pattern": {"v_proj": 16}},
     "alpha_pattern[\"v_proj\"]=16 gives model.layers.0.self_attn.v_proj another alpha than "
     "lora_alpha=8: per-module alphas are not supported by ztrain", "differs"),
    ("alpha-pattern-block1", {"alpha_pattern": {r"layers\.1\.self_attn\.q_proj": 4}},
     "gives model.layers.1.self_attn.q_proj another alpha", "differs"),
    ("targets-regex-bad", {"target_modules": "(("}, "target_modules: the regular expression '((' "
     "does not compile", "differs"),
    ("regex-with-layers", {"target_modules": ".*_proj", "layers_to_transform": [0, 1]},
     "layers_to_transform with target_modules as a string: PEFT refuses it", "differs"),
    ("pattern-without-layers", {"layers_pattern": "layers"},
     "layers_pattern without layers_to_transform: PEFT refuses it", "differs"),
    # the settings: refused naming both
    ("rslora", {"use_rslora": True},
     "the adapter has use_rslora=true; the run has ztrain.lora.rslora=false", "differs"),
    ("alpha", {"lora_alpha": 16}, "the adapter has lora_alpha=16; the run has ztrain.lora.alpha=8",
     "differs"),
    ("dropout", {"lora_dropout": 0.05},
     "the adapter has lora_dropout=0.05; the run has ztrain.lora.dropout=0", "differs"),
    ("r-absent", {"-KEYS": ["r"]}, "the adapter has r=(absent: PEFT's default); the run has "
     "ztrain.lora.r=4", "differs"),
    # what ztrain does not do: refused by name
    ("dora", {"use_dora": True}, "use_dora=true (DoRA: a trained magnitude vector per module) is "
     "not supported by ztrain", "differs"),
    ("bias-all", {"bias": "all"}, "bias=\"all\" (the base model's biases trained and saved) is not "
     "supported by ztrain", "-"),
    ("bias-lora-only", {"bias": "lora_only"}, "bias=\"lora_only\" (", "-"),
    ("modules-to-save", {"modules_to_save": ["lm_head"]}, "modules_to_save=[\"lm_head\"] (whole "
     "modules trained and saved beside the adapters) is not supported by ztrain", "differs"),
    ("lora-bias", {"lora_bias": True}, "lora_bias=true (a trained bias of lora_B)", "differs"),
    ("init-pissa", {"init_lora_weights": "pissa"}, "init_lora_weights=\"pissa\" (the adapter goes "
     "with base weights that initialization changed", "-"),
    ("init-pissa-niter", {"init_lora_weights": "pissa_niter_4"}, "init_lora_weights=\"pissa_niter_4\" (", "-"),
    ("init-olora", {"init_lora_weights": "olora"}, "init_lora_weights=\"olora\" (", "-"),
    ("init-corda", {"init_lora_weights": "corda"}, "init_lora_weights=\"corda\" (", "-"),
    ("init-loftq", {"init_lora_weights": "loftq", "loftq_config": {"loftq_bits": 4}},
     "init_lora_weights=\"loftq\" (", "-"),
    ("init-lora-ga", {"init_lora_weights": "lora_ga"}, "init_lora_weights=\"lora_ga\" (", "-"),
    ("init-mica", {"init_lora_weights": "mica"}, "init_lora_weights=\"mica\" (MiCA", "-"),
    ("init-bogus", {"init_lora_weights": "bogus"}, "init_lora_weights=\"bogus\" is not a PEFT "
     "initialization", "-"),
    ("layer-replication", {"layer_replication": [[0, 2], [1, 2]]}, "layer_replication=[[0,2],[1,2]] "
     "(blocks repeated in the model) is not supported by ztrain", "-"),
    ("megatron", {"megatron_config": {"tensor_model_parallel_size": 2}}, "megatron_config=", "-"),
    ("trainable-tokens", {"trainable_token_indices": [1, 2]}, "trainable_token_indices=[1,2] "
     "(trained rows of the embeddings)", "-"),
    ("trainable-tokens-empty", {"trainable_token_indices": []}, "trainable_token_indices=[] "
     "(trained rows of the embeddings)", "differs"),
    ("target-parameters", {"target_parameters": ["mlp.experts.gate_up_proj"]},
     "target_parameters=[\"mlp.experts.gate_up_proj\"] (LoRA on parameters", "-"),
    ("qalora", {"use_qalora": True}, "use_qalora=true (QA-LoRA", "-"),
    ("alora", {"alora_invocation_tokens": [5]}, "alora_invocation_tokens=[5] (activated LoRA", "-"),
    ("velora", {"velora_config": {}}, "velora_config={} (VeLoRA)", "-"),
    ("monteclora", {"monteclora_config": {}}, "monteclora_config={} (MonteCLoRA)", "-"),
    ("bdlora", {"use_bdlora": {}}, "use_bdlora={} (block-diagonal LoRA", "-"),
    ("arrow", {"arrow_config": {}}, "arrow_config={} (Arrow routing)", "-"),
    ("kasa", {"kasa_config": {}}, "kasa_config={} (KaSA)", "-"),
    ("unknown", {"use_foo": True}, "use_foo=true is not a key of PEFT 0.21's LoraConfig: unknown "
     "to ztrain", "-"),
    ("targets-number", {"target_modules": 42}, "target_modules=42: not a list of module names", "-"),
    ("layers-strings", {"layers_to_transform": ["a"]}, "layers_to_transform=[\"a\"]: not a layer "
     "index", "-"),
    ("peft-type", {"peft_type": "LOHA"}, "peft_type is 'LOHA', not LORA", "-"),
    ("two-at-once", {"use_dora": True, "bias": "all"}, "use_dora=true (DoRA: a trained magnitude "
     "vector per module) is not supported by ztrain; bias=\"all\" (", "-"),
]
KEEP = ("peft_type", "r", "lora_alpha", "target_modules")


def make(adapter, out):
    os.makedirs(out, exist_ok=True)
    base = json.load(open(os.path.join(adapter, "adapter_config.json")))
    with open(os.path.join(out, "list.tsv"), "w") as lst:
        for name, ch, expect, peft in VARIANTS:
            d = os.path.join(out, name)
            os.makedirs(d)
            shutil.copy(os.path.join(adapter, "adapter_model.safetensors"), d)
            c = dict(base)
            drop = ch.get("-KEYS", [])
            if drop == "*":
                drop = [k for k in c if k not in KEEP]
            for k in drop:
                c.pop(k, None)
            c.update({k: v for k, v in ch.items() if k != "-KEYS"})
            with open(os.path.join(d, "adapter_config.json"), "w") as f:
                json.dump(c, f, indent=2)
            lst.write("%s\t%s\t%s\n" % (name, expect, peft))


def peft_check(base_dir, out):
    import warnings
    import torch
    from transformers import AutoModelForCausalLM
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer
    warnings.simplefilter("ignore")
    want = {"model.layers.%d.self_attn.%s" % (l, m): (4, 2.0, 0.0, False, False)
            for l in (0, 1) for m in ("q_proj", "v_proj")}
    n, failed = 0, 0
    for line in open(os.path.join(out, "list.tsv")):
        name, expect, cmp = line.rstrip("\n").split("\t")
        if cmp == "-":
            continue
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        try:
            pm = PeftModel.from_pretrained(base, os.path.join(out, name), is_trainable=True)
            got, extra = {}, []
            for mname, mod in pm.named_modules():
                if isinstance(mod, LoraLayer) and "default" in mod.r:
                    drop = mod.lora_dropout["default"]
                    got[mname.replace("base_model.model.", "", 1)] = (
                        mod.r["default"], float(mod.scaling["default"]),
                        float(getattr(drop, "p", 0.0)), bool(mod.use_dora.get("default")),
                        mod.lora_B["default"].bias is not None)
            for pname, p in pm.named_parameters():
                if p.requires_grad and not (pname.endswith("lora_A.default.weight") or
                                            pname.endswith("lora_B.default.weight")):
                    extra.append(pname)
            what = "adapted %s, other trainable %s" % (sorted(got.items()), extra[:3])
            same = got == want and not extra
        except Exception as e:   # PEFT refuses it
            what, same = "PEFT refuses it: %s" % str(e).splitlines()[0][:150], False
        n += 1
        good = same == (cmp == "same")
        failed += not good
        print("%s %d - %s: PEFT %s ztrain's run (ztrain: %s)" % (
            "ok" if good else "not ok", n, name, "loads exactly" if same else "loads other than",
            "accepts" if expect == "ok" else "refuses"))
        if not good:
            print("# " + what)
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "peft":
        sys.exit(peft_check(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
