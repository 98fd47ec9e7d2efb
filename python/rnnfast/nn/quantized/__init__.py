"""The quantized inference copies of the layers (``rnnfast.quantize`` makes them): Linear/Dense,
Embedding and Dropout (``layers``), RNN (``rnn``), GRU and LSTM (``gated``), and their weights
stored as bf16 or int8 (``formats``). ``rnnfast.nn`` re-exports the layers."""

# rnnfast.nn.quantized was the module of these classes before it became this package: layers
# pickled then name them by that path
from .layers import QuantizedDropout, QuantizedEmbedding, QuantizedLayer, QuantizedLinear

__all__ = ["QuantizedDropout", "QuantizedEmbedding", "QuantizedLayer", "QuantizedLinear"]
