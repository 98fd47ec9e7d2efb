"""Losses with fused gradients: each returns ``(loss, d_input)`` in one pass.

Sequences are (T, B, ...) or, with ``batch_first=True``, (B, T, ...). Padding is excluded by
``lengths`` (B,), a boolean ``mask`` shaped like the targets (True counts), or ``ignore_index``.
"""

from __future__ import annotations

import numpy as np

from . import _core
from ._validation import check_int_array, time_major_in_memory

__all__ = [
    "binary_cross_entropy",
    "categorical_cross_entropy",
    "cross_entropy",
    "log_softmax",
    "mse_loss",
]


def log_softmax(logits, axis=-1):
    """Numerically stable log-softmax."""
    shifted = logits - np.max(logits, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _counted_positions(targets, lengths, mask, ignore_index, batch_first):
    """Boolean array shaped like targets: the positions that count."""
    valid = np.ones(targets.shape, dtype=bool)
    if ignore_index is not None:
        valid &= targets != ignore_index
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != targets.shape or mask.dtype != bool:
            raise ValueError(
                f"mask: expected a boolean array of shape {targets.shape}, got dtype "
                f"{mask.dtype} shape {mask.shape}"
            )
        valid &= mask
    if lengths is not None:
        if targets.ndim != 2:
            raise ValueError(f"lengths: need (T, B) or (B, T) targets, got shape {targets.shape}")
        steps = targets.shape[1] if batch_first else targets.shape[0]
        batch = targets.shape[0] if batch_first else targets.shape[1]
        lengths = np.asarray(lengths)
        if lengths.shape != (batch,) or lengths.dtype.kind not in "iu":
            raise ValueError(
                f"lengths: expected {batch} integers, got {lengths.dtype} shape {lengths.shape}"
            )
        if lengths.size and (lengths.min() < 0 or lengths.max() > steps):
            raise ValueError(
                f"lengths: expected values in [0, T] = [0, {steps}], got min "
                f"{lengths.min()}, max {lengths.max()}"
            )
        in_sequence = np.arange(steps)[:, None] < lengths[None, :]  # (T, B)
        valid &= in_sequence.T if batch_first else in_sequence
    return valid


def cross_entropy(
    logits,
    targets,
    *,
    lengths=None,
    mask=None,
    ignore_index=None,
    reduction="mean",
    batch_first=False,
):
    """Softmax cross-entropy and its gradient with respect to the logits.

    Parameters
    ----------
    logits : ndarray, shape (..., V)
        (B, V) for the last step only, (T, B, V) / (B, T, V) for every step.
    targets : int ndarray, shape (...) (the logits' leading shape)
    lengths, mask, ignore_index : optional, exclude padded positions (see the module doc)
    reduction : {"mean", "sum"}
        "mean" averages over the counted positions (0 when none counts).

    Returns
    -------
    loss : float
    d_logits : ndarray like logits
    """
    logits = np.asarray(logits)
    targets = np.asarray(targets)
    if logits.dtype.kind != "f":
        raise TypeError(f"logits: expected a float array, got dtype {logits.dtype}")
    check_int_array("targets", targets)
    if logits.ndim == 0:
        raise ValueError("logits: expected shape (..., V), got a scalar")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"targets: expected shape {logits.shape[:-1]} (the logits' leading "
            f"shape), got shape {targets.shape}"
        )
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction: expected 'mean' or 'sum', got {reduction!r}")
    vocab = logits.shape[-1]
    valid = _counted_positions(targets, lengths, mask, ignore_index, batch_first)
    if np.any(valid & ((targets < 0) | (targets >= vocab))):
        raise ValueError(
            f"targets: expected class ids in [0, {vocab}), got min "
            f"{targets[valid].min()}, max {targets[valid].max()}"
        )
    count = int(valid.sum())
    scale = 1.0 / max(count, 1) if reduction == "mean" else 1.0
    # The fused C++ kernel (one pass per row, rows split between threads) works in float32 or
    # float64; other float dtypes are computed in the nearest and the gradient cast back.
    work = np.dtype(np.float64 if logits.dtype.itemsize > 4 else np.float32)
    # A batch-first sequence that is time-major in memory (a batch_first RNN -> Linear) is
    # computed in its memory order, so no copy of the logits is made.
    swap = time_major_in_memory(logits)
    if swap:
        logits, targets, valid = logits.swapaxes(0, 1), targets.swapaxes(0, 1), valid.swapaxes(0, 1)
    rows = np.ascontiguousarray(logits, dtype=work).reshape(-1, vocab)
    ids = np.where(valid, targets, 0).astype(np.int64).reshape(-1)
    weights = (valid * scale).astype(work).reshape(-1)
    loss, grad = _core.softmax_cross_entropy(rows, ids, weights)
    grad = grad.reshape(logits.shape).astype(logits.dtype, copy=False)
    return float(loss), grad.swapaxes(0, 1) if swap else grad


def mse_loss(pred, target, reduction="mean", *, mask=None):
    """Mean (or summed) squared error and its gradient with respect to ``pred``.

    ``mask`` (boolean, shaped like the leading axes of ``pred``, e.g. (B, T) of (B, T, F))
    leaves the padded positions out: they add nothing and get zero gradient; "mean" averages
    over the counted elements."""
    pred = np.asarray(pred)
    if pred.dtype.kind != "f":
        raise TypeError(f"pred: expected a float array, got dtype {pred.dtype}")
    target = np.asarray(target)
    if target.dtype.kind not in "fiub":
        raise TypeError(f"target: expected a real array, got dtype {target.dtype}")
    target = target.astype(pred.dtype, copy=False)
    if pred.shape != target.shape:
        raise ValueError(f"target: expected shape {pred.shape}, got shape {target.shape}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction: expected 'mean' or 'sum', got {reduction!r}")
    diff = pred - target
    counted = diff.size
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != pred.shape[: mask.ndim]:
            raise ValueError(
                f"mask: expected a boolean array of pred's leading shape, e.g. "
                f"{pred.shape[:2]}, got dtype {mask.dtype} shape {mask.shape}"
            )
        keep = mask.reshape(mask.shape + (1,) * (pred.ndim - mask.ndim))
        diff = np.where(keep, diff, 0).astype(pred.dtype, copy=False)
        counted = int(mask.sum()) * (pred.size // max(mask.size, 1))
    scale = 1.0 / max(counted, 1) if reduction == "mean" else 1.0
    return float(np.sum(diff * diff)) * scale, (2.0 * scale) * diff


# ---- Keras's cross-entropies: binary (independent outputs) and categorical (soft targets) -----


def _float_pair(output, targets):
    """``(output, targets)`` as arrays of output's float dtype and shape; TypeError or ValueError
    naming the argument otherwise."""
    output = np.asarray(output)
    if output.dtype.kind != "f":
        raise TypeError(f"output: expected a float array, got dtype {output.dtype}")
    targets = np.asarray(targets)
    if targets.dtype.kind not in "fiub":
        raise TypeError(f"targets: expected a real array, got dtype {targets.dtype}")
    if targets.shape != output.shape:
        raise ValueError(f"targets: expected shape {output.shape}, got shape {targets.shape}")
    return output, targets.astype(output.dtype, copy=False)


def _counted_mask(mask, shape, unit):
    """``(keep, counted)``: the boolean mask (leading axes of ``shape``, broadcastable over the
    rest) or None, and how many ``unit``-sized items it counts (all of them without a mask)."""
    total = int(np.prod(shape[: len(shape) - unit])) if len(shape) >= unit else 1
    if mask is None:
        return None, total
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.ndim > len(shape) - unit or mask.shape != shape[: mask.ndim]:
        raise ValueError(
            f"mask: expected a boolean array of the output's leading shape, e.g. "
            f"{tuple(shape[: len(shape) - unit])}, got dtype {mask.dtype} shape {mask.shape}"
        )
    keep = mask.reshape(mask.shape + (1,) * (len(shape) - mask.ndim))
    return keep, int(mask.sum()) * (total // max(mask.size, 1))


def _check_options(reduction, epsilon):
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction: expected 'mean' or 'sum', got {reduction!r}")
    if not (isinstance(epsilon, (int, float, np.floating)) and 0.0 <= epsilon < 0.5):
        raise ValueError(f"epsilon: expected a number in [0, 0.5), got {epsilon!r}")


def binary_cross_entropy(
    output, targets, *, from_logits=False, epsilon=1e-7, mask=None, reduction="mean"
):
    """Binary cross-entropy of independent outputs and its gradient with respect to ``output``
    (Keras's ``binary_crossentropy``; PyTorch's ``binary_cross_entropy``, or
    ``binary_cross_entropy_with_logits`` with ``from_logits=True``).

    Parameters
    ----------
    output : float ndarray, any shape
        Probabilities, or logits with ``from_logits=True``.
    targets : real ndarray, output's shape
        Values in [0, 1] (labels, or soft labels).
    from_logits : bool
        True: ``output`` holds logits z, and the loss ``max(z, 0) - z y + log(1 + exp(-|z|))``
        is computed from them without forming the probabilities (stable for any z); its
        gradient is ``sigmoid(z) - y``. False: probabilities p, clipped to
        [epsilon, 1 - epsilon] as Keras does (the gradient is zero where the clip acts).
    epsilon : float
        The clip of probabilities (Keras's ``backend.epsilon()``, 1e-7).
    mask : bool ndarray of output's leading shape, optional
        False leaves those positions out: they add nothing and get zero gradient.
    reduction : {"mean", "sum"}
        "mean" averages over the counted elements (Keras's mean over the last axis, then over
        the samples), 0 when none counts.

    Returns
    -------
    loss : float
    d_output : ndarray like output
    """
    output, y = _float_pair(output, targets)
    _check_options(reduction, epsilon)
    keep, counted = _counted_mask(mask, output.shape, 0)
    if from_logits:
        z = output
        e = np.exp(-np.abs(z))  # exp of a negative number only: no overflow
        values = np.maximum(z, 0) - z * y + np.log1p(e)
        sig = np.where(z >= 0, 1 / (1 + e), e / (1 + e))
        grad = sig - y
    else:
        p = np.clip(output, epsilon, 1 - epsilon)
        values = -(y * np.log(p) + (1 - y) * np.log(1 - p))
        inside = (output >= epsilon) & (output <= 1 - epsilon)
        grad = np.where(inside, (1 - y) / (1 - p) - y / p, 0)
    scale = 1.0 / max(counted, 1) if reduction == "mean" else 1.0
    if keep is not None:
        values = np.where(keep, values, 0)
        grad = np.where(keep, grad, 0)
    return float(np.sum(values, dtype=np.float64)) * scale, (grad * scale).astype(output.dtype)


def categorical_cross_entropy(
    output, targets, *, from_logits=False, epsilon=1e-7, mask=None, reduction="mean"
):
    """Cross-entropy against target distributions (one-hot or soft) over the last axis, and its
    gradient with respect to ``output`` (Keras's ``categorical_crossentropy``; PyTorch's
    ``cross_entropy`` with class-probability targets when ``from_logits=True``). For class ids,
    :func:`cross_entropy` is the same loss from logits without the one-hot targets.

    Parameters
    ----------
    output : float ndarray, (..., K)
        Probabilities, or logits with ``from_logits=True``.
    targets : real ndarray, output's shape
        A distribution over the K classes at each position.
    from_logits : bool
        True: the loss is ``-sum(y * log_softmax(z))`` from the logits (stable), its gradient
        ``softmax(z) * sum(y) - y``. False: as Keras, the probabilities are normalised to sum
        to 1, clipped to [epsilon, 1 - epsilon], and their log taken.
    epsilon : float
        The clip of probabilities (Keras's ``backend.epsilon()``, 1e-7).
    mask : bool ndarray of output's leading shape, optional
        False leaves those positions out: they add nothing and get zero gradient.
    reduction : {"mean", "sum"}
        "mean" averages over the counted positions (the output's leading shape), 0 when none
        counts.

    Returns
    -------
    loss : float
    d_output : ndarray like output
    """
    output, y = _float_pair(output, targets)
    _check_options(reduction, epsilon)
    if output.ndim == 0:
        raise ValueError("output: expected shape (..., K), got a scalar")
    keep, counted = _counted_mask(mask, output.shape, 1)
    if from_logits:
        log_q = log_softmax(output)
        values = -np.sum(y * log_q, axis=-1, keepdims=True)
        grad = np.exp(log_q) * np.sum(y, axis=-1, keepdims=True) - y
    else:
        total = np.sum(output, axis=-1, keepdims=True)
        n = output / total
        q = np.clip(n, epsilon, 1 - epsilon)
        values = -np.sum(y * np.log(q), axis=-1, keepdims=True)
        # through the clip (zero where it acts), then through the normalisation n = p / sum(p)
        g = np.where((n >= epsilon) & (n <= 1 - epsilon), -y / q, 0)
        grad = (g - np.sum(g * n, axis=-1, keepdims=True)) / total
    scale = 1.0 / max(counted, 1) if reduction == "mean" else 1.0
    if keep is not None:
        values = np.where(keep, values, 0)
        grad = np.where(keep, grad, 0)
    return float(np.sum(values, dtype=np.float64)) * scale, (grad * scale).astype(output.dtype)
