"""Metrics: accuracy and perplexity, with the losses' padding rules."""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_int_array
from .losses import _counted_positions, cross_entropy

__all__ = ["accuracy", "accuracy_counts", "perplexity"]


def accuracy(logits, targets, *, lengths=None, mask=None, ignore_index=None, batch_first=False):
    """Fraction of counted positions whose arg-max logit is the target (nan when none counts).
    Over several batches, sum :func:`accuracy_counts` instead of averaging fractions."""
    hits, count = accuracy_counts(
        logits,
        targets,
        lengths=lengths,
        mask=mask,
        ignore_index=ignore_index,
        batch_first=batch_first,
    )
    return hits / count if count else math.nan


def accuracy_counts(
    logits, targets, *, lengths=None, mask=None, ignore_index=None, batch_first=False
):
    """``(hits, counted)``: how many counted positions the arg-max logit gets right, and how
    many positions count; summed over batches they give the corpus accuracy."""
    logits = np.asarray(logits)
    targets = check_int_array("targets", targets)
    if logits.ndim < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"targets: expected shape {logits.shape[:-1]} (the logits' leading "
            f"shape), got shape {targets.shape}"
        )
    valid = _counted_positions(targets, lengths, mask, ignore_index, batch_first)
    hits = np.argmax(logits, axis=-1) == targets
    return int(np.sum(hits & valid)), int(valid.sum())


def perplexity(logits, targets, **kwargs):
    """exp of the mean token cross-entropy (the same keyword arguments as cross_entropy)."""
    loss, _ = cross_entropy(logits, targets, reduction="mean", **kwargs)
    return math.exp(loss)
