"""The products a float32 call multiplies with: ``"float32"`` (the default), or ``"bf16"``: both
operands of every GEMM of the forward and the backward (input projection, recurrent step,
weight and input gradients) rounded to bf16 (to nearest even), their products summed in
float32. That is mixed-precision training as PyTorch's ``torch.autocast("cpu",
dtype=torch.bfloat16)`` and Keras's ``"mixed_bfloat16"`` policy run it.

What stays float32 under ``"bf16"``: the master weights and their gradients, the optimizer's
state, the biases, the gates and cell states, and every element-wise step (gate functions,
state updates, the cells' epilogues, losses). Only the GEMMs' operands are rounded.

The choice is the calling thread's, for the span of a call (:func:`products`): a float32 call
on another thread is never affected. It needs a CPU with AVX512-BF16 (``VDPBF16PS``); on any
other CPU asking for it raises a RuntimeError naming the ISA (``rnnfast.show_config()``), as
emulated bf16 would only be slower than float32. ``rnnfast._core.set_bf16_emulation(True)``
is a test switch that runs the same rounding model in software on any CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from . import _core

PRECISIONS = ("float32", "bf16")


def bf16_available() -> bool:
    """Whether this machine runs bf16 products now (the native kernels, or the test switch)."""
    return bool(_core.bf16_products_path())


def check_precision(precision: object, dtype: object = None, *, name: str = "precision") -> str:
    """``precision`` validated: one of PRECISIONS. ``"bf16"`` needs float32 data (``dtype``,
    when given) and a machine that runs bf16 products: a ValueError, or a RuntimeError naming
    this CPU's ISA, otherwise."""
    if not isinstance(precision, str):
        raise TypeError(f"{name}: expected one of {PRECISIONS}, got {type(precision).__name__}")
    if precision not in PRECISIONS:
        raise ValueError(f"{name}: expected one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16":
        if dtype is not None and np.dtype(dtype) != np.float32:
            raise ValueError(
                f"{name}='bf16': expected a float32 layer (bf16 products keep float32 weights, "
                f"states and sums), got dtype {np.dtype(dtype).name}; use dtype=np.float32, or "
                f"{name}='float32'"
            )
        if not bf16_available():
            raise RuntimeError(f"{name}='bf16': {_core.bf16_unavailable_reason()}")
    return precision


@contextlib.contextmanager
def products(precision: str) -> Iterator[None]:
    """Runs this thread's float32 kernel calls inside the block with ``precision``'s products,
    and restores the previous choice after it (also on an exception)."""
    before = _core.set_thread_products(check_precision(precision))
    try:
        yield
    finally:
        _core.set_thread_products(before)
