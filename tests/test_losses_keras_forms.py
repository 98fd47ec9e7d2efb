"""binary_cross_entropy and categorical_cross_entropy: values against torch, gradients against
finite differences in float64, from probabilities (Keras's clip) and from logits."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import numerical_gradient

from rnnfast import losses

SHAPES = [(5, 3), (4, 2, 3)]


def _case(rng, shape, kind, from_logits):
    if from_logits:
        output = rng.standard_normal(shape) * 3
    elif kind == "binary":
        output = rng.uniform(0.05, 0.95, shape)
    else:
        output = rng.uniform(0.1, 1.0, shape)  # not normalised: the loss normalises
    targets = rng.uniform(0, 1, shape)
    if kind == "categorical":
        targets /= targets.sum(-1, keepdims=True)
    return output, targets


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", ["binary", "categorical"])
@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_gradient_matches_finite_differences(rng, shape, kind, from_logits, masked):
    fn = losses.binary_cross_entropy if kind == "binary" else losses.categorical_cross_entropy
    output, targets = _case(rng, shape, kind, from_logits)
    positions = shape[:-1] if kind == "categorical" else shape[:2]
    mask = rng.uniform(size=positions) < 0.7 if masked else None
    kept = output.copy()
    value, grad = fn(output, targets, from_logits=from_logits, mask=mask)
    np.testing.assert_array_equal(output, kept)  # the caller's array is not modified
    numeric = numerical_gradient(
        lambda: fn(output, targets, from_logits=from_logits, mask=mask)[0], output
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    assert np.isfinite(value)


@pytest.mark.parametrize("shape", SHAPES)
def test_values_match_torch(torch, rng, shape):
    z, y = _case(rng, shape, "binary", True)
    F = torch.nn.functional
    zt, yt = torch.tensor(z), torch.tensor(y)
    expected = F.binary_cross_entropy_with_logits(zt, yt).item()
    assert losses.binary_cross_entropy(z, y, from_logits=True)[0] == pytest.approx(
        expected, rel=1e-12
    )
    p = torch.sigmoid(zt)
    expected = F.binary_cross_entropy(p, yt).item()
    ours = losses.binary_cross_entropy(p.numpy(), y)[0]
    assert ours == pytest.approx(expected, rel=1e-6)
    z, y = _case(rng, shape, "categorical", True)
    logits = torch.tensor(z).reshape(-1, shape[-1])
    expected = F.cross_entropy(logits, torch.tensor(y).reshape(-1, shape[-1])).item()
    ours = losses.categorical_cross_entropy(z, y, from_logits=True)[0]
    assert ours == pytest.approx(expected, rel=1e-12)
    probabilities = torch.softmax(torch.tensor(z), -1).numpy()
    assert losses.categorical_cross_entropy(probabilities, y)[0] == pytest.approx(
        expected, rel=1e-9
    )


def test_logits_are_stable_where_probabilities_saturate():
    z = np.array([[800.0, -800.0, 0.0]])
    value, grad = losses.binary_cross_entropy(z, np.array([[0.0, 1.0, 1.0]]), from_logits=True)
    assert value == pytest.approx((800.0 + 800.0 + np.log(2)) / 3)
    np.testing.assert_allclose(grad, [[1 / 3, -1 / 3, -1 / 6]])
    value, grad = losses.categorical_cross_entropy(z, np.array([[0.0, 1.0, 0.0]]), from_logits=True)
    assert value == pytest.approx(1600.0) and np.all(np.isfinite(grad))


def test_probabilities_are_clipped_as_keras():
    value, grad = losses.binary_cross_entropy(np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    assert value == pytest.approx(-np.log(1e-7), rel=1e-6)
    np.testing.assert_array_equal(grad, [0.0, 0.0])  # the clip acts: no gradient there


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: losses.binary_cross_entropy(np.zeros(3, int), np.zeros(3)), TypeError, "output"),
        (lambda: losses.binary_cross_entropy(np.zeros(3), np.zeros(2)), ValueError, "targets"),
        (
            lambda: losses.categorical_cross_entropy(
                np.zeros((2, 3)), np.zeros((2, 3)), mask=np.ones(3, bool)
            ),
            ValueError,
            "mask",
        ),
        (
            lambda: losses.categorical_cross_entropy(
                np.zeros((2, 3)), np.zeros((2, 3)), reduction="none"
            ),
            ValueError,
            "reduction",
        ),
        (
            lambda: losses.binary_cross_entropy(np.zeros(3), np.zeros(3), epsilon=0.7),
            ValueError,
            "epsilon",
        ),
    ],
)
def test_bad_arguments(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()
