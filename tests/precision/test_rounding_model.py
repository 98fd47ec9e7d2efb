"""precision="bf16" computes what its rounding model says: every cell's forward, step by step,
against the NumPy reference with both operands of every product rounded to bf16
(``rounding_model``: the model, and the bound derived from it). The same bound is too tight for
float32 products: the test tells the two apart."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast

from .forms import layer_forms
from .rounding_model import model_parameters, model_step, reference_model

T, B, D, H, P = 5, 3, 5, 7, 3

CELLS = layer_forms(P)


def _layers(cell, seed=0):
    """The cell's one-layer float32 layer with bf16 products, and its float32 twin (the same
    weights), both in eval mode."""
    cls, options = CELLS[cell]
    pair = [cls(D, H, seed=seed, precision=p, **options).eval() for p in ("bf16", "float32")]
    return pair


def _zero_state(layer):
    h = np.zeros((1, B, layer.cell.output_width(layer)), np.float32)
    if isinstance(layer, rnnfast.LSTM):
        return (h, np.zeros((1, B, H), np.float32))
    return h


def _kernel_step(layer, x_t, state):
    """One step of ``layer``'s forward kernels (a forward over T = 1) from ``state``:
    ``(y_t (B, R), state)``, the state in the layer's form."""
    y, state = layer(x_t[None], state)
    return y[0], state


def _rows(state):
    """The model's state (B, ...) from the layer's form (1, B, ...)."""
    if isinstance(state, tuple):
        return tuple(np.asarray(s[0], np.float64) for s in state)
    return np.asarray(state[0], np.float64)


@pytest.mark.parametrize("cell", list(CELLS))
def test_each_step_is_the_rounding_model(cell, bf16_path, monkeypatch, rng):
    """Forward over T = 1 at a time, each step from the kernels' own state: bf16 products
    within the model's bound at every step (the output, and an LSTM's cell state), float32
    products not."""
    layer, twin = _layers(cell)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    state = _zero_state(layer)
    beyond_float32 = []
    with reference_model(monkeypatch) as recorder:
        p = model_parameters(layer)
        for t in range(T):
            y32, _ = _kernel_step(twin, x[t], state)
            y, next_state = _kernel_step(layer, x[t], state)
            recorder.reset()
            want, want_state = model_step(layer, p, x[t], _rows(state))
            bound = recorder.bound(want)
            assert np.all(np.abs(y - want) <= bound), (
                f"step {t}: |bf16 - model| {np.max(np.abs(y - want)):.3g} > bound "
                f"{np.min(bound):.3g}..{np.max(bound):.3g} (gain {recorder.gain:.3g}, "
                f"E {recorder.error:.3g})"
            )
            if isinstance(next_state, tuple):  # the cell state: bounded the same way
                c, want_c = next_state[1][0], want_state[1]
                assert np.max(np.abs(state[1])) <= 10.0  # the model's C = 4 assumes it
                assert np.all(np.abs(c - want_c) <= recorder.bound(want_c)), f"step {t}: c"
            beyond_float32.append(np.max(np.abs(y32 - want) - bound))
            state = next_state
    assert max(beyond_float32) > 0, "the bound does not tell float32 products from bf16's"


@pytest.mark.parametrize("cell", ["rnn-tanh", "gru", "gru-reset_before", "deep_transition"])
def test_a_sequence_is_the_rounding_model_step_by_step(cell, bf16_path, monkeypatch, rng):
    """Over the whole sequence at once (the input projection of every step in one product):
    each output within the model's bound of the model's step from the kernels' previous
    output (these cells' state is their output)."""
    layer, _ = _layers(cell)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    y, _ = layer(x)
    previous = np.concatenate([np.zeros((1, B, H), np.float32), y[:-1]])
    with reference_model(monkeypatch) as recorder:
        p = model_parameters(layer)
        for t in range(T):
            recorder.reset()
            want, _ = model_step(layer, p, x[t], np.asarray(previous[t], np.float64))
            assert np.all(np.abs(y[t] - want) <= recorder.bound(want)), f"step {t}"
