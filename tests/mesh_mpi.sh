#!/bin/bash
# mesh_mpi.sh -- the rank layout (libtrain/mesh.h, tests/test_mesh) at 1 to 4
# ranks: shapes, the axis groups' members and their device twins.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
for n in 1 2 3 4; do tap_mpi "$n" "$ZT_BUILDDIR/tests/test_mesh"; done
done_testing
