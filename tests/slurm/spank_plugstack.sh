#!/bin/bash
# spank_plugstack.sh -- site defaults and limits from plugstack.conf
# arguments (key=value after the plugin path), checked in a real private
# Slurm cluster: defaults applied when no option is given, options still win,
# limits enforced at submission and in slurmstepd, ckpt_root, and strict
# parsing (a bad key or value disables the plugin with a message).
# plugstack.conf is read again for every srun/sbatch/step, so one cluster
# serves all configurations.  Skips (visibly) when not root or no Slurm.
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"
zt_cluster_start
ckroot=$ZT_CLUSTER/ckroot

# --------------------------------------------------------------- defaults
zt_plugstack optional default_stage=2 default_precision=bf16 max_dataloaders=4 ckpt_root=$ckroot/
out=$(zsrun bash -c 'echo $ZTRAIN_STAGE $ZTRAIN_PRECISION ${ZTRAIN_DATALOADERS-unset} $ZTRAIN_CKPT_DIR $SLURM_JOB_ID')
set -- $out
is "$1 $2 $3" "2 bf16 unset" "default_stage=2 default_precision=bf16 used when no option is given"
is "$4" "$ckroot/ztrain-$5" "ckpt_root: checkpoint dir <ckpt_root>/ztrain-<jobid>"
out=$(zsrun --ztrain-stage=0 --ztrain-precision=fp32 bash -c 'echo $ZTRAIN_STAGE $ZTRAIN_PRECISION')
is "$out" "0 fp32" "options given override the site defaults"
out=$(zsrun --ztrain-ckpt-dir=/elsewhere printenv ZTRAIN_CKPT_DIR)
is "$out" /elsewhere "--ztrain-ckpt-dir overrides ckpt_root"

job=$(zsbatch /dev/stdin <<'EOF'
#!/bin/bash
echo "batch stage=$ZTRAIN_STAGE ckpt=$ZTRAIN_CKPT_DIR"
EOF
)
like "$(cat "$ZT_WORK/job-$job.out" 2>/dev/null)" "batch stage=2 ckpt=$ckroot/ztrain-$job" \
     "the batch step gets the defaults and <ckpt_root>/ztrain-<jobid> too"

out=$(zsrun --ztrain-dataloaders=5 echo TASK-RAN); rc=$?
err=$(zlast_err)
check "max_dataloaders=4: srun --ztrain-dataloaders=5 refused" [ "$rc" -ne 0 -a -z "$out" ]
is "$(printf '%s\n' "$err" | wc -l)" 1 "... in one line"
like "$err" "[ztrain] --ztrain-dataloaders=5: 5 data loaders is above this site's limit (max_dataloaders=4)" \
     "... naming the site limit"
out=$(zsrun --ztrain-dataloaders=4 printenv ZTRAIN_DATALOADERS)
is "$out" 4 "--ztrain-dataloaders=4 (at the limit) accepted"
out=$(_SLURM_SPANK_OPTION_ztrain_ztrain_dataloaders=5 zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "max_dataloaders also enforced in slurmstepd (value from the environment)" [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "max_dataloaders=4" "... with the message"

zt_plugstack optional max_stage=1
out=$(zsrun --ztrain-stage=2 echo TASK-RAN); rc=$?
err=$(zlast_err)
check "max_stage=1: --ztrain-stage=2 refused" [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "above this site's limit (max_stage=1)" "... naming the limit"

# site limits that hold (issue 16, item 1): every bypass refused, naming the
# limit -- the user's exports by slurmstepd, flags and files by ztrain, told
# the limits in ZTRAIN_SITE_LIMITS (docs/production.md)
zt_plugstack optional max_stage=1 max_dataloaders=4
out=$(ZTRAIN_SITE_LIMITS="max_stage=3" zsrun printenv ZTRAIN_SITE_LIMITS)
is "$out" "max_stage=1 max_dataloaders=4" "the task is told the site limits (a user's own ZTRAIN_SITE_LIMITS is replaced)"
for v in "ZTRAIN_STAGE=3" "ZTRAIN_ZERO_OPTIMIZATION_STAGE=2" "ZTRAIN_DATALOADERS=200" "ZTRAIN_DATA_DATALOADERS=5"; do
    out=$(env "$v" timeout 60 srun echo TASK-RAN 2>"$ZT_ERR"); rc=$?
    err=$(zlast_err)
    check "max_stage=1 max_dataloaders=4: $v exported by the user refused" [ "$rc" -ne 0 -a -z "$out" ]
    like "$err" "exceeds the site limit max_" "... naming the site limit"
done
ZTRAIN=$ZT_BUILDDIR/ztrain
if [ -x "$ZTRAIN" ]; then
    tmpc=$(mktemp -d "$ZT_CLUSTER/cfg.XXXXXX")
    printf '{"zero_optimization": {"stage": 3}}' > "$tmpc/s3.json"
    # a one-rank ztrain in the step: Open MPI without Slurm's PMI cannot be
    # direct-launched, so the task drops the SLURM_* variables (it keeps the
    # plugin's ZTRAIN_* ones) and runs as an MPI singleton
    cat > "$tmpc/solo.sh" <<'SH'
#!/bin/bash
for v in ${!SLURM_@} ${!PMI@} ${!PMIX@}; do unset "$v"; done
exec "$@"
SH
    chmod +x "$tmpc/solo.sh"
    # the srun option (if any) and the ztrain arguments of each bypass
    for c in "--ztrain-stage=1|--stage 3" "--ztrain-dataloaders=2|--dataloaders 200" \
             "|--config $tmpc/s3.json" "|--zero_optimization.stage=2"; do
        o=${c%%|*} a=${c#*|}
        a="--config $ZT_SRCDIR/configs/tiny.json $a"
        # shellcheck disable=SC2086
        out=$(timeout 60 srun $o "$tmpc/solo.sh" "$ZTRAIN" train --print-config $a 2>&1); rc=$?
        check "srun $o ztrain train ${a#--config $ZT_SRCDIR/configs/tiny.json }: refused (exit $rc)" [ "$rc" -eq 2 ]
        like "$out" "exceeds the site limit max_" "... naming the site limit"
    done
    # the task's own copy of the limits removed or raised: the root-owned
    # statement of its slurmstepd still holds them (ztrain_env.h)
    for e in "-u ZTRAIN_SITE_LIMITS" "ZTRAIN_SITE_LIMITS=max_stage=3"; do
        # shellcheck disable=SC2086
        out=$(timeout 60 srun "$tmpc/solo.sh" env $e "$ZTRAIN" train --print-config \
              --config "$ZT_SRCDIR/configs/tiny.json" --stage 3 2>&1); rc=$?
        check "srun env $e ztrain train --stage 3: refused (exit $rc)" [ "$rc" -eq 2 ]
        like "$out" "exceeds the site limit max_stage=1 (stated by the ztrain Slurm plugin in /run/ztrain/stepd-" \
             "... naming the site limit and the plugin's statement"
    done
    # the same from a job script (the batch step), in a new session
    job=$(zsbatch /dev/stdin <<EOF2
#!/bin/bash
unset ZTRAIN_SITE_LIMITS
( setsid "$tmpc/solo.sh" "$ZTRAIN" train --print-config --config "$ZT_SRCDIR/configs/tiny.json" \
  --dataloaders 200 > /dev/null 2> "$tmpc/batch.err"; echo "rc=\$?" >> "$tmpc/batch.err" )
EOF2
)
    like "$(cat "$tmpc/batch.err" 2>/dev/null)" "exceeds the site limit max_dataloaders=4 (stated by the ztrain Slurm plugin in /run/ztrain/stepd-" \
         "job script: unset ZTRAIN_SITE_LIMITS + setsid ztrain --dataloaders 200 refused naming the limit"
    like "$(cat "$tmpc/batch.err" 2>/dev/null)" "rc=2" "... exit 2"
    # the statement lives as long as its step: none of this job's is left
    left=$(for f in /run/ztrain/stepd-*; do [ -e "$f" ] || continue; p=${f##*-}; kill -0 "$p" 2>/dev/null || echo "$f"; done)
    is "$left" "" "no statement file outlives its slurmstepd"
    out=$(timeout 60 srun --ztrain-stage=1 "$tmpc/solo.sh" "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --print-config --stage 1 2>&1); rc=$?
    check "srun --ztrain-stage=1 ztrain train --stage 1: within the limits (exit $rc)" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || diag "$out"
    rm -rf "$tmpc"
else
    skip "ztrain under the site limits" "ztrain not built"
fi

zt_plugstack optional default_gpu_bind=local default_dataloaders=2
out=$(unset OMP_NUM_THREADS; zsrun -c4 bash -c 'echo $ZTRAIN_GPU_BIND ${CUDA_VISIBLE_DEVICES-unset} $ZTRAIN_DATALOADERS $OMP_NUM_THREADS')
is "$out" "none unset 2 2" "default_gpu_bind=local does not break a job without GPUs; default_dataloaders feeds OMP_NUM_THREADS"
out=$(CUDA_VISIBLE_DEVICES=0,1 zsrun -n2 -l printenv CUDA_VISIBLE_DEVICES | sort)
is "$out" "$(printf '0: 0\n1: 1')" "default_gpu_bind=local binds when the step has GPUs"

# --------------------------------------------------------------- strict parsing
zt_plugstack optional default_stage=2 bogus=1
out=$(zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
like "$err" "[ztrain] plugin disabled: unknown plugstack.conf key 'bogus'" "bad plugstack key: the plugin refuses with a message"
like "$err" "known keys: default_stage" "... listing the known keys"
is "$rc $out" "0 TASK-RAN" "... as an optional plugin, jobs not using it still run"
out=$(zsrun --ztrain-stage=1 echo TASK-RAN); rc=$?
check "... and its options are gone (srun --ztrain-stage refused)" [ "$rc" -ne 0 -a -z "$out" ]
out=$(_SLURM_SPANK_OPTION_ztrain_ztrain_stage=1 zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "a ztrain option reaching a misconfigured slurmstepd fails the task" [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "misconfigured on this node (unknown plugstack.conf key 'bogus'" "... with the reason"

zt_plugstack required bogus=1
out=$(zsrun echo TASK-RAN); rc=$?
err=$(zlast_err)
check "as a required plugin with a bad key, srun refuses to run" [ "$rc" -ne 0 -a -z "$out" ]
like "$err" "unknown plugstack.conf key 'bogus'" "... saying why"
out=$(timeout 30 sbatch --wrap 'echo hi' 2>&1); rc=$?
check "... and so does sbatch" [ "$rc" -ne 0 ]
like "$out" "unknown plugstack.conf key 'bogus'" "... saying why"

for bad in "default_stage=5" "max_dataloaders=0" "default_precision=fp8" "ckpt_root=relative" \
           "default_stage" "max_stage=1 default_stage=2"; do
    zt_plugstack required "$bad"
    out=$(zsrun echo TASK-RAN); rc=$?
    err=$(zlast_err)
    if [ "$rc" -ne 0 ] && [ -z "$out" ] && printf '%s\n' "$err" | grep -q '\[ztrain\] plugin disabled: .*plugstack.conf'; then
        ok 0 "plugstack '$bad' refused with a message"
    else
        ok 1 "plugstack '$bad' refused with a message"; diag "$err"
    fi
done

zt_plugstack optional
is "$(node_state)" idle "the node is idle at the end (never drained)"
done_testing
