#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GET /v1/events through a real ringd with auth: one stream of every job a token may see (an
# admin's: all; a user's: their own), opening with its position, resumed after Last-Event-ID,
# counted against streams_per_token (429 past it), ended when its token is revoked; its JSON
# pages; and the dashboard's other reads: GET /v1/jobs?order=newest and GET
# /v1/cluster/usage.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

cat >"$WORK/ringd.conf" <<EOF
slots = 2
streams_per_token = 3
EOF
ringd_start "$WORK/data" --config "$WORK/ringd.conf"
ADMIN=$(cat "$WORK/data/admin.token")
streams=()
on_exit() {
    local rc=$?
    for p in "${streams[@]}"; do kill "$p" 2>/dev/null || true; done
    [ "$rc" = 0 ] || tail -20 "$WORK/ringd.log" >&2 || true
    lib_exit
}
trap on_exit EXIT

# api TOKEN METHOD PATH [BODY]: the body in $WORK/body, the status printed.
api() {
    local args=(-s -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
    [ -z "${4:-}" ] || args+=(-H 'Content-Type: application/json' -d "$4")
    curl "${args[@]}" "$URL$3"
}
# stream NAME TOKEN [curl args...]: follows GET /v1/events into $WORK/NAME.sse.
stream() {
    local name=$1 tok=$2
    shift 2
    curl -sN -H "Authorization: Bearer $tok" -H 'Accept: text/event-stream' "$@" \
        "$URL/v1/events" >"$WORK/$name.sse" 2>&1 &
    streams+=($!)
}
submit() { # submit TOKEN NAME: a short job; its id
    [ "$(api "$1" POST /v1/jobs "{\"name\":\"$2\",\"command\":[\"/bin/sleep\",\"0.3\"]}")" = 201 ] ||
        { cat "$WORK/body"; fail "cannot submit $2"; }
    jq -r .id "$WORK/body"
}
ids() { sed -n 's/^data: .*"job_id":"\([^"]*\)".*/\1/p' "$WORK/$1.sse" | sort -u | tr '\n' ' '; }

me=$(id -un)
[ "$(api "$ADMIN" POST /v1/tokens "{\"name\":\"alice\",\"user\":\"$me\"}")" = 201 ] || fail "token: $(cat "$WORK/body")"
ALICE=$(jq -r .token "$WORK/body")
[ "$(api "$ADMIN" POST /v1/tokens "{\"name\":\"bob\",\"user\":\"$me\"}")" = 201 ] || fail "token: $(cat "$WORK/body")"
BOB=$(jq -r .token "$WORK/body")
BOB_ID=$(jq -r .id "$WORK/body")

old=$(submit "$ALICE" before) # before the streams: not in them, which start at the newest
wait_for 30 "the job before the streams ends" \
    '[ "$(api "$ADMIN" GET /v1/jobs/$old >/dev/null; jq -r .state "$WORK/body")" = SUCCEEDED ]'
stream admin "$ADMIN"
stream alice "$ALICE"
stream bob "$BOB"
wait_for 10 "the streams to open" 'grep -q "^id: " "$WORK/admin.sse" && grep -q "^id: " "$WORK/alice.sse" && grep -q "^id: " "$WORK/bob.sse"'
start=$(sed -n '1s/^id: //p' "$WORK/alice.sse")
[ "$start" -ge 4 ] || fail "alice's stream does not open at the newest event: $(head -2 "$WORK/alice.sse")"
a=$(submit "$ALICE" mine)
b=$(submit "$BOB" theirs)
wait_for 30 "alice's job's end in her stream" 'grep -q "event: succeeded" "$WORK/alice.sse"'
wait_for 30 "both jobs' ends in the admin's stream" '[ "$(grep -c "event: succeeded" "$WORK/admin.sse")" = 2 ]'
[ "$(ids alice)" = "$a " ] || fail "alice's stream has jobs '$(ids alice)', want only '$a'"
[ "$(ids bob)" = "$b " ] || fail "bob's stream has jobs '$(ids bob)', want only '$b'"
[ "$(ids admin)" = "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')" ] || fail "the admin's stream has '$(ids admin)'"
grep -q "$old" "$WORK/admin.sse" && fail "a stream without Last-Event-ID replayed the history"
for e in submitted starting started succeeded; do
    grep -q "^event: $e$" "$WORK/alice.sse" || { cat "$WORK/alice.sse"; fail "alice's stream lacks $e"; }
done
ok "one stream of every job a token may see: the admin's all, each user's their own, from the newest event on"

# Resuming: after Last-Event-ID, exactly the events that followed it.
first=$(sed -n 's/^id: \([0-9]*\)$/\1/p' "$WORK/alice.sse" | sed -n 2p) # her job's submitted
curl -sN --max-time 2 -H "Authorization: Bearer $ALICE" -H 'Accept: text/event-stream' \
    -H "Last-Event-ID: $first" "$URL/v1/events" >"$WORK/resumed.sse" || true
want=$(sed -n 's/^id: \([0-9]*\)$/\1/p' "$WORK/alice.sse" | awk -v f="$first" '$1 > f' | tr '\n' ' ')
got=$(sed -n '2,$s/^id: \([0-9]*\)$/\1/p' "$WORK/resumed.sse" | tr '\n' ' ')
[ "$(sed -n 1p "$WORK/resumed.sse")" = "id: $first" ] && [ -n "$want" ] && [ "$got" = "$want" ] ||
    { cat "$WORK/resumed.sse"; fail "resumed after $first: ids '$got', want '$want'"; }
ok "a stream resumes after Last-Event-ID with exactly the events that followed"

# JSON pages: the same scoping, and where to go on from.
[ "$(api "$ALICE" GET "/v1/events?after=0&limit=1000")" = 200 ] || fail "events page: $(cat "$WORK/body")"
jq -e --arg a "$a" --arg o "$old" '[.events[].job_id] | unique == ([$a, $o] | sort)' "$WORK/body" >/dev/null ||
    { cat "$WORK/body"; fail "alice's page has other jobs"; }
jq -e '.next_after >= (.events[-1].id)' "$WORK/body" >/dev/null || fail "no next_after: $(cat "$WORK/body")"
[ "$(api "$ADMIN" GET "/v1/events?after=0&limit=2")" = 200 ] && jq -e '(.events | length) == 2 and .next_after == .events[1].id' "$WORK/body" >/dev/null ||
    fail "a full page does not go on from its last event: $(cat "$WORK/body")"
[ "$(api "$ALICE" GET "/v1/events?limit=0")" = 400 ] && jq -e '.type == "urn:ringmaster:problem:bad-parameter"' "$WORK/body" >/dev/null ||
    fail "limit=0 is not refused: $(cat "$WORK/body")"
ok "JSON pages of every job's events: scoped alike, with next_after; bad parameters get 400"

# The token's share: alice holds one stream; two more fit, the fourth gets 429. The resumed
# stream above has ended on the client's side; ringd gives its place back once it sees the
# client gone (within SSE_POLL_MS, 250 ms, of idle), so a stream refused meanwhile is opened
# again rather than failing the test.
stream alice2 "$ALICE"
stream alice3 "$ALICE"
opened() {
    local n
    for n in alice2 alice3; do
        grep -q too-many-streams "$WORK/$n.sse" && { sleep 0.2; stream "$n" "$ALICE"; }
    done
    grep -q "^id: " "$WORK/alice2.sse" && grep -q "^id: " "$WORK/alice3.sse"
}
wait_for 30 "alice's other streams to open" opened
code=$(curl -s -D "$WORK/h429" -o "$WORK/body" -w '%{http_code}' -H "Authorization: Bearer $ALICE" \
    -H 'Accept: text/event-stream' "$URL/v1/events")
[ "$code" = 429 ] && grep -qi '^retry-after: ' "$WORK/h429" &&
    jq -e '.type == "urn:ringmaster:problem:too-many-streams"' "$WORK/body" >/dev/null ||
    fail "a fourth stream of alice's got $code: $(cat "$WORK/body")"
ok "GET /v1/events counts against streams_per_token: 429 with Retry-After past it"

# Revoking bob's token ends his stream at once, with the problem as its last event.
[ "$(api "$ADMIN" DELETE "/v1/tokens/$BOB_ID")" = 200 ] || fail "revoke: $(cat "$WORK/body")"
wait_for 10 "bob's stream to end with unauthorized" 'grep -q "^event: unauthorized" "$WORK/bob.sse"'
ok "a revoked token's stream ends with an unauthorized event"

# Newest first, and the cluster's usage over the last minute (the jobs above ran in it).
[ "$(api "$ADMIN" GET "/v1/jobs?order=newest&page_size=1")" = 200 ] || fail "order=newest: $(cat "$WORK/body")"
[ "$(jq -r '.jobs[0].id' "$WORK/body")" = "$b" ] || fail "the newest job is not first: $(cat "$WORK/body")"
[ "$(api "$ALICE" GET "/v1/cluster/usage?window=120")" = 200 ] || fail "usage: $(cat "$WORK/body")"
jq -e '.window_s == 120 and .capacity.slots == 2 and (.points | length >= 3) and
       ([.points[].workers] | max >= 1) and .points[-1].workers == 0' "$WORK/body" >/dev/null ||
    { cat "$WORK/body"; fail "the usage series does not show the jobs that ran"; }
ok "GET /v1/jobs?order=newest lists the newest first; GET /v1/cluster/usage shows what ran"

# SIGTERM with four streams of every job's events open: they end, ringd exits 0 (under
# AddressSanitizer: having freed every stream).
ringd_stop
ok "ringd stops cleanly with every-job streams open"
summary
