#!/bin/bash
# spank_options.sh -- the ztrain SPANK plugin in a real (private, single
# node) Slurm cluster, without site arguments: option registration in srun
# and sbatch, refusal at submission, the second check in slurmstepd for
# values that arrive through the environment, the per-task ZTRAIN_* export,
# GPU binding, OMP_NUM_THREADS, checkpoint directory, restart count and
# idempotency.  Skips (visibly) when not root or Slurm is not installed.
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"
zt_cluster_start
zt_plugstack optional

# --------------------------------------------------------------- registration
# usage text may wrap to the next line after a long --opt=ARG: join them
opt_usage() { awk -v o="--ztrain-$2=" 'index($0, o) { l = $0; getline n; print l " " n }' <<<"$1"; }
help=$(timeout 30 srun --help 2>&1)
missing=""
for o in stage dataloaders gpu-bind resume ckpt-dir ckpt-every offload precision; do
    case "$(opt_usage "$help" "$o")" in *"[ztrain]"*) ;; *) missing="$missing --ztrain-$o" ;; esac
done
is "$missing" "" "srun --help lists the 8 --ztrain-* options with [ztrain] usage"
help=$(timeout 30 sbatch --help 2>&1)
is "$(printf '%s\n' "$help" | grep -c '\[ztrain\]')" 8 \
   "sbatch --help lists them too (registered in the allocator context)"

# --------------------------------------------------------------- srun
out=$(zsrun --ztrain-stage=2 printenv ZTRAIN_STAGE)
is "$out" "2" "srun --ztrain-stage=2 printenv ZTRAIN_STAGE prints 2"

out=$(zsrun --ztrain-stage=7 echo TASK-RAN); rc=$?
err=$(zlast_err)
check "srun --ztrain-stage=7 exits non-zero" [ "$rc" -ne 0 ]
is "$out" "" "srun --ztrain-stage=7 starts no task"
is "$(printf '%s\n' "$err" | wc -l)" 1 "srun --ztrain-stage=7 says why in exactly one line"
like "$err" "[ztrain] --ztrain-stage=7: the ZeRO stage must be an integer 0..3" "... naming the option, the value and the range"

out=$(SLURM_SPANK__SLURM_SPANK_OPTION_ztrain_ztrain_stage=7 zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "SLURM_SPANK__SLURM_SPANK_OPTION_ztrain_ztrain_stage=7 srun: refused at submission" \
      [ "$rc" -ne 0 -a -z "$out" ]
is "$(printf '%s\n' "$err" | grep -c '\[ztrain\] --ztrain-stage=7')" 1 "... with the same single line"

out=$(zsrun --ztrain-stage=1 --ztrain-dataloaders=3 --ztrain-resume=never --ztrain-ckpt-dir=/data/ck \
      --ztrain-ckpt-every=50 --ztrain-offload=optimizer --ztrain-precision=fp16 \
      bash -c 'echo $ZTRAIN_STAGE $ZTRAIN_DATALOADERS $ZTRAIN_RESUME $ZTRAIN_CKPT_DIR $ZTRAIN_CKPT_EVERY $ZTRAIN_OFFLOAD $ZTRAIN_PRECISION $ZTRAIN_PLUGIN')
is "$out" "1 3 never /data/ck 50 optimizer fp16 1" "every option is exported as its ZTRAIN_* variable"

out=$(zsrun bash -c 'echo "${ZTRAIN_STAGE-unset} ${ZTRAIN_PRECISION-unset} ${ZTRAIN_GPU_BIND-unset} $ZTRAIN_PLUGIN $ZTRAIN_CKPT_DIR $SLURM_JOB_ID"')
set -- $out
is "$1 $2 $3 $4" "unset unset unset 1" "no option, no site default: no ZTRAIN_* settings, ZTRAIN_PLUGIN=1"
is "$5" "$ZT_WORK/ztrain-$6" "default checkpoint dir is <submit dir>/ztrain-<jobid>"

out=$(zsrun -n2 -l bash -c 'echo $ZTRAIN_SLURM_RANK/$SLURM_PROCID $ZTRAIN_SLURM_LOCALID/$SLURM_LOCALID' | sort)
is "$out" "$(printf '0: 0/0 0/0\n1: 1/1 1/1')" "ZTRAIN_SLURM_RANK and ZTRAIN_SLURM_LOCALID per task (srun -n2)"

# --------------------------------------------------------------- remote check
out=$(_SLURM_SPANK_OPTION_ztrain_ztrain_stage=9 zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "_SLURM_SPANK_OPTION_ztrain_ztrain_stage=9 srun (skips the client check) fails" [ "$rc" -ne 0 ]
is "$out" "" "... the task never runs"
like "$err" "[ztrain] --ztrain-stage=9: the ZeRO stage must be an integer 0..3" "... and the user sees why"

out=$(_SLURM_SPANK_OPTION_ztrain_stage=2 zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "_SLURM_SPANK_OPTION_ztrain_stage=2 (not an option variable) fails instead of being ignored" \
      [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "_SLURM_SPANK_OPTION_ztrain_stage is not a ztrain option variable" "... with a message naming it"

cat > "$ZT_WORK/bad.sh" <<'EOF'
#!/bin/bash
echo SCRIPT-RAN
EOF
job=$(_SLURM_SPANK_OPTION_ztrain_ztrain_stage=9 zsbatch "$ZT_WORK/bad.sh")
is "$(job_state "$job")" FAILED "sbatch with _SLURM_SPANK_OPTION_ztrain_ztrain_stage=9: the job fails"
joblog=$(cat "$ZT_WORK/job-$job.out" 2>/dev/null)
unlike "$joblog" SCRIPT-RAN "... its script never runs"
like "$joblog" "[ztrain] --ztrain-stage=9" "... and its output file says why"
is "$(node_state)" idle "the node is idle afterwards, not drained"
reason=$(scontrol -o show node "$ZT_CLUSTER_NODE" | sed -n 's/.*Reason=\([^ ]*\).*/\1/p')
is "$reason" "" "... and has no drain reason"

# --------------------------------------------------------------- sbatch
cat > "$ZT_WORK/stage3.sh" <<'EOF'
#!/bin/bash
#SBATCH -n 2
#SBATCH --ztrain-stage=3
echo "batch ZTRAIN_STAGE=$ZTRAIN_STAGE rank=${ZTRAIN_SLURM_RANK-none}"
echo "batch count=$(env | grep -c '^ZTRAIN_STAGE=')"
srun -n2 -l bash -c 'echo "step ZTRAIN_STAGE=$ZTRAIN_STAGE count=$(env | grep -c ^ZTRAIN_STAGE=) rank=$ZTRAIN_SLURM_RANK"' | sort
echo "step1 $(srun -n1 --ztrain-stage=1 printenv ZTRAIN_STAGE)"
EOF
job=$(zsbatch "$ZT_WORK/stage3.sh")
joblog=$(cat "$ZT_WORK/job-$job.out" 2>/dev/null)
is "$(job_state "$job")" COMPLETED "sbatch job with #SBATCH --ztrain-stage=3 completes"
like "$joblog" "batch ZTRAIN_STAGE=3 rank=none" "the batch step sees ZTRAIN_STAGE=3 (and no per-task rank)"
like "$joblog" "$(printf '0: step ZTRAIN_STAGE=3 count=1 rank=0\n1: step ZTRAIN_STAGE=3 count=1 rank=1')" \
     "an srun inside sees ZTRAIN_STAGE=3 in every task"
like "$joblog" "batch count=1" "idempotent: one ZTRAIN_STAGE, value not doubled, in the batch step"
like "$joblog" "step1 1" "an srun option inside the script overrides the #SBATCH one"

out=$(timeout 30 sbatch --ztrain-stage=7 --wrap 'echo hi' 2>&1); rc=$?
check "sbatch --ztrain-stage=7 is refused (nothing submitted)" [ "$rc" -ne 0 ]
is "$(printf '%s\n' "$out" | wc -l)" 1 "... with one line"
like "$out" "[ztrain] --ztrain-stage=7" "... naming the option"

# --------------------------------------------------------------- GPU binding
out=$(CUDA_VISIBLE_DEVICES=0,1,2,3 zsrun -n2 -l --ztrain-gpu-bind=local \
      bash -c 'echo $CUDA_VISIBLE_DEVICES $ZTRAIN_GPU_BIND $CUDA_DEVICE_ORDER' | sort)
is "$out" "$(printf '0: 0,1 local PCI_BUS_ID\n1: 2,3 local PCI_BUS_ID')" \
   "gpu-bind=local, CUDA_VISIBLE_DEVICES=0,1,2,3, 2 tasks: contiguous halves"
out=$(SLURM_STEP_GPUS=2,3 zsrun -n2 -l --ztrain-gpu-bind=local printenv CUDA_VISIBLE_DEVICES | sort)
is "$out" "$(printf '0: 2\n1: 3')" "gpu-bind=local from SLURM_STEP_GPUS=2,3: one GPU per task"
out=$(CUDA_VISIBLE_DEVICES=5 zsrun -n2 -l --ztrain-gpu-bind=local printenv CUDA_VISIBLE_DEVICES | sort)
is "$out" "$(printf '0: 5\n1: 5')" "gpu-bind=local with fewer GPUs than tasks: round robin"
out=$(SLURM_STEP_GPUS=4,5 zsrun -n2 -l --ztrain-gpu-bind=map:5,4 \
      bash -c 'echo $CUDA_VISIBLE_DEVICES $ZTRAIN_GPU_BIND' | sort)
is "$out" "$(printf '0: 5 map:5,4\n1: 4 map:5,4')" "gpu-bind=map:5,4: task i gets LIST[i]"
out=$(CUDA_VISIBLE_DEVICES=0,1 zsrun -n2 --ztrain-gpu-bind=map:1,3 echo TASK-RAN); rc=$?
err=$(zlast_err)
check "gpu-bind=map with a GPU outside the step fails" [ "$rc" -ne 0 ]
like "$err" "GPU 3 for local task 1 is not allocated to this step" "... with a message"
out=$(zsrun --ztrain-gpu-bind=local echo TASK-RAN); rc=$?
err=$(zlast_err)
check "gpu-bind=local without GPUs fails" [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "this step has no GPUs" "... with a message"
out=$(CUDA_VISIBLE_DEVICES=0,1 zsrun -n2 -l --ztrain-gpu-bind=none bash -c 'echo $CUDA_VISIBLE_DEVICES $ZTRAIN_GPU_BIND' | sort)
is "$out" "$(printf '0: 0,1 none\n1: 0,1 none')" "gpu-bind=none leaves CUDA_VISIBLE_DEVICES alone"

# --------------------------------------------------------------- OMP_NUM_THREADS
out=$(unset OMP_NUM_THREADS; zsrun -n1 -c4 --ztrain-dataloaders=1 printenv OMP_NUM_THREADS)
is "$out" 3 "OMP_NUM_THREADS = 4 CPUs per task - 1 dataloader = 3"
out=$(unset OMP_NUM_THREADS; zsrun -n1 -c4 printenv OMP_NUM_THREADS)
is "$out" 4 "OMP_NUM_THREADS = CPUs per task without --ztrain-dataloaders"
out=$(unset OMP_NUM_THREADS; zsrun -n1 -c2 --ztrain-dataloaders=5 printenv OMP_NUM_THREADS)
is "$out" 1 "OMP_NUM_THREADS is at least 1"
out=$(unset OMP_NUM_THREADS; zsrun -n2 -l printenv OMP_NUM_THREADS | sort)
is "$out" "$(printf '0: 1\n1: 1')" "without -c: the step's CPUs on the node / its tasks there"
out=$(OMP_NUM_THREADS=7 zsrun -n1 -c4 --ztrain-dataloaders=1 printenv OMP_NUM_THREADS)
is "$out" 7 "a user's own OMP_NUM_THREADS is kept"
cat > "$ZT_WORK/omp.sh" <<'EOF'
#!/bin/bash
#SBATCH -c 4
#SBATCH --ztrain-dataloaders=1
echo "batch OMP=$OMP_NUM_THREADS"
echo "step OMP=$(srun -n1 -c2 printenv OMP_NUM_THREADS)"
EOF
job=$(unset OMP_NUM_THREADS; zsbatch "$ZT_WORK/omp.sh")
joblog=$(cat "$ZT_WORK/job-$job.out" 2>/dev/null)
like "$joblog" "batch OMP=3" "batch step: OMP_NUM_THREADS = 4 - 1"
like "$joblog" "step OMP=1" "srun -c2 inside recomputes the plugin's value (2 - 1), not inherits 3"

# --------------------------------------------------------------- restart count, ckpt dir
out=$(SLURM_RESTART_COUNT=3 zsrun printenv ZTRAIN_RESTART_COUNT)
is "$out" 3 "ZTRAIN_RESTART_COUNT from SLURM_RESTART_COUNT=3"
out=$(zsrun printenv ZTRAIN_RESTART_COUNT)
is "$out" 0 "ZTRAIN_RESTART_COUNT=0 when SLURM_RESTART_COUNT is unset"

cat > "$ZT_WORK/array.sh" <<'EOF'
#!/bin/bash
echo "ckpt=$ZTRAIN_CKPT_DIR array=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
echo "step-ckpt=$(srun printenv ZTRAIN_CKPT_DIR)"
EOF
job=$(zsbatch "$ZT_WORK/array.sh" --array=4 -o "$ZT_WORK/array-%A_%a.out")
joblog=$(cat "$ZT_WORK/array-${job}_4.out" 2>/dev/null)
aid=$(printf '%s\n' "$joblog" | sed -n 's/.*array=\([0-9]*_[0-9]*\).*/\1/p')
check "array job ran" [ -n "$aid" ]
like "$joblog" "ckpt=$ZT_WORK/ztrain-$aid array=$aid" "array job: checkpoint dir <submit dir>/ztrain-<array job id>_<task id>"
like "$joblog" "step-ckpt=$ZT_WORK/ztrain-$aid" "... the same in an srun step of the array job"

is "$(node_state)" idle "the node is still idle at the end"
done_testing
