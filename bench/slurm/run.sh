#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/slurm: submitting to Slurm through ringd against Slurm's own front doors, on the
# two-node test cluster (contrib/slurm/testcluster.sh --rest), in one run:
#
#   1. Submission: N jobs (default 1,000) one after the other, each one 1-task job running
#      /bin/true, through
#        ringd     POST /v1/jobs to ringd --backend slurm (the job is stored, then ringd's
#                  scheduler submits it to Slurm with slurm_submit_batch_job)
#        sbatch    the sbatch command, with true in the batch script itself (Slurm's floor)
#                  and as an srun --mpi=pmix step (sbatch-srun), which is what each of ringd's
#                  jobs runs: the fair peer for the time until all N jobs have run
#        slurmrestd POST /slurm/v0.0.38/job/submit (JWT auth)
#      Both REST servers are driven by the same client (post.py: one keep-alive connection).
#      Rows: submissions per second and the latency of one submission (p50, p99) as the
#      client sees it; then the time until all N jobs have run, which for ringd includes
#      its own scheduling (it submits to Slurm as its cluster model frees up).
#   2. Start: a 4-rank job over both nodes (2 x 2) whose ranks each record when they run,
#      submitted through ringd and through sbatch (srun --mpi=pmix in both); the time from
#      the submission to the last rank running, median of R runs.
#
# A human table by default; --json prints one object per row. Needs root (the cluster).
# The cluster is $RING_SLURM_CLUSTER (or --cluster DIR) when given, which must have been
# started with --rest; otherwise the run starts one of its own and stops it at the end.
# --only picks parts (ringd, sbatch, slurmrestd, start; default all), so that a long run
# can be split into several short ones on a shared machine.
# --batch-sched-delay S sets slurmctld's SchedulerParameters=batch_sched_delay=S for the run
# (and puts the cluster's slurm.conf back at the end). Slurm's default is 3 s: slurmctld may
# hold a newly submitted batch job that long to schedule many submissions at once. On an
# empty cluster a batch job then waits 1.5-2 s in PD, against 0.2-0.8 s with 0. sbatch's
# queue of N jobs pays it about once; ringd, which submits only what fits its model of the
# cluster, pays it with every wave of jobs it starts. Each row says which setting it ran with.
#
#   bench/slurm/run.sh [--json] [--jobs N] [--runs R] [--build DIR] [--cluster DIR]
#                      [--only ringd,sbatch,slurmrestd,start] [--batch-sched-delay S]
set -euo pipefail
json=0 jobs=1000 runs=5 build=build cluster=${RING_SLURM_CLUSTER:-} only=ringd,sbatch,slurmrestd,start
delay=
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --jobs) jobs=$2; shift ;;
    --runs) runs=$2; shift ;;
    --build) build=$2; shift ;;
    --cluster) cluster=$2; shift ;;
    --only) only=$2; shift ;;
    --batch-sched-delay) delay=$2; shift ;;
    --version) echo "bench/slurm 1"; exit 0 ;;
    *) echo "usage: $0 [--json] [--jobs N] [--runs R] [--build DIR] [--cluster DIR] [--only PARTS]"
        echo "       [--batch-sched-delay S]" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$delay" ] && ! [[ $delay =~ ^[0-9]+$ ]]; then
    echo "bench/slurm: --batch-sched-delay wants whole seconds, not '$delay'" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || { echo "bench/slurm: the test cluster runs as root; run this as root" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
export PATH=$PATH:/usr/sbin
# Outside /tmp: node n2 has a private /tmp, and every job's files must be seen by both.
work=$(mktemp -d /var/tmp/ringbench-slurm.XXXXXX)
chmod 0755 "$work"
own=0
[ -n "$cluster" ] || { cluster=$work/cluster; own=1; }
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
pid=
conf_saved=
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
    if [ -n "$conf_saved" ]; then
        cp "$conf_saved" "$SLURM_CONF" && scontrol reconfigure >/dev/null 2>&1 || true
    fi
    [ "$own" = 0 ] || "$here/../../contrib/slurm/testcluster.sh" stop "$cluster" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
if [ "$own" = 1 ]; then
    "$here/../../contrib/slurm/testcluster.sh" start "$cluster" --rest >&2
else
    "$here/../../contrib/slurm/testcluster.sh" status "$cluster" ||
        { echo "bench/slurm: the cluster in $cluster is not running" >&2; exit 1; }
fi
# shellcheck disable=SC1091
. "$cluster/env"
if [ -n "$delay" ]; then
    grep -q '^SchedulerParameters=' "$SLURM_CONF" &&
        { echo "bench/slurm: $SLURM_CONF already sets SchedulerParameters; not touching it" >&2; exit 1; }
    conf_saved=$work/slurm.conf.saved
    cp "$SLURM_CONF" "$conf_saved"
    echo "SchedulerParameters=batch_sched_delay=$delay" >>"$SLURM_CONF"
    scontrol reconfigure
    sleep 1
fi
sched_delay=${delay:-default}
rows=$work/rows
: >"$rows"

# ---- helpers ----
now() { date +%s.%N; }
# stats FILE: "p50 p99" (ms) of the microsecond latencies in FILE, one per line.
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { i50 = int(NR * 0.5 + 0.5); i99 = int(NR * 0.99 + 0.5);
    if (i50 < 1) i50 = 1; if (i99 < 1) i99 = 1; printf "%.3f %.3f", v[i50] / 1000, v[i99] / 1000 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wait_idle() { # wait_idle SECONDS: until Slurm has no job left
    local end=$((SECONDS + $1))
    while [ -n "$(squeue -h -o %i | head -1)" ]; do
        [ $SECONDS -lt $end ] || { echo "bench/slurm: Slurm still has jobs after $1 s" >&2; return 1; }
        sleep 0.2
    done
}
row() { # row IMPL WALL_S N LATFILE DRAIN_S
    local p
    p=$(stats "$4")
    jq -n -c --arg impl "$1" --argjson n "$3" --argjson wall "$2" --argjson drain "$5" \
        --argjson p50 "${p% *}" --argjson p99 "${p#* }" --arg delay "$sched_delay" \
        '{bench: "slurm", impl: $impl, metric: "submit", jobs: $n, batch_sched_delay: $delay,
          submit_per_s: (($n / $wall) * 10 | round / 10), submit_p50_ms: $p50, submit_p99_ms: $p99,
          all_done_s: ($drain * 100 | round / 100), done_per_s: (($n / $drain) * 10 | round / 10)}' >>"$rows"
}

# ---- ringd with the Slurm backend ----
data=$work/ringd-data
shared=$work/shared
mkdir -p "$shared"
"$build/server/ringd" --listen 127.0.0.1:0 --data-dir "$data" --backend slurm \
    --slurm-work-dir "$shared" --default-user root >"$work/ringd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$data/ringd.addr" ] && break; sleep 0.05; done
[ -s "$data/ringd.addr" ] || { cat "$work/ringd.log" >&2; exit 1; }
url="http://$(cat "$data/ringd.addr")"
auth="Authorization: Bearer $(cat "$data/admin.token")"

# 1. Submissions
if want ringd; then
echo '{"name":"bench","command":["/bin/true"],"workers":1}' >"$work/ringd.json"
echo "bench/slurm: $jobs submissions through ringd" >&2
t0=$(now)
python3 "$here/post.py" "$url/v1/jobs" "$jobs" "$work/ringd.json" "$auth" >"$work/ringd.out"
jq -e '.errors == 0' "$work/ringd.out" >/dev/null || { jq .first_error "$work/ringd.out" >&2; exit 1; }
jq '.latency_us[]' "$work/ringd.out" >"$work/ringd.lat"
wall=$(jq .wall_s "$work/ringd.out")
# All done: ringd submitted every job to Slurm and saw it end.
active() { curl -s -H "$auth" "$url/metrics" |
    awk '/^ringd_jobs\{state="(QUEUED|STARTING|RUNNING|STOPPING)"\}/ { s += $2 } END { print s + 0 }'; }
while [ "$(active)" != 0 ]; do sleep 0.2; done
done_ok=$(curl -s -H "$auth" "$url/metrics" | awk '/^ringd_jobs\{state="SUCCEEDED"\}/ { print $2 }')
[ "$done_ok" = "$jobs" ] || { echo "bench/slurm: only $done_ok of $jobs ringd jobs succeeded" >&2; tail "$work/ringd.log" >&2; exit 1; }
drain=$(echo "$(now) - $t0" | bc)
row ringd "$wall" "$jobs" "$work/ringd.lat" "$drain"
wait_idle 600
fi

# sbatch_jobs IMPL SCRIPT: N sbatch submissions of SCRIPT, one after the other, and the drain.
sbatch_jobs() {
    echo "bench/slurm: $jobs submissions through sbatch ($1)" >&2
    : >"$work/$1.lat"
    t0=$(now)
    for _ in $(seq "$jobs"); do
        a=$(now)
        sbatch --quiet -o /dev/null -D "$work" "$2" >/dev/null
        echo "($(now) - $a) * 1000000" | bc >>"$work/$1.lat"
    done
    wall=$(echo "$(now) - $t0" | bc)
    wait_idle 600
    drain=$(echo "$(now) - $t0" | bc)
    row "$1" "$wall" "$jobs" "$work/$1.lat" "$drain"
}
if want sbatch; then
    # The batch script alone runs true: Slurm's floor.
    printf '#!/bin/sh\ntrue\n' >"$work/true.sh"
    sbatch_jobs sbatch "$work/true.sh"
    # The work of one of ringd's jobs: its batch script runs its ranks as an srun step
    # with PMIx, which costs a step launch on the node.
    printf '#!/bin/sh\nexec srun --mpi=pmix -- true\n' >"$work/srun.sh"
    sbatch_jobs sbatch-srun "$work/srun.sh"
fi

if want slurmrestd; then
echo "bench/slurm: $jobs submissions through slurmrestd" >&2
jq -n --arg wd "$work" '{job: {name: "bench", partition: "debug", current_working_directory: $wd,
    environment: {PATH: "/bin:/usr/bin"}, standard_output: "/dev/null"}, script: "#!/bin/sh\ntrue\n"}' \
    >"$work/rest.json"
t0=$(now)
python3 "$here/post.py" "$SLURMRESTD_URL/slurm/v0.0.38/job/submit" "$jobs" "$work/rest.json" \
    "X-SLURM-USER-NAME: $SLURMRESTD_USER" "X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN" >"$work/rest.out"
jq -e '.errors == 0' "$work/rest.out" >/dev/null || { jq .first_error "$work/rest.out" >&2; exit 1; }
jq '.latency_us[]' "$work/rest.out" >"$work/rest.lat"
wall=$(jq .wall_s "$work/rest.out")
wait_idle 600
drain=$(echo "$(now) - $t0" | bc)
row slurmrestd "$wall" "$jobs" "$work/rest.lat" "$drain"
fi

# 2. Submission to all ranks running: each rank writes when it started, then lingers a
# moment so that Slurm sees a real job.
cat >"$work/rank.sh" <<'EOF'
#!/bin/sh
date +%s.%N >"$MARK_DIR/rank.${PMIX_RANK:-$SLURM_PROCID}"
sleep 1
EOF
chmod +x "$work/rank.sh"
startup() { # startup IMPL: submits once, prints seconds to the last rank
    local dir=$work/marks.$1.$RANDOM a
    mkdir -p "$dir"
    a=$(now)
    if [ "$1" = sbatch ]; then
        MARK_DIR=$dir sbatch --quiet -N2 --ntasks-per-node=2 --gres=gpu:2 -o /dev/null -D "$work" \
            --wrap "srun --mpi=pmix --gpus-per-task=1 $work/rank.sh" >/dev/null
    else
        curl -sf -H "$auth" -H 'Content-Type: application/json' -d "{\"name\":\"start\",
            \"command\":[\"$work/rank.sh\"],\"workers\":4,\"gpus_per_worker\":1,\"env\":{\"MARK_DIR\":\"$dir\"}}" \
            "$url/v1/jobs" >/dev/null
    fi
    for _ in $(seq 600); do [ "$(ls "$dir" | wc -l)" = 4 ] && break; sleep 0.05; done
    [ "$(ls "$dir" | wc -l)" = 4 ] || { echo "bench/slurm: a 4-rank $1 job did not start" >&2; exit 1; }
    cat "$dir"/rank.* | sort -n | tail -1 | awk -v a="$a" '{ printf "%.3f\n", $1 - a }'
    wait_idle 60
}
if want start; then
for impl in ringd sbatch; do
    : >"$work/start.$impl"
    for _ in $(seq "$runs"); do startup "$impl" >>"$work/start.$impl"; done
    jq -n -c --arg impl "$impl" --argjson runs "$runs" --argjson m "$(median <"$work/start.$impl")" \
        --arg delay "$sched_delay" \
        '{bench: "slurm", impl: $impl, metric: "start", np: 4, nodes: 2, runs: $runs, batch_sched_delay: $delay,
          submit_to_all_ranks_median_s: $m}' >>"$rows"
done
fi

if [ "$json" = 1 ]; then
    cat "$rows"
    exit 0
fi
echo
echo "Submissions ($jobs jobs each, one client, one after the other; /bin/true, 1 task;"
echo "slurmctld batch_sched_delay: $sched_delay):"
printf '%-11s %12s %10s %10s %12s %10s\n' impl submit/s p50_ms p99_ms all_done_s done/s
jq -r 'select(.metric == "submit") | [.impl, .submit_per_s, .submit_p50_ms, .submit_p99_ms,
    .all_done_s, .done_per_s] | @tsv' "$rows" |
    awk -F'\t' '{ printf "%-11s %12s %10s %10s %12s %10s\n", $1, $2, $3, $4, $5, $6 }'
# ringd over each peer, same run: > 1 means ringd does more per second.
jq -rs 'map(select(.metric == "submit")) | (map(select(.impl == "ringd"))[0]) as $r |
    select($r != null) | .[] | select(.impl != "ringd") |
    "ringd / \(.impl): submit/s \($r.submit_per_s / .submit_per_s * 100 | round / 100)x, " +
    "done/s \($r.done_per_s / .done_per_s * 100 | round / 100)x"' "$rows"
echo
echo "Submission to all 4 ranks running (2 nodes x 2 GPUs, srun --mpi=pmix), median of $runs:"
jq -r 'select(.metric == "start") | "  \(.impl): \(.submit_to_all_ranks_median_s) s"' "$rows"
echo
echo "ringd: POST /v1/jobs to ringd --backend slurm (the job is stored, then submitted to Slurm"
echo "by ringd's scheduler); all_done_s counts until every job has run. p50 is the median"
echo "latency of one submission. sbatch runs true in the batch script itself; sbatch-srun"
echo "runs it as an srun --mpi=pmix step, as ringd's batch scripts run their ranks: the peer"
echo "to compare ringd's done/s with. Machine shared (2 cores); one pass of $jobs per row."
