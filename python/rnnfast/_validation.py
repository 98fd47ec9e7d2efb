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
        raise TypeError(dtype_mismatch_message(name, arr.dtype, np.dtype(dtype)))
    return np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("="))


def dtype_mismatch_message(name: str, got: np.dtype, want: np.dtype) -> str:
    """The message for a float array whose dtype is not the layer's, with the fix: convert the
    array, or (when its dtype is one a layer can compute in) build the layer in that dtype.
    NumPy's default float64, and Python lists, meet a float32 layer this way most often."""
    fix = f"convert it with {name}.astype(np.{want.name})"
    if got.newbyteorder("=") in FLOAT_DTYPES:
        fix += f", or build the layer with dtype=np.{got.name}"
    return f"{name}: dtype {got.name} differs from the layer's dtype {want.name}; {fix}"


def optional_float_array(name: str, value, dtype) -> np.ndarray | None:
    return None if value is None else as_float_array(name, value, dtype)


def check_bool(name: str, value) -> bool:
    """A flag: True or False (Python's or NumPy's), else TypeError, as torch raises. Truthiness
    is never used: ``"False"`` is truthy and 0 / 1 hide a misplaced argument."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"{name} should be of type bool, got {type(value).__name__} {value!r}"
        + _bool_fix(name, value)
    )


def check_optional_bool(name: str, value) -> bool | None:
    """A flag that may also be None (not given), else TypeError."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"{name} should be of type bool or None, got {type(value).__name__} "
        f"{value!r}" + _bool_fix(name, value)
    )


def _bool_fix(name: str, value) -> str:
    """The bool a user most likely meant by a string or 0 / 1, as a hint; else nothing."""
    meant = {"true": True, "false": False, "1": True, "0": False}.get(str(value).strip().lower())
    if meant is None or isinstance(value, float):
        return ""
    return f" (pass {name}={meant})"


def check_probability(name: str, value) -> float:
    """A drop probability: a real number in [0, 1] (torch's range; 1 drops everything), else
    ValueError (torch's type for a non-number too)."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or not 0.0 <= float(value) <= 1.0
    ):
        raise ValueError(f"{name}: expected a probability in [0, 1], got {value!r}")
    return float(value)


def dropout_mask(rng, shape, p, dtype) -> np.ndarray:
    """An inverted-dropout mask: 0 with probability p, else 1 / (1 - p). p = 1 gives zeros,
    as torch (every element dropped), not a division by zero."""
    if p >= 1.0:
        return np.zeros(shape, dtype=dtype)
    keep = (rng.random(shape) >= p).astype(dtype)
    keep /= 1.0 - p
    return keep


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
    return (
        x.ndim == 3
        and not x.flags.c_contiguous
        and x.shape[0] > 1
        and x.shape[1] > 1
        and x.swapaxes(0, 1).flags.c_contiguous
    )


def check_positive_int(name, value) -> int:
    """A size: a positive int (not a bool); TypeError for another type, ValueError below 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected a positive int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return int(value)
