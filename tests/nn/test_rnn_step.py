"""functional.rnn_step (the streaming kernel) against one step of rnn_forward and the reference."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, assert_close, make_problem

from rnnfast import functional as F
from rnnfast import reference as R

SIZES = [(1, 1, 1), (1, 32, 64), (3, 17, 33), (2, 100, 7), (16, 3, 256)]


@pytest.mark.parametrize("B, D, H", SIZES, ids=[f"B{B}-D{D}-H{H}" for B, D, H in SIZES])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_step_equals_one_step_of_the_sequence_kernel(dtype, nonlinearity, alpha, B, D, H, isa, rng):
    p = make_problem(rng, 1, B, D, H, dtype)
    h_next = F.rnn_step(
        p.x[0], p.h0, p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh, nonlinearity, alpha
    )
    _, h_seq = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity, alpha=alpha)
    _, h_ref = R.rnn_forward(
        **p.astype(np.float64).forward_args(), nonlinearity=nonlinearity, alpha=alpha
    )
    assert h_next.dtype == dtype and h_next.shape == (B, H)
    assert_close(h_next, h_ref, dtype, "h_next vs reference")
    assert_close(h_next, h_seq, dtype, "h_next vs rnn_forward")


def test_step_accepts_strided_and_list_input_and_leaves_it_unchanged(rng):
    p = make_problem(rng, 1, 2, 3, 4, np.float64)
    x_wide = np.repeat(p.x[0], 2, axis=1)  # x_t = x_wide[:, ::2] is a strided view
    before = x_wide.copy()
    got = F.rnn_step(x_wide[:, ::2], p.h0.tolist(), p.weight_ih, p.weight_hh)
    want = F.rnn_step(np.ascontiguousarray(p.x[0]), p.h0, p.weight_ih, p.weight_hh)
    assert np.array_equal(got, want)
    assert np.array_equal(x_wide, before)


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"x_t": np.zeros((2, 4))}, ValueError, "x_t"),
        ({"h": np.zeros((3, 4))}, ValueError, "h"),
        ({"x_t": np.zeros((2, 3), np.float32)}, TypeError, "float32"),
        ({"x_t": np.zeros((2, 3), np.int64)}, TypeError, "x_t"),
        ({"nonlinearity": "sigmoid"}, ValueError, "nonlinearity"),
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"alpha": True}, TypeError, "alpha"),
    ],
)
def test_step_rejects_bad_input(change, error, match, rng):
    p = make_problem(rng, 1, 2, 3, 4, np.float64)
    args = {
        "x_t": p.x[0],
        "h": p.h0,
        "weight_ih": p.weight_ih,
        "weight_hh": p.weight_hh,
        "nonlinearity": "tanh",
        "alpha": 1.0,
    }
    args.update(change)
    with pytest.raises(error, match=match):
        F.rnn_step(**args)
