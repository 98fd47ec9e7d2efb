"""``rnnfast.persistence`` (``rnnfast.io.persistence``): saving and loading layers as .npz files,
no pickle, and the RNN's Keras-style summary table. The code lives with the layers, which it
needs only through their protocol (``rnnfast.nn.files.persistence``, ``rnnfast.nn.recurrent.rnn_summary``); these
are the same functions under the paths they have always had.
"""

from __future__ import annotations

from ..nn.files.persistence import FORMAT_VERSION, build_layer, layer_config, load, save  # noqa: F401
from ..nn.recurrent.rnn_summary import keras_param_count, summary_text  # noqa: F401

__all__ = ["save", "load", "layer_config", "summary_text", "FORMAT_VERSION"]
