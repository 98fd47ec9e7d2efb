"""Layers and containers. By theme:

- ``recurrent/``: the recurrent layers (``rnn``: RNN and the machinery every recurrent layer
  shares; ``gated``: GRU, LSTM; ``deep_transition``; ``jordan``), the cell descriptions
  (``cells``), the stack runner (``stack``: layers x directions x batch order x reversal x
  dilation) and the options, API forms, rings and one-step code around them;
- ``quantized/``: the quantized inference copies (``rnnfast.quantize`` makes them) and their
  weight formats;
- ``files/``: saving and loading, the .npz format;
- here: the layer protocol (``_layer``: what the containers, training, summary, persistence and
  quantization ask of a layer), Linear/Dense, Embedding, Dropout, Sequential, the general
  container Module, Seq2Seq, many streams stepped on one layer (``streams``), and how padding
  travels through models (``masking``).

``nn`` never imports ``rnnfast.io``."""

import importlib as _importlib
import sys as _sys

from . import seq2seq
from ._layer import Layer
from .dropout import Dropout
from .embedding import Embedding
from .linear import Dense, Linear
from .masking import PaddingWarning
from .module import Module
from .quantized.gated import QuantizedGRU, QuantizedLSTM
from .quantized.layers import QuantizedDropout, QuantizedEmbedding, QuantizedLinear
from .quantized.rnn import QuantizedRNN
from .recurrent.deep_transition import DeepTransitionRNN
from .recurrent.gated import GRU, LSTM, LayerNormLSTM
from .recurrent.gated_cells import GRUCell, LSTMCell
from .recurrent.jordan import JordanRNN
from .recurrent.rnn import RNN
from .seq2seq import Seq2Seq
from .sequential import Sequential
from .streams import Streams

__all__ = [
    "GRU",
    "GRUCell",
    "LSTM",
    "LayerNormLSTM",
    "LSTMCell",
    "RNN",
    "DeepTransitionRNN",
    "Dense",
    "Dropout",
    "Embedding",
    "JordanRNN",
    "Layer",
    "Linear",
    "Module",
    "PaddingWarning",
    "QuantizedDropout",
    "QuantizedEmbedding",
    "QuantizedLinear",
    "QuantizedGRU",
    "QuantizedLSTM",
    "QuantizedRNN",
    "Seq2Seq",
    "Sequential",
    "Streams",
    "seq2seq",
]

# Where each module was before nn/ had subpackages: a layer pickled then names its class by the
# old path (rnnfast.nn.rnn.RNN), and pickle imports that module by name. (rnnfast.nn.quantized,
# now a package, gives its old classes itself.) Saved .npz files name only the class.
_MOVED = {
    "cells": "recurrent.cells",
    "deep_transition": "recurrent.deep_transition",
    "dilation": "recurrent.dilation",
    "gated": "recurrent.gated",
    "gated_cells": "recurrent.gated_cells",
    "jordan": "recurrent.jordan",
    "rnn": "recurrent.rnn",
    "rnn_forms": "recurrent.rnn_forms",
    "rnn_options": "recurrent.rnn_options",
    "rnn_rings": "recurrent.rnn_rings",
    "rnn_streaming": "recurrent.rnn_streaming",
    "rnn_summary": "recurrent.rnn_summary",
    "rnn_torch": "recurrent.rnn_torch",
    "stack": "recurrent.stack",
    "quantized_formats": "quantized.formats",
    "quantized_rnn": "quantized.rnn",
    "quantized_gated": "quantized.gated",
    "_npz": "files._npz",
    "_file_format": "files._file_format",
    "persistence": "files.persistence",
}
for _old, _new in _MOVED.items():
    _sys.modules.setdefault(f"{__name__}.{_old}", _importlib.import_module(f"{__name__}.{_new}"))
