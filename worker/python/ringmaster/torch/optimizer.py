# SPDX-License-Identifier: Apache-2.0
"""DistributedOptimizer: averages gradients over the ranks while backward still runs.

A hook on each parameter's gradient accumulator submits that gradient's allreduce
(asynchronous, in place, under the parameter's name) the moment autograd has produced it,
so the allreduce of the last layers overlaps the backward of the first, and libring's
engine fuses the gradients that are ready together into one collective. step() waits for
every gradient, then runs the wrapped optimizer's own step.
"""
import warnings
from contextlib import contextmanager

import torch

from .. import basics
from ._adapter import C
from .compression import Compression

__all__ = ["DistributedOptimizer"]


class _Distributed:
    """Mixed in before the wrapped optimizer's class (see DistributedOptimizer)."""

    def _ring_setup(self, named_parameters, compression, backward_passes_per_step, op,
                    gradient_predivide_factor, process_set):
        op = basics.op_code(op)
        if gradient_predivide_factor != 1.0 and op != basics.Average:
            raise ValueError("ringmaster.torch: gradient_predivide_factor needs op=Average")
        if backward_passes_per_step < 1:
            raise ValueError("ringmaster.torch: backward_passes_per_step must be at least 1")
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if named and not isinstance(named[0], tuple):
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
        else:
            by_param = {id(p): "param.%d" % i for i, p in enumerate(params)}
        # Horovod's split of an average: divide by the factor before the sum, multiply by
        # factor / size after (libring applies the 1/size of Average).
        if op == basics.Average:
            self._ring_scale = (1.0 / gradient_predivide_factor, float(gradient_predivide_factor))
        else:
            self._ring_scale = (1.0, 1.0)
        self._ring_op = op
        self._ring_ps = process_set
        self._ring_names = {id(p): "grad." + by_param[id(p)] for p in params}
        self._ring_params = [p for p in params if p.requires_grad]
        self._ring_compression = compression
        self._ring_passes = backward_passes_per_step
        self._ring_delay = {id(p): backward_passes_per_step for p in params}
        self._ring_pending = {}  # id(p) -> (p, handle, tensor sent, compression context)
        self._ring_sync = True
        self._ring_synchronized = False
        self._ring_accs = []  # the gradient accumulators, which must outlive the hooks
        nset = basics.size() if process_set is basics.global_process_set else process_set.size()
        self._ring_active = nset > 1
        if self._ring_active:
            for p in self._ring_params:
                # A view of p has p's gradient accumulator as its first next function.
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._ring_hook(p))
                self._ring_accs.append(acc)

    def _ring_hook(self, p):
        key = id(p)

        def hook(*_):
            if key in self._ring_pending and self._ring_delay[key] <= 0:
                raise AssertionError(
                    "ringmaster.torch: a gradient was computed more than backward_passes_per_step "
                    "(%d) times before optimizer.step(); raise backward_passes_per_step to accumulate "
                    "more passes locally" % self._ring_passes)
            self._ring_delay[key] -= 1
            if self._ring_delay[key] == 0:
                self._ring_submit(p)

        return hook

    def _ring_submit(self, p):
        if p.grad is None:  # unused on this rank: the other ranks still expect it
            p.grad = torch.zeros_like(p)
        t, ctx = self._ring_compression.compress(p.grad)
        pre, post = self._ring_scale
        h = C.allreduce(t, True, False, self._ring_op, self._ring_names[id(p)], pre, post, self._ring_ps)
        self._ring_pending[id(p)] = (p, h, t, ctx)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those whose hook did not fire,
        such as parameters this rank did not use) and puts the results in p.grad."""
        if not self._ring_active:
            return
        for p in self._ring_params:
            if id(p) not in self._ring_pending:
                self._ring_submit(p)
        pending, self._ring_pending = self._ring_pending, {}
        for key, (p, h, t, ctx) in pending.items():
            h.wait()
            self._ring_delay[key] = self._ring_passes
            if ctx is not None or t is not p.grad:
                with torch.no_grad():
                    p.grad.copy_(self._ring_compression.decompress(t, ctx))
        self._ring_synchronized = True

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
                    "optimizer.step() after optimizer.synchronize() without skip_synchronize(): the "
                    "gradients were averaged twice. Wrap step() in `with optimizer.skip_synchronize():`")
            self.synchronize()
        self._ring_synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._ring_pending:
            raise AssertionError(
                "ringmaster.torch: optimizer.zero_grad() after loss.backward() but before "
                "optimizer.step() or synchronize(): the allreduces in flight still write the gradients")
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
    op=Average, divide by it before the sum and multiply by it / size after. num_groups,
    groups and sparse_as_dense are accepted for Horovod's signature: libring's engine
    fuses whatever gradients are ready together, so groups add nothing, and sparse
    gradients are not supported.

    The result is an instance of a subclass of the optimizer's own class sharing its
    state and param_groups, so state_dict() and isinstance() work as before.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("ringmaster.torch: DistributedOptimizer wraps a torch.optim.Optimizer, not %s"
                        % type(optimizer).__name__)
    cls = type(optimizer.__class__.__name__, (_Distributed, optimizer.__class__), {})
    dist = cls.__new__(cls)
    dist.__dict__.update(optimizer.__dict__)
    dist._ring_setup(named_parameters, compression, backward_passes_per_step, op, gradient_predivide_factor,
                     process_set)
    return dist
