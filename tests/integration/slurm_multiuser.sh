#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringd's Slurm backend as root, against a user who attacks it (multiuser_jobs.sh does the
# same for the local backend):
#   - ringd makes each attempt's rank.N directories in a run directory the job's user may
#     already own, and gives each to the user: A races a stream of 16-rank jobs, swapping
#     every rank.N it sees for a link to a root-owned file, which must stay root's;
#   - a ":" in a job's command would start another program (a heterogeneous step of srun,
#     an app context of mpirun) outside the job's allocation: it must reach the program
#     as a word.
# Needs root and Slurm: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
: "${RINGD:?}" "${ATTACKER:?}"
command -v useradd >/dev/null && command -v setpriv >/dev/null || skip "needs useradd and setpriv"
slurm_env

UA=rmsa$$
DATA=$WORK/data
SHARED=$WORK/shared
cleanup() {
    [ -z "${PID:-}" ] || kill "$PID" 2>/dev/null || true
    [ -z "${PID:-}" ] || wait "$PID" 2>/dev/null || true
    for j in $(squeue -h -u "$UA" -o %i 2>/dev/null); do scancel "$j"; done
    pkill -9 -u "$UA" 2>/dev/null || true
    userdel "$UA" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
useradd -M -U -d "$WORK/home" -s /bin/sh "$UA" || fail "useradd $UA"
mkdir -p "$WORK/home" "$SHARED"
chown "$UA:$UA" "$WORK/home"
cp "$ATTACKER" "$WORK/attacker"
chmod 0755 "$WORK/attacker"

"$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA" --backend slurm --slurm-work-dir "$SHARED" \
    --slurm-partition debug --slurm-time-limit 30 >>"$WORK/ringd.log" 2>&1 &
PID=$!
wait_for 30 "ringd to start" '[ -s "$DATA/ringd.addr" ] || ! kill -0 $PID'
[ -s "$DATA/ringd.addr" ] || { cat "$WORK/ringd.log"; fail "ringd did not start"; }
URL="http://$(cat "$DATA/ringd.addr")"
curl -s -o "$WORK/body" -H "Authorization: Bearer $(cat "$DATA/admin.token")" \
    -H 'Content-Type: application/json' -d "{\"name\":\"a\",\"user\":\"$UA\"}" "$URL/v1/tokens"
TA=$(jq -r .token "$WORK/body")
[ -n "$TA" ] && [ "$TA" != null ] || fail "no token for $UA: $(cat "$WORK/body")"

api() { # api METHOD PATH [BODY]: as A; the code printed, the body in $WORK/body
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TA" \
        -H 'Content-Type: application/json' ${3:+-d "$3"} "$URL$2"
}
submit() { # submit SPEC: the job's id
    [ "$(api POST /v1/jobs "$1")" = 201 ] || { cat "$WORK/body" >&2; fail "submit refused: $1"; }
    jq -r .id "$WORK/body"
}
state() { api GET "/v1/jobs/$1" >/dev/null; jq -r .state "$WORK/body"; }
wait_done() { # wait_done ID SECONDS: until the job has ended, however
    local end=$((SECONDS + $2))
    until case $(state "$1") in SUCCEEDED | FAILED | CANCELLED) true ;; *) false ;; esac; do
        [ $SECONDS -lt $end ] || { tail -20 "$WORK/ringd.log" >&2; fail "job $1 is $(state "$1") after $2 s"; }
        sleep 0.2
    done
}
run_dir() { api GET "/v1/jobs/$1" >/dev/null; jq -r '.attempts[-1].run_dir' "$WORK/body"; }

# ---- the race: rank.N swapped for a link while ringd gives it to A ------------------------
id=$(submit '{"name":"first","command":["/bin/true"],"backend":"slurm"}')
wait_done "$id" 120
echo "root's" >"$WORK/victim"
chmod 0644 "$WORK/victim"
# Four at once: on a busy host ringd's thread is more often preempted between two calls.
attackers=()
for i in 1 2 3 4; do
    setpriv --reuid="$UA" --regid="$UA" --clear-groups "$WORK/attacker" swap "$SHARED/runs" \
        "$WORK/victim" 400 >"$WORK/swap.$i.out" 2>&1 &
    attackers+=($!)
done
sleep 0.5
ids=()
for i in $(seq 20); do
    ids+=("$(submit '{"name":"race","command":["/bin/true"],"workers":16,"backend":"slurm"}')")
done
for id in "${ids[@]}"; do
    wait_done "$id" 240
    [ "$(stat -c '%U %a' "$WORK/victim")" = "root 644" ] ||
        fail "A got ringd to give away a root-owned file: $(stat -c '%U %a' "$WORK/victim") ($(cat "$WORK"/swap.*.out | grep -c PLANTED) links planted)"
done
kill "${attackers[@]}" 2>/dev/null || true
wait "${attackers[@]}" 2>/dev/null || true
ok "20 jobs of 16 ranks while A swaps each rank.N for a link: the link's target stays root's ($(cat "$WORK"/swap.*.out | grep -c PLANTED) links planted, after ringd was done)"

# ---- ":" in the command, under srun and under mpirun -----------------------------------------
# srun's own words after a ":" are srun's options, mpirun's are its app context's.
for launcher in ringrun mpirun; do
    mark=$WORK/home/escaped-$launcher
    words=$([ $launcher = mpirun ] && echo '["-np", "1"]' || echo '[]')
    spec=$(jq -cn --arg m "$mark" --arg l "$launcher" --argjson w "$words" '{name: "colon",
        launcher: $l, workers: 1, backend: "slurm",
        command: (["/bin/echo", ":"] + $w + ["/usr/bin/touch", $m])}')
    id=$(submit "$spec")
    wait_done "$id" 120
    sleep 1 # an escaped program would have had its moment
    [ ! -e "$mark" ] || fail "a ':' in the command started another program under $launcher"
    run=$(run_dir "$id")
    grep -qxF "$(jq -r '.command[1:] | join(" ")' <<<"$spec")" "$run/rank.0/stdout" ||
        fail "the program did not get its words under $launcher: $(cat "$run"/rank.0/* "$run/slurm.out")"
done
ok "':' in a job's command reaches the program as a word under srun and mpirun, and starts nothing"

summary
