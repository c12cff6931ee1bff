#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# contrib/slurm/testcluster.sh brings up a real two-node Slurm on this machine (munge,
# slurmctld, slurmd n1 and n2 with two fake GPUs each, slurmrestd with JWT) that runs jobs
# across both nodes, places GPUs, serves PMIx to srun --mpi=pmix with each node's files
# apart, answers REST, and stops without leaving a daemon, a slurmstepd or a job's process,
# even when a step hangs. It runs a cluster of its own (it tests start and stop), under /tmp,
# which its nodes see like any other directory. Needs root and Debian's Slurm packages
# (contrib/deps.sh): skips without them, fails in CI.
export TMPDIR=/tmp # the cluster, and the files its jobs read and write, live under /tmp
. "$(dirname "$0")/lib.sh"

TC=$(cd "$(dirname "$0")/../.." && pwd)/contrib/slurm/testcluster.sh
export PATH=$PATH:/usr/sbin
for b in slurmctld slurmd munged slurmrestd srun sbatch; do
    command -v "$b" >/dev/null || skip "$b is not installed (contrib/deps.sh installs it)"
done
[ "$(id -u)" = 0 ] || skip "the test cluster runs its daemons as root"
[ -n "${PMIX_CHECK:-}" ] || skip "pmix_check was not built (PMIx not found: contrib/deps.sh installs libpmix-dev)"

CL=$WORK/slurm
trap '"$TC" stop "$CL" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# $WORK is 0700, as mktemp -d makes it (and as /root is): closed to the jobs' users.
"$TC" start "$CL" 2>"$WORK/err" && fail "a cluster in a directory closed to other users started"
expect_in err "other users cannot reach $CL"
"$TC" start "$WORK/a b" 2>"$WORK/err" && fail "a cluster in a directory with a blank started"
expect_in err "has a blank"
ok "a cluster directory that other users cannot reach, or with a blank in its path, is refused with the reason"

chmod 0755 "$WORK"
"$TC" start "$CL" --rest 2>"$WORK/start.err" || { cat "$WORK/start.err" "$CL"/*.log >&2; fail "the cluster did not start"; }
# shellcheck disable=SC1091
. "$CL/env"
[ "$(sinfo -h -N -o '%N %t %G' | sort -u | tr '\n' ';')" = "n1 idle gpu:2;n2 idle gpu:2;" ] ||
    fail "nodes: $(sinfo -N -o '%N %t %G')"
ok "munged, slurmctld and two slurmds start under one directory; n1 and n2 are idle with 2 GPUs each"

cd "$WORK"
out=$(timeout 60 srun -N2 -n4 --ntasks-per-node=2 --time=1 sh -c 'echo "$SLURMD_NODENAME $SLURM_PROCID/$SLURM_NTASKS"' | sort)
[ "$out" = "$(printf 'n1 0/4\nn1 1/4\nn2 2/4\nn2 3/4')" ] || fail "srun -N2 -n4 gave: $out"
printf '#!/bin/sh\necho batch on $SLURM_JOB_NODELIST\n' >"$WORK/job.sh"
timeout 60 sbatch --wait -N2 -o "$WORK/batch.out" "$WORK/job.sh" >/dev/null || fail "sbatch --wait failed"
grep -q "batch on n\[1-2\]" "$WORK/batch.out" || fail "batch output: $(cat "$WORK/batch.out")"
ok "srun runs 4 tasks over both nodes and sbatch --wait runs a 2-node batch job"

out=$(timeout 60 srun -N2 --ntasks-per-node=1 --gres=gpu:2 sh -c 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"' | sort)
[ "$out" = "$(printf 'n1 0,1\nn2 0,1')" ] || fail "2 GPUs per node gave: $out"
holder=$(sbatch --parsable -w n2 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')
for _ in $(seq 100); do [ "$(squeue -h -j "$holder" -o %t)" = R ] && break; sleep 0.1; done
held=$(scontrol show job -d "$holder" | sed -n 's/.*GRES=gpu:1(IDX:\([0-9]\)).*/\1/p')
[ -n "$held" ] || fail "job $holder shows no GPU index: $(scontrol show job -d "$holder")"
out=$(timeout 60 srun -w n2 --gres=gpu:1 sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
[ "$out" = $((1 - held)) ] || fail "with GPU $held of n2 held, a second job got GPU '$out'"
scancel "$holder"
ok "Slurm places the fake GPUs: CUDA_VISIBLE_DEVICES per node, and a held GPU goes to no one else"

echo seen >"$WORK/seen"
out=$(timeout 60 srun -N2 --ntasks-per-node=1 sh -c 'echo "$SLURMD_NODENAME $(cat "$0")"' "$WORK/seen" | sort)
[ "$out" = "$(printf 'n1 seen\nn2 seen')" ] || fail "the nodes read $WORK/seen as: $out"
ok "both nodes see /tmp, where the cluster and the jobs' files are"

# The PMIx plugin names its clients' directory after the job and step only: each node's is
# under its own TmpFS, where the two cannot collide.
out=$(timeout 60 srun -N2 --ntasks-per-node=1 --mpi=pmix sh -c '
    d=spmix_appdir_$(id -u)_$SLURM_JOB_ID.$SLURM_STEP_ID
    [ -d "$0/$SLURMD_NODENAME-tmp/$d" ] && [ ! -e "/tmp/$d" ] && echo "$SLURMD_NODENAME apart"' "$CL" | sort)
[ "$out" = "$(printf 'n1 apart\nn2 apart')" ] || fail "the nodes' PMIx directories: $out"
ok "each node's PMIx client directory is its own ($CL/n1-tmp, $CL/n2-tmp)"

timeout 60 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix "$PMIX_CHECK" >"$WORK/pmix.out" 2>&1 ||
    { cat "$WORK/pmix.out" >&2; fail "PMIx check under srun --mpi=pmix failed"; }
for r in 0 1 2 3; do
    node=n$((r / 2 + 1))
    grep -q "^pmix rank $r of 4 local $((r % 2))/2 node $((r / 2))/2 on $node: got 4 addresses$" "$WORK/pmix.out" ||
        { cat "$WORK/pmix.out" >&2; fail "rank $r's PMIx layout or exchange is wrong"; }
done
ok "srun -N2 -n4 --mpi=pmix: PMIx gives each rank its layout, and Put/Commit/Fence/Get spans both nodes"

code=$(curl -s -o "$WORK/ping.json" -w '%{http_code}' -H "X-SLURM-USER-NAME: $SLURMRESTD_USER" \
    -H "X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN" "$SLURMRESTD_URL/slurm/v0.0.38/ping")
[ "$code" = 200 ] && jq -e '.pings[0].ping == "UP"' "$WORK/ping.json" >/dev/null ||
    fail "slurmrestd ping: $code $(cat "$WORK/ping.json")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$SLURMRESTD_URL/slurm/v0.0.38/ping")
[ "$code" = 401 ] || fail "slurmrestd without a token answered $code, want 401"
ok "slurmrestd answers with a JWT and refuses without one"

"$TC" start "$CL" --rest 2>/dev/null || fail "a second start is not idempotent"
"$TC" status "$CL" || fail "status says the cluster is down"
printf '#!/bin/sh\nsleep 300\n' >"$WORK/long.sh"
chmod +x "$WORK/long.sh"
tasks() { pgrep -f "^/bin/sh $WORK/long.sh" || true; } # the step's tasks, one per node
sbatch -N2 -o /dev/null --wrap "srun $WORK/long.sh" >/dev/null
wait_for 30 "the long job's tasks on both nodes" '[ "$(tasks | wc -l)" = 2 ]'
ok "start is idempotent"

# A step that hangs: its slurmstepd on one node is stopped, so neither scancel nor its
# slurmd's end ends it, and stop has to.
stepd=$(ps -o ppid= -p "$(tasks | head -1)" | tr -d ' ')
[ "$(cat "/proc/$stepd/comm")" = slurmstepd ] || fail "the task's parent $stepd is no slurmstepd"
kill -STOP "$stepd"
"$TC" stop "$CL" 2>"$WORK/stop.err" || { cat "$WORK/stop.err" >&2; fail "stop failed"; }
expect_in stop.err "killing what is left"
! "$TC" status "$CL" 2>/dev/null || fail "status says a stopped cluster is up"
for d in munged slurmctld slurmd slurmrestd; do
    ! pgrep -f "$CL" -a | grep -q "$d" || fail "$d still runs after stop"
done
# Every daemon and slurmstepd holds a file under $CL open (a log at least); a dead one none.
left=$({ find /proc/[0-9]*/fd -lname "$CL/*" 2>/dev/null || true; } | cut -d/ -f3 | sort -u)
[ -z "$left" ] || fail "still running after stop: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")"
[ -z "$(tasks)" ] || fail "a job's processes outlived stop: $(tasks)"
ok "stop cancels the jobs, ends a hung step's slurmstepd and tasks, and leaves no process behind"
summary
