#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringd on Slurm rides out an outage of slurmctld, on the real two-node test cluster. While
# the controller is down, ringd's API keeps answering and takes new jobs, and the running
# job's ranks go on (and end) on their node. A job that ringd tries to submit then is not
# failed (slurmctld's absence is not the job's fault, and its max_restarts is 0): it waits
# and is tried again. Nothing is lost: when slurmctld comes back with its saved state, the
# job that ran through the outage is seen to succeed, once, and the waiting one runs.
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

"$TC" ctld-start "$SLURM_CLUSTER"
wait_state "$first" SUCCEEDED 120
wait_state "$during" SUCCEEDED 120
job "$first" | jq -e '(.attempts | length) == 1 and .attempts[0].exit_status == 0' >/dev/null ||
    { job "$first" | jq .attempts; fail "the job that ran through the outage was restarted or failed"; }
job "$during" | jq -e '(.attempts | length) == 1 and .attempts[0].number == 1 and .attempts[0].exit_status == 0' >/dev/null ||
    { job "$during" | jq .attempts; fail "the job submitted during the outage did not run once, as attempt 1"; }
ok "after the outage both jobs succeeded, each with one attempt"
