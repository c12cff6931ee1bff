#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ranks of a running job against another user of the machine, and against a process of
# the job's own user that does not hold the job's secret (README, Security): a real job
# through ringrun, held in set-up (its last rank waits for a file) so that the others sit
# with their TCP listeners and shared-memory sockets open; then, as a real unprivileged Unix
# user, SET and GET at the rendezvous, forged hellos at every TCP listener, a memfd offered
# at every shared-memory socket; and the same as root with a secret of its own. Every
# attempt must be refused, the ranks must log the refusals, and the job must still finish
# with the right allreduce, as if nobody had called.
. "$(dirname "$0")/lib.sh"
: "${ATTACK_CHECK:?}"

[ "$(id -u)" = 0 ] || skip "needs root: it creates a Unix user to attack from"
command -v useradd >/dev/null || skip "useradd is missing (Debian's passwd package)"
command -v runuser >/dev/null || skip "runuser is missing (util-linux)"

ATTACKER=ringattacker
id -u "$ATTACKER" >/dev/null 2>&1 ||
    useradd --system --no-create-home --shell /usr/sbin/nologin "$ATTACKER" ||
    id -u "$ATTACKER" >/dev/null 2>&1 || fail "cannot create the user $ATTACKER"
# The attacker's own copy of the tool, where it can reach it.
tools=$(mktemp -d /tmp/ringattack.XXXXXX)
cp "$ATTACK_CHECK" "$tools/attack_check"
chmod 755 "$tools" "$tools/attack_check"
trap 'rm -rf "$tools"; lib_exit' EXIT
as_attacker() { runuser -u "$ATTACKER" -- "$tools/attack_check" "$@"; }
as_root() { "$tools/attack_check" "$@"; }

# rank_pid R: the pid of rank R of the job ringrun $job_pid started.
rank_pid() {
    local p
    for p in $(pgrep -P "$job_pid"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RING_RANK=$1" && { echo "$p"; return; }
    done
}

# tcp_listeners PID: "address:port" of each TCP socket PID listens on (root reads its fds to
# tell its sockets from others'; an attacker scans /proc/net/tcp, which every user can read).
tcp_listeners() {
    local inodes line
    inodes=" $(ls -l "/proc/$1/fd" 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\]$/\1/p' | tr '\n' ' ') "
    while read -r _ local _ st _ _ _ _ _ inode _; do
        [ "$st" = 0A ] && [[ "$inodes" == *" $inode "* ]] || continue
        line=${local%:*}
        printf '%d.%d.%d.%d:%d\n' "0x${line:6:2}" "0x${line:4:2}" "0x${line:2:2}" "0x${line:0:2}" \
            "0x${local#*:}"
    done < <(tail -n +2 /proc/net/tcp)
}

# shm_socket PID: the abstract name PID's shared-memory transport listens on (every user
# can list them in /proc/net/unix).
shm_socket() { grep -o "@ringmaster\.$1\.[0-9a-f]*" /proc/net/unix | head -1 | cut -c2-; }

# attack NP TRANSPORT: one job of NP ranks (RING_TRANSPORT=TRANSPORT) under every attack.
attack() {
    local np=$1 transport=$2 go=$WORK/go.$2 held=$(($1 - 1)) r pid rdv addr name n=0 per
    local pids=() rank_pids=()
    rm -f "$go"
    ATTACK_HOLD_RANK=$held ATTACK_GO=$go RING_TRANSPORT=$transport RING_TIMEOUT_SECONDS=120 \
        "$RINGRUN" -np "$np" --kill-grace 2 "$ATTACK_CHECK" job >"$WORK/job.out" 2>"$WORK/job.err" &
    job_pid=$!
    for ((r = 0; r < held; r++)); do
        wait_for 30 "rank $r of the $transport job started" '[ -n "$(rank_pid $r)" ]'
        rank_pids[r]=$(rank_pid $r)
        wait_for 30 "rank $r listens" '[ -n "$(tcp_listeners ${rank_pids[r]})" ]'
        [ "$transport" = tcp ] ||
            wait_for 30 "rank $r's shm socket" '[ -n "$(shm_socket ${rank_pids[r]})" ]'
    done
    rdv=$(tr '\0' '\n' <"/proc/${rank_pids[0]}/environ" | sed -n 's/^RING_RENDEZVOUS=//p')
    [ -n "$rdv" ] || fail "no RING_RENDEZVOUS in rank 0's environment"
    # The secret reaches a rank in its environment, which the attacker cannot read, and
    # ring_init takes it out of there (the held rank has not called it yet).
    ! runuser -u "$ATTACKER" -- cat "/proc/${rank_pids[0]}/environ" >/dev/null 2>&1 ||
        fail "$ATTACKER can read a rank's environment"
    ! tr '\0' '\n' <"/proc/${rank_pids[0]}/environ" | grep -q '^RING_JOB_SECRET=.' ||
        fail "rank 0's /proc/PID/environ still shows the secret after ring_init"

    as_attacker rdv "$rdv" >"$WORK/a.rdv" 2>&1 &
    pids+=($!)
    as_root rdv "$rdv" >"$WORK/r.rdv" 2>&1 &
    pids+=($!)
    for ((r = 0; r < held; r++)); do
        for addr in $(tcp_listeners "${rank_pids[r]}"); do
            # A one-host job listens on loopback only: nothing off the host reaches it.
            [ "${addr%:*}" = 127.0.0.1 ] || fail "rank $r listens on $addr, not on loopback only"
            as_attacker tcp "$addr" "$held" "$np" >"$WORK/a.tcp.$r" 2>&1 &
            pids+=($!)
            as_root tcp "$addr" "$held" "$np" >"$WORK/r.tcp.$r" 2>&1 &
            pids+=($!)
        done
        if [ "$transport" != tcp ]; then
            name=$(shm_socket "${rank_pids[r]}")
            as_attacker shm "$name" "$held" "$np" >"$WORK/a.shm.$r" 2>&1 &
            pids+=($!)
            as_root shm "$name" "$held" "$np" >"$WORK/r.shm.$r" 2>&1 &
            pids+=($!)
        fi
    done
    # Let the attackers' connections arrive before the last rank does.
    sleep 0.5
    touch "$go"
    for pid in "${pids[@]}"; do
        wait "$pid" || { cat "$WORK"/[ar].*; fail "an attack on the $transport job got in (or could not connect)"; }
    done
    wait "$job_pid" || { cat "$WORK/job.out" "$WORK/job.err"; fail "the attacked $transport job failed"; }
    for ((r = 0; r < np; r++)); do
        grep -qx "\[$r\]<stdout>:rank $r of $np: allreduce right" "$WORK/job.out" ||
            { cat "$WORK/job.out" "$WORK/job.err"; fail "rank $r of the $transport job: no right result"; }
    done
    # 4 attempts at the rendezvous per attacker; per held-up rank and attacker, 2 at its TCP
    # listener and 1 at its shm socket.
    per=6
    [ "$transport" != tcp ] || per=4
    n=$(cat "$WORK"/[ar].* | grep -c ': refused (')
    [ "$n" = $((8 + held * per)) ] ||
        { cat "$WORK"/[ar].*; fail "$n attempts reported back"; }
    ! grep -q 'GOT IN' "$WORK"/[ar].* || { cat "$WORK"/[ar].*; fail "an attack got in"; }
    # The ranks saw the strangers and said so: refused at once (the other uid at a shm
    # socket, a proof that is none), or closed when set-up ended (a caller still talking).
    # ringrun counted the ones at its rendezvous.
    if [ "$transport" = tcp ]; then
        grep -Eq "tcp: (refused a connection|closed [0-9]+ connections? that had not proved)" \
            "$WORK/job.err" || { cat "$WORK/job.err"; fail "no rank logged a refused TCP caller"; }
    else
        grep -q "shm: refused a connection from uid $(id -u "$ATTACKER")" "$WORK/job.err" ||
            { cat "$WORK/job.err"; fail "no rank logged the other user's shm connection"; }
        grep -Eq "shm: (refused a connection: a caller as rank $held that did not prove|closed [0-9]+ connections? that had not proved)" \
            "$WORK/job.err" ||
            { cat "$WORK/job.err"; fail "no rank logged the same-user shm caller without the secret"; }
    fi
    grep -Eq "ringrun: the rendezvous closed ([89]|[1-9][0-9]+) connections that did not prove" \
        "$WORK/job.err" || { cat "$WORK/job.err"; fail "ringrun did not count the rendezvous attempts"; }
    rm -f "$WORK"/[ar].*
    ok "np $np over $transport: $n attempts as $ATTACKER and as root without the secret refused; the job ran right"
}

attack 3 auto
attack 4 tcp
attack 2 shm
