"""Linear (Keras's Dense): y = act(x W^T + b) over the last axis, on rnnfast's own GEMMs."""

from __future__ import annotations

import math

import numpy as np

from .. import _core
from .._validation import as_float_array, check_bool, check_positive_int, time_major_in_memory
from ._layer import Layer
from ._shapes import constructor_arguments, flag, size
from .activations import activation_backward, activation_forward, check_activation

__all__ = ["Dense", "Linear"]


class Linear(Layer):
    """``y = act(x W^T + b)`` over the last axis (PyTorch's ``nn.Linear``; Keras's ``Dense``).

    Parameters ``weight`` (out_features, in_features) and ``bias`` (out_features,), initialised
    U(-1/sqrt(in_features), 1/sqrt(in_features)) as PyTorch. Any leading shape is allowed.

    activation : {None, "linear", "relu", "tanh", "sigmoid", "softmax"}
        Keras's ``Dense(activation=)``, applied to the last axis: None (the default) and
        "linear" are the identity, PyTorch's Linear; "softmax" normalises over the features.
        May be assigned later (checked as here). With an activation, a training forward keeps
        its output for the backward and returns it read-only. A loss that wants the logits
        of a softmax or sigmoid layer (stable cross-entropy) reads them with the activation set
        to None.
    """

    # a class default, so that layers pickled before ``activation`` existed load as the identity
    _activation = None
    # both products (forward and backward) are rnnfast's GEMM: bf16 mixed precision reaches them
    kernel_products = True

    def __init__(
        self, in_features, out_features, bias=True, dtype=np.float32, seed=None, *, activation=None
    ):
        super().__init__(dtype)
        self.in_features = check_positive_int("in_features", in_features)
        self.out_features = check_positive_int("out_features", out_features)
        self.bias = check_bool("bias", bias)
        self.seed = seed
        self.activation = activation
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.in_features)
        self.add_parameter(
            "weight", rng.uniform(-bound, bound, (self.out_features, self.in_features))
        )
        if self.bias:
            self.add_parameter("bias", rng.uniform(-bound, bound, self.out_features))

    @property
    def activation(self):
        """The output activation: None (the identity), "relu", "tanh", "sigmoid" or
        "softmax" ("linear" is stored as None)."""
        return self._activation

    @activation.setter
    def activation(self, value):
        self._activation = check_activation(value)

    def forward(self, x):
        x_user = np.asarray(x)
        # A batch-first sequence that is time-major in memory (a batch_first RNN's output) is
        # computed in its memory order, and the output handed back in the same layout: no copy.
        swap = time_major_in_memory(x_user)
        x = as_float_array("x", x_user.swapaxes(0, 1) if swap else x_user, self.dtype)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            shape = x_user.shape
            raise ValueError(
                f"x: expected shape (..., in_features={self.in_features}), got shape {shape}"
            )
        rows = x.reshape(-1, self.in_features)
        y = self.project(rows).reshape(x.shape[:-1] + (self.out_features,))
        activation = self.activation
        y = activation_forward(activation, y)
        # backward needs this x: the caller may reuse its array meanwhile, unless it is read-only
        # (as rnnfast layers hand out their training outputs)
        if self.training and x_user.flags.writeable and np.may_share_memory(x, x_user):
            x = x.copy()
        # the activation's backward reads the output: kept, and handed out read-only
        kept = None
        if self.training and activation is not None:
            kept, y = y, y.view()
            y.flags.writeable = False
        self._cache = (x, swap, activation, kept) if self.training else None
        return y.swapaxes(0, 1) if swap else y

    def project(self, rows):
        """``rows W^T + b`` of rows (M, in_features) of the layer's dtype, C-contiguous: the
        product alone, nothing kept for backward (decoders step with it)."""
        return _core.dense_forward(rows, self._params["weight"], self._params.get("bias"))

    def backward(self, dy):
        cache = self._take_cache()
        # x (and the output) in memory order: time-major when the forward's input was
        x, swap, activation, y = cache
        expected = x.shape[:-1] + (self.out_features,)
        if swap:
            expected = (expected[1], expected[0]) + expected[2:]
        try:
            dy = np.asarray(dy)
            fits = dy.shape == expected
            dy_rows = as_float_array("dy", dy.swapaxes(0, 1) if swap and fits else dy, self.dtype)
            if not fits:
                raise ValueError(f"dy: expected shape {expected}, got shape {dy.shape}")
        except (TypeError, ValueError):
            self._cache = cache  # a failed call keeps the forward for a retry
            raise
        if activation is not None:
            dy_rows = activation_backward(activation, y, dy_rows)
        rows = np.ascontiguousarray(dy_rows).reshape(-1, self.out_features)
        # rnnfast's own GEMM, not NumPy's: one thread pool for the whole model
        dx = _core.dense_backward(
            x.reshape(-1, self.in_features), self._params["weight"], rows, self.grads["weight"]
        )
        if self.bias:
            self.grads["bias"] += rows.sum(axis=0)
        dx = dx.reshape(x.shape)
        return dx.swapaxes(0, 1) if swap else dx

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a Linear built from ``config``, without building it."""
        args = constructor_arguments(cls, config)
        out = size(args, "out_features")
        shapes = {"weight": (out, size(args, "in_features"))}
        if flag(args, "bias", True):
            shapes["bias"] = (out,)
        return shapes

    def get_config(self):
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "bias": self.bias,
            "dtype": self.dtype.name,
            "seed": self.seed,
            "activation": self.activation,
        }

    def output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.out_features,)

    def __repr__(self):
        shown = "" if self.activation is None else f", activation={self.activation!r}"
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias}{shown})"

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: as a model's first layer it reads float features of this width."""
        return self.in_features

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: ``MatMul`` by W^T, then ``Add`` of the bias, then the activation's
        node (``Relu``, ``Tanh``, ``Sigmoid``, ``Softmax`` over the last axis)."""
        p = exporter.float_params(self)
        label = f"Linear({self.in_features}, {self.out_features})"
        out = exporter.linear(flow, who, p["weight"], p.get("bias"), label)
        if self.activation is None:
            return out
        op = _ONNX_ACTIVATIONS[self.activation]
        attributes = {"axis": -1} if op == "Softmax" else {}
        return out.derive(exporter.graph.op(op, [out.value], **attributes))


_ONNX_ACTIVATIONS = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softmax": "Softmax"}


Dense = Linear
