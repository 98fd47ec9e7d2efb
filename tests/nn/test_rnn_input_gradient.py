"""backward(..., input_gradient=False): an input that needs no gradient (the data a first layer
reads) is not differentiated (dx None, its GEMM skipped in the kernels), and every other
gradient is what the full backward gives, bitwise: in the functional core (plain, lengths,
masked, leaky and token input) and in the layer (stacked, bidirectional, batch_first, lengths,
go_backwards, residual, dilation, a fused Embedding). A non-bool is a TypeError naming it."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast import functional as F

T, B, D, H = 7, 4, 3, 5


def _rng():
    return np.random.default_rng(0)


FUNCTIONAL_CASES = {
    "plain": {},
    "lengths": {"lengths": np.array([7, 2, 5, 0])},
    "step-mask": {"step_mask": _rng().random((T, B)) > 0.3},
    "recurrent-mask": {"recurrent_mask": np.full((B, H), 1.25)},
    "leaky": {"alpha": 0.4},
}


def _functional_run(options, input_gradient, ids=None):
    rng = _rng()
    x = rng.standard_normal((11, D) if ids is not None else (T, B, D))
    w_ih, w_hh = rng.uniform(-0.5, 0.5, (H, D)), rng.uniform(-0.5, 0.5, (H, H))
    h0 = rng.uniform(-1, 1, (B, H))
    fw = {**F.PLAIN_FORWARD_OPTIONS, "h0": h0, **options}
    y, _ = F.rnn_forward(x, w_ih, w_hh, **fw, ids=ids)
    dy = rng.standard_normal(y.shape)
    return F.rnn_backward(
        x, w_ih, w_hh, y, dy, np.ones((B, H)), **fw, ids=ids, input_gradient=input_gradient
    )


@pytest.mark.parametrize("options", FUNCTIONAL_CASES.values(), ids=FUNCTIONAL_CASES.keys())
def test_functional_skips_dx_only(options):
    full = _functional_run(options, True)
    part = _functional_run(options, False)
    assert full.dx is not None and part.dx is None
    for a, b in zip(full[1:], part[1:]):
        np.testing.assert_array_equal(a, b)


def test_functional_with_token_input_skips_the_tables_gradient_only():
    ids = _rng().integers(0, 11, size=(T, B))
    full, part = _functional_run({}, True, ids), _functional_run({}, False, ids)
    assert full.dx.shape == (11, D) and part.dx is None
    for a, b in zip(full[1:], part[1:]):
        np.testing.assert_array_equal(a, b)


LAYER_CASES = {
    "stacked-bidir-batch-first": (
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
        {},
    ),
    "lengths-go-backwards": ({"num_layers": 2, "go_backwards": True}, {"lengths": [7, 3, 5, 1]}),
    "residual": ({"input_size": H, "num_layers": 3, "residual": True}, {}),
    "dilation": ({"num_layers": 2, "dilation": [1, 2]}, {}),
}


def _layer_run(config, call, input_gradient):
    config = dict(config)
    size = config.pop("input_size", D)
    layer = rnnfast.RNN(size, H, dtype=np.float64, seed=0, **config)
    rng = _rng()
    shape = (B, T, size) if layer.batch_first else (T, B, size)
    x = rng.standard_normal(shape)
    y, h_n = layer(x, **call)
    dx, dh0 = layer.backward(
        rng.standard_normal(y.shape), np.ones_like(h_n), input_gradient=input_gradient
    )
    return x, dx, dh0, {k: v.copy() for k, v in layer.grads.items()}


@pytest.mark.parametrize("config, call", LAYER_CASES.values(), ids=LAYER_CASES.keys())
def test_layer_skips_dx_only(config, call):
    x, dx, dh0, grads = _layer_run(config, call, True)
    _, dx_none, dh0_b, grads_b = _layer_run(config, call, False)
    assert dx.shape == x.shape and dx_none is None
    np.testing.assert_array_equal(dh0, dh0_b)
    assert grads.keys() == grads_b.keys()
    for name in grads:
        np.testing.assert_array_equal(grads[name], grads_b[name], err_msg=name)


def test_a_fused_embedding_still_gets_its_gradient():
    def run(input_gradient):
        emb = rnnfast.Embedding(11, D, dtype=np.float64, seed=1)
        rnn = rnnfast.RNN(D, H, dtype=np.float64, seed=0)
        ids = _rng().integers(0, 11, size=(T, B))
        y, _ = rnn(ids, embedding=emb)
        dx, _ = rnn.backward(np.ones_like(y), input_gradient=input_gradient)
        assert dx is None  # ids have no gradient either way
        return emb.grads["weight"].copy(), rnn.grads["weight_ih_l0"].copy()

    for a, b in zip(run(True), run(False)):
        assert np.abs(a).max() > 0
        np.testing.assert_array_equal(a, b)


def test_a_non_bool_is_a_type_error_and_the_forward_stays_for_a_retry():
    layer = rnnfast.RNN(D, H, seed=0)
    y, _ = layer(np.ones((T, B, D), np.float32))
    with pytest.raises(TypeError, match="input_gradient"):
        layer.backward(np.ones_like(y), input_gradient=1)
    dx, _ = layer.backward(np.ones_like(y), input_gradient=False)
    assert dx is None
    with pytest.raises(TypeError, match="input_gradient"):
        _functional_run({}, "no")
