#!/bin/bash
# prec_mpi.sh -- 16-bit float sums through the MPI backend at 1-4 ranks
# (tests/test_comm16 prints TAP from rank 0; its checks are renumbered here).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for np in 1 2 3 4; do
    mpirun_np "$np" "$ZT_BUILDDIR/tests/test_comm16" > "$T/out$np.txt" 2> "$T/err$np.txt"
    rc=$?
    while read -r line; do
        case "$line" in
        "ok "*) ok 0 "np $np: ${line#ok * - }" ;;
        "not ok "*) ok 1 "np $np: ${line#not ok * - }" ;;
        "#"*) echo "$line" ;;
        esac
    done < "$T/out$np.txt"
    ok "$rc" "np $np: test_comm16 exits 0"
    [ "$rc" -eq 0 ] || diag "$T/err$np.txt"
done
done_testing
