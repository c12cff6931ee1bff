#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ctest fixture behind the tests that run Ringmaster on Slurm: `start` brings up the
# two-node test cluster before them, `stop` ends it after them (ctest runs it even when they
# fail). With RING_SLURM_CLUSTER set (.ci/run does), that cluster is used and left to its
# owner; otherwise one lives in $RING_SLURM_CLUSTER_DEFAULT (in the build folder).
# Needs root and the Slurm packages: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"

case ${1:-} in
start)
    if [ -n "${RING_SLURM_CLUSTER:-}" ]; then
        "$TC" status "$SLURM_CLUSTER" || fail "RING_SLURM_CLUSTER=$SLURM_CLUSTER is not running"
        echo "using the cluster in $SLURM_CLUSTER"
    else
        "$TC" start "$SLURM_CLUSTER" || { tail -n 20 "$SLURM_CLUSTER"/*.log >&2; fail "the test cluster did not start"; }
    fi
    ;;
stop)
    [ -n "${RING_SLURM_CLUSTER:-}" ] || "$TC" stop "$SLURM_CLUSTER"
    ;;
*) fail "usage: $0 start|stop" ;;
esac
