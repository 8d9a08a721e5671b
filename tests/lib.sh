# lib.sh -- TAP helpers for ztrain's shell tests (sourced).
# Environment from `make check`: ZT_SRCDIR, ZT_BUILDDIR, ZT_MPIRUN.
: "${ZT_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${ZT_BUILDDIR:=$ZT_SRCDIR}"
: "${ZT_MPIRUN:=mpirun}"
ZTRAIN="$ZT_BUILDDIR/ztrain"
# libtool wrapper scripts are fine to exec directly
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# quiet Open MPI's fork/shm warnings in containers
export OMPI_MCA_btl_vader_single_copy_mechanism=none
TAP_N=0
TAP_FAILED=0
ok() {  # ok COND_STATUS NAME
    TAP_N=$((TAP_N + 1))
    if [ "$1" -eq 0 ]; then echo "ok $TAP_N - $2"; else echo "not ok $TAP_N - $2"; TAP_FAILED=$((TAP_FAILED + 1)); fi
}
check() {  # check NAME CMD...: ok if CMD succeeds
    local name="$1"; shift
    if "$@"; then ok 0 "$name"; else ok 1 "$name"; fi
}
diag() { sed 's/^/# /' "$@"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
skip() {  # skip NAME REASON: one check, reported as skipped
    TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP $2"
}
done_testing() { echo "1..$TAP_N"; [ "$TAP_FAILED" -eq 0 ]; }
mpirun_np() {  # mpirun_np N ARGS...
    local n="$1"; shift
    "$ZT_MPIRUN" --oversubscribe -np "$n" --bind-to none "$@"
}
tap_mpi() {  # tap_mpi NP PROGRAM [LABEL]: run a TAP program on NP ranks and renumber its checks here
    local np="$1" prog="$2" label="${3:-}" out err rc line
    out=$(mktemp); err=$(mktemp)
    mpirun_np "$np" "$prog" > "$out" 2> "$err"
    rc=$?
    while IFS= read -r line; do
        case "$line" in
        "ok "*) ok 0 "$label${line#ok * - }" ;;
        "not ok "*) ok 1 "$label${line#not ok * - }" ;;
        "#"*) echo "$line" ;;
        esac
    done < "$out"
    ok "$rc" "$label$(basename "$prog") under mpirun -np $np exits 0"
    [ "$rc" -eq 0 ] || diag "$err"
    rm -f "$out" "$err"
}
