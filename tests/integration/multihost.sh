#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two "hosts" as network namespaces on a bridge: ringrun launches ranks in them through
# --rsh 'ip netns exec %h sh -c', and the collectives run over real veth links between
# namespaces. Needs root and iproute2: skips without them, and fails in CI (lib.sh: skip).
. "$(dirname "$0")/lib.sh"
: "${COLL_CHECK:?}" "${TRAIN:?}"

[ "$(id -u)" = 0 ] || skip "multi-host tests need root (ip netns); run as root"
command -v ip >/dev/null || skip "multi-host tests need iproute2 (contrib/deps.sh)"
# Names unique to this run, so parallel runs and leftovers never collide.
tag=$$
br=rbr$tag
hosts="rh${tag}a rh${tag}b"
cleanup() {
    for h in $hosts; do ip netns del "$h" 2>/dev/null || true; done
    ip link del "$br" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
# Leftovers of runs killed before their trap ran (ctest's timeout kills): a bridge rbrPID or
# a namespace rhPIDa/b whose PID is gone. Left in place, an old bridge's address shadows the
# subnet of a later run that happens to get the same one.
for old in $(ip -o link show type bridge | sed -n 's/^[0-9]*: \(rbr[0-9]*\)[:@].*/\1/p'); do
    kill -0 "${old#rbr}" 2>/dev/null || ip link del "$old" 2>/dev/null || true
done
for old in $(ip netns list | sed -n 's/^\(rh[0-9]*[ab]\)\( .*\)\{0,1\}$/\1/p'); do
    pid=${old#rh}
    kill -0 "${pid%[ab]}" 2>/dev/null || ip netns del "$old" 2>/dev/null || true
done
ip netns add "rh${tag}a" 2>"$WORK/netns.err" ||
    skip "cannot create network namespaces here: $(cat "$WORK/netns.err")"
ip netns add "rh${tag}b"
# A private test subnet that exists only inside this bridge and its namespaces, one per run
# so that runs at once do not collide.
net=10.213.$((tag % 250 + 1))
ip link add "$br" type bridge
ip addr add "$net.1/24" dev "$br"
ip link set "$br" up
i=2
for h in $hosts; do
    ip link add "v$h" type veth peer name eth0 netns "$h"
    ip link set "v$h" master "$br" up
    ip -n "$h" addr add "$net.$i/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    i=$((i + 1))
done

set -- $hosts
expect_rc 0 "$RINGRUN" -np 4 -H "$1:2,$2:2" --rsh 'ip netns exec %h sh -c' \
    --rendezvous-addr "$net.1" --timeout 30 sh -c \
    'echo where $RING_RANK $RING_LOCAL_RANK/$RING_LOCAL_SIZE $RING_CROSS_RANK/$RING_CROSS_SIZE $(ip -4 -o addr show eth0 | awk "{print \$4}")'
expect_in out "[0]<stdout>:where 0 0/2 0/2 $net.2/24"
expect_in out "[3]<stdout>:where 3 1/2 1/2 $net.3/24"
ok "ranks start in their namespaces with host-relative ranks"

expect_rc 0 "$RINGRUN" -np 4 -H "$1:2,$2:2" --rsh 'ip netns exec %h sh -c' \
    --rendezvous-addr "$net.1" --timeout 30 "$COLL_CHECK"
expect_in out "checks passed at np 4"
ok "every collective across two hosts"

expect_rc 0 "$RINGRUN" -np 4 -H "$1:2,$2:2" --rsh 'ip netns exec %h sh -c' \
    --rendezvous-addr "$net.1" "$TRAIN" --epochs 3
expect_in out "final loss"
ok "the trainer across two hosts"

summary
