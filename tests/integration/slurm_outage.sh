#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringd on Slurm rides out an outage of slurmctld, on the real two-node test cluster. While
# the controller is down, ringd's API keeps answering and takes new jobs, and the running
# job's ranks go on (and end) on their node. A job that ringd tries to submit then is not
# failed (slurmctld's absence is not the job's fault, and its max_restarts is 0): it waits
# and is tried again. Every route answers within a second, cancel, stop, resume, the cluster
# and the scheduler included, although the scheduler thread waits out libslurm's retries.
# Nothing is lost: when slurmctld comes back with its saved state, the job that ran through
# the outage is seen to succeed, once, and the waiting one runs.
# Needs root and Slurm: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
: "${RINGD:?}"
slurm_env
. "$(dirname "$0")/slurm_ringd_lib.sh"
# Whatever happens below, the shared cluster's controller must be back for the next test.
trap '"$TC" ctld-start "$SLURM_CLUSTER" >/dev/null 2>&1 || true; cleanup' EXIT

ringd_up
first=$(submit through 1 0 '{"max_restarts": 0}' -- /bin/sh -c 'echo up; exec sleep 6')
wait_state "$first" RUNNING 60
# Its rank runs (srun created the step, which needs slurmctld) before the outage starts.
wait_until 60 "the first job's rank did not start" grep -q up "$(run_dir "$first")/rank.0/stdout"

"$TC" ctld-stop "$SLURM_CLUSTER"
scontrol ping >/dev/null 2>&1 && fail "slurmctld still answers after ctld-stop"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "$AUTH" "$URL/v1/jobs/$first")
[ "$code" = 200 ] || fail "GET of a job during the outage answered $code, want 200 within 5 s"
during=$(submit during 1 0 '{"max_restarts": 0}' -- /bin/sleep 1)
unreachable() {
    curl -s -m 5 -H "$AUTH" "$URL/v1/jobs/$during/events" |
        jq -e 'any(.events[]; .type == "retry" and (.message | contains("slurmctld cannot be reached")))'
}
# libslurm waits out its connection retries on each call, so this takes tens of seconds.
wait_until 150 "ringd never tried to submit the job during the outage" unreachable
for id in "$first" "$during"; do
    s=$(curl -s -m 5 -H "$AUTH" "$URL/v1/jobs/$id" | jq -r .state)
    case $s in QUEUED | STARTING | RUNNING) ;; *) fail "job $id became $s during the outage" ;; esac
done
ok "during the outage the API answers and takes a job, which waits instead of failing"

# Every route answers within a second, those that need the scheduler thread included, while
# that thread waits out libslurm's retries. What it cannot take in time is withdrawn: 503
# with Retry-After (nothing was done); a read gets what the thread last said, with its Age.
# quick TOKEN-HEADER METHOD PATH [BODY]: within a second; the status in $code
quick() {
    local args=(-s -m 5 -o "$WORK/body" -D "$WORK/headers" -w '%{http_code} %{time_total}'
        -X "$2" -H "$1" -H 'Content-Type: application/json') t
    [ $# -ge 4 ] && args+=(-d "$4")
    read -r code t <<<"$(curl "${args[@]}" "$URL$3" || true)"
    awk -v t="$t" 'BEGIN { exit !(t < 1.0) }' ||
        fail "$2 $3 took $t s (status $code) while slurmctld is down"
    if [ "$code" = 503 ]; then
        grep -qi '^Retry-After: [1-9]' "$WORK/headers" || fail "$2 $3: 503 without Retry-After"
        jq -e '.type == "urn:ringmaster:problem:scheduler-busy"' "$WORK/body" >/dev/null ||
            fail "$2 $3: $(cat "$WORK/body")"
    fi
}
victim=$(submit victim 1 0 '{"max_restarts": 0}' -- /bin/sleep 1)
busy=0
for round in 1 2 3; do
    for route in "GET /v1/cluster" "GET /v1/scheduler"; do
        quick "$AUTH" $route
        [ "$code" = 200 ] || fail "$route answered $code during the outage, want 200 (a snapshot)"
    done
    quick "$ADMIN" PUT /v1/scheduler '{"policy":"fifo"}'
    case $code in 200 | 503) ;; *) fail "PUT /v1/scheduler answered $code" ;; esac
    for action in stop resume cancel; do
        quick "$AUTH" POST "/v1/jobs/$victim/$action"
        case $code in 202 | 200 | 409 | 503) ;; *) fail "$action answered $code: $(cat "$WORK/body")" ;; esac
        if [ "$code" = 503 ]; then busy=$((busy + 1)); fi
    done
    for route in /v1/jobs "/v1/jobs/$first" "/v1/jobs/$first/events" "/v1/jobs/$first/logs" \
        /v1/tokens /healthz /readyz /metrics /v1/openapi.json; do
        quick "$AUTH" GET "$route"
        case $code in 200 | 404) ;; *) fail "GET $route answered $code during the outage" ;; esac
    done
    sleep 2
done
[ "$busy" -gt 0 ] || fail "the scheduler thread was never busy: the outage did not hold it"
ok "during the outage every route answers within a second ($busy scheduler-busy 503s)"

"$TC" ctld-start "$SLURM_CLUSTER"
# The victim may have been cancelled, or not (its cancels answered 503): it ends now.
cancel_victim() { case $(api POST "/v1/jobs/$victim/cancel") in 202 | 409) ;; *) false ;; esac; }
wait_until 60 "the victim cannot be cancelled after the outage" cancel_victim
wait_state "$first" SUCCEEDED 120
wait_state "$during" SUCCEEDED 120
job "$first" | jq -e '(.attempts | length) == 1 and .attempts[0].exit_status == 0' >/dev/null ||
    { job "$first" | jq .attempts; fail "the job that ran through the outage was restarted or failed"; }
job "$during" | jq -e '(.attempts | length) == 1 and .attempts[0].number == 1 and .attempts[0].exit_status == 0' >/dev/null ||
    { job "$during" | jq .attempts; fail "the job submitted during the outage did not run once, as attempt 1"; }
ok "after the outage both jobs succeeded, each with one attempt"
