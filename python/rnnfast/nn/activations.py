"""The output activations of ``Dense`` (Keras's ``activation=``): each a forward from the
pre-activation and a backward from the forward's output, so a layer keeps only its output for
the backward."""

from __future__ import annotations

import numpy as np

from .._validation import check_choice

__all__ = ["ACTIVATIONS", "activation_backward", "activation_forward", "check_activation"]

# None is the identity (PyTorch's Linear, Keras's default "linear")
ACTIVATIONS = (None, "linear", "relu", "tanh", "sigmoid", "softmax")


def check_activation(value):
    """``value`` as stored: None for the identity ("linear" too), else the name; ValueError
    for anything else."""
    if value is None:
        return None
    return None if check_choice("activation", value, ACTIVATIONS[1:]) == "linear" else value


def activation_forward(name, z):
    """``act(z)`` over the last axis, in z's dtype; z is not modified."""
    if name is None:
        return z
    if name == "relu":
        return np.maximum(z, 0)
    if name == "tanh":
        return np.tanh(z)
    if name == "sigmoid":
        # exp of a negative number only: no overflow for large |z|
        e = np.exp(-np.abs(z))
        return np.where(z >= 0, 1 / (1 + e), e / (1 + e)).astype(z.dtype, copy=False)
    shifted = z - np.max(z, axis=-1, keepdims=True)  # softmax: the largest exponent is 0
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def activation_backward(name, y, dy):
    """The gradient with respect to the pre-activation, from the output ``y = act(z)`` and
    its gradient ``dy`` (softmax: the Jacobian-vector product ``y * (dy - sum(dy * y))``)."""
    if name is None:
        return dy
    if name == "relu":
        return np.where(y > 0, dy, 0).astype(dy.dtype, copy=False)
    if name == "tanh":
        return dy * (1 - y * y)
    if name == "sigmoid":
        return dy * y * (1 - y)
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))
