#!/bin/bash
# ckpt_tools.sh -- the checkpoint as a file other tools read, and the
# `ztrain ckpt` commands: h5dump lists clear names; h5py reads a tensor
# whose checksum matches the documented algorithm (numpy); list / inspect /
# verify; safetensors export (F32 and BF16) checked by a stdlib-only reader
# against the llm.c weights file of the same run (names, shapes, dtypes,
# offsets, values); keep / prune / stale .tmp rules; refused settings.
. "$(dirname "$0")/ckpt_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

zrun 2 --steps 20 --ckpt-every 5 --ckpt-keep 3 --ckpt-dir D --resume never --metrics m.jsonl
ok $? "20 steps on 2 ranks, a checkpoint every 5 steps, keep 3"
is_dirs=$(cd D && ls -d step-* | tr '\n' ' ')
ok $([ "$is_dirs" = "step-10 step-15 step-20 " ] && [ "$(cat D/latest)" = step-20 ]; echo $?) \
   "pruning keeps exactly 3 (step-10 step-15 step-20), latest -> step-20 (got: $is_dirs)"
F=D/step-20/state.h5

# ---------------------------------------------------------------- h5dump
if command -v h5dump > /dev/null; then
    h5dump -H "$F" > h.txt 2>&1
    ok $? "h5dump -H reads the checkpoint"
    missing=""
    for g in params optimizer m v model scheduler loss_scaler rng data; do
        grep -q "GROUP \"$g\"" h.txt || missing="$missing $g"
    done
    for d in wte h0.attn.qkv.w h1.mlp.proj.b lnf.w config; do
        grep -q "DATASET \"$d\"" h.txt || missing="$missing $d"
    done
    for a in format format_version step world_size zero_stage checksum checksum_algorithm seed \
             train_batch_size sample_position has_master; do
        grep -q "ATTRIBUTE \"$a\"" h.txt || missing="$missing @$a"
    done
    ok $([ -z "$missing" ]; echo $?) "h5dump -H lists the groups, datasets and attributes by name${missing:+ (missing:$missing)}"
    h5dump -d /config "$F" > cfg.txt 2>&1
    check "h5dump -d /config shows the effective configuration JSON" grep -q '"train_batch_size": 12' cfg.txt
else
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - h5dump # SKIP h5dump not installed"
fi

# ---------------------------------------------------------------- h5py
if "$PY" -c "import h5py, numpy" 2> /dev/null; then
    "$PY" - "$F" > py.out 2>&1 <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
def checksum(a):
    # docs/checkpoints.md: sum over i of splitmix64((i << 32) | bits(x[i])) mod 2^64
    w = np.ascontiguousarray(a, dtype="<f4").reshape(-1).view("<u4").astype(np.uint64)
    x = (np.arange(w.size, dtype=np.uint64) << np.uint64(32)) | w
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return int(x.sum(dtype=np.uint64))
bad = 0
for name in ["params/h0.attn.qkv.w", "optimizer/m/wte", "optimizer/v/lnf.b"]:
    d = f[name]
    got, want = checksum(d[...]), int(d.attrs["checksum"])
    print(name, d.shape, d.dtype, hex(got), hex(want))
    bad += got != want
assert f.attrs["format"] == b"ztrain-checkpoint" and int(f.attrs["step"]) == 20, dict(f.attrs)
assert f["params/h0.attn.qkv.w"].shape == (96, 32)
assert int(f["data"].attrs["sample_position"]) == 20 * 12
sys.exit(1 if bad else 0)
PY
    rc=$?
    diag py.out
    ok $rc "h5py reads tensors and attributes; numpy recomputes the documented checksum exactly"
else
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - h5py checksum # SKIP h5py/numpy not available to $PY"
fi

# ---------------------------------------------------------------- CLI
"$ZTRAIN" ckpt list D > l.txt 2>&1
ok $([ $? = 0 ] && grep -q '^\* step-20 .*committed.*by 2 ranks, stage 0' l.txt && [ "$(grep -c committed l.txt)" = 3 ]; echo $?) \
   "ztrain ckpt list: 3 committed, newest first, * marks latest"
"$ZTRAIN" ckpt inspect D > i.txt 2>&1
ok $([ $? = 0 ] && grep -q '^checkpoint   D/step-20' i.txt && grep -q '^step         20 ' i.txt &&
     grep -q 'train_batch_size 12, next sample 240' i.txt && grep -q '"steps": 20' i.txt; echo $?) \
   "ztrain ckpt inspect DIR: newest checkpoint, step, data position, configuration JSON"
"$ZTRAIN" ckpt verify "$F" > v.txt 2>&1
ok $([ $? = 0 ] && grep -q 'OK (84 tensors and the metadata verified)' v.txt; echo $?) "ztrain ckpt verify FILE: 84 tensors OK"
"$ZTRAIN" ckpt inspect D/nothere > /dev/null 2> e.txt
ok $([ $? = 1 ] && [ "$(wc -l < e.txt)" = 1 ] && grep -q 'nothere' e.txt; echo $?) "a missing checkpoint: exit 1, one line"
"$ZTRAIN" ckpt frobnicate > /dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "unknown ckpt command: exit 2"

# ---------------------------------------------------------------- safetensors export
"$ZTRAIN" ckpt export D --output w32.safetensors > x1.txt 2>&1
r1=$?
"$ZTRAIN" ckpt export "$F" --output w16.safetensors --dtype bf16 > x2.txt 2>&1
r2=$?
ok $([ $r1$r2 = 00 ]; echo $?) "export fp32 and bf16 safetensors"
"$PY" - w32.safetensors w16.safetensors D/model.bin > st.out 2>&1 <<'PY'
import json, struct, sys
def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    assert b[8] == ord("{") and n % 8 == 0
    data = b[8 + n:]
    meta = hdr.pop("__metadata__")
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in hdr.items())
    at = 0
    for s, e, k in spans:          # contiguous, no gaps, ends at the end of the file
        assert s == at, (k, s, at)
        at = e
    assert at == len(data), (at, len(data))
    return hdr, data, meta
def llmc(path):   # llm.c model file: 256 int32 header, then tensors family by family
    b = open(path, "rb").read()
    h = struct.unpack("<256i", b[:1024])
    T, V, L, H, C = h[2], h[3], h[4], h[5], h[6]
    fl = struct.unpack("<%df" % ((len(b) - 1024) // 4), b[1024:])
    shapes = [("wte", [V, C]), ("wpe", [T, C])]
    per = [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [3 * C, C]),
           ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
           ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [4 * C, C]),
           ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [C, 4 * C]), ("mlp.c_proj.bias", [C])]
    out, at = {}, 0
    def take(shape):
        nonlocal at
        n = 1
        for s in shape: n *= s
        v = fl[at:at + n]; at += n
        return v
    out["wte.weight"] = (take([V, C]), [V, C])
    out["wpe.weight"] = (take([T, C]), [T, C])
    for name, shape in per:
        for l in range(L):
            out["h.%d.%s" % (l, name)] = (take(shape), shape)
    out["ln_f.weight"] = (take([C]), [C])
    out["ln_f.bias"] = (take([C]), [C])
    assert at == len(fl)
    return out, L, C
def bf16(x):      # round to nearest even, as documented
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFFFFFF
    return u >> 16
ref, L, C = llmc(sys.argv[3])
conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
for path, dt, es in ((sys.argv[1], "F32", 4), (sys.argv[2], "BF16", 2)):
    hdr, data, meta = read_st(path)
    assert set(hdr) == set(ref), sorted(set(hdr) ^ set(ref))
    assert meta["format"] == "pt" and meta["n_layer"] == str(L) and meta["step"] == "20", meta
    for k, (vals, shape) in ref.items():
        e = hdr[k]
        tr = k.endswith(conv1d)
        want_shape = [shape[1], shape[0]] if tr else shape
        assert e["dtype"] == dt and e["shape"] == want_shape, (k, e, want_shape)
        s, t = e["data_offsets"]
        if dt == "F32":
            got = struct.unpack("<%df" % ((t - s) // 4), data[s:t])
        else:
            got = struct.unpack("<%dH" % ((t - s) // 2), data[s:t])
        if tr:   # Conv1D: [in, out] = transpose of ours
            R, Cc = shape
            want = [vals[r * Cc + c] for c in range(Cc) for r in range(R)]
        else:
            want = list(vals)
        if dt == "BF16":
            want = [bf16(v) for v in want]
        assert list(got) == want, (path, k)
    print("%s: %d tensors, %s, names/shapes/values OK" % (path, len(hdr), dt))
PY
rc=$?
diag st.out
ok $rc "safetensors (stdlib reader): GPT-2 names, shapes (Conv1D transposed), F32 values == model.bin, BF16 == round-to-nearest-even"

# ---------------------------------------------------------------- rules
mkdir -p D/step-99.tmp D/step-21.tmp; : > D/latest.tmp
zrun 2 --steps 25 --ckpt-every 5 --ckpt-keep 3 --ckpt-dir D
ok $([ $? = 0 ] && grep -q 'removed 3 stale incomplete entries in D' run.out && [ ! -e D/step-99.tmp ] &&
     [ ! -e D/latest.tmp ] && grep -q 'resumed from D/step-20' run.out; echo $?) \
   "stale step-*.tmp and latest.tmp are removed at start; resume ignores them"
zrun 2 --steps 25 --ckpt-dir D --ckpt-keep 1
ok $([ $? = 2 ] && grep -q 'ztrain.checkpoint.keep must be an integer >= 2' run.err; echo $?) \
   "checkpoint.keep=1 is refused (exit 2)"
zrun 2 --steps 25 --ckpt-dir D --preempt-signal SIGUSR1
ok $([ $? = 2 ] && grep -q 'NCCL' run.err && [ "$(grep -c 'ztrain: error' run.err)" = 1 ]; echo $?) \
   "preempt_signal=SIGUSR1 is refused naming NCCL (exit 2)"
ZTRAIN_PREEMPT_SIGNAL=SIGHUP ZTRAIN_CHECKPOINT_RESTORE=parallel ZTRAIN_CHECKPOINT_EVERY_MINUTES=0.5 \
    "$ZTRAIN" train "${COMMON[@]}" --micro-batch 12 --print-config > pc.txt 2>&1
ok $([ $? = 0 ] && grep -q 'preempt_signal .*"SIGHUP" *(env)' pc.txt && grep -q 'checkpoint.restore .*"parallel"' pc.txt &&
     grep -q 'every_minutes .*0.5' pc.txt && grep -q 'checkpoint.resume .*"auto" *(default)' pc.txt; echo $?) \
   "new keys from the environment; checkpoint.resume defaults to auto"
zrun 1 --steps 25 --ckpt-dir T1 --ckpt-every-minutes 0.0001 --resume never
ok $([ $? = 0 ] && [ "$(grep -c 'checkpoint.every_minutes' run.out)" -ge 3 ]; echo $?) \
   "checkpoint.every_minutes saves on time"
done_testing
