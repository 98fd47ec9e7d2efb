"""Padding a list of variable-length sequences into one batch, and taking it apart again.

The bridge for users of PyTorch's ``pad_sequence`` / ``PackedSequence`` and of Keras's
``pad_sequences``: rnnfast takes a padded batch and its ``lengths`` instead of a packed structure.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._validation import (
    check_bool,
    check_choice,
    check_lengths,
    check_optional_int,
    type_error,
)

__all__ = ["pad_sequences", "unpad_sequences"]

_SIDES = ("post", "pre")


def pad_sequences(
    sequences,
    batch_first=False,
    padding_value=0.0,
    dtype=None,
    *,
    padding="post",
    truncating="post",
    maxlen=None,
    total_length=None,
):
    """Stack sequences of different lengths into one padded batch.

    Time-major by default, as ``torch.nn.utils.rnn.pad_sequence``. Note that Keras's
    ``pad_sequences`` is batch-first and pads and truncates at the front by default: for its
    layout pass ``batch_first=True, padding="pre", truncating="pre"``.

    Parameters
    ----------
    sequences : sequence of array_like, each shaped (T_i, *features)
        Numbers (bool, int, float or complex); the feature shape must be the same for all. An
        empty list (shape (0,)) is an empty sequence of any feature shape.
    batch_first : bool
        Return (B, T, *features) instead of (T, B, *features).
    padding_value : number
        Value of the padded positions. It must fit the result dtype: exactly for an integer or
        bool result (0.5 or -1 into uint8 raise), without overflow for a float result.
    dtype : dtype, optional
        Of the result; by default NumPy's common type of the sequences that have steps (an empty
        list says nothing about the dtype), of all of them when none has.
    padding : {"post", "pre"}
        Where the padding goes: after each sequence (rnnfast's default, because the ``lengths``
        that rnnfast's layers, losses and metrics take describe padding at the end) or before it
        (Keras's default). A "pre"-padded batch is for Keras-style code; do not feed it to an
        rnnfast RNN with ``lengths``, which would read the padding as the sequence.
    truncating : {"post", "pre"}
        Which steps a sequence longer than ``maxlen`` loses: its last ones ("post") or its first
        ones ("pre", Keras's default), as Keras's ``truncating``.
    maxlen : int >= 1, optional
        As Keras's ``maxlen``: sequences longer than this are truncated to it, and the batch has
        exactly ``maxlen`` steps (even when every sequence is shorter). By default nothing is
        truncated.
    total_length : int >= 0, optional
        As ``torch.nn.utils.rnn.pad_packed_sequence``'s: the batch has exactly this many steps.
        Given with ``maxlen``, it decides T and ``maxlen`` only truncates.

    Returns
    -------
    padded : ndarray, shape (T, B, *features) or (B, T, *features)
        T is ``total_length``, else ``maxlen``, else the longest sequence's length. A new array.
    lengths : ndarray of int64, shape (B,)
        Each sequence's length after truncation, whichever side the padding is on.

    Raises
    ------
    TypeError
        ``sequences`` not a list of arrays, non-numeric sequences (encode tokens to ids first,
        with :class:`rnnfast.data.Vocabulary`), an unknown ``dtype``, a ``padding_value`` that is
        not a number, or non-int ``maxlen`` / ``total_length``.
    ValueError
        No sequences, a sequence without a time axis, differing feature shapes, a bad
        ``padding`` / ``truncating``, a ``padding_value`` that does not fit the dtype, or a
        ``total_length`` shorter than the longest (kept) sequence.
    """
    batch_first = check_bool("batch_first", batch_first)
    padding = check_choice("padding", padding, _SIDES)
    truncating = check_choice("truncating", truncating, _SIDES)
    maxlen = check_optional_int("maxlen", maxlen, 1)
    total_length = check_optional_int("total_length", total_length, 0)
    arrays = _as_arrays(sequences)
    features = _feature_shape(arrays)
    out_dtype = _result_dtype(arrays, dtype)
    fill = _fill_value(padding_value, out_dtype)

    if maxlen is not None:
        arrays = [
            a if a.shape[0] <= maxlen else (a[-maxlen:] if truncating == "pre" else a[:maxlen])
            for a in arrays
        ]
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    longest = int(lengths.max())
    if total_length is not None:
        if total_length < longest:
            raise ValueError(
                f"total_length: expected at least the longest sequence's length {longest}"
                f"{' (after truncation to maxlen)' if maxlen is not None else ''}, "
                f"got {total_length}"
            )
        steps = total_length
    else:
        steps = longest if maxlen is None else maxlen

    batch = len(arrays)
    shape = ((batch, steps) if batch_first else (steps, batch)) + features
    out = np.full(shape, fill, dtype=out_dtype)
    time_major = out.swapaxes(0, 1) if batch_first else out  # a view: writes land in out
    for b, a in enumerate(arrays):
        n = a.shape[0]
        if n:  # an empty list (0,) cannot broadcast to (0, *features)
            start = steps - n if padding == "pre" else 0
            time_major[start : start + n, b] = a
    return out, lengths


def unpad_sequences(padded, lengths, batch_first=False, *, padding="post"):
    """The inverse of :func:`pad_sequences`: the B sequences of a padded batch.

    Parameters
    ----------
    padded : array_like, shape (T, B, *features) or (B, T, *features)
    lengths : array_like of int, shape (B,)
        Each in [0, T].
    batch_first : bool
        Whether ``padded`` is (B, T, ...).
    padding : {"post", "pre"}
        Where ``padded`` holds its padding: sequence b is its first ``lengths[b]`` steps
        ("post") or its last ("pre").

    Returns
    -------
    list of B ndarrays, shaped (lengths[b], *features)
        Copies, of ``padded``'s dtype.

    Raises
    ------
    TypeError
        Non-integer ``lengths`` or a non-bool ``batch_first``.
    ValueError
        ``padded`` without batch and time axes, ``lengths`` of the wrong shape or out of range,
        or a bad ``padding``.
    """
    batch_first = check_bool("batch_first", batch_first)
    padding = check_choice("padding", padding, _SIDES)
    padded = np.asarray(padded)
    if padded.ndim < 2:
        raise ValueError(
            f"padded: expected shape {'(B, T, ...)' if batch_first else '(T, B, ...)'}, "
            f"got shape {padded.shape}"
        )
    time_major = padded.swapaxes(0, 1) if batch_first else padded
    steps = time_major.shape[0]
    lengths = check_lengths(lengths, steps, time_major.shape[1])
    starts = steps - lengths if padding == "pre" else np.zeros_like(lengths)
    return [time_major[s : s + n, b].copy() for b, (s, n) in enumerate(zip(starts, lengths))]


def _as_arrays(sequences) -> list[np.ndarray]:
    """The sequences as arrays with a time axis, each checked to hold numbers."""
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__iter__"):
        raise TypeError(
            f"sequences: expected a list of arrays shaped (T_i, ...), "
            f"got {type(sequences).__name__}"
        )
    arrays = []
    for i, s in enumerate(sequences):
        try:
            a = np.asarray(s)
        except (TypeError, ValueError) as exc:  # ragged nested lists
            raise ValueError(
                f"sequences[{i}]: expected an array shaped (T_i, ...): {exc}"
            ) from None
        if a.dtype.kind not in "biufc":
            raise TypeError(
                f"sequences[{i}]: expected numbers, got dtype {a.dtype}; encode tokens to ids "
                f"first (rnnfast.data.Vocabulary)"
            )
        if a.ndim < 1:
            raise ValueError(f"sequences[{i}]: expected shape (T_i, ...), got shape {a.shape}")
        arrays.append(a)
    if not arrays:
        raise ValueError("sequences: expected at least one sequence, got none")
    return arrays


def _is_empty_list(a: np.ndarray) -> bool:
    return a.shape == (0,)


def _feature_shape(arrays) -> tuple[int, ...]:
    """The trailing shape all sequences share; an empty list (0,) fits any."""
    shaped = [(i, a) for i, a in enumerate(arrays) if not _is_empty_list(a)]
    if not shaped:
        return ()
    first, ref = shaped[0]
    for i, a in shaped[1:]:
        if a.shape[1:] != ref.shape[1:]:
            raise ValueError(
                f"sequences[{i}]: expected feature shape {ref.shape[1:]} like "
                f"sequences[{first}], got shape {a.shape}"
            )
    return ref.shape[1:]


def _result_dtype(arrays, dtype) -> np.dtype:
    if dtype is not None:
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"dtype: expected a NumPy numeric dtype, got {dtype!r}") from exc
        if dt.kind not in "biufc":
            raise TypeError(f"dtype: expected a numeric dtype (bool, int, float), got {dt}")
        return dt
    with_steps = [a for a in arrays if a.shape[0]]
    return np.result_type(*(with_steps or arrays))


def _fill_value(padding_value, dtype: np.dtype):
    """``padding_value`` as a scalar of ``dtype``, or an error when it does not fit: a padded
    position must hold the value asked for, not a wrapped or rounded one."""
    if not isinstance(padding_value, numbers.Number) or (
        isinstance(padding_value, numbers.Complex)
        and not isinstance(padding_value, numbers.Real)
        and dtype.kind != "c"
    ):
        raise type_error(
            "padding_value", "a number" if dtype.kind == "c" else "a real number", padding_value
        )
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            fill = np.array(padding_value).astype(dtype)[()]
    except (OverflowError, ValueError, TypeError):
        fill = None
    if dtype.kind in "fc":
        fits = fill is not None and (
            bool(np.isfinite(fill)) or not math.isfinite(abs(complex(padding_value)))
        )
    else:
        fits = fill is not None and fill == padding_value
    if not fits:
        raise ValueError(
            f"padding_value: expected a value that {dtype} holds exactly, got {padding_value!r}; "
            f"pass another padding_value or a wider dtype"
        )
    return fill
