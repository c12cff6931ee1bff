# SPDX-License-Identifier: Apache-2.0
"""The collectives on torch tensors, with horovod.torch's names, arguments and semantics.

Where Horovod's semantics differ from libring's, these follow Horovod's: AVERAGE divides by
the size of the set even while some ranks have joined (_collectives.py); a broadcast's
root_rank is a rank of the world, also on a process set; alltoall without splits splits
each rank's rows evenly (ranks may hold different numbers of rows), and an alltoall handle
gives (output, received splits).

The out-of-place blocking ones are differentiable, with Horovod's gradients: of an
allreduce the same allreduce of the gradient (Sum, Average or Adasum: Min, Max and Product
have none); of an allgather this rank's rows of the averaged gradient; of a broadcast the
averaged gradient on the root, zero elsewhere; of an alltoall the reverse alltoall; of a
reducescatter the allgather of the gradient, times the set's size for Sum and the scale
factors; the grouped ones likewise, member by member.
"""
import ctypes

import torch

from .. import basics
from .._collectives import barrier as _barrier
from .._collectives import declare as _declare
from .._collectives import join as _join
from .._handles import poll, synchronize
from .._library import allreduce_scaled_unchecked, error
from ._adapter import CODES, C
from .compression import Compression

__all__ = [
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "sparse_allreduce_async",
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
    "poll",
    "synchronize",
    "join",
    "barrier",
]

_G = basics.global_process_set
# Ops whose gradient is the same op of the gradient (Horovod's rule; Adasum's too).
_LINEAR = (basics.Sum, basics.Average, basics.Adasum)


def _op(average, op):
    """Horovod's deprecated average= and op= (default Average)."""
    if average is not None:
        if op is not None:
            raise ValueError("ringmaster.torch: pass op= or the deprecated average=, not both")
        return basics.Average if average else basics.Sum
    return basics.Average if op is None else op


def _grad_name(name, what="grad"):
    return None if name is None else "%s.%s" % (name, what)


def _needs_grad(t):
    return getattr(t, "requires_grad", False) and torch.is_grad_enabled()


def _set_rank_size(ps):
    if ps is None or ps is _G:
        return basics.rank(), basics.size()
    return ps.rank(), ps.size()


def _root(root_rank, ps):
    """Horovod's root_rank is a rank of the world, on a process set too: its rank there."""
    root = int(root_rank)
    if ps is None or ps is _G:
        return root
    if root not in ps.ranks:
        raise ValueError("ringmaster.torch: root_rank %d is not in process set %s" % (root, ps.ranks))
    return ps.ranks.index(root)


def _no_grad_for(op, what):
    if op not in _LINEAR:
        raise RuntimeError("ringmaster.torch: %s with op %s has no gradient" % (what, basics.OPS[op]))


# ---- allreduce ---------------------------------------------------------------------------


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, pre, post, ps):
        ctx.args = (name, op, pre, post, ps)
        return C.allreduce(tensor, False, True, op, name, pre, post, ps)

    @staticmethod
    def backward(ctx, grad):
        name, op, pre, post, ps = ctx.args
        _no_grad_for(op, "allreduce")
        return C.allreduce(grad.contiguous(), False, True, op, _grad_name(name), pre, post, ps), None, None, None, None, None


# The fast path's pieces, bound once: each global or attribute lookup costs tens of
# nanoseconds, and the whole call is a few microseconds (bench/torch's call comparison).
_Tensor = torch.Tensor
_strided = torch.strided
_grad_enabled = torch.is_grad_enabled
_empty_like = torch.empty_like
_call = allreduce_scaled_unchecked
_vp, _sz, _dbl = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double
_IN_PLACE = _vp(1)  # RING_IN_PLACE
_ONE = _dbl(1.0)
_SUM, _AVERAGE, _BOOL = basics.Sum, basics.Average, CODES[torch.bool]
_world = basics.world  # (size, c_double(1 / size)), set by init()
# op= as the fast path takes it: absent (Horovod's default, Average), a ring_op_t code or
# its lower-case name. Anything else (a bad value) takes the general path, which raises the
# error.
_FAST_OPS = {None: basics.Average}
_FAST_OPS.update((code, code) for code in basics.OPS)
_FAST_OPS.update((name, code) for code, name in basics.OPS.items())
_FAST_OP_TYPES = frozenset((type(None), int, str))  # hashable, and not bool (True == 1)


def _fast(tensor, name, average, op, pre, post, process_set, new_output):
    """The common blocking call (a contiguous strided CPU tensor of a supported dtype, no
    name, the global set, op= as a code or name, float scale factors, no gradient to
    track) goes straight to libring's blocking allreduce, into a new tensor or in place,
    and returns the result. Otherwise it returns None and the call takes the general path,
    which validates everything and raises the errors. The tests on arguments come first,
    so that a call that cannot take this path touches the tensor as little as possible;
    together they guarantee the argument types that the unchecked ctypes call needs."""
    if (name is None and average is None and process_set is _G and type(tensor) is _Tensor
            and type(op) in _FAST_OP_TYPES and type(pre) is float and type(post) is float):
        code = CODES.get(tensor.dtype)
        opc = _FAST_OPS.get(op)
        if (code is not None and opc is not None and tensor.is_cpu and tensor.layout is _strided
                and tensor.is_contiguous() and not (tensor.requires_grad and _grad_enabled())):
            if opc == _AVERAGE and code != _BOOL:  # Horovod's: a sum over the world's size
                opc = _SUM
                cpost = _world[1] if post == 1.0 else _dbl(post / _world[0])
            else:
                cpost = _ONE if post == 1.0 else _dbl(post)
            if tensor.dim() != 1:
                _declare(tensor.shape)
            if new_output:
                out = _empty_like(tensor)
                src = _vp(tensor.data_ptr())
            else:
                out, src = tensor, _IN_PLACE
            rc = _call(src, _vp(out.data_ptr()), _sz(tensor.numel()), code, opc,
                       _ONE if pre == 1.0 else _dbl(pre), cpost)
            if rc < 0:
                raise error(rc, "allreduce")
            return out
    return None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=_G):
    """Returns a new tensor: op (Average by default) over every rank's tensor."""
    if compression is Compression.none:
        out = _fast(tensor, name, average, op, prescale_factor, postscale_factor, process_set, True)
        if out is not None:
            return out
    op = basics.op_code(_op(average, op))
    t, cctx = compression.compress(tensor)
    if _needs_grad(t):
        out = _Allreduce.apply(t, name, op, prescale_factor, postscale_factor, process_set)
    else:
        out = C.allreduce(t, False, True, op, name, prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=_G):
    """allreduce into tensor itself; returns it."""
    out = _fast(tensor, name, average, op, prescale_factor, postscale_factor, process_set, False)
    if out is not None:
        return out
    return C.allreduce(tensor, True, True, _op(average, op), name, prescale_factor, postscale_factor, process_set)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=_G):
    """Starts an allreduce; synchronize(handle) returns the new tensor."""
    return C.allreduce(tensor, False, False, _op(average, op), name, prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=_G):
    """Starts an allreduce into tensor itself; leave it alone until synchronize(handle)."""
    return C.allreduce(tensor, True, False, _op(average, op), name, prescale_factor, postscale_factor, process_set)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, pre, post, ps, *tensors):
        ctx.args = (name, op, pre, post, ps)
        return tuple(C.grouped_allreduce(tensors, False, True, op, name, pre, post, ps))

    @staticmethod
    def backward(ctx, *grads):
        name, op, pre, post, ps = ctx.args
        _no_grad_for(op, "grouped_allreduce")
        grads = [g.contiguous() for g in grads]
        out = C.grouped_allreduce(grads, False, True, op, _grad_name(name), pre, post, ps)
        return (None, None, None, None, None) + tuple(out)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=_G):
    """allreduce of a list of tensors of one dtype, negotiated and run as one unit."""
    op = basics.op_code(_op(average, op))
    pairs = [compression.compress(t) for t in tensors]
    ts = [p[0] for p in pairs]
    if any(_needs_grad(t) for t in ts):
        outs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set, *ts)
    else:
        outs = C.grouped_allreduce(ts, False, True, op, name, prescale_factor, postscale_factor, process_set)
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=_G):
    return C.grouped_allreduce(tensors, True, True, _op(average, op), name, prescale_factor, postscale_factor,
                               process_set)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=_G):
    return C.grouped_allreduce(tensors, False, False, _op(average, op), name, prescale_factor, postscale_factor,
                               process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=_G):
    return C.grouped_allreduce(tensors, True, False, _op(average, op), name, prescale_factor, postscale_factor,
                               process_set)


def sparse_allreduce_async(tensor, name, op, process_set=_G):
    """A sparse COO tensor's allreduce, as Horovod makes it: an allgather of its indices and
    one of its values, so that the result holds every rank's entries (uncoalesced: entries
    at the same index add up when it is coalesced or made dense). Returns a function that
    waits and returns the sparse result. op: Sum, or Average (the values divided by the
    set's size)."""
    op = basics.op_code(_op(None, op))
    if op not in (basics.Sum, basics.Average):
        raise ValueError("ringmaster.torch: sparse_allreduce_async takes Sum or Average, not %s" % basics.OPS[op])
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise ValueError("ringmaster.torch: sparse_allreduce_async takes a sparse COO tensor")
    ind = allgather_async(tensor._indices().transpose(0, 1).contiguous(), _grad_name(name, "indices"), process_set)
    val = allgather_async(tensor._values().contiguous(), _grad_name(name, "values"), process_set)
    nset = _set_rank_size(process_set)[1]

    def handle():
        values = synchronize(val)
        indices = synchronize(ind)
        if op == basics.Average:
            values = values / nset
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, tensor.size())

    return handle


# ---- allgather ---------------------------------------------------------------------------


def _gathered_rows(rows, name, ps):
    """Every rank's row counts of the tensors of rows (a list), as a (set size, len(rows))
    tensor, and this rank's offsets in the gathered tensors."""
    got = C.allgather(torch.tensor([rows], dtype=torch.int64), True, name, ps)
    me, _ = _set_rank_size(ps)
    return [int(v) for v in got[:me].sum(0).tolist()] if me > 0 else [0] * len(rows)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, ps):
        ctx.args = (name, ps)
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.shape = tensor.shape
        return C.allgather(tensor, True, name, ps)

    @staticmethod
    def backward(ctx, grad):
        name, ps = ctx.args
        summed = C.allreduce(grad.contiguous(), False, True, basics.Average, _grad_name(name), 1.0, 1.0, ps)
        off = _gathered_rows([ctx.rows], _grad_name(name, "grad.rows"), ps)[0]
        return summed[off : off + ctx.rows].reshape(ctx.shape), None, None


def allgather(tensor, name=None, process_set=_G):
    """Every rank's tensor concatenated along the first dimension (which may differ between
    ranks), in rank order."""
    if _needs_grad(tensor):
        return _Allgather.apply(tensor, name, process_set)
    return C.allgather(tensor, True, name, process_set)


def allgather_async(tensor, name=None, process_set=_G):
    return C.allgather(tensor, False, name, process_set)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, ps, *tensors):
        ctx.args = (name, ps)
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.shapes = [t.shape for t in tensors]
        return tuple(C.grouped_allgather(tensors, True, name, ps))

    @staticmethod
    def backward(ctx, *grads):
        name, ps = ctx.args
        summed = C.grouped_allreduce([g.contiguous() for g in grads], False, True, basics.Average,
                                     _grad_name(name), 1.0, 1.0, ps)
        offs = _gathered_rows(ctx.rows, _grad_name(name, "grad.rows"), ps)
        return (None, None) + tuple(s[o : o + r].reshape(shp)
                                    for s, o, r, shp in zip(summed, offs, ctx.rows, ctx.shapes))


def grouped_allgather(tensors, name=None, process_set=_G):
    """allgather of each of a list of tensors, negotiated and moved as one."""
    tensors = list(tensors)
    if any(_needs_grad(t) for t in tensors):
        return list(_GroupedAllgather.apply(name, process_set, *tensors))
    return C.grouped_allgather(tensors, True, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=_G):
    return C.grouped_allgather(tensors, False, name, process_set)


# ---- broadcast ---------------------------------------------------------------------------


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, ps):
        ctx.args = (root_rank, name, ps)
        return C.broadcast(tensor, _root(root_rank, ps), False, True, name, ps)

    @staticmethod
    def backward(ctx, grad):
        root_rank, name, ps = ctx.args
        g = C.allreduce(grad.contiguous(), False, True, basics.Average, _grad_name(name), 1.0, 1.0, ps)
        if basics.rank() != root_rank:
            g.zero_()
        return g, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=_G):
    """Returns a copy of root_rank's tensor (root_rank: a rank of the world)."""
    if _needs_grad(tensor):
        return _Broadcast.apply(tensor, root_rank, name, process_set)
    return C.broadcast(tensor, _root(root_rank, process_set), False, True, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=_G):
    """Overwrites tensor with root_rank's; returns it."""
    return C.broadcast(tensor, _root(root_rank, process_set), True, True, name, process_set)


def broadcast_async(tensor, root_rank, name=None, process_set=_G):
    return C.broadcast(tensor, _root(root_rank, process_set), False, False, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=_G):
    return C.broadcast(tensor, _root(root_rank, process_set), True, False, name, process_set)


# ---- alltoall ----------------------------------------------------------------------------


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, ps):
        ctx.args = (name, ps)
        out, recv = C.alltoall(tensor, splits, True, name, ps, with_splits=True)
        ctx.recv = recv
        if splits is None:
            return out
        ctx.mark_non_differentiable(recv)
        return out, recv

    @staticmethod
    def backward(ctx, grad, *unused):
        name, ps = ctx.args
        g, _ = C.alltoall(grad.contiguous(), ctx.recv, True, _grad_name(name), ps, with_splits=True)
        return g, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=_G):
    """Sends splits[j] rows (first dimension) of tensor to rank j, or rows / size to each
    without splits. Returns the rows received in rank order, and with splits also a tensor
    of the rows received from each rank (in splits' dtype; int32 for a list)."""
    if _needs_grad(tensor):
        return _Alltoall.apply(tensor, splits, name, process_set)
    return C.alltoall(tensor, splits, True, name, process_set)


def alltoall_async(tensor, splits=None, name=None, process_set=_G):
    """Starts an alltoall; synchronize(handle) returns (output, received splits), as
    Horovod's does, with splits or without."""
    return C.alltoall(tensor, splits, False, name, process_set)


# ---- reducescatter -----------------------------------------------------------------------


def _rs_grad(op, pre, post, ps):
    """Horovod's factor on a reducescatter's gradient."""
    _no_grad_for(op, "reducescatter")
    if op == basics.Adasum:
        raise RuntimeError("ringmaster.torch: reducescatter takes no Adasum")
    return (_set_rank_size(ps)[1] if op == basics.Sum else 1) * pre * post


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, pre, post, ps):
        ctx.args = (name, op, pre, post, ps)
        return C.reducescatter(tensor, True, op, name, pre, post, ps)

    @staticmethod
    def backward(ctx, grad):
        name, op, pre, post, ps = ctx.args
        g = C.allgather(grad.contiguous(), True, _grad_name(name), ps)
        scale = _rs_grad(op, pre, post, ps)
        return (g * scale if scale != 1 else g), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=basics.Average, process_set=_G,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over the ranks and returns this rank's share of the rows (the first
    rows % size ranks get one more)."""
    op = basics.op_code(op)
    t, cctx = compression.compress(tensor)
    if _needs_grad(t):
        out = _Reducescatter.apply(t, name, op, prescale_factor, postscale_factor, process_set)
    else:
        out = C.reducescatter(t, True, op, name, prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, cctx)


def reducescatter_async(tensor, name=None, op=basics.Average, process_set=_G, prescale_factor=1.0,
                        postscale_factor=1.0):
    return C.reducescatter(tensor, False, op, name, prescale_factor, postscale_factor, process_set)


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, pre, post, ps, *tensors):
        ctx.args = (name, op, pre, post, ps)
        return tuple(C.grouped_reducescatter(tensors, True, op, name, pre, post, ps))

    @staticmethod
    def backward(ctx, *grads):
        name, op, pre, post, ps = ctx.args
        gs = C.grouped_allgather([g.contiguous() for g in grads], True, _grad_name(name), ps)
        scale = _rs_grad(op, pre, post, ps)
        return (None, None, None, None, None) + tuple(g * scale if scale != 1 else g for g in gs)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=basics.Average,
                          process_set=_G, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each of a list of tensors of one dtype, negotiated and run as one
    collective. Returns this rank's shares."""
    op = basics.op_code(op)
    pairs = [compression.compress(t) for t in tensors]
    ts = [p[0] for p in pairs]
    if any(_needs_grad(t) for t in ts):
        outs = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor, process_set, *ts)
    else:
        outs = C.grouped_reducescatter(ts, True, op, name, prescale_factor, postscale_factor, process_set)
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]


def grouped_reducescatter_async(tensors, name=None, op=basics.Average, process_set=_G, prescale_factor=1.0,
                                postscale_factor=1.0):
    return C.grouped_reducescatter(tensors, False, op, name, prescale_factor, postscale_factor, process_set)


# ---- join and barrier --------------------------------------------------------------------


def join(device=-1):
    """This rank has run out of data: it takes part in the other ranks' allreduces with
    zeros until every rank has joined (broadcasts from ranks still working go on too;
    allgather, alltoall and reducescatter fail meanwhile). Returns the rank that joined
    last, on every rank. device is Horovod's GPU argument, unused on CPU tensors."""
    return _join()


def barrier(process_set=_G):
    """Returns once every rank of the set has entered the barrier."""
    _barrier(process_set)
