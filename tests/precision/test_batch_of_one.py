"""A batch of one under bf16 products: the passes that step one row on unpacked weights
(the gated cells' dot products along W_hh's rows, the Elman cell's streamed matvec) would round
all of W_hh at every step, so under bf16 they take the packed GEMM; the results keep bf16's
bound against float32 and agree across paths, as at any batch."""

from __future__ import annotations

import numpy as np
import pytest

from rnnfast import functional
from rnnfast.precision import products

U = 2.0**-8  # bf16's unit roundoff


def _gated(cell, T, D, H, rng):
    G = 4 if cell == "lstm" else 3
    return (
        rng.standard_normal((T, 1, D)).astype(np.float32),
        (rng.standard_normal((G * H, D)) / np.sqrt(D)).astype(np.float32),
        (rng.standard_normal((G * H, H)) / np.sqrt(H)).astype(np.float32),
        (0.1 * rng.standard_normal(G * H)).astype(np.float32),
        (0.1 * rng.standard_normal(G * H)).astype(np.float32),
    )


def _train(cell, args, dy):
    forward = getattr(functional, f"{cell}_forward")
    backward = getattr(functional, f"{cell}_backward")
    options = functional.PLAIN_GRU_OPTIONS if cell == "gru" else functional.PLAIN_LSTM_OPTIONS
    out = forward(*args, keep_workspace=True)
    grads = backward(*args, out.y, out.workspace, dy=dy, **options)
    return [out.y] + [g for g in grads if g is not None]


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("H", [16, 64, 200])  # H = 16, 64: W_hh small enough to stream in float32
def test_a_gated_batch_of_one_keeps_the_bound(cell, H, bf16_path, num_threads):
    rng = np.random.default_rng(H)
    T, D = 12, 24
    args = _gated(cell, T, D, H, rng)
    dy = rng.standard_normal((T, 1, H)).astype(np.float32)
    reference = _train(cell, args, dy)
    with products("bf16"):
        mixed = _train(cell, args, dy)
    # two GEMMs a step, each ~2u of its terms; gradients chain twice as many (see
    # test_gradients' bound): 8u * sqrt(T), norm-wise
    for got, want in zip(mixed, reference):
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        assert err < 8 * U * np.sqrt(T)
        assert not np.array_equal(got, want) or not np.any(want)  # bf16 did apply


def test_an_elman_batch_of_one_keeps_the_bound(bf16_path):
    rng = np.random.default_rng(1)
    T, D, H = 12, 24, 32  # W_hh streams in float32 at this size
    x = rng.standard_normal((T, 1, D)).astype(np.float32)
    w_ih = (rng.standard_normal((H, D)) / np.sqrt(D)).astype(np.float32)
    w_hh = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    b = np.zeros(H, np.float32)
    y32 = functional.rnn_forward(x, w_ih, w_hh, b)
    with products("bf16"):
        y16 = functional.rnn_forward(x, w_ih, w_hh, b)
    y32, y16 = (y[0] if isinstance(y, tuple) else getattr(y, "y", y) for y in (y32, y16))
    err = np.linalg.norm(y16 - y32) / np.linalg.norm(y32)
    assert 0 < err < 8 * U * np.sqrt(T)
