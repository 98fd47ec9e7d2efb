"""A model saved with precision='bf16' loads on a machine without bf16 products: a file is not a
request to train, so it comes back float32 with a RuntimeWarning naming why, and keeps 'bf16'
where the machine runs it."""

from __future__ import annotations

import io

import numpy as np
import pytest

import rnnfast

from .test_refusals import RECURRENT, no_bf16_products


@pytest.fixture(autouse=True)
def emulated(emulated_products):
    """bf16 products on any CPU (the test switch)."""


def _saved(model):
    buf = io.BytesIO()
    rnnfast.save(model, buf)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("cls", RECURRENT)
def test_a_bf16_layer_loads_float32_where_bf16_does_not_run(cls):
    layer = cls(3, 4, precision="bf16")
    saved = _saved(layer)
    with no_bf16_products() as isa:
        with pytest.warns(RuntimeWarning, match=f"precision='bf16' was saved.*'{isa}'"):
            loaded = rnnfast.load(saved)
        assert loaded.precision == "float32"
        x = np.ones((2, 1, 3), np.float32)
        out = loaded(x)
        y = out[0] if isinstance(out, tuple) else out
        assert np.isfinite(y).all()
        with pytest.raises(RuntimeError, match=isa):  # asking anew is still refused
            cls(3, 4, precision="bf16")


def test_a_bf16_sequential_loads_float32_where_bf16_does_not_run():
    model = rnnfast.Sequential([rnnfast.GRU(3, 4, precision="bf16")], precision="bf16")
    saved = _saved(model)
    with no_bf16_products():
        with pytest.warns(RuntimeWarning, match="was saved with this model"):
            loaded = rnnfast.load(saved)
    assert loaded.precision == "float32"
    assert loaded[0].precision == "float32"


def test_a_bf16_layer_keeps_bf16_where_it_runs():
    saved = _saved(rnnfast.LSTM(3, 4, precision="bf16"))
    assert rnnfast.load(saved).precision == "bf16"
