# SPDX-License-Identifier: Apache-2.0
# Helpers for the tests of ringd's Slurm backend (slurm_ringd.sh, slurm_dynamic.sh), sourced
# after slurm_lib.sh and slurm_env: a ringd with --backend slurm on the test cluster, a token
# for an unprivileged job user, and calls of the REST API.
DATA=$WORK/data
SHARED=$WORK/shared
JOBUSER=nobody
# The jobs run the trainer as $JOBUSER, to whom the build folder may be closed (a clone in a
# mktemp -d directory or under /root): they run a copy in $WORK, which is open to them. (It
# links libring statically: the copy needs nothing from the build folder.)
mkdir -p "$WORK/bin"
install -m 0755 "$TRAIN" "$WORK/bin/train"
TRAIN=$WORK/bin/train
TOL=0.02
within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
# The sanitizer run's leak checker must know libpmix's own leaks in the jobs too: ringd
# gives jobs a clean environment, so the spec carries LSAN_OPTIONS, naming a copy of its
# suppressions file that $JOBUSER can read (without it, LeakSanitizer fails the rank).
lsan=${LSAN_OPTIONS:-}
if [[ $lsan =~ suppressions=([^:]+) ]]; then
    install -m 0644 "${BASH_REMATCH[1]}" "$WORK/bin/lsan.supp"
    lsan=${lsan/"suppressions=${BASH_REMATCH[1]}"/suppressions=$WORK/bin/lsan.supp}
fi
JOBENV=$(jq -cn --arg l "$lsan" 'if $l == "" then {} else {LSAN_OPTIONS: $l} end')

start_ringd() {
    rm -f "$DATA/ringd.addr"
    "$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA" --backend slurm --slurm-work-dir "$SHARED" \
        --slurm-partition debug --slurm-time-limit 30 "$@" >>"$WORK/ringd.log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do [ -s "$DATA/ringd.addr" ] && break; sleep 0.05; done
    [ -s "$DATA/ringd.addr" ] || { cat "$WORK/ringd.log"; fail "ringd did not start"; }
    URL="http://$(cat "$DATA/ringd.addr")"
    ADMIN="Authorization: Bearer $(cat "$DATA/admin.token")"
}
cleanup() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    # the test's own Slurm jobs (named ringtest-*), whatever state they were left in
    for j in $(squeue -h -o '%i %j' | awk '$2 ~ /^ringtest-/ { print $1 }'); do scancel "$j"; done
    # a node the test took out of service
    for n in $(sinfo -h -R -o '%N %E' | awk '$2 == "ringtest-drain" { print $1 }'); do
        scontrol update nodename="$n" state=resume
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
# api METHOD PATH [BODY]: as the job user's token; the body in $WORK/body, the code printed.
api() {
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" -H "$AUTH" -H 'Content-Type: application/json' \
        ${3:+-d "$3"} "$URL$2"
}
job() { curl -s -H "$AUTH" "$URL/v1/jobs/$1"; }
state() { job "$1" | jq -r .state; }
wait_state() { # wait_state ID STATE SECONDS
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    job "$1" | jq . >&2
    tail -20 "$WORK/ringd.log" >&2
    squeue >&2
    fail "job $1 is $(state "$1"), not $2 after $3 s"
}
# submit NAME WORKERS GPUS_PER_WORKER [extra JSON fields] -- COMMAND...: prints the job id
submit() {
    local name=$1 workers=$2 gpw=$3 extra=${4:-'{}'}
    shift 4
    [ "${1:-}" = -- ] && shift
    local cmd
    cmd=$(printf '%s\n' "$@" | jq -R . | jq -s -c .)
    jq -cn --arg n "ringtest-$name" --argjson w "$workers" --argjson g "$gpw" --argjson c "$cmd" \
        --argjson env "$JOBENV" --argjson x "$extra" \
        '{name: $n, command: $c, workers: $w, gpus_per_worker: $g, env: $env, backend: "slurm"} + $x' \
        >"$WORK/spec.json"
    [ "$(api POST /v1/jobs "$(cat "$WORK/spec.json")")" = 201 ] || { cat "$WORK/body" >&2; fail "submit $name refused"; }
    jq -r .id "$WORK/body"
}
slurm_id() { job "$1" | jq -r '.attempts[-1].slurm_job_id'; }
run_dir() { job "$1" | jq -r '.attempts[-1].run_dir'; }
# The trainer with libring's info log (rank, layout, bootstrap) on every rank's stderr: ringd
# keeps RING_* to itself, so the command sets it.
TRAIN_INFO=(/bin/sh -c 'RING_LOG_LEVEL=info exec "$0" "$@"' "$TRAIN")

# ringd_up [FLAGS...]: ringd started with FLAGS and a token for $JOBUSER in $AUTH.
ringd_up() {
    mkdir -p "$SHARED"
    start_ringd "$@"
    [ "$(curl -s -o "$WORK/body" -w '%{http_code}' -H "$ADMIN" -H 'Content-Type: application/json' \
        -d "{\"name\":\"slurmtest\",\"user\":\"$JOBUSER\"}" -X POST "$URL/v1/tokens")" = 201 ] ||
        fail "cannot create a token for $JOBUSER: $(cat "$WORK/body")"
    AUTH="Authorization: Bearer $(jq -r .token "$WORK/body")"
}
