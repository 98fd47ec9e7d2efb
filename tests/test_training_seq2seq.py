"""training.fit_seq2seq / evaluate_seq2seq on ragged (source, target) pairs."""

import math

import numpy as np
import pytest

import rnnfast
from rnnfast import optim, training
from rnnfast.losses import cross_entropy
from rnnfast.metrics import accuracy_counts

BOS, EOS = 1, 2


def _pairs(rng, n=60, vocab=10):
    src = [rng.integers(3, vocab, size=rng.integers(1, 8)) for _ in range(n)]
    return src, [s[::-1].copy() for s in src]


def test_fit_seq2seq_lowers_the_loss_and_reports_corpus_figures():
    rng = np.random.default_rng(0)
    src, tgt = _pairs(rng)
    model = rnnfast.Seq2Seq(10, 10, 16, 32, seed=0, dtype=np.float64)
    history = training.fit_seq2seq(
        model,
        src,
        tgt,
        optimizer=optim.Adam(model, lr=5e-3),
        bos=BOS,
        eos=EOS,
        epochs=4,
        batch_size=16,
        seed=0,
        validation_data=(src, tgt),
        verbose=False,
    )
    assert history["loss"][-1] < history["loss"][0]
    assert set(history) == {"loss", "val_loss", "val_accuracy", "val_perplexity"}
    assert math.isclose(history["val_perplexity"][-1], math.exp(history["val_loss"][-1]))


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("context", ["init", "input", "both"])
def test_fit_seq2seq_trains_gated_cells_with_scheduled_sampling(cell, context):
    """Every cell trains through fit_seq2seq, the teacher-forcing ratio scheduled (two-pass
    scheduled sampling below 1), and evaluates with the corpus figures."""
    rng = np.random.default_rng(2)
    src, tgt = _pairs(rng, n=40)
    model = rnnfast.Seq2Seq(10, 10, 8, 16, context=context, cell=cell, seed=0, dtype=np.float64)
    before = training.evaluate_seq2seq(model, src, tgt, bos=BOS, eos=EOS)["loss"]
    model.train()
    ratios = []

    def schedule(step):
        ratios.append(rnnfast.seq2seq.teacher_forcing_schedule("linear", step, slope=0.05))
        return ratios[-1]

    history = training.fit_seq2seq(
        model,
        src,
        tgt,
        optimizer=optim.Adam(model, lr=1e-2),
        bos=BOS,
        eos=EOS,
        epochs=4,
        batch_size=10,
        teacher_forcing=schedule,
        seed=0,
        validation_data=(src, tgt),
        verbose=False,
    )
    assert min(ratios) < 0.5 < max(ratios)
    assert history["val_loss"][-1] < before
    assert math.isfinite(history["loss"][-1])


@pytest.mark.parametrize("batch_size", [7, 64])
def test_evaluate_seq2seq_equals_the_corpus_figures_by_hand(batch_size):
    rng = np.random.default_rng(1)
    src, tgt = _pairs(rng, n=23)
    model = rnnfast.Seq2Seq(10, 10, 8, 12, seed=3, dtype=np.float64).eval()
    got = training.evaluate_seq2seq(model, src, tgt, bos=BOS, eos=EOS, batch_size=batch_size)
    total, hits, counted = 0.0, 0, 0
    for s, t in zip(src, tgt):  # one pair at a time: no padding at all
        tgt_in = np.concatenate([[BOS], t])[None]
        tgt_out = np.concatenate([t, [EOS]])[None]
        logits = model.forward(s[None], None, tgt_in)
        total += cross_entropy(logits, tgt_out, reduction="sum")[0]
        h, c = accuracy_counts(logits, tgt_out)
        hits, counted = hits + h, counted + c
    assert got["loss"] == pytest.approx(total / counted, rel=1e-10)
    assert got["accuracy"] == pytest.approx(hits / counted)


def test_fit_seq2seq_rejects_mismatched_or_non_integer_data():
    model = rnnfast.Seq2Seq(10, 10, 4, 4, seed=0)
    opt = optim.Adam(model)
    with pytest.raises(ValueError, match="targets: expected 2 sequences"):
        training.fit_seq2seq(
            model,
            [np.array([3, 4]), np.array([5])],
            [np.array([3])],
            optimizer=opt,
            bos=BOS,
            verbose=False,
        )
    with pytest.raises(TypeError, match="sources: expected a non-empty list"):
        training.fit_seq2seq(
            model, [np.array([0.5])], [np.array([3])], optimizer=opt, bos=BOS, verbose=False
        )
