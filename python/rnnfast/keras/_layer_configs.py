"""The front's layers as Keras's layer configs and back: what a ``.keras`` file's
``config.json`` holds for each layer, in Keras 3's form (so real Keras loads a file the front
wrote, and the front loads one real Keras wrote), and where each layer's weights sit in
Keras's weights file (``layers/<key>/cell/vars/0``, ...).

Nothing here lists layers or their arguments: a layer describes itself. Its ``get_config``
gives the config (written here with Keras's envelope: ``module``, ``registered_name``, an
initializer object serialized as Keras serializes it), its ``from_config`` reads one back
(so every argument the layer takes round-trips, and a key it does not take is refused by
name), its ``weight_shapes`` gives its weights' shapes for an input shape without building
anything and its ``weight_file_paths`` where Keras's weights file keeps them.
"""

from __future__ import annotations

import re

__all__ = ["from_config", "layer_class", "layer_keys", "to_config", "weight_paths"]


def _serialized_initializer(value):
    """An initializer as Keras's config holds it: a name, Keras's serialization of an object,
    or (a function of the user's) Keras's form of a function, which only a loader that knows
    the function can call; a loaded model's weights come from its file, so none is called."""
    if value is None or isinstance(value, (str, dict)):
        return value
    if hasattr(value, "get_config"):
        return {
            "module": "keras.initializers",
            "class_name": type(value).__name__,
            "config": value.get_config(),
            "registered_name": None,
        }
    name = getattr(value, "__name__", type(value).__name__)
    return {
        "module": getattr(value, "__module__", None),
        "class_name": "function",
        "config": name,
        "registered_name": name,
    }


def _keras_form(config):
    """A layer's ``get_config`` dict in Keras's form: wrapped layers in Keras's envelope,
    initializers serialized, Dense's identity activation named ``"linear"``."""
    config = dict(config)
    for key, value in config.items():
        if key.endswith("_initializer"):
            config[key] = _serialized_initializer(value)
        elif isinstance(value, dict) and "class_name" in value and "config" in value:
            config[key] = {
                "module": "keras.layers",
                "class_name": value["class_name"],
                "config": _keras_form(value["config"]),
                "registered_name": None,
            }
    if "activation" in config and config["activation"] is None:
        config["activation"] = "linear"
    return config


def to_config(layer):
    """``{"module", "class_name", "config", "build_config", "registered_name"}`` of a front
    layer, Keras's form, from the layer's own ``get_config``."""
    config = _keras_form(layer.get_config())
    if type(layer).__name__ == "Bidirectional":  # Keras names the wrapped layer so
        config["layer"]["config"]["name"] = f"forward_{layer.forward_layer.name}"
    result = {"module": "keras.layers", "class_name": type(layer).__name__, "config": config}
    if getattr(layer, "input_shape", None) is not None:
        result["build_config"] = {"input_shape": list(layer.input_shape)}
    result["registered_name"] = None
    return result


def layer_class(class_name):
    """The front's layer class named ``class_name``, or None."""
    from . import layers

    cls = getattr(layers, class_name, None) if isinstance(class_name, str) else None
    if isinstance(cls, type) and issubclass(cls, layers.Layer) and cls is not layers.Layer:
        return cls
    return None


def _layer_names():
    from . import layers

    return sorted(name for name in layers.__all__ if layer_class(name) is not None)


def from_config(entry, where="layer"):
    """The front layer of one of Keras's layer configs ``{"class_name", "config", ...}``, made
    by the layer class's own ``from_config``.

    Raises
    ------
    ValueError
        Not a layer config, a class the front does not have, or a config its layer refuses
        (an unknown key, a value of the wrong type or out of range, a Keras option the front
        does not compute): the message names ``where``, the layer, the key and the value.
    """
    if not isinstance(entry, dict):
        raise ValueError(
            f"{where}: expected a layer config {{'class_name', 'config'}}, got "
            f"{type(entry).__name__}"
        )
    class_name, config = entry.get("class_name"), entry.get("config")
    cls = layer_class(class_name)
    if cls is None:
        raise ValueError(
            f"{where}.class_name: expected one of the front's layers {_layer_names()}, got "
            f"{class_name!r:.100}"
        )
    if entry.get("module") not in (None, "keras.layers"):
        raise ValueError(
            f"{where}.module: expected 'keras.layers' (Keras's own layers), got "
            f"{entry.get('module')!r:.100}"
        )
    if not isinstance(config, dict):
        raise ValueError(f"{where}.config: expected a dict, got {type(config).__name__}")
    try:
        return cls.from_config(config)
    except (TypeError, ValueError, NotImplementedError, KeyError, RecursionError) as error:
        name = config.get("name")
        raise ValueError(f"{where} ({class_name} {name!r:.100}): {error}") from None


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


def weight_paths(layer, key, count=None):
    """The paths of a front layer's ``count`` weights (by default those it holds) in Keras's
    weights file (under ``layers/<key>``, see :func:`layer_keys`), in ``get_weights`` order,
    and the groups Keras writes with no weights in them (the layer's ``weight_file_paths``)."""
    count = len(layer.get_weights()) if count is None else count
    paths, groups = layer.weight_file_paths(count)
    base = f"layers/{key}"
    return [f"{base}/{p}" for p in paths], [f"{base}/{g}" for g in groups]
