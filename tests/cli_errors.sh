#!/bin/bash
# cli_errors.sh -- every bad input gives ONE clear error line naming the
# file/key, a non-zero exit, and writes nothing.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# a valid small corpus
head -c 20000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output good > prep.out 2>&1
ok $? "prep writes train/val shards"
check "prep output exists" test -s good_train.bin -a -s good_val.bin

base=(--config "$ZT_SRCDIR/configs/tiny.json" --threads 1 --ckpt-dir "$T/ck" --metrics "$T/m.jsonl"
      --sample-tokens 0)

# expect_error NAME EXITCODE NEEDLE -- ztrain ARGS...
expect_error() {
    local name="$1" code="$2" needle="$3"; shift 4
    rm -rf "$T/ck" "$T/m.jsonl"
    "$ZTRAIN" "$@" > out.txt 2> err.txt
    local rc=$?
    local lines; lines=$(wc -l < err.txt)
    if [ "$rc" -eq "$code" ] && [ "$lines" -eq 1 ] && grep -q '^ztrain: error: ' err.txt &&
       grep -qF -- "$needle" err.txt && [ ! -e "$T/ck" ] && [ ! -e "$T/m.jsonl" ]; then
        ok 0 "$name"
    else
        ok 1 "$name (exit $rc, $lines stderr lines)"; diag err.txt
    fi
}

printf '' > empty.bin
head -c 1500 good_train.bin > trunc.bin
{ printf '\x39\x30\x00\x00'; tail -c +5 good_train.bin; } > magic.bin
python3 - <<'PY' 2>/dev/null || perl -e 'open F,">bigtok.bin"; print F pack("l<256",20240520,1,100,(0)x253); print F pack("S<100",(300)x100);'
import struct
with open("bigtok.bin","wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 100, *([0]*253)))
    f.write(struct.pack("<100H", *([300]*100)))
PY
expect_error "missing data file"   1 "$T/none.bin"   -- train "${base[@]}" --train "$T/none.bin" --val good_val.bin
expect_error "empty data file"     1 "empty.bin: empty file" -- train "${base[@]}" --train empty.bin --val good_val.bin
expect_error "truncated data file" 1 "trunc.bin: truncated" -- train "${base[@]}" --train trunc.bin --val good_val.bin
expect_error "wrong magic"         1 "magic.bin: bad magic" -- train "${base[@]}" --train magic.bin --val good_val.bin
expect_error "token >= vocab"      1 "is >= vocab 256" -- train "${base[@]}" --train bigtok.bin --val good_val.bin
expect_error "bad val file named"  1 "trunc.bin" -- train "${base[@]}" --train good_train.bin --val trunc.bin

printf '{\n  "ztrain": {\n    "steps": 10,,\n  }\n}\n' > bad.json
expect_error "malformed JSON: line and column" 2 "bad.json:3:" -- train --config bad.json
printf '{ "ztrain": { "modle": { "n_layer": 2 } } }\n' > unk.json
expect_error "unknown key named" 2 "ztrain.modle" -- train --config unk.json
printf '{ "ztrain": { "model": { "n_layer": -3 } } }\n' > range.json
expect_error "out-of-range value names key" 2 "ztrain.model.n_layer" -- train --config range.json
expect_error "unknown flag" 2 "--bogus-flag" -- train "${base[@]}" --bogus-flag 3
expect_error "bad flag value" 2 "ztrain.steps" -- train "${base[@]}" --steps abc
expect_error "missing config file" 2 "nothere.json" -- train --config nothere.json
ZTRAIN_STAGE=9 expect_error "bad environment value" 2 "ZTRAIN_STAGE" -- train "${base[@]}"
expect_error "unknown command" 2 "frobnicate" -- frobnicate
expect_error "prep: missing input" 1 "nope.txt" -- prep --input nope.txt --output x
expect_error "sample: bad weights file" 1 "good_train.bin: bad magic" -- sample --weights good_train.bin

# the cuda backend without a usable GPU (none visible, or a build without
# CUDA): one line saying so, exit 2, nothing written
CUDA_VISIBLE_DEVICES= expect_error "train --backend cuda without a GPU" 2 "backend cuda requested but" -- \
    train "${base[@]}" --train good_train.bin --val good_val.bin --backend cuda
CUDA_VISIBLE_DEVICES= ZTRAIN_BACKEND=cuda expect_error "ZTRAIN_BACKEND=cuda without a GPU" 2 \
    "backend cuda requested but" -- train "${base[@]}" --train good_train.bin --val good_val.bin
expect_error "comm backend nccl needs the cuda backend" 2 "ztrain.comm_backend=nccl needs ztrain.backend=cuda" -- \
    train "${base[@]}" --train good_train.bin --val good_val.bin --comm-backend nccl
# offload_param: ZeRO stage 3 only, and with offload_optimizer
expect_error "offload params at stage 2 names the key" 2 \
    "zero_optimization.offload_param.device=cpu needs zero_optimization.stage=3" -- \
    train "${base[@]}" --train good_train.bin --val good_val.bin --stage 2 --offload params
printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}' > offp.json
expect_error "offload_param without offload_optimizer says to add it" 2 \
    "needs zero_optimization.offload_optimizer.device=cpu as well" -- \
    train "${base[@]}" --config offp.json --train good_train.bin --val good_val.bin

# with the bad environment variable passed through env instead of a function prefix
rm -rf "$T/ck"; ZTRAIN_STAGE=9 "$ZTRAIN" train "${base[@]}" > /dev/null 2> err.txt
check "ZTRAIN_STAGE=9 rejected with the allowed range" grep -q '\[0, 3\]' err.txt
# `ztrain --help` names the real ways in: prep with a tokenizer, token files
# and --sft; sample from a checkpoint; estimate from a model directory
"$ZTRAIN" --help > help.txt
missing=
for o in 'prep --input TEXT --output PREFIX \[--tokenizer PATH\]' 'prep --tokens-in' 'prep --sft' \
         'sample (--weights FILE | --checkpoint PATH) \[--tokenizer PATH\]' 'estimate \[--config FILE\] \[--model DIR\]'; do
    grep -q "ztrain $o" help.txt || missing="$missing; $o"
done
ok $([ -z "$missing" ]; echo $?) "ztrain --help describes prep, sample and estimate's inputs${missing:+ (missing$missing)}"
done_testing
