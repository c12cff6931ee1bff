#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# SIGHUP reloads ringd (server/reload.h): a TLS certificate rotated under a live client
# (no request fails; new connections get the new certificate, open ones keep working),
# a bad certificate or configuration refused with the old one kept, the settings that can
# change at runtime applied, and the others reported as needing a restart.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
HERE=$(cd "$(dirname "$0")" && pwd)

# A CA, and two certificates for 127.0.0.1 with keys of their own: A, then B.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ringtest-ca \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
for c in a b; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=ringd-$c" -keyout "$WORK/$c.key" \
        -out "$WORK/$c.req" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/san"
    openssl x509 -req -in "$WORK/$c.req" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
        -CAcreateserial -days 2 -extfile "$WORK/san" -out "$WORK/$c.pem" 2>/dev/null
done
fp() { openssl x509 -in "$1" -noout -fingerprint -sha256 | sed 's/.*=//'; }
FP_A=$(fp "$WORK/a.pem")
FP_B=$(fp "$WORK/b.pem")
served_fp() {
    openssl s_client -connect "$ADDR" -CAfile "$WORK/ca.pem" </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256 | sed 's/.*=//'
}
# put NAME.pem NAME.key: the live pair's files replaced whole (a rename, as certbot and
# cert-manager do), never half-written under ringd.
mkdir -p "$WORK/live"
put() {
    cp "$WORK/$1" "$WORK/live/.cert.new" && mv "$WORK/live/.cert.new" "$WORK/live/cert.pem"
    cp "$WORK/$2" "$WORK/live/.key.new" && mv "$WORK/live/.key.new" "$WORK/live/key.pem"
}
put a.pem a.key

CONF="$WORK/ringd.conf"
conf() { # conf KEY=VALUE...: ringd.conf with the live pair and these settings
    printf 'tls_cert = %s\ntls_key = %s\n' "$WORK/live/cert.pem" "$WORK/live/key.pem" >"$CONF"
    for kv in "$@"; do printf '%s = %s\n' "${kv%%=*}" "${kv#*=}" >>"$CONF"; done
}
# reload: SIGHUP, then wait for its "done" or its refusal in the log (the n-th reload).
reloads=0
reload() {
    reloads=$((reloads + 1))
    kill -HUP "$ringd_pid"
    wait_for 20 "reload $reloads to finish" \
        '[ "$(grep -c "reload: done\|nothing was reloaded" "$WORK/ringd.log")" -ge $reloads ]'
    kill -0 "$ringd_pid" 2>/dev/null || { cat "$WORK/ringd.log" >&2; fail "ringd exited at SIGHUP"; }
}

DATA="$WORK/data"
conf streams_per_token=32 threads=2
ringd_start "$DATA" --config "$CONF"
TOKEN=$(cat "$DATA/admin.token")
[ "$(served_fp)" = "$FP_A" ] || fail "ringd does not serve certificate A"

# The rotation, under a client that never stops asking.
python3 "$HERE/tls_client.py" "$ADDR" "$WORK/ca.pem" "$WORK/client.log" "$WORK/stop" &
client=$!
trap 'touch "$WORK/stop"; kill $client 2>/dev/null || true; lib_exit' EXIT
wait_for 30 "the client's first requests" \
    '[ -f "$WORK/client.log" ] && [ "$(grep -c "^new $FP_A 200" "$WORK/client.log")" -ge 20 ]'
put b.pem b.key
reload
grep -q "reload: done: TLS certificate $WORK/live/cert.pem (.*SHA-256 $FP_B" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "the log does not say which certificate was loaded"; }
wait_for 30 "new connections to get certificate B" 'grep -q "^new $FP_B 200" "$WORK/client.log"'
wait_for 30 "more requests after the rotation" \
    '[ "$(grep -c "^new $FP_B 200" "$WORK/client.log")" -ge 20 ]'
touch "$WORK/stop"
wait "$client"
if grep -q "^error" "$WORK/client.log"; then
    grep "^error" "$WORK/client.log" | head >&2
    fail "requests failed across the reload"
fi
# After the first new connection with B, every new one has B.
awk -v a="$FP_A" -v b="$FP_B" '$1 == "new" && $2 == b { seen = 1 }
     $1 == "new" && $2 == a && seen { bad = 1 } END { exit bad }' "$WORK/client.log" ||
    fail "a new connection got the old certificate after the reload"
# The keep-alive connection made with A was still served after B took over.
awk -v a="$FP_A" -v b="$FP_B" '$1 == "new" && $2 == b { seen = 1 }
     $1 == "kept" && $2 == a && seen { ok = 1 } END { exit !ok }' "$WORK/client.log" ||
    fail "the connection opened before the reload was not served after it"
[ "$(served_fp)" = "$FP_B" ] || fail "openssl s_client does not see certificate B"
ok "certificate rotated under a live client: $(grep -c . "$WORK/client.log") requests, none failed;" \
    "new connections get B, an open one keeps A"

# The race between a handshake and a swap, many times: twenty rotations back and forth while
# the client goes on; no request fails, and the last pair is the one served.
python3 "$HERE/tls_client.py" "$ADDR" "$WORK/ca.pem" "$WORK/client2.log" "$WORK/stop2" &
client=$!
trap 'touch "$WORK/stop2"; kill $client 2>/dev/null || true; lib_exit' EXIT
wait_for 30 "the second client's first request" '[ -s "$WORK/client2.log" ]'
for i in $(seq 20); do
    if ((i % 2)); then put a.pem a.key; else put b.pem b.key; fi
    n=$(wc -l <"$WORK/client2.log")
    reload
    # a few handshakes with this pair before the next swap
    wait_for 30 "requests after rotation $i" '[ "$(wc -l <"$WORK/client2.log")" -ge $((n + 4)) ]'
done
wait_for 30 "requests after the rotations" \
    '[ "$(grep -c "^new $FP_B 200" "$WORK/client2.log")" -ge 5 ]'
touch "$WORK/stop2"
wait "$client"
if grep -q "^error" "$WORK/client2.log"; then
    grep "^error" "$WORK/client2.log" | head >&2
    fail "requests failed across twenty rotations"
fi
grep -q "^new $FP_A 200" "$WORK/client2.log" || fail "no new connection got A during the rotations"
[ "$(served_fp)" = "$FP_B" ] || fail "the last rotation's certificate (B) is not served"
ok "twenty rotations under the client: $(grep -c . "$WORK/client2.log") requests, none failed"

# A broken certificate, then a key that is not the certificate's: refused, B stays.
printf -- '-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n' \
    >"$WORK/broken.pem"
put broken.pem b.key
reload
grep -q "kept the TLS certificate in use" "$WORK/ringd.log" || fail "a broken certificate was not refused"
[ "$(served_fp)" = "$FP_B" ] || fail "the broken certificate replaced B"
put a.pem b.key
reload
grep -q "is not the key of the certificate" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "a key that is not the certificate's was not refused"; }
[ "$(served_fp)" = "$FP_B" ] || fail "a mismatched pair replaced B"
# -days 0: valid until the second it was made; reloaded once that second is over.
openssl x509 -req -in "$WORK/a.req" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 0 -extfile "$WORK/san" -out "$WORK/expired.pem" 2>/dev/null
until_s=$(date -d "$(openssl x509 -in "$WORK/expired.pem" -noout -enddate | cut -d= -f2)" +%s)
wait_for 10 "the certificate to expire" '[ "$(date +%s)" -gt "$until_s" ]'
put expired.pem a.key
reload
grep -q "the TLS certificate $WORK/live/cert.pem expired at .*; renew it" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "an expired certificate was not refused"; }
[ "$(served_fp)" = "$FP_B" ] || fail "an expired certificate replaced B"
ok "a broken certificate, a mismatched key and an expired certificate are refused with the" \
    "reason; B stays"

# A configuration that does not parse: nothing changes, ringd serves on.
put b.pem b.key
conf streams_per_token=32 threads=2 no_such_setting=1
reload
grep -q "unknown setting 'no_such_setting'.*nothing was reloaded" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "a bad configuration was not refused with its reason"; }
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" "https://$ADDR/healthz")
[ "$code" = 200 ] || fail "ringd does not serve after a refused reload ($code)"
ok "a configuration that does not parse is refused with the reason; ringd serves on"

# Runtime settings: streams_per_token and policy change; threads needs a restart.
conf streams_per_token=1 threads=3 policy=dynamic
reload
grep -q "reload: done: .*streams_per_token 32 -> 1.*policy fifo -> dynamic" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "the log does not say what changed"; }
grep -q "reload: threads cannot change without a restart; kept 2" "$WORK/ringd.log" ||
    { cat "$WORK/ringd.log" >&2; fail "the log does not say that threads was kept"; }
auth=(--cacert "$WORK/ca.pem" -H "Authorization: Bearer $TOKEN" -H "Accept: text/event-stream")
curl -s "${auth[@]}" "https://$ADDR/v1/scheduler" | grep -q '"policy": *"dynamic"' ||
    fail "the policy did not switch to dynamic"
curl -sN "${auth[@]}" "https://$ADDR/v1/events" >/dev/null &
stream=$!
wait_for 10 "the first stream to start" \
    '[ "$(curl -s -o /dev/null -w "%{http_code}" "${auth[@]}" "https://$ADDR/v1/events" --max-time 1)" = 429 ]'
kill "$stream" 2>/dev/null || true
ok "streams_per_token (now 1: a second stream gets 429) and policy change at runtime;" \
    "threads is reported as kept"

ringd_stop
summary
