"""Sequence-level training (self-critical REINFORCE, the notes' slide 40, solution 3): the
gradient that ``policy_gradient`` adds for (sampled sequences, advantages) is exact, checked on a
model whose output space can be enumerated (3 tokens, 2 steps: 9 sequences) against finite
differences of the exact expected reward; the sampler's log-probabilities are the teacher-forced
ones the gradient differentiates; the trainer's baseline, its history and its refusals; BLEU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rnnfast import optim, writable_parameters
from rnnfast.losses import log_softmax
from rnnfast.nn.seq2seq import Seq2Seq
from rnnfast.training import fit_self_critical, policy_gradient, sentence_bleu

V, STEPS, BOS = 3, 2, 0
SRC = np.array([[1, 2, 1]])
SEQUENCES = np.array(list(itertools.product(range(V), repeat=STEPS)))  # all 9 outputs


def _model(cell):
    return Seq2Seq(3, V, 2, 3, cell=cell, context="both", dtype=np.float64, seed=3)


def _reward(hypothesis, reference):
    """Any sequence-level reward: here the first token counts double."""
    return 2.0 * (hypothesis[0] == reference[0]) + 1.0 * (hypothesis[1] == reference[1])


REFERENCE = np.array([2, 1])
REWARDS = np.array([_reward(s, REFERENCE) for s in SEQUENCES])


def _log_probs(model):
    """log p(seq | SRC) of every sequence, teacher-forced in eval mode (float64)."""
    was = model.training
    model.eval()
    n = len(SEQUENCES)
    fed = np.concatenate([np.full((n, 1), BOS), SEQUENCES[:, :-1]], axis=1)
    logits = model.forward(np.repeat(SRC, n, axis=0), None, fed)
    model.train(was)
    lp = log_softmax(logits, axis=2)
    return np.take_along_axis(lp, SEQUENCES[:, :, None], axis=2)[..., 0].sum(axis=1)


def _expected_reward(model):
    return float(np.exp(_log_probs(model)) @ REWARDS)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_expected_policy_gradient_is_the_gradient_of_the_expected_reward(cell):
    """sum_seq p(seq) (r(seq) - b) grad log p(seq), through policy_gradient (the trainer's
    backward path), equals grad E[r] by central differences, with b the greedy reward."""
    model = _model(cell)
    p = np.exp(_log_probs(model))
    assert np.isclose(p.sum(), 1.0)
    greedy, _ = model.generate(SRC, None, STEPS, "greedy", bos=BOS)
    baseline = _reward(greedy[0], REFERENCE)
    n = len(SEQUENCES)
    model.train()
    model.zero_grad()
    # policy_gradient averages over its batch: weights n * p make the sum an expectation
    policy_gradient(
        model,
        np.repeat(SRC, n, axis=0),
        None,
        SEQUENCES,
        np.full(n, STEPS),
        n * p * (REWARDS - baseline),
        bos=BOS,
    )
    eps = 1e-6
    for name, param in model.named_parameters():
        numeric = np.zeros_like(param)
        for idx in np.ndindex(param.shape):
            with writable_parameters(param):  # the recurrent layers' are read-only
                old = param[idx]
                param[idx] = old + eps
                plus = _expected_reward(model)
                param[idx] = old - eps
                minus = _expected_reward(model)
                param[idx] = old
            numeric[idx] = (plus - minus) / (2 * eps)
        # the loss is -(r - b) log p: its gradient is minus the reward's
        np.testing.assert_allclose(-model.grads[name], numeric, rtol=1e-6, atol=1e-9, err_msg=name)


def test_sampled_scores_are_the_teacher_forced_log_probs():
    """What the sampler draws and what policy_gradient differentiates are the same
    distribution: a sample's log-probability from decoding equals the teacher-forced one."""
    model = _model("gru").eval()
    tokens, scores = model.generate(
        np.repeat(SRC, 16, axis=0), None, STEPS, "sample", bos=BOS, rng=1
    )
    index = [int(np.flatnonzero((SEQUENCES == t).all(axis=1))[0]) for t in tokens]
    np.testing.assert_allclose(scores, _log_probs(model)[index], rtol=1e-10)
    model.train()
    _, log_p = policy_gradient(
        model, np.repeat(SRC, 16, axis=0), None, tokens, np.full(16, STEPS), np.zeros(16), bos=BOS
    )
    np.testing.assert_allclose(log_p, scores, rtol=1e-10)
    assert all(not g.any() for g in model.grads.values())  # zero advantages: no gradient


def test_self_critical_training_raises_the_expected_reward():
    model = _model("gru")
    before = _expected_reward(model)
    history = fit_self_critical(
        model,
        [SRC[0]] * 64,
        [REFERENCE] * 64,
        optimizer=optim.Adam(model, lr=0.05),
        bos=BOS,
        reward=_reward,
        max_len=STEPS,
        epochs=4,
        batch_size=32,
        seed=0,
        verbose=False,
    )
    assert set(history) == {"loss", "reward", "greedy_reward"}
    assert len(history["reward"]) == 4
    assert _expected_reward(model) > before + 0.5


def test_end_token_ends_the_rollout_and_leaves_the_hypothesis():
    """With eos, each rollout is scored up to its first end token, which is left out of the
    hypothesis the reward reads; validation figures come from evaluate_seq2seq."""
    seen = []

    def reward(hypothesis, reference):
        seen.append(np.asarray(hypothesis))
        return float(len(hypothesis) == len(reference))

    model = Seq2Seq(3, 4, 2, 3, cell="lstm", seed=1)
    sources = [np.array([1, 2]), np.array([2])]
    targets = [np.array([1]), np.array([2, 1])]
    history = fit_self_critical(
        model,
        sources,
        targets,
        optimizer=optim.SGD(model, lr=0.1),
        bos=0,
        eos=3,
        reward=reward,
        batch_size=2,
        seed=0,
        verbose=False,
        validation_data=(sources, targets),
    )
    assert "val_loss" in history and np.isfinite(history["loss"][0])
    assert seen and all(3 not in h and len(h) <= 3 for h in seen)


def test_sentence_bleu_is_sacrebleu_over_token_ids():
    sacrebleu = pytest.importorskip("sacrebleu")
    hyp, ref = [4, 5, 6, 7, 8], [4, 5, 6, 9, 8]
    expected = sacrebleu.sentence_bleu(
        "4 5 6 7 8", ["4 5 6 9 8"], tokenize="none", smooth_method="exp"
    ).score
    assert sentence_bleu(np.array(hyp), np.array(ref)) == pytest.approx(expected / 100)
    assert sentence_bleu([1, 2, 3, 4], [1, 2, 3, 4]) == pytest.approx(1.0)
    assert 0.0 < sentence_bleu([1, 2], [1, 3]) < 1.0  # smoothed: a short partial match counts


def test_bad_arguments_are_refused():
    model = _model("gru")
    common = dict(optimizer=optim.SGD(model, lr=0.1), bos=BOS, verbose=False)
    data = ([SRC[0]], [REFERENCE])
    with pytest.raises(ValueError, match="reward: expected one of \\['bleu'\\]"):
        fit_self_critical(model, *data, reward="rouge", **common)
    with pytest.raises(ValueError, match="max_len"):
        fit_self_critical(model, *data, reward=_reward, max_len=0, **common)
    with pytest.raises(ValueError, match="temperature: expected a number > 0"):
        fit_self_critical(model, *data, reward=_reward, temperature=0.0, **common)
    with pytest.raises(TypeError, match="fit_self_critical\\(\\).*teacher_forcing"):
        fit_self_critical(model, *data, reward=_reward, teacher_forcing=0.5, **common)
    with pytest.raises(ValueError, match="advantages: expected 1 finite"):
        policy_gradient(model, SRC, None, SEQUENCES[:1], [STEPS], [np.nan], bos=BOS)
    with pytest.raises(TypeError, match="tokens: expected an integer array"):
        policy_gradient(model, SRC, None, SEQUENCES[:1] * 1.0, [STEPS], [1.0], bos=BOS)
