#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/connect: what a job's set-up costs (from ring_init on the last rank to start until
# every rank's first barrier returned: every pair connected, authenticated and usable), and
# a 4 KiB float32 allreduce after it, at np 8 on this host, over shm and over TCP.
#
#   bench/connect/run.sh [--json] [--np N] [--runs N] [--build DIR] [--baseline DIR]
#
# --baseline DIR, the build directory of another commit (say the one before the job secret),
# times that build too: the same bench_connect binary with DIR's ringrun and, through
# LD_LIBRARY_PATH, DIR's libring.so.0. Each run times every (transport, build) once, in turn,
# so that the machine's noise at any moment hits all alike; the table gives the medians
# over the runs, the difference, and the difference per pair (each rank sets up np - 1
# pairs, one after the other). With --json, one row per (transport, build) instead:
# {"bench":"connect","impl":"libring"|"libring-baseline","transport":...,"np":...,
#  "runs":...,"setup_us":...,"allreduce_4k_us":...}, the baseline's with "setup_delta_us"
# and "per_pair_delta_us" (this build minus the baseline) on this build's row.
set -euo pipefail

build=build
baseline=""
np=8
runs=11
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) np=$2; shift ;;
    --runs) runs=$2; shift ;;
    --build) build=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    *) echo "usage: $0 [--json] [--np N] [--runs N] [--build DIR] [--baseline DIR]" >&2; exit 64 ;;
    esac
    shift
done
bench=$build/bench/connect/bench_connect
[ -x "$bench" ] || { echo "$0: no $bench (build first)" >&2; exit 69; }
if [ -n "$baseline" ]; then
    [ -x "$baseline/worker/ringrun/ringrun" ] && [ -e "$baseline/worker/libring/libring.so.0" ] ||
        { echo "$0: --baseline $baseline has no worker/ringrun/ringrun and libring.so.0" >&2; exit 64; }
    baseline=$(cd "$baseline" && pwd)
fi
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

for ((run = 1; run <= runs; run++)); do
    for transport in shm tcp; do
        RING_TRANSPORT=$transport "$build/worker/ringrun/ringrun" -np "$np" "$bench" --impl libring >>"$rows"
        if [ -n "$baseline" ]; then
            RING_TRANSPORT=$transport LD_LIBRARY_PATH=$baseline/worker/libring \
                "$baseline/worker/ringrun/ringrun" -np "$np" "$bench" --impl libring-baseline >>"$rows"
        fi
    done
    [ "$json" = 1 ] || echo "run $run of $runs done" >&2
done

python3 - "$rows" "$json" <<'PY'
import json, statistics, sys
# ringrun prefixes each line with its rank ("[0]<stdout>:")
rows = [json.loads(l[l.index("{"):]) for l in open(sys.argv[1]) if "{" in l]
out = {}
for r in rows:
    out.setdefault((r["transport"], r["impl"]), []).append(r)
summary = []
for (transport, impl), rs in sorted(out.items()):
    summary.append({"bench": "connect", "impl": impl, "transport": transport, "np": rs[0]["np"],
                    "runs": len(rs),
                    "setup_us": statistics.median(r["setup_us"] for r in rs),
                    "allreduce_4k_us": round(statistics.median(r["allreduce_4k_us"] for r in rs), 2)})
by = {(s["transport"], s["impl"]): s for s in summary}
for s in summary:
    base = by.get((s["transport"], "libring-baseline"))
    if s["impl"] == "libring" and base is not None:
        s["setup_delta_us"] = s["setup_us"] - base["setup_us"]
        s["per_pair_delta_us"] = round(s["setup_delta_us"] / (s["np"] - 1), 1)
if sys.argv[2] == "1":
    for s in summary:
        print(json.dumps(s))
else:
    print("%-9s %-17s %4s %5s %12s %16s %14s %18s" % ("transport", "impl", "np", "runs", "setup (us)",
          "4 KiB allreduce", "setup delta", "delta per pair"))
    for s in summary:
        print("%-9s %-17s %4d %5d %12.0f %13.2f us %14s %18s" % (
            s["transport"], s["impl"], s["np"], s["runs"], s["setup_us"], s["allreduce_4k_us"],
            "%+.0f us" % s["setup_delta_us"] if "setup_delta_us" in s else "-",
            "%+.1f us" % s["per_pair_delta_us"] if "per_pair_delta_us" in s else "-"))
PY
