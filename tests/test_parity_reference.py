"""Kernels against the pure-NumPy reference: forward and all six gradients.

Every value of every axis is covered (T in {1, 2, 50}, B in {1, 3, 16}, D and H in
{1, 3, 17, 33, 100, 256}, dtype, nonlinearity, ISA) by a full product over dtype x nonlinearity x
ISA x SHAPES, where SHAPES together hold every size; the options (h0, which biases, the source of
the gradient) get their own products on a few shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    DTYPES,
    assert_close,
    kernel_backward,
    make_problem,
    reference_backward,
    reference_forward,
)

import rnnfast
from rnnfast import functional as F

# (T, B, D, H): together every T, every B and every D and H, in odd combinations.
SHAPES = [
    (1, 1, 1, 1),
    (2, 3, 3, 17),
    (50, 16, 17, 3),
    (1, 16, 33, 100),
    (2, 1, 100, 33),
    (50, 3, 256, 256),
    (50, 1, 1, 256),
    (1, 3, 256, 1),
    (2, 16, 100, 100),
    (50, 16, 33, 17),
    (1, 1, 3, 33),
    (50, 16, 100, 256),
]
SHAPE_IDS = [f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES]

# A few shapes for the option products: a long sequence with tails everywhere, and a short one
# whose batch exceeds a register tile.
OPTION_SHAPES = [(50, 3, 17, 33), (2, 16, 100, 3)]
OPTION_IDS = [f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in OPTION_SHAPES]


def test_shapes_cover_every_size():
    Ts, Bs, Ds, Hs = (set(v) for v in zip(*SHAPES))
    assert Ts == {1, 2, 50}
    assert Bs == {1, 3, 16}
    assert Ds == Hs == {1, 3, 17, 33, 100, 256}


def _gradient_seeds(rng, T, B, H, dtype, grad_from):
    dy = rng.standard_normal((T, B, H)).astype(dtype) if grad_from in ("dy", "both") else None
    dh_n = rng.standard_normal((B, H)).astype(dtype) if grad_from in ("dh_n", "both") else None
    return dy, dh_n


def _check_functional(p, nonlinearity, dtype, dy, dh_n):
    y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    y_ref, h_ref = reference_forward(p, nonlinearity)
    assert_close(y, y_ref, dtype, "y")
    assert_close(h_n, h_ref, dtype, "h_n")
    assert np.array_equal(h_n, y[-1])

    g = kernel_backward(p, y, dy, dh_n, nonlinearity=nonlinearity)
    ref = reference_backward(p, y, dy, dh_n, nonlinearity)
    for name, got, want in zip(g._fields, g, ref):
        assert_close(got, want, dtype, name)


def _check_layer(p, nonlinearity, dtype, dy, dh_n):
    D = p.x.shape[2]
    H = p.weight_hh.shape[0]
    layer = rnnfast.RNN(D, H, nonlinearity=nonlinearity, bias=p.bias_ih is not None, dtype=dtype)
    layer.load_state_dict(p.state_dict())
    y, h_n = layer(p.x, None if p.h0 is None else p.h0[None])
    y_ref, h_ref = reference_forward(p, nonlinearity)
    assert_close(y, y_ref, dtype, "y")
    assert_close(h_n, h_ref[None], dtype, "h_n")

    dx, dh0 = layer.backward(dy, None if dh_n is None else dh_n[None])
    ref_dx, ref_dh0, ref_dw_ih, ref_dw_hh, ref_db = reference_backward(p, y, dy, dh_n, nonlinearity)
    assert_close(dx, ref_dx, dtype, "dx")
    assert_close(dh0, ref_dh0[None], dtype, "dh0")
    assert_close(layer.grads["weight_ih_l0"], ref_dw_ih, dtype, "dweight_ih")
    assert_close(layer.grads["weight_hh_l0"], ref_dw_hh, dtype, "dweight_hh")
    if p.bias_ih is not None:
        assert_close(layer.grads["bias_ih_l0"], ref_db, dtype, "dbias_ih")
        assert_close(layer.grads["bias_hh_l0"], ref_db, dtype, "dbias_hh")
    else:
        assert set(layer.grads) == {"weight_ih_l0", "weight_hh_l0"}


# ---- the full product over the main axes ----------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(dtype, nonlinearity, shape, isa, rng):
    p = make_problem(rng, *shape, dtype)
    y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    y_ref, h_ref = reference_forward(p, nonlinearity)
    assert_close(y, y_ref, dtype, "y")
    assert_close(h_n, h_ref, dtype, "h_n")
    assert np.array_equal(h_n, y[-1])

    # Only the last state: the same h_n without keeping the sequence.
    y_none, h_last = F.rnn_forward(
        **p.forward_args(), nonlinearity=nonlinearity, return_sequences=False
    )
    assert y_none is None
    assert_close(h_last, h_ref, dtype, "h_n (return_sequences=False)")


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("check", [_check_functional, _check_layer], ids=["functional", "layer"])
def test_backward(check, dtype, nonlinearity, shape, isa, rng):
    T, B, _, H = shape
    p = make_problem(rng, *shape, dtype)
    dy, dh_n = _gradient_seeds(rng, T, B, H, dtype, "both")
    check(p, nonlinearity, dtype, dy, dh_n)


# ---- options: h0, biases, where the gradient comes from -------------------------------------------


@pytest.mark.parametrize("shape", OPTION_SHAPES, ids=OPTION_IDS)
@pytest.mark.parametrize("grad_from", ["dy", "dh_n", "both"])
@pytest.mark.parametrize("bias", [True, False, "ih", "hh"], ids=["bias", "nobias", "ih", "hh"])
@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_options_functional(dtype, nonlinearity, with_h0, bias, grad_from, shape, isa, rng):
    T, B, _, H = shape
    p = make_problem(rng, *shape, dtype, h0=with_h0, bias=bias)
    dy, dh_n = _gradient_seeds(rng, T, B, H, dtype, grad_from)
    _check_functional(p, nonlinearity, dtype, dy, dh_n)


@pytest.mark.parametrize("grad_from", ["dy", "dh_n", "both"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_options_layer(dtype, nonlinearity, with_h0, bias, grad_from, isa, rng):
    T, B, D, H = 50, 3, 17, 33
    p = make_problem(rng, T, B, D, H, dtype, h0=with_h0, bias=bias)
    dy, dh_n = _gradient_seeds(rng, T, B, H, dtype, grad_from)
    _check_layer(p, nonlinearity, dtype, dy, dh_n)


@pytest.mark.parametrize("T", [1, 2, 15, 16, 17, 33, 50])
@pytest.mark.parametrize("dtype", DTYPES)
def test_last_state_only_over_chunk_boundaries(dtype, T, isa, rng):
    """return_sequences=False walks the sequence in chunks; lengths around the chunk size."""
    p = make_problem(rng, T, 3, 17, 33, dtype)
    _, h_all = F.rnn_forward(**p.forward_args())
    y_none, h_last = F.rnn_forward(**p.forward_args(), return_sequences=False)
    assert y_none is None
    assert_close(h_last, reference_forward(p, "tanh")[1], dtype, "h_n")
    assert_close(h_last, h_all, dtype, "h_n vs return_sequences=True")


# The backward walks time in chunks of about 1024 rows (steps x batch): sequences that end just
# before, on and after a chunk boundary, and several chunks.
@pytest.mark.parametrize(
    "T, B",
    [(63, 16), (64, 16), (65, 16), (200, 16), (1025, 1), (2100, 1)],
    ids=["T63-B16", "T64-B16", "T65-B16", "T200-B16", "T1025-B1", "T2100-B1"],
)
@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_over_chunk_boundaries(dtype, nonlinearity, with_h0, T, B, isa, rng):
    p = make_problem(rng, T, B, 5, 7, dtype, h0=with_h0)
    dy, dh_n = _gradient_seeds(rng, T, B, 7, dtype, "both")
    _check_functional(p, nonlinearity, dtype, dy, dh_n)
