"""The fixtures of the mixed-precision tests (``switches``: what they set and restore)."""

from __future__ import annotations

import pytest

from rnnfast import _core

from .switches import PATHS, bf16_products_on, kernel_threads


@pytest.fixture(params=PATHS)
def bf16_path(request):
    """The test runs with bf16 products emulated, then on each native path (skipped where this
    CPU does not run it)."""
    with bf16_products_on(request.param) as path:
        yield path


@pytest.fixture(params=[1, 2], ids=["threads=1", "threads=2"])
def num_threads(request):
    """The test runs with the kernels on 1 thread, then on 2."""
    with kernel_threads(request.param) as n:
        yield n


@pytest.fixture
def emulated_products():
    """bf16 products on any CPU (the test switch), restored after the test."""
    before = _core.bf16_emulation()
    _core.set_bf16_emulation(True)
    yield
    _core.set_bf16_emulation(before)
