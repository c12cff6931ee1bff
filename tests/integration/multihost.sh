#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two "hosts" as network namespaces on a bridge: ringrun launches ranks in them through
# --rsh 'ip netns exec %h sh -c', and the collectives run over real veth links between
# namespaces. Needs root and iproute2: skips without them, and fails in CI (lib.sh: skip).
. "$(dirname "$0")/lib.sh"
: "${COLL_CHECK:?}" "${TRAIN:?}" "${ENGINE_CHECK:?}" "${FAULT_CHECK:?}"

[ "$(id -u)" = 0 ] || skip "multi-host tests need root (ip netns); run as root"
command -v ip >/dev/null || skip "multi-host tests need iproute2 (contrib/deps.sh)"
. "$(dirname "$0")/../../contrib/netns.sh"
cleanup() {
    netns_down
    rm -rf "$WORK"
}
trap cleanup EXIT
netns_up 2 || skip "$netns_error"
hosts=$netns_hosts
net=$netns_net

set -- $hosts
expect_rc 0 "$RINGRUN" -np 4 -H "$1:2,$2:2" --rsh 'ip netns exec %h sh -c' \
    --rendezvous-addr "$net.1" --timeout 30 sh -c \
    'echo where $RING_RANK $RING_LOCAL_RANK/$RING_LOCAL_SIZE $RING_CROSS_RANK/$RING_CROSS_SIZE $(ip -4 -o addr show eth0 | awk "{print \$4}")'
expect_in out "[0]<stdout>:where 0 0/2 0/2 $net.2/24"
expect_in out "[3]<stdout>:where 3 1/2 1/2 $net.3/24"
ok "ranks start in their namespaces with host-relative ranks"

# across HOSTS ARGS...: ringrun on the namespaces, with -H HOSTS (namespace:slots,...).
across() {
    local H=$1
    shift
    "$RINGRUN" -H "$H" --rsh 'ip netns exec %h sh -c' --rendezvous-addr "$net.1" --timeout 30 "$@"
}
# hier_used NP: every rank logged its first hierarchical allreduce, with the hosts' layout.
hier_used() {
    [ "$(grep -c 'info: hierarchical allreduce, first use' "$WORK/err")" = "$1" ] ||
        { cat "$WORK/err"; fail "not every one of $1 ranks took the hierarchical allreduce"; }
}

# The flat ring across hosts, hierarchical allreduce off.
RING_HIERARCHICAL=0 RING_LOG_LEVEL=info expect_rc 0 across "$1:2,$2:2" -np 4 "$COLL_CHECK"
expect_in out "checks passed at np 4"
[ "$(grep -c 'hierarchical allreduce: off (RING_HIERARCHICAL=0)' "$WORK/err")" = 4 ] ||
    { cat "$WORK/err"; fail "RING_HIERARCHICAL=0 is not logged as off on every rank"; }
grep -q 'hierarchical allreduce, first use' "$WORK/err" && fail "RING_HIERARCHICAL=0 used it"
ok "every collective across two hosts, flat ring"

# Hierarchical: shared memory in each namespace, TCP between them. With 1 every allreduce
# of the foundation suite takes it (but the ones that ask for recursive doubling); with
# auto (the default) the ones above RING_SMALL_ALLREDUCE_BYTES, and the ring's at any size.
for mode in 1 auto; do
    RING_HIERARCHICAL=$mode RING_LOG_LEVEL=debug expect_rc 0 across "$1:2,$2:2" -np 4 "$COLL_CHECK"
    expect_in out "checks passed at np 4"
    hier_used 4
    [ "$(grep -c "hierarchical allreduce: on (RING_HIERARCHICAL=$mode) .*: 2 hosts, 2-2 ranks each, 2 slices" "$WORK/err")" = 4 ] ||
        { cat "$WORK/err"; fail "RING_HIERARCHICAL=$mode: the plan is not logged on every rank"; }
    grep -c 'mesh: 2 hosts; shm to 1 peers, tcp to 2 peers' "$WORK/err" | grep -qx 4 ||
        { cat "$WORK/err"; fail "the ranks do not use shm inside and tcp across the namespaces"; }
    ok "every collective across two hosts of 2 ranks, hierarchical allreduce (RING_HIERARCHICAL=$mode)"
done

# Uneven hosts: 2 + 1 (one slice, carried by the first rank of each host) and 2 + 3 (two
# slices; the third rank of the second host only passes data along in its host).
RING_HIERARCHICAL=1 RING_LOG_LEVEL=info expect_rc 0 across "$1:2,$2:1" -np 3 "$COLL_CHECK"
expect_in out "checks passed at np 3"
hier_used 3
expect_in err "2 hosts, 1-2 ranks each, 1 slices (uneven hosts"
RING_HIERARCHICAL=1 RING_LOG_LEVEL=info expect_rc 0 across "$1:2,$2:3" -np 5 "$COLL_CHECK"
expect_in out "checks passed at np 5"
hier_used 5
expect_in err "2 hosts, 2-3 ranks each, 2 slices (uneven hosts"
ok "every collective across uneven hosts (2+1, 2+3), hierarchical allreduce"

# The engine through the same path: fused batches (fusion buffer and zero-copy), process
# sets (sets within one host, and across hosts with one rank on each: flat), join (neutral
# contributions), grouped allreduces.
for mode in 1 auto; do
    for check in order psets join grouped; do
        RING_HIERARCHICAL=$mode RING_LOG_LEVEL=info expect_rc 0 across "$1:2,$2:2" \
            --kill-grace 2 -np 4 "$ENGINE_CHECK" $check
        expect_in out "engine_check $check: ok"
        # auto leaves the tiny tensors of the other checks to recursive doubling.
        if [ $mode = 1 ] || [ $check = order ]; then hier_used 4; fi
    done
    ok "the engine's suites across two hosts of 2 ranks (RING_HIERARCHICAL=$mode)"
done

# A rank killed in the middle of hierarchical allreduces: every other one gets an error.
RING_HIERARCHICAL=1 RING_OP_TIMEOUT_SECONDS=5 expect_rc 137 across "$1:2,$2:2" -v -np 4 \
    --kill-grace 30 "$FAULT_CHECK" kill 1 300
for r in 0 2 3; do
    grep -q "^\[$r\]<stdout>:rank $r: got RING_E" "$WORK/out" ||
        { cat "$WORK/out" "$WORK/err"; fail "rank $r reported no error"; }
    grep -qE "^[^ ]+ info ringrun: rank $r exited with status 0$" "$WORK/err" ||
        { cat "$WORK/out" "$WORK/err"; fail "survivor rank $r failed its own checks"; }
done
ok "a rank killed mid-allreduce across hosts: the 3 others get an error in time"

expect_rc 0 "$RINGRUN" -np 4 -H "$1:2,$2:2" --rsh 'ip netns exec %h sh -c' \
    --rendezvous-addr "$net.1" "$TRAIN" --epochs 3
expect_in out "final loss"
ok "the trainer across two hosts"

summary
