"""Double backward for the PyTorch bridge (``rnnfast.torch``): torch's own forward of one
bridge call, recomputed from the saved inputs with torch's ATen recurrences (which torch can
differentiate twice), and the first-order gradients taken through it with ``create_graph``.

rnnfast's kernels compute first-order gradients only. A backward that runs while autograd
records (``torch.autograd.grad(..., create_graph=True)``, a gradient penalty) would otherwise
return gradients with no graph behind them, and the second-order terms through rnnfast's
backward would be silently missing. The bridge's backward runs :func:`differentiable_grads`
instead in that case: torch's numbers, at torch's speed, for every cell and option that
``torch.nn.RNN`` / ``GRU`` / ``LSTM`` have, but for dropout between layers (rnnfast draws
its own masks, which torch's recurrence cannot repeat: an error says so).

Imported by ``rnnfast.torch`` only (torch is imported nowhere else in the package).
"""

from __future__ import annotations

import torch
from torch import _VF
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

__all__ = ["differentiable_grads"]

_RECURRENCES = {"RNN_TANH": _VF.rnn_tanh, "RNN_RELU": _VF.rnn_relu, "GRU": _VF.gru}


def _zero_states(module, x, batch):
    """torch's default initial states for a batch: zeros of (L * directions, B, ·)."""
    rows = module.num_layers * (2 if module.bidirectional else 1)
    width = module.proj_size if getattr(module, "proj_size", 0) > 0 else module.hidden_size
    h0 = x.new_zeros((rows, batch, width))
    if module.mode != "LSTM":
        return h0, None
    return h0, x.new_zeros((rows, batch, module.hidden_size))


def _states_arg(module, h0, c0):
    return (h0, c0) if module.mode == "LSTM" else h0


def _split(module, result):
    """(y, h_n) or the LSTM's (y, h_n, c_n) of an ATen recurrence's result."""
    if module.mode == "LSTM":
        return result[0], result[1], result[2]
    return result[0], result[1]


def torch_forward(module, x, h0, c0, weights, lengths, batch_first):
    """The outputs of one bridge call as torch's module computes them, differentiable (twice)
    with respect to x, the states and the weights: ``(y, h_n)`` or ``(y, h_n, c_n)``.

    x is 2-D (unbatched) or 3-D; ``lengths`` (NumPy, the bridge's PackedSequence route: x
    padded and time-major) or None."""
    recurrence = _VF.lstm if module.mode == "LSTM" else _RECURRENCES[module.mode]
    unbatched = x.dim() == 2
    if unbatched:
        x, batch_first = x.unsqueeze(1), False
        h0 = None if h0 is None else h0.unsqueeze(1)
        c0 = None if c0 is None else c0.unsqueeze(1)
    batch = x.shape[0 if batch_first else 1]
    if h0 is None:
        h0, c0 = _zero_states(module, x, batch)
    options = (module.bias, module.num_layers, 0.0, module.training, module.bidirectional)
    if lengths is None:
        result = recurrence(x, _states_arg(module, h0, c0), weights, *options, batch_first)
        out = _split(module, result)
    else:
        packed = pack_padded_sequence(
            x, torch.as_tensor(lengths), batch_first=batch_first, enforce_sorted=False
        )
        # the states in the packed (longest first) order, and back, as nn.RNN does
        order, back = packed.sorted_indices, packed.unsorted_indices
        h0 = h0.index_select(1, order)
        c0 = None if c0 is None else c0.index_select(1, order)
        result = recurrence(
            packed.data, packed.batch_sizes, _states_arg(module, h0, c0), weights, *options
        )
        y_packed, *states = _split(module, result)
        y, _ = pad_packed_sequence(
            PackedSequence(y_packed, packed.batch_sizes, order, back),
            batch_first=batch_first,
            total_length=x.shape[1 if batch_first else 0],
        )
        out = (y, *(s.index_select(1, back) for s in states))
    if unbatched:
        out = (out[0][:, 0], *(s[:, 0] for s in out[1:]))
    return out


def differentiable_grads(ctx_module, inputs, needs, grad_outputs, lengths, batch_first, dropout):
    """The gradients of one bridge call's inputs, with a graph behind them (backward under
    ``create_graph=True``).

    ``inputs``: the call's saved ``(x, h0, c0, *weights)``; ``needs``: which of them need a
    gradient (``ctx.needs_input_grad`` past the non-tensor arguments); ``grad_outputs``: the
    gradients of the call's outputs (None where unused). Returns one gradient (or None) per
    input."""
    if dropout > 0.0:
        raise RuntimeError(
            f"rnnfast.torch.{type(ctx_module).__name__}: double backward (create_graph=True) "
            f"through a training call with dropout={dropout} between layers is not supported: "
            "rnnfast draws its own dropout masks, which torch's recurrence cannot repeat. Use "
            "torch.nn's module for this graph (rnnfast.torch.to_torch(module)), or call it in "
            "eval mode or with dropout=0."
        )
    x, h0, c0, *weights = inputs
    with torch.enable_grad():
        outputs = torch_forward(ctx_module, x, h0, c0, weights, lengths, batch_first)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None]
        wanted = [i for i, (t, need) in enumerate(zip(inputs, needs)) if need and t is not None]
        if not pairs or not wanted:
            return [None] * len(inputs)
        grads = torch.autograd.grad(
            [o for o, _ in pairs],
            [inputs[i] for i in wanted],
            [g for _, g in pairs],
            create_graph=True,
            allow_unused=True,
        )
    result = [None] * len(inputs)
    for i, g in zip(wanted, grads):
        result[i] = g if g is not None else torch.zeros_like(inputs[i])
    return result
