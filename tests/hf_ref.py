"""hf_ref.py -- the optional transformers check of tests/hf_io.sh (run with a
Python that has torch + transformers, e.g. /opt/hfref/bin/python).

  hf_ref.py MODEL_DIR VAL.bin EB T
Loads MODEL_DIR with AutoModelForCausalLM (fp32), fails when any weight is
missing or unexpected, and prints the mean next-token cross-entropy over the
first EB windows of T+1 tokens of the llm.c token file VAL.bin -- the windows
ztrain's evaluation reads (eval batch EB, one rank, one batch) -- as %.6f.
"""
import struct
import sys

import torch
from transformers import AutoModelForCausalLM

d, val, EB, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
if bad:
    print("loading info:", bad)
    sys.exit(1)
raw = open(val, "rb").read()
h = struct.unpack("<256i", raw[:1024])
wide = h[0] != 20240520   # GPT-2 shards: uint16 tokens
tok = struct.unpack(("<%dI" if wide else "<%dH") % h[2], raw[1024:1024 + h[2] * (4 if wide else 2)])
x = torch.tensor([tok[w * (T + 1): w * (T + 1) + T + 1] for w in range(EB)])
with torch.no_grad():
    logits = m(x[:, :T]).logits
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                         x[:, 1:].reshape(-1))
print("%.6f" % loss.item())
