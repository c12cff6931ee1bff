#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringrun inside a Slurm allocation on the two-node test cluster: it starts the ranks with
# srun --mpi=pmix on the allocation's nodes and GPUs, prefixes their output and writes
# --output-dir as it does elsewhere, stops them gracefully on SIGTERM, and exits with the
# first failing rank's status. Needs root and Slurm: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
slurm_env
cd "$WORK"
alloc() { timeout 120 salloc --quiet "$@"; }

expect_rc 0 alloc -N2 --ntasks-per-node=2 "$RINGRUN" sh -c \
    'echo "on $SLURMD_NODENAME pmix=$PMIX_RANK rdv=${RING_RENDEZVOUS:-none}"; echo "e$PMIX_RANK" >&2'
for r in 0 1 2 3; do expect_in out "[$r]<stdout>:on n$((r / 2 + 1)) pmix=$r rdv=none"; done
expect_in err "[3]<stderr>:e3"
ok "inside an allocation ringrun starts SLURM_NTASKS ranks over both nodes through srun --mpi=pmix, without a rendezvous"

expect_rc 0 alloc -N2 --ntasks-per-node=2 "$RINGRUN" -np 3 --output-dir "$WORK/logs" sh -c 'echo "to-file-$PMIX_RANK"; echo e >&2'
grep -qx "to-file-2" "$WORK/logs/rank.2/stdout" || fail "--output-dir did not write rank.2/stdout"
grep -qx "e" "$WORK/logs/rank.0/stderr" || fail "--output-dir did not write rank.0/stderr"
[ ! -e "$WORK/logs/rank.3" ] || fail "-np 3 made a rank 3"
ok "-np and --output-dir: one file per rank and stream"

expect_rc 0 alloc -N2 --ntasks-per-node=2 --gres=gpu:2 "$RINGRUN" --gpus-per-rank 1 sh -c 'echo "gpu $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
[ "$(grep -o 'gpu n[12] [0-9]*' "$WORK/out" | sort | tr '\n' ' ')" = "gpu n1 0 gpu n1 1 gpu n2 0 gpu n2 1 " ] ||
    { cat "$WORK/out"; fail "--gpus-per-rank 1 did not give each rank its own GPU"; }
expect_rc 64 alloc -N1 -n1 "$RINGRUN" --gpus 0 true
expect_in err "the GPUs are Slurm's"
ok "--gpus-per-rank gives each rank one of Slurm's GPUs; --gpus (this host's) is refused in an allocation"

start=$SECONDS
expect_rc 7 alloc -N2 --ntasks-per-node=2 "$RINGRUN" --kill-grace 1 sh -c '[ "$PMIX_RANK" = 2 ] && exit 7; exec sleep 60'
[ $((SECONDS - start)) -lt 30 ] || fail "the other ranks were not killed after the grace period"
ok "a failing rank: the others are killed after --kill-grace and ringrun exits with its status (7)"

# SIGTERM to ringrun reaches every rank through scancel --signal, which lets them stop
# (srun would kill the step at once).
alloc -N2 --ntasks-per-node=2 "$RINGRUN" sh -c \
    'trap "echo got-term; exit 75" TERM; echo up; while :; do sleep 0.1; done' >"$WORK/term.out" 2>&1 &
pid=$!
wait_until 60 "the ranks did not start" sh -c "[ \$(grep -c '<stdout>:up' '$WORK/term.out') = 4 ]"
rr=$(descendant "$pid" ringrun) || fail "no ringrun below $pid"
kill -TERM "$rr"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 75 ] || { cat "$WORK/term.out"; fail "ringrun exited $rc after SIGTERM, want 75"; }
[ "$(grep -c '<stdout>:got-term' "$WORK/term.out")" = 4 ] || { cat "$WORK/term.out"; fail "not every rank got SIGTERM"; }
ok "SIGTERM to ringrun: every rank on both nodes gets it and exits 75"

expect_rc 0 alloc -N1 -n1 "$RINGRUN" --no-slurm -np 2 sh -c 'echo "local ${RING_RENDEZVOUS%:*} ${PMIX_RANK:-none}"'
expect_in out "[1]<stdout>:local 127.0.0.1 none"
ok "--no-slurm starts the ranks here with ringrun's rendezvous"
summary
