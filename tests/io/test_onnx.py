"""rnnfast.io.onnx: every exported model passes onnx's full check and computes in onnxruntime
what rnnfast computes (float32, variable lengths, dynamic T and B); load reads the exports back
and torch.onnx's TorchScript exports of nn.RNN (with nn.Embedding and nn.Linear); what ONNX
cannot express raises, naming the option."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rnnfast
from rnnfast.nn import Layer

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
rx = rnnfast.io.onnx

ATOL = 1e-5  # float32: onnxruntime and rnnfast sum in different orders
D, H, V = 4, 6, 13


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def flat(result):
    """A call's return as a flat list of arrays: (y, h_n), [forward, backward(, h_n)], ..."""
    if isinstance(result, (tuple, list)):
        return [a for part in result for a in flat(part)]
    return [np.asarray(result)]


def assert_outputs(got, expected, atol=ATOL):
    got, expected = flat(got), flat(expected)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != {e.shape}"
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=atol, err_msg=f"output {i}")


def sequences(rng, steps, batch, batch_first, dtype=np.float32):
    shape = (batch, steps, D) if batch_first else (steps, batch, D)
    return rng.standard_normal(shape).astype(dtype)


def lengths_for(steps, batch):
    """Variable lengths with an empty sequence and a full one (unsorted)."""
    base = [steps, 0, max(1, steps // 2), 1, steps - 1]
    return np.array([base[i % len(base)] for i in range(batch)], dtype=np.int64)


# ---- RNN ---------------------------------------------------------------------------------------

RNN_CONFIGS = {
    "plain": {},
    "relu-nobias": {"nonlinearity": "relu", "bias": False},
    "2layers": {"num_layers": 2},
    "bidir": {"bidirectional": True},
    "3layers-bidir": {"num_layers": 3, "bidirectional": True},
    "batch-first-bidir": {"batch_first": True, "bidirectional": True, "num_layers": 2},
    "residual": {"num_layers": 3, "residual": True},
    "residual-2-bidir": {"num_layers": 2, "residual": True, "bidirectional": True},
    "go-backwards": {"go_backwards": True},
    "go-backwards-2layers": {"go_backwards": True, "num_layers": 2, "batch_first": True},
    "go-backwards-bidir": {"go_backwards": True, "bidirectional": True, "num_layers": 2},
    "keras-last": {"return_sequences": False},
    "keras-last-state": {"return_sequences": False, "return_state": True, "num_layers": 2},
    "keras-seq-state": {"return_sequences": True, "return_state": True},
    "keras-last-backwards": {"return_sequences": False, "go_backwards": True},
    "keras-last-bidir": {"return_sequences": False, "bidirectional": True},
    "keras-last-bidir-backwards": {
        "return_sequences": False,
        "bidirectional": True,
        "go_backwards": True,
        "batch_first": True,
    },
    "keras-last-residual": {
        "return_sequences": False,
        "residual": True,
        "num_layers": 2,
        "bidirectional": True,
    },
    "merge-sum": {"bidirectional": True, "merge_mode": "sum"},
    "merge-mul-last": {"bidirectional": True, "merge_mode": "mul", "return_sequences": False},
    "merge-ave": {"bidirectional": True, "merge_mode": "ave", "num_layers": 2},
    "merge-none": {"bidirectional": True, "merge_mode": None, "return_sequences": True},
    "merge-none-last-state": {
        "bidirectional": True,
        "merge_mode": None,
        "return_sequences": False,
        "return_state": True,
    },
    "merge-none-torch-form": {"bidirectional": True, "merge_mode": None},
    "merge-sum-backwards-relu": {
        "bidirectional": True,
        "merge_mode": "sum",
        "go_backwards": True,
        "nonlinearity": "relu",
    },
}


def make_rnn(config, seed=0, dtype=np.float32):
    return rnnfast.RNN(D, H, seed=seed, dtype=dtype, **config).eval()


def rnn_inputs(rnn, rng, steps, batch):
    x = sequences(rng, steps, batch, rnn.batch_first)
    h0 = rng.standard_normal((rnn.num_layers * rnn.num_directions, batch, H)).astype(np.float32)
    return x, h0, lengths_for(steps, batch)


@pytest.mark.parametrize("config", RNN_CONFIGS.values(), ids=RNN_CONFIGS.keys())
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
def test_rnn_export_matches_onnxruntime_and_loads_back(config, with_lengths, with_h0):
    rnn = make_rnn(config)
    model = rx.export(rnn, None, lengths=with_lengths, h0=with_h0)
    back = rx.load(model)
    assert isinstance(back, rnnfast.RNN)
    rng = np.random.default_rng(1)
    for steps, batch in ((5, 3), (1, 1), (9, 5)):  # T and B are dynamic
        x, h0, lengths = rnn_inputs(rnn, rng, steps, batch)
        args = (x, h0 if with_h0 else None)
        kwargs = {"lengths": lengths} if with_lengths else {}
        expected = rnn(*args, **kwargs)
        got = run_ort(model, {"x": x, "h0": h0, "lengths": lengths})
        assert_outputs(got, expected)
        assert_outputs(back(*args, **kwargs), expected, atol=1e-6)


@pytest.mark.parametrize("config", RNN_CONFIGS.values(), ids=RNN_CONFIGS.keys())
def test_loaded_rnn_has_the_exported_configuration(config):
    rnn = make_rnn(config, seed=3)
    back = rx.load(rx.export(rnn, None))
    ignored = {"seed", "return_sequences", "return_state"}
    mine = {k: v for k, v in rnn.get_config().items() if k not in ignored}
    theirs = {k: v for k, v in back.get_config().items() if k not in ignored}
    assert theirs == mine
    for name, value in rnn.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[name], value)
    assert not back.training


def test_graph_inputs_outputs_and_dynamic_axes(tmp_path):
    rnn = make_rnn({"num_layers": 2, "bidirectional": True, "batch_first": True})
    path = tmp_path / "rnn.onnx"
    returned = rx.export(rnn, path, lengths=True, h0=True)
    model = onnx.load(path)
    assert model == returned
    onnx.checker.check_model(model, full_check=True)

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    TP = onnx.TensorProto
    inputs = {i.name: i for i in model.graph.input}
    assert list(inputs) == ["x", "h0", "lengths"]
    assert dims(inputs["x"]) == ["B", "T", D]
    assert dims(inputs["h0"]) == [4, "B", H]
    assert dims(inputs["lengths"]) == ["B"]
    assert inputs["lengths"].type.tensor_type.elem_type == TP.INT64
    outputs = {o.name: o for o in model.graph.output}
    assert list(outputs) == ["y", "h_n"]
    assert dims(outputs["y"]) == ["B", "T", 2 * H]
    assert dims(outputs["h_n"]) == [4, "B", H]
    rnn_nodes = [n for n in model.graph.node if n.op_type == "RNN"]
    assert len(rnn_nodes) == 2
    casts = {n.output[0]: n for n in model.graph.node if n.op_type == "Cast"}
    # sequence_lens is int32 in ONNX: the int64 graph input is cast inside
    assert casts[rnn_nodes[0].input[4]].attribute[0].i == TP.INT32


def test_onnxruntime_pads_with_zeros_and_runs_the_reverse_direction_within_lengths():
    """What the RNN op does with sequence_lens, seen in onnxruntime: outputs past each length
    are zeros, Y_h is each sequence's state at its own last step, the reverse direction starts
    at each sequence's end (rnnfast's semantics); an empty sequence's h_n is h0 in rnnfast,
    which the exporter adds to the op's zeros."""
    rnn = make_rnn({"bidirectional": True})
    model = rx.export(rnn, None, lengths=True, h0=True)
    rng = np.random.default_rng(5)
    x, h0, _ = rnn_inputs(rnn, rng, 7, 4)
    lengths = np.array([7, 3, 0, 1])
    y, h_n = run_ort(model, {"x": x, "h0": h0, "lengths": lengths})
    for b, n in enumerate(lengths):
        assert not y[n:, b].any()
        if n:
            np.testing.assert_allclose(h_n[0, b], y[n - 1, b, :H], atol=1e-6)
            np.testing.assert_allclose(h_n[1, b], y[0, b, H:], atol=1e-6)
            # the reverse direction of one sequence alone, trimmed to its length
            alone = rnn(x[:n, b : b + 1], h0[:, b : b + 1])[0]
            np.testing.assert_allclose(y[:n, b : b + 1], alone, atol=ATOL)
    np.testing.assert_allclose(h_n[:, 2], h0[:, 2], atol=1e-7)


@pytest.mark.parametrize("opset", [14, 17, None, "newest"])
def test_opsets(opset):
    if opset == "newest":
        opset = onnx.defs.onnx_opset_version()
    rnn = make_rnn({"bidirectional": True, "return_sequences": False, "merge_mode": "ave"})
    model = rx.export(rnn, None, lengths=True, opset=opset)
    assert model.opset_import[0].version == (opset or 17)
    onnx.checker.check_model(model, full_check=True)
    x, _, lengths = rnn_inputs(rnn, np.random.default_rng(0), 6, 3)
    try:
        got = run_ort(model, {"x": x, "lengths": lengths})
    except Exception as exc:  # an onnxruntime older than the installed onnx's newest opset
        if opset is not None and opset > 17 and "opset" in str(exc).lower():
            pytest.skip(f"onnxruntime does not run opset {opset}: {exc}")
        raise
    assert_outputs(got, rnn(x, lengths=lengths))
    assert isinstance(rx.load(model), rnnfast.RNN)


def test_float64_graph_checks_and_computes_in_the_reference_evaluator():
    """float64 layers give float64 graphs (onnxruntime has no float64 RNN kernel); onnx's
    reference evaluator runs them (without sequence_lens, which it ignores)."""
    from onnx.reference import ReferenceEvaluator

    rnn = make_rnn({"num_layers": 2, "bidirectional": True}, dtype=np.float64)
    model = rx.export(rnn, None)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    x = np.random.default_rng(0).standard_normal((5, 2, D))
    got = ReferenceEvaluator(model).run(None, {"x": x})
    assert_outputs(got, rnn(x), atol=1e-12)
    back = rx.load(model)
    assert back.dtype == np.float64
    assert_outputs(back(x), rnn(x), atol=1e-12)


def test_onnx_is_not_imported_with_rnnfast():
    import subprocess
    import sys

    code = (
        "import sys, rnnfast; assert 'onnx' not in sys.modules and 'torch' not in sys.modules;"
        "m = rnnfast.onnx; assert m is rnnfast.io.onnx; assert callable(m.export)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- containers --------------------------------------------------------------------------------


def token_batch(rng, steps, batch, batch_first, lengths):
    ids = rng.integers(1, V, size=(batch, steps))
    for b, n in enumerate(lengths):
        ids[b, n:] = 0
    return ids if batch_first else np.ascontiguousarray(ids.T)


class Tagger(rnnfast.Module):
    def __init__(self):
        super().__init__()
        self.embed = rnnfast.Embedding(V, D, seed=0)
        self.rnn = rnnfast.RNN(D, H, bidirectional=True, batch_first=True, seed=0)
        self.drop = rnnfast.Dropout(0.5)
        self.head = rnnfast.Dense(2 * H, 3, seed=0)

    def forward(self, ids):
        y, _ = self.rnn(self.embed(ids))
        return self.head(self.drop(y))


class FusedTagger(rnnfast.Module):
    """The embedding handed to the RNN (token input), inside a Sequential."""

    def __init__(self):
        super().__init__()
        self.embed = rnnfast.Embedding(V, D, seed=0, mask_zero=True)
        self.rnn = rnnfast.RNN(D, H, seed=0, return_sequences=False, bidirectional=True)
        self.tail = rnnfast.Sequential([rnnfast.Dense(2 * H, 5, seed=1), rnnfast.Dense(5, 2)])

    def forward(self, ids):
        return self.tail(self.rnn(ids, embedding=self.embed))


class Regressor(rnnfast.Module):
    """A Module around a Sequential: a float input, two RNNs, the last output."""

    def __init__(self):
        super().__init__()
        self.inner = rnnfast.Sequential(
            [
                rnnfast.Dense(D, 5, seed=0),
                rnnfast.RNN(5, H, num_layers=2, seed=1, return_sequences=True),
            ]
        )
        self.rnn = rnnfast.RNN(H, 3, seed=2, return_sequences=False, nonlinearity="relu")

    def forward(self, x):
        return self.rnn(self.inner(x))


def containers():
    return {
        "emb-rnn-dense": (
            lambda: rnnfast.Sequential(
                [
                    rnnfast.Embedding(V, D, seed=0),
                    rnnfast.RNN(D, H, num_layers=2, seed=0, batch_first=True),
                    rnnfast.Dropout(0.3),
                    rnnfast.Dense(H, 3, seed=0),
                ]
            ),
            True,
        ),
        "mask-zero-two-rnns": (
            lambda: rnnfast.Sequential(
                [
                    rnnfast.Embedding(V, D, seed=0, mask_zero=True),
                    rnnfast.RNN(D, H, seed=0, bidirectional=True, return_sequences=True),
                    rnnfast.RNN(2 * H, H, seed=1, return_sequences=False, go_backwards=True),
                    rnnfast.Dense(H, 2, seed=0),
                ]
            ),
            True,
        ),
        "padding-idx-merge-sum": (
            lambda: rnnfast.Sequential(
                [
                    rnnfast.Embedding(V, D, seed=0, padding_idx=0),
                    rnnfast.RNN(D, H, seed=0, bidirectional=True, merge_mode="sum", residual=False),
                    rnnfast.Dense(H, 2, seed=0, bias=False),
                ]
            ),
            True,
        ),
        "float-dense-rnn": (
            lambda: rnnfast.Sequential(
                [
                    rnnfast.Dense(D, 5, seed=0),
                    rnnfast.RNN(5, H, seed=0, batch_first=True, go_backwards=True),
                    rnnfast.Dense(H, 2, seed=0),
                ]
            ),
            False,
        ),
        "module-tagger": (Tagger, True),
        "module-fused-embedding": (FusedTagger, True),
        "module-nested-sequential": (Regressor, False),
    }


CONTAINERS = containers()


@pytest.mark.parametrize("name", CONTAINERS)
@pytest.mark.parametrize("with_lengths", [False, True], ids=["nolengths", "lengths"])
def test_container_export_matches_onnxruntime_and_loads_back(name, with_lengths):
    build, tokens = CONTAINERS[name]
    model = build().eval()
    exported = rx.export(model, None, lengths=with_lengths, padding_at_end=True)
    back = rx.load(exported)
    assert isinstance(back, rnnfast.Sequential)
    rng = np.random.default_rng(2)
    batch_first = bool(model.batch_first)
    for steps, batch in ((6, 4), (3, 1)):
        lengths = lengths_for(steps, batch)
        if tokens:
            x = token_batch(rng, steps, batch, batch_first, lengths)
        else:
            x = sequences(rng, steps, batch, batch_first)
        kwargs = {"lengths": lengths} if with_lengths else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rnnfast.nn.PaddingWarning)
            expected = model(x, **kwargs)
            got_back = back(x, **kwargs)
        got = run_ort(exported, {"x": x, "lengths": lengths})
        assert_outputs(got, expected)
        assert_outputs(got_back, expected, atol=1e-6)


def test_leaves_export_alone():
    rng = np.random.default_rng(0)
    emb = rnnfast.Embedding(V, D, seed=0)
    ids = rng.integers(0, V, (5, 3))
    model = rx.export(emb, None)
    assert_outputs(run_ort(model, {"x": ids}), emb(ids))
    dense = rnnfast.Dense(D, 3, seed=0)
    x = rng.standard_normal((5, 3, D)).astype(np.float32)
    model = rx.export(dense, None)
    assert_outputs(run_ort(model, {"x": x}), dense(x))
    assert isinstance(rx.load(model), rnnfast.Sequential)


class StartsWithDropout(rnnfast.Module):
    def __init__(self):
        super().__init__()
        self.drop = rnnfast.Dropout(0.2)
        self.rnn = rnnfast.RNN(D, H, seed=0, batch_first=True)

    def forward(self, x):
        return self.rnn(self.drop(x))


def test_module_traced_on_an_example_and_lengths_without_an_rnn():
    model = StartsWithDropout().eval()
    with pytest.raises(ValueError, match="pass example="):
        rx.export(model, None)
    x = sequences(np.random.default_rng(0), 5, 2, batch_first=True)
    exported = rx.export(model, None, example=x[:, :2])
    assert [o.name for o in exported.graph.output] == ["y", "h_n"]  # the RNN's whole return
    assert_outputs(run_ort(exported, {"x": x}), model(x))
    back = rx.load(exported)
    assert isinstance(back, rnnfast.RNN) and back.batch_first
    assert_outputs(back(x), model(x), atol=1e-6)
    dense = rnnfast.Sequential([rnnfast.Dense(D, 3, seed=0)])
    exported = rx.export(dense, None, lengths=True)  # no RNN reads them: nothing changes
    x = sequences(np.random.default_rng(1), 4, 2, batch_first=False)
    assert_outputs(run_ort(exported, {"x": x, "lengths": np.array([4, 1])}), dense(x))
    assert_outputs(rx.load(exported)(x), dense(x), atol=1e-6)


def test_export_leaves_the_model_as_it_was():
    model = Tagger().train()
    model.drop.p = 0.0  # no random masks: a training-mode model may be exported
    before = {k: v.copy() for k, v in model.state_dict().items()}
    rx.export(model, None)
    assert model.training and model.rnn.training and model.drop.training
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# ---- what raises -------------------------------------------------------------------------------


class NotAChain(rnnfast.Module):
    def __init__(self):
        super().__init__()
        self.rnn = rnnfast.RNN(D, H, seed=0)
        self.head = rnnfast.Dense(H, 2, seed=0)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[-1:])  # NumPy between the two layers


def test_what_onnx_cannot_express_raises_naming_the_option():
    with pytest.raises(ValueError, match="alpha=0.5"):
        rx.export(make_rnn({"alpha": 0.5}), None)
    with pytest.raises(ValueError, match=r"alpha=\[1.0, 0.3\]"):
        rx.export(make_rnn({"alpha": [1.0, 0.3], "num_layers": 2}), None)
    dilated = make_rnn({})
    dilated.dilation = 2
    with pytest.raises(ValueError, match="dilation=2"):
        rx.export(dilated, None)
    for option in ("input_dropout", "recurrent_dropout"):
        rnn = rnnfast.RNN(D, H, **{option: 0.2}).train()
        with pytest.raises(ValueError, match=f"{option}=0.2 in training mode.*model.eval"):
            rx.export(rnn, None)
        rx.export(rnn.eval(), None)  # no masks in eval mode
    rnn = rnnfast.RNN(D, H, num_layers=2, dropout=0.3)
    with pytest.raises(ValueError, match="dropout=0.3 in training mode"):
        rx.export(rnn, None)
    seq = rnnfast.Sequential([rnnfast.Dense(D, D), rnnfast.Dropout(0.4), rnnfast.RNN(D, H)])
    with pytest.raises(ValueError, match=r"Dropout\(p=0.4\) in training mode"):
        rx.export(seq, None)
    with pytest.raises(ValueError, match="stateful=True.*h0=True"):
        rx.export(make_rnn({"stateful": True}), None)
    rx.export(make_rnn({"stateful": True}), None, h0=True)
    with pytest.raises(ValueError, match="stateful=True"):
        rx.export(rnnfast.Sequential([make_rnn({"stateful": True})]), None)


def test_general_masks_raise():
    masked = rnnfast.Sequential([rnnfast.Embedding(V, D, mask_zero=True), rnnfast.RNN(D, H)])
    with pytest.raises(ValueError, match="mask_zero=True.*general mask.*padding_at_end=True"):
        rx.export(masked.eval(), None)
    padded = rnnfast.Sequential([rnnfast.Embedding(V, D, padding_idx=3), rnnfast.RNN(D, H)])
    with pytest.raises(ValueError, match="padding_idx=3"):
        rx.export(padded.eval(), None)
    # no RNN reads the padding: nothing to express
    rx.export(rnnfast.Sequential([rnnfast.Embedding(V, D, mask_zero=True)]).eval(), None)
    backwards = rnnfast.Sequential(
        [
            rnnfast.RNN(D, H, go_backwards=True, return_sequences=True),
            rnnfast.RNN(H, H),
        ]
    ).eval()
    rx.export(backwards, None)  # without lengths nothing is padded
    with pytest.raises(ValueError, match="go_backwards=True and lengths.*general mask"):
        rx.export(backwards, None, lengths=True)


def test_layers_and_forwards_export_cannot_write_raise():
    with pytest.raises(TypeError, match="JordanRNN"):
        rx.export(rnnfast.JordanRNN(D, H, 2), None)
    with pytest.raises(ValueError, match="not a plain chain.*self.head|head.*not the previous"):
        rx.export(NotAChain().eval(), None)
    with pytest.raises(ValueError, match="h0=True: a Sequential"):
        rx.export(rnnfast.Sequential([make_rnn({})]), None, h0=True)
    with pytest.raises(ValueError, match="merge_mode=None.*only the last layer"):
        rx.export(
            rnnfast.Sequential(
                [make_rnn({"bidirectional": True, "merge_mode": None}), rnnfast.Dense(H, 2)]
            ),
            None,
        )
    with pytest.raises(ValueError, match="opset"):
        rx.export(make_rnn({}), None, opset=9)
    with pytest.raises(TypeError, match="lengths"):
        rx.export(make_rnn({}), None, lengths=1)
    with pytest.raises(ValueError, match="width 6"):
        rx.export(rnnfast.Sequential([make_rnn({}), rnnfast.Dense(H + 1, 2)]), None)


# ---- a layer of the user's own: the emitter protocol ----------------------------------------


class Scaled(Layer):
    """A layer defined outside rnnfast, ``y = x * scale`` with one learnt vector: it takes part
    in export through ``onnx_emit`` (and ``onnx_input``, ``onnx_check``), as rnnfast's own
    layers do; no list of layer types knows it."""

    def __init__(self, width, dtype=np.float32):
        super().__init__(dtype)
        self.width = width
        self.add_parameter("scale", np.linspace(0.5, 2.0, width))

    def forward(self, x):
        self._cache = None
        return np.asarray(x, dtype=self.dtype) * self._params["scale"]

    def backward(self, d_out):
        raise NotImplementedError  # not needed here

    def onnx_input(self):
        return self.width

    def onnx_check(self, who):
        if self.width == 5:  # a stand-in for an option the graph cannot express
            raise ValueError(f"{who}: width=5 cannot be exported")

    def onnx_emit(self, exporter, flow, who):
        g = exporter.graph
        scale = g.initializer(exporter.float_params(self)["scale"], "scaled.scale")
        return flow.derive(g.op("Mul", [flow.value, scale]))


class ScaledExportTagger(rnnfast.Module):
    def __init__(self):
        super().__init__()
        self.scaled = Scaled(D)
        self.rnn = rnnfast.RNN(D, H, seed=0, batch_first=True, return_sequences=True)
        self.head = rnnfast.Sequential([rnnfast.Dense(H, 2, seed=0), Scaled(2)])

    def forward(self, x):
        return self.head(self.rnn(self.scaled(x)))


@pytest.mark.parametrize("with_lengths", [False, True], ids=["nolengths", "lengths"])
def test_a_users_layer_exports_through_its_emitter(with_lengths):
    rng = np.random.default_rng(4)
    x = sequences(rng, 6, 4, batch_first=True)
    lengths = lengths_for(6, 4)
    kwargs = {"lengths": lengths} if with_lengths else {}
    for model in (
        ScaledExportTagger().eval(),
        rnnfast.Sequential([Scaled(D), rnnfast.RNN(D, H, seed=1, batch_first=True)]).eval(),
    ):
        exported = rx.export(model, None, lengths=with_lengths)
        assert "Mul" in {n.op_type for n in exported.graph.node}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rnnfast.nn.PaddingWarning)
            expected = model(x, **kwargs)
        assert_outputs(run_ort(exported, {"x": x, "lengths": lengths}), expected)
    with pytest.raises(ValueError, match=r"Sequential\[1\]: width=5 cannot be exported"):
        rx.export(rnnfast.Sequential([rnnfast.Dense(D, 5), Scaled(5)]), None)


class Unwritable(Scaled):
    onnx_emit = None  # a layer export has no emitter for


def test_a_layer_without_an_emitter_is_refused_by_name():
    with pytest.raises(TypeError, match=r"Sequential\[1\]:.*onnx_emit; got Unwritable"):
        rx.export(rnnfast.Sequential([Scaled(D), Unwritable(D)]), None)

    class Wrapper(rnnfast.Module):
        def __init__(self):
            super().__init__()
            self.inner = Unwritable(D)

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(TypeError, match="export cannot write a Unwritable"):
        rx.export(Wrapper().eval(), None, example=np.zeros((3, 2, D), np.float32))


def test_load_raises_naming_the_op():
    helper = onnx.helper
    TP = onnx.TensorProto
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"], name="squash")],
        "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, ["T", "B", D])],
        [helper.make_tensor_value_info("y", TP.FLOAT, ["T", "B", D])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValueError, match=r"node 'squash' \(Sigmoid\): rnnfast does not read"):
        rx.load(model)
    # an RNN node with an option rnnfast does not have
    exported = rx.export(make_rnn({}), None)
    node = next(n for n in exported.graph.node if n.op_type == "RNN")
    node.attribute.append(helper.make_attribute("clip", 3.0))
    with pytest.raises(ValueError, match="clip"):
        rx.load(exported)


# ---- torch.onnx's graphs -----------------------------------------------------------------------

TORCH_RNNS = {
    "plain": {},
    "2layers-bidir": {"num_layers": 2, "bidirectional": True},
    "batch-first-bidir": {"batch_first": True, "bidirectional": True},
    "3layers-relu-nobias": {"num_layers": 3, "nonlinearity": "relu", "bias": False},
}


def _torch_export(torch, module, args, path, input_names, dynamic_axes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=False,
            input_names=input_names,
            output_names=["y", "h_n"],
            dynamic_axes=dynamic_axes,
        )


@pytest.mark.parametrize("config", TORCH_RNNS.values(), ids=TORCH_RNNS.keys())
@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
def test_load_torch_onnx_export_of_nn_rnn(tmp_path, config, with_h0):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.RNN(D, H, **config).eval()
    rows = module.num_layers * (2 if module.bidirectional else 1)
    bf = module.batch_first
    x = torch.randn((2, 5, D) if bf else (5, 2, D))
    args = (x, torch.zeros(rows, 2, H)) if with_h0 else (x,)
    names = ["x", "h0"] if with_h0 else ["x"]
    axes = {"x": {0: "B", 1: "T"} if bf else {0: "T", 1: "B"}}
    if with_h0:
        axes["h0"] = {1: "B"}
    path = tmp_path / "torch_rnn.onnx"
    _torch_export(torch, module, args, path, names, axes)
    layer = rx.load(path)
    assert isinstance(layer, rnnfast.RNN)
    assert layer.batch_first == bf and layer.num_layers == module.num_layers
    for steps, batch in ((7, 3), (1, 1)):
        x = torch.randn((batch, steps, D) if bf else (steps, batch, D))
        h0 = torch.randn(rows, batch, H)
        with torch.no_grad():
            y, h_n = module(x, h0) if with_h0 else module(x)
        got = layer(x.numpy(), h0.numpy()) if with_h0 else layer(x.numpy())
        assert_outputs(got, (y.numpy(), h_n.numpy()))


def test_load_torch_onnx_export_of_embedding_rnn_linear(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, D)
            self.rnn = torch.nn.RNN(D, H, num_layers=2, bidirectional=True, batch_first=True)
            self.lin = torch.nn.Linear(2 * H, 3)

        def forward(self, ids):
            y, h = self.rnn(self.emb(ids))
            return self.lin(y), h

    torch.manual_seed(0)
    net = Net().eval()
    ids = torch.randint(0, V, (2, 6))
    path = tmp_path / "net.onnx"
    _torch_export(torch, net, (ids,), path, ["ids"], {"ids": {0: "B", 1: "T"}})
    graph_ops = {n.op_type for n in onnx.load(path).graph.node}
    assert {"RNN", "Gather", "MatMul", "Add"} <= graph_ops
    model = rx.load(path)
    assert isinstance(model, rx.OnnxModel)
    assert [type(layer).__name__ for layer in model.layers] == ["Embedding", "RNN", "Linear"]
    ids = torch.randint(0, V, (3, 8))
    with torch.no_grad():
        y, h_n = net(ids)
    assert_outputs(model(ids.numpy()), (y.numpy(), h_n.numpy()))


# ---- quantized models (rnnfast.quantize): exported with their dequantized weights ---------------


@pytest.mark.parametrize("mode", ["bf16", "int8"])
@pytest.mark.parametrize("name", CONTAINERS)
def test_quantized_export_matches_onnxruntime_within_the_quantization_bound(name, mode):
    """The ONNX RNN op has no integer or bf16 weights: a quantized copy exports the weights it
    computes with, dequantized to float32. onnxruntime then computes exactly what the float
    model with those weights computes (rnnfast.onnx.load gives that model back), and differs
    from the quantized copy only by the copy's rounding of its activations: within the
    quantization's stated error bound (rnnfast.quantize.ERROR_BOUND)."""
    from test_quantize import rel_error

    from rnnfast.quantize import ERROR_BOUND

    build, tokens = CONTAINERS[name]
    model = rnnfast.quantize(build().eval(), mode)
    exported = rx.export(model, None, lengths=True, padding_at_end=True)
    onnx.checker.check_model(exported, full_check=True)
    back = rx.load(exported)
    rng = np.random.default_rng(5)
    batch_first = bool(model.batch_first)
    steps, batch = 7, 5
    lengths = lengths_for(steps, batch)
    if tokens:
        x = token_batch(rng, steps, batch, batch_first, lengths)
    else:
        x = sequences(rng, steps, batch, batch_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rnnfast.nn.PaddingWarning)
        quantized = flat(model(x, lengths=lengths))
        float_back = back(x, lengths=lengths)
    got = run_ort(exported, {"x": x, "lengths": lengths})
    assert_outputs(got, float_back)
    for g, q in zip(flat(got), quantized):
        assert rel_error(g, q) < ERROR_BOUND[mode]
        assert not np.array_equal(g, q)  # the copy really computed in low precision
