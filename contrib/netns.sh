# SPDX-License-Identifier: Apache-2.0
# Stand-in hosts for one machine: network namespaces on a private bridge, so that ringrun
# can start ranks "on" them (--rsh 'ip netns exec %h sh -c') and the ranks talk over real
# veth links. Sourced, not run, by tests/integration/multihost.sh and
# bench/allreduce/hosts.sh. Needs root and iproute2.
#
#   netns_up N          N namespaces; sets netns_hosts ("rhPIDa rhPIDb ..."), netns_net
#                       (the /24 prefix, "10.213.X"; the bridge is .1, host i is .(i+2))
#                       and netns_bridge. Returns 1 with the reason in netns_error when
#                       namespaces cannot be made here.
#   netns_down          removes them (call it from the caller's EXIT trap).
#
# Names carry the caller's PID, so runs at once never collide, and a run killed before its
# trap ran (a ctest timeout) is cleaned up by the next one.

netns_hosts=""
netns_net=""
netns_bridge=""
netns_error=""

netns_down() {
    local h
    for h in $netns_hosts; do ip netns del "$h" 2>/dev/null || true; done
    [ -z "$netns_bridge" ] || ip link del "$netns_bridge" 2>/dev/null || true
}

# Leftovers of runs whose PID is gone: left in place, an old bridge's address would shadow
# the subnet of a later run that happens to get the same one.
netns_sweep() {
    local old pid
    for old in $(ip -o link show type bridge | sed -n 's/^[0-9]*: \(rbr[0-9]*\)[:@].*/\1/p'); do
        kill -0 "${old#rbr}" 2>/dev/null || ip link del "$old" 2>/dev/null || true
    done
    for old in $(ip netns list | sed -n 's/^\(rh[0-9][0-9]*[a-z]\)\( .*\)\{0,1\}$/\1/p'); do
        pid=${old#rh}
        kill -0 "${pid%[a-z]}" 2>/dev/null || ip netns del "$old" 2>/dev/null || true
    done
}

netns_up() {
    local n=$1 tag=$$ i h letters=abcdefgh err
    [ "$n" -ge 1 ] && [ "$n" -le ${#letters} ] ||
        { netns_error="netns_up: between 1 and ${#letters} hosts, not $n"; return 1; }
    netns_sweep
    netns_bridge=rbr$tag
    netns_net=10.213.$((tag % 250 + 1))
    netns_hosts=""
    for ((i = 0; i < n; i++)); do
        h=rh$tag${letters:i:1}
        if ! err=$(ip netns add "$h" 2>&1); then
            netns_error="cannot create network namespaces here: $err"
            return 1
        fi
        netns_hosts="$netns_hosts${netns_hosts:+ }$h"
    done
    ip link add "$netns_bridge" type bridge
    ip addr add "$netns_net.1/24" dev "$netns_bridge"
    ip link set "$netns_bridge" up
    i=2
    for h in $netns_hosts; do
        ip link add "v$h" type veth peer name eth0 netns "$h"
        ip link set "v$h" master "$netns_bridge" up
        ip -n "$h" addr add "$netns_net.$i/24" dev eth0
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        i=$((i + 1))
    done
}
