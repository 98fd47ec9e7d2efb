"""The number formats of rnnfast.quantize (nn.quantized.formats) against their definitions: int8
per output row symmetric scales, bfloat16 rounded to nearest even; and the weight holder's packed
copy (made once, again after a load, never pickled). The NumPy model of the contract
(tests/quantized_model.py) gives the same arrays bit for bit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import quantized_model as qm

from rnnfast.nn.quantized.formats import (
    QuantizedWeight,
    bf16_bits,
    bf16_to_float32,
    dequantize_rows,
    int8_rows,
)


def _weights(rng):
    w = rng.standard_normal((17, 33)).astype(np.float32)
    w[3] = 0.0  # a zero row
    w[5, :4] = [0.5, -0.5, 1.5, 2.5]  # halfway cases of the rounding (amax set below)
    w[5, 4] = 127.0  # amax 127: q = rint(w), ties to even
    w[6] *= 1e-30  # tiny, subnormal scales
    return w


def test_int8_rows_follow_the_definition(rng):
    w = _weights(rng)
    q, scale = int8_rows(w)
    assert q.dtype == np.int8 and scale.dtype == np.float32 and scale.shape == (17,)
    amax = np.abs(w).max(axis=1)
    np.testing.assert_array_equal(scale, amax / np.float32(127))
    assert not q[3].any() and scale[3] == 0
    nonzero = amax > 0
    assert np.all(np.abs(q[nonzero]).max(axis=1) == 127)
    assert np.abs(q.astype(int)).max() <= 127
    np.testing.assert_array_equal(q[5, :5], [0, 0, 2, 2, 127])  # rint: half to even
    # each value within half a step of its row's grid (the float32 product rounds once more)
    err = np.abs(q * scale[:, None].astype(np.float64) - w)
    assert np.all(err <= 0.5 * scale[:, None] * (1 + 1e-6) + 1e-45)


def test_int8_rows_leave_the_input_alone(rng):
    w = _weights(rng)
    before = w.copy()
    int8_rows(w)
    np.testing.assert_array_equal(w, before)


def _bf16_neighbours(x):
    """The two bfloat16 values around each float32 (truncated and the next one up), float64."""
    bits = x.view(np.uint32) >> 16
    lo = bits.astype(np.uint32) << 16
    hi = (bits.astype(np.uint32) + 1) << 16
    return lo.view(np.float32).astype(np.float64), hi.view(np.float32).astype(np.float64), bits


def test_bf16_rounds_to_nearest_even(rng):
    x = np.concatenate(
        [
            rng.standard_normal(4000).astype(np.float32),
            (rng.standard_normal(200) * 1e-39).astype(np.float32),  # subnormals
            # exact halfway cases: the kept bits odd or even, the dropped half 0x8000
            np.array([0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000], np.uint32).view(np.float32),
        ]
    )
    got = bf16_to_float32(bf16_bits(x)).astype(np.float64)
    lo, hi, kept = _bf16_neighbours(x)
    value = x.astype(np.float64)
    d_lo, d_hi = np.abs(value - lo), np.abs(value - hi)
    want = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(kept % 2, hi, lo)))
    np.testing.assert_array_equal(got, want)


def test_bf16_keeps_nan_and_infinities():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
    # a NaN whose payload sits only in the dropped bits, and the largest float32 (rounds up to inf)
    x = np.concatenate([x, np.array([0x7F800001, 0x7F7FFFFF], np.uint32).view(np.float32)])
    got = bf16_to_float32(bf16_bits(x))
    assert np.isnan(got[[0, 1, 6]]).all()
    np.testing.assert_array_equal(got[2:6], x[2:6])
    assert np.signbit(got[5])
    assert got[7] == np.inf


def test_dequantized_rows(rng):
    w = _weights(rng)
    q, scale = int8_rows(w)
    np.testing.assert_array_equal(dequantize_rows(q, scale), q.astype(np.float32) * scale[:, None])
    bits = bf16_bits(w)
    np.testing.assert_array_equal(dequantize_rows(bits, None), bf16_to_float32(bits))
    # Gaussian rows: int8 keeps ~1% of the values' size (amax / 254 against ~1), bf16 2^-9
    g = rng.standard_normal((64, 256)).astype(np.float32)
    assert rel(dequantize_rows(*int8_rows(g)), g) < 1.5e-2
    assert rel(dequantize_rows(bf16_bits(g), None), g) < 3e-3


def rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("kind", ["bf16", "int8"])
def test_the_packed_copy_is_made_once_and_not_pickled(kind, rng):
    w = QuantizedWeight.from_float(kind, rng.standard_normal((9, 5)).astype(np.float32))
    assert w.shape == (9, 5)
    assert w.nbytes == 9 * 5 * (1 if kind == "int8" else 2) + (9 * 4 if kind == "int8" else 0)
    packed = w.packed
    assert packed.rows == 9 and packed.cols == 5 and packed.kind == kind
    assert w.packed is packed  # made once: every path reads the one layout
    w.set_arrays(w.data[::-1], None if w.scale is None else w.scale[::-1])
    assert w.packed is not packed  # new raw arrays, a new packed copy
    back = pickle.loads(pickle.dumps(w))
    assert back._packed is None
    np.testing.assert_array_equal(back.data, w.data)
    assert back.packed.rows == 9


def test_unknown_kind():
    with pytest.raises(ValueError, match=r"kind: expected one of \('bf16', 'int8'\), got 'fp8'"):
        QuantizedWeight("fp8", np.zeros((1, 1), np.int8))


def test_the_formats_are_the_contract_models_bit_for_bit(rng):
    w = _weights(rng)
    q, scale = int8_rows(w)
    q_ref, scale_ref = qm.quantize_weights_int8(w)
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_array_equal(scale, scale_ref)
    x = np.concatenate([w.ravel(), np.array([np.nan, np.inf, -np.inf], np.float32)])
    np.testing.assert_array_equal(bf16_bits(x), qm.to_bf16_bits(x))
