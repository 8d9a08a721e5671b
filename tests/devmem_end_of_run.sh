#!/bin/bash
# devmem_end_of_run.sh -- the end of `ztrain train` (its text sample) against
# the memory limit, on cpu-strict emulating a small device
# (ztrain.strict_device_memory).  The figures come from `ztrain estimate
# --json` of the same configuration (its plan is the run's).
#   (a) training fits and the sample does not: the run says so before step 1,
#       trains, skips the sample with one line saying why and how to get it,
#       and ends 0 (the emulated device refuses any allocation over it);
#       estimate --json: fits true, end_of_run_fits false;
#   (b) --sample-tokens 0, or a sample short enough to fit: no skip;
#   (c) the sample needs no more than training (the training and eval blocks
#       are freed first): on a device of exactly the training peak the sample
#       runs; end_of_run_fits true;
#   (d) the planned sample peak is exact: on a device of that many bytes the
#       sample runs, one byte less and it runs out of memory (the check
#       overridden by --memory-limit).
. "$(dirname "$0")/lib.sh"
need_mpi
need_python3
in_tmpdir
clean_ztrain_env
byte_corpus 120000
COMMON=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
        --backend cpu-strict --steps 3 --eval-every 3 --eval-batches 2 --resume never --log-every 100)
# windows of 8 tokens, a context of 256: the default sample's [1, 256] block is
# larger than what training holds
SHORT=(--seq-len 8 --context 256)
# zrun TAG ARGS...: files TAG.out, TAG.err; returns the exit status
zrun() {
    local tag=$1; shift
    mpirun_np 1 "$ZTRAIN" train "${COMMON[@]}" --ckpt-dir "ck_$tag" "$@" > "$tag.out" 2> "$tag.err"
}
# est TAG ARGS...: estimate --json (one rank, GPU target) into TAG.json
est() {
    local tag=$1; shift
    "$ZTRAIN" estimate "${COMMON[@]}" --ckpt-dir "ck_$tag" --world-size 1 --device gpu "$@" --json \
        > "$tag.json" 2> "$tag.err"
}
# key FILE KEY: one value of an estimate --json
key() { python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"; }

# ---- (a) training fits, the sample does not
est e0 "${SHORT[@]}" --memory-limit 1G
P=$(key e0.json peak_bytes); S=$(key e0.json sample_peak_bytes)
L=$(( (P + S) / 2 ))
[ -n "$P" ] && [ -n "$S" ] && [ "$S" -gt "$P" ]; r=$?
[ $r = 0 ] || diag e0.err
ok $r "(a) estimate: the [1, 256] sample's peak $S is above the training peak $P (limit between: $L)"
est ea "${SHORT[@]}" --memory-limit "$L"
[ "$(key ea.json fits)" = true ] && [ "$(key ea.json end_of_run_fits)" = false ]; r=$?
"$ZTRAIN" estimate "${COMMON[@]}" "${SHORT[@]}" --world-size 1 --device gpu --memory-limit "$L" > ea.txt 2>&1
grep -q "^end of run does not fit: .* > .*; \`ztrain train\` skips the text sample (ztrain sample --checkpoint DIR on a larger device)$" ea.txt || r=1
[ $r = 0 ] || { diag ea.json; diag ea.txt; }
ok $r "(a) estimate --json: fits true, end_of_run_fits false; the text says the run skips the sample"
zrun a "${SHORT[@]}" --strict-device-memory "$L"; rc=$?
first=$(grep -n "^memory: the text sample at the end of the run (\[1, 256\] forward) does not fit: predicted peak device memory .* per rank exceeds the limit .* (free device memory of cpu-strict emulated device of $L bytes: .*); it will be skipped (sample from the checkpoint on a larger device: ztrain sample --checkpoint DIR)$" a.out | cut -d: -f1)
step1=$(grep -n "^step *1/3" a.out | cut -d: -f1)
[ $rc = 0 ] && [ -n "$first" ] && [ -n "$step1" ] && [ "$first" -lt "$step1" ] &&
    grep -q "^sample: skipped, it does not fit: predicted peak device memory .* exceeds the limit .*(ztrain sample --checkpoint ck_a/step-3 on a larger device; --sample-tokens sets its length, 0 none)$" a.out &&
    ! grep -q -- "---- sample" a.out && [ -d ck_a/step-3 ] && [ ! -s a.err ]; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc"); diag a.out; diag a.err; }
ok $r "(a) cpu-strict device of $L bytes: said before step 1, trained, skipped the sample with one line, exit 0"

# ---- (b) the steps that will run: none, or a sample that fits
zrun b0 "${SHORT[@]}" --strict-device-memory "$L" --sample-tokens 0; rc=$?
[ $rc = 0 ] && ! grep -q "sample" b0.out; r=$?
[ $r = 0 ] || { diag b0.out; diag b0.err; }
ok $r "(b) --sample-tokens 0: nothing said about a sample, exit 0"
zrun b8 "${SHORT[@]}" --strict-device-memory "$L" --sample-tokens 8; rc=$?
[ $rc = 0 ] && grep -q -- "^---- sample (8 tokens" b8.out && ! grep -q "does not fit" b8.out; r=$?
[ $r = 0 ] || { diag b8.out; diag b8.err; }
ok $r "(b) --sample-tokens 8 (a [1, 8] forward) fits the same device: the sample runs"

# ---- (c) the sample runs where training's blocks were: a device of exactly the training peak
est ec --memory-limit 1G
P=$(key ec.json peak_bytes)
[ "$(key ec.json end_of_run_peak_bytes)" = "$P" ] && [ "$(key ec.json sample_peak_bytes)" = "$P" ]; r=$?
est ec2 --memory-limit "$P"
[ "$(key ec2.json fits)" = true ] && [ "$(key ec2.json end_of_run_fits)" = true ] || r=1
[ $r = 0 ] || { diag ec.json; diag ec2.err; }
ok $r "(c) estimate: seq_len = context, the sample's peak is the training peak $P; end_of_run_fits true"
zrun c --strict-device-memory "$P"; rc=$?
[ $rc = 0 ] && grep -q -- "^---- sample (256 tokens" c.out && ! grep -q "does not fit" c.out; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc"); diag c.out; diag c.err; }
ok $r "(c) cpu-strict device of $P bytes (the training peak): trains and samples, exit 0"

# ---- (d) the planned sample peak, byte for byte
zrun d0 "${SHORT[@]}" --strict-device-memory "$S" --memory-limit 1G; rc0=$?
zrun d1 "${SHORT[@]}" --strict-device-memory $((S - 1)) --memory-limit 1G; rc1=$?
[ $rc0 = 0 ] && grep -q -- "^---- sample (256 tokens" d0.out && [ $rc1 = 1 ] &&
    grep -q "^ztrain: error: activations for B=1 T=256: out of cpu-strict device memory" d1.err; r=$?
[ $r = 0 ] || { diag <(echo "exit $rc0 $rc1"); diag d0.err; diag d1.err; }
ok $r "(d) the sample runs on a device of its planned peak $S bytes and not on one byte less"
done_testing
