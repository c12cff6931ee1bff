#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/sched/validate.sh: ringsim against real runs. A small workload of example-trainer
# jobs of different lengths, arriving over 44 s (more work than 4 slots do in that time),
# runs through a real ringd on 4 slots under each policy; the measured average JCT is set
# beside ringsim's prediction for the same workload, with the trainer's throughput per size
# and the restart overhead that ringd measured as the costs.
#
#   bench/sched/validate.sh [--json] [--policy "fifo dynamic"] [--build DIR]
#
# - Profile: the trainer alone at 1..4 ranks (its samples/s), as a user profiles a job.
# - Real runs: ringd with the policy, slots = 4, sched_interval = 10 s. Under fifo each
#   job asks for 2 workers (a fixed, tuned size); under dynamic for 1..4. JCT = the job's
#   end (its last update) - its submission, both from the API.
# - ringsim: the same arrivals and lengths, with a trace folder per job length written
#   from the profile (placements 1..4 at the trainer's per-rank batch of 32; statistics
#   that make an iteration at global batch M worth M/32 samples' progress, as the trainer
#   counts samples), --restart-cost = the start + stop overhead ringd measured in that
#   policy's run (means over its attempts), --interval 10,
#   --elastic-batch per-gpu (the trainer keeps its per-rank batch as it resizes).
#
# Each policy's run takes about two minutes; run it under the heavy lock.
set -euo pipefail

build=build
policies="fifo dynamic"
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --policy) policies=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--policy \"fifo dynamic\"] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done
build=$(cd "$build" && pwd)
ringd=$build/server/ringd
ringrun=$build/worker/ringrun/ringrun
train=$build/worker/examples/train
ringsim=$build/scheduler/ringsim
for b in "$ringd" "$ringrun" "$train" "$ringsim"; do
    [ -x "$b" ] || { echo "validate.sh: $b is not built; run make first" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "validate.sh: needs jq" >&2; exit 1; }
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT

# The workload: arrival (s after the first), epochs (16384 samples each).
arrivals=(0 4 8 12 20 28 36 44)
epochs=(8 2 5 2 6 3 2 4)
sleep_ms=20
n=${#arrivals[@]}

# Arithmetic (awk: no bc on a bare Debian).
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
# ISO 8601 with milliseconds -> seconds since the epoch.
iso_s() { jq -rn --arg t "$1" '($t | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) + ($t | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber / 1000)'; }

echo "validate: profiling the trainer at 1..4 ranks" >&2
declare -a thr
for k in 1 2 3 4; do
    thr[k]=$(cd "$work" && "$ringrun" -np "$k" "$train" --epochs 1 --step-sleep-ms "$sleep_ms" \
        --fresh | sed -n 's/.*epoch 1\/1 .*(\([0-9.]*\) samples\/s).*/\1/p' | head -1)
    [ -n "${thr[k]}" ] || { echo "validate.sh: no throughput at $k ranks" >&2; exit 1; }
done

declare -A real_avg overhead_stop overhead_start restarts
for policy in $policies; do
    echo "validate: $policy through ringd" >&2
    data=$work/data-$policy
    cat >"$work/ringd-$policy.conf" <<EOF
policy = $policy
slots = 4
sched_interval = 10
kill_grace = 10
EOF
    "$ringd" --config "$work/ringd-$policy.conf" --listen 127.0.0.1:0 --data-dir "$data" \
        --no-auth --default-user "$(id -un)" >"$work/ringd-$policy.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do [ -s "$data/ringd.addr" ] && break; sleep 0.05; done
    [ -s "$data/ringd.addr" ] || { cat "$work/ringd-$policy.log" >&2; exit 1; }
    url=http://$(cat "$data/ringd.addr")
    if [ "$policy" = fifo ] || [ "$policy" = priority ] || [ "$policy" = tiresias ]; then
        workers='{"min":2,"max":2}'
    else
        workers='{"min":1,"max":4}'
    fi
    ids=()
    t0=$(date +%s.%N)
    for i in $(seq 0 $((n - 1))); do
        # The arrival process of the workload (not a synchronisation).
        while [ "$(calc "$(date +%s.%N) - $t0 < ${arrivals[i]}")" != 0.000000 ]; do sleep 0.1; done
        ids+=("$(curl -sf -H 'Content-Type: application/json' -d "{\"name\":\"v$i\",\"command\":[\"$train\",\"--epochs\",\"${epochs[i]}\",\"--step-sleep-ms\",\"$sleep_ms\"],\"workers\":$workers}" "$url/v1/jobs" | jq -r .id)")
    done
    deadline=$((SECONDS + 900))
    for id in "${ids[@]}"; do
        until curl -sf "$url/v1/jobs/$id" | jq -e '.state | IN("SUCCEEDED", "FAILED", "CANCELLED")' >/dev/null; do
            [ $SECONDS -lt $deadline ] || { echo "validate.sh: job $id did not end" >&2; exit 1; }
            sleep 0.5
        done
    done
    sum=0
    for i in $(seq 0 $((n - 1))); do
        j=$(curl -sf "$url/v1/jobs/${ids[i]}")
        [ "$(jq -r .state <<<"$j")" = SUCCEEDED ] || { echo "validate.sh: job v$i $(jq -r .state <<<"$j")" >&2; exit 1; }
        jct=$(calc "$(iso_s "$(jq -r .updated_at <<<"$j")") - $(iso_s "$(jq -r .created_at <<<"$j")")")
        sum=$(calc "$sum + $jct")
        jq -c --arg p "$policy" --argjson jct "$jct" --argjson i "$i" \
            '{policy: $p, job: $i, jct_s: $jct, sizes: [.attempts[].world_size],
              starts_s: [.attempts[].start_overhead_s | select(. != null)],
              stops_s: [.attempts[].stop_overhead_s | select(. != null)]}' <<<"$j" >>"$work/jobs.jsonl"
    done
    real_avg[$policy]=$(calc "$sum / $n")
    # Overheads, over every attempt of the run: start -> first progress (cold starts too:
    # ringsim charges its cost to every start), and stop requested -> all ranks exited.
    o=$(jq -s --arg p "$policy" '[.[] | select(.policy == $p)]' "$work/jobs.jsonl")
    restarts[$policy]=$(jq '[.[].sizes | length - 1] | add // 0' <<<"$o")
    overhead_start[$policy]=$(jq '[.[].starts_s[]] | if length > 0 then add / length else null end' <<<"$o")
    overhead_stop[$policy]=$(jq '[.[].stops_s[]] | if length > 0 then add / length else null end' <<<"$o")
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
done


# ringsim's inputs: one application per job length.
traces=$work/traces
echo "name,time,application,num_replicas,batch_size" >"$work/workload.csv"
for i in $(seq 0 $((n - 1))); do
    e=${epochs[i]} app=train-${epochs[i]}
    if [ ! -d "$traces/$app" ]; then
        mkdir -p "$traces/$app"
        {
            echo "placement,local_bsz,step_time,sync_time"
            for k in 1 2 3 4; do echo "$k,32,$(calc "32 * $k / ${thr[k]}"),0"; done
        } >"$traces/$app/placements.csv"
        {
            echo "num_nodes,num_replicas,local_bsz,step_time,sync_time"
            for k in 1 2 3 4; do echo "1,$k,32,$(calc "32 * $k / ${thr[k]}"),0"; done
        } >"$traces/$app/scalability.csv"
        for b in 32 128; do
            {
                echo "progress,iteration,metric,grad_sqr,grad_var"
                for x in $(seq 1 "$e"); do echo "$((x * 512)),$((x * 16384 / b)),0,0,1"; done
            } >"$traces/$app/validation-$b.csv"
        done
    fi
    echo "v$i,${arrivals[i]},$app,2,64" >>"$work/workload.csv"
done

for policy in $policies; do
    # ringsim's cost of a start: what this run measured (a start, plus a stop where any).
    st=${overhead_start[$policy]} so=${overhead_stop[$policy]}
    [ "$st" != null ] || st=1
    [ "$so" != null ] || so=0
    cost=$(calc "$st + $so")
    sim=$("$ringsim" --workload "$work/workload.csv" --traces "$traces" --nodes 1 \
        --gpus-per-node 4 --policy "$policy" --restart-cost "$cost" --interval 10 \
        --elastic-batch per-gpu --json)
    pred=$(jq .avg_jct_s <<<"$sim")
    err=$(calc "($pred - ${real_avg[$policy]}) / ${real_avg[$policy]}")
    printf '{"bench":"sched-validate","impl":"%s","jobs":%d,"slots":4,"real_avg_jct_s":%.1f,"ringsim_avg_jct_s":%.1f,"error_ratio":%.3f,"restart_cost_s":%.2f,"restarts":%s,"stop_overhead_s":%s,"start_overhead_s":%s,"thr_1_per_s":%s,"thr_2_per_s":%s,"thr_4_per_s":%s}\n' \
        "$policy" "$n" "${real_avg[$policy]}" "$pred" "$err" "$cost" "${restarts[$policy]}" \
        "${overhead_stop[$policy]}" "${overhead_start[$policy]}" "${thr[1]}" "${thr[2]}" "${thr[4]}" >>"$work/rows"
done

if [ "$json" = 1 ]; then
    cat "$work/rows"
    jq -c '{bench: "sched-validate-job"} + .' "$work/jobs.jsonl"
    exit 0
fi
printf "%-9s %5s | %13s %13s %8s | %9s %8s %8s\n" policy jobs "real avg JCT" "ringsim avg" "error" restarts "stop s" "start s"
jq -r '[.impl, .jobs, .real_avg_jct_s, .ringsim_avg_jct_s, .error_ratio * 100, .restarts, (.stop_overhead_s // "-"), (.start_overhead_s // "-")] | @tsv' "$work/rows" |
    while IFS=$'\t' read -r p j r s e rs so sa; do
        printf "%-9s %5s | %13.1f %13.1f %7.1f%% | %9s %8s %8s\n" "$p" "$j" "$r" "$s" "$e" "$rs" "$so" "$sa"
    done
echo "trainer samples/s at 1..4 ranks: ${thr[1]} ${thr[2]} ${thr[3]} ${thr[4]}; ringsim's cost per start: the run's start + stop means"
echo "jobs: v0..v$((n - 1)) arriving at ${arrivals[*]} s with ${epochs[*]} epochs of 16384 samples"
