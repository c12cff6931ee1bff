# SPDX-License-Identifier: Apache-2.0
"""Gradient compression, as horovod.torch.Compression: none, fp16, and bf16.

fp16 and bf16 send float32 gradients as 16-bit values. When libring was started with the
same wire format (RING_COMPRESSION=fp16|bf16, or ringmaster.init(compression=...)), the
engine converts inside its fusion buffer and adds in float32, with no copy in Python: the
compressor then passes float32 tensors through untouched. Otherwise it casts in Python
before the allreduce and back after (Horovod's way), and libring adds the 16-bit values in
float32.
"""
import torch

from .. import basics

__all__ = ["Compression", "Compressor", "NoneCompressor", "FP16Compressor", "BF16Compressor"]


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    wire = None

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _HalfCompressor(Compressor):
    wire = None  # "fp16" or "bf16"
    dtype = None

    @classmethod
    def compress(cls, tensor):
        if not tensor.is_floating_point() or tensor.dtype == cls.dtype:
            return tensor, None
        if tensor.dtype == torch.float32 and basics.wire_compression() == cls.wire:
            return tensor, None  # libring's engine compresses on the wire
        return tensor.to(cls.dtype), tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_HalfCompressor):
    wire, dtype = "fp16", torch.float16


class BF16Compressor(_HalfCompressor):
    wire, dtype = "bf16", torch.bfloat16


class Compression:
    """none: send as is. fp16, bf16: send floating-point tensors as 16-bit values."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
