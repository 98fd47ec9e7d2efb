"""Keras's fit / evaluate arguments on rnnfast.keras, beside Keras 3 on the same weights and
data: sample_weight (fit, evaluate, validation data), a Python generator with
steps_per_epoch and validation_steps, the front's own optimizers with Keras's clipping; what
the front refuses, by name; training.fit's message for an optimizer name; and the backend
that importing rnnfast.keras sets for Keras."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rnnfast
import rnnfast.keras as rk

N, T, D, H, K = 32, 5, 3, 4, 3
pytestmark = pytest.mark.filterwarnings(
    # Keras 3 on the torch backend hands NumPy a tensor whose __array__ predates NumPy 2
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)


def _weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _twins(keras, units=K, activation="softmax"):
    theirs = keras.Sequential(
        [
            keras.Input((T, D)),
            keras.layers.LSTM(H),
            keras.layers.Dense(units, activation=activation),
        ]
    )
    ours = rk.Sequential([rk.Input((T, D)), rk.LSTM(H), rk.Dense(units, activation=activation)])
    ours.set_weights(_weights(theirs))
    return theirs, ours


@pytest.fixture
def data(rng):
    x = rng.standard_normal((N, T, D)).astype(np.float32)
    return x, rng.integers(0, K, N), rng.random(N).astype(np.float32) * 2


@pytest.mark.parametrize(
    ("loss", "metrics"),
    [("sparse_categorical_crossentropy", ["accuracy"]), ("mae", ["mse"])],
)
def test_sample_weight_in_fit_and_evaluate_matches_keras(keras, rng, data, loss, metrics):
    x, ids, w = data
    regression = loss == "mae"
    theirs, ours = _twins(keras, 1 if regression else K, None if regression else "softmax")
    y = rng.standard_normal((N, 1)).astype(np.float32) if regression else ids
    for model in (theirs, ours):
        model.compile(optimizer="adam", loss=loss, metrics=metrics)
    kw = {"epochs": 2, "batch_size": 8, "shuffle": False, "verbose": 0}
    val = (x[:10], y[:10], w[:10])
    kh = theirs.fit(x, y, sample_weight=w, validation_data=val, **kw).history
    oh = ours.fit(x, y, sample_weight=w, validation_data=val, **kw).history
    assert set(oh) == set(kh)
    for key in kh:  # the loss weighted, the metrics not (Keras's metrics=, not weighted_metrics=)
        np.testing.assert_allclose(oh[key], kh[key], rtol=2e-4, err_msg=key)
    np.testing.assert_allclose(
        ours.evaluate(x, y, sample_weight=w),
        theirs.evaluate(x, y, sample_weight=w, verbose=0),
        rtol=2e-4,
    )


def test_sample_weight_with_validation_split_matches_keras(keras, data):
    x, y, w = data
    theirs, ours = _twins(keras)
    for model in (theirs, ours):
        model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy")
    kw = {"epochs": 2, "batch_size": 8, "shuffle": False, "verbose": 0, "validation_split": 0.25}
    kh = theirs.fit(x, y, sample_weight=w, **kw).history
    oh = ours.fit(x, y, sample_weight=w, **kw).history
    for key in kh:
        np.testing.assert_allclose(oh[key], kh[key], rtol=2e-4, err_msg=key)


def _batches(x, y, w=None, size=8):
    """Keras's kind of generator: forever, in order."""
    while True:
        for start in range(0, len(x), size):
            part = slice(start, start + size)
            yield (x[part], y[part]) if w is None else (x[part], y[part], w[part])


@pytest.mark.parametrize("weighted", [False, True])
def test_generator_with_steps_per_epoch_matches_keras(keras, data, weighted):
    x, y, w = data
    w = w if weighted else None
    theirs, ours = _twins(keras)
    for model in (theirs, ours):
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
    kw = {"epochs": 3, "steps_per_epoch": 3, "validation_steps": 2, "verbose": 0, "shuffle": False}
    kh = theirs.fit(
        _batches(x, y, w), validation_data=_batches(x[:16], y[:16], size=4), **kw
    ).history
    oh = ours.fit(_batches(x, y, w), validation_data=_batches(x[:16], y[:16], size=4), **kw).history
    assert set(oh) == set(kh)
    for key in kh:
        np.testing.assert_allclose(oh[key], kh[key], rtol=2e-4, err_msg=key)
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-3, atol=1e-5)


def test_generator_needs_its_steps_and_must_not_run_out(data):
    x, y, _ = data
    model = rk.Sequential([rk.Input((T, D)), rk.GRU(H), rk.Dense(K)])
    model.compile(loss="sparse_categorical_crossentropy")
    with pytest.warns(UserWarning, match="shuffle=True was passed, but will be ignored"):
        model.fit(_batches(x, y), steps_per_epoch=1, verbose=0)
    with pytest.raises(ValueError, match="steps_per_epoch: required"):
        model.fit(_batches(x, y), verbose=0, shuffle=False)
    with pytest.raises(ValueError, match="ran out after 4 batches of the 5"):
        model.fit(iter([(x[:8], y[:8])] * 4), steps_per_epoch=5, verbose=0, shuffle=False)
    with pytest.raises(ValueError, match="validation_steps: required"):
        model.fit(
            _batches(x, y),
            steps_per_epoch=2,
            validation_data=_batches(x, y),
            verbose=0,
            shuffle=False,
        )
    with pytest.raises(ValueError, match="y: with a generator"):
        model.fit(_batches(x, y), y, steps_per_epoch=2, verbose=0, shuffle=False)
    with pytest.raises(NotImplementedError, match="steps_per_epoch=2.*generator"):
        model.fit(x, y, steps_per_epoch=2, verbose=0)


def test_front_optimizers_take_keras_clipping(keras, data):
    x, y, _ = data
    for name, ours_opt, keras_opt in [
        (
            "clipnorm",
            rk.optimizers.SGD(0.5, clipnorm=0.01),
            keras.optimizers.SGD(0.5, clipnorm=0.01),
        ),
        (
            "clipvalue",
            rk.optimizers.Adam(0.05, clipvalue=1e-3),
            keras.optimizers.Adam(0.05, clipvalue=1e-3),
        ),
    ]:
        theirs, ours = _twins(keras)
        theirs.compile(optimizer=keras_opt, loss="sparse_categorical_crossentropy")
        ours.compile(optimizer=ours_opt, loss="sparse_categorical_crossentropy")
        kw = {"epochs": 2, "batch_size": 8, "shuffle": False, "verbose": 0}
        kh, oh = theirs.fit(x, y, **kw).history, ours.fit(x, y, **kw).history
        np.testing.assert_allclose(oh["loss"], kh["loss"], rtol=2e-4, err_msg=name)
    with pytest.raises(ValueError, match="only one of them"):
        rk.optimizers.Adam(clipnorm=1.0, global_clipnorm=1.0)


def test_unsupported_fit_and_evaluate_arguments_are_refused(data):
    x, y, w = data
    model = rk.Sequential([rk.Input((T, D)), rk.GRU(H), rk.Dense(K)])
    model.compile(loss="sparse_categorical_crossentropy")
    refused = [
        ({"class_weight": {0: 1.0}}, "class_weight=.*sample_weight"),
        ({"initial_epoch": 1}, "initial_epoch=1"),
        ({"validation_freq": 2}, "validation_freq=2"),
        ({"validation_batch_size": 4}, "validation_batch_size=4"),
    ]
    for kwargs, message in refused:
        with pytest.raises(NotImplementedError, match=message):
            model.fit(x, y, verbose=0, **kwargs)
    with pytest.raises(
        ValueError, match=r"sample_weight: expected one weight per sample, shape \(32,\)"
    ):
        model.fit(x, y, sample_weight=w[:5], verbose=0)
    with pytest.raises(ValueError, match="sample_weight: expected finite weights >= 0"):
        model.fit(x, y, sample_weight=-w, verbose=0)
    with pytest.raises(NotImplementedError, match="steps=3"):
        model.evaluate(x, y, steps=3)
    with pytest.raises(TypeError, match="a DataLoader or PyDataset is not read|tf.data"):
        model.fit(range(3), verbose=0)


def test_training_fit_says_what_optimizer_it_takes(data):
    x, y, _ = data
    model = rnnfast.Sequential([rnnfast.GRU(D, H, batch_first=True), rnnfast.Dense(H, K)])
    with pytest.raises(
        TypeError,
        match=r"optimizer: expected an rnnfast.optim optimizer.*"
        r"rnnfast.optim.Adam\(model, lr=1e-3\), got str 'adam'",
    ):
        rnnfast.training.fit(model, x, y, loss="cross_entropy", optimizer="adam", verbose=0)


def test_importing_rnnfast_keras_sets_keras_backend_to_torch():
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    code = "import rnnfast.keras, keras; print(keras.backend.backend())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "torch"
