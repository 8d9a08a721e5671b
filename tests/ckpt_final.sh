#!/bin/bash
# ckpt_final.sh -- ztrain.checkpoint.final (--ckpt-final): false = no save
# after the last step and no default weights file (benchmarks that must not
# write a multi-GiB checkpoint, e.g. run.sh measure on a 64 GiB disk);
# periodic saves still happen and an explicit --save is still written.
# The default (true) saves step-N and model.bin as before.
. "$(dirname "$0")/ckpt_lib.sh"

# (1) default: the final checkpoint and the weights file
zrun 1 --steps 3 --ckpt-dir ck_on --resume never
ok $([ $? = 0 ] && [ "$(cat ck_on/latest 2> /dev/null)" = step-3 ] && [ -f ck_on/model.bin ]; echo $?) \
   "default: step-3 saved at the end, latest = step-3, model.bin written"

# (2) --ckpt-final false: nothing saved, both said
zrun 1 --steps 3 --ckpt-dir ck_off --resume never --ckpt-final false
RC=$?
diag <(grep -E 'checkpoint|weights' run.out run.err | head -n 4)
ok $([ $RC = 0 ] && [ ! -e ck_off/step-3 ] && [ ! -e ck_off/latest ] && [ ! -e ck_off/model.bin ] &&
     [ -z "$(ls ck_off 2> /dev/null | grep -v '^\.ztrain\.lock$')" ]; echo $?) \
   "--ckpt-final false: exit $RC, no step-3, no latest, no model.bin in ck_off"
ok $(grep -q 'checkpoint: no save at the end of training (checkpoint.final false); the newest checkpoint is none' run.out run.err &&
     grep -q 'weights: not saved (checkpoint.final false and no --save)' run.out run.err; echo $?) \
   "--ckpt-final false: the run says it saved neither the checkpoint nor the weights"

# (3) periodic saves still happen; an explicit --save is still written
zrun 1 --steps 4 --ckpt-dir ck_per --resume never --ckpt-final false --ckpt-every 2 --save w.bin
RC=$?
ok $([ $RC = 0 ] && [ "$(cat ck_per/latest 2> /dev/null)" = step-2 ] && [ ! -e ck_per/step-4 ] &&
     [ -s w.bin ] && [ ! -e ck_per/model.bin ] &&
     grep -q 'no save at the end of training (checkpoint.final false); the newest checkpoint is ck_per/step-2' run.out run.err; echo $?) \
   "--ckpt-final false --ckpt-every 2 --save w.bin: step-2 saved, no step-4, w.bin written (exit $RC)"

# (4) the key from the environment, a bad value refused
ZTRAIN_CHECKPOINT_FINAL=false zrun 1 --steps 2 --ckpt-dir ck_env --resume never
RC=$?
ok $([ $RC = 0 ] && [ ! -e ck_env/step-2 ]; echo $?) "ZTRAIN_CHECKPOINT_FINAL=false: no step-2 (exit $RC)"
zrun 1 --steps 2 --ckpt-dir ck_bad --resume never --ckpt-final maybe
RC=$?
ok $([ $RC != 0 ] && grep -q 'ztrain.checkpoint.final' run.err && [ ! -e ck_bad/step-2 ]; echo $?) \
   "--ckpt-final maybe: refused naming ztrain.checkpoint.final (exit $RC)"
done_testing
