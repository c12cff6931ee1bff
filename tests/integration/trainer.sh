#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The example trainer: 4 workers reach the 1-worker loss, checkpoints move between world
# sizes, and a SIGTERM to one rank stops every rank at the same step with exit 75.
. "$(dirname "$0")/lib.sh"
: "${TRAIN:?}"

# Relative tolerance on the final loss between world sizes. SGD with the learning rate
# scaled by the world size follows a different path than one worker (4x fewer, 4x larger
# steps), so the final losses differ slightly; 2% is well above that gap (about 0.1% at
# 10 epochs) and far below what a wrong gradient average would give.
TOL=0.02

within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }

expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 10
l1=$(final_loss "$WORK/out")
expect_rc 0 env RING_RUN_DIR="$WORK" "$RINGRUN" -np 4 "$TRAIN" --epochs 10
l4=$(final_loss "$WORK/out")
start=$(sed -n 's/.*start:.*loss \([0-9.]*\).*/\1/p' "$WORK/out")
e1=$(sed -n 's/.*epoch 1\/10 loss \([0-9.]*\).*/\1/p' "$WORK/out")
echo "final loss: 1 worker $l1, 4 workers $l4 (start $start, after epoch 1 $e1)"
awk -v s="$start" -v e="$e1" -v f="$l4" 'BEGIN { exit !(s > e && e > f) }' || fail "the loss did not go down"
within "$l4" "$l1" || fail "4 workers ended at loss $l4, 1 worker at $l1: more than ${TOL} apart"
grep -q '"epoch":10,"epochs":10' "$WORK/progress.json" || fail "no progress.json from rank 0"
ok "4 workers reach the 1-worker loss within ${TOL} (relative)"

expect_rc 0 "$RINGRUN" -np 4 "$TRAIN" --epochs 5 --checkpoint-dir "$WORK/c4"
for np in 2 1; do
    cp -r "$WORK/c4" "$WORK/c4to$np"
    expect_rc 0 "$RINGRUN" -np $np "$TRAIN" --epochs 10 --checkpoint-dir "$WORK/c4to$np"
    expect_in out "resuming from $WORK/c4to$np/checkpoint.bin at epoch 5 (+0 samples) on $np rank"
    l=$(final_loss "$WORK/out")
    echo "4 workers for 5 epochs, then $np for 5 more: final loss $l"
    within "$l" "$l1" || fail "resumed on $np ranks ended at $l, uninterrupted at $l1"
done
ok "a checkpoint written by 4 workers resumes on 2 and on 1"

# Stop: SIGTERM to one rank only.
"$RINGRUN" -np 4 "$TRAIN" --epochs 10 --step-sleep-ms 2 --checkpoint-dir "$WORK/cs" \
    >"$WORK/out" 2>"$WORK/err" &
pid=$!
# After epoch 1 every rank is past ring_init, whose handler turns SIGTERM into a stop.
wait_for 60 "the trainer's first epoch" 'grep -q "epoch 1/10" "$WORK/out"'
victim=$(pgrep -P $pid | sed -n 3p)
[ -n "$victim" ] || fail "could not find the ranks of ringrun $pid"
kill -TERM "$victim"
rc=0; wait $pid || rc=$?
[ "$rc" = 75 ] || { cat "$WORK/out" "$WORK/err"; fail "ringrun exited $rc after SIGTERM to one rank, want 75"; }
expect_in out "stop requested: checkpointed at epoch"
grep -q "rank [0-9] exited with status 75" "$WORK/err" || fail "no rank exited 75"
if grep -q "was killed" "$WORK/err"; then fail "a rank was killed instead of stopping"; fi
[ "$(grep -c 'stop agreed after' "$WORK/err")" = 4 ] || { cat "$WORK/err"; fail "not every rank reported the stop"; }
[ "$(grep -o 'stop agreed after.*' "$WORK/err" | sort -u | wc -l)" = 1 ] ||
    { grep 'stop agreed' "$WORK/err"; fail "ranks stopped after different steps"; }
ok "SIGTERM to one rank: all ranks checkpoint and exit 75"

expect_rc 0 "$RINGRUN" -np 2 "$TRAIN" --epochs 10 --checkpoint-dir "$WORK/cs"
expect_in out "resuming from $WORK/cs/checkpoint.bin at epoch"
l=$(final_loss "$WORK/out")
within "$l" "$l1" || fail "resumed after a stop: loss $l, uninterrupted $l1"
ok "the stopped job resumes on 2 workers and finishes at loss $l"

mkdir -p "$WORK/other"
expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 1 --hidden 4 --checkpoint-dir "$WORK/other"
expect_rc 2 "$RINGRUN" -np 1 "$TRAIN" --epochs 2 --hidden 8 --checkpoint-dir "$WORK/other"
expect_in err "use another --checkpoint-dir or --fresh"
expect_rc 2 "$RINGRUN" -np 1 "$TRAIN" --epochs nope
expect_in err "bad value 'nope' for --epochs"
printf '1,0.5\n0,0.1,0.2\n' >"$WORK/bad.csv"
expect_rc 2 "$RINGRUN" -np 1 "$TRAIN" --data "$WORK/bad.csv"
expect_in err "bad.csv:2: 2 features, the first line had 1"
ok "bad arguments, data and checkpoints exit 2 with a message"

awk 'BEGIN { srand(7); for (i = 0; i < 2000; i++) { a = rand() * 2 - 1; b = rand() * 2 - 1;
      printf "%d,%.4f,%.4f\n", (a + b > 0), a, b } }' >"$WORK/data.csv"
expect_rc 0 "$RINGRUN" -np 2 "$TRAIN" --data "$WORK/data.csv" --epochs 5 --hidden 0
expect_in out "start: 2000 samples, 3 parameters"
ok "a CSV dataset trains (logistic regression, loss $(final_loss "$WORK/out"))"

summary
