#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/torch/horovod_synthetic.sh: Horovod's own examples/pytorch/pytorch_synthetic_benchmark.py,
# run through ringrun on the CPU with only its import changed (`import horovod.torch as hvd`
# becomes `import ringmaster.torch as hvd`), beside the same protocol over
# DistributedDataParallel on gloo (ddp_synthetic.py). Horovod's script is not shipped here:
# fetch it first, e.g.
#
#   curl -LO https://raw.githubusercontent.com/horovod/horovod/v0.28.1/examples/pytorch/pytorch_synthetic_benchmark.py
#   bench/torch/horovod_synthetic.sh pytorch_synthetic_benchmark.py --np 2 --model resnet18
#
#   horovod_synthetic.sh SCRIPT [--np N] [--model M] [--batch-size B] [--num-iters I]
#       [--num-batches-per-iter K] [--num-warmup-batches W] [--rounds R] [--threads T]
#       [--build DIR] [--json] [-- ARGS FOR HOROVOD'S SCRIPT (--fp16-allreduce, --use-adasum)]
#
# Each round runs both, alternating; the table gives the median over the rounds of each
# run's total images per second (the scripts' own figure: the mean of their iterations),
# and --json one row per implementation. --threads sets OMP_NUM_THREADS for both (default:
# torch's own choice, as Horovod's script leaves it). --fp16-allreduce also gives DDP its
# fp16 compression hook; DDP has no Adasum, so with --use-adasum it averages.
set -euo pipefail

usage() {
    echo "usage: horovod_synthetic.sh SCRIPT [--np N] [--model M] [--batch-size B] [--num-iters I]" >&2
    echo "         [--num-batches-per-iter K] [--num-warmup-batches W] [--rounds R] [--threads T]" >&2
    echo "         [--build DIR] [--json] [-- ARGS FOR HOROVOD'S SCRIPT]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
script=$1
shift
np=2 model=resnet18 batch=32 iters=10 per_iter=10 warmup=10 rounds=1 threads= build=build json=0
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --np) np=$2; shift ;;
    --model) model=$2; shift ;;
    --batch-size) batch=$2; shift ;;
    --num-iters) iters=$2; shift ;;
    --num-batches-per-iter) per_iter=$2; shift ;;
    --num-warmup-batches) warmup=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --threads) threads=$2; shift ;;
    --build) build=$2; shift ;;
    --json) json=1 ;;
    --) shift; extra=("$@"); break ;;
    *) usage ;;
    esac
    shift
done
[ -r "$script" ] || { echo "horovod_synthetic.sh: cannot read $script (fetch Horovod's pytorch_synthetic_benchmark.py first)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
ringrun=$build/worker/ringrun/ringrun
py=/usr/bin/python3 # Debian's python3-torch imports only in Debian's python3
[ -x "$ringrun" ] || { echo "horovod_synthetic.sh: $ringrun is not built; run make first" >&2; exit 1; }
"$py" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "horovod_synthetic.sh: $py cannot import torch and torchvision (contrib/deps.sh installs them)" >&2; exit 1; }
export RING_LIBRARY=${RING_LIBRARY:-$(cd "$build" && pwd)/worker/libring/libring.so}
export PYTHONPATH=$here/../../worker/python${PYTHONPATH:+:$PYTHONPATH}
[ -z "$threads" ] || export OMP_NUM_THREADS=$threads

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The one change: the import. Anything else would not be Horovod's script.
n=$(grep -c '^import horovod\.torch as hvd$' "$script" || true)
[ "$n" = 1 ] || { echo "horovod_synthetic.sh: $script has $n lines 'import horovod.torch as hvd', want 1: is it Horovod's script?" >&2; exit 1; }
sed 's/^import horovod\.torch as hvd$/import ringmaster.torch as hvd/' "$script" >"$work/benchmark.py"

args=(--no-cuda --model "$model" --batch-size "$batch" --num-iters "$iters"
      --num-batches-per-iter "$per_iter" --num-warmup-batches "$warmup")
ddp_args=(--model "$model" --batch-size "$batch" --num-iters "$iters" --num-batches-per-iter "$per_iter"
          --num-warmup-batches "$warmup")
for a in "${extra[@]}"; do [ "$a" != --fp16-allreduce ] || ddp_args+=(--fp16-allreduce); done
rows=$work/rows
for r in $(seq "$rounds"); do
    echo "horovod_synthetic: round $r/$rounds: Horovod's script on ringmaster.torch, np $np" >&2
    "$ringrun" -np "$np" "$py" "$work/benchmark.py" "${args[@]}" "${extra[@]}" >"$work/out" 2>"$work/err" ||
        { cat "$work/out" "$work/err" >&2; echo "horovod_synthetic.sh: Horovod's script failed" >&2; exit 1; }
    # "Total img/sec on 2 CPU(s): 25.3 +-1.2"
    line=$(sed 's/^\[0\]<stdout>://' "$work/out" | grep '^Total img/sec on ' | tail -1)
    [ -n "$line" ] || { cat "$work/out" >&2; echo "horovod_synthetic.sh: no 'Total img/sec' line" >&2; exit 1; }
    "$py" - "$line" "$np" "$model" "$batch" >>"$rows" <<'PY'
import json, re, sys
m = re.search(r"Total img/sec on \d+ \w+\(s\): ([0-9.]+) \+-([0-9.]+)", sys.argv[1])
print(json.dumps({"bench": "torch-synthetic", "impl": "ringmaster.torch (Horovod's script)", "np": int(sys.argv[2]),
                  "model": sys.argv[3], "batch": int(sys.argv[4]), "images_per_s": float(m.group(1)),
                  "conf_images_per_s": float(m.group(2))}, separators=(",", ":")))
PY
    echo "horovod_synthetic: round $r/$rounds: DistributedDataParallel (gloo), np $np" >&2
    "$ringrun" -np "$np" "$py" "$here/ddp_synthetic.py" "${ddp_args[@]}" --port $((20000 + RANDOM % 10000)) \
        >"$work/out" 2>"$work/err" ||
        { cat "$work/out" "$work/err" >&2; echo "horovod_synthetic.sh: ddp_synthetic.py failed" >&2; exit 1; }
    sed -n 's/^\[0\]<stdout>://p' "$work/out" | grep '^{' >>"$rows"
done

"$py" - "$rows" "$json" "${extra[*]:-}" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs.setdefault(r["impl"], []).append(r)
rows = []
for impl, rs in runs.items():
    row = dict(rs[0])
    row["images_per_s"] = round(statistics.median(r["images_per_s"] for r in rs), 2)
    row["rounds"] = len(rs)
    rows.append(row)
if sys.argv[2] == "1":
    for row in rows:
        print(json.dumps(row, separators=(",", ":")))
    sys.exit(0)
print("%-38s %3s %-10s %5s %14s" % ("impl", "np", "model", "batch", "images/s"))
for row in rows:
    print("%-38s %3d %-10s %5d %14s" % (row["impl"], row["np"], row["model"], row["batch"],
          "%.1f +-%.1f" % (row["images_per_s"], row["conf_images_per_s"])))
if len(rows) == 2:
    print("ringmaster.torch / ddp-gloo: x%.2f" % (rows[0]["images_per_s"] / rows[1]["images_per_s"]))
print("total images/s over the ranks (each run's mean over its iterations, +- 1.96 sigma), median of %d round(s)"
      % rows[0]["rounds"] + ("; Horovod's script with: " + sys.argv[3] if sys.argv[3] else ""))
PY
