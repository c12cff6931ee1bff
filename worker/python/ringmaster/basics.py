# SPDX-License-Identifier: Apache-2.0
"""Start and stop, the worker contract (rank, size...), process sets, reduction ops, stop
requests, the timeline and the engine's counters."""
import atexit
import ctypes
import os
import sys
import threading

from ._library import CODES, EngineStats, HorovodInternalError, RingError, RingValueError, check, error, lib

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
    "remove_process_set",
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
    "HorovodInternalError",
    "RingError",
    "RingValueError",
]

# Reduction ops: libring's ring_op_t values. Adasum is adaptive summation (ring.h), for
# floating-point allreduces.
Sum, Average, Min, Max, Product, Adasum = 0, 1, 2, 3, 4, 5
OPS = {Sum: "sum", Average: "average", Min: "min", Max: "max", Product: "product", Adasum: "adasum"}


def op_code(op):
    """op as libring's code; accepts the constants and their names ("sum")."""
    if isinstance(op, str):
        for code, name in OPS.items():
            if name == op.lower():
                return code
    elif op in OPS and not isinstance(op, (bool, float)):
        return int(op)
    raise ValueError("ringmaster: unknown op %r; use Sum, Average, Min, Max, Product or Adasum" % (op,))


class ProcessSet:
    """A subset of the ranks that runs collectives of its own, with ranks relative to it.

    Create it on every rank with the same world ranks, then register it on every rank, in
    the same order, with add_process_set() (or init(process_sets=[...])), and drop it with
    remove_process_set(). Its ranks are kept sorted, and tensor names are per set, as in
    Horovod. Until it is registered (and once removed), rank() and size() are None."""

    def __init__(self, ranks):
        if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
            raise ValueError("ringmaster: a ProcessSet takes a list of ranks, not %r" % (ranks,))
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError("ringmaster: a ProcessSet takes integer ranks, not %r" % (ranks,))
        ranks = sorted(int(r) for r in ranks)
        if len(set(ranks)) != len(ranks):
            raise ValueError("ringmaster: ProcessSet lists a rank twice: %r" % (ranks,))
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
        """This rank's rank in the set (-1 when it is not a member), or None when the set is
        not registered."""
        if self.process_set_id is None:
            return None
        return lib.ring_process_set_rank(self.process_set_id)

    def size(self):
        """The set's size, or None when it is not registered."""
        if self.process_set_id is None:
            return None
        n = lib.ring_process_set_size(self.process_set_id)
        if n < 0:
            raise error(CODES["ENOTINIT"], "process set size")
        return n

    def included(self):
        """Whether this rank is a member (by its ranks: known before registration)."""
        return rank() in self.ranks

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


class _GlobalProcessSet(ProcessSet):
    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        """Every rank of the world (empty before init())."""
        return list(range(size())) if lib.ring_initialized() else []

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


_registered = {}  # tuple(ranks) -> the registered ProcessSet


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of world ranks) on this rank and returns it. A
    collective: every rank calls it with the same ranks, in the same order of calls. A set
    of the same ranks as one registered already is refused (ValueError), as in Horovod
    (though one of every rank, which Horovod refuses as the global set's twin, is not)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("ringmaster: %r is already registered" % (process_set,))
    key = tuple(process_set.ranks)
    if key in _registered:
        raise ValueError("ringmaster: a process set of ranks %r exists already" % (process_set.ranks,))
    n = len(process_set.ranks)
    arr = (ctypes.c_int * max(n, 1))(*process_set.ranks)
    out = ctypes.c_int(0)
    check(lib.ring_process_set_create(arr, n, ctypes.byref(out)), "add_process_set(%r)" % (process_set.ranks,))
    process_set.process_set_id = out.value
    _registered[key] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set on this rank; a collective like add_process_set(). Returns
    True, or False for the global set and a set that is not registered (as Horovod does).
    Wait for the set's operations first: libring refuses (RingValueError) while any rank
    has one in flight."""
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id is None:
        return False
    if process_set.process_set_id == 0:
        return False
    check(lib.ring_process_set_remove(process_set.process_set_id), "remove_process_set(%r)" % (process_set.ranks,))
    _registered.pop(tuple(process_set.ranks), None)
    process_set.process_set_id = None
    return True


# ---- start and stop ----------------------------------------------------------------------

_lock = threading.Lock()
_uncaught = False
_atexit_registered = False
_wire = None  # RING_COMPRESSION as init() found it
# The world's size and 1/size as a ctypes double, for ringmaster.torch's fast path (its
# AVERAGE is a SUM with that postscale): set by init(), changed in place.
world = [1, ctypes.c_double(1.0)]
_shutdown_hooks = []  # called before ring_finalize (pending handles learn they will not run)
_after_shutdown_hooks = []  # called after it


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
        world[0] = lib.ring_size()
        world[1] = ctypes.c_double(1.0 / world[0])
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
        for hook in _after_shutdown_hooks:
            hook()
        # The sets end with libring: a later init() numbers them anew.
        for ps in _registered.values():
            ps.process_set_id = None
        _registered.clear()


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
