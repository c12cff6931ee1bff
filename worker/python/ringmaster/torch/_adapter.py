# SPDX-License-Identifier: Apache-2.0
"""What ringmaster's collectives need to know about torch tensors. CPU tensors go to
libring as they are: its pointer is the tensor's own memory (data_ptr()), no copy."""
import torch

from .._collectives import Adapter, Collectives
from .._library import DTYPES

# torch dtype -> libring's ring_dtype_t, by name (torch.uint16 exists from torch 2.3 on)
CODES = {getattr(torch, n): c for n, c in DTYPES.items() if hasattr(torch, n)}


def _refuse(x):
    if not isinstance(x, torch.Tensor):
        raise TypeError("ringmaster.torch: expected a torch.Tensor, not %s" % type(x).__name__)
    if not x.is_cpu:
        if x.is_cuda:
            raise RuntimeError(
                "ringmaster.torch: the tensor is on %s, but ringmaster.torch takes CPU tensors only "
                "(libring's NCCL path serves C programs); move it to the CPU with .cpu() or train "
                "on the CPU" % x.device
            )
        raise RuntimeError("ringmaster.torch: tensors on %s are not supported; use CPU tensors" % x.device)
    if x.is_sparse:
        raise RuntimeError("ringmaster.torch: sparse tensors are not supported; use .to_dense()")
    raise TypeError(
        "ringmaster.torch: dtype %s is not supported; use uint8, int8, int16, int32, int64, "
        "float16, bfloat16, float32, float64 or bool" % x.dtype
    )


class TorchAdapter(Adapter):
    name = "torch"
    horovod = True  # Horovod's AVERAGE and alltoall handles (_collectives.py)

    @staticmethod
    def code(x, dtype=None):
        c = CODES.get(getattr(x, "dtype", None))
        if c is None or not x.is_cpu or x.is_sparse:
            _refuse(x)
        return c

    @staticmethod
    def is_float(x, dtype=None):
        return x.is_floating_point()

    @staticmethod
    def ptr(x):
        return x.data_ptr()

    @staticmethod
    def numel(x):
        return x.numel()

    @staticmethod
    def is_contiguous(x):
        return x.is_contiguous()

    @staticmethod
    def contiguous(x):
        return x.detach().contiguous()

    @staticmethod
    def check_writable(x, what):
        pass

    @staticmethod
    def empty_like(x):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @staticmethod
    def empty_of(shape, like):
        return torch.empty(shape, dtype=like.dtype)

    @staticmethod
    def zeros_of(shape, like):
        return torch.zeros(shape, dtype=like.dtype)

    @staticmethod
    def clone(x):
        return x.detach().clone(memory_format=torch.contiguous_format)

    @staticmethod
    def copy_(dst, src):
        with torch.no_grad():
            dst.copy_(src)
        return dst

    @staticmethod
    def splits(v):
        """alltoall's splits as a list of ints: a tensor of an integer dtype, or a sequence."""
        if isinstance(v, torch.Tensor):
            if v.is_floating_point() or v.is_complex() or v.dtype == torch.bool:
                raise ValueError("ringmaster.torch: alltoall splits must be integers, not %s" % v.dtype)
            return [int(s) for s in v.reshape(-1).tolist()]
        try:
            return [int(s) for s in v]
        except (TypeError, ValueError):
            raise ValueError("ringmaster.torch: alltoall splits must be a sequence of integers, not %r" % (v,))

    @staticmethod
    def splits_like(values, splits):
        """The received splits, as Horovod gives them: in the splits tensor's dtype, int32
        otherwise."""
        dt = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
        return torch.tensor(values, dtype=dt)

    @staticmethod
    def copy_rows(dst, at, src, frm, n):
        with torch.no_grad():
            dst[at : at + n].copy_(src[frm : frm + n])

    @staticmethod
    def scale_(x, f):
        """x *= f as libring scales: integers in double, truncated toward zero."""
        with torch.no_grad():
            if x.is_floating_point():
                x.mul_(f)
            else:
                info = torch.iinfo(x.dtype)
                x.copy_(x.double().mul_(f).trunc_().clamp_(info.min, info.max))
        return x

    @staticmethod
    def scaled(x, f):
        return TorchAdapter.scale_(x.detach().clone(), f)

    @staticmethod
    def int64(values, like):
        return torch.tensor(values, dtype=torch.int64)

    @staticmethod
    def tolist(v):
        if isinstance(v, torch.Tensor):
            return v.reshape(-1).tolist()
        return list(v)


C = Collectives(TorchAdapter)
