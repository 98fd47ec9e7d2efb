"""The Keras front's layers describe their own configs (issue 38): every argument a layer
takes round-trips through get_config / from_config and a .keras file, an unknown key is
refused by name; Embedding's embeddings_initializer and weights= as Keras 3 means them; and a
.keras file's sizes are checked against its arrays before anything is built (issue 43)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import rnnfast.keras as rk

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)


def _model():
    return rk.Sequential(
        [
            rk.Input((4, 3)),
            rk.LSTM(
                5,
                unroll=True,
                implementation=1,
                use_cudnn=False,
                zero_output_for_mask=True,
                return_sequences=True,
                kernel_initializer="he_normal",
                recurrent_initializer="glorot_uniform",
                bias_initializer="ones",
            ),
            rk.GRU(4, reset_after=False, implementation=0, use_cudnn=False, unroll=True),
            rk.Dense(2, kernel_initializer="zeros"),
        ]
    )


def _edit(path, edit):
    """``path`` (a .keras file) with its config.json edited by ``edit(config)``."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(members["config.json"])
    edit(config)
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_every_argument_round_trips_through_a_file(tmp_path, rng):
    model = _model()
    model.save(tmp_path / "m.keras")
    again = rk.load_model(tmp_path / "m.keras")
    for a, b in zip(model.layers, again.layers):
        assert a.get_config() == b.get_config()
    lstm = again.layers[0]
    assert lstm.unroll and lstm.implementation == 1 and lstm.use_cudnn is False
    assert lstm.zero_output_for_mask and lstm.kernel_initializer == "he_normal"
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_array_equal(again.predict(x), model.predict(x))


def test_get_config_from_config_of_each_layer_class():
    layers = [
        rk.SimpleRNN(3, unroll=True, bias_initializer="ones"),
        rk.Bidirectional(rk.LSTM(2, use_cudnn=False), merge_mode="sum"),
        rk.Embedding(7, 3, embeddings_initializer="zeros", mask_zero=True),
        rk.TimeDistributed(rk.Dense(2)),
        rk.Masking(1.5),
        rk.Dropout(0.5, seed=3),
    ]
    for layer in layers:
        copy = type(layer).from_config(layer.get_config())
        assert copy.get_config() == layer.get_config()


def test_an_unknown_key_is_refused_by_name(tmp_path):
    path = tmp_path / "m.keras"
    _model().save(path)
    _edit(path, lambda c: c["config"]["layers"][1]["config"].update(frobnicate=1))
    with pytest.raises(ValueError, match=r"layers\[1\] \(LSTM 'lstm'\).*\['frobnicate'\]"):
        rk.load_model(path)
    with pytest.raises(ValueError, match="Unrecognized keyword arguments.*frobnicate"):
        rk.LSTM.from_config({**rk.LSTM(2).get_config(), "frobnicate": 1})


def test_sizes_are_checked_against_the_arrays_before_building(tmp_path):
    path = tmp_path / "m.keras"
    _model().save(path)
    _edit(path, lambda c: c["config"]["layers"][1]["config"].update(units=2**40))
    with pytest.raises(ValueError, match=r"'layers/lstm/cell/vars/0' has shape \(3, 20\).*"):
        rk.load_model(path)
    _model().save(path)
    _edit(path, lambda c: c["config"]["layers"][0]["config"].update(batch_shape=[2**40, 4, 3]))
    with pytest.raises(ValueError, match=r"batch_shape\[0\]: expected null or an int in"):
        rk.load_model(path)
    _model().save(path)
    _edit(path, lambda c: c["config"]["layers"][3]["config"].update(units="x"))
    with pytest.raises(ValueError, match=r"layers\[3\] \(Dense 'dense'\): units"):
        rk.load_model(path)


def test_a_dataset_the_file_does_not_store_is_refused(tmp_path):
    """HDF5 reads unwritten data as zeros: a file may declare a huge dataset in a few bytes.
    With units and the dataset both 2**20, nothing may be allocated by them."""
    import io

    import h5py

    model = rk.Sequential([rk.Input((4, 3)), rk.Dense(2)])
    path = tmp_path / "m.keras"
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    buffer = io.BytesIO(members["model.weights.h5"])
    with h5py.File(buffer, "r+") as handle:
        del handle["layers/dense/vars/0"], handle["layers/dense/vars/1"]
        handle.create_dataset("layers/dense/vars/0", shape=(3, 2**30), dtype="f4", chunks=True)
        handle.create_dataset("layers/dense/vars/1", shape=(2**30,), dtype="f4", chunks=True)
    members["model.weights.h5"] = buffer.getvalue()
    config = json.loads(members["config.json"])
    config["config"]["layers"][1]["config"]["units"] = 2**30
    members["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match=r"claims \d+ bytes of shape \(3, 1073741824\)"):
        rk.load_model(path)


def test_embedding_initializer_and_weights_as_keras(keras, rng):
    table = rng.standard_normal((6, 3)).astype(np.float32)
    ids = np.array([[1, 2, 5, 0]])
    for weights in (table, [table]):
        ours = rk.Embedding(6, 3, weights=weights)
        theirs = keras.layers.Embedding(6, 3, weights=weights)
        np.testing.assert_allclose(
            ours(ids), keras.ops.convert_to_numpy(theirs(ids)), rtol=0, atol=0
        )
    with pytest.raises(ValueError, match=r"weights: .*expected .*\(6, 3\), got shape \(5, 3\)"):
        rk.Embedding(6, 3, weights=table[:5])
    ours = rk.Embedding(6, 3, embeddings_initializer=keras.initializers.Constant(0.25))
    theirs = keras.layers.Embedding(6, 3, embeddings_initializer=keras.initializers.Constant(0.25))
    np.testing.assert_array_equal(ours(ids), keras.ops.convert_to_numpy(theirs(ids)))
    assert rk.Embedding(6, 3, embeddings_initializer="zeros")(ids).sum() == 0
    with pytest.raises(ValueError, match="embeddings_initializer: expected one of"):
        rk.Embedding(6, 3, embeddings_initializer="nope")


def test_keras_reads_the_front_file_with_the_new_arguments(keras, tmp_path, rng):
    model = _model()
    model.save(tmp_path / "m.keras")
    theirs = keras.models.load_model(tmp_path / "m.keras")
    assert theirs.layers[0].unroll and theirs.layers[0].zero_output_for_mask
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(theirs.predict(x, verbose=0), model.predict(x), atol=1e-5)
    # and a Keras Embedding with an initializer object round-trips into the front
    k = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Embedding(6, 3, embeddings_initializer=keras.initializers.Constant(0.5)),
            keras.layers.SimpleRNN(2, unroll=True),
        ]
    )
    k.save(tmp_path / "k.keras")
    ours = rk.load_model(tmp_path / "k.keras")
    assert ours.layers[0].embeddings_initializer["class_name"] == "Constant"
    ids = rng.integers(1, 6, (2, 4))
    np.testing.assert_allclose(ours.predict(ids), k.predict(ids, verbose=0), atol=1e-6)
