#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ringd against hostile input: a web page in the user's browser (no token, no-auth mode),
# an attacker with a token, and raw bytes that curl would never send (smuggling, NUL
# bytes, broken UTF-8, CR/LF for the log). Every refusal must be an RFC 9457 problem with
# a body, nothing may be silently cut, and the daemon must stay up and exit cleanly.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
RAW=$(dirname "$0")/rawhttp.py

export RINGD_SLOTS=1

# raw REQUEST-TEXT: sends it (escapes like \r\n, \x00 decoded), responses in $WORK/raw
raw() { printf '%s' "$1" | python3 "$RAW" "$ADDR" --wait "${2:-2}" >"$WORK/raw"; }
# raw_expect N STATUS KIND CLOSED: exactly N responses, the first STATUS with problem KIND
# (a problem+json body), and whether the connection was closed (true/false).
raw_expect() {
    local n
    n=$(grep -c '"status"' "$WORK/raw" || true)
    [ "$n" = "$1" ] || { cat "$WORK/raw" >&2; fail "$n responses, want $1"; }
    head -1 "$WORK/raw" | jq -e --argjson s "$2" --arg t "urn:ringmaster:problem:$3" \
        '.status == $s and .headers["content-type"] == "application/problem+json" and
         (.body | fromjson | .type == $t and .status == $s and (.detail | length) > 0)' \
        >/dev/null || { cat "$WORK/raw" >&2; fail "want $2 $3 as problem+json"; }
    tail -1 "$WORK/raw" | jq -e --argjson c "$4" '.closed == $c' >/dev/null ||
        { cat "$WORK/raw" >&2; fail "closed should be $4"; }
}
# http STATUS KIND CURL-ARGS...: one request through curl; checks status and problem type
http() {
    local want=$1 kind=$2 code
    shift 2
    code=$(curl -s -o "$WORK/body" -D "$WORK/headers" -w '%{http_code}' "$@")
    [ "$code" = "$want" ] || { cat "$WORK/body" >&2; fail "got $code, want $want: $*"; }
    if [ -n "$kind" ]; then
        grep -qi '^content-type: application/problem+json' "$WORK/headers" ||
            fail "no problem+json for $*"
        jq -e --arg t "urn:ringmaster:problem:$kind" '.type == $t' "$WORK/body" >/dev/null ||
            { cat "$WORK/body" >&2; fail "want problem $kind: $*"; }
    fi
}
J='Content-Type: application/json'

# ---- a web page, no token: ringd in no-auth mode on loopback ---------------------------------
DATA="$WORK/noauth"
mkdir -p "$DATA"
ringd_start "$DATA" --no-auth
SPEC='{"name":"x","command":["/bin/sleep","60"]}'
http 415 unsupported-media-type -H 'Content-Type: text/plain' -d "$SPEC" "$URL/v1/jobs"
http 415 unsupported-media-type -d "$SPEC" "$URL/v1/jobs" # curl's form encoding
http 415 unsupported-media-type -H 'Content-Type: multipart/form-data; boundary=x' -d "$SPEC" \
    "$URL/v1/jobs"
ok "bodies that a page can post without asking the browser (text, form, multipart): 415"
http 403 cross-origin -H "$J" -H 'Origin: http://evil.example' -d "$SPEC" "$URL/v1/jobs"
http 403 cross-origin -H "$J" -H 'Origin: null' -d "$SPEC" "$URL/v1/jobs"
http 403 cross-origin -H 'Origin: http://evil.example' "$URL/v1/jobs"
http 201 "" -H "$J" -H "Origin: http://$ADDR" -d "$SPEC" "$URL/v1/jobs"
HOLDER=$(jq -r .id "$WORK/body")
ok "a request from another origin is refused (403); the server's own origin is served"
http 421 wrong-host -H 'Host: evil.example' "$URL/v1/jobs"
http 200 "" -H "Host: localhost:${ADDR##*:}" "$URL/v1/jobs"
ok "no-auth answers only requests addressed to loopback (DNS rebinding: 421)"

# Request smuggling (RFC 9112 6.1 and 6.3): refused, the connection closed, and the request
# hidden behind the first one never served.
SMUGGLED='GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
raw "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$SMUGGLED"
raw_expect 1 400 bad-framing true
raw "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 41\r\n\r\n{}$SMUGGLED"
raw_expect 1 400 bad-framing true
raw "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: +2\r\n\r\n{}"
n=$(grep -c '"status": 400' "$WORK/raw" || true)
[ "$n" = 1 ] && grep -q '"closed": true' "$WORK/raw" || { cat "$WORK/raw" >&2; fail "Content-Length +2"; }
for te in 'gzip, chunked' 'chunked, identity' 'xchunked' 'identity'; do
    raw "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: $te\r\n\r\n0\r\n\r\n$SMUGGLED"
    raw_expect 1 501 unsupported-transfer-encoding true
done
ok "smuggling: CL+TE, two Content-Lengths, odd Transfer-Encodings refused and closed"

# A blank before the colon (RFC 9112 5.1) and obs-fold (5.2): libmicrohttpd keeps the blank
# in the name and appends a folded line to the name, so without the edge's check neither
# framing header is read as one and the body ({} then a request) became the next request.
# Each hidden request names a path of its own, which must never reach the access log.
P='POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
hidden() { printf 'GET /v1/jobs/smuggled-%s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' "$1"; }
n=0
for h in 'Content-Length : 47' 'Content-Length\t: 47' 'Content-Length  \t : 47' \
    'Transfer-Encoding : chunked\r\nContent-Length: 2' 'Content-Length: 2\r\nTransfer-Encoding\t: chunked' \
    'Content-Length : 2\r\nContent-Length: 47' 'X-Pad : a\r\nContent-Length: 2'; do
    n=$((n + 1))
    raw "$P$h\r\n\r\n{}$(hidden "ws$n")"
    raw_expect 1 400 bad-header true
done
for h in 'Transfer-Encoding:\r\n chunked\r\nContent-Length: 2' \
    'Content-Length: 2\r\nTransfer-Encoding:\r\n\tchunked' \
    'Transfer-Encoding: \r\n  chunked\r\nContent-Length: 2' \
    'Content-Length:\r\n 47' 'Content-Length: 4\r\n 7' 'Transfer-Encoding:\r\n chunked'; do
    n=$((n + 1))
    raw "$P$h\r\n\r\n{}$(hidden "fold$n")"
    raw_expect 1 400 bad-framing true
done
for h in 'Transfer-Encoding: chunked\r\n , identity\r\nContent-Length: 2' \
    'X-Pad: a\r\n b c\r\nContent-Length: 2' 'Content-Length: 2\r\n Transfer-Encoding: chunked'; do
    n=$((n + 1))
    raw "$P$h\r\n\r\n{}$(hidden "fold$n")"
    raw_expect 1 400 bad-header true
done
sleep 0.2 # the access log line of a served request is written as it is answered
grep -q 'smuggled-' "$WORK/ringd.log" && fail "a hidden request was served: $(grep smuggled- "$WORK/ringd.log")"
ok "smuggling: blanks before the colon and folded framing headers refused, closed, hidden requests unserved"

# NUL and broken UTF-8: refused, never cut. The job must survive the NUL-suffixed DELETE.
http 202 "" -X POST "$URL/v1/jobs/$HOLDER/cancel"
# Finished, so that a DELETE cut at the NUL would succeed: only then can the test fail.
wait_for 30 "the holder job to be cancelled" \
    '[ "$(curl -s "$URL/v1/jobs/$HOLDER" | jq -r .state)" = CANCELLED ]'
raw "DELETE /v1/jobs/$HOLDER%00.bak HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
raw_expect 1 400 bad-request-target true
http 200 "" "$URL/v1/jobs/$HOLDER"
raw "GET /v1/jobs?state=QUEUED%00x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
raw_expect 1 400 bad-request-target true
raw "GET /v1/jobs/j-%ff%fe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
raw_expect 1 400 bad-request-target true
raw "GET /v1/jobs?label=team%3D%c3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
raw_expect 1 400 bad-parameter true
raw "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: k\xff\xfe\r\nContent-Length: 2\r\n\r\n{}"
raw_expect 1 400 bad-header true
ok "NUL or invalid UTF-8 in an id, a query value or a header: 400 with a body, nothing cut"

# Log forging: CR/LF from the URL never reaches the log raw.
lines=$(wc -l <"$WORK/ringd.log")
raw "GET /v1/jobs/x%0d%0ats=0%20level=error%20msg=forged HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
raw "GET /v1/jobs/x?q=%0a%0dforged HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
wait_for 10 "both requests in the log" \
    '[ "$(tail -n +"$((lines + 1))" "$WORK/ringd.log" | grep -c "/v1/jobs/x")" -ge 2 ]'
tail -n +"$((lines + 1))" "$WORK/ringd.log" | grep -q '^ts=0 \|^forged' &&
    fail "a forged line reached the log: $(tail -n 3 "$WORK/ringd.log")"
tail -n +"$((lines + 1))" "$WORK/ringd.log" | grep -qF 'x%0d%0ats=0' || fail "the request was not logged"
ok "CR/LF in a URL is logged escaped, on the request's own line"

# Long non-ASCII keys: every error comes back (once, a cut mid-character dropped it: 201).
key=$(printf 'é%.0s' $(seq 130))
http 422 validation-error -H "$J" -d "{\"name\":\"x\",\"command\":[\"a\"],\"$key\":1}" "$URL/v1/jobs"
http 422 validation-error -H "$J" -d "{\"name\":\"x\",\"command\":[\"a\"],\"env\":{\"$key\":\"v\"}}" "$URL/v1/jobs"
http 422 validation-error -H "$J" -d "{\"name\":\"x\",\"command\":[\"a\"],\"labels\":{\"$key\":\"v\"}}" "$URL/v1/jobs"
ok "long non-ASCII field, env and label names are refused with their errors (422)"

# Sizes: ringd's own problems up to libmicrohttpd's memory; past it, libmicrohttpd closes.
long=$(printf 'a%.0s' $(seq 9000))
http 414 uri-too-long "$URL/v1/jobs/$long"
http 431 headers-too-large -H "X-Pad: $(printf 'b%.0s' $(seq 17000))" "$URL/healthz"
ok "a long target (414) and large headers (431) get problem+json"

# Stream parameters are checked like the plain ones (once, in the route).
http 400 bad-parameter -H 'Accept: text/event-stream' "$URL/v1/jobs/$HOLDER/events?after=abc"
http 400 bad-parameter -H 'Accept: text/event-stream' -H 'Last-Event-ID: 1x' "$URL/v1/jobs/$HOLDER/events"
for q in 'rank=abc' 'rank=1.5' 'rank=99999999999999999999' 'rank=-1' 'offset=-1' 'offset=1e3'; do
    http 400 bad-parameter "$URL/v1/jobs/$HOLDER/logs?follow=1&$q"
done
http 400 bad-parameter "$URL/v1/jobs/$HOLDER/logs?follow=yes"
http 404 job-not-found -H 'Accept: text/event-stream' "$URL/v1/jobs/j-nope/events"
ok "stream parameters: the same 400s as without streaming"

# A client that drops a live stream frees its connection at once, not after a keep-alive.
http 201 "" -H "$J" -d "$SPEC" "$URL/v1/jobs"
LIVE=$(jq -r .id "$WORK/body")
port=${ADDR##*:}
curl -sN -H 'Accept: text/event-stream' "$URL/v1/jobs/$LIVE/events" >/dev/null &
cpid=$!
wait_for 30 "the event stream to connect" \
    '[ "$(ss -Htn state established "( sport = :$port )" | wc -l)" -ge 1 ]'
kill $cpid
wait $cpid 2>/dev/null || true
for i in $(seq 40); do
    [ "$(ss -Htn state established "( sport = :$port )" | wc -l)" = 0 ] && break
    [ "$i" = 40 ] && fail "the dropped stream still holds its connection after 2 s"
    sleep 0.05
done
ok "a dropped event stream is noticed within 2 s"
http 202 "" -X POST "$URL/v1/jobs/$LIVE/cancel"

http 405 method-not-allowed -X POST "$URL/metrics"
grep -qi '^allow: GET' "$WORK/headers" || fail "405 without Allow"
ok "POST /metrics: 405 with Allow"

http 201 "" -H "$J" -d '{"name":"q","command":["/bin/true"],"labels":{"a\"b":"v\"w"}}' "$URL/v1/jobs"
http 200 "" -G --data-urlencode 'label=a"b=v"w' "$URL/v1/jobs"
[ "$(jq '.jobs | length' "$WORK/body")" = 1 ] || fail "a label with quotes was not found"
ok "a label filter with quotes finds its job"
ringd_stop

# ---- an attacker with a token ------------------------------------------------------------
DATA="$WORK/auth"
mkdir -p "$DATA"
ringd_start "$DATA"
ADMIN=$(cat "$DATA/admin.token")
A=(-H "Authorization: Bearer $ADMIN")
http 201 "" "${A[@]}" -H "$J" -d "{\"name\":\"eve\",\"user\":\"$(id -un)\"}" "$URL/v1/tokens"
EVE=(-H "Authorization: Bearer $(jq -r .token "$WORK/body")")
http 201 "" "${A[@]}" -H "$J" -d "$SPEC" "$URL/v1/jobs"
ADMINS=$(jq -r .id "$WORK/body")
http 404 job-not-found "${EVE[@]}" "$URL/v1/jobs/$ADMINS"
http 404 job-not-found "${EVE[@]}" -X POST "$URL/v1/jobs/$ADMINS/cancel"
http 404 job-not-found "${EVE[@]}" -X DELETE "$URL/v1/jobs/$ADMINS"
http 404 job-not-found "${EVE[@]}" "$URL/v1/jobs/$ADMINS/logs"
http 404 job-not-found "${EVE[@]}" -H 'Accept: text/event-stream' "$URL/v1/jobs/$ADMINS/events"
ok "another user's job is not found, whatever the verb or the stream"
http 403 forbidden "${EVE[@]}" -H "$J" -d '{"name":"eve2","admin":true}' "$URL/v1/tokens"
http 422 validation-error "${A[@]}" -H "$J" -d '{"name":"x","user":"root","sudo":1}' "$URL/v1/tokens"
http 404 "" "${EVE[@]}" "$URL/v1/jobs/..%2f..%2fadmin.token"
http 400 bad-parameter "${EVE[@]}" "$URL/v1/jobs?page_size=-1"
http 400 bad-parameter "${EVE[@]}" "$URL/v1/jobs?page_size=99999999999999999999"
http 422 validation-error "${EVE[@]}" -H "$J" \
    -d "{\"name\":\"x\",\"command\":[\"a\"],\"checkpoint_dir\":\"$DATA/checkpoints\"}" "$URL/v1/jobs"
http 422 validation-error "${EVE[@]}" -H "$J" \
    -d "{\"name\":\"x\",\"command\":[\"a\"],\"working_dir\":\"$DATA\"}" "$URL/v1/jobs"
ok "no admin tokens, no traversal, no bad paging, no job directories inside the data dir"
http 401 unauthorized -H 'Authorization: Bearer ringd_000000000000_0000' "$URL/v1/jobs"
http 401 unauthorized -H "Authorization: Basic $(printf 'admin:x' | base64)" "$URL/v1/jobs"
http 401 unauthorized "$URL/v1/jobs?token=$ADMIN"
ok "only a bearer header authorizes: not a forged token, Basic, or a query parameter"
ringd_stop

# ---- shutdown under load: SIGTERM while keep-alive clients submit (ASan watches) ---------
for round in 1 2 3; do
    DATA="$WORK/load$round"
    mkdir -p "$DATA"
    ringd_start "$DATA" --no-auth
    pids=()
    for c in $(seq 16); do
        (
            while :; do
                curl -s -o /dev/null -o /dev/null -o /dev/null --max-time 2 -H "$J" \
                    -d '{"name":"l","command":["/bin/true"]}' "$URL/v1/jobs" "$URL/v1/jobs" \
                    "$URL/v1/jobs" || exit 0
            done
        ) &
        pids+=($!)
    done
    # SIGTERM once the submitters are under way (48 accepted), whatever the machine's speed.
    wait_for 60 "the submitters to get going" \
        '[ "$(curl -s "$URL/metrics" | sed -n "s/^ringd_submissions_total //p")" -ge 48 ]'
    ringd_stop
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
done
ok "SIGTERM with 16 keep-alive submitters: a clean exit, three times"

summary
