#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rank dies or stalls mid-allreduce: every other rank returns an error within the
# operation timeout instead of hanging.
. "$(dirname "$0")/lib.sh"
: "${FAULT_CHECK:?}"

start=$(date +%s)
RING_OP_TIMEOUT_SECONDS=5 expect_rc 137 "$RINGRUN" -np 4 --kill-grace 30 "$FAULT_CHECK" kill 2 300
[ "$(grep -c 'got RING_E' "$WORK/out")" = 3 ] || { cat "$WORK/out" "$WORK/err"; fail "not every survivor reported an error"; }
[ $(( $(date +%s) - start )) -lt 25 ] || fail "the survivors took too long to notice the dead rank"
expect_in err "rank 2 was killed by signal 9"
grep 'got RING_E' "$WORK/out"
ok "a rank killed mid-allreduce: the 3 others get an error"

start=$(date +%s)
RING_OP_TIMEOUT_SECONDS=2 expect_rc 137 "$RINGRUN" -np 3 --kill-grace 30 "$FAULT_CHECK" stall 1 300
[ "$(grep -c 'got RING_E' "$WORK/out")" = 2 ] || { cat "$WORK/out" "$WORK/err"; fail "not every survivor reported an error"; }
expect_in out "RING_ETIMEDOUT"
[ $(( $(date +%s) - start )) -lt 25 ] || fail "the survivors took too long to time out"
grep 'got RING_E' "$WORK/out"
ok "a stopped (alive but silent) rank: the others time out"

summary
