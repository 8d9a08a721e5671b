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
#   ZT_SLURM_NODES    nodes (default 1).  With 2 or more, every node is a set
#                     of Linux namespaces made here: its own network namespace
#                     (address 10.213.X.1N on a private bridge, the controller
#                     at 10.213.X.1), its own UTS namespace (host name znN) and
#                     its own mount namespace (DIR/node bind-mounted from
#                     DIR/nodes/znN: slurmd's spool, pid and log files;
#                     DIR/hosts over /etc/hosts).  slurmctld and munged stay in
#                     the root namespaces; the nodes share the file system
#                     (the "shared" job directory).  Root only.
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
    if [ "${ZT_SLURM_NODES:-1}" -gt 1 ]; then check_multi || return 1; fi
    return 0
}

# The multi-node cluster needs network namespaces, veth pairs and a bridge
# (root, iproute2, a kernel that allows them here) and unshare(1).
check_multi() {
    command -v ip >/dev/null 2>&1 || { echo "ip (iproute2) not installed: no namespace nodes"; return 1; }
    command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 ||
        { echo "unshare/nsenter (util-linux) not installed"; return 1; }
    local ns=ztprobe$$ br=ztpb$$
    ip netns add "$ns" 2>/dev/null || { echo "cannot create a network namespace (ip netns add) here"; return 1; }
    if ! ip link add "$br" type bridge 2>/dev/null; then
        ip netns del "$ns"; echo "cannot create a bridge (ip link add type bridge) here"; return 1
    fi
    if ! ip link add "${br}v" type veth peer name eth0 netns "$ns" 2>/dev/null; then
        ip link del "$br"; ip netns del "$ns"; echo "cannot create a veth pair into a namespace here"; return 1
    fi
    if ! nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private true 2>/dev/null; then
        ip link del "${br}v" 2>/dev/null; ip link del "$br"; ip netns del "$ns"
        echo "cannot unshare UTS and mount namespaces here"; return 1
    fi
    ip link del "${br}v" 2>/dev/null; ip link del "$br"; ip netns del "$ns"
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

# A private /24 on a bridge of its own: DIR/net records the names (tag T:
# bridge ztbT, host ends ztT.N of the veth pairs, namespaces ztTnN) so that
# stop can remove exactly them.
net_up() {
    local dir=$1 nodes=$2 t x i used
    used=" $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ') "
    t=$(( $$ % 1000 ))
    while case "$used" in *" ztb$t "*) true ;; *) false ;; esac; do t=$(( (t + 1) % 1000 )); done
    used=$(ip -o -4 addr show 2>/dev/null)
    x=$(( ($$ / 7) % 250 + 1 ))
    while grep -q "inet 10\.213\.$x\." <<<"$used"; do x=$(( x % 250 + 1 )); done
    echo "ZT_NET_TAG=$t ZT_NET_SUBNET=10.213.$x ZT_NET_NODES=$nodes" > "$dir/net"
    ip link add "ztb$t" type bridge || return 1
    ip addr add "10.213.$x.1/24" dev "ztb$t" || return 1
    ip link set "ztb$t" up || return 1
    # bridged frames go through iptables' FORWARD chain where br_netfilter is
    # loaded (Docker sets its policy to DROP): let the bridge's own through
    if [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] &&
       command -v iptables >/dev/null 2>&1 &&
       iptables -I FORWARD -i "ztb$t" -o "ztb$t" -j ACCEPT 2>/dev/null; then
        echo "ZT_NET_IPTABLES=1" >> "$dir/net"
    fi
    for i in $(seq "$nodes"); do
        ip netns add "zt${t}n$i" || return 1
        ip link add "zt$t.$i" type veth peer name eth0 netns "zt${t}n$i" || return 1
        ip link set "zt$t.$i" master "ztb$t" up || return 1
        ip -n "zt${t}n$i" addr add "10.213.$x.$((10 + i))/24" dev eth0 || return 1
        ip -n "zt${t}n$i" link set lo up || return 1
        ip -n "zt${t}n$i" link set eth0 up || return 1
    done
    return 0
}

net_down() {
    local dir=$1 i pids
    [ -s "$dir/net" ] || return 0
    local ZT_NET_TAG ZT_NET_SUBNET ZT_NET_NODES ZT_NET_IPTABLES=0
    eval "$(cat "$dir/net")"
    for i in $(seq "$ZT_NET_NODES"); do
        # whatever still runs in the node (a stray task) goes with it
        pids=$(ip netns pids "zt${ZT_NET_TAG}n$i" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "zt${ZT_NET_TAG}n$i" 2>/dev/null
    done
    ip link del "ztb$ZT_NET_TAG" 2>/dev/null
    [ "${ZT_NET_IPTABLES:-0}" = 1 ] && iptables -D FORWARD -i "ztb$ZT_NET_TAG" -o "ztb$ZT_NET_TAG" -j ACCEPT 2>/dev/null
    rm -f "$dir/net"
    return 0
}

# start slurmd of node I (name znI) inside its namespaces
node_up() {
    local dir=$1 i=$2 t=$3
    mkdir -p "$dir/nodes/zn$i/spool" "$dir/nodes/zn$i/pmix"
    # nsenter, not "ip netns exec": that one remounts /sys (no cgroup file
    # system there, and slurmd needs it)
    nsenter --net="/run/netns/zt${t}n$i" unshare --uts --mount --propagation private -- /bin/bash -c '
        hostname "$1" && mount --bind "$2" "$3" && mount --bind "$4" /etc/hosts || exit 1
        exec slurmd' _ "zn$i" "$dir/nodes/zn$i" "$dir/node" "$dir/hosts" \
        >"$dir/log/slurmd-zn$i.out" 2>&1
}

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
    local ports host cpus=${ZT_SLURM_CPUS:-8} nodes=${ZT_SLURM_NODES:-1} i
    ports=$(pick_ports) || die "no free ports"
    host=$(hostname -s)
    local ctl_addr=127.0.0.1 node_lines pidfile="$dir/run/slurmd.pid" spool="$dir/spool/slurmd-%n"
    local slurmd_log="$dir/log/slurmd.log" node_names=$host
    node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
    if [ "$nodes" -gt 1 ]; then
        net_up "$dir" "$nodes" || { net_down "$dir"; die "network namespaces: setup failed"; }
        local ZT_NET_TAG ZT_NET_SUBNET ZT_NET_NODES
        eval "$(cat "$dir/net")"
        ctl_addr=$ZT_NET_SUBNET.1
        pidfile="$dir/node/slurmd.pid" spool="$dir/node/spool" slurmd_log="$dir/node/slurmd.log"
        mkdir -p "$dir/node"
        printf '127.0.0.1\tlocalhost\n%s\t%s\n' "$ctl_addr" "$host" > "$dir/hosts"
        node_lines="" node_names=""
        for i in $(seq "$nodes"); do
            node_lines+="NodeName=zn$i NodeAddr=$ZT_NET_SUBNET.$((10 + i)) CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"$'\n'
            node_names+="${node_names:+ }zn$i"
            printf '%s\tzn%s\n' "$ZT_NET_SUBNET.$((10 + i))" "$i" >> "$dir/hosts"
        done
    fi
    set -- $ports
    cat > "$dir/slurm.conf" <<EOF
# generated by tests/slurm/cluster.sh
ClusterName=ztrain-test
SlurmctldHost=$host($ctl_addr)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$pidfile
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$slurmd_log
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
$node_lines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    printf 'optional %s %s\n' "$plugin" "${ZT_PLUGSTACK_ARGS:-}" > "$dir/plugstack.conf"
    if [ "$nodes" -gt 1 ]; then
        # PMIx's per-step client directories (spmix_appdir_<uid>_<step>) are
        # per node: under /tmp, shared by the namespace nodes, they collide
        # (node_up makes DIR/nodes/znN/pmix)
        echo "PMIxCliTmpDirBase=$dir/node/pmix" > "$dir/mpi.conf"
    fi
    cat > "$dir/env" <<EOF
export SLURM_CONF='$dir/slurm.conf'
export ZT_CLUSTER_DIR='$dir'
export ZT_CLUSTER_NODE='${node_names%% *}'
export ZT_CLUSTER_NODES='$node_names'
export ZT_CLUSTER_PLUGIN='$plugin'
EOF

    # ---------------------------------------------------------------- daemons
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -c -i >"$dir/log/slurmctld.out" 2>&1 || die "slurmctld failed: $(tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" 2>/dev/null)"
    wait_for 20 pid_alive "$dir/run/slurmctld.pid" || die "slurmctld did not start: $(tail -n 5 "$dir/log/slurmctld.log")"
    wait_for 20 scontrol ping || die "slurmctld does not answer: $(tail -n 5 "$dir/log/slurmctld.log")"
    if [ "$nodes" -gt 1 ]; then
        for i in $(seq "$nodes"); do
            # the node must reach slurmctld over the bridge (bash's /dev/tcp)
            nsenter --net="/run/netns/zt${ZT_NET_TAG}n$i" timeout 5 bash -c "exec 3<>/dev/tcp/$ctl_addr/$1" \
                2>/dev/null || die "node zn$i cannot reach slurmctld at $ctl_addr:$1 over the bridge" \
                "(a firewall on bridged traffic? net.bridge.bridge-nf-call-iptables and a FORWARD policy of DROP)"
            node_up "$dir" "$i" "$ZT_NET_TAG" ||
                die "slurmd on zn$i failed: $(tail -n 5 "$dir/nodes/zn$i/slurmd.log" "$dir/log/slurmd-zn$i.out" 2>/dev/null)"
            wait_for 20 pid_alive "$dir/nodes/zn$i/slurmd.pid" ||
                die "slurmd on zn$i did not start: $(tail -n 5 "$dir/nodes/zn$i/slurmd.log")"
        done
    else
        slurmd >"$dir/log/slurmd.out" 2>&1 || die "slurmd failed: $(tail -n 5 "$dir/log/slurmd.log" "$dir/log/slurmd.out" 2>/dev/null)"
        wait_for 20 pid_alive "$dir/run/slurmd.pid" || die "slurmd did not start: $(tail -n 5 "$dir/log/slurmd.log")"
    fi
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
    local f
    for f in "$dir"/nodes/zn*/slurmd.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
    stop_pidfile "$dir/run/slurmctld.pid"
    stop_pidfile "$dir/munge/munged.pid"
    net_down "$dir"
    return 0
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: cluster.sh start DIR"; start "$2" ;;
stop)  [ $# -eq 2 ] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
check) check ;;
*) die "usage: cluster.sh start|stop DIR | check" ;;
esac
