"""Dilated GRU and LSTM layers (``dilation``, as the Elman layer's: nn/recurrent/dilation.py, nn/recurrent/stack.py):
the layer against the same cell run by hand on each interleaved chain (``functional.gru_forward``
/ ``lstm_forward`` on x[j::d] with the chains' lengths), over d, lengths, directions, stacked
per-layer dilations and proj_size; gradients by finite differences in float64; the rings of
stateful layers and ``step`` (nn/recurrent/rnn_rings.py, nn/recurrent/rnn_streaming.py), the LSTM's ring form the
pair (h, c) of ring lists; input and recurrent dropout (one mask per gate and sequence, every
chain of a sequence reading it); bad rings refused by name."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast
from rnnfast import functional
from rnnfast._validation import dropout_mask

F64 = np.float64
T, B, D, H, P = 7, 4, 3, 4, 2
LENGTHS = np.array([4, 7, 0, 1])  # partial, full, empty, one step (not sorted: the layer sorts)
TIGHT = dict(rtol=1e-12, atol=1e-12)
FD = dict(rtol=1e-6, atol=1e-8)

# (cell, proj_size)
CELLS = [("GRU", 0), ("LSTM", 0), ("LSTM", P)]
CELL_IDS = ["GRU", "LSTM", "LSTM-proj"]


def _layer(cell, dilation, num_layers=None, **kw):
    name, proj = cell
    num_layers = num_layers or (len(dilation) if isinstance(dilation, list) else 1)
    if name == "LSTM":
        kw["proj_size"] = proj
    return getattr(rnnfast, name)(
        D, H, num_layers=num_layers, dilation=dilation, dtype=F64, seed=3, **kw
    )


def _dilations(layer):
    d = layer.dilation
    return d if isinstance(d, list) else [d] * layer.num_layers


def _widths(layer):
    """(R, H) of an LSTM, (H,) of a GRU: the parts of its state."""
    return layer.cell.state_widths(layer)


def _is_lstm(layer):
    return layer.cell.num_states == 2


# ---- the oracle: the cell by hand on each chain -------------------------------------------------


def _cell_run(layer, idx, x, lengths, s0, input_mask=None, recurrent_mask=None):
    """One (layer, direction) ``idx`` undilated on functional's kernels from the joined state
    s0 (B, S): ``(y (T, B, R), joined h_n (B, S))``."""
    p = layer.state_dict()
    w_ih, w_hh, b_ih, b_hh = (None if n is None else p[n] for n in layer._names[idx])
    options = dict(
        activation=layer.activation,
        recurrent_activation=layer.recurrent_activation,
        return_sequences=True,
        input_mask=input_mask,
        recurrent_mask=recurrent_mask,
    )
    if not _is_lstm(layer):
        out = functional.gru_forward(
            x, w_ih, w_hh, b_ih, b_hh, s0, lengths, reset_after=layer.reset_after, **options
        )
        return out.y, out.h_n
    R = _widths(layer)[0]
    w_hr = p[layer._names[idx][0].replace("weight_ih", "weight_hr")] if layer.proj_size else None
    out = functional.lstm_forward(
        x,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        np.ascontiguousarray(s0[:, :R]),
        np.ascontiguousarray(s0[:, R:]),
        lengths,
        weight_hr=w_hr,
        **options,
    )
    return out.y, np.concatenate([out.h_n, out.c_n], axis=-1)


def _chains(layer, idx, d, x, lengths, ring, **masks):
    """One (layer, direction) of dilation d by hand: chain j is the cell over x[j::d] with the
    chains' own lengths, from ring[j] (B, S); the same masks (one per sequence) for every
    chain. ``(y (T, B, R), h_n (B, S): each sequence's state after its own last step)``."""
    steps, batch = x.shape[0], x.shape[1]
    full = np.full(batch, steps) if lengths is None else lengths
    y = np.zeros((steps, batch, layer.cell.output_width(layer)))
    finals = []
    for j in range(d):
        chain_len = np.maximum(0, -(-(full - j) // d))
        y_j, h_j = _cell_run(layer, idx, np.ascontiguousarray(x[j::d]), chain_len, ring[j], **masks)
        y[j::d] = y_j
        finals.append(h_j)
    h_n = np.array([finals[(L - 1) % d][b] for b, L in enumerate(full)])
    return y, h_n


def _reverse(a, lengths):
    """Each sequence of a (T, B, ...) array reversed within its own length."""
    out = a.copy()
    full = np.full(a.shape[1], a.shape[0]) if lengths is None else lengths
    for b, L in enumerate(full):
        out[:L, b] = a[:L, b][::-1]
    return out


def by_hand(layer, x, lengths=None, rings=None, masks=None):
    """The whole stack by hand (directions concatenated, residual connections), each
    (layer, direction) i from ``rings[i]`` (d, B, S) (zeros if None) with ``masks[i]`` (a
    dict of functional's mask keywords): ``(y, h_n (layers*dirs, B, S))``."""
    dirs = layer.num_directions
    S = layer.cell.state_width(layer)
    inp, h_n = x, []
    for k, d in enumerate(_dilations(layer)):
        outs = []
        for r in range(dirs):
            i = k * dirs + r
            ring = np.zeros((d, x.shape[1], S)) if rings is None else rings[i]
            xin = _reverse(inp, lengths) if r else inp
            y, h = _chains(layer, i, d, xin, lengths, ring, **({} if masks is None else masks[i]))
            outs.append(_reverse(y, lengths) if r else y)
            h_n.append(h)
        out = np.concatenate(outs, axis=2)
        inp = out + inp if layer.residual and k > 0 else out
    return inp, np.array(h_n)


def _joined(layer, state):
    """A state in the layer's API form ((h, c) for the LSTM) joined on the last axis; ring
    forms (lists) ring by ring."""
    if not _is_lstm(layer):
        return state
    h, c = state
    if isinstance(h, list):
        return [np.concatenate(pair, axis=-1) for pair in zip(h, c)]
    return np.concatenate([h, c], axis=-1)


def _api(layer, joined):
    """The inverse of :func:`_joined`."""
    if not _is_lstm(layer):
        return joined
    R = _widths(layer)[0]
    if isinstance(joined, list):
        return [r[..., :R] for r in joined], [r[..., R:] for r in joined]
    return joined[..., :R], joined[..., R:]


def _random_rings(layer, batch, rng, directions=1):
    S = layer.cell.state_width(layer)
    return [
        rng.standard_normal((d, batch, S)) for d in _dilations(layer) for _ in range(directions)
    ]


# ---- forward -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("lengths", [None, LENGTHS], ids=["full", "lengths"])
def test_forward_is_the_cell_on_each_chain(cell, d, bidirectional, lengths, rng):
    layer = _layer(cell, d, bidirectional=bidirectional)
    x = rng.standard_normal((T, B, D))
    dirs = layer.num_directions
    h0 = rng.standard_normal((dirs, B, layer.cell.state_width(layer)))
    y, h_n = layer(x, _api(layer, h0), lengths)
    rings = [np.broadcast_to(h0[i], (d,) + h0.shape[1:]) for i in range(dirs)]
    y_ref, h_ref = by_hand(layer, x, lengths, rings)
    np.testing.assert_allclose(y, y_ref, **TIGHT)
    np.testing.assert_allclose(_joined(layer, h_n), h_ref, **TIGHT)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("dilation", [[1, 2], [2, 3]], ids=str)
def test_stacked_per_layer_dilations(cell, dilation, rng):
    layer = _layer(cell, dilation, bidirectional=True, residual=True)
    x = rng.standard_normal((T, B, D))
    y, h_n = layer(x, lengths=LENGTHS)
    y_ref, h_ref = by_hand(layer, x, LENGTHS)
    np.testing.assert_allclose(y, y_ref, **TIGHT)
    np.testing.assert_allclose(_joined(layer, h_n), h_ref, **TIGHT)
    # batch_first and Keras's forms are the same numbers
    layer.batch_first, layer.return_sequences = True, False
    last = layer(x.swapaxes(0, 1), lengths=LENGTHS)
    for b, L in enumerate(LENGTHS):
        R = layer.cell.output_width(layer)
        forward = y_ref[L - 1, b, :R] if L else 0.0
        np.testing.assert_allclose(last[b, :R], forward, **TIGHT)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_ring_h0_starts_each_chain(cell, rng):
    layer = _layer(cell, [2, 3], bidirectional=True)
    x = rng.standard_normal((T, B, D))
    rings = _random_rings(layer, B, rng, directions=2)
    y, h_n = layer(x, _api(layer, rings), LENGTHS)
    y_ref, h_ref = by_hand(layer, x, LENGTHS, rings)
    np.testing.assert_allclose(y, y_ref, **TIGHT)
    np.testing.assert_allclose(_joined(layer, h_n), h_ref, **TIGHT)


def test_token_input_and_get_config(rng):
    emb = rnnfast.Embedding(9, D, dtype=F64, seed=1)
    ids = rng.integers(0, 9, size=(T, B))
    layer = rnnfast.GRU(D, H, num_layers=2, dilation=[2, 1], dtype=F64, seed=2).eval()
    y, h_n = layer(ids, embedding=emb)
    y2, h2 = layer(emb.eval()(ids))
    np.testing.assert_allclose(y, y2, **TIGHT)
    np.testing.assert_allclose(h_n, h2, **TIGHT)
    config = layer.get_config()
    assert config["dilation"] == [2, 1] and "dilation=[2, 1]" in repr(layer)
    assert rnnfast.GRU(**config).dilation == [2, 1]


# ---- gradients by finite differences -------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("ring_h0", [False, True], ids=["plain-h0", "ring-h0"])
def test_gradients_by_finite_differences(cell, ring_h0, rng):
    layer = _layer(cell, [1, 2], bidirectional=True)
    x = rng.standard_normal((T, B, D))
    S, dirs = layer.cell.state_width(layer), 2
    if ring_h0:
        h0 = _random_rings(layer, B, rng, directions=dirs)
    else:
        h0 = rng.standard_normal((2 * dirs, B, S))
    y = layer(x, _api(layer, h0), LENGTHS)[0]
    dy = rng.standard_normal(y.shape)
    dh_n = rng.standard_normal((2 * dirs, B, S))
    dx, dh0 = layer.backward(dy, _api(layer, dh_n))
    dh0 = _joined(layer, dh0)
    assert isinstance(dh0, list) == ring_h0

    def loss():
        y, h_n = layer(x, _api(layer, h0), LENGTHS)
        return float(np.sum(y * dy) + np.sum(_joined(layer, h_n) * dh_n))

    layer.eval()
    np.testing.assert_allclose(dx, numerical_gradient(loss, x), **FD)
    for got, state in zip(dh0, h0) if ring_h0 else [(dh0, h0)]:
        np.testing.assert_allclose(got, numerical_gradient(loss, state), **FD)
    for key in ("weight_ih_l0", "weight_hh_l1_reverse", "bias_hh_l1", "weight_hr_l1"):
        if key in layer._params:
            numeric = numerical_gradient(loss, layer._params[key])
            np.testing.assert_allclose(layer.grads[key], numeric, err_msg=key, **FD)


# ---- rings: stateful layers and step() -----------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("dilation", [3, [1, 2]], ids=str)
def test_stateful_calls_carry_rings(cell, dilation, rng):
    layer = _layer(cell, dilation, residual=isinstance(dilation, list)).eval()
    x = rng.standard_normal((T, B, D))
    rings = _random_rings(layer, B, rng)
    y, h_n = layer(x, _api(layer, rings))
    layer.stateful = True
    first, _ = layer(x[:3], _api(layer, rings))
    state = layer.state  # the ring form, in the API's form
    assert [r.shape[0] for r in _joined(layer, state)] == _dilations(layer)
    second, h_last = layer(x[3:])
    np.testing.assert_allclose(np.concatenate([first, second]), y, **TIGHT)
    np.testing.assert_allclose(_joined(layer, h_last), _joined(layer, h_n), **TIGHT)
    # the carried state given back as h0 continues the same way
    layer.reset_state()
    again, _ = layer(x[3:], state)
    np.testing.assert_allclose(again, second, **TIGHT)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("dilation", [2, [2, 3]], ids=str)
def test_step_streams_the_forward(cell, dilation, rng):
    layer = _layer(cell, dilation, residual=isinstance(dilation, list)).eval()
    x = rng.standard_normal((T, B, D))
    rings = _random_rings(layer, B, rng)
    y, h_n = layer(x, _api(layer, rings))
    state = _api(layer, rings)
    for t in range(T):
        out, state = layer.step(x[t], state)
        np.testing.assert_allclose(out, y[t], **TIGHT)
    last = [ring[-1] for ring in _joined(layer, state)]  # the newest state of each ring
    np.testing.assert_allclose(np.array(last), _joined(layer, h_n), **TIGHT)
    # from zeros, and from a plain state every chain starts from, as a forward's h0
    S = layer.cell.state_width(layer)
    h0 = rng.standard_normal((layer.num_layers, B, S))
    for given in (None, _api(layer, h0)):
        y, _ = layer(x, given)
        state = given
        for t in range(T):
            out, state = layer.step(x[t], state)
            np.testing.assert_allclose(out, y[t], **TIGHT)
    # unbatched: rings (d, S) in the API form, one sequence
    y, _ = layer(x[:, 1], _api(layer, [r[:, 1] for r in rings]))
    state = _api(layer, [r[:, 1] for r in rings])
    for t in range(T):
        out, state = layer.step(x[t, 1], state)
        np.testing.assert_allclose(out, y[t], **TIGHT)
    assert [r.shape for r in _joined(layer, state)] == [(d, S) for d in _dilations(layer)]


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_stateful_step_continues_a_call(cell, rng):
    layer = _layer(cell, [2, 3], stateful=True).eval()
    x = rng.standard_normal((T, B, D))
    layer(x[:4])
    outs = [layer.step(x[t])[0] for t in range(4, T)]
    layer.reset_state()
    y, _ = layer(x)
    np.testing.assert_allclose(np.array(outs), y[4:], **TIGHT)
    with pytest.raises(ValueError, match="a stateful layer carries a state for a batch of 4"):
        layer.step(x[0, :2])


# ---- dropout: one mask per gate and sequence, every chain reading it ---------------------------


def _drawn_masks(layer, rng, batch):
    """The masks a training forward draws (nn.recurrent.stack's order: per (layer, direction) the input
    masks, then the recurrent ones), from a copy of the layer's generator, for the batch in
    processing order (sorted by length)."""
    G, R = layer.cell.num_gates, layer.cell.output_width(layer)
    masks = []
    for k in range(layer.num_layers):
        width = D if k == 0 else R * layer.num_directions
        for _ in range(layer.num_directions):
            m_in = dropout_mask(rng, (G, batch, width), layer.input_dropout, F64)
            m_rec = dropout_mask(rng, (G, batch, R), layer.recurrent_dropout, F64)
            masks.append(dict(input_mask=m_in, recurrent_mask=m_rec))
    return masks


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_dropout_masks_are_per_sequence(cell, rng):
    layer = _layer(cell, [2, 3], bidirectional=True, input_dropout=0.3, recurrent_dropout=0.4)
    x = rng.standard_normal((T, B, D))
    lengths = np.sort(LENGTHS)[::-1].copy()  # sorted: processing order is the caller's
    masks = _drawn_masks(layer, copy.deepcopy(layer._dropout_rng), B)
    y, h_n = layer(x, lengths=lengths)
    y_ref, h_ref = by_hand(layer, x, lengths, masks=masks)
    np.testing.assert_allclose(y, y_ref, **TIGHT)
    np.testing.assert_allclose(_joined(layer, h_n), h_ref, **TIGHT)
    assert not np.allclose(y, layer.eval()(x, lengths=lengths)[0])  # the masks ran


@pytest.mark.parametrize("cell", CELLS[:2], ids=CELL_IDS[:2])
def test_dropout_gradients(cell, rng):
    # a fresh layer of the same seed redraws the same masks: finite differences see one
    # function of the inputs and parameters (as test_gated_layers.py's undilated test)
    x = rng.standard_normal((T, B, D))
    dy = rng.standard_normal((T, B, H))

    def fresh(params=None):
        layer = _layer(cell, [2, 3], input_dropout=0.3, recurrent_dropout=0.4)
        if params is not None:
            layer.load_state_dict(params)
        return layer

    layer = fresh()
    params = {k: v.copy() for k, v in layer.state_dict().items()}
    layer(x, lengths=LENGTHS)
    dx, _ = layer.backward(dy)

    def loss():
        return float(np.sum(fresh(params)(x, lengths=LENGTHS)[0] * dy))

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), **FD)
    for key in ("weight_ih_l0", "weight_hh_l1", "bias_ih_l1"):
        numeric = numerical_gradient(loss, params[key])
        np.testing.assert_allclose(layer.grads[key], numeric, err_msg=key, **FD)


# ---- bad rings -------------------------------------------------------------------------------------


def test_bad_rings_are_refused(rng):
    x = rng.standard_normal((T, B, D))
    gru = _layer(CELLS[0], [1, 2])
    with pytest.raises(ValueError, match=r"h0: a dilated layer's state is one ring \(d, B, H\)"):
        gru(x, [np.zeros((1, B, H))])
    with pytest.raises(ValueError, match=r"h0\[1\]: expected the ring \(d, B, H\) = \(2, 4, 4\)"):
        gru(x, [np.zeros((1, B, H)), np.zeros((3, B, H))])
    with pytest.raises(ValueError, match=r"state\[1\]: expected the ring \(d, H\) with unbatched"):
        gru.step(x[0, 0], [np.zeros((1, H)), np.zeros((2, B, H))])

    lstm = _layer(CELLS[2], [1, 2])  # R = P = 2, H = 4
    good_h = [np.zeros((1, B, P)), np.zeros((2, B, P))]
    good_c = [np.zeros((1, B, H)), np.zeros((2, B, H))]
    with pytest.raises(ValueError, match=r"h0\[1\]\[1\]: expected the ring \(d, B, H\)"):
        lstm(x, (good_h, [good_c[0], np.zeros((2, B, P))]))
    with pytest.raises(
        ValueError, match=r"h0\[0\]: a dilated layer's state is one ring \(d, B, R\)"
    ):
        lstm(x, (good_h[:1], good_c))
    with pytest.raises(TypeError, match=r"h0\[1\]: with h0\[0\] a list of rings, expected c's"):
        lstm(x, (good_h, np.zeros((2, B, H))))
    with pytest.raises(TypeError, match=r"h0: expected the pair \(h, c\)"):
        lstm(x, [np.zeros((1, B, P + H)), np.zeros((2, B, P + H))][:1])
    with pytest.raises(TypeError, match="float64"):
        lstm(x, (good_h, [c.astype(np.float32) for c in good_c]))
    # None for zeros beside a list of rings
    y, _ = lstm(x, (good_h, None))
    np.testing.assert_array_equal(y, lstm(x)[0])


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_to_torch_refuses_dilation(torch, name):
    layer = getattr(rnnfast, name)(3, 4, dilation=2)
    with pytest.raises(ValueError, match="dilation=2"):
        layer.to_torch()
