"""The ranks' random streams: the shuffling seed, the same on every rank, and a dropout stream
of its own on each rank, reproducible from ``(seed, rank, the generator's place in the
model)``."""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ._communication import get_comm, rank

__all__ = ["seed_dropout", "shared_seed"]


def shared_seed(seed):
    """``seed``, or (None) one drawn by rank 0 and given to all."""
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31)) if rank() == 0 else None
        seed = get_comm().bcast(seed, root=0)
    return seed


def _walk(obj, seen):
    """``obj`` and, depth first, its children (a container's ``named_children()``), each once."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    children = getattr(obj, "named_children", None)
    if callable(children):
        for _, child in children():
            yield from _walk(child, seen)


def seed_dropout(model, seed=0, rank=None):
    """Reseed every dropout generator of ``model`` for this rank: generator i (in the order of
    the model's children, depth first) becomes ``np.random.default_rng([seed, rank, i])``.

    The generators are those each layer names in ``random_generators()``: a Dropout layer's
    (its masks) and an RNN's (the masks of ``dropout`` between stacked layers,
    ``input_dropout`` and ``recurrent_dropout``); a layer of one's own names its own. The
    initialisation is not touched, nor a JordanRNN's or Seq2Seq's teacher-forcing coin flips,
    which stay those of the layer's own seed (the same on every rank). Call it with the
    same ``seed`` on every rank: each rank then draws masks of its own, and a run repeats.

    ``rank``: this process's rank (by default :func:`rank`; give it to seed without MPI).
    Returns the number of generators reseeded.
    """
    check_int("seed", seed, 0)  # the same on every rank
    if rank is None:
        rank = get_comm().Get_rank()
    check_int("rank", rank, 0)
    count = 0
    for obj in _walk(model, set()):
        generators = getattr(obj, "random_generators", None)
        for attribute in generators() if callable(generators) else ():
            setattr(obj, attribute, np.random.default_rng([int(seed), int(rank), count]))
            count += 1
    return count
