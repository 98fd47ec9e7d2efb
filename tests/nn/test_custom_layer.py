"""A layer defined here, outside the package, as a subclass of rnnfast.Layer: it trains through
training.fit (alone, in a Sequential, in a Module), shows in summary(), saves and loads (by name
once its class is defined, and by cls=), pickles, carries the padding as the base class says, and
what it does not offer (a quantized copy, a configuration) is refused by name. The layer protocol
(issue 22): nothing in rnnfast lists layer classes, so this one works as rnnfast's own do."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast
from rnnfast import training
from rnnfast.optim import Adam

F64 = np.float64
B, T, D, H = 5, 7, 3, 6


class ScaleShift(rnnfast.Layer):
    """y = x * gamma + beta over the last axis."""

    def __init__(self, features, dtype=np.float32, seed=None):
        super().__init__(dtype)
        self.features = features
        self.seed = seed
        rng = np.random.default_rng(seed)
        self.add_parameter("gamma", 1.0 + 0.1 * rng.standard_normal(features))
        self.add_parameter("beta", 0.1 * rng.standard_normal(features))

    def forward(self, x):
        x = np.asarray(x, dtype=self.dtype)
        self._cache = x if self.training else None
        return x * self._params["gamma"] + self._params["beta"]

    def backward(self, d_out):
        x = self._take_cache()
        d_out = np.asarray(d_out, dtype=self.dtype)
        rows = d_out.reshape(-1, self.features)
        self.grads["gamma"] += (rows * x.reshape(-1, self.features)).sum(axis=0)
        self.grads["beta"] += rows.sum(axis=0)
        return d_out * self._params["gamma"]

    def get_config(self):
        return {"features": self.features, "dtype": self.dtype.name, "seed": self.seed}

    def output_shape(self, input_shape):
        return tuple(input_shape)


class LastStep(rnnfast.Layer):
    """(B, T, F) -> (B, F), the last step: its output drops the time axis, so the base class's
    call_with_padding ends the valid mask. No parameters, no get_config of its own."""

    def forward(self, x):
        x = np.asarray(x, dtype=self.dtype)
        self._cache = x.shape if self.training else None
        return x[:, -1]

    def backward(self, d_out):
        shape = self._take_cache()
        dx = np.zeros(shape, dtype=self.dtype)
        dx[:, -1] = d_out
        return dx


class ScaledTagger(rnnfast.Module):
    def __init__(self, hidden=H, dtype=F64):
        super().__init__()
        self.rnn = rnnfast.RNN(D, hidden, batch_first=True, return_sequences=True, dtype=dtype)
        self.scale = ScaleShift(hidden, dtype=dtype, seed=1)
        self.head = rnnfast.Dense(hidden, 1, dtype=dtype, seed=2)

    def forward(self, x):
        return self.head(self.scale(self.rnn(x)))


def _sequential(dtype=np.float32):
    return rnnfast.Sequential(
        [
            rnnfast.RNN(D, H, batch_first=True, return_sequences=True, seed=0, dtype=dtype),
            ScaleShift(H, dtype=dtype, seed=1),
            rnnfast.Dense(H, 1, seed=2, dtype=dtype),
        ]
    )


def _data(rng, dtype=np.float32):
    x = rng.standard_normal((32, T, D)).astype(dtype)
    return x, x.sum(axis=2, keepdims=True).cumsum(axis=1).astype(dtype) / 4


def test_it_is_a_layer_with_parameters_and_gradients(rng):
    layer = ScaleShift(D, dtype=F64, seed=0)
    assert isinstance(layer, rnnfast.nn.Layer)
    assert [n for n, _ in layer.named_parameters()] == ["gamma", "beta"]
    assert layer.num_parameters() == layer.keras_param_count() == 2 * D
    x, dy = rng.standard_normal((B, T, D)), rng.standard_normal((B, T, D))
    layer(x)
    dx = layer.backward(dy)
    layer.eval()

    def loss():
        return float(np.sum(layer(x) * dy))

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    for name, p in layer.named_parameters():
        g = numerical_gradient(loss, p)
        np.testing.assert_allclose(layer.grads[name], g, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("where", ["alone", "sequential", "module"])
def test_fit_trains_it(where, rng):
    x, y = _data(rng, F64 if where == "module" else np.float32)
    if where == "alone":
        model = ScaleShift(D, seed=0)
        y = x * 2.0 - 1.0
    else:
        model = ScaledTagger() if where == "module" else _sequential()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    history = training.fit(
        model,
        x,
        y,
        loss="mse",
        optimizer=Adam(model, lr=2e-2),
        epochs=20,
        batch_size=8,
        seed=0,
        verbose=False,
    )
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    prefix = {"alone": "", "sequential": "1.", "module": "scale."}[where]
    for k in ("gamma", "beta"):  # the custom layer's parameters trained too
        assert not np.array_equal(model.state_dict()[prefix + k], before[prefix + k]), k


def test_summary_shows_its_row():
    text = _sequential().summary(input_shape=(T, D))
    row = next(line for line in text.splitlines() if "ScaleShift" in line)
    assert "(None, 7, 6)" in row and row.split()[-1] == str(2 * H)
    # a layer that does not say its output shape: "?" from there on, the counts still shown
    text = rnnfast.Sequential([LastStep(), rnnfast.Dense(D, 1)]).summary(input_shape=(T, D))
    assert "?" in text and "Total params: 4" in text
    assert "ScaleShift" in ScaleShift(H).summary()  # a layer's own: its weights and bytes


@pytest.mark.parametrize("model_of", [_sequential, ScaledTagger, lambda: ScaleShift(H, seed=3)])
def test_save_and_load_by_name_and_by_cls(model_of, tmp_path, rng):
    model = model_of().eval()
    path = tmp_path / "model.npz"
    model.save(path)
    x = rng.standard_normal((B, T, H if isinstance(model, ScaleShift) else D))
    x = x.astype(model.state_dict()[next(iter(model.state_dict()))].dtype)
    for loaded in (rnnfast.load(path), rnnfast.load(path, cls=type(model))):
        assert type(loaded) is type(model)
        for k, v in model.state_dict().items():
            np.testing.assert_array_equal(loaded.state_dict()[k], v)
        np.testing.assert_array_equal(loaded.eval()(x), model(x))
    rnnfast.save(model, tmp_path / "again.npz")
    assert type(rnnfast.persistence.load(tmp_path / "again.npz")) is type(model)


def test_an_unknown_class_name_asks_for_cls(tmp_path):
    class Unsaved(ScaleShift):
        pass

    Unsaved(D).save(tmp_path / "u.npz")
    config_key = "__rnnfast_config__"
    arrays = dict(np.load(tmp_path / "u.npz"))
    text = bytes(arrays[config_key]).decode().replace('"Unsaved"', '"NotDefinedAnywhere"')
    arrays[config_key] = np.frombuffer(text.encode(), dtype=np.uint8)
    np.savez(tmp_path / "v.npz", **arrays)
    with pytest.raises(ValueError, match=r"NotDefinedAnywhere.*cls=NotDefinedAnywhere"):
        rnnfast.load(tmp_path / "v.npz")


def test_a_name_two_classes_share_asks_for_cls(tmp_path):
    def make():
        class Twin(ScaleShift):
            pass

        return Twin

    first, second = make(), make()
    first(D).save(tmp_path / "t.npz")
    with pytest.raises(ValueError, match=r"several classes.*cls=Twin"):
        rnnfast.load(tmp_path / "t.npz")
    assert type(rnnfast.load(tmp_path / "t.npz", cls=second)) is second


def test_it_pickles_alone_and_in_models(rng):
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    for model in (_sequential(), ScaleShift(D, seed=4)):
        model.eval()
        again = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(again(x), model(x))
    tagger = ScaledTagger()
    tagger.eval()
    again = pickle.loads(pickle.dumps(tagger))
    np.testing.assert_array_equal(again(x.astype(F64)), tagger(x.astype(F64)))


def test_the_padding_passes_through_it_or_ends_there(rng):
    """The base class's call_with_padding: ScaleShift keeps (B, T), so the RNN after it still
    runs to the lengths; LastStep drops T, so the mask ends there."""
    lengths = np.array([7, 3, 5, 1, 7])
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    rnn = rnnfast.RNN(D, H, batch_first=True, return_sequences=True, seed=0)
    model = rnnfast.Sequential([ScaleShift(D, seed=0), rnn])
    model.eval()
    out = model(x, lengths=lengths)
    np.testing.assert_array_equal(model.output_mask, np.arange(T)[None, :] < lengths[:, None])
    alone = rnn(model[0](x), lengths=lengths)
    np.testing.assert_array_equal(out, alone)
    ended = rnnfast.Sequential([ScaleShift(D), LastStep()])
    ended(x, lengths=lengths)
    assert ended.output_mask is None


def test_what_it_does_not_offer_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"model.layers\[1\]: a ScaleShift cannot be quantized"):
        rnnfast.quantize(_sequential(), "int8")
    with pytest.raises(NotImplementedError, match="LastStep.get_config"):
        LastStep().save(tmp_path / "l.npz")
