#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The example trainer across the two Slurm nodes, wired up through PMIx: ringrun inside an
# allocation (srun --mpi=pmix, libring's PMIx bootstrap: no rendezvous), the sbatch template
# `sbatch contrib/slurm/train.sbatch` (4 ranks, 2 per node), and a stop inside Slurm that
# checkpoints, exits 75 and resumes on one node. Needs root and Slurm: skips without them,
# fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
: "${TRAIN:?}"
[ "${RING_HAVE_PMIX:-OFF}" = ON ] || skip "libring was built without PMIx (contrib/deps.sh installs libpmix-dev)"
slurm_env
cd "$WORK"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOL=0.02
within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
# Every rank says how it bootstrapped and where it sits: "rank R of N (local L/LS, host H/HS)".
export RING_LOG_LEVEL=info

expect_rc 0 "$RINGRUN" --no-slurm -np 1 "$TRAIN" --epochs 3
l1=$(final_loss "$WORK/out")

expect_rc 0 timeout 120 salloc --quiet -N2 --ntasks-per-node=2 "$RINGRUN" "$TRAIN" --epochs 3
for r in 0 1 2 3; do
    expect_in err "[$r]<stderr>:[ring $r] info: initialized: rank $r of 4 (local $((r % 2))/2, host $((r / 2))/2), bootstrap pmix"
done
l4=$(final_loss "$WORK/out")
within "$l4" "$l1" || fail "4 ranks on 2 nodes ended at loss $l4, 1 worker at $l1"
ok "ringrun in an allocation: 4 ranks on n1 and n2 bootstrap through PMIx and reach the 1-worker loss ($l4 vs $l1)"

mkdir -p "$WORK/ckpt"
expect_rc 0 env TRAIN_ARGS="--epochs 3" RING_CHECKPOINT_DIR="$WORK/ckpt" \
    timeout 180 sbatch --wait -o "$WORK/sbatch.out" "$ROOT/contrib/slurm/train.sbatch"
grep -q "^Submitted batch job" "$WORK/out" || fail "sbatch said: $(cat "$WORK/out")"
for r in 0 1 2 3; do
    grep -qF "[$r]<stderr>:[ring $r] info: initialized: rank $r of 4 (local $((r % 2))/2, host $((r / 2))/2), bootstrap pmix" \
        "$WORK/sbatch.out" || { cat "$WORK/sbatch.out"; fail "rank $r of train.sbatch did not start as expected"; }
done
l=$(final_loss "$WORK/sbatch.out")
within "$l" "$l1" || fail "train.sbatch ended at loss $l, 1 worker at $l1"
[ -f "$WORK/ckpt/checkpoint.bin" ] || fail "train.sbatch wrote no checkpoint to RING_CHECKPOINT_DIR"
ok "sbatch contrib/slurm/train.sbatch runs 4 ranks over both nodes to the right loss ($l)"

# A stop inside Slurm: scancel --batch --signal=TERM reaches ringrun (the batch shell),
# which passes it to every rank through their stop wrappers; they agree on it, rank 0
# checkpoints, all exit 75, and so does the job; then it resumes on one node.
rm -rf "$WORK/ckpt" && mkdir -p "$WORK/ckpt"
jid=$(env TRAIN_ARGS="--epochs 2000 --step-sleep-ms 5" RING_CHECKPOINT_DIR="$WORK/ckpt" \
    sbatch --parsable -o "$WORK/stop.out" "$ROOT/contrib/slurm/train.sbatch")
wait_until 60 "train.sbatch did not start training" grep -q "epoch 2/" "$WORK/stop.out"
scancel --batch --signal=TERM "$jid"
wait_until 60 "job $jid did not end after the stop" sh -c "[ -z \"\$(squeue -h -j $jid 2>/dev/null)\" ]"
grep -q "stop requested: checkpointed at epoch" "$WORK/stop.out" || { cat "$WORK/stop.out"; fail "no checkpoint at the stop"; }
[ "$(grep -o 'stop agreed after.*' "$WORK/stop.out" | sort -u | wc -l)" = 1 ] ||
    { grep 'stop agreed' "$WORK/stop.out"; fail "the ranks stopped after different steps"; }
[ "$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*ExitCode=\([0-9:]*\).*/\1/p')" = 75:0 ] ||
    { cat "$WORK/stop.out"; scontrol show job "$jid" >&2 || true; fail "job $jid did not exit 75"; }
expect_rc 0 timeout 120 salloc --quiet -N1 --ntasks=2 "$RINGRUN" "$TRAIN" --epochs 8 --checkpoint-dir "$WORK/ckpt"
expect_in out "resuming from $WORK/ckpt/checkpoint.bin at epoch"
ok "scancel --batch --signal=TERM stops all 4 ranks at one step with a checkpoint (exit 75); it resumes on 2 ranks of one node"
summary
