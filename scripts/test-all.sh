#!/bin/bash
# test-all.sh -- set up, then run the whole test suite: `make check` (unit,
# multi-rank MPI, local-Slurm integration, GPU tests that skip without a GPU),
# the same unit and MPI tests again under AddressSanitizer + UBSan, the CUDA
# backend's own kernels on the CPU simulator (`make check-cudasim` in a
# --with-cuda-sim build of the dist tree), and `make distcheck` (the tarball
# built out of tree, installed, its manifest checked against git, a subset
# of the tests run there: Makefile.am DISTCHECK_TESTS).  Ends with
# one line: "N passed, N failed, N skipped", counted from every TAP result
# the test drivers recorded.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
J=$(nproc)

echo "== make check"
make -j"$J" check > check.log 2>&1
grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP):' check.log | grep -v '^PASS' || true
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' check.log || true

# (a CPU build: no --with-cuda, so it also checks that the tree builds without CUDA)
echo "== sanitizers (ASan + UBSan build of the distributed sources in build-san/)"
san_ok=0
if [ "${ZT_SKIP_SANITIZERS:-0}" != 1 ]; then
    rm -rf build-san
    # a VPATH build needs an unconfigured source tree: use the dist tree
    make -s distdir distdir=build-san > /dev/null 2>&1 &&
    ( cd build-san &&
      ./configure --enable-werror --enable-sanitizers > config.out 2>&1 &&
      make -j"$J" > build.log 2>&1 &&
      { ASAN_OPTIONS=detect_leaks=1 \
        LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        make -j"$J" check TESTS="$(make -s print-leakcheck-tests)" > check-leaks.log 2>&1; r1=$?;
        ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        make -j"$J" check TESTS="$(make -s print-sanitizer-tests)" > check.log 2>&1; r2=$?;
        [ $r1 -eq 0 ] && [ $r2 -eq 0 ]; } ) || san_ok=1
    for f in build-san/check-leaks.log build-san/check.log; do
        grep -E '^(FAIL|ERROR|XPASS):' "$f" 2> /dev/null || true
        grep -E '^# (TOTAL|PASS|FAIL|ERROR)' "$f" 2> /dev/null || true
    done
fi

echo "== CUDA simulator (make check-cudasim: kernels/cuda on the CPU, in build-sim/)"
sim_ok=0
if [ "${ZT_SKIP_CUDASIM:-0}" != 1 ]; then
    rm -rf build-sim
    make -s distdir distdir=build-sim > /dev/null 2>&1 &&
    ( cd build-sim &&
      ./configure --enable-werror --with-cuda-sim > config.out 2>&1 &&
      make -j"$J" > build.log 2>&1 &&
      make -j"$J" check-cudasim > check-cudasim.log 2>&1 ) || sim_ok=1
    grep -E '^check-cudasim|^  (FAIL|SKIP):' build-sim/check-cudasim.log 2> /dev/null || true
fi

echo "== make distcheck"
dist_ok=0
if [ "${ZT_SKIP_DISTCHECK:-0}" != 1 ]; then
    # (the tarball's VPATH build, install and uninstall, its manifest against
    # git, and a subset of the tests: Makefile.am DISTCHECK_TESTS; the whole
    # suite ran above, in the tree and from the dist tree)
    dt=$(make -s print-distcheck-tests 2> /dev/null | tail -1)
    case $dt in
        tests/*) ZT_SKIP_SLURM=1 make -j"$J" distcheck TESTS="$dt" > distcheck.log 2>&1 || dist_ok=1 ;;
        *) ZT_SKIP_SLURM=1 make -j"$J" distcheck > distcheck.log 2>&1 || dist_ok=1 ;;   # (the whole suite)
    esac
    grep -E '^=+$|archives ready|ERROR|FAIL:|^distcheck: ' distcheck.log | head -12 || true
fi

# Count every TAP result (one :test-result: line per check in each .trs).
count() { find . -name '*.trs' -not -path './ztrain-*' -exec grep -h "^:test-result: $1" {} + 2>/dev/null | wc -l; }
pass=$(( $(count PASS) + $(count XFAIL) ))
fail=$(( $(count FAIL) + $(count XPASS) + $(count ERROR) ))
skip=$(count SKIP)
# the distcheck run and a sanitizer build that failed to build count as one result each
if [ "${ZT_SKIP_DISTCHECK:-0}" != 1 ]; then
    if [ $dist_ok -eq 0 ]; then pass=$((pass + 1)); echo "distcheck: ok"; else fail=$((fail + 1)); echo "distcheck: FAILED (see distcheck.log)"; tail -30 distcheck.log; fi
fi
if [ $sim_ok -ne 0 ] && ! ls build-sim/tests/cudasim/*.trs > /dev/null 2>&1; then
    fail=$((fail + 1)); echo "CUDA simulator build: FAILED"; tail -30 build-sim/build.log build-sim/config.out build-sim/check-cudasim.log 2>/dev/null
fi
if [ $san_ok -ne 0 ] && ! ls build-san/tests/*.trs > /dev/null 2>&1; then
    fail=$((fail + 1)); echo "sanitizer build: FAILED"; tail -30 build-san/build.log build-san/config.out 2>/dev/null
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
