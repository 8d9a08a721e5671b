"""lora_peft.py -- PEFT's side of tests/lora_peft.sh (run with a Python that
has torch + transformers + peft, e.g. /opt/hfref/bin/python).

  lora_peft.py FIXTURE_DIR ZTRAIN_JSON R ALPHA RSLORA

Wraps the fixture (AutoModelForCausalLM, fp32) in peft.get_peft_model with
LoraConfig(r, lora_alpha, target_modules = the modules ztrain targeted,
lora_dropout 0, use_rslora; GPT-2's Conv1D: fan_in_fan_out), puts ztrain's
adapters (tests/lora_ref.c's JSON) into it, and compares: the loss of the
fixture batch, the gradient of every lora_A / lora_B (relative to the
largest entry of that gradient: tolerance 2e-5, test_hf_golden's), the
losses of 3 torch.optim.AdamW steps and the loss after them (absolute 1e-5).
With ZT_LORA_BASE=nf4 / nf4-dq the fixture is loaded with transformers'
BitsAndBytesConfig(load_in_4bit, nf4, double quant for nf4-dq, compute in
fp32) (QLoRA; ztrain ran with ztrain.lora.base set the same).
Prints one line per check, "ok" or "not ok"; exits 1 if any failed.
"""
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

fix, zjson, r, alpha, rslora = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "true"
Z = json.load(open(zjson))
meta = json.load(open(fix.rstrip("/") + ".ref.json"))
torch.manual_seed(0)
qbase = os.environ.get("ZT_LORA_BASE", "")
if qbase:   # QLoRA (tests/qlora_bnb.sh): the base quantized by bitsandbytes, compute in fp32
    from transformers import BitsAndBytesConfig
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                             bnb_4bit_use_double_quant=qbase == "nf4-dq",
                             bnb_4bit_compute_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(fix, dtype=torch.float32, quantization_config=bnb,
                                                device_map="cpu")
    print("# base loaded with %s" % bnb.to_dict())
else:
    base = AutoModelForCausalLM.from_pretrained(fix, dtype=torch.float32)
gpt2 = base.config.model_type == "gpt2"
prefix = "transformer.h.%d." if gpt2 else "model.layers.%d."
targets = Z["targets"].split(",")
cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, use_rslora=rslora,
                 fan_in_fan_out=gpt2, bias="none")
m = get_peft_model(base, cfg)
params = dict(m.named_parameters())
trainable = {k: p for k, p in params.items() if p.requires_grad}


def peft_name(ours):
    l, rest = ours.split(".", 1)
    path, kind = rest.rsplit(".", 1)
    return "base_model.model." + (prefix % int(l[1:])) + path + "." + kind + ".default.weight"


failed = 0


def check(ok, what):
    global failed
    print(("ok - " if ok else "not ok - ") + what)
    failed += not ok


names = {peft_name(k): k for k in Z["adapters"]}
check(set(names) == set(trainable), "the trainable parameters are exactly ztrain's %d adapters (%s)"
      % (len(names), Z["targets"]))
with torch.no_grad():
    for pn, ours in names.items():
        a = Z["adapters"][ours]
        t = torch.tensor(a["data"], dtype=torch.float64).reshape(a["shape"]).float()
        check(tuple(t.shape) == tuple(params[pn].shape), "%s shape %s" % (pn, tuple(t.shape)))
        params[pn].copy_(t)
tok = torch.tensor(meta["tokens"])
x, y = tok[:, :-1], tok[:, 1:]


def loss_fn():
    logits = m(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


loss = loss_fn()
loss.backward()
check(abs(loss.item() - Z["loss"]) <= 5e-6, "loss %.7f, ztrain %.7f" % (loss.item(), Z["loss"]))
worst = 0.0
for pn, ours in names.items():
    g = Z["grads"][ours]
    zg = torch.tensor(g["data"], dtype=torch.float64).reshape(g["shape"])
    pg = params[pn].grad.double()
    mx = pg.abs().max().item()
    rel = (zg - pg).abs().max().item() / (mx if mx > 0 else 1.0)
    worst = max(worst, rel)
    if not rel <= 2e-5:
        print("# %s: gradient differs by %.3g of its largest entry %.3g" % (pn, rel, mx))
        failed += 1
check(worst <= 2e-5, "gradients of all %d lora_A / lora_B within 2e-5 of the largest entry (worst %.2e)"
      % (len(names), worst))
m.zero_grad()
opt = torch.optim.AdamW(list(trainable.values()), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
sw = 0.0
for k in range(3):
    opt.zero_grad()
    l = loss_fn()
    l.backward()
    opt.step()
    sw = max(sw, abs(l.item() - Z["step_losses"][k]))
    print("# step %d loss %.7f, ztrain %.7f" % (k + 1, l.item(), Z["step_losses"][k]))
check(sw <= 1e-5, "losses of 3 AdamW steps match (max |diff| %.2e)" % sw)
with torch.no_grad():
    after = loss_fn().item()
check(abs(after - Z["loss_after"]) <= 1e-5, "loss after the third update %.7f, ztrain %.7f"
      % (after, Z["loss_after"]))
sys.exit(1 if failed else 0)
