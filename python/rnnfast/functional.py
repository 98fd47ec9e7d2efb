"""Stateless, thread-safe Elman RNN forward and backward (one layer, one direction).

Arrays in, arrays out; nothing is cached, so calls from many threads at once are safe. The
kernels run in C++ with the GIL released.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core
from ._validation import (
    as_float_array,
    check_alpha,
    check_lengths,
    check_nonlinearity,
    optional_float_array,
)

__all__ = ["rnn_forward", "rnn_backward", "rnn_step", "RNNGrads"]


class RNNGrads(NamedTuple):
    """Gradients from :func:`rnn_backward`; ``dbias`` is the gradient of ``bias_ih`` and of
    ``bias_hh`` alike (both enter the pre-activation the same way)."""

    dx: np.ndarray
    dh0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias: np.ndarray


def rnn_forward(x, weight_ih, weight_hh, bias_ih=None, bias_hh=None, h0=None,
                nonlinearity="tanh", return_sequences=True, lengths=None, alpha=1.0):
    """Run ``h_t = (1 - alpha) h_{t-1} + alpha act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``
    over a whole sequence (``alpha = 1``: the plain Elman unit).

    Parameters
    ----------
    x : array_like, shape (T, B, D)
    weight_ih : array_like, shape (H, D), float32 or float64; its dtype is the computation's.
    weight_hh : array_like, shape (H, H)
    bias_ih, bias_hh : array_like, shape (H,), optional
    h0 : array_like, shape (B, H), optional (zeros when omitted)
    nonlinearity : {"tanh", "relu"}
    return_sequences : bool
        When False, only h_n is computed, in O(B*H) working memory, and ``y`` is None.
    lengths : array_like of int, shape (B,), optional
        Lengths of the sequences of a padded batch, each in [0, T]: steps past a sequence's end
        output zeros, and its h_n is its state after its own last step (h0 for length 0).
    alpha : float in (0, 1]
        Leak rate of leaky units.

    Returns
    -------
    y : ndarray, shape (T, B, H), or None
    h_n : ndarray, shape (B, H)

    Raises
    ------
    TypeError
        Non-float input, a float dtype other than ``weight_ih``'s, non-integer lengths.
    ValueError
        Shapes that do not fit together (the message names the argument and both shapes),
        lengths out of range, alpha outside (0, 1].
    """
    args = _forward_args(x, weight_ih, weight_hh, bias_ih, bias_hh, h0, nonlinearity)
    x, h0 = args[0], args[1]
    steps, batch = x.shape[0], x.shape[1]
    lengths = check_lengths(lengths, steps, batch)
    alpha = check_alpha(alpha)
    if lengths is None:
        return _core.rnn_forward(*args, alpha, bool(return_sequences))
    y, _ = _core.rnn_forward(*args, alpha, True)
    y *= _step_mask(lengths, steps, y.dtype)
    h_n = _state_at_own_end(y, lengths, h0)
    return (y if return_sequences else None), h_n


def rnn_backward(x, weight_ih, weight_hh, y, dy=None, dh_n=None, h0=None, nonlinearity="tanh",
                 lengths=None, alpha=1.0):
    """Backpropagation through time from the outputs ``y`` of :func:`rnn_forward`.

    Parameters
    ----------
    x, weight_ih, weight_hh, h0, nonlinearity, lengths, alpha : as given to :func:`rnn_forward`
    y : array_like, shape (T, B, H), the forward's outputs (the activation's derivative is
        recovered from them; no pre-activations are needed).
    dy : array_like, shape (T, B, H), optional: gradient of the loss with respect to y
        (ignored at padded steps).
    dh_n : array_like, shape (B, H), optional: gradient with respect to h_n.

    Returns
    -------
    RNNGrads
        ``(dx (T, B, D), dh0 (B, H), dweight_ih (H, D), dweight_hh (H, H), dbias (H,))``.
    """
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    x = _sequence_input(x, dt)
    lengths = check_lengths(lengths, x.shape[0], x.shape[1])
    alpha = check_alpha(alpha)
    dy = optional_float_array("dy", dy, dt)
    dh_n = optional_float_array("dh_n", dh_n, dt)
    if lengths is not None:
        dy, dh_n, dh_n_unused = _route_output_gradients(x.shape, dy, dh_n, lengths, dt, w_ih)
    grads = _core.rnn_backward(
        x,
        optional_float_array("h0", h0, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        as_float_array("y", y, dt),
        dy,
        dh_n,
        nonlinearity,
        alpha,
    )
    grads = RNNGrads(*grads)
    if lengths is not None and dh_n_unused is not None:
        grads.dh0[lengths == 0] += dh_n_unused[lengths == 0]
    return grads


def _forward_args(x, weight_ih, weight_hh, bias_ih, bias_hh, h0, nonlinearity):
    """The kernel's positional arguments after the dtype rules (shapes are the kernel's)."""
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    return (
        _sequence_input(x, dt),
        optional_float_array("h0", h0, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        optional_float_array("bias_ih", bias_ih, dt),
        optional_float_array("bias_hh", bias_hh, dt),
        nonlinearity,
    )


def _sequence_input(x, dtype):
    x = as_float_array("x", x, dtype)
    if x.ndim != 3:
        raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
    return x


def _step_mask(lengths, steps, dtype):
    """(T, B, 1): 1 where step t belongs to sequence b, else 0."""
    return (np.arange(steps)[:, None] < lengths[None, :]).astype(dtype)[:, :, None]


def _state_at_own_end(y, lengths, h0):
    """h_n[b] = y[lengths[b] - 1, b], or h0[b] (zeros) where lengths[b] == 0."""
    batch, hidden = y.shape[1], y.shape[2]
    h_n = np.zeros((batch, hidden), dtype=y.dtype) if h0 is None else h0.copy()
    ran = lengths > 0
    h_n[ran] = y[lengths[ran] - 1, np.nonzero(ran)[0]]
    return h_n


def _route_output_gradients(x_shape, dy, dh_n, lengths, dtype, w_ih):
    """With lengths, the gradient of h_n enters each sequence at its own last step and dy is
    dropped at padded steps: returns (dy for the kernel, dh_n for the kernel (None), the part
    of dh_n that belongs to empty sequences and goes straight to dh0)."""
    steps, batch = x_shape[0], x_shape[1]
    hidden = w_ih.shape[0]
    if dy is not None and dy.shape != (steps, batch, hidden):
        raise ValueError(
            f"dy: expected shape (T, B, H) = {(steps, batch, hidden)}, got shape {dy.shape}"
        )
    if dh_n is not None and dh_n.shape != (batch, hidden):
        raise ValueError(f"dh_n: expected shape (B, H) = {(batch, hidden)}, got shape {dh_n.shape}")
    routed = np.zeros((steps, batch, hidden), dtype=dtype) if dy is None else dy * _step_mask(
        lengths, steps, dtype)
    if dh_n is not None:
        ran = lengths > 0
        routed[lengths[ran] - 1, np.nonzero(ran)[0]] += dh_n[ran]
    return routed, None, dh_n


def rnn_step(x_t, h, weight_ih, weight_hh, bias_ih=None, bias_hh=None, nonlinearity="tanh",
             alpha=1.0):
    """One time step for streaming: ``h_next`` (B, H) from ``x_t`` (B, D) and ``h`` (B, H).

    The same unit as :func:`rnn_forward` over one step, without its per-call set-up (no packing,
    no threads): a couple of microseconds at B=1, H=64.
    """
    if type(alpha) in (float, int):
        # Fast path for streaming: arrays that already have the weights' dtype and are
        # C-contiguous go straight to the kernel, which checks every shape and dtype itself.
        # Anything it refuses takes the converting path below, which raises the precise error.
        try:
            return _core.rnn_step(x_t, h, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity,
                                  alpha)
        except (TypeError, ValueError):
            pass
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    return _core.rnn_step(
        as_float_array("x_t", x_t, dt),
        as_float_array("h", h, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        optional_float_array("bias_ih", bias_ih, dt),
        optional_float_array("bias_hh", bias_hh, dt),
        nonlinearity,
        check_alpha(alpha),
    )
