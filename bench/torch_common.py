"""torch_common.py -- what the PyTorch GPU baselines share (bench/gpt2_torch.py,
bench/llama_gpu_torch.py import it from beside them, so scripts/gpu-bundle.sh
copies it with them): one training step, the timed loop, the torch.profiler
table of --profile N (gpt2_torch.py's docstring), the GPUs' peaks and the
result line.
"""
import json
import re
import time

import torch


def make_step(step_model, params, opt, idx, tgt, dev, bf16):
    """one_step() (forward under bf16 autocast or not, backward, clipping of
    params to global norm 1.0, opt's step) and last, last[0] its loss."""
    last = [None]

    def one_step():
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            loss = step_model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        last[0] = loss.item()   # read back every step, as ztrain and bench_gpu do

    return one_step, last


def time_steps(one_step, steps, compile_, cuda):
    """2 warm-up steps (5 with torch.compile), then steps timed: (seconds
    per step, the peak GPU memory in bytes since the call, 0 on the CPU)."""
    if cuda:
        torch.cuda.reset_peak_memory_stats()
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
    return per, torch.cuda.max_memory_allocated() if cuda else 0


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
