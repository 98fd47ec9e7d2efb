"""rnnfast.onnx.load sizes every layer from its W (issue 43): hidden_size, R and B must agree
with it, and a disagreement names the expected and the received values and the fix; no
attribute sizes an allocation by itself (a hidden_size of 2**40 is refused, not built)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

import rnnfast.onnx  # noqa: E402


def _model(cell):
    layer = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}[cell](2, 3, seed=0)
    return rnnfast.onnx.export(layer.eval(), None)


def _node(model):
    return next(n for n in model.graph.node if n.op_type in ("RNN", "GRU", "LSTM"))


def _init(model, prefix):
    return next(t for t in model.graph.initializer if f".{prefix}_" in t.name)


def _load(tmp_path, model, match):
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ValueError, match=match):
        rnnfast.onnx.load(path)


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("gru", 3), ("lstm", 4)])
@pytest.mark.parametrize("hidden", [0, 4, 2**31, 2**40])
def test_hidden_size_against_w_names_both(cell, gates, hidden, tmp_path):
    model = _model(cell)
    for attr in _node(model).attribute:
        if attr.name == "hidden_size":
            attr.i = hidden
    _load(
        tmp_path,
        model,
        rf"W \(1, {3 * gates}, 2\) gives hidden_size = {3 * gates} / {gates} = 3 .* got "
        rf"hidden_size={hidden} .* export the model again",
    )


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("gru", 3), ("lstm", 4)])
def test_r_against_w_names_both(cell, gates, tmp_path):
    model = _model(cell)
    r = _init(model, "R")
    r.CopyFrom(numpy_helper.from_array(np.zeros((1, 4 * gates, 4), np.float32), r.name))
    _load(tmp_path, model, rf"R of shape \(1, {3 * gates}, 3\), got .* \(1, {4 * gates}, 4\)")


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("gru", 3), ("lstm", 4)])
def test_b_against_w_names_both(cell, gates, tmp_path):
    model = _model(cell)
    b = _init(model, "B")
    b.CopyFrom(numpy_helper.from_array(np.zeros((1, 2 * gates * 3 + 2), np.float32), b.name))
    _load(tmp_path, model, rf"B has shape \(1, {6 * gates + 2}\), expected \(1, {6 * gates}\)")
