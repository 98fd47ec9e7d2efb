"""Keras-style prefix masks and rnnfast's per-sequence lengths, each from the other."""

from __future__ import annotations

import numpy as np

from .._validation import check_bool_mask, check_int, check_lengths

__all__ = ["mask_to_lengths", "lengths_to_mask"]


def mask_to_lengths(mask):
    """The lengths of a Keras-style prefix mask.

    Parameters
    ----------
    mask : array_like of bool or 0/1 integers, shape (B, T)
        True on each sequence's steps, then False (padding at the end).

    Returns
    -------
    ndarray of int64, shape (B,)

    Raises
    ------
    TypeError
        A mask that is not boolean or integer.
    ValueError
        Not (B, T), values other than 0/1, or a row that is not a prefix, such as [1, 0, 1]
        (the message names the row).
    """
    arr = check_bool_mask("mask", mask, (None, None), "(B, T)")
    lengths = arr.sum(axis=1, dtype=np.int64)
    prefix = lengths_to_mask(lengths, arr.shape[1])
    if not np.array_equal(arr, prefix):
        bad = int(np.nonzero((arr != prefix).any(axis=1))[0][0])
        raise ValueError(
            f"mask: expected a prefix mask (each row True then False, as from padding at the "
            f"end), row {bad} is {arr[bad].astype(int).tolist()}"
        )
    return lengths


def lengths_to_mask(lengths, steps):
    """The boolean prefix mask of per-sequence lengths: ``mask[b, t] = t < lengths[b]``.

    Parameters
    ----------
    lengths : array_like of int, shape (B,)
        Each in [0, steps].
    steps : int >= 0
        T, the mask's second axis.

    Returns
    -------
    ndarray of bool, shape (B, T)

    Raises
    ------
    TypeError
        Non-integer ``lengths`` or ``steps``.
    ValueError
        A negative ``steps``, ``lengths`` not 1-D or out of range.
    """
    steps = check_int("steps", steps, minimum=0)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths: expected shape (B,), got shape {lengths.shape}")
    lengths = check_lengths(lengths, int(steps), lengths.shape[0])
    return np.arange(int(steps))[None, :] < lengths[:, None]
