"""The recurrent layers one step at a time (streaming inference): the parts of ``layer.step(x_t,
h)`` that every cell shares, as functions of the layer. ``bind_step`` binds the hot path (one
kernel call); ``elman_step`` is the Elman layer's general path (batched or unbatched, carrying a
stateful layer's state; no dropout, nothing kept for backward). A dilated layer's step (its
rings, nn.recurrent.rnn_rings) is one piece of code for every cell, ``step_dilated``: it asks the layer's
``_step_layers`` for one step of the stack."""

from __future__ import annotations

import numpy as np

from ..._validation import (
    as_float_array,
)
from . import dilation as dil
from . import rnn_rings

__all__ = [
    "bind_step",
    "declined",
    "elman_step",
    "elman_step_layers",
    "stack_step_output",
    "step_dilated",
    "stepper_of",
]


def declined(x_t, state):
    """The bound step of a layer without one (see bind_step): declines every call."""
    return None


def bind_step(layer):
    """step()'s hot path: the cell's step bound once on the live parameters
    (``_core.StepFunction``, the cell's ``bind_step``), called with ``(x_t, state)`` and
    giving step()'s result, or None where its arguments are not the hot path's (the general
    path then runs, and names any problem). Bound where one kernel call is the whole step:
    one undilated, unidirectional layer carrying no state of its own; elsewhere a stand-in
    that declines every call. The layer keeps it in ``_stepper``; the setters of the options
    it reads drop it."""
    if (
        layer._num_layers == 1
        and not layer._bidirectional
        and not layer._stateful
        and all(d == 1 for d in layer._dilations)
    ):
        bound = layer.cell.bind_step(layer)
        if bound is not None:
            return bound
    return declined


def stepper_of(layer):
    """The layer's bound step (``_stepper``), bound now if it is not yet."""
    bound = layer._stepper
    if bound is None:
        bound = layer._stepper = bind_step(layer)
    return bound


def elman_step(layer, x_t, h):
    """The Elman layer's ``step`` where the bound step declined (``RNN.step``)."""
    if layer._bidirectional:  # the private attributes: no property calls on this hot path
        raise ValueError(
            "step: a bidirectional layer needs the whole sequence (its reverse direction "
            "starts at the end); use a forward call"
        )
    unbatched = (x_t.ndim if type(x_t) is np.ndarray else np.ndim(x_t)) == 1
    if layer._dilations.count(1) != len(layer._dilations):  # dilated (a C-level count)
        return step_dilated(layer, x_t, h, unbatched)
    if unbatched:
        return _step_unbatched(layer, x_t, h)
    return _step_batched(layer, x_t, h)


def _step_unbatched(layer, x_t, h):
    """step() of one sequence without a batch axis, run as a batch of one."""
    x_t = as_float_array("x_t", x_t, layer.dtype)[None]
    if h is not None:
        h = layer._unbatched_state("h", h, layer.num_layers)
    out, h_next = _step_batched(layer, x_t, h)
    return out[0], h_next[:, 0]


def _step_batched(layer, x_t, h):
    """step() of a batch: x_t (B, input_size), h (num_layers, B, H) or None. The streaming
    hot path: it reads the options' private attributes (no property calls)."""
    if h is None and layer._stateful:
        h = layer._state
    if h is None:
        shape = x_t.shape if type(x_t) is np.ndarray else np.shape(x_t)
        if len(shape) != 2:
            shape = as_float_array("x_t", x_t, layer._dtype).shape  # TypeError if not float
            raise ValueError(
                f"x_t: expected shape (B, input_size) = (B, {layer.input_size}), or "
                f"(input_size,) unbatched, got shape {shape}"
            )
        batch = shape[0]
        zeros = layer._zero_state
        if zeros is None or zeros.shape[1] != batch:
            # never handed out, so never written: reused across calls
            zeros = layer._zero_state = np.zeros(
                (layer._num_layers, batch, layer._hidden_size), dtype=layer._dtype
            )
        h = zeros
    else:
        if type(h) is not np.ndarray or h.dtype is not layer._dtype:
            h = as_float_array("h", h, layer._dtype)
        if h.ndim != 3 or h.shape[0] != layer._num_layers:
            hint = ""
            if h.ndim == 2:
                hint = " (a state without a batch axis goes with x_t (input_size,))"
            raise ValueError(
                f"h: expected shape (num_layers*dirs, B, H) = "
                f"({layer._num_layers}, B, {layer._hidden_size}), got shape {h.shape}{hint}"
            )
    step, weights = layer._step_kernel, layer._step_weights
    if layer._num_layers == 1:  # the streaming hot path: one kernel call, no Python loop
        h1 = step(x_t, h[0], *weights(0), layer._nonlinearity, layer._alphas[0])
        h_next = h1[None]
        if layer._stateful:
            layer._state = h_next
        return h1, h_next
    out, states = layer._step_layers(x_t, h)
    h_next = np.stack(states)
    if layer._stateful:
        layer._state = h_next
    return out, h_next


def elman_step_layers(layer, x_t, previous):
    """One step of every layer, layer k from its state ``previous[k]`` (B, H) (the one
    its recurrence reads: h_{t-d} of a dilated layer): ``(out_t, [h_t of each layer])``.
    The Elman cell's (``RNN._step_layers``), on ``_step_kernel`` (which rnnfast.quantize's
    copies replace); the gated layers' runs their cell's step (``nn.recurrent.gated``)."""
    states, outputs = [], []
    inp = x_t
    step, weights = layer._step_kernel, layer._step_weights
    for k in range(layer._num_layers):
        if layer._input_to_all and k > 0:
            inp = np.concatenate([x_t, inp], axis=1)
        h_k = step(inp, previous[k], *weights(k), layer._nonlinearity, layer._alphas[k])
        states.append(h_k)
        inp = h_k + inp if (layer._residual and k > 0) else h_k
        outputs.append(inp)
    return stack_step_output(layer, inp, outputs), states


def stack_step_output(layer, top, outputs):
    """A step's output: the top layer's, or with ``all_to_output`` every layer's (B, R)
    concatenated, layer 0 first."""
    return np.concatenate(outputs, axis=1) if layer._all_to_output else top


def step_dilated(layer, x_t, h, unbatched, name="h"):
    """step() of a dilated layer, for every cell: each layer steps from the oldest state
    of its ring (h_{t-d}) and pushes its new one. The state ``h`` (the argument ``name``)
    is None (zeros, or a stateful layer's carried rings), the ring form (nn.recurrent.rnn_rings) or
    a plain state every chain starts from; h_next is the ring form (rings (d_k, B, S),
    (d_k, S) unbatched, in the layer's API form)."""
    x_t = as_float_array("x_t", x_t, layer._dtype)
    if unbatched:
        x_t = x_t[None]
    elif x_t.ndim != 2:
        raise ValueError(
            f"x_t: expected shape (B, input_size) = (B, {layer.input_size}), or "
            f"(input_size,) unbatched, got shape {x_t.shape}"
        )
    batch = x_t.shape[0]
    if h is None and layer._stateful and layer._state is not None:
        rings = layer._state
        if rings[0].shape[1] != batch:
            raise ValueError(
                f"x_t: a stateful layer carries a state for a batch of "
                f"{rings[0].shape[1]}, got a batch of {batch} (call reset_state() to start "
                "over)"
            )
    elif h is None:
        rings = rnn_rings.zero_rings(layer, batch)
    else:
        rings = layer._rings_input(name, h, batch, 1, unbatched)
        if rings is None:
            rings = rnn_rings.broadcast_rings(layer, layer._state_input(name, h, batch, unbatched))
    out, states = layer._step_layers(x_t, [ring[0] for ring in rings])
    h_next = [dil.push(ring, s, d) for ring, s, d in zip(rings, states, layer._dilations)]
    if layer._stateful:
        layer._state = h_next
    out = np.ascontiguousarray(out)
    if unbatched:
        out, h_next = out[0], [ring[:, 0] for ring in h_next]
    return out, layer._state_output(h_next)
