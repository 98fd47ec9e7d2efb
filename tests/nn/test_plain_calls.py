"""A layer call with nothing around the cells runs on the plain stack (nn.recurrent.plain_calls):
its outputs, states and gradients are the general path's bit for bit (the general path forced
here with ``lengths``), options that surround the cells take the general path, a failed
backward changes nothing, and the caller's arrays changed after the forward do not alter the
gradients."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast.nn.recurrent import plain_calls

T, B, D, H = 4, 3, 5, 7

CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bias": False}),
    ("LSTM", {}),
    ("LSTM", {"proj_size": 3, "num_layers": 2}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for name, o in CASES]


def _pair(name, options, dtype=np.float32):
    make = getattr(rnnfast, name)
    return make(D, H, dtype=dtype, seed=3, **options), make(D, H, dtype=dtype, seed=3, **options)


def _parts(state):
    return list(state) if isinstance(state, tuple) else [state]


def _initial(layer, rng, dtype):
    """An initial state in the layer's API form, from a forward of its own."""
    _, h = layer.eval()(rng.standard_normal((2, B, D)).astype(dtype))
    return h


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_the_plain_call_is_the_general_paths(name, options, dtype):
    rng = np.random.default_rng(0)
    plain, general = _pair(name, options, dtype)
    h0 = _initial(plain, rng, dtype)
    x = rng.standard_normal((T, B, D)).astype(dtype)
    for training in (False, True):
        plain.train(training)
        general.train(training)
        y, h = plain(x, h0)
        y_g, h_g = general(x, h0, lengths=np.full(B, T))
        np.testing.assert_array_equal(y, y_g)
        for a, b in zip(_parts(h), _parts(h_g)):
            np.testing.assert_array_equal(a, b)
    assert not y.flags.writeable  # a training output: backward reads it
    assert type(plain._cache) is plain_calls.PlainCall  # the plain stack ran it
    assert type(general._cache) is not plain_calls.PlainCall
    dy = rng.standard_normal(y.shape).astype(dtype)
    dh_n = tuple(rng.standard_normal(a.shape).astype(dtype) for a in _parts(h))
    dh_n = dh_n if len(dh_n) == 2 else dh_n[0]
    x[...] = 0  # the caller's array changed after the forward: the gradients do not see it
    dx, dh0 = plain.backward(dy, dh_n)
    dx_g, dh0_g = general.backward(dy, dh_n)
    np.testing.assert_array_equal(dx, dx_g)
    for a, b in zip(_parts(dh0), _parts(dh0_g)):
        np.testing.assert_array_equal(a, b)
    for key in general.grads:
        np.testing.assert_array_equal(plain.grads[key], general.grads[key], err_msg=key)


@pytest.mark.parametrize(
    "name,options",
    [
        ("GRU", {"reset_after": False}),
        ("GRU", {"recurrent_activation": "hard_sigmoid"}),
        ("LSTM", {"peepholes": True}),
        ("RNN", {"alpha": 0.5}),
        ("RNN", {"bidirectional": True}),
        ("RNN", {"go_backwards": True}),
        ("GRU", {"return_sequences": True}),
        ("LSTM", {"batch_first": True}),
        ("GRU", {"dilation": 2}),
        ("GRU", {"recurrent_dropout": 0.5}),
        ("LSTM", {"num_layers": 2, "dropout": 0.5}),
        ("GRU", {"stateful": True}),
    ],
)
def test_options_around_the_cells_take_the_general_path(name, options):
    try:
        layer = getattr(rnnfast, name)(D, H, seed=0, **options).train()
    except TypeError:
        pytest.skip(f"{name} has no {options}")
    assert plain_calls._plain_cell(layer) is None


def test_a_failed_backward_changes_nothing():
    layer = rnnfast.GRU(D, H, seed=0)
    x = np.ones((T, B, D), np.float32)
    y, _ = layer(x)
    before = {k: g.copy() for k, g in layer.grads.items()}
    with pytest.raises(ValueError, match="dy"):
        layer.backward(np.ones((T, B, H + 1), np.float32))
    for k, g in layer.grads.items():
        np.testing.assert_array_equal(g, before[k])
    layer.backward(np.ones_like(y))  # the forward is kept for a retry
    with pytest.raises(RuntimeError, match="no training forward"):
        layer.backward(np.ones_like(y))


def test_calls_reuse_the_packed_weights():
    layer = rnnfast.LSTM(D, H, seed=0)
    x = np.ones((T, B, D), np.float32)
    for _ in range(2):
        y, _ = layer(x)
        layer.backward(np.ones_like(y))
    made = layer._weight_cache(0, 0).packs_made
    for _ in range(3):
        y, _ = layer(x)
        layer.backward(np.ones_like(y))
    assert layer._weight_cache(0, 0).packs_made == made
