# SPDX-License-Identifier: Apache-2.0
"""Starting every rank from the same state: broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object; and Resumable with torch's serialization."""
import io

import torch

from .. import basics
from ..objects import allgather_object, broadcast_object
from ..resumable import Resumable as _Resumable
from ._adapter import C

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
           "Resumable"]


def broadcast_parameters(params, root_rank=0, process_set=basics.global_process_set):
    """Overwrites every rank's tensors with root_rank's, in place. params: a state_dict()
    or named_parameters() (pairs of name and tensor); each travels under its name."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if items and not isinstance(items[0], tuple):
            raise ValueError("ringmaster.torch: broadcast_parameters takes a state_dict() or "
                             "named_parameters(), not %s of %s" % (type(params).__name__, type(items[0]).__name__))
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError("ringmaster.torch: broadcast_parameters: '%s' is a %s, not a tensor"
                             % (name, type(p).__name__))
        handles.append(C.broadcast(p.data, root_rank, True, False, "bcast." + name, process_set))
    for h in handles:
        h.wait()


def broadcast_optimizer_state(optimizer, root_rank=0, process_set=basics.global_process_set):
    """Gives every rank root_rank's optimizer state and hyperparameters (its
    state_dict(), which does not depend on the world size)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("ringmaster.torch: LBFGS is not supported")
    me = basics.rank() if process_set is basics.global_process_set else process_set.rank()
    state = broadcast_object(optimizer.state_dict() if me == root_rank else None, root_rank,
                             name="ringmaster.optimizer_state", process_set=process_set)
    if me != root_rank:
        optimizer.load_state_dict(state)


class Resumable(_Resumable):
    """ringmaster.Resumable with torch.save/torch.load (to the CPU) and checkpoint.pt."""

    def __init__(self, directory=None, filename="checkpoint.pt"):
        super().__init__(directory, filename, dump=torch.save,
                         load=lambda f: torch.load(io.BytesIO(f.read()), map_location="cpu"))
