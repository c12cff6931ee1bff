#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/allreduce: libring's allreduce against Open MPI's and Gloo's in the same run, at
# np 2 and 4, from 4 B to 256 MiB (float32 sum; sizes step by 4x). Prints one table with
# each implementation's median time and the ratios; with --json, one JSON object per
# measurement instead (median_us, algbw_gbs, busbw_gbs).
#
#   bench/allreduce/run.sh [--json] [--np "2 4"] [--min-bytes B] [--max-bytes B]
#                          [--budget-ms MS] [--batch N] [--save-json FILE] [--build DIR]
#
# --save-json also writes the JSON rows to FILE, so that one run gives both. --batch N times N
# calls back to back after each barrier, OSU-style (bench_allreduce.c), for every peer.
#
# The pairs compared:
#   libring-shm (RING_TRANSPORT=shm)  vs  openmpi-vader (Open MPI's shared-memory BTL)
#   libring-tcp (RING_TRANSPORT=tcp)  vs  openmpi-tcp (TCP BTL on lo)  and  gloo-tcp
#     (gloo::allreduce, ring algorithm, Gloo's TCP transport on 127.0.0.1; Debian's
#     libgloo-dev, built only for this bench)
# A peer that is not built or installed is left out, and the table says "-".
set -euo pipefail

build=build
nps="2 4"
min_bytes=4
max_bytes=$((256 << 20))
budget_ms=1000
batch=1
json=0
save=""
usage="usage: $0 [--json] [--np \"2 4\"] [--min-bytes B] [--max-bytes B] [--budget-ms MS] [--batch N] [--save-json FILE] [--build DIR]"
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) nps=$2; shift ;;
    --min-bytes) min_bytes=$2; shift ;;
    --max-bytes) max_bytes=$2; shift ;;
    --budget-ms) budget_ms=$2; shift ;;
    --batch) batch=$2; shift ;;
    --save-json) save=$2; shift ;;
    --build) build=$2; shift ;;
    --version) echo "bench/allreduce/run.sh (ringmaster)"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done

ringrun=$build/worker/ringrun/ringrun
bench=$build/bench/allreduce/bench_allreduce
bench_mpi=$build/bench/allreduce/bench_allreduce_mpi
bench_gloo=$build/bench/allreduce/bench_allreduce_gloo
[ -x "$bench" ] || { echo "run.sh: $bench is not built; run make first" >&2; exit 1; }
rows=$(mktemp)
store=$(mktemp -d)
trap 'rm -rf "$rows" "$store"' EXIT
args=(--json --min-bytes "$min_bytes" --max-bytes "$max_bytes" --budget-ms "$budget_ms" --batch "$batch")

mpirun_flags=(--oversubscribe --bind-to none --mca pml ob1)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)
have_mpi=0
[ -x "$bench_mpi" ] && command -v mpirun >/dev/null && have_mpi=1

for np in $nps; do
    for t in shm tcp; do
        echo "bench/allreduce: libring-$t at np $np" >&2
        RING_TRANSPORT=$t "$ringrun" -np "$np" "$bench" "${args[@]}" --impl "libring-$t" |
            sed 's/^\[0\]<stdout>://' >>"$rows"
    done
    if [ "$have_mpi" = 1 ]; then
        echo "bench/allreduce: openmpi-vader at np $np" >&2
        mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,vader \
            "$bench_mpi" "${args[@]}" --impl openmpi-vader >>"$rows"
        echo "bench/allreduce: openmpi-tcp at np $np" >&2
        mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,tcp --mca btl_tcp_if_include lo \
            "$bench_mpi" "${args[@]}" --impl openmpi-tcp >>"$rows"
    else
        echo "bench/allreduce: Open MPI not built or not installed; no Open MPI numbers" >&2
    fi
    if [ -x "$bench_gloo" ]; then
        echo "bench/allreduce: gloo-tcp at np $np" >&2
        rm -rf "${store:?}"/*
        BENCH_GLOO_STORE=$store "$ringrun" -np "$np" "$bench_gloo" "${args[@]}" --impl gloo-tcp |
            sed 's/^\[0\]<stdout>://' >>"$rows"
    else
        echo "bench/allreduce: $bench_gloo not built (no libgloo-dev or C++); no Gloo numbers" >&2
    fi
done

[ -z "$save" ] || grep '^{' "$rows" >"$save"
if [ "$json" = 1 ]; then
    grep '^{' "$rows"
    exit 0
fi

# One line per (np, bytes): each implementation's median and the ratios, as speed-ups
# (the peer's time over libring's; above 1 libring is faster, and busbw is higher by it).
awk '
function field(line, key,    m) {
    if (match(line, "\"" key "\":\"?[^,\"}]*")) {
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":"?/, "", m); return m
    }
    return ""
}
function us(k, impl) { return (k SUBSEP impl) in t ? sprintf("%.1f", t[k, impl]) : "-" }
function gbs(k, impl) { return (k SUBSEP impl) in b ? sprintf("%.2f", b[k, impl]) : "-" }
function ratio(k, mine, peer) {
    if (!((k SUBSEP mine) in t) || !((k SUBSEP peer) in t) || t[k, mine] <= 0) return "-"
    return sprintf("%.2f", t[k, peer] / t[k, mine])
}
/^\{/ {
    k = field($0, "np") " " field($0, "bytes")
    if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    t[k, field($0, "impl")] = field($0, "median_us")
    b[k, field($0, "impl")] = field($0, "busbw_gbs")
}
END {
    printf "%2s %10s | %9s %9s %6s %6s %6s | %9s %9s %9s %6s %6s %6s %6s\n", "np", "bytes",
        "shm us", "vader us", "shm/v", "shmGBs", "vdrGBs",
        "tcp us", "omtcp us", "gloo us", "tcp/om", "tcp/gl", "tcpGBs", "glGBs"
    for (i = 0; i < n; i++) {
        k = order[i]; split(k, p, " ")
        printf "%2d %10d | %9s %9s %6s %6s %6s | %9s %9s %9s %6s %6s %6s %6s\n", p[1], p[2],
            us(k, "libring-shm"), us(k, "openmpi-vader"), ratio(k, "libring-shm", "openmpi-vader"),
            gbs(k, "libring-shm"), gbs(k, "openmpi-vader"),
            us(k, "libring-tcp"), us(k, "openmpi-tcp"), us(k, "gloo-tcp"),
            ratio(k, "libring-tcp", "openmpi-tcp"), ratio(k, "libring-tcp", "gloo-tcp"),
            gbs(k, "libring-tcp"), gbs(k, "gloo-tcp")
    }
    print "us: median over >= 5 timed iterations (each the slowest rank; a barrier before each;"
    print "with --batch N, each the mean of N calls back to back)."
    print "GBs: busbw = bytes/time * 2(np-1)/np, GB/s = 1e9 B/s. shm/v, tcp/om, tcp/gl: the"
    print "peer time over libring time, same run (> 1: libring faster, busbw higher by that)."
}' "$rows"
