"""rnnfast.DeepTransitionRNN and rnnfast.functional.deep_transition_*: against the NumPy
oracle (rnnfast.reference.deep_transition_*), finite differences, the same model composed
from torch.nn.Linear layers in a loop over time, and k = 1 bit for bit rnnfast.RNN; lengths,
bidirectional and stacked layers, step(), save / load and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, assert_close, numerical_gradient

import rnnfast
from rnnfast import diagnostics, functional, reference

T, B, D, H = 5, 3, 4, 6


def _problem(rng, dtype, k, *, steps=T, batch=B, bias=True):
    """Weights of one (layer, direction) and an input, scaled to keep tanh and relu away from
    saturation; weight_tr (k - 1, H, H)."""

    def u(*shape, scale=0.5):
        return (scale * rng.uniform(-1, 1, size=shape)).astype(dtype)

    p = {
        "x": u(steps, batch, D, scale=1.0),
        "weight_ih": u(H, D),
        "weight_hh": u(H, H),
        "weight_tr": u(k - 1, H, H, scale=0.8),
        "bias_ih": u(H) if bias else None,
        "bias_hh": u(H) if bias else None,
        "bias_tr": u(k - 1, H) if bias else None,
        "h0": u(batch, H, scale=1.0),
    }
    return p


def _forward(p, act, lengths):
    return functional.deep_transition_forward(
        p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], p["bias_ih"], p["bias_hh"],
        p["bias_tr"], p["h0"], act, lengths,
    )  # fmt: skip


# ---- the functional kernels against the oracle -------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("lengths", [None, [2, 5, 0]])  # unsorted: sorted and back inside
def test_functional_matches_reference(rng, dtype, act, k, lengths):
    p = _problem(rng, dtype, k)
    out = _forward(p, act, lengths)
    ref_y, ref_h = reference.deep_transition_forward(
        p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], p["bias_ih"], p["bias_hh"],
        p["bias_tr"], p["h0"], act, lengths,
    )  # fmt: skip
    assert_close(out.y, ref_y, dtype, "y")
    assert_close(out.h_n, ref_h, dtype, "h_n")
    assert out.workspace.shape == (k - 1, T, B, H)
    dy = rng.standard_normal(out.y.shape).astype(dtype)
    dh_n = rng.standard_normal(out.h_n.shape).astype(dtype)
    got = functional.deep_transition_backward(
        p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], out.y, out.workspace, dy, dh_n,
        h0=p["h0"], nonlinearity=act, lengths=lengths,
    )  # fmt: skip
    want = reference.deep_transition_backward(
        p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], dy, dh_n, bias_ih=p["bias_ih"],
        bias_hh=p["bias_hh"], bias_tr=p["bias_tr"], h0=p["h0"], nonlinearity=act,
        lengths=lengths,
    )  # fmt: skip
    for name, a, b in zip(got._fields, got, want):
        assert_close(a, b, dtype, name)


def test_functional_gradients_match_finite_differences(rng):
    """float64, tanh, k = 3 with lengths: every gradient of L = sum(dy * y) + sum(dh_n * h_n)."""
    k, lengths = 3, [4, 2, 5]
    p = _problem(rng, np.float64, k, bias=True)
    out = _forward(p, "tanh", lengths)
    dy = rng.standard_normal(out.y.shape)
    dh_n = rng.standard_normal(out.h_n.shape)
    g = functional.deep_transition_backward(
        p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], out.y, out.workspace, dy, dh_n,
        h0=p["h0"], nonlinearity="tanh", lengths=lengths,
    )  # fmt: skip

    def loss():
        o = _forward(p, "tanh", lengths)
        return float(np.sum(dy * o.y) + np.sum(dh_n * o.h_n))

    expected = {
        "x": g.dx,
        "h0": g.dh0,
        "weight_ih": g.dweight_ih,
        "weight_hh": g.dweight_hh,
        "bias_ih": g.dbias,
        "bias_hh": g.dbias,
        "weight_tr": g.dweight_tr,
        "bias_tr": g.dbias_tr,
    }
    for name, grad in expected.items():
        numeric = numerical_gradient(loss, p[name])
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8, err_msg=name)


def test_functional_k1_is_the_elman_kernels_and_input_gradient_false(rng):
    p = _problem(rng, np.float32, 1)
    out = _forward(p, "relu", [3, 5, 1])
    y, h_n = functional.rnn_forward(
        p["x"], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], p["h0"], "relu",
        lengths=[3, 5, 1],
    )  # fmt: skip
    assert np.array_equal(out.y, y) and np.array_equal(out.h_n, h_n)
    assert out.workspace.shape == (0, T, B, H)
    p3 = _problem(rng, np.float32, 3)
    o3 = _forward(p3, "tanh", None)
    g = functional.deep_transition_backward(
        p3["x"], p3["weight_ih"], p3["weight_hh"], p3["weight_tr"], o3.y, o3.workspace,
        o3.y, None, h0=p3["h0"], nonlinearity="tanh", lengths=None, input_gradient=False,
    )  # fmt: skip
    assert g.dx is None and g.dweight_tr.shape == (2, H, H)


def test_functional_bad_arguments_are_named(rng):
    p = _problem(rng, np.float32, 2)
    with pytest.raises(ValueError, match=r"weight_tr: expected shape \(k - 1, H, H\)"):
        functional.deep_transition_forward(p["x"], p["weight_ih"], p["weight_hh"], p["weight_ih"])
    with pytest.raises(ValueError, match=r"bias_tr: expected shape"):
        functional.deep_transition_forward(
            p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], bias_tr=np.zeros(H, "f4")
        )
    with pytest.raises(TypeError, match="weight_tr"):
        functional.deep_transition_forward(
            p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"].astype(np.float64)
        )
    with pytest.raises(ValueError, match="lengths"):
        functional.deep_transition_forward(
            p["x"], p["weight_ih"], p["weight_hh"], p["weight_tr"], lengths=[1, 2, 9]
        )
    x = p["x"].copy()
    _forward(p, "tanh", [1, 2, 3])
    assert np.array_equal(x, p["x"])  # the caller's arrays are not written


# ---- the layer ------------------------------------------------------------------------------------


def _compose(layer, x, lengths, h0=None):
    """The layer's output and h_n composed from the oracle, one (layer, direction) at a time:
    the reverse direction runs each sequence reversed within its length."""
    dirs = 2 if layer.bidirectional else 1
    params = layer.state_dict()
    inp, h_n = x, []
    for k in range(layer.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            w_tr = [params[f"weight_tr{i}{sfx}"] for i in range(2, layer.transition_layers + 1)]
            b_tr = [params[f"bias_tr{i}{sfx}"] for i in range(2, layer.transition_layers + 1)]
            seq = rnnfast.reverse_sequences(inp, lengths) if d else inp
            y, h = reference.deep_transition_forward(
                seq, params[f"weight_ih{sfx}"], params[f"weight_hh{sfx}"],
                np.reshape(w_tr, (-1, layer.hidden_size, layer.hidden_size)),
                params[f"bias_ih{sfx}"], params[f"bias_hh{sfx}"], np.asarray(b_tr) if b_tr else None,
                None if h0 is None else h0[k * dirs + d], layer.nonlinearity, lengths,
            )  # fmt: skip
            outs.append(rnnfast.reverse_sequences(y, lengths) if d else y)
            h_n.append(h)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(h_n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "options",
    [
        {"num_layers": 2, "bidirectional": True, "transition_layers": 3},
        {"num_layers": 3, "transition_layers": 2, "nonlinearity": "relu"},
        {"bidirectional": True, "transition_layers": 4},
    ],
)
def test_layer_stacked_bidirectional_lengths_match_the_oracle(rng, dtype, options):
    layer = rnnfast.DeepTransitionRNN(D, H, dtype=dtype, seed=1, **options)
    x = rng.standard_normal((T, B, D)).astype(dtype)
    rows = layer.num_layers * layer.num_directions
    h0 = (0.5 * rng.standard_normal((rows, B, H))).astype(dtype)
    lengths = np.array([3, 5, 1])
    y, h_n = layer(x, h0, lengths=lengths)
    want_y, want_h = _compose(layer, x, lengths, h0)
    assert_close(y, want_y, dtype, "y")
    assert_close(h_n, want_h, dtype, "h_n")


def _torch_deep(torch, layer, x, h0):
    """The layer composed from torch.nn.Linear layers in a Python loop over time (float64,
    full-length sequences), with the layer's weights: ``(module list, output, h_n, x, h0)``."""
    act = torch.tanh if layer.nonlinearity == "tanh" else torch.relu
    params = layer.state_dict()
    dirs, k = layer.num_directions, layer.transition_layers
    linears = {}

    def linear(name_w, name_b, n_in):
        m = torch.nn.Linear(n_in, layer.hidden_size, dtype=torch.float64)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(params[name_w]))
            m.bias.copy_(torch.from_numpy(params[name_b]))
        linears[name_w] = m
        return m

    xt = torch.tensor(x, requires_grad=True)
    h0t = torch.tensor(h0, requires_grad=True)
    inp, h_n = xt, []
    for li in range(layer.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{li}" + ("_reverse" if d else "")
            ih = linear(f"weight_ih{sfx}", f"bias_ih{sfx}", inp.shape[2])
            hh = linear(f"weight_hh{sfx}", f"bias_hh{sfx}", layer.hidden_size)
            tr = [
                linear(f"weight_tr{i}{sfx}", f"bias_tr{i}{sfx}", layer.hidden_size)
                for i in range(2, k + 1)
            ]
            seq = torch.flip(inp, [0]) if d else inp
            h, ys = h0t[li * dirs + d], []
            for t in range(seq.shape[0]):
                z = act(ih(seq[t]) + hh(h))
                for m in tr:
                    z = act(m(z))
                h = z
                ys.append(h)
            y = torch.stack(ys)
            outs.append(torch.flip(y, [0]) if d else y)
            h_n.append(h)
        inp = torch.cat(outs, dim=2)
    return linears, inp, torch.stack(h_n), xt, h0t


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_layer_matches_torch_linear_composition(torch, rng, act):
    """Forward and every gradient (x, h0, each parameter) against torch.nn.Linear layers in a
    loop over time: 2 layers, bidirectional, k = 3, float64."""
    layer = rnnfast.DeepTransitionRNN(
        D, H, num_layers=2, bidirectional=True, nonlinearity=act, transition_layers=3,
        dtype=np.float64, seed=2,
    )  # fmt: skip
    x = rng.standard_normal((T, B, D))
    h0 = 0.5 * rng.standard_normal((4, B, H))
    dy = rng.standard_normal((T, B, 2 * H))
    dh_n = rng.standard_normal((4, B, H))
    y, h_n = layer(x, h0)
    dx, dh0 = layer.backward(dy, dh_n)
    linears, ty, th, xt, h0t = _torch_deep(torch, layer, x, h0)
    assert_close(y, ty.detach().numpy(), np.float64, "y")
    assert_close(h_n, th.detach().numpy(), np.float64, "h_n")
    ((ty * torch.from_numpy(dy)).sum() + (th * torch.from_numpy(dh_n)).sum()).backward()
    assert_close(dx, xt.grad.numpy(), np.float64, "dx")
    assert_close(dh0, h0t.grad.numpy(), np.float64, "dh0")
    for name_w, m in linears.items():
        name_b = name_w.replace("weight", "bias", 1)
        assert_close(layer.grads[name_w], m.weight.grad.numpy(), np.float64, name_w)
        assert_close(layer.grads[name_b], m.bias.grad.numpy(), np.float64, name_b)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"num_layers": 2, "bidirectional": True, "nonlinearity": "relu"},
        {"num_layers": 2, "input_to_all": True, "all_to_output": True, "batch_first": True},
    ],
)
def test_k1_is_rnn_bit_for_bit(rng, options):
    """transition_layers=1 is rnnfast.RNN: the same parameters from the same seed, the same
    outputs, states and gradients, bit for bit."""
    rnn = rnnfast.RNN(D, H, seed=3, **options)
    deep = rnnfast.DeepTransitionRNN(D, H, seed=3, transition_layers=1, **options)
    assert list(rnn.state_dict()) == list(deep.state_dict())
    for (name, a), b in zip(rnn.named_parameters(), deep.parameters()):
        assert np.array_equal(a, b), name
    x = rng.standard_normal((B, T, D) if options.get("batch_first") else (T, B, D))
    x = x.astype(np.float32)
    lengths = np.array([2, 5, 4])
    ya, ha = rnn(x, lengths=lengths)
    yb, hb = deep(x, lengths=lengths)
    assert np.array_equal(ya, yb) and np.array_equal(ha, hb)
    d = rng.standard_normal(ya.shape).astype(np.float32)
    dxa, dha = rnn.backward(d)
    dxb, dhb = deep.backward(d)
    assert np.array_equal(dxa, dxb) and np.array_equal(dha, dhb)
    for name, g in rnn.grads.items():
        assert np.array_equal(g, deep.grads[name]), name
    if not options.get("bidirectional"):
        rnn.eval(), deep.eval()
        x_0 = x[:, 0] if options.get("batch_first") else x[0]
        step_a, step_b = rnn.step(x_0), deep.step(x_0)
        assert np.array_equal(step_a[0], step_b[0]) and np.array_equal(step_a[1], step_b[1])


def test_same_seed_starts_from_rnns_elman_weights():
    rnn = rnnfast.RNN(D, H, num_layers=2, seed=7)
    deep = rnnfast.DeepTransitionRNN(D, H, num_layers=2, seed=7, transition_layers=3)
    params = deep.state_dict()
    for name, p in rnn.state_dict().items():
        assert np.array_equal(p, params[name]), name
    assert list(params)[:8] == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_tr2_l0", "bias_tr2_l0", "weight_tr3_l0", "bias_tr3_l0",
    ]  # fmt: skip
    bound = 1 / np.sqrt(H)
    assert all(np.abs(p).max() <= bound for n, p in params.items() if "_tr" in n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_step_is_the_forward(rng, dtype):
    layer = rnnfast.DeepTransitionRNN(
        D, H, num_layers=2, transition_layers=3, residual=True, dtype=dtype, seed=4
    ).eval()
    x = rng.standard_normal((T, B, D)).astype(dtype)
    h0 = (0.5 * rng.standard_normal((2, B, H))).astype(dtype)
    y, h_n = layer(x, h0)
    h, outs = h0, []
    for t in range(T):
        out, h = layer.step(x[t], h)
        outs.append(out.copy())
        h = h.copy()
    assert_close(np.stack(outs), y, dtype, "step outputs")
    assert_close(h, h_n, dtype, "step state")
    out, h1 = layer.step(x[0, 0], h0[:, 0])  # unbatched
    assert out.shape == (H,) and h1.shape == (2, H)


def test_stateful_pieces_equal_one_call(rng):
    layer = rnnfast.DeepTransitionRNN(D, H, transition_layers=2, seed=5).eval()
    x = rng.standard_normal((6, B, D)).astype(np.float32)
    y, h_n = layer(x)
    layer.stateful = True
    y1, _ = layer(x[:4])
    y2, h2 = layer(x[4:])
    assert_close(np.concatenate([y1, y2]), y, np.float32, "stateful pieces")
    assert_close(h2, h_n, np.float32, "carried state")


def test_config_save_load_summary_round_trip(tmp_path, rng):
    layer = rnnfast.DeepTransitionRNN(
        D, H, num_layers=2, bidirectional=True, transition_layers=3, dtype=np.float64, seed=6
    )
    config = layer.get_config()
    assert config["transition_layers"] == 3
    rebuilt = rnnfast.DeepTransitionRNN(**config)
    assert repr(rebuilt) == repr(layer) and "transition_layers=3" in repr(layer)
    path = tmp_path / "deep.npz"
    layer.save(path)
    loaded = rnnfast.load(path)
    assert type(loaded) is rnnfast.DeepTransitionRNN and loaded.transition_layers == 3
    x = rng.standard_normal((T, B, D))
    assert np.array_equal(layer.eval()(x)[0], loaded.eval()(x)[0])
    text = layer.summary()
    # Keras's count: per direction a SimpleRNN's DH + HH + H, plus (k - 1)(HH + H)
    per_dir = [D * H + H * H + H + 2 * (H * H + H), 2 * H * H + H * H + H + 2 * (H * H + H)]
    assert layer.keras_param_count() == 2 * sum(per_dir)
    assert f"Total params: {2 * sum(per_dir):,}" in text
    assert "deep transition k=3" in text
    assert layer.num_parameters() == layer.keras_param_count() + 4 * H  # the second bias


def test_fixed_and_refused_options_are_named():
    with pytest.raises(ValueError, match="transition_layers"):
        rnnfast.DeepTransitionRNN(D, H, transition_layers=0)
    with pytest.raises(TypeError, match="transition_layers"):
        rnnfast.DeepTransitionRNN(D, H, transition_layers=2.0)
    layer = rnnfast.DeepTransitionRNN(D, H)
    with pytest.raises(AttributeError, match="transition_layers is fixed"):
        layer.transition_layers = 3
    for option, value in (("alpha", 0.5), ("dilation", 2), ("recurrent_dropout", 0.2)):
        with pytest.raises(ValueError, match=f"{option}=.*not supported for DeepTransitionRNN"):
            rnnfast.DeepTransitionRNN(D, H, **{option: value})
        with pytest.raises(ValueError, match=option):
            setattr(layer, option, value)
    assert (layer.alpha, layer.dilation, layer.recurrent_dropout) == (1.0, 1, 0.0)


def test_masks_and_token_input_are_refused_by_name(rng):
    layer = rnnfast.DeepTransitionRNN(D, H)
    x = rng.standard_normal((T, 2, D)).astype(np.float32)
    middle = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 1]], bool)
    with pytest.raises(ValueError, match="mask: DeepTransitionRNN .* skips steps inside"):
        layer(x, mask=middle)
    prefix = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    with pytest.raises(ValueError, match="repeat the previous output"):
        layer(x, mask=prefix)
    layer.zero_output_for_mask = True  # a prefix mask whose padding outputs zeros: lengths
    assert np.array_equal(layer(x, mask=prefix)[0], layer(x, lengths=[3, 5])[0])
    embedding = rnnfast.Embedding(10, D)
    with pytest.raises(ValueError, match="embedding: DeepTransitionRNN has no fused"):
        layer(np.zeros((T, 2), np.int64), embedding=embedding)
    assert not layer.takes_embedding(embedding, np.zeros((T, 2), np.int64))


def test_quantize_onnx_torch_keras_refuse_by_name():
    layer = rnnfast.DeepTransitionRNN(D, H).eval()
    with pytest.raises(ValueError, match="a DeepTransitionRNN cannot be quantized"):
        rnnfast.quantize(layer, "bf16")
    model = rnnfast.Sequential([layer, rnnfast.Linear(H, 2)])
    with pytest.raises(ValueError, match=r"layers\[0\]: a DeepTransitionRNN cannot be quantized"):
        rnnfast.quantize(model, "int8")
    with pytest.raises(ValueError, match="cannot be exported to ONNX"):
        layer.onnx_check("model")
    with pytest.raises(ValueError, match="torch.nn has no deep-transition RNN"):
        layer.to_torch()
    with pytest.raises(ValueError, match="torch.nn has no deep-transition RNN"):
        rnnfast.DeepTransitionRNN.from_torch(None)
    with pytest.raises(ValueError, match="Keras has no layer of a DeepTransitionRNN"):
        rnnfast.interop.keras_weights(layer)


def test_onnx_exporter_refuses_by_name():
    pytest.importorskip("onnx")
    layer = rnnfast.DeepTransitionRNN(D, H).eval()
    with pytest.raises(ValueError, match="DeepTransitionRNN cannot be exported to ONNX"):
        rnnfast.onnx.export(layer, None)


def test_sequential_trains_it_with_input_dropout_and_skips(rng):
    """In a Sequential after an Embedding (never fused), with dropout, input dropout and dense
    skips: one fit epoch lowers the loss."""
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(7, 5, seed=0),
            rnnfast.DeepTransitionRNN(
                5, 8, num_layers=2, transition_layers=2, batch_first=True, dropout=0.1,
                input_dropout=0.1, input_to_all=True, all_to_output=True, seed=1,
            ),
            rnnfast.Linear(16, 7, seed=2),
        ]
    )  # fmt: skip
    ids = rng.integers(0, 7, size=(16, 9))
    targets = np.roll(ids, 1, axis=1)  # the previous token: learnable
    opt = rnnfast.optim.Adam(model, lr=0.02)
    losses = []
    for _ in range(30):
        model.zero_grad()
        logits = model(ids)
        value, grad = rnnfast.losses.cross_entropy(logits, targets)
        model.backward(grad)
        opt.step()
        losses.append(value)
    assert losses[-1] < 0.7 * losses[0]


def test_diagnostics_follow_the_transition(rng):
    """The diagnostics step a deep-transition layer on its own kernels: their dL/dh_0 is the
    layer's dh0, and the last step's Jacobian norm is that of the product over the k layers."""
    layer = rnnfast.DeepTransitionRNN(D, D, transition_layers=3, dtype=np.float64, seed=8)
    x = rng.standard_normal((T, 2, D))
    d = np.zeros((T, 2, D))
    d[-1] = rng.standard_normal((2, D))
    g, dh0 = diagnostics.hidden_gradients(layer, x, d)
    layer(x)
    _, want = layer.backward(d)
    assert_close(dh0, want[0], np.float64, "dh0")
    assert_close(g[-1], d[-1], np.float64, "g at the last step")
    # one step's Jacobian by hand: diag(act'(z_3)) W_3 diag(act'(z_2)) W_2 diag(act'(z_1)) W_hh
    p = layer.state_dict()
    zs = reference._deep_step(
        x[0], np.zeros((2, D)), p["weight_ih_l0"], p["weight_hh_l0"],
        np.stack([p["weight_tr2_l0"], p["weight_tr3_l0"]]), p["bias_ih_l0"], p["bias_hh_l0"],
        np.stack([p["bias_tr2_l0"], p["bias_tr3_l0"]]), "tanh",
    )  # fmt: skip
    weights = [p["weight_hh_l0"], p["weight_tr2_l0"], p["weight_tr3_l0"]]
    norms = []
    for b in range(2):
        J = np.eye(D)
        for z, w in zip(zs, weights):
            J = np.diag(1 - z[b] ** 2) @ w @ J
        norms.append(np.linalg.norm(J, 2))
    assert np.isclose(diagnostics.jacobian_norms(layer, x)[0], np.mean(norms), rtol=1e-10)
