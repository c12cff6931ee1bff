#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# /metrics is Prometheus' text format (checked by Prometheus' own Python parser), and its
# counters and histograms never go down: not when a job is deleted (its attempts and events
# go with it) and not when ringd restarts. Prometheus reads a counter that went down as a
# reset, and every rate over it would jump. Its gauges say what each node's attempts hold,
# which policy schedules (following PUT /v1/scheduler), and which build answers. Needs
# python3-prometheus-client (contrib/deps.sh).
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
PY=/usr/bin/python3 # Debian's python3-prometheus-client imports only in Debian's own python3
$PY -c 'import prometheus_client.parser' 2>/dev/null ||
    skip "python3-prometheus-client is not installed (contrib/deps.sh installs it)"

DATA=$WORK/data
export RINGD_SLOTS=2 RINGD_GPUS=2
trap 'pkill -9 -f "$WORK" 2>/dev/null || true; lib_exit' EXIT

submit() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL/v1/jobs" | jq -r .id; }
job() { curl -s "$URL/v1/jobs/$1"; }
wait_job() { # wait_job ID JQ-CONDITION
    local job_id=$1 job_cond=$2 # (wait_for's own locals are limit, what and cond)
    wait_for 60 "job $job_id: $job_cond" '[ "$(job "$job_id" | jq "$job_cond")" = true ]'
}
# scrape FILE: /metrics into FILE, which Prometheus' parser must read whole
scrape() {
    curl -sf "$URL/metrics" >"$1" || fail "GET /metrics failed"
    $PY -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
n = sum(len(f.samples) for f in text_string_to_metric_families(open(sys.argv[1]).read()))
assert n > 0, "no samples"' "$1" || { cat "$1" >&2; fail "Prometheus cannot parse $1"; }
}
# never_down BEFORE AFTER [SKIP-REGEX]: every counter and histogram sample of BEFORE is in
# AFTER, at least as large (samples whose name matches SKIP-REGEX are left out)
never_down() {
    $PY - "$1" "$2" "${3:-^$}" <<'PY' || fail "a counter went down from $1 to $2"
import re, sys
from prometheus_client.parser import text_string_to_metric_families
def samples(path):
    out = {}
    for fam in text_string_to_metric_families(open(path).read()):
        if fam.type in ("counter", "histogram"):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out
before, after, skip = samples(sys.argv[1]), samples(sys.argv[2]), re.compile(sys.argv[3])
bad = [(k, v, after.get(k)) for k, v in before.items()
       if not skip.search(k[0]) and (k not in after or after[k] < v)]
for k, v, w in bad:
    print("went down:", k, v, "->", w, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
value() { sed -n "s/^$1 //p" "$2"; } # value SAMPLE FILE
# node_value METRIC FILE: METRIC's sample for the one node of this ringd
node_value() { sed -n "s/^$1{node=\"[^\"]*\"} //p" "$2"; }
# expect_nodes FILE SLOTS SLOTS_ALLOCATED GPUS GPUS_ALLOCATED: the node gauges in FILE
expect_nodes() {
    local got
    got="$(node_value ringd_node_slots "$1") $(node_value ringd_node_slots_allocated "$1")"
    got="$got $(node_value ringd_node_gpus "$1") $(node_value ringd_node_gpus_allocated "$1")"
    [ "$got" = "$2 $3 $4 $5" ] || { cat "$1" >&2; fail "node gauges are '$got', want '$2 $3 $4 $5'"; }
}

ringd_start "$DATA" --no-auth
# One job that reports progress (a start overhead) and is cancelled (a stop overhead), one
# that succeeds: every histogram has observations.
a=$(submit '{"name":"a","command":["/bin/sh","-c","echo {\\\"step\\\":1} >\"$RING_RUN_DIR/progress.json\"; exec sleep 60"]}')
wait_job "$a" '.attempts[0].start_overhead_s != null'
curl -sf -o /dev/null -X POST "$URL/v1/jobs/$a/cancel" || fail "cancel failed"
wait_job "$a" '.state == "CANCELLED"'
b=$(submit '{"name":"b","command":["/bin/true"]}')
wait_job "$b" '.state == "SUCCEEDED"'
scrape "$WORK/m1"
for h in ringd_scheduling_latency_seconds ringd_attempt_stop_seconds ringd_attempt_start_seconds; do
    [ "$(value "${h}_count" "$WORK/m1")" -ge 1 ] || { cat "$WORK/m1"; fail "no observation in $h"; }
done
[ "$(value 'ringd_jobs{state="SUCCEEDED"}' "$WORK/m1")" = 1 ] || fail "ringd_jobs SUCCEEDED is not 1"
ok "/metrics parses as Prometheus text, with an observation in every histogram"

for id in "$a" "$b"; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$URL/v1/jobs/$id")" = 204 ] || fail "DELETE $id"
done
scrape "$WORK/m2"
never_down "$WORK/m1" "$WORK/m2"
for h in ringd_scheduling_latency_seconds ringd_attempt_stop_seconds ringd_attempt_start_seconds; do
    [ "$(value "${h}_count" "$WORK/m2")" = "$(value "${h}_count" "$WORK/m1")" ] ||
        fail "${h}_count changed with a delete"
done
[ "$(value 'ringd_jobs{state="SUCCEEDED"}' "$WORK/m2")" = 0 ] || fail "the gauge still counts a deleted job"
ok "deleting jobs leaves every counter and histogram, and the jobs gauge follows"

ringd_stop
ringd_start "$DATA" --no-auth
scrape "$WORK/m3"
# Requests are counted in memory since the process started (a reset Prometheus expects).
never_down "$WORK/m2" "$WORK/m3" '^ringd_http_requests_total$'
ok "the stored counters and histograms survive a restart"

# What the node's attempts hold: a job of one worker with 2 slots and a GPU, then a second
# that cannot fit beside it and waits (QUEUED); the gauges follow the scheduler's turns.
expect_nodes "$WORK/m3" 2 0 2 0
grep -q "^ringd_node_offline{node=\"[^\"]*\"} 0$" "$WORK/m3" || fail "no ringd_node_offline 0"
c=$(submit '{"name":"c","command":["/bin/sleep","60"],"cpus_per_worker":2,"gpus_per_worker":1}')
d=$(submit '{"name":"d","command":["/bin/true"]}')
wait_job "$c" '.state == "RUNNING"'
wait_for 30 "the node gauges to show job c" \
    'scrape "$WORK/m4"; [ "$(node_value ringd_node_gpus_allocated "$WORK/m4")" = 1 ]'
expect_nodes "$WORK/m4" 2 2 2 1
[ "$(value 'ringd_jobs{state="QUEUED"}' "$WORK/m4")" = 1 ] || fail "ringd_jobs QUEUED is not 1 (job d waits)"
[ "$(value 'ringd_jobs{state="RUNNING"}' "$WORK/m4")" = 1 ] || fail "ringd_jobs RUNNING is not 1"
ok "the node gauges count the slots and GPUs an attempt holds, and the queued job waits"
curl -sf -o /dev/null -X POST "$URL/v1/jobs/$c/cancel" || fail "cancel failed"
wait_job "$d" '.state == "SUCCEEDED"'
wait_for 30 "the node gauges to be free again" \
    'scrape "$WORK/m5"; [ "$(node_value ringd_node_slots_allocated "$WORK/m5")" = 0 ]'
expect_nodes "$WORK/m5" 2 0 2 0
ok "once the jobs end, nothing is allocated"

# The policy label follows a change at runtime; the build is this binary's.
[ "$(value 'ringd_scheduler_info{policy="fifo",backend="local"}' "$WORK/m5")" = 1 ] ||
    { grep ringd_scheduler_info "$WORK/m5" >&2; fail "no ringd_scheduler_info for fifo on local"; }
curl -sf -o /dev/null -X PUT -H 'Content-Type: application/json' -d '{"policy":"dynamic"}' \
    "$URL/v1/scheduler" || fail "PUT /v1/scheduler failed"
wait_for 30 "ringd_scheduler_info to say dynamic" \
    'scrape "$WORK/m6"; [ "$(value "ringd_scheduler_info{policy=\"dynamic\",backend=\"local\"}" "$WORK/m6")" = 1 ]'
[ "$(grep -c '^ringd_scheduler_info{' "$WORK/m6")" = 1 ] || fail "more than one ringd_scheduler_info sample"
version=$("$RINGD" --version | awk '{print $2}')
[ "$(value "ringd_build_info{version=\"$version\"}" "$WORK/m6")" = 1 ] ||
    { grep build_info "$WORK/m6" >&2; fail "no ringd_build_info for version $version"; }
age=$(value ringd_scheduler_view_age_seconds "$WORK/m6")
awk -v a="$age" 'BEGIN { exit !(a >= 0 && a < 5) }' || fail "ringd_scheduler_view_age_seconds is '$age'"
ok "ringd_scheduler_info names the policy now and ringd_build_info the version"
ringd_stop
summary
