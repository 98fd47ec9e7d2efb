"""ONNX's recurrent nodes as the operator's spec writes them, not only as torch exports them.

``_onnx_load`` reads ``RNN`` / ``GRU`` / ``LSTM`` nodes; this module holds what a node written
straight from the spec (ONNX's own node tests, tf2onnx / Keras exports, ``onnx.helper``) adds:

- ``layout=1``: X (B, T, D), Y (B, T, dirs, H), Y_h / Y_c and initial_h / initial_c (B, dirs, H);
- ``Y`` as a graph output in ONNX's own layout (T, dirs, B, H) (or (B, T, dirs, H), or any
  transpose of it), and the final states in the node's layout;
- ``sequence_lens`` as an initializer (lengths fixed by the graph) and ``initial_h`` /
  ``initial_c`` as initializers (constant initial states of a fixed batch);
- weights given as graph inputs (ONNX's node tests feed W, R and B at run time): bound to
  arrays at load time with ``load(..., initializers={name: array})``.

A model read from such a graph is an ``OnnxModel`` whose call takes and returns the graph's
arrays in the graph's own layouts (what onnxruntime takes and returns); ``OnnxModel.run``
takes onnxruntime's ``(output_names, feeds)``. This module imports nothing of ``_onnx_load``:
the reader hands it arrays and names.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "STATE_AXES",
    "bind_initializers",
    "constant_lengths",
    "constant_state",
    "node_axes",
    "node_layout",
    "raw_y",
    "state_in",
    "state_out",
]

# the axes of a node's outputs and initial states, per layout (spec: "layout")
_Y_AXES = {0: ("T", "D", "B", "H"), 1: ("B", "T", "D", "H")}
STATE_AXES = {0: ("D", "B", "H"), 1: ("B", "D", "H")}


def node_layout(attrs, cell, fail):
    """The node's ``layout`` attribute: 0 (time-major, the default) or 1 (batch-major)."""
    layout = attrs.get("layout", 0)
    if layout not in (0, 1):
        fail(f"layout={layout}: the {cell} op's layout is 0 (time-major) or 1 (batch-major)")
    return layout


def node_axes(layout):
    """The axes a node of ``layout`` reads X in and writes Y and its final states in."""
    x = ("T", "B", "F") if layout == 0 else ("B", "T", "F")
    return x, _Y_AXES[layout], STATE_AXES[layout]


def constant_lengths(value, batch, fail):
    """``sequence_lens`` given as a constant (an initializer): the lengths the graph fixes, a
    tuple of ints, one per sequence of a batch of ``batch`` (None: not fixed by X)."""
    if value.dtype.kind not in "iu" or value.ndim != 1:
        fail(
            f"its sequence_lens is a constant of dtype {value.dtype} and shape {value.shape}, "
            "expected int32 (batch_size,)"
        )
    lengths = [int(v) for v in value]
    if any(v < 0 for v in lengths):
        fail(f"its sequence_lens {lengths} has negative lengths")
    if batch is not None and batch != len(lengths):
        fail(f"its sequence_lens has {len(lengths)} lengths for a batch of {batch}")
    return tuple(lengths)


def constant_state(value, layout, dirs, hidden, what, fail):
    """``initial_h`` / ``initial_c`` given as a constant: the array in rnnfast's (dirs, B, H),
    or None when it is zeros (rnnfast's default start)."""
    value = np.asarray(value)
    if value.dtype.kind != "f" or value.ndim != 3:
        fail(
            f"its {what} is a constant of dtype {value.dtype} and shape {value.shape}, "
            f"expected floats {STATE_AXES[layout]}"
        )
    if layout == 1:
        value = value.transpose(1, 0, 2)
    if value.shape[0] != dirs or value.shape[2] != hidden:
        fail(
            f"its {what} has shape {value.shape}, expected ({dirs}, batch, {hidden}) "
            f"in the axes {STATE_AXES[layout]}"
        )
    if not np.any(value):
        return None
    return np.ascontiguousarray(value)


def bind_initializers(model, initializers, onnx):
    """A copy of ``model`` whose graph inputs named in ``initializers`` are initializers of the
    given arrays (a graph that takes its weights as inputs, as ONNX's node tests do)."""
    if not isinstance(initializers, dict):
        raise TypeError(
            f"initializers: expected a dict of graph input names to arrays, got "
            f"{type(initializers).__name__}"
        )
    names = [i.name for i in model.graph.input]
    unknown = sorted(set(initializers) - set(names))
    if unknown:
        raise ValueError(
            f"initializers: {unknown} are not inputs of the graph (its inputs: {names})"
        )
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = [i for i in out.graph.input if i.name not in initializers]
    for name, array in initializers.items():
        array = np.asarray(array)
        if array.dtype.kind not in "fiub":
            raise TypeError(f"initializers[{name!r}]: a numeric array, got dtype {array.dtype}")
        out.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    del out.graph.input[:]
    out.graph.input.extend(kept)
    return out


# ---- what OnnxModel does with the graph's layouts ---------------------------------------------


def raw_y(y, axes, batch_first, go_backwards, dirs, hidden):
    """An RNN's output sequence ``y`` (its (T, B, dirs*H), (B, T, dirs*H) when batch_first) as
    the ONNX node's Y in the graph's ``axes``: a transpose of ("T", "D", "B", "H"), of ("T",
    "B", "H") (squeezed, one direction) or of ("T", "B", "F") (reshaped, F = dirs*H). A
    go_backwards layer's output, in the order it ran, is flipped back into time order (ONNX's
    reverse direction writes Y[t] at step t; padding stays past each length)."""
    time = 1 if batch_first else 0
    if go_backwards:
        y = np.flip(y, axis=time)
    have = ("B", "T") if batch_first else ("T", "B")
    if "D" in axes:
        y = y.reshape(y.shape[:2] + (dirs, hidden))
        have += ("D", "H")
    else:
        have += ("F",) if "F" in axes else ("H",)
    return np.ascontiguousarray(y.transpose([have.index(a) for a in axes]))


def state_out(state, axes):
    """A final state (dirs, B, H) in the graph's ``axes`` (None: as it is; without "D": one
    direction's, squeezed)."""
    if axes is None:
        return state
    have = STATE_AXES[0]
    if "D" not in axes:
        state, have = state[0], have[1:]
    return np.ascontiguousarray(state.transpose([have.index(a) for a in axes]))


def state_in(given, spec, layout, shape, dtype):
    """The initial state an rnnfast layer takes, from the graph's: ``spec`` is "input" (the
    array the call was given, in the graph's ``layout``), a constant (dirs, B, H) array from the
    graph, or None (zeros of ``shape``)."""
    if isinstance(spec, str):
        if given is None:
            return np.zeros(shape, dtype)
        given = np.asarray(given)
        if layout == 1:
            if given.ndim != 3:
                raise ValueError(
                    f"h0: expected the graph's (batch, num_directions, hidden) array, got shape "
                    f"{given.shape}"
                )
            given = given.transpose(1, 0, 2)
        return given
    if spec is None:
        return np.zeros(shape, dtype)
    if spec.shape[1] != shape[1]:
        raise ValueError(
            f"x: a batch of {shape[1]}, but the graph's constant initial state is for a batch "
            f"of {spec.shape[1]}"
        )
    return spec.astype(dtype, copy=False)
