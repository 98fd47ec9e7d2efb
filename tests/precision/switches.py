"""The test switches of the mixed-precision tests: which path bf16 products take (software or
native), and the thread count, each restored after its block."""

from __future__ import annotations

import contextlib

import pytest

import rnnfast
from rnnfast import _core

# where bf16 products run: in software, or on one of the native paths (VDPBF16PS, AMX tiles)
PATHS = ("emulated", "avx512_bf16", "amx")
NATIVE_PATHS = PATHS[1:]


@contextlib.contextmanager
def bf16_products_on(path):
    """Run the block with bf16 products on ``path``: "emulated" (``set_bf16_emulation``, the
    same rounding model in software: any CPU) or a native path (a skip where this CPU does not
    run it). The automatic choice is restored after."""
    before = _core.bf16_emulation()
    try:
        if path == "emulated":
            _core.set_bf16_emulation(True)
        else:
            try:
                _core.set_bf16_path(path)
            except ValueError:
                pytest.skip(f"this CPU does not run bf16 products on {path}")
            if _core.bf16_products_path() != path:
                pytest.skip(f"this CPU does not run bf16 products on {path}")
        yield path
    finally:
        _core.set_bf16_path("")
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
