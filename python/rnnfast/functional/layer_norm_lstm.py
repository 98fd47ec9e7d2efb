"""Stateless LayerNorm LSTM forward, backward and step (one layer, one direction): torchaudio's
RNN-T predictor cell (``torchaudio.models.rnnt._CustomLSTM`` with ``layer_norm=True``)::

    z = W_ih x_t + W_hh h_{t-1}                                (biases only if given)
    i, f, g, o = split(LN_g(z), 4)                             LN over all 4H, weight and bias
    c_t = LN_c(sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g))    LN over H, weight and bias
    h_t = sigmoid(o) * tanh(c_t)

LN(v) = (v - mean) / sqrt(var + 1e-5) * weight + bias (biased variance, ``torch.nn.LayerNorm``).
The norms' parameters are four arrays: ``g_norm_weight`` and ``g_norm_bias`` (4H,),
``c_norm_weight`` and ``c_norm_bias`` (H,). Everything else as :func:`lstm_forward`
(``functional.gated``): the same masks, lengths and token input, the kernels' workspace
(here 12H per step and row) opaque to callers. No projection (``weight_hr``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import as_float_array, optional_float_array
from ._unbatched import as_batch, unbatch
from .gated import _backward, _forward, _functions

__all__ = [
    "LayerNormLSTMGrads",
    "layer_norm_lstm_forward",
    "layer_norm_lstm_backward",
    "layer_norm_lstm_step",
]

NORM_NAMES = ("g_norm_weight", "g_norm_bias", "c_norm_weight", "c_norm_bias")


class LayerNormLSTMGrads(NamedTuple):
    """Gradients from :func:`layer_norm_lstm_backward`; ``dx`` is None with
    ``input_gradient=False``; the biases' are those of the sum before the gates' norm."""

    dx: object
    dh0: np.ndarray
    dc0: np.ndarray
    dweight_ih: np.ndarray
    dweight_hh: np.ndarray
    dbias_ih: np.ndarray
    dbias_hh: np.ndarray
    dg_norm_weight: np.ndarray
    dg_norm_bias: np.ndarray
    dc_norm_weight: np.ndarray
    dc_norm_bias: np.ndarray


def cell_params(norms, weight_ih):
    """The four norm arrays as the kernels take them: one array (10H,) [g weight | g bias | c
    weight | c bias] of weight_ih's dtype; ValueError naming the one of a wrong shape."""
    w_ih = as_float_array("weight_ih", weight_ih)
    if len(norms) != 4:
        raise TypeError(f"norms: expected the 4 arrays {NORM_NAMES}, got {len(norms)}")
    H = w_ih.shape[0] // 4 if w_ih.ndim == 2 else 0
    parts = []
    for name, value, width in zip(NORM_NAMES, norms, (4 * H, 4 * H, H, H)):
        arr = optional_float_array(name, value, w_ih.dtype)
        if arr is None:
            raise TypeError(f"{name}: expected an array, got None")
        if arr.shape != (width,):
            raise ValueError(f"{name}: expected shape ({width},), got shape {arr.shape}")
        parts.append(arr)
    return np.concatenate(parts)


def layer_norm_lstm_forward(
    x,
    weight_ih,
    weight_hh,
    g_norm_weight,
    g_norm_bias,
    c_norm_weight,
    c_norm_bias,
    h0=None,
    c0=None,
    lengths=None,
    *,
    bias_ih=None,
    bias_hh=None,
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
    """Run a LayerNorm LSTM over a whole sequence x (T, B, D): weight_ih (4H, D), weight_hh
    (4H, H) in the gate order i, f, g, o, the norms' parameters, h0 and c0 (B, H);
    ``weight_cache`` as :func:`rnnfast.functional.gru_forward`'s.

    Returns
    -------
    GatedOutput
        ``(y (T, B, H) or None, h_n (B, H), c_n (B, H), workspace or None)``
    """
    norms = (g_norm_weight, g_norm_bias, c_norm_weight, c_norm_bias)
    return _forward(
        "layer_norm_lstm",
        x,
        (weight_ih, weight_hh, bias_ih, bias_hh, None),
        (h0, c0),
        lengths,
        (activation, recurrent_activation),
        (return_sequences, keep_workspace),
        (step_mask, zero_output_for_mask, recurrent_mask, input_mask),
        ids,
        cell_params(norms, weight_ih),
        weight_cache=weight_cache,
    )


def layer_norm_lstm_backward(
    x,
    weight_ih,
    weight_hh,
    g_norm_weight,
    g_norm_bias,
    c_norm_weight,
    c_norm_bias,
    y,
    workspace,
    dy=None,
    dh_n=None,
    dc_n=None,
    *,
    h0,
    c0,
    lengths,
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
    """Backpropagation through time from a :func:`layer_norm_lstm_forward` with
    ``keep_workspace=True``, given what that forward was given (its ``weight_cache`` too).

    Returns
    -------
    LayerNormLSTMGrads
    """
    norms = (g_norm_weight, g_norm_bias, c_norm_weight, c_norm_bias)
    g = _backward(
        "layer_norm_lstm",
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
        cell_params(norms, weight_ih),
        weight_cache=weight_cache,
    )
    d_norms = g[8]
    H = d_norms.shape[0] // 10
    return LayerNormLSTMGrads(
        g[0], g[1], g[2], g[3], g[4], g[5], g[6],
        d_norms[: 4 * H], d_norms[4 * H : 8 * H], d_norms[8 * H : 9 * H], d_norms[9 * H :],
    )  # fmt: skip


def layer_norm_lstm_step(
    x_t,
    h,
    c,
    weight_ih,
    weight_hh,
    g_norm_weight,
    g_norm_bias,
    c_norm_weight,
    c_norm_bias,
    *,
    bias_ih=None,
    bias_hh=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One step for streaming: ``(h_next (B, H), c_next (B, H))`` from x_t (B, D), h and c
    (B, H) (None: zeros); unbatched x_t (D,), h (H,), c (H,) give 1-D states."""
    from .. import _core

    activation, recurrent_activation = _functions(activation, recurrent_activation)
    w_ih = as_float_array("weight_ih", weight_ih)
    dt = w_ih.dtype
    params = cell_params((g_norm_weight, g_norm_bias, c_norm_weight, c_norm_bias), w_ih)
    names = ("h", "c", "weight_hh", "bias_ih", "bias_hh")
    h, c, w_hh, b_ih, b_hh = (
        optional_float_array(n, v, dt) for n, v in zip(names, (h, c, weight_hh, bias_ih, bias_hh))
    )
    x_t, (h, c), unbatched = as_batch(
        as_float_array("x_t", x_t, dt), [("h", h, "h"), ("c", c, "c")], w_hh
    )
    result = _core.gated_step(
        "layer_norm_lstm", x_t, h, c, w_ih, w_hh, b_ih, b_hh, None, activation,
        recurrent_activation, cell_params=params,
    )  # fmt: skip
    return unbatch(result, unbatched)
