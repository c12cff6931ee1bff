#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/allreduce/run.sh and its summarizer: the median over runs and the median of
# same-run ratios on hand-made rows, runs kept apart across files, bad input, and one short
# real run of every peer built here (2 interleaved runs, np 2, 4 and 16 KiB), whose saved
# rows summarize to the same rows again. Speed is not checked: only that every figure is
# there and comes from the runs asked for.
#
#   bench_allreduce.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=${1:?usage: bench_allreduce.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
run_sh=$here/../../bench/allreduce/run.sh
command -v jq >/dev/null || skip "needs jq (contrib/deps.sh)"

# row IMPL BYTES US RUN [BATCH]: one row as bench_allreduce prints it, tagged as run.sh does.
row() {
    local busbw
    busbw=$(awk -v b="$2" -v t="$3" 'BEGIN { printf "%.4f", b / t / 1e3 }')
    printf '{"bench":"allreduce","impl":"%s","np":2,"bytes":%d,"iters":5,"batch":%d,"median_us":%s,"algbw_gbs":%s,"busbw_gbs":%s,"run":%d}\n' \
        "$1" "$2" "${5:-1}" "$3" "$busbw" "$busbw" "$4"
}

# Three runs in which libring-shm is 2x, 1x and 3x as fast as vader: the median of the
# same-run ratios is 2, while the ratio of the medians (20 us / 20 us) would be 1.
{
    row libring-shm 4096 10 1; row openmpi-vader 4096 20 1
    row libring-shm 4096 20 2; row openmpi-vader 4096 20 2
    row libring-shm 4096 30 3; row openmpi-vader 4096 90 3
} >"$WORK/a.json"
expect_rc 0 "$run_sh" --json --from-json "$WORK/a.json"
shm=$(grep '"libring-shm"' "$WORK/out")
[ "$(echo "$shm" | jq .runs)" = 3 ] || fail "libring-shm: want 3 runs: $shm"
[ "$(echo "$shm" | jq .median_us)" = 20 ] || fail "libring-shm: want the median time 20 us: $shm"
[ "$(echo "$shm" | jq .speedup_vs_openmpi_vader)" = 2 ] ||
    fail "want the median of the same-run ratios (2): $shm"
[ "$(grep '"openmpi-vader"' "$WORK/out" | jq .median_us)" = 20 ] || fail "vader: want 20 us"
ok "the median over runs, and the median of the same-run ratios"

# Run 1 of a second invocation is another run, not a duplicate of the first file's run 1.
{ row libring-shm 4096 40 1; row openmpi-vader 4096 40 1; } >"$WORK/b.json"
expect_rc 0 "$run_sh" --json --from-json "$WORK/a.json" "$WORK/b.json"
shm=$(grep '"libring-shm"' "$WORK/out")
[ "$(echo "$shm" | jq .runs)" = 4 ] || fail "two files: want 4 runs: $shm"
[ "$(echo "$shm" | jq .speedup_vs_openmpi_vader)" = 1.5 ] || fail "two files: want ratio 1.5: $shm"
expect_rc 0 "$run_sh" --from-json "$WORK/a.json" "$WORK/b.json"
expect_in out "np 2: median over 4 runs"
ok "runs from separate invocations count apart; the table says how many"

# Bad input: each a clear message and a meaningful status.
row libring-shm 4096 10 1 >>"$WORK/dup.json"
row libring-shm 4096 10 1 >>"$WORK/dup.json"
expect_rc 1 "$run_sh" --from-json "$WORK/dup.json"
expect_in err "run 1 already has a row for libring-shm"
{ row libring-shm 4096 10 1; row libring-shm 16384 10 1 4; } >"$WORK/batch.json"
expect_rc 1 "$run_sh" --from-json "$WORK/batch.json"
expect_in err "different --batch"
echo '{"bench":"allreduce","impl":"libring-shm","np":2' >"$WORK/bad.json"
expect_rc 1 "$run_sh" --from-json "$WORK/bad.json"
expect_in err "bad.json:1: not a JSON object"
expect_rc 1 "$run_sh" --from-json "$WORK/none.json"
expect_in err "cannot read"
expect_rc 2 "$run_sh" --from-json
expect_in err "needs at least one FILE"
expect_rc 2 "$run_sh" --runs 0
expect_in err "--runs takes a positive integer"
expect_rc 2 "$run_sh" --from-json "$WORK/a.json" --save-json "$WORK/x.json"
ok "bad input: duplicate runs, mixed --batch, a broken row, a missing file, bad options"

# A real run of every peer built here, 2 runs interleaved.
impls="libring-shm libring-tcp"
[ ! -x "$build/bench/allreduce/bench_allreduce_mpi" ] || impls="$impls openmpi-vader openmpi-tcp"
[ ! -x "$build/bench/allreduce/bench_allreduce_gloo" ] || impls="$impls gloo-tcp"
expect_rc 0 "$run_sh" --build "$build" --json --np 2 --runs 2 --min-bytes 4096 \
    --max-bytes 16384 --budget-ms 100 --save-json "$WORK/saved.json"
cp "$WORK/out" "$WORK/live.json"
for impl in $impls; do
    for bytes in 4096 16384; do
        r=$(jq -c "select(.impl == \"$impl\" and .bytes == $bytes)" "$WORK/live.json")
        [ "$(echo "$r" | jq .runs)" = 2 ] || fail "$impl at $bytes bytes: want 2 runs: $r"
        [ "$(echo "$r" | jq '.busbw_gbs > 0')" = true ] || fail "$impl at $bytes bytes: no busbw: $r"
        [ "$(jq -c "select(.impl == \"$impl\" and .bytes == $bytes) | .run" "$WORK/saved.json" |
            sort | tr '\n' ' ')" = "1 2 " ] || fail "$impl at $bytes bytes: the saved rows lack a run"
    done
done
r=$(jq -c 'select(.impl == "libring-tcp" and .bytes == 4096)' "$WORK/live.json")
case " $impls " in *" gloo-tcp "*)
    [ "$(echo "$r" | jq .runs_vs_gloo_tcp)" = 2 ] || fail "want the tcp/gloo ratio of 2 runs: $r" ;;
esac
expect_rc 0 "$run_sh" --json --from-json "$WORK/saved.json"
cmp -s "$WORK/out" "$WORK/live.json" || fail "the saved rows summarize differently"
ok "2 interleaved runs of $impls; the saved rows give the same summary"
