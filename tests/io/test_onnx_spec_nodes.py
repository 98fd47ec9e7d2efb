"""ONNX's recurrent nodes as the operator's spec writes them (issue 39, item 4): ONNX's own
backend node tests, and nodes built with onnx.helper for each attribute the spec allows, loaded
by rnnfast and compared with onnxruntime (and the node tests' expected outputs). What rnnfast's
cells cannot compute is refused with an OnnxLoadError naming the attribute."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rnnfast.onnx as rx  # noqa: E402

TOL = 1e-5
_WEIGHTS = ("W", "R", "B", "P")


def _ort(model, feeds):
    """onnxruntime's outputs of ``model``. onnxruntime refuses layout=1 ("Batchwise recurrent
    operations (layout == 1) are not supported"): such a graph runs as its layout=0 twin (the
    same node with layout=0, its batch-major inputs transposed in and outputs back)."""
    node = model.graph.node[0]
    layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
    if layout == 1:
        model = _time_major_twin(model)
        feeds = {
            k: v.swapaxes(0, 1) if k in {node.input[0], *node.input[5:7]} else v
            for k, v in feeds.items()
        }
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = session.run(None, feeds)
    if layout == 1:
        back = {node.output[0]: (2, 0, 1, 3)}
        out = [
            o.transpose(back.get(name, (1, 0, 2)))
            for o, name in zip(out, [g.name for g in model.graph.output])
        ]
    return out


def _time_major_twin(model):
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    node = twin.graph.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    for value in list(twin.graph.input) + list(twin.graph.output):
        value.type.tensor_type.ClearField("shape")
    for t in twin.graph.initializer:  # constant initial states
        if t.name in node.input[5:7]:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).swapaxes(0, 1), t.name))
    return twin


# ---- ONNX's backend node tests ------------------------------------------------------------------


def _backend_cases():
    """{name: (model, inputs, outputs)} of ONNX's node tests of RNN, GRU and LSTM: read from the
    onnx package's data/node folders where it ships them, else made by its case generators
    (the same models and data)."""
    # onnx's NumPy generators (run at their modules' import too) can trip a spurious
    # floating-point warning inside BLAS's dot; their outputs are checked against onnxruntime
    # below as well
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        from onnx.backend.test.case import node as cases
        from onnx.backend.test.case.node import gru, lstm, rnn

    out = {}
    for cls in (rnn.RNN, gru.GRU, lstm.LSTM):
        for name in sorted(n for n in vars(cls) if n.startswith("export")):
            del cases._NodeTestCases[:]
            cases._existing_names.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                getattr(cls, name)()
            for case in cases._NodeTestCases:
                ((inputs, outputs),) = case.data_sets
                out[case.name] = (case.model, list(inputs), list(outputs))
    del cases._NodeTestCases[:]
    cases._existing_names.clear()
    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    for name in list(out):
        where = os.path.join(folder, name)
        if os.path.isdir(where):
            out[name] = _read_case(where)
    return out


def _read_case(where):
    model = onnx.load(os.path.join(where, "model.onnx"))
    data = os.path.join(where, "test_data_set_0")

    def read(prefix, n):
        arrays = []
        for i in range(n):
            t = onnx.TensorProto()
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            arrays.append(numpy_helper.to_array(t))
        return arrays

    return model, read("input", len(model.graph.input)), read("output", len(model.graph.output))


_CASES = _backend_cases()
REFUSED = {}  # every backend node test loads (test_lstm_with_peepholes: rnnfast.LSTM(peepholes=True))


def test_the_node_tests_are_all_there():
    names = {n for n in _CASES if n.startswith(("test_simple_rnn", "test_rnn", "test_gru"))}
    assert len(names) == 12 and len(_CASES) == 18, sorted(_CASES)


@pytest.mark.parametrize("name", sorted(_CASES))
def test_onnx_backend_node_test(name):
    model, inputs, expected = _CASES[name]
    feeds = dict(zip([i.name for i in model.graph.input], inputs))
    weights = {k: feeds.pop(k) for k in _WEIGHTS if k in feeds}
    if name in REFUSED:
        with pytest.raises(rx.OnnxLoadError, match=REFUSED[name]):
            rx.load(model, initializers=weights)
        return
    loaded = rx.load(model, initializers=weights)
    got = loaded.run(None, feeds)
    theirs = _ort(model, dict(feeds, **weights))
    assert len(got) == len(expected) == len(theirs)
    for g, e, t in zip(got, expected, theirs):
        assert g.shape == e.shape == t.shape
        np.testing.assert_allclose(g, e, atol=TOL, rtol=TOL)
        np.testing.assert_allclose(g, t, atol=TOL, rtol=TOL)


def test_weights_given_as_graph_inputs_are_refused_naming_the_fix():
    model, _, _ = _CASES["test_gru_defaults"]
    with pytest.raises(rx.OnnxLoadError, match=r"W is the graph input 'W'.*initializers="):
        rx.load(model)
    with pytest.raises(ValueError, match=r"\['Q'\] are not inputs"):
        rx.load(model, initializers={"Q": np.zeros(1)})


# ---- nodes built with onnx.helper -----------------------------------------------------------------

T, N, D, H = 5, 3, 4, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _spec_node(
    cell,
    direction="forward",
    layout=0,
    *,
    bias=True,
    lengths=None,  # None, "input" or "const"
    starts=None,  # None, "input" or "const"
    outputs=("Y", "Y_h", "Y_c"),
    attrs=None,
    seed=0,
    hidden_size=True,
):
    """A graph of one ONNX ``cell`` node as the spec writes it; returns (model, feeds)."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    G = GATES[cell]
    x_shape = (T, N, D) if layout == 0 else (N, T, D)
    state_shape = (dirs, N, H) if layout == 0 else (N, dirs, H)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, G * H, D)).astype("f4"), "W"),
        numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, G * H, H)).astype("f4"), "R"),
    ]
    names = ["X", "W", "R"]
    if bias:
        inits.append(
            numpy_helper.from_array(rng.uniform(-0.3, 0.3, (dirs, 2 * G * H)).astype("f4"), "B")
        )
    names.append("B" if bias else "")
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    feeds = {"X": rng.standard_normal(x_shape).astype("f4")}
    lens = np.array([T, 2, 4], np.int32)[:N]
    if lengths == "input":
        graph_inputs.append(helper.make_tensor_value_info("seq", TensorProto.INT32, [N]))
        feeds["seq"] = lens
    elif lengths == "const":
        inits.append(numpy_helper.from_array(lens, "seq"))
    names.append("seq" if lengths else "")
    state_names = ["h0", "c0"] if cell == "LSTM" else ["h0"]
    for s in state_names:
        value = rng.uniform(-0.5, 0.5, state_shape).astype("f4")
        if starts == "input":
            graph_inputs.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, state_shape))
            feeds[s] = value
        elif starts == "const":
            inits.append(numpy_helper.from_array(value, s))
    names += state_names if starts else [""] * len(state_names)
    while names and not names[-1]:
        names.pop()
    outs = ["Y", "Y_h", "Y_c"] if cell == "LSTM" else ["Y", "Y_h"]
    node_outputs = [o if o in outputs else "" for o in outs]
    while not node_outputs[-1]:
        node_outputs.pop()
    shapes = {
        "Y": (T, dirs, N, H) if layout == 0 else (N, T, dirs, H),
        "Y_h": state_shape,
        "Y_c": state_shape,
    }
    attributes = dict(attrs or {})
    if direction != "forward":
        attributes["direction"] = direction
    if layout:
        attributes["layout"] = layout
    if hidden_size:
        attributes["hidden_size"] = H
    node = helper.make_node(cell, names, node_outputs, name=f"the_{cell.lower()}", **attributes)
    graph = helper.make_graph(
        [node],
        "spec",
        graph_inputs,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in node_outputs if o],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model, feeds


def _compare(model, feeds):
    theirs = _ort(model, feeds)
    loaded = rx.load(model)
    ours = loaded.run(None, feeds)
    assert isinstance(loaded, rx.OnnxModel)
    for name, a, b in zip([o.name for o in model.graph.output], ours, theirs):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, atol=TOL, rtol=TOL, err_msg=name)
    return loaded, ours


DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize(
    "lengths, starts, bias",
    [("input", "input", True), ("const", "const", False), (None, None, True)],
    ids=["inputs", "initializers", "plain"],
)
def test_spec_node_matches_onnxruntime(cell, direction, layout, lengths, starts, bias):
    model, feeds = _spec_node(
        cell, direction, layout, bias=bias, lengths=lengths, starts=starts, seed=len(direction)
    )
    _compare(model, feeds)


@pytest.mark.parametrize(
    "cell, attrs",
    [
        ("RNN", {"activations": ["Relu"]}),
        ("RNN", {"activations": ["Tanh", "Tanh"]}),
        ("GRU", {"linear_before_reset": 0}),
        ("GRU", {"linear_before_reset": 1}),
        (
            "GRU",
            {
                "activations": ["HardSigmoid", "Relu"] * 2,
                "activation_alpha": [1 / 6] * 2,
                "activation_beta": [0.5] * 2,
            },
        ),
        ("LSTM", {"activations": ["Sigmoid", "Relu", "Relu"] * 2}),
        (
            "LSTM",
            {
                "activations": ["HardSigmoid", "Tanh", "Tanh"] * 2,
                "activation_alpha": [1 / 6] * 2,
                "activation_beta": [0.5] * 2,
            },
        ),
        ("LSTM", {"input_forget": 0}),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}{v[k]}" for k in v)[:40],
)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_spec_node_attributes_with_lengths(cell, attrs, direction):
    dirs = 2 if direction == "bidirectional" else 1
    attrs = dict(attrs)
    if "activations" in attrs:  # the list holds two directions' worth; the spec takes dirs'
        per = len(attrs["activations"]) // 2 if len(attrs["activations"]) > 1 else 1
        attrs["activations"] = attrs["activations"][:per] * dirs
        for k in ("activation_alpha", "activation_beta"):
            if k in attrs:
                attrs[k] = attrs[k][:1] * dirs
    model, feeds = _spec_node(cell, direction, lengths="input", starts="input", attrs=attrs)
    _compare(model, feeds)


_SUBSETS = [("Y",), ("Y_h",), ("Y_c",), ("Y", "Y_c")]


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize(
    "cell, outputs",
    [(c, o) for c in ("RNN", "GRU", "LSTM") for o in _SUBSETS if c == "LSTM" or "Y_c" not in o],
)
def test_spec_node_any_subset_of_its_outputs(cell, outputs, layout):
    model, feeds = _spec_node(cell, "bidirectional", layout, outputs=outputs, lengths="const")
    _, ours = _compare(model, feeds)
    assert len(ours) == len(model.graph.output) == len(outputs)


def test_spec_node_without_hidden_size_takes_it_from_w():
    """hidden_size is optional in the spec (onnxruntime requires it): rnnfast reads H from W."""
    model, feeds = _spec_node("GRU", "bidirectional", lengths="input", hidden_size=False)
    with_it, _ = _spec_node("GRU", "bidirectional", lengths="input")
    ours = rx.load(model).run(None, feeds)
    for a, b in zip(ours, _ort(with_it, feeds)):
        np.testing.assert_allclose(a, b, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_spec_node_empty_sequences_end_in_zeros_as_in_onnxruntime(cell, direction, layout):
    """An empty sequence's Y_h / Y_c are the op's zeros (rnnfast's own h_n would be h0, which
    rnnfast's and torch's exporters write as a Where after the node)."""
    model, feeds = _spec_node(cell, direction, layout, lengths="input", starts="input")
    feeds["seq"] = np.array([T, 0, 3], np.int32)
    _, ours = _compare(model, feeds)
    for state in ours[1:]:
        assert not (state[:, 1] if layout == 0 else state[1]).any()


def test_spec_node_in_float64():
    """onnxruntime has no float64 recurrent kernels: the float64 graph equals its float32
    twin in onnxruntime, and stays float64."""
    model, feeds = _spec_node("LSTM", "bidirectional", lengths="input", starts="input")
    theirs = _ort(model, feeds)
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array(a.astype(np.float64), t.name))
    for v in list(model.graph.input) + list(model.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    feeds = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    ours = rx.load(model).run(None, feeds)
    for a, b in zip(ours, theirs):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, atol=TOL, rtol=TOL)


def test_spec_node_call_takes_and_returns_the_graphs_layouts():
    model, feeds = _spec_node("LSTM", "bidirectional", 1, lengths="input", starts="input")
    loaded = rx.load(model)
    y, h, c = loaded(feeds["X"], (feeds["h0"], feeds["c0"]), lengths=feeds["seq"])
    assert y.shape == (N, T, 2, H) and h.shape == c.shape == (N, 2, H)
    expected = loaded.run(None, feeds)
    for a, b in zip((y, h, c), expected):
        np.testing.assert_array_equal(a, b)
    assert loaded.run(["Y_c"], feeds)[0].shape == (N, 2, H)
    # the batch-first states of a layout=1 node go in as the graph has them
    with pytest.raises(ValueError, match="h0"):
        loaded(feeds["X"], (feeds["h0"][0], feeds["c0"]), lengths=feeds["seq"])


def test_spec_node_with_fixed_lengths_refuses_other_lengths():
    model, feeds = _spec_node("GRU", "reverse", lengths="const")
    loaded = rx.load(model)
    with pytest.raises(ValueError, match="sequence_lens.*initializer"):
        loaded(feeds["X"], lengths=np.array([1, 1, 1]))
    with pytest.raises(ValueError, match=r"lengths.*\(3,\)"):  # they fix a batch of 3
        loaded(feeds["X"][:, :2])


def test_spec_node_read_through_squeeze_and_transpose_as_tf2onnx_writes():
    """A reverse node's Y squeezed and transposed to batch-major, as tf2onnx writes a Keras
    LSTM(go_backwards=...)'s sequence; and its Y_h / Y_c squeezed to (B, H)."""
    model, feeds = _spec_node("LSTM", "reverse", lengths="input")
    g = model.graph
    g.node.extend(
        [
            helper.make_node("Squeeze", ["Y", "ax1"], ["Ys"]),
            helper.make_node("Transpose", ["Ys"], ["out"], perm=[1, 0, 2]),
            helper.make_node("Squeeze", ["Y_h", "ax0"], ["h"]),
            helper.make_node("Squeeze", ["Y_c", "ax0"], ["c"]),
        ]
    )
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "ax1"))
    g.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
    del g.output[:]
    g.output.extend(
        [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, (N, T, H)),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, (N, H)),
            helper.make_tensor_value_info("c", TensorProto.FLOAT, (N, H)),
        ]
    )
    _compare(model, feeds)


@pytest.mark.parametrize(
    "cell, attr, value, pattern",
    [
        ("LSTM", "clip", 0.3, None),  # rnnfast.LSTM(cell_clip=0.3): loads, as onnxruntime
        ("LSTM", "clip", -1.0, "clip=-1.0: expected a threshold > 0"),
        ("GRU", "clip", 3.0, "clip.*cell_clip is the LSTM's"),
        ("RNN", "clip", 3.0, "clip"),
        ("LSTM", "input_forget", 1, None),  # rnnfast.LSTM(input_forget=True)
        ("LSTM", "input_forget", 2, "input_forget=2: expected 0 or 1"),
        ("RNN", "activations", ["Softsign"], "activations.*tanh or relu"),
        ("RNN", "activations", ["Tanh"], None),  # control: loads
        ("RNN", "activation_alpha", [0.5], "activation_alpha"),
        ("GRU", "activations", ["Sigmoid", "LeakyRelu"], "activations.*Sigmoid or HardSigmoid"),
        ("GRU", "activations", ["HardSigmoid", "Tanh"], "HardSigmoid.*alpha 1/6"),
        ("LSTM", "activations", ["Sigmoid", "Tanh", "Relu"], "activations"),
        ("LSTM", "activations", ["Sigmoid", "ScaledTanh", "ScaledTanh"], "activations"),
        ("LSTM", "activation_beta", [0.5], "activation_beta"),
        ("GRU", "layout", 2, "layout=2"),
        ("GRU", "direction", "sideways", "direction sideways"),
        ("LSTM", "hidden_size", H + 1, "hidden_size"),
    ],
)
def test_spec_node_refusals_name_the_attribute(cell, attr, value, pattern):
    model, feeds = _spec_node(cell, lengths="input")
    node = model.graph.node[0]
    for i, a in enumerate(node.attribute):
        if a.name == attr:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(attr, value))
    if pattern is None:
        _compare(model, feeds)
        return
    with pytest.raises(rx.OnnxLoadError, match=f"the_{cell.lower()}.*{pattern}"):
        rx.load(model)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("clip, input_forget", [(None, 0), (0.7, 1), (2.0, 0)])
def test_spec_node_peepholes_input_forget_and_clip_load(direction, clip, input_forget):
    """The LSTM's P (peepholes), input_forget and clip, with lengths and initial states in
    each direction: rnnfast.LSTM(peepholes=True, input_forget=..., cell_clip=...) equals
    onnxruntime's node."""
    attrs = {"input_forget": input_forget} | ({} if clip is None else {"clip": clip})
    model, feeds = _spec_node(
        "LSTM", direction=direction, lengths="input", starts="input", attrs=attrs
    )
    node = model.graph.node[0]
    while len(node.input) < 7:
        node.input.append("")
    node.input.append("P")
    dirs = 2 if direction == "bidirectional" else 1
    p = np.random.default_rng(3).uniform(-1, 1, (dirs, 3 * H)).astype("f4")
    model.graph.initializer.append(numpy_helper.from_array(p, "P"))
    _compare(model, feeds)


def test_spec_node_peepholes_must_be_constants():
    model, _ = _spec_node("LSTM", outputs=("Y_h",))
    node = model.graph.node[0]
    while len(node.input) < 7:
        node.input.append("")
    node.input.append("P")
    model.graph.input.append(helper.make_tensor_value_info("P", TensorProto.FLOAT, (1, 3 * H)))
    with pytest.raises(rx.OnnxLoadError, match=r"the_lstm.*\bP\b.*initializers"):
        rx.load(model)
    model.graph.input.pop()
    model.graph.initializer.append(numpy_helper.from_array(np.ones((1, 2 * H), "f4"), "P"))
    with pytest.raises(rx.OnnxLoadError, match=r"the_lstm.*its P has shape \(1, 12\)"):
        rx.load(model)


def test_spec_node_bad_constant_lengths_and_states_are_refused():
    model, _ = _spec_node("GRU", lengths="const")
    seq = next(t for t in model.graph.initializer if t.name == "seq")
    seq.CopyFrom(numpy_helper.from_array(np.array([3, -1, 2], np.int32), "seq"))
    with pytest.raises(rx.OnnxLoadError, match="negative"):
        rx.load(model)
    model, _ = _spec_node("GRU", lengths="const")
    seq = next(t for t in model.graph.initializer if t.name == "seq")
    seq.CopyFrom(numpy_helper.from_array(np.array([3, 2], np.int32), "seq"))
    with pytest.raises(rx.OnnxLoadError, match="2 lengths for a batch of 3"):
        rx.load(model)
    model, _ = _spec_node("RNN", starts="const")
    h0 = next(t for t in model.graph.initializer if t.name == "h0")
    h0.CopyFrom(numpy_helper.from_array(np.ones((1, N, H + 1), "f4"), "h0"))
    with pytest.raises(rx.OnnxLoadError, match="initial_h"):
        rx.load(model)
