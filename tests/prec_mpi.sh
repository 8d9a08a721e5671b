#!/bin/bash
# prec_mpi.sh -- mixed precision under mpirun: 16-bit float sums through
# the MPI backend at 1-4 ranks (tests/test_comm16), and the engine in bf16 /
# fp16 at 1-2 ranks (tests/test_mixed).  Both print TAP from rank 0; their
# checks are renumbered here.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
for np in 1 2 3 4; do tap_mpi "$np" "$ZT_BUILDDIR/tests/test_comm16" "np $np: "; done
for np in 1 2; do tap_mpi "$np" "$ZT_BUILDDIR/tests/test_mixed" "np $np: "; done
done_testing
