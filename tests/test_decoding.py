"""Decoding over a step function: beam search against exhaustive enumeration, greedy against beam
width 1, sampling against the model's distribution, batching, state handling and bad arguments.

The models are tiny and hand-built so that every sequence of a few steps can be enumerated.
"""

from __future__ import annotations

import itertools
from collections import namedtuple

import numpy as np
import pytest

import rnnfast
from rnnfast.decoding import (
    beam_search,
    default_reorder,
    greedy_decode,
    length_normalizer,
    sample_decode,
    sequence_lengths,
)

V, H = 4, 3
EOS = 3


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class TinyRNN:
    """h' = tanh(W h + E[token]), log p = log_softmax(U h'): the state is h, (1, N, H).

    Not Markov in the tokens, so beam search must carry and reorder the state correctly.
    """

    def __init__(self, seed, vocab=V, hidden=H, sharpness=2.0):
        rng = np.random.default_rng(seed)
        self.w = rng.normal(0, 1.2 / np.sqrt(hidden), (hidden, hidden))
        self.emb = rng.normal(0, 1.0, (vocab, hidden))
        self.out = rng.normal(0, sharpness, (hidden, vocab))
        self.calls = 0

    def initial_state(self, batch, seed=0):
        return np.random.default_rng(seed).normal(0, 0.5, (1, batch, self.w.shape[0]))

    def __call__(self, tokens, state):
        self.calls += 1
        h = np.tanh(state @ self.w + self.emb[tokens])
        return _log_softmax(h[-1] @ self.out), h


class ClockedRNN(TinyRNN):
    """TinyRNN whose state is a tuple (h (1, N, H), clock (N, 1)) and whose output drifts with time."""

    def __init__(self, seed, **kw):
        super().__init__(seed, **kw)
        self.drift = np.random.default_rng(seed + 1).normal(0, 1.0, self.out.shape[1])

    def initial_state(self, batch, seed=0):
        return (super().initial_state(batch, seed), np.zeros((batch, 1)))

    def __call__(self, tokens, state):
        h, clock = state
        log_probs, h = super().__call__(tokens, h)
        return _log_softmax(log_probs + clock * self.drift), (h, clock + 1.0)


class GatedStep(TinyRNN):
    """A step of rnnfast's GRU or LSTM layer between an embedding and a log-softmax: the state
    is the layer's, h (1, N, H) or the LSTM's pair (h, c); both must follow each hypothesis."""

    layer = None

    def __init__(self, seed, vocab=V, hidden=H, sharpness=2.0):
        super().__init__(seed, vocab, hidden, sharpness)
        self.rnn = self.layer(hidden, hidden, dtype=np.float64, seed=seed)
        self.out = self.out * 2.0  # the gated outputs are smaller than tanh's: as sharp

    def initial_state(self, batch, seed=0):
        h = super().initial_state(batch, seed)
        if self.rnn.cell.num_states == 1:
            return h
        return (h, np.random.default_rng(seed + 1).normal(0, 1.0, h.shape))

    def __call__(self, tokens, state):
        self.calls += 1
        y, state = self.rnn.step(self.emb[tokens], state)
        return _log_softmax(y @ self.out), state


class GRUStep(GatedStep):
    layer = rnnfast.GRU


class LSTMStep(GatedStep):
    layer = rnnfast.LSTM


MODELS = [TinyRNN, ClockedRNN, GRUStep, LSTMStep]


def _one(state, b):
    """Element b of a default-layout state, as a batch of 1."""
    return default_reorder(state, np.array([b]))


def _sequence_log_probs(model, state, start, seqs):
    """Log-probability of each row of seqs (M, L) after `start`, from a batch-of-1 state."""
    seqs = np.asarray(seqs)
    state = default_reorder(state, np.zeros(len(seqs), np.int64))
    prev = np.full(len(seqs), start)
    total = np.zeros(len(seqs))
    for t in range(seqs.shape[1]):
        log_probs, state = model(prev, state)
        total += log_probs[np.arange(len(seqs)), seqs[:, t]]
        prev = seqs[:, t]
    return total


def _all_sequences(length, vocab=V):
    return np.array(list(itertools.product(range(vocab), repeat=length)), np.int64)


def _all_eos_sequences(max_len, vocab=V, eos=EOS):
    """Every sequence that ends with its only EOS within max_len, padded with EOS to max_len."""
    others = [v for v in range(vocab) if v != eos]
    seqs, lengths = [], []
    for n in range(1, max_len + 1):
        for prefix in itertools.product(others, repeat=n - 1):
            seqs.append(list(prefix) + [eos] * (max_len - n + 1))
            lengths.append(n)
    return np.array(seqs, np.int64), np.array(lengths)


def _eos_scores(model, state, start, seqs, lengths, alpha):
    """Normalised scores of EOS-ended sequences; the padding after EOS is not scored."""
    raw = np.array(
        [_sequence_log_probs(model, state, start, s[None, :n])[0] for s, n in zip(seqs, lengths)]
    )
    return raw / length_normalizer(lengths, alpha)


# ---- beam search against exhaustive enumeration ------------------------------------------------


@pytest.mark.parametrize("model_cls", MODELS)
@pytest.mark.parametrize("length", [1, 2, 3])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_is_exhaustive_for_a_fixed_length(model_cls, length, alpha):
    # Width V**(length-1) keeps every prefix, so the last step sees every sequence.
    model, batch = model_cls(seed=length), 3
    state = model.initial_state(batch, seed=7)
    tokens, scores = beam_search(
        model, state, 0, length, beam_width=V ** (length - 1), length_penalty=alpha
    )
    assert tokens.shape == (batch, length) and scores.shape == (batch,)
    seqs = _all_sequences(length)
    for b in range(batch):
        raw = _sequence_log_probs(model, _one(state, b), 0, seqs)
        best = np.argmax(raw)
        np.testing.assert_array_equal(tokens[b], seqs[best])
        np.testing.assert_allclose(scores[b], raw[best] / length_normalizer(length, alpha))


@pytest.mark.parametrize("model_cls", MODELS)
def test_every_beam_hypothesis_scores_its_own_sequence(model_cls):
    """Each of the beam_width hypotheses returned, rescored from the start: its score holds
    only if every part of the state (the LSTM's h and c) followed it through the reorders."""
    model, batch, width, length = model_cls(seed=5, sharpness=1.0), 2, 3, 5
    state = model.initial_state(batch, seed=1)
    tokens, scores = beam_search(
        model, state, 0, length, width, length_penalty=0.0, return_all=True
    )
    for b in range(batch):
        raw = _sequence_log_probs(model, _one(state, b), 0, tokens[b])
        np.testing.assert_allclose(scores[b], raw, rtol=1e-12)


@pytest.mark.parametrize("model_cls", MODELS)
def test_beam_width_v_is_exhaustive_for_two_steps(model_cls):
    # After one step there are only V prefixes, so width V keeps them all.
    model = model_cls(seed=11)
    state = model.initial_state(4, seed=3)
    tokens, scores = beam_search(model, state, 1, 2, beam_width=V, length_penalty=0.0)
    seqs = _all_sequences(2)
    for b in range(4):
        raw = _sequence_log_probs(model, _one(state, b), 1, seqs)
        np.testing.assert_array_equal(tokens[b], seqs[np.argmax(raw)])
        np.testing.assert_allclose(scores[b], raw.max())


@pytest.mark.parametrize("model_cls", MODELS)
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_with_eos_is_exhaustive_over_ended_sequences(model_cls, alpha, seed):
    max_len, batch = 4, 2
    model = model_cls(seed=seed, sharpness=1.0)
    state = model.initial_state(batch, seed=seed + 5)
    seqs, lengths = _all_eos_sequences(max_len)
    tokens, scores = beam_search(
        model, state, 0, max_len, beam_width=V**max_len, eos_token=EOS, length_penalty=alpha
    )
    for b in range(batch):
        norm = _eos_scores(model, _one(state, b), 0, seqs, lengths, alpha)
        np.testing.assert_array_equal(tokens[b], seqs[np.argmax(norm)])
        np.testing.assert_allclose(scores[b], norm.max())


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_return_all_ranks_every_ended_sequence(alpha):
    max_len = 3
    model = TinyRNN(seed=4, sharpness=1.0)
    state = model.initial_state(1, seed=2)
    seqs, lengths = _all_eos_sequences(max_len)
    width = V**max_len
    tokens, scores = beam_search(
        model, state, 0, max_len, width, eos_token=EOS, length_penalty=alpha, return_all=True
    )
    assert tokens.shape == (1, width, max_len) and scores.shape == (1, width)
    norm = _eos_scores(model, state, 0, seqs, lengths, alpha)
    order = np.argsort(-norm, kind="stable")
    n = len(seqs)
    np.testing.assert_array_equal(tokens[0, :n], seqs[order])
    np.testing.assert_allclose(scores[0, :n], norm[order])
    # The places that no ended sequence fills hold unended ones, ranked after every ended one.
    unended = (V - 1) ** max_len
    assert (tokens[0, n : n + unended] != EOS).all()
    assert np.isfinite(scores[0, n : n + unended]).all()
    assert np.isneginf(scores[0, n + unended :]).all()
    assert np.all(np.diff(scores[0, :n]) <= 0)


def test_beam_without_eos_return_all_is_sorted_and_distinct():
    model = TinyRNN(seed=9)
    tokens, scores = beam_search(model, model.initial_state(2), 0, 3, 6, return_all=True)
    assert np.all(np.diff(scores, axis=1) <= 0)
    for b in range(2):
        assert len({tuple(row) for row in tokens[b]}) == 6


def test_beam_wider_than_the_sequences_has_empty_places():
    model = TinyRNN(seed=1)
    tokens, scores = beam_search(model, model.initial_state(1), 0, 1, 7, return_all=True)
    assert np.isfinite(scores[0, :V]).all() and np.isneginf(scores[0, V:]).all()
    assert sorted(tokens[0, :V, 0]) == list(range(V))
    assert (tokens[0, V:] == 0).all()


def test_beam_stops_early_once_nothing_can_win():
    model = TinyRNN(seed=3, sharpness=0.1)
    model.out[:, EOS] += 5.0  # EOS near certain at every step
    state = model.initial_state(2)
    tokens, scores = beam_search(
        model, state, 0, 50, beam_width=3, eos_token=EOS, length_penalty=0.0
    )
    assert model.calls < 5
    np.testing.assert_array_equal(tokens, EOS)
    np.testing.assert_allclose(
        scores, [model(np.array([0]), _one(state, b))[0][0, EOS] for b in (0, 1)]
    )


def test_beam_early_stop_allows_for_a_growing_length_normaliser():
    # "EOS" and "1 2 EOS" are equally likely in the first step, but with alpha = 2 the longer one
    # scores far better: a search that bounded live hypotheses by their current length would stop
    # after one step with the short one.
    probs = np.full((V, V), 1e-4)
    probs[0, [1, EOS]] = 0.5
    probs[1, 2] = probs[2, EOS] = 1.0
    probs[EOS] = 1.0
    table = np.log(probs / probs.sum(axis=1, keepdims=True))

    def markov(tokens, state):
        return table[tokens], state

    seqs, lengths = _all_eos_sequences(5)
    raw = np.array([table[np.r_[0, s[: n - 1]], s[:n]].sum() for s, n in zip(seqs, lengths)])
    norm = raw / length_normalizer(lengths, 2.0)
    tokens, score = beam_search(markov, None, 0, 5, 2, eos_token=EOS, length_penalty=2.0)
    np.testing.assert_array_equal(tokens[0], [1, 2, EOS, EOS, EOS])
    np.testing.assert_array_equal(tokens[0], seqs[np.argmax(norm)])
    np.testing.assert_allclose(score[0], norm.max())


# ---- greedy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model_cls", MODELS)
@pytest.mark.parametrize("eos", [None, EOS])
@pytest.mark.parametrize("seed", [5, 6, 8])
def test_greedy_equals_beam_width_one(model_cls, eos, seed):
    model = model_cls(seed=seed, sharpness=1.0)
    state = model.initial_state(6, seed=1)
    g_tokens, g_lp = greedy_decode(model, state, 0, 8, eos_token=eos)
    b_tokens, b_score = beam_search(model, state, 0, 8, 1, eos_token=eos, length_penalty=0.0)
    np.testing.assert_array_equal(g_tokens, b_tokens)
    np.testing.assert_allclose(g_lp, b_score)


def test_greedy_log_prob_is_the_sequence_log_prob():
    model = TinyRNN(seed=2)
    state = model.initial_state(3)
    tokens, lp = greedy_decode(model, state, 2, 5)
    for b in range(3):
        np.testing.assert_allclose(
            lp[b], _sequence_log_probs(model, _one(state, b), 2, tokens[b : b + 1])
        )


def test_greedy_stops_when_all_ended_and_pads_with_eos():
    model = TinyRNN(seed=3, sharpness=0.1)
    model.out[:, EOS] += 5.0
    tokens, _lp = greedy_decode(model, model.initial_state(4), 0, 30, eos_token=EOS)
    assert model.calls == 1
    assert tokens.shape == (4, 30)
    np.testing.assert_array_equal(tokens, EOS)
    np.testing.assert_array_equal(sequence_lengths(tokens, EOS), 1)


def test_ended_sequences_gain_nothing_more():
    model = TinyRNN(seed=6, sharpness=1.0)
    state = model.initial_state(8, seed=4)
    tokens, lp = greedy_decode(model, state, 0, 10, eos_token=EOS)
    lengths = sequence_lengths(tokens, EOS)
    assert 1 < len(set(lengths.tolist())), "the test should mix lengths"
    for b in range(8):
        n = lengths[b]
        assert (tokens[b, n:] == EOS).all()
        np.testing.assert_allclose(
            lp[b], _sequence_log_probs(model, _one(state, b), 0, tokens[b : b + 1, :n])
        )


# ---- batching and state handling -------------------------------------------------------------


@pytest.mark.parametrize("model_cls", MODELS)
@pytest.mark.parametrize("eos", [None, EOS])
@pytest.mark.parametrize(
    "decode",
    [
        lambda m, s, st, eos: greedy_decode(m, s, st, 7, eos_token=eos),
        lambda m, s, st, eos: beam_search(m, s, st, 7, 3, eos_token=eos),
        lambda m, s, st, eos: beam_search(m, s, st, 5, 4, eos_token=eos, return_all=True),
    ],
    ids=["greedy", "beam", "beam_all"],
)
def test_batched_equals_each_element_alone(model_cls, eos, decode):
    model = model_cls(seed=8, sharpness=1.0)
    batch = 5
    state = model.initial_state(batch, seed=6)
    start = np.array([0, 1, 2, 0, 1])
    tokens, scores = decode(model, state, start, eos)
    for b in range(batch):
        t1, s1 = decode(model, _one(state, b), start[b : b + 1], eos)
        np.testing.assert_array_equal(tokens[b], t1[0])
        np.testing.assert_allclose(scores[b], s1[0])


def test_custom_reorder_for_a_state_of_any_type():
    model = TinyRNN(seed=12)
    state = model.initial_state(3)

    def dict_model(tokens, st):
        log_probs, h = model(tokens, st["h"])
        return log_probs, {"h": h}

    def reorder(st, index):
        return {"h": st["h"][:, index]}

    expected = beam_search(model, state, np.zeros(3, np.int64), 4, 3, eos_token=EOS)
    got = beam_search(
        dict_model, {"h": state}, np.zeros(3, np.int64), 4, 3, eos_token=EOS, reorder=reorder
    )
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_allclose(got[1], expected[1])
    with pytest.raises(ValueError, match="start_token"):
        greedy_decode(dict_model, {"h": state}, 0, 4)  # no way to tell B
    with pytest.raises(TypeError, match="reorder"):
        beam_search(dict_model, {"h": state}, np.zeros(3, np.int64), 4, 3)


def test_default_reorder_keeps_the_structure():
    Pair = namedtuple("Pair", "h c")
    state = Pair(np.arange(12.0).reshape(1, 3, 4), [np.arange(6.0).reshape(3, 2), None])
    out = default_reorder(state, np.array([2, 2, 0]))
    assert isinstance(out, Pair) and isinstance(out.c, list) and out.c[1] is None
    np.testing.assert_array_equal(out.h[0, :, 0], [8.0, 8.0, 0.0])
    np.testing.assert_array_equal(out.c[0][:, 0], [4.0, 4.0, 0.0])


def test_scalar_start_token_takes_the_batch_from_the_state():
    model = ClockedRNN(seed=0)
    state = model.initial_state(4)
    a = greedy_decode(model, state, 1, 3)
    b = greedy_decode(model, state, np.ones(4, np.int64), 3)
    assert a[0].shape == (4, 3)
    np.testing.assert_array_equal(a[0], b[0])
    stateless = greedy_decode(
        lambda tok, st: (np.log(np.full((len(tok), V), 1 / V)), st), None, 0, 2
    )
    assert stateless[0].shape == (1, 2)


def test_state_batch_must_match_start_tokens():
    model = TinyRNN(seed=0)
    with pytest.raises(ValueError, match="state: expected batch size B = 2"):
        beam_search(model, model.initial_state(3), np.array([0, 1]), 3, 2)


def test_inputs_are_not_modified():
    model = ClockedRNN(seed=0)
    state = model.initial_state(2)
    copies = [a.copy() for a in state]
    start = np.array([0, 1])
    beam_search(model, state, start, 4, 3, eos_token=EOS)
    sample_decode(model, state, start, 4, rng=0)
    for a, c in zip(state, copies):
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(start, [0, 1])


# ---- sampling --------------------------------------------------------------------------------


def _tempered(log_probs, temperature=1.0, top_k=None):
    """The distribution sampling should draw from, computed independently of the module."""
    z = np.asarray(log_probs, np.float64) / temperature
    if top_k is not None:
        kth = -np.sort(-log_probs, axis=-1)[..., top_k - 1 : top_k]
        z = np.where(log_probs >= kth, z, -np.inf)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def _chi2_bound(df):
    """Wilson-Hilferty approximation of the 99.99% quantile of chi-square with df degrees."""
    z = 3.719
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize(
    "temperature, top_k", [(1.0, None), (0.6, None), (1.8, None), (1.0, 2), (1.4, 3)]
)
def test_sampled_pairs_follow_the_model(temperature, top_k):
    model = ClockedRNN(seed=13, sharpness=1.0)
    n = 40_000
    state = model.initial_state(1, seed=1)
    tokens, lp = sample_decode(
        model, default_reorder(state, np.zeros(n, np.int64)), 0, 2, temperature, top_k, rng=123
    )
    # Exact joint distribution of (first, second) token.
    first_lp, after = model(np.array([0]), state)
    p1 = _tempered(first_lp[0], temperature, top_k)
    second_lp, _ = model(np.arange(V), default_reorder(after, np.zeros(V, np.int64)))
    joint = p1[:, None] * _tempered(second_lp, temperature, top_k)
    counts = np.zeros((V, V))
    np.add.at(counts, (tokens[:, 0], tokens[:, 1]), 1)
    support = joint > 0
    assert counts[~support].sum() == 0, "drew a pair of probability 0"
    expected = n * joint[support]
    chi2 = (((counts[support] - expected) ** 2) / expected).sum()
    assert chi2 < _chi2_bound(support.sum() - 1)
    # The returned score is the untempered model's log-probability of the drawn sequence.
    np.testing.assert_allclose(
        lp, first_lp[0, tokens[:, 0]] + second_lp[tokens[:, 0], tokens[:, 1]]
    )


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_top_k_never_leaves_the_top_k(top_k):
    model = ClockedRNN(seed=14, sharpness=1.0)
    n, length = 500, 6
    state = model.initial_state(n, seed=3)
    tokens, _ = sample_decode(model, state, 0, length, top_k=top_k, rng=5)
    prev = np.zeros(n, np.int64)
    for t in range(length):
        log_probs, state = model(prev, state)
        rank = (log_probs > log_probs[np.arange(n), tokens[:, t]][:, None]).sum(axis=1)
        assert rank.max() < top_k
        prev = tokens[:, t]
    if top_k > 1:
        assert len(np.unique(tokens)) > 1


@pytest.mark.parametrize("model_cls", MODELS)
@pytest.mark.parametrize("eos", [None, EOS])
def test_top_k_one_equals_greedy(model_cls, eos):
    model = model_cls(seed=15, sharpness=1.0)
    state = model.initial_state(7, seed=2)
    expected = greedy_decode(model, state, 0, 9, eos_token=eos)
    for temperature in (0.3, 1.0, 5.0):
        got = sample_decode(model, state, 0, 9, temperature, top_k=1, eos_token=eos, rng=0)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_allclose(got[1], expected[1])


def test_temperature_moves_entropy_the_right_way():
    model = TinyRNN(seed=16, sharpness=1.5)
    n = 20_000
    state = default_reorder(model.initial_state(1, seed=0), np.zeros(n, np.int64))
    entropies = []
    for temperature in (0.25, 0.5, 1.0, 2.0, 8.0):
        tokens, _ = sample_decode(model, state, 0, 1, temperature, rng=1)
        p = np.bincount(tokens[:, 0], minlength=V) / n
        entropies.append(-(p[p > 0] * np.log(p[p > 0])).sum())
    assert np.all(np.diff(entropies) > 0), entropies
    assert entropies[-1] < np.log(V)


def test_sampling_is_reproducible_and_pads_after_eos():
    model = TinyRNN(seed=17, sharpness=1.0)
    state = model.initial_state(50)
    a = sample_decode(model, state, 0, 12, eos_token=EOS, rng=np.random.default_rng(3))
    b = sample_decode(model, state, 0, 12, eos_token=EOS, rng=3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    lengths = sequence_lengths(a[0], EOS)
    assert (lengths < 12).any()
    for row, n in zip(a[0], lengths):
        assert (row[n:] == EOS).all() and (row[: n - 1] != EOS).all()


# ---- bad arguments and bad models ------------------------------------------------------------

_BAD = [
    (beam_search, {"beam_width": 0}, "beam_width"),
    (beam_search, {"beam_width": 2, "max_len": 0}, "max_len"),
    (beam_search, {"beam_width": 2, "length_penalty": np.nan}, "length_penalty"),
    (greedy_decode, {"max_len": 0}, "max_len"),
    (greedy_decode, {"eos_token": -1}, "eos_token"),
    (greedy_decode, {"eos_token": V}, "eos_token"),
    (greedy_decode, {"start_token": -1}, "start_token"),
    (greedy_decode, {"start_token": np.zeros((2, 2), np.int64)}, "start_token"),
    (sample_decode, {"max_len": 0}, "max_len"),
    (sample_decode, {"temperature": 0.0}, "temperature"),
    (sample_decode, {"temperature": -1.0}, "temperature"),
    (sample_decode, {"temperature": np.inf}, "temperature"),
    (sample_decode, {"top_k": 0}, "top_k"),
]


def _decode_args(**kwargs):
    """A decoder's arguments for a small TinyRNN, ``kwargs`` replacing or adding some."""
    model = TinyRNN(seed=0)
    args = {"step_fn": model, "state": model.initial_state(2), "start_token": 0, "max_len": 3}
    return {**args, **kwargs}


@pytest.mark.parametrize("fn, kwargs, name", _BAD, ids=[f"{f.__name__}-{n}" for f, k, n in _BAD])
def test_bad_arguments_raise_value_error(fn, kwargs, name):
    args = _decode_args(**kwargs)
    with pytest.raises(ValueError, match=name):
        fn(**args)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_len": 2.0}, "max_len"),
        ({"start_token": 0.0}, "start_token"),
        ({"eos_token": True}, "eos_token"),
    ],
)
def test_non_integers_raise_type_error(kwargs, name):
    args = _decode_args(**kwargs)
    with pytest.raises(TypeError, match=name):
        greedy_decode(**args)


@pytest.mark.parametrize(
    "output, match",
    [
        (lambda n: np.zeros((n, V)) + 1.0, "log-softmax"),  # logits, not log-probabilities
        (lambda n: np.zeros((n + 1, V)), r"expected shape \("),
        (lambda n: np.zeros((n, V, 1)), r"expected shape \("),
        (lambda n: np.full((n, V), np.nan), "NaN"),
        (lambda n: np.full((n, V), -np.inf), "probability 0"),
    ],
)
def test_bad_log_probs_raise(output, match):
    def step(tokens, state):
        return output(len(tokens)), state

    for decode in (greedy_decode, beam_search):
        kw = {"beam_width": 2} if decode is beam_search else {}
        with pytest.raises(ValueError, match=match):
            decode(step, None, 0, 3, **kw)


def test_vocabulary_must_not_change():
    def step(tokens, state):
        v = V if state is None else V + 1
        return _log_softmax(np.zeros((len(tokens), v))), 1

    with pytest.raises(ValueError, match=rf"\(1, {V}\)"):
        greedy_decode(step, None, 0, 3)


def test_sequence_lengths():
    tokens = np.array([[1, 3, 3], [1, 2, 0], [3, 3, 3]])
    np.testing.assert_array_equal(sequence_lengths(tokens, 3), [2, 3, 1])
    np.testing.assert_array_equal(sequence_lengths(tokens, None), [3, 3, 3])
