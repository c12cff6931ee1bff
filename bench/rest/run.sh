#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/rest: ringd under wrk (64 connections, 2 threads) on GET /v1/jobs/{id},
# GET /v1/jobs?page_size=50 and POST /v1/jobs, with bearer-token auth on. Prints requests/s,
# p50 and p99 latency and errors; --json prints one object per endpoint.
#
#   bench/rest/run.sh [--json] [--duration S] [--connections N] [--build DIR]
set -euo pipefail
build=build
duration=30
conns=64
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --duration) duration=$2; shift ;;
    --connections) conns=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--duration S] [--connections N] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (contrib/deps.sh installs it)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; pkill -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT

# One slot held by a long job: submissions queue instead of launching thousands of attempts.
RINGD_SLOTS=1 "$build/server/ringd" --listen 127.0.0.1:0 --data-dir "$work/data" \
    >"$work/ringd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$work/data/ringd.addr" ] && break; sleep 0.05; done
url="http://$(cat "$work/data/ringd.addr")"
auth="Authorization: Bearer $(cat "$work/data/admin.token")"
curl -sf -H "$auth" -d '{"name":"holder","command":["/bin/sleep","3600"]}' "$url/v1/jobs" >/dev/null
for i in $(seq 60); do # something to list
    curl -sf -H "$auth" -d "{\"name\":\"seed$i\",\"command\":[\"/bin/true\"]}" "$url/v1/jobs" >/dev/null
done
id=$(curl -sf -H "$auth" "$url/v1/jobs?page_size=1" | jq -r '.jobs[0].id')

rows=$work/rows
run() { # run NAME PATH [wrk args...]
    local name=$1 path=$2 out
    shift 2
    out=$(wrk -t2 -c"$conns" -d"${duration}s" --latency -H "$auth" "$@" "$url$path")
    echo "$out" >"$work/wrk.$(echo "$name" | tr -c 'a-z' '_')"
    awk -v name="$name" -v c="$conns" -v d="$duration" '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
                         if (v ~ /s$/) return v * 1000; return v }
        /^ +50%/ { p50 = ms($2) }
        /^ +99%/ { p99 = ms($2) }
        /Requests\/sec/ { rps = $2 }
        /Non-2xx or 3xx/ { errors += $5 }
        /Socket errors/ { gsub(",", ""); errors += $4 + $6 + $8 + $10 }
        END { printf "{\"bench\":\"rest\",\"impl\":\"ringd\",\"endpoint\":\"%s\",\"connections\":%d,\"duration_s\":%d,\"requests_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%d}\n", name, c, d, rps, p50, p99, errors + 0 }' <<<"$out" >>"$rows"
}
echo "bench/rest: GET /v1/jobs/{id} for ${duration}s" >&2
run "GET /v1/jobs/{id}" "/v1/jobs/$id"
echo "bench/rest: GET /v1/jobs?page_size=50 for ${duration}s" >&2
run "GET /v1/jobs?page_size=50" "/v1/jobs?page_size=50"
echo "bench/rest: POST /v1/jobs for ${duration}s" >&2
run "POST /v1/jobs" "/v1/jobs" -s "$here/submit.lua"

if [ "$json" = 1 ]; then
    cat "$rows"
    exit 0
fi
printf "%-26s %12s %10s %10s %8s\n" endpoint "requests/s" "p50 ms" "p99 ms" errors
jq -r '[.endpoint, .requests_per_s, .p50_ms, .p99_ms, .errors] | @tsv' "$rows" |
    while IFS=$'\t' read -r e r p5 p9 er; do printf "%-26s %12.1f %10.3f %10.3f %8d\n" "$e" "$r" "$p5" "$p9" "$er"; done
echo "wrk -t2 -c$conns -d${duration}s on the same 2-core machine as ringd; auth on."
