#!/bin/bash
# ops_metrics.sh -- metrics continuity (issue 16, item 4): a resumed run
# appends to its --metrics file, dropping the records past the resumed step
# (the interrupted run's lost steps), so the file reads as one run: the same
# steps and losses as an uninterrupted run's file.
. "$(dirname "$0")/ckpt_lib.sh"

ARGS=(--steps 20 --ckpt-every 4 --eval-every 5)
zrun 1 "${ARGS[@]}" --ckpt-dir R --resume never --metrics r.jsonl
ok $? "reference: 20 uninterrupted steps"
# killed while saving step 12: steps 9..12 are in the metrics file, the
# newest committed checkpoint is step 8
ZT_CKPT_CRASH_AT=after_data_write@12 zrun 1 "${ARGS[@]}" --ckpt-dir P --resume never --metrics p.jsonl
ok $([ $? != 0 ] && [ "$(cat P/latest)" = step-8 ] && grep -q '"step": 12, "loss"' p.jsonl; echo $?) \
   "crash while saving step 12: latest is step-8, the metrics file has step 12"
echo '{"step": 13, "loss": 1.0' >> p.jsonl   # and a torn last record
zrun 1 "${ARGS[@]}" --ckpt-dir P --resume auto --metrics p.jsonl
ok $([ $? = 0 ] && grep -q "resumed from P/step-8" run.out; echo $?) "resumed from step 8 to 20"
losses r.jsonl > r.txt
losses p.jsonl > p.txt
ok $(cmp -s r.txt p.txt; echo $?) \
   "the metrics file reads as one run: steps 1..20 once each, the reference's losses ($(wc -l < p.txt) records)"
vals() { grep -o '"step": [0-9]*, "val_loss": [-0-9.]*' "$1"; }
ok $([ "$(vals r.jsonl)" = "$(vals p.jsonl)" ] && [ -n "$(vals p.jsonl)" ]; echo $?) \
   "evaluation records too: $(vals p.jsonl | tr '\n' ' ')"
ok $([ "$(grep -c '"step": 13, "loss": 1.0$' p.jsonl)" = 0 ] && ! grep -qv '}$' p.jsonl; echo $?) \
   "the torn record was dropped; every line is a complete record"
zrun 1 "${ARGS[@]}" --ckpt-dir Q --resume never --metrics p.jsonl
ok $([ $? = 0 ] && [ "$(losses p.jsonl | wc -l)" = 20 ]; echo $?) "a fresh run (resume never) starts the file over"
done_testing
