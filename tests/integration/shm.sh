#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shared-memory transport: ranks of one host use it, a rank killed with SIGKILL gives
# every other rank an error (never a hang), and no /dev/shm entry is ever left behind.
. "$(dirname "$0")/lib.sh"
: "${COLL_CHECK:?}" "${FAULT_CHECK:?}"

# Every entry but Open MPI's own segments (vader_segment.*): tests running beside this one
# (-j2) start mpirun jobs, and a stopped one may leave its segments behind for a while.
# libring never names anything in /dev/shm, so no entry of its own can hide behind that.
shm_entries() { ls -A /dev/shm 2>/dev/null | { grep -v '^vader_segment\.' || true; } | sort; }

RING_LOG_LEVEL=debug expect_rc 0 "$RINGRUN" -np 3 "$COLL_CHECK"
expect_in out "checks passed at np 3"
[ "$(grep -c 'mesh: 1 hosts; shm to 2 peers, tcp to 0 peers' "$WORK/err")" = 3 ] ||
    { grep mesh: "$WORK/err"; fail "not every rank chose shared memory for its 2 local peers"; }
RING_TRANSPORT=tcp RING_LOG_LEVEL=debug expect_rc 0 "$RINGRUN" -np 2 "$COLL_CHECK"
[ "$(grep -c 'shm to 0 peers, tcp to 1 peers' "$WORK/err")" = 2 ] ||
    { grep mesh: "$WORK/err"; fail "RING_TRANSPORT=tcp did not put every peer on TCP"; }
ok "same-host peers use shm by default; RING_TRANSPORT=tcp turns it off"

RING_TRANSPORT=bogus expect_rc 1 "$RINGRUN" -np 2 "$COLL_CHECK"
expect_in err "RING_TRANSPORT='bogus' must be auto, shm or tcp"
ok "a bad RING_TRANSPORT is refused with what to write instead"

# A rank SIGKILLs itself mid-allreduce, over shared memory, in both copy modes.
before=$(shm_entries)
for cma in 1 0; do
    start=$(date +%s)
    RING_TRANSPORT=shm RING_SHM_CMA=$cma RING_OP_TIMEOUT_SECONDS=20 \
        expect_rc 137 "$RINGRUN" -v -np 4 --kill-grace 30 "$FAULT_CHECK" kill 2 300
    expect_in err "rank 2 was killed by signal 9"
    # A survivor sees the death either inside its allreduce (RING_EPEER) or, when its
    # engine thread saw it first between two calls, as the refusal of the next one
    # (RING_EBROKEN, quoting the same cause). Either way it names a closed connection,
    # and fault_check's own checks (in time, stays broken) gave exit status 0.
    for r in 0 1 3; do
        grep -Eq "^\[$r\]<stdout>:rank $r: got RING_E(PEER|BROKEN) .*closed the connection" \
            "$WORK/out" ||
            { cat "$WORK/out" "$WORK/err"; fail "rank $r did not report the dead peer (CMA $cma)"; }
        grep -qE "^[^ ]+ info ringrun: rank $r exited with status 0$" "$WORK/err" ||
            { cat "$WORK/out" "$WORK/err"; fail "survivor rank $r failed its own checks (CMA $cma)"; }
    done
    # Well inside the 20 s operation timeout: the dead peer's socket told them.
    [ $(( $(date +%s) - start )) -lt 15 ] || fail "the survivors took too long to notice (CMA $cma)"
    after=$(shm_entries)
    [ "$before" = "$after" ] || fail "/dev/shm changed: before [$before], after [$after]"
done
grep 'got RING_E' "$WORK/out"
ok "a rank killed mid-allreduce over shm: the 3 others get an error at once; /dev/shm is clean"

# The same while every rank runs small blocking allreduces (16) or barriers back to back:
# the engine's fast path (the call rides in the control round, on the calling thread) must
# fail the same way.
for what in 16 barrier; do
    start=$(date +%s)
    RING_TRANSPORT=shm RING_OP_TIMEOUT_SECONDS=20 \
        expect_rc 137 "$RINGRUN" -v -np 4 --kill-grace 30 "$FAULT_CHECK" kill 2 300 $what
    for r in 0 1 3; do
        grep -Eq "^\[$r\]<stdout>:rank $r: got RING_E(PEER|BROKEN) .*closed the connection" \
            "$WORK/out" ||
            { cat "$WORK/out" "$WORK/err"; fail "rank $r did not report the dead peer ($what)"; }
        grep -qE "^[^ ]+ info ringrun: rank $r exited with status 0$" "$WORK/err" ||
            { cat "$WORK/out" "$WORK/err"; fail "survivor rank $r failed its own checks ($what)"; }
    done
    [ $(( $(date +%s) - start )) -lt 15 ] || fail "the survivors took too long to notice ($what)"
    [ "$before" = "$(shm_entries)" ] || fail "/dev/shm changed after the fast-path kill ($what)"
    grep 'got RING_E' "$WORK/out"
done
ok "a rank killed during small blocking allreduces or barriers (fast path) over shm: an" \
    "error everywhere"

# A silent (stopped) rank during small blocking allreduces: the others time out, no hang.
start=$(date +%s)
RING_TRANSPORT=shm RING_OP_TIMEOUT_SECONDS=2 \
    expect_rc 137 "$RINGRUN" -v -np 3 --kill-grace 30 "$FAULT_CHECK" stall 1 300 16
for r in 0 2; do
    grep -Eq "^\[$r\]<stdout>:rank $r: got RING_E" "$WORK/out" ||
        { cat "$WORK/out" "$WORK/err"; fail "rank $r got no error from the stopped peer"; }
    grep -qE "^[^ ]+ info ringrun: rank $r exited with status 0$" "$WORK/err" ||
        { cat "$WORK/out" "$WORK/err"; fail "survivor rank $r failed its own checks"; }
done
[ $(( $(date +%s) - start )) -lt 15 ] || fail "the survivors of a stopped rank took too long"
grep 'got RING_E' "$WORK/out"
ok "a stopped rank during small blocking allreduces: the others time out, never hang"

# While a job runs, its segments are mapped but have no name anywhere.
RING_TRANSPORT=shm RING_OP_TIMEOUT_SECONDS=2 "$RINGRUN" -np 2 --kill-grace 30 \
    "$FAULT_CHECK" stall 1 1500 >"$WORK/out" 2>&1 &
job=$!
sleep 1
during=$(shm_entries)
pids=$(pgrep -f "$FAULT_CHECK stall" || true)
mapped=0
for p in $pids; do
    grep -q 'memfd:ringmaster-shm' "/proc/$p/maps" 2>/dev/null && mapped=$((mapped + 1))
done
wait $job || true
[ "$during" = "$before" ] || fail "/dev/shm has entries while a job runs: [$during]"
[ "$mapped" -ge 2 ] || fail "expected both ranks to map a ringmaster-shm segment, found $mapped"
ok "segments are anonymous (memfd): mapped by both ranks, never named in /dev/shm"

summary
