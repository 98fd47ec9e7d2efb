"""The rnnfast layer behind Keras's ``Masking(mask_value)``: a step whose features all equal
``mask_value`` is padding. It zeroes those steps (Keras multiplies by the mask) and hands the
valid mask on (``nn.masking``), so the recurrent layers after it skip them as Keras's do."""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array
from ..nn import Layer

__all__ = ["MaskingCore"]


class MaskingCore(Layer):
    """``out = x * valid[..., None]``, ``valid = any(x != mask_value, axis=-1)`` (joined with
    the valid mask that came in), batch first."""

    def __init__(self, mask_value=0.0, dtype=np.float32):
        super().__init__(dtype)
        self.mask_value = float(mask_value)

    def _valid(self, x):
        return np.any(x != self.mask_value, axis=-1)

    def forward(self, x):
        x = as_float_array("x", x, self.dtype)
        keep = self._valid(x)[..., None].astype(self.dtype)
        self._cache = keep if self.training else None
        return x * keep

    def backward(self, d_out):
        keep = self._take_cache()
        return np.asarray(d_out, dtype=self.dtype) * keep

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        x = as_float_array("x", x, self.dtype)
        if x.ndim < 3:
            raise ValueError(
                f"{who}: Masking expects inputs (batch, timesteps, features), got shape {x.shape}"
            )
        own = self._valid(x)
        return self.forward(x), own if valid is None else (valid & own), None

    def get_config(self):
        return {"mask_value": self.mask_value, "dtype": self.dtype.name}

    def output_shape(self, input_shape):
        return tuple(input_shape)
