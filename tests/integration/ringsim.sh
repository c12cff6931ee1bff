#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringsim and bench_sched as programs: a workload replayed against every policy over traces
# written here (so that the test needs no data from outside the tree), with job completion
# times that follow from the traces by hand; the per-job output; --synthesize from a
# Philly-format log; every bad input's exit status and message; and a small bench_sched
# run (its rows, never its times).
. "$(dirname "$0")/lib.sh"
: "${RINGSIM:?}" "${BENCH_SCHED:?}"

# An application "flat": one iteration takes 1 s at a per-GPU batch of 32 on 1..4 GPUs,
# and (gradient noise only) an iteration at global batch M does M/32 iterations' worth of
# progress; 2 epochs of 512 each. A job at batch 64 then needs 2 x 512 / 2 = 512
# iterations: 512 s on 2 GPUs; at batch 128 on 4 GPUs, 256 s.
tr=$WORK/traces
mkdir -p "$tr/flat"
{
    echo "placement,local_bsz,step_time,sync_time"
    for k in 1 2 3 4; do echo "$k,32,1.0,0"; done
} >"$tr/flat/placements.csv"
{
    echo "num_nodes,num_replicas,local_bsz,step_time,sync_time"
    for k in 1 2 3 4; do echo "1,$k,32,1.0,0"; done
} >"$tr/flat/scalability.csv"
for b in 32 128; do
    {
        echo "progress,iteration,metric,grad_sqr,grad_var"
        for x in 1 2; do echo "$((x * 512)),$((x * 16384 / b)),0,0,1"; done
    } >"$tr/flat/validation-$b.csv"
done
W=$WORK/w.csv
sim() { "$RINGSIM" --traces "$tr" --nodes 1 --gpus-per-node 4 "$@"; }
# row POLICY COND: the --json output in $WORK/out has one row of POLICY, and COND holds there.
row() { jq -s -e --arg p "$1" "map(select(.policy == \$p)) | length == 1 and (.[0] | $2)" \
    "$WORK/out" >/dev/null || { cat "$WORK/out" >&2; fail "$1: not $2"; }; }

printf 'name,time,application,num_replicas,batch_size\nlone,100,flat,2,64\n' >"$W"
expect_rc 0 sim --workload "$W" --policy fifo,priority,tiresias,dynamic --json
[ "$(wc -l <"$WORK/out")" = 4 ] || { cat "$WORK/out" >&2; fail "want one row per policy"; }
for p in fifo priority tiresias dynamic; do
    row $p '.jobs == 1 and .unfinished == 0 and .avg_jct_s == 542 and .p50_jct_s == 542 and
            .p99_jct_s == 542 and .makespan_s == 542 and .restarts == 0 and
            .gpu_utilization == 0.5 and .bench == "ringsim" and .nodes == 1 and
            .gpus_per_node == 4 and .restart_cost_s == 30 and .interval_s == 60'
done
expect_rc 0 sim --workload "$W" --policy fifo --restart-cost 0 --json
row fifo '.avg_jct_s == 512'
ok "a lone job takes its start cost plus its iterations under every policy (542 s; 512 s at no cost)"

# Two jobs that each want the whole node, 10 s apart: fifo runs them one after the other
# (286 s, then 572 - 10 s); dynamic shares the node (a resize) and both finish.
printf 'name,time,application,num_replicas,batch_size\na,0,flat,4,128\nb,10,flat,4,128\n' >"$W"
expect_rc 0 sim --workload "$W" --policy fifo,dynamic --json --jobs "$WORK/jobs.csv"
row fifo '.avg_jct_s == 424 and .p50_jct_s == 286 and .p99_jct_s == 562 and .makespan_s == 572 and
          .restarts == 0'
row dynamic '.jobs == 2 and .unfinished == 0 and .restarts >= 1'
grep -qx 'fifo,a,flat,4,128,0,286.0,1' "$WORK/jobs.csv" &&
    grep -qx 'fifo,b,flat,4,128,10,562.0,1' "$WORK/jobs.csv" || { cat "$WORK/jobs.csv" >&2; fail "--jobs rows"; }
[ "$(grep -c '^dynamic,' "$WORK/jobs.csv")" = 2 ] || fail "--jobs lacks dynamic's rows"
expect_rc 0 sim --workload "$W" --policy fifo
expect_in out "avg_jct_s"
expect_in out "fifo "
# --verbose: each decision at its virtual time (b arrives at 10 s and a makes room).
expect_rc 0 sim --workload "$W" --policy dynamic --verbose
expect_in err "ringsim: 10 s: info job w0: dynamic: shrink 4 -> 2 workers"
grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z info ringsim: 10 s: info job w0: dynamic: shrink 4 -> 2 workers" "$WORK/err" ||
    { cat "$WORK/err" >&2; fail "ringsim's line lacks its time or level"; }
ok "fifo queues, dynamic shares the node; table, --json and --jobs agree; --verbose dates each decision"

# --synthesize: jobs of under a GPU-hour in the log become cifar10 or ncf.
cp -r "$tr/flat" "$tr/cifar10"
cp -r "$tr/flat" "$tr/ncf"
{
    echo "timestamp,duration,num_gpus,gpu_time,cluster"
    echo "0,600,1,600,a"
    echo "5,900,2,1800,a"
} >"$tr/philly.csv"
expect_rc 0 sim --synthesize 20 --seed 7
cp "$WORK/out" "$WORK/syn.csv"
[ "$(head -1 "$WORK/syn.csv")" = "name,time,application,num_replicas,batch_size" ] || fail "no header"
[ "$(wc -l <"$WORK/syn.csv")" = 21 ] || fail "want 20 jobs"
awk -F, 'NR > 1 && ($3 != "cifar10" && $3 != "ncf" || $4 < 1 || $5 < 1) { exit 1 }' "$WORK/syn.csv" ||
    { cat "$WORK/syn.csv" >&2; fail "a synthesised job is not a short one"; }
expect_rc 0 sim --synthesize 20 --seed 7
cmp -s "$WORK/out" "$WORK/syn.csv" || fail "the same seed wrote another workload"
expect_rc 0 sim --workload "$WORK/syn.csv" --policy fifo,dynamic --json
row fifo '.jobs == 20 and .unfinished == 0'
row dynamic '.jobs == 20 and .unfinished == 0'
ok "--synthesize writes a workload from the log, the same for the same seed, and it runs"

# Bad input: a clear message and the documented status.
expect_rc 64 sim --workload "$W" --policy lottery
expect_in err "no policy 'lottery'"
expect_rc 64 "$RINGSIM" --workload "$W" --traces "$tr" --nodes 0 --gpus-per-node 4 --policy fifo
expect_in err "--nodes wants a number >= 1"
expect_rc 64 sim --workload "$W" --policy fifo --interval soon
expect_in err "--interval wants a number"
expect_rc 66 sim --workload "$WORK/none.csv" --policy fifo
expect_in err "cannot read --workload"
# malformed CSV MESSAGE: a workload of CSV (printf's format) exits 65 saying MESSAGE.
malformed() {
    printf "$1" >"$WORK/bad.csv"
    expect_rc 65 sim --workload "$WORK/bad.csv" --policy fifo
    expect_in err "$2"
}
hdr='name,time,application,num_replicas,batch_size\n'
malformed 'name,time,application\n' "the header lacks the column 'num_replicas'"
malformed "${hdr}a,0,flat,two,64\n" "bad.csv:2: want name,time,application,num_replicas,batch_size"
malformed "${hdr}a,-1,flat,1,64\n" "bad.csv:2: want"
malformed "${hdr}a,0,nosuch,1,64\n" "no traces for application 'nosuch'"
malformed "$hdr" "has no jobs"
malformed '' "is empty"
expect_rc 66 "$RINGSIM" --synthesize 5 --traces "$WORK/none" --nodes 1 --gpus-per-node 4
expect_rc 0 "$RINGSIM" --version
expect_in out "ringsim "
ok "bad input: usage 64, malformed workload or trace 65, unreadable input 66, each with its message"

# bench_sched: a small cluster, its rows (the times are for bench/, not for a test).
expect_rc 0 "$BENCH_SCHED" --nodes 4 --gpus-per-node 4 --queued 50 --passes 3 --json
[ "$(jq -s 'map(.impl) == ["fifo", "priority", "tiresias", "dynamic"]' "$WORK/out")" = true ] ||
    { cat "$WORK/out" >&2; fail "bench_sched rows"; }
jq -s -e 'all(.[]; .bench == "sched" and .nodes == 4 and .gpus == 16 and .running > 0 and
          .jobs == .running + .queued and .median_us > 0 and .max_us >= .median_us)' \
    "$WORK/out" >/dev/null || { cat "$WORK/out" >&2; fail "bench_sched rows"; }
expect_rc 64 "$BENCH_SCHED" --policy lottery
expect_in err "no policy 'lottery'"
expect_rc 64 "$BENCH_SCHED" --nodes none
ok "bench_sched: a row per policy on a small cluster; bad arguments exit 64"
summary
