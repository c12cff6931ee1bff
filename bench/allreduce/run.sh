#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/allreduce: libring's allreduce against Open MPI's in the same run, at np 2 and 4,
# from 4 KiB to 256 MiB. Prints one table with busbw (GB/s, nccl-tests convention) and the
# ratio libring / Open MPI TCP; with --json, one JSON object per measurement instead.
#
#   bench/allreduce/run.sh [--json] [--np "2 4"] [--max-bytes B] [--build DIR]
#
# Open MPI runs with the TCP BTL on loopback (the fair peer for libring's TCP transport)
# and with vader, its shared-memory BTL (the target of the shared-memory transport).
set -euo pipefail

build=build
nps="2 4"
max_bytes=$((256 << 20))
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) nps=$2; shift ;;
    --max-bytes) max_bytes=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--np \"2 4\"] [--max-bytes B] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done

ringrun=$build/worker/ringrun/ringrun
bench=$build/bench/allreduce/bench_allreduce
bench_mpi=$build/bench/allreduce/bench_allreduce_mpi
[ -x "$bench" ] || { echo "run.sh: $bench is not built; run make first" >&2; exit 1; }
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

mpirun_flags=(--oversubscribe --bind-to none --mca pml ob1)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)

for np in $nps; do
    echo "bench/allreduce: libring-tcp at np $np" >&2
    "$ringrun" -np "$np" "$bench" --json --max-bytes "$max_bytes" | sed 's/^\[0\]<stdout>://' >>"$rows"
    if [ -x "$bench_mpi" ] && command -v mpirun >/dev/null; then
        echo "bench/allreduce: openmpi-tcp at np $np" >&2
        mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,tcp --mca btl_tcp_if_include lo \
            "$bench_mpi" --json --max-bytes "$max_bytes" --impl openmpi-tcp >>"$rows"
        echo "bench/allreduce: openmpi-vader at np $np" >&2
        mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,vader \
            "$bench_mpi" --json --max-bytes "$max_bytes" --impl openmpi-vader >>"$rows"
    else
        echo "bench/allreduce: Open MPI not built or not installed; no peer numbers" >&2
    fi
done

if [ "$json" = 1 ]; then
    grep '^{' "$rows"
    exit 0
fi

# One line per (np, bytes): busbw of each implementation and the ratios.
awk '
function field(line, key,    m) {
    if (match(line, "\"" key "\":\"?[^,\"}]*")) {
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":"?/, "", m); return m
    }
    return ""
}
/^\{/ {
    k = field($0, "np") " " field($0, "bytes")
    if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    bw[k, field($0, "impl")] = field($0, "busbw_gbs")
    us[k, field($0, "impl")] = field($0, "median_us")
}
END {
    printf "%3s %10s | %12s %12s | %12s %12s | %14s %6s\n", "np", "bytes",
        "libring us", "libring GB/s", "ompi-tcp us", "ompi-tcp GB/s", "ompi-vader GB/s", "ratio"
    for (i = 0; i < n; i++) {
        k = order[i]; split(k, p, " ")
        l = bw[k, "libring-tcp"]; t = bw[k, "openmpi-tcp"]; v = bw[k, "openmpi-vader"]
        printf "%3d %10d | %12.1f %12.3f | %12s %12s | %14s %6s\n", p[1], p[2],
            us[k, "libring-tcp"], l, t == "" ? "-" : sprintf("%.1f", us[k, "openmpi-tcp"]),
            t == "" ? "-" : sprintf("%.3f", t), v == "" ? "-" : sprintf("%.3f", v),
            t == "" || t == 0 ? "-" : sprintf("%.2f", l / t)
    }
    print "busbw = bytes/time * 2(np-1)/np (GB/s = 1e9 B/s), median of >= 5 timed iterations;"
    print "ratio = libring-tcp busbw / openmpi-tcp busbw, same run."
}' "$rows"
