"""Stateless forward, backward and step of ONNX's forms of the LSTM (one layer, one direction):
peepholes, coupled input and forget gates (ONNX's ``input_forget=1``) and the cell clip, as
onnxruntime's CPU LSTM computes them (PyTorch's gate order i, f, g, o here)::

    a_i += p_i * c_{t-1},  a_f += p_f * c_{t-1}        peepholes (3H,) = [p_i | p_f | p_o]
    i = ra(clip(a_i)),  f = ra(clip(a_f)),  g = act(clip(a_g))
    f = 1 - i                                          input_forget (a_f is unused)
    c_t = f * c_{t-1} + i * g
    o = ra(clip(a_o + p_o * c_t)),  h_t = o * act(c_t)  (act's input c_t is not clipped)

clip(v) = min(max(v, -cell_clip), cell_clip); the clip's derivative is zero outside the range.
Each combination of the three options is its own kernel instantiation (``cells/lstm_forms.hpp``):
without them these are :func:`~rnnfast.functional.lstm_forward` and its kin, bit for bit. No
projection (``weight_hr``). Everything else as :func:`lstm_forward`: masks, lengths, token input.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import as_float_array, check_bool, describe, optional_float_array
from ._unbatched import as_batch, unbatch
from .gated import _backward, _forward, _functions

__all__ = ["LSTMFormGrads", "lstm_form_forward", "lstm_form_backward", "lstm_form_step"]


class LSTMFormGrads(NamedTuple):
    """Gradients from :func:`lstm_form_backward`; ``dx`` is None with
    ``input_gradient=False``; ``dpeepholes`` (3H,) is None without peepholes (the clip has no
    gradient)."""

    dx: object
    dh0: np.ndarray
    dc0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias_ih: np.ndarray
    dbias_hh: np.ndarray
    dpeepholes: object


def form_cell(peepholes, input_forget, cell_clip, weight_ih):
    """The kernels' cell name and cell_params (or None) for the options, checked: peepholes
    (3H,) of weight_ih's dtype or None, input_forget a bool, cell_clip a float > 0 or None."""
    w_ih = as_float_array("weight_ih", weight_ih)
    input_forget = check_bool("input_forget", input_forget)
    H = w_ih.shape[0] // 4 if w_ih.ndim == 2 else 0
    parts, name = [], "lstm"
    p = optional_float_array("peepholes", peepholes, w_ih.dtype)
    if p is not None:
        if p.shape != (3 * H,):
            raise ValueError(f"peepholes: expected shape (3*H,) = ({3 * H},), got shape {p.shape}")
        parts.append(p)
        name += "_peepholes"
    if input_forget:
        name += "_input_forget"
    if cell_clip is not None:
        if (
            isinstance(cell_clip, bool)
            or not isinstance(cell_clip, (int, float, np.integer, np.floating))
            or not np.isfinite(cell_clip)
            or cell_clip <= 0
        ):
            raise ValueError(f"cell_clip: expected a float > 0 or None, got {describe(cell_clip)}")
        parts.append(np.full(H, cell_clip, w_ih.dtype))
        name += "_clip"
    return name, (np.concatenate(parts) if parts else None)


def lstm_form_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    c0=None,
    lengths=None,
    *,
    peepholes=None,
    input_forget=False,
    cell_clip=None,
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
    """Run an LSTM in ONNX's forms over a whole sequence x (T, B, D): :func:`lstm_forward`'s
    arguments (no weight_hr) and the options above.

    Returns
    -------
    GatedOutput
        ``(y (T, B, H) or None, h_n (B, H), c_n (B, H), workspace or None)``
    """
    cell, params = form_cell(peepholes, input_forget, cell_clip, weight_ih)
    return _forward(
        cell,
        x,
        (weight_ih, weight_hh, bias_ih, bias_hh, None),
        (h0, c0),
        lengths,
        (activation, recurrent_activation),
        (return_sequences, keep_workspace),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        ids,
        params,
        weight_cache=weight_cache,
    )


def lstm_form_backward(
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
    peepholes,
    input_forget,
    cell_clip,
    activation="tanh",
    recurrent_activation="sigmoid",
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    input_mask=None,
    input_gradient=True,
    ids=None,
    weight_cache=None,
):
    """Backpropagation through time from a :func:`lstm_form_forward` with
    ``keep_workspace=True``, given what that forward was given (the options included; its
    ``weight_cache`` too).

    Returns
    -------
    LSTMFormGrads
    """
    del bias_ih, bias_hh  # the kernels read what they need from the workspace
    cell, params = form_cell(peepholes, input_forget, cell_clip, weight_ih)
    g = _backward(
        cell,
        x,
        (weight_ih, weight_hh, None),
        y,
        workspace,
        (dy, dh_n, dc_n),
        (h0, c0),
        lengths,
        (activation, recurrent_activation),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        input_gradient,
        ids,
        params,
        weight_cache=weight_cache,
    )
    dp = None if peepholes is None else g[8][: 3 * g[2].shape[-1]]  # dc0 is (B, H)
    return LSTMFormGrads(*g[:7], dp)


def lstm_form_step(
    x_t,
    h,
    c,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    peepholes=None,
    input_forget=False,
    cell_clip=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One step for streaming: ``(h_next (B, H), c_next (B, H))`` from x_t (B, D), h and c
    (B, H) (None: zeros); unbatched x_t (D,), h (H,), c (H,) give 1-D states."""
    from .. import _core

    activation, recurrent_activation = _functions(activation, recurrent_activation)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    cell, params = form_cell(peepholes, input_forget, cell_clip, w_ih)
    names = ("h", "c", "weight_hh", "bias_ih", "bias_hh")
    h, c, w_hh, b_ih, b_hh = (
        optional_float_array(n, v, dt) for n, v in zip(names, (h, c, weight_hh, bias_ih, bias_hh))
    )
    x_t, (h, c), unbatched = as_batch(
        as_float_array("x_t", x_t, dt), [("h", h, "h"), ("c", c, "c")], w_hh
    )
    result = _core.gated_step(
        cell, x_t, h, c, w_ih, w_hh, b_ih, b_hh, None, activation, recurrent_activation,
        cell_params=params,
    )  # fmt: skip
    return unbatch(result, unbatched)
