#!/usr/bin/env python3
"""make_nf4_fixture.py -- known-answer vectors for tests/test_nf4 from
bitsandbytes itself (run once; the output is committed, so `make check`
needs no Python):

    /opt/hfref/bin/python scripts/make_nf4_fixture.py tests/fixtures/nf4/known.bin

Each case is a weight quantized with bitsandbytes.functional.quantize_4bit(
W, blocksize=64, quant_type="nf4", compress_statistics=dq) on the CPU, with
torch.set_num_threads(1), and dequantized with dequantize_4bit to fp32 and
bf16.  Format (little-endian):
  "ZTNF4KA\\0", u32 version 1, u32 ncases, f32 nf4[16], f32 dyn[256]
  per case: char name[32], u32 dtype (0 fp32, 1 bf16), u32 dq, u32 rows,
  u32 cols, u32 has_deq, input (n f32 or n bf16 bits), codes (ceil(n/2)),
  dq ? qabsmax (nb u8), absmax2 (ceil(nb/256) f32), offset f32 : absmax (nb
  f32), has_deq ? deq_f32 (n), deq_bf16 (n u16)
with n = rows * cols, nb = ceil(n / 64).
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

out = bytearray(b"ZTNF4KA\0")
out += struct.pack("<II", 1, len(cases))
out += get_4bit_type("nf4", device="cpu").numpy().astype("<f4").tobytes()
out += create_dynamic_map().numpy().astype("<f4").tobytes()
for name, dtype, dq, w, has_deq in cases:
    rows, cols = w.shape
    t = torch.from_numpy(np.ascontiguousarray(w))
    if dtype == 1:
        t = t.bfloat16()
    q, s = quantize_4bit(t, blocksize=64, quant_type="nf4", compress_statistics=bool(dq))
    nm = name.encode()[:31]
    out += nm + b"\0" * (32 - len(nm))
    out += struct.pack("<IIIII", dtype, dq, rows, cols, has_deq)
    out += (t.view(torch.int16).numpy().astype("<i2").tobytes() if dtype == 1
            else t.numpy().astype("<f4").tobytes())
    out += q.numpy().reshape(-1).tobytes()
    if dq:
        out += s.absmax.numpy().astype("u1").tobytes()
        out += s.state2.absmax.numpy().astype("<f4").tobytes()
        out += struct.pack("<f", s.offset.item())
    else:
        out += s.absmax.numpy().astype("<f4").tobytes()
    if has_deq:
        s.dtype = torch.float32
        out += dequantize_4bit(q, s).numpy().astype("<f4").tobytes()
        s.dtype = torch.bfloat16
        out += dequantize_4bit(q, s).view(torch.int16).numpy().astype("<i2").tobytes()
open(sys.argv[1], "wb").write(bytes(out))
print("%s: %d cases, %d bytes (bitsandbytes %s, torch %s)" %
      (sys.argv[1], len(cases), len(out), bitsandbytes.__version__, torch.__version__))
