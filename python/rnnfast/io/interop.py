"""Weights in and out of PyTorch's ``torch.nn.RNN`` and Keras's ``SimpleRNN``.

PyTorch and rnnfast share one layout (``weight_ih_l{k}[_reverse]`` of shape (H, D_k) and so on),
so converting is copying. Keras stores the transposes, ``kernel`` (D, H) and ``recurrent_kernel``
(H, H), and one bias vector where PyTorch has two (``b_ih + b_hh`` enter the sum together): Keras ->
PyTorch puts Keras's bias in ``bias_ih`` and zeros in ``bias_hh``; PyTorch -> Keras adds them.

torch and keras are imported only inside the functions that need them.
"""

from __future__ import annotations

import numpy as np

from ..nn.gated import GRU, LSTM
from ..nn.rnn import RNN
from ..nn.rnn_torch import from_torch as _from_torch
from ..nn.rnn_torch import to_torch

__all__ = [
    "from_torch",
    "to_torch",
    "keras_simple_rnn_to_state_dict",
    "state_dict_to_keras_simple_rnn",
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
    ``torch.nn.GRU`` or ``torch.nn.LSTM``.

    Parameters
    ----------
    module : torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM
        Any device; its parameters must be float32 or float64 (the new layer's dtype).
    cls : type, optional
        The layer class to build (by default ``rnnfast.RNN``, ``rnnfast.GRU`` or
        ``rnnfast.LSTM`` after the module's class); ``RNN.from_torch`` passes its own.

    Returns
    -------
    rnnfast.RNN, rnnfast.GRU or rnnfast.LSTM
        As :meth:`rnnfast.RNN.from_torch`, which this is for ``cls=None``.
    """
    if cls is None:
        kind = type(module).__mro__
        names = [c.__name__ for c in kind if c.__module__.startswith("torch.nn")]
        cls = GRU if names[:1] == ["GRU"] else LSTM if names[:1] == ["LSTM"] else RNN
    return _from_torch(module, cls)


# ---- Keras ---------------------------------------------------------------------------------------


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
    weights = [_to_numpy(w) for w in weights]
    if len(weights) not in (2, 3):
        raise ValueError(
            "weights: expected [kernel, recurrent_kernel(, bias)] (2 or 3 arrays), "
            f"got {len(weights)} arrays"
        )
    kernel, recurrent = weights[0], weights[1]
    if kernel.ndim != 2:
        raise ValueError(f"kernel: expected shape (D, H), got shape {kernel.shape}")
    H = kernel.shape[1]
    if recurrent.shape != (H, H):
        raise ValueError(
            f"recurrent_kernel: expected shape (H, H) = {(H, H)}, got shape {recurrent.shape}"
        )
    sfx = _suffix(layer_index, reverse)
    out = {
        f"weight_ih{sfx}": np.array(kernel.T, order="C"),
        f"weight_hh{sfx}": np.array(recurrent.T, order="C"),
    }
    if len(weights) == 3:
        bias = weights[2]
        if bias.shape != (H,):
            raise ValueError(f"bias: expected shape (H,) = {(H,)}, got shape {bias.shape}")
        out[f"bias_ih{sfx}"] = np.array(bias)
        out[f"bias_hh{sfx}"] = np.zeros_like(bias)
    return out


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
    sfx = _suffix(layer_index, reverse)
    for key in (f"weight_ih{sfx}", f"weight_hh{sfx}"):
        if key not in state_dict:
            raise ValueError(f"state_dict: missing key {key!r}")
    weights = [
        np.array(_to_numpy(state_dict[f"weight_ih{sfx}"]).T, order="C"),
        np.array(_to_numpy(state_dict[f"weight_hh{sfx}"]).T, order="C"),
    ]
    has = [f"bias_ih{sfx}" in state_dict, f"bias_hh{sfx}" in state_dict]
    if any(has) and not all(has):
        raise ValueError(
            f"state_dict: expected both bias_ih{sfx} and bias_hh{sfx} or neither, got one"
        )
    if all(has):
        weights.append(
            _to_numpy(state_dict[f"bias_ih{sfx}"]) + _to_numpy(state_dict[f"bias_hh{sfx}"])
        )
    return weights


def keras_weights(layer):
    """All weights of ``layer`` in Keras's order: for each layer, the forward direction's
    ``[kernel, recurrent_kernel(, bias)]`` then the backward direction's, as
    ``model.get_weights()`` lists them for a stack of ``SimpleRNN`` / ``Bidirectional(SimpleRNN)``
    layers (so ``model.set_weights(keras_weights(layer))`` loads them)."""
    state = layer.state_dict()
    out = []
    for k in range(layer.num_layers):
        for reverse in range(_num_directions(layer)):
            out.extend(state_dict_to_keras_simple_rnn(state, k, bool(reverse)))
    return out


def _keras_kind(obj):
    """'bidirectional', 'simple_rnn' or None for a Keras layer (duck-typed: keras not imported)."""
    if hasattr(obj, "forward_layer") and hasattr(obj, "backward_layer"):
        return "bidirectional"
    cell = getattr(obj, "cell", None)
    if hasattr(obj, "get_weights") and (
        type(obj).__name__ == "SimpleRNN" or type(cell).__name__ == "SimpleRNNCell"
    ):
        return "simple_rnn"
    return None


def _keras_layer_weights(keras_layer):
    """A Keras layer's weights as NumPy arrays, in ``get_weights()`` order (read through each
    variable's backend value: ``get_weights()`` itself warns under NumPy 2 with torch)."""
    variables = getattr(keras_layer, "weights", None)
    if variables is None:
        return [np.asarray(w) for w in keras_layer.get_weights()]
    return [_to_numpy(getattr(v, "value", v)) for v in variables]


def _keras_activation(keras_layer):
    activation = getattr(getattr(keras_layer, "cell", keras_layer), "activation", None)
    return getattr(activation, "__name__", None)


def _simple_rnn_entries(layer, keras_layer, layer_index, reverse):
    """State_dict entries of one Keras SimpleRNN, after checking it computes what ``layer`` does."""
    if _keras_kind(keras_layer) != "simple_rnn":
        raise TypeError(
            f"keras layer {getattr(keras_layer, 'name', '')!r}: expected a SimpleRNN, got "
            f"{type(keras_layer).__name__}"
        )
    name = getattr(keras_layer, "name", type(keras_layer).__name__)
    activation = _keras_activation(keras_layer)
    if activation != layer.nonlinearity:
        raise ValueError(
            f"keras layer {name!r}: activation {activation!r} differs from the layer's "
            f"nonlinearity {layer.nonlinearity!r}"
        )
    weights = _keras_layer_weights(keras_layer)
    if not weights:
        raise ValueError(f"keras layer {name!r}: has no weights yet (build it first)")
    return keras_simple_rnn_to_state_dict(weights, layer_index, reverse)


def _keras_rnn_layers(obj):
    """The SimpleRNN / Bidirectional layers of a Keras model, a list of layers, or one layer."""
    if _keras_kind(obj) is not None:
        return [obj]
    items = list(obj.layers) if hasattr(obj, "layers") else list(obj)
    rnn_layers = []
    for item in items:
        if _keras_kind(item) is not None:
            rnn_layers.append(item)
        elif hasattr(item, "get_weights") and _keras_layer_weights(item):
            raise TypeError(
                f"keras layer {getattr(item, 'name', '')!r}: {type(item).__name__} has weights "
                "and is neither a SimpleRNN nor a Bidirectional(SimpleRNN)"
            )
        elif not hasattr(item, "get_weights"):
            raise TypeError(f"expected Keras layers, got a {type(item).__name__} in the list")
    return rnn_layers


def load_keras(layer, keras_layer_or_weights):
    """Load the weights of Keras ``SimpleRNN`` layers into ``layer`` (all of them, or nothing).

    Parameters
    ----------
    layer : rnnfast.RNN
    keras_layer_or_weights :
        - a Keras ``SimpleRNN`` (for a one-layer unidirectional ``layer``),
        - a ``Bidirectional(SimpleRNN)`` (its forward / backward layers give the direction and
          the ``_reverse`` entries),
        - a list of such layers, or a Keras model, one per stacked layer (layers without weights,
          e.g. ``Masking`` or ``InputLayer``, are passed over),
        - or a flat list of arrays in Keras's order (``model.get_weights()``; see
          :func:`keras_weights`).

    Raises
    ------
    TypeError
        Something other than SimpleRNN layers (LSTM, GRU, Dense ...).
    ValueError
        The number of layers, the directions, an activation or a shape does not match
        ``layer``, or a Keras layer computes something else (go_backwards where ``layer`` does
        not, a different merge mode). ``layer`` is unchanged when anything is raised.
    """
    dirs = _num_directions(layer)
    state, options = {}, {}  # options: only Keras layers carry them, not bare weights
    if (
        isinstance(keras_layer_or_weights, (list, tuple))
        and keras_layer_or_weights
        and all(not hasattr(w, "get_weights") for w in keras_layer_or_weights)
    ):
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
                keras_simple_rnn_to_state_dict(
                    weights[g * per : (g + 1) * per], g // dirs, bool(g % dirs)
                )
            )
    else:
        keras_layers = _keras_rnn_layers(keras_layer_or_weights)
        if len(keras_layers) != layer.num_layers:
            raise ValueError(
                f"keras layers: expected num_layers={layer.num_layers} SimpleRNN / "
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
                state.update(_simple_rnn_entries(layer, kl.forward_layer, k, False))
                state.update(_simple_rnn_entries(layer, kl.backward_layer, k, True))
            else:
                if bool(getattr(kl, "go_backwards", False)) != go_backwards:
                    raise ValueError(
                        f"keras layer {name!r}: go_backwards={kl.go_backwards} differs from the "
                        f"layer's go_backwards={go_backwards}"
                    )
                state.update(_simple_rnn_entries(layer, kl, k, False))
        options = _keras_options(keras_layers)
    layer.load_state_dict(state)
    for name, value in options.items():  # after the weights: nothing changes on an error
        setattr(layer, name, value)
    return layer


def _keras_options(keras_layers):
    """The options of Keras's SimpleRNN layers that change what rnnfast computes: ``dropout``
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
