#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Jobs whose rendezvous is flooded while their ranks start, as any local user can do without
# the job's secret: one process connects to ringrun's port as fast as it can, and either
# closes each connection at once or holds the last few hundred open, saying nothing
# (rdv_flood.c). The ranks dial only once the flood runs. Every job must still finish with
# the right allreduce: a connection that proves nothing must never push out a rank that is
# proving the secret. Each job is a real ringrun of 2 to 4 ranks (attack_check job).
. "$(dirname "$0")/lib.sh"
: "${ATTACK_CHECK:?}" "${RDV_FLOOD:?}"

JOBS=${RDV_FLOOD_JOBS:-10}
# The ranks wait for the flooder's file (at most 30 s: a flooder that died must not hang
# the job), then start as a rank does.
GATE='n=0; while [ ! -e "$0" ] && [ $n -lt 3000 ]; do sleep 0.01; n=$((n + 1)); done; exec "$1" job'

failed=0
rates=()
for ((i = 0; i < JOBS; i++)); do
    np=$((2 + i % 3))
    mode=close
    [ $((i % 2)) = 0 ] || mode=silent
    go=$WORK/go.$i
    rc=0
    RING_TIMEOUT_SECONDS=30 "$RINGRUN" -np "$np" --kill-grace 2 \
        /bin/sh -c "$GATE" "$go" "$ATTACK_CHECK" >"$WORK/job.$i.out" 2>"$WORK/job.$i.err" &
    job=$!
    "$RDV_FLOOD" "$job" "$go" "$mode" 60 >"$WORK/flood.$i" 2>&1 &
    flood=$!
    wait "$job" || rc=$?
    wait "$flood" || { cat "$WORK/flood.$i" >&2; fail "the flooder of job $i failed"; }
    rate=$(sed -n 's/.*: \([0-9]*\) per second$/\1/p' "$WORK/flood.$i")
    rates+=("${rate:-0}")
    if [ "$rc" != 0 ] || [ "$(grep -c 'allreduce right' "$WORK/job.$i.out")" != "$np" ]; then
        failed=$((failed + 1))
        echo "--- job $i ($np ranks, $mode flood): ringrun exited $rc" >&2
        cat "$WORK/flood.$i" "$WORK/job.$i.err" >&2
    fi
done
median=$(printf '%s\n' "${rates[@]}" | sort -n | sed -n "$(((JOBS + 1) / 2))p")
echo "flooders made a median of $median connections per second (per job: ${rates[*]})"
echo "ranks dialed the rendezvous again $(cat "$WORK"/job.*.err | grep -c 'dialing again') times"
[ "$failed" = 0 ] || fail "$failed of $JOBS flooded jobs failed"
ok "$JOBS jobs of 2 to 4 ranks finished under a flood of connections to their rendezvous"
summary
