#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ringd's log for operators: every line has a timestamp and a level (logfmt), including
# what libmicrohttpd reports; and when standard error is the systemd journal's stream
# (JOURNAL_STREAM names it, as systemd sets it), every line starts with its syslog priority
# (<3> error, <4> warning, <6> info), which the journal keeps as PRIORITY. Under the
# journal the first admin token is not printed (the journal is readable by more than root):
# only where it is.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

# every_line_has FILE REGEX: each line of ringd's log matches REGEX.
every_line_has() {
    local bad
    bad=$(grep -Ev "$2" "$1" || true)
    [ -z "$bad" ] || { echo "$bad" | head -5 >&2; fail "lines of ringd's log without $2"; }
}
# A plain-HTTP request on a TLS port, which libmicrohttpd itself reports.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext \
    subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
TLS=(--tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")

# Not under the journal: logfmt lines with a timestamp, after the first start's notice.
ringd_start "$WORK/plain" "${TLS[@]}"
curl -s -o /dev/null "http://$ADDR/healthz" || true
kill -HUP "$ringd_pid"
wait_for 10 "the reload" 'grep -q "reload: done" "$WORK/ringd.log"'
ringd_stop
grep -q "First start: created an admin token" "$WORK/ringd.log" || fail "no first-start notice"
sed '/^$/d; /First start: created/,/not shown again/d' "$WORK/ringd.log" >"$WORK/lines"
every_line_has "$WORK/lines" '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z level=(error|warning|info) '
grep -q 'level=warning.*handshake' "$WORK/lines" || fail "libmicrohttpd's report is not a log line"
ok "every line has a timestamp and a level, libmicrohttpd's included ($(wc -l <"$WORK/lines") lines)"

# Under the journal: ringd's standard error is the stream JOURNAL_STREAM names.
LOG="$WORK/journal.log"
: >"$LOG"
exec 9>>"$LOG"
stream=$(stat -Lc '%d:%i' /proc/self/fd/9)
exec 9>&-
: >"$WORK/j.conf"
JOURNAL_STREAM=$stream "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/journal" \
    --config "$WORK/j.conf" "${TLS[@]}" 2>>"$LOG" &
ringd_pid=$!
wait_for 30 "ringd to start" '[ -s "$WORK/journal/ringd.addr" ] || ! kill -0 $ringd_pid'
[ -s "$WORK/journal/ringd.addr" ] || { cat "$LOG" >&2; fail "ringd exited"; }
ADDR=$(cat "$WORK/journal/ringd.addr")
curl -s -o /dev/null "http://$ADDR/healthz" || true
printf 'no_such_setting = 1\n' >"$WORK/j.conf"
kill -HUP "$ringd_pid"
wait_for 10 "the refused reload" 'grep -q "nothing was reloaded" "$LOG"'
ringd_stop
every_line_has "$LOG" '^<[346]>ts=[^ ]+ level=(error|warning|info) '
grep -q '^<6>ts=.* level=info ' "$LOG" || fail "no info line with priority 6"
grep -q '^<4>ts=.* level=warning .*handshake' "$LOG" || fail "no warning line with priority 4"
grep -q '^<3>ts=.* level=error .*no_such_setting' "$LOG" || fail "no error line with priority 3"
! grep -q 'ringd_[0-9a-f]*_[0-9a-f]\{20,\}' "$LOG" || fail "the admin token went to the journal"
grep -q "^<6>ts=.*created an admin token in $WORK/journal/admin.token" "$LOG" ||
    fail "the journal does not say where the admin token is"
ok "under the journal every line starts with its priority, and the admin token stays in its file"

# JOURNAL_STREAM that is not standard error's (a redirect away from the journal): no prefix.
JOURNAL_STREAM=1:1 ringd_start "$WORK/journal"
ringd_stop
every_line_has <(sed '/^$/d' "$WORK/ringd.log" | sed '/First start: created/,/not shown again/d') '^ts='
ok "a JOURNAL_STREAM that is not standard error's changes nothing"

summary
