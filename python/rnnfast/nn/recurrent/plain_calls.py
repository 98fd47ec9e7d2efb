"""A layer's call on the plain stack (``stack.plain_forward`` / ``plain_backward``, the torch
bridge's fast path), for the calls in which nothing surrounds the cells: no lengths, masks,
dropout, dilation, reversal, residual or Keras forms, one direction, time-major input, the
cells as PyTorch defines them. The general path (options, masks, order, records, one kernel
call per layer through the cell's description) costs 60-100 us of Python per call whatever its
size: at T = 1, B = 32, H = 256 a GRU's forward took 0.34 ms through it against 0.23 ms in
the kernel (AVX-512, one thread). Here one call into the kernels per layer, with the layer's
packed weights (its ``_weight_cache``), and the same results, forms and errors: arguments
the fast path does not take go to the general path, which checks and names them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cells import ELMAN, GRU_SPEC, LSTM_SPEC
from .rnn_forms import output_gradient
from .stack import PlainCell, plain_backward, plain_forward

__all__ = [
    "ELMAN_CELLS",
    "GRU_CELL",
    "LSTM_CELL",
    "PlainCall",
    "nothing_around_cells",
    "plain_backward_call",
    "plain_forward_call",
]

# the plain stack's cells, as the NumPy layers and the torch bridge run them
ELMAN_CELLS = {f: PlainCell(ELMAN, f) for f in ("tanh", "relu")}
GRU_CELL, LSTM_CELL = PlainCell(GRU_SPEC), PlainCell(LSTM_SPEC)
_PYTORCH_GATES = {"activation": "tanh", "recurrent_activation": "sigmoid"}


class PlainCall(NamedTuple):
    """A training forward's record for its backward (the layer's ``_cache``)."""

    cell: PlainCell
    records: list
    weights: list
    y_shape: tuple


def nothing_around_cells(layer):
    """Whether a call adds nothing around the layer's cells: no reversal, residual,
    input_to_all or all_to_output, PyTorch's forms (not Keras's), the layer's own float32
    products. Both fast paths ask it (this module's, and RNN.__call__'s one step on the
    bound step). The options' own attributes (rnn_options.option), read at each call: any
    setter may change them, and the properties cost a call each."""
    return not (
        layer._go_backwards
        or layer._residual
        or layer._return_sequences is not None  # Keras's forms
        or layer._return_state is not None
        or layer._input_to_all
        or layer._all_to_output
        or layer._precision != "float32"
    )


def _plain_cell(layer):
    """The plain stack's cell of the layer's options, or None where they need the general
    path."""
    if (
        not layer._plain_stack
        or not nothing_around_cells(layer)
        or layer._bidirectional
        or layer._stateful
        or layer._merge_mode is None  # Keras's Bidirectional form of the output
        or layer.batch_first
        or layer._dilations.count(1) != len(layer._dilations)
    ):
        return None
    if layer.training and (
        layer._input_dropout > 0.0
        or layer._recurrent_dropout > 0.0
        or (layer._dropout > 0.0 and layer._num_layers > 1)
    ):
        return None
    spec = layer.cell
    if spec is ELMAN:
        return ELMAN_CELLS.get(layer._nonlinearity) if set(layer._alphas) == {1.0} else None
    options = layer._cell_options()
    if spec is GRU_SPEC:
        return GRU_CELL if options == {"reset_after": True, **_PYTORCH_GATES} else None
    if spec is LSTM_SPEC and spec.forms(layer) is None and options == _PYTORCH_GATES:
        return LSTM_CELL
    return None


def _layer_weights(layer, cell):
    """Per stacked layer, (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr) as the plain
    stack takes them (None where the layer has none)."""
    p, lstm = layer._params, cell.spec is LSTM_SPEC
    out = []
    for k in range(layer._num_layers):
        w_ih, w_hh, b_ih, b_hh = layer._names[k]
        w_hr = cell.spec._projection(layer, k) if lstm else None
        out.append((p[w_ih], p[w_hh], b_ih and p[b_ih], b_hh and p[b_hh], w_hr))
    return out


def _states(layer, cell, name, value, batch):
    """A state argument (h0, dh_n) as the plain stack takes it: ``(h, c)``, each (L, B, ·)
    C-contiguous or None (the layer's own checks, ``_state_input``)."""
    joined = layer._state_input(name, value, batch, False)
    if joined is None:
        return None, None
    if cell.spec.num_states == 1:
        return np.ascontiguousarray(joined), None
    h, c = cell.spec.split_state(layer, joined)
    return np.ascontiguousarray(h), np.ascontiguousarray(c)


def plain_forward_call(layer, x, h0):
    """``layer(x, h0)`` on the plain stack: PyTorch's ``(y, h_n)`` (the LSTM's h_n the pair
    (h, c)), or None where the call is not one it takes. In training the output is read-only
    and the layer keeps a :class:`PlainCall` for one backward."""
    cell = _plain_cell(layer)
    if (
        cell is None
        or x.dtype != layer._dtype
        or not x.flags.c_contiguous
        or x.shape[0] == 0
        or x.shape[1] == 0
        or x.shape[2] != layer._input_size
    ):
        return None
    batch, training = x.shape[1], layer.training
    h, c = _states(layer, cell, "h0", h0, batch)
    if training and not layer._inputs_guarded:
        # backward reads the inputs: copies, so that a later in-place change of the
        # caller's arrays cannot silently alter the gradients (as the general path does)
        x, h, c = (None if a is None else a.copy() for a in (x, h, c))
    weights = _layer_weights(layer, cell)
    caches = [layer._weight_cache(k, 0) for k in range(layer._num_layers)]
    y, h_n, c_n, records = plain_forward(cell, x, h, c, weights, training, caches)
    if training:
        layer._cache = PlainCall(cell, records, weights, y.shape)
        y = y.view()
        y.flags.writeable = False  # backward reads it
    else:
        layer._cache = None
    return y, (h_n if c_n is None else (h_n, c_n))


def plain_backward_call(layer, call, d_output, dh_n, input_gradient):
    """Backward of a :func:`plain_forward_call` (``call`` its record): ``(dx, dh0)`` as the
    general backward gives them, the parameter gradients added into ``layer.grads``. Checks
    first: a failed call changes nothing."""
    cell, batch = call.cell, call.y_shape[1]
    d_output = output_gradient(layer, d_output, layer._options(), call.y_shape, False, False)
    dh, dc = _states(layer, cell, "dh_n", dh_n, batch)
    caches = [layer._weight_cache(k, 0) for k in range(layer._num_layers)]
    dx, dh0, dc0, grads = plain_backward(
        cell, call.records, call.weights, d_output, dh, dc, input_gradient, caches
    )
    for k, layer_grads in enumerate(grads):
        projection = cell.spec._projection_name(layer, k) if dc0 is not None else None
        names = (*layer._names[k], projection)
        for name, g in zip(names, layer_grads):
            if name is not None and g is not None:
                layer.grads[name] += g
    layer._cache = None
    return dx, (dh0 if dc0 is None else (dh0, dc0))
