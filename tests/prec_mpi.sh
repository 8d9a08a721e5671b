#!/bin/bash
# prec_mpi.sh -- mixed precision under mpirun: 16-bit float sums through
# the MPI backend at 1-4 ranks (tests/test_comm16), and the engine in bf16 /
# fp16 at 1-2 ranks (tests/test_mixed).  Both print TAP from rank 0; their
# checks are renumbered here.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# tapto PROGRAM NP: run PROGRAM on NP ranks, renumber its TAP lines here
tapto() {
    local prog=$1 np=$2
    mpirun_np "$np" "$ZT_BUILDDIR/tests/$prog" > "$T/out.txt" 2> "$T/err.txt"
    local rc=$?
    while IFS= read -r line; do
        case "$line" in
        "ok "*) ok 0 "$prog np $np: ${line#ok * - }" ;;
        "not ok "*) ok 1 "$prog np $np: ${line#not ok * - }" ;;
        "#"*) echo "$line" ;;
        esac
    done < "$T/out.txt"
    ok "$rc" "$prog np $np exits 0"
    [ "$rc" -eq 0 ] || diag "$T/err.txt"
}
for np in 1 2 3 4; do tapto test_comm16 "$np"; done
for np in 1 2; do tapto test_mixed "$np"; done
done_testing
