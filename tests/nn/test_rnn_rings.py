"""A dilated RNN layer's streaming state (nn/recurrent/rnn_rings.py): its last d states per layer, a ring.
``step`` and stateful calls over the pieces of a sequence must give the one forward over the
whole of it, the forward itself being checked against the equation with one initial state per
chain; the per-chain h0's gradient by finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast

F64 = np.float64
D, H = 3, 4
TIGHT = dict(rtol=1e-12, atol=1e-12)


def _layer(dilation, num_layers=None, **kw):
    num_layers = num_layers or (len(dilation) if isinstance(dilation, list) else 1)
    kw.setdefault("alpha", [1.0, 0.6, 0.8][:num_layers] if num_layers > 1 else 0.7)
    return rnnfast.RNN(D, H, num_layers=num_layers, dilation=dilation, dtype=F64, seed=7, **kw)


def _dilations(layer):
    d = layer.dilation
    return d if isinstance(d, list) else [d] * layer.num_layers


def _random_rings(layer, batch, rng):
    return [rng.standard_normal((d, batch, H)) for d in _dilations(layer)]


def equation(layer, x, rings):
    """The stack from the equation, h_t = (1-a) h_{t-d} + a act(W_ih x_t + b + W_hh h_{t-d}),
    layer k's h_{j-d} being rings[k][j] (unidirectional, every sequence T long): the output
    and h_n."""
    p, T = layer.state_dict(), x.shape[0]
    alphas = layer.alpha if isinstance(layer.alpha, list) else [layer.alpha] * layer.num_layers
    act = np.tanh if layer.nonlinearity == "tanh" else (lambda a: np.maximum(a, 0.0))
    inp, h_n = x, []
    for k, d in enumerate(_dilations(layer)):
        w_ih, w_hh = p[f"weight_ih_l{k}"], p[f"weight_hh_l{k}"]
        b = p[f"bias_ih_l{k}"] + p[f"bias_hh_l{k}"]
        hs = list(rings[k])  # hs[t + d] is h_t
        for t in range(T):
            prev = hs[t]
            a = alphas[k]
            hs.append((1 - a) * prev + a * act(inp[t] @ w_ih.T + b + prev @ w_hh.T))
        out = np.array(hs[d:])
        h_n.append(out[-1])
        inp = out + inp if layer.residual and k > 0 else out
    return inp, np.array(h_n)


@pytest.mark.parametrize("dilation", [2, 3, [1, 2, 4]], ids=str)
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_one_state_per_chain_is_the_equation(dilation, nonlinearity, rng):
    layer = _layer(dilation, nonlinearity=nonlinearity, residual=isinstance(dilation, list))
    x = rng.standard_normal((10, 3, D))
    rings = _random_rings(layer, 3, rng)
    y, h_n = layer.eval()(x, rings)
    expected, h_expected = equation(layer, x, rings)
    np.testing.assert_allclose(y, expected, **TIGHT)
    np.testing.assert_allclose(h_n, h_expected, **TIGHT)


@pytest.mark.parametrize("dilation", [2, 3, [1, 2, 4]], ids=str)
@pytest.mark.parametrize("start", ["zeros", "broadcast", "per chain"])
def test_steps_give_the_forward(dilation, start, rng):
    layer = _layer(dilation).eval()
    T, B = 9, 2
    x = rng.standard_normal((T, B, D))
    h0 = {
        "zeros": None,
        "broadcast": rng.standard_normal((layer.num_layers, B, H)),
        "per chain": _random_rings(layer, B, rng),
    }[start]
    y, h_n = layer(x, h0)
    h, outs = h0, []
    for t in range(T):
        out, h = layer.step(x[t], h)
        outs.append(out)
    np.testing.assert_allclose(np.array(outs), y, **TIGHT)
    np.testing.assert_allclose(np.array([ring[-1] for ring in h]), h_n, **TIGHT)
    # the ring after T steps holds the last d outputs of each layer
    assert [ring.shape for ring in h] == [(d, B, H) for d in _dilations(layer)]
    np.testing.assert_allclose(h[-1], y[-_dilations(layer)[-1] :], **TIGHT)


def test_unbatched_steps_give_the_unbatched_forward(rng):
    layer = _layer([2, 3]).eval()
    x = rng.standard_normal((7, D))
    rings = [r[:, 0] for r in _random_rings(layer, 1, rng)]
    y, _ = layer(x, rings)
    h, outs = rings, []
    for t in range(7):
        out, h = layer.step(x[t], h)
        outs.append(out)
    np.testing.assert_allclose(np.array(outs), y, **TIGHT)
    assert [r.shape for r in h] == [(2, H), (3, H)]


@pytest.mark.parametrize("dilation", [3, [1, 2, 4]], ids=str)
@pytest.mark.parametrize("pieces", [[10], [1, 2, 4, 3], [5, 5], [2, 8]], ids=str)
def test_stateful_pieces_give_the_whole_sequence(dilation, pieces, rng):
    whole = _layer(dilation).eval()
    chunked = _layer(dilation, stateful=True).eval()
    x = rng.standard_normal((sum(pieces), 2, D))
    h0 = _random_rings(whole, 2, rng)
    y, h_n = whole(x, h0)
    ys, start, first = [], 0, True
    for n in pieces:
        piece, start = x[start : start + n], start + n
        out, last = chunked(piece, h0 if first else None)
        ys.append(out)
        first = False
    np.testing.assert_allclose(np.concatenate(ys), y, **TIGHT)
    np.testing.assert_allclose(last, h_n, **TIGHT)


def test_stateful_forward_then_steps_then_forward(rng):
    whole = _layer([1, 3]).eval()
    streaming = _layer([1, 3], stateful=True).eval()
    x = rng.standard_normal((11, 2, D))
    y, _ = whole(x)
    a, _ = streaming(x[:4])
    steps = [streaming.step(x[t])[0] for t in range(4, 6)]
    b, _ = streaming(x[6:])
    np.testing.assert_allclose(np.concatenate([a, np.array(steps), b]), y, **TIGHT)


def test_stateful_with_lengths_continues_each_sequence_from_its_own_end(rng):
    """Sequence b's second piece follows its first L_b steps, as one call over the two."""
    layer = _layer([2, 3], stateful=True).eval()
    whole = _layer([2, 3]).eval()
    x1, x2 = rng.standard_normal((5, 3, D)), rng.standard_normal((4, 3, D))
    lengths = np.array([1, 5, 3])  # one shorter than every dilation, one full
    layer(x1, lengths=lengths)
    y2, h2 = layer(x2)
    for b, n in enumerate(lengths):
        seq = np.concatenate([x1[:n, b], x2[:, b]])
        expected, h_exp = whole(seq)
        np.testing.assert_allclose(y2[:, b], expected[n:], **TIGHT)
        np.testing.assert_allclose(h2[:, b], h_exp, **TIGHT)


def test_stateful_bidirectional_carries_each_direction_s_rings(rng):
    layer = _layer(2, bidirectional=True, stateful=True).eval()
    twin = _layer(2, bidirectional=True).eval()
    x1, x2 = rng.standard_normal((5, 2, D)), rng.standard_normal((6, 2, D))
    layer(x1)
    state = layer.state
    assert [r.shape for r in state] == [(2, 2, H), (2, 2, H)]
    np.testing.assert_array_equal(layer(x2)[0], twin(x2, state)[0])
    with pytest.raises(ValueError, match="bidirectional"):
        layer.step(x2[0])


def test_training_stateful_dilated_layer_and_the_per_chain_gradient(rng):
    """Truncated BPTT: a stateful layer in training starts from its rings; backward's dh0 is
    one gradient per ring, checked by finite differences."""
    layer = _layer([2, 3], stateful=True)
    x = rng.standard_normal((7, 2, D))
    layer(rng.standard_normal((4, 2, D)))
    rings = layer.state
    y, h_n = layer(x)
    wy, wh = rng.standard_normal(y.shape), rng.standard_normal(h_n.shape)
    _, dh0 = layer.backward(wy, wh)
    assert [g.shape for g in dh0] == [r.shape for r in rings]
    probe = _layer([2, 3])

    def loss():
        yy, hh = probe(x, rings)
        return float(np.sum(yy * wy) + np.sum(hh * wh))

    for k in range(2):
        np.testing.assert_allclose(
            dh0[k], numerical_gradient(loss, rings[k]), rtol=1e-6, atol=1e-8, err_msg=str(k)
        )


def test_state_is_a_copy_and_a_dilation_change_forgets_it(rng):
    layer = _layer([1, 2], stateful=True).eval()
    layer(rng.standard_normal((3, 2, D)))
    state = layer.state
    state[1][...] = 0
    assert np.any(layer.state[1] != 0)
    layer.dilation = [1, 3]
    assert layer.state is None
    out, h = layer.step(rng.standard_normal((2, D)))
    # from zeros, a ring grows as steps arrive: the initial state and one step, at most d
    assert [r.shape for r in h] == [(1, 2, H), (2, 2, H)]
    out, h = layer.step(rng.standard_normal((2, D)))
    out, h = layer.step(rng.standard_normal((2, D)))
    assert [r.shape for r in h] == [(1, 2, H), (3, 2, H)]


def test_the_caller_s_rings_are_not_modified(rng):
    layer = _layer(2)
    rings = _random_rings(layer, 2, rng)
    before = [r.copy() for r in rings]
    layer(rng.standard_normal((5, 2, D)), rings)
    layer.backward(None, np.ones((1, 2, H)))
    layer.eval().step(rng.standard_normal((2, D)), rings)
    for r, b in zip(rings, before):
        np.testing.assert_array_equal(r, b)


@pytest.mark.parametrize(
    "h, match",
    [
        ([np.zeros((2, 2, H))], r"num_layers = 2 of them"),
        ([np.zeros((1, 2, H)), np.zeros((4, 2, H))], r"h0\[1\].*\(3, 2, 4\)"),
        ([np.zeros((2, H)), np.zeros((3, 2, H))], r"h0\[0\].*\(1, 2, 4\)"),
    ],
    ids=["count", "ring-size", "batch-axis"],
)
def test_bad_rings(h, match, rng):
    layer = _layer([1, 3])
    x = rng.standard_normal((4, 2, D))
    with pytest.raises(ValueError, match=match):
        layer(x, h)
    with pytest.raises(ValueError, match=match.replace("h0", "h")):
        layer.step(x[0], h)


def test_stateful_batch_change_is_refused(rng):
    layer = _layer(2, stateful=True).eval()
    layer(rng.standard_normal((3, 2, D)))
    with pytest.raises(ValueError, match="batch of 2"):
        layer(rng.standard_normal((3, 4, D)))
    with pytest.raises(ValueError, match="batch of 2"):
        layer.step(rng.standard_normal((4, D)))


def test_stateful_dilated_layer_saves_and_loads(tmp_path, rng):
    layer = _layer([1, 2, 4], stateful=True).eval()
    x = rng.standard_normal((6, 2, D))
    layer.save(tmp_path / "s.npz")
    loaded = rnnfast.load(tmp_path / "s.npz").eval()
    assert loaded.stateful and loaded.dilation == [1, 2, 4]
    # the carried state is not part of the file (as for every stateful RNN): both start at zeros
    for piece in (x[:3], x[3:]):
        np.testing.assert_array_equal(loaded(piece)[0], layer(piece)[0])


def test_stateful_with_a_step_mask_gives_the_whole_sequence(rng):
    """Keras's general mask (skipped steps carry the state, output zeros): the ring holds the
    chains' carried states across the cut."""
    whole = _layer([1, 3], zero_output_for_mask=True).eval()
    chunked = _layer([1, 3], zero_output_for_mask=True, stateful=True).eval()
    x = rng.standard_normal((10, 3, D))
    mask = rng.random((3, 10)) < 0.6
    mask[:, 0] = True
    y, h_n = whole(x, mask=mask)
    a, _ = chunked(x[:4], mask=mask[:, :4])
    b, h_b = chunked(x[4:], mask=mask[:, 4:])
    np.testing.assert_allclose(np.concatenate([a, b]), y, **TIGHT)
    np.testing.assert_allclose(h_b, h_n, **TIGHT)
