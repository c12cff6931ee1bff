#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libring's collectives on GPU buffers through NCCL (nccl_check.c), at np 1 and, with two
# GPUs or more, at np 2 (NCCL allows one rank per GPU). Needs a CUDA device: without one it
# skips, in CI too, since no CI machine of this project has a GPU (bench/gpu_check.sh is
# the check to run on one).
. "$(dirname "$0")/lib.sh"
: "${NCCL_CHECK:?}"

rc=0
"$NCCL_CHECK" >"$WORK/out" 2>"$WORK/err" || rc=$?
if [ "$rc" = 77 ]; then
    cat "$WORK/out"
    exit 77 # not lib.sh's skip(): a missing GPU is this machine's hardware, not a missing package
fi
[ "$rc" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "nccl_check alone exited $rc"; }
expect_in out "checks passed at np 1"
ok "every collective on GPU buffers at np 1: $(cat "$WORK/out")"

gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
if [ "$gpus" -ge 2 ]; then
    expect_rc 0 "$RINGRUN" -np 2 --timeout 120 "$NCCL_CHECK"
    expect_in out "checks passed at np 2"
    ok "every collective on GPU buffers at np 2, one GPU per rank"
else
    echo "# np 2 needs two GPUs (NCCL takes one rank per GPU); this machine has $gpus"
fi
summary
