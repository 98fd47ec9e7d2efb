"""Keras's default initial weights, in Keras's layout: a layer of the front starts where the
same Keras layer would (in distribution), not from PyTorch's initialisation."""

from __future__ import annotations

import numpy as np

__all__ = ["glorot_uniform", "orthogonal", "recurrent_weights"]


def glorot_uniform(rng, shape):
    """Keras's ``glorot_uniform`` for a kernel (fan_in, fan_out): U(-l, l), l = sqrt(6 / (fan_in
    + fan_out))."""
    limit = np.sqrt(6.0 / (shape[0] + shape[1]))
    return rng.uniform(-limit, limit, shape)


def orthogonal(rng, shape):
    """Keras's ``orthogonal`` for a recurrent kernel (H, G*H): the Q of a QR of a normal matrix,
    its signs fixed by R's diagonal, transposed when it has more columns than rows."""
    rows, cols = shape
    q, r = np.linalg.qr(rng.standard_normal((max(rows, cols), min(rows, cols))))
    q = q * np.sign(np.diag(r))
    return q.T if rows < cols else q


def recurrent_weights(rng, input_size, units, gates, bias, *, bias_rows=1, forget_bias=False):
    """``[kernel (D, G*H), recurrent_kernel (H, G*H)(, bias)]`` of one direction of a Keras
    recurrent layer: glorot, orthogonal, zeros (the LSTM's forget gate 1 with
    ``unit_forget_bias``; a GRU with ``reset_after`` has two bias rows)."""
    weights = [
        glorot_uniform(rng, (input_size, gates * units)),
        orthogonal(rng, (units, gates * units)),
    ]
    if bias:
        b = np.zeros((bias_rows, gates * units) if bias_rows > 1 else (gates * units,))
        if forget_bias:
            b[units : 2 * units] = 1.0  # Keras's gate order i, f, c, o
        weights.append(b)
    return weights
