"""Padded batches of variable-length sequences: padding, masks, lengths and per-sequence reversal.

The bridge for users of PyTorch's ``PackedSequence`` and Keras's masks: rnnfast takes a padded
batch and its ``lengths`` (or a Keras-style prefix ``mask``) instead of a packed structure.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._validation import check_lengths

__all__ = [
    "pad_sequences",
    "unpad_sequences",
    "mask_to_lengths",
    "lengths_to_mask",
    "reverse_sequences",
]


def pad_sequences(sequences, batch_first=False, padding_value=0.0, dtype=None):
    """Stack sequences of different lengths into one padded batch.

    Parameters
    ----------
    sequences : sequence of array_like, each shaped (T_i, *features)
        The trailing (feature) shape must be the same for all.
    batch_first : bool
        Return (B, T, *features) instead of (T, B, *features).
    padding_value : float
        Value of the positions past each sequence's end.
    dtype : dtype, optional
        Of the result; by default NumPy's common type of the inputs.

    Returns
    -------
    padded : ndarray, shape (T, B, *features) or (B, T, *features), T = max T_i
    lengths : ndarray of int64, shape (B,)

    Raises
    ------
    ValueError
        An empty list, a sequence without a time axis, or differing feature shapes.
    """
    arrays = [np.asarray(s) for s in sequences]
    if not arrays:
        raise ValueError("sequences: expected at least one sequence, got none")
    for i, a in enumerate(arrays):
        if a.ndim < 1:
            raise ValueError(f"sequences[{i}]: expected shape (T_i, ...), got shape {a.shape}")
        if a.shape[1:] != arrays[0].shape[1:]:
            raise ValueError(
                f"sequences[{i}]: expected feature shape {arrays[0].shape[1:]} like "
                f"sequences[0], got shape {a.shape}"
            )
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    out_dtype = np.result_type(*arrays) if dtype is None else np.dtype(dtype)
    steps = int(lengths.max())
    padded = np.full((steps, len(arrays)) + arrays[0].shape[1:], padding_value, dtype=out_dtype)
    for b, a in enumerate(arrays):
        padded[: a.shape[0], b] = a
    return (padded.swapaxes(0, 1).copy() if batch_first else padded), lengths


def unpad_sequences(padded, lengths, batch_first=False):
    """The inverse of :func:`pad_sequences`: a list of B arrays (copies) shaped (lengths[b], ...)."""
    padded = np.asarray(padded)
    if padded.ndim < 2:
        raise ValueError(
            f"padded: expected shape {'(B, T, ...)' if batch_first else '(T, B, ...)'}, "
            f"got shape {padded.shape}"
        )
    if batch_first:
        padded = padded.swapaxes(0, 1)
    lengths = check_lengths(lengths, padded.shape[0], padded.shape[1])
    return [padded[: int(n), b].copy() for b, n in enumerate(lengths)]


def mask_to_lengths(mask):
    """Lengths (B,) int64 of a Keras-style prefix mask (B, T): True (or 1) on each sequence's
    steps, then False. Raises ValueError (naming ``mask``) when a row is not a prefix, such as
    [1, 0, 1], and TypeError when the mask is not boolean or 0/1 integers."""
    arr = np.asarray(mask)
    if arr.dtype.kind not in "biu":
        raise TypeError(f"mask: expected a boolean (B, T) array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"mask: expected shape (B, T), got shape {arr.shape}")
    if arr.dtype.kind != "b":
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError("mask: expected boolean or 0/1 values")
        arr = arr.astype(bool)
    lengths = arr.sum(axis=1, dtype=np.int64)
    if not np.array_equal(arr, lengths_to_mask(lengths, arr.shape[1])):
        bad = int(np.nonzero((arr != lengths_to_mask(lengths, arr.shape[1])).any(axis=1))[0][0])
        raise ValueError(
            f"mask: expected a prefix mask (each row True then False, as from padding at the "
            f"end), row {bad} is {arr[bad].astype(int).tolist()}"
        )
    return lengths


def lengths_to_mask(lengths, steps):
    """Boolean prefix mask (B, T): ``mask[b, t] = t < lengths[b]``."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise ValueError(f"steps: expected a non-negative int, got {steps!r}")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths: expected shape (B,), got shape {lengths.shape}")
    lengths = check_lengths(lengths, int(steps), lengths.shape[0])
    return np.arange(int(steps))[None, :] < lengths[:, None]


def reversal_index(lengths, steps):
    """(T, B) time index that reverses each sequence within its own length and leaves its
    padding in place: ``t -> lengths[b] - 1 - t`` for ``t < lengths[b]``, else ``t``. An
    involution, so the same gather un-reverses."""
    t = np.arange(steps)[:, None]
    return np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)


def reverse_sequences(x, lengths=None):
    """Reverse each sequence of a time-major padded batch x (T, B, ...) within its own length
    (padding stays at the end); all of x when ``lengths`` is None. Returns a new array."""
    x = np.asarray(x)
    if lengths is None:
        return np.ascontiguousarray(x[::-1])
    lengths = check_lengths(lengths, x.shape[0], x.shape[1])
    return x[reversal_index(lengths, x.shape[0]), np.arange(x.shape[1])[None, :]]
