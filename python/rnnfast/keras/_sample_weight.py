"""Keras's ``sample_weight`` on rnnfast's training loop, which batches ``(x, y)`` only: each
sample's weight travels as one more column of its targets, and the loss and the metrics take
it off again.

Keras weights the loss (each sample's loss times its weight, summed, divided by the batch's
size: ``sum_over_batch_size``); the metrics given as ``metrics=`` are not weighted (Keras's
``weighted_metrics`` are, which the front refuses).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Packed", "pack"]


def check_weights(sample_weight, n, what="sample_weight"):
    """One float weight per sample: (N,), finite, not negative."""
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.shape != (n,):
        raise ValueError(
            f"{what}: expected one weight per sample, shape ({n},), got shape {w.shape} "
            "(per-step weights are not supported: weight whole samples)"
        )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{what}: expected finite weights >= 0")
    return w


def pack(y, sample_weight):
    """``(targets with the weights as their last column, Packed)`` for ``y`` (N, ...)."""
    y = np.asarray(y)
    w = check_weights(sample_weight, len(y))
    flat = y.reshape(len(y), -1).astype(np.float64)
    return np.concatenate([flat, w[:, None]], axis=1), Packed(y.shape[1:], y.dtype)


class Packed:
    """The shape and dtype of the targets packed with their weights; wraps the loss and the
    metrics so that they see the targets as given (and the loss the weights)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    def unpack(self, yb):
        yb = np.asarray(yb)
        y = yb[:, :-1].reshape((len(yb), *self.shape)).astype(self.dtype)
        return y, yb[:, -1]

    def loss(self, loss):
        def weighted(out, yb, mask=None):
            y, w = self.unpack(yb)
            return loss(out, y, mask=mask, weights=w)

        weighted.__name__ = loss.__name__
        return weighted

    def metric(self, metric):
        def unweighted(out, yb, mask=None):
            y, _ = self.unpack(yb)
            return metric(out, y) if mask is None else metric(out, y, mask=mask)

        unweighted.__name__ = metric.__name__
        return unweighted
