#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs every libFuzzer harness built in BUILD (make fuzz builds them in build-fuzz/) for
# SECONDS each (default $FUZZ_SECONDS, else 60), FUZZ_JOBS of them at a time (default 1),
# and prints one row per harness: executions, executions per second, coverage (libFuzzer's
# "cov": code edges reached; "ft": features), corpus size, crashes.
# FUZZ_ONLY="a b" runs only the harnesses named.
#
#   tests/fuzz/run.sh BUILD [SECONDS]
#
# Each harness starts from its committed seed corpus (tests/fuzz/corpus/NAME/) plus what
# earlier runs in BUILD found (BUILD/tests/fuzz/work/NAME/, where new inputs go). A crash
# stops that harness; its input is saved as BUILD/tests/fuzz/crashes/NAME/crash-* and its
# log is BUILD/tests/fuzz/NAME.log. Exits 1 when any harness crashed, else 0.
set -euo pipefail

build=${1:?usage: run.sh BUILD [SECONDS]}
seconds=${2:-${FUZZ_SECONDS:-60}}
jobs=${FUZZ_JOBS:-1}
src=$(cd "$(dirname "$0")" && pwd)
out=$(cd "$build/tests/fuzz" && pwd)

harnesses=()
for f in "$out"/fuzz_*; do
    name=${f##*/fuzz_}
    [ -x "$f" ] && [ -f "$f" ] && [[ "$f" != *_replay ]] || continue
    [ -z "${FUZZ_ONLY:-}" ] || [[ " $FUZZ_ONLY " == *" $name "* ]] || continue
    harnesses+=("$name")
done
[ ${#harnesses[@]} -gt 0 ] || { echo "run.sh: no harnesses in $out (make fuzz builds them)" >&2; exit 1; }

# run_one NAME: one harness, its log in $out/NAME.log.
run_one() {
    local name=$1
    rm -rf "$out/crashes/$name"
    mkdir -p "$out/work/$name" "$out/crashes/$name"
    # -timeout: an input that runs 10 s is a hang; -rss_limit_mb: one that needs 2 GiB is
    # a memory bug (both count as crashes). -max_len: specs, host lists and engine
    # messages of up to 4 KiB reach every code path (the parsers loop, not nest, beyond).
    "$out/fuzz_$name" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
        -rss_limit_mb=2048 -max_len=4096 -artifact_prefix="$out/crashes/$name/" \
        "$out/work/$name" "$src/corpus/$name" >"$out/$name.log" 2>&1 || true
}
export -f run_one
export out src seconds
printf '%s\n' "${harnesses[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

crashed=0
printf '%-16s %8s %12s %10s %6s %7s %8s %8s\n' harness seconds executions exec/s cov ft corpus \
    crashes
for name in "${harnesses[@]}"; do
    log=$out/$name.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
    ft=${cov##* }
    cov=${cov#cov: }
    cov=${cov%% *}
    corpus=$(find "$out/work/$name" "$src/corpus/$name" -type f | wc -l)
    crashes=$(find "$out/crashes/$name" -type f | wc -l)
    printf '%-16s %8s %12s %10s %6s %7s %8s %8s\n' "$name" "$seconds" "${execs:-?}" \
        "${rate:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes"
    if [ "$crashes" -gt 0 ] || ! grep -q '^stat::number_of_executed_units' "$log"; then
        crashed=1
        echo "--- $name: $(grep -m1 -E 'ERROR|property does not hold|deadly signal' "$log" || tail -1 "$log")" >&2
        find "$out/crashes/$name" -type f | sed 's/^/    input: /' >&2
    fi
done
exit $crashed
