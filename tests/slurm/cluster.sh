#!/bin/bash
# cluster.sh -- a private single-node Slurm cluster for the ztrain plugin tests.
#
#   cluster.sh start DIR   start munged, slurmctld and slurmd with all state,
#                          logs, sockets and pid files under DIR (created if
#                          missing); wait until the node is idle; write
#                          DIR/env (source it: SLURM_CONF=..., ZT_CLUSTER_DIR).
#   cluster.sh stop DIR    cancel the cluster's jobs and stop the daemons it
#                          started, by their pid files (nothing else).
#   cluster.sh check       exit 0 if a cluster can be started here, else print
#                          the reason on stdout and exit 1 (used for SKIP).
#
# Environment:
#   ZT_SPANK_PLUGIN   plugin to load (default: $ZT_BUILDDIR/plugin/.libs/spank_ztrain.so)
#   ZT_PLUGSTACK_ARGS key=value arguments for the plugin line in plugstack.conf
#   ZT_SLURM_CPUS     CPUs the node advertises (default 8; config_overrides
#                     lets a small machine pretend, nothing is bound)
#
# The daemons run as root with their own SLURM_CONF, their own ports (free
# ones at or above 16817) and their own munged socket and key, so they do not
# disturb a system cluster.  plugstack.conf is DIR/plugstack.conf; Slurm
# re-reads it for every srun/sbatch and step, so tests may rewrite it between
# jobs without restarting anything.
set -u

die() { echo "cluster.sh: $*" >&2; exit 1; }

SBIN_MUNGED=${ZT_MUNGED:-/usr/sbin/munged}
SBIN_MUNGEKEY=${ZT_MUNGEKEY:-/usr/sbin/mungekey}

find_prog() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; }; }

check() {
    [ "$(id -u)" = 0 ] || { echo "not root (the test cluster runs slurmd as root)"; return 1; }
    local p
    for p in slurmctld slurmd srun sbatch sinfo scontrol squeue scancel; do
        find_prog "$p" >/dev/null || { echo "$p not installed (apt-get install slurmctld slurmd slurm-client)"; return 1; }
    done
    [ -x "$SBIN_MUNGED" ] || { echo "munged not installed (apt-get install munge)"; return 1; }
    id munge >/dev/null 2>&1 || { echo "no munge user (apt-get install munge)"; return 1; }
    return 0
}

# TCP ports somebody listens on (decimal, one per line).
listening_ports() {
    if command -v ss >/dev/null 2>&1; then
        ss -Htanl 2>/dev/null | awk '{n=split($4,a,":"); print a[n]}'
    fi
    local f line
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        while read -r _ local _ st _; do
            [ "$st" = 0A ] || continue
            echo $((16#${local##*:}))
        done < <(tail -n +2 "$f")
    done
}

# Two consecutive free ports at or above 16817 (offset by pid to make
# collisions between concurrent harnesses unlikely).
pick_ports() {
    local used p tries=0
    used=" $(listening_ports | sort -u | tr '\n' ' ') "
    p=$((16817 + ($$ % 200) * 2))
    while [ $tries -lt 500 ]; do
        case "$used" in
        *" $p "*|*" $((p + 1)) "*) ;;
        *) echo "$p $((p + 1))"; return 0 ;;
        esac
        p=$((p + 2)); tries=$((tries + 1))
    done
    return 1
}

# wait_for SECONDS COMMAND...: poll every 0.2 s
wait_for() {
    local t=$(($1 * 5)); shift
    while [ $t -gt 0 ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2; t=$((t - 1))
    done
    return 1
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    local dir=$1 why
    why=$(check) || die "$why"
    local plugin=${ZT_SPANK_PLUGIN:-${ZT_BUILDDIR:-.}/plugin/.libs/spank_ztrain.so}
    [ -f "$plugin" ] || die "plugin $plugin not found (build it or set ZT_SPANK_PLUGIN)"
    case "$plugin" in /*) ;; *) plugin="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")" ;; esac

    mkdir -p "$dir" || die "cannot create $dir"
    dir=$(cd "$dir" && pwd)
    chmod 0755 "$dir"               # munged (user munge) must reach its socket dir
    mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
    install -d -o munge -g munge -m 0711 "$dir/munge"

    # ---------------------------------------------------------------- munge
    local key="$dir/munge/munge.key" sock="$dir/munge/munge.socket"
    if [ -x "$SBIN_MUNGEKEY" ]; then
        "$SBIN_MUNGEKEY" -c -f -k "$key" >/dev/null 2>&1 || die "mungekey failed"
    else
        dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null
    fi
    chown munge:munge "$key"; chmod 0600 "$key"
    runuser -u munge -- "$SBIN_MUNGED" --socket="$sock" --key-file="$key" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
        --seed-file="$dir/munge/munged.seed" --num-threads=2 \
        || die "munged failed to start: $(tail -n 3 "$dir/munge/munged.log" 2>/dev/null)"
    wait_for 10 test -S "$sock" || die "munged socket did not appear"

    # ---------------------------------------------------------------- slurm.conf
    local ports host cpus=${ZT_SLURM_CPUS:-8}
    ports=$(pick_ports) || die "no free ports"
    host=$(hostname -s)
    set -- $ports
    cat > "$dir/slurm.conf" <<EOF
# generated by tests/slurm/cluster.sh
ClusterName=ztrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=debug
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
SchedulerParameters=bf_interval=1,sched_interval=2
KillWait=2
InactiveLimit=0
MinJobAge=300
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    printf 'optional %s %s\n' "$plugin" "${ZT_PLUGSTACK_ARGS:-}" > "$dir/plugstack.conf"
    cat > "$dir/env" <<EOF
export SLURM_CONF='$dir/slurm.conf'
export ZT_CLUSTER_DIR='$dir'
export ZT_CLUSTER_NODE='$host'
export ZT_CLUSTER_PLUGIN='$plugin'
EOF

    # ---------------------------------------------------------------- daemons
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -c -i >"$dir/log/slurmctld.out" 2>&1 || die "slurmctld failed: $(tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" 2>/dev/null)"
    wait_for 20 pid_alive "$dir/run/slurmctld.pid" || die "slurmctld did not start: $(tail -n 5 "$dir/log/slurmctld.log")"
    wait_for 20 scontrol ping || die "slurmctld does not answer: $(tail -n 5 "$dir/log/slurmctld.log")"
    slurmd >"$dir/log/slurmd.out" 2>&1 || die "slurmd failed: $(tail -n 5 "$dir/log/slurmd.log" "$dir/log/slurmd.out" 2>/dev/null)"
    wait_for 20 pid_alive "$dir/run/slurmd.pid" || die "slurmd did not start: $(tail -n 5 "$dir/log/slurmd.log")"
    node_idle() { [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; }
    wait_for 30 node_idle || die "node not idle: $(sinfo -h -o '%t %E' 2>&1); $(tail -n 5 "$dir/log/slurmd.log")"
    return 0
}

stop_pidfile() {
    local f=$1 pid n
    [ -s "$f" ] || return 0
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for n in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    return 0
}

stop() {
    local dir=$1
    [ -d "$dir" ] || return 0
    if [ -f "$dir/slurm.conf" ] && pid_alive "$dir/run/slurmctld.pid"; then
        SLURM_CONF="$dir/slurm.conf" scancel --quiet --full $(SLURM_CONF="$dir/slurm.conf" squeue -h -o %i 2>/dev/null) 2>/dev/null
        # let slurmstepd processes of cancelled jobs finish
        local n=0
        while [ $n -lt 25 ] && [ -n "$(SLURM_CONF="$dir/slurm.conf" squeue -h -o %i 2>/dev/null)" ]; do
            sleep 0.2; n=$((n + 1))
        done
    fi
    stop_pidfile "$dir/run/slurmd.pid"
    stop_pidfile "$dir/run/slurmctld.pid"
    stop_pidfile "$dir/munge/munged.pid"
    return 0
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: cluster.sh start DIR"; start "$2" ;;
stop)  [ $# -eq 2 ] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
check) check ;;
*) die "usage: cluster.sh start|stop DIR | check" ;;
esac
