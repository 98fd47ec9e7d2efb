"""``rnnfast.torch.LayerNormLSTM``: a drop-in for torchaudio's RNN-T predictor cell
(``torchaudio.models.rnnt._CustomLSTM`` with ``layer_norm=True``) whose forward and backward
run rnnfast's LayerNorm LSTM kernels (``functional.layer_norm_lstm``). torch is imported here
and in ``rnnfast.torch`` only.

The same submodules, hence the same ``state_dict`` keys: ``x2g`` (``Linear(input_dim, 4H,
bias=False)``), ``p2g`` (``Linear(H, 4H, bias=False)``), ``g_norm`` (``LayerNorm(4H)``) and
``c_norm`` (``LayerNorm(H)``); ``forward(input (T, B, D), state [h, c] or None)`` returns
``(output (T, B, H), [h, c])``, as ``_CustomLSTM`` does. One autograd.Function per call: the
gradients of the input, of h and c and of every parameter. ``layer_norm=False`` (torchaudio's
plain LSTM, with x2g's bias) and another ``layer_norm_epsilon`` than 1e-5 are refused by name:
the kernels' norms are torch.nn.LayerNorm's default.
"""

from __future__ import annotations

import numpy as np
import torch

from . import functional
from ._torch_weight_cache import bridge_cache, clear_caches

__all__ = ["LayerNormLSTM"]


def _np(t):
    return t.detach().contiguous().numpy()


class _LayerNormLSTMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, x, h0, c0, w_ih, w_hh, gw, gb, cw, cb):
        arrays = [_np(t) for t in (x, h0, c0, w_ih, w_hh, gw, gb, cw, cb)]
        # the packed W_ih and W_hh, kept while they are unchanged (rnnfast._torch_weight_cache)
        cache = bridge_cache(module, 0, (w_ih, w_hh))
        out = functional.layer_norm_lstm_forward(
            arrays[0], arrays[3], arrays[4], *arrays[5:], arrays[1], arrays[2],
            keep_workspace=torch.is_grad_enabled() or any(ctx.needs_input_grad),
            weight_cache=cache,
        )  # fmt: skip
        ctx.arrays, ctx.out, ctx.cache = arrays, out, (module, 0, (w_ih, w_hh))
        return tuple(torch.from_numpy(np.array(a)) for a in (out.y, out.h_n, out.c_n))

    @staticmethod
    def backward(ctx, dy, dh, dc):
        x, h0, c0, w_ih, w_hh, gw, gb, cw, cb = ctx.arrays
        out = ctx.out
        grads = [None if g is None else _np(g) for g in (dy, dh, dc)]
        g = functional.layer_norm_lstm_backward(
            x, w_ih, w_hh, gw, gb, cw, cb, out.y, out.workspace, *grads, h0=h0, c0=c0,
            lengths=None, input_gradient=ctx.needs_input_grad[1],
            weight_cache=bridge_cache(*ctx.cache, contents=False),
        )  # fmt: skip
        ctx.arrays = ctx.out = ctx.cache = None
        results = (
            g.dx, g.dh0, g.dc0, g.dweight_ih, g.dweight_hh,
            g.dg_norm_weight, g.dg_norm_bias, g.dc_norm_weight, g.dc_norm_bias,
        )  # fmt: skip
        return (None,) + tuple(
            None if r is None or not need else torch.from_numpy(np.ascontiguousarray(r))
            for r, need in zip(results, ctx.needs_input_grad[1:])
        )


class LayerNormLSTM(torch.nn.Module):
    """torchaudio's ``_CustomLSTM(input_dim, hidden_dim, layer_norm=True)`` on rnnfast's
    kernels (the module's docstring says what is the same)."""

    def __init__(self, input_dim, hidden_dim, layer_norm=True, layer_norm_epsilon=1e-5):
        super().__init__()
        if layer_norm is not True:
            raise ValueError(
                f"layer_norm={layer_norm!r}: not supported (rnnfast's kernels run the LayerNorm "
                "LSTM; torchaudio's plain _CustomLSTM is torch.nn.LSTM's cell with one bias)"
            )
        if layer_norm_epsilon != 1e-5:
            raise ValueError(
                f"layer_norm_epsilon={layer_norm_epsilon!r}: not supported (the kernels' "
                "norms use torch.nn.LayerNorm's default eps=1e-5)"
            )
        self.x2g = torch.nn.Linear(input_dim, 4 * hidden_dim, bias=False)
        self.p2g = torch.nn.Linear(hidden_dim, 4 * hidden_dim, bias=False)
        self.c_norm = torch.nn.LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self.g_norm = torch.nn.LayerNorm(4 * hidden_dim, eps=layer_norm_epsilon)
        self.hidden_dim = hidden_dim

    def forward(self, input, state=None):
        """input (T, B, D), state [h (B, H), c (B, H)] or None (zeros): ``(output (T, B, H),
        [h_n, c_n])``."""
        B = input.shape[1]
        if state is None:
            h = torch.zeros(B, self.hidden_dim, dtype=input.dtype)
            c = torch.zeros(B, self.hidden_dim, dtype=input.dtype)
        else:
            h, c = state
        if input.device.type != "cpu" or input.dtype not in (torch.float32, torch.float64):
            raise TypeError(
                f"input: expected a float32 or float64 CPU tensor, got {input.dtype} on "
                f"{input.device}"
            )
        y, h_n, c_n = _LayerNormLSTMFunction.apply(
            self, input, h, c, self.x2g.weight, self.p2g.weight, self.g_norm.weight, self.g_norm.bias,
            self.c_norm.weight, self.c_norm.bias,
        )  # fmt: skip
        return y, [h_n, c_n]

    def parameters_changed(self):
        """Drop the packed weights kept between calls: for a write torch's version counter does
        not see (through ``w.data``; see ``rnnfast.torch``). Returns the module."""
        clear_caches(self)
        return self

    def __getstate__(self):
        # the packed weights are rebuilt at the next call (torch.save holds torch's state only)
        state = super().__getstate__()
        return {k: v for k, v in state.items() if not k.startswith("_rnnfast_")}
