"""RNN(dilation=d): h_t reads h_{t-d} (temporal skip connections, multiple time scales), on the
existing kernels as d interleaved chains. Oracles: a NumPy loop written from the equation, and
torch.nn.RNN run on each interleaved subsequence; gradients by finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast
from rnnfast import Embedding

F64 = np.float64
D, H = 4, 5


def _act(name):
    return np.tanh if name == "tanh" else (lambda a: np.maximum(a, 0.0))


def _run_sequence(x, w_ih, w_hh, b, h0, d, alpha, act):
    """One sequence (L, D) from the equation: h_t = (1-a) h_{t-d} + a act(W_ih x_t + b + W_hh
    h_{t-d}), h_{t-d} = h0 for t < d."""
    hs = []
    for t in range(len(x)):
        prev = hs[t - d] if t >= d else h0
        hs.append((1 - alpha) * prev + alpha * act(w_ih @ x[t] + b + w_hh @ prev))
    return np.array(hs).reshape(len(x), len(h0))


def reference(layer, x, lengths, h0=None):
    """The layer's (y, h_n) from the equation, one sequence and direction at a time."""
    T, B, _ = x.shape
    p, dirs = layer.state_dict(), 2 if layer.bidirectional else 1
    dil = (
        layer.dilation if isinstance(layer.dilation, list) else [layer.dilation] * layer.num_layers
    )
    alphas = layer.alpha if isinstance(layer.alpha, list) else [layer.alpha] * layer.num_layers
    act = _act(layer.nonlinearity)
    inp = x
    h_n = np.zeros((layer.num_layers * dirs, B, H))
    for k in range(layer.num_layers):
        out = np.zeros((T, B, dirs * H))
        for r in range(dirs):
            sfx = f"_l{k}" + ("_reverse" if r else "")
            b = p["bias_ih" + sfx] + p["bias_hh" + sfx]
            for j in range(B):
                n = int(lengths[j])
                seq = inp[:n, j][::-1] if r else inp[:n, j]
                start = np.zeros(H) if h0 is None else h0[k * dirs + r, j]
                hs = _run_sequence(
                    seq,
                    p["weight_ih" + sfx],
                    p["weight_hh" + sfx],
                    b,
                    start,
                    dil[k],
                    alphas[k],
                    act,
                )
                out[:n, j, r * H : (r + 1) * H] = hs[::-1] if r else hs
                h_n[k * dirs + r, j] = hs[-1] if n else start
        inp = out
    return inp, h_n


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("dilation", [2, 3, [1, 2], [4, 3]], ids=str)
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
def test_dilated_layer_is_the_equation(dilation, bidirectional, nonlinearity, with_lengths, rng):
    T, B = 10, 4  # T not a multiple of 3 or 4: the chains' padding is tested too
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        nonlinearity=nonlinearity,
        dtype=F64,
        seed=1,
        bidirectional=bidirectional,
        dilation=dilation,
        alpha=[1.0, 0.6],
    )
    x = rng.standard_normal((T, B, D))
    lengths = np.array([10, 7, 1, 0]) if with_lengths else np.full(B, T)
    h0 = rng.standard_normal((2 * (2 if bidirectional else 1), B, H))
    y, h_n = layer(x, h0, lengths=lengths if with_lengths else None)
    y_ref, h_ref = reference(layer, x, lengths, h0)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h_n, h_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
def test_dilated_layer_is_torch_on_the_interleaved_subsequences(torch, d, rng):
    T, B = 12, 3
    layer = rnnfast.RNN(D, H, dilation=d, dtype=F64, seed=2)
    t_rnn = torch.nn.RNN(D, H, dtype=torch.float64)
    t_rnn.load_state_dict({k: torch.from_numpy(v) for k, v in layer.state_dict().items()})
    x = rng.standard_normal((T, B, D))
    y, _ = layer(x)
    for j in range(d):
        expected, _ = t_rnn(torch.from_numpy(np.ascontiguousarray(x[j::d])))
        np.testing.assert_allclose(y[j::d], expected.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_dilated_gradients_match_finite_differences(bidirectional, rng):
    T, B = 9, 3
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        dtype=F64,
        seed=3,
        bidirectional=bidirectional,
        dilation=[2, 3],
        alpha=[0.7, 1.0],
    )
    dirs = 2 if bidirectional else 1
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((2 * dirs, B, H))
    lengths = np.array([9, 4, 6])
    y, h_n = layer(x, h0, lengths=lengths)
    wy, wh = rng.standard_normal(y.shape), rng.standard_normal(h_n.shape)
    dx, dh0 = layer.backward(wy, wh)

    def loss():
        yy, hh = layer(x, h0, lengths=lengths)
        return float(np.sum(yy * wy) + np.sum(hh * wh))

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dh0, numerical_gradient(loss, h0), rtol=1e-6, atol=1e-8)
    for name in ("weight_hh_l0", "weight_ih_l1", "bias_hh_l1"):
        layer.zero_grad()
        layer(x, h0, lengths=lengths)
        layer.backward(wy, wh)
        np.testing.assert_allclose(
            layer.grads[name],
            numerical_gradient(loss, layer._params[name]),
            rtol=1e-6,
            atol=1e-8,
            err_msg=name,
        )


def test_dilated_token_input_equals_the_embedded_sequence(rng):
    embed = Embedding(6, D, dtype=F64, seed=0)
    layer = rnnfast.RNN(D, H, dilation=3, dtype=F64, seed=4)
    ids = rng.integers(0, 6, size=(11, 5))  # 55 tokens > 6 rows: the fused path pays
    y_fused, h_fused = layer(ids, embedding=embed)
    layer.backward(np.ones_like(y_fused))
    g_fused = embed.grads["weight"].copy()
    embed.zero_grad()
    y, h = layer(embed(ids))
    dx, _ = layer.backward(np.ones_like(y))
    embed.backward(dx)
    np.testing.assert_allclose(y_fused, y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h_fused, h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g_fused, embed.grads["weight"], rtol=1e-10, atol=1e-12)


def test_dilation_one_is_the_plain_layer(rng):
    x = rng.standard_normal((7, 2, D))
    plain, dilated = rnnfast.RNN(D, H, seed=5), rnnfast.RNN(D, H, seed=5, dilation=1)
    np.testing.assert_array_equal(plain(x.astype(np.float32))[0], dilated(x.astype(np.float32))[0])


@pytest.mark.parametrize(
    "value, exc, match",
    [
        (0, ValueError, r"dilation: expected an int >= 1, got 0"),
        (1.5, TypeError, "int"),
        (True, TypeError, "int"),
        ([1, 2, 3], ValueError, "num_layers=2"),
    ],
    ids=["zero", "float", "bool", "list-length"],
)
def test_bad_dilation(value, exc, match):
    with pytest.raises(exc, match=match):
        rnnfast.RNN(D, H, num_layers=2, dilation=value)
    layer = rnnfast.RNN(D, H, num_layers=2)
    with pytest.raises(exc, match=match):
        layer.dilation = value
    assert layer.dilation == 1


def test_dilation_is_saved_and_shown(tmp_path):
    layer = rnnfast.RNN(D, H, num_layers=3, dilation=[1, 2, 4])
    assert "dilation=[1, 2, 4]" in repr(layer)
    layer.save(tmp_path / "d.npz")
    assert rnnfast.load(tmp_path / "d.npz").dilation == [1, 2, 4]
