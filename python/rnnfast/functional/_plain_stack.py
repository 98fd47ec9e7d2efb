"""The PyTorch bridge's plain stack: unidirectional layers over a whole batch of equal lengths,
no dropout between layers, straight on the kernels (``_core``), forward and backward.

``rnnfast.torch`` runs the modules it wraps here whenever their call is this simple (most
training loops: the char-RNN's one name at a time among them) and through the general layer
(``rnnfast.nn``) otherwise. The general layer's per-call machinery (the API forms, the state
joins, sorting by lengths, the mask and option plumbing, gradient accumulation) costs more
than the kernels themselves at small T and B; nothing of it applies here. NumPy only (torch
stays in ``rnnfast.torch``); every shape and dtype is checked by the kernels themselves.

Arrays in processing order: x (T, B, D) time-major, C-contiguous; the weights of layer k as
the tuple ``(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)`` (biases and weight_hr None
when absent), C-contiguous.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _core

__all__ = ["PlainCell", "plain_backward", "plain_forward"]


class PlainCell(NamedTuple):
    """Which kernels run and how: ``kind`` "elman", "gru" (PyTorch's form, reset_after) or
    "lstm"; ``nonlinearity`` the Elman cell's "tanh" or "relu" (the gated cells run PyTorch's
    tanh and sigmoid)."""

    kind: str
    nonlinearity: str = "tanh"


class _LayerRecord(NamedTuple):
    """What a layer's backward reads: its input, initial states, output and workspace."""

    x: np.ndarray
    h0: object
    c0: object
    y: np.ndarray
    workspace: object


def _state(s, k):
    return None if s is None else s[k]


def plain_forward(cell, x, h0, c0, weights, keep):
    """The stack over x: ``(y (T, B, R), h_n (L, B, R), c_n (L, B, H) or None, records)``.

    h0 (L, B, R) and c0 (L, B, H) (the LSTM's) or None for zeros, C-contiguous. ``keep``:
    training, the records for :func:`plain_backward` (else None)."""
    layers = len(weights)
    h_n, c_n, records = [], [], [] if keep else None
    inp = x
    for k in range(layers):
        w_ih, w_hh, b_ih, b_hh, w_hr = weights[k]
        h0_k, c0_k = _state(h0, k), _state(c0, k)
        if cell.kind == "elman":
            y, h = _core.rnn_forward(
                inp, h0_k, w_ih, w_hh, b_ih, b_hh, None, cell.nonlinearity, 1.0, True
            )
            c, workspace = None, None
        else:
            y, h, c, workspace = _core.gated_forward(
                cell.kind, inp, h0_k, c0_k, w_ih, w_hh, b_ih, b_hh, w_hr, None, "tanh",
                "sigmoid", True, keep,
            )  # fmt: skip
        if keep:
            records.append(_LayerRecord(inp, h0_k, c0_k, y, workspace))
        h_n.append(h)
        c_n.append(c)
        inp = y
    # one layer's states gain their axis as views, a stack's are stacked
    h_n = h_n[0][None] if layers == 1 else np.stack(h_n)
    if cell.kind == "lstm":
        c_n = c_n[0][None] if layers == 1 else np.stack(c_n)
    else:
        c_n = None
    return inp, h_n, c_n, records


def plain_backward(cell, records, weights, dy, dh_n, dc_n, input_gradient):
    """Gradients of one :func:`plain_forward` from those of y (T, B, R), h_n and c_n (each
    None for zeros): ``(dx (T, B, D) or None without input_gradient, dh0 (L, B, R), dc0 (L, B,
    H) or None, grads)``, grads[k] the tuple ``(dweight_ih, dweight_hh, dbias_ih, dbias_hh,
    dweight_hr)`` of layer k (None where the layer has no such parameter), each a new array."""
    layers = len(weights)
    dh0, dc0, grads = [None] * layers, [None] * layers, [None] * layers
    d_out = dy
    for k in reversed(range(layers)):
        r = records[k]
        w_ih, w_hh, b_ih, _, w_hr = weights[k]
        needed = input_gradient or k > 0  # a lower layer reads this one's dx as its dy
        if cell.kind == "elman":
            dx, dh0[k], dw_ih, dw_hh, db = _core.rnn_backward(
                r.x, r.h0, w_ih, w_hh, r.y, d_out, _state(dh_n, k), None, cell.nonlinearity,
                1.0, input_gradient=needed,
            )  # fmt: skip
            # one gradient for both biases (they enter the same sum); torch gets two tensors
            biases = (None, None) if b_ih is None else (db, db.copy())
            grads[k] = (dw_ih, dw_hh, *biases, None)
        else:
            dx, dh0[k], dc0[k], dw_ih, dw_hh, db_ih, db_hh, dw_hr = _core.gated_backward(
                cell.kind, r.x, r.h0, r.c0, w_ih, w_hh, w_hr, r.y, r.workspace, d_out,
                _state(dh_n, k), _state(dc_n, k), None, "tanh", "sigmoid", needed,
            )  # fmt: skip
            biases = (None, None) if b_ih is None else (db_ih, db_hh)
            grads[k] = (dw_ih, dw_hh, *biases, dw_hr)
        d_out = dx
    dh0 = dh0[0][None] if layers == 1 else np.stack(dh0)
    dc0 = None if cell.kind != "lstm" else dc0[0][None] if layers == 1 else np.stack(dc0)
    return d_out, dh0, dc0, grads
