# SPDX-License-Identifier: Apache-2.0
"""ringmaster.torch: libring for PyTorch, shaped like horovod.torch. A Horovod script runs
with its import changed:

    import ringmaster.torch as hvd     # was: import horovod.torch as hvd

CPU tensors go to libring with no copy. GPU tensors raise a clear error until libring's
NCCL path exists.
"""
import sys as _sys

try:
    import torch as _torch
except ImportError as _e:
    raise ImportError("%s: ringmaster.torch needs PyTorch; Debian's python3-torch is seen by /usr/bin/python3, "
                      "not by %s" % (_e, _sys.executable or "this python")) from _e

from .. import EXIT_STOPPED, RingError
from .. import basics as _basics
from ..basics import (
    Adasum,
    Average,
    Max,
    Min,
    ProcessSet,
    Product,
    Sum,
    add_process_set,
    cross_rank,
    cross_size,
    engine_stats,
    global_process_set,
    is_initialized,
    local_rank,
    local_size,
    rank,
    request_stop,
    shutdown,
    size,
    start_timeline,
    stop_requested,
    stop_timeline,
)
from .compression import Compression
from .functions import (
    Resumable,
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from .ops import (
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
from .optimizer import DistributedOptimizer


def init(process_sets=None, compression=None):
    """Starts libring (see ringmaster.init), with libring's own tuning: its busy-polling
    (RING_SPIN_US) already adapts to a host with more ranks than cores."""
    return _basics.init(process_sets, compression)


# Horovod's name for a failed collective, for scripts that catch it.
HorovodInternalError = RingError


def mpi_threads_supported():
    return False


def _no():
    return False


# What this build has, in Horovod's terms: libring is neither MPI nor Gloo, and has no
# GPU path yet.
mpi_built = mpi_enabled = gloo_built = gloo_enabled = nccl_built = cuda_built = rocm_built = _no
ddl_built = ccl_built = _no
