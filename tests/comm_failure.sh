#!/bin/bash
# comm_failure.sh -- a rank killed with SIGKILL makes the job end within 60 s
# with a message naming the failed rank; a rank that stops answering makes
# its peers fail after ztrain.comm_timeout_s with the operation, step and unit.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d)
cleanup() { [ -n "${MPID:-}" ] && kill -9 "$MPID" 2> /dev/null; pkill -9 -f "ztrain train.*$T" 2> /dev/null; rm -rf "$T"; }
trap cleanup EXIT
cd "$T" || exit 1
head -c 100000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null

# rank_pid R: pid of the ztrain process with MPI rank R under this test
rank_pid() {
    local p
    for p in $(pgrep -f "ztrain train.*$T/m.jsonl"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"; return 0
        fi
    done
    return 1
}
start() {  # start NRANKS ARGS...
    local n=$1; shift
    rm -f m.jsonl
    mpirun_np "$n" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin \
        --val c_val.bin --threads 1 --steps 1000000 --eval-every 0 --log-every 1000 --sample-tokens 0 \
        --metrics "$T/m.jsonl" --ckpt-dir "$T/ck" "$@" > out.txt 2>&1 &
    MPID=$!
    for _ in $(seq 1 300); do [ -s m.jsonl ] && [ "$(wc -l < m.jsonl)" -ge 3 ] && return 0; sleep 0.1; done
    return 1
}
wait_exit() {  # wait_exit SECONDS: 0 if mpirun ended in time
    local t0=$SECONDS
    while kill -0 "$MPID" 2> /dev/null; do
        [ $((SECONDS - t0)) -ge "$1" ] && return 1
        sleep 0.2
    done
    wait "$MPID"; RC=$?; MPID=
    return 0
}

# 1. kill -9 one rank
start 3 --stage 2
ok $? "3-rank run started"
victim=$(rank_pid 1)
ok $? "found rank 1 (pid ${victim:-none})"
kill -9 "$victim" 2> /dev/null
wait_exit 60
ok $? "the job ended within 60 s after rank 1 was killed"
check "exit status is non-zero" test "${RC:-0}" -ne 0
if grep -qiE 'rank 1\b' out.txt; then ok 0 "the message names the failed rank"; else ok 1 "the message names the failed rank"; diag out.txt; fi

# 2. a rank that hangs (SIGSTOP) -> timeout naming operation, step and unit
start 3 --stage 3 --comm-timeout 3
ok $? "3-rank stage-3 run started"
victim=$(rank_pid 2)
ok $? "found rank 2 (pid ${victim:-none})"
kill -STOP "$victim" 2> /dev/null
wait_exit 60
ok $? "the job ended within 60 s after rank 2 stopped answering"
check "exit status is non-zero" test "${RC:-0}" -ne 0
if grep -qE 'ztrain: error: .*timed out after [0-9]+ s \(step [0-9]+, (unit|loss|gradient)' out.txt; then
    ok 0 "timeout message names the operation, step and unit"
else
    ok 1 "timeout message names the operation, step and unit"; diag out.txt
fi
kill -9 "$victim" 2> /dev/null
done_testing
