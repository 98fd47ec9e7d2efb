"""Argument conversion shared by the public API: dtype rules here, shape rules in the bindings."""

from __future__ import annotations

import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def layer_dtype(dtype) -> np.dtype:
    """The dtype a layer computes in: float32 or float64, else TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype: expected float32 or float64, got {dtype!r}") from exc
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"dtype: expected float32 or float64, got {dt}")
    return dt


def as_float_array(name: str, value, dtype=None) -> np.ndarray:
    """`value` as a C-contiguous, native-byte-order array of `dtype` (the layer's dtype).

    Accepts any array-like, strided, Fortran-order, read-only or byte-swapped; returns the
    input itself when it already fits, otherwise a copy, so the caller's array is never
    written. Non-float input raises TypeError; a float dtype other than `dtype` raises
    TypeError naming both.
    """
    arr = np.asarray(value)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float32 or float64 array, got dtype {arr.dtype}")
    if dtype is None:
        if arr.dtype.newbyteorder("=") not in FLOAT_DTYPES:
            raise TypeError(f"{name}: expected a float32 or float64 array, got dtype {arr.dtype}")
        dtype = arr.dtype.newbyteorder("=")
    elif arr.dtype.type is not np.dtype(dtype).type:
        raise TypeError(
            f"{name}: dtype {arr.dtype.name} differs from the layer's dtype {np.dtype(dtype).name}"
        )
    return np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("="))


def optional_float_array(name: str, value, dtype) -> np.ndarray | None:
    return None if value is None else as_float_array(name, value, dtype)


def check_nonlinearity(nonlinearity) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity: expected 'tanh' or 'relu', got {nonlinearity!r}")
    return nonlinearity


def check_lengths(lengths, steps: int, batch: int) -> np.ndarray | None:
    """Per-sequence lengths of a padded batch as an int64 array (B,), each in [0, T]."""
    if lengths is None:
        return None
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"lengths: expected an integer array, got dtype {arr.dtype}")
    if arr.shape != (batch,):
        raise ValueError(f"lengths: expected shape (B,) = ({batch},), got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > steps):
        raise ValueError(
            f"lengths: expected values in [0, T] = [0, {steps}], got min {arr.min()}, max {arr.max()}"
        )
    return arr.astype(np.int64)


def check_alpha(alpha) -> float:
    """Leak rate of a leaky unit: a real number in (0, 1]."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha: expected a float in (0, 1], got {type(alpha).__name__}")
    alpha = float(alpha)
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha: expected a float in (0, 1], got {alpha}")
    return alpha


def time_major_in_memory(x) -> bool:
    """Whether x is (B, T, F) whose memory is laid out (T, B, F) C-contiguously (the
    transposed view a batch_first layer returns), so its rows can be read without a copy."""
    return (x.ndim == 3 and not x.flags.c_contiguous and x.shape[0] > 1 and x.shape[1] > 1
            and x.swapaxes(0, 1).flags.c_contiguous)
