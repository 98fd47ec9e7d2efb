"""The GRU and LSTM forward and step with quantized weights (``rnnfast.quantize``'s inference
copies): the products in int8 (int32 sums) or bf16 (float32 sums), the gates, the cell's
epilogue and the states in float32, by the float kernels' own cell code.

The weights are ``_core.QuantizedMatrix`` made with ``gates=G`` (3 or 4): their rows, in
PyTorch's gate order as given, are packed in the kernels' gate layout, where a block of 16
hidden units holds every gate of its units. The GRU with ``reset_after=False`` reads ``W_hn``
on its own (it multiplies ``r * h``): ``weight_hh`` is then the r and z rows (``gates=2``) and
``weight_hn`` the n rows (``gates=1``). The LSTM's projection ``weight_hr`` has ``gates=1``.
"""

from __future__ import annotations

import numpy as np

from .. import _core
from .._validation import as_float_array, check_choice, check_lengths, optional_float_array
from ._batch import check_batch, longest_first, take
from .gated import ACTIVATIONS, RECURRENT_ACTIVATIONS, GatedOutput

__all__ = ["QUANTIZED_CELLS", "quantized_gated_forward", "quantized_gated_step"]

# the kernels' cell names: the GRU in PyTorch's form and Keras's reset_after=False, the LSTM
QUANTIZED_CELLS = ("gru", "gru_reset_before", "lstm")


def quantized_gated_forward(
    cell,
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    c0=None,
    lengths=None,
    *,
    weight_hn=None,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
    return_sequences=True,
):
    """One quantized GRU or LSTM layer, one direction, over a sequence.

    Parameters
    ----------
    cell : {"gru", "gru_reset_before", "lstm"}
    x : (T, B, D) float32
    weight_ih, weight_hh, weight_hn, weight_hr : _core.QuantizedMatrix
        As the module's docstring says; ``weight_hn`` only for ``"gru_reset_before"``.
    bias_ih, bias_hh : (G*H,) float32 or None
        PyTorch's two biases, in its gate order.
    h0 : (B, R) float32 or None; c0 : (B, H) float32 or None (the LSTM's)
    lengths : (B,) ints or None
        As :func:`gru_forward`'s (any order: the batch is sorted longest first for the
        kernel and back).

    Returns
    -------
    GatedOutput
        ``y`` (T, B, R) or None, ``h_n`` (B, R), ``c_n`` (B, H) or None; no workspace
        (inference only).
    """
    cell = check_choice("cell", cell, QUANTIZED_CELLS)
    activation = check_choice("activation", activation, ACTIVATIONS)
    recurrent_activation = check_choice(
        "recurrent_activation", recurrent_activation, RECURRENT_ACTIVATIONS
    )
    x = as_float_array("x", x, np.float32)
    if x.ndim != 3:
        raise ValueError(f"x: expected 3 dimensions (T, B, D), got shape {x.shape}")
    steps, batch = x.shape[0], x.shape[1]
    h0 = optional_float_array("h0", h0, np.float32)
    c0 = optional_float_array("c0", c0, np.float32)
    bias_ih = optional_float_array("bias_ih", bias_ih, np.float32)
    bias_hh = optional_float_array("bias_hh", bias_hh, np.float32)
    order, lengths = longest_first(check_lengths(lengths, steps, batch))
    if order is not None:
        check_batch("h0", h0, 0, batch, "(B, R)")
        check_batch("c0", c0, 0, batch, "(B, H)")
        x, h0, c0 = take(x, order, 1), take(h0, order, 0), take(c0, order, 0)
    y, h_n, c_n = _core.quantized_gated_forward(
        cell, x, h0, c0, weight_ih, weight_hh, weight_hn, weight_hr, bias_ih, bias_hh, lengths,
        activation, recurrent_activation, bool(return_sequences),
    )  # fmt: skip
    if order is not None:
        inverse = np.argsort(order)
        y, h_n, c_n = take(y, inverse, 1), take(h_n, inverse, 0), take(c_n, inverse, 0)
    return GatedOutput(y, h_n, c_n, None)


def quantized_gated_step(
    cell,
    x_t,
    h,
    c,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    weight_hn=None,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One step of :func:`quantized_gated_forward` for streaming: ``h_next`` (B, R) from x_t
    (B, D) and h (B, R), or for the LSTM ``(h_next, c_next (B, H))`` from c (B, H) too (a
    sequence of one step: the same arithmetic as the forward's)."""
    x_t = as_float_array("x_t", x_t, np.float32)
    if x_t.ndim != 2:
        raise ValueError(f"x_t: expected 2 dimensions (B, D), got shape {x_t.shape}")
    out = quantized_gated_forward(
        cell, x_t[None], weight_ih, weight_hh, bias_ih, bias_hh,
        as_float_array("h", h, np.float32), c, weight_hn=weight_hn, weight_hr=weight_hr,
        activation=activation, recurrent_activation=recurrent_activation, return_sequences=False,
    )  # fmt: skip
    return out.h_n if out.c_n is None else (out.h_n, out.c_n)
