"""Leaky units (alpha < 1) and variable lengths in the functional core, against the reference
and finite differences; every ISA, both dtypes, across the backward's time-chunk boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    DTYPES,
    PLAIN,
    assert_close,
    gradients_by_name,
    kernel_backward,
    make_problem,
)

from rnnfast import functional as F
from rnnfast import reference as R

SHAPES = [(7, 5, 3, 4), (50, 3, 17, 33), (300, 4, 5, 20)]  # T=300, B=4: several backward chunks


def _lengths(rng, T, B):
    lengths = rng.integers(0, T + 1, size=B)
    lengths[0] = T  # one full-length sequence, so h_n at step T is checked too
    return lengths


def _reference_dtype(dtype, nonlinearity, alpha):
    # relu's leaky derivative is recovered by comparing stored values bit for bit (see
    # reference.rnn_backward); the oracle must then see the kernel's own dtype.
    if nonlinearity == "relu" and alpha != 1.0:
        return dtype
    return np.float64


@pytest.mark.parametrize("shape", SHAPES, ids=[f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES])
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("alpha", [1.0, 0.7, 0.25])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_and_gradients_match_reference(
    dtype, nonlinearity, alpha, with_lengths, shape, isa, rng
):
    T, B, D, H = shape
    p = make_problem(rng, T, B, D, H, dtype)
    lengths = _lengths(rng, T, B) if with_lengths else None
    y, h_n = F.rnn_forward(
        **p.forward_args(), nonlinearity=nonlinearity, lengths=lengths, alpha=alpha
    )
    q = p.astype(np.float64)
    y_ref, h_ref = R.rnn_forward(
        **q.forward_args(), nonlinearity=nonlinearity, lengths=lengths, alpha=alpha
    )
    assert_close(y, y_ref, dtype, "y")
    assert_close(h_n, h_ref, dtype, "h_n")
    _, h_last = F.rnn_forward(
        **p.forward_args(),
        nonlinearity=nonlinearity,
        lengths=lengths,
        alpha=alpha,
        return_sequences=False,
    )
    assert_close(h_last, h_n, dtype, "h_n, return_sequences=False")

    dy = rng.standard_normal(y.shape).astype(dtype)
    dh_n = rng.standard_normal(h_n.shape).astype(dtype)
    options = dict(PLAIN, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha)
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy, dh_n, h0=p.h0, **options)
    rd = _reference_dtype(dtype, nonlinearity, alpha)
    up = [a.astype(rd) for a in (p.x, p.weight_ih, p.weight_hh, y, dy, dh_n, p.h0)]
    ref = R.rnn_backward(*up[:-1], h0=up[-1], **options)
    for name, got, want in zip(g._fields, g, ref):
        assert_close(got, want.astype(np.float64), dtype, name)


def test_padded_steps_are_zero_and_h_n_is_each_sequences_own_last_state(rng):
    p = make_problem(rng, 6, 4, 3, 5)
    lengths = np.array([6, 2, 0, 4])
    y, h_n = F.rnn_forward(**p.forward_args(), lengths=lengths)
    for b, n in enumerate(lengths):
        assert np.all(y[n:, b] == 0)
        assert np.array_equal(h_n[b], y[n - 1, b] if n else p.h0[b])
    # each sequence alone gives the same outputs as inside the padded batch
    for b, n in enumerate(lengths):
        if n:
            y_b, _ = F.rnn_forward(
                p.x[:n, b : b + 1], p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh, p.h0[b : b + 1]
            )
            assert_close(y[:n, b], y_b[:, 0], np.float64, f"sequence {b}")


@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
def test_leaky_gradients_by_finite_differences(nonlinearity, with_lengths, rng):
    T, B, D, H, alpha = 5, 3, 2, 4, 0.4
    p = make_problem(rng, T, B, D, H, np.float64)
    lengths = np.array([5, 3, 1]) if with_lengths else None
    R_y = rng.standard_normal((T, B, H))
    R_h = rng.standard_normal((B, H))

    def loss(q):
        y, h_n = F.rnn_forward(
            **q.forward_args(), nonlinearity=nonlinearity, lengths=lengths, alpha=alpha
        )
        return float(np.sum(y * R_y) + np.sum(h_n * R_h))

    y, _ = F.rnn_forward(
        **p.forward_args(), nonlinearity=nonlinearity, lengths=lengths, alpha=alpha
    )
    g = kernel_backward(p, y, R_y, R_h, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha)
    analytic = gradients_by_name(g)
    eps = 1e-6
    for name, want in analytic.items():
        numeric = np.zeros_like(p[name])
        for idx in np.ndindex(p[name].shape):
            plus, minus = (
                type(p)({k: (None if v is None else v.copy()) for k, v in p.items()})
                for _ in range(2)
            )
            plus[name][idx] += eps
            minus[name][idx] -= eps
            numeric[idx] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(want, numeric, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("bad", [-1, 8, [3, 3], 2.5])
def test_bad_lengths_and_alpha(bad, rng):
    p = make_problem(rng, 7, 2, 3, 4)
    lengths = np.array([3, bad]) if np.ndim(bad) == 0 else np.array(bad + [1])
    with pytest.raises((ValueError, TypeError), match="lengths"):
        F.rnn_forward(**p.forward_args(), lengths=lengths)
    for alpha in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="alpha"):
            F.rnn_forward(**p.forward_args(), alpha=alpha)
