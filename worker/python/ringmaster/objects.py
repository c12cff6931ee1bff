# SPDX-License-Identifier: Apache-2.0
"""Collectives on picklable Python objects: broadcast_object and allgather_object."""
import pickle

import numpy as np

from . import arrays, basics

__all__ = ["broadcast_object", "allgather_object"]


def _names(name):
    return (None, None) if name is None else ("%s.len" % name, "%s.data" % name)


def broadcast_object(obj, root_rank=0, name=None, process_set=basics.global_process_set):
    """Returns root_rank's obj on every rank of the set (pickled on the root)."""
    n_len, n_data = _names(name)
    me = basics.rank() if process_set is basics.global_process_set else process_set.rank()
    if me == root_rank:
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        length = np.array([data.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    arrays.broadcast_(length, root_rank, name=n_len, process_set=process_set)
    if me != root_rank:
        data = np.empty(int(length[0]), dtype=np.uint8)
    else:
        data = data.copy()  # frombuffer of bytes is read-only
    arrays.broadcast_(data, root_rank, name=n_data, process_set=process_set)
    return obj if me == root_rank else pickle.loads(data.tobytes())


def allgather_object(obj, name=None, process_set=basics.global_process_set):
    """Returns the list of every rank's obj, in rank order."""
    n_len, n_data = _names(name)
    data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    lengths = arrays.allgather(np.array([data.size], dtype=np.int64), name=n_len, process_set=process_set)
    gathered = arrays.allgather(data, name=n_data, process_set=process_set)
    out, off = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(gathered[off : off + n].tobytes()))
        off += n
    return out
