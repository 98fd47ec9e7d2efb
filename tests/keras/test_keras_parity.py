"""rnnfast.keras beside Keras 3 (torch backend) on the same model and the same weights: the
same predictions, and one epoch of training (shuffle=False, no dropout, Keras's Adam defaults)
gives the same loss, for each layer kind."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

N, T, D, H, K = 48, 6, 3, 5, 4
# Keras 3's predict and fit on the torch backend hand NumPy a tensor whose __array__ predates
# NumPy 2's copy keyword: NumPy's deprecation warning, from inside Keras
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)
KINDS = ["SimpleRNN", "GRU", "LSTM"]


def _weights(model):
    """A Keras model's weights as NumPy arrays (read from the variables' tensors)."""
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _data(rng, classes=K, ids=False):
    x = rng.integers(1, 9, (N, T)) if ids else rng.standard_normal((N, T, D)).astype(np.float32)
    y = rng.integers(0, classes, N)
    return x, y


def _twins(keras, kind, *, head="softmax"):
    """The same stack in Keras and in rnnfast.keras: two recurrent layers and a Dense head,
    rnnfast's holding Keras's weights."""
    units = K if head == "softmax" else 1
    theirs = keras.Sequential(
        [
            keras.Input((T, D)),
            getattr(keras.layers, kind)(H, return_sequences=True),
            getattr(keras.layers, kind)(H + 2),
            keras.layers.Dense(units, activation=head),
        ]
    )
    ours = rk.Sequential()
    ours.add(getattr(rk, kind)(H, input_shape=(None, D), return_sequences=True))
    ours.add(getattr(rk, kind)(H + 2))
    ours.add(rk.Dense(units, activation=head))
    ours.set_weights(_weights(theirs))
    return theirs, ours


def _fit_both(keras, theirs, ours, x, y, loss, optimizer="adam"):
    # Keras's own defaults by name, on both sides
    theirs.compile(optimizer=optimizer, loss=loss)
    ours.compile(optimizer=optimizer, loss=loss)
    kh = theirs.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
    oh = ours.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
    return kh.history["loss"][0], oh.history["loss"][0]


@pytest.mark.parametrize("kind", KINDS)
def test_predictions_and_one_epoch_loss_match_keras(keras, rng, kind):
    theirs, ours = _twins(keras, kind)
    x, y = _data(rng)
    expected = theirs.predict(x, verbose=0)
    np.testing.assert_allclose(ours.predict(x), expected, rtol=1e-5, atol=1e-6)
    ours_weights = ours.get_weights()
    for a, b in zip(ours_weights, _weights(theirs)):
        np.testing.assert_array_equal(a, b)
    keras_loss, our_loss = _fit_both(keras, theirs, ours, x, y, "sparse_categorical_crossentropy")
    np.testing.assert_allclose(our_loss, keras_loss, rtol=1e-4)
    # the weights after the epoch, and so the next predictions, follow Keras's too
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize(
    ("loss", "head", "optimizer"),
    [
        ("binary_crossentropy", "sigmoid", "rmsprop"),
        ("mse", None, "sgd"),
        ("categorical_crossentropy", "softmax", "adam"),
    ],
)
def test_other_losses_and_optimizers_match_keras(keras, rng, loss, head, optimizer):
    theirs, ours = _twins(keras, "GRU", head=head)
    x, y = _data(rng, classes=2 if head == "sigmoid" else K)
    if loss == "categorical_crossentropy":
        y = np.eye(K, dtype=np.float32)[y]
    elif loss == "mse":
        y = rng.standard_normal((N, 1)).astype(np.float32)
    else:
        y = y.astype(np.float32)
    keras_loss, our_loss = _fit_both(keras, theirs, ours, x, y, loss, optimizer)
    np.testing.assert_allclose(our_loss, keras_loss, rtol=1e-4)


def test_bidirectional_embedding_model_matches_keras(keras, rng):
    """Embedding (mask_zero: trailing zeros are padding), Bidirectional(LSTM), Dense."""
    theirs = keras.Sequential(
        [
            keras.Input((T,)),
            keras.layers.Embedding(10, D, mask_zero=True),
            keras.layers.Bidirectional(keras.layers.LSTM(H), merge_mode="sum"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    ours = rk.Sequential(
        [
            rk.Input((T,)),
            rk.Embedding(10, D, mask_zero=True),
            rk.Bidirectional(rk.LSTM(H), merge_mode="sum"),
            rk.Dense(1, activation="sigmoid"),
        ]
    )
    ours.set_weights(_weights(theirs))
    x, y = _data(rng, classes=2, ids=True)
    lengths = rng.integers(1, T + 1, N)
    x[np.arange(T)[None, :] >= lengths[:, None]] = 0
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    keras_loss, our_loss = _fit_both(
        keras, theirs, ours, x, y.astype(np.float32), "binary_crossentropy"
    )
    np.testing.assert_allclose(our_loss, keras_loss, rtol=1e-4)


def test_weights_move_back_to_keras(keras, rng):
    """get_weights of the rnnfast twin loads into Keras (set_weights), which then predicts
    what the twin does."""
    theirs, ours = _twins(keras, "LSTM")
    ours_fresh = rk.Sequential(
        [
            rk.Input((None, D)),
            rk.LSTM(H, return_sequences=True),
            rk.LSTM(H + 2),
            rk.Dense(K, activation="softmax"),
        ]
    )
    theirs.set_weights(ours_fresh.get_weights())
    x, _ = _data(rng)
    np.testing.assert_allclose(
        theirs.predict(x, verbose=0), ours_fresh.predict(x), rtol=1e-5, atol=1e-6
    )
