"""What the layers beside RNN share: the layer protocol that Sequential, Module, the optimizers and
the training loops rely on: ``layer(x)`` and ``layer.backward(d_out) -> d_in`` (after a call in
training mode), ``named_parameters()`` / ``parameters()`` (live arrays), ``grads`` (same keys,
accumulated), ``zero_grad()``, ``state_dict()`` / ``load_state_dict()``, ``train()`` / ``eval()``,
``get_config()`` and ``keras_param_count()``.
"""

from __future__ import annotations

import numpy as np

from .._parameters import ParameterOwner
from .._validation import (
    layer_dtype,
)

__all__ = ["Layer"]


class Layer(ParameterOwner):
    """Parameters, gradients, modes and state dicts: what every layer does the same way."""

    def __init__(self, dtype):
        self.dtype = layer_dtype(dtype)
        self._params = {}
        self.grads = {}
        self.training = True
        self._cache = None

    def _add_parameter(self, name, value):
        self._params[name] = np.ascontiguousarray(value, dtype=self.dtype)
        self.grads[name] = np.zeros_like(self._params[name])

    def __call__(self, x):
        return self.forward(x)

    def _take_cache(self):
        if self._cache is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward: no training forward to differentiate; call the "
                "layer in training mode first (each forward allows one backward)"
            )
        cache, self._cache = self._cache, None
        return cache

    def keras_param_count(self):
        return sum(p.size for p in self._params.values())
