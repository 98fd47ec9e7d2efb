"""rnnfast.keras behaves as Keras 3 (torch backend) on the same weights and data: frozen
layers, stateful layers across calls, return_state and merge_mode=None in a Sequential, float64
and int data, a sample without its batch axis, Masking and TimeDistributed."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)
N, T, D, H = 8, 5, 3, 4
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _data(rng, n=N, t=T, d=D):
    return rng.standard_normal((n, t, d)), rng.standard_normal((n, 1))  # float64, as users'


def _twins(keras, make, **input_kwargs):
    """The same Sequential in Keras and here; ``make(lib)`` gives the layers."""
    theirs = keras.Sequential([keras.Input((T, D), **input_kwargs), *make(keras.layers)])
    ours = rk.Sequential([rk.Input((T, D), **input_kwargs), *make(rk)])
    ours.set_weights(_weights(theirs))
    return theirs, ours


@pytest.mark.parametrize("frozen", ["recurrent", "dense", "bidi", "backward"])
def test_frozen_layers_match_keras(keras, rng, frozen):
    def make(lib):
        return [lib.Bidirectional(lib.LSTM(H)), lib.Dense(1)]

    theirs, ours = _twins(keras, make)
    for model in (theirs, ours):
        model.compile(optimizer="adam", loss="mse")  # freezing after compile counts (Keras 3)
        if frozen == "dense":
            model.layers[1].trainable = False
        elif frozen == "bidi":
            model.layers[0].trainable = False
        elif frozen == "backward":
            model.layers[0].backward_layer.trainable = False
        else:
            model.layers[0].forward_layer.trainable = False
    x, y = _data(rng)
    before = ours.get_weights()
    theirs.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    ours.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    after_keras = _weights(theirs)
    for b, a, k in zip(before, ours.get_weights(), after_keras):
        assert np.array_equal(b, a) == np.array_equal(b, k)  # the same weights stayed
        np.testing.assert_allclose(a, k, rtol=1e-4, atol=1e-5)
    lines = []
    ours.summary(print_fn=lines.append)
    trainable = sum(int(np.prod(v.shape)) for v in theirs.trainable_weights)
    assert f"Trainable params: {trainable:,} " in lines[0]


def test_unfreezing_again_trains_with_the_optimizer_state_kept(rng):
    model = rk.Sequential([rk.Input((T, D)), rk.GRU(H), rk.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x, y = _data(rng)
    model.fit(x, y, epochs=1, verbose=0)
    model.layers[0].trainable = False
    model.fit(x, y, epochs=1, verbose=0)
    model.layers[0].trainable = True
    before = model.get_weights()
    model.fit(x, y, epochs=1, verbose=0)
    assert not np.array_equal(before[0], model.get_weights()[0])


def test_stateful_layers_carry_state_across_calls_as_keras(keras, rng):
    def make(lib):
        return [
            lib.LSTM(H, stateful=True, return_sequences=True),
            lib.GRU(H, stateful=True),
            lib.Dense(1),
        ]

    theirs, ours = _twins(keras, make, batch_size=4)
    x, y = _data(rng)
    for _ in range(2):  # the second call starts from the first's state
        np.testing.assert_allclose(
            ours.predict(x, batch_size=4), theirs.predict(x, batch_size=4, verbose=0), **TOL
        )
    for model in (theirs, ours):
        model.compile(optimizer="sgd", loss="mse")
    e_keras = theirs.evaluate(x, y, batch_size=4, verbose=0)
    np.testing.assert_allclose(ours.evaluate(x, y, batch_size=4), e_keras, rtol=1e-5)
    # fit does not reset the state at an epoch's start in Keras 3 (a stacked stateful model's
    # fit fails inside Keras's torch backend, an in-place state update: one layer here)
    theirs, ours = _twins(
        keras, lambda lib: [lib.SimpleRNN(H, stateful=True), lib.Dense(1)], batch_size=4
    )
    for model in (theirs, ours):
        model.compile(optimizer="sgd", loss="mse")
    ours.predict(x, batch_size=4)
    theirs.predict(x, batch_size=4, verbose=0)
    hk = theirs.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history["loss"]
    ho = ours.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ho, hk, rtol=1e-4)
    theirs.layers[0].reset_states()
    ours.layers[0].reset_states()
    np.testing.assert_allclose(
        ours.predict(x, batch_size=4),
        theirs.predict(x, batch_size=4, verbose=0),
        rtol=1e-4,
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="batch_size=4"):
        ours.predict(x)  # a batch of 8 (Keras raises too)


def test_stateful_needs_a_fixed_batch_size():
    with pytest.raises(ValueError, match="batch_size=N"):
        rk.Sequential([rk.Input((T, D)), rk.SimpleRNN(H, stateful=True)])
    with pytest.raises(ValueError, match="batch_size"):
        rk.SimpleRNN(H, batch_input_shape=(4, T, D))
    model = rk.Sequential([rk.Input(batch_shape=(2, T, D)), rk.SimpleRNN(H, stateful=True)])
    assert model.layers[0].output_shape == (2, H)


def test_return_state_and_merge_none_in_a_sequential(keras, rng):
    theirs, ours = _twins(keras, lambda lib: [lib.LSTM(H, return_state=True)])
    x, _ = _data(rng)
    got, expected = ours.predict(x), theirs.predict(x, verbose=0)
    assert isinstance(got, tuple) and len(got) == len(expected) == 3
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, **TOL)
    theirs, ours = _twins(keras, lambda lib: [lib.Bidirectional(lib.GRU(H), merge_mode=None)])
    for a, b in zip(ours.predict(x), theirs.predict(x, verbose=0)):
        np.testing.assert_allclose(a, b, **TOL)
    with pytest.raises(ValueError, match="functional API"):
        rk.Sequential([rk.Input((T, D)), rk.LSTM(H, return_state=True), rk.Dense(1)])
    ours.compile(loss="mse")
    with pytest.raises(ValueError, match="functional API"):
        ours.fit(x, np.zeros((N, H)))


def test_float64_and_int_data_are_cast_and_never_modified(keras, rng):
    theirs, ours = _twins(keras, lambda lib: [lib.SimpleRNN(H), lib.Dense(1)])
    x, y = _data(rng)
    x_copy, y_copy = x.copy(), y.copy()
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), **TOL)
    assert ours.predict(x).dtype == np.float32
    ints = rng.integers(-2, 3, (N, T, D))
    np.testing.assert_allclose(ours.predict(ints), theirs.predict(ints, verbose=0), **TOL)
    for model in (theirs, ours):
        model.compile(optimizer="sgd", loss="mse")
    hk = theirs.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    ho = ours.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ho, hk, rtol=1e-4)
    y_int = (y > 0).astype(np.int64)
    hk = theirs.fit(x, y_int, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    ho = ours.fit(x, y_int, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ho, hk, rtol=1e-4)
    assert np.array_equal(x, x_copy) and np.array_equal(y, y_copy)


def test_one_sample_without_the_batch_axis_is_a_clear_error(keras, rng):
    theirs, ours = _twins(keras, lambda lib: [lib.LSTM(H), lib.Dense(1)])
    x, _ = _data(rng)
    with pytest.raises(ValueError):
        theirs.predict(x[0], verbose=0)
    with pytest.raises(ValueError, match=r"x\[None\]"):
        ours.predict(x[0])
    with pytest.raises(ValueError, match=r"x\[None\]"):
        ours(x[0])
    np.testing.assert_allclose(ours.predict(x[0][None]), theirs.predict(x[:1], verbose=0), **TOL)


def test_masking_and_time_distributed_match_keras(keras, rng):
    def make(lib):
        return [
            lib.Masking(mask_value=0.0),
            lib.LSTM(H, return_sequences=True),
            lib.Bidirectional(lib.GRU(H, return_sequences=True)),
            lib.TimeDistributed(lib.Dense(2)),
        ]

    theirs, ours = _twins(keras, make)
    x, _ = _data(rng)
    lengths = rng.integers(1, T + 1, N)
    x[np.arange(T)[None, :] >= lengths[:, None]] = 0.0  # padding at the end
    x[0, 1] = 0.0  # and one step masked inside a sequence
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), **TOL)
    y = rng.standard_normal((N, T, 2))
    for model in (theirs, ours):
        model.compile(optimizer="adam", loss="mse")
    hk = theirs.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    ho = ours.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ho, hk, rtol=1e-4)
