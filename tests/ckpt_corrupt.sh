#!/bin/bash
# ckpt_corrupt.sh -- a flipped byte inside a tensor's data: `ztrain ckpt
# verify` names the tensor and exits 1; auto-resume says why, falls back to
# the previous checkpoint (and quarantines the bad one) and still ends
# bitwise equal to an uninterrupted run.  A truncated file and a directory
# with nothing usable fail with one clear line.
. "$(dirname "$0")/ckpt_lib.sh"

# byte offset of a dataset's data in an HDF5 file (h5dump -p prints it)
data_offset() {
    h5dump -p -d "$2" -H "$1" 2>/dev/null | sed -n 's/.*OFFSET \([0-9][0-9]*\).*/\1/p' | head -n 1
}
flip_byte() {  # flip_byte FILE OFFSET
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
command -v h5dump > /dev/null || skip_all "h5dump not installed (apt-get install hdf5-tools)"

zrun 2 --steps 30 --ckpt-every 10 --ckpt-dir R --resume never
ok $? "reference: 30 steps on 2 ranks"
tensor_sums R/step-30 > ref.sums
zrun 2 --steps 20 --ckpt-every 10 --ckpt-dir D --resume never
ok $? "20 steps, checkpoints at 10 and 20"

off=$(data_offset D/step-20/state.h5 /params/h0.attn.qkv.w)
ok $([ -n "$off" ] && [ "$off" -gt 0 ]; echo $?) "h5dump gives the file offset of params/h0.attn.qkv.w (${off:-none})"
flip_byte D/step-20/state.h5 $((off + 777))

"$ZTRAIN" ckpt verify D/step-20 > v.out 2> v.err
rc=$?
diag v.err
ok $([ $rc = 1 ] && [ "$(wc -l < v.err)" = 1 ] && grep -q "params/h0.attn.qkv.w: checksum mismatch" v.err &&
     grep -q "BAD params/h0.attn.qkv.w" v.out && [ "$(grep -c BAD v.out)" = 1 ]; echo $?) \
   "ztrain ckpt verify names the corrupted tensor (and only it) and exits 1"
"$ZTRAIN" ckpt verify D > vd.out 2> vd.err
rc=$?
ok $([ $rc = 1 ] && grep -q "step-10: OK" vd.out && grep -q "step-20: FAILED" vd.out; echo $?) \
   "ztrain ckpt verify DIR checks every checkpoint: step-10 OK, step-20 FAILED, exit 1"

zrun 2 --steps 30 --ckpt-every 10 --ckpt-dir D
rc=$?
diag <(grep -E 'unusable|moved|resumed' run.out run.err)
ok $([ $rc = 0 ] && grep -q "D/step-20 is unusable: .*params/h0.attn.qkv.w: checksum mismatch.*falling back" run.err &&
     grep -q "resumed from D/step-10 at step 10" run.out; echo $?) \
   "auto-resume says why step-20 is unusable and falls back to step-10"
ok $(ls -d D/step-20.corrupt-* > /dev/null 2>&1 && [ -d D/step-20 ] && [ -d D/step-30 ]; echo $?) \
   "the corrupt checkpoint is kept as step-20.corrupt-<time>; the run saved step-20 and step-30 again"
tensor_sums D/step-30 > d.sums 2>&1
check "after the fallback the run ends bitwise equal to the reference" cmp -s d.sums ref.sums

# a truncated file (e.g. copied half-way) is unusable too
rm -rf E; mkdir E; cp -r R/step-20 R/step-30 E/
truncate -s 4000 E/step-30/state.h5
"$ZTRAIN" ckpt verify E/step-30 > /dev/null 2> e.err
ok $([ $? = 1 ] && grep -q "step-30/state.h5" e.err; echo $?) "a truncated checkpoint fails verify with one line naming the file"
zrun 2 --steps 30 --ckpt-dir E
ok $([ $? = 0 ] && grep -q "resumed from E/step-20" run.out; echo $?) "auto-resume skips the truncated one"

# nothing usable: fail (exit 1) with one line instead of silently starting over
rm -rf F; mkdir F; cp -r R/step-30 F/
off=$(data_offset F/step-30/state.h5 /optimizer/v/lnf.b)
flip_byte F/step-30/state.h5 $((off + 3))
zrun 2 --steps 40 --ckpt-dir F
rc=$?
diag run.err
ok $([ $rc = 1 ] && grep -q "^ztrain: error: .*no usable checkpoint in F" run.err &&
     grep -q "optimizer/v/lnf.b" run.err; echo $?) \
   "no usable checkpoint: exit 1, the error names the bad tensor"
done_testing
