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
(names matching ATTENTION below: FlashAttention's, cuDNN's SDPA, the
memory-efficient kernels).
"""
import argparse
import json
import math
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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


# kernels (and CPU operators) of scaled_dot_product_attention: FlashAttention
# (flash_fwd_kernel, flash_bwd_*), cuDNN's SDPA (cudnn_generated_*sdpa*,
# *_fprop_* / *_bprop_*), the memory-efficient path (fmha_cutlass*), CPU SDPA
ATTENTION = re.compile(r"flash|fmha|sdpa|scaled_dot_product|attention", re.I)
BACKWARD = re.compile(r"bwd|bprop|backward|dgrad|dq|dkdv|dk_dv", re.I)


def profile_steps(one_step, n, cuda, label, top=20):
    """n steps under torch.profiler: prints the per-kernel table and PROFILE_JSON."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(n):
            one_step()
        if cuda:
            torch.cuda.synchronize()
    rows = {}
    for ev in prof.key_averages():
        dev_kernel = str(getattr(ev, "device_type", "")).endswith("CUDA")
        if cuda != dev_kernel:
            continue
        if cuda:
            us = getattr(ev, "self_device_time_total", None)
            if us is None:
                us = ev.self_cuda_time_total
        else:
            us = ev.self_cpu_time_total
        if us <= 0:
            continue
        r = rows.setdefault(ev.key, [0, 0.0])
        r[0] += ev.count
        r[1] += us
    total = sum(v[1] for v in rows.values()) / 1e3 / n
    kern = []
    for name, (calls, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        att = bool(ATTENTION.search(name))
        kern.append({"name": name[:200], "calls_per_step": calls / n, "ms_per_step": us / 1e3 / n,
                     "attention": att, "pass": ("bwd" if BACKWARD.search(name) else "fwd") if att else None})
    att = [k for k in kern if k["attention"]]
    fwd = sum(k["ms_per_step"] for k in att if k["pass"] == "fwd")
    bwd = sum(k["ms_per_step"] for k in att if k["pass"] == "bwd")
    what = "device kernels" if cuda else "CPU operators (self time)"
    print(f"  profile {label}: torch.profiler over {n} steps: {what} {total:.3f} ms/step, attention "
          f"{fwd + bwd:.3f} ms/step (forward {fwd:.3f}, backward {bwd:.3f}; {len(att)} kernels)")
    print(f"  | {'kernel' if cuda else 'operator'} | calls/step | ms/step | % | attention |")
    print("  |---|---|---|---|---|")
    shown = kern[:top] + [k for k in kern[top:] if k["attention"]]
    for k in shown:
        print(f"  | {k['name'][:90]} | {k['calls_per_step']:g} | {k['ms_per_step']:.3f} | "
              f"{100 * k['ms_per_step'] / total if total else 0:.1f}% | {k['pass'] or ''} |")
    print("PROFILE_JSON " + json.dumps({"label": label, "steps": n, "what": what, "total_ms_per_step": total,
                                        "attention_ms_per_step": fwd + bwd, "attention_fwd_ms_per_step": fwd,
                                        "attention_bwd_ms_per_step": bwd, "kernels": shown}))


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
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    last = [None]

    def one_step():
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            loss = step_model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last[0] = loss.item()   # read back every step, as bench_gpu does

    warm = 2 + (3 if compile_ else 0)
    for i in range(warm + steps):
        if i == warm:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        one_step()
    if cuda:
        torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / steps
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    if prof > 0:
        profile_steps(one_step, prof, cuda, "bf16" if bf16 else "fp32")
    return per, nparams, peak, last[0]


def device_peaks(name, override=""):
    """Dense (fp32, bf16) TFLOP/s of the GPU named name; override "F32,BF16" wins; 0 unknown."""
    if override:
        return tuple(float(v) for v in override.split(","))
    if "H100" in name and "PCIe" in name:
        return 51.2, 756.0
    if "H100" in name or "H200" in name:
        return 66.9, 989.4
    if "A100" in name:
        return 19.5, 312.0
    return 0.0, 0.0


def report(bf16, per, P, peak, loss, tokens, fpt, pk):
    """One result line (bench/gpu_table.py parses it): tokens per step, fpt FLOPs per token."""
    tok = tokens / per
    mfu = f"  MFU {100.0 * fpt * tok * 1e-12 / pk:5.1f}% of {pk:.0f}" if pk > 0 else ""
    print(f"  {'bf16' if bf16 else 'fp32'} autocast: {per * 1e3:8.1f} ms/step  {tok:9.0f} tokens/s  "
          f"{fpt * tok * 1e-12:7.1f} TFLOP/s{mfu}  peak mem {peak / 2**30:.2f} GiB  "
          f"params {P / 1e6:.1f}M  loss {loss:.4f}")


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
