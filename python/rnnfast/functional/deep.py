"""Stateless, thread-safe forward and backward of the deep-transition layer (one layer, one
direction): Pascanu et al., "How to Construct Deep Recurrent Neural Networks" (ICLR 2014),
an MLP of k layers inside the hidden-to-hidden step,

    z_1 = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)
    z_i = act(W_i z_{i-1} + b_i)        i = 2 .. k
    h_t = z_k

``weight_tr`` (k - 1, H, H) stacks W_2 .. W_k and ``bias_tr`` (k - 1, H) b_2 .. b_k. k = 1
(``weight_tr`` of shape (0, H, H)) is the Elman layer and runs on its kernels
(:func:`rnnfast.functional.rnn_forward`), so it is the Elman layer bit for bit. The input
projection of all steps is one GEMM; each step runs its k products inside the kernels' time
loop, no Python loop over time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _core
from .._validation import (
    as_float_array,
    check_bool,
    check_lengths,
    check_nonlinearity,
    optional_float_array,
    shape_error,
)
from ._batch import check_batch as _check_batch
from ._batch import longest_first as _longest_first
from ._batch import take as _take
from .elman import PLAIN_FORWARD_OPTIONS, rnn_backward, rnn_forward, rnn_step

__all__ = [
    "DeepTransitionGrads",
    "DeepTransitionOutput",
    "deep_transition_backward",
    "deep_transition_forward",
    "deep_transition_step",
]


class DeepTransitionOutput(NamedTuple):
    """What :func:`deep_transition_forward` returns: the outputs y (T, B, H), the final states
    h_n (B, H) and the workspace (k - 1, T, B, H), z_1 .. z_{k-1} of every step, which the
    backward reads (empty for k = 1: the Elman backward needs none)."""

    y: np.ndarray
    h_n: np.ndarray
    workspace: np.ndarray


class DeepTransitionGrads(NamedTuple):
    """Gradients from :func:`deep_transition_backward`; ``dbias`` is the gradient of
    ``bias_ih`` and of ``bias_hh`` alike (both enter z_1's pre-activation the same way)."""

    dx: np.ndarray
    dh0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias: np.ndarray
    dweight_tr: np.ndarray
    dbias_tr: np.ndarray


def _transition(weight_tr, bias_tr, dtype, hidden):
    """``(weight_tr (k - 1, H, H), bias_tr (k - 1, H) or None)`` checked in the weights' dtype;
    their sizes against H here, where the k = 1 case never reaches the deep kernels' checks."""
    w_tr = as_float_array("weight_tr", weight_tr, dtype)
    if w_tr.ndim != 3 or w_tr.shape[1:] != (hidden, hidden):
        raise shape_error("weight_tr", f"(k - 1, H, H) with H = {hidden}", w_tr)
    b_tr = optional_float_array("bias_tr", bias_tr, dtype)
    if b_tr is not None and b_tr.shape != (w_tr.shape[0], hidden):
        raise shape_error("bias_tr", f"(k - 1, H) = {(w_tr.shape[0], hidden)}", b_tr)
    return w_tr, b_tr


def _hidden(w_hh):
    return w_hh.shape[0] if w_hh.ndim >= 1 else 0


def deep_transition_forward(
    x,
    weight_ih,
    weight_hh,
    weight_tr,
    bias_ih=None,
    bias_hh=None,
    bias_tr=None,
    h0=None,
    nonlinearity="tanh",
    lengths=None,
):
    """Run the deep-transition recurrence (module docstring) over a whole sequence.

    Parameters
    ----------
    x : array_like, shape (T, B, D)
    weight_ih : array_like, shape (H, D), float32 or float64; its dtype is the computation's.
    weight_hh : array_like, shape (H, H)
    weight_tr : array_like, shape (k - 1, H, H)
        W_2 .. W_k of the transition's layers after the first (z_i = act(z_{i-1} W_i^T +
        b_i)); shape (0, H, H) for k = 1, the Elman layer.
    bias_ih, bias_hh : array_like, shape (H,), optional
    bias_tr : array_like, shape (k - 1, H), optional
    h0 : array_like, shape (B, H), optional (zeros when omitted)
    nonlinearity : {"tanh", "relu"}
        The activation of every layer of the transition.
    lengths : array_like of int, shape (B,), optional
        Lengths of the sequences of a padded batch, each in [0, T], in any order (the batch is
        sorted longest first for the kernels and back): steps past a sequence's end output
        zeros, and its h_n is its state after its own last step (h0 for length 0).

    Returns
    -------
    DeepTransitionOutput
        ``(y (T, B, H), h_n (B, H), workspace (k - 1, T, B, H))``; pass y and the workspace to
        :func:`deep_transition_backward`.

    Raises
    ------
    TypeError
        Non-float input, a float dtype other than ``weight_ih``'s, non-integer lengths.
    ValueError
        Shapes that do not fit together (the message names the argument and both shapes),
        lengths out of range, an unknown nonlinearity.
    """
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    w_hh = as_float_array("weight_hh", weight_hh, dt)
    w_tr, b_tr = _transition(weight_tr, bias_tr, dt, _hidden(w_hh))
    x = as_float_array("x", x, dt)
    if x.ndim != 3:
        raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
    steps, batch = x.shape[0], x.shape[1]
    b_ih = optional_float_array("bias_ih", bias_ih, dt)
    b_hh = optional_float_array("bias_hh", bias_hh, dt)
    h0 = optional_float_array("h0", h0, dt)
    if w_tr.shape[0] == 0:  # k = 1: the Elman layer, on its own kernels (bit for bit)
        y, h_n = rnn_forward(x, w_ih, w_hh, b_ih, b_hh, h0, nonlinearity, True, lengths)
        workspace = np.empty((0, steps, batch, w_hh.shape[0]), dtype=dt)
        return DeepTransitionOutput(y, h_n, workspace)
    lengths = check_lengths(lengths, steps, batch)
    order, lengths = _longest_first(lengths)
    if order is not None:
        _check_batch("h0", h0, 0, batch, "(B, H)")
        x, h0 = _take(x, order, 1), _take(h0, order, 0)
    y, h_n, workspace = _core.deep_forward(
        x, h0, w_ih, w_hh, b_ih, b_hh, w_tr, b_tr, lengths, nonlinearity
    )
    if order is not None:
        inverse = np.argsort(order)
        y, h_n = _take(y, inverse, 1), _take(h_n, inverse, 0)
        workspace = _take(workspace, inverse, 2)
    return DeepTransitionOutput(y, h_n, workspace)


def deep_transition_backward(
    x,
    weight_ih,
    weight_hh,
    weight_tr,
    y,
    workspace,
    dy=None,
    dh_n=None,
    *,
    h0,
    nonlinearity,
    lengths,
    input_gradient=True,
):
    """Backpropagation through time of :func:`deep_transition_forward`, from its outputs.

    As with :func:`rnnfast.functional.rnn_backward`, every forward argument that changes the
    gradient is a keyword without a default (``h0=None`` included): the backward cannot know
    what the forward was given.

    Parameters
    ----------
    x, weight_ih, weight_hh, weight_tr : as given to :func:`deep_transition_forward`
        (the biases are not needed: the outputs and the workspace hold their effect).
    y : array_like, shape (T, B, H): the forward's outputs.
    workspace : array_like, shape (k - 1, T, B, H): the forward's workspace.
    dy : array_like, shape (T, B, H), optional: gradient of the loss with respect to y
        (ignored at padded steps).
    dh_n : array_like, shape (B, H), optional: gradient with respect to h_n.
    h0, nonlinearity, lengths : keyword-only and required, exactly as given to the forward.
    input_gradient : bool
        False: ``dx`` is not computed (None), which saves its GEMM.

    Returns
    -------
    DeepTransitionGrads
        ``(dx (T, B, D) or None, dh0 (B, H), dweight_ih (H, D), dweight_hh (H, H), dbias (H,),
        dweight_tr (k - 1, H, H), dbias_tr (k - 1, H))``.
    """
    check_nonlinearity(nonlinearity)
    input_gradient = check_bool("input_gradient", input_gradient)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    w_hh = as_float_array("weight_hh", weight_hh, dt)
    H = _hidden(w_hh)
    w_tr, _ = _transition(weight_tr, None, dt, H)
    x = as_float_array("x", x, dt)
    if x.ndim != 3:
        raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
    steps, batch = x.shape[0], x.shape[1]
    h0 = optional_float_array("h0", h0, dt)
    y = as_float_array("y", y, dt)
    dy = optional_float_array("dy", dy, dt)
    dh_n = optional_float_array("dh_n", dh_n, dt)
    if w_tr.shape[0] == 0:  # k = 1: the Elman backward (it needs no workspace)
        fw = {**PLAIN_FORWARD_OPTIONS, "h0": h0, "nonlinearity": nonlinearity}
        fw["lengths"] = lengths
        g = rnn_backward(x, w_ih, w_hh, y, dy, dh_n, **fw, input_gradient=input_gradient)
        empty = np.zeros((0, H, H), dtype=dt), np.zeros((0, H), dtype=dt)
        return DeepTransitionGrads(*g, *empty)
    workspace = as_float_array("workspace", workspace, dt)
    lengths = check_lengths(lengths, steps, batch)
    order, lengths = _longest_first(lengths)
    if order is not None:
        _check_batch("y", y, 1, batch, "(T, B, H)")
        _check_batch("dy", dy, 1, batch, "(T, B, H)")
        _check_batch("workspace", workspace, 2, batch, "(k - 1, T, B, H)")
        _check_batch("h0", h0, 0, batch, "(B, H)")
        _check_batch("dh_n", dh_n, 0, batch, "(B, H)")
        x, y, dy = (_take(a, order, 1) for a in (x, y, dy))
        workspace = _take(workspace, order, 2)
        h0, dh_n = _take(h0, order, 0), _take(dh_n, order, 0)
    raw = _core.deep_backward(
        x, h0, w_ih, w_hh, w_tr, y, workspace, dy, dh_n, lengths, nonlinearity, input_gradient
    )
    grads = DeepTransitionGrads(*raw)
    if order is not None:
        inverse = np.argsort(order)
        dx = None if grads.dx is None else _take(grads.dx, inverse, 1)
        grads = grads._replace(dx=dx, dh0=_take(grads.dh0, inverse, 0))
    return grads


def deep_transition_step(
    x_t, h, weight_ih, weight_hh, weight_tr, bias_ih=None, bias_hh=None, bias_tr=None,
    nonlinearity="tanh",
):  # fmt: skip
    """One time step for streaming: ``h_next`` (B, H) from ``x_t`` (B, D) and ``h`` (B, H),
    the same recurrence as :func:`deep_transition_forward` (k = 1: the Elman step kernel,
    :func:`rnnfast.functional.rnn_step`; k >= 2: the forward over a sequence of one step)."""
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    w_hh = as_float_array("weight_hh", weight_hh, dt)
    w_tr, b_tr = _transition(weight_tr, bias_tr, dt, _hidden(w_hh))
    if w_tr.shape[0] == 0:
        return rnn_step(x_t, h, w_ih, w_hh, bias_ih, bias_hh, nonlinearity)
    x_t = as_float_array("x_t", x_t, dt)
    if x_t.ndim != 2:
        raise shape_error("x_t", "(B, D)", x_t)
    h = as_float_array("h", h, dt)
    out = deep_transition_forward(
        x_t[None], w_ih, w_hh, w_tr, bias_ih, bias_hh, b_tr, h, nonlinearity
    )
    return out.h_n
