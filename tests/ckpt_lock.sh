#!/bin/bash
# ckpt_lock.sh -- one run per checkpoint directory (docs/checkpoints.md, "One
# job per directory").  A run A (1 rank, then 2 ranks) trains slowly on D
# with a Slurm job id given to its ranks; a run B started on D meanwhile is
# refused at start with exit 1 and one error line naming A's host, rank 0's
# pid and the job id, and changes nothing: A finishes, no checkpoint was
# quarantined, and A's final checkpoint restores.  A run killed with
# kill -9 leaves its lock file; the next run takes it over (saying whose it
# was) and resumes.  An earlier instance of the same Slurm job that is still
# ending is waited for.  On a file system without locks (faultshim makes
# every fcntl lock fail with ENOSYS) the file's contents decide: a live
# holder on this host refuses, a dead one is taken over, one on another host
# refuses until ztrain.checkpoint.lock=break.
. "$(dirname "$0")/ckpt_lib.sh"
SHIM="$ZT_BUILDDIR/tests/.libs/libfaultshim.so"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
HOST=$(hostname)
JOB=4242

# start_a NP DIR STEPS [ENV...]: run A in the background (steps slowed to
# 300 ms) with SLURM_JOB_ID=$JOB on its ranks; APID (mpirun), A0 (rank 0's
# pid, once its lock file names it and it has started a periodic save)
start_a() {
    local np=$1 dir=$2 steps=$3; shift 3
    env ZT_CKPT_STEP_SLEEP_MS=300 "$@" "$ZT_MPIRUN" --oversubscribe -np "$np" --bind-to none \
        -x SLURM_JOB_ID=$JOB "$ZTRAIN" train "${COMMON[@]}" --micro-batch $((12 / np)) \
        --steps "$steps" --ckpt-every 5 --ckpt-keep 3 --ckpt-dir "$dir" > a.out 2> a.err &
    APID=$! A0=
    for _ in $(seq 600); do
        kill -0 $APID 2> /dev/null || break
        local p
        p=$(sed -n 's/^pid=//p' "$dir/.ztrain.lock" 2> /dev/null)
        if [ -n "$p" ] && grep -q 'checkpoint: saving step' a.out 2> /dev/null &&
           rank_pids $APID | grep -qx "$p"; then A0=$p; break; fi
        sleep 0.1
    done
}
# run_b NP DIR [ARGS...]: a second run on DIR, in the foreground; BRC
run_b() {
    local np=$1 dir=$2; shift 2
    "$ZT_MPIRUN" --oversubscribe -np "$np" --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch $((12 / np)) --steps 40 --ckpt-dir "$dir" "$@" > b.out 2> b.err
    BRC=$?
}

for np in 1 2; do
    D=D$np
    start_a $np $D 30
    ok $([ -n "$A0" ]; echo $?) "$np rank(s): run A trains on $D (rank 0 pid ${A0:-?}, Slurm job $JOB) and saves"
    "$ZTRAIN" ckpt list $D > list.out 2>&1
    ok $(grep -q "in use by a run: host $HOST, pid $A0, Slurm job $JOB" list.out; echo $?) \
       "$np rank(s): 'ztrain ckpt list' (read-only, no lock) names the run using $D"
    run_b $np $D
    diag <(grep -v pwritev b.err | head -n 3)
    nerr=$(grep -c '^ztrain: error:' b.err)
    ok $([ $BRC = 1 ] && [ "$nerr" = 1 ] && kill -0 $APID 2> /dev/null &&
         grep -Eq "^ztrain: error: ztrain.checkpoint.dir=$D is in use by another run \(host $HOST, pid $A0, Slurm job $JOB, started [-0-9]+ [0-9:]+ UTC; it holds the lock $D/.ztrain.lock\): wait for it to end, or use another ztrain.checkpoint.dir; if that run is gone, set ztrain.checkpoint.lock=break" b.err &&
         ! grep -Eq 'resumed|unusable|quarantin|removed .* stale' b.out b.err; echo $?) \
       "$np rank(s): run B on $D while A runs: exit $BRC, one error line naming A's host, pid $A0 and Slurm job $JOB (A still running)"
    wait $APID
    arc=$?
    ok $([ $arc = 0 ] && [ "$(cat $D/latest)" = step-30 ] && ! ls $D | grep -q corrupt &&
         [ ! -e $D/.ztrain.lock ]; echo $?) \
       "$np rank(s): A finishes (exit $arc), step-30 is latest, nothing quarantined, its lock file removed"
    zrun $np --steps 30 --ckpt-dir $D
    ok $([ $? = 0 ] && grep -q "resumed from $D/step-30 at step 30" run.out; echo $?) \
       "$np rank(s): A's final checkpoint restores"

    # kill -9 of every rank of a run: its lock file stays; the next run
    # takes it over and resumes
    start_a $np $D 40
    ok $([ -n "$A0" ]; echo $?) "$np rank(s): a run resumed in $D (rank 0 pid ${A0:-?})"
    sleep 1
    for p in $(rank_pids $APID); do kill -9 "$p"; done
    wait $APID 2> /dev/null
    last=$(cat $D/latest)
    "$ZTRAIN" ckpt list $D > list.out 2>&1
    ok $(grep -q "$D/.ztrain.lock names a run that ended without removing it: host $HOST, pid $A0, Slurm job $JOB" list.out; echo $?) \
       "$np rank(s): killed with kill -9 at $last: its lock file stays, 'ztrain ckpt list' says it ended without removing it"
    zrun $np --steps 40 --ckpt-dir $D
    ok $([ $? = 0 ] && grep -q "checkpoint: took over $D/.ztrain.lock from a run that ended without releasing it (host $HOST, pid $A0, Slurm job $JOB" run.out &&
         grep -q "resumed from $D/$last at step ${last#step-}" run.out && [ "$(cat $D/latest)" = step-40 ] &&
         [ ! -e $D/.ztrain.lock ]; echo $?) \
       "$np rank(s): the next run takes the stale lock over (naming pid $A0), resumes from $last and finishes"
done

# the same Slurm job requeued while its earlier instance is still ending:
# waited for, then resumed from its last checkpoint
start_a 2 W 20
ok $([ -n "$A0" ]; echo $?) "run A of Slurm job $JOB on W (rank 0 pid ${A0:-?})"
"$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none -x SLURM_JOB_ID=$JOB -x SLURM_RESTART_COUNT=1 \
    "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 --steps 25 --ckpt-dir W > b.out 2> b.err
BRC=$?
wait $APID
arc=$?
ok $([ $BRC = 0 ] && [ $arc = 0 ] &&
     grep -q "checkpoint: ztrain.checkpoint.dir=W is still locked by an earlier run of this job (host $HOST, pid $A0, Slurm job $JOB" b.out &&
     grep -q "resumed from W/step-20 at step 20" b.out && [ "$(cat W/latest)" = step-25 ]; echo $?) \
   "its requeued instance (SLURM_RESTART_COUNT=1) waits for it (exit $arc), then resumes from step-20 and finishes (exit $BRC)"

# no locks on the file system (every fcntl lock fails with ENOSYS): the
# contents of the lock file decide
if [ -f "$SHIM" ]; then
    NL=(LD_PRELOAD="$SHIM" ZT_FAULT_PATH=.ztrain.lock ZT_FAULT_OPS=lock ZT_FAULT_AT=0 ZT_FAULT_ERRNO=ENOSYS)
    start_a 1 N 40 "${NL[@]}"
    ok $([ -n "$A0" ]; echo $?) "no locks: run A on N (rank 0 pid ${A0:-?})"
    env "${NL[@]}" "$ZT_MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch 12 --steps 40 --ckpt-dir N > b.out 2> b.err
    BRC=$?
    ok $([ $BRC = 1 ] && [ "$(grep -c '^ztrain: error:' b.err)" = 1 ] &&
         grep -q "^ztrain: error: ztrain.checkpoint.dir=N is in use by another run (host $HOST, pid $A0, Slurm job $JOB, started .*; named by N/.ztrain.lock, and its process is running on this host; this file system does not support locks (fcntl: " b.err; echo $?) \
       "no locks: run B is refused (exit $BRC): the holder is named and its process runs on this host"
    sleep 1
    for p in $(rank_pids $APID); do kill -9 "$p"; done
    wait $APID 2> /dev/null
    last=$(cat N/latest)
    env "${NL[@]}" "$ZT_MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch 12 --steps 40 --ckpt-dir N > c.out 2> c.err
    ok $([ $? = 0 ] && grep -q "took over N/.ztrain.lock from a run that ended without releasing it (host $HOST, pid $A0, Slurm job $JOB, .*its process is gone" c.out &&
         grep -q "resumed from N/$last" c.out && [ ! -e N/.ztrain.lock ]; echo $?) \
       "no locks: after kill -9 of A the next run takes its lock file over (its process is gone) and resumes from $last"
    printf 'host=elsewhere-%s\npid=4321\nslurm_job=99\n' "$HOST" > N/.ztrain.lock
    env "${NL[@]}" "$ZT_MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch 12 --steps 41 --ckpt-dir N > c.out 2> c.err
    BRC=$?
    ok $([ $BRC = 1 ] && grep -q "^ztrain: error: ztrain.checkpoint.dir=N is in use by another run (host elsewhere-$HOST, pid 4321, Slurm job 99; named by N/.ztrain.lock; this file system does not support locks (.*), so whether that run is still running cannot be checked from this host): wait for it to end, or use another ztrain.checkpoint.dir; if that run is gone, set ztrain.checkpoint.lock=break" c.err &&
         [ "$(cat N/latest)" = step-40 ]; echo $?) \
       "no locks: a lock file naming another host refuses the run (exit $BRC): it cannot be checked from here"
    env "${NL[@]}" "$ZT_MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train "${COMMON[@]}" \
        --micro-batch 12 --steps 41 --ckpt-dir N --ckpt-lock break > c.out 2> c.err
    ok $([ $? = 0 ] && grep -q "^warning: checkpoint: ztrain.checkpoint.lock=break: taking ztrain.checkpoint.dir=N over from host elsewhere-$HOST, pid 4321" c.err &&
         [ "$(cat N/latest)" = step-41 ] && [ ! -e N/.ztrain.lock ]; echo $?) \
       "no locks: --ckpt-lock break takes it over with one warning and trains"
else
    skip "no locks: the fallback on the lock file's contents" "fault shim not built"
fi
done_testing
