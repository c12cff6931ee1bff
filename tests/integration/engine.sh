#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The engine, end to end: out-of-order submission, every mismatch, stalls, join, process
# sets, the timeline, the response cache, grouped allreduce.
. "$(dirname "$0")/lib.sh"
: "${ENGINE_CHECK:?}" "${FAULT_CHECK:?}" "${RIDE_CHECK:?}"

run() { expect_rc 0 "$RINGRUN" --kill-grace 2 "$@"; }

for np in 2 3 4; do
    run -np $np "$ENGINE_CHECK" order
    expect_in out "engine_check order: ok"
done
ok "100 tensors submitted in a different order on every rank, at np 2, 3 and 4"

for kind in dtype op count scale root type group; do
    run -np 4 "$ENGINE_CHECK" mismatch $kind
    [ "$(grep -c 'RING_EMISMATCH after' "$WORK/out")" = 4 ] ||
        { cat "$WORK/out" "$WORK/err"; fail "mismatch $kind: not every rank got the error"; }
done
expect_in out "allreduce 'grad/0': rank 0 put it in a group of 2, rank 3 of 1"
run -np 4 "$ENGINE_CHECK" mismatch dtype
expect_in out "allreduce 'grad/w1': rank 0 sent float32, rank 3 sent float64"
run -np 4 "$ENGINE_CHECK" mismatch duplicate
expect_in out "rank 3: allreduce 'grad/w1': a request of this name is already in flight on rank 3"
ok "every mismatch kind fails on every rank within 2 s, naming tensor, ranks and values"

RING_STALL_CHECK_SECONDS=1 run -np 3 "$ENGINE_CHECK" stall
expect_in err "warning: stall: allreduce 'lonely' was submitted by ranks 0, 2 but not by ranks 1"
ok "a stall is reported with the tensor and the missing rank"

start=$(date +%s)
RING_STALL_SHUTDOWN_SECONDS=2 run -np 3 "$ENGINE_CHECK" stall-shutdown
[ "$(grep -c 'RING_ESTALL: ' "$WORK/out")" = 3 ] || { cat "$WORK/out"; fail "not every rank got RING_ESTALL"; }
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the stall shutdown took too long"
ok "RING_STALL_SHUTDOWN_SECONDS turns a stall into an error on all ranks"

for np in 2 4; do
    run -np $np "$ENGINE_CHECK" join
    expect_in out "engine_check join: ok"
done
ok "join with uneven steps: neutral contributions, average over working ranks, last rank"

for np in 2 3; do
    run -np $np "$ENGINE_CHECK" join-cached
    expect_in out "engine_check join-cached: ok"
    RING_JOIN_BROADCAST=0 run -np $np "$ENGINE_CHECK" join-cached
    expect_in out "engine_check join-cached: ok"
done
ok "cached allgathers and broadcasts from a joined root fail with RING_EJOINED, not run"
ok "RING_JOIN_BROADCAST=0 refuses every broadcast while ranks have joined, as Horovod does"

run -np 4 "$ENGINE_CHECK" psets
expect_in out "engine_check psets: ok"
ok "process sets: two disjoint sets and an overlapping one at once"

run -np 4 "$ENGINE_CHECK" grouped
expect_in out "engine_check grouped: ok"
ok "grouped allreduce"

for np in 2 3 4; do
    run -np $np "$ENGINE_CHECK" grouped-big
    expect_in out "engine_check grouped-big: ok"
    [ "$(grep -c "group mismatch: RING_EMISMATCH: allreduce 'big/2': rank 0 sent 3000 elements, rank $((np - 1)) sent 3001" "$WORK/out")" = $np ] ||
        { cat "$WORK/out" "$WORK/err"; fail "grouped-big at np $np: not every rank got the group's mismatch"; }
done
# A cache of two entries: the groups and the single tensor evict each other every step.
RING_CACHE_CAPACITY=2 run -np 3 "$ENGINE_CHECK" grouped-big
expect_in out "engine_check grouped-big: ok"
ok "cached groups above the control round's size beside a small one and a single tensor," \
    "on a process set, with a cache too small for them, and with ranks joined; a count" \
    "changed on one rank fails the group on every rank, naming the member"

for np in 2 3; do
    run -np $np "$ENGINE_CHECK" blocking
    expect_in out "engine_check blocking: ok"
done
grep 'names to the coordinator after warm-up' "$WORK/out"
ok "blocking calls: repeated ones run on the cache, changed ones renegotiate, mismatches" \
    "fail everywhere, two threads of different kinds interleave freely"

if [ "${RING_CPU_OPERATIONS:-ring}" = mpi ]; then
    # RING_CPU_OPERATIONS=mpi moves every allreduce's data through MPI: no fast path.
    echo "# the fast path is not checked under RING_CPU_OPERATIONS=mpi (it has none)"
else
    # The fast path: a long grace, so that every rank's blocking call meets the others' in the
    # control round however loaded the machine is (the default is 200 us).
    for np in 2 3 4; do
        RING_FAST_GRACE_US=200000 run -np $np "$ENGINE_CHECK" fast
        expect_in out "engine_check fast: ok"
        [ "$(grep -c 'mismatch: RING_EMISMATCH: .*allreduce.noname' "$WORK/out")" = $np ] ||
            { cat "$WORK/out" "$WORK/err"; fail "fast path at np $np: not every rank got the mismatch"; }
    done
    grep 'fast path:' "$WORK/out"
    ok "blocking small allreduces ride in the control round (np 2, 3, 4): right results for" \
        "sum, min, max, average and scales; a mismatch there fails on every rank"

    for np in 2 3 4; do
        RING_FAST_GRACE_US=200000 run -np $np "$ENGINE_CHECK" barrier
        expect_in out "engine_check barrier: ok"
        [ "$(grep -c 'mismatch: RING_EMISMATCH: .*barrier.noname' "$WORK/out")" = $np ] ||
            { cat "$WORK/out" "$WORK/err"; fail "fast barrier at np $np: not every rank got the mismatch"; }
    done
    grep 'fast path:' "$WORK/out"
    ok "blocking barriers ride in the control round (np 2, 3, 4) among engine-path tensors and" \
        "fast allreduces: nobody leaves before the last rank entered; a mismatch fails everywhere"
fi

for np in 2 3 4; do
    run -np $np "$RIDE_CHECK"
    expect_in out "ride_check: ok"
    [ "$(grep -c 'mismatch: RING_EMISMATCH: .*ride/3' "$WORK/out")" = $np ] ||
        { cat "$WORK/out" "$WORK/err"; fail "ride_check at np $np: not every rank got the mismatch"; }
    [ "$(grep -c 'group mismatch: RING_EMISMATCH: .*rgroup/' "$WORK/out")" = $np ] ||
        { cat "$WORK/out" "$WORK/err"; fail "ride_check at np $np: not every rank got the group's mismatch"; }
    grep 'done in the control round' "$WORK/out"
done
ok "steps of small cached tensors and a grouped allreduce (mixed dtypes, ops, scales; uneven" \
    "sets; too big to ride) give the right results at np 2, 3, 4; a mismatch in a cached step" \
    "fails on every rank, in a group for the whole group"

RING_CACHE_CAPACITY=8 run -np 3 "$RIDE_CHECK" small-cache
expect_in out "ride_check: ok"
[ "$(grep -c 'group mismatch: RING_EMISMATCH: .*rgroup/' "$WORK/out")" = 3 ] ||
    { cat "$WORK/out" "$WORK/err"; fail "ride_check small-cache: not every rank got the group's mismatch"; }
ok "with a cache smaller than a step (the group's entry evicted), groups still run" \
    "whole and right"

run -np 4 "$ENGINE_CHECK" cache
expect_in out "after warm-up: 0 names to the coordinator"
grep 'after warm-up' "$WORK/out"
ok "steady state runs on the cache: the coordinator receives no names"

RING_TIMELINE="$WORK/timeline.json" run -np 2 "$ENGINE_CHECK" timeline
jq -e . "$WORK/timeline.json" >/dev/null || fail "the timeline is not valid JSON"
for phase in NEGOTIATE QUEUE ALLREDUCE MEMCPY_IN_FUSION_BUFFER MEMCPY_OUT BROADCAST; do
    jq -e --arg p $phase 'map(select(.name == $p and .ph == "B")) | length > 0' \
        "$WORK/timeline.json" >/dev/null || fail "no $phase phase in the timeline"
done
jq -e 'map(select(.ph == "M" and .args.name == "layer1/weights")) | length == 1' \
    "$WORK/timeline.json" >/dev/null || fail "no row for layer1/weights"
jq -e 'map(select(.name == "MEMCPY_IN_FUSION_BUFFER" and .args.dtype == "float32")) | length > 0' \
    "$WORK/timeline.json" >/dev/null || fail "no dtype argument on the fusion phase"
ok "the timeline is valid JSON with every phase for known tensors"

for np in 2 3; do
    run -np $np "$ENGINE_CHECK" timeline-api "$WORK/api.json"
    jq -e . "$WORK/api.json" "$WORK/api.json.2" >/dev/null || fail "a stopped timeline does not parse"
done
ok "ring_timeline_stop returns with the file complete, and a new start writes a new file"

# Killed mid-run: the file must still parse.
RING_TIMELINE="$WORK/killed.json" RING_OP_TIMEOUT_SECONDS=5 \
    expect_rc 137 "$RINGRUN" -np 2 --kill-grace 30 "$FAULT_CHECK" kill 0 300
jq -e 'length > 0' "$WORK/killed.json" >/dev/null || { tail -c 300 "$WORK/killed.json"; fail "the timeline of a killed rank 0 does not parse"; }
ok "the timeline stays valid JSON when rank 0 is killed"

summary
