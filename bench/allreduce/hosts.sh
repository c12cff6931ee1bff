#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/allreduce/hosts.sh: allreduce across stand-in hosts (network namespaces on a bridge,
# contrib/netns.sh), the flat ring against the hierarchical allreduce (shared memory inside
# a host, one TCP ring per slice across hosts), in alternating rounds of the same run.
# Prints one table with each mode's median over the rounds and the speed-up; with --json,
# one JSON object per (mode, bytes) instead, with the median over the rounds.
#
#   bench/allreduce/hosts.sh [--json] [--hosts N] [--ranks-per-host R] [--rounds K]
#                            [--min-bytes B] [--max-bytes B] [--budget-ms MS] [--build DIR]
#
# Defaults: 2 hosts x 2 ranks, 3 rounds, 1 MiB to 64 MiB. Needs root (ip netns).
# Every rank runs on this machine's cores, so the cross-host links are veth pairs, not a
# network: the numbers compare the two algorithms, not a cluster's bandwidth. Open MPI is
# not compared here: mpirun cannot place its ranks in namespaces (bench/allreduce/run.sh
# compares it on one host).
set -euo pipefail

build=build
nhosts=2
per_host=2
rounds=3
min_bytes=$((1 << 20))
max_bytes=$((64 << 20))
budget_ms=400
json=0
usage="usage: $0 [--json] [--hosts N] [--ranks-per-host R] [--rounds K] [--min-bytes B] [--max-bytes B] [--budget-ms MS] [--build DIR]"
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --hosts) nhosts=$2; shift ;;
    --ranks-per-host) per_host=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --min-bytes) min_bytes=$2; shift ;;
    --max-bytes) max_bytes=$2; shift ;;
    --budget-ms) budget_ms=$2; shift ;;
    --build) build=$2; shift ;;
    --version) echo "bench/allreduce/hosts.sh (ringmaster)"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
for v in "$nhosts" "$per_host" "$rounds"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "hosts.sh: '$v' must be a positive integer" >&2; exit 2; }
done
[ "$nhosts" -ge 2 ] || { echo "hosts.sh: --hosts must be at least 2 (one host is run.sh's)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "hosts.sh: needs root for ip netns; run as root" >&2; exit 1; }
command -v ip >/dev/null || { echo "hosts.sh: needs iproute2 (contrib/deps.sh)" >&2; exit 1; }

ringrun=$build/worker/ringrun/ringrun
bench=$build/bench/allreduce/bench_allreduce
[ -x "$bench" ] && [ -x "$ringrun" ] ||
    { echo "hosts.sh: $bench or $ringrun is not built; run make first" >&2; exit 1; }
bench=$(realpath "$bench")

. "$(dirname "$0")/../../contrib/netns.sh"
rows=$(mktemp)
trap 'netns_down; rm -f "$rows"' EXIT
netns_up "$nhosts" || { echo "hosts.sh: $netns_error" >&2; exit 1; }
H=""
for h in $netns_hosts; do H="$H${H:+,}$h:$per_host"; done
np=$((nhosts * per_host))

for ((r = 1; r <= rounds; r++)); do
    for mode in flat hier; do
        echo "bench/allreduce/hosts.sh: round $r of $rounds, $mode, $nhosts hosts x $per_host" >&2
        RING_HIERARCHICAL=$([ $mode = hier ] && echo 1 || echo 0) \
            "$ringrun" -np "$np" -H "$H" --rsh 'ip netns exec %h sh -c' \
            --rendezvous-addr "$netns_net.1" --timeout 60 \
            "$bench" --json --min-bytes "$min_bytes" --max-bytes "$max_bytes" \
            --budget-ms "$budget_ms" --impl "libring-$mode" |
            sed -n 's/^\[0\]<stdout>://p' | grep '^{' >>"$rows"
    done
done

# The median over the rounds of each (mode, bytes), then one line per size.
awk -v json="$json" -v hosts="$nhosts" -v per_host="$per_host" -v rounds="$rounds" '
function field(line, key,    m) {
    if (match(line, "\"" key "\":\"?[^,\"}]*")) {
        m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":"?/, "", m); return m
    }
    return ""
}
function median(k,    n, i, j, x, v) {
    n = cnt[k]
    for (i = 1; i <= n; i++) v[i] = us[k, i]
    for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
/^\{/ {
    np = field($0, "np"); bytes = field($0, "bytes"); mode = field($0, "impl")
    if (!(bytes in seen)) { seen[bytes] = 1; order[nb++] = bytes }
    k = mode SUBSEP bytes
    us[k, ++cnt[k]] = field($0, "median_us")
}
function busbw(t, b) { return t > 0 ? b / (t * 1e-6) * 2 * (np - 1) / np / 1e9 : 0 }
END {
    if (!json)
        printf "%10s | %11s %11s | %9s %9s | %7s\n", "bytes", "flat us", "hier us",
            "flatGBs", "hierGBs", "speedup"
    for (i = 0; i < nb; i++) {
        b = order[i]
        f = median("libring-flat" SUBSEP b); h = median("libring-hier" SUBSEP b)
        if (json) {
            printf "{\"bench\":\"allreduce_hosts\",\"impl\":\"libring-flat\",\"hosts\":%d,\"ranks_per_host\":%d,\"np\":%d,\"bytes\":%d,\"rounds\":%d,\"median_us\":%.1f,\"busbw_gbs\":%.3f}\n", hosts, per_host, np, b, cnt["libring-flat" SUBSEP b], f, busbw(f, b)
            printf "{\"bench\":\"allreduce_hosts\",\"impl\":\"libring-hier\",\"hosts\":%d,\"ranks_per_host\":%d,\"np\":%d,\"bytes\":%d,\"rounds\":%d,\"median_us\":%.1f,\"busbw_gbs\":%.3f,\"speedup_vs_flat\":%.3f}\n", hosts, per_host, np, b, cnt["libring-hier" SUBSEP b], h, busbw(h, b), (h > 0 ? f / h : 0)
        } else {
            printf "%10d | %11.1f %11.1f | %9.3f %9.3f | %6.2fx\n", b, f, h, busbw(f, b), busbw(h, b), (h > 0 ? f / h : 0)
        }
    }
    if (!json) {
        printf "%d hosts x %d ranks (network namespaces on one machine). us: median over %d\n", hosts, per_host, rounds
        print "alternating rounds of each one-run median (bench_allreduce). GBs: busbw, 2(np-1)/np."
        print "speedup: flat time over hierarchical time (> 1: hierarchical faster)."
    }
}' "$rows"
