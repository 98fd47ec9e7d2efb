"""Keras's ``keras.models`` names on the front: ``load_model`` (a ``.keras`` file), and
``Sequential`` too, so ``from rnnfast.keras.models import load_model, Sequential`` runs as
written (``Sequential`` is documented with ``rnnfast.keras``)."""

from __future__ import annotations

import os

from ._layer_configs import from_config
from .layers import Input
from .model import Sequential
from .saving import (
    checked_batch_shape,
    compile_from_config,
    open_weights,
    read_checked_weights,
    read_model_file,
)

__all__ = ["load_model"]


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):
    """Keras's ``keras.models.load_model`` for a ``.keras`` file: the front's Sequential with
    the saved layers, weights and (``compile=True``) compile settings. ``safe_mode`` is
    accepted: the format here holds no code to run.

    Nothing in the file is trusted: each layer's config is read by the layer's own
    ``from_config``, the shapes its sizes give are compared with the file's arrays and the
    sizes no array carries are bounded (see ``rnnfast.keras.saving``) before any layer is
    built; no initializer runs (the weights come from the file).

    Raises
    ------
    ValueError
        The file is damaged, or a field of its config is wrong, refused or out of bounds, or
        disagrees with an array: the message names the field, the expected and the received
        value.
    """
    if not isinstance(filepath, (str, os.PathLike)):
        raise TypeError(f"filepath: expected a str or os.PathLike, got {type(filepath).__name__}")
    path = os.fspath(filepath)
    if custom_objects:
        raise NotImplementedError(
            "custom_objects: the front has no custom layers to load; leave it out"
        )
    if not isinstance(compile, bool):
        raise TypeError(f"compile: expected a bool, got {type(compile).__name__}")
    if not path.endswith(".keras"):
        raise ValueError(f"filepath: expected a .keras file (Keras 3's format), got {path!r}")
    config, weights = read_model_file(path)
    model = _model_from_config(config, weights, path)
    compiled = config.get("compile_config")
    if compile and compiled:
        try:
            compile_from_config(model, compiled)
        except (TypeError, ValueError, NotImplementedError, KeyError, AttributeError) as error:
            raise ValueError(f"{path}: compile_config: {error}") from None
    return model


def _dict(value, where):
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a dict, got {type(value).__name__}")
    return value


def _model_from_config(config, weights, path):
    """The built Sequential of a ``.keras`` file's config and weights (bytes), every size
    checked before anything is built."""
    _dict(config, f"{path}: config.json")
    if config.get("class_name") != "Sequential":
        raise ValueError(
            f"{path}: config.json class_name: expected 'Sequential' (the front loads a "
            f"Sequential), got {config.get('class_name')!r:.100}"
        )
    inner = _dict(config.get("config", {}), f"{path}: config.json config")
    name = inner.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"{path}: config.name: expected a str, got {type(name).__name__}")
    entries = inner.get("layers", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: config.layers: expected a list, got {type(entries).__name__}")
    shape, where = inner.get("build_input_shape"), "config.build_input_shape"
    if shape is None:
        build = _dict(config.get("build_config") or {}, f"{path}: build_config")
        shape, where = build.get("input_shape"), "build_config.input_shape"
    layers = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("class_name") == "InputLayer":
            if i:
                raise ValueError(f"{path}: config.layers[{i}]: an InputLayer after layers")
            layer_config = _dict(entry.get("config"), f"{path}: config.layers[0].config")
            given = layer_config.get("batch_shape", layer_config.get("batch_input_shape"))
            if given is not None:
                shape, where = given, "config.layers[0].config.batch_shape"
            continue
        layers.append(from_config(entry, f"{path}: config.layers[{i}]"))
    if shape is None:
        raise ValueError(f"{path}: has no input shape; the model cannot be built")
    shape = checked_batch_shape(shape, f"{path}: {where}")
    if not layers:
        raise ValueError(f"{path}: config.layers: expected at least one layer, got none")
    # every layer's weights' shapes from the configs alone, then compared with the file's
    expected, current = [], shape
    for i, layer in enumerate(layers):
        try:
            expected.append(layer.weight_shapes(current))
            current = layer.compute_output_shape(current)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{path}: config.layers[{i}]: {error}") from None
        if i + 1 < len(layers) and not all(s is None or isinstance(s, int) for s in current):
            raise ValueError(
                f"{path}: config.layers[{i}]: returns several outputs (return_state=True or "
                "merge_mode=None), which a Sequential cannot pass on"
            )
    names = [layer.name for layer in layers if layer.name is not None]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: config.layers: two layers have the same name ({names})")
    with open_weights(weights, path) as handle:
        arrays = read_checked_weights(handle, layers, expected, path, len(weights))
    current = shape
    for i, (layer, values) in enumerate(zip(layers, arrays)):
        try:
            layer.build(current, values)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{path}: config.layers[{i}]: {error}") from None
        current = layer.compute_output_shape(current)
    model = Sequential(name=name)
    try:
        model.add(Input(batch_shape=shape))
        for layer in layers:
            model.add(layer)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: config.layers: {error}") from None
    return model
