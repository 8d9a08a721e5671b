#!/usr/bin/env python3
"""torch_gpt2_cpu.py -- PyTorch eager fp32 training step on the CPU, for bench/cpu_compare.sh.

transformers' GPT2LMHeadModel (sdpa attention, dropout off) at the GPT-2 124M shape, B x T random
tokens, loss + backward + AdamW (torch.optim.AdamW, fused=False) + zero_grad, timed per step
after one warm-up step; prints the median.

  python3 bench/torch_gpt2_cpu.py THREADS STEPS [L,H,C,V,B,T]
"""
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

th = int(sys.argv[1]) if len(sys.argv) > 1 else 2
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
L, H, C, V, B, T = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "12,12,768,50257,4,64").split(","))
torch.set_num_threads(th)
torch.manual_seed(0)
cfg = GPT2Config(n_layer=L, n_head=H, n_embd=C, vocab_size=V, n_positions=1024,
                 resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
m = GPT2LMHeadModel(cfg)
m.train()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=False)
x = torch.randint(0, V, (B, T))
ts = []
for i in range(steps + 1):
    t0 = time.perf_counter()
    out = m(input_ids=x, labels=x)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    ts.append(time.perf_counter() - t0)
ts = sorted(ts[1:])
med = ts[len(ts) // 2]
print(f"torch {torch.__version__} threads={th}: median {med * 1000:.1f} ms/step => {B * T / med:.1f} tok/s")
