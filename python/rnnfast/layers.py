"""Layers beside RNN: Linear (alias Dense), Embedding and Dropout.

They share RNN's protocol, which Sequential, the optimizers and the training loops rely on:
``layer(x)`` and ``layer.backward(d_out) -> d_in`` (after a call in training mode),
``named_parameters()`` / ``parameters()`` (live arrays), ``grads`` (same keys, accumulated),
``zero_grad()``, ``state_dict()`` / ``load_state_dict()``, ``train()`` / ``eval()``,
``get_config()`` and ``keras_param_count()``.
"""

from __future__ import annotations

import math

import numpy as np

from . import _core
from ._parameters import ParameterOwner
from ._validation import (
    as_float_array,
    check_bool,
    check_probability,
    dropout_mask,
    layer_dtype,
    time_major_in_memory,
)

__all__ = ["Dense", "Dropout", "Embedding", "Linear"]


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


class _Layer(ParameterOwner):
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


class Linear(_Layer):
    """``y = x W^T + b`` over the last axis (PyTorch's ``nn.Linear``; Keras's ``Dense``).

    Parameters ``weight`` (out_features, in_features) and ``bias`` (out_features,), initialised
    U(-1/sqrt(in_features), 1/sqrt(in_features)) as PyTorch. Any leading shape is allowed.
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__(dtype)
        self.in_features = _positive_int("in_features", in_features)
        self.out_features = _positive_int("out_features", out_features)
        self.bias = check_bool("bias", bias)
        self.seed = seed
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.in_features)
        self._add_parameter("weight", rng.uniform(-bound, bound, (self.out_features,
                                                                  self.in_features)))
        if self.bias:
            self._add_parameter("bias", rng.uniform(-bound, bound, self.out_features))

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
        y = _core.dense_forward(rows, self._params["weight"], self._params.get("bias"))
        y = y.reshape(x.shape[:-1] + (self.out_features,))
        # backward needs this x: the caller may reuse its array meanwhile, unless it is read-only
        # (as rnnfast layers hand out their training outputs)
        if self.training and x_user.flags.writeable and np.may_share_memory(x, x_user):
            x = x.copy()
        self._cache = (x, swap) if self.training else None
        return y.swapaxes(0, 1) if swap else y

    def backward(self, dy):
        cache = self._take_cache()
        x, swap = cache  # x in memory order: time-major when the forward's input was
        expected = x.shape[:-1] + (self.out_features,)
        if swap:
            expected = (expected[1], expected[0]) + expected[2:]
        try:
            dy = np.asarray(dy)
            fits = dy.shape == expected
            dy_rows = as_float_array("dy", dy.swapaxes(0, 1) if swap and fits else dy,
                                     self.dtype)
            if not fits:
                raise ValueError(f"dy: expected shape {expected}, got shape {dy.shape}")
        except (TypeError, ValueError):
            self._cache = cache  # a failed call keeps the forward for a retry
            raise
        rows = dy_rows.reshape(-1, self.out_features)
        # rnnfast's own GEMM, not NumPy's: one thread pool for the whole model
        dx = _core.dense_backward(x.reshape(-1, self.in_features), self._params["weight"],
                                  rows, self.grads["weight"])
        if self.bias:
            self.grads["bias"] += rows.sum(axis=0)
        dx = dx.reshape(x.shape)
        return dx.swapaxes(0, 1) if swap else dx

    def get_config(self):
        return {"in_features": self.in_features, "out_features": self.out_features,
                "bias": self.bias, "dtype": self.dtype.name, "seed": self.seed}

    def output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.out_features,)

    def __repr__(self):
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias})"


Dense = Linear


class Embedding(_Layer):
    """Integer ids (any shape) -> vectors (..., embedding_dim), PyTorch's ``nn.Embedding``
    (``weight`` initialised N(0, 1) as PyTorch). The backward adds the gradients into the rows
    of the ids in C++ (one pass, in the ids' order), never a Python loop over tokens.

    Padding, for models that take padded batches of token ids (``Sequential``, ``Module``):

    padding_idx : int, optional
        PyTorch's: that row starts as zeros and gets no gradient. In a model it also marks
        padding, as ``mask_zero`` does for 0: the model hands the RNN after it the lengths, so
        the result is that of PyTorch's ``pack_padded_sequence`` pipeline. Negative values
        count from the end, as in PyTorch.
    mask_zero : bool
        Keras's: id 0 is padding wherever it appears (so the vocabulary's real ids start at 1);
        the model derives the lengths from it. An RNN needs the padding at each sequence's end.
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=np.float32, seed=None, *,
                 padding_idx=None, mask_zero=False):
        super().__init__(dtype)
        self.num_embeddings = _positive_int("num_embeddings", num_embeddings)
        self.embedding_dim = _positive_int("embedding_dim", embedding_dim)
        self.seed = seed
        if not isinstance(mask_zero, (bool, np.bool_)):
            raise TypeError(f"mask_zero: expected a bool, got {type(mask_zero).__name__} "
                            f"{mask_zero!r}")
        self.mask_zero = bool(mask_zero)
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) \
                    or not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(
                    f"padding_idx: expected an int in [-{self.num_embeddings}, "
                    f"{self.num_embeddings}) (num_embeddings), got {padding_idx!r}")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        rng = np.random.default_rng(seed)
        table = rng.standard_normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            table[padding_idx] = 0.0
        self._add_parameter("weight", table)

    def valid_positions(self, ids):
        """Boolean array shaped like ``ids``, False on padding (every id 0 with ``mask_zero``,
        every ``padding_idx``), or None when this Embedding marks no padding."""
        if not self.mask_zero and self.padding_idx is None:
            return None
        ids = np.asarray(ids)
        valid = np.ones(ids.shape, dtype=bool)
        if self.mask_zero:
            valid &= ids != 0
        if self.padding_idx is not None:
            valid &= ids != self.padding_idx
        return valid

    @property
    def weight(self):
        """The live table (num_embeddings, embedding_dim)."""
        return self._params["weight"]

    def check_ids(self, ids):
        """``ids`` as an integer array whose values index the table; TypeError/ValueError
        otherwise."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"ids: expected an integer array, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            raise ValueError(
                f"ids: expected values in [0, {self.num_embeddings}), got min {ids.min()}, "
                f"max {ids.max()}"
            )
        return ids

    def forward(self, ids):
        ids = self.check_ids(ids)
        self._cache = ids.copy() if self.training else None
        return self._params["weight"][ids]

    def backward(self, d_out):
        ids = self._take_cache()
        try:
            d_out = as_float_array("d_out", d_out, self.dtype)
        except TypeError:
            self._cache = ids  # a failed call keeps the forward for a retry
            raise
        if d_out.shape != ids.shape + (self.embedding_dim,):
            self._cache = ids
            raise ValueError(
                f"d_out: expected shape {ids.shape + (self.embedding_dim,)}, got {d_out.shape}"
            )
        rows = d_out.reshape(-1, self.embedding_dim)
        flat = ids.ravel().astype(np.int64, copy=False)
        if self.padding_idx is not None:  # PyTorch's rule: the padding row is never trained
            rows = np.where((flat == self.padding_idx)[:, None], 0, rows)
        _core.embedding_backward(flat, rows, self.grads["weight"])
        return None  # ids have no gradient

    def get_config(self):
        return {"num_embeddings": self.num_embeddings, "embedding_dim": self.embedding_dim,
                "dtype": self.dtype.name, "seed": self.seed, "padding_idx": self.padding_idx,
                "mask_zero": self.mask_zero}

    def output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_dim,)

    def __repr__(self):
        options = "".join([f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                           else "", ", mask_zero=True" if self.mask_zero else ""])
        return f"Embedding({self.num_embeddings}, {self.embedding_dim}{options})"


class Dropout(_Layer):
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

    def get_config(self):
        return {"p": self.p, "seed": self.seed, "dtype": self.dtype.name}

    def output_shape(self, input_shape):
        return tuple(input_shape)

    def __repr__(self):
        return f"Dropout(p={self.p})"
