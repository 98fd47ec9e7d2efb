"""Keras's losses that rnnfast's ``losses`` module does not have, and the per-position values
that sample weights need, in NumPy, with their gradients.

Keras reduces a loss by ``sum_over_batch_size``: each position's loss (a sample, or a step of a
sequence) is the mean over the last axis, then the positions' losses, times their sample
weights, are summed and divided by the number of positions. With equal widths that is the
mean over every element, which is what these return (and what rnnfast's losses return).
"""

from __future__ import annotations

import numpy as np

__all__ = ["EPSILON", "REGRESSION", "position_values", "regression"]

EPSILON = 1e-7  # keras.backend.epsilon()
REGRESSION = ("mse", "mae", "mape", "msle", "huber", "log_cosh")


def _elementwise(name, out, y, delta):
    """``(loss, d loss / d out)`` per element, as Keras defines each loss."""
    d = out - y
    if name == "mse":
        return d * d, 2.0 * d
    if name == "mae":
        return np.abs(d), np.sign(d)
    if name == "mape":
        den = np.maximum(np.abs(y), EPSILON)
        return 100.0 * np.abs(d) / den, 100.0 * np.sign(d) / den
    if name == "msle":
        clipped = np.maximum(out, EPSILON)
        diff = np.log1p(clipped) - np.log1p(np.maximum(y, EPSILON))
        return diff * diff, 2.0 * diff / (clipped + 1.0) * (out > EPSILON)
    if name == "huber":
        a = np.abs(d)
        small = a <= delta
        return (
            np.where(small, 0.5 * d * d, delta * a - 0.5 * delta * delta),
            np.where(small, d, delta * np.sign(d)),
        )
    if name == "log_cosh":  # Keras's stable form: x + softplus(-2x) - log 2
        return d + np.logaddexp(0.0, -2.0 * d) - np.log(2.0), np.tanh(d)
    raise ValueError(f"loss: expected one of {REGRESSION}, got {name!r}")


def _keep(mask, shape):
    """The mask broadcast over an array's trailing axes, or None."""
    if mask is None:
        return None
    return np.broadcast_to(mask.reshape(mask.shape + (1,) * (len(shape) - mask.ndim)), shape)


def regression(name, out, y, *, mask=None, weights=None, delta=1.0):
    """``(value, d_out)`` of a Keras regression loss: the mean over the counted elements, each
    position's elements weighted by its sample weight (``weights``, shaped like ``out``'s
    leading axes)."""
    out = np.asarray(out)
    work = np.float64
    loss, grad = _elementwise(name, out.astype(work), np.asarray(y).astype(work), delta)
    scale = np.ones(out.shape, dtype=work)
    counted = out.size
    keep = _keep(mask, out.shape)
    if keep is not None:
        scale = scale * keep
        counted = int(keep.sum())
    if weights is not None:
        scale = scale * _keep(np.asarray(weights, dtype=work), out.shape)
    counted = max(counted, 1)
    value = float(np.sum(loss * scale)) / counted
    return value, (grad * scale / counted).astype(out.dtype, copy=False)


def position_values(name, out, y, *, logits, delta=1.0):
    """Each position's loss (``out``'s leading shape): the mean over its last axis, Keras's
    per-sample value before the sample weights. ``y`` has ``out``'s shape (class ids made
    one-hot first)."""
    out = np.asarray(out, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if name in REGRESSION:
        return _elementwise(name, out, y, delta)[0].mean(axis=-1)
    if name == "binary_crossentropy":
        if logits:
            each = np.maximum(out, 0) - out * y + np.log1p(np.exp(-np.abs(out)))
        else:
            p = np.clip(out, EPSILON, 1.0 - EPSILON)
            each = -(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))
        return each.mean(axis=-1)
    # categorical: -sum(y log p), p the softmax of logits or the normalised probabilities
    if logits:
        shifted = out - out.max(axis=-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    else:
        p = out / out.sum(axis=-1, keepdims=True)
        log_p = np.log(np.clip(p, EPSILON, 1.0 - EPSILON))
    return -(y * log_p).sum(axis=-1)
