#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/rest: ringd under wrk (64 connections, 2 threads) on GET /v1/jobs/{id},
# GET /v1/jobs?page_size=50 and POST /v1/jobs, with bearer-token auth on; then, in the same
# run, the same three requests against the peer, Slurm's slurmrestd (JWT auth, a real
# one-node cluster from contrib/slurm/testcluster.sh): GET job/{id}, GET jobs (50 jobs in
# the queue) and POST job/submit. Prints requests/s, p50 and p99 latency, errors, and
# ringd's ratio over slurmrestd; --json prints one object per endpoint and implementation.
#
#   bench/rest/run.sh [--json] [--duration S] [--connections N] [--build DIR] [--no-peer]
set -euo pipefail
build=build
duration=30
conns=64
json=0
peer=1
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --duration) duration=$2; shift ;;
    --connections) conns=$2; shift ;;
    --build) build=$2; shift ;;
    --no-peer) peer=0 ;;
    *) echo "usage: $0 [--json] [--duration S] [--connections N] [--build DIR] [--no-peer]" >&2; exit 2 ;;
    esac
    shift
done
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (contrib/deps.sh installs it)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
# The Slurm test cluster lives outside /tmp (its node n2 has a private /tmp); slurmrestd,
# which runs as nobody, reads its slurm.conf there.
cluster=$(mktemp -d /var/tmp/ringbench-slurm.XXXXXX)
chmod 0755 "$cluster"
cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pkill -f "$work/data" 2>/dev/null || true
    [ "$peer" = 0 ] || "$here/../../contrib/slurm/testcluster.sh" stop "$cluster" || true
    rm -rf "$work" "$cluster"
}
pid=
trap cleanup EXIT

# One slot held by a long job: submissions queue instead of launching thousands of attempts.
RINGD_SLOTS=1 "$build/server/ringd" --listen 127.0.0.1:0 --data-dir "$work/data" \
    --default-user "$(id -un)" \
    >"$work/ringd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$work/data/ringd.addr" ] && break; sleep 0.05; done
url="http://$(cat "$work/data/ringd.addr")"
auth="Authorization: Bearer $(cat "$work/data/admin.token")"
curl -sf -H "$auth" -d '{"name":"holder","command":["/bin/sleep","3600"]}' "$url/v1/jobs" >/dev/null
for i in $(seq 50); do # something to list
    curl -sf -H "$auth" -d "{\"name\":\"seed$i\",\"command\":[\"/bin/true\"]}" "$url/v1/jobs" >/dev/null
done
id=$(curl -sf -H "$auth" "$url/v1/jobs?page_size=1" | jq -r '.jobs[0].id')

rows=$work/rows
run() { # run IMPL NAME URL [wrk args...]
    local impl=$1 name=$2 target=$3 out
    shift 3
    out=$(wrk -t2 -c"$conns" -d"${duration}s" --latency "$@" "$target")
    echo "$out" >"$work/wrk.$(echo "$name" | tr -c 'a-z' '_')"
    awk -v impl="$impl" -v name="$name" -v c="$conns" -v d="$duration" '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
                         if (v ~ /s$/) return v * 1000; return v }
        /^ +50%/ { p50 = ms($2) }
        /^ +99%/ { p99 = ms($2) }
        /Requests\/sec/ { rps = $2 }
        /Non-2xx or 3xx/ { errors += $5 }
        /Socket errors/ { gsub(",", ""); errors += $4 + $6 + $8 + $10 }
        END { printf "{\"bench\":\"rest\",\"impl\":\"%s\",\"endpoint\":\"%s\",\"connections\":%d,\"duration_s\":%d,\"requests_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%d}\n", impl, name, c, d, rps, p50, p99, errors + 0 }' <<<"$out" >>"$rows"
}
echo "bench/rest: ringd GET /v1/jobs/{id} for ${duration}s" >&2
run ringd "GET job" "$url/v1/jobs/$id" -H "$auth"
echo "bench/rest: ringd GET /v1/jobs?page_size=50 for ${duration}s" >&2
run ringd "GET list of 50" "$url/v1/jobs?page_size=50" -H "$auth"
echo "bench/rest: ringd POST /v1/jobs for ${duration}s" >&2
run ringd "POST submit" "$url/v1/jobs" -H "$auth" -s "$here/submit.lua"
kill "$pid"
wait "$pid" 2>/dev/null || true

if [ "$peer" = 1 ]; then
    "$here/../../contrib/slurm/testcluster.sh" start "$cluster" --rest >&2
    # shellcheck disable=SC1091
    . "$cluster/env"
    sh_user="X-SLURM-USER-NAME: $SLURMRESTD_USER"
    sh_token="X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN"
    # A job that may begin only tomorrow: it stays queued, like ringd's behind their holder.
    export SLURM_SUBMIT_BODY='{"job":{"name":"bench","partition":"debug",
        "current_working_directory":"/tmp","environment":{"PATH":"/bin:/usr/bin"},
        "begin_time":"now+1day"},"script":"#!/bin/sh\ntrue\n"}'
    for _ in $(seq 50); do # the same queue as ringd's: 50 jobs waiting
        curl -sf -H "$sh_user" -H "$sh_token" -H "Content-Type: application/json" \
            -d "$SLURM_SUBMIT_BODY" "$SLURMRESTD_URL/slurm/v0.0.38/job/submit" >"$work/submit.json" ||
            { echo "run.sh: slurmrestd refused a submission" >&2; exit 1; }
    done
    sid=$(jq -r .job_id "$work/submit.json")
    echo "bench/rest: slurmrestd GET job/{id} for ${duration}s" >&2
    run slurmrestd "GET job" "$SLURMRESTD_URL/slurm/v0.0.38/job/$sid" -H "$sh_user" -H "$sh_token"
    echo "bench/rest: slurmrestd GET jobs for ${duration}s" >&2
    run slurmrestd "GET list of 50" "$SLURMRESTD_URL/slurm/v0.0.38/jobs" -H "$sh_user" -H "$sh_token"
    echo "bench/rest: slurmrestd POST job/submit for ${duration}s" >&2
    run slurmrestd "POST submit" "$SLURMRESTD_URL/slurm/v0.0.38/job/submit" -H "$sh_user" \
        -H "$sh_token" -s "$here/slurm_submit.lua"
fi

# ringd's rows gain its ratio over slurmrestd on the same endpoint (requests/s).
jq -c -s '(map(select(.impl == "slurmrestd") | {(.endpoint): .requests_per_s}) | add // {}) as $peer
    | .[] | if .impl == "ringd" and $peer[.endpoint] then
        . + {ratio_vs_slurmrestd: ((.requests_per_s / $peer[.endpoint]) * 100 | round / 100)}
      else . end' "$rows" >"$rows.out"
if [ "$json" = 1 ]; then
    cat "$rows.out"
    exit 0
fi
printf "%-11s %-16s %12s %10s %10s %8s %8s\n" impl endpoint "requests/s" "p50 ms" "p99 ms" errors ratio
jq -r '[.impl, .endpoint, .requests_per_s, .p50_ms, .p99_ms, .errors, (.ratio_vs_slurmrestd // "")] | @tsv' "$rows.out" |
    while IFS=$'\t' read -r im e r p5 p9 er ra; do
        [ -z "$ra" ] || ra=$(printf "%.2f" "$ra")
        printf "%-11s %-16s %12.1f %10.3f %10.3f %8d %8s\n" "$im" "$e" "$r" "$p5" "$p9" "$er" "$ra"
    done
echo "wrk -t2 -c$conns -d${duration}s on the same 2-core machine as the server; auth on (ringd:"
echo "bearer token; slurmrestd: JWT). ratio = ringd requests/s / slurmrestd requests/s."
