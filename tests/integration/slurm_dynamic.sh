#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dynamic policy on ringd's Slurm backend, on the real two-node test cluster: ringd
# decides the sizes, Slurm places them. An elastic job (2 to 4 workers, 1 GPU each) runs
# alone on all 4 GPUs; a second job's arrival shrinks it to 2 (stopped with a checkpoint,
# resubmitted as a new Slurm job, resumed from the checkpoint), and when that job ends it
# grows back to 4 the same way; it trains to the right loss.
# Needs root and Slurm: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
: "${RINGD:?}" "${TRAIN:?}" "${RINGRUN:?}"
[ "${RING_HAVE_PMIX:-OFF}" = ON ] || skip "libring was built without PMIx (contrib/deps.sh installs libpmix-dev)"
slurm_env
. "$(dirname "$0")/slurm_ringd_lib.sh"

# Passes every second, and a restart costs little here, so that a doubling pays off within
# the test's few minutes (defaults: 60 s, 10 s, 2).
cat >"$WORK/ringd.conf" <<EOF
policy = dynamic
sched_interval = 1
restart_cost = 1
hysteresis = 1
EOF
ringd_up --config "$WORK/ringd.conf"
curl -s -H "$AUTH" "$URL/v1/scheduler" | jq -e '.policy == "dynamic" and .backend == "slurm"' >/dev/null ||
    fail "ringd does not run the dynamic policy on Slurm: $(curl -s -H "$AUTH" "$URL/v1/scheduler")"

expect_rc 0 "$RINGRUN" --no-slurm -np 1 "$TRAIN" --epochs 80
l80=$(final_loss "$WORK/out")
sizes() { job "$1" | jq -c '[.attempts[].world_size]'; }
# wait_attempt ID N SIZE SECONDS: until attempt N of job ID runs at SIZE workers
wait_attempt() {
    local end=$((SECONDS + $4))
    while [ $SECONDS -lt $end ]; do
        job "$1" | jq -e --argjson n "$2" --argjson w "$3" \
            '.state == "RUNNING" and (.attempts | length) == $n and .attempts[-1].world_size == $w' >/dev/null && return 0
        sleep 0.2
    done
    job "$1" | jq . >&2
    tail -30 "$WORK/ringd.log" >&2
    fail "job $1 did not run attempt $2 at $3 workers within $4 s (sizes $(sizes "$1"))"
}

# ---- alone, the elastic job gets all 4 GPUs ----
id=$(submit elastic '{"min": 2, "max": 4}' 1 '{"max_restarts": 0}' -- "$TRAIN" --epochs 80 --step-sleep-ms 10)
wait_attempt "$id" 1 4 30
first=$(slurm_id "$id")
run=$(run_dir "$id")
wait_until 60 "the elastic job made no progress" grep -q "epoch 2/" "$run/rank.0/stdout"

# ---- shrink: a second job arrives; the elastic one gives two GPUs back ----
other=$(submit fixed 2 1 '{}' -- "$TRAIN" --epochs 8 --step-sleep-ms 10)
wait_attempt "$id" 2 2 90
second=$(slurm_id "$id")
[ "$second" != "$first" ] || fail "the shrunk attempt reused Slurm job $first"
job "$id" >"$WORK/job.json"
jq -e '.attempts[0].exit_status == 75 and (.attempts[0].reason | test("stopped .* after a checkpoint"))' "$WORK/job.json" >/dev/null ||
    { jq .attempts "$WORK/job.json"; fail "the 4-worker attempt did not stop with a checkpoint (exit 75)"; }
curl -s -H "$AUTH" "$URL/v1/jobs/$id/events" | jq -e '[.events[] | select(.type == "resized")] | length == 1' >/dev/null ||
    fail "no resized event"
wait_state "$other" RUNNING 60
run=$(run_dir "$id")
wait_until 60 "the shrunk job did not resume" grep -q "resuming from .* on 2 ranks" "$run/rank.0/stdout"
ok "a second job's arrival shrinks job $id from 4 to 2 workers: Slurm job $first stopped (exit 75), resubmitted as Slurm job $second, resumed from its checkpoint; job $other runs beside it"

# ---- grow: the second job ends; the elastic one takes all 4 GPUs again ----
wait_state "$other" SUCCEEDED 120
wait_attempt "$id" 3 4 90
third=$(slurm_id "$id")
wait_until 60 "Slurm job $third did not run on both nodes" sh -c \
    "[ \"\$(squeue -h -j $third -o '%t %D')\" = 'R 2' ]"
run=$(run_dir "$id")
wait_until 60 "the grown job did not resume" grep -q "resuming from .* on 4 ranks" "$run/rank.0/stdout"
ok "when job $other ends, job $id grows back to 4 workers as Slurm job $third on n1 and n2, from its checkpoint"

wait_state "$id" SUCCEEDED 240
job "$id" >"$WORK/job.json"
jq -e '[.attempts[:3][].world_size] == [4, 2, 4] and ([.attempts[:-1][].exit_status] | all(. == 75))' "$WORK/job.json" >/dev/null ||
    { jq .attempts "$WORK/job.json"; fail "job $id: unexpected attempts"; }
l=$(final_loss "$(run_dir "$id")/rank.0/stdout")
within "$l" "$l80" || fail "the resized job ended at loss $l, 1 worker at $l80"
ok "job $id ends after resizes $(sizes "$id") at loss $l (1 worker $l80)"
summary
