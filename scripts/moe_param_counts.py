#!/usr/bin/env python3
"""moe_param_counts.py -- the parameter counts of the Mixture of Experts
config.json files in tests/fixtures/moe, as transformers builds the models
(on the meta device: no memory, no weights), for tests/hf_moe.sh's check of
`ztrain estimate --model` (total and active per token).

    /opt/hfref/bin/python scripts/moe_param_counts.py > tests/fixtures/moe/counts.json

total: every parameter of the model transformers instantiates; active: a
token's share -- each experts tensor (mlp.experts.*, [E, ...]) counted at
num_experts_per_tok / E of its size, everything else (attention, router,
norms, embedding, LM head, a shared expert) in full.
"""
import glob
import json
import os
import sys

import torch
import transformers


def counts(path):
    cfg = transformers.AutoConfig.from_pretrained(path)
    cls = getattr(transformers, cfg.architectures[0])
    with torch.device("meta"):
        model = cls(cfg)
    total = active = 0
    for name, p in model.named_parameters():
        total += p.numel()
        if ".mlp.experts." in name:
            E = p.shape[0]   # [E, ...]: one slice per expert
            active += p.numel() // E * cfg.num_experts_per_tok
        else:
            active += p.numel()
    return {"architecture": cfg.architectures[0], "total": total, "active": active}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "tests", "fixtures", "moe", "*.config.json"))):
        out[os.path.basename(path)] = counts(path)
    out["generator"] = "scripts/moe_param_counts.py (torch %s, transformers %s)" % (
        torch.__version__.split("+")[0], transformers.__version__)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
