#!/bin/bash
# jobscripts.sh -- the job scripts in jobscripts/: bash -n, a documented
# header, #SBATCH lines before the first command (sbatch stops reading them
# there), the preemption settings, and the preemptible script's signal
# handling run for real with stand-in srun/ztrain/scontrol commands (no
# Slurm, no ztrain program needed).
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"

js=$ZT_SRCDIR/jobscripts
scripts="ztrain-single-node.sbatch ztrain-multi-node.sbatch ztrain-preemptible.sbatch ztrain-mpirun.sh"

for s in $scripts; do
    f=$js/$s
    if [ ! -f "$f" ]; then ok 1 "$s exists"; continue; fi
    check "$s: bash -n" bash -n "$f"
    head=$(sed -n '2,12p' "$f")
    like "$head" "# $s -- " "$s: header names the script and says what it is"
    check "$s: header documents what to edit" grep -q '^# Edit' "$f"
    case $s in
    *.sbatch)
        # first line that is neither blank nor a comment must come after every #SBATCH line
        first_cmd=$(grep -n -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$f" | head -n 1 | cut -d: -f1)
        last_sbatch=$(grep -n '^#SBATCH' "$f" | tail -n 1 | cut -d: -f1)
        check "$s: all #SBATCH lines come before the first command" [ "${last_sbatch:-0}" -lt "${first_cmd:-0}" ]
        like "$(cat "$f")" 'ztrain train --config "$CONFIG" "$@"' "$s: runs ztrain train --config \$CONFIG with extra flags"
        ;;
    esac
done

p=$(cat "$js/ztrain-preemptible.sbatch")
for want in "#SBATCH --requeue" "#SBATCH --open-mode=append" "#SBATCH --signal=B:USR2@" \
            "trap on_usr2 USR2" "scontrol requeue" "#SBATCH --ztrain-resume=auto"; do
    like "$p" "$want" "preemptible: has '$want'"
done

# ------------------------------------------------------------ run it with stand-ins
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zt-jobscripts.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
log=$tmp/events
# srun: drop its options, run the command (so signals reach "ztrain")
cat > "$tmp/bin/srun" <<'EOF'
#!/bin/bash
while [ $# -gt 0 ] && [ "$1" != ztrain ]; do shift; done
exec "$@"
EOF
# ztrain: runs until SIGUSR2 (then "saves a checkpoint" for 0.5 s) or for $FAKE_RUN_DS tenths of a second
cat > "$tmp/bin/ztrain" <<'EOF'
#!/bin/bash
echo "ztrain $*" >> "$EVENTS"
trap 'echo got-usr2 >> "$EVENTS"; sleep 0.5; echo checkpoint-saved >> "$EVENTS"; exit 0' USR2
n=${FAKE_RUN_DS:-300}
while [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
echo finished >> "$EVENTS"
EOF
cat > "$tmp/bin/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >> "$EVENTS"
EOF
chmod +x "$tmp/bin"/*
echo '{}' > "$tmp/config.json"

# run_preemptible [VAR=value...]: start the script, send SIGUSR2 once ztrain
# runs unless NOSIG is set; print the exit status
run_preemptible() {
    : > "$log"
    env "$@" PATH="$tmp/bin:$PATH" EVENTS="$log" CONFIG="$tmp/config.json" SLURM_JOB_ID=4242 \
        bash "$js/ztrain-preemptible.sbatch" --extra-flag > "$tmp/out" 2>&1 &
    local pid=$! t=50
    while [ $t -gt 0 ] && ! grep -q '^ztrain' "$log" 2>/dev/null; do sleep 0.1; t=$((t - 1)); done
    case " $* " in *" NOSIG=1 "*) ;; *) kill -USR2 "$pid" ;; esac
    t=100
    while [ $t -gt 0 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; t=$((t - 1)); done
    kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo timeout; return; }
    wait "$pid"; echo $?
}

rc=$(run_preemptible)
events=$(tr '\n' ' ' < "$log")
is "$rc" 0 "preemptible: exits 0 after a SIGUSR2"
is "$events" "ztrain train --config $tmp/config.json --extra-flag got-usr2 checkpoint-saved scontrol requeue 4242 " \
   "preemptible: forwards SIGUSR2, waits for the checkpoint, then requeues the job"
rc=$(run_preemptible SLURM_ARRAY_JOB_ID=4240 SLURM_ARRAY_TASK_ID=2)
like "$(cat "$log")" "scontrol requeue 4240_2" "preemptible: array tasks are requeued as <array job>_<task>"
rc=$(run_preemptible SLURM_RESTART_COUNT=3 MAX_RESTARTS=3)
is "$rc" 1 "preemptible: gives up after MAX_RESTARTS requeues"
unlike "$(cat "$log")" "scontrol requeue" "... without requeueing"
rc=$(run_preemptible NOSIG=1 FAKE_RUN_DS=3)
is "$rc $(tr '\n' ' ' < "$log")" "0 ztrain train --config $tmp/config.json --extra-flag finished " \
   "preemptible: training that ends on its own is not requeued"

# single-node script with the stand-ins
: > "$log"
out=$(PATH="$tmp/bin:$PATH" EVENTS="$log" CONFIG="$tmp/config.json" SLURM_JOB_ID=1 FAKE_RUN_DS=0 \
      bash "$js/ztrain-single-node.sbatch" --steps 5 2>&1); rc=$?
is "$rc $(head -n 1 "$log")" "0 ztrain train --config $tmp/config.json --steps 5" "single-node: srun ztrain train --config \$CONFIG FLAGS"
out=$(PATH="$tmp/bin:$PATH" EVENTS="$log" CONFIG=/nonexistent SLURM_JOB_ID=1 bash "$js/ztrain-single-node.sbatch" 2>&1); rc=$?
check "single-node: a missing configuration stops it with a message" [ "$rc" -ne 0 ]
like "$out" "/nonexistent not readable" "... naming the file"

out=$(bash "$js/ztrain-mpirun.sh" --help 2>&1)
like "$out" "Usage:" "mpirun script: --help prints its documentation"
cat > "$tmp/bin/mpirun" <<'EOF'
#!/bin/bash
[ "$1" = --version ] && { echo "mpirun (Open MPI) 4.1.4"; exit 0; }
echo "mpirun $*"; echo "env $ZTRAIN_STAGE $ZTRAIN_CKPT_DIR $ZTRAIN_RESUME $OMP_NUM_THREADS"
EOF
chmod +x "$tmp/bin/mpirun"
out=$(cd "$tmp" && PATH="$tmp/bin:$PATH" NP=2 STAGE=3 bash "$js/ztrain-mpirun.sh" config.json --steps 5 2>&1)
like "$out" "mpirun -n 2 -x ZTRAIN_STAGE" "mpirun script: exports the ZTRAIN_* variables to the ranks (-x)"
like "$out" "ztrain train --config config.json --steps 5" "mpirun script: runs ztrain train --config FILE FLAGS"
like "$out" "env 3 $tmp/ztrain-run auto" "mpirun script: ZTRAIN_STAGE, ZTRAIN_CKPT_DIR, ZTRAIN_RESUME set"
done_testing
