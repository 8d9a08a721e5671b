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
# each test script its own Open MPI session directory base: mpirun makes
# BASE/ompi.HOST.UID/pid.PID and removes the top directory once it is empty,
# so two scripts' mpiruns under `make -j check` sharing /tmp can race
# (one removes the top between the other's mkdir of it and of its pid.PID:
# "orte_session_dir failed", seen once in a sanitizer run of lora_dropout.sh).
# An empty base is left behind; those of scripts an hour gone are removed.
find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'zt-ompi-*' -type d -empty -mmin +60 -delete 2> /dev/null
export OMPI_MCA_orte_tmpdir_base="${TMPDIR:-/tmp}/zt-ompi-$$"
mkdir -p "$OMPI_MCA_orte_tmpdir_base" || unset OMPI_MCA_orte_tmpdir_base
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

# ---- the preludes the scripts share
need_mpi() { command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"; }
need_python3() { command -v python3 > /dev/null || skip_all "no python3"; }
in_tmpdir() {  # in_tmpdir: cd into a fresh directory $T, removed at exit
    T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
    cd "$T" || exit 1
}
byte_corpus() {  # byte_corpus BYTES: the corpus' first BYTES prepared as c_train.bin, c_val.bin
    head -c "$1" "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
    "$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
}
clean_ztrain_env() {  # no resume, requeue, checkpoint, backend or memory setting from the caller's environment
    export ZTRAIN_REQUEUE=false
    unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE ZTRAIN_BACKEND ZTRAIN_MEMORY_LIMIT \
          ZTRAIN_STRICT_DEVICE_MEMORY
}
token_file() {  # token_file FILE TOKEN...: an llm.c token file (256 int32 header, uint16 tokens)
    python3 - "$@" <<'PY' || { echo "Bail out! python3 failed"; exit 1; }
import struct, sys
tok = [int(x) for x in sys.argv[2:]]
hdr = [20240520, 1, len(tok)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % len(tok), *tok))
PY
}
dev_peaks() {  # dev_peaks FILE: "measured predicted" of the memory report's device line
    sed -n 's/.*device memory peak per rank (.*): measured \([0-9]*\) bytes, predicted \([0-9]*\) bytes.*/\1 \2/p' "$1" | head -1
}
compare() {  # compare A B [TOL]: m_A.jsonl and w_A.safetensors against B's (tests/run_compare.py):
    # the first $STEPS losses and the parameters within TOL (default $COMPARE_TOL, else 1e-6)
    python3 "$ZT_SRCDIR/tests/run_compare.py" "m_$1.jsonl" "m_$2.jsonl" "w_$1.safetensors" \
        "w_$2.safetensors" "${3:-${COMPARE_TOL:-1e-6}}" "$STEPS"
}
