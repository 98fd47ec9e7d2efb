"""ONNX export and load of rnnfast.LSTM's ONNX forms (peepholes, input_forget, cell_clip): the
export writes the LSTM node's P, input_forget and clip, onnxruntime computes what rnnfast
computes, and the file loads back into the same layer."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

rx = rnnfast.io.onnx
D, H = 4, 6
CONFIGS = {
    "peepholes": {"peepholes": True},
    "input_forget": {"input_forget": True},
    "clip": {"cell_clip": 0.4},
    "all-stacked-bidirectional": {
        "peepholes": True,
        "input_forget": True,
        "cell_clip": 1.5,
        "num_layers": 2,
        "bidirectional": True,
    },
    "peepholes-go_backwards-batch_first": {
        "peepholes": True,
        "go_backwards": True,
        "batch_first": True,
        "cell_clip": 2.0,
    },
}


def _lstm(config):
    lstm = rnnfast.LSTM(D, H, seed=2, **config).eval()
    rng = np.random.default_rng(4)
    sd = lstm.state_dict()
    for k in sd:
        if "peephole" in k:
            sd[k] = rng.uniform(-1, 1, sd[k].shape).astype(np.float32)
    lstm.load_state_dict(sd)
    return lstm


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [a for part in result for a in _flat(part)]
    return [np.asarray(result)]


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_export_matches_onnxruntime_and_loads_back(config):
    lstm = _lstm(config)
    model = rx.export(lstm, None, lengths=True, h0=True)
    onnx.checker.check_model(model, full_check=True)
    nodes = [n for n in model.graph.node if n.op_type == "LSTM"]
    assert len(nodes) == lstm.num_layers
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    assert attrs.get("input_forget", 0) == int(lstm.input_forget)
    assert attrs.get("clip") == (None if lstm.cell_clip is None else pytest.approx(lstm.cell_clip))
    assert (len(nodes[0].input) > 7 and nodes[0].input[7] != "") == lstm.peepholes
    back = rx.load(model)
    assert (back.peepholes, back.input_forget) == (lstm.peepholes, lstm.input_forget)
    # ONNX's clip is a float32 attribute: the same threshold in the float32 kernels
    clip = None if lstm.cell_clip is None else np.float32(lstm.cell_clip)
    assert back.cell_clip == clip
    for name, value in lstm.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[name], value, err_msg=name)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    rng = np.random.default_rng(1)
    for steps, batch in ((5, 3), (1, 1), (7, 4)):
        shape = (batch, steps, D) if lstm.batch_first else (steps, batch, D)
        x = rng.standard_normal(shape).astype(np.float32)
        rows = lstm.num_layers * lstm.num_directions
        h0 = rng.standard_normal((rows, batch, H)).astype(np.float32)
        c0 = rng.standard_normal((rows, batch, H)).astype(np.float32)
        lengths = np.array([steps, max(1, steps // 2), 1, steps - 1][:batch], np.int64)
        lengths = np.maximum(lengths, 1)
        expected = lstm(x, (h0, c0), lengths=lengths)
        feeds = {"x": x, "h0": h0, "c0": c0, "lengths": lengths}
        got = session.run(None, {k: v for k, v in feeds.items() if k in names})
        for g, e in zip(_flat(got), _flat(expected), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
        for g, e in zip(_flat(back(x, (h0, c0), lengths=lengths)), _flat(expected), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
