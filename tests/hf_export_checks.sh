#!/bin/bash
# hf_export_checks.sh -- what `ztrain ckpt export --hf` takes and removes
# (issue 31, items 1, 2, 7, 11; docs/huggingface.md):
# - training records ztrain.init_from as the absolute path it resolved and
#   the fingerprints of its config.json and tokenizer files; an export run in
#   another directory takes the run's files, not those a relative path would
#   name there; changed or vanished files are refused naming both, unless
#   --tokenizer-from DIR names the source;
# - an OUTDIR.tmp without the export's marker is refused, not deleted; one
#   with it (a crashed export's) is replaced;
# - a directory with both model.safetensors and a shard index loads
#   model.safetensors, as transformers does;
# - progress: plain lines when stderr is not a terminal
#   (ZTRAIN_PROGRESS_INTERVAL=0), \r-updated lines on a terminal.
. "$(dirname "$0")/ckpt_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FIX="$ZT_SRCDIR/tests/hf_fixture.py"
"$PY" - "$ZT_SRCDIR/configs/tiny.json" > hf.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["ztrain"]["model"]; print(json.dumps(c))
PY
COMMON=(--config "$T/hf.json" --train "$T/c_train.bin" --val "$T/c_val.bin" --threads 1 --sample-tokens 0
        --batch-size 12 --grad-accum 1 --scheduler.params.total_num_steps 40 --eval-every 0
        --eval-batches 1 --eval-batch-size 4 --log-every 100)
first_loss() { losses "$1" | awk '$1 == 1 { print $2 }'; }

# two model directories named ../g, seen from a/run and from b/run
mkdir -p a/run b/run
"$PY" "$FIX" gpt2 a/g || { echo "Bail out! hf_fixture.py failed"; exit 1; }
cp -r a/g b/g
echo '{"version": "1.0", "model": {"type": "BPE"}, "from": "a"}' > a/g/tokenizer.json
echo '{"version": "1.0", "model": {"type": "BPE"}, "from": "b"}' > b/g/tokenizer.json
echo '{"bos_token_id": 0}' > a/g/generation_config.json

# ---------------------------------------------------------------- item 1
(cd a/run && zrun 1 --steps 1 --ckpt-dir ck --resume never --metrics m --init-from ../g)
ok $? "train --init-from ../g in a/run"
grep -q "\"init_from\": \"$T/a/g\"" <("$ZTRAIN" ckpt inspect a/run/ck/step-1) &&
    grep -q '"init_from_files": "config.json=[0-9a-f]\{16\} tokenizer.json=[0-9a-f]\{16\} generation_config.json=[0-9a-f]\{16\}"' \
        <("$ZTRAIN" ckpt inspect a/run/ck/step-1)
ok $? "the checkpoint records init_from as $T/a/g and the fingerprints of its 3 files"
(cd b/run && "$ZTRAIN" ckpt export ../../a/run/ck --hf E > ../../exp.out 2>&1)
rc=$?
ok $([ $rc = 0 ] && cmp -s a/g/tokenizer.json b/run/E/tokenizer.json && [ -f b/run/E/generation_config.json ]; echo $?) \
   "export from b/run (where ../g is another model): the run's tokenizer files, a/g's (exit $rc)"
echo ' ' >> a/g/tokenizer.json
rm -f a/g/generation_config.json
(cd b/run && "$ZTRAIN" ckpt export ../../a/run/ck --hf E2 > ../../exp.out 2>&1)
rc=$?
ok $([ $rc = 1 ] && grep -q "^ztrain: error: .*step-1.*$T/a/g (ztrain.init_from) are not the ones the run started from (tokenizer.json changed, generation_config.json missing)" exp.out &&
     [ ! -e b/run/E2 ] && [ ! -e b/run/E2.tmp ]; echo $?) \
   "changed tokenizer.json, missing generation_config.json: refused naming both, exit 1, nothing written (got $rc: $(head -c 300 exp.out))"
"$ZTRAIN" ckpt export a/run/ck --hf E3 --tokenizer-from b/g > exp.out 2>&1
ok $([ $? = 0 ] && cmp -s b/g/tokenizer.json E3/tokenizer.json; echo $?) "--tokenizer-from b/g: its files are exported"
mv a/g a/g.moved
"$ZTRAIN" ckpt export a/run/ck --hf E4 > exp.out 2>&1
rc=$?
ok $([ $rc = 1 ] && grep -q "the run started from $T/a/g (ztrain.init_from), which is not a directory here" exp.out &&
     [ ! -e E4 ]; echo $?) "init_from gone: refused, not exported without its tokenizer (got $rc: $(head -c 200 exp.out))"
"$ZTRAIN" ckpt export a/run/ck --hf E5 --no-tokenizer > exp.out 2>&1
ok $([ $? = 0 ] && [ -f E5/model.safetensors ] && [ ! -e E5/tokenizer.json ]; echo $?) "--no-tokenizer: exported without tokenizer files"
mv a/g.moved a/g

# ---------------------------------------------------------------- item 2
mkdir -p F.tmp/sub && echo precious > F.tmp/sub/file
"$ZTRAIN" ckpt export a/run/ck --hf F --tokenizer-from b/g > exp.out 2>&1
rc=$?
ok $([ $rc = 2 ] && grep -q "F.tmp: exists and is not the leftover of a ztrain export" exp.out &&
     [ "$(cat F.tmp/sub/file)" = precious ] && [ ! -e F ]; echo $?) \
   "a foreign F.tmp is refused and kept (got $rc: $(head -c 200 exp.out))"
rm -rf F.tmp && mkdir -p F.tmp/sub && : > F.tmp/.ztrain-export-in-progress && echo old > F.tmp/sub/file
"$ZTRAIN" ckpt export a/run/ck --hf F --tokenizer-from b/g > exp.out 2>&1
ok $([ $? = 0 ] && [ -f F/model.safetensors ] && [ ! -e F/sub ] && [ ! -e F.tmp ] &&
     [ ! -e F/.ztrain-export-in-progress ]; echo $?) \
   "a crashed export's F.tmp (marker) is replaced; the export carries no marker"

# ---------------------------------------------------------------- item 7
"$PY" "$FIX" gpt2 s2 --seed 7 --shards 2
cp -r b/g both && cp s2/model-0000*-of-00002.safetensors s2/model.safetensors.index.json both/
zrun 1 --steps 1 --lr 1e-30 --ckpt-dir ck1 --resume never --metrics m1 --init-from b/g
zrun 1 --steps 1 --lr 1e-30 --ckpt-dir ck2 --resume never --metrics m2 --init-from s2
zrun 1 --steps 1 --lr 1e-30 --ckpt-dir ck3 --resume never --metrics m3 --init-from both
L1=$(first_loss m1) L2=$(first_loss m2) L3=$(first_loss m3)
ok $([ -n "$L3" ] && [ "$L3" = "$L1" ] && [ "$L1" != "$L2" ]; echo $?) \
   "model.safetensors + index: model.safetensors is loaded, as transformers does (loss $L3 == $L1, shards give $L2)"

# ---------------------------------------------------------------- item 11
ZTRAIN_PROGRESS_INTERVAL=0 "$ZTRAIN" ckpt export a/run/ck --hf P --tokenizer-from b/g > exp.out 2> exp.err
ok $([ $? = 0 ] && grep -q '^ztrain: export: [0-9.]* [kMG]B of [0-9.]* [kMG]B ([0-9]*%), [0-9.]* [kMG]B/s' exp.err &&
     grep -q '^ztrain: export: .* (100%), .* s$' exp.err && ! grep -q $'\r' exp.err; echo $?) \
   "export, stderr not a terminal: plain progress lines ending at 100% ($(tail -1 exp.err))"
ZTRAIN_PROGRESS_INTERVAL=0 "$ZTRAIN" prep --input corpus.txt --output pp > exp.out 2> exp.err
ok $([ $? = 0 ] && grep -q '^ztrain: prep: writing: [0-9]* tokens of 120000 tokens' exp.err; echo $?) \
   "prep: plain progress lines ($(tail -1 exp.err))"
"$ZTRAIN" ckpt export a/run/ck --hf P2 --tokenizer-from b/g > exp.out 2> exp.err
ok $([ $? = 0 ] && [ ! -s exp.err ]; echo $?) "the default interval (30 s): a short export prints no progress line"
ZTRAIN_PROGRESS_INTERVAL=0 zrun 1 --steps 2 --ckpt-dir a/run/ck --resume auto --metrics m4 --init-from a/g
ok $([ $? = 0 ] && grep -q '^ztrain: restore: .*(100%)' run.err; echo $?) "checkpoint restore: progress lines ($(grep restore: run.err | tail -1))"
ZTRAIN_PROGRESS_INTERVAL=0 "$ZTRAIN" sample --checkpoint a/run/ck --length 2 > s.out 2> s.err
ok $([ $? = 0 ] && grep -q '^ztrain: restore: .*(100%)' s.err; echo $?) "sample --checkpoint: the restore's progress lines"
ZTRAIN_PROGRESS_INTERVAL=0 zrun 1 --steps 1 --ckpt-dir ck5 --resume never --init-from b/g
ok $([ $? = 0 ] && grep -q '^ztrain: init: .*(100%)' run.err; echo $?) "Hugging Face load: progress lines"
if command -v script > /dev/null; then
    script -qec "ZTRAIN_PROGRESS_INTERVAL=0 $ZTRAIN ckpt export a/run/ck --hf P3 --tokenizer-from b/g" /dev/null > tty.out 2>&1
    ok $([ $? = 0 ] && grep -q $'\rexport: [0-9.]* [kMG]B of' tty.out && ! grep -q '^ztrain: export:' tty.out; echo $?) \
       "on a terminal: one line redrawn with \\r"
else
    skip "on a terminal" "script(1) not installed"
fi
done_testing
