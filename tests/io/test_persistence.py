"""rnnfast.persistence: save / load round trips, damaged files, and the summary's counts."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES

import rnnfast
from rnnfast import persistence

T, B, D, H = 5, 2, 4, 6


def _arrays(path):
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _write(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _config_array(config):
    return np.frombuffer(json.dumps(config).encode("utf-8"), dtype=np.uint8)


@pytest.fixture
def saved(tmp_path):
    """A saved float64 layer: (layer, path)."""
    layer = rnnfast.RNN(D, H, dtype=np.float64, seed=5)
    path = tmp_path / "layer.npz"
    persistence.save(layer, path)
    return layer, path


# ---- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arch", [(1, False), (2, False), (2, True)], ids=["1layer", "2layers", "2layers-bidir"]
)
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip(tmp_path, dtype, nonlinearity, bias, batch_first, arch, rng):
    num_layers, bidirectional = arch
    layer = rnnfast.RNN(
        input_size=D,
        hidden_size=H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        bias=bias,
        batch_first=batch_first,
        bidirectional=bidirectional,
        dtype=dtype,
        seed=7,
    )
    path = tmp_path / "rnn.npz"
    persistence.save(layer, path)
    loaded = persistence.load(path)

    assert type(loaded) is rnnfast.RNN and loaded is not layer
    assert persistence.layer_config(loaded) == persistence.layer_config(layer)
    sd, sd_loaded = layer.state_dict(), loaded.state_dict()
    assert list(sd_loaded) == list(sd)
    for k in sd:
        assert sd_loaded[k].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(sd_loaded[k], sd[k])
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D)).astype(dtype)
    for a, b in zip(layer.eval()(x), loaded.eval()(x)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "options",
    [
        {"go_backwards": True, "return_sequences": False},
        {"bidirectional": True, "merge_mode": "ave", "return_state": True},
        {"num_layers": 3, "residual": True, "alpha": [1.0, 0.5, 0.25], "dropout": 0.2},
        {"stateful": True, "seed": 11},
    ],
    ids=["go_backwards", "merge_mode", "residual-alpha", "stateful"],
)
def test_round_trip_keeps_keras_options(tmp_path, options, rng):
    layer = rnnfast.RNN(input_size=D, hidden_size=D, dtype=np.float64, **options)
    persistence.save(layer, tmp_path / "rnn.npz")
    loaded = persistence.load(tmp_path / "rnn.npz")
    assert persistence.layer_config(loaded) == persistence.layer_config(layer)
    for name, value in options.items():
        assert getattr(loaded, name) == value, name
    x = rng.standard_normal((T, B, D))
    out, out_loaded = layer.eval()(x), loaded.eval()(x)
    out = out if isinstance(out, tuple) else (out,)
    out_loaded = out_loaded if isinstance(out_loaded, tuple) else (out_loaded,)
    for a, b in zip(out, out_loaded):
        np.testing.assert_array_equal(a, b)


def test_summary_keras_options():
    layer = rnnfast.RNN(
        input_size=3,
        hidden_size=4,
        bidirectional=True,
        merge_mode="sum",
        return_sequences=False,
        batch_first=True,
    )
    row = next(ln for ln in persistence.summary_text(layer).splitlines() if "rnn_l0" in ln)
    assert "(B, 4)" in row and "Bidirectional" in row


def test_file_is_plain_numpy(saved):
    layer, path = saved
    arrays = _arrays(path)  # allow_pickle=False: nothing in it needs pickle
    assert int(arrays["__rnnfast_format__"]) == persistence.FORMAT_VERSION
    config = json.loads(arrays["__rnnfast_config__"].tobytes().decode("utf-8"))
    assert config == persistence.layer_config(layer)
    assert config["dtype"] == "float64"
    assert set(arrays) == {"__rnnfast_format__", "__rnnfast_config__", *layer.state_dict()}


def test_path_is_used_as_given_and_file_objects_work(tmp_path, rng):
    layer = rnnfast.RNN(D, H, seed=1)
    path = tmp_path / "no_extension"
    persistence.save(layer, str(path))
    assert os.listdir(tmp_path) == ["no_extension"]  # no .npz appended, no temporary left
    buffer = io.BytesIO()
    persistence.save(layer, buffer)
    buffer.seek(0)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    for loaded in (persistence.load(str(path)), persistence.load(buffer)):
        np.testing.assert_array_equal(loaded(x)[0], layer(x)[0])


def test_save_overwrites_atomically(tmp_path, monkeypatch):
    path = tmp_path / "rnn.npz"
    persistence.save(rnnfast.RNN(D, H, seed=1), path)
    original = path.read_bytes()

    def broken_savez(f, **arrays):
        f.write(b"PK half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        persistence.save(rnnfast.RNN(D, H, seed=2), path)
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["rnn.npz"]


def test_save_rejects_a_config_json_cannot_hold(tmp_path):
    class Odd(rnnfast.RNN):
        def get_config(self):
            return {"input_size": D, "hidden_size": H, "dtype": "float32", "extra": object()}

    with pytest.raises(TypeError, match="extra"):
        persistence.save(Odd(D, H), tmp_path / "odd.npz")
    assert not os.listdir(tmp_path)


def test_load_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        persistence.load(tmp_path / "nothing.npz")


# ---- damaged files: ValueError, nothing returned, the file untouched -----------------------------


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 0.99])
def test_truncated_file(saved, tmp_path, fraction):
    _, path = saved
    data = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        persistence.load(cut)


def test_random_bytes(tmp_path, rng):
    path = tmp_path / "noise.npz"
    path.write_bytes(rng.integers(0, 256, size=4096, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match="truncated or corrupt"):
        persistence.load(path)


def test_corrupted_member(saved, tmp_path):
    _, path = saved
    data = bytearray(path.read_bytes())
    offset = data.find(b"weight_hh_l0.npy") + 200  # inside that member's array data
    data[offset : offset + 8] = b"\xff" * 8
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="truncated or corrupt"):
        persistence.load(bad)


def test_single_npy_array(tmp_path):
    path = tmp_path / "array.npy"
    np.save(path, np.zeros(3))
    with pytest.raises(ValueError, match="not an .npz"):
        persistence.load(path)


def _damaged(saved, tmp_path, change):
    _, path = saved
    arrays = _arrays(path)
    change(arrays)
    return _write(tmp_path / "damaged.npz", arrays)


def _config(arrays):
    return json.loads(arrays["__rnnfast_config__"].tobytes().decode("utf-8"))


def _set_config(arrays, **kw):
    arrays["__rnnfast_config__"] = _config_array({**_config(arrays), **kw})


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda a: a.pop("__rnnfast_config__"), "no '__rnnfast_config__'"),
        (lambda a: a.pop("__rnnfast_format__"), "no '__rnnfast_format__'"),
        (lambda a: a.update(__rnnfast_format__=np.array(2)), "format version 2 .*newer"),
        (lambda a: a.update(__rnnfast_format__=np.array(0)), "format version 0"),
        (lambda a: a.update(__rnnfast_format__=np.array([1])), "integer scalar"),
        (lambda a: a.update(__rnnfast_format__=np.array(1.0)), "integer scalar"),
        (lambda a: a.update(__rnnfast_config__=np.frombuffer(b"{not json", np.uint8)), "JSON"),
        (lambda a: a.update(__rnnfast_config__=np.frombuffer(b"\xff\xfe", np.uint8)), "UTF-8"),
        (lambda a: a.update(__rnnfast_config__=_config_array([1, 2])), "JSON object"),
        (lambda a: a.update(__rnnfast_config__=np.array(["{}"])), "uint8"),
        (lambda a: _set_config(a, no_such_argument=1), "does not build a layer"),
        (lambda a: _set_config(a, hidden_size=-1), "does not build a layer"),
        (lambda a: _set_config(a, hidden_size=H - 1), "weight_ih_l0: expected shape"),
        (lambda a: _set_config(a, bias=False), r"unexpected entr.*bias_ih_l0"),
        (lambda a: _set_config(a, dtype="float32"), "expected dtype float32"),
        (lambda a: a.pop("weight_hh_l0"), r"missing parameter.*weight_hh_l0"),
        (lambda a: a.update(weight_hh_l1=a["weight_hh_l0"]), r"unexpected entr.*weight_hh_l1"),
        (lambda a: a.update(weight_ih_l0=a["weight_ih_l0"].T), r"weight_ih_l0: expected shape"),
        (lambda a: a.update(bias_hh_l0=a["bias_hh_l0"][:-1]), r"bias_hh_l0: expected shape"),
        (lambda a: a.update(weight_hh_l0=a["weight_hh_l0"].astype(np.float32)), "expected dtype"),
    ],
    ids=[
        "no-config",
        "no-version",
        "newer-version",
        "version-0",
        "version-vector",
        "version-float",
        "bad-json",
        "bad-utf8",
        "config-list",
        "config-str-array",
        "unknown-argument",
        "bad-argument",
        "shapes-disagree-with-config",
        "bias-off",
        "dtype-disagrees",
        "missing-key",
        "extra-key",
        "transposed",
        "short-bias",
        "param-dtype",
    ],
)
def test_damaged_contents(saved, tmp_path, change, match):
    path = _damaged(saved, tmp_path, change)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=match):
        persistence.load(path)
    assert path.read_bytes() == before


# ---- summary ------------------------------------------------------------------------------------


def _count(text, label):
    line = next(ln for ln in text.splitlines() if ln.startswith(label))
    return int(line.split(":")[1].split()[0].replace(",", ""))


@pytest.mark.parametrize(
    "d, h, keras", [(1, 50, 2600), (50, 100, 15100), (8, 64, 4672), (64, 32, 3104)]
)
def test_summary_counts_match_keras(d, h, keras):
    text = persistence.summary_text(rnnfast.RNN(input_size=d, hidden_size=h))
    assert d * h + h * h + h == keras
    assert _count(text, "Total params") == keras
    assert _count(text, "PyTorch layout") == keras + h  # the second bias vector
    rows = [ln for ln in text.splitlines() if "rnn_l" in ln]
    assert len(rows) == 1 and rows[0].split()[-1] == f"{keras:,}"
    assert "Layer (type)" in text and "Output Shape" in text and "Param #" in text


def test_summary_without_bias():
    text = persistence.summary_text(rnnfast.RNN(input_size=3, hidden_size=5, bias=False))
    assert _count(text, "Total params") == 3 * 5 + 5 * 5
    assert _count(text, "PyTorch layout") == 3 * 5 + 5 * 5


def test_summary_bidirectional_stack():
    # Keras: Bidirectional(SimpleRNN(50)) on 1 feature = 2 x 2,600; then on 100 features
    # = 2 x (100*50 + 50*50 + 50) = 15,100
    layer = rnnfast.RNN(input_size=1, hidden_size=50, num_layers=2, bidirectional=True)
    text = persistence.summary_text(layer)
    rows = [ln for ln in text.splitlines() if "rnn_l" in ln]
    assert [r.split()[-1] for r in rows] == ["5,200", "15,100"]
    assert all("100)" in r for r in rows)  # two directions concatenated
    assert _count(text, "Total params") == 20300
    assert _count(text, "PyTorch layout") == 20300 + 4 * 50


def test_summary_output_shape_follows_batch_first():
    assert "(B, T, 7)" in persistence.summary_text(rnnfast.RNN(3, 7, batch_first=True))
    assert "(T, B, 7)" in persistence.summary_text(rnnfast.RNN(3, 7))


@pytest.mark.parametrize("damage", ["encrypted flag", "unknown compression", "zip version"])
def test_damaged_zip_entries_are_value_errors(damage):
    """Found by fuzzing: zipfile raises RuntimeError / NotImplementedError for these."""
    buffer = io.BytesIO()
    rnnfast.save(rnnfast.RNN(3, 4), buffer)
    data = bytearray(buffer.getvalue())
    cd = data.find(b"PK\x01\x02")  # the first central-directory entry
    if damage == "encrypted flag":
        data[cd + 8] |= 1
    elif damage == "unknown compression":
        data[cd + 10 : cd + 12] = (99).to_bytes(2, "little")
    else:
        data[cd + 6 : cd + 8] = (254).to_bytes(2, "little")
    with pytest.raises(ValueError, match="not a readable rnnfast file"):
        rnnfast.load(io.BytesIO(bytes(data)))
