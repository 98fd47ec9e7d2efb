"""``rnnfast.quantize(model, "bf16" | "int8")``: inference-only copies of float32 models with
bfloat16 or int8 weights (per output row symmetric scales), float32 activations in and out.

The copy has the model's structure, with every layer replaced by its quantized class
(``nn.quantized``, ``nn.quantized_rnn``): containers (Sequential, rnnfast.Module subclasses,
Seq2Seq) are copied with their children quantized recursively. The original is not changed.
"""

from __future__ import annotations

import copy

import numpy as np

from .nn.dropout import Dropout
from .nn.embedding import Embedding
from .nn.linear import Linear
from .nn.module import Module
from .nn.quantized import QuantizedDropout, QuantizedEmbedding, QuantizedLinear
from .nn.quantized_formats import MODES
from .nn.quantized_rnn import QuantizedRNN
from .nn.rnn import RNN
from .nn.seq2seq import Seq2Seq
from .nn.sequential import Sequential

__all__ = ["ERROR_BOUND", "MODES", "quantize"]

# The stated error of a quantized copy against its float32 model, tested in tests/test_quantize.py
# and checked by bench.peers.compare before it times anything: relative error ||y_q - y|| / ||y||
# (Frobenius) of a model's outputs, for models initialised as PyTorch does (weights
# U(-1/sqrt(H), 1/sqrt(H))) on standard-normal inputs. bf16 keeps 8 significant bits (relative
# rounding 2^-9 of every weight and activation), int8 about 7 of the largest entry of each row;
# the errors of a stack of layers add up over its depth and steps.
ERROR_BOUND = {"bf16": 2e-2, "int8": 5e-2}

# float layer class -> its quantized copy's; exact classes only: a subclass of the user's may
# compute something the quantized class does not
_LAYERS = {
    RNN: QuantizedRNN,
    Linear: QuantizedLinear,
    Embedding: QuantizedEmbedding,
    Dropout: QuantizedDropout,
}


def quantize(model, mode):
    """An inference-only copy of ``model`` with ``mode`` weights.

    Parameters
    ----------
    model : RNN, Linear/Dense, Embedding, Dropout, Sequential, a subclass of rnnfast.Module,
        or Seq2Seq (containers may nest), float32
    mode : {"bf16", "int8"}
        ``"bf16"``: weights rounded to bfloat16 (to nearest even), products summed in float32.
        ``"int8"``: weights as int8 with one symmetric scale per output row (``max |w| / 127``),
        activations quantized per row at each use, products summed in int32. Biases and
        everything outside the products stay float32; Embedding tables are quantized per row
        and looked up as float32.

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
    return _copy(model, mode, "model")


def _copy(obj, mode, where):
    """The quantized copy of ``obj``, found at ``where`` in the model (for messages)."""
    done = getattr(obj, "quantized", None)
    if done is not None:
        raise ValueError(
            f"{where}: {type(obj).__name__} is already a quantized ({done}) inference copy; "
            "quantize the float32 model it was made from (quantizing twice would round twice)"
        )
    layer_cls = _LAYERS.get(type(obj))
    if layer_cls is not None:
        _check_float32(obj, where)
        return layer_cls.from_float(obj, mode)
    if type(obj) is Sequential:
        q = Sequential([_copy(c, mode, f"{where}.layers[{i}]") for i, c in enumerate(obj.layers)])
        return _mark(q, mode)
    if isinstance(obj, Module):
        return _copy_module(obj, mode, where)
    if type(obj) is Seq2Seq:
        return _copy_seq2seq(obj, mode, where)
    raise ValueError(
        f"{where}: a {type(obj).__name__} cannot be quantized; rnnfast.quantize takes RNN, "
        "Linear/Dense, Embedding, Dropout, Sequential, rnnfast.Module subclasses and Seq2Seq "
        "(with their exact classes: a subclass of a layer may compute what the quantized "
        "kernels do not)"
    )


def _check_float32(layer, where):
    dtype = np.dtype(layer.dtype)
    if dtype != np.float32:
        raise TypeError(
            f"{where}: {type(layer).__name__} has dtype {dtype.name}; rnnfast.quantize takes "
            "float32 models: build the same model with dtype=np.float32 and copy the weights "
            "into it (model32.load_state_dict(model.state_dict()) converts them), then quantize"
        )


def _mark(q, mode):
    """A container copy as an inference copy: eval mode, its ``quantized`` mode recorded
    (save writes it; training refuses it)."""
    q.train(False)
    object.__setattr__(q, "quantized", mode)
    return q


def _copy_module(obj, mode, where):
    """A Module subclass copied with its children quantized: the subclass's own forward runs
    on them. Its other attributes are shared with the original (a shallow copy)."""
    children = {}
    for name, child in obj._children.items():
        if isinstance(child, list):
            children[name] = [_copy(c, mode, f"{where}.{name}[{i}]") for i, c in enumerate(child)]
        else:
            children[name] = _copy(child, mode, f"{where}.{name}")
    q = copy.copy(obj)
    object.__setattr__(q, "_children", children)
    object.__setattr__(q, "_tape", None)
    object.__setattr__(q, "_last", None)
    object.__setattr__(q, "output_mask", None)
    return _mark(q, mode)


def _copy_seq2seq(obj, mode, where):
    """A Seq2Seq copied with its five layers quantized; decoding steps through them."""
    q = copy.copy(obj)
    for name, child in obj.modules.items():
        setattr(q, name, _copy(child, mode, f"{where}.{name}"))
    q._rng = copy.deepcopy(obj._rng)  # the copy's coin flips do not advance the original's
    q._cache, q._encoder_fused, q.last_fed_tokens = None, False, None
    return _mark(q, mode)
