"""The GEMM's register tile and cache blocks at their edges, on every supported ISA and dtype.

The tile (mr x nr) and the blocks (kc, mc) follow from the ISA's register count and from the
machine's caches at run time, so the edges are found by asking the module, not written down:
sizes one below, at and one above each of them, beside the odd sizes 1, 3, 17, 33, 100. The
products go through the dense layer's binding (x W^T, and the weight gradient dy^T x, which reads
its A transposed and so packs it) and the recurrent layer (the step's GEMM with its epilogue),
each against NumPy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, assert_close, make_problem, reference_forward

import rnnfast
from rnnfast import _core
from rnnfast import functional as F

ODD = [1, 3, 17, 33, 100]


def blocking(dtype) -> dict:
    return _core.gemm_blocking(np.dtype(dtype) == np.float64)


def around(*values) -> list:
    """Each value and its neighbours, positive and without repeats."""
    return sorted({v + d for v in values for d in (-1, 0, 1) if v + d > 0})


def test_blocking_follows_the_tile_and_the_caches(isa):
    caches = _core.cache_sizes()
    assert caches["source"] in ("sysfs", "cpuid", "default")
    assert 0 < caches["l1d"] <= caches["l2"] <= max(caches["l2"], caches["l3"])
    for dtype in DTYPES:
        b = blocking(dtype)
        assert b["isa"] == isa
        assert b["mc"] % b["mr"] == 0, b  # threads split rows at multiples of mr
        assert b["nc"] % b["nr"] == 0, b
        assert b["kc"] >= 1 and b["mc"] >= b["mr"] and b["nc"] >= b["nr"], b
        # The tile's nr columns are two vectors of the ISA, whatever the dtype.
        assert (
            b["nr"] * np.dtype(dtype).itemsize == {"baseline": 32, "avx2": 64, "avx512": 128}[isa]
        )


def test_avx512_tile_uses_its_larger_register_file():
    if "avx512" not in _core.supported_isas():
        pytest.skip("this CPU has no AVX-512")
    previous = _core.active_isa()
    try:
        rows = {}
        for name in ("avx2", "avx512"):
            _core.set_active_isa(name)
            rows[name] = blocking(np.float32)["mr"]
    finally:
        _core.set_active_isa(previous)
    assert rows["avx512"] > rows["avx2"]


def _dense_cases(dtype):
    b = blocking(dtype)
    ms = around(b["mr"], 2 * b["mr"], b["mc"]) + ODD
    ks = around(b["kc"], 2 * b["kc"]) + ODD
    ns = around(b["nr"], 2 * b["nr"]) + ODD
    # Every edge of one dimension beside a few sizes of the others keeps the run short.
    cases = [(m, k, n) for m in ms for k in (3, 33) for n in (17, b["nr"] + 1)]
    cases += [(m, k, n) for k in ks for m in (1, b["mr"] + 1) for n in (3, 100)]
    cases += [(m, k, n) for n in ns for m in (17,) for k in (b["kc"] + 1,)]
    return sorted(set(cases))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_products_at_the_block_edges(dtype, isa):
    rng = np.random.default_rng(13)
    for m, k, n in _dense_cases(dtype):
        x = rng.uniform(-1, 1, (m, k)).astype(dtype)
        w = rng.uniform(-1, 1, (n, k)).astype(dtype)
        bias = rng.uniform(-1, 1, n).astype(dtype)
        y = _core.dense_forward(x, w, bias)
        want = x.astype(np.float64) @ w.T.astype(np.float64) + bias
        assert_close(y, want, dtype, f"x W^T + b, M={m} K={k} N={n}")
        dy = rng.uniform(-1, 1, (m, n)).astype(dtype)
        dw = rng.uniform(-1, 1, (n, k)).astype(dtype)
        dw_before = dw.astype(np.float64)
        dx = _core.dense_backward(x, w, dy, dw)
        assert_close(dx, dy.astype(np.float64) @ w.astype(np.float64), dtype, f"dx M={m} K={k}")
        want_dw = dw_before + dy.T.astype(np.float64) @ x.astype(np.float64)
        assert_close(dw, want_dw, dtype, f"dW (A packed) M={m} K={k} N={n}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_few_rows_read_the_weights_in_place(dtype, isa, restore_threads):
    """x W^T for M <= 4 rows runs as dot products along W's rows (no pack): M around that limit,
    K from less than a vector to several chunks of v held in registers (8 vectors with AVX-512,
    4 with AVX2) and a remainder of 1-7 vectors and a partial one, rows of W 4 KiB apart or not,
    N off the group of one row per lane; the same bits at one and two threads, with or without
    a bias, and the inputs left as they were."""
    rng = np.random.default_rng(29)
    lanes = blocking(dtype)["nr"] // 2
    aliased = 4096 // np.dtype(dtype).itemsize
    for m in (1, 2, 4, 5):
        for k in (
            3,
            lanes + 3,
            3 * lanes - 1,
            lanes * lanes,
            8 * lanes,
            15 * lanes + 3,
            aliased,
            2 * aliased,
            aliased + lanes,
        ):
            for n in (1, 3 * lanes + 5, 100):
                x = rng.uniform(-1, 1, (m, k)).astype(dtype)
                w = rng.uniform(-1, 1, (n, k)).astype(dtype)
                bias = rng.uniform(-1, 1, n).astype(dtype)
                x_before, w_before = x.copy(), w.copy()
                want = x.astype(np.float64) @ w.T.astype(np.float64)
                for b in (None, bias):
                    runs = []
                    for threads in (1, 2):
                        with rnnfast.threads(threads):
                            runs.append(_core.dense_forward(x, w, b))
                    expected = want if b is None else want + b
                    assert_close(runs[0], expected, dtype, f"x W^T, M={m} K={k} N={n}")
                    np.testing.assert_array_equal(runs[1], runs[0], err_msg=f"M={m} K={k}")
                np.testing.assert_array_equal(x, x_before)
                np.testing.assert_array_equal(w, w_before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_infinite_weight_in_the_columns_read_twice_gives_inf(dtype, isa):
    """K past a whole number of vectors: the last vector of each row overlaps the one before,
    with the overlapped lanes masked out. An inf weight there must still give inf (0 * inf would
    be NaN)."""
    lanes = blocking(dtype)["nr"] // 2
    k = 2 * lanes + 3
    x = np.ones((1, k), dtype)
    w = np.ones((lanes + 5, k), dtype)
    w[:, k - lanes] = np.inf  # inside the overlap: in the last whole vector and the tail's
    y = _core.dense_forward(x, w, None)
    assert np.all(np.isposinf(y)), y


@pytest.mark.parametrize("dtype", DTYPES)
def test_recurrence_at_the_tile_and_block_edges(dtype, isa):
    """The step's GEMM (M = B rows of h_{t-1}, K = N = H) with its tanh epilogue, for B around
    mr and H around nr and kc, at one and two threads."""
    b = blocking(dtype)
    rng = np.random.default_rng(5)
    shapes = [(2, bb, 3, 17) for bb in around(b["mr"])]
    shapes += [(2, 3, 5, h) for h in around(b["nr"], b["kc"])]
    for T, B, D, H in shapes:
        p = make_problem(rng, T, B, D, H, dtype)
        y_ref, h_ref = reference_forward(p, "tanh")
        for n in (1, 2):
            with rnnfast.threads(n):
                y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity="tanh")
            assert_close(y, y_ref, dtype, f"y T={T} B={B} H={H} threads={n}")
            assert_close(h_n, h_ref, dtype, f"h_n T={T} B={B} H={H} threads={n}")
