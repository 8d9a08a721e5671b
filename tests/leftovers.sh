#!/bin/bash
# leftovers.sh -- what killed or refused runs leave behind (issue 31, item 9):
# the PATH.tmp.<pid> file of a killed `ztrain prep` is removed by the next
# prep of the same output when its process is gone (a live process's file
# is kept); a refused prep removes the directories it created for its
# output, and a training run refused after its checkpoint directory was
# made (a failed resume, a bad model directory) removes that directory.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
CH="$ZT_SRCDIR/tests/data/sft/chats.jsonl"
L3="$ZT_SRCDIR/tests/fixtures/tok/llama3"
head -c 20000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt

# ---- stale temporary files
dead=$(sh -c 'echo $$')   # a process that has exited
mkdir out
head -c 4096 /dev/zero > "out/c_train.sft.tmp.$dead"
head -c 4096 /dev/zero > "out/c_train.sft.tmp.$$"            # this shell: alive
head -c 4096 /dev/zero > "out/b_train.bin.tmp.$dead"
head -c 4096 /dev/zero > "out/b_train.bin.tmp.x$dead"        # not a writer's name
"$ZTRAIN" prep --sft --input "$CH" --tokenizer "$L3" --template llama3 --seq-len 128 --output out/c > sft.out 2>&1
ok $([ $? = 0 ] && [ ! -e "out/c_train.sft.tmp.$dead" ] && [ -e "out/c_train.sft.tmp.$$" ]; echo $?) \
   "prep --sft removes a dead process's out/c_train.sft.tmp.$dead and keeps a live one's"
"$ZTRAIN" prep --input corpus.txt --output out/b > b.out 2>&1
ok $([ $? = 0 ] && [ ! -e "out/b_train.bin.tmp.$dead" ] && [ -e "out/b_train.bin.tmp.x$dead" ]; echo $?) \
   "prep removes a dead process's out/b_train.bin.tmp.$dead, nothing else"

# ---- refused preps leave no directory
printf '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\nnot json\n' > bad.jsonl
"$ZTRAIN" prep --sft --input bad.jsonl --tokenizer "$L3" --template llama3 --seq-len 128 --output new1/sub/c > r1.out 2>&1
rc=$?
ok $([ $rc != 0 ] && [ ! -e new1 ]; echo $?) "a refused prep --sft removes the directories it created (exit $rc; $(ls -d new1 2>/dev/null))"
printf '{"text": "fine"}\n{"text": 3}\n' > bad2.jsonl
mkdir -p keep && : > keep/mine
"$ZTRAIN" prep --input bad2.jsonl --tokenizer "$L3" --output keep/new2/c > r2.out 2>&1
rc=$?
ok $([ $rc != 0 ] && [ ! -e keep/new2 ] && [ -e keep/mine ]; echo $?) \
   "a refused tokenizer prep removes keep/new2 it created, keeps keep/ (exit $rc)"

# ---- refused training runs leave no checkpoint directory
command -v "$ZT_MPIRUN" > /dev/null || { done_testing; exit $?; }
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null 2>&1
python3 - "$ZT_SRCDIR/configs/tiny.json" > hf.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["ztrain"]["model"]; print(json.dumps(c))
PY
TR=(--config hf.json --train c_train.bin --val c_val.bin --threads 1 --sample-tokens 0
    --steps 1 --eval-every 0 --micro-batch 4 --batch-size 4 --scheduler.params.total_num_steps 40)
"$ZTRAIN" train "${TR[@]}" --ckpt-dir fresh/ck --resume "$T/no/such/step-3" > t1.out 2>&1
rc=$?
ok $([ $rc != 0 ] && grep -q "^ztrain: error: .*no/such/step-3" t1.out && [ ! -e fresh ]; echo $?) \
   "train refused by its resume: no fresh/ck left (exit $rc: $(grep error t1.out | cut -c1-120))"
mkdir -p hf && printf '{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 256, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2}\n' > hf/config.json
"$ZTRAIN" train "${TR[@]}" --ckpt-dir fresh2/ck --init-from hf > t2.out 2>&1
rc=$?
ok $([ $rc != 0 ] && grep -q 'neither model.safetensors' t2.out && [ ! -e fresh2 ]; echo $?) \
   "train refused by its model directory (no weights): no fresh2/ck left (exit $rc: $(grep error t2.out | cut -c1-120))"
done_testing
