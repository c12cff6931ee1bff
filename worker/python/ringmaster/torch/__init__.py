# SPDX-License-Identifier: Apache-2.0
"""ringmaster.torch: libring for PyTorch, a drop-in for horovod.torch. A Horovod script
runs with its import changed:

    import ringmaster.torch as hvd     # was: import horovod.torch as hvd

It has horovod.torch 0.28's functions, arguments, dtypes and exceptions, with Horovod's
semantics, on CPU tensors, which go to libring with no copy. GPU tensors raise a clear
error until libring's NCCL path serves them; Horovod's elastic mode (which needs its Gloo
controller and horovodrun) is not here: ringd stops and resumes jobs instead.
"""
import os as _os
import sys as _sys

try:
    import torch as _torch
except ImportError as _e:
    raise ImportError("%s: ringmaster.torch needs PyTorch; Debian's python3-torch is seen by /usr/bin/python3, "
                      "not by %s" % (_e, _sys.executable or "this python")) from _e

from .. import EXIT_STOPPED, HorovodInternalError, RingError, RingValueError
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
    remove_process_set,
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
    grouped_allgather,
    grouped_allgather_async,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    sparse_allreduce_async,
    synchronize,
)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm


def init(comm=None, process_sets=None, compression=None):
    """Starts libring (see ringmaster.init), with libring's own tuning: its busy-polling
    (RING_SPIN_US) already adapts to a host with more ranks than cores.

    comm: Horovod's communicator argument. libring's world is every rank ringrun started,
    so it takes only None or a list of all of them; an MPI communicator raises ValueError.
    process_sets: ProcessSets (or rank lists) to register, as add_process_set() does.

    As in Horovod, broadcasts fail while ranks have joined (RING_JOIN_BROADCAST=0, unless
    the environment says otherwise)."""
    if comm is not None and not isinstance(comm, (list, tuple, range)):
        raise ValueError("ringmaster.torch: init(comm=...) takes no MPI communicator: libring's world is the "
                         "ranks ringrun started")
    _os.environ.setdefault("RING_JOIN_BROADCAST", "0")
    _basics.init(process_sets, compression)
    if comm is not None and sorted(int(r) for r in comm) != list(range(size())):
        raise ValueError("ringmaster.torch: init(comm=%r): libring's world is all %d ranks; use a ProcessSet "
                         "for a subset" % (list(comm), size()))


def mpi_threads_supported():
    return False


def _no():
    return False


# What this build has, in Horovod's terms: libring is neither MPI nor Gloo, and its NCCL
# path serves C programs, not torch tensors.
mpi_built = mpi_enabled = gloo_built = gloo_enabled = nccl_built = cuda_built = rocm_built = _no
ddl_built = ccl_built = _no
