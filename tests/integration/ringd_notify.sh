#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ringd speaks systemd's sd_notify protocol (Type=notify) to the socket NOTIFY_SOCKET names,
# here one read by sd_notify.py: READY=1 only once it serves (/healthz answers at the
# moment READY arrives), STATUS= lines, RELOADING=1 then READY=1 around a SIGHUP, and
# STOPPING=1 at SIGTERM. Without NOTIFY_SOCKET it sends nothing and runs as before.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
HERE=$(cd "$(dirname "$0")" && pwd)

# Whether this ringd was built with libsystemd (RING_WITH_SYSTEMD; libsystemd-dev).
ldd "$RINGD" | grep -q libsystemd || skip "ringd was built without libsystemd (libsystemd-dev)"

DATA="$WORK/data"
SOCK="$WORK/notify.sock"
NLOG="$WORK/notify.log"
python3 "$HERE/sd_notify.py" "$SOCK" "$NLOG" "$DATA/ringd.addr" >"$WORK/listener.out" 2>&1 &
listener=$!
trap 'kill $listener 2>/dev/null || true; lib_exit' EXIT
wait_for 10 "the notify listener to bind" 'grep -q listening "$WORK/listener.out"'

NOTIFY_SOCKET="$SOCK" ringd_start "$DATA"
wait_for 10 "READY=1 from ringd" 'grep -q "^READY=1$" "$NLOG" 2>/dev/null'
grep -q "^healthz=200$" "$NLOG" || { cat "$NLOG" >&2; fail "READY=1 came before /healthz answered"; }
[ "$(grep -c '^READY=1$' "$NLOG")" = 1 ] || { cat "$NLOG" >&2; fail "READY=1 more than once"; }
grep -q "^STATUS=checking and migrating the job database" "$NLOG" ||
    { cat "$NLOG" >&2; fail "no STATUS= while the database is checked"; }
grep -q "^STATUS=serving on " "$NLOG" || { cat "$NLOG" >&2; fail "READY=1 has no STATUS="; }
ok "READY=1 arrives once, when /healthz already answers, with STATUS= lines before it"

kill -HUP "$ringd_pid"
wait_for 10 "READY=1 after the reload" '[ "$(grep -c "^READY=1$" "$NLOG")" = 2 ]'
# RELOADING=1 (with MONOTONIC_USEC) comes before the second READY=1.
awk '/^RELOADING=1$/ { r = NR } /^READY=1$/ { n++; if (n == 2) s = NR }
     END { exit !(r && s && r < s) }' "$NLOG" || { cat "$NLOG" >&2; fail "no RELOADING=1 before READY=1"; }
grep -q "^MONOTONIC_USEC=[0-9]*$" "$NLOG" || { cat "$NLOG" >&2; fail "RELOADING=1 without MONOTONIC_USEC"; }
kill -0 "$ringd_pid" || fail "ringd exited at SIGHUP"
ok "SIGHUP: RELOADING=1, then READY=1 again, and ringd keeps running"

ringd_stop
grep -q "^STOPPING=1$" "$NLOG" || { cat "$NLOG" >&2; fail "no STOPPING=1 at SIGTERM"; }
ok "SIGTERM: STOPPING=1, then a clean exit"

# Without NOTIFY_SOCKET: nothing is sent, and ringd starts and stops as before.
: >"$NLOG"
ringd_start "$DATA"
ringd_stop
[ ! -s "$NLOG" ] || { cat "$NLOG" >&2; fail "ringd notified without NOTIFY_SOCKET"; }
ok "without NOTIFY_SOCKET ringd sends nothing"

summary
