#!/usr/bin/env python3
"""gpt2_torch.py -- the PyTorch baseline for bench/bench_gpu's model step.

Same model and step as tests/table_gpt.h: pre-LayerNorm GPT-2 blocks with a
tied embedding, softmax cross-entropy on random tokens, global-norm clipping
to 1.0, AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on every parameter).
Prints ms/step, tokens/s, model TFLOP/s, MFU (6 x params + 6 x L x C x T
FLOPs per token, as bench/README.md) and peak GPU memory, for fp32 (TF32
off, like ztrain's fp32) and bf16 autocast.

  python3 bench/gpt2_torch.py [--shape L,H,C,V,B,T] [--steps N] [--compile]
                              [--only bf16|fp32] [--peak-tflops F32,BF16]
                              [--device cuda|cpu] [--profile N]

--profile N: after the timed steps, N more under torch.profiler: a table of
the step's kernels (device time per step, by kernel name; on the CPU, the
operators' own time) and one line `PROFILE_JSON {...}` (bench/measure_json.py
reads it) with the attention kernels' time per step, forward and backward
(names matching ATTENTION in bench/torch_common.py: FlashAttention's,
cuDNN's SDPA, the memory-efficient kernels).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

# the step, timed loop, profile table, peaks and result line (shared with llama_gpu_torch.py)
from torch_common import device_peaks, make_step, profile_steps, report, time_steps


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcp = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fcp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, V, T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.uniform_(p, -0.02, 0.02)

    def forward(self, idx, tgt):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()   # tied embedding
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def run(shape, steps, bf16, compile_, dev="cuda", prof=0):
    L, H, C, V, B, T = shape
    torch.manual_seed(0)
    cuda = dev == "cuda"
    model = GPT(L, H, C, V, T).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, fused=cuda)
    step_model = torch.compile(model) if compile_ else model
    idx = torch.randint(0, V, (B, T), device=dev)
    tgt = torch.randint(0, V, (B, T), device=dev)
    one_step, last = make_step(step_model, list(model.parameters()), opt, idx, tgt, dev, bf16)
    per, peak = time_steps(one_step, steps, compile_, cuda)
    if prof > 0:
        profile_steps(one_step, prof, cuda, "bf16" if bf16 else "fp32")
    return per, nparams, peak, last[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="12,12,768,50304,8,1024")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--only", choices=["bf16", "fp32"], default=None)
    ap.add_argument("--peak-tflops", default="")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    ap.add_argument("--profile", type=int, default=0, help="N steps under torch.profiler after the timed ones")
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.split(",")]
    L, H, C, V, B, T = shape
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    p32, p16 = device_peaks(name, a.peak_tflops)
    print(f"PyTorch {torch.__version__} on {name}; shape L={L} H={H} C={C} V={V} B={B} T={T}"
          f"{' (torch.compile)' if a.compile else ''}")
    for bf16 in (False, True):
        if a.only and a.only != ("bf16" if bf16 else "fp32"):
            continue
        per, P, peak, loss = run(shape, a.steps, bf16, a.compile, a.device, a.profile)
        report(bf16, per, P, peak, loss, B * T, 6.0 * P + 6.0 * L * C * T, p16 if bf16 else p32)


if __name__ == "__main__":
    main()
