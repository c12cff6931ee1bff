#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# JobSpecs with "launcher": "mpirun" on ringd's local backend: the ranks run under Open MPI's
# mpirun with this host's slots and bootstrap through mpirun's PMIx server; the trainer
# reaches the 1-worker loss; a stop reaches every rank through mpirun (exit 75 after a
# checkpoint) and the resume runs at another size from the checkpoint. The same on Slurm
# is in slurm_ringd.sh. Needs mpirun and a PMIx build of libring.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${TRAIN:?}" "${RINGRUN:?}"
command -v mpirun >/dev/null || skip "mpirun is not installed (contrib/deps.sh installs openmpi-bin)"
[ "${RING_HAVE_PMIX:-OFF}" = ON ] || skip "libring was built without PMIx (contrib/deps.sh installs libpmix-dev)"

DATA=$WORK/data
TOL=0.02
within() { awk -v a="$1" -v b="$2" -v t="$TOL" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; }
RINGD_SLOTS=4 ringd_start "$DATA" --no-auth

api() { # api METHOD PATH [BODY]: the body in $WORK/body, the code printed
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} "$URL$2"
}
job() { curl -s "$URL/v1/jobs/$1"; }
state() { job "$1" | jq -r .state; }
run_dir() { job "$1" | jq -r '.attempts[-1].run_dir'; }
wait_state() { # wait_state ID STATE SECONDS
    for _ in $(seq $(($3 * 5))); do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    job "$1" | jq . >&2
    grep -v msg=request "$WORK/ringd.log" | tail -20 >&2
    fail "job $1 is $(state "$1"), not $2 after $3 s"
}
# submit WORKERS [extra JSON] -- COMMAND...: prints the job id
submit() {
    local w=$1 x=${2:-'{}'} cmd
    shift 2
    [ "${1:-}" = -- ] && shift
    cmd=$(printf '%s\n' "$@" | jq -R . | jq -s -c .)
    [ "$(api POST /v1/jobs "$(jq -cn --argjson w "$w" --argjson c "$cmd" --argjson x "$x" \
        '{name: "mpi", command: $c, workers: $w, launcher: "mpirun"} + $x')")" = 201 ] ||
        { cat "$WORK/body" >&2; fail "submit refused"; }
    jq -r .id "$WORK/body"
}

expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 3
l3=$(final_loss "$WORK/out")
expect_rc 0 "$RINGRUN" -np 1 "$TRAIN" --epochs 40
l40=$(final_loss "$WORK/out")

id=$(submit 3 '{}' -- /bin/sh -c 'RING_LOG_LEVEL=info exec "$0" "$@"' "$TRAIN" --epochs 3)
wait_state "$id" SUCCEEDED 120
run=$(run_dir "$id")
expect_pmix "$run" 3 "$run/ringrun.log"
l=$(final_loss "$run/rank.0/stdout")
within "$l" "$l3" || fail "3 ranks under mpirun ended at loss $l, 1 worker at $l3"
ok "an mpirun job of 3 ranks runs through ringd, bootstraps through PMIx and reaches the 1-worker loss ($l vs $l3)"

id=$(submit '{"min": 2, "max": 4}' '{"max_restarts": 0}' -- "$TRAIN" --epochs 40 --step-sleep-ms 5)
wait_state "$id" RUNNING 30
job "$id" | jq -e '.attempts[0].world_size == 4' >/dev/null || fail "the job did not get all 4 slots"
run=$(run_dir "$id")
for _ in $(seq 300); do grep -q "epoch 2/" "$run/rank.0/stdout" 2>/dev/null && break; sleep 0.2; done
grep -q "epoch 2/" "$run/rank.0/stdout" || fail "the mpirun job made no progress"
[ "$(api POST "/v1/jobs/$id/stop")" = 202 ] || { cat "$WORK/body"; fail "stop refused"; }
wait_state "$id" STOPPED 60
job "$id" | jq -e '.attempts[-1].exit_status == 75' >/dev/null ||
    { job "$id" | jq .attempts; cat "$run"/rank.*/stdout; fail "the mpirun job did not stop with 75"; }
pgrep -f "$run" >/dev/null && fail "ranks of the stopped mpirun job are still running"
holder=$(submit 2 '{}' -- "$TRAIN" --epochs 100000 --step-sleep-ms 20)
wait_state "$holder" RUNNING 30
[ "$(api POST "/v1/jobs/$id/resume")" = 200 ] || { cat "$WORK/body"; fail "resume refused"; }
wait_state "$id" SUCCEEDED 120
job "$id" | jq -e '[.attempts[].world_size] == [4, 2]' >/dev/null || { job "$id" | jq .attempts; fail "the job did not resume on 2 ranks"; }
run=$(run_dir "$id")
grep -q "resuming from .* on 2 ranks" "$run/rank.0/stdout" || { cat "$run/rank.0/stdout"; fail "the resume did not start from the checkpoint"; }
l=$(final_loss "$run/rank.0/stdout")
within "$l" "$l40" || fail "the resumed mpirun job ended at loss $l, 1 worker at $l40"
[ "$(api POST "/v1/jobs/$holder/cancel")" = 202 ] || fail "cancel of the holder refused"
wait_state "$holder" CANCELLED 30
ok "an mpirun job stops through mpirun (every rank checkpoints, exit 75) and resumes on 2 ranks, loss $l (1 worker $l40)"
summary
