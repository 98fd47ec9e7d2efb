"""``rnnfast.quantize(model, "bf16" | "int8")``: inference-only copies of float32 models with
bfloat16 or int8 weights (per output row symmetric scales), float32 activations in and out.

The copy has the model's structure, with every layer replaced by its quantized class
(``nn.quantized.layers``, ``nn.quantized.rnn``, ``nn.quantized.gated``): containers (Sequential, rnnfast.Module subclasses,
Seq2Seq) are copied with their children quantized recursively. The original is not changed.
Each layer makes its own copy (``quantized_copy``, the layer protocol's): a float layer's is made
by the quantized class that names the layer's class as its ``float_class``.
"""

from __future__ import annotations

from .nn._layer import quantize_layer
from .nn.quantized.formats import MODES

__all__ = ["ERROR_BOUND", "MODES", "quantize"]

# The stated error of a quantized copy against its float32 model, tested in tests/test_quantize.py
# and checked by bench.peers.compare before it times anything: relative error ||y_q - y|| / ||y||
# (Frobenius) of a model's outputs, for models initialised as PyTorch does (weights
# U(-1/sqrt(H), 1/sqrt(H))) on standard-normal inputs. bf16 keeps 8 significant bits (relative
# rounding 2^-9 of every weight and activation), int8 about 7 of the largest entry of each row;
# the errors of a stack of layers add up over its depth and steps.
ERROR_BOUND = {"bf16": 2e-2, "int8": 5e-2}


def quantize(model, mode):
    """An inference-only copy of ``model`` with ``mode`` weights.

    Parameters
    ----------
    model : RNN, GRU, LSTM, Linear/Dense, Embedding, Dropout, Sequential, a subclass of
        rnnfast.Module, or Seq2Seq (containers may nest), float32
    mode : {"bf16", "int8"}
        ``"bf16"``: weights rounded to bfloat16 (to nearest even), products summed in float32.
        ``"int8"``: weights as int8 with one symmetric scale per output row (``max |w| / 127``),
        activations quantized per row at each use, products summed in int32. Biases and
        everything outside the products stay float32 (a GRU's and LSTM's gates and state
        updates too); Embedding tables are quantized per row and looked up as float32.

    Returns
    -------
    The copy, in eval mode: calls, ``step``, stateful layers, lengths, decoding, ``summary``,
    ``save`` and ``rnnfast.load`` work as on the float model; ``backward``, ``train()``,
    gradients and optimizers raise RuntimeError.

    Raises
    ------
    ValueError
        An unknown mode, a model that is already a quantized copy, a layer rnnfast.quantize has
        no quantized form of (named with its place in the model).
    TypeError
        A model that is not float32 (float64: convert it first, as the message says).
    """
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    return quantize_layer(model, mode, "model")
