#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libring under Open MPI's mpirun with no ringrun: the MPI bootstrap (RING_BOOTSTRAP=mpi)
# and the MPI collective backend (RING_CPU_OPERATIONS=mpi), alone and with the PMIx
# bootstrap; what each wrong setting says; a rank that never starts, a stopped rank and a
# killed rank give errors, never a hang. The foundation and engine suites over MPI are the
# collectives_*_mpi and engine_mpi tests (mpirun_as_ringrun.sh).
. "$(dirname "$0")/lib.sh"
: "${TRAIN:?}" "${FAULT_CHECK:?}"
command -v mpirun >/dev/null || skip "mpirun is not installed (contrib/deps.sh installs openmpi-bin)"
[ "${RING_HAVE_MPI:-OFF}" = ON ] || skip "libring was built without MPI (contrib/deps.sh installs libopenmpi-dev)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none --mca btl_tcp_if_include lo)
TOL=0.02
within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }

expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 3
l1=$(final_loss "$WORK/out")
expect_rc 0 env RING_LOG_LEVEL=info RING_BOOTSTRAP=mpi RING_CPU_OPERATIONS=mpi \
    "${MPIRUN[@]}" -np 3 "$TRAIN" --epochs 3
l3=$(final_loss "$WORK/out")
[ "$(grep -c 'bootstrap mpi, host memory through mpi' "$WORK/err")" = 3 ] ||
    { cat "$WORK/err"; fail "not every rank bootstrapped from MPI and chose the MPI backend"; }
expect_in err "initialized: rank 2 of 3 (local 2/3, host 0/1), bootstrap mpi, host memory through mpi"
within "$l3" "$l1" || fail "3 ranks over MPI ended at loss $l3, 1 worker at $l1"
ok "RING_BOOTSTRAP=mpi RING_CPU_OPERATIONS=mpi: the trainer reaches the 1-worker loss ($l3 vs $l1)"

expect_rc 0 env RING_LOG_LEVEL=info RING_BOOTSTRAP=mpi "${MPIRUN[@]}" -np 2 "$TRAIN" --epochs 1
[ "$(grep -c 'bootstrap mpi, host memory through ring' "$WORK/err")" = 2 ] ||
    { cat "$WORK/err"; fail "RING_BOOTSTRAP=mpi alone should keep libring's own ring"; }
if [ "${RING_HAVE_PMIX:-OFF}" = ON ]; then
    expect_rc 0 env RING_LOG_LEVEL=info RING_CPU_OPERATIONS=mpi "${MPIRUN[@]}" -np 2 "$TRAIN" --epochs 1
    [ "$(grep -c 'bootstrap pmix, host memory through mpi' "$WORK/err")" = 2 ] ||
        { cat "$WORK/err"; fail "under mpirun PMIx comes first, and the MPI backend works with it"; }
fi
ok "the bootstrap and the collective backend are chosen independently"

expect_rc 1 env RING_CPU_OPERATIONS=gloo "$RINGRUN" -np 2 "$TRAIN" --epochs 1
expect_in err "RING_CPU_OPERATIONS='gloo' must be ring or mpi"
expect_rc 1 env RING_CPU_OPERATIONS=mpi "$RINGRUN" -np 2 "$TRAIN" --epochs 1
expect_in err "RING_CPU_OPERATIONS=mpi needs the job started by mpirun"
expect_rc 1 env RING_BOOTSTRAP=mpi "$TRAIN" --epochs 1
expect_in err "RING_BOOTSTRAP=mpi, but the process was not started by mpirun"
expect_rc 1 env RING_BOOTSTRAP=mpix "$TRAIN" --epochs 1
expect_in err "RING_BOOTSTRAP='mpix' is not one of auto,"
ok "wrong settings end ring_init with what to fix"

start=$SECONDS
expect_rc 1 env RING_BOOTSTRAP=mpi RING_TIMEOUT_SECONDS=2 "${MPIRUN[@]}" -np 2 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 10; fi; exec "$@"' rank "$TRAIN" --epochs 1
[ $((SECONDS - start)) -lt 9 ] || fail "a missing rank was not noticed within the setup timeout"
expect_in err "MPI_Init did not complete within 2 s (RING_TIMEOUT_SECONDS)"
ok "a rank that never calls ring_init: the others' MPI_Init gives up after RING_TIMEOUT_SECONDS"

# fault_check's survivors print what they got and exit 0 when it came within the timeout.
# mpirun kills every rank once one dies; --enable-recovery lets the survivors see it.
export RING_BOOTSTRAP=mpi RING_CPU_OPERATIONS=mpi
start=$SECONDS
RING_OP_TIMEOUT_SECONDS=2 "${MPIRUN[@]}" -np 3 "$FAULT_CHECK" stall 1 300 >"$WORK/out" 2>"$WORK/err" || true
[ "$(grep -c 'got RING_E' "$WORK/out")" = 2 ] || { cat "$WORK/out" "$WORK/err"; fail "not every survivor reported an error"; }
expect_in out "RING_ETIMEDOUT"
[ $((SECONDS - start)) -lt 25 ] || fail "the survivors took too long to time out"
grep 'got RING_E' "$WORK/out"
ok "a stopped rank mid-MPI_Iallreduce: the others time out"

start=$SECONDS
RING_OP_TIMEOUT_SECONDS=3 "${MPIRUN[@]}" --enable-recovery -np 4 "$FAULT_CHECK" kill 2 300 \
    >"$WORK/out" 2>"$WORK/err" || true
[ "$(grep -c 'got RING_E' "$WORK/out")" = 3 ] || { cat "$WORK/out" "$WORK/err"; fail "not every survivor reported an error"; }
[ $((SECONDS - start)) -lt 25 ] || fail "the survivors took too long to notice the dead rank"
grep 'got RING_E' "$WORK/out"
ok "a rank killed mid-MPI_Iallreduce: the 3 others get an error"
summary
