#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/rest/memory.sh: ringd's memory while it serves big logs. A job makes its rank 0
# stdout a sparse file of SIZE GiB and appends a line to it every 0.2 s; then, at once:
# FOLLOWS clients follow that log (GET .../logs?follow=1 from its end), one client reads
# the whole log (GET .../logs, every byte), and another asks for its last 1000 lines ten
# times. ringd's resident memory (VmRSS) is sampled from /proc every 50 ms: idle (after a
# warm-up request of each kind), once the follows are connected (what a connection costs:
# mostly libmicrohttpd's per-connection buffer), under the load, and its peak (VmHWM).
# Serving must not grow it: growth_pct compares the peak under load with the connected
# figure. Each round is a fresh ringd; the table gives the median of the rounds, --json
# one row per round.
#
#   bench/rest/memory.sh [--json] [--build DIR] [--size GIB] [--follows N] [--rounds R]
set -euo pipefail
build=build
size=10
follows=100
rounds=3
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --build) build=$2; shift ;;
    --size) size=$2; shift ;;
    --follows) follows=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "usage: $0 [--json] [--build DIR] [--size GIB] [--follows N] [--rounds R]" >&2; exit 2 ;;
    esac
    shift
done
work=$(mktemp -d /var/tmp/ringbench-mem.XXXXXX)
chmod 0755 "$work"
pid=
cleanup() {
    local p
    for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT
rss() { sed -n "s/^$1:[^0-9]*\([0-9]*\).*/\1/p" "/proc/$pid/status"; } # rss VmRSS|VmHWM: KiB
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# shellcheck disable=SC2016 # the job's own shell expands these
job='f="$RING_RUN_DIR/rank.0/stdout"; while [ ! -f "$f" ]; do sleep 0.1; done
truncate -s '"$size"'G "$f"; while :; do echo tick >>"$f"; sleep 0.2; done'

round() { # round N: one fresh ringd under the load; appends a JSON row to $work/rows
    local r=$1 data=$work/data.$1 url id log bytes t0 t1 sampler clients
    "$build/server/ringd" --listen 127.0.0.1:0 --data-dir "$data" --no-auth \
        --default-user "$(id -un)" >"$work/ringd.$r.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do [ -s "$data/ringd.addr" ] && break; sleep 0.05; done
    [ -s "$data/ringd.addr" ] || { cat "$work/ringd.$r.log" >&2; exit 1; }
    url="http://$(cat "$data/ringd.addr")"
    id=$(jq -cn --arg s "$job" '{name:"biglog",command:["/bin/sh","-c",$s]}' |
        curl -sf -H 'Content-Type: application/json' -d @- "$url/v1/jobs" | jq -r .id)
    for _ in $(seq 600); do
        log=$(curl -sf "$url/v1/jobs/$id" | jq -r '.attempts[0].run_dir // empty')
        [ -n "$log" ] && [ "$(stat -c %s "$log/rank.0/stdout" 2>/dev/null || echo 0)" -gt $((size << 30)) ] && break
        sleep 0.1
    done
    log=$log/rank.0/stdout
    bytes=$(stat -c %s "$log")
    # Warm-up: one request of each kind, so that idle means ringd's steady state.
    curl -sf -o /dev/null "$url/v1/jobs/$id/logs?tail=1000"
    curl -sf -o /dev/null -r 0-0 "$url/v1/jobs/$id/logs?offset=$((bytes - 4096))"
    timeout 1 curl -sN -o /dev/null "$url/v1/jobs/$id/logs?follow=1&offset=$bytes" || true
    sleep 1
    : >"$work/idle.$r"
    for _ in $(seq 20); do rss VmRSS >>"$work/idle.$r"; sleep 0.05; done
    clients=()
    for _ in $(seq "$follows"); do
        curl -sN -o /dev/null "$url/v1/jobs/$id/logs?follow=1&offset=$bytes" &
        clients+=($!)
    done
    for _ in $(seq 200); do
        [ "$(ss -Htn state established "( sport = :${url##*:} )" | wc -l)" -ge "$follows" ] && break
        sleep 0.05
    done
    sleep 1 # every follow has its first lines
    : >"$work/connected.$r"
    for _ in $(seq 20); do rss VmRSS >>"$work/connected.$r"; sleep 0.05; done
    (while :; do rss VmRSS; sleep 0.05; done) >"$work/load.$r" 2>/dev/null &
    sampler=$!
    t0=$(date +%s.%N)
    curl -sf -o /dev/null -w '%{size_download}\n' "$url/v1/jobs/$id/logs" >"$work/full.$r"
    t1=$(date +%s.%N)
    for _ in $(seq 10); do curl -sf -o /dev/null "$url/v1/jobs/$id/logs?tail=1000"; done
    sleep 2 # the follows go on receiving lines
    kill "$sampler"
    wait "$sampler" 2>/dev/null || true
    jq -cn --argjson r "$r" --argjson size "$bytes" --argjson f "$follows" \
        --argjson idle "$(median <"$work/idle.$r")" --argjson conn "$(median <"$work/connected.$r")" \
        --argjson max "$(sort -n "$work/load.$r" | tail -1)" \
        --argjson hwm "$(rss VmHWM)" --argjson got "$(cat "$work/full.$r")" \
        --argjson s "$(echo "$t1 - $t0" | bc)" \
        '{bench: "rest-memory", impl: "ringd", round: $r, log_bytes: $size, follows: $f,
          full_get_bytes: $got, full_get_s: $s, full_get_gbs: ($got / $s / 1e9),
          rss_idle_mib: ($idle / 1024), rss_connected_mib: ($conn / 1024),
          per_follow_kib: (if $f > 0 then ($conn - $idle) / $f else 0 end),
          rss_load_max_mib: ($max / 1024), hwm_mib: ($hwm / 1024),
          growth_pct: (($max - $conn) / $conn * 100)}' >>"$work/rows"
    if [ "$follows" -gt 0 ]; then
        kill "${clients[@]}" 2>/dev/null || true
        wait "${clients[@]}" 2>/dev/null || true
    fi
    # The job ends before ringd does: a ringd that stops leaves its attempts running.
    curl -sf -o /dev/null -X POST "$url/v1/jobs/$id/cancel" || true
    for _ in $(seq 200); do
        [ "$(curl -sf "$url/v1/jobs/$id" | jq -r .state)" = CANCELLED ] && break
        sleep 0.05
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
}

for r in $(seq "$rounds"); do
    echo "bench/rest/memory: round $r of $rounds (${size} GiB log, $follows follows)" >&2
    round "$r"
done
if [ "$json" = 1 ]; then
    cat "$work/rows"
    exit 0
fi
printf "%-34s %10s\n" "median of $rounds rounds" value
for k in rss_idle_mib rss_connected_mib per_follow_kib rss_load_max_mib growth_pct hwm_mib \
    full_get_s full_get_gbs; do
    printf "%-34s %10.2f\n" "$k" "$(jq ".$k" "$work/rows" | median)"
done
echo "${size} GiB sparse log read whole by one client while $follows clients follow it and"
echo "another asks for its last 1000 lines. connected: the follows open, before the rest;"
echo "growth_pct = (peak RSS under load - connected RSS) / connected RSS."
