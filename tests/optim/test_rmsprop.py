"""RMSprop against torch.optim.RMSprop step for step, and Keras's epsilon (under the square
root) and Adam's Keras epsilon (before the bias correction) against Keras's update rules
written out in NumPy from keras.optimizers' definitions."""

from __future__ import annotations

import numpy as np
import pytest

from rnnfast.optim import Adam, RMSprop

STEPS = 20
SHAPES = [(3, 4), (7,), (1, 1)]
SETTINGS = [
    {},
    {"lr": 1e-3, "alpha": 0.9},
    {"lr": 1e-2, "momentum": 0.9},
    {"lr": 1e-2, "centered": True},
    {"lr": 1e-2, "centered": True, "momentum": 0.5, "weight_decay": 0.1},
]


def _problem(rng, dtype=np.float64):
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [np.zeros_like(p) for p in params]
    sequence = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return params, grads, sequence


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "kwargs", SETTINGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()) or "default"
)
def test_rmsprop_matches_torch(torch, rng, kwargs, dtype):
    params, grads, sequence = _problem(rng, dtype)
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = torch.optim.RMSprop(tparams, **kwargs)
    opt = RMSprop(list(zip(params, grads)), **kwargs)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else {"rtol": 2e-5, "atol": 2e-6}
    for step_grads in sequence:
        for g, tp, new in zip(grads, tparams, step_grads):
            g[...] = new
            tp.grad = torch.tensor(new.copy())
        opt.step()
        topt.step()
        for p, tp in zip(params, tparams):
            assert p.dtype == dtype
            np.testing.assert_allclose(p, tp.detach().numpy(), **tol)


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_keras_epsilon(rng, centered):
    """keras.optimizers.RMSprop(learning_rate, rho, momentum, epsilon, centered)'s update:
    v = rho v + (1 - rho) g^2, [a = rho a + (1 - rho) g], m = momentum m + lr g /
    sqrt(v [- a^2] + epsilon), p -= m."""
    lr, rho, momentum, epsilon = 1e-2, 0.9, 0.5, 1e-3
    params, grads, sequence = _problem(rng)
    expected = [p.copy() for p in params]
    state = [[np.zeros_like(p) for _ in range(3)] for p in params]
    opt = RMSprop(
        list(zip(params, grads)),
        lr=lr,
        alpha=rho,
        eps=0.0,
        momentum=momentum,
        centered=centered,
        epsilon=epsilon,
    )
    for step_grads in sequence:
        for g, new in zip(grads, step_grads):
            g[...] = new
        opt.step()
        for p, g, (v, a, m) in zip(expected, step_grads, state):
            v[...] = rho * v + (1 - rho) * g * g
            a[...] = rho * a + (1 - rho) * g
            m[...] = momentum * m + lr * g / np.sqrt(v - (a * a if centered else 0) + epsilon)
            p -= m
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p, e, rtol=1e-12, atol=1e-12)


def test_adam_keras_epsilon(rng):
    """keras.optimizers.Adam's update: alpha = lr sqrt(1 - b2^t) / (1 - b1^t),
    p -= alpha m / (sqrt(v) + epsilon)."""
    lr, b1, b2, epsilon = 1e-2, 0.9, 0.999, 1e-3  # a large epsilon, so its place shows
    params, grads, sequence = _problem(rng)
    expected = [p.copy() for p in params]
    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    opt = Adam(list(zip(params, grads)), lr=lr, betas=(b1, b2), eps=0.0, epsilon=epsilon)
    for t, step_grads in enumerate(sequence, start=1):
        for g, new in zip(grads, step_grads):
            g[...] = new
        opt.step()
        alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        for p, g, (m, v) in zip(expected, step_grads, moments):
            m += (g - m) * (1 - b1)
            v += (g * g - v) * (1 - b2)
            p -= alpha * m / (np.sqrt(v) + epsilon)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p, e, rtol=1e-10, atol=1e-12)


def test_state_dict_round_trip_and_bad_arguments(rng):
    params, grads, sequence = _problem(rng)
    opt = RMSprop(list(zip(params, grads)), momentum=0.9, centered=True, epsilon=1e-7)
    for g, new in zip(grads, sequence[0]):
        g[...] = new
    opt.step()
    other = RMSprop(list(zip([p.copy() for p in params], grads)))
    other.load_state_dict(opt.state_dict())
    assert other.hyperparameters == opt.hyperparameters and other.step_count == 1
    for bad, pattern in [
        ({"alpha": -1.0}, "alpha"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"centered": 1}, "centered"),
    ]:
        with pytest.raises((ValueError, TypeError), match=pattern):
            RMSprop(list(zip(params, grads)), **bad)
