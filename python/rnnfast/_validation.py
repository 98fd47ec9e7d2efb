"""Argument checks shared by the public API: one exception policy and one message template.

The policy (PyTorch's, where it says): a value of the wrong *type* is a TypeError (``8.0`` or
``"3"`` where an int is expected, ``"False"`` or ``1`` for a flag, a float64 array for a float32
layer); a value of the right type but out of range or of the wrong shape is a ValueError (``0``
for a size, a probability above 1). Every message reads ``{name}: expected {what}, got {value}``,
the value shown by :func:`describe` (its repr and its type), so the argument, what it should be
and what came are always named. Module-specific checks (shapes of a layer's input, a file's
fields) live beside their module but build their messages with :func:`type_error` and
:func:`value_error`. The bindings check the shapes against the batch.
"""

from __future__ import annotations

import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_REPR_LIMIT = 60


# ---- the template -------------------------------------------------------------------------------


def describe(value) -> str:
    """What came, for a message: an array by its dtype and shape, a dtype or a class by its
    name, anything else by its repr (cut to 60 characters) and its type, e.g. ``8.0 (float)``."""
    if isinstance(value, np.ndarray):
        return f"dtype {value.dtype} (shape {value.shape})"
    if isinstance(value, np.dtype):
        return f"dtype {value}"
    if isinstance(value, type):
        return f"{value.__name__} (a type)"
    text = repr(value.item() if isinstance(value, np.generic) else value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{text} ({type(value).__name__})"


def message(name: str, expected: str, value) -> str:
    """The one template: ``{name}: expected {expected}, got {describe(value)}``."""
    return f"{name}: expected {expected}, got {describe(value)}"


def type_error(name: str, expected: str, value, hint: str = "") -> TypeError:
    """A TypeError in the template, for a value of the wrong type (raise it)."""
    return TypeError(message(name, expected, value) + hint)


def value_error(name: str, expected: str, value, hint: str = "") -> ValueError:
    """A ValueError in the template, for a value of the right type but not allowed (raise it)."""
    return ValueError(message(name, expected, value) + hint)


def shape_error(name: str, expected: str, arr: np.ndarray) -> ValueError:
    """A ValueError for an array of the wrong shape: ``{name}: expected shape {expected}, got
    shape {arr.shape}`` (the template, the shape being what is wrong)."""
    return ValueError(f"{name}: expected shape {expected}, got shape {arr.shape}")


# ---- scalars ------------------------------------------------------------------------------------


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def is_int(value) -> bool:
    """An integer that is not a bool (Python's or NumPy's)."""
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def is_real(value) -> bool:
    """A real number that is not a bool (Python's or NumPy's)."""
    return isinstance(value, numbers.Real) and not _is_bool(value)


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum] (either bound may be left out): TypeError for
    a non-integer (bools too, and floats such as ``32.0``, which usually mean a computation went
    wrong: PyTorch refuses them too), ValueError out of range."""
    if not is_int(value):
        raise type_error(name, "an int", value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise value_error(name, _int_range(minimum, maximum), value)
    return int(value)


def _int_range(minimum, maximum) -> str:
    if maximum is None:
        return f"an int >= {minimum}"
    if minimum is None:
        return f"an int <= {maximum}"
    return f"an int in [{minimum}, {maximum}]"


def check_positive_int(name: str, value) -> int:
    """A size or a count: an int >= 1 (see :func:`check_int`)."""
    return check_int(name, value, minimum=1)


def check_optional_int(name: str, value, minimum: int | None = None) -> int | None:
    """None (not given), or an int >= ``minimum`` (see :func:`check_int`)."""
    return None if value is None else check_int(name, value, minimum)


def check_bool(name: str, value) -> bool:
    """A flag: True or False (Python's or NumPy's), else TypeError, as torch raises. Truthiness
    is never used: ``"False"`` is truthy and 0 / 1 hide a misplaced argument."""
    if _is_bool(value):
        return bool(value)
    raise type_error(name, "a bool", value, _bool_fix(name, value))


def check_optional_bool(name: str, value) -> bool | None:
    """A flag that may also be None (not given), else TypeError."""
    if value is None:
        return None
    if _is_bool(value):
        return bool(value)
    raise type_error(name, "a bool or None", value, _bool_fix(name, value))


def _bool_fix(name: str, value) -> str:
    """The bool a user most likely meant by a string or 0 / 1, as a hint; else nothing."""
    if isinstance(value, (float, np.ndarray)):
        return ""
    meant = {"true": True, "false": False, "1": True, "0": False}.get(str(value).strip().lower())
    return "" if meant is None else f"; pass {name}={meant}"


def check_real(name: str, value) -> float:
    """``value`` as a float: TypeError for a non-number (bools too: ``lr=True`` is a mistake)."""
    if not is_real(value):
        raise type_error(name, "a real number", value)
    return float(value)


def check_finite_real(name: str, value) -> float:
    """A finite real number (NaN and infinities are ValueError)."""
    x = check_real(name, value)
    if not np.isfinite(x):
        raise value_error(name, "a finite number", value)
    return x


def check_real_at_least(name: str, value, low) -> float:
    """A real number >= ``low``; NaN fails the comparison, so it is refused too."""
    x = check_real(name, value)
    if not x >= low:
        raise value_error(name, f"a number >= {low}", value)
    return x


def check_real_in(name: str, value, low, high, *, low_open=False, high_open=False) -> float:
    """A real number in the interval from ``low`` to ``high`` (closed unless said open), else
    ValueError (NaN too); TypeError for a non-number."""
    x = check_real(name, value)
    above = x > low if low_open else x >= low
    below = x < high if high_open else x <= high
    if not (above and below):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise value_error(name, f"a number in {interval}", value)
    return x


def check_probability(name: str, value) -> float:
    """A drop probability: a real number in [0, 1] (torch's range; 1 drops everything), else
    ValueError: torch's type for this argument, a non-number included (``nn.RNN(dropout="a")``
    and ``nn.RNN(dropout=True)`` raise ValueError there)."""
    if not is_real(value) or not 0.0 <= float(value) <= 1.0:
        raise value_error(name, "a probability in [0, 1]", value)
    return float(value)


def check_choice(name: str, value, choices):
    """``value`` when it is one of ``choices``, else ValueError listing them (torch's type for
    a ``nonlinearity`` or ``mode`` it does not know)."""
    if not isinstance(value, str) or value not in choices:
        raise value_error(name, " or ".join(repr(c) for c in choices), value)
    return value


def check_keys(where: str, mapping, expected, missing="key(s)", unexpected="key(s)") -> None:
    """ValueError naming ``where`` when ``mapping`` lacks a key of ``expected`` (first) or has
    one that it does not list; ``missing`` and ``unexpected`` name what those keys are."""
    absent = [k for k in expected if k not in mapping]
    extra = [k for k in mapping if k not in expected]
    if absent:
        raise ValueError(f"{where}: missing {missing} {absent}")
    if extra:
        raise ValueError(f"{where}: unexpected {unexpected} {extra}")


def check_nonlinearity(nonlinearity) -> str:
    return check_choice("nonlinearity", nonlinearity, ("tanh", "relu"))


def check_alpha(alpha) -> float:
    """Leak rate of a leaky unit: a real number in (0, 1]."""
    return check_real_in("alpha", alpha, 0, 1, low_open=True)


# ---- arrays -------------------------------------------------------------------------------------


def layer_dtype(dtype) -> np.dtype:
    """The dtype a layer computes in: float32 or float64, else TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise type_error("dtype", "float32 or float64", dtype) from exc
    if dt not in FLOAT_DTYPES:
        raise type_error("dtype", "float32 or float64", dt)
    return dt


def as_float_array(name: str, value, dtype=None) -> np.ndarray:
    """`value` as a C-contiguous, native-byte-order array of `dtype` (the layer's dtype).

    Accepts any array-like, strided, Fortran-order, read-only or byte-swapped; returns the
    input itself when it already fits, otherwise a copy, so the caller's array is never
    written. Non-float input raises TypeError; a float dtype other than `dtype` raises
    TypeError naming both.
    """
    arr = np.asarray(value)
    if arr.dtype.kind != "f" or (dtype is None and arr.dtype.newbyteorder("=") not in FLOAT_DTYPES):
        raise type_error(name, "a float32 or float64 array", arr)
    if dtype is None:
        dtype = arr.dtype.newbyteorder("=")
    elif arr.dtype.type is not np.dtype(dtype).type:
        raise dtype_mismatch(name, arr, np.dtype(dtype))
    return np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("="))


def dtype_mismatch(name: str, arr: np.ndarray, want: np.dtype) -> TypeError:
    """The TypeError for a float array whose dtype is not the layer's, with the fix: convert the
    array, or (when its dtype is one a layer can compute in) build the layer in that dtype.
    NumPy's default float64, and Python lists, meet a float32 layer this way most often."""
    got = arr.dtype
    fix = f"; convert it with {name}.astype(np.{want.name})"
    if got.newbyteorder("=") in FLOAT_DTYPES:
        fix += f", or build the layer with dtype=np.{got.name}"
    return type_error(name, f"a {want.name} array (the layer's dtype)", arr, fix)


def optional_float_array(name: str, value, dtype) -> np.ndarray | None:
    return None if value is None else as_float_array(name, value, dtype)


def check_int_array(name: str, value) -> np.ndarray:
    """``value`` as an integer NumPy array (ids, lengths, class targets), else TypeError;
    bools are refused (a mask passed where ids go)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise type_error(name, "an integer array", arr)
    return arr


def check_lengths(lengths, steps: int, batch: int) -> np.ndarray | None:
    """Per-sequence lengths of a padded batch as an int64 array (B,), each in [0, T]."""
    if lengths is None:
        return None
    arr = check_int_array("lengths", lengths)
    if arr.shape != (batch,):
        raise shape_error("lengths", f"(B,) = ({batch},)", arr)
    if arr.size and (arr.min() < 0 or arr.max() > steps):
        raise ValueError(
            f"lengths: expected values in [0, T] = [0, {steps}], got min {arr.min()}, max {arr.max()}"
        )
    return arr.astype(np.int64)


def check_bool_mask(name: str, value, shape: tuple, shape_text: str) -> np.ndarray:
    """A mask as a bool array: bools, or integers 0 and 1 (TypeError for another dtype,
    ValueError for another value or shape). ``shape`` may hold None for a size left free;
    ``shape_text`` says it for the message, e.g. ``"(B, T) = (2, 5)"``."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biu":
        raise type_error(name, "a bool (or 0/1 integer) array", arr)
    if arr.ndim != len(shape) or any(s not in (None, n) for s, n in zip(shape, arr.shape)):
        raise shape_error(name, shape_text, arr)
    if arr.dtype.kind != "b":
        if arr.size and not np.all((arr == 0) | (arr == 1)):
            bad = arr[(arr != 0) & (arr != 1)].flat[0]
            raise value_error(name, "values 0 or 1 (or bools)", bad)
        arr = arr != 0
    return arr


def check_step_mask(step_mask, steps: int, batch: int) -> np.ndarray | None:
    """A (T, B) keep mask as the kernels take it: uint8 0/1, C-contiguous (see
    :func:`check_bool_mask`)."""
    if step_mask is None:
        return None
    arr = check_bool_mask("step_mask", step_mask, (steps, batch), f"(T, B) = ({steps}, {batch})")
    return np.ascontiguousarray(arr, dtype=np.uint8)


# ---- helpers of the layers that read arguments --------------------------------------------------


def dropout_mask(rng, shape, p, dtype) -> np.ndarray:
    """An inverted-dropout mask: 0 with probability p, else 1 / (1 - p). p = 1 gives zeros,
    as torch (every element dropped), not a division by zero."""
    if p >= 1.0:
        return np.zeros(shape, dtype=dtype)
    keep = (rng.random(shape) >= p).astype(dtype)
    keep /= 1.0 - p
    return keep


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
