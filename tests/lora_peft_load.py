"""lora_peft_load.py -- the exports of a LoRA checkpoint in PEFT and transformers
(tests/lora_peft.sh; a Python with torch + transformers + peft).

  lora_peft_load.py BASE_DIR PEFT_DIR MERGED_DIR TOKENS_TXT LOSS

PEFT_DIR (ztrain ckpt export --peft): peft.PeftModel.from_pretrained(base,
PEFT_DIR) with no unexpected adapter key and no lora_ weight missing
(set_peft_model_state_dict's load result), and its loss on the window in
TOKENS_TXT equal to LOSS (ztrain's, 1e-5).  MERGED_DIR (--hf --merge):
AutoModelForCausalLM loads it with no missing, unexpected or mismatched key,
and its loss is LOSS too.  With ZT_LORA_BASE=nf4 / nf4-dq the adapter goes on
the base quantized by bitsandbytes (BitsAndBytesConfig, compute in fp32) and
the merged model holds the dequantized weights + scale B A.  Prints ok / not ok lines; exit 1 if any failed.
"""
import os
import sys

import torch
from peft import PeftModel
from peft.utils import load_peft_weights, set_peft_model_state_dict
from transformers import AutoModelForCausalLM

base_dir, peft_dir, merged_dir, tok_txt, want = sys.argv[1:6]
want = float(want)
tok = torch.tensor([[int(t) for t in open(tok_txt).read().split()]])
x, y = tok[:, :-1], tok[:, 1:]
failed = 0


def check(ok, what):
    global failed
    print(("ok - " if ok else "not ok - ") + what)
    failed += not ok


def loss_of(m):
    with torch.no_grad():
        lg = m(input_ids=x).logits
    return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]).double(), y.reshape(-1)).item()


qbase = os.environ.get("ZT_LORA_BASE", "")
if qbase:   # QLoRA (tests/qlora_bnb.sh): the adapter on the base quantized by bitsandbytes
    from transformers import BitsAndBytesConfig
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                             bnb_4bit_use_double_quant=qbase == "nf4-dq",
                             bnb_4bit_compute_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, quantization_config=bnb,
                                                device_map="cpu")
else:
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
pm = PeftModel.from_pretrained(base, peft_dir)
res = set_peft_model_state_dict(pm, load_peft_weights(peft_dir))
missing = [k for k in res.missing_keys if "lora_" in k]
check(not res.unexpected_keys and not missing, "PeftModel.from_pretrained: no unexpected keys (%d), "
      "no lora_ weight missing (%d)" % (len(res.unexpected_keys), len(missing)))
l = loss_of(pm)
check(abs(l - want) <= 1e-5, "PEFT adapter: loss %.7f, ztrain %.7f" % (l, want))
mm, info = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32, output_loading_info=True)
bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
check(not bad, "merged model loads with no missing / unexpected / mismatched keys %s" % (bad or ""))
l = loss_of(mm)
check(abs(l - want) <= 1e-5, "merged (W + scale B A): loss %.7f, ztrain %.7f" % (l, want))
sys.exit(1 if failed else 0)
