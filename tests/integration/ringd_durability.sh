#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Durability: 500 submissions from 4 concurrent clients while ringd is killed with kill -9 at
# random moments and restarted. Every job that got a 201 must exist afterwards, and retries
# with the same Idempotency-Key must not create duplicates.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

DATA=$WORK/data
CLIENTS=${CLIENTS:-4}
PER_CLIENT=${PER_CLIENT:-125}
PORT=$(free_port) # fixed, so that restarts keep the address
start_ringd() {
    # One slot and a first job that holds it: the rest stay queued, so the test measures the
    # API and the store, not hundreds of launches.
    RINGD_SLOTS=1 "$RINGD" --listen "127.0.0.1:$PORT" --data-dir "$DATA" --no-auth \
        >>"$WORK/ringd.log" 2>&1 &
    echo $! >"$WORK/pid"
}
trap 'kill -9 $(cat "$WORK/pid") 2>/dev/null || true; pkill -9 -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
start_ringd
wait_for 30 "ringd to start or exit" '[ -s "$DATA/ringd.addr" ] || ! kill -0 "$(cat "$WORK/pid")" 2>/dev/null'
[ -s "$DATA/ringd.addr" ] || { cat "$WORK/ringd.log" >&2; fail "ringd did not start"; }
URL="http://127.0.0.1:$PORT"
curl -sf -H 'Content-Type: application/json' -d '{"name":"holder","command":["/bin/sleep","600"]}' "$URL/v1/jobs" >/dev/null ||
    { cat "$WORK/ringd.log" >&2; fail "the first submission failed"; }

client() { # client N: submits PER_CLIENT jobs, retrying each key until it gets a 201
    local c=$1 i code
    for i in $(seq "$PER_CLIENT"); do
        while :; do
            code=$(curl -s -o "$WORK/resp.$c" -w '%{http_code}' --max-time 5 \
                -H "Idempotency-Key: c$c-$i" -H 'Content-Type: application/json' \
                -d "{\"name\":\"c$c-$i\",\"command\":[\"/bin/true\"],\"labels\":{\"key\":\"c$c-$i\"}}" \
                "$URL/v1/jobs" 2>/dev/null) || code=000
            if [ "$code" = 201 ]; then
                echo "c$c-$i $(jq -r .id "$WORK/resp.$c")" >>"$WORK/acked.$c"
                break
            fi
            sleep 0.05 # ringd is down (000) or busy (503): retry the same key
            kill -0 $$ 2>/dev/null || return 1 # the test was killed (timeout): stop too
        done
    done
}
clients=()
for c in $(seq "$CLIENTS"); do
    client "$c" &
    clients+=($!)
done

# Kill ringd at random moments until the clients are done: mostly 0.2-0.8 s after it is
# ready again, and every fourth time while it is still starting (recovering the store). A
# slow ringd (TSan starts it in seconds) must serve a while between kills, or no client
# would ever get through.
kills=0 acked=0 stalled=0
while [ "$acked" -lt $((CLIENTS * PER_CLIENT)) ]; do
    sleep "0.$((2 + RANDOM % 7))"
    kill -9 "$(cat "$WORK/pid")" 2>/dev/null || true
    wait "$(cat "$WORK/pid")" 2>/dev/null || true
    kills=$((kills + 1))
    start_ringd
    [ $((kills % 4)) = 0 ] || wait_for 60 "ringd to be ready after kill $kills" 'curl -sf "$URL/readyz" >/dev/null'
    now=$(cat "$WORK"/acked.* 2>/dev/null | wc -l)
    if [ "$now" -gt "$acked" ]; then stalled=0; else stalled=$((stalled + 1)); fi
    acked=$now
    [ $stalled -lt 50 ] || fail "the clients made no progress in 50 kills ($acked acknowledged)"
done
wait "${clients[@]}"
wait_for 60 "ringd to come back after the last kill" 'curl -sf "$URL/readyz" >/dev/null'

cat "$WORK"/acked.* >"$WORK/acked"
[ "$(wc -l <"$WORK/acked")" = $((CLIENTS * PER_CLIENT)) ] || fail "not every client finished"
curl -sf "$URL/v1/jobs?page_size=1000" >"$WORK/jobs.json" || fail "ringd did not come back"
# every acknowledged job exists, under the id the client was given
missing=0
while read -r key id; do
    jq -e --arg id "$id" --arg k "$key" 'any(.jobs[]; .id == $id and .spec.labels.key == $k)' \
        "$WORK/jobs.json" >/dev/null || missing=$((missing + 1))
done <"$WORK/acked"
[ $missing = 0 ] || fail "$missing acknowledged jobs are missing after $kills kills"
# no key made two jobs
dups=$(jq -r '.jobs[].spec.labels.key // empty' "$WORK/jobs.json" | sort | uniq -d | wc -l)
[ "$dups" = 0 ] || fail "$dups Idempotency-Keys created more than one job"
[ "$(jq '.jobs | length' "$WORK/jobs.json")" = $((CLIENTS * PER_CLIENT + 1)) ] ||
    fail "$(jq '.jobs | length' "$WORK/jobs.json") jobs, want $((CLIENTS * PER_CLIENT + 1))"
ok "$((CLIENTS * PER_CLIENT)) submissions from $CLIENTS clients across $kills kill -9s: none lost, none doubled"
summary
