"""Sequence decoding over any model that predicts one token at a time: greedy, sampling, beam search.

Decoding knows nothing of the model. It drives a *step function*

    step_fn(tokens, state) -> (log_probs, new_state)

where ``tokens`` is an int64 array (N,) of the previous token of each of N sequences, ``state`` is
whatever the model carries from step to step, and ``log_probs`` is an (N, V) float array of
log-probabilities (a log-softmax, so every entry is <= 0) over the V tokens of the vocabulary.

Beam search must also reorder the state along the batch when it keeps, drops and duplicates
hypotheses. By default a state is an ndarray with the batch on axis -2 (an RNN's ``h`` of shape
(layers, N, H), an output of shape (N, H)), a tuple or list of such (an LSTM-style ``(h, c)``), or
None; any other state needs a ``reorder(state, index)`` of its own.

Every function takes the state for a batch of B sequences and returns B decoded sequences of
``max_len`` tokens, the start token excluded. A sequence that emitted ``eos_token`` stays ended: its
later positions hold ``eos_token`` and add nothing to its score.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._validation import check_finite_real, check_int, check_optional_int, value_error

__all__ = [
    "beam_search",
    "default_reorder",
    "greedy_decode",
    "length_normalizer",
    "sample_decode",
    "sequence_lengths",
]

StepFn = Callable[[np.ndarray, Any], tuple[Any, Any]]
ReorderFn = Callable[[Any, np.ndarray], Any]

# Log-probabilities a log-softmax computed in float32 may round a hair above 0; anything larger is
# almost surely raw logits, for which the scores and beam search's early stop would be wrong.
_LOG_PROB_SLACK = 1e-3


# ---- the state --------------------------------------------------------------------------------


def default_reorder(state, index):
    """Select and reorder the sequences of a state along its batch axis.

    Parameters
    ----------
    state : ndarray, tuple or list of ndarrays, or None
        Each ndarray holds the batch on axis -2, e.g. ``h`` of shape (layers, N, H).
    index : ndarray of int, shape (M,)
        Row ``i`` of the result is row ``index[i]`` of ``state``; rows may repeat or be left out.

    Returns
    -------
    state : same structure as the input, with M rows on axis -2 of every array.

    Raises
    ------
    ValueError
        If an array has fewer than 2 dimensions.
    TypeError
        If the state is none of the structures above: pass your own ``reorder``.
    """
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        parts = [default_reorder(part, index) for part in state]
        # A namedtuple takes its fields as separate arguments, a plain tuple or list an iterable.
        return type(state)(*parts) if hasattr(state, "_fields") else type(state)(parts)
    if isinstance(state, np.ndarray):
        if state.ndim < 2:
            raise ValueError(
                f"state: expected arrays with the batch on axis -2 (ndim >= 2), got shape {state.shape}"
            )
        return np.take(state, index, axis=-2)
    raise TypeError(
        f"state: default_reorder handles ndarrays, tuples and lists of them and None, got "
        f"{type(state).__name__}; pass reorder=your_function(state, index)"
    )


def _state_batch_sizes(state) -> list:
    """The batch size on axis -2 of every array of a default-layout state ([] for None)."""
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [n for part in state for n in _state_batch_sizes(part)]
    if isinstance(state, np.ndarray) and state.ndim >= 2:
        return [state.shape[-2]]
    raise ValueError(
        f"state: cannot tell the batch size of a {type(state).__name__}"
        + (f" of shape {state.shape}" if isinstance(state, np.ndarray) else "")
        + "; pass start_token as an array of shape (B,)"
    )


def _is_default_layout(state) -> bool:
    if state is None or isinstance(state, np.ndarray):
        return True
    return isinstance(state, (tuple, list)) and all(_is_default_layout(part) for part in state)


def _check_state_batch(state, batch: int) -> None:
    """The state suits :func:`default_reorder` and holds B sequences."""
    if not _is_default_layout(state):
        raise TypeError(
            f"state: default_reorder handles ndarrays, tuples and lists of them and None, got "
            f"{type(state).__name__}; pass reorder=your_function(state, index)"
        )
    for n in _state_batch_sizes(state):
        if n != batch:
            raise ValueError(
                f"state: expected batch size B = {batch} on axis -2 of every array, got {n}"
            )


# ---- arguments --------------------------------------------------------------------------------


def _check_optional_token(name: str, value) -> int | None:
    return check_optional_int(name, value, 0)


def _check_real(name: str, value, positive: bool) -> float:
    x = check_finite_real(name, value)
    if positive and x <= 0.0:
        raise value_error(name, "a finite positive number", value)
    return x


def _start_tokens(start_token, state) -> np.ndarray:
    """The start token of every sequence, int64 (B,); a scalar is repeated over the state's batch."""
    arr = np.asarray(start_token)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"start_token: expected an integer or integer array, got dtype {arr.dtype}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"start_token: expected tokens >= 0, got {arr.min()}")
    if arr.ndim == 0:
        sizes = _state_batch_sizes(state)
        return np.full(sizes[0] if sizes else 1, int(arr), np.int64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"start_token: expected a scalar or shape (B,) with B >= 1, got shape {arr.shape}"
        )
    return arr.astype(np.int64)


class _CheckedStep:
    """``step_fn`` with its log-probabilities checked and converted to float64 (N, V).

    V is fixed by the first call; ``eos_token`` is checked against it then.
    """

    def __init__(self, step_fn: StepFn, eos_token: int | None):
        if not callable(step_fn):
            raise TypeError(f"step_fn: expected a callable, got {type(step_fn).__name__}")
        self.step_fn = step_fn
        self.eos_token = eos_token
        self.vocab: int | None = None

    def __call__(self, tokens: np.ndarray, state):
        log_probs, state = self.step_fn(tokens, state)
        lp = np.asarray(log_probs)
        if lp.dtype.kind != "f":
            raise TypeError(f"log_probs: expected a float array, got dtype {lp.dtype}")
        rows = tokens.shape[0]
        vocab = self.vocab if self.vocab is not None else (lp.shape[-1] if lp.ndim == 2 else -1)
        if lp.shape != (rows, vocab) or vocab < 1:
            expected = f"({rows}, V)" if self.vocab is None else f"({rows}, {self.vocab})"
            raise ValueError(f"log_probs: expected shape {expected}, got shape {lp.shape}")
        self._check_values(lp)
        if self.vocab is None:
            self.vocab = vocab
            if self.eos_token is not None and self.eos_token >= vocab:
                raise ValueError(f"eos_token: expected a token < V = {vocab}, got {self.eos_token}")
        return lp.astype(np.float64), state

    @staticmethod
    def _check_values(lp: np.ndarray) -> None:
        if np.isnan(lp).any():
            raise ValueError("log_probs: step_fn returned NaN")
        top = lp.max(axis=1)
        if (top > _LOG_PROB_SLACK).any():
            raise ValueError(
                f"log_probs: expected log-probabilities (<= 0), got a maximum of {top.max()}; "
                "apply a log-softmax to the logits"
            )
        if (top == -np.inf).any():
            raise ValueError("log_probs: a row gives every token probability 0")


# ---- greedy and sampling ----------------------------------------------------------------------


def _decode(step: _CheckedStep, state, prev: np.ndarray, max_len: int, eos_token, choose):
    """The loop shared by greedy decoding and sampling: ``choose(log_probs)`` picks the tokens."""
    batch = prev.shape[0]
    rows = np.arange(batch)
    tokens = np.full((batch, max_len), 0 if eos_token is None else eos_token, np.int64)
    total = np.zeros(batch)
    ended = np.zeros(batch, bool)
    for t in range(max_len):
        log_probs, state = step(prev, state)
        chosen = choose(log_probs)
        gained = log_probs[rows, chosen]
        if eos_token is not None:
            # Ended sequences ride along (fed EOS) so that the batch stays one array.
            chosen = np.where(ended, eos_token, chosen)
            gained = np.where(ended, 0.0, gained)
            ended |= chosen == eos_token
        tokens[:, t] = chosen
        total += gained
        if ended.all():
            break
        prev = chosen
    return tokens, total


def greedy_decode(step_fn: StepFn, state, start_token, max_len: int, eos_token=None):
    """Decode a batch by taking the most probable token at every step.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(tokens, state) -> (log_probs, new_state)``, tokens int64 (N,), log_probs (N, V)
        log-probabilities; see the module docstring.
    state : object
        The model's state for the B sequences, passed to ``step_fn`` untouched.
    start_token : int or array_like of int, shape (B,)
        The token fed at the first step. A scalar is used for every sequence; B is then read from
        axis -2 of the state's arrays (1 for a None state).
    max_len : int
        Number of tokens to generate, >= 1.
    eos_token : int, optional
        Ends a sequence; decoding stops early once every sequence has emitted it.

    Returns
    -------
    tokens : ndarray of int64, shape (B, max_len)
        Generated tokens, start token excluded; after a sequence's EOS, ``eos_token``.
    log_prob : ndarray of float64, shape (B,)
        Sum of the log-probabilities of each sequence's tokens, its EOS included.

    Raises
    ------
    ValueError
        On ``max_len < 1``, a negative token, ``eos_token >= V``, or log_probs of the wrong shape,
        with NaN, or above 0 (logits rather than log-probabilities).
    TypeError
        On non-integer tokens or lengths.
    """
    max_len = check_int("max_len", max_len, 1)
    eos_token = _check_optional_token("eos_token", eos_token)
    start = _start_tokens(start_token, state)
    step = _CheckedStep(step_fn, eos_token)
    return _decode(step, state, start, max_len, eos_token, lambda lp: lp.argmax(axis=1))


def _top_k_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """True at the k largest entries of every row of ``scores`` (N, V)."""
    keep = np.zeros(scores.shape, bool)
    if k >= scores.shape[1]:
        keep[:] = True
        return keep
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    np.put_along_axis(keep, top, True, axis=1)
    return keep


def _sampler(temperature: float, top_k: int | None, rng: np.random.Generator):
    """``choose(log_probs)`` that draws one token per row from the tempered, truncated model."""

    def choose(log_probs: np.ndarray) -> np.ndarray:
        logits = log_probs / temperature
        if top_k is not None:
            logits = np.where(_top_k_mask(log_probs, top_k), logits, -np.inf)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(probs, axis=1)
        # u in (0, 1], not [0, 1): u = 0 would pick token 0 even where its probability is 0.
        u = 1.0 - rng.random(log_probs.shape[0])
        # Scaling by the row total renormalises without dividing every entry.
        chosen = (cdf < u[:, None] * cdf[:, -1:]).sum(axis=1)
        return np.minimum(chosen, log_probs.shape[1] - 1)

    return choose


def sample_decode(
    step_fn: StepFn,
    state,
    start_token,
    max_len: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    eos_token=None,
    rng=None,
):
    """Decode a batch by drawing every token from the model's (tempered, truncated) distribution.

    At each step the distribution is ``softmax(log_probs / temperature)`` restricted to the
    ``top_k`` most probable tokens and renormalised.

    Parameters
    ----------
    step_fn, state, start_token, max_len, eos_token
        As in :func:`greedy_decode`.
    temperature : float
        > 0. Below 1 sharpens the distribution, above 1 flattens it. For the limit 0 use
        :func:`greedy_decode`.
    top_k : int, optional
        >= 1: sample only among the k most probable tokens (all V when k >= V).
    rng : numpy.random.Generator or int or None
        The source of randomness, or a seed for ``numpy.random.default_rng``. The same seed,
        batch and model give the same sequences.

    Returns
    -------
    tokens : ndarray of int64, shape (B, max_len)
        As in :func:`greedy_decode`.
    log_prob : ndarray of float64, shape (B,)
        Sum of the *model's* log-probabilities of the drawn tokens (before temperature and
        top-k), i.e. how likely the model itself finds each sequence.

    Raises
    ------
    ValueError
        On ``temperature <= 0`` or not finite, ``top_k < 1``, and as :func:`greedy_decode`.
    TypeError
        As :func:`greedy_decode`, and on a non-integer ``top_k``.
    """
    max_len = check_int("max_len", max_len, 1)
    temperature = _check_real("temperature", temperature, positive=True)
    top_k = None if top_k is None else check_int("top_k", top_k, 1)
    eos_token = _check_optional_token("eos_token", eos_token)
    start = _start_tokens(start_token, state)
    step = _CheckedStep(step_fn, eos_token)
    choose = _sampler(temperature, top_k, np.random.default_rng(rng))
    return _decode(step, state, start, max_len, eos_token, choose)


# ---- beam search ------------------------------------------------------------------------------


def length_normalizer(length, alpha: float):
    """GNMT's length normaliser ``((5 + length) / 6) ** alpha`` (Wu et al., 2016).

    A hypothesis's score is its log-probability divided by this; ``alpha = 0`` leaves it
    unnormalised, larger ``alpha`` favours longer hypotheses. ``length`` counts generated tokens,
    EOS included.
    """
    return ((5.0 + np.asarray(length, np.float64)) / 6.0) ** alpha


def _ranked_top(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k largest entries of every row, best first.

    Ties go to the lower index, so results do not depend on the partition's internal order among
    the kept entries.
    """
    n = scores.shape[1]
    if k < n:
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        top = np.broadcast_to(np.arange(n), scores.shape)
    order = np.lexsort((top, -np.take_along_axis(scores, top, axis=1)), axis=1)
    return np.take_along_axis(top, order, axis=1)


class _Finished:
    """The best ``width`` ended hypotheses of each batch element, sorted by normalised score."""

    def __init__(self, batch: int, width: int, max_len: int, fill: int):
        self.tokens = np.full((batch, width, max_len), fill, np.int64)
        self.norm = np.full((batch, width), -np.inf)

    def add(self, tokens: np.ndarray, raw: np.ndarray, length: int, alpha: float) -> None:
        """Offer hypotheses (B, W, L) of raw log-probability ``raw`` (B, W; -inf for none)."""
        norm = np.concatenate([self.norm, raw / length_normalizer(length, alpha)], axis=1)
        # Earlier hypotheses come first in the concatenation, so they win ties.
        keep = _ranked_top(norm, self.norm.shape[1])
        self.norm = np.take_along_axis(norm, keep, axis=1)
        both = np.concatenate([self.tokens, tokens], axis=1)
        self.tokens = np.take_along_axis(both, keep[:, :, None], axis=1)


def _search_done(alive: np.ndarray, finished: _Finished, length: int, max_len: int, alpha, keep):
    """Whether no live hypothesis can still displace the ``keep`` best ended ones of any element.

    A hypothesis's raw log-probability only falls as it grows, so the best normalised score it can
    ever reach is its raw score now over the largest normaliser of a length it can still end at.
    """
    reach = max(length_normalizer(length + 1, alpha), length_normalizer(max_len, alpha))
    bound = alive.max(axis=1) / reach
    return bool(np.all(finished.norm[:, keep - 1] >= bound))


def _final_ranking(finished: _Finished, alive_tokens, alive_scores, length, alpha, fill):
    """Ended hypotheses by normalised score, then unended ones (only to fill empty places)."""
    alive_norm = alive_scores / length_normalizer(length, alpha)
    norm = np.concatenate([finished.norm, alive_norm], axis=1)
    width = finished.norm.shape[1]
    group = np.concatenate([np.zeros_like(finished.norm), np.ones_like(alive_norm)], axis=1)
    group[norm == -np.inf] = 2
    order = np.lexsort((-norm, group), axis=1)[:, :width]
    tokens = np.concatenate([finished.tokens, alive_tokens], axis=1)
    tokens = np.take_along_axis(tokens, order[:, :, None], axis=1)
    norm = np.take_along_axis(norm, order, axis=1)
    tokens[norm == -np.inf] = fill
    return tokens, norm


def beam_search(
    step_fn: StepFn,
    state,
    start_token,
    max_len: int,
    beam_width: int,
    eos_token=None,
    length_penalty: float = 1.0,
    return_all: bool = False,
    reorder: ReorderFn | None = None,
):
    """Decode a batch by beam search, keeping ``beam_width`` hypotheses per batch element.

    At every step each live hypothesis is extended by every token; of the resulting candidates of
    a batch element, the ``beam_width`` best by log-probability are selected. Selected candidates
    that end with ``eos_token`` are set aside as ended; the ``beam_width`` best candidates that do
    not end with it stay live. Ended hypotheses compete by their normalised score
    ``log_prob / length_normalizer(length, length_penalty)``. The search stops at ``max_len``, or
    earlier once no live hypothesis of any element can still beat the ended ones returned.
    With ``beam_width = 1`` and ``length_penalty = 0`` this is :func:`greedy_decode`.

    One ``step_fn`` call per step serves all B * beam_width hypotheses, with N = B * beam_width
    rows ordered element-major (row ``b * beam_width + k`` is hypothesis k of element b).

    Parameters
    ----------
    step_fn, state, start_token, max_len, eos_token
        As in :func:`greedy_decode`.
    beam_width : int
        Hypotheses kept per batch element, >= 1. The search is exhaustive (finds the highest
        scoring sequence) once ``beam_width`` is at least the number of candidates of a step,
        V ** max_len at most.
    length_penalty : float
        GNMT's alpha, see :func:`length_normalizer`; 0 ranks by plain log-probability.
    return_all : bool
        Return all ``beam_width`` hypotheses of each element, best first, not only the best.
    reorder : callable, optional
        ``reorder(state, index) -> state`` selecting rows ``index`` (int64 (M,)) of the batch of
        the state, repeats allowed. Default: :func:`default_reorder` (ndarrays, batch on axis -2).

    Returns
    -------
    tokens : ndarray of int64, shape (B, max_len), or (B, beam_width, max_len) with return_all
        After a hypothesis's EOS, ``eos_token``.
    scores : ndarray of float64, shape (B,), or (B, beam_width) with return_all
        Normalised scores. With ``eos_token``, only hypotheses that ended compete; when fewer
        than the places returned ended within ``max_len``, the best unended ones (length
        ``max_len``) fill the rest. Places with no hypothesis at all (beam_width larger than the
        number of sequences) have score -inf and tokens ``eos_token`` (0 without one).

    Raises
    ------
    ValueError
        On ``beam_width < 1``, a non-finite ``length_penalty``, a state whose batch is not B, and
        as :func:`greedy_decode`.
    TypeError
        As :func:`greedy_decode`, and on a state :func:`default_reorder` cannot handle.
    """
    max_len = check_int("max_len", max_len, 1)
    width = check_int("beam_width", beam_width, 1)
    eos_token = _check_optional_token("eos_token", eos_token)
    alpha = _check_real("length_penalty", length_penalty, positive=False)
    start = _start_tokens(start_token, state)
    batch = start.shape[0]
    if reorder is None:
        _check_state_batch(state, batch)
        reorder = default_reorder
    step = _CheckedStep(step_fn, eos_token)
    fill = 0 if eos_token is None else eos_token

    # Each element starts as `width` copies of itself; all but the first score -inf so that the
    # first step does not select the same extension `width` times.
    state = reorder(state, np.repeat(np.arange(batch), width))
    prev = np.repeat(start, width)
    alive_scores = np.full((batch, width), -np.inf)
    alive_scores[:, 0] = 0.0
    alive_tokens = np.full((batch, width, max_len), fill, np.int64)
    finished = _Finished(batch, width, max_len, fill)
    keep = width if return_all else 1
    rows = np.arange(batch)[:, None] * width

    for t in range(max_len):
        log_probs, state = step(prev, state)
        vocab = log_probs.shape[1]
        cand = (alive_scores[:, :, None] + log_probs.reshape(batch, width, vocab)).reshape(
            batch, -1
        )
        if eos_token is not None:
            selected = _ranked_top(cand, width)
            ends = selected % vocab == eos_token
            raw = np.where(ends, np.take_along_axis(cand, selected, axis=1), -np.inf)
            # Column t of a live hypothesis still holds the fill (EOS): it is the EOS just chosen.
            origin = np.take_along_axis(alive_tokens, (selected // vocab)[:, :, None], axis=1)
            finished.add(origin, raw, t + 1, alpha)
            cand[:, eos_token::vocab] = -np.inf
        chosen = _ranked_top(cand, width)
        alive_scores = np.take_along_axis(cand, chosen, axis=1)
        beam = chosen // vocab
        alive_tokens = np.take_along_axis(alive_tokens, beam[:, :, None], axis=1)
        alive_tokens[:, :, t] = chosen % vocab
        if t + 1 == max_len:
            break
        if eos_token is not None and _search_done(
            alive_scores, finished, t + 1, max_len, alpha, keep
        ):
            break
        state = reorder(state, (rows + beam).ravel())
        prev = (chosen % vocab).ravel()

    tokens, scores = _final_ranking(finished, alive_tokens, alive_scores, t + 1, alpha, fill)
    return (tokens, scores) if return_all else (tokens[:, 0], scores[:, 0])


# ---- helpers ----------------------------------------------------------------------------------


def sequence_lengths(tokens, eos_token) -> np.ndarray:
    """Length of each decoded sequence, its EOS included.

    Parameters
    ----------
    tokens : array_like of int, shape (..., L)
        Decoded tokens, as returned by the functions of this module.
    eos_token : int or None
        With None every sequence has length L.

    Returns
    -------
    lengths : ndarray of int64, shape (...)
        Position of the first ``eos_token`` plus one, or L where there is none.
    """
    tokens = np.asarray(tokens)
    length = tokens.shape[-1]
    if eos_token is None:
        return np.full(tokens.shape[:-1], length, np.int64)
    is_eos = tokens == eos_token
    return np.where(is_eos.any(axis=-1), is_eos.argmax(axis=-1) + 1, length).astype(np.int64)
