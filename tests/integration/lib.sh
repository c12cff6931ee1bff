# SPDX-License-Identifier: Apache-2.0
# Helpers for the integration scripts: sourced, not run.
set -euo pipefail

: "${RINGRUN:?RINGRUN must name the ringrun binary (ctest sets it)}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringtest.XXXXXX")
# The contract test (tests/contract): with RING_CONTRACT_RECORDS set (ctest sets it), every
# ringd a script starts appends each response it sends to a file there
# (RINGD_RECORD_RESPONSES, server/record.h), and tests/contract/check_responses.py checks
# them all against api/openapi.json once the suites have run. A ringd that runs as another
# user (RINGD_AS) cannot reach the build folder: it records into its data directory, which
# its jobs never see, and ringd_stop, ringd_crash and lib_exit move the record over.
if [ -n "${RING_CONTRACT_RECORDS:-}" ]; then
    mkdir -p "$RING_CONTRACT_RECORDS"
    export RINGD_RECORD_RESPONSES="$RING_CONTRACT_RECORDS/$(basename "$0" .sh).$$.jsonl"
fi
ringd_record=
record_collect() {
    [ -n "$ringd_record" ] && [ -f "$ringd_record" ] || return 0
    cat "$ringd_record" >>"$RINGD_RECORD_RESPONSES" && rm -f "$ringd_record"
}

# A script that sets its own EXIT trap calls lib_exit from it.
lib_exit() {
    [ -z "${ringd_pid:-}" ] || kill -9 "$ringd_pid" 2>/dev/null || true
    record_collect || true
    rm -rf "$WORK"
}
trap lib_exit EXIT
passed=0
# As root, ringd runs jobs only as a chosen Unix user: the tests run theirs as the user who
# runs the tests (root in CI); ringd_isolation.sh checks jobs running as other users.
export RINGD_DEFAULT_USER="${RINGD_DEFAULT_USER:-$(id -un)}"

# A TCP port nobody listens on, below the kernel's ephemeral range: a port the kernel may
# hand to some outgoing connection at any moment cannot be relied on for a restart.
free_port() {
    local low p
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 12000 ] || low=32768
    for _ in $(seq 50); do
        p=$((10000 + RANDOM % (low - 10000)))
        (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p"; return 0; }
    done
    fail "no free TCP port below $low"
}

# final_loss FILE: the last loss the example trainer printed in FILE ("final loss X").
final_loss() { sed -n 's/.*final loss \([0-9.]*\).*/\1/p' "$1" | tail -1; }

# expect_pmix RUN NP [LOG...]: every rank of the attempt in the run directory RUN logged
# (RING_LOG_LEVEL=info) that it bootstrapped through PMIx as rank r of NP; on failure
# prints the ranks' stderr and the LOGs.
expect_pmix() {
    local run=$1 np=$2 r
    shift 2
    for ((r = 0; r < np; r++)); do
        grep -q "initialized: rank $r of $np .*bootstrap pmix" "$run/rank.$r/stderr" ||
            { cat "$@" "$run"/rank.*/stderr; fail "rank $r of $np did not bootstrap through PMIx"; }
    done
}

# skip WHY: this test cannot run here. Outside CI it skips (exit 77, which ctest reports as
# skipped, with WHY). CI (CI=true) runs as root with every package installed, so there a
# missing prerequisite fails the test: CI must never pass by skipping.
skip() {
    [ "${CI:-}" != true ] || fail "cannot run in CI (CI=true): $*"
    echo "SKIP: $*"
    exit 77
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}

# expect_rc WANT CMD...: runs CMD with output in $WORK/out and $WORK/err, checks the status.
expect_rc() {
    local want=$1 rc=0
    shift
    "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    if [ "$rc" != "$want" ]; then
        echo "--- stdout" >&2; cat "$WORK/out" >&2
        echo "--- stderr" >&2; cat "$WORK/err" >&2
        fail "'$*' exited $rc, want $want"
    fi
}

# expect_in FILE TEXT: FILE (out or err) contains TEXT.
expect_in() {
    grep -qF -- "$2" "$WORK/$1" || { cat "$WORK/$1" >&2; fail "$1 lacks '$2'"; }
}

# wait_for SECONDS WHAT CONDITION: evaluates CONDITION (shell code) every 50 ms until it
# holds, and fails naming WHAT when it still does not after SECONDS. Tests wait for the
# condition they need, never for a fixed time: a sleep is too short on a loaded machine
# (or under a sanitizer) and too long everywhere else. SECONDS is a deadline, not a
# duration, so make it generous. WAIT_POLL_S sets the poll period (a script whose
# condition costs processes polls less often).
wait_for() {
    local limit=$1 what=$2 cond=$3 end=$((SECONDS + $1))
    until eval "$cond"; do
        [ "$SECONDS" -lt "$end" ] || fail "$what: still not so after ${limit} s"
        sleep "${WAIT_POLL_S:-0.05}"
    done
}

# ringd_start DATA [ARGS...]: starts $RINGD in the background on a port of its choosing
# (RINGD_LISTEN=HOST:PORT for a given one: a restart on the address clients know),
# with DATA as its data directory and its output appended to $WORK/ringd.log, and waits
# until it serves; sets ringd_pid, ADDR (host:port) and URL. Fails, showing the log, when
# ringd exits instead. RINGD_AS=USER runs it as that Unix user (and gives DATA to USER);
# ringd reads the rest of its settings from the caller's environment (RINGD_*).
ringd_pid=
ringd_start() {
    local data=$1
    shift
    mkdir -p "$data"
    rm -f "$data/ringd.addr"
    local cmd=("$RINGD" --listen "${RINGD_LISTEN:-127.0.0.1:0}" --data-dir "$data" "$@")
    if [ -n "${RINGD_AS:-}" ]; then
        chown "$RINGD_AS" "$data"
        cmd=(setpriv --reuid="$RINGD_AS" --regid="$(id -g "$RINGD_AS")" --clear-groups "${cmd[@]}")
        if [ -n "${RINGD_RECORD_RESPONSES:-}" ]; then
            record_collect
            ringd_record=$data/contract-record.jsonl
            cmd=(env RINGD_RECORD_RESPONSES="$ringd_record" "${cmd[@]}")
        fi
    fi
    "${cmd[@]}" >>"$WORK/ringd.log" 2>&1 &
    ringd_pid=$!
    wait_for 30 "ringd to start or exit" \
        '[ -s "$data/ringd.addr" ] || ! kill -0 $ringd_pid 2>/dev/null'
    [ -s "$data/ringd.addr" ] || { cat "$WORK/ringd.log" >&2; fail "ringd exited"; }
    ADDR=$(cat "$data/ringd.addr")
    URL="http://$ADDR"
}

# ringd_stop: SIGTERM to the ringd of ringd_start; it must exit 0 (under ASan: no leaks).
ringd_stop() {
    local rc=0
    kill -TERM "$ringd_pid"
    wait "$ringd_pid" || rc=$?
    ringd_pid=
    record_collect
    [ "$rc" = 0 ] || fail "ringd exited $rc after SIGTERM (under ASan: a leak?)"
}

# ringd_crash: kill -9 of the ringd of ringd_start, as a power cut would.
ringd_crash() {
    kill -9 "$ringd_pid"
    wait "$ringd_pid" 2>/dev/null || true
    ringd_pid=
    record_collect
}

summary() {
    echo "$passed passed, 0 failed"
}
