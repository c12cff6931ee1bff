# SPDX-License-Identifier: Apache-2.0
"""Every collective, written once over an adapter that knows one array type (numpy arrays,
torch tensors): its data pointer, dtype and shape, and how to allocate and copy.

Buffers go to libring as they are, with no copy, when they are contiguous; a
non-contiguous input is copied once (and an in-place result copied back). Blocking calls
without a name on the global set call libring's blocking functions, whose names per kind
("allreduce.noname") hit libring's response cache on every repeat; async calls without a
name are numbered per kind and process set, and every rank must make them in the same
order (as in Horovod).

Shapes: a reduction or broadcast of an array that is not 1-D declares its shape to libring
first (ring_shape_next), so that ranks passing the same number of elements in different
shapes get RING_EMISMATCH, as Horovod's do. allgather and alltoall check the dimensions
after the first themselves, in their first phase.

An adapter with horovod = True (torch's) also gets Horovod's semantics where they differ
from libring's: AVERAGE divides by the size of the set even while ranks have joined (as a
SUM with a postscale), and an alltoall handle always gives (output, received splits).
"""
import ctypes
import itertools
import threading

from . import basics
from ._handles import chain, submit
from ._library import CODES, DTYPES, RingError, RingValueError, check, lib

IN_PLACE = 1  # RING_IN_PLACE
_BOOL = DTYPES["bool"]

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


def declare(shape):
    """Declares the shape of this thread's next submission (ring_shape_next); a 1-D one
    says no more than its count, so it goes undeclared (and costs nothing)."""
    if len(shape) != 1:
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        check(lib.ring_shape_next(len(shape), dims), "shape")


def _horovod_average(A, op, post, ps, code):
    """Horovod's AVERAGE: a SUM divided by the set's size, whoever has joined (bool has no
    average: libring says so)."""
    if op == basics.Average and code != _BOOL and getattr(A, "horovod", False):
        return basics.Sum, post / (basics.world[0] if ps == 0 else lib.ring_process_set_size(ps))
    return op, post


_between = set()  # (process set, name) of two-phase operations between their phases
_between_lock = threading.Lock()


def _two_phase(what, named, ps, blocking, meta_args, keep, second):
    """A two-phase operation with a name (the unnamed blocking one takes libring's blocking
    calls instead). The first phase, an allgather of int64 metadata (meta_args: the rest of
    ring_allgather_async's arguments), goes under the operation's own name, as the second
    (second(None) submits it) does, so that libring refuses another operation of that name
    at submission whichever phase this one is in; between the phases, _between does. Returns
    the result (blocking) or a Handle."""
    key = (ps, named)
    with _between_lock:
        if key in _between:
            raise RingValueError(CODES["EINVAL"], "%s '%s': the name is already in flight" % (what, named.decode()))
        _between.add(key)

    def release():
        with _between_lock:
            _between.discard(key)

    try:
        first = submit(lib.ring_allgather_async, (named,) + meta_args, keep, None, what)
    except BaseException:
        release()
        raise
    if not blocking:
        return chain(first, second, what, release)
    try:
        first.wait()
        h = second(None)
    finally:
        release()
    return h.wait()


def _one_code(A, xs, dtype, what):
    """The one libring dtype of a reducing group's tensors (a reduction cannot mix them)."""
    codes = {A.code(x, dtype) for x in xs}
    if len(codes) != 1:
        raise TypeError("ringmaster: %s needs tensors of one dtype" % what)
    return codes.pop()


def _mismatch(what, detail):
    """What every rank raises when the first phase showed the ranks disagree."""
    return RingError(CODES["EMISMATCH"], "%s: %s" % (what, detail))


class Adapter:
    """What an adapter shares with every array type that slices, reshapes and names its
    dtype as numpy does (numpy arrays and torch tensors both do). An adapter subclasses it
    and adds the rest: code, is_float, ptr, numel, contiguity, allocation, copies, splits,
    scaling (arrays.py's _NumpyAdapter, torch/_adapter.py's TorchAdapter)."""

    @staticmethod
    def shape(x):
        return x.shape

    @staticmethod
    def rows(x, n):
        return x[:n]

    @staticmethod
    def slice(x, at, n):
        return x[at : at + n]

    @staticmethod
    def flat(x):
        return x.reshape(-1)

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def dtype_name(x):
        return str(x.dtype)


class Collectives:
    """The collectives for one adapter (an Adapter: arrays.py's, torch/_adapter.py's)."""

    def __init__(self, adapter):
        self.A = adapter

    # ---- allreduce -----------------------------------------------------------------------

    def allreduce(self, x, inplace, blocking, op, name, pre, post, process_set, dtype=None):
        A = self.A
        op, pre, post = _scales(op, pre, post)
        ps = basics.ps_id(process_set)
        code = A.code(x, dtype)
        op, post = _horovod_average(A, op, post, ps, code)
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
        declare(A.shape(x))
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
        code = _one_code(A, xs, dtype, "grouped_allreduce")
        op, post = _horovod_average(A, op, post, ps, code)
        if (pre != 1.0 or post != 1.0) and code == _BOOL:
            raise TypeError("ringmaster: grouped_allreduce: bool tensors take neither scale factors nor Average")
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
        declare(_group_shape(A, xs))
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
        declare(A.shape(x))
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
                raise _mismatch("allgather '%s'" % named.decode(),
                                "ranks passed arrays whose dimensions after the first differ "
                                "(this rank: %s)" % (shape,))
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
        return _two_phase("allgather", named, ps, blocking, (mine, 2, meta, 3, ps), (mine, meta), second)

    # ---- grouped allgather -----------------------------------------------------------------

    def grouped_allgather(self, xs, blocking, name, process_set, dtype=None):
        """allgather of each of xs, negotiated and moved as one: a first phase gathers every
        member's row count and the fingerprint of its other dimensions and dtype, the second
        moves every member's bytes in one allgatherv. Returns the list of gathered arrays."""
        A = self.A
        ps = basics.ps_id(process_set)
        xs = list(xs)
        if not xs:
            return [] if blocking else _Done([])
        codes = [A.code(x, dtype) for x in xs]
        bufs = [x if A.is_contiguous(x) else A.contiguous(x) for x in xs]
        shapes = [tuple(A.shape(x)) or (1,) for x in xs]
        rowbytes = []
        for shp, code in zip(shapes, codes):
            row = 1
            for d in shp[1:]:
                row *= d
            rowbytes.append(row * lib.ring_dtype_size(code))
        n = len(xs)
        _, nset = _set_geometry(ps)
        mine = (ctypes.c_int64 * (2 * n))()
        for i, (shp, code) in enumerate(zip(shapes, codes)):
            mine[2 * i] = shp[0]
            mine[2 * i + 1] = _fingerprint((code,) + shp[1:])
        meta = (ctypes.c_int64 * (2 * n * nset))()
        named = _name(name, "grouped_allgather", ps, blocking)
        what = "grouped allgather '%s'" % named.decode()

        def second(_):
            got = list(meta)
            rows = [[got[2 * (j * n + i)] for j in range(nset)] for i in range(n)]
            for i in range(n):
                if any(got[2 * (j * n + i) + 1] != mine[2 * i + 1] for j in range(nset)):
                    raise _mismatch(what, "ranks passed member %d in different dtypes or with "
                                    "different dimensions after the first (this rank: %s %s)"
                                    % (i, shapes[i], A.dtype_name(xs[i])))
            per_rank = [sum(rows[i][j] * rowbytes[i] for i in range(n)) for j in range(nset)]
            send = (ctypes.c_char * max(per_rank[_set_geometry(ps)[0]], 1))()
            at = 0
            for i in range(n):
                b = shapes[i][0] * rowbytes[i]
                ctypes.memmove(ctypes.addressof(send) + at, A.ptr(bufs[i]), b)
                at += b
            recv = (ctypes.c_char * max(sum(per_rank), 1))()
            outs = [A.empty_of((sum(rows[i]),) + shapes[i][1:], xs[i]) for i in range(n)]
            counts = _sizes(per_rank)

            def then():
                off = 0
                for j in range(nset):
                    for i in range(n):
                        b = rows[i][j] * rowbytes[i]
                        dst = A.ptr(outs[i]) + sum(rows[i][:j]) * rowbytes[i]
                        ctypes.memmove(dst, ctypes.addressof(recv) + off, b)
                        off += b
                return outs

            if blocking and name is None and ps == 0:
                check(lib.ring_allgatherv(send, at, recv, counts, 0), "grouped allgather")  # RING_UINT8
                return _Done(then())
            return submit(
                lib.ring_allgatherv_async,
                (named, send, at, recv, counts, 0, ps),
                (xs, bufs, send, recv, counts, outs),
                then,
                "grouped allgather",
            )

        if blocking and name is None and ps == 0:
            check(lib.ring_allgather(mine, 2 * n, meta, 3), "grouped allgather")  # RING_INT64
            return second(None).wait()
        return _two_phase("grouped allgather", named, ps, blocking, (mine, 2 * n, meta, 3, ps), (mine, meta),
                          second)

    # ---- alltoall ------------------------------------------------------------------------

    def alltoall(self, x, splits, blocking, name, process_set, dtype=None, with_splits=None):
        """Sends splits[j] rows (first dimension) of x to rank j; without splits, rows / size
        to each (ValueError when they do not divide). A first phase trades the splits and
        the other dimensions' fingerprint. Returns the received rows, and with splits (or
        from a handle, with horovod; or when with_splits says so) also the rows received
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
        given = splits is not None
        if not given:
            if rows % nset != 0:
                raise ValueError(
                    "ringmaster: alltoall: %d rows do not split evenly over %d ranks; pass splits" % (rows, nset)
                )
            parts = [rows // nset] * nset
        else:
            parts = A.splits(splits)
            if len(parts) != nset or any(s < 0 for s in parts) or sum(parts) > rows:
                raise ValueError(
                    "ringmaster: alltoall: splits must be %d non-negative row counts summing to at most %d, not %s"
                    % (nset, rows, parts)
                )
        # Each rank sends its splits and the fingerprint of its other dimensions.
        send_meta = (ctypes.c_int64 * (nset + 1))(*(parts + [_fingerprint(trail)]))
        recv_meta = (ctypes.c_int64 * (nset + 1) * nset)()
        me, _ = _set_geometry(ps)
        if with_splits is None:
            with_splits = given or (getattr(A, "horovod", False) and not blocking)

        def second(_):
            got = [recv_meta[j][me] for j in range(nset)]
            if any(recv_meta[j][nset] != send_meta[nset] for j in range(nset)):
                raise _mismatch("alltoall '%s'" % named.decode(),
                                "ranks passed arrays whose dimensions after the first differ "
                                "(this rank: %s)" % (shape,))
            out = A.empty_of((sum(got),) + trail, x)
            sc = _sizes([s * row for s in parts])
            rc_ = _sizes([s * row for s in got])
            then = (lambda: (out, A.splits_like(got, splits))) if with_splits else (lambda: out)
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
            check(lib.ring_allgather(send_meta, nset + 1, recv_meta, 3), "alltoall")  # RING_INT64
            return second(None).wait()
        return _two_phase("alltoall", named, ps, blocking, (send_meta, nset + 1, recv_meta, 3, ps),
                          (send_meta, recv_meta), second)

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
            send, per = _pack_rows(A, [buf], [shape], nset)
            count, out = per * nset, A.empty_of((per,), x)
            result = A.reshape(A.rows(out, mine * row), (mine,) + trail)
        then = lambda: result
        declare(shape)
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

    def grouped_reducescatter(self, xs, blocking, op, name, pre, post, process_set, dtype=None):
        """reducescatter of each of xs (one dtype), as one: every member's rows for rank j
        are packed into block j of one buffer, which one reducescatter reduces. Returns the
        list of this rank's shares."""
        A = self.A
        op, pre, post = _scales(op, pre, post)
        ps = basics.ps_id(process_set)
        xs = list(xs)
        if not xs:
            return [] if blocking else _Done([])
        code = _one_code(A, xs, dtype, "grouped_reducescatter")
        shapes = [tuple(A.shape(x)) for x in xs]
        if any(not shp for shp in shapes):
            raise ValueError("ringmaster: reducescatter needs at least one dimension")
        bufs = [x if A.is_contiguous(x) else A.contiguous(x) for x in xs]
        me, nset = _set_geometry(ps)
        send, per = _pack_rows(A, bufs, shapes, nset)
        out = A.empty_of((per,), xs[0])

        def then():
            res, at = [], 0
            for shp in shapes:
                row = 1
                for d in shp[1:]:
                    row *= d
                mine = lib.ring_reducescatter_count(shp[0], nset, me, None)
                res.append(A.reshape(A.clone(A.slice(out, at, mine * row)), (mine,) + shp[1:]))
                at += mine * row
            return res

        declare(_group_shape(A, xs))
        h = submit(
            lib.ring_reducescatter_async,
            (_name(name, "grouped_reducescatter", ps, blocking), A.ptr(send), A.ptr(out), per * nset, code, op,
             pre, post, ps),
            (xs, bufs, send, out),
            then,
            "grouped reducescatter",
        )
        return h.wait() if blocking else h


def _pack_rows(A, bufs, shapes, nset):
    """One buffer of nset equal blocks (zero-padded): block j holds, member after member,
    the rows that rank j gets of each (ring_reducescatter_count's split). Returns it and
    the block's length in elements."""
    blocks = [0] * nset
    plan = []
    for shp in shapes:
        row = 1
        for d in shp[1:]:
            row *= d
        for j in range(nset):
            off = ctypes.c_size_t(0)
            n = lib.ring_reducescatter_count(shp[0], nset, j, ctypes.byref(off))
            plan.append((j, off.value * row, n * row))
            blocks[j] += n * row
    per = max(blocks) if blocks else 0
    send = A.zeros_of((per * nset,), bufs[0])
    at = [j * per for j in range(nset)]
    k = 0
    for b in bufs:
        flat = A.flat(b)
        for _ in range(nset):
            j, frm, n = plan[k]
            A.copy_rows(send, at[j], flat, frm, n)
            at[j] += n
            k += 1
    return send, per


def _group_shape(A, xs):
    """The shapes of a group's members as one declaration: each member's rank, then its
    dimensions."""
    dims = []
    for x in xs:
        shp = tuple(A.shape(x))
        dims.append(len(shp))
        dims.extend(shp)
    return dims


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
