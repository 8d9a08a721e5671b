#!/bin/bash
# multinode.sh -- ztrain across nodes: a private Slurm cluster of 3 nodes on
# this machine (tests/slurm/cluster.sh with ZT_SLURM_NODES=3: each node its
# own network, UTS and mount namespaces, on a private bridge), the SPANK
# plugin loaded, and the shipped jobscripts/ztrain-multi-node.sbatch run
# unchanged (its #SBATCH lines overridden on the sbatch command line only).
#
# It proves:
#   - tasks land on the node Slurm says (host name, network namespace,
#     address, local id), and ztrain's topology line agrees;
#   - 2 nodes x 2 ranks at stage 3 give bitwise the losses and checkpoint
#     of 1 node x 4 ranks (same global batch), and the bytes really cross
#     the nodes' veth links over TCP (counters and ss);
#   - hybrid sharding with one node per shard group: bitwise the single
#     node's hybrid run, and the full-sharding losses within 1e-5;
#   - a checkpoint written by 2 nodes restores on 3 nodes;
#   - scancel --signal=USR2 on the 2-node job: saved, exit 3, requeued,
#     resumed, bitwise the uninterrupted run;
#   - ztrain estimate takes the world size and ranks per node from Slurm,
#     and the pre-flight check divides host memory by the real ranks per node.
# What it cannot prove: one physical machine -- no network bandwidth or
# latency of a real fabric, one kernel, one file system.
# Skips visibly without root, Slurm, PMIx or namespaces, and with ZT_SKIP_SLURM=1.
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"
[ "${ZT_SKIP_SLURM:-0}" = 1 ] && skip_all "ZT_SKIP_SLURM=1"
ZTRAIN=$ZT_BUILDDIR/ztrain
[ -x "$ZTRAIN" ] || skip_all "ztrain not built ($ZTRAIN)"
SCRIPT=$ZT_SRCDIR/jobscripts/ztrain-multi-node.sbatch
[ -r "$SCRIPT" ] || skip_all "$SCRIPT missing"
export ZT_SLURM_NODES=3 ZT_SLURM_CPUS=32   # the script asks 8 CPUs per task
zt_cluster_start
srun --mpi=list 2>&1 | grep -qw pmix || skip_all "srun has no PMIx plugin (srun --mpi=list)"
zt_plugstack optional
# shellcheck disable=SC1091
. "$ZT_CLUSTER/net"   # ZT_NET_TAG ZT_NET_SUBNET
export PATH=$ZT_BUILDDIR:$PATH CONFIG=$ZT_SRCDIR/configs/tiny.json SRUN_MPI=pmix OMP_NUM_THREADS=1
unset ZTRAIN_REQUEUE

head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { ok 1 "ztrain prep"; done_testing; exit 1; }

# ---------------------------------------------------------------- helpers
# mnjob TAG SBATCH_OPTS... -- ZTRAIN_ARGS...: run the shipped script, wait,
# leave its output in TAG.out, metrics in TAG.jsonl, checkpoints in ck_TAG
# (ck_$CK if CK is set); prints nothing, returns the job's exit code.
# --ztrain-gpu-bind=none: the nodes have no GPUs (the script's "local" is for
# GPU nodes and refuses a step without them).
STEPS=24
COMMON="--train $ZT_WORK/c_train.bin --val $ZT_WORK/c_val.bin --threads 1 --batch-size 12 --micro-batch 3
        --sample-tokens 0 --eval-every 0 --scheduler.params.total_num_steps $STEPS"
mnjob() {
    local tag=$1 opts=() jid rc
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done; shift
    jid=$(timeout 120 sbatch --parsable --wait --ztrain-gpu-bind=none -o "$ZT_WORK/$tag.out" "${opts[@]}" \
              "$SCRIPT" $COMMON --metrics "$ZT_WORK/$tag.jsonl" --ckpt-dir "$ZT_WORK/ck_${CK:-$tag}" "$@" \
              2>"$ZT_ERR")
    rc=$?
    echo "${jid##*$'\n'}" > "$tag.jid"
    [ $rc = 0 ] || { diag "job $tag: sbatch exit $rc: $(zlast_err)"; diag "$(tail -n 15 "$tag.out" 2>/dev/null)"; }
    return $rc
}
losses() { grep -o '"step": [0-9]*, "loss": [-0-9.e]*' "$1" 2>/dev/null; }
sums() { "$ZTRAIN" ckpt inspect "$1" --tensors --no-config 2>&1 | grep ' checksum '; }
same_run() {   # same_run A B: losses and final checkpoint bitwise equal
    [ -n "$(losses "$1.jsonl")" ] && [ "$(losses "$1.jsonl")" = "$(losses "$2.jsonl")" ] &&
        [ -n "$(sums "ck_$1/step-$STEPS")" ] && [ "$(sums "ck_$1/step-$STEPS")" = "$(sums "ck_$2/step-$STEPS")" ]
}
close_run() {   # close_run A B CKA CKB TOL: losses within TOL relative, final parameters within TOL
    "$ZTRAIN" ckpt export "$3" --output "$3.safetensors" > /dev/null 2>&1 &&
    "$ZTRAIN" ckpt export "$4" --output "$4.safetensors" > /dev/null 2>&1 || { diag "ckpt export failed"; return 1; }
    python3 "$ZT_SRCDIR/tests/run_compare.py" "$1.jsonl" "$2.jsonl" "$3.safetensors" "$4.safetensors" "$5"
}
vbytes() { cat "/sys/class/net/zt$ZT_NET_TAG.$1/statistics/rx_bytes"; }   # bytes node $1 sent
comm_sum() { python3 -c 'import json,sys; print(sum(json.loads(l).get("comm_bytes", 0) for l in open(sys.argv[1]) if "loss" in l))' "$1"; }

# ---------------------------------------------------------------- placement
cat > probe.sh <<'EOF'
#!/bin/bash
srun --mpi=pmix bash -c 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURMD_NODENAME $(hostname) $(readlink /proc/self/ns/net) $(ip -4 -o addr show eth0 | awk "{print \$4}")"' | sort -n
EOF
jid=$(zsbatch probe.sh -N 3 --ntasks-per-node=2)
probe=$(cat "job-$jid.out" 2>/dev/null)
diag "$probe"
bad=0 n=0
while read -r procid localid nodename host netns addr; do
    n=$((n + 1))
    node=$((procid / 2 + 1))
    want_ns=$(readlink "/proc/$(cat "$ZT_CLUSTER/nodes/zn$node/slurmd.pid")/ns/net")
    if [ "$nodename" != "zn$node" ] || [ "$host" != "zn$node" ] || [ "$localid" != $((procid % 2)) ] ||
       [ "$netns" != "$want_ns" ] || [ "$addr" != "$ZT_NET_SUBNET.$((10 + node))/24" ]; then
        bad=1; diag "task $procid: $nodename $host local $localid $netns $addr; want zn$node, $want_ns"
    fi
done <<<"$probe"
ok $([ $n = 6 ] && [ $bad = 0 ]; echo $?) \
   "3 nodes x 2 tasks: every task on its node (host name, network namespace, address, local id)"
ok $([ "$(readlink /proc/self/ns/net)" != "$(readlink "/proc/$(cat "$ZT_CLUSTER/nodes/zn1/slurmd.pid")/ns/net")" ]; echo $?) \
   "the nodes' network namespaces are not the test's"

# ---------------------------------------------------------------- 1 node vs 2 nodes
mnjob n1 -N 1 --ntasks-per-node=4 --ztrain-stage=3 -- --steps $STEPS
ok $? "1 node x 4 ranks, stage 3 (shipped script): $STEPS steps"
like "$(cat n1.out)" "topology: 4 ranks on 1 node (4 per node): zn1 ranks 0-3" "1-node topology line"

# watch the TCP connections of the ztrain processes inside node zn1 while the job runs
( while [ ! -e ss.stop ]; do
      nsenter --net="/run/netns/zt${ZT_NET_TAG}n1" ss -Htnp 2>/dev/null | grep ztrain
      sleep 0.1
  done > ss.log ) &
sspid=$!
b1=$(vbytes 1) b2=$(vbytes 2)
mnjob n2 -N 2 --ntasks-per-node=2 --ztrain-stage=3 -- --steps $STEPS
ok $? "2 nodes x 2 ranks, stage 3 (shipped script): $STEPS steps"
a1=$(vbytes 1) a2=$(vbytes 2)
touch ss.stop; wait $sspid
out=$(cat n2.out)
like "$out" "topology: 4 ranks on 2 nodes (2 per node): zn1 ranks 0-1, zn2 ranks 2-3" \
     "2-node topology line: ranks 0-1 on zn1, 2-3 on zn2"
like "$out" "(available memory / 2 ranks on this node)" \
     "pre-flight: host memory divided by the 2 ranks of the node (not 4)"
check "2 nodes x 2 ranks: losses and final checkpoint bitwise equal to 1 node x 4 ranks" same_run n2 n1
sent=$(comm_sum n2.jsonl)
x1=$((a1 - b1)) x2=$((a2 - b2))
diag "rank 0 sent $sent bytes by MPI; zn1 sent $x1 bytes over its veth link, zn2 $x2"
ok $([ "${sent:-0}" -gt 0 ] && [ $((2 * x1)) -ge "$sent" ] && [ $((2 * x2)) -ge "$sent" ]; echo $?) \
   "each node sent at least half rank 0's MPI bytes over its link ($x1 and $x2 >= $sent / 2)"
conn=$(grep -F "$ZT_NET_SUBNET.11:" ss.log | grep -F "$ZT_NET_SUBNET.12:" | head -n 3)
diag "ztrain TCP connections seen in zn1 during the job:"; diag "${conn:-none}"
ok $([ -n "$conn" ]; echo $?) "ztrain ranks on zn1 hold TCP connections to zn2 ($ZT_NET_SUBNET.11 <-> .12)"
b1=$(vbytes 1)
mnjob n1b -N 1 --ntasks-per-node=4 --ztrain-stage=3 -w zn1 -- --steps 4
x1=$(( $(vbytes 1) - b1 ))
diag "a 1-node job on zn1 sent $x1 bytes over zn1's link (Slurm's own messages only)"
ok $([ $((20 * x1)) -lt "$sent" ]; echo $?) "a 1-node job's ranks talk through shared memory: its link carried < 5% of that"

# ---------------------------------------------------------------- hybrid (fp32)
FP32=--ztrain-precision=fp32
mnjob f2 -N 2 --ntasks-per-node=2 --ztrain-stage=3 $FP32 -- --steps $STEPS
ok $? "fp32, 2 nodes x 2 ranks, stage 3: $STEPS steps"
mnjob h2 -N 2 --ntasks-per-node=2 --ztrain-stage=3 $FP32 -- --steps $STEPS --shard-group 2
ok $? "fp32, 2 nodes x 2 ranks, hybrid sharding (shard group 2)"
like "$(cat h2.out)" "hybrid sharding: 2 groups of 2 ranks, one node each" "each shard group is one node"
mnjob h1 -N 1 --ntasks-per-node=4 --ztrain-stage=3 $FP32 -- --steps $STEPS --shard-group 2
check "hybrid over 2 nodes: bitwise equal to the same hybrid run on 1 node" same_run h2 h1
check "hybrid (shard group = node): losses and final parameters within 1e-5 of full sharding" \
      close_run h2 f2 ck_h2 ck_f2 1e-5
mnjob hn -N 2 --ntasks-per-node=2 --ztrain-stage=3 $FP32 -- --steps $STEPS --shard-group node
like "$(cat hn.out)" "hybrid sharding: 2 groups of 2 ranks, one node each" "--shard-group node on 2 x 2: groups of 2, one node each"
check "--shard-group node: bitwise equal to --shard-group 2" same_run hn h2
# cyclic placement: consecutive ranks are not on one node, so "node" cannot
# be a group of consecutive ranks; refused before training, naming the placement
mnjob hc -N 2 --ntasks-per-node=2 -m cyclic --ztrain-stage=3 $FP32 -- --steps 2 --shard-group node
rc=$?
out=$(cat hc.out)
ok $([ $rc != 0 ] && grep -qF 'shard_group_size="node" needs the same number of consecutive ranks on every node' <<<"$out" &&
     grep -qF "zn1 ranks 0,2, zn2 ranks 1,3" <<<"$out"; echo $?) \
   "cyclic placement (sbatch -m cyclic) with --shard-group node: refused, showing ranks 0,2 on zn1 and 1,3 on zn2"

# ---------------------------------------------------------------- restore on another node count
mnjob r2 -N 2 --ntasks-per-node=2 --ztrain-stage=3 $FP32 -- --steps 12 --ckpt-every 12
ok $? "fp32, 2 nodes x 2 ranks: steps 1-12, checkpoint written from both nodes"
CK=r2 mnjob r3 -N 3 --ntasks-per-node=1 --ztrain-stage=3 $FP32 -- --steps $STEPS --micro-batch 4
ok $? "fp32, 3 nodes x 1 rank: resumes it"
out=$(cat r3.out)
like "$out" "resumed from $ZT_WORK/ck_r2/step-12 at step 12" "3-node job resumed the 2-node checkpoint at step 12"
like "$out" "topology: 3 ranks on 3 nodes (1 per node): zn1 rank 0, zn2 rank 1, zn3 rank 2" "3-node topology line"
cat r2.jsonl r3.jsonl > r.jsonl
check "steps 1-$STEPS across the node-count change: losses and final parameters within 1e-5 of the uninterrupted 2-node run" \
      close_run r f2 ck_r2 ck_f2 1e-5

# ---------------------------------------------------------------- preemption
jid=$(ZT_CKPT_STEP_SLEEP_MS=150 sbatch --parsable --requeue --open-mode=append -N 2 --ntasks-per-node=2 \
          --ztrain-stage=3 --ztrain-gpu-bind=none -o "$ZT_WORK/p.out" "$SCRIPT" $COMMON --steps $STEPS \
          --metrics "$ZT_WORK/p.jsonl" --ckpt-dir "$ZT_WORK/ck_p" 2>"$ZT_ERR")
ok $([ -n "$jid" ]; echo $?) "sbatch --requeue the 2-node job (${jid:-$(zlast_err)})"
n=0
nlogged() { local c; c=$(grep -c '"loss"' "$1" 2>/dev/null); echo "${c:-0}"; }
while [ "$(nlogged p.jsonl)" -lt 6 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
ok $([ $n -lt 600 ]; echo $?) "the job is training on both nodes (6 steps logged)"
scancel --signal=USR2 "$jid"
ok $? "scancel --signal=USR2 $jid (every task of the job's steps)"
wait_job_end "$jid"
out=$(cat p.out 2>/dev/null)
restarts=$(job_restarts "$jid")
is "$state" COMPLETED "the job ends COMPLETED (after $waited s)"
pstep=$(sed -n 's/.*preemption: SIGUSR2 received; all ranks stop after step \([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
like "$out" "checkpoint: saved step $pstep to $ZT_WORK/ck_p/step-$pstep" \
     "SIGUSR2: all 4 ranks on 2 nodes stopped after step ${pstep:-?}, checkpoint saved"
# rank 0's scontrol requeue cancels the job's step once the checkpoint is
# durable, so srun may report the tasks as terminated: ztrain's last line
# is the evidence of exit 3 (tests/ops_signals.sh checks srun's status
# without requeue)
like "$out" "ztrain: preempted after step $pstep: checkpoint $ZT_WORK/ck_p/step-$pstep saved; exit code 3" \
     "ztrain ended the preempted run with exit code 3"
like "$out" "preemption: requeued Slurm job $jid" "rank 0 requeued the job"
is "${restarts:-?}" 1 "Slurm restarted the job once"
like "$out" "resumed from $ZT_WORK/ck_p/step-$pstep at step $pstep" "the requeued job resumed from step ${pstep:-?}"
check "preempted and resumed 2-node run: losses and final checkpoint bitwise equal to the uninterrupted one" \
      same_run p n2

# ---------------------------------------------------------------- estimate under Slurm
cat > est.sh <<EOF
#!/bin/bash
$ZTRAIN estimate --config $CONFIG --stage 3
EOF
jid=$(zsbatch est.sh -N 2 --ntasks-per-node=2)
out=$(cat "job-$jid.out" 2>/dev/null)
like "$out" "run: 4 ranks (2 per node)" "estimate in a 2 x 2 job: 4 ranks, 2 per node"
like "$out" "(world size 4 from SLURM_NTASKS, 2 ranks per node from SLURM_NTASKS_PER_NODE=2)" \
     "estimate says where the shape came from"
jid=$(zsbatch est.sh -N 2 -n 3)
out=$(cat "job-$jid.out" 2>/dev/null)
like "$out" "run: 3 ranks (2 per node)" "estimate in a 3-task job over 2 nodes: the busiest node's 2 ranks"
like "$out" "2 ranks per node from SLURM_TASKS_PER_NODE=2,1" "... from SLURM_TASKS_PER_NODE"

done_testing
