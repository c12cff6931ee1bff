#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringd's Slurm backend against the real two-node test cluster, through the REST API: a
# 2-node x 2-GPU job runs as one Slurm batch job for its token's Unix user, wires up
# through PMIx and trains to the right loss; cancel; stop and resume; an scancel outside
# ringd is reported with Slurm's reason; a restarted ringd re-adopts the Slurm jobs that
# still run; a job Slurm places elsewhere than ringd planned is recorded where it ran; a
# drained node takes nothing new, and is used again when it returns; an
# mpirun job runs inside the Slurm allocation, stops and resumes at another
# size; GET /v1/cluster shows Slurm's nodes and who holds each GPU; a job whose step could not
# start on one node fails, naming the ranks that never ran. The dynamic policy on
# Slurm is in slurm_dynamic.sh. Needs root and Slurm: skips without them, fails in CI.
export TMPDIR=/var/tmp
. "$(dirname "$0")/slurm_lib.sh"
: "${RINGD:?}" "${TRAIN:?}"
[ "${RING_HAVE_PMIX:-OFF}" = ON ] || skip "libring was built without PMIx (contrib/deps.sh installs libpmix-dev)"
slurm_env
. "$(dirname "$0")/slurm_ringd_lib.sh"

ringd_up

# ---- a 2-node x 2-GPU job ----
expect_rc 0 "$RINGRUN" --no-slurm -np 1 "$TRAIN" --epochs 3
l1=$(final_loss "$WORK/out")
expect_rc 0 "$RINGRUN" --no-slurm -np 1 "$TRAIN" --epochs 40
l40=$(final_loss "$WORK/out")
id=$(submit train 4 1 '{}' -- "${TRAIN_INFO[@]}" --epochs 3)
wait_state "$id" SUCCEEDED 120
job "$id" >"$WORK/job.json"
sid=$(jq -r '.attempts[0].slurm_job_id' "$WORK/job.json")
[[ "$sid" =~ ^[0-9]+$ ]] || { cat "$WORK/job.json"; fail "the attempt shows no slurm_job_id"; }
jq -e '.attempts | length == 1 and .[0].world_size == 4 and .[0].exit_status == 0' "$WORK/job.json" >/dev/null ||
    { cat "$WORK/job.json"; fail "bad attempt record"; }
run=$(jq -r '.attempts[0].run_dir' "$WORK/job.json")
for r in 0 1 2 3; do
    grep -qF "[ring $r] info: initialized: rank $r of 4 (local $((r % 2))/2, host $((r / 2))/2), bootstrap pmix" "$run/rank.$r/stderr" ||
        { cat "$run"/rank.*/stderr "$run/slurm.out"; fail "rank $r did not bootstrap through PMIx on its node"; }
done
[ "$(stat -c %U "$run")" = "$JOBUSER" ] || fail "the run directory belongs to $(stat -c %U "$run"), not $JOBUSER"
l=$(final_loss "$run/rank.0/stdout")
within "$l" "$l1" || fail "4 ranks on Slurm ended at loss $l, 1 worker at $l1"
ok "a 2-node x 2-GPU job runs as Slurm job $sid for $JOBUSER, bootstraps through PMIx on n1 and n2, loss $l (1 worker $l1)"

# Where Slurm put the GPUs: each rank sees one of its node's two.
id=$(submit gpus 4 1 '{}' -- /bin/sh -c 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $(id -un)"')
wait_state "$id" SUCCEEDED 60
run=$(run_dir "$id")
[ "$(cat "$run"/rank.*/stdout | sort | tr '\n' ' ')" = "n1 0 $JOBUSER n1 1 $JOBUSER n2 0 $JOBUSER n2 1 $JOBUSER " ] ||
    fail "ranks saw: $(cat "$run"/rank.*/stdout)"
ok "each of the 4 ranks gets its own GPU on its node (CUDA_VISIBLE_DEVICES) and runs as $JOBUSER"

# ---- the cluster view while a job holds GPUs ----
id=$(submit long 2 1 '{}' -- "$TRAIN" --epochs 100000 --step-sleep-ms 20)
wait_state "$id" RUNNING 30
sid=$(slurm_id "$id")
wait_until 30 "Slurm job $sid did not start" sh -c "[ \"\$(squeue -h -j $sid -o %t)\" = R ]"
curl -s -H "$ADMIN" "$URL/v1/cluster" >"$WORK/cluster.json"
jq -e --arg id "$id" '.backend == "slurm" and (.slurm.nodes | length) == 2 and
    ([.slurm.nodes[].gpus[] | select(.job == $id)] | length) == 2 and
    ([.slurm.nodes[].jobs[] | select(.job == $id)] | length) >= 1' "$WORK/cluster.json" >/dev/null ||
    { jq . "$WORK/cluster.json"; fail "/v1/cluster does not show Slurm's GPUs held by $id"; }
outside=$(sbatch --parsable -J ringtest-outside -w n2 --gres=gpu:0 -o /dev/null --wrap 'sleep 60')
wait_until 30 "the outside job did not start" sh -c "[ \"\$(squeue -h -j $outside -o %t)\" = R ]"
curl -s -H "$ADMIN" "$URL/v1/cluster" | jq -e --arg o "slurm:$outside" \
    '[.slurm.nodes[] | select(.name == "n2") | .jobs[] | select(.job == $o)] | length == 1' >/dev/null ||
    fail "/v1/cluster does not show the job submitted outside ringd"
scancel "$outside"
ok "GET /v1/cluster shows Slurm's nodes, the GPUs ringd's job holds, and a job from outside ringd"

# ---- cancel ----
[ "$(api POST "/v1/jobs/$id/cancel")" = 202 ] || { cat "$WORK/body"; fail "cancel refused"; }
wait_state "$id" CANCELLED 30
wait_until 30 "Slurm job $sid outlived the cancel" sh -c "[ -z \"\$(squeue -h -j $sid 2>/dev/null)\" ]"
ok "cancel through the API ends Slurm job $sid"

# ---- Slurm places a job elsewhere than ringd planned ----
# ringd does not count jobs from outside it, Slurm does: with n1 taken from outside, ringd
# plans its job on n1 and Slurm runs it on n2. ringd's record and model follow Slurm.
outside=$(sbatch --parsable -J ringtest-outside -w n1 --exclusive -o /dev/null --wrap 'sleep 120')
wait_until 30 "the outside job did not start" sh -c "[ \"\$(squeue -h -j $outside -o %t)\" = R ]"
id=$(submit elsewhere 2 1 '{}' -- /bin/sh -c 'echo "$SLURMD_NODENAME"; sleep 6')
wait_state "$id" SUCCEEDED 60
scancel "$outside"
[ "$(sort -u "$(run_dir "$id")"/rank.*/stdout)" = n2 ] || fail "the ranks ran on $(cat "$(run_dir "$id")"/rank.*/stdout), not on n2 only"
job "$id" | jq -e '.attempts[-1].hosts == "n2:2"' >/dev/null || { job "$id" | jq .attempts; fail "the attempt does not show n2, where Slurm ran it"; }
curl -s -H "$AUTH" "$URL/v1/jobs/$id/events" |
    jq -e '[.events[] | select(.type == "placed" and (.message | contains("runs on n2:2") and contains("planned: n1:2")))] | length == 1' >/dev/null ||
    { curl -s -H "$AUTH" "$URL/v1/jobs/$id/events" | jq .; fail "no placed event saying where Slurm ran the job"; }
ok "a job Slurm ran on n2 (ringd planned n1, taken from outside): its attempt shows n2, with a placed event"

# ---- a node out of service ----
# n2 drained while ringd runs: nothing new goes there. A job of up to 4 workers runs on n1's
# two GPUs (planned over both nodes, its n2 half would never start); when n2 is back in
# service, a job of 4 runs over both again.
scontrol update nodename=n2 state=drain reason=ringtest-drain
offline() { curl -s -H "$ADMIN" "$URL/v1/cluster" | jq -e --arg n "$1" --argjson o "$2" '.nodes[] | select(.name == $n) | .offline == $o' >/dev/null; }
wait_until 20 "ringd does not show n2 offline" offline n2 true
id=$(submit drained '{"min": 1, "max": 4}' 1 '{}' -- /bin/sh -c 'echo "$SLURMD_NODENAME"; sleep 2')
wait_state "$id" SUCCEEDED 60
job "$id" | jq -e '.attempts | length == 1 and .[0].world_size == 2 and .[0].hosts == "n1:2"' >/dev/null ||
    { job "$id" | jq .attempts; fail "with n2 drained, the job did not run on n1's 2 GPUs alone"; }
grep -q 'node n2 is out of service in slurm' "$WORK/ringd.log" || fail "ringd did not log n2 going out of service"
scontrol update nodename=n2 state=resume
wait_until 20 "ringd does not show n2 back in service" offline n2 false
id=$(submit back 4 1 '{}' -- /bin/sh -c 'echo "$SLURMD_NODENAME"')
wait_state "$id" SUCCEEDED 60
[ "$(sort "$(run_dir "$id")"/rank.*/stdout | tr '\n' ' ')" = "n1 n1 n2 n2 " ] || fail "the job after n2's return ran on $(cat "$(run_dir "$id")"/rank.*/stdout)"
ok "n2 drained: ringd places nothing new there (a job of up to 4 ran on n1's 2); back in service, used again"

# ---- stop and resume ----
id=$(submit pausable 4 1 '{"max_restarts": 0}' -- "$TRAIN" --epochs 40 --step-sleep-ms 5)
wait_state "$id" RUNNING 30
run=$(run_dir "$id")
wait_until 60 "the job made no progress" grep -q "epoch 2/" "$run/rank.0/stdout"
first=$(slurm_id "$id")
[ "$(api POST "/v1/jobs/$id/stop")" = 202 ] || { cat "$WORK/body"; fail "stop refused"; }
wait_state "$id" STOPPED 60
job "$id" | jq -e '.attempts[-1].exit_status == 75' >/dev/null || {
    job "$id" | jq .attempts
    tail -n 20 "$run/slurm.out" "$run"/rank.*/stdout "$run"/rank.*/stderr
    grep -F "$id" "$WORK/ringd.log" | tail -n 20
    fail "the stopped attempt did not exit 75"
}
grep -q "stop requested: checkpointed" "$run/rank.0/stdout" || fail "no checkpoint at the stop"
[ "$(api POST "/v1/jobs/$id/resume")" = 200 ] || { cat "$WORK/body"; fail "resume refused"; }
wait_state "$id" SUCCEEDED 120
second=$(slurm_id "$id")
[ "$second" != "$first" ] || fail "the resumed attempt reused Slurm job $first"
grep -q "resuming from" "$(run_dir "$id")/rank.0/stdout" || fail "the resumed job did not start from its checkpoint"
l=$(final_loss "$(run_dir "$id")/rank.0/stdout")
within "$l" "$l40" || fail "the resumed job ended at loss $l, 1 worker at $l40"
ok "stop through Slurm (SIGUSR2 to the steps, SIGTERM to each rank, checkpoint, exit 75) and resume as a new Slurm job ($first, then $second)"

# ---- scancel outside ringd ----
id=$(submit victim 2 1 '{"max_restarts": 3}' -- "$TRAIN" --epochs 100000 --step-sleep-ms 20)
wait_state "$id" RUNNING 30
sid=$(slurm_id "$id")
wait_until 30 "Slurm job $sid did not start" sh -c "[ \"\$(squeue -h -j $sid -o %t)\" = R ]"
scancel "$sid"
wait_state "$id" CANCELLED 30
job "$id" | jq -e --arg s "$sid" '.attempts[-1].reason | contains("cancelled outside ringd") and contains("Slurm job " + $s + ": cancelled")' >/dev/null ||
    { job "$id" | jq .attempts; fail "the outside scancel is not reported with Slurm's reason"; }
curl -s -H "$AUTH" "$URL/v1/jobs/$id/events" | jq -e '[.events[] | select(.type == "cancelled")] | length == 1' >/dev/null ||
    fail "no cancelled event"
ok "an scancel outside ringd: the job is CANCELLED (not restarted), with Slurm's reason in the attempt and an event"

# ---- a restarted ringd re-adopts running Slurm jobs ----
id=$(submit survivor 2 1 '{}' -- "$TRAIN" --epochs 30 --step-sleep-ms 10)
wait_state "$id" RUNNING 30
sid=$(slurm_id "$id")
wait_until 30 "Slurm job $sid did not start" sh -c "[ \"\$(squeue -h -j $sid -o %t)\" = R ]"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
[ "$(squeue -h -j "$sid" -o %t)" = R ] || fail "Slurm job $sid did not outlive ringd"
start_ringd
wait_until 10 "the restarted ringd did not adopt job $id" sh -c \
    "curl -s -H '$AUTH' '$URL/v1/jobs/$id/events' | jq -e '[.events[] | select(.type == \"adopted\")] | length == 1' >/dev/null"
[ "$(state "$id")" = RUNNING ] && [ "$(slurm_id "$id")" = "$sid" ] || { job "$id" | jq .; fail "job $id was not adopted as it ran"; }
wait_state "$id" SUCCEEDED 120
job "$id" | jq -e '.attempts | length == 1 and .[0].exit_status == 0' >/dev/null ||
    { job "$id" | jq .attempts; fail "the adopted attempt did not end as itself"; }
ok "after kill -9 of ringd, the restarted ringd re-adopts Slurm job $sid and sees it succeed"

# ---- an mpirun job inside the Slurm allocation ----
id=$(submit mpi '{"min": 2, "max": 4}' 1 '{"launcher": "mpirun"}' -- "${TRAIN_INFO[@]}" --epochs 40 --step-sleep-ms 5)
wait_state "$id" RUNNING 30
run=$(run_dir "$id")
wait_until 60 "the mpirun job made no progress" grep -q "epoch 2/" "$run/rank.0/stdout"
expect_pmix "$run" 4 "$run/slurm.out"
[ "$(api POST "/v1/jobs/$id/stop")" = 202 ] || fail "stop of the mpirun job refused"
wait_state "$id" STOPPED 60
job "$id" | jq -e '.attempts[-1].exit_status == 75' >/dev/null || { cat "$run/slurm.out"; fail "the mpirun job did not stop with 75"; }
# Two of the four GPUs taken by another ringd job: the resume gets the other two.
holder=$(submit holder 2 1 '{}' -- "$TRAIN" --epochs 100000 --step-sleep-ms 20)
wait_state "$holder" RUNNING 30
[ "$(api POST "/v1/jobs/$id/resume")" = 200 ] || fail "resume of the mpirun job refused"
wait_state "$id" SUCCEEDED 120
job "$id" | jq -e '[.attempts[].world_size] == [4, 2]' >/dev/null || { job "$id" | jq .attempts; fail "the mpirun job did not resume on 2 ranks"; }
run=$(run_dir "$id")
grep -q "resuming from .* on 2 ranks" "$run/rank.0/stdout" || { cat "$run/rank.0/stdout"; fail "the mpirun job did not resume from its checkpoint"; }
l=$(final_loss "$run/rank.0/stdout")
within "$l" "$l40" || fail "the mpirun job ended at loss $l, 1 worker at $l40"
[ "$(api POST "/v1/jobs/$holder/cancel")" = 202 ] || fail "cancel of the holder refused"
ok "an mpirun job runs in its Slurm allocation (PMIx from mpirun), stops with 75 and resumes on 2 ranks, loss $l"

# ---- a node that cannot launch its part of the step ----
# n1's slurmstepd cannot set up PMIx for a step whose rendezvous directory is already there
# (as once in CI, left by an earlier cluster's job of the same id): ranks 0 and 1 never run,
# and srun exits 0 when n2's ranks end before it aborts them. The next job id is blocked on
# n1. That attempt is lost to Slurm, not failed by the program: the reason names the ranks
# that never started, and the job runs again without spending a restart (max_restarts 0).
probe=$(sbatch --parsable -p debug -N1 -o /dev/null --wrap true)
uid=$(id -u "$JOBUSER")
blocked="$SLURM_CLUSTER/n1-tmp/spmix_appdir_${uid}_$((probe + 1)).0"
mkdir "$blocked"
id=$(submit halfstart 4 1 '{"max_restarts": 0}' -- /bin/sh -c 'echo "rank $SLURM_PROCID ran on $SLURMD_NODENAME"')
wait_state "$id" SUCCEEDED 90
rmdir "$blocked"
job "$id" | jq -e '(.attempts | length) == 2 and (.attempts[0].reason | test("[24] of 4 ranks never started \\(ranks 0, 1"))' >/dev/null ||
    { job "$id" | jq .attempts; fail "a job whose ranks on n1 never started was not run again, or its reason does not name them"; }
curl -s -H "$AUTH" "$URL/v1/jobs/$id/events" |
    jq -e 'any(.events[]; .type == "retry" and (.message | contains("lost by the resource manager")))' >/dev/null ||
    fail "no retry event says that the attempt was lost by the resource manager"
ok "a step that Slurm could not launch on n1: the attempt names the ranks that never started, and the job ran again without spending a restart"
summary
