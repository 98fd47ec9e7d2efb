"""General (T, B) step masks (Keras's masks) and recurrent dropout in the kernels: against the
reference, by construction, by finite differences, at 1 and 2 threads, on every ISA (in process
and forced by RNNFAST_ISA in a subprocess), and against Keras's SimpleRNN itself, outputs,
states and gradients.

Keras's semantics (keras.src.backend.torch.rnn): a masked step keeps the state; its output is
the previous output (zeros before the first kept step) or, with zero_output_for_mask, zeros.
recurrent_dropout multiplies h_{t-1} by one (B, H) mask per call before the recurrent kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    DTYPES,
    ISAS,
    PLAIN,
    assert_close,
    gradients_by_name,
    make_problem,
    numerical_gradient,
)

import rnnfast
from rnnfast import _core
from rnnfast import functional as F
from rnnfast import reference as R

F64 = np.float64
# T = 300, B = 4: the backward walks time in chunks of 256 steps, so chunk boundaries are crossed.
SHAPES = [(1, 1, 2, 1), (1, 4, 3, 3), (6, 1, 3, 17), (9, 5, 4, 33), (300, 4, 5, 20)]
SHAPE_IDS = [f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES]
# (what is given, zero_output_for_mask): the flag matters only with a step mask
CASES = [
    ("mask", False),
    ("mask", True),
    ("mask+lengths", False),
    ("mask+lengths", True),
    ("recurrent", False),
    ("recurrent+lengths", False),
    ("mask+recurrent", False),
    ("mask+recurrent", True),
]
CASE_IDS = [f"{c}{'-zero' if z else ''}" for c, z in CASES]


def step_mask(rng, T, B):
    """A random (T, B) keep mask with a sequence that keeps no step, a step no sequence keeps,
    and a first step skipped (the output before any kept step is the initial zeros)."""
    keep = rng.random((T, B)) < 0.6
    if B > 1:
        keep[:, 1] = False
    if T > 1:
        keep[T // 2, :] = False
    if T > 2:
        keep[0, 0], keep[1, 0] = False, True
    return keep


def recurrent_mask(rng, B, H, dtype, p=0.3):
    """Keras's scaled keep mask: 0 or 1 / (1 - p)."""
    return ((rng.random((B, H)) >= p) / (1 - p)).astype(dtype)


def lengths_for(rng, T, B):
    lengths = rng.integers(0, T + 1, size=B)  # unsorted: the batch-reordering path too
    lengths[-1] = T
    return lengths


def options(case, zero_output_for_mask, rng, T, B, H, dtype, nonlinearity="tanh", alpha=1.0):
    """The forward's (and so the backward's) options for one case."""
    return {
        "nonlinearity": nonlinearity,
        "alpha": alpha,
        "lengths": lengths_for(rng, T, B) if "lengths" in case else None,
        "step_mask": step_mask(rng, T, B) if "mask" in case else None,
        "zero_output_for_mask": zero_output_for_mask,
        "recurrent_mask": recurrent_mask(rng, B, H, dtype) if "recurrent" in case else None,
    }


def up(a, dtype=F64):
    return None if a is None else np.asarray(a, dtype=dtype)


def kernel_run(p, opts, dy, dh_n):
    """Forward (both modes) and backward through the functional API."""
    y, h_n = F.rnn_forward(**p.forward_args(), **opts)
    _, h_last = F.rnn_forward(**p.forward_args(), return_sequences=False, **opts)
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy, dh_n, h0=p.h0, **opts)
    return y, h_n, h_last, g


def reference_run(p, opts, y, dy, dh_n, dtype):
    """Reference forward in float64, and backward from the kernel's own y: in the kernel's dtype
    for leaky relu (its slope compares stored values bit for bit), else in float64."""
    q = p.astype(F64)
    fw = dict(opts, recurrent_mask=up(opts["recurrent_mask"]))
    y_ref, h_ref = R.rnn_forward(**q.forward_args(), **fw)
    rd = dtype if opts["nonlinearity"] == "relu" and opts["alpha"] != 1.0 else F64
    g_ref = R.rnn_backward(
        up(p.x, rd),
        up(p.weight_ih, rd),
        up(p.weight_hh, rd),
        up(y, rd),
        up(dy, rd),
        up(dh_n, rd),
        h0=up(p.h0, rd),
        **dict(opts, recurrent_mask=up(opts["recurrent_mask"], rd)),
    )
    return y_ref, h_ref, g_ref


def assert_matches_reference(p, opts, dtype, rng):
    T, B, _ = p.x.shape
    H = p.weight_hh.shape[0]
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    y, h_n, h_last, g = kernel_run(p, opts, dy, dh_n)
    y_ref, h_ref, g_ref = reference_run(p, opts, y, dy, dh_n, dtype)
    assert_close(y, y_ref, dtype, "y")
    assert_close(h_n, h_ref, dtype, "h_n")
    assert_close(h_last, h_n.astype(F64), dtype, "h_n, return_sequences=False")
    for name, got, want in zip(g._fields, g, g_ref):
        assert_close(got, want.astype(F64), dtype, name)
    return y, h_n, g


# ---- the reference ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("case, zero_output_for_mask", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("alpha", [1.0, 0.6])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_and_gradients_match_reference(
    dtype, nonlinearity, alpha, case, zero_output_for_mask, shape, isa, rng
):
    T, B, D, H = shape
    p = make_problem(rng, T, B, D, H, dtype, h0=(T + B) % 2 == 0)  # with and without h0
    opts = options(case, zero_output_for_mask, rng, T, B, H, dtype, nonlinearity, alpha)
    assert_matches_reference(p, opts, dtype, rng)


def test_token_input_with_masks(rng):
    """With ids, x is an embedding table: the same results as on the gathered rows x = table[ids],
    the table's gradient the per-id sum of dx."""
    T, B, V, D, H = 7, 4, 5, 3, 6
    p = make_problem(rng, T, B, D, H)
    table = rng.standard_normal((V, D))
    ids = rng.integers(0, V, size=(T, B))
    opts = options("mask+recurrent", False, rng, T, B, H, F64)
    gathered = type(p)({**p, "x": table[ids]})
    y, h_n = F.rnn_forward(**gathered.forward_args(), **opts)
    dy = rng.standard_normal(y.shape)
    g = F.rnn_backward(gathered.x, p.weight_ih, p.weight_hh, y, dy, h_n, h0=p.h0, **opts)
    args = (p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh, p.h0)
    y_t, h_t = F.rnn_forward(table, *args, ids=ids, **opts)
    g_t = F.rnn_backward(table, p.weight_ih, p.weight_hh, y, dy, h_n, h0=p.h0, ids=ids, **opts)
    assert_close(y_t, y, F64, "y")
    assert_close(h_t, h_n, F64, "h_n")
    dtable = np.zeros_like(table)
    np.add.at(dtable, ids.ravel(), g.dx.reshape(T * B, D))
    assert_close(g_t.dx, dtable, F64, "dtable")
    for name in ("dh0", "dweight_ih", "dweight_hh", "dbias"):
        assert_close(getattr(g_t, name), getattr(g, name), F64, name)
    y_ref, _, g_ref = reference_run(gathered, opts, y, dy, h_n, F64)
    assert_close(y, y_ref, F64, "y")
    for name, got, want in zip(g._fields, g, g_ref):
        assert_close(got, want, F64, name)


# ---- semantics by construction ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_trivial_masks_are_the_plain_kernels(dtype, rng):
    """An all-true step mask and a recurrent mask of ones run the masked drivers and give the
    plain drivers' results; with lengths, the lengths' results."""
    T, B, D, H = 8, 5, 3, 17
    p = make_problem(rng, T, B, D, H, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    for lengths in (None, np.array([8, 0, 3, 8, 1])):
        plain = dict(PLAIN, lengths=lengths)
        want = kernel_run(p, plain, dy, dh_n)
        for masked in (
            {"step_mask": np.ones((T, B), bool)},
            {"step_mask": np.ones((T, B), bool), "zero_output_for_mask": True},
            {"recurrent_mask": np.ones((B, H), dtype)},
        ):
            got = kernel_run(p, dict(plain, **masked), dy, dh_n)
            for name, a, b in zip(("y", "h_n", "h_last"), got, want):
                if lengths is None:  # the same GEMMs, then only a select: bit for bit
                    assert np.array_equal(a, b), f"{name} with {list(masked)}"
                else:  # the lengths' GEMMs skip finished rows: other tile heights, roundings
                    assert_close(a, b.astype(F64), dtype, f"{name} with {list(masked)}")
            for name, a, b in zip(F.RNNGrads._fields, got[3], want[3]):
                assert_close(a, b.astype(F64), dtype, f"{name} with {list(masked)}")


def test_all_false_mask_keeps_h0_and_passes_dh_n_to_dh0(rng):
    T, B, D, H = 5, 3, 2, 4
    p = make_problem(rng, T, B, D, H)
    for zero in (False, True):
        opts = {
            "nonlinearity": "tanh",
            "alpha": 0.5,
            "lengths": None,
            "step_mask": np.zeros((T, B), bool),
            "zero_output_for_mask": zero,
            "recurrent_mask": recurrent_mask(rng, B, H, F64),
        }
        y, h_n = F.rnn_forward(**p.forward_args(), **opts)
        assert np.all(y == 0) and np.array_equal(h_n, p.h0)
        dh_n = rng.standard_normal((B, H))
        g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, np.ones_like(y), dh_n, h0=p.h0, **opts)
        assert np.array_equal(g.dh0, dh_n)
        for name in ("dx", "dweight_ih", "dweight_hh", "dbias"):
            assert not getattr(g, name).any(), name


@pytest.mark.parametrize("zero_output_for_mask", [False, True])
def test_masked_outputs_and_states_are_keras_s(zero_output_for_mask, rng):
    """Each sequence's outputs: its kept steps' states equal running only those steps, unmasked;
    a skipped step repeats the previous output (zeros before the first kept step) or is zero."""
    T, B, D, H = 9, 4, 3, 5
    p = make_problem(rng, T, B, D, H)
    keep = step_mask(rng, T, B)
    y, h_n = F.rnn_forward(
        **p.forward_args(), step_mask=keep, zero_output_for_mask=zero_output_for_mask
    )
    for b in range(B):
        kept = np.flatnonzero(keep[:, b])
        alone, alone_h = F.rnn_forward(
            p.x[kept, b : b + 1], p.weight_ih, p.weight_hh, p.bias_ih, p.bias_hh, p.h0[b : b + 1]
        )
        assert_close(y[kept, b], alone[:, 0], F64, f"kept steps of sequence {b}")
        assert_close(h_n[b], alone_h[0] if kept.size else p.h0[b], F64, f"h_n of {b}")
        previous = np.zeros(H)
        for t in range(T):
            if keep[t, b]:
                previous = y[t, b]
            else:
                want = np.zeros(H) if zero_output_for_mask else previous
                assert np.array_equal(y[t, b], want), (t, b)


@pytest.mark.parametrize("zero_output_for_mask", [False, True])
def test_lengths_and_mask_combine(zero_output_for_mask, rng):
    """Both given: a step is kept when both keep it; past its length a sequence outputs zeros,
    whatever zero_output_for_mask says; within it the mask's rule holds."""
    T, B, D, H = 7, 4, 3, 5
    p = make_problem(rng, T, B, D, H)
    keep = step_mask(rng, T, B)
    lengths = np.array([7, 2, 0, 5])
    y, h_n = F.rnn_forward(
        **p.forward_args(),
        lengths=lengths,
        step_mask=keep,
        zero_output_for_mask=zero_output_for_mask,
    )
    within = np.arange(T)[:, None] < lengths[None, :]
    y_and, h_and = F.rnn_forward(
        **p.forward_args(), step_mask=keep & within, zero_output_for_mask=zero_output_for_mask
    )
    assert np.array_equal(h_n, h_and)
    assert np.array_equal(y[within], y_and[within])
    assert not y[~within].any()


def test_recurrent_mask_is_h_times_mask_before_w_hh(rng):
    """One step by hand: a_1 = tanh(W_ih x_0 + b + W_hh (h0 * m))."""
    T, B, D, H = 1, 3, 2, 4
    p = make_problem(rng, T, B, D, H)
    m = recurrent_mask(rng, B, H, F64)
    y, h_n = F.rnn_forward(**p.forward_args(), recurrent_mask=m)
    want = np.tanh(p.x[0] @ p.weight_ih.T + p.bias_ih + (p.h0 * m) @ p.weight_hh.T + p.bias_hh)
    assert_close(y[0], want, F64, "y")
    assert_close(h_n, want, F64, "h_n")


# ---- finite differences -----------------------------------------------------------------------


@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "no-h0"])
@pytest.mark.parametrize("case, zero_output_for_mask", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("alpha", [1.0, 0.4])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
def test_gradients_by_finite_differences(
    nonlinearity, alpha, case, zero_output_for_mask, with_h0, rng
):
    T, B, D, H = 6, 3, 2, 4
    p = make_problem(rng, T, B, D, H, h0=with_h0)
    opts = options(case, zero_output_for_mask, rng, T, B, H, F64, nonlinearity, alpha)
    R_y = rng.standard_normal((T, B, H))
    R_h = rng.standard_normal((B, H))

    def loss():
        y, h_n = F.rnn_forward(**p.forward_args(), **opts)
        return float(np.sum(y * R_y) + np.sum(h_n * R_h))

    y, _ = F.rnn_forward(**p.forward_args(), **opts)
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, R_y, R_h, h0=p.h0, **opts)
    analytic = gradients_by_name(g)
    for name, want in analytic.items():
        if p[name] is None:
            continue
        numeric = numerical_gradient(loss, p[name])
        np.testing.assert_allclose(want, numeric, rtol=1e-5, atol=1e-7, err_msg=name)


# ---- threads and ISAs -----------------------------------------------------------------------------

THREAD_SHAPES = [(20, 16, 100, 256), (3, 3000, 3, 5), (50, 3, 17, 33)]


@pytest.mark.parametrize(
    "shape", THREAD_SHAPES, ids=[f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in THREAD_SHAPES]
)
@pytest.mark.parametrize(
    "case, zero_output_for_mask", [CASES[2], CASES[7]], ids=[CASE_IDS[2], CASE_IDS[7]]
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_thread_counts_give_the_same_bits(
    dtype, case, zero_output_for_mask, shape, isa, restore_threads, rng
):
    T, B, D, H = shape
    p = make_problem(rng, T, B, D, H, dtype)
    opts = options(case, zero_output_for_mask, rng, T, B, H, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    results = {}
    for n in (1, 2):
        with rnnfast.threads(n):
            _core.clear_contention_backoff()  # a busy machine would fall back to one thread
            _core.peak_helper_threads(reset=True)
            y, h_n = F.rnn_forward(**p.forward_args(), **opts)
            _core.clear_contention_backoff()
            g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy, dh_n, h0=p.h0, **opts)
            assert _core.peak_helper_threads() == n - 1, f"{n} threads were not used"
        results[n] = (y, h_n) + tuple(g)
    for name, a, b in zip(("y", "h_n") + F.RNNGrads._fields, results[2], results[1]):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: 2 threads vs 1")
    y_ref, h_ref, g_ref = reference_run(p, opts, results[1][0], dy, dh_n, dtype)
    for name, got, want in zip(
        ("y", "h_n") + F.RNNGrads._fields, results[1], (y_ref, h_ref) + tuple(g_ref)
    ):
        assert_close(got, want, dtype, name)


_ISA_SCRIPT = """
import json, sys
import numpy as np
from rnnfast import _core
from rnnfast import functional as F
data = np.load(sys.argv[1])
opts = json.loads(sys.argv[2])
masks = {k: data[k] for k in ("step_mask", "recurrent_mask")}
y, h_n = F.rnn_forward(data["x"], data["w_ih"], data["w_hh"], data["b"], None, data["h0"],
                       **opts, **masks)
g = F.rnn_backward(data["x"], data["w_ih"], data["w_hh"], y, data["dy"], None, h0=data["h0"],
                   lengths=None, **opts, **masks)
np.savez(sys.argv[3], isa=_core.active_isa(), y=y, h_n=h_n, **g._asdict())
"""


@pytest.mark.parametrize("forced", ISAS)
def test_rnnfast_isa_forces_the_masked_kernels_isa(forced, tmp_path, rng):
    """RNNFAST_ISA in a fresh process: that ISA runs, and gives the same bits as selecting it in
    this process."""
    T, B, D, H = 12, 5, 7, 33
    p = make_problem(rng, T, B, D, H, np.float32)
    data = {
        "x": p.x,
        "w_ih": p.weight_ih,
        "w_hh": p.weight_hh,
        "b": p.bias_ih,
        "h0": p.h0,
        "dy": rng.standard_normal((T, B, H)).astype(np.float32),
        "step_mask": step_mask(rng, T, B),
        "recurrent_mask": recurrent_mask(rng, B, H, np.float32),
    }
    np.savez(tmp_path / "in.npz", **data)
    opts = {"nonlinearity": "relu", "alpha": 0.7, "zero_output_for_mask": False}
    env = dict(os.environ, RNNFAST_ISA=forced)
    subprocess.run(
        [
            sys.executable,
            "-c",
            _ISA_SCRIPT,
            str(tmp_path / "in.npz"),
            json.dumps(opts),
            str(tmp_path / "out.npz"),
        ],
        env=env,
        check=True,
        cwd=Path(__file__).parent,
    )
    out = np.load(tmp_path / "out.npz")
    assert str(out["isa"]) == forced
    previous = _core.active_isa()
    try:
        _core.set_active_isa(forced)
        masks = {"step_mask": data["step_mask"], "recurrent_mask": data["recurrent_mask"]}
        y, h_n = F.rnn_forward(
            p.x, p.weight_ih, p.weight_hh, p.bias_ih, None, p.h0, **opts, **masks
        )
        g = F.rnn_backward(
            p.x,
            p.weight_ih,
            p.weight_hh,
            y,
            data["dy"],
            None,
            h0=p.h0,
            lengths=None,
            **opts,
            **masks,
        )
    finally:
        _core.set_active_isa(previous)
    for name, want in {"y": y, "h_n": h_n, **g._asdict()}.items():
        np.testing.assert_array_equal(out[name], want, err_msg=name)


# ---- Keras --------------------------------------------------------------------------------------
# Keras 3's torch backend computes a float64 SimpleRNN's matmuls in float32 (see
# nn/test_rnn_keras_parity.py): Keras is an oracle in float32 only.

KT, KB, KD, KH = 7, 5, 4, 6


def assert_keras_close(actual, desired, what):
    """float32 against Keras: rtol 2e-5, atol 2e-6 times the largest magnitude (a gradient sums
    terms of that size, so a small entry carries their rounding)."""
    scale = max(1.0, float(np.max(np.abs(desired)))) if np.size(desired) else 1.0
    np.testing.assert_allclose(actual, desired, rtol=2e-5, atol=2e-6 * scale, err_msg=what)


def keras_rnn(keras, rng, activation, use_bias=True, **kw):
    """A built SimpleRNN returning every output and the final state, with random weights (small,
    so relu stays tame); and its weights as rnnfast's (W_ih, W_hh, b)."""
    kl = keras.layers.SimpleRNN(
        KH, activation=activation, use_bias=use_bias, return_sequences=True, return_state=True, **kw
    )
    kl.build((None, KT, KD))
    weights = [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(np.float32) for v in kl.weights]
    kl.set_weights(weights)
    return kl, (weights[0].T.copy(), weights[1].T.copy(), weights[2] if use_bias else None)


def keras_mask(rng):
    """(B, T): a general mask with a sequence fully masked, a step masked everywhere, and
    sequences whose first steps are masked (the carried output is then zeros)."""
    mask = rng.random((KB, KT)) < 0.6
    mask[1, :] = False
    mask[:, 3] = False
    mask[0, :2] = False
    mask[0, 2] = True
    return mask


def keras_call(torch, kl, x, h0, **kw):
    """Keras's outputs (B, T, H), final state and the gradients of sum(outputs * R) +
    sum(state * S) with respect to x, h0 and the weights, through torch's autograd."""
    xt = torch.tensor(x, requires_grad=True)
    ht = torch.tensor(h0, requires_grad=True)
    out, state = kl(xt, initial_state=[ht], **kw)
    rng = np.random.default_rng(7)
    R = torch.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32))
    S = torch.tensor(rng.standard_normal(tuple(state.shape)).astype(np.float32))
    (out * R).sum().add((state * S).sum()).backward()
    grads = [v.value.grad.detach().numpy().copy() for v in kl.weights]
    return (
        out.detach().numpy(),
        state.detach().numpy(),
        xt.grad.numpy(),
        ht.grad.numpy(),
        grads,
        R.numpy(),
        S.numpy(),
    )


def rnnfast_vs_keras(
    keras_result,
    weights,
    x,
    h0,
    activation,
    step_mask_bt=None,
    zero_output_for_mask=False,
    rmask=None,
    reverse=False,
):
    """The functional API on the same problem (time-major; reversed in time for go_backwards,
    whose outputs Keras returns in processing order) against Keras's numbers."""
    out, state, dx_k, dh0_k, grads_k, R_y, R_h = keras_result
    w_ih, w_hh, b = weights
    xs = x.swapaxes(0, 1)
    keep = None if step_mask_bt is None else step_mask_bt.T
    if reverse:
        xs = xs[::-1]
        keep = None if keep is None else keep[::-1]
    opts = {
        "nonlinearity": activation,
        "lengths": None,
        "alpha": 1.0,
        "step_mask": keep,
        "zero_output_for_mask": zero_output_for_mask,
        "recurrent_mask": rmask,
    }
    y, h_n = F.rnn_forward(xs, w_ih, w_hh, b, None, h0, **opts)
    assert_keras_close(y.swapaxes(0, 1), out, "outputs")
    assert_keras_close(h_n, state, "final state")
    g = F.rnn_backward(xs, w_ih, w_hh, y, R_y.swapaxes(0, 1), R_h, h0=h0, **opts)
    dx = g.dx[::-1] if reverse else g.dx
    assert_keras_close(dx.swapaxes(0, 1), dx_k, "dx")
    assert_keras_close(g.dh0, dh0_k, "dh0")
    assert_keras_close(g.dweight_ih.T, grads_k[0], "dkernel")
    assert_keras_close(g.dweight_hh.T, grads_k[1], "drecurrent")
    if b is not None:
        assert_keras_close(g.dbias, grads_k[2], "dbias")


@pytest.mark.parametrize("use_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("zero_output_for_mask", [False, True], ids=["previous", "zeros"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_keras_simple_rnn_with_a_general_mask(
    keras, torch, activation, zero_output_for_mask, use_bias, rng
):
    kl, weights = keras_rnn(
        keras, rng, activation, use_bias, zero_output_for_mask=zero_output_for_mask
    )
    x = rng.standard_normal((KB, KT, KD)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (KB, KH)).astype(np.float32)
    mask = keras_mask(rng)
    result = keras_call(torch, kl, x, h0, mask=torch.tensor(mask))
    # the carried output before the first kept step is Keras's zeros, not h0
    assert not result[0][0, :2].any() and not result[0][1].any()
    rnnfast_vs_keras(result, weights, x, h0, activation, mask, zero_output_for_mask)


def test_keras_masking_layer(keras, torch, rng):
    """The mask from keras.layers.Masking (steps whose features are all 0) reaches SimpleRNN as
    in a model; rnnfast's step_mask is the same test on the input."""
    kl, weights = keras_rnn(keras, rng, "tanh")
    masking = keras.layers.Masking(mask_value=0.0)
    x = rng.standard_normal((KB, KT, KD)).astype(np.float32)
    mask = keras_mask(rng)
    x[~mask] = 0.0
    h0 = rng.uniform(-1, 1, (KB, KH)).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    ht = torch.tensor(h0, requires_grad=True)
    masked = masking(xt)
    derived = masking.compute_mask(xt).numpy()
    assert np.array_equal(derived, mask)
    out, state = kl(masked, initial_state=[ht], mask=masking.compute_mask(xt))
    w_ih, w_hh, b = weights
    y, h_n = F.rnn_forward(
        x.swapaxes(0, 1), w_ih, w_hh, b, None, h0, step_mask=np.any(x != 0.0, axis=2).T
    )
    assert_keras_close(y.swapaxes(0, 1), out.detach().numpy(), "outputs")
    assert_keras_close(h_n, state.detach().numpy(), "final state")


@pytest.mark.parametrize("zero_output_for_mask", [False, True], ids=["previous", "zeros"])
def test_keras_go_backwards_with_a_mask(keras, torch, zero_output_for_mask, rng):
    """go_backwards reverses the input and the mask and returns outputs in processing order:
    rnnfast on the time-reversed input and mask gives the same numbers."""
    kl, weights = keras_rnn(
        keras, rng, "tanh", go_backwards=True, zero_output_for_mask=zero_output_for_mask
    )
    x = rng.standard_normal((KB, KT, KD)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (KB, KH)).astype(np.float32)
    mask = keras_mask(rng)
    result = keras_call(torch, kl, x, h0, mask=torch.tensor(mask))
    rnnfast_vs_keras(result, weights, x, h0, "tanh", mask, zero_output_for_mask, reverse=True)


def _fixed_recurrent_dropout(kl, mask):
    """Make Keras's cell use a known recurrent dropout mask: the cell asks
    get_recurrent_dropout_mask once per call and applies it to h_{t-1} at every step."""
    kl.cell.get_recurrent_dropout_mask = lambda step_input: mask


@pytest.mark.parametrize("with_mask", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_keras_recurrent_dropout(keras, torch, activation, with_mask, rng):
    p = 0.4
    kl, weights = keras_rnn(keras, rng, activation, recurrent_dropout=p)
    rmask = recurrent_mask(rng, KB, KH, np.float32, p)
    _fixed_recurrent_dropout(kl, torch.tensor(rmask))
    x = rng.standard_normal((KB, KT, KD)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (KB, KH)).astype(np.float32)
    mask = keras_mask(rng) if with_mask else None
    kw = {"mask": torch.tensor(mask)} if with_mask else {}
    result = keras_call(torch, kl, x, h0, training=True, **kw)
    # the known mask was used: inference (no dropout) differs
    out_eval, _ = kl(x, initial_state=[torch.tensor(h0)], training=False, **kw)
    assert not np.allclose(out_eval.detach().numpy(), result[0])
    rnnfast_vs_keras(result, weights, x, h0, activation, mask, rmask=rmask)
