"""The LayerNorm LSTM (torchaudio's RNN-T predictor cell): the kernels against
rnnfast.reference (forward, and every gradient by finite differences in float64), and the
layer rnnfast.LayerNormLSTM on the recurrent layer machinery."""

import numpy as np
import pytest

import rnnfast
from rnnfast import functional as F
from rnnfast import reference as R

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def _weights(rng, D, H, dt):
    return (
        rng.uniform(-0.5, 0.5, (4 * H, D)).astype(dt),
        rng.uniform(-0.5, 0.5, (4 * H, H)).astype(dt),
        rng.uniform(0.5, 1.5, 4 * H).astype(dt),
        rng.uniform(-0.3, 0.3, 4 * H).astype(dt),
        rng.uniform(0.5, 1.5, H).astype(dt),
        rng.uniform(-0.3, 0.3, H).astype(dt),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "T,B,D,H", [(1, 1, 1, 1), (5, 3, 4, 3), (4, 2, 3, 17), (3, 1, 2, 33), (6, 9, 5, 100)]
)
@pytest.mark.parametrize("threads", [1, 2])
def test_forward_matches_reference(dtype, T, B, D, H, threads):
    rng = np.random.default_rng(T * 1000 + H)
    x = rng.standard_normal((T, B, D)).astype(dtype)
    w = _weights(rng, D, H, dtype)
    h0, c0 = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
    with rnnfast.threads(threads):
        out = F.layer_norm_lstm_forward(x, *w, h0, c0, keep_workspace=True)
    ref = R.layer_norm_lstm_forward(x, *w, h0, c0)
    tol = TOL[dtype]
    for got, want in ((out.y, ref.y), (out.h_n, ref.h_n), (out.c_n, ref.c_n)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("lengths", [None, [4, 2, 0, 3]])
@pytest.mark.parametrize("H,threads", [(3, 1), (17, 2)])
def test_gradients_by_finite_differences(lengths, H, threads):
    rng = np.random.default_rng(H)
    T, B, D = 4, 4, 3
    x = rng.standard_normal((T, B, D))
    w = list(_weights(rng, D, H, np.float64))
    h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    with rnnfast.threads(threads):
        out = F.layer_norm_lstm_forward(x, *w, h0, c0, lengths, keep_workspace=True)
    ref = R.layer_norm_lstm_forward(x, *w, h0, c0, lengths)
    np.testing.assert_allclose(out.y, ref.y, rtol=1e-10, atol=1e-10)
    gy, gh, gc = rng.standard_normal(out.y.shape), *rng.standard_normal((2, B, H))
    with rnnfast.threads(threads):
        g = F.layer_norm_lstm_backward(
            x, *w, out.y, out.workspace, gy, gh, gc, h0=h0, c0=c0, lengths=lengths
        )

    def loss(args):
        r = R.layer_norm_lstm_forward(*args[:7], args[7], args[8], lengths)
        return (r.y * gy).sum() + (r.h_n * gh).sum() + (r.c_n * gc).sum()

    args = [x, *w, h0, c0]
    grads = [g.dx, g.dweight_ih, g.dweight_hh, g.dg_norm_weight, g.dg_norm_bias]
    grads += [g.dc_norm_weight, g.dc_norm_bias, g.dh0, g.dc0]
    eps = 1e-6
    for k, (a, ga) in enumerate(zip(args, grads)):
        for idx in list(np.ndindex(a.shape))[:: max(1, a.size // 12)]:
            up = [v.copy() for v in args]
            down = [v.copy() for v in args]
            up[k][idx] += eps
            down[k][idx] -= eps
            fd = (loss(up) - loss(down)) / (2 * eps)
            assert abs(fd - ga[idx]) < 1e-6 * max(1.0, abs(fd)), (k, idx, fd, ga[idx])


def test_step_matches_forward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 4))
    w = _weights(rng, 4, 5, np.float64)
    ref = R.layer_norm_lstm_forward(x, *w)
    h = c = None
    for t in range(3):
        h, c = F.layer_norm_lstm_step(x[t], h, c, w[0], w[1], *w[2:])
        np.testing.assert_allclose(h, ref.y[t], rtol=1e-12, atol=1e-12)


def _layer(rng, dtype=np.float64, **kw):
    layer = rnnfast.LayerNormLSTM(4, 6, bias=False, dtype=dtype, **kw)
    sd = layer.state_dict()
    for k in sd:  # norms away from their ones and zeros
        if "norm" in k:
            sd[k] = sd[k] + rng.uniform(-0.3, 0.3, sd[k].shape).astype(dtype)
    layer.load_state_dict(sd)
    return layer, sd


def test_layer_parameters_and_registry():
    layer = rnnfast.LayerNormLSTM(4, 6, bias=False)
    assert list(layer.state_dict()) == [
        "weight_ih_l0",
        "weight_hh_l0",
        "g_norm_weight_l0",
        "g_norm_bias_l0",
        "c_norm_weight_l0",
        "c_norm_bias_l0",
    ]
    assert np.all(layer.state_dict()["g_norm_weight_l0"] == 1)
    assert rnnfast.nn.recurrent.cells.cell_by(kernel_cell="layer_norm_lstm") is layer.cell
    assert layer.cell.layer_class is rnnfast.LayerNormLSTM
    assert "layer_norm_lstm" in rnnfast._core.recurrent_cells()


@pytest.mark.parametrize("bidirectional", [False, True])
def test_layer_stacked_matches_reference(bidirectional):
    rng = np.random.default_rng(5)
    layer, sd = _layer(rng, num_layers=2, bidirectional=bidirectional)
    x = rng.standard_normal((5, 3, 4))
    lengths = [5, 3, 2]
    y, (h_n, c_n) = layer(x, lengths=lengths)
    inp = x
    for k in range(2):
        outs = []
        for d, sfx in enumerate(["", "_reverse"][: 1 + bidirectional]):
            names = [n + f"_l{k}{sfx}" for n in ("weight_ih", "weight_hh")]
            names += [n + f"_l{k}{sfx}" for n in ("g_norm_weight", "g_norm_bias")]
            names += [n + f"_l{k}{sfx}" for n in ("c_norm_weight", "c_norm_bias")]
            seq = inp if d == 0 else rnnfast.reverse_sequences(inp, lengths)
            r = R.layer_norm_lstm_forward(seq, *(sd[n] for n in names), lengths=lengths)
            outs.append(r.y if d == 0 else rnnfast.reverse_sequences(r.y, lengths))
        inp = np.concatenate(outs, axis=-1)
    np.testing.assert_allclose(y, inp, rtol=1e-10, atol=1e-10)


def test_layer_backward_by_finite_differences():
    rng = np.random.default_rng(7)
    layer, sd = _layer(rng)
    layer.train()
    x = rng.standard_normal((4, 2, 4))
    gy = rng.standard_normal((4, 2, 6))
    y, _ = layer(x)
    dx, _ = layer.backward(gy)
    grads = dict(layer.grads)
    for name in ("g_norm_weight_l0", "c_norm_bias_l0", "weight_hh_l0"):
        p = sd[name]
        for idx in [(0,) * p.ndim, tuple(s - 1 for s in p.shape)]:
            fd = []
            for e in (1e-6, -1e-6):
                q = dict(sd)
                q[name] = p.copy()
                q[name][idx] += e
                fd.append((R.layer_norm_lstm_forward(x, *(q[k] for k in sd)).y * gy).sum())
            assert abs((fd[0] - fd[1]) / 2e-6 - grads[name][idx]) < 1e-6


def test_layer_step_save_load_summary(tmp_path):
    rng = np.random.default_rng(9)
    layer, sd = _layer(rng)
    x = rng.standard_normal((3, 2, 4))
    y, _ = layer(x)
    state = None
    for t in range(3):
        out, state = layer.step(x[t], state)
        np.testing.assert_allclose(out, y[t], rtol=1e-12, atol=1e-12)
    path = tmp_path / "ln.npz"
    rnnfast.save(layer, path)
    again = rnnfast.load(path)
    assert type(again) is rnnfast.LayerNormLSTM
    np.testing.assert_array_equal(again(x)[0], y)
    text = layer.summary()
    # Keras-style count: W_ih, W_hh and the norms' 4H + 4H + H + H
    assert f"{24 * 4 + 24 * 6 + 60:,}" in text


def test_refused_options():
    with pytest.raises(ValueError, match="proj_size"):
        rnnfast.LayerNormLSTM(4, 6, proj_size=2)
    with pytest.raises(ValueError, match="unit_forget_bias"):
        rnnfast.LayerNormLSTM(4, 6, unit_forget_bias=True)
    layer = rnnfast.LayerNormLSTM(4, 6, dtype=np.float32)
    with pytest.raises(ValueError, match="cannot be quantized"):
        rnnfast.quantize(layer, "int8")
    with pytest.raises(ValueError, match="cell_params"):
        rnnfast._core.gated_forward(
            "layer_norm_lstm", np.zeros((1, 1, 4), np.float32), None, None,
            np.zeros((24, 4), np.float32), np.zeros((24, 6), np.float32), None, None, None,
            None, "tanh", "sigmoid", True, False,
        )  # fmt: skip
