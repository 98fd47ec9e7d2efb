"""Linear (Keras's Dense): y = x W^T + b over the last axis, on rnnfast's own GEMMs."""

from __future__ import annotations

import math

import numpy as np

from .. import _core
from .._validation import as_float_array, check_bool, check_positive_int, time_major_in_memory
from ._layer import Layer

__all__ = ["Dense", "Linear"]


class Linear(Layer):
    """``y = x W^T + b`` over the last axis (PyTorch's ``nn.Linear``; Keras's ``Dense``).

    Parameters ``weight`` (out_features, in_features) and ``bias`` (out_features,), initialised
    U(-1/sqrt(in_features), 1/sqrt(in_features)) as PyTorch. Any leading shape is allowed.
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__(dtype)
        self.in_features = check_positive_int("in_features", in_features)
        self.out_features = check_positive_int("out_features", out_features)
        self.bias = check_bool("bias", bias)
        self.seed = seed
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.in_features)
        self.add_parameter(
            "weight", rng.uniform(-bound, bound, (self.out_features, self.in_features))
        )
        if self.bias:
            self.add_parameter("bias", rng.uniform(-bound, bound, self.out_features))

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
        # backward needs this x: the caller may reuse its array meanwhile, unless it is read-only
        # (as rnnfast layers hand out their training outputs)
        if self.training and x_user.flags.writeable and np.may_share_memory(x, x_user):
            x = x.copy()
        self._cache = (x, swap) if self.training else None
        return y.swapaxes(0, 1) if swap else y

    def project(self, rows):
        """``rows W^T + b`` of rows (M, in_features) of the layer's dtype, C-contiguous: the
        product alone, nothing kept for backward (decoders step with it)."""
        return _core.dense_forward(rows, self._params["weight"], self._params.get("bias"))

    def backward(self, dy):
        cache = self._take_cache()
        x, swap = cache  # x in memory order: time-major when the forward's input was
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
        rows = dy_rows.reshape(-1, self.out_features)
        # rnnfast's own GEMM, not NumPy's: one thread pool for the whole model
        dx = _core.dense_backward(
            x.reshape(-1, self.in_features), self._params["weight"], rows, self.grads["weight"]
        )
        if self.bias:
            self.grads["bias"] += rows.sum(axis=0)
        dx = dx.reshape(x.shape)
        return dx.swapaxes(0, 1) if swap else dx

    def get_config(self):
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "bias": self.bias,
            "dtype": self.dtype.name,
            "seed": self.seed,
        }

    def output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.out_features,)

    def __repr__(self):
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias})"

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: as a model's first layer it reads float features of this width."""
        return self.in_features

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: ``MatMul`` by W^T, then ``Add`` of the bias."""
        p = exporter.float_params(self)
        label = f"Linear({self.in_features}, {self.out_features})"
        return exporter.linear(flow, who, p["weight"], p.get("bias"), label)


Dense = Linear
