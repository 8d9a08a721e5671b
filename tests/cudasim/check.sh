#!/bin/sh
# check.sh PROGRAM [SUFFIX] -- make check-cudasim: tests/test_cuda (built
# against the CUDA simulator) with its small shapes.  Prints the TAP stream
# to PROGRAM[SUFFIX].log, then a summary: every failure and every skip with
# its reason; exits 1 when anything failed or the program did not run its
# plan.  The simulator's settings come from the environment
# (ZT_CUDASIM_ORDER, ZT_CUDASIM_SEED, ZT_CUDASIM_RACECHECK: README).
# A PROGRAM ending in .sh (tests/cudasim/engine.sh) is a bash script run
# with CUDASIM_ZTRAIN as its argument; its log goes to tests/cudasim/ here.
# CUDASIM_NP=n runs it under $ZT_MPIRUN (default mpirun) --oversubscribe
# with n ranks (rank 0 prints the TAP).
prog=${1:?usage: check.sh PROGRAM [SUFFIX]}
case $prog in
    *.sh) run="bash $prog ${CUDASIM_ZTRAIN:-tests/cudasim/ztrain_sim}"; base=tests/cudasim/$(basename "$prog" .sh) ;;
    *) run=$prog; base=$prog ;;
esac
log=$base${2-}.log
trs=$base${2-}.trs
ZT_CUDA_TEST_QUICK=${ZT_CUDA_TEST_QUICK-1}
export ZT_CUDA_TEST_QUICK
start=$(date +%s)
if [ -n "${CUDASIM_NP-}" ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        "${ZT_MPIRUN:-mpirun}" --oversubscribe -np "$CUDASIM_NP" --bind-to none "$prog" > "$log" 2>&1
else
    $run > "$log" 2>&1
fi
rc=$?
end=$(date +%s)
pass=$(grep -c '^ok ' "$log")
fail=$(grep -c '^not ok ' "$log")
skip=$(grep -c '^ok .*# SKIP' "$log")
plan=$(grep -m1 '^1\.\.' "$log")
echo "check-cudasim: $prog${CUDASIM_NP:+ at $CUDASIM_NP ranks} (ZT_CUDA_TEST_QUICK=$ZT_CUDA_TEST_QUICK, order ${ZT_CUDASIM_ORDER:-forward} seed ${ZT_CUDASIM_SEED:-1}, racecheck ${ZT_CUDASIM_RACECHECK:-0}${ZT_CUDASIM_RACECHECK_ACCESSES:+ up to $ZT_CUDASIM_RACECHECK_ACCESSES accesses per kernel}): plan $plan, $((pass - skip)) passed, $fail failed, $skip skipped, exit $rc, $((end - start)) s; log: $log"
grep '^not ok ' "$log" | sed 's/^/  FAIL: /'
grep '^ok .*# SKIP' "$log" | sed 's/^/  SKIP: /'
grep '^cudasim' "$log" | sort | uniq -c | sed 's/^/  simulator: /' | head -40
# the results as an automake .trs (one :test-result: per check), so that
# scripts/test-all.sh counts them with the rest of the suite; a program that
# did not run its plan or exited non-zero is one more FAIL
{
    sed -n -e 's/^ok .*# SKIP.*/:test-result: SKIP/p' -e '/# SKIP/d' -e 's/^ok .*/:test-result: PASS/p' \
        -e 's/^not ok .*/:test-result: FAIL/p' "$log"
    case $plan in "1..0"*|"") echo ":test-result: FAIL";; esac
    [ "$rc" -eq 0 ] || echo ":test-result: FAIL"
} > "$trs"
case $plan in "1..0"*|"") echo "check-cudasim: no test ran"; exit 1;; esac
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
