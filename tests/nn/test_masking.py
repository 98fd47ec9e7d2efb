"""How padding travels through a model (rnnfast.nn.masking): a padded batch through Sequential or
Module gives what each of its sequences gives alone, forward and every gradient, whichever way
the padding is told (Embedding mask_zero / padding_idx, lengths=, mask=) and on both the fused
Embedding -> RNN path and the unfused one; padding that is not at the end is refused; the
silent trap (a last output or a reverse direction read past unannounced padding) warns
PaddingWarning; PyTorch's pack_padded_sequence pipeline and Keras's mask_zero are oracles.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import DTYPES, assert_close, assert_close_any_dtype, numerical_gradient

from rnnfast import RNN, Dense, Embedding, Module, Sequential, interop
from rnnfast.nn import PaddingWarning

F64 = np.float64
E, H, K = 4, 5, 3
LENGTHS = np.array([5, 2, 7, 1, 4, 7, 3])  # B = 7, T = 7: 49 tokens
T = int(LENGTHS.max())
V_FUSED = 6  # fewer table rows than the batch's tokens: Sequential fuses Embedding -> RNN
V_UNFUSED = 60  # more rows than tokens: the two layers run one after the other


def _valid_bt(lengths, steps):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


def _padded_ids(rng, lengths, vocab, *, pad=0, steps=None, avoid=(0,)):
    """(B, T) ids: real tokens in [0, vocab) other than ``avoid``, ``pad`` past each length."""
    steps = int(max(lengths)) if steps is None else steps
    real = np.array([i for i in range(vocab) if i not in avoid])
    ids = real[rng.integers(0, len(real), size=(len(lengths), steps))]
    ids[~_valid_bt(lengths, steps)] = pad
    return ids.astype(np.int64)


def _layout(a_bt, batch_first):
    """A (B, T, ...) array in the model's layout."""
    return a_bt if batch_first else np.ascontiguousarray(a_bt.swapaxes(0, 1))


def _tagger(
    vocab,
    dtype,
    *,
    batch_first,
    bidirectional,
    return_sequences,
    mask_zero=True,
    padding_idx=None,
    num_layers=1,
):
    out = H * (2 if bidirectional else 1)
    return Sequential(
        [
            Embedding(vocab, E, dtype=dtype, seed=1, mask_zero=mask_zero, padding_idx=padding_idx),
            RNN(
                E,
                H,
                num_layers=num_layers,
                batch_first=batch_first,
                bidirectional=bidirectional,
                return_sequences=return_sequences,
                dtype=dtype,
                seed=2,
            ),
            Dense(out, K, dtype=dtype, seed=3),
        ]
    )


def _loss_weights(rng, model_out_shape, dtype):
    return rng.standard_normal(model_out_shape).astype(dtype)


def _sequence_view(a, b, length, batch_first, per_step):
    """Sequence b's part of a batch output (its valid steps), as (L, ...) or (...)."""
    if not per_step:
        return a[b]
    return a[b, :length] if batch_first else a[:length, b]


def _one_sequence_input(x_bt, b, length, batch_first):
    seq = x_bt[b : b + 1, :length]
    return _layout(seq, batch_first)


def _check_batch_equals_sequences(
    model, x_bt, lengths, dtype, rng, *, batch_first, per_step, call=None, expect_fused=None
):
    """The padded batch's output at the valid positions and every parameter gradient (loss:
    the output times fixed weights, summed over the valid positions) equal those of the
    sequences run one at a time (the gradients summed)."""
    call = call or (lambda m, x: m(x))
    x = _layout(x_bt, batch_first)
    model.train()
    model.zero_grad()
    out = call(model, x)
    if expect_fused is not None:
        assert model._fused == expect_fused
    weights = _loss_weights(rng, out.shape, dtype)
    valid = _layout(_valid_bt(lengths, x_bt.shape[1]), batch_first)
    if per_step:
        np.testing.assert_array_equal(model.output_mask, valid)
        d_out = weights * valid[..., None]
    else:
        assert model.output_mask is None  # a last output ends the padding
        d_out = weights
    model.backward(d_out)
    batch_grads = {k: g.copy() for k, g in model.grads.items()}

    model.zero_grad()
    for b, length in enumerate(lengths):
        out_b = call(model, _one_sequence_input(x_bt, b, length, batch_first))
        expected = out_b[0] if (batch_first or not per_step) else out_b[:, 0]
        assert_close_any_dtype(
            _sequence_view(out, b, length, batch_first, per_step),
            expected,
            dtype,
            f"output of sequence {b}",
        )
        w_b = _sequence_view(weights, b, length, batch_first, per_step)
        model.backward(w_b[None] if (batch_first or not per_step) else w_b[:, None])
    for name, g in model.grads.items():
        assert np.any(batch_grads[name] != 0), f"d{name}: all zero"
        assert_close_any_dtype(batch_grads[name], g, dtype, f"d{name}")
    return out, weights


# ---- a padded batch equals its sequences run alone --------------------------------------------


@pytest.mark.parametrize("path", ["unfused", "fused"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_zero_batch_equals_each_sequence_alone(
    dtype, batch_first, bidirectional, return_sequences, path, rng
):
    vocab = V_FUSED if path == "fused" else V_UNFUSED
    model = _tagger(
        vocab,
        dtype,
        batch_first=batch_first,
        bidirectional=bidirectional,
        return_sequences=return_sequences,
    )
    ids = _padded_ids(rng, LENGTHS, vocab)
    assert ids.size > V_FUSED and ids.size < V_UNFUSED
    out, _ = _check_batch_equals_sequences(
        model,
        ids,
        LENGTHS,
        dtype,
        rng,
        batch_first=batch_first,
        per_step=return_sequences,
        expect_fused=frozenset({0}) if path == "fused" else frozenset(),
    )
    if return_sequences:
        # the RNN outputs zeros past each length, so the Dense gives its bias there
        invalid = ~_layout(_valid_bt(LENGTHS, T), batch_first)
        bias = model[2].state_dict()["bias"]
        assert_close_any_dtype(
            out[invalid], np.broadcast_to(bias, (int(invalid.sum()), K)), dtype, "padding"
        )
    # mask_zero: the padding id's row takes no gradient (no real step reads it)
    assert np.all(model.grads["0.weight"][0] == 0)


@pytest.mark.parametrize("path", ["unfused", "fused"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_mask_zero_gradients_match_finite_differences(return_sequences, path, rng):
    """Every gradient of a padded batch (mask_zero, bidirectional, two layers) by central
    differences of the loss over the valid positions, float64."""
    lengths = np.array([3, 1, 4, 2])
    vocab = 5 if path == "fused" else 40
    model = _tagger(
        vocab,
        F64,
        batch_first=True,
        bidirectional=True,
        return_sequences=return_sequences,
        num_layers=2,
    )
    ids = _padded_ids(rng, lengths, vocab)
    out = model(ids)
    assert model._fused == (frozenset({0}) if path == "fused" else frozenset())
    weights = rng.standard_normal(out.shape)
    valid = _valid_bt(lengths, ids.shape[1])
    d_out = weights * valid[..., None] if return_sequences else weights

    def loss():
        model.eval()
        try:
            return float(np.sum(model(ids) * d_out))
        finally:
            model.train()

    model.zero_grad()
    model(ids)
    model.backward(d_out)
    for name, p in model.named_parameters():
        numeric = numerical_gradient(loss, p)
        np.testing.assert_allclose(
            model.grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=f"d{name}"
        )


@pytest.mark.parametrize("path", ["unfused", "fused"])
@pytest.mark.parametrize("padding_idx", [0, -1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_padding_idx_marks_padding_and_its_row_stays_zero(dtype, padding_idx, path, rng):
    vocab = V_FUSED if path == "fused" else V_UNFUSED
    pad = padding_idx % vocab
    model = _tagger(
        vocab,
        dtype,
        batch_first=True,
        bidirectional=True,
        return_sequences=True,
        mask_zero=False,
        padding_idx=padding_idx,
    )
    table = model[0].weight
    assert model[0].padding_idx == pad
    assert np.all(table[pad] == 0), "padding_idx: the row starts at zero, as torch's"
    assert np.all(np.any(np.delete(table, pad, axis=0) != 0, axis=1))
    # id 0 is a real token unless it is the padding index
    ids = _padded_ids(rng, LENGTHS, vocab, pad=pad, avoid=(pad,))
    if pad != 0:
        ids[0, 1] = ids[2, 0] = ids[2, 6] = 0
    _check_batch_equals_sequences(
        model,
        ids,
        LENGTHS,
        dtype,
        rng,
        batch_first=True,
        per_step=True,
        expect_fused=frozenset({0}) if path == "fused" else frozenset(),
    )
    model.zero_grad()
    out = model(ids)
    model.backward(rng.standard_normal(out.shape).astype(dtype))  # padded steps included
    assert np.all(model.grads["0.weight"][pad] == 0)
    assert np.count_nonzero(np.any(model.grads["0.weight"] != 0, axis=1)) > 1


@pytest.mark.parametrize("padding_idx", [0, 2, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_padding_idx_gradient_as_torch(torch, dtype, padding_idx, rng):
    """The Embedding alone, the padding index anywhere (mid-sequence too): the same gradient as
    torch.nn.Embedding(padding_idx=), zero in the padding row."""
    vocab = 7
    layer = Embedding(vocab, E, dtype=dtype, seed=4, padding_idx=padding_idx)
    ref = torch.nn.Embedding(vocab, E, padding_idx=padding_idx, dtype=torch.float64)
    assert np.all(ref.weight.detach().numpy()[padding_idx] == 0)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(layer.weight.astype(F64)))
    ids = rng.integers(0, vocab, size=(6, 5))
    ids[1, 2] = ids[4, 0] = padding_idx % vocab
    d = rng.standard_normal(ids.shape + (E,)).astype(dtype)
    out = layer(ids)
    layer.backward(d)
    out_t = ref(torch.from_numpy(ids))
    out_t.backward(torch.from_numpy(d.astype(F64)))
    assert_close(out, out_t.detach().numpy().astype(dtype), dtype, "embedding")
    expected = ref.weight.grad.numpy()
    assert np.all(expected[padding_idx] == 0)
    assert_close_any_dtype(layer.grads["weight"], expected, dtype, "dweight")


# ---- lengths= and mask= given to the model -----------------------------------------------------


def _garbage_padded_floats(rng, lengths, dim, dtype):
    """(B, T, dim) floats, with large garbage (not zeros) past each length: only lengths can
    tell the model where each sequence ends."""
    x = rng.standard_normal((len(lengths), int(max(lengths)), dim))
    invalid = ~_valid_bt(lengths, x.shape[1])
    x[invalid] = 50.0 * rng.standard_normal((int(invalid.sum()), dim))
    return x.astype(dtype)


def _float_model(dtype, *, batch_first, bidirectional, return_sequences):
    return Sequential(
        [
            RNN(
                E,
                H,
                batch_first=batch_first,
                bidirectional=bidirectional,
                return_sequences=return_sequences,
                dtype=dtype,
                seed=5,
            ),
            Dense(H * (2 if bidirectional else 1), K, dtype=dtype, seed=6),
        ]
    )


@pytest.mark.parametrize("how", ["lengths", "mask"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sequential_takes_lengths_or_mask(dtype, batch_first, return_sequences, how, rng):
    model = _float_model(
        dtype, batch_first=batch_first, bidirectional=True, return_sequences=return_sequences
    )
    x_bt = _garbage_padded_floats(rng, LENGTHS, E, dtype)
    # the mask is Keras's (B, T) in either layout
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _valid_bt(LENGTHS, T)}

    def call(m, x):  # the padded batch with its lengths, each sequence alone without
        return m(x, **kw) if x.size == x_bt.size else m(x)

    _check_batch_equals_sequences(
        model,
        x_bt,
        LENGTHS,
        dtype,
        rng,
        batch_first=batch_first,
        per_step=return_sequences,
        call=call,
    )


@pytest.mark.parametrize("path", ["unfused", "fused"])
@pytest.mark.parametrize("how", ["lengths", "mask"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_sequential_lengths_override_what_the_ids_look_like(batch_first, how, path, rng):
    """An Embedding without mask_zero: real ids past each length (garbage padding), so only the
    given lengths say where the sequences end."""
    dtype = F64
    vocab = V_FUSED if path == "fused" else V_UNFUSED
    model = _tagger(
        vocab,
        dtype,
        batch_first=batch_first,
        bidirectional=True,
        return_sequences=True,
        mask_zero=False,
    )
    ids = _padded_ids(rng, LENGTHS, vocab, avoid=())
    ids[~_valid_bt(LENGTHS, T)] = rng.integers(1, vocab, size=int((~_valid_bt(LENGTHS, T)).sum()))
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _valid_bt(LENGTHS, T)}

    def call(m, x):
        return m(x, **kw) if x.size == ids.size else m(x)

    _check_batch_equals_sequences(
        model,
        ids,
        LENGTHS,
        dtype,
        rng,
        batch_first=batch_first,
        per_step=True,
        call=call,
        expect_fused=frozenset({0}) if path == "fused" else frozenset(),
    )


class _LengthsTagger(Module):
    def __init__(self, vocab, batch_first, dtype=np.float64):
        super().__init__()
        self.embed = Embedding(vocab, E, dtype=dtype, seed=1)
        self.rnn = RNN(
            E,
            H,
            batch_first=batch_first,
            bidirectional=True,
            return_sequences=True,
            dtype=dtype,
            seed=2,
        )
        self.head = Dense(2 * H, K, dtype=dtype, seed=3)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))


@pytest.mark.parametrize("how", ["lengths", "mask"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_module_takes_lengths_or_mask(dtype, batch_first, how, rng):
    model = _LengthsTagger(V_UNFUSED, batch_first, dtype)
    ids = _padded_ids(rng, LENGTHS, V_UNFUSED, pad=7)  # padding by a real id: lengths tell
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _valid_bt(LENGTHS, T)}

    def call(m, x):
        return m(x, **kw) if x.size == ids.size else m(x)

    _check_batch_equals_sequences(
        model, ids, LENGTHS, dtype, rng, batch_first=batch_first, per_step=True, call=call
    )


class _LengthsInForward(Module):
    """A forward that takes the lengths itself (and hands them to the RNN by hand)."""

    def __init__(self):
        super().__init__()
        self.rnn = RNN(E, H, batch_first=True, return_sequences=False, dtype=F64, seed=7)
        self.head = Dense(H, K, dtype=F64, seed=8)

    def forward(self, x, lengths=None):
        self.seen = lengths
        return self.head(self.rnn(x, lengths=lengths))


def test_module_forward_with_a_lengths_parameter_gets_them(rng):
    model = _LengthsInForward()
    x = _garbage_padded_floats(rng, LENGTHS, E, F64)
    out = model(x, lengths=LENGTHS)
    np.testing.assert_array_equal(model.seen, LENGTHS)
    for b, n in enumerate(LENGTHS):
        assert_close_any_dtype(out[b], model(x[b : b + 1, :n])[0], F64, f"sequence {b}")


class _PerStepLengthsInForward(Module):
    def __init__(self, go_backwards=False):
        super().__init__()
        self.rnn = RNN(
            E,
            H,
            batch_first=True,
            return_sequences=True,
            go_backwards=go_backwards,
            dtype=F64,
            seed=7,
        )
        self.head = Dense(H, K, dtype=F64, seed=8)

    def forward(self, x, lengths=None, mask=None):
        return self.head(self.rnn(x, lengths=lengths, mask=mask))


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("how", ["lengths", "mask"])
def test_lengths_handed_to_the_rnn_by_forward_make_the_output_mask(how, go_backwards, rng):
    """The output's valid mask follows lengths (or a mask) that forward gives the RNN itself,
    as it follows those the container gives: losses and metrics then leave the padding out."""
    model = _PerStepLengthsInForward(go_backwards)
    x = _garbage_padded_floats(rng, LENGTHS, E, F64)
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _valid_bt(LENGTHS, T)}
    out = model(x, **kw)
    valid = _valid_bt(LENGTHS, T)
    if go_backwards:  # Keras's order: each sequence's reversed steps after its padding
        valid = valid[:, ::-1]
    np.testing.assert_array_equal(model.output_mask, valid)
    for b, n in enumerate(LENGTHS):
        assert_close_any_dtype(out[b][valid[b]], model(x[b : b + 1, :n])[0], F64, f"sequence {b}")


def test_lengths_and_mask_are_checked(rng):
    model = _float_model(F64, batch_first=True, bidirectional=False, return_sequences=True)
    x = _garbage_padded_floats(rng, LENGTHS, E, F64)
    with pytest.raises(ValueError, match="not both"):
        model(x, lengths=LENGTHS, mask=_valid_bt(LENGTHS, T))
    with pytest.raises(ValueError, match="mask"):
        model(x, mask=np.ones((len(LENGTHS), T + 1), bool))  # Keras's mask is (B, T)
    with pytest.raises(ValueError, match="lengths"):
        model(x, lengths=LENGTHS[:-1])
    with pytest.raises(ValueError, match="lengths"):
        model(x, lengths=LENGTHS + 1)  # past T


# ---- padding that is not at the end: Keras's general masks --------------------------------------


@pytest.mark.parametrize("container", ["sequential", "module"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_padding_inside_a_sequence_is_keras_masking(container, batch_first, rng):
    """Ids 0 anywhere with mask_zero are Keras's mask: those steps are skipped (the state
    carries through), the same as the RNN given that (B, T) mask by hand; they stay out of the
    output's valid mask, so out of losses and metrics."""
    ids = _padded_ids(rng, LENGTHS, V_UNFUSED)
    ids[3, 0] = 0  # sequence 3 (length 1) starts with padding
    ids[0, 2] = 0  # and sequence 0 has padding before real steps
    if container == "sequential":
        model = _tagger(
            V_UNFUSED, F64, batch_first=batch_first, bidirectional=False, return_sequences=True
        )
        embed, rnn, head = model.layers
    else:
        model = _LengthsTagger(V_UNFUSED, batch_first)
        model.embed = Embedding(V_UNFUSED, E, dtype=F64, seed=1, mask_zero=True)
        embed, rnn, head = model.embed, model.rnn, model.head
    x = _layout(ids, batch_first)
    out = model.eval()(x)
    keras_mask = ids != 0
    np.testing.assert_array_equal(model.output_mask, _layout(keras_mask, batch_first))
    by_hand = head(rnn(embed(x), mask=keras_mask))
    np.testing.assert_allclose(out, by_hand, rtol=1e-13, atol=1e-13)


def test_mask_that_is_not_a_prefix_is_keras_masking(rng):
    model = _float_model(F64, batch_first=True, bidirectional=False, return_sequences=True)
    x = _garbage_padded_floats(rng, LENGTHS, E, F64)
    mask = _valid_bt(LENGTHS, T)
    mask[0, 1] = False
    out = model.eval()(x, mask=mask)
    np.testing.assert_array_equal(model.output_mask, mask)
    rnn, head = model.layers
    np.testing.assert_allclose(out, head(rnn(x, mask=mask)), rtol=1e-13, atol=1e-13)


# ---- the silent trap: padding read by a last output or a reverse direction ----------------------


def _trap_ids(rng, vocab, lengths=(7, 4, 2, 5, 7, 3)):
    return _padded_ids(rng, np.array(lengths), vocab, steps=7)


def _no_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@pytest.mark.parametrize("vocab", [V_FUSED, V_UNFUSED], ids=["fused", "unfused"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_end_padded_ids_into_a_last_output_warn(batch_first, vocab, rng):
    model = _tagger(
        vocab,
        np.float32,
        batch_first=batch_first,
        bidirectional=False,
        return_sequences=False,
        mask_zero=False,
    )
    ids = _layout(_trap_ids(rng, vocab), batch_first)
    with pytest.warns(PaddingWarning, match=r"lengths=.*mask_zero=True") as record:
        model(ids)
    assert "last output" in str(record[0].message)
    model.eval()
    with pytest.warns(PaddingWarning):
        model(ids)


@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_end_padded_ids_to_a_fixed_length_warn(batch_first, rng):
    """Padded to a fixed length beyond every sequence (pad_sequences(maxlen=...)), so no row is
    full: still padding of different lengths at the end, still read by the last output."""
    model = _tagger(
        V_UNFUSED,
        np.float32,
        batch_first=batch_first,
        bidirectional=False,
        return_sequences=False,
        mask_zero=False,
    )
    ids = _padded_ids(rng, np.array([5, 3, 8, 6, 2]), V_UNFUSED, steps=10)
    with pytest.warns(PaddingWarning):
        model(_layout(ids, batch_first))


@pytest.mark.parametrize("how", ["mask_zero", "padding_idx", "lengths", "mask"])
def test_no_warning_when_the_padding_is_told(how, rng):
    ids = _trap_ids(rng, V_UNFUSED)
    model = _tagger(
        V_UNFUSED,
        np.float32,
        batch_first=True,
        bidirectional=True,
        return_sequences=False,
        mask_zero=how == "mask_zero",
        padding_idx=0 if how == "padding_idx" else None,
    )
    lengths = np.count_nonzero(ids, axis=1)
    kw = {"lengths": {"lengths": lengths}, "mask": {"mask": ids != 0}}.get(how, {})
    out = _no_warning(lambda: model(ids, **kw))
    # and it is the unpadded answer
    for b, n in enumerate(lengths):
        assert_close_any_dtype(
            out[b], _no_warning(lambda: model(ids[b : b + 1, :n]))[0], np.float32, f"seq {b}"
        )


@pytest.mark.parametrize(
    "rnn_kw",
    [
        {"bidirectional": True, "return_sequences": True},
        {"bidirectional": False, "return_sequences": False},
        {"bidirectional": True, "return_sequences": False},
        {"bidirectional": False, "return_sequences": True, "go_backwards": True},
    ],
    ids=["bi-seq", "uni-last", "bi-last", "go-backwards"],
)
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_zero_feature_padding_into_a_reading_rnn_warns(batch_first, rnn_kw, rng):
    lengths = np.array([6, 2, 4, 6, 1])
    x = rng.standard_normal((5, 6, E)).astype(np.float32)
    x[~_valid_bt(lengths, 6)] = 0.0
    width = H * (2 if rnn_kw["bidirectional"] else 1)
    model = Sequential(
        [RNN(E, H, batch_first=batch_first, seed=1, **rnn_kw), Dense(width, K, seed=2)]
    )
    with pytest.warns(PaddingWarning, match="lengths="):
        model(_layout(x, batch_first))
    _no_warning(lambda: model(_layout(x, batch_first), lengths=lengths))


@pytest.mark.parametrize("case", ["ids", "floats", "ids-one-trailing-zero", "forward-sequences"])
def test_no_warning_without_padding(case, rng):
    """Batches that are not padded do not warn: random ids with real 0s among them, random
    floats, rows ending in a single 0 (too often a real token), and zero-padded floats into a
    forward-only RNN that returns every step (the padding comes after what it reads)."""
    if case.startswith("ids"):
        vocab = 40
        model = _tagger(
            vocab,
            np.float32,
            batch_first=True,
            bidirectional=True,
            return_sequences=False,
            mask_zero=False,
        )
        x = rng.integers(1, vocab, size=(6, 9))
        x[rng.random(x.shape) < 0.15] = 0
        x[:, -2:] = rng.integers(1, vocab, size=(6, 2))
        if case == "ids-one-trailing-zero":
            x[[1, 3, 4], -1] = 0
        assert np.any(x == 0)
    else:
        model = Sequential(
            [
                RNN(
                    E,
                    H,
                    batch_first=True,
                    bidirectional=case == "floats",
                    return_sequences=True,
                    seed=1,
                ),
                Dense(H * (2 if case == "floats" else 1), K, seed=2),
            ]
        )
        x = rng.standard_normal((6, 9, E)).astype(np.float32)
        if case == "forward-sequences":
            x[~_valid_bt([9, 3, 5, 2, 9, 7], 9)] = 0.0
    _no_warning(lambda: model(x))


class _TrapClassifier(Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed = Embedding(vocab, E, seed=1)
        self.rnn = RNN(E, H, batch_first=True, return_sequences=False, seed=2)
        self.head = Dense(H, K, seed=3)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))


def test_module_on_end_padded_ids_warns_unless_told(rng):
    model = _TrapClassifier(V_UNFUSED)
    ids = _trap_ids(rng, V_UNFUSED)
    with pytest.warns(PaddingWarning, match="self.rnn"):
        model(ids)
    _no_warning(lambda: model(ids, lengths=np.count_nonzero(ids, axis=1)))
    _no_warning(lambda: model(ids, mask=ids != 0))


# ---- PyTorch: pack_padded_sequence --------------------------------------------------------------


class _PackedNet(Module):
    """Embedding -> RNN in PyTorch's form ((y, h_n)) -> Dense over y; returns (logits, h_n)."""

    def __init__(self, vocab, batch_first, bidirectional, num_layers):
        super().__init__()
        self.embed = Embedding(vocab, E, dtype=F64, seed=1, mask_zero=True)
        self.rnn = RNN(
            E,
            H,
            num_layers=num_layers,
            batch_first=batch_first,
            bidirectional=bidirectional,
            dtype=F64,
            seed=2,
        )
        self.head = Dense(H * (2 if bidirectional else 1), K, dtype=F64, seed=3)

    def forward(self, ids):
        y, h_n = self.rnn(self.embed(ids))
        return self.head(y), h_n


def _torch_packed(torch, model_layers, ids, lengths, batch_first, weights, weights_h):
    """The same model in torch.nn through pack_padded_sequence (enforce_sorted=False): logits,
    h_n and the gradients of sum(logits * weights over the valid steps) + sum(h_n * weights_h)."""
    embed, rnn, head = model_layers
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    t_embed = torch.nn.Embedding(embed.num_embeddings, E, padding_idx=0, dtype=torch.float64)
    t_rnn = torch.nn.RNN(
        E,
        H,
        num_layers=rnn.num_layers,
        batch_first=batch_first,
        bidirectional=rnn.bidirectional,
        dtype=torch.float64,
    )
    t_head = torch.nn.Linear(head.in_features, K, dtype=torch.float64)
    with torch.no_grad():
        t_embed.weight.copy_(torch.from_numpy(embed.weight))
        for name, p in t_rnn.named_parameters():
            p.copy_(torch.from_numpy(rnn.state_dict()[name]))
        t_head.weight.copy_(torch.from_numpy(head.state_dict()["weight"]))
        t_head.bias.copy_(torch.from_numpy(head.state_dict()["bias"]))
    steps = ids.shape[1 if batch_first else 0]
    packed = pack_padded_sequence(
        t_embed(torch.from_numpy(ids)),
        torch.from_numpy(lengths),
        batch_first=batch_first,
        enforce_sorted=False,
    )
    out_packed, h_n = t_rnn(packed)
    out, _ = pad_packed_sequence(out_packed, batch_first=batch_first, total_length=steps)
    logits = t_head(out)
    valid = torch.from_numpy(_layout(_valid_bt(lengths, steps), batch_first))[..., None]
    loss = (logits * torch.from_numpy(weights) * valid).sum() + (
        h_n * torch.from_numpy(weights_h)
    ).sum()
    loss.backward()
    grads = {
        "embed.weight": t_embed.weight.grad.numpy(),
        "head.weight": t_head.weight.grad.numpy(),
        "head.bias": t_head.bias.grad.numpy(),
    }
    grads.update({f"rnn.{n}": p.grad.numpy() for n, p in t_rnn.named_parameters()})
    return logits.detach().numpy(), h_n.detach().numpy(), grads


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_pack_padded_sequence_parity(torch, batch_first, bidirectional, num_layers, rng):
    model = _PackedNet(V_UNFUSED, batch_first, bidirectional, num_layers)
    ids_bt = _padded_ids(rng, LENGTHS, V_UNFUSED)
    ids = _layout(ids_bt, batch_first)
    logits, h_n = model(ids)
    weights = rng.standard_normal(logits.shape)
    weights_h = rng.standard_normal(h_n.shape)
    valid = _layout(_valid_bt(LENGTHS, T), batch_first)
    np.testing.assert_array_equal(model.output_mask, valid)
    model.zero_grad()
    model.backward((weights * valid[..., None], weights_h))

    t_logits, t_h_n, t_grads = _torch_packed(
        torch, (model.embed, model.rnn, model.head), ids, LENGTHS, batch_first, weights, weights_h
    )
    assert_close(logits[valid], t_logits[valid], F64, "logits at the valid steps")
    assert_close(h_n, t_h_n, F64, "h_n")
    assert sorted(t_grads) == sorted(model.grads)
    for name, g in model.grads.items():
        assert_close(g, t_grads[name], F64, f"d{name}")


@pytest.mark.parametrize("path", ["unfused", "fused"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_pack_padded_sequence_parity_through_sequential(torch, bidirectional, path, rng):
    """Sequential (Keras's outputs: return_sequences=True) on the fused and unfused paths."""
    vocab = V_FUSED if path == "fused" else V_UNFUSED
    model = _tagger(
        vocab, F64, batch_first=True, bidirectional=bidirectional, return_sequences=True
    )
    ids = _padded_ids(rng, LENGTHS, vocab)
    out = model(ids)
    assert model._fused == (frozenset({0}) if path == "fused" else frozenset())
    weights = rng.standard_normal(out.shape)
    valid = _valid_bt(LENGTHS, T)
    model.zero_grad()
    model.backward(weights * valid[..., None])
    dirs = 2 if bidirectional else 1
    t_logits, _, t_grads = _torch_packed(
        torch, model.layers, ids, LENGTHS, True, weights, np.zeros((dirs, len(LENGTHS), H))
    )
    assert_close(out[valid], t_logits[valid], F64, "logits at the valid steps")
    names = {"embed.": "0.", "rnn.": "1.", "head.": "2."}
    for name, g in t_grads.items():
        prefix = name[: name.index(".") + 1]
        assert_close(model.grads[names[prefix] + name[len(prefix) :]], g, F64, f"d{name}")


# ---- Keras: mask_zero ----------------------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_keras_mask_zero_parity(keras, bidirectional, return_sequences, batch_first, rng):
    """keras.Sequential([Embedding(mask_zero=True), SimpleRNN / Bidirectional, Dense]) with the
    same weights. Keras 3's torch backend computes float64 matmuls in float32, so float32."""
    dtype = np.float32
    vocab = 30
    simple = keras.layers.SimpleRNN(H, return_sequences=return_sequences, dtype="float32")
    rnn_k = keras.layers.Bidirectional(simple, dtype="float32") if bidirectional else simple
    k_model = keras.Sequential(
        [
            keras.Input((T,), dtype="int32"),
            keras.layers.Embedding(vocab, E, mask_zero=True, dtype="float32"),
            rnn_k,
            keras.layers.Dense(K, dtype="float32"),
        ]
    )
    weights = []  # the arrays set, layer by layer (get_weights() warns under NumPy 2)
    for layer in k_model.layers:
        values = [rng.uniform(-0.6, 0.6, size=tuple(w.shape)).astype(dtype) for w in layer.weights]
        layer.set_weights(values)
        weights.append(values)
    (table,), _, (kernel, bias) = weights
    model = _tagger(
        vocab,
        dtype,
        batch_first=batch_first,
        bidirectional=bidirectional,
        return_sequences=return_sequences,
    )
    model[0].load_state_dict({"weight": table})
    interop.load_keras(model[1], rnn_k)  # kernel W_ih^T, recurrent kernel W_hh^T, one bias
    model[2].load_state_dict({"weight": kernel.T, "bias": bias})

    ids = _padded_ids(rng, LENGTHS, vocab)
    expected = k_model(ids.astype(np.int32)).detach().cpu().numpy()
    model.eval()
    out = model(_layout(ids, batch_first))
    if return_sequences:
        # Keras repeats the last output over a plain SimpleRNN's masked steps; rnnfast gives
        # zeros there (then the Dense's bias): the valid steps are the model's output
        out = out if batch_first else out.swapaxes(0, 1)
        valid = _valid_bt(LENGTHS, T)
        assert_close(out[valid], expected[valid], dtype, "outputs at the valid steps")
    else:
        assert_close(out, expected, dtype, "last outputs")


def test_random_ids_with_a_real_token_zero_do_not_warn():
    """A small vocabulary whose id 0 is a real token: chance runs of 0 at the end are short."""
    rng = np.random.default_rng(5)
    model = Sequential(
        [Embedding(10, 4, seed=0), RNN(4, 5, batch_first=True, return_sequences=False, seed=1)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(200):
            model.eval()(rng.integers(0, 10, size=(32, 20)))


def test_the_padding_warning_points_at_the_callers_line():
    ids = np.array([[3, 4, 5, 6, 7, 8], [3, 4, 0, 0, 0, 0]])
    model = Sequential(
        [Embedding(10, 4, seed=0), RNN(4, 5, batch_first=True, return_sequences=False, seed=1)]
    )
    with pytest.warns(PaddingWarning) as record:
        model(ids)
    assert record[0].filename == __file__
