"""Saving and loading (``persistence``: .npz files, no pickle, and the Keras-style summary: the
functions of ``rnnfast.nn.files.persistence`` under their older path) and weights from and to PyTorch
and Keras (``interop``); ONNX export and import (``onnx``, imported on first use:
``rnnfast.io.onnx.export``). io reads the layers through their protocol and imports ``rnnfast.nn``;
``nn`` never imports io."""

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
