"""The ways a test of the fronts runs rnnfast's bf16 products (``rnnfast.precision``): in
software (the same rounding model on any CPU, so the tests run everywhere) and on each native
path this CPU has (AVX512-BF16's VDPBF16PS, AMX-BF16's tiles; skipped elsewhere), with the
switches of ``tests/precision/switches.py``.

Import the fixture into a test module: ``from bf16_paths import bf16_path  # noqa: F401``.
"""

from __future__ import annotations

import pytest
from precision.switches import PATHS, bf16_products_on

# bf16's unit roundoff: 8 significant bits (7 stored), rounded to nearest even
BF16_UNIT_ROUNDOFF = 2.0**-8


@pytest.fixture(params=PATHS)
def bf16_path(request):
    """The path this test's bf16 products take ("emulated", "avx512_bf16" or "amx")."""
    with bf16_products_on(request.param) as path:
        yield path


@pytest.fixture
def bf16_emulated():
    """bf16 products in software alone: for tests of what does not depend on the path (the
    dtypes of the outputs), on any CPU."""
    with bf16_products_on("emulated") as path:
        yield path
