# SPDX-License-Identifier: Apache-2.0
"""Every collective, written once over an adapter that knows one array type (numpy arrays,
torch tensors): its data pointer, dtype and shape, and how to allocate and copy.

Buffers go to libring as they are, with no copy, when they are contiguous; a
non-contiguous input is copied once (and an in-place result copied back). Blocking calls
without a name on the global set call libring's blocking functions, whose names per kind
("allreduce.noname") hit libring's response cache on every repeat; async calls without a
name are numbered per kind and process set, and every rank must make them in the same
order (as in Horovod).
"""
import ctypes
import itertools
import threading

from . import basics
from ._handles import chain, submit
from ._library import check, lib

IN_PLACE = 1  # RING_IN_PLACE

_counters = {}
_counters_lock = threading.Lock()


def _auto_name(kind, ps):
    key = (kind, ps)
    with _counters_lock:
        c = _counters.get(key)
        if c is None:
            c = _counters[key] = itertools.count()
        return "%s.noname.%d" % (kind, next(c))


def _name(name, kind, ps, blocking):
    if name is not None:
        name = str(name)
        return name.encode()
    if blocking:
        return ("%s.noname" % kind).encode()
    return _auto_name(kind, ps).encode()


def _sizes(values):
    return (ctypes.c_size_t * max(len(values), 1))(*values)


def _set_geometry(ps):
    """(this rank's rank in the set, the set's size) for a process set id."""
    if ps == 0:
        return basics.rank(), basics.size()
    return lib.ring_process_set_rank(ps), lib.ring_process_set_size(ps)


def _scales(op, pre, post):
    op = basics.op_code(op)
    return op, float(pre), float(post)


class Collectives:
    """The collectives for one adapter (see numpy_adapter.py and torch/_adapter.py)."""

    def __init__(self, adapter):
        self.A = adapter

    # ---- allreduce -----------------------------------------------------------------------

    def allreduce(self, x, inplace, blocking, op, name, pre, post, process_set, dtype=None):
        A = self.A
        op, pre, post = _scales(op, pre, post)
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        if inplace:
            A.check_writable(x, "allreduce_")
            buf = x if A.is_contiguous(x) else A.contiguous(x)
            src, out = IN_PLACE, buf
        else:
            buf = x if A.is_contiguous(x) else A.contiguous(x)
            out = A.empty_like(buf)
            src = A.ptr(buf)
        count = A.numel(buf)
        if not inplace:
            then = lambda: out
        elif buf is x:
            then = lambda: x
        else:
            then = lambda: A.copy_(x, buf)
        if blocking and name is None and ps == 0:
            check(lib.ring_allreduce_scaled(src, A.ptr(out), count, code, op, pre, post), "allreduce")
            return then()
        h = submit(
            lib.ring_allreduce_async,
            (_name(name, "allreduce", ps, blocking), src, A.ptr(out), count, code, op, pre, post, ps),
            (x, buf, out),
            then,
            "allreduce",
        )
        return h.wait() if blocking else h

    def grouped_allreduce(self, xs, inplace, blocking, op, name, pre, post, process_set, dtype=None):
        A = self.A
        op, pre, post = _scales(op, pre, post)
        ps = basics.ps_id(process_set)
        xs = list(xs)
        if not xs:
            return [] if blocking else _Done([])
        codes = {A.code(x, dtype) for x in xs}
        if len(codes) != 1:
            raise TypeError("ringmaster: grouped_allreduce needs tensors of one dtype")
        code = codes.pop()
        if (pre != 1.0 or post != 1.0) and not A.is_float(xs[0], dtype):
            raise TypeError("ringmaster: grouped_allreduce takes scale factors for floating-point tensors only")
        bufs, outs, sends = [], [], []
        for x in xs:
            if inplace:
                A.check_writable(x, "grouped_allreduce_")
            b = x if A.is_contiguous(x) else A.contiguous(x)
            if pre != 1.0:
                # libring's grouped allreduce has no prescale. In place the input is
                # overwritten by the result anyway; out of place, scale a copy.
                b = A.scale_(b, pre) if inplace else A.scaled(b, pre)
            bufs.append(b)
            if inplace:
                outs.append(b)
                sends.append(IN_PLACE)
            else:
                outs.append(A.empty_like(b))
                sends.append(A.ptr(b))

        def then():
            res = []
            for x, o in zip(xs, outs):
                if post != 1.0:
                    A.scale_(o, post)
                if inplace and o is not x:
                    A.copy_(x, o)
                res.append(x if inplace else o)
            return res

        n = len(xs)
        send_arr = (ctypes.c_void_p * n)(*sends)
        recv_arr = (ctypes.c_void_p * n)(*[A.ptr(o) for o in outs])
        counts = _sizes([A.numel(o) for o in outs])
        h = submit(
            lib.ring_grouped_allreduce_async,
            (_name(name, "grouped_allreduce", ps, blocking), n, send_arr, recv_arr, counts, code, op, ps),
            (xs, bufs, outs, send_arr, recv_arr, counts),
            then,
            "grouped_allreduce",
        )
        return h.wait() if blocking else h

    # ---- broadcast -----------------------------------------------------------------------

    def broadcast(self, x, root_rank, inplace, blocking, name, process_set, dtype=None):
        A = self.A
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        if inplace:
            A.check_writable(x, "broadcast_")
            buf = x if A.is_contiguous(x) else A.contiguous(x)
            then = (lambda: x) if buf is x else (lambda: A.copy_(x, buf))
        else:
            buf = A.clone(x)
            then = lambda: buf
        root = int(root_rank)
        if blocking and name is None and ps == 0:
            check(lib.ring_broadcast(A.ptr(buf), A.numel(buf), code, root), "broadcast")
            return then()
        h = submit(
            lib.ring_broadcast_async,
            (_name(name, "broadcast", ps, blocking), A.ptr(buf), A.numel(buf), code, root, ps),
            (x, buf),
            then,
            "broadcast",
        )
        return h.wait() if blocking else h

    # ---- allgather -----------------------------------------------------------------------

    def allgather(self, x, blocking, name, process_set, dtype=None):
        """Concatenates every rank's x along the first dimension, which may differ between
        ranks; the other dimensions must agree."""
        A = self.A
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        shape = tuple(A.shape(x)) or (1,)
        buf = x if A.is_contiguous(x) else A.contiguous(x)
        rows, trail = shape[0], shape[1:]
        row = 1
        for d in trail:
            row *= d
        _, nset = _set_geometry(ps)
        # Each rank sends its row count and a fingerprint of its other dimensions.
        mine = (ctypes.c_int64 * 2)(rows, _fingerprint(trail))
        meta = (ctypes.c_int64 * (2 * nset))()
        named = _name(name, "allgather", ps, blocking)

        def second(_):
            got = list(meta)
            if any(got[2 * i + 1] != got[1] for i in range(nset)):
                raise ValueError(
                    "ringmaster: allgather %s: ranks passed arrays whose dimensions after the "
                    "first differ (this rank: %s)" % (named.decode(), shape)
                )
            counts = [got[2 * i] * row for i in range(nset)]
            out = A.empty_of((sum(got[0::2]),) + trail, x)
            recvcounts = _sizes(counts)
            then = lambda: out
            if blocking and name is None and ps == 0:
                check(lib.ring_allgatherv(A.ptr(buf), rows * row, A.ptr(out), recvcounts, code), "allgather")
                return _Done(then())
            return submit(
                lib.ring_allgatherv_async,
                (named, A.ptr(buf), rows * row, A.ptr(out), recvcounts, code, ps),
                (x, buf, out, recvcounts),
                then,
                "allgather",
            )

        if blocking and name is None and ps == 0:
            check(lib.ring_allgather(mine, 2, meta, 3), "allgather")  # RING_INT64 = 3
            return second(None).wait()
        first = submit(
            lib.ring_allgather_async,
            (named + b".sizes", mine, 2, meta, 3, ps),  # RING_INT64 = 3
            (mine, meta),
            None,
            "allgather",
        )
        if blocking:
            first.wait()
            return second(None).wait()
        return chain(first, second, "allgather")

    # ---- alltoall ------------------------------------------------------------------------

    def alltoall(self, x, splits, blocking, name, process_set, dtype=None):
        """Sends splits[j] rows (first dimension) of x to rank j. Without splits the rows
        are split evenly. Returns the received rows, and with splits also the rows received
        from each rank."""
        A = self.A
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        shape = tuple(A.shape(x)) or (1,)
        buf = x if A.is_contiguous(x) else A.contiguous(x)
        rows, trail = shape[0], shape[1:]
        row = 1
        for d in trail:
            row *= d
        _, nset = _set_geometry(ps)
        named = _name(name, "alltoall", ps, blocking)
        if splits is None:
            if rows % nset != 0:
                raise ValueError(
                    "ringmaster: alltoall: %d rows do not split evenly over %d ranks; pass splits" % (rows, nset)
                )
            out = A.empty_like(buf)
            count = rows // nset * row
            if blocking and name is None and ps == 0:
                check(lib.ring_alltoall(A.ptr(buf), A.ptr(out), count, code), "alltoall")
                return out
            h = submit(
                lib.ring_alltoall_async,
                (named, A.ptr(buf), A.ptr(out), count, code, ps),
                (x, buf, out),
                lambda: out,
                "alltoall",
            )
            return h.wait() if blocking else h
        splits = [int(s) for s in A.tolist(splits)]
        if len(splits) != nset or any(s < 0 for s in splits) or sum(splits) != rows:
            raise ValueError(
                "ringmaster: alltoall: splits must be %d non-negative row counts summing to %d, not %s"
                % (nset, rows, splits)
            )
        send_splits = (ctypes.c_int64 * nset)(*splits)
        recv_splits = (ctypes.c_int64 * nset)()

        def second(_):
            got = list(recv_splits)
            out = A.empty_of((sum(got),) + trail, x)
            sc = _sizes([s * row for s in splits])
            rc_ = _sizes([s * row for s in got])
            then = lambda: (out, A.int64(got, x))
            if blocking and name is None and ps == 0:
                check(lib.ring_alltoallv(A.ptr(buf), sc, A.ptr(out), rc_, code), "alltoall")
                return _Done(then())
            return submit(
                lib.ring_alltoallv_async,
                (named, A.ptr(buf), sc, A.ptr(out), rc_, code, ps),
                (x, buf, out, sc, rc_),
                then,
                "alltoall",
            )

        if blocking and name is None and ps == 0:
            check(lib.ring_alltoall(send_splits, recv_splits, 1, 3), "alltoall")
            return second(None).wait()
        first = submit(
            lib.ring_alltoall_async,
            (named + b".splits", send_splits, recv_splits, 1, 3, ps),
            (send_splits, recv_splits),
            None,
            "alltoall",
        )
        if blocking:
            first.wait()
            return second(None).wait()
        return chain(first, second, "alltoall")

    # ---- reducescatter -------------------------------------------------------------------

    def reducescatter(self, x, blocking, op, name, pre, post, process_set, dtype=None):
        """Reduces x over the ranks and leaves rank r its share of the rows (first
        dimension); the first rows % size ranks get one more row."""
        A = self.A
        op, pre, post = _scales(op, pre, post)
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        shape = tuple(A.shape(x))
        if not shape:
            raise ValueError("ringmaster: reducescatter needs at least one dimension")
        buf = x if A.is_contiguous(x) else A.contiguous(x)
        rows, trail = shape[0], shape[1:]
        row = 1
        for d in trail:
            row *= d
        me, nset = _set_geometry(ps)
        mine = lib.ring_reducescatter_count(rows, nset, me, None)
        if rows % nset == 0 or row == 1:
            # libring splits elements as these rows split: no packing needed.
            send, count, out = buf, rows * row, A.empty_of((mine,) + trail, x)
            result = out
        else:
            # Pack rank j's rows into block j of equal blocks, padded; each rank keeps the
            # rows at the start of its block.
            per = -(-rows // nset)
            send = A.zeros_of((per * nset,) + trail, x)
            for j in range(nset):
                off = ctypes.c_size_t(0)
                n = lib.ring_reducescatter_count(rows, nset, j, ctypes.byref(off))
                A.copy_rows(send, j * per, buf, off.value, n)
            count, out = per * nset * row, A.empty_of((per,) + trail, x)
            result = A.rows(out, mine)
        then = lambda: result
        if blocking and name is None and ps == 0:
            check(lib.ring_reducescatter_scaled(A.ptr(send), A.ptr(out), count, code, op, pre, post), "reducescatter")
            return result
        h = submit(
            lib.ring_reducescatter_async,
            (_name(name, "reducescatter", ps, blocking), A.ptr(send), A.ptr(out), count, code, op, pre, post, ps),
            (x, buf, send, out),
            then,
            "reducescatter",
        )
        return h.wait() if blocking else h


class _Done:
    """A finished operation, where a blocking second phase returns what a Handle would."""

    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result

    def wait(self):
        return self.result

    def poll(self):
        return True


def _fingerprint(dims):
    h = 1469598103934665603
    for d in (len(dims),) + tuple(dims):
        h = ((h ^ int(d)) * 1099511628211) & 0x7FFFFFFFFFFFFFFF
    return h


def barrier(process_set=None):
    """Returns once every rank of the set has entered it."""
    ps = basics.ps_id(process_set)
    if ps == 0:
        check(lib.ring_barrier(), "barrier")
        return
    # libring's barrier is global; on a set, a one-byte allreduce is one.
    one = (ctypes.c_uint8 * 1)(1)
    submit(
        lib.ring_allreduce_async,
        (b"barrier.noname", IN_PLACE, one, 1, 0, basics.Max, 1.0, 1.0, ps),
        (one,),
        None,
        "barrier",
    ).wait()


def join():
    """For uneven data: this rank has no more batches. Until every rank has joined, it takes
    part in the others' allreduces with neutral values (and Average divides by the ranks
    still working). Returns the rank that joined last."""
    return check(lib.ring_join(), "join")
