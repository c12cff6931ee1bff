# SPDX-License-Identifier: Apache-2.0
"""ringmaster: Python bindings of libring, Ringmaster's collective runtime.

    import ringmaster as rm
    rm.init()
    total = rm.allreduce(np.ones(4, np.float32), op=rm.Sum)
    rm.shutdown()

This package works on numpy arrays; ringmaster.torch has the same collectives on torch
tensors, shaped like horovod.torch. Errors raise RingError with libring's message. Its names
load numpy and libring.so on first use; ringmaster.client, the REST client of ringd, needs
neither.
"""
import importlib as _importlib
import sys as _sys

# The worker side loads on first use of one of its names (PEP 562), not at `import
# ringmaster`: ringmaster.client, the REST client, needs neither numpy nor libring.so, and
# must import where they are missing (a laptop that only submits jobs).
_EXPORTS = {
    "._library": ["HorovodInternalError", "RingError", "RingValueError", "library_path"],
    ".basics": [
        "Adasum", "Average", "Max", "Min", "ProcessSet", "Product", "Sum", "add_process_set",
        "remove_process_set",
        "cross_rank", "cross_size", "engine_stats", "global_process_set", "init", "is_initialized",
        "local_rank", "local_size", "rank", "request_stop", "shutdown", "size", "start_timeline",
        "stop_requested", "stop_timeline", "version",
    ],
    "._handles": ["Handle", "poll", "synchronize"],
    "._collectives": ["barrier", "join"],
    ".arrays": [
        "allgather", "allgather_async", "allreduce", "allreduce_", "allreduce_async",
        "allreduce_async_", "alltoall", "alltoall_async", "broadcast", "broadcast_",
        "broadcast_async", "broadcast_async_", "grouped_allreduce", "grouped_allreduce_",
        "grouped_allreduce_async", "grouped_allreduce_async_", "grouped_allgather",
        "grouped_allgather_async", "grouped_reducescatter", "grouped_reducescatter_async",
        "reducescatter",
        "reducescatter_async",
    ],
    ".objects": ["allgather_object", "broadcast_object"],
    ".resumable": ["EXIT_STOPPED", "Resumable"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)
__version__ = "0.1.0"


def _load_worker():
    """Imports the worker side (numpy, then libring.so through ctypes) and binds its names
    here. Raises ImportError saying what is missing."""
    try:
        import numpy  # noqa: F401  (every collective works on numpy arrays)
    except ImportError as e:
        # Debian's python3-numpy and python3-torch are seen only by Debian's python3: a pyenv
        # or venv python3 first on PATH fails here, once per rank, without saying why.
        raise ImportError("%s: ringmaster needs numpy (ringmaster.torch also torch); Debian's "
                          "python3-numpy and python3-torch are seen by /usr/bin/python3, not by %s"
                          % (e, _sys.executable or "this python")) from e
    for module, names in _EXPORTS.items():
        m = _importlib.import_module(module, __name__)
        for name in names:
            globals()[name] = getattr(m, name)


def __getattr__(name):
    if name in _WHERE:
        _load_worker()
        return globals()[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
