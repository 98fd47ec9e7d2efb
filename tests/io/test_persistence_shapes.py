"""Loading checks every size in a config against the arrays it must match, before anything is
built (issue 43): each saved class reports its parameter shapes from a config without
allocating (the layer protocol's ``parameter_shapes``), and a size no array carries (a
dilation) has a documented bound."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import rnnfast
from rnnfast import nn
from rnnfast.nn._shapes import MAX_DILATION
from rnnfast.nn.files.persistence import layer_config

LAYERS = {
    "rnn": lambda: rnnfast.RNN(2, 3, num_layers=2, dilation=[1, 4], bidirectional=True),
    "rnn-input-to-all": lambda: rnnfast.RNN(2, 3, num_layers=3, input_to_all=True, bias=False),
    "gru": lambda: nn.GRU(2, 3, bias=False, reset_after=False),
    "lstm-proj": lambda: nn.LSTM(2, 3, proj_size=2, num_layers=2, bidirectional=True),
    "deep-transition": lambda: nn.DeepTransitionRNN(2, 3, transition_layers=3),
    "jordan": lambda: nn.JordanRNN(2, 3, 4),
    "jordan-no-bias": lambda: nn.JordanRNN(2, 3, 4, bias=False),
    "gru-cell": lambda: nn.GRUCell(2, 3),
    "lstm-cell": lambda: nn.LSTMCell(2, 3, bias=False),
    "linear": lambda: nn.Linear(3, 2, bias=False),
    "embedding": lambda: nn.Embedding(5, 2),
    "dropout": lambda: nn.Dropout(0.5),
    "seq2seq": lambda: nn.Seq2Seq(7, 6, embed_dim=3, hidden_size=4, cell="lstm", context="both"),
    "seq2seq-init": lambda: nn.Seq2Seq(7, 6, embed_dim=3, hidden_size=4),
    "sequential": lambda: rnnfast.Sequential(
        [nn.Embedding(5, 2), nn.LSTM(2, 3), nn.Dropout(0.1), nn.Linear(3, 2)]
    ),
}


def _config(layer):
    config = layer_config(layer)
    return config.pop("__class__", "RNN"), config


@pytest.mark.parametrize("name", list(LAYERS))
def test_parameter_shapes_are_the_built_layer_s(name):
    layer = LAYERS[name]()
    cls_name, config = _config(layer)
    assert type(layer).__name__ == cls_name
    expected = {k: v.shape for k, v in layer.state_dict().items()}
    assert type(layer).parameter_shapes(config) == expected


def test_a_class_that_does_not_say_returns_none():
    class Mine(nn.Layer):
        pass

    assert Mine.parameter_shapes({}) is None


def _edited(layer, edit):
    """``layer`` saved, its config edited by ``edit(config)``: the file's bytes."""
    buf = io.BytesIO()
    rnnfast.save(layer, buf)
    members = {}
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as archive:
        for info in archive.infolist():
            members[info.filename] = archive.read(info)
    key = "__rnnfast_config__.npy"
    config = json.loads(np.load(io.BytesIO(members[key])).tobytes())
    edit(config)
    out = io.BytesIO()
    np.save(out, np.frombuffer(json.dumps(config).encode(), dtype=np.uint8))
    members[key] = out.getvalue()
    result = io.BytesIO()
    with zipfile.ZipFile(result, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return io.BytesIO(result.getvalue())


def _never_built(monkeypatch, *classes):
    def refuse(cls, config):
        raise AssertionError(f"{cls.__name__} was built")

    for cls in classes:
        monkeypatch.setattr(cls, "from_config", classmethod(refuse))


@pytest.mark.parametrize(
    "edit, match",
    [
        # sizes within the largest array dimension (8), which the old bound let through
        (lambda c: c.update(hidden_size=4), r"weight_ih_l0: expected shape \(4, 8\)"),
        (lambda c: c.update(input_size=4), r"weight_ih_l0: expected shape \(8, 4\)"),
        (lambda c: c.update(num_layers=2), r"missing parameter"),
        (lambda c: c.update(bidirectional=True), r"missing parameter"),
        (lambda c: c.update(hidden_size=-1), r"config\['hidden_size'\]: expected an int >= 1"),
        (lambda c: c.update(hidden_size=2.5), r"config\['hidden_size'\]: expected an int"),
        (lambda c: c.update(dilation=2**40), r"config\['dilation'\]: expected an int in"),
        (lambda c: c.update(dilation=[1, 2]), r"2 layers|dilation"),
    ],
)
def test_a_config_that_disagrees_with_the_arrays_is_refused_before_building(
    edit, match, monkeypatch
):
    f = _edited(rnnfast.RNN(8, 8, seed=0), edit)
    _never_built(monkeypatch, rnnfast.RNN)
    with pytest.raises(ValueError, match=match):
        rnnfast.load(f)


def test_a_container_s_nested_config_is_checked_before_building(monkeypatch):
    model = rnnfast.Sequential([nn.Embedding(9, 4), nn.GRU(4, 4), nn.Linear(4, 9)])
    f = _edited(model, lambda c: c["layers"][1].update(hidden_size=8))
    _never_built(monkeypatch, rnnfast.Sequential, nn.GRU, nn.Embedding, nn.Linear)
    with pytest.raises(ValueError, match=r"1\.weight_ih_l0: expected shape \(24, 4\)"):
        rnnfast.load(f)


def test_a_quantized_copy_s_weights_are_checked_before_building(monkeypatch):
    layer = rnnfast.quantize(rnnfast.RNN(8, 8, seed=0), "int8")
    f = _edited(layer, lambda c: c.update(hidden_size=4))
    _never_built(monkeypatch, rnnfast.RNN)
    with pytest.raises(ValueError, match=r"weight_ih_l0: expected shape \(4, 8\)"):
        rnnfast.load(f)


def test_the_dilation_bound(tmp_path):
    """A dilation is at most MAX_DILATION = 2**31 (its cost is the call's, nn.recurrent.dilation): the
    bound loads and runs; one past it is refused at construction, naming the fix."""
    assert MAX_DILATION == 2**31
    layer = rnnfast.RNN(2, 3, dilation=MAX_DILATION, stateful=True, seed=0)
    layer.save(tmp_path / "d.npz")
    loaded = rnnfast.load(tmp_path / "d.npz").eval()
    x = np.ones((4, 1, 2), dtype=np.float32)
    y, _ = loaded(x)
    np.testing.assert_array_equal(y, rnnfast.RNN(2, 3, dilation=4, seed=0).eval()(x)[0])
    assert loaded.state[0].shape == (5, 1, 3)  # the initial state and 4 steps, not 2**31
    with pytest.raises(ValueError, match=r"dilation: expected an int in \[1, 2147483648\]"):
        rnnfast.RNN(2, 3, dilation=MAX_DILATION + 1)
    f = _edited(rnnfast.RNN(2, 3), lambda c: c.update(dilation=MAX_DILATION + 1))
    with pytest.raises(ValueError, match=r"config\['dilation'\]"):
        rnnfast.load(f)
