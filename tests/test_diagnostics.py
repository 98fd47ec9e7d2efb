"""rnnfast.diagnostics: spectral radius and singular values against numpy.linalg; the Jacobian
norms ||dh_t/dh_0|| against Jacobians by finite differences in float64; the per-step dL/dh_t
against finite differences and the layer's own backward (dh0); the notes' claim that a spectral
radius below 1 makes the gradient vanish and above 1 explode (and leaky units slow the decay)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS

import rnnfast
from rnnfast import RNN, diagnostics, functional

F64 = np.float64


def _orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _layer_params(rnn, k):
    p = dict(rnn.named_parameters())
    return (
        p[f"weight_ih_l{k}"],
        p[f"weight_hh_l{k}"],
        p.get(f"bias_ih_l{k}"),
        p.get(f"bias_hh_l{k}"),
    )


def _alphas(rnn):
    a = rnn.alpha
    return list(a) if isinstance(a, list) else [a] * rnn.num_layers


def _layer_inputs(rnn, x, h0):
    """Each layer's input, time-major (the stack run layer by layer, as the oracle)."""
    inputs, inp = [], x
    for k in range(rnn.num_layers):
        inputs.append(inp)
        y, _ = functional.rnn_forward(
            inp, *_layer_params(rnn, k), h0[k], rnn.nonlinearity, alpha=_alphas(rnn)[k]
        )
        inp = y + inp if (rnn.residual and k > 0) else y
    return inputs


def _run_layer(rnn, k, inp, h0_k):
    y, _ = functional.rnn_forward(
        inp, *_layer_params(rnn, k), h0_k, rnn.nonlinearity, alpha=_alphas(rnn)[k]
    )
    return y


# ---- radius and singular values ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 17, 33])
def test_radius_and_singular_values_match_numpy(rng, n):
    w = rng.standard_normal((n, n))
    assert diagnostics.spectral_radius(w) == pytest.approx(
        np.max(np.abs(np.linalg.eigvals(w))), rel=1e-12
    )
    np.testing.assert_allclose(
        diagnostics.singular_values(w), np.linalg.svd(w, compute_uv=False), rtol=1e-12
    )
    assert diagnostics.singular_values(w)[0] >= diagnostics.spectral_radius(w) - 1e-12
    scaled = diagnostics.scale_to_spectral_radius(w.astype(np.float32), 0.9)
    assert scaled.dtype == np.float32
    assert diagnostics.spectral_radius(scaled) == pytest.approx(0.9, rel=1e-5)


def test_for_layer_covers_every_recurrent_weight():
    rnn = RNN(3, 5, num_layers=2, bidirectional=True, seed=0)
    info = diagnostics.for_layer(rnn)
    assert sorted(info) == sorted(
        ["weight_hh_l0", "weight_hh_l0_reverse", "weight_hh_l1", "weight_hh_l1_reverse"]
    )
    params = dict(rnn.named_parameters())
    for name, (radius, sv) in info.items():
        w = params[name].astype(F64)
        assert radius == pytest.approx(np.max(np.abs(np.linalg.eigvals(w))), rel=1e-12)
        np.testing.assert_allclose(sv, np.linalg.svd(w, compute_uv=False), rtol=1e-12)
    diagnostics.set_spectral_radius(rnn, 1.1)
    for radius, _ in diagnostics.for_layer(rnn).values():
        assert radius == pytest.approx(1.1, rel=1e-5)


# ---- Jacobians -------------------------------------------------------------------------------------


def _numerical_jacobians(rnn, k, inp, h0_k, eps=1e-6):
    """J[t, b] = dh_t/dh_0 (H, H) of layer k for batch item b, by central differences."""
    T, B = inp.shape[:2]
    H = rnn.hidden_size
    J = np.zeros((T, B, H, H))
    for j in range(H):
        plus, minus = h0_k.copy(), h0_k.copy()
        plus[:, j] += eps
        minus[:, j] -= eps
        J[..., j] = (_run_layer(rnn, k, inp, plus) - _run_layer(rnn, k, inp, minus)) / (2 * eps)
    return J


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("alpha", [1.0, 0.5])
@pytest.mark.parametrize("num_layers,layer", [(1, 0), (2, 0), (2, 1)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_jacobian_norms_match_finite_differences(
    rng, nonlinearity, alpha, num_layers, layer, batch_first
):
    T, B, D, H = 7, 3, 2, 5
    rnn = RNN(
        D,
        H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        dtype=F64,
        seed=1,
        alpha=alpha,
        batch_first=batch_first,
    )
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((num_layers, B, H)) * 0.5
    inp = _layer_inputs(rnn, x, h0)[layer]
    J = _numerical_jacobians(rnn, layer, inp, h0[layer])
    spectral = np.linalg.norm(J, ord=2, axis=(2, 3))  # (T, B)
    fro = np.sqrt((J**2).sum(axis=(2, 3)))
    xin = x.swapaxes(0, 1) if batch_first else x
    got = diagnostics.jacobian_norms(rnn, xin, h0, layer=layer)
    np.testing.assert_allclose(got, spectral.mean(axis=1), rtol=1e-6, atol=1e-9)
    got = diagnostics.jacobian_norms(rnn, xin, h0, layer=layer, norm="fro", item=2)
    np.testing.assert_allclose(got, fro[:, 2], rtol=1e-6, atol=1e-9)
    got = diagnostics.jacobian_norms(rnn, xin, h0, layer=layer - num_layers, item=0)
    np.testing.assert_allclose(got, spectral[:, 0], rtol=1e-6, atol=1e-9)


def test_jacobian_norms_float32_layer(rng):
    rnn = RNN(2, 4, seed=3)
    x = rng.standard_normal((6, 2, 2)).astype(np.float32)
    twin = RNN(2, 4, seed=3, dtype=F64)
    np.testing.assert_allclose(
        diagnostics.jacobian_norms(rnn, x),
        diagnostics.jacobian_norms(twin, x.astype(F64)),
        rtol=1e-5,
    )


# ---- dL/dh_t ---------------------------------------------------------------------------------------


def _assert_matches_central_differences(g, y, loss_from, eps=1e-6):
    """g[t] against central differences of loss_from(t, h_t) around the forward's own h_t = y[t],
    one element of h_t at a time."""
    for t in range(len(y)):
        num = np.zeros(y[t].shape)
        for idx in np.ndindex(*y[t].shape):
            plus, minus = y[t].copy(), y[t].copy()
            plus[idx] += eps
            minus[idx] -= eps
            num[idx] = (loss_from(t, plus) - loss_from(t, minus)) / (2 * eps)
        np.testing.assert_allclose(g[t], num, rtol=1e-6, atol=1e-8, err_msg=f"t={t}")


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("alpha", [1.0, 0.6])
def test_hidden_gradients_match_finite_differences(rng, nonlinearity, alpha):
    """g[t] = dL/dh_t for L = sum(d * y): perturb h_t, run the rest of the sequence from it."""
    T, B, D, H = 5, 2, 3, 4
    rnn = RNN(D, H, nonlinearity=nonlinearity, dtype=F64, seed=2, alpha=alpha)
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((1, B, H)) * 0.5
    d = rng.standard_normal((T, B, H))
    dh_n = rng.standard_normal((1, B, H))
    y = _run_layer(rnn, 0, x, h0[0])

    def loss_from(t, h_t):
        """L as a function of h_t (steps after t recomputed from it; steps up to t fixed)."""
        total = float(np.sum(d[:t] * y[:t])) + float(np.sum(d[t] * h_t))
        if t + 1 < T:
            rest = _run_layer(rnn, 0, x[t + 1 :], h_t)
            return total + float(np.sum(d[t + 1 :] * rest)) + float(np.sum(dh_n[0] * rest[-1]))
        return total + float(np.sum(dh_n[0] * h_t))

    g, dh0 = diagnostics.hidden_gradients(rnn, x, d, h0, dh_n=dh_n)
    _assert_matches_central_differences(g, y, loss_from)
    # dh0: the layer's own backward
    rnn(x, h0)
    _, dh0_layer = rnn.backward(d, dh_n)
    np.testing.assert_allclose(dh0, dh0_layer[0], rtol=1e-10, atol=1e-12)
    norms = diagnostics.gradient_norms(rnn, x, d, h0, dh_n=dh_n)
    np.testing.assert_allclose(norms, np.sqrt((g**2).sum(axis=(1, 2))), rtol=1e-12)
    per = diagnostics.gradient_norms(rnn, x, d, h0, dh_n=dh_n, per_item=True)
    assert per.shape == (T, B)
    np.testing.assert_allclose(per, np.sqrt((g**2).sum(axis=2)), rtol=1e-12)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_hidden_gradients_of_a_stack_agree_with_its_backward(rng, residual, batch_first):
    T, B, D, H, L = 6, 3, 2, 4, 3
    rnn = RNN(
        D,
        H,
        num_layers=L,
        dtype=F64,
        seed=5,
        residual=residual,
        alpha=[1.0, 0.5, 0.8],
        batch_first=batch_first,
    )
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D))
    d = rng.standard_normal((B, T, H) if batch_first else (T, B, H))
    rnn(x)
    _, dh0 = rnn.backward(d)
    for k in range(L):
        _, got = diagnostics.hidden_gradients(rnn, x, d, layer=k)
        np.testing.assert_allclose(got, dh0[k], rtol=1e-9, atol=1e-11, err_msg=f"layer {k}")


# ---- the notes' claim ------------------------------------------------------------------------------


@pytest.fixture
def linear_regime(rng):
    """An RNN with W_hh = rho Q (Q orthogonal: every singular value rho), no bias, fed tiny
    inputs, so tanh' ~ 1 along the whole trajectory."""
    H, T, B = 32, 100, 4
    q = _orthogonal(rng, H)
    x = rng.standard_normal((T, B, H)) * 1e-9

    def build(rho, alpha=1.0):
        rnn = RNN(H, H, bias=False, dtype=F64, seed=0, alpha=alpha)
        rnn.load_state_dict({"weight_ih_l0": np.eye(H), "weight_hh_l0": rho * q})
        return rnn

    return build, x


@pytest.mark.parametrize("rho", [0.9, 1.0, 1.1])
def test_radius_decides_vanishing_or_exploding(linear_regime, rho):
    build, x = linear_regime
    rnn = build(rho)
    assert diagnostics.spectral_radius(rnn.state_dict()["weight_hh_l0"]) == pytest.approx(rho)
    T = x.shape[0]
    norms = diagnostics.jacobian_norms(rnn, x)
    np.testing.assert_allclose(norms, rho ** np.arange(1, T + 1), rtol=1e-3)
    d = np.zeros((T,) + x.shape[1:])
    d[-1] = 1.0
    g = diagnostics.gradient_norms(rnn, x, d)  # ||dL/dh_t||, L at the last step only
    ratio = g[0] / g[-1]
    np.testing.assert_allclose(ratio, rho ** (T - 1), rtol=1e-3)
    if rho < 1:
        assert ratio < 1e-4  # vanished
    elif rho > 1:
        assert ratio > 1e3  # exploded
    else:
        assert 0.99 < ratio < 1.01  # persists


def test_leaky_units_lengthen_the_reach(linear_regime):
    build, x = linear_regime
    T = x.shape[0]
    d = np.zeros((T,) + x.shape[1:])
    d[-1] = 1.0
    reach = {}
    for alpha in (1.0, 0.5, 0.25):
        g = diagnostics.gradient_norms(build(0.9, alpha), x, d)
        reach[alpha] = g[0] / g[-1]
    assert reach[1.0] < reach[0.5] < reach[0.25]
    assert reach[0.25] > 100 * reach[1.0]


# ---- bad input ------------------------------------------------------------------------------------


def test_bad_input(rng):
    rnn = RNN(2, 3, dtype=F64)
    x = rng.standard_normal((4, 2, 2))
    with pytest.raises(ValueError, match="square"):
        diagnostics.spectral_radius(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="real matrix"):
        diagnostics.singular_values(np.array([["a"]]))
    with pytest.raises(ValueError, match="norm"):
        diagnostics.jacobian_norms(rnn, x, norm="nuclear")
    with pytest.raises(ValueError, match="layer"):
        diagnostics.jacobian_norms(rnn, x, layer=1)
    with pytest.raises(ValueError, match="item"):
        diagnostics.jacobian_norms(rnn, x, item=2)
    with pytest.raises(ValueError, match="x: expected 3 dimensions"):
        diagnostics.jacobian_norms(rnn, x[..., :1])
    with pytest.raises(ValueError, match="h0"):
        diagnostics.jacobian_norms(rnn, x, np.zeros((1, 3, 3)))
    with pytest.raises(ValueError, match="d_output"):
        diagnostics.gradient_norms(rnn, x, np.zeros((4, 2, 2)))
    with pytest.raises(ValueError, match="bidirectional"):
        diagnostics.jacobian_norms(RNN(2, 3, bidirectional=True, dtype=F64), x)
    with pytest.raises(TypeError, match="RNN"):
        diagnostics.for_layer(rnnfast.Linear(2, 3))
    with pytest.raises(ValueError, match="radius"):
        diagnostics.scale_to_spectral_radius(np.eye(2), -1.0)
    with pytest.raises(ValueError, match="nilpotent"):
        diagnostics.scale_to_spectral_radius(np.array([[0.0, 1.0], [0.0, 0.0]]), 1.0)


# ---- dilated layers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1.0, 0.6])
@pytest.mark.parametrize("dilation,layer", [(3, 0), ([2, 3], 1)], ids=["d3", "stack-top"])
def test_dilated_jacobian_norms_match_finite_differences(rng, alpha, dilation, layer):
    """dh_t/dh_0 of a dilated layer: h0 perturbed, the stack rerun (the top layer's output)."""
    T, B, D, H = 8, 2, 2, 4
    layers = layer + 1
    rnn = RNN(D, H, num_layers=layers, dtype=F64, seed=4, alpha=alpha, dilation=dilation).eval()
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((layers, B, H)) * 0.5
    J = np.zeros((T, B, H, H))
    eps = 1e-6
    for j in range(H):
        plus, minus = h0.copy(), h0.copy()
        plus[layer, :, j] += eps
        minus[layer, :, j] -= eps
        J[..., j] = (rnn(x, plus)[0] - rnn(x, minus)[0]) / (2 * eps)
    got = diagnostics.jacobian_norms(rnn, x, h0, layer=layer)
    np.testing.assert_allclose(got, np.linalg.norm(J, ord=2, axis=(2, 3)).mean(1), rtol=1e-6)


@pytest.mark.parametrize("alpha", [1.0, 0.6])
@pytest.mark.parametrize("T", [9, 8], ids=["T=9", "T=8 (padded chains)"])
def test_dilated_hidden_gradients_match_finite_differences(rng, alpha, T):
    """g[t] = dL/dh_t of a layer of dilation 3: h_t perturbed and the steps after it rerun with
    step() from the ring of the last three states."""
    B, D, H, d = 2, 3, 4, 3
    rnn = RNN(D, H, dtype=F64, seed=6, alpha=alpha, dilation=d).eval()
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((1, B, H)) * 0.5
    dy = rng.standard_normal((T, B, H))
    dh_n = rng.standard_normal((1, B, H))
    y, _ = rnn(x, h0)

    def loss_from(t, h_t):
        ring = np.array([y[s] if s >= 0 else h0[0] for s in range(t + 1 - d, t + 1)])
        ring[-1] = h_t
        total, last, state = float(np.sum(dy[:t] * y[:t]) + np.sum(dy[t] * h_t)), h_t, [ring]
        for s in range(t + 1, T):
            last, state = rnn.step(x[s], state)
            total += float(np.sum(dy[s] * last))
        return total + float(np.sum(dh_n[0] * last))

    g, dh0 = diagnostics.hidden_gradients(rnn, x, dy, h0, dh_n=dh_n)
    _assert_matches_central_differences(g, y, loss_from)
    rnn.train()
    rnn(x, h0)
    _, dh0_layer = rnn.backward(dy, dh_n)
    np.testing.assert_allclose(dh0, dh0_layer[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("residual", [False, True])
def test_hidden_gradients_of_a_dilated_stack_agree_with_its_backward(rng, residual):
    T, B, D, H = 10, 2, 3, 4
    rnn = RNN(
        D, H, num_layers=3, dtype=F64, seed=8, residual=residual, dilation=[1, 2, 4], alpha=0.8
    )
    x = rng.standard_normal((T, B, D))
    d = rng.standard_normal((T, B, H))
    dh_n = rng.standard_normal((3, B, H))
    rnn(x)
    _, dh0 = rnn.backward(d, dh_n)
    for k in range(3):
        _, got = diagnostics.hidden_gradients(rnn, x, d, layer=k, dh_n=dh_n)
        np.testing.assert_allclose(got, dh0[k], rtol=1e-9, atol=1e-11, err_msg=f"layer {k}")


def test_dilation_multiplies_the_reach(linear_regime):
    """rho = 0.9: from the last step the gradient reaches h_{T-1-kd} through k factors of 0.9,
    so a dilation of 4 carries it four times as many steps back; the other chains get none."""
    build, x = linear_regime
    T, H = x.shape[0], x.shape[2]
    d = np.zeros((T,) + x.shape[1:])
    d[-1] = 1.0
    rnn = RNN(H, H, bias=False, dtype=F64, seed=0, dilation=4)
    rnn.load_state_dict(build(0.9).state_dict())
    g = diagnostics.gradient_norms(rnn, x, d)[::-1]  # k = 0, 1, ... steps back
    np.testing.assert_allclose(g[::4] / g[0], 0.9 ** np.arange(len(g[::4])), rtol=1e-3)
    assert not np.any(g[np.arange(T) % 4 != 0])
    plain = diagnostics.gradient_norms(build(0.9), x, d)[::-1]
    np.testing.assert_allclose(g[::4][:25], plain[:25], rtol=1e-3)  # 4 steps per factor


# ---- gated layers: their own kernels, one step at a time ------------------------------------------

GATED = {
    "gru": lambda **kw: rnnfast.GRU(**kw),
    "gru-reset-before": lambda **kw: rnnfast.GRU(reset_after=False, **kw),
    "lstm": lambda **kw: rnnfast.LSTM(**kw),
    "lstm-proj": lambda **kw: rnnfast.LSTM(proj_size=2, **kw),
}


def _joined(state, k):
    """Layer k's state of step()'s result as one array (B, S): h, or the LSTM's h and c."""
    if isinstance(state, tuple):
        return np.concatenate([part[k] for part in state], axis=-1)
    return state[k]


def _split(rnn, s):
    """A joined state (..., S) in the layer's form: h, or the LSTM's (h, c)."""
    if rnn.cell.num_states == 1:
        return s
    R = rnn.cell.output_width(rnn)
    return s[..., :R], s[..., R:]


def _steps(rnn, x, state, start=0):
    """The states of every layer after each step from ``state`` (joined, (L, B, S)): (T, L, B,
    S), by the layer's step() (the oracle beside the diagnostics' forward and backward)."""
    out = []
    for t in range(start, x.shape[0]):
        _, nxt = rnn.step(x[t], _split(rnn, state))
        state = np.stack([_joined(nxt, k) for k in range(rnn.num_layers)])
        out.append(state)
    return np.array(out) if out else np.empty((0,) + state.shape)


@pytest.mark.parametrize("cell", sorted(GATED))
@pytest.mark.parametrize("num_layers,layer", [(1, 0), (2, 1)])
def test_gated_jacobian_norms_match_finite_differences(rng, cell, num_layers, layer):
    """ds_t/ds_0 of the whole state (the LSTM's (h, c)): s_0 of one layer perturbed, the stack
    stepped again."""
    T, B, D, H = 6, 2, 3, 4
    rnn = GATED[cell](input_size=D, hidden_size=H, num_layers=num_layers, dtype=F64, seed=3)
    rnn.eval()
    S = rnn.cell.state_width(rnn)
    x = rng.standard_normal((T, B, D))
    s0 = rng.standard_normal((num_layers, B, S)) * 0.5
    J = np.zeros((T, B, S, S))
    eps = 1e-6
    for j in range(S):
        plus, minus = s0.copy(), s0.copy()
        plus[layer, :, j] += eps
        minus[layer, :, j] -= eps
        J[..., j] = (_steps(rnn, x, plus)[:, layer] - _steps(rnn, x, minus)[:, layer]) / (2 * eps)
    spectral = np.linalg.norm(J, ord=2, axis=(2, 3))
    got = diagnostics.jacobian_norms(rnn, x, _split(rnn, s0), layer=layer)
    np.testing.assert_allclose(got, spectral.mean(axis=1), rtol=1e-6, atol=1e-9)
    fro = np.sqrt((J**2).sum(axis=(2, 3)))
    got = diagnostics.jacobian_norms(rnn, x, _split(rnn, s0), layer=layer, norm="fro", item=1)
    np.testing.assert_allclose(got, fro[:, 1], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("cell", sorted(GATED))
def test_gated_hidden_gradients_match_finite_differences(rng, cell):
    """g[t] = dL/ds_t for L = sum(d * y) + sum(ds_n * s_n): s_t perturbed, the steps after it
    rerun with step()."""
    T, B, D, H = 5, 2, 3, 4
    rnn = GATED[cell](input_size=D, hidden_size=H, dtype=F64, seed=2)
    R, S = rnn.cell.output_width(rnn), rnn.cell.state_width(rnn)
    x = rng.standard_normal((T, B, D))
    s0 = rng.standard_normal((1, B, S)) * 0.5
    dy = rng.standard_normal((T, B, R))
    ds_n = rng.standard_normal((1, B, S))
    s = _steps(rnn.eval(), x, s0)[:, 0]  # (T, B, S)

    def loss_from(t, s_t):
        total = float(np.sum(dy[:t] * s[:t, :, :R]) + np.sum(dy[t] * s_t[:, :R]))
        rest = _steps(rnn, x, s_t[None], start=t + 1)[:, 0]
        total += float(np.sum(dy[t + 1 :] * rest[..., :R]))
        return total + float(np.sum(ds_n[0] * (rest[-1] if len(rest) else s_t)))

    g, dh0 = diagnostics.hidden_gradients(rnn, x, dy, _split(rnn, s0), dh_n=_split(rnn, ds_n))
    joined = np.concatenate(g, axis=-1) if isinstance(g, tuple) else g
    assert joined.shape == (T, B, S)
    _assert_matches_central_differences(joined, s, loss_from)
    # dh0 in the layer's form: its own backward's
    rnn.train()
    rnn(x, _split(rnn, s0))
    _, dh0_layer = rnn.backward(dy, _split(rnn, ds_n))
    got = np.concatenate(dh0, axis=-1) if isinstance(dh0, tuple) else dh0
    np.testing.assert_allclose(got, _joined(dh0_layer, 0), rtol=1e-10, atol=1e-12)
    norms = diagnostics.gradient_norms(rnn, x, dy, _split(rnn, s0), dh_n=_split(rnn, ds_n))
    np.testing.assert_allclose(norms, np.sqrt((joined**2).sum(axis=(1, 2))), rtol=1e-12)


@pytest.mark.parametrize("cell", ["gru", "lstm-proj"])
@pytest.mark.parametrize("residual", [False, True])
def test_gated_hidden_gradients_of_a_stack_agree_with_its_backward(rng, cell, residual):
    T, B, D, H, L = 6, 3, 2, 4, 3
    rnn = GATED[cell](
        input_size=D, hidden_size=H, num_layers=L, dtype=F64, seed=5, residual=residual
    )
    R = rnn.cell.output_width(rnn)
    x = rng.standard_normal((T, B, D))
    d = rng.standard_normal((T, B, R))
    rnn(x)
    _, dh0 = rnn.backward(d)
    for k in range(L):
        _, got = diagnostics.hidden_gradients(rnn, x, d, layer=k)
        got = np.concatenate(got, axis=-1) if isinstance(got, tuple) else got
        np.testing.assert_allclose(
            got, _joined(dh0, k), rtol=1e-9, atol=1e-11, err_msg=f"layer {k}"
        )


def test_gated_float32_layer_runs_in_float64(rng):
    rnn = rnnfast.LSTM(2, 4, seed=3)
    twin = rnnfast.LSTM(2, 4, seed=3, dtype=F64)
    x = rng.standard_normal((6, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(
        diagnostics.jacobian_norms(rnn, x),
        diagnostics.jacobian_norms(twin, x.astype(F64)),
        rtol=1e-5,
    )
    assert rnn.training  # the diagnostics leave the layer as it was


@pytest.mark.parametrize("cell", sorted(GATED))
def test_for_layer_of_a_gated_layer_reports_each_gate_block(cell):
    rnn = GATED[cell](input_size=3, hidden_size=4, num_layers=2, bidirectional=True, seed=0)
    info = diagnostics.for_layer(rnn)
    gates = rnn.cell.gate_orders["torch"]
    names = [n for n, _ in rnn.named_parameters() if n.startswith("weight_hh")]
    assert sorted(info) == sorted(f"{n}[{g}]" for n in names for g in gates)
    params = dict(rnn.named_parameters())
    for name in names:
        hr = params.get(name.replace("weight_hh", "weight_hr"))
        for i, gate in enumerate(gates):
            block = params[name][4 * i : 4 * (i + 1)].astype(F64)
            if hr is not None:  # the projection: cell output -> gate, (H, H)
                block = block @ hr.astype(F64)
            radius, sv = info[f"{name}[{gate}]"]
            assert radius == pytest.approx(np.max(np.abs(np.linalg.eigvals(block))), rel=1e-12)
            np.testing.assert_allclose(sv, np.linalg.svd(block, compute_uv=False), rtol=1e-12)


@pytest.mark.parametrize("cell", sorted(GATED))
def test_set_spectral_radius_refuses_a_gated_layer(cell):
    rnn = GATED[cell](input_size=3, hidden_size=4, seed=0)
    before = rnn.state_dict()
    with pytest.raises(ValueError, match=f"{type(rnn).__name__}.*gate blocks"):
        diagnostics.set_spectral_radius(rnn, 0.9)
    for name, value in rnn.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_gated_bad_input(rng):
    x = rng.standard_normal((4, 2, 2))
    with pytest.raises(ValueError, match="bidirectional"):
        diagnostics.jacobian_norms(rnnfast.GRU(2, 3, bidirectional=True, dtype=F64), x)
    lstm = rnnfast.LSTM(2, 3, dtype=F64)
    with pytest.raises(TypeError, match=r"h0.*\(h, c\)"):
        diagnostics.jacobian_norms(lstm, x, np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="d_output"):
        diagnostics.gradient_norms(lstm, x, np.zeros((4, 2, 2)))
    with pytest.raises(ValueError, match="item"):
        diagnostics.jacobian_norms(lstm, x, item=2)
