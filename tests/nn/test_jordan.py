"""rnnfast.JordanRNN (output-to-hidden recurrence, the notes' "RNN B"): a NumPy loop written from
the equations is the oracle of every mode (teacher-forced, packed, free-running with either
feedback, scheduled sampling); finite differences in float64 check every parameter, dx, dy_prev
and dy0; padded batches, batch_first, dtypes and bad input; save/load, the Keras-style counts,
fit and decoding."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, assert_close_any_dtype, numerical_gradient

import rnnfast
from rnnfast import JordanRNN, decoding, training
from rnnfast.nn.recurrent.jordan import previous_targets, teacher_forcing_inputs
from rnnfast.optim import Adam

F64 = np.float64
FD_RTOL, FD_ATOL = 1e-6, 1e-8


# ---- the oracle: the equations, one step at a time, in float64, time-major ----------------------


def _act(z, nonlinearity):
    return np.tanh(z) if nonlinearity == "tanh" else np.maximum(z, 0.0)


def _params64(layer):
    p = {k: v.astype(F64) for k, v in layer.state_dict().items()}
    p.setdefault("bias_h", np.zeros(layer.hidden_size))
    p.setdefault("bias_o", np.zeros(layer.output_size))
    return p


def _ref_step(p, x_t, y_prev, nonlinearity):
    h = _act(x_t @ p["weight_ih"].T + y_prev @ p["weight_yh"].T + p["bias_h"], nonlinearity)
    return h @ p["weight_ho"].T + p["bias_o"]


def _valid(lengths, T, B):
    return np.ones((T, B), bool) if lengths is None else np.arange(T)[:, None] < lengths[None, :]


def ref_teacher(p, x, y_prev, nonlinearity, lengths=None):
    T, B = x.shape[:2]
    valid = _valid(lengths, T, B)
    out = (
        np.stack([_ref_step(p, x[t], y_prev[t], nonlinearity) for t in range(T)])
        if T
        else np.zeros((0, B, p["weight_ho"].shape[0]))
    )
    return out * valid[..., None]


def ref_free(
    p, x, nonlinearity, y0=None, feedback="output", lengths=None, fed_targets=None, teacher=None
):
    """Free-running (or, with fed_targets and a teacher mask (T, B), scheduled sampling)."""
    T, B = x.shape[:2]
    O = p["weight_ho"].shape[0]
    valid = _valid(lengths, T, B)
    prev = np.zeros((B, O)) if y0 is None else y0
    if fed_targets is not None:
        prev = fed_targets[0]
    out = np.zeros((T, B, O))
    for t in range(T):
        y = _ref_step(p, x[t], prev, nonlinearity) * valid[t][:, None]
        out[t] = y
        own = y if feedback == "output" else np.eye(O)[np.argmax(y, axis=1)]
        prev = own
        if fed_targets is not None and t + 1 < T:
            prev = np.where(teacher[t + 1][:, None], fed_targets[t + 1], own)
    return out


def _data(rng, T, B, D, O, dtype=F64):
    x = rng.standard_normal((T, B, D)).astype(dtype)
    y = rng.standard_normal((T, B, O)).astype(dtype)
    return x, y


def _bf(a, batch_first):
    return np.ascontiguousarray(a.swapaxes(0, 1)) if batch_first else a


# ---- forward against the oracle ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sizes", [(1, 1, 1, 1, 1), (7, 3, 5, 17, 3), (4, 2, 1, 33, 2)])
def test_teacher_forced_matches_reference(rng, dtype, nonlinearity, batch_first, bias, sizes):
    T, B, D, H, O = sizes
    layer = JordanRNN(D, H, O, nonlinearity, bias, batch_first, dtype, seed=3)
    x, y = _data(rng, T, B, D, O, dtype)
    y_prev = previous_targets(y)
    out = layer(_bf(x, batch_first), _bf(y_prev, batch_first))
    expected = ref_teacher(_params64(layer), x.astype(F64), y_prev.astype(F64), nonlinearity)
    assert_close_any_dtype(out, _bf(expected, batch_first), dtype, "y")
    # the packed input of teacher_forced=True: the same numbers
    packed = JordanRNN(D, H, O, nonlinearity, bias, batch_first, dtype, seed=3, teacher_forced=True)
    inputs = packed.teacher_forcing_inputs(_bf(x, batch_first), _bf(y, batch_first))
    assert inputs.shape[-1] == D + O
    np.testing.assert_array_equal(packed(inputs), out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("feedback", ["output", "onehot"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_free_running_matches_reference(rng, dtype, nonlinearity, feedback, batch_first):
    T, B, D, H, O = 9, 3, 4, 17, 3
    layer = JordanRNN(
        D, H, O, nonlinearity, batch_first=batch_first, dtype=dtype, seed=5, feedback=feedback
    )
    x, _ = _data(rng, T, B, D, O, dtype)
    y0 = rng.standard_normal((B, O)).astype(dtype)
    out = layer(_bf(x, batch_first), y0=y0)
    expected = ref_free(_params64(layer), x.astype(F64), nonlinearity, y0.astype(F64), feedback)
    assert_close_any_dtype(out, _bf(expected, batch_first), dtype, "y")
    # what each step was fed: y0, then its own previous output (one-hot of it)
    fed = np.asarray(layer.last_fed)
    assert_close_any_dtype(fed[:, 0] if batch_first else fed[0], y0, dtype, "fed[0]")
    # explicit mode="free" on a teacher_forced layer takes x alone
    layer.teacher_forced = True
    np.testing.assert_array_equal(layer(_bf(x, batch_first), y0=y0, mode="free"), out)


def test_step_is_one_free_running_step(rng):
    layer = JordanRNN(4, 6, 3, seed=1, dtype=F64)
    x, _ = _data(rng, 5, 2, 4, 3)
    out = layer(x)
    prev = None
    for t in range(5):
        y_t = layer.step(x[t], prev)
        np.testing.assert_allclose(y_t, out[t], rtol=1e-12, atol=1e-13)
        prev = y_t
    # class ids are fed one-hot
    np.testing.assert_allclose(
        layer.step(x[0], np.array([2, 0])), layer.step(x[0], np.eye(3)[[2, 0]]), rtol=0, atol=0
    )


@pytest.mark.parametrize("feedback", ["output", "onehot"])
@pytest.mark.parametrize("ratio", [0.0, 0.4, 1.0])
def test_scheduled_sampling_matches_reference(rng, feedback, ratio):
    T, B, D, H, O = 8, 5, 3, 7, 4
    layer = JordanRNN(D, H, O, dtype=F64, seed=2, feedback=feedback, teacher_forcing_ratio=ratio)
    x, y = _data(rng, T, B, D, O)
    if feedback == "onehot":
        y = np.eye(O)[rng.integers(0, O, (T, B))]
    y_prev = previous_targets(y)
    out = layer(x, y_prev, rng=7)
    teacher = np.random.default_rng(7).random((T, B)) < ratio
    teacher[0] = True
    expected = ref_free(
        _params64(layer), x, "tanh", feedback=feedback, fed_targets=y_prev, teacher=teacher
    )
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-13)
    # the gradient is teacher forcing's over the fed outputs (none through the choice)
    dy = rng.standard_normal(out.shape)
    dx, dfed = layer.backward(dy)
    fed = layer.last_fed
    twin = JordanRNN(D, H, O, dtype=F64, seed=2)
    twin(x, fed)
    tdx, tdfed = twin.backward(dy)
    for name in layer.grads:
        np.testing.assert_allclose(layer.grads[name], twin.grads[name], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dx, tdx, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dfed, tdfed * teacher[..., None], rtol=1e-12, atol=1e-13)


def test_ratio_applies_in_training_only(rng):
    layer = JordanRNN(3, 5, 2, dtype=F64, seed=0, teacher_forcing_ratio=0.0)
    x, y = _data(rng, 6, 2, 3, 2)
    y_prev = previous_targets(y)
    teacher = layer(x, y_prev, mode="teacher")
    layer.eval()
    np.testing.assert_array_equal(layer(x, y_prev), teacher)  # eval: teacher-forced
    layer.train()
    assert not np.allclose(layer(x, y_prev), teacher)  # training: its own outputs from step 1
    np.testing.assert_array_equal(layer(x, y_prev, teacher_forcing_ratio=1.0), teacher)


# ---- gradients: finite differences in float64 -----------------------------------------------------


def _check_gradients(layer, run, inputs, dy):
    """run() -> output; inputs: {name: array} the call reads; compares every parameter's and
    input's analytic gradient (``analytic`` dict) with central differences of sum(y * dy)."""
    layer.zero_grad()
    layer.train()
    out = run()
    grads_in = layer.backward(dy)
    loss = lambda: float(np.sum(run() * dy))
    for name, p in layer.named_parameters():
        num = numerical_gradient(loss, p)
        np.testing.assert_allclose(layer.grads[name], num, rtol=FD_RTOL, atol=FD_ATOL, err_msg=name)
    layer._cache = None
    for (name, arr), g in zip(inputs.items(), grads_in):
        num = numerical_gradient(loss, arr)
        np.testing.assert_allclose(g, num, rtol=FD_RTOL, atol=FD_ATOL, err_msg=name)
    return out


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths", [None, [4, 1, 3]])
def test_teacher_forced_finite_differences(rng, nonlinearity, batch_first, lengths):
    T, B, D, H, O = 4, 3, 3, 5, 2
    layer = JordanRNN(D, H, O, nonlinearity, batch_first=batch_first, dtype=F64, seed=4)
    x, y = _data(rng, T, B, D, O)
    x, y_prev = _bf(x, batch_first), _bf(previous_targets(y), batch_first)
    dy = rng.standard_normal(y_prev.shape)
    lens = None if lengths is None else np.array(lengths)
    _check_gradients(layer, lambda: layer(x, y_prev, lengths=lens), {"x": x, "y_prev": y_prev}, dy)


def test_packed_gradient_is_that_of_the_packed_input(rng):
    layer = JordanRNN(3, 4, 2, dtype=F64, seed=1, teacher_forced=True)
    x, y = _data(rng, 5, 2, 3, 2)
    packed = layer.teacher_forcing_inputs(x, y)
    dy = rng.standard_normal((5, 2, 2))
    layer.zero_grad()
    layer(packed)
    d = layer.backward(dy)
    assert isinstance(d, np.ndarray) and d.shape == packed.shape
    num = numerical_gradient(lambda: float(np.sum(layer(packed) * dy)), packed)
    np.testing.assert_allclose(d, num, rtol=FD_RTOL, atol=FD_ATOL)


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths", [None, [5, 2, 0]])
def test_free_running_bptt_finite_differences(rng, nonlinearity, batch_first, lengths):
    """Exact BPTT through the fed-back outputs, dy0 included."""
    T, B, D, H, O = 5, 3, 2, 4, 3
    layer = JordanRNN(D, H, O, nonlinearity, batch_first=batch_first, dtype=F64, seed=6)
    if nonlinearity == "relu":  # keep the pre-activations away from relu's kink
        layer.load_state_dict({**layer.state_dict(), "bias_h": np.full(H, 0.3)})
    x, _ = _data(rng, T, B, D, O)
    x = _bf(x, batch_first)
    y0 = rng.standard_normal((B, O))
    dy = rng.standard_normal(x.shape[:2] + (O,))
    lens = None if lengths is None else np.array(lengths)
    _check_gradients(layer, lambda: layer(x, lengths=lens, y0=y0), {"x": x, "y0": y0}, dy)


def test_free_running_onehot_gradients(rng):
    """One-hot feedback: no gradient through the argmax; the rest exact."""
    layer = JordanRNN(2, 4, 3, dtype=F64, seed=8, feedback="onehot")
    x, _ = _data(rng, 5, 2, 2, 3)
    y0 = rng.standard_normal((2, 3))
    dy = rng.standard_normal((5, 2, 3))
    _check_gradients(layer, lambda: layer(x, y0=y0), {"x": x, "y0": y0}, dy)


# ---- padded batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["teacher", "free"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_padded_batch_is_each_sequence_alone(rng, mode, batch_first):
    T, D, H, O = 6, 3, 5, 2
    lengths = np.array([3, 6, 0, 1])
    layer = JordanRNN(D, H, O, dtype=F64, seed=9, batch_first=batch_first)
    x, y = _data(rng, T, 4, D, O)
    y_prev = previous_targets(y)
    args = (_bf(x, batch_first),) + ((_bf(y_prev, batch_first),) if mode == "teacher" else ())
    out = layer(*args, lengths=lengths)
    dy = rng.standard_normal(out.shape)
    back = layer.backward(dy)
    grads = {k: g.copy() for k, g in layer.grads.items()}
    out_tm = _bf(out, batch_first)
    assert np.all(out_tm[~_valid(lengths, T, 4)] == 0)
    layout = layer.output_mask if not batch_first else layer.output_mask.T
    np.testing.assert_array_equal(layout, _valid(lengths, T, 4))
    # the same from the mask
    mask = np.arange(T)[None, :] < lengths[:, None]
    np.testing.assert_array_equal(layer(*args, mask=mask), out)
    layer._cache = None
    # each sequence alone, to its length: the same outputs and, summed, the same gradients
    single = JordanRNN(D, H, O, dtype=F64, seed=9)
    dy_tm = _bf(dy, batch_first)
    dx_tm = _bf(back[0], batch_first)
    for b, n in enumerate(lengths):
        one = (x[:n, b : b + 1],) + ((y_prev[:n, b : b + 1],) if mode == "teacher" else ())
        alone = single(*one)
        np.testing.assert_allclose(out_tm[:n, b : b + 1], alone, rtol=1e-12, atol=1e-13)
        dxb = single.backward(dy_tm[:n, b : b + 1])[0]
        np.testing.assert_allclose(dx_tm[:n, b : b + 1], dxb, rtol=1e-12, atol=1e-13)
        assert np.all(dx_tm[n:, b] == 0)
    for k, g in grads.items():
        np.testing.assert_allclose(g, single.grads[k], rtol=1e-10, atol=1e-12)


# ---- helpers, options, dtypes, bad input -------------------------------------------------------


def test_previous_targets_and_class_ids():
    y = np.arange(12, dtype=F64).reshape(3, 2, 2)
    yp = previous_targets(y, y0=np.ones((2, 2)))
    np.testing.assert_array_equal(yp[0], np.ones((2, 2)))
    np.testing.assert_array_equal(yp[1:], y[:-1])
    np.testing.assert_array_equal(
        previous_targets(y.swapaxes(0, 1), batch_first=True), previous_targets(y).swapaxes(0, 1)
    )
    ids = np.array([[1, 0, 2], [2, 2, 1]])  # (B, T)
    yp = previous_targets(ids, y0=np.array([0, 1]), output_size=3, batch_first=True)
    assert yp.dtype == np.float32 and yp.shape == (2, 3, 3)
    np.testing.assert_array_equal(yp.argmax(-1), [[0, 1, 0], [1, 2, 2]])
    packed = teacher_forcing_inputs(
        np.zeros((2, 3, 1), np.float32), ids, output_size=3, batch_first=True
    )
    assert packed.shape == (2, 3, 4)
    with pytest.raises(ValueError, match="output_size"):
        previous_targets(ids)
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\)"):
        previous_targets(ids + 1, output_size=3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(rng, dtype):
    layer = JordanRNN(3, 4, 2, dtype=dtype)
    assert all(p.dtype == dtype for p in layer.parameters())
    x, y = _data(rng, 4, 2, 3, 2, dtype)
    out = layer(x, previous_targets(y))
    assert out.dtype == dtype
    dx, dyp = layer.backward(np.ones_like(out))
    assert dx.dtype == dtype and dyp.dtype == dtype
    other = np.float64 if dtype == np.float32 else np.float32
    with pytest.raises(TypeError, match=r"expected a float(32|64) array \(the layer's dtype\)"):
        layer(x.astype(other))
    with pytest.raises(TypeError, match="dtype"):
        JordanRNN(3, 4, 2, dtype=np.int32)


def test_arrays_are_not_modified_and_outputs_are_read_only(rng):
    layer = JordanRNN(3, 4, 2, dtype=F64, seed=0)
    x, y = _data(rng, 4, 2, 3, 2)
    y_prev = previous_targets(y)
    keep = x.copy(), y_prev.copy()
    out = layer(x, y_prev)
    with pytest.raises(ValueError):
        out[0, 0, 0] = 1.0
    x[...] = 0  # changing the caller's arrays after the call does not change the gradients
    twin = JordanRNN(3, 4, 2, dtype=F64, seed=0)
    twin(keep[0], keep[1])
    dy = np.ones_like(out)
    np.testing.assert_array_equal(layer.backward(dy)[0], twin.backward(dy)[0])
    np.testing.assert_array_equal(y_prev, keep[1])


def test_bad_input():
    layer = JordanRNN(3, 4, 2, dtype=F64)
    x = np.zeros((5, 2, 3))
    yp = np.zeros((5, 2, 2))
    with pytest.raises(ValueError, match="input_size = 3"):
        layer(np.zeros((5, 2, 4)))
    with pytest.raises(ValueError, match="3 dimensions"):
        layer(np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"y_prev: expected shape \(5, 2, 2\)"):
        layer(x, np.zeros((5, 2, 3)))
    with pytest.raises(ValueError, match="mode"):
        layer(x, mode="parallel")
    with pytest.raises(ValueError, match="y_prev: mode='teacher' needs"):
        layer(x, mode="teacher")
    with pytest.raises(ValueError, match="free-running call feeds its own"):
        layer(x, yp, mode="free")
    with pytest.raises(ValueError, match="y0: the fed outputs"):
        layer(x, yp, y0=np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"y0: expected shape \(B, O\)"):
        layer(x, y0=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="lengths"):
        layer(x, yp, lengths=np.array([6, 1]))
    with pytest.raises(TypeError, match="lengths"):
        layer(x, yp, lengths=np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="lengths, mask"):
        layer(x, yp, lengths=np.array([1, 2]), mask=np.ones((2, 5), bool))
    with pytest.raises(ValueError, match="teacher_forcing_ratio"):
        layer(x, yp, teacher_forcing_ratio=1.5)
    packed = JordanRNN(3, 4, 2, dtype=F64, teacher_forced=True)
    with pytest.raises(ValueError, match="D \\+ O = 3 \\+ 2"):
        packed(x)
    with pytest.raises(ValueError, match="packed input"):
        packed(np.zeros((5, 2, 5)), yp)
    # backward
    with pytest.raises(RuntimeError, match="no training forward"):
        layer.backward(yp)
    layer(x, yp)
    with pytest.raises(ValueError, match=r"dy: expected shape \(5, 2, 2\)"):
        layer.backward(np.zeros((5, 2, 3)))
    with pytest.raises(TypeError, match="dtype"):
        layer.backward(yp.astype(np.float32))
    layer.backward(yp)  # the failed calls kept the forward
    layer.eval()
    layer(x, yp)
    with pytest.raises(RuntimeError, match="no training forward"):
        layer.backward(yp)
    # constructor and options
    for bad in (0, -1):
        with pytest.raises(ValueError, match="hidden_size"):
            JordanRNN(3, bad, 2)
    with pytest.raises(TypeError, match="output_size"):
        JordanRNN(3, 4, 2.0)
    with pytest.raises(ValueError, match="nonlinearity"):
        JordanRNN(3, 4, 2, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="feedback"):
        JordanRNN(3, 4, 2, feedback="sample")
    with pytest.raises(TypeError, match="batch_first: expected a bool, got "):
        JordanRNN(3, 4, 2, batch_first=1)
    with pytest.raises(ValueError, match="teacher_forcing_ratio"):
        layer.teacher_forcing_ratio = -0.1
    with pytest.raises(AttributeError, match="fixed at construction"):
        layer.hidden_size = 5
    with pytest.raises(ValueError, match="state_dict"):
        layer.load_state_dict({"weight_ih": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="weight_ih: expected shape"):
        layer.load_state_dict({**layer.state_dict(), "weight_ih": np.zeros((3, 3))})


# ---- description, persistence ----------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_keras_counts_and_summary(bias, capsys):
    D, H, O = 3, 7, 2
    layer = JordanRNN(D, H, O, bias=bias)
    hidden, output = H * (D + O) + bias * H, O * H + bias * O
    assert layer.keras_param_count() == hidden + output == layer.num_parameters()
    assert sum(p.size for p in layer.parameters()) == hidden + output
    text = layer.summary()
    assert f"Total params: {hidden + output:,}" in text
    assert f"{hidden:,}" in text and f"{output:,}" in text
    names = [n for n, _ in layer.named_parameters()]
    assert names == (
        ["weight_ih", "weight_yh", "bias_h", "weight_ho", "bias_o"]
        if bias
        else ["weight_ih", "weight_yh", "weight_ho"]
    )
    model = rnnfast.Sequential([rnnfast.Dense(4, D), layer])
    assert f"Total params: {4 * D + D + hidden + output:,}" in model.summary((10, 4))
    capsys.readouterr()


def test_save_load_round_trip(tmp_path, rng):
    layer = JordanRNN(
        3,
        5,
        2,
        "relu",
        batch_first=True,
        dtype=F64,
        seed=11,
        teacher_forced=True,
        feedback="onehot",
        teacher_forcing_ratio=0.5,
    )
    path = tmp_path / "jordan.npz"
    rnnfast.save(layer, path)
    loaded = rnnfast.load(path)
    assert type(loaded) is JordanRNN and loaded.get_config() == layer.get_config()
    for (n1, p1), (n2, p2) in zip(layer.named_parameters(), loaded.named_parameters()):
        assert n1 == n2
        np.testing.assert_array_equal(p1, p2)
    x = rng.standard_normal((2, 4, 5))
    layer.eval()
    loaded.eval()
    np.testing.assert_array_equal(layer(x), loaded(x))
    layer.save(tmp_path / "again.npz")
    assert rnnfast.load(tmp_path / "again.npz", cls=JordanRNN).get_config() == layer.get_config()
    assert JordanRNN(**layer.get_config()).get_config() == layer.get_config()
    model = rnnfast.Sequential([rnnfast.Dense(5, 5, dtype=F64), layer])
    model.save(tmp_path / "model.npz")
    back = rnnfast.load(tmp_path / "model.npz")
    assert type(back[1]) is JordanRNN


# ---- fit and decoding --------------------------------------------------------------------------


def _sine_windows(n, steps, rng):
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1))
    t = np.arange(steps + 1)[None, :] * 0.3 + phase
    s = np.sin(t)[..., None].astype(np.float32)  # (N, T + 1, 1)
    return s[:, :-1], s[:, 1:]


def test_fit_trains_teacher_forced(rng):
    x, y = _sine_windows(96, 20, rng)
    layer = JordanRNN(1, 16, 1, batch_first=True, seed=0, teacher_forced=True)
    inputs = layer.teacher_forcing_inputs(x, y)
    history = training.fit(
        layer,
        inputs,
        y,
        loss="mse",
        optimizer=Adam(layer, lr=1e-2),
        epochs=8,
        batch_size=16,
        seed=0,
        verbose=False,
    )
    assert history["loss"][-1] < 0.2 * history["loss"][0]
    pred = training.predict(layer, inputs)
    assert pred.shape == y.shape
    assert float(np.mean((pred - y) ** 2)) < 0.05


def test_fit_with_lengths_leaves_padding_out(rng):
    x, y = _sine_windows(48, 12, rng)
    lengths = rng.integers(3, 13, size=48)
    pad = np.arange(12)[None, :] >= lengths[:, None]
    x[pad] = 0
    y_noise = y.copy()
    y_noise[pad] = 1e3  # padded targets: never seen by the loss
    layer = JordanRNN(1, 8, 1, batch_first=True, seed=1, teacher_forced=True)
    inputs = layer.teacher_forcing_inputs(x, y)
    history = training.fit(
        layer,
        inputs,
        y_noise,
        loss="mse",
        optimizer=Adam(layer, lr=1e-2),
        epochs=4,
        batch_size=16,
        seed=0,
        verbose=False,
        lengths=lengths,
    )
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < 1.0
    assert history["loss"][-1] < history["loss"][0]


def _counting(batch, steps, classes, rng):
    start = rng.integers(0, classes, size=batch)
    seq = (start[:, None] + 1 + np.arange(steps)[None, :]) % classes  # (B, T)
    return start, seq


def test_decoding_greedy_after_training(rng):
    V, T = 5, 8
    layer = JordanRNN(1, 16, V, batch_first=True, seed=0, teacher_forced=True, feedback="onehot")
    start, seq = _counting(64, T, V, rng)
    x = np.zeros((64, T, 1), np.float32)
    inputs = layer.teacher_forcing_inputs(x, seq, y0=start)
    history = training.fit(
        layer,
        inputs,
        seq,
        loss="cross_entropy",
        metrics=["accuracy"],
        optimizer=Adam(layer, lr=3e-2),
        epochs=30,
        batch_size=16,
        seed=0,
        verbose=False,
    )
    assert history["accuracy"][-1] == 1.0
    layer.eval()
    step_fn, state = layer.decoder(batch_size=4)
    tokens, _ = decoding.greedy_decode(step_fn, state, start[:4], max_len=T)
    np.testing.assert_array_equal(tokens, seq[:4])
    # free-running with one-hot feedback decodes the same
    free = layer(x[:4], y0=np.eye(V, dtype=np.float32)[start[:4]], mode="free")
    np.testing.assert_array_equal(free.argmax(-1), seq[:4])
    best, _ = decoding.beam_search(step_fn, state, start[:4], max_len=T, beam_width=3)
    np.testing.assert_array_equal(best, seq[:4])


def test_decoder_step_equals_teacher_forced_forward(rng):
    V, T, B, D = 4, 6, 3, 2
    layer = JordanRNN(D, 8, V, dtype=F64, seed=2)
    x = rng.standard_normal((T, B, D))
    tokens = rng.integers(0, V, size=(T, B))
    start = rng.integers(0, V, size=B)
    logits = layer(x, previous_targets(tokens, y0=start, output_size=V, dtype=F64))
    expected = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    step_fn, state = layer.decoder(inputs=x)
    prev = start
    for t in range(T):
        log_probs, state = step_fn(prev, state)
        np.testing.assert_allclose(log_probs, expected[t], rtol=1e-12, atol=1e-12)
        prev = tokens[t]
    with pytest.raises(ValueError, match="inputs: hold 6 steps"):
        step_fn(prev, state)
    with pytest.raises(ValueError, match="input_size == output_size"):
        layer.decoder(inputs="tokens", batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        layer.decoder()
    sq = JordanRNN(V, 8, V, dtype=F64, seed=2)
    fn, st = sq.decoder(inputs="tokens", batch_size=B)
    lp, _ = fn(start, st)
    onehot = np.eye(V)[start]
    ref = sq.step(onehot, onehot)
    np.testing.assert_allclose(
        lp, ref - np.log(np.exp(ref).sum(-1, keepdims=True)), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("feedback", ["output", "onehot"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_empty_sequences(feedback, batch_first):
    layer = JordanRNN(3, 4, 2, dtype=F64, feedback=feedback, batch_first=batch_first)
    x = np.zeros((2, 0, 3) if batch_first else (0, 2, 3))
    for args in ((x,), (x, layer.previous_targets(np.zeros(x.shape[:2] + (2,))))):
        out = layer(*args)
        assert out.shape == x.shape[:2] + (2,)
        dx, d2 = layer.backward(None)
        assert dx.shape == x.shape
        assert d2.shape == ((2, 2) if len(args) == 1 else out.shape)


def test_sequential_hands_a_jordan_rnn_its_lengths():
    """In a model the padding reaches a JordanRNN as lengths: its padded steps output zeros,
    the valid ones equal each sequence run alone."""
    rng = np.random.default_rng(0)
    D, H, O = 3, 4, 2
    layer = rnnfast.JordanRNN(
        D, H, O, batch_first=True, teacher_forced=True, dtype=np.float64, seed=0
    )
    model = rnnfast.Sequential([layer])
    x = rng.standard_normal((3, 5, D + O))
    lengths = np.array([5, 2, 3])
    out = model.eval()(x, lengths=lengths)
    for b, n in enumerate(lengths):
        alone = layer(x[b : b + 1, :n])
        np.testing.assert_allclose(out[b, :n], alone[0], rtol=1e-12, atol=1e-12)
        assert not out[b, n:].any()
