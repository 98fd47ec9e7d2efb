"""rnnfast.quantize on the gated layers (GRU, LSTM): every configuration within the stated
error bound of the float32 layer (quantize.ERROR_BOUND) on every quantized path this CPU runs,
step and stateful use, the sequence-to-sequence decoders, save / load / pickle, ONNX export of
the copy, summary. The kernels' exactness is in tests/test_quantized_gated_kernels.py."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rnnfast
from rnnfast import _core
from rnnfast.nn import QuantizedGRU, QuantizedLSTM
from rnnfast.nn.quantized import gated as quantized_gated
from rnnfast.quantize import ERROR_BOUND

MODES = ("bf16", "int8")
PATHS = _core.quantized_paths()


@pytest.fixture(autouse=True)
def quantized_products(monkeypatch):
    """These layers are small: without this they would take the float32 products meant for
    layers too small to gain from quantized ones (tested on their own below)."""
    monkeypatch.setattr(quantized_gated, "FALLBACK_WEIGHTS", 0)


@pytest.fixture(params=PATHS)
def path(request):
    _core.set_quantized_path(request.param)
    yield request.param
    _core.set_quantized_path("")


def rel_error(actual, expected):
    expected = np.asarray(expected, dtype=np.float64)
    return np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected)


def parts(out):
    """Every array of a call's output, flattened out of tuples and lists."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in parts(o)]
    return [] if out is None else [out]


FORMS = [
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"reset_after": False}),
    ("GRU", {"reset_after": False, "num_layers": 2, "bias": False}),
    ("GRU", {"activation": "relu", "recurrent_activation": "hard_sigmoid"}),
    ("GRU", {"batch_first": True, "return_sequences": False, "return_state": True}),
    ("GRU", {"num_layers": 2, "dilation": [1, 2]}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "merge_mode": "sum"}),
    ("LSTM", {"proj_size": 9}),
    ("LSTM", {"proj_size": 9, "bidirectional": True, "num_layers": 2}),
    ("LSTM", {"bias": False, "recurrent_activation": "hard_sigmoid"}),
    ("LSTM", {"go_backwards": True, "return_sequences": True, "return_state": True}),
    ("LSTM", {"num_layers": 2, "residual": True}),
]


def form_id(f):
    return f[0] + ":" + ",".join(f"{k}={v}" for k, v in f[1].items())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", FORMS, ids=form_id)
@pytest.mark.parametrize("with_lengths", [False, True])
def test_every_form_stays_within_the_error_bound(form, mode, with_lengths, rng):
    cls, options = getattr(rnnfast, form[0]), form[1]
    T, B, D, H = 9, 4, 5, 21
    layer = cls(D, H, seed=3, **options).eval()
    q = rnnfast.quantize(layer, mode)
    assert isinstance(q, QuantizedGRU if form[0] == "GRU" else QuantizedLSTM)
    shape = (B, T, D) if options.get("batch_first") else (T, B, D)
    x = rng.standard_normal(shape).astype(np.float32)
    lengths = np.array([9, 3, 0, 6]) if with_lengths else None
    expected, got = layer(x, lengths=lengths), q(x, lengths=lengths)
    assert type(got) is type(expected)
    for e, g in zip(parts(expected), parts(got)):
        assert g.shape == e.shape and g.dtype == np.float32
        if np.linalg.norm(e):
            assert rel_error(g, e) < ERROR_BOUND[mode]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_every_path_stays_within_the_error_bound(name, mode, path, rng):
    layer = getattr(rnnfast, name)(7, 40, num_layers=2, seed=0).eval()
    x = rng.standard_normal((12, 3, 7)).astype(np.float32)
    q = rnnfast.quantize(layer, mode)
    for e, g in zip(parts(layer(x)), parts(q(x))):
        assert rel_error(g, e) < ERROR_BOUND[mode], path


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,options", [("GRU", {}), ("GRU", {"reset_after": False}),
                                          ("LSTM", {}), ("LSTM", {"proj_size": 6})])  # fmt: skip
def test_step_and_stateful_equal_the_whole_sequence(name, options, mode, rng):
    cls = getattr(rnnfast, name)
    T, B, D, H = 7, 3, 5, 19
    q = rnnfast.quantize(cls(D, H, num_layers=2, seed=1, **options), mode)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    y, state = q(x)
    s, outs = None, []
    for t in range(T):
        out, s = q.step(x[t], s)
        outs.append(out)
    np.testing.assert_allclose(np.stack(outs), y, rtol=1e-5, atol=1e-6)
    for a, b in zip(parts(s), parts(state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the one-layer streaming hot path and the unbatched form
    one = rnnfast.quantize(cls(D, H, seed=2, **options), mode)
    y1, _ = one(x)
    s, outs = None, []
    for t in range(T):
        out, s = one.step(x[t], s)
        outs.append(out)
    np.testing.assert_allclose(np.stack(outs), y1, rtol=1e-5, atol=1e-6)
    out0, _ = one.step(x[0, 0])
    np.testing.assert_allclose(out0, y1[0, 0], rtol=1e-5, atol=1e-6)
    # stateful: windows of a sequence carry the state, as one call over all of it
    st = rnnfast.quantize(cls(D, H, stateful=True, seed=1, **options), mode)
    whole = st(x)[0]
    st.reset_state()
    windows = [st(x[:3])[0], st(x[3:])[0]]
    np.testing.assert_allclose(np.concatenate(windows), whole, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_seq2seq_decodes_on_the_quantized_gated_copy(cell, method, rng):
    model = rnnfast.Seq2Seq(12, 13, embed_dim=8, hidden_size=24, context="both", cell=cell, seed=0)
    model.eval()
    q = rnnfast.quantize(model, "int8")
    src = rng.integers(1, 12, size=(3, 6))
    lengths = np.array([6, 4, 2])
    kw = {"beam_width": 3} if method == "beam" else {}
    tokens, scores = q.generate(src, lengths, max_len=7, method=method, bos=1, eos=2, **kw)
    assert tokens.shape == (3, 7) and np.all(np.isfinite(scores))
    fed = np.concatenate([np.ones((3, 1), np.int64), tokens[:, :-1]], axis=1)
    assert rel_error(q(src, lengths, fed), model(src, lengths, fed)) < ERROR_BOUND["int8"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,options", [("GRU", {"bidirectional": True}),
                                          ("GRU", {"reset_after": False}),
                                          ("LSTM", {"proj_size": 5, "num_layers": 2})])  # fmt: skip
def test_save_load_pickle_and_deep_copy_give_the_copy_back(name, options, mode, tmp_path, rng):
    q = rnnfast.quantize(getattr(rnnfast, name)(6, 18, seed=0, **options), mode)
    x = rng.standard_normal((5, 2, 6)).astype(np.float32)
    rnnfast.save(q, tmp_path / "q.npz")
    with np.load(tmp_path / "q.npz", allow_pickle=False) as f:
        kinds = {f[k].dtype for k in f.files if not k.startswith("__")}
    assert (np.dtype(np.int8) if mode == "int8" else np.dtype(np.uint16)) in kinds
    copies = [rnnfast.load(tmp_path / "q.npz"), pickle.loads(pickle.dumps(q)), copy.deepcopy(q)]
    for back in copies:
        assert type(back) is type(q) and back.quantized == mode
        for a, b in zip(parts(back(x)), parts(q(x))):
            np.testing.assert_array_equal(a, b)


def test_biases_are_summed_only_where_the_cell_adds_the_sum():
    """PyTorch's GRU keeps b_hn inside r * (W_hn h + b_hn): both biases stay; the LSTM and
    the GRU with reset_after=False add b_ih + b_hh as one, as the Elman layer's copy does."""
    gru = rnnfast.quantize(rnnfast.GRU(4, 8), "int8").state_dict()
    assert {"bias_ih_l0", "bias_hh_l0"} <= set(gru) and "bias_l0" not in gru
    for layer in (rnnfast.LSTM(4, 8), rnnfast.GRU(4, 8, reset_after=False)):
        q = rnnfast.quantize(layer, "int8")
        state = q.state_dict()
        assert "bias_l0" not in layer.state_dict() and "bias_l0" in state
        np.testing.assert_array_equal(
            state["bias_l0"], layer.state_dict()["bias_ih_l0"] + layer.state_dict()["bias_hh_l0"]
        )
        # the float layer's names again, for an export of the copy
        params = q.dequantized_params()
        np.testing.assert_array_equal(params["bias_ih_l0"], state["bias_l0"])
        assert not params["bias_hh_l0"].any()


def _native(mode):
    """Whether this CPU's active path has the quantized kind's own instructions."""
    return _core.quantized_path(mode) in quantized_gated.NATIVE_PATHS[mode]


@pytest.mark.parametrize("mode", MODES)
def test_summary_shows_the_weight_type_bytes_and_no_fallback(mode, capsys):
    layer = rnnfast.LSTM(8, 32, num_layers=2)
    q = rnnfast.quantize(layer, mode)
    text = q.summary()
    per_weight = 1 if mode == "int8" else 2
    weights = (8 * 128 + 32 * 128) + (32 * 128 + 32 * 128)
    scales = 4 * 4 * 128 if mode == "int8" else 0
    assert q.nbytes == per_weight * weights + scales + 2 * 4 * 128  # one summed bias per layer
    assert f"{q.nbytes:,}" in text and mode in text
    assert f"float32: {sum(p.nbytes for p in layer.parameters()):,}" in text
    if _native(mode):
        assert "Products in float32" not in text  # every configuration runs quantized
    else:  # a CPU without the kind's instructions (AVX2 alone): float32 products, and why
        assert f"Products in float32 (dequantized weights): the {mode} path here is" in text


def test_a_general_keras_mask_is_refused_with_what_to_do(rng):
    q = rnnfast.quantize(rnnfast.GRU(3, 4), "int8")
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    mask = np.ones((2, 5), bool)
    mask[0, 2] = False  # a hole inside the sequence
    with pytest.raises(ValueError, match="mask: the quantized kernels run each sequence"):
        q(x, mask=mask)


@pytest.mark.parametrize("name,options", [("GRU", {}), ("GRU", {"reset_after": False}),
                                          ("LSTM", {"bidirectional": True})])  # fmt: skip
def test_the_copy_exports_to_onnx_with_its_dequantized_weights(name, options, rng):
    """As the Elman layer's copy (tests/io/test_onnx.py): the ONNX ops take float weights, so
    the export holds the weights the copy computes with, dequantized; onnxruntime then gives the
    float layer on those weights, within the bound of the copy itself."""
    onnxruntime = pytest.importorskip("onnxruntime")
    layer = getattr(rnnfast, name)(4, 10, seed=0, **options).eval()
    q = rnnfast.quantize(layer, "int8")
    exported = rnnfast.onnx.export(q, None)
    x = rng.standard_normal((6, 2, 4)).astype(np.float32)
    session = onnxruntime.InferenceSession(
        exported.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = session.run(None, {session.get_inputs()[0].name: x})
    twin = getattr(rnnfast, name)(4, 10, seed=1, **options).eval()
    twin.load_state_dict(q.dequantized_params())
    for g, e in zip(got, parts(twin(x))):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    for g, e in zip(got, parts(q(x))):
        assert rel_error(g, e) < ERROR_BOUND["int8"]


def test_small_layers_and_slow_paths_multiply_in_float32_and_say_so(monkeypatch, rng):
    """Where quantized products would be slower than float32 ones (a layer too small to gain,
    a path without the kind's instructions), the copy multiplies its dequantized weights in
    float32: the float layer on those weights, exactly, and summary() says why."""
    x = rng.standard_normal((6, 3, 4)).astype(np.float32)
    for name in ("GRU", "LSTM"):
        layer = getattr(rnnfast, name)(4, 8, seed=0).eval()
        q = rnnfast.quantize(layer, "int8")
        monkeypatch.setattr(quantized_gated, "FALLBACK_WEIGHTS", 10**9)
        # the path's reason comes first: a CPU without int8 instructions (AVX2 alone) says so
        reason = "too few to gain" if _native("int8") else "the int8 path here is"
        assert reason in q.float32_fallback()
        assert "Products in float32 (dequantized weights)" in q.summary()
        twin = getattr(rnnfast, name)(4, 8, seed=1).eval()
        twin.load_state_dict(q.dequantized_params())
        for a, b in zip(parts(q(x)), parts(twin(x))):
            np.testing.assert_array_equal(a, b)
        out, _ = q.step(x[0])  # the step kernel: the same sums in another order
        np.testing.assert_allclose(out, parts(twin(x[:1]))[0][0], rtol=1e-5, atol=1e-7)
        monkeypatch.setattr(quantized_gated, "FALLBACK_WEIGHTS", 0)
        if _native("int8"):  # else float32 products whatever the size
            assert q.float32_fallback() is None
            assert not np.array_equal(parts(q(x))[0], parts(twin(x))[0])  # quantized products
    for path in ("baseline", "avx2"):
        if path in _core.quantized_paths("int8"):
            _core.set_quantized_path(path)
            try:
                assert f"the int8 path here is {path}" in q.float32_fallback()
            finally:
                _core.set_quantized_path("")
