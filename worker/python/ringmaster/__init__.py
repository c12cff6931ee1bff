# SPDX-License-Identifier: Apache-2.0
"""ringmaster: Python bindings of libring, Ringmaster's collective runtime.

    import ringmaster as rm
    rm.init()
    total = rm.allreduce(np.ones(4, np.float32), op=rm.Sum)
    rm.shutdown()

This package works on numpy arrays; ringmaster.torch has the same collectives on torch
tensors, shaped like horovod.torch. Errors raise RingError with libring's message.
"""
import sys as _sys

try:
    import numpy as _numpy  # noqa: F401  (every collective works on numpy arrays)
except ImportError as _e:
    # Debian's python3-numpy and python3-torch are seen only by Debian's python3: a pyenv or
    # venv python3 first on PATH fails here, once per rank, without saying why.
    raise ImportError("%s: ringmaster needs numpy (ringmaster.torch also torch); Debian's python3-numpy "
                      "and python3-torch are seen by /usr/bin/python3, not by %s"
                      % (_e, _sys.executable or "this python")) from _e

from ._library import HorovodInternalError, RingError, RingValueError, library_path
from .basics import (
    Adasum,
    Average,
    Max,
    Min,
    ProcessSet,
    Product,
    Sum,
    add_process_set,
    remove_process_set,
    cross_rank,
    cross_size,
    engine_stats,
    global_process_set,
    init,
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
    version,
)
from ._handles import Handle, poll, synchronize
from ._collectives import barrier, join
from .arrays import (
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_allgather,
    grouped_allgather_async,
    grouped_reducescatter,
    grouped_reducescatter_async,
    reducescatter,
    reducescatter_async,
)
from .objects import allgather_object, broadcast_object
from .resumable import EXIT_STOPPED, Resumable

__version__ = "0.1.0"
