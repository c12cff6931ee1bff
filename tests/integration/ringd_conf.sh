#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# contrib/ringd.conf, the example configuration that is installed as
# /etc/ringmaster/ringd.conf: ringd accepts it as it is, it documents every key ringd has
# and no other, and the default each line shows is ringd's real default.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"
CONF="$(cd "$(dirname "$0")/../.." && pwd)/contrib/ringd.conf"
[ -f "$CONF" ] || fail "no example configuration at $CONF"
# Nothing from the environment: RINGD_* variables (lib.sh sets one) override the file.
bare() { env -i PATH="$PATH" "$RINGD" "$@"; }

bare --print-config >"$WORK/defaults" || fail "ringd --print-config failed"
expect_rc 0 bare --config "$CONF" --print-config
cmp -s "$WORK/out" "$WORK/defaults" ||
    { diff "$WORK/defaults" "$WORK/out" >&2; fail "the file as installed changes a default"; }
ok "ringd accepts the example as it is (everything commented: the defaults)"

keys_ringd=$(sed -n 's/^\([a-z_]*\) = .*/\1/p' "$WORK/defaults" | sort)
keys_file=$(sed -n 's/^#\([a-z_]*\) =.*/\1/p' "$CONF" | sort)
missing=$(comm -23 <(echo "$keys_ringd") <(echo "$keys_file"))
stale=$(comm -13 <(echo "$keys_ringd") <(echo "$keys_file"))
[ -z "$missing" ] || fail "keys ringd has that the example does not document: $missing"
[ -z "$stale" ] || fail "keys the example documents that ringd does not have: $stale"
ok "the example documents all $(echo "$keys_ringd" | wc -l) keys of ringd --print-config, and no other"

# Uncommented, each default shown is ringd's own. Some defaults depend on the machine
# (CPUs, GPUs, where ringrun and mpirun are) and are shown as examples; keys without a
# default ("#key =") stay commented.
sed -n 's/^#\([a-z_]* = .\{1,\}\)$/\1/p' "$CONF" |
    grep -Ev '^(slots|gpus|threads|ringrun|mpirun) ' >"$WORK/uncommented.conf"
[ "$(wc -l <"$WORK/uncommented.conf")" -ge 15 ] || fail "too few defaults to check"
expect_rc 0 bare --config "$WORK/uncommented.conf" --print-config
cmp -s "$WORK/out" "$WORK/defaults" ||
    { diff "$WORK/defaults" "$WORK/out" >&2; fail "a default in the example is not ringd's"; }
ok "every default the example shows is ringd's ($(wc -l <"$WORK/uncommented.conf") checked)"

ringd_start "$WORK/data" --config "$CONF"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")
[ "$code" = 200 ] || fail "ringd with the example configuration answers /healthz with $code"
ringd_stop
ok "ringd runs with the example (and a data directory of the test's)"

summary
