#!/bin/bash
# ztrain-mpirun.sh -- run ztrain with mpirun on machines WITHOUT Slurm.
#
# What it does: launches NP ranks of "ztrain train --config CONFIG" with
# mpirun (Open MPI or MPICH), on this machine or on the hosts of a hostfile.
# Without Slurm there is no ztrain plugin, so this script exports the same
# ZTRAIN_* variables the plugin would (ZeRO stage, data loaders, precision,
# checkpointing; see docs/admin.md for the contract) and OMP_NUM_THREADS =
# max(1, cores per rank - data loaders).  GPU selection: every rank sees all
# GPUs of its machine and libtrain picks one by its node-local MPI rank.
# Checkpoints go to CKPT_DIR (default ./ztrain-run); run the same command again
# to resume from the newest checkpoint there (RESUME=auto).
# Preemption: SIGTERM, SIGINT, SIGHUP or SIGUSR2 sent to this script reach
# every rank as SIGUSR2 (Open MPI's mpirun forwards SIGUSR2 but turns SIGTERM
# into an abort: exit 1, SIGKILL after 1 s); ztrain saves a checkpoint and the
# script exits 3 (docs/production.md).
#
# Usage:    ztrain-mpirun.sh CONFIG [extra "ztrain train" flags]
#           NP=8 HOSTFILE=hosts.txt ztrain-mpirun.sh my.json
#
# Edit (or set in the environment) before use:
#   NP            total ranks (default: number of cores here / 4, at least 1)
#   HOSTFILE      mpirun hostfile for several machines (default: this one only)
#   RANKS_PER_NODE ranks per machine, for OMP_NUM_THREADS (default: NP without
#                 a hostfile)
#   STAGE, DATALOADERS, PRECISION, OFFLOAD, CKPT_DIR, CKPT_EVERY, RESUME
#                 the settings exported as ZTRAIN_*; empty = ztrain's default
#   MPIRUN        launcher (default: mpirun)
#   MPIRUN_ARGS   extra launcher arguments (e.g. "--bind-to core")
set -euo pipefail

if [ $# -lt 1 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    exit 0
fi
CONFIG=$1; shift

cores=$(nproc 2>/dev/null || echo 1)
NP=${NP:-$(( cores / 4 > 0 ? cores / 4 : 1 ))}
HOSTFILE=${HOSTFILE-}
RANKS_PER_NODE=${RANKS_PER_NODE:-$NP}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS-}

STAGE=${STAGE-2}
DATALOADERS=${DATALOADERS-2}
PRECISION=${PRECISION-}
OFFLOAD=${OFFLOAD-}
CKPT_DIR=${CKPT_DIR-$PWD/ztrain-run}
CKPT_EVERY=${CKPT_EVERY-}
RESUME=${RESUME-auto}

command -v ztrain >/dev/null 2>&1 || { echo "ztrain not found: module load ztrain, or add its bin/ to PATH" >&2; exit 1; }
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "$MPIRUN not found: install Open MPI or MPICH" >&2; exit 1; }
[ -r "$CONFIG" ] || { echo "configuration $CONFIG not readable" >&2; exit 1; }

# the ZTRAIN_* contract (only what is set), like the Slurm plugin
vars=()
export_var() { [ -n "$2" ] || return 0; export "$1=$2"; vars+=("$1"); }
export_var ZTRAIN_STAGE "$STAGE"
export_var ZTRAIN_DATALOADERS "$DATALOADERS"
export_var ZTRAIN_PRECISION "$PRECISION"
export_var ZTRAIN_OFFLOAD "$OFFLOAD"
export_var ZTRAIN_CKPT_DIR "$CKPT_DIR"
export_var ZTRAIN_CKPT_EVERY "$CKPT_EVERY"
export_var ZTRAIN_RESUME "$RESUME"
per_rank=$(( cores / (RANKS_PER_NODE > 0 ? RANKS_PER_NODE : 1) ))
omp=$(( per_rank - ${DATALOADERS:-0} ))
[ "$omp" -ge 1 ] || omp=1
export_var OMP_NUM_THREADS "$omp"
export_var CUDA_DEVICE_ORDER PCI_BUS_ID

# pass the variables to remote ranks: Open MPI -x VAR, MPICH/Hydra -genvlist
launcher=()
if "$MPIRUN" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
    for v in "${vars[@]}"; do launcher+=(-x "$v"); done
    [ -n "$HOSTFILE" ] && launcher+=(--hostfile "$HOSTFILE")
else
    launcher+=(-genvlist "$(IFS=,; echo "${vars[*]}")")
    [ -n "$HOSTFILE" ] && launcher+=(-f "$HOSTFILE")
fi

echo "ztrain-mpirun: $NP ranks, config $CONFIG, ZeRO stage ${STAGE:-default}," \
     "OMP_NUM_THREADS=$omp, checkpoints in ${CKPT_DIR:-the default directory}"
# MPIRUN_ARGS is split on blanks on purpose
# shellcheck disable=SC2086
"$MPIRUN" -n "$NP" "${launcher[@]}" $MPIRUN_ARGS ztrain train --config "$CONFIG" "$@" &
pid=$!
trap 'kill -USR2 "$pid" 2>/dev/null || true' TERM INT HUP USR2
# wait returns early (> 128) when a trapped signal arrives: wait again until
# mpirun has ended; bash keeps its exit status for the last wait
while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
rc=0
wait "$pid" || rc=$?
exit "$rc"
