"""Saving and loading (``persistence``: .npz files, no pickle, and the Keras-style summary) and
weights from and to PyTorch and Keras (``interop``); ONNX export and import (``onnx``, imported
on first use: ``rnnfast.io.onnx.export``). Imports ``rnnfast.nn`` only inside its
functions (and in ``onnx``, loaded on first use), so the layers' package never depends on it at
load time."""

from . import interop, persistence
from .interop import from_torch, keras_weights, load_keras, to_torch
from .persistence import load, save

__all__ = [
    "from_torch",
    "interop",
    "keras_weights",
    "load",
    "load_keras",
    "persistence",
    "save",
    "to_torch",
]


def __getattr__(name):
    if name == "onnx":  # imported on first use (it needs the onnx package only when called)
        import importlib

        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
