# SPDX-License-Identifier: Apache-2.0
"""The collectives on numpy arrays: ringmaster.allreduce(array) and the rest.

Each collective comes blocking (allreduce, returning a new array), in place (allreduce_,
returning its input), asynchronous (allreduce_async, allreduce_async_: a Handle for poll()
and synchronize()). numpy has no bfloat16: pass dtype="bfloat16" with a 16-bit array
(uint16/int16) holding bfloat16 bit patterns, or use an array whose dtype is named
"bfloat16" (ml_dtypes).
"""
import numpy as np

from . import basics
from ._collectives import Adapter, Collectives
from ._library import DTYPES, lib

__all__ = [
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "allgather",
    "allgather_async",
    "grouped_allgather",
    "grouped_allgather_async",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "alltoall",
    "alltoall_async",
    "reducescatter",
    "reducescatter_async",
    "grouped_reducescatter",
    "grouped_reducescatter_async",
]

# numpy dtype -> libring's ring_dtype_t, by name (numpy has every one but bfloat16)
_CODES = {np.dtype(n): c for n, c in DTYPES.items() if n != "bfloat16"}
_BF16 = DTYPES["bfloat16"]


class _NumpyAdapter(Adapter):
    name = "numpy"

    @staticmethod
    def code(x, dtype=None):
        if not isinstance(x, np.ndarray):
            raise TypeError("ringmaster: expected a numpy array, not %s" % type(x).__name__)
        if dtype is not None:
            if str(dtype) != "bfloat16" or x.dtype.itemsize != 2:
                raise TypeError(
                    "ringmaster: dtype=%r: only 'bfloat16' over a 16-bit array (uint16, int16) "
                    "is accepted" % (dtype,)
                )
            return _BF16
        c = _CODES.get(x.dtype)
        if c is None:
            if x.dtype.name == "bfloat16":
                return _BF16
            raise TypeError(
                "ringmaster: numpy dtype %s is not supported; use uint8, int8, int16, uint16, "
                "int32, int64, float16, float32, float64, bool (or dtype='bfloat16' over "
                "uint16)" % x.dtype
            )
        return c

    @staticmethod
    def is_float(x, dtype=None):
        return dtype is not None or x.dtype.kind == "f" or x.dtype.name == "bfloat16"

    @staticmethod
    def ptr(x):
        return x.ctypes.data

    @staticmethod
    def numel(x):
        return x.size

    @staticmethod
    def is_contiguous(x):
        return x.flags.c_contiguous

    @staticmethod
    def contiguous(x):
        return np.ascontiguousarray(x)

    @staticmethod
    def check_writable(x, what):
        if not x.flags.writeable:
            raise ValueError("ringmaster: %s needs a writable array" % what)

    @staticmethod
    def empty_like(x):
        return np.empty_like(x, order="C")

    @staticmethod
    def empty_of(shape, like):
        return np.empty(shape, dtype=like.dtype)

    @staticmethod
    def zeros_of(shape, like):
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def clone(x):
        return np.array(x, order="C", copy=True)

    @staticmethod
    def copy_(dst, src):
        np.copyto(dst, src)
        return dst

    @staticmethod
    def splits(v):
        a = np.asarray(v)
        if a.dtype.kind not in "iu":
            raise ValueError("ringmaster: alltoall splits must be integers, not %s" % a.dtype)
        return [int(s) for s in a.reshape(-1).tolist()]

    @staticmethod
    def splits_like(values, splits):
        return np.asarray(values, dtype=np.int64)

    @staticmethod
    def copy_rows(dst, at, src, frm, n):
        dst[at : at + n] = src[frm : frm + n]

    @staticmethod
    def scale_(x, f):
        """x *= f as libring scales: integers in double, truncated toward zero."""
        if x.dtype.kind == "f":
            x *= x.dtype.type(f)
        else:
            info = np.iinfo(x.dtype)
            x[...] = np.clip(np.trunc(x.astype(np.float64) * f), info.min, info.max)
        return x

    @staticmethod
    def scaled(x, f):
        return _NumpyAdapter.scale_(np.array(x, copy=True), f)

    @staticmethod
    def int64(values, like):
        return np.asarray(values, dtype=np.int64)

    @staticmethod
    def tolist(v):
        return np.asarray(v).reshape(-1).tolist()


_C = Collectives(_NumpyAdapter)
_G = basics.global_process_set


def allreduce(array, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=_G, dtype=None):
    """Returns a new array: op over every rank's array (Average by default). prescale
    multiplies each input first, postscale the result."""
    return _C.allreduce(array, False, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def allreduce_(array, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=_G, dtype=None):
    """allreduce into array itself; returns it."""
    return _C.allreduce(array, True, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def allreduce_async(array, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=_G, dtype=None):
    """Starts allreduce; synchronize(handle) returns the new array."""
    return _C.allreduce(array, False, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


def allreduce_async_(array, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=_G, dtype=None):
    """Starts allreduce into array itself; leave it alone until synchronize(handle)."""
    return _C.allreduce(array, True, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_allreduce(arrays, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=_G, dtype=None):
    """allreduce of a list of arrays of one dtype, negotiated and run as one unit."""
    return _C.grouped_allreduce(arrays, False, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_allreduce_(arrays, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=_G, dtype=None):
    return _C.grouped_allreduce(arrays, True, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_allreduce_async(arrays, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=_G, dtype=None):
    return _C.grouped_allreduce(arrays, False, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_allreduce_async_(arrays, op=basics.Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=_G, dtype=None):
    return _C.grouped_allreduce(arrays, True, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


def allgather(array, name=None, process_set=_G, dtype=None):
    """Every rank's array concatenated along the first dimension, in rank order. The first
    dimension may differ between ranks; the others must agree."""
    return _C.allgather(array, True, name, process_set, dtype)


def allgather_async(array, name=None, process_set=_G, dtype=None):
    return _C.allgather(array, False, name, process_set, dtype)


def grouped_allgather(arrays, name=None, process_set=_G, dtype=None):
    """allgather of each of a list of arrays (of any dtypes), negotiated and moved as one."""
    return _C.grouped_allgather(arrays, True, name, process_set, dtype)


def grouped_allgather_async(arrays, name=None, process_set=_G, dtype=None):
    return _C.grouped_allgather(arrays, False, name, process_set, dtype)


def broadcast(array, root_rank, name=None, process_set=_G, dtype=None):
    """Returns a copy of root_rank's array (root_rank is relative to the process set)."""
    return _C.broadcast(array, root_rank, False, True, name, process_set, dtype)


def broadcast_(array, root_rank, name=None, process_set=_G, dtype=None):
    """Overwrites array with root_rank's; returns it."""
    return _C.broadcast(array, root_rank, True, True, name, process_set, dtype)


def broadcast_async(array, root_rank, name=None, process_set=_G, dtype=None):
    return _C.broadcast(array, root_rank, False, False, name, process_set, dtype)


def broadcast_async_(array, root_rank, name=None, process_set=_G, dtype=None):
    return _C.broadcast(array, root_rank, True, False, name, process_set, dtype)


def alltoall(array, splits=None, name=None, process_set=_G, dtype=None):
    """Sends splits[j] rows of array to rank j (evenly split without splits) and returns the
    rows received, in rank order; with splits, returns (rows, rows received per rank)."""
    return _C.alltoall(array, splits, True, name, process_set, dtype)


def alltoall_async(array, splits=None, name=None, process_set=_G, dtype=None):
    return _C.alltoall(array, splits, False, name, process_set, dtype)


def reducescatter(array, op=basics.Average, name=None, process_set=_G, prescale_factor=1.0,
                  postscale_factor=1.0, dtype=None):
    """Reduces array over the ranks and returns this rank's share of the rows: the first
    (rows % size) ranks get one more row than the others."""
    return _C.reducescatter(array, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def reducescatter_async(array, op=basics.Average, name=None, process_set=_G, prescale_factor=1.0,
                        postscale_factor=1.0, dtype=None):
    return _C.reducescatter(array, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_reducescatter(arrays, op=basics.Average, name=None, process_set=_G, prescale_factor=1.0,
                          postscale_factor=1.0, dtype=None):
    """reducescatter of each of a list of arrays of one dtype, as one collective; returns
    this rank's shares."""
    return _C.grouped_reducescatter(arrays, True, op, name, prescale_factor, postscale_factor, process_set, dtype)


def grouped_reducescatter_async(arrays, op=basics.Average, name=None, process_set=_G, prescale_factor=1.0,
                                postscale_factor=1.0, dtype=None):
    return _C.grouped_reducescatter(arrays, False, op, name, prescale_factor, postscale_factor, process_set, dtype)


del lib
