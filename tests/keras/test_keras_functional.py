"""The functional API of rnnfast.keras beside Keras 3's: layer calls on symbolic tensors,
Model(inputs, outputs), return_state outputs, and the seq2seq pattern (an encoder's states as
the decoder's initial_state) trained end to end, on the same weights and data."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)
N, T, D, H, V = 8, 5, 3, 4, 6
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _seq2seq(lib, make_model):
    encoder_inputs = lib.Input((None, D))
    _, h, c = lib.LSTM(H, return_state=True)(encoder_inputs)
    decoder_inputs = lib.Input((None, V))
    seq = lib.LSTM(H, return_sequences=True)(decoder_inputs, initial_state=[h, c])
    outputs = lib.TimeDistributed(lib.Dense(V, activation="softmax"))(seq)
    return make_model([encoder_inputs, decoder_inputs], outputs)


def test_seq2seq_trains_end_to_end_as_keras(keras, rng):
    theirs = _seq2seq(keras.layers, keras.Model)
    ours = _seq2seq(rk, rk.Model)
    # Keras's layer order (its names carry a global counter: compare the kinds and shapes)
    kinds = [type(layer).__name__ for layer in theirs.layers if "Input" not in type(layer).__name__]
    assert [type(layer).__name__ for layer in ours.layers] == kinds
    ours.set_weights(_weights(theirs))
    x_enc = rng.standard_normal((N, T, D))
    x_dec = rng.standard_normal((N, T + 1, V)).astype(np.float32)
    y = rng.integers(0, V, (N, T + 1))
    np.testing.assert_allclose(
        ours.predict([x_enc, x_dec]), theirs.predict([x_enc, x_dec], verbose=0), **TOL
    )
    for model in (theirs, ours):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    before = ours.get_weights()
    hk = theirs.fit([x_enc, x_dec], y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    ho = ours.fit([x_enc, x_dec], y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    np.testing.assert_allclose(ho.history["loss"], hk.history["loss"], rtol=1e-4)
    # the encoder learns through the decoder's initial state
    assert not np.array_equal(before[0], ours.get_weights()[0])
    for a, b in zip(ours.get_weights(), _weights(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(
        ours.evaluate([x_enc, x_dec], y),
        theirs.evaluate([x_enc, x_dec], y, verbose=0),
        rtol=1e-4,
    )


@pytest.mark.parametrize(
    ("kind", "merge_mode", "count"),
    [
        ("LSTM", "concat", 5),
        ("GRU", "sum", 3),
        ("LSTM", None, 6),
        ("SimpleRNN", "ave", 3),
    ],
)
def test_bidirectional_return_state_outputs_match_keras(keras, rng, kind, merge_mode, count):
    def build(lib, make_model):
        inputs = lib.Input((T, D))
        layer = getattr(lib, kind)(H, return_state=True, return_sequences=True)
        outputs = lib.Bidirectional(layer, merge_mode=merge_mode)(inputs)
        return make_model(inputs, outputs)

    theirs, ours = build(keras.layers, keras.Model), build(rk, rk.Model)
    ours.set_weights(_weights(theirs))
    x = rng.standard_normal((N, T, D))
    got, expected = ours.predict(x), theirs.predict(x, verbose=0)
    assert len(got) == len(expected) == count
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, **TOL)


def test_initial_state_of_a_bidirectional_and_a_dense_head(keras, rng):
    def build(lib, make_model):
        inputs, h0 = lib.Input((T, D)), lib.Input((H,))
        seq = lib.Bidirectional(lib.GRU(H))(inputs, initial_state=[h0, h0])
        return make_model([inputs, h0], lib.Dense(1)(seq))

    theirs, ours = build(keras.layers, keras.Model), build(rk, rk.Model)
    ours.set_weights(_weights(theirs))
    x, h = rng.standard_normal((N, T, D)), rng.standard_normal((N, H))
    y = rng.standard_normal((N, 1))
    np.testing.assert_allclose(ours.predict([x, h]), theirs.predict([x, h], verbose=0), **TOL)
    for model in (theirs, ours):
        model.compile(optimizer="sgd", loss="mse")
    hk = theirs.fit([x, h], y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    ho = ours.fit([x, h], y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ho, hk, rtol=1e-4)


def test_summary_weights_and_a_layer_called_on_arrays(rng, capsys):
    inputs = rk.Input((None, D))
    outputs = rk.Dense(2)(rk.SimpleRNN(H)(inputs))
    model = rk.Model(inputs, outputs)
    model.summary()
    assert "Total params: 42" in capsys.readouterr().out  # 3*4 + 4*4 + 4, 4*2 + 2
    x = rng.standard_normal((2, T, D))
    direct = model.layers[1](model.layers[0](x))  # eager calls on NumPy arrays
    np.testing.assert_allclose(direct, model.predict(x), **TOL)
    twin = rk.Model(inputs, outputs)
    twin.set_weights(model.get_weights())


def test_what_is_not_supported_is_a_clear_error(rng):
    inputs = rk.Input((T, D))
    shared = rk.Dense(3)
    with pytest.raises(NotImplementedError, match="more than once"):
        rk.Model(inputs, shared(shared(inputs)))
    seq, h = rk.GRU(H, return_state=True)(inputs)
    model = rk.Model(inputs, [seq, h])
    model.compile(loss="mse")
    with pytest.raises(NotImplementedError, match="2 outputs"):
        model.fit(rng.standard_normal((N, T, D)), np.zeros((N, H)))
    assert [a.shape for a in model.predict(rng.standard_normal((N, T, D)))] == [(N, H), (N, H)]
    with pytest.raises(ValueError, match="initial_state"):
        rk.Model(inputs, rk.LSTM(H)(inputs, initial_state=[h]))
    with pytest.raises(ValueError, match="inputs"):
        rk.Model(inputs, rk.Dense(1)(rk.Input((T, D))))
    with pytest.raises(ValueError, match="2 inputs"):
        rk.Model([inputs, rk.Input((H,))], rk.LSTM(H)(inputs, initial_state=[h, h])).predict(
            np.zeros((N, T, D))
        )
