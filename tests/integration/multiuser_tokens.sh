#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A job belongs to the person behind a token, not to the token's name. With ringd as root
# and two real Unix users made by this test:
# - a name live for one user cannot be given to the other (409, saying what to do);
# - a name whose tokens were all revoked, given out again (to the other user), is someone
#   new: it cannot see, list, read the logs or events of, cancel, stop, resume or delete
#   the old owner's jobs, nor see their environment;
# - a second key for the same user (a rotation) keeps the jobs; admins see everything.
# Needs root (ringd as root, users made with useradd); in CI it must not skip.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

[ "$(id -u)" -eq 0 ] || skip "needs root (runs ringd as root and jobs as users it creates)"
command -v useradd >/dev/null || skip "needs useradd"

# Two users of our own, gone at the end. The names are this run's: a test that died before
# its cleanup leaves nothing a later run trips over.
U1=ringmu1$$
U2=ringmu2$$
SHARED=$(mktemp -d /tmp/ringmu.XXXXXX)
cleanup() {
    lib_exit
    # A failed run leaves its jobs running as the users (ringd was killed, not its jobs):
    # they are this test's, and userdel refuses a user with processes.
    for u in "$U1" "$U2"; do
        pkill -KILL -u "$u" 2>/dev/null || true
        for _ in $(seq 50); do pgrep -u "$u" >/dev/null || break; sleep 0.1; done
        userdel "$u" 2>/dev/null || true
    done
    rm -rf "$SHARED"
}
trap cleanup EXIT
for u in "$U1" "$U2"; do
    useradd --system --no-create-home --shell /usr/sbin/nologin "$u" || fail "useradd $u"
done
# Everything the users' jobs run must be reachable by them; the build tree may not be.
chmod 0755 "$SHARED" "$WORK"
cp "$RINGRUN" "$SHARED/ringrun"
export RINGD_RINGRUN="$SHARED/ringrun"
unset RINGD_DEFAULT_USER # every token names its user

# api TOKEN METHOD PATH [BODY]: the status in $WORK/status, the body in $WORK/body
api() {
    local args=(-s -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
    [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    curl "${args[@]}" "$URL$3" >"$WORK/status"
}
want() { # want STATUS [PROBLEM-KIND]: the last api call answered so
    [ "$(cat "$WORK/status")" = "$1" ] || { cat "$WORK/body" >&2; fail "got $(cat "$WORK/status"), want $1"; }
    [ -z "${2:-}" ] || jq -e --arg t "urn:ringmaster:problem:$2" '.type == $t' "$WORK/body" >/dev/null ||
        { cat "$WORK/body" >&2; fail "want problem $2"; }
}
# wait_state TOKEN JOB STATE...: until the job is in one of the states
wait_state() {
    local tok=$1 job=$2
    shift 2
    want_states=" $* "
    wait_for 60 "job $job to be $*" \
        'api "$tok" GET "/v1/jobs/$job"; [[ "$want_states" == *" $(jq -r .state "$WORK/body") "* ]]'
}
token() { # token NAME USER: creates it (201) and prints the secret
    api "$ADMIN" POST /v1/tokens "{\"name\":\"$1\",\"user\":\"$2\"}"
    want 201
    jq -r .token "$WORK/body"
}
token_id() { cut -d_ -f2 <<<"$1"; }

DATA="$WORK/data"
ringd_start "$DATA"
ADMIN=$(cat "$DATA/admin.token")

# ---- one name, two Unix users -------------------------------------------------------------
A1=$(token alice "$U1")
api "$ADMIN" POST /v1/tokens "{\"name\":\"alice\",\"user\":\"$U2\"}"
want 409 token-name-taken
grep -q "Unix user '$U1'" "$WORK/body" && grep -q "revoke" "$WORK/body" ||
    fail "the refusal does not say whose the name is and what to do: $(cat "$WORK/body")"
ok "a name live for one Unix user is refused for another (409 token-name-taken, what to do)"

# alice ($U1): one job that finished with a secret in its environment and output, one that
# runs, and one stopped.
SECRET=s3cr3t-$$-$RANDOM
api "$A1" POST /v1/jobs "{\"name\":\"done\",\"command\":[\"/bin/sh\",\"-c\",\"id -un; echo \$SECRET\"],\"env\":{\"SECRET\":\"$SECRET\"}}"
want 201
DONE=$(jq -r .id "$WORK/body")
api "$A1" POST /v1/jobs '{"name":"long","command":["/bin/sleep","300"]}'
want 201
LONG=$(jq -r .id "$WORK/body")
api "$A1" POST /v1/jobs '{"name":"paused","command":["/bin/sleep","300"]}'
want 201
PAUSED=$(jq -r .id "$WORK/body")
P1=$(jq -r .owner_id "$WORK/body")
wait_state "$A1" "$DONE" SUCCEEDED FAILED
[ "$(jq -r .state "$WORK/body")" = SUCCEEDED ] || fail "alice's job failed: $(cat "$WORK/body")"
api "$A1" GET "/v1/jobs/$DONE/logs"
want 200
grep -qx "$U1" "$WORK/body" || fail "alice's job did not run as $U1: $(cat "$WORK/body")"
wait_state "$A1" "$LONG" RUNNING
wait_state "$A1" "$PAUSED" RUNNING
api "$A1" POST "/v1/jobs/$PAUSED/stop"
want 202
wait_state "$A1" "$PAUSED" STOPPED
ok "alice ($U1) has a finished job with a secret, a running one and a stopped one"

# ---- rotation: a second key for the same user keeps the jobs -------------------------------
A1B=$(token alice "$U1")
api "$A1B" GET /v1/jobs
want 200
[ "$(jq '.jobs | length' "$WORK/body")" = 3 ] || fail "alice's second key does not see her jobs"
api "$ADMIN" DELETE "/v1/tokens/$(token_id "$A1")"
want 200
api "$A1B" GET "/v1/jobs/$DONE"
want 200
ok "a second key for the same Unix user sees the same jobs, also once the first is revoked"

# ---- the name given out again ---------------------------------------------------------------
api "$ADMIN" DELETE "/v1/tokens/$(token_id "$A1B")"
want 200
A2=$(token alice "$U2")
api "$A2" GET /v1/tokens
[ "$(jq '.tokens | length' "$WORK/body")" = 1 ] || fail "the new alice sees the old alice's tokens: $(cat "$WORK/body")"
api "$A2" GET /v1/jobs
want 200
[ "$(jq '.jobs | length' "$WORK/body")" = 0 ] || fail "the new alice lists the old alice's jobs: $(cat "$WORK/body")"
api "$A2" GET "/v1/jobs?owner=alice"
[ "$(jq '.jobs | length' "$WORK/body")" = 0 ] || fail "the new alice lists the old alice's jobs by name"
for path in "$DONE" "$DONE/logs" "$DONE/logs?follow=1" "$DONE/logs?stream=launcher" "$DONE/events"; do
    api "$A2" GET "/v1/jobs/$path"
    want 404 job-not-found
    grep -q "$SECRET" "$WORK/body" && fail "GET $path leaked the old alice's secret"
done
code=$(curl -s -o "$WORK/body" -w '%{http_code}' -m 10 -H "Authorization: Bearer $A2" \
    -H 'Accept: text/event-stream' "$URL/v1/jobs/$DONE/events")
[ "$code" = 404 ] || fail "the event stream of the old alice's job answered $code"
ok "the name given out again (to $U2) cannot see, list, or read the logs, events or env of the old jobs"
for action in cancel stop; do
    api "$A2" POST "/v1/jobs/$LONG/$action"
    want 404 job-not-found
done
api "$A2" POST "/v1/jobs/$PAUSED/resume"
want 404 job-not-found
api "$A2" DELETE "/v1/jobs/$DONE"
want 404 job-not-found
api "$ADMIN" GET "/v1/jobs/$LONG"
[ "$(jq -r .state "$WORK/body")" = RUNNING ] || fail "the old alice's job was touched: $(cat "$WORK/body")"
api "$ADMIN" GET "/v1/jobs/$PAUSED"
[ "$(jq -r .state "$WORK/body")" = STOPPED ] || fail "the old alice's stopped job was resumed"
api "$ADMIN" GET "/v1/jobs/$DONE"
want 200
ok "nor cancel, stop, resume or delete them"

# The new alice's own job runs as $U2, and the old alice's jobs stay out of its reach.
api "$A2" POST /v1/jobs '{"name":"mine","command":["/usr/bin/id","-un"]}'
want 201
MINE=$(jq -r .id "$WORK/body")
P2=$(jq -r .owner_id "$WORK/body")
[ "$P2" != "$P1" ] || fail "the new alice got the old alice's principal ($P1)"
wait_state "$A2" "$MINE" SUCCEEDED FAILED
api "$A2" GET "/v1/jobs/$MINE/logs"
grep -qx "$U2" "$WORK/body" || fail "the new alice's job did not run as $U2: $(cat "$WORK/body")"
api "$A2" GET /v1/jobs
[ "$(jq -r '[.jobs[].id] | join(" ")' "$WORK/body")" = "$MINE" ] || fail "the new alice lists: $(cat "$WORK/body")"
# and the name is now hers: the old user cannot take it back
api "$ADMIN" POST /v1/tokens "{\"name\":\"alice\",\"user\":\"$U1\"}"
want 409 token-name-taken
ok "the new alice ($U2, principal $P2) has her own jobs only, and the old user cannot take the name back"

# ---- admins see every principal's jobs, by name or by id -----------------------------------
api "$ADMIN" GET "/v1/jobs?owner=alice"
[ "$(jq '.jobs | length' "$WORK/body")" = 4 ] || fail "admin by name: $(cat "$WORK/body")"
api "$ADMIN" GET "/v1/jobs?owner_id=$P1"
[ "$(jq -r '[.jobs[].owner_id] | unique | join(" ")' "$WORK/body")" = "$P1" ] &&
    [ "$(jq '.jobs | length' "$WORK/body")" = 3 ] || fail "admin by owner_id: $(cat "$WORK/body")"
api "$ADMIN" POST "/v1/jobs/$LONG/cancel"
want 202
api "$ADMIN" POST "/v1/jobs/$PAUSED/cancel"
want 202
wait_state "$ADMIN" "$LONG" CANCELLED
ok "admins see both alices' jobs (owner=alice, owner_id=N) and may cancel them"

# ---- the same holds across a restart (the principals are in the database) ------------------
ringd_stop
ringd_start "$DATA"
api "$A2" GET "/v1/jobs/$DONE"
want 404 job-not-found
api "$A2" GET "/v1/jobs/$MINE"
want 200
ok "after a restart, still so"
ringd_stop

summary
