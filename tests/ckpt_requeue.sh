#!/bin/bash
# ckpt_requeue.sh -- the Slurm requeue after a preemption checkpoint
# (ztrain.requeue: auto, true, false; docs/checkpoints.md "Preemption")
# without a Slurm cluster: a fake `scontrol` first on PATH records
# its arguments and answers `show job` with Requeue=$FAKE_REQUEUE.  One
# rank, SIGUSR2 once a few steps are logged; every run exits 3 and rank 0
# runs exactly the scontrol commands the mode asks for, naming the job (an
# array task as <array job>_<task>) in one log line, and requeues only after
# its last line ("... exit code 3"): the requeue starts Slurm's kill.  (tests/slurm/requeue.sh
# runs the real cycle on a private cluster.)
. "$(dirname "$0")/ckpt_lib.sh"

mkdir -p bin
cat > bin/scontrol << 'EOF'
#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$1" in
show) echo "JobId=$5 JobName=t UserId=u(1) Priority=1 Requeue=$FAKE_REQUEUE Restarts=0"
      exit "${FAKE_SHOW_RC:-0}" ;;
requeue) grep -c "exit code 3" "$FAKE_ERR" >> "$FAKE_SEEN"   # ztrain's last line said yet?
         exit "${FAKE_REQUEUE_RC:-0}" ;;
esac
exit 2
EOF
chmod +x bin/scontrol
export PATH="$T/bin:$PATH"

# rq MODE [ENV=VALUE...]: a run (one process, no mpirun: mpirun puts its own
# directory first on the ranks' PATH) with ztrain.requeue=MODE and the
# variables given (SLURM_*, FAKE_*) on the rank, preempted by SIGUSR2 once 3
# steps are logged; its exit status in rc, output in q.out + q.err, the fake
# scontrol's calls in calls (one per line)
rq() {
    local mode=$1; shift
    rm -rf Q q.jsonl calls q.out q.err seen
    touch calls seen
    env FAKE_LOG="$T/calls" FAKE_ERR="$T/q.err" FAKE_SEEN="$T/seen" ZTRAIN_REQUEUE="$mode" ZT_CKPT_STEP_SLEEP_MS=40 "$@" \
        "$ZTRAIN" train "${COMMON[@]}" --micro-batch 12 --steps 40 --ckpt-dir Q --resume never \
        --metrics q.jsonl > q.out 2> q.err &
    local zp=$! n=0
    while [ "$(cat q.jsonl 2>/dev/null | grep -c '"loss"')" -lt 3 ] && [ $n -lt 1500 ] &&
          kill -0 $zp 2>/dev/null; do
        sleep 0.02; n=$((n + 1))
    done
    kill -USR2 $zp
    wait $zp
    rc=$?
    cat q.out q.err > q.all
}
# one LINE: q.all holds LINE exactly once
one() { [ "$(grep -cF -- "$1" q.all)" = 1 ]; }

rq auto SLURM_JOB_ID=4242 FAKE_REQUEUE=1
ok $([ "$rc" = 3 ] && [ "$(cat calls)" = "$(printf 'show job -o 4242\nrequeue 4242')" ] &&
     one "preemption: requeued Slurm job 4242; it resumes from the newest checkpoint"; echo $?) \
   "auto, a requeueable job: 'scontrol show job -o 4242', then 'scontrol requeue 4242'; logged; exit 3"
diag calls q.err
ok $([ "$(cat seen)" = 1 ]; echo $?) "the requeue comes after ztrain's last line (the preemption's, 'exit code 3')"

rq auto SLURM_JOB_ID=4242 FAKE_REQUEUE=0
ok $([ "$rc" = 3 ] && [ "$(cat calls)" = "show job -o 4242" ] &&
     one "preemption: job 4242 is not requeueable (submit it with sbatch --requeue, or set ztrain.requeue=true); not requeueing"; echo $?) \
   "auto, Requeue=0: only 'scontrol show job', one line says the job is not requeueable"

rq auto SLURM_JOB_ID=4242 FAKE_REQUEUE=1 FAKE_SHOW_RC=1
ok $([ "$rc" = 3 ] && [ "$(cat calls)" = "show job -o 4242" ] &&
     one "preemption: 'scontrol show job 4242' failed (non-zero exit); not requeueing"; echo $?) \
   "auto, 'scontrol show job' fails: not requeued, one warning"

rq true SLURM_JOB_ID=4250 SLURM_ARRAY_JOB_ID=4240 SLURM_ARRAY_TASK_ID=3 FAKE_REQUEUE_RC=1
ok $([ "$rc" = 3 ] && [ "$(cat calls)" = "requeue 4240_3" ] &&
     one "preemption: 'scontrol requeue 4240_3' failed (exit 1); the checkpoint is saved, requeue the job by hand"; echo $?) \
   "true, an array task: 'scontrol requeue 4240_3' (no show), its failure one warning"

rq false SLURM_JOB_ID=4242 FAKE_REQUEUE=1
ok $([ "$rc" = 3 ] && [ ! -s calls ] &&
     one "preemption: ztrain.requeue=false: not requeueing job 4242"; echo $?) \
   "false: no scontrol, one line says so"

rq true FAKE_REQUEUE=1
ok $([ "$rc" = 3 ] && [ ! -s calls ] &&
     one "preemption: ztrain.requeue=true but not running under Slurm (SLURM_JOB_ID unset): nothing to requeue"; echo $?) \
   "true outside Slurm: no scontrol, one warning"
check "the preemption checkpoint is committed and latest" test "$(cat Q/latest 2>/dev/null)" = "step-$(sed -n 's/.*preempted after step \([0-9]*\).*/\1/p' q.err | head -n 1)"
done_testing
