#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Jobs through a real ringd: a 2-worker libring job runs to SUCCEEDED, cancel, restarts with
# backoff, a full cluster queues, and a ringd killed mid-job requeues and resumes it.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${TRAIN:?}"

DATA=$WORK/data
export RINGD_SLOTS=2
trap 'pkill -9 -f "$WORK" 2>/dev/null || true; lib_exit' EXIT

submit() { curl -s -H 'Content-Type: application/json' -d "$1" "http://$ADDR/v1/jobs" | jq -r .id; }
job() { curl -s "http://$ADDR/v1/jobs/$1"; }
state() { job "$1" | jq -r .state; }
wait_state() { # wait_state ID STATE SECONDS
    local end=$((SECONDS + $3))
    while [ "$SECONDS" -lt "$end" ]; do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.1
    done
    job "$1" | jq . >&2
    grep -v msg=request "$WORK/ringd.log" | tail -20 >&2
    fail "job $1 is $(state "$1"), not $2 after $3 s"
}

ringd_start "$DATA" --no-auth
id=$(submit "{\"name\":\"train\",\"command\":[\"$TRAIN\",\"--epochs\",\"3\"],\"workers\":2}")
wait_state "$id" SUCCEEDED 60
job "$id" >"$WORK/job.json"
jq -e '.attempts | length == 1 and .[0].world_size == 2 and .[0].exit_status == 0' "$WORK/job.json" >/dev/null ||
    { cat "$WORK/job.json"; fail "bad attempt record"; }
jq -e '.progress.epoch == 3 and .progress.world_size == 2' "$WORK/job.json" >/dev/null ||
    { cat "$WORK/job.json"; fail "no progress from rank 0"; }
run=$(jq -r '.attempts[0].run_dir' "$WORK/job.json")
grep -q "final loss" "$run/rank.0/stdout" || fail "no rank 0 log in $run"
[ -f "$DATA/checkpoints/$id/checkpoint.bin" ] || fail "no checkpoint in the job's checkpoint dir"
ok "submit -> running -> succeeded with a real 2-worker libring job, logs and progress"

id=$(submit "{\"name\":\"long\",\"command\":[\"$TRAIN\",\"--epochs\",\"1000\",\"--step-sleep-ms\",\"5\"],\"workers\":2}")
wait_state "$id" RUNNING 30
id2=$(submit "{\"name\":\"waits\",\"command\":[\"/bin/true\"],\"workers\":1}")
# No sleep to give the scheduler a chance to start id2 wrongly: the submission wakes it
# before its 201, and the cancel below frees the slots only once the job has exited. So
# a scheduler that ignored the full cluster starts id2 while id runs, and the records show
# it: id2's attempt must start at or after the end of id's.
pg=$(job "$id" | jq -r '.attempts[0].backend_id')
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/cancel")
[ "$code" = 202 ] || { cat "$WORK/c.json"; fail "cancel answered $code"; }
wait_state "$id" CANCELLED 30
kill -0 -- "-$pg" 2>/dev/null && fail "the cancelled job's process group $pg is still alive"
wait_state "$id2" SUCCEEDED 30
ended=$(job "$id" | jq -r '.attempts[0].ended_at')
started=$(job "$id2" | jq -r '.attempts[0].started_at')
[[ ! "$started" < "$ended" ]] ||
    fail "a job started although the cluster was full: $id2 started at $started, $id ended at $ended"
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/cancel")
[ "$code" = 409 ] || fail "cancelling a finished job answered $code, want 409"
jq -e '.type == "urn:ringmaster:problem:job-finished"' "$WORK/c.json" >/dev/null || fail "409 without problem"
ok "a full cluster queues; cancel kills the process group; cancel on a finished job is 409"

id=$(submit "{\"name\":\"pausable\",\"command\":[\"$TRAIN\",\"--epochs\",\"30\",\"--step-sleep-ms\",\"2\"],\"workers\":2}")
wait_state "$id" RUNNING 30
curl -s "http://$ADDR/v1/cluster" >"$WORK/cluster.json"
jq -e --arg id "$id" '.nodes[0].slots == 2 and .nodes[0].slots_free == 0 and .nodes[0].jobs[0].id == $id' \
    "$WORK/cluster.json" >/dev/null || { cat "$WORK/cluster.json"; fail "/v1/cluster does not show the job"; }
# Rank 0 reports progress after an epoch, when every rank is past ring_init and a SIGTERM
# becomes a stop; before that it would kill the workers.
wait_for 60 "job $id to finish an epoch" '[ "$(job "$id" | jq ".progress.epoch // 0")" -ge 1 ]'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/stop")
[ "$code" = 202 ] || fail "stop answered $code"
wait_state "$id" STOPPED 30
job "$id" | jq -e '.attempts[0].exit_status == 75' >/dev/null || fail "the stopped attempt did not exit 75"
[ -f "$DATA/checkpoints/$id/checkpoint.bin" ] || fail "no checkpoint after stop"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/resume")
[ "$code" = 200 ] || fail "resume answered $code"
wait_state "$id" SUCCEEDED 120
grep -q "resuming from" "$(job "$id" | jq -r '.attempts[-1].run_dir')/rank.0/stdout" ||
    fail "the resumed job did not start from its checkpoint"
code=$(curl -s -o "$WORK/r.json" -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/resume")
[ "$code" = 409 ] || fail "resuming a finished job answered $code, want 409"
jq -e '.detail | contains("is SUCCEEDED")' "$WORK/r.json" >/dev/null || { cat "$WORK/r.json"; fail "the resume 409 does not say the job's state"; }
curl -s "http://$ADDR/v1/jobs/$id/events" | jq -r '[.events[].type] | join(" ")' >"$WORK/types"
grep -q "submitted starting started stopping stopped resumed starting started succeeded" "$WORK/types" ||
    { cat "$WORK/types"; fail "the event history is not the job's life"; }
ok "stop checkpoints and exits 75 into STOPPED; resume continues from the checkpoint"

# A job stopped to resume later can still be ended for good; a second stop has nothing to do.
id=$(submit '{"name":"parked","command":["/bin/sleep","30"],"workers":1}')
wait_state "$id" RUNNING 30
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/stop")" = 202 ] || fail "stop refused"
wait_state "$id" STOPPED 30
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/stop")
[ "$code" = 409 ] || fail "stopping a STOPPED job answered $code, want 409"
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/cancel")
[ "$code" = 202 ] || { cat "$WORK/c.json"; fail "cancelling a STOPPED job answered $code, want 202"; }
wait_state "$id" CANCELLED 10
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$ADDR/v1/jobs/$id/resume")
[ "$code" = 409 ] || fail "resuming a cancelled job answered $code, want 409"
ok "a STOPPED job can be cancelled (202, CANCELLED), not stopped again or resumed after"

curl -s "http://$ADDR/metrics" >"$WORK/metrics"
grep -q '^ringd_jobs{state="SUCCEEDED"} [1-9]' "$WORK/metrics" || { cat "$WORK/metrics"; fail "no job gauge"; }
grep -q '^ringd_submissions_total [1-9]' "$WORK/metrics" || fail "no submissions counter"
grep -q '^ringd_scheduling_latency_seconds_count [1-9]' "$WORK/metrics" || fail "no latency histogram"
grep -q '^ringd_http_requests_total{code="202"}' "$WORK/metrics" || fail "no request counter"
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "http://$ADDR/v1/jobs/$id")
[ "$code" = 204 ] || fail "DELETE answered $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/v1/jobs/$id")
[ "$code" = 404 ] || fail "a deleted job answered $code"
ok "metrics in the Prometheus format; DELETE removes a finished job"

id=$(submit '{"name":"flaky","command":["/bin/sh","-c","exit 3"],"max_restarts":2}')
wait_state "$id" FAILED 30
job "$id" >"$WORK/job.json"
jq -e '.attempts | length == 3' "$WORK/job.json" >/dev/null || { cat "$WORK/job.json"; fail "want 3 attempts"; }
jq -e '.attempts[2].reason | contains("no restarts are left")' "$WORK/job.json" >/dev/null || fail "no clear reason"
ok "a failing job restarts max_restarts times with backoff, then FAILED with the reason"

# A program that is not there (127) or cannot be executed (126) fails the same way on every
# attempt: the job fails at once, restarts left or not, saying so. ringrun finds the first
# two before any rank starts; in the third, the rank's own shell does.
printf '#!/bin/sh\n' >"$WORK/noexec"
chmod 0644 "$WORK/noexec"
for c in "127|no-such-program-here|--flag" "126|$WORK/noexec" "127|/bin/sh|-c|exec /no/such/program"; do
    IFS='|' read -r want prog args <<<"$c"
    words=$([ "$want" = 127 ] && echo "command not found" || echo "command cannot be executed")
    spec=$(jq -nc --arg p "$prog" --arg a "$args" \
        '{name:"unrunnable", command:([$p] + ($a | split("|") | map(select(. != "")))), max_restarts:3}')
    id=$(submit "$spec")
    wait_state "$id" FAILED 30
    job "$id" >"$WORK/job.json"
    jq -e --argjson s "$want" '.attempts | length == 1 and .[0].exit_status == $s' "$WORK/job.json" >/dev/null ||
        { cat "$WORK/job.json"; fail "[$c] was started again, or did not exit $want"; }
    jq -e --arg w "$words: '$prog' (exit $want)" '.attempts[0].reason | startswith($w)' "$WORK/job.json" >/dev/null ||
        { cat "$WORK/job.json"; fail "[$c] failed without saying '$words: '$prog''"; }
    curl -s "http://$ADDR/v1/jobs/$id/events" | jq -e --arg w "$words: " \
        '.events[-1] | .type == "failed" and .state == "FAILED" and (.message | startswith($w))' >/dev/null ||
        fail "[$c] has no failed event saying why"
done
ok "a program not found (127) or not executable (126) fails the job at once, saying so"

id=$(submit "{\"name\":\"survivor\",\"command\":[\"$TRAIN\",\"--epochs\",\"40\",\"--step-sleep-ms\",\"2\"],\"workers\":2}")
wait_state "$id" RUNNING 30
wait_for 60 "job $id to write a checkpoint" '[ -f "$DATA/checkpoints/$id/checkpoint.bin" ]'
ringd_crash
ringd_start "$DATA" --no-auth
wait_state "$id" SUCCEEDED 120
job "$id" >"$WORK/job.json"
jq -e '.attempts[0].reason | contains("ringd restarted")' "$WORK/job.json" >/dev/null ||
    { cat "$WORK/job.json"; fail "the interrupted attempt has no reason"; }
grep -q "resuming from" "$(jq -r '.attempts[-1].run_dir' "$WORK/job.json")/rank.0/stdout" ||
    fail "the restarted job did not resume from its checkpoint"
ok "ringd killed mid-job: on restart the job is requeued and resumes from its checkpoint"

# Server-Sent Events: the stream follows the job live and ends when it does.
id=$(submit "{\"name\":\"streamed\",\"command\":[\"$TRAIN\",\"--epochs\",\"3\",\"--step-sleep-ms\",\"2\"],\"workers\":2}")
timeout 60 curl -sN -H 'Accept: text/event-stream' "http://$ADDR/v1/jobs/$id/events" >"$WORK/sse" ||
    fail "the event stream did not end with the job"
grep '^event: ' "$WORK/sse" | tr '\n' ' ' >"$WORK/sse.types"
grep -q "event: submitted event: starting event: started event: succeeded" "$WORK/sse.types" ||
    { cat "$WORK/sse"; fail "the stream did not carry the job's events"; }
last=$(grep '^id: ' "$WORK/sse" | sed -n 3p | cut -d' ' -f2)
timeout 10 curl -sN -H 'Accept: text/event-stream' -H "Last-Event-ID: $last" \
    "http://$ADDR/v1/jobs/$id/events" >"$WORK/sse2"
[ "$(grep -c '^id: ' "$WORK/sse2")" = 1 ] && grep -q '^event: succeeded' "$WORK/sse2" ||
    { cat "$WORK/sse2"; fail "Last-Event-ID did not resume after event $last"; }
ok "Server-Sent Events follow a job to its end and resume from Last-Event-ID"

id=$(submit "{\"name\":\"tailed\",\"command\":[\"$TRAIN\",\"--epochs\",\"3\",\"--step-sleep-ms\",\"2\"],\"workers\":2}")
timeout 60 curl -sN "http://$ADDR/v1/jobs/$id/logs?follow=1&rank=0" >"$WORK/follow" ||
    fail "the log follow did not end with the job"
grep -q "epoch 1/3" "$WORK/follow" && grep -q "final loss" "$WORK/follow" ||
    { cat "$WORK/follow"; fail "the followed log lacks the training output"; }
ok "logs?follow=1 streams rank 0's output live until the job ends"

ringd_stop
summary
