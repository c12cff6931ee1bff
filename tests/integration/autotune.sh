#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# RING_AUTOTUNE=1 on real ranks: the search ends within 20 samples, every rank applies the
# same parameters at the same cycle, every result stays right while they change, and the
# choices are in the timeline, the info log and RING_AUTOTUNE_LOG's CSV.
. "$(dirname "$0")/lib.sh"
: "${AUTOTUNE_CHECK:?}"

# check_run NP: the ranks' logs of the last run agree, and the search ended in time.
check_run() {
    local np=$1 r n
    for r in $(seq 0 $((np - 1))); do
        sed -n "s/^\(\[[0-9]*\]<stderr>:\)\?\[ring $r\] info: \(autotune: cycle .*\)$/\2/p" "$WORK/err" >"$WORK/applied.$r"
    done
    n=$(wc -l <"$WORK/applied.0")
    [ "$n" -ge 2 ] || { cat "$WORK/err"; fail "np $np: rank 0 applied only $n choices"; }
    for r in $(seq 1 $((np - 1))); do
        cmp -s "$WORK/applied.0" "$WORK/applied.$r" ||
            { diff "$WORK/applied.0" "$WORK/applied.$r"; fail "np $np: rank $r applied other parameters, or at other cycles, than rank 0"; }
    done
    done_line=$(grep -o 'autotune: done after [0-9]* samples: .*' "$WORK/err") ||
        { cat "$WORK/err"; fail "np $np: the search did not end"; }
    samples=$(echo "$done_line" | sed 's/autotune: done after \([0-9]*\) samples.*/\1/')
    [ "$samples" -le 20 ] || fail "np $np: the search took $samples samples"
    # The parameters in force at the end are the ones the search settled on.
    want=$(echo "$done_line" | sed 's/.*samples: \(fusion threshold [0-9]* bytes, cycle time [0-9]* ms\).*/\1/')
    last=$(tail -n 1 "$WORK/applied.0" | sed 's/^autotune: cycle [0-9]*: //')
    [ "$last" = "$want" ] || fail "np $np: the last choice applied ($last) is not the result ($want)"
    echo "# np $np: $n choices on every rank; $done_line"
}

# Small samples, so that the search ends well within the run; 150 steps move ~2 MiB each.
export RING_AUTOTUNE=1 RING_LOG_LEVEL=info RING_AUTOTUNE_CYCLES_PER_SAMPLE=4
RING_TIMELINE="$WORK/timeline.json" RING_AUTOTUNE_LOG="$WORK/samples.csv" \
    expect_rc 0 "$RINGRUN" -np 3 --kill-grace 2 "$AUTOTUNE_CHECK" 150
expect_in out "autotune_check: ok"
check_run 3
ok "np 3: the search ends within 20 samples ($samples), every rank applies the same parameters at the same cycle, all sums right"

# The timeline: one instant event per choice, with the parameters, and the result.
jq -e . "$WORK/timeline.json" >/dev/null || fail "the timeline is not valid JSON"
tl=$(jq -r 'map(select(.ph == "i" and .name == "autotune")) | .[] |
            "autotune: cycle \(.args.cycle): fusion threshold \(.args.fusion_threshold_bytes) bytes, cycle time \(.args.cycle_time_ms) ms"' \
        "$WORK/timeline.json")
[ "$tl" = "$(cat "$WORK/applied.0")" ] ||
    { echo "$tl"; fail "the timeline's autotune events differ from the choices applied"; }
jq -e --argjson s "$samples" 'map(select(.name == "autotune done" and .args.samples == $s)) | length == 1' \
    "$WORK/timeline.json" >/dev/null || fail "the timeline lacks the search's result"
ok "the timeline holds every choice (cycle, fusion threshold, cycle time) and the result"

# The CSV: a header and one row per sample, each with a positive score.
[ "$(head -n 1 "$WORK/samples.csv")" = "sample,phase,fusion_threshold_bytes,cycle_time_ms,cycles,bytes,seconds,score_bytes_per_s" ] ||
    fail "RING_AUTOTUNE_LOG has no header"
[ "$(($(wc -l <"$WORK/samples.csv") - 1))" = "$samples" ] || { cat "$WORK/samples.csv"; fail "the CSV does not have $samples rows"; }
awk -F, 'NR > 1 && !($8 > 0) { exit 1 }' "$WORK/samples.csv" || { cat "$WORK/samples.csv"; fail "a sample without a score"; }
ok "RING_AUTOTUNE_LOG has one scored row per sample"

# Over TCP at np 2, with no warm-up: the first candidate applies at once.
RING_TRANSPORT=tcp RING_AUTOTUNE_WARMUP_SAMPLES=0 \
    expect_rc 0 "$RINGRUN" -np 2 --kill-grace 2 "$AUTOTUNE_CHECK" 150
expect_in out "autotune_check: ok"
check_run 2
ok "np 2 over tcp without warm-up: the same"

# Off by default: nothing tuned, nothing logged.
unset RING_AUTOTUNE
expect_rc 0 "$RINGRUN" -np 2 --kill-grace 2 "$AUTOTUNE_CHECK" 20
if grep -q 'autotune:' "$WORK/err"; then fail "autotune ran without RING_AUTOTUNE"; fi
RING_AUTOTUNE=yes expect_rc 1 "$RINGRUN" -np 2 --kill-grace 2 "$AUTOTUNE_CHECK" 5
expect_in err "RING_AUTOTUNE='yes' must be an integer in [0, 1]"
ok "without RING_AUTOTUNE nothing is tuned; a bad value fails ring_init naming it"

summary
