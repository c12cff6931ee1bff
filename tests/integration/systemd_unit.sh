#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# contrib/systemd/ringd.service passes `systemd-analyze verify` with nothing to say: its
# keys and values are ones systemd knows, and its commands exist. The installed paths
# (/usr/bin/ringd) are put back to this build's ringd, which is what the unit would run.
# systemd-analyze only warns about an unknown key or a bad value, so any output fails.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
UNIT="$(dirname "$0")/../../contrib/systemd/ringd.service"

command -v systemd-analyze >/dev/null || skip "no systemd-analyze (apt-get install systemd)"
[ -f "$UNIT" ] || fail "no unit at $UNIT"
grep -q '^ExecStart=/usr/bin/ringd --config /etc/ringmaster/ringd.conf$' "$UNIT" ||
    fail "the unit does not start the installed ringd with the installed config"
grep -q '^Type=notify$' "$UNIT" || fail "the unit is not Type=notify"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$UNIT" || fail "the unit does not reload by SIGHUP"

# verify: the file name is the unit's name. The path is quoted: a build folder may have a
# blank in it, which systemd's command-line splitting would take for two words.
mkdir -p "$WORK/unit"
sed "s|^ExecStart=/usr/bin/ringd |ExecStart=\"$RINGD\" |" "$UNIT" >"$WORK/unit/ringd.service"
verify() { systemd-analyze verify --man=no "$WORK/unit/ringd.service" >"$WORK/out" 2>&1; }
verify || { cat "$WORK/out" >&2; fail "systemd-analyze verify failed"; }
[ ! -s "$WORK/out" ] || { cat "$WORK/out" >&2; fail "systemd-analyze verify has complaints"; }
ok "systemd-analyze verify accepts the unit, without a warning"

# The check can fail: a misspelt key and a missing program are both caught.
sed 's/^ProtectSystem=full/ProtectSystem=fully/' "$UNIT" |
    sed "s|^ExecStart=/usr/bin/ringd |ExecStart=\"$RINGD\" |" >"$WORK/unit/ringd.service"
verify || true
grep -q "ProtectSystem\|protect system" "$WORK/out" || { cat "$WORK/out" >&2; fail "a bad value passed"; }
sed "s|^ExecStart=/usr/bin/ringd |ExecStart=$WORK/no-such-ringd |" "$UNIT" >"$WORK/unit/ringd.service"
! verify || fail "a unit whose ringd does not exist passed"
ok "a bad value and a missing program are reported"

summary
