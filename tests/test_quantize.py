"""rnnfast.quantize: which models it copies and how (every structure, step and stateful use,
decoding), the error against the float32 model (the bounds stated once, below), save/load,
summary, and what it refuses. Run on every quantized path this machine has. The kernels'
exactness against the NumPy model of the number formats is in tests/nn/test_quantized.py."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

import rnnfast
from rnnfast import _core, decoding, optim, training
from rnnfast.nn.quantized.layers import QuantizedLayer
from rnnfast.quantize import ERROR_BOUND

MODES = ("bf16", "int8")
PATHS = _core.quantized_paths()

# ---- the error bounds against float32: stated once, in rnnfast.quantize (ERROR_BOUND) -----------
REL_ERROR = ERROR_BOUND


@pytest.fixture(params=PATHS)
def path(request):
    """Each quantized path this CPU runs, forced for the test (automatic again after)."""
    _core.set_quantized_path(request.param)
    yield request.param
    _core.set_quantized_path("")


def rel_error(actual, expected):
    expected = np.asarray(expected, dtype=np.float64)
    return np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected)


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def data(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- the RNN in every form it runs --------------------------------------------------------------

RNN_FORMS = [
    {},
    {"num_layers": 3},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "merge_mode": "sum"},
    {"nonlinearity": "relu"},
    {"alpha": 0.5},
    {"num_layers": 2, "alpha": [0.3, 1.0], "nonlinearity": "relu"},
    {"bias": False},
    {"batch_first": True, "return_sequences": False},
    {"go_backwards": True, "return_sequences": True, "return_state": True},
    {"num_layers": 2, "residual": True},
    {"num_layers": 2, "dilation": [1, 2]},
    {"bidirectional": True, "merge_mode": None, "return_sequences": True},
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "form", RNN_FORMS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items())
)
@pytest.mark.parametrize("with_lengths", [False, True])
def test_rnn_forms_stay_within_the_error_bound(form, mode, with_lengths, path, rng):
    T, B, D, H = 9, 4, 5, 17
    layer = rnnfast.RNN(D, H, seed=3, **form).eval()
    q = rnnfast.quantize(layer, mode)
    x = data(rng, B, T, D) if form.get("batch_first") else data(rng, T, B, D)
    lengths = np.array([9, 3, 0, 6]) if with_lengths else None
    expected, got = layer(x, lengths=lengths), q(x, lengths=lengths)
    assert type(got) is type(expected)
    for e, g in zip(expected, got) if isinstance(expected, (tuple, list)) else [(expected, got)]:
        assert g.shape == e.shape and g.dtype == np.float32
        if np.linalg.norm(e):
            assert rel_error(g, e) < REL_ERROR[mode], (mode, path)
    if with_lengths and not form.get("go_backwards"):
        # padded steps output zeros, exactly as the float layer
        y = first(got)
        if isinstance(y, np.ndarray) and y.ndim == 3:
            y = y if form.get("batch_first") else y.swapaxes(0, 1)
            assert not y[2].any() and not y[1, 3:].any()


def _example_models():
    """The examples' models at their default sizes (untrained: PyTorch's initialisation), with
    inputs of their kind: (name, model, input)."""
    rng = np.random.default_rng(0)
    letters = np.eye(57, dtype=np.float32)[rng.integers(0, 57, size=(64, 12))]
    names = rnnfast.Sequential(
        [
            rnnfast.RNN(57, 128, batch_first=True, return_sequences=False, seed=0),
            rnnfast.Dense(128, 18, seed=1),
        ]
    )
    charlm = rnnfast.Sequential(
        [
            rnnfast.Embedding(65, 64, seed=0),
            rnnfast.RNN(64, 256, batch_first=True, return_sequences=True, seed=1),
            rnnfast.Linear(256, 65, seed=2),
        ]
    )
    sunspots = rnnfast.Sequential(
        [
            rnnfast.RNN(1, 50, batch_first=True, return_sequences=True, seed=0),
            rnnfast.Dropout(0.2),
            rnnfast.RNN(50, 100, batch_first=True, return_sequences=False, seed=2),
            rnnfast.Dropout(0.2),
            rnnfast.Dense(100, 1, seed=4),
        ]
    )
    months = np.sin(0.1 * np.arange(24 + 32))[np.arange(32)[:, None] + np.arange(24)]
    return [
        ("names", names, letters),
        ("charlm", charlm, rng.integers(0, 65, size=(32, 100))),
        ("sunspots", sunspots, (0.5 + 0.4 * months[..., None]).astype(np.float32)),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,model,x", _example_models(), ids=[m[0] for m in _example_models()])
def test_the_examples_models_stay_within_the_error_bound(name, model, x, mode, path):
    model.eval()
    expected = model(x)
    assert rel_error(rnnfast.quantize(model, mode)(x), expected) < REL_ERROR[mode], path


@pytest.mark.parametrize("mode", MODES)
def test_the_original_is_untouched_and_the_copy_is_separate(mode, rng):
    layer = rnnfast.RNN(4, 6, num_layers=2, stateful=True, seed=0)
    before = layer.state_dict()
    x = data(rng, 5, 2, 4)
    layer.eval()
    y_before = first(layer(x))
    layer.reset_state()
    q = rnnfast.quantize(layer, mode)
    q(x)  # advances the copy's state only
    assert layer._state is None
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    np.testing.assert_array_equal(first(layer(x)), y_before)
    layer.alpha = 0.5  # options of the original do not reach the copy
    assert q.alpha == 1.0
    # dtypes stay the same objects: step() takes its fast path on ``h.dtype is layer._dtype``
    assert q.dtype is layer.dtype is np.dtype(np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("num_layers", [1, 2])
def test_step_and_stateful_equal_the_whole_sequence(mode, num_layers, path, rng):
    T, B, D, H = 7, 3, 5, 33
    layer = rnnfast.RNN(D, H, num_layers=num_layers, nonlinearity="relu", alpha=0.7, seed=1)
    q = rnnfast.quantize(layer, mode)
    x = data(rng, T, B, D)
    h0 = data(rng, num_layers, B, H)  # |h0| > 1: int8's dynamic scale for those rows
    y, h_n = q(x, h0)
    h, outs = h0, []
    for t in range(T):
        out, h = q.step(x[t], h)
        outs.append(out.copy())
        h = h.copy()
    np.testing.assert_allclose(np.stack(outs), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, h_n, rtol=1e-5, atol=1e-6)
    # stateful: windows of a sequence carry the state, as one call over all of it
    s = rnnfast.quantize(rnnfast.RNN(D, H, num_layers=num_layers, stateful=True, seed=1), mode)
    whole = first(s(x))
    s.reset_state()
    parts = [first(s(x[:3])), first(s(x[3:]))]
    np.testing.assert_allclose(np.concatenate(parts), whole, rtol=1e-5, atol=1e-6)
    # unbatched step, as the float layer's
    out1, h1 = q.step(x[0, 0], h0[:, 0])
    assert out1.shape == (H,) and h1.shape == (num_layers, H)


# ---- the other layers and the containers ------------------------------------------------------


class Tagger(rnnfast.Module):
    def __init__(self, vocab=20, tags=5, dim=8, hidden=16):
        super().__init__()
        self.embed = rnnfast.Embedding(vocab, dim, mask_zero=True, seed=0)
        self.rnn = rnnfast.RNN(
            dim, hidden, bidirectional=True, batch_first=True, return_sequences=True, seed=1
        )
        self.drop = rnnfast.Dropout(0.3, seed=2)
        self.head = rnnfast.Dense(2 * hidden, tags, seed=3)

    def forward(self, ids):
        return self.head(self.drop(self.rnn(self.embed(ids))))


def _models():
    """(name, float model, its input) for each kind of container and layer."""
    ids = np.array([[3, 4, 5, 1, 0, 0], [7, 2, 9, 9, 9, 1], [5, 0, 0, 0, 0, 0]])
    return [
        ("linear", lambda: rnnfast.Linear(6, 4, seed=0), lambda r: data(r, 3, 2, 6)),
        ("embedding", lambda: rnnfast.Embedding(20, 6, seed=0), lambda r: ids),
        (
            "sequential",
            lambda: rnnfast.Sequential(
                [
                    rnnfast.Embedding(20, 8, mask_zero=True, seed=0),
                    rnnfast.RNN(8, 16, batch_first=True, return_sequences=True, seed=1),
                    rnnfast.Dropout(0.2),
                    rnnfast.RNN(16, 12, batch_first=True, return_sequences=False, seed=2),
                    rnnfast.Dense(12, 3, seed=3),
                ]
            ),
            lambda r: ids,
        ),
        ("module", Tagger, lambda r: ids),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,build,make_input", _models(), ids=[m[0] for m in _models()])
def test_layers_and_containers_stay_within_the_error_bound(name, build, make_input, mode, rng):
    model = build()
    model.eval()
    x = make_input(rng)
    q = rnnfast.quantize(model, mode)
    expected, got = model(x), q(x)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert rel_error(got, expected) < REL_ERROR[mode]
    assert q.quantized == mode
    if hasattr(model, "named_children"):
        leaves = [c for _, c in q.named_children()]
        assert leaves and all(isinstance(c, QuantizedLayer) for c in leaves)
        # the padding travels as in the float model
        if model.output_mask is None:
            assert q.output_mask is None
        else:
            np.testing.assert_array_equal(q.output_mask, model.output_mask)


@pytest.mark.parametrize("mode", MODES)
def test_embedding_rows_are_quantized_one_by_one(mode):
    emb = rnnfast.Embedding(5, 4, seed=0)
    emb._params["weight"][2] *= 1000  # one large row does not coarsen the others
    q = rnnfast.quantize(emb, mode)
    ids = np.arange(5)
    table = emb(ids)
    got = q(ids)
    for row in range(5):
        assert rel_error(got[row], table[row]) < (4e-3 if mode == "bf16" else 1e-2)


@pytest.mark.parametrize("mode", MODES)
def test_fused_embedding_input_gives_the_embedded_result(mode, rng):
    emb = rnnfast.Embedding(6, 5, seed=0)
    rnn = rnnfast.RNN(5, 7, seed=1)
    qe, qr = rnnfast.quantize(emb, mode), rnnfast.quantize(rnn, mode)
    ids = rng.integers(0, 6, size=(8, 3))
    y1, h1 = qr(ids, embedding=qe)
    y2, h2 = qr(qe(ids))
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(h1, h2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["greedy", "sample", "beam"])
def test_seq2seq_decodes_on_the_quantized_copy(mode, method, rng):
    model = rnnfast.Seq2Seq(12, 13, embed_dim=8, hidden_size=24, context="both", seed=0)
    model.eval()
    q = rnnfast.quantize(model, mode)
    src = rng.integers(1, 12, size=(3, 6))
    lengths = np.array([6, 4, 2])
    kw = {"beam_width": 3} if method == "beam" else {"rng": 0} if method == "sample" else {}
    tokens, scores = q.generate(src, lengths, max_len=7, method=method, bos=1, eos=2, **kw)
    assert tokens.shape == (3, 7) and np.all(np.isfinite(scores))
    # the decoder's step equals its teacher-forced forward on the tokens it chose
    fed = np.concatenate([np.ones((3, 1), np.int64), tokens[:, :-1]], axis=1)
    logits = q(src, lengths, fed)
    log_probs = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    if method == "greedy":
        alive = np.cumsum(tokens == 2, axis=1) - (tokens == 2) == 0  # up to its EOS
        np.testing.assert_array_equal(log_probs.argmax(axis=2)[alive], tokens[alive])
    # and the forward stays within the bound of the float model's
    assert rel_error(logits, model(src, lengths, fed)) < REL_ERROR[mode]
    # decoding through rnnfast.decoding with a step function of the copy's layers
    step_fn, state = q._inference(src, lengths)
    out, _ = decoding.greedy_decode(step_fn, state, 1, 4)
    assert out.shape == (3, 4)


# ---- save and load ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,build,make_input", _models(), ids=[m[0] for m in _models()])
def test_save_and_load_give_the_quantized_model_back(name, build, make_input, mode, tmp_path, rng):
    q = rnnfast.quantize(build(), mode)
    path = tmp_path / "q.npz"
    q.save(path) if hasattr(q, "save") else rnnfast.save(q, path)
    with np.load(path, allow_pickle=False) as f:  # raw quantized arrays, no pickle
        kinds = {f[k].dtype for k in f.files if not k.startswith("__")}
    assert (np.dtype(np.int8) if mode == "int8" else np.dtype(np.uint16)) in kinds
    back = rnnfast.load(path, cls=Tagger) if name == "module" else rnnfast.load(path)
    assert type(back) is type(q) and back.quantized == mode
    x = make_input(rng)
    np.testing.assert_array_equal(back(x), q(x))
    for k, v in q.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], v)


@pytest.mark.parametrize("mode", MODES)
def test_a_seq2seq_saved_quantized_loads_quantized(mode, tmp_path, rng):
    q = rnnfast.quantize(rnnfast.Seq2Seq(9, 10, 6, 12, seed=0), mode)
    rnnfast.save(q, tmp_path / "s.npz")
    back = rnnfast.load(tmp_path / "s.npz", cls=rnnfast.Seq2Seq)
    src = rng.integers(0, 9, (2, 5))
    np.testing.assert_array_equal(
        back.generate(src, max_len=5, bos=1)[0], q.generate(src, max_len=5, bos=1)[0]
    )


@pytest.mark.parametrize("name,build,make_input", _models(), ids=[m[0] for m in _models()])
def test_a_quantized_copy_pickles_and_deep_copies(name, build, make_input, rng):
    """The kernels' packed matrices are not picklable: a copy rebuilds them from the raw arrays."""
    q = rnnfast.quantize(build(), "int8")
    x = make_input(rng)
    for back in (pickle.loads(pickle.dumps(q)), copy.deepcopy(q)):
        assert type(back) is type(q) and back.quantized == "int8"
        np.testing.assert_array_equal(first(back(x)), first(q(x)))


def test_loading_raw_arrays_checks_them():
    q = rnnfast.quantize(rnnfast.Linear(4, 3, seed=0), "int8")
    state = q.state_dict()
    assert state["weight"].dtype == np.int8 and state["weight_scale"].dtype == np.float32
    bad = {**state, "weight": state["weight"].astype(np.float32)}
    with pytest.raises(ValueError, match="weight: expected a int8 array"):
        q.load_state_dict(bad)
    with pytest.raises(ValueError, match="missing key"):
        q.load_state_dict({"weight": state["weight"]})
    np.testing.assert_array_equal(q.state_dict()["weight"], state["weight"])  # unchanged


# ---- summary -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_summary_shows_the_weight_type_and_bytes(mode, capsys):
    model = rnnfast.Sequential(
        [rnnfast.RNN(8, 32, num_layers=2, return_sequences=False), rnnfast.Dense(32, 4)]
    )
    q = rnnfast.quantize(model, mode)
    text = q.summary()
    assert capsys.readouterr().out.strip() == text.strip()
    rnn, dense = q.layers
    per_weight = 1 if mode == "int8" else 2
    # the RNN: W_ih, W_hh (and int8's row scales) per layer, one float32 bias per layer
    weights = (8 * 32 + 32 * 32) + (32 * 32 + 32 * 32)
    scales = 4 * 4 * 32 if mode == "int8" else 0
    assert rnn.nbytes == per_weight * weights + scales + 2 * 4 * 32
    assert dense.nbytes == per_weight * 32 * 4 + (4 * 4 if mode == "int8" else 0) + 4 * 4
    for layer in (rnn, dense):
        assert f"{mode}      {layer.nbytes:,}" in text or f"{layer.nbytes:,}" in text
    total = rnn.nbytes + dense.nbytes
    assert f"Total weight bytes: {total:,}" in text
    float_bytes = sum(p.nbytes for p in model.parameters())  # what the float model stores
    assert f"float32: {float_bytes:,}" in text
    # a layer's own summary, and a container without a Keras table (Module)
    assert f"{rnn.nbytes:,}" in rnn.summary()
    module_text = rnnfast.quantize(Tagger(), mode).summary()
    assert "QuantizedEmbedding" in module_text and mode in module_text
    float_text = Tagger().summary()  # float models tell their dtype the same way
    assert "float32" in float_text


# ---- what it refuses -------------------------------------------------------------------------


@pytest.mark.parametrize("name,build,make_input", _models(), ids=[m[0] for m in _models()])
def test_training_a_quantized_copy_raises(name, build, make_input, rng):
    q = rnnfast.quantize(build(), "int8")
    y = q(make_input(rng))
    with pytest.raises(RuntimeError, match="quantized .int8. inference copy.*train the float32"):
        q.backward(np.zeros_like(y))
    with pytest.raises(RuntimeError, match="inference copy"):
        q.train()
    assert q.training is False
    with pytest.raises(RuntimeError, match="inference copy"):
        optim.Adam(q)
    with pytest.raises(RuntimeError, match="inference copy"):
        q.zero_grad()
    q.eval()  # eval mode is what it is in


def test_fit_and_train_batch_raise():
    q = rnnfast.quantize(
        rnnfast.Sequential([rnnfast.RNN(3, 4, return_sequences=False), rnnfast.Dense(4, 2)]),
        "bf16",
    )
    x = np.zeros((5, 6, 3), np.float32)
    float_model = rnnfast.Linear(2, 2)  # an optimizer of another model gets fit as far as train()
    with pytest.raises(RuntimeError, match="train: .*inference copy"):
        training.fit(
            q, x, np.zeros((6, 2), np.float32), loss="mse", optimizer=optim.SGD(float_model, lr=0.1)
        )
    s = rnnfast.quantize(rnnfast.Seq2Seq(5, 5, 4, 4), "int8")
    ids = np.ones((2, 3), np.int64)
    with pytest.raises(RuntimeError, match="train_batch: .*inference copy"):
        s.train_batch(ids, None, ids, ids, None)


def test_bad_mode_names_the_allowed_ones():
    for mode in ("fp8", "INT8", None, 8):
        with pytest.raises(ValueError, match=r"mode: expected one of \('bf16', 'int8'\)"):
            rnnfast.quantize(rnnfast.Linear(2, 2), mode)


def test_float64_models_are_refused_with_the_conversion():
    model = rnnfast.Sequential([rnnfast.RNN(3, 4, dtype=np.float64), rnnfast.Linear(4, 2)])
    with pytest.raises(TypeError, match=r"model.layers\[0\]: RNN has dtype float64.*float32"):
        rnnfast.quantize(model, "int8")
    # the conversion the message gives works
    model32 = rnnfast.Sequential([rnnfast.RNN(3, 4), rnnfast.Linear(4, 2)])
    model32.load_state_dict(model.state_dict())
    rnnfast.quantize(model32, "int8")


def test_quantizing_twice_is_refused():
    q = rnnfast.quantize(rnnfast.RNN(3, 4), "int8")
    with pytest.raises(ValueError, match="already a quantized .int8. inference copy"):
        rnnfast.quantize(q, "bf16")
    with pytest.raises(ValueError, match=r"model.layers\[0\]: QuantizedRNN is already"):
        rnnfast.quantize(rnnfast.Sequential([q]), "int8")


def test_layers_without_a_quantized_form_are_named():
    model = rnnfast.Sequential([rnnfast.JordanRNN(3, 4, 2)])
    with pytest.raises(ValueError, match=r"model.layers\[0\]: a JordanRNN cannot be quantized"):
        rnnfast.quantize(model, "int8")

    class MyRNN(rnnfast.RNN):
        pass

    with pytest.raises(ValueError, match="a MyRNN cannot be quantized"):
        rnnfast.quantize(MyRNN(3, 4), "int8")


def test_a_general_keras_mask_is_refused_with_what_to_do(rng):
    q = rnnfast.quantize(rnnfast.RNN(3, 4, batch_first=True), "int8")
    x = data(rng, 2, 5, 3)
    holes = np.array([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    with pytest.raises(ValueError, match="mask: .*not a prefix.*lengths="):
        q(x, mask=holes)
    prefix = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)
    with pytest.raises(ValueError, match="zero_output_for_mask False"):
        q(x, mask=prefix)  # Keras's default repeats the previous output at masked steps
    q.zero_output_for_mask = True  # then a prefix mask is the lengths it describes
    np.testing.assert_array_equal(q(x, mask=prefix)[0], q(x, lengths=np.array([3, 5]))[0])


def test_wrong_input_dtype_is_refused_with_the_fix(rng):
    q = rnnfast.quantize(rnnfast.Sequential([rnnfast.RNN(3, 4), rnnfast.Linear(4, 2)]), "int8")
    with pytest.raises(
        TypeError, match=r"x: expected a float32 array \(the layer's dtype\), got dtype float64"
    ):
        q(rng.standard_normal((5, 2, 3)))
    with pytest.raises(TypeError, match="float"):
        q(np.zeros((5, 2, 3), np.int32))
    with pytest.raises(TypeError, match="ids: expected an integer array"):
        rnnfast.quantize(rnnfast.Embedding(4, 2), "bf16")(np.zeros(3, np.float32))


def test_quantize_is_exported():
    assert "quantize" in rnnfast.__all__ and callable(rnnfast.quantize)
    buffer = io.BytesIO()
    rnnfast.save(rnnfast.quantize(rnnfast.Linear(3, 2), "bf16"), buffer)
    buffer.seek(0)
    assert rnnfast.load(buffer).quantized == "bf16"
