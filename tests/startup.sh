#!/bin/bash
# startup.sh -- start-up does only the work the run needs (issue 32):
# `ztrain train` prints one "startup:" line before the first step with its
# phases (start, mpi, config, planning, allocation, weights, data) and how
# many parameters got random initial values: all of them on a fresh run
# (the model's count), none with --init-from (a Hugging Face directory) nor
# on a resume from a checkpoint (whose step-3 loss is the uninterrupted
# run's, bit for bit), at 1 rank and at 2 ranks ZeRO stage 3 (the same
# first loss as 1 rank).  tests/test_startup on 1 and 2 ranks: deferred
# initialization == eager, bit for bit, at stages 0-3, fp32/bf16, LoRA.
. "$(dirname "$0")/ckpt_lib.sh"
PHASES='startup: [0-9.]+ s to the first step( \(rank 0\))?: start [0-9.]+ s, mpi [0-9.]+ s, config [0-9.]+ s, planning [0-9.]+ s, allocation [0-9.]+ s, weights [0-9.]+ s[^,]*, data [0-9.]+ s; random init: '
line() { grep '^startup:' run.out | head -1; }
nparams() { sed -n 's/^model: \([0-9]*\) parameters.*/\1/p' run.out | head -1; }

# fresh: every parameter gets its initial values
zrun 1 --steps 2 --ckpt-dir a.d --resume never --metrics a.m
ok $? "fresh run (1 rank)"
P=$(nparams)
ok $([ "$(grep -c '^startup:' run.out)" = 1 ] && line | grep -Eq "^${PHASES}$P of $P parameters \([0-9.]+ s\)$"; echo $?) \
   "fresh: one startup: line with its phases, random init: $P of $P parameters ($(line))"

# resume: the checkpoint's parameters, no random values; the same step 3
zrun 1 --steps 3 --ckpt-dir a.d --resume auto --metrics r.m
ok $? "resume from step 2 (1 rank)"
ok $(line | grep -Eq "^${PHASES}none \(all $P parameters loaded\)$" && line | grep -q 'weights [0-9.]* s (checkpoint)'; echo $?) \
   "resume: random init: none, weights from the checkpoint ($(line))"
zrun 1 --steps 3 --ckpt-dir u.d --resume never --metrics u.m
ok $([ -n "$(losses u.m | awk '$1 == 3')" ] && [ "$(losses r.m | awk '$1 == 3')" = "$(losses u.m | awk '$1 == 3')" ]; echo $?) \
   "resume: step 3 == the uninterrupted run's, bitwise ($(losses r.m | awk '$1 == 3'))"

# --init-from: the model from config.json, its weights from the directory
"$ZTRAIN" ckpt export a.d/step-2 --hf h > /dev/null 2>&1
ok $? "ztrain ckpt export --hf (the fixture)"
python3 - "$ZT_SRCDIR/configs/tiny.json" > hf.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["ztrain"]["model"]; print(json.dumps(c))
PY
COMMON=(--config hf.json "${COMMON[@]:2}")
zrun 1 --steps 1 --init-from h --ckpt-dir h1.d --resume never --metrics h1.m
ok $? "--init-from (1 rank)"
ok $(line | grep -Eq "^${PHASES}none \(all $P parameters loaded\)$" && line | grep -q '(Hugging Face model)'; echo $?) \
   "--init-from: random init: none ($(line))"
if msg=$(stage_ok 3); then
    zrun 2 --steps 1 --stage 3 --init-from h --ckpt-dir h2.d --resume never --metrics h2.m
    ok $? "--init-from (2 ranks, stage 3)"
    ok $(line | grep -Eq "^${PHASES}none \(all $P parameters loaded\)$"; echo $?) \
       "--init-from, 2 ranks stage 3: random init: none ($(line))"
    l1=$(losses h1.m | awk '$1 == 1 { print $2 }') l2=$(losses h2.m | awk '$1 == 1 { print $2 }')
    ok $([ -n "$l1" ] && [ "$l1" = "$l2" ]; echo $?) "--init-from: first loss 2 ranks stage 3 == 1 rank ($l2 vs $l1)"
else
    skip "--init-from at 2 ranks, stage 3" "$msg"
fi

tap_mpi 1 "$ZT_BUILDDIR/tests/test_startup" "1 rank: "
tap_mpi 2 "$ZT_BUILDDIR/tests/test_startup" "2 ranks: "
done_testing
