"""rnnfast.io.onnx for the gated layers: GRU and LSTM export as the ONNX GRU / LSTM ops and
onnxruntime computes what rnnfast computes (both GRU forms, both directions, stacked, lengths,
initial states, batch_first, Keras's forms and activations); load reads them back, and reads
what both torch.onnx exporters write for nn.GRU / nn.LSTM (with nn.Embedding and nn.Linear);
what rnnfast cannot run or ONNX cannot express raises, naming the option, node and attribute."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

import rnnfast

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
rx = rnnfast.io.onnx

D, H, V = 4, 6, 13


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def flat(result):
    if isinstance(result, (tuple, list)):
        return [a for part in result for a in flat(part)]
    return [np.asarray(result)]


def assert_outputs(got, expected, atol=1e-5):
    got, expected = flat(got), flat(expected)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != {e.shape}"
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=atol, err_msg=f"output {i}")


CONFIGS = {
    "gru": (rnnfast.GRU, {}),
    "gru-keras-form": (rnnfast.GRU, {"reset_after": False, "num_layers": 2}),
    "gru-bidir-2layers": (rnnfast.GRU, {"bidirectional": True, "num_layers": 2}),
    "gru-nobias-batch-first": (rnnfast.GRU, {"bias": False, "batch_first": True}),
    "gru-hard-sigmoid-relu-bidir": (
        rnnfast.GRU,
        {"recurrent_activation": "hard_sigmoid", "activation": "relu", "bidirectional": True},
    ),
    "gru-go-backwards-bidir": (
        rnnfast.GRU,
        {"go_backwards": True, "bidirectional": True, "num_layers": 2},
    ),
    "gru-keras-last-state": (rnnfast.GRU, {"return_sequences": False, "return_state": True}),
    "lstm": (rnnfast.LSTM, {}),
    "lstm-bidir-2layers-batch-first": (
        rnnfast.LSTM,
        {"bidirectional": True, "num_layers": 2, "batch_first": True},
    ),
    "lstm-residual-3layers": (rnnfast.LSTM, {"num_layers": 3, "residual": True}),
    "lstm-hard-sigmoid-relu": (
        rnnfast.LSTM,
        {"recurrent_activation": "hard_sigmoid", "activation": "relu", "num_layers": 2},
    ),
    "lstm-merge-none-state": (
        rnnfast.LSTM,
        {"bidirectional": True, "merge_mode": None, "return_sequences": True, "return_state": True},
    ),
    "lstm-go-backwards-last": (rnnfast.LSTM, {"go_backwards": True, "return_sequences": False}),
}


def states_for(layer, rng, batch):
    rows = layer.num_layers * layer.num_directions
    h = rng.standard_normal((rows, batch, H)).astype(np.float32)
    c = rng.standard_normal((rows, batch, H)).astype(np.float32)
    return h, c


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
def test_gated_export_matches_onnxruntime_and_loads_back(name, with_lengths, with_h0):
    cls, config = CONFIGS[name]
    layer = cls(D, H, seed=3, **config).eval()
    exported = rx.export(layer, None, lengths=with_lengths, h0=with_h0)
    ops = [n.op_type for n in exported.graph.node if n.op_type in ("GRU", "LSTM")]
    assert ops == [cls.__name__] * layer.num_layers
    if cls is rnnfast.GRU:
        node = next(n for n in exported.graph.node if n.op_type == "GRU")
        lbr = next(a.i for a in node.attribute if a.name == "linear_before_reset")
        assert lbr == int(layer.reset_after)
    back = rx.load(exported)

    def config(model):  # Keras's form without a state: return_state None and False alike
        out = {k: v for k, v in model.get_config().items() if k != "seed"}
        out["return_state"] = bool(out["return_state"])
        return out

    assert type(back) is cls and config(back) == config(layer)
    rng = np.random.default_rng(0)
    for steps, batch in ((6, 5), (1, 1)):
        shape = (batch, steps, D) if layer.batch_first else (steps, batch, D)
        x = rng.standard_normal(shape).astype(np.float32)
        lengths = np.array([steps, 0, max(1, steps // 2), 1, steps - 1][:batch], dtype=np.int64)
        h, c = states_for(layer, rng, batch)
        state = (h if cls is rnnfast.GRU else (h, c)) if with_h0 else None
        kwargs = {"lengths": lengths} if with_lengths else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rnnfast.nn.PaddingWarning)
            expected = layer(x, state, **kwargs)
            loaded = back(x, state, **kwargs)
        got = run_ort(exported, {"x": x, "lengths": lengths, "h0": h, "c0": c})
        assert_outputs(got, expected)
        assert_outputs(loaded, expected, atol=0)


def test_gated_in_a_container_with_embedding_and_linear():
    model = rnnfast.Sequential(
        [
            rnnfast.nn.Embedding(V, D),
            rnnfast.LSTM(D, H, num_layers=2, bidirectional=True, return_sequences=True),
            rnnfast.nn.Linear(2 * H, 3),
        ]
    ).eval()
    exported = rx.export(model, None, lengths=True)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, V, (7, 4))
    lengths = np.array([7, 3, 1, 5])
    expected = model(ids, lengths=lengths)
    assert_outputs(run_ort(exported, {"x": ids, "lengths": lengths}), expected)
    assert_outputs(rx.load(exported)(ids, lengths=lengths), expected, atol=0)


def test_gated_export_refusals_name_the_option():
    with pytest.raises(ValueError, match="proj_size"):
        rx.export(rnnfast.LSTM(D, H, proj_size=3).eval(), None)
    with pytest.raises(ValueError, match="dilation"):
        rx.export(rnnfast.GRU(D, H, dilation=2).eval(), None)
    with pytest.raises(ValueError, match="dropout"):
        rx.export(rnnfast.GRU(D, H, num_layers=2, dropout=0.5).train(), None)
    with pytest.raises(ValueError, match="stateful"):
        rx.export(rnnfast.LSTM(D, H, stateful=True).eval(), None)


# ---- load: refusals of what rnnfast's cells cannot run -----------------------------------------


def _node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)


def _set(node, name, value):
    from onnx import helper

    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value))


def test_load_refuses_what_rnnfast_cannot_run_naming_node_and_attribute():
    from onnx import helper, numpy_helper

    lstm = rx.export(rnnfast.LSTM(D, H).eval(), None)
    gru = rx.export(rnnfast.GRU(D, H).eval(), None)

    m = onnx.ModelProto()
    m.CopyFrom(lstm)
    node = _node(m, "LSTM")
    node.name = "the_lstm"
    # P loads (rnnfast.LSTM(peepholes=True), tests/io/test_onnx_lstm_forms.py), but not of
    # another shape
    p = numpy_helper.from_array(np.zeros((1, 2 * H), np.float32), "peepholes")
    m.graph.initializer.append(p)
    while len(node.input) < 7:
        node.input.append("")
    node.input.append("peepholes")
    with pytest.raises(ValueError, match=r"the_lstm.*\bP\b has shape"):
        rx.load(m)

    for base, op, attr, value, pattern in (
        (lstm, "LSTM", "input_forget", 2, "input_forget"),  # 1 loads: input_forget=True
        (lstm, "LSTM", "clip", -3.0, "clip"),  # > 0 loads: cell_clip
        (gru, "GRU", "clip", 3.0, "clip"),
        (gru, "GRU", "activations", ["Sigmoid", "Softsign"], "activations"),
        (lstm, "LSTM", "activations", ["Sigmoid", "Tanh", "Relu"], "activations"),
        (lstm, "LSTM", "activations", ["Tanh", "Tanh", "Tanh"], "activations"),
        (gru, "GRU", "activations", ["HardSigmoid", "Tanh"], "HardSigmoid"),  # alpha 0.2
        (gru, "GRU", "activation_alpha", [0.5], "activation_alpha"),
    ):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        node = _node(m, op)
        node.name = f"the_{op.lower()}"
        _set(node, attr, value)
        with pytest.raises(ValueError, match=f"the_{op.lower()}.*{pattern}"):
            rx.load(m)
    assert helper  # onnx.helper builds the attributes above


def test_a_gru_with_linear_before_reset_0_runs_as_written_and_warns_for_pytorch():
    """pytorch#189225: PyTorch's dynamo exporter has written nn.GRU with linear_before_reset=0.
    Today's exporter writes 1, so the fixture is built by hand (onnx.helper): the file runs as
    written (reset_after=False, as onnxruntime runs it), with a warning when PyTorch wrote it."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(2)
    W = rng.standard_normal((1, 3 * H, D)).astype(np.float32) * 0.5
    R = rng.standard_normal((1, 3 * H, H)).astype(np.float32) * 0.5
    B = rng.standard_normal((1, 6 * H)).astype(np.float32) * 0.5
    node = helper.make_node(
        "GRU", ["x", "W", "R", "B"], ["Y", "h_n"], name="gru_node", hidden_size=H,
        linear_before_reset=0,
    )  # fmt: skip
    squeeze = helper.make_node("Squeeze", ["Y", "axis1"], ["y"])
    graph = helper.make_graph(
        [node, squeeze],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["T", "B", D])],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["T", "B", H]),
            helper.make_tensor_value_info("h_n", onnx.TensorProto.FLOAT, [1, "B", H]),
        ],
        [
            numpy_helper.from_array(W, "W"),
            numpy_helper.from_array(R, "R"),
            numpy_helper.from_array(B, "B"),
            numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    with pytest.warns(UserWarning, match=r"gru_node.*linear_before_reset=0"):
        layer = rx.load(model)
    assert isinstance(layer, rnnfast.GRU) and layer.reset_after is False
    x = rng.standard_normal((5, 3, D)).astype(np.float32)
    assert_outputs(layer(x), run_ort(model, {"x": x}))
    model.producer_name = "someone"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rx.load(model)


# ---- torch.onnx's graphs -----------------------------------------------------------------------

TORCH_GATED = {
    "gru": ("GRU", {}),
    "gru-2layers-bidir": ("GRU", {"num_layers": 2, "bidirectional": True}),
    "lstm": ("LSTM", {}),
    "lstm-2layers-bidir-batch-first": (
        "LSTM",
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
    ),
    "lstm-nobias": ("LSTM", {"bias": False}),
}


def _torch_export(torch, module, args, path, input_names, output_names, dynamic_axes, dynamo):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=dynamo,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            **({"verbose": False} if dynamo else {}),
        )


def _torch_flat(torch, result):
    if isinstance(result, (tuple, list)):
        return [a for part in result for a in _torch_flat(torch, part)]
    return [result.detach().numpy()]


@pytest.mark.parametrize("name", TORCH_GATED)
@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
def test_load_torch_legacy_export_of_nn_gru_and_lstm(tmp_path, name, with_h0):
    torch = pytest.importorskip("torch")
    cell, config = TORCH_GATED[name]
    torch.manual_seed(0)
    module = getattr(torch.nn, cell)(D, H, **config).eval()
    lstm = cell == "LSTM"
    rows = module.num_layers * (2 if module.bidirectional else 1)
    bf = module.batch_first
    x = torch.randn((2, 5, D) if bf else (5, 2, D))
    zeros = torch.zeros(rows, 2, H)
    names = ["x"] + (["h0", "c0"] if lstm else ["h0"]) * with_h0
    args = (x,) + (((zeros, zeros) if lstm else zeros),) * with_h0
    axes = {"x": {0: "B", 1: "T"} if bf else {0: "T", 1: "B"}}
    axes.update({n: {1: "B"} for n in names[1:]})
    outs = ["y", "h_n", "c_n"] if lstm else ["y", "h_n"]
    path = tmp_path / "torch.onnx"
    _torch_export(torch, module, args, path, names, outs, axes, dynamo=False)
    layer = rx.load(path)
    assert type(layer).__name__ == cell and layer.num_layers == module.num_layers
    for steps, batch in ((7, 3), (1, 1)):
        x = torch.randn((batch, steps, D) if bf else (steps, batch, D))
        h, c = torch.randn(rows, batch, H), torch.randn(rows, batch, H)
        state = (h, c) if lstm else h
        with torch.no_grad():
            expected = _torch_flat(torch, module(x, state) if with_h0 else module(x))
        mine = (h.numpy(), c.numpy()) if lstm else h.numpy()
        got = layer(x.numpy(), mine) if with_h0 else layer(x.numpy())
        assert_outputs(got, expected)


class _Nets:
    @staticmethod
    def build(torch, cell):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(V, D)
                self.rnn = getattr(torch.nn, cell)(D, H, batch_first=True)
                self.lin = torch.nn.Linear(H, 3)

            def forward(self, ids):
                y, _ = self.rnn(self.emb(ids))
                return self.lin(y)

        torch.manual_seed(0)
        return Net().eval()


EXPORTERS = ["legacy", "dynamo"]


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
@pytest.mark.parametrize("exporter", EXPORTERS)
def test_load_torch_export_of_embedding_gated_linear(tmp_path, cell, exporter):
    torch = pytest.importorskip("torch")
    dynamo = exporter == "dynamo"
    if dynamo and importlib.util.find_spec("onnxscript") is None:
        pytest.skip("the dynamo exporter needs onnxscript")
    net = _Nets.build(torch, cell)
    steps = 6
    ids = torch.randint(0, V, (2, steps))
    path = tmp_path / "net.onnx"
    _torch_export(torch, net, (ids,), path, ["ids"], ["y"], {"ids": {0: "B", 1: "T"}}, dynamo)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {cell, "Gather"} <= ops
    model = rx.load(path)
    assert [type(layer).__name__ for layer in model.layers] == ["Embedding", cell, "Linear"]
    # the dynamo exporter fixes the time axis of the recurrent op's output (a Reshape to T)
    ids = torch.randint(0, V, (3, steps))
    with torch.no_grad():
        expected = net(ids).numpy()
    assert_outputs(model(ids.numpy()), expected)


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_load_torch_dynamo_export_of_nn_gru_and_lstm(tmp_path, cell):
    torch = pytest.importorskip("torch")
    if importlib.util.find_spec("onnxscript") is None:
        pytest.skip("the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    module = getattr(torch.nn, cell)(D, H).eval()
    outs = ["y", "h_n", "c_n"] if cell == "LSTM" else ["y", "h_n"]
    path = tmp_path / "dynamo.onnx"
    x = torch.randn(5, 2, D)
    _torch_export(torch, module, (x,), path, ["x"], outs, {"x": {0: "T", 1: "B"}}, True)
    graph = onnx.load(path)
    if cell == "GRU":
        lbr = [a.i for a in _node(graph, "GRU").attribute if a.name == "linear_before_reset"]
        assert lbr == [1]  # today's exporter writes nn.GRU's form (pytorch#189225 fixed)
    layer = rx.load(graph)
    assert type(layer).__name__ == cell
    x = torch.randn(5, 3, D)
    with torch.no_grad():
        expected = _torch_flat(torch, module(x))
    assert_outputs(layer(x.numpy()), expected)
