#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The API over TLS: ringd serves HTTPS with --tls-cert/--tls-key, ringctl verifies it with
# --cacert, and a bearer token never crosses the network in clear text unless the user
# said so (ringd refuses plain HTTP off loopback; ringctl refuses to send a token there).
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${RINGCTL:?}"

# A private CA and a certificate for 127.0.0.1 and localhost, made here.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ringtest-ca \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$WORK/key.pem" \
    -out "$WORK/req.pem" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$WORK/san"
openssl x509 -req -in "$WORK/req.pem" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
    -CAcreateserial -days 2 -extfile "$WORK/san" -out "$WORK/cert.pem" 2>/dev/null

DATA="$WORK/data"
ringd_start "$DATA" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
grep -q "https://$ADDR" "$WORK/ringd.log" || fail "ringd does not say it serves https"
export RINGMASTER_URL="https://$ADDR" RINGMASTER_TOKEN="$(cat "$DATA/admin.token")"

expect_rc 0 "$RINGCTL" --cacert "$WORK/ca.pem" ls
RINGMASTER_CACERT="$WORK/ca.pem" expect_rc 0 "$RINGCTL" cluster
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" \
    -H "Authorization: Bearer $RINGMASTER_TOKEN" "https://$ADDR/v1/jobs")
[ "$code" = 200 ] || fail "curl over TLS got $code"
ok "ringctl and curl reach the API over HTTPS, verifying ringd's certificate"

expect_rc 69 "$RINGCTL" ls
expect_in err "certificate"
ok "without the CA, ringctl refuses the unverified server (69)"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/healthz" || true)
[ "$code" != 200 ] || fail "plain HTTP was served on the TLS port"
# libmicrohttpd reports the broken handshake itself: a log line like ringd's own.
wait_for 10 "libmicrohttpd's report in the log" \
    'grep -q "^ts=.* level=warning .*libmicrohttpd: .*handshake" "$WORK/ringd.log"'
ok "the TLS port does not speak plain HTTP (and libmicrohttpd's report is a log line)"

ringd_stop

# No clear-text tokens off loopback, unless chosen.
expect_rc 64 "$RINGD" --listen 0.0.0.0:0 --data-dir "$WORK/open"
expect_in err "--allow-insecure-http"
ok "ringd refuses plain HTTP with tokens off loopback (64)"
RINGMASTER_URL=http://192.0.2.1:8080 expect_rc 2 "$RINGCTL" ls
expect_in err "clear text"
ok "ringctl refuses to send a token over plain HTTP off loopback (2)"
RINGMASTER_URL=http://127.0.0.1:1 expect_rc 69 "$RINGCTL" --insecure-http ls
ok "--insecure-http lets the user choose plain HTTP"

expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/half" --tls-cert "$WORK/cert.pem"
expect_in err "tls_cert and tls_key go together"
expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/bad" --tls-cert "$WORK/ca.key" \
    --tls-key "$WORK/ca.pem"
expect_in err "PEM certificate"
ok "a half or wrong TLS configuration is refused with what to fix (64)"

summary
