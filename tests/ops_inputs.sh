#!/bin/bash
# ops_inputs.sh -- inputs are not trusted too readily (issue 16, item 8):
# an llm.c model header is checked against the file size before anything is
# allocated; NaN/Inf weights are refused (llm.c files, safetensors,
# checkpoints); huge micro/eval batches are refused
# at once with a message naming the product; llm.c bf16 (version 5) model
# files read back as the same weights as fp32 (item 9).
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 not found"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 60000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! prep failed"; exit 1; }
C=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1)
"$ZTRAIN" train "${C[@]}" --steps 3 --ckpt-dir ck --resume never --sample-tokens 0 --save m.bin > /dev/null 2>&1
ok $? "a tiny model trained for 3 steps and saved as an llm.c fp32 file"

python3 - <<'PY'
import struct
b = open("m.bin", "rb").read()
h = list(struct.unpack("<256i", b[:1024]))
# a GPT-2 XL header over 140 KB
big = h[:]; big[2:8] = [1024, 50257, 48, 25, 1600, 50304]
open("big.bin", "wb").write(struct.pack("<256i", *big) + b"\0" * (140 * 1024 - 1024))
w = bytearray(b[1024:])
def poke(name, val):
    x = bytearray(w); x[4 * 1000:4 * 1001] = struct.pack("<f", val)
    open(name, "wb").write(b[:1024] + bytes(x))
poke("nan.bin", float("nan")); poke("inf.bin", float("inf"))
open("short.bin", "wb").write(b[:-4])
# bf16: each float cut to its high half (v5), and the same values as fp32 (v3)
n = len(w) // 4
f = struct.unpack("<%dI" % n, bytes(w))
hi = [u >> 16 for u in f]
h5 = h[:]; h5[1] = 5
open("m16.bin", "wb").write(struct.pack("<256i", *h5) + struct.pack("<%dH" % n, *hi))
open("m32.bin", "wb").write(b[:1024] + struct.pack("<%dI" % n, *[u << 16 for u in hi]))
PY
samp() { "$ZTRAIN" sample --weights "$1" --length 24 --seed 7 > "$1.out" 2> "$1.err"; }
samp big.bin; rc=$?
ok $([ $rc != 0 ] && grep -q "143360 bytes, but its header" big.bin.err; echo $?) \
   "a 140 KB file with a GPT-2 XL header: refused before allocating ($(cat big.bin.err))"
samp short.bin; rc=$?
ok $([ $rc != 0 ] && grep -q "bytes, but its header" short.bin.err; echo $?) "a file 4 bytes short: refused"
for x in nan inf; do
    samp $x.bin; rc=$?
    ok $([ $rc = 1 ] && grep -q "element 1000 is \(NaN\|Inf\)" $x.bin.err; echo $?) \
       "$x weights refused on load ($(cat $x.bin.err))"
done
# the same refusal on the other load paths: a Hugging Face safetensors file
# (--init-from) and a checkpoint (--resume; a NaN in the weights, a negative
# AdamW second moment).  The edit leaves the checksum stale: the value check
# comes first, so the message names the value, not the checksum.
"$ZTRAIN" ckpt export ck/step-3 --hf hf > /dev/null 2>&1
ok $? "the checkpoint exported as a Hugging Face directory"
python3 - <<'PY'
import json, os, struct
b = bytearray(open("hf/model.safetensors", "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
e = h["transformer.h.0.mlp.c_fc.weight"]
o = 8 + n + e["data_offsets"][0] + 4 * 5
b[o:o + 4] = struct.pack("<f", float("-inf"))
os.mkdir("hfbad")
open("hfbad/model.safetensors", "wb").write(b)
open("hfbad/config.json", "w").write(open("hf/config.json").read())
PY
"$ZTRAIN" train "${C[@]}" --steps 4 --ckpt-dir ckh --resume never --init-from hfbad --sample-tokens 0 \
    > hfbad.out 2> hfbad.err; rc=$?
ok $([ $rc != 0 ] && grep -q "model.safetensors: tensor transformer.h.0.mlp.c_fc.weight .* element 5 is -Inf" hfbad.err &&
     [ ! -e ckh/latest ]; echo $?) "-Inf in a safetensors file: --init-from refused, nothing trained ($(tail -n 1 hfbad.err))"
FLIP=$ZT_BUILDDIR/tests/ckpt_flip
for c in "params/wpe 7 nan NaN" "optimizer/m/h0.attn.qkv.b 2 inf Inf" "optimizer/v/h0.mlp.fc.w 9 -1e-3 negative"; do
    set -- $c
    rm -rf ckx; cp -r ck ckx
    "$FLIP" ckx/step-3/state.h5 --set "/$1" "$2" "$3" || echo "Bail out! ckpt_flip --set failed"
    "$ZTRAIN" train "${C[@]}" --steps 5 --ckpt-dir ckx --resume auto --sample-tokens 0 > x.out 2> x.err; rc=$?
    ok $([ $rc != 0 ] && grep -q "state.h5: tensor ${1##*/} .* element $2 is $4" x.err &&
         [ "$(cat ckx/latest)" = step-3 ] && [ ! -e ckx/step-5 ]; echo $?) \
       "checkpoint with $4 in /$1: resume refused, nothing trained ($(tail -n 1 x.err))"
done
# the parallel restore (every rank reads its own slices) refuses it too
rm -rf ckx; cp -r ck ckx
"$FLIP" ckx/step-3/state.h5 --set /optimizer/v/h0.mlp.fc.w 9 -1e-3 || echo "Bail out! ckpt_flip --set failed"
mpirun_np 2 "$ZTRAIN" train "${C[@]}" --steps 5 --ckpt-dir ckx --resume ckx/step-3 --ckpt-restore parallel \
    --sample-tokens 0 > x.out 2> x.err; rc=$?
ok $([ $rc != 0 ] && grep -q "state.h5: tensor h0.mlp.fc.w .* element 9 is negative" x.err &&
     [ ! -e ckx/step-5 ]; echo $?) "2 ranks, parallel restore: the negative second moment refused"
diag x.err
samp m16.bin; r16=$?
samp m32.bin; r32=$?
ok $([ $r16 = 0 ] && [ $r32 = 0 ] && [ -s m16.bin.out ] && cmp -s m16.bin.out m32.bin.out; echo $?) \
   "an llm.c bf16 (version 5) model file samples exactly as the same values in fp32"
diag m16.bin.err

# writing bf16: the same run saved with --save-dtype bf16 is m.bin rounded
# to nearest even, version 5, and it samples like the fp32 file of its values
"$ZTRAIN" train "${C[@]}" --steps 3 --ckpt-dir ck5 --resume never --sample-tokens 0 --save m5.bin \
    --save-dtype bf16 > /dev/null 2>&1
ok $? "the same run saved with --save-dtype bf16"
python3 - <<'PY'
import struct, sys
b = open("m.bin", "rb").read(); c = open("m5.bin", "rb").read()
n = (len(b) - 1024) // 4
f = struct.unpack("<%dI" % n, b[1024:])
rne = [((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff for u in f]
h = list(struct.unpack("<256i", b[:1024])); h[1] = 5
want = struct.pack("<256i", *h) + struct.pack("<%dH" % n, *rne)
open("m5_32.bin", "wb").write(b[:1024] + struct.pack("<%dI" % n, *[x << 16 for x in rne]))
sys.exit(0 if c == want else 1)
PY
ok $? "m5.bin is llm.c version 5: m.bin's weights rounded to nearest even, byte for byte"
samp m5.bin; r5=$?
samp m5_32.bin
ok $([ $r5 = 0 ] && [ -s m5.bin.out ] && cmp -s m5.bin.out m5_32.bin.out; echo $?) \
   "the written bf16 file reads back as its values (samples equal)"

# huge batches: refused at once, naming the product, without suggesting it
s=$(date +%s%N)
"$ZTRAIN" train "${C[@]}" --micro-batch 2147483647 --steps 3 --print-config > mb.out 2> mb.err; rc=$?
ok $([ $rc = 2 ] && grep -q "tokens per micro batch exceeds 2147483647" mb.err &&
     ! grep -q "micro-batch 2147483647" mb.err; echo $?) "--micro-batch 2147483647: exit 2, $(cat mb.err)"
"$ZTRAIN" estimate "${C[@]}" --world-size 1 --micro-batch 2147483647 > est.out 2> est.err; rc=$?
ok $([ $rc = 2 ] && grep -q "tokens per micro batch" est.err; echo $?) "ztrain estimate: the same refusal"
"$ZTRAIN" train "${C[@]}" --eval-batch-size 2147483647 --steps 3 --print-config > eb.out 2> eb.err; rc=$?
ms=$(( ($(date +%s%N) - s) / 1000000 ))
ok $([ $rc = 2 ] && grep -q "tokens per evaluation batch exceeds" eb.err; echo $?) \
   "--eval-batch-size 2147483647: exit 2, $(cat eb.err)"
# the largest eval batch that passes: its memory refusal comes fast too
s=$(date +%s%N)
timeout 120 "$ZTRAIN" train "${C[@]}" --eval-batch-size 67108859 --steps 3 --sample-tokens 0 --ckpt-dir ck2 > eb2.out 2> eb2.err; rc=$?
ms2=$(( ($(date +%s%N) - s) / 1000000 ))
ok $([ $rc != 0 ] && grep -q "exceeds the limit" eb2.err; echo $?) \
   "--eval-batch-size 67108859 (prime): refused by the memory check"
diag eb2.err
# (no timing assertion: speed belongs in bench/; the times are shown for a reader)
echo "# the batch refusals took ${ms} ms together, the prime eval batch ${ms2} ms"
done_testing
