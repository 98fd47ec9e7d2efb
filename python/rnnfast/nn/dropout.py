"""Dropout: inverted dropout in training mode, the identity in eval mode."""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_probability, dropout_mask
from ._layer import Layer

__all__ = ["Dropout"]


class Dropout(Layer):
    """Inverted dropout: in training mode each element is zeroed with probability ``p`` and the
    rest scaled by 1/(1-p); in eval mode the identity. ``p`` in [0, 1], as torch.nn.Dropout:
    p = 1 zeroes everything (output and gradient). Masks come from a generator seeded by
    ``seed``, so runs repeat. ``p`` may be changed later; it is checked as at construction."""

    def __init__(self, p=0.5, seed=None, dtype=np.float32):
        super().__init__(dtype)
        self.p = p
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    @property
    def p(self):
        """The drop probability, in [0, 1]."""
        return self._p

    @p.setter
    def p(self, value):
        self._p = check_probability("p", value)

    def forward(self, x):
        x = as_float_array("x", x, self.dtype)
        if not self.training or self.p == 0.0:
            self._cache = (np.ones((), dtype=self.dtype), x.shape) if self.training else None
            return x.copy()
        mask = dropout_mask(self._rng, x.shape, self.p, self.dtype)
        self._cache = (mask, x.shape)
        return x * mask

    def backward(self, d_out):
        mask, shape = cache = self._take_cache()
        try:
            d_out = as_float_array("d_out", d_out, self.dtype)
        except TypeError:
            self._cache = cache  # a failed call keeps the forward for a retry
            raise
        if d_out.shape != shape:
            self._cache = cache
            raise ValueError(f"d_out: expected shape {shape}, got shape {d_out.shape}")
        return d_out * mask

    @classmethod
    def parameter_shapes(cls, config):
        """None: a Dropout has no parameters."""
        return {}

    def get_config(self):
        return {"p": self.p, "seed": self.seed, "dtype": self.dtype.name}

    def output_shape(self, input_shape):
        return tuple(input_shape)

    def random_generators(self):
        """``{"_rng": the generator of the masks}`` (see ``Layer.random_generators``)."""
        return {"_rng": self._rng}

    def __repr__(self):
        return f"Dropout(p={self.p})"

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: it reads whatever the layer after it reads."""
        return None

    def onnx_check(self, who):
        """ONNX export: random masks (training mode) have no place in an inference graph."""
        if self.training and self.p > 0.0:
            raise ValueError(
                f"{who}: Dropout(p={self.p}) in training mode draws random masks, which the "
                "exported inference graph does not; call model.eval() before export"
            )

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: the identity (the graph is the eval-mode model): no node."""
        return flow
