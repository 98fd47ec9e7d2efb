"""The quantized gated kernels (GRU in both forms, LSTM with and without a projection) against
their NumPy model (tests/quantized_model.py: gated_forward_quantized) on every quantized path
this CPU runs, at sizes that leave a last, narrower block of 16 units and with lengths, 1 and
2 threads; and the arguments they refuse.

int8 products are exact in the model; the gates' functions (the kernels' vector sigmoid and
tanh against NumPy's) and bf16's float32 sums differ in the last bits, which compound over the
steps: hence the small tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import quantized_model as qm

import rnnfast
from rnnfast import _core, functional
from rnnfast.nn.quantized.formats import bf16_bits, int8_rows

PATHS = _core.quantized_paths()


@pytest.fixture(params=PATHS)
def path(request):
    _core.set_quantized_path(request.param)
    yield request.param
    _core.set_quantized_path("")


def matrix(mode, w, gates=1):
    if mode == "int8":
        return _core.QuantizedMatrix("int8", *int8_rows(w), gates)
    return _core.QuantizedMatrix("bf16", bf16_bits(w), None, gates)


def layer_weights(rng, cell, D, H, P=0):
    G = 4 if cell == "lstm" else 3
    bound = 1 / np.sqrt(H)

    def u(*shape):
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    return u(G * H, D), u(G * H, P or H), u(G * H), u(G * H), (u(P, H) if P else None)


def quantized_call(mode, cell, w_ih, w_hh, w_hr):
    """The kernels' weight arguments for one layer (functional.quantized_gated's form)."""
    G = 4 if cell == "lstm" else 3
    H = w_ih.shape[0] // G
    if cell == "gru_reset_before":
        kwargs = {"weight_hn": matrix(mode, w_hh[2 * H :])}
        w_hh_q = matrix(mode, w_hh[: 2 * H], 2)
    else:
        kwargs, w_hh_q = {}, matrix(mode, w_hh, G)
    if w_hr is not None:
        kwargs["weight_hr"] = matrix(mode, w_hr)
    return matrix(mode, w_ih, G), w_hh_q, kwargs


CASES = [
    ("gru", 0),
    ("gru_reset_before", 0),
    ("lstm", 0),
    ("lstm", 7),
]


@pytest.mark.parametrize("mode", ["int8", "bf16"])
@pytest.mark.parametrize("cell,P", CASES, ids=[f"{c}-P{p}" for c, p in CASES])
@pytest.mark.parametrize("H", [16, 37])
def test_the_kernels_match_the_numpy_model(cell, P, H, mode, path, rng):
    T, B, D = 6, 5, 11
    w_ih, w_hh, b_ih, b_hh, w_hr = layer_weights(rng, cell, D, H, P)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    lengths = np.array([6, 2, 6, 0, 4])
    y_e, h_e, c_e = qm.gated_forward_quantized(cell, mode, x, w_ih, w_hh, b_ih, b_hh, w_hr, lengths)
    q_ih, q_hh, kwargs = quantized_call(mode, cell, w_ih, w_hh, w_hr)
    out = functional.quantized_gated_forward(
        cell, x, q_ih, q_hh, b_ih, b_hh, lengths=lengths, **kwargs
    )
    np.testing.assert_allclose(out.y, y_e, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(out.h_n, h_e, rtol=1e-4, atol=2e-5)
    if cell == "lstm":
        np.testing.assert_allclose(out.c_n, c_e, rtol=1e-4, atol=2e-5)
    assert not out.y[:, 3].any() and not out.y[2:, 1].any()  # padded steps output zeros


@pytest.mark.parametrize("cell,P", CASES, ids=[f"{c}-P{p}" for c, p in CASES])
def test_one_and_two_threads_give_the_same_bits(cell, P, rng):
    T, B, D, H = 5, 9, 13, 70
    w_ih, w_hh, b_ih, b_hh, w_hr = layer_weights(rng, cell, D, H, P)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    q_ih, q_hh, kwargs = quantized_call("int8", cell, w_ih, w_hh, w_hr)
    runs = []
    for threads in (1, 2):
        with rnnfast.threads(threads):
            runs.append(
                functional.quantized_gated_forward(cell, x, q_ih, q_hh, b_ih, b_hh, **kwargs)
            )
    for a, b in zip(runs[0][:3], runs[1][:3]):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_the_step_is_a_sequence_of_one(rng):
    w_ih, w_hh, b_ih, b_hh, _ = layer_weights(rng, "lstm", 4, 20)
    q_ih, q_hh, _ = quantized_call("int8", "lstm", w_ih, w_hh, None)
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    out = functional.quantized_gated_forward("lstm", x, q_ih, q_hh, b_ih, b_hh)
    h = c = np.zeros((2, 20), np.float32)
    for t in range(3):
        h, c = functional.quantized_gated_step("lstm", x[t], h, c, q_ih, q_hh, b_ih, b_hh)
    np.testing.assert_array_equal(h, out.h_n)
    np.testing.assert_array_equal(c, out.c_n)


def test_gate_layouts_that_disagree_are_refused(rng):
    w_ih, w_hh, b_ih, b_hh, _ = layer_weights(rng, "gru", 4, 20)
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    plain = matrix("int8", w_hh)  # rows as given: not the gated kernels' layout
    with pytest.raises(
        ValueError, match=r"weight_hh: expected a QuantizedMatrix made with gates=3"
    ):
        functional.quantized_gated_forward("gru", x, matrix("int8", w_ih, 3), plain, b_ih, b_hh)
    # and a gated layout cannot reach the Elman kernels or the dense product
    with pytest.raises(ValueError, match=r"w: expected a QuantizedMatrix made with gates=1"):
        _core.quantized_dense(x[0], matrix("int8", w_ih, 3), None)
    with pytest.raises(ValueError, match=r"gates: expected a count >= 1 that divides the rows"):
        _core.QuantizedMatrix("int8", *int8_rows(w_ih[:59]), 3)
    with pytest.raises(ValueError, match=r"weight_hn: expected W_hh's n rows"):
        q_ih, q_hh, _ = quantized_call("int8", "gru_reset_before", w_ih, w_hh, None)
        functional.quantized_gated_forward("gru_reset_before", x, q_ih, q_hh, b_ih, b_hh)
    with pytest.raises(ValueError, match=r"weights: expected one kind, 'int8'"):
        functional.quantized_gated_forward(
            "gru", x, matrix("int8", w_ih, 3), matrix("bf16", w_hh, 3), b_ih, b_hh
        )
    with pytest.raises(
        ValueError, match=r"cell: expected .gru. or .gru_reset_before. or .lstm., got .rnn."
    ):
        functional.quantized_gated_forward("rnn", x, plain, plain)
