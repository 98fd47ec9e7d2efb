"""The batch order the recurrent kernels take: a padded batch sorted by length, longest first
(every step is then one dense GEMM over the sequences still running), and back."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._validation import as_float_array, check_int_array


def weight_cache_arg(cache, pairs):
    """The cache to hand the kernels: ``cache`` when every weight of ``pairs`` ((given, as the
    kernels take it), ...) reaches them as the caller's own memory, None when one was
    converted (a copy: a new address at every call, which a pack must not be kept for).
    TypeError for anything but None or a WeightCache."""
    if cache is None:
        return None
    if not isinstance(cache, _core.WeightCache):
        raise TypeError(
            "weight_cache: expected None or a rnnfast.functional.WeightCache, got "
            f"{type(cache).__name__}; make one with rnnfast.functional.WeightCache()"
        )
    for given, used in pairs:
        if used is not None and not _same_memory(given, used):
            return None
    return cache


def _same_memory(given, used):
    """Whether ``used`` (``as_float_array(given)``) is ``given``'s memory: no copy was made,
    as ``given`` was a C-contiguous native array of the dtype ``used`` has."""
    return used is given or (
        isinstance(given, np.ndarray)
        and given.dtype == used.dtype
        and given.dtype.isnative
        and given.flags.c_contiguous
    )


def check_batch(name, arr, axis, batch, dims):
    """Before reordering the batch: `arr` has the batch at `axis` (the kernel checks the rest)."""
    if arr is not None and (arr.ndim != len(dims.split(",")) or arr.shape[axis] != batch):
        raise ValueError(f"{name}: expected shape {dims} with B = {batch}, got shape {arr.shape}")


def take(arr, order, axis):
    """The batch reordered along `axis`, C-contiguous as the kernels want it (None stays None)."""
    return None if arr is None else np.ascontiguousarray(np.take(arr, order, axis=axis))


def longest_first(lengths):
    """The kernels take a padded batch sorted by length, longest first (every step is then one
    dense GEMM over the sequences still running). Returns (batch order or None when already
    sorted, sorted lengths)."""
    if lengths is None or np.all(lengths[:-1] >= lengths[1:]):
        return None, lengths
    order = np.argsort(-lengths, kind="stable")
    return order, np.ascontiguousarray(lengths[order])


def sequence_input(x, dtype, ids):
    """The sequence input as the kernel takes it: ``(x, ids, T, B)`` with x (T, B, D) and ids
    None, or, with token ids, x the embedding table (V, D) and ids (T, B) int64, C-contiguous
    (the kernel checks their range)."""
    x = as_float_array("x", x, dtype)
    if ids is None:
        if x.ndim != 3:
            raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
        return x, None, x.shape[0], x.shape[1]
    if x.ndim != 2:
        raise ValueError(f"x: expected an embedding table (V, D) with ids, got shape {x.shape}")
    ids = check_int_array("ids", ids)
    if ids.ndim != 2:
        raise ValueError(f"ids: expected 2 dimensions (T, B), got shape {ids.shape}")
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    return x, ids, ids.shape[0], ids.shape[1]


def sort_sequence(x, ids, order):
    """The sequence input with its batch in `order`: x's, or with token input the ids' (the
    table has no batch axis)."""
    return (x, take(ids, order, 1)) if ids is not None else (take(x, order, 1), None)
