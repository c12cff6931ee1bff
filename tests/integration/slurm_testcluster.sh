#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# contrib/slurm/testcluster.sh brings up a real one-node Slurm (munge, slurmctld, slurmd,
# slurmrestd with JWT) that runs jobs, answers REST, and stops without leaving a daemon.
# Needs root and Debian's Slurm packages (contrib/deps.sh); skips (exit 77) without them.
. "$(dirname "$0")/lib.sh"

TC=$(cd "$(dirname "$0")/../.." && pwd)/contrib/slurm/testcluster.sh
export PATH=$PATH:/usr/sbin
for b in slurmctld slurmd munged slurmrestd srun; do
    command -v "$b" >/dev/null || { echo "skip: $b is not installed (contrib/deps.sh)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "skip: the test cluster runs its daemons as root"; exit 77; }

chmod 0755 "$WORK" # slurmrestd runs as nobody and reads slurm.conf under here
CL=$WORK/slurm
trap '"$TC" stop "$CL" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

"$TC" start "$CL" --rest 2>"$WORK/start.err" || { cat "$WORK/start.err" "$CL"/*.log >&2; fail "the cluster did not start"; }
# shellcheck disable=SC1091
. "$CL/env"
[ "$(sinfo -h -o %t)" = idle ] || fail "the node is not idle: $(sinfo)"
ok "munged, slurmctld and slurmd start under one directory; the node is idle"

out=$(timeout 60 srun -N1 -n2 --time=1 sh -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS"' | sort)
[ "$out" = "$(printf 'task 0 of 2\ntask 1 of 2')" ] || fail "srun gave: $out"
printf '#!/bin/sh\necho batch on $SLURM_JOB_NODELIST\n' >"$WORK/job.sh"
timeout 60 sbatch --wait -o "$WORK/batch.out" "$WORK/job.sh" >/dev/null || fail "sbatch --wait failed"
grep -q "batch on $(hostname -s)" "$WORK/batch.out" || fail "batch output: $(cat "$WORK/batch.out")"
ok "srun runs 2 tasks and sbatch --wait runs a batch job"

code=$(curl -s -o "$WORK/ping.json" -w '%{http_code}' -H "X-SLURM-USER-NAME: $SLURMRESTD_USER" \
    -H "X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN" "$SLURMRESTD_URL/slurm/v0.0.38/ping")
[ "$code" = 200 ] && jq -e '.pings[0].ping == "UP"' "$WORK/ping.json" >/dev/null ||
    fail "slurmrestd ping: $code $(cat "$WORK/ping.json")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$SLURMRESTD_URL/slurm/v0.0.38/ping")
[ "$code" = 401 ] || fail "slurmrestd without a token answered $code, want 401"
ok "slurmrestd answers with a JWT and refuses without one"

"$TC" start "$CL" --rest 2>/dev/null || fail "a second start is not idempotent"
"$TC" stop "$CL"
for d in munged slurmctld slurmd slurmrestd; do
    ! pgrep -f "$CL" -a | grep -q "$d" || fail "$d still runs after stop"
done
ok "start is idempotent; stop leaves no daemon"
summary
