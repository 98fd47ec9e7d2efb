"""A dilation's cost is bounded by the call, not by d (nn/recurrent/dilation.py, issue 43): when d >= T no
step reads another step's state, so a forward and its backward over T steps at d = 10**9 are
those at d = T, allocation for allocation (tracemalloc) and bit for bit; ``step`` and stateful
layers keep rings that grow as steps arrive (the short form: ``ring[0]`` stands for the oldest
entries), at most min(d, 1 + steps seen) states. Evidence is work and equality, never timing."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast

F64 = np.float64
D, H, T, B = 3, 4, 5, 2
HUGE = 10**9
CELLS = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}
EXACT = dict(rtol=0, atol=0)


def _layer(cell, dilation, **kw):
    kw.setdefault("dtype", F64)
    if cell == "rnn":
        kw.setdefault("alpha", 0.7)
    return CELLS[cell](D, H, dilation=dilation, seed=11, **kw)


def _forward_backward(layer, x, lengths=None, bidirectional_h=1):
    y, h_n = layer(x, lengths=lengths)
    dy = np.cos(np.arange(y.size, dtype=F64)).reshape(y.shape)
    dx, dh0 = layer.backward(dy)
    return y, h_n, dx, dh0, {k: v.copy() for k, v in layer.grads.items()}


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_allclose(a[k], b[k], **EXACT, err_msg=k)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
    else:
        np.testing.assert_allclose(a, b, **EXACT)


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("lengths", [None, [5, 0, 3]], ids=["full", "lengths"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_a_dilation_beyond_t_gives_the_d_equal_t_results_exactly(cell, lengths, bidirectional):
    x = np.sin(np.arange(T * 3 * D, dtype=F64)).reshape(T, 3, D)
    lengths = None if lengths is None else np.array(lengths)
    ref = _forward_backward(_layer(cell, T, bidirectional=bidirectional), x, lengths)
    for d in (T + 1, 64, HUGE, 2**31):
        got = _forward_backward(_layer(cell, d, bidirectional=bidirectional), x, lengths)
        _same(got, ref)


def _peak(fn):
    """The peak of memory traced while ``fn`` runs (NumPy's arrays are traced), in bytes."""
    fn()  # warm: first-call imports and caches are not the call's work
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_huge_dilation_allocates_no_more_than_d_equal_t(cell):
    """The issue's check, as work: the forward and backward at d = 10**9 allocate no more than
    at d = T (a few hundred bytes of slack for Python's own objects). Before the fix the forward
    asked for 8 GB at d = 10**9."""
    x = np.sin(np.arange(T * B * D, dtype=F64)).reshape(T, B, D)
    peaks = {}
    for d in (T, HUGE):
        layer = _layer(cell, d)
        peaks[d] = _peak(lambda layer=layer: _forward_backward(layer, x))
    assert peaks[HUGE] <= peaks[T] + 512, peaks


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_steps_at_a_huge_dilation_keep_a_ring_of_the_steps_seen(cell, rng):
    """Rings grow as steps arrive: after n steps from one state a ring holds min(d, 1 + n)
    states (the initial one, then each step's), and with d >= the steps every step reads the
    initial state: the same outputs as a d that just covers them."""
    big, small = _layer(cell, HUGE).eval(), _layer(cell, 8).eval()
    xs = rng.standard_normal((7, B, D))
    h_big = h_small = None
    for n, x_t in enumerate(xs, start=1):
        out_big, h_big = big.step(x_t, h_big)
        out_small, h_small = small.step(x_t, h_small)
        np.testing.assert_allclose(out_big, out_small, **EXACT)
        rings = h_big[0] if cell == "lstm" else h_big
        assert [r.shape for r in rings] == [(1 + n, B, H)]
    out, h = small.step(xs[0], h_small)  # the 8th step: the ring is full, d = 8 entries
    assert (h[0] if cell == "lstm" else h)[0].shape == (8, B, H)
    out, h = small.step(xs[1], h)
    assert (h[0] if cell == "lstm" else h)[0].shape == (8, B, H)


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_stateful_layer_at_a_huge_dilation_carries_the_steps_seen(cell, rng):
    layer = _layer(cell, [1, HUGE], num_layers=2, stateful=True).eval()
    whole = _layer(cell, [1, HUGE], num_layers=2).eval()
    x = rng.standard_normal((9, B, D))
    y, h_n = whole(x)
    a, _ = layer(x[:4])
    state = layer.state[0] if cell == "lstm" else layer.state
    assert [r.shape[0] for r in state] == [1, 5]
    b = np.array([layer.step(x[t])[0] for t in (4, 5)])
    c, h_c = layer(x[6:])
    np.testing.assert_allclose(np.concatenate([a, b, c]), y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h_c[0] if cell == "lstm" else h_c, h_n[0] if cell == "lstm" else h_n,
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    state = layer.state[0] if cell == "lstm" else layer.state
    assert [r.shape[0] for r in state] == [1, 10]


def _equation(layer, x, lengths, ring, d):
    """The Elman layer from the equation, sequence by sequence, layer 0's h_{t-d} read from the
    full ring ``ring`` (d, B, H) for t < d: (y, h_n), h_n of an empty sequence the ring's
    newest."""
    p = layer.state_dict()
    w_ih, w_hh, b = p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"] + p["bias_hh_l0"]
    y = np.zeros(x.shape[:2] + (H,))
    h_n = np.zeros((x.shape[1], H))
    for s, n in enumerate(lengths):
        hs = list(ring[:, s])
        for t in range(n):
            prev = hs[t]
            hs.append(0.3 * prev + 0.7 * np.tanh(w_ih @ x[t, s] + b + w_hh @ prev))
        y[:n, s] = np.reshape(hs[d:], (n, H))
        h_n[s] = hs[-1]
    return y, h_n


@pytest.mark.parametrize("m", [1, 3, 8])
def test_a_short_ring_is_its_full_ring(m, rng):
    """A ring of m <= d entries stands for the full ring whose first d - m + 1 entries are its
    first: the forward from the equation (with d = 8 > T = 5, so fewer chains than d run, and an
    empty sequence, whose h_n is the ring's newest), and its gradient by finite differences."""
    d, lengths = 8, np.array([5, 0, 2])
    layer = _layer("rnn", d)
    x = rng.standard_normal((T, 3, D))
    short = rng.standard_normal((m, 3, H))
    full = np.concatenate([np.repeat(short[:1], d - m, axis=0), short])
    y, h_n = layer.eval()(x, [short], lengths=lengths)
    y_ref, h_ref = _equation(layer, x, lengths, full, d)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h_n[0], h_ref, rtol=1e-12, atol=1e-12)

    layer.train()
    wy, wh = rng.standard_normal(y.shape), rng.standard_normal(h_n.shape)
    layer(x, [short], lengths=lengths)
    _, dh0 = layer.backward(wy, wh)
    assert [g.shape for g in dh0] == [short.shape]

    def loss():
        yy, hh = layer(x, [short], lengths=lengths)
        return float(np.sum(yy * wy) + np.sum(hh * wh))

    np.testing.assert_allclose(dh0[0], numerical_gradient(loss, short), rtol=1e-6, atol=1e-8)


def test_lstm_rings_of_different_lengths_are_widened(rng):
    """The LSTM's (h, c) rings may be short forms of different lengths (or None for zeros)."""
    layer = _layer("lstm", 6).eval()
    x = rng.standard_normal((T, B, D))
    h, c = rng.standard_normal((2, B, H)), rng.standard_normal((4, B, H))
    y, _ = layer(x, ([h], [c]))
    full = [np.concatenate([np.repeat(r[:1], 6 - len(r), axis=0), r]) for r in (h, c)]
    y_full, _ = layer(x, ([full[0]], [full[1]]))
    np.testing.assert_allclose(y, y_full, **EXACT)
    y_none, _ = layer(x, ([h], None))
    y_zero, _ = layer(x, ([h], [np.zeros((1, B, H))]))
    np.testing.assert_allclose(y_none, y_zero, **EXACT)


def test_a_ring_longer_than_d_is_refused():
    layer = _layer("rnn", 3)
    with pytest.raises(ValueError, match=r"h0\[0\]: expected the ring .* 1 <= m <= d"):
        layer(np.zeros((T, B, D)), [np.zeros((4, B, H))])
