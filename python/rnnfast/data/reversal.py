"""Reversing each sequence of a padded batch within its own length (padding stays at the end):
what a backward direction and Keras's ``go_backwards`` read."""

from __future__ import annotations

import numpy as np

from .._validation import check_lengths

__all__ = ["reverse_sequences"]


def reversal_index(lengths, steps):
    """The (T, B) time index that reverses each sequence within its own length.

    ``t -> lengths[b] - 1 - t`` for ``t < lengths[b]``, else ``t`` (padding stays in place). An
    involution, so the same gather un-reverses. Internal: ``lengths`` (B,) int64 must already be
    checked to lie in [0, steps].
    """
    t = np.arange(steps)[:, None]
    return np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)


def reverse_sequences(x, lengths=None):
    """Reverse each sequence of a time-major padded batch within its own length.

    Parameters
    ----------
    x : array_like, shape (T, B, ...)
    lengths : array_like of int, shape (B,), optional
        Each in [0, T]; None reverses all of x along time.

    Returns
    -------
    ndarray, shape and dtype of x
        A new array; padding stays at the end of each sequence.

    Raises
    ------
    TypeError
        Non-integer ``lengths``.
    ValueError
        ``lengths`` of the wrong shape or out of range.
    """
    x = np.asarray(x)
    if lengths is None:
        return np.ascontiguousarray(x[::-1])
    if x.ndim < 2:
        raise ValueError(f"x: expected shape (T, B, ...), got shape {x.shape}")
    lengths = check_lengths(lengths, x.shape[0], x.shape[1])
    return x[reversal_index(lengths, x.shape[0]), np.arange(x.shape[1])[None, :]]
