#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A real two-node Slurm cluster with fake GPUs on one machine, for tests and benchmarks,
# entirely under one directory: munged (its own key and socket), slurmctld, two slurmds (n1
# and n2, two GPUs each) and, on request, slurmrestd with JWT auth. Nothing in /etc is
# touched; every daemon runs from Debian's packages. Needs root.
#
#   contrib/slurm/testcluster.sh start DIR [--rest]   start (idempotent), wait until ready
#   contrib/slurm/testcluster.sh stop DIR             cancel its jobs, stop every daemon
#   contrib/slurm/testcluster.sh env DIR              print the exports to use it
#   contrib/slurm/testcluster.sh status DIR           exit 0 when every daemon is up
#   contrib/slurm/testcluster.sh ctld-stop DIR        an outage: slurmctld stops (saving its
#   contrib/slurm/testcluster.sh ctld-start DIR       state), and comes back with it, jobs kept
#
# After start, DIR/env holds SLURM_CONF (for sinfo, sbatch, srun...) and, with --rest,
# SLURMRESTD_URL, SLURMRESTD_USER and SLURMRESTD_TOKEN (a JWT) for REST clients, which send
# them as X-SLURM-USER-NAME and X-SLURM-USER-TOKEN.
#
# How two nodes share one machine:
# - Both slurmds listen on 127.0.0.1, on ports of their own (NodeAddr/Port per node), and
#   keep their spool, log and pid files apart with slurm.conf's %n.
# - The PMIx plugin of each slurmstepd puts its rendezvous files under /tmp with names
#   derived from the job and step only, so the two nodes' stepds of one step would collide,
#   and a directory a killed step left behind makes a later cluster's step of the same job
#   id fail on that node ("Cannot create directory /tmp/spmix_appdir_..."; job ids restart
#   at 1 with every cluster). Each slurmd therefore runs in a mount namespace of its own
#   whose /tmp is DIR/NODE-tmp, emptied when the node starts. This is also why DIR must not
#   be under /tmp: the nodes would not see it.
# - GPUs: each node has two, and gres.conf names files under DIR/gpu as their devices. Each
#   is a character device node with /dev/null's numbers: slurmd counts a plain file but
#   gives it no device index ("not a valid character or block device"), and then sets no
#   CUDA_VISIBLE_DEVICES. With task/none nothing is confined, so Slurm's placement shows in
#   CUDA_VISIBLE_DEVICES and in scontrol's GRES=gpu(IDX:...), which Ringmaster's tests check.
set -euo pipefail

usage() {
    echo "usage: $0 start DIR [--rest] | stop DIR | env DIR | status DIR | ctld-stop DIR | ctld-start DIR" >&2
    exit 2
}
[ $# -ge 2 ] || usage
cmd=$1
dir=$(realpath -m "$2") # symlinks resolved, for the /tmp check
rest=0
[ "${3:-}" = --rest ] && rest=1
export PATH=$PATH:/usr/sbin:/sbin
NODES="n1 n2"
GPUS_PER_NODE=2
CPUS_PER_NODE=8

free_port() { # a TCP port nobody listens on, below the kernel's ephemeral range
    local p low
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 12000 ] || low=32768
    for _ in $(seq 50); do
        p=$((10000 + RANDOM % (low - 10000)))
        grep -qx "$p" "$dir/ports" 2>/dev/null && continue
        (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p" >>"$dir/ports"; echo $p; return; }
    done
    echo "testcluster: no free port" >&2
    exit 1
}

running() { # running NAME: the daemon's pid file names a live process
    local p
    p=$(cat "$dir/$1.pid" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

stop_daemon() { # stop_daemon NAME: TERM, then KILL after 5 s
    local p
    p=$(cat "$dir/$1.pid" 2>/dev/null) || return 0
    if [ -n "$p" ]; then
        kill "$p" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    fi
    rm -f "$dir/$1.pid"
}

stop() {
    # Jobs first, while slurmctld and the slurmds can still end their steps: with
    # proctrack/linuxproc a slurmstepd outlives its slurmd.
    if running slurmctld && [ -s "$dir/slurm.conf" ]; then
        local jobs
        jobs=$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086 # one id per word
            SLURM_CONF=$dir/slurm.conf scancel $jobs 2>/dev/null || true
            for _ in $(seq 100); do
                [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ] && break
                sleep 0.1
            done
        fi
    fi
    stop_daemon slurmrestd
    for n in $NODES; do stop_daemon "slurmd.$n"; done
    stop_daemon slurmctld
    stop_daemon munged
    # A node's private /tmp is a mount in its namespace only, which ended with its slurmd.
}

wait_for() { # wait_for WHAT SECONDS COMMAND...
    local what=$1 secs=$2
    shift 2
    for _ in $(seq $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "testcluster: $what did not come up in ${secs}s; see $dir/*.log" >&2
    return 1
}

nodes_idle() { # every node is idle (not down, drained or still booting)
    local states
    states=$(sinfo -h -N -o '%N %t' | sort -u)
    [ "$(echo "$states" | grep -c ' idle$')" = "$(echo $NODES | wc -w)" ]
}

write_conf() {
    local host ctld_port
    host=$(hostname -s)
    ctld_port=$(free_port)
    {
        cat <<CONF
# Written by contrib/slurm/testcluster.sh: two nodes on one machine, everything under $dir.
ClusterName=ringtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/jwt.key
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
# No cgroups on a test machine: processes are tracked through /proc and not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
MpiDefault=none
# Both nodes claim $CPUS_PER_NODE CPUs whatever the machine has: the tests place ranks, not load.
SlurmdParameters=config_overrides
ReturnToService=2
MaxJobCount=1000000
# Steps get SIGTERM, then SIGKILL this many seconds later (scancel, time limits).
KillWait=5
SlurmctldDebug=info
SlurmdDebug=info
CONF
        for n in $NODES; do
            echo "NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port)" \
                "CPUs=$CPUS_PER_NODE Gres=gpu:$GPUS_PER_NODE State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64"
    } >"$dir/slurm.conf"
    : >"$dir/gres.conf"
    for n in $NODES; do
        mkdir -p "$dir/gpu/$n"
        for g in $(seq 0 $((GPUS_PER_NODE - 1))); do
            [ -e "$dir/gpu/$n/nvidia$g" ] || mknod "$dir/gpu/$n/nvidia$g" c 1 3 || {
                echo "testcluster: cannot mknod fake GPUs; using plain files, which Slurm" \
                    "counts but gives no device index (no CUDA_VISIBLE_DEVICES)" >&2
                : >"$dir/gpu/$n/nvidia$g"
            }
        done
        echo "NodeName=$n Name=gpu File=$dir/gpu/$n/nvidia[0-$((GPUS_PER_NODE - 1))]" >>"$dir/gres.conf"
    done
}

# Closes every descriptor above stderr that this shell inherited, so that no daemon keeps
# one: a caller's `flock LOCK testcluster.sh start` would otherwise stay locked for as long
# as munged or slurmrestd live.
close_inherited() {
    local fd
    for fd in $(ls /proc/$$/fd); do
        [ "$fd" -gt 2 ] && [ "$fd" != 255 ] && eval "exec $fd>&-" 2>/dev/null || true
    done
}

start() {
    close_inherited
    for b in munged slurmctld slurmd scontrol sinfo squeue scancel unshare; do
        command -v "$b" >/dev/null ||
            { echo "testcluster: $b is missing (contrib/deps.sh installs Slurm)" >&2; exit 1; }
    done
    [ "$(id -u)" = 0 ] || { echo "testcluster: the daemons run as root; run this as root" >&2; exit 1; }
    case $dir/ in
    /tmp/*)
        echo "testcluster: $dir is under /tmp, which node n2 does not see (it has a private" \
            "/tmp); use a directory elsewhere, e.g. /var/tmp/..." >&2
        exit 1
        ;;
    esac
    mkdir -p "$dir/state" "$dir/munge"
    for n in $NODES; do mkdir -p "$dir/spool/$n" "$dir/$n-tmp"; done
    chmod 1777 "$dir"/*-tmp
    chmod 0755 "$dir/munge" # munged wants its socket reachable by every user
    if [ ! -s "$dir/munge/munge.key" ]; then
        dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
        chmod 0400 "$dir/munge/munge.key"
    fi
    [ -s "$dir/jwt.key" ] || { dd if=/dev/urandom of="$dir/jwt.key" bs=32 count=1 status=none; chmod 0600 "$dir/jwt.key"; }
    [ -s "$dir/slurm.conf" ] || write_conf
    export SLURM_CONF=$dir/slurm.conf
    if ! running munged; then
        munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
            --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
            --seed-file="$dir/munge/seed"
        wait_for munged 10 test -S "$dir/munge/munge.sock"
    fi
    if ! running slurmctld; then
        slurmctld -c -f "$SLURM_CONF"
        wait_for slurmctld 30 scontrol ping
    fi
    for n in $NODES; do
        running "slurmd.$n" && continue
        find "$dir/$n-tmp" -mindepth 1 -delete
        # --propagation private: the bind mount stays in this namespace.
        unshare -m --propagation private sh -c \
            'mount --bind "$1" /tmp && exec slurmd -N "$2" -f "$3"' sh "$dir/$n-tmp" "$n" \
            "$SLURM_CONF"
    done
    wait_for "slurmd n1 and n2 (nodes idle)" 60 nodes_idle
    echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
    if [ $rest = 1 ]; then
        local port user=nobody
        # slurmrestd refuses to run as root: it drops to nobody after binding, and must still
        # read slurm.conf.
        chmod 0755 "$dir"
        chmod 0644 "$dir/slurm.conf" "$dir/gres.conf"
        runuser -u "$user" -- test -r "$dir/slurm.conf" || {
            echo "testcluster: $user cannot read $dir/slurm.conf (slurmrestd runs as $user);" \
                "put DIR where every user can reach it" >&2
            exit 1
        }
        if ! running slurmrestd; then
            port=$(free_port)
            SLURM_JWT=daemon slurmrestd -f "$SLURM_CONF" -a rest_auth/jwt -s openapi/v0.0.38 -u "$user" \
                "127.0.0.1:$port" >"$dir/slurmrestd.log" 2>&1 &
            echo $! >"$dir/slurmrestd.pid"
            echo "$port" >"$dir/slurmrestd.port"
        fi
        port=$(cat "$dir/slurmrestd.port")
        wait_for slurmrestd 20 bash -c "echo >/dev/tcp/127.0.0.1/$port"
        {
            echo "export SLURMRESTD_URL=http://127.0.0.1:$port"
            echo "export SLURMRESTD_USER=root"
            # Not SLURM_JWT: with that set, srun and sbatch would authenticate by JWT too,
            # which slurmd does not accept.
            echo "export SLURMRESTD_TOKEN=$(scontrol token username=root lifespan=86400 | cut -d= -f2-)"
        } >>"$dir/env"
    fi
    echo "testcluster: up in $dir (source $dir/env)" >&2
}

status() {
    local d
    for d in munged slurmctld slurmd.n1 slurmd.n2; do
        running "$d" || { echo "testcluster: $d is not running in $dir" >&2; return 1; }
    done
    SLURM_CONF=$dir/slurm.conf scontrol ping >/dev/null 2>&1 ||
        { echo "testcluster: slurmctld does not answer" >&2; return 1; }
}

# An outage of the controller alone: the nodes and their jobs go on, and slurmctld comes back
# with the state it saved (no -c, unlike a cluster's first start).
ctld_start() {
    export SLURM_CONF=$dir/slurm.conf
    running slurmctld || slurmctld -f "$SLURM_CONF"
    wait_for slurmctld 30 scontrol ping
}

case $cmd in
start) start ;;
stop) stop ;;
ctld-stop) stop_daemon slurmctld ;;
ctld-start) ctld_start ;;
env) cat "$dir/env" ;;
status) status ;;
*) usage ;;
esac
