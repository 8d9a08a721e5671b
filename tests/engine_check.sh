#!/bin/bash
# engine_check.sh -- scripts/engine-check.sh with cpu-strict as the backend
# under test: the logic of the GPU session's engine check (cpu vs backend X
# per-step losses at stages 0-3 on 1 and 2 ranks, bf16 and optimizer offload
# at stage 3, save + resume), here bitwise because cpu-strict runs the cpu
# kernels.  On a GPU the same script runs with --backend cuda (gpu-bundle.sh's
# run.sh check).
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
exec bash "$ZT_SRCDIR/scripts/engine-check.sh" --backend cpu-strict --np "1 2" \
    --ztrain "$ZTRAIN" --mpirun "$ZT_MPIRUN"
