"""Losses and metrics over padded batches: the loss with the padding left out and the positions
it counted, metric sums over a whole data set (corpus figures, not means of batch fractions),
the loss and metrics of a model over batches in eval mode, and the sequence-level reward of
self-critical training (sentence BLEU over token ids)."""

from __future__ import annotations

import math

import numpy as np

from .. import losses as _losses
from .. import metrics as _metrics
from ._batches import eval_batches

__all__ = ["Metrics", "call_loss", "resolve_loss", "resolve_reward", "score", "sentence_bleu"]

_LOSSES = {"mse": _losses.mse_loss, "cross_entropy": _losses.cross_entropy}
_METRICS = {"accuracy": _metrics.accuracy, "perplexity": _metrics.perplexity}
_BUILTIN_LOSSES = (_losses.mse_loss, _losses.cross_entropy)


def _resolve(name_or_fn, table, what):
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in table:
        raise ValueError(
            f"{what}: expected one of {sorted(table)} or a callable, got {name_or_fn!r}"
        )
    return table[name_or_fn]


def resolve_loss(loss):
    """The loss function of ``"mse"``, ``"cross_entropy"`` or a callable."""
    return _resolve(loss, _LOSSES, "loss")


def _same_leading(valid, yb):
    """``valid``, or None for per-sequence targets of a padded batch (nothing to leave out)."""
    if valid is not None and valid.shape != np.shape(yb)[: valid.ndim]:
        return None
    return valid


def call_loss(loss_fn, out, yb, valid, reduction="mean"):
    """``(value, d_out, counted)``: the loss with the padding left out, and how many positions
    (or elements, for mse) it counted."""
    valid = _same_leading(valid, yb)
    kwargs = {} if valid is None else {"mask": valid}
    if loss_fn in _BUILTIN_LOSSES:
        value, d_out = loss_fn(out, yb, reduction=reduction, **kwargs)
        if loss_fn is _losses.mse_loss:
            counted = (
                np.size(out)
                if valid is None
                else int(valid.sum()) * (np.size(out) // max(valid.size, 1))
            )
        else:
            counted = np.size(yb) if valid is None else int(valid.sum())
    else:
        value, d_out = loss_fn(out, yb, **kwargs)
        counted = len(yb) if valid is None else int(valid.sum())
        if reduction == "sum":
            value = value * counted
    return value, d_out, counted


class Metrics:
    """Metrics summed over every batch of a data set: the built-in ones as counts (so the
    result is the corpus figure, not a mean of batch fractions), a callable of the user's as
    its per-batch value weighted by the positions the batch counts. Built from names that are
    not metrics, it raises (so fit checks them before any training)."""

    def __init__(self, metrics):
        self.fns = {
            m if isinstance(m, str) else m.__name__: _resolve(m, _METRICS, "metrics")
            for m in metrics
        }
        self.sums = {name: [0.0, 0] for name in self.fns}

    def add(self, out, yb, valid):
        valid = _same_leading(valid, yb)
        for name, fn in self.fns.items():
            if fn is _metrics.accuracy:
                hits, counted = _metrics.accuracy_counts(out, yb, mask=valid)
            elif fn is _metrics.perplexity:
                hits, _, counted = call_loss(_losses.cross_entropy, out, yb, valid, "sum")
            else:
                counted = len(yb) if valid is None else int(valid.sum())
                hits = fn(out, yb) if valid is None else fn(out, yb, mask=valid)
                hits = hits * counted
            self.sums[name][0] += hits
            self.sums[name][1] += counted

    def results(self, reduce=None):
        """``{name: figure}``. ``reduce``: a function that sums an array over processes
        (data-parallel training's), applied to the sums first."""
        if reduce is not None and self.sums:
            names = list(self.sums)
            for name, (total, counted) in zip(names, reduce([self.sums[k] for k in names])):
                self.sums[name] = [float(total), float(counted)]
        out = {}
        for name, (total, counted) in self.sums.items():
            mean = total / counted if counted else math.nan
            out[name] = math.exp(mean) if self.fns[name] is _metrics.perplexity else mean
        return out


def score(model, data, order, *, loss_fn, metrics, batch_size, reduce=None):
    """``{"loss": ..., <metric>: ...}`` of ``model`` in eval mode over the items ``order`` of
    ``data``, padding left out: the loss the mean over every counted position, the metrics
    corpus figures. ``reduce``: sums the figures over processes first (see Metrics.results)."""
    totals = Metrics(metrics)
    total, counted_total = 0.0, 0
    for _, out, yb, valid in eval_batches(model, data, order, batch_size):
        value, _, counted = call_loss(loss_fn, out, yb, valid, "sum")
        total += value
        counted_total += counted
        totals.add(out, yb, valid)
    if reduce is not None:
        total, counted_total = reduce([total, counted_total])
    return {"loss": total / max(counted_total, 1), **totals.results(reduce)}


# ---- sequence-level rewards ---------------------------------------------------------------------


def sentence_bleu(hypothesis, reference):
    """Sentence BLEU of one token sequence against one reference, in [0, 1]: sacrebleu's
    ``sentence_bleu`` over the ids joined by spaces (``tokenize="none"``: each id one word),
    with exponential smoothing (``smooth_method="exp"``) so that a short hypothesis without
    a matching 4-gram still scores above 0; sacrebleu's 0..100 score divided by 100.

    Parameters
    ----------
    hypothesis, reference : sequences of int
        Token ids, without the start and end tokens.

    Returns
    -------
    float

    Raises
    ------
    ImportError
        sacrebleu is not installed (``pip install rnnfast[bleu]``).
    """
    try:
        import sacrebleu
    except ImportError as error:
        raise ImportError(
            "sentence_bleu: needs sacrebleu (pip install 'rnnfast[bleu]', or pass "
            "reward=<callable(hypothesis, reference) -> float>)"
        ) from error
    hyp = " ".join(str(int(t)) for t in hypothesis)
    ref = " ".join(str(int(t)) for t in reference)
    return sacrebleu.sentence_bleu(hyp, [ref], tokenize="none", smooth_method="exp").score / 100.0


def resolve_reward(reward):
    """The reward function of ``"bleu"`` (:func:`sentence_bleu`) or a callable
    ``reward(hypothesis, reference) -> float``."""
    return _resolve(reward, {"bleu": sentence_bleu}, "reward")
