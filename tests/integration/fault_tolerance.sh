#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rank dies or stalls mid-allreduce: every other rank returns an error within the
# operation timeout instead of hanging.
#
# ringrun exits with the victim's status (137), which says nothing about the survivors.
# So each survivor's own verdict is asserted: fault_check exits 0 only when its error came
# within the timeout and the communicator stayed broken, and ringrun -v reports every
# rank's exit status.
. "$(dirname "$0")/lib.sh"
: "${FAULT_CHECK:?}"

# survivors_ok NP VICTIM: every rank but VICTIM reported an error and exited 0.
survivors_ok() {
    local np=$1 victim=$2
    for r in $(seq 0 $((np - 1))); do
        [ "$r" = "$victim" ] && continue
        grep -q "^\[$r\]<stdout>:rank $r: got RING_E" "$WORK/out" ||
            { cat "$WORK/out" "$WORK/err"; fail "rank $r reported no error"; }
        grep -qE "^[^ ]+ info ringrun: rank $r exited with status 0$" "$WORK/err" ||
            { cat "$WORK/out" "$WORK/err"; fail "survivor rank $r failed its own checks"; }
    done
}

start=$(date +%s)
RING_OP_TIMEOUT_SECONDS=5 expect_rc 137 "$RINGRUN" -v -np 4 --kill-grace 30 "$FAULT_CHECK" kill 2 300
survivors_ok 4 2
[ $(( $(date +%s) - start )) -lt 25 ] || fail "the survivors took too long to notice the dead rank"
expect_in err "rank 2 was killed by signal 9"
grep 'got RING_E' "$WORK/out"
ok "a rank killed mid-allreduce: the 3 others get an error in time and stay broken"

start=$(date +%s)
RING_OP_TIMEOUT_SECONDS=2 expect_rc 137 "$RINGRUN" -v -np 3 --kill-grace 30 "$FAULT_CHECK" stall 1 300
survivors_ok 3 1
expect_in out "RING_ETIMEDOUT"
[ $(( $(date +%s) - start )) -lt 25 ] || fail "the survivors took too long to time out"
grep 'got RING_E' "$WORK/out"
ok "a stopped (alive but silent) rank: the others time out in time and stay broken"

summary
