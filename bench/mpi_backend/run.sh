#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/mpi_backend: libring with RING_CPU_OPERATIONS=mpi (its engine, with the data moved
# by MPI's non-blocking collectives) against Open MPI's own MPI_Allreduce and against
# libring's ring over shared memory, in the same run, through the same timing loop
# (bench/allreduce/bench_allreduce.c). Both MPI rows run under one kind of mpirun with
# Open MPI's shared-memory BTL (vader). A separate file from bench/allreduce/run.sh, whose
# table it does not change; its --json rows have the same shape ("impl": "libring-mpi").
#
#   bench/mpi_backend/run.sh [--json] [--np "2 4"] [--max-bytes B] [--build DIR]
set -euo pipefail

build=build
nps="2 4"
max_bytes=$((64 << 20))
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
for b in "$bench" "$bench_mpi"; do
    [ -x "$b" ] || { echo "run.sh: $b is not built (needs Open MPI); run make first" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "run.sh: mpirun is not installed" >&2; exit 1; }
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

mpirun_flags=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)

for np in $nps; do
    echo "bench/mpi_backend: libring-mpi at np $np" >&2
    RING_BOOTSTRAP=mpi RING_CPU_OPERATIONS=mpi mpirun "${mpirun_flags[@]}" -np "$np" \
        "$bench" --json --max-bytes "$max_bytes" --impl libring-mpi >>"$rows"
    echo "bench/mpi_backend: openmpi-vader at np $np" >&2
    mpirun "${mpirun_flags[@]}" -np "$np" "$bench_mpi" --json --max-bytes "$max_bytes" \
        --impl openmpi-vader >>"$rows"
    echo "bench/mpi_backend: libring-shm at np $np" >&2
    "$ringrun" -np "$np" "$bench" --json --max-bytes "$max_bytes" --impl libring-shm |
        sed 's/^\[0\]<stdout>://' >>"$rows"
done

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
/^\{/ {
    k = field($0, "np") " " field($0, "bytes")
    if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    bw[k, field($0, "impl")] = field($0, "busbw_gbs")
    us[k, field($0, "impl")] = field($0, "median_us")
}
END {
    printf "%3s %10s | %11s %9s | %11s %9s | %11s %9s | %9s\n", "np", "bytes",
        "lr-mpi us", "GB/s", "ompi us", "GB/s", "lr-shm us", "GB/s", "mpi/ompi"
    for (i = 0; i < n; i++) {
        k = order[i]; split(k, p, " ")
        m = bw[k, "libring-mpi"]; o = bw[k, "openmpi-vader"]; s = bw[k, "libring-shm"]
        printf "%3d %10d | %11.1f %9.3f | %11.1f %9.3f | %11.1f %9.3f | %9s\n", p[1], p[2],
            us[k, "libring-mpi"], m, us[k, "openmpi-vader"], o, us[k, "libring-shm"], s,
            o == "" || o == 0 ? "-" : sprintf("%.2f", m / o)
    }
    print "busbw = bytes/time * 2(np-1)/np (GB/s = 1e9 B/s), median of >= 5 timed iterations;"
    print "mpi/ompi = libring-mpi busbw / openmpi-vader busbw, same run, same BTL."
}' "$rows"
