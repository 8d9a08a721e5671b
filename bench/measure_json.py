#!/usr/bin/env python3
"""measure_json.py -- the figures of scripts/gpu-measure.sh (run.sh measure)
in one JSON file, and a table on stdout.

  python3 bench/measure_json.py --work DIR --out measure.json [--budget S]
                                [--steps N] [--det-steps N] [--commit C]
                                [--backend X] [--peak-tflops BF16] [--skip N]

DIR is the script's work folder: device/start.csv, end.csv (nvidia-smi),
tests/TAG.{out,rc,s,skip}, shape/NN-NAME/{spec, estimate.*, costmodel.*,
costmodel_ztrain.*, train.*, metrics.jsonl, train_det.*, metrics_det.jsonl,
smi_peak.txt, torch_eager.*, torch_compile.*}, sanitizer/TAG.*.  Every
figure is computed from those files; a section that did not run is
{"skipped": REASON}, one that failed carries its exit status.

ztrain runs twice per shape: "ztrain" as the build runs (cuDNN's fused
attention in a build with cuDNN; "attention" is the path its start-up line
names) and "ztrain_det" with ZT_CUDA_DETERMINISTIC=1 (ztrain's attention
kernels), with "det_over_default" = its ms/step over the first's.  The cost
model: "predicted_ms" when the step has a time, else
"predicted_without_attention_ms" with "uncalibrated" (the classes left out);
"costmodel_ztrain" the same for ztrain's kernels, its ratio to ztrain_det.
PyTorch eager carries "profile" (bench/gpt2_torch.py --profile: the kernels'
and the attention kernels' ms per step, the top kernels).

Per shape: ztrain's ms/step and tokens/s are the medians over the steps after
the first --skip (default 2: steps 3..N); FLOPs per token as bench/README.md,
6 x params + 6 x L x C x T (C the attention width), for a LoRA step 4 x params
(forward and the input gradient through the frozen base) + 6 x adapter params
+ 6 x L x C x T; TFLOP/s = FLOPs per token x tokens/s; MFU = TFLOP/s over the
device's dense bf16 peak (989.4 H100 SXM / H200, 756 H100 PCIe, 312 A100;
--peak-tflops overrides; unknown: null).  The same FLOPs per token for the
PyTorch rows of the shape.
"""
import argparse
import glob
import json
import os
import re
import statistics

G = 2.0 ** 30


def read(path, default=None):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def section(d, tag):
    """{"rc", "seconds", "limit"} or {"skipped": why} or None (not reached)."""
    skip = read(os.path.join(d, tag + ".skip"))
    if skip is not None:
        return {"skipped": skip.strip()}
    rc = read(os.path.join(d, tag + ".rc"))
    if rc is None:
        return None
    r = {"rc": int(rc.strip() or -1), "seconds": int((read(os.path.join(d, tag + ".s"), "0").strip() or 0))}
    lim = read(os.path.join(d, tag + ".limit"))
    if lim:
        r["timeout_s"] = int(lim.strip())
    if r["rc"] in (124, 137):
        r["timed_out"] = True
    return r


def tap_counts(text):
    return {"ok": len(re.findall(r"^ok ", text, re.M)), "not_ok": len(re.findall(r"^not ok ", text, re.M)),
            "skips": len(re.findall(r"# SKIP", text, re.I | re.M))}


def device_peak(name, override):
    if override:
        return float(override)
    if "H100" in name and "PCIe" in name:
        return 756.0
    if "H100" in name or "H200" in name:
        return 989.4
    if "A100" in name:
        return 312.0
    return None


def smi_fields(path):
    text = read(path)
    if not text or not text.strip():
        return None
    keys = ["name", "driver", "memory_total", "clocks_sm", "clocks_max_sm", "clocks_mem", "clocks_max_mem",
            "power_draw", "power_limit", "temperature_c", "pstate"]
    vals = [v.strip() for v in text.strip().splitlines()[0].split(",")]
    r = dict(zip(keys, vals))
    reasons = read(path + ".reasons")
    if reasons and reasons.strip():
        r["clock_event_reasons"] = reasons.strip().splitlines()[0]
    return r


def first_json(text):
    i = text.find("{")
    while i >= 0:
        try:
            return json.JSONDecoder().raw_decode(text[i:])[0]
        except ValueError:
            i = text.find("{", i + 1)
    return None


def parse_torch(text):
    m = re.search(r"bf16 autocast:\s+([\d.]+) ms/step\s+([\d.]+) tokens/s.*?peak mem ([\d.]+) GiB\s+"
                  r"params ([\d.]+)M", text or "")
    if not m:
        return None
    r = {"ms_per_step": float(m.group(1)), "tokens_per_s": float(m.group(2)),
         "peak_mem_bytes": round(float(m.group(3)) * G), "params": round(float(m.group(4)) * 1e6)}
    return r


def shape_record(d, skip, peak):
    spec = (read(os.path.join(d, "spec"), "") or "").strip()
    words = spec.split()
    name, arch, dims = (words + ["?", "?", ""])[:3]
    extra = words[3:]
    try:
        L, NH, NKV, C, H, V, B, T = (int(v) for v in dims.split(","))
    except ValueError:
        return {"name": name, "spec": spec, "error": "bad shape"}
    rec = {"name": name, "arch": arch, "L": L, "NH": NH, "NKV": NKV, "C": C, "H": H, "V": V, "B": B, "T": T,
           "args": " ".join(extra), "stage": 0, "precision": "bf16", "tokens_per_step": B * T}
    # the planner (ztrain estimate --json)
    est = section(d, "estimate")
    rec["estimate"] = est
    params = adapter = None
    if est and "rc" in est and est["rc"] == 0:
        e = first_json(read(os.path.join(d, "estimate.out"), ""))
        if e:
            params = e.get("model", {}).get("num_params")
            adapter = (e.get("lora") or {}).get("adapter_params")
            est["predicted_device_peak_bytes"] = e.get("device", {}).get("peak_bytes")
            est["predicted_host_peak_bytes"] = e.get("host", {}).get("peak_bytes")
    rec["params"] = params
    rec["lora_adapter_params"] = adapter
    fpt = None
    if params:
        att = 6.0 * L * C * T
        fpt = (4.0 * params + 6.0 * adapter + att) if adapter else (6.0 * params + att)
    rec["flops_per_token"] = fpt
    rec["flops_formula"] = ("4 x params + 6 x adapter params + 6 x L x C x T (LoRA)" if adapter
                            else "6 x params + 6 x L x C x T")

    def figures(ms, tok):
        r = {"ms_per_step": ms, "tokens_per_s": tok}
        if fpt and tok:
            r["tflops"] = fpt * tok * 1e-12
            r["mfu"] = r["tflops"] / peak if peak else None
        return r

    tr = ztrain_run(d, "train", "metrics.jsonl", skip, est, figures)
    rec["ztrain"] = tr
    det = ztrain_run(d, "train_det", "metrics_det.jsonl", skip, est, figures)
    rec["ztrain_det"] = det
    if det and tr and det.get("ms_per_step") and tr.get("ms_per_step"):
        det["det_over_default"] = det["ms_per_step"] / tr["ms_per_step"]
    # the cost model: the build's attention path, then ztrain's kernels
    for tag, against in (("costmodel", tr), ("costmodel_ztrain", det)):
        cm = section(d, tag)
        rec[tag] = cm
        if cm and cm.get("rc") == 0:
            text = read(os.path.join(d, tag + ".out"), "") or ""
            m = re.search(r"^  attention: (.*)$", text, re.M)
            if m:
                cm["attention"] = m.group(1)
            m = re.search(r"^  predicted step ([\d.]+) ms", text, re.M)
            if m:
                cm["predicted_ms"] = float(m.group(1))
                zms = (against or {}).get("ms_per_step")
                if zms:
                    cm["predicted_over_measured"] = cm["predicted_ms"] / zms
            m = re.search(r"^  predicted step without attention ([\d.]+) ms", text, re.M)
            if m:
                cm["predicted_without_attention_ms"] = float(m.group(1))
            m = re.search(r"^  UNCALIBRATED: (.*?) \(", text, re.M)
            if m:
                cm["uncalibrated"] = m.group(1)
    # PyTorch
    for tag in ("torch_eager", "torch_compile"):
        t = section(d, tag)
        if t and "rc" in t:
            text = read(os.path.join(d, tag + ".out"), "") or ""
            m = re.search(r"^PyTorch (\S+) on (.*?);", text, re.M)
            if m:
                t["torch_version"], t["device"] = m.group(1), m.group(2)
            if "out of GPU memory" in text:
                t["out_of_memory"] = True
            p = parse_torch(text)
            if p:
                t.update(p)
                t.update(figures(p["ms_per_step"], p["tokens_per_s"]))
                zt = (tr or {}).get("tokens_per_s")
                if zt:
                    t["ztrain_speed_ratio"] = zt / p["tokens_per_s"]
            m = re.search(r"^PROFILE_JSON (.*)$", text, re.M)
            if m:
                try:
                    pj = json.loads(m.group(1))
                    pj["kernels"] = pj.get("kernels", [])[:12] + [k for k in pj.get("kernels", [])[12:]
                                                                  if k.get("attention")]
                    t["profile"] = pj
                except ValueError:
                    t["profile"] = {"error": "PROFILE_JSON does not parse"}
        rec[tag] = t
    return rec


def ztrain_run(d, tag, metrics, skip, est, figures):
    """One ztrain train section: medians of the metrics after `skip` steps, peaks, the attention path."""
    tr = section(d, tag)
    if tr and "rc" in tr:
        ms, tok, tfl, mem = [], [], [], 0
        for line in (read(os.path.join(d, metrics), "") or "").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "tokens_per_s" in r and r.get("step", 0) > skip:
                ms.append(r.get("step_ms", 0.0))
                tok.append(r["tokens_per_s"])
                if "tflops" in r:
                    tfl.append(r["tflops"])
            mem = max(mem, r.get("mem_peak_bytes", 0))
        tr["steps_timed"] = len(ms)
        if ms:
            tr.update(figures(statistics.median(ms), statistics.median(tok)))
        # the run's own TFLOP/s (its metrics: the library's FLOPs a token x
        # its tokens/s), next to this script's
        if tfl:
            tr["reported_tflops"] = statistics.median(tfl)
        tr["measured_peak_bytes"] = mem or None
        out = read(os.path.join(d, tag + ".out"), "") or ""
        m = re.search(r"attention: (.*)$", out, re.M)
        if m:
            tr["attention"] = m.group(1).strip()
        m = re.search(r"^memory: predicted peak ([\d.]+) (KiB|MiB|GiB)", out, re.M)
        if m:
            tr["run_predicted_peak_bytes"] = round(float(m.group(1)) * {"KiB": 2**10, "MiB": 2**20,
                                                                         "GiB": 2**30}[m.group(2)])
        m = re.search(r"^model: (\d+) parameters", out, re.M)
        if m:
            tr["model_params"] = int(m.group(1))
        if tag == "train":
            smi = [float(v) for v in (read(os.path.join(d, "smi_peak.txt"), "") or "").split()
                   if re.match(r"^[\d.]+$", v)]
            tr["nvidia_smi_peak_bytes"] = round(max(smi) * 2**20) if smi else None
        err = [l for l in out.splitlines() if l.startswith("ztrain: error")]
        if err:
            tr["error"] = err[0][:300]
        pred = (est or {}).get("predicted_device_peak_bytes")
        if pred and mem:
            tr["measured_over_predicted_peak"] = mem / pred
    return tr


def fmt(v, f="{:.1f}", none="-"):
    return none if v is None else f.format(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--det-steps", type=int, default=0)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--commit", default="?")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--peak-tflops", default="")
    a = ap.parse_args()
    W = a.work
    dev = smi_fields(os.path.join(W, "device", "start.csv"))
    name = dev["name"] if dev else "none (no nvidia-smi)"
    peak = device_peak(name, a.peak_tflops)
    J = {"what": "ztrain run.sh measure (scripts/gpu-measure.sh)", "date": (read(os.path.join(W, "date"), "") or "").strip(),
         "commit": a.commit, "backend": a.backend, "budget_s": a.budget, "steps": a.steps,
         "det_steps": a.det_steps,
         "timed_steps": f"median of steps {a.skip + 1}..{a.steps}",
         "device": {"name": name, "start": dev, "end": smi_fields(os.path.join(W, "device", "end.csv")),
                    "bf16_dense_peak_tflops": peak},
         "tests": {}, "shapes": [], "sanitizer": {}}
    for tag in ("test_cuda", "engine_s0"):
        s = section(os.path.join(W, "tests"), tag)
        if s and "rc" in s:
            s.update(tap_counts(read(os.path.join(W, "tests", tag + ".out"), "") or ""))
        J["tests"][tag] = s
    for d in sorted(glob.glob(os.path.join(W, "shape", "*"))):
        J["shapes"].append(shape_record(d, a.skip, peak))
    for tag in ("memcheck_train", "memcheck_test_cuda"):
        s = section(os.path.join(W, "sanitizer"), tag)
        if s and "rc" in s:
            text = read(os.path.join(W, "sanitizer", tag + ".out"), "") or ""
            m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
            s["errors"] = sum(int(v) for v in m) if m else None
            s["error_summaries"] = len(m)
        J["sanitizer"][tag] = s
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(J, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)

    # the table
    print(f"device {name}; commit {a.commit}; backend {a.backend}; MFU against "
          f"{fmt(peak, '{:.1f} TFLOP/s', 'no known peak')} (bf16 dense); ms/step and tokens/s: {J['timed_steps']}")
    for tag, s in J["tests"].items():
        if s is None:
            print(f"{tag}: not reached")
        elif "skipped" in s:
            print(f"{tag}: skipped: {s['skipped']}")
        else:
            print(f"{tag}: {s['ok']} ok, {s['not_ok']} not ok, {s['skips']} skipped (exit {s['rc']}, {s['seconds']} s)")
    print("| shape | run | ms/step | tokens/s | TFLOP/s | MFU | peak mem GiB | predicted peak GiB | x predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in J["shapes"]:
        n = r.get("name")
        z = r.get("ztrain") or {}
        pred = (r.get("estimate") or {}).get("predicted_device_peak_bytes")
        zd = r.get("ztrain_det") or {}
        rows = [("ztrain", z, z.get("measured_peak_bytes")),
                ("ztrain ZT_CUDA_DETERMINISTIC=1", zd, zd.get("measured_peak_bytes"))]
        for tag in ("torch_eager", "torch_compile"):
            t = r.get(tag) or {}
            rows.append((tag.replace("_", " "), t, t.get("peak_mem_bytes")))
        for label, t, mem in rows:
            if "skipped" in t:
                print(f"| {n} | {label} | skipped: {t['skipped'][:60]} | | | | | | |")
                continue
            if "ms_per_step" not in t:
                why = f"exit {t['rc']}" if "rc" in t else "not reached"
                print(f"| {n} | {label} | ({why}) | | | | | | |")
                continue
            mfu = t.get("mfu")
            print(f"| {n} | {label} | {t['ms_per_step']:.1f} | {t['tokens_per_s']:,.0f} | {fmt(t.get('tflops'))} | "
                  f"{fmt(None if mfu is None else 100 * mfu, '{:.1f}%')} | {fmt(None if mem is None else mem / G, '{:.2f}')} | "
                  f"{fmt(None if label != 'ztrain' or not pred else pred / G, '{:.2f}')} | "
                  f"{fmt(z.get('measured_over_predicted_peak') if label == 'ztrain' else None, '{:.3f}')} |")
        for tag, label in (("costmodel", "cost model"), ("costmodel_ztrain", "cost model, ztrain's attention")):
            cm = r.get(tag) or {}
            if "predicted_ms" in cm:
                print(f"| {n} | {label} | {cm['predicted_ms']:.1f} predicted | "
                      f"x{fmt(cm.get('predicted_over_measured'), '{:.3f}')} of measured | | | | | |")
            elif "predicted_without_attention_ms" in cm:
                print(f"| {n} | {label} | {cm['predicted_without_attention_ms']:.1f} without attention | "
                      f"uncalibrated: {cm.get('uncalibrated', '?')} | | | | | |")
            elif "skipped" in cm:
                print(f"| {n} | {label} | skipped: {cm['skipped'][:60]} | | | | | | |")
        pr = (r.get("torch_eager") or {}).get("profile") or {}
        if "attention_ms_per_step" in pr:
            print(f"| {n} | torch eager profile | {pr['attention_ms_per_step']:.2f} attention of "
                  f"{pr['total_ms_per_step']:.1f} kernels | fwd {pr['attention_fwd_ms_per_step']:.2f}, "
                  f"bwd {pr['attention_bwd_ms_per_step']:.2f} | | | | | |")
    for tag, s in J["sanitizer"].items():
        if s is None:
            print(f"{tag}: not reached")
        elif "skipped" in s:
            print(f"{tag}: skipped: {s['skipped']}")
        else:
            print(f"{tag}: {s['errors']} errors (exit {s['rc']}, {s['seconds']} s)")


if __name__ == "__main__":
    main()
