# SPDX-License-Identifier: Apache-2.0
"""Starting every rank from the same state: broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object; and Resumable with torch's serialization. As in
Horovod, root_rank is a rank of the world, also with a process set."""
import io

import torch

from .. import basics
from .. import objects as _objects
from ..resumable import Resumable as _Resumable
from ._adapter import C
from .ops import _root

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
           "Resumable"]


def broadcast_parameters(params, root_rank=0, process_set=basics.global_process_set):
    """Overwrites every rank's tensors with root_rank's, in place. params: a state_dict(),
    named_parameters() (pairs of name and tensor) or a list of tensors (parameters(), which
    travel under their place in it)."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (str, bytes)) or not hasattr(params, "__iter__"):
        raise ValueError("ringmaster.torch: broadcast_parameters takes a state_dict(), named_parameters() "
                         "or a list of tensors, not %s" % type(params).__name__)
    else:
        items = [p if isinstance(p, tuple) else ("param.%d" % i, p) for i, p in enumerate(params)]
    root = _root(root_rank, process_set)
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError("ringmaster.torch: broadcast_parameters: '%s' is a %s, not a tensor"
                             % (name, type(p).__name__))
        handles.append(C.broadcast(p.data, root, True, False, "bcast." + name, process_set))
    for h in handles:
        h.wait()


def _initialize_state(optimizer):
    """A new optimizer has no state yet: give its parameters zero gradients and step it
    once (its own step, not a DistributedOptimizer's, which would reduce), as Horovod does,
    so that the state exists on every rank and has root's shape after the broadcast."""
    sparse = isinstance(optimizer, torch.optim.SparseAdam)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
                if sparse:
                    p.grad = p.grad.to_sparse()
    step = getattr(optimizer, "_ring_local_step", optimizer.step)
    step()


def broadcast_optimizer_state(optimizer, root_rank=0, model=None, process_set=basics.global_process_set):
    """Gives every rank root_rank's optimizer state and hyperparameters (its state_dict(),
    which does not depend on the world size). A new optimizer's state is created first,
    as Horovod does: zero gradients and one step of its own. model is Horovod's argument
    for finding sparse parameters, which a state_dict does not need."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("ringmaster.torch: LBFGS is not supported")
    if len(optimizer.state_dict()["state"]) == 0:
        _initialize_state(optimizer)
    root = _root(root_rank, process_set)
    me = basics.rank() if process_set is basics.global_process_set else process_set.rank()
    state = _objects.broadcast_object(optimizer.state_dict() if me == root else None, root,
                                      name="ringmaster.optimizer_state", process_set=process_set)
    if me != root:
        optimizer.load_state_dict(state)


def broadcast_object(obj, root_rank=0, name=None, process_set=basics.global_process_set):
    """Returns root_rank's obj on every rank of the set (pickled on the root)."""
    return _objects.broadcast_object(obj, _root(root_rank, process_set), name, process_set)


def allgather_object(obj, name=None, process_set=basics.global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    return _objects.allgather_object(obj, name, process_set)


class Resumable(_Resumable):
    """ringmaster.Resumable with torch.save/torch.load (to the CPU) and checkpoint.pt."""

    def __init__(self, directory=None, filename="checkpoint.pt"):
        super().__init__(directory, filename, dump=torch.save,
                         load=lambda f: torch.load(io.BytesIO(f.read()), map_location="cpu"))
