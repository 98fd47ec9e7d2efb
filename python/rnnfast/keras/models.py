"""Keras's ``keras.models`` names on the front: ``load_model`` (a ``.keras`` file), and
``Sequential`` too, so ``from rnnfast.keras.models import load_model, Sequential`` runs as
written (``Sequential`` is documented with ``rnnfast.keras``)."""

from __future__ import annotations

import os

from ._layer_configs import from_config
from .model import Sequential
from .saving import compile_from_config, read_model_file, read_weights_bytes

__all__ = ["load_model"]


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):
    """Keras's ``keras.models.load_model`` for a ``.keras`` file: the front's Sequential with
    the saved layers, weights and (``compile=True``) compile settings. ``safe_mode`` is
    accepted: the format here holds no code to run."""
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
    if config.get("class_name") != "Sequential":
        raise NotImplementedError(
            f"load_model: {path!r} holds a {config.get('class_name')}; the front loads a Sequential"
        )
    inner = config.get("config", {})
    model = Sequential(name=inner.get("name"))
    shape = inner.get("build_input_shape") or config.get("build_config", {}).get("input_shape")
    for entry in inner.get("layers", []):
        if entry.get("class_name") == "InputLayer":
            shape = entry["config"].get("batch_shape") or shape
            continue
        model.add(from_config(entry))
    if shape is None:
        raise ValueError(f"load_model: {path!r} has no input shape; the model cannot be built")
    model.build(tuple(shape))
    read_weights_bytes(model, weights, path)
    compiled = config.get("compile_config")
    if compile and compiled:
        compile_from_config(model, compiled)
    return model
