"""Every rank starts from the same model and optimizer: rank 0's parameters and optimizer state
broadcast to all, after checking that the ranks hold the same model."""

from __future__ import annotations

import numpy as np

from .._parameters import writing
from ._communication import get_comm
from ._optimizer import DistributedOptimizer

__all__ = ["broadcast_optimizer_state", "broadcast_parameters"]


def _same_everywhere(comm, what, signature, describe):
    """Raise the same ValueError on every rank when ``signature`` differs between ranks."""
    everyone = comm.allgather(signature)
    for r, other in enumerate(everyone):
        if other != everyone[0]:
            raise ValueError(
                f"{what}: rank {r} differs from rank 0: {describe(everyone[0], other)}"
            )


def _describe_params(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"parameter {i} is {y[0]} {y[1]} {y[2]} there and {x[0]} {x[1]} {x[2]} on rank 0"
    return f"{len(b)} parameters there, {len(a)} on rank 0"


def broadcast_parameters(model, root=0):
    """Copy rank ``root``'s parameters into every rank's model, in place (the optimizers keep
    seeing the same arrays): one broadcast per dtype.

    ``model``: anything with ``named_parameters()`` (a layer, Sequential, Module), or a
    DistributedOptimizer / optimizer, whose parameters are broadcast.

    Raises
    ------
    ValueError
        On every rank, when the models differ between ranks (parameter names, shapes or
        dtypes): data-parallel training needs the same model everywhere.
    """
    comm = get_comm()
    named = _named_params(model)
    signature = [(name, tuple(p.shape), p.dtype.str) for name, p in named]
    _same_everywhere(comm, "broadcast_parameters: the models", signature, _describe_params)
    for dtype in sorted({p.dtype.str for _, p in named}):
        params = [p for _, p in named if p.dtype.str == dtype]
        flat = np.concatenate([p.reshape(-1) for p in params]) if params else None
        comm.Bcast(flat, root=root)
        offset = 0
        with writing(params):  # the layers' live parameters are read-only
            for p in params:
                p[...] = flat[offset : offset + p.size].reshape(p.shape)
                offset += p.size


def _named_params(obj):
    if isinstance(obj, DistributedOptimizer):
        obj = obj.optimizer
    if hasattr(obj, "slots") and not hasattr(obj, "named_parameters"):  # an Optimizer
        return [(s.name, s.param) for s in obj.slots]
    return list(obj.named_parameters())


def broadcast_optimizer_state(optimizer, root=0):
    """Give every rank rank ``root``'s optimizer state (step count, hyper-parameters, moment
    buffers): after a restart from a checkpoint that only rank 0 read, say.

    Raises
    ------
    ValueError
        On every rank, when the optimizers differ between ranks (class or parameter shapes).
    """
    comm = get_comm()
    inner = optimizer.optimizer if isinstance(optimizer, DistributedOptimizer) else optimizer
    signature = (type(inner).__name__, [tuple(s.param.shape) for s in inner.slots])
    _same_everywhere(
        comm,
        "broadcast_optimizer_state: the optimizers",
        signature,
        lambda a, b: f"{b[0]} over shapes {b[1]} there, {a[0]} over shapes {a[1]} on rank 0",
    )
    state = comm.bcast(inner.state_dict() if comm.Get_rank() == root else None, root=root)
    if comm.Get_rank() != root:
        inner.load_state_dict(state)
