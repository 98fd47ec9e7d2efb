"""Weights in and out of PyTorch's ``torch.nn.RNN`` / ``GRU`` / ``LSTM`` (and its one-step
``GRUCell`` / ``LSTMCell``) and Keras's ``SimpleRNN`` / ``GRU`` / ``LSTM``.

PyTorch and rnnfast share one layout (``weight_ih_l{k}[_reverse]`` of shape (G*H, D_k) in
PyTorch's gate order, and so on), so converting is copying. Keras stores the transposes,
``kernel`` (D, G*H) and ``recurrent_kernel`` (H, G*H), with the gate blocks in its own order
(the cell's ``gate_orders``: the GRU's z, r, h where PyTorch has r, z, n; the LSTM's i, f, c, o
are PyTorch's i, f, g, o), and its biases differ:

- SimpleRNN, LSTM and GRU with ``reset_after=False``: one bias vector where PyTorch has two.
  ``b_ih + b_hh`` enter the same sum there, so Keras -> PyTorch puts Keras's bias in
  ``bias_ih`` and zeros in ``bias_hh``, and PyTorch -> Keras adds them.
- GRU with ``reset_after=True``: ``bias`` (2, 3H), the input bias (row 0, ``bias_ih``) and the
  recurrent bias (row 1, ``bias_hh``): ``b_hn`` is multiplied by the reset gate, so the two
  cannot be summed.

Every conversion is exact: the values are copied, never rounded (but for PyTorch -> Keras's
sums).

torch and keras are imported only inside the functions that need them.
"""

from __future__ import annotations

import numpy as np

from ..nn.recurrent.cells import CELLS, ELMAN, GRU_SPEC, LSTM_SPEC, cell_by
from ..nn.recurrent.gated_cells import GRUCell, LSTMCell
from ..nn.recurrent.rnn import RNN
from ..nn.recurrent.rnn_torch import from_torch as _from_torch
from ..nn.recurrent.rnn_torch import to_torch

__all__ = [
    "from_torch",
    "to_torch",
    "keras_simple_rnn_to_state_dict",
    "state_dict_to_keras_simple_rnn",
    "keras_gru_to_state_dict",
    "state_dict_to_keras_gru",
    "keras_lstm_to_state_dict",
    "state_dict_to_keras_lstm",
    "load_keras",
    "keras_weights",
]


def _to_numpy(value):
    """A torch tensor, Keras variable or array-like as a NumPy array (no autograd, on the CPU)."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return np.asarray(value.numpy())
    return np.asarray(value)


def _suffix(layer_index, reverse):
    return f"_l{int(layer_index)}" + ("_reverse" if reverse else "")


def _num_directions(layer):
    return 2 if getattr(layer, "bidirectional", False) else 1


# ---- PyTorch -------------------------------------------------------------------------------------


def from_torch(module, cls=None):
    """A new rnnfast layer with the configuration and the weights of a ``torch.nn.RNN``,
    ``GRU``, ``LSTM``, ``GRUCell`` or ``LSTMCell``.

    Parameters
    ----------
    module : torch.nn.RNN, GRU, LSTM, GRUCell or LSTMCell
        Any device; its parameters must be float32 or float64 (the new layer's dtype).
    cls : type, optional
        The layer class to build (by default ``rnnfast.RNN``, ``GRU``, ``LSTM``, ``GRUCell`` or
        ``LSTMCell`` after the module's class); ``RNN.from_torch`` passes its own.

    Returns
    -------
    rnnfast.RNN, GRU, LSTM, GRUCell or LSTMCell
        As :meth:`rnnfast.RNN.from_torch`, which this is for ``cls=None``.
    """
    if cls is None:
        kind = type(module).__mro__
        names = [c.__name__ for c in kind if c.__module__.startswith("torch.nn")]
        # the cell registry (nn.recurrent.cells): torch's module or one-step module of a cell
        name = names[0] if names else ""
        spec, one_step = cell_by(torch_name=name), cell_by(torch_cell_name=name)
        cls = (spec and spec.layer_class) or (one_step and one_step.cell_class) or RNN
    if cls in (GRUCell, LSTMCell) or issubclass(cls, (GRUCell, LSTMCell)):
        return cls.from_torch(module)
    return _from_torch(module, cls)


# ---- Keras ---------------------------------------------------------------------------------------

_ACTIVATIONS = ("tanh", "relu")
_RECURRENT_ACTIVATIONS = ("sigmoid", "hard_sigmoid")


def _cell_of(layer):
    """The cell description of an rnnfast layer (``nn.recurrent.cells``)."""
    return getattr(layer, "cell", ELMAN)


def _keras_cell_of(layer):
    """The cell of a layer Keras has a layer for; ValueError naming one it has none of (a
    ``DeepTransitionRNN``: its transition would be dropped)."""
    cell = _cell_of(layer)
    if not cell.keras_name:
        raise ValueError(
            f"layer: Keras has no layer of a {type(layer).__name__}'s cell (its parameters "
            "are not a SimpleRNN's, GRU's or LSTM's)"
        )
    return cell


def _gate_blocks(a, num_gates, perm, axis):
    """``a`` with its ``num_gates`` blocks along ``axis`` taken in the order ``perm`` (a copy)."""
    if num_gates == 1:
        return np.array(a)
    parts = np.split(a, num_gates, axis=axis)
    return np.concatenate([parts[i] for i in perm], axis=axis)


def _keras_bias_shape(cell, H, reset_after):
    G = cell.num_gates
    return (2, G * H) if cell.keras_name == "GRU" and reset_after else (G * H,)


def _from_keras(cell, weights, layer_index, reverse, reset_after=True):
    """Keras weights ``[kernel, recurrent_kernel(, bias)]`` of a ``cell`` layer as
    PyTorch-layout state_dict entries of one layer direction (see :mod:`rnnfast.io.interop`)."""
    weights = [_to_numpy(w) for w in weights]
    if len(weights) not in (2, 3):
        raise ValueError(
            "weights: expected [kernel, recurrent_kernel(, bias)] (2 or 3 arrays), "
            f"got {len(weights)} arrays"
        )
    G = cell.num_gates
    gh = "H" if G == 1 else f"{G}H"
    kernel, recurrent = weights[0], weights[1]
    if kernel.ndim != 2 or kernel.shape[1] % G:
        raise ValueError(f"kernel: expected shape (D, {gh}), got shape {kernel.shape}")
    H = kernel.shape[1] // G
    if recurrent.shape != (H, G * H):
        raise ValueError(
            f"recurrent_kernel: expected shape (H, {gh}) = {(H, G * H)}, got shape "
            f"{recurrent.shape}"
        )
    perm = cell.gate_permutation("keras")
    sfx = _suffix(layer_index, reverse)
    out = {
        f"weight_ih{sfx}": np.ascontiguousarray(_gate_blocks(kernel, G, perm, 1).T),
        f"weight_hh{sfx}": np.ascontiguousarray(_gate_blocks(recurrent, G, perm, 1).T),
    }
    if len(weights) == 3:
        bias = weights[2]
        expected = _keras_bias_shape(cell, H, reset_after)
        if bias.shape != expected:
            what = f"(2, {gh})" if len(expected) == 2 else f"({gh},)"
            form = f" (reset_after={reset_after})" if cell.keras_name == "GRU" else ""
            raise ValueError(
                f"bias: expected shape {what} = {expected}{form}, got shape {bias.shape}"
            )
        if len(expected) == 2:  # GRU reset_after=True: the input and the recurrent bias
            out[f"bias_ih{sfx}"] = _gate_blocks(bias[0], G, perm, 0)
            out[f"bias_hh{sfx}"] = _gate_blocks(bias[1], G, perm, 0)
        else:
            out[f"bias_ih{sfx}"] = _gate_blocks(bias, G, perm, 0)
            out[f"bias_hh{sfx}"] = np.zeros_like(out[f"bias_ih{sfx}"])
    return out


def _to_keras(cell, state_dict, layer_index, reverse, reset_after=True):
    """One layer direction of a PyTorch-layout state_dict as Keras weights of a ``cell``
    layer: ``[kernel, recurrent_kernel(, bias)]``."""
    sfx = _suffix(layer_index, reverse)
    for key in (f"weight_ih{sfx}", f"weight_hh{sfx}"):
        if key not in state_dict:
            raise ValueError(f"state_dict: missing key {key!r}")
    if f"weight_hr{sfx}" in state_dict:
        raise ValueError(
            f"state_dict: weight_hr{sfx} (an LSTM projection, proj_size) has no Keras equivalent"
        )
    G = cell.num_gates
    perm = cell.gate_permutation("torch", "keras")
    weights = [
        np.ascontiguousarray(_gate_blocks(_to_numpy(state_dict[f"weight_{k}{sfx}"]), G, perm, 0).T)
        for k in ("ih", "hh")
    ]
    has = [f"bias_ih{sfx}" in state_dict, f"bias_hh{sfx}" in state_dict]
    if any(has) and not all(has):
        raise ValueError(
            f"state_dict: expected both bias_ih{sfx} and bias_hh{sfx} or neither, got one"
        )
    if all(has):
        b_ih, b_hh = (
            _gate_blocks(_to_numpy(state_dict[f"bias_{k}{sfx}"]), G, perm, 0) for k in ("ih", "hh")
        )
        if cell.keras_name == "GRU" and reset_after:
            weights.append(np.stack([b_ih, b_hh]))
        else:
            # exact only because both biases enter the same sum here
            weights.append(b_ih + b_hh)
    return weights


def keras_simple_rnn_to_state_dict(weights, layer_index=0, reverse=False):
    """Keras ``SimpleRNN`` weights as PyTorch-layout state_dict entries of one layer direction.

    Parameters
    ----------
    weights : sequence of array_like
        ``[kernel (D, H), recurrent_kernel (H, H), bias (H,)]``, or without ``bias`` for a layer
        with ``use_bias=False`` (what ``SimpleRNN.get_weights()`` returns).
    layer_index : int
        ``k`` of the keys ``weight_ih_l{k}`` ...
    reverse : bool
        Name the entries of the reverse direction (``..._l{k}_reverse``).

    Returns
    -------
    dict of str to ndarray
        ``weight_ih = kernel.T`` (H, D), ``weight_hh = recurrent_kernel.T`` (H, H) and, with a
        bias, ``bias_ih = bias`` and ``bias_hh = zeros`` (H,); new C-contiguous arrays.

    Raises
    ------
    ValueError
        Not 2 or 3 arrays, or shapes that do not fit together.
    """
    return _from_keras(ELMAN, weights, layer_index, reverse)


def keras_gru_to_state_dict(weights, layer_index=0, reverse=False, reset_after=True):
    """Keras ``GRU`` weights as PyTorch-layout state_dict entries of one layer direction.

    Parameters
    ----------
    weights : sequence of array_like
        ``[kernel (D, 3H), recurrent_kernel (H, 3H), bias]`` in Keras's gate order z, r, h;
        ``bias`` (2, 3H) (input, recurrent) with ``reset_after=True``, (3H,) without; no bias
        for ``use_bias=False``.
    layer_index, reverse
        As :func:`keras_simple_rnn_to_state_dict`.
    reset_after : bool
        The Keras layer's (and the rnnfast layer's) ``reset_after``.

    Returns
    -------
    dict of str to ndarray
        ``weight_ih`` (3H, D), ``weight_hh`` (3H, H) in PyTorch's order r, z, n, and the biases:
        ``bias[0]`` and ``bias[1]`` reordered (``reset_after=True``), or ``bias_ih = bias``
        reordered and ``bias_hh = zeros``; new C-contiguous arrays.

    Raises
    ------
    ValueError
        Not 2 or 3 arrays, or shapes that do not fit together (a bias of the other
        ``reset_after`` form included).
    """
    return _from_keras(GRU_SPEC, weights, layer_index, reverse, reset_after)


def keras_lstm_to_state_dict(weights, layer_index=0, reverse=False):
    """Keras ``LSTM`` weights ``[kernel (D, 4H), recurrent_kernel (H, 4H), bias (4H,)]`` (gate
    order i, f, c, o: PyTorch's i, f, g, o) as PyTorch-layout state_dict entries of one layer
    direction: ``bias_ih = bias``, ``bias_hh = zeros``. See :func:`keras_gru_to_state_dict`."""
    return _from_keras(LSTM_SPEC, weights, layer_index, reverse)


def state_dict_to_keras_simple_rnn(state_dict, layer_index=0, reverse=False):
    """One layer direction of a PyTorch-layout state_dict as Keras ``SimpleRNN`` weights.

    Parameters
    ----------
    state_dict : mapping of str to array_like
        PyTorch's keys (NumPy arrays or torch tensors), e.g. ``layer.state_dict()``.
    layer_index : int
    reverse : bool
        Take the ``..._reverse`` entries.

    Returns
    -------
    list of ndarray
        ``[kernel (D, H), recurrent_kernel (H, H), bias (H,)]`` with ``bias = bias_ih + bias_hh``,
        or ``[kernel, recurrent_kernel]`` when the state_dict has no biases (``use_bias=False``).

    Raises
    ------
    ValueError
        A weight of that layer direction is missing, or only one of the two biases is present.
    """
    return _to_keras(ELMAN, state_dict, layer_index, reverse)


def state_dict_to_keras_gru(state_dict, layer_index=0, reverse=False, reset_after=True):
    """One layer direction of a PyTorch-layout GRU state_dict as Keras ``GRU`` weights:
    ``[kernel (D, 3H), recurrent_kernel (H, 3H), bias]`` in Keras's gate order z, r, h, with
    ``bias = [bias_ih, bias_hh]`` (2, 3H) for ``reset_after=True``, or ``bias_ih + bias_hh``
    (3H,) for ``reset_after=False`` (exact there: both enter the same sum). See
    :func:`state_dict_to_keras_simple_rnn`."""
    return _to_keras(GRU_SPEC, state_dict, layer_index, reverse, reset_after)


def state_dict_to_keras_lstm(state_dict, layer_index=0, reverse=False):
    """One layer direction of a PyTorch-layout LSTM state_dict as Keras ``LSTM`` weights:
    ``[kernel (D, 4H), recurrent_kernel (H, 4H), bias = bias_ih + bias_hh (4H,)]``. A
    projection (``weight_hr``, proj_size) has no Keras equivalent: ValueError."""
    return _to_keras(LSTM_SPEC, state_dict, layer_index, reverse)


def keras_weights(layer):
    """All weights of ``layer`` (``rnnfast.RNN``, ``GRU`` or ``LSTM``) in Keras's order: for
    each layer, the forward direction's ``[kernel, recurrent_kernel(, bias)]`` then the backward
    direction's, as ``model.get_weights()`` lists them for a stack of Keras ``SimpleRNN`` /
    ``GRU`` / ``LSTM`` layers or their ``Bidirectional`` (so ``model.set_weights(
    keras_weights(layer))`` loads them). ValueError for an LSTM with ``proj_size``."""
    cell = _keras_cell_of(layer)
    if getattr(layer, "proj_size", 0):
        raise ValueError(
            f"layer: proj_size={layer.proj_size} (the LSTM projection) has no Keras equivalent"
        )
    for option, default in (("peepholes", False), ("input_forget", False), ("cell_clip", None)):
        if getattr(layer, option, default) != default:
            raise ValueError(
                f"layer: {option}={getattr(layer, option)!r} (ONNX's LSTM form) has no Keras "
                "equivalent: keras.layers.LSTM computes the plain LSTM; export it to ONNX "
                "(rnnfast.io.onnx.export) instead"
            )
    reset_after = getattr(layer, "reset_after", True)
    state = layer.state_dict()
    out = []
    for k in range(layer.num_layers):
        for reverse in range(_num_directions(layer)):
            out.extend(_to_keras(cell, state, k, bool(reverse), reset_after))
    return out


def _keras_kind(obj):
    """'bidirectional', the Keras name of a recurrent layer ('SimpleRNN', 'GRU', 'LSTM'), or
    None (duck-typed: keras not imported)."""
    if hasattr(obj, "forward_layer") and hasattr(obj, "backward_layer"):
        return "bidirectional"
    if not hasattr(obj, "get_weights"):
        return None
    cell = type(getattr(obj, "cell", None)).__name__
    for spec in CELLS:  # the Keras layers of rnnfast's cells, and their Keras cells
        if type(obj).__name__ == spec.keras_name or cell == spec.keras_cell_name:
            return spec.keras_name
    return None


def _keras_layer_weights(keras_layer):
    """A Keras layer's weights as NumPy arrays, in ``get_weights()`` order (read through each
    variable's backend value: ``get_weights()`` itself warns under NumPy 2 with torch)."""
    variables = getattr(keras_layer, "weights", None)
    if variables is None:
        return [np.asarray(w) for w in keras_layer.get_weights()]
    return [_to_numpy(getattr(v, "value", v)) for v in variables]


def _keras_function_name(keras_layer, option):
    """The name of a Keras layer's ``activation`` / ``recurrent_activation`` (a function)."""
    function = getattr(getattr(keras_layer, "cell", keras_layer), option, None)
    return getattr(function, "__name__", None)


def _keras_activation(keras_layer):
    return _keras_function_name(keras_layer, "activation")


def _check_keras_function(layer, name, keras_layer, option, choices):
    value = _keras_function_name(keras_layer, option)
    if value not in choices:
        raise ValueError(
            f"keras layer {name!r}: {option} {value!r} is not supported (rnnfast's "
            f"{type(layer).__name__} takes {' or '.join(choices)})"
        )
    if value != getattr(layer, option):
        raise ValueError(
            f"keras layer {name!r}: {option} {value!r} differs from the layer's {option} "
            f"{getattr(layer, option)!r}"
        )


def _check_keras_cell(layer, keras_layer):
    """TypeError / ValueError unless the Keras layer computes what ``layer``'s cell does."""
    cell = _cell_of(layer)
    name = getattr(keras_layer, "name", type(keras_layer).__name__)
    if _keras_kind(keras_layer) != cell.keras_name:
        raise TypeError(
            f"keras layer {getattr(keras_layer, 'name', '')!r}: expected a {cell.keras_name} "
            f"(for rnnfast.{type(layer).__name__}), got {type(keras_layer).__name__}"
        )
    if cell is ELMAN:
        activation = _keras_activation(keras_layer)
        if activation != layer.nonlinearity:
            raise ValueError(
                f"keras layer {name!r}: activation {activation!r} differs from the layer's "
                f"nonlinearity {layer.nonlinearity!r}"
            )
    else:
        _check_keras_function(layer, name, keras_layer, "activation", _ACTIVATIONS)
        _check_keras_function(
            layer, name, keras_layer, "recurrent_activation", _RECURRENT_ACTIVATIONS
        )
    use_bias = getattr(getattr(keras_layer, "cell", keras_layer), "use_bias", layer.bias)
    if bool(use_bias) != layer.bias:
        raise ValueError(
            f"keras layer {name!r}: use_bias={bool(use_bias)} differs from the layer's "
            f"bias={layer.bias}"
        )
    reset_after = getattr(keras_layer, "reset_after", None)
    if cell.keras_name == "GRU" and bool(reset_after) != layer.reset_after:
        raise ValueError(
            f"keras layer {name!r}: reset_after={bool(reset_after)} differs from the layer's "
            f"reset_after={layer.reset_after} (a GRU's equations; build the layer with "
            f"reset_after={bool(reset_after)})"
        )
    if getattr(layer, "proj_size", 0):
        raise ValueError(
            f"keras layer {name!r}: Keras's LSTM has no projection; the layer has "
            f"proj_size={layer.proj_size}"
        )


def _keras_entries(layer, keras_layer, layer_index, reverse):
    """State_dict entries of one Keras recurrent layer, after checking it computes what
    ``layer`` does."""
    _check_keras_cell(layer, keras_layer)
    name = getattr(keras_layer, "name", type(keras_layer).__name__)
    weights = _keras_layer_weights(keras_layer)
    if not weights:
        raise ValueError(f"keras layer {name!r}: has no weights yet (build it first)")
    return _from_keras(
        _cell_of(layer), weights, layer_index, reverse, getattr(layer, "reset_after", True)
    )


def _keras_rnn_layers(obj, layer):
    """The recurrent / Bidirectional layers of a Keras model, a list of layers, or one layer."""
    if _keras_kind(obj) is not None:
        return [obj]
    items = list(obj.layers) if hasattr(obj, "layers") else list(obj)
    rnn_layers = []
    for item in items:
        if _keras_kind(item) is not None:
            rnn_layers.append(item)
        elif hasattr(item, "get_weights") and _keras_layer_weights(item):
            keras_name = _cell_of(layer).keras_name
            raise TypeError(
                f"keras layer {getattr(item, 'name', '')!r}: {type(item).__name__} has weights "
                f"and is neither a {keras_name} nor a Bidirectional({keras_name})"
            )
        elif not hasattr(item, "get_weights"):
            raise TypeError(f"expected Keras layers, got a {type(item).__name__} in the list")
    return rnn_layers


def load_keras(layer, keras_layer_or_weights):
    """Load the weights of Keras ``SimpleRNN``, ``GRU`` or ``LSTM`` layers into ``layer``
    (all of them, or nothing).

    Parameters
    ----------
    layer : rnnfast.RNN, rnnfast.GRU or rnnfast.LSTM
        Its cell names the Keras layer it takes (SimpleRNN, GRU, LSTM); a GRU's ``reset_after``
        must be the Keras layer's; an LSTM's ``proj_size`` 0 (Keras has no projection).
    keras_layer_or_weights :
        - a Keras ``SimpleRNN`` / ``GRU`` / ``LSTM`` (for a one-layer unidirectional ``layer``),
        - a ``Bidirectional`` of one (its forward / backward layers give the direction and
          the ``_reverse`` entries),
        - a list of such layers, or a Keras model, one per stacked layer (layers without weights,
          e.g. ``Masking`` or ``InputLayer``, are passed over),
        - or a flat list of arrays in Keras's order (``model.get_weights()``; see
          :func:`keras_weights`).

    The Keras layers' options that change what is computed are checked (``activation``;
    the gated cells' ``recurrent_activation``, tanh / relu and sigmoid / hard_sigmoid, anything
    else refused by name; ``use_bias``; ``reset_after``; ``go_backwards``; a Bidirectional's
    ``merge_mode``) or carried: ``dropout`` as the layer's ``input_dropout``,
    ``recurrent_dropout`` and ``zero_output_for_mask``.
    ``unit_forget_bias`` only sets Keras's initial weights: nothing to carry.

    Raises
    ------
    TypeError
        Keras layers of another cell (an LSTM for an rnnfast.GRU, a Dense ...).
    ValueError
        The number of layers, the directions, an option or a shape does not match ``layer``,
        or a Keras layer computes something else (go_backwards where ``layer`` does not, a
        different merge mode or activation). ``layer`` is unchanged when anything is raised.
    """
    dirs = _num_directions(layer)
    cell = _keras_cell_of(layer)
    reset_after = getattr(layer, "reset_after", True)
    state, options = {}, {}  # options: only Keras layers carry them, not bare weights
    if (
        isinstance(keras_layer_or_weights, (list, tuple))
        and keras_layer_or_weights
        and all(not hasattr(w, "get_weights") for w in keras_layer_or_weights)
    ):
        if getattr(layer, "proj_size", 0):
            raise ValueError(
                f"weights: Keras's LSTM has no projection; the layer has "
                f"proj_size={layer.proj_size}"
            )
        weights = list(keras_layer_or_weights)
        per = 3 if layer.bias else 2
        expected = layer.num_layers * dirs * per
        if len(weights) != expected:
            raise ValueError(
                f"weights: expected {expected} arrays (num_layers={layer.num_layers} x "
                f"{dirs} direction(s) x {per}), got {len(weights)}"
            )
        for g in range(layer.num_layers * dirs):
            state.update(
                _from_keras(
                    cell, weights[g * per : (g + 1) * per], g // dirs, bool(g % dirs), reset_after
                )
            )
    else:
        keras_layers = _keras_rnn_layers(keras_layer_or_weights, layer)
        if len(keras_layers) != layer.num_layers:
            raise ValueError(
                f"keras layers: expected num_layers={layer.num_layers} {cell.keras_name} / "
                f"Bidirectional layers, got {len(keras_layers)}"
            )
        go_backwards = bool(getattr(layer, "go_backwards", False))
        for k, kl in enumerate(keras_layers):
            name = getattr(kl, "name", type(kl).__name__)
            bidirectional = _keras_kind(kl) == "bidirectional"
            if bidirectional != (dirs == 2):
                raise ValueError(
                    f"keras layer {name!r}: {'bi' if bidirectional else 'uni'}directional, "
                    f"the layer's bidirectional={dirs == 2}"
                )
            if bidirectional:
                # between stacked layers rnnfast (as PyTorch) passes on both directions,
                # concatenated
                merge_mode = (
                    getattr(layer, "merge_mode", kl.merge_mode)
                    if k == layer.num_layers - 1
                    else "concat"
                )
                if merge_mode != kl.merge_mode:
                    raise ValueError(
                        f"keras layer {name!r}: merge_mode {kl.merge_mode!r} differs from the "
                        f"layer's {merge_mode!r}"
                    )
                if getattr(kl.forward_layer, "go_backwards", False):
                    raise ValueError(
                        f"keras layer {name!r}: its forward_layer runs backwards "
                        "(go_backwards=True)"
                    )
                state.update(_keras_entries(layer, kl.forward_layer, k, False))
                state.update(_keras_entries(layer, kl.backward_layer, k, True))
            else:
                if bool(getattr(kl, "go_backwards", False)) != go_backwards:
                    raise ValueError(
                        f"keras layer {name!r}: go_backwards={kl.go_backwards} differs from the "
                        f"layer's go_backwards={go_backwards}"
                    )
                state.update(_keras_entries(layer, kl, k, False))
        options = _keras_options(keras_layers)
    # the options first, each through the layer's setter (which refuses what it cannot run),
    # then the weights (load_state_dict checks them all before copying): on an error the
    # options go back, and nothing has changed
    before = {name: getattr(layer, name) for name in options}
    try:
        for name, value in options.items():
            setattr(layer, name, value)
        layer.load_state_dict(state)
    except BaseException:
        for name, value in before.items():
            setattr(layer, name, value)
        raise
    return layer


def _keras_options(keras_layers):
    """The options of Keras's recurrent layers that change what rnnfast computes: ``dropout``
    (rnnfast's ``input_dropout``), ``recurrent_dropout`` and ``zero_output_for_mask`` (a
    Bidirectional's from its forward layer, where Keras sets it). One value for the stack:
    ValueError when its layers' dropouts differ. zero_output_for_mask is the last layer's:
    inside a stack a masked step's output is never read (the next layer skips that step)."""
    keys = {
        "dropout": "input_dropout",
        "recurrent_dropout": "recurrent_dropout",
        "zero_output_for_mask": "zero_output_for_mask",
    }
    found = {}
    for k, kl in enumerate(keras_layers):
        cell_owner = kl.forward_layer if _keras_kind(kl) == "bidirectional" else kl
        for keras_name, ours in keys.items():
            value = getattr(cell_owner, keras_name, None)
            if value is None:
                continue
            if ours == "zero_output_for_mask" and k < len(keras_layers) - 1:
                continue
            value = bool(value) if ours == "zero_output_for_mask" else float(value)
            if found.setdefault(ours, value) != value:
                raise ValueError(
                    f"keras layers: {keras_name} differs between the stacked layers "
                    f"({found[ours]} and {value}); rnnfast has one {ours} for its stack"
                )
    return found
