# SPDX-License-Identifier: Apache-2.0
"""DistributedOptimizer: averages gradients over the ranks while backward still runs.

A hook on each parameter's gradient accumulator submits that gradient's allreduce
(asynchronous, in place, under the parameter's name) the moment autograd has produced it,
so the allreduce of the last layers overlaps the backward of the first, and libring's
engine fuses the gradients that are ready together into one collective. step() waits for
every gradient, then runs the wrapped optimizer's own step.

With groups, the gradients of a group go as one grouped allreduce once all of them are
ready. Sparse gradients (an Embedding with sparse=True) go as an allgather of their
indices and values, or with sparse_as_dense as a dense allreduce. With op=Adasum the
optimizer reduces the steps instead of the gradients, as Horovod's does: each parameter is
stepped locally as soon as its gradient is ready, and the change it made is combined
across the ranks with Adasum and applied to where the step started.
"""
import warnings
from contextlib import contextmanager

import torch

from .. import basics
from ._adapter import C
from .compression import Compression
from .ops import sparse_allreduce_async

__all__ = ["DistributedOptimizer"]


def _named(optimizer, named_parameters):
    """{parameter: name} for every parameter of the optimizer, checked as Horovod checks."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if named_parameters is None:
        return {p: "param.%d" % i for i, p in enumerate(params)}
    named = list(named_parameters)
    if any(not isinstance(t, tuple) for t in named):
        raise ValueError("ringmaster.torch: named_parameters must be (name, parameter) pairs, "
                         "as model.named_parameters() gives")
    names = [n for n, _ in named]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError("ringmaster.torch: parameter names must be unique; repeated: %s" % dups)
    by_param = {id(p): n for n, p in named}
    unnamed = [i for i, p in enumerate(params) if id(p) not in by_param]
    if unnamed:
        raise ValueError("ringmaster.torch: named_parameters does not name %d of the optimizer's "
                         "parameters (the first at index %d)" % (len(unnamed), unnamed[0]))
    return {p: by_param[id(p)] for p in params}


def _split(items, n):
    """items in n contiguous runs as even as can be (the first len % n one longer)."""
    q, r = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        k = q + (1 if i < r else 0)
        if k:
            out.append(items[at : at + k])
        at += k
    return out


def _groups(params, groups):
    """Horovod's groups (a number of groups, or lists of parameters) as a list of tuples
    of params (those that need gradients), the ungrouped ones alone."""
    if groups is None:
        return []
    if isinstance(groups, bool) or not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
        raise ValueError("ringmaster.torch: groups must be a positive number of groups or a list of "
                         "lists of parameters, not %r" % (groups,))
    if isinstance(groups, int):
        return [tuple(g) for g in _split(params, groups)]
    seen, out = set(), []
    wanted = {id(p) for p in params}
    for g in groups:
        members = []
        for p in g:
            if not isinstance(p, torch.Tensor):
                raise ValueError("ringmaster.torch: groups must hold tensors, not %s" % type(p).__name__)
            if id(p) in seen:
                raise ValueError("ringmaster.torch: a parameter can be in one group only")
            seen.add(id(p))
            if id(p) in wanted:
                members.append(p)
        if members:
            out.append(tuple(members))
    return out + [(p,) for p in params if id(p) not in seen]


class _Distributed:
    """Mixed in before the wrapped optimizer's class (see DistributedOptimizer)."""

    def _ring_setup(self, named_parameters, compression, backward_passes_per_step, op,
                    gradient_predivide_factor, groups, sparse_as_dense, process_set):
        op = basics.op_code(op)
        if gradient_predivide_factor != 1.0 and op != basics.Average:
            raise ValueError("ringmaster.torch: gradient_predivide_factor needs op=Average")
        if backward_passes_per_step < 1:
            raise ValueError("ringmaster.torch: backward_passes_per_step must be at least 1")
        self._parameter_names = _named(self, named_parameters)  # Horovod's attribute
        params = list(self._parameter_names)
        # Horovod's split of an average: divide by the factor before the sum, multiply by
        # factor / size after (the AVERAGE applies the 1/size).
        if op == basics.Average:
            self._ring_scale = (1.0 / gradient_predivide_factor, float(gradient_predivide_factor))
        else:
            self._ring_scale = (1.0, 1.0)
        self._ring_op = op
        self._ring_ps = process_set
        self._ring_names = {id(p): "grad." + self._parameter_names[p] for p in params}
        self._ring_params = [p for p in params if p.requires_grad]
        self._ring_compression = compression
        self._ring_sparse_as_dense = sparse_as_dense
        self._ring_passes = backward_passes_per_step
        self._ring_delay = {id(p): backward_passes_per_step for p in params}
        self._ring_groups = [g for g in _groups(self._ring_params, groups) if len(g) > 1]
        self._ring_group_of = {id(p): i for i, g in enumerate(self._ring_groups) for p in g}
        self._ring_ready = {}  # group index -> how many of its members are ready
        # id(p), or ("group", index) -> (kind, params, handle, tensors, contexts)
        self._ring_pending = {}
        self._ring_sync = True
        self._ring_synchronized = False
        self._ring_accs = []  # the gradient accumulators, which must outlive the hooks
        self._ring_active = process_set.included() and basics.size() > 1
        if self._ring_active:
            for p in self._ring_params:
                # A view of p has p's gradient accumulator as its first next function.
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._ring_hook(p))
                self._ring_accs.append(acc)

    def _ring_hook(self, p):
        key = id(p)

        def hook(*_):
            if self._ring_delay[key] <= 0:
                raise AssertionError(
                    "ringmaster.torch: a gradient was computed more than backward_passes_per_step "
                    "(%d) times before optimizer.step(); raise backward_passes_per_step to accumulate "
                    "more passes locally" % self._ring_passes)
            self._ring_delay[key] -= 1
            if self._ring_delay[key] > 0:
                return
            g = self._ring_group_of.get(key)
            if g is None:
                self._ring_submit(p)
                return
            self._ring_ready[g] = self._ring_ready.get(g, 0) + 1
            if self._ring_ready[g] == len(self._ring_groups[g]):
                self._ring_submit_group(g)

        return hook

    def _ring_grad(self, p):
        if p.grad is None:  # unused on this rank: the other ranks still expect it
            p.grad = torch.zeros_like(p)
        return p.grad

    def _ring_submit(self, p):
        grad = self._ring_grad(p)
        name = self._ring_names[id(p)]
        if grad.is_sparse:
            if not self._ring_sparse_as_dense:
                h = sparse_allreduce_async(grad, name, self._ring_op, self._ring_ps)
                self._ring_pending[id(p)] = ("sparse", (p,), h, None, None)
                return
            grad = grad.to_dense()
        t, ctx = self._ring_compression.compress(grad)
        pre, post = self._ring_scale
        h = C.allreduce(t, True, False, self._ring_op, name, pre, post, self._ring_ps)
        self._ring_pending[id(p)] = ("dense", (p,), h, (t,), (ctx,))

    def _ring_submit_group(self, g):
        group = self._ring_groups[g]
        grads = []
        for p in group:
            grad = self._ring_grad(p)
            if grad.is_sparse:
                if not self._ring_sparse_as_dense:
                    raise ValueError("ringmaster.torch: %s has a sparse gradient, which groups take only "
                                     "with sparse_as_dense=True" % self._parameter_names[p])
                grad = grad.to_dense()
            grads.append(grad)
        pairs = [self._ring_compression.compress(grad) for grad in grads]
        pre, post = self._ring_scale
        h = C.grouped_allreduce([t for t, _ in pairs], True, False, self._ring_op, self._ring_names[id(group[0])],
                                pre, post, self._ring_ps)
        self._ring_pending[("group", g)] = ("group", group, h, [t for t, _ in pairs], [c for _, c in pairs])
        self._ring_ready[g] = 0

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those whose hook did not fire,
        such as parameters this rank did not use) and puts the results in p.grad."""
        if not self._ring_active:
            self._ring_synchronized = True
            return
        for p in self._ring_params:
            g = self._ring_group_of.get(id(p))
            if g is None and id(p) not in self._ring_pending:
                self._ring_submit(p)
            elif g is not None and ("group", g) not in self._ring_pending:
                self._ring_submit_group(g)
        pending, self._ring_pending = self._ring_pending, {}
        for kind, params, h, ts, ctxs in pending.values():
            result = h() if kind == "sparse" else h.wait()
            for i, p in enumerate(params):
                self._ring_delay[id(p)] = self._ring_passes
                if kind == "sparse":
                    self._ring_set_grad(p, result)
                    continue
                t, ctx = ts[i], ctxs[i]
                if p.grad.is_sparse:  # sparse_as_dense: back to sparse for the step
                    self._ring_set_grad(p, self._ring_compression.decompress(t, ctx).to_sparse())
                elif ctx is not None or t is not p.grad:
                    with torch.no_grad():
                        p.grad.copy_(self._ring_compression.decompress(t, ctx))
        self._ring_ready.clear()
        self._ring_synchronized = True

    @staticmethod
    def _ring_set_grad(p, value):
        with torch.no_grad():
            p.grad.zero_().add_(value)

    @contextmanager
    def skip_synchronize(self):
        """For a step after an explicit synchronize() (to clip gradients, say): step() then
        does not synchronize again."""
        self._ring_sync = False
        try:
            yield
        finally:
            self._ring_sync = True

    def step(self, closure=None):
        if self._ring_sync:
            if self._ring_synchronized:
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() after "
                    "optimizer.synchronize(): the gradients were reduced a second time. Wrap "
                    "step() in `with optimizer.skip_synchronize():`")
            self.synchronize()
        self._ring_synchronized = False
        return super().step(closure)

    def _ring_local_step(self, closure=None):
        """The wrapped optimizer's own step, reducing nothing."""
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._ring_pending:
            raise AssertionError(
                "ringmaster.torch: optimizer.zero_grad() after loss.backward() but before "
                "optimizer.step() or synchronize(): the allreduces in flight still write the gradients")
        return super().zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        # A new state starts a new step: forget what was under way (Horovod's way).
        self._ring_pending = {}
        self._ring_ready.clear()
        self._ring_synchronized = False
        self._ring_sync = True
        for key in self._ring_delay:
            self._ring_delay[key] = self._ring_passes
        return super().load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        if passes < 1:
            raise ValueError("ringmaster.torch: backward_passes_per_step must be at least 1")
        self._ring_passes = passes
        for key in self._ring_delay:
            self._ring_delay[key] = passes


class _DistributedAdasum:
    """Adasum's optimizer (mixed in like _Distributed): reduces each parameter's step.

    When a parameter's gradient is ready, the wrapped optimizer steps that parameter alone,
    from where it stood (start); the change it made goes to an Adasum allreduce in place of
    the parameter's data; step() waits and puts the parameter at start plus the combined
    change. Adasum combines the ranks' changes so that agreeing ones are not counted twice,
    which is why the learning rate is not scaled by the number of ranks."""

    def _ring_setup(self, named_parameters, compression, backward_passes_per_step):
        if backward_passes_per_step < 1:
            raise ValueError("ringmaster.torch: backward_passes_per_step must be at least 1")
        self._parameter_names = _named(self, named_parameters)
        self._ring_compression = compression
        self._ring_passes = backward_passes_per_step
        self._ring_params = [p for p in self._parameter_names if p.requires_grad]
        self._ring_delay = {id(p): backward_passes_per_step for p in self._parameter_names}
        self._ring_start = {id(p): torch.zeros_like(p, requires_grad=False) for p in self._ring_params}
        self._ring_pending = {}  # id(p) -> (p, handle, tensor sent, compression context)
        self._ring_accs = []
        for p in self._ring_params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._ring_hook(p))
            self._ring_accs.append(acc)

    def _ring_hook(self, p):
        key = id(p)

        def hook(*_):
            if self._ring_delay[key] <= 0:
                raise AssertionError(
                    "ringmaster.torch: a gradient was computed more than backward_passes_per_step "
                    "(%d) times before optimizer.step()" % self._ring_passes)
            self._ring_delay[key] -= 1
            if self._ring_delay[key] == 0:
                self._ring_submit(p)

        return hook

    def _ring_submit(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        start = self._ring_start[id(p)]
        kept = [group["params"] for group in self.param_groups]
        with torch.no_grad():
            start.copy_(p)
        try:  # the wrapped step, on p alone (with its group's hyperparameters)
            for group in self.param_groups:
                group["params"] = [q for q in group["params"] if q is p]
            super().step()
        finally:
            for group, ps in zip(self.param_groups, kept):
                group["params"] = ps
        with torch.no_grad():
            p.sub_(start)  # p holds its change now
        t, ctx = self._ring_compression.compress(p.data)
        h = C.allreduce(t, True, False, basics.Adasum, "delta." + self._parameter_names[p], 1.0, 1.0,
                        basics.global_process_set)
        self._ring_pending[id(p)] = (p, h, t, ctx)

    def synchronize(self):
        """Nothing to do: the changes are combined in step()."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("ringmaster.torch: skip_synchronize() does not apply to op=Adasum, whose "
                             "step() reduces the parameters' changes, not the gradients")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._ring_params:
            if id(p) not in self._ring_pending:
                self._ring_submit(p)
        pending, self._ring_pending = self._ring_pending, {}
        for p, h, t, ctx in pending.values():
            h.wait()
            delta = self._ring_compression.decompress(t, ctx)
            with torch.no_grad():
                p.copy_(self._ring_start[id(p)] + delta)
            self._ring_delay[id(p)] = self._ring_passes
        return loss

    def _ring_local_step(self, closure=None):
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._ring_pending:
            raise AssertionError(
                "ringmaster.torch: optimizer.zero_grad() after loss.backward() but before "
                "optimizer.step(): the parameters' changes are still being combined")
        return super().zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        if passes < 1:
            raise ValueError("ringmaster.torch: backward_passes_per_step must be at least 1")
        self._ring_passes = passes
        for key in self._ring_delay:
            self._ring_delay[key] = passes


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=basics.Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=basics.global_process_set):
    """Wraps a torch.optim optimizer so that step() applies gradients averaged (op) over
    the ranks of process_set.

    named_parameters: model.named_parameters(), which names each gradient's allreduce (the
    names must match across ranks; without it the parameters' order names them).
    compression: Compression.none, .fp16 or .bf16. backward_passes_per_step: passes of
    backward that accumulate locally before one allreduce. gradient_predivide_factor: with
    op=Average, divide by it before the sum and multiply by it / size after. groups: a
    number of groups to split the parameters into, or lists of parameters: each group's
    gradients go as one grouped allreduce (num_groups is its deprecated name).
    sparse_as_dense: reduce sparse gradients as dense tensors (else as an allgather of
    their entries). op=Adasum (global set only) reduces the steps instead (see
    _DistributedAdasum). On a rank outside process_set, step() is the wrapped step alone.

    The result is an instance of a subclass of the optimizer's own class sharing its
    state and param_groups, so state_dict() and isinstance() work as before.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("ringmaster.torch: DistributedOptimizer wraps a torch.optim.Optimizer, not %s"
                        % type(optimizer).__name__)
    if num_groups != 0:
        warnings.warn("ringmaster.torch: num_groups is deprecated; pass groups", DeprecationWarning)
        if groups is None:
            groups = num_groups
    adasum = basics.op_code(op) == basics.Adasum and basics.size() > 1
    if adasum and process_set is not basics.global_process_set:
        raise NotImplementedError("ringmaster.torch: op=Adasum in a DistributedOptimizer takes the global "
                                  "process set only")
    mixin = _DistributedAdasum if adasum else _Distributed
    cls = type(optimizer.__class__.__name__, (mixin, optimizer.__class__), {})
    dist = cls.__new__(cls)
    dist.__dict__.update(optimizer.__dict__)
    if adasum:
        dist._ring_setup(named_parameters, compression, backward_passes_per_step)
    else:
        dist._ring_setup(named_parameters, compression, backward_passes_per_step, op, gradient_predivide_factor,
                         groups, sparse_as_dense, process_set)
    return dist
