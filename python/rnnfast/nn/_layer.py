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

__all__ = ["positive_int", "Layer"]


def positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


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

    def load_state_dict(self, state_dict):
        """Checks every key and shape first; on an error nothing changes."""
        missing = [k for k in self._params if k not in state_dict]
        extra = [k for k in state_dict if k not in self._params]
        if missing or extra:
            raise ValueError(f"state_dict: missing key(s) {missing}, unexpected key(s) {extra}")
        loaded = {}
        for name, current in self._params.items():
            value = state_dict[name]
            arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
            if arr.shape != current.shape:
                raise ValueError(f"{name}: expected shape {current.shape}, got shape {arr.shape}")
            loaded[name] = np.array(arr, dtype=self.dtype)
        for name, arr in loaded.items():
            self._params[name][...] = arr

    def keras_param_count(self):
        return sum(p.size for p in self._params.values())
