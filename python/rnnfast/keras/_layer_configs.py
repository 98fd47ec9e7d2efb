"""The front's layers as Keras's layer configs and back: what a ``.keras`` file's
``config.json`` holds for each layer, in Keras 3's form (so real Keras loads a file the front
wrote, and the front loads one real Keras wrote), and where each layer's weights sit in
Keras's weights file (``layers/<name>/cell/vars/0``, ...).

A config key that the front's layer has no equivalent for is accepted when it holds Keras's
default (a regularizer None, ``trainable`` True, ...) and refused otherwise, naming the layer,
the key and its value; initializers are accepted as they are (the saved weights replace the
initial ones).
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["from_config", "layer_keys", "to_config", "weight_paths"]

_RECURRENT = ("SimpleRNN", "GRU", "LSTM")
# keys whose Keras default is all the front supports
_DEFAULTS = {
    "unroll": False,
    "kernel_regularizer": None,
    "recurrent_regularizer": None,
    "bias_regularizer": None,
    "activity_regularizer": None,
    "embeddings_regularizer": None,
    "kernel_constraint": None,
    "recurrent_constraint": None,
    "bias_constraint": None,
    "embeddings_constraint": None,
    "quantization_config": None,
    "lora_rank": None,
    "sparse": False,
    "ragged": False,
    "optional": False,
}
# keys that change nothing the front computes (the saved weights replace initial ones;
# zero_output_for_mask is what the front's padded steps output anyway)
_IGNORED = (
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
    "embeddings_initializer",
    "zero_output_for_mask",
    "backward_layer",
)
_ARGS = {
    "SimpleRNN": (
        "units",
        "activation",
        "use_bias",
        "dropout",
        "recurrent_dropout",
        "return_sequences",
        "return_state",
        "go_backwards",
        "stateful",
        "seed",
    ),
    "Dense": ("units", "activation", "use_bias"),
    "Dropout": ("rate", "noise_shape", "seed"),
    "Embedding": ("input_dim", "output_dim", "mask_zero"),
    "Bidirectional": ("merge_mode",),
}
_ARGS["GRU"] = (*_ARGS["SimpleRNN"], "recurrent_activation", "reset_after")
_ARGS["LSTM"] = (*_ARGS["SimpleRNN"], "recurrent_activation", "unit_forget_bias")


def _initializer_config(value):
    """An initializer as Keras's config holds it: a name, or a Keras object's serialization."""
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "get_config"):
        return {
            "module": "keras.initializers",
            "class_name": type(value).__name__,
            "config": value.get_config(),
            "registered_name": None,
        }
    return None  # a function of the user's: Keras could not rebuild it either


def to_config(layer):
    """``{"module", "class_name", "config", "build_config"}`` of a front layer, Keras's form."""
    class_name = type(layer).__name__
    if class_name not in _ARGS:
        raise NotImplementedError(
            f"save: {class_name} {layer.name!r} has no Keras config here; the .keras format "
            f"covers {sorted(_ARGS)}"
        )
    config = {
        "name": layer.name,
        "trainable": bool(getattr(layer, "trainable", True)),
        "dtype": np.dtype(layer.dtype).name,
    }
    for key in _ARGS[class_name]:
        config[key] = getattr(layer, key, None)  # noise_shape: only None is accepted
    if class_name == "Dense" and config["activation"] is None:
        config["activation"] = "linear"
    if class_name == "Bidirectional":
        inner = to_config(layer.forward_layer)
        inner["config"]["name"] = f"forward_{layer.forward_layer.name}"
        config["layer"] = inner
    for key in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
        if hasattr(layer, key):
            config[key] = _initializer_config(getattr(layer, key))
    result = {"module": "keras.layers", "class_name": class_name, "config": config}
    if getattr(layer, "input_shape", None) is not None:
        result["build_config"] = {"input_shape": list(layer.input_shape)}
    result["registered_name"] = None
    return result


def _dtype(value, who):
    if isinstance(value, dict):  # Keras's DTypePolicy
        value = value.get("config", {}).get("name")
    if value not in (None, "float32", "float64"):
        raise NotImplementedError(f"{who}: dtype {value!r}; the front runs float32 or float64")
    return value


def from_config(entry):
    """The front layer of one of Keras's layer configs."""
    from . import layers

    class_name, config = entry.get("class_name"), dict(entry.get("config", {}))
    who = f"{class_name} {config.get('name')!r}"
    if class_name not in _ARGS:
        raise NotImplementedError(
            f"load_model: the layer {who} is not one of the front's ({sorted(_ARGS)})"
        )
    kwargs = {"name": config.pop("name", None), "dtype": _dtype(config.pop("dtype", None), who)}
    trainable = config.pop("trainable", True)
    for key in _ARGS[class_name]:
        if key in config:
            kwargs[key] = config.pop(key)
    if class_name == "Dense" and kwargs.get("activation") == "linear":
        kwargs["activation"] = None
    if class_name == "Bidirectional":
        inner = from_config(config.pop("layer"))
        backward = config.get("backward_layer")
        if backward is not None and backward.get("config", {}).get("units") != inner.units:
            raise NotImplementedError(
                f"load_model: {who} has a backward layer unlike its forward one; the front's "
                "Bidirectional runs a mirror of its layer"
            )
        kwargs.setdefault("dtype", inner.dtype)
        if kwargs["dtype"] is None:
            kwargs.pop("dtype")
        layer = layers.Bidirectional(inner, **kwargs)
        _check_rest(config, who)
        return _trainable(layer, trainable, who)
    if kwargs["dtype"] is None:
        kwargs.pop("dtype")
    if kwargs.get("seed") is None:
        kwargs.pop("seed", None)
    _check_rest(config, who)
    return _trainable(getattr(layers, class_name)(**kwargs), trainable, who)


def _trainable(layer, trainable, who):
    if trainable is not True:
        if not hasattr(layer, "trainable") or not isinstance(trainable, bool):
            raise NotImplementedError(f"load_model: {who} has trainable={trainable!r}")
        layer.trainable = trainable
    return layer


def _check_rest(config, who):
    for key, value in config.items():
        if key in _IGNORED:
            continue
        if key in _DEFAULTS and value == _DEFAULTS[key]:
            continue
        expected = f"{_DEFAULTS[key]!r}" if key in _DEFAULTS else "nothing (no such option)"
        raise NotImplementedError(
            f"load_model: {who} has {key}={value!r}; the front accepts {expected} there"
        )


def _snake(name):
    """Keras's ``naming.to_snake_case`` of a class name (SimpleRNN -> simple_rnn)."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def layer_keys(layers):
    """Each layer's key in Keras's weights file: not its name but its class in snake case,
    numbered within the model (``dense``, ``dense_1``, ...), as Keras's saving walks a list."""
    used, keys = {}, []
    for layer in layers:
        stem = _snake(type(layer).__name__)
        used[stem] = used.get(stem, -1) + 1
        keys.append(stem if used[stem] == 0 else f"{stem}_{used[stem]}")
    return keys


def weight_paths(layer, key):
    """The paths of a front layer's weights in Keras's weights file (under ``layers/<key>``,
    see :func:`layer_keys`), in ``get_weights`` order, and the groups Keras writes with no
    weights in them."""
    base = f"layers/{key}"
    count = len(layer.get_weights())
    class_name = type(layer).__name__
    if class_name in _RECURRENT:
        return [f"{base}/cell/vars/{i}" for i in range(count)], [f"{base}/vars"]
    if class_name == "Bidirectional":
        half = count // 2
        paths = [f"{base}/forward_layer/cell/vars/{i}" for i in range(half)]
        paths += [f"{base}/backward_layer/cell/vars/{i}" for i in range(half)]
        groups = [f"{base}/vars", f"{base}/forward_layer/vars", f"{base}/backward_layer/vars"]
        return paths, groups
    return [f"{base}/vars/{i}" for i in range(count)], [f"{base}/vars"]
