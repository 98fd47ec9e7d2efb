"""The batch order the recurrent kernels take: a padded batch sorted by length, longest first
(every step is then one dense GEMM over the sequences still running), and back."""

from __future__ import annotations

import numpy as np


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
