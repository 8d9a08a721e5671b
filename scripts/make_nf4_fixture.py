#!/usr/bin/env python3
"""make_nf4_fixture.py -- NF4 known-answer vectors from bitsandbytes itself.

    make_nf4_fixture.py OUT            the committed fixture
                                       (tests/fixtures/nf4/known.bin; run once
                                       with /opt/hfref/bin/python, so `make
                                       check` needs no Python)
    make_nf4_fixture.py --live OUT     the reference test's cases
                                       (tests/nf4_bnb.sh): random weights of
                                       many shapes, one large enough for
                                       torch's two-thread mean, and the
                                       decoder linear weights of
                                       tests/fixtures/hf/{llama,qwen2} as
                                       transformers' BitsAndBytesConfig(
                                       load_in_4bit=True, bnb_4bit_quant_type=
                                       "nf4"[, bnb_4bit_use_double_quant=True])
                                       quantizes them on the CPU with dtype
                                       float32 and bfloat16

Each case is a weight quantized by bitsandbytes.functional.quantize_4bit(W,
blocksize=64, quant_type="nf4", compress_statistics=dq) on the CPU (or read
from the model transformers loaded), and dequantized with dequantize_4bit to
fp32 and bf16.  Format (little-endian):
  "ZTNF4KA\\0", u32 version 2, u32 ncases, u32 simd_floats (torch's CPU
  capability: 8 AVX2, 16 AVX512), f32 nf4[16], f32 dyn[256]
  per case: char name[32], u32 dtype (0 fp32, 1 bf16), u32 dq, u32 rows,
  u32 cols, u32 has_deq, u32 torch_threads (of the mean), input (n f32 or n
  bf16 bits), codes (ceil(n/2)), dq ? qabsmax (nb u8), absmax2 (ceil(nb/256)
  f32), offset f32 : absmax (nb f32), has_deq ? deq_f32 (n), deq_bf16 (n u16)
with n = rows * cols, nb = ceil(n / 64).  tests/test_nf4 reads it.
"""
import struct
import sys

import numpy as np
import torch
import bitsandbytes
from bitsandbytes.functional import (create_dynamic_map, dequantize_4bit,
                                     get_4bit_type, quantize_4bit)

torch.set_num_threads(1)
rng = np.random.default_rng(20240527)
f32 = np.float32


def normal(rows, cols, scale):
    return (rng.standard_normal((rows, cols)) * scale).astype(f32)


def ties():
    """block-wise values exactly on and next to the fp32 code midpoints"""
    code = get_4bit_type("nf4", device="cpu")
    mids = ((code[:-1] + code[1:]) / 2).numpy().astype(f32)
    vals = []
    for m in mids:
        vals += [m, np.nextafter(m, f32(-2)), np.nextafter(m, f32(2)), -m]
    vals = np.array(vals, dtype=f32)
    w = np.zeros((2, 64), dtype=f32)
    w[0, 0] = 1.0                       # absmax 1: v = x * (1 / 1) = x
    w[0, 1:61] = vals[:60]
    w[1, 0] = -1.0
    w[1, 1:1 + len(vals) - 60] = vals[60:]
    return w


def fixed_cases():
    cases = []
    cases.append(("f32 8x64 full blocks", 0, 0, normal(8, 64, 0.02), 1))
    cases.append(("f32 5x37 tail odd", 0, 0, normal(5, 37, 1.5), 1))
    cases.append(("bf16 3x21 tail odd", 1, 0, normal(3, 21, 0.1), 1))
    cases.append(("f32 1x1", 0, 0, np.array([[-0.75]], dtype=f32), 1))
    z = normal(4, 70, 0.3)
    z[0, :] = 0.0
    z[1, :58] = 0.0                         # block 1 = elements 64..127: all zero
    z[3, -24:] = 0.0                        # the tail block (280 % 64 = 24): zero
    z[3, -30:-24] = -0.0
    cases.append(("f32 4x70 zero blocks", 0, 0, z, 1))
    cases.append(("f32 2x64 midpoints", 0, 0, ties(), 1))
    cases.append(("f32 3x100 wide range", 0, 0,
                  (normal(3, 100, 1.0) * np.exp(rng.uniform(-30, 30, (3, 100)))).astype(f32), 1))
    cases.append(("dq f32 9x50", 0, 1, normal(9, 50, 0.05), 1))
    cases.append(("dq bf16 7x33", 1, 1, normal(7, 33, 0.5), 1))
    big = normal(257, 64, 0.02)
    big[:, 0] *= np.exp(rng.uniform(-2, 2, 257)).astype(f32)
    cases.append(("dq f32 257x64-10 two absmax2", 0, 1, big.reshape(-1)[:257 * 64 - 10].reshape(1, -1), 0))
    same = np.tile(np.linspace(-1, 1, 64, dtype=f32), (260, 1))   # every absmax equal: absmax - mean = 0
    cases.append(("dq bf16 260x64 equal absmax", 1, 1, same, 0))
    return cases


def write(path, cases, simd):
    out = bytearray(b"ZTNF4KA\0")
    out += struct.pack("<III", 2, len(cases), simd)
    out += get_4bit_type("nf4", device="cpu").numpy().astype("<f4").tobytes()
    out += create_dynamic_map().numpy().astype("<f4").tobytes()
    for name, dtype, dq, t, q, s, threads, has_deq in cases:
        rows, cols = t.shape
        nm = name.encode()[:31]
        out += nm + b"\0" * (32 - len(nm))
        out += struct.pack("<IIIIII", dtype, dq, rows, cols, has_deq, threads)
        out += (t.view(torch.int16).numpy().astype("<i2").tobytes() if dtype == 1
                else t.numpy().astype("<f4").tobytes())
        out += q.view(torch.uint8).numpy().reshape(-1).tobytes()
        if dq:
            out += s.absmax.numpy().astype("u1").tobytes()
            out += s.state2.absmax.numpy().astype("<f4").tobytes()
            out += struct.pack("<f", s.offset.item())
        else:
            out += s.absmax.numpy().astype("<f4").tobytes()
        if has_deq:
            dt = s.dtype
            s.dtype = torch.float32
            out += dequantize_4bit(q, s).numpy().astype("<f4").tobytes()
            s.dtype = torch.bfloat16
            out += dequantize_4bit(q, s).view(torch.int16).numpy().astype("<i2").tobytes()
            s.dtype = dt
    open(path, "wb").write(bytes(out))
    return len(out)


def quantized(name, dtype, dq, w, has_deq, threads=1):
    torch.set_num_threads(threads)
    t = torch.from_numpy(np.ascontiguousarray(w))
    if dtype == 1:
        t = t.bfloat16()
    q, s = quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=bool(dq))
    torch.set_num_threads(1)
    return (name, dtype, dq, t, q, s, threads, has_deq)


def live_cases():
    cases = []
    for k in range(24):
        rows, cols = int(rng.integers(1, 90)), int(rng.integers(1, 400))
        w = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-6, 3))).astype(f32)
        if k % 4 == 0:
            w.reshape(-1)[:int(rng.integers(0, rows * cols))] = 0.0
        cases.append(quantized("random %dx%d" % (rows, cols), k % 3 == 2, k % 2, w, 1))
    big = normal(2048, 1100, 0.02)      # 35200 absmax >= 32768: torch's two-pass mean
    cases.append(quantized("dq f32 2048x1100 2 threads", 0, 1, big, 0, threads=2))
    cases.append(quantized("dq f32 2048x1100 1 thread", 0, 1, big, 0, threads=1))
    try:
        import transformers
    except ImportError:
        return cases, 0
    import os
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf")
    from safetensors import safe_open
    import glob
    nt = 0
    for arch in ("llama", "qwen2"):
        fix = os.path.join(root, arch)
        weights = {}
        for f in glob.glob(fix + "/*.safetensors"):
            with safe_open(f, "pt") as st:
                for key in st.keys():
                    weights[key] = st.get_tensor(key)
        for dt in (torch.float32, torch.bfloat16):
            for dq in (False, True):
                cfg = transformers.BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=dq,
                    bnb_4bit_compute_dtype=dt)
                m = transformers.AutoModelForCausalLM.from_pretrained(
                    fix, quantization_config=cfg, dtype=dt, device_map="cpu")
                for pname, p in m.named_parameters():
                    qs = getattr(p, "quant_state", None)
                    if qs is None:
                        continue
                    w = weights[pname].to(dt)   # the checkpoint weight in the model dtype
                    short = pname.replace("model.layers.", "").replace(".weight", "")
                    cases.append(("%s %s %s%s" % (arch, "bf16" if dt == torch.bfloat16 else "f32",
                                                   "dq " if dq else "", short),
                                  int(dt == torch.bfloat16), int(dq), w, p.data, qs, 1, 1))
                    nt += 1
    return cases, nt


if __name__ == "__main__":
    torch.set_num_threads(1)
    simd = 16 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 8
    if sys.argv[1] == "--live":
        import os
        seed = int(os.environ.get("ZT_NF4_SEED") or np.random.SeedSequence().entropy % 2**32)
        rng = np.random.default_rng(seed)
        print("random weights: seed %d (ZT_NF4_SEED=%d repeats them)" % (seed, seed))
        cases, nt = live_cases()
        n = write(sys.argv[2], cases, simd)
        print("%s: %d cases (%d from transformers), %d bytes (bitsandbytes %s, torch %s)" %
              (sys.argv[2], len(cases), nt, n, bitsandbytes.__version__, torch.__version__))
    else:
        cases = [quantized(*c) for c in fixed_cases()]
        n = write(sys.argv[1], cases, simd)
        print("%s: %d cases, %d bytes (bitsandbytes %s, torch %s)" %
              (sys.argv[1], len(cases), n, bitsandbytes.__version__, torch.__version__))
