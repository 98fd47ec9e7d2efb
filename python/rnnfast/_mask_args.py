"""Argument conversion for the masked kernels: general step masks and recurrent dropout masks
(dtype and value rules here; the bindings check the shapes against the batch)."""

from __future__ import annotations

import numpy as np


def check_step_mask(step_mask, steps: int, batch: int) -> np.ndarray | None:
    """A (T, B) keep mask as the kernels take it: uint8 0/1, C-contiguous. Bool arrays, and
    integer arrays of 0 and 1, are accepted; anything else raises TypeError or ValueError."""
    if step_mask is None:
        return None
    arr = np.asarray(step_mask)
    if arr.dtype.kind not in "biu":
        raise TypeError(f"step_mask: expected a bool (or 0/1 integer) array, got dtype {arr.dtype}")
    if arr.shape != (steps, batch):
        raise ValueError(
            f"step_mask: expected shape (T, B) = ({steps}, {batch}), got shape {arr.shape}"
        )
    if arr.dtype.kind != "b" and arr.size and not np.all((arr == 0) | (arr == 1)):
        bad = arr[(arr != 0) & (arr != 1)].flat[0]
        raise ValueError(f"step_mask: expected values 0 or 1 (or bools), got {bad}")
    return np.ascontiguousarray(arr, dtype=np.uint8)


def check_flag(name: str, value) -> bool:
    """A flag must be a bool (or np.bool_): 0, 1 and "False" are refused, not reinterpreted."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r}")
    return bool(value)
