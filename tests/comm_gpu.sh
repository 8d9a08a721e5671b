#!/bin/bash
# comm_gpu.sh -- comm backends for device buffers (tests/test_comm_gpu) at 1,
# 2 and 3 ranks: host-staged MPI (cpu backend always; cuda backend with a
# GPU, ranks sharing it) and NCCL (with a GPU, one rank per GPU).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for n in 1 2 3; do
    mpirun_np "$n" "$ZT_BUILDDIR/tests/test_comm_gpu" > "$T/c$n.tap" 2> "$T/c$n.err"
    rc=$?
    while IFS= read -r line; do
        case "$line" in
            "ok "*"# SKIP"*) TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - ${line#ok * - }" ;;
            "ok "*) ok 0 "${line#ok * - }" ;;
            "not ok "*) ok 1 "${line#not ok * - }" ;;
            "#"*) echo "$line" ;;
        esac
    done < "$T/c$n.tap"
    [ $rc -eq 0 ] || diag "$T/c$n.err"
    ok $rc "test_comm_gpu under mpirun -np $n exits 0"
done
done_testing
