"""The notes' Keras code blocks and the exam question's model, run as written after one
import, print the notes' parameter counts; the front's errors name Keras's arguments."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast.keras import (
    GRU,
    LSTM,
    Bidirectional,
    Dense,
    Dropout,
    Embedding,
    Input,
    Sequential,
    SimpleRNN,
)


def test_notes_first_block(capsys):
    model = Sequential()
    model.add(SimpleRNN(50, input_shape=(None, 1), return_sequences=True))
    model.add(Dropout(0.2))
    model.add(SimpleRNN(100, return_sequences=False))
    model.add(Dropout(0.2))
    model.add(Dense(1))
    model.summary()
    out = capsys.readouterr().out
    for row in (
        "simple_rnn (SimpleRNN)       (None, None, 50)          2,600",
        "dropout (Dropout)            (None, None, 50)          0",
        "simple_rnn_1 (SimpleRNN)     (None, 100)               15,100",
        "dense (Dense)                (None, 1)                 101",
        "Total params: 17,801",
    ):
        assert row in out, out
    assert model.count_params() == 17_801


def test_notes_second_block_is_the_exam_model(capsys):
    model = Sequential()
    model.add(SimpleRNN(64, input_shape=(None, 8), return_sequences=True))
    model.add(SimpleRNN(32, return_sequences=False))
    model.add(Dense(10, activation="softmax"))
    model.summary()
    out = capsys.readouterr().out
    for count in ("4,672", "3,104", "330", "Total params: 8,106"):
        assert count in out, out
    assert [layer.count_params() for layer in model.layers] == [4672, 3104, 330]


def test_the_exam_model_trains_and_predicts():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 12, 8)).astype(np.float32)
    y = (x[:, :, 0].sum(1) > 0).astype(np.int64) + 2 * (x[:, :, 1].sum(1) > 0)
    model = Sequential()
    model.add(SimpleRNN(64, input_shape=(None, 8), return_sequences=True))
    model.add(SimpleRNN(32, return_sequences=False))
    model.add(Dense(10, activation="softmax"))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=3, batch_size=16, validation_split=0.25, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history.history["loss"][-1] < history.history["loss"][0]
    probabilities = model.predict(x)
    assert probabilities.shape == (64, 10)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, rtol=1e-5)
    loss, accuracy = model.evaluate(x, y, verbose=0)
    assert 0.0 <= accuracy <= 1.0 and np.isfinite(loss)


def test_lazy_build_from_the_first_data_and_weight_round_trip():
    rng = np.random.default_rng(1)
    model = Sequential([Embedding(20, 4, mask_zero=True), Bidirectional(GRU(3)), Dense(2)])
    assert not model.built
    ids = rng.integers(1, 20, (5, 7))
    out = model(ids)
    assert out.shape == (5, 2) and model.built
    assert model.layers[1].output_shape == (None, 6)
    twin = Sequential(
        [Input((7,)), Embedding(20, 4, mask_zero=True), Bidirectional(GRU(3)), Dense(2)]
    )
    twin.set_weights(model.get_weights())
    np.testing.assert_array_equal(twin.predict(ids), model.predict(ids))
    assert isinstance(model.model, rnnfast.Sequential)


def test_an_rnnfast_optimizer_over_the_model():
    model = Sequential([Input((None, 2)), LSTM(3), Dense(1)])
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((8, 4, 2)), rng.standard_normal((8, 1))
    model.compile(optimizer=rnnfast.optim.SGD(model, lr=0.1), loss="mse")
    before = model.get_weights()
    model.fit(x.astype(np.float32), y.astype(np.float32), epochs=1, verbose=0)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    # PyTorch's second bias, which Keras does not have, stays zero
    assert not np.any(model.model.layers[0].state_dict()["bias_hh_l0"])


@pytest.mark.parametrize(
    ("make", "error", "pattern"),
    [
        (lambda: SimpleRNN(0), ValueError, "units"),
        (lambda: SimpleRNN(4, activation="sigmoid"), ValueError, "activation"),
        (lambda: SimpleRNN(4, dropout=1.5), ValueError, "dropout"),
        (lambda: Dense(3, activation="swish"), ValueError, "activation"),
        (lambda: Dropout(0.2, noise_shape=(1, 2)), ValueError, "noise_shape"),
        (lambda: Bidirectional(Dense(3)), TypeError, "layer"),
        (lambda: Bidirectional(LSTM(3), merge_mode="max"), ValueError, "merge_mode"),
        (lambda: Sequential([SimpleRNN(3), Input((2, 3))]), ValueError, "Input"),
        (lambda: Sequential(["dense"]), TypeError, "layer"),
        (lambda: Sequential([SimpleRNN(3, input_shape=(5,))]), ValueError, "3 dimensions"),
        (lambda: Sequential([Dense(1)]).compile(loss="hinge"), ValueError, "loss"),
        (
            lambda: Sequential([Dense(1)]).compile(loss="mse", metrics=["auc"]),
            ValueError,
            "metrics",
        ),
        (
            lambda: Sequential([Dense(1)]).compile(optimizer="adagrad", loss="mse"),
            ValueError,
            "optimizer",
        ),
        (
            lambda: Sequential([Dense(1)]).fit(np.zeros((2, 3)), np.zeros((2, 1))),
            RuntimeError,
            "compile",
        ),
    ],
)
def test_bad_arguments_name_keras_arguments(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()


def test_set_weights_checks_everything_before_changing_anything():
    model = Sequential([Input((None, 2)), SimpleRNN(3), Dense(1)])
    before = model.get_weights()
    bad = [w.copy() for w in before]
    bad[-1] = np.zeros(2)
    with pytest.raises(ValueError, match=r"weights\[4\]"):
        model.set_weights(bad)
    with pytest.raises(ValueError, match="5 arrays"):
        model.set_weights(before[:-1])
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
