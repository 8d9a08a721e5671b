#!/usr/bin/env python3
"""hf_fixture.py -- tiny Hugging Face model directories and safetensors
surgery for tests/hf_io.sh, with the Python standard library only (CI has no
torch / safetensors / numpy).

  hf_fixture.py gpt2 OUT [--layers 2 --heads 2 --embd 32 --positions 32 --vocab 256]
                [--dtype F32|BF16|F16] [--shards N] [--no-prefix] [--lm-head] [--seed S]
  hf_fixture.py llama OUT [--layers 2 --heads 4 --kv 2 --embd 32 --inter 48 --positions 64
                --vocab 256] [--tied] [--arch LlamaForCausalLM|MistralForCausalLM|
                Qwen2ForCausalLM] [--rope-form 4|5] [--llama3] [--dtype ..] [--shards N]
  hf_fixture.py mutate FILE MODE [TENSOR]   MODE: truncate | lie-offsets | dtype-i64 |
                reshape | drop | add | nudge (element 0 + 0.25)
  hf_fixture.py compare-llmc MODEL.BIN HFDIR   llm.c fp32 weights == the HF GPT-2 weights
  hf_fixture.py compare HFDIR_A HFDIR_B [--tol T]   same tensors, values within T
"""
import json
import math
import os
import random
import struct
import sys

ESIZE = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8}


def encode(vals, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "F16":
        return struct.pack("<%de" % len(vals), *vals)
    if dtype == "BF16":   # round to nearest even
        out = bytearray()
        for v in vals:
            u = struct.unpack("<I", struct.pack("<f", v))[0]
            u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            out += struct.pack("<H", u & 0xFFFF)
        return bytes(out)
    raise ValueError(dtype)


def decode(raw, dtype, n):
    if dtype == "F32":
        return list(struct.unpack("<%df" % n, raw))
    if dtype == "F16":
        return list(struct.unpack("<%de" % n, raw))
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in struct.unpack("<%dH" % n, raw)]
    raise ValueError(dtype)


def write_st(path, tensors, dtype):
    """tensors: list of (name, shape, values)."""
    hdr, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape, vals in tensors:
        b = encode(vals, dtype)
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    write_raw(path, hdr, b"".join(blobs))


def write_raw(path, hdr, data):
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    return hdr, data


def tensor_values(path, name):
    hdr, data = read_st(path)
    e = hdr[name]
    b, en = e["data_offsets"]
    n = math.prod(e["shape"])
    return e["shape"], decode(data[b:en], e["dtype"], n)


def model_tensors(d):
    """{name: (shape, values)} of a model directory (single or sharded)."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
        else ["model.safetensors"]
    out = {}
    for fn in files:
        hdr, _ = read_st(os.path.join(d, fn))
        for name in hdr:
            if name != "__metadata__":
                out[name] = tensor_values(os.path.join(d, fn), name)
    return out


def save_model(out, config, tensors, dtype, shards):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if shards <= 1:
        write_st(os.path.join(out, "model.safetensors"), tensors, dtype)
        return
    per = (len(tensors) + shards - 1) // shards
    wm, total = {}, 0
    for s in range(shards):
        part = tensors[s * per:(s + 1) * per]
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        write_st(os.path.join(out, fn), part, dtype)
        for name, shape, vals in part:
            wm[name] = fn
            total += len(vals) * ESIZE[dtype]
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)


def args_of(argv, defaults):
    a, i = dict(defaults), 0
    while i < len(argv):
        k = argv[i][2:].replace("-", "_")
        if isinstance(a.get(k), bool):
            a[k] = True
            i += 1
        else:
            a[k] = type(a[k])(argv[i + 1]) if k in a and a[k] is not None else argv[i + 1]
            i += 2
    return a


def rnd(rng, n, std=0.02, mean=0.0):
    return [mean + rng.gauss(0.0, std) for _ in range(n)]


def gpt2(out, argv):
    a = args_of(argv, dict(layers=2, heads=2, embd=32, positions=32, vocab=256, dtype="F32",
                           shards=1, no_prefix=False, lm_head=False, seed=1))
    rng = random.Random(a["seed"])
    C, L, V, P = a["embd"], a["layers"], a["vocab"], a["positions"]
    pre = "" if a["no_prefix"] else "transformer."
    t = [(pre + "wte.weight", [V, C], rnd(rng, V * C, 0.3)), (pre + "wpe.weight", [P, C], rnd(rng, P * C, 0.01))]
    for l in range(L):
        h = "%sh.%d." % (pre, l)
        t += [(h + "ln_1.weight", [C], rnd(rng, C, 0.1, 1.0)), (h + "ln_1.bias", [C], rnd(rng, C, 0.1)),
              (h + "attn.c_attn.weight", [C, 3 * C], rnd(rng, 3 * C * C, 0.1)),
              (h + "attn.c_attn.bias", [3 * C], rnd(rng, 3 * C, 0.1)),
              (h + "attn.c_proj.weight", [C, C], rnd(rng, C * C, 0.1)),
              (h + "attn.c_proj.bias", [C], rnd(rng, C, 0.1)),
              (h + "ln_2.weight", [C], rnd(rng, C, 0.1, 1.0)), (h + "ln_2.bias", [C], rnd(rng, C, 0.1)),
              (h + "mlp.c_fc.weight", [C, 4 * C], rnd(rng, 4 * C * C, 0.1)),
              (h + "mlp.c_fc.bias", [4 * C], rnd(rng, 4 * C, 0.1)),
              (h + "mlp.c_proj.weight", [4 * C, C], rnd(rng, 4 * C * C, 0.1)),
              (h + "mlp.c_proj.bias", [C], rnd(rng, C, 0.1))]
    t += [(pre + "ln_f.weight", [C], rnd(rng, C, 0.1, 1.0)), (pre + "ln_f.bias", [C], rnd(rng, C, 0.1))]
    if a["lm_head"]:   # a tied model's copy of wte
        t.append(("lm_head.weight", [V, C], t[0][2]))
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
           "n_positions": P, "n_embd": C, "n_layer": L, "n_head": a["heads"], "n_inner": None,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "bos_token_id": 0, "eos_token_id": 0}
    save_model(out, cfg, t, a["dtype"], a["shards"])


def llama(out, argv):
    a = args_of(argv, dict(layers=2, heads=4, kv=2, embd=32, inter=48, positions=64, vocab=256,
                           dtype="F32", shards=1, tied=False, arch="LlamaForCausalLM",
                           rope_form="4", llama3=False, seed=2, theta=10000.0))
    rng = random.Random(a["seed"])
    C, L, V, NH, KV, H = a["embd"], a["layers"], a["vocab"], a["heads"], a["kv"], a["inter"]
    hd = C // NH
    qwen = a["arch"] == "Qwen2ForCausalLM"
    t = [("model.embed_tokens.weight", [V, C], rnd(rng, V * C, 0.1))]
    for l in range(L):
        p = "model.layers.%d." % l
        t += [(p + "input_layernorm.weight", [C], rnd(rng, C, 0.1, 1.0)),
              (p + "self_attn.q_proj.weight", [NH * hd, C], rnd(rng, NH * hd * C, 0.1)),
              (p + "self_attn.k_proj.weight", [KV * hd, C], rnd(rng, KV * hd * C, 0.1)),
              (p + "self_attn.v_proj.weight", [KV * hd, C], rnd(rng, KV * hd * C, 0.1))]
        if qwen:
            t += [(p + "self_attn.q_proj.bias", [NH * hd], rnd(rng, NH * hd, 0.1)),
                  (p + "self_attn.k_proj.bias", [KV * hd], rnd(rng, KV * hd, 0.1)),
                  (p + "self_attn.v_proj.bias", [KV * hd], rnd(rng, KV * hd, 0.1))]
        t += [(p + "self_attn.o_proj.weight", [C, NH * hd], rnd(rng, C * NH * hd, 0.1)),
              (p + "post_attention_layernorm.weight", [C], rnd(rng, C, 0.1, 1.0)),
              (p + "mlp.gate_proj.weight", [H, C], rnd(rng, H * C, 0.1)),
              (p + "mlp.up_proj.weight", [H, C], rnd(rng, H * C, 0.1)),
              (p + "mlp.down_proj.weight", [C, H], rnd(rng, C * H, 0.1))]
    t.append(("model.norm.weight", [C], rnd(rng, C, 0.1, 1.0)))
    if not a["tied"]:
        t.append(("lm_head.weight", [V, C], rnd(rng, V * C, 0.1)))
    mt = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2"}
    cfg = {"architectures": [a["arch"]], "model_type": mt.get(a["arch"], "unknown"),
           "vocab_size": V, "hidden_size": C, "intermediate_size": H, "num_hidden_layers": L,
           "num_attention_heads": NH, "num_key_value_heads": KV, "hidden_act": "silu",
           "max_position_embeddings": a["positions"], "rms_norm_eps": 1e-5,
           "tie_word_embeddings": a["tied"], "bos_token_id": 1, "eos_token_id": 2}
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16} if a["llama3"] else None
    if a["rope_form"] == "5":
        cfg["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=a["theta"])
        cfg["rope_scaling"] = None
    else:
        cfg["rope_theta"] = a["theta"]
        cfg["rope_scaling"] = scaling
    if a["arch"] == "MistralForCausalLM":
        cfg["sliding_window"] = a["positions"]
    if qwen:
        cfg["use_sliding_window"] = False
    save_model(out, cfg, t, a["dtype"], a["shards"])


def mutate(path, mode, tensor=None):
    hdr, data = read_st(path)
    names = [k for k in hdr if k != "__metadata__"]
    name = tensor or names[-1]
    e = hdr[name]
    if mode == "truncate":   # header whole, the data region cut short
        n = struct.unpack("<Q", open(path, "rb").read(8))[0]
        with open(path, "r+b") as f:
            f.truncate(8 + n + len(data) - 64)
        return
    if mode == "lie-offsets":   # the tensor's bytes claimed to start at 0: overlaps another
        span = e["data_offsets"][1] - e["data_offsets"][0]
        e["data_offsets"] = [0, span]
    elif mode == "dtype-i64":   # same bytes, an integer dtype
        n = (e["data_offsets"][1] - e["data_offsets"][0]) // 8
        e["dtype"] = "I64"
        e["shape"] = [n]
        e["data_offsets"][1] = e["data_offsets"][0] + 8 * n
    elif mode == "reshape":   # same bytes, rows and columns swapped / flattened
        e["shape"] = list(reversed(e["shape"])) if len(e["shape"]) == 2 and e["shape"][0] != e["shape"][1] \
            else [e["shape"][0] // 2, 2 * math.prod(e["shape"][1:])]
    elif mode == "drop":
        del hdr[name]
    elif mode == "nudge":   # element 0 of the tensor + 0.25, nothing else changed
        b, n = e["data_offsets"][0], ESIZE[e["dtype"]]
        v = decode(data[b:b + n], e["dtype"], 1)[0] + 0.25
        data = data[:b] + encode([v], e["dtype"]) + data[b + n:]
    elif mode == "add":
        b = encode([0.5] * 4, "F32")
        hdr["model.extra_thing.weight"] = {"dtype": "F32", "shape": [4],
                                           "data_offsets": [len(data), len(data) + 16]}
        data += b
    else:
        raise SystemExit("unknown mode " + mode)
    write_raw(path, hdr, data)


def compare_llmc(model_bin, hfdir):
    """llm.c fp32 model file (header 256 int32, then family by family) vs HF GPT-2."""
    raw = open(model_bin, "rb").read()
    h = struct.unpack("<256i", raw[:1024])
    P, V, L, NH, C, Vp = h[2], h[3], h[4], h[5], h[6], h[7]
    at = 1024
    def take(n):
        nonlocal at
        v = struct.unpack("<%df" % n, raw[at:at + 4 * n])
        at += 4 * n
        return v
    hf = model_tensors(hfdir)
    def get(n):
        for k in ("transformer." + n, n):
            if k in hf:
                return hf[k][1]
        raise SystemExit("missing " + n)
    def tr(vals, rows, cols):   # HF [rows=in, cols=out] -> ours [out, in]
        return [vals[r * cols + c] for c in range(cols) for r in range(rows)]
    bad = []
    def check(name, ours, theirs):
        if list(ours) != list(theirs):
            bad.append(name)
    wte = take(Vp * C)[:V * C]
    check("wte", wte, get("wte.weight"))
    check("wpe", take(P * C), get("wpe.weight"))
    fam = [("ln_1.weight", C, None), ("ln_1.bias", C, None), ("attn.c_attn.weight", 3 * C * C, (C, 3 * C)),
           ("attn.c_attn.bias", 3 * C, None), ("attn.c_proj.weight", C * C, (C, C)),
           ("attn.c_proj.bias", C, None), ("ln_2.weight", C, None), ("ln_2.bias", C, None),
           ("mlp.c_fc.weight", 4 * C * C, (C, 4 * C)), ("mlp.c_fc.bias", 4 * C, None),
           ("mlp.c_proj.weight", 4 * C * C, (4 * C, C)), ("mlp.c_proj.bias", C, None)]
    for name, n, t2 in fam:
        for l in range(L):
            v = get("h.%d.%s" % (l, name))
            check("h.%d.%s" % (l, name), take(n), tr(v, *t2) if t2 else v)
    check("ln_f.weight", take(C), get("ln_f.weight"))
    check("ln_f.bias", take(C), get("ln_f.bias"))
    if at != len(raw):
        bad.append("size")
    print("compared %d layers; mismatches: %s" % (L, bad or "none"))
    return 1 if bad else 0


def compare(da, db, tol):
    a, b = model_tensors(da), model_tensors(db)
    if sorted(a) != sorted(b):
        print("names differ:", sorted(set(a) ^ set(b)))
        return 1
    worst = 0.0
    for k in a:
        if a[k][0] != b[k][0]:
            print("shape of", k, a[k][0], b[k][0])
            return 1
        for x, y in zip(a[k][1], b[k][1]):
            worst = max(worst, abs(x - y))
    print("%d tensors, max |difference| %g" % (len(a), worst))
    return 0 if worst <= tol else 1


def main():
    cmd = sys.argv[1]
    if cmd == "gpt2":
        gpt2(sys.argv[2], sys.argv[3:])
    elif cmd == "llama":
        llama(sys.argv[2], sys.argv[3:])
    elif cmd == "mutate":
        mutate(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif cmd == "compare-llmc":
        sys.exit(compare_llmc(sys.argv[2], sys.argv[3]))
    elif cmd == "compare":
        tol = float(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--tol" else 0.0
        sys.exit(compare(sys.argv[2], sys.argv[3], tol))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
