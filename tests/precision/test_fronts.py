"""precision= on the NumPy fronts: a recurrent layer's option (in its config, files, pickles,
repr and summary), a Sequential's and a fit's, which win over the layers' for their calls
(the outermost choice wins); a backward runs with its forward's products."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rnnfast
from rnnfast import _core, optim, training

CLASSES = [
    rnnfast.RNN,
    rnnfast.GRU,
    rnnfast.LSTM,
    rnnfast.LayerNormLSTM,
    rnnfast.DeepTransitionRNN,
]


@pytest.fixture(autouse=True)
def emulated():
    """bf16 products in software: the same results on every CPU (native ones are
    ``test_gradients``'s)."""
    before = _core.bf16_emulation()
    _core.set_bf16_emulation(True)
    yield
    _core.set_bf16_emulation(before)


def _run(layer, x):
    """The forward's output and the backward's input and parameter gradients."""
    y, _ = layer(x)
    dx, _ = layer.backward(np.ones_like(y))
    return [y, dx, *(g.copy() for g in layer.grads.values())]


def _same(a, b):
    return all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


# ---- the layers' option ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_the_option_travels_with_the_layer(cls, tmp_path):
    layer = cls(3, 4, num_layers=2, bidirectional=True, precision="bf16")
    assert layer.precision == "bf16"
    assert layer.get_config()["precision"] == "bf16"
    assert cls(**layer.get_config()).precision == "bf16"
    assert "precision='bf16'" in repr(layer)
    assert "precision" not in repr(cls(3, 4))  # the default is not shown
    assert "Products: bf16 operands, float32 sums" in layer.summary()
    assert "Products" not in cls(3, 4).summary()
    layer.save(tmp_path / "layer.npz")
    assert rnnfast.load(tmp_path / "layer.npz").precision == "bf16"
    for clone in (pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer)):
        assert clone.precision == "bf16"
    config = cls(3, 4).get_config()
    del config["precision"]  # a file written before the option existed
    assert cls(**config).precision == "float32"


@pytest.mark.parametrize("cls", CLASSES)
def test_bf16_changes_the_results_and_float32_does_not(cls, rng):
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    plain = _run(cls(3, 4, seed=0), x)
    assert _same(_run(cls(3, 4, seed=0, precision="float32"), x), plain)
    fast = _run(cls(3, 4, seed=0, precision="bf16"), x)
    assert not any(np.array_equal(a, b) for a, b in zip(fast, plain))


def test_an_assignment_takes_effect_at_the_next_forward_not_in_a_backward(rng):
    """As every option: the backward differentiates the forward it follows (its products)."""
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    fast = _run(rnnfast.GRU(3, 4, seed=0, precision="bf16"), x)
    layer = rnnfast.GRU(3, 4, seed=0, precision="bf16")
    y, _ = layer(x)
    layer.precision = "float32"  # between the forward and its backward
    dx, _ = layer.backward(np.ones_like(y))
    assert _same([y, dx, *layer.grads.values()], fast)
    plain = _run(rnnfast.GRU(3, 4, seed=0), x)
    layer.zero_grad()
    assert _same(_run(layer, x), plain)


@pytest.mark.parametrize("cls", [rnnfast.RNN, rnnfast.GRU, rnnfast.LSTM, rnnfast.LayerNormLSTM])
def test_step_runs_with_the_layer_s_products(cls, rng):
    """step() (the bound step and the general path: a stateful two-layer layer) gives the
    forward's outputs, in bf16 as in float32."""
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    for options in ({}, {"num_layers": 2, "stateful": True}):
        layer = cls(3, 4, seed=0, precision="bf16", **options).eval()
        y, _ = layer(x)
        layer.reset_state()
        state, steps = None, []
        for t in range(5):
            out, state = layer.step(x[t], None if options else state)
            steps.append(out)
        np.testing.assert_allclose(np.stack(steps), y, rtol=1e-5, atol=1e-6)
        plain = cls(3, 4, seed=0, **options).eval()
        assert not np.allclose(plain(x)[0], y, rtol=1e-5, atol=1e-6)


# ---- models and fit: their choice wins ------------------------------------------------------


def _model(layer_precision="float32", model_precision=None, seed=0):
    return rnnfast.Sequential(
        [
            rnnfast.LSTM(3, 5, batch_first=True, seed=seed, precision=layer_precision),
            rnnfast.Dense(5, 2, seed=seed),
        ],
        precision=model_precision,
    )


def _model_run(model, x):
    y = model(x)
    dx = model.backward(np.ones_like(y))
    return [y, dx, *(g.copy() for g in model.grads.values())]


def test_a_sequential_s_choice_wins_over_its_layers_and_reaches_the_dense_head(rng):
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    float32 = _model_run(_model(), x)
    bf16 = _model_run(_model(model_precision="bf16"), x)
    assert _same(_model_run(_model("bf16", "float32"), x), float32)
    assert _same(_model_run(_model("float32", "bf16"), x), bf16)
    assert _same(_model_run(_model("bf16", "bf16"), x), bf16)
    # None: each layer its own (the LSTM in bf16, the head in float32)
    mixed = _model_run(_model("bf16"), x)
    assert not _same(mixed, bf16) and not _same(mixed, float32)
    # the head's products follow the model's choice: its weight's gradient differs
    assert not np.array_equal(bf16[-2], float32[-2])
    # nested: the outermost choice wins
    inner = _model(model_precision="bf16")
    assert _same(_model_run(rnnfast.Sequential([inner], precision="float32"), x), float32)


def test_a_sequential_s_choice_travels_with_it(tmp_path):
    model = _model(model_precision="bf16")
    assert model.get_config()["precision"] == "bf16"
    assert "precision='bf16'" in repr(model)
    assert "Products: bf16 operands" in model.summary()
    model.save(tmp_path / "model.npz")
    assert rnnfast.load(tmp_path / "model.npz").precision == "bf16"
    assert pickle.loads(pickle.dumps(model)).precision == "bf16"
    assert "precision" not in _model().get_config()  # None, each layer's own: not written
    assert rnnfast.quantize(model, "int8").precision is None  # the copy's own weights


def _fit(model, x, y, **kwargs):
    return training.fit(
        model, x, y, loss="mse", optimizer=optim.Adam(model, lr=1e-2), epochs=3, batch_size=4,
        shuffle=False, verbose=0, **kwargs,
    )  # fmt: skip


def test_fit_s_choice_wins_over_the_model_s_and_the_layers(rng):
    """fit(precision=...) trains as if every layer had that precision; None leaves them
    theirs. The validation runs with the fit's choice too."""
    x = rng.standard_normal((12, 6, 3)).astype(np.float32)
    y = rng.standard_normal((12, 6, 2)).astype(np.float32)
    val = (x[:4], y[:4])

    def trained(layer_precision, model_precision, fit_precision):
        model = _model(layer_precision, model_precision)
        history = _fit(model, x, y, precision=fit_precision, validation_data=val)
        return history, [p.copy() for p in model.parameters()]

    float32 = trained("float32", None, None)
    bf16 = trained("float32", "bf16", None)
    for got, want in (
        (trained("bf16", "bf16", "float32"), float32),
        (trained("float32", "float32", "bf16"), bf16),
        (trained("bf16", None, "bf16"), bf16),
    ):
        assert got[0] == want[0]
        assert _same(got[1], want[1])
    assert float32[0]["val_loss"] != bf16[0]["val_loss"]


def test_fit_in_bf16_trains_as_float32_does(rng):
    """A small GRU model learns a running sum: the loss falls as fast with bf16 products as with
    float32's, epoch by epoch within 5% (each step's gradient is float32's to about 2**-8,
    test_gradients, and Adam's steps hardly feel that: measured, 0.5% apart after 12 epochs),
    and the trained weights stay float32."""
    x = rng.standard_normal((64, 8, 2)).astype(np.float32)
    y = np.cumsum(x.sum(axis=2, keepdims=True), axis=1) / 4

    def trained(precision):
        model = rnnfast.Sequential(
            [rnnfast.GRU(2, 12, batch_first=True, seed=3), rnnfast.Dense(12, 1, seed=3)]
        )
        history = training.fit(
            model, x, y, loss="mse", optimizer=optim.Adam(model, lr=1e-2), epochs=12,
            batch_size=16, seed=0, verbose=0, precision=precision,
        )  # fmt: skip
        return np.array(history["loss"]), model

    loss32, _ = trained("float32")
    loss16, model = trained("bf16")
    assert loss16[-1] < loss16[0] / 4  # it learns
    np.testing.assert_allclose(loss16, loss32, rtol=0.05)
    assert all(p.dtype == np.float32 for p in model.parameters())
    assert all(g.dtype == np.float32 for g in model.grads.values())


@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_step_keeps_its_state_keyword(precision, emulated_products):
    # the products' wrapper passes the state on by the name the layer's step gives it
    x = np.ones((2, 4), np.float32)
    rnn, lstm = rnnfast.RNN(4, 5, precision=precision), rnnfast.LSTM(4, 5, precision=precision)
    h = np.zeros((1, 2, 5), np.float32)
    np.testing.assert_array_equal(rnn.step(x, h=h)[0], rnn.step(x, h)[0])
    np.testing.assert_array_equal(lstm.step(x, state=None)[0], lstm.step(x)[0])
    with pytest.raises(TypeError, match="'state'"):
        rnn.step(x, state=h)
    with pytest.raises(TypeError, match="multiple values"):
        rnn.step(x, h, h=h)
