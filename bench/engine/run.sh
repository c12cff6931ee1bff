#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/engine: a ResNet-50-shaped training step (161 gradients, 25.6 MB) through libring's
# engine at np 2 and 4, with fusion and the cache, without fusion, against one allreduce of
# the same bytes (the bound), and with one-element tensors (the engine's own cost) against
# one blocking allreduce of their 644 bytes (the issue's target: tiny <= 1.5x bare), the same
# one-element tensors as one grouped allreduce (tiny-grouped, beside tiny), and the
# step again with RING_AUTOTUNE=1 (samples of 5 cycles) after 60 untimed steps, in which
# its search ends (the parameters it chose go to stderr).
#
#   bench/engine/run.sh [--json] [--np "2 4"] [--steps N] [--build DIR]
set -euo pipefail

build=build
nps="2 4"
steps=20
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) nps=$2; shift ;;
    --steps) steps=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--np \"2 4\"] [--steps N] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done
ringrun=$build/worker/ringrun/ringrun
bench=$build/bench/engine/bench_engine
[ -x "$bench" ] || { echo "run.sh: $bench is not built; run make first" >&2; exit 1; }
rows=$(mktemp)
log=$(mktemp)
trap 'rm -f "$rows" "$log"' EXIT

for np in $nps; do
    echo "bench/engine: np $np" >&2
    "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode step >>"$rows"
    RING_FUSION_THRESHOLD=0 "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode step \
        --label engine-no-fusion >>"$rows"
    RING_AUTOTUNE=1 RING_AUTOTUNE_CYCLES_PER_SAMPLE=5 RING_LOG_LEVEL=info "$ringrun" -np "$np" "$bench" --json --steps "$steps" \
        --warmup 60 --mode step --label engine-autotune >>"$rows" 2>"$log"
    echo "bench/engine: np $np: $(grep -o 'autotune: done .*' "$log" || echo 'autotune: the search did not end')" >&2
    "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode single >>"$rows"
    "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode tiny >>"$rows"
    "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode tiny-grouped >>"$rows"
    "$ringrun" -np "$np" "$bench" --json --steps "$steps" --mode bare >>"$rows"
done
sed -i 's/^\[0\]<stdout>://' "$rows"

if [ "$json" = 1 ]; then
    grep '^{' "$rows"
    exit 0
fi
awk '
function field(line, key,    m) {
    if (match(line, "\"" key "\":\"?[^,\"}]*")) {
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":"?/, "", m); return m
    }
    return ""
}
/^\{/ { np = field($0, "np"); impl = field($0, "impl"); nps[np] = 1
        us[np, impl] = field($0, "median_us"); neg[np, impl] = field($0, "negotiation_us_per_step")
        cyc[np, impl] = field($0, "cycles_per_step") }
END {
    printf "%3s | %14s %14s %14s %14s %8s | %13s %13s %11s %10s %9s | %11s %9s\n", "np",
        "fused step us", "unfused us", "autotuned us", "bound us", "fused/bd", "tiny step us",
        "negotiate us", "cycles/step", "bare us", "tiny/bare", "grouped us", "grp/bare"
    for (np in nps) {
        b = us[np, "single-allreduce"]
        a = us[np, "bare-allreduce"]
        g = us[np, "engine-tiny-grouped"]
        printf "%3d | %14.1f %14.1f %14.1f %14.1f %8.2f | %13.1f %13.1f %11.2f %10.1f %9.2f | %11.1f %9.2f\n",
            np, us[np, "engine"], us[np, "engine-no-fusion"], us[np, "engine-autotune"], b,
            (b > 0 ? us[np, "engine"] / b : 0),
            us[np, "engine-tiny"], neg[np, "engine-tiny"], cyc[np, "engine-tiny"], a,
            (a > 0 ? us[np, "engine-tiny"] / a : 0), g, (a > 0 ? g / a : 0)
    }
    print "medians over the steps; fused/bd = fused step / one allreduce of the same 25.6 MB;"
    print "autotuned = the fused step with RING_AUTOTUNE=1, timed after 60 steps of search;"
    print "tiny = the same 161 names with one element each: negotiation plus one small allreduce;"
    print "negotiate = time in the control phase per tiny step (cached: one bit-vector allreduce"
    print "per cycle), counted between the step'"'"'s first submission and its last wait;"
    print "bare = one blocking allreduce of the tiny step'"'"'s 644 bytes (the fast path);"
    print "grouped = the tiny step'"'"'s tensors as one ring_grouped_allreduce_async and one wait."
}' "$rows"
