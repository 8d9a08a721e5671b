#!/usr/bin/env python3
"""gpu_table.py -- one table of GPT-2 step timings from one GPU run:
ztrain train (the engine, metrics JSONL + its stdout), bench_gpu's table step
(tests/table_gpt.h, no engine) and bench/gpt2_torch.py (PyTorch), with
tokens/s and MFU computed the same way for all (bench/README.md: 6 x params +
6 x L x C x T FLOPs per token, over the GPU's dense bf16 or fp32 peak).

  python3 bench/gpu_table.py [--bench-gpu FILE] [--torch FILE]
                             [--ztrain LABEL:METRICS.jsonl:STDOUT ...]
                             [--skip N] [--peak-tflops F32,BF16]

--skip N drops the first N steps of each ztrain run (warm-up; default 2);
ztrain's tokens/s is the median of the rest.  Peaks, unless given, come from
bench_gpu's or gpt2_torch.py's output.
"""
import argparse
import json
import re
import statistics


def num(s):
    return float(s.replace(",", ""))


def parse_bench_gpu(path, rows, peaks):
    for line in open(path, errors="replace"):
        m = re.search(r"dense peaks of ([\d.]+) \(fp32\) / ([\d.]+) \(bf16\)", line)
        if m:
            peaks.setdefault("fp32", num(m.group(1)))
            peaks.setdefault("bf16", num(m.group(2)))
        m = re.search(r"shape L=(\d+) H=(\d+) C=(\d+) V=(\d+) B=(\d+) T=(\d+)", line)
        if m:
            shape = tuple(int(v) for v in m.groups())
        m = re.match(r"\s+(fp32|bf16)\s+matmuls:\s+([\d.]+) ms/step\s+([\d.]+) tokens/s.*?"
                     r"peak mem ([\d.]+) GiB\s+params ([\d.]+)M", line)
        if m:
            rows.append(dict(what="bench_gpu table step (no engine)", prec=m.group(1) + " matmuls",
                             ms=num(m.group(2)), tok=num(m.group(3)), mem=num(m.group(4)),
                             P=num(m.group(5)) * 1e6, shape=shape, key=m.group(1)))


def parse_torch(path, rows, peaks):
    shape = None
    for line in open(path, errors="replace"):
        m = re.search(r"shape L=(\d+) H=(\d+) C=(\d+) V=(\d+) B=(\d+) T=(\d+)", line)
        if m:
            shape = tuple(int(v) for v in m.groups())
        m = re.search(r"Llama L=(\d+) NH=(\d+) NKV=\d+ C=(\d+) H=\d+ V=(\d+) B=(\d+) T=(\d+)", line)
        if m:   # llama_gpu_torch.py: attention width NH hd = C
            shape = tuple(int(v) for v in m.groups())
        m = re.match(r"\s+(fp32|bf16) autocast:\s+([\d.]+) ms/step\s+([\d.]+) tokens/s.*?"
                     r"(?:MFU\s+[\d.]+% of (\d+))?\s+peak mem ([\d.]+) GiB\s+params ([\d.]+)M", line)
        if m:
            if m.group(4):
                peaks.setdefault(m.group(1), num(m.group(4)))
            rows.append(dict(what="PyTorch eager (SDPA, fused AdamW)",
                             prec=m.group(1) + (" autocast" if m.group(1) == "bf16" else " (no TF32)"),
                             ms=num(m.group(2)), tok=num(m.group(3)), mem=num(m.group(5)),
                             P=num(m.group(6)) * 1e6, shape=shape, key=m.group(1)))


def parse_ztrain(spec, skip, rows):
    label, metrics, out = spec.split(":", 2)
    P = shape = None
    prec = "fp32"
    B = None
    for line in open(out, errors="replace"):
        m = re.match(r"model: (\d+) parameters \((\d+) layers, (\d+) heads, (\d+) wide, context (\d+), "
                     r"vocab (\d+)\)", line)
        if m:
            P = int(m.group(1))
            L, H, C, T, V = (int(v) for v in m.group(2, 3, 4, 5, 6))
        m = re.match(r"batch: (\d+) global", line)
        if m:
            B = int(m.group(1))
        if line.startswith("precision: bf16"):
            prec = "bf16"
        elif line.startswith("precision: fp16"):
            prec = "fp16"
    tok, ms, mem = [], [], 0
    for line in open(metrics):
        r = json.loads(line)
        if "tokens_per_s" in r and r.get("step", 0) > skip:
            tok.append(r["tokens_per_s"])
            ms.append(r.get("step_ms", 0.0))
        mem = max(mem, r.get("mem_peak_bytes", 0))
    if P is None or not tok:
        rows.append(dict(what=f"ztrain train {label}", prec=prec, missing=True))
        return
    rows.append(dict(what=f"ztrain train {label}", prec=prec + " (bf16 params, fp32 master)"
                     if prec == "bf16" else prec, ms=statistics.median(ms), tok=statistics.median(tok),
                     mem=mem / 2**30, P=P, shape=(L, H, C, V, B, T), key="bf16" if prec != "fp32" else "fp32"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-gpu")
    ap.add_argument("--torch")
    ap.add_argument("--ztrain", action="append", default=[])
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--peak-tflops", default="")
    a = ap.parse_args()
    rows, peaks = [], {}
    if a.peak_tflops:
        peaks["fp32"], peaks["bf16"] = (float(v) for v in a.peak_tflops.split(","))
    for spec in a.ztrain:
        try:
            parse_ztrain(spec, a.skip, rows)
        except OSError as e:
            rows.append(dict(what=f"ztrain train {spec.split(':')[0]}", prec="?", missing=True, why=str(e)))
    for path, fn in ((a.bench_gpu, parse_bench_gpu), (a.torch, parse_torch)):
        if path:
            try:
                fn(path, rows, peaks)
            except OSError:
                pass
    print("| run | precision | L,H,C,V,B,T | ms/step | tokens/s | TFLOP/s | MFU | peak GPU mem |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("missing"):
            print(f"| {r['what']} | {r['prec']} | | | (no result) | | | |")
            continue
        L, H, C, V, B, T = r["shape"] or (0,) * 6
        fpt = 6.0 * r["P"] + 6.0 * L * C * T
        tf = fpt * r["tok"] * 1e-12
        pk = peaks.get(r["key"], 0)
        mfu = f"{100 * tf / pk:.1f}% of {pk:.0f}" if pk else "-"
        print(f"| {r['what']} | {r['prec']} | {L},{H},{C},{V},{B},{T} | {r['ms']:.1f} | {r['tok']:,.0f} | "
              f"{tf:.1f} | {mfu} | {r['mem']:.2f} GiB |")
    print("(peak GPU mem: ztrain = the engine's accounted peak (mem_peak_bytes), bench_gpu = the backend's "
          "allocations, PyTorch = max_memory_allocated)")


if __name__ == "__main__":
    main()
