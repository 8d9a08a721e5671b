#!/usr/bin/env python3
"""llama_gpu_torch.py -- the PyTorch baseline for ztrain's Llama step on a GPU.

The model ztrain trains with --arch llama (libtrain/llama.c): RMSNorm
(eps 1e-5) before attention and MLP, rotary embeddings (theta 10000, the
rotate-half layout), grouped-query causal attention (SDPA), SwiGLU MLP, a
final RMSNorm and an LM head tied to the embedding; softmax cross-entropy on
random tokens, global-norm clipping to 1.0, fused AdamW (lr 3e-4, betas
0.9/0.95, weight decay 0.1).  Prints, for fp32 (TF32 off) and bf16
autocast: ms/step, tokens/s, model TFLOP/s, MFU (6 x params + 6 x L x
(NH hd) x T FLOPs per token, as bench/README.md) and peak GPU memory.

  python3 bench/llama_gpu_torch.py --shape L,NH,NKV,C,H,V,B,T [--steps N]
                               [--compile] [--only bf16|fp32] [--untied]
                               [--lora R] [--peak-tflops F32,BF16] [--profile N]
SmolLM-135M: 30,9,3,576,1536,49152,B,T.  --untied: an LM head of its own
(Llama 3 8B).  --lora R: the base (every weight, kept in bf16 with bf16
autocast) frozen, adapters of rank R (alpha 16, fp32, A uniform, B zero) on
every linear of the blocks (PEFT's all-linear, as ztrain --lora-targets
all-linear); AdamW and clipping over the adapters only.  The reported
FLOPs stay 6 x all params + 6 x L x C x T (gpu_table.py's formula);
run.sh measure computes its own for LoRA steps.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

# the same step, timed loop, profile table, peaks and result line as the GPT-2 baseline
from torch_common import device_peaks, make_step, profile_steps, report, time_steps


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Block(nn.Module):
    def __init__(self, C, NH, NKV, H):
        super().__init__()
        self.NH, self.NKV, self.hd = NH, NKV, C // NH
        self.ln1 = RMSNorm(C)
        self.q = nn.Linear(C, NH * self.hd, bias=False)
        self.k = nn.Linear(C, NKV * self.hd, bias=False)
        self.v = nn.Linear(C, NKV * self.hd, bias=False)
        self.o = nn.Linear(NH * self.hd, C, bias=False)
        self.ln2 = RMSNorm(C)
        self.gate = nn.Linear(C, H, bias=False)
        self.up = nn.Linear(C, H, bias=False)
        self.down = nn.Linear(H, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.ln1(x)
        q = self.q(h).view(B, T, self.NH, self.hd).transpose(1, 2)
        k = self.k(h).view(B, T, self.NKV, self.hd).transpose(1, 2)
        v = self.v(h).view(B, T, self.NKV, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.NKV != self.NH)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, self.NH * self.hd))
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LoRALinear(nn.Module):
    """y = base(x) + (alpha / r) x A^T B^T, the base frozen."""
    def __init__(self, base, r, alpha=16.0):
        super().__init__()
        self.base = base
        base.weight.requires_grad_(False)
        fin, fout = base.in_features, base.out_features
        dev = base.weight.device
        self.A = nn.Parameter(torch.empty(r, fin, device=dev).uniform_(-fin ** -0.5, fin ** -0.5))
        self.B = nn.Parameter(torch.zeros(fout, r, device=dev))
        self.s = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.A.t().to(x.dtype)) @ self.B.t().to(x.dtype) * self.s


def add_lora(model, r):
    for p in model.parameters():
        p.requires_grad_(False)
    for b in model.blocks:
        for name in ("q", "k", "v", "o", "gate", "up", "down"):
            setattr(b, name, LoRALinear(getattr(b, name), r))


class Llama(nn.Module):
    def __init__(self, L, NH, NKV, C, H, V, T, untied=False):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.head = nn.Linear(C, V, bias=False) if untied else None
        self.blocks = nn.ModuleList(Block(C, NH, NKV, H) for _ in range(L))
        self.lnf = RMSNorm(C)
        hd = C // NH
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.uniform_(p, -0.02, 0.02)

    def forward(self, idx, tgt):
        T = idx.shape[1]
        x = self.wte(idx)
        cos, sin = self.cos[:, :, :T], self.sin[:, :, :T]
        for b in self.blocks:
            x = b(x, cos, sin)
        w = self.head.weight if self.head is not None else self.wte.weight   # tied embedding by default
        logits = self.lnf(x) @ w.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def run(shape, steps, bf16, compile_, dev="cuda", untied=False, lora=0, prof=0):
    L, NH, NKV, C, H, V, B, T = shape
    torch.manual_seed(0)
    cuda = dev == "cuda"
    with torch.device(dev):   # built on the device: an 8B model is not initialized on the host
        model = Llama(L, NH, NKV, C, H, V, T, untied)
    nparams = sum(p.numel() for p in model.parameters())
    if lora:
        if bf16:
            model.to(torch.bfloat16)   # the frozen base in bf16 (ztrain --lora-base "": the compute dtype)
        add_lora(model, lora)
    train = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(train, lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, fused=cuda)
    step_model = torch.compile(model) if compile_ else model
    idx = torch.randint(0, V, (B, T), device=dev)
    tgt = torch.randint(0, V, (B, T), device=dev)
    one_step, last = make_step(step_model, train, opt, idx, tgt, dev, bf16)
    per, peak = time_steps(one_step, steps, compile_, cuda)
    loss_v = last[0]
    if prof > 0:
        profile_steps(one_step, prof, cuda, "bf16" if bf16 else "fp32")
    del model, opt, step_model, one_step
    if cuda:
        torch.cuda.empty_cache()
    return per, nparams, peak, loss_v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="30,9,3,576,1536,49152,8,2048")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--only", choices=["bf16", "fp32"], default=None)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--lora", type=int, default=0)
    ap.add_argument("--peak-tflops", default="")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    ap.add_argument("--profile", type=int, default=0, help="N steps under torch.profiler after the timed ones")
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.split(",")]
    L, NH, NKV, C, H, V, B, T = shape
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    p32, p16 = device_peaks(name, a.peak_tflops)
    print(f"PyTorch {torch.__version__} on {name}; Llama L={L} NH={NH} NKV={NKV} C={C} H={H} V={V} "
          f"B={B} T={T}{' untied' if a.untied else ''}{f' LoRA r={a.lora} all-linear' if a.lora else ''}"
          f"{' (torch.compile)' if a.compile else ''}")
    modes = [m for m in (False, True) if a.only is None or a.only == ("bf16" if m else "fp32")]
    for bf16 in modes:
        try:
            per, P, peak, loss = run(shape, a.steps, bf16, a.compile, a.device, a.untied, a.lora, a.profile)
        except torch.cuda.OutOfMemoryError:
            print(f"  {'bf16' if bf16 else 'fp32'} autocast: out of GPU memory")
            torch.cuda.empty_cache()
            continue
        report(bf16, per, P, peak, loss, B * T, 6.0 * P + 6.0 * L * C * T, p16 if bf16 else p32)


if __name__ == "__main__":
    main()
