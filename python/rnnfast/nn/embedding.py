"""Embedding: token ids -> vectors, with PyTorch's padding_idx and Keras's mask_zero."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._validation import as_float_array, check_bool, check_int, check_int_array, check_positive_int
from ._layer import Layer
from ._shapes import constructor_arguments, size
from .masking import embedding_padding

__all__ = ["Embedding"]


class Embedding(Layer):
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

    # a lookup and a scatter-add, no products: nothing that bf16 mixed precision leaves float32
    kernel_products = True

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        dtype=np.float32,
        seed=None,
        *,
        padding_idx=None,
        mask_zero=False,
    ):
        super().__init__(dtype)
        self.num_embeddings = check_positive_int("num_embeddings", num_embeddings)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.seed = seed
        self.mask_zero = check_bool("mask_zero", mask_zero)
        if padding_idx is not None:
            n = self.num_embeddings
            padding_idx = check_int("padding_idx", padding_idx, -n, n - 1) % n
        self.padding_idx = padding_idx
        rng = np.random.default_rng(seed)
        table = rng.standard_normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            table[padding_idx] = 0.0
        self.add_parameter("weight", table)

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
        ids = check_int_array("ids", ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            raise ValueError(
                f"ids: expected values in [0, {self.num_embeddings}), got min {ids.min()}, "
                f"max {ids.max()}"
            )
        return ids

    def forward(self, ids):
        ids = self.check_ids(ids)
        self._cache = ids.copy() if self.training else None
        return self.lookup(ids)

    def lookup(self, ids):
        """The rows of checked ``ids``, nothing kept for backward (decoders step with it)."""
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

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """The call inside a container: its own padding (``mask_zero`` / ``padding_idx``) joined
        with the valid mask given, or, with neither, the ids 0 as suspected padding."""
        ids = np.asarray(x)
        return (self(ids), *embedding_padding(self, ids, valid))

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of an Embedding built from ``config``, without building it."""
        args = constructor_arguments(cls, config)
        return {"weight": (size(args, "num_embeddings"), size(args, "embedding_dim"))}

    def get_config(self):
        return {
            "num_embeddings": self.num_embeddings,
            "embedding_dim": self.embedding_dim,
            "dtype": self.dtype.name,
            "seed": self.seed,
            "padding_idx": self.padding_idx,
            "mask_zero": self.mask_zero,
        }

    def output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_dim,)

    def __repr__(self):
        options = "".join(
            [
                f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "",
                ", mask_zero=True" if self.mask_zero else "",
            ]
        )
        return f"Embedding({self.num_embeddings}, {self.embedding_dim}{options})"

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: as a model's first layer it reads token ids."""
        return "ids"

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: ``Gather`` of the table's rows, with the ids that mark padding (from
        which the graph counts the lengths of the RNNs after it)."""
        pads = [0] if self.mask_zero else []
        if self.padding_idx is not None and self.padding_idx not in pads:
            pads.append(self.padding_idx)
        option = "mask_zero=True" if self.mask_zero else f"padding_idx={self.padding_idx}"
        return exporter.embedding(flow, who, self.weight, pads, option)
