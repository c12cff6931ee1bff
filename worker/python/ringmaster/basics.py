# SPDX-License-Identifier: Apache-2.0
"""Start and stop, the worker contract (rank, size...), process sets, reduction ops, stop
requests, the timeline and the engine's counters."""
import atexit
import ctypes
import os
import sys
import threading

from ._library import CODES, EngineStats, RingError, check, error, lib

__all__ = [
    "init",
    "shutdown",
    "is_initialized",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "cross_rank",
    "cross_size",
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "Sum",
    "Average",
    "Min",
    "Max",
    "Product",
    "Adasum",
    "stop_requested",
    "request_stop",
    "start_timeline",
    "stop_timeline",
    "engine_stats",
    "version",
    "RingError",
]

# Reduction ops: libring's ring_op_t values. Adasum is Horovod's adaptive summation, which
# libring does not have; passing it raises ValueError.
Sum, Average, Min, Max, Product = 0, 1, 2, 3, 4
Adasum = -1
OPS = {Sum: "sum", Average: "average", Min: "min", Max: "max", Product: "product"}


def op_code(op):
    """op as libring's code; accepts the constants and their names ("sum")."""
    if isinstance(op, str):
        for code, name in OPS.items():
            if name == op.lower():
                return code
    elif op in OPS and not isinstance(op, (bool, float)):
        return int(op)
    if op == Adasum:
        raise ValueError("ringmaster: Adasum is not supported by libring; use Sum or Average")
    raise ValueError("ringmaster: unknown op %r; use Sum, Average, Min, Max or Product" % (op,))


class ProcessSet:
    """A subset of the ranks that runs collectives of its own, with ranks relative to it.

    Create it on every rank with the same world ranks, then register it on every rank, in
    the same order, with add_process_set() (or init(process_sets=[...])). Tensor names are
    per set, as in Horovod."""

    def __init__(self, ranks):
        ranks = [int(r) for r in ranks]
        if len(set(ranks)) != len(ranks):
            raise ValueError("ringmaster: ProcessSet lists rank %r twice" % (ranks,))
        self.ranks = ranks
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise ValueError(
                "ringmaster: process set %r is not registered; call add_process_set() on "
                "every rank first" % (self.ranks,)
            )
        return self.process_set_id

    def rank(self):
        """This rank's rank in the set, or -1 when it is not a member."""
        return lib.ring_process_set_rank(self._id())

    def size(self):
        n = lib.ring_process_set_size(self._id())
        if n < 0:
            raise error(CODES["ENOTINIT"], "process set size")
        return n

    def included(self):
        return self.rank() >= 0

    def __repr__(self):
        return "ProcessSet(id=%s, ranks=%s)" % (self.process_set_id, self.ranks or "all")


class _GlobalProcessSet(ProcessSet):
    def __init__(self):
        self.ranks = []
        self.process_set_id = 0

    def rank(self):
        return rank()

    def size(self):
        return size()

    def included(self):
        return True


global_process_set = _GlobalProcessSet()


def ps_id(process_set):
    if process_set is None or process_set is global_process_set:
        return 0
    if isinstance(process_set, ProcessSet):
        return process_set._id()
    raise TypeError("ringmaster: process_set must be a ProcessSet, not %r" % (process_set,))


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of world ranks) on this rank and returns it. A
    collective: every rank calls it with the same ranks, in the same order of calls."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("ringmaster: %r is already registered" % (process_set,))
    n = len(process_set.ranks)
    arr = (ctypes.c_int * max(n, 1))(*process_set.ranks)
    out = ctypes.c_int(0)
    check(lib.ring_process_set_create(arr, n, ctypes.byref(out)), "add_process_set(%r)" % (process_set.ranks,))
    process_set.process_set_id = out.value
    return process_set


# ---- start and stop ----------------------------------------------------------------------

_lock = threading.Lock()
_uncaught = False
_atexit_registered = False
_wire = None  # RING_COMPRESSION as init() found it
_shutdown_hooks = []  # called before ring_finalize (pending handles learn they will not run)


def _excepthook(tp, value, tb):
    # An uncaught exception leaves the other ranks waiting in a collective this rank will
    # never join: finalizing would wait for them (libring agrees on shutdown), so exit
    # without it and let the closed connections tell them.
    global _uncaught
    _uncaught = True
    _prev_excepthook(tp, value, tb)


_prev_excepthook = sys.excepthook


def init(process_sets=None, compression=None):
    """Starts libring from the worker contract (RING_RANK, RING_SIZE, RING_RENDEZVOUS...;
    a world of one without it). A second call does nothing.

    process_sets: ProcessSets (or rank lists) to register, as add_process_set() does.
    compression: "fp16" or "bf16" sends float32 sum/average allreduces as 16-bit values on
    the wire (libring's RING_COMPRESSION); the default leaves RING_COMPRESSION as it is.
    """
    global _atexit_registered, _wire
    with _lock:
        if lib.ring_initialized():
            return
        if compression is not None:
            if compression not in ("none", "fp16", "bf16"):
                raise ValueError("ringmaster: compression must be 'none', 'fp16' or 'bf16', not %r" % (compression,))
            os.environ["RING_COMPRESSION"] = compression
        check(lib.ring_init(), "init")
        # libring took the job's secret out of the C environment; os.environ is Python's own
        # copy of it, which subprocess (with env=os.environ) and Python code would still see.
        os.environ.pop("RING_JOB_SECRET", None)
        _wire = os.environ.get("RING_COMPRESSION", "none")
        if not _atexit_registered:
            atexit.register(_atexit_shutdown)
            if sys.excepthook is _prev_excepthook:
                sys.excepthook = _excepthook
            _atexit_registered = True
    for ps in process_sets or []:
        add_process_set(ps)


def wire_compression():
    """The 16-bit wire format libring was started with: "fp16", "bf16" or None."""
    return _wire if _wire in ("fp16", "bf16") and lib.ring_initialized() else None


def shutdown():
    """Waits for the other ranks to shut down too, then closes every connection. Operations
    not yet synchronized fail with RING_ESHUTDOWN. Calling it when not initialized does
    nothing."""
    with _lock:
        if not lib.ring_initialized():
            return
        for hook in _shutdown_hooks:
            hook()
        lib.ring_finalize()


def _atexit_shutdown():
    if _uncaught or not lib.ring_initialized():
        return
    # A program that exits while a peer still waits for one of its collectives (it left
    # the loop early) would wait here for good: give the peers the collective timeout,
    # then exit anyway.
    limit = float(os.environ.get("RING_OP_TIMEOUT_SECONDS", "30") or 30)
    t = threading.Thread(target=shutdown, name="ringmaster-shutdown", daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        sys.stderr.write(
            "ringmaster: rank %d: shutdown did not finish in %g s (another rank is still in a "
            "collective this rank never joined); exiting without it\n" % (lib.ring_rank(), limit)
        )


def is_initialized():
    return bool(lib.ring_initialized())


def _getter(fn, what):
    def get():
        v = fn()
        if v < 0:
            raise error(CODES["ENOTINIT"], what)
        return v

    get.__name__ = what
    get.__doc__ = "This process's %s (the worker contract); raises RingError before init()." % what
    return get


rank = _getter(lib.ring_rank, "rank")
size = _getter(lib.ring_size, "size")
local_rank = _getter(lib.ring_local_rank, "local_rank")
local_size = _getter(lib.ring_local_size, "local_size")
cross_rank = _getter(lib.ring_cross_rank, "cross_rank")
cross_size = _getter(lib.ring_cross_size, "cross_size")


def stop_requested():
    """True once a stop (SIGTERM to any rank, or request_stop()) has been agreed on. Every
    rank sees it turn true after the same collective, so ranks that check it at a step
    boundary all stop after the same step."""
    return bool(lib.ring_stop_requested())


def request_stop():
    """Asks every rank to stop, as a SIGTERM would (see stop_requested())."""
    lib.ring_request_stop()


def start_timeline(file_path, mark_cycles=False):
    """Rank 0 writes a Chrome trace of every tensor's phases to file_path."""
    check(lib.ring_timeline_start(os.fsencode(file_path)), "start_timeline")


def stop_timeline():
    """Stops the timeline; on rank 0 the file is complete and closed when this returns."""
    check(lib.ring_timeline_stop(), "stop_timeline")


def engine_stats():
    """The engine's counters as a dict (cycles, full_negotiations, cache_hits, ...)."""
    s = EngineStats()
    check(lib.ring_engine_stats(ctypes.byref(s)), "engine_stats")
    return {f: getattr(s, f) for f, _ in EngineStats._fields_}


def version():
    """libring's version, "MAJOR.MINOR.PATCH"."""
    return lib.ring_version().decode()
