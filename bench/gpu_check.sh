#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/gpu_check.sh: the check to run on a machine with a GPU, in well under 5 minutes.
#   1. builds libring with its NCCL backend, nccl_check, bench_nccl and ringrun with the C
#      compiler alone (no CMake, none of ringd's libraries: only CUDA and NCCL are needed);
#   2. correctness: tests/integration/nccl_check.c (every collective on GPU buffers against
#      a host reference) at np 1, and at np = number of GPUs when there are two or more
#      (NCCL takes one rank per GPU);
#   3. bandwidth: bench/gpu/bench_nccl.c, libring's allreduce of device buffers against
#      ncclAllReduce called directly on the same ranks and buffers, 4 KiB to --max-bytes,
#      medians, nccl-tests busbw, and the ratio libring / NCCL.
# Prints a table, or with --json one JSON object per row (the check's result first).
#
#   bench/gpu_check.sh [--json] [--max-bytes B] [--iters N] [--build DIR] [--np N]
#
# CUDA_HOME (default /usr/local/cuda) must hold CUDA's and NCCL's headers and libraries,
# or NCCL_HOME NCCL's. Exit status: 0 when the check passed, 1 when it failed, 77 when
# there is no GPU here (nothing to check), 2 on usage.
set -euo pipefail
cd "$(dirname "$0")/.."

json=0
max_bytes=$((256 << 20))
iters=20
np=
build=
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --max-bytes) max_bytes=$2; shift ;;
    --iters) iters=$2; shift ;;
    --build) build=$2; shift ;;
    --np) np=$2; shift ;;
    *) echo "usage: $0 [--json] [--max-bytes B] [--iters N] [--build DIR] [--np N]" >&2; exit 2 ;;
    esac
    shift
done
say() { [ "$json" = 1 ] && echo "gpu_check: $*" >&2 || echo "gpu_check: $*"; }

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
CC=${CC:-cc}
for f in "$CUDA_HOME/include/cuda_runtime.h" "$NCCL_HOME/include/nccl.h"; do
    [ -f "$f" ] || { echo "gpu_check: $f is missing; set CUDA_HOME (and NCCL_HOME)" >&2; exit 1; }
done
libdirs=()
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$NCCL_HOME/lib64" "$NCCL_HOME/lib"; do
    [ -d "$d" ] && libdirs+=("-L$d" "-Wl,-rpath,$d")
done

build=${build:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
mkdir -p "$build/obj"
say "building into $build with $($CC --version | head -1)"
L=worker/libring
inc=(-I"$L/include" -I"$L/src" -I"$L/src/bootstrap" -I"$L/src/transport" -I"$L/src/collectives"
     -I"$L/src/engine" -I"$L/src/backend" -isystem "$CUDA_HOME/include" -isystem "$NCCL_HOME/include")
flags=(-std=c11 -g -pthread -D_GNU_SOURCE -DRING_VERSION_STRING='"gpu-check"'
       -DRING_HAVE_NCCL -Wall -Wno-unused-parameter)
# libring without MPI or PMIx (they are not needed for one machine's GPUs).
srcs=$(ls $L/src/*.c $L/src/bootstrap/*.c $L/src/transport/*.c $L/src/collectives/*.c \
          $L/src/engine/*.c $L/src/backend/*.c | grep -v -e _mpi.c -e mpi_env.c)
jobs=$(nproc 2>/dev/null || echo 4)
compile() {
    local opt=-O2
    case $1 in */reduce.c) opt=-O3 ;; esac # the reduction kernels, as in CMake
    "$CC" "${flags[@]}" $opt "${inc[@]}" -c "$1" -o "$build/obj/$(echo "$1" | tr / _).o"
}
running=0
for s in $srcs; do
    compile "$s" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
n_src=$(printf '%s\n' $srcs | wc -l)
[ "$(ls "$build"/obj/*.o | wc -l)" = "$n_src" ] || { echo "gpu_check: libring did not build" >&2; exit 1; }
rm -f "$build/libring.a"
ar rcs "$build/libring.a" "$build"/obj/*.o
libs=("$build/libring.a" "${libdirs[@]}" -lnccl -lcudart -lpthread -lm -ldl -lrt)
"$CC" "${flags[@]}" "${inc[@]}" tests/integration/nccl_check.c -o "$build/nccl_check" "${libs[@]}"
"$CC" "${flags[@]}" "${inc[@]}" bench/gpu/bench_nccl.c -o "$build/bench_nccl" "${libs[@]}"
"$CC" "${flags[@]}" "${inc[@]}" -Iworker/ringrun worker/ringrun/*.c -o "$build/ringrun" "${libs[@]}"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" = 0 ]; then
    say "SKIP: no GPU here (nvidia-smi lists none); the build above is all that can be checked"
    exit 77
fi
np=${np:-$gpus}
say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1), $gpus GPU(s); np $np"
launch() { if [ "$1" = 1 ]; then shift; "$@"; else local n=$1; shift; "$build/ringrun" -np "$n" --timeout 120 "$@"; fi; }

status=passed
checks_out=$build/nccl_check.out
if ! timeout 120 "$build/nccl_check" >"$checks_out" 2>&1; then status=failed; fi
say "correctness at np 1: $(tail -1 "$checks_out")"
if [ "$np" -ge 2 ] && [ "$status" = passed ]; then
    if ! launch "$np" timeout 120 "$build/nccl_check" >"$checks_out.np" 2>&1; then status=failed; fi
    say "correctness at np $np: $(grep -h 'checks passed\|failed\|FAIL' "$checks_out.np" | tail -1)"
fi
if [ "$status" = failed ]; then
    cat "$checks_out" "$checks_out.np" 2>/dev/null >&2 || true
fi
if [ "$json" = 1 ]; then
    printf '{"bench":"gpu_check","impl":"libring-nccl","np":%s,"gpus":%s,"correctness":"%s"}\n' \
        "$np" "$gpus" "$status"
fi
[ "$status" = passed ] || { say "FAIL: the correctness check failed (output above)"; exit 1; }

bench_args=(--max-bytes "$max_bytes" --iters "$iters")
[ "$json" = 1 ] && bench_args+=(--json)
timeout 180 "$build/bench_nccl" "${bench_args[@]}" >"$build/bench.out" 2>"$build/bench.err" ||
    { cat "$build/bench.out" "$build/bench.err" >&2; say "FAIL: the bandwidth check failed"; exit 1; }
[ "$np" = 1 ] || { launch "$np" timeout 180 "$build/bench_nccl" "${bench_args[@]}" >>"$build/bench.out" 2>>"$build/bench.err" ||
    { cat "$build/bench.out" "$build/bench.err" >&2; say "FAIL: the bandwidth check at np $np failed"; exit 1; }; }
sed 's/^\[0\]<stdout>://' "$build/bench.out"
[ "$json" = 1 ] || say "busbw is 0 at np 1 by the nccl-tests convention (NCCL only copies); algbw then compares the two"
say "passed"
