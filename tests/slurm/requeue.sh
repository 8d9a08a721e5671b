#!/bin/bash
# requeue.sh -- preemption end to end on a private Slurm cluster
# (tests/slurm/cluster.sh): sbatch --requeue a 2-rank training job (srun
# --mpi=pmix; 1 rank without PMIx), send SIGUSR2 the way Slurm's preemption
# warning does (scancel --signal=USR2 --batch: the batch shell, here srun,
# forwards it to every task).  ztrain checkpoints at the next step boundary,
# rank 0 runs `scontrol requeue`, Slurm starts the job again, it resumes
# (checkpoint.resume=auto) and finishes with the same final loss -- and
# bitwise the same state -- as an uninterrupted run.
# Skips visibly when Slurm is not usable here, and with ZT_SKIP_SLURM=1.
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"
[ "${ZT_SKIP_SLURM:-0}" = 1 ] && skip_all "ZT_SKIP_SLURM=1"
ZTRAIN=$ZT_BUILDDIR/ztrain
[ -x "$ZTRAIN" ] || skip_all "ztrain not built ($ZTRAIN)"
: "${ZT_MPIRUN:=mpirun}"
zt_cluster_start
zt_plugstack optional
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { ok 1 "ztrain prep"; done_testing; exit 1; }

NP=2 LAUNCH="srun --mpi=pmix -n 2"
if ! srun --mpi=list 2>&1 | grep -qw pmix; then
    NP=1 LAUNCH=""
    diag "srun has no PMIx plugin: the job runs 1 rank"
fi
ARGS="--config $ZT_SRCDIR/configs/tiny.json --train $ZT_WORK/c_train.bin --val $ZT_WORK/c_val.bin
      --threads 1 --sample-tokens 0 --batch-size 12 --micro-batch $((12 / NP)) --grad-accum 1
      --scheduler.params.total_num_steps 40 --eval-every 0 --log-every 100 --steps 40"

# ---------------------------------------------------------------- reference
ZTRAIN_REQUEUE=false "$ZT_MPIRUN" --oversubscribe -np $NP --bind-to none "$ZTRAIN" train $ARGS \
    --ckpt-dir "$ZT_WORK/ref" --resume never --metrics "$ZT_WORK/ref.jsonl" > ref.out 2>&1
ok $? "reference: 40 uninterrupted steps on $NP rank(s) (mpirun, outside Slurm)"
final() { grep '"loss"' "$1" 2>/dev/null | tail -n 1 | sed 's/.*"loss": \([-0-9.]*\),.*/\1/'; }
ref_loss=$(final ref.jsonl)

# ---------------------------------------------------------------- the job
cat > job.sh <<EOF
#!/bin/bash
#SBATCH --job-name=zt-requeue
#SBATCH --ntasks=$NP
#SBATCH --cpus-per-task=1
echo "job \$SLURM_JOB_ID start, restart \${SLURM_RESTART_COUNT:-0}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export ZT_CKPT_STEP_SLEEP_MS=100   # test-only: 0.1 s per step, so the signal lands mid-run
exec $LAUNCH $ZTRAIN train $(echo $ARGS) --ckpt-dir $ZT_WORK/ck \\
    --metrics $ZT_WORK/m-\${SLURM_RESTART_COUNT:-0}.jsonl
EOF
jid=$(sbatch --parsable --requeue -o "$ZT_WORK/job-%j.out" --open-mode=append job.sh 2>"$ZT_ERR")
ok $([ -n "$jid" ]; echo $?) "sbatch --requeue accepted the job (${jid:-$(zlast_err)})"
[ -n "$jid" ] || { done_testing; exit 1; }

n=0
while [ "$(cat m-0.jsonl 2>/dev/null | grep -c '"loss"')" -lt 8 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
ok $([ $n -lt 600 ]; echo $?) "the job is training (8 steps logged)"
scancel --signal=USR2 --batch "$jid"
ok $? "scancel --signal=USR2 --batch $jid"

wait_job_end "$jid"
out=$(cat "job-$jid.out" 2>/dev/null)
restarts=$(job_restarts "$jid")
is "$state" COMPLETED "the job ends COMPLETED (after ${waited} s)"
pstep=$(sed -n 's/.*preemption: SIGUSR2 received; all ranks stop after step \([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
like "$out" "checkpoint: saved step $pstep to $ZT_WORK/ck/step-$pstep" \
     "on SIGUSR2 every rank stopped after step ${pstep:-?} and the checkpoint was saved"
like "$out" "preemption: requeued Slurm job $jid" "rank 0 requeued the job after the checkpoint was durable"
is "${restarts:-?}" 1 "Slurm restarted the job once (Restarts=1)"
like "$out" "checkpoint: resumed from $ZT_WORK/ck/step-$pstep at step $pstep" \
     "the requeued job resumed from step-${pstep:-?}"
is "$(final m-1.jsonl)" "$ref_loss" "final loss equals the uninterrupted run's ($ref_loss)"
"$ZTRAIN" ckpt inspect ck/step-40 --tensors --no-config | grep ' checksum ' > job.sums 2>&1
"$ZTRAIN" ckpt inspect ref/step-40 --tensors --no-config | grep ' checksum ' > ref.sums 2>&1
check "final checkpoint bitwise equal to the uninterrupted run's" cmp -s job.sums ref.sums
[ "$zt_failed" = 0 ] || diag "$out"
done_testing
