"""Layers and containers: the RNN layer (``rnn``: its API forms; ``stack``: its stack runner over
layers x directions x batch order x reversal), Linear/Dense, Embedding, Dropout, Sequential and
the general container Module, Seq2Seq, JordanRNN, DeepTransitionRNN
(``deep_transition``), their quantized inference copies
(``quantized``, ``quantized_rnn``; ``rnnfast.quantize`` makes them), how padding travels
through models (``masking``) and saving and loading (``persistence``, the .npz format). Each is a
subclass of ``Layer``, the layer protocol (``_layer``): what the containers, training, summary,
persistence and quantization ask of a layer. ``nn`` never imports ``rnnfast.io``."""

from . import seq2seq
from ._layer import Layer
from .deep_transition import DeepTransitionRNN
from .dropout import Dropout
from .embedding import Embedding
from .gated import GRU, LSTM
from .gated_cells import GRUCell, LSTMCell
from .jordan import JordanRNN
from .linear import Dense, Linear
from .masking import PaddingWarning
from .module import Module
from .quantized import QuantizedDropout, QuantizedEmbedding, QuantizedLinear
from .quantized_gated import QuantizedGRU, QuantizedLSTM
from .quantized_rnn import QuantizedRNN
from .rnn import RNN
from .seq2seq import Seq2Seq
from .sequential import Sequential

__all__ = [
    "GRU",
    "GRUCell",
    "LSTM",
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
    "seq2seq",
]
