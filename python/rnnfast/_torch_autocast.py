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
import warnings

import torch

from . import _core, precision

__all__ = [
    "AutocastFallbackWarning",
    "autocast_refusal",
    "fallback_message",
    "output_dtypes",
    "run_with",
    "thread_products",
    "warn_fallback",
]

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


class AutocastFallbackWarning(UserWarning):
    """A bridge module ran torch's own forward under ``torch.autocast("cpu")``: a call that
    rnnfast's bf16 products cannot run (float16 autocast, a CPU without bf16 products, a
    module that is not float32). Public as ``rnnfast.torch.AutocastFallbackWarning``."""


AutocastFallbackWarning.__module__ = "rnnfast.torch"  # where users import it from


def fallback_message(module, refusal):
    """What the AutocastFallbackWarning of a call that runs torch's own forward says: the
    refusal's reason and fix."""
    name = type(module).__name__
    reason, fix = refusal
    return (
        f"rnnfast.torch.{name} under torch.autocast('cpu', dtype="
        f"{torch.get_autocast_dtype('cpu')}) runs torch.nn.{name}'s own forward (its autocast "
        f"result and speed): {reason}. To run rnnfast's kernels, {fix}."
    )


def warn_fallback(module, refusal, stacklevel=1):
    """The AutocastFallbackWarning of a call that runs torch's own forward."""
    message = fallback_message(module, refusal)
    warnings.warn(message, AutocastFallbackWarning, stacklevel=stacklevel + 1)


def _bf16_available():
    """rnnfast.precision's answer (read at each call: tests patch it). A constant to
    torch.compile (``COMPILE_TIME_CONSTANTS``)."""
    return precision.bf16_available()


def autocast_refusal(weights, data, states):
    """Why a call under CPU autocast cannot run rnnfast's bf16 products, as ``(reason, fix)``;
    None where it can. ``weights``: the module's parameters; ``states``: the module's
    ``_states(hx)``, ``(h_0, c_0)``, either None."""
    dtype = torch.get_autocast_dtype("cpu")
    if dtype != _BF16:
        return (
            f"rnnfast's kernels train in bf16 only (bf16 products, float32 sums), not in {dtype}",
            "use torch.autocast('cpu', dtype=torch.bfloat16)",
        )
    if not _bf16_available():
        return (
            f"this CPU runs no bf16 products ({_core.bf16_unavailable_reason()})",
            "call the module outside the autocast region (or inside torch.autocast('cpu', "
            "enabled=False)) on float32 input, which runs float32 kernels",
        )
    given = [s for s in states if s is not None]
    if (
        any(w.dtype != torch.float32 or w.device.type != "cpu" for w in weights)
        or any(not isinstance(s, torch.Tensor) or s.device.type != "cpu" for s in given)
        or any(t.dtype not in _INPUT_DTYPES for t in (data, *given))
    ):
        got = ", ".join(str(t.dtype) for t in (data, *given))
        return (
            "its bf16 products take a float32 CPU module with float32 or bfloat16 input and "
            f"states; got parameters of {weights[0].dtype} and input (and states) of {got}",
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


# What torch.compile takes as constants of a compile (torch.compiler.assume_constant_result,
# applied by _torch_ops as Dynamo loads: importing it here would cost a second): a traced graph
# cannot call into _core or oneDNN's switches, so a compiled module keeps their answers as of
# its compile
COMPILE_TIME_CONSTANTS = (_bf16_available, _onednn_lstm)
