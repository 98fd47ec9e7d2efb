"""The number formats of quantized inference, in NumPy (the contract with the kernels, issue 16),
and the weight matrix that carries them to the kernels.

int8: per output row j of W (N, K), symmetric: ``scale_j = max_k |W[j, k]| / 127`` and
``q[j, k] = clip(rint(W[j, k] * (127 / max_k |W[j, k]|)), -127, 127)``, all in float32 (rint
rounds half to even); a zero row has scale 0 and q 0. bf16: W rounded to bfloat16, to nearest
even (a NaN stays a NaN), kept as its uint16 bits.
"""

from __future__ import annotations

import numpy as np

from ... import _core

__all__ = [
    "MODES",
    "QuantizedWeight",
    "bf16_bits",
    "bf16_to_float32",
    "dequantize_rows",
    "int8_rows",
]

MODES = ("bf16", "int8")


def int8_rows(w):
    """``(q int8 (N, K), scale float32 (N,))`` of a float32 matrix, per output row."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.max(np.abs(w), axis=1) if w.shape[1] else np.zeros(w.shape[0], np.float32)
    scale = amax / np.float32(127)
    nonzero = amax > 0
    # 127 / amax in float32, as the contract says (not 1 / scale: that rounds twice)
    inv = np.divide(np.float32(127), amax, out=np.zeros_like(amax), where=nonzero)
    q = np.clip(np.rint(w * inv[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def bf16_bits(w):
    """The bfloat16 bits (uint16) of a float32 array, rounded to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    # adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(np.asarray(w, dtype=np.float32))
    # a NaN's payload may round into the exponent (an infinity): keep it a quiet NaN
    out = np.where(nan, (bits >> 16) | np.uint32(0x0040), rounded)
    return out.astype(np.uint16)


def bf16_to_float32(bits):
    """float32 values of bfloat16 bits (exact: bfloat16 is float32's upper half)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def dequantize_rows(data, scale):
    """float32 rows of quantized rows: ``q * scale`` per row for int8 (scale (..., )), or the
    bf16 bits' values (scale None)."""
    if scale is None:
        return bf16_to_float32(data)
    return data.astype(np.float32) * scale[..., None]


class QuantizedWeight:
    """One quantized matrix (N, K): its raw arrays (``data`` int8 with ``scale`` float32 (N,), or
    ``data`` uint16 bf16 bits with ``scale`` None), which are what is saved, and the kernels'
    packed copies (``_core.QuantizedMatrix``: one layout that every quantized path reads; a gated
    cell's in its gate layout), made on first use and again when the raw arrays are loaded anew.
    The packed copies are never pickled: they are rebuilt from the raw arrays."""

    def __init__(self, kind, data, scale=None):
        if kind not in MODES:
            raise ValueError(f"kind: expected one of {MODES}, got {kind!r}")
        self.kind = kind
        self.data = data
        self.scale = scale
        self._packed = None

    @classmethod
    def from_float(cls, kind, w):
        """The matrix ``w`` (float32 (N, K)) quantized as ``kind`` says."""
        if kind == "int8":
            return cls(kind, *int8_rows(w))
        return cls(kind, bf16_bits(w))

    @property
    def shape(self):
        return self.data.shape

    @property
    def nbytes(self):
        """Bytes of the raw arrays (the data and its scales)."""
        return self.data.nbytes + (0 if self.scale is None else self.scale.nbytes)

    @property
    def packed(self):
        """The kernels' copy."""
        return self.packed_rows(0, self.data.shape[0], 1)

    def packed_rows(self, start, stop, gates):
        """The kernels' copy of rows [start, stop), packed for a gated cell's ``gates`` gate
        groups (``functional.quantized_gated``; 1: rows as they are), made once per form."""
        if self._packed is None:
            self._packed = {}
        key = (start, stop, gates)
        if key not in self._packed:
            scale = None if self.scale is None else self.scale[start:stop]
            self._packed[key] = _core.QuantizedMatrix(
                self.kind, self.data[start:stop], scale, gates
            )
        return self._packed[key]

    def float_rows(self, start, stop):
        """The float32 values of rows [start, stop) (dequantized), made once: what a layer that
        falls back to float32 products multiplies with."""
        if self._packed is None:
            self._packed = {}
        key = ("float32", start, stop)
        if key not in self._packed:
            scale = None if self.scale is None else self.scale[start:stop]
            self._packed[key] = dequantize_rows(self.data[start:stop], scale)
        return self._packed[key]

    def arrays(self, name):
        """The raw arrays under their state_dict names: ``name`` and ``name + "_scale"``."""
        if self.scale is None:
            return {name: self.data}
        return {name: self.data, name + "_scale": self.scale}

    def set_arrays(self, data, scale):
        """Load new raw arrays (checked by the caller); the packed copies are made again."""
        self.data[...] = data
        if self.scale is not None:
            self.scale[...] = scale
        self._packed = None

    def dequantized(self):
        """The float32 matrix the quantized one stands for."""
        return dequantize_rows(self.data, self.scale)

    def __getstate__(self):
        return {**self.__dict__, "_packed": None}
