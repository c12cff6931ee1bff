#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stands in for ringrun (RINGRUN=) so that the integration suites run their ranks under
# Open MPI's mpirun instead:
#   mpirun_as_ringrun.sh -np N [--timeout S] [--kill-grace S] PROGRAM [ARGS...]
# The ranks bootstrap from MPI (RING_BOOTSTRAP=mpi) and move their data through it
# (RING_CPU_OPERATIONS=mpi), unless the caller set those. --timeout becomes
# RING_TIMEOUT_SECONDS as with ringrun; --kill-grace is dropped (mpirun stops the other
# ranks as soon as one fails). The exit status is mpirun's: 0 when every rank succeeded,
# else the first failing rank's.
set -euo pipefail

np=
while [ $# -gt 0 ]; do
    case $1 in
    -np) np=$2; shift 2 ;;
    --timeout) export RING_TIMEOUT_SECONDS=$2; shift 2 ;;
    --kill-grace) shift 2 ;;
    --) shift; break ;;
    -*) echo "mpirun_as_ringrun.sh: unknown option '$1'" >&2; exit 64 ;;
    *) break ;;
    esac
done
[ -n "$np" ] && [ $# -gt 0 ] || { echo "usage: mpirun_as_ringrun.sh -np N [--timeout S] [--kill-grace S] PROGRAM [ARGS...]" >&2; exit 64; }
export RING_BOOTSTRAP=${RING_BOOTSTRAP:-mpi} RING_CPU_OPERATIONS=${RING_CPU_OPERATIONS:-mpi}
# As root mpirun needs --allow-run-as-root; one machine with few cores needs
# --oversubscribe; TCP, where Open MPI uses it, stays on loopback.
exec mpirun --allow-run-as-root --oversubscribe --mca btl_tcp_if_include lo -np "$np" "$@"
