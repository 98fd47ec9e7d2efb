"""Keras code on rnnfast: ``from rnnfast.keras import Sequential, SimpleRNN, Dense`` and the
Keras 3 ``Sequential`` code of a notebook or a course runs as written, on rnnfast's kernels.

A thin front: each layer builds the rnnfast layer that computes it (``rnnfast.RNN``, ``GRU``,
``LSTM``, ``Dense``, ``Dropout``, ``Embedding``) and the model is an ``rnnfast.Sequential``
trained by ``rnnfast.training``; nothing is computed twice. Keras's names and meanings hold
throughout this package (an exception to rnnfast's PyTorch names): a recurrent layer's
``dropout`` is Keras's, on its inputs (rnnfast's ``input_dropout``), ``units`` its width,
``use_bias`` its bias; weights are in Keras's layout, so ``set_weights(keras_model.
get_weights())`` moves them from a Keras model to its twin here, and back.
"""

from __future__ import annotations

import os

# Keras 3 picks its backend when it is first imported, and TensorFlow (its default) is rarely
# installed beside rnnfast: code that imports rnnfast.keras before keras (for Keras's
# callbacks, optimizers or losses) gets the torch backend without setting KERAS_BACKEND. A
# value already set wins. The front imports keras only to read Keras objects it is given.
os.environ.setdefault("KERAS_BACKEND", "torch")

from . import callbacks, layers, models, optimizers
from .functional import Model
from .layers import (
    GRU,
    LSTM,
    Bidirectional,
    Dense,
    Dropout,
    Embedding,
    Input,
    Masking,
    SimpleRNN,
    TimeDistributed,
)
from .model import History, Sequential
from .models import load_model

__all__ = [
    "GRU",
    "LSTM",
    "Bidirectional",
    "Dense",
    "Dropout",
    "Embedding",
    "History",
    "Input",
    "Masking",
    "Model",
    "Sequential",
    "SimpleRNN",
    "TimeDistributed",
    "callbacks",
    "layers",
    "load_model",
    "models",
    "optimizers",
]
