"""Stateless, thread-safe GRU and LSTM forward, backward and step (one layer, one direction).

The cells, in PyTorch's form and gate order (GRU r, z, n; LSTM i, f, g, o):

    GRU    r = rec(W_ir x + b_ir + W_hr h + b_hr),  z = rec(W_iz x + b_iz + W_hz h + b_hz)
           n = act(W_in x + b_in + r * (W_hn h + b_hn))     reset_after=True (PyTorch, Keras 3)
           n = act(W_in x + b_in + W_hn (r * h) + b_hn)     reset_after=False (Keras's other form)
           h' = (1 - z) * n + z * h
    LSTM   i, f, o = rec(.), g = act(.) of W_i* x + b_i* + W_h* h + b_h*
           c' = f * c + i * g,  h' = o * act(c')  (with weight_hr: h' = W_hr (o * act(c')))

``act`` is tanh or relu, ``rec`` sigmoid or Keras 3's hard_sigmoid (clip(x / 6 + 1/2, 0, 1)).
Arrays in, arrays out, time-major (x (T, B, D)); the kernels run in C++ with the GIL released.
A forward with ``keep_workspace=True`` returns what its backward needs (the gates, the cell
states): an opaque array, in the kernels' batch order (sorted by length, longest first), which
the backward expects with the same ``lengths``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from .. import _core
from .._validation import (
    as_float_array,
    check_bool,
    check_choice,
    check_lengths,
    check_step_mask,
    optional_float_array,
)
from ._batch import (
    check_batch,
    longest_first,
    sequence_input,
    sort_sequence,
    take,
    weight_cache_arg,
)
from ._unbatched import as_batch, unbatch

__all__ = [
    "PLAIN_GRU_OPTIONS",
    "PLAIN_LSTM_OPTIONS",
    "GatedOutput",
    "GRUGrads",
    "LSTMGrads",
    "gru_forward",
    "gru_backward",
    "gru_step",
    "lstm_forward",
    "lstm_backward",
    "lstm_step",
]

_PLAIN_MASKS = {
    "step_mask": None,
    "zero_output_for_mask": False,
    "recurrent_mask": None,
    "input_mask": None,
}
PLAIN_GRU_OPTIONS = MappingProxyType(
    {
        "h0": None,
        "lengths": None,
        "reset_after": True,
        "activation": "tanh",
        "recurrent_activation": "sigmoid",
        **_PLAIN_MASKS,
    }
)
PLAIN_LSTM_OPTIONS = MappingProxyType(
    {
        "h0": None,
        "c0": None,
        "lengths": None,
        "weight_hr": None,
        "activation": "tanh",
        "recurrent_activation": "sigmoid",
        **_PLAIN_MASKS,
    }
)

ACTIVATIONS = ("tanh", "relu")
RECURRENT_ACTIVATIONS = ("sigmoid", "hard_sigmoid")


class GatedOutput(NamedTuple):
    """What a gated forward (:func:`gru_forward`, :func:`lstm_forward`) returns: ``y`` (T, B, R)
    or None without ``return_sequences``; ``h_n`` (B, R); ``c_n`` (B, H) for the LSTM, None for
    the GRU; ``workspace``: what the backward needs (gates, cell states), kept only with
    ``keep_workspace=True``; opaque to callers."""

    y: object
    h_n: np.ndarray
    c_n: object
    workspace: object


class GRUGrads(NamedTuple):
    """Gradients from :func:`gru_backward`; ``dx`` is None with ``input_gradient=False``."""

    dx: object
    dh0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias_ih: np.ndarray
    dbias_hh: np.ndarray


class LSTMGrads(NamedTuple):
    """Gradients from :func:`lstm_backward`; ``dweight_hr`` is None without a projection."""

    dx: object
    dh0: np.ndarray
    dc0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias_ih: np.ndarray
    dbias_hh: np.ndarray
    dweight_hr: object


def gru_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    lengths=None,
    *,
    reset_after=True,
    activation="tanh",
    recurrent_activation="sigmoid",
    return_sequences=True,
    keep_workspace=False,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    input_mask=None,
    ids=None,
    weight_cache=None,
):
    """Run a GRU over a whole sequence.

    Parameters
    ----------
    x : array_like, shape (T, B, D)
    weight_ih : array_like, shape (3H, D), float32 or float64 (its dtype is the computation's);
        the gates' rows in PyTorch's order r, z, n.
    weight_hh : array_like, shape (3H, H)
    bias_ih, bias_hh : array_like, shape (3H,), optional
    h0 : array_like, shape (B, H), optional (zeros)
    lengths : array_like of int, shape (B,), optional
        Each sequence's length in [0, T]: later steps output zeros, and h_n is the state after
        the sequence's own last step.
    reset_after : bool
        True: PyTorch's form (Keras's default, ONNX's linear_before_reset=1); False: Keras's
        ``reset_after=False``, the reset gate applied to h before its product.
    activation : {"tanh", "relu"}
    recurrent_activation : {"sigmoid", "hard_sigmoid"}
    return_sequences : bool
        False: y is None and the memory stays O(B * H) beside the input.
    keep_workspace : bool
        Keep what :func:`gru_backward` needs (needs ``return_sequences``).
    step_mask : array_like of bool (or 0/1 integers), shape (T, B), optional
        Keras's mask, time-major as ``x``: where ``step_mask[t, b]`` is False, step t of
        sequence b is skipped: its state carries through and its output is its previous
        output (zeros before its first kept step), or zeros with ``zero_output_for_mask``.
        With ``lengths`` too, a step is kept when both keep it; past a sequence's length the
        output is zeros.
    zero_output_for_mask : bool
        What a skipped step outputs: False (Keras's default) the previous output, True zeros.
    recurrent_mask : array_like, shape (3, B, H) (LSTM: (4, B, R)), optional
        Recurrent dropout as Keras 3's gated cells do it: one mask per gate, in PyTorch's gate
        order, the same at every step; gate g's recurrent product reads ``h * recurrent_mask[g]``
        (reset_after=False: n reads ``r * (h * recurrent_mask[2])``). The state update and the
        LSTM's c are not masked. Pass the scaled keep masks, 0 or 1 / (1 - p).
    input_mask : array_like, shape (3, B, D) (LSTM: (4, B, D)), optional
        Input dropout as Keras 3's gated cells do it (their ``dropout``): one mask per gate,
        the same at every step; gate g's input projection reads ``x_t * input_mask[g]``.
    ids : array_like of int, shape (T, B), optional
        Token input (an embedding feeding the layer): ``x`` is then the embedding table (V, D)
        and step t of sequence b reads its row ``ids[t, b]``, the same as ``x = table[ids]``.
        The table is projected once (V x G*H) and each step gathers its rows; the backward
        returns the table's gradient (V, D) as dx. Not with ``input_mask``.
    weight_cache : rnnfast.functional.WeightCache, optional
        Packed weights kept between calls: the kernels look their packs of the weights up in
        it (by the weights' address, sizes and kernel) and store what they pack, so a call on
        the same weights skips the packing. The results are the same with or without one.
        The caller clears it (``weight_cache.clear()``) whenever the weights' values may have
        changed in place, and keeps the weight arrays alive while it holds their packs (a
        freed array's address may be reused). Weights converted for the call (another dtype,
        not C-contiguous, not an ndarray) bypass it. The backward takes the same cache.

    Returns
    -------
    GatedOutput
        ``(y (T, B, H) or None, h_n (B, H), None, workspace or None)``
    """
    cell = "gru" if check_bool("reset_after", reset_after) else "gru_reset_before"
    return _forward(
        cell,
        x,
        (weight_ih, weight_hh, bias_ih, bias_hh, None),
        (h0, None),
        lengths,
        (activation, recurrent_activation),
        (return_sequences, keep_workspace),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        ids,
        weight_cache=weight_cache,
    )


def lstm_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    c0=None,
    lengths=None,
    *,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
    return_sequences=True,
    keep_workspace=False,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    input_mask=None,
    ids=None,
    weight_cache=None,
):
    """Run an LSTM over a whole sequence: :func:`gru_forward`'s arguments, with weight_ih
    (4H, D) and weight_hh (4H, R) in PyTorch's gate order i, f, g, o, the cell state c0 (B, H),
    and ``weight_hr`` (P, H), PyTorch's projection (``proj_size``): h_t = W_hr (o * act(c_t)),
    R = P wide (else R = H). ``weight_cache``: as :func:`gru_forward`'s.

    Returns
    -------
    GatedOutput
        ``(y (T, B, R) or None, h_n (B, R), c_n (B, H), workspace or None)``
    """
    return _forward(
        "lstm",
        x,
        (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr),
        (h0, c0),
        lengths,
        (activation, recurrent_activation),
        (return_sequences, keep_workspace),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        ids,
        weight_cache=weight_cache,
    )


def gru_backward(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    y,
    workspace,
    dy=None,
    dh_n=None,
    *,
    h0,
    lengths,
    reset_after,
    activation,
    recurrent_activation,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
    input_mask,
    input_gradient=True,
    ids=None,
    weight_cache=None,
):
    """Backpropagation through time from a :func:`gru_forward` with ``keep_workspace=True``.

    Every forward option that changes the gradient is a keyword without a default, as in
    ``rnn_backward``: the caller says again what the forward was given. The biases are taken
    for the signature's sake (:mod:`rnnfast.reference` recomputes the forward from them); the
    kernels read what they need from the workspace. ``weight_cache``: as
    :func:`gru_forward`'s (the forward's own serves here too).

    Returns
    -------
    GRUGrads
        ``(dx (T, B, D) or None with input_gradient=False, dh0 (B, H), dweight_ih,
        dweight_hh, dbias_ih, dbias_hh)``
    """
    del bias_ih, bias_hh
    cell = "gru" if check_bool("reset_after", reset_after) else "gru_reset_before"
    g = _backward(
        cell,
        x,
        (weight_ih, weight_hh, None),
        y,
        workspace,
        (dy, dh_n, None),
        (h0, None),
        lengths,
        (activation, recurrent_activation),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        input_gradient,
        ids,
        weight_cache=weight_cache,
    )
    return GRUGrads(g[0], g[1], *g[3:7])


def lstm_backward(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    y,
    workspace,
    dy=None,
    dh_n=None,
    dc_n=None,
    *,
    h0,
    c0,
    lengths,
    weight_hr,
    activation,
    recurrent_activation,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
    input_mask,
    input_gradient=True,
    ids=None,
    weight_cache=None,
):
    """Backpropagation through time from an :func:`lstm_forward` with ``keep_workspace=True``
    (see :func:`gru_backward`, ``weight_cache`` too); dc_n (B, H) is the gradient of c_n.

    Returns
    -------
    LSTMGrads
        ``(dx, dh0, dc0, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dweight_hr or None)``
    """
    del bias_ih, bias_hh
    g = _backward(
        "lstm",
        x,
        (weight_ih, weight_hh, weight_hr),
        y,
        workspace,
        (dy, dh_n, dc_n),
        (h0, c0),
        lengths,
        (activation, recurrent_activation),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        input_gradient,
        ids,
        weight_cache=weight_cache,
    )
    return LSTMGrads(*g)


def gru_step(
    x_t,
    h,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    reset_after=True,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One GRU step for streaming: ``h_next`` (B, H) from x_t (B, D) and h (B, H).

    The cell of :func:`gru_forward` over one step without its per-call set-up (no packing,
    no threads): a couple of microseconds at B = 1, H = 64. As ``torch.nn.GRUCell``:
    unbatched x_t (D,) and h (H,) give h_next (H,), and h None is zeros."""
    args = (x_t, h, None, weight_ih, weight_hh, bias_ih, bias_hh, None)
    if reset_after is True or reset_after is False:
        cell = "gru" if reset_after else "gru_reset_before"
        fast = _fast_step(cell, args, activation, recurrent_activation)
        if fast is not None:
            return fast
    cell = "gru" if check_bool("reset_after", reset_after) else "gru_reset_before"
    return _step(cell, args, activation, recurrent_activation)


def lstm_step(
    x_t,
    h,
    c,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One LSTM step for streaming: ``(h_next (B, R), c_next (B, H))`` from x_t (B, D), h
    (B, R) and c (B, H), as :func:`gru_step`; unbatched x_t (D,), h (R,) and c (H,) give
    1-D states, and h or c None is zeros, as ``torch.nn.LSTMCell``."""
    args = (x_t, h, c, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)
    fast = _fast_step("lstm", args, activation, recurrent_activation)
    if fast is not None:
        return fast
    return _step("lstm", args, activation, recurrent_activation)


def _fast_step(cell, args, activation, recurrent_activation):
    """Streaming's fast path: arrays that already have the weights' dtype and are
    C-contiguous go straight to the kernel, which checks every shape and dtype itself; None
    for anything it refuses (the converting path then raises the precise error)."""
    try:
        return _core.gated_step(cell, *args, activation, recurrent_activation)
    except (TypeError, ValueError):
        return None


def _step(cell, args, activation, recurrent_activation):
    x_t, h, c, w_ih, w_hh, b_ih, b_hh, w_hr = args
    activation, recurrent_activation = _functions(activation, recurrent_activation)
    w_ih = as_float_array("weight_ih", w_ih)
    dt = w_ih.dtype
    names = ("h", "c", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
    h, c, w_hh, b_ih, b_hh, w_hr = (
        optional_float_array(n, v, dt) for n, v in zip(names, (h, c, w_hh, b_ih, b_hh, w_hr))
    )
    states = [("h", h, "h")] + ([("c", c, "c")] if cell == "lstm" else [])
    x_t, states, unbatched = as_batch(as_float_array("x_t", x_t, dt), states, w_hh)
    h, c = states if cell == "lstm" else (states[0], c)
    result = _core.gated_step(
        cell, x_t, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, activation, recurrent_activation
    )
    return unbatch(result, unbatched)


def _given(weights, used):
    """(given, as the kernels take it) of weight_ih, weight_hh and weight_hr: ``weights`` the
    caller's (weight_ih, weight_hh, ..., weight_hr last)."""
    return zip((weights[0], weights[1], weights[-1]), used)


def _functions(activation, recurrent_activation):
    return (
        check_choice("activation", activation, ACTIVATIONS),
        check_choice("recurrent_activation", recurrent_activation, RECURRENT_ACTIVATIONS),
    )


def _inputs(x, weights, states, lengths, masks, ids):
    """The arrays after the dtype rules (the weights' dtype is the computation's) and the
    batch in the kernels' order: ``(x, weights, states, lengths, (step_mask, zero_output,
    recurrent_mask, input_mask), order)``."""
    w_ih = as_float_array("weight_ih", weights[0])
    dt = w_ih.dtype
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")[: len(weights)]
    weights = [w_ih] + [optional_float_array(n, w, dt) for n, w in zip(names[1:], weights[1:])]
    x, ids, steps, batch = sequence_input(x, dt, ids)
    states = [optional_float_array(n, s, dt) for n, s in zip(("h0", "c0"), states)]
    lengths = check_lengths(lengths, steps, batch)
    step_mask = check_step_mask(masks[0], steps, batch)
    zero_output = check_bool("zero_output_for_mask", masks[1])
    recurrent_mask = optional_float_array("recurrent_mask", masks[2], dt)
    input_mask = optional_float_array("input_mask", masks[3], dt)
    order, lengths = longest_first(lengths)
    if order is not None:
        for n, s in zip(("h0", "c0"), states):
            check_batch(n, s, 0, batch, "(B, H)")
        check_batch("recurrent_mask", recurrent_mask, 1, batch, "(G, B, R)")
        x, ids = sort_sequence(x, ids, order)
        step_mask = take(step_mask, order, 1)
        check_batch("input_mask", input_mask, 1, batch, "(G, B, D)")
        recurrent_mask, input_mask = take(recurrent_mask, order, 1), take(input_mask, order, 1)
        states = [take(s, order, 0) for s in states]
    masks = (step_mask, zero_output, recurrent_mask, input_mask)
    return (x, ids), weights, states, lengths, masks, order


def _forward(
    cell,
    x,
    weights,
    states,
    lengths,
    functions,
    returns,
    masks,
    ids,
    cell_params=None,
    *,
    weight_cache=None,
):
    activation, rec = _functions(*functions)
    return_sequences = check_bool("return_sequences", returns[0])
    keep_workspace = check_bool("keep_workspace", returns[1])
    (x, ids), (w_ih, w_hh, b_ih, b_hh, w_hr), (h0, c0), lengths, masks, order = _inputs(
        x, weights, states, lengths, masks, ids
    )
    if w_hh is None:
        raise TypeError("weight_hh: expected an array, got None")
    y, h_n, c_n, workspace = _core.gated_forward(
        cell,
        x,
        h0,
        c0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        w_hr,
        lengths,
        activation,
        rec,
        return_sequences,
        keep_workspace,
        step_mask=masks[0],
        zero_output_for_mask=masks[1],
        recurrent_mask=masks[2],
        input_mask=masks[3],
        ids=ids,
        cell_params=cell_params,
        weight_cache=weight_cache_arg(weight_cache, _given(weights, (w_ih, w_hh, w_hr))),
    )
    if order is not None:
        inverse = np.argsort(order)
        y, h_n, c_n = take(y, inverse, 1), take(h_n, inverse, 0), take(c_n, inverse, 0)
    return GatedOutput(y, h_n, c_n, workspace)


def _backward(
    cell,
    x,
    weights,
    y,
    workspace,
    grads,
    states,
    lengths,
    functions,
    masks,
    input_gradient,
    ids,
    cell_params=None,
    *,
    weight_cache=None,
):
    activation, rec = _functions(*functions)
    input_gradient = check_bool("input_gradient", input_gradient)
    (x, ids), (w_ih, w_hh, w_hr), (h0, c0), lengths, masks, order = _inputs(
        x, weights, states, lengths, masks, ids
    )
    dt = w_ih.dtype
    if y is None:
        raise ValueError("y: expected the forward's outputs (T, B, R), got None")
    if workspace is None:
        raise ValueError(
            "workspace: expected the workspace of a forward with keep_workspace=True, got None"
        )
    y = as_float_array("y", y, dt)
    workspace = as_float_array("workspace", workspace, dt)
    dy, dh_n, dc_n = (optional_float_array(n, g, dt) for n, g in zip(("dy", "dh_n", "dc_n"), grads))
    if order is not None:
        batch = len(order)
        check_batch("y", y, 1, batch, "(T, B, R)")
        check_batch("dy", dy, 1, batch, "(T, B, R)")
        check_batch("dh_n", dh_n, 0, batch, "(B, R)")
        check_batch("dc_n", dc_n, 0, batch, "(B, H)")
        y, dy = take(y, order, 1), take(dy, order, 1)
        dh_n, dc_n = take(dh_n, order, 0), take(dc_n, order, 0)
    g = list(
        _core.gated_backward(
            cell,
            x,
            h0,
            c0,
            w_ih,
            w_hh,
            w_hr,
            y,
            workspace,
            dy,
            dh_n,
            dc_n,
            lengths,
            activation,
            rec,
            input_gradient,
            step_mask=masks[0],
            zero_output_for_mask=masks[1],
            recurrent_mask=masks[2],
            input_mask=masks[3],
            ids=ids,
            cell_params=cell_params,
            weight_cache=weight_cache_arg(weight_cache, _given(weights, (w_ih, w_hh, w_hr))),
        )
    )
    if order is not None:
        inverse = np.argsort(order)
        g[0] = g[0] if ids is not None else take(g[0], inverse, 1)  # a table has no batch
        g[1], g[2] = take(g[1], inverse, 0), take(g[2], inverse, 0)
    return g
