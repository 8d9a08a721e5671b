#!/bin/bash
# ckpt_io_faults.sh -- I/O failures during a 2-rank save and restore
# (docs/checkpoints.md, "Failure model"), injected by the LD_PRELOAD shim
# tests/faultshim.c: open, write/pwrite, fsync and rename of the save's files
# fail with ENOSPC, EIO, EACCES or EROFS at call index K, on both ranks, on
# rank 0 only and on rank 1 only.  Every case must end within
# comm_timeout_s + a few seconds with exit 1 and one clear error; the previous
# checkpoint is still `latest` and verifies, nothing of the failed save is
# left; a rerun resumes from it.  Read failures during a restore on one rank
# make the resume fall back.  ztrain.checkpoint.on_failure=continue keeps
# training and retries at the next save.
. "$(dirname "$0")/ckpt_lib.sh"
SHIM="$ZT_BUILDDIR/tests/.libs/libfaultshim.so"
[ -f "$SHIM" ] || skip_all "fault shim not built ($SHIM)"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
TIMEOUT=5           # ztrain.comm_timeout_s in these runs
BOUND=$((TIMEOUT + 15))
BUDGET=${ZT_FAULT_BUDGET_S:-90}   # the loop stops early (and says so) beyond this
OPS=open,write,fsync,rename
ERRNOS=(ENOSPC EIO EACCES EROFS)

zrun 2 --steps 20 --ckpt-every 10 --ckpt-dir B --resume never
ok $? "base: 20 steps on 2 ranks, checkpoints at 10 and 20"

# frun ENV...: resume B's copy D at step 20, train one step and save step-21
# with the fault environment given; rc, elapsed seconds in RC, EL
frun() {
    rm -rf D; cp -r B D; rm -f flog
    local t0=$SECONDS
    env LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-21.tmp,D/latest.tmp ZT_FAULT_OPS=$OPS ZT_FAULT_LOG="$PWD/flog" "$@" \
        timeout -s KILL $((BOUND + 30)) "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch 6 --steps 21 --ckpt-dir D --ztrain.comm_timeout_s=$TIMEOUT > run.out 2> run.err
    RC=$?; EL=$((SECONDS - t0))
}

# the calls of one fault-free save, per rank
frun
ok $([ $RC = 0 ] && [ "$(cat D/latest)" = step-21 ]; echo $?) "a fault-free save of step-21 through the shim"
N0=$(awk '$1 == 0' flog | wc -l); N1=$(awk '$1 == 1' flog | wc -l)
diag <(awk '{print "rank " $1 ": " $2}' flog | sort | uniq -c)
ok $([ "$N0" -gt 10 ] && [ "$N1" -gt 5 ]; echo $?) "one save makes $N0 matching calls on rank 0, $N1 on rank 1"

# the calls to fail: every open, fsync and rename and about 10 writes
# spread over the save, of rank 0's calls (rank 1 makes fewer: its index is
# taken modulo N1); the target rotates over both ranks / rank 0 / rank 1
# and the errno over ENOSPC, EIO, EACCES, EROFS
KS=$({ awk '$1 == 0 && $2 != "write" {print $3}' flog; seq 1 $(( (N0 + 9) / 10 )) "$N0"; } | sort -n | uniq)
cp flog flog.ref
cases=0 bad=0 fired=0 absorbed=0 t_start=$SECONDS stopped=
TARGETS=(both 0 1)
for k in $KS; do
    [ $((SECONDS - t_start)) -gt "$BUDGET" ] && { stopped=1; break; }
    target=${TARGETS[$((cases % 3))]}; err=${ERRNOS[$(( (cases / 3 + cases) % 4 ))]}
    kk=$k rank=$target
    [ $target = both ] && rank=
    [ $target = 1 ] && kk=$(( (k - 1) % N1 + 1 ))
    frun ZT_FAULT_AT=$kk ZT_FAULT_ERRNO=$err ZT_FAULT_RANK=$rank
    cases=$((cases + 1))
    what="rank(s) $target, call $kk ($(awk -v r="${rank:-0}" -v k="$kk" '$1 == r && $3 == k {print $2; exit}' flog.ref)), $err"
    grep -q FAILED flog || { echo "# $what: no call failed"; bad=$((bad + 1)); continue; }
    if [ $RC = 0 ] && [ "$(cat D/latest)" = step-21 ] && "$ZTRAIN" ckpt verify D/step-21 > /dev/null 2>&1; then
        absorbed=$((absorbed + 1)); echo "# $what: absorbed (the save succeeded and verifies)"; continue
    fi
    fired=$((fired + 1))
    nerr=$(grep -c '^ztrain: error:' run.err)
    if [ $RC != 1 ] || [ "$EL" -gt $BOUND ] || [ "$nerr" != 1 ] || [ "$(cat D/latest)" != step-20 ] ||
       [ -e D/step-21 ] || [ -e D/step-21.tmp ] || ! "$ZTRAIN" ckpt verify D/step-20 > /dev/null 2>&1; then
        bad=$((bad + 1))
        echo "# $what: exit $RC after ${EL}s, $nerr error lines, latest $(cat D/latest), $(ls D | tr '\n' ' ')"
        grep -E '^ztrain: error|^warning' run.err | head -n 3 | sed 's/^/#   /'
    else
        echo "# $what: exit 1 after ${EL}s: $(grep '^ztrain: error:' run.err | cut -c 1-160)"
    fi
done
[ -n "$stopped" ] && echo "# the loop stopped after ${BUDGET}s (ZT_FAULT_BUDGET_S) with $cases cases run"
ok $([ $bad = 0 ] && [ $fired -ge 12 ]; echo $?) \
   "$fired injected save failures (and $absorbed absorbed by a retry: the save succeeded and verifies) (both ranks, rank 0 only, rank 1 only; ENOSPC, EIO, EACCES, EROFS): each ends within ${BOUND}s, exit 1, one error, step-20 stays latest and verifies, no step-21 left"
grep '^ztrain: error' run.err | head -n 1 | sed 's/^/# last case: /'
# the last failed case's directory: a rerun resumes from step-20
zrun 2 --steps 21 --ckpt-dir D
ok $([ $? = 0 ] && grep -q "resumed from D/step-20 at step 20" run.out && [ "$(cat D/latest)" = step-21 ]; echo $?) \
   "after a failed save a rerun resumes from the previous checkpoint and saves"

# one rank: ENOSPC used to print the error and then crash in MPI_Finalize
rm -rf D; cp -r B D
LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-21.tmp ZT_FAULT_OPS=write ZT_FAULT_AT=40 ZT_FAULT_ERRNO=ENOSPC \
    timeout -s KILL 60 "$ZT_MPIRUN" --oversubscribe -np 1 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 12 \
    --steps 21 --ckpt-dir D > run.out 2> run.err
rc=$?
ok $([ $rc = 1 ] && [ "$(grep -c '^ztrain: error:' run.err)" = 1 ] && [ "$(cat D/latest)" = step-20 ] &&
     [ ! -e D/step-21.tmp ] && [ ! -e D/step-21 ]; echo $?) \
   "1 rank, ENOSPC during the save: exit 1 (not a crash), one error, step-20 stays latest (exit $rc)"

# ---------------------------------------------------------------- on_failure=continue
# the fault: rank 1's last write of a save (a tensor write: the metadata
# is flushed before the tensor data; a failed write inside HDF5's
# collective metadata flush is bounded by the watchdog only:
# docs/checkpoints.md, "Failure model")
W1=$(awk '$1 == 1 && $2 == "write"' flog.ref | wc -l)
# step 22 is a periodic save: written in the background (checkpoint.async,
# the default: the fault hits the background writer's pwrite) and again
# synchronously (--ckpt-async false: the writes of the save step itself)
for mode in background synchronous; do
    flags=()
    [ $mode = synchronous ] && flags=(--ckpt-async false)
    rm -rf C; cp -r B C
    LD_PRELOAD="$SHIM" ZT_FAULT_PATH=C/step-22.tmp ZT_FAULT_OPS=write ZT_FAULT_AT=$W1 ZT_FAULT_ERRNO=ENOSPC ZT_FAULT_RANK=1 \
        zrun 2 --steps 24 --ckpt-every 2 --ckpt-dir C --ckpt-on-failure continue "${flags[@]}"
    rc=$?
    diag <(grep -E 'warning|error' run.err)
    ok $([ $rc = 0 ] && [ "$(grep -c 'the save at step 22 failed and was abandoned on every rank: rank 1: .*training continues' run.err)" = 1 ] &&
         { [ $mode = synchronous ] || grep -q 'saving step 22 (checkpoint.every, in the background)' run.out; } &&
         [ ! -e C/step-22 ] && [ ! -e C/step-22.tmp ] && [ "$(cat C/latest)" = step-24 ] && "$ZTRAIN" ckpt verify C/step-24 > /dev/null; echo $?) \
       "checkpoint.on_failure=continue, $mode save: ENOSPC on rank 1 at step 22 is one warning; training goes on and step-24 is saved"
done

# ---------------------------------------------------------------- restore
# read failures on one rank while resuming (parallel restore: every rank
# reads) make the resume fall back to the previous checkpoint
for r in 0 1; do
    rm -rf D; cp -r B D
    LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-20/state.h5 ZT_FAULT_OPS=read ZT_FAULT_AT=5 ZT_FAULT_ERRNO=EIO ZT_FAULT_RANK=$r \
        timeout -s KILL 60 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train "${COMMON[@]}" --micro-batch 6 \
        --steps 21 --ckpt-dir D --ckpt-restore parallel --ztrain.comm_timeout_s=$TIMEOUT > run.out 2> run.err
    rc=$?
    diag <(grep -E 'unusable|moved|resumed|error' run.out run.err)
    ok $([ $rc = 0 ] && grep -q "D/step-20 is unusable: " run.err && grep -q "resumed from D/step-10 at step 10" run.out &&
         ls -d D/step-20.corrupt-* > /dev/null 2>&1; echo $?) \
       "parallel restore, EIO on a read of rank $r: the resume falls back to step-10 and quarantines step-20"
done
# a bounded sweep: open and read failures at call indices spread over a
# parallel restore, on rank 0 or rank 1 (alternating), with every errno:
# each resume ends in time: exit 0 from step-20 (a failure HDF5 or MPI-IO
# absorbed, e.g. a probing read) or from step-10 with step-20 quarantined,
# or (a read inside one of HDF5's own collectives) exit 1 through the
# watchdog with one error naming the restore; step-20 is never deleted
bad=0 fell=0 n=0 stalled=0
for k in 1 2 3 10 40 80 120 160 190; do
    r=$((n % 2)); err=${ERRNOS[$((n % 4))]}; n=$((n + 1))
    rm -rf D; cp -r B D
    t0=$SECONDS
    LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-20/state.h5 ZT_FAULT_OPS=open,read ZT_FAULT_AT=$k ZT_FAULT_ERRNO=$err \
        ZT_FAULT_RANK=$r timeout -s KILL 60 "$ZT_MPIRUN" --oversubscribe -np 2 --bind-to none "$ZTRAIN" train \
        "${COMMON[@]}" --micro-batch 6 --steps 21 --ckpt-dir D --ckpt-restore parallel \
        --ztrain.comm_timeout_s=$TIMEOUT > run.out 2> run.err
    rc=$? el=$((SECONDS - t0))
    if [ $rc = 0 ] && [ $el -le $BOUND ] && grep -q "resumed from D/step-10 at step 10" run.out &&
       ls -d D/step-20.corrupt-* > /dev/null 2>&1; then
        fell=$((fell + 1))
    elif [ $rc = 1 ] && [ $el -le $BOUND ] && [ "$(grep -c '^ztrain: error:' run.err)" = 1 ] &&
         grep -q '^ztrain: error: rank .*checkpoint restore of D/step-20' run.err && [ -e D/step-20/state.h5 ]; then
        stalled=$((stalled + 1))   # HDF5's collectives diverged: the watchdog ended it
    elif ! { [ $rc = 0 ] && [ $el -le $BOUND ] && grep -q "resumed from D/step-20 at step 20" run.out; }; then
        bad=$((bad + 1)); echo "# restore, rank $r, call $k, $err: exit $rc after ${el}s; $(ls D | tr '\n' ' ')"
        grep -E '^ztrain: error|unusable' run.err | head -n 2 | sed 's/^/#   /'
    fi
done
ok $([ $bad = 0 ] && [ $fell -ge 5 ]; echo $?) \
   "parallel restore, $n injected open/read failures on rank 0 or 1: each ends in time; $fell fall back to step-10 (step-20 quarantined, never deleted), $stalled stop through the watchdog, the rest resume from step-20"

# one-reader restore: rank 0 reads everything
rm -rf D; cp -r B D
LD_PRELOAD="$SHIM" ZT_FAULT_PATH=D/step-20/state.h5 ZT_FAULT_OPS=read ZT_FAULT_AT=200 ZT_FAULT_ERRNO=EIO ZT_FAULT_RANK=0 \
    zrun 2 --steps 21 --ckpt-dir D
rc=$?
diag <(grep -E 'unusable|moved|resumed|error' run.out run.err)
ok $([ $rc = 0 ] && grep -q "D/step-20 is unusable: " run.err && grep -q "resumed from D/step-10 at step 10" run.out; echo $?) \
   "one-reader restore, EIO on a read of rank 0: the resume falls back to step-10"
done_testing
