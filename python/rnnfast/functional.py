"""Stateless, thread-safe Elman RNN forward and backward (one layer, one direction).

Arrays in, arrays out; nothing is cached, so calls from many threads at once are safe. The
kernels run in C++ with the GIL released.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core
from ._validation import as_float_array, check_nonlinearity, optional_float_array

__all__ = ["rnn_forward", "rnn_backward", "RNNGrads"]


class RNNGrads(NamedTuple):
    """Gradients from :func:`rnn_backward`; ``dbias`` is the gradient of ``bias_ih`` and of
    ``bias_hh`` alike (both enter the pre-activation the same way)."""

    dx: np.ndarray
    dh0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias: np.ndarray


def rnn_forward(x, weight_ih, weight_hh, bias_ih=None, bias_hh=None, h0=None,
                nonlinearity="tanh", return_sequences=True):
    """Run ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` over a whole sequence.

    Parameters
    ----------
    x : array_like, shape (T, B, D)
    weight_ih : array_like, shape (H, D), float32 or float64; its dtype is the computation's.
    weight_hh : array_like, shape (H, H)
    bias_ih, bias_hh : array_like, shape (H,), optional
    h0 : array_like, shape (B, H), optional (zeros when omitted)
    nonlinearity : {"tanh", "relu"}
    return_sequences : bool
        When False, only h_T is computed, in O(B*H) working memory, and ``y`` is None.

    Returns
    -------
    y : ndarray, shape (T, B, H), or None
    h_n : ndarray, shape (B, H)

    Raises
    ------
    TypeError
        Non-float input, or a float dtype other than ``weight_ih``'s.
    ValueError
        Shapes that do not fit together (the message names the argument and both shapes).
    """
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    return _core.rnn_forward(
        as_float_array("x", x, dt),
        optional_float_array("h0", h0, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        optional_float_array("bias_ih", bias_ih, dt),
        optional_float_array("bias_hh", bias_hh, dt),
        nonlinearity,
        bool(return_sequences),
    )


def rnn_backward(x, weight_ih, weight_hh, y, dy=None, dh_n=None, h0=None, nonlinearity="tanh"):
    """Backpropagation through time from the outputs ``y`` of :func:`rnn_forward`.

    Parameters
    ----------
    x, weight_ih, weight_hh, h0, nonlinearity : as given to :func:`rnn_forward`
    y : array_like, shape (T, B, H), the forward's outputs (the activation's derivative is
        recovered from them; no pre-activations are needed).
    dy : array_like, shape (T, B, H), optional: gradient of the loss with respect to y.
    dh_n : array_like, shape (B, H), optional: gradient with respect to h_T.

    Returns
    -------
    RNNGrads
        ``(dx (T, B, D), dh0 (B, H), dweight_ih (H, D), dweight_hh (H, H), dbias (H,))``.
    """
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    grads = _core.rnn_backward(
        as_float_array("x", x, dt),
        optional_float_array("h0", h0, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        as_float_array("y", y, dt),
        optional_float_array("dy", dy, dt),
        optional_float_array("dh_n", dh_n, dt),
        nonlinearity,
    )
    return RNNGrads(*grads)
