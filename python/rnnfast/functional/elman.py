"""Stateless, thread-safe Elman RNN forward and backward (one layer, one direction).

Arrays in, arrays out; nothing is cached, so calls from many threads at once are safe. The
kernels run in C++ with the GIL released.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from .. import _core
from .._validation import (
    as_float_array,
    check_alpha,
    check_bool,
    check_lengths,
    check_nonlinearity,
    check_step_mask,
    optional_float_array,
)
from ._batch import check_batch as _check_batch
from ._batch import longest_first as _longest_first
from ._batch import sequence_input as _sequence
from ._batch import sort_sequence as _sort_sequence
from ._batch import take as _take
from ._batch import weight_cache_arg
from ._unbatched import as_batch, unbatch

__all__ = [
    "PLAIN_FORWARD_OPTIONS",
    "rnn_forward",
    "rnn_backward",
    "rnn_step",
    "RNNGrads",
    "quantized_rnn_forward",
    "quantized_rnn_step",
]

PLAIN_FORWARD_OPTIONS = MappingProxyType(
    {
        "h0": None,
        "nonlinearity": "tanh",
        "lengths": None,
        "alpha": 1.0,
        "step_mask": None,
        "zero_output_for_mask": False,
        "recurrent_mask": None,
    }
)
"""The forward keywords :func:`rnn_backward` must be told again, at the values of a plain
forward (:func:`rnn_forward`'s defaults: no h0, tanh, no lengths, alpha 1, no masks). A
read-only mapping: override what the forward was given, as in
``fw = {**F.PLAIN_FORWARD_OPTIONS, "h0": h0}``, and pass the same ``**fw`` to both calls."""


class RNNGrads(NamedTuple):
    """Gradients from :func:`rnn_backward`; ``dbias`` is the gradient of ``bias_ih`` and of
    ``bias_hh`` alike (both enter the pre-activation the same way)."""

    dx: np.ndarray
    dh0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias: np.ndarray


def rnn_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    nonlinearity="tanh",
    return_sequences=True,
    lengths=None,
    alpha=1.0,
    *,
    ids=None,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    weight_cache=None,
):
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
    ids : array_like of int, shape (T, B), optional
        Token input (an embedding feeding the layer): ``x`` is then an embedding table (V, D)
        and step t of sequence b reads its row ``ids[t, b]``, the same as ``x = table[ids]``.
        The table is projected once and each step gathers its rows: fewer FLOPs when
        V < T * B.
    step_mask : array_like of bool (or 0/1 integers), shape (T, B), optional
        Keras's mask, time-major as ``x``: where ``step_mask[t, b]`` is False, step t of
        sequence b is skipped. Its state carries through (``h_t = h_{t-1}``) and its output
        ``y[t, b]`` is its previous output (zeros before its first kept step, Keras's initial
        output), or zeros with ``zero_output_for_mask``. h_n is the state after the last step.
        With ``lengths`` as well, a step is kept only when both keep it, and steps past a
        sequence's length still output zeros (whatever ``zero_output_for_mask`` says).
    zero_output_for_mask : bool
        What a step skipped by ``step_mask`` outputs: False (Keras's default) the previous
        output, True zeros. Ignored without ``step_mask``.
    recurrent_mask : array_like, shape (B, H), optional
        Recurrent dropout (Keras's ``recurrent_dropout``, variational): the recurrent product
        reads ``W_hh (h_{t-1} * recurrent_mask)`` at every step, one mask per sequence. Pass the
        scaled keep mask, 0 or 1 / (1 - p) (any values are applied as given). The state itself
        and the outputs are not masked.
    weight_cache : rnnfast.functional.WeightCache, optional
        Packed weights kept between calls: the kernels look their packs of the weights up in
        it (by the weights' address, sizes and kernel) and store what they pack, so a call on
        the same weights skips the packing. The results are the same with or without one.
        The caller clears it (``weight_cache.clear()``) whenever the weights' values may have
        changed in place, and keeps the weight arrays alive while it holds their packs (a
        freed array's address may be reused). Weights converted for the call (another dtype,
        not C-contiguous, not an ndarray) bypass it.

    Both masks run inside the kernels (a per-row select in each step's epilogue, no loop over
    time in Python); with either, every sequence runs every step.

    Returns
    -------
    y : ndarray, shape (T, B, H), or None
    h_n : ndarray, shape (B, H)

    Raises
    ------
    TypeError
        Non-float input, a float dtype other than ``weight_ih``'s, non-integer lengths, a
        step_mask that is neither bool nor integer, a non-bool zero_output_for_mask.
    ValueError
        Shapes that do not fit together (the message names the argument and both shapes),
        lengths out of range, alpha outside (0, 1], step_mask values other than 0 and 1.
    """
    h0, w_ih, w_hh, b_ih, b_hh = _forward_args(
        weight_ih, weight_hh, bias_ih, bias_hh, h0, nonlinearity
    )
    x, ids, steps, batch = _sequence(x, w_ih.dtype, ids)
    lengths = check_lengths(lengths, steps, batch)
    alpha = check_alpha(alpha)
    step_mask, zero_output_for_mask, recurrent_mask = _masks(
        step_mask, zero_output_for_mask, recurrent_mask, steps, batch, w_ih.dtype
    )
    order, lengths = _longest_first(lengths)
    if order is not None:
        _check_batch("h0", h0, 0, batch, "(B, H)")
        _check_batch("recurrent_mask", recurrent_mask, 0, batch, "(B, H)")
        x, ids = _sort_sequence(x, ids, order)
        h0, recurrent_mask = _take(h0, order, 0), _take(recurrent_mask, order, 0)
        step_mask = _take(step_mask, order, 1)
    y, h_n = _core.rnn_forward(
        x,
        h0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        lengths,
        nonlinearity,
        alpha,
        bool(return_sequences),
        ids,
        step_mask=step_mask,
        zero_output_for_mask=zero_output_for_mask,
        recurrent_mask=recurrent_mask,
        weight_cache=weight_cache_arg(weight_cache, ((weight_ih, w_ih), (weight_hh, w_hh))),
    )
    if order is not None:
        inverse = np.argsort(order)
        y, h_n = _take(y, inverse, 1), _take(h_n, inverse, 0)
    return y, h_n


def rnn_backward(
    x,
    weight_ih,
    weight_hh,
    y,
    dy=None,
    dh_n=None,
    *,
    h0,
    nonlinearity,
    lengths,
    alpha,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
    ids=None,
    input_gradient=True,
    weight_cache=None,
):
    """Backpropagation through time from the outputs ``y`` of :func:`rnn_forward`.

    Every forward argument that changes the gradient is a keyword without a default: the
    backward cannot know what the forward was given, so the caller says it, ``h0=None`` and
    ``step_mask=None`` included. Omitting one raises TypeError (a missing h0 used to give a
    wrong dW_hh silently). :data:`PLAIN_FORWARD_OPTIONS` holds them at a plain forward's
    values; passing the same keywords to both calls keeps them in step::

        fw = {**PLAIN_FORWARD_OPTIONS, "h0": h0}
        y, h_n = rnn_forward(x, w_ih, w_hh, b_ih, b_hh, **fw)
        grads = rnn_backward(x, w_ih, w_hh, y, dy, dh_n, **fw)

    Parameters
    ----------
    x, weight_ih, weight_hh, ids : as given to :func:`rnn_forward`
    y : array_like, shape (T, B, H), the forward's outputs (the activation's derivative is
        recovered from them, and under a step mask the states too; no pre-activations are
        needed).
    dy : array_like, shape (T, B, H), optional: gradient of the loss with respect to y
        (ignored at padded steps; at a step that repeats the previous output it flows to that
        output's step).
    dh_n : array_like, shape (B, H), optional: gradient with respect to h_n.
    h0, nonlinearity, lengths, alpha, step_mask, zero_output_for_mask, recurrent_mask :
        keyword-only and required: exactly as given to :func:`rnn_forward`
        (:data:`PLAIN_FORWARD_OPTIONS` for a plain forward).
    input_gradient : bool
        False: ``dx`` is not computed (None): an input that needs no gradient (the data fed
        to a first layer) saves its GEMM, a sixth of the backward's FLOPs when D = H. The
        other gradients are the same.
    weight_cache : rnnfast.functional.WeightCache, optional
        As :func:`rnn_forward`'s (the forward's own cache serves the backward too).

    Returns
    -------
    RNNGrads
        ``(dx (T, B, D), dh0 (B, H), dweight_ih (H, D), dweight_hh (H, H), dbias (H,))``;
        with ``ids``, ``dx`` is the embedding table's gradient (V, D). Skipped steps have zero
        ``dx``; None with ``input_gradient=False``.
    """
    check_nonlinearity(nonlinearity)
    input_gradient = check_bool("input_gradient", input_gradient)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    x, ids, steps, batch = _sequence(x, dt, ids)
    lengths = check_lengths(lengths, steps, batch)
    alpha = check_alpha(alpha)
    step_mask, zero_output_for_mask, recurrent_mask = _masks(
        step_mask, zero_output_for_mask, recurrent_mask, steps, batch, dt
    )
    h0 = optional_float_array("h0", h0, dt)
    y = as_float_array("y", y, dt)
    dy = optional_float_array("dy", dy, dt)
    dh_n = optional_float_array("dh_n", dh_n, dt)
    order, lengths = _longest_first(lengths)
    if order is not None:
        _check_batch("y", y, 1, batch, "(T, B, H)")
        _check_batch("dy", dy, 1, batch, "(T, B, H)")
        _check_batch("h0", h0, 0, batch, "(B, H)")
        _check_batch("dh_n", dh_n, 0, batch, "(B, H)")
        _check_batch("recurrent_mask", recurrent_mask, 0, batch, "(B, H)")
        x, ids = _sort_sequence(x, ids, order)
        y, dy, step_mask = (_take(a, order, 1) for a in (y, dy, step_mask))
        h0, dh_n, recurrent_mask = (_take(a, order, 0) for a in (h0, dh_n, recurrent_mask))
    w_hh = as_float_array("weight_hh", weight_hh, dt)
    grads = RNNGrads(
        *_core.rnn_backward(
            x,
            h0,
            w_ih,
            w_hh,
            y,
            dy,
            dh_n,
            lengths,
            nonlinearity,
            alpha,
            ids,
            step_mask=step_mask,
            zero_output_for_mask=zero_output_for_mask,
            recurrent_mask=recurrent_mask,
            input_gradient=input_gradient,
            weight_cache=weight_cache_arg(weight_cache, ((weight_ih, w_ih), (weight_hh, w_hh))),
        )
    )
    if order is not None:
        inverse = np.argsort(order)
        dx = grads.dx if ids is not None else _take(grads.dx, inverse, 1)
        grads = grads._replace(dx=dx, dh0=_take(grads.dh0, inverse, 0))
    return grads


def _masks(step_mask, zero_output_for_mask, recurrent_mask, steps, batch, dtype):
    """The masked kernels' arguments after the dtype and value rules (the kernel checks the
    recurrent mask's shape)."""
    return (
        check_step_mask(step_mask, steps, batch),
        check_bool("zero_output_for_mask", zero_output_for_mask),
        optional_float_array("recurrent_mask", recurrent_mask, dtype),
    )


def _forward_args(weight_ih, weight_hh, bias_ih, bias_hh, h0, nonlinearity):
    """The kernel's state and weight arguments after the dtype rules (shapes are the
    kernel's)."""
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    return (
        optional_float_array("h0", h0, dt),
        w_ih,
        as_float_array("weight_hh", weight_hh, dt),
        optional_float_array("bias_ih", bias_ih, dt),
        optional_float_array("bias_hh", bias_hh, dt),
    )


def rnn_step(
    x_t, h, weight_ih, weight_hh, bias_ih=None, bias_hh=None, nonlinearity="tanh", alpha=1.0
):
    """One time step for streaming: ``h_next`` (B, H) from ``x_t`` (B, D) and ``h`` (B, H).

    As ``torch.nn.RNNCell``: unbatched x_t (D,) and h (H,) give h_next (H,), and h None is
    zeros.

    The same unit as :func:`rnn_forward` over one step, without its per-call set-up (no packing,
    no threads): a couple of microseconds at B=1, H=64.
    """
    if type(alpha) in (float, int):
        # Fast path for streaming: arrays that already have the weights' dtype and are
        # C-contiguous go straight to the kernel, which checks every shape and dtype itself.
        # Anything it refuses takes the converting path below, which raises the precise error.
        try:
            return _core.rnn_step(
                x_t, h, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity, alpha
            )
        except (TypeError, ValueError):
            pass
    check_nonlinearity(nonlinearity)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    w_hh = as_float_array("weight_hh", weight_hh, dt)
    h = optional_float_array("h", h, dt)
    x_t, (h,), unbatched = as_batch(as_float_array("x_t", x_t, dt), [("h", h, "h")], w_hh)
    h_next = _core.rnn_step(
        x_t,
        h,
        w_ih,
        w_hh,
        optional_float_array("bias_ih", bias_ih, dt),
        optional_float_array("bias_hh", bias_hh, dt),
        nonlinearity,
        check_alpha(alpha),
    )
    return unbatch(h_next, unbatched)


def quantized_rnn_forward(
    x,
    weight_ih,
    weight_hh,
    bias=None,
    h0=None,
    nonlinearity="tanh",
    return_sequences=True,
    lengths=None,
    alpha=1.0,
):
    """:func:`rnn_forward` with quantized weights (``rnnfast.quantize``'s inference copies):
    ``weight_ih`` (H x D) and ``weight_hh`` (H x H) are ``_core.QuantizedMatrix`` (bf16 or
    int8), ``bias`` the float32 sum ``b_ih + b_hh`` (H,) or None; x (T, B, D), h0 (B, H) and
    the outputs are float32. Lengths as :func:`rnn_forward`'s (any order: the batch is sorted
    longest first for the kernel and back). No masks: inference only.

    Returns
    -------
    y : ndarray (T, B, H) float32, or None; h_n : ndarray (B, H) float32
    """
    check_nonlinearity(nonlinearity)
    x = as_float_array("x", x, np.float32)
    if x.ndim != 3:
        raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
    steps, batch = x.shape[0], x.shape[1]
    h0 = optional_float_array("h0", h0, np.float32)
    bias = optional_float_array("bias", bias, np.float32)
    lengths = check_lengths(lengths, steps, batch)
    alpha = check_alpha(alpha)
    order, lengths = _longest_first(lengths)
    if order is not None:
        _check_batch("h0", h0, 0, batch, "(B, H)")
        x, h0 = _take(x, order, 1), _take(h0, order, 0)
    y, h_n = _core.quantized_rnn_forward(
        x, h0, weight_ih, weight_hh, bias, lengths, nonlinearity, alpha, bool(return_sequences)
    )
    if order is not None:
        inverse = np.argsort(order)
        y, h_n = _take(y, inverse, 1), _take(h_n, inverse, 0)
    return y, h_n


def quantized_rnn_step(x_t, h, weight_ih, weight_hh, bias=None, nonlinearity="tanh", alpha=1.0):
    """:func:`rnn_step` with quantized weights (as :func:`quantized_rnn_forward`'s):
    ``h_next`` (B, H) float32 from ``x_t`` (B, D) and ``h`` (B, H)."""
    if type(alpha) in (float, int):
        # the streaming fast path, as rnn_step's: the binding checks everything itself
        try:
            return _core.quantized_rnn_step(x_t, h, weight_ih, weight_hh, bias, nonlinearity, alpha)
        except (TypeError, ValueError):
            pass
    check_nonlinearity(nonlinearity)
    return _core.quantized_rnn_step(
        as_float_array("x_t", x_t, np.float32),
        as_float_array("h", h, np.float32),
        weight_ih,
        weight_hh,
        optional_float_array("bias", bias, np.float32),
        nonlinearity,
        check_alpha(alpha),
    )
