#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A real one-node Slurm cluster for tests and benchmarks, entirely under one directory:
# munged (its own key and socket), slurmctld, slurmd and, on request, slurmrestd with JWT
# auth. Nothing in /etc is touched; every daemon runs from Debian's packages.
#
#   contrib/slurm/testcluster.sh start DIR [--rest]   start (idempotent), wait until ready
#   contrib/slurm/testcluster.sh stop DIR             stop every daemon started in DIR
#   contrib/slurm/testcluster.sh env DIR              print the exports to use it
#
# After start, DIR/env holds SLURM_CONF (for sinfo, sbatch, srun...) and, with --rest,
# SLURMRESTD_URL, SLURMRESTD_USER and SLURMRESTD_TOKEN (a JWT) for REST clients, which send
# them as X-SLURM-USER-NAME and X-SLURM-USER-TOKEN.
set -euo pipefail

usage() { echo "usage: $0 start DIR [--rest] | stop DIR | env DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
rest=0
[ "${3:-}" = --rest ] && rest=1

free_port() { # a TCP port nobody listens on, below the kernel's ephemeral range
    local p low
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 12000 ] || low=32768
    for _ in $(seq 50); do
        p=$((10000 + RANDOM % (low - 10000)))
        (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
    done
    echo "testcluster: no free port" >&2; exit 1
}

running() { # running NAME: the daemon's pid file names a live process
    local p
    p=$(cat "$dir/$1.pid" 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

stop() {
    local p
    for d in slurmrestd slurmd slurmctld munged; do
        p=$(cat "$dir/$d.pid" 2>/dev/null) || continue
        [ -n "$p" ] || continue
        kill "$p" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
        rm -f "$dir/$d.pid"
    done
}

wait_for() { # wait_for WHAT SECONDS COMMAND...
    local what=$1 secs=$2
    shift 2
    for _ in $(seq $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "testcluster: $what did not come up in ${secs}s; see $dir/*.log" >&2
    return 1
}

start() {
    for b in munged slurmctld slurmd scontrol sinfo; do
        command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] ||
            { echo "testcluster: $b is missing (contrib/deps.sh installs Slurm)" >&2; exit 1; }
    done
    export PATH=$PATH:/usr/sbin
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
    chmod 0755 "$dir/munge" # munged wants its socket reachable by every user
    if [ ! -s "$dir/munge/munge.key" ]; then
        dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
        chmod 0400 "$dir/munge/munge.key"
    fi
    [ -s "$dir/jwt.key" ] || { dd if=/dev/urandom of="$dir/jwt.key" bs=32 count=1 status=none; chmod 0600 "$dir/jwt.key"; }
    local host cpus mem ctld_port d_port
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
    if [ ! -s "$dir/slurm.conf" ]; then
        ctld_port=$(free_port)
        d_port=$(free_port)
        cat >"$dir/slurm.conf" <<CONF
# Written by contrib/slurm/testcluster.sh: one node, everything under $dir.
ClusterName=ringtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/jwt.key
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MaxJobCount=1000000
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
CONF
    fi
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
    if ! running slurmd; then
        slurmd -f "$SLURM_CONF"
        wait_for "slurmd (node idle)" 30 sh -c "sinfo -h -N -o %t | grep -qx idle"
    fi
    {
        echo "export SLURM_CONF=$dir/slurm.conf"
    } >"$dir/env"
    if [ $rest = 1 ]; then
        local port user=nobody
        # slurmrestd refuses to run as root: it drops to nobody after binding, and must still
        # read slurm.conf.
        chmod 0755 "$dir"
        chmod 0644 "$dir/slurm.conf"
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

case $cmd in
start) start ;;
stop) stop ;;
env) cat "$dir/env" ;;
*) usage ;;
esac
