#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# One user must not be able to take the service down. A token holder whose jobs run as a
# Unix user of their own (created here) attacks ringd's memory and threads:
#  - its job rewrites a 100 MB progress.json over and over, which the scheduler thread read
#    and parsed whole at every rewrite: every route, cancel, stop, resume, /v1/cluster and
#    /v1/scheduler included, must still answer within a second, and the file is ignored
#    with one event;
#  - its job makes its log a sparse 10 GiB file, which the log route read whole into
#    memory: ringd answers it as a stream, and its memory stays flat;
#  - it opens streams until it holds every connection: one token gets streams_per_token,
#    then 429, and another token still gets its own;
#  - its streams outlived its token: once the token is revoked, or expires, they end.
# ringd runs with a bounded address space (outside sanitizer builds), so that the old
# whole-log read failed there instead of taking the machine's memory.
# Needs root (creates a Unix user, runs ringd as root); in CI it must not skip.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

[ "$(id -u)" -eq 0 ] || skip "needs root (creates a Unix user and runs ringd as root)"
for b in useradd userdel prlimit ss; do
    command -v "$b" >/dev/null || skip "$b is not installed"
done

# Everything a job of the new user runs must be reachable by it; the build tree may not be.
SHARED=$(mktemp -d /tmp/ringmu.XXXXXX)
chmod 0755 "$SHARED" "$WORK"
cp "$RINGRUN" "$SHARED/ringrun"
MALLORY=ringmu$$
useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$MALLORY" ||
    fail "cannot create the Unix user $MALLORY"
cleanup() {
    local p
    for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
    lib_exit
    pkill -9 -u "$MALLORY" 2>/dev/null || true
    userdel "$MALLORY" 2>/dev/null || true
    rm -rf "$SHARED"
}
trap cleanup EXIT

export RINGD_RINGRUN="$SHARED/ringrun" RINGD_SLOTS=4 RINGD_STREAMS_PER_TOKEN=8
DATA=$WORK/data
ringd_start "$DATA"
# A sanitizer reserves terabytes of address space; elsewhere 4 GiB is far more than ringd
# needs, and far less than a 10 GiB log.
case $(ldd "$RINGD") in
*libasan* | *libtsan*) ;;
*) prlimit --pid "$ringd_pid" --as=$((4 << 30)) || fail "cannot bound ringd's address space" ;;
esac
ADMIN=$(cat "$DATA/admin.token")

# api TOKEN METHOD PATH [BODY]: the status in $WORK/status, the body in $WORK/body
api() {
    local args=(-s -m 10 -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
    [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    curl "${args[@]}" "$URL$3" >"$WORK/status" || true
}
want() { # want STATUS...: the last api call answered one of them
    local s
    s=$(cat "$WORK/status")
    for w in "$@"; do [ "$s" = "$w" ] && return 0; done
    cat "$WORK/body" >&2
    fail "got $s, want $*"
}
# quick TOKEN METHOD PATH [BODY] -- STATUS...: answered within a second, with one of STATUS
quick() {
    local tok=$1 m=$2 p=$3 body= t s
    shift 3
    if [ "$1" != -- ]; then body=$1; shift; fi
    shift
    local args=(-s -m 5 -o "$WORK/body" -w '%{http_code} %{time_total}' -X "$m"
        -H "Authorization: Bearer $tok")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
    read -r s t <<<"$(curl "${args[@]}" "$URL$p" || true)"
    awk -v t="$t" 'BEGIN { exit !(t < 1.0) }' ||
        fail "$m $p took $t s (status $s) while a job rewrites a 100 MB progress.json"
    for w in "$@"; do [ "$s" = "$w" ] && return 0; done
    cat "$WORK/body" >&2
    fail "$m $p answered $s, want $*"
}
wait_state() { # wait_state TOKEN JOB STATE...
    local tok=$1 job=$2 s
    shift 2
    for _ in $(seq 300); do
        api "$tok" GET "/v1/jobs/$job"
        s=$(jq -r .state "$WORK/body")
        for w in "$@"; do [ "$s" = "$w" ] && return 0; done
        sleep 0.1
    done
    fail "job $job stayed $s, want $*"
}
submit() { # submit TOKEN SCRIPT: a one-rank job running sh -c SCRIPT; its id
    api "$1" POST /v1/jobs "$(jq -cn --arg s "$2" '{name:"mu",command:["/bin/sh","-c",$s]}')"
    want 201
    jq -r .id "$WORK/body"
}
hwm_kib() { sed -n 's/^VmHWM:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$ringd_pid/status"; }
established() { ss -Htn state established "( sport = :${ADDR##*:} )" | wc -l; }

api "$ADMIN" POST /v1/tokens "{\"name\":\"mallory\",\"user\":\"$MALLORY\"}"
want 201
MAL=$(jq -r .token "$WORK/body")
MAL_ID=$(jq -r .id "$WORK/body")

# ---- the scheduler thread: a 100 MB progress.json, rewritten all the time ------------------
# A victim's job that stops cleanly (exit 75 on SIGTERM), and one to delete.
VICTIM=$(submit "$ADMIN" 'trap "exit 75" TERM; sleep 600 & wait')
wait_state "$ADMIN" "$VICTIM" RUNNING
DONE=$(submit "$ADMIN" 'true')
wait_state "$ADMIN" "$DONE" SUCCEEDED
# 50 million numbers in an array: read whole, it took seconds and gigabytes to parse.
read -r -d '' BIG <<'EOF' || true
p="$RING_RUN_DIR/progress.json"
{ printf '{"step": 1, "pad": ['; yes 1, | head -n 50000000 | tr -d '\n'; printf '1]}'; } >"$p.tmp"
mv "$p.tmp" "$p"
echo big-written
while :; do touch "$p"; sleep 0.2; done
EOF
BIGJOB=$(submit "$MAL" "$BIG")
wait_state "$MAL" "$BIGJOB" RUNNING
api "$MAL" GET "/v1/jobs/$BIGJOB"
RUN=$(jq -r '.attempts[-1].run_dir' "$WORK/body")
wait_for 120 "the 100 MB progress.json to be written" \
    'grep -q big-written "$RUN/rank.0/stdout" 2>/dev/null'
[ "$(stat -c %s "$RUN/progress.json")" -gt 100000000 ] || fail "progress.json is not 100 MB"
[ "$(stat -c %U "$RUN/progress.json")" = "$MALLORY" ] || fail "the job did not run as $MALLORY"
sleep 1 # a few rewrites for the scheduler thread to see

quick "$ADMIN" GET /healthz -- 200
quick "$ADMIN" GET /readyz -- 200
quick "$ADMIN" GET /metrics -- 200
quick "$ADMIN" GET /v1/openapi.json -- 200
quick "$ADMIN" GET /v1/jobs -- 200
quick "$MAL" GET "/v1/jobs/$BIGJOB" -- 200
quick "$MAL" GET "/v1/jobs/$BIGJOB/events" -- 200
quick "$MAL" GET "/v1/jobs/$BIGJOB/logs?tail=5" -- 200
quick "$ADMIN" GET /v1/cluster -- 200
quick "$ADMIN" GET /v1/scheduler -- 200
quick "$ADMIN" PUT /v1/scheduler '{"policy":"fifo"}' -- 200
quick "$ADMIN" POST "/v1/jobs/$VICTIM/stop" -- 202
wait_state "$ADMIN" "$VICTIM" STOPPED
quick "$ADMIN" POST "/v1/jobs/$VICTIM/resume" -- 200
quick "$ADMIN" POST "/v1/jobs/$VICTIM/cancel" -- 202
quick "$ADMIN" POST /v1/jobs '{"name":"q","command":["/bin/true"]}' -- 201
quick "$ADMIN" DELETE "/v1/jobs/$DONE" -- 204
quick "$ADMIN" POST /v1/tokens '{"name":"other"}' -- 201
OTHER_ID=$(jq -r .id "$WORK/body")
quick "$ADMIN" GET /v1/tokens -- 200
quick "$ADMIN" DELETE "/v1/tokens/$OTHER_ID" -- 200
ok "every route answers within a second while a job rewrites a 100 MB progress.json"

api "$MAL" GET "/v1/jobs/$BIGJOB/events"
[ "$(jq '[.events[] | select(.type == "progress-ignored")] | length' "$WORK/body")" = 1 ] ||
    { cat "$WORK/body" >&2; fail "want one progress-ignored event"; }
jq -e '.events[] | select(.type == "progress-ignored") | .message | contains("16384 bytes")' \
    "$WORK/body" >/dev/null || fail "the event does not say why"
[ "$(grep -c 'progress.json is larger than' "$WORK/ringd.log")" = 1 ] ||
    fail "want one log line about the ignored progress.json"
ok "the oversized progress.json is ignored, said once in the events and once in the log"
api "$MAL" POST "/v1/jobs/$BIGJOB/cancel"
want 202

# ---- memory: a sparse 10 GiB log ----------------------------------------------------------
# (ringrun creates the file as the rank starts, and writes at its own offset: the job
# appends to it itself.)
read -r -d '' HUGE <<'EOF' || true
f="$RING_RUN_DIR/rank.0/stdout"
while [ ! -f "$f" ]; do sleep 0.1; done
truncate -s 10G "$f"
while :; do echo tick >>"$f"; sleep 0.5; done
EOF
LOGJOB=$(submit "$MAL" "$HUGE")
wait_state "$MAL" "$LOGJOB" RUNNING
api "$MAL" GET "/v1/jobs/$LOGJOB"
LOG="$(jq -r '.attempts[-1].run_dir' "$WORK/body")/rank.0/stdout"
wait_for 30 "the 10 GiB log" '[ "$(stat -c %s "$LOG" 2>/dev/null || echo 0)" -gt $((10 << 30)) ]'
hwm0=$(hwm_kib)
# The whole log is offered (Content-Length: all of it); a client reads its first GiB.
n=$({ curl -s -m 60 -D "$WORK/headers" -H "Authorization: Bearer $MAL" "$URL/v1/jobs/$LOGJOB/logs" ||
    true; } | head -c $((1 << 30)) | wc -c)
grep -qi '^HTTP/1.1 200' "$WORK/headers" || { cat "$WORK/headers" >&2; fail "a 10 GiB log is refused"; }
len=$(sed -n 's/^[Cc]ontent-[Ll]ength: *\([0-9]*\).*/\1/p' "$WORK/headers")
[ "${len:-0}" -gt $((10 << 30)) ] || fail "Content-Length $len is not the whole log"
[ "$n" = $((1 << 30)) ] || fail "read $n bytes of the log, want 1 GiB"
# tail looks back 16 MiB at most: a log without newlines is not read whole for it.
code=$(curl -s -m 10 -o "$WORK/tail" -w '%{http_code}' -H "Authorization: Bearer $MAL" \
    "$URL/v1/jobs/$LOGJOB/logs?tail=3" || true)
[ "$code" = 200 ] || fail "tail=3 of a 10 GiB log answered $code"
[ "$(stat -c %s "$WORK/tail")" -le $((16 << 20)) ] || fail "tail=3 sent $(stat -c %s "$WORK/tail") bytes"
grep -q tick "$WORK/tail" || fail "tail=3 lacks the last lines"
hwm1=$(hwm_kib)
[ $((hwm1 - hwm0)) -lt $((64 << 10)) ] ||
    fail "ringd's peak memory grew by $(((hwm1 - hwm0) >> 10)) MiB serving a 10 GiB log"
ok "a sparse 10 GiB log is streamed, and a tail of it is bounded: peak memory +$(((hwm1 - hwm0) >> 10)) MiB"

# ---- streams: one token's share, and their end with the token ------------------------------
size=$(stat -c %s "$LOG")
pids=()
for i in 1 2 3 4; do
    curl -sN -H "Authorization: Bearer $MAL" -H 'Accept: text/event-stream' \
        "$URL/v1/jobs/$LOGJOB/events" >"$WORK/sse.$i" &
    pids+=($!)
    curl -sN -H "Authorization: Bearer $MAL" \
        "$URL/v1/jobs/$LOGJOB/logs?follow=1&offset=$size" >"$WORK/follow.$i" &
    pids+=($!)
done
wait_for 30 "mallory's 8 streams" '[ "$(established)" -ge 8 ]'
wait_for 30 "the follows to get output" 'grep -q tick "$WORK/follow.4"'
code=$(curl -s -m 5 -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' \
    -H "Authorization: Bearer $MAL" -H 'Accept: text/event-stream' "$URL/v1/jobs/$LOGJOB/events" ||
    true)
[ "$code" = 429 ] || fail "a ninth stream of one token answered $code, want 429"
jq -e '.type == "urn:ringmaster:problem:too-many-streams"' "$WORK/body" >/dev/null ||
    fail "429 without its problem: $(cat "$WORK/body")"
grep -qi '^Retry-After: [1-9]' "$WORK/headers" || fail "429 without Retry-After"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $MAL" \
    "$URL/v1/jobs/$LOGJOB/logs?follow=1&offset=$size&rank=0" || true)
[ "$code" = 429 ] || fail "a ninth stream (a log follow) answered $code, want 429"
curl -sN -m 3 -H "Authorization: Bearer $ADMIN" -H 'Accept: text/event-stream' \
    "$URL/v1/jobs/$LOGJOB/events" >"$WORK/admin.sse" || true
grep -q '^event: ' "$WORK/admin.sse" || fail "another token got no stream while mallory holds 8"
ok "one token holds at most streams_per_token streams (429 after), and others still get theirs"

api "$ADMIN" DELETE "/v1/tokens/$MAL_ID"
want 200
for p in "${pids[@]}"; do
    for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$p" 2>/dev/null && fail "a stream of the revoked token is still open after 2 s"
done
for i in 1 2 3 4; do
    tail -n 3 "$WORK/sse.$i" | grep -q '^event: unauthorized' ||
        { tail -n 5 "$WORK/sse.$i" >&2; fail "event stream $i did not end with an unauthorized event"; }
done
tail -n 3 "$WORK/sse.1" | sed -n 's/^data: //p' |
    jq -e '.status == 401 and .type == "urn:ringmaster:problem:unauthorized"' >/dev/null ||
    fail "the last event is not the problem"
ok "revoking a token ends its 4 event streams (last event: unauthorized) and 4 log follows"

# Revoking mallory's last token retired her principal: a new token of that name is a new
# principal, which sees none of the old jobs, so it streams a job of its own.
api "$ADMIN" POST /v1/tokens "{\"name\":\"mallory\",\"user\":\"$MALLORY\",\"expires_in\":5}"
want 201
SHORT=$(jq -r .token "$WORK/body")
SHORTJOB=$(submit "$SHORT" 'sleep 30')
timeout 20 curl -sN -H "Authorization: Bearer $SHORT" -H 'Accept: text/event-stream' \
    "$URL/v1/jobs/$SHORTJOB/events" >"$WORK/short.sse" || fail "a stream of an expiring token did not end"
tail -n 3 "$WORK/short.sse" | grep -q '^event: token-expired' ||
    { tail -n 5 "$WORK/short.sse" >&2; fail "the stream did not end with token-expired"; }
ok "a stream ends when its token expires (last event: token-expired)"

api "$ADMIN" POST "/v1/jobs/$LOGJOB/cancel"
want 202
ringd_stop
summary
