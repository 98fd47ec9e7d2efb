"""The quantized inference copy of the RNN layer (``rnnfast.quantize`` makes it), and what every
quantized recurrent layer shares (``QuantizedRecurrent``; the GRU's and LSTM's are in
``nn.quantized.gated``): the float layer's own code for everything around the arithmetic (stack
runner over layers, directions, lengths and dilation; API forms; stateful layers; ``step``),
with the quantized kernels in its two hooks, one direction over a sequence and one step."""

from __future__ import annotations

import numpy as np

from ... import functional
from ..recurrent.rnn import RNN, is_embedding
from .layers import QuantizedLayer

__all__ = ["QuantizedRNN", "QuantizedRecurrent"]

_GENERAL_MASK = (
    "mask: the quantized kernels run each sequence to its own length and output zeros after "
    "it; they take lengths (or a prefix mask where zero_output_for_mask=True), not a Keras mask "
    "that skips steps inside a sequence or repeats the previous output at masked steps (here: "
    "{why}). Give lengths= instead, or run the float model"
)


def _bias_name(bias_ih_name):
    """``bias_l{k}[_reverse]``: the one float32 bias ``b_ih + b_hh`` the kernels add."""
    return bias_ih_name.replace("bias_ih", "bias", 1)


class QuantizedRecurrent(QuantizedLayer):
    """What every quantized recurrent layer (Elman, GRU, LSTM) does the same way: biases kept
    as their float32 sum where the kernels only add the sum (``_summed_biases``: {sum name:
    (float bias_ih name, float bias_hh name)}), token input embedded first, and Keras's general
    step masks refused."""

    _plain_stack = False  # its kernels are the quantized ones (nn.recurrent.plain_calls)

    _summed_biases = {}

    def _add_bias_sum(self, layer, n_bi, n_bh):
        """The float layer's two biases as one float32 vector ``b_ih + b_hh``."""
        n_b = _bias_name(n_bi)
        self._floats[n_b] = layer._params[n_bi] + layer._params[n_bh]
        self._summed_biases = {**self._summed_biases, n_b: (n_bi, n_bh)}
        return n_b

    def dequantized_params(self):
        """As :meth:`QuantizedLayer.dequantized_params`, in the float layer's names: a summed
        bias as ``bias_ih`` and zeros as ``bias_hh``."""
        out = super().dequantized_params()
        for n_b, (n_bi, n_bh) in self._summed_biases.items():
            out[n_bi] = out.pop(n_b)
            out[n_bh] = np.zeros_like(out[n_bi])
        return out

    @property
    def float32_nbytes(self):
        """Bytes the float32 layer stores: both bias vectors where this copy keeps their sum."""
        summed = sum(self._floats[n].size for n in self._summed_biases)
        return 4 * (self.keras_param_count() + summed)

    def forward(self, x, h0=None, lengths=None, mask=None, *, embedding=None):
        """As the float layer's forward. With ``embedding``, the ids are embedded first (the
        quantized kernels take no token input), with the same result."""
        if embedding is not None:
            if not is_embedding(embedding):
                raise TypeError(f"embedding: expected an Embedding, got {type(embedding).__name__}")
            x = embedding(x)
        return super().forward(x, h0, lengths, mask)

    def _mask_arg(self, lengths, mask, steps, batch, o):
        """As the float layer's, refusing what runs as a Keras step mask (the kernels have
        none): a mask that is not a prefix, or a prefix one whose masked steps repeat the
        previous output."""
        lengths, step_mask = super()._mask_arg(lengths, mask, steps, batch, o)
        if step_mask is not None:
            prefix = bool(np.all(step_mask[1:] <= step_mask[:-1]))
            why = "a prefix mask with zero_output_for_mask False" if prefix else "not a prefix"
            raise ValueError(_GENERAL_MASK.format(why=why))
        return lengths, None


class QuantizedRNN(QuantizedRecurrent, RNN):
    """An RNN whose W_ih and W_hh are bf16 or int8 (per output row scales) and whose two biases
    are kept as their float32 sum; input, states and outputs float32. Everything a float RNN
    does in eval mode, but Keras's general step masks; no training."""

    float_class = RNN

    def _quantize_parameters(self, layer):
        self._state = self._zero_state = None
        self._kernel_names = []  # per (layer, direction): W_ih, W_hh and the summed bias
        for n_ih, n_hh, n_bi, n_bh in layer._names:
            self._add_weight(n_ih, layer._params[n_ih])
            self._add_weight(n_hh, layer._params[n_hh])
            n_b = self._add_bias_sum(layer, n_bi, n_bh) if n_bi is not None else None
            self._kernel_names.append((n_ih, n_hh, n_b))

    def _step_weights(self, idx):
        """The kernels' weights of (layer, direction) ``idx`` (PyTorch's order l * dirs + d;
        the stacked layer itself for step(), which is unidirectional)."""
        n_ih, n_hh, n_b = self._kernel_names[idx]
        w = self._weights
        return w[n_ih].packed, w[n_hh].packed, None if n_b is None else self._floats[n_b]

    _step_kernel = staticmethod(functional.quantized_rnn_step)

    def _direction_kernel(self, idx, x, h0, nonlinearity, lengths, alpha, **masks):
        # no masks reach here: _mask_arg refuses step masks, and an inference copy draws no
        # dropout masks; token input neither: forward embeds the ids
        return functional.quantized_rnn_forward(
            x, *self._step_weights(idx), h0, nonlinearity, True, lengths, alpha
        )
