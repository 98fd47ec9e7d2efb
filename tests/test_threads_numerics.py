"""Concurrency (many Python threads, the GIL released during kernels) and numerics at the edges:
NaN/Inf propagation, saturation, overflow, and the vector tanh's error over the whole float
range on every supported ISA."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from conftest import ISAS, PLAIN, assert_close, run_threads

import rnnfast
from rnnfast import _core, reference
from rnnfast import functional as F

N_THREADS = 8

# The vector tanh's error against np.tanh (float64 evaluation of the same input), over the
# whole float range; the one place the bounds are stated. Measured on baseline and avx2 (x86-64,
# 2025): float32 abs 8.93e-8, rel 1.81e-7; float64 abs 2.22e-16, rel 5.55e-16 (rel: |x| < 1).
TANH_BOUND = {
    np.float32: {"abs": 1.2e-7, "rel": 2.5e-7},
    np.float64: {"abs": 3.0e-16, "rel": 7.5e-16},
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_functional_from_many_threads_equals_serial(dtype):
    rng = np.random.default_rng(7)
    T, B, D, H = 17, 5, 9, 33
    w_ih = rng.uniform(-0.3, 0.3, (H, D)).astype(dtype)
    w_hh = rng.uniform(-0.3, 0.3, (H, H)).astype(dtype)
    b = rng.uniform(-0.3, 0.3, H).astype(dtype)
    xs = [rng.standard_normal((T, B, D)).astype(dtype) for _ in range(N_THREADS // 2)] * 2
    lengths = [None, np.array([17, 3, 0, 9, 17])] * (N_THREADS // 2)
    weights = [a.copy() for a in (w_ih, w_hh, b)]

    def work(i):
        out = []
        for _ in range(3):
            nl = "relu" if i % 4 == 3 else "tanh"
            y, h_n = F.rnn_forward(xs[i], w_ih, w_hh, b, b, None, nl, lengths=lengths[i])
            g = F.rnn_backward(
                xs[i],
                w_ih,
                w_hh,
                y,
                y,
                h_n,
                h0=None,
                **dict(PLAIN, nonlinearity=nl, lengths=lengths[i]),
            )
            out.append((y, h_n) + tuple(g))
        return out

    serial = [work(i) for i in range(N_THREADS)]
    for _ in range(2):
        concurrent = run_threads(work, N_THREADS)
        for i in range(N_THREADS):
            for rep in range(3):
                for got, want in zip(concurrent[i][rep], serial[i][0]):
                    assert np.array_equal(got, want), f"thread {i}, repeat {rep}"
    for a, w in zip((w_ih, w_hh, b), weights):  # shared weights never written
        assert np.array_equal(a, w)


def test_eval_layers_from_many_threads_equal_serial():
    rng = np.random.default_rng(8)
    layers = [
        rnnfast.RNN(6, 11, num_layers=2, bidirectional=True, seed=1).eval(),
        rnnfast.RNN(6, 11, nonlinearity="relu", dtype=np.float64, seed=2, batch_first=True).eval(),
    ]
    xs = [rng.standard_normal((9, 4, 6)) for _ in range(N_THREADS)]

    def work(i):
        layer = layers[i % 2]
        x = xs[i].astype(layer.dtype)
        if layer.batch_first:
            x = x.swapaxes(0, 1)
        return [layer(x, lengths=[9, 2, 5, 0]) for _ in range(3)]

    serial = [work(i) for i in range(N_THREADS)]
    concurrent = run_threads(work, N_THREADS)
    for i in range(N_THREADS):
        for rep in range(3):
            for got, want in zip(concurrent[i][rep], serial[i][0]):
                assert np.array_equal(got, want), f"thread {i}, repeat {rep}"


def test_the_gil_is_released_during_kernels(restore_threads):
    """Two threads each running a long forward overlap in time, and a third (pure Python) thread
    keeps running while they do: with the GIL held it would stall for a whole kernel."""
    rng = np.random.default_rng(9)
    T, B, D, H = 800, 64, 64, 256
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    w_ih = (rng.uniform(-1, 1, (H, D)) / 16).astype(np.float32)
    w_hh = (rng.uniform(-1, 1, (H, H)) / 16).astype(np.float32)
    rnnfast.set_num_threads(1)  # a global setting: one kernel thread per Python thread
    F.rnn_forward(x[:10], w_ih, w_hh)  # warm up

    t0 = time.perf_counter()
    F.rnn_forward(x, w_ih, w_hh)
    single = time.perf_counter() - t0

    intervals = [None, None]
    ticks = []
    done = threading.Event()

    def heartbeat():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    def work(i):
        start = time.perf_counter()
        F.rnn_forward(x, w_ih, w_hh)
        intervals[i] = (start, time.perf_counter())

    beat = threading.Thread(target=heartbeat)
    beat.start()
    t0 = time.perf_counter()
    try:
        run_threads(work, 2)
    finally:
        done.set()
        beat.join()
    both = time.perf_counter() - t0
    (s0, e0), (s1, e1) = intervals
    overlap = min(e0, e1) - max(s0, s1)
    inside = [t for t in ticks if max(s0, s1) <= t <= min(e0, e1)]
    gaps = np.diff([max(s0, s1)] + inside + [min(e0, e1)]) if overlap > 0 else [np.inf]
    print(
        f"\none forward {single * 1e3:.0f} ms; two threads: {both * 1e3:.0f} ms wall, "
        f"intervals [{0:.0f}, {(e0 - s0) * 1e3:.0f}] and [{(s1 - s0) * 1e3:.0f}, "
        f"{(e1 - s0) * 1e3:.0f}] ms, overlap {overlap * 1e3:.0f} ms, "
        f"{len(inside)} heartbeat ticks inside, longest gap {max(gaps) * 1e3:.1f} ms"
    )
    assert overlap > 0.5 * min(e0 - s0, e1 - s1), "the two kernels did not run at the same time"
    # the GIL is free while both kernels run: the heartbeat never stalls for a kernel's length
    assert max(gaps) < 0.5 * overlap


# ---- numerics -------------------------------------------------------------------------------------


def _problem(rng, dtype, T=5, B=4, D=6, H=7):
    return {
        "x": rng.standard_normal((T, B, D)).astype(dtype),
        "weight_ih": rng.uniform(-0.4, 0.4, (H, D)).astype(dtype),
        "weight_hh": rng.uniform(-0.4, 0.4, (H, H)).astype(dtype),
        "bias_ih": rng.uniform(-0.4, 0.4, H).astype(dtype),
        "bias_hh": None,
        "h0": rng.uniform(-1, 1, (B, H)).astype(dtype),
    }


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_inf_propagate_like_the_reference(isa, dtype, nonlinearity, special):
    rng = np.random.default_rng(10)
    p = _problem(rng, dtype)
    p["x"][1, 2, 3] = special
    p["x"][3, 0, :] = special
    y, h_n = F.rnn_forward(**p, nonlinearity=nonlinearity)
    with np.errstate(all="ignore"):
        ry, rh = reference.rnn_forward(
            **{k: None if v is None else v.astype(np.float64) for k, v in p.items()},
            nonlinearity=nonlinearity,
        )
    for got, want, what in ((y, ry, "y"), (h_n, rh, "h_n")):
        assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN positions differ"
        assert np.array_equal(np.isposinf(got), np.isposinf(want)), f"{what}: +inf differs"
        assert np.array_equal(np.isneginf(got), np.isneginf(want)), f"{what}: -inf differs"
        fin = np.isfinite(want)
        assert_close(got[fin], want[fin], dtype, what)
    # the gradient: non-finite exactly where the reference's is, finite parts equal
    dy = np.ones_like(y)
    g = F.rnn_backward(
        p["x"],
        p["weight_ih"],
        p["weight_hh"],
        y,
        dy,
        None,
        h0=p["h0"],
        **dict(PLAIN, nonlinearity=nonlinearity),
    )
    with np.errstate(all="ignore"):
        up = lambda a: a.astype(np.float64)
        r = reference.rnn_backward(
            up(p["x"]),
            up(p["weight_ih"]),
            up(p["weight_hh"]),
            up(y),
            up(dy),
            None,
            h0=up(p["h0"]),
            **dict(PLAIN, nonlinearity=nonlinearity),
        )
    for name, got, want in zip(g._fields, g, r):
        assert np.array_equal(np.isfinite(got), np.isfinite(want)), f"{name}: non-finite differ"


@pytest.mark.parametrize("scale", [1e30, -1e30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_huge_inputs_saturate_tanh_without_nan(isa, dtype, scale):
    rng = np.random.default_rng(11)
    T, B, D, H = 4, 3, 5, 17
    x = np.full((T, B, D), scale, dtype=dtype) * rng.uniform(0.5, 1, (T, B, D)).astype(dtype)
    w_ih = rng.uniform(0.1, 1, (H, D)).astype(dtype)  # one sign: no cancellation
    w_hh = rng.uniform(-0.5, 0.5, (H, H)).astype(dtype)
    y, _h_n = F.rnn_forward(x, w_ih, w_hh, h0=rng.uniform(-1, 1, (B, H)).astype(dtype))
    assert not np.isnan(y).any()
    assert np.array_equal(y, np.full_like(y, np.sign(scale)))
    g = F.rnn_backward(x, w_ih, w_hh, y, np.ones_like(y), h0=None, **PLAIN)
    for name, a in zip(g._fields, g):
        assert not np.isnan(a).any(), name


def test_relu_overflow_is_inf_not_nan(isa):
    """Pre-activations beyond float32's max overflow to +inf in relu (never NaN, never wrapped)."""
    rng = np.random.default_rng(12)
    T, B, D, H = 3, 2, 8, 19
    x = np.full((T, B, D), 3e38, dtype=np.float32)
    w_ih = rng.uniform(1, 2, (H, D)).astype(np.float32)
    w_hh = rng.uniform(0.1, 1, (H, H)).astype(np.float32)
    y, h_n = F.rnn_forward(x, w_ih, w_hh, np.full(H, 1.0, np.float32), None, None, "relu")
    assert np.isposinf(y).all() and np.isposinf(h_n).all()
    # negative overflow: relu gives exactly 0 (its derivative too), not NaN
    y, h_n = F.rnn_forward(-x, w_ih, w_hh, None, None, None, "relu")
    assert np.array_equal(y, np.zeros_like(y))


# ---- the vector tanh over the whole float range ---------------------------------------------------


def _tanh_grid(dtype):
    fi = np.finfo(dtype)
    lo, hi = (1e-38, 1e38) if dtype == np.float32 else (1e-307, 1e307)
    every_exponent = np.geomspace(lo, hi, 200_000)
    subnormal = np.geomspace(float(fi.smallest_subnormal), float(fi.tiny), 1000)
    fine = np.linspace(-10, 10, 200_001)
    edges = [
        0.0,
        -0.0,
        float(fi.max),
        -float(fi.max),
        float(fi.tiny),
        -float(fi.tiny),
        float(fi.eps),
        9.0,
        9.5,
        20.0,
        44.0,
    ]
    return np.concatenate(
        [every_exponent, -every_exponent, subnormal, -subnormal, fine, edges]
    ).astype(dtype)


def _kernel_tanh(v, H):
    """rnnfast's tanh of v: one step of a forward with W_ih = I, W_hh = 0, no bias."""
    n = -(-v.size // H) * H
    x = np.zeros(n, v.dtype)
    x[: v.size] = v
    y, _ = F.rnn_forward(x.reshape(1, -1, H), np.eye(H, dtype=v.dtype), np.zeros((H, H), v.dtype))
    return y.reshape(-1)[: v.size]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_tanh_error_over_the_whole_float_range(dtype):
    v = _tanh_grid(dtype)
    exact = np.tanh(v.astype(np.float64))
    small = (np.abs(v) < 1) & (exact != 0)
    previous = _core.active_isa()
    report = []
    try:
        for isa in ISAS:
            _core.set_active_isa(isa)
            for H in (16, 19):  # full SIMD vectors only, and a remainder tail
                got = _kernel_tanh(v, H)
                assert got.dtype == np.dtype(dtype)
                assert not np.isnan(got).any() and np.all(np.abs(got) <= 1)
                assert np.array_equal(np.signbit(got[v != 0]), np.signbit(v[v != 0]))
                err = np.abs(got.astype(np.float64) - exact)
                rel = err[small] / np.abs(exact[small])
                report.append((isa, H, err.max(), rel.max()))
    finally:
        _core.set_active_isa(previous)
    bound = TANH_BOUND[dtype]
    for isa, H, abs_err, rel_err in report:
        print(
            f"\ntanh {np.dtype(dtype).name} {isa} H={H}: max abs {abs_err:.3g}, "
            f"max rel (|x| < 1) {rel_err:.3g}"
        )
        assert abs_err <= bound["abs"], (isa, H, abs_err)
        assert rel_err <= bound["rel"], (isa, H, rel_err)
