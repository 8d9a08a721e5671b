# tests/slurm/lib.sh -- TAP helpers and the private Slurm cluster for the
# tests in tests/slurm/ (sourced, not run).  The test environment exports
# ZT_SRCDIR and ZT_BUILDDIR (absolute); both default to the tree this file is in.

: "${ZT_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${ZT_BUILDDIR:=$ZT_SRCDIR}"
export ZT_SRCDIR ZT_BUILDDIR

# ------------------------------------------------------------------ TAP
zt_n=0
zt_failed=0

# ok STATUS NAME: STATUS 0 = pass
ok() {
    zt_n=$((zt_n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $zt_n - $2"
    else
        echo "not ok $zt_n - $2"
        zt_failed=$((zt_failed + 1))
    fi
}
# check NAME COMMAND...: pass if COMMAND succeeds
check() { local name=$1; shift; if "$@"; then ok 0 "$name"; else ok 1 "$name"; fi; }
# is GOT WANT NAME: string equality, with a diagnostic on failure
is() {
    if [ "$1" = "$2" ]; then ok 0 "$3"; else
        ok 1 "$3"; diag "got:  '$1'"; diag "want: '$2'"; fi
}
# like TEXT PATTERN NAME: TEXT contains the fixed string PATTERN
like() {
    case "$1" in *"$2"*) ok 0 "$3" ;; *) ok 1 "$3"; diag "'$2' not found in:"; diag "$1" ;; esac
}
unlike() {
    case "$1" in *"$2"*) ok 1 "$3"; diag "'$2' found in:"; diag "$1" ;; *) ok 0 "$3" ;; esac
}
skip() { zt_n=$((zt_n + 1)); echo "ok $zt_n - $1 # SKIP $2"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
done_testing() { echo "1..$zt_n"; [ "$zt_failed" = 0 ]; }

# ------------------------------------------------------------------ cluster
# A job environment around "make check" (CI inside an allocation) or stray
# option variables must not leak into the private cluster's jobs.
zt_clean_env() {
    local v
    for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p; s/^\(SBATCH_[A-Za-z0-9_]*\)=.*/\1/p;
                          s/^\(SALLOC_[A-Za-z0-9_]*\)=.*/\1/p; s/^\(SRUN_[A-Za-z0-9_]*\)=.*/\1/p;
                          s/^\(_SLURM_SPANK_[A-Za-z0-9_]*\)=.*/\1/p; s/^\(ZTRAIN_[A-Za-z0-9_]*\)=.*/\1/p'); do
        unset "$v"
    done
    unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
}

ZT_CLUSTER=""
zt_cluster_stop() {
    [ -n "$ZT_CLUSTER" ] || return 0
    "$ZT_SRCDIR/tests/slurm/cluster.sh" stop "$ZT_CLUSTER" >/dev/null 2>&1
    if [ -z "${ZT_KEEP_CLUSTER:-}" ]; then rm -rf "$ZT_CLUSTER"; else echo "# cluster kept in $ZT_CLUSTER"; fi
    ZT_CLUSTER=""
}

# Start a private cluster (skips the whole test where impossible).  Sets
# SLURM_CONF, ZT_CLUSTER (its directory), ZT_WORK (job submit directory,
# also the cwd), ZT_PLUGIN.  The cluster is stopped when the test exits.
zt_cluster_start() {
    local why
    why=$("$ZT_SRCDIR/tests/slurm/cluster.sh" check) || skip_all "$why"
    ZT_PLUGIN=${ZT_SPANK_PLUGIN:-$ZT_BUILDDIR/plugin/.libs/spank_ztrain.so}
    [ -f "$ZT_PLUGIN" ] || skip_all "plugin not built ($ZT_PLUGIN; configure found no slurm/spank.h?)"
    zt_clean_env
    ZT_CLUSTER=$(mktemp -d "${TMPDIR:-/tmp}/zt-slurm.XXXXXX") || skip_all "mktemp failed"
    trap zt_cluster_stop EXIT
    trap 'exit 1' INT TERM HUP
    if ! ZT_SPANK_PLUGIN=$ZT_PLUGIN ZT_PLUGSTACK_ARGS="${1:-}" \
            "$ZT_SRCDIR/tests/slurm/cluster.sh" start "$ZT_CLUSTER" >"$ZT_CLUSTER/start.log" 2>&1; then
        ok 1 "private Slurm cluster starts"
        diag "$(cat "$ZT_CLUSTER/start.log")"
        diag "$(tail -n 20 "$ZT_CLUSTER/log/slurmctld.log" "$ZT_CLUSTER/log/slurmd.log" 2>/dev/null)"
        done_testing
        exit 1
    fi
    # shellcheck disable=SC1091
    . "$ZT_CLUSTER/env"
    ZT_WORK=$ZT_CLUSTER/work
    ZT_ERR=$ZT_CLUSTER/last.err   # stderr of the last zsrun/zsbatch
    mkdir -p "$ZT_WORK"
    cd "$ZT_WORK" || exit 1
}

# Rewrite the plugin line of plugstack.conf (read again by every srun,
# sbatch and step): zt_plugstack [required|optional] [key=value ...]
zt_plugstack() {
    local kind=optional
    case "${1:-}" in required|optional) kind=$1; shift ;; esac
    printf '%s %s %s\n' "$kind" "$ZT_PLUGIN" "$*" > "$ZT_CLUSTER/plugstack.conf"
}

# Commands with a time limit, so a hung daemon fails the test instead of
# hanging it.  zsrun/zsbatch print stdout; stderr goes to the file $ZT_ERR,
# zlast_err prints it without srun's queueing chatter.
zsrun() { timeout 60 srun "$@" 2>"$ZT_ERR"; }
zlast_err() { grep -v -e 'queued and waiting for resources' -e 'has been allocated resources' "$ZT_ERR"; }

# zsbatch SCRIPT [sbatch options...]: submit, wait for the end, print the
# job id.  The job's output is in $ZT_WORK/job-<id>.out.
zsbatch() {
    local script=$1; shift
    timeout 90 sbatch --parsable --wait -o "$ZT_WORK/job-%j.out" "$@" "$script" 2>"$ZT_ERR" | tail -n 1
}
job_state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_restarts() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'; }
# wait_job_end JID: wait (at most 180 s) until the job is COMPLETED, FAILED or
# CANCELLED; sets state and waited (seconds)
wait_job_end() {
    waited=0 state=""
    while [ $waited -lt 180 ]; do
        state=$(job_state "$1")
        [ "$state" = COMPLETED ] || [ "$state" = FAILED ] || [ "$state" = CANCELLED ] && break
        sleep 1; waited=$((waited + 1))
    done
}

# Wait (at most 20 s) until the node is idle again; print its state.
node_state() {
    local t=100 s=""
    while [ $t -gt 0 ]; do
        s=$(sinfo -h -o %t 2>/dev/null)
        [ "$s" = idle ] && break
        sleep 0.2; t=$((t - 1))
    done
    echo "$s"
}
