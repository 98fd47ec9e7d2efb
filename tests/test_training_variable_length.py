"""Variable-length data through training.fit / evaluate / predict: ragged lists of sequences
(many-to-one and many-to-many), padded arrays with lengths= or mask=, bucketing; the loss and
every metric are corpus figures over the real tokens (counts, not a mean of batch fractions),
computed here by hand from each sequence run alone; padding never reaches a loss or a gradient.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rnnfast import RNN, Dense, Embedding, Module, Sequential, losses, training
from rnnfast.nn import PaddingWarning
from rnnfast.optim import SGD, Adam

F64 = np.float64
V, E, H, C = 17, 4, 6, 3
# Batch sizes that do not divide the data set, lengths from 1 to 30 (short and long sequences
# in the same data set): a mean of batch fractions is then far from the corpus figure.
N = 37
BATCH = 8
# evaluate sums per-batch figures in another order than the by-hand computation
SUM_RTOL = {np.float32: 1e-5, np.float64: 1e-11}


def _lengths(rng, n=N):
    short = rng.integers(1, 4, size=n)
    long = rng.integers(18, 31, size=n)
    return np.where(rng.random(n) < 0.5, short, long)


def _sequences(rng, lengths):
    return [rng.integers(1, V, size=int(n)) for n in lengths]


def _tags(rng, seqs):
    return [rng.integers(0, C, size=len(s)) for s in seqs]


def _pad(seqs, steps=None, fill=0):
    steps = max(len(s) for s in seqs) if steps is None else steps
    out = np.full((len(seqs), steps) + np.shape(seqs[0])[1:], fill, dtype=np.asarray(seqs[0]).dtype)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out


def _mask(lengths, steps):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


def _tagger(dtype=np.float32, batch_first=True, mask_zero=False):
    return Sequential(
        [
            Embedding(V, E, dtype=dtype, seed=1, mask_zero=mask_zero),
            RNN(
                E,
                H,
                batch_first=batch_first,
                bidirectional=True,
                return_sequences=True,
                dtype=dtype,
                seed=2,
            ),
            Dense(2 * H, C, dtype=dtype, seed=3),
        ]
    )


def _classifier(dtype=np.float32, batch_first=True, mask_zero=False):
    return Sequential(
        [
            Embedding(V, E, dtype=dtype, seed=4, mask_zero=mask_zero),
            RNN(E, H, batch_first=batch_first, return_sequences=False, dtype=dtype, seed=5),
            Dense(H, C, dtype=dtype, seed=6),
        ]
    )


def _alone(model, seq, batch_first):
    """One sequence run alone, without padding: (L, C) per-step outputs or (C,)."""
    model.eval()
    ids = np.asarray(seq)[None] if batch_first else np.asarray(seq)[:, None]
    out = model(ids)
    if out.ndim == 2:
        return out[0]
    return out[0] if batch_first else out[:, 0]


def _log_softmax(z):
    z = np.asarray(z, F64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _by_hand(model, seqs, targets, batch_first=True):
    """(mean cross-entropy over the real tokens, corpus accuracy) from each sequence alone."""
    total, hits, count = 0.0, 0, 0
    for s, t in zip(seqs, targets):
        out = _alone(model, s, batch_first)
        t = np.atleast_1d(t)
        out = out.reshape(len(t), C)
        total -= float(np.sum(_log_softmax(out)[np.arange(len(t)), t]))
        hits += int(np.sum(np.argmax(out, axis=-1) == t))
        count += len(t)
    return total / count, hits / count


# ---- ragged input through fit / evaluate / predict ----------------------------------------------


@pytest.mark.parametrize("bucket", [False, True], ids=["in-order", "bucketed"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_ragged_many_to_one(batch_first, bucket, rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    labels = np.array([s[0] % C for s in seqs])  # learnable: the first token says it
    model = _classifier(batch_first=batch_first)
    history = training.fit(
        model,
        seqs,
        labels,
        loss="cross_entropy",
        optimizer=Adam(model, lr=0.05),
        epochs=8,
        batch_size=BATCH,
        bucket=bucket,
        seed=1,
        verbose=False,
        metrics=["accuracy"],
    )
    assert history["loss"][-1] < history["loss"][0]
    result = training.evaluate(
        model,
        seqs,
        labels,
        loss="cross_entropy",
        metrics=["accuracy"],
        batch_size=BATCH,
        bucket=bucket,
    )
    loss, acc = _by_hand(model, seqs, labels, batch_first)
    assert result["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)  # float32, loss ~1e-3
    assert result["accuracy"] == pytest.approx(acc, abs=1e-12)

    out = training.predict(model, seqs, batch_size=BATCH, bucket=bucket)
    assert isinstance(out, np.ndarray) and out.shape == (N, C)
    for i, s in enumerate(seqs):  # input order, each the sequence's own last output
        np.testing.assert_allclose(
            out[i], _alone(model, s, batch_first), rtol=1e-5, atol=1e-6, err_msg=f"sequence {i}"
        )


@pytest.mark.parametrize("bucket", [False, True], ids=["in-order", "bucketed"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_ragged_many_to_many(batch_first, bucket, rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = [s % C for s in seqs]  # learnable: each token says its tag
    model = _tagger(batch_first=batch_first)
    history = training.fit(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        optimizer=Adam(model, lr=0.05),
        epochs=6,
        batch_size=BATCH,
        bucket=bucket,
        seed=2,
        verbose=False,
        metrics=["accuracy"],
    )
    assert history["loss"][-1] < history["loss"][0] / 2
    assert history["accuracy"][-1] > 0.9

    out = training.predict(model, seqs, batch_size=BATCH, bucket=bucket)
    assert isinstance(out, list) and len(out) == N
    assert [o.shape for o in out] == [(n, C) for n in lengths]
    for i, s in enumerate(seqs):
        np.testing.assert_allclose(
            out[i], _alone(model, s, batch_first), rtol=1e-5, atol=1e-6, err_msg=f"sequence {i}"
        )
    result = training.evaluate(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        metrics=["accuracy"],
        batch_size=BATCH,
        bucket=bucket,
    )
    loss, acc = _by_hand(model, seqs, tags, batch_first)
    assert result["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)  # float32, loss ~1e-3
    assert result["accuracy"] == pytest.approx(acc, abs=1e-12)


def test_ragged_validation_data_is_evaluated_as_evaluate_does(rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    model = _tagger(dtype=F64)
    history = training.fit(
        model,
        seqs[:30],
        tags[:30],
        loss="cross_entropy",
        optimizer=Adam(model, lr=0.01),
        epochs=1,
        batch_size=BATCH,
        validation_data=(seqs[30:], tags[30:]),
        verbose=False,
        metrics=["accuracy"],
    )
    result = training.evaluate(
        model, seqs[30:], tags[30:], loss="cross_entropy", metrics=["accuracy"], batch_size=BATCH
    )
    assert history["val_loss"][0] == pytest.approx(result["loss"], rel=1e-12)
    assert history["val_accuracy"][0] == result["accuracy"]


def test_predict_keeps_the_input_order_with_any_batch_size(rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    model = _tagger(dtype=F64)
    reference = [_alone(model, s, True) for s in seqs]
    for batch_size in (1, 5, BATCH, N, 100):
        for bucket in (False, True):
            out = training.predict(model, seqs, batch_size=batch_size, bucket=bucket)
            assert len(out) == N
            for i, (o, r) in enumerate(zip(out, reference)):
                np.testing.assert_allclose(
                    o, r, rtol=1e-12, atol=1e-13, err_msg=f"sequence {i}, batch_size {batch_size}"
                )


# ---- padded arrays with lengths= or mask= --------------------------------------------------------


@pytest.mark.parametrize("task", ["many-to-one", "many-to-many"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_padded_with_lengths_or_mask_equals_ragged(task, batch_first, rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    steps = int(lengths.max()) + 3  # padded beyond every sequence
    if task == "many-to-one":
        model = _classifier(F64, batch_first)
        targets = rng.integers(0, C, size=N)
        y_padded = targets
    else:
        model = _tagger(F64, batch_first)
        targets = _tags(rng, seqs)
        y_padded = _pad(targets, steps, fill=1)  # real class ids in the padding too
    x_padded = _pad(seqs, steps, fill=5)  # real token ids in the padding: only lengths tell
    if not batch_first:  # the model's layout: (T, N)
        x_padded = np.ascontiguousarray(x_padded.T)
        if task == "many-to-many":
            y_padded = np.ascontiguousarray(y_padded.T)
    kw = {"loss": "cross_entropy", "metrics": ["accuracy", "perplexity"], "batch_size": BATCH}
    ragged = training.evaluate(model, seqs, targets, **kw)
    with_lengths = training.evaluate(model, x_padded, y_padded, lengths=lengths, **kw)
    with_mask = training.evaluate(model, x_padded, y_padded, mask=_mask(lengths, steps), **kw)
    loss, acc = _by_hand(model, seqs, targets, batch_first)
    for name, result in (("ragged", ragged), ("lengths", with_lengths), ("mask", with_mask)):
        assert result["loss"] == pytest.approx(loss, rel=1e-11), name
        assert result["accuracy"] == pytest.approx(acc, abs=1e-12), name
        assert result["perplexity"] == pytest.approx(math.exp(loss), rel=1e-11), name

    out = training.predict(model, x_padded, lengths=lengths, batch_size=BATCH)
    if task == "many-to-many":  # padded back to x's length, zeros past each length
        rows = out if batch_first else out.swapaxes(0, 1)
        assert rows.shape == (N, steps, C)
        for i, s in enumerate(seqs):
            np.testing.assert_allclose(
                rows[i, : len(s)], _alone(model, s, batch_first), rtol=1e-12, atol=1e-13
            )
    else:
        assert out.shape == (N, C)
        for i, s in enumerate(seqs):
            np.testing.assert_allclose(
                out[i], _alone(model, s, batch_first), rtol=1e-12, atol=1e-13
            )


# ---- corpus figures ---------------------------------------------------------------------------

CORPUS_SEED = 2


@pytest.mark.parametrize("bucket", [False, True], ids=["in-order", "bucketed"])
@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_evaluate_accuracy_and_loss_are_corpus_figures(dtype, bucket):
    # fixed data on which a mean of batch fractions is far from the corpus figure (checked
    # below), whatever the test's id
    rng = np.random.default_rng(CORPUS_SEED)
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    model = _tagger(dtype)
    result = training.evaluate(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        metrics=["accuracy"],
        batch_size=BATCH,
        bucket=bucket,
    )
    out = training.predict(model, seqs, batch_size=BATCH, bucket=bucket)
    hits = [int(np.sum(np.argmax(o, axis=-1) == t)) for o, t in zip(out, tags)]
    ce = [-float(np.sum(_log_softmax(o)[np.arange(len(t)), t])) for o, t in zip(out, tags)]
    tokens = int(lengths.sum())
    assert result["accuracy"] == pytest.approx(sum(hits) / tokens, abs=1e-12)
    assert result["loss"] == pytest.approx(sum(ce) / tokens, rel=SUM_RTOL[dtype])

    # what a mean of batch fractions would give, over evaluate's own batches: far off here,
    # so the figures above tell counts from fractions
    order = np.argsort(-lengths, kind="stable") if bucket else np.arange(N)
    batches = [order[i : i + BATCH] for i in range(0, N, BATCH)]
    mean_acc = np.mean([sum(hits[i] for i in b) / lengths[b].sum() for b in batches])
    mean_loss = np.mean([sum(ce[i] for i in b) / lengths[b].sum() for b in batches])
    assert abs(mean_acc - result["accuracy"]) > 1e-3
    assert abs(mean_loss - result["loss"]) > 1e-3 * result["loss"]


def test_many_to_one_accuracy_counts_sequences(rng):
    """Per-sequence labels: each sequence counts once, whatever its length."""
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    labels = rng.integers(0, C, size=N)
    model = _classifier(F64)
    result = training.evaluate(
        model, seqs, labels, loss="cross_entropy", metrics=["accuracy"], batch_size=BATCH
    )
    out = training.predict(model, seqs, batch_size=BATCH)
    assert result["accuracy"] == pytest.approx(np.mean(np.argmax(out, axis=1) == labels), abs=1e-12)
    ce = -_log_softmax(out)[np.arange(N), labels]
    assert result["loss"] == pytest.approx(ce.mean(), rel=1e-11)


def test_perplexity_is_exp_of_the_mean_cross_entropy(rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    model = _tagger(F64)
    result = training.evaluate(
        model, seqs, tags, loss="cross_entropy", metrics=["perplexity"], batch_size=BATCH
    )
    loss, _ = _by_hand(model, seqs, tags)
    assert result["perplexity"] == pytest.approx(math.exp(loss), rel=1e-11)
    assert result["perplexity"] == pytest.approx(math.exp(result["loss"]), rel=1e-12)
    history = training.fit(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        optimizer=SGD(model, lr=0.0),
        batch_size=BATCH,
        shuffle=False,
        verbose=False,
        metrics=["perplexity"],
    )
    assert history["perplexity"][0] == pytest.approx(math.exp(loss), rel=1e-11)


@pytest.mark.parametrize(
    "batching",
    [
        {"bucket": False},
        {"bucket": True},
        {"bucket": True, "max_tokens": 60},
        {"max_tokens": 35},
        {"bucket": False, "drop_last": False, "batch_size": 1},
    ],
    ids=["none", "bucket", "bucket-max-tokens", "max-tokens", "one-per-batch"],
)
def test_batching_does_not_change_the_figures(batching, rng):
    """With a learning rate of 0, fit's epoch figures are the corpus figures of the model,
    whatever the batches; evaluate's the same with or without bucketing."""
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    model = _tagger(F64)
    expected_loss, expected_acc = _by_hand(model, seqs, tags)
    for bucket in (False, True):
        result = training.evaluate(
            model,
            seqs,
            tags,
            loss="cross_entropy",
            metrics=["accuracy"],
            batch_size=BATCH,
            bucket=bucket,
        )
        assert result["loss"] == pytest.approx(expected_loss, rel=1e-11)
        assert result["accuracy"] == pytest.approx(expected_acc, abs=1e-12)
    kw = {"batch_size": BATCH, **batching}
    history = training.fit(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        optimizer=SGD(model, lr=0.0),
        epochs=1,
        seed=3,
        verbose=False,
        metrics=["accuracy"],
        **kw,
    )
    assert history["loss"][0] == pytest.approx(expected_loss, rel=1e-11)
    assert history["accuracy"][0] == pytest.approx(expected_acc, abs=1e-12)


class _HandsLengthsOn(Module):
    """A forward that takes the lengths and hands them to its RNN itself."""

    def __init__(self):
        super().__init__()
        self.embed = Embedding(V, E, dtype=F64, seed=1)
        self.rnn = RNN(
            E, H, batch_first=True, bidirectional=True, return_sequences=True, dtype=F64, seed=2
        )
        self.head = Dense(2 * H, C, dtype=F64, seed=3)

    def forward(self, ids, lengths=None):
        return self.head(self.rnn(self.embed(ids), lengths=lengths))


def test_a_module_handing_lengths_to_its_rnn_keeps_padding_out_of_the_figures(rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    model = _HandsLengthsOn()
    result = training.evaluate(
        model, seqs, tags, loss="cross_entropy", metrics=["accuracy"], batch_size=BATCH
    )
    loss, acc = _by_hand(model, seqs, tags)
    assert result["loss"] == pytest.approx(loss, rel=1e-11)
    assert result["accuracy"] == pytest.approx(acc, abs=1e-12)
    out = training.predict(model, seqs, batch_size=BATCH)
    assert [o.shape for o in out] == [(n, C) for n in lengths]


# ---- padding never reaches the loss --------------------------------------------------------------


def _state(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("how", ["lengths", "mask"])
def test_targets_at_padded_positions_change_nothing(how, rng):
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    tags = _tags(rng, seqs)
    steps = int(lengths.max())
    x = _pad(seqs, steps)
    y = _pad(tags, steps)
    y_other = y.copy()
    pad = ~_mask(lengths, steps)
    y_other[pad] = rng.integers(0, C, size=int(pad.sum()))
    assert np.any(y_other != y)
    kw = {"lengths": lengths} if how == "lengths" else {"mask": _mask(lengths, steps)}
    results, states = [], []
    for targets in (y, y_other):
        model = _tagger(F64)
        results.append(
            training.evaluate(
                model,
                x,
                targets,
                loss="cross_entropy",
                metrics=["accuracy"],
                batch_size=BATCH,
                **kw,
            )
        )
        training.fit(
            model,
            x,
            targets,
            loss="cross_entropy",
            optimizer=SGD(model, lr=0.5),
            epochs=2,
            batch_size=BATCH,
            shuffle=False,
            verbose=False,
            **kw,
        )
        states.append(_state(model))
    assert results[0] == results[1]
    for name, v in states[0].items():
        np.testing.assert_array_equal(v, states[1][name], err_msg=name)
    assert any(not np.array_equal(v, _state(_tagger(F64))[k]) for k, v in states[0].items())


def test_cross_entropy_with_the_output_mask_ignores_padding(rng):
    """The model's output_mask, given to the loss, leaves the padding out of value and
    gradient; the padded targets may hold anything."""
    lengths = np.array([4, 1, 3])
    model = _tagger(F64, mask_zero=True)
    x = _pad(_sequences(rng, lengths))
    out = model(x)
    valid = model.output_mask
    np.testing.assert_array_equal(valid, _mask(lengths, 4))
    targets = rng.integers(0, C, size=valid.shape)
    value, grad = losses.cross_entropy(out, targets, mask=valid)
    targets[~valid] = 10**6  # not even a class id
    value2, grad2 = losses.cross_entropy(out, targets, mask=valid)
    assert value == value2
    np.testing.assert_array_equal(grad, grad2)
    assert np.all(grad[~valid] == 0)
    ce = -_log_softmax(out[valid])[np.arange(int(valid.sum())), targets[valid]]
    assert value == pytest.approx(ce.mean(), rel=1e-12)


def test_mse_with_a_mask_ignores_padded_positions(rng):
    pred = rng.standard_normal((4, 6, 3))
    target = rng.standard_normal((4, 6, 3))
    lengths = np.array([6, 2, 0, 4])
    mask = _mask(lengths, 6)
    value, grad = losses.mse_loss(pred, target, mask=mask)
    diff = (pred - target)[mask]
    assert value == pytest.approx(np.mean(diff**2), rel=1e-12)
    np.testing.assert_allclose(grad[mask], 2 * diff / diff.size, rtol=1e-12)
    assert np.all(grad[~mask] == 0)
    target2 = target.copy()
    target2[~mask] = 1e6
    value2, grad2 = losses.mse_loss(pred, target2, mask=mask)
    assert value2 == value
    np.testing.assert_array_equal(grad2, grad)
    total, grad_sum = losses.mse_loss(pred, target, mask=mask, reduction="sum")
    assert total == pytest.approx(np.sum(diff**2), rel=1e-12)
    np.testing.assert_allclose(grad_sum[mask], 2 * diff, rtol=1e-12)
    with pytest.raises(ValueError, match="mask"):
        losses.mse_loss(pred, target, mask=mask.T)
    with pytest.raises(ValueError, match="mask"):
        losses.mse_loss(pred, target, mask=mask.astype(int))


def test_fit_with_mse_on_ragged_per_step_targets(rng):
    """A float regression per step: evaluate's mse is the mean over the real elements, the
    padding (and what the padded targets hold) left out."""
    lengths = _lengths(rng)
    xs = [rng.standard_normal((n, E)) for n in lengths]
    ys = [np.cumsum(x, axis=0)[:, :2] * 0.1 for x in xs]
    model = Sequential(
        [
            RNN(E, H, batch_first=True, return_sequences=True, dtype=F64, seed=7),
            Dense(H, 2, dtype=F64, seed=8),
        ]
    )
    history = training.fit(
        model,
        xs,
        ys,
        loss="mse",
        optimizer=Adam(model, lr=0.01),
        epochs=3,
        batch_size=BATCH,
        verbose=False,
    )
    assert history["loss"][-1] < history["loss"][0]
    result = training.evaluate(model, xs, ys, loss="mse", batch_size=BATCH)
    out = training.predict(model, xs, batch_size=BATCH)
    squared = sum(float(np.sum((o - y) ** 2)) for o, y in zip(out, ys))
    assert result["loss"] == pytest.approx(squared / (2 * lengths.sum()), rel=1e-11)
    steps = int(lengths.max())
    x_pad, y_pad = _pad(xs, steps), _pad(ys, steps, fill=99.0)
    padded = training.evaluate(model, x_pad, y_pad, loss="mse", lengths=lengths, batch_size=BATCH)
    assert padded["loss"] == pytest.approx(result["loss"], rel=1e-11)


# ---- layout and the silent trap ---------------------------------------------------------------


@pytest.mark.parametrize("function", ["fit", "evaluate", "predict"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "tm"])
def test_batch_axis_contradicting_the_model_is_refused(function, batch_first, rng):
    lengths = np.array([3, 5, 2, 5])
    x = _pad(_sequences(rng, lengths))  # (N, T)
    y = rng.integers(0, C, size=len(lengths))
    model = _classifier(batch_first=batch_first)
    wrong = 1 if batch_first else 0
    data = x if batch_first else np.ascontiguousarray(x.T)
    call = {
        "fit": lambda: training.fit(
            model,
            data,
            y,
            loss="cross_entropy",
            optimizer=SGD(model, lr=0.1),
            batch_axis=wrong,
            lengths=lengths,
            verbose=False,
        ),
        "evaluate": lambda: training.evaluate(
            model, data, y, loss="cross_entropy", batch_axis=wrong, lengths=lengths
        ),
        "predict": lambda: training.predict(model, data, batch_axis=wrong, lengths=lengths),
    }[function]
    before = _state(model)
    with pytest.raises(ValueError, match="batch_axis") as info:
        call()
    assert ("batch-first" if batch_first else "time-major") in str(info.value)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


@pytest.mark.parametrize("padded_to", ["longest", "fixed"])
def test_fit_on_end_padded_ids_without_lengths_warns(padded_to, rng):
    """The issue's trap: a last-output classifier fit on end-padded ids, no lengths given."""
    lengths = _lengths(rng)
    seqs = _sequences(rng, lengths)
    labels = rng.integers(0, C, size=N)
    steps = int(lengths.max()) + (0 if padded_to == "longest" else 5)
    x = _pad(seqs, steps)
    model = _classifier()
    with pytest.warns(PaddingWarning, match="lengths="):
        training.fit(
            model,
            x,
            labels,
            loss="cross_entropy",
            optimizer=SGD(model, lr=0.1),
            batch_size=BATCH,
            verbose=False,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        training.fit(
            model,
            x,
            labels,
            loss="cross_entropy",
            optimizer=SGD(model, lr=0.1),
            batch_size=BATCH,
            verbose=False,
            lengths=lengths,
        )
        training.fit(
            model,
            seqs,
            labels,
            loss="cross_entropy",
            optimizer=SGD(model, lr=0.1),
            batch_size=BATCH,
            verbose=False,
        )
        masked = _classifier(mask_zero=True)
        training.fit(
            masked,
            x,
            labels,
            loss="cross_entropy",
            optimizer=SGD(masked, lr=0.1),
            batch_size=BATCH,
            verbose=False,
        )


def test_ragged_input_refuses_lengths_and_mismatched_targets(rng):
    seqs = _sequences(rng, [3, 4, 2])
    model = _tagger()
    with pytest.raises(ValueError, match="ragged"):
        training.evaluate(
            model, seqs, _tags(rng, seqs), loss="cross_entropy", lengths=np.array([3, 4, 2])
        )
    bad = _tags(rng, seqs)
    bad[1] = bad[1][:-1]
    with pytest.raises(ValueError, match=r"y\[1\]"):
        training.evaluate(model, seqs, bad, loss="cross_entropy")
    with pytest.raises(ValueError, match="y"):
        training.evaluate(model, seqs, _tags(rng, seqs)[:2], loss="cross_entropy")
