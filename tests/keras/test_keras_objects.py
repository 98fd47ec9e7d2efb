"""Keras's own objects on rnnfast.keras, beside Keras 3 on the same weights and data:
keras.optimizers (with clipnorm, clipvalue, global_clipnorm, weight_decay), keras.losses
objects and Keras's loss names, keras.metrics, and keras.callbacks run by the front's fit
(EarlyStopping, ReduceLROnPlateau, ModelCheckpoint, CSVLogger, LambdaCallback). Options the
front cannot honour raise, naming them."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import rnnfast.keras as rk

N, T, D, H, K = 32, 5, 3, 4, 3
pytestmark = pytest.mark.filterwarnings(
    # Keras 3 on the torch backend hands NumPy a tensor whose __array__ predates NumPy 2
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)


def _weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _twins(keras, units=K, activation="softmax", kind="GRU"):
    theirs = keras.Sequential(
        [
            keras.Input((T, D)),
            getattr(keras.layers, kind)(H),
            keras.layers.Dense(units, activation=activation),
        ]
    )
    ours = rk.Sequential(
        [rk.Input((T, D)), getattr(rk, kind)(H), rk.Dense(units, activation=activation)]
    )
    ours.set_weights(_weights(theirs))
    return theirs, ours


@pytest.fixture
def data(rng):
    return rng.standard_normal((N, T, D)).astype(np.float32), rng.integers(0, K, N)


def _fit_both(theirs, ours, x, y, make_optimizer, loss, epochs=2, metrics=(), **fit):
    theirs.compile(
        optimizer=make_optimizer(), loss=loss() if callable(loss) else loss, metrics=list(metrics)
    )
    ours.compile(
        optimizer=make_optimizer(), loss=loss() if callable(loss) else loss, metrics=list(metrics)
    )
    kw = {"epochs": epochs, "batch_size": 8, "shuffle": False, "verbose": 0, **fit}
    return theirs.fit(x, y, **kw).history, ours.fit(x, y, **kw).history


@pytest.mark.parametrize(
    "make",
    [
        lambda k: k.optimizers.Adam(0.05, clipnorm=0.05),
        lambda k: k.optimizers.SGD(0.2, momentum=0.9, nesterov=True, clipvalue=0.02),
        lambda k: k.optimizers.RMSprop(0.01, rho=0.8, global_clipnorm=0.1),
        lambda k: k.optimizers.AdamW(0.02, weight_decay=0.3),
        lambda k: k.optimizers.Adam(0.02, beta_1=0.8, epsilon=1e-4, weight_decay=0.2),
        lambda k: k.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    ],
    ids=["adam-clipnorm", "sgd-clipvalue", "rmsprop-global", "adamw", "adam-decay", "rms-center"],
)
def test_keras_optimizers_match_keras(keras, data, make):
    theirs, ours = _twins(keras)
    x, y = data
    kh, oh = _fit_both(
        theirs, ours, x, y, lambda: make(keras), "sparse_categorical_crossentropy", epochs=3
    )
    np.testing.assert_allclose(oh["loss"], kh["loss"], rtol=2e-4)
    for a, b in zip(ours.get_weights(), _weights(theirs)):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5)


@pytest.mark.parametrize(
    ("loss", "head", "targets"),
    [
        ("mae", None, "real"),
        ("mean_absolute_percentage_error", None, "positive"),
        ("huber", None, "real"),
        (lambda k: k.losses.Huber(delta=0.3), None, "real"),
        ("log_cosh", None, "real"),
        ("msle", "relu", "positive"),
        (lambda k: k.losses.MeanSquaredError(), None, "real"),
        (lambda k: k.losses.SparseCategoricalCrossentropy(from_logits=True), None, "ids"),
        (lambda k: k.losses.CategoricalCrossentropy(label_smoothing=0.2), "softmax", "one_hot"),
        (
            lambda k: k.losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1),
            None,
            "bits",
        ),
        (lambda k: k.losses.mean_absolute_error, None, "real"),
    ],
    ids=[
        "mae",
        "mape",
        "huber",
        "Huber-0.3",
        "log_cosh",
        "msle",
        "MSE",
        "SCCE-logits",
        "CCE-smooth",
        "BCE-logits",
        "mae-fn",
    ],
)
def test_losses_by_name_and_object_match_keras(keras, rng, data, loss, head, targets):
    x, ids = data
    units = 1 if targets in ("real", "positive", "bits") else K
    y = {
        "real": rng.standard_normal((N, 1)).astype(np.float32),
        "positive": rng.random((N, 1)).astype(np.float32) + 0.5,
        "ids": ids,
        "one_hot": np.eye(K, dtype=np.float32)[ids],
        "bits": (ids % 2).astype(np.float32)[:, None],
    }[targets]
    theirs, ours = _twins(keras, units, head)
    make_loss = (lambda: loss(keras)) if callable(loss) else loss
    kh, oh = _fit_both(theirs, ours, x, y, lambda: keras.optimizers.SGD(0.05), make_loss)
    np.testing.assert_allclose(oh["loss"], kh["loss"], rtol=2e-4)
    np.testing.assert_allclose(ours.evaluate(x, y), theirs.evaluate(x, y, verbose=0), rtol=2e-4)


def test_metrics_by_name_and_object_match_keras(keras, rng, data):
    x, _ = data
    y = rng.standard_normal((N, 1)).astype(np.float32)
    theirs, ours = _twins(keras, 1, None)
    metrics_k = ["mae", keras.metrics.MeanSquaredError()]
    theirs.compile(optimizer="sgd", loss="mse", metrics=metrics_k)
    ours.compile(optimizer="sgd", loss="mse", metrics=["mae", keras.metrics.MeanSquaredError()])
    kw = {"epochs": 2, "batch_size": 8, "shuffle": False, "verbose": 0, "validation_split": 0.25}
    kh, oh = theirs.fit(x, y, **kw).history, ours.fit(x, y, **kw).history
    assert set(oh) == set(kh)
    for key in kh:
        np.testing.assert_allclose(oh[key], kh[key], rtol=2e-4, err_msg=key)


def test_unsupported_keras_objects_are_refused_by_name(keras):
    model = rk.Sequential([rk.Input((T, D)), rk.GRU(H), rk.Dense(1)])
    cases = [
        (keras.optimizers.Adagrad(), "rnnfast has no Adagrad"),
        (keras.optimizers.Adam(amsgrad=True), "amsgrad=True"),
        (keras.optimizers.SGD(use_ema=True), "use_ema=True"),
        (
            keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)),
            "learning_rate=.*LearningRateScheduler",
        ),
    ]
    for optimizer, message in cases:
        with pytest.raises(NotImplementedError, match=message):
            model.compile(optimizer=optimizer, loss="mse")
    with pytest.raises(NotImplementedError, match="reduction='sum'"):
        model.compile(loss=keras.losses.MeanSquaredError(reduction="sum"))
    with pytest.raises(NotImplementedError, match="KLDivergence"):
        model.compile(loss=keras.losses.KLDivergence())
    with pytest.raises(NotImplementedError, match="AUC"):
        model.compile(loss="mse", metrics=[keras.metrics.AUC()])
    with pytest.raises(NotImplementedError, match="threshold=0.7"):
        model.compile(loss="mse", metrics=[keras.metrics.BinaryAccuracy(threshold=0.7)])


def _callback_twins(keras, rng):
    theirs, ours = _twins(keras, 1, None, kind="SimpleRNN")
    x = rng.standard_normal((N, T, D)).astype(np.float32)
    y = rng.standard_normal((N, 1)).astype(np.float32)  # noise: the validation loss rises
    for model in (theirs, ours):
        model.compile(optimizer=keras.optimizers.SGD(0.3), loss="mse")
    return theirs, ours, x, y


def test_early_stopping_and_reduce_lr_run_as_in_keras(keras, rng):
    theirs, ours, x, y = _callback_twins(keras, rng)

    def callbacks():
        return [
            keras.callbacks.ReduceLROnPlateau(
                monitor="loss", factor=0.5, patience=0, min_delta=0.01
            ),
            keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True, min_delta=1e-3),
        ]

    kw = {"epochs": 12, "batch_size": 8, "shuffle": False, "verbose": 0, "validation_split": 0.25}
    kh = theirs.fit(x, y, callbacks=callbacks(), **kw).history
    oh = ours.fit(x, y, callbacks=callbacks(), **kw).history
    assert len(oh["loss"]) == len(kh["loss"]) < 12  # stopped at the same epoch
    np.testing.assert_allclose(oh["learning_rate"], kh["learning_rate"], rtol=1e-6)
    np.testing.assert_allclose(oh["val_loss"], kh["val_loss"], rtol=5e-4)
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=2e-3, atol=1e-5)
    assert ours.optimizer.learning_rate == pytest.approx(float(theirs.optimizer.learning_rate))


def test_checkpoint_csv_logger_and_lambda_callbacks(keras, rng, tmp_path):
    theirs, ours, x, y = _callback_twins(keras, rng)
    seen = {}

    def callbacks(side):
        seen[side] = {"batches": 0, "epochs": []}
        return [
            keras.callbacks.ModelCheckpoint(
                str(tmp_path / side / "m-{epoch:02d}-{val_loss:.3f}.keras"), save_best_only=True
            ),
            keras.callbacks.ModelCheckpoint(
                str(tmp_path / side / "w.weights.h5"), save_weights_only=True
            ),
            keras.callbacks.CSVLogger(str(tmp_path / f"{side}.csv")),
            keras.callbacks.LambdaCallback(
                on_batch_end=lambda b, logs: seen[side].__setitem__(
                    "batches", seen[side]["batches"] + 1
                ),
                on_epoch_end=lambda e, logs: seen[side]["epochs"].append(sorted(logs)),
            ),
        ]

    kw = {"epochs": 4, "batch_size": 8, "shuffle": False, "verbose": 0, "validation_split": 0.25}
    theirs.fit(x, y, callbacks=callbacks("keras"), **kw)
    ours.fit(x, y, callbacks=callbacks("ours"), **kw)
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == sorted(
        p.name for p in (tmp_path / "keras").iterdir()
    )
    assert seen["ours"] == seen["keras"]
    with open(tmp_path / "ours.csv") as f, open(tmp_path / "keras.csv") as g:
        ours_rows, keras_rows = list(csv.DictReader(f)), list(csv.DictReader(g))
    assert [r.keys() for r in ours_rows] == [r.keys() for r in keras_rows]
    for a, b in zip(ours_rows, keras_rows):
        np.testing.assert_allclose(float(a["val_loss"]), float(b["val_loss"]), rtol=5e-4)
    # the weights checkpoint is the last epoch's, in Keras's file
    fresh = rk.Sequential([rk.Input((T, D)), rk.SimpleRNN(H), rk.Dense(1)])
    fresh.load_weights(tmp_path / "ours" / "w.weights.h5")
    np.testing.assert_array_equal(fresh.predict(x), ours.predict(x))


def test_unsupported_keras_callbacks_are_refused(keras, tmp_path, rng):
    _, ours, x, y = _callback_twins(keras, rng)
    with pytest.raises(NotImplementedError, match="BackupAndRestore.*backup_dir"):
        ours.fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path))], verbose=0)
    with pytest.raises(NotImplementedError, match="on_test_batch_end"):
        ours.fit(
            x, y, callbacks=[keras.callbacks.LambdaCallback(on_test_batch_end=print)], verbose=0
        )
    with pytest.raises(TypeError, match=r"callbacks\[0\]"):
        ours.fit(x, y, callbacks=[object()], verbose=0)


def test_a_callback_sees_the_model_as_compiled(keras, data):
    """A callback that predicts gets probabilities (the softmax the loss reads logits before
    is back while it runs), and sets the learning rate of an rnnfast.optim optimizer too."""
    import rnnfast

    x, y = data
    _, ours = _twins(keras)
    ours.compile(optimizer=rnnfast.optim.SGD(ours, lr=0.1), loss="sparse_categorical_crossentropy")
    sums = []
    callbacks = [
        keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: sums.append(ours.predict(x[:4]).sum(axis=-1))
        ),
        keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr / 2),
    ]
    ours.fit(x, y, epochs=2, batch_size=8, callbacks=callbacks, verbose=0)
    np.testing.assert_allclose(np.concatenate(sums), 1.0, rtol=1e-5)
    assert ours.optimizer.lr == pytest.approx(0.025)
