"""The quantized kernels (issue 16) against their NumPy model (tests/quantized_model.py) on every
path this CPU runs, against float32, and their argument checks.

Bounds, stated once here:
- int8 products, their dequantization, the bias and relu: the model bit for bit.
- tanh: the kernels' vector tanh against np.tanh (test_threads_numerics.TANH_BOUND: 1.2e-7 abs
  each, against float64): a step from the same state within TANH_STEP = 3e-7 * max(1, |h|)
  (two tanh errors and the leaky mix's rounding). A whole tanh sequence is checked step by
  step from the kernel's own previous state: a last-ulp difference can move a value of
  h * 127 across a rounding boundary of the next step's quantization, so sequences compared
  end to end differ by more than ulps (by up to s_h * s_w * 127, rarely).
- bf16: the model sums in float64; float32 sums in any order lie within
  quantized_model.bf16_sum_bound (K * 2^-23 * sum |a w|).
- against float32: int8 |x.W - Q(x).Q(W)| <= sum_k (|x_k| s_w / 2 + |W_k| s_x / 2 + s_x s_w / 4)
  (each rounding is at most half a step), bf16 <= 2^-8 sum_k |x_k W_k| (two relative roundings
  of 2^-9), each plus the float32 sum's rounding; a step from the same state passes the same
  bound through tanh (1-Lipschitz) and relu.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import quantized_model as qm

from rnnfast import _core, reference

INT8_PATHS = _core.quantized_paths("int8")
BF16_PATHS = _core.quantized_paths("bf16")
SIZES = [1, 3, 17, 33, 100]
TANH_STEP = 3e-7
F32_SUM = 2.0**-22  # relative rounding allowance of a float32 sum of a few hundred terms


@pytest.fixture
def int8_path(request):
    yield from _forced(request.param)


@pytest.fixture
def bf16_path(request):
    yield from _forced(request.param)


def _forced(name):
    _core.set_quantized_path(name)
    try:
        yield name
    finally:
        _core.set_quantized_path("")


def _int8_matrix(rng, n, k, scale=1.0):
    w = (rng.standard_normal((n, k)) * scale).astype(np.float32)
    q, s = qm.quantize_weights_int8(w)
    return w, q, s, _core.QuantizedMatrix("int8", q, s)


def _bf16_matrix(rng, n, k, scale=1.0):
    w = (rng.standard_normal((n, k)) * scale).astype(np.float32)
    bits = qm.to_bf16_bits(w)
    return w, bits, _core.QuantizedMatrix("bf16", bits, None)


# ---- the formats --------------------------------------------------------------------------------


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
@pytest.mark.parametrize("m,k", [(1, 1), (3, 17), (17, 3), (33, 100), (5, 64), (2, 0)])
def test_quantize_rows_matches_the_model_exactly(int8_path, m, k, rng):
    x = (rng.standard_normal((m, k)) * rng.uniform(1e-3, 1e3, (m, 1))).astype(np.float32)
    if m > 1 and k > 0:
        x[1] = 0.0  # a zero row: scale 0, q 0
        x[0, 0] = np.float32(0.5) * x[0].max() * 2  # a value at the row's max (q = 127)
    q, s = _core.quantize_rows(x)
    q_ref, s_ref = qm.quantize_rows_int8(x)
    assert q.dtype == np.int8 and s.dtype == np.float32
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_array_equal(s, s_ref)


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
def test_quantize_rows_edge_values(int8_path):
    x = np.array(
        [
            [np.nan, 1.0, 2.0],  # not finite: scale NaN, q 0
            [np.inf, 1.0, 0.0],
            [1e-38, -1e-38, 0.0],  # 127 / amax overflows: x * inf, 0 * inf -> 0
            [-3.0, 1.5, 0.75],  # ties of rint (1.5 * 127 / 3 = 63.5 -> 64, even)
        ],
        dtype=np.float32,
    )
    q, s = _core.quantize_rows(x)
    q_ref, s_ref = qm.quantize_rows_int8(x)
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_array_equal(s, s_ref)  # NaN == NaN for assert_array_equal
    assert np.isnan(s[:2]).all() and (q[:2] == 0).all()
    assert q[3].tolist() == [-127, 64, 32]


def test_bf16_rounding_model():
    bits = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7FC00001, 0x7F800000], np.uint32)
    got = qm.to_bf16_bits(bits.view(np.float32))
    # ties to even (down, up), below the tie, NaN stays NaN, inf stays inf
    assert got.tolist() == [0x3F80, 0x3F82, 0x3F81, 0x7FC0, 0x7F80]
    assert np.isnan(qm.bf16_to_f32(got)[3])


# ---- products ----------------------------------------------------------------------------------


SHAPES = [(m, k, n) for m, k, n in zip(SIZES, [1, 3, 17, 65, 100], [33, 100, 1, 3, 17])] + [
    (33, 130, 100),
    (100, 33, 17),
    (64, 64, 64),
    (17, 1000, 3),
]


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_int32_exact_on_every_path(int8_path, m, k, n, rng):
    _, qw, _, w = _int8_matrix(rng, n, k)
    qa = rng.integers(-127, 128, (m, k)).astype(np.int8)
    qa[0, :] = 127  # the extremes: the u8 shift and the column-sum correction at their limits
    if m > 1:
        qa[1, :] = -127
    assert w.path == int8_path
    got = _core.quantized_matmul_int32(qa, w)
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, qm.int8_matmul(qa, qw))


def test_matmul_int32_extreme_weights(rng):
    qw = np.full((17, 300), 127, np.int8)
    qw[::2] = -127
    w = _core.QuantizedMatrix("int8", qw, np.ones(17, np.float32))
    qa = np.full((3, 300), -127, np.int8)
    for path in INT8_PATHS:
        _core.set_quantized_path(path)
        try:
            np.testing.assert_array_equal(
                _core.quantized_matmul_int32(qa, w), qm.int8_matmul(qa, qw), err_msg=path
            )
        finally:
            _core.set_quantized_path("")


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
@pytest.mark.parametrize("m,k,n", SHAPES[:6])
@pytest.mark.parametrize("with_bias", [True, False])
def test_dense_int8_exact_on_every_path(int8_path, m, k, n, with_bias, rng):
    _, qw, sw, w = _int8_matrix(rng, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    got = _core.quantized_dense(x, w, bias)
    np.testing.assert_array_equal(got, qm.dense_int8(x, qw, sw, bias))


@pytest.mark.parametrize("bf16_path", BF16_PATHS, indirect=True)
@pytest.mark.parametrize("m,k,n", SHAPES[:6])
def test_dense_bf16_within_the_sum_order_bound(bf16_path, m, k, n, rng):
    _, bits, w = _bf16_matrix(rng, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = _core.quantized_dense(x, w, bias)
    want = qm.bf16_product(x, bits) + bias
    bound = qm.bf16_sum_bound(x, bits) + np.abs(want) * 2.0**-23
    assert (np.abs(got - want) <= bound).all()


@pytest.mark.parametrize("bf16_path", BF16_PATHS, indirect=True)
@pytest.mark.parametrize("k", [1, 2])
def test_bf16_short_sums_are_exact(bf16_path, k, rng):
    """One or two terms: bf16 products are exact in float32 and one addition rounds once, in any
    order, so the kernels' conversion of x to bf16 (ties to even, NaN) is seen bit for bit."""
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0xBF808000, 0x7FC00001], np.uint32)
    x = np.concatenate([ties.view(np.float32), rng.standard_normal(60).astype(np.float32)])
    x = np.repeat(x[:, None], k, axis=1)
    bits = qm.to_bf16_bits(rng.standard_normal((19, k)).astype(np.float32))
    w = _core.QuantizedMatrix("bf16", bits, None)
    got = _core.quantized_dense(x, w, None)
    want = qm.bf16_product(x, bits).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_dense_error_against_float32(rng):
    m, k, n = 9, 200, 40
    x = rng.standard_normal((m, k)).astype(np.float32)
    w32, qw, sw, w8 = _int8_matrix(rng, n, k)
    exact = x.astype(np.float64) @ w32.astype(np.float64).T
    _, sx = qm.quantize_rows_int8(x)
    bound = (
        np.abs(x) @ np.ones((k, n)) * (sw / 2)
        + (sx[:, None] / 2) * np.abs(w32).sum(1)
        + k * sx[:, None] * sw / 4
    )
    bound += (np.abs(x) @ np.abs(w32).T) * F32_SUM
    err8 = np.abs(_core.quantized_dense(x, w8, None) - exact)
    assert (err8 <= bound).all()
    bits = qm.to_bf16_bits(w32)
    wb = _core.QuantizedMatrix("bf16", bits, None)
    err16 = np.abs(_core.quantized_dense(x, wb, None) - exact)
    assert (err16 <= (np.abs(x) @ np.abs(w32).T) * (2.0**-8 + F32_SUM)).all()
    # the bounds are not vacuous: the errors are of the size they allow
    assert err8.max() > 0.01 * bound.max() and err16.max() > 0


# Big enough that the kernels use the threads: threads split the panels of W_hh (H = 200) or,
# with fewer panels than threads (H = 32: 2 panels), the rows.
THREADED = [(6, 9, 40, 200), (4, 200, 8, 32)]


def _threaded_problem(rng, kind, T, B, D, H):
    make = _int8_matrix if kind == "int8" else _bf16_matrix
    w_ih, w_hh = make(rng, H, D, 0.3)[-1], make(rng, H, H, 1 / np.sqrt(H))[-1]
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    lengths = np.sort(rng.integers(0, T + 1, B))[::-1].copy()
    return lambda: _core.quantized_rnn_forward(
        x, None, w_ih, w_hh, None, lengths, "tanh", 0.9, True
    )


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shape", THREADED)
def test_int8_results_do_not_depend_on_threads(threads, shape, restore_threads, rng):
    run = _threaded_problem(rng, "int8", *shape)
    _core.set_num_threads(1)
    want = run()
    _core.set_num_threads(threads)
    _core.clear_contention_backoff()  # a busy machine's back-off would run one thread
    got = run()
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", THREADED)
def test_bf16_reproducible_for_a_thread_count(threads, shape, restore_threads, rng):
    run = _threaded_problem(rng, "bf16", *shape)
    _core.set_num_threads(threads)
    _core.clear_contention_backoff()
    a = run()
    _core.clear_contention_backoff()
    b = run()
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# ---- the recurrent forward ----------------------------------------------------------------------


def _layer(rng, kind, D, H, spread=1.0):
    """Weights of one layer (float, the model's arrays, the two QuantizedMatrix) and a bias."""
    make = _int8_matrix if kind == "int8" else _bf16_matrix
    ih = make(rng, H, D, spread / np.sqrt(max(D, 1)))
    hh = make(rng, H, H, spread / np.sqrt(H))
    bias = (rng.standard_normal(H) * 0.1).astype(np.float32)
    return ih, hh, bias


def _model_forward(kind, ih, hh, x, h0, bias, lengths, nonlinearity, alpha):
    if kind == "int8":
        return qm.rnn_forward_int8(
            x, h0, ih[1], ih[2], hh[1], hh[2], bias, lengths, nonlinearity, alpha
        )
    return qm.rnn_forward_bf16(x, h0, ih[1], hh[1], bias, lengths, nonlinearity, alpha)


CASES = [  # T, B, D, H, lengths, with h0, alpha
    (7, 5, 17, 33, [7, 6, 3, 1, 0], True, 1.0),
    (5, 3, 3, 17, None, False, 0.6),
    (1, 1, 1, 1, None, True, 1.0),
    (20, 1, 100, 100, [20], False, 1.0),
    (3, 4, 33, 3, [3, 3, 2, 2], True, 0.3),
    (18, 2, 5, 40, [18, 17], True, 1.0),  # more steps than one projected chunk (16)
]


def _case_problem(rng, kind, case, spread, h0_scale=1.0):
    """One of CASES as arrays: the layer (see _layer), x, h0 (None in a case without one),
    the lengths as int64 (or None) and alpha."""
    T, B, D, H, lengths, with_h0, alpha = case
    ih, hh, bias = _layer(rng, kind, D, H, spread)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    h0 = (rng.standard_normal((B, H)) * h0_scale).astype(np.float32) if with_h0 else None
    lens = None if lengths is None else np.array(lengths, np.int64)
    return ih, hh, bias, x, h0, lens, alpha


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
@pytest.mark.parametrize("case", CASES)
def test_relu_int8_forward_matches_the_model_exactly(int8_path, case, rng):
    ih, hh, bias, x, h0, lens, alpha = _case_problem(rng, "int8", case, 0.8, h0_scale=2)
    y, h_n = _core.quantized_rnn_forward(x, h0, ih[3], hh[3], bias, lens, "relu", alpha, True)
    y_ref, h_ref = _model_forward("int8", ih, hh, x, h0, bias, lens, "relu", alpha)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(h_n, h_ref)
    _, h_only = _core.quantized_rnn_forward(x, h0, ih[3], hh[3], bias, lens, "relu", alpha, False)
    np.testing.assert_array_equal(h_only, h_n)


def _check_steps(kind, ih, hh, x, h0, bias, lengths, nonlinearity, alpha, y, h_n):
    """Every step of y from the kernel's own previous state, against the model's step."""
    T, B, _ = x.shape
    H = y.shape[2]
    lens = np.full(B, T) if lengths is None else lengths
    prev = np.zeros((B, H), np.float32) if h0 is None else h0
    for t in range(T):
        want, _ = _model_forward(kind, ih, hh, x[t : t + 1], prev, bias, None, nonlinearity, alpha)
        run = lens > t
        bound = TANH_STEP * np.maximum(1, np.abs(want[0]))
        if kind == "bf16":
            pre_bound = qm.bf16_sum_bound(x[t], ih[1]) + qm.bf16_sum_bound(prev, hh[1])
            bound = bound + pre_bound * alpha
        assert (np.abs(y[t] - want[0])[run] <= bound[run]).all(), f"step {t}"
        assert (y[t][~run] == 0).all()
        prev = np.where(run[:, None], y[t], prev)
    np.testing.assert_array_equal(h_n, prev)


@pytest.mark.parametrize("int8_path", INT8_PATHS, indirect=True)
@pytest.mark.parametrize("case", CASES)
def test_tanh_int8_forward_step_by_step(int8_path, case, rng):
    ih, hh, bias, x, h0, lens, alpha = _case_problem(rng, "int8", case, 1.5, h0_scale=2)  # |h0| > 1
    y, h_n = _core.quantized_rnn_forward(x, h0, ih[3], hh[3], bias, lens, "tanh", alpha, True)
    _check_steps("int8", ih, hh, x, h0, bias, lens, "tanh", alpha, y, h_n)


@pytest.mark.parametrize("bf16_path", BF16_PATHS, indirect=True)
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("case", CASES)
def test_bf16_forward_step_by_step(bf16_path, nonlinearity, case, rng):
    ih, hh, bias, x, h0, lens, alpha = _case_problem(rng, "bf16", case, 0.9)
    y, h_n = _core.quantized_rnn_forward(x, h0, ih[2], hh[2], bias, lens, nonlinearity, alpha, True)
    _check_steps("bf16", ih, hh, x, h0, bias, lens, nonlinearity, alpha, y, h_n)


@pytest.mark.parametrize("kind", ["int8", "bf16"])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_step_is_one_forward_step(kind, nonlinearity, rng):
    ih, hh, bias = _layer(rng, kind, 17, 33)
    wi, wh = ih[-1], hh[-1]
    x = rng.standard_normal((4, 3, 17)).astype(np.float32)
    h = rng.standard_normal((3, 33)).astype(np.float32)
    y, _ = _core.quantized_rnn_forward(x, h, wi, wh, bias, None, nonlinearity, 0.5, True)
    for t in range(4):
        h = _core.quantized_rnn_step(x[t], h, wi, wh, bias, nonlinearity, 0.5)
        np.testing.assert_array_equal(h, y[t])


@pytest.mark.parametrize("kind", ["int8", "bf16"])
def test_forward_error_against_float32(kind, rng):
    """A step from the float32 state is within the product bound of the float32 step; over a
    whole sequence (contracting weights, spectral radius ~0.5) the error stays of that size."""
    T, B, D, H = 30, 4, 64, 64
    ih, hh, bias = _layer(rng, kind, D, H, 0.5)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    w_ih, w_hh = ih[0], hh[0]
    y32 = reference.rnn_forward(x, w_ih, w_hh, bias, None)[0].astype(np.float32)
    prev = np.zeros((B, H), np.float32)
    worst = 0.0
    for t in range(T):
        got = _core.quantized_rnn_step(x[t], prev, ih[-1], hh[-1], bias, "tanh", 1.0)
        if kind == "int8":
            _, sx = qm.quantize_rows_int8(x[t])
            _, sh = qm.quantize_state_int8(prev, "tanh")
            bound = sum(
                np.abs(a) @ np.ones((a.shape[1], H)) * (s_w / 2)
                + (s_a[:, None] / 2) * np.abs(w).sum(1)
                + a.shape[1] * s_a[:, None] * s_w / 4
                for a, s_a, w, s_w in ((x[t], sx, w_ih, ih[2]), (prev, sh, w_hh, hh[2]))
            )
        else:
            bound = (np.abs(x[t]) @ np.abs(w_ih).T + np.abs(prev) @ np.abs(w_hh).T) * 2.0**-8
        bound = bound + 1e-6
        assert (np.abs(got - y32[t]) <= bound).all(), f"step {t}"
        worst = max(worst, float(bound.max()))
        prev = y32[t]
    y, _ = _core.quantized_rnn_forward(x, None, ih[-1], hh[-1], bias, None, "tanh", 1.0, True)
    assert np.abs(y - y32).max() <= 2 * worst


def test_lengths_zero_and_empty_shapes(rng):
    ih, hh, bias = _layer(rng, "int8", 3, 5)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((2, 5)).astype(np.float32)
    y, h_n = _core.quantized_rnn_forward(
        x, h0, ih[3], hh[3], bias, np.zeros(2, np.int64), "tanh", 1.0, True
    )
    assert (y == 0).all()
    np.testing.assert_array_equal(h_n, h0)
    y, h_n = _core.quantized_rnn_forward(x[:0], h0, ih[3], hh[3], bias, None, "tanh", 1.0, True)
    assert y.shape == (0, 2, 5)
    np.testing.assert_array_equal(h_n, h0)
    y, h_n = _core.quantized_rnn_forward(x[:, :0], None, ih[3], hh[3], None, None, "relu", 1, True)
    assert y.shape == (4, 0, 5) and h_n.shape == (0, 5)


def test_user_arrays_are_not_modified(rng):
    ih, hh, bias = _layer(rng, "int8", 3, 5)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((2, 5)).astype(np.float32)
    copies = [a.copy() for a in (x, h0, bias, ih[1], ih[2])]
    _core.quantized_rnn_forward(x, h0, ih[3], hh[3], bias, None, "tanh", 0.5, True)
    for a, c in zip((x, h0, bias, ih[1], ih[2]), copies):
        np.testing.assert_array_equal(a, c)


# ---- the matrix and the paths ------------------------------------------------------------------


def test_matrix_properties_and_memory(rng):
    _, q, _, w = _int8_matrix(rng, 1024, 1024)
    assert (w.kind, w.rows, w.cols) == ("int8", 1024, 1024)
    assert 1024 * 1024 <= w.nbytes <= 1024 * 1024 + 8 * 1024  # the values, scales, column sums
    _, _, wb = _bf16_matrix(rng, 100, 30)
    assert (wb.kind, wb.rows, wb.cols) == ("bf16", 100, 30)
    assert wb.nbytes == 112 * 32 * 2  # padded to 16 rows and 32 columns
    assert w.path == _core.quantized_path("int8") and wb.path == _core.quantized_path("bf16")
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(w)


def test_paths_follow_the_float_isa():
    previous = _core.active_isa()
    all_paths = _core.quantized_paths()
    assert all_paths[0] == "baseline"
    assert set(INT8_PATHS) | set(BF16_PATHS) == set(all_paths)
    try:
        for isa in _core.supported_isas():
            _core.set_active_isa(isa)
            for kind in ("int8", "bf16"):
                path = _core.quantized_path(kind)
                if isa == "baseline":
                    assert path == "baseline"
                if isa == "avx2":
                    assert path in ("avx2", "avx_vnni")
                assert path in _core.quantized_paths(kind)
    finally:
        _core.set_active_isa(previous)


def test_forced_path_and_its_stand_in():
    try:
        for name in _core.quantized_paths():
            _core.set_quantized_path(name)
            for kind, paths in (("int8", INT8_PATHS), ("bf16", BF16_PATHS)):
                got = _core.quantized_path(kind)
                order = _core.quantized_paths()
                assert got in paths and order.index(got) <= order.index(name)
                if name in paths:
                    assert got == name
    finally:
        _core.set_quantized_path("")
    with pytest.raises(ValueError, match="name: expected"):
        _core.set_quantized_path("sse9")


# ---- bad input ----------------------------------------------------------------------------------


def test_matrix_rejects_bad_input(rng):
    q = np.zeros((3, 4), np.int8)
    s = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="kind: expected 'int8' or 'bf16'"):
        _core.QuantizedMatrix("int4", q, s)
    with pytest.raises(TypeError, match="data: expected dtype int8"):
        _core.QuantizedMatrix("int8", q.astype(np.int16), s)
    with pytest.raises(TypeError, match="data: expected dtype uint16"):
        _core.QuantizedMatrix("bf16", q, None)
    with pytest.raises(ValueError, match="data: expected 2 dimensions"):
        _core.QuantizedMatrix("int8", q[0], s)
    with pytest.raises(ValueError, match="data: expected a C-contiguous"):
        _core.QuantizedMatrix("int8", np.zeros((4, 3), np.int8).T, s)
    with pytest.raises(ValueError, match=r"scale: expected shape \(N,\)"):
        _core.QuantizedMatrix("int8", q, s[:2])
    with pytest.raises(TypeError, match="scale: expected dtype float32"):
        _core.QuantizedMatrix("int8", q, s.astype(np.float64))
    with pytest.raises(ValueError, match="scale: expected a float32 array"):
        _core.QuantizedMatrix("int8", q, None)
    with pytest.raises(ValueError, match="scale: expected None"):
        _core.QuantizedMatrix("bf16", q.astype(np.uint16), s)
    with pytest.raises(ValueError, match="scale: expected finite values >= 0"):
        _core.QuantizedMatrix("int8", q, np.array([1, -1, 1], np.float32))
    bad = q.copy()
    bad[1, 2] = -128
    with pytest.raises(ValueError, match=r"data: expected values in \[-127, 127\]"):
        _core.QuantizedMatrix("int8", bad, s)


def test_products_reject_bad_input(rng):
    _, _, _, w = _int8_matrix(rng, 5, 4)
    _, _, wb = _bf16_matrix(rng, 5, 4)
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match="w: expected a QuantizedMatrix"):
        _core.quantized_dense(x, np.zeros((5, 4), np.float32), None)
    with pytest.raises(TypeError, match="x: expected dtype float32"):
        _core.quantized_dense(x.astype(np.float64), w, None)
    with pytest.raises(ValueError, match=r"x: expected shape \(M, K\) with K = w.cols"):
        _core.quantized_dense(np.zeros((2, 5), np.float32), w, None)
    with pytest.raises(ValueError, match="x: expected a C-contiguous"):
        _core.quantized_dense(np.zeros((4, 2), np.float32).T, w, None)
    with pytest.raises(ValueError, match="bias: expected shape"):
        _core.quantized_dense(x, w, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="w: expected a QuantizedMatrix of kind 'int8'"):
        _core.quantized_matmul_int32(np.zeros((2, 4), np.int8), wb)
    with pytest.raises(TypeError, match="qa: expected dtype int8"):
        _core.quantized_matmul_int32(np.zeros((2, 4), np.uint8), w)
    with pytest.raises(TypeError, match="x: expected dtype float32"):
        _core.quantize_rows(np.zeros((2, 4), np.float64))


def test_forward_rejects_bad_input(rng):
    ih, hh, bias = _layer(rng, "int8", 3, 5)
    ihb, hhb, _ = _layer(rng, "bf16", 3, 5)
    x = np.zeros((4, 2, 3), np.float32)
    fwd = _core.quantized_rnn_forward
    args = dict(h0=None, bias=bias, lengths=None, nonlinearity="tanh", alpha=1.0)

    def call(**over):
        a = {**args, "x": x, "w_ih": ih[3], "w_hh": hh[3], "return_sequences": True, **over}
        return fwd(
            a["x"],
            a["h0"],
            a["w_ih"],
            a["w_hh"],
            a["bias"],
            a["lengths"],
            a["nonlinearity"],
            a["alpha"],
            a["return_sequences"],
        )

    with pytest.raises(ValueError, match="w_ih: expected kind 'int8'"):
        call(w_ih=ihb[2])
    with pytest.raises(ValueError, match="w_hh: expected a square"):
        call(w_hh=ih[3])
    with pytest.raises(ValueError, match="w_ih: expected H = 5 rows"):
        call(w_ih=_int8_matrix(rng, 4, 3)[3])
    with pytest.raises(ValueError, match=r"x: expected shape \(T, B, D\) with D = w_ih.cols"):
        call(x=np.zeros((4, 2, 5), np.float32))
    with pytest.raises(ValueError, match="x: expected 3 dimensions"):
        call(x=np.zeros((4, 3), np.float32))
    with pytest.raises(TypeError, match="x: expected dtype float32"):
        call(x=x.astype(np.float64))
    with pytest.raises(ValueError, match="h0: expected shape"):
        call(h0=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="lengths: expected non-increasing"):
        call(lengths=np.array([1, 3], np.int64))
    with pytest.raises(ValueError, match="lengths: expected values in"):
        call(lengths=np.array([5, 3], np.int64))
    with pytest.raises(TypeError, match="lengths: expected dtype int64"):
        call(lengths=np.array([3, 3], np.int32))
    with pytest.raises(ValueError, match="nonlinearity: expected 'tanh' or 'relu'"):
        call(nonlinearity="gelu")
    with pytest.raises(ValueError, match="alpha: expected a leak rate"):
        call(alpha=0.0)
    with pytest.raises(TypeError, match="w_hh: expected a QuantizedMatrix"):
        call(w_hh=None)
    with pytest.raises(ValueError, match="h: expected shape"):
        _core.quantized_rnn_step(x[0], np.zeros((2, 4), np.float32), ih[3], hh[3], None, "relu", 1)
    with pytest.raises(ValueError, match=r"x_t: expected shape \(B, D\)"):
        _core.quantized_rnn_step(
            x[0, :, :2], np.zeros((2, 5), np.float32), ih[3], hh[3], None, "relu", 1
        )
