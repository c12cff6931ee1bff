#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/torch: data-parallel training of torchvision's resnet18 (weights=None, 32x32
# synthetic images) and a small MLP (784-256-256-10) at np 2 on synthetic input, three
# ways in the same run: DistributedDataParallel over gloo, ringmaster.torch's
# DistributedOptimizer, and one process (the bound: perfect scaling keeps its steps/s).
# Then the binding's overhead: a blocking 4 KiB allreduce through ringmaster.torch against
# the same call from C. Each figure is the median of --rounds runs (the implementations
# alternate within a round), each run the median of its steps.
#
#   bench/torch/run.sh [--json] [--np N] [--rounds R] [--steps N] [--save-json FILE] [--build DIR]
#
# --save-json also writes the JSON rows to FILE, so that one run gives both.
set -euo pipefail

build=build
np=2
rounds=3
steps=20
json=0
save=
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) np=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --steps) steps=$2; shift ;;
    --save-json) save=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--np N] [--rounds R] [--steps N] [--save-json FILE] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")" && pwd)
ringrun=$build/worker/ringrun/ringrun
call=$build/bench/torch/bench_call
py=/usr/bin/python3 # Debian's python3-torch imports only in Debian's python3
[ -x "$call" ] || { echo "run.sh: $call is not built; run make first" >&2; exit 1; }
"$py" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "run.sh: $py cannot import torch and torchvision (contrib/deps.sh installs them)" >&2; exit 1; }
export RING_LIBRARY=${RING_LIBRARY:-$(cd "$build" && pwd)/worker/libring/libring.so}
export PYTHONPATH=$here/../../worker/python${PYTHONPATH:+:$PYTHONPATH}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

port() { echo $((20000 + RANDOM % 10000)); }
for r in $(seq "$rounds"); do
    for model in resnet18 mlp; do
        echo "bench/torch: round $r/$rounds, $model" >&2
        "$ringrun" -np 1 "$py" "$here/bench_torch.py" --impl single --model "$model" --steps "$steps" >>"$rows"
        "$ringrun" -np "$np" "$py" "$here/bench_torch.py" --impl ddp-gloo --model "$model" --steps "$steps" \
            --port "$(port)" >>"$rows"
        "$ringrun" -np "$np" "$py" "$here/bench_torch.py" --impl ringmaster --model "$model" --steps "$steps" >>"$rows"
        # Without busy-polling, which ringmaster.torch.init forced on a full host until
        # this bench showed it slower: the comparison that keeps libring's default honest.
        RING_SPIN_US=0 "$ringrun" -np "$np" "$py" "$here/bench_torch.py" --impl ringmaster --model "$model" \
            --steps "$steps" --label ringmaster-spin0 >>"$rows"
    done
    # The same call, with libring's default tuning on both sides.
    "$ringrun" -np "$np" "$call" --iters 2000 --warmup 200 >>"$rows"
    "$ringrun" -np "$np" "$py" "$here/bench_torch.py" --impl call --steps 2000 --warmup 200 >>"$rows"
done
sed -i 's/^\[0\]<stdout>://' "$rows"

# One row per (bench, impl, model): the median over the rounds.
summary=$("$py" - "$rows" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        runs.setdefault((r["bench"], r["impl"], r.get("model", "")), []).append(r)
for rs in runs.values():
    row = dict(rs[0])
    key = "median_step_s" if row["bench"] == "torch" else "median_us"
    row[key] = round(statistics.median(r[key] for r in rs), 6 if key == "median_step_s" else 2)
    if row["bench"] == "torch":
        row["steps_per_s"] = round(1.0 / row[key], 3)
    row["rounds"] = len(rs)
    print(json.dumps(row, separators=(",", ":")))
PY
)
[ -z "$save" ] || echo "$summary" >"$save"
if [ "$json" = 1 ]; then
    echo "$summary"
    exit 0
fi
echo "$summary" | "$py" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
t = {(r["model"], r["impl"]): r for r in rows if r["bench"] == "torch"}
print("%-9s %3s %9s | %11s %13s %11s %11s | %9s %9s" % ("model", "np", "params", "single st/s", "ddp-gloo st/s",
      "ringmaster", "spin 0 us", "ring/ddp", "ring/1"))
for m in ("resnet18", "mlp"):
    s, d, g, p = (t.get((m, i)) for i in ("single", "ddp-gloo", "ringmaster", "ringmaster-spin0"))
    if not (s and d and g):
        continue
    print("%-9s %3d %9d | %11.2f %13.2f %11.2f %11s | %9.2f %9.2f" % (m, g["np"], g["params"], s["steps_per_s"],
          d["steps_per_s"], g["steps_per_s"], "%.2f" % p["steps_per_s"] if p else "-",
          g["steps_per_s"] / d["steps_per_s"], g["steps_per_s"] / s["steps_per_s"]))
c = {r["impl"]: r for r in rows if r["bench"] == "torch-call"}
if "c" in c and "ringmaster.torch" in c:
    base = c["c"]["median_us"]
    print("4 KiB float32 sum allreduce, np %d: C ring_allreduce in place %.1f us; ringmaster.torch "
          "allreduce_ %.1f us (x%.2f)" % (c["c"]["np"], base, c["ringmaster.torch"]["median_us"],
                                         c["ringmaster.torch"]["median_us"] / base), end="")
    o = c.get("ringmaster.torch-out-of-place")
    print(", allreduce (new output) %.1f us (x%.2f)" % (o["median_us"], o["median_us"] / base) if o else "")
print("steps/s from the median step time of each run, median over %d rounds; one torch thread per rank;" % rows[0]["rounds"])
print("single = one process at the same per-rank batch (the bound of data-parallel steps/s);")
print("spin 0 us = ringmaster with RING_SPIN_US=0 (no busy-polling); ringmaster = the default tuning of libring.")
'
