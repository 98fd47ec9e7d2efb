"""Composition in the RNN layer: finite-difference gradients of stacks (residual, dropout,
bidirectional, variable lengths, leaky units), merge modes, go_backwards, Keras return forms,
stateful carry, step(), parameters and config, the sequence helpers, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, assert_close

import rnnfast

T, B, D, H = 5, 3, 4, 3
F64 = np.float64


def _split(result, layer):
    """(output, h_n or None) from whatever form a call returned."""
    if layer.return_sequences is None and layer.return_state is None:
        return result
    return result if layer.return_state else (result, None)


def _loss(layer, x, h0, R, S, kw, reset=None):
    if reset is not None:
        reset()
    out, h_n = _split(layer(x, h0, **kw), layer)
    loss = float(np.sum(out * R))
    if h_n is not None:
        loss += float(np.sum(h_n * S))
    return loss


def _fd_check(layer, x, h0=None, rng=None, reset=None, samples=4, **kw):
    """Analytic gradients of ``sum(out * R) + sum(h_n * S)`` against central differences at a
    few random entries of x, h0 and every parameter (float64)."""
    if reset is not None:
        reset()
    out, h_n = _split(layer(x, h0, **kw), layer)
    R = rng.standard_normal(out.shape)
    S = None if h_n is None else rng.standard_normal(h_n.shape)
    layer.zero_grad()
    dx, dh0 = layer.backward(R, S)
    targets = [("x", x, dx)]
    if h0 is not None:
        targets.append(("h0", h0, dh0))
    targets += [(k, p, layer.grads[k]) for k, p in layer.named_parameters()]
    eps = 1e-6
    for name, arr, grad in targets:
        assert grad.shape == arr.shape, name
        for i in rng.choice(arr.size, size=min(samples, arr.size), replace=False):
            idx = np.unravel_index(i, arr.shape)
            with rnnfast.writable_parameters(arr):  # a layer's parameter is read-only
                keep = arr[idx]
                arr[idx] = keep + eps
                up = _loss(layer, x, h0, R, S, kw, reset)
                arr[idx] = keep - eps
                down = _loss(layer, x, h0, R, S, kw, reset)
                arr[idx] = keep
            numeric = (up - down) / (2 * eps)
            assert abs(grad[idx] - numeric) <= 1e-6 + 1e-5 * abs(numeric), (
                f"{name}{idx}: analytic {grad[idx]}, numeric {numeric}"
            )


def _zero_length_batch(rng):
    return np.array([T, 0, 2])


# ---- finite differences --------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_fd_residual_stack(rng, nonlinearity, bidirectional):
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=3,
        residual=True,
        nonlinearity=nonlinearity,
        bidirectional=bidirectional,
        dtype=F64,
        seed=1,
    )
    dirs = layer.num_directions
    _fd_check(layer, rng.standard_normal((T, B, D)), rng.uniform(-1, 1, (3 * dirs, B, H)), rng)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_fd_variable_lengths_with_an_empty_sequence(rng, bidirectional):
    layer = rnnfast.RNN(
        D, H, num_layers=2, bidirectional=bidirectional, dtype=F64, seed=2, batch_first=True
    )
    dirs = layer.num_directions
    _fd_check(
        layer,
        rng.standard_normal((B, T, D)),
        rng.uniform(-1, 1, (2 * dirs, B, H)),
        rng,
        lengths=_zero_length_batch(rng),
    )


def test_fd_dropout_masks(rng):
    layer = rnnfast.RNN(
        D, H, num_layers=3, dropout=0.4, residual=True, bidirectional=True, dtype=F64, seed=3
    )

    def reset():  # the same masks for every evaluation
        layer._dropout_rng = np.random.default_rng(11)

    _fd_check(
        layer, rng.standard_normal((T, B, D)), None, rng, reset=reset, lengths=np.array([4, 5, 1])
    )


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_fd_leaky_units(rng, bidirectional):
    layer = rnnfast.RNN(
        D, H, num_layers=2, alpha=[0.5, 0.25], bidirectional=bidirectional, dtype=F64, seed=4
    )
    dirs = layer.num_directions
    _fd_check(
        layer,
        rng.standard_normal((T, B, D)),
        rng.uniform(-1, 1, (2 * dirs, B, H)),
        rng,
        lengths=np.array([5, 3, 0]),
    )


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave"])
@pytest.mark.parametrize("return_sequences", [None, True, False])
def test_fd_merge_modes_and_keras_outputs(rng, merge_mode, return_sequences):
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        bidirectional=True,
        merge_mode=merge_mode,
        return_sequences=return_sequences,
        return_state=None if return_sequences is None else True,
        dtype=F64,
        seed=5,
    )
    _fd_check(
        layer,
        rng.standard_normal((T, B, D)),
        rng.uniform(-1, 1, (4, B, H)),
        rng,
        lengths=np.array([2, 5, 0]),
    )


@pytest.mark.parametrize("return_sequences", [True, False])
@pytest.mark.parametrize("use_lengths", [False, True], ids=["full", "lengths"])
def test_fd_go_backwards(rng, return_sequences, use_lengths):
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        residual=True,
        go_backwards=True,
        batch_first=True,
        return_sequences=return_sequences,
        return_state=True,
        dtype=F64,
        seed=6,
    )
    kw = {"mask": np.arange(T)[None, :] < np.array([[3], [5], [1]])} if use_lengths else {}
    _fd_check(layer, rng.standard_normal((B, T, D)), None, rng, **kw)


# ---- merge modes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("merge_mode", ["sum", "mul", "ave"])
def test_merge_modes_combine_the_directions(rng, merge_mode):
    concat = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, dtype=F64, seed=7)
    merged = rnnfast.RNN(
        D, H, num_layers=2, bidirectional=True, merge_mode=merge_mode, dtype=F64, seed=7
    )
    assert merged.output_size == H and concat.output_size == 2 * H
    x = rng.standard_normal((T, B, D))
    y, h_n = concat(x)
    ym, hm = merged(x)
    f, r = y[..., :H], y[..., H:]
    expected = {"sum": f + r, "mul": f * r, "ave": (f + r) / 2}[merge_mode]
    assert_close(ym, expected, F64, merge_mode)
    assert np.array_equal(hm, h_n)


def test_merge_mode_needs_bidirectional():
    with pytest.raises(ValueError, match="merge_mode"):
        rnnfast.RNN(D, H, merge_mode="sum")
    with pytest.raises(ValueError, match="merge_mode"):
        rnnfast.RNN(D, H, bidirectional=True, merge_mode="max")


# ---- variable lengths: each sequence as if alone --------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_padded_batch_equals_each_sequence_alone(rng, bidirectional):
    layer = rnnfast.RNN(
        D, H, num_layers=2, bidirectional=bidirectional, residual=True, dtype=F64, seed=8
    )
    lengths = np.array([5, 0, 2])
    seqs = [rng.standard_normal((n, D)) for n in lengths]
    x, got_lengths = rnnfast.pad_sequences(seqs, padding_value=7.0)  # padding is ignored
    assert np.array_equal(got_lengths, lengths)
    y, h_n = layer(x, lengths=lengths)
    dirs = layer.num_directions
    for b, s in enumerate(seqs):
        if len(s) == 0:
            assert not y[:, b].any() and not h_n[:, b].any()
            continue
        yb, hb = layer(s[:, None])
        assert_close(y[: len(s), b], yb[:, 0], F64, f"y of sequence {b}")
        assert not y[len(s) :, b].any()
        assert_close(h_n[:, b], hb[:, 0], F64, f"h_n of sequence {b}")
    assert h_n.shape == (2 * dirs, B, H)


def test_mask_is_lengths(rng):
    layer = rnnfast.RNN(D, H, bidirectional=True, dtype=F64, seed=9)
    x = rng.standard_normal((T, B, D))
    lengths = np.array([3, 5, 0])
    mask = rnnfast.lengths_to_mask(lengths, T)
    y1, h1 = layer(x, lengths=lengths)
    dx1, _ = layer.backward(np.ones_like(y1))
    y2, h2 = layer(x, mask=mask.astype(np.int8))
    dx2, _ = layer.backward(np.ones_like(y2))
    assert np.array_equal(y1, y2) and np.array_equal(h1, h2) and np.array_equal(dx1, dx2)
    assert not dx1[3:, 0].any() and not dx1[:, 2].any()


# ---- go_backwards --------------------------------------------------------------------------------


def test_go_backwards_without_lengths_is_the_reversed_input(rng):
    plain = rnnfast.RNN(D, H, num_layers=2, dtype=F64, seed=10)
    back = rnnfast.RNN(D, H, num_layers=2, dtype=F64, seed=10, go_backwards=True)
    x = rng.standard_normal((T, B, D))
    y, h_n = plain(x[::-1])
    yb, hb = back(x)
    assert np.array_equal(yb, y) and np.array_equal(hb, h_n)  # outputs in processing order


def test_go_backwards_with_lengths_follows_keras(rng):
    """Keras carries the state through the masked (padded) steps, which come first once the
    padded sequence is reversed: their outputs are zeros, then each sequence's own steps
    reversed; the last output is the state after its first step."""
    plain = rnnfast.RNN(D, H, dtype=F64, seed=11)
    back = rnnfast.RNN(
        D, H, dtype=F64, seed=11, go_backwards=True, return_sequences=True, return_state=True
    )
    last = rnnfast.RNN(D, H, dtype=F64, seed=11, go_backwards=True, return_sequences=False)
    lengths = np.array([2, 5, 0])
    x = rng.standard_normal((T, B, D))
    y, h_n = back(x, lengths=lengths)
    y_last = last(x, lengths=lengths)
    for b, n in enumerate(lengths):
        assert not y[: T - n, b].any()
        if n == 0:
            assert not h_n[:, b].any() and not y_last[b].any()
            continue
        yb, hb = plain(x[:n, b : b + 1][::-1])
        assert_close(y[T - n :, b], yb[:, 0], F64, f"y of sequence {b}")
        assert_close(h_n[:, b], hb[:, 0], F64, f"h_n of sequence {b}")
        assert_close(y_last[b], hb[0, 0], F64, f"last output of sequence {b}")


# ---- Keras return forms --------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
def test_return_forms(rng, bidirectional, batch_first):
    kw = dict(
        num_layers=2, bidirectional=bidirectional, batch_first=batch_first, dtype=F64, seed=12
    )
    torch_like = rnnfast.RNN(D, H, **kw)
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D))
    lengths = np.array([5, 2, 0])
    y, h_n = torch_like(x, lengths=lengths)
    out = 2 * H if bidirectional else H
    assert y.shape == ((B, T, out) if batch_first else (T, B, out))
    assert h_n.shape == (2 * (2 if bidirectional else 1), B, H)

    seq = rnnfast.RNN(D, H, return_sequences=True, **kw)(x, lengths=lengths)
    assert isinstance(seq, np.ndarray) and np.array_equal(seq, y)

    last, state = rnnfast.RNN(D, H, return_state=True, **kw)(x, lengths=lengths)
    assert last.shape == (B, out) and np.array_equal(state, h_n)
    y_tb = y.swapaxes(0, 1) if batch_first else y
    for b, n in enumerate(lengths):
        if n == 0:
            assert not last[b].any()
            continue
        assert np.array_equal(last[b, :H], y_tb[n - 1, b, :H])  # forward: its own last step
        if bidirectional:
            assert np.array_equal(last[b, H:], y_tb[0, b, H:])  # reverse: ends at step 0
    assert np.array_equal(
        last[:, :H], h_n[-(2 if bidirectional else 1)][:, :H] * (lengths > 0)[:, None]
    )

    both = rnnfast.RNN(D, H, return_sequences=True, return_state=True, **kw)(x, lengths=lengths)
    assert np.array_equal(both[0], y) and np.array_equal(both[1], h_n)


def test_keras_last_output_gradient_is_routed_to_each_sequences_end(rng):
    full = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, dtype=F64, seed=13)
    last = rnnfast.RNN(
        D, H, num_layers=2, bidirectional=True, dtype=F64, seed=13, return_sequences=False
    )
    x = rng.standard_normal((T, B, D))
    lengths = np.array([3, 5, 1])
    d_last = rng.standard_normal((B, 2 * H))
    last(x, lengths=lengths)
    dx, dh0 = last.backward(d_last)
    full(x, lengths=lengths)
    dy = np.zeros((T, B, 2 * H))
    dy[lengths - 1, np.arange(B), :H] = d_last[:, :H]
    dy[0, :, H:] = d_last[:, H:]
    dx2, dh02 = full.backward(dy)
    assert_close(dx, dx2, F64, "dx")
    assert_close(dh0, dh02, F64, "dh0")
    for k in full.grads:
        assert_close(last.grads[k], full.grads[k], F64, k)


def test_return_flags_must_be_bool_or_none():
    with pytest.raises(TypeError, match="return_sequences"):
        rnnfast.RNN(D, H, return_sequences="yes")


# ---- stateful and step ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_stateful_carries_state_until_reset(rng, dtype):
    kw = dict(num_layers=2, residual=True, dtype=dtype, seed=14)
    whole = rnnfast.RNN(D, H, **kw).eval()
    stream = rnnfast.RNN(D, H, stateful=True, **kw).eval()
    x = rng.standard_normal((T, B, D)).astype(dtype)
    y, h_n = whole(x)
    y1, _ = stream(x[:2])
    y2, h2 = stream(x[2:])
    assert_close(np.concatenate([y1, y2]), y, dtype, "y in two calls")
    assert_close(h2, h_n, dtype, "h_n in two calls")
    assert_close(stream.state, h_n, dtype, "carried state")
    # An explicit h0 wins over the carried state.
    y3, _ = stream(x[:2], np.zeros_like(h_n))
    assert_close(y3, y1, dtype, "explicit h0")
    stream.reset_state()
    assert stream.state is None
    assert np.array_equal(stream(x[:2])[0], y1)
    with pytest.raises(ValueError, match="stateful"):
        stream(x[:, :2])  # a different batch size than the carried state's
    # step() continues the same stream.
    stream.reset_state()
    outs = [stream.step(x[t])[0] for t in range(T)]
    assert_close(np.stack(outs), y, dtype, "y from steps")
    assert_close(stream.state, h_n, dtype, "state after steps")


@pytest.mark.parametrize("alpha", [1.0, 0.5], ids=["elman", "leaky"])
@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_step_equals_a_forward_over_one_step(rng, dtype, nonlinearity, num_layers, alpha):
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        alpha=alpha,
        residual=num_layers > 1,
        dtype=dtype,
        seed=15,
    )
    x_t = rng.standard_normal((B, D)).astype(dtype)
    h = rng.uniform(-1, 1, (num_layers, B, H)).astype(dtype)
    for state in (h, None):
        y, h_n = layer(x_t[None], state)
        out, h_next = layer.step(x_t, state)
        assert out.shape == (B, H) and h_next.shape == (num_layers, B, H)
        assert out.dtype == np.dtype(dtype) and h_next.dtype == np.dtype(dtype)
        assert_close(out, y[0], dtype, "out_t")
        assert_close(h_next, h_n, dtype, "h_next")
    # Strided and list input are accepted; a wrong width or dtype is not.
    assert_close(layer.step(np.asfortranarray(x_t), h)[0], layer.step(x_t, h)[0], dtype, "F order")
    with pytest.raises(ValueError, match="x_t"):
        layer.step(np.zeros((B, D + 1), dtype))
    with pytest.raises(ValueError, match="h"):
        layer.step(x_t, h[:, :1])
    other = np.float32 if dtype == np.float64 else np.float64
    with pytest.raises(TypeError, match="x_t"):
        layer.step(x_t.astype(other))


def test_step_refuses_bidirectional():
    with pytest.raises(ValueError, match="bidirectional"):
        rnnfast.RNN(D, H, bidirectional=True).step(np.zeros((1, D), np.float32))


# ---- dropout -------------------------------------------------------------------------------------


def test_dropout_only_in_training_and_reproducible(rng):
    x = rng.standard_normal((T, B, D))
    a = rnnfast.RNN(D, H, num_layers=3, dropout=0.5, dtype=F64, seed=16)
    b = rnnfast.RNN(D, H, num_layers=3, dropout=0.5, dtype=F64, seed=16)
    none = rnnfast.RNN(D, H, num_layers=3, dtype=F64, seed=16)
    ya, yb, y0 = a(x)[0], b(x)[0], none(x)[0]
    assert np.array_equal(ya, yb)  # same seed, same masks
    assert not np.allclose(ya, y0)
    assert not np.array_equal(a(x)[0], ya)  # a fresh mask per training call
    assert np.array_equal(a.eval()(x)[0], y0)  # no dropout in eval mode
    with pytest.warns(UserWarning, match="num_layers"):  # torch warns too
        one = rnnfast.RNN(D, H, dropout=0.5, dtype=F64, seed=16)  # nothing to drop between
    assert np.array_equal(one(x)[0], rnnfast.RNN(D, H, dtype=F64, seed=16)(x)[0])


# ---- leaky units ---------------------------------------------------------------------------------


def test_leaky_alpha_per_layer_matches_the_reference(rng):
    layer = rnnfast.RNN(D, H, num_layers=2, alpha=[0.3, 0.9], dtype=F64, seed=17)
    x = rng.standard_normal((T, B, D))
    y, h_n = layer(x)
    p = layer.state_dict()
    y0, h0 = rnnfast.reference.rnn_forward(
        x, p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"], alpha=0.3
    )
    y1, h1 = rnnfast.reference.rnn_forward(
        y0, p["weight_ih_l1"], p["weight_hh_l1"], p["bias_ih_l1"], p["bias_hh_l1"], alpha=0.9
    )
    assert_close(y, y1, F64, "y")
    assert_close(h_n, np.stack([h0, h1]), F64, "h_n")


@pytest.mark.parametrize("alpha", [0.0, 1.5, [0.5], "0.5"])
def test_bad_alpha(alpha):
    with pytest.raises((ValueError, TypeError), match="alpha"):
        rnnfast.RNN(D, H, num_layers=2, alpha=alpha)


# ---- parameters and config -----------------------------------------------------------------------


def test_state_dict_keys_and_shapes_match_torch(torch):
    for kw in [dict(num_layers=3, bidirectional=True), dict(num_layers=2, bias=False)]:
        module = torch.nn.RNN(D, H, **kw)
        layer = rnnfast.RNN(D, H, **kw)
        ours = layer.state_dict()
        theirs = module.state_dict()
        assert list(ours) == list(theirs)
        assert [v.shape for v in ours.values()] == [tuple(v.shape) for v in theirs.values()]
        assert list(layer.grads) == list(ours) == [k for k, _ in layer.named_parameters()]
        assert layer.num_parameters() == sum(v.numel() for v in theirs.values())
        bound = 1 / np.sqrt(H)
        assert all(np.abs(v).max() <= bound for v in ours.values())


def test_load_state_dict_validates_every_key_first():
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, seed=18)
    before = layer.state_dict()
    new = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, seed=19).state_dict()
    bad = dict(new, weight_ih_l1_reverse=np.zeros((H, H), np.float32))  # should be (H, 2H)
    with pytest.raises(ValueError, match=r"weight_ih_l1_reverse.*\(3, 6\).*\(3, 3\)"):
        layer.load_state_dict(bad)
    for k, v in layer.state_dict().items():
        assert np.array_equal(v, before[k]), k
    with pytest.raises(ValueError, match="missing.*bias_hh_l1_reverse"):
        layer.load_state_dict({k: v for k, v in new.items() if k != "bias_hh_l1_reverse"})
    layer.load_state_dict(new)
    for k, v in layer.state_dict().items():
        assert np.array_equal(v, new[k]), k


def test_get_config_rebuilds_the_architecture(rng):
    import json

    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        nonlinearity="relu",
        bias=False,
        batch_first=True,
        dropout=0.25,
        bidirectional=True,
        dtype=F64,
        seed=20,
        residual=True,
        merge_mode="ave",
        go_backwards=True,
        return_sequences=False,
        return_state=True,
        stateful=True,
        alpha=[1.0, 0.5],
    )
    config = json.loads(json.dumps(layer.get_config()))
    clone = rnnfast.RNN(**config)
    assert clone.get_config() == layer.get_config()
    assert repr(clone) == repr(layer)
    assert list(clone.state_dict()) == list(layer.state_dict())
    for k, v in clone.state_dict().items():
        assert np.array_equal(v, layer.state_dict()[k]), k  # the same seed: the same init


def test_summary_of_a_stack(capsys):
    text = rnnfast.RNN(D, H, num_layers=2, bidirectional=True).summary()
    assert text in capsys.readouterr().out
    count = rnnfast.RNN(D, H, num_layers=2, bidirectional=True).num_parameters()
    assert f"{count:,}" in text


def test_zero_grad_and_accumulation_cover_every_layer(rng):
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, dtype=F64, seed=21)
    x = rng.standard_normal((T, B, D))
    y, _ = layer(x)
    layer.backward(np.ones_like(y))
    first = {k: g.copy() for k, g in layer.grads.items()}
    assert all(g.any() for g in first.values())
    y, _ = layer(x)
    layer.backward(np.ones_like(y))
    for k, g in layer.grads.items():
        assert_close(g, 2 * first[k], F64, k)
    layer.zero_grad()
    assert not any(g.any() for g in layer.grads.values())


def test_training_output_is_read_only_and_backward_needs_a_forward(rng):
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, merge_mode="mul", dtype=F64)
    y, _ = layer(rng.standard_normal((T, B, D)))
    with pytest.raises(ValueError, match="read-only"):
        y[...] = 0
    layer.backward(np.ones_like(y))
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(np.ones_like(y))


# ---- sequences helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_and_unpad_roundtrip(rng, batch_first):
    seqs = [rng.standard_normal((n, 2, 3)) for n in (4, 0, 1)]
    padded, lengths = rnnfast.pad_sequences(seqs, batch_first=batch_first, padding_value=-1.0)
    assert padded.shape == ((3, 4, 2, 3) if batch_first else (4, 3, 2, 3))
    assert lengths.tolist() == [4, 0, 1] and lengths.dtype == np.int64
    tm = padded.swapaxes(0, 1) if batch_first else padded
    assert np.all(tm[1:, 2] == -1.0) and np.all(tm[:, 1] == -1.0)
    back = rnnfast.unpad_sequences(padded, lengths, batch_first=batch_first)
    assert len(back) == 3
    for a, b in zip(back, seqs):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="sequences"):
        rnnfast.pad_sequences([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError, match="sequences"):
        rnnfast.pad_sequences([])


def test_masks_and_lengths(rng):
    lengths = np.array([0, 3, 5])
    mask = rnnfast.lengths_to_mask(lengths, 5)
    assert mask.dtype == bool and mask.shape == (3, 5)
    assert mask.sum(1).tolist() == [0, 3, 5]
    assert np.array_equal(rnnfast.mask_to_lengths(mask), lengths)
    with pytest.raises(ValueError, match="mask.*row 1"):
        rnnfast.mask_to_lengths([[1, 1, 0], [1, 0, 1]])
    with pytest.raises(TypeError, match="mask"):
        rnnfast.mask_to_lengths(np.ones((2, 3)))
    with pytest.raises(ValueError, match="lengths"):
        rnnfast.lengths_to_mask([1, 6], 5)


def test_reverse_sequences_within_lengths(rng):
    x = np.arange(4 * 3).reshape(4, 3, 1).astype(float)
    r = rnnfast.reverse_sequences(x, [4, 2, 0])
    assert r[:, 0, 0].tolist() == x[::-1, 0, 0].tolist()
    assert r[:, 1, 0].tolist() == [x[1, 1, 0], x[0, 1, 0], x[2, 1, 0], x[3, 1, 0]]
    assert r[:, 2, 0].tolist() == x[:, 2, 0].tolist()
    assert np.array_equal(rnnfast.reverse_sequences(r, [4, 2, 0]), x)  # an involution


# ---- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths, error",
    [
        ([1, 2, T + 1], ValueError),
        ([1, -1, 2], ValueError),
        ([1, 2], ValueError),
        ([[1, 2, 3]], ValueError),
        ([1.0, 2.0, 3.0], TypeError),
        (["1", "2", "3"], TypeError),
    ],
    ids=["too-long", "negative", "wrong-size", "2d", "float", "str"],
)
def test_bad_lengths(rng, lengths, error):
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, dtype=F64)
    x = rng.standard_normal((T, B, D))
    layer(x)
    before = {k: g.copy() for k, g in layer.grads.items()}
    with pytest.raises(error, match="lengths"):
        layer(x, lengths=np.array(lengths))
    y, _ = layer.backward(np.ones((T, B, 2 * H)))  # the previous forward survived
    for k, g in before.items():
        assert not g.any(), k


def test_bad_mask(rng):
    layer = rnnfast.RNN(D, H, dtype=F64)
    x = rng.standard_normal((T, B, D))
    # (a mask that is not a prefix, [1, 1, 0, 1, 1], is Keras's general mask: tests/nn/test_rnn_masks.py)
    with pytest.raises(
        ValueError, match=r"mask: expected values 0 or 1 \(or bools\), got 2 \(int64\)"
    ):
        layer(x, mask=np.full((B, T), 2))
    with pytest.raises(
        TypeError, match=r"mask: expected a bool \(or 0/1 integer\) array, got dtype float32"
    ):
        layer(x, mask=np.ones((B, T), np.float32))
    with pytest.raises(ValueError, match="mask"):
        layer(x, mask=np.ones((T, B), bool) if T != B else np.ones((B, T + 1), bool))
    with pytest.raises(ValueError, match="lengths, mask"):
        layer(x, lengths=[1, 2, 3], mask=np.ones((B, T), bool))


def test_residual_needs_a_stack():
    # Layers k > 0 read (and output) layers*dirs widths, so their widths always match; the
    # only configuration without a layer to skip over is a single layer.
    with pytest.raises(ValueError, match="residual"):
        rnnfast.RNN(D, H, residual=True)
    rnnfast.RNN(D, H, num_layers=2, residual=True, bidirectional=True)


def test_bad_state_shapes(rng):
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, dtype=F64)
    x = rng.standard_normal((T, B, D))
    with pytest.raises(ValueError, match=r"h0.*\(4, 3, 3\)"):
        layer(x, np.zeros((2, B, H)))
    y, _ = layer(x)
    with pytest.raises(ValueError, match="dh_n"):
        layer.backward(np.ones_like(y), np.zeros((2, B, H)))
    with pytest.raises(ValueError, match="dy"):
        layer.backward(np.ones((T, B, H)))
    layer.backward(np.ones_like(y), np.zeros((4, B, H)))


@pytest.mark.parametrize(
    "options",
    [{}, {"bidirectional": True}, {"go_backwards": True}],
    ids=["plain", "bidirectional", "go_backwards"],
)
def test_last_output_of_empty_sequences_is_zeros(options):
    """Found by fuzzing: T = 0 (or every length 0) with return_sequences=False."""
    layer = rnnfast.RNN(3, 4, return_sequences=False, **options)
    out = layer(np.zeros((0, 2, 3), np.float32))
    assert out.shape == (2, layer.output_size) and not out.any()
    dx, dh0 = layer.backward(np.ones_like(out))
    assert dx.shape == (0, 2, 3) and not dh0.any()
    out = layer(np.ones((3, 2, 3), np.float32), lengths=np.array([0, 0]))
    assert out.shape == (2, layer.output_size) and not out.any()


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_fd_last_output_and_state_together(rng, bidirectional, residual):
    """Keras's last output is the top layer's h_n: its gradient enters the kernels through
    dh_n (without residual connections), beside the caller's own dh_n, and must count once."""
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        bidirectional=bidirectional,
        residual=residual,
        return_sequences=False,
        return_state=True,
        dtype=F64,
        seed=12,
    )
    dirs = layer.num_directions
    _fd_check(
        layer,
        rng.standard_normal((T, B, D)),
        rng.uniform(-1, 1, (2 * dirs, B, H)),
        rng,
        lengths=_zero_length_batch(rng),
    )


@pytest.mark.parametrize("return_sequences", [True, False])
def test_backward_of_the_state_alone_through_a_residual_stack(rng, return_sequences):
    """backward(None, dh_n): no gradient from the outputs, only from h_n."""
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=3,
        residual=True,
        return_sequences=return_sequences,
        return_state=True,
        dtype=F64,
        seed=13,
    )
    x = rng.standard_normal((T, B, D))
    S = rng.standard_normal((3, B, H))
    layer(x)
    dx, _ = layer.backward(None, S)
    eps, idx = 1e-6, (1, 2, 0)
    xp, xm = x.copy(), x.copy()
    xp[idx] += eps
    xm[idx] -= eps
    numeric = (np.sum(layer(xp)[1] * S) - np.sum(layer(xm)[1] * S)) / (2 * eps)
    assert dx[idx] == pytest.approx(numeric, rel=1e-6, abs=1e-9)
