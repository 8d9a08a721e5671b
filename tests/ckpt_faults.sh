#!/bin/bash
# ckpt_faults.sh -- the checkpoint path under faults (docs/checkpoints.md,
# "Failure model"):
#  - an unreadable newest checkpoint (EACCES on open, injected by the
#    LD_PRELOAD shim tests/faultshim.c: chmod does not stop root) makes
#    auto-resume fall back to the previous one and quarantine it; nothing is
#    deleted, and it still verifies once readable again;
#  - a flipped bit in any attribute or in /config fails `ztrain ckpt verify`
#    (exit 1, naming it) and makes auto-resume fall back and quarantine.
. "$(dirname "$0")/ckpt_lib.sh"
SHIM="$ZT_BUILDDIR/tests/.libs/libfaultshim.so"
FLIP="$ZT_BUILDDIR/tests/ckpt_flip"
[ -f "$SHIM" ] || skip_all "fault shim not built ($SHIM)"
# an ASan build of ztrain accepts a preloaded library before its runtime
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

zrun 2 --steps 20 --ckpt-every 10 --ckpt-dir B --resume never
ok $? "base: 20 steps on 2 ranks, checkpoints at 10 and 20"

# ---------------------------------------------------------------- unreadable newest checkpoint
rm -rf D; cp -r B D
LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-20/state.h5 ZT_FAULT_OPS=open,access ZT_FAULT_AT=0 \
    ZT_FAULT_ERRNO=EACCES zrun 2 --steps 25 --ckpt-every 5 --ckpt-dir D
rc=$?
diag <(grep -E 'unusable|moved|resumed|pruned|error' run.out run.err)
ok $([ $rc = 0 ] && grep -q "D/step-20 is unusable: .*Permission denied.*falling back" run.err &&
     grep -q "resumed from D/step-10 at step 10" run.out; echo $?) \
   "EACCES on the newest checkpoint: auto-resume says why and falls back to step-10"
q=$(ls -d D/step-20.corrupt-* 2> /dev/null | head -n 1)
ok $([ -n "$q" ] && grep -q "moved it to $q (could not be read" run.err && [ -d D/step-20 ] &&
     [ -d D/step-25 ] && [ "$(cat D/latest)" = step-25 ]; echo $?) \
   "it is quarantined as step-20.corrupt-<time>, not replaced or pruned; the run went on to step-25"
"$ZTRAIN" ckpt verify "$q" > /dev/null 2>&1
ok $? "the quarantined checkpoint is intact: it verifies once readable"
# resume=PATH does not quarantine, but the prune of the 'abandoned' newer
# step-20 after saving step-15 verifies it first: unreadable -> moved aside
rm -rf D; cp -r B D
LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-20/state.h5 ZT_FAULT_OPS=open,access ZT_FAULT_AT=0 \
    ZT_FAULT_ERRNO=EIO zrun 2 --steps 15 --ckpt-every 5 --ckpt-dir D --resume D
rc=$?
diag <(grep -E 'unusable|moved|resumed|pruned|error' run.out run.err)
q=$(ls -d D/step-20.corrupt-* 2> /dev/null | head -n 1)
ok $([ $rc = 0 ] && grep -q "resumed from D/step-10" run.out && [ -n "$q" ] &&
     grep -q "D/step-20 is newer than step 15 (an abandoned run) but does not verify (.*Input/output error).*moved to $q instead of pruning it" run.err &&
     "$ZTRAIN" ckpt verify "$q" > /dev/null 2>&1; echo $?) \
   "EIO, resume=PATH: the save at step 15 does not prune the unreadable newer step-20, it quarantines it (intact)"

# ---------------------------------------------------------------- metadata checksums
"$FLIP" B/step-20/state.h5 --list > keys 2> flip.err
n=$(wc -l < keys)
ok $([ "$n" -gt 100 ] && grep -qx '/@step' keys && grep -qx '/@adam_t' keys && grep -qx '/@world_size' keys &&
     grep -qx '/model@n_embd' keys && grep -qx '/data@train_batch_size' keys && grep -qx '/config' keys &&
     grep -qx '/params/wte@offset' keys; echo $?) \
   "/meta_checksums covers every attribute (step, adam_t, world_size, model shape, batch size, offsets) and /config ($n entries)"
# every root and group attribute, /config, and the attributes of one tensor
bad=0; tried=0
while read -r key; do
    case "$key" in /params/*|/optimizer/m/*|/optimizer/v/*) case "$key" in /params/wte@*) ;; *) continue ;; esac ;; esac
    rm -rf V; cp -r B/step-20 V
    "$FLIP" V/state.h5 "$key" 2>> flip.err || { bad=$((bad + 1)); echo "# flip failed: $key"; continue; }
    tried=$((tried + 1))
    "$ZTRAIN" ckpt verify V > v.out 2> v.err
    r=$?
    if ! { [ $r = 1 ] && [ "$(wc -l < v.err)" = 1 ] && grep -qF "attribute $key: metadata checksum mismatch" v.err; } &&
       ! { [ "$key" = /config ] && [ $r = 1 ] && grep -qF "attribute /config: metadata checksum mismatch" v.err; }; then
        bad=$((bad + 1)); echo "# $key: exit $r: $(cat v.err)"
    fi
done < keys
ok $([ $bad = 0 ] && [ $tried -gt 50 ]; echo $?) \
   "a flipped bit in each of $tried attributes and /config: verify exits 1 with one line naming it"

# resume treats a metadata failure like a tensor failure: fallback + quarantine
for key in /@step /@adam_t /model@n_embd /data@train_batch_size /config; do
    rm -rf M; cp -r B M
    "$FLIP" M/step-20/state.h5 "$key"
    zrun 1 --steps 21 --ckpt-every 0 --ckpt-dir M
    rc=$?
    ok $([ $rc = 0 ] && grep -qF "M/step-20 is unusable: " run.err && grep -qF "attribute $key: metadata checksum mismatch" run.err &&
         grep -q "resumed from M/step-10 at step 10" run.out && ls -d M/step-20.corrupt-* > /dev/null 2>&1; echo $?) \
       "flipped $key: auto-resume falls back to step-10 and quarantines step-20"
done

# ---------------------------------------------------------------- output checked at start
# a read-only checkpoint directory (EROFS on the probe file) stops the run
# before step 1, even with checkpoint.every = 0 (one save, at the end)
LD_PRELOAD="$SHIM" ZT_FAULT_PATH=.ztrain-probe ZT_FAULT_OPS=open ZT_FAULT_AT=0 ZT_FAULT_ERRNO=EROFS \
    zrun 2 --steps 5 --ckpt-every 0 --ckpt-dir W --metrics w.jsonl
rc=$?
diag run.err
ok $([ $rc = 1 ] && [ "$(grep -c '^ztrain: error:' run.err)" = 1 ] &&
     grep -q "^ztrain: error: ztrain.checkpoint.dir=W is not writable (.*Read-only file system); checked at start, before step 1" run.err &&
     ! grep -q '"step": 1,' w.jsonl 2> /dev/null; echo $?) \
   "unwritable checkpoint directory: exit 1 with one error before step 1"
: > notadir
zrun 1 --steps 5 --ckpt-every 0 --ckpt-dir notadir/ck
ok $([ $? = 1 ] && grep -q "^ztrain: error: .*notadir/ck.*Not a directory" run.err; echo $?) \
   "a checkpoint directory that cannot be created: exit 1 with one error"
# metrics that cannot be written: one warning, training continues
zrun 1 --steps 5 --ckpt-every 0 --ckpt-dir X --metrics /dev/full
rc=$?
diag run.err
ok $([ $rc = 0 ] && [ "$(grep -c 'metrics' run.err)" = 1 ] &&
     grep -q "^warning: /dev/full: cannot write the metrics file: No space left on device; .*training continues" run.err &&
     [ -d X/step-5 ]; echo $?) \
   "--metrics /dev/full: one warning, the run trains to the end and saves (exit 0)"
done_testing
