#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real ringd over HTTP with curl: submissions, listing, auth, idempotency, and every kind
# of bad input getting its RFC 9457 problem, plus the daemon's own start-up errors.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

DATA=$WORK/data

# call METHOD PATH [curl args...]: the status in $WORK/status, the body in $WORK/body
call() {
    local m=$1 p=$2 auth=()
    shift 2
    [ -n "$TOKEN" ] && auth=(-H "Authorization: Bearer $TOKEN")
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$m" "${auth[@]}" "$@" "http://$ADDR$p" \
        >"$WORK/status"
}
expect() { # expect STATUS [TYPE-KIND [DETAIL-TEXT]]
    [ "$(cat "$WORK/status")" = "$1" ] || { cat "$WORK/body"; fail "status $(cat "$WORK/status"), want $1"; }
    if [ -n "${2:-}" ]; then
        jq -e --arg t "urn:ringmaster:problem:$2" '.type == $t and .status != null and .title != null' \
            "$WORK/body" >/dev/null || { cat "$WORK/body"; fail "want problem type $2"; }
    fi
    if [ -n "${3:-}" ]; then
        grep -qF -- "$3" "$WORK/body" || { cat "$WORK/body"; fail "the problem lacks '$3'"; }
    fi
}
submit() { call POST /v1/jobs -H 'Content-Type: application/json' "$@"; }

ringd_start "$DATA"
TOKEN=$(cat "$DATA/admin.token")
[ "$(stat -c %a "$DATA/admin.token")" = 600 ] || fail "admin.token is not mode 0600"
grep -q "First start: created an admin token" "$WORK/ringd.log" || fail "the admin token was not shown"
ok "first start creates an admin token in a 0600 file and shows it once"

call GET /healthz; expect 200
call GET /readyz; expect 200
call GET /v1/openapi.json; expect 200
jq -e '.openapi == "3.1.0" and .paths["/v1/jobs"].post != null' "$WORK/body" >/dev/null || fail "bad OpenAPI document"
ok "health, readiness and the OpenAPI document"

submit -d '{"name":"train","command":["/bin/true","--x"],"workers":{"min":1,"max":2},"labels":{"team":"vision"}}'
expect 201
id=$(jq -r .id "$WORK/body")
jq -e '.state == "QUEUED" and .spec.workers.max == 2 and .spec.gpus_per_worker == 0' "$WORK/body" >/dev/null || fail "bad job"
call GET "/v1/jobs/$id"; expect 200
jq -e --arg id "$id" '.id == $id and (.checkpoint_dir | endswith($id))' "$WORK/body" >/dev/null || fail "GET returned another job"
ok "submit answers 201 with the job, and GET returns it"

submit -H 'Idempotency-Key: abc' -d '{"name":"once","command":["/bin/true"]}'; expect 201
first=$(jq -r .id "$WORK/body")
submit -H 'Idempotency-Key: abc' -d '{"name":"once","command":["/bin/true"]}'; expect 201
[ "$(jq -r .id "$WORK/body")" = "$first" ] || fail "a retry with the same Idempotency-Key made a new job"
submit -H 'Idempotency-Key: abc' -d '{"name":"other","command":["/bin/true"]}'
expect 422 idempotency-key-reused
ok "Idempotency-Key: a retry returns the same job; another body with the key is refused"

for i in 1 2 3 4 5; do submit -d "{\"name\":\"p$i\",\"command\":[\"/bin/true\"]}"; expect 201; done
call GET "/v1/jobs?page_size=3"; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 3 ] || fail "page_size ignored"
tok=$(jq -r .next_page_token "$WORK/body")
call GET "/v1/jobs?page_size=3&page_token=$tok"; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 3 ] || fail "second page"
call GET "/v1/jobs?page_size=100&label=team=vision"; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 1 ] || fail "label filter"
# The jobs (/bin/true) finish quickly; then the state filter sees all 7 as SUCCEEDED.
for _ in $(seq 100); do
    call GET "/v1/jobs?state=SUCCEEDED&page_size=1000"; expect 200
    [ "$(jq '.jobs | length' "$WORK/body")" = 7 ] && break
    sleep 0.1
done
jq -e '(.jobs | length) == 7 and all(.jobs[]; .state == "SUCCEEDED")' "$WORK/body" >/dev/null ||
    { cat "$WORK/body"; fail "state filter"; }
call GET "/v1/jobs?state=QUEUED"; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 0 ] || fail "state filter QUEUED"
ok "listing pages through every job and filters on state and label"

# Bad input: each gets its problem, naming what to fix.
submit -d '{"name": "x", "command": ["a"]'; expect 400 malformed-json "malformed JSON"
submit -d '{"name":"x","command":["a"],"name":"y"}'; expect 400 malformed-json "duplicate"
# A body that is JSON but not an object is not a request at all: 400 on every route, like
# JSON that does not parse; 422 is for an object whose fields are wrong.
submit -d '[1,2]'; expect 400 malformed-json "must be a JSON object (a JobSpec), not an array"
submit -d '"train"'; expect 400 malformed-json "malformed JSON"
call POST /v1/tokens -H 'Content-Type: application/json' -d '[1,2]'
expect 400 malformed-json "must be a JSON object, not an array"
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":'
expect 400 malformed-json "malformed JSON at line 1"
call PUT /v1/scheduler -H 'Content-Type: application/json' -d '["fifo"]'
expect 400 malformed-json "must be a JSON object, not an array"
submit -d '{"name":"x","command":"./train"}'; expect 422 validation-error "command must be an array"
submit -d '{"name":"x"}'; expect 422 validation-error "command is required"
submit -d '{"name":"x","command":[]}'; expect 422 validation-error "command must not be empty"
submit -d '{"name":"x","command":["a"],"gpu_per_worker":1}'; expect 422 validation-error "unknown field 'gpu_per_worker'"
jq -e '.errors[0].field == "gpu_per_worker"' "$WORK/body" >/dev/null || fail "no field path"
submit -d '{"name":"x","command":["a"],"workers":0}'; expect 422 validation-error "workers must be in [1"
submit -d '{"name":"x","command":["a"],"workers":-3}'; expect 422 validation-error "workers must be in [1"
submit -d '{"name":"x","command":["a"],"workers":{"min":3,"max":2}}'; expect 422 validation-error "workers.max must be >= workers.min"
submit -d '{"name":"x","command":["a"],"workers":999}'; expect 422 validation-error "but this cluster fits"
slots=$(nproc)
submit -d "{\"name\":\"x\",\"command\":[\"a\"],\"workers\":$slots,\"cpus_per_worker\":2}"
expect 422 validation-error "workers.min x cpus_per_worker"
submit -d '{"name":"x","command":["a"],"backend":"slurm"}'
expect 422 validation-error "the slurm backend is not configured"
jq -e '.errors[0].field == "backend"' "$WORK/body" >/dev/null || fail "the backend problem names no field"
submit -d '{"name":"x","command":["a"],"gpus_per_worker":1}'; expect 422 validation-error "GPUs"
submit -d '{"name":"x","command":["a"],"env":{"1BAD":"v"}}'; expect 422 validation-error "not a valid environment variable name"
submit -d '{"name":"x","command":["a"],"working_dir":"/no/such/dir"}'; expect 422 validation-error "does not exist"
submit -d '{"name":"x","command":["a"],"priority":"high"}'; expect 422 validation-error "priority must be an integer"
head -c 1100000 /dev/zero | tr '\0' ' ' >"$WORK/big.json"
submit --data-binary "@$WORK/big.json"; expect 413 body-too-large
call GET "/v1/jobs?page_size=0"; expect 400 bad-parameter "page_size"
call GET "/v1/jobs?page_size=5000"; expect 400 bad-parameter "page_size"
# Only plain digits: strtol alone would also take a sign and leading blanks.
for q in 'page_size=%205' 'page_size=+5' 'page_size=5%20' 'page_size=' 'page_size=0x5'; do
    call GET "/v1/jobs?$q"; expect 400 bad-parameter "page_size must be an integer"
done
# Only a token this server gave out (hex of a positive int64), never one that strtoll clamps.
for q in 'page_token=ffffffffffffffffffff' 'page_token=8000000000000000' 'page_token=+1' \
    'page_token=%201' 'page_token=0x1' 'page_token=-1' 'page_token='; do
    call GET "/v1/jobs?$q"; expect 400 bad-parameter "page_token"
done
call GET "/v1/jobs?page_token=7fffffffffffffff"; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 0 ] || fail "a page past the end is not empty"
call GET "/v1/jobs?state=DONE"; expect 400 bad-parameter "not a job state"
call GET "/v1/jobs/$id/logs?rank=-1"; expect 400 bad-parameter "rank"
call GET "/v1/jobs/$id/logs?follow=1&stream=bogus"; expect 400 bad-parameter "stream"
call GET "/v1/jobs/$id/events?after=x"; expect 400 bad-parameter "after must be an event id"
call GET "/v1/jobs/j-0000000000000000/events" -H 'Accept: text/event-stream'; expect 404 job-not-found
call GET /v1/jobs/j-0000000000000000; expect 404 job-not-found
# An id longer than any id can be (127 bytes) says so, on every route that takes one.
long=$(printf 'j%.0s' $(seq 128))
call GET "/v1/jobs/$long"; expect 400 bad-parameter "the id after /v1/jobs/ is 128 bytes long, but ids are at most 127"
call POST "/v1/jobs/$long/cancel"; expect 400 bad-parameter "ids are at most 127 (see GET /v1/jobs)"
call DELETE "/v1/tokens/$long"; expect 400 bad-parameter "the id after /v1/tokens/ is 128 bytes"
call PUT "/v1/jobs/$long"; expect 405 method-not-allowed
call GET "/v1/jobs/${long:1}"; expect 404 job-not-found
call DELETE /v1/jobs; expect 405 method-not-allowed
grep -qi '^allow: POST, GET' <(curl -s -i -X DELETE -H "Authorization: Bearer $TOKEN" "http://$ADDR/v1/jobs") || fail "405 without Allow"
call GET /v1/nothing; expect 404 not-found
ok "every bad input gets a problem+json with what to fix"

TOKEN=; call GET /v1/jobs; expect 401 unauthorized "Authorization"
TOKEN=ringd_000000000000_0000000000000000000000000000000000000000000000000000000000000000
call GET /v1/jobs; expect 401 unauthorized "unknown or revoked"
TOKEN=$(cat "$DATA/admin.token")
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"alice"}'; expect 201
ALICE=$(jq -r .token "$WORK/body")
TOKEN=$ALICE
call GET "/v1/jobs/$id"; expect 404 job-not-found
call GET /v1/jobs; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 0 ] || fail "alice sees other users' jobs"
submit -d '{"name":"mine","command":["/bin/true"]}'; expect 201
[ "$(jq -r .owner "$WORK/body")" = alice ] || fail "the job's owner is not alice"
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"mallory","admin":true}'; expect 403 forbidden
TOKEN=$(cat "$DATA/admin.token")
call GET /v1/jobs?page_size=1000; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 8 ] || fail "the admin does not see every job"
ok "tokens: 401 without or with a wrong one; users see only their own jobs; admins all"

# The scheduling policy: anyone reads it, admins switch it at runtime.
TOKEN=$ALICE
call GET /v1/scheduler; expect 200
jq -e '.policy == "fifo" and .backend == "local" and (.policies | index("dynamic") != null)' \
    "$WORK/body" >/dev/null || fail "GET /v1/scheduler: $(cat "$WORK/body")"
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":"dynamic"}'; expect 403 forbidden "only an admin"
TOKEN=$(cat "$DATA/admin.token")
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":"lottery"}'; expect 422 validation-error "no policy 'lottery'"
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":"dynamic","interval":5}'; expect 422 validation-error "unknown field 'interval'"
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":'; expect 400 malformed-json
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":"dynamic"}'; expect 200
jq -e '.policy == "dynamic"' "$WORK/body" >/dev/null || fail "PUT did not switch: $(cat "$WORK/body")"
call GET /v1/scheduler; expect 200
jq -e '.policy == "dynamic"' "$WORK/body" >/dev/null || fail "the switch did not stick"
call PUT /v1/scheduler -H "Content-Type: application/json" -d '{"policy":"fifo"}'; expect 200
call POST /v1/scheduler; expect 405 method-not-allowed
ok "GET /v1/scheduler for all; PUT switches the policy, for admins only, with clear errors"

ADMIN_ID=$(cut -d_ -f2 "$DATA/admin.token")
ALICE_ID=$(cut -d_ -f2 <<<"$ALICE")
call GET /v1/tokens; expect 200
jq -e --arg a "$ALICE_ID" --arg r "$ADMIN_ID" '(.tokens | length) == 2 and
    any(.tokens[]; .id == $a and .name == "alice" and .admin == false) and
    any(.tokens[]; .id == $r and .admin == true) and
    all(.tokens[]; has("token") or has("hash") | not)' "$WORK/body" >/dev/null ||
    fail "GET /v1/tokens: $(cat "$WORK/body")"
TOKEN=$ALICE
call GET /v1/tokens; expect 200
jq -e '[.tokens[].name] == ["alice"]' "$WORK/body" >/dev/null || fail "alice sees other tokens"
call DELETE "/v1/tokens/$ADMIN_ID"; expect 404 token-not-found
call GET /v1/jobs; expect 200 # still valid, and now remembered by the server
TOKEN=$(cat "$DATA/admin.token")
call DELETE "/v1/tokens/$ALICE_ID"; expect 200
jq -e '.revoked_at != null' "$WORK/body" >/dev/null || fail "no revoked_at after revoke"
call DELETE /v1/tokens/000000000000; expect 404 token-not-found
TOKEN=$ALICE
call GET /v1/jobs; expect 401 unauthorized "unknown or revoked"
TOKEN=$(cat "$DATA/admin.token")
ok "tokens: listed without secrets, users revoke only their own, a revoked token fails at once"

# Tokens may expire: expires_in seconds or an RFC 3339 expires_at; listed with the expiry;
# past it, 401 saying the token expired (also when the server had it remembered).
tok() { call POST /v1/tokens -H 'Content-Type: application/json' -d "$1"; }
tok '{"name":"dora","expires_in":0}'; expect 422 validation-error "expires_in must be an integer number of seconds"
tok '{"name":"dora","expires_in":"1h"}'; expect 422 validation-error "expires_in must be an integer"
tok '{"name":"dora","expires_in":99999999999}'; expect 422 validation-error "expires_in must be"
tok '{"name":"dora","expires_in":60,"expires_at":"2099-01-01T00:00:00Z"}'; expect 422 validation-error "not both"
for at in '2099-02-30T00:00:00Z' '2099-01-01 00:00:00Z' '2099-01-01T00:00:00' '2099-01-01T25:00:00Z' \
    '2099-01-01T00:00:00+1:00' 'tomorrow' '2099-01-01T00:00:00Zjunk'; do
    tok "{\"name\":\"dora\",\"expires_at\":\"$at\"}"; expect 422 validation-error "expires_at must be an RFC 3339 date-time"
done
tok '{"name":"dora","expires_at":"2001-01-01T00:00:00Z"}'; expect 422 validation-error "not in the future"
tok '{"name":"dora","expires_at":"2099-06-30T23:30:00.75-01:30"}'; expect 201
jq -e '.expires_at == "2099-07-01T01:00:00Z"' "$WORK/body" >/dev/null || fail "expires_at not in UTC: $(cat "$WORK/body")"
tok '{"name":"dora","expires_in":2}'; expect 201
DORA=$(jq -r .token "$WORK/body")
DORA_ID=$(jq -r .id "$WORK/body")
[ "$(jq -r .expires_at "$WORK/body")" \> "$(date -u +%Y-%m-%dT%H:%M:%SZ)" ] || fail "expires_at is not ahead: $(cat "$WORK/body")"
call GET /v1/tokens; expect 200
jq -e --arg d "$DORA_ID" '(.tokens[] | select(.id == $d) | .expires_at | test("^[0-9-]{10}T[0-9:]{8}Z$")) and
    (.tokens[] | select(.name == "admin") | has("expires_at") | not)' "$WORK/body" >/dev/null ||
    fail "the token list does not show the expiry: $(cat "$WORK/body")"
TOKEN=$DORA
call GET /v1/jobs; expect 200 # works, and is now remembered by the server's thread
wait_for 30 "dora's token to expire" 'call GET /v1/jobs; [ "$(cat "$WORK/status")" = 401 ]'
expect 401 token-expired "the bearer token $DORA_ID expired at "
TOKEN=$(cat "$DATA/admin.token")
ok "tokens may expire (expires_in, expires_at); listed with their expiry; then 401 token-expired"

# A token's name owns its jobs and tokens: a user token named as an admin token would see
# and cancel the admin's jobs and revoke the admin's token.
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"admin"}'
expect 409 token-name-taken "belongs to an admin token"
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"carol"}'; expect 201
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"carol","admin":true}'
expect 409 token-name-taken "belongs to a user token"
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"carol"}'; expect 201 # a second key
# The last live admin token cannot be revoked: nobody could create tokens any more.
call DELETE "/v1/tokens/$ADMIN_ID"; expect 409 last-admin-token "the last admin token"
call POST /v1/tokens -H 'Content-Type: application/json' -d '{"name":"ops","admin":true}'; expect 201
OPS=$(jq -r .token "$WORK/body")
call DELETE "/v1/tokens/$(cut -d_ -f2 <<<"$OPS")"; expect 200
call GET /v1/jobs; expect 200
ok "a user token may not take an admin's name (or the reverse); the last admin token stays"

# The daemon's own errors.
expect_rc 69 "$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA"
expect_in err "another ringd"
expect_rc 64 "$RINGD" --listen 0.0.0.0:0 --data-dir "$WORK/other" --no-auth
expect_in err "only allowed on a loopback address"
expect_rc 64 "$RINGD" --bogus
expect_in err "unknown option"
# A port out of range once wrapped around (99999 listened on 34463), and a service name was
# looked up: the port is a number in 0..65535.
for l in 127.0.0.1:99999 127.0.0.1:http 127.0.0.1:-1 127.0.0.1:; do
    expect_rc 64 "$RINGD" --listen "$l" --data-dir "$WORK/other"
    expect_in err "bad value '$l' for listen"
done
printf 'listen = 127.0.0.1:9\nslots = lots\n' >"$WORK/ringd.conf"
expect_rc 64 "$RINGD" --config "$WORK/ringd.conf"
expect_in err "ringd.conf:2: bad value 'lots' for slots"
printf 'policy = lottery\n' >"$WORK/ringd.conf"
expect_rc 64 "$RINGD" --config "$WORK/ringd.conf"
expect_in err "bad value 'lottery' for policy"
RINGD_BACKEND=lsf expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/other"
expect_in err "bad value 'lsf' for backend"
# slurm: without libslurm it is not a backend of this ringd; with it, it needs its directory
RINGD_BACKEND=slurm expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/other"
grep -qE "backend slurm needs slurm_work_dir \(--slurm-work-dir DIR\)|bad value 'slurm' for backend" "$WORK/err" ||
    { cat "$WORK/err"; fail "backend slurm without slurm_work_dir: no clear error"; }
printf 'listen = 127.0.0.1:9\nslots = 7\n' >"$WORK/ringd.conf"
expect_rc 0 env RINGD_GPUS=3 "$RINGD" --config "$WORK/ringd.conf" --data-dir /tmp/x --print-config
expect_in out "slots = 7"
expect_in out "gpus = 3"
expect_in out "data_dir = /tmp/x"
# A backend's and a policy's own settings (backend.h, policy.h): read from the file, the
# environment and flags like ringd's, printed, and checked by their owner at start.
printf 'hysteresis = 3\njob_limits = nofile=64\n' >"$WORK/ringd.conf"
expect_rc 0 env RINGD_ISOLATION=none "$RINGD" --config "$WORK/ringd.conf" --print-config
expect_in out "isolation = none"
expect_in out "job_limits = nofile=64"
expect_in out "hysteresis = 3"
expect_rc 64 "$RINGD" --isolation sometimes --listen 127.0.0.1:0 --data-dir "$WORK/other"
expect_in err "bad value 'sometimes' for isolation"
printf 'hysteresis = lots\n' >"$WORK/ringd.conf"
expect_rc 64 "$RINGD" --config "$WORK/ringd.conf"
expect_in err "ringd.conf:1: bad value 'lots' for hysteresis"
printf 'slurm_qoz = normal\n' >"$WORK/ringd.conf"
expect_rc 64 "$RINGD" --config "$WORK/ringd.conf"
expect_in err "ringd.conf:1: unknown setting 'slurm_qoz'"
ok "a second daemon on the data directory, --no-auth off loopback and bad config are refused"

# Everything above ran in one daemon: it stops cleanly (under ASan: without a leak).
ringd_stop
! grep -q "Sanitizer" "$WORK/ringd.log" || fail "a sanitizer report in ringd.log"
ringd_start "$DATA"

# Durability: kill -9, restart, everything acknowledged is still there.
ringd_crash
ringd_start "$DATA"
call GET "/v1/jobs/$id"; expect 200
call GET /v1/jobs?page_size=1000; expect 200
[ "$(jq '.jobs | length' "$WORK/body")" = 8 ] || fail "jobs were lost across kill -9"
ok "after kill -9 and a restart every acknowledged job is there"

ringd_stop
grep -qE '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z level=info msg="stopped"$' "$WORK/ringd.log" || fail "no graceful stop"
# Every line of ringd's log is dated, the access log's too (common/log.h).
grep -qE '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z level=info msg=request method="GET" path="/v1/jobs" status=200 owner="[^"]*"$' \
    "$WORK/ringd.log" || fail "no dated access log line"
! grep -vE '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z level=(info|warning|error) ' "$WORK/ringd.log" | grep -q '^level=' ||
    fail "an undated line in ringd's log: $(grep '^level=' "$WORK/ringd.log" | head -1)"
ok "SIGTERM stops ringd gracefully"
summary
