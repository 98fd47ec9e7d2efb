"""The PyTorch bridge under ``torch.autocast("cpu", dtype=torch.bfloat16)``: which calls run
rnnfast's kernels with bf16 products (``rnnfast.precision``), and the dtypes their outputs
take, which follow torch's own modules under the same autocast. Imported by ``rnnfast.torch``
and ``rnnfast._torch_ops`` only (torch is imported nowhere else in the package).

What torch 2.13's ``nn.RNN`` / ``GRU`` / ``LSTM`` return under CPU autocast bf16 (measured;
``tests/test_torch_autocast.py`` checks every case against torch): the cells are composites of
``linear`` (which autocast runs in bf16) and element-wise steps (which promote), so

- ``nn.RNN``: the state is ``act(linear + linear)``: output and h_n bfloat16, always;
- ``nn.GRU``: ``h' = (1 - z) n + z h``, with bf16 gates: the dtype of h_0 (the input's when
  no state is given) for output and h_n;
- ``nn.LSTM``: ``c' = f c + i g`` has c_0's dtype (the input's when no state is given), and
  so do ``h' = o tanh(c')`` and the output; with ``proj_size`` h' is a ``linear`` again:
  output and h_n bfloat16, c_n c_0's dtype. A padded (not packed), non-empty call without
  projections runs oneDNN's LSTM instead where torch has it enabled
  (``torch.backends.mkldnn``), which autocast runs in bf16: every output bfloat16.

Gradients reach the inputs in their own dtypes (float32 parameters get float32 gradients).
"""

from __future__ import annotations

import contextlib

import torch

from . import _core, precision

__all__ = ["autocast_refusal", "output_dtypes", "run_with", "thread_products"]

_BF16 = torch.bfloat16
_INPUT_DTYPES = (torch.float32, torch.bfloat16)


def thread_products():
    """The products this thread's float32 kernel calls multiply with now ("float32" or
    "bf16"): an autograd Function's backward runs later, outside the caller's block, and
    re-enters it with :func:`run_with`."""
    before = _core.set_thread_products("float32")
    _core.set_thread_products(before)
    return before


def run_with(kind):
    """A context running this thread's kernel calls with ``kind``'s products (nothing to enter
    for float32, the default)."""
    return contextlib.nullcontext() if kind == "float32" else precision.products(kind)


def autocast_refusal(module, data, states):
    """Why this call under CPU autocast cannot run rnnfast's bf16 products, as ``(reason,
    fix)``; None where it can. ``states`` is the module's ``_states(hx)``: ``(h_0, c_0)``,
    either None."""
    dtype = torch.get_autocast_dtype("cpu")
    if dtype != _BF16:
        return (
            f"rnnfast's kernels train in bf16 only (bf16 products, float32 sums), not in {dtype}",
            "use torch.autocast('cpu', dtype=torch.bfloat16)",
        )
    if not precision.bf16_available():  # read at each call: tests patch it
        return (
            f"this CPU runs no bf16 products ({_core.bf16_unavailable_reason()})",
            "call the module outside the autocast region (or inside torch.autocast('cpu', "
            "enabled=False)) on float32 input, which runs float32 kernels",
        )
    weights = {w.dtype for w in module._flat_weights}
    given = [s for s in states if s is not None]
    if (
        weights != {torch.float32}
        or any(w.device.type != "cpu" for w in module._flat_weights)
        or any(type(s) is not torch.Tensor or not s.is_cpu for s in given)
        or any(t.dtype not in _INPUT_DTYPES for t in (data, *given))
    ):
        got = ", ".join(str(t.dtype) for t in (data, *given))
        return (
            "its bf16 products take a float32 CPU module with float32 or bfloat16 input and "
            f"states; got parameters of {', '.join(sorted(map(str, weights)))} and input "
            f"(and states) of {got}",
            "call module.float() and pass float32 or bfloat16 CPU tensors",
        )
    return None


def output_dtypes(module, data, states, packed):
    """The dtypes of the call's outputs as torch's module gives them under CPU autocast bf16
    (see the module's documentation): ``(output, h_n)``, and the LSTM's ``(output, h_n,
    c_n)``. ``states`` is ``(h_0, c_0)``, either None."""
    h0, c0 = states
    if module.mode.startswith("RNN"):
        return _BF16, _BF16
    if module.mode == "GRU":
        dtype = data.dtype if h0 is None else h0.dtype
        return dtype, dtype
    cell = data.dtype if c0 is None else c0.dtype
    if module.proj_size > 0:
        return _BF16, _BF16, cell
    if not packed and data.numel() != 0 and _onednn_lstm(data.dtype):
        return _BF16, _BF16, _BF16
    return cell, cell, cell


def _onednn_lstm(dtype):
    """Whether torch runs a padded LSTM call with input of ``dtype`` on oneDNN: where torch has
    it enabled (``torch.backends.mkldnn``), for float32 input, and for bfloat16 input where
    oneDNN has bf16 on this CPU (torch's own test, ``use_mkldnn`` in ATen's RNN.cpp)."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False
    return dtype == torch.float32 or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
