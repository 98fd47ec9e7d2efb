"""The backward's single parallel region, and the batch of one's streaming step: the step loop
and each chunk's weight and input gradients run in one team (the gradient GEMMs pack B inside
the region, each member its own panels). Repeated calls at one thread count give the same bits, at 1 and at 2 threads, and
match the NumPy reference, across chunk boundaries, for the plain and the masked drivers."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PLAIN, assert_close, make_problem

import rnnfast
from rnnfast import _core
from rnnfast import functional as F
from rnnfast import reference as R

# (T, B, D, H), each chosen for a path through the region:
# - T*B = 2560 rows: three chunks of 1024, 1024 and 512 rows, so the gradient GEMMs pack K-blocks
#   of 256 and shorter ones (the h0 term: B rows) into one buffer; members split the panels.
# - H = 5: a single panel, so the members split rows and meet around each packed K-block.
# - B = 2, H = 48: a step too small for two threads while the chunk's GEMMs get two, so one
#   member sits the step loop out and waits for it.
# - B = 1: H = 300 split between two members; H = 63 on the streaming step (matvec, W_hh within
#   32 KiB), a last column group of whole vectors but the last one partial (every ISA's float32).
SHAPES = [(40, 64, 50, 96), (300, 7, 9, 5), (700, 2, 20, 48), (30, 1, 7, 300), (9, 1, 3, 63)]
VARIANTS = ["plain", "no-h0", "lengths", "leaky", "ids", "step-mask"]
REPEATS = 3


def _case(rng, shape, variant, dtype):
    T, B, D, H = shape
    p = make_problem(rng, T, B, D, H, dtype, h0=variant != "no-h0")
    fwd = dict(h0=p.h0, nonlinearity="tanh")
    bwd = dict(PLAIN, h0=p.h0)
    ids = None
    if variant == "lengths":
        lengths = np.sort(rng.integers(0, T + 1, size=B))[::-1].copy()
        lengths[0] = T
        fwd["lengths"] = bwd["lengths"] = lengths
    elif variant == "leaky":
        fwd["alpha"] = bwd["alpha"] = 0.6
    elif variant == "step-mask":
        mask = rng.random((T, B)) < 0.8
        fwd["step_mask"] = bwd["step_mask"] = mask
    elif variant == "ids":
        ids = rng.integers(0, 11, size=(T, B))
        table = rng.standard_normal((11, D)).astype(dtype)
        return p, table, ids, fwd, bwd
    return p, p.x, ids, fwd, bwd


def _run(p, x, ids, fwd, bwd, dy, dh_n):
    y, h_n = F.rnn_forward(x, p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh, ids=ids, **fwd)
    grads = F.rnn_backward(x, p.weight_ih, p.weight_hh, y, dy, dh_n, ids=ids, **bwd)
    return (y, h_n) + tuple(grads)


def _reference(p, x, ids, fwd, bwd, y, dy, dh_n):
    """The reference's gradients (float64), with token input through x = table[ids]."""
    up = lambda a: None if a is None else np.asarray(a, np.float64)
    xs = x[ids] if ids is not None else x
    kw = {k: up(v) if k == "h0" else v for k, v in bwd.items()}
    dx, dh0, dw_ih, dw_hh, db = R.rnn_backward(
        up(xs), up(p.weight_ih), up(p.weight_hh), up(y), up(dy), up(dh_n), **kw
    )
    if ids is not None:
        table_grad = np.zeros(x.shape)
        np.add.at(table_grad, ids, dx)
        dx = table_grad
    return dx, dh0, dw_ih, dw_hh, db


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_region_is_reproducible_and_matches_reference(
    dtype, shape, variant, n_threads, isa, rng, restore_threads
):
    T, B, _, H = shape
    p, x, ids, fwd, bwd = _case(rng, shape, variant, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    rnnfast.set_num_threads(n_threads)
    runs = []
    for _ in range(REPEATS):
        _core.clear_contention_backoff()  # a busy machine must not make this a 1-thread test
        runs.append(_run(p, x, ids, fwd, bwd, dy, dh_n))
    names = ("y", "h_n") + F.RNNGrads._fields
    for again in runs[1:]:
        for name, a, b in zip(names, runs[0], again):
            assert np.array_equal(a, b), f"{name}: two runs at {n_threads} threads differ"
    y = runs[0][0]
    want = _reference(p, x, ids, fwd, bwd, y, dy, dh_n)
    for name, got, expected in zip(F.RNNGrads._fields, runs[0][2:], want):
        assert_close(got, expected, dtype, name)


@pytest.mark.parametrize("variant", ["plain", "lengths", "leaky", "ids", "step-mask"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES])
def test_one_and_two_threads_give_the_same_bits(shape, variant, rng, restore_threads):
    """Each output element is summed in the same order whatever the team: the contention
    back-off and ThreadShare change a call's thread count without asking, so they must not
    change its result."""
    T, B, _, H = shape
    p, x, ids, fwd, bwd = _case(rng, shape, variant, np.float32)
    dy = rng.standard_normal((T, B, H)).astype(np.float32)
    dh_n = rng.standard_normal((B, H)).astype(np.float32)
    runs = {}
    for n in (1, 2):
        rnnfast.set_num_threads(n)
        _core.clear_contention_backoff()
        runs[n] = _run(p, x, ids, fwd, bwd, dy, dh_n)
    names = ("y", "h_n") + F.RNNGrads._fields
    for name, a, b in zip(names, runs[1], runs[2]):
        assert np.array_equal(a, b), f"{name}: 1 and 2 threads differ"
