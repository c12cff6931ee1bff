#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/allreduce: libring's allreduce against Open MPI's and Gloo's in the same run, at
# np 2 and 4, from 4 B to 256 MiB (float32 sum; sizes step by 4x). Prints, for each np, one
# line per size with each implementation's busbw and time and the ratios; with --json, one
# JSON object per (np, bytes, impl) instead (median_us, algbw_gbs, busbw_gbs, runs, and the
# ratios on libring's rows).
#
#   bench/allreduce/run.sh [--json] [--np "2 4"] [--min-bytes B] [--max-bytes B] [--runs N]
#                          [--budget-ms MS] [--batch N] [--save-json FILE] [--build DIR]
#   bench/allreduce/run.sh [--json] --from-json FILE...
#
# --runs N (default 1) runs every implementation N times, interleaved: run 1 of each, then
# run 2 of each, and so on, so that the machine's noise at any moment hits all alike. Each
# figure is then the median over the runs of each run's median (summarize.py), and each
# ratio the median of the same-run ratios. --save-json also writes every run's rows (each
# with its "run") to FILE, so that one run gives both; --from-json summarizes such files,
# from one invocation or several (each file's runs count apart), and runs nothing: runs
# can be spread over separate invocations, e.g. one per turn on a shared machine. --batch N
# times N calls back to back after each barrier, OSU-style (bench_allreduce.c), for every
# peer.
#
# The pairs compared:
#   libring-shm (RING_TRANSPORT=shm)  vs  openmpi-vader (Open MPI's shared-memory BTL)
#   libring-tcp (RING_TRANSPORT=tcp)  vs  openmpi-tcp (TCP BTL on lo)  and  gloo-tcp
#     (gloo::allreduce, ring algorithm, Gloo's TCP transport on 127.0.0.1; Debian's
#     libgloo-dev, built only for this bench)
# A peer that is not built or installed is left out, and the table says "-".
set -euo pipefail

build=build
nps="2 4"
min_bytes=4
max_bytes=$((256 << 20))
budget_ms=1000
batch=1
runs=1
json=0
save=""
from=()
usage="usage: $0 [--json] [--np \"2 4\"] [--min-bytes B] [--max-bytes B] [--runs N] [--budget-ms MS] [--batch N] [--save-json FILE] [--build DIR]
       $0 [--json] --from-json FILE..."
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --np) nps=$2; shift ;;
    --min-bytes) min_bytes=$2; shift ;;
    --max-bytes) max_bytes=$2; shift ;;
    --runs) runs=$2; shift ;;
    --budget-ms) budget_ms=$2; shift ;;
    --batch) batch=$2; shift ;;
    --save-json) save=$2; shift ;;
    --build) build=$2; shift ;;
    --from-json)
        while [ $# -gt 1 ] && [[ $2 != --* ]]; do from+=("$2"); shift; done
        [ ${#from[@]} -gt 0 ] || { echo "run.sh: --from-json needs at least one FILE" >&2; exit 2; }
        ;;
    --version) echo "bench/allreduce/run.sh (ringmaster)"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --runs takes a positive integer, not '$runs'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
summarize=("$here/summarize.py")
[ "$json" = 0 ] || summarize+=(--json)

if [ ${#from[@]} -gt 0 ]; then
    [ -z "$save" ] || { echo "run.sh: --save-json saves new runs; --from-json runs nothing" >&2; exit 2; }
    exec python3 "${summarize[@]}" "${from[@]}"
fi

ringrun=$build/worker/ringrun/ringrun
bench=$build/bench/allreduce/bench_allreduce
bench_mpi=$build/bench/allreduce/bench_allreduce_mpi
bench_gloo=$build/bench/allreduce/bench_allreduce_gloo
[ -x "$bench" ] || { echo "run.sh: $bench is not built; run make first" >&2; exit 1; }
rows=$(mktemp)
store=$(mktemp -d)
trap 'rm -rf "$rows" "$store"' EXIT
args=(--json --min-bytes "$min_bytes" --max-bytes "$max_bytes" --budget-ms "$budget_ms" --batch "$batch")

mpirun_flags=(--oversubscribe --bind-to none --mca pml ob1)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)
have_mpi=0
[ -x "$bench_mpi" ] && command -v mpirun >/dev/null && have_mpi=1
[ "$have_mpi" = 1 ] || echo "bench/allreduce: Open MPI not built or not installed; no Open MPI numbers" >&2
[ -x "$bench_gloo" ] ||
    echo "bench/allreduce: $bench_gloo not built (no libgloo-dev or C++); no Gloo numbers" >&2

# keep R: rank 0's JSON rows from stdin, each tagged with its run R, appended to the rows.
keep() { sed -n 's/^\(\[0\]<stdout>:\)\{0,1\}\({.*\)}$/\2,"run":'"$1"'}/p' >>"$rows"; }

for ((r = 1; r <= runs; r++)); do
    for np in $nps; do
        for t in shm tcp; do
            echo "bench/allreduce: run $r of $runs, libring-$t at np $np" >&2
            RING_TRANSPORT=$t "$ringrun" -np "$np" "$bench" "${args[@]}" --impl "libring-$t" | keep "$r"
        done
        if [ "$have_mpi" = 1 ]; then
            echo "bench/allreduce: run $r of $runs, openmpi-vader at np $np" >&2
            mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,vader \
                "$bench_mpi" "${args[@]}" --impl openmpi-vader | keep "$r"
            echo "bench/allreduce: run $r of $runs, openmpi-tcp at np $np" >&2
            mpirun "${mpirun_flags[@]}" -np "$np" --mca btl self,tcp --mca btl_tcp_if_include lo \
                "$bench_mpi" "${args[@]}" --impl openmpi-tcp | keep "$r"
        fi
        if [ -x "$bench_gloo" ]; then
            echo "bench/allreduce: run $r of $runs, gloo-tcp at np $np" >&2
            rm -rf "${store:?}"/*
            BENCH_GLOO_STORE=$store "$ringrun" -np "$np" "$bench_gloo" "${args[@]}" --impl gloo-tcp | keep "$r"
        fi
    done
done

[ -z "$save" ] || cp "$rows" "$save"
python3 "${summarize[@]}" "$rows"
