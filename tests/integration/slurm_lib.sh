# SPDX-License-Identifier: Apache-2.0
# Helpers for the tests that run Ringmaster on the Slurm test cluster: sourced after setting
# TMPDIR to /var/tmp, where the jobs' users (nobody, for ringd's jobs) reach $WORK, as they
# might not in a TMPDIR of the caller's own. Skips without root or Slurm, and fails instead
# in CI.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/contrib/slurm/testcluster.sh
export PATH=$PATH:/usr/sbin
for b in slurmctld slurmd munged srun sbatch squeue scancel scontrol; do
    command -v "$b" >/dev/null || skip "$b is not installed (contrib/deps.sh installs it)"
done
[ "$(id -u)" = 0 ] || skip "the Slurm test cluster runs its daemons as root"

# The cluster: .ci/run's, else the fixture's (tests/integration/CMakeLists.txt says where).
SLURM_CLUSTER=${RING_SLURM_CLUSTER:-${RING_SLURM_CLUSTER_DEFAULT:-}}
[ -n "$SLURM_CLUSTER" ] || fail "neither RING_SLURM_CLUSTER nor RING_SLURM_CLUSTER_DEFAULT is set (ctest sets the latter)"
chmod 0755 "$WORK"

# slurm_env: uses the running cluster (the fixture started it).
slurm_env() {
    "$TC" status "$SLURM_CLUSTER" || fail "the Slurm test cluster in $SLURM_CLUSTER is not running (the slurm fixture starts it)"
    # shellcheck disable=SC1091
    . "$SLURM_CLUSTER/env"
}

# wait_until SECONDS WHAT COMMAND...: polls COMMAND every 0.1 s until it succeeds; fails
# with WHAT after the deadline.
wait_until() {
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "$what (not within ${secs}s)"
}

# descendant PID NAME: the pid of the first process named NAME below PID (or nothing).
descendant() {
    local c
    for c in $(pgrep -P "$1"); do
        if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$2" ]; then echo "$c"; return 0; fi
        descendant "$c" "$2" && return 0
    done
    return 1
}
