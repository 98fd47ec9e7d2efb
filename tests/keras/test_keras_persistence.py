"""rnnfast.keras's files beside Keras 3's: model.save / load_model in the .keras format (each
side reads the other's file and predicts the same), save_weights / load_weights in
.weights.h5 (Keras's suffix rule, its layout), a compiled model that goes on training after
loading, get_layer, and ONNX export of a front model checked with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
import rnnfast.keras as rk

N, T, D, H, K = 24, 5, 3, 4, 3
pytestmark = pytest.mark.filterwarnings(
    # Keras 3 on the torch backend hands NumPy a tensor whose __array__ predates NumPy 2
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)


def _weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def _ours():
    return rk.Sequential(
        [
            rk.Input((T, D)),
            rk.LSTM(H, return_sequences=True),
            rk.Bidirectional(rk.GRU(H)),
            rk.Dropout(0.2),
            rk.Dense(K, activation="softmax"),
        ]
    )


def _theirs(keras):
    return keras.Sequential(
        [
            keras.Input((T, D)),
            keras.layers.LSTM(H, return_sequences=True),
            keras.layers.Bidirectional(keras.layers.GRU(H)),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(K, activation="softmax"),
        ]
    )


@pytest.fixture
def data(rng):
    x = rng.standard_normal((N, T, D)).astype(np.float32)
    return x, rng.integers(0, K, N)


def test_save_and_load_model_round_trip_compiled(tmp_path, data):
    x, y = data
    model = _ours()
    model.compile(
        optimizer=rk.optimizers.Adam(0.01, clipnorm=1.0),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    path = tmp_path / "m.keras"
    model.save(path)
    again = rk.models.load_model(path)
    assert rk.load_model is rk.models.load_model
    np.testing.assert_array_equal(again.predict(x), model.predict(x))
    assert [layer.name for layer in again.layers] == [layer.name for layer in model.layers]
    # compiled as saved: the same optimizer settings, loss and metrics; fit and evaluate at once
    assert again.evaluate(x, y) == pytest.approx(model.evaluate(x, y), rel=1e-6)
    history = again.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
    assert set(history.history) == {"loss", "accuracy"}
    assert again._compiled[0].clipnorm == 1.0 and again._compiled[0].learning_rate == 0.01


def test_keras_loads_our_file_and_we_load_keras_file(keras, tmp_path, data):
    x, _ = data
    ours = _ours()
    ours.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ours.save(tmp_path / "ours.keras")
    # Keras builds its optimizer when it loads a compiled model and finds the file's optimizer
    # without moments (the front keeps rnnfast's, which Keras cannot read): it says so, and
    # starts the optimizer afresh, as the front does
    with pytest.warns(UserWarning, match="Skipping variable loading for optimizer"):
        theirs = keras.models.load_model(tmp_path / "ours.keras")
    np.testing.assert_allclose(theirs.predict(x, verbose=0), ours.predict(x), rtol=1e-5, atol=1e-6)

    keras_model = _theirs(keras)
    keras_model.save(tmp_path / "theirs.keras")
    loaded = rk.models.load_model(tmp_path / "theirs.keras")
    np.testing.assert_allclose(
        loaded.predict(x), keras_model.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )
    assert isinstance(loaded.get_layer(keras_model.layers[1].name), rk.Bidirectional)


def test_keras_file_with_embedding_and_compile_config(keras, tmp_path, rng):
    theirs = keras.Sequential(
        [
            keras.Input((T,)),
            keras.layers.Embedding(10, D, mask_zero=True),
            keras.layers.SimpleRNN(H),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    theirs.compile(
        optimizer=keras.optimizers.RMSprop(0.005, clipvalue=0.5),
        loss=keras.losses.BinaryCrossentropy(label_smoothing=0.1),
        metrics=[keras.metrics.BinaryAccuracy()],
    )
    theirs.save(tmp_path / "e.keras")
    ours = rk.load_model(tmp_path / "e.keras")
    x = rng.integers(0, 10, (N, T))
    x[:, -2:] = 0
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    spec, loss, metrics = ours._compiled
    assert type(spec).__name__ == "RMSprop" and spec.clipvalue == 0.5
    assert loss["class_name"] == "BinaryCrossentropy"
    y = rng.integers(0, 2, N).astype(np.float32)
    np.testing.assert_allclose(
        ours.evaluate(x, y, return_dict=True)["loss"],
        theirs.evaluate(x, y, verbose=0, return_dict=True)["loss"],
        rtol=1e-5,
    )


def test_save_weights_follows_keras_suffix_and_layout(keras, tmp_path, data):
    x, _ = data
    ours = _ours()
    with pytest.raises(ValueError, match=r"must end in `\.weights\.h5`"):
        ours.save_weights(tmp_path / "w.h5")
    ours.save_weights(tmp_path / "w.weights.h5")
    theirs = _theirs(keras)
    theirs.load_weights(tmp_path / "w.weights.h5")
    np.testing.assert_allclose(theirs.predict(x, verbose=0), ours.predict(x), rtol=1e-5, atol=1e-6)
    # and back: Keras's weights file into a fresh front model
    theirs.save_weights(tmp_path / "k.weights.h5")
    fresh = _ours()
    fresh.load_weights(tmp_path / "k.weights.h5")
    for a, b in zip(fresh.get_weights(), _weights(theirs)):
        np.testing.assert_array_equal(a, b)
    fresh.load_weights(tmp_path / "w.weights.h5")  # ...and from our own file
    np.testing.assert_array_equal(fresh.predict(x), ours.predict(x))


def test_bad_paths_and_files_are_refused(tmp_path, data):
    model = _ours()
    with pytest.raises(ValueError, match=r"\.keras extension"):
        model.save(tmp_path / "m.zip")
    with pytest.raises(NotImplementedError, match="legacy HDF5"):
        model.save(tmp_path / "m.h5")
    model.save(tmp_path / "m.keras")
    with pytest.raises(FileExistsError, match="overwrite=False"):
        model.save(tmp_path / "m.keras", overwrite=False)
    other = rk.Sequential([rk.Input((T, D)), rk.SimpleRNN(H, name="other"), rk.Dense(1)])
    with pytest.raises(ValueError, match="no weights for SimpleRNN 'other'"):
        other.load_weights(tmp_path / "m.keras")
    with pytest.raises(ValueError, match=r"\.weights\.h5 or \.keras"):
        other.load_weights(tmp_path / "m.npz")
    with pytest.raises(NotImplementedError, match="skip_mismatch"):
        other.load_weights(tmp_path / "m.keras", skip_mismatch=True)
    with pytest.raises(NotImplementedError, match="custom_objects"):
        rk.load_model(tmp_path / "m.keras", custom_objects={"a": 1})


def test_get_layer_by_name_and_index():
    model = _ours()
    assert model.get_layer("lstm") is model.layers[0]
    assert model.get_layer(index=-1) is model.layers[-1]
    with pytest.raises(ValueError, match="no layer named 'nope'"):
        model.get_layer("nope")
    with pytest.raises(ValueError, match="out of range"):
        model.get_layer(index=4)
    with pytest.raises(ValueError, match="a name or an index"):
        model.get_layer()


def test_onnx_export_of_a_front_model_matches_predict(tmp_path, data):
    ort = pytest.importorskip("onnxruntime")
    x, _ = data
    model = rk.Sequential(
        [
            rk.Input((T, D)),
            rk.LSTM(H, return_sequences=True),
            rk.GRU(H),
            rk.Dense(K, activation="softmax"),
        ]
    )
    rnnfast.onnx.export(model, tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    (out,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(out, model.predict(x), rtol=1e-5, atol=1e-6)
