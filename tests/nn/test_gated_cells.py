"""rnnfast.GRUCell and rnnfast.LSTMCell: one step of the gated cells, as torch.nn.GRUCell /
torch.nn.LSTMCell (forward and every gradient, float64), the NumPy reference for Keras's forms
and activations, the layer protocol (config, counts, state_dict, save / load, pickle) and bad
input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import DTYPES, assert_close

import rnnfast
from rnnfast import interop, reference

D, H, B = 5, 7, 3
SIZES = [(1, 1, 1), (3, 17, 2), (D, H, B)]


def _torch_cell(torch, kind, d, h, bias, dtype):
    torch.manual_seed(d * 100 + h)
    module = getattr(torch.nn, kind)(d, h, bias=bias)
    return module.double() if dtype == np.float64 else module


def _tensor(torch, a):
    return torch.tensor(a, requires_grad=True)


# ---- PyTorch parity ------------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("d, h, b", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gru_cell_matches_torch(torch, dtype, d, h, b, bias, rng):
    module = _torch_cell(torch, "GRUCell", d, h, bias, dtype)
    cell = rnnfast.GRUCell.from_torch(module)
    assert cell.dtype == dtype and cell.training
    x = rng.standard_normal((b, d)).astype(dtype)
    h0 = rng.standard_normal((b, h)).astype(dtype)
    dh = rng.standard_normal((b, h)).astype(dtype)

    xt, ht = _tensor(torch, x), _tensor(torch, h0)
    out = module(xt, ht)
    out.backward(torch.from_numpy(dh))

    got = cell(x, h0)
    assert_close(got, out.detach().numpy(), dtype, "h'")
    dx, dh0 = cell.backward(dh)
    assert_close(dx, xt.grad.numpy(), dtype, "dx")
    assert_close(dh0, ht.grad.numpy(), dtype, "dh")
    for name, p in module.named_parameters():
        assert_close(cell.grads[name], p.grad.numpy(), dtype, name)

    cell.eval()  # the step kernel
    assert_close(cell(x, h0), out.detach().numpy(), dtype, "h' (eval)")
    assert_close(cell(x), module(torch.from_numpy(x)).detach().numpy(), dtype, "h0 = zeros")


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("d, h, b", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_lstm_cell_matches_torch(torch, dtype, d, h, b, bias, rng):
    module = _torch_cell(torch, "LSTMCell", d, h, bias, dtype)
    cell = rnnfast.LSTMCell.from_torch(module)
    x = rng.standard_normal((b, d)).astype(dtype)
    h0, c0, dh, dc = (rng.standard_normal((b, h)).astype(dtype) for _ in range(4))

    xt, ht, ct = _tensor(torch, x), _tensor(torch, h0), _tensor(torch, c0)
    h1, c1 = module(xt, (ht, ct))
    (h1 * torch.from_numpy(dh) + c1 * torch.from_numpy(dc)).sum().backward()

    got_h, got_c = cell(x, (h0, c0))
    assert_close(got_h, h1.detach().numpy(), dtype, "h'")
    assert_close(got_c, c1.detach().numpy(), dtype, "c'")
    dx, (dh0, dc0) = cell.backward(dh, dc)
    assert_close(dx, xt.grad.numpy(), dtype, "dx")
    assert_close(dh0, ht.grad.numpy(), dtype, "dh")
    assert_close(dc0, ct.grad.numpy(), dtype, "dc")
    for name, p in module.named_parameters():
        assert_close(cell.grads[name], p.grad.numpy(), dtype, name)

    cell.eval()
    got_h, got_c = cell(x, (h0, c0))
    assert_close(got_h, h1.detach().numpy(), dtype, "h' (eval)")
    assert_close(got_c, c1.detach().numpy(), dtype, "c' (eval)")


def test_unbatched_and_missing_gradients(torch, rng):
    """x (D,) and h (H,) as torch's unbatched cells; None gradients are zeros."""
    dtype = np.float64
    module = _torch_cell(torch, "LSTMCell", D, H, True, dtype)
    cell = rnnfast.LSTMCell.from_torch(module)
    x, h0 = rng.standard_normal(D), rng.standard_normal(H)
    dh = rng.standard_normal(H)
    xt, ht = _tensor(torch, x), _tensor(torch, h0)
    h1, _ = module(xt, (ht, torch.zeros(H, dtype=torch.float64)))
    h1.backward(torch.from_numpy(dh))

    got_h, got_c = cell(x, (h0, None))
    assert got_h.shape == got_c.shape == (H,)
    assert_close(got_h, h1.detach().numpy(), dtype, "h'")
    dx, (dh0, dc0) = cell.backward(dh)  # dc_next None: zeros
    assert dx.shape == (D,) and dh0.shape == dc0.shape == (H,)
    assert_close(dx, xt.grad.numpy(), dtype, "dx")
    assert_close(dh0, ht.grad.numpy(), dtype, "dh")

    gru = rnnfast.GRUCell.from_torch(_torch_cell(torch, "GRUCell", D, H, True, dtype))
    out = gru(x)
    assert out.shape == (H,)
    dx, dh0 = gru.backward(None)
    assert not dx.any() and not dh0.any()
    assert not any(g.any() for g in gru.grads.values())


def test_gradients_accumulate_and_one_backward_per_forward(rng):
    cell = rnnfast.GRUCell(D, H, dtype=np.float64, seed=1)
    x, dh = rng.standard_normal((B, D)), rng.standard_normal((B, H))
    cell(x)
    cell.backward(dh)
    once = {k: g.copy() for k, g in cell.grads.items()}
    with pytest.raises(RuntimeError, match="no training forward"):
        cell.backward(dh)
    cell(x)
    cell.backward(dh)
    for k, g in cell.grads.items():
        np.testing.assert_allclose(g, 2 * once[k], rtol=1e-14)
    cell.zero_grad()
    assert not any(g.any() for g in cell.grads.values())
    cell.eval()
    cell(x)
    with pytest.raises(RuntimeError, match="no training forward"):
        cell.backward(dh)


# ---- Keras's forms and activations, against the NumPy reference ----------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"reset_after": False},
        {"activation": "relu", "recurrent_activation": "hard_sigmoid"},
        {"reset_after": False, "recurrent_activation": "hard_sigmoid"},
    ],
    ids=["reset_before", "relu-hard_sigmoid", "reset_before-hard_sigmoid"],
)
def test_gru_cell_options_match_reference(options, rng):
    dtype = np.float64
    cell = rnnfast.GRUCell(D, H, dtype=dtype, seed=3, **options)
    p = cell.state_dict()
    weights = (p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    x, h0, dh = (
        rng.standard_normal((B, D)),
        rng.standard_normal((B, H)),
        rng.standard_normal((B, H)),
    )
    ref = reference.gru_forward(x[None], *weights, h0, **options, keep_workspace=True)
    g = reference.gru_backward(
        x[None],
        *weights,
        ref.y,
        ref.workspace,
        None,
        dh,
        h0=h0,
        lengths=None,
        step_mask=None,
        zero_output_for_mask=False,
        input_mask=None,
        recurrent_mask=None,
        reset_after=options.get("reset_after", True),
        activation=options.get("activation", "tanh"),
        recurrent_activation=options.get("recurrent_activation", "sigmoid"),
    )
    assert_close(cell(x, h0), ref.h_n, dtype, "h'")
    dx, dh0 = cell.backward(dh)
    assert_close(dx, g.dx[0], dtype, "dx")
    assert_close(dh0, g.dh0, dtype, "dh")
    for name, want in zip(
        ("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
        (g.dweight_ih, g.dweight_hh, g.dbias_ih, g.dbias_hh),
    ):
        assert_close(cell.grads[name], want, dtype, name)
    cell.eval()
    assert_close(cell(x, h0), ref.h_n, dtype, "h' (eval)")


def test_lstm_cell_options_match_reference(rng):
    dtype = np.float64
    options = {"activation": "relu", "recurrent_activation": "hard_sigmoid"}
    cell = rnnfast.LSTMCell(D, H, dtype=dtype, seed=3, **options)
    p = cell.state_dict()
    weights = (p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    x = rng.standard_normal((B, D))
    h0, c0, dh, dc = (rng.standard_normal((B, H)) for _ in range(4))
    ref = reference.lstm_forward(x[None], *weights, h0, c0, **options, keep_workspace=True)
    g = reference.lstm_backward(
        x[None],
        *weights,
        ref.y,
        ref.workspace,
        None,
        dh,
        dc,
        h0=h0,
        c0=c0,
        lengths=None,
        weight_hr=None,
        step_mask=None,
        zero_output_for_mask=False,
        input_mask=None,
        recurrent_mask=None,
        **options,
    )
    h1, c1 = cell(x, (h0, c0))
    assert_close(h1, ref.h_n, dtype, "h'")
    assert_close(c1, ref.c_n, dtype, "c'")
    dx, (dh0, dc0) = cell.backward(dh, dc)
    for got, want, what in ((dx, g.dx[0], "dx"), (dh0, g.dh0, "dh"), (dc0, g.dc0, "dc")):
        assert_close(got, want, dtype, what)
    assert_close(cell.grads["weight_hh"], g.dweight_hh, dtype, "weight_hh")


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_stepping_a_cell_is_the_layer(kind, rng):
    """A loop of cell calls over a sequence computes what the layer does (same weights)."""
    T = 4
    cls, layer_cls = (
        (rnnfast.GRUCell, rnnfast.GRU) if kind == "gru" else (rnnfast.LSTMCell, rnnfast.LSTM)
    )
    layer = layer_cls(D, H, seed=5)
    cell = cls(D, H).eval()
    cell.load_state_dict({k[: -len("_l0")]: v for k, v in layer.state_dict().items()})
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    y, _ = layer(x)
    state = None
    for t in range(T):
        state = cell(x[t], state)
        h = state if kind == "gru" else state[0]
        assert_close(h, y[t], np.float32, f"step {t}")


# ---- the layer protocol --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, options, torch_count, keras_count",
    [
        (rnnfast.GRUCell, {}, 3 * (D * H + H * H + 2 * H), 3 * (D * H + H * H + 2 * H)),
        (
            rnnfast.GRUCell,
            {"reset_after": False, "activation": "relu"},
            3 * (D * H + H * H + 2 * H),
            3 * (D * H + H * H + H),
        ),
        (
            rnnfast.LSTMCell,
            {"unit_forget_bias": True},
            4 * (D * H + H * H + 2 * H),
            4 * (D * H + H * H + H),
        ),
        (rnnfast.LSTMCell, {"bias": False}, 4 * (D * H + H * H), 4 * (D * H + H * H)),
    ],
    ids=["gru", "gru-reset_before", "lstm", "lstm-nobias"],
)
def test_layer_protocol(cls, options, torch_count, keras_count, tmp_path, rng):
    cell = cls(D, H, dtype=np.float64, seed=7, **options)
    assert cell.num_parameters() == torch_count
    assert cell.keras_param_count() == keras_count
    config = cell.get_config()
    assert config["input_size"] == D and config["hidden_size"] == H
    twin = cls.from_config(config)
    for k, v in cell.state_dict().items():  # the seed is part of the configuration
        np.testing.assert_array_equal(twin.state_dict()[k], v)

    other = cls(D, H, dtype=np.float64, seed=8, **options)
    other.load_state_dict(cell.state_dict())
    x = rng.standard_normal((B, D))
    np.testing.assert_array_equal(_h(other(x)), _h(cell(x)))

    path = tmp_path / "cell.npz"
    cell.save(path)
    loaded = rnnfast.load(path)
    assert type(loaded) is cls and loaded.get_config() == config
    np.testing.assert_array_equal(_h(loaded(x)), _h(cell(x)))

    copied = pickle.loads(pickle.dumps(cell))
    assert copied.get_config() == config
    np.testing.assert_array_equal(_h(copied(x)), _h(cell(x)))
    assert repr(cell).startswith(f"{cls.__name__}({D}, {H}")


def _h(out):
    return out[0] if isinstance(out, tuple) else out


def test_unit_forget_bias_and_initialisation():
    cell = rnnfast.LSTMCell(D, H, seed=0, unit_forget_bias=True)
    np.testing.assert_array_equal(cell.state_dict()["bias_ih"][H : 2 * H], 1.0)
    np.testing.assert_array_equal(cell.state_dict()["bias_hh"][H : 2 * H], 0.0)
    bound = 1 / np.sqrt(H)
    for name, p in rnnfast.GRUCell(D, H, seed=0).named_parameters():
        assert np.all(np.abs(p) <= bound), name
    assert rnnfast.GRUCell(D, H).state_dict()["weight_ih"].shape == (3 * H, D)
    assert rnnfast.LSTMCell(D, H, bias=False).state_dict().keys() == {"weight_ih", "weight_hh"}


def test_torch_round_trip(torch):
    for cls, kind in ((rnnfast.GRUCell, "GRUCell"), (rnnfast.LSTMCell, "LSTMCell")):
        cell = cls(D, H, dtype=np.float64, seed=2)
        module = cell.to_torch()
        assert type(module) is getattr(torch.nn, kind)
        assert module.weight_ih.dtype == torch.float64
        back = interop.from_torch(module)
        assert type(back) is cls
        for k, v in cell.state_dict().items():
            np.testing.assert_array_equal(back.state_dict()[k], v)
    with pytest.raises(ValueError, match="reset_after=False"):
        rnnfast.GRUCell(D, H, reset_after=False).to_torch()
    with pytest.raises(ValueError, match="recurrent_activation='hard_sigmoid'"):
        rnnfast.LSTMCell(D, H, recurrent_activation="hard_sigmoid").to_torch()
    with pytest.raises(TypeError, match="torch.nn.GRUCell"):
        rnnfast.GRUCell.from_torch(torch.nn.LSTMCell(D, H))
    with pytest.raises(TypeError, match="float32 or float64"):
        rnnfast.LSTMCell.from_torch(torch.nn.LSTMCell(D, H).half())


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_construction():
    with pytest.raises(ValueError, match="hidden_size"):
        rnnfast.GRUCell(D, 0)
    with pytest.raises(TypeError, match="bias"):
        rnnfast.LSTMCell(D, H, bias=1)
    with pytest.raises(TypeError, match="reset_after"):
        rnnfast.GRUCell(D, H, reset_after="no")
    with pytest.raises(ValueError, match="activation"):
        rnnfast.GRUCell(D, H, activation="sigmoid")
    with pytest.raises(ValueError, match="recurrent_activation"):
        rnnfast.LSTMCell(D, H, recurrent_activation="tanh")
    with pytest.raises(TypeError, match="dtype"):
        rnnfast.GRUCell(D, H, dtype=np.int32)
    cell = rnnfast.GRUCell(D, H)
    with pytest.raises(AttributeError, match="reset_after"):
        cell.reset_after = False
    with pytest.raises(AttributeError, match="hidden_size"):
        cell.hidden_size = 3
    with pytest.raises(ValueError, match="activation"):
        cell.activation = "gelu"
    assert cell.activation == "tanh"


def test_bad_input(rng):
    gru = rnnfast.GRUCell(D, H, seed=0)
    lstm = rnnfast.LSTMCell(D, H, seed=0)
    x = rng.standard_normal((B, D)).astype(np.float32)
    h = np.zeros((B, H), np.float32)
    for cell in (gru, lstm):
        with pytest.raises(ValueError, match=r"x: expected shape \(B, input_size\)"):
            cell(x[:, :-1])
        with pytest.raises(ValueError, match="x: expected shape"):
            cell(x[None])
        with pytest.raises(TypeError, match="x: expected a float32 array"):
            cell(x.astype(np.float64))
        with pytest.raises(TypeError, match="x"):
            cell(x.astype(np.int32))
    with pytest.raises(ValueError, match=r"h: expected shape \(B, hidden_size\) = \(3, 7\)"):
        gru(x, h[:2])
    with pytest.raises(ValueError, match=r"h: expected shape \(hidden_size,\)"):
        gru(x[0], h)  # unbatched x, batched h
    with pytest.raises(TypeError, match="h: expected a float32 array"):
        gru(x, h.astype(np.float64))
    with pytest.raises(TypeError, match=r"state: expected the pair \(h, c\)"):
        lstm(x, h)
    with pytest.raises(ValueError, match=r"state\[1\]: expected shape"):
        lstm(x, (h, h[:, :-1]))

    # a failed backward keeps the forward: the retry works
    before = {k: v.copy() for k, v in gru.grads.items()}
    gru(x, h)
    with pytest.raises(ValueError, match=r"dh_next: expected shape \(3, 7\)"):
        gru.backward(h[:2])
    with pytest.raises(TypeError, match="dh_next"):
        gru.backward(h.astype(np.float64))
    for k, g in gru.grads.items():
        np.testing.assert_array_equal(g, before[k])
    gru.backward(h)
    lstm(x)
    with pytest.raises(ValueError, match="dc_next"):
        lstm.backward(h, h[:, 1:])
    lstm.backward(h, h)


def test_inputs_are_not_modified_and_outputs_are_owned(rng):
    cell = rnnfast.GRUCell(D, H, dtype=np.float64, seed=0)
    x, h0 = rng.standard_normal((B, D)), rng.standard_normal((B, H))
    keep = x.copy(), h0.copy()
    out = cell(x, h0)
    dh = rng.standard_normal((B, H))
    expected = rnnfast.GRUCell(D, H, dtype=np.float64, seed=0)
    expected(x.copy(), h0.copy())
    want = expected.backward(dh)
    np.testing.assert_array_equal(x, keep[0])  # the call kept the caller's arrays as they were
    np.testing.assert_array_equal(h0, keep[1])
    x += 1.0  # the caller reuses its arrays, and the output, before the backward
    h0 += 1.0
    out += 1.0
    got = cell.backward(dh)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    # any layout: Fortran order, strided, read-only
    cell.eval()
    xf = np.asfortranarray(keep[0])
    xf.flags.writeable = False
    np.testing.assert_allclose(cell(xf, keep[1][:, ::1]), cell(keep[0], keep[1]), rtol=0)
