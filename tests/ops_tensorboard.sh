#!/bin/bash
# ops_tensorboard.sh -- TensorBoard event files (issue 46, item 1): --tensorboard
# DIR writes one events file per run (rank 0) with every step's scalars, the
# evaluations' and each checkpoint save's; flushed at each log interval (with
# --log-every 1, a run killed by SIGKILL has every step its metrics file has);
# continued by a new file after a resume; an unusable directory is one error.  With the reference Python stack ($ZT_HFREF_PYTHON or
# /opt/hfref/bin/python with the `tensorboard` package), TensorBoard's own
# reader reads every scalar back equal to the --metrics record of its step,
# and reads the resumed run's directory as one run equal to an uninterrupted
# run's (the new file's SessionLog START at step 9 drops the first file's
# steps from 9 on); without it that check SKIPs (the bytes are checked
# without Python by tests/test_tbevents).
. "$(dirname "$0")/ckpt_lib.sh"
PY=${ZT_HFREF_PYTHON:-/opt/hfref/bin/python}

ntag() { cat "$1"/events.out.tfevents.* 2> /dev/null | grep -a -o "$2" | wc -l; }
ARGS=(--steps 20 --ckpt-every 4 --eval-every 5 --log-every 4)
zrun 2 "${ARGS[@]}" --ckpt-dir R --resume never --metrics r.jsonl --tensorboard tb/r
ok $? "reference: 20 steps on 2 ranks with --tensorboard tb/r"
ok $([ "$(ls tb/r | grep -c '^events\.out\.tfevents\.[0-9]*\..*\.[0-9]*\.[0-9]*$')" = 1 ] &&
     [ "$(ls tb/r | wc -l)" = 1 ]; echo $?) "one events file, named as TensorBoard expects: $(ls tb/r)"
ok $([ "$(ntag tb/r train/loss)" = 20 ] && [ "$(ntag tb/r perf/tokens_per_s)" = 20 ] &&
     [ "$(ntag tb/r memory/peak_bytes)" = 20 ] && [ "$(ntag tb/r eval/val_loss)" = 4 ]; echo $?) \
   "20 train/loss, perf/tokens_per_s and memory/peak_bytes scalars, 4 eval/val_loss"
saves=$(grep -c "checkpoint: saved step" run.out)
ok $([ "$saves" -gt 0 ] && [ "$(ntag tb/r checkpoint/save_s)" = "$saves" ] &&
     [ "$(ntag tb/r checkpoint/stall_s)" = "$saves" ]; echo $?) \
   "checkpoint/save_s and checkpoint/stall_s once per save ($saves)"

# killed (SIGKILL: nothing is flushed at exit) while the background save of
# step 12 writes: with --log-every 1 every step the metrics file has (each
# record flushed) is in the events file too
ZT_CKPT_CRASH_AT=after_data_write@12 zrun 1 "${ARGS[@]}" --log-every 1 --ckpt-dir P --resume never \
    --metrics p.jsonl --tensorboard tb/p
rc=$?
crashed=$(losses p.jsonl | wc -l)
ok $([ $rc != 0 ] && [ "$crashed" -ge 12 ] && [ "$(ntag tb/p train/loss)" = "$crashed" ]; echo $?) \
   "killed after step $crashed: the events file has its $crashed steps ($(ntag tb/p train/loss))"
first=$(ls tb/p)
zrun 1 "${ARGS[@]}" --log-every 1 --ckpt-dir P --resume auto --metrics p.jsonl --tensorboard tb/p
ok $([ $? = 0 ] && grep -q "resumed from P/step-8" run.out && [ "$(ls tb/p | wc -l)" = 2 ] &&
     [ "$(ntag tb/p train/loss)" = $((crashed + 12)) ]; echo $?) \
   "resumed from step 8: a second events file with steps 9..20 (train/loss in the dir: $(ntag tb/p train/loss))"
ok $([ -n "$first" ] && [ -f tb/p/"$first" ]; echo $?) "the first file is kept"

# a directory that cannot be made: one error line before training
zrun 1 --steps 2 --ckpt-dir Q --resume never --tensorboard r.jsonl/tb
ok $([ $? != 0 ] && grep -q "ztrain.tensorboard.dir 'r.jsonl/tb': cannot create r.jsonl: Not a directory" run.err; echo $?) \
   "an unusable directory: $(grep -m1 tensorboard run.err)"

if [ -x "$PY" ] && "$PY" -c "import tensorboard" 2> /dev/null; then
    out=$("$PY" - r.jsonl tb/r tb/p <<'PY' 2> py.err
import json, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]
def scalars(d):
    ea = EventAccumulator(d, size_guidance={"scalars": 0}); ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}
recs = [json.loads(l) for l in open(sys.argv[1])]
# each scalar = the metrics record's value (as float32; the JSONL prints
# loss/grad_norm to 6 decimals, lr to 7 digits, tokens_per_s to 1 decimal,
# tflops to 6 digits)
keys = {"train/loss": ("loss", 5e-7), "train/lr": ("lr", 5e-7), "train/grad_norm": ("grad_norm", 5e-7),
        "perf/tokens_per_s": ("tokens_per_s", 0.05), "perf/step_ms": ("step_ms", 5e-4),
        "perf/data_wait_ms": ("data_wait_ms", 5e-4), "perf/tflops": ("tflops", 5e-6), "comm/bytes": ("comm_bytes", 0),
        "memory/peak_bytes": ("mem_peak_bytes", 0), "eval/val_loss": ("val_loss", 5e-7)}
r = scalars(sys.argv[2])
bad, n = [], 0
for tag, (k, tol) in keys.items():
    want = [(x["step"], x[k]) for x in recs if k in x and x[k] is not None]
    got = r.get(tag, [])
    if [s for s, _ in got] != [s for s, _ in want]: bad.append("%s steps %s" % (tag, [s for s, _ in got]))
    for (s, g), (_, w) in zip(got, want):
        n += 1
        rel = tol if k in ("lr", "tflops") else 0
        if abs(g - f32(w)) > (rel * abs(w) if rel else tol) + 2.4e-7 * abs(w): bad.append("%s@%d %r != %r" % (tag, s, g, w))
p = scalars(sys.argv[3])
lp, lr_ = p.get("train/loss"), r.get("train/loss")
if [s for s, _ in lp] != list(range(1, 21)) or lp != lr_: bad.append("resumed run %s" % lp)
print("BAD " + "; ".join(bad[:5]) if bad else "OK %d scalars" % n)
PY
)
    [ -n "$out" ] || out="no result: $(tail -1 py.err)"
    ok $([ "${out#OK}" != "$out" ]; echo $?) \
       "TensorBoard's reader: every scalar equals the metrics file's; the resumed dir reads as the uninterrupted run: $out"
else
    skip "TensorBoard's reader reads every scalar back" "no tensorboard package ($PY)"
fi
done_testing
