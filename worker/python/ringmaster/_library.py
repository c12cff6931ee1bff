# SPDX-License-Identifier: Apache-2.0
"""Finds and loads libring.so, declares its functions for ctypes, and turns its error codes
into Python exceptions.

ctypes rather than cffi: it ships with Python (nothing to install next to Debian's
python3-torch), it releases the GIL during every call (a blocking collective never stalls
the program's other threads), and a call costs about a microsecond (0.6 us where the hot
path hands it ready-made ctypes arguments, below), against the 4 us of the smallest
blocking allreduce at np 2 on one host. cffi's ABI mode is no faster; its API mode would
need a compiler at install time.

Where the library comes from, first match wins:
  1. $RING_LIBRARY, the path of libring.so (an error if it does not load);
  2. the path `cmake --install` recorded in ringmaster/_install.py;
  3. libring.so.0 next to this file (a wheel that bundles it);
  4. the build tree of the checkout this package sits in (<repo>/build/worker/libring);
  5. the system loader (LD_LIBRARY_PATH, ldconfig's directories).
"""
import ctypes
import os

__all__ = ["lib", "HorovodInternalError", "RingError", "RingValueError", "check", "library_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("RING_LIBRARY")
    if env:
        return [("RING_LIBRARY", env)], True
    found = []
    try:
        from . import _install  # written by `cmake --install`

        found.append(("cmake --install", _install.LIBRARY))
    except ImportError:
        pass
    for name in ("libring.so.0", "libring.so"):
        found.append(("next to the package", os.path.join(_HERE, name)))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    found.append(("the build tree", os.path.join(repo, "build", "worker", "libring", "libring.so")))
    found.append(("the system loader", "libring.so.0"))
    return found, False


def _load():
    cands, forced = _candidates()
    tried = []
    for where, path in cands:
        if not forced and os.sep in path and not os.path.exists(path):
            tried.append("%s (%s: absent)" % (path, where))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            if forced:
                raise ImportError("ringmaster: RING_LIBRARY=%s does not load: %s" % (path, e))
            tried.append("%s (%s: %s)" % (path, where, e))
    raise ImportError(
        "ringmaster: cannot find libring.so. Build it (make), set RING_LIBRARY to its path, "
        "or install it (cmake --install). Tried: " + "; ".join(tried)
    )


lib, library_path = _load()

_c_int, _c_size, _c_double, _vp = ctypes.c_int, ctypes.c_size_t, ctypes.c_double, ctypes.c_void_p
_hp = ctypes.POINTER(ctypes.c_void_p)
_sizes = ctypes.POINTER(ctypes.c_size_t)
_ptrs = ctypes.POINTER(ctypes.c_void_p)


class EngineStats(ctypes.Structure):
    _fields_ = [
        (f, ctypes.c_uint64)
        for f in (
            "cycles",
            "full_negotiations",
            "coordinator_names",
            "cache_hits",
            "tensors",
            "collectives",
            "negotiation_us",
            "fast_path",
        )
    ]


# name: (restype, argtypes). Every pointer travels as an integer address (c_void_p), which
# is what numpy's and torch's data pointers are.
_PROTOTYPES = {
    "ring_version": (ctypes.c_char_p, []),
    "ring_strerror": (ctypes.c_char_p, [_c_int]),
    "ring_err_name": (ctypes.c_char_p, [_c_int]),
    "ring_last_error": (ctypes.c_char_p, []),
    "ring_dtype_size": (_c_size, [_c_int]),
    "ring_dtype_name": (ctypes.c_char_p, [_c_int]),
    "ring_init": (_c_int, []),
    "ring_finalize": (_c_int, []),
    "ring_initialized": (_c_int, []),
    "ring_rank": (_c_int, []),
    "ring_size": (_c_int, []),
    "ring_local_rank": (_c_int, []),
    "ring_local_size": (_c_int, []),
    "ring_cross_rank": (_c_int, []),
    "ring_cross_size": (_c_int, []),
    "ring_allreduce_scaled": (_c_int, [_vp, _vp, _c_size, _c_int, _c_int, _c_double, _c_double]),
    "ring_allgather": (_c_int, [_vp, _c_size, _vp, _c_int]),
    "ring_allgatherv": (_c_int, [_vp, _c_size, _vp, _sizes, _c_int]),
    "ring_broadcast": (_c_int, [_vp, _c_size, _c_int, _c_int]),
    "ring_reducescatter_scaled": (
        _c_int,
        [_vp, _vp, _c_size, _c_int, _c_int, _c_double, _c_double],
    ),
    "ring_reducescatter_count": (_c_size, [_c_size, _c_int, _c_int, _sizes]),
    "ring_alltoall": (_c_int, [_vp, _vp, _c_size, _c_int]),
    "ring_alltoallv": (_c_int, [_vp, _sizes, _vp, _sizes, _c_int]),
    "ring_barrier": (_c_int, []),
    "ring_allreduce_async": (
        _c_int,
        [ctypes.c_char_p, _vp, _vp, _c_size, _c_int, _c_int, _c_double, _c_double, _c_int, _hp],
    ),
    "ring_grouped_allreduce_async": (
        _c_int,
        [ctypes.c_char_p, _c_int, _ptrs, _ptrs, _sizes, _c_int, _c_int, _c_int, _hp],
    ),
    "ring_allgather_async": (_c_int, [ctypes.c_char_p, _vp, _c_size, _vp, _c_int, _c_int, _hp]),
    "ring_allgatherv_async": (
        _c_int,
        [ctypes.c_char_p, _vp, _c_size, _vp, _sizes, _c_int, _c_int, _hp],
    ),
    "ring_broadcast_async": (_c_int, [ctypes.c_char_p, _vp, _c_size, _c_int, _c_int, _c_int, _hp]),
    "ring_reducescatter_async": (
        _c_int,
        [ctypes.c_char_p, _vp, _vp, _c_size, _c_int, _c_int, _c_double, _c_double, _c_int, _hp],
    ),
    "ring_alltoall_async": (_c_int, [ctypes.c_char_p, _vp, _vp, _c_size, _c_int, _c_int, _hp]),
    "ring_alltoallv_async": (
        _c_int,
        [ctypes.c_char_p, _vp, _sizes, _vp, _sizes, _c_int, _c_int, _hp],
    ),
    "ring_wait": (_c_int, [_vp]),
    "ring_test": (_c_int, [_vp]),
    "ring_join": (_c_int, []),
    "ring_process_set_create": (_c_int, [ctypes.POINTER(_c_int), _c_int, ctypes.POINTER(_c_int)]),
    "ring_process_set_rank": (_c_int, [_c_int]),
    "ring_process_set_size": (_c_int, [_c_int]),
    "ring_process_set_remove": (_c_int, [_c_int]),
    "ring_shape_next": (_c_int, [_c_int, ctypes.POINTER(ctypes.c_int64)]),
    "ring_timeline_start": (_c_int, [ctypes.c_char_p]),
    "ring_timeline_stop": (_c_int, []),
    "ring_engine_stats": (_c_int, [ctypes.POINTER(EngineStats)]),
    "ring_request_stop": (None, []),
    "ring_stop_requested": (_c_int, []),
}

for _name, (_res, _args) in _PROTOTYPES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# ring_allreduce_scaled once more, without argtypes, for ringmaster.torch's blocking fast
# path: ctypes converts each declared argument through its type's from_param, about 150 ns
# apiece, which made the declared call cost 1.1 us against 0.6 us with arguments that
# arrive as ctypes objects and small ints (a 7-argument no-op, Python 3.11). Its caller
# must pass exactly (c_void_p, c_void_p, c_size_t, int, int, c_double, c_double): nothing
# checks them here.
allreduce_scaled_unchecked = ctypes.CDLL(library_path).ring_allreduce_scaled
allreduce_scaled_unchecked.restype = _c_int

# The error codes, by name: ENOTINIT -> -3 ... (ring.h's table order).
CODES = {}
for _code in range(-1, -64, -1):
    _n = lib.ring_err_name(_code).decode()
    if _n == "RING_EUNKNOWN":
        break
    CODES[_n[len("RING_") :]] = _code

# The element types, by name: uint8 -> 0 ... bool -> 10 (ring.h's ring_dtype_t), asked of
# libring as the error codes are, so that ring.h alone numbers them. The adapters map their
# own dtypes onto these names (arrays.py, torch/_adapter.py).
DTYPES = {}
for _code in range(64):
    _n = lib.ring_dtype_name(_code).decode()
    if _n == "invalid":
        break
    DTYPES[_n] = _code


class HorovodInternalError(RuntimeError):
    """A collective failed: horovod.torch's name for it, which scripts catch (its elastic
    mode restarts on it). Every error of libring is one (RingError)."""


class RingError(HorovodInternalError):
    """A libring call failed. code is the negative RING_E* code, name its name
    ("RING_EMISMATCH") and str() the details libring gave (ring_last_error()), such as
    "allreduce 'grad/w1': rank 0 sent float32, rank 3 sent float64"."""

    def __init__(self, code, message=None):
        self.code = code
        self.name = lib.ring_err_name(code).decode()
        if message is None:
            message = lib.ring_strerror(code).decode()
        super().__init__("%s: %s" % (self.name, message))


class RingValueError(RingError, ValueError):
    """RING_EINVAL: libring refused an argument before anything was sent (a name already in
    flight, a set this rank is not in, an op the dtype has not). Horovod raises ValueError
    for these, so it is one too."""


def error(code, what=None):
    """The RingError for code, with libring's last message on this thread (RingValueError
    for RING_EINVAL)."""
    if code == CODES["ENOTINIT"]:
        detail = "ringmaster is not initialized; call init() first"
    else:
        detail = lib.ring_last_error().decode(errors="replace")
    name = lib.ring_err_name(code).decode() + ": "
    if detail.startswith(name):  # the engine's messages may carry the name already
        detail = detail[len(name) :]
    if not detail:
        detail = lib.ring_strerror(code).decode()
    if what and not detail.startswith(what):
        detail = "%s: %s" % (what, detail)
    return (RingValueError if code == CODES["EINVAL"] else RingError)(code, detail)


def check(rc, what=None):
    """Returns rc when it is not an error code, else raises RingError."""
    if rc < 0:
        raise error(rc, what)
    return rc
