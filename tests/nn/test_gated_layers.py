"""rnnfast.GRU and rnnfast.LSTM: parity with torch.nn.GRU / nn.LSTM (forward and every gradient)
over a seeded subset of layers x directions x batch_first x bias x lengths x proj_size x dtype,
the API forms, streaming and stateful layers, persistence, and every refused option."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import assert_close, numerical_gradient, sweep

import rnnfast
from rnnfast import functional

# torch's own note that its oneDNN path skips projected LSTMs
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")

T, B, D, H, P = 5, 3, 4, 6, 3
F32, F64 = np.float32, np.float64
LENGTHS = np.array([5, 2, 0])  # full, partial, empty (not sorted: the layer sorts)

# The torch parity sweep: (cell, proj_size) x num_layers x bidirectional x batch_first x bias x
# lengths x dtype; a seeded subset touching every axis value by default, the rest with -m full.
PARITY = sweep(
    {
        "cell": [("GRU", 0), ("LSTM", 0), ("LSTM", P)],
        "num_layers": [1, 2],
        "bidirectional": [False, True],
        "batch_first": [False, True],
        "bias": [True, False],
        "lengths": [False, True],
        "dtype": [F32, F64],
    },
    seed=23,
    extra=8,
)


def _cls(name):
    return getattr(rnnfast, name)


def _torch_twin(torch, layer):
    """The torch module of the same configuration holding the layer's weights."""
    module = layer.to_torch()
    assert type(module).__name__ == layer.cell.torch_name
    return module


def _pack(torch, x_t, lengths, batch_first):
    if lengths is None:
        return x_t
    return torch.nn.utils.rnn.pack_padded_sequence(
        x_t,
        torch.from_numpy(np.maximum(lengths, 1)),
        batch_first=batch_first,
        enforce_sorted=False,
    )


@pytest.mark.parametrize("case", PARITY)
def test_parity_with_torch(torch, case, rng):
    """Outputs, final states and every gradient (x, h0, c0, each parameter) equal torch's, from
    a loss over y, h_n (and c_n). torch's packed sequences cannot hold an empty one: the empty
    sequence runs as length 1 there and is compared apart (zeros out, h0 through)."""
    (name, proj), num_layers, dtype = case["cell"], case["num_layers"], case["dtype"]
    bidirectional, batch_first, bias = case["bidirectional"], case["batch_first"], case["bias"]
    with_lengths = case["lengths"]
    kw = dict(proj_size=proj) if proj else {}
    layer = _cls(name)(
        D,
        H,
        num_layers,
        bias=bias,
        batch_first=batch_first,
        bidirectional=bidirectional,
        dtype=dtype,
        seed=3,
        **kw,
    )
    module = _torch_twin(torch, layer)
    dirs = 2 if bidirectional else 1
    R = proj or H
    lengths = LENGTHS if with_lengths else None
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D)).astype(dtype)
    h0 = rng.standard_normal((num_layers * dirs, B, R)).astype(dtype)
    c0 = rng.standard_normal((num_layers * dirs, B, H)).astype(dtype)
    state = (h0, c0) if name == "LSTM" else h0

    out, hn = layer(x, state, lengths)
    dy = rng.standard_normal(out.shape).astype(dtype)
    if lengths is not None:  # no gradient enters the padded outputs in torch
        valid = np.arange(T)[None, :] < lengths[:, None]
        dy *= (valid if batch_first else valid.T)[..., None]
    dh = rng.standard_normal((num_layers * dirs, B, R)).astype(dtype)
    dc = rng.standard_normal((num_layers * dirs, B, H)).astype(dtype)
    dx, dstate = layer.backward(dy, (dh, dc) if name == "LSTM" else dh)

    x_t = torch.from_numpy(x).requires_grad_()
    h0_t = torch.from_numpy(h0).requires_grad_()
    c0_t = torch.from_numpy(c0).requires_grad_()
    y_t, hn_t = module(
        _pack(torch, x_t, lengths, batch_first), (h0_t, c0_t) if name == "LSTM" else h0_t
    )
    if lengths is not None:
        y_t, _ = torch.nn.utils.rnn.pad_packed_sequence(y_t, batch_first, total_length=T)
    states_t = hn_t if name == "LSTM" else (hn_t,)
    loss = (y_t * torch.from_numpy(dy)).sum() + (states_t[0] * torch.from_numpy(dh)).sum()
    if name == "LSTM":
        loss = loss + (states_t[1] * torch.from_numpy(dc)).sum()
    loss.backward()

    keep = np.arange(B) if lengths is None else np.nonzero(lengths > 0)[0]
    b_axis = 0 if batch_first else 1
    got_states = hn if name == "LSTM" else (hn,)
    got_dstates = dstate if name == "LSTM" else (dstate,)
    want_dstates = (h0_t.grad, c0_t.grad)
    assert_close(
        np.take(out, keep, b_axis), np.take(y_t.detach().numpy(), keep, b_axis), dtype, "y"
    )
    for i, (got, want) in enumerate(zip(got_states, states_t)):
        assert_close(got[:, keep], want.detach().numpy()[:, keep], dtype, f"state {i}")
        assert_close(
            got_dstates[i][:, keep], want_dstates[i].numpy()[:, keep], dtype, f"dstate {i}"
        )
    assert_close(np.take(dx, keep, b_axis), np.take(x_t.grad.numpy(), keep, b_axis), dtype, "dx")
    if lengths is None:
        for pname, p in module.named_parameters():
            assert_close(layer.grads[pname], p.grad.numpy(), dtype, pname)
    else:  # the empty sequence: zeros out, its state and gradient pass through unchanged
        assert not np.any(np.take(out, [2], b_axis))
        for i, got in enumerate(got_states):
            np.testing.assert_array_equal(got[:, 2], (h0, c0)[i][:, 2])
    assert set(layer.grads) == set(layer.state_dict())


def test_parity_with_torch_parameter_gradients_with_lengths(torch, rng):
    """With lengths and no empty sequence torch's packed run is the same problem: every
    parameter gradient matches (bidirectional, stacked, projected)."""
    lengths = np.array([5, 2, 4])
    for name, kw in [("GRU", {}), ("LSTM", {"proj_size": P})]:
        layer = _cls(name)(D, H, 2, bidirectional=True, dtype=F64, seed=4, **kw)
        module = _torch_twin(torch, layer)
        x = rng.standard_normal((T, B, D))
        out, _ = layer(x, lengths=lengths)
        dy = rng.standard_normal(out.shape) * (np.arange(T)[:, None] < lengths[None, :])[..., None]
        layer.backward(dy)
        y_t, _ = module(_pack(torch, torch.from_numpy(x), lengths, False))
        y_t, _ = torch.nn.utils.rnn.pad_packed_sequence(y_t, total_length=T)
        (y_t * torch.from_numpy(dy)).sum().backward()
        for pname, p in module.named_parameters():
            assert_close(layer.grads[pname], p.grad.numpy(), F64, f"{name} {pname}")


# ---- construction, parameters, description -------------------------------------------------------


def test_parameters_follow_torch(torch):
    for name, kw, G in [("GRU", {}, 3), ("LSTM", {}, 4), ("LSTM", {"proj_size": P}, 4)]:
        layer = _cls(name)(D, H, 2, bidirectional=True, seed=0, **kw)
        module = getattr(torch.nn, name)(D, H, 2, bidirectional=True, **kw)
        shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        assert list(layer.state_dict()) == list(shapes)
        assert {k: v.shape for k, v in layer.state_dict().items()} == shapes
        bound = 1 / np.sqrt(H)
        assert all(np.all(np.abs(p) <= bound) for p in layer.parameters())
        assert layer.state_dict()["weight_ih_l0"].shape[0] == G * H


def test_unit_forget_bias():
    layer = rnnfast.LSTM(D, H, 2, unit_forget_bias=True, seed=0)
    for k in range(2):
        np.testing.assert_array_equal(layer.state_dict()[f"bias_ih_l{k}"][H : 2 * H], 1.0)
        np.testing.assert_array_equal(layer.state_dict()[f"bias_hh_l{k}"][H : 2 * H], 0.0)
    assert not np.all(layer.state_dict()["bias_ih_l0"][:H] == 1.0)


@pytest.mark.parametrize(
    "make, count",
    [
        (lambda: rnnfast.GRU(D, H), 3 * (D * H + H * H + 2 * H)),
        (lambda: rnnfast.GRU(D, H, reset_after=False), 3 * (D * H + H * H + H)),
        (lambda: rnnfast.LSTM(D, H), 4 * (D * H + H * H + H)),
        (lambda: rnnfast.LSTM(D, H, proj_size=P), 4 * (D * H + P * H + H) + P * H),
        (
            lambda: rnnfast.GRU(D, H, 2, bidirectional=True),
            2 * 3 * (D * H + H * H + 2 * H) + 2 * 3 * (2 * H * H + H * H + 2 * H),
        ),
        (lambda: rnnfast.LSTM(D, H, bias=False), 4 * (D * H + H * H)),
    ],
)
def test_keras_param_count(make, count, capsys):
    layer = make()
    assert layer.keras_param_count() == count
    text = layer.summary()
    assert f"Total params: {count:,}" in text
    assert layer.cell.torch_name in text


def test_output_shape_and_repr():
    layer = rnnfast.LSTM(D, H, bidirectional=True, proj_size=P, return_sequences=False)
    assert layer.output_shape((B, T, D)) == (B, 2 * P)
    assert layer.output_size == 2 * P
    assert repr(layer) == (
        "LSTM(4, 6, bidirectional=True, proj_size=3, return_sequences=False, dtype=float32)"
    )
    assert repr(rnnfast.GRU(D, H, reset_after=False, unroll=True)) == (
        "GRU(4, 6, reset_after=False, dtype=float32)"
    )


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_save_load_and_pickle(tmp_path, name, rng):
    kw = {"proj_size": P} if name == "LSTM" else {"reset_after": False}
    layer = _cls(name)(D, H, 2, dtype=F64, seed=5, bidirectional=True, activation="relu", **kw)
    layer.eval()
    x = rng.standard_normal((T, B, D))
    want = layer(x, lengths=LENGTHS)
    path = tmp_path / "gated.npz"
    rnnfast.save(layer, path)
    for back in (rnnfast.load(path), pickle.loads(pickle.dumps(layer))):
        assert type(back) is type(layer) and back.get_config() == layer.get_config()
        back.eval()
        got = back(x, lengths=LENGTHS)
        np.testing.assert_array_equal(got[0], want[0])
    assert _cls(name)(**layer.get_config()).get_config() == layer.get_config()


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_torch_round_trip(torch, name):
    kw = {"proj_size": P} if name == "LSTM" else {}
    module = getattr(torch.nn, name)(D, H, 2, batch_first=True, bidirectional=True, **kw)
    layer = rnnfast.interop.from_torch(module)
    assert type(layer) is _cls(name) and layer.batch_first
    assert type(_cls(name).from_torch(module)) is _cls(name)
    back = layer.to_torch()
    for k, v in module.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k].numpy(), v.numpy())


# ---- API forms, streaming, stateful --------------------------------------------------------------


def test_lstm_forms(rng):
    x = rng.standard_normal((B, T, D)).astype(F32)
    torch_form = rnnfast.LSTM(D, H, batch_first=True, bidirectional=True, seed=1)
    y, (h_n, c_n) = torch_form(x)
    assert y.shape == (B, T, 2 * H) and h_n.shape == c_n.shape == (2, B, H)
    keras = rnnfast.LSTM(
        D,
        H,
        batch_first=True,
        bidirectional=True,
        seed=1,
        return_sequences=False,
        return_state=True,
    )
    out, h, c = keras(x)
    np.testing.assert_array_equal(h, h_n)
    np.testing.assert_array_equal(c, c_n)
    np.testing.assert_array_equal(out, np.concatenate([y[:, -1, :H], y[:, 0, H:]], axis=1))
    split = rnnfast.LSTM(
        D,
        H,
        batch_first=True,
        bidirectional=True,
        seed=1,
        merge_mode=None,
        return_sequences=True,
        return_state=True,
    )
    fwd, bwd, h2, c2 = split(x)
    np.testing.assert_array_equal(np.concatenate([fwd, bwd], axis=-1), y)
    np.testing.assert_array_equal(c2, c_n)
    # the gradients of Keras's last output enter h_n, and a partial state pair is zeros-filled
    dx, (dh0, dc0) = keras.backward(np.ones_like(out), (None, np.ones_like(c)))
    assert dx.shape == x.shape and dh0.shape == (2, B, H) and dc0.shape == (2, B, H)


def test_gru_keras_forms_match_elman_shapes(rng):
    x = rng.standard_normal((T, B, D)).astype(F32)
    out, h_n = rnnfast.GRU(D, H, 2, return_sequences=True, return_state=True)(x)
    assert out.shape == (T, B, H) and h_n.shape == (2, B, H)


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_step_and_stateful_equal_one_call(name, rng):
    kw = {"proj_size": P} if name == "LSTM" else {}
    layer = _cls(name)(D, H, 2, dtype=F64, seed=7, residual=True, **kw)
    layer.eval()
    x = rng.standard_normal((T, B, D))
    y, state = layer(x)
    s = None
    for t in range(T):
        out, s = layer.step(x[t], s)
        assert_close(out, y[t], F64, f"step {t}")
    for a, b in zip(s if name == "LSTM" else (s,), state if name == "LSTM" else (state,)):
        assert_close(a, b, F64, "state")
    stateful = _cls(name)(D, H, 2, dtype=F64, seed=7, residual=True, stateful=True, **kw)
    stateful.eval()
    y1, _ = stateful(x[:2])
    out, _ = stateful.step(x[2])
    y3, last = stateful(x[3:])
    assert_close(np.concatenate([y1, out[None], y3]), y, F64, "stateful")
    stateful.reset_states()
    assert stateful.state is None
    # unbatched, as torch
    y_u, s_u = layer(x[:, 0])
    assert_close(y_u, y[:, 0], F64, "unbatched")
    out_u, _ = layer.step(x[0, 0])
    assert out_u.shape == y_u.shape[1:]


def test_token_input_equals_embedded_input(rng):
    emb = rnnfast.Embedding(11, D, dtype=F64, seed=0)
    ids = rng.integers(0, 11, size=(T, B))
    for name in ("GRU", "LSTM"):
        fused, plain = (_cls(name)(D, H, dtype=F64, seed=8) for _ in range(2))
        y1, _ = fused(ids, lengths=LENGTHS, embedding=emb)
        y2, _ = plain(emb.weight[ids], lengths=LENGTHS)
        np.testing.assert_allclose(y1, y2, rtol=1e-12, atol=1e-14)
        dy = rng.standard_normal(y1.shape)
        emb.zero_grad()
        assert fused.backward(dy)[0] is None
        dx, _ = plain.backward(dy)
        want = np.zeros_like(emb.weight)
        np.add.at(want, ids, dx)
        np.testing.assert_allclose(emb.grads["weight"], want, rtol=1e-12, atol=1e-14)
        # fused when the vocabulary has fewer rows than the batch has tokens, as the RNN's
        assert fused.takes_embedding(emb, ids) == (emb.num_embeddings < ids.size)


def test_sequential_and_fit(rng):
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(7, D, seed=0, mask_zero=True),
            rnnfast.LSTM(D, H, batch_first=True, return_sequences=False, seed=1),
            rnnfast.Dense(H, 2, seed=2),
        ]
    )
    ids = rng.integers(1, 7, size=(8, T))
    ids[:3, 3:] = 0
    targets = rng.standard_normal((8, 2)).astype(F32)
    history = rnnfast.training.fit(
        model,
        ids,
        targets,
        loss="mse",
        optimizer=rnnfast.optim.Adam(model, lr=1e-2),
        epochs=2,
        batch_size=4,
        verbose=False,
    )
    assert len(history["loss"]) == 2
    assert "LSTM" in model.summary()


# ---- refused options and bad input ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
@pytest.mark.parametrize(
    "option, value",
    [
        ("alpha", 0.5),
        ("time_major", True),
    ],
)
def test_refused_options(name, option, value):
    with pytest.raises(ValueError, match=rf"{option}.*not supported for {name}"):
        _cls(name)(D, H, **{option: value})
    if option != "time_major":  # and on assignment
        layer = _cls(name)(D, H)
        with pytest.raises(ValueError, match=rf"{option}.*not supported for {name}"):
            setattr(layer, option, value)


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_accepted_neutral_and_keras_noop_options(name):
    layer = _cls(name)(
        D,
        H,
        alpha=1.0,
        dilation=1,
        recurrent_dropout=0.0,
        zero_output_for_mask=True,
        unroll=True,
        use_cudnn=False,
        implementation=1,
        time_major=False,
    )
    assert layer.alpha == 1.0 and layer.dilation == 1 and layer.recurrent_dropout == 0.0


def test_general_and_prefix_masks(rng):
    x = rng.standard_normal((B, T, D)).astype(F32)
    layer = rnnfast.GRU(D, H, batch_first=True, zero_output_for_mask=True)
    prefix = np.arange(T)[None, :] < LENGTHS[:, None]
    y, _ = layer(x, mask=prefix)  # a prefix mask whose skipped steps output zeros: lengths
    np.testing.assert_array_equal(y, layer(x, lengths=LENGTHS)[0])
    holes = prefix.copy()
    holes[0, 1] = False
    for zero_output in (False, True):  # Keras's: a skipped step repeats its output, or zeros
        layer.zero_output_for_mask = zero_output
        y, h_n = layer(x, mask=holes)
        w = layer.state_dict()
        expected = functional.gru_forward(
            np.ascontiguousarray(x.swapaxes(0, 1)),
            w["weight_ih_l0"],
            w["weight_hh_l0"],
            w["bias_ih_l0"],
            w["bias_hh_l0"],
            step_mask=holes.T,
            zero_output_for_mask=zero_output,
        )
        assert_close(y, expected.y.swapaxes(0, 1), F32, "y")
        assert_close(h_n[0], expected.h_n, F32, "h_n")


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_dropout_gradients(name, rng):
    # Keras 3's dropout of gated cells: one mask per gate on x_t and on h_{t-1}. The masks are
    # drawn from the layer's seeded generator at its first training call: a
    # fresh layer of the same seed redraws the same ones, so finite differences see one
    # function of the parameters.
    x = rng.standard_normal((T, B, D))
    dy = rng.standard_normal((T, B, H))

    def fresh(params=None):
        layer = getattr(rnnfast, name)(
            D, H, dtype=np.float64, seed=7, recurrent_dropout=0.4, input_dropout=0.3
        )
        if params is not None:
            layer.load_state_dict(params)
        return layer

    layer = fresh()
    params = {k: v.copy() for k, v in layer.state_dict().items()}
    y = layer(x, lengths=LENGTHS)[0]
    dx, _ = layer.backward(dy)
    assert not np.array_equal(y, fresh(params).eval()(x, lengths=LENGTHS)[0])  # masks ran

    def loss():
        return float(np.sum(fresh(params)(x, lengths=LENGTHS)[0] * dy))

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    for key in ("weight_ih_l0", "weight_hh_l0", "bias_hh_l0"):
        numeric = numerical_gradient(loss, params[key])
        np.testing.assert_allclose(layer.grads[key], numeric, rtol=1e-6, atol=1e-8, err_msg=key)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: rnnfast.GRU(D, H, bias=1), TypeError, "bias: expected a bool"),
        (lambda: rnnfast.GRU(D, H, reset_after="yes"), TypeError, "reset_after"),
        (lambda: rnnfast.GRU(D, H, activation="sigmoid"), ValueError, "activation"),
        (lambda: rnnfast.LSTM(D, H, recurrent_activation="tanh"), ValueError, "recurrent_act"),
        (lambda: rnnfast.LSTM(D, H, proj_size=H), ValueError, "proj_size"),
        (lambda: rnnfast.LSTM(D, H, proj_size=-1), ValueError, "proj_size"),
        (lambda: rnnfast.LSTM(D, 0), ValueError, "hidden_size"),
        (lambda: rnnfast.LSTM(D, H, unit_forget_bias=None), TypeError, "unit_forget_bias"),
    ],
)
def test_bad_construction(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_bad_states(rng):
    x = rng.standard_normal((T, B, D)).astype(F32)
    lstm = rnnfast.LSTM(D, H, proj_size=P)
    with pytest.raises(TypeError, match=r"h0: expected the pair \(h, c\)"):
        lstm(x, np.zeros((1, B, P), F32))
    with pytest.raises(ValueError, match=r"h0\[1\]: expected c of shape.*\(1, 3, 6\)"):
        lstm(x, (None, np.zeros((1, B, P), F32)))
    with pytest.raises(TypeError, match="float32"):
        lstm(x, (np.zeros((1, B, P)), None))
    gru = rnnfast.GRU(D, H)
    with pytest.raises(ValueError, match=r"h0: expected shape"):
        gru(x, np.zeros((2, B, H), F32))
    with pytest.raises(ValueError, match=r"x: expected last dimension input_size=4"):
        gru(np.zeros((T, B, D + 1), F32))
    with pytest.raises(AttributeError, match="no nonlinearity"):
        gru.nonlinearity = "relu"
    with pytest.raises(AttributeError, match="reset_after is fixed"):
        gru.reset_after = False


def test_gated_layers_quantize_and_export():
    """Both are on the gated layers now: tests/test_quantize_gated.py and
    tests/io/test_onnx_gated.py hold what they do."""
    for layer in (rnnfast.GRU(D, H), rnnfast.LSTM(D, H)):
        assert rnnfast.quantize(layer, "int8").quantized == "int8"
        assert hasattr(layer, "onnx_emit")


def test_to_torch_refuses_what_torch_lacks():
    with pytest.raises(ValueError, match="reset_after=False"):
        rnnfast.GRU(D, H, reset_after=False).to_torch()
    with pytest.raises(ValueError, match="hard_sigmoid"):
        rnnfast.LSTM(D, H, recurrent_activation="hard_sigmoid").to_torch()


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_config_round_trips_every_option(name):
    options = dict(recurrent_dropout=0.25, input_dropout=0.1, dilation=2, go_backwards=True)
    layer = _cls(name)(D, H, num_layers=2, dropout=0.3, seed=5, **options)
    config = layer.get_config()
    assert {k: config[k] for k in options} == options
    assert _cls(name)(**config).get_config() == config


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_streaming_hot_path_equals_the_general_step(name, rng):
    # one layer, C-contiguous arrays of the layer's dtype: step()'s hot path; a state in
    # Fortran order takes the general path, which must give the same bits
    layer = _cls(name)(D, H, seed=4).eval()
    x = rng.standard_normal((B, D)).astype(F32)
    out, state = layer.step(x)  # hot path, from zeros
    out2, state2 = layer.step(x, state)
    general = tuple(map(np.asfortranarray, state)) if name == "LSTM" else np.asfortranarray(state)
    out3, state3 = layer.step(x, general)
    np.testing.assert_array_equal(out3, out2)
    for a, b in zip(state3 if name == "LSTM" else [state3], state2 if name == "LSTM" else [state2]):
        np.testing.assert_array_equal(a, b)
    stream = _cls(name)(D, H, seed=4, stateful=True).eval()
    for _ in range(2):
        carried, _ = stream.step(x)
    np.testing.assert_array_equal(carried, out2)
