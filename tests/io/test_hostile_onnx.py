"""rnnfast.onnx.load on hostile ONNX files: each is refused with a ValueError (OnnxLoadError
for a graph it cannot read) before any tensor larger than the file is made (issue 27)."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

import rnnfast

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rnnfast.onnx  # noqa: E402


@pytest.fixture
def model():
    return rnnfast.onnx.export(rnnfast.RNN(2, 3, seed=0).eval(), None)


def _load(tmp_path, model, match, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString() if hasattr(model, "SerializeToString") else model)
    with pytest.raises(ValueError, match=match):
        rnnfast.onnx.load(path)


def _init(model, prefix):
    return next(t for t in model.graph.initializer if f".{prefix}_" in t.name)


def _rnn_node(model):
    return next(n for n in model.graph.node if n.op_type == "RNN")


def test_random_bytes_name_the_file(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, 400, dtype=np.uint8).tobytes()
    _load(tmp_path, b"\x0a\xff\xff\xff\xff\x0f" + data, r"m\.onnx'.*not an ONNX model")


def test_random_bytes_from_a_file_object():
    with pytest.raises(ValueError, match="not an ONNX model"):
        rnnfast.onnx.load(io.BytesIO(b"\x0a\xff\xff\xff\xff\x0f\x00"))


def test_raw_data_shorter_than_dims(tmp_path, model):
    w = _init(model, "W")
    w.raw_data = w.raw_data[:-4]
    _load(tmp_path, model, "need 24 bytes of data, the file holds 20")


def test_dims_claiming_2_to_the_40_elements(tmp_path, model):
    w = _init(model, "W")
    w.dims[0] = 1 << 40
    _load(tmp_path, model, "need 26,388,279,066,624 bytes")


def test_typed_data_count_disagrees_with_dims(tmp_path, model):
    w = _init(model, "W")
    values = numpy_helper.to_array(w).reshape(-1).tolist()
    w.ClearField("raw_data")
    w.float_data.extend(values[:-1])
    _load(tmp_path, model, "need 6 values of data, the file holds 5")


def test_string_tensor(tmp_path, model):
    w = _init(model, "W")
    w.data_type = TensorProto.STRING
    _load(tmp_path, model, "not a numeric ONNX type")


def test_hidden_size_disagrees_with_initialisers(tmp_path, model):
    node = _rnn_node(model)
    for attr in node.attribute:
        if attr.name == "hidden_size":
            attr.i = 4
    _load(tmp_path, model, "W, R and hidden_size disagree")


def test_recurrent_weight_disagrees_with_input_weight(tmp_path, model):
    r = _init(model, "R")
    r.CopyFrom(numpy_helper.from_array(np.zeros((1, 4, 4), np.float32), r.name))
    _load(tmp_path, model, "W, R and hidden_size disagree")


def _external(model, tmp_path, location, offset="0", length=None):
    w = _init(model, "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    return model


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd"])
def test_external_data_outside_the_folder(tmp_path, model, location):
    folder = tmp_path / "models"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 24)
    _load(folder, _external(model, tmp_path, location), "not a file inside the model's folder")


def test_external_data_through_a_link_out_of_the_folder(tmp_path, model):
    folder = tmp_path / "models"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 24)
    os.symlink(tmp_path / "secret.bin", folder / "w.bin")
    _load(folder, _external(model, tmp_path, "w.bin"), "not a file inside the model's folder")


def test_external_data_shorter_than_the_tensor(tmp_path, model):
    (tmp_path / "w.bin").write_bytes(b"\0" * 20)
    _load(tmp_path, _external(model, tmp_path, "w.bin"), "need 24 bytes at offset 0")


def test_external_data_offset_past_the_end(tmp_path, model):
    (tmp_path / "w.bin").write_bytes(b"\0" * 24)
    _load(tmp_path, _external(model, tmp_path, "w.bin", offset="8"), "need 24 bytes at offset 8")


def test_external_data_in_a_model_object_is_refused(tmp_path, model):
    with pytest.raises(ValueError, match="not read from a path"):
        rnnfast.onnx.load(_external(model, tmp_path, "w.bin"))


def test_external_data_inside_the_folder_loads(tmp_path, model):
    expected = rnnfast.onnx.load(model)
    weight = numpy_helper.to_array(_init(model, "W"))
    (tmp_path / "w.bin").write_bytes(b"\0" * 8 + weight.tobytes())
    loaded = _external(model, tmp_path, "w.bin", offset="8", length=str(weight.nbytes))
    path = tmp_path / "m.onnx"
    path.write_bytes(loaded.SerializeToString())
    got = rnnfast.onnx.load(path)
    for name, value in expected.state_dict().items():
        assert np.array_equal(got.state_dict()[name], value), name


def test_constant_of_shape_growing_past_the_file(tmp_path, model):
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "big_shape")
    model.graph.initializer.append(shape)
    model.graph.node.insert(0, helper.make_node("ConstantOfShape", ["big_shape"], ["zeros"]))
    _load(tmp_path, model, "ConstantOfShape of constants to 1,099,511,627,776 values")


def test_op_on_constants_that_is_not_glue(tmp_path, model):
    model.graph.node.insert(0, helper.make_node("Loop", [], ["z"]))
    _load(tmp_path, model, "does not compute Loop of constants")


def test_subgraph_attribute(tmp_path, model):
    body = helper.make_graph([], "body", [], [])
    model.graph.node.insert(0, helper.make_node("If", ["c"], ["z"], then_branch=body))
    _load(tmp_path, model, "holds a subgraph")


def test_node_attribute_of_the_wrong_type(tmp_path, model):
    node = _rnn_node(model)
    for attr in node.attribute:
        if attr.name == "direction":
            attr.type, attr.i = onnx.AttributeProto.INT, 3
            attr.ClearField("s")
    _load(tmp_path, model, "direction 3: expected forward, reverse or bidirectional")
