"""A layer of the front called as Keras calls it: on a symbolic tensor (a graph node, for
``Model(inputs, outputs)``) or on a NumPy array (computed at once, in inference mode), and the
array-level call and backward that a functional model runs for each node.

A recurrent layer's states travel in Keras's form here, a flat list of (batch, units) arrays
(``[h]``, an LSTM's ``[h, c]``, a Bidirectional's forward states then its backward ones), and
in rnnfast's form in its layer (one (directions, batch, units) array per state, an LSTM's the
pair (h, c)); :func:`keras_states` and :func:`core_states` convert.
"""

from __future__ import annotations

import numpy as np

from ..nn.masking import call_layer
from ._policy import compute_outputs
from ._symbolic import KerasTensor, Node

__all__ = [
    "array_backward",
    "array_call",
    "eager_call",
    "recurrent_backward",
    "recurrent_call",
    "symbolic_call",
]


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_call_keywords(layer, training, mask, symbolic=True):
    if mask is not None and symbolic:
        raise NotImplementedError(
            f"mask: {layer._who()} takes no explicit mask tensor in a functional model; put a "
            "Masking layer (or an Embedding with mask_zero=True) before it and the mask "
            "reaches it, as in Keras (a layer called on arrays takes mask=)"
        )
    if training not in (None, False, True):
        raise TypeError(f"training: expected None, True or False, got {training!r}")


def symbolic_call(layer, inputs, initial_state, training=None, mask=None):
    """``layer(inputs, initial_state=...)`` on symbolic tensors: the layer builds from the input
    shape and the call becomes a node; its output tensor (or Keras's list of them)."""
    _check_call_keywords(layer, training, mask)
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != 1:
            raise ValueError(
                f"inputs: {layer._who()} takes one input tensor, got a list of {len(inputs)}; "
                "pass a recurrent layer's states as initial_state=[...]"
            )
        inputs = inputs[0]
    if not isinstance(inputs, KerasTensor):
        raise TypeError(
            f"inputs: expected a symbolic tensor (an Input or a layer's output), got "
            f"{type(inputs).__name__}"
        )
    states = [] if initial_state is None else _as_list(initial_state)
    if states and not all(isinstance(s, KerasTensor) for s in states):
        raise TypeError(
            "initial_state: with a symbolic input, expected symbolic tensors (another layer's "
            "returned states), got "
            + ", ".join(type(s).__name__ for s in states if not isinstance(s, KerasTensor))
        )
    layer.build(inputs.shape)
    expected = getattr(layer, "num_states", 0) * (2 if hasattr(layer, "forward_layer") else 1)
    if states and len(states) != expected:
        raise ValueError(
            f"initial_state: {layer._who()} expected {expected} state tensors (Keras's order: "
            f"h{', c' if expected % 2 == 0 and layer.num_states == 2 else ''} per direction), "
            f"got {len(states)}"
        )
    shapes = layer.output_shapes(inputs.shape, len(states))
    node = Node(layer, [inputs], states)
    node.outputs = [KerasTensor(shape, node, i) for i, shape in enumerate(shapes)]
    return node.outputs[0] if len(node.outputs) == 1 else list(node.outputs)


def eager_call(layer, x, initial_state, training=None, mask=None):
    """``layer(x)`` on a NumPy array: the output (or Keras's list of outputs) at once, in
    inference mode unless ``training=True``."""
    _check_call_keywords(layer, training, mask, symbolic=False)
    x = np.asarray(getattr(x, "value", x))
    if hasattr(x, "detach"):  # a torch tensor (Keras's backend)
        x = x.detach().cpu().numpy()
    if layer.reads_ids:
        if x.dtype.kind == "f":
            x = x.astype(np.int64)  # Keras's Embedding casts float ids to ints (truncates)
    elif x.dtype.kind in "fiub":
        x = x.astype(layer.dtype, copy=False)  # Keras casts float (and int) data
    # Keras builds a layer called on data for the data's shape: a stateful layer's batch
    batch = x.shape[0] if getattr(layer, "stateful", False) and not layer.built else None
    layer.build((batch, *x.shape[1:]))
    valid = None if mask is None else layer.call_mask(x, mask)
    states = [] if initial_state is None else _as_list(initial_state)
    core = layer.layer
    was = core.training
    core.train(bool(training))
    try:
        outputs, _, _ = layer.run(x, states, valid, None, layer._who())
    finally:
        core.train(was)
    outputs = compute_outputs(outputs, layer.dtype_policy)  # bfloat16 for mixed_bfloat16
    return outputs[0] if len(outputs) == 1 else outputs


# ---- the array-level call of a node: one input, one output --------------------------------------


def array_call(layer, x, states, valid, suspect, who):
    """A layer with one input and one output: ``([out], [valid], suspect)`` through its rnnfast
    layer, the padding carried (``nn.masking``)."""
    if states:
        raise TypeError(f"initial_state: {layer._who()} is not a recurrent layer; it takes none")
    out, valid, suspect = call_layer(layer.layer, x, valid, suspect, who)
    return [out], [valid], suspect


def array_backward(layer, d_outputs):
    """``(dx, [])`` for ``d_outputs = [d_out]``."""
    result = layer.layer.backward(d_outputs[0])
    return (result[0] if isinstance(result, tuple) else result), []


# ---- recurrent layers: Keras's outputs and states ----------------------------------------------


def keras_states(layer, states):
    """rnnfast's states (one (dirs, B, H) array per state) as Keras's flat list: the forward
    direction's states, then the backward direction's."""
    states = list(states)
    dirs = states[0].shape[0]
    return [np.ascontiguousarray(s[d]) for d in range(dirs) for s in states]


def core_states(layer, states, who, dtype):
    """Keras's flat list of states as the ``h0`` of the rnnfast layer (an LSTM's pair)."""
    core = layer.layer
    n, dirs = layer.num_states, core.num_directions
    if len(states) != n * dirs:
        names = (
            ("[h]" if n == 1 else "[h, c]")
            if dirs == 1
            else ("[h_fw, h_bw]" if n == 1 else "[h_fw, c_fw, h_bw, c_bw]")
        )
        raise ValueError(
            f"initial_state: {who} expected {n * dirs} arrays {names}, got {len(states)}"
        )
    arrays = [np.asarray(s, dtype=dtype) for s in states]  # Keras casts them as the inputs
    stacked = [np.stack([arrays[d * n + i] for d in range(dirs)]) for i in range(n)]
    return stacked[0] if n == 1 else tuple(stacked)


def recurrent_call(layer, x, states, valid, suspect, who):
    """A recurrent layer's call: Keras's outputs (the output, or a Bidirectional's two with
    ``merge_mode=None``, then the states with ``return_state``), their valid masks, suspect."""
    core = layer.layer
    kwargs = {}
    if states:
        kwargs["h0"] = core_states(layer, states, who, core.dtype)
    out, out_valid, suspect = call_layer(core, x, valid, suspect, who, **kwargs)
    sequences = 2 if layer.output_merge_mode is None else 1
    if core.return_state:
        parts = list(out)
        outputs = parts[:sequences] + keras_states(layer, parts[sequences:])
    else:
        outputs = _as_list(out) if sequences == 2 else [out]
    batch = outputs[0].shape[0]
    layer._graph_cache = (batch, bool(states))
    return outputs, [out_valid] * sequences + [None] * (len(outputs) - sequences), suspect


def recurrent_backward(layer, d_outputs):
    """``(dx, d_initial_state)`` of a recurrent call from the gradients of its Keras outputs
    (None for an output that did not reach the loss)."""
    core = layer.layer
    batch, had_states = layer._graph_cache
    sequences = 2 if layer.output_merge_mode is None else 1
    d_seq, d_states = d_outputs[:sequences], d_outputs[sequences:]
    d_out = list(d_seq) if sequences == 2 else d_seq[0]
    dh_n = None
    if any(d is not None for d in d_states):
        zeros = np.zeros((batch, layer.units), dtype=core.dtype)
        filled = [zeros if d is None else np.asarray(d, dtype=core.dtype) for d in d_states]
        dh_n = core_states(layer, filled, "d_states", core.dtype)
    dx, dh0 = core.backward(d_out, dh_n)
    if not had_states:
        return dx, []
    return dx, keras_states(layer, _as_list(dh0) if layer.num_states > 1 else [dh0])
