"""Gradients against central finite differences in float64.

The loss is L = sum(y * R) + sum(h_n * S) with fixed random R, S, so its gradient is the
backward from dy = R, dh_n = S. For relu, problems are drawn with every pre-activation at least
1e-3 away from zero: a step of 1e-6 then never crosses the kink.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    gradients_by_name,
    kernel_backward,
    make_problem,
    make_problem_away_from_kink,
    preactivations,
)

import rnnfast
from rnnfast import functional as F

T, B, D, H = 4, 2, 3, 5
EPS = 1e-6
RTOL = 1e-6
ATOL = 1e-9
INPUTS = ["x", "h0", "weight_ih", "weight_hh", "bias_ih", "bias_hh"]


def _problem(rng, nonlinearity):
    if nonlinearity == "relu":
        return make_problem_away_from_kink(rng, T, B, D, H, np.float64, margin=1e-3)
    return make_problem(rng, T, B, D, H, np.float64)


def _loss(p, nonlinearity, R, S):
    y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    return float(np.sum(y * R) + np.sum(h_n * S))


def _numerical_gradient(p, name, nonlinearity, R, S):
    base = p[name]
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        values = []
        for step in (EPS, -EPS):
            moved = base.copy()
            moved[idx] += step
            q = type(p)(p)
            q[name] = moved
            values.append(_loss(q, nonlinearity, R, S))
        grad[idx] = (values[0] - values[1]) / (2 * EPS)
    return grad


def _analytic_gradients(p, nonlinearity, R, S):
    y, _ = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    g = kernel_backward(p, y, R, S, nonlinearity=nonlinearity)
    return gradients_by_name(g)


@pytest.mark.parametrize("name", INPUTS)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
def test_functional_gradient_matches_finite_differences(nonlinearity, name, isa, rng):
    p = _problem(rng, nonlinearity)
    R = rng.standard_normal((T, B, H))
    S = rng.standard_normal((B, H))
    analytic = _analytic_gradients(p, nonlinearity, R, S)[name]
    numerical = _numerical_gradient(p, name, nonlinearity, R, S)
    assert analytic.shape == p[name].shape
    assert np.max(np.abs(numerical)) > 1e-3  # the loss does depend on this input
    np.testing.assert_allclose(analytic, numerical, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
def test_layer_gradients_match_finite_differences(nonlinearity, rng):
    p = _problem(rng, nonlinearity)
    R = rng.standard_normal((T, B, H))
    S = rng.standard_normal((B, H))
    layer = rnnfast.RNN(D, H, nonlinearity=nonlinearity, dtype=np.float64)
    layer.load_state_dict(p.state_dict())
    layer(p.x, p.h0[None])
    dx, dh0 = layer.backward(R, S[None])
    got = {"x": dx, "h0": dh0[0]}
    got.update(
        weight_ih=layer.grads["weight_ih_l0"],
        weight_hh=layer.grads["weight_hh_l0"],
        bias_ih=layer.grads["bias_ih_l0"],
        bias_hh=layer.grads["bias_hh_l0"],
    )
    for name in INPUTS:
        numerical = _numerical_gradient(p, name, nonlinearity, R, S)
        np.testing.assert_allclose(got[name], numerical, rtol=RTOL, atol=ATOL, err_msg=name)


def test_relu_problems_are_away_from_the_kink_and_use_both_branches(rng):
    """The relu finite differences are meaningful: both branches occur, none near zero."""
    p = _problem(rng, "relu")
    z = preactivations(p, "relu")
    assert np.min(np.abs(z)) > 1e-3
    assert 0 < np.mean(z > 0) < 1
