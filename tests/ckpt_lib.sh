# ckpt_lib.sh -- shared set-up of the checkpoint shell tests (sourced).
# A tiny model on a small corpus; every run has the same global batch (12)
# and the same schedule length (40 steps) whatever its world size or
# ztrain.steps, so that an interrupted run can continue an uninterrupted one.
. "$(dirname "$0")/lib.sh"
command -v "$ZT_MPIRUN" > /dev/null || skip_all "no MPI launcher ($ZT_MPIRUN)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
# never requeue the CI job that may be running these tests under Slurm
export ZTRAIN_REQUEUE=false
unset ZTRAIN_RESUME ZTRAIN_CKPT_DIR ZTRAIN_CKPT_EVERY ZTRAIN_STAGE
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
COMMON=(--config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1
        --sample-tokens 0 --batch-size 12 --grad-accum 1 --scheduler.params.total_num_steps 40
        --eval-every 0 --eval-batches 1 --log-every 100)

# zrun NP ARGS...: ztrain train on NP ranks (micro batch 12/NP); output in
# run.out / run.err, exit status returned
zrun() {
    local np=$1; shift
    mpirun_np "$np" "$ZTRAIN" train "${COMMON[@]}" --micro-batch $((12 / np)) "$@" > run.out 2> run.err
}
# the training records of a metrics file: "step loss grad_norm" per line
losses() {
    sed -n 's/^{"step": \([0-9]*\), "loss": \([-0-9.]*\), .*"grad_norm": \([-0-9.]*\),.*/\1 \2 \3/p' "$1"
}
# name, shape and checksum of every dataset of a checkpoint
tensor_sums() { "$ZTRAIN" ckpt inspect "$1" --tensors --no-config | grep ' checksum '; }
# does this build run ZeRO stage N? (print the reason on stdout when not)
stage_ok() {
    local out
    out=$("$ZTRAIN" train "${COMMON[@]}" --micro-batch 12 --stage "$1" --print-config 2>&1 >/dev/null) && return 0
    echo "${out#ztrain: error: }"
    return 1
}
# pids of the ranks of the mpirun with pid $1
rank_pids() { ps -o pid= --ppid "$1" | tr -d ' '; }
# relative difference of two loss lists (files of "step loss"): max over steps
max_rel() {
    awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { d = $2 - a[$1]; if (d < 0) d = -d;
         r = d / (a[$1] < 0 ? -a[$1] : a[$1]); if (r > m) m = r; n++ }
         END { if (!n) print "nan"; else printf "%.3g\n", m }' "$1" "$2"
}
