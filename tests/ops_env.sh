#!/bin/bash
# ops_env.sh -- every environment variable ztrain reads as a setting is
# validated like a configuration key (issue 45, item 6d): a value that is not
# of its kind (garbage, trailing characters, out of range) stops the command
# with one line naming the variable, its value and what it takes, exit 2;
# before, each of these was ignored or read as something else.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export ZTRAIN_REQUEUE=false
unset ZTRAIN_PROGRESS ZTRAIN_PROGRESS_INTERVAL ZTRAIN_CRASH_REPORT ZTRAIN_GPU_BIND ZTRAIN_SLURM_RANK \
      ZTRAIN_SLURM_LOCALID SLURM_PROCID SLURM_LOCALID SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_NPROCS \
      SLURM_NTASKS_PER_NODE SLURM_TASKS_PER_NODE ZT_CKPT_CRASH_AT ZT_CKPT_CRASH_RANK ZT_CKPT_WRITER_NICE \
      ZT_CKPT_WRITE_DELAY_MS ZT_CKPT_COPY_DELAY_MS ZT_CKPT_STEP_SLEEP_MS ZT_CKPT_DIRECT_IO ZT_TEST_OVERFLOW_STEPS
head -c 20000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
RUN=(train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
     --sample-tokens 0 --steps 2 --log-every 100 --resume never --ckpt-dir ck)

# refused VAR=VALUE 'MESSAGE' ARGS...: ztrain ARGS with VAR=VALUE exits 2 with
# exactly "ztrain: error: MESSAGE" on stderr
refused() {
    local var=$1 msg=$2; shift 2
    env "$var" "$ZTRAIN" "$@" > out.txt 2> err.txt
    local rc=$?
    ok $([ $rc = 2 ] && [ "$(cat err.txt)" = "ztrain: error: $msg" ]; echo $?) "$var: refused ($(head -c 200 err.txt))"
    [ $rc = 2 ] || diag err.txt
}
I0='expected an integer from 0 to'
MS="$I0 3600000"
B='expected 1 or 0 (true/false, yes/no, on/off)'
# the CLI's own (before any work)
refused ZTRAIN_PROGRESS_INTERVAL=abc "ZTRAIN_PROGRESS_INTERVAL='abc': expected a number from 0 to 1e+06" \
    prep --input corpus.txt --output p
refused ZTRAIN_PROGRESS_INTERVAL=-1 "ZTRAIN_PROGRESS_INTERVAL='-1': expected a number from 0 to 1e+06" \
    ckpt list
refused ZTRAIN_PROGRESS=maybe "ZTRAIN_PROGRESS='maybe': $B" prep --input corpus.txt --output p
refused ZTRAIN_CRASH_REPORT=2 "ZTRAIN_CRASH_REPORT='2': $B" "${RUN[@]}" --print-config
refused ZTRAIN_PROGRESS_INTERVAL=5s "ZTRAIN_PROGRESS_INTERVAL='5s': expected a number from 0 to 1e+06" \
    "${RUN[@]}" --print-config
ok $([ ! -e p_train.bin ]; echo $?) "nothing was written by a refused prep"
# the checkpoint session's test hooks
refused ZT_CKPT_CRASH_AT=nosuch "ZT_CKPT_CRASH_AT='nosuch': expected [stop:]PHASE[@STEP] with PHASE one of startup, save_tensors, save_metadata, after_data_write, before_rename, after_rename_before_latest, during_prune and STEP an integer >= 0" "${RUN[@]}"
refused ZT_CKPT_CRASH_AT=startup@2x "ZT_CKPT_CRASH_AT='startup@2x': expected [stop:]PHASE[@STEP] with PHASE one of startup, save_tensors, save_metadata, after_data_write, before_rename, after_rename_before_latest, during_prune and STEP an integer >= 0" "${RUN[@]}"
refused ZT_CKPT_CRASH_RANK=1 "ZT_CKPT_CRASH_RANK='1': $I0 0" "${RUN[@]}"
refused ZT_CKPT_WRITER_NICE=20 "ZT_CKPT_WRITER_NICE='20': $I0 19" "${RUN[@]}"
refused ZT_CKPT_WRITE_DELAY_MS=1s "ZT_CKPT_WRITE_DELAY_MS='1s': $MS" "${RUN[@]}"
refused ZT_CKPT_COPY_DELAY_MS=-5 "ZT_CKPT_COPY_DELAY_MS='-5': $MS" "${RUN[@]}"
refused ZT_CKPT_STEP_SLEEP_MS=abc "ZT_CKPT_STEP_SLEEP_MS='abc': $MS" "${RUN[@]}"
refused ZT_CKPT_DIRECT_IO=maybe "ZT_CKPT_DIRECT_IO='maybe': $B" "${RUN[@]}"
# the Slurm plugin's and Slurm's
refused ZTRAIN_GPU_BIND=bogus "ZTRAIN_GPU_BIND='bogus': expected one of none, local, map:..." "${RUN[@]}"
refused ZTRAIN_SLURM_RANK=x1 "ZTRAIN_SLURM_RANK='x1': $I0 2147483647" "${RUN[@]}"
refused SLURM_PROCID=1x "SLURM_PROCID='1x': $I0 2147483647" "${RUN[@]}"
refused ZT_TEST_OVERFLOW_STEPS=abc "ZT_TEST_OVERFLOW_STEPS='abc': expected up to 16 comma-separated step numbers >= 1" "${RUN[@]}"
EST=(estimate --config "$ZT_SRCDIR/configs/tiny.json")
refused 'SLURM_TASKS_PER_NODE=2(x' "SLURM_TASKS_PER_NODE='2(x': expected task counts per node such as 2(x3),1 (each from 1 to 16777215)" "${EST[@]}" --world-size 2
refused SLURM_NTASKS=0 "SLURM_NTASKS='0': expected an integer from 1 to 16777215" "${EST[@]}"
refused SLURM_NTASKS_PER_NODE=4x "SLURM_NTASKS_PER_NODE='4x': expected an integer from 1 to 16777215" "${EST[@]}" --world-size 4
# two ranks: one line, from rank 0
ZT_CKPT_WRITER_NICE=x mpirun_np 2 "$ZTRAIN" "${RUN[@]}" --micro-batch 2 > out.txt 2> err.txt
rc=$?
ok $([ $rc != 0 ] && [ "$(grep -c '^ztrain: error:' err.txt)" = 1 ] &&
     grep -qx "ztrain: error: ZT_CKPT_WRITER_NICE='x': $I0 19" err.txt; echo $?) \
   "2 ranks: one line ($(grep '^ztrain: error' err.txt | head -c 200))"
# values of the right kind still work
ZTRAIN_PROGRESS=off ZTRAIN_PROGRESS_INTERVAL=0 ZTRAIN_CRASH_REPORT=0 ZT_CKPT_DIRECT_IO=no ZT_CKPT_WRITER_NICE=10 \
    ZTRAIN_GPU_BIND=none SLURM_TASKS_PER_NODE='2(x2),1' "$ZTRAIN" "${RUN[@]}" > out.txt 2> err.txt
ok $? "valid values run (ZTRAIN_PROGRESS=off, ZTRAIN_PROGRESS_INTERVAL=0, ZT_CKPT_DIRECT_IO=no, ...)"
ZTRAIN_PROGRESS=0 "$ZTRAIN" prep --input corpus.txt --output q > out.txt 2> err.txt
ok $([ $? = 0 ] && [ ! -s err.txt ]; echo $?) "ZTRAIN_PROGRESS=0: prep runs, no progress"
done_testing
