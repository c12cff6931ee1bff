#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A real two-node Slurm cluster with fake GPUs on one machine, for tests and benchmarks,
# entirely under one directory: munged (its own key and socket), slurmctld, two slurmds (n1
# and n2, two GPUs each) and, on request, slurmrestd with JWT auth. Nothing in /etc is
# touched; every daemon runs from Debian's packages. Needs root.
#
#   contrib/slurm/testcluster.sh start DIR [--rest]   start (idempotent), wait until ready
#   contrib/slurm/testcluster.sh stop DIR             cancel its jobs, stop every daemon, kill
#                                                     what is left (a hung slurmstepd)
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
# - The PMIx plugin of each slurmstepd makes its clients' rendezvous directory under TmpFS
#   (/tmp by default) with a name derived from the job and step only
#   (spmix_appdir_UID_JOB.STEP), so the two nodes' stepds of one step would collide, and one
#   that a killed step left behind makes a later cluster's step of the same job id fail on
#   that node ("Cannot create directory ..."; job ids restart at 1 with every cluster).
#   TmpFS is therefore DIR/NODE-tmp (%n), emptied when the node starts. Nothing else is
#   hidden: the nodes see the whole file system, /tmp included, as the nodes of a real
#   cluster see a shared one, so a build or a checkout anywhere runs on them.
# - Jobs of every user read slurm.conf and talk to munged's socket, both under DIR: DIR must
#   be reachable by every user (start checks), and its path free of blanks, which Slurm's
#   configuration files cannot hold.
# - stop leaves no process of the cluster behind, and touches no other: it finds the
#   daemons and their slurmstepds by the files under DIR they hold open, and a step's tasks
#   below its slurmstepd (a slurmstepd outlives its slurmd, and a killed daemon may leave
#   children).
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
dir=$(realpath -m "$2") # as /proc spells the files the daemons hold open (see stop)
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

some_daemon_runs() {
    local n
    if running munged || running slurmctld; then return 0; fi
    for n in $NODES; do running "slurmd.$n" && return 0; done
    return 1
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

# ours [COMM]: the pids of the live Slurm and munge processes that hold a file under DIR open,
# only those named COMM if given: the daemons (their logs, pid files) and the slurmstepds
# they started (their node's log). Not a mark in the environment: a slurmstepd writes its
# title over it.
ours() {
    local p
    for p in $(pgrep -x "${1:-munged|slurmctld|slurmscriptd|slurmd|slurmstepd|slurmrestd}"); do
        [ -n "$(find "/proc/$p/fd" -lname "$dir/*" -print -quit 2>/dev/null)" ] && alive "$p" && echo "$p"
    done
    return 0
}

alive() { # alive PID: the process exists and is not a zombie waiting for its parent
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st#Z}" = "$st" ]
}

# kill_trees PID...: SIGKILL to each process and to everything below it (a slurmstepd's
# tasks hold no file of DIR). Each is stopped before its children are listed, so that none
# can fork a child the walk misses; then all die at once.
kill_trees() {
    local queue=("$@") all=() p
    while [ ${#queue[@]} -gt 0 ]; do
        p=${queue[0]}
        queue=("${queue[@]:1}")
        kill -STOP "$p" 2>/dev/null || continue
        all+=("$p")
        # shellcheck disable=SC2207 # pids are single words
        queue+=($(pgrep -P "$p" || true))
    done
    [ ${#all[@]} = 0 ] || kill -9 "${all[@]}" 2>/dev/null || true
    for p in "${all[@]}"; do
        for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    done
}

# within SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds (0) or the time is
# up (1).
within() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}

no_jobs() { [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ]; }
no_stepds() { [ -z "$(ours slurmstepd)" ]; }

# kill_left [COMM]: kills what is left of the cluster (of the processes named COMM, if
# given), with everything below it, saying what that was.
kill_left() {
    local left
    left=$(ours "$@")
    [ -n "$left" ] || return 0
    echo "testcluster: killing what is left of the cluster in $dir:" >&2
    # shellcheck disable=SC2086 # one pid per word
    ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" >&2 || true
    # shellcheck disable=SC2086 # one pid per word
    kill_trees $left
}

stop() {
    # Jobs first, while slurmctld and the slurmds can still end their steps: with
    # proctrack/linuxproc a slurmstepd outlives its slurmd. A cancelled step's tasks get
    # KillWait (5 s) between SIGTERM and SIGKILL: 10 s for every job to end.
    if running slurmctld && [ -s "$dir/slurm.conf" ]; then
        local jobs
        jobs=$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null || true)
        # shellcheck disable=SC2086 # one id per word
        [ -z "$jobs" ] || SLURM_CONF=$dir/slurm.conf scancel $jobs 2>/dev/null || true
        within 10 no_jobs || true
    fi
    # A slurmstepd exits within moments of its job's end, but one may not: a hung one, or
    # one whose step ran through an outage of slurmctld (ctld-stop), which retries its
    # completion message long after slurmctld has forgotten the job. 3 s, then they and
    # their tasks are killed, before their slurmd would wait for them.
    within 3 no_stepds || kill_left slurmstepd
    stop_daemon slurmrestd
    for n in $NODES; do stop_daemon "slurmd.$n"; done
    stop_daemon slurmctld
    stop_daemon munged
    kill_left # a killed daemon's children (slurmctld's slurmscriptd), a late slurmstepd
    local left
    left=$(ours)
    [ -z "$left" ] || { echo "testcluster: still running after stop: $left" >&2; return 1; }
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
    rm -f "$dir/ports"
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
# Where each node's slurmstepds put their PMIx clients' rendezvous directory (see the top).
TmpFS=$dir/%n-tmp
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
    for b in munged slurmctld slurmd scontrol sinfo squeue scancel runuser; do
        command -v "$b" >/dev/null ||
            { echo "testcluster: $b is missing (contrib/deps.sh installs Slurm)" >&2; exit 1; }
    done
    [ "$(id -u)" = 0 ] || { echo "testcluster: the daemons run as root; run this as root" >&2; exit 1; }
    case $dir in
    *[[:space:]]*)
        echo "testcluster: '$dir' has a blank, which Slurm's configuration files cannot" \
            "hold; use a directory without one, e.g. /var/tmp/NAME" >&2
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
    # A cluster that is not running gets a configuration of this script's, on ports free now.
    some_daemon_runs || write_conf
    # Jobs run as their users, who read slurm.conf (srun, sbatch) and talk to munged; and
    # slurmrestd runs as nobody.
    chmod 0755 "$dir"
    chmod 0644 "$dir/slurm.conf" "$dir/gres.conf"
    runuser -u nobody -- test -r "$dir/slurm.conf" || {
        echo "testcluster: other users cannot reach $dir (a parent directory is closed to" \
            "them, as mktemp -d and /root are), and every job's user reads its slurm.conf;" \
            "use a directory every user can reach, e.g. /var/tmp/NAME" >&2
        exit 1
    }
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
        slurmd -N "$n" -f "$SLURM_CONF"
    done
    wait_for "slurmd n1 and n2 (nodes idle)" 60 nodes_idle
    echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
    if [ $rest = 1 ]; then
        local port user=nobody
        # slurmrestd refuses to run as root: it drops to nobody after binding, and must still
        # read slurm.conf (checked above).
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
