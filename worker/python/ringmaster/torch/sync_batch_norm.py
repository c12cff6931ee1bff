# SPDX-License-Identifier: Apache-2.0
"""SyncBatchNorm: batch normalization over the batch of every rank together, as if one
process saw the whole global batch; for CPU tensors (Horovod's takes GPU tensors only).

Training forward: each rank computes its batch's count, mean and sum of squared
deviations per channel; one allgather gives every rank everyone's, which combine exactly
(Chan et al.'s pairwise update) into the global mean and variance. Backward: the two
per-channel sums the input's gradient needs are summed over the ranks by one allreduce.
The weight's and bias's gradients stay local, as in Horovod: DistributedOptimizer averages
them with the others.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from .. import basics
from ._adapter import C

__all__ = ["SyncBatchNorm"]


def _dims(x):
    """Every dimension but the channels' (dimension 1)."""
    return [0] + list(range(2, x.dim()))


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor):
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        xs = x.to(acc)
        dims = _dims(x)
        n = x.numel() // x.size(1)
        mean = xs.mean(dims)
        m2 = ((xs - mean.view(1, -1, *[1] * (x.dim() - 2))) ** 2).sum(dims)
        mine = torch.cat([torch.tensor([float(n)], dtype=torch.float64), mean.double(), m2.double()])
        every = C.allgather(mine.unsqueeze(0), True, None, basics.global_process_set)
        counts, means, m2s = every[:, 0], every[:, 1 : 1 + mean.numel()], every[:, 1 + mean.numel() :]
        total = counts.sum()
        gmean = (counts.unsqueeze(1) * means).sum(0) / total
        gm2 = (m2s + counts.unsqueeze(1) * (means - gmean) ** 2).sum(0)
        var = gm2 / total
        if running_mean is not None and factor is not None:
            with torch.no_grad():
                unbiased = gm2 / (total - 1) if total > 1 else var
                running_mean.mul_(1 - factor).add_(gmean.to(running_mean.dtype), alpha=factor)
                running_var.mul_(1 - factor).add_(unbiased.to(running_var.dtype), alpha=factor)
        shape = (1, -1) + (1,) * (x.dim() - 2)
        invstd = torch.rsqrt(var + eps).to(acc)
        xhat = (xs - gmean.to(acc).view(shape)) * invstd.view(shape)
        w = weight.to(acc) if weight is not None else torch.ones_like(invstd)
        out = xhat * w.view(shape)
        if bias is not None:
            out = out + bias.to(acc).view(shape)
        ctx.save_for_backward(xhat, invstd, w)
        ctx.total = float(total)
        ctx.has = (weight is not None, bias is not None)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, invstd, w = ctx.saved_tensors
        shape = (1, -1) + (1,) * (xhat.dim() - 2)
        dims = _dims(xhat)
        g = dy.to(xhat.dtype)
        sum_dy = g.sum(dims)
        sum_dy_xhat = (g * xhat).sum(dims)
        both = C.allreduce(torch.stack([sum_dy, sum_dy_xhat]), False, True, basics.Sum, None, 1.0, 1.0,
                           basics.global_process_set)
        dx = (w * invstd).view(shape) * (g - (both[0] / ctx.total).view(shape)
                                        - xhat * (both[1] / ctx.total).view(shape))
        has_w, has_b = ctx.has
        return (dx.to(dy.dtype), sum_dy_xhat.to(dy.dtype) if has_w else None,
                sum_dy.to(dy.dtype) if has_b else None, None, None, None, None)


class SyncBatchNorm(_BatchNorm):
    """torch.nn.BatchNorm1d/2d/3d over the ranks' batches together (see the module's
    docstring); arguments as theirs. In eval mode it is a plain BatchNorm with the running
    statistics, which are the same on every rank."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("ringmaster.torch: SyncBatchNorm expects at least 2D input, not %dD" % input.dim())

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average
                factor = 1.0 / float(self.num_batches_tracked)
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, False,
                                factor, self.eps)
        if basics.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, True,
                                factor, self.eps)
        return _SyncBatchNormFn.apply(input, self.weight, self.bias, self.running_mean, self.running_var,
                                      self.eps, factor if self.track_running_stats else None)
