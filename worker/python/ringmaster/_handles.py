# SPDX-License-Identifier: Apache-2.0
"""Handles of asynchronous operations, and the helper thread that runs the second phase of
two-phase collectives (an allgather must learn every rank's row count before it can size
its output).

A Handle holds libring's handle and every buffer the operation reads or writes, so that
none is freed while libring still uses it; wait() frees libring's handle and returns the
result. Handles never waited for stay referenced until shutdown().
"""
import ctypes
import queue
import threading
import time

from . import basics
from ._library import CODES, RingError, error, lib

__all__ = ["Handle", "poll", "synchronize"]

_inflight = set()  # Handles whose libring handle is live: keeps their buffers alive
_inflight_lock = threading.Lock()


class Handle:
    """An operation in flight. poll() says whether it finished; wait() (or synchronize())
    returns its result or raises its error. Waiting twice returns the same result."""

    __slots__ = ("_ptr", "_keep", "_then", "_what", "_done", "_result", "_exc", "_ready", "_inner")

    def __init__(self, ptr, keep, then, what):
        self._ptr = ptr  # libring's ring_handle_t *, as an int; None once waited
        self._keep = keep  # buffers that must outlive the operation
        self._then = then  # () -> result, run once after success
        self._what = what
        self._done = False
        self._result = None
        self._exc = None
        self._ready = None  # threading.Event for a two-phase operation
        self._inner = None  # its second phase, a Handle
        if ptr is not None:
            with _inflight_lock:
                _inflight.add(self)

    @classmethod
    def chained(cls, what):
        h = cls(None, None, None, what)
        h._ready = threading.Event()
        return h

    def poll(self):
        """True when wait() will not block."""
        if self._done:
            return True
        if self._ready is not None:
            return self._ready.is_set() and (self._exc is not None or self._inner.poll())
        return bool(lib.ring_test(self._ptr))

    def wait(self):
        if self._done:
            if self._exc is not None:
                raise self._exc
            return self._result
        if self._ready is not None:
            self._ready.wait()
            if self._exc is None:
                try:
                    self._result = self._inner.wait()
                except BaseException as e:
                    self._exc = e
            self._done = True
            return self.wait()
        rc = lib.ring_wait(self._ptr)
        self._finish(rc)
        return self.wait()

    def _finish(self, rc):
        self._ptr = None
        with _inflight_lock:
            _inflight.discard(self)
        if rc < 0:
            self._exc = error(rc, self._what)
        else:
            try:
                self._result = self._then() if self._then is not None else None
            except BaseException as e:
                self._exc = e
        self._keep = self._then = None
        self._done = True

    def _abandon(self, exc):
        self._ptr = None
        self._keep = self._then = None
        self._exc = exc
        self._done = True

    def __repr__(self):
        return "<ringmaster handle %s%s>" % (self._what, " done" if self._done else "")


def poll(handle):
    """True when the operation of handle has finished (synchronize() will not block)."""
    return handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (the output array or tensor)."""
    return handle.wait()


def submit(fn, args, keep, then, what):
    """Calls an *_async function of libring with args + [handle out] and returns a Handle."""
    out = ctypes.c_void_p()
    rc = fn(*args, ctypes.byref(out))
    if rc < 0:
        raise error(rc, what)
    return Handle(out.value, keep, then, what)


# ---- the second phase of two-phase operations -------------------------------------------
#
# Every rank submits the first phase when the program calls the operation, so all first
# phases complete whatever order the program later waits in. This thread waits for them in
# submission order and submits each second phase, so the program never has to wait for one
# operation before another can run (Horovod's background thread does the same). It polls
# rather than blocking in ring_wait, so that shutdown() never frees the engine under it.

_queue = queue.Queue()
_thread = None
_stopping = False


def _worker():
    while True:
        item = _queue.get()
        if item is None:
            return
        first, cont, outer, release = item
        try:
            pause = 20e-6
            while first._ptr is not None and not first.poll():
                if _stopping:
                    raise RingError(CODES["ESHUTDOWN"], "%s: shutdown() ran before it finished" % first._what)
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
            outer._inner = cont(first.wait())
        except BaseException as e:
            outer._exc = e
        finally:
            if release is not None:
                release()
        outer._ready.set()


def chain(first, cont, what, release=None):
    """A Handle for: wait for Handle first, then cont(its result) returns the Handle of the
    second phase, whose result is the operation's. release() (if given) runs once cont has
    returned or either phase failed."""
    global _thread
    outer = Handle.chained(what)
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_worker, name="ringmaster-chain", daemon=True)
        _thread.start()
    _queue.put((first, cont, outer, release))
    return outer


def _on_shutdown():
    """Completes what can complete before ring_finalize, and fails the rest."""
    global _stopping, _thread
    _stopping = True
    if _thread is not None and _thread.is_alive():
        _queue.put(None)
        _thread.join()
    _thread = None
    _stopping = False
    with _inflight_lock:
        live = list(_inflight)
        _inflight.clear()
    for h in live:
        if lib.ring_test(h._ptr):
            h._finish(lib.ring_wait(h._ptr))
        else:
            # libring fails it during ring_finalize (its small handle is not freed), but
            # ring_finalize may yet run it when every rank had submitted it, writing its
            # output: its buffers stay until ring_finalize has returned.
            _parked.append(h._keep)
            h._abandon(RingError(CODES["ESHUTDOWN"], "%s: shutdown() ran before it finished" % h._what))


_parked = []  # the buffers of operations abandoned at shutdown, until ring_finalize returns


def _after_shutdown():
    _parked.clear()


basics._shutdown_hooks.append(_on_shutdown)
basics._after_shutdown_hooks.append(_after_shutdown)
