"""The RNN layer's API: parameters and their names, initialisation, gradient accumulation,
modes, summary, live parameters, unimplemented options, batch_first, optional gradients."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    DTYPES,
    PLAIN,
    assert_close,
    make_problem,
    reference_backward,
    reference_forward,
)

import rnnfast
from rnnfast import functional as F

T, B, D, H = 6, 3, 4, 9
TORCH_KEYS = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]


def _layer(p, **kw):
    layer = rnnfast.RNN(D, H, dtype=p.x.dtype, **kw)
    layer.load_state_dict(p.state_dict())
    return layer


# ---- parameters --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_state_dict_keys_and_shapes_are_pytorchs(dtype):
    layer = rnnfast.RNN(D, H, dtype=dtype)
    sd = layer.state_dict()
    assert list(sd) == TORCH_KEYS
    assert [v.shape for v in sd.values()] == [(H, D), (H, H), (H,), (H,)]
    assert all(v.dtype == np.dtype(dtype) for v in sd.values())
    assert [k for k, _ in layer.named_parameters()] == TORCH_KEYS
    assert list(layer.grads) == TORCH_KEYS
    assert layer.num_parameters() == H * D + H * H + 2 * H


def test_no_bias_keys_without_bias():
    layer = rnnfast.RNN(D, H, bias=False)
    assert list(layer.state_dict()) == TORCH_KEYS[:2]
    assert list(layer.grads) == TORCH_KEYS[:2]
    assert len(layer.parameters()) == 2
    assert layer.num_parameters() == H * D + H * H


def test_state_dict_keys_match_torch(torch):
    for bias in (True, False):
        module = torch.nn.RNN(D, H, bias=bias)
        assert list(rnnfast.RNN(D, H, bias=bias).state_dict()) == list(module.state_dict())


@pytest.mark.parametrize("hidden", [1, 9, 256])
@pytest.mark.parametrize("dtype", DTYPES)
def test_init_is_uniform_within_pytorchs_bound(dtype, hidden):
    layer = rnnfast.RNN(64, hidden, dtype=dtype, seed=0)
    bound = 1 / np.sqrt(hidden)
    values = np.concatenate([p.ravel() for p in layer.parameters()]).astype(np.float64)
    assert np.all(np.abs(values) <= bound)
    # Spread over the whole interval, centred: not a narrower or shifted distribution.
    assert values.max() > 0.9 * bound and values.min() < -0.9 * bound
    assert abs(values.mean()) < 0.1 * bound
    assert 0.2 * bound**2 < values.var() < 0.5 * bound**2  # U(-a, a) has variance a^2 / 3
    for name, p in layer.named_parameters():
        assert p.dtype == np.dtype(dtype), name
        assert np.unique(p).size > p.size // 2, name  # not a constant fill


def test_init_is_reproducible_from_seed():
    a = rnnfast.RNN(D, H, seed=42).state_dict()
    b = rnnfast.RNN(D, H, seed=42).state_dict()
    c = rnnfast.RNN(D, H, seed=43).state_dict()
    for k in TORCH_KEYS:
        assert np.array_equal(a[k], b[k]), k
        assert not np.array_equal(a[k], c[k]), k
    # Distinct parameters of one layer are drawn independently.
    assert not np.array_equal(a["bias_ih_l0"], a["bias_hh_l0"])


def test_load_state_dict_roundtrip(rng):
    p = make_problem(rng, T, B, D, H, np.float64)
    layer = rnnfast.RNN(D, H, dtype=np.float32)
    layer.load_state_dict(p.state_dict())  # float64 values into a float32 layer: converted
    for k, v in layer.state_dict().items():
        assert v.dtype == np.float32
        assert np.array_equal(v, p.state_dict()[k].astype(np.float32)), k
    other = rnnfast.RNN(D, H, dtype=np.float32, seed=5)
    other.load_state_dict(layer.state_dict())
    for k, v in other.state_dict().items():
        assert np.array_equal(v, layer.state_dict()[k]), k


def test_parameters_are_live(rng):
    p = make_problem(rng, T, B, D, H, np.float64)
    layer = _layer(p)
    y_before, _ = layer(p.x)
    _, w_hh, b_ih, _ = layer.parameters()
    assert dict(layer.named_parameters())["weight_hh_l0"] is w_hh
    with pytest.raises(ValueError, match="read-only"):
        w_hh *= 0.5  # read-only: the layer keeps its weights packed between calls
    with rnnfast.writable_parameters(layer):  # an in-place update, as an optimizer's step
        w_hh *= 0.5
        b_ih += 0.1
    y_after, _ = layer(p.x)
    assert not np.allclose(y_after, y_before)
    y_ref, _ = reference_forward(
        type(p)(p, weight_hh=p.weight_hh * 0.5, bias_ih=p.bias_ih + 0.1, h0=None), "tanh"
    )
    assert_close(y_after, y_ref, np.float64, "y after an in-place update")
    assert np.array_equal(layer.state_dict()["weight_hh_l0"], w_hh)


# ---- gradients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_grads_accumulate_and_zero_grad_resets(rng, dtype, nonlinearity):
    p = make_problem(rng, T, B, D, H, dtype)
    x2 = rng.standard_normal((T, B, D)).astype(dtype)
    dy1 = rng.standard_normal((T, B, H)).astype(dtype)
    dy2 = rng.standard_normal((T, B, H)).astype(dtype)
    layer = _layer(p, nonlinearity=nonlinearity)
    for k, g in layer.grads.items():
        assert g.dtype == np.dtype(dtype) and not g.any(), k

    y1, _ = layer(p.x, p.h0[None])
    layer.backward(dy1)
    first = {k: g.copy() for k, g in layer.grads.items()}
    y2, _ = layer(x2)
    layer.backward(dy2)

    r1 = reference_backward(p, y1, dy1, None, nonlinearity)
    r2 = reference_backward(type(p)(p, x=x2, h0=None), y2, dy2, None, nonlinearity)
    expected = {
        "weight_ih_l0": (r1[2], r2[2]),
        "weight_hh_l0": (r1[3], r2[3]),
        "bias_ih_l0": (r1[4], r2[4]),
        "bias_hh_l0": (r1[4], r2[4]),
    }
    for k, (a, b) in expected.items():
        assert_close(first[k], a, dtype, f"{k} after one backward")
        assert_close(layer.grads[k], a + b, dtype, f"{k} after two")

    grads_before = {k: id(g) for k, g in layer.grads.items()}
    layer.zero_grad()
    for k, g in layer.grads.items():
        assert not g.any(), k
        assert id(g) == grads_before[k], k  # zeroed in place, as optimizers hold them
    layer(p.x, p.h0[None])
    layer.backward(dy1)
    for k in layer.grads:
        assert np.array_equal(layer.grads[k], first[k]), k


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
def test_dh_n_only(rng, nonlinearity):
    p = make_problem(rng, T, B, D, H, np.float64)
    dh_n = rng.standard_normal((1, B, H))
    layer = _layer(p, nonlinearity=nonlinearity)
    y, _ = layer(p.x, p.h0[None])
    dx, dh0 = layer.backward(None, dh_n)
    ref = reference_backward(p, y, None, dh_n[0], nonlinearity)
    assert np.abs(ref[0]).max() > 1e-3
    assert_close(dx, ref[0], np.float64, "dx")
    assert_close(dh0, ref[1][None], np.float64, "dh0")
    assert_close(layer.grads["weight_ih_l0"], ref[2], np.float64, "dweight_ih")
    assert_close(layer.grads["weight_hh_l0"], ref[3], np.float64, "dweight_hh")
    assert_close(layer.grads["bias_hh_l0"], ref[4], np.float64, "dbias_hh")
    # Only dh_n: the same as a dy that is zero everywhere.
    layer2 = _layer(p, nonlinearity=nonlinearity)
    layer2(p.x, p.h0[None])
    dx2, _ = layer2.backward(np.zeros((T, B, H)), dh_n)
    assert_close(dx, dx2, np.float64, "dx vs explicit zero dy")


def test_no_gradient_gives_zeros(rng):
    p = make_problem(rng, T, B, D, H, np.float32)
    layer = _layer(p)
    layer(p.x, p.h0[None])
    dx, dh0 = layer.backward(None)
    assert dx.shape == (T, B, D) and dh0.shape == (1, B, H)
    assert dx.dtype == np.float32 and dh0.dtype == np.float32
    assert not dx.any() and not dh0.any()
    for k, g in layer.grads.items():
        assert not g.any(), k
    g = F.rnn_backward(
        p.x, p.weight_ih, p.weight_hh, F.rnn_forward(**p.forward_args())[0], h0=p.h0, **PLAIN
    )
    for name, a in zip(g._fields, g):
        assert not a.any(), name


# ---- modes -------------------------------------------------------------------------------------


def test_train_and_eval(rng):
    p = make_problem(rng, T, B, D, H, np.float32)
    layer = _layer(p)
    assert layer.training
    y_train, h_train = layer(p.x, p.h0[None])
    assert layer.eval() is layer and not layer.training
    y_eval, h_eval = layer(p.x, p.h0[None])
    assert np.array_equal(y_eval, y_train) and np.array_equal(h_eval, h_train)
    with pytest.raises(RuntimeError):
        layer.backward(np.ones_like(y_eval))
    assert layer.train() is layer and layer.training
    layer.train(False)
    assert not layer.training
    layer.train(True)
    y, _ = layer(p.x, p.h0[None])
    dx, _ = layer.backward(np.ones_like(y))
    assert dx.shape == p.x.shape and dx.any()


def test_summary_reports_parameter_count(capsys):
    layer = rnnfast.RNN(33, 100, nonlinearity="relu")
    text = layer.summary()
    assert text in capsys.readouterr().out
    count = 33 * 100 + 100 * 100 + 2 * 100
    assert f"{count:,}" in text  # 13,500
    assert "relu" in text and "100" in text
    no_bias = rnnfast.RNN(33, 100, bias=False).summary()
    assert f"{33 * 100 + 100 * 100:,}" in no_bias and f"{count:,}" not in no_bias


def test_repr():
    assert repr(rnnfast.RNN(3, 5)) == "RNN(3, 5, dtype=float32)"
    r = repr(rnnfast.RNN(3, 5, nonlinearity="relu", bias=False, batch_first=True, dtype=np.float64))
    assert "relu" in r and "bias=False" in r and "batch_first=True" in r and "float64" in r


# ---- unimplemented and invalid options ------------------------------------------------------------


def test_stacked_and_bidirectional_are_implemented():
    # Covered in depth by tests/nn/test_rnn_composition*.py; here only that they construct.
    assert rnnfast.RNN(D, H, num_layers=2).num_layers == 2
    assert rnnfast.RNN(D, H, bidirectional=True).bidirectional


@pytest.mark.parametrize("dropout", [-0.1, 1.5, "0.1", True])
def test_bad_dropout(dropout):
    with pytest.raises(ValueError, match="dropout"):
        rnnfast.RNN(D, H, dropout=dropout)


# ---- batch_first -------------------------------------------------------------------------------


@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_first(rng, dtype, with_h0):
    p = make_problem(rng, T, B, D, H, dtype, h0=with_h0)
    h0 = p.h0[None] if with_h0 else None
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((1, B, H)).astype(dtype)

    seq = _layer(p)
    y, h_n = seq(p.x, h0)
    dx, dh0 = seq.backward(dy, dh_n)

    bf = _layer(p, batch_first=True)
    y_bf, h_n_bf = bf(p.x.swapaxes(0, 1), h0)
    assert y_bf.shape == (B, T, H) and h_n_bf.shape == (1, B, H)
    assert np.array_equal(y_bf, y.swapaxes(0, 1)) and np.array_equal(h_n_bf, h_n)
    with pytest.raises(ValueError, match="dy"):
        bf.backward(dy if T != B else dy[:, :-1], dh_n)  # (T, B, H) is the wrong layout here
    dx_bf, dh0_bf = bf.backward(dy.swapaxes(0, 1), dh_n)
    assert dx_bf.shape == (B, T, D) and dh0_bf.shape == (1, B, H)
    assert np.array_equal(dx_bf, dx.swapaxes(0, 1)) and np.array_equal(dh0_bf, dh0)
    for k in seq.grads:
        assert np.array_equal(bf.grads[k], seq.grads[k]), k
    # The layout is (B, T, D): a wrong input size is reported against it.
    with pytest.raises(ValueError, match=r"\(B, T, D\)"):
        bf(np.zeros((B, T, D + 1), dtype))
