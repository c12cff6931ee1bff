#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The scheduler through a real ringd: under `dynamic` a running job shrinks when a job
# arrives and grows when one ends, each resize an event with its reason, and it ends with the
# loss of an undisturbed run; its sizes, speeds and restart overheads show in the API,
# ringctl and /metrics. A cancel while a stop is under way wins (the job ends CANCELLED).
# Every wait is on a condition, with a deadline.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${TRAIN:?}" "${RINGCTL:?}"

DATA=$WORK/data
cat >"$WORK/ringd.conf" <<EOF
policy = dynamic
slots = 4
# Short passes and a small restart cost until measured, so that the test is quick.
sched_interval = 2
restart_cost = 1
hysteresis = 2
# Long enough that the stubborn job below is still STOPPING when it is cancelled, even
# under TSan; the trainer exits at once on SIGTERM, so resizes do not wait for it.
kill_grace = 10
EOF
# Each poll is a curl and a jq: every 200 ms, not 50, leaves the 2 cores to the jobs.
export WAIT_POLL_S=0.2
ringd_start "$DATA" --config "$WORK/ringd.conf" --no-auth
export RINGMASTER_URL=$URL
# On a failure: the end of ringd's log (scheduler passes, not requests), every job's state
# and size, and the events of the jobs so far, which is what a timed-out wait needs to be
# understood. Then the jobs' processes go with ringd (their paths are under $WORK).
on_exit() {
    local rc=$? id
    if [ "$rc" != 0 ] && [ -n "${ringd_pid:-}" ]; then
        grep -v msg=request "$WORK/ringd.log" | tail -40 >&2 || true
        curl -s "$URL/v1/jobs" | jq -c '.. | objects | select(has("state") and has("id")) |
            {id, name, state, workers: .scaling.workers}' >&2 || true
        for id in ${a:-} ${b:-} ${c:-}; do
            echo "--- events of job $id" >&2
            events "$id" | jq -r '.events[] | "\(.time) \(.type) \(.message)"' >&2 || true
        done
    fi
    pkill -9 -f "$WORK" 2>/dev/null || true
    lib_exit
}
trap on_exit EXIT

submit() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL/v1/jobs" | jq -r .id; }
job() { curl -s "$URL/v1/jobs/$1"; }
events() { curl -s "$URL/v1/jobs/$1/events"; }
state_is() { [ "$(job "$1" | jq -r .state)" = "$2" ]; }
running_at() { job "$1" | jq -e --argjson n "$2" '.state == "RUNNING" and .scaling.workers == $n' >/dev/null; }
# has_event ID TYPE TEXT: an event of TYPE whose message contains TEXT.
has_event() {
    events "$1" | jq -e --arg t "$2" --arg m "$3" \
        'any(.events[]; .type == $t and (.message | contains($m)))' >/dev/null
}
reported() { job "$1" | jq -e '.attempts[-1].start_overhead_s != null' >/dev/null; }
train() { # train NAME EPOCHS: a JobSpec of the example trainer on 1..4 workers
    printf '{"name":"%s","command":["%s","--epochs","%s","--step-sleep-ms","20"],"workers":{"min":1,"max":4}}' \
        "$1" "$TRAIN" "$2"
}

a=$(submit "$(train a 12)")
wait_for 30 "job a runs on all 4 slots" 'running_at "$a" 4'
wait_for 30 "job a reports progress" 'reported "$a"'
b=$(submit "$(train b 3)")
wait_for 30 "job a shrinks for job b" 'has_event "$a" resizing "dynamic: shrink 4 -> 2"'
wait_for 30 "jobs a and b run side by side" 'running_at "$b" 2'
wait_for 60 "job b ends" 'state_is "$b" SUCCEEDED'
wait_for 30 "job a grows when b ends" 'has_event "$a" resizing "dynamic: grow 2 -> 4"'
wait_for 30 "job a runs on 4 again" 'running_at "$a" 4'
ok "dynamic: a job shrinks when another arrives and grows back when it ends"

# Shrinks of job a made for room (an arrival ranked before it). Resizes the policy makes on
# its own (a size measured faster on this loaded machine) may come between, and do not count.
for_room() { events "$a" | jq '[.events[] | select(.type == "resizing" and (.message | contains("shrink")) and (.message | contains("need the room")))] | length'; }
n_shrinks=$(for_room)
c=$(submit "$(train c 2)")
[ "$n_shrinks" -ge 1 ] || { events "$a" | jq -r ".events[] | .type + \" \" + .message" >&2; fail "job a never shrank for room before job c arrived"; }
wait_for 30 "job a shrinks again for job c" '[ "$(for_room)" -gt "$n_shrinks" ]'
wait_for 120 "job a ends" 'state_is "$a" SUCCEEDED'
wait_for 60 "job c ends" 'state_is "$c" SUCCEEDED'
ok "dynamic: a new arrival shrinks the running job again; every job succeeds"

# Each resize: the reason, then the old attempt's end, then the new attempt at its size.
events "$a" >"$WORK/a.events"
jq -r '.events[] | .type' "$WORK/a.events" | tr '\n' ' ' >"$WORK/a.types"
grep -q "resizing resized starting started" "$WORK/a.types" ||
    { cat "$WORK/a.types"; fail "a resize is not stopping -> resized -> starting -> started"; }
jq -e '[.events[] | select(.type == "resizing")] | length >= 3 and
       all(.[]; .state == "STOPPING" and (.message | test("^dynamic: (grow|shrink) [0-9]+ -> [0-9]+ workers: ")))' \
    "$WORK/a.events" >/dev/null || { jq . "$WORK/a.events"; fail "resize events lack their reasons"; }
job "$a" >"$WORK/a.json"
jq -e '[.attempts[].world_size] | index(2) != null and index(4) != null' "$WORK/a.json" >/dev/null ||
    { cat "$WORK/a.json"; fail "job a's attempts do not show both sizes"; }
ok "events show each resize with its reason, then the attempt it ended and the one it started"

# The model: the same loss as an undisturbed run (the checkpoint does not depend on the
# world size, and the trainer scales its learning rate with it).
final=$(grep -h "final loss" "$(jq -r '.attempts[-1].run_dir' "$WORK/a.json")/rank.0/stdout" | awk '{print $3}')
ref=$(cd "$WORK" && "$RINGRUN" -np 4 "$TRAIN" --epochs 12 --quiet --fresh --checkpoint-dir "$WORK/ref" |
    awk '/final loss/ {print $3}')
[ -n "$final" ] && [ -n "$ref" ] || fail "no final loss (resized: '$final', undisturbed: '$ref')"
awk -v a="$final" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 0.01) }' ||
    fail "the resized job's final loss $final is not within 1% of the undisturbed $ref"
ok "the resized job ends with the undisturbed run's loss ($final vs $ref)"

# Sizes, speeds, restart overheads: in the API, ringctl and /metrics.
jq -e '[.scaling.history[].workers] == [.attempts[].world_size] and (.scaling.history | length >= 4) and
       .scaling.workers == 0' "$WORK/a.json" >/dev/null || { jq .scaling "$WORK/a.json"; fail "no size history"; }
# Observed where it ran (2 and 4 for sure; 1 too when a pass chose it); the model's
# prediction beside every size.
jq -e '.scaling.throughput | any(.[]; .workers == 2 and .observed_samples_per_s > 0) and
       any(.[]; .workers == 4 and .observed_samples_per_s > 0) and
       all(.[]; .predicted_samples_per_s > 0)' \
    "$WORK/a.json" >/dev/null || { jq .scaling "$WORK/a.json"; fail "throughput per size lacks observations or predictions"; }
jq -e '.scaling.restart_overhead_s | .restarts >= 3 and .stop > 0 and .start > 0 and .stop + .start < 10' \
    "$WORK/a.json" >/dev/null || { jq .scaling "$WORK/a.json"; fail "no restart overhead"; }
# Every restart that reported progress has its start overhead (start to first report; one
# stopped before its first report, as when a job arrives right after a resize on a slow
# machine, has none), and at least two do; every attempt that was asked to stop (all but
# the last, which ran to the end) has its stop overhead.
jq -e '([.attempts[1:][] | select(.start_overhead_s == null and .samples_per_s != null)] | length == 0) and
       ([.attempts[1:][] | .start_overhead_s | select(. != null)] | all(. > 0) and length >= 2) and
       ([.attempts[:-1][] | .stop_overhead_s] | all(. != null and . > 0)) and
       .attempts[-1].stop_overhead_s == null' "$WORK/a.json" >/dev/null ||
    { jq .attempts "$WORK/a.json"; fail "an attempt lacks its overheads"; }
expect_rc 0 "$RINGCTL" show "$a"
expect_in out "sizes so far:"
expect_in out "observed/s"
expect_in out "restarts   "
curl -s "$URL/metrics" >"$WORK/metrics"
grep -q '^ringd_attempt_stop_seconds_count [1-9]' "$WORK/metrics" || { cat "$WORK/metrics"; fail "no stop overhead histogram"; }
grep -q '^ringd_attempt_start_seconds_count [1-9]' "$WORK/metrics" || fail "no start overhead histogram"
grep -q '^ringd_resizes_total [3-9]' "$WORK/metrics" || fail "no resize counter"
ok "sizes, throughput per size (observed and predicted) and restart overheads in the API, ringctl and /metrics"

expect_rc 0 "$RINGCTL" policy
expect_in out "policy     dynamic"
# Only the active policy's settings: dynamic's restart cost and hysteresis, none of fifo's.
expect_in out "interval   2 s; restart cost 1 s, hysteresis 2"
expect_rc 0 "$RINGCTL" policy fifo
expect_in out "policy     fifo"
grep -q "hysteresis\|restart cost" "$WORK/out" && fail "ringctl shows dynamic's settings under fifo: $(cat "$WORK/out")"
expect_rc 0 "$RINGCTL" --json policy
jq -e '.settings == {}' "$WORK/out" >/dev/null || fail "fifo's settings: $(jq .settings "$WORK/out")"
expect_rc 1 "$RINGCTL" policy lottery
expect_in err "no policy 'lottery'"
expect_rc 0 "$RINGCTL" policy dynamic
jq -e '.settings == {"restart_cost_s": 1, "hysteresis": 2}' <(curl -s "$URL/v1/scheduler") \
    >/dev/null || fail "dynamic's settings in GET /v1/scheduler"
ok "ringctl policy shows and switches the policy, with only the active policy's settings"

# Cancel while a stop is under way: the program ignores SIGTERM, so the job stays STOPPING
# until the grace period's SIGKILL; the cancel given meanwhile decides how it ends.
d=$(submit '{"name":"stubborn","command":["/bin/sh","-c","trap \"\" TERM; sleep 60"]}')
wait_for 30 "the stubborn job runs" 'state_is "$d" RUNNING'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/jobs/$d/stop")
[ "$code" = 202 ] || fail "stop answered $code"
state_is "$d" STOPPING || fail "the job is $(job "$d" | jq -r .state), not STOPPING"
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "$URL/v1/jobs/$d/cancel")
[ "$code" = 202 ] || { cat "$WORK/c.json"; fail "cancel while stopping answered $code"; }
# A stop after the cancel is refused: the job is being cancelled; or, where the machine is
# slow enough (TSan) that the grace period's SIGKILL came first, it has ended CANCELLED.
code=$(curl -s -o "$WORK/c.json" -w '%{http_code}' -X POST "$URL/v1/jobs/$d/stop")
[ "$code" = 409 ] && jq -e '.type == "urn:ringmaster:problem:job-cancelling" or
    (.type == "urn:ringmaster:problem:job-finished" and (.detail | contains("already CANCELLED")))' \
    "$WORK/c.json" >/dev/null || { cat "$WORK/c.json"; fail "stop after cancel answered $code"; }
wait_for 30 "the job ends" 'job "$d" | jq -e ".state == \"CANCELLED\" or .state == \"STOPPED\"" >/dev/null'
state_is "$d" CANCELLED || fail "cancel while stopping ended $(job "$d" | jq -r .state), not CANCELLED"
ok "a cancel while the job is stopping wins: it ends CANCELLED"

ringd_stop
summary
