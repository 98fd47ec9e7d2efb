"""The two ways a test runs rnnfast's bf16 products (``rnnfast.precision``): in software
(``_core.set_bf16_emulation``: the same rounding model on any CPU, so the tests run
everywhere) and natively (AVX512-BF16's VDPBF16PS, or AMX-BF16's tiles, where this CPU has
them; skipped elsewhere).

Import the fixture into a test module: ``from bf16_paths import bf16_path  # noqa: F401``.
"""

from __future__ import annotations

import pytest

from rnnfast import _core

# bf16's unit roundoff: 8 significant bits (7 stored), rounded to nearest even
BF16_UNIT_ROUNDOFF = 2.0**-8


@pytest.fixture(params=["emulated", "native"])
def bf16_path(request):
    """The path this test's bf16 products take ("emulated", or the native one)."""
    if request.param == "native":
        path = _core.bf16_products_path()  # "avx512_bf16", or "amx" where AMX-BF16 is on
        if path in ("", "emulated"):
            pytest.skip(
                f"this CPU runs no native bf16 products ({_core.bf16_unavailable_reason()})"
            )
        yield path
        return
    _core.set_bf16_emulation(True)
    try:
        yield _core.bf16_products_path()
    finally:
        _core.set_bf16_emulation(False)
