"""Quantized inference copies of the layers (``rnnfast.quantize`` makes them): Linear/Dense,
Embedding and Dropout here, the RNN in ``nn.quantized.rnn``. Each is a subclass of its float
layer, so everything but the arithmetic is the float layer's own code (options, shapes,
padding, API forms); what differs is kept in ``QuantizedLayer``: weights stored as bf16 or int8
(``nn.quantized.formats``), float32 activations in and out, and no training.
"""

from __future__ import annotations

import copy

import numpy as np

from ... import _core
from ..._state_dict import check_state_dict_keys
from .._inference_only import refuse_training
from ..dropout import Dropout
from ..embedding import Embedding
from ..linear import Linear
from ..storage import storage_summary
from .formats import QuantizedWeight, dequantize_rows

__all__ = [
    "QuantizedDropout",
    "QuantizedEmbedding",
    "QuantizedLayer",
    "QuantizedLinear",
]

# What a float layer holds that its quantized copy does not take over: its parameters and
# gradients, what a training forward kept, a stateful layer's carried state, its bound step
# (bound on the float parameters), dropout streams, its products' precision (the copy
# multiplies with its own bf16 / int8 weights: the class default, float32).
_NOT_COPIED = frozenset(
    {
        "_precision",
        "_params",
        "grads",
        "_cache",
        "_state",
        "_zero_state",
        "_stepper",
        "_dropout_rng",
        "_rng",
        "training",
        # the float layer's packed weights (rnnfast._parameters) and the torch bridge's hook
        "_weight_caches",
        "_weight_cache_hook",
    }
)


class QuantizedLayer:
    """What every quantized layer does the same way (a mixin before the float layer's class).

    ``_weights``: {name: QuantizedWeight}; ``_floats``: {name: float32 array} (biases). The
    state dict holds the raw arrays (int8 data with ``<name>_scale``, or uint16 bf16 bits),
    which is what ``save`` writes; ``load_state_dict`` takes exactly those dtypes and shapes.
    """

    # the float layer's class, of which this class is a subclass: Layer.quantized_copy finds
    # the quantized class through it (no list of them), and a saved file records its name
    float_class = None

    @classmethod
    def from_float(cls, layer, mode):
        """The quantized copy of the float32 ``layer``; ``layer`` is left as it was."""
        q = cls.__new__(cls)
        # the options are small Python values: a deep copy, so nothing is shared with the float
        # layer (its parameters are quantized below, not copied). dtypes are immutable and stay
        # the same objects: the streaming hot path tests ``h.dtype is self._dtype``.
        options = {k: v for k, v in layer.__dict__.items() if k not in _NOT_COPIED}
        same = {id(v): v for v in options.values() if isinstance(v, np.dtype)}
        q.__dict__.update(copy.deepcopy(options, same))
        q._mode = mode
        q.training = False
        q._cache = None
        q._weights, q._floats = {}, {}
        q._quantize_parameters(layer)
        return q

    def _quantize_parameters(self, layer):
        """Fill ``_weights`` and ``_floats`` from the float layer's parameters."""

    def _add_weight(self, name, w):
        self._weights[name] = QuantizedWeight.from_float(self._mode, w)

    @property
    def quantized(self):
        """The weight format: ``"bf16"`` or ``"int8"``."""
        return self._mode

    # ---- parameters: the raw arrays, for save and load only -----------------------------------

    @property
    def _params(self):
        """The live raw arrays under their state_dict names."""
        out = {}
        for name, w in self._weights.items():
            out.update(w.arrays(name))
        out.update(self._floats)
        return out

    def state_dict(self):
        return {name: a.copy() for name, a in self._params.items()}

    def dequantized_params(self):
        """The float layer's parameters as this copy computes with them: {float name: float32
        array}, weights dequantized (what an ONNX export of the copy stores; the float layer
        loads them as they are)."""
        out = {name: w.dequantized() for name, w in self._weights.items()}
        out.update({name: a.copy() for name, a in self._floats.items()})
        return out

    def load_state_dict(self, state_dict):
        """Load raw quantized arrays (what ``state_dict`` returns): every key, dtype and shape is
        checked before anything changes; the kernels' packed copies are made again."""
        current = self._params
        check_state_dict_keys(state_dict, current)
        for name, arr in current.items():
            value = np.asarray(state_dict[name])
            if value.dtype != arr.dtype or value.shape != arr.shape:
                raise ValueError(
                    f"{name}: expected a {arr.dtype} array of shape {arr.shape} (the quantized "
                    f"layer's raw array), got {value.dtype} of shape {value.shape}"
                )
        for name, w in self._weights.items():
            w.set_arrays(state_dict[name], state_dict.get(name + "_scale"))
        for name, arr in self._floats.items():
            arr[...] = state_dict[name]

    # ---- no training -------------------------------------------------------------------------

    def random_generators(self):
        """None: a quantized copy runs in eval mode only and draws no masks (nor keeps the float
        layer's generators)."""
        return {}

    def named_parameters(self):
        refuse_training(self, "named_parameters")

    def parameters(self):
        refuse_training(self, "parameters")

    @property
    def grads(self):
        refuse_training(self, "grads")

    def zero_grad(self):
        refuse_training(self, "zero_grad")

    def backward(self, *args, **kwargs):
        refuse_training(self, "backward")

    def train(self, mode=True):
        if mode:
            refuse_training(self, "train")
        self.training = False
        return self

    def eval(self):
        return self.train(False)

    # ---- description -------------------------------------------------------------------------

    def keras_param_count(self):
        """Weights and biases (the int8 scales are not parameters): the float layer's count
        in Keras's layout (an RNN's two biases are stored as their sum)."""
        return sum(w.data.size for w in self._weights.values()) + sum(
            a.size for a in self._floats.values()
        )

    def num_parameters(self):
        return self.keras_param_count()

    @property
    def nbytes(self):
        """Bytes of the stored arrays: quantized weights, their scales, float32 biases."""
        return sum(a.nbytes for a in self._params.values())

    @property
    def float32_nbytes(self):
        """Bytes the float32 layer it was made from stores."""
        return 4 * self.keras_param_count()

    def summary(self):
        """Print (and return) the weight type and bytes of the layer (``storage_summary``)."""
        text = storage_summary(self)
        print(text)
        return text

    def __repr__(self):
        return f"Quantized[{self._mode}]{super().__repr__()}"


class QuantizedLinear(QuantizedLayer, Linear):
    """Linear/Dense with a bf16 or int8 weight (per output row scales), float32 bias."""

    float_class = Linear

    def _quantize_parameters(self, layer):
        self._add_weight("weight", layer._params["weight"])
        if layer.bias:
            self._floats["bias"] = layer._params["bias"].copy()

    def project(self, rows):
        return _core.quantized_dense(
            np.ascontiguousarray(rows, dtype=np.float32),
            self._weights["weight"].packed,
            self._floats.get("bias"),
        )


class QuantizedEmbedding(QuantizedLayer, Embedding):
    """Embedding whose table rows are quantized one by one (int8: a scale per row) and
    dequantized to float32 when looked up."""

    float_class = Embedding

    def _quantize_parameters(self, layer):
        self._add_weight("weight", layer._params["weight"])

    @property
    def weight(self):
        """The dequantized table (float32), as a float layer reading this one would see it."""
        return self._weights["weight"].dequantized()

    def lookup(self, ids):
        w = self._weights["weight"]
        return dequantize_rows(w.data[ids], None if w.scale is None else w.scale[ids])


class QuantizedDropout(QuantizedLayer, Dropout):
    """Dropout in an inference copy: the identity (no weights)."""

    float_class = Dropout
