"""Saving and loading (``persistence``: .npz files, no pickle, and the Keras-style summary) and
weights from and to PyTorch and Keras (``interop``). Imports ``rnnfast.nn`` only inside its
functions, so the layers' package never depends on it at load time."""

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
