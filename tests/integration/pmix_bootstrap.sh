#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libring's PMIx bootstrap under Open MPI's mpirun (which serves PMIx to its ranks): the
# example trainer wires up with no ringrun and no rendezvous and reaches the 1-worker loss;
# a stop through mpirun (SIGUSR2, which ringd's mpirun wrapper turns into each rank's
# SIGTERM) checkpoints and exits 75, and the job resumes at another size; PMIx failures
# end ring_init with a message instead of a hang. The same bootstrap across two Slurm nodes
# is in slurm_ringd.sh and slurm_testcluster.sh. Needs mpirun and a PMIx build of libring.
. "$(dirname "$0")/lib.sh"
: "${TRAIN:?}" "${MPIRUN_WRAPPER:?}"
MPIRUN_WRAPPER_TEXT=$("$MPIRUN_WRAPPER")
command -v mpirun >/dev/null || skip "mpirun is not installed (contrib/deps.sh installs openmpi-bin)"
[ "${RING_HAVE_PMIX:-OFF}" = ON ] || skip "libring was built without PMIx (contrib/deps.sh installs libpmix-dev)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One host, any number of ranks; nothing of MPI's own transports is used.
MPIRUN=(mpirun --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo)
TOL=0.02
within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }

expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 3
l1=$(final_loss "$WORK/out")
expect_rc 0 env RING_LOG_LEVEL=info timeout 120 "${MPIRUN[@]}" -np 3 "$TRAIN" --epochs 3
l3=$(final_loss "$WORK/out")
[ "$(grep -c 'bootstrap pmix' "$WORK/err")" = 3 ] || { cat "$WORK/err"; fail "not every rank bootstrapped through PMIx"; }
expect_in err "initialized: rank 2 of 3 (local 2/3, host 0/1), bootstrap pmix"
within "$l3" "$l1" || fail "3 ranks under mpirun ended at loss $l3, 1 worker at $l1"
ok "under mpirun the trainer takes rank, size and local rank from PMIx and reaches the 1-worker loss ($l3 vs $l1)"

# ringd's stop of an mpirun job: SIGUSR2 to mpirun, which passes it to every rank's wrapper,
# which sends its program SIGTERM: the stop agreement, a checkpoint, exit 75 everywhere.
mkdir -p "$WORK/run/rank.0" "$WORK/run/rank.1" "$WORK/run/rank.2" "$WORK/ck"
RING_RUN_DIR=$WORK/run timeout 120 "${MPIRUN[@]}" -np 3 sh -c "$MPIRUN_WRAPPER_TEXT" rank \
    "$TRAIN" --epochs 2000 --step-sleep-ms 5 --checkpoint-dir "$WORK/ck" >"$WORK/mpirun.out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "epoch 2/" "$WORK/run/rank.0/stdout" 2>/dev/null && break; sleep 0.1; done
grep -q "epoch 2/" "$WORK/run/rank.0/stdout" || { cat "$WORK/mpirun.out"; fail "the mpirun job did not start"; }
mp=$(pgrep -x mpirun -P "$pid") || fail "cannot find the mpirun of timeout $pid"
kill -USR2 "$mp"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 75 ] || { cat "$WORK/mpirun.out" "$WORK"/run/rank.*/stderr; fail "mpirun exited $rc after SIGUSR2, want 75"; }
grep -q "stop requested: checkpointed" "$WORK/run/rank.0/stdout" || fail "rank 0 did not checkpoint"
[ "$(cat "$WORK"/run/rank.*/stderr | grep -o 'stop agreed after.*' | sort -u | wc -l)" = 1 ] ||
    { cat "$WORK"/run/rank.*/stderr; fail "the ranks did not stop after the same step"; }
expect_rc 0 timeout 120 "${MPIRUN[@]}" -np 2 "$TRAIN" --epochs 3 --checkpoint-dir "$WORK/ck"
expect_in out "resuming from $WORK/ck/checkpoint.bin at epoch"
ok "an mpirun job stops on SIGUSR2 (each rank checkpoints and exits 75, mpirun 75) and resumes on 2 ranks"

expect_rc 1 env PMIX_RANK=0 "$TRAIN" --epochs 1
expect_in err "PMIX_RANK=0 is set but PMIx_Init failed"
start=$SECONDS
expect_rc 1 env RING_TIMEOUT_SECONDS=2 timeout 60 "${MPIRUN[@]}" -np 2 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 10; fi; exec "$@"' rank "$TRAIN" --epochs 1
[ $((SECONDS - start)) -lt 9 ] || fail "a missing rank was not noticed within the setup timeout"
grep -q "not every rank reached the PMIx fence within 2 s" "$WORK/out" "$WORK/err" ||
    { cat "$WORK/out" "$WORK/err"; fail "no timeout message"; }
ok "PMIx failures end ring_init with what to check: no server (PMIx_Init), a rank that never comes (fence timeout)"
summary
