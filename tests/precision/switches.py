"""The test switches of the mixed-precision tests: which path bf16 products take (software or
native), and the thread count, each restored after its block."""

from __future__ import annotations

import contextlib

import pytest

import rnnfast
from rnnfast import _core

PATHS = ("emulated", "native")


@contextlib.contextmanager
def bf16_products_on(path):
    """Run the block with bf16 products on ``path``: "emulated" (``set_bf16_emulation``, the
    same rounding model in software: any CPU) or "native" (AVX512-BF16 or AMX, as this CPU
    chooses; a skip where it has neither). Yields the path's name as ``_core`` reports it."""
    before = _core.bf16_emulation()
    try:
        _core.set_bf16_emulation(path == "emulated")
        found = _core.bf16_products_path()
        if path == "native" and found in ("", "emulated"):
            pytest.skip(f"no native bf16 products here: {_core.bf16_unavailable_reason()}")
        yield found
    finally:
        _core.set_bf16_emulation(before)


@contextlib.contextmanager
def kernel_threads(n):
    """Run the block with rnnfast's kernels on ``n`` threads."""
    before = rnnfast.get_num_threads()
    rnnfast.set_num_threads(n)
    try:
        yield n
    finally:
        rnnfast.set_num_threads(before)
